// What console.log (util.inspect) shows of the package's values: an
// object's type key and fields, a container's items (cut as Node.js cuts
// its own arrays), a function's name and signature, a tensor's dtype,
// shape and device; never a handle or a type index. (issue 33)
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { inspect } from 'node:util';

import { pf, testing, DEMO_PLUGIN } from '../test-support/fixtures.mjs';

test('an instance of a registered type shows its type key and its fields, its parents\' too', () => {
  const { 'demo.Counter': Counter } = pf.loadModule(DEMO_PLUGIN).types;
  const c = new Counter('clicks', 3);
  assert.match(inspect(c), /^demo\.Counter \{ name: 'clicks', id: \d+, count: 3, step: 1, tag: null \}$/);
  assert.equal(inspect({ a: { b: { c } } }), '{ a: { b: { c: [demo.Counter] } } }'); // deeper than depth 2
  c.dispose();
  assert.equal(inspect(c), '[Counter demo.Counter (disposed)]');
});

test('containers show their items, nested ones too', () => {
  assert.equal(inspect(pf.convert([1, 'two', [3.5, null]])), "PackedArray(3) [ 1, 'two', PackedArray(2) [ 3.5, null ] ]");
  assert.equal(inspect(testing.echo(new Map([['a', 1], [7, [true]]]))), "PackedMap(2) { 'a' => 1, 7 => PackedArray(1) [ true ] }");
  assert.equal(inspect(pf.List.of([1, 'a'])), "List(2) [ 1, 'a' ]");
  assert.equal(inspect(pf.Dict.of({ x: 1 })), "Dict(1) { 'x' => 1 }");
  assert.equal(inspect(pf.Shape.of([2, 3])), 'Shape(2) [ 2, 3 ]');
  assert.equal(inspect(pf.convert([])), 'PackedArray(0) []');
  assert.equal(inspect(pf.convert({})), 'PackedMap(0) {}');
  const mod = inspect(pf.loadModule(DEMO_PLUGIN));
  assert.match(mod, /^Module \{\n {2}path: '.*demo_plugin\.so',\n {2}functions: \[\n {4}'demo\.add',/);
  assert.doesNotMatch(mod, /_cache|typeIndex|Symbol/);
});

test('long containers are cut as Node.js cuts its own arrays and Maps', () => {
  const items = Array.from({ length: 150 }, (_, i) => i);
  assert.equal(inspect(pf.convert(items)), inspect(items).replace(/^\[/, 'PackedArray(150) ['));
  assert.equal(inspect(pf.List.of(items), { maxArrayLength: 2 }), 'List(150) [ 0, 1, ... 148 more items ]');
  assert.equal(inspect(pf.convert([1, 2]), { maxArrayLength: 0 }), 'PackedArray(2) [ ... 2 more items ]');
  const entries = new Map(items.map((i) => [`k${i}`, i]));
  assert.equal(inspect(pf.convert(entries)), inspect(entries).replace(/^Map\(150\)/, 'PackedMap(150)'));
  assert.equal(inspect(pf.Dict.of(entries), { maxArrayLength: 1 }), "Dict(150) { 'k0' => 0, ... 149 more items }");
  assert.equal(inspect(pf.Dict.of({ a: 1 }), { maxArrayLength: 0 }), 'Dict(1) { ... 1 more item }');
});

test('functions show their name and signature', () => {
  const demo = pf.loadModule(DEMO_PLUGIN).demo;
  assert.equal(inspect(demo.add), '[PackedFunction: demo.add int64(a:int64,b:int64)]');
  const f = pf.convert((x) => x);
  assert.equal(inspect(f), '[PackedFunction: (anonymous)]');
  f.setInfo({ name: 'ident', signature: 'int64(x:int64)' });
  assert.equal(inspect([f]), '[ [PackedFunction: ident int64(x:int64)] ]');
  f.dispose();
  assert.equal(inspect(f), '[PackedFunction (disposed)]');
});

test('tensors show their dtype, shape and device, then their elements', () => {
  const t = pf.convert(pf.tensor(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]));
  assert.equal(inspect(t), 'Tensor(float32, [2, 3], cpu:0) Float32Array(6) [ 1, 2, 3, 4, 5, 6 ]');
  assert.equal(inspect({ a: { b: { t } } }), '{ a: { b: { t: [Tensor(float32, [2, 3], cpu:0)] } } }');
  const part = t.subarray(4); // a plain array over the same memory
  assert.equal(inspect(part), 'Float32Array(2) [ 5, 6 ]');
  assert.equal(part.shape, undefined);
  assert.equal(testing.tensor_info(part).split(' ')[0], '1'); // passes as a tensor of its own
  let seen = null;
  testing.call((x) => { seen = inspect(x); }, pf.tensor(new Int32Array([7, 8]))); // lent by C: a copy
  assert.equal(seen, 'Tensor(int32, [2], cpu:0) Int32Array(2) [ 7, 8 ]');
});
