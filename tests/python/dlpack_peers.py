"""DLPack producers and consumers written with ctypes, for the tests.

numpy 1.24 (Debian's) speaks only the unversioned protocol, so the DLPack
1.x side of packedfunc is tested against these: a Producer that exports a
numpy array's memory as the array API says (a "dltensor_versioned" capsule
when the consumer passes max_version >= (1, 0), "dltensor" otherwise),
with flags of its choosing, and `take`, a consumer of any capsule. The
structs are declared here from dlpack.h, not borrowed from the package,
so that a layout error on either side shows.

Every export has a serial number (its manager_ctx). EXPORTS keeps the
exports whose deleter has not run, counts deleter calls for exports it
does not know (a second call of a deleter: the tests check the protocol's
"exactly once"), and records each capsule's name when it dies.
"""
import ctypes
from ctypes import c_char_p, c_int, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64
from ctypes import c_void_p, py_object

# ---- dlpack.h (DLPack 1.1) ----------------------------------------------------

kDLCPU = 1
FLAG_READ_ONLY = 1 << 0
FLAG_IS_COPIED = 1 << 1
FLAG_IS_SUBBYTE_TYPE_PADDED = 1 << 2


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", c_int), ("device_id", c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(c_int64)),
                ("strides", ctypes.POINTER(c_int64)), ("byte_offset", c_uint64)]


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", c_uint32), ("minor", c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p), ("deleter", c_void_p),
                ("flags", c_uint64), ("dl_tensor", DLTensor)]


DELETER = ctypes.CFUNCTYPE(None, c_void_p)
CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, c_void_p)

# ---- the Python C API's capsules ------------------------------------------------


def _py(name, restype, argtypes):
    f = ctypes.pythonapi[name]
    f.restype, f.argtypes = restype, argtypes
    return f


PyCapsule_New = _py("PyCapsule_New", py_object, [c_void_p, c_void_p, c_void_p])
PyCapsule_IsValid = _py("PyCapsule_IsValid", c_int, [py_object, c_char_p])
PyCapsule_GetPointer = _py("PyCapsule_GetPointer", c_void_p, [py_object, c_char_p])
PyCapsule_SetName = _py("PyCapsule_SetName", c_int, [py_object, c_void_p])
PyCapsule_GetName = _py("PyCapsule_GetName", c_char_p, [py_object])
# By address, for a capsule's destructor (the capsule is being destroyed).
_GetNameAt = _py("PyCapsule_GetName", c_char_p, [c_void_p])
_GetPointerAt = _py("PyCapsule_GetPointer", c_void_p, [c_void_p, c_char_p])

# Capsule names must outlive their capsules.
NAMES = {n: ctypes.create_string_buffer(n) for n in
         (b"dltensor", b"used_dltensor", b"dltensor_versioned", b"used_dltensor_versioned")}


def name_of(capsule):
    return PyCapsule_GetName(capsule)


# ---- producer -------------------------------------------------------------------

class _Exports:
    """What the Producers exported and what became of it."""

    def __init__(self):
        self.serial = 0
        self.live = {}       # serial -> (struct, (shape, strides, array))
        self.stray = 0       # deleter calls for no live export
        self.capsule_names = []  # the name of each Producer capsule as it died
        self.record = True   # False: record no names and no max_version (leak checks)

    def add(self, record):
        self.serial += 1
        self.live[self.serial] = record
        return self.serial

    def alive(self):
        return len(self.live)


EXPORTS = _Exports()


def _delete(managed_addr, versioned):
    cls = DLManagedTensorVersioned if versioned else DLManagedTensor
    serial = cls.from_address(managed_addr).manager_ctx or 0
    if EXPORTS.live.pop(serial, None) is None:
        EXPORTS.stray += 1


@DELETER
def _deleter_versioned(addr):
    _delete(addr, True)


@DELETER
def _deleter_legacy(addr):
    _delete(addr, False)


@CAPSULE_DESTRUCTOR
def _capsule_destructor(capsule_addr):
    # The protocol's destructor: the deleter runs only for a capsule that
    # no consumer took over (renamed).
    name = _GetNameAt(capsule_addr)
    if EXPORTS.record:
        EXPORTS.capsule_names.append(name)
    if name in (b"dltensor", b"dltensor_versioned"):
        managed = _GetPointerAt(capsule_addr, name)
        versioned = name == b"dltensor_versioned"
        cls = DLManagedTensorVersioned if versioned else DLManagedTensor
        deleter = cls.from_address(managed).deleter
        if deleter:
            DELETER(deleter)(managed)


_DESTRUCTOR_ADDR = ctypes.cast(_capsule_destructor, c_void_p).value


class Producer:
    """Exports `array` (a CPU numpy array, kept alive by each export).

    versioned: whether it speaks DLPack 1.x (a versioned capsule for a
    consumer that passes max_version >= (1, 0)). read_only sets the
    read-only flag (and refuses an unversioned export, as the array API
    says). version, flags, dtype (a (code, bits, lanes) tuple) and strides
    (in elements) override what the export says. max_versions records what consumers
    passed.
    """

    def __init__(self, array, versioned=True, read_only=False, version=(1, 1), flags=0,
                 dtype=None, always_legacy=False, strides=None):
        self.array = array
        self.versioned = versioned
        self.read_only = read_only
        self.version = version
        self.flags = flags | (FLAG_READ_ONLY if read_only else 0)
        self.dtype = dtype
        self.always_legacy = always_legacy
        self.strides = strides
        self.max_versions = []
        self._templates = {}

    def __dlpack_device__(self):
        return (kDLCPU, 0)

    def __dlpack__(self, stream=None, *, max_version=None, dl_device=None, copy=None):
        if EXPORTS.record:
            self.max_versions.append(max_version)
        if (self.versioned and not self.always_legacy and max_version is not None
                and max_version[0] >= 1):
            return self._export(True)
        if self.read_only:
            raise BufferError("Producer: a read-only export needs DLPack 1.x")
        return self._export(False)

    def _template(self, versioned):
        """The bytes of this producer's managed tensor, all but its serial;
        made once, so that an export costs little (the leak checks make
        hundreds of thousands)."""
        cached = self._templates.get(versioned)
        if cached is not None:
            return cached
        a = self.array
        shape = (c_int64 * max(a.ndim, 1))(*a.shape)
        strides = (c_int64 * max(a.ndim, 1))(*(self.strides if self.strides is not None else
                                                 (s // a.itemsize for s in a.strides)))
        if versioned:
            m = DLManagedTensorVersioned()
            m.version = DLPackVersion(*self.version)
            m.flags = self.flags
            m.deleter = ctypes.cast(_deleter_versioned, c_void_p)
        else:
            m = DLManagedTensor()
            m.deleter = ctypes.cast(_deleter_legacy, c_void_p)
        t = m.dl_tensor
        t.data = a.ctypes.data
        t.device = DLDevice(kDLCPU, 0)
        t.ndim = a.ndim
        t.dtype = DLDataType(*(self.dtype or _numpy_dltype(a.dtype)))
        t.shape = ctypes.cast(shape, ctypes.POINTER(c_int64))
        t.strides = ctypes.cast(strides, ctypes.POINTER(c_int64))
        cached = (type(m), bytes(m), type(m).manager_ctx.offset, (shape, strides, a))
        self._templates[versioned] = cached
        return cached

    def _export(self, versioned):
        cls, raw, ctx_offset, owned = self._template(versioned)
        m = cls.from_buffer_copy(raw)
        m.manager_ctx = EXPORTS.add((m, owned))
        name = NAMES[b"dltensor_versioned" if versioned else b"dltensor"]
        return PyCapsule_New(ctypes.addressof(m), ctypes.addressof(name), _DESTRUCTOR_ADDR)


class LegacyProducer(Producer):
    """A producer from before the 2023 array API: __dlpack__ takes no
    max_version (a TypeError if given one, as numpy 1.x's)."""

    def __dlpack__(self, stream=None):
        return self._export(False)


def _numpy_dltype(dt):
    code = {"i": 0, "u": 1, "f": 2, "c": 5, "b": 6}[dt.kind]
    return (code, dt.itemsize * 8, 1)


# ---- consumer -------------------------------------------------------------------

class Taken:
    """A managed tensor taken over from a capsule, as a consumer takes it:
    the capsule is renamed "used_..."; release() runs the deleter."""

    def __init__(self, capsule):
        if PyCapsule_IsValid(capsule, b"dltensor_versioned"):
            self.versioned = True
            self.addr = PyCapsule_GetPointer(capsule, b"dltensor_versioned")
            self.managed = DLManagedTensorVersioned.from_address(self.addr)
            PyCapsule_SetName(capsule, ctypes.addressof(NAMES[b"used_dltensor_versioned"]))
        elif PyCapsule_IsValid(capsule, b"dltensor"):
            self.versioned = False
            self.addr = PyCapsule_GetPointer(capsule, b"dltensor")
            self.managed = DLManagedTensor.from_address(self.addr)
            PyCapsule_SetName(capsule, ctypes.addressof(NAMES[b"used_dltensor"]))
        else:
            raise TypeError("not a DLPack capsule: %r" % name_of(capsule))
        self.released = False

    @property
    def dl_tensor(self):
        return self.managed.dl_tensor

    @property
    def flags(self):
        return self.managed.flags if self.versioned else None

    @property
    def version(self):
        v = self.managed.version
        return (v.major, v.minor)

    def data_ptr(self):
        t = self.dl_tensor
        return (t.data or 0) + t.byte_offset

    def release(self):
        assert not self.released
        self.released = True
        DELETER(self.managed.deleter)(self.addr)
