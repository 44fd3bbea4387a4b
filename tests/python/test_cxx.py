"""A plugin written in C++17 (tests/modules/mod_cxx.cc, built by g++ with
-Wall -Wextra -Werror) registers with the C macros as they are: packed and
typed functions (named parameters, defaults, a constrained tensor, a static
member function) and an object type, used here from Python."""
import ctypes

import numpy as np
import pytest

from conftest import load_fixture_module

from packedfunc import _ffi


@pytest.fixture(scope="module")
def cxx():
    return load_fixture_module("mod_cxx.so")


def test_functions_of_both_languages_share_one_table(cxx):
    assert cxx.list_function_names() == ["cxx.c_half", "cxx.clamp", "cxx.scale", "cxx.sum",
                                         "cxx.sum2", "cxx.total"]
    assert cxx.cxx.c_half(84) == 42  # registered by the library's C file


def test_packed_functions(cxx):
    assert cxx.cxx.sum(40, 1, 1) == 42
    assert cxx.cxx.sum.__doc__.startswith("Sums ints.")
    with pytest.raises(TypeError, match="cxx.sum: argument 1 is not an int"):
        cxx.cxx.sum(1, "x")
    # A signature kept as metadata does not make it typed: every argument passes.
    assert cxx.cxx.sum2(40, 2) == 42


def test_typed_functions_with_names_and_defaults(cxx):
    assert cxx.cxx.clamp(7.5, 0, 5) == 5.0
    assert cxx.cxx.clamp(-1, 0, 5) == 0.0
    assert cxx.cxx.scale(21, 2) == 42  # a static member function
    assert "float64(x:float64,lo:float64=0.0,hi:float64=1.0)" in cxx.cxx.clamp.__doc__
    with pytest.raises(TypeError):
        cxx.cxx.scale(1.5, 2)


def test_a_constrained_tensor_parameter(cxx):
    assert cxx.cxx.total(np.arange(4, dtype=np.float64), 2) == 12.0
    with pytest.raises((TypeError, ValueError), match="float64"):
        cxx.cxx.total(np.arange(4), 1)  # int64
    with pytest.raises((TypeError, ValueError), match="contiguous"):
        cxx.cxx.total(np.arange(8, dtype=np.float64)[::2], 1)


def test_an_object_type_from_cxx(cxx):
    from packedfunc import Function
    index = ctypes.c_uint32()
    assert _ffi.PFObjectTypeFind(b"cxx.Counter", ctypes.byref(index)) == 0 and index.value
    handle = ctypes.c_void_p()
    assert _ffi.PFObjectTypeGetConstructor(index.value, ctypes.byref(handle)) == 0
    make = Function._adopt(handle.value)
    assert _ffi.PFObjectTypeGetMethod(index.value, b"add", ctypes.byref(handle)) == 0
    add = Function._adopt(handle.value)
    counter = make(40)
    assert add(counter, 2) == 42
    assert add(counter, 0) == 42
    with pytest.raises(TypeError, match="cxx.Counter"):
        add(make, 1)  # not a Counter
