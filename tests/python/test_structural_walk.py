"""pf.structural_walk: typed callbacks over a value's structure (items,
map keys and values, fields of instances), their order, SKIP, interrupts,
cycles and the refusals, on both backends."""
import os
from typing import Any

import numpy as np
import pytest

import packedfunc as pf

from conftest import MODULE_DIR


@pytest.fixture(scope="module")
def pyt():
    return pf.load_module(os.path.join(MODULE_DIR, "mod_pyobj.so")).pyt


def test_callbacks_by_type_in_preorder():
    trace = []
    result = pf.structural_walk(pf.Array([1, 2.5, "tag", None, b"b"]), [
        (pf.Array, lambda v: trace.append("array:%d" % len(v))),
        ((int, float), lambda v: trace.append("number:%s" % v)),
        (str, lambda v: trace.append("str:" + v)),
    ])
    assert result is None
    assert trace == ["array:5", "number:1", "number:2.5", "str:tag"]


def test_python_values_walk_as_they_cross():
    trace = []
    pf.structural_walk({"a": [1, (2,)]}, lambda v: trace.append(type(v).__name__))
    assert trace == ["Map", "str", "Array", "int", "Array", "int"]


def test_map_keys_and_values_are_visited():
    root = pf.Array([pf.Map({"numbers": pf.Array([1, 2]), "meta": pf.Dict({"flag": True})}), 3])
    kinds, scalars, strings = [], [], []
    pf.structural_walk(root, [
        ((pf.Array, pf.Map, pf.Dict), lambda v: kinds.append((type(v).__name__, len(v)))),
        ((int, bool), lambda v: scalars.append(v)),
        (str, strings.append),
    ])
    assert kinds == [("Array", 2), ("Map", 2), ("Array", 2), ("Dict", 1)]
    assert scalars == [1, 2, True, 3]
    assert strings == ["numbers", "meta", "flag"]


def test_first_matching_entry_wins_and_skip_prunes():
    trace = []
    result = pf.structural_walk(pf.Array([1, pf.List([2])]), [
        (pf.List, lambda v: trace.append("list") or pf.WalkResult.SKIP),
        (pf.Object, lambda v: trace.append("object:" + type(v).__name__)),
        (Any, lambda v: trace.append("any:%r" % (v,))),
    ])
    assert result is None
    assert trace == ["object:Array", "any:1", "list"]
    trace = []
    pf.structural_walk(pf.Array([1]), (object, lambda v: trace.append(type(v).__name__)))
    assert trace == ["Array", "int"]


def test_postorder():
    trace = []
    pf.structural_walk(pf.Array([pf.Array([1]), 2]), [
        (pf.Array, lambda v: trace.append("array:%d" % len(v))),
        (int, lambda v: trace.append("int:%d" % v)),
    ], order=pf.WalkOrder.POSTORDER)
    assert trace == ["int:1", "array:1", "int:2", "array:2"]
    trace = []
    pf.structural_walk([[1]], (int, trace.append), order="post")
    assert trace == [1]


def test_interrupt_stops_the_walk():
    seen = []

    def on_int(v):
        seen.append(v)
        return pf.VisitInterrupt({"found": v}) if v == 2 else None

    result = pf.structural_walk(pf.Array([1, 2, 3]), (int, on_int))
    assert isinstance(result, pf.VisitInterrupt)
    assert pf.structural_equal(result.value, {"found": 2})
    assert seen == [1, 2]
    assert pf.VisitInterrupt().value is None
    assert "VisitInterrupt(" in repr(result)


def test_instances_are_walked_through_fields(pyt):
    h = pyt.Holder()
    h.s = "name"
    h.o = pf.Array([7])
    strings, ints = [], []
    pf.structural_walk(h, [(str, strings.append), (int, ints.append)])
    assert "name" in strings and 7 in ints


def test_cycles_are_walked_once(pyt):
    lst = pf.List([1])
    lst.append(lst)
    trace = []
    try:
        pf.structural_walk(lst, lambda v: trace.append(type(v).__name__))
        assert trace == ["List", "int"]
        a, b = pyt.Holder(), pyt.Holder()
        a.o, b.o = b, a
        seen = []
        pf.structural_walk(a, (pyt.Holder, seen.append))
        assert len(seen) == 2
    finally:
        lst.clear()
        a.o = b.o = None


def test_tensors_and_shapes_are_leaves():
    trace = []
    pf.structural_walk([np.zeros(3), pf.Shape([2, 3])], lambda v: trace.append(type(v).__name__))
    assert trace[0] == "Array" and len(trace) == 3 and trace[2] == "Shape"


def test_bad_callbacks_are_refused():
    with pytest.raises(TypeError, match="structural_walk: callbacks must be"):
        pf.structural_walk([1], 5)
    with pytest.raises(TypeError, match=r"structural_walk: callbacks\[1\] must be"):
        pf.structural_walk([1], [(int, print), (int,)])
    with pytest.raises(TypeError, match=r"structural_walk: callbacks\[0\]: 3 is not a type"):
        pf.structural_walk([1], [(3, print)])
    with pytest.raises(ValueError, match="structural_walk: order must be"):
        pf.structural_walk([1], print, order="sideways")
    with pytest.raises(OverflowError, match="int .* does not fit in int64"):
        pf.structural_walk([2 ** 70], print)
    # A callback's exception propagates, and stops the walk.
    seen = []

    def boom(v):
        seen.append(v)
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        pf.structural_walk([1, 2], (int, boom))
    assert seen == [1]
