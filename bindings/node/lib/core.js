'use strict';
// Values across the boundary, packed functions and the objects they pass.
//
// JavaScript -> C: encode() writes a value's 8 bytes and type code into C
// memory that JavaScript sees through typed arrays (a call frame, a
// callback's result slot, a container's items). C -> JavaScript: decode()
// reads them by the type code, and an object handle by its object type.
// Calls go through PFFuncCallFrame with one argument, the frame's address,
// so that koffi converts nothing per argument. C calls a JavaScript
// function through the package's C helper (src/pfnode.c), which copies the
// arguments into a slot that the trampoline jsCall reads.
//
// Lifetimes. Every wrapper of a C object (a packed function, an object, a
// typed array over a tensor object's memory) owns one reference, released
// by dispose() / [Symbol.dispose] or, when the wrapper is collected, by a
// FinalizationRegistry; never both (dispose unregisters, and a disposed
// wrapper has handle 0). JavaScript values that C holds (functions, typed
// arrays given as tensor objects) are kept in `held` under a key until C's
// finalizer hands the key back. Everything here is private; index.js
// re-exports the public names.

const {
  koffi, api, helperApi, JsCall, JsRelease, Block, allocBlock, scratch, DLTensor,
  TYPE_CODES, OBJECT_TYPES, REGISTERED_BEGIN, PFObjectTypeInfo, PFFieldInfo, PFMethodInfo,
} = require('./library.js');
const { checkCall, lastError, recordException, PackedFuncError, nameArg } = require('./errors.js');
const net = require('node:net');
const { markAsUntransferable } = require('node:worker_threads');

const { DataType, Device, OpaqueHandle } = require('./types.js');

const INT = TYPE_CODES.int;
const FLOAT = TYPE_CODES.float;
const BOOL = TYPE_CODES.bool;
const NULL = TYPE_CODES.null;
const HANDLE = TYPE_CODES.handle;
const DTYPE = TYPE_CODES.dtype;
const DEVICE = TYPE_CODES.device;
const TENSOR = TYPE_CODES.tensor;
const STR = TYPE_CODES.str;
const BYTES = TYPE_CODES.bytes;
const FUNC = TYPE_CODES.function;
const MODULE = TYPE_CODES.module;
const OBJECT = TYPE_CODES.object;

const TWO32 = 4294967296;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const MAX_DEPTH = 1000; // nesting of JavaScript containers

// The handle of a wrapper, by symbol: also on the typed arrays that view a
// tensor object's memory.
const kHandle = Symbol('packedfunc.handle');
const ADOPT = Symbol('packedfunc.adopt');
const kState = Symbol('packedfunc.state');

let shuttingDown = false;

// ---- 64-bit words in typed arrays --------------------------------------------------

function writeInt(blk, off, x) {
  const w = off >> 2;
  if ((x | 0) === x) {
    blk.i32[w] = x;
    blk.i32[w + 1] = x >> 31;
  } else {
    const hi = Math.floor(x / TWO32);
    blk.u32[w] = x - hi * TWO32;
    blk.i32[w + 1] = hi;
  }
}

function readInt(blk, off) {
  const w = off >> 2;
  const hi = blk.i32[w + 1];
  const lo = blk.u32[w];
  if (hi === 0) return lo;
  if (hi === -1 && lo >= 0x80000000) return lo - TWO32;
  const v = hi * TWO32 + lo;
  if (Number.isSafeInteger(v)) return v;
  return blk.i64[off >> 3];
}

function readPtr(blk, off) {
  const w = off >> 2;
  return blk.u32[w + 1] * TWO32 + blk.u32[w];
}

function writePtr(blk, off, p) {
  const w = off >> 2;
  const hi = Math.floor(p / TWO32);
  blk.u32[w] = p - hi * TWO32;
  blk.u32[w + 1] = hi;
}

// JavaScript memory seen as a Block: an ArrayBuffer whose address C gets
// (its backing store never moves), for what does not fit a frame.
class JsBlock extends Block {
  constructor(size) {
    const ab = new ArrayBuffer(Math.max(8, (size + 7) & ~7));
    super(0, ab.byteLength, ab);
    this.addr = Number(koffi.address(this.u8));
  }
}

// ---- call frames -----------------------------------------------------------------
//
// A frame is a PFCallFrame followed by room for its arguments:
//   0   PFCallFrame {ret_val, ret_type_code, num_args, func, args, type_codes}
//   64  values[FRAME_ARGS]        192 codes[FRAME_ARGS]
//   256 an arena: strings, PFByteArrays, DLTensors and their shapes
// Frames are a stack: a call takes the next one, so that a call made from
// inside a callback has a frame of its own.

const FRAME_SIZE = 2048;
const FRAME_ARGS = 16;
const VALUES_OFF = 64;
const NFRAMES = 128;
const frameBlock = allocBlock(FRAME_SIZE * NFRAMES);

class Frame {
  // A frame at `off` of `blk` for `capacity` arguments, with the arena up
  // to `end`.
  constructor(blk, off, capacity, end) {
    this.blk = blk;
    this.off = off;
    this.addr = blk.addr + off;
    this.big = false;
    this.h = 0; // the function handle written in the frame
    this.valuesOff = off + VALUES_OFF;
    this.codesOff = this.valuesOff + 8 * capacity;
    this.arenaStart = (this.codesOff + 4 * capacity + 7) & ~7;
    this.arenaEnd = end;
    this.pos = this.arenaStart;
    writePtr(blk, off + 24, blk.addr + this.valuesOff);
    writePtr(blk, off + 32, blk.addr + this.codesOff);
  }
}

const frames = [];
for (let i = 0; i < NFRAMES; i++) {
  frames.push(new Frame(frameBlock, i * FRAME_SIZE, FRAME_ARGS, (i + 1) * FRAME_SIZE));
}
let frameDepth = 0;

// A frame for many arguments, or for a call nested deeper than NFRAMES: C
// memory of its own, freed with it.
function bigFrame(n) {
  const size = 64 + n * 12 + 8 + 4096;
  const fr = new Frame(allocBlock(size), 0, n, size);
  fr.big = true;
  return fr;
}

// Room in a frame's arena: {blk, off, addr}; JavaScript memory when the
// arena is full (kept alive by the call's context).
function arenaAlloc(ctx, size) {
  const fr = ctx.frame;
  size = (size + 7) & ~7;
  if (fr !== null && fr.pos + size <= fr.arenaEnd) {
    const off = fr.pos;
    fr.pos += size;
    return { blk: fr.blk, off, addr: fr.blk.addr + off };
  }
  const jb = new JsBlock(size);
  ctx.keep.push(jb);
  return { blk: jb, off: 0, addr: jb.addr };
}

// What one encoding needs beyond the frame: objects to keep alive until the
// call returns, references to drop after it (host functions and containers
// made for the call).
function newCtx(frame) {
  return { frame, keep: [], release: [], depth: 0, seen: null, fn: null, copies: null };
}

function releaseCtx(ctx) {
  for (const h of ctx.release) api.PFObjectFree(h);
  ctx.release.length = 0;
  if (ctx.copies !== null) copyBack(ctx);
}

// ---- memory that C uses: pinned or copied -------------------------------------------
//
// A typed array's memory that C reads during a call, or keeps in a tensor
// object, stays valid whatever JavaScript does meanwhile. A buffer that
// could be transferred away (postMessage, structuredClone) is pinned:
// marked untransferable, for good (a transfer then copies it instead), as
// soon as JavaScript may run while C uses it: at once for a tensor object
// and for callAsync, when a callback runs for a synchronous call. A buffer
// that can shrink (a resizable ArrayBuffer) cannot be pinned: C gets a
// copy, written back after the call if C changed it.

function pin(x) {
  if (!(x.buffer instanceof SharedArrayBuffer)) markAsUntransferable(x.buffer);
}

// The address of typed array x's memory for a call (0 when empty).
function viewAddress(x, ctx) {
  if (x.byteLength === 0) return 0;
  if (x.buffer.resizable) {
    const copy = x.slice();
    ctx.keep.push(copy);
    if (ctx.copies === null) ctx.copies = [];
    ctx.copies.push([x, copy, copy.slice()]);
    return Number(koffi.address(copy));
  }
  ctx.keep.push(x);
  return Number(koffi.address(x));
}

function pinKept(ctx) {
  for (const x of ctx.keep) if (ArrayBuffer.isView(x)) pin(x);
}

function bytesOf(x) { return new Uint8Array(x.buffer, x.byteOffset, x.byteLength); }

function copyBack(ctx) {
  for (const [x, copy, sent] of ctx.copies) {
    if (Buffer.compare(bytesOf(copy), bytesOf(sent)) === 0) continue;
    const n = Math.min(x.length, copy.length); // the array may have shrunk meanwhile
    if (n) x.set(copy.subarray(0, n));
  }
  ctx.copies = null;
}

// The contexts of the synchronous calls in progress whose memory is not
// pinned yet: a callback pins it before any JavaScript runs (jsCall).
const unpinnedCalls = [];

function pinCallsInProgress() {
  for (const ctx of unpinnedCalls) pinKept(ctx);
  unpinnedCalls.length = 0;
}

// ---- JavaScript -> C ----------------------------------------------------------------

const encoder = new TextEncoder();

function what(pos) { return typeof pos === 'number' ? `argument ${pos}` : pos; }

function describe(x) {
  if (x === null) return 'null';
  if (typeof x !== 'object' && typeof x !== 'function') return typeof x;
  return x.constructor && x.constructor.name ? x.constructor.name : 'object';
}

// Writes a NUL-terminated UTF-8 copy of s into the arena; its address.
function encodeString(s, ctx, pos) {
  if (s.includes('\0')) {
    throw new RangeError(`packedfunc: ${what(pos)}: string contains a NUL character (pass a Uint8Array for binary data)`);
  }
  if (!s.isWellFormed()) {
    throw new RangeError(`packedfunc: ${what(pos)}: string contains a lone surrogate, which UTF-8 cannot encode`);
  }
  const max = s.length * 3 + 1;
  const room = arenaAlloc(ctx, max);
  const { written } = encoder.encodeInto(s, room.blk.u8.subarray(room.off, room.off + max - 1));
  room.blk.u8[room.off + written] = 0;
  return room.addr;
}

// The DLPack dtype of a typed array's elements.
const ARRAY_DTYPES = new Map([
  [Int8Array, [0, 8]], [Uint8Array, [1, 8]], [Uint8ClampedArray, [1, 8]], [Int16Array, [0, 16]],
  [Uint16Array, [1, 16]], [Int32Array, [0, 32]], [Uint32Array, [1, 32]], [Float32Array, [2, 32]],
  [Float64Array, [2, 64]], [BigInt64Array, [0, 64]], [BigUint64Array, [1, 64]],
]);

// A tensor argument: a typed array (one dimension, or the shape it carries
// from C), or tensor(array, shape).
class TensorArg {
  constructor(data, shape, dtype) {
    if (!ArrayBuffer.isView(data) || data instanceof DataView) {
      throw new TypeError(`tensor: expected a typed array, not ${describe(data)}`);
    }
    const kind = ARRAY_DTYPES.get(data.constructor);
    if (kind === undefined) throw new TypeError(`tensor: unsupported typed array ${data.constructor.name}`);
    shape = shape === undefined ? (data.shape ?? [data.length]) : Array.from(shape, Number);
    const count = shape.reduce((a, b) => a * b, 1);
    for (const d of shape) {
      if (!Number.isSafeInteger(d) || d < 0) throw new RangeError(`tensor: bad dimension ${d}`);
    }
    if (count !== data.length) {
      throw new RangeError(`tensor: shape [${shape}] holds ${count} elements, the array ${data.length}`);
    }
    this.data = data;
    this.shape = shape;
    this.dtype = dtype === undefined ? new DataType(kind[0], kind[1], 1) : new DataType(dtype);
    if (this.dtype.itemsize !== data.BYTES_PER_ELEMENT) {
      throw new RangeError(`tensor: dtype ${this.dtype} does not have ${data.BYTES_PER_ELEMENT}-byte elements`);
    }
  }
}

// Writes a DLTensor (CPU, compact) over x's memory into the arena.
function writeDLTensor(t, ctx) {
  const ndim = t.shape.length;
  const room = arenaAlloc(ctx, 48 + 8 * ndim);
  const { blk, off, addr } = room;
  writePtr(blk, off, viewAddress(t.data, ctx));
  blk.i32[(off + 8) >> 2] = 1; // kDLCPU
  blk.i32[(off + 12) >> 2] = 0;
  blk.i32[(off + 16) >> 2] = ndim;
  blk.u8[off + 20] = t.dtype.code;
  blk.u8[off + 21] = t.dtype.bits;
  blk.u16[(off + 22) >> 1] = t.dtype.lanes;
  writePtr(blk, off + 24, addr + 48);
  writePtr(blk, off + 32, 0); // strides: compact
  writePtr(blk, off + 40, 0); // byte_offset
  for (let i = 0; i < ndim; i++) writeInt(blk, off + 48 + 8 * i, t.shape[i]);
  return addr;
}

// Encoders of objects by class (exact or by instanceof, in order): each
// writes the value at (blk, off) and returns its type code.
const objectEncoders = [];

function registerObjectEncoder(cls, fn) { objectEncoders.push([cls, fn]); }

// Encodes x as the value at (blk, off); returns its type code. `pos` names
// it in messages.
function encode(x, blk, off, ctx, pos) {
  switch (typeof x) {
    case 'number':
      if (Number.isSafeInteger(x) && !(ctx.fn !== null && floatParam(ctx.fn, pos))) {
        writeInt(blk, off, x);
        return INT;
      }
      blk.f64[off >> 3] = x;
      return FLOAT;
    case 'boolean':
      blk.i32[off >> 2] = x ? 1 : 0;
      blk.i32[(off >> 2) + 1] = 0;
      return BOOL;
    case 'string':
      writePtr(blk, off, encodeString(x, ctx, pos));
      return STR;
    case 'undefined':
      writePtr(blk, off, 0);
      return NULL;
    case 'bigint':
      if (x < INT64_MIN || x > INT64_MAX) throw new RangeError(`packedfunc: ${what(pos)}: ${x} does not fit int64`);
      blk.i64[off >> 3] = x;
      return INT;
    case 'function':
      if (x[kHandle] !== undefined) {
        writePtr(blk, off, liveHandle(x, pos));
        return FUNC;
      }
      writePtr(blk, off, hostFunction(x, ctx));
      return FUNC;
    case 'object':
      break;
    default:
      throw new TypeError(`packedfunc: ${what(pos)} has unsupported type ${describe(x)}`);
  }
  if (x === null) {
    writePtr(blk, off, 0);
    return NULL;
  }
  for (const [cls, fn] of objectEncoders) {
    if (x instanceof cls) return fn(x, blk, off, ctx, pos);
  }
  if (ArrayBuffer.isView(x)) {
    if (x instanceof Uint8Array && x.shape === undefined) {
      const room = arenaAlloc(ctx, 16);
      writePtr(room.blk, room.off, viewAddress(x, ctx));
      writePtr(room.blk, room.off + 8, x.length);
      writePtr(blk, off, room.addr);
      return BYTES;
    }
    if (x[kHandle] !== undefined) { // a tensor object's memory: the object itself
      writePtr(blk, off, liveHandle(x, pos));
      return OBJECT;
    }
    writePtr(blk, off, writeDLTensor(new TensorArg(x), ctx));
    return TENSOR;
  }
  if (Array.isArray(x)) {
    writePtr(blk, off, containerFrom(x, ctx, pos, makeArray));
    return OBJECT;
  }
  if (x instanceof Map || Object.getPrototypeOf(x) === Object.prototype || Object.getPrototypeOf(x) === null) {
    writePtr(blk, off, containerFrom(x, ctx, pos, makeMap));
    return OBJECT;
  }
  throw new TypeError(`packedfunc: ${what(pos)} has unsupported type ${describe(x)}`);
}

function liveHandle(x, pos) {
  const h = x[kHandle];
  if (!h) throw new TypeError(`packedfunc: ${what(pos)}: the ${describe(x)} was disposed`);
  return h;
}

registerObjectEncoder(TensorArg, (x, blk, off, ctx) => { writePtr(blk, off, writeDLTensor(x, ctx)); return TENSOR; });
registerObjectEncoder(DataType, (x, blk, off) => {
  blk.u8[off] = x.code;
  blk.u8[off + 1] = x.bits;
  blk.u16[(off + 2) >> 1] = x.lanes;
  blk.i32[(off + 4) >> 2] = 0;
  return DTYPE;
});
registerObjectEncoder(Device, (x, blk, off) => {
  blk.i32[off >> 2] = x.deviceType;
  blk.i32[(off >> 2) + 1] = x.deviceId;
  return DEVICE;
});
registerObjectEncoder(OpaqueHandle, (x, blk, off) => {
  blk.u64[off >> 3] = x.address;
  return HANDLE;
});

// A new C Array or Map for a JavaScript array, Map or plain object (nested
// ones too), released after the call: C keeps its own reference if it
// keeps it.
function containerFrom(x, ctx, pos, make) {
  if (ctx.depth >= MAX_DEPTH) throw new RangeError(`packedfunc: ${what(pos)}: containers nested more than ${MAX_DEPTH} deep`);
  if (ctx.seen === null) ctx.seen = new Set();
  if (ctx.seen.has(x)) throw new RangeError(`packedfunc: ${what(pos)}: a container that contains itself`);
  ctx.seen.add(x);
  ctx.depth++;
  try {
    const h = make(x, ctx, pos);
    ctx.release.push(h);
    return h;
  } finally {
    ctx.depth--;
    ctx.seen.delete(x);
  }
}

// Values (and codes) of `items` into a new JsBlock: [block, codesOff].
function encodeItems(items, ctx, pos, label) {
  const n = items.length;
  const jb = new JsBlock(n * 12 + 8);
  ctx.keep.push(jb);
  const codesOff = n * 8;
  for (let i = 0; i < n; i++) {
    jb.i32[(codesOff >> 2) + i] = encode(items[i], jb, i * 8, ctx, `${what(pos)}, ${label} ${i}`);
  }
  return [jb, codesOff];
}

function makeArray(x, ctx, pos) {
  const [jb, codesOff] = encodeItems(x, ctx, pos, 'item');
  checkCall(api.PFArrayCreate(jb.addr, jb.addr + codesOff, x.length, scratch.addr));
  return readPtr(scratch, 0);
}

function mapEntries(x, pos) {
  const keys = [];
  const values = [];
  const entries = x instanceof Map ? x.entries() : Object.entries(x);
  for (const [k, v] of entries) {
    if (typeof k === 'string') {
      // A plain object's integer-like keys are ints to C as they were to the writer.
      keys.push(!(x instanceof Map) && /^-?(0|[1-9][0-9]{0,15})$/.test(k) && Number.isSafeInteger(Number(k)) ? Number(k) : k);
    } else if (typeof k === 'number' && Number.isSafeInteger(k)) {
      keys.push(k);
    } else if (typeof k === 'bigint') {
      keys.push(k);
    } else {
      throw new TypeError(`packedfunc: ${what(pos)}: a Map key must be a string or an integer, not ${describe(k)}`);
    }
    values.push(v);
  }
  return [keys, values];
}

function makeMap(x, ctx, pos) {
  const [keys, values] = mapEntries(x, pos);
  const [kb, kc] = encodeItems(keys, ctx, pos, 'key');
  const [vb, vc] = encodeItems(values, ctx, pos, 'value');
  checkCall(api.PFMapCreate(kb.addr, kb.addr + kc, vb.addr, vb.addr + vc, keys.length, scratch.addr));
  return readPtr(scratch, 0);
}

// ---- C -> JavaScript ----------------------------------------------------------------

// Wrappers of object handles by object type index (adopt(handle, index)).
const objectTypes = new Map();
let adoptRegistered = null; // registered types: (handle, index) -> instance

function registerObjectType(index, adopt) { objectTypes.set(index, adopt); }

function typeIndexOf(h) {
  checkCall(api.PFObjectGetTypeIndex(h, scratch.addr));
  return scratch.u32[0];
}

// Wraps an owned object reference by its type.
function adoptObject(h) {
  const index = typeIndexOf(h);
  const adopt = objectTypes.get(index);
  if (adopt !== undefined) return adopt(h, index);
  if (index >= REGISTERED_BEGIN && adoptRegistered !== null) return adoptRegistered(h, index);
  return PackedObject[ADOPT](h, index);
}

// The value at (blk, off) of type code `code`. `borrowed`: a callback's
// argument or a container's item, whose handles the wrapper takes a
// reference of its own to; else a call's result, whose new reference the
// wrapper takes over. `copies` collects borrowed DLTensors (see below).
function decode(blk, off, code, borrowed, copies) {
  switch (code) {
    case INT: return readInt(blk, off);
    case FLOAT: return blk.f64[off >> 3];
    case BOOL: return blk.i32[off >> 2] !== 0;
    case NULL: return null;
    case STR: return cString(readPtr(blk, off), api.strlen(readPtr(blk, off)));
    case BYTES: {
      const ba = readPtr(blk, off);
      const size = Number(koffi.decode.uint64(ba + 8));
      return size ? new Uint8Array(koffi.view(readPtrAt(ba), size)).slice() : new Uint8Array(0);
    }
    case HANDLE: return new OpaqueHandle(blk.u64[off >> 3]);
    case DTYPE: return new DataType(blk.u8[off], blk.u8[off + 1], blk.u16[(off + 2) >> 1]);
    case DEVICE: return new Device(blk.i32[off >> 2], blk.i32[(off >> 2) + 1]);
    case TENSOR: return borrowedTensor(readPtr(blk, off), copies);
    case FUNC:
    case MODULE:
    case OBJECT: {
      const h = readPtr(blk, off);
      if (borrowed) checkCall(api.PFObjectRetain(h));
      return code === FUNC ? adoptFunction(h) : adoptObject(h);
    }
    default:
      throw new TypeError(`packedfunc: a value of unsupported type code ${code}`);
  }
}

function readPtrAt(addr) { return Number(koffi.decode.uint64(addr)); }

// The C string of `size` bytes at ptr as a JavaScript string: one longer
// than V8's longest string is a RangeError (V8 would abort the process).
const { MAX_STRING_LENGTH } = require('node:buffer').constants;
function cString(ptr, size) {
  if (size > MAX_STRING_LENGTH) {
    throw new RangeError(`packedfunc: a string result of ${size} bytes is longer than the longest ` +
      `JavaScript string (${MAX_STRING_LENGTH} characters)`);
  }
  return koffi.decode.string(ptr, size);
}

// ---- tensors ---------------------------------------------------------------------------

// Typed array classes by DLPack (code, bits): bool and 16-bit floats come
// as their raw bits.
function arrayClassOf(code, bits) {
  if (code === 0) return { 8: Int8Array, 16: Int16Array, 32: Int32Array, 64: BigInt64Array }[bits];
  if (code === 1) return { 8: Uint8Array, 16: Uint16Array, 32: Uint32Array, 64: BigUint64Array }[bits];
  if (code === 2) return { 16: Uint16Array, 32: Float32Array, 64: Float64Array }[bits];
  if (code === 4 && bits === 16) return Uint16Array; // bfloat16
  if (code === 6 && bits === 8) return Uint8Array; // kDLBool
  return undefined;
}

function readDLTensor(ptr) {
  const t = koffi.decode(ptr, DLTensor);
  const ndim = t.ndim;
  const shape = ndim ? Array.from(koffi.decode(t.shape, 'int64_t', ndim), Number) : [];
  const strides = t.strides && ndim ? Array.from(koffi.decode(t.strides, 'int64_t', ndim), Number) : null;
  return {
    data: Number(t.data), offset: Number(t.byte_offset), shape, strides,
    dtype: new DataType(t.dtype.code, t.dtype.bits, t.dtype.lanes),
    device: new Device(t.device.device_type, t.device.device_id),
  };
}

// The extent of a tensor's elements, in elements, from its first: compact
// row-major when it has no strides.
function span(t) {
  if (t.shape.some((d) => d === 0)) return 0;
  if (t.strides === null) return t.shape.reduce((a, b) => a * b, 1);
  let last = 0;
  for (let i = 0; i < t.shape.length; i++) {
    if (t.strides[i] < 0) return -1;
    last += (t.shape[i] - 1) * t.strides[i];
  }
  return last + 1;
}

function describeTensor(arr, t) {
  const props = { shape: t.shape, dtype: t.dtype, device: t.device, strides: t.strides ?? compactStrides(t.shape) };
  for (const [k, v] of Object.entries(props)) Object.defineProperty(arr, k, { value: v, enumerable: false });
  return arr;
}

function compactStrides(shape) {
  const out = new Array(shape.length);
  let step = 1;
  for (let i = shape.length - 1; i >= 0; i--) { out[i] = step; step *= shape[i]; }
  return out;
}

function viewOf(t, where) {
  if (t.device.deviceType !== 1 && t.device.deviceType !== 3) {
    throw new TypeError(`packedfunc: ${where}: a tensor on ${t.device} cannot be viewed from JavaScript`);
  }
  const cls = t.dtype.lanes === 1 ? arrayClassOf(t.dtype.code, t.dtype.bits) : undefined;
  if (cls === undefined) throw new TypeError(`packedfunc: ${where}: unsupported tensor dtype ${t.dtype}`);
  const n = span(t);
  if (n < 0) throw new TypeError(`packedfunc: ${where}: negative strides are not supported`);
  if (n === 0) return new cls(0);
  const buf = koffi.view(t.data + t.offset, n * cls.BYTES_PER_ELEMENT);
  return new cls(buf);
}

// A tensor object (owned reference h) as a typed array over its memory: the
// array keeps the C owner alive, and passes back to C as the object.
function adoptTensor(h) {
  let arr;
  try {
    checkCall(api.PFTensorGetDLTensor(h, scratch.addr));
    const t = readDLTensor(readPtr(scratch, 0));
    arr = describeTensor(viewOf(t, 'tensor object'), t);
  } catch (err) {
    api.PFObjectFree(h);
    throw err;
  }
  Object.defineProperty(arr, kHandle, { value: h, writable: true, enumerable: false });
  if (arr.buffer.byteLength) {
    // The memory belongs to the object: freed when the last view of it goes.
    tensorRegistry.register(arr.buffer, h);
  } else {
    registry.register(arr, h);
  }
  return arr;
}

const tensorRegistry = new FinalizationRegistry((h) => { if (!shuttingDown) api.PFObjectFree(h); });

// A borrowed DLTensor* (C lends its memory for the call only) as a typed
// array over a private copy; with `copies`, the copy is written back into
// C's memory when the callback returns, if and only if it changed.
// The copy is compact (row-major) whatever C's strides are.
function borrowedTensor(ptr, copies) {
  const t = readDLTensor(ptr);
  const view = viewOf(t, 'a borrowed tensor');
  const at = t.strides === null ? null : elementOffsets(t.shape, t.strides);
  const copy = at === null ? view.slice() : new view.constructor(at.length);
  if (at !== null) for (let i = 0; i < at.length; i++) copy[i] = view[at[i]];
  describeTensor(copy, { ...t, strides: null });
  if (copies) copies.push([view, copy, copy.slice(), at]);
  return copy;
}

// The offsets, in elements, of a strided tensor's elements in row-major order.
function elementOffsets(shape, strides) {
  let out = [0];
  for (let d = 0; d < shape.length; d++) {
    const next = new Array(out.length * shape[d]);
    let k = 0;
    for (const base of out) for (let i = 0; i < shape[d]; i++) next[k++] = base + i * strides[d];
    out = next;
  }
  return out;
}

function writeBack(copies) {
  for (const [view, copy, received, at] of copies) {
    const a = new Uint8Array(copy.buffer, copy.byteOffset, copy.byteLength);
    const b = new Uint8Array(received.buffer, received.byteOffset, received.byteLength);
    if (Buffer.compare(a, b) === 0) continue;
    if (at === null) view.set(copy);
    else for (let i = 0; i < at.length; i++) view[at[i]] = copy[i];
  }
}

// A new tensor object over a typed array's memory: C may keep it; the
// array stays alive until C's last reference goes, its buffer pinned (a
// resizable one is copied instead, see viewAddress).
function tensorObjectFrom(x) {
  const t = x instanceof TensorArg ? x : new TensorArg(x);
  const ndim = t.shape.length;
  const size = 64 + 8 * ndim;
  const data = t.data.buffer.resizable ? t.data.slice() : t.data;
  pin(data);
  const mem = api.PFMemAlloc(size);
  if (!mem) throw new PackedFuncError('packedfunc: no memory for a tensor', 'MemoryError');
  const key = keep(data);
  const ref = helperApi.refCreate(ENV, key);
  if (!ref) {
    held.delete(key);
    api.PFMemFree(mem);
    throw new PackedFuncError('packedfunc: no memory for a tensor', 'MemoryError');
  }
  const jb = new JsBlock(size);
  writePtr(jb, 0, data.length ? Number(koffi.address(data)) : 0);
  jb.i32[2] = 1;
  jb.i32[4] = ndim;
  jb.u8[20] = t.dtype.code;
  jb.u8[21] = t.dtype.bits;
  jb.u16[11] = t.dtype.lanes;
  writePtr(jb, 24, mem + 64);
  writePtr(jb, 48, ref); // manager_ctx
  writePtr(jb, 56, TENSOR_DELETER);
  for (let i = 0; i < ndim; i++) writeInt(jb, 64 + 8 * i, t.shape[i]);
  koffi.encode(mem, 'uint8_t', Array.from(jb.u8.subarray(0, size)), size);
  checkCall(api.PFTensorCreateFromDLPack(mem, scratch.addr)); // the deleter ran if it failed
  return readPtr(scratch, 0);
}

// ---- packed functions ------------------------------------------------------------------

const registry = new FinalizationRegistry((h) => { if (!shuttingDown) api.PFObjectFree(h); });

// The prototype of every packed function wrapper (a callable JavaScript
// function): PackedFunction below gives instanceof.
const functionProto = Object.create(Function.prototype);

function PackedFunction() {
  throw new TypeError('packedfunc: a PackedFunction cannot be created directly; use getGlobalFunc() or convert()');
}
PackedFunction.prototype = functionProto;
Object.defineProperty(functionProto, 'constructor', { value: PackedFunction });

// Wraps an owned function reference as a callable JavaScript function. Its
// state is a small object of one shape (the handle, the metadata once read,
// whether every parameter takes a small int as an int), which the call's
// hot path reads; kHandle on the function reads and writes it.
function adoptFunction(h) {
  const st = { h, info: undefined, ints: undefined, lookedUp: null };
  const f = function packedFunction(...args) { return callFunction(st, args); };
  Object.setPrototypeOf(f, functionProto);
  // The metadata name, not the closure's (changing the property keeps the
  // object's fast layout, where deleting it would not).
  Object.defineProperty(f, 'name', nameProperty);
  f[kState] = st;
  registry.register(f, h, f);
  return f;
}

function info(f) {
  const st = f[kState] ?? f;
  if (st.info === undefined) {
    const h = st.h;
    if (!h) throw new TypeError('packedfunc: the function was disposed');
    checkCall(api.PFFuncGetInfo(h, scratch.addr, scratch.addr + 8, scratch.addr + 16));
    const str = (off) => { const p = readPtr(scratch, off); return p ? koffi.decode.string(p) : null; };
    const sig = str(8);
    st.info = { name: str(0), signature: sig, doc: str(16), floats: floatParams(h) };
    st.ints = st.info.floats === null;
  }
  return st.info;
}

// Positions of float64/float32 parameters of a function's signature, read
// from the library's parameter table (signature.h; the text is never split
// here): an integer-valued number passed there goes as a float. null when
// there are none.
function floatParams(h) {
  checkCall(api.PFFuncGetSignatureInfo(h, scratch.addr));
  const si = readPtr(scratch, 0);
  if (!si) return null;
  // PFSignatureInfo: text, num_params (int32 at 8), ..., params (at 32):
  // an array of PFParamInfo*, whose `type` (at 8) is the canonical type.
  const n = koffi.decode.int32(si + 8);
  const params = readPtrAt(si + 32);
  const out = [];
  for (let i = 0; i < n; i++) {
    const type = koffi.decode.string(readPtrAt(readPtrAt(params + 8 * i) + 8));
    out.push(type === 'float64' || type === 'float32');
  }
  return out.some(Boolean) ? out : null;
}

function floatParam(f, pos) {
  const floats = info(f).floats;
  return floats !== null && typeof pos === 'number' && floats[pos] === true;
}

const nameProperty = { get() { return this[kHandle] ? info(this).name ?? '' : ''; }, configurable: true };
Object.defineProperties(functionProto, {
  [kHandle]: {
    get() { return this[kState].h; },
    set(h) { this[kState].h = h; },
  },
  handle: { get() { return this[kHandle]; } },
  signature: { get() { return this[kHandle] ? info(this).signature : null; } },
  doc: { get() { return this[kHandle] ? info(this).doc : null; } },
});

functionProto.setInfo = function setInfo({ name = null, signature = null, doc = null } = {}) {
  for (const [what, text] of [['name', name], ['signature', signature], ['doc', doc]]) {
    if (text !== null) nameArg('setInfo', text, what);
  }
  checkCall(api.PFFuncSetInfo(liveHandle(this, 'the function'), name, signature, doc));
  this[kState].info = undefined;
  this[kState].ints = undefined;
  return this;
};

functionProto.dispose = function dispose() {
  const h = this[kHandle];
  if (h) {
    this[kHandle] = 0;
    registry.unregister(this);
    api.PFObjectFree(h);
  }
};
functionProto[Symbol.dispose] = functionProto.dispose;
functionProto.toString = function toString() {
  return this[kHandle] ? `[PackedFunction ${info(this).name ?? '(anonymous)'}]` : '[PackedFunction (disposed)]';
};
functionProto[Symbol.for('nodejs.util.inspect.custom')] = functionProto.toString;

// Arguments go to C through the frame; JavaScript functions among them
// become host functions for the call. The JS thread counts itself as
// blocked in C (for threads that wait for it, see src/pfnode.c) meanwhile.
function callFunction(st, args) {
  const h = st.h;
  if (!h) throw new TypeError('packedfunc: the function was disposed');
  const n = args.length;
  const fr = frameDepth < NFRAMES && n <= FRAME_ARGS ? frames[frameDepth] : bigFrame(n);
  frameDepth++;
  let ctx = null;
  try {
    const blk = fr.blk;
    const base = fr.off;
    if (fr.h !== h) {
      writePtr(blk, base + 16, h);
      fr.h = h;
    }
    const i32 = blk.i32;
    i32[(base + 12) >> 2] = n;
    const ints = st.ints === undefined ? (info(st), st.ints) : st.ints;
    const codes = fr.codesOff >> 2;
    for (let i = 0; i < n; i++) {
      const x = args[i];
      const w = (fr.valuesOff >> 2) + 2 * i;
      if (typeof x === 'number' && (x | 0) === x && ints) {
        i32[w] = x;
        i32[w + 1] = x >> 31;
        i32[codes + i] = INT;
      } else {
        if (ctx === null) { ctx = newCtx(fr); ctx.fn = st; fr.pos = fr.arenaStart; }
        i32[codes + i] = encode(x, blk, fr.valuesOff + 8 * i, ctx, i);
      }
    }
    if (ctx !== null && ctx.keep.length) unpinnedCalls.push(ctx);
    shared[0]++;
    let rc;
    try {
      rc = api.PFFuncCallFrame(fr.addr);
    } finally {
      shared[0]--;
      shared[1]++;
      if (ctx !== null && unpinnedCalls.at(-1) === ctx) unpinnedCalls.pop();
    }
    if (rc !== 0) throw lastError(levelOf(st));
    const code = i32[(base + 8) >> 2];
    if (code === INT) return readInt(blk, base);
    return decode(blk, base, code, false, null);
  } finally {
    frameDepth--;
    if (fr.big) api.PFMemFree(fr.blk.addr);
    if (ctx !== null) releaseCtx(ctx);
  }
}

// The function's name for its level in an error: its metadata name, else
// the registry name it was looked up by.
function levelOf(f) {
  const st = f[kState] ?? f;
  try { return info(st).name ?? st.lookedUp ?? null; } catch { return null; }
}

// ---- calls off the JavaScript thread -------------------------------------------------

const ASYNC_SIZE = helperApi.asyncSize();

// f(...args) on a worker thread: a Promise of its result. The JavaScript
// thread stays free meanwhile, so the function may call JavaScript
// functions from any thread.
functionProto.callAsync = function callAsync(...args) {
  const h = liveHandle(this, 'the function');
  const n = args.length;
  const size = ASYNC_SIZE + 64 + n * 12 + 4096;
  const blk = allocBlock(size);
  // The PFCallFrame is the first member of pfnode_async; the values follow it.
  const fr = new Frame(blk, 0, n, size);
  fr.valuesOff = ASYNC_SIZE + 64;
  fr.codesOff = fr.valuesOff + n * 8;
  fr.arenaStart = (fr.codesOff + n * 4 + 7) & ~7;
  fr.pos = fr.arenaStart;
  writePtr(blk, 24, blk.addr + fr.valuesOff);
  writePtr(blk, 32, blk.addr + fr.codesOff);
  const ctx = newCtx(fr);
  ctx.fn = this;
  const f = this;
  let loan = null;
  return new Promise((resolve, reject) => {
    try {
      writePtr(blk, 16, h);
      blk.i32[3] = n;
      for (let i = 0; i < n; i++) blk.i32[(fr.codesOff >> 2) + i] = encode(args[i], blk, fr.valuesOff + 8 * i, ctx, i);
      pinKept(ctx); // JavaScript runs while the call does
      loan = lend(args, ctx);
      blk.i32[11] = loan.id; // pfnode_async.loan
    } catch (err) {
      releaseCtx(ctx);
      api.PFMemFree(blk.addr);
      reject(err);
      return;
    }
    helperApi.callAsync.async(blk.addr, (ioErr, rc) => {
      if (loan !== null) endLoan(loan);
      try {
        if (ioErr) throw ioErr;
        if (rc !== 0) {
          const str = (off) => { const p = readPtr(blk, off); return p ? koffi.decode.string(p) : ''; };
          api.PFErrorSet(str(64) || 'RuntimeError', str(72));
          const tb = str(80);
          if (tb) api.PFErrorAppendTraceback(tb);
          throw lastError(levelOf(f));
        }
        const code = blk.i32[2];
        if (code === STR) resolve(cString(readPtr(blk, 48), readInt(blk, 56)));
        else if (code === BYTES) {
          const n2 = readInt(blk, 56);
          resolve(n2 ? new Uint8Array(koffi.view(readPtr(blk, 48), n2)).slice() : new Uint8Array(0));
        } else resolve(decode(blk, 0, code, false, null));
      } catch (err) {
        reject(err);
      } finally {
        helperApi.asyncClear(blk.addr);
        releaseCtx(ctx);
        api.PFMemFree(blk.addr);
      }
    });
  });
};

// ---- JavaScript functions for C ----------------------------------------------------------

// JavaScript values that C holds, by key: functions (host functions) and
// typed arrays (tensor objects over their memory). C's finalizer hands the
// key back (jsRelease).
const held = new Map();
let nextKey = 0;

function keep(value) {
  const key = ++nextKey;
  held.set(key, value);
  return key;
}

// This evaluation's gate (closed when its thread exits) and its state in
// the C helper, its env: C reaches the JavaScript functions made here on
// this thread, through this evaluation's trampolines (see src/pfnode.c).
checkCall(api.PFHostGateCreate(scratch.addr));
const GATE = readPtr(scratch, 0);
const TENSOR_DELETER = helperApi.tensorDeleter();
const jsCallPtr = koffi.register(jsCall, koffi.pointer(JsCall));
const jsReleasePtr = koffi.register(jsRelease, koffi.pointer(JsRelease));
const ENV = helperApi.init(jsCallPtr, jsReleasePtr, GATE);
if (!ENV) throw new Error('packedfunc: the C helper cannot start (no memory, or its wake pipe failed)');

// A new host function (an owned reference) that calls fn; with a context,
// released after the call (C keeps its own reference if it keeps it).
function hostFunction(fn, ctx) {
  const key = keep(fn);
  checkCall(helperApi.funcCreate(ENV, key, scratch.addr)); // on failure the key was handed back
  const h = readPtr(scratch, 0);
  if (ctx) ctx.release.push(h);
  return h;
}

// A JavaScript function as a packed function (a PackedFunction is returned
// as it is).
function convertFunction(fn) {
  if (typeof fn !== 'function') throw new TypeError(`packedfunc: expected a function, not ${describe(fn)}`);
  if (fn[kHandle] !== undefined) return fn;
  return adoptFunction(hostFunction(fn, null));
}

// The callback slots of the C helper (src/pfnode.c, pfnode_slot):
//   0 num_args  4 ret_code  8 key  16 ret_value  24 ret_owned  28 loan
//   32 args  40 codes  48 ret_bytes {data, size}  64 values[16]  192 codes[16]
const SLOT_SIZE = 256;
const SLOT_ARGS = 16;
const slots = new Block(helperApi.slots(ENV), SLOT_SIZE * helperApi.maxDepth());
const slotKeep = new Array(helperApi.maxDepth()).fill(null);
const shared = new Int32Array(koffi.view(helperApi.shared(ENV), 16));

function slotArgs(off, n, copies) {
  const args = new Array(n);
  if (n <= SLOT_ARGS) {
    for (let i = 0; i < n; i++) {
      const code = slots.i32[((off + 192) >> 2) + i];
      const voff = off + 64 + 8 * i;
      args[i] = code === INT ? readInt(slots, voff) : decode(slots, voff, code, true, copies);
    }
    return args;
  }
  // More than a slot holds: read the caller's own arrays.
  const vals = new Block(readPtr(slots, off + 32), 8 * n);
  const codes = new Int32Array(koffi.view(readPtr(slots, off + 40), 4 * n));
  for (let i = 0; i < n; i++) args[i] = decode(vals, 8 * i, codes[i], true, copies);
  return args;
}

// Writes a callback's result into its slot (see pfnode_slot).
function setResult(index, off, r) {
  const w = off >> 2;
  slots.i32[w + 6] = 0; // ret_owned
  if (r === undefined || r === null) {
    slots.i32[w + 1] = NULL;
    return;
  }
  if (typeof r === 'number' && Number.isSafeInteger(r)) {
    writeInt(slots, off + 16, r);
    slots.i32[w + 1] = INT;
    return;
  }
  if (typeof r === 'object' && typeof r.then === 'function') {
    // Its rejection is handled here: the caller gets this TypeError, and
    // a dropped Promise's rejection must not end the process afterwards.
    Promise.resolve(r).catch(() => {});
    throw new TypeError('packedfunc: a JavaScript function called from C returned a Promise; C needs ' +
      'the value itself (make the function synchronous)');
  }
  const ctx = newCtx(null);
  let code;
  if (typeof r === 'function' && r[kHandle] === undefined) {
    writePtr(slots, off + 16, hostFunction(r, null));
    slots.i32[w + 6] = 1;
    code = FUNC;
  } else if (typeof r === 'string') {
    if (r.includes('\0')) throw new RangeError('packedfunc: the callback\'s result: string contains a NUL character');
    if (!r.isWellFormed()) throw new RangeError('packedfunc: the callback\'s result: string contains a lone surrogate');
    const buf = Buffer.from(`${r}\0`, 'utf8');
    slotKeep[index] = buf;
    writePtr(slots, off + 16, Number(koffi.address(buf)));
    code = STR;
  } else if (r instanceof Uint8Array && r.shape === undefined) {
    slotKeep[index] = r;
    writePtr(slots, off + 48, r.length ? Number(koffi.address(r)) : 0);
    writePtr(slots, off + 56, r.length);
    writePtr(slots, off + 16, slots.addr + off + 48);
    code = BYTES;
  } else if (ArrayBuffer.isView(r) && r[kHandle] === undefined && !(r instanceof DataView)) {
    writePtr(slots, off + 16, tensorObjectFrom(r));
    slots.i32[w + 6] = 1;
    code = OBJECT;
  } else if (r instanceof TensorArg) {
    writePtr(slots, off + 16, tensorObjectFrom(r));
    slots.i32[w + 6] = 1;
    code = OBJECT;
  } else {
    try {
      code = encode(r, slots, off + 16, ctx, 'the callback\'s result');
      if (ctx.release.length) {
        // A container made for the result (the outermost, made last): its
        // reference goes to C; those of the nested ones go.
        ctx.release.pop();
        slots.i32[w + 6] = 1;
      } else if (code === FUNC || code === OBJECT || code === MODULE) {
        slotKeep[index] = r;
      }
    } finally {
      releaseCtx(ctx);
    }
  }
  slots.i32[w + 1] = code;
}

// The trampoline: C called the JavaScript function of slot `index`'s key.
// Returns 1 (done), or -1 after recording the error; never throws.
function jsCall(index) {
  const off = index * SLOT_SIZE;
  if (unpinnedCalls.length !== 0) pinCallsInProgress();
  const outerLoan = waitingLoan;
  waitingLoan = slots.i32[(off + 28) >> 2] || outerLoan; // a callback on this thread: the same wait
  try {
    const fn = held.get(readInt(slots, off + 8));
    if (typeof fn !== 'function') throw new PackedFuncError('packedfunc: the JavaScript function of this packed function was released', 'RuntimeError');
    const n = slots.i32[off >> 2];
    let copies = null;
    let r;
    if (n === 0) {
      r = fn();
    } else {
      copies = [];
      r = fn(...slotArgs(off, n, copies));
    }
    if (copies !== null && copies.length) writeBack(copies);
    setResult(index, off, r);
    return 1;
  } catch (err) {
    return recordException(err);
  } finally {
    waitingLoan = outerLoan;
  }
}

function jsRelease(key) {
  held.delete(typeof key === 'bigint' ? Number(key) : key);
}

// Other threads' calls wake the event loop through the helper's wake pipe,
// read by a socket of Node.js's own (which owns the descriptor): Node.js
// closes it when this thread ends, even when a worker thread is terminated
// and no JavaScript runs at its end, where a handle of koffi's would be
// closed after koffi is gone. It does not keep the process alive: C
// threads that call JavaScript need the program to be running.
const wakeSocket = new net.Socket({ fd: helperApi.wakeFd(ENV), readable: true, writable: false });
wakeSocket.on('data', () => helperApi.serve(ENV));
wakeSocket.on('error', () => {}); // the calls that wait then time out with their own message
wakeSocket.unref();

// When this thread exits (the process, or a worker thread: 'exit' is its
// own), the JavaScript functions made here stop being callable from C: a C
// thread that calls one afterwards gets a RuntimeError with this message,
// instead of entering a JavaScript engine that is going away. A worker
// that is terminated has no 'exit' event: the helper does the same when
// its thread ends.
const EXIT_MESSAGE = 'the Node.js event loop has exited';
process.on('exit', () => {
  shuttingDown = true;
  try {
    wakeSocket.destroy();
    helperApi.shutdown(ENV, EXIT_MESSAGE);
    api.PFHostGateClose(GATE, EXIT_MESSAGE, 1000);
  } catch { /* nothing more can be done at exit */ }
});

// How long a C thread that calls a JavaScript function waits while the
// JavaScript thread is blocked in one synchronous call into C (so that its
// event loop cannot run the function) before it fails; -1: forever.
function setThreadCallTimeout(ms) {
  if (!Number.isInteger(ms) || ms < -1 || ms > 2 ** 31 - 1) throw new RangeError('setThreadCallTimeout: expected an integer >= -1');
  return helperApi.setTimeout(ENV, ms);
}

// How many JavaScript values C holds now (functions and typed arrays).
function heldCount() { return held.size; }

// ---- objects -----------------------------------------------------------------------------

// A reference-counted packedfunc object other than a function (a module, a
// container, an instance of a registered type, ...). Owns one reference.
class PackedObject {
  static [ADOPT](h, typeIndex) {
    const self = Object.create(this.prototype);
    self[kHandle] = h;
    self.typeIndex = typeIndex;
    registry.register(self, h, self);
    if (typeof self._adopted === 'function') self._adopted();
    return self;
  }

  constructor() {
    throw new TypeError(`packedfunc: ${new.target.name} objects come from C`);
  }

  get handle() { return this[kHandle]; }

  dispose() {
    const h = this[kHandle];
    if (h) {
      this[kHandle] = 0;
      registry.unregister(this);
      api.PFObjectFree(h);
    }
  }

  [Symbol.dispose]() { this.dispose(); }

  get typeName() { return api.PFObjectTypeName(this.typeIndex) ?? String(this.typeIndex); }

  toString() { return `[${this.constructor.name} ${this.typeName}${this[kHandle] ? '' : ' (disposed)'}]`; }
}

registerObjectEncoder(PackedObject, (x, blk, off, ctx, pos) => {
  writePtr(blk, off, freeHandle(x, what(pos)));
  return x instanceof Module ? MODULE : OBJECT;
});
registerObjectType(OBJECT_TYPES.tensor, (h) => adoptTensor(h));

// ---- instances lent to a call off the JavaScript thread ------------------------------
//
// object_type.h leaves serializing an instance to hosts. While a callAsync
// call that took a registered instance runs on a worker thread, C may read
// any of its fields; JavaScript must not free what C reads (a field write
// frees the value it replaces) nor read what the call may be replacing,
// and the event loop must never wait for the call. So until the call ends
// the instance is lent to it: a field write, a field read through C (str,
// bytes, handles) and any call that takes the instance throw at once;
// except in a callback that the call's own thread waits for (the helper
// tells its loan), as a method's callback may use the method's instance.

const lent = new Map(); // handle -> the loan of the callAsync call that runs with it
let lastLoan = 0;
let waitingLoan = 0; // the loan whose call waits for the callback running now
const COPIED = new Set([INT, FLOAT, BOOL, NULL, HANDLE, DTYPE, DEVICE]); // field values read whole

function inUse(x, where) {
  return new PackedFuncError(`packedfunc: ${where}: the ${x.typeName} instance is in use by a ` +
    'callAsync call that has not ended (await it first)');
}

// x's handle, for an operation that reads or changes what C may be using.
function freeHandle(x, where) {
  const h = liveHandle(x, where);
  if (lent.size !== 0 && lent.has(h) && lent.get(h) !== waitingLoan) throw inUse(x, where);
  return h;
}

// Lends the registered instances among args to a call until endLoan() (an
// instance that a call waiting for this callback lent stays with it); the
// call holds a reference to each, so that a dispose() meanwhile frees it
// only when the call ends. The loan's number and its handles.
function lend(args, ctx) {
  const objs = args.filter((x) => x instanceof PackedObject && x.typeIndex >= REGISTERED_BEGIN);
  for (const x of objs) if (lent.has(x[kHandle])) throw inUse(x, 'callAsync');
  const loan = { id: lastLoan = (lastLoan % 0x7fffffff) + 1, handles: [] };
  for (const x of objs) {
    const h = x[kHandle];
    if (lent.has(h)) continue; // given twice
    checkCall(api.PFObjectRetain(h));
    ctx.release.push(h);
    lent.set(h, loan.id);
    loan.handles.push(h);
  }
  return loan;
}

function endLoan(loan) {
  for (const h of loan.handles) lent.delete(h);
}

// Reads one item that a reader wrote at scratch[off] (value) and
// scratch[codeOff] (code): borrowed from the container, or with borrowed
// false a new reference (List and Dict hand out their own).
function scratchItem(off, codeOff, borrowed = true) {
  const code = scratch.i32[codeOff >> 2];
  return code === INT ? readInt(scratch, off) : decode(scratch, off, code, borrowed, null);
}

// A value as the 8 bytes of a PFValue passed by value, and its code.
function valueArg(x, pos) {
  const jb = new JsBlock(8);
  const ctx = newCtx(null);
  const code = encode(x, jb, 0, ctx, pos);
  return [jb.u64[0], code, ctx];
}

// An immutable sequence of values held by packedfunc (a C Array).
class PackedArray extends PackedObject {
  _adopted() {
    checkCall(api.PFArrayGetSize(this[kHandle], scratch.addr));
    this.length = readInt(scratch, 0);
  }

  at(i) {
    const n = this.length;
    if (i < 0) i += n;
    if (!Number.isInteger(i) || i < 0 || i >= n) throw new RangeError(`PackedArray index ${i} out of range (length ${n})`);
    checkCall(api.PFArrayGetItem(liveHandle(this, 'the array'), i, scratch.addr, scratch.addr + 8));
    return scratchItem(0, 8);
  }

  get(i) { return this.at(i); }

  * [Symbol.iterator]() { for (let i = 0; i < this.length; i++) yield this.at(i); }

  // A JavaScript array of the items, nested containers converted too.
  toArray() { return Array.from(this, toJS); }

  toJSON() { return this.toArray(); }
}

// An immutable mapping held by packedfunc (a C Map), with string or
// integer keys in insertion order.
class PackedMap extends PackedObject {
  _adopted() {
    checkCall(api.PFMapGetSize(this[kHandle], scratch.addr));
    this.size = readInt(scratch, 0);
  }

  _lookup(key, where) {
    let raw;
    let code;
    let bytes = null; // alive until the lookup returns
    if (typeof key === 'string') {
      nameArg(where, key, 'key');
      bytes = Buffer.from(`${key}\0`, 'utf8');
      raw = koffi.address(bytes);
      code = STR;
    } else if (typeof key === 'number' && Number.isSafeInteger(key)) {
      raw = BigInt.asUintN(64, BigInt(key));
      code = INT;
    } else if (typeof key === 'bigint') {
      raw = BigInt.asUintN(64, key);
      code = INT;
    } else {
      return undefined;
    }
    checkCall(api.PFMapGetItem(liveHandle(this, 'the map'), raw, code, scratch.addr, scratch.addr + 8, scratch.addr + 16));
    bytes = null;
    if (!scratch.i32[4]) return undefined;
    return { value: scratchItem(0, 8) };
  }

  get(key) { const r = this._lookup(key, 'PackedMap.get'); return r === undefined ? undefined : r.value; }

  has(key) { return this._lookup(key, 'PackedMap.has') !== undefined; }

  * entries() {
    for (let i = 0; i < this.size; i++) {
      checkCall(api.PFMapGetItemAt(liveHandle(this, 'the map'), i, scratch.addr, scratch.addr + 16, scratch.addr + 8, scratch.addr + 20));
      const k = scratchItem(0, 16);
      const v = scratchItem(8, 20);
      yield [k, v];
    }
  }

  * keys() { for (const [k] of this.entries()) yield k; }

  * values() { for (const [, v] of this.entries()) yield v; }

  [Symbol.iterator]() { return this.entries(); }

  // A plain object of the entries (integer keys as their text), nested
  // containers converted too.
  toObject() {
    const out = {};
    for (const [k, v] of this.entries()) out[k] = toJS(v);
    return out;
  }

  toMap() { return new Map(Array.from(this.entries(), ([k, v]) => [k, toJS(v)])); }

  toJSON() { return this.toObject(); }
}

// An immutable tuple of int64 (a tensor's shape or strides).
class Shape extends PackedObject {
  static of(dims) {
    const list = Array.from(dims, (d) => {
      if (!Number.isSafeInteger(d) && typeof d !== 'bigint') throw new TypeError(`Shape: dimension ${d} is not an integer`);
      return d;
    });
    const jb = new JsBlock(list.length * 8);
    list.forEach((d, i) => { if (typeof d === 'bigint') jb.i64[i] = d; else writeInt(jb, 8 * i, d); });
    checkCall(api.PFShapeCreate(list.length ? jb.addr : 0, list.length, scratch.addr));
    return adoptObject(readPtr(scratch, 0));
  }

  _adopted() {
    checkCall(api.PFShapeGetData(this[kHandle], scratch.addr, scratch.addr + 8));
    const n = readInt(scratch, 8);
    this.dims = Object.freeze(n ? Array.from(koffi.decode(readPtr(scratch, 0), 'int64_t', n), (d) => (Number.isSafeInteger(Number(d)) ? Number(d) : d)) : []);
    this.length = n;
  }

  at(i) { return this.dims.at(i); }

  [Symbol.iterator]() { return this.dims[Symbol.iterator](); }

  toArray() { return this.dims.slice(); }

  toJSON() { return this.toArray(); }
}

// A mutable, thread-safe sequence held by packedfunc (a C List).
class List extends PackedObject {
  static of(items = []) {
    return createContainer((ctx) => {
      const arr = Array.from(items);
      const [jb, codesOff] = encodeItems(arr, ctx, 'List.of', 'item');
      return api.PFListCreate(jb.addr, jb.addr + codesOff, arr.length, scratch.addr);
    });
  }

  get length() { return readSize(api.PFListGetSize, this, 'the list'); }

  get(i) {
    checkCall(api.PFListGetItem(liveHandle(this, 'the list'), i, scratch.addr, scratch.addr + 8));
    return scratchItem(0, 8, false);
  }

  at(i) { return this.get(i); }

  set(i, value) { withValue(value, 'List.set', (raw, code) => api.PFListSetItem(liveHandle(this, 'the list'), i, raw, code)); }

  push(...values) { for (const v of values) withValue(v, 'List.push', (raw, code) => api.PFListAppend(liveHandle(this, 'the list'), raw, code)); return this.length; }

  append(value) { this.push(value); }

  insert(i, value) { withValue(value, 'List.insert', (raw, code) => api.PFListInsert(liveHandle(this, 'the list'), i, raw, code)); }

  pop(i = -1) {
    checkCall(api.PFListPop(liveHandle(this, 'the list'), i, scratch.addr, scratch.addr + 8));
    return scratchItem(0, 8, false);
  }

  clear() { checkCall(api.PFListClear(liveHandle(this, 'the list'))); }

  * [Symbol.iterator]() { const n = this.length; for (let i = 0; i < n; i++) yield this.get(i); }

  toArray() { return Array.from(this, toJS); }

  toJSON() { return this.toArray(); }
}

// Adopts the container that `create(ctx)` makes, its handle written to
// scratch; the references made in ctx for its items are dropped after.
function createContainer(create) {
  const ctx = newCtx(null);
  try {
    checkCall(create(ctx));
    return adoptObject(readPtr(scratch, 0));
  } finally {
    releaseCtx(ctx);
  }
}

// The size of a List or Dict, read by `getSize` (PFListGetSize, PFDictGetSize).
function readSize(getSize, obj, what) {
  checkCall(getSize(liveHandle(obj, what), scratch.addr));
  return readInt(scratch, 0);
}

// Calls `call(raw, code)` with a value passed by value; the references made
// for it are dropped after.
function withValue(value, pos, call) {
  const [raw, code, ctx] = valueArg(value, pos);
  try { checkCall(call(raw, code)); } finally { releaseCtx(ctx); }
}

// A mutable, thread-safe mapping held by packedfunc (a C Dict): keys of
// any plain type, in insertion order.
class Dict extends PackedObject {
  static of(entries = {}) {
    return createContainer((ctx) => {
      const [keys, values] = mapEntries(entries instanceof Map ? entries : (Array.isArray(entries) ? new Map(entries) : entries), 'Dict.of');
      const [kb, kc] = encodeItems(keys, ctx, 'Dict.of', 'key');
      const [vb, vc] = encodeItems(values, ctx, 'Dict.of', 'value');
      return api.PFDictCreate(kb.addr, kb.addr + kc, vb.addr, vb.addr + vc, keys.length, scratch.addr);
    });
  }

  get size() { return readSize(api.PFDictGetSize, this, 'the dict'); }

  get(key) {
    const [raw, code, ctx] = valueArg(key, 'Dict key');
    try {
      checkCall(api.PFDictGetItem(liveHandle(this, 'the dict'), raw, code, scratch.addr, scratch.addr + 8, scratch.addr + 16));
    } finally { releaseCtx(ctx); }
    if (!scratch.i32[4]) return undefined;
    return scratchItem(0, 8, false);
  }

  has(key) { return this.get(key) !== undefined || this._hasNull(key); }

  _hasNull(key) {
    const [raw, code, ctx] = valueArg(key, 'Dict key');
    try {
      checkCall(api.PFDictGetItem(liveHandle(this, 'the dict'), raw, code, 0, 0, scratch.addr + 16));
    } finally { releaseCtx(ctx); }
    return scratch.i32[4] !== 0;
  }

  set(key, value) {
    const [kraw, kcode, kctx] = valueArg(key, 'Dict key');
    try {
      withValue(value, 'Dict value', (raw, code) => api.PFDictSetItem(liveHandle(this, 'the dict'), kraw, kcode, raw, code));
    } finally { releaseCtx(kctx); }
    return this;
  }

  pop(key) {
    const [raw, code, ctx] = valueArg(key, 'Dict key');
    try {
      checkCall(api.PFDictPop(liveHandle(this, 'the dict'), raw, code, scratch.addr, scratch.addr + 8));
    } finally { releaseCtx(ctx); }
    return scratchItem(0, 8, false);
  }

  delete(key) {
    if (!this.has(key)) return false;
    this.pop(key);
    return true;
  }

  clear() { checkCall(api.PFDictClear(liveHandle(this, 'the dict'))); }

  * entries() {
    checkCall(api.PFDictToArray(liveHandle(this, 'the dict'), scratch.addr));
    const snapshot = adoptObject(readPtr(scratch, 0));
    try {
      for (let i = 0; i + 1 < snapshot.length; i += 2) yield [snapshot.at(i), snapshot.at(i + 1)];
    } finally {
      snapshot.dispose();
    }
  }

  * keys() { for (const [k] of this.entries()) yield k; }

  * values() { for (const [, v] of this.entries()) yield v; }

  [Symbol.iterator]() { return this.entries(); }

  toMap() { return new Map(Array.from(this.entries(), ([k, v]) => [k, toJS(v)])); }

  toObject() { return Object.fromEntries(Array.from(this.entries(), ([k, v]) => [k, toJS(v)])); }

  toJSON() { return this.toObject(); }
}

// A container as plain JavaScript (arrays and objects), recursively.
function toJS(v) {
  if (v instanceof PackedArray || v instanceof List || v instanceof Shape) return v.toArray();
  if (v instanceof PackedMap || v instanceof Dict) return v.toObject();
  return v;
}

registerObjectType(OBJECT_TYPES.array, (h, i) => PackedArray[ADOPT](h, i));
registerObjectType(OBJECT_TYPES.map, (h, i) => PackedMap[ADOPT](h, i));
registerObjectType(OBJECT_TYPES.shape, (h, i) => Shape[ADOPT](h, i));
registerObjectType(OBJECT_TYPES.list, (h, i) => List[ADOPT](h, i));
registerObjectType(OBJECT_TYPES.dict, (h, i) => Dict[ADOPT](h, i));

// ---- modules -------------------------------------------------------------------------------

// A packedfunc module: functions that came together from a shared library.
// Its functions are properties by their dotted names (mod.demo.add for
// "demo.add"), and items by full name (mod.get('demo.add')).
class Module extends PackedObject {
  _adopted() {
    this.path = null;
    this._cache = new Map();
    this._names = null;
  }

  listFunctionNames() {
    if (this._names === null) {
      checkCall(api.PFModListFunctionNames(liveHandle(this, 'the module'), scratch.addr, scratch.addr + 8));
      const n = scratch.i32[0];
      const arr = readPtr(scratch, 8);
      this._names = n ? Array.from(koffi.decode(arr, 'const char*', n)) : [];
    }
    return this._names.slice();
  }

  // The function `name` (full name), or of its imports; null when missing
  // with allowMissing, else a FunctionNotFoundError.
  get(name, { queryImports = true, allowMissing = false } = {}) {
    let f = this._cache.get(name);
    if (f !== undefined) return f;
    nameArg('Module.get', name);
    checkCall(api.PFModGetFunction(liveHandle(this, 'the module'), name, queryImports ? 1 : 0, scratch.addr));
    const h = readPtr(scratch, 0);
    if (!h) {
      if (allowMissing) return null;
      const { FunctionNotFoundError } = require('./errors.js');
      throw new FunctionNotFoundError(`packedfunc: module ${this.path ?? ''} has no function named '${name}'`);
    }
    f = adoptFunction(h);
    this._cache.set(name, f);
    return f;
  }

  // Registers each of the module's functions globally as prefix + name.
  exportGlobal(prefix = '', { override = false, protected: prot = false } = {}) {
    nameArg('Module.exportGlobal', prefix, 'prefix');
    checkCall(api.PFModExportGlobal(liveHandle(this, 'the module'), prefix, (override ? 1 : 0) | (prot ? 2 : 0)));
    return this.listFunctionNames().map((n) => prefix + n);
  }

  // The classes of the object types that the module registered, by key.
  // Each class keeps the module loaded (its types go with it).
  get types() {
    checkCall(api.PFModListTypes(liveHandle(this, 'the module'), scratch.addr, scratch.addr + 8));
    const n = scratch.i32[0];
    const out = {};
    if (n) {
      for (const idx of koffi.decode(readPtr(scratch, 8), 'uint32_t', n)) {
        const cls = objectClass(idx);
        classModule.set(cls, this);
        out[api.PFObjectTypeName(idx)] = cls;
      }
    }
    return out;
  }
}

// Builds mod.a.b properties for the dotted names (a method's name wins over
// a function's: use get() for those).
function exposeNames(target, module, names, prefix) {
  const children = new Set();
  for (const n of names) if (n.startsWith(prefix)) children.add(n.slice(prefix.length).split('.')[0]);
  for (const child of children) {
    if (child in target) continue;
    const full = prefix + child;
    Object.defineProperty(target, child, {
      enumerable: true,
      configurable: true,
      get() {
        const f = names.includes(full) ? module.get(full) : null;
        if (f !== null) return f;
        const ns = Object.create(null);
        exposeNames(ns, module, names, `${full}.`);
        Object.defineProperty(target, child, { value: ns, enumerable: true, configurable: true });
        return ns;
      },
    });
  }
}

registerObjectType(OBJECT_TYPES.module, (h, i) => {
  const m = Module[ADOPT](h, i);
  exposeNames(m, m, m.listFunctionNames(), '');
  return m;
});

// ---- registered object types -----------------------------------------------------------------

// Classes by type index, held weakly (an instance holds its class), so
// that a module whose classes are all gone can be unloaded; the module
// of a class from Module.types, held as long as the class is.
const classes = new Map(); // type index -> WeakRef of its class
const classModule = new WeakMap(); // class -> its Module

function readTypeInfo(index) {
  checkCall(api.PFObjectTypeGetInfo(index, scratch.addr));
  const info2 = koffi.decode(readPtr(scratch, 0), PFObjectTypeInfo);
  const ptrs = (p, n) => (n ? Array.from(koffi.decode(p, 'intptr_t', n), Number) : []);
  const fields = ptrs(info2.fields, info2.num_fields).map((p) => ({ ptr: p, ...koffi.decode(p, PFFieldInfo) }));
  const methods = ptrs(info2.methods, info2.num_methods).map((p) => koffi.decode(p, PFMethodInfo));
  return { ...info2, fields, methods };
}

function typeFunction(getter) {
  checkCall(getter(scratch.addr));
  return adoptFunction(readPtr(scratch, 0));
}

// The JavaScript class of a registered object type: a subclass of its
// parent's class (PackedObject for a root), whose constructor calls the
// type's constructor, whose fields are properties and whose methods are
// methods (static methods static).
function objectClass(index) {
  let cls = classes.get(index)?.deref();
  if (cls !== undefined) return cls;
  const t = readTypeInfo(index);
  const parent = t.parent_index ? objectClass(t.parent_index) : PackedObject;
  let ctor = null;
  const key = t.key;
  cls = {
    [key.split('.').pop()]: class extends parent {
      // Calls the type's constructor, which returns the instance (a derived
      // constructor may return an object instead of calling super).
      constructor(...args) { // eslint-disable-line constructor-super
        if (ctor === null) ctor = typeFunction((out) => api.PFObjectTypeGetConstructor(index, out));
        const made = ctor(...args);
        return made;
      }
    },
  }[key.split('.').pop()];
  Object.defineProperty(cls, 'typeKey', { value: key });
  Object.defineProperty(cls, 'typeIndex', { value: index });
  if (t.doc) Object.defineProperty(cls, 'doc', { value: t.doc });
  for (const f of t.fields) {
    if (f.type_index !== index) continue;
    const writable = (f.flags & 1) !== 0;
    Object.defineProperty(cls.prototype, f.name, {
      enumerable: true,
      configurable: true,
      get() {
        checkCall(api.PFObjectGetField(liveHandle(this, key), f.ptr, scratch.addr, scratch.addr + 8));
        const code = scratch.i32[2];
        // A str, bytes or handle points into the instance; the others are copies.
        if (!COPIED.has(code)) freeHandle(this, `field '${f.name}' of ${key}`);
        return scratchItem(0, 8);
      },
      set(v) {
        if (!writable) throw new TypeError(`packedfunc: field '${f.name}' of ${key} is read-only`);
        const where = `field '${f.name}' of ${key}`;
        withValue(v, `field '${f.name}'`, (raw, code) => api.PFObjectSetField(freeHandle(this, where), f.ptr, raw, code));
      },
    });
  }
  for (const m of t.methods) {
    if (m.type_index !== index || m.name === '__init__') continue;
    let fn = null;
    const get = () => {
      if (fn === null) fn = typeFunction((out) => api.PFObjectTypeGetMethod(index, m.name, out));
      return fn;
    };
    if (m.flags & 1) {
      Object.defineProperty(cls, m.name, { value: (...args) => get()(...args), configurable: true, writable: true });
    } else {
      Object.defineProperty(cls.prototype, m.name, {
        value: function method(...args) { return get()(this, ...args); },
        configurable: true,
        writable: true,
      });
    }
  }
  classes.set(index, new WeakRef(cls));
  return cls;
}

adoptRegistered = (h, index) => {
  let cls;
  try {
    cls = objectClass(index);
  } catch (err) {
    api.PFObjectFree(h);
    throw err;
  }
  return PackedObject[ADOPT].call(cls, h, index);
};

// The class of the registered object type `key` ("demo.Counter").
function getObjectType(key) {
  nameArg('getObjectType', key, 'key');
  checkCall(api.PFObjectTypeFind(key, scratch.addr));
  const index = scratch.u32[0];
  if (!index) {
    const { FunctionNotFoundError } = require('./errors.js');
    const err = new FunctionNotFoundError(`packedfunc: no object type named '${key}'`);
    throw err;
  }
  return objectClass(index);
}

// What a value crosses to C as: a PackedFunction for a function, a
// PackedArray / PackedMap for an array or a plain object / Map, a typed
// array over a new tensor object for tensor(...), and the value itself for
// everything else that can cross.
function convert(x) {
  if (typeof x === 'function') return convertFunction(x);
  if (x instanceof TensorArg) return adoptTensor(tensorObjectFrom(x));
  if (Array.isArray(x) || x instanceof Map || (x !== null && typeof x === 'object' &&
      (Object.getPrototypeOf(x) === Object.prototype || Object.getPrototypeOf(x) === null))) {
    const ctx = newCtx(null);
    try {
      const h = containerFrom(x, ctx, 'the value given to convert', Array.isArray(x) ? makeArray : makeMap);
      ctx.release.pop(); // the outermost (made last): its reference is the wrapper's
      return adoptObject(h);
    } finally {
      releaseCtx(ctx);
    }
  }
  const jb = new JsBlock(8);
  const ctx = newCtx(null);
  try { encode(x, jb, 0, ctx, 'the value given to convert'); } finally { releaseCtx(ctx); }
  return x;
}

function tensor(data, shape, dtype) { return new TensorArg(data, shape, dtype); }

module.exports = {
  kHandle, kState, adoptFunction, adoptObject, convert, convertFunction, PackedFunction, PackedObject,
  PackedArray, PackedMap, Shape, List, Dict, Module, TensorArg, tensor, getObjectType, objectClass,
  setThreadCallTimeout, heldCount, readPtr, scratch,
};
