'use strict';
// JavaScript functions for C: C calls a JavaScript function through the
// package's C helper (src/pfnode.c), which copies the arguments into a
// callback slot that the trampoline jsCall reads, and reads the result
// that setResult writes there. Private.

const { koffi, helperApi, Block, TYPE_CODES } = require('./library.js');
const { recordException, PackedFuncError } = require('./errors.js');
const { readInt, writeInt, readPtr, writePtr } = require('./words.js');
const { newCtx, releaseCtx, unpinnedCalls, pinCallsInProgress } = require('./frames.js');
const { kHandle } = require('./wrappers.js');
const { TensorArg, writeBack, tensorObjectFrom } = require('./tensors.js');
const { encode } = require('./encode.js');
const { decode } = require('./decode.js');
const { heldValue, trampoline, ENV, hostFunction } = require('./held.js');
const { loans } = require('./objects.js');

const { int: INT, null: NULL, str: STR, bytes: BYTES, function: FUNC, module: MODULE, object: OBJECT } = TYPE_CODES;

// The callback slots of the C helper (src/pfnode.c, pfnode_slot):
//   0 num_args  4 ret_code  8 key  16 ret_value  24 ret_owned  28 loan
//   32 args  40 codes  48 ret_bytes {data, size}  64 values[16]  192 codes[16]
const SLOT_SIZE = 256;
const SLOT_ARGS = 16;
const slots = new Block(helperApi.slots(ENV), SLOT_SIZE * helperApi.maxDepth());
const slotKeep = new Array(helperApi.maxDepth()).fill(null);

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

// Whether the n arguments in the slot at `off` are all ints (n <= 16).
function intArgs(off, n) {
  const c = (off + 192) >> 2;
  for (let i = 0; i < n; i++) if (slots.i32[c + i] !== INT) return false;
  return true;
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
    const ctx = newCtx(null);
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
  const outerLoan = loans.waiting;
  loans.waiting = slots.i32[(off + 28) >> 2] || outerLoan; // a callback on this thread: the same wait
  try {
    const fn = heldValue(readInt(slots, off + 8));
    if (typeof fn !== 'function') throw new PackedFuncError('packedfunc: the JavaScript function of this packed function was released', 'RuntimeError');
    const n = slots.i32[off >> 2];
    let r;
    if (n <= 3 && intArgs(off, n)) {
      // The common callback: a few ints, passed as they are (no array, no
      // spread, nothing to write back).
      if (n === 0) r = fn();
      else if (n === 1) r = fn(readInt(slots, off + 64));
      else if (n === 2) r = fn(readInt(slots, off + 64), readInt(slots, off + 72));
      else r = fn(readInt(slots, off + 64), readInt(slots, off + 72), readInt(slots, off + 80));
    } else {
      const copies = [];
      r = fn(...slotArgs(off, n, copies));
      if (copies.length) writeBack(copies);
    }
    if (typeof r === 'number' && (r | 0) === r) { // an int32, the common result: written here
      const w = off >> 2;
      slots.i32[w + 6] = 0; // ret_owned
      slots.i32[w + 4] = r;
      slots.i32[w + 5] = r >> 31;
      slots.i32[w + 1] = INT;
    } else {
      setResult(index, off, r);
    }
    return 1;
  } catch (err) {
    return recordException(err);
  } finally {
    loans.waiting = outerLoan;
  }
}

trampoline.jsCall = jsCall;
