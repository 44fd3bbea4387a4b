#!/usr/bin/env bash
# libpackedfunc_rpc's ABI, checked from the outside (the sibling of
# tools/check-abi.sh, which checks the core):
#  - it exports only PFRPC-prefixed symbols, and each is declared in
#    include/packedfunc/rpc.h; every entry point declared there is exported;
#  - its soname carries the major version, and it needs the core's soname;
#  - the header compiles as C++.
#   tools/check-abi-rpc.sh SHARED_LIBRARY SONAME
set -euo pipefail
source "$(dirname "$0")/check-abi.sh"  # fail, check_exports
check=test-rpc-abi lib=$1 soname=$2
header=include/packedfunc/rpc.h
declared=$(sed -n 's/^PF_EXPORT [^(]*[ *]\(PFRPC[A-Za-z0-9_]*\)(.*/\1/p' "$header" | sort -u)
[ -n "$declared" ] || fail "no entry points found in $header"
check_exports "$lib" "$soname" PFRPC "$declared" "not declared in $header" \
  "is declared in $header but not exported"
readelf -d "$lib" | grep -q 'NEEDED.*\[libpackedfunc.so.0\]' || fail "does not need libpackedfunc.so.0"
printf '#include <packedfunc/rpc.h>\nint main(void){return PFRPCServerStop(0);}\n' | \
  g++ -x c++ -std=c++11 -Wall -Wextra -Werror -Iinclude -fsyntax-only - \
  || fail "the header does not compile as C++"
[ $status -eq 0 ] && printf '%-20s %s\n' test-rpc-abi "$(wc -l <<<"$exported") exports, each a PFRPC entry point of $header; soname and C++ use of the header OK"
exit $status
