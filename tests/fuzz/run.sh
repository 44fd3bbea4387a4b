#!/usr/bin/env bash
# Runs libFuzzer targets built by the Makefile's hardening section.
#   tests/fuzz/run.sh BUILD explore SECONDS NAME...   open-ended (make fuzz)
#   tests/fuzz/run.sh BUILD replay RUNS SEED NAME...  deterministic (make fuzz-short)
# Each target is $BUILD/fuzz/bin/fuzz_NAME, with its committed seeds in
# tests/fuzz/corpus/NAME.
#   explore  runs for SECONDS from the seeds and random seeds; the inputs it
#            finds accumulate in $BUILD/fuzz/work/NAME, crashes go to
#            $BUILD/fuzz/artifacts/NAME-*. What it finds becomes a seed and
#            a regression test (tests/fuzz/README.md).
#   replay   runs every committed seed once, then exactly RUNS inputs mutated
#            from them with libFuzzer's -seed=SEED, in one process and with
#            no time limit: the same inputs on every run of the same build,
#            so that a test command that passed once passes again.
# Stops at the first failure. Prints one line as it runs: a dot per target,
# then the inputs each ran (make's target name, fuzz or fuzz-short, heads
# it); a failing target's log's tail follows.
set -uo pipefail
build=$1 mode=$2
case "$mode" in
  explore) seconds=$3; shift 3; label=fuzz ;;
  replay) runs=$3 seed=$4; shift 4; label=fuzz-short ;;
  *) echo "run.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac
mkdir -p "$build/fuzz/artifacts"
printf '%-20s ' "$label"
counts=()
for name in "$@"; do
  bin="$build/fuzz/bin/fuzz_$name" seeds="tests/fuzz/corpus/$name" log="$build/fuzz/$name.log"
  # -timeout: one input taking 10 s is a finding (a hang), not a slow run.
  common=(-timeout=10 -rss_limit_mb=2048 -print_final_stats=1
          "-artifact_prefix=$build/fuzz/artifacts/$name-")
  if [[ $mode == explore ]]; then
    dir="$build/fuzz/work/$name"
    mkdir -p "$dir"
    "$bin" "${common[@]}" -max_total_time="$seconds" "$dir" "$seeds" >"$log" 2>&1
  else
    # The scratch corpus starts empty, so what a run mutates from is the
    # committed seeds alone.
    dir="$build/fuzz/replay/$name"
    rm -rf "$dir" && mkdir -p "$dir"
    { "$bin" "${common[@]}" "$seeds"/* &&
      "$bin" "${common[@]}" -seed="$seed" -runs="$runs" "$dir" "$seeds"; } >"$log" 2>&1
  fi
  if [[ $? -eq 0 ]]; then
    ran=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | tail -n 1 | grep -oE '[0-9]+$')
    counts+=("$name ${ran:-?}")
    printf '.'
  else
    printf 'F\n'
    tail -n 60 "$log"
    echo "FAIL [$label] $name: see $log and $build/fuzz/artifacts/"
    exit 1
  fi
done
joined=$(printf '%s, ' "${counts[@]}")
if [[ $mode == explore ]]; then
  echo "  $# targets, ${seconds}s each, inputs run: ${joined%, }"
else
  echo "  $# targets, seeds and $runs inputs of seed $seed each, inputs run: ${joined%, }"
fi
