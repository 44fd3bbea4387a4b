// The package in worker threads (worker pools load packages only there):
// each thread that loads it has its own callbacks, which reach that thread
// and no other, and a worker's exit ends only its own. Each case runs in a
// child process, so that a crash fails the test instead of the runner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { ROOT } from '../test-support/fixtures.mjs';

const FIXTURES = JSON.stringify(path.join(ROOT, 'bindings', 'node', 'test-support', 'fixtures.mjs'));

// Runs `main` (an ES module's text) in a child process with `worker` beside
// it as worker.mjs; its stdout's lines.
function run(main, worker) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pf-node-worker-'));
  try {
    fs.writeFileSync(path.join(dir, 'main.mjs'), main);
    fs.writeFileSync(path.join(dir, 'worker.mjs'), worker);
    const r = spawnSync(process.execPath, ['main.mjs'], { cwd: dir, encoding: 'utf8', timeout: 60000 });
    assert.equal(r.signal, null, `the process died of ${r.signal}: ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim().split('\n');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

test('a worker thread that loads the package exits without taking the process down', () => {
  const out = run(`
    import { Worker } from 'node:worker_threads';
    const w = new Worker(new URL('./worker.mjs', import.meta.url));
    w.on('message', (m) => console.log(m));
    w.on('exit', (code) => console.log('worker exited', code));
  `, `
    import { parentPort } from 'node:worker_threads';
    import { pf, testing } from ${FIXTURES};
    parentPort.postMessage(String(testing.call((x) => x * 2, 21)));
    parentPort.postMessage(await testing.call_in_thread.callAsync((x) => 'thread ' + x, 1));
  `);
  assert.deepEqual(out, ['42', 'thread 1', 'worker exited 0']);
});

test('a terminated worker does not take the process down either', () => {
  const out = run(`
    import { Worker } from 'node:worker_threads';
    const w = new Worker(new URL('./worker.mjs', import.meta.url));
    w.on('message', async () => { await w.terminate(); console.log('terminated'); });
  `, `
    import { parentPort } from 'node:worker_threads';
    import { pf } from ${FIXTURES};
    pf.registerFunc('worker.busy', (x) => x);
    parentPort.postMessage('ready');
    setInterval(() => {}, 1000);
  `);
  assert.deepEqual(out, ['terminated']);
});

test('callbacks reach the thread that made them, and a worker exit ends only its own', () => {
  // The main thread and the worker each make one function, so that both
  // have the same first key; C calls each from its own thread and from a
  // C thread, before and after the worker exits.
  const out = run(`
    import { Worker } from 'node:worker_threads';
    import { pf, testing } from ${FIXTURES};
    const mine = pf.convert((x) => 'MAIN function ran with ' + x);
    const w = new Worker(new URL('./worker.mjs', import.meta.url));
    const next = () => new Promise((resolve) => w.once('message', resolve));
    console.log(await next());
    console.log(testing.call(mine, 5));
    console.log(await testing.call_in_thread.callAsync(mine, 6));
    const theirs = pf.getGlobalFunc('worker.fn');
    try { console.log(testing.call(theirs, 7)); } catch (e) { console.log(e.message); }
    w.postMessage('exit');
    await new Promise((resolve) => w.once('exit', resolve));
    console.log(testing.call(mine, 8));
    console.log(await testing.call_in_thread.callAsync(mine, 9));
    try { testing.call(theirs, 10); console.log('no error'); } catch (e) { console.log(e.message); }
  `, `
    import { parentPort } from 'node:worker_threads';
    import { pf, testing } from ${FIXTURES};
    const f = pf.convert((x) => 'WORKER function ran with ' + x);
    pf.registerFunc('worker.fn', f);
    parentPort.postMessage(testing.call(f, 1) + '; ' + await testing.call_in_thread.callAsync(f, 2));
    parentPort.once('message', () => process.exit(0));
  `);
  assert.deepEqual(out, [
    'WORKER function ran with 1; WORKER function ran with 2',
    'MAIN function ran with 5',
    'MAIN function ran with 6',
    // The worker's function called on the main thread: queued for the
    // worker, whose thread is free.
    'WORKER function ran with 7',
    'MAIN function ran with 8',
    'MAIN function ran with 9',
    'the Node.js event loop has exited',
  ]);
});
