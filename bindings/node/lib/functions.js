'use strict';
// Packed functions: the wrapper of a function handle (a callable
// JavaScript function), and a call. Arguments go to C through a call
// frame, with one argument to PFFuncCallFrame, the frame's address, so
// that koffi converts nothing per argument. Private.

const { api, TYPE_CODES } = require('./library.js');
const { checkCall, lastError, nameArg } = require('./errors.js');
const { readInt, writePtr } = require('./words.js');
const { FRAME_ARGS, NFRAMES, frames, stack, bigFrame, newCtx, releaseCtx, unpinnedCalls } = require('./frames.js');
const { kHandle, kState, registry, describe, liveHandle } = require('./wrappers.js');
const { info, levelOf } = require('./funcinfo.js');
const { encode, hintsFor } = require('./encode.js');
const { decode, adopters } = require('./decode.js');
const { shared, hostFunction } = require('./held.js');
const { custom } = require('./inspect.js');

const { int: INT } = TYPE_CODES;

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

adopters.function = adoptFunction;

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
// console.log shows the name and the signature: [PackedFunction: demo.add int64(a:int64,b:int64)].
functionProto[custom] = function inspectFunction() {
  if (!this[kHandle]) return '[PackedFunction (disposed)]';
  const { name, signature } = info(this);
  return `[PackedFunction: ${name ?? '(anonymous)'}${signature ? ` ${signature}` : ''}]`;
};

// Arguments go to C through the frame; JavaScript functions among them
// become host functions for the call. The JS thread counts itself as
// blocked in C (for threads that wait for it, see src/pfnode.c) meanwhile.
function callFunction(st, args) {
  const h = st.h;
  if (!h) throw new TypeError('packedfunc: the function was disposed');
  const n = args.length;
  const fr = stack.depth < NFRAMES && n <= FRAME_ARGS ? frames[stack.depth] : bigFrame(n);
  stack.depth++;
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
    if (rc !== 0) throw lastError(levelOf(st), hintsFor(ctx));
    const code = i32[(base + 8) >> 2];
    if (code === INT) return readInt(blk, base);
    return decode(blk, base, code, false, null);
  } finally {
    stack.depth--;
    if (fr.big) api.PFMemFree(fr.blk.addr);
    if (ctx !== null) releaseCtx(ctx);
  }
}

// A JavaScript function as a packed function (a PackedFunction is returned
// as it is).
function convertFunction(fn) {
  if (typeof fn !== 'function') throw new TypeError(`packedfunc: expected a function, not ${describe(fn)}`);
  if (fn[kHandle] !== undefined) return fn;
  return adoptFunction(hostFunction(fn, null));
}

module.exports = { PackedFunction, functionProto, adoptFunction, convertFunction };
