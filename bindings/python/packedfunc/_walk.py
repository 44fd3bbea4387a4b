"""structural_walk: typed callbacks over what a value holds, in the order
structural_equal compares it (items, map keys and values, fields of
instances). The package re-exports structural_walk, WalkOrder, WalkResult
and VisitInterrupt."""
import enum
import typing

from ._collections import Array, Map
from ._convert import convert_value
from ._mutable import Dict, List
from ._object import Object, handle_of


class WalkOrder(enum.IntEnum):
    """Whether a value's callback runs before (PREORDER, ``"pre"``) or
    after (POSTORDER, ``"post"``) the walk of what it holds."""
    PREORDER = 0
    POSTORDER = 1


class WalkResult(enum.IntEnum):
    """What a pre-order callback may return: SKIP leaves out what the value
    holds; ADVANCE (as None) walks into it."""
    ADVANCE = 0
    SKIP = 1


class VisitInterrupt:
    """Returned by a callback, stops the walk: structural_walk returns it,
    with its payload in ``value``."""

    __slots__ = ("value",)

    def __init__(self, value=None):
        self.value = value

    def __repr__(self):
        return "VisitInterrupt(%r)" % (self.value,)


_ORDERS = {"pre": WalkOrder.PREORDER, "post": WalkOrder.POSTORDER,
           WalkOrder.PREORDER: WalkOrder.PREORDER, WalkOrder.POSTORDER: WalkOrder.POSTORDER}


def _kinds(kind, where):
    """The isinstance() argument of an entry's type: a class, a tuple of
    classes, or typing.Any (every value)."""
    kinds = kind if isinstance(kind, tuple) else (kind,)
    for k in kinds:
        if k is typing.Any:
            return object
        if not isinstance(k, type):
            raise TypeError("structural_walk: %s: %r is not a type (a class, a tuple of "
                            "classes, or typing.Any)" % (where, k))
    return kinds


def _entries(callbacks):
    """[(isinstance argument, callback)] in the order they are tried."""
    def is_entry(x):
        return isinstance(x, tuple) and len(x) == 2 and callable(x[1])

    if callable(callbacks):
        return [(object, callbacks)]
    if is_entry(callbacks):
        return [(_kinds(callbacks[0], "callbacks"), callbacks[1])]
    if not isinstance(callbacks, (list, tuple)):
        raise TypeError("structural_walk: callbacks must be a callable, a (type, callable) "
                        "pair or a list of such pairs, not %s" % type(callbacks).__name__)
    out = []
    for i, entry in enumerate(callbacks):
        if not is_entry(entry):
            raise TypeError("structural_walk: callbacks[%d] must be a (type, callable) pair, "
                            "not %r" % (i, entry))
        out.append((_kinds(entry[0], "callbacks[%d]" % i), entry[1]))
    return out


def _holds(value):
    """The values that `value` holds, in structural_equal's order, or None
    for a value that holds none (a leaf)."""
    if isinstance(value, (Array, List)):
        return list(value)
    if isinstance(value, (Map, Dict)):
        return [x for pair in value.items() for x in pair]
    info = getattr(type(value), "__pf_type_info__", None)
    if info is not None and isinstance(value, Object):
        return [getattr(value, field.name) for field in info.fields]
    return None


def structural_walk(root, callbacks=(), *, order="pre"):
    """Walks what ``root`` holds (it is first converted as it would cross
    to C: a list becomes an Array, a dict a Map): every item of an Array or
    List, every key and then value of a Map or Dict, every field of an
    instance of a registered type, depth first; tensors, Shapes and
    everything else are leaves. Each value reached is given to the first
    entry of ``callbacks`` whose type it is an instance of: a callable
    (every value), a ``(type, callable)`` pair, where the type may be a
    tuple of types or ``typing.Any``, or a list of pairs. ``order`` is
    ``"pre"``/``WalkOrder.PREORDER`` or ``"post"``/``WalkOrder.POSTORDER``.
    A pre-order callback that returns ``WalkResult.SKIP`` leaves out what
    its value holds; any callback that returns a :class:`VisitInterrupt`
    stops the walk, which returns it; else the walk returns None. A
    container or instance met again inside itself (a cycle) is not walked
    again; one reached twice otherwise is walked each time. A callback's
    exception stops the walk and propagates."""
    entries = _entries(callbacks)
    try:
        post = _ORDERS[order] is WalkOrder.POSTORDER
    except (KeyError, TypeError):
        raise ValueError("structural_walk: order must be 'pre', 'post' or a WalkOrder, not %r"
                         % (order,)) from None

    def call(value):
        for kinds, fn in entries:
            if isinstance(value, kinds):
                return fn(value)
        return None

    # An explicit stack, so that depth costs no Python recursion: (value,
    # entered) pairs; a value whose children are on the stack has its
    # handle in `inside` until it is left.
    stack, inside = [(convert_value(root), False)], set()
    while stack:
        value, leaving = stack.pop()
        if leaving:
            inside.discard(handle_of(value))
            result = call(value) if post else None
            if isinstance(result, VisitInterrupt):
                return result
            continue
        held = _holds(value)
        if held is not None and handle_of(value) in inside:
            continue  # a cycle
        result = None if post and held is not None else call(value)
        if isinstance(result, VisitInterrupt):
            return result
        if held is None or result is WalkResult.SKIP:
            continue
        inside.add(handle_of(value))
        stack.append((value, True))
        stack.extend((item, False) for item in reversed(held))
    return None
