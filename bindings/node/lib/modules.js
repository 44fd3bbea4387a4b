'use strict';
// Modules: the functions and object types that came together from a
// shared library (loadModule). Private.

const { koffi, api, scratch, OBJECT_TYPES } = require('./library.js');
const { checkCall, nameArg, FunctionNotFoundError } = require('./errors.js');
const { readPtr } = require('./words.js');
const { ADOPT, liveHandle } = require('./wrappers.js');
const { registerObjectType } = require('./decode.js');
const { adoptFunction } = require('./functions.js');
const { PackedObject } = require('./objects.js');
const { objectClass, classModule } = require('./classes.js');
const { inspectFields, kInspect } = require('./inspect.js');

// A packedfunc module: functions that came together from a shared library.
// Its functions are properties by their dotted names (mod.demo.add for
// "demo.add"), and items by full name (mod.get('demo.add')).
class Module extends PackedObject {
  _adopted() {
    this.path = null;
    this._cache = new Map();
    this._names = null;
  }

  listFunctionNames() {
    if (this._names === null) {
      checkCall(api.PFModListFunctionNames(liveHandle(this, 'the module'), scratch.addr, scratch.addr + 8));
      const n = scratch.i32[0];
      const arr = readPtr(scratch, 8);
      this._names = n ? Array.from(koffi.decode(arr, 'const char*', n)) : [];
    }
    return this._names.slice();
  }

  // The function `name` (full name), or of its imports; null when missing
  // with allowMissing, else a FunctionNotFoundError.
  get(name, { queryImports = true, allowMissing = false } = {}) {
    let f = this._cache.get(name);
    if (f !== undefined) return f;
    nameArg('Module.get', name);
    checkCall(api.PFModGetFunction(liveHandle(this, 'the module'), name, queryImports ? 1 : 0, scratch.addr));
    const h = readPtr(scratch, 0);
    if (!h) {
      if (allowMissing) return null;
      throw new FunctionNotFoundError(`packedfunc: module ${this.path ?? ''} has no function named '${name}'`);
    }
    f = adoptFunction(h);
    this._cache.set(name, f);
    return f;
  }

  // Registers each of the module's functions globally as prefix + name.
  exportGlobal(prefix = '', { override = false, protected: prot = false } = {}) {
    nameArg('Module.exportGlobal', prefix, 'prefix');
    checkCall(api.PFModExportGlobal(liveHandle(this, 'the module'), prefix, (override ? 1 : 0) | (prot ? 2 : 0)));
    return this.listFunctionNames().map((n) => prefix + n);
  }

  [kInspect](depth, options) {
    const shown = { path: this.path, functions: this.listFunctionNames() };
    return inspectFields('Module', shown, Object.keys(shown), depth, options);
  }

  // The classes of the object types that the module registered, by key.
  // Each class keeps the module loaded (its types go with it).
  get types() {
    checkCall(api.PFModListTypes(liveHandle(this, 'the module'), scratch.addr, scratch.addr + 8));
    const n = scratch.i32[0];
    const out = {};
    if (n) {
      for (const idx of koffi.decode(readPtr(scratch, 8), 'uint32_t', n)) {
        const cls = objectClass(idx);
        classModule.set(cls, this);
        out[api.PFObjectTypeName(idx)] = cls;
      }
    }
    return out;
  }
}

// Builds mod.a.b properties for the dotted names (a method's name wins over
// a function's: use get() for those).
function exposeNames(target, module, names, prefix) {
  const children = new Set();
  for (const n of names) if (n.startsWith(prefix)) children.add(n.slice(prefix.length).split('.')[0]);
  for (const child of children) {
    if (child in target) continue;
    const full = prefix + child;
    Object.defineProperty(target, child, {
      enumerable: true,
      configurable: true,
      get() {
        const f = names.includes(full) ? module.get(full) : null;
        if (f !== null) return f;
        const ns = Object.create(null);
        exposeNames(ns, module, names, `${full}.`);
        Object.defineProperty(target, child, { value: ns, enumerable: true, configurable: true });
        return ns;
      },
    });
  }
}

registerObjectType(OBJECT_TYPES.module, (h, i) => {
  const m = Module[ADOPT](h, i);
  exposeNames(m, m, m.listFunctionNames(), '');
  return m;
});

module.exports = { Module };
