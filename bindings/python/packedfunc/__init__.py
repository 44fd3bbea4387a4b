"""packedfunc: call C functions by name, and hand Python functions to C.

The Python binding of libpackedfunc::

    import packedfunc as pf

    add = pf.get_global_func("demo.add")     # a C function, by name
    add(40, 2)                               # -> 42

    @pf.register_func("demo.py_mul")         # a Python function, for C
    def mul(a, b):
        return a * b

    plugin = pf.load_module("demo_plugin.so")  # a C plugin module
    plugin.demo.hypot(3, 4)                  # its function "demo.hypot"
    help(plugin.demo.hypot)                  # name, signature, docstring

Values convert both ways: int (int64), float, bool, None, str (UTF-8),
bytes/bytearray/memoryview, Function and any callable, DataType, Device,
opaque handles (ctypes.c_void_p), and tensors (numpy arrays or any object
with ``__dlpack__``, passed without a copy). Any other Python object
crosses as an opaque host object, which C can keep (PFObjectRetain) and
release later on any thread, and comes back as the very same object
(``echo(obj) is obj``). A subclass of int, float or str (an IntEnum member)
crosses as the value it holds, whatever its __int__ or __str__ say. A list
or tuple crosses as an Array and a dict as a Map (str or int keys; lookups
find what a dict finds: 2.0 the key 2), recursively, up to 1000 levels
deep (deeper, or a container that contains itself, is a ValueError); C's Arrays, Maps and
Shapes come back as :class:`Array` (a read-only sequence equal to a list),
:class:`Map` (a read-only mapping equal to a dict) and :class:`Shape` (a
tuple of ints), whose items convert when read. A C error raises the Python exception class of
its kind; a Python exception inside a callback fails the C call with the
matching kind and comes back as the same class.

Tensors that C passes to a Python callback:

- a tensor object (kPFObjectHandle) arrives as a numpy array viewing its
  memory without a copy; the array holds a reference to the object, so the
  callback may keep it;
- a borrowed DLTensor (kPFDLTensorHandle), whose memory C lends only for
  the call, arrives as a numpy array over a private copy, which the
  callback may keep. When the callback returns normally, the copy is
  written back into C's memory if, and only if, its bytes changed: C can
  pass output buffers, and memory that C passed read-only is never written
  by a callback that only reads it;
- a DLTensor that Python itself passed in the same call chain arrives as
  the very same Python object, without a copy.

A Function, Array, Map or Object owns one reference to its C object and
drops it when collected; C keeps the Python objects and callables it was
given until its last reference to them goes. At every full collection
(gc.collect(), and the interpreter's own full collections) the binding
lends C's references to Python's cycle collector, so that a cycle through
C is freed: a Python object holding an Array, Map or Function whose C
object holds it back (through items, bound constants, or a callback's
closure, as in ``f = convert(lambda: f)``), provided that the wrapper
holds the only reference to its C object and nothing else references what
lies between. Cycles that C also holds stay until that reference goes: a
function in the global registry (until remove_global_func), anything C
code keeps, a C object that a second wrapper or container also holds, and
what C does not report (a module's functions, a pre-pack cache's values,
a boxed payload, a graph of more than a million values). Young
collections do not look through C.

Ctrl-C while C is calling a Python callback raises KeyboardInterrupt in the
Python code that called C, like any exception that a callback raises; the
binding prints nothing. When the interpreter exits, Python functions stop
being callable from C: a C thread that calls one afterwards gets
``RuntimeError: the Python interpreter is shutting down`` (the exit waits a
few seconds for callbacks in progress on other threads to return).
Registry names are str; bytes of a name that are not UTF-8 come from C as
surrogate escapes (0xFF as U+DCFF) and go back the same way.

A C plugin or program builds against the package itself: its headers are
in ``get_include()``, its libraries in ``get_library_dir()``, and
``python -m packedfunc --cflags --libs`` prints the flags (with an rpath);
``--pkgconfigdir`` names its pkg-config files.

The shared library is found through $PACKEDFUNC_LIBRARY, then beside this
package, then in the source tree's build output (build/lib).

Calls and callbacks run through a compiled extension (packedfunc._cext)
when it was built, and through pure-Python ctypes otherwise; both convert
the same values with the same errors. ``packedfunc.backend`` says which
("cext" or "ctypes"); PACKEDFUNC_BACKEND=ctypes forces ctypes, and
PACKEDFUNC_BACKEND=cext makes a missing extension an ImportError.
"""
# The package's version, and its only spelling: pyproject.toml reads this
# literal (without importing the package), and a test checks it against
# PF_VERSION_STRING in base.h and the loaded library's version.
__version__ = "0.1.0"

from . import _backend, _library
from . import _hostobj, _nesting  # noqa: F401 (they register conversions)
from ._collections import Array, Map, Shape
from ._mutable import Dict, List
from ._callback import convert
from ._errors import FunctionNotFoundError, check_call, register_error
from ._function import Function, use_count
from ._module import Module, load_module
from ._object import Object, Tensor, from_dlpack, get_tensor_class, set_tensor_class
from ._object_types import (TypeField, TypeInfo, TypeMethod, get_class, register_object,
                            registered_types, same_as)
from ._prepack import PrePackCache
from ._structural import (StructuralKey, get_first_structural_mismatch, structural_equal,
                          structural_hash)
from ._serialize import from_json, to_json
from ._walk import VisitInterrupt, WalkOrder, WalkResult, structural_walk
from ._toolchain import get_include, get_library_dir
from ._registry import (get_global_func, init_api, list_global_func_names, register_func,
                        registry_sealed, remove_global_func, seal_registry)
from ._typed import typed
from ._types import (DataType, Device, DLDeviceType, device, get_device_class,
                     set_device_class)

#: The version of the loaded libpackedfunc and its path.
library_version = _library.LIB_VERSION
library_path = _library.LIB_PATH
#: The implementation of calls in use: "cext" (the compiled extension) or
#: "ctypes" (pure Python); $PACKEDFUNC_BACKEND chooses (see below).
backend = _backend.BACKEND

__all__ = [
    "Function", "Object", "Tensor", "Array", "Map", "Shape", "List", "Dict", "DataType",
    "Device", "device", "DLDeviceType",
    "from_dlpack", "set_tensor_class", "get_tensor_class", "set_device_class", "get_device_class",
    "get_global_func", "register_func", "remove_global_func", "list_global_func_names",
    "convert", "typed", "init_api", "register_error", "check_call", "FunctionNotFoundError",
    "seal_registry", "registry_sealed",
    "Module", "load_module", "PrePackCache",
    "get_class", "register_object", "same_as", "registered_types", "TypeInfo", "TypeField",
    "TypeMethod", "structural_equal", "structural_hash", "get_first_structural_mismatch",
    "StructuralKey", "structural_walk", "WalkOrder", "WalkResult", "VisitInterrupt", "to_json", "from_json", "use_count",
    "get_include", "get_library_dir",
]
