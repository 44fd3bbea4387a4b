#!/usr/bin/env bash
# Runs cmocka test binaries and keeps a running tally for the final summary.
#   run-c-tests.sh LABEL BINARY...   run each binary, stop on the first failure
#   run-c-tests.sh --add PASSED FAILED   add another suite's counts
#   run-c-tests.sh --summary         print "N passed, N failed" and reset
set -uo pipefail
TALLY=${PF_TALLY:-${BUILD:-build}/.tally}
mkdir -p "$(dirname "$TALLY")"

add() { echo "$1 $2" >> "$TALLY"; }

if [[ "${1:-}" == "--summary" ]]; then
  read -r p f < <(awk '{p+=$1; f+=$2} END {print p+0, f+0}' "$TALLY" 2>/dev/null || echo "0 0")
  rm -f "$TALLY"
  echo "all suites: $p passed, $f failed"
  [[ "$f" -eq 0 && "$p" -gt 0 ]]
  exit
fi
if [[ "${1:-}" == "--add" ]]; then add "$2" "$3"; exit 0; fi

label=$1; shift
status=0
for t in "$@"; do
  out=$("$t" 2>&1); rc=$?
  passed=$(grep -oE '\[  PASSED  \] [0-9]+' <<<"$out" | awk '{s+=$NF} END {print s+0}')
  failed=$(grep -oE '\[  FAILED  \] [0-9]+' <<<"$out" | awk '{s+=$NF} END {print s+0}')
  if [[ $rc -ne 0 && $failed -eq 0 ]]; then failed=1; fi
  add "$passed" "$failed"
  if [[ $rc -ne 0 ]]; then
    echo "$out"
    echo "FAIL [$label] $(basename "$t") (exit $rc)"
    status=1
  else
    echo "ok   [$label] $(basename "$t"): $passed passed"
  fi
done
exit $status
