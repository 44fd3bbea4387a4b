#!/usr/bin/env bash
# make test-clang: the C sources build with clang as they do with gcc, with
# the same warnings and -Werror. The libraries (runtime, registry, rpc) are
# built and linked with clang in $BUILD/clang (with -Wl,--no-undefined, so
# a missing library, such as libm, fails too); every C test, example and
# tool is compiled by clang's front end alone (-fsyntax-only: clang's
# warnings come from there; gcc builds and runs them). Counts join make
# test's tally (run-c-tests.sh --add), one per file.
#   tools/test-clang.sh        run by make test-clang, which passes BUILD,
#                              MAKE and CLANG_FLAGS (the Makefile's BASE
#                              and CFLAGS)
set -uo pipefail
BUILD=${BUILD:-build}
MAKE=${MAKE:-make}
CLANG_FLAGS=${CLANG_FLAGS:?run by make test-clang}
printf '%-20s ' test-clang
log=$BUILD/clang.log
mkdir -p "$BUILD"
: > "$log"
passed=0
bad=()
if $MAKE --no-print-directory -s CC=clang BUILD="$BUILD/clang" V=0 lib >> "$log" 2>&1; then
  passed=$((passed + 1))
else
  bad+=("the libraries (make CC=clang lib)")
fi
files=(tests/test_*.c tests/python/pf_testlib.c examples/*.c tools/*.c)
# The paths the Makefile gives some tests; a compile alone needs only names.
defs=(-DPF_TEST_MODULE_DIR='"."' -DPF_TEST_DEMO_PLUGIN='"."' -DPF_TEST_CLI='"."'
  -DPF_TEST_CLI_REL='"."')
for f in "${files[@]}"; do
  # shellcheck disable=SC2086  # CLANG_FLAGS is a list of flags
  if clang $CLANG_FLAGS "${defs[@]}" -Itests -Irpc -fsyntax-only "$f" >> "$log" 2>&1; then
    passed=$((passed + 1))
  else
    bad+=("$f")
  fi
done
tools/run-c-tests.sh --add "$passed" "${#bad[@]}"
if [ ${#bad[@]} -ne 0 ]; then
  echo "${#bad[@]} failed under clang:"
  printf '  %s\n' "${bad[@]}"
  cat "$log"
  exit 1
fi
echo "the libraries and ${#files[@]} C files build under clang -Werror"
