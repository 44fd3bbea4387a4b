"""Function metadata: typed signatures as inspect.Signature, and docstrings.

A function's signature metadata uses the typed-signature grammar of c_api.h
("int64(int64,float64)"). This module parses it into the Python types that
the binding converts each C type to and from, so that
``inspect.signature(f)`` and ``help(f)`` describe a typed C function in
Python terms. Everything here is private; Function exposes it.
"""
import collections.abc
import ctypes
import inspect
import re

# C type name (the grammar's) -> the Python type a value has on this side.
# Integers of every width are int; pointer-like C types also accept and
# give None (NULL), which the annotations do not spell out.
_SCALARS = {
    "int8": int, "int16": int, "int32": int, "int64": int,
    "uint8": int, "uint16": int, "uint32": int, "uint64": int,
    "float32": float, "float64": float, "double": float,
    "bool": bool, "str": str, "bytes": bytes, "ptr": ctypes.c_void_p,
}
_NAMES = frozenset(_SCALARS) | {"tensor", "dtype", "device", "func", "void"}
# At most this many arguments (PF_TYPED_MAX_ARGS in c_api.h).
MAX_ARGS = 16

_TOKEN = re.compile(r"[ \t\n]*([A-Za-z_][A-Za-z0-9_]*|[(),])")


def parse(text):
    """(result type, [argument types]) for a signature in the typed-signature
    grammar, with "double" spelled float64; None when `text` does not parse
    (metadata of a packed function may hold any text)."""
    if not isinstance(text, str):
        return None
    tokens, pos = [], 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos:].strip(" \t\n") == "":
                break
            return None
        tokens.append(m.group(1))
        pos = m.end()
    # RET "(" [ARG {"," ARG}] ")"
    if len(tokens) < 3 or tokens[1] != "(" or tokens[-1] != ")":
        return None
    ret, body = tokens[0], tokens[2:-1]
    if ret not in _NAMES:
        return None
    args = []
    if body:
        if len(body) % 2 == 0:
            return None
        for i, tok in enumerate(body):
            if i % 2 == 1:
                if tok != ",":
                    return None
            elif tok not in _NAMES or tok == "void":
                return None
            else:
                args.append("float64" if tok == "double" else tok)
    if len(args) > MAX_ARGS:
        return None
    return ("float64" if ret == "double" else ret), args


def annotation(ctype, result):
    """The Python annotation for one C type of the grammar."""
    if ctype in _SCALARS:
        return _SCALARS[ctype]
    from . import _core, _types  # the classes live there; imported late
    if ctype == "void":
        return None
    if ctype == "dtype":
        return _types.DataType
    if ctype == "device":
        return _types.Device
    if ctype == "func":
        # Any callable may be passed; a function result is a Function.
        return _core.Function if result else collections.abc.Callable
    if ctype == "tensor":
        # Any DLPack array may be passed; a tensor result is a numpy array.
        try:
            import numpy
        except ImportError:  # pragma: no cover - numpy is a dependency
            return _core.Tensor
        return numpy.ndarray
    raise ValueError("packedfunc: unknown C type %r" % ctype)  # pragma: no cover


def to_inspect(text):
    """An inspect.Signature for a typed signature text, or None when it does
    not parse. Parameters are positional-only and named arg0, arg1, ...
    (C signatures carry no names; the numbers match error messages)."""
    parsed = parse(text)
    if parsed is None:
        return None
    ret, args = parsed
    params = [inspect.Parameter("arg%d" % i, inspect.Parameter.POSITIONAL_ONLY,
                                annotation=annotation(t, False))
              for i, t in enumerate(args)]
    return inspect.Signature(params, return_annotation=annotation(ret, True))


def docstring(name, signature, doc):
    """The text of Function.__doc__: the docstring, then the name and the C
    signature (as `pf describe` prints them); None when nothing is set."""
    parts = []
    if doc:
        parts.append(inspect.cleandoc(doc))
    facts = []
    if name:
        facts.append("name: " + name)
    if signature:
        facts.append("signature: " + signature)
    if facts:
        parts.append("\n".join(facts))
    return "\n\n".join(parts) if parts else None
