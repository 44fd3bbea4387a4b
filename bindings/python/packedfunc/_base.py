"""Loading libpackedfunc, checking it, and turning its errors into exceptions.

Everything here is private; the public names are re-exported by the package.
"""
import atexit
import builtins
import collections
import ctypes
import itertools
import os
import re
import sys
import threading
import traceback

from . import _mirrors
from ._mirrors import DLDataType, DLDevice, DLManagedTensor, DLTensor, PFByteArray, PFValue

# What this binding was written against. The library's major version must
# match; its stable table must offer at least this API version.
EXPECTED_MAJOR = 0
EXPECTED_API_VERSION = 2

_LIB_FILES = ("libpackedfunc.so.0", "libpackedfunc.so")


# ---------------------------------------------------------------------------
# Finding and loading the shared library
# ---------------------------------------------------------------------------

def _candidate_paths():
    """Yield (where, path) in lookup order."""
    env = os.environ.get("PACKEDFUNC_LIBRARY")
    if env:
        yield ("$PACKEDFUNC_LIBRARY", env)
        return  # an explicit choice is never second-guessed
    here = os.path.dirname(os.path.abspath(__file__))
    for name in _LIB_FILES:
        yield ("beside the package", os.path.join(here, name))
    # A checkout: bindings/python/packedfunc -> the repository root.
    root = os.path.normpath(os.path.join(here, "..", "..", ".."))
    build_dirs = []
    if os.environ.get("BUILD"):
        build_dirs.append(os.environ["BUILD"])
    build_dirs.append("build")
    for build in build_dirs:
        libdir = os.path.join(root, build, "lib")
        for name in _LIB_FILES:
            yield ("the source tree's build output", os.path.join(libdir, name))


def _load_library():
    tried = []
    for where, path in _candidate_paths():
        if not os.path.exists(path):
            tried.append("  %s: %s (not found)" % (where, path))
            continue
        try:
            # RTLD_GLOBAL: modules loaded later bind to this same copy.
            cdll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            pydll = ctypes.PyDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as err:
            tried.append("  %s: %s (%s)" % (where, path, err))
            continue
        return path, cdll, pydll
    raise ImportError(
        "packedfunc: cannot find the shared library libpackedfunc.so.0. Looked in:\n"
        + "\n".join(tried)
        + "\nBuild it with `make python` at the root of the packedfunc source tree "
        "(which also copies it beside the package), install the package with pip, "
        "or set PACKEDFUNC_LIBRARY to the library's path."
    )


LIB_PATH, _cdll, _pydll = _load_library()


def _fn(name, restype, argtypes=None, gil=False):
    """An entry point. gil=False releases the GIL during the call (CDLL);
    gil=True keeps it (PyDLL), for short calls that never run user code."""
    f = (_pydll if gil else _cdll)[name]
    f.restype = restype
    if argtypes is not None:
        f.argtypes = argtypes
    return f


c_int, c_void_p, c_char_p, c_size_t = ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t
byref = ctypes.byref

# Calls that may run user code (callees, finalizers) release the GIL, so
# that other Python threads run meanwhile and C threads can call back in.
# Their pointer arguments are passed as preconverted ctypes objects.
PFFuncCall = _fn("PFFuncCall", c_int)
PFFuncFree = _fn("PFFuncFree", c_int, [c_void_p])
PFObjectFree = _fn("PFObjectFree", c_int, [c_void_p])
PFFuncCreateFromCFunc = _fn("PFFuncCreateFromCFunc", c_int)
PFFuncRegisterGlobal = _fn("PFFuncRegisterGlobal", c_int, [c_char_p, c_void_p, c_int])
PFFuncRemoveGlobal = _fn("PFFuncRemoveGlobal", c_int, [c_char_p])
# Sealing and protected names (issue 6). Registering may release an
# overridden function, so it runs without the GIL; the seal calls never
# run user code.
PFFuncRegisterGlobalEx = _fn("PFFuncRegisterGlobalEx", c_int, [c_char_p, c_void_p, c_int])
PFRegistrySeal = _fn("PFRegistrySeal", c_int, [], gil=True)
PFRegistryIsSealed = _fn("PFRegistryIsSealed", c_int, [ctypes.POINTER(c_int)], gil=True)
PFTensorToDLPack = _fn("PFTensorToDLPack", c_int, [c_void_p, ctypes.POINTER(c_void_p)])
# Short calls that never run user code keep the GIL.
PFFuncGetGlobal = _fn("PFFuncGetGlobal", c_int, [c_char_p, ctypes.POINTER(c_void_p)], gil=True)
PFFuncListGlobalNamesWithPrefix = _fn(
    "PFFuncListGlobalNamesWithPrefix", c_int,
    [c_char_p, ctypes.POINTER(c_int), ctypes.POINTER(ctypes.POINTER(c_char_p))], gil=True)
PFFuncRetain = _fn("PFFuncRetain", c_int, [c_void_p], gil=True)
PFObjectRetain = _fn("PFObjectRetain", c_int, [c_void_p], gil=True)
PFObjectGetTypeIndex = _fn("PFObjectGetTypeIndex", c_int,
                           [c_void_p, ctypes.POINTER(ctypes.c_uint32)], gil=True)
PFFuncGetInfo = _fn("PFFuncGetInfo", c_int,
                    [c_void_p, ctypes.POINTER(c_char_p), ctypes.POINTER(c_char_p),
                     ctypes.POINTER(c_char_p)], gil=True)
PFErrorGetKind = _fn("PFErrorGetKind", ctypes.c_char_p, [], gil=True)
PFErrorGetMessage = _fn("PFErrorGetMessage", ctypes.c_char_p, [], gil=True)
PFErrorGetTraceback = _fn("PFErrorGetTraceback", ctypes.c_char_p, [], gil=True)
PFErrorSet = _fn("PFErrorSet", None, [c_char_p, c_char_p], gil=True)
PFErrorAppendTraceback = _fn("PFErrorAppendTraceback", None, [c_char_p], gil=True)
PFErrorClear = _fn("PFErrorClear", None, [], gil=True)
PFTypeCodeName = _fn("PFTypeCodeName", ctypes.c_char_p, [c_int], gil=True)
PFGetVersion = _fn("PFGetVersion", c_int, [ctypes.POINTER(c_int)] * 3, gil=True)
PFGetStructSize = _fn("PFGetStructSize", c_int, [c_char_p, ctypes.POINTER(c_size_t)], gil=True)
# Setting the signal checker waits for calls of the old checker on other
# threads, which need the GIL to finish: it releases the GIL.
PFEnvSetSignalChecker = _fn("PFEnvSetSignalChecker", c_int, [c_void_p])
# Host functions (c_api.h). Creating one may run its finalizer on failure,
# and closing the gate waits for callbacks in progress on other threads:
# both release the GIL.
PFHostGateCreate = _fn("PFHostGateCreate", c_int, [ctypes.POINTER(c_void_p)], gil=True)
PFHostGateClose = _fn("PFHostGateClose", c_int, [c_void_p, c_char_p, c_int])
PFFuncCreateFromHostCFunc = _fn("PFFuncCreateFromHostCFunc", c_int)
# Only the first argument ('ret', a plain int in a callback) is converted by
# ctypes; value and type code are passed as ready byref objects.
PFCFuncSetReturn = _fn("PFCFuncSetReturn", c_int, [c_void_p], gil=True)


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

# fullmatch: "$" would also match before a final newline.
_KIND_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_kind_to_class = {}
_class_to_kind = {}
# Guards _saved_exceptions. Held only for dictionary operations on int
# keys: nothing that can run user code (a __del__, a __hash__) happens while
# it is held. Recreated in a child process after fork (see the end).
_errors_lock = threading.Lock()

for _cls in (TypeError, ValueError, KeyError, IndexError, AttributeError,
             NotImplementedError, MemoryError, RuntimeError, KeyboardInterrupt):
    _kind_to_class[_cls.__name__] = _cls
    _class_to_kind[_cls] = _cls.__name__


def register_error(kind=None, cls=None):
    """Map an error kind to an exception class, in both directions.

    A C function that fails with ``kind`` raises ``cls`` in Python, and a
    Python callback that raises ``cls`` (or a subclass) fails its C call with
    ``kind``. ``kind`` is an identifier of at most 63 bytes (dots allowed).

    Usable as ``register_error("MyKind", MyError)``, or as a class decorator:
    ``@register_error("MyKind")`` or ``@register_error`` (the kind is then the
    class name). Returns the class. Raises TypeError or ValueError for a bad
    kind or a class that is not an exception type.
    """
    if isinstance(kind, type) and cls is None:
        kind, cls = kind.__name__, kind
    if cls is None:
        return lambda c: register_error(kind, c)
    if not isinstance(kind, str):
        raise TypeError("register_error: kind must be a str, not %s" % type(kind).__name__)
    if len(kind.encode("utf-8", "surrogatepass")) >= 64 or not _KIND_RE.fullmatch(kind):
        raise ValueError("register_error: kind %r is not an identifier of at most 63 bytes" % kind)
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise TypeError("register_error: cls must be an exception class, not %r" % (cls,))
    # Two plain dictionary stores, each atomic under the GIL; no lock, since
    # hashing a class may run user code (a metaclass's __hash__).
    _kind_to_class[kind] = cls
    _class_to_kind[cls] = kind
    return cls


def _builtin_exception(name):
    obj = getattr(builtins, name, None)
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return obj
    return None


def kind_of(exc_type):
    """The error kind for an exception class: its registered kind, else the
    name of the nearest built-in base class, else "RuntimeError"."""
    for klass in exc_type.__mro__:
        kind = _class_to_kind.get(klass)
        if kind is not None:
            return kind
        if _builtin_exception(klass.__name__) is klass and klass not in (
                Exception, BaseException):
            return klass.__name__
    return "RuntimeError"


def class_of(kind):
    """The exception class for an error kind (RuntimeError when unknown)."""
    cls = _kind_to_class.get(kind)
    if cls is None:
        cls = _builtin_exception(kind) or RuntimeError
    return cls


# Python exceptions raised by callbacks, kept so that the same object can be
# chained when its error comes back to Python. Keyed by a token written into
# the error's traceback text, so it survives being carried across threads.
# Bounded: an error that C swallows never comes back.
_saved_exceptions = collections.OrderedDict()
_SAVED_MAX = 256
_tokens = itertools.count(1)
_TOKEN_RE = re.compile(r"\[python exception #(\d+)\]")


def _c_message(msg):
    """A message as C stores it: NUL-terminated UTF-8. A NUL is written as
    the four characters \\x00 (C would cut the text there) and what UTF-8
    cannot encode as "?"."""
    return msg.replace("\0", "\\x00").encode("utf-8", "replace")


def record_exception(exc, skip_frames=1):
    """Record a Python exception as the calling thread's packedfunc error
    (for a callback about to return -1). The first `skip_frames` traceback
    entries (the binding's own trampoline) are left out. Never raises."""
    try:
        kind = kind_of(type(exc))
        try:
            msg = str(exc)
        except BaseException:
            msg = "<unprintable %s>" % type(exc).__name__
        token = next(_tokens)
        evicted = []
        with _errors_lock:
            _saved_exceptions[token] = exc
            while len(_saved_exceptions) > _SAVED_MAX:
                evicted.append(_saved_exceptions.popitem(last=False))
        # Dropped outside the lock: freeing an old exception frees what its
        # traceback kept, whose __del__ may call back into packedfunc and
        # record another exception on this very thread.
        del evicted
        tb_obj = exc.__traceback__
        for _ in range(skip_frames):
            if tb_obj is not None and tb_obj.tb_next is not None:
                tb_obj = tb_obj.tb_next
        tb = "".join(traceback.format_exception(type(exc), exc, tb_obj))
        PFErrorSet(kind.encode(), _c_message(msg))
        PFErrorAppendTraceback(
            ("[python exception #%d]\n%s" % (token, tb.rstrip("\n"))).encode("utf-8", "replace"))
    except BaseException:  # pragma: no cover - last resort, e.g. at shutdown
        try:
            PFErrorSet(b"RuntimeError", b"packedfunc: a Python callback failed")
        except BaseException:
            pass
    return -1


def last_error():
    """The calling thread's packedfunc error as a Python exception object."""
    kind = (PFErrorGetKind() or b"").decode("utf-8", "replace") or "RuntimeError"
    raw_msg = PFErrorGetMessage() or b""
    msg = raw_msg.decode("utf-8", "replace")
    tb = (PFErrorGetTraceback() or b"").decode("utf-8", "replace")
    original = None
    m = _TOKEN_RE.search(tb)
    if m:
        with _errors_lock:
            original = _saved_exceptions.pop(int(m.group(1)), None)
        tb = _TOKEN_RE.sub("Python callback:", tb)
    if original is not None:
        # A message that crossed C unchanged comes back as the callback's
        # own text, including what C cannot hold (a NUL character).
        try:
            own = str(original)
            if _c_message(own) == raw_msg:
                msg = own
        except BaseException:
            pass
    text = msg + ("\n" + tb if tb else "")
    cls = class_of(kind)
    exc = None
    if original is not None and kind_of(type(original)) == kind:
        # The callback's own class, even when it is an unregistered subclass.
        try:
            exc = type(original)(text)
        except BaseException:
            exc = None
    if exc is None:
        exc = cls(text)
    if original is not None:
        exc.__cause__ = original
    return exc


def check_call(rc):
    """Raise the thread's packedfunc error if a C call returned nonzero.

    Every call into libpackedfunc that can fail goes through here."""
    if rc != 0:
        raise last_error()
    return rc


# ---------------------------------------------------------------------------
# Version, layout and type-code checks
# ---------------------------------------------------------------------------

class _PFApiBase(ctypes.Structure):
    _fields_ = [("GetApi", ctypes.CFUNCTYPE(c_void_p, ctypes.c_uint32)),
                ("GetVersionString", ctypes.CFUNCTYPE(c_char_p))]


MIRRORS = (("PFValue", PFValue), ("PFByteArray", PFByteArray), ("DLDataType", DLDataType),
           ("DLDevice", DLDevice), ("DLTensor", DLTensor), ("DLManagedTensor", DLManagedTensor))


def check_library(expected_major=EXPECTED_MAJOR, api_version=EXPECTED_API_VERSION,
                  mirrors=MIRRORS):
    """Refuse (ImportError) a library whose major version, API table or
    struct sizes differ from what this package was written against.
    Returns the library's version string."""
    major, minor, patch = c_int(), c_int(), c_int()
    PFGetVersion(byref(major), byref(minor), byref(patch))
    version = "%d.%d.%d" % (major.value, minor.value, patch.value)
    if major.value != expected_major:
        raise ImportError(
            "packedfunc: %s is version %s, but this Python package needs major version %d"
            % (LIB_PATH, version, expected_major))
    get_base = _fn("PFGetApiBase", ctypes.POINTER(_PFApiBase), [], gil=True)
    base = get_base().contents
    if not base.GetApi(api_version):
        raise ImportError("packedfunc: %s does not provide API version %d: %s"
                          % (LIB_PATH, api_version, last_error()))
    for name, mirror in mirrors:
        size = c_size_t()
        if PFGetStructSize(name.encode(), byref(size)) != 0:
            raise ImportError("packedfunc: %s cannot report the size of %s: %s"
                              % (LIB_PATH, name, last_error()))
        if size.value != ctypes.sizeof(mirror):
            raise ImportError(
                "packedfunc: struct %s is %d bytes in %s but %d bytes in the Python "
                "mirror; the package and the library do not match"
                % (name, size.value, LIB_PATH, ctypes.sizeof(mirror)))
    return version


def _type_codes():
    """name -> number, read from the library's own table."""
    codes = {}
    for number in range(_mirrors.EXT_BEGIN):
        name = PFTypeCodeName(number)
        if name is not None:
            codes[name.decode()] = number
    missing = [n for n in _mirrors.TYPE_CODE_NAMES if n not in codes]
    if missing:
        raise ImportError("packedfunc: %s lacks the type codes %s"
                          % (LIB_PATH, ", ".join(missing)))
    return codes


LIB_VERSION = check_library()
TYPE_CODES = _type_codes()
TYPE_CODE_NAMES = {v: k for k, v in TYPE_CODES.items()}


# ---------------------------------------------------------------------------
# Shutdown
# ---------------------------------------------------------------------------

class _State:
    shutting_down = False


state = _State()


def is_shutting_down():
    return state.shutting_down or sys.is_finalizing()


@atexit.register
def _at_exit():
    # From here on nothing frees: objects that die during interpreter
    # teardown leak their references instead of running finalizers in a
    # half torn-down interpreter. (Calls from C into Python were stopped
    # just before, by _core's own exit handler, which runs first.)
    state.shutting_down = True


# ---------------------------------------------------------------------------
# fork
# ---------------------------------------------------------------------------

def _after_fork_in_child():
    # Another thread may have held the lock when the process forked; in
    # the child that thread does not exist, and would never release it.
    global _errors_lock
    _errors_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
