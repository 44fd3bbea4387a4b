'use strict';
// Tensors: typed arrays passed as DLTensors (tensor(array, shape, dtype)),
// tensor objects seen as typed arrays over their memory, tensors that C
// lends a callback (copied), and tensor objects made over a typed array's
// memory, which C may keep. Private.

const { koffi, api, helperApi, scratch, DLTensor } = require('./library.js');
const { checkCall, PackedFuncError } = require('./errors.js');
const { DataType, Device } = require('./types.js');
const { writeInt, readPtr, writePtr, JsBlock } = require('./words.js');
const { arenaAlloc, viewAddress, pin } = require('./frames.js');
const { kHandle, lifetime, registry, describe } = require('./wrappers.js');
const { held, keep, ENV, TENSOR_DELETER } = require('./held.js');
const { custom } = require('./inspect.js');

// The DLPack dtype of a typed array's elements.
const ARRAY_DTYPES = new Map([
  [Int8Array, [0, 8]], [Uint8Array, [1, 8]], [Uint8ClampedArray, [1, 8]], [Int16Array, [0, 16]],
  [Uint16Array, [1, 16]], [Int32Array, [0, 32]], [Uint32Array, [1, 32]], [Float32Array, [2, 32]],
  [Float64Array, [2, 64]], [BigInt64Array, [0, 64]], [BigUint64Array, [1, 64]],
]);

// The dtype (code, bits) of a typed array's elements, also of a subclass's
// (a Buffer's: uint8).
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
  const props = {
    shape: t.shape, dtype: t.dtype, device: t.device, strides: t.strides ?? compactStrides(t.shape),
    [custom]: inspectTensor,
  };
  for (const k of Reflect.ownKeys(props)) Object.defineProperty(arr, k, { value: props[k], enumerable: false });
  return arr;
}

// console.log shows the dtype, shape and device, then the elements as
// Node.js shows the typed array: Tensor(float32, [2, 3], cpu:0) Float32Array(6) [...].
function inspectTensor(depth, options, inspect) {
  const label = `Tensor(${this.dtype}, [${this.shape.join(', ')}], ${this.device})`;
  if (depth < 0) return options.stylize(`[${label}]`, 'special');
  const plain = new this.constructor(this.buffer, this.byteOffset, this.length);
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


const tensorRegistry = new FinalizationRegistry((h) => { if (!lifetime.shuttingDown) api.PFObjectFree(h); });

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

// A tensor argument over a typed array, with a shape and dtype of its own.
function tensor(data, shape, dtype) { return new TensorArg(data, shape, dtype); }

module.exports = {
  TensorArg, tensor, writeDLTensor, adoptTensor, borrowedTensor, writeBack, tensorObjectFrom,
};
