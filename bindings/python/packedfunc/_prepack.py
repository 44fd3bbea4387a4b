"""Binding constants: Function.bind and PrePackCache.

Function.bind calls PFFuncBind. A numpy array (or anything that exports
DLPack) given as a constant becomes a Tensor object viewing its memory, so
that the bound function can keep it: no copy is made, and the array stays
alive as long as the bound function does. Everything here is private; the
package re-exports PrePackCache.
"""
import ctypes

from ._convert import encode, register_object_type
from ._errors import check_call
from ._ffi import PFFuncBind, PFPrePackCacheCreate, PFPrePackCacheGetStats
from ._library import OBJECT_TYPES
from ._object import Object, Tensor, from_dlpack, handle_of

byref = ctypes.byref


class PrePackCache(Object):
    """A cache of pre-packed constants, shared by the functions bound
    through it (see :meth:`Function.bind`): equal CPU tensors bound to
    functions with the same pack format share one packed copy.

    ``stats()`` reports ``(entries, bytes, hits)``.
    """

    __slots__ = ()

    def __new__(cls):
        out = ctypes.c_void_p()
        check_call(PFPrePackCacheCreate(byref(out)))
        return cls._adopt(out.value, OBJECT_TYPES["prepack cache"])

    def stats(self):
        """(entries, bytes, hits): the packed values the cache holds, the
        bytes of those that are tensors, and the binds that found their
        constant packed already."""
        e, b, h = ctypes.c_int64(), ctypes.c_int64(), ctypes.c_int64()
        check_call(PFPrePackCacheGetStats(handle_of(self), byref(e), byref(b), byref(h)))
        return e.value, b.value, h.value


register_object_type("prepack cache", lambda handle, type_index:
                     PrePackCache._adopt(handle, type_index))


def _as_constant(x):
    """A value a bound function can keep: DLPack arrays become Tensor
    objects (no copy); everything else is converted as an argument is."""
    if not isinstance(x, (Tensor, Object, str, bytes, int, float)) and \
            hasattr(x, "__dlpack__"):
        return from_dlpack(x)
    return x


def bind(func, constants, cache=None):
    if not isinstance(constants, dict):
        raise TypeError("Function.bind: argument 'constants' must be a dict of position -> "
                        "value, not %s" % type(constants).__name__)
    if cache is not None and not isinstance(cache, PrePackCache):
        raise TypeError("Function.bind: argument 'cache' must be a PrePackCache or None, not %s"
                        % type(cache).__name__)
    for pos in constants:
        if type(pos) is not int:
            raise TypeError("Function.bind: position %r is not an int" % (pos,))
    positions = sorted(constants)
    n = len(positions)
    keep, vals, codes = [], [], []
    for i, pos in enumerate(positions):
        x = _as_constant(constants[pos])
        keep.append(x)
        code, raw = encode(x, "the constant at position %d" % pos, keep)
        vals.append(raw)
        codes.append(code)
    pos_arr = (ctypes.c_int * n)(*positions) if n else None
    vals_buf = ctypes.create_string_buffer(b"".join(vals), 8 * n) if n else None
    codes_arr = (ctypes.c_int * n)(*codes) if n else None
    out = ctypes.c_void_p()
    from ._function import Function
    check_call(PFFuncBind(func.handle, n, pos_arr, vals_buf, codes_arr,
                          cache.handle if cache is not None else None, byref(out)))
    return Function._adopt(out.value)
