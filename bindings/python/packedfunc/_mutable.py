"""The mutable containers: List and Dict.

A List or Dict is one C object (container.h) shared by Python and C: a
change made by either is seen by the other, with no copy. Python makes one
explicitly (``List(iterable)``, ``Dict(mapping)``), and gets one when C
returns or passes one; a typed function's ``list`` or ``dict`` parameter
turns a plain list or dict argument into one (_function). Plain lists,
tuples and dicts keep crossing as Array and Map, also as the items of a
List or Dict: ``List([[1, 2]])`` holds an Array.

Every single operation is one call of the C API, and so atomic against
other threads, Python's and C's: ``append``, ``extend``, ``insert``,
``pop``, ``clear``, a slice assignment or deletion with step 1 (one
PFListReplace), ``d[k] = v``, ``update`` (one PFDictUpdate). Reading many
items (iteration, ``in``, ``==``, ``index``, ``count``, slices) reads one
snapshot. What Python composes of several steps reads a snapshot and then
changes the container: ``remove``, ``sort`` and ``reverse`` (which replace
the whole List with the snapshot's values, reordered), extended slices,
``setdefault``, ``popitem``; another thread's change in between may be
lost or make them act on a stale position.

Dict keys compare as Python's do for int, float, bool (1, 1.0 and True are
one key), None, str, bytes, DataType and Device; by identity for a
Function or an Object. Any other key is refused (TypeError; a NaN:
ValueError), since it would cross as a new C object each time and never be
found again: a tuple, a plain Python object. A lookup of such a key finds
nothing (an unhashable one raises TypeError, as in a dict).

With the compiled backend the operations are the extension's
(_cext.ListBase, _cext.DictBase); with ctypes, the classes _ListBase and
_DictBase here do the same in Python, with the same results and errors.
Everything here is private; the package re-exports List and Dict.
"""
import collections.abc
import ctypes
import struct
import sys
import typing

from . import _holds, _signature
from ._backend import cext as _cext
from ._collections import (INT64_MAX, INT64_MIN, Array, Map, MappingViews, _index_type_error,
                           _live, adopt_as, concat, encode_item, guarded_repr, mapping_equal, not_equal,
                           pairs_repr, read_all)
from ._convert import (CODE, HANDLE_CODES, INT, decoders_get, register_encoder,
                       register_object_type, what)
from ._errors import check_call, last_error
from ._ffi import (PFArrayGetItems, PFArrayGetSize, PFDictClear, PFDictCreate, PFDictGetItem,
                   PFDictGetSize, PFDictPop, PFDictSetItem, PFDictToArray, PFDictUpdate,
                   PFListAppend, PFListClear, PFListCreate, PFListExtend, PFListGetItem,
                   PFListGetSize, PFListPop, PFListReplace, PFListSetItem, PFListToArray,
                   PFMapGetItems, PFMapGetSize, PFObjectFree)
from ._function import Function
from ._library import OBJECT_TYPES
from ._serialize import MutableByJSON
from ._object import Object, encode_object, handle_of
from ._types import DataType, Device

c_void_p, byref, c_int64, c_int = ctypes.c_void_p, ctypes.byref, ctypes.c_int64, ctypes.c_int

LIST_TYPE = OBJECT_TYPES["list"]
DICT_TYPE = OBJECT_TYPES["dict"]


# ---------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------

# The types whose values a Dict key compares as Python does (by value), or
# by identity (Function, Object); subclasses cross as their value.
_KEY_TYPES = (int, float, str, bytes, type(None), DataType, Device, ctypes.c_void_p, Function,
              Object)


def dict_key(x, pos, lookup):
    """(code, the PFValue's 8 bytes as an int, what must outlive the call)
    of a Dict key; for a lookup, None for a value that no key can equal.
    An unhashable value raises TypeError, as a dict does."""
    hash(x)
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(x, numpy.generic):
        x = x.item()  # numpy's scalars: as Python's
    if isinstance(x, float) and x != x:
        if lookup:
            return None
        raise ValueError("packedfunc: %s: a NaN key could never be found again, so a Dict "
                         "refuses it" % what(pos))
    if isinstance(x, _KEY_TYPES) and not isinstance(x, (bytearray, tuple)):
        return encode_item(x, pos)
    if lookup:
        return None
    raise TypeError("packedfunc: %s (%r) has type %s, which a Dict key cannot have: it would "
                    "cross as a new C object each time, and never be found again (keys are "
                    "int, float, bool, None, str, bytes, DataType, Device, Function or Object)"
                    % (what(pos), x, type(x).__qualname__))


# ---------------------------------------------------------------------------
# ctypes: the fast paths of List and Dict in Python
# ---------------------------------------------------------------------------

_U64 = 0xFFFFFFFFFFFFFFFF


def _clamp(i):
    return INT64_MIN if i < INT64_MIN else INT64_MAX if i > INT64_MAX else i


def _item_index(index):
    """A List subscript's index, as list's take it: TypeError for no index,
    IndexError outside Py_ssize_t."""
    if not hasattr(type(index), "__index__"):
        raise _index_type_error("list", index)
    i = index.__index__()
    if not -sys.maxsize - 1 <= i <= sys.maxsize:
        raise IndexError("cannot fit '%s' into an index-sized integer" % type(index).__name__)
    return i


def _arg_index(index):
    """The index argument of pop or insert, as list's take it."""
    i = index.__index__() if hasattr(type(index), "__index__") else _not_an_index(index)
    if not -sys.maxsize - 1 <= i <= sys.maxsize:
        raise OverflowError("Python int too large to convert to C ssize_t")
    return i


def _owned_value(buf, off, code):
    """The value a List's or Dict's reader gave (a handle's new reference
    is taken over; a str is the thread's copy, copied again here)."""
    dec = decoders_get(code)
    if dec is None:
        raise TypeError("packedfunc: a List or Dict holds a value of unsupported type code %d"
                        % code)
    return dec(buf, off, False, None)


def _drop_value(buf, off, code):
    """Releases a value a reader gave that nobody wants (a removed item)."""
    if code in HANDLE_CODES:
        PFObjectFree(struct.unpack_from("=Q", buf, off)[0])


def _raise_index_error(words):
    """The IndexError of a failed List call in Python's words, or the
    call's own error."""
    exc = last_error()
    if isinstance(exc, IndexError):
        raise IndexError(words) from None
    raise exc


def _encode_all(values, what_for):
    """(values bytes, codes bytes, keep) of a list of values given to a
    List (`what_for` names them in errors: "item 3 given to List.extend")."""
    n = len(values)
    if n and all(type(v) is int for v in values):
        try:
            return struct.pack("=%dq" % n, *values), struct.pack("=%di" % n, *[INT] * n), None
        except struct.error:  # an int outside int64: item by item names it
            pass
    keep, raws, codes = [], [], []
    for i, x in enumerate(values):
        code, raw, k = encode_item(x, "item %d given to %s" % (i, what_for))
        raws.append(raw & _U64)
        codes.append(code)
        keep.append(k)
    return struct.pack("=%dQ" % n, *raws), struct.pack("=%di" % n, *codes), keep


def _raw(source):
    """(values, codes, n) of an Array's items, or a Map's keys then values
    (2n of each), as bytes: the C values as they are, borrowed from
    `source`, which the caller keeps."""
    n = c_int64()
    if isinstance(source, Map):
        check_call(PFMapGetSize(_live(source), byref(n)))
        n = n.value
        buf = (ctypes.c_char * (24 * n or 1))()
        check_call(PFMapGetItems(_live(source), 0, n, buf, byref(buf, 16 * n),
                                 byref(buf, 8 * n), byref(buf, 20 * n)))
        return bytes(buf[:16 * n]), bytes(buf[16 * n:24 * n]), n
    if not isinstance(source, Array):
        raise TypeError("expected an Array or Map, not %s" % type(source).__name__)
    check_call(PFArrayGetSize(_live(source), byref(n)))
    n = n.value
    buf = (ctypes.c_char * (12 * n or 1))()
    check_call(PFArrayGetItems(_live(source), 0, n, buf, byref(buf, 8 * n)))
    return bytes(buf[:8 * n]), bytes(buf[8 * n:12 * n]), n


def _snapshot_array(snapshot_call):
    a = c_void_p()
    check_call(snapshot_call(byref(a)))
    return Array._adopt(a.value)


def _read_snapshot(snapshot_call, container):
    """The values of a snapshot made by snapshot_call(out), as a list."""
    a = c_void_p()
    check_call(snapshot_call(byref(a)))
    try:
        return read_all(a.value, container)
    finally:
        PFObjectFree(a.value)


class _MutableBase(Object):
    """What the ctypes backend's List and Dict share: their object type
    index and size call (_TYPE, _GET_SIZE, set by each)."""

    __slots__ = ()

    @classmethod
    def _adopt(cls, handle, type_index=None):
        self = Object._adopt.__func__(cls, handle,
                                      cls._TYPE if type_index is None else type_index)
        _holds.refs_may_change()
        _holds.track(self)
        return self

    def __len__(self):
        n = c_int64()
        check_call(self._GET_SIZE(_live(self), byref(n)))
        return n.value


class _ListBase(_MutableBase):
    """The ctypes backend's List operations (see _cext.ListBase)."""

    __slots__ = ()
    _TYPE, _GET_SIZE = LIST_TYPE, PFListGetSize

    def _read(self, start, count):
        return _read_snapshot(lambda out: PFListToArray(_live(self), start, count, out), "List")

    def _values(self):
        return self._read(0, INT64_MAX)

    def _snapshot(self):
        return _snapshot_array(lambda out: PFListToArray(_live(self), 0, INT64_MAX, out))

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step == 1:
                return self._read(start, max(stop - start, 0))
            return self._values()[index]
        i = _item_index(index)
        buf = (ctypes.c_char * 12)()
        if PFListGetItem(_live(self), i, buf, byref(buf, 8)):
            _raise_index_error("list index out of range")
        return _owned_value(buf, 0, CODE.unpack_from(buf, 8)[0])

    def __setitem__(self, index, value):
        if isinstance(index, slice):
            return self._set_slice(index, value)
        i = _item_index(index)
        code, raw, keep = encode_item(value, "the value given to List.__setitem__")
        if PFListSetItem(_live(self), i, raw & _U64, code):
            _raise_index_error("list assignment index out of range")

    def __delitem__(self, index):
        if isinstance(index, slice):
            return self._del_slice(index)
        i = _item_index(index)
        buf = (ctypes.c_char * 12)()
        if PFListPop(_live(self), i, buf, byref(buf, 8)):
            _raise_index_error("list assignment index out of range")
        _drop_value(buf, 0, CODE.unpack_from(buf, 8)[0])

    def __contains__(self, x):
        return x in self._values()

    def __iter__(self):
        return iter(self._values())

    def append(self, value):
        """Adds value at the end."""
        code, raw, keep = encode_item(value, "the value given to List.append")
        check_call(PFListAppend(_live(self), raw & _U64, code))

    def insert(self, index, value):
        """Inserts value before index (clipped, as list.insert)."""
        i = _arg_index(index)
        if i < 0:
            i = max(i + len(self), 0)
        self._put((value,), "List.insert", _clamp(i), 0)

    def extend(self, values):
        """Appends the values, as one change."""
        if isinstance(values, (Array, _ListBase)):
            source = values if isinstance(values, Array) else values._snapshot()
            vals, codes, n = _raw(source)
            check_call(PFListExtend(_live(self), vals, codes, n))
            return
        self._put(list(values), "List.extend", None, None)

    def _replace(self, start, count, values):
        self._put(values, "List", start, count)

    def _put(self, values, what_for, start, count):
        vals, codes, keep = _encode_all(list(values), what_for)
        n = len(values)
        if start is None:
            check_call(PFListExtend(_live(self), vals if n else None, codes if n else None, n))
        else:
            check_call(PFListReplace(_live(self), start, count, vals if n else None,
                                     codes if n else None, n))

    def pop(self, index=-1):
        """Removes and returns the item at index (the last by default)."""
        i = _arg_index(index)
        buf = (ctypes.c_char * 12)()
        if PFListPop(_live(self), i, buf, byref(buf, 8)):
            exc = last_error()
            if isinstance(exc, IndexError):
                raise IndexError("pop from empty list" if len(self) == 0
                                 else "pop index out of range") from None
            raise exc
        return _owned_value(buf, 0, CODE.unpack_from(buf, 8)[0])

    def clear(self):
        """Removes every item."""
        check_call(PFListClear(_live(self)))

    def _assign_from(self, array, order):
        vals, codes, n = _raw(array)
        order = list(order)
        for j in order:
            if not 0 <= j < n:
                raise IndexError("_assign_from: position out of range")
        v = b"".join(vals[8 * j:8 * j + 8] for j in order)
        c = b"".join(codes[4 * j:4 * j + 4] for j in order)
        m = len(order)
        check_call(PFListReplace(_live(self), 0, INT64_MAX, v if m else None, c if m else None,
                                 m))

    @classmethod
    def _from_array(cls, array):
        vals, codes, n = _raw(array)
        out = c_void_p()
        check_call(PFListCreate(vals if n else None, codes if n else None, n, byref(out)))
        return cls._adopt(out.value)

    @classmethod
    def _from_values(cls, values):
        values = list(values)
        vals, codes, keep = _encode_all(values, "List")
        n = len(values)
        out = c_void_p()
        check_call(PFListCreate(vals if n else None, codes if n else None, n, byref(out)))
        return cls._adopt(out.value)


def _check_arity(name, args):
    """The TypeError of dict.get and dict.pop for a wrong argument count."""
    if not args:
        raise TypeError("%s expected at least 1 argument, got 0" % name)
    if len(args) > 2:
        raise TypeError("%s expected at most 2 arguments, got %d" % (name, len(args)))


def _not_an_index(x):
    raise TypeError("'%s' object cannot be interpreted as an integer" % type(x).__name__)


class _DictBase(_MutableBase):
    """The ctypes backend's Dict operations (see _cext.DictBase)."""

    __slots__ = ()
    _TYPE, _GET_SIZE = DICT_TYPE, PFDictGetSize

    def _lookup(self, key, want_value):
        """(found, value) of a key."""
        k = dict_key(key, "the key given to a Dict lookup", True)
        if k is None:
            return False, None
        code, raw, keep = k
        found = c_int()
        if not want_value:
            check_call(PFDictGetItem(_live(self), raw & _U64, code, None, None, byref(found)))
            return bool(found.value), None
        buf = (ctypes.c_char * 12)()
        check_call(PFDictGetItem(_live(self), raw & _U64, code, buf, byref(buf, 8),
                                 byref(found)))
        if not found.value:
            return False, None
        return True, _owned_value(buf, 0, CODE.unpack_from(buf, 8)[0])

    def _remove(self, key):
        """(found, value) of a key removed."""
        k = dict_key(key, "the key given to a Dict removal", True)
        if k is None:
            return False, None
        code, raw, keep = k
        buf = (ctypes.c_char * 12)()
        if PFDictPop(_live(self), raw & _U64, code, buf, byref(buf, 8)):
            exc = last_error()
            if isinstance(exc, KeyError):
                return False, None
            raise exc
        return True, _owned_value(buf, 0, CODE.unpack_from(buf, 8)[0])

    def __getitem__(self, key):
        found, value = self._lookup(key, True)
        if not found:
            raise KeyError(key)
        return value

    def __setitem__(self, key, value):
        kcode, kraw, kkeep = dict_key(key, "the key given to Dict.__setitem__", False)
        vcode, vraw, vkeep = encode_item(value, "the value given to Dict.__setitem__")
        check_call(PFDictSetItem(_live(self), kraw & _U64, kcode, vraw & _U64, vcode))

    def __delitem__(self, key):
        found, _ = self._remove(key)
        if not found:
            raise KeyError(key)

    def __contains__(self, key):
        return self._lookup(key, False)[0]

    def __iter__(self):
        return iter(self._keys())

    def get(self, *args):
        """get(key, default=None): the value of key, or default when it is
        absent."""
        _check_arity("get", args)
        found, value = self._lookup(args[0], True)
        return value if found else args[1] if len(args) > 1 else None

    def pop(self, *args):
        """pop(key[, default]): removes key and returns its value; default
        (if given) when it is absent, else KeyError."""
        _check_arity("pop", args)
        found, value = self._remove(args[0])
        if found:
            return value
        if len(args) > 1:
            return args[1]
        raise KeyError(args[0])

    def clear(self):
        """Removes every entry."""
        check_call(PFDictClear(_live(self)))

    def _entries(self):
        return _read_snapshot(lambda out: PFDictToArray(_live(self), out), "Dict")

    def _keys(self):
        return self._entries()[0::2]

    def _values(self):
        return self._entries()[1::2]

    def _pairs(self):
        e = self._entries()
        return list(zip(e[0::2], e[1::2]))

    def _snapshot(self):
        return _snapshot_array(lambda out: PFDictToArray(_live(self), out))

    def _update(self, pairs):
        n = len(pairs)
        keys, kcodes, vals, vcodes, keep = [], [], [], [], []
        for i, pair in enumerate(pairs):
            if not isinstance(pair, tuple) or len(pair) != 2:
                raise TypeError("Dict.update: pair %d is not a (key, value) tuple" % i)
            kc, kr, kk = dict_key(pair[0], "key %d given to Dict.update" % i, False)
            vc, vr, vk = encode_item(pair[1], "value %d given to Dict.update" % i)
            keys.append(kr & _U64)
            kcodes.append(kc)
            vals.append(vr & _U64)
            vcodes.append(vc)
            keep.append((kk, vk))
        if not n:
            return
        check_call(PFDictUpdate(_live(self), struct.pack("=%dQ" % n, *keys),
                                struct.pack("=%di" % n, *kcodes), struct.pack("=%dQ" % n, *vals),
                                struct.pack("=%di" % n, *vcodes), n))

    @classmethod
    def _from_array(cls, source):
        vals, codes, n = _raw(source)
        if isinstance(source, Map):
            keys, kcodes, vals, vcodes = vals[:8 * n], codes[:4 * n], vals[8 * n:], codes[4 * n:]
        else:  # a snapshot: key, value, key, ...
            n //= 2
            keys = b"".join(vals[16 * i:16 * i + 8] for i in range(n))
            kcodes = b"".join(codes[8 * i:8 * i + 4] for i in range(n))
            vals = b"".join(vals[16 * i + 8:16 * i + 16] for i in range(n))
            vcodes = b"".join(codes[8 * i + 4:8 * i + 8] for i in range(n))
        out = c_void_p()
        if n:
            check_call(PFDictCreate(keys, kcodes, vals, vcodes, n, byref(out)))
        else:
            check_call(PFDictCreate(None, None, None, None, 0, byref(out)))
        return cls._adopt(out.value)

    @classmethod
    def _from_pairs(cls, pairs):
        out = c_void_p()
        check_call(PFDictCreate(None, None, None, None, 0, byref(out)))
        self = cls._adopt(out.value)
        self._update(pairs)
        return self


if _cext:
    _ListBase, _DictBase = _cext.ListBase, _cext.DictBase  # noqa: F811


# ---------------------------------------------------------------------------
# The classes
# ---------------------------------------------------------------------------

class List(_ListBase, MutableByJSON, Object, collections.abc.MutableSequence):
    """A mutable sequence held by packedfunc (a C List), shared with C.

    ``List(iterable)`` makes one; a List that C returns or passes comes
    back as one, and passes to C as itself: a change made by C is seen by
    Python, and the other way round. It behaves as a list: ``len``,
    indexing and slicing (negative indices too; a slice reads to a new
    Python list), assignment and deletion of items and slices,
    ``append``, ``insert``, ``extend``, ``pop``, ``remove``, ``clear``,
    ``index``, ``count``, ``reverse``, ``sort``, ``copy``, ``+=``,
    iteration and ``in``; it equals a list, tuple, Array or List with
    equal items. Items are converted as an Array's are: a list or tuple
    item becomes an Array, a dict a Map, a numpy (DLPack) array a tensor
    object. See the package documentation for which operations are atomic
    against other threads.
    """

    __slots__ = ()

    def __new__(cls, iterable=()):
        if isinstance(iterable, Array):
            return cls._from_array(iterable)
        if isinstance(iterable, List):
            return cls._from_array(iterable._snapshot())
        return cls._from_values(list(iterable))

    if _cext:
        _adopt = adopt_as(LIST_TYPE)

    def _set_slice(self, index, values):
        values = list(values)
        start, stop, step = index.indices(len(self))
        if step == 1:
            self._replace(start, max(stop - start, 0), values)
            return
        positions = range(start, stop, step)
        if len(values) != len(positions):
            raise ValueError("attempt to assign sequence of size %d to extended slice of size %d"
                             % (len(values), len(positions)))
        # Every value converted (and held, by a List of them) before any is
        # written: a value that cannot cross changes nothing.
        for i, x in zip(positions, List(values)._values()):
            self[i] = x

    def _del_slice(self, index):
        start, stop, step = index.indices(len(self))
        if step == 1:
            self._replace(start, max(stop - start, 0), [])
            return
        for i in sorted(range(start, stop, step), reverse=True):
            del self[i]

    def remove(self, value):
        """Removes the first item equal to value (ValueError if none)."""
        for i, x in enumerate(self._values()):
            if x is value or x == value:
                del self[i]
                return
        raise ValueError("list.remove(x): x not in list")

    def index(self, value, start=0, stop=sys.maxsize):
        """The position of the first item equal to value (ValueError if
        none), within [start, stop)."""
        return self._values().index(value, start, stop)

    def count(self, value):
        """How many items equal value."""
        return self._values().count(value)

    def reverse(self):
        """Reverses the items in place."""
        snap = self._snapshot()
        self._assign_from(snap, range(len(snap) - 1, -1, -1))

    def sort(self, *, key=None, reverse=False):
        """Sorts the items in place (stable), as list.sort."""
        snap = self._snapshot()
        values = snap._values()
        by = values.__getitem__ if key is None else (lambda i: key(values[i]))
        self._assign_from(snap, sorted(range(len(values)), key=by, reverse=reverse))

    def copy(self):
        """A new List of the same items (a shallow copy)."""
        return type(self)._from_array(self._snapshot())

    def __iadd__(self, values):
        self.extend(values)
        return self

    def __add__(self, other):
        return concat(List, list(self._values()), other, False)

    def __radd__(self, other):
        return concat(List, list(self._values()), other, True)

    def __reversed__(self):
        return reversed(self._values())

    def __eq__(self, other):
        if isinstance(other, List) and handle_of(other) == handle_of(self):
            return True
        if isinstance(other, (List, Array)):
            theirs = other._values()
        elif isinstance(other, (list, tuple)):
            theirs = other
        else:
            return NotImplemented
        mine = self._values()
        return len(mine) == len(theirs) and all(a is b or a == b for a, b in zip(mine, theirs))

    __ne__ = not_equal
    __hash__ = None  # mutable, and equal to lists

    def _text(self, form):
        if not handle_of(self):
            return "<packedfunc.List (released)>"
        return guarded_repr(self, "[...]",
                            lambda: form % ", ".join(map(repr, self._values())))

    def __repr__(self):
        return self._text("List([%s])")

    def __str__(self):
        # What a list prints; repr says the type (as numpy's str and repr).
        return self._text("[%s]")


def _pairs_of(other, kwargs):
    """The (key, value) pairs that dict(other, **kwargs) would hold, in
    order."""
    if isinstance(other, (Map, Dict)):
        pairs = list(other._pairs())
    elif hasattr(other, "keys"):
        pairs = [(k, other[k]) for k in other.keys()]
    else:
        pairs = []
        for i, item in enumerate(other):
            try:
                item = tuple(item)
            except TypeError:
                raise TypeError("cannot convert dictionary update sequence element #%d to a "
                                "sequence" % i) from None
            if len(item) != 2:
                raise ValueError("dictionary update sequence element #%d has length %d; 2 is "
                                 "required" % (i, len(item)))
            pairs.append(item)
    pairs.extend(kwargs.items())
    return pairs


class Dict(_DictBase, MutableByJSON, Object, MappingViews, collections.abc.MutableMapping):
    """A mutable mapping held by packedfunc (a C Dict), shared with C, with
    its entries in insertion order.

    ``Dict(mapping_or_pairs, **kwargs)`` makes one, as dict() does; a Dict
    that C returns or passes comes back as one, and passes to C as itself:
    a change made by C is seen by Python, and the other way round. It
    behaves as a dict: ``d[key]`` (KeyError when absent), assignment and
    deletion, ``get``, ``pop``, ``popitem``, ``setdefault``, ``update``,
    ``clear``, ``copy``, ``keys``, ``values``, ``items``, ``|``, ``|=``,
    iteration and ``in``; it equals a dict, Map or Dict with equal items.
    Keys are compared as described in the package documentation.
    """

    __slots__ = ()

    def __new__(cls, mapping=(), **kwargs):
        if not kwargs and isinstance(mapping, Map):
            return cls._from_array(mapping)
        if not kwargs and isinstance(mapping, Dict):
            return cls._from_array(mapping._snapshot())
        return cls._from_pairs(_pairs_of(mapping, kwargs))

    if _cext:
        _adopt = adopt_as(DICT_TYPE)

    @classmethod
    def fromkeys(cls, keys, value=None):
        """A new Dict of these keys, each with value."""
        return cls._from_pairs([(k, value) for k in keys])

    def update(self, other=(), **kwargs):
        """Sets the entries of other (a mapping or (key, value) pairs) and
        of the keywords, in order, as one change."""
        self._update(_pairs_of(other, kwargs))

    def setdefault(self, key, default=None):
        """The value of key; when absent, sets it to default first."""
        found = self.get(key, _ABSENT)
        if found is not _ABSENT:
            return found
        self[key] = default
        return default

    def popitem(self):
        """Removes and returns the last (key, value) inserted."""
        keys = self._keys()
        if not keys:
            raise KeyError("popitem(): dictionary is empty")
        key = keys[-1]
        return key, self.pop(key)

    def copy(self):
        """A new Dict of the same entries (a shallow copy)."""
        return type(self)._from_array(self._snapshot())

    def __or__(self, other):
        if not isinstance(other, collections.abc.Mapping):
            return NotImplemented
        new = self.copy()
        new.update(other)
        return new

    def __ior__(self, other):
        self.update(other)
        return self

    def __eq__(self, other):
        if not isinstance(other, collections.abc.Mapping):
            return NotImplemented
        if isinstance(other, Dict) and handle_of(other) == handle_of(self):
            return True
        pairs = self._pairs()
        return mapping_equal(pairs, len(pairs), other)

    __ne__ = not_equal
    __hash__ = None  # mutable, and equal to dicts

    def _text(self, form):
        if not handle_of(self):
            return "<packedfunc.Dict (released)>"
        return guarded_repr(self, "{...}", lambda: form % pairs_repr(self._pairs()))

    def __repr__(self):
        return self._text("Dict({%s})")

    def __str__(self):
        # What a dict prints; repr says the type.
        return self._text("{%s}")


_ABSENT = object()

register_encoder((List, Dict), encode_object)
register_object_type("list", List._adopt)
register_object_type("dict", Dict._adopt)

if _cext:
    _cext.set_container_hooks(list_class=List, dict_class=Dict, dict_key=dict_key)

# A list or dict parameter takes a List or Dict, or a list, tuple or dict
# that the call turns into one (_function).
_signature.register_type_annotation(
    "list", lambda result: List if result else typing.Union[list, tuple, List])
_signature.register_type_annotation(
    "dict", lambda result: Dict if result else typing.Union[dict, Dict])
