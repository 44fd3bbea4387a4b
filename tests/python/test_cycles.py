"""Cycles through C: a Python object that holds an Array, Map or Function
which, through C, holds the object back.

The collector cannot see C's references, so without help such a cycle
looks referenced from outside and is never freed. The binding lends the
collector the references that a wrapper's C object alone keeps (see
packedfunc._cycles): these tests check that such cycles are freed by
gc.collect(), that a cycle C also holds elsewhere is not, that everything
works the same after (and during) a collection that kept it, and that
nothing is freed twice or leaked over many collections.
"""
import gc
import os
import sys
import threading
import weakref

import pytest

import packedfunc as pf
from packedfunc import _callback, _holds, _hostobj
from conftest import ROOT

MODULE_DIR = os.environ.get("PF_TEST_MODULE_DIR") or os.path.join(
    ROOT, os.environ.get("BUILD", "build"), "modules")

MIB = 1 << 20
CYCLES = 50


class Holder:
    """A Python object of 1 MiB that the tests link to itself through C."""

    def __init__(self):
        self.payload = bytearray(MIB)


class Thing:
    pass


@pytest.fixture
def echo(fn):
    return fn("echo")


def live():
    """Python objects and callables that C holds, through host objects
    and host functions."""
    return _hostobj.live_count(), _callback.live_count()


# ---- ways to make one cycle: each returns a weak reference to its Python object

def through_an_array(fn):
    h = Holder()
    h.link = pf.Array([h, 1, "x"])
    return weakref.ref(h)


def through_a_map(fn):
    h = Holder()
    h.link = pf.Map({"self": h, 2: [h, (h,)]})
    return weakref.ref(h)


def through_a_function(fn):
    payload = bytearray(MIB)

    def callback():
        return len(payload) + (function is not None)

    function = pf.convert(callback)  # the closure holds the Function of itself
    return weakref.ref(callback)


def through_an_array_of_callbacks(fn):
    h = Holder()
    h.link = pf.Array([lambda: h.payload])
    return weakref.ref(h)


def through_a_container_from_c(fn):
    h = Holder()
    h.link = fn("echo")([[h], {"k": h}])  # a new wrapper of the C Array
    return weakref.ref(h)


def through_a_bound_function(fn):
    h = Holder()
    h.link = fn("echo").bind({0: h})
    return weakref.ref(h)


def through_a_callback_argument(fn):
    # C passes a fresh Array to a callback, which keeps it.
    h = Holder()
    fn("call")(lambda arr: setattr(h, "link", arr), [h])
    return weakref.ref(h)


def through_a_list(fn):
    h = Holder()
    h.link = pf.List([h, 1])
    return weakref.ref(h)


def through_a_dict(fn):
    h = Holder()
    h.link = pf.Dict({"self": h, 2: [h]})
    return weakref.ref(h)


def through_a_list_filled_later(fn):
    # The wrapper exists before the List holds anything.
    h = Holder()
    h.link = pf.List()
    h.link.append(h)
    return weakref.ref(h)


def through_a_list_that_c_filled(fn):
    h = Holder()
    h.link = pf.List()
    fn("list_append")(h.link, h)
    return weakref.ref(h)


def through_a_dict_inside_an_array(fn):
    h = Holder()
    d = pf.Dict()
    h.link = pf.Array([d])
    fn("dict_set")(d, "h", h)
    return weakref.ref(h)


WAYS = [through_an_array, through_a_map, through_a_function, through_an_array_of_callbacks,
        through_a_container_from_c, through_a_bound_function, through_a_callback_argument,
        through_a_list, through_a_dict, through_a_list_filled_later, through_a_list_that_c_filled,
        through_a_dict_inside_an_array]


@pytest.mark.parametrize("make", WAYS, ids=lambda f: f.__name__)
def test_cycles_through_c_are_collected(fn, make):
    gc.collect()
    before = live()
    watches = [make(fn) for _ in range(CYCLES)]
    assert live() != before  # C holds what the cycles hold
    gc.collect()
    assert sum(w() is not None for w in watches) == 0
    assert live() == before


def test_a_list_that_holds_itself_keeps_its_items_until_cleared(fn):
    # C's rule: a List that holds itself outlives every wrapper, so nothing
    # it holds is lent to the collector; clearing it breaks the cycle.
    before = live()
    h = Holder()
    lst = pf.List([h])
    lst.append(lst)
    h.link = lst
    held = weakref.ref(h)
    del h, lst
    for _ in range(2):
        gc.collect()
        assert held() is not None and held().link[0] is held()
    held().link.clear()
    gc.collect()
    assert held() is None and live() == before


# ---- the same through the fields of registered types (mod_pyobj.c's pyt.Holder,
# whose fields o (object) and f (func) are writable: they change after the
# instance is made, unlike an Array's items)

@pytest.fixture(scope="module")
def pyt():
    return pf.load_module(os.path.join(MODULE_DIR, "mod_pyobj.so")).pyt


def through_an_object_field(pyt):
    h = Holder()
    h.link = pyt.Holder()
    h.link.o = h
    return weakref.ref(h)


def through_a_func_field(pyt):
    h = Holder()
    h.link = pyt.Holder()
    h.link.f = lambda: h.payload
    return weakref.ref(h)


def through_an_array_in_an_object_field(pyt):
    h = Holder()
    h.link = pyt.Holder()
    h.link.o = pf.Array([h])
    return weakref.ref(h)


def through_a_list_in_an_object_field(pyt):
    # A List (followed, though it changes) inside a field.
    h = Holder()
    h.link = pyt.Holder()
    h.link.o = pf.List([h])
    return weakref.ref(h)


def through_an_instance_in_a_list(pyt):
    # The List holds the instance; the instance's field holds h.
    h = Holder()
    inst = pyt.Holder()
    h.link = pf.List([inst])
    inst.o = h
    return weakref.ref(h)


def through_an_instance_in_an_array(pyt):
    # The Array holds the instance before the instance's field holds h.
    h = Holder()
    inst = pyt.Holder()
    h.link = pf.Array([inst])
    inst.o = h
    return weakref.ref(h)


def through_an_instance_in_an_instance(pyt):
    h = Holder()
    outer, inner = pyt.Holder(), pyt.Holder()
    outer.o = inner
    h.link = outer
    inner.o = h
    return weakref.ref(h)


FIELD_WAYS = [through_an_object_field, through_a_func_field,
              through_an_array_in_an_object_field, through_a_list_in_an_object_field,
              through_an_instance_in_a_list, through_an_instance_in_an_array,
              through_an_instance_in_an_instance]


@pytest.mark.parametrize("make", FIELD_WAYS, ids=lambda f: f.__name__)
def test_cycles_through_fields_of_registered_types_are_collected(pyt, make):
    gc.collect()
    before = live()
    watches = [make(pyt) for _ in range(CYCLES)]
    assert live() != before
    gc.collect()
    assert sum(w() is not None for w in watches) == 0
    assert live() == before


def test_an_instance_that_c_holds_elsewhere_keeps_its_cycle(pyt):
    # Another reference to the instance (a second Array that Python keeps)
    # is one the collector cannot see through: the cycle stays, intact.
    gc.collect()
    h = Holder()
    inst = pyt.Holder()
    inst.o = h
    h.link = inst
    keep = pf.Array([inst])
    watch = weakref.ref(h)
    del h, inst
    gc.collect()
    assert watch() is not None and watch().link.o is watch()
    del keep
    gc.collect()
    assert watch() is None


def test_an_instance_field_that_holds_its_own_instance(pyt):
    # A cycle inside C (the instance holds itself) is never freed by
    # reference counting: what it holds stays alive, and nothing breaks.
    def make():
        h = Holder()
        inst = pyt.Holder()
        inst.o = inst
        inst.f = lambda: h.payload
        h.link = inst
        return weakref.ref(h)

    gc.collect()
    watch = make()
    gc.collect()
    h = watch()
    assert h is not None and len(h.link.f()) == MIB
    h.link.o = None  # breaks the C cycle: now the collector can free it
    del h
    gc.collect()
    assert watch() is None


def test_a_cycle_that_c_also_holds_is_kept_and_keeps_working(fn, unique_name):
    name = unique_name()
    before = live()

    def register():
        def callback():
            return 7 if function is not None else 0

        function = pf.convert(callback)
        pf.register_func(name, function)  # C's registry holds it too
        return weakref.ref(callback)

    watch = register()
    h = Holder()
    h.link = pf.Array([h])
    slot = fn("hold")(h.link)  # C keeps the Array too
    held = weakref.ref(h)
    del h
    for _ in range(3):
        gc.collect()
        assert watch() is not None and held() is not None
        assert pf.get_global_func(name)() == 7 and fn("call")(pf.get_global_func(name)) == 7
        assert held().link[0] is held() and fn("held")(slot)[0] is held()
    pf.remove_global_func(name)
    fn("release_in_thread")(slot)
    gc.collect()
    assert watch() is None and held() is None
    assert live() == before


def test_everything_works_after_a_collection_that_kept_it(fn, echo):
    thing = Thing()
    arr = pf.Array([thing, [thing], {"t": thing}])
    m = pf.Map({"t": thing})

    def callback(x=0):
        return x + 1 if callback_function is not None else -1

    callback_function = pf.convert(callback)
    bound = echo.bind({0: thing})
    # The wrappers keep the values they read (not the nested containers):
    # one more reference each, from the first read on.
    assert arr[0] is thing and m["t"] is thing
    counts, refs = live(), sys.getrefcount(thing)
    for _ in range(5):
        gc.collect()
        assert arr[0] is thing and arr[1][0] is thing and arr[2]["t"] is thing
        assert m["t"] is thing and echo(arr)[0] is thing and echo(m)["t"] is thing
        assert callback_function(1) == 2 and fn("call")(callback_function, 4) == 5
        assert bound() is thing
        assert live() == counts and sys.getrefcount(thing) == refs
    del arr, m, bound
    gc.collect()
    assert sys.getrefcount(thing) == refs - 7  # 5 holds, and what arr and m kept


def test_finalizers_during_a_collection_see_everything_in_place(fn):
    # A __del__ that runs inside the collection (its object is garbage)
    # uses wrappers whose references the collector has borrowed.
    thing = Thing()
    arr = pf.Array([thing])
    function = pf.convert(lambda: 42)
    seen = []

    class Finalizer:
        def __del__(self):
            seen.append((function(), fn("call")(function), arr[0] is thing,
                         fn("echo")(arr)[0] is thing))

    f = Finalizer()
    f.self = f
    del f
    gc.collect()
    assert seen == [(42, 42, True, True)]


def test_calls_from_other_threads_during_collections(fn):
    thing = Thing()
    arr = pf.Array([thing])
    function = pf.convert(lambda x: x + 1)
    call = fn("call")
    stop, errors, calls = threading.Event(), [], [0]

    def caller():
        while not stop.is_set():
            try:
                assert call(function, 1) == 2 and arr[0] is thing
                calls[0] += 1
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)
                return

    t = threading.Thread(target=caller)
    t.start()
    try:
        for _ in range(100):
            # Garbage with wrappers, so that the collection releases the
            # GIL (in their __del__) while the other thread calls.
            for _ in range(20):
                through_an_array(fn)
                through_a_function(fn)
            gc.collect()
    finally:
        stop.set()
        t.join()
    assert errors == [] and calls[0] > 0


def test_a_wrapper_resurrected_by_a_finalizer(fn):
    rescued = []

    class Rescuer:
        def __del__(self):
            rescued.append(self.h.link)

    before = live()
    h = Holder()
    h.link = pf.Array([h])
    r = Rescuer()
    r.h, h.rescuer = h, r
    del h, r
    gc.collect()
    # Finalized together: the Array was released by its own __del__, and
    # the Holder went with it; nothing crashed, nothing leaked.
    assert len(rescued) == 1 and repr(rescued[0]) == "<packedfunc.Array (released)>"
    rescued.clear()
    gc.collect()
    assert live() == before


def test_no_double_free_or_leak_over_many_collections(fn):
    thing = Thing()
    refs = sys.getrefcount(thing)
    for make in WAYS:
        make(fn)
    gc.collect()
    before, objects = live(), len(gc.get_objects())
    for i in range(40):
        kept = pf.Array([thing, lambda: thing])
        for make in WAYS:
            make(fn)
        gc.collect()
        assert kept[0] is thing and kept[1]() is thing
        del kept
    gc.collect()
    assert live() == before
    assert len(gc.get_objects()) - objects < 200
    assert sys.getrefcount(thing) == refs


def test_plain_containers_do_not_slow_collections_down(echo, monkeypatch):
    # 10,000 live containers of plain values, made in Python and in C
    # while C holds a Python callable: once the first full collection has
    # found that they reach no hold, a full collection walks none of them
    # again (counted, not timed: the cost of a collection is the walks the
    # binding adds to it).
    callback = pf.convert(lambda: 0)
    keep = [pf.Array([i, "x", 2.5]) for i in range(5000)]
    keep += [echo([i, {"k": i}]) for i in range(5000)]
    walks = []
    owned = _holds._owned
    monkeypatch.setattr(_holds, "_owned", lambda h, sort: walks.append(h) or owned(h, sort))
    gc.collect()
    assert len(walks) >= 5000  # the first collection asks each once
    walks.clear()
    gc.collect()
    gc.collect()
    assert len(walks) < 16, len(walks)
    del keep, callback
