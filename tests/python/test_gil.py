"""Keeping the GIL around a call (issue 34, item 5): Function.release_gil,
the C author's hint kPFFuncNonBlocking, callbacks into Python from a
function that keeps the GIL, and the plain positional fast path's
fallbacks. Runs on both backends."""
import concurrent.futures
import ctypes
import threading
import time

import pytest

import packedfunc
from packedfunc import _ffi

# PyGILState_Check as a typed C function: 1 when the thread that runs it
# holds the GIL. Called through a Function, it tells whether the call
# released the GIL around the callee.
_GIL_CHECK_ADDR = ctypes.cast(ctypes.pythonapi.PyGILState_Check, ctypes.c_void_p).value


def gil_check():
    return packedfunc.typed(_GIL_CHECK_ADDR, "int32()")


def test_release_gil_by_default_and_python_overrides_it():
    f = gil_check()
    assert f.release_gil is True
    assert f() == 0  # the callee ran without the GIL
    f.release_gil = False
    assert f.release_gil is False
    assert f() == 1  # kept
    f.release_gil = True
    assert f() == 0
    for bad in (0, 1, None, "no"):
        with pytest.raises(TypeError, match="release_gil must be True or False, not"):
            f.release_gil = bad
    assert f.release_gil is True


def test_the_c_authors_hint_keeps_the_gil(fn, unique_name):
    assert fn("add").release_gil is True
    for name in ("quick_add", "quick_call", "quick_sleep_ms"):
        assert fn(name).release_gil is False
    assert fn("quick_add")(2, 3) == 5
    # A function marked before it is published: every wrapper of it keeps
    # the GIL, and Python may still release it for one.
    f = gil_check()
    assert _ffi.PFFuncSetFlags(f.handle, _ffi.FUNC_NON_BLOCKING) == 0
    name = unique_name()
    packedfunc.register_func(name, f)
    g = packedfunc.get_global_func(name)
    assert g.release_gil is False and g() == 1
    g.release_gil = True
    assert g() == 0
    # The hint is read when C's function is wrapped; the older wrapper keeps
    # its own choice.
    assert f.release_gil is True and f() == 0


@pytest.mark.parametrize("args", [(1, 2), (1.5, 2), (True, None), ("s", b"b")])
def test_kept_and_released_calls_convert_alike(fn, args):
    echo, nargs = fn("echo"), fn("nargs")
    released = [echo(x) for x in args]
    echo.release_gil = nargs.release_gil = False
    try:
        assert [echo(x) for x in args] == released == list(args)
        assert nargs(*args) == len(args)
    finally:
        echo.release_gil = nargs.release_gil = True


def test_keep_gil_function_calls_back_into_python(fn):
    quick_call = fn("quick_call")
    assert quick_call(lambda a, b: a * b, 6, 7) == 42
    # Nested: a kept call whose callback makes kept and released calls,
    # which call back again.
    add = fn("add")

    def outer(x):
        return quick_call(lambda y: add(y, 1), x) + fn("call")(lambda: 100)

    assert quick_call(outer, 1) == 102
    assert quick_call(quick_call, lambda: "deep") == "deep"
    # A callback's exception comes back through the kept call.
    with pytest.raises(KeyError, match="gone"):
        quick_call(lambda: {}["gone"])


def test_keep_gil_function_called_from_other_threads(fn):
    quick_call = fn("quick_call")
    def work(k):
        return [quick_call(lambda a, b: a + b, k, i) for i in range(200)]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:  # raises what a thread raised
        results = list(pool.map(work, range(4)))
    assert results == [[k + i for i in range(200)] for k in range(4)]
    # From a thread that Python did not start: C's thread calls a Python
    # callback, which makes a kept call that calls back into Python.
    in_thread = fn("call_in_thread")
    assert in_thread(lambda: quick_call(lambda x: x * 2, 21)) == 42


def test_a_long_keep_gil_call_is_correct_and_other_threads_wait(fn):
    # Documented: a function that keeps the GIL stops every other Python
    # thread while it runs. It is still correct, and they go on after it.
    quick_sleep = fn("quick_sleep_ms")
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(time.monotonic())  # read while this thread holds the GIL
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    try:
        while not ticks:
            time.sleep(0.001)
        start = time.monotonic()
        assert quick_sleep(50) is None
        end = time.monotonic()
        assert end - start >= 0.05
        after = len(ticks)
        while len(ticks) < after + 2:  # the other thread goes on
            time.sleep(0.001)
    finally:
        stop.set()
        t.join()
    # Kept, no tick can be read while the call runs. The GIL may change
    # hands between reading `start` and entering C, and between leaving C
    # and reading `end` (on a loaded machine, for longer than the switch
    # interval), so only the call's middle 30 ms is asked to be empty;
    # released, the other thread would tick about every millisecond of it.
    inside = [tick for tick in ticks if start + 0.01 < tick < end - 0.01]
    assert inside == [], (end - start, inside)


class _Hostile:
    """An int-like argument whose __index__ drops the caller's Function and
    the list that held it, before the call converts it."""

    def __init__(self, holder):
        self.holder = holder

    def __index__(self):
        f = self.holder.pop()
        f.__del__()  # releases its handle: the call must hold its own
        return 5


@pytest.mark.parametrize("keep", [False, True])
def test_hostile_index_falls_back_and_holds(fn, keep):
    # The first argument takes the plain path's conversion, the second does
    # not: the call falls back to the general path, whose hook runs after
    # the first was converted, and which holds what it took.
    call = fn("call")
    call.release_gil = not keep
    inner = packedfunc.convert(lambda x: x + 1)
    holder = [inner]
    assert call(inner, _Hostile(holder)) == 6
    assert holder == []


def test_fast_path_falls_back_for_everything_else(fn):
    echo, nargs = fn("echo"), fn("nargs")
    for keep in (False, True):
        echo.release_gil = not keep
        with pytest.raises(OverflowError):
            echo(1 << 70)
        with pytest.raises(ValueError, match="NUL"):
            echo("a\0b")
        with pytest.raises(ValueError, match="surrogate"):
            echo("\ud800")

        class MyInt(int):
            pass

        assert echo(MyInt(3)) == 3
        assert echo([1, 2])[1] == 2
        assert nargs(*range(12)) == 12  # more than the fast path's 8
        assert fn("kw_args")(1, b="q") is not None  # keywords


def test_a_bound_function_keeps_the_hint_of_the_function_it_binds(fn):
    # PFFuncBind gives the bound function the flags of the one it binds.
    quick = fn("quick_add").bind({0: 10})
    assert quick.release_gil is False and quick(5) == 15
    slow = fn("add").bind({0: 10})
    assert slow.release_gil is True and slow(5) == 15


# ---- the flag from C registration (tests/modules/mod_nonblocking.c) ----

@pytest.fixture(scope="module")
def nb():
    """The fixture module whose functions and methods were registered as
    non-blocking, with its probe set to PyGILState_Check."""
    from test_module import fixture_module
    mod = packedfunc.load_module(fixture_module("mod_nonblocking.so"))
    mod["nb.set_probe"](_GIL_CHECK_ADDR)
    return mod


def test_registered_non_blocking_functions_keep_the_gil(nb):
    for name in ("nb.checked", "nb.flagged", "nb.set_probe", "nb.call2"):
        assert nb[name].release_gil is False, name
    assert nb["nb.checked"]() == nb["nb.flagged"]() == 1  # kept
    released = nb["nb.released"]
    assert released.release_gil is True and released() == 0
    # Python still overrides the C author's hint, per function.
    flagged = nb["nb.flagged"]
    flagged.release_gil = True
    try:
        assert flagged() == 0
    finally:
        flagged.release_gil = False
    assert nb["nb.checked"].__doc__.startswith("The probe, kept.")


def test_registered_non_blocking_function_calls_back_into_python(nb):
    call2 = nb["nb.call2"]
    assert call2(lambda a, b: a * b, 6, 7) == 42
    # The callback runs on this thread with the GIL the call kept, and may
    # make kept and released calls itself.
    assert call2(lambda a, b: nb["nb.checked"]() + nb["nb.released"]() + a + b, 1, 2) == 4
    assert call2(lambda a, b: call2(lambda x, y: x - y, a, b), 9, 4) == 5


def test_registered_non_blocking_methods_keep_the_gil(nb):
    Probe = nb.nb.Probe
    p = Probe()
    # The instance alone: after the first call (which looks the signature
    # up) the method's own fast path takes it, and keeps the GIL too.
    assert [p.held() for _ in range(3)] == [1, 1, 1]
    assert [Probe.held(p) for _ in range(3)] == [1, 1, 1]
    assert [p.released() for _ in range(3)] == [0, 0, 0]
    assert [Probe.held_static() for _ in range(3)] == [1, 1, 1]


def test_a_flags_record_naming_no_function_fails_the_load():
    from test_module import fixture_module
    with pytest.raises(ValueError, match="the flags record of function badflags.ad names no "
                       "function of it"):
        packedfunc.load_module(fixture_module("mod_badflags.so"))
