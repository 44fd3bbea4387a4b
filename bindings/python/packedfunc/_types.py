"""DataType and Device: Python faces of DLPack's DLDataType and DLDevice."""
import operator
import re

# DLDataTypeCode (dlpack.h, DLPack 0.6).
_DTYPE_CODES = {"int": 0, "uint": 1, "float": 2, "handle": 3, "bfloat": 4, "complex": 5}
_DTYPE_NAMES = {v: k for k, v in _DTYPE_CODES.items()}
# Matched with fullmatch: "$" would also accept a final newline.
_DTYPE_RE = re.compile(r"(int|uint|float|handle|bfloat|complex)([0-9]+)?(?:x([0-9]+))?")
# Short names give the width in bits, as the long ones do: "i8" is int8
# (numpy's "i1"), "f16" float16. The width is required.
_SHORT_RE = re.compile(r"(i|u|f|bf)([0-9]+)(?:x([0-9]+))?")
_SHORT_KINDS = {"i": "int", "u": "uint", "f": "float", "bf": "bfloat"}

# DLDeviceType (dlpack.h, DLPack 0.6).
_DEVICE_TYPES = {"cpu": 1, "cuda": 2, "cuda_host": 3, "opencl": 4, "vulkan": 7, "metal": 8,
                 "vpi": 9, "rocm": 10, "rocm_host": 11, "ext_dev": 12, "cuda_managed": 13,
                 "oneapi": 14, "webgpu": 15, "hexagon": 16}
_DEVICE_NAMES = {v: k for k, v in _DEVICE_TYPES.items()}


def _integer(value, what):
    """An int field of DataType(type_code, bits, lanes): an int (or another
    integer type, such as a numpy integer), never a float or a bool."""
    if isinstance(value, bool):
        raise TypeError("DataType: %s must be an int, not bool" % what)
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError("DataType: %s must be an int, not %s"
                        % (what, type(value).__name__)) from None


class DataType:
    """A DLPack data type: ``DataType("float32")``, ``DataType("int8x4")``.

    Accepts a name (``int``/``uint``/``float``/``bfloat``/``complex`` followed
    by the bit width and optionally ``x`` and the lane count; ``bool`` is
    ``uint1``; ``handle`` is a 64-bit opaque pointer), a short name with the
    width in bits (``i8``, ``i32``, ``u8``, ``f16``, ``f32``, ``f64``,
    ``bf16``: so ``i8`` is int8, which numpy spells ``i1``), a numpy dtype
    or scalar type, another DataType, or ``DataType(type_code, bits,
    lanes)``. ``bits``, ``lanes``, ``type_code`` and ``itemsize`` describe
    it. Passed to C as a kPFDataType value; immutable and hashable.
    """

    __slots__ = ("type_code", "bits", "lanes")

    def __init__(self, dtype, bits=None, lanes=1):
        if bits is not None:
            code, bits, lanes = (_integer(dtype, "type_code"), _integer(bits, "bits"),
                                 _integer(lanes, "lanes"))
        elif isinstance(dtype, DataType):
            code, bits, lanes = dtype.type_code, dtype.bits, dtype.lanes
        else:
            if not isinstance(dtype, str):
                # numpy dtypes and scalar types spell their names the same way.
                name = getattr(dtype, "name", None) or getattr(dtype, "__name__", None)
                if not isinstance(name, str):
                    raise TypeError("DataType: expected a str such as 'float32', not %s"
                                    % type(dtype).__name__)
                dtype = "uint1" if name in ("bool", "bool_") else name
            if dtype == "bool":
                dtype = "uint1"
            m = _DTYPE_RE.fullmatch(dtype)
            if m is None:
                short = _SHORT_RE.fullmatch(dtype)
                if short is None:
                    raise ValueError("DataType: cannot parse %r (expected e.g. 'float32', "
                                     "'int8', 'uint1', 'float16x4', 'f32', 'i8')" % dtype)
                kind = short.group(1)
                m = _DTYPE_RE.fullmatch(_SHORT_KINDS[kind] + dtype[len(kind):])
            code = _DTYPE_CODES[m.group(1)]
            bits = int(m.group(2)) if m.group(2) else (64 if m.group(1) == "handle" else 32)
            lanes = int(m.group(3)) if m.group(3) else 1
        if not (0 <= code < 256 and 0 <= bits < 256 and 0 < lanes < 65536):
            raise ValueError("DataType: out of range (type_code %d, bits %d, lanes %d)"
                             % (code, bits, lanes))
        object.__setattr__(self, "type_code", code)
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "lanes", lanes)

    def __setattr__(self, name, value):
        raise AttributeError("DataType is immutable")

    @property
    def itemsize(self):
        """The bytes of one element, all lanes together (rounded up: bool,
        one bit, takes one byte)."""
        return (self.bits * self.lanes + 7) // 8

    def with_lanes(self, lanes):
        """The same type with `lanes` lanes: ``DataType("f32").with_lanes(4)``
        is float32x4."""
        return DataType(self.type_code, self.bits, lanes)

    def __str__(self):
        if (self.type_code, self.bits, self.lanes) == (1, 1, 1):
            return "bool"
        base = "%s%d" % (_DTYPE_NAMES.get(self.type_code, "custom[%d]" % self.type_code),
                         self.bits)
        return base if self.lanes == 1 else "%sx%d" % (base, self.lanes)

    def __repr__(self):
        return "DataType(%r)" % str(self)

    def __eq__(self, other):
        if isinstance(other, str):
            try:
                other = DataType(other)
            except ValueError:
                return False
        if not isinstance(other, DataType):
            return NotImplemented
        return (self.type_code, self.bits, self.lanes) == (other.type_code, other.bits,
                                                           other.lanes)

    def __hash__(self):
        return hash((self.type_code, self.bits, self.lanes))

    def __reduce__(self):
        return (DataType, (self.type_code, self.bits, self.lanes))


class Device:
    """A DLPack device: ``Device("cpu", 0)``, ``Device("cuda", 1)``,
    ``Device("cuda:1")`` or ``Device(2, 1)`` (a DLDeviceType number).

    Passed to C as a kPFDevice value; immutable and hashable.
    """

    __slots__ = ("device_type", "device_id")

    def __init__(self, device_type, device_id=None):
        if isinstance(device_type, Device):
            device_type, device_id = device_type.device_type, device_type.device_id
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
        elif isinstance(device_type, bool) or not isinstance(device_type, int):
            raise TypeError("Device: device_type must be a str or int, not %s"
                            % type(device_type).__name__)
        device_id = 0 if device_id is None else device_id
        if isinstance(device_id, bool) or not isinstance(device_id, int):
            raise TypeError("Device: device_id must be an int, not %s"
                            % type(device_id).__name__)
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

    def __str__(self):
        return "%s:%d" % (self.type_name, self.device_id)

    def __repr__(self):
        return "Device(%r, %d)" % (self.type_name, self.device_id)

    def __eq__(self, other):
        if not isinstance(other, Device):
            return NotImplemented
        return (self.device_type, self.device_id) == (other.device_type, other.device_id)

    def __hash__(self):
        return hash((self.device_type, self.device_id))

    def __reduce__(self):
        return (Device, (self.device_type, self.device_id))
