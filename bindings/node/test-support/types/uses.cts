// What a CommonJS TypeScript program writes against the package: it must
// type-check under --strict (test/types.test.mjs runs tsc over this file).
import pf = require('packedfunc');

const plugin: pf.Module = pf.loadModule('build/examples/demo_plugin.so');
const add: pf.PackedFunction = plugin.get('demo.add');
const sum: number = add(40, 2);
const list = pf.List.of([1, 2, 3]);
const version: string = pf.version;

void [sum, list, version];
