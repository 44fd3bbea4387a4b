#!/usr/bin/env bash
# Runs cmocka test binaries and keeps a running tally for the final summary.
#   run-c-tests.sh LABEL BINARY...      run every binary; fail if any failed
#   run-c-tests.sh --valgrind LABEL BINARY...
#                                       the same, each under $VALGRIND (its
#                                       command and options); no counts, the
#                                       tests are the ones the C suite counted
# PF_TEST_JOBS=N runs N binaries at a time.
#   run-c-tests.sh --add PASSED FAILED  add another suite's counts
#   run-c-tests.sh --summary            print "all suites: N passed, N failed" and reset
# A suite prints one line as it runs: LABEL, a dot for each binary that
# passes, then its counts. A binary that fails ends the line with F; its
# output follows, then "FAIL [LABEL] NAME", and the dots go on under a new
# LABEL line.
set -uo pipefail
TALLY=${PF_TALLY:-${BUILD:-build}/.tally}
mkdir -p "$(dirname "$TALLY")"

add() { echo "$1 $2" >> "$TALLY"; }
count() { if [[ $1 -eq 1 ]]; then echo "$1 $2"; else echo "$1 ${2}s"; fi; }

if [[ "${1:-}" == "--summary" ]]; then
  read -r p f < <(awk '{p+=$1; f+=$2} END {print p+0, f+0}' "$TALLY" 2>/dev/null || echo "0 0")
  rm -f "$TALLY"
  echo "all suites: $p passed, $f failed"
  [[ "$f" -eq 0 && "$p" -gt 0 ]]
  exit
fi
if [[ "${1:-}" == "--add" ]]; then add "$2" "$3"; exit 0; fi

under_valgrind=0
if [[ "${1:-}" == "--valgrind" ]]; then under_valgrind=1; shift; fi
label=$1; shift
jobs=${PF_TEST_JOBS:-1}

# Runs one binary: its output in NAME.out, its exit status in NAME.rc, its
# time in NAME.time (which programs are the slow ones).
run_one() {
  local t=$1 begin=$SECONDS
  if [[ $under_valgrind -eq 1 ]]; then
    # valgrind's output goes to one log per process (the tests fork); any
    # error, or a definite or indirect leak, is a non-zero exit.
    rm -f "$t".valgrind.*.log
    # shellcheck disable=SC2086  # $VALGRIND is a command line
    $VALGRIND --log-file="$t.valgrind.%p.log" "$t" >"$t.out" 2>&1
  else
    "$t" >"$t.out" 2>&1
  fi
  echo $? >"$t.rc"
  echo $((SECONDS - begin)) >"$t.time"
}

# With PF_TEST_JOBS=N the binaries run N at a time first, and are reported
# in order afterwards; otherwise each is reported as it ends.
if [[ $jobs -gt 1 ]]; then
  export -f run_one
  export under_valgrind VALGRIND
  printf '%s\0' "$@" | xargs -0 -n 1 -P "$jobs" bash -c 'run_one "$1"' _
fi
status=0 ok=0 bad=0 total_passed=0 total_failed=0
printf '%-20s ' "$label"
for t in "$@"; do
  [[ $jobs -gt 1 ]] || run_one "$t"
  rc=$(cat "$t.rc")
  if [[ $under_valgrind -eq 1 ]]; then
    if [[ $rc -eq 0 ]]; then rm -f "$t".valgrind.*.log
    else out=$(tail -n 30 "$t.out"; cat "$t".valgrind.*.log | tail -n 50); fi
  else
    out=$(cat "$t.out")
    passed=$(grep -oE '\[  PASSED  \] [0-9]+' <<<"$out" | awk '{s+=$NF} END {print s+0}')
    failed=$(grep -oE '\[  FAILED  \] [0-9]+' <<<"$out" | awk '{s+=$NF} END {print s+0}')
    if [[ $rc -ne 0 && $failed -eq 0 ]]; then failed=1; fi
    add "$passed" "$failed"
    total_passed=$((total_passed + passed)) total_failed=$((total_failed + failed))
  fi
  if [[ $rc -ne 0 ]]; then
    printf 'F\n'
    echo "$out"
    echo "FAIL [$label] $(basename "$t") (exit $rc)"
    printf '%-20s ' "$label"
    status=1 bad=$((bad + 1))
  else
    printf '.'
    ok=$((ok + 1))
  fi
done
if [[ $under_valgrind -eq 1 ]]; then
  counts="$(count $ok program) without errors or leaks"
  [[ $bad -eq 0 ]] || counts+="; FAILED: $(count $bad program)"
else
  counts="$(count $ok program), $(count $total_passed test) passed"
  [[ $bad -eq 0 ]] || counts+="; FAILED: $(count $bad program), $(count $total_failed test)"
fi
echo "  $counts"
exit $status
