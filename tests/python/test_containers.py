"""Containers: list, tuple and dict as Array and Map, and back.

Values cross through the functions of pf_testlib.c: testing.echo returns
its argument as C received it, testing.call calls a function from C,
testing.call_each calls every function of an Array, testing.map_get looks
a key up with C's own PFMapGetItem.
"""
import collections
import collections.abc
import enum
import gc
import inspect
import os
import sys
import weakref

import hypothesis.configuration
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import packedfunc as pf
from packedfunc import _callback, _hostobj, _nesting

if os.environ.get("PF_TESTLIB"):
    hypothesis.configuration.set_hypothesis_home_dir(
        os.path.join(os.path.dirname(os.environ["PF_TESTLIB"]), "hypothesis"))


@pytest.fixture
def echo(fn):
    return fn("echo")


class Thing:
    pass


# ---- round trips ----------------------------------------------------------------

def test_the_issue_example_round_trips(echo):
    value = [1, [2.5, "x"], {"k": None}]
    r = echo(value)
    assert r == value and value == r
    assert type(r) is pf.Array and type(r[1]) is pf.Array and type(r[2]) is pf.Map
    assert r[2]["k"] is None


def test_every_item_type_round_trips(echo, fn):
    thing = Thing()
    f = pf.convert(lambda x: x * 2)
    shape = pf.Shape((2, 3))
    value = [1, -2**63, 2**63 - 1, 2.5, True, False, None, "text", "", "\u00e9\u4e2d", b"\0\1",
             b"", bytearray(b"ba"), pf.DataType("float32"), pf.Device("cpu"), thing, f, shape,
             (1, 2), [], {}, {"a": [1]}]
    r = echo(value)
    assert len(r) == len(value)
    assert r[:7] == value[:7] and type(r[4]) is bool and r[6] is None
    assert r[7:10] == ["text", "", "\u00e9\u4e2d"]
    assert r[10] == b"\0\1" and r[11] == b"" and r[12] == b"ba"
    assert r[13] == pf.DataType("float32") and r[14] == pf.Device("cpu")
    assert r[15] is thing  # a host object comes back as itself
    assert r[16] == f and r[16](21) == 42
    assert type(r[17]) is pf.Shape and r[17] == (2, 3)
    assert r[18] == (1, 2) and r[19] == [] and r[20] == {} and r[21] == {"a": [1]}


def test_a_numpy_array_item_becomes_a_tensor_object(echo, fn):
    a = np.arange(4.0)
    r = echo([a])
    assert fn("object_type")(echo([a])) == "array"
    back = r[0]
    assert isinstance(back, np.ndarray) and back.tolist() == [0.0, 1.0, 2.0, 3.0]
    back[0] = 9.0  # a view of the same memory: the tensor object took the export
    assert a[0] == 9.0


def test_c_sees_array_map_and_shape(fn):
    assert fn("object_type")([1]) == "array"
    assert fn("object_type")((1,)) == "array"
    assert fn("object_type")({"a": 1}) == "map"
    assert fn("object_type")(pf.Shape([1])) == "shape"


def test_subclasses_cross_as_their_kind(echo):
    point = collections.namedtuple("Point", "x y")(1, 2)
    assert echo(point) == (1, 2) and type(echo(point)) is pf.Array
    ordered = collections.OrderedDict([("b", 1), ("a", 2)])
    assert list(echo(ordered)) == ["b", "a"]


def test_a_container_passes_back_as_itself(echo, fn):
    a = pf.convert([1, 2])
    assert echo(a).handle == a.handle  # no re-encoding: the same C object
    assert fn("typed_array_size")(a) == 2
    m = pf.convert({1: 2})
    assert echo(m).handle == m.handle


def test_a_list_met_twice_is_shared_not_a_cycle(echo):
    shared = [1, 2]
    r = echo([shared, shared, (shared, {"s": shared})])
    assert r == [[1, 2], [1, 2], ([1, 2], {"s": [1, 2]})]
    assert r[0].handle == r[1].handle


def test_wide_diamonds_convert_once_each(echo):
    # Each level holds the one below twice: 2**60 paths, 60 containers.
    x = [0]
    for _ in range(60):
        x = [x, x]
    r = echo(x)
    for _ in range(60):
        r = r[1]
    assert r == [0]


def test_convert_gives_array_and_map(pf):
    a = pf.convert((1, "x"))
    assert type(a) is pf.Array and a == [1, "x"]
    m = pf.convert({"k": [1]})
    assert type(m) is pf.Map and m == {"k": [1]}
    assert pf.Array([1, 2]) == [1, 2] and pf.Map({"a": 1}) == {"a": 1}
    assert pf.Array() == [] and pf.Map() == {}


def test_container_classes_are_exported(pf):
    for name in ("Array", "Map", "Shape"):
        assert name in pf.__all__
    assert issubclass(pf.Array, collections.abc.Sequence)
    assert issubclass(pf.Map, collections.abc.Mapping)
    assert issubclass(pf.Shape, collections.abc.Sequence)
    assert issubclass(pf.Array, pf.Object)


# ---- Array, Map, Shape as Python containers ----------------------------------------

def test_array_is_a_read_only_sequence(echo):
    a = echo([10, 20, 30, 20])
    assert len(a) == 4
    assert a[0] == 10 and a[-1] == 20 and a[-4] == 10
    assert a[1:3] == [20, 30] and type(a[1:3]) is list
    assert a[::-1] == [20, 30, 20, 10] and a[5:] == []
    assert list(a) == [10, 20, 30, 20] and list(reversed(a)) == [20, 30, 20, 10]
    assert 30 in a and 40 not in a
    assert a.index(20) == 1 and a.count(20) == 2
    with pytest.raises(IndexError, match="out of range"):
        a[4]
    with pytest.raises(IndexError):
        a[-5]
    with pytest.raises(TypeError):
        a["x"]
    with pytest.raises(TypeError):
        a[0] = 1
    with pytest.raises(AttributeError):
        a.append(1)


def test_array_equality_and_repr(echo):
    a = echo([1, "x", [2.5]])
    assert a == [1, "x", [2.5]] and a == (1, "x", [2.5]) and a == echo([1, "x", [2.5]])
    assert a != [1, "x"] and a != [1, "x", [2.0]] and a != "abc" and a != {1: 2}
    # printed as the tuple it equals (and hashes as), as tvm-ffi prints it
    assert repr(a) == str(a) == "(1, 'x', (2.5,))"
    assert repr(echo([7])) == "(7,)" and repr(echo([])) == "()" and str(echo(())) == "()"
    assert str(pf.convert([1, 2, 3])) == "(1, 2, 3)"
    assert repr(echo([[], [[1]], {"k": [2, 3]}])) == "((), ((1,),), {'k': (2, 3)})"


def test_map_is_a_read_only_mapping(echo):
    m = echo({"b": 1, 2: "two", "a": [3]})
    assert len(m) == 3
    assert m["b"] == 1 and m[2] == "two" and m["a"] == [3]
    assert list(m) == ["b", 2, "a"]  # insertion order
    assert list(m.keys()) == ["b", 2, "a"]
    assert list(m.values()) == [1, "two", [3]]
    assert list(m.items()) == [("b", 1), (2, "two"), ("a", [3])]
    assert m.get("zz") is None and m.get("zz", 5) == 5 and m.get(2) == "two"
    assert "b" in m and 2 in m and "2" not in m and 2.5 not in m and None not in m
    assert "a\0" not in m and 2**70 not in m and "\udcff" not in m
    with pytest.raises(KeyError):
        m["missing"]
    with pytest.raises(KeyError):
        m[[1]]
    with pytest.raises(TypeError):
        m["b"] = 2
    assert m == {"a": [3], 2: "two", "b": 1}  # order does not matter for ==
    assert m != {"a": [3], 2: "two"} and m != {"a": [3], 2: "two", "b": 2} and m != [1]
    assert repr(echo({"k": None, 1: "x"})) == "{'k': None, 1: 'x'}"


def test_map_with_int_keys(echo, fn):
    m = echo({1: "one", -2**63: "min", 2**63 - 1: "max"})
    assert m[1] == "one" and m[-2**63] == "min" and m[2**63 - 1] == "max"
    assert m[True] == "one"  # True == 1 in Python, as in a dict
    assert fn("map_get")(m, 1) == "one" and fn("map_get")(m, "1") is None
    assert fn("map_get")({"1": "s", 1: "i"}, "1") == "s"
    assert fn("typed_map_size")({1: 2, "1": 3}) == 2
    with pytest.raises(OverflowError, match=r"argument 0, dict key 0: int .* does not fit"):
        echo({2**64: 1})


class LyingStr(str):
    def __str__(self):
        return "lie"

    def encode(self, *args, **kwargs):
        return b"lie"

    def __hash__(self):
        return str.__hash__(self)


class LyingInt(int):
    def __int__(self):
        return 99

    def __index__(self):
        return 98

    def __and__(self, other):
        return 97

    def __hash__(self):
        return int.__hash__(self)


class Level(enum.IntEnum):
    HIGH = 3


def test_subclass_items_and_keys_cross_as_their_value(echo, fn):
    a = echo([LyingStr("abc"), LyingInt(5), Level.HIGH, True])
    assert list(a) == ["abc", 5, 3, True]
    assert [type(x) for x in a] == [str, int, int, bool]
    m = echo({LyingStr("k"): LyingStr("v"), LyingInt(5): Level.HIGH, Level.HIGH: 1})
    assert list(m.items()) == [("k", "v"), (5, 3), (3, 1)]
    assert fn("map_get")(m, "k") == "v" and fn("map_get")(m, 5) == 3
    assert pf.Map({LyingStr("k"): 1}) == {"k": 1} and pf.Array([LyingInt(4)]) == [4]


def test_map_lookups_follow_dict_rules(echo):
    from fractions import Fraction
    from decimal import Decimal
    d = {2: "two", 0: "zero", "k": "kay", -2**63: "min"}
    m = echo(d)
    # Keys that a dict finds: subclasses by their value, numbers that
    # equal an int key (2.0, True, Fraction(2), Decimal(2), 2+0j, numpy).
    for key in (2, 2.0, LyingInt(2), Fraction(2), Decimal(2), 2 + 0j, np.int64(2),
                np.float64(2.0), False, 0.0, -0.0, "k", LyingStr("k"), float(-2**63)):
        assert key in d, key
        assert key in m, key
        assert m[key] == d[key] and m.get(key) == d.get(key), key
    assert m[Level.HIGH - 1] == "two" and m[True - 1] == "zero"
    # Keys that it does not: never a TypeError for `in` or get.
    for key in (2.5, float("nan"), float("inf"), Fraction(5, 2), Decimal("2.5"), 2 + 1j,
                np.float64(2.5), LyingStr("lie"), "lie", 1, 2**64, float(2**64), 2.000001):
        assert key not in d, key
        assert key not in m, key
        assert m.get(key, "absent") == "absent", key
        with pytest.raises(KeyError):
            m[key]
    assert 1 not in echo({}) and 1.0 not in echo({})
    ones = echo({1: "one"})
    assert True in ones and ones[True] == "one" and ones[1.0] == "one"


def test_shape_is_a_tuple_of_ints(echo, fn):
    s = pf.Shape([2, 3, -1])
    assert s == (2, 3, -1) and (2, 3, -1) == s and s != [2, 3, -1] and s != (2, 3)
    assert hash(s) == hash((2, 3, -1)) and {s: 1}[(2, 3, -1)] == 1
    assert len(s) == 3 and s[-1] == -1 and s[:2] == (2, 3) and list(s) == [2, 3, -1]
    assert repr(s) == "Shape(2, 3, -1)"
    r = fn("typed_make_shape")(4, 5)
    assert type(r) is pf.Shape and r == (4, 5)
    assert echo(r) == (4, 5) and pf.Shape(()) == ()
    with pytest.raises(OverflowError):
        pf.Shape([2**63])
    with pytest.raises(TypeError):
        pf.Shape([1.5])


def test_typed_signatures_show_the_container_classes(fn):
    sig = inspect.signature(fn("typed_make_shape"))
    assert sig.return_annotation is pf.Shape
    assert fn("typed_array_size")([1, 2, 3]) == 3
    with pytest.raises(TypeError, match="argument 0"):
        fn("typed_array_size")({"a": 1})  # a Map where an Array is expected


# ---- callbacks ----------------------------------------------------------------------

def test_callbacks_receive_and_return_containers(fn):
    seen = []

    def cb(arr, m):
        seen.append((type(arr), type(m)))
        return [arr[0] + m["k"], {"n": len(arr)}]

    r = fn("call")(cb, [1, 2], {"k": 10})
    assert r == [11, {"n": 2}] and seen == [(pf.Array, pf.Map)]
    # From a C thread too.
    assert fn("call_in_thread")(cb, (5,), {"k": 1}) == [6, {"n": 1}]


def test_a_callback_may_keep_the_containers_it_received(fn):
    kept = []
    fn("call")(kept.append, [1, [2, {"a": "b"}]])
    gc.collect()
    assert kept[0] == [1, [2, {"a": "b"}]]


def test_containers_of_functions_are_called_from_c(fn):
    calls = []

    def make(k):
        def f(x):
            calls.append(k)
            return x + k
        return f

    r = fn("call_each")([make(1), make(2), fn("echo")], 40)
    assert r == [41, 42, 40] and calls == [1, 2]
    r = fn("call_each")(pf.convert((lambda x: [x, {"x": x}],)), 7)
    assert r == [[7, {"x": 7}]]


# ---- bad input ----------------------------------------------------------------------

def _nested(levels, kind=list):
    root = inner = []
    for _ in range(levels - 1):
        inner.append([] if kind is list else {})
        inner = inner[0] if kind is list else inner
    return root


def test_nesting_limit(echo):
    assert _nesting.MAX_DEPTH == 1000
    ok = _nested(1000)
    r = echo(ok)
    for _ in range(999):
        r = r[0]
    assert r == []
    with pytest.raises(ValueError, match="argument 0 is nested deeper than 1000 levels"):
        echo(_nested(1001))
    deep = d = {}
    for _ in range(5000):
        d["k"] = {}
        d = d["k"]
    with pytest.raises(ValueError, match="nested deeper than 1000"):
        echo(deep)
    with pytest.raises(ValueError, match="nested deeper"):
        pf.convert(_nested(100000))  # no RecursionError, no crash


def test_self_containing_list_and_dict(echo):
    a = [1]
    a.append(a)
    with pytest.raises(ValueError, match=r"argument 0 at \[1\] contains itself"):
        echo(a)
    d = {"x": 1}
    d["self"] = [d]
    with pytest.raises(ValueError, match=r"argument 0 at \['self'\]\[0\] contains itself"):
        echo(d)
    with pytest.raises(ValueError, match="the callback's result at"):
        pf.get_global_func("testing.call")(lambda: a)


@pytest.mark.parametrize("key", [1.5, None, (1,), b"k", Thing(), frozenset()],
                         ids=lambda k: type(k).__name__)
def test_bad_key_types(echo, key):
    with pytest.raises(TypeError, match=r"argument 0 at \[1\], dict key 1 \(.*\) has "
                       r"unsupported type %s \(keys are str or int\)" % type(key).__qualname__):
        echo([0, {"ok": 1, key: 2}])


def test_bad_items_name_their_path(echo, fn):
    with pytest.raises(OverflowError, match=r"argument 1 at \['a'\]\[2\]: int"):
        fn("nargs")(0, {"a": [0, 1, 2**64]})
    with pytest.raises(ValueError, match=r"argument 0 at \[0\]: str contains a lone surrogate"):
        echo(["\ud800"])
    with pytest.raises(ValueError, match=r"argument 0, dict key 0: str contains a NUL"):
        echo({"a\0": 1})


# ---- leaks ------------------------------------------------------------------------------

def test_no_leak_over_5000_create_convert_drop_cycles(echo):
    # Refcount and table based (tracemalloc would make this minutes long):
    # each cycle puts a host object and a callable into a nested container,
    # so a C container that leaked would keep them in the binding's tables
    # and a Python wrapper that leaked would stay in the collector's list.
    # The counts are exact, and a wrapper leaked per cycle is 5000 more
    # objects than the bound: 5000 cycles find what 100000 did.
    thing = Thing()
    refs = sys.getrefcount(thing)

    def cb(x):
        return x

    def cycle(i):
        r = echo([i, {"k": [thing, cb]}])
        if i % 1000 == 0:
            assert r[1]["k"][0] is thing and r[0] == i
        pf.convert({"a": (i,)})

    for i in range(1000):
        cycle(i)
    gc.collect()
    live, objects = _callback.live_count(), _hostobj.live_count()
    gc_before = len(gc.get_objects())
    for i in range(5000):
        cycle(i)
    gc.collect()
    assert _callback.live_count() == live and _hostobj.live_count() == objects
    assert len(gc.get_objects()) - gc_before < 1000
    assert sys.getrefcount(thing) == refs


def test_an_array_releases_its_reference_when_collected(echo):
    thing = Thing()
    watch = weakref.ref(thing)
    a = pf.convert([thing])
    del thing
    gc.collect()
    assert watch() is not None  # the C Array holds it
    del a
    gc.collect()
    assert watch() is None


# ---- property: round trips ------------------------------------------------------------

_scalars = st.one_of(st.integers(-2**63, 2**63 - 1),
                     st.floats(allow_nan=False),
                     st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                                    blacklist_characters="\0")))
_keys = st.one_of(st.integers(-2**63, 2**63 - 1),
                  st.text(alphabet=st.characters(blacklist_categories=("Cs",),
                                                 blacklist_characters="\0")))
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=5), st.dictionaries(_keys, inner, max_size=5)), max_leaves=30)


@settings(max_examples=150, deadline=None, database=None)
@given(_values)
def test_nested_round_trip_property(value):
    r = pf.get_global_func("testing.echo")(value)
    assert r == value
    assert _plain(r) == value


def _plain(x):
    """The list/dict form of an Array/Map, all the way down."""
    if isinstance(x, pf.Array):
        return [_plain(v) for v in x]
    if isinstance(x, pf.Map):
        return {k: _plain(v) for k, v in x.items()}
    return x


# ---- concatenation (issue 36) --------------------------------------------------

@pytest.mark.parametrize("kind", [pf.Array, pf.List])
def test_add_gives_the_left_operands_kind(kind):
    a = kind([1, 2])
    for other in ([3, "x"], (3, "x"), pf.Array([3, "x"]), pf.List([3, "x"])):
        out = a + other
        assert type(out) is kind
        assert list(out) == [1, 2, 3, "x"]
    assert list(a) == [1, 2]  # neither operand changes


@pytest.mark.parametrize("kind", [pf.Array, pf.List])
def test_list_or_tuple_plus_container_uses_radd(kind):
    for left in ([0], (0,)):
        out = left + kind([1, 2])
        assert type(out) is kind
        assert list(out) == [0, 1, 2]
    assert list(kind() + []) == [] and list([] + kind()) == []


@pytest.mark.parametrize("kind", [pf.Array, pf.List])
@pytest.mark.parametrize("other", [1, "ab", None, {1: 2}, {1}, iter([1])])
def test_add_with_a_non_sequence_is_a_type_error(kind, other):
    with pytest.raises(TypeError):
        kind([1]) + other
    with pytest.raises(TypeError):
        other + kind([1])



def test_array_and_map_hash_by_content(echo):
    # Immutable, so hashable by what they hold, as a tuple and a frozenset
    # are (equal to a list or a set, yet hashable): an Array hashes as the
    # tuple of its items, which it equals; a Map as the frozenset of its
    # items. List and Dict, mutable, stay unhashable.
    a, b = pf.Array([1, "x", (2.5,)]), echo([1, "x", (2.5,)])
    assert hash(a) == hash(b) == hash((1, "x", (2.5,)))
    assert len({a, b}) == 1 and {a: "v"}[b] == "v" and {a: "v"}[(1, "x", (2.5,))] == "v"
    assert hash(pf.Array([])) == hash(())
    m, n = pf.Map({"x": 1, 2: "y"}), echo({2: "y", "x": 1})
    assert hash(m) == hash(n) == hash(frozenset({("x", 1), (2, "y")}))
    assert len({m, n}) == 1 and {m: "v"}[n] == "v"
    assert hash(pf.Array([1, 2])) != hash(pf.Array([2, 1]))
    # What holds an unhashable value is unhashable, as a tuple holding a list.
    with pytest.raises(TypeError, match="unhashable type: 'List'"):
        hash(pf.Array([pf.List([1])]))
    with pytest.raises(TypeError, match="unhashable type: 'Dict'"):
        hash(pf.Map({"k": pf.Dict()}))
    with pytest.raises(TypeError, match="unhashable"):
        hash(pf.List([1]))
    with pytest.raises(TypeError, match="unhashable"):
        hash(pf.Dict({"k": 1}))
