"""pf.structural_equal and pf.structural_hash (include/packedfunc/structural.h):
values, containers, tensors, registered instances, cycles, map order, the
depth limit and the refusals, on both backends."""
import math
import os

import numpy as np
import pytest

import packedfunc as pf

from conftest import MODULE_DIR


def same(a, b):
    assert pf.structural_equal(a, b) and pf.structural_equal(b, a)
    assert pf.structural_hash(a) == pf.structural_hash(b)


def differ(a, b):
    assert not pf.structural_equal(a, b) and not pf.structural_equal(b, a)


@pytest.fixture(scope="module")
def pyt():
    return pf.load_module(os.path.join(MODULE_DIR, "mod_pyobj.so")).pyt


def test_plain_values():
    same(3, 3)
    differ(3, 4)
    differ(1, True)
    differ(1, 1.0)
    same(0.0, -0.0)
    same(math.nan, -math.nan)
    same("abc", "abc")
    differ("abc", b"abc")
    same(b"a\0b", b"a\0b")
    same(None, None)
    assert isinstance(pf.structural_hash("x"), int) and 0 <= pf.structural_hash("x") < 2 ** 64


def test_containers():
    same(pf.Array([1, "two", 3.0]), [1, "two", 3.0])
    same(pf.List([1, [2, 3]]), pf.List([1, [2, 3]]))
    differ(pf.Array([1, 2]), pf.List([1, 2]))
    differ([1, 2], [1, 2, 3])
    same(pf.Shape([2, 3]), pf.Shape([2, 3]))
    differ(pf.Shape([2, 3]), pf.Shape([3, 2]))


def test_maps_ignore_insertion_order():
    same({"a": 1, "b": [2]}, {"b": [2], "a": 1})
    same(pf.Dict({"a": 1, 2: "x"}), pf.Dict({2: "x", "a": 1}))
    differ({"a": 1}, {"a": 2})
    differ({"a": 1}, {"b": 1})
    differ(pf.Map({"a": 1}), pf.Dict({"a": 1}))


def test_tensors():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    same(x, x.copy())
    same(x.T.copy(), x.T)  # strides do not matter, only the row-major data
    differ(x, x.astype(np.float64))
    differ(x, x.reshape(3, 2))
    y = x.copy()
    y[1, 2] = 99
    differ(x, y)


def test_instances_through_fields(pyt):
    a, b = pyt.Point(), pyt.Point()
    a.x, b.x = 1.0, 1.0
    same(a, b)
    b.y = 2.0
    differ(a, b)
    h1, h2 = pyt.Holder(), pyt.Holder()
    h1.s, h2.s = "n", "n"
    h1.o, h2.o = pf.List([1, 2]), pf.List([1, 2])
    same(h1, h2)
    h2.o.append(3)
    differ(h1, h2)


def test_cycles(pyt):
    l1, l2 = pf.List([1]), pf.List([1])
    l1.append(l1)
    l2.append(l2)
    try:
        same(l1, l2)
        l3 = pf.List([1, pf.List([1])])  # no cycle: not equal to one
        differ(l1, l3)
    finally:
        l1.clear()
        l2.clear()
    a, b = pyt.Holder(), pyt.Holder()
    a.o, b.o = a, b
    try:
        same(a, b)
        b.s = "other"
        differ(a, b)
    finally:
        a.o = b.o = None


def test_functions_by_identity():
    f = pf.convert(lambda: 1)
    g = pf.convert(lambda: 1)
    same(f, f)
    differ(f, g)
    same([f], [f])


def test_depth_limit_is_a_value_error():
    deep = pf.List([])
    for _ in range(2000):
        deep = pf.List([deep])
    with pytest.raises(ValueError, match="PFStructuralEqual: values nested deeper than 1024"):
        pf.structural_equal(deep, deep)
    with pytest.raises(ValueError, match="PFStructuralHash: values nested deeper than 1024"):
        pf.structural_hash(deep)


def test_a_value_that_cannot_cross_is_refused():
    with pytest.raises(OverflowError, match="argument 1: int .* does not fit in int64"):
        pf.structural_equal(1, 2 ** 70)
    with pytest.raises(OverflowError, match=r"argument 0 at \[0\]: int .* does not fit in int64"):
        pf.structural_hash([2 ** 70])


def test_plain_python_objects_are_compared_by_crossing():
    # A Python object that is no value of packedfunc's crosses as a new host
    # object each time: opaque, so compared by identity, never equal to
    # another crossing (documented in docs/guide.md).
    o = object()
    assert not pf.structural_equal(o, o)
