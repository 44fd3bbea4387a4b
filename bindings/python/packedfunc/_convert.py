"""Values across the boundary: one encoder table, one decoder table.

Python -> C: ``encode(x)`` gives a type code and the 8 bytes of a PFValue.
It looks the encoder up by ``type(x)``; for a type that is not in the table
(a subclass, an array with ``__dlpack__``, any callable) it tries the
fallbacks in the order of their ranks. C -> Python: ``decode`` reads a
PFValue by its type code, and a handle of an object by the object's type
index. Call results and callback arguments go through the same decoders;
they differ in ownership (a result is a new reference, an argument is
borrowed, so the decoder takes its own) and in what happens to a borrowed
DLTensor (see _object.borrowed_tensor).

Each kind of value registers itself: the module that defines Function,
Object, Tensor, Module or callbacks adds its encoder and decoder here, so a
new type code is one registration.

The call frames that pack_args writes into are in _frames. Everything here
is private.
"""
import ctypes
import operator
import struct
import sys
import threading

from ._errors import check_call
from ._frames import VALS_OFF
from ._ffi import PFObjectGetTypeIndex, PFObjectRetain
from ._library import OBJECT_TYPES, TYPE_CODE_NAMES, TYPE_CODES
from ._mirrors import PFByteArray
from ._types import DataType, Device, device_from_c

c_void_p, byref = ctypes.c_void_p, ctypes.byref

if ctypes.sizeof(c_void_p) != 8:  # pragma: no cover
    raise ImportError("packedfunc: only 64-bit platforms are supported")

# Type codes, by name, as the library numbers them.
(INT, FLOAT, BOOL, NULL, HANDLE, DTYPE, DEVICE, TENSOR, STR, BYTES, FUNC, MODULE,
 OBJECT) = (TYPE_CODES[name] for name in ("int", "float", "bool", "null", "handle", "dtype",
                                          "device", "tensor", "str", "bytes", "function",
                                          "module", "object"))
HANDLE_CODES = (FUNC, MODULE, OBJECT)  # the codes whose value is a reference

Q = struct.Struct("=q")
D = struct.Struct("=d")
P = struct.Struct("=Q")  # a pointer, as an unsigned 64-bit value
_DT = struct.Struct("=BBH4x")
_DEV = struct.Struct("=ii")
_BA = struct.Struct("=QQ")  # PFByteArray {data, size}
CODE = struct.Struct("=i")
INT64_MIN, INT64_MAX = -2**63, 2**63 - 1

# A read-only ctypes view of the whole address space, so that callbacks can
# read the C caller's argument arrays with one struct.unpack_from instead
# of building ctypes objects per call. It reads only what PFFuncCall's
# contract says is there.
MEMORY = (ctypes.c_char * sys.maxsize).from_address(0)


# ---------------------------------------------------------------------------
# Python -> C: the encoder table
# ---------------------------------------------------------------------------

# The `pos` of a value that is not a call's argument names it in messages:
# a callback's return value, convert's value.
RESULT = "the callback's result"
CONVERT = "the value given to convert"


def what(pos):
    """How an error message names a value: its argument position (an int),
    or the text `pos` itself (RESULT, CONVERT, ...)."""
    return "argument %d" % pos if type(pos) is int else pos


def unsupported(x, pos):
    """The TypeError for a value that cannot cross."""
    return TypeError("packedfunc: %s has unsupported type %s" % (what(pos), type(x).__qualname__))


_encoders = {}  # exact type -> encode(x, pos, keep) -> (code, 8 bytes)
_encoders_get = _encoders.get
_converters = {}  # exact type -> convert(x), for types with their own
# (rank, kind, encode, convert) in rank order: encode(x, pos, keep) for a
# value that is an instance of `kind` (a class or a tuple of classes), or,
# for kind None, for any value, returning None when x is not its kind;
# convert likewise (None: the value converts to itself).
_fallbacks = []

# The ranks of the fallbacks, for values whose exact type has no encoder.
# Earlier ranks win: a Tensor has __dlpack__ but passes as an object; an
# int subclass with __dlpack__ passes as a tensor. The fallbacks before
# RANK_DLPACK decide by the value's type alone, which lets the DLPack
# fallback give a type whose values it takes an exact encoder.
RANK_HANDLES = 10      # subclasses of Function and Object
RANK_CTYPES = 20       # subclasses of ctypes.c_void_p
RANK_NUMPY = 30        # numpy scalars and dtypes
RANK_PROTOCOLS = 35    # __packedfunc_value__, __dlpack_data_type__, __dlpack_device__
RANK_DLPACK = 40       # anything with __dlpack__
RANK_CONTAINERS = 45   # list, tuple, dict and their subclasses
RANK_SUBCLASSES = 50   # subclasses of int, float, str, bytes...
RANK_INDEX = 55        # anything else with __index__, as an int
RANK_CALLABLES = 60    # any other callable
RANK_OPAQUE = 70       # anything else, as an opaque host object


def register_encoder(types, encode, convert=None):
    """Encode values of exactly these types with encode(x, pos, keep),
    which returns (type code, 8 value bytes) and appends to `keep` what
    must outlive the call. packedfunc.convert(x) gives convert(x), or, with
    convert None, x itself (after encode checked that it can cross)."""
    for t in types:
        _encoders[t] = encode
        if convert is not None:
            _converters[t] = convert


def register_fallback(rank, kind, encode, convert=None):
    """At `rank`, encode a value whose exact type has no encoder with
    encode(x, pos, keep) if it is an instance of `kind`; with kind None,
    try encode on any value, which returns None when x is not its kind.
    `convert` is packedfunc.convert's counterpart (see register_encoder;
    with kind None it too returns None when x is not its kind)."""
    _fallbacks.append((rank, kind, encode, convert))
    _fallbacks.sort(key=lambda entry: entry[0])


def encode(x, pos, keep):
    """(code, 8 value bytes) for one argument. Objects that must outlive the
    call are appended to `keep`. Raises TypeError/OverflowError/ValueError
    naming the argument position (0-based), or the value that the text
    `pos` names (see what)."""
    enc = _encoders_get(type(x))
    if enc is not None:
        return enc(x, pos, keep)
    for entry in _fallbacks:
        kind = entry[1]
        if kind is None:
            out = entry[2](x, pos, keep)
            if out is not None:
                return out
        elif isinstance(x, kind):
            return entry[2](x, pos, keep)
    raise unsupported(x, pos)


def convert_value(x):
    """What x crosses to C as, on the Python side: the entry that would
    encode x converts it, or x crosses as itself and is returned (after
    its encoder checked it: an int outside int64 still raises)."""
    t = type(x)
    enc = _encoders_get(t)
    if enc is not None:
        conv = _converters.get(t)
        if conv is not None:
            return conv(x)
        enc(x, CONVERT, [])
        return x
    for _, kind, fallback, conv in _fallbacks:
        if kind is None:
            if conv is not None:
                out = conv(x)
            else:
                out = None if fallback(x, CONVERT, []) is None else x
            if out is not None:
                return out
        elif isinstance(x, kind):
            if conv is not None:
                return conv(x)
            fallback(x, CONVERT, [])
            return x
    raise unsupported(x, CONVERT)


def _encode_int(x, pos, keep):
    if not INT64_MIN <= x <= INT64_MAX:
        raise OverflowError("packedfunc: %s: int %d does not fit in int64" % (what(pos), x))
    return INT, Q.pack(x)


def _encode_str(x, pos, keep):
    if "\0" in x:
        raise ValueError("packedfunc: %s: str contains a NUL character "
                         "(pass bytes for binary data)" % what(pos))
    try:
        data = x.encode("utf-8")
    except UnicodeEncodeError as err:
        # kPFStr is UTF-8: a lone surrogate (also one that decoding invalid
        # UTF-8 from C produced) is refused, never sent as is.
        raise ValueError("packedfunc: %s: str contains a lone surrogate (%r at "
                         "index %d), which UTF-8 cannot encode (pass bytes for binary "
                         "data)" % (what(pos), x[err.start], err.start)) from None
    keep.append(data)
    return STR, P.pack(_bytes_address(data))


def _bytes_address(b):
    """The address of a bytes object's data (kept alive by the caller)."""
    return ctypes.cast(b, c_void_p).value or 0


def _encode_bytes(x, pos, keep):
    """A PFByteArray for bytes-like x, kept alive through `keep`."""
    if isinstance(x, bytes):
        data, size = x, len(x)
        addr = _bytes_address(x)
    else:
        mv = memoryview(x)
        size = mv.nbytes
        if not mv.readonly and mv.c_contiguous and size:
            data = (ctypes.c_char * size).from_buffer(mv.cast("B"))
            addr = ctypes.addressof(data)
        else:
            data = mv.tobytes()
            addr = _bytes_address(data)
    ba = PFByteArray(addr, size)
    keep.append(data)
    keep.append(ba)
    return BYTES, P.pack(ctypes.addressof(ba))


def _encode_handle(x, pos, keep):
    return HANDLE, P.pack(x.value or 0)


register_encoder((int,), _encode_int)
register_encoder((float,), lambda x, pos, keep: (FLOAT, D.pack(x)))
register_encoder((bool,), lambda x, pos, keep: (BOOL, Q.pack(x)))
register_encoder((type(None),), lambda x, pos, keep: (NULL, Q.pack(0)))
register_encoder((str,), _encode_str)
register_encoder((bytes, bytearray, memoryview), _encode_bytes)
register_encoder((DataType,), lambda x, pos, keep: (DTYPE, _DT.pack(x.type_code, x.bits,
                                                                   x.lanes)))
register_encoder((Device,), lambda x, pos, keep: (DEVICE, _DEV.pack(x.device_type,
                                                                    x.device_id)))
register_encoder((c_void_p,), _encode_handle)
register_fallback(RANK_CTYPES, c_void_p, _encode_handle)


def _encode_numpy(x, pos, keep):
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        if isinstance(x, numpy.generic):  # numpy scalars: as Python scalars
            return encode(x.item(), pos, keep)
        if isinstance(x, numpy.dtype):
            return encode(_named(DataType, x, pos), pos, keep)
    return None


def _convert_numpy(x):
    # A numpy dtype converts to its DataType; a numpy scalar crosses as
    # itself (as the Python scalar it holds).
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        if isinstance(x, numpy.generic):
            _encode_numpy(x, CONVERT, [])
            return x
        if isinstance(x, numpy.dtype):
            return _named(DataType, x, CONVERT)
    return None


def _named(make, x, pos):
    """make(x) (DataType or Device), its error naming the value."""
    try:
        return make(x)
    except (TypeError, ValueError) as err:
        raise type(err)("packedfunc: %s: %s" % (what(pos), err)) from None


# ---- the conversion hooks ---------------------------------------------------
#
# A class says how its values cross with one of these methods, looked up on
# the class (as Python looks up __index__):
#   __packedfunc_value__(self)  -> any value that can cross, which crosses
#                                  (and converts) in its place; a result
#                                  that has this hook itself goes through
#                                  it again, up to MAX_HOOK_CHAIN hooks;
#   __dlpack_data_type__(self)  -> a (type_code, bits, lanes) tuple or
#                                  anything DataType() takes: a kPFDataType;
#   __dlpack_device__(self)     -> (device_type, device_id): a kPFDevice,
#                                  for a class without __dlpack__ (an array
#                                  with both is a tensor).
# Both backends reach them here: the extension hands every value of a type
# it does not know to these tables.

#: The most __packedfunc_value__ hooks one value goes through, each applied
#: to the previous one's result; a longer chain is a TypeError.
MAX_HOOK_CHAIN = 64

_hooks_active = threading.local()  # .ids: the values whose hook is being applied
_hooked_types = set()  # the types given an exact encoder below
_HOOKED_TYPES_MAX = 64


def hook_ids():
    """The ids of the values whose __packedfunc_value__ result is being
    converted on this thread (a result that leads back to one is refused)."""
    ids = getattr(_hooks_active, "ids", None)
    if ids is None:
        ids = _hooks_active.ids = set()
    return ids


def value_hook_chain(x, pos):
    """(v, chain): x.__packedfunc_value__(), then the hook of each result
    that has the hook itself, until one that has not: v. `chain` lists the
    values whose hook was applied, x first; the caller holds it, and has
    their ids in hook_ids(), until the conversion of v ends (a hook may drop
    the only other reference to what it returned). TypeError naming `pos`
    when a hook returns its own value, a result leads back to a value whose
    hook is being applied (a cycle), or the chain is longer than
    MAX_HOOK_CHAIN; an exception a hook raises propagates as it is."""
    ids = hook_ids()
    chain = [x]
    value = x
    while True:
        if id(value) in ids:
            raise _leads_back(value, pos)
        result = type(value).__packedfunc_value__(value)
        if result is value:
            raise TypeError("packedfunc: %s (%s): __packedfunc_value__() returned the value "
                            "itself; it must return a value that can cross in its place"
                            % (what(pos), type(value).__qualname__))
        if not hasattr(type(result), "__packedfunc_value__"):
            return result, chain
        for passed in chain:
            if passed is result:
                raise _leads_back(result, pos)
        if len(chain) == MAX_HOOK_CHAIN:
            raise TypeError("packedfunc: %s (%s): __packedfunc_value__() results that have the "
                            "hook again go through it at most %d times; this chain is longer"
                            % (what(pos), type(x).__qualname__, MAX_HOOK_CHAIN))
        chain.append(result)
        value = result


def _leads_back(value, pos):
    return TypeError("packedfunc: %s (%s): its __packedfunc_value__() result leads back to the "
                     "value itself, which cannot cross to C" % (what(pos), type(value).__qualname__))


def hook_result_name(name, chain):
    """How messages name the result of the last hook of `chain` (see
    value_hook_chain) on the value named `name`."""
    return "%s (%s.__packedfunc_value__()'s result)" % (name, type(chain[-1]).__qualname__)


def _through_value_hook(x, pos, keep, then):
    """then(v, where) for v, chain = value_hook_chain(x, pos), where naming v
    in messages as the hook's result; the chain's ids are in hook_ids()
    meanwhile, and `keep` holds the chain."""
    value, chain = value_hook_chain(x, pos)
    keep.append(chain)
    where = hook_result_name(what(pos), chain)
    ids = hook_ids()
    for v in chain:
        ids.add(id(v))
    try:
        return then(value, where)
    finally:
        for v in chain:
            ids.discard(id(v))


def _hook_of(t):
    """Which hook crosses values of type t: "value", "dtype", "device" or
    None."""
    if hasattr(t, "__packedfunc_value__"):
        return "value"
    if hasattr(t, "__dlpack_data_type__"):
        return "dtype"
    if hasattr(t, "__dlpack_device__") and not hasattr(t, "__dlpack__"):
        return "device"
    return None


def _encode_hooked(x, pos, keep):
    hook = _hook_of(type(x))
    if hook == "value":
        return _through_value_hook(x, pos, keep, lambda v, where: encode(v, where, keep))
    if hook == "dtype":
        return encode(_named(DataType, x, pos), pos, keep)
    if hook == "device":
        return encode(_named(Device, x, pos), pos, keep)
    return None


def _convert_hooked(x):
    hook = _hook_of(type(x))
    if hook == "value":
        return _through_value_hook(x, CONVERT, [], lambda v, where: convert_value(v))
    if hook == "dtype":
        return _named(DataType, x, CONVERT)
    if hook == "device":
        return _named(Device, x, CONVERT)
    return None


def _encode_protocols(x, pos, keep):
    t = type(x)
    if _hook_of(t) is None:
        return None
    if t not in _hooked_types and len(_hooked_types) < _HOOKED_TYPES_MAX:
        # Decided by the type alone: from now on its values skip the
        # fallbacks.
        _hooked_types.add(t)
        register_encoder((t,), _encode_hooked, _convert_hooked)
    return _encode_hooked(x, pos, keep)


def plain_value(x):
    """The value of an instance of a subclass of int, float or str as its
    base type holds it (an IntEnum member's int), never what the
    subclass's __int__, __index__, __float__ or __str__ say: the base
    type's own methods copy the value out. Anything else is returned as
    it is (bool cannot be subclassed)."""
    if isinstance(x, int):
        return x if type(x) is int or type(x) is bool else int.__index__(x)
    if isinstance(x, float):
        return float.__float__(x)
    if isinstance(x, str):
        return str.__str__(x)
    return x


def _encode_subclass(x, pos, keep):
    # Subclasses of the plain types (IntEnum, str and float subclasses...)
    # cross as their value; bytes-like values are read through the buffer
    # protocol, which a subclass cannot change.
    if isinstance(x, (int, float, str)):
        return encode(plain_value(x), pos, keep)
    return _encode_bytes(x, pos, keep)


def _encode_index(x, pos, keep):
    # Integers of other libraries (anything with __index__; int itself and
    # its subclasses, bool and numpy integers have their own encoders).
    if not hasattr(type(x), "__index__"):
        return None
    try:
        i = operator.index(x)
    except TypeError:  # __index__ refused: not an integer after all
        return None
    return _encode_int(i, pos, keep)


register_fallback(RANK_NUMPY, None, _encode_numpy, _convert_numpy)
register_fallback(RANK_PROTOCOLS, None, _encode_protocols, _convert_hooked)
register_fallback(RANK_INDEX, None, _encode_index)
register_fallback(RANK_SUBCLASSES, (int, float, str, bytes, bytearray, memoryview),
                  _encode_subclass)


def released(x, pos):
    """The ValueError of argument x, released."""
    return ValueError("packedfunc: %s: the %s was released" % (what(pos), type(x).__name__))


# DLTensor* we passed to C in calls still in progress -> the Python object,
# so that a tensor that comes back (an echo, a callback argument) is the
# same object, with no copy.
tensors_in_flight = {}


def pack_args(args, fr, keep, tensors, label=None):
    """Encode `args` into the Frame `fr` (see _frames); (DLTensor address, object) pairs
    of tensor arguments are appended to `tensors`, flat. label(i) names argument i in
    errors (default: its position)."""
    mv = fr.mem
    codes_off = fr.codes_off
    for i, x in enumerate(args):
        code, raw = encode(x, i if label is None else label(i), keep)
        if code == TENSOR:
            tensors.append(P.unpack(raw)[0])
            tensors.append(x)
        off = VALS_OFF + 8 * i
        mv[off:off + 8] = raw
        mv[codes_off + 4 * i:codes_off + 4 * i + 4] = CODE.pack(code)
    fr.plan = None  # the codes no longer match any plan


# ---------------------------------------------------------------------------
# C -> Python: the decoder table
# ---------------------------------------------------------------------------

_decoders = {}  # type code -> decode(mem, off, borrowed, copies)
# The table's lookup, for hot paths that call the decoder themselves
# (decode adds a call level, a tenth of a fast call's time).
decoders_get = _decoders.get


def register_decoder(code, decode_fn):
    """Decode values of type code `code` with decode_fn(mem, off, borrowed,
    copies), which reads the PFValue at `off` in the buffer `mem` (see
    decode)."""
    _decoders[code] = decode_fn


def decode(mem, off, code, borrowed=False, copies=None):
    """A Python value for the PFValue at offset `off` of `mem` (a call
    frame, or MEMORY for an address) whose type code is `code`.

    `borrowed` is false for a call's result, whose handles are new
    references that the Python value takes over, and true for a callback's
    argument, whose handles the caller only lends: the Python value takes a
    reference of its own. `copies` is None for a result; for a callback's
    arguments it collects the private copies of borrowed DLTensors, to be
    written back when the callback returns (see _object.borrowed_tensor).
    """
    dec = decoders_get(code)
    if dec is None:
        if borrowed:
            raise TypeError("packedfunc: a callback got an argument of unsupported type code %d"
                            % code)
        raise TypeError("packedfunc: the function returned a value of unsupported type code "
                        "%d (%s)" % (code, TYPE_CODE_NAMES.get(code, "extension")))
    return dec(mem, off, borrowed, copies)


def _decode_bytes(mem, off, borrowed, copies):
    data, size = _BA.unpack_from(MEMORY, P.unpack_from(mem, off)[0])
    return ctypes.string_at(data, size) if size else b""


register_decoder(INT, lambda mem, off, borrowed, copies: Q.unpack_from(mem, off)[0])
register_decoder(FLOAT, lambda mem, off, borrowed, copies: D.unpack_from(mem, off)[0])
register_decoder(BOOL, lambda mem, off, borrowed, copies: Q.unpack_from(mem, off)[0] != 0)
register_decoder(NULL, lambda mem, off, borrowed, copies: None)
register_decoder(STR, lambda mem, off, borrowed, copies: ctypes.string_at(
    P.unpack_from(mem, off)[0]).decode("utf-8", "surrogateescape"))
register_decoder(BYTES, _decode_bytes)
register_decoder(DTYPE, lambda mem, off, borrowed, copies: DataType(*_DT.unpack_from(mem, off)))
register_decoder(DEVICE, lambda mem, off, borrowed, copies: device_from_c(
    *_DEV.unpack_from(mem, off)))
register_decoder(HANDLE, lambda mem, off, borrowed, copies: c_void_p(
    P.unpack_from(mem, off)[0] or None))


# ---- objects, by object type index ------------------------------------------

_adopters = {}  # object type index -> adopt(handle, type_index); None: any other


def register_object_type(name, adopt):
    """Wrap objects of the object type `name` (as PFObjectTypeName gives
    it; None for every type without its own) with adopt(handle,
    type_index), which takes over a new reference."""
    _adopters[None if name is None else OBJECT_TYPES[name]] = adopt


def adopt_object(handle):
    """Wrap a new reference to an object of any type."""
    ti = ctypes.c_uint32()
    check_call(PFObjectGetTypeIndex(handle, byref(ti)))
    ti = ti.value
    adopt = _adopters.get(ti)
    if adopt is None:
        adopt = _adopters[None]
    return adopt(handle, ti)


def _decode_object(mem, off, borrowed, copies):
    handle = P.unpack_from(mem, off)[0]
    if borrowed:
        # A borrowed handle: take our own. (A tensor object arrives as a
        # numpy view that holds this reference.)
        check_call(PFObjectRetain(handle))
    return adopt_object(handle)


register_decoder(OBJECT, _decode_object)
register_decoder(MODULE, _decode_object)
