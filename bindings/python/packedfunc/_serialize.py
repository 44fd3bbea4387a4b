"""JSON documents of object graphs: PFToJSON and PFFromJSON
(include/packedfunc/serialize.h has the rules, docs/serialization.md the
format), for any value that can cross to C, and the pickle and copy
protocols of containers and instances that go through them. The package
re-exports to_json and from_json."""
import ctypes
import struct

from ._convert import decode
from ._errors import check_call
from ._ffi import PFFromJSON, PFToJSON
from ._structural import _encoded

_CODE = struct.Struct("=i")


def to_json(value):
    """The JSON document (a str) of ``value``: plain values, str, bytes,
    containers, CPU tensors (data included) and instances of registered
    types through their fields, each container or instance written once so
    that sharing and cycles survive :func:`from_json`. Raises TypeError
    naming the path (e.g. ``root[2].parent``) of a value JSON cannot hold
    (a function, a module, an opaque or host object), ValueError for a
    tensor not on the CPU or nesting deeper than the C limit."""
    keep = []
    v, code = _encoded(value, 0, keep)
    out, n = ctypes.c_char_p(), ctypes.c_size_t()
    # Fields are read in C, under the GIL that this call keeps: both
    # backends write a field in one C call under the GIL, and the walk runs
    # no user code (it releases the snapshots it took, which may run
    # finalizers, once it has read everything). So no lock of ours is
    # held: a finalizer may wait for a thread that writes a field.
    check_call(PFToJSON(v, code, ctypes.byref(out), ctypes.byref(n)))
    return ctypes.string_at(out, n.value).decode("utf-8")


def from_json(text):
    """The value that the JSON document ``text`` (str or bytes, as
    :func:`to_json` writes) describes: containers, tensors and instances
    are new objects (an instance is built without running its constructor,
    every field set from the document). Raises ValueError naming the place
    for a document that is not JSON or not of this format (unknown version,
    dangling reference, a type key no registered type has, too many nodes
    or too deep)."""
    if isinstance(text, str):
        data = text.encode("utf-8", "surrogateescape")
    elif isinstance(text, (bytes, bytearray, memoryview)):
        data = bytes(text)
    else:
        raise TypeError("packedfunc.from_json: expected a str or bytes document, got %s"
                        % type(text).__name__)
    buf = ctypes.create_string_buffer(16)
    check_call(PFFromJSON(data, len(data), buf, ctypes.byref(buf, 8)))
    return decode(buf, 0, _CODE.unpack_from(buf, 8)[0])


def reduce_by_json(obj):
    """__reduce__ through a document: unpickling reads it back."""
    return (from_json, (to_json(obj),))


def deepcopy_by_json(obj, memo=None):
    """__deepcopy__ through a document: the copy of a graph keeps its
    sharing and cycles."""
    return from_json(to_json(obj))


class ByJSON:
    """Mixed into the immutable containers (Array, Map, Shape): pickled
    and deep-copied through a document; copy.copy gives the object itself,
    as a tuple's does."""
    __slots__ = ()

    __reduce__ = reduce_by_json

    def __deepcopy__(self, memo):
        return deepcopy_by_json(self)

    def __copy__(self):
        return self


class MutableByJSON:
    """Mixed into List and Dict: as ByJSON, except that copy.copy is a new
    container of the same items. (Not a subclass of ByJSON: in the
    containers' method order, Object's refusal would come before it.)"""
    __slots__ = ()

    __reduce__ = reduce_by_json
    __deepcopy__ = ByJSON.__deepcopy__

    def __copy__(self):
        return type(self)(self)
