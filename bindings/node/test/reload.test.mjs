// Loading the package twice in one process: a test runner that evaluates
// modules once per test file (Jest), with or without koffi, and two
// installed copies of the package. Every load shares the process's one
// runtime (one registry) and has callbacks of its own. Each case runs in a
// child process, so that a crash fails the test instead of the runner.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { ROOT, TESTLIB, pf } from '../test-support/fixtures.mjs';

const PKG = path.join(ROOT, 'bindings', 'node');

// Runs a CommonJS script in a child process, in `dir`, with `env`; its
// stdout's lines.
function run(dir, script, env = process.env) {
  fs.writeFileSync(path.join(dir, 'main.cjs'), script);
  const r = spawnSync(process.execPath, ['main.cjs'], { cwd: dir, encoding: 'utf8', timeout: 60000, env });
  assert.equal(r.signal, null, `the process died of ${r.signal}: ${r.stderr}`);
  assert.equal(r.status, 0, r.stderr);
  return r.stdout.trim().split('\n');
}

// What each of two loads, a and b, does: its callbacks work (on the
// JavaScript thread and from a C thread), and what one registers the
// other finds.
const EXERCISE = `
  const koffi = require(${JSON.stringify(path.join(PKG, 'node_modules', 'koffi'))});
  const testlib = koffi.load(${JSON.stringify(TESTLIB)});
  if (testlib.func('int pft_init()')() !== 0) throw new Error('pft_init');
  async function exercise(loads) {
    for (const [name, p] of Object.entries(loads)) {
      const call = p.getGlobalFunc('testing.call');
      console.log(call((x) => name + ' ' + x, 1));
      console.log(await p.getGlobalFunc('testing.call_in_thread').callAsync((x) => name + ' thread ' + x, 2));
      p.registerFunc('reload.' + name, (x) => name + ' by name ' + x);
    }
    for (const [name, p] of Object.entries(loads)) {
      const other = name === 'a' ? 'b' : 'a';
      console.log(p.getGlobalFunc('reload.' + other)(3));
    }
  }
`;
const EXPECTED = ['a 1', 'a thread 2', 'b 1', 'b thread 2', 'b by name 3', 'a by name 3'];

function tmp() { return fs.mkdtempSync(path.join(os.tmpdir(), 'pf-node-reload-')); }

for (const [what, keep] of [['the package alone', "k.includes('koffi')"], ['the package and koffi', 'false']]) {
  test(`evaluating ${what} a second time in the same thread (as Jest does) works`, () => {
    const dir = tmp();
    try {
      const out = run(dir, `${EXERCISE}
        const a = require(${JSON.stringify(PKG)});
        for (const k of Object.keys(require.cache)) if (!(${keep})) delete require.cache[k];
        const b = require(${JSON.stringify(PKG)});
        if (a === b) throw new Error('not evaluated again');
        exercise({ a, b }).catch((e) => { console.error(e); process.exitCode = 1; });
      `);
      assert.deepEqual(out, EXPECTED);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}

test('two installed copies of the package share the process\'s one library', () => {
  // Two copies as npm installs them, each with its own copy of the library
  // and of the helper beside it, found without the environment's choice.
  const dir = tmp();
  try {
    for (const copy of ['a', 'b']) {
      const dest = path.join(dir, copy, 'node_modules', 'packedfunc');
      fs.mkdirSync(path.join(dest, 'lib', 'native'), { recursive: true });
      for (const f of ['index.js', 'package.json']) fs.copyFileSync(path.join(PKG, f), path.join(dest, f));
      for (const f of fs.readdirSync(path.join(PKG, 'lib'))) {
        if (f.endsWith('.js')) fs.copyFileSync(path.join(PKG, 'lib', f), path.join(dest, 'lib', f));
      }
      fs.copyFileSync(pf.libraryPath, path.join(dest, 'lib', 'native', 'libpackedfunc.so.0'));
      fs.copyFileSync(process.env.PACKEDFUNC_NODE_HELPER || path.join(PKG, 'lib', 'native', 'libpfnode.so'),
        path.join(dest, 'lib', 'native', 'libpfnode.so'));
      fs.symlinkSync(path.join(PKG, 'node_modules', 'koffi'), path.join(dir, copy, 'node_modules', 'koffi'));
    }
    const env = { ...process.env };
    delete env.PACKEDFUNC_LIBRARY;
    delete env.PACKEDFUNC_NODE_HELPER;
    const out = run(dir, `${EXERCISE}
      const a = require('./a/node_modules/packedfunc');
      const b = require('./b/node_modules/packedfunc');
      console.log(a.libraryPath === b.libraryPath);
      exercise({ a, b }).catch((e) => { console.error(e); process.exitCode = 1; });
    `, env);
    assert.deepEqual(out, ['true', ...EXPECTED]);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
