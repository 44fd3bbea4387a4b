'use strict';
// The global registry and modules: functions by name, from JavaScript.
// Names are strings in JavaScript and UTF-8 in C. Everything here is
// private; index.js re-exports these functions.

const { koffi, api, scratch } = require('./library.js');
const { checkCall, lastError, FunctionNotFoundError, nameArg } = require('./errors.js');
const core = require('./core.js');

const REGISTER_OVERRIDE = 1; // kPFRegisterOverride
const REGISTER_PROTECTED = 2; // kPFRegisterProtected

// The global function registered under `name`, as a callable
// PackedFunction; a FunctionNotFoundError naming it when missing (null
// with allowMissing). The function holds its own reference: it stays
// valid if the name is later removed or overridden.
function getGlobalFunc(name, { allowMissing = false } = {}) {
  checkCall(api.PFFuncGetGlobal(nameArg('getGlobalFunc', name), scratch.addr));
  const h = core.readPtr(scratch, 0);
  if (!h) {
    if (allowMissing) return null;
    throw new FunctionNotFoundError(`packedfunc: no global function named '${name}'`);
  }
  const f = core.adoptFunction(h);
  f[core.kState].lookedUp = name;
  return f;
}

// Registers a JavaScript function (or a PackedFunction) under `name`, so
// that C finds it with PFFuncGetGlobal. A JavaScript function's packed
// function carries the name as metadata. A taken name without `override`
// throws (KeyError kind); `protected` names can never be overridden or
// removed again. Returns fn itself.
function registerFunc(name, fn, { override = false, protected: prot = false } = {}) {
  nameArg('registerFunc', name);
  if (typeof fn !== 'function') throw new TypeError(`registerFunc: expected a function, not ${typeof fn}`);
  const packed = core.convertFunction(fn);
  try {
    if (packed !== fn) packed.setInfo({ name });
    checkCall(api.PFFuncRegisterGlobalEx(name, packed.handle,
      (override ? REGISTER_OVERRIDE : 0) | (prot ? REGISTER_PROTECTED : 0)));
  } finally {
    if (packed !== fn) packed.dispose(); // the registry holds its own reference
  }
  return fn;
}

// Removes a global function: a FunctionNotFoundError naming a missing name.
function removeGlobalFunc(name) {
  if (api.PFFuncRemoveGlobal(nameArg('removeGlobalFunc', name)) !== 0) {
    const err = lastError();
    if (err.kind === 'KeyError') throw new FunctionNotFoundError(err.message);
    throw err;
  }
}

// The registered names that begin with `prefix`, sorted.
function listGlobalFuncNames(prefix = '') {
  checkCall(api.PFFuncListGlobalNamesWithPrefix(prefix ? nameArg('listGlobalFuncNames', prefix, 'prefix') : null,
    scratch.addr, scratch.addr + 8));
  const n = scratch.i32[0];
  return n ? Array.from(koffi.decode(core.readPtr(scratch, 8), 'const char*', n)) : [];
}

// The global functions named `prefix.<name>` as properties of `target` (a
// new object by default), the way a package exposes its C functions:
// `const ops = initApi('mylib.ops')`, then `ops.scale(...)`. Only names one
// level below the prefix are exposed; returns target.
function initApi(prefix, target = {}) {
  nameArg('initApi', prefix, 'prefix');
  const head = `${prefix}.`;
  for (const name of listGlobalFuncNames(head)) {
    const attr = name.slice(head.length);
    if (!attr || attr.includes('.')) continue;
    const f = getGlobalFunc(name, { allowMissing: true });
    if (f !== null) target[attr] = f;
  }
  return target;
}

// Loads a packedfunc module: a shared library whose C code registered
// functions with PF_REGISTER_PACKED / PF_REGISTER_TYPED (and object types).
// The path rule is PFModLoadFromFile's. Nothing is registered globally: call
// exportGlobal() for that.
function loadModule(path) {
  if (typeof path !== 'string') throw new TypeError(`loadModule: path must be a string, not ${typeof path}`);
  if (path.includes('\0')) throw new RangeError('loadModule: path contains a NUL character');
  checkCall(api.PFModLoadFromFile(path, scratch.addr));
  const mod = core.adoptObject(core.readPtr(scratch, 0));
  mod.path = path;
  return mod;
}

module.exports = { getGlobalFunc, registerFunc, removeGlobalFunc, listGlobalFuncNames, initApi, loadModule };
