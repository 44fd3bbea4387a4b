#!/usr/bin/env bash
# The shared library's ABI, checked from the outside:
#  - it exports only PF-prefixed symbols, and each of them is a slot of the
#    stable table (PF_API_SLOTS in runtime/api.c) or on the header's list of
#    deliberate exceptions (PF_API_EXCLUDED lines in the header comment);
#  - every slot and every exception is really exported;
#  - its soname carries the major version;
#  - every core header compiles on its own, as C11 and as C++17.
# (Each slot's signature is checked by the compiler: runtime/api.c assigns
# every entry point to its typed slot, under -Werror.)
#   tools/check-abi.sh SHARED_LIBRARY SONAME
set -euo pipefail
lib=$1 soname=$2
header=include/packedfunc/api_table.h
status=0
fail() { echo "test-abi: $*"; status=1; }

exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^$' | sort -u)
slots=$(sed -n 's/^ *X(\([A-Za-z0-9_]*\), *[0-9]*).*/PF\1/p' runtime/api.c | sort -u)
excluded=$(sed -n 's/.*PF_API_EXCLUDED(\(PF[A-Za-z0-9_]*\)).*/\1/p' "$header" | sort -u)
[ -n "$slots" ] || fail "no slots found in runtime/api.c"

bad=$(grep -v '^PF' <<<"$exported" || true)
[ -z "$bad" ] || fail "non-PF symbols exported: $(echo $bad)"
for s in $(comm -23 <(grep '^PF' <<<"$exported") <(sort -u <(echo "$slots"; echo "$excluded"))); do
  fail "$s is exported but neither a PFApi slot nor listed with PF_API_EXCLUDED in $header"
done
for s in $(comm -13 <(echo "$exported") <(sort -u <(echo "$slots"; echo "$excluded"))); do
  fail "$s is a PFApi slot or exception but the library does not export it"
done

readelf -d "$lib" | grep -q "SONAME.*\[$soname\]" || fail "soname is not $soname"
printf '#include <packedfunc/c_api.h>\nint main(void){return PFGetApiBase()==0;}\n' | \
  g++ -x c++ -std=c++17 -Wall -Wextra -Werror -Iinclude -fsyntax-only - \
  || fail "the header does not compile as C++"
# Each header of the core stands on its own, in C and in C++.
for h in include/packedfunc/*.h; do
  [ "$(basename "$h")" = rpc.h ] && continue  # checked with its library
  for lang in "c -std=c11" "c++ -std=c++17"; do
    printf '#include <packedfunc/%s>\n' "$(basename "$h")" | \
      gcc -x $lang -Wall -Wextra -Werror -Iinclude -fsyntax-only - \
      || fail "$h does not compile on its own as ${lang%% *}"
  done
done
[ $status -eq 0 ] && printf '%-20s %s\n' test-abi "$(wc -l <<<"$exported") exports, each a PFApi slot or a listed exception; soname and C++ use of the header OK"
exit $status
