// What a TypeScript program writes against the package: it must type-check
// under --strict (test/types.test.mjs runs tsc over this file).
import pf, { DataType, Device, List, Dict, PackedFuncError, loadModule } from 'packedfunc';
import type { PackedFunction, Module, ObjectClass, Value } from 'packedfunc';

const plugin: Module = loadModule('build/examples/demo_plugin.so');
const add: PackedFunction = plugin.get('demo.add');
const sum: number = add(40, 2);
const name: string = add.name;
const sig: string | null = add.signature;
const maybe: PackedFunction | null = pf.getGlobalFunc('nothing.here', { allowMissing: true });

const square = pf.registerFunc('example.square', (i: number) => i * i);
const nine: number = square(3);
pf.removeGlobalFunc('example.square');
const names: string[] = pf.listGlobalFuncNames('demo.');
const api = pf.initApi('demo');

const later: Promise<any> = add.callAsync(1, 2);
const values: Value[] = [1, 2n, 'x', null, true, new Uint8Array(2), [1, [2]], { a: 1 },
                         new Map([['k', 1]]), new DataType('float32'), new Device('cpu', 0)];
const t = pf.tensor(new Float32Array(6), [2, 3], 'float32');
const bits: number = t.dtype.bits;

const list = List.of([1, 2, 3]);
const n: number = list.push(4);
const dict = Dict.of({ a: 1 });
dict.set('b', 2).set('c', 3);
const Counter: ObjectClass = pf.getObjectType('demo.Counter');
const c = new Counter('clicks', 10);
c.dispose();

try {
  add(1, 'two');
} catch (err) {
  if (err instanceof PackedFuncError) {
    const kind: string = err.kind;
    const lines: string[] = err.cTraceback;
    void kind, lines;
  }
}
class MyError extends Error {}
pf.registerError('MyError', MyError);
const previous: number = pf.setThreadCallTimeout(1000);
{
  using f = pf.getGlobalFunc('demo.add');
  void f;
}

void [sum, name, sig, maybe, nine, names, api, later, values, bits, n, previous];
