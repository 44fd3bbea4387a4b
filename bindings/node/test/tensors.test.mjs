// Tensors: typed arrays without a copy, both ways.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { pf, testing, nt, testlib } from '../test-support/fixtures.mjs';

test('a typed array passes to C without a copy: C writes into it', () => {
  const a = new Float64Array(4);
  testing.fill(a, 2.5);
  assert.deepEqual([...a], [2.5, 2.5, 2.5, 2.5]);
  const f32 = new Float32Array(6);
  testing.fill(pf.tensor(f32, [2, 3]), 1.5);
  assert.deepEqual([...f32], [1.5, 1.5, 1.5, 1.5, 1.5, 1.5]);
  // The address C sees is the array's own.
  const info = testing.tensor_info(pf.tensor(new Int32Array(6), [3, 2])).split(' ');
  assert.deepEqual(info.slice(0, 4), ['2', '0', '32', '1']);
  assert.equal(nt.tensor_sum(new Float32Array([1, 2, 3.5])), 6.5);
  assert.throws(() => pf.tensor(new Float32Array(5), [2, 3]), RangeError);
});

test('a tensor from C is a typed array over C\'s memory that keeps its owner alive', () => {
  const alive = testlib.func('int64_t pft_tensors_alive()');
  const before = alive();
  let t = testing.make_tensor(4);
  assert.ok(t instanceof Float64Array);
  assert.deepEqual([...t], [0, 1, 2, 3]);
  assert.deepEqual(t.shape, [4]);
  assert.equal(t.dtype.toString(), 'float64');
  assert.equal(alive(), before + 1);
  // A write on either side is seen on the other.
  t[1] = 42;
  assert.equal(nt.tensor_sum(t), 0 + 42 + 2 + 3);
  testing.call((x) => { x[2] = -1; }, t); // C passes the object back: the same memory
  assert.equal(t[2], -1);
  const m = nt.make_tensor2d(2, 3);
  assert.ok(m instanceof Float32Array);
  assert.deepEqual(m.shape, [2, 3]);
  assert.deepEqual([...m], [0, 1, 2, 3, 4, 5]);
  t = null;
});

test('a borrowed tensor in a callback is a copy, written back when it changed', () => {
  assert.equal(testing.call_with_tensor((t) => { t[0] = 9; }, 0), '9 2 3 4');
  assert.equal(testing.call_with_tensor((t) => { t[1] = 7; }, 1), '1 101 7 103 3 105 4 107');
  // Read-only memory is not written by a callback that only reads.
  assert.equal(testing.call_with_tensor((t) => t[0], 2), '1 2 3 4');
});

test('a typed array returned to C becomes a tensor object over its memory', () => {
  const mine = new Float64Array([1, 2, 3]);
  const back = testing.call(() => mine);
  assert.ok(back instanceof Float64Array);
  back[0] = 10;
  assert.equal(mine[0], 10); // the same memory
  const held = testing.hold(pf.convert(pf.tensor(new Int32Array([5, 6]), [2])));
  assert.deepEqual([...testing.held(held)], [5, 6]);
});
