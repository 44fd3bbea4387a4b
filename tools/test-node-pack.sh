#!/usr/bin/env bash
# The npm tarball as a new user meets it (make test-node-pack, part of make
# test):
#   tools/test-node-pack.sh TARBALL DEMO_PLUGIN PF MODULE...
# installs TARBALL (make node-pack's) with `npm install` into an empty
# project outside the source tree, with nothing of the build tree on PATH,
# LD_LIBRARY_PATH or in the environment; checks that every ELF file in it
# loads only glibc's libraries and its own; from ES modules and CommonJS
# both, calls a registered function and the demo plugin (a copy without
# its RUNPATH) and checks that no library the process maps comes from
# outside the project and the system; runs the guide's Node.js example as
# the guide prints it; checks that npm does not pack the source directory
# unbundled; and type-checks with tsc --strict --noEmit programs
# that use the package (ES module and CommonJS) and the declarations that
# `PF stubgen --lang ts` writes for DEMO_PLUGIN and each MODULE: correct
# uses compile, wrong ones do not.
# koffi comes from npm's cache, where `make node`'s npm ci left it (from
# the registry when it is not there); tsc from bindings/node/node_modules.
# PF runs this tree's Python package (bindings/python).
set -euo pipefail
tarball=$(realpath "$1")
demo=$(realpath "$2")
pf=$(realpath "$3")
shift 3
modules=()
for m in "$@"; do modules+=("$(realpath "$m")"); done
src=$(realpath "$(dirname "$0")/..")
NODE=${NODE:-node}
NPM=${NPM:-npm}
node_dir=$(dirname "$(command -v "$NODE")")
npm_cache=$("$NPM" config get cache)
tsc=$src/bindings/node/node_modules/typescript/bin/tsc
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
app=$root/app
mkdir -p "$app"
cd "$app"
fail() { echo "test-node-pack: $*" >&2; exit 1; }
# Runs a command with nothing of the build tree around: a bare PATH and
# environment.
clean() { env -i HOME="$root" PATH="$node_dir:/usr/local/bin:/usr/bin:/bin" LANG=C.UTF-8 "$@"; }
# Runs a command that must succeed, printing its output if it does not.
run() {
  local out
  out=$(clean "$@" 2>&1) || fail "$* failed:"$'\n'"$out"
  printf '%s\n' "$out"
}

cat > package.json <<'JSON'
{ "name": "app", "version": "1.0.0", "private": true }
JSON
run "$NPM" install --prefer-offline --no-audit --no-fund --loglevel=error --cache "$npm_cache" \
  --logs-dir "$root/npm-logs" "$tarball" >/dev/null
pkg=$app/node_modules/packedfunc
[[ -f $pkg/lib/native/libpfnode.so ]] || fail "the installed package has no lib/native/libpfnode.so"

# Every ELF file loads only glibc's libraries and the package's own.
"$src/tools/bundle-libs.sh" --check "$pkg/lib/native" ||
  fail "a library of the installed package comes from outside it"

# A plugin as a user has it: a copy, with no RUNPATH into the build tree
# (it binds to the libpackedfunc.so.0 that the package loaded).
mkdir -p build/examples
cp "$demo" build/examples/demo_plugin.so
patchelf --remove-rpath build/examples/demo_plugin.so

# The same checks from both module systems.
cat > check.cjs <<'JS'
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
module.exports = (pf, how) => {
  pf.registerFunc(`app.twice_${how}`, (x) => 2 * x);
  assert.equal(pf.getGlobalFunc(`app.twice_${how}`)(21), 42);
  const plugin = pf.loadModule(path.resolve('build/examples/demo_plugin.so'));
  assert.equal(plugin.demo.add(40, 2), 42);
  assert.equal(plugin.demo.call_n_times((i) => 10 * i, 3), 30);
  // The package's libraries, and every library the process maps, come
  // from this project or the system: none from the source tree.
  const here = fs.realpathSync('.') + path.sep;
  assert.ok(fs.realpathSync(pf.libraryPath).startsWith(here), pf.libraryPath);
  const maps = fs.readFileSync('/proc/self/maps', 'utf8').split('\n');
  const files = new Set(maps.map((l) => (l.includes('/') ? l.slice(l.indexOf('/')) : ''))
    .filter((f) => /\.(so|node)\b/.test(f)));
  const foreign = [...files].filter((f) => !f.startsWith(here) && !/^\/(usr\/)?lib(32|64)?\//.test(f));
  assert.deepEqual(foreign, []);
  console.log(`${how} ok`);
};
JS
cat > esm.mjs <<'JS'
import pf from 'packedfunc';
import { getGlobalFunc, version } from 'packedfunc';
import check from './check.cjs';
check(pf, 'esm');
if (getGlobalFunc !== pf.getGlobalFunc || version !== pf.version) throw new Error('named exports differ');
JS
cat > cjs.cjs <<'JS'
require('./check.cjs')(require('packedfunc'), 'cjs');
JS
for file in esm.mjs cjs.cjs; do
  got=$(run "$NODE" "$file")
  [[ $got == "${file%.*} ok" ]] || fail "$file printed:"$'\n'"$got"
done

# The guide's example, as the guide says to run it.
block() { awk -v m="$1" '$0 == m {f = 1; next} f && /^```/ {if (in_) exit; in_ = 1; next} in_' "$src/docs/guide.md"; }
block '<!-- node-example -->' > example.mjs
[[ -s example.mjs ]] || fail "docs/guide.md has no <!-- node-example --> block"
got=$(run "$NODE" example.mjs)
[[ $got == "$(block '<!-- node-output -->')" ]] ||
  fail "the guide's example prints, installed from the tarball:"$'\n'"$got"

# The source directory, whose lib/native holds no bundled libraries, is
# not packed (npm pack and npm publish run prepack): make node-pack is.
mkdir "$root/unbundled"
cp "$src/bindings/node/package.json" "$root/unbundled/"
out=$(cd "$root/unbundled" && clean "$NPM" pack --dry-run --ignore-scripts=false --cache "$npm_cache" \
        --logs-dir "$root/npm-logs" 2>&1) && fail "npm pack packs the unbundled source directory: $out"
grep -qF 'packedfunc: make the tarball with make node-pack at the root of the source tree' <<<"$out" ||
  fail "npm pack of the source directory fails without saying why: $out"

# TypeScript: the declarations of the plugin and the modules, and
# programs that use them with the package's own, from an ES module and
# from CommonJS.
# (pf for the plugin; the Python module it runs for the others, which is
# quicker.)
PYTHONPATH=$src/bindings/python "$pf" stubgen --lang ts "$demo" -o demo_plugin.d.ts ||
  fail "pf stubgen --lang ts $demo failed"
declared=('"demo_plugin.d.ts"')
for so in "${modules[@]}"; do
  name=$(basename "$so" .so)
  PYTHONPATH=$src/bindings/python "${PYTHON:-python3}" -m packedfunc.stubgen --lang ts "$so" -o "$name.d.ts" ||
    fail "python -m packedfunc.stubgen --lang ts $so failed"
  declared+=("\"$name.d.ts\"")
done
tsconfig() {
  local files
  files=$(printf '%s, ' "$@")
  cat <<JSON
{
  "compilerOptions": {
    "strict": true, "noEmit": true, "skipLibCheck": false, "types": [],
    "target": "ES2022", "module": "NodeNext", "moduleResolution": "NodeNext",
    "lib": ["ES2022", "ESNext.Disposable"]
  },
  "files": [${files%, }]
}
JSON
}
cat > good.mts <<'TS'
import pf from 'packedfunc';
import { loadModule } from 'packedfunc';
import type { LoadedModule } from './demo_plugin.js';

const plugin = pf.loadModule<LoadedModule>('./build/examples/demo_plugin.so');
const sum: number | bigint = plugin.demo.add(40, 2);
const hello: string = plugin.demo.greet('TypeScript');
const later: Promise<number> = plugin.demo.hypot.callAsync(3, 4);
const untyped: unknown = plugin.demo.call_n_times((i: number) => i, 3);
const { 'demo.Counter': Counter } = plugin.types;
const c = new Counter('clicks', 10);
const next: number | bigint = c.increment();
c.step = 2;
c.tag = { sizes: [2, 3] };
const name: string = c.name;
const max: number | bigint = Counter.max_step();
const key: string = Counter.typeKey;
const same: LoadedModule = loadModule<LoadedModule>('./build/examples/demo_plugin.so');
void [sum, hello, later, untyped, next, name, max, key, same];
TS
cat > good.cts <<'TS'
import pf = require('packedfunc');
import type { LoadedModule } from './demo_plugin.js';

const plugin = pf.loadModule<LoadedModule>('./build/examples/demo_plugin.so');
const hello: string = plugin.demo.greet('CommonJS');
const c = new plugin.types['demo.Counter']('clicks', 10);
void [hello, c.add(2)];
TS
tsconfig '"good.mts"' '"good.cts"' "${declared[@]}" > tsconfig.json
run "$NODE" "$tsc" -p tsconfig.json >/dev/null
cat > bad.mts <<'TS'
import pf from 'packedfunc';
import type { LoadedModule } from './demo_plugin.js';

const plugin = pf.loadModule<LoadedModule>('./build/examples/demo_plugin.so');
plugin.demo.add(1, 'two');
new plugin.types['demo.Counter'](1, 2);
TS
# The guide's TypeScript example, with its one wrong call.
block '<!-- node-ts-example -->' > guide.mts
[[ -s guide.mts ]] || fail "docs/guide.md has no <!-- node-ts-example --> block"
tsconfig '"bad.mts"' '"guide.mts"' "${declared[0]}" > tsconfig.json
out=$(clean "$NODE" "$tsc" -p tsconfig.json 2>&1) && fail "tsc passes a wrong call: $out"
at=$(awk "/'two'/ {print NR \",\" index(\$0, \"'two'\")}" guide.mts)
want="bad.mts(5,20): error TS2345: Argument of type 'string' is not assignable to parameter of type 'number | bigint'.
bad.mts(6,34): error TS2345: Argument of type 'number' is not assignable to parameter of type 'string'.
guide.mts($at): error TS2345: Argument of type 'string' is not assignable to parameter of type 'number | bigint'."
[[ $out == "$want" ]] || fail "tsc's report of the wrong calls:"$'\n'"$out"$'\n'"not:"$'\n'"$want"

printf '%-20s %s\n' test-node-pack "$(basename "$tarball") in an empty project: its libraries, ESM, CommonJS, the guide's example, tsc OK"
