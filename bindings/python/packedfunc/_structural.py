"""Structural equality and hashing: PFStructuralEqual and PFStructuralHash
(include/packedfunc/structural.h has the rules), for any value that can
cross to C. The package re-exports structural_equal and structural_hash."""
import ctypes
import struct

from ._convert import encode
from ._errors import check_call
from ._ffi import PFStructuralEqual, PFStructuralHash

_RAW = struct.Struct("=Q")


def _encoded(x, pos, keep):
    """(the 8 value bytes as an int, type code) of x as a call's argument
    `pos` would cross; what must outlive the C call goes to `keep`."""
    code, raw = encode(x, pos, keep)
    return _RAW.unpack(raw)[0], code


def structural_equal(a, b):
    """True when ``a`` and ``b`` hold the same thing: containers item by
    item (Map and Dict whatever their order), tensors by dtype, shape and
    data, instances of registered types field by field, cycles included;
    functions and other opaque objects by identity. Python lists, dicts and
    numpy arrays are compared as the values they cross to C as. Raises
    ValueError for a structure nested deeper than the C limit, or a tensor
    that is not on the CPU."""
    keep = []
    va, ca = _encoded(a, 0, keep)
    vb, cb = _encoded(b, 1, keep)
    out = ctypes.c_int()
    check_call(PFStructuralEqual(va, ca, vb, cb, ctypes.byref(out)))
    return bool(out.value)


def structural_hash(x):
    """A 64-bit hash of ``x`` that agrees with :func:`structural_equal`:
    structurally equal values have equal hashes."""
    keep = []
    v, c = _encoded(x, 0, keep)
    out = ctypes.c_uint64()
    check_call(PFStructuralHash(v, c, ctypes.byref(out)))
    return out.value
