"""What an operation on an instance of a registered type holds: the objects
it took, until it ends, whatever user code runs meanwhile (a conversion's
__index__ or __packedfunc_value__ that releases an instance by hand); the
instance itself against the calls and field accesses of other threads
while a method runs with the GIL released; and the defaults of methods and
constructors, alike on both backends.

The types come from tests/modules/mod_pyobj.c (pyt.Dog).
"""
import os
import threading
import time

import pytest

import packedfunc as pf
from conftest import ROOT

BUILD = os.environ.get("BUILD", "build")
MODULE_DIR = os.environ.get("PF_TEST_MODULE_DIR") or os.path.join(ROOT, BUILD, "modules")


@pytest.fixture(scope="module")
def pyt():
    return pf.load_module(os.path.join(MODULE_DIR, "mod_pyobj.so")).pyt


# ---------------------------------------------------------------------------
# Defaults of methods and constructors
# ---------------------------------------------------------------------------

def test_a_positional_call_that_omits_a_defaulted_parameter_takes_its_default(pyt):
    d = pyt.Dog()  # __init__(self, age: int64 = 3)
    assert d.age == 3
    assert pyt.Dog(5).age == 5 and pyt.Dog(age=7).age == 7
    fins = pyt.dog_fins()
    assert d.learn() == 1 + 1000 * fins  # learn(self, n: int64 = 1)
    assert d.learn() == 2 + 1000 * fins  # again, once the call looked its signature up
    assert d.learn(3) == 5 + 1000 * fins
    assert d.learn(n=4) == 9 + 1000 * fins
    assert pyt.Dog.learn(d) == 10 + 1000 * fins
    with pytest.raises(TypeError, match="unexpected keyword argument 'm'"):
        d.learn(m=1)


# ---------------------------------------------------------------------------
# Hand releases while an operation converts its arguments
# ---------------------------------------------------------------------------

class _Releases:
    """Releases `victim` by hand (as documented: __del__) while a call
    converts it, and notes how many Dogs were finalized right after."""

    def __init__(self, pyt, victim, value):
        self.pyt, self.victim, self.value, self.fins_after = pyt, victim, value, None

    def _release(self):
        self.victim.__del__()
        self.victim = None
        self.fins_after = self.pyt.dog_fins()
        return self.value


class _Index(_Releases):
    def __index__(self):
        return self._release()


class _Hook(_Releases):
    def __packedfunc_value__(self):
        return self._release()


_OPERATIONS = {
    "method": lambda pyt, d, x: d.learn(x),
    "method by keyword": lambda pyt, d, x: d.learn(n=x),
    "function": lambda pyt, d, x: pyt.dog_learn(d, x),
    "field": lambda pyt, d, x: setattr(d, "tricks", x),
}


@pytest.mark.parametrize("hook", [_Index, _Hook])
@pytest.mark.parametrize("operation", sorted(_OPERATIONS))
def test_an_instance_released_while_its_operation_converts_is_held_until_it_ends(
        pyt, operation, hook):
    d = pyt.Dog(3)
    fins = pyt.dog_fins()
    x = hook(pyt, d, 5)
    out = _OPERATIONS[operation](pyt, d, x)
    # Released by hand, but held by the operation: finalized only after it.
    assert x.fins_after == fins
    assert pyt.dog_fins() == fins + 1
    if operation != "field":
        assert out == 5 + 1000 * fins  # written to the live instance
    assert repr(d) == "<pyt.Dog (released)>"
    with pytest.raises(ValueError, match="the Dog was released"):
        d.tricks
    del d


def test_an_operation_on_an_instance_released_before_it_says_so(pyt):
    d = pyt.Dog(3)
    d.__del__()
    with pytest.raises(ValueError, match="the Dog was released"):
        d.learn()
    with pytest.raises(ValueError, match="argument 0: the Dog was released"):
        pyt.dog_learn(d, 1)
    with pytest.raises(ValueError, match="the Dog was released"):
        d.tricks = 1


# ---------------------------------------------------------------------------
# A method and another thread's field access
# ---------------------------------------------------------------------------

def _watching(pyt, d, ms, entered):
    """Starts d.watch(ms) on a thread, and returns once the method has
    read its name; the thread's result goes to the list returned."""
    out = []
    t = threading.Thread(target=lambda: out.append(d.watch(ms)))
    t.start()
    deadline = time.monotonic() + 10
    while pyt.dog_watching() == entered:
        assert time.monotonic() < deadline, "watch() never started"
        time.sleep(0.001)
    return t, out


def test_a_field_write_waits_for_a_method_of_the_instance_on_another_thread(pyt):
    d = pyt.Dog(3)
    d.name = "x" * 100
    t, out = _watching(pyt, d, 300, pyt.dog_watching())
    d.name = "y" * 10  # frees the string that watch() reads, unless it waits
    t.join()
    assert out == [100]  # watch() saw no change while it ran
    assert d.name == "y" * 10


def test_a_call_that_passes_the_instance_waits_too_and_threads_own_calls_pass(pyt):
    d = pyt.Dog(3)
    d.name = "abc"
    t, out = _watching(pyt, d, 200, pyt.dog_watching())
    d.tricks = 0  # an int field in place: no wait needed, but none harmful
    assert pyt.dog_learn(d, 2) == 2 + 1000 * pyt.dog_fins()
    t.join()
    assert out == [3]
    # A thread's own nested calls pass: a method that calls back into
    # Python, which uses the instance, does not wait for itself.
    assert d.watch(0) == 3
