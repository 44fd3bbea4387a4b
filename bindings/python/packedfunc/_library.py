"""The loaded library as this binding sees it.

At import the library's version, its table of entry points and the sizes of
its structs are checked against what this package was written against, and
the numbers of its type codes and object types are read from it: nothing
here restates a number that the library can report. Also keeps whether the
process is shutting down, after which nothing is freed through the library.
Everything here is private.
"""
import atexit
import ctypes
import sys

from . import _mirrors
from ._errors import last_error
from ._ffi import (LIB_PATH, PFGetApiBase, PFGetStructSize, PFGetVersion, PFObjectTypeName,
                   PFTypeCodeName)
from ._mirrors import (DLDataType, DLDevice, DLManagedTensor, DLTensor, PFByteArray, PFCallFrame,
                       PFDLManagedTensorVersioned, PFParamInfo, PFSignatureInfo,
                       PFTensorConstraint, PFTypeInfo, PFValue)

# What this binding was written against. The library's major version must
# match; its stable table must offer at least this API version.
EXPECTED_MAJOR = 0
# 8: the bulk readers, List and Dict; 9: registered object types; 10: named
# parameters, tensors; 12: structural equality; 13: JSON documents and the
# reference count query.
EXPECTED_API_VERSION = 13

MIRRORS = (("PFValue", PFValue), ("PFByteArray", PFByteArray), ("DLDataType", DLDataType),
           ("DLDevice", DLDevice), ("DLTensor", DLTensor), ("DLManagedTensor", DLManagedTensor),
           ("PFCallFrame", PFCallFrame),
           ("PFDLManagedTensorVersioned", PFDLManagedTensorVersioned),
           ("PFTensorConstraint", PFTensorConstraint), ("PFParamInfo", PFParamInfo),
           ("PFSignatureInfo", PFSignatureInfo), ("PFTypeInfo", PFTypeInfo))


def check_library(expected_major=EXPECTED_MAJOR, api_version=EXPECTED_API_VERSION,
                  mirrors=MIRRORS):
    """Refuse (ImportError) a library whose major version, API table or
    struct sizes differ from what this package was written against.
    Returns the library's version string."""
    major, minor, patch = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    PFGetVersion(ctypes.byref(major), ctypes.byref(minor), ctypes.byref(patch))
    version = "%d.%d.%d" % (major.value, minor.value, patch.value)
    if major.value != expected_major:
        raise ImportError(
            "packedfunc: %s is version %s, but this Python package needs major version %d"
            % (LIB_PATH, version, expected_major))
    base = PFGetApiBase().contents
    if not base.GetApi(api_version):
        raise ImportError("packedfunc: %s does not provide API version %d: %s"
                          % (LIB_PATH, api_version, last_error()))
    for name, mirror in mirrors:
        size = ctypes.c_size_t()
        if PFGetStructSize(name.encode(), ctypes.byref(size)) != 0:
            raise ImportError("packedfunc: %s cannot report the size of %s: %s"
                              % (LIB_PATH, name, last_error()))
        if size.value != ctypes.sizeof(mirror):
            raise ImportError(
                "packedfunc: struct %s is %d bytes in %s but %d bytes in the Python "
                "mirror; the package and the library do not match"
                % (name, size.value, LIB_PATH, ctypes.sizeof(mirror)))
    return version


def _names(lookup, numbers, needed, what):
    """name -> number for every number the library names, read through
    `lookup`; ImportError when one of the `needed` names is missing."""
    found = {}
    for number in numbers:
        name = lookup(number)
        if name is not None:
            found[name.decode()] = number
    missing = [n for n in needed if n not in found]
    if missing:
        raise ImportError("packedfunc: %s lacks the %s %s"
                          % (LIB_PATH, what, ", ".join(missing)))
    return found


LIB_VERSION = check_library()
#: Type code numbers by name ("int" -> 0), and names by number.
TYPE_CODES = _names(PFTypeCodeName, range(_mirrors.EXT_BEGIN), _mirrors.TYPE_CODE_NAMES,
                    "type codes")
TYPE_CODE_NAMES = {v: k for k, v in TYPE_CODES.items()}
#: Object type indices by name ("function" -> its PFObjectTypeIndex).
OBJECT_TYPES = _names(PFObjectTypeName, range(1, _mirrors.OBJECT_TYPE_SCAN_END),
                      _mirrors.OBJECT_TYPE_NAMES, "object types")


# ---------------------------------------------------------------------------
# Shutdown
# ---------------------------------------------------------------------------

class _State:
    shutting_down = False


state = _State()


def is_shutting_down():
    return state.shutting_down or sys.is_finalizing()


@atexit.register
def _at_exit():
    # From here on nothing frees: objects that die during interpreter
    # teardown leak their references instead of running finalizers in a
    # half torn-down interpreter. (Calls from C into Python were stopped
    # just before, by the callback module's own exit handler, which was
    # registered later and so runs first.)
    state.shutting_down = True
