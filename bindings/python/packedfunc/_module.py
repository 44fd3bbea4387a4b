"""Modules: plugins written in C, loaded from shared libraries.

``load_module(path)`` gives a :class:`Module` whose functions are
attributes. A function name with dots reads as attribute access:
``mod.demo.add`` is the function "demo.add" (``mod["demo.add"]`` too).
"""
import ctypes
import os

from ._convert import MODULE, register_encoder, register_object_type
from ._errors import FunctionNotFoundError, check_call, last_error
from ._ffi import (NAME_MAX, REGISTER_OVERRIDE, REGISTER_PROTECTED, PFModExportGlobal,
                   PFModGetFunction, PFModImport, PFModListFunctionNames, PFModListTypes,
                   PFModLoadFromFile, PFObjectTypeName)
from ._function import Function
from ._library import OBJECT_TYPES
from ._object import Object, encode_object, handle_of
from ._object_types import get_class
from ._registry import _name_arg

c_int, c_void_p, c_char_p, byref = ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.byref


def _fs_path(path):
    """A path argument as bytes for C (str, bytes or os.PathLike)."""
    try:
        raw = os.fsencode(path)
    except TypeError:
        raise TypeError("load_module: path must be a str, bytes or os.PathLike, not %s"
                        % type(path).__name__) from None
    if b"\0" in raw:
        raise ValueError("load_module: path %r contains a NUL character" % (path,))
    return raw


def load_module(path):
    """Load a packedfunc module: a shared library whose C code registered
    functions with PF_REGISTER_PACKED / PF_REGISTER_TYPED.

    ``path`` names the library's file: a path with a slash as it is, and a
    name without a slash the file of that name in the working directory
    when there is one (``load_module("mylib.so")`` loads ./mylib.so). Any
    other name without a slash is searched as dlopen searches it (through
    LD_LIBRARY_PATH and the system's library paths). The rule is
    PFModLoadFromFile's, so ``pf --load`` and C callers share it. Nothing
    is registered globally; call :meth:`Module.export_global` for that.

    Errors: a library that cannot be loaded at all (no such file, not a
    shared library, a missing dependency) raises OSError, as ctypes.CDLL
    does, or FileNotFoundError (its subclass) when ``path`` names a file
    that does not exist; the message is the dynamic loader's. A library that
    loads but is not a packedfunc module, or whose registrations are broken,
    raises the C error's own class: ValueError (not a module, a bad
    signature) or KeyError (a name registered twice). A wrong argument type
    raises TypeError; an empty path ValueError.
    """
    raw = _fs_path(path)
    out = c_void_p()
    if PFModLoadFromFile(raw, byref(out)) != 0:
        err = last_error()
        # PFModLoadFromFile reports a failed dlopen, and nothing else, as a
        # RuntimeError (c_api.h): in Python that is an OSError.
        if type(err) is RuntimeError:
            text = os.fsdecode(raw)
            missing = os.sep in text and not os.path.lexists(text)
            raise (FileNotFoundError if missing else OSError)(str(err)) from err
        raise err
    return Module._adopt(out.value, OBJECT_TYPES["module"], os.fsdecode(raw))


class _Names:
    """Shared attribute logic of a Module and of a namespace inside it."""

    __slots__ = ()

    def _lookup_attr(self, module, prefix, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)  # never a function: keeps protocols sane
        full = prefix + attr
        func = module._function(full)
        if func is not None:
            return func
        if full in module._type_keys():
            return get_class(full)
        head = full + "."
        if any(n.startswith(head) for n in module._names() + module._type_keys()):
            return _Namespace(module, head)
        where = ("module %r" % module.path) if not prefix else (
            "namespace %r of module %r" % (prefix[:-1], module.path))
        raise AttributeError("%s has no function or object type %r" % (where, full))

    @staticmethod
    def _children(module, prefix):
        """The attribute names one level below `prefix`: function names,
        type keys and namespaces (the first dotted part of longer names)."""
        out = set()
        for n in module._names() + module._type_keys():
            if n.startswith(prefix):
                out.add(n[len(prefix):].split(".", 1)[0])
        return sorted(out)


class Module(Object, _Names):
    """A packedfunc module (kPFObjectModule): functions that came together
    from one shared library (see :func:`load_module`) or from C.

    Its functions are attributes, with dotted names as nested attributes
    (``mod.demo.add`` for "demo.add"), and items by full name
    (``mod["demo.add"]``); ``dir(mod)`` lists them. The object types that
    its library registered are attributes too, as their classes
    (``mod.demo.Counter``, see :func:`get_class`). An attribute that is
    also a method name (``path``, ``export_global``...) is the method: use
    ``mod[name]``. Each Function taken from a module keeps the module's code
    loaded, so it stays callable after the Module object is gone.
    """

    __slots__ = ("path", "_cache", "_name_list", "_type_list")

    @classmethod
    def _adopt(cls, handle, type_index, path=None):
        self = super()._adopt(handle, type_index)
        self._code = MODULE
        self.path = path  # the path it was loaded from, or None
        self._cache = {}
        self._name_list = None
        self._type_list = None
        return self

    # ---- lookups ----

    def _names(self):
        if self._name_list is None:
            self._name_list = self.list_function_names()
        return self._name_list

    def _type_keys(self):
        if self._type_list is None:
            self._type_list = self.list_types()
        return self._type_list

    def list_types(self):
        """The keys of the object types that the module's library
        registered, sorted (each one's class: ``get_class(key)``, or the
        module's attribute of that dotted name)."""
        size = c_int()
        indices = ctypes.POINTER(ctypes.c_uint32)()
        check_call(PFModListTypes(handle_of(self), byref(size), byref(indices)))
        return sorted(PFObjectTypeName(indices[i]).decode("utf-8", "surrogateescape")
                      for i in range(size.value))

    def _function(self, name):
        func = self._cache.get(name)
        if func is None:
            func = self.get_function(name, allow_missing=True)
            # A hit never changes: the own table is fixed, and imports are
            # only appended after the ones searched before.
            if func is not None:
                self._cache[name] = func
        return func

    def list_function_names(self):
        """The names of the module's own functions (not its imports'), sorted.
        Bytes that are not UTF-8 are decoded with surrogateescape, as the
        registry's names are, so that each name can be looked up again."""
        size = c_int()
        names = ctypes.POINTER(c_char_p)()
        check_call(PFModListFunctionNames(handle_of(self), byref(size), byref(names)))
        return [names[i].decode("utf-8", "surrogateescape") for i in range(size.value)]

    def get_function(self, name, query_imports=True, allow_missing=False):
        """The function ``name`` (full name, dots included) of this module,
        or, with ``query_imports``, of its imports. A missing name raises
        FunctionNotFoundError (a ValueError and a KeyError) naming it, as
        get_global_func does, or returns None
        when ``allow_missing`` is true."""
        out = c_void_p()
        check_call(PFModGetFunction(handle_of(self), _name_arg("Module.get_function", name),
                                    1 if query_imports else 0, byref(out)))
        if not out.value:
            if allow_missing:
                return None
            raise FunctionNotFoundError("packedfunc: module %r has no function named %r"
                                        % (self.path, name))
        return Function._adopt(out.value)

    def __getattr__(self, attr):
        if attr in _OWN_ATTRS:  # not set yet: never a function lookup
            raise AttributeError(attr)
        return self._lookup_attr(self, "", attr)

    def __getitem__(self, name):
        if not isinstance(name, str):
            raise TypeError("Module indices must be function names (str), not %s"
                            % type(name).__name__)
        func = self._function(name) if _possible_name(name) else None
        if func is None:
            raise FunctionNotFoundError("packedfunc: module %r has no function named %r"
                                        % (self.path, name))
        return func

    def __contains__(self, name):
        return (isinstance(name, str) and _possible_name(name)
                and self._function(name) is not None)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._children(self, "")))

    # ---- publishing ----

    def export_global(self, prefix="", override=False, protected=False):
        """Register each of the module's own functions globally as
        ``prefix + name``; returns the registered names. All or nothing: a
        taken name (without ``override``) raises KeyError naming it, and
        nothing is registered. With ``protected`` the names cannot be
        overridden or removed later."""
        if not isinstance(prefix, str):
            raise TypeError("Module.export_global: prefix must be a str, not %s"
                            % type(prefix).__name__)
        raw = b"" if not prefix else _name_arg("Module.export_global", prefix, "prefix")
        # C would blame the full name (prefix + function name) that is too
        # long; the argument at fault is the prefix.
        names = self._names()
        longest = max((len(n.encode("utf-8", "surrogateescape")) for n in names), default=0)
        if names and len(raw) + longest > NAME_MAX:
            raise ValueError("Module.export_global: argument 'prefix' (%d bytes) is too long: "
                             "with the longest function name (%d bytes) it makes a name longer "
                             "than %d bytes" % (len(raw), longest, NAME_MAX))
        flags = (REGISTER_OVERRIDE if override else 0) | (REGISTER_PROTECTED if protected else 0)
        check_call(PFModExportGlobal(handle_of(self), raw, flags))
        return [prefix + n for n in names]

    def import_module(self, dep):
        """Make ``dep`` (a Module) an import of this one: attribute and
        get_function lookups then also search it. A cycle raises ValueError."""
        if not isinstance(dep, Module):
            raise TypeError("Module.import_module: expected a Module, not %s"
                            % type(dep).__name__)
        check_call(PFModImport(handle_of(self), handle_of(dep)))

    def __repr__(self):
        if not handle_of(self):
            return "<packedfunc.Module (released)>"
        where = repr(self.path) if self.path else "(not from a file)"
        return "<packedfunc.Module %s, %d functions>" % (where, len(self._names()))


def _possible_name(name):
    """Whether a str can name a function at all (see _registry._name_arg)."""
    if "\0" in name:
        return False
    try:
        name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


_OWN_ATTRS = frozenset(("_handle", "_code", "type_index", "path", "_cache", "_name_list",
                        "_type_list"))


class _Namespace(_Names):
    """The functions of a module under one dotted prefix: ``mod.demo``."""

    __slots__ = ("_module", "_prefix")

    def __init__(self, module, prefix):
        self._module, self._prefix = module, prefix

    def __getattr__(self, attr):
        return self._lookup_attr(self._module, self._prefix, attr)

    def __dir__(self):
        return self._children(self._module, self._prefix)

    def __repr__(self):
        return "<packedfunc.Module namespace %r of %r>" % (self._prefix[:-1], self._module.path)


register_encoder((Module,), encode_object)
register_object_type("module", Module._adopt)
