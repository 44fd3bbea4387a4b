"""get_global_func, register_func (all its forms), remove, list, init_api."""
import sys
import types

import pytest

import packedfunc as pf


def test_get_global_func_returns_function(fn):
    add = pf.get_global_func("testing.add")
    assert isinstance(add, pf.Function)
    assert add(40, 2) == 42


def test_missing_name_raises_value_error_naming_it():
    with pytest.raises(ValueError, match="no.such.function"):
        pf.get_global_func("no.such.function")


def test_missing_name_with_allow_missing_is_none():
    assert pf.get_global_func("no.such.function", allow_missing=True) is None


def test_bad_name_types():
    with pytest.raises(TypeError, match="name must be a str"):
        pf.get_global_func(42)
    with pytest.raises(ValueError, match="empty"):
        pf.get_global_func("")


def test_register_plain_decorator(unique_name):
    def pytest_plain_decorated(x):
        return x + 1

    try:
        assert pf.register_func(pytest_plain_decorated) is pytest_plain_decorated
        assert pf.get_global_func("pytest_plain_decorated")(1) == 2
    finally:
        pf.remove_global_func("pytest_plain_decorated")


def test_register_with_name_decorator(unique_name, fn):
    name = unique_name()

    @pf.register_func(name)
    def double(x):
        return 2 * x

    assert double(4) == 8  # still a Python function
    assert pf.get_global_func(name)(21) == 42
    # and C can find it by name and call it
    assert fn("call")(pf.get_global_func(name), 5) == 10


def test_register_call_form(unique_name):
    name = unique_name()
    f = lambda: "hi"  # noqa: E731
    assert pf.register_func(name, f) is f
    assert pf.get_global_func(name)() == "hi"


def test_taken_name_raises_naming_it(unique_name):
    name = unique_name()
    pf.register_func(name, lambda: 1)
    with pytest.raises(KeyError, match=name.replace(".", r"\.")):
        pf.register_func(name, lambda: 2)
    assert pf.get_global_func(name)() == 1


def test_override(unique_name):
    name = unique_name()
    pf.register_func(name, lambda: 1)

    @pf.register_func(name, override=True)
    def second():
        return 2

    assert pf.get_global_func(name)() == 2


def test_register_a_c_function_under_another_name(unique_name):
    name = unique_name()
    add = pf.get_global_func("testing.add")
    pf.register_func(name, add)
    again = pf.get_global_func(name)
    assert again == add  # the same PackedFunc, not a wrapper of it
    assert again.handle == add.handle
    assert again(1, 2) == 3


def test_register_rejects_non_callables(unique_name):
    with pytest.raises(TypeError, match="callable"):
        pf.register_func(unique_name(), 42)
    with pytest.raises(TypeError):
        pf.register_func(42)


def test_remove_and_list(unique_name):
    name = unique_name()
    pf.register_func(name, lambda: None)
    assert name in pf.list_global_func_names()
    assert name in pf.list_global_func_names(name)
    assert pf.list_global_func_names("testing.") == sorted(pf.list_global_func_names("testing."))
    assert "testing.echo" in pf.list_global_func_names("testing.")
    assert all(n.startswith("testing.") for n in pf.list_global_func_names("testing."))
    pf.remove_global_func(name)
    assert name not in pf.list_global_func_names()
    with pytest.raises(KeyError, match=name.replace(".", r"\.")):
        pf.remove_global_func(name)


def test_init_api_exposes_functions(unique_name):
    prefix = unique_name("api")
    pf.register_func(prefix + ".triple", lambda x: 3 * x)
    pf.register_func(prefix + ".deeper.skip", lambda: None)
    mod = types.ModuleType("pytest_init_api_mod")
    sys.modules[mod.__name__] = mod
    try:
        assert pf.init_api(prefix, mod.__name__) == ["triple"]
        assert isinstance(mod.triple, pf.Function)
        assert mod.triple(5) == 15
        assert not hasattr(mod, "deeper")
    finally:
        del sys.modules[mod.__name__]
        pf.remove_global_func(prefix + ".triple")
        pf.remove_global_func(prefix + ".deeper.skip")


def test_init_api_errors():
    with pytest.raises(ValueError, match="not imported"):
        pf.init_api("testing", "no_such_module_xyz")
    with pytest.raises(TypeError):
        pf.init_api("testing", 3)


def test_function_cannot_be_constructed_or_pickled(fn):
    import pickle
    with pytest.raises(TypeError):
        pf.Function()
    with pytest.raises(TypeError):
        pickle.dumps(fn("echo"))


def test_keyword_arguments_are_rejected(fn):
    with pytest.raises(TypeError):
        fn("echo")(x=1)
