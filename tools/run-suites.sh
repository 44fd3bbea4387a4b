#!/usr/bin/env bash
# Runs make test's suites side by side (mk/tests.mk, after it built what
# they need):
#   tools/run-suites.sh JOBS SUITE...
# Each SUITE runs as `$MAKE SUITE` (V=$V), at most JOBS at a time, in the
# order given; its output goes to $BUILD/suites/SUITE.log. The logs are
# printed whole and in the order given, each as soon as it and those before
# it are done, its last line followed by the suite's time, so the output
# reads as if the suites ran one after the other. Beside each log,
# SUITE.time holds its wall time and SUITE.cpu its CPU time, in seconds. After a suite fails no
# other starts; those running finish and are printed, then a line says
# which failed, and the exit status is non-zero.
set -uo pipefail
jobs=$1
shift
suites=("$@")
BUILD=${BUILD:-build}
MAKE=${MAKE:-make}
dir=$BUILD/suites
rm -rf "$dir" && mkdir -p "$dir"

# One suite, in the background: its log, then its exit status and time.
start_suite() {
  local s=$1
  (
    begin=$SECONDS
    $MAKE --no-print-directory "V=${V:-0}" "$s" >"$dir/$s.log" 2>&1
    rc=$?
    echo "$((SECONDS - begin))" >"$dir/$s.time"
    # Its CPU time (user + sys of every process it ran), which machine load
    # does not stretch: where the test command's time goes.
    times >"$dir/$s.cpu"  # (in a pipe it would count a new subshell's)
    awk 'NR == 2 {printf "%.0f\n", cpu($1) + cpu($2)}
         function cpu(t) {split(t, a, /[ms]/); return a[1] * 60 + a[2]}' "$dir/$s.cpu" >"$dir/$s.cpu.tmp"
    mv -f "$dir/$s.cpu.tmp" "$dir/$s.cpu"
    echo "$rc" >"$dir/$s.rc"
  ) &
}

# Prints the logs of the suites that are done, in order, up to the first
# that is not.
printed=0
print_done() {
  local s log
  while ((printed < ${#suites[@]})); do
    s=${suites[$printed]} log=$dir/${suites[$printed]}.log
    [[ -f $dir/$s.rc ]] || return 0
    if [[ -s $log ]]; then
      head -n -1 "$log"
      printf '%s  [%ss]\n' "$(tail -n 1 "$log")" "$(cat "$dir/$s.time")"
    else
      printf '%-20s (no output)  [%ss]\n' "$s" "$(cat "$dir/$s.time")"
    fi
    printed=$((printed + 1))
  done
}

begin=$SECONDS
next=0 running=0 failed=()
while :; do
  while ((running < jobs && next < ${#suites[@]} && ${#failed[@]} == 0)); do
    start_suite "${suites[$next]}"
    next=$((next + 1)) running=$((running + 1))
  done
  ((running > 0)) || break
  wait -n
  running=$((running - 1))
  failed=()
  for s in "${suites[@]:0:next}"; do
    [[ -f $dir/$s.rc && $(cat "$dir/$s.rc") != 0 ]] && failed+=("$s")
  done
  print_done
done
if ((${#failed[@]} > 0)); then
  echo "make test: ${failed[*]} failed (logs in $dir); $((${#suites[@]} - next)) suites not run"
  exit 1
fi
cpu=0
for s in "${suites[@]}"; do cpu=$((cpu + $(cat "$dir/$s.cpu"))); done
echo "make test: ${#suites[@]} suites, $jobs at a time, in $((SECONDS - begin))s (CPU ${cpu}s)"
