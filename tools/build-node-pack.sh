#!/usr/bin/env bash
# Builds the npm tarball that `npm install` puts into any project (make
# node-pack).
#   tools/build-node-pack.sh LIBRARY HELPER VERSION
# Stages a copy of bindings/node under $BUILD/node/pack/stage without its
# tests, sources and dependencies, puts this build's LIBRARY (as its
# soname, libpackedfunc.so.0) and HELPER (libpfnode.so) into its
# lib/native, makes them self-contained (tools/bundle-libs.sh: every
# non-glibc library they load is copied into lib/native/_libs, and all of
# them find each other through $ORIGIN), writes the processor the
# libraries were built for into the staged package.json's "cpu" (its "os"
# is in the source's), and packs it with npm: package.json's "files" says
# what goes in. The tarball, packedfunc-VERSION.tgz, is left alone in
# $BUILD/node/pack/dist; VERSION, the library's, must be the package's.
set -euo pipefail
library=$1 helper=$2 version=$3
BUILD=${BUILD:-build}
NODE=${NODE:-node}
NPM=${NPM:-npm}
stage=$BUILD/node/pack/stage
dist=$BUILD/node/pack/dist
fail() { echo "build-node-pack: $*" >&2; exit 1; }

own=$("$NODE" -p "require('./bindings/node/package.json').version")
[[ $own == "$version" ]] ||
  fail "bindings/node/package.json has version $own, but the library is $version: make them agree"

rm -rf "$stage" "$dist"
mkdir -p "$stage" "$dist"
tar -C bindings/node --exclude=./node_modules --exclude=./lib/native --exclude=./test \
    --exclude=./test-support --exclude=./src -cf - . | tar -C "$stage" -xf -
install -D -m 755 "$library" "$stage/lib/native/libpackedfunc.so.0"
install -D -m 755 "$helper" "$stage/lib/native/libpfnode.so"
tools/bundle-libs.sh "$stage/lib/native"

# The installed package needs neither the tools that test it nor the
# guard that keeps an unbundled tree from being packed.
"$NODE" -e '
  const fs = require("node:fs");
  const file = process.argv[1];
  const pkg = JSON.parse(fs.readFileSync(file, "utf8"));
  delete pkg.devDependencies;
  delete pkg.scripts;
  pkg.cpu = [process.arch];
  fs.writeFileSync(file, JSON.stringify(pkg, null, 2) + "\n");
' "$stage/package.json"

"$NPM" pack --ignore-scripts --silent --pack-destination "$dist" "./$stage" >"$BUILD/node/pack/npm.log" 2>&1 ||
  { cat "$BUILD/node/pack/npm.log" >&2; fail "npm pack failed"; }
[[ -f $dist/packedfunc-$version.tgz ]] || fail "npm pack made no $dist/packedfunc-$version.tgz"
