"""Loading libpackedfunc, and every ctypes prototype the binding uses.

The prototypes follow the order of include/packedfunc/c_api.h, section by
section, so that this file reads beside the header. No other module of the
package declares an entry point of libpackedfunc or loads the library.

Each entry point keeps or releases the GIL on purpose. Calls that may run
user code (a callee, a finalizer, a Python callback on another thread) or
wait for another thread release it: they go through CDLL, so that other
Python threads run meanwhile and C threads can call back in. Short calls
that never run user code keep it: they go through PyDLL, which is cheaper.
Hot calls are given no argtypes (or only the first): their pointer
arguments are passed as preconverted ctypes objects.

Everything here is private.
"""
import ctypes
import os

from ._mirrors import DLDataType

_LIB_FILES = ("libpackedfunc.so.0", "libpackedfunc.so")


# ---------------------------------------------------------------------------
# Finding and loading the shared library
# ---------------------------------------------------------------------------

def _candidate_paths():
    """Yield (where, path) in lookup order."""
    env = os.environ.get("PACKEDFUNC_LIBRARY")
    if env:
        yield ("$PACKEDFUNC_LIBRARY", env)
        return  # an explicit choice is never second-guessed
    here = os.path.dirname(os.path.abspath(__file__))
    for name in _LIB_FILES:
        yield ("beside the package", os.path.join(here, name))
    # A checkout: bindings/python/packedfunc -> the repository root.
    root = os.path.normpath(os.path.join(here, "..", "..", ".."))
    build_dirs = []
    if os.environ.get("BUILD"):
        build_dirs.append(os.environ["BUILD"])
    build_dirs.append("build")
    for build in build_dirs:
        libdir = os.path.join(root, build, "lib")
        for name in _LIB_FILES:
            yield ("the source tree's build output", os.path.join(libdir, name))


def _load_library():
    tried = []
    for where, path in _candidate_paths():
        if not os.path.exists(path):
            tried.append("  %s: %s (not found)" % (where, path))
            continue
        try:
            # RTLD_GLOBAL: modules loaded later bind to this same copy.
            cdll = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            pydll = ctypes.PyDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as err:
            tried.append("  %s: %s (%s)" % (where, path, err))
            continue
        return path, cdll, pydll
    raise ImportError(
        "packedfunc: cannot find the shared library libpackedfunc.so.0. Looked in:\n"
        + "\n".join(tried)
        + "\nBuild it with `make python` at the root of the packedfunc source tree "
        "(which also copies it beside the package), install the package with pip, "
        "or set PACKEDFUNC_LIBRARY to the library's path."
    )


LIB_PATH, _cdll, _pydll = _load_library()


def _fn(name, restype, argtypes=None, gil=False):
    """An entry point. gil=False releases the GIL during the call (CDLL);
    gil=True keeps it (PyDLL), for short calls that never run user code."""
    f = (_pydll if gil else _cdll)[name]
    f.restype = restype
    if argtypes is not None:
        f.argtypes = argtypes
    return f


c_int, c_uint32, c_size_t = ctypes.c_int, ctypes.c_uint32, ctypes.c_size_t
c_void_p, c_char_p, POINTER = ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER

# ---- Type codes, object types -----------------------------------------------

PFTypeCodeName = _fn("PFTypeCodeName", c_char_p, [c_int], gil=True)
PFObjectTypeName = _fn("PFObjectTypeName", c_char_p, [c_uint32], gil=True)

# ---- Errors -----------------------------------------------------------------

PFErrorSet = _fn("PFErrorSet", None, [c_char_p, c_char_p], gil=True)
PFErrorAppendTraceback = _fn("PFErrorAppendTraceback", None, [c_char_p], gil=True)
PFErrorGetKind = _fn("PFErrorGetKind", c_char_p, [], gil=True)
PFErrorGetMessage = _fn("PFErrorGetMessage", c_char_p, [], gil=True)
PFErrorGetTraceback = _fn("PFErrorGetTraceback", c_char_p, [], gil=True)
PFErrorClear = _fn("PFErrorClear", None, [], gil=True)

# ---- Objects ----------------------------------------------------------------

PFObjectRetain = _fn("PFObjectRetain", c_int, [c_void_p], gil=True)
# Dropping the last reference runs the object's finalizer.
PFObjectFree = _fn("PFObjectFree", c_int, [c_void_p])
PFObjectGetTypeIndex = _fn("PFObjectGetTypeIndex", c_int, [c_void_p, POINTER(c_uint32)],
                           gil=True)
PFObjectGetRefCount = _fn("PFObjectGetRefCount", c_int, [c_void_p, POINTER(ctypes.c_int64)],
                           gil=True)
PFTensorCreateFromDLPack = _fn("PFTensorCreateFromDLPack", c_int,
                               [c_void_p, POINTER(c_void_p)], gil=True)
PFTensorGetDLTensor = _fn("PFTensorGetDLTensor", c_int, [c_void_p, POINTER(c_void_p)],
                          gil=True)
PFTensorToDLPack = _fn("PFTensorToDLPack", c_int, [c_void_p, POINTER(c_void_p)])
# As its unversioned sibling, the versioned create runs the deleter when it
# fails: a producer's deleter takes the GIL itself if it needs it.
PFTensorCreateFromDLPackVersioned = _fn("PFTensorCreateFromDLPackVersioned", c_int,
                                        [c_void_p, POINTER(c_void_p)], gil=True)
PFTensorIsReadOnly = _fn("PFTensorIsReadOnly", c_int, [c_void_p, POINTER(c_int)], gil=True)
PFTensorToDLPackVersioned = _fn("PFTensorToDLPackVersioned", c_int,
                                [c_void_p, POINTER(c_void_p)])

# ---- Data types as text -------------------------------------------------------

# Both only read and write the caller's memory.
PFDataTypeFromString = _fn("PFDataTypeFromString", c_int, [c_char_p, POINTER(DLDataType)],
                           gil=True)
PFDataTypeToString = _fn("PFDataTypeToString", c_int, [DLDataType, c_char_p, c_size_t],
                         gil=True)

# ---- Containers: Array, Map, Shape ------------------------------------------

# None of these runs user code: a failed create releases nothing it did not
# take, and the readers only read. The binding passes the value and code
# arrays as bytes or ready byref objects.
PFArrayCreate = _fn("PFArrayCreate", c_int, [c_void_p, c_void_p, ctypes.c_int64, c_void_p],
                    gil=True)
PFArrayGetSize = _fn("PFArrayGetSize", c_int, [c_void_p, c_void_p], gil=True)
PFArrayGetItem = _fn("PFArrayGetItem", c_int, [c_void_p, ctypes.c_int64, c_void_p, c_void_p],
                     gil=True)
PFMapCreate = _fn("PFMapCreate", c_int, [c_void_p, c_void_p, c_void_p, c_void_p,
                                         ctypes.c_int64, c_void_p], gil=True)
PFMapGetSize = _fn("PFMapGetSize", c_int, [c_void_p, c_void_p], gil=True)
# The key is a PFValue passed by value: its 8 bytes as an unsigned 64-bit
# integer, which the x86-64 and AArch64 ABIs pass as they pass the union.
PFMapGetItem = _fn("PFMapGetItem", c_int, [c_void_p, ctypes.c_uint64, c_int, c_void_p,
                                           c_void_p, c_void_p], gil=True)
PFMapGetItemAt = _fn("PFMapGetItemAt", c_int, [c_void_p, ctypes.c_int64, c_void_p, c_void_p,
                                               c_void_p, c_void_p], gil=True)
PFArrayGetItems = _fn("PFArrayGetItems", c_int, [c_void_p, ctypes.c_int64, ctypes.c_int64,
                                                   c_void_p, c_void_p], gil=True)
PFMapGetItems = _fn("PFMapGetItems", c_int, [c_void_p, ctypes.c_int64, ctypes.c_int64, c_void_p,
                                               c_void_p, c_void_p, c_void_p], gil=True)
PFShapeCreate = _fn("PFShapeCreate", c_int, [c_void_p, ctypes.c_int64, c_void_p], gil=True)
PFShapeGetData = _fn("PFShapeGetData", c_int, [c_void_p, c_void_p, c_void_p], gil=True)

# ---- Mutable containers: List, Dict ---------------------------------------

# Each takes the container's lock, held briefly and never while user code
# runs, so the GIL may be kept while it waits. Calls that may drop a
# reference (a value replaced or removed, a cleared container) release it:
# the release may run a finalizer. A PFValue passed by value is its 8
# bytes as an unsigned 64-bit integer (see PFMapGetItem).
_i64, _u64 = ctypes.c_int64, ctypes.c_uint64
PFListCreate = _fn("PFListCreate", c_int, [c_void_p, c_void_p, _i64, c_void_p], gil=True)
PFListGetSize = _fn("PFListGetSize", c_int, [c_void_p, c_void_p], gil=True)
PFListGetItem = _fn("PFListGetItem", c_int, [c_void_p, _i64, c_void_p, c_void_p], gil=True)
PFListSetItem = _fn("PFListSetItem", c_int, [c_void_p, _i64, _u64, c_int])
PFListAppend = _fn("PFListAppend", c_int, [c_void_p, _u64, c_int], gil=True)
PFListExtend = _fn("PFListExtend", c_int, [c_void_p, c_void_p, c_void_p, _i64], gil=True)
PFListReplace = _fn("PFListReplace", c_int, [c_void_p, _i64, _i64, c_void_p, c_void_p, _i64])
PFListPop = _fn("PFListPop", c_int, [c_void_p, _i64, c_void_p, c_void_p], gil=True)
PFListClear = _fn("PFListClear", c_int, [c_void_p])
PFListToArray = _fn("PFListToArray", c_int, [c_void_p, _i64, _i64, c_void_p], gil=True)
# The walks (structural.h, serialize.h) keep the GIL: they read fields,
# which both backends write under the GIL (one C call each), so no Python
# thread writes one meanwhile. They run no user code while they read: a
# snapshot's value whose last reference they drop (its finalizer) goes at
# the end, as any callback into Python would (Python code that waits
# releases the GIL). PFFromJSON builds only new objects.
PFStructuralEqual = _fn("PFStructuralEqual", c_int, [_u64, c_int, _u64, c_int, c_void_p],
                        gil=True)
PFStructuralHash = _fn("PFStructuralHash", c_int, [_u64, c_int, c_void_p], gil=True)
# PF_STRUCTURAL_SKIP_TENSOR_CONTENT: a macro of the header, which the
# library cannot report.
STRUCTURAL_SKIP_TENSOR_CONTENT = 1
PFStructuralCompare = _fn("PFStructuralCompare", c_int,
                          [_u64, c_int, _u64, c_int, c_uint32, c_void_p, c_void_p], gil=True)
PFStructuralHashEx = _fn("PFStructuralHashEx", c_int, [_u64, c_int, c_uint32, c_void_p],
                         gil=True)
PFToJSON = _fn("PFToJSON", c_int, [_u64, c_int, c_void_p, c_void_p], gil=True)
PFFromJSON = _fn("PFFromJSON", c_int, [c_char_p, c_size_t, c_void_p, c_void_p])
PFDictCreate = _fn("PFDictCreate", c_int, [c_void_p, c_void_p, c_void_p, c_void_p, _i64,
                                           c_void_p], gil=True)
PFDictGetSize = _fn("PFDictGetSize", c_int, [c_void_p, c_void_p], gil=True)
PFDictGetItem = _fn("PFDictGetItem", c_int, [c_void_p, _u64, c_int, c_void_p, c_void_p,
                                             c_void_p], gil=True)
PFDictSetItem = _fn("PFDictSetItem", c_int, [c_void_p, _u64, c_int, _u64, c_int])
PFDictUpdate = _fn("PFDictUpdate", c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p,
                                           _i64])
PFDictPop = _fn("PFDictPop", c_int, [c_void_p, _u64, c_int, c_void_p, c_void_p])
PFDictClear = _fn("PFDictClear", c_int, [c_void_p])
PFDictToArray = _fn("PFDictToArray", c_int, [c_void_p, c_void_p], gil=True)

# ---- Functions --------------------------------------------------------------

# The hot call: runs the callee. No argtypes; Function passes ready byref
# objects.
PFFuncCall = _fn("PFFuncCall", c_int)
# The same call with one argument, a PFCallFrame: ctypes prepares each
# argument of each call, so one argument is cheaper than six.
PFFuncCallFrame = _fn("PFFuncCallFrame", c_int)
# Only the first argument ('ret', a plain int in a callback) is converted by
# ctypes; value and type code are passed as ready byref objects.
PFCFuncSetReturn = _fn("PFCFuncSetReturn", c_int, [c_void_p], gil=True)
PFFuncRetain = _fn("PFFuncRetain", c_int, [c_void_p], gil=True)
# Dropping the last reference runs the function's finalizer.
PFFuncFree = _fn("PFFuncFree", c_int, [c_void_p])
# A call with keyword arguments, which the library matches by name against
# the function's signature: the callee runs. No argtypes: the caller passes
# ready byref objects into its call frame, as for PFFuncCall.
PFFuncCallKw = _fn("PFFuncCallKw", c_int)
# The same three calls keeping the GIL (PyDLL), for a Function whose calls
# keep it (Function.release_gil is False: its author marked it
# kPFFuncNonBlocking, or Python said so): indexed by Function._keep_gil,
# CALLS[k] is (PFFuncCall, PFFuncCallFrame, PFFuncCallKw).
CALLS = ((PFFuncCall, PFFuncCallFrame, PFFuncCallKw),
         tuple(_fn(name, c_int, gil=True) for name in ("PFFuncCall", "PFFuncCallFrame",
                                                       "PFFuncCallKw")))

# ---- Global registry --------------------------------------------------------

# kPFRegisterOverride, kPFRegisterProtected and PF_NAME_MAX (the longest
# registry name, in bytes): macros of the header, which the library cannot
# report.
REGISTER_OVERRIDE = 1
REGISTER_PROTECTED = 2
NAME_MAX = 1024

# Registering and removing may release an overridden or removed function,
# running its finalizer.
PFFuncRegisterGlobalEx = _fn("PFFuncRegisterGlobalEx", c_int, [c_char_p, c_void_p, c_int])
PFFuncGetGlobal = _fn("PFFuncGetGlobal", c_int, [c_char_p, POINTER(c_void_p)], gil=True)
PFFuncRemoveGlobal = _fn("PFFuncRemoveGlobal", c_int, [c_char_p])
PFFuncListGlobalNamesWithPrefix = _fn(
    "PFFuncListGlobalNamesWithPrefix", c_int,
    [c_char_p, POINTER(c_int), POINTER(POINTER(c_char_p))], gil=True)
PFRegistrySeal = _fn("PFRegistrySeal", c_int, [], gil=True)
PFRegistryIsSealed = _fn("PFRegistryIsSealed", c_int, [POINTER(c_int)], gil=True)

# ---- Environment ------------------------------------------------------------

# Setting the signal checker waits for calls of the old checker on other
# threads, which need the GIL to finish.
PFEnvSetSignalChecker = _fn("PFEnvSetSignalChecker", c_int, [c_void_p])

# ---- Host functions ---------------------------------------------------------

PFHostGateCreate = _fn("PFHostGateCreate", c_int, [POINTER(c_void_p)], gil=True)
# Closing the gate waits for callbacks in progress on other threads.
PFHostGateClose = _fn("PFHostGateClose", c_int, [c_void_p, c_char_p, c_int])
# Creating a host function runs its finalizer when it fails. No argtypes:
# the callers pass ctypes objects.
PFFuncCreateFromHostCFunc = _fn("PFFuncCreateFromHostCFunc", c_int)
# Creating a host object runs its finalizer when it fails; the binding's
# finalizer only drops a key (the GIL is held, so the thunk enters at
# once). No argtypes: the callers pass ctypes objects.
PFHostObjectCreate = _fn("PFHostObjectCreate", c_int, gil=True)
PFHostObjectGetPayload = _fn("PFHostObjectGetPayload", c_int, [c_void_p, c_void_p,
                                                               POINTER(c_void_p)], gil=True)
# Only reads the graph (no user code, no lock); it keeps the GIL, on which
# the answer's soundness rests (see _holds).
PFObjectFindOwnedHosts = _fn("PFObjectFindOwnedHosts", c_int,
                             [c_void_p, c_void_p, ctypes.c_int64, c_void_p, ctypes.c_int64,
                              c_void_p, c_void_p], gil=True)

# ---- Function metadata ------------------------------------------------------

PFFuncSetInfo = _fn("PFFuncSetInfo", c_int, [c_void_p, c_char_p, c_char_p, c_char_p],
                    gil=True)
PFFuncGetInfo = _fn("PFFuncGetInfo", c_int,
                    [c_void_p, POINTER(c_char_p), POINTER(c_char_p), POINTER(c_char_p)],
                    gil=True)
# kPFFuncNonBlocking, a macro of the header, which the library cannot report
# (the extension reads it from the header itself).
FUNC_NON_BLOCKING = 1
PFFuncGetFlags = _fn("PFFuncGetFlags", c_int, [c_void_p, POINTER(c_uint32)], gil=True)
PFFuncSetFlags = _fn("PFFuncSetFlags", c_int, [c_void_p, c_uint32], gil=True)
# A function's signature as data (signature.h): borrowed, lives as long as
# the function. PFSignatureParse's is the caller's, freed with
# PFSignatureInfoFree.
PFFuncGetSignatureInfo = _fn("PFFuncGetSignatureInfo", c_int, [c_void_p, POINTER(c_void_p)],
                             gil=True)
PFSignatureParse = _fn("PFSignatureParse", c_int, [c_char_p, POINTER(c_void_p)], gil=True)
PFSignatureInfoFree = _fn("PFSignatureInfoFree", None, [c_void_p], gil=True)

# ---- Typed C functions ------------------------------------------------------

PFSignatureTypeInfo = _fn("PFSignatureTypeInfo", c_int,
                          [c_int, POINTER(c_char_p), POINTER(c_int)], gil=True)
PFFuncCreateFromTyped = _fn("PFFuncCreateFromTyped", c_int,
                            [c_void_p, c_char_p, POINTER(c_void_p)], gil=True)
PFFuncCreateFromCFunc = _fn("PFFuncCreateFromCFunc", c_int,
                            [c_void_p, c_void_p, c_void_p, POINTER(c_void_p)], gil=True)

# ---- Registered object types ------------------------------------------------

# None of these runs user code: lookups read the type table, and making a
# type's code ready (GetMethod, GetConstructor, Alloc) takes the runtime's
# lock only for table work. Setting a field releases the value it held,
# which could run a finalizer: the binding holds a reference to that value
# across the write (and releases it afterwards), so that the GIL can be
# kept, which orders the write against Python's reads of the field. Field
# values are PFValues passed by value, as PFMapGetItem's key: an unsigned
# 64-bit integer.

# kPFObjectTypeRegisteredBegin, kPFFieldWritable and kPFMethodStatic: macros
# of the header, which the library cannot report.
OBJECT_TYPE_REGISTERED_BEGIN = 1024
FIELD_WRITABLE = 1
METHOD_STATIC = 1
PFObjectTypeFind = _fn("PFObjectTypeFind", c_int, [c_char_p, POINTER(c_uint32)], gil=True)
PFObjectTypeGetInfo = _fn("PFObjectTypeGetInfo", c_int, [c_uint32, POINTER(c_void_p)], gil=True)
PFObjectTypeGetMethod = _fn("PFObjectTypeGetMethod", c_int,
                            [c_uint32, c_char_p, POINTER(c_void_p)], gil=True)
PFObjectTypeGetConstructor = _fn("PFObjectTypeGetConstructor", c_int,
                                 [c_uint32, POINTER(c_void_p)], gil=True)
PFObjectAlloc = _fn("PFObjectAlloc", c_int, [c_uint32, POINTER(c_void_p)], gil=True)
PFObjectGetData = _fn("PFObjectGetData", c_int, [c_void_p, POINTER(c_void_p)], gil=True)
PFObjectIsInstance = _fn("PFObjectIsInstance", c_int, [c_void_p, c_uint32, POINTER(c_int)],
                         gil=True)
PFObjectGetField = _fn("PFObjectGetField", c_int, [c_void_p, c_void_p, c_void_p, c_void_p],
                       gil=True)
PFObjectSetField = _fn("PFObjectSetField", c_int,
                       [c_void_p, c_void_p, ctypes.c_uint64, c_int], gil=True)

# ---- Modules ----------------------------------------------------------------

# Loading may take a while (dlopen), and exporting may run the finalizers
# of overridden functions.
PFModLoadFromFile = _fn("PFModLoadFromFile", c_int, [c_char_p, POINTER(c_void_p)])
PFModGetFunction = _fn("PFModGetFunction", c_int,
                       [c_void_p, c_char_p, c_int, POINTER(c_void_p)], gil=True)
PFModImport = _fn("PFModImport", c_int, [c_void_p, c_void_p], gil=True)
PFModListFunctionNames = _fn("PFModListFunctionNames", c_int,
                             [c_void_p, POINTER(c_int), POINTER(POINTER(c_char_p))], gil=True)
PFModExportGlobal = _fn("PFModExportGlobal", c_int, [c_void_p, c_char_p, c_int])
PFModListTypes = _fn("PFModListTypes", c_int,
                     [c_void_p, POINTER(c_int), POINTER(POINTER(c_uint32))], gil=True)

# ---- Versions, sizes and the stable function table --------------------------

PFGetVersion = _fn("PFGetVersion", c_int, [POINTER(c_int)] * 3, gil=True)
PFGetStructSize = _fn("PFGetStructSize", c_int, [c_char_p, POINTER(c_size_t)], gil=True)


class PFApiBase(ctypes.Structure):
    _fields_ = [("GetApi", ctypes.CFUNCTYPE(c_void_p, c_uint32)),
                ("GetVersionString", ctypes.CFUNCTYPE(c_char_p))]


PFGetApiBase = _fn("PFGetApiBase", POINTER(PFApiBase), [], gil=True)
# Its address, for the compiled extension, which reaches the library that
# was loaded here through the table instead of linking to a copy.
PF_GET_API_BASE_ADDRESS = ctypes.cast(_cdll.PFGetApiBase, c_void_p).value


# ---------------------------------------------------------------------------
# The Python C API, reached through ctypes.pythonapi
# ---------------------------------------------------------------------------

def _py(name, restype, argtypes):
    # Indexing (unlike attribute access) makes a new function object, so
    # two prototypes of one function can differ in their argtypes.
    f = ctypes.pythonapi[name]
    f.restype = restype
    f.argtypes = argtypes
    return f


Py_IncRef = _py("Py_IncRef", None, [ctypes.py_object])
PyCapsule_New = _py("PyCapsule_New", ctypes.py_object, [c_void_p, c_void_p, c_void_p])
PyCapsule_IsValid = _py("PyCapsule_IsValid", c_int, [ctypes.py_object, c_char_p])
PyCapsule_GetPointer = _py("PyCapsule_GetPointer", c_void_p, [ctypes.py_object, c_char_p])
PyCapsule_SetName = _py("PyCapsule_SetName", c_int, [ctypes.py_object, c_void_p])
# The same two calls on a capsule given by address, for its destructor: a
# capsule being destroyed must not be given a new reference.
PyCapsule_IsValidAt = _py("PyCapsule_IsValid", c_int, [c_void_p, c_char_p])
PyCapsule_GetPointerAt = _py("PyCapsule_GetPointer", c_void_p, [c_void_p, c_char_p])
# Raises the pending exception, if any, as ctypes raises one that a call of
# the Python C API leaves: how a ctypes callback takes over the exception
# it was entered with (see _object._capsule_destructor).
PyErr_Occurred = _py("PyErr_Occurred", c_void_p, [])
# Raises the exception of a signal handler (KeyboardInterrupt for Ctrl-C).
PyErr_CheckSignals = _py("PyErr_CheckSignals", c_int, [])
# A frame object that is not running and has no caller (f_back is None),
# for the frames that stand for C levels in a traceback (see _errors).
PyThreadState_Get = _py("PyThreadState_Get", c_void_p, [])
PyFrame_New = _py("PyFrame_New", ctypes.py_object,
                  [c_void_p, ctypes.py_object, ctypes.py_object, c_void_p])


def keep_forever(thunk):
    """Returns a ctypes thunk (a C function pointer into Python) after
    taking a reference that is never dropped: C may hold the pointer for
    the life of the process, and the interpreter frees module globals at
    exit, which would free the thunk's code under a C caller."""
    Py_IncRef(thunk)
    return thunk


# ---- Binding constants and the pre-pack cache --------------------------------

# PFFuncBind runs pre-pack hooks and may wait for another thread's hook, and
# its failures release values (finalizers): the GIL is released.
PFFuncBind = _fn("PFFuncBind", c_int, [c_void_p, c_int, c_void_p, c_void_p, c_void_p,
                                       c_void_p, POINTER(c_void_p)])
PFPrePackCacheCreate = _fn("PFPrePackCacheCreate", c_int, [POINTER(c_void_p)], gil=True)
PFPrePackCacheGetStats = _fn("PFPrePackCacheGetStats", c_int,
                             [c_void_p, POINTER(ctypes.c_int64), POINTER(ctypes.c_int64),
                              POINTER(ctypes.c_int64)], gil=True)
