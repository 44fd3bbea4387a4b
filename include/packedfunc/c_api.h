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
#define PF_API_VERSION 1

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
 * The one list of type codes. Each entry is X(enumerator, number, name).
 * The enum below, PFTypeCodeName() and the Python binding's table are all
 * generated from it, so they cannot drift. Numbers are part of the ABI and
 * never change once released; new codes take new numbers.
 *
 * What each code means for the PFValue beside it:
 *   kPFInt            v_int64, a signed 64-bit integer.
 *   kPFFloat          v_float64, a double.
 *   kPFBool           v_int64, 0 or 1.
 *   kPFNull           no value; the union's bits are ignored.
 *   kPFOpaqueHandle   v_handle, a pointer the runtime never dereferences.
 *   kPFDataType       v_type, a DLDataType.
 *   kPFDevice         v_device, a DLDevice.
 *   kPFDLTensorHandle v_handle, a DLTensor*, borrowed for the call.
 *   kPFStr            v_str, a NUL-terminated UTF-8 string, not NULL.
 *   kPFBytes          v_handle, a PFByteArray*, not NULL; binary safe.
 *   kPFFuncHandle     v_handle, a PFFunctionHandle.
 *   kPFModuleHandle   v_handle, a PFModuleHandle.
 *   kPFObjectHandle   v_handle, a PFObjectHandle of any object type.
 */
#define PF_TYPE_CODE_LIST(X)                   \
  X(kPFInt, 0, "int")                          \
  X(kPFFloat, 1, "float")                      \
  X(kPFBool, 2, "bool")                        \
  X(kPFNull, 3, "null")                        \
  X(kPFOpaqueHandle, 4, "handle")              \
  X(kPFDataType, 5, "dtype")                   \
  X(kPFDevice, 6, "device")                    \
  X(kPFDLTensorHandle, 7, "tensor")            \
  X(kPFStr, 8, "str")                          \
  X(kPFBytes, 9, "bytes")                      \
  X(kPFFuncHandle, 10, "function")             \
  X(kPFModuleHandle, 11, "module")             \
  X(kPFObjectHandle, 12, "object")

typedef enum {
#define PF_TYPE_CODE_ENUM_(name, num, text) name = num,
  PF_TYPE_CODE_LIST(PF_TYPE_CODE_ENUM_)
#undef PF_TYPE_CODE_ENUM_
  /* One past the largest built-in code. */
  kPFTypeCodeEnd = 13,
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
 * user value). */
typedef void* PFObjectHandle;
/* An object whose type index is kPFObjectFunction. */
typedef void* PFFunctionHandle;
/* An object whose type index is kPFObjectModule. */
typedef void* PFModuleHandle;
/* The return slot of one call in progress; valid only inside that call. */
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

/* Object type indices, as PFObjectGetTypeIndex reports them. */
typedef enum {
  kPFObjectFunction = 1,
  kPFObjectModule = 2,
  kPFObjectTensor = 3,
  kPFObjectBoxed = 4,
  kPFObjectClosure = 5
} PFObjectTypeIndex;

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
 * no traceback. NULL records "unknown error". The text is copied. The usual
 * way for a packed function to fail is PFErrorSet or PFErrorSetFormat,
 * which also give the kind. Thread-safe. */
PF_EXPORT void PFAPISetLastError(const char* msg);

/* Records an error of the given kind and message on the calling thread,
 * replacing any previous error and clearing its traceback. A NULL, empty,
 * over-long or non-identifier kind is recorded as "RuntimeError" (with the
 * given kind kept at the front of the message); a NULL message as "".
 * Both strings are copied. If copying fails, the thread's error becomes
 * a MemoryError with a fixed message. Thread-safe. */
PF_EXPORT void PFErrorSet(const char* kind, const char* msg);

/* As PFErrorSet with a printf-style message. Always returns -1, so that a
 * packed function can write `return PFErrorSetFormat(...)`. */
PF_EXPORT int PFErrorSetFormat(const char* kind, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Appends one line to the traceback text of the calling thread's error.
 * Each language boundary or call level that passes an error on may add a
 * line describing itself. NULL is ignored. Thread-safe. */
PF_EXPORT void PFErrorAppendTraceback(const char* line);

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
 * the last reference goes. NULL is a no-op that returns 0. Releasing more
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
 *     return storage, valid until the next PFFuncCall on this thread;
 *   - kPFBytes: ret_val->v_handle points to a PFByteArray in the same
 *     storage, with the same lifetime (data and array alike);
 *   - kPFFuncHandle, kPFModuleHandle, kPFObjectHandle: a new reference that
 *     the caller releases;
 *   - other codes: plain values.
 * On failure returns -1 and leaves the callee's error (kind, message,
 * traceback) as the thread's last error; a callee that returned -1 without
 * recording an error yields a RuntimeError saying so.
 * Errors detected before the call: NULL func, NULL ret_val/ret_type_code,
 * num_args < 0, NULL args/type_codes with num_args > 0 (TypeError); an
 * unknown type code, a NULL string or byte array, a NULL handle under a
 * handle code (TypeError, naming the argument's position).
 * Reentrant: the callee may call other functions, on any thread.
 */
PF_EXPORT int PFFuncCall(PFFunctionHandle func, PFValue* args, int* type_codes,
                         int num_args, PFValue* ret_val, int* ret_type_code);

/*
 * Sets the return value of the call in progress that `ret` belongs to. Only
 * valid inside a packed C function, with the `ret` it was given. Strings and
 * bytes are copied; a function, module or object handle gets a new
 * reference held by the return slot (the callee keeps its own). Setting
 * again replaces the earlier value. `num_ret` must be 1.
 * Errors: NULL or stale `ret`, NULL value/type_code, num_ret != 1, unknown
 * type code, NULL string/bytes/handle (TypeError); MemoryError.
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
 * call on this thread. Errors: NULL outputs (TypeError), MemoryError. */
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
 * recorded) on failure. Memory that the runtime frees on your behalf must
 * come from here. PFMemFree(NULL) is a no-op. */
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
 * Python host wires it to Python's own signal check. Thread-safe. */
PF_EXPORT int PFEnvSetSignalChecker(PFSignalChecker checker);

/* Lets a long-running function ask whether the user asked to interrupt:
 * returns 0 to go on, or -1 with the host's error recorded, which the
 * function should pass up by returning -1. Returns 0 when no host installed
 * a checker. Cheap enough to call every few milliseconds. */
PF_EXPORT int PFEnvCheckSignals(void);

/* ------------------------------------------------------------------------ */
/* Function metadata                                                         */
/* ------------------------------------------------------------------------ */

/* Attaches a name, a signature (in the typed-signature grammar below) and a
 * docstring to a function. Each field can be set once; NULL leaves a field
 * as it is. Strings are copied. Errors: not a function (TypeError); a field
 * that is already set (ValueError); MemoryError. Thread-safe. */
PF_EXPORT int PFFuncSetInfo(PFFunctionHandle func, const char* name,
                            const char* signature, const char* doc);

/* Reads a function's metadata. Each out may be NULL; an unset field reads
 * as NULL. The strings are borrowed and live as long as the function.
 * Errors: not a function (TypeError). Thread-safe. */
PF_EXPORT int PFFuncGetInfo(PFFunctionHandle func, const char** name,
                            const char** signature, const char** doc);

/* ------------------------------------------------------------------------ */
/* Typed C functions and C function pointers (libffi)                        */
/* ------------------------------------------------------------------------ */

/* Wraps a plain C function pointer of the given signature as a PackedFunc.
 * The signature grammar is documented with the implementation's section
 * below. *out is a new reference. Errors: NULL arguments (TypeError); a
 * malformed signature (ValueError naming the offending position);
 * MemoryError. */
PF_EXPORT int PFFuncCreateFromTyped(void* fn, const char* signature,
                                    PFFunctionHandle* out);

/* Turns any function into a real C function pointer of `signature` through
 * a libffi closure. *out_closure is a new reference to an object
 * (kPFObjectClosure) that owns the pointer: *out_fn stays valid until that
 * object's last reference goes. */
PF_EXPORT int PFFuncToCFunction(PFFunctionHandle func, const char* signature,
                                PFObjectHandle* out_closure, void** out_fn);

/* Reports a failure inside calls through a closure's pointer: returns -1
 * and makes the first error recorded since the last check the calling
 * thread's error, or returns 0 when no call failed. */
PF_EXPORT int PFClosureCheckError(PFObjectHandle closure);

/* ------------------------------------------------------------------------ */
/* Modules                                                                   */
/* ------------------------------------------------------------------------ */

/* Loads a packedfunc module from a shared library. *out is a new reference
 * (PFModFree). */
PF_EXPORT int PFModLoadFromFile(const char* path, PFModuleHandle* out);

/* Looks a function up in a module (and, with query_imports, in the modules
 * it imports). A hit is a new reference; a miss is 0 with *out == NULL. */
PF_EXPORT int PFModGetFunction(PFModuleHandle mod, const char* name,
                               int query_imports, PFFunctionHandle* out);

/* Makes `dep` an import of `mod` (mod takes a reference to dep). */
PF_EXPORT int PFModImport(PFModuleHandle mod, PFModuleHandle dep);

/* Lists a module's function names, sorted, in the calling thread's list
 * storage (valid until the next list call on this thread). */
PF_EXPORT int PFModListFunctionNames(PFModuleHandle mod, int* out_size,
                                     const char*** out_array);

/* Registers every function of the module globally as prefix + name, with
 * kPFRegister* flags; a taken name fails the whole export. */
PF_EXPORT int PFModExportGlobal(PFModuleHandle mod, const char* prefix,
                                int flags);

/* Drops a reference to a module. NULL is a no-op. */
PF_EXPORT int PFModFree(PFModuleHandle mod);

/* ------------------------------------------------------------------------ */
/* Versions, sizes and the stable function table                             */
/* ------------------------------------------------------------------------ */

/* Writes the library's version numbers (any out may be NULL). Returns 0. */
PF_EXPORT int PFGetVersion(int* major, int* minor, int* patch);

/* sizeof of a public struct as this library was compiled: "PFValue",
 * "PFByteArray", "DLDataType", "DLDevice", "DLTensor", "DLManagedTensor".
 * Bindings compare it with their own mirrors. Errors: NULL arguments
 * (TypeError), unknown name (KeyError). */
PF_EXPORT int PFGetStructSize(const char* name, size_t* out);

/*
 * The stable table of entry points, in the manner of ONNX Runtime's
 * OrtApi. Slots are only ever appended; a slot's position and signature
 * never change once released. A program that loads the library at run time
 * asks for the version it was compiled against and gets a table at least
 * that new.
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
