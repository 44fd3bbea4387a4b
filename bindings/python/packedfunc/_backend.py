"""Which implementation of the hot paths is in use: "cext" or "ctypes".

The package is complete in pure Python over ctypes. When its compiled
extension, packedfunc._cext, can be imported and bound to the library that
ctypes loaded, Function calls and callbacks from C go through it instead
(same conversions, same errors: it hands every value it does not convert
itself to the package's tables). $PACKEDFUNC_BACKEND chooses:

- unset or empty: the extension when it is there, silently ctypes when not;
- "ctypes": ctypes, even when the extension is there;
- "cext": the extension, and ImportError when it cannot be used.

Everything here is private; the package exposes ``packedfunc.backend``.
"""
import os

from ._ffi import PF_GET_API_BASE_ADDRESS

BACKENDS = ("cext", "ctypes")


def _choose():
    wanted = os.environ.get("PACKEDFUNC_BACKEND", "").strip().lower()
    if wanted and wanted not in BACKENDS:
        raise ImportError("packedfunc: PACKEDFUNC_BACKEND is %r; expected one of %s, or unset"
                          % (os.environ["PACKEDFUNC_BACKEND"], ", ".join(BACKENDS)))
    if wanted == "ctypes":
        return "ctypes", None
    try:
        from . import _cext
        _cext.init(PF_GET_API_BASE_ADDRESS)
    except ImportError as err:
        if wanted == "cext":
            raise ImportError("packedfunc: PACKEDFUNC_BACKEND is 'cext', but the compiled "
                              "extension cannot be used: %s" % err) from err
        return "ctypes", None
    return "cext", _cext


#: "cext" or "ctypes", and the extension module (None with ctypes).
BACKEND, cext = _choose()
