"""Containers: the classes Array, Map and Shape.

An Array, Map or Shape coming from C is one of the classes below (list,
tuple and dict become them in _nesting). Each owns one reference (as
Object does), reads its items from C on access and converts each one then
(a nested container as Array or Map, a function as Function, str and bytes
copied out), and passes back to C as itself.
Everything here is private; the package re-exports the three classes.
"""
import collections.abc
import ctypes
import numbers
import operator
import struct
import typing

from . import _signature
from ._convert import (CODE, INT, INT64_MAX, INT64_MIN, STR, convert_value, decoders_get,
                       register_encoder, register_object_type)
from ._errors import check_call
from ._holds import track
from ._ffi import (PFArrayGetItem, PFArrayGetSize, PFMapGetItem, PFMapGetItemAt, PFMapGetSize,
                   PFShapeCreate, PFShapeGetData)
from ._library import OBJECT_TYPES
from ._object import Object, encode_object

c_void_p, byref, c_int64 = ctypes.c_void_p, ctypes.byref, ctypes.c_int64

ARRAY_TYPE = OBJECT_TYPES["array"]
MAP_TYPE = OBJECT_TYPES["map"]
SHAPE_TYPE = OBJECT_TYPES["shape"]
_MISSING = object()


# ---------------------------------------------------------------------------
# C -> Python: reading items
# ---------------------------------------------------------------------------
#
# Each read takes its own _Scratch from a free list for the moment of the
# read (list.pop and list.append are atomic under the GIL), so that no two
# threads ever share one.

# Where a _Scratch holds the item's PFValue, a key's PFValue, and their codes.
_VALUE_OFF, _KEY_OFF, _CODE_OFF, _KEY_CODE_OFF = 0, 8, 16, 20


class _Scratch:
    """The memory a reader writes one item into, and pointers to its parts
    for the C call."""

    __slots__ = ("buf", "value", "key", "code", "key_code")

    def __init__(self):
        self.buf = buf = (ctypes.c_char * 24)()
        self.value, self.key = byref(buf, _VALUE_OFF), byref(buf, _KEY_OFF)
        self.code, self.key_code = byref(buf, _CODE_OFF), byref(buf, _KEY_CODE_OFF)


_free_scratch = [_Scratch() for _ in range(4)]
_take_scratch = _free_scratch.pop
_give_scratch = _free_scratch.append


def _take():
    try:
        return _take_scratch()
    except IndexError:
        return _Scratch()


def _decode_item(buf, off, code, container):
    dec = decoders_get(code)
    if dec is None:
        raise TypeError("packedfunc: a %s holds a value of unsupported type code %d"
                        % (container, code))
    # Borrowed from the container: a handle gets a reference of its own.
    return dec(buf, off, True, None)


def _int_key(key):
    """The int under which a dict finds `key` (not an int itself), or None
    when no int equals it. A dict finds 2.0, Fraction(2), Decimal(2),
    2+0j and numpy's 2 under the key 2, as they equal it and hash alike;
    an int subclass (bool, IntEnum) by its value, whatever its methods
    say; 2.5, nan, a str or any non-number under no int."""
    if isinstance(key, int):
        return int.__index__(key)
    if isinstance(key, float):
        key = float.__float__(key)
        return int(key) if key.is_integer() else None  # False for inf and nan
    if not isinstance(key, numbers.Number):
        return None
    try:
        if getattr(key, "imag", 0) != 0:
            return None
        i = int(getattr(key, "real", key))
        return i if key == i and hash(key) == hash(i) else None
    except (TypeError, ValueError, ArithmeticError):  # nan, inf, sNaN: equal to no int
        return None


class _Container(Object):
    """What Array and Map share: the size, read once (a C container never
    changes), and tracking for the cycle collector."""

    __slots__ = ("_size",)
    _TYPE_INDEX = _GET_SIZE = None  # set by each subclass

    @classmethod
    def _adopt(cls, handle, type_index=None):
        self = Object._adopt.__func__(cls, handle,
                                      cls._TYPE_INDEX if type_index is None else type_index)
        n = c_int64()
        check_call(cls._GET_SIZE(handle, byref(n)))
        self._size = n.value
        track(self)  # it may hold Python objects that hold it (see _holds)
        return self

    def __len__(self):
        return self._size


class Array(_Container, collections.abc.Sequence):
    """An immutable sequence of values held by packedfunc (a C Array).

    A list or tuple passed to C arrives as one; an Array from C comes back
    as one. It behaves as a read-only list: ``len``, indexing (negative
    indices too), slicing (to a list), iteration, ``in``, ``index`` and
    ``count``; it equals a list, tuple or Array with equal items. Items are
    converted when read. ``Array(iterable)`` makes one.
    """

    __slots__ = ()
    _TYPE_INDEX, _GET_SIZE = ARRAY_TYPE, PFArrayGetSize

    def __new__(cls, iterable=()):
        return convert_value(list(iterable))

    def _item(self, i, sc):
        check_call(PFArrayGetItem(self._handle, i, sc.value, sc.code))
        buf = sc.buf
        return _decode_item(buf, _VALUE_OFF, CODE.unpack_from(buf, _CODE_OFF)[0], "Array")

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._size))]
        i = operator.index(index)
        n = self._size
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("Array index %d out of range (size %d)" % (index, n))
        sc = _take()
        try:
            return self._item(i, sc)
        finally:
            _give_scratch(sc)

    def __iter__(self):
        # One scratch for the whole iteration: it is this generator's alone
        # until it finishes (an abandoned one leaves it to the collector).
        sc = _take()
        for i in range(self._size):
            yield self._item(i, sc)
        _give_scratch(sc)

    def __eq__(self, other):
        if not isinstance(other, (Array, list, tuple)):
            return NotImplemented
        return len(other) == self._size and all(a == b for a, b in zip(self, other))

    __hash__ = None  # equal to lists, which are not hashable

    def __repr__(self):
        if not self._handle:
            return "<packedfunc.Array (released)>"
        return "[" + ", ".join(map(repr, self)) + "]"


class Map(_Container, collections.abc.Mapping):
    """An immutable mapping held by packedfunc (a C Map), with str or int
    keys in insertion order.

    A dict passed to C arrives as one; a Map from C comes back as one. It
    behaves as a read-only dict: ``m[key]`` (KeyError when absent), ``get``,
    ``in``, iteration over the keys, ``keys``, ``values``, ``items`` and
    ``len``; it equals a dict or Map with equal items. Values are converted
    when read. ``Map(mapping)`` makes one. A lookup finds what a dict
    would: a number equal to an int key (``2.0``, ``True``) finds it, a
    subclass of str or int looks up its value, and any other key (``2.5``,
    an unhashable value) is simply absent.
    """

    __slots__ = ()
    _TYPE_INDEX, _GET_SIZE = MAP_TYPE, PFMapGetSize

    def __new__(cls, mapping=()):
        return convert_value(dict(mapping))

    def _lookup(self, key):
        """The value of `key`, or _MISSING."""
        if isinstance(key, str):
            try:
                # str's own encode: a subclass's key is its value.
                data = str.encode(key, "utf-8", "surrogateescape")
            except UnicodeEncodeError:
                return _MISSING
            if b"\0" in data:
                return _MISSING  # no key of a Map holds a NUL
            raw, code = ctypes.cast(ctypes.c_char_p(data), c_void_p).value or 0, STR
        else:
            key = key if type(key) is int else _int_key(key)
            if key is None or not INT64_MIN <= key <= INT64_MAX:
                return _MISSING
            raw, code = key & 0xFFFFFFFFFFFFFFFF, INT
        sc = _take()
        found = ctypes.c_int()
        try:
            # `data` lives until here, so the key's pointer stays valid.
            check_call(PFMapGetItem(self._handle, raw, code, sc.value, sc.code, byref(found)))
            if not found.value:
                return _MISSING
            buf = sc.buf
            return _decode_item(buf, _VALUE_OFF, CODE.unpack_from(buf, _CODE_OFF)[0], "Map")
        finally:
            _give_scratch(sc)

    def __getitem__(self, key):
        value = self._lookup(key)
        if value is _MISSING:
            raise KeyError(key)
        return value

    def get(self, key, default=None):
        value = self._lookup(key)
        return default if value is _MISSING else value

    def __contains__(self, key):
        return self._lookup(key) is not _MISSING

    def _entries(self, want_value=True):
        for i in range(self._size):
            sc = _take()
            try:
                check_call(PFMapGetItemAt(self._handle, i, sc.key, sc.key_code, sc.value,
                                          sc.code))
                buf = sc.buf
                key = _decode_item(buf, _KEY_OFF, CODE.unpack_from(buf, _KEY_CODE_OFF)[0], "Map")
                value = (_decode_item(buf, _VALUE_OFF, CODE.unpack_from(buf, _CODE_OFF)[0], "Map")
                         if want_value else None)
            finally:
                _give_scratch(sc)
            yield key, value

    def __iter__(self):
        for key, _ in self._entries(False):
            yield key

    def items(self):
        return _ItemsView(self)

    def __eq__(self, other):
        if not isinstance(other, collections.abc.Mapping):
            return NotImplemented
        if len(other) != self._size:
            return False
        for key, value in self._entries():
            theirs = other.get(key, _MISSING)
            if theirs is _MISSING or not theirs == value:
                return False
        return True

    __hash__ = None  # equal to dicts, which are not hashable

    def __repr__(self):
        if not self._handle:
            return "<packedfunc.Map (released)>"
        return "{" + ", ".join("%r: %r" % kv for kv in self._entries()) + "}"


class _ItemsView(collections.abc.ItemsView):
    __slots__ = ()

    def __iter__(self):
        return self._mapping._entries()


class Shape(Object, collections.abc.Sequence):
    """An immutable tuple of ints held by packedfunc (a C Shape): a
    tensor's shape or strides.

    Behaves as a tuple of ints: ``len``, indexing, slicing (to a tuple),
    iteration; it equals, and hashes as, the tuple of the same ints.
    ``Shape(dims)`` makes one from any iterable of ints (each in int64).
    """

    __slots__ = ("_dims",)

    def __new__(cls, dims=()):
        dims = tuple(operator.index(d) for d in dims)
        try:
            data = struct.pack("=%dq" % len(dims), *dims)
        except struct.error:
            bad = next(d for d in dims if not INT64_MIN <= d <= INT64_MAX)
            raise OverflowError("packedfunc.Shape: dimension %d does not fit in int64"
                                % bad) from None
        out = c_void_p()
        check_call(PFShapeCreate(data if dims else None, len(dims), byref(out)))
        return cls._adopt(out.value)

    @classmethod
    def _adopt(cls, handle, type_index=SHAPE_TYPE):
        self = Object._adopt.__func__(cls, handle, type_index)
        self._dims = ()  # a handle is owned from here on, even if reading fails
        dims, ndim = ctypes.POINTER(c_int64)(), c_int64()
        check_call(PFShapeGetData(handle, byref(dims), byref(ndim)))
        # Read once: the values never change, and a tuple reads fastest.
        self._dims = tuple(dims[:ndim.value])
        return self

    def __len__(self):
        return len(self._dims)

    def __getitem__(self, index):
        return self._dims[index]

    def __iter__(self):
        return iter(self._dims)

    def __eq__(self, other):
        if isinstance(other, Shape):
            return self._dims == other._dims
        if isinstance(other, tuple):
            return self._dims == other
        return NotImplemented

    def __hash__(self):
        return hash(self._dims)

    def __repr__(self):
        return "Shape(%s)" % ", ".join(map(str, self._dims))


register_encoder((Array, Map, Shape), encode_object)
register_object_type("array", Array._adopt)
register_object_type("map", Map._adopt)
register_object_type("shape", Shape._adopt)

# The grammar's object types all pass as kPFObjectHandle: each names its
# own Python type. Arguments take what converts to it.
_signature.register_type_annotation(
    "array", lambda result: Array if result else typing.Union[list, tuple, Array])
_signature.register_type_annotation(
    "map", lambda result: Map if result else typing.Union[dict, Map])
_signature.register_type_annotation("shape", lambda result: Shape)
_signature.register_type_annotation("object", lambda result: Object if result else object)
# The C library's mutable List and Dict: plain Objects until this binding
# has classes of its own for them.
_signature.register_type_annotation("list", lambda result: Object)
_signature.register_type_annotation("dict", lambda result: Object)
