// The Node.js rows of the benchmarks: packedfunc's JavaScript binding
// against koffi's own calls of the same C code (bench/bench_pylib.c).
//
//     node bench/bench_node.mjs [--json] [--quick] [--trials N]
//     node bench/bench_node.mjs --count ID N [ID N...]
//
// --count runs one side of a row N times, for each ID in order, and nothing
// else, for callgrind (bench/report.py): ID is a row id, or the row id with
// "_base" appended for its baseline. Before each run and after the last it
// calls the C library's bench_count_mark(), which makes callgrind write a
// count and start the next (as bench_python.py --count does).
//
// Rows (each a ratio taken trial by trial against a baseline in the same run):
//   node_add       JS f(i, 2) of the packed C add (bench.add) vs koffi's
//                  call of the raw C add (raw_add)             target <= 1.5x
//   node_typed_add JS f(i, 2) of a typed C add (bench.typed_add: raw_add
//                  as int64(int64,int64)) vs koffi's raw_add  target <= 1.3x
//   node_callback  C calling a JS callback, per call: bench.call_n(f, n)
//                  vs koffi's own callback through raw_call_n   target <= 1.3x
//   node_tensor_object  pf.convert(pf.tensor(a)): a tensor object over a
//                  typed array's memory, vs passing it as a tensor argument
//                  (bench.tensor_sum(a))                       target <= 3 us
//   node_roundtrip bench.echo({a: 1, b: [1, 2]}).toObject(): a plain object
//                  to a C Map and back, vs bench.echo(1)        target <= 4 us
//   node_json      pf.fromJSON(pf.toJSON(g)) of a graph of 10,000 nodes (an
//                  Array of 10,000 Maps {i, name}), per node, vs
//                  JSON.parse(JSON.stringify(p)) of the same plain objects
//                  (issue 36's target for to_json/from_json)   target <= 2x
// bench/report.py runs it for `make bench` (and --quick in make test), with
// $PACKEDFUNC_LIBRARY, $PACKEDFUNC_NODE_HELPER and $PF_BENCHLIB set.
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

import pf from '../bindings/node/index.mjs';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
// koffi as the package has it (bindings/node/node_modules).
const koffi = createRequire(path.join(ROOT, 'bindings', 'node', 'package.json'))('koffi');
const args = process.argv.slice(2);
const json = args.includes('--json');
const quick = args.includes('--quick');
const trialsAt = args.indexOf('--trials');
const trials = trialsAt >= 0 ? Number(args[trialsAt + 1]) : (quick ? 3 : 15);
const loops = quick ? 20000 : 400000;

const lib = koffi.load(process.env.PF_BENCHLIB || path.join(ROOT, process.env.BUILD || 'build', 'bench', 'libpf_benchlib.so'));
if (lib.func('int bench_init()')() !== 0) throw new Error('bench_init failed');
const rawAdd = lib.func('int64_t raw_add(int64_t, int64_t)');
const RawCb = koffi.proto('int64_t bench_node_cb(int64_t, int64_t)');
const rawCallN = lib.func('int64_t raw_call_n(bench_node_cb*, int64_t)');
const add = pf.getGlobalFunc('bench.add');
const typedAdd = pf.getGlobalFunc('bench.typed_add');
const callN = pf.getGlobalFunc('bench.call_n');
const echo = pf.getGlobalFunc('bench.echo');
const tensorSum = pf.getGlobalFunc('bench.tensor_sum');

const perOp = (run, n) => {
  const t0 = process.hrtime.bigint();
  run(n);
  return Number(process.hrtime.bigint() - t0) / n;
};

// Alternates trials of case and base (the order flipping each time).
function measure(caseFn, baseFn, n, warm = Math.max(50000, n / 10)) {
  const a = [];
  const b = [];
  // Warm up enough for V8 to optimize both loops, also in a quick run.
  caseFn(warm);
  baseFn(warm);
  for (let t = 0; t < trials; t++) {
    if (t % 2) { a.push(perOp(caseFn, n)); b.push(perOp(baseFn, n)); } else { b.push(perOp(baseFn, n)); a.push(perOp(caseFn, n)); }
  }
  const spread = (v) => { const s = v.slice().sort((x, y) => x - y); return [s[s.length >> 1], s[0], s[s.length - 1]]; };
  return [spread(a), spread(b), spread(a.map((x, i) => x / b[i]))];
}

// What the loops keep of each result. The call rows fold it in with ^,
// which keeps it a small int: a sum would outgrow one and allocate a heap
// number per call on both sides (and deoptimize the loop when it did).
let sink = 0;
const cb = (x, y) => x + y;
const rawCb = koffi.register(cb, koffi.pointer(RawCb));
const packedCb = pf.convert(cb);
const a = new BigInt64Array([1n, 2n, 3n, 4n]);
const obj = { a: 1, b: [1, 2] };
const GRAPH_NODES = 10000;
const plainGraph = Array.from({ length: GRAPH_NODES }, (_, i) => ({ i, name: `node ${i}` }));
const graph = pf.convert(plainGraph);
// n counts nodes: whole round trips of the graph, at least one (a trip
// takes milliseconds: the row runs fewer loops than the others).
const graphTrips = (n) => Math.max(1, Math.round(n / GRAPH_NODES));
// [id, what, baseline, case, baseline's case, ratio target, ns target, loops,
// warm-up loops (measure's default when absent)]: a row whose target is a
// time has no ratio target (0).
const rows = [
  ['node_add', 'JS f(i, 2) of a packed C add', "koffi's call of the raw C add (raw_add(i, 2))",
    (n) => { for (let i = 0; i < n; i++) sink ^= add(i, 2); },
    (n) => { for (let i = 0; i < n; i++) sink ^= rawAdd(i, 2); }, 1.5, 0, loops],
  ['node_typed_add', 'JS f(i, 2) of a typed C add (int64(int64,int64))', "koffi's call of the raw C add (raw_add(i, 2))",
    (n) => { for (let i = 0; i < n; i++) sink ^= typedAdd(i, 2); },
    (n) => { for (let i = 0; i < n; i++) sink ^= rawAdd(i, 2); }, 1.3, 0, loops],
  ['node_callback', 'C calls a JS callback, per call (bench.call_n)', "C calls koffi's own callback (raw_call_n)",
    (n) => { sink += callN(packedCb, n); },
    (n) => { sink += rawCallN(rawCb, n); }, 1.3, 0, loops],
  ['node_tensor_object', 'a tensor object made from a JS typed array (pf.convert(pf.tensor(a)))',
    'the typed array as a tensor argument (bench.tensor_sum(a))',
    (n) => { for (let i = 0; i < n; i++) sink += pf.convert(pf.tensor(a)).length; },
    (n) => { for (let i = 0; i < n; i++) sink += Number(tensorSum(a)); }, 0, 3000, loops / 10],
  ['node_roundtrip', 'round trip of {a: 1, b: [1, 2]} (bench.echo(obj).toObject())', 'bench.echo(1)',
    (n) => { for (let i = 0; i < n; i++) sink += echo(obj).toObject().a; },
    (n) => { for (let i = 0; i < n; i++) sink += echo(1); }, 0, 4000, loops / 10],
  ['node_json', `pf.fromJSON(pf.toJSON(g)), g a graph of ${GRAPH_NODES} nodes, per node`,
    'JSON.parse(JSON.stringify(p)), p the same plain objects',
    (n) => { for (let t = graphTrips(n); t > 0; t--) sink += pf.fromJSON(pf.toJSON(graph)).length; },
    (n) => { for (let t = graphTrips(n); t > 0; t--) sink += JSON.parse(JSON.stringify(plainGraph)).length; },
    2, 0, quick ? GRAPH_NODES : 3 * GRAPH_NODES, GRAPH_NODES],
];
const countAt = args.indexOf('--count');
if (countAt >= 0) {
  // One side of a row, N operations, for each ID: every ID is found before
  // anything runs.
  const spec = args.slice(countAt + 1);
  if (spec.length === 0 || spec.length % 2) throw new Error('bench_node: --count takes pairs ID N');
  const runs = [];
  for (let k = 0; k < spec.length; k += 2) {
    const base = spec[k].endsWith('_base');
    const row = rows.find((r) => r[0] === (base ? spec[k].slice(0, -5) : spec[k]));
    if (!row) throw new Error(`bench_node: no row ${spec[k]}`);
    runs.push([base ? row[4] : row[3], Number(spec[k + 1])]);
  }
  const mark = lib.func('void bench_count_mark()');
  for (const [run, n] of runs) {
    mark();
    run(n);
  }
  mark();
  process.exit(0);
}
for (const [id, what, baseline, caseFn, baseFn, target, nsTarget, n, warm] of rows) {
  const [ns, baseNs, ratio] = measure(caseFn, baseFn, n, warm);
  const row = { id, what, base_id: `${id}_base`, baseline, ns, base_ns: baseNs, ratio, target, trials };
  if (nsTarget) row.ns_target = nsTarget;
  if (json) console.log(JSON.stringify(row));
  else {
    const goal = nsTarget ? `<= ${nsTarget} ns` : `<= ${target}x`;
    console.log(`${id.padEnd(20)} ${ns[0].toFixed(0).padStart(6)} ns  base ${baseNs[0].toFixed(0).padStart(6)} ns  ratio ${ratio[0].toFixed(2)}x (target ${goal})`);
  }
}
koffi.unregister(rawCb);
if (sink === 0.5) console.log(sink);
