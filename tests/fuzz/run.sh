#!/usr/bin/env bash
# Runs libFuzzer targets built by the Makefile's hardening section.
#   tests/fuzz/run.sh BUILD SECONDS SCRATCH NAME...
# Each target $BUILD/fuzz/bin/fuzz_NAME runs for SECONDS from its committed
# seeds in tests/fuzz/corpus/NAME. libFuzzer writes the inputs it finds to
# the first corpus directory, so that is a scratch one,
# $BUILD/fuzz/SCRATCH/NAME ("short" is emptied first, "work" accumulates);
# crashes go to $BUILD/fuzz/artifacts/NAME-*. Stops at the first failure.
set -uo pipefail
build=$1 seconds=$2 scratch=$3
shift 3
mkdir -p "$build/fuzz/artifacts"
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
    echo "ok   [fuzz] $name: ${runs:-?} inputs in ${seconds}s"
  else
    tail -n 60 "$log"
    echo "FAIL [fuzz] $name: see $log and $build/fuzz/artifacts/"
    exit 1
  fi
done
