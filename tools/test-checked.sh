#!/usr/bin/env bash
# Checked registrations (include/packedfunc/checked.h) refuse, at compile
# time, a C function whose prototype is not the one its declared signature
# describes. tests/checked/mismatch.c holds one mismatch per case
# (CASE_NAME); under gcc and under clang, each case must fail to compile
# with a diagnostic that carries the registration's file:line (the line of
# the macro's name) and the assertion naming the function that the line
# marks `expect: FN`, or, for a line marked `unknown: NAME` (a type name
# outside the table), "unknown type name 'PFSignatureArg_NAME'"; CASE_ok,
# the right prototypes, must compile under -Werror. In C++ they are refused.
#   tools/test-checked.sh [COMPILER...]    (default: gcc clang)
set -uo pipefail
src=tests/checked/mismatch.c
compilers=("$@")
[ ${#compilers[@]} -gt 0 ] || compilers=(gcc clang)
flags=(-std=c11 -Wall -Wextra -Werror -Wstrict-prototypes -Wmissing-prototypes -Iinclude -fsyntax-only)
status=0 refused=0
fail() { echo "test-checked: $*" | head -n 20; status=1; }
cases=$(sed -n 's/^#\(el\)\{0,1\}if defined(CASE_\([a-z0-9_]*\)).*/\2/p' "$src")
[ -n "$cases" ] || { fail "no cases in $src"; exit 1; }
for cc in "${compilers[@]}"; do
  for c in $cases; do
    out=$("$cc" "${flags[@]}" -DCASE_"$c" "$src" 2>&1)
    rc=$?
    if [ "$c" = ok ]; then
      [ $rc -eq 0 ] || fail "$cc: CASE_ok does not compile:"$'\n'"$out"
      continue
    fi
    # The marked line, and the line above it (or itself) where the macro is named.
    mark=$(awk -v c="CASE_$c" 'index($0, "defined(" c ")") {f=1}
                               f && /(expect|unknown): / {print NR; exit}' "$src")
    what=$(sed -n "${mark}s/.*\(expect\|unknown\): \([A-Za-z0-9_]*\).*/\1 \2/p" "$src")
    name=${what#* }
    case $what in
      expect*) want="CHECKED: the C prototype of $name is not the one that signature" ;;
      *) want="unknown type name .PFSignatureArg_${name}[^A-Za-z0-9_]" ;;
    esac
    line=$(awk -v m="$mark" 'NR <= m && /_CHECKED\(/ {l=NR} NR == m {print l; exit}' "$src")
    if [ $rc -eq 0 ]; then
      fail "$cc: CASE_$c compiles, but its registration is wrong ($what)"
    elif ! grep -q "mismatch\.c:$line:" <<<"$out"; then
      fail "$cc: CASE_$c: no diagnostic points at $src:$line:"$'\n'"$out"
    elif ! grep -q "$want" <<<"$out"; then
      fail "$cc: CASE_$c: no diagnostic says \"$want\":"$'\n'"$out"
    else
      refused=$((refused + 1))
    fi
  done
done
# C++ deduces signatures from types: there the checked forms are refused
# with a message, never compiled unchecked.
cxx_out=$(printf '#include <packedfunc/c_api.h>\nstatic int64_t f(int64_t a) { return a; }\n%s\n' \
  'PF_REGISTER_CHECKED("t.f", f, PF_RET(int64), PF_ARG(int64, a));' |
  g++ -x c++ -std=c++17 -Iinclude -fsyntax-only - 2>&1)
grep -q "PF_REGISTER_CHECKED is for C" <<<"$cxx_out" || fail "g++ does not refuse PF_REGISTER_CHECKED:"$'\n'"$cxx_out"
[ $status -eq 0 ] && printf '%-20s %s\n' test-checked \
  "$refused wrong registrations refused at their line by ${compilers[*]}; the right ones compile; C++ refused"
exit $status
