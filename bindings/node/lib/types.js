'use strict';
// DataType, Device and OpaqueHandle: JavaScript faces of DLDataType,
// DLDevice and kPFOpaqueHandle. Data types are read and written as text by
// the library (PFDataTypeFromString, PFDataTypeToString), never parsed
// here. Everything here is private; index.js re-exports the classes.

const { api, scratch } = require('./library.js');
const { checkCall } = require('./errors.js');

const DTYPE_TEXT_MAX = 32; // PF_DTYPE_STRING_MAX

function integer(value, what, lo, hi) {
  if (!Number.isInteger(value)) throw new TypeError(`DataType: ${what} must be an integer, not ${typeof value}`);
  if (value < lo || value > hi) throw new RangeError(`DataType: ${what} ${value} is outside [${lo}, ${hi}]`);
  return value;
}

// A DLPack data type: new DataType('float32'), new DataType('int8x4'),
// new DataType('bf16'), or new DataType(code, bits, lanes). Immutable.
class DataType {
  constructor(dtype, bits, lanes = 1) {
    if (dtype instanceof DataType) {
      ({ code: dtype, bits, lanes } = dtype);
    } else if (typeof dtype === 'string') {
      if (dtype.includes('\0')) throw new RangeError('DataType: the text contains a NUL character');
      checkCall(api.PFDataTypeFromString(dtype, scratch.addr));
      dtype = scratch.u8[0];
      bits = scratch.u8[1];
      lanes = scratch.u16[1];
    } else if (bits === undefined) {
      throw new TypeError(`DataType: expected a string such as 'float32', or (code, bits, lanes), not ${typeof dtype}`);
    }
    this.code = integer(dtype, 'code', 0, 255);
    this.bits = integer(bits, 'bits', 0, 255);
    this.lanes = integer(lanes, 'lanes', 1, 65535);
    Object.freeze(this);
  }

  // The bytes of one element, all lanes together (rounded up).
  get itemsize() { return Math.ceil((this.bits * this.lanes) / 8); }

  // The library's canonical text ("float32", "bool", "float8_e4m3fn").
  toString() {
    const packed = (this.code | (this.bits << 8) | (this.lanes << 16)) >>> 0;
    checkCall(api.PFDataTypeToString(packed, scratch.addr, DTYPE_TEXT_MAX));
    const end = scratch.u8.indexOf(0);
    return Buffer.from(scratch.u8.subarray(0, end)).toString('latin1');
  }

  equals(other) {
    if (typeof other === 'string') other = new DataType(other);
    return other instanceof DataType && other.code === this.code && other.bits === this.bits &&
      other.lanes === this.lanes;
  }

  [Symbol.for('nodejs.util.inspect.custom')]() { return `DataType('${this.toString()}')`; }
}

// DLDeviceType (dlpack.h), by name.
const DEVICE_TYPES = {
  cpu: 1, cuda: 2, cuda_host: 3, opencl: 4, vulkan: 7, metal: 8, vpi: 9, rocm: 10,
  rocm_host: 11, ext_dev: 12, cuda_managed: 13, oneapi: 14, webgpu: 15, hexagon: 16,
};
const DEVICE_NAMES = Object.fromEntries(Object.entries(DEVICE_TYPES).map(([k, v]) => [v, k]));

// A DLPack device: new Device('cpu'), new Device('cuda', 1),
// new Device('cuda:1') or new Device(2, 1). Immutable.
class Device {
  constructor(deviceType, deviceId) {
    if (deviceType instanceof Device) ({ deviceType, deviceId } = deviceType);
    if (typeof deviceType === 'string') {
      let name = deviceType;
      const colon = name.indexOf(':');
      if (colon >= 0 && deviceId === undefined) {
        deviceId = Number(name.slice(colon + 1));
        name = name.slice(0, colon);
        if (!Number.isInteger(deviceId)) throw new RangeError(`Device: bad device id in '${deviceType}'`);
      }
      if (!(name in DEVICE_TYPES)) {
        throw new RangeError(`Device: unknown device type '${name}' (known: ${Object.keys(DEVICE_TYPES).join(', ')})`);
      }
      deviceType = DEVICE_TYPES[name];
    }
    deviceId = deviceId === undefined ? 0 : deviceId;
    for (const [what, v] of [['deviceType', deviceType], ['deviceId', deviceId]]) {
      if (!Number.isInteger(v)) throw new TypeError(`Device: ${what} must be an integer`);
      if (v < -(2 ** 31) || v >= 2 ** 31) throw new RangeError(`Device: ${what} ${v} does not fit int32`);
    }
    this.deviceType = deviceType;
    this.deviceId = deviceId;
    Object.freeze(this);
  }

  get typeName() { return DEVICE_NAMES[this.deviceType] ?? String(this.deviceType); }

  toString() { return `${this.typeName}:${this.deviceId}`; }

  equals(other) {
    return other instanceof Device && other.deviceType === this.deviceType && other.deviceId === this.deviceId;
  }

  [Symbol.for('nodejs.util.inspect.custom')]() { return `Device('${this.toString()}')`; }
}

// A pointer that C passes as kPFOpaqueHandle and never dereferences: it
// comes back as it went. `address` is a BigInt.
class OpaqueHandle {
  constructor(address) {
    this.address = BigInt.asUintN(64, BigInt(address));
    Object.freeze(this);
  }

  toString() { return `OpaqueHandle(0x${this.address.toString(16)})`; }
}

module.exports = { DataType, Device, OpaqueHandle };
