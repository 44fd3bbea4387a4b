"""Function metadata: typed signatures as inspect.Signature, and docstrings.

A function's signature metadata uses the typed-signature grammar of c_api.h
("int64(int64,float64)"). This module parses it into the Python types that
the binding converts each C type to and from, so that
``inspect.signature(f)`` and ``help(f)`` describe a typed C function in
Python terms. Everything here is private; Function exposes it.
"""
import ctypes
import inspect

from ._ffi import PFErrorClear, PFSignatureTypeInfo
from ._library import TYPE_CODE_NAMES
from ._types import DataType, Device


def _grammar():
    """The grammar's type names -> the type code of a value of that type,
    read from the library (PFSignatureTypeInfo), never restated here."""
    types, name, code = {}, ctypes.c_char_p(), ctypes.c_int()
    i = 0
    while PFSignatureTypeInfo(i, ctypes.byref(name), ctypes.byref(code)) == 0:
        types[name.value.decode()] = code.value
        i += 1
    PFErrorClear()  # the IndexError past the last type
    return types


SIGNATURE_TYPES = _grammar()


def parse(text):
    """(result type, [argument types]) for signature metadata, or None when
    there is none. The library keeps a signature canonical ("ret(a,b)",
    canonical names, no blanks: PFFuncSetInfo checks it), so a split reads
    it."""
    if not isinstance(text, str) or not text.endswith(")") or "(" not in text:
        return None
    ret, _, rest = text[:-1].partition("(")
    return ret, (rest.split(",") if rest else [])


# Type code name -> annotate(result), the Python annotation of a value of
# that type code as an argument (result false) or a result. The modules
# that define Function and Tensor register theirs.
_annotations = {code: (lambda result, t=python_type: t) for code, python_type in (
    ("null", None), ("int", int), ("float", float), ("bool", bool), ("str", str),
    ("bytes", bytes), ("handle", ctypes.c_void_p), ("dtype", DataType), ("device", Device))}


def register_annotation(code_name, annotate):
    """Annotate values of the type code `code_name` with annotate(result)."""
    _annotations[code_name] = annotate


# Signature type name -> annotate(result), for the grammar's types whose
# type code does not say what they are: `array`, `map`, `shape` and
# `object` all pass as kPFObjectHandle. These win over _annotations.
_type_annotations = {}


def register_type_annotation(type_name, annotate):
    """Annotate the grammar's type `type_name` with annotate(result),
    whatever its type code is."""
    _type_annotations[type_name] = annotate


# Families of the grammar's types, by the name before '<': obj<KEY>, one type
# per registered key. The module that makes their classes registers
# annotate(ctype, result).
_family_annotations = {}


def register_family_annotation(family, annotate):
    """Annotate the grammar's types FAMILY<...> with annotate(ctype, result)."""
    _family_annotations[family] = annotate


def annotation(ctype, result):
    """The Python annotation for one C type of the grammar: the Python type
    that a value of its type code converts to."""
    if ctype.endswith(">") and "<" in ctype:
        family = _family_annotations.get(ctype.partition("<")[0])
        if family is not None:
            return family(ctype, result)
    annotate = _type_annotations.get(ctype)
    if annotate is None:
        annotate = _annotations.get(TYPE_CODE_NAMES.get(SIGNATURE_TYPES.get(ctype)))
    if annotate is None:  # pragma: no cover - a type this binding predates
        raise ValueError("packedfunc: no Python type for C type %r" % ctype)
    return annotate(result)


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
