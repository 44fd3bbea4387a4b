"""Objects and tensors: Object, Tensor, DLPack capsules and numpy views.

A packedfunc object other than a function comes to Python as an Object (a
Module, when it is one; see _module). A tensor object comes as a numpy
array viewing its memory when numpy can view it, else as a Tensor. A
borrowed DLTensor (kPFDLTensorHandle) comes as the very object that Python
passed in the same call chain, or as a private copy. Anything with
``__dlpack__`` goes to C as a borrowed DLTensor. Everything here is
private; the package re-exports Object and Tensor.
"""
import ctypes
import sys

from . import _signature
from ._convert import (OBJECT, P, RANK_DLPACK, RANK_HANDLES, TENSOR, live_handle, register_decoder,
                       register_encoder, register_fallback, register_object_type,
                       tensors_in_flight, what)
from ._backend import cext as _cext
from ._errors import check_call
from ._holds import give_back
from ._ffi import (PFObjectFree, PFTensorCreateFromDLPack, PFTensorGetDLTensor, PFTensorToDLPack,
                   PyCapsule_GetPointer, PyCapsule_GetPointerAt, PyCapsule_IsValid,
                   PyCapsule_IsValidAt, PyCapsule_New, PyCapsule_SetName, keep_forever)
from ._library import OBJECT_TYPES, is_shutting_down, state
from ._mirrors import DLPACK_DELETER, DLManagedTensor, DLTensor
from ._types import DataType, Device

c_void_p, byref = ctypes.c_void_p, ctypes.byref

# Capsule names must outlive their capsules: module-level, never freed.
_NAME_DLTENSOR = ctypes.create_string_buffer(b"dltensor")
_NAME_USED = ctypes.create_string_buffer(b"used_dltensor")
_KDL_CPU = 1  # kDLCPU (dlpack.h): memory that numpy can view
TENSOR_TYPE = OBJECT_TYPES["tensor"]


class Object(_cext.ObjectBase if _cext else object):
    """A reference-counted packedfunc object other than a function or a
    tensor (a module, a boxed value, a closure...).

    Owns one reference, released when collected; can be passed back to C.
    ``type_index`` is its PFObjectTypeIndex.
    """

    # _loan: what the collector was lent for this collection (see _holds).
    # With the extension these are ObjectBase's fields (the containers'
    # compiled bases derive from it).
    __slots__ = () if _cext else ("_handle", "_code", "type_index", "_loan", "__weakref__")

    def __new__(cls, *args, **kwargs):
        raise TypeError("packedfunc.Object cannot be created directly")

    @classmethod
    def _adopt(cls, handle, type_index):
        if _cext:
            # The type code is OBJECT, the loan None; a container reads its
            # size and is tracked (_holds).
            return _cext.adopt_object(cls, handle, type_index)
        self = object.__new__(cls)
        self._handle = handle
        self.type_index = type_index
        self._code = OBJECT  # the type code it passes to C with
        self._loan = None
        return self

    @property
    def handle(self):
        """The PFObjectHandle as an int (borrowed)."""
        return self._handle

    def __repr__(self):
        return "<packedfunc.%s type_index=%d at 0x%x>" % (type(self).__name__, self.type_index,
                                                           self._handle)

    if not _cext:  # the extension's ObjectBase does the same in C (tp_finalize)
        def __del__(self):
            handle = self._handle  # idempotent, as Function.__del__
            if handle and not state.shutting_down:
                self._handle = 0
                PFObjectFree(handle)
                # After the release: the holds that it destroyed are dropped,
                # the others go back to C.
                give_back(self)

    def __reduce__(self):
        raise TypeError("packedfunc.%s cannot be pickled" % type(self).__name__)


class Tensor(Object):
    """A tensor object owned by packedfunc (kPFObjectTensor).

    Describes its memory with ``shape``, ``dtype`` (a DataType), ``device``
    (a Device), ``strides`` (in elements), ``ndim``, ``data_ptr`` and
    ``is_contiguous()``. Supports the DLPack protocol (``__dlpack__``,
    ``__dlpack_device__``), so ``numpy.from_dlpack(t)`` views its memory
    without a copy and keeps it alive. :func:`from_dlpack` makes one from
    any DLPack array. A function that returns a CPU tensor gives a numpy
    array directly when numpy is installed; a tensor on any other device
    comes as this object.
    """

    __slots__ = ()

    def _dltensor(self):
        if not self._handle:
            raise ValueError("packedfunc: the Tensor was released")
        ptr = c_void_p()
        check_call(PFTensorGetDLTensor(self._handle, byref(ptr)))
        return DLTensor.from_address(ptr.value)

    @property
    def ndim(self):
        """The number of dimensions."""
        return self._dltensor().ndim

    @property
    def shape(self):
        """The extent of each dimension, a tuple of ints."""
        t = self._dltensor()
        return tuple(t.shape[i] for i in range(t.ndim))

    @property
    def strides(self):
        """The step of each dimension in elements (not bytes, unlike
        numpy), a tuple of ints; those of a compact row-major tensor when
        the DLTensor leaves them out."""
        t = self._dltensor()
        if t.strides:
            return tuple(t.strides[i] for i in range(t.ndim))
        return _compact_strides(self.shape)

    @property
    def dtype(self):
        """The element type, a DataType."""
        d = self._dltensor().dtype
        return DataType(d.code, d.bits, d.lanes)

    @property
    def device(self):
        """Where the memory is, a Device."""
        d = self._dltensor().device
        return Device(d.device_type, d.device_id)

    @property
    def data_ptr(self):
        """The address of the first element (the DLTensor's data plus its
        byte_offset), as an int; valid while this tensor lives."""
        t = self._dltensor()
        return (t.data or 0) + t.byte_offset

    def is_contiguous(self):
        """True when the elements are compact and in row-major order (the
        strides of dimensions of extent 1 do not matter)."""
        shape = self.shape
        return all(n == 1 or s == c for n, s, c in zip(shape, self.strides,
                                                       _compact_strides(shape)))

    def __repr__(self):
        if not self._handle:
            return "<packedfunc.Tensor (released)>"
        return "<packedfunc.Tensor shape=%s dtype=%s device=%s at 0x%x>" % (
            self.shape, self.dtype, self.device, self._handle)

    def __dlpack_device__(self):
        d = self._dltensor().device
        return (d.device_type, d.device_id)

    def __dlpack__(self, stream=None):
        managed = c_void_p()
        check_call(PFTensorToDLPack(self._handle, byref(managed)))
        capsule = PyCapsule_New(managed.value, ctypes.addressof(_NAME_DLTENSOR),
                                ctypes.cast(_capsule_destructor, c_void_p).value)
        return capsule

    def numpy(self):
        """A numpy array sharing this tensor's memory (no copy)."""
        import numpy
        return _to_numpy(self, numpy)


def _compact_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def from_dlpack(x):
    """A :class:`Tensor` viewing the memory of any DLPack array (a numpy
    array, or anything with ``__dlpack__``), without a copy: the Tensor
    takes over x's export, and so keeps x's memory alive. A Tensor is
    returned as it is. Raises TypeError when x cannot export one."""
    if isinstance(x, Tensor):
        return x
    handle = tensor_object_from(x, "from_dlpack's argument")
    return Tensor._adopt(handle.value, TENSOR_TYPE)


# ---------------------------------------------------------------------------
# DLPack capsules
# ---------------------------------------------------------------------------

@keep_forever
@ctypes.CFUNCTYPE(None, c_void_p)
def _capsule_destructor(capsule_addr):
    # Runs when a capsule from Tensor.__dlpack__ dies. A consumer renames
    # the capsule and takes over the deleter; otherwise we run it here.
    try:
        if is_shutting_down():
            return
        # The capsule is being destroyed: use its address only, never a new
        # reference to it.
        if PyCapsule_IsValidAt(capsule_addr, b"dltensor"):
            managed_addr = PyCapsule_GetPointerAt(capsule_addr, b"dltensor")
            deleter = DLManagedTensor.from_address(managed_addr).deleter
            if deleter:
                DLPACK_DELETER(deleter)(managed_addr)
    except BaseException:  # never raise into the interpreter's dealloc
        pass


def dlpack_export(x, pos):
    """(DLTensor address, capsule) of x.__dlpack__(); TypeError naming the
    argument (see _convert.what) when x cannot export one."""
    try:
        capsule = x.__dlpack__()
    except Exception as err:
        raise TypeError("packedfunc: %s (%s) cannot be exported through DLPack: %s"
                        % (what(pos), type(x).__name__, err)) from err
    if not PyCapsule_IsValid(capsule, b"dltensor"):
        raise TypeError("packedfunc: %s (%s) cannot be exported through DLPack: its "
                        "__dlpack__ returned %s, not a DLPack capsule named 'dltensor'"
                        % (what(pos), type(x).__name__, type(capsule).__name__))
    ptr = PyCapsule_GetPointer(capsule, b"dltensor")
    # DLManagedTensor starts with its DLTensor, so the two addresses agree.
    # The capsule is not consumed: its own destructor frees the export.
    return ptr, capsule


def tensor_object_from(x, pos):
    """A new tensor object (an owned c_void_p handle) that takes over x's
    DLPack export, and so keeps x alive."""
    ptr, capsule = dlpack_export(x, pos)
    # Consume the capsule: from here on the tensor object owns the export.
    PyCapsule_SetName(capsule, ctypes.addressof(_NAME_USED))
    obj = c_void_p()
    check_call(PFTensorCreateFromDLPack(ptr, byref(obj)))
    return obj


# ---------------------------------------------------------------------------
# numpy views
# ---------------------------------------------------------------------------

def _to_numpy(tensor, numpy):
    """A writable numpy array viewing a tensor object's memory, no copy;
    the array keeps the object (and so the C owner) alive. numpy's own
    from_dlpack would give a read-only array, which could not be passed
    back to C."""
    return _dltensor_view(tensor._dltensor(), tensor, numpy)


# DLDataType -> numpy array-interface type strings.
_TYPESTR_KIND = {0: "i", 1: "u", 2: "f", 5: "c"}


class _ArrayInterface:
    __slots__ = ("__array_interface__", "owner")

    def __init__(self, iface):
        self.__array_interface__ = iface


def borrowed_tensor(addr, copies=None):
    """A numpy array for a borrowed DLTensor*: the argument itself when it
    is one we passed, else a private copy made at once, which stays valid
    whatever C does with its memory afterwards. With `copies`, (a view of
    C's memory, the copy, the copy's bytes as received) is appended to it,
    for a write-back."""
    obj = tensors_in_flight.get(addr)
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
    if t.device.device_type != _KDL_CPU:
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


def _adopt_tensor(handle, type_index):
    t = Tensor._adopt(handle, type_index)
    numpy = sys.modules.get("numpy")
    if numpy is None:
        try:
            import numpy
        except ImportError:
            return t
    if t._dltensor().device.device_type != _KDL_CPU:
        return t  # not host memory: numpy cannot view it
    return _to_numpy(t, numpy)


def _tensor_annotation(result):
    # Any DLPack array may be passed; a tensor result is a numpy array.
    try:
        import numpy
    except ImportError:  # pragma: no cover - numpy is a dependency
        return Tensor
    return numpy.ndarray


# ---------------------------------------------------------------------------
# Conversions
# ---------------------------------------------------------------------------

def encode_object(x, pos, keep):
    return x._code, live_handle(x, pos)


def _encode_tensor(x, pos, keep):
    ptr, capsule = dlpack_export(x, pos)
    keep.append(capsule)
    keep.append(x)
    return TENSOR, P.pack(ptr)


_tensor_types = set()  # the types given an exact encoder below


def _encode_dlpack(x, pos, keep):
    if not hasattr(x, "__dlpack__"):
        return None
    t = type(x)
    if hasattr(t, "__dlpack__") and t not in _tensor_types and len(_tensor_types) < 64:
        # The fallbacks before this one look at the type alone, so every
        # value of this type gets here, and has __dlpack__: from now on
        # such values (numpy arrays) skip the fallbacks.
        _tensor_types.add(t)
        register_encoder((t,), _encode_tensor)
    return _encode_tensor(x, pos, keep)


if _cext:
    # The extension passes values of these types as borrowed DLTensors
    # itself, and keeps tensors_in_flight as the general path does; and
    # Objects (their handle and code), DataTypes and Devices by their fields.
    _cext.set_hooks(tensor_types=_tensor_types, tensors_in_flight=tensors_in_flight,
                    object_type=Object, dtype_type=DataType, device_type=Device)

register_encoder((Object, Tensor), encode_object)
register_fallback(RANK_HANDLES, Object, encode_object)
register_fallback(RANK_DLPACK, None, _encode_dlpack)
register_decoder(TENSOR, lambda mem, off, borrowed, copies: borrowed_tensor(
    P.unpack_from(mem, off)[0], copies))
register_object_type(None, Object._adopt)
register_object_type("tensor", _adopt_tensor)
_signature.register_annotation("tensor", _tensor_annotation)
