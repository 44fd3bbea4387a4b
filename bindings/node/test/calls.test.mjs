// Calling C from JavaScript: functions by name, values both ways.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';

import { pf, testing } from '../test-support/fixtures.mjs';

test('a C function is called by name', () => {
  const add = pf.getGlobalFunc('testing.add');
  assert.equal(add(40, 2), 42);
  assert.ok(add instanceof pf.PackedFunction);
  assert.equal(typeof add, 'function');
  assert.ok(pf.listGlobalFuncNames('testing.').includes('testing.add'));
  assert.throws(() => pf.getGlobalFunc('testing.no_such'), pf.FunctionNotFoundError);
  assert.equal(pf.getGlobalFunc('testing.no_such', { allowMissing: true }), null);
});

test('the CommonJS and ES module entries are the same package', () => {
  const require = createRequire(import.meta.url);
  const cjs = require('packedfunc');
  assert.equal(cjs.getGlobalFunc, pf.getGlobalFunc);
  assert.equal(cjs.PackedFunction, pf.PackedFunction);
});

test('numbers: safe integers as int64, others as float64, BigInt for int64 beyond 2^53', () => {
  assert.equal(testing.type_name(3), 'int');
  assert.equal(testing.type_name(-0), 'int');
  assert.equal(testing.type_name(2.5), 'float');
  assert.equal(testing.type_name(2 ** 53), 'float'); // not a safe integer
  assert.equal(testing.type_name(NaN), 'float');
  assert.equal(testing.type_name(12n), 'int');
  assert.equal(testing.echo(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER);
  assert.equal(testing.echo(-(2 ** 40)), -(2 ** 40));
  assert.equal(testing.echo(2n ** 62n), 2n ** 62n); // an int64 beyond 2^53 comes back as a BigInt
  assert.equal(testing.echo(-(2n ** 63n)), -(2n ** 63n));
  assert.throws(() => testing.echo(2n ** 63n), RangeError);
  assert.equal(testing.echo(1.25), 1.25);
  // A float64 parameter of a signature takes an integer-valued number as a float.
  assert.equal(pf.getGlobalFunc('testing.typed_add')(2, 3), 5);
});

test('float64 parameters are read from the parameter table, also when they are named', () => {
  const codes = pf.getGlobalFunc('nodetest.codes'); // str(x: float64, y: float64 = 2.5)
  assert.equal(codes(2, 3), 'float,float');
  assert.equal(codes(2), 'float');
  assert.equal(codes(2.5, 3n), 'float,int'); // a BigInt stays an int64
  assert.equal(pf.getGlobalFunc('testing.clamp')(2, 0, 1), 1);
});

test('booleans, null, undefined, strings and bytes', () => {
  assert.equal(testing.echo(true), true);
  assert.equal(testing.type_name(false), 'bool');
  assert.equal(testing.echo(null), null);
  assert.equal(testing.echo(undefined), null);
  assert.equal(testing.echo('héllo wörld ✓'), 'héllo wörld ✓');
  assert.equal(testing.echo(''), '');
  assert.equal(testing.echo('x'.repeat(100000)).length, 100000); // beyond the frame's arena
  assert.throws(() => testing.echo('a\0b'), /NUL character/);
  assert.throws(() => testing.echo('\ud800'), /lone surrogate/);
  const bytes = testing.echo(new Uint8Array([1, 0, 255]));
  assert.ok(bytes instanceof Uint8Array);
  assert.deepEqual([...bytes], [1, 0, 255]);
  assert.equal(testing.bytes_len(Buffer.from('ab\0cd')), 5);
  assert.equal(testing.bytes_len(new Uint8Array(0)), 0);
});

test('DataType, Device and opaque handles', () => {
  const dt = testing.echo(new pf.DataType('float32x4'));
  assert.ok(dt instanceof pf.DataType);
  assert.equal(dt.toString(), 'float32x4');
  assert.equal(new pf.DataType('bf16').toString(), 'bfloat16');
  assert.equal(new pf.DataType('bool').toString(), 'bool');
  assert.throws(() => new pf.DataType('nope'), RangeError); // the library's ValueError
  const dev = testing.echo(new pf.Device('cuda:1'));
  assert.ok(dev.equals(new pf.Device('cuda', 1)));
  assert.equal(dev.toString(), 'cuda:1');
  const h = testing.echo(new pf.OpaqueHandle(0xdeadbeefn));
  assert.equal(h.address, 0xdeadbeefn);
  assert.equal(testing.type_name(h), 'handle');
});

test('a returned packed function is callable', () => {
  const f = pf.getGlobalFunc('testing.make_func')();
  assert.equal(typeof f, 'function');
  assert.equal(f(2, 3), 5);
  f.dispose();
  assert.throws(() => f(2, 3), /disposed/);
  f.dispose(); // never twice
});

test('unsupported values are a TypeError naming the argument', () => {
  assert.throws(() => testing.echo(Symbol('s')), /argument 0 has unsupported type symbol/);
  assert.throws(() => testing.nargs(1, new (class Foo {})()), /argument 1 has unsupported type Foo/);
});

test('metadata: name, signature and doc', () => {
  const f = pf.convert((a, b) => a * b);
  f.setInfo({ name: 'js.mul', signature: 'float64(float64,float64)', doc: 'Multiplies.' });
  assert.equal(f.name, 'js.mul');
  assert.equal(f.signature, 'float64(float64,float64)');
  assert.equal(f.doc, 'Multiplies.');
  assert.equal(testing.call(f, 3, 4), 12);
  // Its float64 parameters take integer-valued numbers as floats.
  assert.equal(pf.getGlobalFunc('testing.type_name')(f.signature), 'str');
});

test('calls with many arguments, and nested calls', () => {
  const args = Array.from({ length: 40 }, (_, i) => i);
  assert.equal(testing.nargs(...args), 40);
  const inner = (x) => testing.call((y) => y + 1, x) * 2;
  assert.equal(testing.call(inner, 20), 42);
});

test('a C string result longer than JavaScript\'s longest string is a RangeError, not an abort', () => {
  // In a child process: the abort it replaces would end the runner.
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', `
    import { constants } from 'node:buffer';
    import { nt } from ${JSON.stringify(new URL('../test-support/fixtures.mjs', import.meta.url).pathname)};
    const n = constants.MAX_STRING_LENGTH + 1;
    // (callAsync reads its result's length the same way: one such case,
    // of a gigabyte's copies, is enough for the suite's time.)
    try { nt.long_string(n); console.log('no error'); } catch (e) { console.log(e.constructor.name, e.message); }
    console.log(nt.long_string(3), await nt.long_string.callAsync(4));
  `], { encoding: 'utf8', timeout: 120000 });
  assert.equal(r.signal, null, `the process died of ${r.signal}: ${r.stderr.slice(0, 500)}`);
  assert.equal(r.status, 0, r.stderr);
  const lines = r.stdout.trim().split('\n');
  assert.equal(lines.length, 2);
  assert.match(lines[0], /^RangeError packedfunc: a string result of \d+ bytes is longer than the longest JavaScript string/);
  assert.equal(lines[1], 'xxx xxxx');
});
