#!/usr/bin/env bash
# Builds the wheel that `pip install` puts into any venv (make wheel).
#   tools/build-wheel.sh PF_PROGRAM
# After `make python`: stages a copy of bindings/python under
# $BUILD/wheel/stage, adds the pf program (packedfunc/bin/pf), makes the
# copy self-contained (tools/bundle-libs.sh: every non-glibc library it
# loads is copied in, found through $ORIGIN), and builds the wheel from it
# with $PYTHON's pip and setuptools (Debian's python3-pip, python3-wheel):
# offline, with no build isolation. setup.py compiles packedfunc._cext for
# $PYTHON, which decides the wheel's tags (docs/building.md). The wheel is
# left alone in $BUILD/wheel/dist.
set -euo pipefail
pf_program=$1
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-python3}
stage=$BUILD/wheel/stage
rm -rf "$stage" "$BUILD/wheel/dist"
mkdir -p "$stage"
# The package as `make python` left it, without what an earlier build
# or run wrote (the extension is compiled again, for $PYTHON).
tar -C bindings/python --exclude=./build --exclude='*.egg-info' --exclude=__pycache__ \
    --exclude='_cext*.so' -cf - . | tar -C "$stage" -xf -
install -D -m 755 "$pf_program" "$stage/packedfunc/bin/pf"
tools/bundle-libs.sh "$stage/packedfunc"
PACKEDFUNC_INCLUDE=$PWD/$stage/packedfunc/include \
  "$PYTHON" -m pip wheel --no-deps --no-build-isolation --no-index --quiet \
  -w "$BUILD/wheel/dist" "$stage" >"$BUILD/wheel/pip.log" 2>&1 ||
  { cat "$BUILD/wheel/pip.log" >&2; echo "build-wheel: pip wheel failed" >&2; exit 1; }
