// The Node.js example (README or docs/guide.md) runs and prints what the README shows, and
// examples/demo.mjs drives the demo plugin.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

import { ROOT, DEMO_PLUGIN } from '../test-support/fixtures.mjs';

// The README followed by the guide it points to: a marker is unique across both.
function documents() {
  return ['README.md', path.join('docs', 'guide.md')]
    .map((name) => path.join(ROOT, name))
    .filter((file) => fs.existsSync(file))
    .map((file) => fs.readFileSync(file, 'utf8'))
    .join('');
}

function blockAfter(marker) {
  const text = documents();
  const at = text.indexOf(`${marker}\n`);
  assert.ok(at >= 0, `README.md has no ${marker}`);
  const m = /^```[a-z]*\n([\s\S]*?)^```$/m.exec(text.slice(at + marker.length + 1));
  assert.ok(m, `README.md has no block after ${marker}`);
  return m[1];
}

// A scratch directory where `import 'packedfunc'` is this package and
// build/examples/demo_plugin.so this build's plugin.
function scratch() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pf-node-readme-'));
  fs.mkdirSync(path.join(dir, 'node_modules'));
  fs.symlinkSync(path.join(ROOT, 'bindings', 'node'), path.join(dir, 'node_modules', 'packedfunc'));
  fs.mkdirSync(path.join(dir, 'build', 'examples'), { recursive: true });
  fs.symlinkSync(DEMO_PLUGIN, path.join(dir, 'build', 'examples', 'demo_plugin.so'));
  return dir;
}

test("the README's Node.js example prints what the README shows", () => {
  const dir = scratch();
  fs.writeFileSync(path.join(dir, 'example.mjs'), blockAfter('<!-- node-example -->'));
  const r = spawnSync(process.execPath, ['example.mjs'], { cwd: dir, encoding: 'utf8', timeout: 60000 });
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(r.stderr, '');
  assert.equal(r.status, 0);
  assert.equal(r.stdout, blockAfter('<!-- node-output -->'));
});

test('examples/demo.mjs drives the demo plugin with a callback and a tensor', () => {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'examples', 'demo.mjs'), DEMO_PLUGIN],
    { encoding: 'utf8', timeout: 60000 });
  assert.equal(r.stderr, '');
  assert.equal(r.status, 0);
  assert.match(r.stdout, /^Loaded demo_plugin\.so: 9 functions\n/);
  assert.match(r.stdout, /C called JavaScript 100000 times/);
  assert.match(r.stdout, /sorted in place, descending: 9, 8, 7, 5, 3, 2, 1/);
  assert.match(r.stdout, /grid \(2x3 float32\): 1\.5 1\.5 1\.5 1\.5 1\.5 1\.5/);
  assert.match(r.stdout, /RangeError \(kind ValueError\): the C code says no/);
});
