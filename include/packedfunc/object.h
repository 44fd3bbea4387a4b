/*
 * packedfunc — reference-counted objects: retain and release, boxed
 * pointers, tensors and DLPack (unversioned and versioned).
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

/* Writes the number of references that `obj` (any object: a function,
 * module, container, tensor, instance...) has now to *out. For tests and
 * diagnostics only: under threads the count may have changed by the time
 * the caller reads it, so no decision may rest on it. A binding's wrapper
 * holds one reference of its own. Errors: NULL or not a live object obj,
 * NULL out (TypeError); *out is then left alone. Thread-safe. */
PF_EXPORT int PFObjectGetRefCount(PFObjectHandle obj, int64_t* out);

/* Finalizer of a boxed object's payload; the same once-only rule as
 * PFPackedCFuncFinalizer. */
typedef void (*PFObjectFinalizer)(void* payload);

/* Creates a boxed object (kPFObjectBoxed): a reference-counted owner of a
 * user pointer, to pass owned values through kPFObjectHandle. `fin` may be
 * NULL; it runs exactly once, when the last reference goes, or at once if
 * this call fails. *out is a new reference.
 * Errors: NULL out (TypeError), allocation (MemoryError). */
PF_EXPORT int PFObjectCreateBoxed(void* payload, PFObjectFinalizer fin, PFObjectHandle* out);

/* Reads a boxed object's payload (borrowed; lives as long as the object).
 * Errors: NULL arguments (TypeError), not a boxed object (TypeError). */
PF_EXPORT int PFObjectGetBoxedPayload(PFObjectHandle obj, void** out);

/* ------------------------------------------------------------------------ */
/* Tensors and DLPack                                                        */
/* ------------------------------------------------------------------------ */

/*
 * A tensor object (kPFObjectTensor) owns a DLPack managed tensor, of
 * either kind DLPack defines: the unversioned DLManagedTensor of DLPack
 * 0.x, or the versioned one of DLPack 1.x (PFDLManagedTensorVersioned
 * below), which also carries a version and flags.
 *
 * Read-only tensors. A tensor made from a versioned managed tensor whose
 * flags have PF_DLPACK_FLAG_READ_ONLY is read-only: nothing may write its
 * data. PFTensorIsReadOnly says so; PFTensorToDLPackVersioned hands it on
 * with the flag; PFTensorToDLPack refuses it (a DLManagedTensor cannot say
 * read-only, and its consumer would take it as writable); a typed
 * function's `tensor` argument, a writable DLTensor*, refuses it too
 * (TypeError), as PFArgGetTensor (tensor.h) does. PFTensorGetDLTensor still
 * gives its DLTensor, to read: a
 * packed function that receives a tensor object and writes its data checks
 * PFTensorIsReadOnly first. Every other tensor is writable.
 */

/* DLPack 1.x's DLPackVersion and DLManagedTensorVersioned, under names of
 * this library: the same layout, field for field (Debian's dlpack.h, 0.6,
 * does not have them; a program with DLPack 1.x's header may pass its
 * DLManagedTensorVersioned* here by a cast). */
typedef struct {
  uint32_t major;
  uint32_t minor;
} PFDLPackVersion;

typedef struct PFDLManagedTensorVersioned {
  PFDLPackVersion version;
  void* manager_ctx;
  void (*deleter)(struct PFDLManagedTensorVersioned* self);
  uint64_t flags;
  DLTensor dl_tensor;
} PFDLManagedTensorVersioned;

/* DLPack 1.1's flag bits (DLPACK_FLAG_BITMASK_*), by their fixed values. */
#define PF_DLPACK_FLAG_READ_ONLY ((uint64_t)1 << 0)
#define PF_DLPACK_FLAG_IS_COPIED ((uint64_t)1 << 1)
#define PF_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED ((uint64_t)1 << 2)

/* The DLPack version that this library reads (major) and writes. */
#define PF_DLPACK_MAJOR_VERSION 1
#define PF_DLPACK_MINOR_VERSION 1

/* Creates a tensor object (kPFObjectTensor) that takes ownership of a
 * DLPack managed tensor: its deleter runs exactly once, when the object's
 * last reference goes, or at once if this call fails. The tensor is
 * writable. *out is a new reference. Errors: NULL arguments (TypeError),
 * allocation (MemoryError). */
PF_EXPORT int PFTensorCreateFromDLPack(DLManagedTensor* managed, PFObjectHandle* out);

/* As PFTensorCreateFromDLPack, from a versioned managed tensor: its
 * deleter (which may be NULL) runs exactly once, when the object's last
 * reference goes, or at once if this call fails. The flags are kept:
 * PF_DLPACK_FLAG_READ_ONLY makes the tensor read-only (see above), and
 * PF_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED goes on with it; IS_COPIED and
 * bits this library does not know are ignored. A minor version newer than
 * PF_DLPACK_MINOR_VERSION is accepted (it only adds codes). *out is a new
 * reference. Errors: NULL arguments (TypeError); a major version other
 * than PF_DLPACK_MAJOR_VERSION (ValueError naming it: its layout after the
 * deleter is unknown); MemoryError. Thread-safe. */
PF_EXPORT int PFTensorCreateFromDLPackVersioned(PFDLManagedTensorVersioned* managed,
                                                PFObjectHandle* out);

/* The DLTensor of a tensor object, borrowed: valid while the object lives.
 * For a read-only tensor, to read only (see above).
 * Errors: NULL arguments or not a tensor object (TypeError). */
PF_EXPORT int PFTensorGetDLTensor(PFObjectHandle tensor, DLTensor** out);

/* Writes 1 to *out when the tensor is read-only (see above), else 0.
 * Errors: not a live tensor object, NULL out (TypeError). Thread-safe. */
PF_EXPORT int PFTensorIsReadOnly(PFObjectHandle tensor, int* out);

/* Exports a tensor object as a new DLPack managed tensor that shares its
 * data and keeps the object alive until the consumer calls the managed
 * tensor's deleter. This is how a binding hands a tensor to a DLPack
 * consumer (numpy.from_dlpack) without a copy.
 * Errors: NULL arguments or not a tensor (TypeError); a read-only tensor,
 * or one of sub-byte elements that are padded (PF_DLPACK_FLAG_
 * IS_SUBBYTE_TYPE_PADDED), which an unversioned managed tensor cannot
 * describe (ValueError: use PFTensorToDLPackVersioned); MemoryError. */
PF_EXPORT int PFTensorToDLPack(PFObjectHandle tensor, DLManagedTensor** out);

/* As PFTensorToDLPack, as a versioned managed tensor of version
 * PF_DLPACK_MAJOR_VERSION.PF_DLPACK_MINOR_VERSION whose flags say
 * PF_DLPACK_FLAG_READ_ONLY for a read-only tensor and
 * PF_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED when the tensor came with it
 * (never IS_COPIED: the data is shared). The consumer calls its deleter
 * once. Errors: NULL arguments or not a tensor (TypeError), MemoryError.
 * Thread-safe. */
PF_EXPORT int PFTensorToDLPackVersioned(PFObjectHandle tensor, PFDLManagedTensorVersioned** out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_OBJECT_H_ */
