// Memory that C uses stays valid while JavaScript moves its buffer away
// (a transfer: structuredClone or postMessage with a transfer list) or
// shrinks it (a resizable ArrayBuffer's resize(0)): a tensor object that C
// keeps, and a typed array passed to a call that runs JavaScript before it
// reads the array (a callback, or callAsync). Each case runs in a child
// process, so that a crash fails the test instead of the runner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { ROOT } from '../test-support/fixtures.mjs';

const FIXTURES = JSON.stringify(path.join(ROOT, 'bindings', 'node', 'test-support', 'fixtures.mjs'));
const N = 1 << 20; // 8 MB of float64: freed memory is unmapped, so a read of it crashes

// Runs `body` (with pf, testing, nt, array(), move(a)) in a child process;
// it prints what C summed.
function run(body) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pf-node-move-'));
  try {
    fs.writeFileSync(path.join(dir, 'main.mjs'), `
      import { pf, testing, nt } from ${FIXTURES};
      // A float64 array of ${N} times 1.5, over a resizable buffer or not.
      const array = (resizable) => new Float64Array(resizable
        ? new ArrayBuffer(${N * 8}, { maxByteLength: ${N * 16} }) : new ArrayBuffer(${N * 8})).fill(1.5);
      // Moves a's memory away (transfer) or shrinks it, then collects.
      const move = (a, how) => {
        if (how === 'transfer') structuredClone(a.buffer, { transfer: [a.buffer] });
        else a.buffer.resize(0);
        globalThis.gc();
      };
      ${body}
    `);
    const r = spawnSync(process.execPath, ['--expose-gc', 'main.mjs'], { cwd: dir, encoding: 'utf8', timeout: 60000 });
    assert.equal(r.signal, null, `the process died of ${r.signal}: ${r.stderr}`);
    assert.equal(r.status, 0, r.stderr);
    return r.stdout.trim();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

for (const how of ['transfer', 'resize']) {
  test(`a tensor object over a typed array that C keeps survives a ${how} of its buffer`, () => {
    const out = run(`
      const a = array(${how === 'resize'});
      const slot = testing.hold(pf.convert(pf.tensor(a)));
      move(a, '${how}');
      console.log(nt.tensor_sum(testing.held(slot)));
    `);
    assert.equal(Number(out), N * 1.5);
  });

  test(`a typed array passed to a call stays valid when a callback ${how}s its buffer`, () => {
    const out = run(`
      const a = array(${how === 'resize'});
      console.log(nt.sum_after(a, () => move(a, '${how}')));
    `);
    assert.equal(Number(out), N * 1.5);
  });

  test(`a typed array passed to callAsync stays valid when JavaScript ${how}s its buffer meanwhile`, () => {
    const out = run(`
      const a = array(${how === 'resize'});
      console.log(await nt.sum_after.callAsync(a, () => move(a, '${how}')));
    `);
    assert.equal(Number(out), N * 1.5);
  });
}
