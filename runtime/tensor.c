/* Tensors for C code: constraints checked, tensor arguments of packed
 * functions, new tensors. The rules are in tensor.h. */
#include <stdio.h>

#include "typed.h"

/* ---- constraints ---- */

/* Compact row-major (numpy's C-contiguous): a dimension of size 1 may have
 * any stride, and a tensor with no elements is contiguous. */
static int is_contiguous(const DLTensor* t) {
  if (t->strides == NULL) return 1;
  if (t->ndim < 0 || (t->ndim > 0 && t->shape == NULL)) return 0;
  for (int i = 0; i < t->ndim; ++i)
    if (t->shape[i] == 0) return 1;
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] != 1 && t->strides[i] != expected) return 0;
    if (__builtin_mul_overflow(expected, t->shape[i], &expected)) return 0;
  }
  return 1;
}

pf_conv pf_tc_check(const pf_tc* tc, const DLTensor* dl) {
  uint8_t f = tc->flags;
  if ((f & kPFTensorCheckDtype) &&
      (dl->dtype.code != tc->dtype.code || dl->dtype.bits != tc->dtype.bits ||
       dl->dtype.lanes != tc->dtype.lanes))
    return pf_conv_tdtype;
  if ((f & kPFTensorCheckNdim) && dl->ndim != tc->ndim) return pf_conv_tshape;
  if ((f & kPFTensorContiguous) && !is_contiguous(dl)) return pf_conv_tshape;
  if ((f & kPFTensorCheckDevice) && (int)dl->device.device_type != tc->device)
    return pf_conv_tshape;
  return pf_conv_ok;
}

int pf_tc_error(pf_conv c, const char* who, const char* what, const pf_tc* tc, const DLTensor* dl) {
  char want[96], dtype[PF_DTYPE_STRING_MAX], extra[200] = "";
  pf_tc_format(tc, want, sizeof(want));
  if (PFDataTypeToString(dl->dtype, dtype, sizeof(dtype)) != 0)
    snprintf(dtype, sizeof(dtype), "0-lane");
  if ((tc->flags & kPFTensorContiguous) && c == pf_conv_tshape &&
      !((tc->flags & kPFTensorCheckNdim) && dl->ndim != tc->ndim) && !is_contiguous(dl)) {
    size_t n = (size_t)snprintf(extra, sizeof(extra), " that is not contiguous (strides [");
    for (int i = 0; i < dl->ndim && i < 8 && n < sizeof(extra); ++i)
      n += (size_t)snprintf(extra + n, sizeof(extra) - n, "%s%lld", i ? ", " : "",
                            (long long)dl->strides[i]);
    if (n < sizeof(extra))
      snprintf(extra + n, sizeof(extra) - n, "%s])", dl->ndim > 8 ? ", ..." : "");
  } else if ((tc->flags & kPFTensorCheckDevice) && c == pf_conv_tshape &&
             (int)dl->device.device_type != tc->device) {
    const char* d = pf_device_name(dl->device.device_type);
    if (d != NULL) snprintf(extra, sizeof(extra), " on %s:%d", d, (int)dl->device.device_id);
    else snprintf(extra, sizeof(extra), " on device type %d", (int)dl->device.device_type);
  }
  /* A call's argument: the caller's error, with no place (PF_ERROR in base.h). */
  return PFErrorSetFormat(c == pf_conv_tdtype ? kPFErrTypeError : kPFErrValueError,
                          "%s%s%s: expected %s, got %s tensor of rank %d%s", who ? who : "",
                          who ? ": " : "", what, want, dtype, (int)dl->ndim, extra);
}

/* ---- tensor arguments ---- */

int PFArgGetTensor(const PFValue* args, const int* type_codes, int num_args, int index,
                   const char* constraint, DLTensor** out) {
  static const char* const where = "PFArgGetTensor";
  PF_CHECK_ARG(out);
  if (num_args < 0)
    return PF_ERROR(kPFErrValueError, "%s: argument 'num_args' is negative (%d)", where, num_args);
  if (index < 0)
    return PF_ERROR(kPFErrValueError, "%s: argument 'index' is negative (%d)", where, index);
  if (num_args > 0 && (args == NULL || type_codes == NULL))
    return PF_ERROR(kPFErrTypeError, "%s: argument '%s' is NULL with num_args %d", where,
                    args == NULL ? "args" : "type_codes", num_args);
  pf_tc tc;
  memset(&tc, 0, sizeof(tc));
  if (constraint != NULL && pf_tc_parse(where, constraint, &tc) != 0) return -1;
  char what[32], want[96];
  snprintf(what, sizeof(what), "argument %d", index);
  pf_tc_format(&tc, want, sizeof(want));
  /* The rest is about the call's arguments: no place (PF_ERROR in base.h). */
  if (index >= num_args)
    return PFErrorSetFormat(kPFErrTypeError, "%s: expected %s, but the call has %d argument%s",
                            what, want, num_args, num_args == 1 ? "" : "s");
  int code = type_codes[index];
  DLTensor* dl = NULL;
  if (code == kPFDLTensorHandle && args[index].v_handle != NULL) {
    dl = args[index].v_handle;
  } else if (code == kPFObjectHandle && pf_is_object(args[index].v_handle, kPFObjectTensor)) {
    if (pf_tensor_is_read_only(args[index].v_handle))
      return PFErrorSetFormat(kPFErrTypeError,
                              "%s: expected %s, got a read-only tensor object, whose data a "
                              "DLTensor* could write (read it with PFTensorGetDLTensor)",
                              what, want);
    PFTensorGetDLTensor(args[index].v_handle, &dl);
  } else {
    const char* got = PFTypeCodeName(code);
    if (code == kPFObjectHandle && pf_is_object(args[index].v_handle, 0))
      got = PFObjectTypeName(((const pf_object*)args[index].v_handle)->type_index);
    return PFErrorSetFormat(kPFErrTypeError, "%s: expected %s, got %s%s", what, want,
                            got ? got : "unknown type code",
                            code == kPFObjectHandle ? " object" : "");
  }
  pf_conv c = pf_tc_check(&tc, dl);
  if (c != pf_conv_ok) return pf_tc_error(c, NULL, what, &tc, dl);
  *out = dl;
  return 0;
}

/* ---- new tensors ---- */

/* One block: the managed tensor, the shape, then the data at an aligned
 * address. */
typedef struct {
  PFDLManagedTensorVersioned managed;
  int64_t shape[];
} pf_alloc_tensor;

static void alloc_tensor_delete(PFDLManagedTensorVersioned* self) { pf_free(self->manager_ctx); }

int PFTensorAlloc(int ndim, const int64_t* shape, DLDataType dtype, uint32_t flags,
                  PFObjectHandle* out, DLTensor** view) {
  static const char* const where = "PFTensorAlloc";
  PF_CHECK_ARG(out);
  if (ndim < 0 || ndim > PF_TENSOR_MAX_NDIM)
    return PF_ERROR(kPFErrValueError, "%s: argument 'ndim' is %d; a tensor has 0 to %d dimensions",
                    where, ndim, PF_TENSOR_MAX_NDIM);
  if (ndim > 0 && shape == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'shape' is NULL with ndim %d", where, ndim);
  if ((flags & ~kPFTensorAllocZero) != 0)
    return PF_ERROR(kPFErrValueError, "%s: argument 'flags' has unknown bits 0x%x", where,
                    (unsigned)(flags & ~kPFTensorAllocZero));
  if (dtype.bits == 0 || dtype.lanes == 0)
    return PF_ERROR(kPFErrValueError,
                    "%s: argument 'dtype' has %u bits and %u lanes; both must be at least 1", where,
                    (unsigned)dtype.bits, (unsigned)dtype.lanes);
  for (int i = 0; i < ndim; ++i)
    if (shape[i] < 0)
      return PF_ERROR(kPFErrValueError, "%s: argument 'shape[%d]' is negative (%lld)", where, i,
                      (long long)shape[i]);
  DLTensor probe;
  memset(&probe, 0, sizeof(probe));
  probe.ndim = ndim;
  probe.shape = (int64_t*)(uintptr_t)shape;
  probe.dtype = dtype;
  size_t bytes, head = sizeof(pf_alloc_tensor) + sizeof(int64_t) * (size_t)ndim, total;
  if (pf_tensor_bytes(&probe, &bytes) != 0 ||
      __builtin_add_overflow(bytes, head + PF_TENSOR_ALIGN, &total) || total > PF_MAX_OBJECT_SIZE)
    return PF_ERROR(kPFErrValueError,
                    "%s: a tensor of this shape and dtype is larger than any object can be "
                    "(PTRDIFF_MAX bytes)",
                    where);
  pf_alloc_tensor* t = pf_malloc(total);
  if (t == NULL) return pf_oom(where);
  memset(t, 0, head);
  uintptr_t data = ((uintptr_t)t + head + PF_TENSOR_ALIGN - 1) & ~(uintptr_t)(PF_TENSOR_ALIGN - 1);
  if (flags & kPFTensorAllocZero) memset((void*)data, 0, bytes);
  if (ndim > 0) memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
  t->managed.version.major = PF_DLPACK_MAJOR_VERSION;
  t->managed.version.minor = PF_DLPACK_MINOR_VERSION;
  t->managed.manager_ctx = t;
  t->managed.deleter = alloc_tensor_delete;
  DLTensor* dl = &t->managed.dl_tensor;
  dl->data = (void*)data;
  dl->device.device_type = kDLCPU;
  dl->device.device_id = 0;
  dl->ndim = ndim;
  dl->dtype = dtype;
  dl->shape = t->shape;
  dl->strides = NULL;
  dl->byte_offset = 0;
  PFObjectHandle obj = NULL;
  /* On failure (memory: the one way it fails here) the deleter has run. */
  if (PFTensorCreateFromDLPackVersioned(&t->managed, &obj) != 0) return pf_oom(where);
  *out = obj;
  if (view != NULL) *view = dl;
  return 0;
}

/* ---- data in row-major order (structural comparison, JSON) ---- */

int pf_tensor_row_major(const char* where, const DLTensor* t, const char** data, size_t* n,
                        char** own) {
  *own = NULL;
  if (t->ndim < 0 || t->ndim > PF_TENSOR_MAX_NDIM)
    return PF_ERROR(kPFErrValueError, "%s: a tensor of %d dims (at most %d)", where, t->ndim,
                    PF_TENSOR_MAX_NDIM);
  if (pf_tensor_bytes(t, n) != 0)
    return PF_ERROR(kPFErrValueError, "%s: a tensor with a negative dim or too large to read",
                    where);
  if (*n > 0 && !t->data) return PF_ERROR(kPFErrValueError, "%s: a tensor with NULL data", where);
  *data = (const char*)t->data + t->byte_offset;
  if (*n == 0 || is_contiguous(t)) return 0;
  size_t bits = (size_t)t->dtype.bits * t->dtype.lanes, elem = bits / 8;
  if (bits % 8 != 0)
    return PF_ERROR(kPFErrValueError, "%s: a strided tensor of a sub-byte dtype", where);
  char* buf = pf_malloc(*n);
  if (!buf) return pf_oom(where);
  int64_t idx[PF_TENSOR_MAX_NDIM] = {0};
  for (size_t off = 0; off < *n; off += elem) {
    int64_t src = 0;
    for (int i = 0; i < t->ndim; ++i) src += idx[i] * t->strides[i];
    memcpy(buf + off, *data + src * (int64_t)elem, elem);
    for (int i = t->ndim - 1; i >= 0 && ++idx[i] == t->shape[i]; --i) idx[i] = 0;
  }
  *data = *own = buf;
  return 0;
}
