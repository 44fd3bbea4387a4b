/* Versioned DLPack both ways, and read-only tensors: the layout, the
 * deleters (exactly once, also on failure), the flags kept and handed on,
 * what refuses a read-only tensor, and every allocation failing in turn. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "support/pf_test.h"
#include "support/pf_fault.h"

static int64_t g_shape[2] = {2, 3};
static float g_data[6] = {1, 2, 3, 4, 5, 6};
static atomic_int g_deleted;

static void versioned_deleter(PFDLManagedTensorVersioned* self) {
  atomic_fetch_add(&g_deleted, 1);
  free(self);
}

static void legacy_deleter(DLManagedTensor* self) {
  atomic_fetch_add(&g_deleted, 1);
  free(self);
}

static void fill(DLTensor* t, DLDataType dtype) {
  memset(t, 0, sizeof(*t));
  t->data = g_data;
  t->device.device_type = kDLCPU;
  t->ndim = 2;
  t->dtype = dtype;
  t->shape = g_shape;
}

static PFDLManagedTensorVersioned* make_versioned(uint32_t major, uint32_t minor, uint64_t flags,
                                                  DLDataType dtype) {
  PFDLManagedTensorVersioned* m = calloc(1, sizeof(*m));
  assert_non_null(m);
  m->version.major = major;
  m->version.minor = minor;
  m->deleter = versioned_deleter;
  m->flags = flags;
  fill(&m->dl_tensor, dtype);
  return m;
}

static const DLDataType k_f32 = {kDLFloat, 32, 1};

/* PFDLManagedTensorVersioned is DLPack 1.x's DLManagedTensorVersioned. */
static void test_layout(void** state) {
  (void)state;
  assert_int_equal(offsetof(PFDLManagedTensorVersioned, version), 0);
  assert_int_equal(offsetof(PFDLManagedTensorVersioned, manager_ctx), 8);
  assert_int_equal(offsetof(PFDLManagedTensorVersioned, deleter), 8 + sizeof(void*));
  assert_int_equal(offsetof(PFDLManagedTensorVersioned, flags), 8 + 2 * sizeof(void*));
  assert_int_equal(offsetof(PFDLManagedTensorVersioned, dl_tensor), 16 + 2 * sizeof(void*));
  assert_int_equal(PF_DLPACK_FLAG_READ_ONLY, 1);
  assert_int_equal(PF_DLPACK_FLAG_IS_COPIED, 2);
  assert_int_equal(PF_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED, 4);
  size_t n = 0;
  assert_pf_ok(PFGetStructSize("PFDLManagedTensorVersioned", &n));
  assert_int_equal(n, sizeof(PFDLManagedTensorVersioned));
}

static void test_versioned_in_and_out(void** state) {
  (void)state;
  atomic_store(&g_deleted, 0);
  PFObjectHandle t = NULL;
  assert_pf_ok(
      PFTensorCreateFromDLPackVersioned(make_versioned(1, 1, PF_DLPACK_FLAG_IS_COPIED, k_f32), &t));
  int ro = -1;
  assert_pf_ok(PFTensorIsReadOnly(t, &ro));
  assert_int_equal(ro, 0);
  DLTensor* dl = NULL;
  assert_pf_ok(PFTensorGetDLTensor(t, &dl));
  assert_ptr_equal(dl->data, g_data);
  assert_int_equal(dl->shape[1], 3);
  /* Out, versioned: shares the data, keeps the object alive; IS_COPIED is
   * not handed on (the data is shared now). */
  PFDLManagedTensorVersioned* out = NULL;
  assert_pf_ok(PFTensorToDLPackVersioned(t, &out));
  assert_int_equal(out->version.major, 1);
  assert_int_equal(out->version.minor, 1);
  assert_int_equal(out->flags, 0);
  assert_ptr_equal(out->dl_tensor.data, g_data);
  /* Out, unversioned, too: a writable tensor may go either way. */
  DLManagedTensor* legacy = NULL;
  assert_pf_ok(PFTensorToDLPack(t, &legacy));
  assert_pf_ok(PFObjectFree(t));
  assert_int_equal(g_deleted, 0);
  out->deleter(out);
  assert_int_equal(g_deleted, 0);
  legacy->deleter(legacy);
  assert_int_equal(g_deleted, 1);
  /* A newer minor version only adds codes: accepted. */
  assert_pf_ok(PFTensorCreateFromDLPackVersioned(make_versioned(1, 7, 0, k_f32), &t));
  assert_pf_ok(PFObjectFree(t));
  assert_int_equal(g_deleted, 2);
  /* An unversioned tensor goes out versioned with no flags. */
  DLManagedTensor* m = calloc(1, sizeof(*m));
  fill(&m->dl_tensor, k_f32);
  m->deleter = legacy_deleter;
  assert_pf_ok(PFTensorCreateFromDLPack(m, &t));
  assert_pf_ok(PFTensorToDLPackVersioned(t, &out));
  assert_int_equal(out->flags, 0);
  out->deleter(out);
  assert_pf_ok(PFObjectFree(t));
  assert_int_equal(g_deleted, 3);
}

static int64_t c_first_elem_times_two(DLTensor* t) { return (int64_t)(((float*)t->data)[0] * 2); }

/* A read-only tensor is never handed out as writable. */
static void test_read_only(void** state) {
  (void)state;
  atomic_store(&g_deleted, 0);
  PFObjectHandle t = NULL;
  assert_pf_ok(PFTensorCreateFromDLPackVersioned(
      make_versioned(1, 1, PF_DLPACK_FLAG_READ_ONLY | PF_DLPACK_FLAG_IS_COPIED, k_f32), &t));
  int ro = -1;
  assert_pf_ok(PFTensorIsReadOnly(t, &ro));
  assert_int_equal(ro, 1);
  DLManagedTensor* legacy = (DLManagedTensor*)0x1;
  assert_pf_error(PFTensorToDLPack(t, &legacy), kPFErrValueError, "PFTensorToDLPack", "read-only",
                  "PFTensorToDLPackVersioned");
  assert_ptr_equal(legacy, (DLManagedTensor*)0x1);
  PFDLManagedTensorVersioned* out = NULL;
  assert_pf_ok(PFTensorToDLPackVersioned(t, &out));
  assert_int_equal(out->flags, PF_DLPACK_FLAG_READ_ONLY);
  out->deleter(out);
  /* A typed function's tensor argument is a writable DLTensor*. */
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)c_first_elem_times_two, "int64(tensor)", &f));
  PFValue a = {.v_handle = t}, rv;
  int ac = kPFObjectHandle, rc;
  assert_pf_error(PFFuncCall(f, &a, &ac, 1, &rv, &rc), kPFErrTypeError, "argument 0",
                  "read-only tensor object");
  /* Its DLTensor is still there to read, and a writable tensor passes. */
  DLTensor* dl = NULL;
  assert_pf_ok(PFTensorGetDLTensor(t, &dl));
  assert_ptr_equal(dl->data, g_data);
  assert_pf_ok(PFObjectFree(t));
  assert_pf_ok(PFTensorCreateFromDLPackVersioned(make_versioned(1, 1, 0, k_f32), &t));
  a.v_handle = t;
  assert_pf_ok(PFFuncCall(f, &a, &ac, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 2);
  assert_pf_ok(PFObjectFree(t));
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(g_deleted, 2);
}

/* Padded sub-byte elements cannot go out unversioned. */
static void test_subbyte_padded(void** state) {
  (void)state;
  atomic_store(&g_deleted, 0);
  PFObjectHandle t = NULL;
  DLDataType f4 = {kDLFloat4_e2m1fn, 4, 1};
  assert_pf_ok(PFTensorCreateFromDLPackVersioned(
      make_versioned(1, 1, PF_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED, f4), &t));
  DLManagedTensor* legacy = NULL;
  assert_pf_error(PFTensorToDLPack(t, &legacy), kPFErrValueError, "4-bit elements are padded");
  PFDLManagedTensorVersioned* out = NULL;
  assert_pf_ok(PFTensorToDLPackVersioned(t, &out));
  assert_int_equal(out->flags, PF_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED);
  out->deleter(out);
  assert_pf_ok(PFObjectFree(t));
  /* The flag means nothing for whole bytes. */
  assert_pf_ok(PFTensorCreateFromDLPackVersioned(
      make_versioned(1, 1, PF_DLPACK_FLAG_IS_SUBBYTE_TYPE_PADDED, k_f32), &t));
  assert_pf_ok(PFTensorToDLPack(t, &legacy));
  legacy->deleter(legacy);
  assert_pf_ok(PFObjectFree(t));
  assert_int_equal(g_deleted, 2);
}

static void test_bad_input(void** state) {
  (void)state;
  atomic_store(&g_deleted, 0);
  PFObjectHandle t = (PFObjectHandle)0x1;
  /* Ownership passes even when the call fails: the deleter runs once. */
  assert_pf_error(PFTensorCreateFromDLPackVersioned(make_versioned(1, 1, 0, k_f32), NULL),
                  kPFErrTypeError, "argument 'out' is NULL");
  assert_int_equal(g_deleted, 1);
  assert_pf_error(PFTensorCreateFromDLPackVersioned(make_versioned(2, 0, 0, k_f32), &t),
                  kPFErrValueError, "DLPack version 2.0 is not supported");
  assert_int_equal(g_deleted, 2);
  assert_pf_error(PFTensorCreateFromDLPackVersioned(make_versioned(0, 8, 0, k_f32), &t),
                  kPFErrValueError, "version 0.8");
  assert_int_equal(g_deleted, 3);
  assert_ptr_equal(t, (PFObjectHandle)0x1);
  assert_pf_error(PFTensorCreateFromDLPackVersioned(NULL, &t), kPFErrTypeError,
                  "argument 'managed' is NULL");
  /* A NULL deleter is allowed. */
  PFDLManagedTensorVersioned m = {{1, 1}, NULL, NULL, 0, {0}};
  fill(&m.dl_tensor, k_f32);
  assert_pf_ok(PFTensorCreateFromDLPackVersioned(&m, &t));
  assert_pf_ok(PFObjectFree(t));
  PFObjectHandle arr = NULL;
  assert_pf_ok(PFArrayCreate(NULL, NULL, 0, &arr));
  int ro = 7;
  assert_pf_error(PFTensorIsReadOnly(arr, &ro), kPFErrTypeError,
                  "PFTensorIsReadOnly: argument 'tensor' is not a live tensor handle");
  assert_pf_error(PFTensorToDLPackVersioned(arr, NULL), kPFErrTypeError, "not a live tensor");
  assert_int_equal(ro, 7);
  assert_pf_ok(PFObjectFree(arr));
}

/* ---- allocation failures ---- */

static atomic_int g_fault_made;

static void fault_deleter(PFDLManagedTensorVersioned* self) {
  atomic_fetch_sub(&g_fault_made, 1);
  free(self);
}

static int fault_work(void) {
  PFObjectHandle t = NULL;
  PFDLManagedTensorVersioned* m = make_versioned(1, 1, PF_DLPACK_FLAG_READ_ONLY, k_f32);
  m->deleter = fault_deleter;
  atomic_fetch_add(&g_fault_made, 1);
  PFDLManagedTensorVersioned* out = NULL;
  int st = PFTensorCreateFromDLPackVersioned(m, &t);
  if (st == 0) st = PFTensorToDLPackVersioned(t, &out);
  char kind[64];
  snprintf(kind, sizeof(kind), "%s", PFErrorGetKind());
  if (out) out->deleter(out);
  PFObjectFree(t);
  /* Whatever failed, the deleter ran exactly once. */
  assert_int_equal(atomic_load(&g_fault_made), 0);
  if (st != 0) PFErrorSet(kind, "failed step");
  return st;
}

static void test_allocation_failures(void** state) {
  (void)state;
  assert_true(pf_fault_walk(fault_work, "dlpack") >= 2);
}

int main(void) {
  if (pf_fault_install() != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_layout),    cmocka_unit_test(test_versioned_in_and_out),
      cmocka_unit_test(test_read_only), cmocka_unit_test(test_subbyte_padded),
      cmocka_unit_test(test_bad_input), cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
