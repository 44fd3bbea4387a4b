#!/usr/bin/env bash
# The README's examples, and those of docs/guide.md (the guide it points to),
# are true (below, "README.md" means both: a marker is unique across them):
#  - each C block marked `<!-- example: examples/NAME.c -->` (a C++ one:
#    examples/NAME.cc, compiled as C++17) is that file word
#    for word; it compiles, and prints what the block marked
#    `<!-- output: examples/NAME.c -->` shows (it runs with the demo plugin's
#    path as its argument, from the repository root);
#  - each block marked `<!-- session: KIND -->` is a shell session: every
#    "$ command" line runs (stdout and stderr together) and prints the lines
#    that follow it. KIND "pf" runs in a scratch directory where build/ is
#    this build and pf is on PATH; KIND "install" runs where packedfunc is
#    installed into a scratch prefix (pkg-config, pf) and the demo plugin's
#    sources (examples/plugin/*.c) are copied. The Python examples are checked by tests/python/test_readme.py;
#  - the comparison table's packedfunc columns: docs/examples/compare_c.c and
#    examples/cxx_layer.cc build and work from Python, and have the lines
#    it says.
set -euo pipefail
BUILD=${BUILD:-build}
ROOT=$(pwd)
DOCS="README.md"
[ -f docs/guide.md ] && DOCS="$DOCS docs/guide.md"
extract() { # the fenced block that follows the marker line $1 in the documents
  # shellcheck disable=SC2086
  awk -v m="$1" 'found==0 && index($0, m) {found=1; next}
                 found==1 && /^```/ {found=2; next}
                 found==2 && /^```/ {exit}
                 found==2 {print}' $DOCS
}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
status=0
# What held, for the one line printed when everything did.
checked_examples=() checked_sessions=()

# ---- C examples ----
# shellcheck disable=SC2086
examples=$(grep -ohE '<!-- example: examples/[A-Za-z0-9_]+\.cc? -->' $DOCS | awk '{print $3}')
[ -n "$examples" ] || { echo "test-readme: no C example in README.md"; exit 1; }
for src in $examples; do
  name=$(basename "$src"); name=${name%.*}
  if ! diff <(extract "<!-- example: $src -->") "$src"; then
    echo "test-readme: README's example differs from $src"; status=1; continue
  fi
  # Against the shared library, so that a plugin the example loads binds to
  # the same runtime.
  compile=(cc -std=c11)
  [[ $src == *.cc ]] && compile=(c++ -std=c++17)
  "${compile[@]}" -Wall -Wextra -Werror -Iinclude "$src" -L"$BUILD/lib" -lpackedfunc \
     -Wl,-rpath,"$ROOT/$BUILD/lib" -lm -o "$tmp/$name"
  if ! diff <("$tmp/$name" "$BUILD/examples/demo_plugin.so" 2>&1) \
            <(extract "<!-- output: $src -->"); then
    echo "test-readme: $src does not print what README.md shows"; status=1; continue
  fi
  checked_examples+=("$src")
done

# ---- shell sessions ----
run_session() { # $1 marker, $2 directory, $3 PATH prefix
  local want="$tmp/want" got="$tmp/got"
  extract "$1" > "$want"
  [ -s "$want" ] || { echo "test-readme: no block after $1"; return 1; }
  : > "$got"
  while IFS= read -r line; do
    case "$line" in
      '$ '*) printf '%s\n' "$line" >> "$got"
             (cd "$2" && PATH="$3:$PATH" bash -c "${line#\$ }" >> "$got" 2>&1) || true ;;
    esac
  done < "$want"
  diff "$got" "$want" || { echo "test-readme: the session after $1 prints something else"; return 1; }
  local kind=${1#*session: }
  checked_sessions+=("${kind% -->}")
}

# shellcheck disable=SC2086
if grep -q '<!-- session: pf -->' $DOCS; then
  mkdir -p "$tmp/pf"
  ln -s "$ROOT/$BUILD" "$tmp/pf/build"
  run_session '<!-- session: pf -->' "$tmp/pf" "$ROOT/$BUILD/bin" || status=1
fi

# shellcheck disable=SC2086
if grep -q '<!-- session: install -->' $DOCS; then
  make --no-print-directory -s install PREFIX="$tmp/prefix" >/dev/null
  mkdir -p "$tmp/plugin"
  cp examples/plugin/*.c "$tmp/plugin/"
  export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
  run_session '<!-- session: install -->' "$tmp/plugin" "$tmp/prefix/bin" || status=1
fi

for kind in pf install; do  # both sessions are there, and held or failed above
  # shellcheck disable=SC2086
  grep -q "<!-- session: $kind -->" $DOCS || { echo "test-readme: no '$kind' session"; status=1; }
done

# ---- the comparison table's packedfunc columns (docs/guide.md, "Compared") ----
# The small library in the C form and the C++ layer, docs/examples/compare_c.c
# and examples/cxx_layer.cc (the guide's C++ example): each builds as a plugin and does what the table says
# from Python (docs/examples/compare.py), and the table's "lines" figures are
# the files' counts (the non-blank lines between "lines: ROW" and "end").
count_lines() { # $1 file, $2 row
  awk -v row="lines: $2" 'index($0, row) {f=1; next} f && /^(\/\*|\/\/) end/ {exit} f && NF {n++}
                          END {print n+0}' "$1"
}
table_figure() { # $1 the row's label, $2 its column (3: C form, 4: C++ layer): the cell's number
  awk -F'|' -v row="$1" -v col="$2" '$2 == " " row " " {print $col + 0; exit}' docs/guide.md
}
compared=0
cc -std=c11 -Wall -Wextra -Werror -Iinclude -shared -fPIC docs/examples/compare_c.c \
   -L"$BUILD/lib" -lpackedfunc -o "$tmp/compare_c.so"
c++ -std=c++17 -Wall -Wextra -Werror -Iinclude -shared -fPIC examples/cxx_layer.cc \
    -L"$BUILD/lib" -lpackedfunc -o "$tmp/compare_cpp.so"
if ! PACKEDFUNC_LIBRARY=${PACKEDFUNC_LIBRARY:-$(ls "$ROOT/$BUILD"/lib/libpackedfunc.so.*.*.*)} \
     PYTHONPATH="$ROOT/bindings/python" "${PYTHON:-python3}" docs/examples/compare.py \
     "$tmp/compare_c.so" "$tmp/compare_cpp.so" >/dev/null; then
  echo "test-readme: docs/examples/compare.py failed: the compared library does not work"; status=1
fi
for row in "clamp:clamp with defaults" "class:the class" "total:total of a float64 array"; do
  for col in "3:docs/examples/compare_c.c" "4:examples/cxx_layer.cc"; do
    file=${col#*:} want=$(count_lines "${col#*:}" "${row%%:*}")
    got=$(table_figure "lines: ${row#*:}" "${col%%:*}")
    if [[ $want -eq 0 || $got != "$want" ]]; then
      echo "test-readme: the guide's comparison says ${got:-nothing} for 'lines: ${row#*:}'; $file has $want"
      status=1
    fi
    compared=$((compared + 1))
  done
done

# ---- the benchmark table is bench/results.md's summary, as `make bench` wrote it ----
if ! diff <(awk '/<!-- bench: begin -->/{f=1; next} /<!-- bench: end -->/{f=0} f && /^\|/' README.md) \
          <(awk '/<!-- summary: begin -->/{f=1; next} /<!-- summary: end -->/{f=0} f' bench/results.md); then
  echo "test-readme: README's benchmark table differs from bench/results.md (run make bench)"
  status=1
fi
and_list() { # a, b and c
  local n=$#
  if [ $n -le 1 ]; then echo "$*"; return; fi
  local IFS=,; local head="${*:1:n-1}"; echo "${head//,/, } and ${!n}"
}
if [ $status -eq 0 ]; then
  printf '%-20s %s\n' test-readme \
    "README and guide: ${#checked_examples[@]} C and C++ examples, the $(and_list "${checked_sessions[@]}") sessions, $compared line counts of the comparison and the benchmark table are true"
fi
exit $status
