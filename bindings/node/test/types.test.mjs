// The TypeScript declarations (index.d.ts) are true: programs using the
// package (ES module and CommonJS) type-check under --strict, the misuses in
// test-support/types/misuses.{mts,cts} are refused, and every name the package
// exports is declared (and nothing declared is missing).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import * as pkg from '../index.mjs';

const PKG = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

test('a program using the package type-checks, and misuses are refused', () => {
  const tsc = path.join(PKG, 'node_modules', 'typescript', 'bin', 'tsc');
  const r = spawnSync(process.execPath, [tsc, '-p', path.join(PKG, 'test-support', 'types', 'tsconfig.json')],
                      { cwd: PKG, encoding: 'utf8', timeout: 120000 });
  assert.equal(r.stdout + r.stderr, '');
  assert.equal(r.status, 0);
});

test('the declarations name exactly what the package exports', () => {
  const dts = fs.readFileSync(path.join(PKG, 'index.d.ts'), 'utf8');
  const declared = new Set(
    [...dts.matchAll(/^export (?:declare )?(?:function|class|const|let) ([A-Za-z_$][\w$]*)/gm)]
      .map((m) => m[1]));
  declared.add('default');
  const exported = new Set(Object.keys(pkg));
  assert.deepEqual([...exported].filter((n) => !declared.has(n)).sort(), []);
  assert.deepEqual([...declared].filter((n) => !exported.has(n)).sort(), []);
  // The default export carries the same names as the named ones.
  const inDefault = new Set(Object.keys(pkg.default));
  assert.deepEqual([...exported].filter((n) => n !== 'default' && !inDefault.has(n)).sort(), []);
});
