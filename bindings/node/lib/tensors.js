'use strict';
// Tensors: typed arrays passed as DLTensors (tensor(array, shape, dtype)),
// tensor objects seen as typed arrays over their memory, tensors that C
// lends a callback (copied), and tensor objects made over a typed array's
// memory, which C may keep. Private.

const { koffi, api, helperApi, scratch, DLTensor } = require('./library.js');
const { checkCall } = require('./errors.js');
const { DataType, Device } = require('./types.js');
const { writeInt, readPtr, writePtr, JsBlock } = require('./words.js');
const { arenaAlloc, viewAddress, pin } = require('./frames.js');
const { kHandle, kState, lifetime, registry, describe } = require('./wrappers.js');
const { keep, ENV } = require('./held.js');
const { custom } = require('./inspect.js');

// The DLPack dtype of a typed array's elements (DataTypes are immutable:
// one of each serves every array).
const ARRAY_DTYPES = new Map([
  [Int8Array, [0, 8]], [Uint8Array, [1, 8]], [Uint8ClampedArray, [1, 8]], [Int16Array, [0, 16]],
  [Uint16Array, [1, 16]], [Int32Array, [0, 32]], [Uint32Array, [1, 32]], [Float32Array, [2, 32]],
  [Float64Array, [2, 64]], [BigInt64Array, [0, 64]], [BigUint64Array, [1, 64]],
].map(([cls, [code, bits]]) => [cls, new DataType(code, bits, 1)]));

// The memory of every tensor made over a typed array (immutable, as above).
const CPU = new Device(1, 0);

// The dtype of a typed array's elements, also of a subclass's (a Buffer's:
// uint8).
function arrayDtype(x) {
  const kind = ARRAY_DTYPES.get(x.constructor);
  if (kind !== undefined) return kind;
  for (const [cls, k] of ARRAY_DTYPES) if (x instanceof cls) return k;
  return undefined;
}

// A tensor argument: a typed array (one dimension, or the shape it carries
// from C), or tensor(array, shape).
class TensorArg {
  constructor(data, shape, dtype) {
    if (!ArrayBuffer.isView(data) || data instanceof DataView) {
      throw new TypeError(`tensor: expected a typed array, not ${describe(data)}`);
    }
    const kind = arrayDtype(data);
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
    this.dtype = dtype === undefined ? kind : new DataType(dtype);
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

// Typed array classes by DLPack (code, bits): bool and 16-bit floats come
// as their raw bits.
const ARRAY_CLASSES = new Map([
  [[0, 8], Int8Array], [[0, 16], Int16Array], [[0, 32], Int32Array], [[0, 64], BigInt64Array],
  [[1, 8], Uint8Array], [[1, 16], Uint16Array], [[1, 32], Uint32Array], [[1, 64], BigUint64Array],
  [[2, 16], Uint16Array], [[2, 32], Float32Array], [[2, 64], Float64Array],
  [[4, 16], Uint16Array], // bfloat16
  [[6, 8], Uint8Array], // kDLBool
].map(([[code, bits], cls]) => [code * 256 + bits, cls]));

function arrayClassOf(code, bits) { return ARRAY_CLASSES.get(code * 256 + bits); }

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

// A tensor seen from JavaScript is a typed array of a subclass of its
// element class (TensorArray), whose prototype reads shape, dtype,
// device, strides and the object's handle from one record: one store per
// array, where properties of its own would be five slow definitions.
// Arrays derived from one (slice, map, subarray) have no record: they are
// plain arrays, whose shape and handle are undefined. (A Symbol.species
// getter would make them of the element class, but V8 then never optimizes
// the constructor, as it does when the class's name is changed.)
const viewClasses = new Map(); // element class -> its tensor subclass

const TENSOR_PROPERTIES = {
  shape: { get() { return this[kState]?.shape; } },
  dtype: { get() { return this[kState]?.dtype; } },
  device: { get() { return this[kState]?.device; } },
  strides: {
    get() {
      const st = this[kState];
      return st === undefined ? undefined : st.strides ?? (st.strides = compactStrides(st.shape));
    },
  },
  [kHandle]: { get() { return this[kState]?.h; }, set(h) { this[kState].h = h; } },
  [custom]: { value: inspectTensor },
};

// A typed array of class `base` over (buffer, offset, length) with the
// tensor record `st`: {h (undefined for a copy), shape, dtype, device,
// strides (null: compact)}.
function tensorView(base, st, buffer, offset, length) {
  let cls = viewClasses.get(base);
  if (cls === undefined) {
    cls = class TensorArray extends base {
      // The record is stored here, not after: V8 then optimizes this.
      constructor(buf, off, len, st) { super(buf, off, len); this[kState] = st; }
    };
    Object.defineProperties(cls.prototype, TENSOR_PROPERTIES);
    viewClasses.set(base, cls);
  }
  return new cls(buffer, offset, length, st);
}

// console.log shows the dtype, shape and device, then the elements as
// Node.js shows the typed array: Tensor(float32, [2, 3], cpu:0) Float32Array(6) [...].
function inspectTensor(depth, options, inspect) {
  const plain = new (Object.getPrototypeOf(this.constructor))(this.buffer, this.byteOffset, this.length);
  if (this[kState] === undefined) return inspect(plain, options); // derived: a plain array
  const label = `Tensor(${this.dtype}, [${this.shape.join(', ')}], ${this.device})`;
  if (depth < 0) return options.stylize(`[${label}]`, 'special');
  return `${label} ${inspect(plain, options)}`;
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
    const view = viewOf(t, 'tensor object');
    arr = tensorView(view.constructor, { h, shape: t.shape, dtype: t.dtype, device: t.device, strides: t.strides },
      view.buffer, 0, view.length);
  } catch (err) {
    api.PFObjectFree(h);
    throw err;
  }
  if (arr.buffer.byteLength) {
    // The memory belongs to the object: freed when the last view of it goes.
    tensorRegistry.register(arr.buffer, h);
  } else {
    registry.register(arr, h);
  }
  return arr;
}


const tensorRegistry = new FinalizationRegistry((h) => { if (!lifetime.shuttingDown) api.PFObjectFree(h); });

// A borrowed DLTensor* (C lends its memory for the call only) as a typed
// array over a private copy; with `copies`, the copy is written back into
// C's memory when the callback returns, if and only if it changed.
// The copy is compact (row-major) whatever C's strides are.
function borrowedTensor(ptr, copies) {
  const t = readDLTensor(ptr);
  const view = viewOf(t, 'a borrowed tensor');
  const at = t.strides === null ? null : elementOffsets(t.shape, t.strides);
  const n = at === null ? view.length : at.length;
  const copy = tensorView(view.constructor, { h: undefined, shape: t.shape, dtype: t.dtype, device: t.device, strides: null },
    new ArrayBuffer(n * view.BYTES_PER_ELEMENT), 0, n);
  if (at === null) copy.set(view);
  else for (let i = 0; i < n; i++) copy[i] = view[at[i]];
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

// A new tensor object over a typed array's memory (x, or tensor(...)): C
// may keep it; the array stays alive until C's last reference goes, its
// buffer pinned (a resizable one is copied instead, see viewAddress). The
// object's handle, and the array it is over.
function createTensorObject(x) {
  const t = x instanceof TensorArg ? x : new TensorArg(x);
  const data = t.data.buffer.resizable ? t.data.slice() : t.data;
  pin(data);
  // The helper's pfnode_tensor_spec: {data, ndim, code, bits, lanes, shape[]},
  // after the handle's room in scratch (a JsBlock for very many dimensions).
  const ndim = t.shape.length;
  const blk = 24 + 8 * ndim <= scratch.size ? scratch : new JsBlock(8 + 16 + 8 * ndim);
  writePtr(blk, 8, data.length ? Number(koffi.address(data)) : 0);
  blk.i32[4] = ndim;
  blk.u8[20] = t.dtype.code;
  blk.u8[21] = t.dtype.bits;
  blk.u16[11] = t.dtype.lanes;
  for (let i = 0; i < ndim; i++) writeInt(blk, 24 + 8 * i, t.shape[i]);
  checkCall(helperApi.tensorCreate(ENV, keep(data), blk.addr + 8, scratch.addr)); // on failure the key was handed back
  return { h: readPtr(scratch, 0), t, data };
}

// A tensor object for C to take (a callback's result).
function tensorObjectFrom(x) { return createTensorObject(x).h; }

// A new tensor object over a typed array's memory, as the typed array that
// wraps it (convert(tensor(a))): a view of the same memory, which JavaScript
// owns, so the wrapper alone holds the object's reference.
function newTensorObject(x) {
  const { h, t, data } = createTensorObject(x);
  const cls = t.dtype.lanes === 1 ? arrayClassOf(t.dtype.code, t.dtype.bits) : undefined;
  if (cls === undefined) return adoptTensor(h); // its message
  const arr = tensorView(cls, { h, shape: t.shape, dtype: t.dtype, device: CPU, strides: null },
    data.buffer, data.byteOffset, data.length);
  registry.register(arr, h);
  return arr;
}

// A tensor argument over a typed array, with a shape and dtype of its own.
function tensor(data, shape, dtype) { return new TensorArg(data, shape, dtype); }

module.exports = {
  TensorArg, tensor, writeDLTensor, adoptTensor, borrowedTensor, writeBack, tensorObjectFrom, newTensorObject,
};
