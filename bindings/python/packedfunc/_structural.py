"""Structural equality and hashing: PFStructuralCompare and
PFStructuralHashEx (include/packedfunc/structural.h has the rules), for any
value that can cross to C. The package re-exports structural_equal,
structural_hash, get_first_structural_mismatch and StructuralKey."""
import ctypes
import struct

from ._convert import convert_value, encode
from ._errors import check_call
from ._ffi import PFStructuralCompare, PFStructuralHashEx, STRUCTURAL_SKIP_TENSOR_CONTENT

_RAW = struct.Struct("=Q")


def _encoded(x, pos, keep):
    """(the 8 value bytes as an int, type code) of x as a call's argument
    `pos` would cross; what must outlive the C call goes to `keep`."""
    code, raw = encode(x, pos, keep)
    return _RAW.unpack(raw)[0], code


def _flags(skip_tensor_content):
    return STRUCTURAL_SKIP_TENSOR_CONTENT if skip_tensor_content else 0


def _compare(a, b, skip_tensor_content):
    """(equal, the path of the first difference or None)."""
    keep = []
    va, ca = _encoded(a, 0, keep)
    vb, cb = _encoded(b, 1, keep)
    out, path = ctypes.c_int(), ctypes.c_char_p()
    check_call(PFStructuralCompare(va, ca, vb, cb, _flags(skip_tensor_content),
                                   ctypes.byref(out), ctypes.byref(path)))
    # The path lives in this thread's return storage: read it at once.
    return bool(out.value), None if out.value else path.value.decode("utf-8", "replace")


def structural_equal(a, b, *, skip_tensor_content=False):
    """True when ``a`` and ``b`` hold the same thing: containers item by
    item (Map and Dict whatever their order), tensors by dtype, shape and
    data, instances of registered types field by field, cycles included;
    functions and other opaque objects by identity. Python lists, dicts and
    numpy arrays are compared as the values they cross to C as. With
    ``skip_tensor_content`` tensors compare by dtype and shape alone (their
    data is not read, so they may be on any device). Raises ValueError for
    a structure nested deeper than the C limit, or (without the option) a
    tensor that is not on the CPU."""
    return _compare(a, b, skip_tensor_content)[0]


def get_first_structural_mismatch(a, b, *, skip_tensor_content=False):
    """None when ``a`` and ``b`` are structurally equal (as
    :func:`structural_equal` decides), else the access path of the first
    difference, as text: ``$`` is the root, ``[2]`` an item, ``["k"]`` or
    ``[7]`` a map entry, ``.name`` a field, e.g. ``$["items"][2].value``."""
    return _compare(a, b, skip_tensor_content)[1]


def structural_hash(x, *, skip_tensor_content=False):
    """A 64-bit hash of ``x`` that agrees with :func:`structural_equal`
    under the same options: structurally equal values have equal hashes."""
    keep = []
    v, c = _encoded(x, 0, keep)
    out = ctypes.c_uint64()
    check_call(PFStructuralHashEx(v, c, _flags(skip_tensor_content), ctypes.byref(out)))
    return out.value


class StructuralKey:
    """A value as a dict key by structure: two keys are equal when their
    values are structurally equal (:func:`structural_equal`), and hash
    alike (:func:`structural_hash`, computed once). ``key`` is the value as
    it crosses to C when the key is made (a list becomes an Array, a dict a
    Map), so a later change to a Python list or dict does not change the
    key. A key equals only keys."""

    __slots__ = ("key", "_hash")

    def __init__(self, key):
        key = convert_value(key)
        self._hash = structural_hash(key)
        self.key = key

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if not isinstance(other, StructuralKey):
            return NotImplemented
        return self._hash == other._hash and structural_equal(self.key, other.key)

    def __ne__(self, other):
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __repr__(self):
        return "StructuralKey(%r)" % (self.key,)
