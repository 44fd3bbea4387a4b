'use strict';
// packedfunc for Node.js: call C functions by name, and hand JavaScript
// functions to C, through libpackedfunc over koffi. See README.md
// ("Node.js") at the root of the source tree, and index.d.ts.

const library = require('./lib/library.js');
const errors = require('./lib/errors.js');
const types = require('./lib/types.js');
const core = require('./lib/core.js');
const registry = require('./lib/registry.js');

module.exports = {
  // the registry and modules
  getGlobalFunc: registry.getGlobalFunc,
  registerFunc: registry.registerFunc,
  removeGlobalFunc: registry.removeGlobalFunc,
  listGlobalFuncNames: registry.listGlobalFuncNames,
  initApi: registry.initApi,
  loadModule: registry.loadModule,
  // values
  convert: core.convert,
  tensor: core.tensor,
  getObjectType: core.getObjectType,
  registeredTypes: core.registeredTypes,
  toJSON: core.toJSON,
  fromJSON: core.fromJSON,
  DataType: types.DataType,
  Device: types.Device,
  OpaqueHandle: types.OpaqueHandle,
  PackedFunction: core.PackedFunction,
  PackedObject: core.PackedObject,
  PackedArray: core.PackedArray,
  PackedMap: core.PackedMap,
  Shape: core.Shape,
  List: core.List,
  Dict: core.Dict,
  Module: core.Module,
  // errors
  PackedFuncError: errors.PackedFuncError,
  FunctionNotFoundError: errors.FunctionNotFoundError,
  registerError: errors.registerError,
  // threads and lifetimes
  setThreadCallTimeout: core.setThreadCallTimeout,
  heldCount: core.heldCount,
  // the loaded library
  libraryVersion: library.VERSION,
  libraryPath: library.LIB_PATH,
  version: require('./package.json').version,
};
