"""typed(fn, signature): a Function from a plain C function pointer.

The signature is in the typed-signature grammar of c_api.h; the library
parses it and prepares the call once (PFFuncCreateFromTyped). Everything
here is private; the package re-exports typed.
"""
import ctypes

from ._errors import check_call
from ._ffi import PFFuncCreateFromTyped, keep_forever
from ._function import Function

c_void_p, byref = ctypes.c_void_p, ctypes.byref
_ADDRESS_MAX = 2**64 - 1


def address(fn, where):
    """The address of the C function `fn` as an int; errors name `where`'s
    argument 'fn'."""
    if isinstance(fn, ctypes._CFuncPtr):
        # The object keeps the code alive (a CFUNCTYPE callback's thunk is
        # freed with it), and C may call the pointer for as long as any
        # reference to the function lives, which Python cannot see: kept
        # for the life of the process.
        keep_forever(fn)
        addr = ctypes.cast(fn, c_void_p).value
    elif isinstance(fn, c_void_p):
        addr = fn.value
    elif isinstance(fn, int) and not isinstance(fn, bool):
        addr = int(fn)
        if not 0 <= addr <= _ADDRESS_MAX:
            raise ValueError("%s: argument 'fn' (%d) is not an address" % (where, addr))
    else:
        raise TypeError("%s: argument 'fn' must be a C function pointer (an int address, a "
                        "ctypes function or a ctypes.c_void_p), not %s"
                        % (where, type(fn).__name__))
    if not addr:
        raise ValueError("%s: argument 'fn' is a NULL pointer" % where)
    return addr


def typed(fn, signature):
    """A :class:`Function` that calls the C function `fn` with the C
    prototype that `signature` describes, e.g. ``typed(libc.labs,
    "int64(int64)")``.

    `fn` is an int address, a ctypes function (from a ``ctypes.CDLL``, or a
    ``CFUNCTYPE`` callback; the object is then kept for the life of the
    process, since C may hold the function longer than Python can see)
    or a ``ctypes.c_void_p``. The signature grammar is c_api.h's
    ("int64(int64,float64)", "void()", types such as int32, uint64, float32,
    bool, str, bytes, ptr, tensor, dtype, device, func); it is parsed once,
    here, and each call checks and converts its arguments as C would. The
    signature must match the real prototype: the runtime cannot check that.
    The library that holds `fn` must stay loaded while the Function (or any
    C holder of it) lives. Raises TypeError or ValueError naming the
    argument for a NULL or non-pointer `fn` and a bad signature.
    """
    addr = address(fn, "typed")
    if not isinstance(signature, str):
        raise TypeError("typed: argument 'signature' must be a str, not %s"
                        % type(signature).__name__)
    if "\0" in signature:
        raise ValueError("typed: argument 'signature' %r contains a NUL character" % signature)
    try:
        sig = signature.encode("ascii")
    except UnicodeEncodeError:
        raise ValueError("typed: argument 'signature' %r is not ASCII" % signature) from None
    out = c_void_p()
    try:
        check_call(PFFuncCreateFromTyped(c_void_p(addr), sig, byref(out)))
    except ValueError as err:
        raise ValueError("typed: argument 'signature': %s" % str(err).split("\n")[0]) from None
    return Function._adopt(out.value)
