// A plugin written with the C++ layer (tests/modules/mod_cxx_layer.cc, over
// include/packedfunc/packedfunc.hpp), used from Node: deduced signatures
// with defaults, each C++ exception a function throws as the error of its
// kind, with the process alive afterwards, and a C++ class (pf::class_) as
// a JavaScript class: its constructor, fields (a std::string one among
// them), methods that throw, a static method and the derived class.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { pf, ROOT } from '../test-support/fixtures.mjs';

const MODULE_DIR = process.env.PF_TEST_MODULE_DIR || path.join(ROOT, process.env.BUILD || 'build', 'modules');
const plugin = pf.loadModule(path.join(MODULE_DIR, 'mod_cxx_layer.so'));
const cxxl = plugin.cxxl;

test('functions registered by deduction, with their defaults', () => {
  assert.equal(cxxl.clamp(7.5), 1.0);
  assert.equal(cxxl.clamp(0.5, 0, 2), 0.5);
  assert.equal(cxxl.greet('ada'), 'hello, ada');
  assert.equal(cxxl.apply((x) => x + 1, 2.0), 6.0);
});

test('each C++ exception becomes the error of its kind, and the process lives', () => {
  const cases = [
    ['invalid_argument', 'ValueError', RangeError, 'bad argument: invalid_argument'],
    ['domain_error', 'ValueError', RangeError, 'outside the domain: domain_error'],
    ['out_of_range', 'IndexError', RangeError, 'out of range: out_of_range'],
    ['bad_alloc', 'MemoryError', pf.PackedFuncError, 'out of memory (std::bad_alloc)'],
    ['runtime_error', 'RuntimeError', pf.PackedFuncError, 'it failed: runtime_error'],
    ['user', 'KeyError', pf.PackedFuncError, 'no such key: user'],
    ['pf_error', 'NotImplementedError', pf.PackedFuncError, 'not yet: pf_error'],
    ['int', 'RuntimeError', pf.PackedFuncError, 'unknown C++ exception'],
  ];
  for (const [what, kind, cls, message] of cases) {
    assert.throws(() => cxxl.raise(what), (e) => {
      assert.ok(e instanceof cls, `${what} -> ${cls.name}`);
      assert.equal(e.kind, kind);
      assert.equal(e.message, message);
      return true;
    });
    assert.equal(cxxl.raise('nothing'), 0);
  }
});

test('a JavaScript callback that throws, called from C++, comes back as its error', () => {
  const thrown = new Error('from the callback');
  assert.throws(() => cxxl.apply(() => { throw thrown; }, 1.0), (e) => e === thrown || e.message.includes('from the callback'));
  assert.throws(() => cxxl.clamp(0.5, 2, 1), (e) => e instanceof RangeError && e.message === 'clamp: lo > hi');
});

test('a C++ class: constructor, fields (std::string too), methods that throw, a static method', () => {
  const { 'cxxl.Counter': Counter, 'cxxl.Special': Special } = plugin.types;
  const c = new Counter(3, 'apples');
  assert.ok(c instanceof Counter && c instanceof pf.PackedObject);
  assert.equal(c.count, 3);
  assert.equal(c.name, 'apples');
  assert.equal(c.unit, 'items');
  c.name = 'pears \u2615';
  assert.equal(c.name, 'pears \u2615');
  assert.equal(c.describe(), 'pears \u2615=3');
  assert.throws(() => { c.name = 5; }, (e) => e instanceof TypeError && /field 'name' of cxxl.Counter: expected str, got/.test(e.message));
  assert.throws(() => { c.unit = 'kg'; }, TypeError);
  assert.equal(c.name, 'pears \u2615');
  // std::domain_error from a method: a ValueError, a RangeError in Node.
  assert.throws(() => c.take(10), (e) => e instanceof RangeError && e.kind === 'ValueError' && e.message === 'take: only 3 left');
  assert.equal(c.take(1), 2); // the object and the process live on
  assert.throws(() => new Counter(-1), (e) => e.kind === 'ValueError' && /Counter: start < 0/.test(e.message));
  assert.equal(Counter.parse('42'), 42);
  assert.throws(() => Counter.parse('x'), (e) => e.kind === 'ValueError' && /parse: not a number: 'x'/.test(e.message));
  const s = new Special();
  assert.ok(s instanceof Counter);
  assert.equal(s.name, 'special');
  s.loud = true;
  assert.equal(s.shout(), 'special=100!');
  c.dispose();
  s.dispose();
});
