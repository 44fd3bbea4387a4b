"""Containers: where list, tuple and dict will plug in as Array and Map.

list and tuple will cross as Array, dict as Map, once the C side has those
object types: the module that defines them calls register_container once
per kind, and registers their object types' adopters with
_convert.register_object_type. Until a kind is registered, its values (and
those of its subclasses, such as namedtuples) are a TypeError, as they
always were, never an opaque host object: a list must not silently change
meaning when containers arrive. Everything here is private.
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
