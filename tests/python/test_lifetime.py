"""Lifetimes: registry ownership, converted callbacks, leaks, interpreter exit."""
import gc
import os
import subprocess
import sys
import tracemalloc
import weakref

import pytest

import packedfunc as pf
from packedfunc import _callback

from conftest import ROOT, malloc_in_use


class Callable:
    """A callable that weak references can watch."""

    def __init__(self, value):
        self.value = value

    def __call__(self, *args):
        return self.value


def test_registered_function_lives_until_removed(unique_name):
    name = unique_name()
    obj = Callable(5)
    watch = weakref.ref(obj)
    pf.register_func(name, obj)
    del obj
    gc.collect()
    assert watch() is not None  # the registry keeps it
    assert pf.get_global_func(name)() == 5
    pf.remove_global_func(name)
    gc.collect()
    assert watch() is None  # released once removed


def test_overridden_function_is_released(unique_name):
    name = unique_name()
    first = Callable(1)
    watch = weakref.ref(first)
    pf.register_func(name, first)
    del first
    pf.register_func(name, Callable(2), override=True)
    gc.collect()
    assert watch() is None
    assert pf.get_global_func(name)() == 2


def test_held_function_survives_removal(unique_name):
    name = unique_name()
    obj = Callable(3)
    watch = weakref.ref(obj)
    pf.register_func(name, obj)
    held = pf.get_global_func(name)
    del obj
    pf.remove_global_func(name)
    gc.collect()
    assert watch() is not None and held() == 3
    del held
    gc.collect()
    assert watch() is None


def test_converted_callback_released_after_last_c_and_python_reference(fn):
    obj = Callable(7)
    watch = weakref.ref(obj)
    f = pf.convert(obj)
    fn("keep")(f)  # C takes its own reference
    del obj, f
    gc.collect()
    assert watch() is not None
    assert fn("call_kept")() == 7
    fn("release_kept")()
    gc.collect()
    assert watch() is None


def test_temporary_callback_argument_is_released(fn):
    obj = Callable(9)
    watch = weakref.ref(obj)
    assert fn("call")(obj) == 9
    del obj
    gc.collect()
    assert watch() is None


def test_no_leak_over_5000_create_call_drop_cycles(fn):
    call = fn("call")
    echo = fn("echo")

    def cycle(i):
        f = pf.convert(lambda x: x + 1)
        assert call(f, i) == i + 1
        assert echo("s%d" % (i % 10)) == "s%d" % (i % 10)

    for i in range(2000):  # warm up caches and allocator pools
        cycle(i)
    gc.collect()
    live_before = _callback.live_count()
    objects_before = len(gc.get_objects())
    in_use_before = malloc_in_use()
    tracemalloc.start()
    try:
        snap_before = tracemalloc.get_traced_memory()[0]
        for i in range(5000):
            cycle(i)
        gc.collect()
        traced_growth = tracemalloc.get_traced_memory()[0] - snap_before
    finally:
        tracemalloc.stop()
    in_use_growth = malloc_in_use() - in_use_before
    # A leak of one small object per cycle would be >= 5000 objects and
    # hundreds of KB (Python's or malloc's: a block is at least 32 bytes);
    # the bounds leave room only for noise.
    assert _callback.live_count() == live_before
    assert len(gc.get_objects()) - objects_before < 1000
    assert traced_growth < 64 * 1024, traced_growth
    assert in_use_growth < 64 * 1024, in_use_growth


EXIT_SCRIPT = r"""
import ctypes, os, sys
import packedfunc as pf
ctypes.CDLL(os.environ["PF_TESTLIB_PATH"]).pft_init()
@pf.register_func("atexit.py_func")
def f(x):
    return x * 2
keep = pf.convert(lambda: 1)
pf.get_global_func("testing.keep")(pf.convert(lambda: 2))
held = pf.get_global_func("atexit.py_func")
assert held(21) == 42
arr = pf.get_global_func("testing.make_tensor")(3)
cycle = [pf.convert(lambda: cycle)]
"""


def test_interpreter_exit_with_registered_functions_is_silent(testlib):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    env["PF_TESTLIB_PATH"] = testlib._name
    r = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], env=env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and r.stderr == ""


# C threads call a registered Python function in a loop while the
# interpreter exits. The interpreter's exit closes the gate that every
# Python callback is called through (waiting for the calls in progress), so
# that calls that come later fail cleanly in C instead of entering a
# half-finalized interpreter or freed ctypes thunks (a SIGSEGV in 1 to 6
# runs of 30 before). The script's own exit handler, registered before
# packedfunc's and so run after it, waits until every C thread has reported
# its first error, and prints it.
EXIT_CALLERS = 4
EXIT_CALLERS_SCRIPT = r"""
import atexit, ctypes, os, sys, time
path = sys.argv[1]

def wait_for_the_c_threads():
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        with open(path) as f:
            lines = f.read().splitlines()
        if len(lines) >= %d:
            print("\n".join(lines))
            return
        time.sleep(0.001)
    print("the C threads saw no error at exit")

atexit.register(wait_for_the_c_threads)

import packedfunc as pf
lib = ctypes.CDLL(os.environ["PF_TESTLIB_PATH"])
lib.pft_init()
lib.pft_exit_callers_ok.restype = ctypes.c_int64

@pf.register_func("exit.py_func")
def f(x):
    time.sleep(0.0002)  # so that calls are in progress when the exit begins
    return x + 1

fd = os.open(path, os.O_WRONLY | os.O_APPEND)
assert lib.pft_start_exit_callers(b"exit.py_func", %d, fd) == 0
while lib.pft_exit_callers_ok() < 50:
    time.sleep(0.001)
""" % (EXIT_CALLERS, EXIT_CALLERS)


def test_c_threads_calling_python_while_the_interpreter_exits(testlib, tmp_path):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    env["PF_TESTLIB_PATH"] = testlib._name
    for run in range(30):
        path = tmp_path / ("errors.%d" % run)
        path.write_text("")
        r = subprocess.run([sys.executable, "-c", EXIT_CALLERS_SCRIPT, str(path)], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (run, r.returncode, r.stderr)
        assert r.stderr == "", (run, r.stderr)
        assert r.stdout.splitlines() == [
            "RuntimeError: the Python interpreter is shutting down"] * EXIT_CALLERS, (run, r.stdout)


# ---------------------------------------------------------------------------
# use_count: the reference count of the C object behind a wrapper
# ---------------------------------------------------------------------------

def test_use_count_of_every_kind_of_object(fn):
    import numpy as np
    from conftest import load_fixture_module
    keep = fn("keep")
    f = pf.convert(lambda: 1)
    arr = pf.Array([1, 2])
    lst = pf.List([1])
    t = pf.from_dlpack(np.zeros(3))
    m = load_fixture_module("mod_pyobj.so")
    demo = pf.load_module(os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
        ROOT, "build", "examples", "demo_plugin.so")).demo
    c = demo.Counter("c", 0)
    for x in (f, arr, lst, t, m, c):
        assert pf.use_count(x) == 1, x  # the wrapper's own reference
    # A C holder adds one; the wrapper given back by a C container another.
    keep(f)
    assert pf.use_count(f) == 2
    fn("release_kept")()
    assert pf.use_count(f) == 1
    outer = pf.Array([arr, arr])
    assert pf.use_count(arr) == 3
    del outer
    gc.collect()
    assert pf.use_count(arr) == 1


def test_use_count_refuses_what_is_no_object():
    for bad in (1, "x", None, [1], object(), pf.Device("cpu", 0)):
        with pytest.raises(TypeError, match="use_count: argument 'obj' must be a packedfunc "
                                            "Function or Object, not "):
            pf.use_count(bad)
    with pytest.raises(TypeError, match=r"use_count\(\) missing"):
        pf.use_count()


def test_use_count_of_a_released_function_is_a_value_error():
    f = pf.convert(lambda: 1)
    f.__del__()
    with pytest.raises(ValueError, match="use_count: the Function was released"):
        pf.use_count(f)
