// Modules and registered object types: the demo plugin driven from
// JavaScript.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';

import { pf, testing, DEMO_PLUGIN } from '../test-support/fixtures.mjs';

test('the demo plugin: functions as properties by their dotted names', () => {
  const plugin = pf.loadModule(DEMO_PLUGIN);
  assert.ok(plugin instanceof pf.Module);
  assert.equal(plugin.listFunctionNames().length, 9);
  const { demo } = plugin;
  assert.equal(demo.add(40, 2), 42);
  assert.equal(demo.hypot(3, 4), 5);
  assert.equal(demo.greet('Node'), 'Hello, Node!');
  assert.equal(demo.reverse('stressed'), 'desserts');
  assert.equal(plugin.get('demo.add'), demo.add);
  assert.equal(demo.add.signature, 'int64(a:int64,b:int64)');
  assert.equal(demo.add.doc, 'Adds two integers.');
  assert.equal(demo.call_n_times((i) => i * i, 4), 14);
  const a = new BigInt64Array([5n, 3n, 9n, 1n]);
  demo.sort(a, (x, y) => (y > x) - (y < x)); // a JavaScript comparator behind qsort
  assert.deepEqual([...a], [9n, 5n, 3n, 1n]);
  assert.throws(() => demo.fail('no'), (e) => e instanceof RangeError && e.message.includes('no'));
  assert.throws(() => plugin.get('demo.nope'), pf.FunctionNotFoundError);
  assert.deepEqual(plugin.exportGlobal('nodeplugin.').slice(0, 1), ['nodeplugin.demo.add']);
  assert.equal(pf.getGlobalFunc('nodeplugin.demo.add')(1, 2), 3);
  assert.equal(pf.initApi('nodeplugin.demo').greet('ns'), 'Hello, ns!');
  assert.throws(() => pf.loadModule('/no/such/file.so'), (e) => e.kind === 'RuntimeError' && /cannot load/.test(e.message));
});

test('registered object types are JavaScript classes with fields and methods', () => {
  const { 'demo.Counter': Counter, 'demo.Base': Base } = pf.loadModule(DEMO_PLUGIN).types;
  assert.equal(pf.getObjectType('demo.Counter'), Counter);
  assert.equal(Counter.typeKey, 'demo.Counter');
  const c = new Counter('clicks', 10);
  assert.ok(c instanceof Counter && c instanceof Base && c instanceof pf.PackedObject);
  assert.equal(c.increment(), 11);
  c.step = 5;
  assert.equal(c.add(2), 21);
  assert.equal(c.count, 21);
  assert.equal(c.name, 'clicks');
  assert.throws(() => { c.name = 'x'; }, TypeError);
  assert.throws(() => { c.step = 'x'; }, TypeError);
  assert.equal(c.describe(), "Counter 'clicks' at 21");
  c.reset(3);
  assert.equal(c.count, 3);
  assert.equal(Counter.max_step(), 1000);
  c.tag = [1, 2];
  assert.deepEqual(c.tag.toArray(), [1, 2]);
  // Instances cross C and come back as instances of their class.
  const back = testing.echo(c);
  assert.ok(back instanceof Counter);
  assert.equal(back.count, 3);
  const b = new Base('plain');
  assert.ok(!(b instanceof Counter));
  assert.match(b.describe(), /^Base 'plain' #\d+$/);
  assert.throws(() => new Counter(1, 2), TypeError);
  c.dispose();
  assert.throws(() => c.count, /disposed/);
  assert.throws(() => pf.getObjectType('demo.Nope'), pf.FunctionNotFoundError);
});

test('a name with a NUL character is refused with a RangeError, never cut at the NUL', () => {
  const plugin = pf.loadModule(DEMO_PLUGIN);
  const nul = (where) => (e) => e instanceof RangeError && e.message.includes(where) && /NUL character/.test(e.message);
  assert.throws(() => plugin.get('demo.add\0x'), nul('Module.get'));
  assert.throws(() => plugin.exportGlobal('nodenul.\0evil.'), nul('Module.exportGlobal'));
  assert.deepEqual(pf.listGlobalFuncNames('nodenul.'), []);
  assert.throws(() => pf.getObjectType('demo.Counter\0x'), nul('getObjectType'));
  const m = pf.convert({ a: 1 });
  assert.throws(() => m.get('a\0b'), nul('PackedMap.get'));
  assert.throws(() => m.has('a\0b'), nul('PackedMap.has'));
  const f = pf.convert((x) => x);
  for (const field of ['name', 'signature', 'doc']) {
    assert.throws(() => f.setInfo({ [field]: 'f\0g' }), nul('setInfo'));
  }
  assert.equal(f.name, '');
});

test('a class keeps its module loaded: the guide\'s destructuring of types survives a GC', () => {
  // In a child process of its own, so that no other wrapper of the demo
  // plugin keeps it loaded.
  const r = spawnSync(process.execPath, ['--expose-gc', '--input-type=module', '-e', `
    import { pf } from ${JSON.stringify(new URL('../test-support/fixtures.mjs', import.meta.url).pathname)};
    const { 'demo.Counter': Counter } = pf.loadModule(${JSON.stringify(DEMO_PLUGIN)}).types;
    for (let i = 0; i < 3; i++) { globalThis.gc(); await new Promise((resolve) => setImmediate(resolve)); }
    const c = new Counter('clicks', 10);
    console.log(c.increment());
  `], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), '11');
});
