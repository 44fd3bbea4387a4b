#!/usr/bin/env bash
# The wheel as a new user meets it (make test-wheel, part of make test):
#   tools/test-wheel.sh WHEEL
# installs WHEEL (make wheel's) into a fresh plain venv (no system site
# packages, no index) from an empty directory, with PATH and
# LD_LIBRARY_PATH holding nothing of the build tree; then checks that
# every ELF file in it loads only glibc's libraries and its own, imports
# the package on both backends, builds a plugin against it and calls it
# (locally and remotely), runs its pf, and type-checks programs with mypy
# against it and the plugin's stub.
set -euo pipefail
wheel=$(realpath "$1")
tools=$(realpath "$(dirname "$0")")
PYTHON=${PYTHON:-python3}
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
cd "$root"
fail() { echo "test-wheel: $*" >&2; exit 1; }
# Runs a command with nothing of the build tree around: a bare PATH and
# environment.
clean() { env -i HOME="$root" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 "$@"; }
# Runs a command that must succeed, printing its output if it does not.
run() {
  local out
  out=$(clean "$@" 2>&1) || fail "$* failed:"$'\n'"$out"
  printf '%s\n' "$out"
}

run "$PYTHON" -m venv venv >/dev/null
run venv/bin/pip install --no-index --quiet "$wheel" >/dev/null
py=$root/venv/bin/python
site=$(run "$py" -c 'import os, packedfunc; print(os.path.dirname(packedfunc.__file__))')
[[ $site == "$root"/venv/* ]] || fail "packedfunc imports from $site, not the venv"

# Every ELF file loads only glibc's libraries and the package's own.
"$tools/bundle-libs.sh" --check "$site" || fail "a library of the installed wheel comes from outside it"

# A plugin built against the package alone; its headers (DLPack's among
# them) and its library come from the wheel.
cat > plugin.c <<'C'
#include <packedfunc/c_api.h>
static int64_t twice(int64_t x) { return 2 * x; }
PF_REGISTER_TYPED("wheel.twice", twice, "int64(x: int64)", "2 x.");
/* Calls into the library, so that the plugin links it. */
static int version(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  PFValue v;
  v.v_str = PFGetApiBase()->GetVersionString();
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
PF_REGISTER_PACKED("wheel.version", version, "The library's version.");
C
read -ra flags <<<"$(run "$py" -m packedfunc --cflags --libs)"
run cc -std=c11 -Wall -Wextra -Werror -fPIC -shared plugin.c "${flags[@]}" -o plugin.so >/dev/null
deps=$(run cc -std=c11 -M plugin.c "${flags[@]}")
for h in packedfunc/c_api.h dlpack/dlpack.h; do
  grep -q "$site/include/$h" <<<"$deps" || fail "plugin.c does not read the wheel's $h: $deps"
done
# A plugin needs no rpath (it binds to the library its host loaded), but
# the flags give one: it resolves to the wheel's copy.
deps=$(ldd plugin.so)
grep -q "libpackedfunc.so.0 => $site/libpackedfunc.so.0" <<<"$deps" ||
  fail "plugin.so does not link the wheel's libpackedfunc: $deps"

# On both backends: the plugin's function, locally and through the
# wheel's libpackedfunc_rpc.
cat > use.py <<'PY'
import sys
import packedfunc
from packedfunc import rpc
plugin = packedfunc.load_module(sys.argv[1])
assert plugin.wheel.twice(21) == 42
assert plugin.wheel.version() == packedfunc.library_version
plugin.export_global()
with rpc.serve("tcp://127.0.0.1:*", expose="wheel.", workers=1) as server:
    with rpc.connect(server.endpoint, timeout=30) as remote:
        assert remote["wheel.twice"](21) == 42
print(packedfunc.backend)
PY
for backend in cext ctypes; do
  got=$(run env PACKEDFUNC_BACKEND=$backend "$py" use.py "$root/plugin.so")
  [[ $got == "$backend" ]] || fail "PACKEDFUNC_BACKEND=$backend ran on: $got"
done

# pf, the console script: the program `make install` installs.
grep -q '^usage: pf ' <<<"$(run venv/bin/pf --help)" || fail "venv/bin/pf --help prints no usage"
[[ $(run venv/bin/pf --load "$root/plugin.so" call wheel.twice 21) == 42 ]] ||
  fail "venv/bin/pf call wheel.twice 21 does not print 42"

# Type checks with mypy against the installed package (py.typed) and the
# plugin's stub (pf stubgen runs the venv's Python): a correct program
# passes, strictly too, and a wrong call is an error. mypy comes from the
# system (python3-mypy); --python-executable names the venv.
run venv/bin/pf stubgen "$root/plugin.so" -o plugin.pyi >/dev/null
mypy=("$PYTHON" -m mypy --python-executable "$py" --no-incremental --cache-dir /dev/null)
cat > good.py <<'PY'
import typing
import packedfunc
if typing.TYPE_CHECKING:
    import plugin
else:
    plugin = packedfunc.load_module("./plugin.so")
n: int = plugin.wheel.twice(21)
PY
run "${mypy[@]}" good.py >/dev/null
run "${mypy[@]}" --strict good.py plugin.pyi >/dev/null
sed 's/twice(21)/twice("21")/' good.py > bad.py
out=$(clean "${mypy[@]}" bad.py 2>&1) && fail "mypy passes a wrong call: $out"
grep -q 'bad.py:7: error: Argument 1 to "twice" of "wheel" has incompatible type "str"' <<<"$out" ||
  fail "mypy's report of a wrong call: $out"

printf '%-20s %s\n' test-wheel "$(basename "$wheel") in a plain venv: its libraries, both backends, a plugin, pf, mypy OK"
