'use strict';
// Objects: the wrapper of a reference-counted packedfunc object other than
// a function (PackedObject, the base of containers, modules and the
// classes of registered types), and the instances lent to a call off the
// JavaScript thread. Private.

const { api, TYPE_CODES, OBJECT_TYPES, REGISTERED_BEGIN } = require('./library.js');
const { checkCall, PackedFuncError } = require('./errors.js');
const { writePtr } = require('./words.js');
const { kHandle, ADOPT, registry, what, liveHandle } = require('./wrappers.js');
const { registerObjectEncoder } = require('./encode.js');
const { adopters } = require('./decode.js');
const { custom, kInspect } = require('./inspect.js');
const { releaseHandle } = require('./frames.js');

const { module: MODULE, object: OBJECT } = TYPE_CODES;

// A reference-counted packedfunc object other than a function (a module, a
// container, an instance of a registered type, ...). Owns one reference.
class PackedObject {
  static [ADOPT](h, typeIndex) {
    const self = Object.create(this.prototype);
    self[kHandle] = h;
    self.typeIndex = typeIndex;
    registry.register(self, h, self);
    if (typeof self._adopted === 'function') self._adopted();
    return self;
  }

  constructor() {
    throw new TypeError(`packedfunc: ${new.target.name} objects come from C`);
  }

  get handle() { return this[kHandle]; }

  dispose() {
    const h = this[kHandle];
    if (h) {
      this[kHandle] = 0;
      registry.unregister(this);
      releaseHandle(h); // a call that took it may be in progress
    }
  }

  [Symbol.dispose]() { this.dispose(); }

  get typeName() { return api.PFObjectTypeName(this.typeIndex) ?? String(this.typeIndex); }

  toString() { return `[${this.constructor.name} ${this.typeName}${this[kHandle] ? '' : ' (disposed)'}]`; }

  // What console.log shows: a subclass shows its items or fields.
  [custom](depth, options) { return this[kHandle] ? this[kInspect](depth, options) : this.toString(); }

  [kInspect]() { return this.toString(); }
}

adopters.object = (h, index) => PackedObject[ADOPT](h, index);

registerObjectEncoder(PackedObject, (x, blk, off, ctx, pos) => {
  writePtr(blk, off, freeHandle(x, what(pos)));
  return x.typeIndex === OBJECT_TYPES.module ? MODULE : OBJECT;
});

// ---- instances lent to a call off the JavaScript thread ------------------------------
//
// object_type.h leaves serializing an instance to hosts. While a callAsync
// call that took a registered instance runs on a worker thread, C may read
// any of its fields; JavaScript must not free what C reads (a field write
// frees the value it replaces) nor read what the call may be replacing,
// and the event loop must never wait for the call. So until the call ends
// the instance is lent to it: a field write, a field read through C (str,
// bytes, handles) and any call that takes the instance throw at once;
// except in a callback that the call's own thread waits for (the helper
// tells its loan), as a method's callback may use the method's instance.

const lent = new Map(); // handle -> the loan of the callAsync call that runs with it
let lastLoan = 0;
const loans = { waiting: 0 }; // the loan whose call waits for the callback running now (callbacks.js)

function inUse(x, where) {
  return new PackedFuncError(`packedfunc: ${where}: the ${x.typeName} instance is in use by a ` +
    'callAsync call that has not ended (await it first)');
}

// x's handle, for an operation that reads or changes what C may be using.
function freeHandle(x, where) {
  const h = liveHandle(x, where);
  if (lent.size !== 0 && lent.has(h) && lent.get(h) !== loans.waiting) throw inUse(x, where);
  return h;
}

// Lends the registered instances among args to a call until endLoan() (an
// instance that a call waiting for this callback lent stays with it); the
// call holds a reference to each, so that a dispose() meanwhile frees it
// only when the call ends. The loan's number and its handles.
function lend(args, ctx) {
  const objs = args.filter((x) => x instanceof PackedObject && x.typeIndex >= REGISTERED_BEGIN);
  for (const x of objs) if (lent.has(x[kHandle])) throw inUse(x, 'callAsync');
  const loan = { id: lastLoan = (lastLoan % 0x7fffffff) + 1, handles: [] };
  for (const x of objs) {
    const h = x[kHandle];
    if (lent.has(h)) continue; // given twice
    checkCall(api.PFObjectRetain(h));
    ctx.release.push(h);
    lent.set(h, loan.id);
    loan.handles.push(h);
  }
  return loan;
}

function endLoan(loan) {
  for (const h of loan.handles) lent.delete(h);
}

module.exports = { PackedObject, loans, freeHandle, lend, endLoan };
