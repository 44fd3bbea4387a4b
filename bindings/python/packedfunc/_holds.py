"""The Python objects that C holds, and lending them to the collector.

A Python object crosses into C as a host object (_hostobj) and a callable
as a host function (_callback), both on this interpreter's gate (GATE,
here). Either way C then holds a reference to the Python object: a
*hold*. With ctypes a hold is a key into the table here; with the
compiled backend, a record in the extension that owns a reference to the
object.

Python's cycle collector cannot see those references. A Python object X
that holds a wrapper W (an Array, Map, List, Dict or Function) whose C
object holds X back through a hold looks referenced from outside, and would
never be collected. So at the start of every full collection (generation 2), for
each wrapper W that may reach holds (see track), the binding asks C
(PFObjectFindOwnedHosts) which holds W's reference alone keeps alive:
those under W's C object when W holds the only reference to it, and that
nothing else references. Their references are *lent* to W: they move
into a Loan that W holds, so that the collector sees W -> X, and C's
hidden reference no longer counts. When the collection ends, every
wrapper that survived gives them back. A wrapper that the collector frees
releases its C object in its __del__, which destroys those host objects
and functions, and then gives its loan back: a hold whose host object or
function went is dropped there, any other goes back to C.

Why the answer cannot go stale between the start of a collection and its
end: the collector runs with the GIL, and only code holding a reference
can take a new one. When W's reference is the only one to its C object,
the only way to reach that object, and anything it owns alone, is through
W, under the GIL. (A C call in progress that W lent its object to may
take a reference on another thread at any time; but then the caller's
frame holds W, so W survives, and a hold whose host object is still alive
always goes back to C.) Nothing is lent from a wrapper whose C object
anyone else references: a function registered in the global registry, an
object that C code keeps, a container held by another container that
Python also holds. Such cycles stay until that other reference goes.

Only full collections lend: the work is proportional to the tracked
wrappers, as a full collection's own work is to the live objects, and
the frequent young collections pay nothing.

Lists and Dicts change: the walk reads each one's items at one moment
(C's rule, host.h), so a hold that C code puts into a List during a
collection is not lent (it stays alive: the safe side), and one that C
removes during it is given back or dropped as any other. The rule is the
same for them as for Arrays and Maps: a List that holds itself (directly
or through other Lists and Dicts) outlives any wrapper, so nothing it
holds is lent. Wrappers are tracked once C holds a Python object or once
a List or Dict has been seen (since then anything may gain a hold later):
an Array that came from C before either, holding a List to which Python
later adds an object that holds the Array, is not tracked, and that cycle
stays. Everything here is private.
"""
import ctypes
import gc
import itertools
import os
import sys
import threading
import weakref

from ._backend import cext as _cext
from ._errors import check_call
from ._ffi import (PFErrorClear, PFHostGateCreate, PFObjectFindOwnedHosts, PFObjectFree,
                   PFObjectRetain)
from ._library import state

c_void_p, c_int64, byref = ctypes.c_void_p, ctypes.c_int64, ctypes.byref

# Every Python object and callable that C holds is held through this gate.
# At exit it is closed (_callback): C threads that call in afterwards get a
# RuntimeError instead of entering an interpreter that is going away, and
# the finalizers of holds are skipped.
GATE = c_void_p()
check_call(PFHostGateCreate(byref(GATE)))

# The kinds of holds, counted apart (_hostobj.live_count,
# _callback.live_count): the extension's numbers, which it counts by.
OBJECT, FUNCTION = (_cext.HOLD_OBJECT, _cext.HOLD_FUNCTION) if _cext else (0, 1)

#: The most values (items, constants, references) that one wrapper's walk
#: may look at in one collection; a larger graph is not lent from, and
#: stays alive until its wrapper goes (never the wrong way round).
MAX_VALUES = 1 << 20

MISSING = object()  # value_of's answer for no object


# ---------------------------------------------------------------------------
# Holds and loans with ctypes: a table of keys
# ---------------------------------------------------------------------------

_held = {}  # key -> the Python object, while C's hold owns the reference
_lent = {}  # key -> weak reference to the _Loan that owns it, while lent
_keys = itertools.count(1)
_counts = [0, 0]  # live holds, by kind
# Orders the changes of the tables above against each other and against
# value_of: finalizers run on any thread, and other threads run between
# the bytecodes of a collection's callbacks. Held only over table changes
# (no user code: a reference that goes is dropped after it is released);
# reentrant, as a signal handler may run while it is held.
_lock = threading.RLock()


def _after_fork_in_child():
    # Only the forking thread lives on, and it held the lock (below): the
    # tables are whole; the lock is made anew.
    global _lock
    _lock = threading.RLock()


os.register_at_fork(before=_lock.acquire, after_in_parent=_lock.release,
                    after_in_child=_after_fork_in_child)


def hold(x, kind):
    """A new hold of x (ctypes): the key to give C as the payload or the
    resource, which release(key, kind) drops."""
    with _lock:
        key = next(_keys)
        _held[key] = x
        _counts[kind] += 1
    return key


def release(key, kind):
    """C's host object or function of `key` went (its finalizer, on any
    thread, with the GIL): the table's reference goes, or, while lent, the
    loan drops it when it gives back."""
    with _lock:
        _counts[kind] -= 1
        x = _held.pop(key, MISSING)
        if x is MISSING:
            _lent.pop(key, None)
    del x  # here, after the lock: its last reference may run any code


#: The table's lookup, for the ctypes trampoline's hot path: the callable,
#: or None when it is lent (see value_of) or gone.
held_get = _held.get


def value_of(key):
    """The Python object of a live hold (ctypes), lent or not; MISSING
    when there is none (a loan dropped without giving it back). A lend
    puts the object in its loan before taking it out of _held, so that a
    lookup that finds neither is one that overlapped a change: it looks
    again under the lock."""
    x = _held.get(key, MISSING)
    if x is MISSING:
        with _lock:
            x = _held.get(key, MISSING)
            if x is MISSING:
                ref = _lent.get(key)
                loan = ref() if ref is not None else None
                if loan is not None:
                    x = loan.refs.get(key, MISSING)
    return x


def count(kind):
    """How many holds of `kind` C has (lent or not)."""
    if _cext:
        return _cext.live_count(kind)
    return _counts[kind]


def new_host(kind, x, create):
    """A new reference (an int handle) to a host object (kind OBJECT) or a
    host function (FUNCTION) on GATE, whose payload or resource is a new
    hold of x. With ctypes, create(gate, key, out) makes it (with the
    caller's trampoline and finalizer). On failure the library has already
    run the finalizer, which dropped the hold."""
    if _cext:
        rc, handle = _cext.new_host(kind, GATE.value, x)
        check_call(rc)
        return handle
    key = hold(x, kind)
    out = c_void_p()
    check_call(create(GATE, c_void_p(key), byref(out)))
    return out.value


class _Loan:
    """The references lent to one wrapper for one collection (ctypes).
    Deliberately without __del__: the collector may finalize it before
    its wrapper, whose __del__ must release the C object first."""

    __slots__ = ("refs", "__weakref__")

    def __init__(self):
        self.refs = {}

    def __len__(self):
        return len(self.refs)

    def lend(self, keys):
        """Takes over the references of these holds, those still held."""
        me = weakref.ref(self)
        with _lock:
            for key in keys:
                x = _held.get(key, MISSING)
                if x is not MISSING:  # else gone, or lent already
                    self.refs[key] = x
                    _lent[key] = me
                    del _held[key]

    def give_back(self):
        with _lock:
            refs, self.refs = self.refs, {}
            for key, x in refs.items():
                if _lent.pop(key, None) is not None:
                    _held[key] = x  # its host object or function lives: C's again
        # The others' host objects or functions went: their references go
        # with `refs`, after the lock.


Loan = _cext.Loan if _cext else _Loan


# ---------------------------------------------------------------------------
# What an operation holds
# ---------------------------------------------------------------------------

class Held:
    """A reference of an operation's own to an object that it took (a
    Function's or an Object's handle), so that user code that runs
    before the operation ends (a conversion's hook, ``__index__``,
    another thread) cannot free it by releasing the Python wrapper by
    hand: the operation keeps it in its `keep` list until it ends.
    `instance`: the wrapper when it is an instance of a registered type,
    which the call holds for its thread (see lock_instances)."""

    __slots__ = ("handle", "instance")

    def __init__(self, handle, instance=None):
        self.handle, self.instance = 0, instance
        check_call(PFObjectRetain(handle))
        self.handle = handle

    def __del__(self):
        if self.handle and not state.shutting_down:
            PFObjectFree(self.handle)


def release_after_own_del(cls, release):
    """For __init_subclass__ of a wrapper class whose __del__ is `release`
    (idempotent): when the subclass `cls` defines a __del__ of its own,
    `release` runs after it, whatever it does (it need not call super(),
    and may raise), so that the C object never outlives the wrapper;
    unless it brought the wrapper back to life (stored it somewhere: it
    then has more references than before), which keeps its C object."""
    own = cls.__dict__.get("__del__")
    if own is None or getattr(own, "_pf_releases", False):
        return

    def __del__(self):
        before, err = sys.getrefcount(self), None
        try:
            own(self)
        except BaseException as exc:
            # Without its traceback, whose frames hold the wrapper.
            err = exc.with_traceback(None)
        if sys.getrefcount(self) <= before:
            release(self)
        if err is not None:
            raise err

    __del__._pf_releases = True
    __del__.__qualname__ = getattr(own, "__qualname__", "%s.__del__" % cls.__qualname__)
    __del__.__doc__ = getattr(own, "__doc__", None)
    cls.__del__ = __del__


def instances_in(keep):
    """The instances of registered types among the objects that an
    operation holds (see Held), for lock_instances."""
    return [k.instance for k in keep if type(k) is Held and k.instance is not None]


# ---------------------------------------------------------------------------
# Tracking wrappers
# ---------------------------------------------------------------------------

_unsorted = []  # weak references to wrappers not yet asked about
_reaching = []  # weak references to wrappers whose C objects reach holds
_lenders = []   # weak references to wrappers lent to in this collection


_refs_change = [False]  # see refs_may_change


def refs_may_change():
    """References that the walk follows may change from now on: a List or
    Dict wrapper was made (items can be added to it at any time), or a
    registered type with handle fields is in use (its instances' fields may
    come to hold a Python object at any time). Either way a C object made
    while C holds no Python object may still come to reach one (an Array
    of such instances, of a List): from now on every wrapper is tracked.
    The extension keeps its own flag, set here too (and by its own List
    and Dict wrappers)."""
    _refs_change[0] = True
    if _cext:
        _cext.refs_may_change()


def should_track():
    """Whether new wrappers must be tracked: C holds some Python object
    now, or may come to through a wrapper made now (see refs_may_change)."""
    if _cext:
        return _cext.should_track()
    return _refs_change[0] or _counts[OBJECT] > 0 or _counts[FUNCTION] > 0


_prune_at = [1024]  # the length of _unsorted at which dead references go


def track(wrapper):
    """Consider `wrapper` (an Array, Map, List, Dict or Function that owns
    a reference to its C object, or an instance of a registered type with
    handle fields) at full collections. Only when should_track(): a C
    object made while C holds no Python object can never reach one, as
    the references that the walk follows through Arrays, Maps and
    functions never change, unless they pass through a List, a Dict or
    the fields of registered types (see refs_may_change)."""
    if should_track():
        _unsorted.append(weakref.ref(wrapper))
        if len(_unsorted) >= _prune_at[0]:
            _prune()


def _prune():
    # Wrappers that went before any full collection (the nested containers
    # of one conversion, temporaries) are forgotten, so that the list stays
    # as long as the live ones, amortized. Other threads may append
    # meanwhile: only the first n items are replaced, in one operation.
    with _lock:
        n = len(_unsorted)
        _unsorted[:n] = [ref for ref in _unsorted[:n] if ref() is not None]
        _prune_at[0] = max(1024, 2 * len(_unsorted))


_out = (c_void_p * 64)()
_num_owned, _num_reachable = c_int64(), c_int64()
_p_owned, _p_reachable = byref(_num_owned), byref(_num_reachable)


def _owned(handle, sort):
    """The payloads of the holds that `handle` alone keeps alive, and how
    many holds it reaches (with `sort`, when the walk succeeded; else
    None)."""
    if _cext:
        return _cext.owned_holds(handle, GATE.value, MAX_VALUES, sort)
    out, cap = _out, len(_out)
    while True:
        if PFObjectFindOwnedHosts(handle, GATE, MAX_VALUES, out, cap, _p_owned,
                                  _p_reachable if sort else None) != 0:
            PFErrorClear()  # out of memory: nothing lent (safe), asked again next time
            return (), None
        n = _num_owned.value
        if n <= cap:
            return out[:n], (_num_reachable.value if sort else None)
        out, cap = (c_void_p * n)(), n


def _own(wrapper, name):
    """The descriptor of the binding's own attribute `name` of a wrapper:
    the base-most class's, which a registered type's field or method of
    that name (in its class, derived from it) cannot shadow."""
    for k in reversed(type(wrapper).__mro__):
        d = k.__dict__.get(name)
        if d is not None:
            return d
    raise AttributeError(name)


def _lend_to(wrapper, payloads):
    loan = Loan()
    loan.lend(payloads)
    if len(loan):
        _own(wrapper, "_loan").__set__(wrapper, loan)
        _lenders.append(weakref.ref(wrapper))


def _lend_all():
    """At the start of a full collection."""
    with _lock:  # appends after the copy stay for the next collection
        unsorted = _unsorted[:]
        del _unsorted[:len(unsorted)]
    reaching = []
    for batch, sort in ((unsorted, True), (_reaching, False)):
        for ref in batch:
            w = ref()
            handle = None if w is None else _own(w, "_handle").__get__(w)
            if not handle:
                continue  # gone
            if _own(w, "_loan").__get__(w) is not None:  # lent already (never, as collections do not nest)
                reaching.append(ref)
                continue
            payloads, reachable = _owned(handle, sort)
            # Asked for the first time: one that reaches no hold never
            # will; one too large to walk (-1) never will be lent from.
            if reachable is None or reachable > 0:
                reaching.append(ref)
            if payloads:
                _lend_to(w, payloads)
    _reaching[:] = reaching


def _give_back_all():
    """At the end of a full collection: the wrappers that survived give
    back (those that the collector freed gave back in their __del__)."""
    lenders = _lenders[:]
    _lenders.clear()
    for ref in lenders:
        w = ref()
        if w is not None:
            give_back(w)


def give_back(wrapper):
    """Ends the wrapper's loan, if any: after its C object was released
    (its __del__), or at the end of the collection."""
    slot = _own(wrapper, "_loan")
    try:
        loan = slot.__get__(wrapper)
    except AttributeError:
        return  # unset when its _adopt failed half-way
    if loan is not None:
        slot.__set__(wrapper, None)
        loan.give_back()


def _on_collection(phase, info):
    if info.get("generation") != 2 or state.shutting_down:
        return
    if phase == "start":
        if _unsorted or _reaching:
            _lend_all()
    elif _lenders:
        _give_back_all()


gc.callbacks.append(_on_collection)
