/* Reference counts and finalizers: every finalizer or deleter runs exactly
 * once, when the last reference goes or when the create call fails. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <ffi.h>
#include <stdlib.h>

#include "support/pf_test.h"
#include "../runtime/internal.h"

/* ---- functions --------------------------------------------------------- */

static void test_function_freed_by_caller(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle f = pf_test_make_counted(pf_test_echo, &fins);
  assert_non_null(f);
  assert_int_equal(atomic_load(&fins), 0);
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(atomic_load(&fins), 1);
}

static void test_function_registry_releases_last(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle f = pf_test_make_counted(pf_test_echo, &fins);
  assert_pf_ok(PFFuncRegisterGlobal("lifetime.registry_last", f, 0));
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(atomic_load(&fins), 0); /* the registry still holds it */
  PFFunctionHandle g = NULL;
  assert_pf_ok(PFFuncGetGlobal("lifetime.registry_last", &g));
  assert_ptr_equal(g, f);
  PFValue arg = {.v_int64 = 3}, rv;
  int code = kPFInt, rc;
  assert_pf_ok(PFFuncCall(g, &arg, &code, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 3);
  assert_pf_ok(PFFuncFree(g));
  assert_int_equal(atomic_load(&fins), 0);
  assert_pf_ok(PFFuncRemoveGlobal("lifetime.registry_last"));
  assert_int_equal(atomic_load(&fins), 1);
}

static void test_function_caller_releases_last(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle f = pf_test_make_counted(pf_test_echo, &fins);
  assert_pf_ok(PFFuncRegisterGlobal("lifetime.caller_last", f, 0));
  assert_pf_ok(PFFuncRemoveGlobal("lifetime.caller_last"));
  assert_int_equal(atomic_load(&fins), 0);
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(atomic_load(&fins), 1);
}

static void test_function_retain_counts(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle f = pf_test_make_counted(pf_test_echo, &fins);
  assert_pf_ok(PFFuncRetain(f));
  assert_pf_ok(PFObjectRetain(f)); /* a function is an object too */
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFObjectFree(f));
  assert_int_equal(atomic_load(&fins), 0);
  uint32_t ti = 0;
  assert_pf_ok(PFObjectGetTypeIndex(f, &ti));
  assert_int_equal(ti, kPFObjectFunction);
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(atomic_load(&fins), 1);
}

static int never_called(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  (void)res;
  return PFErrorSetFormat(kPFErrRuntimeError, "never_called was called");
}

static void test_function_create_failure_runs_finalizer(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle out = (PFFunctionHandle)(uintptr_t)1;
  assert_pf_error(PFFuncCreateFromCFunc(NULL, &fins, pf_test_count_fin, &out), kPFErrTypeError,
                  "PFFuncCreateFromCFunc", "'func'");
  assert_int_equal(atomic_load(&fins), 1);
  assert_ptr_equal(out, (PFFunctionHandle)(uintptr_t)1); /* untouched on failure */
  assert_pf_error(PFFuncCreateFromCFunc(never_called, &fins, pf_test_count_fin, NULL),
                  kPFErrTypeError, "PFFuncCreateFromCFunc", "'out'");
  assert_int_equal(atomic_load(&fins), 2);
  /* Without a finalizer a failure is still just an error. */
  assert_pf_error(PFFuncCreateFromCFunc(NULL, NULL, NULL, NULL), kPFErrTypeError,
                  "PFFuncCreateFromCFunc");
}

/* A finalizer that uses the registry: it must not run under the registry's
 * lock, or this would deadlock or fail. */
static atomic_int g_reentrant_fins;
static void reentrant_fin(void* res) {
  (void)res;
  PFFunctionHandle h = NULL;
  if (PFFuncGetGlobal("lifetime.reentrant.other", &h) == 0 && h != NULL) {
    PFFuncFree(h);
    if (PFFuncRemoveGlobal("lifetime.reentrant.other") == 0) atomic_fetch_add(&g_reentrant_fins, 1);
  }
}

static void test_finalizer_may_use_registry(void** state) {
  (void)state;
  PFFunctionHandle a = NULL, b = NULL, other = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, reentrant_fin, &a));
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &b));
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &other));
  assert_pf_ok(PFFuncRegisterGlobal("lifetime.reentrant", a, 0));
  assert_pf_ok(PFFuncRegisterGlobal("lifetime.reentrant.other", other, 0));
  assert_pf_ok(PFFuncFree(a));
  assert_pf_ok(PFFuncFree(other));
  /* The override drops the registry's last reference to `a`. */
  assert_pf_ok(PFFuncRegisterGlobal("lifetime.reentrant", b, 1));
  assert_int_equal(atomic_load(&g_reentrant_fins), 1);
  PFFunctionHandle h = (PFFunctionHandle)(uintptr_t)1;
  assert_pf_ok(PFFuncGetGlobal("lifetime.reentrant.other", &h));
  assert_null(h);
  assert_pf_ok(PFFuncRemoveGlobal("lifetime.reentrant"));
  assert_pf_ok(PFFuncFree(b));
}

/* ---- boxed objects ------------------------------------------------------ */

static void test_boxed_finalizer_once(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFObjectHandle o = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&fins, pf_test_count_fin, &o));
  for (int i = 0; i < 3; ++i) assert_pf_ok(PFObjectRetain(o));
  for (int i = 0; i < 3; ++i) assert_pf_ok(PFObjectFree(o));
  assert_int_equal(atomic_load(&fins), 0);
  uint32_t ti = 0;
  assert_pf_ok(PFObjectGetTypeIndex(o, &ti));
  assert_int_equal(ti, kPFObjectBoxed);
  assert_pf_ok(PFObjectFree(o));
  assert_int_equal(atomic_load(&fins), 1);
}

static void test_boxed_create_failure_runs_finalizer(void** state) {
  (void)state;
  atomic_int fins = 0;
  assert_pf_error(PFObjectCreateBoxed(&fins, pf_test_count_fin, NULL), kPFErrTypeError,
                  "PFObjectCreateBoxed", "'out'");
  assert_int_equal(atomic_load(&fins), 1);
  /* No finalizer: fine both ways. */
  assert_pf_error(PFObjectCreateBoxed(&fins, NULL, NULL), kPFErrTypeError, "PFObjectCreateBoxed");
  PFObjectHandle o = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &o));
  assert_pf_ok(PFObjectFree(o));
  assert_int_equal(atomic_load(&fins), 1);
}

/* ---- tensors ----------------------------------------------------------- */

typedef struct {
  DLManagedTensor managed;
  atomic_int deleted;
  float data[4];
  int64_t shape[1];
} counted_tensor;

static void counted_deleter(DLManagedTensor* m) {
  counted_tensor* t = m->manager_ctx;
  atomic_fetch_add(&t->deleted, 1);
}

static void counted_tensor_init(counted_tensor* t) {
  memset(t, 0, sizeof(*t));
  for (int i = 0; i < 4; ++i) t->data[i] = (float)i + 0.5f;
  t->shape[0] = 4;
  t->managed.dl_tensor = (DLTensor){.data = t->data,
                                    .device = {kDLCPU, 0},
                                    .ndim = 1,
                                    .dtype = {kDLFloat, 32, 1},
                                    .shape = t->shape};
  t->managed.manager_ctx = t;
  t->managed.deleter = counted_deleter;
  atomic_init(&t->deleted, 0);
}

static void test_tensor_deleter_once(void** state) {
  (void)state;
  counted_tensor t;
  counted_tensor_init(&t);
  PFObjectHandle obj = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(&t.managed, &obj));
  assert_pf_ok(PFObjectRetain(obj));
  assert_pf_ok(PFObjectFree(obj));
  assert_int_equal(atomic_load(&t.deleted), 0);
  DLTensor* dl = NULL;
  assert_pf_ok(PFTensorGetDLTensor(obj, &dl));
  assert_ptr_equal(dl, &t.managed.dl_tensor);
  uint32_t ti = 0;
  assert_pf_ok(PFObjectGetTypeIndex(obj, &ti));
  assert_int_equal(ti, kPFObjectTensor);
  assert_pf_ok(PFObjectFree(obj));
  assert_int_equal(atomic_load(&t.deleted), 1);
}

static void test_tensor_create_failure_runs_deleter(void** state) {
  (void)state;
  counted_tensor t;
  counted_tensor_init(&t);
  assert_pf_error(PFTensorCreateFromDLPack(&t.managed, NULL), kPFErrTypeError,
                  "PFTensorCreateFromDLPack", "'out'");
  assert_int_equal(atomic_load(&t.deleted), 1);
  /* A tensor without a deleter is fine. */
  t.managed.deleter = NULL;
  PFObjectHandle obj = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(&t.managed, &obj));
  assert_pf_ok(PFObjectFree(obj));
  assert_int_equal(atomic_load(&t.deleted), 1);
}

static void test_tensor_to_dlpack_keeps_alive(void** state) {
  (void)state;
  counted_tensor t;
  counted_tensor_init(&t);
  PFObjectHandle obj = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(&t.managed, &obj));
  DLManagedTensor* e1 = NULL;
  DLManagedTensor* e2 = NULL;
  assert_pf_ok(PFTensorToDLPack(obj, &e1));
  assert_pf_ok(PFTensorToDLPack(obj, &e2));
  assert_non_null(e1);
  assert_non_null(e1->deleter);
  assert_ptr_not_equal(e1, &t.managed);
  assert_ptr_equal(e1->dl_tensor.data, t.data); /* shared, not copied */
  assert_int_equal(e1->dl_tensor.ndim, 1);
  assert_int_equal(e1->dl_tensor.shape[0], 4);
  assert_pf_ok(PFObjectFree(obj));
  assert_int_equal(atomic_load(&t.deleted), 0); /* both exports hold it */
  assert_true(((float*)e1->dl_tensor.data)[3] == 3.5f);
  e1->deleter(e1);
  assert_int_equal(atomic_load(&t.deleted), 0);
  e2->deleter(e2);
  assert_int_equal(atomic_load(&t.deleted), 1);
}

/* ---- the libraries that hold an object's code ---------------------------- */

static pf_object* lib_of(void* obj, int i) { return ((pf_object*)obj)->code_libs[i]; }

/* Code in the program (or in libpackedfunc) never unloads: nothing held. */
static void test_program_code_holds_no_library(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle f = pf_test_make_counted(pf_test_echo, &fins);
  assert_null(lib_of(f, 0));
  assert_null(lib_of(f, 1));
  counted_tensor t;
  counted_tensor_init(&t);
  PFObjectHandle obj = NULL, again = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(&t.managed, &obj));
  assert_null(lib_of(obj, 0));
  /* The runtime's own deleter (an exported tensor taken back in). */
  DLManagedTensor* exported = NULL;
  assert_pf_ok(PFTensorToDLPack(obj, &exported));
  assert_pf_ok(PFTensorCreateFromDLPack(exported, &again));
  assert_null(lib_of(again, 0));
  assert_pf_ok(PFObjectFree(again));
  assert_pf_ok(PFObjectFree(obj));
  assert_int_equal(atomic_load(&t.deleted), 1);
  assert_pf_ok(PFFuncFree(f));
}

/* Code in a shared library (libffi here: shared in every build flavour)
 * holds that library, and its objects share one library object. The
 * functions are never called: they only hold. */
static void test_library_code_holds_its_library(void** state) {
  (void)state;
  PFFunctionHandle packed = NULL, typed = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc((PFPackedCFunc)(void (*)(void))ffi_call, NULL, NULL, &packed));
  pf_object* lib = lib_of(packed, 0);
  assert_non_null(lib);
  assert_null(lib_of(packed, 1));
  assert_int_equal(atomic_load(&lib->ref_count), 1);
  void* prep = (void*)pf_code_addr((void (*)(void))ffi_prep_cif);
  assert_pf_ok(PFFuncCreateFromTyped(prep, "int32(ptr)", &typed));
  assert_ptr_equal(lib_of(typed, 0), lib);
  assert_int_equal(atomic_load(&lib->ref_count), 2);
  assert_pf_ok(PFFuncFree(packed));
  assert_int_equal(atomic_load(&lib->ref_count), 1);
  assert_pf_ok(PFFuncFree(typed));
}

/* Code that no library contains (a libffi closure) holds nothing, and
 * works. */
static void test_closure_code_holds_no_library(void** state) {
  (void)state;
  PFFunctionHandle echo = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &echo));
  PFObjectHandle closure = NULL;
  void* fn = NULL;
  assert_pf_ok(PFFuncToCFunction(echo, "int64(int64)", &closure, &fn));
  int64_t (*c_fn)(int64_t) = (int64_t(*)(int64_t))(intptr_t)fn;
  PFFunctionHandle typed = NULL;
  assert_pf_ok(PFFuncCreateFromTyped(fn, "int64(int64)", &typed));
  assert_null(lib_of(typed, 0));
  assert_null(lib_of(typed, 1));
  PFValue a = {.v_int64 = 7}, r;
  int code = kPFInt, rc;
  assert_pf_ok(PFFuncCall(typed, &a, &code, 1, &r, &rc));
  assert_int_equal(r.v_int64, 7);
  assert_int_equal(c_fn(9), 9);
  assert_pf_ok(PFFuncFree(typed));
  assert_pf_ok(PFObjectFree(closure));
  assert_pf_ok(PFFuncFree(echo));
}

/* ---- *Free(NULL) --------------------------------------------------------- */

static void test_ref_count_follows_retain_and_free(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle f = pf_test_make_counted(pf_test_echo, &fins);
  int64_t n = -1;
  assert_pf_ok(PFObjectGetRefCount(f, &n));
  assert_int_equal(n, 1);
  assert_pf_ok(PFFuncRetain(f));
  assert_pf_ok(PFObjectGetRefCount(f, &n));
  assert_int_equal(n, 2);
  assert_pf_ok(PFFuncRegisterGlobal("lifetime.ref_count", f, 0));
  assert_pf_ok(PFObjectGetRefCount(f, &n));
  assert_int_equal(n, 3);
  assert_pf_ok(PFFuncRemoveGlobal("lifetime.ref_count"));
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFObjectGetRefCount(f, &n));
  assert_int_equal(n, 1);
  PFObjectHandle box = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &box));
  assert_pf_ok(PFObjectGetRefCount(box, &n));
  assert_int_equal(n, 1);
  assert_pf_ok(PFObjectFree(box));
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(atomic_load(&fins), 1);
}

static void test_ref_count_bad_input(void** state) {
  (void)state;
  int64_t n = 7;
  assert_pf_error(PFObjectGetRefCount(NULL, &n), "TypeError", "PFObjectGetRefCount", "obj");
  assert_int_equal(n, 7);
  int not_an_object[8] = {0};
  assert_pf_error(PFObjectGetRefCount(not_an_object, &n), "TypeError", "PFObjectGetRefCount");
  assert_int_equal(n, 7);
  PFObjectHandle box = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &box));
  assert_pf_error(PFObjectGetRefCount(box, NULL), "TypeError", "PFObjectGetRefCount", "out");
  assert_pf_ok(PFObjectFree(box));
}

static void test_free_null_is_noop(void** state) {
  (void)state;
  PFErrorSet("ValueError", "sentinel");
  assert_int_equal(PFFuncFree(NULL), 0);
  assert_int_equal(PFObjectFree(NULL), 0);
  PFMemFree(NULL);
  /* A no-op records no error. */
  assert_string_equal(PFErrorGetMessage(), "sentinel");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_function_freed_by_caller),
      cmocka_unit_test(test_function_registry_releases_last),
      cmocka_unit_test(test_function_caller_releases_last),
      cmocka_unit_test(test_function_retain_counts),
      cmocka_unit_test(test_function_create_failure_runs_finalizer),
      cmocka_unit_test(test_finalizer_may_use_registry),
      cmocka_unit_test(test_boxed_finalizer_once),
      cmocka_unit_test(test_boxed_create_failure_runs_finalizer),
      cmocka_unit_test(test_tensor_deleter_once),
      cmocka_unit_test(test_tensor_create_failure_runs_deleter),
      cmocka_unit_test(test_tensor_to_dlpack_keeps_alive),
      cmocka_unit_test(test_program_code_holds_no_library),
      cmocka_unit_test(test_library_code_holds_its_library),
      cmocka_unit_test(test_closure_code_holds_no_library),
      cmocka_unit_test(test_ref_count_follows_retain_and_free),
      cmocka_unit_test(test_ref_count_bad_input),
      cmocka_unit_test(test_free_null_is_noop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
