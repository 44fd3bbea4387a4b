// pf.toJSON and pf.fromJSON: the C serializer's document from JavaScript,
// with instances of registered types, sharing, cycles and errors.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { pf, DEMO_PLUGIN } from '../test-support/fixtures.mjs';

const { 'demo.Counter': Counter } = pf.loadModule(DEMO_PLUGIN).types;

test('plain values and containers round-trip', () => {
  for (const v of [1, 2.5, true, null, 'text']) assert.equal(pf.fromJSON(pf.toJSON(v)), v);
  const back = pf.fromJSON(pf.toJSON([1, 'two', { three: 3 }]));
  assert.ok(back instanceof pf.PackedArray);
  assert.deepEqual(back.toArray(), [1, 'two', { three: 3 }]);
  assert.equal(typeof pf.toJSON([1, 2]), 'string');
});

test('an instance round-trips as a new instance of its type', () => {
  const c = new Counter('c', 2);
  c.count = 5;
  c.step = 3;
  const back = pf.fromJSON(pf.toJSON(c));
  assert.ok(back instanceof Counter);
  assert.deepEqual([back.name, back.count, back.step], ['c', 5, 3]);
  back.count = 9; // a copy: the original does not change
  assert.equal(c.count, 5);
});

test('sharing and cycles are kept', () => {
  const c = new Counter('shared', 1);
  const pair = pf.fromJSON(pf.toJSON([c, c]));
  pair.at(0).count = 42;
  assert.equal(pair.at(1).count, 42); // one instance, twice
  c.tag = pf.List.of([c, 'x']);
  const loop = pf.fromJSON(pf.toJSON(c));
  assert.equal(loop.tag.get(1), 'x');
  loop.tag.get(0).count = 7;
  assert.equal(loop.count, 7); // the List of the copy holds the copy
  loop.tag = null; // break the cycles, so that both can go
  c.tag = null;
});

test('errors name what is wrong', () => {
  assert.throws(() => pf.fromJSON(42), { name: 'TypeError', message: 'fromJSON: the text must be a string, not number' });
  assert.throws(() => pf.fromJSON('{not json'), (e) => e instanceof RangeError && e.kind === 'ValueError' &&
    /^PFFromJSON: not JSON: line 1, column 4/.test(e.message));
  assert.throws(() => pf.fromJSON('[1]'), (e) => e.kind === 'ValueError' && /a document is an object/.test(e.message));
  // The text goes by its UTF-8 length, with no NUL: empty, and multi-byte.
  assert.throws(() => pf.fromJSON(''), (e) => e.kind === 'ValueError' &&
    /^PFFromJSON: not JSON: line 1, column 0 \(byte 0\)/.test(e.message));
  assert.equal(pf.fromJSON(pf.toJSON('h\u00e9llo \u{1F600}')), 'h\u00e9llo \u{1F600}');
  assert.throws(() => pf.fromJSON(`${pf.toJSON(1)} x`), (e) => /more text after the value/.test(e.message));
  const text = pf.toJSON(new Counter('c', 1)).replaceAll('demo.Counter', 'demo.NoSuchType');
  assert.throws(() => pf.fromJSON(text), (e) => e.kind === 'ValueError' &&
    /no object type is registered under the key 'demo\.NoSuchType'/.test(e.message));
  assert.throws(() => pf.toJSON([1, (x) => x]), (e) => e instanceof TypeError &&
    /PFToJSON: root\[1\] is of type function, which JSON cannot hold/.test(e.message));
});

test('an object disposed while toJSON encodes the value is written whole', () => {
  // A getter met later in the value disposes an instance encoded before
  // it: the reference goes when toJSON returns, not while C still reads
  // it (before: PFArrayCreate was given the freed handle).
  const c = new Counter('early', 4);
  const text = pf.toJSON([c, { get late() { c.dispose(); return 1; } }]);
  const back = pf.fromJSON(text);
  assert.equal(back.at(0).name, 'early');
  assert.equal(back.at(0).count, 4);
  assert.equal(back.at(1).get('late'), 1);
  assert.equal(c.handle, 0);
});
