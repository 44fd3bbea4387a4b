'use strict';
// Values to JSON text and back (include/packedfunc/serialize.h): the C
// serializer's document, which keeps sharing and cycles and carries
// instances of registered types by their type key and fields. Private.

const { koffi, api, scratch } = require('./library.js');
const { checkCall, nameArg } = require('./errors.js');
const { readPtr } = require('./words.js');
const { releaseCtx } = require('./frames.js');
const { valueArg } = require('./encode.js');
const { cString, scratchItem } = require('./decode.js');

// The JSON text of any value that crosses to C (PFToJSON). Encoding the
// value may run JavaScript (a getter of a plain object) that disposes an
// object encoded before it, whose handle C is still to read: as during a
// call, a dispose() meanwhile frees it only when the encoding's context is
// released (frames.js), after PFToJSON returns.
function toJSON(value) {
  const [raw, code, ctx] = valueArg(value, 'the value given to toJSON');
  try {
    checkCall(api.PFToJSON(raw, code, scratch.addr, scratch.addr + 8));
    return cString(readPtr(scratch, 0), readPtr(scratch, 8));
  } finally {
    releaseCtx(ctx);
  }
}

// The value a JSON text of toJSON describes (PFFromJSON): a new object
// graph, each instance of the registered type of its key.
function fromJSON(text) {
  nameArg('fromJSON', text, 'the text');
  // PFFromJSON takes a length, not a NUL: appending one made V8 flatten a
  // copy of the whole text first (half of what encoding it costs).
  const bytes = Buffer.from(text, 'utf8'); // alive until the call returns
  checkCall(api.PFFromJSON(koffi.address(bytes), bytes.length, scratch.addr, scratch.addr + 8));
  return scratchItem(0, 8, false);
}

module.exports = { toJSON, fromJSON };
