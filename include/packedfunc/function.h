/*
 * packedfunc — packed functions: creating and calling them, returning a
 * value, their metadata, binding constants and pre-packing.
 */
#ifndef PACKEDFUNC_FUNCTION_H_
#define PACKEDFUNC_FUNCTION_H_

#include "packedfunc/object.h"
#include "packedfunc/signature.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * A packed C function. `args` and `type_codes` hold `num_args` entries
 * (both may be NULL when num_args is 0); they and every handle, string and
 * byte array in them are borrowed for the duration of the call. Return 0,
 * or -1 after recording an error (PFErrorSet, PFErrorSetFormat). Return a
 * value by calling PFCFuncSetReturn(ret, ...) before returning 0; a
 * function that sets no value returns null. `resource_handle` is the
 * pointer given at creation.
 */
typedef int (*PFPackedCFunc)(PFValue* args, int* type_codes, int num_args, PFRetValueHandle ret,
                             void* resource_handle);

/* Releases the resource_handle of a packed C function. Runs exactly once:
 * when the function's last reference goes, or at once when the create call
 * that was given it fails. It may run on any thread, never while the
 * registry's lock is held, and may call packedfunc entry points. */
typedef void (*PFPackedCFuncFinalizer)(void* resource_handle);

/* ------------------------------------------------------------------------ */
/* Functions                                                                 */
/* ------------------------------------------------------------------------ */

/* Creates a PackedFunc from a packed C function. `resource_handle` is passed
 * to every call; `fin` (may be NULL) releases it exactly once, when the last
 * reference goes, or at once if this call fails. *out is a new reference:
 * release it with PFFuncFree. Errors: NULL func or out (TypeError), then the
 * finalizer has run; allocation (MemoryError). Thread-safe. */
PF_EXPORT int PFFuncCreateFromCFunc(PFPackedCFunc func, void* resource_handle,
                                    PFPackedCFuncFinalizer fin, PFFunctionHandle* out);

/*
 * Calls a function, of either convention (PFPackedCFunc, PFDirectCFunc).
 * `args`/`type_codes` hold num_args entries, borrowed for
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
 * result out; it allocates nothing and writes no per-thread state. A
 * direct callee writes its result straight to *ret_val and
 * *ret_type_code, with no return slot. A str or bytes argument or result,
 * or a handle argument or result, takes a longer path. A caller that
 * builds valid values itself calls faster through a resolved target
 * (PFFuncResolve).
 */
PF_EXPORT int PFFuncCall(PFFunctionHandle func, PFValue* args, int* type_codes, int num_args,
                         PFValue* ret_val, int* ret_type_code);

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
 * Thread-safe as PFFuncCall is. Layout: fixed (pinned by the library).
 */
typedef struct PFCallFrame {
  PFValue ret_val;       /* out */
  int32_t ret_type_code; /* out */
  int32_t num_args;      /* in */
  PFFunctionHandle func; /* in */
  PFValue* args;         /* in: num_args values */
  int* type_codes;       /* in: num_args codes */
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
PF_EXPORT int PFCFuncSetReturn(PFRetValueHandle ret, PFValue* value, int* type_code, int num_ret);

/* ------------------------------------------------------------------------ */
/* The direct callee convention and resolved call targets                    */
/* ------------------------------------------------------------------------ */

/*
 * A direct C function: a callee that writes its result through pointers
 * instead of calling PFCFuncSetReturn. `resource_handle` is the pointer
 * given at creation (PFFuncCreateDirect); `args`, `type_codes` and
 * `num_args` are as for PFPackedCFunc (borrowed for the call; NULL when
 * num_args is 0). On success it writes *ret_val and *ret_type_code and
 * returns 0; the result is:
 *   - a plain value under its code (kPFNull, value 0, for "no result");
 *   - under kPFFuncHandle, kPFModuleHandle or kPFObjectHandle, a new
 *     reference, which passes to the caller;
 *   - kPFStr or kPFBytes written by PFFuncReturnString, which copies the
 *     value into the calling thread's return storage (a str or bytes whose
 *     memory lives at least until the thread's next packedfunc call, such
 *     as a string literal, may be written directly instead).
 * On failure it records an error (PFErrorSet...) and returns -1 without
 * writing either output (a reference it had made is its own to release).
 * It may call other functions, on any thread. The same pointer is the
 * entry of a resolved call target (PFCallTarget).
 */
typedef int (*PFDirectCFunc)(void* resource_handle, PFValue* args, int* type_codes, int num_args,
                             PFValue* ret_val, int* ret_type_code);

/* Creates a function from a direct C function; otherwise exactly
 * PFFuncCreateFromCFunc (the same finalizer rule, reference and errors).
 * PFFuncCall calls it with the checks it makes of every call, and a
 * resolved target (PFFuncResolve) calls it with none. Thread-safe. */
PF_EXPORT int PFFuncCreateDirect(PFDirectCFunc func, void* resource_handle,
                                 PFPackedCFuncFinalizer fin, PFFunctionHandle* out);

/*
 * Returns a str (type_code kPFStr) or bytes (kPFBytes) result from a direct
 * C function: copies `size` bytes of `data` (and a NUL after them) into the
 * calling thread's return storage and writes *ret_val (v_str, or v_handle
 * to a PFByteArray in the same storage) and *ret_type_code. The copy lives
 * as a result of PFFuncCall does: until the next call on this thread that
 * returns a string at the same nesting (see PFFuncCall). For kPFStr a
 * string stops at its first NUL. `data` may point into return storage
 * (an argument that is an earlier result).
 * Errors: NULL ret_val or ret_type_code, NULL data with size > 0, a
 * type_code other than kPFStr and kPFBytes (TypeError); size larger than
 * PTRDIFF_MAX (ValueError); MemoryError. Nothing is written on error.
 * Only valid on a thread that runs a direct function (it uses that
 * thread's storage).
 */
PF_EXPORT int PFFuncReturnString(int type_code, const char* data, size_t size, PFValue* ret_val,
                                 int* ret_type_code);

/*
 * A resolved call target: a function's entry and context, which a caller
 * gets once, checked, from a function handle it holds, and then calls
 * with no runtime code between it and the callee:
 *
 *   PFCallTarget t = {.size = sizeof(PFCallTarget)};
 *   if (PFFuncResolve(f, &t) != 0) ...;
 *   int st = t.entry(t.ctx, args, codes, n, &ret, &ret_code);
 *
 * For a direct function (PFFuncCreateDirect, typed functions) the entry is
 * the callee itself. For a function of the setter convention
 * (PFFuncCreateFromCFunc, host functions) it is a small adapter of the
 * runtime, which keeps the call's return slot as PFFuncCall does.
 *
 * What a target caller owes (what PFFuncCall would have checked): args and
 * type_codes non-NULL when num_args > 0, num_args >= 0; every code a known
 * type code (or in the extension range); a str, bytes, tensor or handle
 * value non-NULL, a handle a live object of its code's type, bytes with
 * data non-NULL unless size is 0 and size at most PTRDIFF_MAX; ret_val and
 * ret_type_code non-NULL. A str or bytes argument must not point into
 * this thread's return storage (an earlier result, which calls nested in
 * this one may overwrite): copy it, or call through PFFuncCall, which
 * keeps such arguments safe. A call that breaks these rules is undefined
 * behaviour (in the checking mode below, an error).
 *
 * Validity: the target stays valid while the caller holds its reference to
 * the function (replacing or removing the name in the registry changes
 * nothing for a handle already held). Resolve again after taking a new
 * handle.
 *
 * The call returns 0, or -1 with the callee's error as the thread's error
 * (a setter-convention callee that failed without recording one gets a
 * RuntimeError, as from PFFuncCall; a direct callee must record one).
 * Outputs: written only on success, with PFFuncCall's meaning: a handle
 * result is a new reference; a str or bytes result lives in the calling
 * thread's return storage until the next call made on this thread at the
 * same nesting (through PFFuncCall or a target) that returns a string.
 * Calls may run on any thread, concurrently, and nest.
 *
 * Checking mode: when the environment variable PF_CHECK_TARGETS is set to
 * 1 (read once, at the first PFFuncResolve), resolved targets check every
 * call as PFFuncCall does (the rules above, and a str or bytes argument in
 * return storage), and a direct callee that fails without an error gets a
 * RuntimeError: a bad caller gets a TypeError or ValueError naming
 * "PFCallTarget" and the argument. For tests; it costs PFFuncCall's checks.
 *
 * Layout: versioned by `size`. The caller sets `size` to the sizeof it was
 * compiled with; the library writes the fields it has that fit (at least
 * those of version 1, below) and sets `size` to the bytes it wrote. Later
 * versions only append fields.
 */
typedef struct PFCallTarget {
  uint32_t size;       /* in: sizeof(PFCallTarget); out: bytes written */
  uint32_t flags;      /* out: kPFTarget... bits, for diagnostics */
  PFDirectCFunc entry; /* out */
  void* ctx;           /* out: the entry's first argument */
} PFCallTarget;

/* PFCallTarget.flags: the entry is the function's own direct callee; the
 * entry is the runtime's adapter of a setter-convention callee; the entry
 * checks each call (checking mode). */
enum { kPFTargetDirect = 1, kPFTargetAdapter = 2, kPFTargetChecked = 4 };

/* Resolves `func` into *out (see PFCallTarget); out->size must be set.
 * Errors: func not a live function, NULL out (TypeError); out->size
 * smaller than version 1's struct (ValueError). Nothing is written on
 * error. Thread-safe; takes no reference (the caller's keeps it valid). */
PF_EXPORT int PFFuncResolve(PFFunctionHandle func, PFCallTarget* out);

/* Adds a reference to a function. Errors: NULL or not a function
 * (TypeError). Thread-safe. */
PF_EXPORT int PFFuncRetain(PFFunctionHandle func);

/* Drops a reference to a function; when the last goes, its finalizer runs
 * on this thread. NULL is a no-op. Errors: not a function (TypeError). */
PF_EXPORT int PFFuncFree(PFFunctionHandle func);

/* ------------------------------------------------------------------------ */
/* Function metadata                                                         */
/* ------------------------------------------------------------------------ */

/* Attaches a name, a signature (in the grammar of signature.h) and a
 * docstring to a function. Each field can be set once; NULL leaves a field
 * as it is. Strings are copied. The signature is parsed, checked and kept
 * in its canonical form (signature.h): canonical type names ("double"
 * becomes float64), no blanks, canonical default literals, e.g.
 * "int64(int64,float64)" or "float64(x:float64,lo:float64=0.0)"; and as
 * data, its parameter table (PFFuncGetSignatureInfo), which is how a reader
 * takes it apart (splitting the text at "," works only for a signature
 * without defaults or tensor constraints). The signature describes the
 * arguments a caller should pass; for a function that is not a typed C
 * function it is metadata only: PFFuncCall does not check calls against
 * it, while PFFuncCallKw uses its names and defaults. Errors: not a
 * function (TypeError); a field that is already set, a signature outside
 * the grammar or with a default that does not convert (ValueError, naming
 * the position); MemoryError. On any error nothing is set. Thread-safe. */
PF_EXPORT int PFFuncSetInfo(PFFunctionHandle func, const char* name, const char* signature,
                            const char* doc);

/* Reads a function's metadata. Each out may be NULL; an unset field reads
 * as NULL. A signature is in canonical form (see PFFuncSetInfo). The
 * strings are borrowed and live as long as the function.
 * Errors: not a function (TypeError). Thread-safe. */
PF_EXPORT int PFFuncGetInfo(PFFunctionHandle func, const char** name, const char** signature,
                            const char** doc);

/* A function's signature as data (signature.h): its parameters' names,
 * types, defaults and tensor constraints, parsed once when the signature
 * was set. *out is borrowed: it lives as long as the function and never
 * changes (its text is the one PFFuncGetInfo gives); NULL, with status 0,
 * when the function has no signature. Errors: not a function, NULL out
 * (TypeError). Thread-safe, lock-free. */
PF_EXPORT int PFFuncGetSignatureInfo(PFFunctionHandle func, const PFSignatureInfo** out);

/* Flags of a function (PFFuncSetFlags), hints to the hosts that call it.
 *
 * kPFFuncNonBlocking: the function is short and never blocks (no I/O, no
 * waiting on a lock, a condition or another thread, no long loop). A host
 * with an interpreter lock may then keep that lock while it runs instead
 * of releasing and retaking it around the call (Python's GIL: about 340
 * instructions a call). It may still call back into the host on the
 * calling thread, which the host serves with the lock it keeps; it must
 * not wait for another thread that needs the host's lock (a Python
 * callback on another thread), which would deadlock, and while it runs no
 * other thread of that host runs. Without the flag, hosts release their
 * lock (the default). A host may override the hint per function. A
 * function registered by the macros of module.h gets it from its
 * registration (PF_REGISTER_FLAGS; PF_NONBLOCKING in checked.h;
 * kPFMethodNonBlocking for a method, object_type.h). */
#define kPFFuncNonBlocking 1u

/* Sets the flags `flags` (kPFFunc* bits) of `func`, keeping those already
 * set: the author of a function sets them once, after creating it and
 * before publishing it; flags are never cleared. Errors: not a function
 * (TypeError); unknown bits (ValueError naming them). On error nothing is
 * set. Thread-safe, lock-free. */
PF_EXPORT int PFFuncSetFlags(PFFunctionHandle func, uint32_t flags);

/* Writes the flags of `func` to *out (0 when none was set). Errors: not a
 * function, NULL out (TypeError). Thread-safe, lock-free. */
PF_EXPORT int PFFuncGetFlags(PFFunctionHandle func, uint32_t* out);

/*
 * Calls a function with positional arguments and keyword arguments, which
 * are matched by name against the function's signature (its parameter
 * names, PFFuncSetInfo or a typed function's signature), as Python binds
 * a call: the positional arguments fill the first parameters, each
 * keyword argument the parameter of its name, and a parameter left out
 * takes its default. The function is then called with one positional
 * argument per parameter, in order, exactly as PFFuncCall calls it (the
 * same checks of every value, the same result, lifetimes and references).
 * This is the one implementation of keyword calls that every host and
 * `pf call name=value` share.
 *
 * kw_names[i] (a NUL-terminated parameter name), kw_args[i] and
 * kw_codes[i] are the i-th keyword argument, for i < num_kw; all are
 * borrowed for the call, and may be NULL when num_kw is 0. A default
 * passed for a str or bytes parameter lives in the function's signature
 * (as long as the function).
 *
 * Errors about the call's arguments, TypeError, worded as Python's own and
 * naming the function by its name metadata ("<anonymous>" without one),
 * with no traceback line (PF_ERROR in base.h):
 *   "clamp() takes from 1 to 3 positional arguments but 4 were given"
 *   "clamp() got an unexpected keyword argument 'y'"
 *   "clamp() got multiple values for argument 'x'"
 *   "clamp() missing 1 required positional argument: 'x'"
 *   "clamp() missing 2 required positional arguments: 'x' and 'lo'"
 *   "clamp() takes no keyword arguments"      (a function without a signature)
 * checked in that order (keywords in the order given); a keyword never
 * matches an unnamed parameter. Then whatever PFFuncCall reports for the
 * assembled arguments (naming their positions) and the callee's errors.
 * Misuse, with the entry point's name and place: func not a live function,
 * NULL kw_names, kw_args or kw_codes with num_kw > 0, a NULL name
 * ("argument 'kw_names[1]' is NULL") (TypeError); negative num_kw
 * (ValueError); and what PFFuncCall refuses of the other arguments (NULL
 * ret_val or ret_type_code, NULL args or type_codes with num_args > 0,
 * negative num_args), reported as PFFuncCall reports it. Nothing is
 * written on error.
 *
 * Cost: with no keywords and as many positional arguments as the
 * signature has parameters (or no signature), one load and compare more
 * than PFFuncCall, which it then is. Otherwise it builds the argument list
 * on the stack (at most PF_TYPED_MAX_ARGS), comparing each keyword with
 * the parameter names: no allocation, no message built unless the call
 * fails (bench/bench_c.c: kw_call). Thread-safe and reentrant, as
 * PFFuncCall.
 */
PF_EXPORT int PFFuncCallKw(PFFunctionHandle func, PFValue* args, int* type_codes, int num_args,
                           const char* const* kw_names, PFValue* kw_args, int* kw_codes, int num_kw,
                           PFValue* ret_val, int* ret_type_code);

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
PF_EXPORT int PFPrePackCacheGetStats(PFPrePackCacheHandle cache, int64_t* entries, int64_t* bytes,
                                     int64_t* hits);

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
 * signature is it without the bound parameters (the others keep their
 * names, defaults and constraints, so keyword calls of the new function
 * work as before), and each position must be below the number of
 * parameters; name and doc are not carried over.
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
 * *out is a new reference (PFFuncFree), written only on success. It has
 * func's flags (PFFuncGetFlags) as func has them at the bind: a bound call
 * is a call of func. Calls of the new function may run on any number of
 * threads at once: they share no scratch state. Thread-safe.
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_FUNCTION_H_ */
