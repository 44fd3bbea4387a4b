#!/usr/bin/env bash
# Registrations that the C++ layer must refuse at compile time: each file of
# tests/cpp/compile_fail must FAIL to compile, under every compiler given,
# with the message its "// expect:" line names, and the compiler's output
# must point at the line marked "// registration" (g++'s "required from
# here", clang++'s "requested here").
#   tools/test-cxx-compile-fail.sh CXX...
# Counts join make test's tally (run-c-tests.sh --add).
set -uo pipefail
passed=0 failed=0
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf 'test-cxx-compile-fail '
for cxx in "$@"; do
  for src in tests/cpp/compile_fail/*.cc; do
    want=$(sed -n 's|^// expect: ||p' "$src")
    line=$(grep -n '// registration' "$src" | cut -d: -f1)
    why=""
    if "$cxx" -std=c++17 -fsyntax-only -Wall -Wextra -Werror -Iinclude "$src" >"$tmp/out" 2>&1; then
      why="it compiled"
    elif ! grep -qF "$want" "$tmp/out"; then
      why="no \"$want\" in the compiler's output"
    elif ! grep -qE "^$src:$line:[0-9]+: +(required from here|note: in instantiation of .* requested here)" \
           "$tmp/out"; then
      why="the output does not point at $src:$line"
    fi
    if [[ -z "$why" ]]; then
      passed=$((passed + 1)); printf '.'
    else
      failed=$((failed + 1)); printf 'F\n%s\nFAIL [%s] %s: %s\n' "$(head -40 "$tmp/out")" "$cxx" "$src" "$why"
    fi
  done
done
printf ' %d passed, %d failed\n' "$passed" "$failed"
tools/run-c-tests.sh --add "$passed" "$failed"
[[ $failed -eq 0 ]]
