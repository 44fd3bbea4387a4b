"""Type stubs (.pyi) for a packedfunc module's or the registry's functions.

    python -m packedfunc.stubgen plugin.so -o plugin.pyi
    python -m packedfunc.stubgen --registry mylib.ops --load lib.so -o ops.pyi

(`pf stubgen ARGS` runs this with the same ARGS.) The stubs come from the
metadata the library keeps: each function's name, docstring and signature
as data (PFFuncGetSignatureInfo: parameter names, defaults, types, tensor
constraints), and each object type's description (PFObjectTypeGetInfo:
fields, methods, constructor, parent). Parameter and result types are the
Python types the binding converts each C type to (the annotations that
``inspect.signature`` shows); a constrained tensor is
``Annotated[numpy.ndarray[Any, numpy.dtype[Any]], "tensor<float64,1,contiguous>"]``. A function
without a signature takes ``*args: Any``. Dotted names nest as they read
on a Module (``plugin.demo.add`` is the function "demo.add"): each
namespace is a class of static methods, and an object type "demo.Counter"
is the class ``demo.Counter`` with a property per field and a method per
method. A name that is not a Python identifier is left out, with a comment.

For a module (a .so), the stub describes what ``load_module`` returns; a
program type-checks against it by importing the stub's name for the type
checker only::

    if typing.TYPE_CHECKING:
        import plugin                # plugin.pyi, on mypy's path
    else:
        plugin = packedfunc.load_module("./plugin.so")

With ``--registry PREFIX``, the stub holds the registered functions named
``PREFIX.NAME`` (and object types keyed ``PREFIX.NAME``) as ``NAME``: the
attributes that ``packedfunc.init_api(PREFIX, module)`` sets, so it is the
stub of such a module. ``--load LIB.so`` loads a module first and
registers its functions (under the ``--prefix`` given before it, as
``pf --load`` does); ``--import MOD`` imports a Python module first (one
that registers functions).
"""
import argparse
import builtins
import collections.abc
import ctypes
import inspect
import keyword
import math
import re
import sys
import typing

from . import _object_types, _signature
from ._errors import check_call
from ._ffi import (METHOD_STATIC, FIELD_WRITABLE, OBJECT_TYPE_REGISTERED_BEGIN, PFFuncGetInfo,
                   PFFuncGetSignatureInfo, PFGetStructSize, PFModListTypes, PFObjectTypeGetInfo,
                   PFObjectTypeName, PFSignatureInfoFree, PFSignatureParse)
from ._library import LIB_PATH, TYPE_CODE_NAMES
from ._mirrors import (PFFieldInfo, PFMethodInfo, PFObjectTypeInfo, PFParamInfo, PFSignatureInfo,
                       PFTensorConstraint)

__all__ = ["generate_module", "generate_registry", "main"]

c_void_p, c_char_p, byref = ctypes.c_void_p, ctypes.c_char_p, ctypes.byref

# The description structs may grow at their ends in later versions, which
# are read through their pointers: the library's must be at least ours.
for _name, _mirror in (("PFObjectTypeInfo", PFObjectTypeInfo), ("PFFieldInfo", PFFieldInfo),
                       ("PFMethodInfo", PFMethodInfo), ("PFParamInfo", PFParamInfo),
                       ("PFSignatureInfo", PFSignatureInfo),
                       ("PFTensorConstraint", PFTensorConstraint)):
    _size = ctypes.c_size_t()
    if PFGetStructSize(_name.encode(), byref(_size)) != 0 or _size.value < ctypes.sizeof(_mirror):
        raise ImportError("packedfunc.stubgen: struct %s is %d bytes in %s, smaller than the %d "
                          "bytes of the Python mirror; the package and the library do not match"
                          % (_name, _size.value, LIB_PATH, ctypes.sizeof(_mirror)))

# The grammar's type names in the order of their indices (PFParamInfo's
# type_index), as the library reports them.
_GRAMMAR = list(_signature.SIGNATURE_TYPES)

_INDENT = "    "
# A module name in an annotation, as _Writer.name marks it, until _render
# knows which names the stub defines; and the names that a stub defines.
_MARK = "\x00"
_MARKED = re.compile(_MARK + r"([\w.]+)" + _MARK + r"\.(\w+)")
_DEFINED = re.compile(r"^\s*(?:def|class)\s+(\w+)", re.M)


def _text(raw):
    return raw.decode("utf-8", "replace") if raw else None


# ---------------------------------------------------------------------------
# Annotations as stub text
# ---------------------------------------------------------------------------

class _Writer:
    """The text of one stub: lines, and the modules its annotations need."""

    def __init__(self, type_names):
        self.lines = []
        self.type_names = type_names  # object type key -> the stub's class path

    def emit(self, depth=0, text=""):
        self.lines.append((_INDENT * depth + text) if text else "")

    def name(self, module, attr):
        """module.attr in an annotation, marked: _render spells the module
        (builtins: nothing) so that no name the stub defines shadows it."""
        return "%s%s%s.%s" % (_MARK, module, _MARK, attr)

    # ---- annotations ----

    def python_type(self, t):
        """Stub text for an annotation object of _signature.annotation."""
        if t is None or t is type(None):
            return "None"
        if t is collections.abc.Callable:
            return "%s[..., %s]" % (self.name("typing", "Callable"), self.name("typing", "Any"))
        if typing.get_origin(t) is typing.Union:
            return "%s[%s]" % (self.name("typing", "Union"),
                               ", ".join(self.python_type(a) for a in typing.get_args(t)))
        if isinstance(t, type) and t is not inspect.Parameter.empty:
            mod = t.__module__
            if mod.startswith("packedfunc.") or mod == "packedfunc":
                import packedfunc
                if getattr(packedfunc, t.__name__, None) is t:
                    return self.name("packedfunc", t.__name__)
            if t.__name__ == "ndarray" and mod == "numpy":
                # A generic class: mypy --strict refuses it bare. Any
                # shape, any element type (a constraint says which).
                any_ = self.name("typing", "Any")
                return "%s[%s, %s[%s]]" % (self.name(mod, "ndarray"), any_,
                                           self.name(mod, "dtype"), any_)
            return self.name(mod, t.__qualname__)
        return self.name("typing", "Any")

    def tree_type(self, ti, result):
        """Stub text for a PFTypeInfo with element types, optional or union:
        list[...], dict[..., ...], typing.Optional[...], typing.Union[...];
        None for a type without them (param_type's)."""
        name = _text(ti.name)
        if ti.num_args == 0:
            return None
        args = [self.tree_type(ti.args[i].contents, result) or self.leaf_type(ti.args[i].contents,
                                                                                result)
                for i in range(ti.num_args)]
        if name in ("array", "list"):
            return "%s[%s]" % (self.name("builtins", "list"), args[0])
        if name in ("map", "dict"):
            return "%s[%s, %s]" % (self.name("builtins", "dict"), args[0], args[1])
        return "%s[%s]" % (self.name("typing", "Optional" if name == "optional" else "Union"),
                           ", ".join(args))

    def leaf_type(self, ti, result):
        """Stub text for an element type without element types of its own."""
        name = _text(ti.name)
        if name == "obj":
            return self.type_names.get(_text(PFObjectTypeName(ti.object_type)),
                                       self.name("packedfunc", "Object"))
        text = self.python_type(_signature.annotation(name, result))
        if ti.tensor.flags:
            text = "%s[%s, %s]" % (self.name("typing", "Annotated"), text, _string(_text(ti.text)))
        return text

    def param_type(self, p, result):
        """Stub text for a PFParamInfo's type."""
        if p.type_info:
            tree = self.tree_type(p.type_info.contents, result)
            if tree is not None:
                return tree
        if p.type_index < 0:  # obj<KEY>: the stub's class, or any Object
            key = _text(PFObjectTypeName(p.object_type))
            path = self.type_names.get(key)
            if path is not None:
                return path
            return self.name("packedfunc", "Object")
        name = _GRAMMAR[p.type_index]
        text = self.python_type(_signature.annotation(name, result))
        if name == "void":
            return "None"
        if p.tensor.flags:  # the constraint, for readers and tools
            text = "%s[%s, %s]" % (self.name("typing", "Annotated"), text, _string(_text(p.type)))
        return text


def _string(s):
    """A str literal that a stub may hold (printable ASCII, escaped)."""
    return repr(s).encode("ascii", "backslashreplace").decode("ascii")


def _default(p):
    """A parameter's default as stub text: a literal for the plain values,
    else `...` (what a stub writes for a default it does not spell)."""
    code = TYPE_CODE_NAMES.get(p.default_code)
    v = p.default_value
    if code == "int":
        return str(v.v_int64)
    if code == "bool":
        return "True" if v.v_int64 else "False"
    if code == "null":
        return "None"
    if code == "float":
        return repr(v.v_float64) if math.isfinite(v.v_float64) else "..."
    if code == "str":
        s = ctypes.cast(v.v_handle, c_char_p).value.decode("utf-8", "replace")
        return _string(s) if len(s) <= 60 else "..."
    return "..."


def _identifier(name):
    return name.isidentifier() and not keyword.iskeyword(name) and name.isascii()


# ---------------------------------------------------------------------------
# Functions and methods
# ---------------------------------------------------------------------------

def _params(w, info, skip_first):
    """The parameter list text of a PFSignatureInfo, or None when a
    parameter name cannot be a Python one."""
    parts = []
    params = [info.params[i].contents for i in range(info.num_params)]
    if skip_first:
        params = params[1:]
    for i, p in enumerate(params):
        name = _text(p.name) if p.name else "arg%d" % i
        if not _identifier(name) or name == "self":
            return None
        text = "%s: %s" % (name, w.param_type(p, False))
        if p.has_default:
            text += " = " + _default(p)
        parts.append(text)
    if params and not info.named:
        parts.append("/")  # unnamed parameters are positional only
    return parts


def _docstring(w, depth, doc):
    """A docstring: its first line after the quotes, the others indented."""
    if doc:
        doc = inspect.cleandoc(doc).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
        lines = doc.splitlines()
        if len(lines) == 1:
            w.emit(depth, '"""%s"""' % lines[0])
            return
        w.emit(depth, '"""' + lines[0])
        for line in lines[1:]:
            w.emit(depth if line else 0, line)
        w.emit(depth, '"""')


def _def(w, depth, name, info, doc, kind, static=False):
    """A def from a PFSignatureInfo (None: no signature). kind: "function"
    (a module's), "static" (a namespace's, or a static method), "method"
    or "init" (whose first parameter, the object, is self unless `static`:
    a factory's)."""
    if kind == "static":
        w.emit(depth, "@staticmethod")
    first = [] if kind in ("function", "static") else ["self"]
    params = None
    if info is not None:
        params = _params(w, info, skip_first=bool(first) and not static)
    if params is None:
        result = w.name("typing", "Any")
        params = ["*args: " + result]
        if info is not None:
            doc = (doc + "\n\n" if doc else "") + "signature: " + _text(info.text)
    else:
        result = w.param_type(info.result.contents, True)
    if kind == "init":
        result = "None"
    w.emit(depth, "def %s(%s) -> %s:" % (name, ", ".join(first + params), result))
    if doc:
        _docstring(w, depth + 1, doc)
    else:
        w.emit(depth + 1, "...")


class _Parsed:
    """A PFSignatureParse result, freed when done."""

    def __init__(self, text):
        self.ptr = c_void_p()
        check_call(PFSignatureParse(text, byref(self.ptr)))
        self.info = ctypes.cast(self.ptr, ctypes.POINTER(PFSignatureInfo)).contents

    def __enter__(self):
        return self.info

    def __exit__(self, *exc):
        PFSignatureInfoFree(self.ptr)


def _function_info(func):
    """(doc, PFSignatureInfo or None) of a Function."""
    doc, out = c_char_p(), c_void_p()
    check_call(PFFuncGetInfo(func.handle, None, None, byref(doc)))
    check_call(PFFuncGetSignatureInfo(func.handle, byref(out)))
    info = ctypes.cast(out, ctypes.POINTER(PFSignatureInfo)).contents if out.value else None
    return _text(doc.value), info


# ---------------------------------------------------------------------------
# Object types
# ---------------------------------------------------------------------------

def _type_info(index):
    out = ctypes.POINTER(PFObjectTypeInfo)()
    check_call(PFObjectTypeGetInfo(index, ctypes.cast(byref(out), ctypes.POINTER(c_void_p))))
    return out.contents


def _class(w, depth, name, index):
    t = _type_info(index)
    key = _text(t.key)
    if t.parent_index:
        parent = w.type_names.get(_text(PFObjectTypeName(t.parent_index)))
    else:
        parent = None
    if parent is None:
        parent = w.name("packedfunc", "Object")
    w.emit(depth, "class %s(%s):" % (name, parent))
    _docstring(w, depth + 1, _text(t.doc) or "The object type %s." % key)
    own = lambda member: member.type_index == index  # noqa: E731 (inherited ones: the parent's)
    if t.init and own(t.init.contents):
        _method(w, depth + 1, t.init.contents, "__init__")
    for i in range(t.num_fields):
        f = t.fields[i].contents
        fname = _text(f.name)
        if not own(f) or not _identifier(fname):
            continue
        with _Parsed(b"void(" + f.type + b")") as info:
            ftype = w.param_type(info.params[0].contents, True)
            arg_type = w.param_type(info.params[0].contents, False)
        w.emit(depth + 1, "@property")
        w.emit(depth + 1, "def %s(self) -> %s:" % (fname, ftype))
        _docstring(w, depth + 2, _text(f.doc)) if f.doc else w.emit(depth + 2, "...")
        if f.flags & FIELD_WRITABLE:
            w.emit(depth + 1, "@%s.setter" % fname)
            w.emit(depth + 1, "def %s(self, value: %s) -> None: ..." % (fname, arg_type))
    for i in range(t.num_methods):
        m = t.methods[i].contents
        mname = _text(m.name)
        if own(m) and mname != "__init__" and _identifier(mname):
            _method(w, depth + 1, m, mname)


def _method(w, depth, m, name):
    static = bool(m.flags & METHOD_STATIC)
    doc = _text(m.doc)
    kind = "init" if name == "__init__" else "static" if static else "method"
    if not m.signature:
        _def(w, depth, name, None, doc, kind)
        return
    with _Parsed(m.signature) as info:
        _def(w, depth, name, info, doc, kind, static)


# ---------------------------------------------------------------------------
# The tree of names
# ---------------------------------------------------------------------------

class _Node:
    def __init__(self):
        self.children = {}  # part -> _Node
        self.function = None  # a Function
        self.type_index = None


def _tree(functions, types):
    """functions: {relative name: Function}; types: {relative key: index}.
    Returns the root _Node and the names left out."""
    root, skipped = _Node(), []
    for kind, items in (("function", functions), ("type", types)):
        for name, value in sorted(items.items()):
            parts = name.split(".")
            if not all(_identifier(p) for p in parts):
                skipped.append((name, "not a Python identifier"))
                continue
            node = root
            for p in parts:
                node = node.children.setdefault(p, _Node())
            if node.function is not None or node.type_index is not None:
                skipped.append((name, "the name of a function and an object type"))
                continue
            if kind == "function":
                node.function = value
            else:
                node.type_index = value
    return root, skipped


def _type_paths(node, prefix=""):
    out = {}
    for part, child in node.children.items():
        path = prefix + part
        if child.type_index is not None:
            out[_text(PFObjectTypeName(child.type_index))] = path
        out.update(_type_paths(child, path + "."))
    return out


def _write_node(w, node, depth, path, top):
    for part, child in sorted(node.children.items()):
        full = path + part
        if child.type_index is not None:
            w.emit()
            _class(w, depth, part, child.type_index)
        elif child.function is not None:
            doc, info = _function_info(child.function)
            if child.children:
                w.emit(depth, "# %s's names below it are out of reach: %s is a function" % (full, full))
            w.emit()
            _def(w, depth, part, info, doc, "function" if top else "static")
        else:
            w.emit()
            w.emit(depth, "class %s:" % part)
            w.emit(depth + 1, '"""The names %s.*."""' % full)
            _write_node(w, child, depth + 1, full + ".", False)


def _render(what, usage, functions, types):
    root, skipped = _tree(functions, types)
    w = _Writer({})
    w.type_names = _type_paths(root)
    _write_node(w, root, 0, "", True)
    head = ["# Type stubs for %s," % what,
            "# written by `python -m packedfunc.stubgen` from the metadata of the functions",
            "# and object types. Do not edit: generate them again."]
    head += ["#"] + ["# " + line for line in usage]
    for name, why in skipped:
        head.append("# Left out: %r (%s)." % (name, why))
    head += ["", "from __future__ import annotations", ""]
    body = "\n".join(w.lines)
    defined = set(_DEFINED.findall(body))
    shadowed = lambda module, attr: module != "builtins" or attr in defined  # noqa: E731
    spelt, imports = _module_names({m for m, a in _MARKED.findall(body) if shadowed(m, a)},
                                   defined)
    head += imports
    body = _MARKED.sub(lambda m: (spelt[m.group(1)] if shadowed(*m.groups()) else "")
                       + m.group(2), body)
    return "\n".join(head + [body]).rstrip() + "\n"


def _module_names(modules, defined):
    """How annotations spell each module so that no name the stub defines
    (a function `int`, a class `typing`) shadows it: {module: prefix} and
    the import lines. A builtin is spelt bare unless the stub defines its
    name (then builtins is imported, as any module); a module is imported
    under its own name unless the stub defines that, else under that name
    with underscores added."""
    taken = set(defined)
    aliases = {}
    for m in sorted(modules):
        alias = m
        if m.split(".")[0] in taken:
            alias = m.replace(".", "_") + "_"
            while alias in taken:
                alias += "_"
        aliases[m] = alias
        taken.add(alias.split(".")[0])
    spelt = {m: a + "." for m, a in aliases.items()}
    lines = []
    for m, alias in sorted(aliases.items()):
        lines.append("import %s" % m if alias == m else "import %s as %s" % (m, alias))
    return spelt, lines


def module_contents(module):
    """(what, functions, types) of a Module's own functions and the object
    types it registered: a description ("the packedfunc module PATH"),
    {name: Function} and {key: type index}; `module` is a Module or the
    path of one to load."""
    from ._module import Module, load_module
    if not isinstance(module, Module):
        module = load_module(module)
    functions = {n: module.get_function(n, query_imports=False)
                 for n in module.list_function_names()}
    size, arr = ctypes.c_int(), ctypes.POINTER(ctypes.c_uint32)()
    check_call(PFModListTypes(module.handle, byref(size), byref(arr)))
    types = {_text(PFObjectTypeName(arr[i])): arr[i] for i in range(size.value)}
    return "the packedfunc module %s" % (module.path or "(not from a file)"), functions, types


def generate_module(module):
    """The stub text (str) of a Module's own functions and the object types
    it registered; `module` is a Module or the path of one to load."""
    what, functions, types = module_contents(module)
    return _render(what,
                   ["A program type-checks against it by importing it for the type checker",
                    "only: `if typing.TYPE_CHECKING: import NAME` (NAME.pyi on its path),",
                    "`else: NAME = packedfunc.load_module(PATH)`."],
                   functions, types)


def _registered_types():
    """Every registered object type: key -> index (indices are given in
    order from OBJECT_TYPE_REGISTERED_BEGIN and never reused)."""
    return {key: OBJECT_TYPE_REGISTERED_BEGIN + i
            for i, key in enumerate(_object_types.registered_types())}


def generate_registry(prefix):
    """The stub text (str) of the registered functions named PREFIX.NAME
    and object types keyed PREFIX.NAME, as NAME (every one for an empty
    prefix)."""
    from ._registry import get_global_func, list_global_func_names
    head = prefix + "." if prefix else ""
    functions = {}
    for name in list_global_func_names(head):
        func = get_global_func(name, allow_missing=True)
        if func is not None:
            functions[name[len(head):]] = func
    types = {k[len(head):]: i for k, i in _registered_types().items() if k.startswith(head)}
    return _render("the registered functions %s" % (repr(head + "*") if head else "(all)"),
                   ["The stub of a Python module that exposes them with",
                    "`packedfunc.init_api(%r, __name__)`." % prefix],
                   functions, types)


# ---------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------

class _LoadAction(argparse.Action):
    def __call__(self, parser, ns, value, option_string=None):
        ns.loads.append((ns.prefix, value))


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m packedfunc.stubgen",
        description="Write type stubs (.pyi) for a packedfunc module's functions and object "
                    "types, or for the registry's, from their metadata.")
    parser.add_argument("module", nargs="?", metavar="MODULE.so",
                        help="the module (shared library) to describe")
    parser.add_argument("-o", "--output", metavar="FILE.pyi",
                        help="where to write the stubs (default: standard output)")
    parser.add_argument("--lang", choices=("py", "ts"), default="py",
                        help="py: Python stubs (.pyi, the default); ts: TypeScript declarations "
                             "(.d.ts) of a module for the Node.js package")
    parser.add_argument("--registry", metavar="PREFIX",
                        help="describe the registered functions and object types named "
                             "PREFIX.NAME instead of a module ('' for all)")
    parser.add_argument("--prefix", default="", metavar="PREFIX",
                        help="register the functions of the --load modules that follow under "
                             "PREFIX + name")
    parser.add_argument("--load", action=_LoadAction, default=[], dest="loads",
                        metavar="LIB.so", help="with --registry: load a module and register "
                                               "its functions first (repeatable)")
    parser.add_argument("--import", action="append", default=[], dest="imports",
                        metavar="MODULE", help="with --registry: import a Python module first "
                                               "(repeatable)")
    args = parser.parse_args(argv)
    if (args.module is None) == (args.registry is None):
        parser.error("give either MODULE.so or --registry PREFIX")
    if args.module is not None and (args.loads or args.imports):
        parser.error("--load and --import go with --registry")
    if args.lang == "ts" and args.registry is not None:
        parser.error("--lang ts describes a module (MODULE.so), not the registry")
    from ._module import load_module
    import importlib
    try:
        for prefix, path in args.loads:
            load_module(path).export_global(prefix)
        for name in args.imports:
            importlib.import_module(name)
        if args.lang == "ts":
            from ._stubgen_ts import generate_module as generate_ts
            text = generate_ts(args.module)
        elif args.module is not None:
            text = generate_module(args.module)
        else:
            text = generate_registry(args.registry)
    except Exception as err:  # a usage error of the tool: one line, no traceback
        print("python -m packedfunc.stubgen: %s: %s" % (type(err).__name__, err),
              file=sys.stderr)
        return 1
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
