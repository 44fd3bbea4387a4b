/*
 * packedfunc — typed C functions (a C prototype described by a signature)
 * and C function pointers made from any function (libffi).
 */
#ifndef PACKEDFUNC_TYPED_H_
#define PACKEDFUNC_TYPED_H_

#include "packedfunc/function.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Typed C functions and C function pointers (libffi)                        */
/* ------------------------------------------------------------------------ */

/*
 * Wraps a plain C function pointer `fn` of the given signature as a
 * PackedFunc. The signature is parsed, and its libffi call interface
 * prepared (ffi_prep_cif), once, here; a call then only checks and converts
 * its arguments. The parsed signature, with its canonical text (canonical
 * type names, no blanks, "double" spelled float64, canonical defaults), is
 * stored as the function's signature metadata (PFFuncGetInfo,
 * PFFuncGetSignatureInfo); the name and doc stay free for PFFuncSetInfo.
 * Parameter names and defaults (signature.h) serve keyword calls
 * (PFFuncCallKw); PFFuncCall passes every argument, as before.
 *
 * Each call checks the number of arguments (TypeError) and converts every
 * argument by the rules of signature.h; a failure is a TypeError or ValueError whose
 * message names the function (its metadata name when set, and its
 * signature), the argument position (0-based) and, for a named parameter,
 * its name, the expected type and the given type code (and value, for a
 * range error), e.g.
 *   "typed function 'scale' int32(int32): argument 0: expected int32, got
 *    int 4294967296, which is out of its range [-2147483648, 2147483647]"
 *   "typed function 'sum' float64(x:tensor<float64,1>): argument 0 'x':
 *    expected tensor<float64,1>, got int64 tensor of rank 1".
 * A tensor parameter or result with a constraint (tensor.h) refuses a
 * tensor that does not meet it: TypeError for the dtype, ValueError for the
 * rank, layout or device.
 *
 * A typed function is a direct callee (PFDirectCFunc): its resolved target
 * (PFFuncResolve) is its own trampoline, which checks and converts the
 * arguments, calls `fn` and writes the result through the caller's
 * pointers (a str or bytes result copied to return storage, a func,
 * array, map, shape or object result passing on the reference `fn`
 * returned); its errors are the same through a target as through
 * PFFuncCall.
 *
 * Common signatures — at most four arguments, each int64, uint64, float64
 * or pointer-like (str, bytes, ptr, tensor, func, array, map, shape,
 * object, obj<KEY>), and a result that is
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
 * PF_TYPED_MAX_ARGS arguments, an empty string, names on some parameters
 * only, a repeated name, a default that does not convert or is followed by
 * a parameter without one, a bad constraint; MemoryError.
 * Thread-safe; the function may be called from any thread (as thread-safe
 * as `fn` itself).
 */
PF_EXPORT int PFFuncCreateFromTyped(void* fn, const char* signature, PFFunctionHandle* out);

/*
 * Turns any function (a packed C function, a typed function, a host
 * callable such as a Python function) into a real C function pointer with
 * the C prototype that `signature` describes (the grammar and table of
 * signature.h), through a libffi closure: for example a "int32(ptr,ptr)"
 * comparator to hand to qsort. Parameter names and defaults are accepted
 * and mean nothing here (a C caller passes every argument); tensor
 * constraints are checked, on the C caller's tensor arguments and on the
 * function's tensor result (a mismatch is an error as below).
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
 * not a live object of its type is an error), calls `func` (through its
 * resolved target, which the closure takes once; with PFFuncCall when a
 * parameter is str or bytes, whose memory may be an earlier result), and
 * converts the result back by the rules of signature.h, where kPFNull is also
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
 * out_fn (TypeError); a malformed signature (ValueError, as for PFFuncCreateFromTyped);
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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_TYPED_H_ */
