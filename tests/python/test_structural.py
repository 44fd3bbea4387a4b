"""pf.structural_equal and pf.structural_hash (include/packedfunc/structural.h):
values, containers, tensors, registered instances, cycles, map order, the
depth limit and the refusals; get_first_structural_mismatch, the
skip_tensor_content option and StructuralKey; on both backends."""
import math
import os
import subprocess
import sys

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
    with pytest.raises(ValueError, match="PFStructuralCompare: values nested deeper than 1024"):
        pf.structural_equal(deep, deep)
    with pytest.raises(ValueError, match="PFStructuralHashEx: values nested deeper than 1024"):
        pf.structural_hash(deep)
    with pytest.raises(ValueError, match="PFStructuralCompare: values nested deeper than 1024"):
        pf.get_first_structural_mismatch(deep, deep)
    with pytest.raises(ValueError, match="PFStructuralHashEx: values nested deeper than 1024"):
        pf.StructuralKey(deep)


def _shared_document(levels, leaf):
    """A document of `levels` Lists, each holding the next one twice, over
    `leaf`: a few hundred bytes that unfold to a tree of 2^levels Lists."""
    nodes = ['{"type":"list","items":[{"ref":%d},{"ref":%d}]}' % (i + 1, i + 1)
             for i in range(levels)]
    nodes.append('{"type":"list","items":[%s]}' % leaf)
    return '{"format":"packedfunc","version":1,"root":{"ref":0},"nodes":[%s]}' % ",".join(nodes)


def test_shared_values_are_walked_once():
    # A hostile document of 41 Lists that unfold to 2^40: comparing, hashing
    # and keying it walk each List once (before: they never ended).
    a = pf.from_json(_shared_document(40, "1"))
    b = pf.from_json(_shared_document(40, "1"))
    c = pf.from_json(_shared_document(40, "2"))
    assert pf.structural_equal(a, b)
    assert pf.structural_hash(a) == pf.structural_hash(b)
    assert pf.StructuralKey(a) == pf.StructuralKey(b)
    assert not pf.structural_equal(a, c)
    assert pf.get_first_structural_mismatch(a, c) == "$" + "[0]" * 41
    # The results are those of the tree the graph unfolds to.
    def tree(levels):
        return pf.List([1]) if levels == 0 else pf.List([tree(levels - 1), tree(levels - 1)])
    shared = pf.from_json(_shared_document(8, "1"))
    assert pf.structural_equal(shared, tree(8))
    assert pf.structural_hash(shared) == pf.structural_hash(tree(8))


# A document whose shared Lists also form a cycle (the bottom one holds the
# root): nothing on a cycle can be kept, so a walk would go down all 2^60
# paths. Each entry point stops at PF_STRUCTURAL_MAX_REWALK with a
# ValueError. In a subprocess, so that a hang (as before) fails the test by
# its timeout.
CYCLIC_SHARED_SCRIPT = r"""
import packedfunc as pf
nodes = ['{"type":"list","items":[{"ref":%d},{"ref":%d}]}' % (i + 1, i + 1) for i in range(60)]
nodes.append('{"type":"list","items":[{"ref":0}]}')
doc = '{"format":"packedfunc","version":1,"root":{"ref":0},"nodes":[%s]}' % ",".join(nodes)
a, b = pf.from_json(doc), pf.from_json(doc)
for name, call in [("PFStructuralHash", lambda: pf.structural_hash(a)),
                   ("PFStructuralCompare", lambda: pf.structural_equal(a, b)),
                   ("PFStructuralCompare", lambda: pf.get_first_structural_mismatch(a, b)),
                   ("PFStructuralHash", lambda: pf.StructuralKey(a))]:
    try:
        call()
    except ValueError as e:
        assert name in str(e) and "PF_STRUCTURAL_MAX_REWALK" in str(e), str(e)
    else:
        raise AssertionError(name + " did not raise")
print("ok")
"""


def test_cycles_through_shared_values_are_bounded():
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.path.join(here, "..", "..", "bindings", "python"))
    r = subprocess.run([sys.executable, "-c", CYCLIC_SHARED_SCRIPT], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "ok\n"


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


# ---- where two values differ, options, keys (PFStructuralCompare) ----

def test_first_mismatch_names_the_path():
    lhs = {"items": [1, 2, {"k": 3}], "meta": {"tag": "x"}}
    rhs = {"meta": {"tag": "x"}, "items": [1, 2, {"k": 3}]}
    other = {"items": [1, 2, {"k": 4}], "meta": {"tag": "x"}}
    assert pf.get_first_structural_mismatch(lhs, rhs) is None
    assert pf.get_first_structural_mismatch(lhs, other) == '$["items"][2]["k"]'
    assert pf.get_first_structural_mismatch(1, 2) == "$"
    assert pf.get_first_structural_mismatch([1, 2], [1, 2, 3]) == "$"
    assert pf.get_first_structural_mismatch({"a": 1}, {"b": 1}) == '$["a"]'
    assert pf.get_first_structural_mismatch(pf.Dict({7: [0, "x"]}),
                                            pf.Dict({7: [0, "y"]})) == "$[7][1]"


def test_first_mismatch_of_instances_names_fields(pyt):
    a, b = pyt.Holder(), pyt.Holder()
    try:
        a.o, b.o = pyt.Holder(), pyt.Holder()
        assert pf.get_first_structural_mismatch(a, b) is None
        b.o.s = "other"
        assert pf.get_first_structural_mismatch(a, b) == "$.o.s"
    finally:
        a.o = b.o = None


def test_skip_tensor_content():
    t1 = np.array([1.0, 2.0, 3.0], dtype="float32")
    t2 = np.array([1.0, 2.0, 4.0], dtype="float32")
    assert not pf.structural_equal(t1, t2)
    assert pf.structural_equal(t1, t2, skip_tensor_content=True)
    assert not pf.structural_equal(t1, t1.astype("float64"), skip_tensor_content=True)
    assert not pf.structural_equal(t1, t1[:2], skip_tensor_content=True)
    assert pf.structural_hash(t1) != pf.structural_hash(t2)
    assert (pf.structural_hash(t1, skip_tensor_content=True)
            == pf.structural_hash(t2, skip_tensor_content=True))
    assert pf.get_first_structural_mismatch([t1], [t2]) == "$[0]"
    assert pf.get_first_structural_mismatch([t1], [t2], skip_tensor_content=True) is None


def test_structural_key():
    k1 = pf.StructuralKey({"a": [1, 2], "b": [3, {"c": 4}]})
    k2 = pf.StructuralKey({"b": [3, {"c": 4}], "a": [1, 2]})
    k3 = pf.StructuralKey({"a": [1, 2], "b": [3, {"c": 5}]})
    assert isinstance(k1.key, pf.Map)
    assert k1.__hash__() == pf.structural_hash(k1.key)
    assert k1 == k2 and hash(k1) == hash(k2)
    assert k1 != k3
    assert k1 != {"a": [1, 2], "b": [3, {"c": 4}]}  # a key equals only keys
    data = {k1: "a", k3: "b"}
    assert data[k2] == "a" and data[k3] == "b"
    # The key is what the value crosses as when made: a later change to
    # the Python dict does not change it.
    d = {"x": [1]}
    k = pf.StructuralKey(d)
    d["x"].append(2)
    assert k == pf.StructuralKey({"x": [1]})
    assert "StructuralKey(" in repr(k)
    # Tensors as keys compare their content, as structural_equal does.
    t1 = np.array([1.0, 2.0], dtype="float32")
    t2 = np.array([1.0, 3.0], dtype="float32")
    assert pf.StructuralKey(t1) != pf.StructuralKey(t2)
    assert pf.StructuralKey(t1) == pf.StructuralKey(t1.copy())


def test_structural_options_refuse_bad_input():
    with pytest.raises(TypeError, match="2 positional arguments but 3 were given"):
        pf.structural_equal(1, 1, True)  # the option is keyword-only
    with pytest.raises(OverflowError, match="argument 1"):
        pf.get_first_structural_mismatch(1, 2 ** 70)
    with pytest.raises(OverflowError, match="int .* does not fit in int64"):
        pf.StructuralKey([2 ** 70])
