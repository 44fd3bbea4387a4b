#!/usr/bin/env bash
# The Python suite: pytest over tests/python, once per backend.
#   tools/test-python.sh BACKEND...
# make test-python sets the environment that names this build
# (PACKEDFUNC_LIBRARY, PF_TESTLIB, ...), PYTHON (the interpreter) and BUILD.
# Each backend prints one line as it runs: a dot for each line of pytest's
# progress (a test file, and each 70-odd tests of a long one) as it
# completes, F if one of its tests failed, then pytest's counts. pytest's
# whole output stays in $BUILD/python/pytest-BACKEND.log; on a failure its
# report (failures, tracebacks, summary) follows the line. The counts join
# the tally of tools/run-c-tests.sh. Every backend runs; the exit status is
# non-zero if one failed.
set -uo pipefail
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-python3}
mkdir -p "$BUILD/python"

# pytest's progress lines: "tests/python/test_x.py ..s.F   [ 12%]", and the
# lines a long file continues on, without the name.
progress='^([^ ]+\.py )?[.sxXFE]+ *\[ *[0-9]+%\]$'

dots() {
  local line
  while IFS= read -r line; do
    [[ $line =~ $progress ]] || continue
    if [[ ${line%[*} == *[FE]* ]]; then printf 'F'; else printf '.'; fi
  done
}

status=0
for backend in "$@"; do
  log=$BUILD/python/pytest-$backend.log
  printf '%-20s ' "test-python $backend"
  # Its own temporary directory, outside the tree: the backends may run
  # side by side.
  tmp=$(mktemp -d "${TMPDIR:-/tmp}/pf-pytest-$backend.XXXXXX")
  # The extension calls through resolved call targets: its run checks
  # every such call as PFFuncCall would (PF_CHECK_TARGETS=1, function.h),
  # so that a conversion that breaks a target caller's duties fails.
  check=0
  [[ $backend == cext ]] && check=1
  PF_CHECK_TARGETS=$check PACKEDFUNC_BACKEND=$backend "$PYTHON" -m pytest -p no:cacheprovider --tb=short --durations=20 \
    --basetemp="$tmp" tests/python \
    2>&1 | tee "$log" | dots
  rc=${PIPESTATUS[0]}
  rm -rf "$tmp"
  summary=$(tail -n 1 "$log")
  passed=$(grep -oE '[0-9]+ passed' <<<"$summary" | grep -oE '[0-9]+')
  failed=$(grep -oE '[0-9]+ (failed|errors?)' <<<"$summary" | awk '{s+=$1} END {print s+0}')
  if [[ $rc -ne 0 && $failed -eq 0 ]]; then failed=1; fi
  tools/run-c-tests.sh --add "${passed:-0}" "$failed"
  # "==== 700 passed, 3 skipped in 80.12s (0:01:20) ====" -> "700 passed, 3 skipped"
  counts=$(sed -E 's/^=+ //; s/ =+$//; s/ in [0-9.]+s( \([0-9:]+\))?$//' <<<"$summary")
  echo "  $counts"
  if [[ $rc -ne 0 ]]; then
    # Without the session header, the progress lines and the slowest
    # tests' durations (which stay in the log, to find the slow ones).
    awk -v p="$progress" 'h == 0 && /test session starts/ {h = 1; next}
                          h == 1 {if ($0 == "") h = 2; next}
                          /^=+ slowest [0-9]+ durations =+$/ {d = 1; next}
                          d == 1 && /^=/ {d = 0}
                          d == 0 && $0 !~ p' "$log"
    echo "FAIL [test-python $backend] pytest exited $rc; its output: $log"
    status=$rc
  fi
done
exit "$status"
