// Array, Map, Shape, List and Dict, and JavaScript arrays, plain objects
// and Maps crossing as them.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { pf, testing } from '../test-support/fixtures.mjs';

test('JavaScript arrays, plain objects and Maps cross as Arrays and Maps, nested', () => {
  const arr = testing.echo([1, 'two', [3.5, null], { k: true }]);
  assert.ok(arr instanceof pf.PackedArray);
  assert.equal(arr.length, 4);
  assert.equal(arr.at(-3), 'two');
  assert.ok(arr.at(2) instanceof pf.PackedArray);
  assert.deepEqual(arr.toArray(), [1, 'two', [3.5, null], { k: true }]);
  assert.throws(() => arr.at(4), RangeError);
  assert.equal(testing.object_type([1]), 'array');
  const map = testing.echo(new Map([['a', 1], [7, 'seven']]));
  assert.ok(map instanceof pf.PackedMap);
  assert.equal(map.size, 2);
  assert.equal(map.get('a'), 1);
  assert.equal(map.get(7), 'seven');
  assert.equal(map.get('missing'), undefined);
  assert.equal(map.has(7), true);
  assert.deepEqual([...map.keys()], ['a', 7]);
  assert.deepEqual(testing.echo({ x: { y: [1, 2] } }).toObject(), { x: { y: [1, 2] } });
  assert.equal(testing.map_get({ a: 1, b: 2 }, 'b'), 2);
  assert.equal(JSON.stringify(testing.echo({ a: [1, { b: 'c' }] })), '{"a":[1,{"b":"c"}]}');
});

test('bad containers are errors naming the place', () => {
  const self = [];
  self.push(self);
  assert.throws(() => testing.echo(self), /contains itself/);
  let deep = [];
  for (let i = 0; i < 1100; i++) deep = [deep];
  assert.throws(() => testing.echo(deep), /nested more than 1000 deep/);
  assert.throws(() => testing.echo(new Map([[{}, 1]])), /key must be a string or an integer/);
  assert.throws(() => testing.echo([1, Symbol('s')]), /argument 0, item 1 has unsupported type symbol/);
});

// An Array (Array.isArray is true for a Proxy of one) whose length is no
// count, or one too large to be real: errors naming the place, before
// anything is allocated. (Before: 2**31 allocated 24 GB and walked 2**31
// items, a hang; 1.5 and NaN crossed as something.)
function lyingArray(...lengths) {
  const reads = { count: 0 };
  const proxy = new Proxy([7, 8, 9], {
    get(target, key, receiver) {
      if (key !== 'length') return Reflect.get(target, key, receiver);
      return lengths[Math.min(reads.count++, lengths.length - 1)];
    },
  });
  return { proxy, reads };
}

test('an array whose length is no count or too large is an error naming it', () => {
  for (const n of [1.5, NaN, -1, Infinity, '2', 2 ** 53, undefined]) {
    assert.throws(() => testing.echo(lyingArray(n).proxy),
      { name: 'TypeError', message: /argument 0: an Array whose length .* is not a non-negative safe integer/ });
  }
  assert.throws(() => testing.echo([1, lyingArray(0.5).proxy]),
    { name: 'TypeError', message: /argument 0, item 1: an Array whose length/ });
  const started = Date.now();
  for (const n of [2 ** 31, 2 ** 27 + 1]) {
    assert.throws(() => testing.echo(lyingArray(n).proxy),
      { name: 'RangeError', message: new RegExp(`argument 0: an Array of ${n} items, more than 134217728`) });
  }
  const sparse = [];
  sparse.length = 2 ** 32 - 1;
  assert.throws(() => testing.echo([[sparse]]), { name: 'RangeError', message: /argument 0, item 0, item 0: an Array of 4294967295 items/ });
  assert.ok(Date.now() - started < 5000);
});

test('an array\'s length is read once', () => {
  // A Proxy that says 2, then a million: the first answer is used throughout.
  const { proxy, reads } = lyingArray(2, 1e6);
  const back = testing.echo(proxy);
  assert.deepEqual(back.toArray(), [7, 8]);
  assert.equal(reads.count, 1);
});

test('an array or object reached twice crosses as one C container', () => {
  // 13 containers, each holding the one below twice: 13 C containers, not
  // the 8191 of the tree they unfold to (before: every path was made, so
  // 40 levels would never end).
  let x = [1];
  for (let i = 0; i < 12; i++) x = i % 2 ? [x, x] : { a: x, b: x };
  assert.equal(JSON.parse(pf.toJSON(x)).nodes.length, 13);
  const back = testing.echo(x);
  assert.equal(back.at(0).handle, back.at(1).handle);
  assert.equal(back.at(0).get('a').handle, back.at(0).get('b').handle);
  let y = new Map([['k', [2]]]);
  for (let i = 0; i < 40; i++) y = [y, y];
  const deep = testing.echo(y);
  assert.equal(deep.at(0).handle, deep.at(1).handle);
  // Within one call: two arguments share, a later call makes its own.
  assert.equal(JSON.parse(pf.toJSON([x, [x]])).nodes.length, 15);
  assert.notEqual(testing.echo(x).handle, back.handle);
});

test('containers hold functions and come back as themselves', () => {
  const fns = testing.echo([(x) => x + 1, testing.add]);
  assert.equal(fns.at(0)(1), 2);
  assert.equal(fns.at(1)(2, 3), 5);
  const again = testing.echo(fns);
  assert.equal(again.handle, fns.handle);
});

test('Shape', () => {
  const s = pf.getGlobalFunc('testing.typed_make_shape')(2, 3);
  assert.ok(s instanceof pf.Shape);
  assert.deepEqual(s.toArray(), [2, 3]);
  assert.equal(pf.Shape.of([4, 5, 6]).length, 3);
  assert.equal(pf.getGlobalFunc('testing.typed_array_size')([1, 2, 3]), 3);
});

test('List: a mutable sequence held by C', () => {
  const list = pf.List.of([1, 'a']);
  assert.ok(list instanceof pf.List);
  list.push(2.5, [1, 2]);
  list.insert(0, 'first');
  assert.equal(list.length, 5);
  assert.equal(list.get(-1).at(1), 2);
  list.set(1, 10);
  assert.deepEqual(list.pop().toArray(), [1, 2]);
  assert.equal(list.pop(), 2.5);
  assert.deepEqual(list.toArray(), ['first', 10, 'a']);
  assert.throws(() => list.get(9), RangeError);
  assert.equal(testing.object_type(list), 'list');
  assert.equal(testing.echo(list).handle, list.handle);
  list.clear();
  assert.equal(list.length, 0);
});

test('Dict: a mutable mapping held by C', () => {
  const d = pf.Dict.of({ a: 1, 2: 'two' });
  d.set('b', [1, 2]);
  d.set(null, 'none');
  assert.equal(d.size, 4);
  assert.equal(d.get('a'), 1);
  assert.equal(d.get(2), 'two');
  assert.equal(d.get(null), 'none');
  assert.equal(d.has('zzz'), false);
  assert.deepEqual(d.get('b').toArray(), [1, 2]);
  assert.equal(d.pop('a'), 1);
  assert.equal(d.delete('a'), false);
  assert.deepEqual([...d.keys()], [2, 'b', null]);
  assert.throws(() => d.pop('zzz'), (e) => e.kind === 'KeyError');
  assert.equal(testing.object_type(d), 'dict');
  d.clear();
  assert.equal(d.size, 0);
});

test('convert gives what a value crosses as', () => {
  assert.ok(pf.convert([1]) instanceof pf.PackedArray);
  assert.ok(pf.convert({ a: 1 }) instanceof pf.PackedMap);
  assert.ok(pf.convert(() => 1) instanceof pf.PackedFunction);
  assert.equal(pf.convert('s'), 's');
  assert.throws(() => pf.convert(Symbol('x')), TypeError);
});
