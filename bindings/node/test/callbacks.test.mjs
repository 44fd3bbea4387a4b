// C calling JavaScript: callbacks on the JavaScript thread and from other
// C threads, functions registered by name, and what happens when the
// JavaScript thread cannot run them.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { pf, testing, nt } from '../test-support/fixtures.mjs';

test('C calls a JavaScript callback on the JavaScript thread', () => {
  const seen = [];
  const sum = testing.call_n((a, b) => { seen.push(a); return a + b; }, 5);
  assert.equal(sum, 20);
  assert.deepEqual(seen, [0, 1, 2, 3, 4]);
  // Arguments and results of every kind cross back.
  assert.equal(testing.call((s, n, f, b) => `${s}:${n}:${f}:${b}`, 'a', 1, 1.5, true), 'a:1:1.5:true');
  assert.equal(testing.call(() => undefined), null);
  assert.equal(testing.call(() => 2n ** 60n), 2n ** 60n);
  assert.deepEqual([...testing.call(() => new Uint8Array([9, 8]))], [9, 8]);
  assert.deepEqual(testing.call(() => ({ a: [1, { b: 2 }] })).toObject(), { a: [1, { b: 2 }] });
  const g = testing.call(() => (x) => x * 3);
  assert.equal(g(5), 15);
  assert.throws(() => testing.call(() => Promise.resolve(1)), /returned a Promise/);
});

test('a JavaScript function registered by name is found and called by C (PFFuncGetGlobal)', () => {
  pf.registerFunc('nodejs.square', (i) => i * i);
  assert.equal(nt.call_global('nodejs.square', 12), 144);
  assert.equal(pf.getGlobalFunc('nodejs.square').name, 'nodejs.square');
  assert.throws(() => pf.registerFunc('nodejs.square', (i) => i), (e) => e.kind === 'KeyError');
  pf.registerFunc('nodejs.square', (i) => -i, { override: true });
  assert.equal(nt.call_global('nodejs.square', 12), -12);
  pf.removeGlobalFunc('nodejs.square');
  assert.throws(() => pf.removeGlobalFunc('nodejs.square'), pf.FunctionNotFoundError);
  assert.throws(() => nt.call_global('nodejs.square', 1), (e) => e.kind === 'KeyError');
});

test('a JavaScript callback called from another C thread, through the event loop', async () => {
  const r = await testing.call_in_thread.callAsync((x) => `got ${x}`, 41);
  assert.equal(r, 'got 41');
});

test('a JavaScript callback called from 4 C threads at once', async () => {
  let calls = 0;
  const per = 250;
  const sum = await nt.call_in_threads.callAsync((i) => { calls++; return 2 * i; }, 4, per);
  const n = 4 * per;
  assert.equal(calls, n);
  assert.equal(sum, n * (n - 1));
});

test('errors of callbacks on other threads come back as the thrown object', async () => {
  const boom = new RangeError('from a worker');
  await assert.rejects(nt.call_in_threads.callAsync(() => { throw boom; }, 4, 3), (e) => {
    assert.equal(e, boom);
    assert.match(e.stack, /\[C\] in nodetest\.call_in_threads \(a worker thread\)/);
    return true;
  });
});

test('a C thread that calls JavaScript while the JavaScript thread waits for it fails, never deadlocks', () => {
  const old = pf.setThreadCallTimeout(100);
  try {
    const t0 = Date.now();
    assert.throws(() => nt.call_in_threads((i) => i, 4, 1), (e) => {
      assert.equal(e.kind, 'RuntimeError');
      assert.match(e.message, /blocked in a synchronous call into C/);
      assert.match(e.message, /callAsync/);
      return true;
    });
    assert.ok(Date.now() - t0 < 20000);
  } finally {
    pf.setThreadCallTimeout(old);
  }
});

test('callbacks on the JavaScript thread serve the queue of other threads', async () => {
  // The outer call runs on a worker; its threads call back while the loop is free.
  const r = await nt.call_in_threads.callAsync((i) => testing.add(i, 1), 2, 10);
  assert.equal(r, 210);
});

test('a JavaScript function released on another C thread is forgotten', async () => {
  const before = pf.heldCount();
  const f = pf.convert(() => 1);
  assert.equal(pf.heldCount(), before + 1);
  nt.release_in_thread(f); // C's reference goes on another thread: nothing to release yet
  f.dispose(); // the last reference: the finalizer runs here
  assert.equal(pf.heldCount(), before);
  const g = pf.convert(() => 2);
  testing.keep(g);
  g.dispose();
  assert.equal(pf.heldCount(), before + 1); // C keeps it
  assert.equal(testing.call_kept(), 2);
  await nt.release_in_thread.callAsync(pf.getGlobalFunc('testing.call_kept')); // unrelated, warms up
  testing.release_kept();
  assert.equal(pf.heldCount(), before);
});

test('a Promise that C refuses is handled: its rejection does not end the process', async () => {
  const unhandled = [];
  const listener = (reason) => unhandled.push(reason);
  process.on('unhandledRejection', listener);
  try {
    const boom = new Error('async boom');
    assert.throws(() => testing.call(async () => { throw boom; }), /returned a Promise/);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.deepEqual(unhandled, []);
  } finally {
    process.off('unhandledRejection', listener);
  }
});
