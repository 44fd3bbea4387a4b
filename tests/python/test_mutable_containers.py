"""List and Dict: C's mutable containers as Python's MutableSequence and
MutableMapping, sharing the one C object with C.

Each behaviour is checked against a plain list or dict doing the same
(results and errors alike). C changes the containers through the
functions of pf_testlib.c: testing.list_append, testing.list_pop,
testing.dict_set, testing.dict_get and the typed testing.typed_list_push
(`int64(list,int64)`), testing.typed_dict_size (`int64(dict)`) and
testing.typed_make_list (`list(int64)`). Runs on both backends (make
test-python runs the whole suite once per backend).
"""
import collections.abc
import copy
import gc
import math
import os
import pickle
import sys
import threading

import hypothesis.configuration
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import packedfunc as pf
from packedfunc import _callback, _hostobj

from conftest import malloc_in_use

if os.environ.get("PF_TESTLIB"):
    hypothesis.configuration.set_hypothesis_home_dir(
        os.path.join(os.path.dirname(os.environ["PF_TESTLIB"]), "hypothesis"))

INT64_MIN, INT64_MAX = -2**63, 2**63 - 1


@pytest.fixture
def echo(fn):
    return fn("echo")


class Thing:
    pass


def raises_like(expected_fn, actual_fn):
    """Runs both; they must raise the same exception type with the same
    message, or return equal results."""
    try:
        expected = expected_fn()
    except Exception as err:  # noqa: BLE001 (the point is to compare)
        with pytest.raises(type(err)) as info:
            actual_fn()
        assert str(info.value) == str(err)
        return
    assert actual_fn() == expected


# ---- List ------------------------------------------------------------------------

def test_list_is_a_mutable_sequence(pf):
    lst = pf.List([1, "a", 2.5, None, True, b"x"])
    assert isinstance(lst, collections.abc.MutableSequence)
    assert isinstance(lst, pf.Object) and not isinstance(lst, pf.Array)
    assert len(lst) == 6 and lst == [1, "a", 2.5, None, True, b"x"]
    assert lst[0] == 1 and lst[-1] == b"x" and lst[1:3] == ["a", 2.5]
    assert type(lst[1:3]) is list and lst[::2] == [1, 2.5, True]
    assert list(lst) == [1, "a", 2.5, None, True, b"x"] and "a" in lst and 7 not in lst
    assert type(lst[4]) is bool and lst.index(2.5) == 2 and lst.count(None) == 1
    assert repr(pf.List([1, "a"])) == "List([1, 'a'])"
    assert pf.List() == [] and pf.List((1, 2)) == (1, 2) and pf.List(range(3)) == [0, 1, 2]
    with pytest.raises(TypeError):
        hash(lst)


def test_list_operations_match_a_python_list(pf):
    model, lst = [], pf.List()
    steps = [
        lambda s: s.append(1), lambda s: s.extend([2, 3, 4]), lambda s: s.insert(0, 0),
        lambda s: s.insert(-1, 35), lambda s: s.insert(100, 9), lambda s: s.insert(-100, -1),
        lambda s: s.pop(), lambda s: s.pop(0), lambda s: s.pop(-2),
        lambda s: s.__setitem__(1, "one"), lambda s: s.__setitem__(-1, 4.5),
        lambda s: s.__delitem__(0), lambda s: s.__delitem__(-1),
        lambda s: s.__setitem__(slice(1, 2), [7, 8, 9]), lambda s: s.__setitem__(slice(0, 0), [6]),
        lambda s: s.__setitem__(slice(None, None, 2), ["a", "b", "c"]),
        lambda s: s.__delitem__(slice(1, 3)), lambda s: s.__delitem__(slice(None, None, -2)),
        lambda s: s.extend(range(5)), lambda s: s.remove(3), lambda s: s.reverse(),
        lambda s: s.__iadd__((10, 11)),
        lambda s: s.sort(key=str), lambda s: s.sort(key=str, reverse=True),
        lambda s: s.extend(["x", "y"]), lambda s: s.remove("y"),
        lambda s: s.clear(), lambda s: s.extend([3, 1, 2]), lambda s: s.sort(),
    ]
    for step in steps:
        raises_like(lambda: step(model), lambda: step(lst))
        assert lst == model and list(lst) == model and len(lst) == len(model)
    assert lst.copy() == model and lst.copy() is not lst


@pytest.mark.parametrize("step", [
    lambda s: s[5], lambda s: s[-6], lambda s: s.__setitem__(5, 0), lambda s: s.__delitem__(9),
    lambda s: s.pop(7), lambda s: s["a"], lambda s: s[1.0], lambda s: s.__setitem__("a", 0),
    lambda s: s.remove(42), lambda s: s.index(42), lambda s: s.pop("x"),
    lambda s: s.__setitem__(slice(None, None, 2), [1]), lambda s: s[2**70],
    lambda s: s.insert("x", 1), lambda s: s.pop(2**70), lambda s: s.insert(2**70, 1),
    lambda s: s.__setitem__(-2**70, 0), lambda s: s.__delitem__(2**70), lambda s: s.pop(1.0),
], ids=lambda f: f.__code__.co_firstlineno)
def test_list_errors_match_a_python_list(pf, step):
    raises_like(lambda: step([1, 2, 3]), lambda: step(pf.List([1, 2, 3])))


def test_list_pop_errors(pf):
    raises_like(lambda: [].pop(), lambda: pf.List().pop())
    raises_like(lambda: [1].pop(3), lambda: pf.List([1]).pop(3))


def test_list_items_convert_as_array_items_do(pf):
    f = pf.get_global_func("testing.add")
    lst = pf.List([[1, 2], {"k": 1}, (3,), f, pf.DataType("float32"), pf.Device("cpu", 0)])
    assert type(lst[0]) is pf.Array and lst[0] == [1, 2]
    assert type(lst[1]) is pf.Map and lst[1] == {"k": 1}
    assert type(lst[2]) is pf.Array and lst[3](2, 3) == 5
    assert lst[4] == pf.DataType("float32") and lst[5] == pf.Device("cpu", 0)
    lst.append(np.arange(3))  # a tensor object: a container cannot keep a borrowed DLTensor
    assert type(lst[-1]) is np.ndarray and list(lst[-1]) == [0, 1, 2]
    inner = pf.List([1])
    lst.append(inner)
    assert type(lst[-1]) is pf.List
    lst[-1].append(2)  # the same C List, held by lst
    assert inner == [1, 2]


def test_bad_list_items_are_refused_and_change_nothing(pf):
    lst = pf.List([1])
    with pytest.raises(OverflowError, match="List.append"):
        lst.append(2**64)
    with pytest.raises(ValueError, match="item 1 given to List.extend"):
        lst.extend([2, "a\0"])
    with pytest.raises(ValueError, match="List.__setitem__"):
        lst[0] = "a\0b"
    with pytest.raises(OverflowError, match="item 0 given to List"):
        pf.List([-2**63 - 1])
    with pytest.raises(TypeError, match="item 2 given to List"):
        pf.List([1, 2, np.zeros((2, 2))[::2, ::2].T.view(np.void)])
    assert lst == [1]


def test_list_host_objects_stay_themselves(pf):
    thing = Thing()
    lst = pf.List([thing])
    assert lst[0] is thing and lst.pop() is thing
    refs = sys.getrefcount(thing)
    lst.append(thing)
    assert sys.getrefcount(thing) == refs + 1  # the one C reference
    lst.clear()
    assert sys.getrefcount(thing) == refs


# ---- Dict ------------------------------------------------------------------------

def test_dict_is_a_mutable_mapping(pf):
    d = pf.Dict({"a": 1, 2: "b", None: 2.5}, z=True)
    assert isinstance(d, collections.abc.MutableMapping) and not isinstance(d, pf.Map)
    assert len(d) == 4 and d == {"a": 1, 2: "b", None: 2.5, "z": True}
    assert list(d) == ["a", 2, None, "z"] and list(d.keys()) == ["a", 2, None, "z"]
    assert list(d.values()) == [1, "b", 2.5, True]
    assert list(d.items()) == [("a", 1), (2, "b"), (None, 2.5), ("z", True)]
    assert d["a"] == 1 and d.get("q") is None and d.get("q", 3) == 3 and "a" in d
    assert repr(pf.Dict({"a": 1})) == "Dict({'a': 1})"
    assert pf.Dict() == {} and pf.Dict([("x", 1)]) == {"x": 1}
    assert pf.Dict.fromkeys("ab", 0) == {"a": 0, "b": 0}
    with pytest.raises(TypeError):
        hash(d)


def test_dict_operations_match_a_python_dict(pf):
    model, d = {}, pf.Dict()
    steps = [
        lambda m: m.__setitem__("a", 1), lambda m: m.__setitem__(2, [1, 2]),
        lambda m: m.__setitem__(1.0, "float one"), lambda m: m.__setitem__(True, "true"),
        lambda m: m.__setitem__("a", 3), lambda m: m.update({"b": 4}, c=5),
        lambda m: m.update([("d", 6)]), lambda m: m.pop("b"), lambda m: m.pop("zz", 7),
        lambda m: m.setdefault("e", 8), lambda m: m.setdefault("a", 9),
        lambda m: m.__delitem__(2), lambda m: m.popitem(), lambda m: m.__ior__({"f": None}),
        lambda m: m.__setitem__(b"k", pf.DataType("int8")), lambda m: m.get(1),
        lambda m: m.__getitem__(1.0), lambda m: m.__contains__(True),
        lambda m: list(m.items()), lambda m: m.clear(), lambda m: m.update(x=1, y=2),
    ]
    for step in steps:
        raises_like(lambda: step(model), lambda: step(d))
        assert d == model and dict(d) == model and list(d) == list(model)
    assert d | {"z": 1} == model | {"z": 1} and type(d | {"z": 1}) is pf.Dict
    assert d.copy() == model and d.copy() is not d


@pytest.mark.parametrize("step", [
    lambda m: m["nope"], lambda m: m.__delitem__("nope"), lambda m: m.pop("nope"),
    lambda m: m[[1]], lambda m: m.get([1]), lambda m: [1] in m, lambda m: m.pop("a", 1, 2),
    lambda m: m.update(5), lambda m: m.update([(1, 2, 3)]), lambda m: m.pop(),
    lambda m: m.get(), lambda m: m.get(1, 2, 3),
], ids=lambda f: f.__code__.co_firstlineno)
def test_dict_errors_match_a_python_dict(pf, step):
    raises_like(lambda: step({"a": 1}), lambda: step(pf.Dict({"a": 1})))
    raises_like(lambda: {}.popitem(), lambda: pf.Dict().popitem())


def test_dict_refuses_keys_it_could_never_find_again(pf):
    d = pf.Dict()
    with pytest.raises(TypeError, match="Dict key"):
        d[(1, 2)] = 1
    with pytest.raises(TypeError, match="Dict key"):
        d[Thing()] = 1
    with pytest.raises(ValueError, match="NaN"):
        d[math.nan] = 1
    with pytest.raises(TypeError, match="unhashable"):
        d[[1]] = 1
    assert (1, 2) not in d and d.get(Thing()) is None and math.nan not in d
    assert len(d) == 0


def test_dict_keys_compare_as_python_does(pf):
    f = pf.get_global_func("testing.add")
    d = pf.Dict({1: "one", "s": "str", b"s": "bytes", None: "none", pf.DataType("float32"): "dt",
                 pf.Device("cpu", 0): "dev", f: "function", 2.5: "float"})
    assert d[1.0] == d[True] == d[np.int64(1)] == "one" and d["s"] == "str" and d[b"s"] == "bytes"
    assert d[None] == "none" and d[pf.DataType("float32")] == "dt" and d[2.5] == "float"
    assert d[pf.Device("cpu", 0)] == "dev" and d[f] == "function"
    assert 2 not in d and "t" not in d


# ---- sharing with C ------------------------------------------------------------------

def test_c_and_python_share_one_list(pf, fn, echo):
    lst = pf.List([1, 2])
    assert fn("list_append")(lst, "c") == 3
    assert lst == [1, 2, "c"] and lst[-1] == "c"  # C's change, seen by Python
    lst.append(4)
    assert fn("list_pop")(lst, -1) == 4  # Python's change, seen by C
    back = echo(lst)
    assert type(back) is pf.List and back._handle == lst._handle and back == lst
    back.insert(0, 0)
    assert lst == [0, 1, 2, "c"]
    assert fn("object_type")(lst) == "list"
    assert fn("type_name")(lst) == "object"


def test_c_and_python_share_one_dict(pf, fn, echo):
    d = pf.Dict({"a": 1})
    assert fn("dict_set")(d, "b", [1, 2]) == 2
    assert d["b"] == [1, 2] and list(d) == ["a", "b"]
    d["c"] = 3.5
    assert fn("dict_get")(d, "c") == 3.5 and fn("dict_get")(d, "zz") is None
    back = echo(d)
    assert type(back) is pf.Dict and back == d
    del back["a"]
    assert "a" not in d and fn("dict_get")(d, "a") is None
    assert fn("object_type")(d) == "dict"


def test_containers_that_c_makes_come_back_as_list_and_dict(pf, fn):
    lst = fn("typed_make_list")(4)
    assert type(lst) is pf.List and lst == [0, 1, 2, 3]
    lst.append(4)
    assert lst[4] == 4
    # A List inside an Array or Map is the same shared List.
    arr = pf.convert([lst, {"k": lst}])
    arr[0].append(5)
    assert lst[-1] == 5 and arr[1]["k"] == lst


def test_typed_list_and_dict_parameters(pf, fn):
    push, size = fn("typed_list_push"), fn("typed_dict_size")
    assert push([1, 2], 3) == 3 and push((), 1) == 1  # a new List each call
    lst = pf.List([1])
    assert push(lst, 2) == 2 and push(lst, 3) == 3 and lst == [1, 2, 3]
    assert size({"a": 1, "b": 2}) == 2 and size(pf.Dict(x=1)) == 1
    with pytest.raises(TypeError, match="argument 0"):
        push(pf.Array([1]), 1)
    with pytest.raises(TypeError, match="argument 0"):
        size({"a": 1}.items())
    with pytest.raises(TypeError, match="argument 0"):
        size(pf.Map({"a": 1}))
    with pytest.raises(OverflowError, match="argument 0"):
        push([2**64], 1)


def test_containers_cross_in_callbacks(pf, fn):
    seen = []

    def callback(x):
        seen.append(type(x))
        x.append("from python")
        return x

    lst = pf.List([1])
    out = fn("call")(callback, lst)
    assert seen == [pf.List] and out == lst == [1, "from python"]


def test_threads_change_one_list_and_dict(pf):
    lst, d = pf.List(), pf.Dict()
    per = 2000

    def work(t):
        for i in range(per):
            lst.append(i)
            d[t * per + i] = i
            assert lst[-1] is not None and d.get(t * per) == 0  # reads during writes

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(lst) == 4 * per and sorted(lst) == sorted(list(range(per)) * 4)
    assert len(d) == 4 * per


# ---- round trips: every value kind, nested --------------------------------------------

ADD = pf.get_global_func("testing.add")
_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                max_size=8)
_scalars = st.one_of(
    st.integers(INT64_MIN, INT64_MAX), st.floats(allow_nan=False), st.booleans(), st.none(),
    _text, st.binary(max_size=8),
    st.builds(pf.DataType, st.integers(0, 255), st.integers(0, 255), st.integers(1, 65535)),
    st.builds(pf.Device, st.integers(1, 20), st.integers(0, 1000)),
    st.just(ADD), st.builds(Thing),
    st.lists(st.integers(-9, 9), max_size=4).map(lambda v: np.array(v, dtype=np.int64)),
    st.lists(st.integers(0, 9), max_size=3).map(pf.Shape),
    st.builds(pf.get_global_func("testing.make_boxed")))
_map_keys = st.one_of(st.integers(INT64_MIN, INT64_MAX), _text)
_dict_keys = st.one_of(st.integers(INT64_MIN, INT64_MAX), _text, st.binary(max_size=8),
                       st.none(), st.floats(allow_nan=False))


def _containers(inner):
    return st.one_of(
        st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
        st.dictionaries(_map_keys, inner, max_size=4),
        st.lists(inner, max_size=4).map(pf.List),
        st.dictionaries(_dict_keys, inner, max_size=4).map(pf.Dict))


_nested = st.recursive(_scalars, _containers, max_leaves=20)


def _same(a, b):
    """Equal, and of the kinds that the crossing gives: a list or tuple
    comes back as an Array, a dict as a Map, a List and Dict as themselves
    (the same C object), a host object as itself."""
    if isinstance(a, pf.List):
        return type(b) is pf.List and b._handle == a._handle
    if isinstance(a, pf.Dict):
        return type(b) is pf.Dict and b._handle == a._handle
    if isinstance(a, (list, tuple)):
        return type(b) is pf.Array and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return (type(b) is pf.Map and list(a) == list(b)
                and all(_same(a[k], b[k]) for k in a))
    if isinstance(a, Thing):
        return a is b
    if isinstance(a, np.ndarray):  # crosses as a tensor object, back as numpy
        return type(b) is np.ndarray and b.dtype == a.dtype and np.array_equal(a, b)
    if type(a) is pf.Object:
        return type(b) is pf.Object and b.handle == a.handle
    if isinstance(a, pf.Function):
        return isinstance(b, pf.Function) and b(1, 2) == 3
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return type(a) is type(b) and a == b


@settings(max_examples=120, deadline=None, database=None)
@given(_nested)
def test_nested_round_trip_every_value_kind(value):
    echo = pf.get_global_func("testing.echo")
    assert _same(value, echo(value))
    assert _same(value, echo([value])[0])
    # Inside a List and a Dict, changed by C (a numpy array argument is a
    # DLTensor borrowed for the call, which C cannot keep: Python adds it).
    lst, d = pf.List([value]), pf.Dict({"v": value})
    if isinstance(value, np.ndarray):
        lst.append(value)
        d[1] = value
    else:
        pf.get_global_func("testing.list_append")(lst, value)
        pf.get_global_func("testing.dict_set")(d, 1, value)
    assert len(lst) == 2 and _same(value, lst[0]) and _same(value, lst[1])
    assert _same(value, d["v"]) and _same(value, d[1])


@settings(max_examples=80, deadline=None, database=None)
@given(st.lists(st.tuples(st.sampled_from(["append", "pop", "insert", "set", "del"]),
                          st.integers(-5, 5), st.integers(-9, 9)), max_size=30))
def test_list_matches_a_list_under_any_changes(ops):
    model, lst = [], pf.List()
    for op, i, x in ops:
        def step(s):
            if op == "append":
                return s.append(x)
            if op == "pop":
                return s.pop(i)
            if op == "insert":
                return s.insert(i, x)
            if op == "set":
                s[i] = x
                return None
            del s[i]
            return None
        raises_like(lambda: step(model), lambda: step(lst))
    assert lst == model


# ---- leaks ---------------------------------------------------------------------------

N_LEAK = 4000


def _leak_kinds(fn):
    """Each kind of conversion, as one call. The values are plain (the
    compiled backend's native paths); a C object leaked per call would
    hold hundreds of kilobytes of malloc's after the loop, a wrapper leaked
    would stay in the collector's list."""
    echo = fn("echo")
    lst, d = pf.List([1, "s"]), pf.Dict({"k": b"v"})
    arr, m = echo([1, "s", 2.5, b"b", [3]]), echo({"a": 1, "b": "s", "c": [1]})
    shape = pf.Shape([2, 3])
    return {
        "list to Array": lambda: echo([1, "s", 2.5, b"b", [3]]),
        "dict to Map": lambda: echo({"a": 1, "b": "s", "c": [1]}),
        "Array to Python": lambda: list(echo(arr)),
        "Map to Python": lambda: list(echo(m).items()),
        "Shape": lambda: tuple(echo(shape)),
        "List": lambda: (echo(lst)[1], lst.append([2]), lst.pop(), list(lst)),
        "Dict": lambda: (echo(d)["k"], d.__setitem__("t", {"x": 1}), d.pop("t"), list(d.items())),
        "new List and Dict": lambda: (pf.List([1, "s", [2]]), pf.Dict({1: "s", "t": [2]})),
    }


def test_no_leak_over_4000_conversions_per_kind(fn):
    kinds = _leak_kinds(fn)
    for run in kinds.values():
        for _ in range(1000):
            run()
    for name, run in kinds.items():
        gc.collect()
        in_use, objects = malloc_in_use(), len(gc.get_objects())
        for _ in range(N_LEAK):
            run()
        gc.collect()
        assert len(gc.get_objects()) - objects < 1000, name
        # Any block malloc hands out is at least 32 bytes: one a call
        # leaked would be 128 KB; without a leak this is a few KB.
        assert malloc_in_use() - in_use < 64 * 1024, name


def test_no_host_object_leaks_through_lists_and_dicts(fn):
    # Host objects cross through the package's path: C's references to
    # them are counted by the binding's tables.
    echo, thing = fn("echo"), Thing()
    lst, d = pf.List(), pf.Dict()

    def run():
        echo(pf.List([thing]))[0]
        lst.append(thing)
        d["t"] = thing
        assert lst.pop() is thing and d.pop("t") is thing

    run()
    gc.collect()
    refs, live = sys.getrefcount(thing), (_callback.live_count(), _hostobj.live_count())
    for _ in range(10000):
        run()
    gc.collect()
    assert sys.getrefcount(thing) == refs
    assert (_callback.live_count(), _hostobj.live_count()) == live


class OwnHandleList(pf.List):
    """Has an attribute of its own named as the binding's state."""
    __slots__ = ("_handle",)

    def __init__(self, items=()):
        self._handle = 12345  # nothing to do with the C List


class OwnHandleDict(pf.Dict):
    __slots__ = ("_handle",)

    def __init__(self, items=()):
        self._handle = 12345


def test_a_subclass_attribute_named_handle_is_its_own():
    # The binding reads the handle from Object's own slot (the extension's
    # field), never through the subclass's attribute: before, with ctypes,
    # C was given 12345 as the List (a crash).
    lst = OwnHandleList([1, 2])
    assert lst._handle == 12345 and len(lst) == 2 and lst[0] == 1 and list(lst) == [1, 2]
    lst.append(3)
    assert lst == [1, 2, 3] and lst.handle != 12345 and pf.use_count(lst) == 1
    assert repr(lst) == "List([1, 2, 3])" and repr(pf.List([lst])) == "List([List([1, 2, 3])])"
    assert copy.copy(lst) == [1, 2, 3] and pickle.loads(pickle.dumps(lst)) == [1, 2, 3]
    d = OwnHandleDict({"a": 1})
    d["b"] = 2
    assert d._handle == 12345 and len(d) == 2 and d["b"] == 2 and dict(d) == {"a": 1, "b": 2}
    assert repr(d) == "Dict({'a': 1, 'b': 2})" and pf.structural_equal(d, pf.Dict({"a": 1, "b": 2}))


def test_str_prints_as_list_and_dict():
    # str() is what a list or dict prints (as numpy's str drops "array(");
    # repr() says the type.
    lst = pf.List([1, "x", pf.List([2])])
    assert str(lst) == "[1, 'x', List([2])]" and repr(lst) == "List([1, 'x', List([2])])"
    assert str(pf.List()) == "[]"
    d = pf.Dict({"k": [1], 2: None})
    # (the list became an Array, which prints as the tuple it equals)
    assert str(d) == "{'k': (1,), 2: None}" and repr(d) == "Dict({'k': (1,), 2: None})"
    assert str(pf.Dict()) == "{}"
    lst.append(lst)
    d["me"] = d
    try:
        assert str(lst) == "[1, 'x', List([2]), [...]]"
        assert str(d) == "{'k': (1,), 2: None, 'me': {...}}"
    finally:
        lst.clear()
        d.clear()
