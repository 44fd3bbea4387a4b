'use strict';
// The loaded libraries as this package sees them: libpackedfunc, found as
// the Python package finds it, and the package's C helper (src/pfnode.c),
// with every entry point the package calls declared once, here, in the
// order of include/packedfunc/c_api.h. At load the library's version, its
// API table and the sizes of its structs are checked against what this
// package was written against, and the numbers of its type codes and object
// types are read from it: nothing here restates a number the library can
// report. Everything here is private.
//
// The package may be evaluated more than once in one process: in worker
// threads, by test runners that evaluate modules once per test file, and
// as two installed copies. Every evaluation shares the one runtime (so one
// registry, as Python's does): a libpackedfunc already loaded in the
// process is used, never a second copy; and the koffi types declared here
// are anonymous, so that a second evaluation over the same koffi declares
// them again without a clash.

const fs = require('node:fs');
const path = require('node:path');
// One koffi for every evaluation of the package in a thread: a callback of
// one koffi cannot run inside a call made through another (it would run
// JavaScript on that koffi's own stack), so a call through one evaluation
// that reaches a function of another needs both on the same koffi. The
// first evaluation leaves its koffi on a built-in module's object, which
// every later one in the thread sees (Jest's sandboxes included); a koffi
// of another major version is not shared.
const KOFFI_KEY = Symbol.for('packedfunc.koffi');
const koffiHolder = require('node:module');
const KOFFI_MAJOR = require('../package.json').dependencies.koffi.split('.')[0];
const koffi = koffiHolder[KOFFI_KEY]?.version?.split('.')[0] === KOFFI_MAJOR
  ? koffiHolder[KOFFI_KEY] : require('koffi');
if (koffiHolder[KOFFI_KEY] === undefined) koffiHolder[KOFFI_KEY] = koffi;

const LIB_FILES = ['libpackedfunc.so.0', 'libpackedfunc.so'];
const HELPER_FILE = 'libpfnode.so';
const PKG_DIR = path.resolve(__dirname, '..');
const ROOT = path.resolve(PKG_DIR, '..', '..');

// What this package was written against: the library's major version and
// the API table version that has every entry point declared below.
const EXPECTED_MAJOR = 0;
const EXPECTED_API_VERSION = 9;
// The layout version of the helper's shared memory (PFNODE_ABI).
const HELPER_ABI = 5;

function buildDirs() {
  const dirs = [];
  if (process.env.BUILD) dirs.push(path.resolve(ROOT, process.env.BUILD));
  dirs.push(path.join(ROOT, 'build'));
  return dirs;
}

// (where, path) candidates in lookup order: $ENV, beside the package, the
// source tree's build output. An explicit choice is never second-guessed.
function candidates(envName, besidePackage, inBuild) {
  const env = process.env[envName];
  if (env) return [[`$${envName}`, env]];
  const out = besidePackage.map((f) => ['beside the package', path.join(PKG_DIR, 'lib', 'native', f)]);
  for (const dir of buildDirs()) {
    for (const f of inBuild) out.push(["the source tree's build output", path.join(dir, f)]);
  }
  return out;
}

function loadFirst(what, list, hint) {
  const tried = [];
  for (const [where, file] of list) {
    if (!fs.existsSync(file)) {
      tried.push(`  ${where}: ${file} (not found)`);
      continue;
    }
    try {
      return { path: file, lib: koffi.load(file, { global: true }) };
    } catch (err) {
      tried.push(`  ${where}: ${file} (${err.message})`);
    }
  }
  throw new Error(`packedfunc: cannot find ${what}. Looked in:\n${tried.join('\n')}\n${hint}`);
}

// The file of the libpackedfunc this process has loaded already (by
// another evaluation or copy of the package, or by C code), or null: the
// process's memory map names it.
function loadedLibrary() {
  let maps;
  try {
    maps = fs.readFileSync('/proc/self/maps', 'utf8');
  } catch {
    return null;
  }
  for (const line of maps.split('\n')) {
    const at = line.indexOf('/');
    if (at >= 0 && /^libpackedfunc\.so(\.[0-9]+)*$/.test(path.basename(line.slice(at)))) return line.slice(at);
  }
  return null;
}

function sameFile(a, b) {
  try {
    const sa = fs.statSync(a);
    const sb = fs.statSync(b);
    return sa.dev === sb.dev && sa.ino === sb.ino;
  } catch {
    return false;
  }
}

// The library: the one the process has, else the first candidate. Two
// copies of the runtime in one process would have two registries, and the
// helper would bind to the first: an explicit choice of another file is
// refused with the reason.
function loadLibrary(list, hint) {
  const loaded = loadedLibrary();
  if (loaded === null) return loadFirst('the shared library libpackedfunc.so.0', list, hint);
  const env = process.env.PACKEDFUNC_LIBRARY;
  if (env && !sameFile(env, loaded)) {
    throw new Error(`packedfunc: PACKEDFUNC_LIBRARY names ${env}, but this process has already loaded ` +
      `${loaded}, and one process can use only one copy of the runtime (a second copy would have a ` +
      'registry of its own): unset PACKEDFUNC_LIBRARY, or name that file');
  }
  return loadFirst('the shared library libpackedfunc.so.0', [['already loaded in this process', loaded]], hint);
}

const HINT = 'Build it with `make node` at the root of the packedfunc source tree (which also ' +
  'copies it beside the package), or set PACKEDFUNC_LIBRARY to the library\'s path.';
const core = loadLibrary(
  candidates('PACKEDFUNC_LIBRARY', LIB_FILES, LIB_FILES.map((f) => path.join('lib', f))), HINT);
const helper = loadFirst(`the package's C helper ${HELPER_FILE}`,
  candidates('PACKEDFUNC_NODE_HELPER', [HELPER_FILE], [path.join('node', HELPER_FILE)]),
  'Build it with `make node`, or set PACKEDFUNC_NODE_HELPER to its path.');

const L = core.lib;
const H = helper.lib;

// Handles and addresses cross as intptr_t: koffi gives and takes them as
// plain numbers (user-space addresses fit in 53 bits), cheaper than the
// BigInts of its pointer types.
const P = 'intptr_t';

const api = {
  // ---- versions, sizes, names ----
  PFGetVersion: L.func('int PFGetVersion(_Out_ int* major, _Out_ int* minor, _Out_ int* patch)'),
  PFGetStructSize: L.func('int PFGetStructSize(const char* name, _Out_ size_t* out)'),
  PFGetApiBase: L.func(`${P} PFGetApiBase()`),
  PFTypeCodeName: L.func('const char* PFTypeCodeName(int code)'),
  PFObjectTypeName: L.func('const char* PFObjectTypeName(uint32_t index)'),
  // ---- errors ----
  PFErrorSet: L.func('void PFErrorSet(const char* kind, const char* msg)'),
  PFErrorAppendTraceback: L.func('void PFErrorAppendTraceback(const char* line)'),
  PFErrorGetKind: L.func('const char* PFErrorGetKind()'),
  PFErrorGetMessage: L.func('const char* PFErrorGetMessage()'),
  PFErrorGetTraceback: L.func('const char* PFErrorGetTraceback()'),
  PFErrorClear: L.func('void PFErrorClear()'),
  // ---- memory ----
  PFMemAlloc: L.func(`${P} PFMemAlloc(size_t size)`),
  PFMemFree: L.func(`void PFMemFree(${P} ptr)`),
  // The C library's, found through libpackedfunc's dependencies: a C
  // string's length before it becomes a JavaScript string.
  strlen: L.func(`size_t strlen(${P} s)`),
  // ---- data types ----
  PFDataTypeFromString: L.func(`int PFDataTypeFromString(const char* text, ${P} out)`),
  PFDataTypeToString: L.func(`int PFDataTypeToString(uint32_t dtype, ${P} buf, size_t size)`),
  // ---- objects, tensors ----
  PFObjectRetain: L.func(`int PFObjectRetain(${P} obj)`),
  PFObjectFree: L.func(`int PFObjectFree(${P} obj)`),
  PFObjectGetTypeIndex: L.func(`int PFObjectGetTypeIndex(${P} obj, ${P} out)`),
  PFTensorGetDLTensor: L.func(`int PFTensorGetDLTensor(${P} obj, ${P} out)`),
  PFTensorCreateFromDLPack: L.func(`int PFTensorCreateFromDLPack(${P} managed, ${P} out)`),
  // ---- containers ----
  PFArrayCreate: L.func(`int PFArrayCreate(${P} values, ${P} codes, int64_t n, ${P} out)`),
  PFArrayGetSize: L.func(`int PFArrayGetSize(${P} array, ${P} out)`),
  PFArrayGetItem: L.func(`int PFArrayGetItem(${P} array, int64_t i, ${P} value, ${P} code)`),
  PFMapCreate: L.func(`int PFMapCreate(${P} keys, ${P} key_codes, ${P} values, ${P} value_codes, int64_t n, ${P} out)`),
  PFMapGetSize: L.func(`int PFMapGetSize(${P} map, ${P} out)`),
  // A PFValue passed by value is its 8 bytes, as the x86-64 and AArch64
  // ABIs pass the union: a uint64.
  PFMapGetItem: L.func(`int PFMapGetItem(${P} map, uint64_t key, int key_code, ${P} value, ${P} code, ${P} found)`),
  PFMapGetItemAt: L.func(`int PFMapGetItemAt(${P} map, int64_t i, ${P} key, ${P} key_code, ${P} value, ${P} code)`),
  PFShapeCreate: L.func(`int PFShapeCreate(${P} dims, int64_t ndim, ${P} out)`),
  PFShapeGetData: L.func(`int PFShapeGetData(${P} shape, ${P} dims, ${P} ndim)`),
  PFListCreate: L.func(`int PFListCreate(${P} values, ${P} codes, int64_t n, ${P} out)`),
  PFListGetSize: L.func(`int PFListGetSize(${P} list, ${P} out)`),
  PFListGetItem: L.func(`int PFListGetItem(${P} list, int64_t i, ${P} value, ${P} code)`),
  PFListSetItem: L.func(`int PFListSetItem(${P} list, int64_t i, uint64_t value, int code)`),
  PFListAppend: L.func(`int PFListAppend(${P} list, uint64_t value, int code)`),
  PFListInsert: L.func(`int PFListInsert(${P} list, int64_t i, uint64_t value, int code)`),
  PFListPop: L.func(`int PFListPop(${P} list, int64_t i, ${P} value, ${P} code)`),
  PFListClear: L.func(`int PFListClear(${P} list)`),
  PFDictCreate: L.func(`int PFDictCreate(${P} keys, ${P} key_codes, ${P} values, ${P} value_codes, int64_t n, ${P} out)`),
  PFDictGetSize: L.func(`int PFDictGetSize(${P} dict, ${P} out)`),
  PFDictGetItem: L.func(`int PFDictGetItem(${P} dict, uint64_t key, int key_code, ${P} value, ${P} code, ${P} found)`),
  PFDictSetItem: L.func(`int PFDictSetItem(${P} dict, uint64_t key, int key_code, uint64_t value, int code)`),
  PFDictPop: L.func(`int PFDictPop(${P} dict, uint64_t key, int key_code, ${P} value, ${P} code)`),
  PFDictClear: L.func(`int PFDictClear(${P} dict)`),
  PFDictToArray: L.func(`int PFDictToArray(${P} dict, ${P} out)`),
  // ---- functions ----
  PFFuncResolve: L.func(`int PFFuncResolve(${P} func, ${P} out)`),
  PFFuncFree: L.func(`int PFFuncFree(${P} func)`),
  PFFuncSetInfo: L.func(`int PFFuncSetInfo(${P} func, const char* name, const char* signature, const char* doc)`),
  PFFuncGetInfo: L.func(`int PFFuncGetInfo(${P} func, ${P} name, ${P} signature, ${P} doc)`),
  PFFuncGetSignatureInfo: L.func(`int PFFuncGetSignatureInfo(${P} func, ${P} out)`),
  // ---- registry ----
  PFFuncRegisterGlobalEx: L.func(`int PFFuncRegisterGlobalEx(const char* name, ${P} func, int flags)`),
  PFFuncGetGlobal: L.func(`int PFFuncGetGlobal(const char* name, ${P} out)`),
  PFFuncRemoveGlobal: L.func('int PFFuncRemoveGlobal(const char* name)'),
  PFFuncListGlobalNamesWithPrefix: L.func(`int PFFuncListGlobalNamesWithPrefix(const char* prefix, ${P} size, ${P} array)`),
  // ---- host functions ----
  PFHostGateCreate: L.func(`int PFHostGateCreate(${P} out)`),
  PFHostGateClose: L.func(`int PFHostGateClose(${P} gate, const char* message, int timeout_ms)`),
  PFFuncCreateFromHostCFunc: L.func(`int PFFuncCreateFromHostCFunc(${P} gate, ${P} func, ${P} resource, ${P} fin, ${P} out)`),
  // ---- object types ----
  PFObjectTypeFind: L.func(`int PFObjectTypeFind(const char* key, ${P} out)`),
  PFObjectTypeGetInfo: L.func(`int PFObjectTypeGetInfo(uint32_t index, ${P} out)`),
  PFObjectTypeGetMethod: L.func(`int PFObjectTypeGetMethod(uint32_t index, const char* name, ${P} out)`),
  PFObjectTypeGetConstructor: L.func(`int PFObjectTypeGetConstructor(uint32_t index, ${P} out)`),
  PFObjectGetField: L.func(`int PFObjectGetField(${P} obj, ${P} field, ${P} out, ${P} code)`),
  PFObjectSetField: L.func(`int PFObjectSetField(${P} obj, ${P} field, uint64_t value, int code)`),
  // ---- serialization ----
  PFToJSON: L.func(`int PFToJSON(uint64_t value, int code, ${P} out, ${P} out_len)`),
  PFFromJSON: L.func(`int PFFromJSON(${P} text, size_t len, ${P} out, ${P} out_code)`),
  // ---- modules ----
  PFModLoadFromFile: L.func(`int PFModLoadFromFile(const char* path, ${P} out)`),
  PFModGetFunction: L.func(`int PFModGetFunction(${P} mod, const char* name, int query_imports, ${P} out)`),
  PFModListFunctionNames: L.func(`int PFModListFunctionNames(${P} mod, ${P} size, ${P} array)`),
  PFModExportGlobal: L.func(`int PFModExportGlobal(${P} mod, const char* prefix, int flags)`),
  PFModListTypes: L.func(`int PFModListTypes(${P} mod, ${P} size, ${P} array)`),
};

// The helper: callbacks from any thread (see src/pfnode.c).
// Every entry point but the first three takes this evaluation's env (an
// address, see pfnode_init).
const JsCall = koffi.proto('int32_t (int32_t slot)');
const JsRelease = koffi.proto('void (int64_t key)');
const helperApi = {
  abi: H.func('int32_t pfnode_abi()'),
  init: H.func('pfnode_init', P, [koffi.pointer(JsCall), koffi.pointer(JsRelease), P]),
  wakeFd: H.func(`int32_t pfnode_wake_fd(${P} env)`),
  serve: H.func(`int32_t pfnode_serve(${P} env)`),
  funcCreate: H.func(`int pfnode_func_create(${P} env, int64_t key, ${P} out)`),
  slots: H.func(`${P} pfnode_slots(${P} env)`),
  slotSize: H.func('int32_t pfnode_slot_size()'),
  maxDepth: H.func('int32_t pfnode_max_depth()'),
  shared: H.func(`${P} pfnode_shared_state(${P} env)`),
  tensorCreate: H.func(`int pfnode_tensor_create(${P} env, int64_t key, ${P} spec, ${P} out)`),
  setTimeout: H.func(`int32_t pfnode_set_timeout_ms(${P} env, int32_t ms)`),
  shutdown: H.func(`void pfnode_shutdown(${P} env, const char* message)`),
  call: H.func(`void pfnode_call(${P} frame)`),
  asyncSize: H.func('int32_t pfnode_async_size()'),
  callAsync: H.func(`int32_t pfnode_call_async(${P} a)`),
  asyncClear: H.func(`void pfnode_async_clear(${P} a)`),
};

// ---- memory shared with C -----------------------------------------------------

// A block of C memory (the runtime's allocator) seen from JavaScript: its
// address and typed-array views over it. Never freed: the package keeps
// its blocks for the life of the process.
class Block {
  constructor(addr, size, buf = koffi.view(addr, size)) {
    this.addr = addr;
    this.size = size;
    this.buf = buf;
    this.u8 = new Uint8Array(buf);
    this.i32 = new Int32Array(buf);
    this.u32 = new Uint32Array(buf);
    this.f64 = new Float64Array(buf);
    this.i64 = new BigInt64Array(buf);
    this.u64 = new BigUint64Array(buf);
    this.u16 = new Uint16Array(buf);
  }
}

function allocBlock(size) {
  size = (size + 7) & ~7;
  const addr = api.PFMemAlloc(size);
  if (!addr) throw new Error(`packedfunc: cannot allocate ${size} bytes`);
  return new Block(addr, size);
}

// A scratch block for the outputs of short calls that run no user code:
// each use writes and reads it within one synchronous stretch.
const scratch = allocBlock(4096);

// ---- checks ------------------------------------------------------------------

function checkLibrary() {
  const major = [0];
  const minor = [0];
  const patch = [0];
  api.PFGetVersion(major, minor, patch);
  const version = `${major[0]}.${minor[0]}.${patch[0]}`;
  if (major[0] !== EXPECTED_MAJOR) {
    throw new Error(`packedfunc: ${core.path} is version ${version}, but this Node.js package ` +
      `needs major version ${EXPECTED_MAJOR}`);
  }
  const base = api.PFGetApiBase();
  const getApi = koffi.decode(koffi.decode.uint64(base), koffi.proto(`${P} (uint32_t)`));
  if (!getApi(EXPECTED_API_VERSION)) {
    throw new Error(`packedfunc: ${core.path} does not provide API version ${EXPECTED_API_VERSION}: ` +
      `${api.PFErrorGetMessage()}`);
  }
  return version;
}

// The structs whose layout the package relies on: its koffi mirrors (for
// those it decodes with koffi) or its own offsets (for those it reads
// through typed arrays), against the sizes the library reports.
const DLDataType = koffi.struct({ code: 'uint8_t', bits: 'uint8_t', lanes: 'uint16_t' });
const DLDevice = koffi.struct({ device_type: 'int32_t', device_id: 'int32_t' });
const DLTensor = koffi.struct({
  data: P, device: DLDevice, ndim: 'int32_t', dtype: DLDataType,
  shape: P, strides: P, byte_offset: 'uint64_t',
});
const DLManagedTensor = koffi.struct({ dl_tensor: DLTensor, manager_ctx: P, deleter: P });
const PFFieldInfo = koffi.struct({
  name: 'const char*', type: 'const char*', doc: 'const char*',
  offset: 'size_t', size: 'size_t', flags: 'uint32_t', type_index: 'uint32_t',
});
const PFMethodInfo = koffi.struct({
  name: 'const char*', signature: 'const char*', doc: 'const char*',
  flags: 'uint32_t', type_index: 'uint32_t',
});
const PFObjectTypeInfo = koffi.struct({
  key: 'const char*', doc: 'const char*', type_index: 'uint32_t', parent_index: 'uint32_t',
  depth: 'int32_t', num_fields: 'int32_t', num_methods: 'int32_t', instance_size: 'size_t',
  fields: P, methods: P, init: P,
});

// Sizes the package lays out by hand (the call frame, a PFValue, ...).
const SIZES = {
  PFValue: 8, PFByteArray: 16, PFCallFrame: 40,
  DLDataType: koffi.sizeof(DLDataType), DLDevice: koffi.sizeof(DLDevice),
  DLTensor: koffi.sizeof(DLTensor), DLManagedTensor: koffi.sizeof(DLManagedTensor),
  PFObjectTypeInfo: koffi.sizeof(PFObjectTypeInfo), PFFieldInfo: koffi.sizeof(PFFieldInfo),
  PFMethodInfo: koffi.sizeof(PFMethodInfo),
};

function checkSizes() {
  for (const [name, mine] of Object.entries(SIZES)) {
    const out = [0];
    if (api.PFGetStructSize(name, out) !== 0) {
      throw new Error(`packedfunc: ${core.path} cannot report the size of ${name}: ${api.PFErrorGetMessage()}`);
    }
    if (Number(out[0]) !== mine) {
      throw new Error(`packedfunc: struct ${name} is ${out[0]} bytes in ${core.path} but ${mine} ` +
        'bytes in the Node.js package; the package and the library do not match');
    }
  }
}

// name -> number for every number the library names; an Error when one of
// the `needed` names is missing.
function names(lookup, from, to, needed, what) {
  const found = Object.create(null);
  for (let i = from; i < to; i++) {
    const name = lookup(i);
    if (name != null && name !== 'ext') found[name] = i;
  }
  const missing = needed.filter((n) => !(n in found));
  if (missing.length) throw new Error(`packedfunc: ${core.path} lacks the ${what} ${missing.join(', ')}`);
  return found;
}

const VERSION = checkLibrary();
checkSizes();

// Type codes by name ("int" -> 0), from the library's list; the extension
// range begins at 64 (kPFExtBegin).
const TYPE_CODES = names(api.PFTypeCodeName, 0, 64,
  ['int', 'float', 'bool', 'null', 'handle', 'dtype', 'device', 'tensor', 'str', 'bytes',
    'function', 'module', 'object'], 'type codes');
const TYPE_CODE_NAMES = Object.fromEntries(Object.entries(TYPE_CODES).map(([k, v]) => [v, k]));
// Object type indices by name ("function" -> 1), built-in types only
// (registered types start at kPFObjectTypeRegisteredBegin, 1024).
const OBJECT_TYPES = names(api.PFObjectTypeName, 1, 64,
  ['function', 'module', 'tensor', 'array', 'map', 'shape', 'list', 'dict'], 'object types');
const REGISTERED_BEGIN = 1024;

if (helperApi.abi() !== HELPER_ABI || helperApi.slotSize() !== 256) {
  throw new Error(`packedfunc: the C helper ${helper.path} does not match this package (layout version ` +
    `${helperApi.abi()}, this package's ${HELPER_ABI})`);
}

module.exports = {
  koffi, api, helperApi, JsCall, JsRelease, Block, allocBlock, scratch,
  DLTensor, DLManagedTensor, PFObjectTypeInfo, PFFieldInfo, PFMethodInfo,
  TYPE_CODES, TYPE_CODE_NAMES, OBJECT_TYPES, REGISTERED_BEGIN, HELPER_ABI,
  VERSION, LIB_PATH: core.path, HELPER_PATH: helper.path, PKG_DIR,
};
