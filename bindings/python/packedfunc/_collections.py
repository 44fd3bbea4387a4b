"""Containers: the classes Array, Map and Shape, and what List and Dict
share with them.

An Array, Map or Shape coming from C is one of the classes below (list,
tuple and dict become them in _nesting). Each owns one reference (as
Object does) and passes back to C as itself. A C Array or Map never
changes, and the values it gives Python are owned copies (a str is a new
str, a host object the very Python object): so a wrapper reads all its
items with one bulk call (PFArrayGetItems, PFMapGetItems) the first time it
needs them, and keeps the values. A value that holds a C reference of its
own (a Function, an Object, a nested container) is not kept but read again
at each access, so that no kept Python wrapper adds to the C reference
counts that the cycle collection relies on (see _holds): its place holds
_HOLE. Single reads (``arr[i]``, ``m[key]``) of a large container read one
item in C until they add up to an eighth of its size.

With the compiled backend the fast paths (len, indexing, iteration, ``in``,
the kept values) are the extension's (_cext.ArrayBase, _cext.MapBase);
with ctypes, the classes _ArrayBase and _MapBase here do the same in
Python, with the same results and errors. Everything here is private; the
package re-exports the three classes.
"""
import collections.abc
import ctypes
import functools
import numbers
import operator
import struct
import threading
import typing

from . import _signature
from ._backend import cext as _cext
from ._convert import (CODE, HANDLE, INT, INT64_MAX, INT64_MIN, MEMORY, P, STR, convert_value,
                       decoders_get, encode, register_encoder, register_object_type)
from ._errors import check_call
from ._ffi import (PFArrayGetItems, PFArrayGetSize, PFMapGetItem, PFMapGetItemAt,
                   PFMapGetItems, PFMapGetSize, PFShapeCreate, PFShapeGetData)
from ._function import Function
from ._holds import track
from ._library import OBJECT_TYPES
from ._object import Object, encode_object, handle_of
from ._serialize import ByJSON

c_void_p, byref, c_int64 = ctypes.c_void_p, ctypes.byref, ctypes.c_int64

ARRAY_TYPE = OBJECT_TYPES["array"]
MAP_TYPE = OBJECT_TYPES["map"]
SHAPE_TYPE = OBJECT_TYPES["shape"]
_MISSING = object()
_HOLE = object()  # in a kept tuple: a value read again at each access


# ---------------------------------------------------------------------------
# Keys, values and errors, as both backends convert them
# ---------------------------------------------------------------------------

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


def map_key(key):
    """The str or int that a Map key equal to `key` is, as a dict would
    find it (a subclass of str or int by its value), or None when no key
    of a Map (str or int) can equal it."""
    if isinstance(key, str):
        return str.__str__(key)
    return _int_key(key)


def decode_item(addr, code, borrowed, container):
    """The Python value of the PFValue at `addr` that a container gave
    (`borrowed`: a handle gets a reference of its own; else its new
    reference is taken over). The extension's hook for the types it does
    not convert itself."""
    dec = decoders_get(code)
    if dec is None:
        raise TypeError("packedfunc: a %s holds a value of unsupported type code %d"
                        % (container, code))
    return dec(MEMORY, addr, borrowed, None)


def encode_item(x, pos):
    """(code, the PFValue's 8 bytes as an int, what must outlive the C
    call) for a value given to a List or Dict: the extension's hook for the
    types it does not convert itself. Converted as an Array's item is (a
    DLPack array becomes a tensor object: a container cannot keep a
    borrowed DLTensor)."""
    from ._nesting import _encode_item  # it imports this module
    keep = []
    code, raw = _encode_item(x, pos, [], keep)
    return code, P.unpack(raw)[0], keep


def keeps(x, code):
    """Whether a container wrapper may keep the value x it read (of type
    code `code`): not one that holds a C reference of its own (see the
    module's docstring), nor a ctypes handle (which can be changed)."""
    return code != HANDLE and not isinstance(x, (Object, Function))


raise_last_error = functools.partial(check_call, -1)


def _live(self):
    """The handle of a container that an operation uses, read after the
    operation converted its arguments (whose __index__ or hooks may have
    released it: x.__del__()); ValueError once released."""
    handle = handle_of(self)
    if not handle:
        raise ValueError("packedfunc: the %s was released" % type(self).__name__)
    return handle


def not_equal(self, other):
    """__ne__ of a container: the negation of its __eq__ (the compiled
    base's own comparison, by handle, would answer otherwise)."""
    eq = self.__eq__(other)
    return eq if eq is NotImplemented else not eq


_repr_active = threading.local()  # .handles: the containers being repr'd


def guarded_repr(self, fill, body):
    """body() as the repr of container self, or `fill` ("(...)") where
    self recurs inside it: a List's items are new wrappers of the same
    handle, so the guard is on the handle, not the wrapper."""
    active = _repr_active.__dict__.setdefault("handles", set())
    handle = handle_of(self)
    if handle in active:
        return fill
    active.add(handle)
    try:
        return body()
    finally:
        active.discard(handle)


def _index_type_error(what, index):
    return TypeError("%s indices must be integers or slices, not %s"
                     % (what, type(index).__name__))



def concat(make, mine, other, other_first):
    """``make(mine + other)`` (``other + mine`` when other_first), the
    ``+`` of an Array or List: other is a list, tuple, Array or List, any
    other operand gets NotImplemented, so that Python raises its TypeError
    (or tries the other operand's __add__/__radd__)."""
    from ._mutable import List
    if not isinstance(other, (list, tuple, Array, List)):
        return NotImplemented
    other = list(other)
    return make(other + mine if other_first else mine + other)

# ---------------------------------------------------------------------------
# ctypes: reading items in bulk
# ---------------------------------------------------------------------------

def read_items(handle, start, count, container, flags=None):
    """The values of `count` items of an Array (or a snapshot) from
    `start`, as a new list, read with one PFArrayGetItems call. With
    `flags` (a list), appends whether each value may be kept (keeps)."""
    if count <= 0:
        return []
    buf = (ctypes.c_char * (12 * count))()
    check_call(PFArrayGetItems(handle, start, count, buf, byref(buf, 8 * count)))
    codes = struct.unpack_from("=%di" % count, buf, 8 * count)
    if codes.count(INT) == count:  # all ints: one unpack
        if flags is not None:
            flags.extend([True] * count)
        return list(struct.unpack_from("=%dq" % count, buf))
    out = []
    for i, code in enumerate(codes):
        x = _decode_at(buf, 8 * i, code, container)
        out.append(x)
        if flags is not None:
            flags.append(keeps(x, code))
    return out


def _decode_at(buf, off, code, container):
    """The value of the PFValue at `off` in `buf`, borrowed from a
    container (a handle gets a reference of its own)."""
    dec = decoders_get(code)
    if dec is None:
        raise TypeError("packedfunc: a %s holds a value of unsupported type code %d"
                        % (container, code))
    return dec(buf, off, True, None)


def read_all(handle, container):
    """Every value of an Array (or snapshot), as a new list."""
    n = c_int64()
    check_call(PFArrayGetSize(handle, byref(n)))
    return read_items(handle, 0, n.value, container)


class _ArrayBase(Object):
    """The ctypes backend's fast paths of Array (see _cext.ArrayBase)."""

    # The size; the kept values (a tuple, _HOLE where read at each access)
    # and how many holes; single reads so far.
    __slots__ = ("_size", "_items", "_holes", "_reads")

    @classmethod
    def _adopt(cls, handle, type_index=ARRAY_TYPE):
        self = Object._adopt.__func__(cls, handle, type_index)
        self._items, self._holes, self._reads = None, 0, 0
        n = c_int64()
        self._size = 0  # a handle is owned from here on, even if reading fails
        check_call(PFArrayGetSize(handle, byref(n)))
        self._size = n.value
        track(self)  # it may hold Python objects that hold it (see _holds)
        return self

    def __len__(self):
        return self._size

    def _read(self):
        flags = []
        fresh = read_items(_live(self), 0, self._size, "Array", flags)
        if self._items is None:
            items = list(fresh)
            holes = 0
            for i, keep in enumerate(flags):
                if not keep:
                    items[i] = _HOLE
                    holes += 1
            self._items, self._holes = tuple(items), holes
        return fresh

    def _values(self):
        """Every value: the kept tuple when it has no hole, else a new
        list."""
        if self._items is None or self._holes:
            fresh = self._read()
            if self._holes:
                return fresh
        return self._items

    def _item(self, i):
        if self._items is None:
            self._reads += 1
            if self._reads * 8 >= self._size:
                self._read()
        if self._items is not None:
            x = self._items[i]
            if x is not _HOLE:
                return x
        return read_items(_live(self), i, 1, "Array")[0]

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list(self._values()[index])
        if not hasattr(type(index), "__index__"):
            raise _index_type_error("Array", index)
        i = index.__index__()
        n = self._size
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError("Array index %d out of range (size %d)" % (i, n))
        return self._item(j)

    def __iter__(self):
        return iter(self._values())

    def __contains__(self, x):
        return x in self._values()


class _MapBase(Object):
    """The ctypes backend's fast paths of Map (see _cext.MapBase)."""

    # The size; the kept keys (tuple), (key, value) pairs (tuple, _HOLE
    # for a value read at each access), key -> position (dict), holes and
    # single reads.
    __slots__ = ("_size", "_keys_kept", "_pairs_kept", "_index", "_holes", "_reads")

    @classmethod
    def _adopt(cls, handle, type_index=MAP_TYPE):
        self = Object._adopt.__func__(cls, handle, type_index)
        self._keys_kept = self._pairs_kept = self._index = None
        self._holes, self._reads = 0, 0
        n = c_int64()
        self._size = 0
        check_call(PFMapGetSize(handle, byref(n)))
        self._size = n.value
        track(self)
        return self

    def __len__(self):
        return self._size

    def _fill(self):
        n = self._size
        keys, values, flags = [], [], []
        if n:
            buf = (ctypes.c_char * (24 * n))()  # keys, values, key codes, value codes
            check_call(PFMapGetItems(_live(self), 0, n, buf, byref(buf, 16 * n),
                                     byref(buf, 8 * n), byref(buf, 20 * n)))
            codes = struct.unpack_from("=%di" % (2 * n), buf, 16 * n)
            for i in range(n):
                kc, vc = codes[i], codes[n + i]
                keys.append(_decode_at(buf, 8 * i, kc, "Map"))
                x = _decode_at(buf, 8 * (n + i), vc, "Map")
                values.append(x if keeps(x, vc) else _HOLE)
        if self._index is None:
            self._keys_kept = tuple(keys)
            self._pairs_kept = tuple(zip(keys, values))
            self._index = {k: i for i, k in enumerate(keys)}
            self._holes = sum(x is _HOLE for x in values)  # not count(): == may raise

    def _value_at(self, i):
        x = self._pairs_kept[i][1]
        if x is not _HOLE:
            return x
        buf = (ctypes.c_char * 24)()
        check_call(PFMapGetItemAt(_live(self), i, buf, byref(buf, 16), byref(buf, 8),
                                  byref(buf, 20)))
        return _decode_at(buf, 8, CODE.unpack_from(buf, 20)[0], "Map")

    def _lookup(self, key):
        """The value of `key`, or _MISSING."""
        k = key if type(key) is str or type(key) is int else map_key(key)
        if k is None:
            return _MISSING
        if self._index is None:
            self._reads += 1
            if self._reads * 8 < self._size:
                # A large Map read at a few keys: looked up in C.
                found = self._lookup_in_c(k)
                if found is not None:
                    return found[0]
            self._fill()
        i = self._index.get(k)
        return _MISSING if i is None else self._value_at(i)

    def _lookup_in_c(self, k):
        """(value,) or (_MISSING,) from one PFMapGetItem, or None when the
        key must be looked up in the kept index (a str that UTF-8 cannot
        encode strictly, or with a NUL)."""
        if type(k) is str:
            try:
                data = k.encode("utf-8")
            except UnicodeEncodeError:
                return None
            if b"\0" in data:
                return None
            raw, code = ctypes.cast(ctypes.c_char_p(data), c_void_p).value or 0, STR
        else:
            if not INT64_MIN <= k <= INT64_MAX:
                return (_MISSING,)
            raw, code = k & 0xFFFFFFFFFFFFFFFF, INT
        buf = (ctypes.c_char * 12)()
        found = ctypes.c_int()
        # `data` lives until here, so the key's pointer stays valid.
        check_call(PFMapGetItem(_live(self), raw, code, buf, byref(buf, 8), byref(found)))
        if not found.value:
            return (_MISSING,)
        return (_decode_at(buf, 0, CODE.unpack_from(buf, 8)[0], "Map"),)

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

    def __iter__(self):
        return iter(self._keys())

    def _keys(self):
        if self._index is None:
            self._fill()
        return self._keys_kept

    def _pairs(self):
        if self._index is None:
            self._fill()
        if not self._holes:
            return self._pairs_kept
        return [(k, self._value_at(i)) for i, (k, _) in enumerate(self._pairs_kept)]

    def _values(self):
        if self._index is None:
            self._fill()
        return [self._value_at(i) for i in range(self._size)]


if _cext:
    _ArrayBase, _MapBase = _cext.ArrayBase, _cext.MapBase  # noqa: F811


# ---------------------------------------------------------------------------
# The classes
# ---------------------------------------------------------------------------

def adopt_as(type_index):
    """The _adopt of a container class on the extension: the compiled
    base makes the wrapper (objects of `type_index` by default) and reads
    what it needs."""
    return classmethod(lambda cls, handle, type_index=type_index:
                       Object._adopt.__func__(cls, handle, type_index))


class MappingViews:
    """keys(), values() and items() of a Map or Dict: views over the pairs
    its _keys, _values and _pairs read (see KeysView)."""

    __slots__ = ()

    def keys(self):
        return KeysView(self)

    def values(self):
        return ValuesView(self)

    def items(self):
        return ItemsView(self)


class Array(_ArrayBase, ByJSON, Object, collections.abc.Sequence):
    """An immutable sequence of values held by packedfunc (a C Array).

    A list or tuple passed to C arrives as one; an Array from C comes back
    as one. It behaves as a read-only list: ``len``, indexing (negative
    indices too), slicing (to a list), iteration, ``in``, ``index`` and
    ``count``; it equals a list, tuple, Array or List with equal items, and
    hashes as the tuple of its items (unhashable if one of them is), and
    prints as that tuple: ``(1, 2)``, ``(1,)``, ``()``. Items are
    converted the first time they are read, all at once, and kept (a
    function, object or nested container is converted again at each
    read). ``Array(iterable)`` makes one.
    """

    __slots__ = ()

    def __new__(cls, iterable=()):
        return convert_value(list(iterable))

    if _cext:
        _adopt = adopt_as(ARRAY_TYPE)

    def __reversed__(self):
        return reversed(self._values())

    def index(self, value, start=0, stop=None):
        values = self._values()
        try:
            return values.index(value, start, len(values) if stop is None else stop)
        except ValueError:
            raise ValueError("%r is not in Array" % (value,)) from None

    def count(self, value):
        return self._values().count(value)

    def __add__(self, other):
        return concat(Array, list(self._values()), other, False)

    def __radd__(self, other):
        return concat(Array, list(self._values()), other, True)

    def __eq__(self, other):
        from ._mutable import List
        if isinstance(other, List):
            other = other._values()
        elif not isinstance(other, (Array, list, tuple)):
            return NotImplemented
        if len(other) != len(self):
            return False
        mine = self._values()
        theirs = other._values() if isinstance(other, Array) else other
        return all(a is b or a == b for a, b in zip(mine, theirs))

    __ne__ = not_equal

    def __hash__(self):
        # Immutable, so hashable by its items as the tuple it equals (and
        # equal to a list, as a frozenset is hashable and equal to a set).
        return hash(tuple(self._values()))

    def __repr__(self):
        if not handle_of(self):
            return "<packedfunc.Array (released)>"
        # As the tuple it equals and hashes as: (1, 2), (1,), ().
        return guarded_repr(self, "(...)", lambda: repr(tuple(self._values())))


class Map(_MapBase, ByJSON, Object, MappingViews, collections.abc.Mapping):
    """An immutable mapping held by packedfunc (a C Map), with str or int
    keys in insertion order.

    A dict passed to C arrives as one; a Map from C comes back as one. It
    behaves as a read-only dict: ``m[key]`` (KeyError when absent), ``get``,
    ``in``, iteration over the keys, ``keys``, ``values``, ``items`` and
    ``len``; it equals a dict, Map or Dict with equal items, and hashes as
    the frozenset of its items (unhashable if a value is). Entries are
    converted the first time they are read, all at once, and kept (as
    Array's). ``Map(mapping)`` makes one. A lookup finds what a dict
    would: a number equal to an int key (``2.0``, ``True``) finds it, a
    subclass of str or int looks up its value, and any other key (``2.5``,
    an unhashable value) is simply absent.
    """

    __slots__ = ()

    def __new__(cls, mapping=()):
        return convert_value(dict(mapping))

    if _cext:
        _adopt = adopt_as(MAP_TYPE)

    def __eq__(self, other):
        if not isinstance(other, collections.abc.Mapping):
            return NotImplemented
        return mapping_equal(self._pairs(), len(self), other)

    __ne__ = not_equal

    def __hash__(self):
        # Immutable, so hashable by its entries, as a frozenset of them.
        return hash(frozenset(self._pairs()))

    def __repr__(self):
        if not handle_of(self):
            return "<packedfunc.Map (released)>"
        return guarded_repr(self, "{...}", lambda: "{" + pairs_repr(self._pairs()) + "}")


def pairs_repr(pairs):
    return ", ".join("%r: %r" % kv for kv in pairs)


def mapping_equal(pairs, size, other):
    """Whether a mapping of these (key, value) pairs equals `other`."""
    if len(other) != size:
        return False
    for key, value in pairs:
        theirs = other.get(key, _MISSING)
        if theirs is _MISSING or not (theirs is value or theirs == value):
            return False
    return True


# Views of a Map or Dict over the pairs its _keys, _values and _pairs read
# (at once, from one snapshot for a Dict): iterating one costs what
# iterating a list costs.

class KeysView(collections.abc.KeysView):
    __slots__ = ()

    def __iter__(self):
        return iter(self._mapping._keys())


class ValuesView(collections.abc.ValuesView):
    __slots__ = ()

    def __iter__(self):
        return iter(self._mapping._values())


class ItemsView(collections.abc.ItemsView):
    __slots__ = ()

    def __iter__(self):
        return iter(self._mapping._pairs())


class Shape(ByJSON, Object, collections.abc.Sequence):
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

    __ne__ = not_equal

    def __hash__(self):
        return hash(self._dims)

    def __repr__(self):
        return "Shape(%s)" % ", ".join(map(str, self._dims))


register_encoder((Array, Map, Shape), encode_object)
register_object_type("array", Array._adopt)
register_object_type("map", Map._adopt)
register_object_type("shape", Shape._adopt)

if _cext:
    _cext.set_container_hooks(array_class=Array, map_class=Map, shape_class=Shape,
                              decode=decode_item,
                              encode=encode_item, map_key=map_key,
                              raise_last_error=raise_last_error, track=track)

# The grammar's object types all pass as kPFObjectHandle: each names its
# own Python type. Arguments take what converts to it.
_signature.register_type_annotation(
    "array", lambda result: Array if result else typing.Union[list, tuple, Array])
_signature.register_type_annotation(
    "map", lambda result: Map if result else typing.Union[dict, Map])
_signature.register_type_annotation("shape", lambda result: Shape)
_signature.register_type_annotation("object", lambda result: Object if result else object)
