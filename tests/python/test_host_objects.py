"""Opaque host objects: a Python object without another conversion crosses
to C as a host object and comes back as the very same object."""
import ctypes
import gc
import os
import subprocess
import sys
import threading
import weakref

import pytest

import packedfunc as pf
from packedfunc import _hostobj

from conftest import ROOT


class Thing:
    """A plain object that weak references can watch."""


@pytest.fixture
def echo(fn):
    return fn("echo")


@pytest.mark.parametrize("make", [Thing, object, lambda: 1 + 2j, lambda: {1, 2},
                                  lambda: Ellipsis, lambda: ctypes.c_int(3),
                                  lambda: frozenset()],
                         ids=["class", "object", "complex", "set", "ellipsis", "c_int",
                              "frozenset"])
def test_echo_returns_the_very_same_object(echo, fn, make):
    obj = make()
    assert echo(obj) is obj
    assert fn("type_name")(obj) == "object"
    assert pf.convert(obj) is obj  # it crosses as itself


def test_callback_gets_and_returns_the_same_object(fn):
    obj = Thing()
    seen = []

    def cb(x):
        seen.append(x)
        return x

    assert fn("call")(cb, obj) is obj
    assert seen == [obj] and seen[0] is obj
    # A callable result of a callback that C calls from its own thread.
    assert fn("call_in_thread")(lambda: obj) is obj


def test_kept_by_c_and_released_from_another_c_thread(fn):
    obj = Thing()
    watch = weakref.ref(obj)
    before = _hostobj.live_count()
    slot = fn("hold")(obj)
    del obj
    gc.collect()
    assert watch() is not None  # C's reference keeps it
    assert fn("held")(slot) is watch()
    # A thread that Python did not start drops C's last reference: the
    # finalizer runs there (taking the GIL) and forgets the object.
    fn("release_in_thread")(slot)
    gc.collect()
    assert watch() is None
    assert _hostobj.live_count() == before


def test_no_leak_over_many_round_trips(echo):
    obj = Thing()
    before = _hostobj.live_count()
    refs = sys.getrefcount(obj)
    for _ in range(2000):  # the counts below are exact: a leak shows at once
        assert echo(obj) is obj
    assert _hostobj.live_count() == before
    assert sys.getrefcount(obj) == refs
    watch = weakref.ref(obj)
    del obj
    gc.collect()
    assert watch() is None


def test_typed_parameter_rejects_a_host_object(fn):
    with pytest.raises(TypeError, match="argument 0: expected int64"):
        fn("typed_add")(Thing(), 1)
    with pytest.raises(TypeError, match="argument 0: expected tensor"):
        fn("typed_ndim")(Thing())


def test_host_object_of_another_gate_is_a_plain_object(fn):
    # A host object that another host made (its own gate) is not ours to
    # look into: it comes back as an Object, and passes back to C as itself.
    gate = ctypes.c_void_p()
    pf.check_call(pf._ffi.PFHostGateCreate(ctypes.byref(gate)))
    out = ctypes.c_void_p()
    try:
        pf.check_call(pf._ffi.PFHostObjectCreate(gate, ctypes.c_void_p(7), None,
                                                 ctypes.byref(out)))
        slot = fn("hold")(pf.Object._adopt(out.value, _hostobj.HOST_OBJECT))
        foreign = fn("held")(slot)
        assert type(foreign) is pf.Object and foreign.type_index == _hostobj.HOST_OBJECT
        assert fn("echo")(foreign).handle == foreign.handle
        fn("release_in_thread")(slot)
    finally:
        pf._ffi.PFObjectFree(gate)


def test_many_threads_pass_host_objects(echo):
    objs = [Thing() for _ in range(4)]
    errors = []

    def work(obj):
        try:
            for _ in range(2000):
                assert echo(obj) is obj
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(o,)) for o in objs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# C holds many host objects, and a C thread releases them one by one while
# the interpreter exits: the finalizers that run before the gate closes
# forget their objects, the later ones are skipped; nothing crashes and
# nothing is printed.
EXIT_RELEASER_SCRIPT = r"""
import ctypes, os
import packedfunc as pf
lib = ctypes.CDLL(os.environ["PF_TESTLIB_PATH"])
lib.pft_init()
hold = pf.get_global_func("testing.hold")
class Thing:
    def __del__(self):
        pass
for _ in range(2000):
    hold(Thing())
assert lib.pft_start_object_releaser(ctypes.c_int64(20)) == 0
"""


def test_c_thread_releasing_host_objects_while_the_interpreter_exits(testlib):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(ROOT, "bindings", "python")
    env["PF_TESTLIB_PATH"] = testlib._name
    for run in range(5):
        r = subprocess.run([sys.executable, "-c", EXIT_RELEASER_SCRIPT], env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, (run, r.returncode, r.stderr)
        assert r.stderr == "" and r.stdout == "", (run, r.stdout, r.stderr)
