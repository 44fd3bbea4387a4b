"""Function metadata: signatures as inspect.Signature, docstrings, and the
signature that a Python function publishes.

A function's signature metadata uses the signature grammar of signature.h
("int64(int64,float64)", "float64(x:float64,lo:float64=0.0)"). The library
parses it (PFSignatureParse, PFSignatureInfo): this module reads its
parameter table, never the text, to give ``inspect.signature(f)`` and
``help(f)`` in Python terms, and writes the text that a Python function
registered with register_func publishes. Everything here is private;
Function exposes it.
"""
import ctypes
import functools
import inspect
import itertools
import math
import typing

from ._convert import MEMORY, decode
from ._errors import check_call
from ._ffi import PFErrorClear, PFSignatureInfoFree, PFSignatureParse, PFSignatureTypeInfo
from ._library import TYPE_CODE_NAMES
from ._mirrors import PFSignatureInfo
from ._types import DataType, Device

_EMPTY = inspect.Parameter.empty


def _grammar():
    """The grammar's type names, in the library's order (PFSignatureTypeInfo's
    index), with the type code of a value of each: read from the library,
    never restated here."""
    types, name, code = [], ctypes.c_char_p(), ctypes.c_int()
    while PFSignatureTypeInfo(len(types), ctypes.byref(name), ctypes.byref(code)) == 0:
        types.append((name.value.decode(), code.value))
    PFErrorClear()  # the IndexError past the last type
    return types


_TYPES = _grammar()
#: The grammar's type names -> the type code of a value of that type.
SIGNATURE_TYPES = dict(_TYPES)


class Param:
    """One parameter (or the result) of a parsed signature: `name` (None
    when unnamed), `type` (its canonical text, "tensor<float64,1>"),
    `base` (the grammar's type name: "tensor", "obj" for obj<KEY>),
    `has_default`, `default` (the Python value) and `default_text` (its
    canonical literal)."""

    __slots__ = ("name", "type", "base", "tree", "has_default", "default", "default_text")

    def __init__(self, info):
        self.name = info.name.decode() if info.name else None
        self.type = info.type.decode()
        self.base = "obj" if info.type_index < 0 else _TYPES[info.type_index][0]
        self.tree = _tree(info.type_info.contents)
        self.has_default = bool(info.has_default)
        self.default_text = info.default_text.decode() if info.default_text else None
        self.default = None
        if self.has_default:
            addr = ctypes.addressof(info) + type(info).default_value.offset
            self.default = decode(MEMORY, addr, info.default_code)


def _tree(ti):
    """A PFTypeInfo as (name, text, element types): ("map", "map<str,float64>",
    (("str", "str", ()), ("float64", "float64", ())))."""
    return (ti.name.decode(), ti.text.decode(),
            tuple(_tree(ti.args[i].contents) for i in range(ti.num_args)))


@functools.lru_cache(maxsize=512)
def parse(text):
    """(result, (params...)) as Param for signature metadata, parsed by the
    library; None when there is none or it does not parse. A signature text
    never changes, so the answer is cached by text."""
    if not isinstance(text, str):
        return None
    out = ctypes.c_void_p()
    if PFSignatureParse(text.encode("utf-8", "surrogateescape"), ctypes.byref(out)) != 0:
        PFErrorClear()
        return None
    try:
        info = PFSignatureInfo.from_address(out.value)
        return (Param(info.result.contents),
                tuple(Param(info.params[i].contents) for i in range(info.num_params)))
    finally:
        PFSignatureInfoFree(out)


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
# `object` all pass as kPFObjectHandle. These win over _annotations. `any`
# (a value of any type: a packed function's metadata) has no annotation.
_type_annotations = {"any": lambda result: _EMPTY}


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
    """The Python annotation for one type name of the grammar: the Python
    type that a value of its type code converts to."""
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


def tree_annotation(tree, result):
    """The annotation of a type tree (Param.tree): list[...] for array<T> and
    list<T>, dict[K, V] for map and dict, Optional[...] and Union[...]; a
    type without element types as annotation() gives it."""
    name, text, args = tree
    inner = [tree_annotation(a, result) for a in args]
    if name in ("array", "list") and inner:
        return list[inner[0]]
    if name in ("map", "dict") and inner:
        return dict[inner[0], inner[1]]
    if name == "optional":
        return typing.Optional[inner[0]]
    if name == "union":
        return typing.Union[tuple(inner)]
    if name == "obj":
        family = _family_annotations.get("obj")
        if family is not None:
            return family(text, result)
        return typing.Annotated[annotation("object", result), text]
    base = annotation(name, result)
    return base if text == name else typing.Annotated[base, text]


def param_annotation(p, result):
    """The annotation of a Param: its type's; for an obj<KEY> the class of
    the registered type; for a constrained tensor
    ``typing.Annotated[that, "tensor<float64,1,contiguous>"]`` (the
    grammar's text of the constraint); for element types, optional and
    union, tree_annotation's."""
    if p.tree[2] or p.tree[0] in ("optional", "union"):
        return tree_annotation(p.tree, result)
    if p.base == "obj":
        # The class of the registered type (made on first use), when the
        # object types' module annotates the family.
        family = _family_annotations.get("obj")
        if family is not None:
            return family(p.type, result)
        return typing.Annotated[annotation("object", result), p.type]
    base = annotation(p.base, result)
    return base if p.type == p.base else typing.Annotated[base, p.type]


def to_inspect(text):
    """An inspect.Signature for a signature text, or None when it does not
    parse. Named parameters can be passed by keyword (the library binds a
    keyword call: PFFuncCallKw) and show their defaults; unnamed ones are
    positional-only, named arg0, arg1, ... (as error messages number
    them)."""
    parsed = parse(text)
    if parsed is None:
        return None
    ret, params = parsed
    out = []
    for i, p in enumerate(params):
        if p.name is None:
            kind, name = inspect.Parameter.POSITIONAL_ONLY, "arg%d" % i
        else:
            kind, name = inspect.Parameter.POSITIONAL_OR_KEYWORD, p.name
        out.append(inspect.Parameter(name, kind, annotation=param_annotation(p, False),
                                     default=p.default if p.has_default else _EMPTY))
    return inspect.Signature(out, return_annotation=param_annotation(ret, True))


# ---- a Python function's own signature, as the grammar writes it -------------

_NAME_OK = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


def _grammar_type(annot, result):
    """The grammar's type for a Python annotation, or "any" (also for no
    annotation and for one the grammar has no type for)."""
    if annot is _EMPTY:
        return "any"
    if annot is None or annot is type(None):
        return "void" if result else "any"
    if isinstance(annot, str):  # a grammar text: "tensor<float64,1>"
        return annot if parse("void(x:%s)" % annot) else "any"
    simple = {int: "int64", float: "float64", bool: "bool", str: "str", bytes: "bytes",
              DataType: "dtype", Device: "device"}
    if annot in simple:
        return simple[annot]
    generic = _generic_type(annot, result)
    if generic is not None:  # "any" where the grammar refuses it (too deep)
        return generic if parse("void(x:%s)" % generic) is not None else "any"
    for type_name in ("func", "tensor", "array", "map", "shape", "object"):
        try:
            if annotation(type_name, result) is annot or annotation(type_name, not result) is annot:
                return type_name
        except ValueError:  # pragma: no cover
            pass
    return "any"


def _literal(x, typed):
    """The grammar's literal for a Python default at a parameter of type
    `typed`, or None when it has none."""
    if x is None:
        return "null"
    if isinstance(x, bool):
        return "true" if x else "false"
    if type(x) is int:
        return str(x) if -2**63 <= x < 2**63 else None
    if type(x) is float:
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return repr(x)
    if type(x) in (str, bytes):
        try:
            data = x.encode("utf-8", "strict") if type(x) is str else x
        except UnicodeEncodeError:  # a lone surrogate
            return None
        if type(x) is str and b"\0" in data:
            return None
        esc = {ord('"'): '\\"', ord("\\"): "\\\\", ord("\n"): "\\n", ord("\t"): "\\t",
               ord("\r"): "\\r"}
        body = "".join(esc.get(b) or (chr(b) if 32 <= b < 127 else "\\x%02x" % b) for b in data)
        return ('b"%s"' if type(x) is bytes else '"%s"') % body
    if (isinstance(x, DataType) and typed == "dtype") or (isinstance(x, Device)
                                                          and typed == "device"):
        return '"%s"' % x  # their texts: "float32", "cuda:1"
    return None


def _generic_type(annot, result):
    """The grammar's element-typed container, optional or union for a
    generic alias (``list[int]``, ``typing.List[str]``, ``dict[str, float]``,
    ``typing.Optional[int]``, ``int | None``, ``typing.Union[int, str]``),
    the inverse of tree_annotation; None for any other annotation. An
    element the grammar has no type for leaves the container unconstrained
    (``list[object]`` is ``array``); a union with such a member is ``any``."""
    origin, args = typing.get_origin(annot), typing.get_args(annot)
    if origin is None or not args:
        return None
    if origin is list:
        inner = _grammar_type(args[0], result)
        return "array" if inner == "any" else "array<%s>" % inner
    if origin is dict and len(args) == 2:
        key, value = (_grammar_type(a, result) for a in args)
        if key not in ("str", "int64", "any"):
            return "map"
        return "map" if (key, value) == ("any", "any") else "map<%s,%s>" % (key, value)
    if origin is typing.Union or type(annot).__name__ == "UnionType":
        members = [a for a in args if a is not type(None)]
        inner = [_grammar_type(a, result) for a in members]
        if "any" in inner or not inner:
            return "any"
        text = inner[0] if len(inner) == 1 else "union<%s>" % ",".join(inner)
        return "optional<%s>" % text if len(members) < len(args) else text
    return None


def from_python(func):
    """The signature text a Python callable publishes (register_func): its
    parameters' names and defaults, and their types where the annotation
    is one of the grammar's (``any`` otherwise, and where the default does
    not suit the annotation); None when the grammar cannot say how C calls
    it (*args, a keyword-only parameter without a default, a name that is
    not ASCII, more than 16 parameters, no signature at all). C passes
    arguments by position, so keyword-only parameters with defaults and
    **kwargs are left out (they keep their defaults), and so are the
    parameters from the first default that no literal writes (a list, an
    object) on: a C caller that leaves them out gets Python's defaults."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    params = []
    for p in sig.parameters.values():
        if p.kind == p.VAR_POSITIONAL:
            return None
        if p.kind == p.KEYWORD_ONLY:
            if p.default is _EMPTY:
                return None
            continue
        if p.kind == p.VAR_KEYWORD:
            continue
        if not p.name.isascii() or not set(p.name) <= _NAME_OK or p.name[0].isdigit():
            return None
        params.append(p)
    if any(p.kind == p.POSITIONAL_ONLY for p in params):
        # A name C could pass by keyword would be one Python refuses: the
        # parameters go unnamed, up to the first default (a C caller that
        # leaves the rest out gets Python's defaults).
        texts = [_grammar_type(p.annotation, False)
                 for p in itertools.takewhile(lambda p: p.default is _EMPTY, params)]
        text = "%s(%s)" % (_grammar_type(sig.return_annotation, True), ",".join(texts))
        return text if len(texts) <= 16 and parse(text) is not None else None
    texts = []
    for p in params:
        typed = _grammar_type(p.annotation, False)
        if p.default is _EMPTY:
            texts.append("%s:%s" % (p.name, typed))
            continue
        lit = _literal(p.default, typed)
        if lit is not None and parse("void(x:%s=%s)" % (typed, lit)) is None:
            typed = "any"  # a default the annotation does not take
            lit = _literal(p.default, typed)
        if lit is None:
            break
        texts.append("%s:%s=%s" % (p.name, typed, lit))
    if len(texts) > 16:
        return None
    text = "%s(%s)" % (_grammar_type(sig.return_annotation, True), ",".join(texts))
    return text if parse(text) is not None else None


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
