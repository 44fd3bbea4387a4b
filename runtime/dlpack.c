/* Tensor objects: DLPack managed tensors in (unversioned and versioned),
 * out again, and whether they may be written. The rules are in object.h. */
#include "internal.h"

/* The versioned struct is DLPack 1.x's layout, field for field. */
_Static_assert(offsetof(PFDLManagedTensorVersioned, version) == 0, "DLPack 1.x layout");
_Static_assert(offsetof(PFDLManagedTensorVersioned, manager_ctx) == 8, "DLPack 1.x layout");
_Static_assert(offsetof(PFDLManagedTensorVersioned, deleter) == 8 + sizeof(void*),
               "DLPack 1.x layout");
_Static_assert(offsetof(PFDLManagedTensorVersioned, flags) == 8 + 2 * sizeof(void*),
               "DLPack 1.x layout");
_Static_assert(offsetof(PFDLManagedTensorVersioned, dl_tensor) == 16 + 2 * sizeof(void*),
               "DLPack 1.x layout");

/* The flags a tensor keeps and hands on. */
#define KEPT_FLAGS (PF_DLPACK_FLAG_READ_ONLY | PF_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED)

typedef struct {
  pf_object base;
  DLTensor* dl;                          /* inside whichever is set below */
  DLManagedTensor* legacy;               /* owned: its deleter runs at the end */
  PFDLManagedTensorVersioned* versioned; /* likewise */
  uint64_t flags;                        /* KEPT_FLAGS of a versioned one */
} pf_tensor;

static void tensor_destroy(pf_object* o) {
  pf_tensor* t = (pf_tensor*)o;
  if (t->legacy && t->legacy->deleter) t->legacy->deleter(t->legacy);
  if (t->versioned && t->versioned->deleter) t->versioned->deleter(t->versioned);
  pf_free(t);
}

/* Makes the object around a managed tensor whose ownership the caller
 * passed; on failure the managed tensor's deleter has run. */
static int tensor_wrap(const char* where, DLManagedTensor* legacy,
                       PFDLManagedTensorVersioned* versioned, PFObjectHandle* out) {
  pf_tensor* t = pf_malloc(sizeof(*t));
  if (t == NULL) {
    if (legacy && legacy->deleter) legacy->deleter(legacy);
    if (versioned && versioned->deleter) versioned->deleter(versioned);
    return pf_oom(where);
  }
  pf_object_init(&t->base, kPFObjectTensor, tensor_destroy);
  t->legacy = legacy;
  t->versioned = versioned;
  t->dl = legacy ? &legacy->dl_tensor : &versioned->dl_tensor;
  t->flags = versioned ? versioned->flags & KEPT_FLAGS : 0;
  const void* code = legacy ? pf_code_addr((void (*)(void))legacy->deleter)
                            : pf_code_addr((void (*)(void))versioned->deleter);
  if (code != NULL && pf_object_hold_code(&t->base, code, where) != 0) {
    pf_object_release(&t->base); /* runs the deleter */
    return -1;
  }
  *out = t;
  return 0;
}

int PFTensorCreateFromDLPack(DLManagedTensor* managed, PFObjectHandle* out) {
  PF_CHECK_ARG(managed);
  if (out == NULL) {
    if (managed->deleter) managed->deleter(managed);
    return pf_err_null_arg(__func__, "out");
  }
  return tensor_wrap(__func__, managed, NULL, out);
}

int PFTensorCreateFromDLPackVersioned(PFDLManagedTensorVersioned* managed, PFObjectHandle* out) {
  PF_CHECK_ARG(managed);
  if (out == NULL) {
    if (managed->deleter) managed->deleter(managed);
    return pf_err_null_arg(__func__, "out");
  }
  if (managed->version.major != PF_DLPACK_MAJOR_VERSION) {
    /* DLPack keeps every field up to the flags where they are in any
     * version, so that the deleter can always be called. */
    uint32_t major = managed->version.major, minor = managed->version.minor;
    if (managed->deleter) managed->deleter(managed);
    return PF_ERROR(kPFErrValueError,
                    "%s: DLPack version %u.%u is not supported: this library reads major "
                    "version %d",
                    __func__, major, minor, PF_DLPACK_MAJOR_VERSION);
  }
  return tensor_wrap(__func__, NULL, managed, out);
}

int PFTensorGetDLTensor(PFObjectHandle tensor, DLTensor** out) {
  PF_CHECK_OBJECT(tensor, kPFObjectTensor);
  PF_CHECK_ARG(out);
  *out = ((pf_tensor*)tensor)->dl;
  return 0;
}

int pf_tensor_is_read_only(const void* tensor) {
  return (((const pf_tensor*)tensor)->flags & PF_DLPACK_FLAG_READ_ONLY) != 0;
}

int PFTensorIsReadOnly(PFObjectHandle tensor, int* out) {
  PF_CHECK_OBJECT(tensor, kPFObjectTensor);
  PF_CHECK_ARG(out);
  *out = pf_tensor_is_read_only(tensor);
  return 0;
}

static void exported_deleter(DLManagedTensor* self) {
  pf_object_release(self->manager_ctx);
  pf_free(self);
}

int PFTensorToDLPack(PFObjectHandle tensor, DLManagedTensor** out) {
  PF_CHECK_OBJECT(tensor, kPFObjectTensor);
  PF_CHECK_ARG(out);
  pf_tensor* t = tensor;
  if (t->flags & PF_DLPACK_FLAG_READ_ONLY)
    return PF_ERROR(kPFErrValueError,
                    "%s: the tensor is read-only, which a DLManagedTensor cannot say (its "
                    "consumer would write it); use PFTensorToDLPackVersioned",
                    __func__);
  if ((t->flags & PF_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED) && t->dl->dtype.bits < 8)
    return PF_ERROR(kPFErrValueError,
                    "%s: the tensor's %u-bit elements are padded to bytes, which a "
                    "DLManagedTensor cannot say (its consumer would read them packed); use "
                    "PFTensorToDLPackVersioned",
                    __func__, (unsigned)t->dl->dtype.bits);
  DLManagedTensor* m = pf_malloc(sizeof(*m));
  if (m == NULL) return pf_oom(__func__);
  m->dl_tensor = *t->dl;
  m->manager_ctx = t;
  m->deleter = exported_deleter;
  pf_object_retain(t);
  *out = m;
  return 0;
}

static void exported_versioned_deleter(PFDLManagedTensorVersioned* self) {
  pf_object_release(self->manager_ctx);
  pf_free(self);
}

int PFTensorToDLPackVersioned(PFObjectHandle tensor, PFDLManagedTensorVersioned** out) {
  PF_CHECK_OBJECT(tensor, kPFObjectTensor);
  PF_CHECK_ARG(out);
  pf_tensor* t = tensor;
  PFDLManagedTensorVersioned* m = pf_malloc(sizeof(*m));
  if (m == NULL) return pf_oom(__func__);
  m->version.major = PF_DLPACK_MAJOR_VERSION;
  m->version.minor = PF_DLPACK_MINOR_VERSION;
  m->manager_ctx = t;
  m->deleter = exported_versioned_deleter;
  m->flags = t->flags;
  m->dl_tensor = *t->dl;
  pf_object_retain(t);
  *out = m;
  return 0;
}
