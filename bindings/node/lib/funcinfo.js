'use strict';
// A packed function's metadata (name, signature, doc), read once per
// wrapper and kept in its state; the float parameters of its signature.
// Private.

const { koffi, api, scratch } = require('./library.js');
const { checkCall } = require('./errors.js');
const { readPtr, readPtrAt } = require('./words.js');
const { kState } = require('./wrappers.js');

function info(f) {
  const st = f[kState] ?? f;
  if (st.info === undefined) {
    const h = st.h;
    if (!h) throw new TypeError('packedfunc: the function was disposed');
    checkCall(api.PFFuncGetInfo(h, scratch.addr, scratch.addr + 8, scratch.addr + 16));
    const str = (off) => { const p = readPtr(scratch, off); return p ? koffi.decode.string(p) : null; };
    const sig = str(8);
    st.info = { name: str(0), signature: sig, doc: str(16), floats: floatParams(h) };
    st.ints = st.info.floats === null;
  }
  return st.info;
}

// Positions of float64/float32 parameters of a function's signature, read
// from the library's parameter table (signature.h; the text is never split
// here): an integer-valued number passed there goes as a float. null when
// there are none.
function floatParams(h) {
  checkCall(api.PFFuncGetSignatureInfo(h, scratch.addr));
  const si = readPtr(scratch, 0);
  if (!si) return null;
  // PFSignatureInfo: text, num_params (int32 at 8), ..., params (at 32):
  // an array of PFParamInfo*, whose `type` (at 8) is the canonical type.
  const n = koffi.decode.int32(si + 8);
  const params = readPtrAt(si + 32);
  const out = [];
  for (let i = 0; i < n; i++) {
    const type = koffi.decode.string(readPtrAt(readPtrAt(params + 8 * i) + 8));
    out.push(type === 'float64' || type === 'float32');
  }
  return out.some(Boolean) ? out : null;
}

function floatParam(f, pos) {
  const floats = info(f).floats;
  return floats !== null && typeof pos === 'number' && floats[pos] === true;
}

// The function's name for its level in an error: its metadata name, else
// the registry name it was looked up by.
function levelOf(f) {
  const st = f[kState] ?? f;
  try { return info(st).name ?? st.lookedUp ?? null; } catch { return null; }
}

module.exports = { info, floatParam, levelOf };
