"""C++ classes as object types (pf::class_ in include/packedfunc/packedfunc.hpp),
from the fixture tests/modules/mod_cxx_layer.cc: the constructor and the
destructor run (the destructor exactly once), arithmetic and std::string
members are fields (a std::string one an accessor field of type str), member
functions are methods, static member functions static methods, C++
exceptions become the mapped Python exceptions, and C++ inheritance is the
type's parent."""
import copy
import gc
import pickle
import re

import packedfunc

import pytest

from conftest import load_fixture_module


@pytest.fixture(scope="module")
def cxxl():
    return load_fixture_module("mod_cxx_layer.so").cxxl


def test_constructor_fields_and_methods(cxxl):
    c = cxxl.Counter(3, "apples")
    assert c.count == 3 and c.rate == 0.5
    assert c.name == "apples"
    assert c.bump() == 4 and c.bump(by=10) == 14 and c.count == 14
    c.count = 20
    assert c.describe() == "apples=20"
    c.name = "pears"
    assert c.name == "pears" and c.describe() == "pears=20"
    c.name = "caf\u00e9 \u2615"  # UTF-8 through the std::string
    assert c.name == "caf\u00e9 \u2615" and c.describe() == "caf\u00e9 \u2615=20"
    d = cxxl.Counter()
    assert d.count == 0 and d.name == "counter" and d.unit == "items"


def test_string_members_are_fields_in_the_reflection(cxxl):
    fields = {f.name: f for f in cxxl.Counter.__pf_type_info__.fields}
    assert fields["name"] == ("name", "str", True, "Its name.", "cxxl.Counter")
    assert fields["unit"] == ("unit", "str", False, None, "cxxl.Counter")
    assert fields["count"].type == "int64" and fields["count"].writable
    methods = {m.name for m in cxxl.Counter.__pf_type_info__.methods}
    assert "name" not in methods and "set_name" not in methods
    assert cxxl.Counter.name.type == "str" and cxxl.Counter.name.writable
    assert not cxxl.Counter.unit.writable


def test_fields_are_checked(cxxl):
    c = cxxl.Counter()
    with pytest.raises(AttributeError):
        c.rate = 1.0  # read-only
    with pytest.raises(TypeError):
        c.count = "x"
    with pytest.raises(TypeError, match="field 'name' of cxxl.Counter: expected str, got int"):
        c.name = 5
    with pytest.raises(TypeError, match="field 'name' of cxxl.Counter: expected str, got null"):
        c.name = None
    with pytest.raises(AttributeError, match="field 'unit' of cxxl.Counter is read-only"):
        c.unit = "kg"
    assert c.name == "counter" and c.unit == "items"  # unchanged by the failed writes


def test_static_methods(cxxl):
    assert cxxl.Counter.parse("42") == 42
    assert cxxl.Counter().parse(text="-7") == -7  # on an instance too, without it
    with pytest.raises(ValueError, match="parse: not a number: 'x'"):
        cxxl.Counter.parse("x")
    (parse,) = [m for m in cxxl.Counter.__pf_type_info__.methods if m.name == "parse"]
    assert parse.static and parse.signature == "int64(text:str)"
    assert cxxl.Special.parse("5") == 5  # inherited


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
    assert s.count == 100 and s.name == "special"
    assert s.bump(5) == 105  # an inherited method
    assert s.shout() == "special=105"
    s.loud = True
    assert s.shout() == "special=105!"


def test_signatures(cxxl):
    c = cxxl.Counter()
    assert "int64(self:object,by:int64=1)" in c.bump.__doc__


# Instances rebuilt from their fields (PFFromJSON): pickling, deep copies
# and documents default-construct the C++ object, then write each field.
def _same_note(a, b):
    assert type(a) is type(b) and a is not b
    assert (a.text, a.stars) == (b.text, b.stars)
    assert a.show() == b.show()  # a C++ object that methods work on


def test_a_note_pickles(cxxl):
    n = cxxl.Note("caf\u00e9, a text longer than a small-string buffer", 3)
    _same_note(n, pickle.loads(pickle.dumps(n)))


def test_a_note_deep_copies_keeping_sharing(cxxl):
    n = cxxl.Note("shared", 2)
    _same_note(n, copy.deepcopy(n))
    pair = copy.deepcopy(packedfunc.List([n, n]))
    _same_note(n, pair[0])
    assert packedfunc.same_as(pair[0], pair[1])


def test_a_note_through_json(cxxl):
    n = cxxl.Note("json", 1)
    _same_note(n, packedfunc.from_json(packedfunc.to_json(n)))


def test_a_derived_instance_pickles_with_its_inherited_fields(cxxl):
    s = cxxl.Special()
    s.loud, s.name = True, "renamed"
    s.bump(5)
    t = pickle.loads(pickle.dumps(s))
    assert type(t) is cxxl.Special
    assert (t.count, t.rate, t.name, t.unit, t.loud) == (105, 0.5, "renamed", "items", True)
    assert t.shout() == "renamed=105!"


def test_rebuilt_instances_are_destroyed_once(cxxl):
    gc.collect()
    before = cxxl.destroyed()
    s = pickle.loads(pickle.dumps(cxxl.Special()))
    del s
    gc.collect()
    assert cxxl.destroyed() == before + 2  # the original and the copy


def test_a_class_without_a_default_constructor_is_not_rebuilt(cxxl):
    c = cxxl.Counter(3, "x")
    text = pickle.dumps(c)  # the document is written
    message = re.escape("PFFromJSON: node 0: cxxl.Counter cannot be rebuilt from its fields: its "
                        "C++ type has no default constructor")
    with pytest.raises(TypeError, match=message):
        pickle.loads(text)
    with pytest.raises(TypeError, match=message):
        copy.deepcopy(c)
    with pytest.raises(TypeError, match=message):
        packedfunc.from_json(packedfunc.to_json(c))
