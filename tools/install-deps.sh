#!/usr/bin/env bash
# Makes sure the Debian packages that packedfunc needs are installed.
#   tools/install-deps.sh [--check] GROUP...
# GROUP is one of the lists below (default: all of them). As root it installs
# what is missing; otherwise it prints the exact apt-get line and fails. With
# --check it only reports. It prints nothing when every package is there;
# when it installs, one line that names the packages, and apt's output goes
# to $BUILD/install-deps.log (build/ by default), printed if apt fails.
set -euo pipefail

declare -A GROUPS_=(
  # The library, the pf command and the plugins.
  [build]="gcc make binutils pkg-config libffi-dev uthash-dev libdlpack-dev libxxhash-dev
           libzmq3-dev libmsgpack-dev"
  # The Python binding (python3-dev: the headers of its compiled fast path),
  # the demo, and its wheel (make wheel: pip, setuptools and wheel build it,
  # patchelf makes it self-contained).
  [python]="python3 python3-numpy python3-dev python3-pip python3-setuptools python3-wheel
            patchelf"
  # Every test: C (cmocka, sanitizers, the fuzzers' clang, which with g++ also
  # builds the C++ layer's tests (clang++, mk/cpp.mk), valgrind, the ABI
  # check's g++, the layout check's clang-format) and Python (pytest, hypothesis, a venv for the install test,
  # mypy for the generated stubs).
  [test]="g++ libcmocka-dev clang libclang-rt-14-dev clang-format-14 valgrind python3-pytest
          python3-hypothesis python3-venv python3-setuptools python3-pip python3-mypy"
  # The benchmarks: callgrind counts and the chart.
  [bench]="valgrind python3-matplotlib"
)

check_only=0
if [[ "${1:-}" == "--check" ]]; then check_only=1; shift; fi
groups=("$@")
[[ ${#groups[@]} -gt 0 ]] || groups=(build python test bench)

missing=()
for g in "${groups[@]}"; do
  [[ -n "${GROUPS_[$g]:-}" ]] || { echo "install-deps: unknown group '$g'" >&2; exit 2; }
  for p in ${GROUPS_[$g]}; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [[ "$status" != *"install ok installed"* && " ${missing[*]-} " != *" $p "* ]]; then
      missing+=("$p")
    fi
  done
done

[[ ${#missing[@]} -eq 0 ]] && exit 0

line="apt-get install -y ${missing[*]}"
if [[ $check_only -eq 1 ]]; then
  echo "packedfunc: missing Debian packages: ${missing[*]}" >&2
  echo "packedfunc: install them with: $line" >&2
  exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "packedfunc: missing Debian packages: ${missing[*]}" >&2
  echo "packedfunc: run as root: apt-get update && $line" >&2
  exit 1
fi
log=${BUILD:-build}/install-deps.log
mkdir -p "$(dirname "$log")"
echo "packedfunc: installing ${missing[*]} (apt's output: $log)"
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get update && apt-get install -y --no-install-recommends "${missing[@]}"; } \
     >"$log" 2>&1 </dev/null; then
  cat "$log" >&2
  echo "packedfunc: apt-get failed installing ${missing[*]} (its output above, and in $log)" >&2
  exit 1
fi
