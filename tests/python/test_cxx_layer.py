"""A plugin written with the C++ layer (tests/modules/mod_cxx_layer.cc, over
include/packedfunc/packedfunc.hpp), used from Python: signatures deduced from
the C++ types with names and defaults from pf::arg, and each C++ exception a
function throws raised as the mapped Python exception, with the process
alive afterwards."""
import re

import numpy as np
import pytest

from conftest import load_fixture_module


@pytest.fixture(scope="module")
def cxxl():
    return load_fixture_module("mod_cxx_layer.so").cxxl


def test_signatures_come_from_the_cxx_types(cxxl):
    assert "float64(x:float64,lo:float64=0.0,hi:float64=1.0)" in cxxl.clamp.__doc__
    assert "str(name:str,greeting:str=\"hello\")" in cxxl.greet.__doc__
    assert "float64(x:tensor,scale:float64=1.0)" in cxxl.total.__doc__
    assert "int64(what:str)" in getattr(cxxl, "raise").__doc__


def test_defaults_and_keywords(cxxl):
    assert cxxl.clamp(7.5) == 1.0
    assert cxxl.clamp(7.5, hi=5) == 5.0
    assert cxxl.clamp(-1, 0, 5) == 0.0
    assert cxxl.greet("ada") == "hello, ada"
    assert cxxl.greet("ada", greeting="hi") == "hi, ada"
    assert cxxl.total(np.arange(4, dtype=np.float64)) == 6.0
    assert cxxl.total(np.arange(8, dtype=np.float64)[::2], scale=2) == 24.0
    assert cxxl.next_id() + 1 == cxxl.next_id()  # a std::function
    assert cxxl.flag(True, 5) == 5 and cxxl.flag(False, 5) == -5


def test_a_flags_record_beside_pf_def_marks_it_non_blocking(cxxl):
    assert cxxl.clamp.release_gil is False and cxxl.total.release_gil is True
    assert cxxl.clamp(0.5) == 0.5


def test_arguments_are_checked(cxxl):
    with pytest.raises(TypeError, match=r"cxxl.clamp: argument 0 'x': expected float64, got str"):
        cxxl.clamp("x")
    with pytest.raises(ValueError, match=r"cxxl.flag: argument 1: expected int8, got int 300"):
        cxxl.flag(True, 300)
    with pytest.raises(ValueError, match=r"cxxl.flag: argument 0: expected bool, got int 2"):
        cxxl.flag(2, 1)
    with pytest.raises(TypeError):
        cxxl.clamp(1.0, 2.0, 3.0, 4.0)


RAISES = [
    ("invalid_argument", ValueError, "bad argument: invalid_argument"),
    ("domain_error", ValueError, "outside the domain: domain_error"),
    ("out_of_range", IndexError, "out of range: out_of_range"),
    ("bad_alloc", MemoryError, "std::bad_alloc"),
    ("runtime_error", RuntimeError, "it failed: runtime_error"),
    ("logic_error", RuntimeError, "a logic error: logic_error"),
    ("user", KeyError, "no such key: user"),  # a user type, by pf::error_kind
    ("pf_error", NotImplementedError, "not yet: pf_error"),
    ("int", RuntimeError, "unknown C++ exception"),
]


@pytest.mark.parametrize("what,exc,message", RAISES, ids=[r[0] for r in RAISES])
def test_each_cxx_exception_becomes_its_python_exception(cxxl, what, exc, message):
    fn = getattr(cxxl, "raise")
    with pytest.raises(exc, match=re.escape(message)):
        fn(what)
    # The process lives, and the function still works.
    assert fn("nothing") == 0


def test_a_throwing_function_inside_a_call_from_cxx(cxxl):
    with pytest.raises(ValueError, match="clamp: lo > hi"):
        cxxl.clamp(0.5, 2, 1)
    assert cxxl.apply(lambda x: x + 1, 2.0) == 6.0

    def fails(x):
        raise IndexError("from Python %s" % x)
    # A callback's error crosses C++ as a pf::Error and comes back as its kind.
    with pytest.raises(IndexError, match="from Python 2.0"):
        cxxl.apply(fails, 2.0)
    with pytest.raises(ValueError, match="tensor"):
        cxxl.total(np.arange(4), 1)
