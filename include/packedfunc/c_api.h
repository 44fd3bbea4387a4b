/*
 * packedfunc — the public C contract.
 *
 * This header is the whole API of packedfunc. Anything that is not declared
 * in a header under include/packedfunc/ is private: it may change or vanish
 * in any release, and the shared library does not export it.
 *
 * packedfunc calls functions through one type-erased convention. A call
 * passes an array of PFValue (an 8-byte tagged union), a parallel array of
 * type codes and a count; the callee returns a status and, optionally, one
 * value. Every function — a hand-written packed C function, a typed C
 * function wrapped through libffi, or a callable of a host language such as
 * Python — becomes a reference-counted PackedFunc behind a PFFunctionHandle,
 * and may be published in a thread-safe global registry by name.
 *
 * Conventions that hold for every entry point unless its comment says
 * otherwise:
 *
 *  - Status. Entry points return int: 0 on success, -1 on failure. Outputs
 *    are the last parameters and are written only on success.
 *  - Errors. A failure records an error in storage private to the calling
 *    thread: a kind (such as "TypeError"), a message that names the entry
 *    point and the offending argument, and an optional traceback text. Read
 *    them with PFGetLastError, PFErrorGetKind, PFErrorGetMessage and
 *    PFErrorGetTraceback. An error stays until the next error on the same
 *    thread replaces it, or PFErrorClear. Success does not clear it.
 *  - Borrowed and owned. Arguments are borrowed for the duration of the
 *    call: the library does not keep a pointer you pass in unless the
 *    comment says it takes a reference or a copy. A handle that an entry
 *    point returns through an out-parameter is a new reference that the
 *    caller releases with the matching *Free function.
 *  - Returned strings. A const char* or PFByteArray that a call returns
 *    (a string or bytes result of PFFuncCall, a name list, an error text)
 *    lives in storage private to the calling thread and stays valid until
 *    the next packedfunc call on that same thread that returns a value of
 *    the same kind; copy it if you need it longer. Each such entry point
 *    says so.
 *  - Never fatal. The library never prints, aborts or exits. Misuse that
 *    can be detected (NULL where a value is needed, negative counts,
 *    unknown type codes, wrong handle kinds) is a -1 with an error.
 *    Allocation failure is a -1 with kind "MemoryError".
 *  - Threads. Every entry point may be called from any thread. Function
 *    handles may be shared between threads; reference counting is atomic.
 *  - fork(). A child process forked while other threads are inside
 *    packedfunc calls may go on using the registry, its functions and
 *    existing closures: the runtime's locks are taken around fork() (with
 *    pthread_atfork handlers installed when the library loads) and released
 *    in both processes. Creating new closures in such a child depends on
 *    libffi's own allocator.
 */
#ifndef PACKEDFUNC_C_API_H_
#define PACKEDFUNC_C_API_H_

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

/* The newest version of the function table (PFApi) that this header
 * describes. Pass it to PFApiBase.GetApi. */
#define PF_API_VERSION 7

#if defined(_WIN32)
#define PF_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define PF_EXPORT __attribute__((visibility("default")))
#else
#define PF_EXPORT
#endif

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

#define PF_TYPE_CODE_LIST(X)                                                   \
  X(kPFInt, 0, "int", kPFValuePlain, 0)                                        \
  X(kPFFloat, 1, "float", kPFValuePlain, 0)                                    \
  X(kPFBool, 2, "bool", kPFValuePlain, 0)                                      \
  X(kPFNull, 3, "null", kPFValuePlain, 0)                                      \
  X(kPFOpaqueHandle, 4, "handle", kPFValuePlain, 0)                            \
  X(kPFDataType, 5, "dtype", kPFValuePlain, 0)                                 \
  X(kPFDevice, 6, "device", kPFValuePlain, 0)                                  \
  X(kPFDLTensorHandle, 7, "tensor", kPFValuePointer, 0)                        \
  X(kPFStr, 8, "str", kPFValuePointer, 0)                                      \
  X(kPFBytes, 9, "bytes", kPFValuePointer, 0)                                  \
  X(kPFFuncHandle, 10, "function", kPFValueHandle, kPFObjectFunction)          \
  X(kPFModuleHandle, 11, "module", kPFValueHandle, kPFObjectModule)            \
  X(kPFObjectHandle, 12, "object", kPFValueHandle, 0)

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
 * A packed C function. `args` and `type_codes` hold `num_args` entries
 * (both may be NULL when num_args is 0); they and every handle, string and
 * byte array in them are borrowed for the duration of the call. Return 0,
 * or -1 after recording an error (PFErrorSet, PFErrorSetFormat). Return a
 * value by calling PFCFuncSetReturn(ret, ...) before returning 0; a
 * function that sets no value returns null. `resource_handle` is the
 * pointer given at creation.
 */
typedef int (*PFPackedCFunc)(PFValue* args, int* type_codes, int num_args,
                             PFRetValueHandle ret, void* resource_handle);

/* Releases the resource_handle of a packed C function. Runs exactly once:
 * when the function's last reference goes, or at once when the create call
 * that was given it fails. It may run on any thread, never while the
 * registry's lock is held, and may call packedfunc entry points. */
typedef void (*PFPackedCFuncFinalizer)(void* resource_handle);

/*
 * The one list of object types, as PFObjectGetTypeIndex reports them. Each
 * entry is X(enumerator, index, name); PFObjectTypeName() and the Python
 * binding's table come from it. Indices are part of the ABI; new types take
 * the next index.
 */
#define PF_OBJECT_TYPE_LIST(X)             \
  X(kPFObjectFunction, 1, "function")      \
  X(kPFObjectModule, 2, "module")          \
  X(kPFObjectTensor, 3, "tensor")          \
  X(kPFObjectBoxed, 4, "boxed")            \
  X(kPFObjectClosure, 5, "closure")        \
  X(kPFObjectHostGate, 6, "host gate")     \
  X(kPFObjectHostObject, 7, "host object") \
  X(kPFObjectArray, 8, "array")            \
  X(kPFObjectMap, 9, "map")                \
  X(kPFObjectShape, 10, "shape")            \
  X(kPFObjectPrePackCache, 11, "prepack cache")

typedef enum {
#define PF_OBJECT_TYPE_ENUM_(name, index, text) name = index,
  PF_OBJECT_TYPE_LIST(PF_OBJECT_TYPE_ENUM_)
#undef PF_OBJECT_TYPE_ENUM_
  /* One past the largest object type index. */
#define PF_OBJECT_TYPE_COUNT_(name, index, text) +1
  kPFObjectTypeEnd = 1 PF_OBJECT_TYPE_LIST(PF_OBJECT_TYPE_COUNT_)
#undef PF_OBJECT_TYPE_COUNT_
} PFObjectTypeIndex;

/* The name of an object type index ("function", "tensor", ...), or NULL for
 * an index that is not one. The string is static. Thread-safe. Sets no
 * error. */
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
 * "\n" and the traceback text when there is one. Returns "" when no error
 * was ever recorded on this thread. The string is owned by the thread's
 * error storage and stays valid until the next error on this thread or the
 * next PFGetLastError call on it. Never NULL. Thread-safe. */
PF_EXPORT const char* PFGetLastError(void);

/* Records `msg` as the calling thread's error, with kind "RuntimeError" and
 * no traceback. NULL records "unknown error". The text is copied; it may be
 * one of the thread's own error strings (e.g. PFGetLastError()). The usual
 * way for a packed function to fail is PFErrorSet or PFErrorSetFormat,
 * which also give the kind. Thread-safe. */
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
 * for the line is cut. Header-only: it adds no entry point. */
#define PF_ERROR(kind, ...)             \
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
 * this thread (or PFErrorClear). Never NULL: "" when absent. */
PF_EXPORT const char* PFErrorGetKind(void);
PF_EXPORT const char* PFErrorGetMessage(void);
PF_EXPORT const char* PFErrorGetTraceback(void);

/* Forgets the calling thread's error. */
PF_EXPORT void PFErrorClear(void);

/* ------------------------------------------------------------------------ */
/* Objects                                                                   */
/* ------------------------------------------------------------------------ */

/* Adds a reference to any object. Errors: NULL handle (TypeError). */
PF_EXPORT int PFObjectRetain(PFObjectHandle obj);

/* Drops a reference; the object is destroyed, and its finalizer run, when
 * the last reference goes. Objects that a destroyed object held (a
 * module's imports, a container's items) are released one after another,
 * not by recursion, so a chain of any length is freed in constant stack; a
 * release made while a finalizer runs on this thread takes effect just after
 * that finalizer returns. NULL is a no-op that returns 0. Releasing more
 * references than were taken is undefined, as with free(). */
PF_EXPORT int PFObjectFree(PFObjectHandle obj);

/* Writes the object's PFObjectTypeIndex to *out.
 * Errors: NULL obj or out (TypeError). */
PF_EXPORT int PFObjectGetTypeIndex(PFObjectHandle obj, uint32_t* out);

/* Finalizer of a boxed object's payload; the same once-only rule as
 * PFPackedCFuncFinalizer. */
typedef void (*PFObjectFinalizer)(void* payload);

/* Creates a boxed object (kPFObjectBoxed): a reference-counted owner of a
 * user pointer, to pass owned values through kPFObjectHandle. `fin` may be
 * NULL; it runs exactly once, when the last reference goes, or at once if
 * this call fails. *out is a new reference.
 * Errors: NULL out (TypeError), allocation (MemoryError). */
PF_EXPORT int PFObjectCreateBoxed(void* payload, PFObjectFinalizer fin,
                                  PFObjectHandle* out);

/* Reads a boxed object's payload (borrowed; lives as long as the object).
 * Errors: NULL arguments (TypeError), not a boxed object (TypeError). */
PF_EXPORT int PFObjectGetBoxedPayload(PFObjectHandle obj, void** out);

/* Creates a tensor object (kPFObjectTensor) that takes ownership of a
 * DLPack managed tensor: its deleter runs exactly once, when the object's
 * last reference goes, or at once if this call fails. *out is a new
 * reference. Errors: NULL arguments (TypeError), allocation (MemoryError). */
PF_EXPORT int PFTensorCreateFromDLPack(DLManagedTensor* managed,
                                       PFObjectHandle* out);

/* The DLTensor of a tensor object, borrowed: valid while the object lives.
 * Errors: NULL arguments or not a tensor object (TypeError). */
PF_EXPORT int PFTensorGetDLTensor(PFObjectHandle tensor, DLTensor** out);

/* Exports a tensor object as a new DLPack managed tensor that shares its
 * data and keeps the object alive until the consumer calls the managed
 * tensor's deleter. This is how a binding hands a tensor to a DLPack
 * consumer (numpy.from_dlpack) without a copy.
 * Errors: NULL arguments or not a tensor (TypeError), MemoryError. */
PF_EXPORT int PFTensorToDLPack(PFObjectHandle tensor, DLManagedTensor** out);

/* ------------------------------------------------------------------------ */
/* Containers: Array, Map, Shape                                             */
/* ------------------------------------------------------------------------ */

/*
 * Three object types hold values, so that lists, dicts and shapes can cross
 * a call as one kPFObjectHandle argument or result:
 *
 *  - an Array (kPFObjectArray) is an ordered sequence of values of any type
 *    code;
 *  - a Map (kPFObjectMap) maps str or int keys to values of any type code
 *    and keeps its entries in the order they were given;
 *  - a Shape (kPFObjectShape) is a sequence of int64 (a tensor's shape or
 *    strides).
 *
 * Each is reference-counted like every object (PFObjectRetain, PFObjectFree,
 * PFObjectGetTypeIndex) and immutable once created: any number of threads
 * may read one container at once without locks, and pass it on.
 *
 * What a container keeps of each value given at creation:
 *  - kPFStr and kPFBytes: a copy, made by the create call (the caller's
 *    string or byte array may go as soon as it returns);
 *  - kPFFuncHandle, kPFModuleHandle, kPFObjectHandle: a reference, taken by
 *    the create call and dropped when the container is destroyed (so
 *    containers nest: an Array of Maps of functions);
 *  - kPFDLTensorHandle: refused (TypeError naming the position). A
 *    DLTensor* is only borrowed for a call, so a container cannot keep it;
 *    store a tensor object (PFTensorCreateFromDLPack) instead;
 *  - every other built-in code, and codes in the extension range: the
 *    PFValue bit for bit (an extension value is never interpreted or
 *    released; keeping what it points to alive is the extension's job).
 * The values are checked as PFFuncCall checks its arguments: an unknown
 * type code, a NULL pointer under a str, bytes or handle code, a handle
 * that is not a live object of the code's type, bytes with NULL data and a
 * nonzero size (TypeError), bytes larger than any object can be
 * (ValueError); the error names the entry point and the position ("value
 * 3", "key 1").
 *
 * The readers return borrowed values: a str points into the container, a
 * bytes value is a PFByteArray* inside it, and a handle is the container's
 * own reference (take one with PFObjectRetain to keep it longer). All of
 * them stay valid exactly as long as the container lives, whatever else
 * the thread calls meanwhile.
 *
 * Releasing the last reference of a container releases the references it
 * holds; a nested container released that way is destroyed by the same
 * release call, after the outer one, not by recursion: releasing an Array
 * nested a million levels deep takes constant stack.
 */

/* Creates an Array of `size` values: values[i] with type code
 * type_codes[i], kept as described above. `values` and `type_codes` may be
 * NULL when size is 0. *out is a new reference (PFObjectFree).
 * Errors: NULL out, NULL values or type_codes with size > 0 (TypeError);
 * size < 0 (ValueError); a size no array can have, or values whose str and
 * bytes together need more memory than any object can have (ValueError);
 * a value that does not pass the checks above, or a kPFDLTensorHandle
 * (TypeError or ValueError naming "value I"); MemoryError. On error nothing
 * is retained or kept, and *out is not written. Thread-safe. */
PF_EXPORT int PFArrayCreate(const PFValue* values, const int* type_codes, int64_t size,
                            PFObjectHandle* out);

/* Writes the number of values of an Array to *out.
 * Errors: array not a live Array, NULL out (TypeError). Thread-safe. */
PF_EXPORT int PFArrayGetSize(PFObjectHandle array, int64_t* out);

/* Reads the value at `index` (0-based) of an Array: *out and
 * *out_type_code. The value is borrowed from the Array (see above): valid
 * as long as the Array lives; a handle is not retained for the caller.
 * Errors: array not a live Array, NULL out or out_type_code (TypeError);
 * index < 0 or >= the size (IndexError naming the index and the size).
 * Thread-safe. */
PF_EXPORT int PFArrayGetItem(PFObjectHandle array, int64_t index, PFValue* out,
                             int* out_type_code);

/* Creates a Map of `size` entries: keys[i] (type code key_codes[i]) maps to
 * values[i] (type code value_codes[i]). Keys are kPFStr or kPFInt; a str
 * key and an int key never equal each other ("1" is not 1), and two str
 * keys are equal when their bytes are. Keys and values are kept as
 * described above; the entries keep the order given here (PFMapGetItemAt).
 * The arrays may be NULL when size is 0. *out is a new reference
 * (PFObjectFree).
 * Keys are hashed with a seed that each process draws at random, so that
 * no caller can pick keys that collide: creating a Map and looking keys up
 * cost the same, on average, whichever keys are given (a Map built from
 * a remote client's arguments included). Iteration order does not depend
 * on the hash.
 * Errors: NULL out, a NULL array with size > 0 (TypeError); size < 0, a
 * size no map can have, or keys and values whose str and bytes together
 * need more memory than any object can have (ValueError); a key of another
 * type code (TypeError naming "key I" and its type); a key equal to an
 * earlier one (ValueError naming both positions and the key); a value that
 * does not pass the checks above (TypeError or ValueError naming "value
 * I"); MemoryError. On error nothing is retained or kept, and *out is not
 * written. Thread-safe. */
PF_EXPORT int PFMapCreate(const PFValue* keys, const int* key_codes, const PFValue* values,
                          const int* value_codes, int64_t size, PFObjectHandle* out);

/* Writes the number of entries of a Map to *out.
 * Errors: map not a live Map, NULL out (TypeError). Thread-safe. */
PF_EXPORT int PFMapGetSize(PFObjectHandle map, int64_t* out);

/* Looks `key` (type code key_code: kPFStr or kPFInt) up in a Map, by
 * hashing. When it is there, writes *found = 1 and its value to *out and
 * *out_type_code, borrowed from the Map (see above); otherwise writes
 * *found = 0, *out_type_code = kPFNull and a zero *out. A miss is not an
 * error. Errors: map not a live Map, NULL out, out_type_code or found, a
 * NULL str key (TypeError); a key_code other than kPFStr or kPFInt
 * (TypeError naming it: no such key can be in a Map). Thread-safe. */
PF_EXPORT int PFMapGetItem(PFObjectHandle map, PFValue key, int key_code, PFValue* out,
                           int* out_type_code, int* found);

/* Reads the entry at `index` (0-based) of a Map, in the order the entries
 * were given at creation: its key (*key, *key_code) and its value (*value,
 * *value_code), all borrowed from the Map (see above). Iterating the
 * indices 0 .. size-1 visits every entry once.
 * Errors: map not a live Map, a NULL output (TypeError); index < 0 or >=
 * the size (IndexError naming the index and the size). Thread-safe. */
PF_EXPORT int PFMapGetItemAt(PFObjectHandle map, int64_t index, PFValue* key, int* key_code,
                             PFValue* value, int* value_code);

/* Creates a Shape: a copy of the `ndim` int64 values at `dims` (any values,
 * negative ones too: strides may be negative). `dims` may be NULL when ndim
 * is 0. *out is a new reference (PFObjectFree).
 * Errors: NULL out, NULL dims with ndim > 0 (TypeError); ndim < 0 or an
 * ndim no shape can have (ValueError); MemoryError. Thread-safe. */
PF_EXPORT int PFShapeCreate(const int64_t* dims, int64_t ndim, PFObjectHandle* out);

/* Reads a Shape: *dims points to its *ndim values, borrowed: valid as long
 * as the Shape lives (never NULL, also for ndim 0).
 * Errors: shape not a live Shape, NULL dims or ndim (TypeError).
 * Thread-safe. */
PF_EXPORT int PFShapeGetData(PFObjectHandle shape, const int64_t** dims, int64_t* ndim);

/* ------------------------------------------------------------------------ */
/* Functions                                                                 */
/* ------------------------------------------------------------------------ */

/* Creates a PackedFunc from a packed C function. `resource_handle` is passed
 * to every call; `fin` (may be NULL) releases it exactly once, when the last
 * reference goes, or at once if this call fails. *out is a new reference:
 * release it with PFFuncFree. Errors: NULL func or out (TypeError), then the
 * finalizer has run; allocation (MemoryError). Thread-safe. */
PF_EXPORT int PFFuncCreateFromCFunc(PFPackedCFunc func, void* resource_handle,
                                    PFPackedCFuncFinalizer fin,
                                    PFFunctionHandle* out);

/*
 * Calls a function. `args`/`type_codes` hold num_args entries, borrowed for
 * the call (NULL is allowed when num_args is 0). On success the result is
 * written to *ret_val and *ret_type_code (kPFNull when the callee set none):
 *   - kPFStr: ret_val->v_str points to a copy in the calling thread's
 *     return storage, valid until the next PFFuncCall on this thread; when
 *     that next call is given it as a str or bytes argument, it stays valid
 *     for the whole of that call (the results of calls nested in a call
 *     with a str or bytes argument go to storage of their own);
 *   - kPFBytes: ret_val->v_handle points to a PFByteArray in the same
 *     storage, with the same lifetime (data and array alike);
 *   - kPFFuncHandle, kPFModuleHandle, kPFObjectHandle: a new reference that
 *     the caller releases;
 *   - other codes: plain values.
 * On failure returns -1 and leaves the callee's error (kind, message,
 * traceback) as the thread's last error; a callee that returned -1 without
 * recording an error yields a RuntimeError saying so. A result the failed
 * callee had set is released; finalizers that this runs may record errors,
 * which are dropped: the error stays the callee's.
 * Errors detected before the call: NULL func, NULL ret_val/ret_type_code,
 * NULL args/type_codes with num_args > 0 (TypeError); num_args < 0
 * (ValueError); an unknown type code, a NULL string or byte array, bytes
 * with NULL data and a non-zero size, a NULL or wrong-kind handle under a
 * handle code (TypeError, naming the argument's position); bytes with a
 * size larger than any object can have, PTRDIFF_MAX (ValueError, naming
 * the argument's position).
 * Reentrant: the callee may call other functions, on any thread.
 * Cost: a call whose arguments all have plain codes (value kind
 * kPFValuePlain) and whose callee sets a plain result makes the checks
 * above (one compare per argument), calls the callee and copies the
 * result out; it allocates nothing and writes no per-thread state. A str
 * or bytes argument or result, or a handle argument or result, takes a
 * longer path.
 */
PF_EXPORT int PFFuncCall(PFFunctionHandle func, PFValue* args, int* type_codes,
                         int num_args, PFValue* ret_val, int* ret_type_code);

/*
 * PFFuncCall with all its parameters in one struct: for hosts whose
 * foreign calls cost per argument (Python's ctypes prepares every argument
 * of every call), which keep a frame per call in progress and rewrite only
 * what changed. The inputs (func, args, type_codes, num_args) are read
 * once, before the callee runs; on success the result is written to
 * ret_val and ret_type_code, exactly as PFFuncCall writes *ret_val and
 * *ret_type_code (same lifetimes, same references); on failure they are
 * left as they were. The frame is borrowed for the call and must not be
 * shared with another call in progress; the callee may make other calls,
 * with frames of their own.
 * Errors: NULL frame (TypeError); otherwise exactly PFFuncCall's, whose
 * messages name the frame's fields as PFFuncCall's arguments.
 * Thread-safe as PFFuncCall is. Layout: fixed (see the asserts below).
 */
typedef struct PFCallFrame {
  PFValue ret_val;        /* out */
  int32_t ret_type_code;  /* out */
  int32_t num_args;       /* in */
  PFFunctionHandle func;  /* in */
  PFValue* args;          /* in: num_args values */
  int* type_codes;        /* in: num_args codes */
} PFCallFrame;
PF_EXPORT int PFFuncCallFrame(PFCallFrame* frame);

/*
 * Sets the return value of the call in progress that `ret` belongs to. Only
 * valid inside a packed C function, on the thread that runs it, with the
 * `ret` it was given (or the `ret` of an enclosing call still in progress
 * on this thread). Strings and bytes are copied; a function, module or
 * object handle gets a new reference held by the call (the callee keeps
 * its own). Setting again replaces the earlier value (releasing it may run
 * its finalizer, whose errors are dropped). `num_ret` must be 1.
 *
 * A PFRetValueHandle is opaque: it points to storage that PFFuncCall keeps
 * for the one call, and only this function writes it. A `ret` that is not
 * the handle of a call in progress on this thread is refused without being
 * written to: NULL, a pointer to anything else, the `ret` of a call that
 * has returned, the `ret` of a call in progress on another thread. A `ret`
 * kept after its call returned points into that call's dead stack frame,
 * which is read to refuse it (memory checkers such as valgrind may report
 * the read); a later call on this thread whose storage lands at the same
 * address makes it that call's handle.
 *
 * Errors: NULL, stale, foreign or forged `ret`, NULL value/type_code,
 * unknown type code, NULL string/bytes/handle (TypeError); num_ret != 1
 * (ValueError); bytes with a size larger than any object can have,
 * PTRDIFF_MAX (ValueError, checked before the copy); MemoryError. On error
 * the call's result is unchanged.
 * Cost: a plain value (a code of value kind kPFValuePlain) into a handle
 * that holds no string or reference is a few compares and two stores.
 */
PF_EXPORT int PFCFuncSetReturn(PFRetValueHandle ret, PFValue* value,
                               int* type_code, int num_ret);

/* Adds a reference to a function. Errors: NULL or not a function
 * (TypeError). Thread-safe. */
PF_EXPORT int PFFuncRetain(PFFunctionHandle func);

/* Drops a reference to a function; when the last goes, its finalizer runs
 * on this thread. NULL is a no-op. Errors: not a function (TypeError). */
PF_EXPORT int PFFuncFree(PFFunctionHandle func);

/* ------------------------------------------------------------------------ */
/* Global registry                                                           */
/* ------------------------------------------------------------------------ */

/* Flags for PFFuncRegisterGlobalEx. */
#define kPFRegisterOverride 1 /* replace a function of the same name */
#define kPFRegisterProtected 2 /* this name can't be overridden or removed */

/* Longest registry name, in bytes, without the terminating NUL. */
#define PF_NAME_MAX 1024

/*
 * Publishes `func` under `name`. The registry takes its own reference (the
 * caller keeps its own) and copies the name. With override == 0 a taken
 * name is an error (KeyError naming it); with override != 0 the new
 * function replaces the old one, whose registry reference is released after
 * the registry's lock is dropped: callers that hold the old function keep
 * it alive. Errors: NULL/empty/over-long name, NULL or non-function func
 * (TypeError/ValueError); taken name (KeyError); protected name or sealed
 * registry (RuntimeError); MemoryError. Thread-safe.
 */
PF_EXPORT int PFFuncRegisterGlobal(const char* name, PFFunctionHandle func,
                                   int override);

/* As PFFuncRegisterGlobal with kPFRegister* flags. kPFRegisterProtected
 * marks the name so that later register, override and remove calls on it
 * fail. */
PF_EXPORT int PFFuncRegisterGlobalEx(const char* name, PFFunctionHandle func,
                                     int flags);

/* Looks a name up. On a hit *out is a new reference (release it with
 * PFFuncFree), so a concurrent override or removal cannot free the function
 * under the caller. On a miss returns 0 with *out == NULL.
 * Errors: NULL/empty name, NULL out (TypeError/ValueError). Thread-safe. */
PF_EXPORT int PFFuncGetGlobal(const char* name, PFFunctionHandle* out);

/* Removes a name, releasing the registry's reference after the lock is
 * dropped. Errors: NULL/empty name (TypeError/ValueError); absent name
 * (KeyError naming it); protected name or sealed registry (RuntimeError).
 * Thread-safe. */
PF_EXPORT int PFFuncRemoveGlobal(const char* name);

/* Lists the registered names, sorted. *out_array and the strings live in
 * the calling thread's list storage until the next PFFuncListGlobalNames*
 * call on this thread; the storage is freed when the thread exits (a call
 * from a thread-specific-data destructor during the exit is fine, and its
 * list is freed too). Errors: NULL outputs (TypeError), MemoryError. */
PF_EXPORT int PFFuncListGlobalNames(int* out_size, const char*** out_array);

/* As PFFuncListGlobalNames, keeping only names that begin with `prefix`
 * (NULL or "" keeps all). */
PF_EXPORT int PFFuncListGlobalNamesWithPrefix(const char* prefix, int* out_size,
                                              const char*** out_array);

/* Seals the registry for the rest of the process: registering, overriding
 * and removing then fail with a RuntimeError, while lookups and calls go
 * on. Lets a host make sure that plugins loaded later cannot replace the
 * functions it relies on. Idempotent. Thread-safe. */
PF_EXPORT int PFRegistrySeal(void);

/* Writes 1 to *out when the registry is sealed, else 0. */
PF_EXPORT int PFRegistryIsSealed(int* out);

/* ------------------------------------------------------------------------ */
/* Memory                                                                    */
/* ------------------------------------------------------------------------ */

/* The allocator behind every allocation the runtime makes. A host may
 * install its own, once, before the first packedfunc call that allocates
 * (PFSetAllocator fails with RuntimeError after that). The functions must
 * be thread-safe; `realloc(NULL, n)` must act as malloc. */
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

/* ------------------------------------------------------------------------ */
/* Environment                                                               */
/* ------------------------------------------------------------------------ */

/* A host's check for a pending interrupt (Ctrl-C): returns 0, or -1 after
 * recording an error (kind "KeyboardInterrupt" by convention). */
typedef int (*PFSignalChecker)(void);

/* Installs the host's checker (NULL removes it). Bindings call this; a
 * Python host wires it to Python's own signal check. Thread-safe.
 *
 * When it returns, no other thread is running the previous checker or
 * about to call it: it waits (polling every millisecond, without holding
 * any lock) until the calls of the old checker that are in progress on
 * other threads have returned. So a host that is shutting down can remove
 * its checker and then free what the checker uses. Calls of the old
 * checker further up the calling thread's own stack are not waited for.
 * Because of that wait, do not call it while holding something that a
 * running checker needs (a Python host calls it with the GIL released).
 * Calls that begin while two threads set checkers at once may be waited
 * for by both. Returns 0. */
PF_EXPORT int PFEnvSetSignalChecker(PFSignalChecker checker);

/* Lets a long-running function ask whether the user asked to interrupt:
 * returns 0 to go on, or -1 with the host's error recorded, which the
 * function should pass up by returning -1. Returns 0 when no host installed
 * a checker. Cheap enough to call every few milliseconds. Thread-safe. */
PF_EXPORT int PFEnvCheckSignals(void);

/* ------------------------------------------------------------------------ */
/* Host functions                                                            */
/* ------------------------------------------------------------------------ */

/*
 * A host function is a packed function whose code belongs to a host
 * language runtime, such as a Python interpreter, that may stop being able
 * to run it while C still holds the function: an interpreter that exits
 * frees its callbacks, and calling one afterwards crashes. A host function
 * is also one whose code cannot be trusted to return a status: a Python
 * exception raised on the very entry of a callback (a Ctrl-C handler runs
 * there) escapes before the callback's own handler, and the foreign-function
 * layer then returns an undefined int to C.
 *
 * A gate (an object of type kPFObjectHostGate) solves both. Every call of a
 * host function, and its finalizer, goes through the function's gate:
 *
 *  - While the gate is open, the call is counted as in progress on the gate
 *    (a lock-free counter), `func` runs, and the call's result is the
 *    status that the host wrote into the PFHostCall it was given, never
 *    func's own return value.
 *  - Once the gate is closed (PFHostGateClose), a call fails at once, with
 *    kind RuntimeError and the message given to PFHostGateClose, without
 *    running any host code; and the finalizer is skipped.
 *
 * So a host that shuts down closes its gate, which waits for the calls in
 * progress to return; after that no thread enters host code again, and the
 * host may free it. Gates, host functions and the wrapper that calls them
 * hold no lock while host code runs.
 */

/* One call of a host function, on the C stack of the gate's wrapper; its
 * address is the `resource_handle` argument of the host's PFPackedCFunc,
 * valid only during that call. */
typedef struct {
  void* resource_handle; /* the resource given at creation */
  int32_t status;        /* kPFHostPending on entry; the host writes 0 or -1 as its last act */
  int32_t reserved;      /* 0; the host leaves it alone */
} PFHostCall;

/* The `status` of a PFHostCall before the host has reported. */
#define kPFHostPending 1

/* Creates an open gate. *out is a new reference (PFObjectFree); every host
 * function made on the gate holds another one.
 * Errors: NULL out (TypeError); MemoryError. Thread-safe. */
PF_EXPORT int PFHostGateCreate(PFObjectHandle* out);

/*
 * Closes a gate, then waits for the calls of its host functions (and their
 * finalizers) that are in progress on OTHER threads to return.
 *
 * From the moment it is closed, a call of any host function of the gate
 * fails at once with kind RuntimeError and the message `message` (copied;
 * NULL gives "the host of this function has shut down"), and a finalizer of
 * one of them is skipped: its resource is deliberately leaked, since the
 * host can no longer take it back. Calls of the gate's functions that are
 * further up the calling thread's own stack (a host function that closes
 * its own gate) are not waited for; they finish after this returns.
 *
 * The wait polls every millisecond and holds no lock between polls (each
 * poll counts the calls under the runtime's gate list lock, running no
 * user code). Calls through a gate count themselves without atomic
 * read-modify-writes where Linux offers the membarrier system call; the
 * close then makes every thread of the process pass a memory barrier,
 * once. `timeout_ms` bounds
 * it: 0 checks once, a negative value waits as long as it takes. Call it
 * without holding anything that host code in progress needs (a Python host
 * calls it with the GIL released), or those calls cannot finish.
 *
 * Idempotent: closing a closed gate keeps the first message and waits
 * again. Returns 0 when no call is in progress on another thread.
 * Errors: gate NULL or not a live gate (TypeError); calls still in progress
 * on other threads at the deadline (kind "TimeoutError", -1; the gate is
 * closed all the same, and those calls go on); MemoryError when the
 * message cannot be copied (the gate is closed all the same, with the
 * default message). Thread-safe.
 */
PF_EXPORT int PFHostGateClose(PFObjectHandle gate, const char* message, int timeout_ms);

/*
 * Creates a host function on `gate`: a PackedFunc that calls `func` through
 * the gate. *out is a new reference (PFFuncFree); the function holds a
 * reference to the gate.
 *
 * Each call passes `func` the caller's args, type codes, count and return
 * handle as usual, and as its resource_handle a PFHostCall* whose
 * resource_handle member is `resource_handle` and whose status is
 * kPFHostPending. `func` sets its value with PFCFuncSetReturn as any
 * packed function does, and writes the call's status into the PFHostCall
 * as its last act: 0 for success; -1 for failure, after recording the error.
 * Its own return value is ignored. The call's result is then:
 *   - status 0: success;
 *   - status -1: failure with the error the host recorded (or, if it
 *     recorded none, PFFuncCall's RuntimeError saying so);
 *   - still kPFHostPending (the host could not report, e.g. an exception
 *     escaped its handler): failure with the error that the host recorded
 *     on this thread during the call, if it recorded one; otherwise a
 *     RuntimeError saying that the host function did not complete;
 *   - any other status: a RuntimeError naming it.
 *
 * `fin` (may be NULL) receives `resource_handle` itself, not a PFHostCall.
 * It runs through the gate, exactly once, when the function's last
 * reference goes, unless the gate is closed by then: then it is skipped
 * and the resource is leaked. If this call fails, `fin` runs at once under
 * the same rule (or directly, when `gate` is not a gate at all).
 *
 * Errors: gate NULL or not a live gate, NULL func or out (TypeError); a
 * closed gate (RuntimeError with the gate's message); MemoryError.
 * Thread-safe; the function may be called from any thread, as the host
 * allows.
 */
PF_EXPORT int PFFuncCreateFromHostCFunc(PFObjectHandle gate, PFPackedCFunc func,
                                        void* resource_handle, PFPackedCFuncFinalizer fin,
                                        PFFunctionHandle* out);

/*
 * A host object is a value of a host language (a Python object) that C
 * holds as a reference-counted object (kPFObjectHostObject), so that it can
 * travel through calls as kPFObjectHandle, be kept with PFObjectRetain and
 * come back to the host as itself. `payload` is the host's own pointer (a
 * key or a reference it keeps); the runtime never reads it. `fin` (may be
 * NULL) releases it when the last reference goes, on whatever thread drops
 * that reference, through the gate like a host function's finalizer: once
 * the gate is closed it is skipped (the payload is deliberately leaked).
 * If this call fails, `fin` runs at once (also through the gate).
 * *out is a new reference (PFObjectFree); the object holds a reference to
 * the gate. Errors: gate not a live host gate, NULL out (TypeError);
 * MemoryError. Thread-safe.
 */
PF_EXPORT int PFHostObjectCreate(PFObjectHandle gate, void* payload, PFObjectFinalizer fin,
                                 PFObjectHandle* out);

/* Reads the payload of a host object made on `gate` (so that a host
 * recognizes its own objects). *out is borrowed: valid while the object
 * lives. Errors: obj not a live host object, gate not a live host gate,
 * NULL out, an object made on another gate (TypeError). Thread-safe. */
PF_EXPORT int PFHostObjectGetPayload(PFObjectHandle obj, PFObjectHandle gate, void** out);

/*
 * For a host's cycle collector: the host objects and host functions of
 * `gate` that the caller's one reference to `root` alone keeps alive.
 *
 * A host value X that holds (through its host wrapper) an Array whose item
 * is a host object holding X looks referenced from outside to a collector
 * that cannot see C's references, and is never collected. When the
 * wrapper holds the only reference to the Array, that reference is all
 * that keeps the host object alive, and the collector may count the host
 * object's reference to X as one the wrapper holds: this call finds those
 * host objects (and host functions, for a callable that holds the wrapper
 * of its own function).
 *
 * The walk starts at `root` and follows the references that objects
 * hold: an Array's items, a Map's values, a bound function's inner
 * function and the constants it holds itself (PFFuncBind), a closure's
 * function (PFFuncToCFunction). No other reference is followed (a
 * module's functions, a function's module, a pre-pack cache's values,
 * whatever a boxed object's payload or an extension value holds); none of
 * these ever changes once its object is created. An object counts as
 * owned by the caller when it is `root`, referenced only by the caller,
 * or when every reference to it is held by owned objects. Objects met
 * only through references that are not followed are never reported: an
 * unknown reference errs on the side of keeping things alive.
 *
 * out[0 .. min(cap, *num_owned)) receives the payload (PFHostObjectCreate)
 * or resource_handle (PFFuncCreateFromHostCFunc) of each owned host object
 * and host function made on `gate`, each object once; when *num_owned is
 * larger than cap, call again with room for that many. *num_owned is 0
 * when root has other references than the caller's, and when a reference
 * count in the graph changed during the walk (another thread took or
 * dropped a reference into it; nothing is reported as owned then).
 *
 * `num_reachable` may be NULL; otherwise it receives how many host
 * objects and host functions of `gate` the walk reached, owned or not. 0
 * means that root never reaches one (the references followed never
 * change), so a collector can stop asking about root. With NULL, the call
 * returns at once when root has other references.
 *
 * `max_values` bounds the work: the walk looks at that many values
 * (items, constants, references) at most; past it, the call gives up with
 * *num_owned 0 and *num_reachable -1. Memory for the walk is allocated and
 * freed by the call.
 *
 * The answer holds while nobody else can take a new reference to an owned
 * object: so, for a reference that its holder alone can use (a Python
 * wrapper under the GIL). A call in progress that borrowed root (or an
 * object inside it) may take one at any time: the host must then still
 * treat a reported object as alive until its finalizer runs. Runs no user
 * code, takes no lock, reads the graph without changing it; thread-safe.
 * Errors: root not a live object, gate not a live gate, NULL num_owned,
 * NULL out with cap > 0 (TypeError); negative max_values or cap
 * (ValueError); MemoryError.
 */
PF_EXPORT int PFObjectFindOwnedHosts(PFObjectHandle root, PFObjectHandle gate,
                                     int64_t max_values, void** out, int64_t cap,
                                     int64_t* num_owned, int64_t* num_reachable);

/* ------------------------------------------------------------------------ */
/* Function metadata                                                         */
/* ------------------------------------------------------------------------ */

/* Attaches a name, a signature (in the typed-signature grammar below) and a
 * docstring to a function. Each field can be set once; NULL leaves a field
 * as it is. Strings are copied. The signature is checked and kept in its
 * canonical form: canonical type names ("double" becomes float64) and no
 * blanks, e.g. "int64(int64,float64)", so that a reader splits it at "(",
 * "," and ")" and reads each type with PFSignatureTypeInfo. The signature
 * describes the arguments a caller should pass; for a function that is not
 * a typed C function it is metadata only, and calls are not checked
 * against it. Errors: not a function (TypeError); a field that is already
 * set, a signature outside the grammar (ValueError, naming the position);
 * MemoryError. On any error nothing is set. Thread-safe. */
PF_EXPORT int PFFuncSetInfo(PFFunctionHandle func, const char* name,
                            const char* signature, const char* doc);

/* Reads a function's metadata. Each out may be NULL; an unset field reads
 * as NULL. A signature is in canonical form (see PFFuncSetInfo). The
 * strings are borrowed and live as long as the function.
 * Errors: not a function (TypeError). Thread-safe. */
PF_EXPORT int PFFuncGetInfo(PFFunctionHandle func, const char** name,
                            const char** signature, const char** doc);

/* ------------------------------------------------------------------------ */
/* Binding constants (partial application)                                   */
/* ------------------------------------------------------------------------ */

/* A shared cache of pre-packed constants (kPFObjectPrePackCache): see
 * PFPrePackCacheCreate. */
typedef void* PFPrePackCacheHandle;

/*
 * A pre-pack hook (after ONNX Runtime's PrePackWeight): transforms a
 * constant, once, into the layout that its function reads fastest.
 * PFFuncBind calls it for every constant bound to a function that has one
 * (PFFuncSetPrePack), on the binding thread, with no lock of the runtime's
 * held, before the bound function exists:
 *  - resource_handle is the function's resource (PFFuncCreateFromCFunc);
 *  - position is where the constant goes in the function's arguments;
 *  - value/type_code are the constant, borrowed for this call only;
 *  - allocator is the runtime's allocator, valid for the process, for the
 *    memory of the packed value (a tensor's data, a boxed payload).
 * To keep the constant as it is, set *is_packed = 0 and return 0. To
 * replace it, write the packed value to *out and *out_type_code, set
 * *is_packed = 1 and return 0: the bound function then passes that value
 * at `position` on every call instead of the constant, and does not keep
 * the constant. The packed value is a plain value (int, float, bool, null,
 * dtype, device, opaque handle: kept bit for bit) or a new reference to a
 * function, module or object (a tensor object in the kernel's layout,
 * usually), which the bound function takes over and releases when it goes.
 * On failure return -1 after recording an error (PFErrorSet...); the bind
 * fails with it and keeps nothing. The hook may call packedfunc entry
 * points. Its code must stay loaded while functions are being bound.
 */
typedef int (*PFPrePackFunc)(void* resource_handle, int position, PFValue value, int type_code,
                             const PFAllocator* allocator, PFValue* out, int* out_type_code,
                             int* is_packed);

/* Gives a function a pre-pack hook, once. `pack_format` names the layout
 * the hook produces ("demo.matmul/blocked8"): two functions with the same
 * format must pack a constant the same way (a cache may share their packed
 * values). The format is copied. Thread-safe; the hook applies to binds
 * that start after this call returns.
 * Errors: func not a live function, NULL pack_format or prepack
 * (TypeError); an empty pack_format, a hook already set (ValueError);
 * MemoryError. On error nothing is set. */
PF_EXPORT int PFFuncSetPrePack(PFFunctionHandle func, const char* pack_format,
                               PFPrePackFunc prepack);

/* Creates an empty pre-pack cache (see PFFuncBind), a reference-counted
 * object: release it with PFObjectFree. Bound functions that use it hold
 * their own references, so it may be released as soon as the binds are
 * done. Thread-safe: any number of threads may bind through one cache.
 * Errors: NULL out (TypeError); MemoryError. */
PF_EXPORT int PFPrePackCacheCreate(PFPrePackCacheHandle* out);

/* Reports what a cache holds now: the number of packed values (*entries),
 * their size in bytes (*bytes: the data of packed values that are tensor
 * objects, the span of their elements at bits * lanes each, rounded up to
 * whole bytes; other packed values count 0) and the number of binds that found
 * their constant already packed (*hits, since creation). Each out may be
 * NULL. Thread-safe. Errors: cache not a live pre-pack cache (TypeError). */
PF_EXPORT int PFPrePackCacheGetStats(PFPrePackCacheHandle cache, int64_t* entries,
                                     int64_t* bytes, int64_t* hits);

/*
 * Creates a function that calls `func` with `num_bound` constants inserted
 * among the caller's arguments: values[i] (type code type_codes[i]) goes at
 * position positions[i] of the argument list that `func` receives, and the
 * caller's arguments fill the other positions in order. Positions are
 * 0-based and strictly increasing. A call of the new function with fewer
 * arguments than its highest position needs fails (TypeError).
 *
 * Ownership: the new function owns its constants. kPFStr and kPFBytes
 * values are copied by this call (the caller's memory may go when it
 * returns); function, module and object handles are retained and released
 * when the new function goes; other codes, and codes in the extension
 * range, are kept bit for bit. A kPFDLTensorHandle is refused: a DLTensor*
 * is only borrowed for a call; bind a tensor object instead. The new
 * function holds a reference to `func`. The bound values are passed to
 * `func` as borrowed arguments on every call (it must not keep them past
 * the call, as with any argument).
 *
 * Pre-packing: when `func` has a pre-pack hook (PFFuncSetPrePack), this
 * call runs it once for each constant, and the bound function keeps the
 * hook's packed value in place of every constant the hook packed (see
 * PFPrePackFunc). A hook that fails fails this call with its error; a hook
 * that returns -1 without one gives a RuntimeError; a packed value of a
 * code other than those PFPrePackFunc allows, or a handle that is not a
 * live object of its code, is a TypeError naming the position (a live
 * object handed over that way is released; other values are not).
 *
 * Metadata: when `func` has a signature (PFFuncSetInfo), the new function's
 * signature is it without the bound parameters, and each position must be
 * below the number of parameters; name and doc are not carried over.
 *
 * Sharing: with a `cache` (PFPrePackCacheCreate) and a hook, a constant
 * that is a tensor object on the CPU, compact (no strides, or row-major
 * ones), is looked up by (the hook's pack format, its position, an xxHash
 * of its dtype, shape and bytes); on a hash match its bytes are compared
 * too, so that a collision never shares. Its bytes are bits * lanes per
 * element, rounded up to whole bytes for the tensor: DLPack packs
 * sub-byte elements (int4, uint1, float4), so 3 int4 are 2 bytes. On a
 * hit the hook does not run and the bound function uses the cached packed
 * value; on a miss the hook runs and its packed value goes into the cache.
 * Binds of an equal constant on several threads at once run the hook
 * once: the others wait for it. The bound function holds a reference to
 * the cache and to the entry; the entry, and the original constant it
 * keeps for the comparison, go when the last function that uses it goes.
 * Other constants, a function without a hook, or a NULL cache: each bind
 * packs its own copy, as above.
 *
 * Hooks that bind: a hook may call PFFuncBind, through any cache. A thread
 * that is running a hook on a miss of a cache (any cache) never waits for
 * an entry that is still being packed, by another thread or by itself:
 * such a bind runs the hook itself and keeps its own packed copy, outside
 * the cache (an entry that is ready is shared as usual). So binds never
 * wait on each other in a cycle: two threads whose hooks each bind the
 * constant that the other is packing, or a hook that binds its own
 * constant again, both finish. Only a thread that is packing for no cache
 * waits, and only for a thread that never waits.
 *
 * *out is a new reference (PFFuncFree), written only on success. Calls of
 * the new function may run on any number of threads at once: they share
 * no scratch state. Thread-safe.
 *
 * Errors: NULL out, func not a live function, NULL positions, values or
 * type_codes with num_bound > 0 (TypeError naming the argument); num_bound
 * negative, a negative position, positions not strictly increasing, a
 * position at or past the end of func's signature (ValueError naming
 * "positions[I]"); a bound value that PFFuncCall would refuse as an
 * argument, or a kPFDLTensorHandle (TypeError or ValueError naming "bound
 * value I"); a cache that is not a live pre-pack cache (TypeError); the
 * hook's errors (above); MemoryError. On error nothing is retained or kept.
 */
PF_EXPORT int PFFuncBind(PFFunctionHandle func, int num_bound, const int* positions,
                         PFValue* values, int* type_codes, PFPrePackCacheHandle cache,
                         PFFunctionHandle* out);

/* ------------------------------------------------------------------------ */
/* Typed C functions and C function pointers (libffi)                        */
/* ------------------------------------------------------------------------ */

/*
 * A typed C function is an ordinary C function, such as
 * `int64_t add(int64_t, int64_t)`, described by a signature string; the
 * runtime converts between packed values and C values in both directions
 * through that description.
 *
 * Signature grammar (ASCII; blanks — space, tab, newline, carriage return — may appear
 * around every token):
 *
 *     signature := RET "(" [ ARG { "," ARG } ] ")"
 *     RET       := "void" | TYPE
 *     ARG       := TYPE
 *
 * At most PF_TYPED_MAX_ARGS (16) arguments; "()" means none ("(void)" is
 * an error, to keep one spelling). Type names are case-sensitive:
 *
 *   name     C argument type        from a packed argument     C result -> packed
 *   -------  ---------------------  -------------------------  ------------------
 *   int8     int8_t                 kPFInt, kPFBool (range-    kPFInt
 *   int16    int16_t                checked: a value outside   kPFInt
 *   int32    int32_t                the C type is ValueError)  kPFInt
 *   int64    int64_t                                           kPFInt
 *   uint8    uint8_t                  (negative -> ValueError) kPFInt
 *   uint16   uint16_t                                          kPFInt
 *   uint32   uint32_t                                          kPFInt
 *   uint64   uint64_t               kPFInt >= 0, kPFBool       kPFInt; above
 *                                                              INT64_MAX: ValueError
 *   float32  float                  kPFFloat, kPFInt, kPFBool  kPFFloat (exact)
 *   float64  double ("double" is    kPFFloat, kPFInt, kPFBool  kPFFloat
 *            accepted as an alias;
 *            "float" is an error)
 *   bool     bool (_Bool)           kPFBool; kPFInt 0 or 1     kPFBool
 *   str      const char*            kPFStr                     kPFStr (copied), or
 *                                                              kPFNull for NULL
 *   bytes    const PFByteArray*     kPFBytes                   kPFBytes; the C
 *            (result: PFByteArray                              function returns a
 *            by value)                                         PFByteArray by value
 *   ptr      void*                  kPFOpaqueHandle; kPFNull   kPFOpaqueHandle, or
 *                                   (NULL)                     kPFNull for NULL
 *   tensor   DLTensor*              kPFDLTensorHandle; kPFNull kPFDLTensorHandle, or
 *                                   (NULL); as an argument of  kPFNull for NULL
 *                                   a typed function also a
 *                                   tensor object (its
 *                                   DLTensor, borrowed)
 *   dtype    DLDataType (by value)  kPFDataType                kPFDataType
 *   device   DLDevice (by value)    kPFDevice                  kPFDevice
 *   func     PFFunctionHandle       kPFFuncHandle (a live      kPFFuncHandle, or
 *            (borrowed)             function); kPFNull (NULL)  kPFNull for NULL
 *   array    PFObjectHandle         kPFObjectHandle of a live  kPFObjectHandle, or
 *            (borrowed)             Array; kPFNull (NULL)      kPFNull for NULL
 *   map      PFObjectHandle         the same, of a Map         the same
 *   shape    PFObjectHandle         the same, of a Shape       the same
 *   object   PFObjectHandle         any live object, under     kPFFuncHandle for a
 *            (borrowed)             kPFObjectHandle,           function,
 *                                   kPFFuncHandle or           kPFModuleHandle for a
 *                                   kPFModuleHandle; kPFNull   module, else
 *                                   (NULL)                     kPFObjectHandle; or
 *                                                              kPFNull for NULL
 *   void     (result only)          -                          no value (kPFNull)
 *
 * Conversion rules, the same in both directions:
 *  - Any other type code is a TypeError; so a float passed where an integer
 *    or bool is expected is a TypeError, never a silent truncation.
 *  - Integers are range-checked against the C type: an int64 that does not
 *    fit an int32 argument, a negative value for an unsigned argument, or an
 *    int other than 0 or 1 for a bool, is a ValueError.
 *  - An int (or bool) converts to float32/float64 when a double holds it
 *    exactly (every int of magnitude up to 2^53, and larger ones that happen
 *    to be exact); otherwise it is a ValueError.
 *  - float32 narrowing rounds a double to the nearest float, as C does; a
 *    finite double beyond +-FLT_MAX is a ValueError; infinities and NaN pass.
 *  - A str, bytes, ptr or tensor pointer is borrowed for the call: the
 *    runtime never frees or keeps it.
 *
 * Results of a typed function (the C function's return value):
 *  - str: the C function returns a `const char*` that must stay valid after
 *    it returns (static, thread-local or owned elsewhere); the runtime
 *    copies it at once into the caller's return storage and never frees it.
 *    A NULL result becomes kPFNull.
 *  - bytes: a PFByteArray returned by value, under the same rule for its
 *    data; {NULL, 0} is empty bytes; NULL data with a nonzero size, or a
 *    size larger than any object can have (PTRDIFF_MAX), is a ValueError.
 *  - tensor and ptr: the pointer is passed on as is; its lifetime is the C
 *    function's business.
 *  - func, array, map, shape, object: the C function transfers a reference
 *    to the caller (as every packedfunc entry point that returns a handle
 *    does); the runtime hands that reference to the PFFuncCall caller, who
 *    releases it. A result that is not a live object of the type (an array
 *    result that is a Map, a func result that is not a function) fails the
 *    call with a TypeError naming "result"; when it is a live object of
 *    another type, the reference that came with it is released.
 *
 * An argument of type array, map or shape must be a kPFObjectHandle of
 * that object type; another object type is a TypeError naming the
 * argument and both types ("argument 0: expected array, got map object").
 * The handle is borrowed for the call, as every argument is.
 */

/* The largest number of arguments in a typed signature. */
#define PF_TYPED_MAX_ARGS 16

/* The types of the signature grammar, numbered from 0 in the order of the
 * table above, starting with void: writes the name of type `index` (static
 * storage) and the type code that a C value of that type becomes as a packed
 * value (kPFNull for void; for the pointer-like types, also the code of a
 * non-NULL argument; kPFObjectHandle for array, map, shape and object, though
 * an object result that is a function or module takes their codes). Either
 * out may be NULL. Bindings and tools read the
 * grammar from here instead of keeping their own list.
 * Errors: index outside the types (IndexError). Thread-safe. */
PF_EXPORT int PFSignatureTypeInfo(int index, const char** name, int* type_code);

/*
 * Wraps a plain C function pointer `fn` of the given signature as a
 * PackedFunc. The signature is parsed, and its libffi call interface
 * prepared (ffi_prep_cif), once, here; a call then only checks and converts
 * its arguments. The canonical signature text (canonical type names, no
 * blanks, "double" spelled float64) is stored as the function's signature
 * metadata (PFFuncGetInfo); the name and doc stay free for PFFuncSetInfo.
 *
 * Each call checks the number of arguments (TypeError) and converts every
 * argument by the rules above; a failure is a TypeError or ValueError whose
 * message names the function (its metadata name when set, and its
 * signature), the argument position (0-based), the expected type and the
 * given type code (and value, for a range error), e.g.
 *   "typed function 'scale' int32(int32): argument 0: expected int32, got
 *    int 4294967296, which is out of its range [-2147483648, 2147483647]".
 *
 * Common signatures — at most four arguments, each int64, uint64, float64
 * or pointer-like (str, bytes, ptr, tensor, func, array, map, shape,
 * object), and a result that is
 * void, int64, uint64, float64, bool, int32 or pointer-like — are called
 * through a direct cast of `fn` to that prototype, on targets whose C ABI
 * passes pointers as 64-bit integers (x86-64, AArch64); every other
 * signature goes through libffi. Both give the same results.
 *
 * `fn` must really have the signature's C prototype; the runtime cannot
 * check that. It is borrowed for the function's whole life: keep its code
 * loaded while the handle lives. *out is a new reference (PFFuncFree).
 * Errors: NULL fn, signature or out (TypeError); a malformed signature
 * (ValueError naming the position, 0-based, e.g. `bad signature
 * "int64(int64,,int64)" at position 12: expected a type name`): an unknown
 * type, a missing parenthesis, trailing text, void as an argument, more than
 * PF_TYPED_MAX_ARGS arguments, an empty string; MemoryError.
 * Thread-safe; the function may be called from any thread (as thread-safe
 * as `fn` itself).
 */
PF_EXPORT int PFFuncCreateFromTyped(void* fn, const char* signature,
                                    PFFunctionHandle* out);

/*
 * Turns any function (a packed C function, a typed function, a host
 * callable such as a Python function) into a real C function pointer with
 * the C prototype that `signature` describes (same grammar and table as
 * above), through a libffi closure: for example a "int32(ptr,ptr)"
 * comparator to hand to qsort.
 *
 * *out_closure is a new reference to an object of type kPFObjectClosure
 * that owns the pointer and holds a reference to `func`; *out_fn is valid
 * until that object's last reference goes (PFObjectFree), which frees the
 * closure: do not call *out_fn after that. The closure's executable memory
 * comes from libffi (ffi_closure_alloc), not from the installed allocator.
 *
 * A call through *out_fn converts each C argument to a packed value (an
 * integer to kPFInt, a uint64 above INT64_MAX being a ValueError; float32 or
 * float64 to kPFFloat; bool to kPFBool; a NULL str, bytes, ptr, tensor,
 * func, array, map, shape or object to kPFNull, else kPFStr, kPFBytes,
 * kPFOpaqueHandle, kPFDLTensorHandle, kPFFuncHandle or kPFObjectHandle (an
 * object as in the table's result column), all borrowed; a handle that is
 * not a live object of its type is an error), calls `func` with PFFuncCall, and
 * converts the result back by the rules above, where kPFNull is also
 * accepted for a str or bytes result (NULL, or {NULL, 0}). A str or bytes
 * result points into the calling thread's return storage: valid until the
 * next packedfunc call on that thread that returns a string; copy it. A
 * func, array, map, shape or object result is a new reference that the C
 * caller must release; a handle result of the wrong object type is an
 * error, and its reference is released.
 *
 * Errors cannot unwind through C code. When a call fails — an argument that
 * does not convert (a bytes argument with NULL data and a nonzero size, or
 * a size larger than PTRDIFF_MAX, is a ValueError), `func` failing, or a
 * result that does not match the signature (TypeError/ValueError naming the
 * closure and "result"; a mismatched handle result is released, and errors
 * that its finalizer records are dropped) — the
 * pointer returns the zero value of its result type (0, 0.0, false, NULL,
 * {NULL, 0}, an all-zero dtype or device), and the closure keeps the FIRST
 * such error (kind, message and traceback, plus a traceback line naming the
 * closure). The failing call also leaves that error as its thread's error.
 * While an error is kept, calls through the pointer return the zero value at
 * once without running `func`, so that e.g. a failed qsort comparator is not
 * called again for every remaining comparison. The caller of the C code that
 * used the pointer reads the error with PFClosureCheckError, which also
 * re-arms the pointer.
 *
 * Errors: NULL or dead func (TypeError); NULL signature, out_closure or
 * out_fn (TypeError); a malformed signature (ValueError as above);
 * MemoryError (also when libffi cannot allocate the closure). Thread-safe;
 * the pointer may be called from any thread, concurrently.
 */
PF_EXPORT int PFFuncToCFunction(PFFunctionHandle func, const char* signature,
                                PFObjectHandle* out_closure, void** out_fn);

/*
 * Collects the error kept by a closure (see PFFuncToCFunction): when a call
 * through its pointer has failed since the last check, makes the first such
 * error (kind, message, traceback) the calling thread's error, forgets it in
 * the closure and returns -1; otherwise returns 0 and leaves the thread's
 * error alone. Call it after the C code that used the pointer returns.
 * Errors: NULL closure or not a closure object (TypeError, -1).
 * Thread-safe: when several threads check at once, one of them gets the
 * error.
 */
PF_EXPORT int PFClosureCheckError(PFObjectHandle closure);

/* ------------------------------------------------------------------------ */
/* Modules                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * A module is a set of named functions that came together: from a shared
 * library (PFModLoadFromFile), or from a table of descriptors such as the
 * one the registration macros below build in a program
 * (PFModLoadFromDescriptors, PF_MODULE_LOAD_SELF). Loading a module does
 * not touch the global registry; PFModExportGlobal publishes its functions
 * there, or a host looks them up in the module with PFModGetFunction.
 *
 * Lifetime. A module handle is a reference-counted object
 * (kPFObjectModule). Each function of a module loaded from a shared library
 * keeps that library loaded: dlclose runs only when the module handle AND
 * every function handle taken from it are gone, so releasing the module
 * first and calling one of its functions later is safe.
 *
 * The same holds for every object whose code may run later, whoever made
 * it: when an object is created with a code pointer — the function and the
 * finalizer of PFFuncCreateFromCFunc, the `fn` of PFFuncCreateFromTyped,
 * the finalizer of PFObjectCreateBoxed, the DLPack deleter of
 * PFTensorCreateFromDLPack — the runtime asks the dynamic loader which
 * shared library contains that code and takes a reference to it (one
 * dlopen reference per loaded library, shared by all its objects), which it
 * drops after the object's finalizer or deleter has run. So a tensor, a
 * function or a boxed object that a module's code creates and returns may
 * outlive the module and all of its functions; the library is closed when
 * the last of them goes. Code in the main program and in libpackedfunc
 * itself never unloads and holds nothing; code that no library contains
 * (libffi closures, JIT-compiled code) holds nothing either, and whoever
 * made it must keep it alive as long as objects use it.
 *
 * Releasing. Dropping the last reference of a module releases its
 * functions and imports; an object released by a finalizer or by another
 * object's destruction is destroyed right after that one, by the same
 * release call and on the same thread, not by recursion: so releasing a
 * chain of a million modules, each importing the next, takes constant
 * stack.
 *
 * Threads. Every entry point here is thread-safe. A module's function table
 * never changes after loading; only its import list does (PFModImport). The
 * import lists are guarded by a process-wide lock that is held only for
 * plain memory work, never while user code runs; the runtime resets its
 * module locks in the child of fork() (pthread_atfork), so a child may load,
 * import and look up modules even when other threads were using them when
 * the process forked.
 */

/* Loads the shared library at `path` (dlopen with RTLD_NOW | RTLD_LOCAL)
 * and builds a module of every function that the library registered with
 * PF_REGISTER_PACKED and PF_REGISTER_TYPED. Each function carries metadata
 * (PFFuncGetInfo): its registered name, its doc when given, and for a
 * typed function its canonical signature.
 *
 * The file is checked before dlopen reads it, so that a bad file is an
 * error and never a crash or a hang: it must be a regular file (not a
 * FIFO, a device or a directory), opened without blocking; its ELF header
 * must be one this process can load (class, byte order, machine); and its
 * program headers and every segment's file range must lie inside the file
 * (a truncated file would make dlopen fault with SIGBUS). After loading,
 * every pointer of the library's function table is checked against the
 * library's own loaded segments (dl_iterate_phdr) before it is read: each
 * descriptor must lie in the library's readable data, its name, signature
 * and doc must be strings that end inside it, and its function pointer must
 * point at loaded code (the library's own, or that of a library it links).
 *
 * Paths. A path with a slash is opened as it is (relative to the current
 * directory). A name without a slash that names an existing file (anything
 * but a directory) in the current directory is that file, opened as
 * "./NAME": the file a caller who sees it there means, which dlopen alone
 * would not look for; so "mylib.so" beside the caller loads, even when
 * dlopen's search path holds another library of that name. Any other name
 * without a slash is searched as dlopen searches it: a
 * library already loaded under that name is used as it is; otherwise the
 * directories of dlopen's search path (DT_RPATH, LD_LIBRARY_PATH,
 * DT_RUNPATH, the system directories, as RTLD_DI_SERINFO lists them) are
 * tried in order, and the first that holds a regular ELF file for this
 * machine is checked and loaded by its full path. A name that none of them
 * holds goes to dlopen unchanged, which then finds it through the loader's
 * cache (ldconfig's system libraries, which are not checked) or fails.
 *
 * The library should link against libpackedfunc.so (DT_NEEDED
 * libpackedfunc.so.0), so that it binds to the same copy of the runtime as
 * its host. Loading the same path twice works and gives two modules with
 * separate function objects over the one loaded copy of the library (the
 * dynamic loader counts the two loads; no constructor reruns). Nothing is
 * registered globally, so two modules may define the same name.
 *
 * *out is a new reference (PFModFree).
 * Errors: NULL path or out (TypeError); empty path (ValueError); a file
 * that cannot be loaded (RuntimeError: "cannot load 'PATH': " and why: the
 * system's "cannot open shared object file: No such file or directory",
 * "it is a FIFO, not a regular file", "invalid ELF header", "file
 * truncated: ...", or dlerror()'s own text); a library without
 * registrations, including one that merely depends on a module
 * (ValueError: "'PATH' is not a packedfunc module"); a corrupt function
 * table, a descriptor or string outside the library, a function pointer
 * that is not code, a descriptor built against an unknown descriptor ABI,
 * or another malformed one (ValueError naming the descriptor's index and
 * the bad address); the same name registered twice in the library
 * (KeyError naming it); a typed function whose signature does not parse
 * (the ValueError of PFFuncCreateFromTyped, with a traceback line naming
 * the function and the library); MemoryError. On any error the library is
 * closed again.
 */
PF_EXPORT int PFModLoadFromFile(const char* path, PFModuleHandle* out);

/*
 * Builds a module from functions the caller already has, each under the
 * name its metadata carries (PFFuncSetInfo): for a host or a library whose
 * functions are made at run time (remote functions, functions of another
 * language) rather than registered in a shared library. The module holds a
 * reference to each function, released when the module goes; the caller
 * keeps its own. `origin` names the module in messages (copied; NULL:
 * "<functions>"). `funcs` is read during this call only; NULL is allowed
 * when num_funcs is 0 (an empty module). *out is a new reference
 * (PFModFree); PFModGetFunction, PFModListFunctionNames, PFModImport and
 * PFModExportGlobal work on it as on any module.
 * Errors: NULL out, NULL funcs with num_funcs > 0, an entry that is not a
 * live function (TypeError naming "funcs[I]"); num_funcs < 0, a function
 * without a name (ValueError naming "funcs[I]"); two functions with the
 * same name (KeyError naming it); MemoryError. On error nothing is kept.
 * Thread-safe.
 */
PF_EXPORT int PFModCreateFromFunctions(const char* origin, const PFFunctionHandle* funcs,
                                       int num_funcs, PFModuleHandle* out);

/* Looks `name` up among the module's own functions and, when query_imports
 * is nonzero and the module has none of that name, among its imports,
 * depth-first in import order (an import's own functions before that
 * import's imports). A module that several imports share is searched once,
 * so the work is linear in the number of modules and imports, whatever the
 * number of paths through them, and no recursion limits the depth. A hit
 * is a new reference (PFFuncFree); a miss returns 0 with *out == NULL, as
 * PFFuncGetGlobal does.
 * Errors: mod not a live module, NULL name or out (TypeError);
 * MemoryError (a search that has more than a few dozen modules pending at
 * once needs a buffer). */
PF_EXPORT int PFModGetFunction(PFModuleHandle mod, const char* name,
                               int query_imports, PFFunctionHandle* out);

/* Makes `dep` an import of `mod`: PFModGetFunction(mod, ..., 1) then also
 * searches dep, and mod holds a reference to dep as long as mod lives.
 * Importing a module that is already imported is a no-op. The check for a
 * cycle visits each module reachable from dep once (linear work, as for a
 * lookup).
 * Errors: either argument not a live module (TypeError); an import that
 * would close a cycle, including mod == dep (ValueError); MemoryError. */
PF_EXPORT int PFModImport(PFModuleHandle mod, PFModuleHandle dep);

/* The names of the module's own functions (not its imports'), sorted.
 * *out_array has *out_size entries followed by NULL. The array and the
 * strings belong to the module and stay valid as long as the module handle
 * lives; they never change.
 * Errors: mod not a live module, NULL outputs (TypeError). */
PF_EXPORT int PFModListFunctionNames(PFModuleHandle mod, int* out_size,
                                     const char*** out_array);

/*
 * Registers each of the module's own functions globally under prefix +
 * its name (prefix may be NULL or ""), with the kPFRegister* flags. The
 * registry does this (it is part of registry/, built on the module calls
 * above) under its lock, all or nothing: every name is checked first and
 * then all are inserted in one step, so another thread sees either none of
 * the names or all of them, and a failed export changes nothing. Without
 * kPFRegisterOverride a name that is already taken fails the export with a
 * KeyError naming it; a protected name fails it with a RuntimeError, also
 * with kPFRegisterOverride. The functions an override replaced are
 * released after the lock is dropped (their finalizers may run then).
 * Errors: mod not a live module (TypeError); unknown flag bits
 * (ValueError); prefix + a name longer than PF_NAME_MAX (ValueError naming
 * 'prefix'); a taken name (KeyError); a protected name or a sealed registry
 * (RuntimeError); MemoryError. Thread-safe.
 */
PF_EXPORT int PFModExportGlobal(PFModuleHandle mod, const char* prefix,
                                int flags);

/* Drops a reference to a module; see "Lifetime" above for when its library
 * is unloaded. NULL is a no-op that returns 0.
 * Errors: not a live module (TypeError). */
PF_EXPORT int PFModFree(PFModuleHandle mod);

/* ------------------------------------------------------------------------ */
/* Registration from C source                                                */
/* ------------------------------------------------------------------------ */

/*
 * Any C file of a shared library (or of a program) registers functions with
 * one line each, at file scope:
 *
 *     static int scale(PFValue* args, int* codes, int n,
 *                      PFRetValueHandle ret, void* res) { ... }
 *     PF_REGISTER_PACKED("mylib.scale", scale, "Scales a tensor in place.");
 *
 *     static int64_t add(int64_t a, int64_t b) { return a + b; }
 *     PF_REGISTER_TYPED("mylib.add", add, "int64(int64,int64)");
 *     PF_REGISTER_TYPED("mylib.add2", add, "int64(int64,int64)", "Adds.");
 *
 * The last argument, the docstring, may be left out. The name must be a
 * string literal or another constant expression, as must the signature
 * (grammar: see "Typed C functions") and the doc.
 *
 * How it works, and why. Each macro puts a constant PFFuncDescriptor in
 * the library and a pointer to it in the ELF section "pf_functions"; the
 * linker gathers the pointers of all the library's files into one array.
 * Files that use the macros also emit a weak, exported accessor,
 * PFModuleDescriptorsV1, that returns that array: weak, so that the copies
 * from several files become one per library; exported, so that
 * PFModLoadFromFile finds it with dlsym (a version script must keep PF*
 * global). Nothing runs when the library is loaded: no constructor, no
 * registration at dlopen time. So loading never fails half-way behind the
 * host's back, a taken name is reported to the host that exports the
 * module (PFModExportGlobal), and loading the same library twice, or a
 * library that is already linked into the process, works (constructors do
 * not run again on a second dlopen, but nothing depends on them).
 *
 * A program (or a library linked directly into one) gets the functions it
 * registered itself with PF_MODULE_LOAD_SELF, then publishes them with
 * PFModExportGlobal, which reports a taken name as a KeyError:
 *
 *     PFModuleHandle self;
 *     if (PF_MODULE_LOAD_SELF(&self) != 0 ||
 *         PFModExportGlobal(self, "", 0) != 0) { ... PFGetLastError() ... }
 *     PFModFree(self);
 *
 * Requirements: GCC or Clang and an ELF linker (GNU ld, gold, lld), C99 or
 * later with C99 inline semantics (the default; not -fgnu89-inline). The
 * macros are not available to C++ (the rest of this header is).
 */

/* What kind of function a descriptor describes. */
#define kPFFuncDescriptorPacked 1u /* a PFPackedCFunc */
#define kPFFuncDescriptorTyped 2u  /* a plain C function and its signature */

/* The layout version of PFFuncDescriptor. Version 2 appended the pre-pack
 * fields; a version 1 descriptor (a module built against an older header)
 * is still read, as the fields up to `doc`. A module built with a version
 * this library does not know is refused with a clear error instead of
 * being misread. */
#define PF_FUNC_DESCRIPTOR_ABI 2u

/* One registered function. The macros fill it in; a host may also build a
 * table of pointers to these by hand for PFModLoadFromDescriptors. */
typedef struct PFFuncDescriptor {
  uint32_t abi;          /* PF_FUNC_DESCRIPTOR_ABI (1 or 2) */
  uint32_t kind;         /* kPFFuncDescriptorPacked or kPFFuncDescriptorTyped */
  const char* name;      /* 1..PF_NAME_MAX bytes */
  PFPackedCFunc packed;  /* packed: the function; typed: NULL */
  void (*typed)(void);   /* typed: the C function, cast; packed: NULL */
  const char* signature; /* typed: its signature; packed: NULL, or a
                            signature kept only as metadata */
  const char* doc;       /* NULL, or the docstring */
  /* Version 2. Both NULL, or the function's pre-pack hook and the layout it
   * produces, which loading gives the function (PFFuncSetPrePack, whose
   * rules apply: a non-empty format). The hook's resource_handle is the
   * function's: NULL for a packed function made from a descriptor. */
  const char* pack_format;
  PFPrePackFunc prepack;
} PFFuncDescriptor;

/* Builds a module from the array of descriptor pointers [begin, end). Both
 * NULL is an empty module. The descriptors are read during this call only:
 * the functions' names, signatures and docs are copied. Functions are made
 * as PFModLoadFromFile makes them; each keeps loaded the shared library
 * that contains its code, if any (see "Lifetime" above). The descriptors
 * are the host's own and are trusted: they are not checked against loaded
 * segments as a library's are.
 * *out is a new reference (PFModFree).
 * Errors: NULL out, one of begin/end NULL (TypeError); end before begin,
 * a malformed descriptor (ValueError); a name given twice (KeyError); a bad
 * typed signature (ValueError); MemoryError. Thread-safe. */
PF_EXPORT int PFModLoadFromDescriptors(const PFFuncDescriptor* const* begin,
                                       const PFFuncDescriptor* const* end,
                                       PFModuleHandle* out);

#if !defined(__cplusplus) && (defined(__GNUC__) || defined(__clang__)) && \
    defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L &&         \
    !defined(__GNUC_GNU_INLINE__)

/* The bounds of this library's (or program's) "pf_functions" section, which
 * the linker defines. Hidden, so that each library sees its own; weak, so
 * that a program without registrations still links (both are NULL). */
extern const PFFuncDescriptor* const __start_pf_functions[]
    __attribute__((weak, visibility("hidden")));
extern const PFFuncDescriptor* const __stop_pf_functions[]
    __attribute__((weak, visibility("hidden")));

/* The accessor that PFModLoadFromFile looks up. This is an inline
 * definition (C99): a file that includes the header emits no code for it.
 * A file that uses a registration macro redeclares it `extern`, which makes
 * that file emit it, weak, so the files of one library merge into one.
 * (Clang wants `weak` on the definition, GCC on a later declaration.) */
#if defined(__clang__)
#define PF_ACCESSOR_DEF_ATTR_ __attribute__((weak, visibility("default")))
#define PF_ACCESSOR_USE_ATTR_
#else
#define PF_ACCESSOR_DEF_ATTR_ __attribute__((visibility("default")))
#define PF_ACCESSOR_USE_ATTR_ __attribute__((weak))
#endif
PF_ACCESSOR_DEF_ATTR_ inline void PFModuleDescriptorsV1(
    const PFFuncDescriptor* const** begin, const PFFuncDescriptor* const** end);
PF_ACCESSOR_DEF_ATTR_ inline void PFModuleDescriptorsV1(
    const PFFuncDescriptor* const** begin, const PFFuncDescriptor* const** end) {
  *begin = __start_pf_functions;
  *end = __stop_pf_functions;
}

#define PF_CAT2_(a, b) a##b
#define PF_CAT_(a, b) PF_CAT2_(a, b)
#if defined(__COUNTER__)
#define PF_UNIQUE_ID_ __COUNTER__
#else
#define PF_UNIQUE_ID_ __LINE__
#endif

/* The pointer entries are 8-byte objects: no compiler pads or over-aligns
 * them, so the section is a plain array. */
#define PF_REGISTER_AT_(id, kind, name, packed_fn, typed_fn, sig, doc, fmt, pp)   \
  extern void PFModuleDescriptorsV1(const PFFuncDescriptor* const**,            \
                                    const PFFuncDescriptor* const**)            \
      PF_ACCESSOR_USE_ATTR_;                                                    \
  static const PFFuncDescriptor PF_CAT_(pf_descriptor_, id) = {                 \
      PF_FUNC_DESCRIPTOR_ABI, kind, name, packed_fn, typed_fn, sig, doc, fmt, pp}; \
  __attribute__((used, section("pf_functions"))) static const PFFuncDescriptor* \
      const PF_CAT_(pf_descriptor_entry_, id) = &PF_CAT_(pf_descriptor_, id)
#define PF_REGISTER_(...) PF_REGISTER_AT_(__VA_ARGS__)

#define PF_REGISTER_PACKED_2_(name, fn) \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorPacked, name, fn, NULL, NULL, NULL, NULL, NULL)
#define PF_REGISTER_PACKED_3_(name, fn, doc) \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorPacked, name, fn, NULL, NULL, doc, NULL, NULL)
#define PF_REGISTER_TYPED_3_(name, fn, sig)                                  \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorTyped, name, NULL,            \
               (void (*)(void))(fn), sig, NULL, NULL, NULL)
#define PF_REGISTER_TYPED_4_(name, fn, sig, doc)                             \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorTyped, name, NULL,            \
               (void (*)(void))(fn), sig, doc, NULL, NULL)
#define PF_REGISTER_PREPACKED_4_(name, fn, fmt, pp)                          \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorPacked, name, fn, NULL, NULL, \
               NULL, fmt, pp)
#define PF_REGISTER_PREPACKED_5_(name, fn, fmt, pp, doc)                     \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorPacked, name, fn, NULL, NULL, \
               doc, fmt, pp)
#define PF_PICK_3_(a, b, c, d, ...) d
#define PF_PICK_4_(a, b, c, d, e, ...) e
#define PF_PICK_5_(a, b, c, d, e, f, ...) f

/* PF_REGISTER_PACKED(name, fn [, doc]): registers the PFPackedCFunc `fn`
 * (type-checked) under `name`. Use at file scope, followed by `;`. */
#define PF_REGISTER_PACKED(...)                                        \
  PF_PICK_3_(__VA_ARGS__, PF_REGISTER_PACKED_3_, PF_REGISTER_PACKED_2_, \
             PF_REGISTER_PACKED_needs_2_or_3_arguments)(__VA_ARGS__)

/* PF_REGISTER_TYPED(name, fn, signature [, doc]): registers the plain C
 * function `fn`, whose C prototype `signature` must describe (the runtime
 * cannot check it; a signature that does not parse fails the load). */
#define PF_REGISTER_TYPED(...)                                           \
  PF_PICK_4_(__VA_ARGS__, PF_REGISTER_TYPED_4_, PF_REGISTER_TYPED_3_,     \
             PF_REGISTER_TYPED_needs_3_or_4_arguments, )(__VA_ARGS__)

/* PF_REGISTER_PREPACKED(name, fn, pack_format, prepack [, doc]): registers
 * the PFPackedCFunc `fn` with its pre-pack hook `prepack` (a PFPrePackFunc,
 * type-checked), which produces the layout `pack_format`, a non-empty
 * string literal: loading gives the function the hook, so PFFuncBind packs
 * the constants bound to it (see "Binding constants"). */
#define PF_REGISTER_PREPACKED(...)                                               \
  PF_PICK_5_(__VA_ARGS__, PF_REGISTER_PREPACKED_5_, PF_REGISTER_PREPACKED_4_,     \
             PF_REGISTER_PREPACKED_needs_4_or_5_arguments, , )(__VA_ARGS__)

/* PF_MODULE_LOAD_SELF(&mod): a module of the functions registered in the
 * program or library that this expression is compiled into (its own
 * "pf_functions" section), as PFModLoadFromDescriptors. */
#define PF_MODULE_LOAD_SELF(out) \
  PFModLoadFromDescriptors(__start_pf_functions, __stop_pf_functions, (out))

#else /* no registration macros here: say why at the first use */
#if defined(__cplusplus)
#define PF_NO_REGISTRATION_(what) static_assert(false, what " is only available to C")
#else
#define PF_NO_REGISTRATION_(what) \
  _Static_assert(0, what " needs GCC or Clang with C99 inline semantics")
#endif
#define PF_REGISTER_PACKED(...) PF_NO_REGISTRATION_("PF_REGISTER_PACKED")
#define PF_REGISTER_TYPED(...) PF_NO_REGISTRATION_("PF_REGISTER_TYPED")
#define PF_REGISTER_PREPACKED(...) PF_NO_REGISTRATION_("PF_REGISTER_PREPACKED")
#define PF_MODULE_LOAD_SELF(out) PF_NO_REGISTRATION_("PF_MODULE_LOAD_SELF")
#endif /* registration macros */

/* ------------------------------------------------------------------------ */
/* Versions, sizes and the stable function table                             */
/* ------------------------------------------------------------------------ */

/* Writes the library's version numbers (any out may be NULL). Returns 0. */
PF_EXPORT int PFGetVersion(int* major, int* minor, int* patch);

/* sizeof of a public struct as this library was compiled: "PFValue",
 * "PFByteArray", "DLDataType", "DLDevice", "DLTensor", "DLManagedTensor",
 * "PFCallFrame". Bindings compare it with their own mirrors. Errors: NULL
 * arguments (TypeError), unknown name (KeyError). */
PF_EXPORT int PFGetStructSize(const char* name, size_t* out);

/*
 * The stable table of entry points, in the manner of ONNX Runtime's
 * OrtApi. Slots are only ever appended; a slot's position and signature
 * never change once released. A program that loads the library at run time
 * asks for the version it was compiled against and gets a table at least
 * that new.
 *
 * Version 1 has the slots up to ModLoadFromDescriptors; version 2 adds
 * those up to ObjectTypeName; version 3 adds host objects
 * (HostObjectCreate, HostObjectGetPayload) and containers (ArrayCreate to
 * ShapeGetData); version 4 adds FuncBind to PrePackCacheGetStats (binding
 * constants, pre-packing them, sharing the packed values); version 5
 * adds ModCreateFromFunctions; version 6 adds FuncCallFrame; version 7
 * adds ObjectFindOwnedHosts. Every
 * exported entry point is a slot, except these, each for its
 * reason (tools/check-abi.sh reads this list; keep one entry per line):
 *   PF_API_EXCLUDED(PFGetApiBase)      the way to the table itself
 */
typedef struct PFApi {
  /* Version 1. */
  int (*FuncCreateFromCFunc)(PFPackedCFunc, void*, PFPackedCFuncFinalizer,
                             PFFunctionHandle*);
  int (*FuncCall)(PFFunctionHandle, PFValue*, int*, int, PFValue*, int*);
  int (*CFuncSetReturn)(PFRetValueHandle, PFValue*, int*, int);
  int (*FuncRetain)(PFFunctionHandle);
  int (*FuncFree)(PFFunctionHandle);
  int (*FuncRegisterGlobal)(const char*, PFFunctionHandle, int);
  int (*FuncGetGlobal)(const char*, PFFunctionHandle*);
  int (*FuncRemoveGlobal)(const char*);
  int (*FuncListGlobalNames)(int*, const char***);
  const char* (*GetLastError)(void);
  void (*APISetLastError)(const char*);
  void (*ErrorSet)(const char*, const char*);
  void (*ErrorAppendTraceback)(const char*);
  const char* (*ErrorGetKind)(void);
  const char* (*ErrorGetMessage)(void);
  const char* (*ErrorGetTraceback)(void);
  void (*ErrorClear)(void);
  const char* (*TypeCodeName)(int);
  int (*ObjectRetain)(PFObjectHandle);
  int (*ObjectFree)(PFObjectHandle);
  int (*ObjectGetTypeIndex)(PFObjectHandle, uint32_t*);
  int (*ObjectCreateBoxed)(void*, PFObjectFinalizer, PFObjectHandle*);
  int (*ObjectGetBoxedPayload)(PFObjectHandle, void**);
  int (*TensorCreateFromDLPack)(DLManagedTensor*, PFObjectHandle*);
  int (*TensorGetDLTensor)(PFObjectHandle, DLTensor**);
  int (*TensorToDLPack)(PFObjectHandle, DLManagedTensor**);
  int (*FuncRegisterGlobalEx)(const char*, PFFunctionHandle, int);
  int (*FuncListGlobalNamesWithPrefix)(const char*, int*, const char***);
  int (*RegistrySeal)(void);
  int (*RegistryIsSealed)(int*);
  int (*EnvSetSignalChecker)(PFSignalChecker);
  int (*EnvCheckSignals)(void);
  int (*GetVersion)(int*, int*, int*);
  int (*GetStructSize)(const char*, size_t*);
  int (*FuncSetInfo)(PFFunctionHandle, const char*, const char*, const char*);
  int (*FuncGetInfo)(PFFunctionHandle, const char**, const char**, const char**);
  /* Typed C functions and C function pointers (libffi). */
  int (*FuncCreateFromTyped)(void*, const char*, PFFunctionHandle*);
  int (*FuncToCFunction)(PFFunctionHandle, const char*, PFObjectHandle*, void**);
  int (*ClosureCheckError)(PFObjectHandle);
  /* Modules. */
  int (*ModLoadFromFile)(const char*, PFModuleHandle*);
  int (*ModGetFunction)(PFModuleHandle, const char*, int, PFFunctionHandle*);
  int (*ModImport)(PFModuleHandle, PFModuleHandle);
  int (*ModListFunctionNames)(PFModuleHandle, int*, const char***);
  int (*ModExportGlobal)(PFModuleHandle, const char*, int);
  int (*ModFree)(PFModuleHandle);
  int (*ModLoadFromDescriptors)(const PFFuncDescriptor* const*,
                                const PFFuncDescriptor* const*, PFModuleHandle*);
  /* Version 2. Host functions. */
  int (*HostGateCreate)(PFObjectHandle*);
  int (*HostGateClose)(PFObjectHandle, const char*, int);
  int (*FuncCreateFromHostCFunc)(PFObjectHandle, PFPackedCFunc, void*, PFPackedCFuncFinalizer,
                                 PFFunctionHandle*);
  /* Errors with a format, memory, and the lists a binding reads. */
  int (*ErrorSetFormat)(const char*, const char*, ...);
  int (*SetAllocator)(const PFAllocator*);
  void* (*MemAlloc)(size_t);
  void* (*MemRealloc)(void*, size_t);
  void (*MemFree)(void*);
  int (*SignatureTypeInfo)(int, const char**, int*);
  const char* (*ObjectTypeName)(uint32_t);
  /* Version 3. Host objects. */
  int (*HostObjectCreate)(PFObjectHandle, void*, PFObjectFinalizer, PFObjectHandle*);
  int (*HostObjectGetPayload)(PFObjectHandle, PFObjectHandle, void**);
  /* Containers. */
  int (*ArrayCreate)(const PFValue*, const int*, int64_t, PFObjectHandle*);
  int (*ArrayGetSize)(PFObjectHandle, int64_t*);
  int (*ArrayGetItem)(PFObjectHandle, int64_t, PFValue*, int*);
  int (*MapCreate)(const PFValue*, const int*, const PFValue*, const int*, int64_t,
                   PFObjectHandle*);
  int (*MapGetSize)(PFObjectHandle, int64_t*);
  int (*MapGetItem)(PFObjectHandle, PFValue, int, PFValue*, int*, int*);
  int (*MapGetItemAt)(PFObjectHandle, int64_t, PFValue*, int*, PFValue*, int*);
  int (*ShapeCreate)(const int64_t*, int64_t, PFObjectHandle*);
  int (*ShapeGetData)(PFObjectHandle, const int64_t**, int64_t*);
  /* Version 4. Binding constants. */
  int (*FuncBind)(PFFunctionHandle, int, const int*, PFValue*, int*, PFPrePackCacheHandle,
                  PFFunctionHandle*);
  int (*FuncSetPrePack)(PFFunctionHandle, const char*, PFPrePackFunc);
  int (*PrePackCacheCreate)(PFPrePackCacheHandle*);
  int (*PrePackCacheGetStats)(PFPrePackCacheHandle, int64_t*, int64_t*, int64_t*);
  /* Version 5. Modules of functions made at run time. */
  int (*ModCreateFromFunctions)(const char*, const PFFunctionHandle*, int, PFModuleHandle*);
  /* Version 6. Calls with one frame. */
  int (*FuncCallFrame)(PFCallFrame*);
  /* Version 7. Host cycle collectors. */
  int (*ObjectFindOwnedHosts)(PFObjectHandle, PFObjectHandle, int64_t, void**, int64_t,
                              int64_t*, int64_t*);
} PFApi;

/* Never changes: two pointers, in this order, with these signatures. */
typedef struct PFApiBase {
  /* The table for `version` (1..PF_API_VERSION), or NULL with an error
   * recorded (ValueError) for a version this library does not have. */
  const PFApi* (*GetApi)(uint32_t version);
  /* The library version, as PF_VERSION_STRING; static storage. */
  const char* (*GetVersionString)(void);
} PFApiBase;

/* The one entry point a dynamic loader needs. Never NULL. Thread-safe. */
PF_EXPORT const PFApiBase* PFGetApiBase(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_C_API_H_ */
