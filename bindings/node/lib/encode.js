'use strict';
// JavaScript -> C: encode() writes a value's 8 bytes and type code into C
// memory that JavaScript sees through typed arrays (a call frame, a
// callback's result slot, a container's items); arrays, Maps and plain
// objects become new C containers for the call. Private.

const { api, scratch, TYPE_CODES } = require('./library.js');
const { checkCall } = require('./errors.js');
const { DataType, Device, OpaqueHandle } = require('./types.js');
const { writeInt, readPtr, writePtr, JsBlock } = require('./words.js');
const { arenaAlloc, viewAddress, newCtx, releaseCtx } = require('./frames.js');
const { kHandle, what, describe, liveHandle } = require('./wrappers.js');
const { TensorArg, writeDLTensor } = require('./tensors.js');
const { floatParam } = require('./funcinfo.js');
const { hostFunction } = require('./held.js');

const { int: INT, float: FLOAT, bool: BOOL, null: NULL, handle: HANDLE, dtype: DTYPE, device: DEVICE,
  tensor: TENSOR, str: STR, bytes: BYTES, function: FUNC, object: OBJECT } = TYPE_CODES;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
const MAX_DEPTH = 1000; // nesting of JavaScript containers
// The most items of an Array that crosses: V8's own bound on an array's
// stored elements (FixedArray::kMaxLength is just under 2**27), so no dense
// Array is refused; only a Proxy or a sparse Array can claim more.
const MAX_ITEMS = 2 ** 27;

const encoder = new TextEncoder();

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
      if (Number.isInteger(x) && !Number.isSafeInteger(x)) hint(ctx, 'float', pos, x);
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
      hint(ctx, 'bytes', pos, x);
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

// Values that cross as what a callee may not take, though the caller may
// have meant another type: an integer beyond 2^53 (a float, not an int64)
// and a Uint8Array or Buffer (bytes, not a tensor). If the call fails
// saying it got that type, the error says what to pass instead.
function hint(ctx, kind, pos, x) {
  if (ctx.hints === null) ctx.hints = [];
  ctx.hints.push([kind, pos, x]);
}

const HINTS = {
  float: (pos, x) => (x >= -(2 ** 63) && x < 2 ** 63
    ? `${what(pos)} is ${x}, an integer beyond Number.MAX_SAFE_INTEGER, which crosses as a float: ` +
      `pass a BigInt for an int64, such as ${BigInt(x)}n`
    : `${what(pos)} is ${x}, which int64 cannot hold`),
  bytes: (pos, x) => `${what(pos)} is a ${describe(x)}, which crosses as bytes: ` +
    'pass pf.tensor(array) for a uint8 tensor over its memory',
};

// lastError's note for the call that `ctx` encoded: the hints whose type a
// TypeError says the callee got; null without hints.
function hintsFor(ctx) {
  if (ctx === null || ctx.hints === null) return null;
  const { hints } = ctx;
  return (kind, message) => {
    if (kind !== 'TypeError') return null;
    const notes = hints.filter(([type]) => message.includes(`got ${type}`)).map(([type, pos, x]) => HINTS[type](pos, x));
    return notes.length ? notes.join('; ') : null;
  };
}

// A new C Array or Map for a JavaScript array, Map or plain object (nested
// ones too), released after the call: C keeps its own reference if it
// keeps it. One met again in the same encoding is the same C container
// (`made`), as in Python: a graph that shares costs its own size, not
// that of the tree it unfolds to.
function containerFrom(x, ctx, pos, make) {
  const made = ctx.made === null ? undefined : ctx.made.get(x);
  if (made !== undefined) return made;
  if (ctx.depth >= MAX_DEPTH) throw new RangeError(`packedfunc: ${what(pos)}: containers nested more than ${MAX_DEPTH} deep`);
  if (ctx.seen === null) ctx.seen = []; // the containers being made, outermost first (a stack)
  if (ctx.seen.includes(x)) throw new RangeError(`packedfunc: ${what(pos)}: a container that contains itself`);
  ctx.seen.push(x);
  ctx.depth++;
  try {
    const h = make(x, ctx, pos);
    ctx.release.push(h);
    (ctx.made ??= new Map()).set(x, h);
    return h;
  } finally {
    ctx.depth--;
    ctx.seen.pop();
  }
}

// Where an item is, for messages: its text is made only for one.
class ItemPos {
  constructor(pos, label, i) {
    this.pos = pos;
    this.label = label;
    this.i = i;
  }

  toString() { // iterative: positions nest up to MAX_DEPTH deep
    const parts = [];
    let p = this;
    for (; p instanceof ItemPos; p = p.pos) parts.push(`${p.label} ${p.i}`);
    return [what(p), ...parts.reverse()].join(', ');
  }
}

// Values (and codes) of `items` in the call's arena (JavaScript memory when
// there is no frame, or it is full): their addresses.
// `n`: the count of `items` when the caller has read it already.
function encodeItems(items, ctx, pos, label, n = items.length) {
  const { blk, off, addr } = arenaAlloc(ctx, n * 12 + 8);
  const codes = (off + n * 8) >> 2;
  for (let i = 0; i < n; i++) {
    blk.i32[codes + i] = encode(items[i], blk, off + i * 8, ctx, new ItemPos(pos, label, i));
  }
  return { values: addr, codes: addr + n * 8 };
}

// The length of an Array, read once (a Proxy may answer each read anew),
// checked before anything is allocated for its items.
function arrayLength(x, pos) {
  const n = x.length;
  if (!Number.isSafeInteger(n) || n < 0) {
    const shown = typeof n === 'number' ? String(n) : describe(n);
    throw new TypeError(`packedfunc: ${what(pos)}: an Array whose length (${shown}) is not a non-negative safe integer`);
  }
  if (n > MAX_ITEMS) throw new RangeError(`packedfunc: ${what(pos)}: an Array of ${n} items, more than ${MAX_ITEMS} (the most that crosses)`);
  return n;
}

function makeArray(x, ctx, pos) {
  const n = arrayLength(x, pos);
  const items = encodeItems(x, ctx, pos, 'item', n);
  checkCall(api.PFArrayCreate(items.values, items.codes, n, scratch.addr));
  return readPtr(scratch, 0);
}

function integerLike(k) {
  const c = k.charCodeAt(0); // most keys start with neither a digit nor '-'
  return ((c >= 48 && c <= 57) || c === 45) && /^-?(0|[1-9][0-9]{0,15})$/.test(k) && Number.isSafeInteger(Number(k));
}

function mapEntries(x, pos) {
  const keys = [];
  const values = [];
  if (!(x instanceof Map)) {
    for (const k of Object.keys(x)) {
      // A plain object's integer-like keys are ints to C as they were to the writer.
      keys.push(integerLike(k) ? Number(k) : k);
      values.push(x[k]);
    }
    return [keys, values];
  }
  for (const [k, v] of x) {
    if (typeof k === 'string' || (typeof k === 'number' && Number.isSafeInteger(k)) || typeof k === 'bigint') {
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
  const k = encodeItems(keys, ctx, pos, 'key');
  const v = encodeItems(values, ctx, pos, 'value');
  checkCall(api.PFMapCreate(k.values, k.codes, v.values, v.codes, keys.length, scratch.addr));
  return readPtr(scratch, 0);
}

// A value as the 8 bytes of a PFValue passed by value, and its code.
function valueArg(x, pos) {
  const jb = new JsBlock(8);
  const ctx = newCtx(null);
  try {
    const code = encode(x, jb, 0, ctx, pos);
    return [jb.u64[0], code, ctx];
  } catch (err) {
    releaseCtx(ctx); // the caller releases it only on success
    throw err;
  }
}

module.exports = {
  encode, hintsFor, registerObjectEncoder, containerFrom, encodeItems, makeArray, makeMap, mapEntries, valueArg,
};
