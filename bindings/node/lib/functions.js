'use strict';
// Packed functions: the wrapper of a function handle (a callable
// JavaScript function), and a call. Arguments go to C through a call
// frame, with one argument, the frame's address, so that koffi converts
// nothing per argument: to the helper's pfnode_call, which calls the
// function's target (resolved once per wrapper). Private.

const { api, helperApi, scratch, TYPE_CODES } = require('./library.js');
const { checkCall, lastError, nameArg } = require('./errors.js');
const { readInt, writeInt, readPtr, writePtr } = require('./words.js');
const { FRAME_ARGS, NFRAMES, STATUS_OFF, frameBlock, frames, stack, releaseHandle, endCall, bigFrame, newCtx, releaseCtx, unpinnedCalls } = require('./frames.js');
const { kHandle, kState, registry, describe, liveHandle } = require('./wrappers.js');
const { info, levelOf } = require('./funcinfo.js');
const { encode, hintsFor } = require('./encode.js');
const { decode, adopters } = require('./decode.js');
const { hostFunction } = require('./held.js');
const { custom } = require('./inspect.js');

const { int: INT, float: FLOAT, bool: BOOL } = TYPE_CODES;

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
// whether every parameter takes a small int as an int, the target resolved
// for handle th), which the call's hot path reads; kHandle on the function
// reads and writes it.
function adoptFunction(h) {
  const st = { h, info: undefined, ints: undefined, lookedUp: null, th: 0, entry: 0, ctx: 0, flags: 0 };
  // Named parameters and arguments.length, not a rest array: a call of up
  // to four numbers and booleans allocates nothing (V8 does not
  // materialize `arguments` for its length).
  const f = function packedFunction(a0, a1, a2, a3) {
    const n = arguments.length;
    if (n <= 4 && scalars(n, a0, a1, a2, a3)) return callScalars(st, n, a0, a1, a2, a3);
    return callFunction(st, Array.prototype.slice.call(arguments));
  };
  Object.setPrototypeOf(f, functionProto);
  // The metadata name, not the closure's (changing the property keeps the
  // object's fast layout, where deleting it would not).
  Object.defineProperty(f, 'name', nameProperty);
  Object.defineProperty(f, 'length', LENGTH); // 0, as before the named parameters
  f[kState] = st;
  registry.register(f, h, f);
  return f;
}

adopters.function = adoptFunction;

const LENGTH = { value: 0, configurable: true };
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
    releaseHandle(h); // a call of it may be in progress
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
// become host functions for the call.
function callFunction(st, args) {
  const h = st.h;
  if (!h) throw new TypeError('packedfunc: the function was disposed');
  const n = args.length;
  const fr = takeFrame(st, h, n);
  let ctx = null;
  try {
    const blk = fr.blk;
    const i32 = blk.i32;
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
    return invoke(st, fr, ctx);
  } finally {
    dropFrame(fr);
    if (ctx !== null) releaseCtx(ctx);
  }
}

const FI32 = frameBlock.i32;
const FF64 = frameBlock.f64;
const helperCall = helperApi.call;

// Whether x is a number or a boolean that callScalars writes as encode()
// would: any but an integer beyond 2^53 (whose note on failure encode()
// makes).
function scalar(x) {
  if (typeof x === 'number') return (x | 0) === x || !Number.isInteger(x) || Number.isSafeInteger(x);
  return typeof x === 'boolean';
}

// Whether the first n of a0..a3 are scalars.
function scalars(n, a0, a1, a2, a3) {
  return (n < 1 || scalar(a0)) && (n < 2 || scalar(a1)) && (n < 3 || scalar(a2)) && (n < 4 || scalar(a3));
}

// Writes scalar x as argument i of a call whose values start at word w of
// the frames' block and codes at word c, as encode() would: a number as an
// int64 when it is a safe integer and parameter i is not a float, else as
// a float64.
function putScalar(w, c, i, x, floats) {
  if (typeof x === 'boolean') {
    FI32[w + 2 * i] = x ? 1 : 0;
    FI32[w + 2 * i + 1] = 0;
    FI32[c + i] = BOOL;
  } else if ((floats === null || floats[i] !== true) && Number.isSafeInteger(x)) {
    if ((x | 0) === x) {
      FI32[w + 2 * i] = x;
      FI32[w + 2 * i + 1] = x >> 31;
    } else {
      writeInt(frameBlock, 4 * (w + 2 * i), x);
    }
    FI32[c + i] = INT;
  } else {
    FF64[(w >> 1) + i] = x;
    FI32[c + i] = FLOAT;
  }
}

// A call of up to four scalars (scalars()), the arguments of most calls of
// typed functions: written straight into the next frame of the stack, with
// nothing to encode, keep or release, and no allocation.
function callScalars(st, n, a0, a1, a2, a3) {
  const h = st.h;
  if (!h) throw new TypeError('packedfunc: the function was disposed');
  const d = stack.depth;
  if (d >= NFRAMES) return callFunction(st, [a0, a1, a2, a3].slice(0, n));
  const floats = st.ints === true ? null : (info(st), st.info.floats);
  const fr = frames[d];
  const w = fr.valuesOff >> 2;
  const c = fr.codesOff >> 2;
  if (n > 0) putScalar(w, c, 0, a0, floats);
  if (n > 1) putScalar(w, c, 1, a1, floats);
  if (n > 2) putScalar(w, c, 2, a2, floats);
  if (n > 3) putScalar(w, c, 3, a3, floats);
  if (fr.st !== st || fr.h !== h) writeTarget(fr, st, h);
  FI32[(fr.off + 12) >> 2] = n;
  stack.depth = d + 1;
  helperCall(fr.addrArg);
  // The call ends (endCall) once its outcome is read; readInt cannot throw,
  // so an int result needs no try/finally.
  if (FI32[(fr.off + STATUS_OFF) >> 2] === 0 && FI32[(fr.off + 8) >> 2] === INT) {
    const r = readInt(frameBlock, fr.off);
    endCall();
    return r;
  }
  try {
    if (FI32[(fr.off + STATUS_OFF) >> 2] !== 0) throw lastError(levelOf(st), null);
    return decode(frameBlock, fr.off, FI32[(fr.off + 8) >> 2], false, null);
  } finally {
    endCall();
  }
}

// The frame for a call of n arguments to h, the handle of wrapper state st
// (the next of the stack, or one of its own), with h, its target and n
// written. A frame is rewritten when its state or handle changes (a handle
// alone could be a new function's at a freed one's address).
function takeFrame(st, h, n) {
  if (st.th !== h) resolve(st, h); // before a big frame is allocated: it may throw
  const fr = stack.depth < NFRAMES && n <= FRAME_ARGS ? frames[stack.depth] : bigFrame(n);
  if (fr.st !== st || fr.h !== h) writeTarget(fr, st, h);
  stack.depth++;
  fr.blk.i32[(fr.off + 12) >> 2] = n;
  return fr;
}

// Writes h and its target (resolved first if st has not resolved h) into
// frame fr.
function writeTarget(fr, st, h) {
  if (st.th !== h) resolve(st, h);
  const blk = fr.blk;
  writePtr(blk, fr.off + 16, h);
  blk.u32[(fr.off + 44) >> 2] = (st.flags | fr.outer) >>> 0;
  writePtr(blk, fr.off + 48, st.entry);
  writePtr(blk, fr.off + 56, st.ctx);
  fr.h = h;
  fr.st = st;
}

// Resolves h's call target (PFFuncResolve) into st: valid while st holds h.
function resolve(st, h) {
  scratch.u32[0] = 24; // sizeof(PFCallTarget)
  checkCall(api.PFFuncResolve(h, scratch.addr));
  st.flags = scratch.u32[1];
  st.entry = readPtr(scratch, 8);
  st.ctx = readPtr(scratch, 16);
  st.th = h;
}

function dropFrame(fr) {
  endCall();
  if (fr.big) api.PFMemFree(fr.blk.addr);
}

// Calls the function of frame fr, whose arguments are written (ctx: what
// their encoding made, or null), and returns its result.
// The helper counts the JavaScript thread as blocked in C meanwhile (for
// the threads that wait for it, see src/pfnode.c) and leaves the outcome
// in the frame. The koffi call does not throw: its one argument is an
// address, and jsCall never throws.
function invoke(st, fr, ctx) {
  if (ctx !== null && ctx.keep.length) unpinnedCalls.push(ctx);
  helperCall(fr.addrArg);
  if (ctx !== null && unpinnedCalls.at(-1) === ctx) unpinnedCalls.pop();
  if (fr.blk.i32[(fr.off + STATUS_OFF) >> 2] !== 0) throw lastError(levelOf(st), hintsFor(ctx));
  const code = fr.blk.i32[(fr.off + 8) >> 2];
  if (code === INT) return readInt(fr.blk, fr.off);
  return decode(fr.blk, fr.off, code, false, null);
}

// A JavaScript function as a packed function (a PackedFunction is returned
// as it is).
function convertFunction(fn) {
  if (typeof fn !== 'function') throw new TypeError(`packedfunc: expected a function, not ${describe(fn)}`);
  if (fn[kHandle] !== undefined) return fn;
  return adoptFunction(hostFunction(fn, null));
}

module.exports = { PackedFunction, functionProto, adoptFunction, convertFunction };
