// Calls through resolved targets: a wrapper resolves its function once
// (PFFuncResolve) and the helper calls the target (src/pfnode.c,
// pfnode_call); results, errors, strings and lifetimes are PFFuncCall's.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { pf, nt } from '../test-support/fixtures.mjs';

test('typed and direct functions are called through their targets', () => {
  assert.equal(nt.typed_add(40, 2), 42);
  assert.equal(nt.typed_add(2n ** 40n, 1), 2 ** 40 + 1); // the general path (no small ints)
  assert.equal(nt.direct_greet('node'), 'hello, node');
  assert.throws(() => nt.typed_add('x', 1), TypeError);
  assert.throws(() => nt.direct_greet(1), /direct_greet: expected one str/);
  assert.equal(nt.typed_add(1, 2), 3); // after the errors, as before them
});

test('a direct function that fails without an error gets a RuntimeError, never an older one', () => {
  assert.throws(() => nt.direct_greet(1), TypeError); // an error left on the thread
  assert.throws(() => nt.direct_silent(), (e) => e.kind === 'RuntimeError' &&
    /'nodetest.direct_silent' returned -1 without recording an error/.test(e.message));
  assert.throws(() => nt.direct_silent(), /without recording an error/); // and with none left
  // Nested in a call from C, with an error standing: the same.
  const seen = nt.error_of(() => {
    assert.throws(() => nt.direct_greet(1), TypeError);
    nt.direct_silent();
  });
  assert.match(seen, /^RuntimeError: .*'nodetest.direct_silent' returned -1 without recording an error/);
});

test('string results of targets stay valid across nested calls', () => {
  pf.registerFunc('targets.nested', (s) => `${nt.direct_greet(s)}!`, { override: true });
  try {
    assert.equal(nt.call_global('targets.nested', 'inner'), 'hello, inner!');
    assert.equal(nt.direct_greet(nt.call_global('nodetest.direct_greet', 'a')), 'hello, hello, a');
    const long = 'x'.repeat(200);
    assert.equal(nt.direct_greet(nt.call_global('targets.nested', long)).length, 'hello, '.length * 2 + 201);
  } finally {
    pf.removeGlobalFunc('targets.nested');
  }
});

test('a target stays valid while the wrapper holds its function', () => {
  const a = nt.make_adder(1); // the wrapper holds the only reference
  assert.equal(a(1), 2);
  pf.registerFunc('targets.adder', a, { override: true });
  const w = pf.getGlobalFunc('targets.adder');
  assert.equal(w(1), 2);
  a.dispose();
  // The registry drops its reference: w still holds the function.
  pf.registerFunc('targets.adder', nt.make_adder(100), { override: true });
  assert.equal(w(1), 2);
  assert.equal(pf.getGlobalFunc('targets.adder')(1), 101);
  pf.removeGlobalFunc('targets.adder');
  assert.equal(w(5), 6);
  w.dispose();
  assert.throws(() => w(1), /disposed/);
});

test('a new function at a freed one\'s address gets its own target', () => {
  // Adders and multipliers in turn: the same size, other entries. Each is
  // called in a callback (error_of calls it from C), whose frame no other
  // call takes in between.
  const handles = [];
  for (let k = 2; k < 10; k++) {
    const mul = k % 2;
    const f = nt.make_adder(k, mul);
    handles.push(f.handle);
    let got = null;
    assert.equal(nt.error_of(() => { got = [f(3), f(k)]; }), '');
    assert.deepEqual(got, mul ? [3 * k, k * k] : [3 + k, 2 * k]);
    f.dispose();
  }
  // Freed functions' memory is reused: the case this test is for.
  assert.ok(new Set(handles).size < handles.length, `handles all differ: ${handles}`);
});
