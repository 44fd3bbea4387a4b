"""Soak: several Python threads run a long random mix of registry and call
operations against one shared set of names, and nothing may go wrong.

Operations: register (taken names fail with KeyError), override, remove
(absent names fail with KeyError), look up and call, C calls, typed calls
(a libffi-wrapped C function), callbacks into Python from C (which take the
GIL) on the calling thread and on C threads, failing calls, listings, and
anonymous conversions. Every function ever registered under soak name i
computes x * 1000 + i, in several implementations, so whatever version a
lookup races into, its result is checkable. Callbacks return values that
only their own thread uses (ints, floats, str, bytes, Functions), and every
result's value is checked, so that a result that crossed to another thread
is caught.

Short by default (part of the test command, a few seconds). The long form,
a million operations, runs with PF_PY_SOAK_OPS=1000000 (`make soak`).
"""
import ctypes
import gc
import os
import random
import sys
import threading
import time

import packedfunc as pf
from packedfunc import _callback, _errors, _ffi, _function

OPS = int(os.environ.get("PF_PY_SOAK_OPS", "250000"))
THREADS = 4
NAMES = ["pytest.soak.%d" % i for i in range(12)]

_create_typed = _ffi._cdll["PFFuncCreateFromTyped"]  # a private copy
_create_typed.restype = ctypes.c_int
_create_typed.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]


def typed_add(testlib):
    """testing's plain C pft_add(int64, int64), wrapped through libffi."""
    out = ctypes.c_void_p()
    fn = ctypes.cast(testlib.pft_add, ctypes.c_void_p)
    _errors.check_call(_create_typed(fn, b"int64(int64,int64)", ctypes.byref(out)))
    return _function.Function._adopt(out.value)


def implementation(i, variant, add):
    """A function for name i: f(x) == x * 1000 + i."""
    if variant == 0:
        return lambda x: x * 1000 + i
    if variant == 1:
        return lambda x: add(x * 1000, i)  # a callback that calls back into C
    return pf.convert(lambda x: x * 1000 + i)  # registered as a Function


class Worker:
    def __init__(self, seed, ops, fns):
        self.rng = random.Random(seed)
        self.seed = seed
        self.ops = ops
        self.fns = fns
        self.counts = {}
        self.errors = []
        self.own_func = pf.convert(lambda: seed)  # a Function only this worker returns

    def count(self, what):
        self.counts[what] = self.counts.get(what, 0) + 1

    # ---- operations; each checks its own result ----

    def op_register(self, i, x):
        try:
            pf.register_func(NAMES[i], implementation(i, x % 3, self.fns["add"]))
            self.count("registered")
        except KeyError as err:  # taken: the expected race
            assert "already registered" in str(err), err
            self.count("register_taken")

    def op_override(self, i, x):
        pf.register_func(NAMES[i], implementation(i, x % 3, self.fns["add"]), override=True)

    def op_remove(self, i, x):
        try:
            pf.remove_global_func(NAMES[i])
            self.count("removed")
        except KeyError as err:  # absent: the expected race
            assert "no function named" in str(err), err
            self.count("remove_absent")

    def op_lookup_call(self, i, x):
        f = pf.get_global_func(NAMES[i], allow_missing=True)
        if f is None:
            self.count("lookup_miss")
            return
        r = f(x)
        assert r == x * 1000 + i, (NAMES[i], x, r)

    def op_call_c(self, i, x):
        assert self.fns["add"](x, i) == x + i

    def op_typed(self, i, x):
        assert self.fns["typed"](x, -i) == x - i
        if x % 16 == 0:  # a wrong call is an error, and leaves no trace
            try:
                self.fns["typed"](x)
            except TypeError as err:
                assert "takes 2 arguments" in str(err) or "argument" in str(err), err
            else:
                raise AssertionError("typed call with 1 argument did not fail")

    def op_callback(self, i, x):
        assert self.fns["call"](lambda a, b: a * b + 1, x, i) == x * i + 1

    def op_callback_str(self, i, x):
        s = "s%d" % x
        assert self.fns["call"](lambda v: v + "é", s) == s + "é"

    def op_callback_values(self, i, x):
        # Values that only this thread uses, each returned by a callback
        # through C; any result from another thread's callback is wrong.
        tag = "w%d-%d" % (self.seed, x)
        for value in (x, x + 0.5, tag, tag.encode() + b"\0\xfe", self.own_func):
            got = self.fns["call"](lambda: value)
            assert got == value, (value, got)
        assert got() == self.seed

    def op_callback_c_thread(self, i, x):
        assert self.fns["call_in_thread"](lambda v: v - 1, x) == x - 1

    def op_callback_registered(self, i, x):
        # C calls a registered Python function by handle, racing overrides.
        f = pf.get_global_func(NAMES[i], allow_missing=True)
        if f is not None:
            assert self.fns["call"](f, x) == x * 1000 + i

    def op_fail(self, i, x):
        try:
            self.fns["raise_error"]("KeyError", "soak %d" % x)
        except KeyError as err:
            assert "soak %d" % x in str(err), err
        else:
            raise AssertionError("testing.raise_error did not raise")

    def op_callback_raises(self, i, x):
        def bad():
            raise ZeroDivisionError("soak cb %d" % x)
        try:
            self.fns["call"](bad)
        except ZeroDivisionError as err:
            assert "soak cb %d" % x in str(err), err
        else:
            raise AssertionError("a raising callback did not fail the call")

    def op_list(self, i, x):
        names = pf.list_global_func_names("pytest.soak.")
        assert all(n in NAMES for n in names), names

    def op_convert(self, i, x):
        assert pf.convert(lambda: x)() == x

    def run(self):
        ops = [(self.op_register, 3), (self.op_override, 2), (self.op_remove, 3),
               (self.op_lookup_call, 10), (self.op_call_c, 5), (self.op_typed, 5),
               (self.op_callback, 5), (self.op_callback_str, 2), (self.op_callback_values, 3),
               (self.op_callback_c_thread, 0.3), (self.op_callback_registered, 3),
               (self.op_fail, 1), (self.op_callback_raises, 1), (self.op_list, 0.5),
               (self.op_convert, 1)]
        funcs = [f for f, _ in ops]
        weights = [w for _, w in ops]
        rng = self.rng
        try:
            for n, op in enumerate(rng.choices(funcs, weights, k=self.ops)):
                op(rng.randrange(len(NAMES)), rng.randrange(-2**40, 2**40))
                self.count(op.__name__)
        except BaseException as err:  # reported by the test, with the seed
            self.errors.append(err)


def test_soak(testlib):
    fns = {name: pf.get_global_func("testing." + name)
           for name in ("add", "call", "call_in_thread", "raise_error")}
    fns["typed"] = typed_add(testlib)
    for name in NAMES:
        if pf.get_global_func(name, allow_missing=True) is not None:
            pf.remove_global_func(name)
    gc.collect()
    live_before = _callback.live_count()

    seed = int(os.environ.get("PF_PY_SOAK_SEED", str(int(time.time()))))
    per_thread = -(-OPS // THREADS)
    workers = [Worker(seed + k, per_thread, fns) for k in range(THREADS)]
    threads = [threading.Thread(target=w.run) for w in workers]
    started = time.monotonic()
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-4)  # switch threads often: more interleavings
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(old_interval)
    elapsed = time.monotonic() - started

    errors = [e for w in workers for e in w.errors]
    assert not errors, "seed %d (rerun with PF_PY_SOAK_SEED=%d): %r" % (seed, seed, errors[0])
    totals = {}
    for w in workers:
        for k, v in w.counts.items():
            totals[k] = totals.get(k, 0) + v
    done = sum(v for k, v in totals.items() if k.startswith("op_"))
    assert done == per_thread * THREADS, totals
    # Every kind of operation ran, and the races actually happened.
    for what in ("op_register", "op_override", "op_remove", "op_lookup_call", "op_typed",
                 "op_callback", "op_callback_values", "op_callback_c_thread",
                 "op_callback_registered",
                 "registered", "removed"):
        assert totals.get(what, 0) > 0, (what, totals)
    print("soak: %d operations on %d threads in %.1f s: %r"
          % (done, THREADS, elapsed, totals))

    # Clean up; then every Python callable the soak converted has been
    # released exactly once (the finalizer dropped it), nothing kept.
    for name in NAMES:
        if pf.get_global_func(name, allow_missing=True) is not None:
            pf.remove_global_func(name)
    del workers, threads, w  # w: the last worker of the loops above
    gc.collect()
    assert _callback.live_count() == live_before
    # The registry still works.
    pf.register_func(NAMES[0], lambda x: x + 1)
    try:
        assert pf.get_global_func(NAMES[0])(1) == 2
    finally:
        pf.remove_global_func(NAMES[0])
