#!/usr/bin/env bash
# The peer measure of issue 36: apache/tvm-ffi's own Python tests, run
# against packedfunc by renaming alone, with pass/fail/skip counts per file.
#   tools/peer-tvm-ffi.sh TVM_FFI_CHECKOUT [TEST_FILE...]
# TVM_FFI_CHECKOUT is a checkout of github.com/apache/tvm-ffi (a work tree,
# or a bare/mirror git directory, whose HEAD is read with git archive). Not
# part of `make test`: it needs that checkout. The environment names the
# build as for the Python suite (mk/tests.mk's PY_TEST_ENV: PACKEDFUNC_
# LIBRARY, PF_TESTLIB), PACKEDFUNC_BACKEND the backend, PYTHON the
# interpreter (default /usr/bin/python3, which sees Debian's pytest).
#
# In scope (IN_SCOPE below): the files that test what both projects have
# (containers, devices, dtypes, errors, functions, objects, strings,
# tensors, metadata, structural equality, serialization, type conversion,
# Python objects tied to C); within them, a test that uses tvm-ffi's own
# fixtures (its C++ test objects, its Cython core...) is skipped as out of
# scope (tools/peer_tvm_ffi_conftest.py says which). Out of scope: building and loading C++
# (build, load_inline, cubin, examples, stl, libinfo), CUDA streams, torch,
# tvm-ffi's Python dataclass machinery (dataclass_*, structural_py_class),
# its access paths and stub generator.
#
# The rename map (RENAMES below) is the whole adaptation: sed expressions,
# applied in order, that turn tvm-ffi's spelling of a feature into
# packedfunc's; the test logic is never edited. The conftest.py
# (tools/peer_tvm_ffi_conftest.py) loads pf_testlib (PF_TESTLIB), whose
# testing.* functions have tvm-ffi's names. pytest's log of each file goes
# to $PEER_LOG_DIR when it is set (its FAILED lines name each cause).
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,4s/^# //p' "$0"; exit 2; }
src=$1
shift
PYTHON=${PYTHON:-/usr/bin/python3}
root=$(cd "$(dirname "$0")/.." && pwd)

IN_SCOPE=(test_container.py test_container_dlpack_conversion.py test_device.py test_dtype.py
  test_error.py test_function.py test_metadata.py test_object.py test_pyobject_tying.py
  test_serialization.py test_string.py test_structural.py test_tensor.py
  test_type_converter.py)
[ $# -eq 0 ] || IN_SCOPE=("$@")

RENAMES=(
  # tvm-ffi's reference count query is a testing function; ours a function.
  's/tvm_ffi\.get_global_func\("testing\.object_use_count"\)/packedfunc.use_count/g'
  # The class of returned tensors and devices: a setter and the current one.
  's/tvm_ffi\.core\._set_class_(tensor|device)/packedfunc.set_\1_class/g'
  's/tvm_ffi\.core\._CLASS_(TENSOR|DEVICE)/packedfunc.get_\L\1\E_class()/g'
  # Names tvm-ffi keeps in its core module or spells in lower case.
  's/tvm_ffi\.core\.(Object|Function|DataType)\b/packedfunc.\1/g'
  's/tvm_ffi\.dtype\b/packedfunc.DataType/g'
  's/tvm_ffi\.registry\./packedfunc./g'
  's/\bregister_global_func\b/register_func/g'
  # A Python callable as a function: packedfunc.convert makes one.
  's/tvm_ffi\.convert_func\(/packedfunc.convert(/g'
  's/\bget_registered_type_keys\b/registered_types/g'
  's/__tvm_ffi_type_info__/__pf_type_info__/g'
  # The value and object protocols: one hook in packedfunc, whatever the
  # value is (tvm-ffi's __tvm_ffi_int__/__float__ also convert: no rename).
  's/__tvm_ffi_(value|object)__/__packedfunc_value__/g'
  # x.same_as(y) is a function of the package.
  's/([A-Za-z_][A-Za-z0-9_.]*)\.same_as\(/packedfunc.same_as(\1, /g'
  # JSON documents of object graphs: packedfunc's to_json / from_json.
  's/from tvm_ffi\.serialization import from_json_graph_str, to_json_graph_str/from packedfunc import from_json as from_json_graph_str, to_json as to_json_graph_str/'
  # Methods that are properties in packedfunc, and Device's fields.
  's/\.__chandle__\(\)/.handle/g'
  's/\.data_ptr\(\)/.data_ptr/g'
  's/\.dlpack_device_type\(\)/.device_type/g'
  's/\.index([^(A-Za-z0-9_]|$)/.device_id\1/g'
  # The dtype constants of tvm-ffi's module.
  's/\btvm_ffi\.(bool|u?int(8|16|32|64)|b?float(16|32|64)|float[864]_[a-z0-9]+)\b/packedfunc.DataType("\1")/g'
  # Everything else: the package's name.
  's/\btvm_ffi\b/packedfunc/g'
)

work=$(mktemp -d "${TMPDIR:-/tmp}/pf-peer.XXXXXX")
trap 'rm -rf "$work"' EXIT
if [ -d "$src/.git" ] || [ -d "$src/tests/python" ]; then
  cp -r "$src/tests/python/." "$work/"
else
  git --git-dir="$src" archive HEAD tests/python | tar -x -C "$work" --strip-components=2
fi
for f in "$work"/*.py "$work"/utils/*.py; do
  [ -f "$f" ] || continue
  for r in "${RENAMES[@]}"; do sed -E -i "$r" "$f"; done
done
cp "$root/tools/peer_tvm_ffi_conftest.py" "$work/conftest.py"
export PF_PEER_ROOT=$root

printf '%-42s %6s %6s %6s %6s\n' file pass fail skip error
tp=0 tf=0 ts=0 te=0
for f in "${IN_SCOPE[@]}"; do
  log=$work/$f.log
  (cd "$work" && COLUMNS=400 timeout 900 "$PYTHON" -m pytest -q -p no:cacheprovider -rf "$f" >"$log" 2>&1) || true
  [ -z "${PEER_LOG_DIR:-}" ] || cp "$log" "$PEER_LOG_DIR/"
  out=$(tail -n 1 "$log")
  count() { grep -o "[0-9]* $1" <<<"$out" | head -n 1 | cut -d' ' -f1 || true; }
  p=$(count passed) fl=$(count failed) s=$(count skipped) e=$(count error)
  p=${p:-0} fl=${fl:-0} s=${s:-0} e=${e:-0}
  printf '%-42s %6d %6d %6d %6d\n' "$f" "$p" "$fl" "$s" "$e"
  tp=$((tp + p)) tf=$((tf + fl)) ts=$((ts + s)) te=$((te + e))
done
printf '%-42s %6d %6d %6d %6d\n' total "$tp" "$tf" "$ts" "$te"
run=$((tp + tf + te))
[ "$run" -eq 0 ] || echo "passing: $((100 * tp / run))% of $run run (skips not counted)"
