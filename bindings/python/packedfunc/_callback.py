"""Python callables as packed functions, and Ctrl-C while C runs.

``convert(f)`` makes a host function (c_api.h) on this interpreter's gate,
whose resource is a hold of the callable (see _holds). With the compiled
backend C enters Python through the extension's trampoline, which takes
the GIL itself, converts the common types and hands the others to
_call_with_c_args and _set_return here. With ctypes the hold is a key
into the table of Python objects that C holds, and every call from C
enters Python through one ctypes trampoline, which reads the arguments
from C's memory (with a cached struct unpacker when they are all int or
float), calls the callable, hands the result to PFCFuncSetReturn and
reports the call's status. At exit the gate is closed, so that C threads that call in
afterwards get an error instead of a dying interpreter. The signal checker
lets long-running C code see a pending Ctrl-C. Everything here is private;
the package re-exports convert.
"""
import atexit
import ctypes
import functools
import itertools
import operator
import struct
import sys
import threading
import types

from ._convert import (FUNC, INT as _INT, FLOAT, INT64_MAX as _INT64_MAX,
                       INT64_MIN as _INT64_MIN, MEMORY as _MEMORY, OBJECT, P as _P,
                       RANK_CALLABLES, RESULT, convert_value, decode, encode,
                       register_fallback)
from ._frames import PLANS_MAX
from ._backend import cext as _cext
from ._errors import check_call, record_exception
from ._ffi import (PFCFuncSetReturn, PFEnvSetSignalChecker, PFFuncCreateFromHostCFunc,
                   PFHostGateClose, PFObjectFree, PyErr_CheckSignals, keep_forever)
from . import _holds
from ._holds import GATE
from ._function import Function
from ._mirrors import FINALIZER, PACKED_CFUNC, SIGNAL_CHECKER, PFHostCall
from ._object import Object, tensor_object_from

c_void_p, byref = ctypes.c_void_p, ctypes.byref
_held_get = _holds.held_get  # the hot path's lookup of a hold (ctypes)


# ---------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------
#
# Each callback takes its own _Scratch from a free list for the moment of
# the call (list.pop and list.append are atomic under the GIL): another
# thread, or a nested callback on this one, can run between writing the
# value and C reading it, and must never see it.

class _Scratch:
    """The memory of a return value handed to PFCFuncSetReturn: a PFValue,
    then its type code."""

    __slots__ = ("buf", "mem", "value", "code")

    def __init__(self):
        self.buf = (ctypes.c_char * 16)()
        self.mem = memoryview(self.buf).cast("B")  # the two, by byte
        self.value, self.code = byref(self.buf, 0), byref(self.buf, 8)  # pointers to each


_free_scratch = [_Scratch() for _ in range(4)]
_take_scratch = _free_scratch.pop
_give_scratch = _free_scratch.append
_RET_INT = struct.Struct("=qi")  # a PFValue holding an int64, then its type code
_RET_FLOAT = struct.Struct("=di")
_RET_RAW = struct.Struct("=8si")
_RET_INT_pack_into = _RET_INT.pack_into


def _set_raw_return(ret, packer, value, code):
    try:
        sc = _take_scratch()
    except IndexError:
        sc = _Scratch()
    try:
        packer.pack_into(sc.mem, 0, value, code)
        return PFCFuncSetReturn(ret, sc.value, sc.code, 1)
    finally:
        _give_scratch(sc)


def _set_return(ret, r):
    t = type(r)
    if t is int:
        if not _INT64_MIN <= r <= _INT64_MAX:
            raise OverflowError("packedfunc: callback result %d does not fit in int64" % r)
        return _set_raw_return(ret, _RET_INT, r, _INT)
    if t is float:
        return _set_raw_return(ret, _RET_FLOAT, r, FLOAT)
    if r is None:
        return 0
    if hasattr(r, "__dlpack__") and not isinstance(r, Object):
        return _return_tensor(ret, r)
    keep = []
    code, raw = encode(r, RESULT, keep)
    return _set_raw_return(ret, _RET_RAW, raw, code)


def _return_tensor(ret, r):
    """Return an array from a callback as an owned tensor object: the
    object takes over the DLPack export (and so keeps the array alive)."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(r, numpy.generic):
        return _set_return(ret, r.item())
    obj = tensor_object_from(r, RESULT)
    try:
        return _set_raw_return(ret, _RET_RAW, _P.pack(obj.value), OBJECT)
    finally:
        PFObjectFree(obj)


# ---------------------------------------------------------------------------
# Arguments
# ---------------------------------------------------------------------------

_cb_plans = {}  # codes bytes -> Struct unpacker for all-int/float args
_cb_plans_get = _cb_plans.get


def _cb_plan(codes_raw, n):
    codes = struct.unpack("=%di" % n, codes_raw)
    if all(c == _INT or c == FLOAT for c in codes):
        plan = struct.Struct("=" + "".join("q" if c == _INT else "d" for c in codes)).unpack_from
    else:
        plan = False
    if len(_cb_plans) < PLANS_MAX:
        _cb_plans[codes_raw] = plan
    return plan


def _call_with_c_args(fn, args_p, codes_raw, n):
    """fn(*converted arguments), the general path; then writes each tensor
    copy that the callback changed back into C's memory."""
    codes = struct.unpack("=%di" % n, codes_raw)
    copies = []
    r = fn(*[decode(_MEMORY, args_p + 8 * i, codes[i], True, copies) for i in range(n)])
    for view, copy, received in copies:
        # Only a copy that the callback changed is written: C may have lent
        # read-only memory, or the same tensor twice.
        if copy.tobytes() != received:
            view[...] = copy
    return r


# ---------------------------------------------------------------------------
# The trampoline
# ---------------------------------------------------------------------------

# A PFHostCall: the resource (here the key of the hold), and the status
# that this call reports.
_STATUS_OFF = PFHostCall.status.offset
_status_into = struct.Struct("=i").pack_into
_MEMORY_RW = memoryview(_MEMORY).cast("B")
_key_of = _P.unpack_from


def _trampoline(args_p, codes_p, n, ret, call_p):
    # The host function's wrapper takes the call's result from the status
    # written here, never from the return value. The success status is the
    # last act inside the `try`, so that an exception raised anywhere
    # before it (Ctrl-C) is still caught and reported as the call's error.
    # An exception raised before the `try` (a signal handler runs on entry
    # to this frame) escapes into ctypes; _unraisable_hook below records it
    # for the wrapper, which sees the status still pending.
    try:
        fn = _held_get(_key_of(_MEMORY, call_p)[0])
        if fn is None:  # lent to a wrapper for a collection in progress, or gone
            fn = _lent_callable(_key_of(_MEMORY, call_p)[0])
        if n:
            codes_raw = _MEMORY[codes_p:codes_p + 4 * n]
            plan = _cb_plans_get(codes_raw)
            if plan is None:
                plan = _cb_plan(codes_raw, n)
            if plan:
                r = fn(*plan(_MEMORY, args_p))
            else:
                r = _call_with_c_args(fn, args_p, codes_raw, n)
        else:
            r = fn()
        if type(r) is int and _INT64_MIN <= r <= _INT64_MAX:  # the common case, inline
            try:
                sc = _take_scratch()
            except IndexError:
                sc = _Scratch()
            _RET_INT_pack_into(sc.mem, 0, r, _INT)
            rc = PFCFuncSetReturn(ret, sc.value, sc.code, 1)
            _give_scratch(sc)
        else:
            rc = _set_return(ret, r)
        _status_into(_MEMORY_RW, call_p + _STATUS_OFF, -1 if rc else 0)
    except BaseException as exc:
        _status_into(_MEMORY_RW, call_p + _STATUS_OFF, -1)
        record_exception(exc)
    return 0


def _lent_callable(key):
    fn = _holds.value_of(key)
    if fn is _holds.MISSING:
        raise RuntimeError("packedfunc: the Python callable of this function was collected")
    return fn


def _finalize(key):
    # The last reference to a converted callable went: drop its hold. May
    # run on any thread; never after the gate is closed at exit.
    try:
        _holds.release(key, _holds.FUNCTION)
    except BaseException:
        pass


def _unraisable_hook(args, previous=sys.unraisablehook):
    """sys.unraisablehook: an exception that escaped the trampoline or the
    finalizer before their own handlers (a signal handler that raised on
    entry) becomes the calling thread's packedfunc error, instead of being
    printed by ctypes and lost. Anything else goes to the previous hook."""
    obj = getattr(args, "object", None)
    if obj in UNRAISABLE_OWNERS and args.exc_value is not None:
        record_exception(args.exc_value, skip_frames=0)
        return
    previous(args)


# The functions that C enters through a ctypes thunk (others add theirs).
UNRAISABLE_OWNERS = [_trampoline, _finalize]
sys.unraisablehook = _unraisable_hook

# One trampoline and one finalizer for the whole process, never freed.
_TRAMPOLINE = keep_forever(PACKED_CFUNC(_trampoline))
_FINALIZER = keep_forever(FINALIZER(_finalize))

# Every Python callable that C can call goes through _holds.GATE. At exit
# it is closed (below): C threads that call in afterwards get a
# RuntimeError instead of entering an interpreter that is going away.
_GATE_CLOSED_MESSAGE = b"the Python interpreter is shutting down"
_GATE_CLOSE_TIMEOUT_MS = 3000


def convert(value):
    """The packedfunc value that `value` crosses to C as.

    A callable becomes a :class:`Function` (a Function is returned as it
    is): it holds the callable until the last reference to it, from C or
    Python, goes. When C calls it, the arguments arrive converted to Python
    values and the result is converted back; an exception fails the C call
    with the exception's error kind (see :func:`register_error`).

    A value that crosses as itself comes back as itself: int, float, bool,
    None, str, bytes, DataType, Device, tensors, ctypes handles, Objects,
    and any other Python object (it crosses as an opaque host object, and
    comes back from C as the very same object). A list or tuple becomes
    an :class:`Array` and a dict a :class:`Map`. Raises what a call would
    raise for a value that cannot cross: TypeError for a dict key that is
    not str or int, ValueError for a container nested too deep or that
    contains itself, OverflowError for an int outside int64, ValueError for
    a str with a NUL character.
    """
    return convert_value(value)


def as_function(obj, where):
    """obj as a Function: itself, or a new one for a Python callable;
    TypeError naming `where` for anything else."""
    if isinstance(obj, Function):
        return obj
    if not callable(obj):
        raise TypeError("%s: expected a callable, not %s" % (where, type(obj).__qualname__))
    return make_function(obj)


def live_count():
    """How many Python callables C holds through host functions."""
    return _holds.count(_holds.FUNCTION)


def make_function(obj):
    """A new Function for a Python callable."""
    return Function._adopt(_holds.new_host(_holds.FUNCTION, obj, _create_host_function))


def _create_host_function(gate, key, out):
    return PFFuncCreateFromHostCFunc(gate, _TRAMPOLINE, key, _FINALIZER, out)


def _encode_callable(x, pos, keep):
    if not callable(x):
        return None  # not a kind of value that C can take
    f = make_function(x)
    keep.append(f)
    return FUNC, _P.pack(f._handle)


if _cext:
    # The extension's trampoline defers to these for what it does not
    # convert itself; an exception raised anywhere in the callback's call
    # is recorded through record_exception.
    _cext.set_hooks(callback_args=_call_with_c_args, set_return=_set_return,
                    record_exception=record_exception)

register_fallback(RANK_CALLABLES, None, _encode_callable,
                  lambda x: make_function(x) if callable(x) else None)


# ---------------------------------------------------------------------------
# Signals
# ---------------------------------------------------------------------------

# PFEnvCheckSignals calls the checker below, holding the GIL (ctypes takes
# it). Python runs a pending signal handler at the entry of any Python
# function on the main thread, so a KeyboardInterrupt could fire before a
# plain callback's `try` and escape into ctypes, which would only print it.
# The checker therefore enters Python by resuming a per-thread coroutine
# that is suspended inside its `try`: a handler that fires on resumption
# raises inside the `try`, and becomes the call's error. The pipeline that
# picks the thread's coroutine is made of C-level callables only.


@types.coroutine
def _suspend(value):
    return (yield value)


async def _signal_checker_loop():
    result = 0
    while True:
        try:
            await _suspend(result)
            # pythonapi raises the handler's exception (KeyboardInterrupt
            # for Ctrl-C) as a Python error.
            PyErr_CheckSignals()
            result = 0
        except GeneratorExit:  # the coroutine is being closed (thread exit)
            raise
        except BaseException as exc:
            result = record_exception(exc, skip_frames=0)


class _CheckerPerThread(threading.local):
    def __init__(self):
        self.coro = _signal_checker_loop()
        self.coro.send(None)  # run to the first suspension


if _cext:
    # The extension's checker, in C: a handler that raises inside
    # PyErr_CheckSignals is an error return there, with nothing to escape.
    check_call(PFEnvSetSignalChecker(_cext.signal_checker()))
else:
    _checker_tls = _CheckerPerThread()  # the main thread's, made here
    _SIGNAL_CHECKER = SIGNAL_CHECKER(functools.partial(
        next, map(operator.methodcaller("send", None),
                  map(operator.attrgetter("coro"), itertools.repeat(_checker_tls)))))
    keep_forever(_SIGNAL_CHECKER)
    check_call(PFEnvSetSignalChecker(ctypes.cast(_SIGNAL_CHECKER, c_void_p)))


@atexit.register
def _stop_calls_from_c():
    # Registered after _library's exit handler, so it runs before it. From
    # here on, C threads that call a Python function get a RuntimeError
    # instead of entering an interpreter that is going away. Both calls
    # release the GIL, so that callbacks in progress on other threads can
    # finish; the wait for them is bounded.
    try:
        PFHostGateClose(GATE, _GATE_CLOSED_MESSAGE, _GATE_CLOSE_TIMEOUT_MS)
        PFEnvSetSignalChecker(None)
    except BaseException:  # pragma: no cover
        pass
