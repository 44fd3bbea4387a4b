"""The global registry: functions by name, from Python.

get_global_func, register_func, remove_global_func, list_global_func_names,
seal_registry, registry_sealed and init_api, over the registry entry points
of c_api.h. Names are str in Python and UTF-8 bytes in C (see _name_arg).
Everything here is private; the package re-exports these functions.
"""
import ctypes
import inspect
import sys

from . import _signature
from ._callback import as_function
from ._errors import FunctionNotFoundError, check_call, last_error
from ._ffi import (REGISTER_OVERRIDE, REGISTER_PROTECTED, PFFuncGetGlobal,
                   PFFuncListGlobalNamesWithPrefix, PFFuncRegisterGlobalEx, PFFuncRemoveGlobal,
                   PFRegistryIsSealed, PFRegistrySeal)
from ._function import Function


def _name_arg(where, name, what="name"):
    """A registry or module name (or prefix: `what`) as bytes for C.

    C names are byte strings, usually UTF-8. Names are str in Python, and
    bytes that are not UTF-8 are decoded with surrogateescape (byte 0xFF
    becomes U+DCFF) wherever a name comes from C, so this encodes the same
    way: every listed name can be looked up, registered or removed again. A
    NUL character would silently cut the name short in C (so that "a\\0b"
    meant "a"), and any other lone surrogate has no byte form: both are a
    ValueError naming `where`, with a long name shortened."""
    if not isinstance(name, str):
        raise TypeError("%s: %s must be a str, not %s" % (where, what, type(name).__name__))
    shown = name if len(name) <= 60 else name[:60] + "..."
    if "\0" in name:
        raise ValueError("%s: %s %r contains a NUL character" % (where, what, shown))
    try:
        return name.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError as err:
        raise ValueError("%s: %s %r contains a lone surrogate (%r at index %d), "
                         "which UTF-8 cannot encode"
                         % (where, what, shown, name[err.start], err.start)) from None


def get_global_func(name, allow_missing=False):
    """The global function registered under ``name``, as a :class:`Function`.

    A missing name raises FunctionNotFoundError (a KeyError and a
    ValueError) naming it, or returns None when ``allow_missing`` is true.
    The Function holds its own reference, so it stays valid if the name is
    later removed or overridden.
    """
    out = ctypes.c_void_p()
    check_call(PFFuncGetGlobal(_name_arg("get_global_func", name), ctypes.byref(out)))
    if not out.value:
        if allow_missing:
            return None
        raise FunctionNotFoundError("packedfunc: no global function named %r" % name)
    f = Function._adopt(out.value)
    f._looked_up = name
    return f


def register_func(name_or_func, f=None, override=False, protected=False):
    """Register a Python callable (or a Function) as a global function.

    Usable as::

        @register_func                         # name: the function's __name__
        @register_func("ns.name")
        @register_func("ns.name", override=True)
        @register_func("ns.name", protected=True)
        register_func("ns.name", f)

    Returns the callable itself, so a decorated function stays an ordinary
    Python function. A Python callable's packed function carries the name
    and the callable's docstring as metadata (``Function.name``/``.doc``),
    and its signature (``Function.signature``, so C tools and ``pf describe``
    see it): the parameters' names and defaults, with the grammar's type
    where an annotation is one (int, float, bool, str, bytes, DataType,
    Device, Function, numpy.ndarray, Array, Map, Shape, Object, or a grammar
    text such as ``"tensor<float64,1>"``) and ``any`` otherwise. C and other
    hosts can then call it with keywords. A callable whose parameters the
    grammar cannot describe (*args, keyword-only parameters without
    defaults) publishes none.
    The registry keeps the function alive until the name is removed or
    overridden. A taken name without ``override`` raises
    KeyError naming it. With ``protected`` the name can never again be
    overridden or removed (RuntimeError), for the rest of the process.
    Once :func:`seal_registry` was called, every registration raises
    RuntimeError.
    """
    if f is None and not isinstance(name_or_func, str):
        if not callable(name_or_func):
            raise TypeError("register_func: expected a name or a callable, not %s"
                            % type(name_or_func).__name__)
        func = name_or_func
        # A Function's __name__ is "<anonymous>" without metadata: use its
        # metadata name, or ask for one.
        name = func.name if isinstance(func, Function) else getattr(func, "__name__", None)
        if not isinstance(name, str):
            raise TypeError("register_func: %r has no __name__; pass a name" % (func,))
        return register_func(name, func, override=override, protected=protected)
    encoded = _name_arg("register_func", name_or_func)
    flags = ((REGISTER_OVERRIDE if override else 0)
             | (REGISTER_PROTECTED if protected else 0))

    def register(func):
        packed = as_function(func, "register_func")
        if packed is not func:  # a Python callable carries its name, signature and doc
            doc = getattr(func, "__doc__", None)
            packed.set_info(name=name_or_func, signature=_signature.from_python(func),
                            doc=inspect.cleandoc(doc) if isinstance(doc, str) and doc else None)
        check_call(PFFuncRegisterGlobalEx(encoded, packed.handle, flags))
        return func

    if f is not None:
        return register(f)
    return register


def remove_global_func(name):
    """Remove a global function. A missing name raises
    FunctionNotFoundError (a KeyError and a ValueError) naming it; a
    protected name, or any name once the registry is sealed, raises
    RuntimeError. Callers that still hold the Function keep it alive."""
    if PFFuncRemoveGlobal(_name_arg("remove_global_func", name)) != 0:
        err = last_error()
        if type(err) is KeyError:  # C's kind for a name that is not registered
            raise FunctionNotFoundError(err.args[0] if err.args else name) from None
        raise err


def seal_registry():
    """Seal the global registry for the rest of the process.

    From then on :func:`register_func` (also with ``override``) and
    :func:`remove_global_func` raise RuntimeError, in Python and in C alike,
    while lookups and calls go on. A host seals once it has registered what
    it relies on, so that code loaded later cannot replace it. There is no
    unsealing. Calling it again does nothing. Thread-safe.
    """
    check_call(PFRegistrySeal())


def registry_sealed():
    """Whether :func:`seal_registry` (or the C PFRegistrySeal) was called."""
    out = ctypes.c_int()
    check_call(PFRegistryIsSealed(ctypes.byref(out)))
    return bool(out.value)


def list_global_func_names(prefix=""):
    """The registered names (those starting with ``prefix``), sorted. Bytes
    of a name that are not UTF-8 are decoded with surrogateescape, which
    every function that takes a name reverses."""
    size = ctypes.c_int()
    names = ctypes.POINTER(ctypes.c_char_p)()
    check_call(PFFuncListGlobalNamesWithPrefix(
        _name_arg("list_global_func_names", prefix) if prefix else None,
        ctypes.byref(size), ctypes.byref(names)))
    return [names[i].decode("utf-8", "surrogateescape") for i in range(size.value)]


def init_api(prefix, module_name):
    """Expose every global function named ``prefix.<name>`` as the attribute
    ``<name>`` of the module ``module_name`` (which must be imported), the
    way a package exposes its C functions::

        # mypackage/ops.py
        packedfunc.init_api("mypackage.ops", __name__)

    Only names one level below the prefix that are Python identifiers are
    exposed; use another call with a longer prefix for deeper levels.
    Returns the list of attribute names set.
    """
    _name_arg("init_api", prefix, "prefix")  # a str that can name functions
    if not isinstance(module_name, str):
        raise TypeError("init_api: module_name must be a str, not %s"
                        % type(module_name).__name__)
    module = sys.modules.get(module_name)
    if module is None:
        raise ValueError("init_api: module %r is not imported" % module_name)
    head = prefix + "."
    done = []
    for name in list_global_func_names(head):
        attr = name[len(head):]
        if not attr.isidentifier() or "." in attr:
            continue
        func = get_global_func(name, allow_missing=True)
        if func is not None:  # removed meanwhile
            setattr(module, attr, func)
            done.append(attr)
    return done
