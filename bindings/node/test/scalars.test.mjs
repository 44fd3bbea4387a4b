// Calls whose arguments are up to four numbers and booleans take a path of
// their own (lib/functions.js, callScalars), and so do callbacks that C
// calls with up to three ints (lib/callbacks.js): both give what the
// general path gives. The general path is reached here through C:
// nodetest.call_global(name, args...) gets the arguments encoded by the
// general path (its first argument is a string) and calls the function
// with them, as the wrapper would.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { pf, testing, nt } from '../test-support/fixtures.mjs';

// The result of thunk(), or the error it throws as [kind, message].
function outcome(thunk) {
  try {
    return ['ok', thunk()];
  } catch (err) {
    return [err.constructor.name, err.kind ?? null, err.message.split('\n')[0]];
  }
}

const general = (name, ...args) => outcome(() => nt.call_global(name, ...args));

test('scalar arguments: the results and the types of the general path', () => {
  const echo = pf.getGlobalFunc('testing.echo');
  const typeName = pf.getGlobalFunc('testing.type_name');
  const values = [0, 1, -1, -0, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, -(2 ** 31) - 1, 2 ** 32, 2 ** 40, -(2 ** 40),
    Number.MAX_SAFE_INTEGER, Number.MIN_SAFE_INTEGER, 2 ** 53, -(2 ** 53), 2 ** 63, 1.5, -2.25, 1e-300,
    NaN, Infinity, -Infinity, true, false];
  for (const x of values) {
    assert.deepEqual(outcome(() => echo(x)), general('testing.echo', x), `echo(${x})`);
    assert.deepEqual(outcome(() => typeName(x)), general('testing.type_name', x), `type_name(${x})`);
  }
  assert.equal(typeName(2 ** 31), 'int');
  assert.equal(typeName(2 ** 53), 'float'); // beyond 2^53: a float, as in the general path
  assert.equal(typeName(true), 'bool');
  assert.ok(Object.is(echo(-0), 0));
});

test('a typed int64 function: results, overflow and precision as in the general path', () => {
  const cases = [[40, 2], [-1, 1], [2 ** 31 - 1, 1], [-(2 ** 31), -1], [2 ** 40, 2 ** 40],
    [Number.MAX_SAFE_INTEGER, 1], [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER],
    [Number.MIN_SAFE_INTEGER, -2], [1.5, 2], [2, 0.5], [NaN, 1], [true, 1], [1, false]];
  for (const [a, b] of cases) {
    assert.deepEqual(outcome(() => nt.typed_add(a, b)), general('nodetest.typed_add', a, b), `typed_add(${a}, ${b})`);
  }
  assert.equal(nt.typed_add(Number.MAX_SAFE_INTEGER, 1), 2n ** 53n); // beyond 2^53: a BigInt
  assert.equal(nt.typed_add(Number.MIN_SAFE_INTEGER, -2), -(2n ** 53n) - 1n);
  assert.throws(() => nt.typed_add(1.5, 2), TypeError);
  // An integer beyond 2^53 crosses as a float, with the general path's note
  // (which call_global would number from its own first argument).
  assert.throws(() => nt.typed_add(1, 2 ** 53), /argument 1 is 9007199254740992, an integer beyond/);
});

test('a typed function called with the wrong number of arguments: the general path\'s error', () => {
  for (const args of [[], [1], [1, 2, 3], [1, 2, 3, 4], [1, 2, 3, 4, 5]]) {
    const got = outcome(() => nt.typed_add(...args));
    assert.equal(got[0], 'TypeError', `typed_add(${args})`);
    assert.deepEqual(got, general('nodetest.typed_add', ...args), `typed_add(${args})`);
  }
});

test('float64 parameters take integer-valued numbers as floats; other values keep the general path', () => {
  assert.equal(nt.codes(2, 3), 'float,float');
  assert.equal(nt.codes(2), 'float');
  assert.equal(nt.codes(2 ** 40, 0.5), 'float,float');
  assert.equal(nt.codes(true, 3), 'bool,float');
  assert.equal(nt.codes(2.5, 3n), 'float,int');
  assert.equal(nt.codes(2 ** 60, 1), 'float,float');
  // Beyond the parameters: a number is an int again.
  assert.equal(nt.codes(1, 2, 3), 'float,float,int');
  assert.equal(nt.codes(1, 2, 3, 4.5), 'float,float,int,float');
});

test('an error of the callee and an error of a nested call are thrown as in the general path', () => {
  const add = pf.getGlobalFunc('testing.add');
  assert.deepEqual(outcome(() => add(1, 2.5)), general('testing.add', 1, 2.5));
  assert.throws(() => add(1, 2.5), TypeError);
  assert.equal(add(1, 2), 3); // the error does not stay
  const outer = pf.convert((x) => nt.typed_add(x, 1) * 2);
  assert.equal(outer(20), 42);
  const failing = pf.convert((x) => nt.typed_add(x, 0.5));
  const err = outcome(() => failing(1));
  assert.equal(err[0], 'TypeError');
  assert.deepEqual(err, outcome(() => failing(...[1, 'x'].slice(0, 1))));
});

test('a function disposed during its own call stays alive until the call ends', () => {
  let w = null;
  w = pf.convert((x) => { w.dispose(); return nt.typed_add(x, 1); });
  assert.equal(w(1), 2);
  assert.throws(() => w(1), /disposed/);
  const a = nt.make_adder(10);
  pf.registerFunc('scalars.adder', a, { override: true });
  const held = pf.getGlobalFunc('scalars.adder');
  a.dispose();
  pf.removeGlobalFunc('scalars.adder');
  assert.equal(held(5), 15); // the wrapper's reference keeps it
  held.dispose();
  assert.throws(() => held(5), /the function was disposed/);
});

test('callbacks with up to three ints get them as numbers, others as the general path gives them', () => {
  const show = (...a) => a.map((x) => `${typeof x}:${x}`).join(',');
  assert.equal(testing.call(show), '');
  assert.equal(testing.call(show, 1), 'number:1');
  assert.equal(testing.call(show, 1, -2), 'number:1,number:-2');
  assert.equal(testing.call(show, 2 ** 40, -(2 ** 40), 3), 'number:1099511627776,number:-1099511627776,number:3');
  assert.equal(testing.call(show, 1, 2, 3, 4), 'number:1,number:2,number:3,number:4');
  assert.equal(testing.call(show, 2n ** 62n), `bigint:${2n ** 62n}`);
  assert.equal(testing.call(show, 1, 2.5), 'number:1,number:2.5');
  assert.equal(testing.call(show, 1, true, 'x'), 'number:1,boolean:true,string:x');
  assert.equal(testing.call((a, b) => a + b, 40, 2), 42);
  // Results: an int32 is written on a path of its own; the others as before.
  for (const r of [0, -1, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, 2 ** 40, 1.5, NaN, true, null, 'x', 2n ** 62n]) {
    assert.ok(Object.is(testing.call(() => r, 1, 2), r === null ? null : r), `a callback's result ${r}`);
  }
  assert.ok(Object.is(testing.call(() => -0, 1), 0)); // an int, as encode() gives it
  assert.equal(testing.call(() => undefined, 1), null);
  assert.throws(() => testing.call(() => { throw new RangeError('nope'); }, 1, 2), /nope/);
});
