"""pf.to_json and pf.from_json (include/packedfunc/serialize.h), and the
pickle and copy protocols of containers and instances that go through them:
round trips of each type, sharing, cycles, tensors, instances with
read-only fields and constructors with arguments, and the refusals, on both
backends."""
import copy
import json
import math
import gc
import os
import pickle
import threading
import weakref

import numpy as np
import pytest

import packedfunc as pf

from conftest import DEMO_PLUGIN, MODULE_DIR


@pytest.fixture(scope="module")
def pyt():
    return pf.load_module(os.path.join(MODULE_DIR, "mod_pyobj.so")).pyt


@pytest.fixture(scope="module")
def demo():
    return pf.load_module(DEMO_PLUGIN).demo


def back(x):
    return pf.from_json(pf.to_json(x))


def same(a, b):
    assert pf.structural_equal(a, b), (a, b)


def test_plain_values_round_trip():
    for x in (None, True, False, 0, -1, 2 ** 53, 2 ** 53 + 1, 2 ** 63 - 1, -2 ** 63, 1.5, -0.0,
              1e300, math.inf, -math.inf, "", "h\u00e9llo \"q\"\n", b"", b"a\0b\xff",
              pf.DataType("float32x4"), pf.Device(2, 3)):
        y = back(x)
        assert type(y) is type(x) and y == x, (x, y)
    assert math.isnan(back(math.nan))
    assert math.copysign(1.0, back(-0.0)) == -1.0


def test_big_ints_are_written_as_text():
    doc = json.loads(pf.to_json([2 ** 53, 2 ** 53 + 1, -2 ** 63]))
    assert doc["version"] == 1 and doc["format"] == "packedfunc"
    assert doc["nodes"][0]["items"] == [2 ** 53, {"int": str(2 ** 53 + 1)},
                                        {"int": str(-2 ** 63)}]


def test_containers_round_trip():
    s = pf.Shape([2, 3])
    for x in (pf.Array([1, "two", 3.5, None, b"b", s]), pf.List([1, [2, [3]]]),
              pf.Map({"a": 1, 2: [s]}), pf.Dict({"a": pf.List([1]), 7: "x"}), s, pf.Array([]),
              pf.Dict()):
        y = back(x)
        assert type(y) is type(x) and not pf.same_as(x, y)
        same(x, y)
    # Python containers cross as Array and Map.
    assert type(back([1, 2])) is pf.Array and type(back({"k": 1})) is pf.Map


def test_sharing_is_kept():
    s = pf.Shape([2, 3])
    a = back(pf.Array([s, s, pf.Shape([2, 3])]))
    assert pf.same_as(a[0], a[1]) and not pf.same_as(a[0], a[2])
    doc = json.loads(pf.to_json(pf.Array([s, s])))
    assert len(doc["nodes"]) == 2  # the shape is written once


def test_a_list_that_holds_itself():
    lst = pf.List([1])
    lst.append(lst)
    try:
        y = back(lst)
        assert pf.same_as(y[1], y) and y[0] == 1
        same(lst, y)
        y.clear()
        d = pf.Dict({"x": 1})
        d["self"] = pf.Array([d])
        e = back(d)
        assert pf.same_as(e["self"][0], e)
        e.clear()
        d.clear()
    finally:
        lst.clear()


def test_tensors_keep_their_data():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for src in (x, x.T, pf.from_dlpack(x)):
        t = back(src)
        np.testing.assert_array_equal(t, src.numpy() if isinstance(src, pf.Tensor) else src)
        same(t, src)
    doc = json.loads(pf.to_json(x))
    assert doc["nodes"][0]["dtype"] == "float32" and doc["nodes"][0]["shape"] == [2, 3]


def test_instances_round_trip(pyt):
    p = pyt.make_point(1.5, -2.0)
    h = pyt.Holder()
    h.pt, h.s, h.by, h.dt, h.dev, h.shp = p, "s", b"\x00b", pf.DataType("int8"), pf.Device(1, 0), \
        pf.Shape([4])
    h.o = pf.List([p, 1])
    g = back(h)
    assert type(g) is pyt.Holder and not pf.same_as(g, h)
    same(g, h)
    assert pf.same_as(g.pt, g.o[0])  # one Point, shared
    assert (g.pt.x, g.pt.y, g.s, g.by, g.dt) == (1.5, -2.0, "s", b"\x00b", pf.DataType("int8"))


def test_an_instance_graph_with_parent_pointers(pyt):
    root = pyt.Holder()
    root.s = "root"
    kids = pf.List()
    for i in range(3):
        k = pyt.Holder()
        k.s, k.o = "kid%d" % i, root  # each points back at its parent
        kids.append(k)
    root.o = kids
    try:
        r = back(root)
        same(r, root)
        assert [k.s for k in r.o] == ["kid0", "kid1", "kid2"]
        assert all(pf.same_as(k.o, r) for k in r.o)
        for k in list(r.o):
            k.o = None
    finally:
        for k in kids:
            k.o = None


def test_read_only_fields_and_constructors_with_arguments(pyt, demo):
    c = demo.Counter("c", 3)
    c.count = 5
    d = back(c)
    assert type(d) is type(c) and (d.name, d.id, d.count, d.step) == ("c", c.id, 5, c.step)
    m = back(pyt.Made(4))  # built without its constructor: v is as written
    assert type(m) is pyt.Made and m.v == 40
    child = back(pyt.make_child(7))  # inherited fields too
    assert type(child) is pyt.Child
    same(child, pyt.make_child(7))


def test_pickle_and_copy_of_containers():
    s = pf.Shape([2])
    lst = pf.List([s, s, "x"])
    for q in (pickle.loads(pickle.dumps(lst)), copy.deepcopy(lst)):
        assert type(q) is pf.List and not pf.same_as(q, lst)
        same(q, lst)
        assert pf.same_as(q[0], q[1]) and not pf.same_as(q[0], s)
    shallow = copy.copy(lst)
    assert type(shallow) is pf.List and not pf.same_as(shallow, lst)
    assert pf.same_as(shallow[0], s)  # the same items
    d = pf.Dict({"a": s})
    assert pf.same_as(copy.copy(d)["a"], s) and not pf.same_as(copy.copy(d), d)
    assert not pf.same_as(copy.deepcopy(d)["a"], s)
    for x in (pf.Array([1, s]), pf.Map({"k": s}), s):
        assert copy.copy(x) is x  # immutable, as a tuple's copy
        for q in (pickle.loads(pickle.dumps(x)), copy.deepcopy(x)):
            assert type(q) is type(x) and not pf.same_as(q, x)
            same(q, x)
    cyc = pf.List([1])
    cyc.append(cyc)
    try:
        q = pickle.loads(pickle.dumps(cyc))
        assert pf.same_as(q[1], q)
        q.clear()
    finally:
        cyc.clear()


def test_pickle_of_an_instance_graph(demo):
    c = demo.Counter("n", 1)
    c.tag = pf.List([1, pf.Shape([2])])
    q = pickle.loads(pickle.dumps(pf.List([c, c])))
    assert pf.same_as(q[0], q[1]) and q[0].name == "n" and q[0].tag[1] == pf.Shape([2])


def test_what_json_cannot_hold_is_a_type_error(demo):
    f = pf.convert(lambda: 1)
    with pytest.raises(TypeError, match=r"PFToJSON: root\[1\] is of type function, which JSON "
                                        r"cannot hold"):
        pf.to_json([1, f])
    with pytest.raises(TypeError, match=r"root\{value of entry 0\} is of type host object"):
        pf.to_json({"k": object()})
    c = demo.Counter("c", 1)
    c.tag = pf.List([f])
    for act in (pf.to_json, pickle.dumps, copy.deepcopy):
        with pytest.raises(TypeError, match=r"root.tag\[0\] is of type function"):
            act(c)
    with pytest.raises(TypeError, match=r"PFToJSON: root\[0\] is of type function"):
        pickle.dumps(pf.List([f]))


def test_bad_documents_are_value_errors(pyt):
    def doc(root, nodes=(), version=1):
        return json.dumps({"format": "packedfunc", "version": version, "root": root,
                           "nodes": list(nodes)})
    with pytest.raises(ValueError, match="PFFromJSON: not JSON: line 1, column 2"):
        pf.from_json("{x")
    with pytest.raises(ValueError, match="version\" 2 is not one this library reads"):
        pf.from_json(doc(1, version=2))
    with pytest.raises(ValueError, match=r"root: \"ref\" must be the index of a node"):
        pf.from_json(doc({"ref": 3}, [{"type": "list", "items": []}]))
    with pytest.raises(ValueError, match="no object type is registered under the key "
                                         "'nobody.Knows'"):
        pf.from_json(doc({"ref": 0}, [{"type": "object", "key": "nobody.Knows", "fields": {}}]))
    with pytest.raises(ValueError, match="no value for field 'x' of pyt.Point"):
        pf.from_json(doc({"ref": 0}, [{"type": "object", "key": "pyt.Point", "fields": {}}]))
    with pytest.raises(ValueError, match="node 0 holds itself through arrays"):
        pf.from_json(doc({"ref": 0}, [{"type": "array", "items": [{"ref": 0}]}]))
    with pytest.raises(ValueError, match="node 1: not reachable from the root"):
        pf.from_json(doc({"ref": 0}, [{"type": "list", "items": []},
                                      {"type": "list", "items": [{"ref": 1}]}]))
    with pytest.raises(ValueError, match="decimal text of an int64"):
        pf.from_json(doc({"int": str(2 ** 64)}))
    with pytest.raises(TypeError, match="expected a str or bytes document, got int"):
        pf.from_json(5)
    assert pf.from_json(doc(7).encode()) == 7


def test_depth_and_size_limits():
    deep = pf.List([])
    for _ in range(1100):
        deep = pf.List([deep])
    with pytest.raises(ValueError, match="PFToJSON: values nested deeper than 1024"):
        pf.to_json(deep)
    nodes = [{"type": "array", "items": [{"ref": i + 1}]} for i in range(1100)]
    nodes.append({"type": "array", "items": []})
    text = json.dumps({"format": "packedfunc", "version": 1, "root": {"ref": 0}, "nodes": nodes})
    with pytest.raises(ValueError, match="PFFromJSON: node 1024: values nested deeper than 1024"):
        pf.from_json(text)
    many = '{"format":"packedfunc","version":1,"root":1,"nodes":[' + ",".join(
        ["{}"] * ((1 << 20) + 1)) + "]}"
    with pytest.raises(ValueError, match="more than PF_JSON_MAX_NODES"):
        pf.from_json(many)
    with pytest.raises(ValueError, match="more than PF_JSON_MAX_CONTAINERS"):
        pf.from_json("[" * ((1 << 22) + 1))


@pytest.fixture(scope="module")
def md():
    return pf.load_module(os.path.join(MODULE_DIR, "mod_meddle.so")).md


@pytest.mark.parametrize("walk", [pf.to_json, pf.structural_hash,
                                  lambda x: pf.structural_equal(x, x)])
def test_a_walk_releases_what_it_read_after_it_ends(md, walk):
    # parent.child = p, p.items = [m, tensor]: reading m's accessor clears
    # the List (another thread's doing, at that moment), so that the walk's
    # snapshot holds the last reference to the tensor, whose numpy array's
    # finalizer re-enters: it drops p, which the walk is reading, and
    # waits for a thread that writes a field. Neither may happen in the
    # middle of the walk, nor under a lock of ours.
    Node = pf.get_class("md.Node")
    parent, p, m, other = Node(), Node(), Node(), Node()
    data = np.arange(3.0)
    p.items = pf.List([m, data])
    parent.child = p
    md.arm(p.items)
    writer_done = []

    def finalizer():
        parent.child = None
        t = threading.Thread(target=lambda: setattr(other, "child", pf.List()))
        t.start()
        t.join(5)
        writer_done.append(not t.is_alive())

    weakref.finalize(data, finalizer)
    del p, m, data
    gc.collect()
    result = walk(parent)
    assert writer_done == [True]
    assert parent.child is None and len(other.child) == 0
    if isinstance(result, str):  # the document has p whole, as it was read
        doc = json.loads(result)
        assert [n["type"] for n in doc["nodes"]] == ["object", "tensor", "list", "object",
                                                     "object"]
        assert doc["nodes"][3]["fields"]["meddle"] == 0


@pytest.mark.parametrize("walk", [pf.to_json, pf.structural_hash,
                                  lambda x: pf.structural_equal(x, x)])
def test_a_walk_keeps_field_writers_of_other_threads_out(md, walk):
    # parent.child = p, p.child = q. Another thread writes parent.child
    # at the moment the walk reads a field of q (md.Node.pause lets it go,
    # then waits for it up to half a second): the write must wait until
    # the walk ends (the walk keeps the GIL), or the walk goes on reading
    # p, which the write freed.
    Node = pf.get_class("md.Node")
    parent, p = Node(), Node()
    p.child = Node()
    parent.child = p
    del p
    md.arm_pause()

    def writer():
        if md.wait_reached(10000):
            parent.child = None
        md.resume()

    t = threading.Thread(target=writer)
    t.start()
    try:
        result = walk(parent)
    finally:
        t.join()
    assert parent.child is None
    if isinstance(result, str):
        assert [n["type"] for n in json.loads(result)["nodes"]] == ["object"] * 3


def test_read_only_accessor_fields_are_checked_not_stored(md):
    # md.Node's accessor fields (meddle, pause) are computed by getters and
    # have no bytes in the struct. A copy keeps the child, and a document's
    # value for them is checked against the getter's, never written. (Before:
    # they were stored at offset 0,
    # over `child`: the copy lost its child, and "pause": 12345 became the
    # child pointer, which crashed the read of `child`.)
    Node = pf.get_class("md.Node")
    n = Node()
    n.child = Node()
    for c in (copy.deepcopy(n), copy.copy(n), pickle.loads(pickle.dumps(n))):
        assert isinstance(c.child, Node) and not pf.same_as(c.child, n.child)
    doc = json.loads(pf.to_json(Node()))
    doc["nodes"][0]["fields"]["pause"] = 12345
    with pytest.raises(ValueError, match="field 'pause' of md.Node is read-only .*the "
                       "rebuilt instance has 0, the document 12345"):
        pf.from_json(json.dumps(doc))
    doc["nodes"][0]["fields"]["pause"] = "x"
    with pytest.raises(TypeError, match="node 0: .*field 'pause' of md.Node"):
        pf.from_json(json.dumps(doc))
