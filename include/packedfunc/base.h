/*
 * packedfunc — the calling convention's foundations: versions, type codes, values,
 * handles, errors and memory.
 */
#ifndef PACKEDFUNC_BASE_H_
#define PACKEDFUNC_BASE_H_

#include <stddef.h>
#include <stdint.h>
#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Versions and export                                                       */
/* ------------------------------------------------------------------------ */

/* The library version. The shared library's soname carries the major
 * version: libpackedfunc.so.0 for 0.x. */
#define PF_VERSION_MAJOR 0
#define PF_VERSION_MINOR 1
#define PF_VERSION_PATCH 0
#define PF_VERSION_STRING "0.1.0"

#if defined(_WIN32)
#define PF_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define PF_EXPORT __attribute__((visibility("default")))
#else
#define PF_EXPORT
#endif

/* Writes the version numbers of the library that is running (which may be
 * newer than this header's): any out may be NULL. Returns 0. Thread-safe. */
PF_EXPORT int PFGetVersion(int* major, int* minor, int* patch);

/* ------------------------------------------------------------------------ */
/* Type codes                                                                */
/* ------------------------------------------------------------------------ */

/*
 * The one list of type codes. Each entry is
 *   X(enumerator, number, name, value_kind, object_type)
 * The enum below, its end, PFTypeCodeName(), the runtime's checks of every
 * argument and result, and the Python binding's table are all generated
 * from it, so they cannot drift. Numbers are part of the ABI and never
 * change once released; new codes take the next number.
 *
 * `value_kind` says what the PFValue beside the code holds, and so what the
 * runtime checks before a call (PFFuncCall) and a return (PFCFuncSetReturn):
 *   kPFValuePlain    a value in the union itself: any bits are valid;
 *   kPFValuePointer  a pointer that must not be NULL;
 *   kPFValueHandle   a handle that must be a live object of `object_type`
 *                    (a PFObjectTypeIndex; 0 accepts any object type).
 * `object_type` is 0 for codes that are not handles.
 *
 * What each code means for its PFValue:
 *   kPFInt            v_int64, a signed 64-bit integer.
 *   kPFFloat          v_float64, a double.
 *   kPFBool           v_int64, 0 or 1.
 *   kPFNull           no value; the union's bits are ignored.
 *   kPFOpaqueHandle   v_handle, a pointer the runtime never dereferences.
 *   kPFDataType       v_type, a DLDataType.
 *   kPFDevice         v_device, a DLDevice.
 *   kPFDLTensorHandle v_handle, a DLTensor*, borrowed for the call.
 *   kPFStr            v_str, a NUL-terminated UTF-8 string.
 *   kPFBytes          v_handle, a PFByteArray*; binary safe.
 *   kPFFuncHandle     v_handle, a PFFunctionHandle.
 *   kPFModuleHandle   v_handle, a PFModuleHandle.
 *   kPFObjectHandle   v_handle, a PFObjectHandle of any object type.
 */
#define kPFValuePlain 0
#define kPFValuePointer 1
#define kPFValueHandle 2

#define PF_TYPE_CODE_LIST(X)                                          \
  X(kPFInt, 0, "int", kPFValuePlain, 0)                               \
  X(kPFFloat, 1, "float", kPFValuePlain, 0)                           \
  X(kPFBool, 2, "bool", kPFValuePlain, 0)                             \
  X(kPFNull, 3, "null", kPFValuePlain, 0)                             \
  X(kPFOpaqueHandle, 4, "handle", kPFValuePlain, 0)                   \
  X(kPFDataType, 5, "dtype", kPFValuePlain, 0)                        \
  X(kPFDevice, 6, "device", kPFValuePlain, 0)                         \
  X(kPFDLTensorHandle, 7, "tensor", kPFValuePointer, 0)               \
  X(kPFStr, 8, "str", kPFValuePointer, 0)                             \
  X(kPFBytes, 9, "bytes", kPFValuePointer, 0)                         \
  X(kPFFuncHandle, 10, "function", kPFValueHandle, kPFObjectFunction) \
  X(kPFModuleHandle, 11, "module", kPFValueHandle, kPFObjectModule)   \
  X(kPFObjectHandle, 12, "object", kPFValueHandle, 0)

/* The X-macro lines stay as written. */
/* clang-format off */
typedef enum {
#define PF_TYPE_CODE_ENUM_(name, num, text, kind, otype) name = num,
  PF_TYPE_CODE_LIST(PF_TYPE_CODE_ENUM_)
#undef PF_TYPE_CODE_ENUM_
  /* One past the largest built-in code: the codes are numbered densely
   * from 0, so this is their count (the runtime checks both). */
#define PF_TYPE_CODE_COUNT_(name, num, text, kind, otype) +1
  kPFTypeCodeEnd = 0 PF_TYPE_CODE_LIST(PF_TYPE_CODE_COUNT_),
#undef PF_TYPE_CODE_COUNT_
  /* Codes in [kPFExtBegin, kPFExtEnd) are reserved for extensions. The
   * runtime passes such a value through a call bit for bit and never
   * interprets or releases it; the extension defines its meaning. */
  kPFExtBegin = 64,
  kPFExtEnd = 128
} PFTypeCode;
/* clang-format on */

/* The name of a type code ("int", "str", ...), "ext" for a code in the
 * extension range, or NULL for an unknown code. The string is static.
 * Thread-safe. Sets no error. */
PF_EXPORT const char* PFTypeCodeName(int type_code);

/* ------------------------------------------------------------------------ */
/* Values and handles                                                        */
/* ------------------------------------------------------------------------ */

/* Binary data that may contain NUL bytes. */
typedef struct {
  const char* data;
  size_t size;
} PFByteArray;

/* The value half of an argument or a result; the type code says which
 * member is live. Exactly 8 bytes on every supported platform. */
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
  const char* v_str;
  DLDataType v_type;
  DLDevice v_device;
} PFValue;

/* A reference-counted object of any type (function, module, tensor, boxed
 * user value, container: see PF_OBJECT_TYPE_LIST). */
typedef void* PFObjectHandle;
/* An object whose type index is kPFObjectFunction. */
typedef void* PFFunctionHandle;
/* An object whose type index is kPFObjectModule. */
typedef void* PFModuleHandle;
/* The return handle of one call in progress: opaque, for PFCFuncSetReturn
 * only; valid only inside that call. */
typedef void* PFRetValueHandle;

/*
 * The one list of object types, as PFObjectGetTypeIndex reports them. Each
 * entry is X(enumerator, index, name); PFObjectTypeName() and the Python
 * binding's table come from it. Indices are part of the ABI; new types take
 * the next index.
 */
#define PF_OBJECT_TYPE_LIST(X)                  \
  X(kPFObjectFunction, 1, "function")           \
  X(kPFObjectModule, 2, "module")               \
  X(kPFObjectTensor, 3, "tensor")               \
  X(kPFObjectBoxed, 4, "boxed")                 \
  X(kPFObjectClosure, 5, "closure")             \
  X(kPFObjectHostGate, 6, "host gate")          \
  X(kPFObjectHostObject, 7, "host object")      \
  X(kPFObjectArray, 8, "array")                 \
  X(kPFObjectMap, 9, "map")                     \
  X(kPFObjectShape, 10, "shape")                \
  X(kPFObjectPrePackCache, 11, "prepack cache") \
  X(kPFObjectList, 12, "list")                  \
  X(kPFObjectDict, 13, "dict")

/* The X-macro lines stay as written. */
/* clang-format off */
typedef enum {
#define PF_OBJECT_TYPE_ENUM_(name, index, text) name = index,
  PF_OBJECT_TYPE_LIST(PF_OBJECT_TYPE_ENUM_)
#undef PF_OBJECT_TYPE_ENUM_
  /* One past the largest object type index. */
#define PF_OBJECT_TYPE_COUNT_(name, index, text) +1
  kPFObjectTypeEnd = 1 PF_OBJECT_TYPE_LIST(PF_OBJECT_TYPE_COUNT_)
#undef PF_OBJECT_TYPE_COUNT_
} PFObjectTypeIndex;
/* clang-format on */

/* The name of an object type index ("function", "tensor", ...), the key
 * of a registered type's index ("mylib.Counter": object_type.h), or NULL
 * for an index that is not one. The string is static, or lives as long as
 * the process. Thread-safe, lock-free. Sets no error. */
PF_EXPORT const char* PFObjectTypeName(uint32_t type_index);

/* ------------------------------------------------------------------------ */
/* Errors                                                                    */
/* ------------------------------------------------------------------------ */

/* The built-in error kinds. A host may use any other kind that is a valid
 * identifier of at most PF_ERROR_KIND_MAX - 1 bytes; bindings map kinds to
 * their own exception types. */
#define PF_ERROR_KIND_MAX 64
#define kPFErrTypeError "TypeError"
#define kPFErrValueError "ValueError"
#define kPFErrKeyError "KeyError"
#define kPFErrIndexError "IndexError"
#define kPFErrAttributeError "AttributeError"
#define kPFErrNotImplementedError "NotImplementedError"
#define kPFErrMemoryError "MemoryError"
#define kPFErrRuntimeError "RuntimeError"

/* The calling thread's last error as one text: "Kind: message", followed by
 * "\n" and the traceback text when there is one; "" when no error was ever
 * recorded on this thread. The one-call way to show an error (as TVM's
 * TVMGetLastError): the same error that PFErrorGetKind, PFErrorGetMessage
 * and PFErrorGetTraceback give in parts, for a reader that needs them
 * apart. The string is owned by the thread's error storage and stays valid
 * until the next error on this thread or the next PFGetLastError call on
 * it. Never NULL. Thread-safe. */
PF_EXPORT const char* PFGetLastError(void);

/* The TVM-compatible spelling of PFErrorSet(kPFErrRuntimeError, msg), for
 * code ported from TVM's C runtime API: records `msg` as the calling
 * thread's error, with kind "RuntimeError" and no traceback; NULL records
 * "unknown error". The text is copied; it may be one of the thread's own
 * error strings (e.g. PFGetLastError()). New code uses PFErrorSet or
 * PFErrorSetFormat, which also give the kind. Thread-safe. */
PF_EXPORT void PFAPISetLastError(const char* msg);

/* Records an error of the given kind and message on the calling thread,
 * replacing any previous error and clearing its traceback. A NULL, empty,
 * over-long or non-identifier kind is recorded as "RuntimeError" (with the
 * given kind kept at the front of the message); a NULL message as "".
 * Both strings are copied. Either may be one of the thread's own error
 * strings (PFErrorGetKind, PFErrorGetMessage, PFErrorGetTraceback,
 * PFGetLastError, as a host re-raising the current error passes them): each
 * is read before it is replaced. If copying fails, the thread's error
 * becomes a MemoryError with a fixed message. Thread-safe. */
PF_EXPORT void PFErrorSet(const char* kind, const char* msg);

/* As PFErrorSet with a printf-style message; the kind, the format and its
 * arguments may be the thread's own error strings too. Always returns -1, so
 * that a packed function can write `return PFErrorSetFormat(...)`. */
PF_EXPORT int PFErrorSetFormat(const char* kind, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* PF_ERROR(kind, fmt, ...): as PFErrorSetFormat (records the error on the
 * calling thread, evaluates to -1), then appends the place that wrote it as
 * the first traceback line, in the form
 *     File "runtime/function.c", line 185, in PFFuncCall
 * (__FILE__, __LINE__ and __func__ of the expansion), so that a reader of
 * the error (the Python binding shows it as a frame) sees where it began.
 * Use it as `return PF_ERROR(kPFErrTypeError, "f: bad x %d", x);`. Same
 * thread safety and copying as PFErrorSetFormat; a function name too long
 * for the line is cut. Header-only: it adds no entry point.
 *
 * The library's rule: every error it records is raised this way, so its
 * message begins with the entry point's name and its traceback with the
 * place that raised it. The one exception is a function call's argument
 * errors, which are the caller's and carry no place, so that the error
 * begins at the call: what a typed function, a bound function (PFFuncBind)
 * or a C function pointer (PFFuncToCFunction) refuses about the arguments
 * it was called with (their number, their conversion) or about the result
 * it converts. (PFSetAllocator's refusal before the first allocation has
 * no place either: recording one would allocate.) */
#define PF_ERROR(kind, ...)               \
  (PFErrorSetFormat((kind), __VA_ARGS__), \
   pf_error_here_("  File \"" __FILE__ "\", line " PF_STRINGIFY_(__LINE__) ", in ", __func__))
#define PF_STRINGIFY_(x) PF_STRINGIFY2_(x)
#define PF_STRINGIFY2_(x) #x

/* Appends one line to the traceback text of the calling thread's error.
 * Each language boundary or call level that passes an error on may add a
 * line describing itself. The line is copied; it may point into the
 * thread's own error strings, the traceback itself included. NULL is
 * ignored. Thread-safe. */
PF_EXPORT void PFErrorAppendTraceback(const char* line);

/* PF_ERROR's second half: appends `where` followed by `func` as one
 * traceback line, built on the stack (no allocation beyond the traceback's
 * own). Always returns -1. Not an entry point: static, in the header. */
static inline int pf_error_here_(const char* where, const char* func) {
  char line[512];
  size_t n = 0;
  for (; where[n] != '\0' && n < sizeof line - 1; ++n) line[n] = where[n];
  for (size_t i = 0; func != NULL && func[i] != '\0' && n < sizeof line - 1; ++i)
    line[n++] = func[i];
  line[n] = '\0';
  PFErrorAppendTraceback(line);
  return -1;
}

/* The parts of the calling thread's last error. Each is owned by the
 * thread's error storage and valid until the next error is recorded on
 * this thread (or PFErrorClear). Never NULL: "" when absent.
 * `PFErrorGetKind()[0] != '\0'` is the cheap test whether an error stands
 * on the calling thread: with none, PFErrorGetKind costs a few
 * instructions (a host's call path may use it per call). */
PF_EXPORT const char* PFErrorGetKind(void);
PF_EXPORT const char* PFErrorGetMessage(void);
PF_EXPORT const char* PFErrorGetTraceback(void);

/* Forgets the calling thread's error. */
PF_EXPORT void PFErrorClear(void);

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */
/* ------------------------------------------------------------------------ */

/* The allocator behind every allocation the runtime makes. A host may
 * install its own, once, before the first packedfunc call that allocates
 * (PFSetAllocator fails with RuntimeError after that). The functions must
 * be thread-safe; `realloc(NULL, n)` must act as malloc. They are the one
 * kind of host code the runtime may call while it holds a lock of its own
 * (the registry's table grows under its lock, as a C library's malloc
 * runs under its callers' mutexes): they must not call into packedfunc.
 * Errors, and everything else that allocates on a failure path, are
 * recorded after the lock is released. */
typedef struct {
  void* (*malloc_fn)(size_t size, void* user_data);
  void* (*realloc_fn)(void* ptr, size_t size, void* user_data);
  void (*free_fn)(void* ptr, void* user_data);
  void* user_data;
} PFAllocator;

/* Installs an allocator (copied), or restores the default with NULL.
 * Errors: incomplete allocator (TypeError); called after the runtime has
 * allocated (RuntimeError). */
PF_EXPORT int PFSetAllocator(const PFAllocator* allocator);

/* Allocates through the runtime's allocator; NULL (with a MemoryError
 * recorded) on failure. A size larger than any object can have
 * (PTRDIFF_MAX) fails at once, naming the argument, without calling the
 * allocator; PFMemRealloc then leaves the block as it was. Memory that the
 * runtime frees on your behalf must come from here. PFMemFree(NULL) is a
 * no-op. */
PF_EXPORT void* PFMemAlloc(size_t size);
PF_EXPORT void* PFMemRealloc(void* ptr, size_t size);
PF_EXPORT void PFMemFree(void* ptr);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_BASE_H_ */
