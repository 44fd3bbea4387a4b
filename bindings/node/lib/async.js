'use strict';
// Calls off the JavaScript thread: f.callAsync(...args) runs the call on
// a worker thread of the C helper and settles a Promise when it ends.
// Private.

const { koffi, api, helperApi, allocBlock, TYPE_CODES } = require('./library.js');
const { lastError } = require('./errors.js');
const { readInt, readPtr, writePtr } = require('./words.js');
const { Frame, newCtx, releaseCtx, pinKept } = require('./frames.js');
const { liveHandle } = require('./wrappers.js');
const { levelOf } = require('./funcinfo.js');
const { encode, hintsFor } = require('./encode.js');
const { decode, cString } = require('./decode.js');
const { functionProto } = require('./functions.js');
const { lend, endLoan } = require('./objects.js');

const { str: STR, bytes: BYTES, function: FUNC, module: MODULE, object: OBJECT } = TYPE_CODES;

const ASYNC_SIZE = helperApi.asyncSize();

// The function's handle and each handle argument (function, module,
// object) of the frame, each with a new reference.
function holdHandles(h, blk, fr, n) {
  const held = [h];
  for (let i = 0; i < n; i++) {
    const code = blk.i32[(fr.codesOff >> 2) + i];
    if (code !== FUNC && code !== MODULE && code !== OBJECT) continue;
    const p = readPtr(blk, fr.valuesOff + 8 * i);
    if (p) held.push(p);
  }
  for (const p of held) api.PFObjectRetain(p);
  return held;
}

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
    // JavaScript runs while the worker thread calls (this call's own
    // callbacks too), and may dispose the function or a handle argument:
    // the call holds a reference to each until it ends.
    const held = holdHandles(h, blk, fr, n);
    helperApi.callAsync.async(blk.addr, (ioErr, rc) => {
      for (const p of held) api.PFObjectFree(p);
      if (loan !== null) endLoan(loan);
      try {
        if (ioErr) throw ioErr;
        if (rc !== 0) {
          const str = (off) => { const p = readPtr(blk, off); return p ? koffi.decode.string(p) : ''; };
          api.PFErrorSet(str(64) || 'RuntimeError', str(72));
          const tb = str(80);
          if (tb) api.PFErrorAppendTraceback(tb);
          throw lastError(levelOf(f), hintsFor(ctx));
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
