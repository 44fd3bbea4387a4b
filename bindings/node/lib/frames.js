'use strict';
// Call frames, and the memory a call takes beyond its frame. Private.
//
// A frame is a PFCallFrame, the called function's resolved target, the
// counters of this thread's helper state and the call's outcome (the
// helper's pfnode_frame: src/pfnode.c), then room for its arguments:
//   0   PFCallFrame {ret_val, ret_type_code, num_args, func, args, type_codes}
//   40  PFCallTarget {size, flags, entry, ctx}
//   64  shared (pfnode_shared*)   72 status   76 (reserved)
//   80  values[FRAME_ARGS]        208 codes[FRAME_ARGS]
//   272 an arena: strings, PFByteArrays, DLTensors and their shapes
// Frames are a stack: a call takes the next one, so that a call made from
// inside a callback has a frame of its own.

const { koffi, api, allocBlock } = require('./library.js');
const { markAsUntransferable } = require('node:worker_threads');
const { writePtr, JsBlock } = require('./words.js');
const { SHARED_ADDR } = require('./held.js');

const FRAME_SIZE = 2048;
const FRAME_ARGS = 16;
const VALUES_OFF = 80;
const STATUS_OFF = 72;
const NFRAMES = 128;
const frameBlock = allocBlock(FRAME_SIZE * NFRAMES);

class Frame {
  // A frame at `off` of `blk` for `capacity` arguments, with the arena up
  // to `end`.
  constructor(blk, off, capacity, end) {
    this.blk = blk;
    this.off = off;
    this.addr = blk.addr + off;
    // The address as the helper's calls take it, in a field that is not
    // numbers only: V8 keeps such a field's number boxed, and a call passes
    // the box, where a number beyond 2^31 read from a field of numbers is
    // boxed anew (a heap allocation) for every call.
    this.addrArg = null;
    this.addrArg = this.addr;
    this.big = false;
    this.h = 0; // the function handle written in the frame, and its state (functions.js)
    this.st = null;
    // The helper's PFNODE_TARGET_OUTER for the outermost call's frame.
    this.outer = 0;
    this.valuesOff = off + VALUES_OFF;
    this.codesOff = this.valuesOff + 8 * capacity;
    this.arenaStart = (this.codesOff + 4 * capacity + 7) & ~7;
    this.arenaEnd = end;
    this.pos = this.arenaStart;
    writePtr(blk, off + 24, blk.addr + this.valuesOff);
    writePtr(blk, off + 32, blk.addr + this.codesOff);
    writePtr(blk, off + 64, SHARED_ADDR);
  }
}

const frames = [];
for (let i = 0; i < NFRAMES; i++) {
  frames.push(new Frame(frameBlock, i * FRAME_SIZE, FRAME_ARGS, (i + 1) * FRAME_SIZE));
}
frames[0].outer = 0x80000000;
const stack = { depth: 0 }; // how many of `frames` calls use now

// The references that dispose() gave up while a synchronous call was in
// progress (from a callback that C calls meanwhile), or while a value was
// being encoded for C (a getter of a plain object): a call in progress may
// still use the object, its own function or an argument, and an encoding
// has written handles that C is still to read, so each goes when the
// outermost call and the last synchronous encoding end (endCall,
// releaseCtx).
const disposedInCall = [];
let encodings = 0; // synchronous contexts (newCtx(null)) not yet released

// Releases a wrapper's reference (dispose()): at once, or when the calls
// and encodings in progress end.
function releaseHandle(h) {
  if (stack.depth > 0 || encodings > 0) disposedInCall.push(h);
  else api.PFObjectFree(h);
}

function releaseDisposed() {
  if (stack.depth === 0 && encodings === 0 && disposedInCall.length !== 0) {
    for (const h of disposedInCall.splice(0)) api.PFObjectFree(h);
  }
}

// Ends a synchronous call (of `frames`' stack): the references disposed
// during the outermost one go now.
function endCall() {
  --stack.depth;
  releaseDisposed();
}

// A frame for many arguments, or for a call nested deeper than NFRAMES: C
// memory of its own, freed with it.
function bigFrame(n) {
  const size = VALUES_OFF + n * 12 + 8 + 4096;
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
// A context without a frame is a synchronous encoding (convert, a
// container's items, a callback's result, toJSON): disposes wait for its
// release, which every caller owes in a `finally`. A call's context (with
// its frame) is covered by the call itself, or belongs to a callAsync,
// whose handles async.js holds.
function newCtx(frame) {
  if (frame === null) encodings++;
  return { frame, keep: [], release: [], depth: 0, seen: null, made: null, fn: null, copies: null, hints: null, open: true };
}

function releaseCtx(ctx) {
  for (const h of ctx.release) api.PFObjectFree(h);
  ctx.release.length = 0;
  ctx.made = null; // its containers were in `release`
  if (ctx.copies !== null) copyBack(ctx);
  if (ctx.frame === null && ctx.open) {
    ctx.open = false;
    encodings--;
    releaseDisposed();
  }
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

module.exports = {
  FRAME_ARGS, NFRAMES, STATUS_OFF, Frame, frameBlock, frames, stack, releaseHandle, endCall, bigFrame, arenaAlloc, newCtx, releaseCtx, pin, viewAddress,
  pinKept, unpinnedCalls, pinCallsInProgress,
};
