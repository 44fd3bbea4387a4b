"""FunctionNotFoundError: one class for a name that names no function, a
KeyError and a ValueError at once."""
import os

import pytest

import packedfunc as pf

from conftest import ROOT


def test_it_is_both_a_key_error_and_a_value_error():
    assert issubclass(pf.FunctionNotFoundError, KeyError)
    assert issubclass(pf.FunctionNotFoundError, ValueError)
    assert "FunctionNotFoundError" in pf.__all__


def test_get_global_func():
    for habit in (pf.FunctionNotFoundError, KeyError, ValueError):
        with pytest.raises(habit):
            pf.get_global_func("no.such.function")
    with pytest.raises(pf.FunctionNotFoundError) as info:
        pf.get_global_func("no.such.function")
    # Reads as a message, without the quotes that KeyError puts around it.
    assert str(info.value) == "packedfunc: no global function named 'no.such.function'"
    assert pf.get_global_func("no.such.function", allow_missing=True) is None


def test_remove_global_func():
    for habit in (pf.FunctionNotFoundError, KeyError, ValueError):
        with pytest.raises(habit, match="no function named 'no.such.function' is registered"):
            pf.remove_global_func("no.such.function")
    with pytest.raises(pf.FunctionNotFoundError) as info:
        pf.remove_global_func("no.such.function")
    assert not str(info.value).startswith(("'", '"'))


def test_other_registry_errors_keep_their_class():
    # A name that cannot exist is a plain ValueError, not a missing function.
    for f in (pf.get_global_func, pf.remove_global_func):
        with pytest.raises(ValueError, match="contains a NUL character") as info:
            f("a\0b")
        assert not isinstance(info.value, KeyError)


@pytest.fixture(scope="module")
def plugin():
    path = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(
        ROOT, os.environ.get("BUILD", "build"), "examples", "demo_plugin.so")
    assert os.path.exists(path), "%s is missing; run `make test-python`" % path
    return pf.load_module(path)


def test_module_lookups(plugin):
    with pytest.raises(pf.FunctionNotFoundError, match="has no function named 'demo.nope'"):
        plugin["demo.nope"]
    with pytest.raises(KeyError):
        plugin["demo.nope"]
    with pytest.raises(ValueError, match="has no function named 'demo.nope'"):
        plugin.get_function("demo.nope")
    assert plugin.get_function("demo.nope", allow_missing=True) is None
    with pytest.raises(AttributeError):  # attribute lookups stay AttributeError
        plugin.demo.nope


def test_callback_raising_it_comes_back_as_itself(fn):
    def cb():
        raise pf.FunctionNotFoundError("no function named 'x'")

    with pytest.raises(pf.FunctionNotFoundError, match="no function named 'x'"):
        fn("call")(cb)
