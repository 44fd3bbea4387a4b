"""Containers: how list, tuple and dict find their conversion.

_nesting converts a list or tuple to an Array and a dict to a Map, and
registers that here at import, once per kind, with register_container.
A registration gives the kind an exact encoder (and packedfunc.convert's
converter), and a fallback at RANK_CONTAINERS sends the kind's subclasses
(a namedtuple, an OrderedDict) to the same conversion. A list, tuple or
dict whose kind has no registration is a TypeError, never an opaque host
object: a container must not silently cross as something else. Everything
here is private.
"""
from ._convert import CONVERT, RANK_CONTAINERS, register_encoder, register_fallback, unsupported

CONTAINER_KINDS = (list, tuple, dict)
_containers = {}  # kind -> (encode, convert)


def register_container(kind, encode, convert):
    """Encode values of `kind` (one of CONTAINER_KINDS) and of its
    subclasses with encode(x, pos, keep), as _convert.register_encoder
    describes; packedfunc.convert(x) gives convert(x)."""
    if kind not in CONTAINER_KINDS:
        raise ValueError("register_container: %r is not one of %r" % (kind, CONTAINER_KINDS))
    _containers[kind] = (encode, convert)
    register_encoder((kind,), encode, convert)


def _codec(x, pos):
    for kind in CONTAINER_KINDS:
        if isinstance(x, kind) and kind in _containers:
            return _containers[kind]
    raise unsupported(x, pos)


register_fallback(RANK_CONTAINERS, CONTAINER_KINDS,
                  lambda x, pos, keep: _codec(x, pos)[0](x, pos, keep),
                  lambda x: _codec(x, CONVERT)[1](x))
