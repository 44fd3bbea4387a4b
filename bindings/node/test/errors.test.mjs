// Errors both ways: C kinds as JavaScript classes, JavaScript exceptions
// through C and back as the same object, custom kinds.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { pf, testing, nt, DEMO_PLUGIN } from '../test-support/fixtures.mjs';

test('C errors become the class of their kind, with kind and cTraceback', () => {
  const cases = [['TypeError', TypeError], ['ValueError', RangeError], ['IndexError', RangeError],
    ['KeyError', pf.PackedFuncError], ['RuntimeError', pf.PackedFuncError], ['MemoryError', pf.PackedFuncError],
    ['SomeHostKind', pf.PackedFuncError]];
  for (const [kind, cls] of cases) {
    assert.throws(() => testing.raise_error(kind, `a ${kind}`), (e) => {
      assert.ok(e instanceof cls, `${kind} -> ${cls.name}`);
      assert.equal(e.kind, kind);
      assert.equal(e.message, `a ${kind}`);
      assert.ok(Array.isArray(e.cTraceback));
      assert.match(e.stack, /at \[C\] in testing\.raise_error/);
      return true;
    });
  }
});

test('an error raised by C code has its C source lines in cTraceback and the stack', () => {
  const demo = pf.loadModule(DEMO_PLUGIN).demo;
  assert.throws(() => demo.add(1, 'two'), (e) => {
    assert.ok(e instanceof TypeError);
    assert.equal(e.message, "typed function 'demo.add' int64(a:int64,b:int64): argument 1 'b': expected int64, got str");
    return true;
  });
  assert.throws(() => testing.call(42), (e) => e instanceof TypeError && /testing\.call: argument 0 must be function/.test(e.message));
  // A C function that fails without recording an error.
  assert.throws(() => testing.fail_silently(), (e) => e.kind === 'RuntimeError');
});

test('a JavaScript exception thrown in a callback comes back as the same object, with the C levels in its stack', () => {
  const demo = pf.loadModule(DEMO_PLUGIN).demo;
  let thrown = null;
  function fails() { thrown = new Error('from the callback'); throw thrown; }
  assert.throws(() => demo.call_n_times(fails, 3), (e) => {
    assert.equal(e, thrown);
    const lines = e.stack.split('\n');
    const at = lines.findIndex((l) => l.includes('at fails'));
    const c = lines.findIndex((l) => l.includes('[C] in demo.call_n_times, calling the callback'));
    assert.ok(at > 0 && c > at, e.stack);
    assert.ok(!lines.some((l) => /bindings.node.lib.[a-z]+\.js/.test(l)), e.stack);
    return true;
  });
  // Through two levels of C, and thrown values that are not errors.
  assert.throws(() => testing.call(() => testing.call(() => { throw thrown; })), (e) => e === thrown);
  assert.throws(() => testing.call(() => { throw 'a string'; }), (e) => e === 'a string');
});

test('the kind and message a JavaScript exception has in C', () => {
  const cases = [[new TypeError('t'), 'TypeError: t'], [new RangeError('r'), 'ValueError: r'],
    [new Error('e'), 'RuntimeError: e'], [new pf.PackedFuncError('k', 'KeyError'), 'KeyError: k'],
    ['plain', 'RuntimeError: plain']];
  for (const [thrown, seen] of cases) assert.equal(nt.error_of(() => { throw thrown; }), seen);
  assert.equal(nt.error_of(() => 1), '');
});

test('custom kinds registered from JavaScript, both ways', () => {
  class QuotaError extends Error {}
  pf.registerError('QuotaExceeded', QuotaError);
  assert.throws(() => testing.raise_error('QuotaExceeded', 'over'), (e) => e instanceof QuotaError && e.kind === 'QuotaExceeded');
  const err = new QuotaError('too much');
  assert.throws(() => testing.call(() => { throw err; }), (e) => e === err);
  assert.throws(() => pf.registerError('not a kind', QuotaError), RangeError);
  assert.throws(() => pf.registerError('Fine', Object), TypeError);
});
