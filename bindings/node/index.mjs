// packedfunc for Node.js, as an ES module: the same objects as the
// CommonJS entry (index.js), which this re-exports.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const pf = require('./index.js');

export default pf;
export const {
  getGlobalFunc, registerFunc, removeGlobalFunc, listGlobalFuncNames, initApi, loadModule,
  convert, tensor, getObjectType, registeredTypes, toJSON, fromJSON, DataType, Device, OpaqueHandle, PackedFunction, PackedObject,
  PackedArray, PackedMap, Shape, List, Dict, Module, PackedFuncError, FunctionNotFoundError,
  registerError, setThreadCallTimeout, heldCount, libraryVersion, libraryPath, version,
} = pf;
