#!/usr/bin/env bash
# Installs packedfunc into a scratch prefix and builds a program outside the
# tree against it with nothing but pkg-config, shared and static.
set -euo pipefail
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
make --no-print-directory -s install PREFIX="$root/prefix" >/dev/null
export PKG_CONFIG_PATH="$root/prefix/lib/pkgconfig"
cp examples/quickstart.c "$root/main.c"
cd "$root"
cc -std=c11 -Wall -Werror main.c $(pkg-config --cflags --libs packedfunc) -o shared_demo
LD_LIBRARY_PATH="$root/prefix/lib" ./shared_demo >/dev/null
readelf -d shared_demo | grep -q 'NEEDED.*libpackedfunc.so.0' || { echo "test-install: not linked to libpackedfunc.so.0"; exit 1; }
# With an rpath to the prefix (README, docs/building.md), it runs as it is.
cc -std=c11 -Wall -Werror main.c $(pkg-config --cflags --libs packedfunc) \
   -Wl,-rpath,"$(pkg-config --variable=libdir packedfunc)" -o rpath_demo
env -u LD_LIBRARY_PATH ./rpath_demo >/dev/null || { echo "test-install: the rpath build does not run"; exit 1; }
cc -std=c11 -Wall -Werror main.c $(pkg-config --cflags packedfunc) \
   "$root/prefix/lib/libpackedfunc.a" $(pkg-config --libs-only-l --static packedfunc | sed 's/-lpackedfunc//') -o static_demo
./static_demo >/dev/null
"$root/prefix/bin/pf" list >/dev/null || { echo "test-install: the installed pf does not run"; exit 1; }
# libpackedfunc_rpc: its own pkg-config file, which requires packedfunc's.
cat > rpc_main.c <<'C'
#include <packedfunc/rpc.h>
#include <stdio.h>
int main(void) {
  PFRPCServerHandle s = NULL;
  const char* ep = NULL;
  if (PFRPCServe("tcp://127.0.0.1:*", NULL, &s) != 0 || PFRPCServerGetEndpoint(s, &ep) != 0) {
    fprintf(stderr, "%s\n", PFGetLastError());
    return 1;
  }
  return PFRPCServerStop(s);
}
C
cc -std=c11 -Wall -Werror rpc_main.c $(pkg-config --cflags --libs packedfunc-rpc) -o rpc_demo
LD_LIBRARY_PATH="$root/prefix/lib" ./rpc_demo || { echo "test-install: the rpc program does not run"; exit 1; }
readelf -d rpc_demo | grep -q 'NEEDED.*libpackedfunc_rpc.so.0' || { echo "test-install: not linked to libpackedfunc_rpc.so.0"; exit 1; }
# The installed pf finds the installed libpackedfunc_rpc (nothing listens
# on port 1: the connection error shows that the library loaded).
out=$("$root/prefix/bin/pf" --connect tcp://127.0.0.1:1 --timeout 100 list 2>&1 || true)
grep -q 'ConnectionError' <<<"$out" || { echo "test-install: pf --connect: $out"; exit 1; }
printf '%-20s %s\n' test-install "pkg-config builds against the installed shared (with an rpath) and static library, and libpackedfunc_rpc, OK"
