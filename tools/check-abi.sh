#!/usr/bin/env bash
# The shared library's ABI, checked from the outside:
#  - it exports only PF-prefixed symbols, and each of them is a slot of the
#    stable table (PF_API_SLOTS in runtime/api.c) or on the header's list of
#    deliberate exceptions (PF_API_EXCLUDED lines in the header comment);
#  - every slot and every exception is really exported;
#  - its soname carries the major version;
#  - every core header compiles on its own, as C11 and as C++17, and the
#    registration macros compile as C++17.
# (Each slot's signature is checked by the compiler: runtime/api.c assigns
# every entry point to its typed slot, under -Werror.)
#   tools/check-abi.sh SHARED_LIBRARY SONAME
# tools/check-abi-rpc.sh sources this file for its functions only.
set -euo pipefail
status=0
fail() { echo "$check: $*"; status=1; }

# check_exports LIB SONAME PREFIX EXPECTED UNEXPECTED UNEXPORTED: LIB exports
# only PREFIX-ed symbols, exactly the sorted names of EXPECTED, and its soname
# is SONAME; sets $exported. A symbol it exports but EXPECTED lacks fails as
# "<symbol> is exported but UNEXPECTED", one it lacks as "<symbol> UNEXPORTED".
check_exports() {
  local lib=$1 soname=$2 prefix=$3 expected=$4 unexpected=$5 unexported=$6 s bad
  exported=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^$' | sort -u)
  bad=$(grep -v "^$prefix" <<<"$exported" || true)
  [ -z "$bad" ] || fail "non-$prefix symbols exported: $(echo $bad)"
  for s in $(comm -23 <(grep "^$prefix" <<<"$exported") <(echo "$expected")); do
    fail "$s is exported but $unexpected"
  done
  for s in $(comm -13 <(echo "$exported") <(echo "$expected")); do
    fail "$s $unexported"
  done
  readelf -d "$lib" | grep -q "SONAME.*\[$soname\]" || fail "soname is not $soname"
}

[ "${BASH_SOURCE[0]}" = "$0" ] || return 0
check=test-abi lib=$1 soname=$2
header=include/packedfunc/api_table.h
slots=$(sed -n 's/^ *X(\([A-Za-z0-9_]*\), *[0-9]*).*/PF\1/p' runtime/api.c | sort -u)
excluded=$(sed -n 's/.*PF_API_EXCLUDED(\(PF[A-Za-z0-9_]*\)).*/\1/p' "$header" | sort -u)
[ -n "$slots" ] || fail "no slots found in runtime/api.c"
check_exports "$lib" "$soname" PF "$(sort -u <(echo "$slots"; echo "$excluded"))" \
  "neither a PFApi slot nor listed with PF_API_EXCLUDED in $header" \
  "is a PFApi slot or exception but the library does not export it"
printf '#include <packedfunc/c_api.h>\nint main(void){return PFGetApiBase()==0;}\n' | \
  g++ -x c++ -std=c++17 -Wall -Wextra -Werror -Iinclude -fsyntax-only - \
  || fail "the header does not compile as C++"
# The registration macros work in C++ as in C (tests/modules/mod_cxx.cc is
# the working module; this is the compile check of every macro).
cat > "${TMPDIR:-/tmp}/pf_abi_macros.$$" <<'CXX'
#include <stdint.h>
#include <packedfunc/c_api.h>
namespace n {
int p(PFValue*, int*, int, PFRetValueHandle, void*) { return 0; }
int d(void*, PFValue*, int*, int, PFValue*, int*) { return 0; }
int64_t t(int64_t a, int64_t b) { return a + b; }
int pp(void*, int, PFValue, int, const PFAllocator*, PFValue*, int*, int* k) { *k = 0; return 0; }
struct S { int64_t v; };
int64_t get(PFObjectHandle) { return 0; }
}
PF_REGISTER_PACKED("abi.p", n::p);
PF_REGISTER_DIRECT("abi.d", n::d);
PF_REGISTER_DIRECT("abi.d2", n::d, "Doc.");
PF_REGISTER_PACKED("abi.p2", n::p, "doc");
PF_REGISTER_PACKED_SIG("abi.p3", n::p, "int64(a: int64 = 1)");
PF_REGISTER_TYPED("abi.t", n::t, "int64(a: int64, b: int64 = 2)");
PF_REGISTER_TYPED("abi.t2", n::t, "int64(int64,int64)", "doc");
PF_REGISTER_PREPACKED("abi.pp", n::p, "abi/fmt", n::pp);
static const PFFieldDesc k_f[] = {PF_FIELD(n::S, v, "int64", 0, nullptr)};
static const PFMethodDesc k_m[] = {PF_METHOD_TYPED("get", n::get, "int64(object)", nullptr)};
static const PFObjectTypeDesc k_d = {PF_OBJECT_TYPE_DESC_ABI, "abi.S", nullptr, sizeof(n::S), nullptr,
                                     nullptr, k_f, PF_COUNTOF(k_f), k_m, PF_COUNTOF(k_m)};
PF_REGISTER_OBJECT_TYPE(k_d);
int main() { PFModuleHandle m; return PF_MODULE_LOAD_SELF(&m); }
CXX
g++ -x c++ -std=c++17 -Wall -Wextra -Werror -Iinclude -fsyntax-only "${TMPDIR:-/tmp}/pf_abi_macros.$$" \
  || fail "the registration macros do not compile as C++17"
rm -f "${TMPDIR:-/tmp}/pf_abi_macros.$$"
# Each header of the core stands on its own, in C and in C++.
for h in include/packedfunc/*.h; do
  [ "$(basename "$h")" = rpc.h ] && continue  # checked with its library
  for lang in "c -std=c11" "c++ -std=c++17"; do
    printf '#include <packedfunc/%s>\n' "$(basename "$h")" | \
      gcc -x $lang -Wall -Wextra -Werror -Iinclude -fsyntax-only - \
      || fail "$h does not compile on its own as ${lang%% *}"
  done
done
[ $status -eq 0 ] && printf '%-20s %s\n' test-abi "$(wc -l <<<"$exported") exports, each a PFApi slot or a listed exception; soname, C++ use of the headers and macros OK"
exit $status
