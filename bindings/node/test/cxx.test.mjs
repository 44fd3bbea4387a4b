// A plugin written with the C++ layer (tests/modules/mod_cxx_layer.cc, over
// include/packedfunc/packedfunc.hpp), used from Node: deduced signatures
// with defaults, and each C++ exception a function throws as the error of
// its kind, with the process alive afterwards.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';

import { pf, ROOT } from '../test-support/fixtures.mjs';

const MODULE_DIR = process.env.PF_TEST_MODULE_DIR || path.join(ROOT, process.env.BUILD || 'build', 'modules');
const cxxl = pf.loadModule(path.join(MODULE_DIR, 'mod_cxx_layer.so')).cxxl;

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
