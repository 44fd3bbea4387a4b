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
cc -std=c11 -Wall -Werror main.c $(pkg-config --cflags packedfunc) \
   "$root/prefix/lib/libpackedfunc.a" $(pkg-config --libs-only-l --static packedfunc | sed 's/-lpackedfunc//') -o static_demo
./static_demo >/dev/null
"$root/prefix/bin/pf" list >/dev/null || { echo "test-install: the installed pf does not run"; exit 1; }
echo "test-install: pkg-config build against the installed shared and static library OK"
