"""ctypes mirrors of the public C structs and function pointer types.

Their sizes are compared with PFGetStructSize when the library loads, and
the numbers of type codes and object types are read from PFTypeCodeName and
PFObjectTypeName, so a library built from a different header is refused
instead of corrupting memory.
"""
import ctypes

# The names of the built-in type codes this binding uses (the library's
# PF_TYPE_CODE_LIST); their numbers come from the library, which must know
# every one of them.
TYPE_CODE_NAMES = ("int", "float", "bool", "null", "handle", "dtype", "device",
                   "tensor", "str", "bytes", "function", "module", "object")
# Start of the extension range in c_api.h (kPFExtBegin); type codes below it
# are scanned for names.
EXT_BEGIN = 64

# The names of the object types this binding treats specially (the
# library's PF_OBJECT_TYPE_LIST); their indices come from the library.
OBJECT_TYPE_NAMES = ("function", "module", "tensor", "host object")
# Object type indices are scanned from 1 up to, not including, this bound.
OBJECT_TYPE_SCAN_END = 64


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int32)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p),
                ("device", DLDevice),
                ("ndim", ctypes.c_int32),
                ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


DLPACK_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor),
                ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


class PFDLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class PFDLManagedTensorVersioned(ctypes.Structure):
    """DLPack 1.x's DLManagedTensorVersioned (object.h's mirror of it):
    its deleter takes the struct's own address, as DLPACK_DELETER."""
    _fields_ = [("version", PFDLPackVersion),
                ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64),
                ("dl_tensor", DLTensor)]


# Macros of object.h, which the library cannot report: the DLPack version
# that it reads (major) and writes (PF_DLPACK_MAJOR_VERSION,
# PF_DLPACK_MINOR_VERSION), which a consumer passes as __dlpack__'s
# max_version, and the flag bits of DLPack 1.1 (PF_DLPACK_FLAG_*).
DLPACK_VERSION = (1, 1)
DLPACK_FLAG_READ_ONLY = 1 << 0
DLPACK_FLAG_IS_COPIED = 1 << 1
DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED = 1 << 2
# Where the DLTensor of a versioned managed tensor begins: unlike an
# unversioned one, it does not start with it.
DL_TENSOR_OFFSET_VERSIONED = PFDLManagedTensorVersioned.dl_tensor.offset
# dtype.h's PF_DTYPE_STRING_MAX: the room any data type's text needs.
DTYPE_STRING_MAX = 32


class PFValue(ctypes.Union):
    _fields_ = [("v_int64", ctypes.c_int64),
                ("v_float64", ctypes.c_double),
                ("v_handle", ctypes.c_void_p),
                ("v_str", ctypes.c_char_p),
                ("v_type", DLDataType),
                ("v_device", DLDevice)]


class PFByteArray(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t)]


class PFCallFrame(ctypes.Structure):
    _fields_ = [("ret_val", PFValue),
                ("ret_type_code", ctypes.c_int32),
                ("num_args", ctypes.c_int32),
                ("func", ctypes.c_void_p),
                ("args", ctypes.c_void_p),
                ("type_codes", ctypes.c_void_p)]


class PFHostCall(ctypes.Structure):
    _fields_ = [("resource_handle", ctypes.c_void_p),
                ("status", ctypes.c_int32),
                ("reserved", ctypes.c_int32)]



# What the library reports of a registered object type (object_type.h).
# Members may be appended in later versions, which read them through the
# pointer: the library's size of each must be at least the mirror's.
class PFFieldInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("type", ctypes.c_char_p),
                ("doc", ctypes.c_char_p),
                ("offset", ctypes.c_size_t),
                ("size", ctypes.c_size_t),
                ("flags", ctypes.c_uint32),
                ("type_index", ctypes.c_uint32)]


class PFMethodInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("signature", ctypes.c_char_p),
                ("doc", ctypes.c_char_p),
                ("flags", ctypes.c_uint32),
                ("type_index", ctypes.c_uint32)]


class PFObjectTypeInfo(ctypes.Structure):
    _fields_ = [("key", ctypes.c_char_p),
                ("doc", ctypes.c_char_p),
                ("type_index", ctypes.c_uint32),
                ("parent_index", ctypes.c_uint32),
                ("depth", ctypes.c_int32),
                ("num_fields", ctypes.c_int32),
                ("num_methods", ctypes.c_int32),
                ("instance_size", ctypes.c_size_t),
                ("fields", ctypes.POINTER(ctypes.POINTER(PFFieldInfo))),
                ("methods", ctypes.POINTER(ctypes.POINTER(PFMethodInfo))),
                ("init", ctypes.POINTER(PFMethodInfo))]

# int (*PFPackedCFunc)(PFValue*, int*, int, PFRetValueHandle, void*)
PACKED_CFUNC = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                ctypes.c_void_p, ctypes.c_void_p)
# void (*PFPackedCFuncFinalizer)(void*)
FINALIZER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
# int (*PFSignalChecker)(void)
SIGNAL_CHECKER = ctypes.CFUNCTYPE(ctypes.c_int)


# A signature as data (signature.h): what PFFuncGetSignatureInfo and
# PFSignatureParse report. Members may be appended in later versions, read
# through the pointers: the library's sizes must be at least the mirrors'.
class PFTensorConstraint(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint32),
                ("ndim", ctypes.c_int32),
                ("dtype", DLDataType),
                ("device_type", ctypes.c_int32)]


class PFTypeInfo(ctypes.Structure):
    pass


PFTypeInfo._fields_ = [("text", ctypes.c_char_p),
                       ("name", ctypes.c_char_p),
                       ("type_code", ctypes.c_int32),
                       ("object_type", ctypes.c_uint32),
                       ("num_args", ctypes.c_int32),
                       ("reserved", ctypes.c_int32),
                       ("args", ctypes.POINTER(ctypes.POINTER(PFTypeInfo))),
                       ("tensor", PFTensorConstraint)]


class PFParamInfo(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p),
                ("type", ctypes.c_char_p),
                ("type_index", ctypes.c_int32),
                ("type_code", ctypes.c_int32),
                ("object_type", ctypes.c_uint32),
                ("has_default", ctypes.c_int32),
                ("default_value", PFValue),
                ("default_code", ctypes.c_int32),
                ("default_text", ctypes.c_char_p),
                ("tensor", PFTensorConstraint),
                ("type_info", ctypes.POINTER(PFTypeInfo))]


class PFSignatureInfo(ctypes.Structure):
    _fields_ = [("text", ctypes.c_char_p),
                ("num_params", ctypes.c_int32),
                ("num_required", ctypes.c_int32),
                ("named", ctypes.c_int32),
                ("result", ctypes.POINTER(PFParamInfo)),
                ("params", ctypes.POINTER(ctypes.POINTER(PFParamInfo)))]
