#!/usr/bin/env bash
# Every C and C++ source and header that git tracks is as clang-format
# (.clang-format at the root) writes it. Prints one line; on a failure, the
# files that differ and how to fix them.
#   tools/check-format.sh          check (part of make test)
#   tools/check-format.sh --fix    rewrite the files in place
set -uo pipefail
CLANG_FORMAT=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format)}
mapfile -t files < <(git ls-files '*.c' '*.h' '*.cc' '*.hpp' 2>/dev/null)
if [ ${#files[@]} -eq 0 ]; then  # not a git checkout: the source tree's files
  mapfile -t files < <(find include runtime registry rpc tools bindings examples tests bench \
                       -name '*.[ch]' -o -name '*.cc' | sort)
fi
if [ "${1:-}" = --fix ]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  exit $?
fi
printf '%-20s ' test-format
bad=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -ne 0 ]; then
  echo "${#bad[@]} of ${#files[@]} files differ from .clang-format's layout:"
  printf '  %s\n' "${bad[@]}"
  echo "  (tools/check-format.sh --fix rewrites them)"
  tools/run-c-tests.sh --add 0 1
  exit 1
fi
tools/run-c-tests.sh --add 1 0
echo "${#files[@]} C and C++ files as .clang-format writes them"
