"""Keyword calls, defaults and signatures: the library binds names
(PFFuncCallKw), Python passes them on; inspect.signature shows names,
defaults and annotations; register_func publishes a Python function's own
signature."""
import gc
import inspect
import os
import typing

import numpy as np
import pytest

import packedfunc as pf
from conftest import ROOT


@pytest.fixture
def clamp(fn):
    return fn("clamp")  # float64(x: float64, lo: float64 = 0, hi: float64 = 1)


def test_keywords_and_defaults(clamp):
    assert clamp(1.5, hi=1.0) == 1.0
    assert clamp(0.5) == 0.5                    # lo and hi take their defaults
    assert clamp(-3) == 0.0
    assert clamp(x=-3, lo=-1) == -1.0
    assert clamp(hi=2.0, x=5) == 2.0            # any order
    assert clamp(2, 0, 5) == 2.0                # all positional: the fast path
    assert clamp(2, 0, hi=5) == 2.0


def test_signature_shows_names_defaults_annotations(clamp, fn):
    sig = inspect.signature(clamp)
    assert str(sig) == "(x: float, lo: float = 0.0, hi: float = 1.0) -> float"
    assert [p.kind for p in sig.parameters.values()] == [
        inspect.Parameter.POSITIONAL_OR_KEYWORD] * 3
    assert clamp.signature == "float64(x:float64,lo:float64=0.0,hi:float64=1.0)"
    # A constrained tensor: Annotated with the grammar's text of it.
    mean = inspect.signature(fn("mean")).parameters["x"]
    assert mean.annotation == typing.Annotated[np.ndarray, "tensor<float64,1,contiguous>"]
    # Unnamed parameters stay positional-only, numbered as messages number them.
    sig = inspect.signature(fn("typed_add"))
    assert str(sig) == "(arg0: int, arg1: int, /) -> int"
    # A packed function with a signature as metadata: str, device and any.
    sig = inspect.signature(fn("kw_args"))
    assert str(sig).startswith("(a: int, b: str = 'z', c: ")
    assert sig.parameters["c"].default == pf.Device("cpu", 0)
    assert sig.parameters["d"].default is None
    assert sig.parameters["d"].annotation is inspect.Parameter.empty


@pytest.mark.parametrize("call,message", [
    (lambda f: f(1.5, x=1.0), r"^clamp\(\) got multiple values for argument 'x'$"),
    (lambda f: f(1.5, y=1.0), r"^clamp\(\) got an unexpected keyword argument 'y'$"),
    (lambda f: f(), r"^clamp\(\) missing 1 required positional argument: 'x'$"),
    (lambda f: f(lo=1.0), r"^clamp\(\) missing 1 required positional argument: 'x'$"),
    (lambda f: f(1, 2, 3, 4, hi=1.0), r"^clamp\(\) got multiple values for argument 'hi'$"),
    (lambda f: f(1, 2, 3, 4, y=1), r"^clamp\(\) got an unexpected keyword argument 'y'$"),
    (lambda f: f(1, **{"a\0b": 1}), r"^clamp\(\) got an unexpected keyword argument"),
    (lambda f: f(1, **{"\udcff": 1}), r"got an unexpected keyword argument"),
])
def test_errors_worded_as_pythons(clamp, call, message):
    with pytest.raises(TypeError, match=message):
        call(clamp)


def test_python_wording_matches(clamp):
    # The same calls of a Python function with that signature.
    def py_clamp(x, lo=0.0, hi=1.0):
        pass
    py_clamp.__name__ = py_clamp.__qualname__ = "clamp"
    for call in (lambda f: f(1.5, x=1.0), lambda f: f(1.5, y=1.0), lambda f: f(),
                 lambda f: f(1, 2, 3, 4, hi=1.0)):
        with pytest.raises(TypeError) as want:
            call(py_clamp)
        with pytest.raises(TypeError) as got:
            call(clamp)
        assert str(got.value) == str(want.value)


def test_keyword_value_conversion_errors_name_the_keyword(fn):
    with pytest.raises(OverflowError, match="argument 'a'"):
        fn("kw_args")(a=2**70)
    with pytest.raises(TypeError, match="argument 1 'lo': expected float64, got str"):
        fn("clamp")(1.0, lo="0")  # the library checks the bound arguments


def test_functions_without_names(fn):
    with pytest.raises(TypeError, match=r"takes no keyword arguments"):
        fn("echo")(x=1)
    with pytest.raises(TypeError, match="unexpected keyword argument 'arg0'"):
        fn("typed_add")(arg0=1, arg1=2)
    # Positional calls of a signature without defaults are as before.
    with pytest.raises(TypeError, match="takes 2 arguments, got 1"):
        fn("typed_add")(1)


def test_packed_function_metadata_defaults_and_conversions(fn):
    kw = fn("kw_args")  # array(a: int64, b: str = "z", c: device = "cpu", d: any = null)
    assert list(kw(1)) == [1, "z", pf.Device("cpu", 0), None]
    # A str at a device parameter becomes a Device, passed by keyword too.
    assert list(kw(1, c="cuda:1")) == [1, "z", pf.Device("cuda", 1), None]
    assert list(kw(1, "q", "cuda:2")) == [1, "q", pf.Device("cuda", 2), None]
    assert list(kw(a=3, d=[1, 2]))[3] == [1, 2]
    with pytest.raises(ValueError, match="argument 'c'"):
        kw(1, c="tpu")


def test_constrained_tensor_refuses_a_mismatch_naming_the_parameter(fn):
    mean = fn("mean")
    assert mean(np.arange(4.0)) == 1.5
    assert mean(x=np.arange(4.0)) == 1.5
    with pytest.raises(TypeError, match=r"argument 0 'x': expected tensor<float64,1,contiguous>, "
                                        r"got int64 tensor of rank 1"):
        mean(np.arange(4))
    strided = np.arange(8.0)[::2]
    for call in (lambda: mean(strided), lambda: mean(x=strided)):
        with pytest.raises(ValueError, match=r"argument 0 'x': .*not contiguous"):
            call()
    with pytest.raises(ValueError, match=r"argument 0 'x': .*got float64 tensor of rank 2"):
        mean(x=np.zeros((2, 2)))


def test_many_keywords_take_the_general_path(unique_name):
    # More values than the extension's fast path holds (8).
    def many(a, b, c, d, e, f, g, h, i=9, j=10):
        return [a, b, c, d, e, f, g, h, i, j]
    name = unique_name()
    pf.register_func(name, many)
    f = pf.get_global_func(name)
    assert list(f(1, 2, 3, 4, 5, 6, 7, h=8, j=0)) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 0]
    assert list(f(*range(8))) == [0, 1, 2, 3, 4, 5, 6, 7, 9, 10]


def test_register_func_publishes_the_python_signature(unique_name):
    name = unique_name()

    @pf.register_func(name)
    def scale(x, by: float = 2.0, label="s", on: bool = True, *, extra=1, **rest):
        return [x, by, label, on]
    f = pf.get_global_func(name)
    # Names and defaults; the grammar's types where an annotation is one.
    assert f.signature == 'any(x:any,by:float64=2.0,label:any="s",on:bool=true)'
    assert str(inspect.signature(f)) == "(x, by: float = 2.0, label='s', on: bool = True)"
    # A call with keywords, bound by the library and run by the callable.
    assert list(f(1, on=False)) == [1, 2.0, "s", False]
    assert list(f(x=3)) == [3, 2.0, "s", True]
    with pytest.raises(TypeError, match=r"got an unexpected keyword argument 'extra'"):
        f(1, extra=2)  # C passes arguments by position only


def test_register_func_positional_only_parameters_are_not_keywords(unique_name):
    def pos(a: int, b=2, /, c=3):
        return [a, b, c]
    name = unique_name()
    pf.register_func(name, pos)
    f = pf.get_global_func(name)
    # Unnamed, so that neither C nor Python can pass a by keyword.
    assert f.signature == "any(int64)"
    assert list(f(1)) == [1, 2, 3]
    assert list(f(1, 5, 6)) == [1, 5, 6]
    with pytest.raises(TypeError, match="keyword"):
        f(a=1)


def test_register_func_signature_edges(unique_name):
    def varargs(*a):
        return len(a)
    name = unique_name()
    pf.register_func(name, varargs)
    f = pf.get_global_func(name)
    assert f.signature is None  # the grammar has no *args
    assert f(1, 2, 3) == 3
    assert str(inspect.signature(f)) == "(*args)"

    def typed(n: int, t: "tensor<float64,1>" = None, items=[1], after=2) -> None:
        return None
    name = unique_name()
    pf.register_func(name, typed)
    f = pf.get_global_func(name)
    # A default no literal writes ends the published parameters (C callers
    # that leave them out get Python's defaults); -> None is void.
    assert f.signature == "void(n:int64,t:tensor<float64,1>=null)"
    assert f(1) is None

    def wrong_default(n: int = None, s: str = "\0") -> int:
        return 0
    name = unique_name()
    pf.register_func(name, wrong_default)
    # A default its annotation does not take makes the parameter any; a
    # str with a NUL has no literal.
    assert pf.get_global_func(name).signature == "int64(n:any=null)"


def test_register_func_publishes_element_types_optional_and_union(unique_name):
    def gen(xs: list[int], m: dict[str, float], o: typing.Optional[list[str]] = None,
            u: typing.Union[int, str] = 1, n: int | None = None, loose: list = None,
            objs: typing.List[object] = None, k: dict[float, int] = None,
            deep: list[list[list[list[list[list[list[list[list[int]]]]]]]]] = None,
            pair: int | str = 2) -> dict[str, list[int]]:
        return {"a": [len(xs)]}
    name = unique_name()
    pf.register_func(name, gen)
    f = pf.get_global_func(name)
    # The inverse of what inspect.signature shows for those types; a map
    # key the grammar refuses (float) leaves the map loose, and nesting
    # past the grammar's depth is any.
    assert f.signature == ("map<str,array<int64>>(xs:array<int64>,m:map<str,float64>,"
                           "o:optional<array<str>>=null,u:union<int64,str>=1,"
                           "n:optional<int64>=null,loose:any=null,objs:array<object>=null,k:map=null,"
                           "deep:any=null,pair:union<int64,str>=2)")
    params = inspect.signature(f).parameters
    assert params["xs"].annotation == list[int]
    assert params["o"].annotation == typing.Optional[list[str]]
    assert dict(f([1, 2], {"a": 1.0})) == {"a": [2]}


def test_released_function_with_keywords(testlib):
    f = pf.typed(testlib.pft_clamp, "float64(x: float64, lo: float64 = 0, hi: float64 = 1)")
    assert f(3, hi=2.0) == 2.0
    f.__del__()
    with pytest.raises(ValueError, match="released"):
        f(1, hi=2.0)
    with pytest.raises(ValueError, match="released"):
        f(1)
    gc.collect()


def test_defaults_only_where_the_signature_has_them(testlib):
    f = pf.typed(testlib.pft_clamp, "float64(float64, float64, float64)")
    assert f(5, 0, 1) == 1.0
    with pytest.raises(TypeError, match="takes 3 arguments, got 1"):
        f(5)
    g = pf.typed(testlib.pft_clamp, "float64(x: float64, lo: float64 = 0, hi: float64 = 1)")
    assert g(5) == 1.0
    assert g(5) == 1.0  # again, once the defaults were looked up


@pytest.mark.skipif(pf.backend != "cext", reason="the extension's fast path")
def test_extension_binds_plain_keywords_itself(fn):
    from packedfunc import _backend, _function
    seen = []

    def spy(func, args, kwargs):
        seen.append(kwargs)
        return _function._call_kw(func, args, kwargs)
    _backend.cext.set_hooks(call_kw=spy)
    try:
        assert fn("clamp")(1.5, hi=1.0) == 1.0      # plain values: no Python in between
        assert seen == []
        assert list(fn("kw_args")(1, d=[1]))[3] == [1]  # a list: the package converts it
        assert seen == [{"d": [1]}]
    finally:
        _backend.cext.set_hooks(call_kw=_function._call_kw)


# Names that share their first bytes: 7, 8, 9, 15, 16 and 17 bytes, each a
# prefix of the longer ones (tests/modules/mod_echo.c), in both orders.
PREFIXES = ["abcdefg", "abcdefgh", "abcdefghi", "abcdefghijklmno", "abcdefghijklmnop",
            "abcdefghijklmnopq"]


@pytest.fixture(scope="module")
def echo_module():
    module_dir = os.environ.get("PF_TEST_MODULE_DIR") or os.path.join(
        ROOT, os.environ.get("BUILD", "build"), "modules")
    return pf.load_module(os.path.join(module_dir, "mod_echo.so"))


@pytest.mark.parametrize("name", PREFIXES)
@pytest.mark.parametrize("func,order", [("kw_prefixes", PREFIXES),
                                        ("kw_prefixes_rev", PREFIXES[::-1])])
def test_a_keyword_binds_only_its_own_name(echo_module, func, order, name):
    f = getattr(echo_module, func)
    assert list(f(**{name: 5})) == [5 if p == name else 0 for p in order]


@pytest.mark.parametrize("name", ["interval", "position", "abcdefgh", "abcdefghijklmnop"])
def test_a_keyword_is_not_a_prefix_of_a_longer_name(echo_module, name):
    f = echo_module.kw_longer  # (interval_ms, position_x, abcdefghijklmnopq)
    with pytest.raises(TypeError,
                       match=r"^kw_longer\(\) got an unexpected keyword argument '%s'$" % name):
        f(**{name: 5})
    with pytest.raises(TypeError, match="unexpected keyword argument '%s'" % name):
        f(1, **{name: 5})  # with a positional argument too
