/*
 * packedfunc — reference-counted objects: retain and release, boxed
 * pointers, tensors.
 */
#ifndef PACKEDFUNC_OBJECT_H_
#define PACKEDFUNC_OBJECT_H_

#include "packedfunc/base.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_OBJECT_H_ */
