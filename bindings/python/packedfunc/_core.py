"""Functions, conversions, callbacks and the registry.

Hot paths (Function.__call__, the callback trampoline) avoid isinstance
chains and per-call ctypes objects: argument types are looked up by
``type(x)`` in a cache of precompiled ``struct`` packers, arguments are
written into preallocated call frames, and C results are read with
``struct.unpack_from``. Everything else takes the general path.
"""
import atexit
import ctypes
import functools
import inspect
import itertools
import operator
import struct
import sys
import threading
import types

from . import _base, _signature
from ._base import (PFCFuncSetReturn, PFFuncCall, PFFuncFree,
                    PFObjectFree, TYPE_CODES, check_call, last_error, record_exception)
from ._mirrors import (DLManagedTensor, DLTensor, FINALIZER, OBJECT_FUNCTION, OBJECT_MODULE,
                       OBJECT_TENSOR, PACKED_CFUNC, PFByteArray, SIGNAL_CHECKER)
from ._types import DataType, Device

c_void_p, byref = ctypes.c_void_p, ctypes.byref

# Type codes, by name, as the library numbers them.
_INT = TYPE_CODES["int"]
_FLOAT = TYPE_CODES["float"]
_BOOL = TYPE_CODES["bool"]
_NULL = TYPE_CODES["null"]
_HANDLE = TYPE_CODES["handle"]
_DTYPE = TYPE_CODES["dtype"]
_DEVICE = TYPE_CODES["device"]
_TENSOR = TYPE_CODES["tensor"]
_STR = TYPE_CODES["str"]
_BYTES = TYPE_CODES["bytes"]
_FUNC = TYPE_CODES["function"]
_MODULE = TYPE_CODES["module"]
_OBJECT = TYPE_CODES["object"]

_Q = struct.Struct("=q")
_D = struct.Struct("=d")
_P = struct.Struct("=Q")  # a pointer, as an unsigned 64-bit value
_DT = struct.Struct("=BBH4x")
_DEV = struct.Struct("=ii")
_RET = struct.Struct("=qi")  # ret_val as int64, ret_type_code
_ret_unpack = _RET.unpack_from
_BA = struct.Struct("=QQ")  # PFByteArray {data, size}
_INT64_MIN, _INT64_MAX = -2**63, 2**63 - 1

if ctypes.sizeof(c_void_p) != 8:  # pragma: no cover
    raise ImportError("packedfunc: only 64-bit platforms are supported")

# A read-only ctypes view of the whole address space, so that the callback
# trampoline can read the C caller's argument arrays with one
# struct.unpack_from instead of building ctypes objects per call. It reads
# only what PFFuncCall's contract says is there.
_MEMORY = (ctypes.c_char * sys.maxsize).from_address(0)

_incref = ctypes.pythonapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]
_incref.restype = None


def _keep_forever(thunk):
    """Returns a ctypes thunk (a C function pointer into Python) after
    taking a reference that is never dropped: C may hold the pointer for
    the life of the process, and the interpreter frees module globals at
    exit, which would free the thunk's code under a C caller."""
    _incref(thunk)
    return thunk


# ---------------------------------------------------------------------------
# Call frames
# ---------------------------------------------------------------------------
#
# A frame is the memory of one call in progress: ret_val (8 bytes),
# ret_type_code (4, then 4 of padding), MAX_FAST values, MAX_FAST type codes.
# Each concurrent or nested call takes its own frame from a free list (a
# callback into Python may call another Function while C still reads the
# outer call's arguments), and gives it back afterwards.

MAX_FAST = 8
_RET_OFF, _RCODE_OFF, _VALS_OFF = 0, 8, 16


def _new_frame(capacity=MAX_FAST):
    codes_off = _VALS_OFF + 8 * capacity
    buf = (ctypes.c_char * (codes_off + 4 * capacity))()
    mv = memoryview(buf).cast("B")
    # [view, args, type_codes, ret_val, ret_type_code, plan whose codes are
    #  in the frame, codes offset, capacity, buffer]
    return [mv, byref(buf, _VALS_OFF), byref(buf, codes_off), byref(buf, _RET_OFF),
            byref(buf, _RCODE_OFF), None, codes_off, capacity, buf]


_CODES_OFF = _new_frame()[6]
_free_frames = [_new_frame() for _ in range(4)]
_take_frame = _free_frames.pop
_give_frame = _free_frames.append


# ---------------------------------------------------------------------------
# Fast-path plans: a tuple of exact argument types -> (packer, codes)
# ---------------------------------------------------------------------------

_FAST_FORMATS = {int: ("q", _INT), bool: ("q", _BOOL), float: ("d", _FLOAT)}
_plans = {}
_plans_get = _plans.get
_PLANS_MAX = 4096


def _make_plan(types):
    """A (pack_into, codes bytes) pair for these exact types, or False when
    they need the general path."""
    if len(types) > MAX_FAST or any(t not in _FAST_FORMATS for t in types):
        plan = False
    else:
        fmt = "=" + "".join(_FAST_FORMATS[t][0] for t in types)
        codes = struct.pack("=%di" % len(types), *(_FAST_FORMATS[t][1] for t in types))
        plan = (struct.Struct(fmt).pack_into, codes)
    if len(_plans) < _PLANS_MAX:
        _plans[types] = plan
    return plan


# ---------------------------------------------------------------------------
# Argument conversion (general path)
# ---------------------------------------------------------------------------

def _bytes_address(b):
    """The address of a bytes object's data (kept alive by the caller)."""
    return ctypes.cast(b, c_void_p).value or 0


def _buffer_address(buf, nbytes):
    arr = (ctypes.c_char * nbytes).from_buffer(buf)
    return ctypes.addressof(arr), arr


_capsule_get_pointer = ctypes.pythonapi["PyCapsule_GetPointer"]
_capsule_get_pointer.restype = c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_is_valid = ctypes.pythonapi["PyCapsule_IsValid"]
_capsule_is_valid.restype = ctypes.c_int
_capsule_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi["PyCapsule_SetName"]
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, c_void_p]
_capsule_new = ctypes.pythonapi["PyCapsule_New"]
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [c_void_p, c_void_p, c_void_p]
# Capsule names must outlive their capsules: module-level, never freed.
_NAME_DLTENSOR = ctypes.create_string_buffer(b"dltensor")
_NAME_USED = ctypes.create_string_buffer(b"used_dltensor")

# DLTensor* we passed to C in calls still in progress -> the Python object,
# so that a tensor that comes back (an echo, a callback argument) is the
# same object, with no copy.
_tensors_in_flight = {}


RESULT = "result"  # the `pos` of a callback's return value, for messages


def _what(pos):
    """How an error message names a value: its argument position, or as a
    callback's result (pos RESULT)."""
    return "argument %d" % pos if pos is not RESULT else "the callback's result"


def _tensor_arg(x, pos):
    try:
        capsule = x.__dlpack__()
    except Exception as err:
        raise TypeError("packedfunc: %s (%s) cannot be exported through DLPack: %s"
                        % (_what(pos), type(x).__name__, err)) from err
    if not _capsule_is_valid(capsule, b"dltensor"):
        raise TypeError("packedfunc: %s (%s) cannot be exported through DLPack: its "
                        "__dlpack__ returned %s, not a DLPack capsule named 'dltensor'"
                        % (_what(pos), type(x).__name__, type(capsule).__name__))
    ptr = _capsule_get_pointer(capsule, b"dltensor")
    # DLManagedTensor starts with its DLTensor, so the two addresses agree.
    # The capsule is not consumed: its own destructor frees the export.
    return ptr, capsule


def _convert_arg(x, pos, keep):
    """(code, 8 value bytes) for one argument. Objects that must outlive the
    call are appended to `keep`. Raises TypeError/OverflowError/ValueError
    naming the argument position (0-based), or the callback's result when
    `pos` is RESULT."""
    t = type(x)
    if t is int:
        if not _INT64_MIN <= x <= _INT64_MAX:
            raise OverflowError("packedfunc: %s: int %d does not fit in int64"
                                % (_what(pos), x))
        return _INT, _Q.pack(x)
    if t is float:
        return _FLOAT, _D.pack(x)
    if t is bool:
        return _BOOL, _Q.pack(x)
    if x is None:
        return _NULL, _Q.pack(0)
    if t is str:
        if "\0" in x:
            raise ValueError("packedfunc: %s: str contains a NUL character "
                             "(pass bytes for binary data)" % _what(pos))
        try:
            data = x.encode("utf-8")
        except UnicodeEncodeError as err:
            # kPFStr is UTF-8: a lone surrogate (also one that decoding
            # invalid UTF-8 from C produced) is refused, never sent as is.
            raise ValueError("packedfunc: %s: str contains a lone surrogate (%r at "
                             "index %d), which UTF-8 cannot encode (pass bytes for binary "
                             "data)" % (_what(pos), x[err.start], err.start)) from None
        keep.append(data)
        return _STR, _P.pack(_bytes_address(data))
    if t is bytes or t is bytearray or t is memoryview:
        return _BYTES, _P.pack(_byte_array(x, keep))
    if isinstance(x, Function) or isinstance(x, Object):
        if not x._handle:
            raise ValueError("packedfunc: %s: the %s was released"
                             % (_what(pos), type(x).__name__))
        return (_FUNC if isinstance(x, Function) else x._code), _P.pack(x._handle)
    if t is DataType:
        return _DTYPE, _DT.pack(x.type_code, x.bits, x.lanes)
    if t is Device:
        return _DEVICE, _DEV.pack(x.device_type, x.device_id)
    if isinstance(x, c_void_p):
        return _HANDLE, _P.pack(x.value or 0)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        if isinstance(x, numpy.generic):  # numpy scalars: as Python scalars
            return _convert_arg(x.item(), pos, keep)
        if isinstance(x, numpy.dtype):
            return _convert_arg(DataType(x), pos, keep)
    if hasattr(x, "__dlpack__"):
        ptr, capsule = _tensor_arg(x, pos)
        keep.append(capsule)
        keep.append(x)
        return _TENSOR, _P.pack(ptr)
    # Subclasses of the plain types (IntEnum, str and float subclasses...).
    if isinstance(x, bool):
        return _BOOL, _Q.pack(bool(x))
    if isinstance(x, int):
        return _convert_arg(int(x), pos, keep)
    if isinstance(x, float):
        return _FLOAT, _D.pack(float(x))
    if isinstance(x, str):
        return _convert_arg(str(x), pos, keep)
    if isinstance(x, (bytes, bytearray, memoryview)):
        return _BYTES, _P.pack(_byte_array(x, keep))
    if callable(x):
        f = convert(x)
        keep.append(f)
        return _FUNC, _P.pack(f._handle)
    raise TypeError("packedfunc: %s has unsupported type %s"
                    % (_what(pos), type(x).__qualname__))


def _byte_array(x, keep):
    """A PFByteArray for bytes-like x; returns its address."""
    if isinstance(x, bytes):
        data, size = x, len(x)
        addr = _bytes_address(x)
    else:
        mv = memoryview(x)
        size = mv.nbytes
        if not mv.readonly and mv.c_contiguous and size:
            addr, data = _buffer_address(mv.cast("B"), size)
        else:
            data = mv.tobytes()
            addr = _bytes_address(data)
    ba = PFByteArray(addr, size)
    keep.append(data)
    keep.append(ba)
    return ctypes.addressof(ba)


def _pack_args(args, fr, keep, tensors):
    mv = fr[0]
    codes_off = fr[6]
    for i, x in enumerate(args):
        code, raw = _convert_arg(x, i, keep)
        if code == _TENSOR:
            tensors.append(_P.unpack(raw)[0])
            tensors.append(x)
        off = _VALS_OFF + 8 * i
        mv[off:off + 8] = raw
        mv[codes_off + 4 * i:codes_off + 4 * i + 4] = struct.pack("=i", code)
    fr[5] = None  # the codes no longer match any plan


# ---------------------------------------------------------------------------
# Return values
# ---------------------------------------------------------------------------

def _string_at(addr, size=-1):
    return ctypes.string_at(addr, size)


def _convert_ret(mv, v, code, tensors=None):
    """A Python value from a call result (v is the raw value as int64)."""
    if code == _INT:
        return v
    if code == _FLOAT:
        return _D.unpack_from(mv, _RET_OFF)[0]
    if code == _BOOL:
        return v != 0
    if code == _NULL:
        return None
    if code == _STR:
        return _string_at(v).decode("utf-8", "surrogateescape")
    if code == _BYTES:
        data, size = _BA.unpack(_string_at(v, 16))
        return _string_at(data, size) if size else b""
    if code == _FUNC:
        return Function._adopt(v & 0xFFFFFFFFFFFFFFFF)
    if code == _OBJECT or code == _MODULE:
        return _adopt_object(v & 0xFFFFFFFFFFFFFFFF)
    if code == _DTYPE:
        return DataType(*_DT.unpack_from(mv, _RET_OFF))
    if code == _DEVICE:
        return Device(*_DEV.unpack_from(mv, _RET_OFF))
    if code == _HANDLE:
        return c_void_p(v & 0xFFFFFFFFFFFFFFFF or None)
    if code == _TENSOR:
        return _borrowed_tensor(v & 0xFFFFFFFFFFFFFFFF)
    raise TypeError("packedfunc: the function returned a value of unsupported type code %d (%s)"
                    % (code, _base.TYPE_CODE_NAMES.get(code, "extension")))


# ---------------------------------------------------------------------------
# Function
# ---------------------------------------------------------------------------

class Function:
    """A packed function: call it with positional arguments.

    A Function owns one reference to a PackedFunc and releases it when it is
    garbage collected. Functions come from :func:`get_global_func`,
    :func:`convert`, or as values returned by C. A PackedFunc is never
    wrapped twice: passing a Function to C passes its handle, and a handle
    coming back from C is wrapped as it is, so Functions compare equal (and
    hash alike) exactly when they share the same PackedFunc.

    Arguments are converted as described in the package documentation;
    the result comes back as the matching Python value. A failing C function
    raises the exception class of its error kind.
    """

    __slots__ = ("_handle", "_hb", "__weakref__")

    def __new__(cls, *args, **kwargs):
        raise TypeError("packedfunc.Function cannot be created directly; use "
                        "get_global_func() or convert()")

    @classmethod
    def _adopt(cls, handle):
        """Wrap a new reference (which this call consumes)."""
        self = object.__new__(cls)
        self._handle = handle
        # A ready-made pointer argument: ctypes passes it without
        # converting anything per call.
        self._hb = byref(ctypes.c_char.from_address(handle))
        return self

    def __eq__(self, other):
        if not isinstance(other, Function):
            return NotImplemented
        return self._handle == other._handle

    def __hash__(self):
        return hash(self._handle)

    @property
    def handle(self):
        """The PFFunctionHandle as an int (borrowed: valid while this
        Function lives)."""
        return self._handle

    # ---- metadata (issue 4): name, signature, doc --------------------------

    def _info(self):
        """(name, signature, doc) as str or None; all None once released."""
        if not self._handle:
            return None, None, None
        fields = (ctypes.c_char_p(), ctypes.c_char_p(), ctypes.c_char_p())
        check_call(_base.PFFuncGetInfo(self._handle, byref(fields[0]), byref(fields[1]),
                                       byref(fields[2])))
        # The name as registry names are (surrogateescape: it can be used to
        # look the function up again); the others are text to read.
        return tuple(f.value.decode("utf-8", "surrogateescape" if i == 0 else "replace")
                     if f.value else None for i, f in enumerate(fields))

    @property
    def name(self):
        """The name recorded with PFFuncSetInfo (a module function's or a
        registered Python function's registry name), or None."""
        return self._info()[0]

    @property
    def signature(self):
        """The signature text in the typed-signature grammar of c_api.h
        (``"int64(int64,int64)"``; set for every typed C function), or None.
        ``inspect.signature(f)`` gives the same as Python annotations."""
        return self._info()[1]

    @property
    def doc(self):
        """The docstring recorded with PFFuncSetInfo, or None.
        ``f.__doc__`` adds the name and signature to it."""
        return self._info()[2]

    def set_info(self, name=None, signature=None, doc=None):
        """Record a name, a signature (typed-signature grammar, kept as
        metadata only) and a docstring; None leaves a field alone. Each
        field can be set once per function: setting it again raises
        ValueError. Raises TypeError for a non-str value."""
        values = []
        for what, value in (("name", name), ("signature", signature), ("doc", doc)):
            if value is not None and not isinstance(value, str):
                raise TypeError("Function.set_info: %s must be a str or None, not %s"
                                % (what, type(value).__name__))
            if value is not None and "\0" in value:
                raise ValueError("Function.set_info: %s contains a NUL character" % what)
            try:
                # A name is encoded as registry names are (see _name_arg).
                values.append(None if value is None else value.encode(
                    "utf-8", "surrogateescape" if what == "name" else "strict"))
            except UnicodeEncodeError as err:
                raise ValueError("Function.set_info: %s contains a lone surrogate (%r at index "
                                 "%d), which UTF-8 cannot encode"
                                 % (what, value[err.start], err.start)) from None
        if not self._handle:
            raise ValueError("packedfunc: the Function was released")
        check_call(_PFFuncSetInfo(self._handle, *values))

    @property
    def __name__(self):
        """The metadata name, or "<anonymous>" (for help() and repr)."""
        return self.name or "<anonymous>"

    def __get__(self, obj, owner=None):
        # A Function stored as a class attribute stays a plain function (as
        # it was without this method); having __get__ makes it a routine
        # for inspect and pydoc, so that help(f) shows its signature.
        return self

    def __repr__(self):
        if not self._handle:
            return "<packedfunc.Function (released)>"
        name = self.name
        return "<packedfunc.Function %s at 0x%x>" % (repr(name) if name else "(anonymous)",
                                                     self._handle)

    def __del__(self):
        # Idempotent, so that a hand-made second call cannot free twice; a
        # released Function has handle 0 and refuses calls (ValueError).
        handle = self._handle
        if handle and not _base.state.shutting_down:
            self._handle, self._hb = 0, None
            PFFuncFree(handle)

    def __reduce__(self):
        raise TypeError("packedfunc.Function cannot be pickled")

    def __call__(self, *args):
        n = len(args)
        if n == 2:
            a, b = args
            plan = _plans_get((type(a), type(b)))
        elif n == 1:
            plan = _plans_get((type(args[0]),))
        else:
            plan = _plans_get(tuple(map(type, args)))
        if not plan:
            return _call_general(self, args, plan)
        try:
            fr = _take_frame()
        except IndexError:
            fr = _new_frame()
        mv = fr[0]
        try:
            plan[0](mv, _VALS_OFF, *args)
        except struct.error:  # an int outside int64
            _give_frame(fr)
            return _call_general(self, args, False)
        if fr[5] is not plan:
            mv[_CODES_OFF:_CODES_OFF + 4 * n] = plan[1]
            fr[5] = plan
        if PFFuncCall(self._hb, fr[1], fr[2], n, fr[3], fr[4]):
            _give_frame(fr)
            _call_failed(self)
        v, c = _ret_unpack(mv, 0)
        if c == _INT:
            _give_frame(fr)
            return v
        try:
            return _convert_ret(mv, v, c)
        finally:
            _give_frame(fr)


def _call_failed(func):
    """Raise the error of a failed PFFuncCall: a released Function (whose
    NULL handle C refused) says so; anything else is the callee's error."""
    if func._hb is None:
        raise ValueError("packedfunc: the Function was released; it cannot be called")
    check_call(-1)


def _call_general(func, args, plan):
    if plan is None:  # not seen before: maybe it can take the fast path
        if _make_plan(tuple(map(type, args))):
            return func(*args)
    n = len(args)
    if n <= MAX_FAST:
        try:
            fr = _take_frame()
        except IndexError:
            fr = _new_frame()
    else:
        fr = _new_frame(n)
    keep, tensors = [], []
    mv = fr[0]
    try:
        _pack_args(args, fr, keep, tensors)
        for i in range(0, len(tensors), 2):
            _tensors_in_flight[tensors[i]] = tensors[i + 1]
        if PFFuncCall(func._hb, fr[1], fr[2], n, fr[3], fr[4]):
            _call_failed(func)
        v, c = _RET.unpack_from(mv, 0)
        if c == _TENSOR:
            addr = v & 0xFFFFFFFFFFFFFFFF
            for i in range(0, len(tensors), 2):
                if tensors[i] == addr:
                    return tensors[i + 1]  # an argument coming back: itself
        return _convert_ret(mv, v, c)
    finally:
        for i in range(0, len(tensors), 2):
            _tensors_in_flight.pop(tensors[i], None)
        if fr[7] == MAX_FAST:
            _give_frame(fr)


# ---- Function metadata (issue 4) ---------------------------------------------

class _PerInstance:
    """A non-data descriptor: `class_value` on the class, fget(instance) on
    an instance. Lets Function keep its class docstring while each function
    has its own __doc__ and __signature__."""

    def __init__(self, fget, class_value):
        self.fget, self.class_value = fget, class_value

    def __get__(self, obj, owner=None):
        return self.class_value if obj is None else self.fget(obj)


def _function_doc(func):
    try:
        return _signature.docstring(*func._info())
    except Exception:  # help() must never fail on a function
        return None


_ANY_ARGS = inspect.Signature([inspect.Parameter("args", inspect.Parameter.VAR_POSITIONAL)])


def _function_signature(func):
    # A function without a signature in the typed grammar (a packed C
    # function, a Python callable) takes any positional arguments.
    try:
        sig = _signature.to_inspect(func._info()[1])
    except Exception:
        sig = None
    return _ANY_ARGS if sig is None else sig


Function.__doc__ = _PerInstance(_function_doc, Function.__doc__)
Function.__signature__ = _PerInstance(_function_signature, None)
_PFFuncSetInfo = _base._fn("PFFuncSetInfo", ctypes.c_int,
                           [c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p],
                           gil=True)


# ---------------------------------------------------------------------------
# Objects and tensors
# ---------------------------------------------------------------------------

class Object:
    """A reference-counted packedfunc object other than a function or a
    tensor (a module, a boxed value, a closure...).

    Owns one reference, released when collected; can be passed back to C.
    ``type_index`` is its PFObjectTypeIndex.
    """

    __slots__ = ("_handle", "_code", "type_index", "__weakref__")

    def __new__(cls, *args, **kwargs):
        raise TypeError("packedfunc.Object cannot be created directly")

    @classmethod
    def _adopt(cls, handle, type_index):
        self = object.__new__(cls)
        self._handle = handle
        self.type_index = type_index
        self._code = _MODULE if type_index == OBJECT_MODULE else _OBJECT
        return self

    @property
    def handle(self):
        """The PFObjectHandle as an int (borrowed)."""
        return self._handle

    def __repr__(self):
        return "<packedfunc.%s type_index=%d at 0x%x>" % (type(self).__name__, self.type_index,
                                                           self._handle)

    def __del__(self):
        handle = self._handle  # idempotent, as Function.__del__
        if handle and not _base.state.shutting_down:
            self._handle = 0
            PFObjectFree(handle)

    def __reduce__(self):
        raise TypeError("packedfunc.%s cannot be pickled" % type(self).__name__)


class Tensor(Object):
    """A tensor object owned by packedfunc (kPFObjectTensor).

    Supports the DLPack protocol (``__dlpack__``, ``__dlpack_device__``), so
    ``numpy.from_dlpack(t)`` views its memory without a copy and keeps it
    alive. Functions that return a tensor give you a numpy array directly
    when numpy is installed, and this object otherwise.
    """

    __slots__ = ()

    def _dltensor(self):
        ptr = c_void_p()
        check_call(_PFTensorGetDLTensor(self._handle, byref(ptr)))
        return DLTensor.from_address(ptr.value)

    def __dlpack_device__(self):
        d = self._dltensor().device
        return (d.device_type, d.device_id)

    def __dlpack__(self, stream=None):
        managed = c_void_p()
        check_call(_base.PFTensorToDLPack(self._handle, byref(managed)))
        capsule = _capsule_new(managed.value, ctypes.addressof(_NAME_DLTENSOR),
                               ctypes.cast(_capsule_destructor, c_void_p).value)
        return capsule

    def numpy(self):
        """A numpy array sharing this tensor's memory (no copy)."""
        import numpy
        return _to_numpy(self, numpy)


_PFTensorGetDLTensor = _base._fn("PFTensorGetDLTensor", ctypes.c_int,
                                 [c_void_p, ctypes.POINTER(c_void_p)], gil=True)


def _run_deleter(managed_addr):
    deleter = DLManagedTensor.from_address(managed_addr).deleter
    if deleter:
        ctypes.CFUNCTYPE(None, c_void_p)(deleter)(managed_addr)


@_keep_forever
@ctypes.CFUNCTYPE(None, c_void_p)
def _capsule_destructor(capsule_addr):
    # Runs when a capsule from Tensor.__dlpack__ dies. A consumer renames
    # the capsule and takes over the deleter; otherwise we run it here.
    try:
        if _base.is_shutting_down():
            return
        # The capsule is being destroyed: use its address only, never a new
        # reference to it.
        if _pyapi_is_valid(capsule_addr, b"dltensor"):
            _run_deleter(_pyapi_get_pointer(capsule_addr, b"dltensor"))
    except BaseException:  # never raise into the interpreter's dealloc
        pass


_pyapi_is_valid = ctypes.pythonapi["PyCapsule_IsValid"]
_pyapi_is_valid.restype = ctypes.c_int
_pyapi_is_valid.argtypes = [c_void_p, ctypes.c_char_p]
_pyapi_get_pointer = ctypes.pythonapi["PyCapsule_GetPointer"]
_pyapi_get_pointer.restype = c_void_p
_pyapi_get_pointer.argtypes = [c_void_p, ctypes.c_char_p]


def _to_numpy(tensor, numpy):
    """A writable numpy array viewing a tensor object's memory, no copy;
    the array keeps the object (and so the C owner) alive. numpy's own
    from_dlpack would give a read-only array, which could not be passed
    back to C."""
    return _dltensor_view(tensor._dltensor(), tensor, numpy)


_get_type_index = _base.PFObjectGetTypeIndex


def _adopt_object(handle):
    """Wrap a new reference to an object of any type."""
    ti = ctypes.c_uint32()
    if _get_type_index(handle, byref(ti)) != 0:
        err = last_error()
        raise err
    ti = ti.value
    if ti == OBJECT_FUNCTION:
        return Function._adopt(handle)
    if ti == OBJECT_MODULE:  # issue 4: a Module, whose functions are attributes
        from ._module import Module
        return Module._adopt(handle, ti)
    if ti == OBJECT_TENSOR:
        t = Tensor._adopt(handle, ti)
        numpy = sys.modules.get("numpy")
        if numpy is None:
            try:
                import numpy
            except ImportError:
                return t
        if t._dltensor().device.device_type != 1:
            return t  # not host memory: numpy cannot view it
        return _to_numpy(t, numpy)
    return Object._adopt(handle, ti)


# DLDataType -> numpy array-interface type strings.
_TYPESTR_KIND = {0: "i", 1: "u", 2: "f", 5: "c"}


class _ArrayInterface:
    __slots__ = ("__array_interface__", "owner")

    def __init__(self, iface):
        self.__array_interface__ = iface


def _borrowed_tensor(addr, copies=None):
    """A numpy array for a borrowed DLTensor*: the argument itself when it
    is one we passed, else a private copy made at once, which stays valid
    whatever C does with its memory afterwards. With `copies`, (a view of
    C's memory, the copy, the copy's bytes as received) is appended to it,
    for a write-back."""
    obj = _tensors_in_flight.get(addr)
    if obj is not None:
        return obj
    import numpy
    view = _dltensor_view(DLTensor.from_address(addr), None, numpy)
    copy = view.copy()
    if copies is not None:
        copies.append((view, copy, copy.tobytes()))
    return copy


def _dltensor_view(t, owner, numpy):
    """A numpy array over a CPU DLTensor's memory; `owner` is kept alive by
    the array."""
    if t.device.device_type != 1:
        raise TypeError("packedfunc: a tensor on device type %d cannot be viewed from numpy"
                        % t.device.device_type)
    dt = t.dtype
    if dt.lanes != 1:
        raise TypeError("packedfunc: tensors with vector lanes are not supported")
    if (dt.code, dt.bits) == (1, 1):
        typestr, itemsize = "|b1", 1
    elif dt.code in _TYPESTR_KIND and dt.bits % 8 == 0:
        itemsize = dt.bits // 8
        typestr = "<%s%d" % (_TYPESTR_KIND[dt.code], itemsize)
    else:
        raise TypeError("packedfunc: unsupported tensor dtype %s" % DataType(dt.code, dt.bits))
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = (tuple(t.strides[i] * itemsize for i in range(t.ndim))
               if t.strides else None)
    iface = _ArrayInterface({"version": 3, "shape": shape, "typestr": typestr,
                             "data": ((t.data or 0) + t.byte_offset, False),
                             "strides": strides})
    iface.owner = owner
    return numpy.asarray(iface)


# ---------------------------------------------------------------------------
# Python callables as packed functions
# ---------------------------------------------------------------------------

_live = {}  # resource key -> Python callable, while C holds the function
_keys = itertools.count(1)

# The memory of a return value handed to PFCFuncSetReturn: a PFValue and a
# type code. Each callback takes its own from a free list for the moment of
# the call (list.pop and list.append are atomic under the GIL): another
# thread, or a nested callback on this one, can run between writing the
# value and C reading it, and must never see it.


def _new_scratch():
    buf = (ctypes.c_char * 16)()
    return memoryview(buf).cast("B"), byref(buf, 0), byref(buf, 8), buf


_free_scratch = [_new_scratch() for _ in range(4)]
_take_scratch = _free_scratch.pop
_give_scratch = _free_scratch.append
_RET_INT = struct.Struct("=qi")  # a PFValue holding an int64, then its type code
_RET_FLOAT = struct.Struct("=di")
_RET_RAW = struct.Struct("=8si")


def _set_raw_return(ret, packer, value, code):
    try:
        sc = _take_scratch()
    except IndexError:
        sc = _new_scratch()
    try:
        packer.pack_into(sc[0], 0, value, code)
        return PFCFuncSetReturn(ret, sc[1], sc[2], 1)
    finally:
        _give_scratch(sc)


_cb_plans = {}  # codes bytes -> Struct unpacker for all-int/float args


def _cb_plan(codes_raw, n):
    codes = struct.unpack("=%di" % n, codes_raw)
    if all(c == _INT or c == _FLOAT for c in codes):
        plan = struct.Struct("=" + "".join("q" if c == _INT else "d" for c in codes)).unpack_from
    else:
        plan = False
    if len(_cb_plans) < _PLANS_MAX:
        _cb_plans[codes_raw] = plan
    return plan


def _arg_from_c(addr, code, copies):
    """A Python value for one borrowed argument of a callback. A borrowed
    tensor arrives as a private copy, noted in `copies` for the write-back
    (see _borrowed_tensor)."""
    if code == _INT:
        return _Q.unpack_from(_MEMORY, addr)[0]
    if code == _FLOAT:
        return _D.unpack_from(_MEMORY, addr)[0]
    v = _P.unpack_from(_MEMORY, addr)[0]
    if code == _BOOL:
        return v != 0
    if code == _NULL:
        return None
    if code == _STR:
        return _string_at(v).decode("utf-8", "surrogateescape")
    if code == _BYTES:
        data, size = _BA.unpack_from(_MEMORY, v)
        return _string_at(data, size) if size else b""
    if code == _FUNC:
        check_call(_base.PFFuncRetain(v))  # borrowed: take our own
        return Function._adopt(v)
    if code == _OBJECT or code == _MODULE:
        # A tensor object arrives as a numpy view that holds a reference.
        check_call(_base.PFObjectRetain(v))
        return _adopt_object(v)
    if code == _DTYPE:
        return DataType(*_DT.unpack_from(_MEMORY, addr))
    if code == _DEVICE:
        return Device(*_DEV.unpack_from(_MEMORY, addr))
    if code == _HANDLE:
        return c_void_p(v or None)
    if code == _TENSOR:
        return _borrowed_tensor(v, copies)
    raise TypeError("packedfunc: a callback got an argument of unsupported type code %d"
                    % code)


def _call_with_c_args(fn, args_p, codes_raw, n):
    """fn(*converted arguments), the general path; then writes each tensor
    copy that the callback changed back into C's memory."""
    codes = struct.unpack("=%di" % n, codes_raw)
    copies = []
    r = fn(*[_arg_from_c(args_p + 8 * i, codes[i], copies) for i in range(n)])
    for view, copy, received in copies:
        # Only a copy that the callback changed is written: C may have lent
        # read-only memory, or the same tensor twice.
        if copy.tobytes() != received:
            view[...] = copy
    return r


def _set_return(ret, r):
    t = type(r)
    if t is int:
        if not _INT64_MIN <= r <= _INT64_MAX:
            raise OverflowError("packedfunc: callback result %d does not fit in int64" % r)
        return _set_raw_return(ret, _RET_INT, r, _INT)
    if t is float:
        return _set_raw_return(ret, _RET_FLOAT, r, _FLOAT)
    if r is None:
        return 0
    if hasattr(r, "__dlpack__") and not isinstance(r, Object):
        return _return_tensor(ret, r)
    keep = []
    code, raw = _convert_arg(r, RESULT, keep)
    return _set_raw_return(ret, _RET_RAW, raw, code)


_PFTensorCreateFromDLPack = _base._fn("PFTensorCreateFromDLPack", ctypes.c_int,
                                      [c_void_p, ctypes.POINTER(c_void_p)], gil=True)


def _return_tensor(ret, r):
    """Return an array from a callback as an owned tensor object: the
    object takes over the DLPack export (and so keeps the array alive)."""
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(r, numpy.generic):
        return _set_return(ret, r.item())
    ptr, capsule = _tensor_arg(r, RESULT)
    # Consume the capsule: from here on the tensor object owns the export.
    _capsule_set_name(capsule, ctypes.addressof(_NAME_USED))
    obj = c_void_p()
    check_call(_PFTensorCreateFromDLPack(ptr, byref(obj)))
    try:
        return _set_raw_return(ret, _RET_RAW, _P.pack(obj.value), _OBJECT)
    finally:
        PFObjectFree(obj)


# A PFHostCall (c_api.h): the resource (here the key into _live) at offset
# 0, the status that this call reports at offset 8.
_STATUS = struct.Struct("=i")
_status_into = _STATUS.pack_into
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
        fn = _live[_key_of(_MEMORY, call_p)[0]]
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
                sc = _new_scratch()
            _RET_INT_pack_into(sc[0], 0, r, _INT)
            rc = PFCFuncSetReturn(ret, sc[1], sc[2], 1)
            _give_scratch(sc)
        else:
            rc = _set_return(ret, r)
        _status_into(_MEMORY_RW, call_p + 8, -1 if rc else 0)
    except BaseException as exc:
        _status_into(_MEMORY_RW, call_p + 8, -1)
        record_exception(exc)
    return 0


_cb_plans_get = _cb_plans.get
_RET_INT_pack_into = _RET_INT.pack_into


def _finalize(key):
    # The last reference to a converted callable went: forget the callable.
    # May run on any thread; never after the gate is closed at exit.
    try:
        _live.pop(key, None)
    except BaseException:
        pass


def _unraisable_hook(args, previous=sys.unraisablehook):
    """sys.unraisablehook: an exception that escaped the trampoline or the
    finalizer before their own handlers (a signal handler that raised on
    entry) becomes the calling thread's packedfunc error, instead of being
    printed by ctypes and lost. Anything else goes to the previous hook."""
    obj = getattr(args, "object", None)
    if (obj is _trampoline or obj is _finalize) and args.exc_value is not None:
        record_exception(args.exc_value, skip_frames=0)
        return
    previous(args)


sys.unraisablehook = _unraisable_hook

# One trampoline and one finalizer for the whole process, never freed.
_TRAMPOLINE = _keep_forever(PACKED_CFUNC(_trampoline))
_FINALIZER = _keep_forever(FINALIZER(_finalize))

# Every Python callable that C can call goes through this gate. At exit it
# is closed (below): C threads that call in afterwards get a RuntimeError
# instead of entering an interpreter that is going away.
_GATE = c_void_p()
check_call(_base.PFHostGateCreate(byref(_GATE)))
_GATE_CLOSED_MESSAGE = b"the Python interpreter is shutting down"
_GATE_CLOSE_TIMEOUT_MS = 3000


def convert(obj):
    """Turn a Python callable into a :class:`Function` (a Function is
    returned as it is).

    The Function holds the callable until the last reference to it, from C
    or Python, goes. When C calls it, the arguments arrive converted to
    Python values and the result is converted back; an exception fails the
    C call with the exception's error kind (see :func:`register_error`).
    Raises TypeError for an object that is not callable.
    """
    if isinstance(obj, Function):
        return obj
    if not callable(obj):
        raise TypeError("packedfunc.convert: expected a callable, not %s"
                        % type(obj).__qualname__)
    key = next(_keys)
    _live[key] = obj
    out = c_void_p()
    # On failure the library has already run the finalizer (dropping key).
    check_call(_base.PFFuncCreateFromHostCFunc(_GATE, _TRAMPOLINE, c_void_p(key), _FINALIZER,
                                               byref(out)))
    return Function._adopt(out.value)


# ---------------------------------------------------------------------------
# Signals
# ---------------------------------------------------------------------------

_check_signals_c = ctypes.pythonapi["PyErr_CheckSignals"]
_check_signals_c.restype = ctypes.c_int
_check_signals_c.argtypes = []

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
            _check_signals_c()
            result = 0
        except GeneratorExit:  # the coroutine is being closed (thread exit)
            raise
        except BaseException as exc:
            result = record_exception(exc, skip_frames=0)


class _CheckerPerThread(threading.local):
    def __init__(self):
        self.coro = _signal_checker_loop()
        self.coro.send(None)  # run to the first suspension


_checker_tls = _CheckerPerThread()  # the main thread's, made here
_SIGNAL_CHECKER = SIGNAL_CHECKER(functools.partial(
    next, map(operator.methodcaller("send", None),
              map(operator.attrgetter("coro"), itertools.repeat(_checker_tls)))))
_keep_forever(_SIGNAL_CHECKER)
check_call(_base.PFEnvSetSignalChecker(ctypes.cast(_SIGNAL_CHECKER, c_void_p)))


@atexit.register
def _stop_calls_from_c():
    # Registered after _base's exit handler, so it runs before it. From
    # here on, C threads that call a Python function get a RuntimeError
    # instead of entering an interpreter that is going away. Both calls
    # release the GIL, so that callbacks in progress on other threads can
    # finish; the wait for them is bounded.
    try:
        _base.PFHostGateClose(_GATE, _GATE_CLOSED_MESSAGE, _GATE_CLOSE_TIMEOUT_MS)
        _base.PFEnvSetSignalChecker(None)
    except BaseException:  # pragma: no cover
        pass
