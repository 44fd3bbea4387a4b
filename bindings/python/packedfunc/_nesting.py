"""list, tuple and dict crossing to C as Array and Map.

A list or tuple crosses to C as an Array, a dict as a Map (str or int
keys), recursively. The conversion walks the value with an explicit stack,
never by recursion, so that a deep value costs no Python frames; a
container nested deeper than MAX_DEPTH levels, or one that contains itself,
is a ValueError naming where. A container met twice (not a cycle: the same
list in two places) becomes one C object, shared. An item with
__packedfunc_value__ whose result (after a chain of hooks, see
_convert.value_hook_chain) is a container is converted on the same stack,
so hook results count in the same nesting budget and cost no Python frames
either. Everything here is private.
"""
import ctypes
import struct
import sys

from ._collections import Array, Map
from ._containers import CONTAINER_KINDS, register_container
from ._convert import (CONVERT, D, FLOAT, HANDLE_CODES, INT, INT64_MAX, INT64_MIN, OBJECT, P, Q,
                       encode, hook_ids, hook_result_name, value_hook_chain, what)
from ._errors import check_call
from ._ffi import PFArrayCreate, PFMapCreate, PFObjectFree, PFObjectRetain
from ._library import OBJECT_TYPES, state
from ._object import Object, Tensor, tensor_object_from, handle_of

c_void_p, byref = ctypes.c_void_p, ctypes.byref

#: The deepest nesting of lists, tuples and dicts that can cross to C; the
#: outermost container is level 1.
MAX_DEPTH = 1000
TENSOR_TYPE = OBJECT_TYPES["tensor"]


# A level of the conversion is one container being converted, in a list
# (a list builds faster than an object with named fields, and a deep value
# builds one per container): these name its items.
_CONTAINER = 0  # the list, tuple or dict
_KEYS = 1       # a dict's keys, or None for a list or tuple
_ITEMS = 2      # its items (a dict's values)
_NEXT = 3       # the index of the item being converted
_VALS = 4       # the 8 bytes of each item converted, or None
_CODES = 5      # the type code of each item converted
_KEY_VALS = 6   # the same for a dict's keys (None for a list or tuple)
_KEY_CODES = 7
_HOOKED = 8     # the hook chain of the item whose result this is, or None


def _at(name, where):
    return name + (" at " + where if where else "")


def _path(pos, stack, item=True):
    """How a message names the item being converted (item False: the
    container stack[-1] itself): the value's own name (see _convert.what),
    then the index or key at each level, and a hook's result as such."""
    name, where = what(pos), ""
    last = len(stack) - 1
    for k, lv in enumerate(stack):
        if lv[_HOOKED] is not None:
            name, where = hook_result_name(_at(name, where), lv[_HOOKED]), ""
        if item or k < last:
            where += "[%r]" % (lv[_NEXT] if lv[_KEYS] is None else lv[_KEYS][lv[_NEXT]])
    return _at(name, where)


class _Path:
    """_path(pos, stack) (with `hooked`, the name of that hook chain's
    result there) as a name that messages format only when they are made,
    while the stack is as it was: a hook deep down costs no path."""

    __slots__ = ("pos", "stack", "hooked")

    def __init__(self, pos, stack, hooked=None):
        self.pos, self.stack, self.hooked = pos, stack, hooked

    def __str__(self):
        name = _path(self.pos, self.stack)
        return name if self.hooked is None else hook_result_name(name, self.hooked)




class _Held:
    """A reference of the conversion's own to the handle of an item (a
    Function's or Object's, borrowed from it), dropped with `keep`: user
    code that runs later in the conversion (a hook, __index__) may release
    that object (x.__del__())."""

    __slots__ = ("handle",)

    def __init__(self, handle):
        check_call(PFObjectRetain(handle))
        self.handle = handle

    def __del__(self):
        if not state.shutting_down:
            PFObjectFree(self.handle)


def _encode_item(x, pos, stack, keep):
    """(code, 8 bytes) of an item that is not a list, tuple or dict, its
    handle held (_Held). A DLPack array becomes a tensor object: a
    container cannot keep a borrowed DLTensor."""
    numpy = sys.modules.get("numpy")
    try:
        if (hasattr(x, "__dlpack__") and not isinstance(x, Object)
                and not (numpy is not None and isinstance(x, numpy.generic))):
            t = Tensor._adopt(tensor_object_from(x, _path(pos, stack)).value, TENSOR_TYPE)
            keep.append(t)
            return OBJECT, P.pack(handle_of(t))
        code, raw = encode(x, pos, keep)
        if code in HANDLE_CODES:
            keep.append(_Held(P.unpack(raw)[0]))
        return code, raw
    except (TypeError, ValueError, OverflowError) as err:
        # Encoding again, with the item's path as its name, gives the same
        # error in words that say where the item is.
        try:
            encode(x, _path(pos, stack), [])
        except type(err) as named:
            raise named from None
        raise


def _push(x, pos, stack, active, keep, hooked=None):
    """Stack a level for container x (the result of the __packedfunc_value__
    chain `hooked`, if not None), with its keys encoded (a dict's) or its items
    all encoded at once (a list of plain ints or floats)."""
    if id(x) in active:
        raise ValueError("packedfunc: %s contains itself (a %s that is its own item, "
                         "directly or not), which cannot cross to C"
                         % (_path(pos, stack), type(x).__name__))
    if len(stack) >= MAX_DEPTH:
        raise ValueError("packedfunc: %s is nested deeper than %d levels of lists, "
                         "tuples and dicts" % (what(pos), MAX_DEPTH))
    if isinstance(x, dict):
        items = list(x.items())
        n = len(items)
        keys = [k for k, _ in items]
        lv = [x, keys, [v for _, v in items], 0, [None] * n, [0] * n, [None] * n, [0] * n,
              hooked]
        stack.append(lv)
        for i, k in enumerate(keys):
            lv[_NEXT] = i
            name = "%s, dict key %d" % (_path(pos, stack, False), i)
            # A subclass's key is its value, whatever its __str__ or
            # __int__ say (str.__str__ and int.__index__ copy it out).
            if isinstance(k, str):
                code, raw = encode(str.__str__(k), name, keep)
            elif isinstance(k, int):  # bool too: True is the key 1 in a dict
                code, raw = encode(int.__index__(k), name, keep)
            else:
                raise TypeError("packedfunc: %s (%r) has unsupported type %s (keys are str "
                                "or int)" % (name, k, type(k).__qualname__))
            lv[_KEY_VALS][i], lv[_KEY_CODES][i] = raw, code
        lv[_NEXT] = 0
    else:
        items = list(x)
        n = len(items)
        lv = [x, None, items, 0, [None] * n, [0] * n, None, None, hooked]
        stack.append(lv)
        # A list of plain ints or floats, packed at once.
        if n and all(type(v) is int for v in items):
            try:
                lv[_VALS] = [struct.pack("=%dq" % n, *items)]
                lv[_CODES] = [INT] * n
                lv[_NEXT] = n
            except struct.error:  # an int outside int64: item by item names it
                pass
        elif n and all(type(v) is float for v in items):
            lv[_VALS] = [struct.pack("=%dd" % n, *items)]
            lv[_CODES] = [FLOAT] * n
            lv[_NEXT] = n
    active.add(id(x))
    if hooked is not None:
        hook_ids().update(map(id, hooked))


def _pop(stack, active):
    """Unstack the innermost level; its container and hook chain are no
    longer on the path."""
    lv = stack.pop()
    active.discard(id(lv[_CONTAINER]))
    if lv[_HOOKED] is not None:
        hook_ids().difference_update(map(id, lv[_HOOKED]))
    return lv


def _create(lv):
    """The C object for a level whose items are all encoded."""
    n = len(lv[_ITEMS])
    vals = b"".join(lv[_VALS]) if n else None
    codes = struct.pack("=%di" % n, *lv[_CODES]) if n else None
    out = c_void_p()
    if lv[_KEYS] is None:
        check_call(PFArrayCreate(vals, codes, n, byref(out)))
        return Array._adopt(out.value)
    keys = b"".join(lv[_KEY_VALS]) if n else None
    key_codes = struct.pack("=%di" % n, *lv[_KEY_CODES]) if n else None
    check_call(PFMapCreate(keys, key_codes, vals, codes, n, byref(out)))
    return Map._adopt(out.value)


def _from_python(root, pos):
    """A new Array or Map for the list, tuple or dict `root` (and its
    subclasses), converting nested containers without recursion."""
    keep = []    # what must live until the C objects hold their items
    done = {}    # id(container) -> its Array or Map, converted already
    active = set()  # ids of the containers being converted (the path)
    stack = []
    try:
        _push(root, pos, stack, active, keep)
        return _convert_stack(pos, stack, active, keep, done)
    finally:
        while stack:  # after an error: off the path, hooked items too
            _pop(stack, active)


def _convert_stack(pos, stack, active, keep, done):
    while True:
        lv = stack[-1]
        items, vals, codes = lv[_ITEMS], lv[_VALS], lv[_CODES]
        i, n = lv[_NEXT], len(items)
        while i < n:
            x = items[i]
            t = type(x)
            if t is int and INT64_MIN <= x <= INT64_MAX:
                code, raw = INT, Q.pack(x)
            elif t is float:
                code, raw = FLOAT, D.pack(x)
            elif isinstance(x, CONTAINER_KINDS):
                made = done.get(id(x))
                if made is None:
                    lv[_NEXT] = i
                    _push(x, pos, stack, active, keep)
                    break
                code, raw = OBJECT, P.pack(handle_of(made))
            elif hasattr(t, "__packedfunc_value__"):
                lv[_NEXT] = i
                value, chain = value_hook_chain(x, _Path(pos, stack))
                keep.append(chain)
                if isinstance(value, CONTAINER_KINDS):
                    keep.append(value)  # its id stays its own in `done`
                    _push(value, pos, stack, active, keep, chain)
                    break
                code, raw = _encode_item(value, _Path(pos, stack, chain), [], keep)
            else:
                lv[_NEXT] = i
                code, raw = _encode_item(x, pos, stack, keep)
            vals[i], codes[i] = raw, code
            i += 1
        else:
            made = _create(lv)
            _pop(stack, active)
            done[id(lv[_CONTAINER])] = made
            if not stack:
                return made
            parent = stack[-1]
            i = parent[_NEXT]
            parent[_VALS][i], parent[_CODES][i] = P.pack(handle_of(made)), OBJECT
            parent[_NEXT] = i + 1


def _encode_container(x, pos, keep):
    made = _from_python(x, pos)
    keep.append(made)
    return OBJECT, P.pack(handle_of(made))


def _convert_container(x):
    return _from_python(x, CONVERT)


for _kind in CONTAINER_KINDS:
    register_container(_kind, _encode_container, _convert_container)
