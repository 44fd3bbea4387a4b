// Reflection from a class: Cls.typeInfo (key, index, parent, fields,
// methods, constructor signature), the record Python's __pf_type_info__
// is, and pf.registeredTypes(), read from the library's description of
// each registered object type.
import { test } from 'node:test';
import assert from 'node:assert/strict';

import { pf, DEMO_PLUGIN } from '../test-support/fixtures.mjs';

const plugin = pf.loadModule(DEMO_PLUGIN);

test('a class carries its type record', () => {
  const Counter = pf.getObjectType('demo.Counter');
  const info = Counter.typeInfo;
  assert.equal(info.key, 'demo.Counter');
  assert.equal(info.index, Counter.typeIndex);
  assert.equal(info.parent, 'demo.Base');
  assert.equal(info.doc, 'A Base that counts.');
  assert.equal(info.initSignature, 'void(self:obj<demo.Counter>,name:str,start:int64)');
  const fields = Object.fromEntries(info.fields.map((f) => [f.name, f]));
  assert.deepEqual(fields.count, {
    name: 'count', type: 'int64', writable: true, doc: 'The count so far.', declaredBy: 'demo.Counter',
  });
  assert.equal(fields.name.declaredBy, 'demo.Base');
  assert.equal(fields.name.writable, false);
  assert.deepEqual(info.fields.slice(0, 2).map((f) => f.name), ['name', 'id']); // the parent's first
  const methods = Object.fromEntries(info.methods.map((m) => [m.name, m]));
  assert.deepEqual(methods.add, {
    name: 'add', signature: 'int64(self:obj<demo.Counter>,n:int64)', static: false,
    doc: 'Adds N steps and returns the count.', declaredBy: 'demo.Counter',
  });
  assert.equal(methods.max_step.static, true);
  assert.equal(methods.max_step.signature, 'int64()');
  assert.equal(methods.reset.signature, null); // a packed method without one
  assert.equal(methods.__init__, undefined);
  const base = pf.getObjectType('demo.Base').typeInfo;
  assert.equal(base.parent, null);
  assert.deepEqual(base.fields.map((f) => f.name), ['name', 'id']);
  assert.equal(plugin.types['demo.Counter'].typeInfo, info); // one record per class
});

test('the record is read-only', () => {
  const info = pf.getObjectType('demo.Counter').typeInfo;
  assert.throws(() => { info.key = 'other'; }, TypeError);
  assert.throws(() => { info.fields.push({}); }, TypeError);
  assert.throws(() => { info.fields[0].name = 'x'; }, TypeError);
  assert.throws(() => { pf.getObjectType('demo.Counter').typeInfo = null; }, TypeError);
  assert.equal(info.key, 'demo.Counter');
});

test('registeredTypes lists every key in registration order', () => {
  const keys = pf.registeredTypes();
  assert.ok(Array.isArray(keys));
  assert.ok(keys.indexOf('demo.Base') >= 0);
  assert.ok(keys.indexOf('demo.Base') < keys.indexOf('demo.Counter'));
  assert.equal(new Set(keys).size, keys.length);
  for (const key of keys) assert.equal(pf.getObjectType(key).typeInfo.key, key);
});
