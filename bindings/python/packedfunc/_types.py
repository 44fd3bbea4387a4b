"""DataType and Device: Python faces of DLPack's DLDataType and DLDevice.

A data type's text is the library's: DataType parses and prints through
PFDataTypeFromString and PFDataTypeToString (dtype.h has the grammar), and
caches what they answered, so that no name of a type code is written here.
What a type is (integer, float, bool, handle) is read from the library's
canonical text, too.
"""
import ctypes
import enum
import operator
import sys
import threading

from ._ffi import PFDataTypeFromString, PFDataTypeToString, PFErrorClear, PFErrorGetMessage
from ._mirrors import DTYPE_STRING_MAX, DLDataType

# DLDeviceType (dlpack.h, DLPack 1.1): no entry point of the library names
# devices, so the binding keeps DLPack's own list, once: each device's
# DLPack name, the short name Device takes, and its number.
_DEVICES = (("kDLCPU", "cpu", 1), ("kDLCUDA", "cuda", 2), ("kDLCUDAHost", "cuda_host", 3),
            ("kDLOpenCL", "opencl", 4), ("kDLVulkan", "vulkan", 7), ("kDLMetal", "metal", 8),
            ("kDLVPI", "vpi", 9), ("kDLROCM", "rocm", 10), ("kDLROCMHost", "rocm_host", 11),
            ("kDLExtDev", "ext_dev", 12), ("kDLCUDAManaged", "cuda_managed", 13),
            ("kDLOneAPI", "oneapi", 14), ("kDLWebGPU", "webgpu", 15),
            ("kDLHexagon", "hexagon", 16), ("kDLMAIA", "maia", 17), ("kDLTrn", "trn", 18))
DLDeviceType = enum.IntEnum("DLDeviceType", [(name, number) for name, _, number in _DEVICES],
                            module=__name__)
DLDeviceType.__doc__ = """DLPack's device types by their names in dlpack.h (tvm-ffi's
DLDeviceType), an IntEnum: ``Device(DLDeviceType.kDLCUDA, 0)``,
``d.device_type == DLDeviceType.kDLCPU``."""
_DEVICE_TYPES = {short: number for _, short, number in _DEVICES}
_DEVICE_NAMES = {v: k for k, v in _DEVICE_TYPES.items()}

# What the library answered: text -> (type_code, bits, lanes), and the
# fields -> canonical text. Bounded, so that a program that parses
# endless distinct strings does not grow without end: past the bound the
# library is asked again (a few hundred nanoseconds).
_CACHE_MAX = 4096
_parsed = {}
_texts = {}
# The kinds that the predicates test, by the word that begins the
# canonical text ("int32" -> "int", "float8_e4m3fn" -> "float").
_INTEGER_KINDS = frozenset(("int", "uint"))
_FLOAT_KINDS = frozenset(("float", "bfloat"))


def _integer(value, what, expected="an int"):
    """value as an int: an int or any other integer type (with __index__,
    such as a numpy integer), never a float or a bool (numpy's either); else TypeError,
    "<what> must be <expected>, not <type>". What __index__ raises
    propagates."""
    numpy = sys.modules.get("numpy")
    if (isinstance(value, bool) or not hasattr(type(value), "__index__")
            or numpy is not None and isinstance(value, numpy.bool_)):
        raise TypeError("%s must be %s, not %s" % (what, expected, type(value).__name__))
    return operator.index(value)


def _c_error(where):
    """The library's error message, with the entry point's name replaced by
    `where`; the error is cleared."""
    msg = (PFErrorGetMessage() or b"").decode("utf-8", "replace")
    PFErrorClear()
    head, sep, rest = msg.partition(": ")
    return "%s: %s" % (where, rest if sep and head.startswith("PF") else msg)


def _parse(text):
    """(type_code, bits, lanes) for a data type's text, through the library;
    ValueError in its words for a text that is not one."""
    fields = _parsed.get(text)
    if fields is not None:
        return fields
    if "\0" in text or not text.isascii():
        raise ValueError("DataType: cannot parse %r as a data type (expected e.g. 'float32', "
                         "'int8x4', 'bool', 'bf16', 'float8_e4m3fn')" % text)
    out = DLDataType()
    if PFDataTypeFromString(text.encode("ascii"), ctypes.byref(out)) != 0:
        raise ValueError(_c_error("DataType"))
    fields = (out.code, out.bits, out.lanes)
    if len(_parsed) < _CACHE_MAX:
        _parsed[text] = fields
    return fields


def _canonical(fields):
    """The library's canonical text of (type_code, bits, lanes)."""
    text = _texts.get(fields)
    if text is not None:
        return text
    buf = ctypes.create_string_buffer(DTYPE_STRING_MAX)
    if PFDataTypeToString(DLDataType(*fields), buf, DTYPE_STRING_MAX) != 0:
        raise ValueError(_c_error("DataType"))  # pragma: no cover - lanes >= 1 always
    text = buf.value.decode("ascii")
    if len(_texts) < _CACHE_MAX:
        _texts[fields] = text
    return text


def _kind(fields):
    """The word that begins the canonical text of one lane: "int", "uint",
    "float", "bfloat", "complex", "handle", "bool" or "custom"."""
    text = _canonical((fields[0], fields[1], 1))
    end = 0
    while end < len(text) and text[end].isalpha():
        end += 1
    return text[:end]


def _numpy_fields(dt, numpy):
    """(type_code, bits, lanes) of a numpy dtype; TypeError when DLPack has
    no type for it (objects, strings, records, a byte order other than
    the machine's, long double). ml_dtypes' types (bfloat16, float8_*,
    int4...) are named as DLPack names them, and so are found by name."""
    if dt.fields is not None or dt.subdtype is not None or dt.kind not in "biufcV" or (
            dt.kind in "fc" and dt.itemsize > {"f": 8, "c": 16}[dt.kind]) or (
            dt.kind == "V" and dt.type is numpy.void):
        raise TypeError("DataType: numpy dtype %r has no DLPack data type" % dt.str)
    if not dt.isnative:
        raise TypeError("DataType: numpy dtype %r is not in the machine's byte order, which "
                        "DLPack cannot describe" % dt.str)
    try:
        return _parse(dt.name)
    except ValueError:
        raise TypeError("DataType: numpy dtype %r has no DLPack data type" % dt.str) from None


def _is_numpy_type(x, numpy):
    return isinstance(x, numpy.dtype) or (isinstance(x, type) and issubclass(x, numpy.generic))


class DataType:
    """A DLPack data type: ``DataType("float32")``, ``DataType("int8x4")``.

    Accepts the text of a data type as the library reads it (dtype.h has
    the grammar): a kind and its bits (``int8``, ``uint16``, ``float32``,
    ``bfloat16``, ``complex64``; ``handle`` is 64 bits), optionally ``x``
    and the lanes (``float32x4``); ``bool`` (DLPack's kDLBool, one byte,
    as numpy's DLPack export says; ``uint1`` is a 1-bit unsigned int); the
    short names with the width in bits (``i8``, ``u8``, ``f16``, ``f32``,
    ``bf16``: so ``i8`` is int8, which numpy spells ``i1``); every DLPack
    1.1 float by name (``float8_e4m3fn``, ``float6_e2m3fn``,
    ``float4_e2m1fn``...) or short name (``f8e4m3fn``, ``fp8_e5m2``), and
    ``float4_e2m1fnx2``. Also a numpy dtype or scalar type (and ml_dtypes'
    types), another DataType, an object with ``__dlpack_data_type__``
    (returning a ``(type_code, bits, lanes)`` tuple or anything else this
    accepts), or ``DataType(type_code, bits, lanes)``.

    ``str()`` gives the text it was made from (``str(DataType("f16"))`` is
    ``"f16"``), else the library's canonical text (``"float16"``); either
    way ``DataType(str(d)) == d``. A DataType equals another of the same
    type_code, bits and lanes, and a str that names the same type
    (``DataType("f16") == "float16"``); its hash is that of its canonical
    text, so it finds a dict key spelled canonically. ``numpy.dtype(d)``
    works for the types numpy has (``d.dtype`` is that numpy dtype).
    Immutable, hashable, picklable; passed to C as a kPFDataType value.
    """

    __slots__ = ("type_code", "bits", "lanes", "_text")

    def __init__(self, dtype, bits=None, lanes=1):
        text = None
        if bits is not None:
            code = dtype
            if not (type(code) is int and type(bits) is int and type(lanes) is int):
                code, bits, lanes = (_integer(code, "DataType: type_code"),
                                     _integer(bits, "DataType: bits"),
                                     _integer(lanes, "DataType: lanes"))
        elif isinstance(dtype, str):
            text = str.__str__(dtype)  # a subclass's value, not what its __str__ says
            code, bits, lanes = _parse(text)
        elif isinstance(dtype, DataType):
            code, bits, lanes, text = dtype.type_code, dtype.bits, dtype.lanes, dtype._text
        else:
            code, bits, lanes = _fields_of(dtype)
        if not (0 <= code < 256 and 0 <= bits < 256 and 0 < lanes < 65536):
            raise ValueError("DataType: out of range (type_code %d, bits %d, lanes %d)"
                             % (code, bits, lanes))
        object.__setattr__(self, "type_code", code)
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "lanes", lanes)
        object.__setattr__(self, "_text", text)

    @staticmethod
    def from_dlpack_data_type(fields):
        """The DataType of a DLPack ``(type_code, bits, lanes)`` tuple."""
        try:
            code, bits, lanes = fields
        except (TypeError, ValueError):
            raise TypeError("DataType: expected a (type_code, bits, lanes) tuple, not %r"
                            % (fields,)) from None
        return DataType(code, bits, lanes)

    @staticmethod
    def is_dtype(value):
        """True when DataType(value) would succeed."""
        try:
            DataType(value)
        except (TypeError, ValueError):
            return False
        return True

    def __setattr__(self, name, value):
        raise AttributeError("DataType is immutable")

    @property
    def itemsize(self):
        """The bytes of one element, all lanes together, rounded up
        (``int4x4`` is 2, ``float4_e2m1fnx2`` 1, ``uint1`` 1)."""
        return (self.bits * self.lanes + 7) // 8

    @property
    def is_bool(self):
        """Whether this is DLPack's bool (kDLBool), of any width."""
        return _kind(self._fields()) == "bool"

    @property
    def is_integer(self):
        """Whether this is a signed or unsigned integer (``uint1`` too)."""
        return _kind(self._fields()) in _INTEGER_KINDS

    @property
    def is_float(self):
        """Whether this is a binary float: float, bfloat, and the DLPack 1.1
        float8, float6 and float4 types at their widths."""
        return _kind(self._fields()) in _FLOAT_KINDS

    @property
    def is_handle(self):
        """Whether this is an opaque handle."""
        return _kind(self._fields()) == "handle"

    @property
    def dtype(self):
        """The numpy dtype of this type (what ``numpy.dtype(d)`` reads):
        one lane of a type numpy has (bool, ints, floats of 16 to 64 bits,
        complex; bfloat16 and the float8 types when ml_dtypes is
        imported). TypeError for any other; ImportError without numpy."""
        import numpy
        return _to_numpy(self, numpy)

    def with_lanes(self, lanes):
        """The same type with `lanes` lanes: ``DataType("f32").with_lanes(4)``
        is float32x4."""
        return DataType(self.type_code, self.bits, lanes)

    def _fields(self):
        return (self.type_code, self.bits, self.lanes)

    def __str__(self):
        text = self._text
        return text if text is not None else _canonical(self._fields())

    def __repr__(self):
        return "DataType(%r)" % str(self)

    def __eq__(self, other):
        if isinstance(other, DataType):
            return self._fields() == other._fields()
        if isinstance(other, str):
            try:
                return self._fields() == _parse(str.__str__(other))
            except ValueError:
                return False
        return NotImplemented

    def __hash__(self):
        return hash(_canonical(self._fields()))

    def __reduce__(self):
        return (DataType, (str(self),))


def _fields_of(x):
    """(type_code, bits, lanes) of what DataType() accepts besides a str, a
    DataType and the three fields."""
    hook = getattr(type(x), "__dlpack_data_type__", None)
    if hook is not None:
        return _hooked_fields(x, hook)
    numpy = sys.modules.get("numpy")
    if numpy is not None and _is_numpy_type(x, numpy):
        return _numpy_fields(numpy.dtype(x), numpy)
    # Python's own types and other libraries' dtype objects, by the name
    # they give: DataType(bool) is bool.
    name = getattr(x, "name", None) or getattr(x, "__name__", None)
    if not isinstance(name, str):
        raise TypeError("DataType: expected a str such as 'float32', not %s"
                        % type(x).__name__)
    return _parse(name)


def _hooked_fields(x, hook):
    """The fields that x.__dlpack_data_type__() gives: a (type_code, bits,
    lanes) tuple, or a value DataType() accepts that has no hook itself."""
    try:
        value = hook(x)
    except Exception as err:
        raise TypeError("DataType: %s.__dlpack_data_type__() failed: %s: %s"
                        % (type(x).__qualname__, type(err).__name__, err)) from err
    if isinstance(value, tuple):
        return DataType.from_dlpack_data_type(value)._fields()
    if hasattr(type(value), "__dlpack_data_type__") and not isinstance(value, DataType):
        raise TypeError("DataType: %s.__dlpack_data_type__() returned %s, which has "
                        "__dlpack_data_type__ itself (the hook is applied once)"
                        % (type(x).__qualname__, type(value).__qualname__))
    try:
        return DataType(value)._fields()
    except (TypeError, ValueError) as err:
        raise type(err)("DataType: %s.__dlpack_data_type__() returned %r, not a data "
                        "type: %s" % (type(x).__qualname__, value, err)) from None


def _to_numpy(dtype, numpy):
    """The numpy dtype of a DataType; TypeError when numpy has none."""
    fields = dtype._fields()
    if fields[2] == 1:
        name = _canonical(fields)
        try:
            found = numpy.dtype(name)
        except TypeError:
            # ml_dtypes adds types that numpy does not find by name.
            found = getattr(sys.modules.get("ml_dtypes"), name, None)
            found = None if found is None else numpy.dtype(found)
        # The name must mean the same to numpy ("float128" is numpy's long
        # double, not a binary128): it must map back.
        if found is not None:
            try:
                if _numpy_fields(found, numpy) == fields:
                    return found
            except TypeError:
                pass
    raise TypeError("DataType: %s has no numpy dtype" % _canonical(fields))


class Device:
    """A DLPack device: ``Device("cpu", 0)``, ``Device("cuda", 1)``,
    ``Device("cuda:1")``, ``Device(2, 1)`` (a DLDeviceType number; the
    numbers may be any integers with ``__index__``, not bools), or any
    object with ``__dlpack_device__`` (which gives ``(device_type,
    device_id)``), such as another Device.

    Passed to C as a kPFDevice value; immutable, hashable, picklable.
    """

    __slots__ = ("device_type", "device_id")

    def __init__(self, device_type, device_id=None):
        if isinstance(device_type, Device):
            device_type, device_id = device_type.device_type, device_type.device_id
        elif hasattr(type(device_type), "__dlpack_device__") and device_id is None:
            device_type, device_id = _hooked_device(device_type)
        if isinstance(device_type, str):
            name = device_type
            if ":" in name and device_id is None:
                name, _, idx = name.partition(":")
                try:
                    device_id = int(idx)
                except ValueError:
                    raise ValueError("Device: bad device id in %r" % device_type) from None
            if name not in _DEVICE_TYPES:
                raise ValueError("Device: unknown device type %r (known: %s)"
                                 % (name, ", ".join(sorted(_DEVICE_TYPES))))
            device_type = _DEVICE_TYPES[name]
        else:
            device_type = _integer(device_type, "Device: device_type", "a str or int")
        device_id = 0 if device_id is None else _integer(device_id, "Device: device_id")
        if not (-2**31 <= device_type < 2**31 and -2**31 <= device_id < 2**31):
            raise ValueError("Device: out of range (%d, %d)" % (device_type, device_id))
        object.__setattr__(self, "device_type", device_type)
        object.__setattr__(self, "device_id", device_id)

    def __setattr__(self, name, value):
        raise AttributeError("Device is immutable")

    @property
    def type_name(self):
        """The device type's name ("cpu", "cuda", ...)."""
        return _DEVICE_NAMES.get(self.device_type, str(self.device_type))

    def __dlpack_device__(self):
        """``(device_type, device_id)``, as DLPack arrays give theirs."""
        return (self.device_type, self.device_id)

    def __str__(self):
        return "%s:%d" % (self.type_name, self.device_id)

    def __repr__(self):
        # The call of the factory that makes it again (of the chosen class).
        return "device(type=%r, index=%d)" % (self.type_name, self.device_id)

    def __eq__(self, other):
        if not isinstance(other, Device):
            return NotImplemented
        return (self.device_type, self.device_id) == (other.device_type, other.device_id)

    def __hash__(self):
        return hash((self.device_type, self.device_id))

    def __reduce__(self):
        return (Device, (self.device_type, self.device_id))


def _hooked_device(x):
    """(device_type, device_id) from x.__dlpack_device__(): two ints."""
    try:
        value = type(x).__dlpack_device__(x)
    except Exception as err:
        raise TypeError("Device: %s.__dlpack_device__() failed: %s: %s"
                        % (type(x).__qualname__, type(err).__name__, err)) from err
    try:
        device_type, device_id = value
        return operator.index(device_type), operator.index(device_id)
    except (TypeError, ValueError):
        raise TypeError("Device: %s.__dlpack_device__() returned %r, not a (device_type, "
                        "device_id) pair of ints" % (type(x).__qualname__, value)) from None


class ClassChoice:
    """Which Python class values of one kind (tensors, devices) come from C
    as: None, the default, or `base` or a subclass of it that `setter`
    (the public function's name, for its errors) chose. The choice is one
    attribute, read once per value and replaced whole under a lock, so that
    it may change while other threads convert values."""

    def __init__(self, base, setter):
        self.base, self.setter, self.cls = base, setter, None
        self._lock = threading.Lock()

    def set(self, cls):
        if cls is not None and not (isinstance(cls, type) and issubclass(cls, self.base)):
            raise TypeError("%s: argument 'cls' must be packedfunc.%s or a subclass of it, or "
                            "None, not %r" % (self.setter, self.base.__name__, cls))
        with self._lock:
            old, self.cls = self.cls, cls
        return old


device_class = ClassChoice(Device, "set_device_class")


def set_device_class(cls):
    """Makes every Device that comes from C (a result, a callback's
    argument, a container item, a field, ``Tensor.device``) an instance of
    `cls`, a subclass of :class:`Device` (made without calling its
    ``__init__``), or again a Device with None. Returns the class chosen
    before (None for the default). Process-wide and thread-safe; a Device
    that Python makes stays what Python made. TypeError for anything
    else."""
    return device_class.set(cls)


def get_device_class():
    """The class set_device_class chose, or None (Device)."""
    return device_class.cls


def device(type, index=None):
    """A Device of the class :func:`set_device_class` chose (Device by
    default), made from what ``Device(type, index)`` takes: ``device("cuda",
    1)``, ``device("cuda:1")``, ``device(2, 1)``... (its errors too). A
    Device made with ``Device(...)`` stays a Device."""
    d = Device(type, index)
    return device_from_c(d.device_type, d.device_id)


def device_from_c(device_type, device_id):
    """A Device (of the chosen class) for a DLDevice that C gave."""
    cls = device_class.cls
    if cls is None:
        return Device(device_type, device_id)
    d = object.__new__(cls)
    object.__setattr__(d, "device_type", device_type)
    object.__setattr__(d, "device_id", device_id)
    return d
