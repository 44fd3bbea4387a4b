'use strict';
// 64-bit words (int64 values and addresses) in typed arrays over C or
// JavaScript memory, read and written as two 32-bit halves so that a
// number stays a number; and JavaScript memory seen as a Block. Private.

const { koffi, Block } = require('./library.js');

const TWO32 = 4294967296;

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

// The address stored at C address addr.
function readPtrAt(addr) { return Number(koffi.decode.uint64(addr)); }

module.exports = { TWO32, writeInt, readInt, readPtr, writePtr, readPtrAt, JsBlock };
