"""Objects and tensors: Object, Tensor, DLPack capsules and numpy views.

A packedfunc object other than a function comes to Python as an Object (a
Module, when it is one; see _module). A tensor object comes as a numpy
array viewing its memory when numpy can view it (read-only when the tensor
is), else as a Tensor. A borrowed DLTensor (kPFDLTensorHandle) comes as the
very object that Python passed in the same call chain, or as a private
copy. Anything with ``__dlpack__`` goes to C as a borrowed DLTensor, or,
when its export is read-only (or it is a read-only numpy array, which
numpy 1.x cannot export), as a read-only tensor object. Everything here
is private; the package re-exports Object and Tensor.

DLPack both ways, as the Python array API's DLPack protocol says: a
consumer here asks ``__dlpack__(max_version=...)`` first and a producer
older than DLPack 1.0 (numpy 1.x), which refuses the keyword with a
TypeError, without it; it takes a capsule over by renaming it
("used_dltensor", "used_dltensor_versioned"), after which the tensor
object runs the deleter, once. Tensor.__dlpack__ gives a versioned capsule
to a consumer that passes max_version >= (1, 0), an unversioned one to any
other, and its capsule's destructor runs the deleter only when no consumer
took the capsule over.
"""
import atexit
import ctypes
import operator
import sys
import threading
import types

from . import _signature
from ._convert import (OBJECT, P, RANK_DLPACK, RANK_HANDLES, TENSOR, register_decoder,
                       register_encoder, register_fallback, register_object_type, released,
                       tensors_in_flight, what)
from ._backend import cext as _cext
from ._errors import check_call
from ._holds import Held, give_back, release_after_own_del
from ._ffi import (OBJECT_TYPE_REGISTERED_BEGIN, PF_GET_API_BASE_ADDRESS, PFObjectFree,
                   PFTensorCreateFromDLPack,
                   PFTensorCreateFromDLPackVersioned, PFTensorGetDLTensor, PFTensorIsReadOnly,
                   PFTensorToDLPack, PFTensorToDLPackVersioned, PyCapsule_GetPointer, PyErr_Occurred,
                   PyCapsule_GetPointerAt, PyCapsule_IsValid, PyCapsule_IsValidAt, PyCapsule_New,
                   PyCapsule_SetName, keep_forever)
from ._library import OBJECT_TYPES, is_shutting_down, state
from ._mirrors import (DL_TENSOR_OFFSET_VERSIONED, DLPACK_DELETER,
                       DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED, DLPACK_FLAG_READ_ONLY, DLPACK_VERSION,
                       DLManagedTensor, DLTensor, PFDLManagedTensorVersioned)
from ._types import ClassChoice, DataType, Device, _parse, device_from_c

c_void_p, byref = ctypes.c_void_p, ctypes.byref

# Capsule names must outlive their capsules: module-level, never freed.
_NAME_DLTENSOR = ctypes.create_string_buffer(b"dltensor")
_NAME_USED = ctypes.create_string_buffer(b"used_dltensor")
_NAME_VERSIONED = ctypes.create_string_buffer(b"dltensor_versioned")
_NAME_USED_VERSIONED = ctypes.create_string_buffer(b"used_dltensor_versioned")
_KDL_CPU = 1  # kDLCPU (dlpack.h): memory that numpy can view
TENSOR_TYPE = OBJECT_TYPES["tensor"]
# How the deleters sit in the two managed tensors.
_DELETER_OFFSET = DLManagedTensor.deleter.offset
_DELETER_OFFSET_VERSIONED = PFDLManagedTensorVersioned.deleter.offset


class Object(_cext.ObjectBase if _cext else object):
    """A reference-counted packedfunc object other than a function or a
    tensor (a module, a boxed value, a closure, an instance of a registered
    object type...).

    Owns one reference, released when collected; can be passed back to C.
    ``type_index`` is its PFObjectTypeIndex (of an instance whose type has
    a member of that name, ``Object.type_index.__get__(obj)``; as for
    ``handle``). Two Objects are equal when
    they hold the same C object (see also :func:`same_as`). Instances of
    registered object types are instances of subclasses made for their
    types (see :func:`get_class`).
    """

    # With the extension, _handle, _code, type_index, _loan, _data and the
    # weak references are ObjectBase's fields (the containers' compiled
    # bases derive from it), and ObjectBase's finalizer releases the handle.
    # _loan: what the collector was lent for this collection (see _holds).
    # _data: the address of a registered type's struct, else 0.
    __slots__ = () if _cext else ("_handle", "_code", "type_index", "_loan", "_data",
                                  "__weakref__")

    @classmethod
    def _adopt(cls, handle, type_index):
        if _cext:
            # The type code is OBJECT, the loan None; a container reads its
            # size and is tracked (_holds).
            return _cext.adopt_object(cls, handle, type_index)
        return init_state(object.__new__(cls), handle, type_index, 0)

    @property
    def handle(self):
        """The PFObjectHandle as an int (borrowed)."""
        return handle_of(self)

    def __repr__(self):
        return "<packedfunc.%s type_index=%d at 0x%x>" % (type(self).__name__, type_index_of(self),
                                                           handle_of(self))

    if not _cext:  # the extension's ObjectBase does the same in C (tp_new, tp_finalize)
        def __new__(cls, *args, **kwargs):
            # A class of a registered object type makes an instance (see
            # _object_types); any other cannot be made from Python.
            if hooks.new is None or getattr(cls, "__pf_type__", None) is None:
                raise TypeError("packedfunc.Object cannot be created directly")
            return hooks.new(cls, args, kwargs)

        def __eq__(self, other):
            if not isinstance(other, Object):
                return NotImplemented
            return handle_of(self) == handle_of(other)

        def __hash__(self):
            return hash(handle_of(self))

        def __del__(self):
            try:
                handle = handle_of(self)  # idempotent, as Function.__del__
            except AttributeError:
                return  # its _wrap failed before it held anything
            if handle and not state.shutting_down:
                _set_handle(self, 0)
                if data_of(self):
                    _set_data(self, 0)
                    hooks.forget(self, handle)  # out of the identity map, first
                PFObjectFree(handle)
                # After the release: the holds that it destroyed are dropped,
                # the others go back to C.
                give_back(self)

    def __reduce__(self):
        raise TypeError("packedfunc.%s cannot be pickled" % type(self).__name__)

    def __init_subclass__(cls, **kwargs: object) -> None:  # annotated for mypy --strict on stubs
        super().__init_subclass__(**kwargs)
        release_after_own_del(cls, Object.__del__)


# The binding's own state of an Object, read and written through its base
# class's descriptors, never by attribute lookup: a registered type's
# fields and methods may have any name (a field "_handle" or "type_index"),
# and shadow these in its class. (Its own methods are looked up the same
# way: Object.handle, not obj.handle.)
_STATE = (_cext.ObjectBase if _cext else Object).__dict__
handle_of = _STATE["_handle"].__get__
code_of = _STATE["_code"].__get__
type_index_of = _STATE["type_index"].__get__
data_of = _STATE["_data"].__get__
if not _cext:
    _set_handle = _STATE["_handle"].__set__
    _set_data = _STATE["_data"].__set__

    def init_state(obj, handle, type_index, data):
        """obj (a new Object, with ctypes) given its state; returns it."""
        _set_handle(obj, handle)
        _STATE["type_index"].__set__(obj, type_index)
        _STATE["_code"].__set__(obj, OBJECT)  # the type code it passes to C with
        _STATE["_loan"].__set__(obj, None)
        _set_data(obj, data)
        return obj


if _cext:
    lock_instances = _cext.ObjectBase._lock_instances
    unlock_instances = _cext.ObjectBase._unlock_instances
else:
    # With ctypes: id(wrapper) -> [thread ident, depth] of the thread whose
    # call holds it (as objects.c's pf_instances_lock). The condition's
    # lock is held only over the table, never while user code runs.
    _owners = {}
    _owners_changed = threading.Condition(threading.Lock())

    def lock_instances(objs):
        """Waits until no other thread's call holds any of the instances
        `objs` (a list), then holds them all for this thread."""
        me = threading.get_ident()
        with _owners_changed:
            while any(o is not None and o[0] != me for o in map(_owners.get, map(id, objs))):
                _owners_changed.wait()
            for x in objs:
                o = _owners.get(id(x))
                if o is None:
                    _owners[id(x)] = [me, 1]
                else:
                    o[1] += 1

    def unlock_instances(objs):
        with _owners_changed:
            for x in objs:
                o = _owners[id(x)]
                o[1] -= 1
                if not o[1]:
                    del _owners[id(x)]
            _owners_changed.notify_all()


#: What _object_types sets with ctypes: new(cls, args, kwargs), an instance
#: of a registered type's class, and forget(obj, handle), which takes a
#: released instance out of the identity map.
hooks = types.SimpleNamespace(new=None, forget=None)

if _cext:
    _cext.ObjectBase._bind(PF_GET_API_BASE_ADDRESS)
    # At exit, after which nothing is released (see _library._at_exit,
    # which runs after this handler).
    atexit.register(_cext.ObjectBase._exiting)


class Tensor(Object):
    """A tensor object owned by packedfunc (kPFObjectTensor).

    Describes its memory with ``shape``, ``dtype`` (a DataType), ``device``
    (a Device), ``strides`` (in elements), ``ndim``, ``data_ptr``,
    ``read_only``, ``is_contiguous()``, ``numel()`` and ``size(dim)``. Supports the DLPack protocol
    (``__dlpack__``, ``__dlpack_device__``), so ``numpy.from_dlpack(t)``
    views its memory without a copy and keeps it alive: a consumer that
    passes ``max_version=(1, 0)`` or newer gets a DLPack 1.x capsule
    ("dltensor_versioned", with the read-only flag of a read-only tensor),
    any other an unversioned one ("dltensor"; a read-only tensor has none:
    BufferError). :func:`from_dlpack` makes one from any DLPack array. A
    function that returns a CPU tensor gives a numpy array directly when
    numpy is installed and has its dtype; any other tensor comes as this
    object.
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

    def numel(self):
        """The number of elements: the product of the shape (1 for a
        tensor of no dimensions)."""
        n = 1
        for extent in self.shape:
            n *= extent
        return n

    def size(self, dim=None):
        """The extent of dimension dim (an integer; negative counts from
        the last), or the whole shape without one. IndexError for a
        dimension the tensor does not have, TypeError for a dim that is
        not an integer (bools included)."""
        shape = self.shape
        if dim is None:
            return shape
        d = None
        if not isinstance(dim, bool):
            try:
                d = operator.index(dim)  # also refuses an __index__ that gives no int
            except TypeError:
                pass
        if d is None:
            raise TypeError("packedfunc: Tensor.size: the dimension must be an integer, not %s"
                            % type(dim).__name__)
        if not -len(shape) <= d < len(shape):
            raise IndexError("packedfunc: Tensor.size: dimension %d out of range (the tensor "
                             "has %d)" % (d, len(shape)))
        return shape[d]

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
        return device_from_c(d.device_type, d.device_id)

    @property
    def data_ptr(self):
        """The address of the first element (the DLTensor's data plus its
        byte_offset), as an int; valid while this tensor lives."""
        t = self._dltensor()
        return (t.data or 0) + t.byte_offset

    @property
    def read_only(self):
        """True when nothing may write the tensor's memory: it came from a
        DLPack 1.x export with the read-only flag (see object.h)."""
        self._dltensor()  # a released Tensor says so
        out = ctypes.c_int()
        check_call(PFTensorIsReadOnly(self._handle, byref(out)))
        return bool(out.value)

    def is_contiguous(self):
        """True when the elements are compact and in row-major order (the
        strides of dimensions of extent 1 do not matter, nor any stride of
        a tensor without elements)."""
        shape = self.shape
        if 0 in shape:
            return True
        return all(n == 1 or s == c for n, s, c in zip(shape, self.strides,
                                                       _compact_strides(shape)))

    def __repr__(self):
        if not self._handle:
            return "<packedfunc.Tensor (released)>"
        return "<packedfunc.Tensor shape=%s dtype=%s device=%s%s at 0x%x>" % (
            self.shape, self.dtype, self.device, " read-only" if self.read_only else "",
            self._handle)

    def __dlpack_device__(self):
        d = self._dltensor().device
        return (d.device_type, d.device_id)

    def __dlpack__(self, stream=None, *, max_version=None, dl_device=None, copy=None):
        """A DLPack capsule sharing this tensor's memory (the array API's
        protocol). `max_version`: the newest DLPack version the consumer
        reads, as (major, minor); (1, 0) or newer gets a versioned capsule.
        `stream` must be None (or -1) for CPU memory: packedfunc does not
        synchronize streams. `dl_device` other than the tensor's own, and
        `copy=True`, are a BufferError: packedfunc exports without a copy."""
        device = self.__dlpack_device__()
        versioned = _wants_versioned(max_version)
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError("packedfunc: Tensor.__dlpack__: the tensor is on device %r, not "
                              "dl_device %r, and is exported without a copy"
                              % (device, tuple(dl_device)))
        if copy:
            raise BufferError("packedfunc: Tensor.__dlpack__: copy=True is not supported (the "
                              "tensor is exported without a copy)")
        if device[0] == _KDL_CPU and stream is not None and stream != -1:
            raise ValueError("packedfunc: Tensor.__dlpack__: stream must be None for CPU memory, "
                             "not %r" % (stream,))
        managed = c_void_p()
        if versioned:
            check_call(PFTensorToDLPackVersioned(self._handle, byref(managed)))
            name = _NAME_VERSIONED
        else:
            try:
                check_call(PFTensorToDLPack(self._handle, byref(managed)))
            except ValueError as err:
                # Read-only, or padded sub-byte elements: an unversioned
                # managed tensor cannot say so (the array API's BufferError).
                raise BufferError("packedfunc: Tensor.__dlpack__: %s (the consumer passed no "
                                  "max_version of (1, 0) or newer)" % err) from None
            name = _NAME_DLTENSOR
        return _new_capsule(managed, name)

    def numpy(self):
        """A numpy array sharing this tensor's memory (no copy); read-only
        when the tensor is. TypeError when numpy has no dtype for it."""
        import numpy
        return _to_numpy(self, numpy)


def _wants_versioned(max_version):
    """Whether a consumer's max_version asks for a versioned capsule."""
    if max_version is None:
        return False
    try:
        major, _minor = (int(v) for v in max_version)
    except (TypeError, ValueError):
        raise TypeError("packedfunc: Tensor.__dlpack__: max_version must be a (major, minor) "
                        "tuple of ints, not %r" % (max_version,)) from None
    return major >= 1


def _compact_strides(shape):
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def from_dlpack(x):
    """A :class:`Tensor` viewing the memory of any DLPack array (a numpy
    array, or anything with ``__dlpack__``, of DLPack 0.x or 1.x), without a
    copy: the Tensor takes over x's export, and so keeps x's memory alive,
    and is read-only when the export is. A Tensor is returned as it is.
    Raises TypeError when x cannot export one."""
    if isinstance(x, Tensor):
        return x
    handle = tensor_object_from(x, "from_dlpack's argument")
    return (tensor_class.cls or Tensor)._adopt(handle.value, TENSOR_TYPE)


tensor_class = ClassChoice(Tensor, "set_tensor_class")


def set_tensor_class(cls):
    """Makes every tensor object that comes from C (a result, a callback's
    argument, a container item, a field) and every :func:`from_dlpack`
    result an instance of `cls`: :class:`Tensor` or a subclass of it (made
    without calling its ``__init__``), instead of the default, a numpy
    array where numpy can view the tensor and a Tensor elsewhere; None
    restores the default. Returns the class chosen before (None for the
    default). Process-wide and thread-safe. A borrowed ``DLTensor*`` that
    C lends a callback is no tensor object: it still arrives as a numpy
    array. TypeError for anything else."""
    return tensor_class.set(cls)


def get_tensor_class():
    """The class set_tensor_class chose, or None (the default)."""
    return tensor_class.cls


# ---------------------------------------------------------------------------
# DLPack capsules
# ---------------------------------------------------------------------------

@keep_forever
@ctypes.CFUNCTYPE(None, c_void_p)
def _capsule_destructor(capsule_addr):
    # Runs when a capsule from Tensor.__dlpack__ dies, without the
    # extension (whose destructor does the same in C). A consumer renames
    # the capsule ("used_...") and takes over the deleter; otherwise we run
    # it here. A consumer that fails drops the capsule with its own error
    # pending, under which no Python code can run: the error is taken
    # first, so that the deleter runs. A ctypes callback cannot return
    # with an exception pending, so the consumer then returns without one
    # (SystemError); raising the error at the end hands it to
    # sys.unraisablehook rather than to nowhere.
    pending = None
    try:
        PyErr_Occurred()
    except BaseException as err:
        pending = err
    try:
        if is_shutting_down():
            return
        # The capsule is being destroyed: use its address only, never a new
        # reference to it.
        if PyCapsule_IsValidAt(capsule_addr, b"dltensor"):
            managed_addr = PyCapsule_GetPointerAt(capsule_addr, b"dltensor")
            offset = _DELETER_OFFSET
        elif PyCapsule_IsValidAt(capsule_addr, b"dltensor_versioned"):
            managed_addr = PyCapsule_GetPointerAt(capsule_addr, b"dltensor_versioned")
            offset = _DELETER_OFFSET_VERSIONED
        else:
            return
        deleter = c_void_p.from_address(managed_addr + offset).value
        if deleter:
            DLPACK_DELETER(deleter)(managed_addr)
    except BaseException:  # never raise into the interpreter's dealloc
        pass
    if pending is not None:
        raise pending


def _new_capsule(managed, name):
    """A capsule named `name` of a managed tensor that Tensor.__dlpack__
    made: its destructor runs the deleter unless a consumer took it."""
    if _cext:
        return _cext.dlpack_capsule(managed.value, name is _NAME_VERSIONED)
    return PyCapsule_New(managed.value, ctypes.addressof(name),
                         ctypes.cast(_capsule_destructor, c_void_p).value)


# Types whose __dlpack__ takes no max_version (DLPack before 1.0: numpy
# 1.x), found by asking: they are asked without it from then on.
_legacy_types = set()
_LEGACY_TYPES_MAX = 64


def _cannot_export(x, pos, why):
    return TypeError("packedfunc: %s (%s) cannot be exported through DLPack: %s"
                     % (what(pos), type(x).__name__, why))


def _call_dlpack(x, pos):
    """x's DLPack capsule: x.__dlpack__(max_version=DLPACK_VERSION), or,
    for a producer that refuses the keyword, x.__dlpack__()."""
    t = type(x)
    if t not in _legacy_types:
        try:
            return x.__dlpack__(max_version=DLPACK_VERSION)
        except TypeError:
            pass  # no max_version before the 2023 array API: ask as it asked
        except Exception as err:
            raise _cannot_export(x, pos, err) from err
    try:
        capsule = x.__dlpack__()
    except Exception as err:
        capsule = _read_only_capsule(x, pos, err)
    if (t not in _legacy_types and hasattr(t, "__dlpack__")
            and len(_legacy_types) < _LEGACY_TYPES_MAX):
        _legacy_types.add(t)
    return capsule


def _read_only_capsule(x, pos, err):
    """A "dltensor_versioned" capsule with the read-only flag for a
    read-only numpy array, which numpy before 2.0 cannot export (DLPack 0.x
    cannot say read-only); for anything else, x's export error `err`, as
    _cannot_export says. A writable alias of x's memory, which keeps x
    alive, exports it unversioned to a tensor object, whose versioned
    export says read-only: all the deleters on the way are C's."""
    numpy = sys.modules.get("numpy")
    if numpy is None or not isinstance(x, numpy.ndarray) or x.flags.writeable:
        raise _cannot_export(x, pos, err) from err
    iface = dict(x.__array_interface__)
    iface["data"] = (iface["data"][0], False)
    holder = _ArrayInterface(iface)
    holder.owner = x
    alias = numpy.asarray(holder)
    try:
        legacy = alias.view(x.dtype).__dlpack__()
    except Exception as why:  # strides that DLPack cannot say, say
        raise _cannot_export(x, pos, why) from why
    writable = _take_over(legacy, PyCapsule_GetPointer(legacy, b"dltensor"), None)
    managed = c_void_p()
    try:
        check_call(PFTensorToDLPackVersioned(writable, byref(managed)))
    finally:
        PFObjectFree(writable)
    PFDLManagedTensorVersioned.from_address(managed.value).flags |= DLPACK_FLAG_READ_ONLY
    return _new_capsule(managed, _NAME_VERSIONED)


def dlpack_export(x, pos):
    """x's export, not taken over: (managed tensor address, DLTensor
    address, capsule, flags). flags is None for an unversioned export (a
    DLManagedTensor, which starts with its DLTensor), else the versioned
    one's flags. TypeError naming the argument (see _convert.what) when x
    cannot export one, or exports a DLPack major version this library does
    not read. The capsule keeps the export: its destructor frees it."""
    capsule = _call_dlpack(x, pos)
    if PyCapsule_IsValid(capsule, b"dltensor"):  # first: numpy 1.x's, the common case
        managed = PyCapsule_GetPointer(capsule, b"dltensor")
        return managed, managed, capsule, None
    if PyCapsule_IsValid(capsule, b"dltensor_versioned"):
        managed = PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        m = PFDLManagedTensorVersioned.from_address(managed)
        if m.version.major != DLPACK_VERSION[0]:
            # Its layout past the flags is unknown: not read, not taken
            # over (the capsule's own destructor frees it).
            raise _cannot_export(x, pos, "its DLPack version %d.%d is not supported (this "
                                 "library reads major version %d)"
                                 % (m.version.major, m.version.minor, DLPACK_VERSION[0]))
        return managed, managed + DL_TENSOR_OFFSET_VERSIONED, capsule, m.flags
    raise _cannot_export(x, pos, "its __dlpack__ returned %s, not a DLPack capsule named "
                         "'dltensor' or 'dltensor_versioned'" % type(capsule).__name__)


def _take_over(capsule, managed, flags):
    """A new tensor object (an owned c_void_p handle) that takes over an
    export: the capsule is renamed, as the protocol says, and the object
    runs the deleter, once (also when its creation fails)."""
    obj = c_void_p()
    if flags is None:
        PyCapsule_SetName(capsule, ctypes.addressof(_NAME_USED))
        check_call(PFTensorCreateFromDLPack(managed, byref(obj)))
    else:
        PyCapsule_SetName(capsule, ctypes.addressof(_NAME_USED_VERSIONED))
        check_call(PFTensorCreateFromDLPackVersioned(managed, byref(obj)))
    return obj


def tensor_object_from(x, pos):
    """A new tensor object (an owned c_void_p handle) that takes over x's
    DLPack export, and so keeps x alive; read-only when the export is."""
    managed, _, capsule, flags = dlpack_export(x, pos)
    return _take_over(capsule, managed, flags)


def _needs_object(flags, dltensor_addr):
    """Whether a versioned export with these flags must reach C as a tensor
    object rather than a borrowed DLTensor*, which C may write and which
    cannot say its elements are padded: when it is read-only, or of padded
    sub-byte elements."""
    if flags & DLPACK_FLAG_READ_ONLY:
        return True
    return bool(flags & DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED) and \
        DLTensor.from_address(dltensor_addr).dtype.bits < 8


# ---------------------------------------------------------------------------
# numpy views
# ---------------------------------------------------------------------------

# (type_code, bits, lanes) -> the numpy dtype that views it, or None.
_view_dtypes = {}
# TVM's bool before DLPack had kDLBool: a uint1 in one byte per element,
# still viewed as numpy's bool.
_LEGACY_BOOL = _parse("uint1")


def _view_dtype(fields, numpy):
    """The numpy dtype that views elements of this DLDataType, or None."""
    try:
        return _view_dtypes[fields]
    except KeyError:
        pass
    if fields == _LEGACY_BOOL:
        found = numpy.dtype(numpy.bool_)
    else:
        try:
            found = DataType(*fields).dtype
        except TypeError:
            found = None
    if len(_view_dtypes) < 256:
        _view_dtypes[fields] = found
    return found


def _to_numpy(tensor, numpy):
    """A numpy array viewing a tensor object's memory, no copy, writable
    unless the tensor is read-only; the array keeps the object (and so
    the C owner) alive. numpy's own from_dlpack would give a read-only
    array, which could not be passed back to C."""
    return _dltensor_view(tensor._dltensor(), tensor, numpy, tensor.read_only)


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


def _dltensor_view(t, owner, numpy, read_only=False):
    """A numpy array over a CPU DLTensor's memory; `owner` is kept alive by
    the array."""
    if t.device.device_type != _KDL_CPU:
        raise TypeError("packedfunc: a tensor on device type %d cannot be viewed from numpy"
                        % t.device.device_type)
    dt = t.dtype
    if dt.lanes != 1:
        raise TypeError("packedfunc: tensors with vector lanes are not supported")
    np_dtype = _view_dtype((dt.code, dt.bits, dt.lanes), numpy)
    if np_dtype is None:
        raise TypeError("packedfunc: unsupported tensor dtype %s (numpy has no dtype for it)"
                        % DataType(dt.code, dt.bits))
    itemsize = np_dtype.itemsize
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = (tuple(t.strides[i] * itemsize for i in range(t.ndim))
               if t.strides else None)
    iface = _ArrayInterface({"version": 3, "shape": shape, "typestr": np_dtype.str,
                             "data": ((t.data or 0) + t.byte_offset, bool(read_only)),
                             "strides": strides})
    iface.owner = owner
    arr = numpy.asarray(iface)
    # The interface's type strings cannot name a dtype that a library adds
    # (ml_dtypes' bfloat16 reads as raw bytes): a view of the same size can.
    return arr if arr.dtype == np_dtype else arr.view(np_dtype)


def _adopt_tensor(handle, type_index):
    cls = tensor_class.cls
    if cls is not None:
        return cls._adopt(handle, type_index)
    t = Tensor._adopt(handle, type_index)
    numpy = sys.modules.get("numpy")
    if numpy is None:
        try:
            import numpy
        except ImportError:
            return t
    dl = t._dltensor()
    if dl.device.device_type != _KDL_CPU or dl.dtype.lanes != 1:
        return t  # not host memory, or vector lanes: numpy cannot view it
    if _view_dtype((dl.dtype.code, dl.dtype.bits, 1), numpy) is None:
        return t  # an element type that numpy does not have (float8, bfloat16...)
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
    handle = handle_of(x)
    if not handle:
        raise released(x, pos)
    keep.append(Held(handle, x if type_index_of(x) >= OBJECT_TYPE_REGISTERED_BEGIN else None))
    return code_of(x), P.pack(handle)


def _encode_tensor(x, pos, keep):
    managed, dltensor, capsule, flags = dlpack_export(x, pos)
    if flags is not None and _needs_object(flags, dltensor):
        # C may write a DLTensor* argument: a read-only export crosses as a
        # read-only tensor object, which C refuses where it would write.
        t = Tensor._adopt(_take_over(capsule, managed, flags).value, TENSOR_TYPE)
        keep.append(t)
        return OBJECT, P.pack(t._handle)
    keep.append(capsule)
    keep.append(x)
    return TENSOR, P.pack(dltensor)


_encoded_types = set()  # the types given an exact encoder below
_ENCODED_TYPES_MAX = 64


def _encode_dlpack(x, pos, keep):
    if not hasattr(x, "__dlpack__"):
        return None
    t = type(x)
    if hasattr(t, "__dlpack__") and t not in _encoded_types and \
            len(_encoded_types) < _ENCODED_TYPES_MAX:
        # The fallbacks before this one look at the type alone, so every
        # value of this type gets here, and has __dlpack__: from now on
        # such values (numpy arrays) skip the fallbacks.
        _encoded_types.add(t)
        register_encoder((t,), _encode_tensor)
    return _encode_tensor(x, pos, keep)


if _cext:
    # The extension passes values of the types that speak DLPack before 1.0
    # (numpy 1.x arrays) as borrowed DLTensors itself (it asks them
    # __dlpack__() and takes only a "dltensor" capsule; values of any other
    # type come here), and keeps tensors_in_flight as the general path
    # does; and DataTypes and Devices by their fields (Objects by
    # ObjectBase's).
    _cext.set_hooks(tensor_types=_legacy_types, tensors_in_flight=tensors_in_flight,
                    dtype_type=DataType, device_type=Device)

register_encoder((Object, Tensor), encode_object)
register_fallback(RANK_HANDLES, Object, encode_object)
register_fallback(RANK_DLPACK, None, _encode_dlpack)
register_decoder(TENSOR, lambda mem, off, borrowed, copies: borrowed_tensor(
    P.unpack_from(mem, off)[0], copies))
register_object_type(None, Object._adopt)
register_object_type("tensor", _adopt_tensor)
_signature.register_annotation("tensor", _tensor_annotation)
