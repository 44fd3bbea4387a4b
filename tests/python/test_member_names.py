"""Fields and methods of registered object types named as the binding's
own attributes (type_index, _handle, _data, _code, _loan, handle, _adopt)
work as any other member on both backends; names that Python keeps for
itself (__class__, __dict__...) are refused when the class is made.

The types come from tests/modules/mod_pyobj.c (pyt.Names, pyt.DunderMethod,
pyt.DunderField).
"""
import copy
import gc
import os
import pickle

import pytest

import packedfunc as pf
from packedfunc import _object_types
from conftest import ROOT

BUILD = os.environ.get("BUILD", "build")
MODULE_DIR = os.environ.get("PF_TEST_MODULE_DIR") or os.path.join(ROOT, BUILD, "modules")


@pytest.fixture(scope="module")
def mod():
    return pf.load_module(os.path.join(MODULE_DIR, "mod_pyobj.so"))


def _fill(n, other):
    n.type_index = 41
    n._handle = other
    n._data = "data"
    n._code = -3
    n._loan = 2.5


def test_fields_named_as_the_bindings_state_read_and_write(mod):
    n, other = mod.pyt.Names(), mod.pyt.Names()
    assert (n.type_index, n._handle, n._data, n._code, n._loan) == (7, None, None, 0, 0.0)
    _fill(n, other)
    assert (n.type_index, n._data, n._code, n._loan) == (41, "data", -3, 2.5)
    assert n._handle is other  # the instance stored, not its handle's int
    n._handle = n
    assert n._handle is n
    n._handle = None
    assert n._handle is None


def test_the_bindings_own_values_stay_reachable(mod):
    n = mod.pyt.Names()
    n.type_index = 41
    ti = pf.Object.type_index.__get__(n)
    assert ti == _object_types.find_type("pyt.Names", "test")
    assert pf.Object.handle.__get__(n) != 0
    assert pf.same_as(n, n) and not pf.same_as(n, mod.pyt.Names())
    assert n == n and hash(n) == hash(n)


def test_methods_named_as_the_bindings_own(mod):
    n = mod.pyt.Names()
    n._code = 12
    assert n.handle() == 12
    assert n._adopt(5) == 12
    n.type_index = 100
    assert n._adopt(5) == 105


def test_an_instance_crosses_to_c_and_back(mod):
    n, other = mod.pyt.Names(), mod.pyt.Names()
    _fill(n, other)
    assert mod.pyt.echo(n) is n
    assert mod.pyt.echo(n)._handle is other
    assert pf.List([n])[0] is n


def test_repr_copy_and_pickle(mod):
    n, other = mod.pyt.Names(), mod.pyt.Names()
    _fill(n, other)
    assert repr(n).startswith("pyt.Names(type_index=41, _handle=pyt.Names(")
    assert "_data='data', _code=-3, _loan=2.5)" in repr(n)
    for q in (copy.copy(n), pickle.loads(pickle.dumps(n))):
        assert type(q) is type(n) and q is not n
        assert (q.type_index, q._data, q._code, q._loan) == (41, "data", -3, 2.5)
    assert copy.copy(n)._handle is other
    assert copy.deepcopy(n)._handle._code == 0


def _round(mod):
    n, other = mod.pyt.Names(), mod.pyt.Names()
    _fill(n, other)
    mod.pyt.echo(n)
    copy.copy(n)
    del n, other


def test_no_leak(mod):
    _round(mod)
    gc.collect()
    alive, wrapped = mod.pyt.names_alive(), _object_types.live_count()
    for _ in range(5):
        _round(mod)
    gc.collect()
    assert mod.pyt.names_alive() == alive
    assert _object_types.live_count() == wrapped


@pytest.mark.parametrize("key, kind, name", [("pyt.DunderMethod", "method", "__class__"),
                                             ("pyt.DunderField", "field", "__dict__")])
def test_names_python_keeps_are_refused(mod, key, kind, name):
    for _ in range(2):  # and again: nothing half made stays
        with pytest.raises(TypeError, match=r"packedfunc: the object type %s cannot have a "
                           r"Python class: its %s name '%s' is one that Python keeps for itself"
                           % (key, kind, name)):
            pf.get_class(key)


class _Box:
    pass


def test_a_cycle_through_a_field_named_handle_is_collected(mod):
    # The collector's loans (see _holds) read and write the binding's own
    # _handle and _loan, not the fields of those names.
    gc.collect()
    alive = mod.pyt.names_alive()
    for _ in range(3):
        n, box = mod.pyt.Names(), _Box()
        box.n = n
        n._handle = box  # a host object that holds n: a cycle through C
        assert n._handle is box
        del n, box
        gc.collect()
    assert mod.pyt.names_alive() == alive


def test_a_released_instance_is_refused_naming_the_argument(mod):
    n = mod.pyt.Names()
    n.__del__()
    with pytest.raises(ValueError, match=r"packedfunc: argument 0: the Names was released"):
        mod.pyt.echo(n)
    assert repr(n) == "<pyt.Names (released)>"
