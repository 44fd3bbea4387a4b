#!/usr/bin/env python3
"""Speed of the Python binding against raw ctypes, measured in one run.

  1. f(1, 2) of a registered packed C function (testing.add) against a raw
     ctypes call of a plain C `int64_t add(int64_t, int64_t)` with argtypes
     and restype set.               target: ratio <= 1.5
  2. a Python callback called from C through PFFuncCall (testing.call_n
     calls f(i, i) in a C loop) against a raw ctypes CFUNCTYPE callback
     called from a C loop (pft_call_raw_n).   target: ratio <= 3

Each measurement is the median of interleaved trials (A, B, A, B, ...), so
that drifting machine load hits both sides alike. Needs the C test library
from `make test-python` (or `make BUILD=... $(BUILD)/python/libpf_testlib.so`).

    /usr/bin/python3 bench/bench_python.py [--trials N] [--quick]
"""
import argparse
import ctypes
import os
import statistics
import sys
import time

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

import packedfunc as pf  # noqa: E402


def load_testlib():
    path = os.environ.get("PF_TESTLIB") or os.path.join(
        ROOT, os.environ.get("BUILD", "build"), "python", "libpf_testlib.so")
    if not os.path.exists(path):
        sys.exit("bench_python: %s is missing; run `make test-python` first" % path)
    lib = ctypes.CDLL(path)
    if lib.pft_init() != 0:
        sys.exit("bench_python: pft_init failed")
    return lib


def per_call_ns(fn, loops):
    start = time.perf_counter()
    fn(loops)
    return (time.perf_counter() - start) / loops * 1e9


def interleaved(a, b, loops, trials):
    ta, tb = [], []
    for _ in range(trials):
        ta.append(per_call_ns(a, loops))
        tb.append(per_call_ns(b, loops))
    return statistics.median(ta), statistics.median(tb)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=15)
    ap.add_argument("--quick", action="store_true", help="short trials (a smoke run)")
    args = ap.parse_args()
    loops_call = 20000 if args.quick else 200000
    loops_cb = 20000 if args.quick else 200000
    trials = 3 if args.quick else args.trials

    lib = load_testlib()
    raw_add = lib.pft_add
    raw_add.argtypes = [ctypes.c_int64, ctypes.c_int64]
    raw_add.restype = ctypes.c_int64
    f = pf.get_global_func("testing.add")
    assert f(1, 2) == raw_add(1, 2) == 3

    def packed_calls(n):
        for _ in range(n):
            f(1, 2)

    def raw_calls(n):
        for _ in range(n):
            raw_add(1, 2)

    packed_ns, raw_ns = interleaved(packed_calls, raw_calls, loops_call, trials)

    CB = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64, ctypes.c_int64)

    def py_add(a, b):
        return a + b

    raw_cb = CB(py_add)
    call_raw_n = lib.pft_call_raw_n
    call_raw_n.argtypes = [CB, ctypes.c_int64]
    call_raw_n.restype = ctypes.c_int64
    call_n = pf.get_global_func("testing.call_n")
    packed_cb = pf.convert(py_add)
    assert call_n(packed_cb, 100) == call_raw_n(raw_cb, 100) == 9900

    cb_packed_ns, cb_raw_ns = interleaved(lambda n: call_n(packed_cb, n),
                                          lambda n: call_raw_n(raw_cb, n), loops_cb, trials)

    call_ratio = packed_ns / raw_ns
    cb_ratio = cb_packed_ns / cb_raw_ns
    print("packedfunc Python binding, %s, Python %s (median of %d interleaved trials)"
          % (pf.library_version, sys.version.split()[0], trials))
    print("  call  f(1, 2):       packed %7.0f ns   raw ctypes (argtypes) %7.0f ns   "
          "ratio %.2fx (target <= 1.5x)" % (packed_ns, raw_ns, call_ratio))
    print("  callback from C:     packed %7.0f ns   raw CFUNCTYPE          %7.0f ns   "
          "ratio %.2fx (target <= 3x)" % (cb_packed_ns, cb_raw_ns, cb_ratio))
    print("call_ratio=%.3f callback_ratio=%.3f" % (call_ratio, cb_ratio))


if __name__ == "__main__":
    main()
