'use strict';
// C -> JavaScript: decode() reads a value by its type code, and an object
// handle by its object type, through the wrapper that each kind's file
// registers here (functions.js, objects.js, containers.js, modules.js,
// classes.js): this file needs none of them. Private.

const { koffi, api, scratch, TYPE_CODES, OBJECT_TYPES, REGISTERED_BEGIN } = require('./library.js');
const { checkCall } = require('./errors.js');
const { DataType, Device, OpaqueHandle } = require('./types.js');
const { readInt, readPtr, readPtrAt } = require('./words.js');
const { borrowedTensor, adoptTensor } = require('./tensors.js');

const { int: INT, float: FLOAT, bool: BOOL, null: NULL, handle: HANDLE, dtype: DTYPE, device: DEVICE,
  tensor: TENSOR, str: STR, bytes: BYTES, function: FUNC, module: MODULE, object: OBJECT } = TYPE_CODES;

// Wrappers of object handles by object type index (adopt(handle, index)).
const objectTypes = new Map();
// The wrappers of the other handles: a function (h), an instance of a
// registered type (h, index) and any other object (h, index).
const adopters = { function: null, registered: null, object: null };

function registerObjectType(index, adopt) { objectTypes.set(index, adopt); }

registerObjectType(OBJECT_TYPES.tensor, (h) => adoptTensor(h));

function typeIndexOf(h) {
  checkCall(api.PFObjectGetTypeIndex(h, scratch.addr));
  return scratch.u32[0];
}

// Wraps an owned object reference by its type.
function adoptObject(h) {
  const index = typeIndexOf(h);
  const adopt = objectTypes.get(index);
  if (adopt !== undefined) return adopt(h, index);
  if (index >= REGISTERED_BEGIN) return adopters.registered(h, index);
  return adopters.object(h, index);
}

// The value at (blk, off) of type code `code`. `borrowed`: a callback's
// argument or a container's item, whose handles the wrapper takes a
// reference of its own to; else a call's result, whose new reference the
// wrapper takes over. `copies` collects borrowed DLTensors (tensors.js, borrowedTensor).
function decode(blk, off, code, borrowed, copies) {
  switch (code) {
    case INT: return readInt(blk, off);
    case FLOAT: return blk.f64[off >> 3];
    case BOOL: return blk.i32[off >> 2] !== 0;
    case NULL: return null;
    case STR: return cString(readPtr(blk, off), api.strlen(readPtr(blk, off)));
    case BYTES: {
      const ba = readPtr(blk, off);
      const size = Number(koffi.decode.uint64(ba + 8));
      return size ? new Uint8Array(koffi.view(readPtrAt(ba), size)).slice() : new Uint8Array(0);
    }
    case HANDLE: return new OpaqueHandle(blk.u64[off >> 3]);
    case DTYPE: return new DataType(blk.u8[off], blk.u8[off + 1], blk.u16[(off + 2) >> 1]);
    case DEVICE: return new Device(blk.i32[off >> 2], blk.i32[(off >> 2) + 1]);
    case TENSOR: return borrowedTensor(readPtr(blk, off), copies);
    case FUNC:
    case MODULE:
    case OBJECT: {
      const h = readPtr(blk, off);
      if (borrowed) checkCall(api.PFObjectRetain(h));
      return code === FUNC ? adopters.function(h) : adoptObject(h);
    }
    default:
      throw new TypeError(`packedfunc: a value of unsupported type code ${code}`);
  }
}

// The C string of `size` bytes at ptr as a JavaScript string: one longer
// than V8's longest string is a RangeError (V8 would abort the process).
const { MAX_STRING_LENGTH } = require('node:buffer').constants;
function cString(ptr, size) {
  if (size > MAX_STRING_LENGTH) {
    throw new RangeError(`packedfunc: a string result of ${size} bytes is longer than the longest ` +
      `JavaScript string (${MAX_STRING_LENGTH} characters)`);
  }
  return koffi.decode.string(ptr, size);
}

// Reads one item that a reader wrote at scratch[off] (value) and
// scratch[codeOff] (code): borrowed from the container, or with borrowed
// false a new reference (List and Dict hand out their own).
function scratchItem(off, codeOff, borrowed = true) {
  const code = scratch.i32[codeOff >> 2];
  return code === INT ? readInt(scratch, off) : decode(scratch, off, code, borrowed, null);
}

module.exports = { decode, adoptObject, typeIndexOf, registerObjectType, adopters, cString, scratchItem };
