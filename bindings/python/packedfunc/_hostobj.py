"""Opaque host objects: any Python object that has no other conversion.

Such an object crosses to C as a host object (c_api.h, object type "host
object") made on the interpreter's one gate (_holds.GATE). Its payload is
a hold (see _holds): with ctypes a key into the table of Python objects
that C holds, with the compiled backend a record in the extension that
owns a reference to the object. Its finalizer drops the hold when C's last
reference goes, on whatever thread drops it (after the gate is closed at
exit, the finalizer is skipped and the object deliberately leaked). A host
object that comes back from C, as a result or a callback's argument, is
looked up by its payload and is the very same Python object; a host
object made on another gate (another interpreter, another host language)
comes back as a plain packedfunc.Object. Everything here is private.
"""
import ctypes

from . import _holds
from ._backend import cext as _cext
from ._callback import UNRAISABLE_OWNERS
from ._convert import OBJECT, P, RANK_OPAQUE, register_fallback, register_object_type
from ._ffi import (PFErrorClear, PFHostObjectCreate, PFHostObjectGetPayload, PFObjectFree,
                   keep_forever)
from ._holds import GATE, MISSING
from ._library import OBJECT_TYPES
from ._mirrors import FINALIZER
from ._object import Object, handle_of

c_void_p, byref = ctypes.c_void_p, ctypes.byref

HOST_OBJECT = OBJECT_TYPES["host object"]


def _finalize(key):
    # C's last reference to a host object went: drop its hold. May run on
    # any thread; never after the gate is closed at exit.
    try:
        _holds.release(key, _holds.OBJECT)
    except BaseException:
        pass


# One finalizer for the whole process, never freed: C may run it as long as
# any host object lives.
_FINALIZER = keep_forever(FINALIZER(_finalize))
UNRAISABLE_OWNERS.append(_finalize)


def live_count():
    """How many Python objects C holds through host objects."""
    return _holds.count(_holds.OBJECT)


def _create_host_object(gate, key, out):
    return PFHostObjectCreate(gate, key, _FINALIZER, out)


def _encode_opaque(x, pos, keep):
    # The wrapper owns this call's reference: C takes its own to keep x.
    obj = Object._adopt(_holds.new_host(_holds.OBJECT, x, _create_host_object), HOST_OBJECT)
    keep.append(obj)
    return OBJECT, P.pack(handle_of(obj))


def _adopt_host_object(handle, type_index):
    """The Python object of one of our host objects (releasing the new
    reference `handle`), or an Object for another gate's."""
    if _cext:
        found, x = _cext.host_object_value(GATE.value, handle)
        if not found:
            return Object._adopt(handle, type_index)
        PFObjectFree(handle)
        return x
    payload = c_void_p()
    if PFHostObjectGetPayload(handle, GATE, byref(payload)) != 0:
        PFErrorClear()  # made on another gate: not ours to look into
        return Object._adopt(handle, type_index)
    x = _holds.value_of(payload.value or 0)
    if x is MISSING:  # pragma: no cover - a loan dropped without giving back
        return Object._adopt(handle, type_index)
    PFObjectFree(handle)
    return x


register_fallback(RANK_OPAQUE, None, _encode_opaque, lambda x: x)
register_object_type("host object", _adopt_host_object)
