"""Calls through resolved call targets (issue 34, item 4): the extension
resolves a Function's target once and calls it directly, so its handle
and target must stay valid while a call uses them, whatever the call's
callbacks do (Function.__del__() is documented as an explicit release).
Runs on both backends; make test-python runs the extension's with
PF_CHECK_TARGETS=1, whose targets check every call as PFFuncCall does."""
import pytest

import packedfunc


def test_an_argument_released_by_a_callback_lives_until_the_call_ends(fn):
    # call_n calls its function argument three times; the first call
    # releases that very Function: the call holds its own reference, so
    # the other two still run.
    seen = []

    def cb(a, b):
        seen.append(a)
        if a == 0:
            g.__del__()
        return a + b

    g = packedfunc.convert(cb)
    for keep in (False, True):
        call_n = fn("call_n")
        call_n.release_gil = not keep
        seen.clear()
        g = packedfunc.convert(cb)
        assert call_n(g, 3) == 6
        assert seen == [0, 1, 2]
        with pytest.raises(ValueError, match="released"):
            g(1, 2)


def test_a_function_released_by_its_own_callback_lives_until_it_returns(fn):
    # A host function whose callable releases it: the call keeps it alive
    # until it returns, and later calls say it was released. (Before, the
    # host call read its freed resource on return: valgrind's invalid read.)
    # The host functions alive (their callables held by C) tell whether the
    # release freed the function before its call returned.
    from packedfunc import _callback
    for keep in (False, True):
        alive = []

        def cb(x):
            before = _callback.live_count()
            h.__del__()
            alive.append(_callback.live_count() == before)
            return x * 2

        h = packedfunc.convert(cb)
        h.release_gil = not keep
        assert h(21) == 42
        assert alive == [True]  # not freed under its own call
        with pytest.raises(ValueError, match="released"):
            h(1)
        h.__del__()  # a second release is a no-op


def test_a_function_released_during_a_nested_call_of_itself(fn):
    # quick_call(f, ...) calls f; f calls quick_call again and releases it
    # meanwhile: both levels finish, and the handle goes after the outer.
    quick_call = packedfunc.get_global_func("testing.quick_call")
    caller = [quick_call]

    def inner(x):
        outer = caller[0]
        outer.__del__()
        return x + 1

    assert quick_call(lambda: quick_call(inner, 4)) == 5
    with pytest.raises(ValueError, match="released"):
        quick_call(inner, 1)


def test_the_handle_of_a_function_cannot_be_replaced():
    # The extension's call target belongs to the handle: the handle is
    # read-only there (released only by __del__).
    f = packedfunc.convert(lambda: 1)
    if packedfunc.backend == "cext":
        with pytest.raises(AttributeError):
            f._handle = 0
    assert f() == 1


def test_calls_through_targets_keep_every_behaviour(fn):
    # Strings, bytes, nested string results, handles, errors and a
    # released Function, on the plain path and the general one.
    echo, call = fn("echo"), fn("call")
    assert echo("héllo") == "héllo" and echo(b"a\0b") == b"a\0b"
    assert call(lambda s: echo(s + "!"), "x") == "x!"
    assert call(lambda: [echo("in"), echo(b"b")], ) is not None
    typed_add = fn("typed_add")  # a typed function: a direct callee
    assert typed_add(2, 3) == 5
    with pytest.raises(TypeError):
        typed_add("a", 3)
    with pytest.raises(RuntimeError, match="without recording an error"):
        fn("fail_silently")()
    inner = packedfunc.convert(lambda x: x + 1)
    assert call(inner, 1) == 2
