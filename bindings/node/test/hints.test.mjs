// What a Node.js user expects of numbers, bytes and modules (issue 33): a
// value that crossed as another type than the caller likely meant makes
// the callee's TypeError say what to pass instead; int64 results follow
// one rule; a loaded module publishes nothing globally until asked.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { pf, testing, DEMO_PLUGIN } from '../test-support/fixtures.mjs';

const demo = pf.loadModule(DEMO_PLUGIN).demo;
const typedAdd = pf.getGlobalFunc('testing.typed_add');
const typedNdim = pf.getGlobalFunc('testing.typed_ndim');

const BIGINT_HINT = /argument 0 is 9007199254740992, an integer beyond Number\.MAX_SAFE_INTEGER, which crosses as a float: pass a BigInt for an int64, such as 9007199254740992n\)$/;

test('an integer beyond 2^53 where an int64 is expected: the TypeError says to pass a BigInt', async () => {
  assert.throws(() => demo.add(2 ** 53, 1), (e) => e instanceof TypeError && e.kind === 'TypeError' &&
    /^typed function 'demo\.add' .*: argument 0 'a': expected int64, got float \(/.test(e.message) && BIGINT_HINT.test(e.message));
  assert.throws(() => typedAdd(2 ** 53, 1), BIGINT_HINT);
  await assert.rejects(demo.add.callAsync(2 ** 53, 1), BIGINT_HINT);
  assert.throws(() => demo.add(1, -(2 ** 70)), /argument 1 is -1\.1805916207174113e\+21, which int64 cannot hold\)$/);
  assert.equal(demo.add(2n ** 53n, 1), 2n ** 53n + 1n); // as the hint says
  assert.equal(demo.hypot(2 ** 53, 0), 2 ** 53); // a float parameter takes it, no error
  assert.throws(() => demo.add(2.5, 1), (e) => !e.message.includes('BigInt')); // no hint for a fraction
});

test('a Buffer or Uint8Array where a tensor is expected: the TypeError says to pass pf.tensor()', () => {
  const buf = Buffer.alloc(16);
  assert.throws(() => demo.fill(buf, 1), (e) => e instanceof TypeError &&
    /got bytes \(argument 0 is a Buffer, which crosses as bytes: pass pf\.tensor\(array\) for a uint8 tensor over its memory\)$/.test(e.message));
  assert.throws(() => typedNdim(new Uint8Array(4)), /got bytes \(argument 0 is a Uint8Array, which crosses as bytes: pass pf\.tensor\(array\)/);
  assert.equal(typedNdim(pf.tensor(buf, [4, 4])), 2); // a Buffer is a uint8 tensor through pf.tensor
  assert.equal(String(pf.tensor(buf).dtype), 'uint8');
  const f64 = new Float64Array(buf.buffer, buf.byteOffset, 2);
  demo.fill(pf.tensor(f64), 1.5);
  assert.deepEqual(Array.from(f64), [1.5, 1.5]);
  assert.equal(testing.echo(buf).length, 16); // bytes where bytes are taken: no error
});

test('int64 results: a number when it is a safe integer, a BigInt otherwise; bytes: a Uint8Array copy', () => {
  assert.equal(testing.echo(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER);
  assert.equal(testing.echo(-Number.MAX_SAFE_INTEGER), -Number.MAX_SAFE_INTEGER);
  assert.equal(testing.echo(2n ** 53n), 2n ** 53n);
  assert.equal(testing.echo(-(2n ** 53n)), -(2n ** 53n));
  assert.equal(testing.echo(2n ** 53n - 1n), Number.MAX_SAFE_INTEGER); // the value decides, not how it came
  assert.equal(testing.echo(-(2n ** 63n)), -(2n ** 63n));
  const bytes = testing.echo(Buffer.from('abc'));
  assert.equal(Object.getPrototypeOf(bytes), Uint8Array.prototype);
  assert.deepEqual(bytes, new Uint8Array([97, 98, 99]));
});

test('loadModule publishes nothing in the global registry until exportGlobal()', () => {
  const mod = pf.loadModule(DEMO_PLUGIN);
  assert.deepEqual(pf.listGlobalFuncNames('hints.demo.'), []);
  assert.equal(pf.getGlobalFunc('hints.demo.add', { allowMissing: true }), null);
  const names = mod.exportGlobal('hints.');
  assert.ok(names.includes('hints.demo.add'));
  assert.deepEqual(pf.listGlobalFuncNames('hints.demo.').sort(), names.slice().sort());
  assert.equal(pf.getGlobalFunc('hints.demo.add')(2, 3), 5);
});

test('dispose() releases a wrapper on every Node.js version; [Symbol.dispose] is the same method', () => {
  const f = pf.convert((x) => x);
  assert.equal(typeof Symbol.dispose, 'symbol');
  assert.equal(f[Symbol.dispose], f.dispose);
  const held = pf.heldCount();
  f.dispose();
  assert.equal(pf.heldCount(), held - 1);
  const list = pf.List.of([1]);
  list[Symbol.dispose]();
  assert.equal(list.handle, 0);
});
