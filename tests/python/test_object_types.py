"""Registered object types in Python: classes made from a C library's
description, their fields, methods and constructors, identity, classes of
one's own (register_object), subclasses, typed parameters, pickling and
copying, threads, and no leaks.

The types come from tests/modules/mod_pyobj.c (pyt.*) and the demo plugin
(demo.Base, demo.Counter). A type has one class per process, so the tests
that bind classes (register_object) use types that no other test touches.
"""
import copy
import ctypes
import gc
import inspect
import os
import weakref
import pickle
import pydoc
import threading

import numpy as np
import pytest

import packedfunc as pf
from packedfunc import _object_types
from conftest import ROOT

BUILD = os.environ.get("BUILD", "build")
MODULE_DIR = os.environ.get("PF_TEST_MODULE_DIR") or os.path.join(ROOT, BUILD, "modules")
DEMO_PLUGIN = os.environ.get("PF_DEMO_PLUGIN") or os.path.join(ROOT, BUILD, "examples",
                                                                 "demo_plugin.so")


@pytest.fixture(scope="module")
def mod():
    return pf.load_module(os.path.join(MODULE_DIR, "mod_pyobj.so"))


@pytest.fixture(scope="module")
def demo():
    return pf.load_module(DEMO_PLUGIN).demo


# ---------------------------------------------------------------------------
# register_object first: a type's class must not exist before it is bound
# ---------------------------------------------------------------------------

def test_register_object_binds_a_class_of_ones_own(mod):
    @pf.register_object("pyt.Bound")
    class Bound(pf.Object):
        """Mine."""

        def doubled(self):
            return 2 * self.n

        @property
        def label(self):
            return "n=%d" % self.n

    assert pf.get_class("pyt.Bound") is Bound and mod.pyt.Bound is Bound
    b = Bound()
    b.n = 21
    assert (b.doubled(), b.label, b.get()) == (42, "n=21", 21)  # Python's and C's
    assert Bound.__doc__ == "Mine."  # its own attributes stay
    assert repr(b) == "pyt.Bound(n=21)"
    # An instance made in C comes back as the bound class; so does a
    # derived type's, whose class derives from it.
    assert type(mod.pyt.echo(b)) is Bound and mod.pyt.echo(b) is b
    Sub = mod.pyt.BoundSub
    assert issubclass(Sub, Bound) and Sub().doubled() == 0


def test_register_object_makes_slotted_classes(mod):
    # No __slots__: the class is made again with __slots__ = () (no
    # __dict__), and its methods' super() and __class__ find the new class.
    @pf.register_object("pyt.Slots")
    class Slots(pf.Object):
        """Slotted."""

        def plus(self, k):
            return self.n + k

        @property
        def squared(self):
            return self.n ** 2

        @classmethod
        def made(cls):
            return __class__, cls

        def __repr__(self):
            return "<" + super().__repr__() + ">"

    s = Slots()
    s.n = 4
    assert not hasattr(s, "__dict__") and "__dict__" not in Slots.__dict__
    with pytest.raises(AttributeError):
        s.other = 1
    assert (s.plus(1), s.squared) == (5, 16)
    assert repr(s).startswith("<<packedfunc.Slots type_index=")
    assert Slots.made() == (Slots, Slots) and Slots.__doc__ == "Slotted."
    assert Slots.__qualname__.endswith("test_register_object_makes_slotted_classes.<locals>.Slots")
    assert pf.get_class("pyt.Slots") is Slots and mod.pyt.Slots is Slots
    assert type(mod.pyt.echo(s)) is Slots and mod.pyt.echo(s) is s
    assert weakref.ref(s)() is s
    # A __dict__ asked for, as tvm-ffi's classes ask: __slots__ = ("__dict__",).
    @pf.register_object("pyt.SlotsDict")
    class WithDict(pf.Object):
        __slots__ = ("__dict__",)

    w = WithDict()
    w.other = 1
    assert w.other == 1 and w.__dict__ == {"other": 1}
    # Slots of one's own stay as declared.
    @pf.register_object("pyt.SlotsOwn")
    class Own(pf.Object):
        __slots__ = ("cache",)

    o = Own()
    o.cache, o.n = 3, 5
    assert (o.cache, o.n) == (3, 5) and not hasattr(o, "__dict__")
    with pytest.raises(AttributeError):
        o.other = 1


def test_register_object_refuses_what_it_cannot_bind(mod, demo):
    with pytest.raises(KeyError, match="no object type 'pyt.Nothing' is registered"):
        pf.register_object("pyt.Nothing")
    with pytest.raises(TypeError, match="needs the type key"):
        pf.register_object(pf.Object)
    with pytest.raises(TypeError, match="not a subclass of packedfunc.Object"):
        pf.register_object("pyt.Late")(object)
    with pytest.raises(TypeError, match=r"must subclass Base, the class of the parent type pyt.Base"):
        @pf.register_object("pyt.Late")
        class Late(pf.Object):
            pass
    # Bound already (test above), and the demo's types have classes once used.
    with pytest.raises(ValueError, match="the type pyt.Bound has a class already"):
        @pf.register_object("pyt.Bound")
        class Again(pf.Object):
            pass
    demo.Counter  # makes demo.Base's class too
    with pytest.raises(ValueError, match="has a class already"):
        @pf.register_object("demo.Base")
        class Base(pf.Object):
            pass


# ---------------------------------------------------------------------------
# Classes
# ---------------------------------------------------------------------------

def test_classes_come_from_the_description(mod, demo):
    Counter, Base = demo.Counter, demo.Base
    assert pf.get_class("demo.Counter") is Counter
    assert Counter.__mro__[1:3] == (Base, pf.Object)
    assert (Counter.__module__, Counter.__name__) == ("demo", "Counter")
    assert repr(Counter) == "<class 'demo.Counter'>"
    assert "A Base that counts." in Counter.__doc__
    names = dir(Counter)
    for n in ("name", "id", "count", "step", "tag", "increment", "add", "describe", "reset",
              "max_step"):
        assert n in names
    assert Counter.count.type == "int64" and Counter.count.writable
    assert Base.name.type == "str" and not Base.name.writable
    assert "The count so far." in Counter.count.__doc__
    with pytest.raises(KeyError, match="no object type 'no.Such'"):
        pf.get_class("no.Such")
    with pytest.raises(TypeError, match="must be a str"):
        pf.get_class(3)


def test_an_instance_is_made_by_its_constructor(demo):
    c = demo.Counter("clicks", 10)
    assert isinstance(c, demo.Counter) and isinstance(c, demo.Base)
    assert isinstance(c, pf.Object) and c.type_index == pf.get_class("demo.Counter").__pf_type__[0]
    assert (c.name, c.count, c.step, c.tag) == ("clicks", 10, 1, None)
    assert c.increment() == 11
    c.step = 5
    assert c.add(2) == 21 and c.count == 21
    assert c.describe() == "Counter 'clicks' at 21"
    assert demo.Counter.max_step() == 1000 and c.max_step() == 1000
    c.reset(3)
    assert c.count == 3
    c.reset()
    assert c.count == 0
    assert repr(c).startswith("demo.Counter(name='clicks', id=")
    assert {"name", "count", "step", "increment", "describe", "max_step"} <= set(dir(c))
    with pytest.raises(TypeError, match="argument 1 'name': expected str, got int"):
        demo.Counter(1, 2)
    with pytest.raises(TypeError):
        demo.Counter("a", 1, x=2)


def test_constructors_of_every_kind(mod):
    p = mod.pyt.Point()  # no __init__: zeroed
    assert (p.x, p.y) == (0.0, 0.0)
    with pytest.raises(TypeError):
        mod.pyt.Point(1)
    m = mod.pyt.Made(4)  # a static factory
    assert type(m) is mod.pyt.Made and m.v == 40
    assert mod.pyt.Loose(1, "two", 3.0).nargs == 3  # a packed __init__
    b = mod.pyt.Base(7)
    assert b.v == 7 and b.who() == "base"

    class MyMade(mod.pyt.Made):
        pass
    with pytest.raises(TypeError, match="the constructor of its type is a static factory"):
        MyMade(1)
    with pytest.raises(TypeError, match="packedfunc.Object cannot be created directly"):
        pf.Object()


def test_signatures_and_help(mod, demo):
    Counter = demo.Counter
    assert str(inspect.signature(Counter)) == "(name: str, start: int) -> None"
    assert str(inspect.signature(Counter.increment)) == "(self, /) -> int"
    assert str(inspect.signature(Counter("a", 1).add)) == "(n: int) -> int"
    assert str(inspect.signature(Counter.reset)) == "(self, /, *args)"
    assert str(inspect.signature(Counter.max_step)) == "() -> int"
    assert str(inspect.signature(mod.pyt.Made)) == "(arg0: int, /) -> None"
    # Parameters and results of registered types are their classes.
    assert inspect.signature(mod.pyt.norm2).parameters["arg0"].annotation is mod.pyt.Point
    assert inspect.signature(mod.pyt.make_child).return_annotation is mod.pyt.Child
    text = pydoc.render_doc(Counter, renderer=pydoc.plaintext)
    for line in ("increment(self, /) -> int", "Adds step to the count and returns it.",
                 "The count so far.", "int64, writable", "str, read-only"):
        assert line in text
    assert "Adds N steps" in Counter.add.__doc__


def test_inheritance_and_overrides(mod):
    c = mod.pyt.make_child(5)  # made in C: its class comes with it
    assert type(c) is mod.pyt.Child and isinstance(c, mod.pyt.Base)
    assert (c.v, c.extra, c.who()) == (5, 0, "child")
    assert mod.pyt.Base.who(c) == "base"  # the Base class's method is Base's own
    assert mod.pyt.Child.twice(4) == 8
    c.extra = 3
    assert mod.pyt.child_extra(c) == 3
    assert mod.pyt.Child(2).v == 2  # the inherited __init__
    assert str(inspect.signature(mod.pyt.Child)) == "(arg1: int, /) -> None"


# ---------------------------------------------------------------------------
# Fields
# ---------------------------------------------------------------------------

def test_plain_fields_read_and_write_as_their_c_types(mod):
    s = mod.pyt.Scalars()
    for name, value in (("i8", -128), ("i16", -300), ("i32", -2**31), ("i64", 2**63 - 1),
                        ("u8", 255), ("u16", 65535), ("u32", 2**32 - 1), ("u64", 2**63 - 1),
                        ("f32", 1.5), ("f64", 0.1), ("b", True)):
        setattr(s, name, value)
        assert getattr(s, name) == value and type(getattr(s, name)) is type(value), name
    s.f64 = 3  # an int that a double holds
    assert s.f64 == 3.0 and type(s.f64) is float
    s.f32 = 0.1
    assert s.f32 == float(np.float32(0.1))  # rounded to float32, as C does


def test_field_errors_name_the_type_the_field_and_the_value(mod, demo):
    s = mod.pyt.Scalars()
    with pytest.raises(ValueError, match=r"field 'u8' of pyt.Scalars: expected uint8, got int 256"):
        s.u8 = 256
    with pytest.raises(ValueError, match="field 'b' of pyt.Scalars: expected bool, got int 2"):
        s.b = 2
    with pytest.raises(TypeError, match="field 'i64' of pyt.Scalars: expected int64, got float"):
        s.i64 = 0.5
    with pytest.raises(TypeError, match="field 'i64' of pyt.Scalars: expected int64, got str"):
        s.i64 = "1"
    with pytest.raises(TypeError, match="field 'i64' of pyt.Scalars: expected int64, got set"):
        s.i64 = {1}
    with pytest.raises(OverflowError, match="field 'u64' of pyt.Scalars: int .* does not fit"):
        s.u64 = 2**64 - 1
    with pytest.raises(AttributeError, match="field 'ro' of pyt.Scalars is read-only"):
        s.ro = 1
    with pytest.raises(AttributeError, match="field 'i8' of pyt.Scalars cannot be deleted"):
        del s.i8
    with pytest.raises(AttributeError):
        s.no_such = 1  # no __dict__: a typo is an error
    assert s.i64 == 0 and s.u8 == 0 and s.ro == 0  # unchanged
    s.set_ro(9)  # C writes what hosts may not
    assert s.ro == 9
    with pytest.raises(TypeError, match="descriptor 'i8' for 'Scalars' objects doesn't apply "
                                        "to a 'Point' object"):
        mod.pyt.Scalars.i8.__get__(mod.pyt.Point())
    c = demo.Counter("c", 0)
    with pytest.raises(AttributeError, match="field 'name' of demo.Counter is read-only"):
        c.name = "x"


def test_pointer_fields(mod):
    h = mod.pyt.Holder()
    assert (h.s, h.by, h.t, h.f, h.o, h.pt, h.shp) == (None,) * 7
    h.s = "héllo"
    h.by = b"a\0b"
    h.p = ctypes.c_void_p(1234)
    h.dt = pf.DataType("float32")
    h.dev = "cuda:1"  # a str at a device field is a Device
    arr = np.arange(3.0)
    h.t = arr  # a DLPack array becomes a tensor object that keeps it
    h.f = lambda x: x + 1
    payload = object()  # crosses as an opaque host object, and back as itself
    h.o = payload
    h.pt = mod.pyt.make_point(3, 4)
    h.shp = [2, 3]
    assert (h.s, h.by, h.p.value) == ("héllo", b"a\0b", 1234)
    assert h.dt == pf.DataType("float32") and h.dev == pf.Device("cuda", 1)
    assert h.t.tolist() == [0.0, 1.0, 2.0] and np.shares_memory(h.t, arr)
    assert h.f(41) == 42 and h.o is payload and h.pt.norm2() == 25.0
    assert tuple(h.shp) == (2, 3)
    h.o = {"a": [1, 2]}  # a dict crosses as a Map
    assert isinstance(h.o, pf.Map) and h.o == {"a": [1, 2]}
    with pytest.raises(TypeError, match="field 'pt' of pyt.Holder: expected obj<pyt.Point>, got "
                                        "pyt.Scalars object"):
        h.pt = mod.pyt.Scalars()
    with pytest.raises(TypeError, match="field 's' of pyt.Holder: expected str, got int"):
        h.s = 1
    with pytest.raises(ValueError, match="field 's' of pyt.Holder: str contains a NUL"):
        h.s = "a\0b"
    for name in ("s", "by", "p", "t", "f", "o", "pt", "shp"):
        setattr(h, name, None)
        assert getattr(h, name) is None


def test_released_instances_refuse_use(mod):
    p = mod.pyt.Point()
    p.__del__()  # as the collector would
    p.__del__()
    with pytest.raises(ValueError, match="the Point was released"):
        p.x
    with pytest.raises(ValueError, match="the Point was released"):
        p.x = 1.0
    with pytest.raises(ValueError, match="argument 0: the Point was released"):
        mod.pyt.norm2(p)
    assert repr(p) == "<pyt.Point (released)>"


# ---------------------------------------------------------------------------
# Identity, equality, and crossing to C and back
# ---------------------------------------------------------------------------

def test_an_instance_comes_back_as_the_same_object(mod):
    p = mod.pyt.make_point(1, 2)
    assert mod.pyt.echo(p) is p
    assert mod.pyt.Base(1).visit(lambda o: o) is not None
    b = mod.pyt.Base(3)
    assert b.visit(lambda o: o is b) is True  # a callback's argument, too
    h = mod.pyt.Holder()
    h.pt = p
    assert h.pt is p and h.pt is h.pt
    assert p == h.pt and hash(p) == hash(h.pt) and pf.same_as(p, h.pt)
    q = mod.pyt.make_point(1, 2)
    assert p != q and not pf.same_as(p, q)  # equal fields, another object
    gc.collect()
    alive = _object_types.live_count()
    del p, q
    gc.collect()
    # Both wrappers went (h.pt's C instance lives on, held by C alone).
    assert _object_types.live_count() == alive - 2
    again = h.pt
    assert (again.x, again.y) == (1.0, 2.0) and h.pt is again


def test_same_as(mod):
    f = pf.get_global_func
    arr = pf.convert([1, 2])
    assert pf.same_as(arr, arr) and not pf.same_as(arr, [1, 2])
    assert not pf.same_as(arr, pf.convert([1, 2]))
    assert not pf.same_as(1, 1.0) and pf.same_as(f, f)


def test_a_python_subclass_stays_itself_while_python_holds_it(mod):
    class MyPoint(mod.pyt.Point):
        __slots__ = ("note",)

        def norm(self):
            return self.norm2() ** 0.5

    h = mod.pyt.Holder()
    p = MyPoint()
    p.x, p.y, p.note = 3.0, 4.0, "mine"
    h.pt = p
    assert h.pt is p and h.pt.norm() == 5.0 and mod.pyt.norm2(p) == 25.0
    del p
    gc.collect()
    # Python let it go: C's instance comes back as its type's class.
    assert type(h.pt) is mod.pyt.Point and h.pt.norm2() == 25.0


def test_an_object_resurrected_by_its_finalizer_keeps_its_identity(mod):
    saved = []

    class Phoenix(mod.pyt.Point):
        def __del__(self):
            saved.append(self)  # no super().__del__(): it comes back to life

    h = mod.pyt.Holder()
    h.pt = Phoenix()
    gc.collect()
    assert len(saved) == 1 and h.pt is saved[0]  # still the one wrapper
    saved.clear()
    gc.collect()
    assert type(h.pt) is mod.pyt.Point  # gone for good; C's instance lives on


# ---------------------------------------------------------------------------
# Typed parameters
# ---------------------------------------------------------------------------

def test_typed_parameters_check_the_type(mod, demo):
    assert mod.pyt.norm2(mod.pyt.make_point(3, 4)) == 25.0
    with pytest.raises(TypeError, match=r"argument 0: expected obj<pyt.Point>, got pyt.Scalars "
                                        r"object"):
        mod.pyt.norm2(mod.pyt.Scalars())
    with pytest.raises(TypeError, match=r"argument 0: expected obj<pyt.Child>, got pyt.Base"):
        mod.pyt.child_extra(mod.pyt.Base(1))
    # packedfunc.typed takes the grammar's obj<KEY> too.
    seen = []
    proto = ctypes.CFUNCTYPE(ctypes.c_double, ctypes.c_void_p)
    f = pf.typed(proto(lambda h: seen.append(h) or 1.5), "float64(obj<pyt.Point>)")
    p = mod.pyt.Point()
    assert f(p) == 1.5 and seen == [p.handle]
    with pytest.raises(TypeError, match="expected obj<pyt.Point>, got demo.Counter object"):
        f(demo.Counter("c", 1))
    assert inspect.signature(f).parameters["arg0"].annotation is mod.pyt.Point
    with pytest.raises(ValueError, match="unknown object type 'pyt.Nope'"):
        pf.typed(proto(lambda h: 0.0), "float64(obj<pyt.Nope>)")


# ---------------------------------------------------------------------------
# Unbound methods check their object
# ---------------------------------------------------------------------------

def test_an_unbound_method_refuses_what_is_not_its_instance(mod, demo):
    # In C, for typed (increment) and packed (reset) methods alike: None
    # crashed, and a packed method of a child wrote past a parent's struct.
    base = demo.Base("b")
    for bad, got in ((None, "null"), (base, "demo.Base object"),
                     (mod.pyt.Base(1), "pyt.Base object"), (pf.List([1]), "list object"),
                     (5, "int")):
        with pytest.raises(TypeError, match=r"typed function 'demo.Counter.increment' "
                                            r"int64\(self:obj<demo.Counter>\): argument 0 "
                                            r"'self': expected obj<demo.Counter>, got " + got):
            demo.Counter.increment.function(bad)
        with pytest.raises(TypeError, match=r"method 'demo.Counter.reset': argument 0 \(the "
                                            r"object\): expected obj<demo.Counter>, got " + got):
            demo.Counter.reset.function(bad, 3)
    with pytest.raises(TypeError, match=r"takes the object \(obj<demo.Counter>\) first, got no "
                                        r"arguments"):
        demo.Counter.reset.function()
    assert base.describe() == demo.Base.describe.function(base)  # untouched
    # A descendant's instance is one of its ancestors'.
    child = mod.pyt.Child(1)
    assert mod.pyt.Base.who.function(child) == "base"
    assert mod.pyt.Base.visit.function(child, lambda o: o is child)
    c = demo.Counter("c", 1)
    assert demo.Counter.increment.function(c) == 2 and demo.Counter.reset.function(c, 7) is None
    assert c.count == 7


# ---------------------------------------------------------------------------
# Pickling and copying
# ---------------------------------------------------------------------------

class Tag:
    """A Python object that crosses as an opaque host object."""

    def __init__(self, items):
        self.items = items


def test_a_type_whose_fields_are_its_state_pickles_and_copies(mod):
    p = mod.pyt.make_point(1.5, -2.0)
    for q in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
        assert type(q) is mod.pyt.Point and not pf.same_as(p, q)
        assert (q.x, q.y) == (1.5, -2.0)
    h = mod.pyt.Holder()
    h.pt, h.s, h.o, h.dt = p, "s", Tag([1]), pf.DataType("int8")
    shallow, deep = copy.copy(h), copy.deepcopy(h)
    assert shallow.pt is p and shallow.o is h.o  # the same values
    assert deep.pt is not p and deep.pt.x == 1.5  # copies of them
    assert deep.o is not h.o and deep.o.items == [1] and deep.o.items is not h.o.items
    assert (deep.s, deep.dt) == ("s", pf.DataType("int8"))


def test_a_zeroed_instance_reads_copies_and_takes_back_every_field(mod):
    # pyt.Every has a field v_TYPE of every type of the grammar (and
    # obj<KEY>), all writable. Before, a zero dtype could not be read, so
    # copy, pickle and repr failed.
    from packedfunc._signature import SIGNATURE_TYPES
    names = ["v_" + t for t in SIGNATURE_TYPES if t not in ("void", "any")] + ["v_obj"]
    e = mod.pyt.Every()
    values = {name: getattr(e, name) for name in names}
    assert values["v_dtype"] is None and values["v_str"] is None and values["v_int8"] == 0
    text = repr(e)
    assert text.startswith("pyt.Every(v_int8=0, ") and "Error" not in text
    assert "v_dtype=None" in text
    for name in names:
        setattr(e, name, values[name])  # writing back what was read
        assert getattr(e, name) == values[name], name
    for q in (copy.copy(e), copy.deepcopy(e), pickle.loads(pickle.dumps(e))):
        assert type(q) is mod.pyt.Every and not pf.same_as(q, e)
        assert {name: getattr(q, name) for name in names} == values
    # A dtype set and cleared again.
    e.v_dtype = pf.DataType("int8")
    assert e.v_dtype == pf.DataType("int8") and copy.copy(e).v_dtype == pf.DataType("int8")
    e.v_dtype = None
    assert e.v_dtype is None


def test_other_types_pickle_and_copy_through_json(mod, demo):
    # A read-only field or a constructor with arguments: Python cannot make
    # the copy, PFFromJSON can (it writes every field). Before, all three
    # refused with a TypeError.
    c = demo.Counter("c", 1)
    c.count = 5
    for q in (pickle.loads(pickle.dumps(c)), copy.copy(c), copy.deepcopy(c)):
        assert type(q) is type(c) and not pf.same_as(q, c)
        assert (q.name, q.id, q.count) == ("c", c.id, 5)
    for made in (copy.copy(mod.pyt.Made(1)), pickle.loads(pickle.dumps(mod.pyt.Made(2)))):
        assert type(made) is mod.pyt.Made and made.v in (10, 20)
    assert copy.deepcopy(mod.pyt.Loose(1, 2)).nargs == 2
    # What JSON cannot hold is refused, naming where it is.
    c.tag = Tag([1])
    for act in (pickle.dumps, copy.copy, copy.deepcopy):
        with pytest.raises(TypeError, match=r"PFToJSON: root.tag is of type host object"):
            act(c)


# ---------------------------------------------------------------------------
# Threads and leaks
# ---------------------------------------------------------------------------

def test_two_threads_create_and_read_instances(mod):
    shared = mod.pyt.Base(0)
    errors = []

    def work(k):
        try:
            for i in range(2000):
                b = mod.pyt.Base(i)
                assert b.v == i and mod.pyt.echo(b) is b
                b.v = k
                assert b.visit(lambda o: o.v) == k
                assert shared.v >= 0 and mod.pyt.echo(shared) is shared
        except BaseException as err:  # noqa: B902 - reported below
            errors.append(err)

    threads = [threading.Thread(target=work, args=(k,)) for k in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_no_leak_over_2000_create_read_drop_cycles(mod):
    # Both counts are exact: a cycle that leaked would show in each.
    gc.collect()
    live, wrappers = mod.pyt.live(), _object_types.live_count()
    Base = mod.pyt.Base
    for i in range(2000):
        b = Base(i)
        assert b.v == i
    del b
    gc.collect()
    assert mod.pyt.live() == live  # every instance's finalizer ran
    assert _object_types.live_count() == wrappers  # the identity map is back where it was


# ---------------------------------------------------------------------------
# Remote functions (rpc.h): instances of registered types cross by value
# ---------------------------------------------------------------------------

def test_remote_functions_carry_instances_by_value(demo):
    from packedfunc import rpc

    @pf.register_func("pyobjrpc.echo", override=True)
    def echo(x):
        return x

    @pf.register_func("pyobjrpc.count_of", override=True)
    def count_of(c):
        assert isinstance(c, demo.Counter)  # a Counter here too, not a handle
        return c.count

    @pf.register_func("pyobjrpc.make", override=True)
    def make():
        return demo.Counter("made", 3)

    server = rpc.serve("tcp://127.0.0.1:*", expose=["pyobjrpc."], workers=1)
    try:
        with rpc.connect(server.endpoint, timeout=20) as remote:
            c = demo.Counter("c", 2)
            c.count, c.step = 5, 3
            assert remote["pyobjrpc.count_of"](c) == 5
            back = remote["pyobjrpc.echo"](c)
            assert isinstance(back, demo.Counter) and back is not c  # a copy
            assert (back.name, back.count, back.step) == ("c", 5, 3)
            made = remote["pyobjrpc.make"]()
            assert isinstance(made, demo.Counter)
            assert (made.name, made.count) == ("made", 3)
            # One instance twice arrives as one instance twice.
            pair = remote["pyobjrpc.echo"]([c, c, 1])
            assert pair[0] is pair[1] and pair[0] is not c and pair[2] == 1
            # A cycle through a List does not cross: the server refuses it
            # (nothing would ever free it there); the connection goes on.
            c.tag = pf.List([c, "x"])
            with pytest.raises(ValueError, match=r"on a cycle, which kPFJSONRefuseCycles refuses"):
                remote["pyobjrpc.echo"](c)
            c.tag = None
            # What a document cannot hold, beside an instance: refused by
            # the client, naming the argument; the connection goes on.
            with pytest.raises(TypeError, match=r"remote call of 'pyobjrpc.echo': argument 0: "):
                remote["pyobjrpc.echo"]([c, echo])
            assert remote["pyobjrpc.echo"](5) == 5
    finally:
        server.stop()


def test_a_subclass_del_that_does_not_call_super_still_releases(mod):
    # The instance goes with its last wrapper even when a subclass's
    # __del__ never calls Object's (nor its parent's, which does).
    class Quiet(mod.pyt.Base):
        __slots__ = ()

        def __del__(self):
            pass

    class Quieter(Quiet):
        __slots__ = ()

        def __del__(self):
            super().__del__()

    for cls in (Quiet, Quieter):
        before = mod.pyt.live()
        x = cls(1)
        assert mod.pyt.live() == before + 1
        del x
        gc.collect()
        assert mod.pyt.live() == before, cls
