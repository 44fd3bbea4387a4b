// What the tests share: the package, and the C fixtures registered once
// (tests/python/pf_testlib.c under "testing.", tests/node/pf_nodetest.c
// under "nodetest."). `make test-node` names this build's files in the
// environment; without it, the default build's paths are used.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import pf from '../index.mjs';

const require = createRequire(import.meta.url);
const koffi = require('koffi');

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const BUILD = path.join(ROOT, process.env.BUILD || 'build');
export const TESTLIB = process.env.PF_TESTLIB || path.join(BUILD, 'python', 'libpf_testlib.so');
export const NODETEST = process.env.PF_NODETEST || path.join(BUILD, 'node', 'libpf_nodetest.so');
export const DEMO_PLUGIN = process.env.PF_DEMO_PLUGIN || path.join(BUILD, 'examples', 'demo_plugin.so');

export const testlib = koffi.load(TESTLIB);
export const nodetest = koffi.load(NODETEST);
if (testlib.func('int pft_init()')() !== 0) throw new Error('pft_init failed');
if (nodetest.func('int pfn_init()')() !== 0) throw new Error('pfn_init failed');

export const testing = pf.initApi('testing');
export const nt = pf.initApi('nodetest');
export { pf, koffi };
