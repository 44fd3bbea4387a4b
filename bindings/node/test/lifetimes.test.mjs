// Lifetimes: handles released by dispose() / Symbol.dispose and by the
// FinalizationRegistry, never twice; nothing leaks over 100k calls,
// callbacks and objects; C threads that call JavaScript at exit get an
// error, never a crash.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';

import { pf, testing, testlib, nodetest, nt, DEMO_PLUGIN, ROOT } from '../test-support/fixtures.mjs';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc');

async function collect() {
  for (let i = 0; i < 4; i++) {
    gc();
    await new Promise((resolve) => setImmediate(resolve)); // finalization callbacks run between turns
  }
}

test('dispose() and Symbol.dispose release once', () => {
  const f = pf.getGlobalFunc('testing.add');
  f[Symbol.dispose]();
  f.dispose();
  assert.throws(() => f(1, 2), /disposed/);
  const a = pf.convert([1, 2]);
  a.dispose();
  a.dispose();
  assert.throws(() => testing.echo(a), /disposed/);
});

test('no leak over 100k calls, callbacks and objects', async () => {
  const alive = testlib.func('int64_t pft_tensors_alive()');
  const held = pf.heldCount();
  const tensors = alive();
  const Counter = pf.loadModule(DEMO_PLUGIN).types['demo.Counter'];
  const round = () => {
    let sum = 0;
    for (let i = 0; i < 100000; i++) sum += testing.add(i, 1); // calls
    sum += testing.call_n((a, b) => a + b, 100000); // callbacks from C
    for (let i = 0; i < 20000; i++) sum += testing.call((x) => x, i); // a host function per call
    for (let i = 0; i < 20000; i++) {
      const c = new Counter('c', i); // objects: half disposed, half left to the collector
      sum += c.count;
      if (i % 2) c.dispose();
      const arr = testing.echo([i, 's', { k: i }]);
      sum += arr.length;
      if (i % 2) arr[Symbol.dispose]();
      const t = testing.make_tensor(2);
      sum += t.length;
    }
    return sum;
  };
  round();
  await collect();
  const rss0 = process.memoryUsage().rss;
  round();
  await collect();
  const grown = process.memoryUsage().rss - rss0;
  assert.equal(pf.heldCount(), held);
  assert.equal(alive(), tensors);
  assert.ok(grown < 64 * 1024 * 1024, `RSS grew by ${grown} bytes over a second round`);
});

test('C threads that call JavaScript while the process exits get an error, not a crash', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pf-node-exit-'));
  const out = path.join(dir, 'errors.txt');
  const script = path.join(dir, 'exit.mjs');
  fs.writeFileSync(script, `
    import { pf, testlib } from ${JSON.stringify(path.join(ROOT, 'bindings', 'node', 'test-support', 'fixtures.mjs'))};
    import fs from 'node:fs';
    pf.registerFunc('exiting.cb', (i) => i + 1);
    const fd = fs.openSync(${JSON.stringify(out)}, 'w');
    const start = testlib.func('int pft_start_exit_callers(const char*, int, int)');
    const ok = testlib.func('int64_t pft_exit_callers_ok()');
    if (start('exiting.cb', 4, fd) !== 0) throw new Error('no threads');
    setTimeout(() => { console.log(ok() > 0 ? 'called' : 'not called'); }, 300);
  `);
  const r = spawnSync(process.execPath, [script], { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.signal, null, r.stderr);
  assert.equal(r.status, 0, r.stderr);
  assert.equal(r.stdout.trim(), 'called');
  const lines = fs.readFileSync(out, 'utf8').trim().split('\n');
  assert.ok(lines.length >= 1);
  for (const line of lines) assert.equal(line, 'RuntimeError: the Node.js event loop has exited');
  fs.rmSync(dir, { recursive: true, force: true });
});

// Not collected by itself: the package holds a JavaScript function that C
// holds strongly (it cannot see C's references), so a function or an
// object that reaches itself through one stays. The guide says so and how
// to break the cycle; this checks what it says.
test('a cycle through C stays until it is broken as the guide says', async () => {
  const held = pf.heldCount();
  let fRef;
  {
    const f = pf.convert((n) => (n > 0 ? testing.call(f, n - 1) : 'done'));
    assert.equal(f(3), 'done');
    assert.equal(pf.heldCount(), held + 1);
    fRef = new WeakRef(f);
  }
  await collect(); // f is out of scope, but reaches itself through C
  assert.ok(fRef.deref() !== undefined);
  assert.equal(pf.heldCount(), held + 1);
  fRef.deref().dispose(); // enough
  assert.equal(pf.heldCount(), held);

  const { 'demo.Counter': Counter } = pf.loadModule(DEMO_PLUGIN).types;
  let cRef;
  {
    const c = new Counter('cyclic', 0);
    c.tag = { onClick: () => c.increment() };
    assert.equal(c.tag.get('onClick')(), 1);
    cRef = new WeakRef(c);
  }
  await collect(); // c is out of scope, but reaches itself through C
  assert.equal(pf.heldCount(), held + 1);
  cRef.deref().tag = null; // enough
  await collect();
  assert.equal(pf.heldCount(), held);
  assert.equal(cRef.deref(), undefined);
});

// A wrapper disposed while a call that took it runs (from a callback that C
// calls meanwhile) keeps its reference until the outermost call ends.
test('a function disposed during its own call is released when the call ends', () => {
  for (const direct of [0, 1]) {
    const before = nt.guarded_finalized();
    const g = nt.make_guarded(direct);
    assert.equal(g(() => { g.dispose(); return 0; }), 42);
    assert.equal(nt.guarded_finalized(), before + 1); // released once the call ended
    assert.throws(() => g(() => 0), /the function was disposed/);
    const h = nt.make_guarded(direct); // nested: released when the outermost call ends
    assert.equal(h(() => { nt.error_of(() => { h.dispose(); return 0; }); return 0; }), 42);
    assert.equal(nt.guarded_finalized(), before + 2);
    g.dispose(); // again: nothing
    assert.equal(nt.guarded_finalized(), before + 2);
  }
});

test('a function disposed during its own callAsync is released when the call ends', async () => {
  for (const direct of [0, 1]) {
    const before = nt.guarded_finalized();
    const g = nt.make_guarded(direct);
    // The callback runs on the JavaScript thread while the worker thread
    // is inside g: the call holds g (and each handle argument) until it ends.
    assert.equal(await g.callAsync(() => { g.dispose(); return 0; }), 42);
    assert.equal(nt.guarded_finalized(), before + 1);
    assert.throws(() => g.callAsync(() => 0), /was disposed/);
  }
});

test('an object disposed during a method call on it is released when the call ends', () => {
  for (const init of ['pfn_init_note', 'pfn_init_note_call']) {
    if (nodetest.func(`int ${init}()`)() !== 0) throw new Error(`${init} failed`);
  }
  const Note = pf.getObjectType('nodetest.Note');
  const note = new Note();
  note.text = 'k'.repeat(9);
  const noteCall = pf.getGlobalFunc('nodetest.note_call');
  assert.equal(noteCall(note, () => { note.dispose(); return 0; }), 9);
  assert.throws(() => note.text, /disposed/);
});

test('an object disposed while the value holding it is encoded lives until C has made it', () => {
  // A getter met later in the value disposes an instance encoded before
  // it: its reference goes when the encoding ends, not while C still has
  // to read it (before: PFArrayCreate / PFListCreate were given a freed
  // handle, an error at best and another object's at worst).
  const { 'demo.Counter': Counter } = pf.loadModule(DEMO_PLUGIN).types;
  const withLateDispose = (c) => [c, { get late() { c.dispose(); return 1; } }];
  const ways = {
    convert: (v) => pf.convert(v),
    'List.of': (v) => pf.List.of(v),
    'List.append': (v) => { const l = pf.List.of([]); l.append(v); return l.at(0); },
    'Dict.set': (v) => { const d = pf.Dict.of({}); d.set('k', v); return d.get('k'); },
    'Dict.of': (v) => pf.Dict.of({ k: v }).get('k'),
  };
  for (const [way, make] of Object.entries(ways)) {
    const c = new Counter(way, 3);
    const made = make(withLateDispose(c));
    assert.equal(c.handle, 0, way);
    assert.equal(made.at(0).name, way, way);
    assert.equal(made.at(0).count, 3, way);
    assert.equal(made.at(1).get('late'), 1, way);
  }
});
