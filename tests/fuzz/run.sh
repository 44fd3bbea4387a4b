#!/usr/bin/env bash
# Runs libFuzzer targets built by the Makefile's hardening section.
#   tests/fuzz/run.sh BUILD SECONDS SCRATCH NAME...
# Each target $BUILD/fuzz/bin/fuzz_NAME runs for SECONDS from its committed
# seeds in tests/fuzz/corpus/NAME. libFuzzer writes the inputs it finds to
# the first corpus directory, so that is a scratch one,
# $BUILD/fuzz/SCRATCH/NAME ("short" is emptied first, "work" accumulates);
# crashes go to $BUILD/fuzz/artifacts/NAME-*. Stops at the first failure.
# Prints one line as it runs: a dot per target, then the inputs each ran
# (make's target name, fuzz or fuzz-short, heads it); a failing target's
# log's tail follows.
set -uo pipefail
build=$1 seconds=$2 scratch=$3
shift 3
mkdir -p "$build/fuzz/artifacts"
label=fuzz; [[ "$scratch" == short ]] && label=fuzz-short
printf '%-20s ' "$label"
counts=()
for name in "$@"; do
  dir="$build/fuzz/$scratch/$name"
  [[ "$scratch" == short ]] && rm -rf "$dir"
  mkdir -p "$dir"
  log="$build/fuzz/$name.log"
  # -timeout: one input taking 10 s is a finding (a hang), not a slow run.
  if "$build/fuzz/bin/fuzz_$name" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -print_final_stats=1 -artifact_prefix="$build/fuzz/artifacts/$name-" \
       "$dir" "tests/fuzz/corpus/$name" >"$log" 2>&1; then
    runs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$')
    counts+=("$name ${runs:-?}")
    printf '.'
  else
    printf 'F\n'
    tail -n 60 "$log"
    echo "FAIL [$label] $name: see $log and $build/fuzz/artifacts/"
    exit 1
  fi
done
joined=$(printf '%s, ' "${counts[@]}")
echo "  $# targets, ${seconds}s each, inputs run: ${joined%, }"
