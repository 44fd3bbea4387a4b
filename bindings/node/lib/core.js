'use strict';
// Values across the boundary, packed functions and the objects they pass:
// the files of each concern, loaded in the order they depend on, and
// convert(). Everything here is private; index.js re-exports the public
// names.
//
//   words.js       64-bit words in typed arrays
//   wrappers.js    what every wrapper of a C object shares: handle, lifetime
//   frames.js      call frames; memory C uses during a call, pinned or copied
//   held.js        JavaScript values C holds; this thread's C helper state
//   tensors.js     typed arrays as tensors, tensor objects as typed arrays
//   funcinfo.js    a function's metadata
//   encode.js      JavaScript -> C
//   decode.js      C -> JavaScript
//   functions.js   packed functions and calls
//   objects.js     PackedObject; instances lent to calls off the JS thread
//   async.js       calls off the JavaScript thread (callAsync)
//   callbacks.js   JavaScript functions that C calls
//   containers.js  PackedArray, PackedMap, Shape, List, Dict
//   classes.js     the classes of registered object types
//   modules.js     Module
//   serialize.js   toJSON, fromJSON
//
// JavaScript values that C holds (functions, typed arrays given as tensor
// objects) are kept in `held` under a key until C's finalizer hands the
// key back.

const { readPtr, JsBlock } = require('./words.js');
const { kHandle, kState } = require('./wrappers.js');
const { newCtx, releaseCtx } = require('./frames.js');
const { heldCount, setThreadCallTimeout } = require('./held.js');
const { TensorArg, tensor, newTensorObject } = require('./tensors.js');
const { encode, containerFrom, makeArray, makeMap } = require('./encode.js');
const { adoptObject } = require('./decode.js');
const { PackedFunction, adoptFunction, convertFunction } = require('./functions.js');
const { PackedObject } = require('./objects.js');
require('./async.js');
require('./callbacks.js');
const { PackedArray, PackedMap, Shape, List, Dict } = require('./containers.js');
const { objectClass, getObjectType, registeredTypes } = require('./classes.js');
const { Module } = require('./modules.js');
const { toJSON, fromJSON } = require('./serialize.js');
const { scratch } = require('./library.js');

// What a value crosses to C as: a PackedFunction for a function, a
// PackedArray / PackedMap for an array or a plain object / Map, a typed
// array over a new tensor object for tensor(...), and the value itself for
// everything else that can cross.
function convert(x) {
  if (typeof x === 'function') return convertFunction(x);
  if (x instanceof TensorArg) return newTensorObject(x);
  if (Array.isArray(x) || x instanceof Map || (x !== null && typeof x === 'object' &&
      (Object.getPrototypeOf(x) === Object.prototype || Object.getPrototypeOf(x) === null))) {
    const ctx = newCtx(null);
    try {
      const h = containerFrom(x, ctx, 'the value given to convert', Array.isArray(x) ? makeArray : makeMap);
      ctx.release.pop(); // the outermost (made last): its reference is the wrapper's
      return adoptObject(h);
    } finally {
      releaseCtx(ctx);
    }
  }
  const jb = new JsBlock(8);
  const ctx = newCtx(null);
  try { encode(x, jb, 0, ctx, 'the value given to convert'); } finally { releaseCtx(ctx); }
  return x;
}


module.exports = {
  kHandle, kState, adoptFunction, adoptObject, convert, convertFunction, PackedFunction, PackedObject,
  PackedArray, PackedMap, Shape, List, Dict, Module, TensorArg, tensor, getObjectType, registeredTypes, toJSON, fromJSON, objectClass,
  setThreadCallTimeout, heldCount, readPtr, scratch,
};
