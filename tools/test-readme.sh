#!/usr/bin/env bash
# The README's C example must be examples/quickstart.c word for word, and
# must compile and print what the README says it prints.
set -euo pipefail
extract() { # the fenced block that follows the marker line $1 in README.md
  awk -v m="$1" 'found==0 && index($0, m) {found=1; next}
                 found==1 && /^```/ {found=2; next}
                 found==2 && /^```/ {exit}
                 found==2 {print}' README.md
}
diff <(extract '<!-- example: examples/quickstart.c -->') examples/quickstart.c \
  || { echo "test-readme: README's C example differs from examples/quickstart.c"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -std=c11 -Wall -Wextra -Werror -Iinclude examples/quickstart.c "${BUILD:-build}/lib/libpackedfunc.a" \
   -lffi -ldl -lpthread -o "$tmp/quickstart"
diff <("$tmp/quickstart") <(extract '<!-- output: examples/quickstart.c -->') \
  || { echo "test-readme: examples/quickstart.c does not print what README.md shows"; exit 1; }
echo "test-readme: README's C example compiles and prints what it shows"
