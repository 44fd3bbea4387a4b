'use strict';
// Registered object types: the JavaScript class of each (made from the
// type's reflection data when first needed), and its instances. Private.

const {
  koffi, api, scratch, TYPE_CODES, REGISTERED_BEGIN, PFObjectTypeInfo, PFFieldInfo, PFMethodInfo,
} = require('./library.js');
const { checkCall, nameArg, FunctionNotFoundError } = require('./errors.js');
const { readPtr } = require('./words.js');
const { ADOPT, liveHandle } = require('./wrappers.js');
const { adopters, scratchItem } = require('./decode.js');
const { adoptFunction } = require('./functions.js');
const { PackedObject, freeHandle } = require('./objects.js');
const { withValue } = require('./containers.js');
const { inspectFields, kInspect } = require('./inspect.js');

const { int: INT, float: FLOAT, bool: BOOL, null: NULL, handle: HANDLE, dtype: DTYPE, device: DEVICE } = TYPE_CODES;
const COPIED = new Set([INT, FLOAT, BOOL, NULL, HANDLE, DTYPE, DEVICE]); // field values read whole

// Classes by type index, held weakly (an instance holds its class), so
// that a module whose classes are all gone can be unloaded; the module
// of a class from Module.types, held as long as the class is.
const classes = new Map(); // type index -> WeakRef of its class
const classModule = new WeakMap(); // class -> its Module

function readTypeInfo(index) {
  checkCall(api.PFObjectTypeGetInfo(index, scratch.addr));
  const info2 = koffi.decode(readPtr(scratch, 0), PFObjectTypeInfo);
  const ptrs = (p, n) => (n ? Array.from(koffi.decode(p, 'intptr_t', n), Number) : []);
  const fields = ptrs(info2.fields, info2.num_fields).map((p) => ({ ptr: p, ...koffi.decode(p, PFFieldInfo) }));
  const methods = ptrs(info2.methods, info2.num_methods).map((p) => koffi.decode(p, PFMethodInfo));
  return { ...info2, fields, methods };
}

// The key of a registered type's index; null for 0 (no parent).
function keyOf(index) {
  return index ? api.PFObjectTypeName(index) : null;
}

// A type's public record, Python's __pf_type_info__ in JavaScript's
// spelling, frozen: key, index, parent (its key, or null), doc, fields
// (own and inherited, as the library lists them), methods (the
// constructor not among them) and initSignature (null without one).
function typeInfoRecord(t) {
  const freeze = (list) => Object.freeze(list.map((x) => Object.freeze(x)));
  return Object.freeze({
    key: t.key,
    index: t.type_index,
    parent: keyOf(t.parent_index),
    doc: t.doc ?? null,
    fields: freeze(t.fields.map((f) => ({
      name: f.name, type: f.type, writable: (f.flags & 1) !== 0, doc: f.doc ?? null, declaredBy: keyOf(f.type_index),
    }))),
    methods: freeze(t.methods.filter((m) => m.name !== '__init__').map((m) => ({
      name: m.name, signature: m.signature ?? null, static: (m.flags & 1) !== 0, doc: m.doc ?? null,
      declaredBy: keyOf(m.type_index),
    }))),
    initSignature: t.init ? koffi.decode(t.init, PFMethodInfo).signature ?? null : null,
  });
}

// The keys of every registered object type, in the order of registration:
// the library gives them consecutive indices from REGISTERED_BEGIN on and
// names each (PFObjectTypeName), up to the first index it does not name.
function registeredTypes() {
  const out = [];
  for (let index = REGISTERED_BEGIN; ; index++) {
    const key = api.PFObjectTypeName(index);
    if (key == null) return out;
    out.push(key);
  }
}

function typeFunction(getter) {
  checkCall(getter(scratch.addr));
  return adoptFunction(readPtr(scratch, 0));
}

// The JavaScript class of a registered object type: a subclass of its
// parent's class (PackedObject for a root), whose constructor calls the
// type's constructor, whose fields are properties and whose methods are
// methods (static methods static).
function objectClass(index) {
  let cls = classes.get(index)?.deref();
  if (cls !== undefined) return cls;
  const t = readTypeInfo(index);
  const parent = t.parent_index ? objectClass(t.parent_index) : PackedObject;
  let ctor = null;
  const key = t.key;
  cls = {
    [key.split('.').pop()]: class extends parent {
      // Calls the type's constructor, which returns the instance (a derived
      // constructor may return an object instead of calling super).
      constructor(...args) { // eslint-disable-line constructor-super
        if (ctor === null) ctor = typeFunction((out) => api.PFObjectTypeGetConstructor(index, out));
        const made = ctor(...args);
        return made;
      }
    },
  }[key.split('.').pop()];
  Object.defineProperty(cls, 'typeKey', { value: key });
  Object.defineProperty(cls, 'typeIndex', { value: index });
  if (t.doc) Object.defineProperty(cls, 'doc', { value: t.doc });
  Object.defineProperty(cls, 'typeInfo', { value: typeInfoRecord(t) });
  for (const f of t.fields) {
    if (f.type_index !== index) continue;
    const writable = (f.flags & 1) !== 0;
    Object.defineProperty(cls.prototype, f.name, {
      enumerable: true,
      configurable: true,
      get() {
        checkCall(api.PFObjectGetField(liveHandle(this, key), f.ptr, scratch.addr, scratch.addr + 8));
        const code = scratch.i32[2];
        // A str, bytes or handle points into the instance; the others are copies.
        if (!COPIED.has(code)) freeHandle(this, `field '${f.name}' of ${key}`);
        return scratchItem(0, 8);
      },
      set(v) {
        if (!writable) throw new TypeError(`packedfunc: field '${f.name}' of ${key} is read-only`);
        const where = `field '${f.name}' of ${key}`;
        withValue(v, `field '${f.name}'`, (raw, code) => api.PFObjectSetField(freeHandle(this, where), f.ptr, raw, code));
      },
    });
  }
  for (const m of t.methods) {
    if (m.type_index !== index || m.name === '__init__') continue;
    let fn = null;
    const get = () => {
      if (fn === null) fn = typeFunction((out) => api.PFObjectTypeGetMethod(index, m.name, out));
      return fn;
    };
    if (m.flags & 1) {
      Object.defineProperty(cls, m.name, { value: (...args) => get()(...args), configurable: true, writable: true });
    } else {
      Object.defineProperty(cls.prototype, m.name, {
        value: function method(...args) { return get()(this, ...args); },
        configurable: true,
        writable: true,
      });
    }
  }
  // console.log shows the type's key and every field's value (its
  // parents' too).
  const fieldNames = t.fields.map((f) => f.name);
  Object.defineProperty(cls.prototype, kInspect, {
    value(depth, options) { return inspectFields(key, this, fieldNames, depth, options); },
    configurable: true,
  });
  classes.set(index, new WeakRef(cls));
  return cls;
}

adopters.registered = (h, index) => {
  let cls;
  try {
    cls = objectClass(index);
  } catch (err) {
    api.PFObjectFree(h);
    throw err;
  }
  return PackedObject[ADOPT].call(cls, h, index);
};

// The class of the registered object type `key` ("demo.Counter").
function getObjectType(key) {
  nameArg('getObjectType', key, 'key');
  checkCall(api.PFObjectTypeFind(key, scratch.addr));
  const index = scratch.u32[0];
  if (!index) {
    throw new FunctionNotFoundError(`packedfunc: no object type named '${key}'`);
  }
  return objectClass(index);
}

module.exports = { objectClass, classModule, getObjectType, registeredTypes };
