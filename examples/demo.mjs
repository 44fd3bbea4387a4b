// The packedfunc demo from JavaScript: the C plugin of examples/demo.py,
// driven from Node.js.
//
//     make node                                  # koffi, the C helper, the library
//     node examples/demo.mjs [PLUGIN.so]         # or: make demo-node
//
// The plugin is examples/plugin/demo_plugin.c, built into
// $BUILD/examples/demo_plugin.so (BUILD defaults to "build"); pass another
// path as the argument or in $PF_DEMO_PLUGIN. The output is deterministic:
// README.md shows it, and a test checks that it still matches.
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import pf from '../bindings/node/index.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const plugin = process.argv[2] || process.env.PF_DEMO_PLUGIN ||
  path.join(ROOT, process.env.BUILD || 'build', 'examples', 'demo_plugin.so');

const section = (title) => console.log(`\n== ${title}`);

const mod = pf.loadModule(plugin);
console.log(`Loaded ${path.basename(plugin)}: ${mod.listFunctionNames().length} functions`);

section('Calling C from JavaScript');
const { demo } = mod; // functions named "demo.*" are properties of mod.demo
console.log('demo.add(40, 2)          =', demo.add(40, 2));
console.log('demo.hypot(3, 4)         =', demo.hypot(3, 4));
console.log('demo.greet("world")      =', JSON.stringify(demo.greet('world')));
console.log('demo.add.signature       =', demo.add.signature);

section('A JavaScript function that C calls');
let calls = 0;
pf.registerFunc('demo_js.square', (i) => { calls++; return i * i; });
const square = pf.getGlobalFunc('demo_js.square'); // what C code sees
const total = demo.call_n_times(square, 100000);
console.log(`demo.call_n_times(square, 100000) = ${total} (C called JavaScript ${calls} times)`);

section('A JavaScript comparator for the C sort (qsort)');
const xs = new BigInt64Array([5n, 3n, 9n, 1n, 7n, 2n, 8n]);
demo.sort(xs, (x, y) => (y > x) - (y < x)); // descending
console.log('sorted in place, descending:', Array.from(xs, Number).join(', '));

section('Typed arrays, filled by C without a copy');
const grid = new Float32Array(6);
demo.fill(pf.tensor(grid, [2, 3]), 1.5);
console.log('grid (2x3 float32):', Array.from(grid).join(' '));

section('A C struct as a JavaScript class');
const Counter = mod.types['demo.Counter'];
const counter = new Counter('clicks', 10);
counter.step = 5;
counter.increment();
console.log(`${counter.describe()}; count ${counter.count}, step ${counter.step}`);

section('Errors raised in C, caught in JavaScript');
try {
  demo.fail('the C code says no');
} catch (err) {
  console.log(`${err.constructor.name} (kind ${err.kind}): ${err.message}`);
}
try {
  demo.call_n_times(() => { throw new Error('the callback gave up'); }, 1);
} catch (err) {
  console.log(`the callback's own Error, back through C: ${err.message}`);
}
