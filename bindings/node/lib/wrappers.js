'use strict';
// What every wrapper of a C object shares: the symbols that hold its
// handle and state, the FinalizationRegistry that releases the reference of
// a wrapper collected undisposed, and the words that name a value in
// messages.
//
// Every wrapper of a C object (a packed function, an object, a typed array
// over a tensor object's memory) owns one reference, released by dispose()
// / [Symbol.dispose] or, when the wrapper is collected, by a
// FinalizationRegistry; never both (dispose unregisters, and a disposed
// wrapper has handle 0). Private.

const { api } = require('./library.js');

// The handle of a wrapper, by symbol: also on the typed arrays that view a
// tensor object's memory.
const kHandle = Symbol('packedfunc.handle');
const ADOPT = Symbol('packedfunc.adopt');
const kState = Symbol('packedfunc.state');

// Set when this thread exits: finalizers then free nothing.
const lifetime = { shuttingDown: false };

// Releases the reference of a wrapper collected undisposed.
const registry = new FinalizationRegistry((h) => { if (!lifetime.shuttingDown) api.PFObjectFree(h); });

function what(pos) { return typeof pos === 'number' ? `argument ${pos}` : pos; }

function describe(x) {
  if (x === null) return 'null';
  if (typeof x !== 'object' && typeof x !== 'function') return typeof x;
  return x.constructor && x.constructor.name ? x.constructor.name : 'object';
}

function liveHandle(x, pos) {
  const h = x[kHandle];
  if (!h) throw new TypeError(`packedfunc: ${what(pos)}: the ${describe(x)} was disposed`);
  return h;
}

module.exports = { kHandle, ADOPT, kState, lifetime, registry, what, describe, liveHandle };
