"""TypeScript declarations (.d.ts) of a packedfunc module for the Node.js
package: `python -m packedfunc.stubgen --lang ts plugin.so -o plugin.d.ts`
(and `pf stubgen --lang ts ...`). They come from the metadata that the
Python stubs read (module_contents, the signatures as data, the
object types' descriptions), written in the JavaScript types that the
Node.js package converts each C type to and from.

The file declares each object type as a class (key "demo.Counter": class
Counter in namespace demo, its fields properties, its methods methods),
`Types` (the module's `types`, by key), `Functions` (the functions as
Module properties by their dotted names, each a pf.TypedFunction with the
parameters as a labelled tuple, a defaulted parameter optional) and
`LoadedModule`, the type that `pf.loadModule<LoadedModule>(path)` returns.
A function without a signature is a plain pf.PackedFunction. A class whose
key is not a path of JavaScript identifiers is left out, with a comment.
Everything here is private.
"""
import re

from ._ffi import FIELD_WRITABLE, METHOD_STATIC, PFObjectTypeName
from ._library import TYPE_CODE_NAMES
from ._signature import SIGNATURE_TYPES
from .stubgen import _GRAMMAR, _Parsed, _function_info, _text, _type_info, module_contents

_INDENT = "  "
_INT = "number | bigint"
# The Node.js package's conversions: (argument, result) type for a value
# of each type code (what its encoder takes and its decoder gives), and
# for the grammar's types that share a code (the containers) or have none
# of their own.
_BY_CODE = {
    "int": (_INT, _INT), "float": ("number", "number"), "bool": ("boolean", "boolean"),
    "null": ("null | undefined", "null"), "handle": ("pf.OpaqueHandle | null", "pf.OpaqueHandle"),
    "dtype": ("pf.DataType", "pf.DataType"), "device": ("pf.Device", "pf.Device"),
    "tensor": ("pf.TensorArg | ArrayBufferView", "pf.TensorView"),
    "str": ("string", "string"), "bytes": ("Uint8Array", "Uint8Array"),
    "function": ("pf.PackedFunction | ((...args: any[]) => any)", "pf.PackedFunction"),
    "module": ("pf.Module", "pf.Module"), "object": ("pf.Value", "pf.PackedObject"),
}
_BY_TYPE = {
    "void": ("null | undefined", "null"), "any": ("pf.Value", "any"),
    "array": ("readonly pf.Value[] | pf.PackedArray", "pf.PackedArray"),
    "map": ("Map<string | number | bigint, pf.Value> | { [key: string]: pf.Value } | pf.PackedMap",
            "pf.PackedMap"),
    "shape": ("pf.Shape", "pf.Shape"), "list": ("pf.List", "pf.List"), "dict": ("pf.Dict", "pf.Dict"),
}
# JavaScript's reserved words (and the strict mode's): not a parameter or
# class name.
_RESERVED = frozenset(
    "break case catch class const continue debugger default delete do else enum export extends "
    "false finally for function if import in instanceof new null return super switch this throw "
    "true try typeof var void while with implements interface let package private protected "
    "public static yield await arguments eval".split())
_IDENTIFIER = re.compile(r"^[A-Za-z_$][\w$]*$")
# The names the file declares at its top, besides the classes.
_OWN_NAMES = ("pf", "Types", "Functions", "LoadedModule")


def _identifier(name):
    return bool(_IDENTIFIER.match(name)) and name not in _RESERVED


def _quoted(name):
    """A property name: bare when it is an identifier, else a string."""
    if _IDENTIFIER.match(name):
        return name
    return '"%s"' % name.replace("\\", "\\\\").replace('"', '\\"')


class _Writer:
    def __init__(self, classes):
        self.lines = []
        self.classes = classes  # object type key -> the class's path ("demo.Counter")

    def emit(self, depth=0, text=""):
        """A line; a blank one only between members, not after a brace."""
        if text or (self.lines and not self.lines[-1].endswith("{")):
            self.lines.append((_INDENT * depth + text) if text else "")

    def doc(self, depth, text):
        """A TSDoc comment."""
        if not text:
            return
        lines = text.replace("*/", "*\\/").strip().splitlines()
        if len(lines) == 1:
            self.emit(depth, "/** %s */" % lines[0])
            return
        self.emit(depth, "/**")
        for line in lines:
            self.emit(depth, (" * " + line).rstrip())
        self.emit(depth, " */")

    def type_of(self, p, result):
        """A PFParamInfo's type as an argument or a result."""
        if p.type_index < 0:  # obj<KEY>: its class, or any object
            path = self.classes.get(_text(PFObjectTypeName(p.object_type)))
            if path is not None:
                return path
            return "pf.PackedObject"
        name = _GRAMMAR[p.type_index]
        pair = _BY_TYPE.get(name) or _BY_CODE[TYPE_CODE_NAMES[SIGNATURE_TYPES[name]]]
        return pair[1 if result else 0]

    def params(self, info, skip_first):
        """The parameters of a PFSignatureInfo as "name: type" texts (a
        defaulted one "name?: type")."""
        out = []
        params = [info.params[i].contents for i in range(info.num_params)]
        for i, p in enumerate(params[1:] if skip_first else params):
            name = _text(p.name) if p.name else None
            if name is None or not _identifier(name):
                name = "arg%d" % i
            out.append("%s%s: %s" % (name, "?" if p.has_default else "", self.type_of(p, False)))
        return out


def _function_type(w, info):
    if info is None:
        return "pf.PackedFunction"
    return "pf.TypedFunction<[%s], %s>" % (", ".join(w.params(info, False)),
                                           w.type_of(info.result.contents, True))


def _method(w, depth, m, name):
    """A method (or a static one, or the constructor for __init__)."""
    static = bool(m.flags & METHOD_STATIC)
    w.doc(depth, _text(m.doc))
    head = "constructor" if name == "__init__" else ("static " if static else "") + name
    if not m.signature:
        result = "" if name == "__init__" else ": any"
        w.emit(depth, "%s(...args: pf.Value[])%s;" % (head, result))
        return
    with _Parsed(m.signature) as info:
        params = ", ".join(w.params(info, skip_first=not static))
        result = "" if name == "__init__" else ": " + w.type_of(info.result.contents, True)
    w.emit(depth, "%s(%s)%s;" % (head, params, result))


def _class(w, depth, name, index, head):
    t = _type_info(index)
    key = _text(t.key)
    parent = None
    if t.parent_index:
        parent = w.classes.get(_text(PFObjectTypeName(t.parent_index)))
    w.doc(depth, _text(t.doc) or "The object type %s." % key)
    w.emit(depth, "%sclass %s extends %s {" % (head, name, parent or "pf.PackedObject"))
    own = lambda member: member.type_index == index  # noqa: E731 (inherited ones: the parent's)
    w.emit(depth + 1, "static readonly typeKey: string;")
    w.emit(depth + 1, "static readonly typeIndex: number;")
    if t.init and own(t.init.contents):
        _method(w, depth + 1, t.init.contents, "__init__")
    for i in range(t.num_fields):
        f = t.fields[i].contents
        if not own(f):
            continue
        fname = _quoted(_text(f.name))
        with _Parsed(b"void(" + f.type + b")") as info:
            get = w.type_of(info.params[0].contents, True)
            put = w.type_of(info.params[0].contents, False)
        w.doc(depth + 1, _text(f.doc))
        if not f.flags & FIELD_WRITABLE:
            w.emit(depth + 1, "readonly %s: %s;" % (fname, get))
        elif get == put:
            w.emit(depth + 1, "%s: %s;" % (fname, get))
        else:
            w.emit(depth + 1, "get %s(): %s;" % (fname, get))
            w.emit(depth + 1, "set %s(value: %s);" % (fname, put))
    for i in range(t.num_methods):
        m = t.methods[i].contents
        mname = _text(m.name)
        if own(m) and mname != "__init__":
            _method(w, depth + 1, m, _quoted(mname))
    w.emit(depth, "}")


def _class_paths(types):
    """{key: class path} for the keys that are paths of identifiers, and
    [(key, why)] for the others; a root key must not be a name the file
    declares."""
    paths, skipped = {}, []
    for key in sorted(types):
        parts = key.split(".")
        if not all(_identifier(p) for p in parts):
            skipped.append((key, "not a path of JavaScript identifiers"))
        elif parts[0] in _OWN_NAMES:
            skipped.append((key, "%s is a name the declarations use" % parts[0]))
        else:
            paths[key] = key
    return paths, skipped


def _write_classes(w, types, keys, depth, prefix):
    """The classes of `keys` under the namespace `prefix` ("" at the top)."""
    spaces = {}
    head = "export declare " if depth == 0 else ""
    for key in keys:
        rest = key[len(prefix):]
        if "." in rest:
            spaces.setdefault(rest.split(".")[0], []).append(key)
        else:
            w.emit()
            _class(w, depth, rest, types[key], head)
    for space, inner in sorted(spaces.items()):
        w.emit()
        w.emit(depth, "%snamespace %s {" % (head, space))
        _write_classes(w, types, inner, depth + 1, prefix + space + ".")
        w.emit(depth, "}")


def _functions_tree(functions):
    """{part: (function or None, {part: ...})} of the dotted names, as a
    Module exposes them: a name that is a function hides the names below it."""
    root = {}
    for name in sorted(functions):
        node = root
        parts = name.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, [None, {}])[1]
        node.setdefault(parts[-1], [None, {}])[0] = functions[name]
    return root


def _write_functions(w, node, depth, path):
    for part, (func, children) in sorted(node.items()):
        full = path + part
        if func is not None:
            doc, info = _function_info(func)
            if children:
                w.emit(depth, "// The names below %s are out of reach: it is a function." % full)
            w.doc(depth, doc)
            w.emit(depth, "readonly %s: %s;" % (_quoted(part), _function_type(w, info)))
        else:
            w.emit(depth, "readonly %s: {" % _quoted(part))
            _write_functions(w, children, depth + 1, full + ".")
            w.emit(depth, "};")


def generate_module(module):
    """The declarations (str) of a Module's own functions and the object
    types it registered; `module` is a Module or the path of one to load."""
    what, functions, types = module_contents(module)
    paths, skipped = _class_paths(types)
    w = _Writer(paths)
    w.emit(0, "import * as pf from 'packedfunc';")
    _write_classes(w, types, sorted(paths), 0, "")
    w.emit()
    w.emit(0, "/** The object types, by key, as the module's `types` has them. */")
    w.emit(0, "export interface Types {")
    for key in sorted(paths):
        w.emit(1, "readonly %s: typeof %s;" % ("'%s'" % key, paths[key]))
    w.emit(0, "}")
    w.emit()
    w.emit(0, "/** The functions, by their dotted names, as the module's properties. */")
    w.emit(0, "export interface Functions {")
    _write_functions(w, _functions_tree(functions), 1, "")
    w.emit(0, "}")
    w.emit()
    w.emit(0, "/** What `pf.loadModule<LoadedModule>(PATH)` returns. */")
    w.emit(0, "export type LoadedModule = pf.Module<Types> & Functions;")
    head = ["// TypeScript declarations for %s," % what,
            "// written by `pf stubgen --lang ts` from the metadata of the functions and",
            "// object types, in the types of the Node.js package. Do not edit: generate",
            "// them again. A program types the module with them:",
            "//   import type { LoadedModule } from './NAME.js';   // NAME.d.ts",
            "//   const mod = pf.loadModule<LoadedModule>(PATH);"]
    for key, why in skipped:
        head.append("// Left out: the object type %r (%s)." % (key, why))
    return "\n".join(head + [""] + w.lines).rstrip() + "\n"
