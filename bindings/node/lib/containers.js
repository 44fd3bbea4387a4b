'use strict';
// Containers: PackedArray and PackedMap (immutable, made from JavaScript
// arrays, Maps and plain objects when they cross), Shape, and the mutable,
// thread-safe List and Dict. Private.

const { koffi, api, scratch, TYPE_CODES, OBJECT_TYPES } = require('./library.js');
const { checkCall, nameArg } = require('./errors.js');
const { readInt, writeInt, readPtr, JsBlock } = require('./words.js');
const { newCtx, releaseCtx } = require('./frames.js');
const { kHandle, ADOPT, liveHandle } = require('./wrappers.js');
const { encodeItems, mapEntries, valueArg } = require('./encode.js');
const { decode, adoptObject, typeIndexOf, registerObjectType, scratchItem } = require('./decode.js');
const { PackedObject } = require('./objects.js');
const { inspectSequence, inspectMapping, kInspect } = require('./inspect.js');

const { int: INT, str: STR, object: OBJECT } = TYPE_CODES;

// An immutable sequence of values held by packedfunc (a C Array).
class PackedArray extends PackedObject {
  _adopted() {
    this.length = readSize(api.PFArrayGetSize, this[kHandle]);
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
  toArray() { return plainArray(liveHandle(this, 'the array'), this.length); }

  toJSON() { return this.toArray(); }

  [kInspect](depth, options) { return inspectSequence('PackedArray', this.length, (k) => firstItems(this, k), depth, options); }
}

// An immutable mapping held by packedfunc (a C Map), with string or
// integer keys in insertion order.
class PackedMap extends PackedObject {
  _adopted() {
    this.size = readSize(api.PFMapGetSize, this[kHandle]);
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
  toObject() { return plainObject(liveHandle(this, 'the map'), this.size); }

  toMap() { return new Map(Array.from(this.entries(), ([k, v]) => [k, toJS(v)])); }

  toJSON() { return this.toObject(); }

  [kInspect](depth, options) { return inspectMapping('PackedMap', this.size, (k) => firstItems(this.entries(), k), depth, options); }
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

  [kInspect](depth, options) { return inspectSequence('Shape', this.length, (k) => this.dims.slice(0, k), depth, options); }
}

// A mutable, thread-safe sequence held by packedfunc (a C List).
class List extends PackedObject {
  static of(items = []) {
    return createContainer((ctx) => {
      const arr = Array.from(items);
      const encoded = encodeItems(arr, ctx, 'List.of', 'item');
      return api.PFListCreate(encoded.values, encoded.codes, arr.length, scratch.addr);
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

  [kInspect](depth, options) { return inspectSequence('List', this.length, (k) => firstItems(this, k), depth, options); }
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

// The size of a container (a handle, or a wrapper that `what` names), read
// by `getSize` (PFArrayGetSize, PFMapGetSize, PFListGetSize, PFDictGetSize).
function readSize(getSize, obj, what) {
  checkCall(getSize(typeof obj === 'number' ? obj : liveHandle(obj, what), scratch.addr));
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
      const k = encodeItems(keys, ctx, 'Dict.of', 'key');
      const v = encodeItems(values, ctx, 'Dict.of', 'value');
      return api.PFDictCreate(k.values, k.codes, v.values, v.codes, keys.length, scratch.addr);
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

  [kInspect](depth, options) { return inspectMapping('Dict', this.size, (k) => firstItems(this.entries(), k), depth, options); }
}

// The first k items of an iterable (a container's items or entries).
function firstItems(iterable, k) {
  const out = [];
  if (k === 0) return out;
  for (const x of iterable) {
    out.push(x);
    if (out.length === k) break;
  }
  return out;
}

// ---- containers read whole into plain JavaScript ----
//
// toArray() and toObject() of an Array or Map read the Arrays and Maps
// nested in it by their handles, borrowed while the outer one is read,
// rather than through wrappers: no reference taken and dropped, and no
// wrapper to collect, per nested container.

// The item that a reader wrote at blk[off] (value) and blk[codeOff] (code),
// borrowed, as plain JavaScript.
function plainItem(blk, off, codeOff) {
  const code = blk.i32[codeOff >> 2];
  if (code === INT) return readInt(blk, off);
  if (code === OBJECT) {
    const h = readPtr(blk, off);
    const index = typeIndexOf(h);
    if (index === OBJECT_TYPES.array) return plainArray(h, readSize(api.PFArrayGetSize, h));
    if (index === OBJECT_TYPES.map) return plainObject(h, readSize(api.PFMapGetSize, h));
  }
  return toJS(decode(blk, off, code, true, null));
}

// An Array of n items as a JavaScript array.
function plainArray(h, n) {
  const out = new Array(n);
  for (let i = 0; i < out.length; i++) {
    checkCall(api.PFArrayGetItem(h, i, scratch.addr, scratch.addr + 8));
    out[i] = plainItem(scratch, 0, 8);
  }
  return out;
}

// A Map of n entries as a plain object (integer keys as their text).
function plainObject(h, n) {
  const out = {};
  for (let i = 0; i < n; i++) {
    checkCall(api.PFMapGetItemAt(h, i, scratch.addr, scratch.addr + 16, scratch.addr + 8, scratch.addr + 20));
    const key = plainItem(scratch, 0, 16); // a str or an int: read before the value's reads
    out[key] = plainItem(scratch, 8, 20);
  }
  return out;
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

module.exports = { PackedArray, PackedMap, Shape, List, Dict, withValue };
