"""C++ classes as object types (pf::class_ in include/packedfunc/packedfunc.hpp),
from the fixture tests/modules/mod_cxx_layer.cc: the constructor and the
destructor run (the destructor exactly once), arithmetic members are fields,
a std::string member is a property (NAME() and set_NAME(value)), member
functions are methods, C++ exceptions become the mapped Python exceptions,
and C++ inheritance is the type's parent."""
import gc

import pytest

from conftest import load_fixture_module


@pytest.fixture(scope="module")
def cxxl():
    return load_fixture_module("mod_cxx_layer.so").cxxl


def test_constructor_fields_and_methods(cxxl):
    c = cxxl.Counter(3, "apples")
    assert c.count == 3 and c.rate == 0.5
    assert c.name() == "apples"
    assert c.bump() == 4 and c.bump(by=10) == 14 and c.count == 14
    c.count = 20
    assert c.describe() == "apples=20"
    c.set_name("pears")
    assert c.name() == "pears" and c.describe() == "pears=20"
    d = cxxl.Counter()
    assert d.count == 0 and d.name() == "counter"


def test_fields_are_checked(cxxl):
    c = cxxl.Counter()
    with pytest.raises(AttributeError):
        c.rate = 1.0  # read-only
    with pytest.raises(TypeError):
        c.count = "x"
    with pytest.raises(TypeError, match="set_name: argument 1 'value': expected str, got int"):
        c.set_name(5)


def test_exceptions_become_python_exceptions(cxxl):
    c = cxxl.Counter(1)
    with pytest.raises(IndexError, match="bump: by is 0"):
        c.bump(0)
    assert c.bump() == 2  # the object and the process live on
    with pytest.raises(ValueError, match="Counter: start < 0"):
        cxxl.Counter(-1)


def test_destructor_runs_exactly_once(cxxl):
    gc.collect()
    before = cxxl.destroyed()
    c = cxxl.Counter(1)
    s = cxxl.Special()
    del c, s
    gc.collect()
    assert cxxl.destroyed() == before + 2
    # A constructor that throws destroys nothing (no T was made).
    with pytest.raises(ValueError):
        cxxl.Counter(-5)
    gc.collect()
    assert cxxl.destroyed() == before + 2


def test_inheritance(cxxl):
    s = cxxl.Special()
    assert isinstance(s, cxxl.Special) and isinstance(s, cxxl.Counter)
    assert not isinstance(cxxl.Counter(), cxxl.Special)
    assert s.count == 100 and s.name() == "special"
    assert s.bump(5) == 105  # an inherited method
    assert s.shout() == "special=105"
    s.loud = True
    assert s.shout() == "special=105!"


def test_signatures(cxxl):
    c = cxxl.Counter()
    assert "int64(self:object,by:int64=1)" in c.bump.__doc__
