/* A callee that sets every kind of value and tries forged and NULL
 * handles, and a handle kept past its call: each refused without being
 * written to. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "support/pf_test.h"

static PFFunctionHandle make(PFPackedCFunc fn, void* resource) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, resource, NULL, &f));
  return f;
}

/* Returns its argument, then tries to set it again from a forged and a
 * NULL handle; both are refused and leave the result alone. */
static int p_echo_and_misuse(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1) return PF_ERROR(kPFErrTypeError, "want one argument");
  if (PFCFuncSetReturn(ret, &a[0], &c[0], 1) != 0) return -1;
  uintptr_t forged[16];
  memset(forged, 0, sizeof(forged));
  PFValue v = {.v_int64 = 0};
  int code = kPFInt;
  if (PFCFuncSetReturn(forged, &v, &code, 1) != -1 ||
      strcmp(PFErrorGetKind(), kPFErrTypeError) != 0)
    return PF_ERROR(kPFErrRuntimeError, "a forged ret was accepted");
  if (PFCFuncSetReturn(NULL, &v, &code, 1) != -1)
    return PF_ERROR(kPFErrRuntimeError, "a NULL ret was accepted");
  return 0;
}

static void test_values_through_the_exported_function(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo_and_misuse, NULL);
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  const struct {
    int code;
    PFValue v;
  } cases[] = {
      {kPFInt, {.v_int64 = 41}},
      {kPFFloat, {.v_float64 = -0.5}},
      {kPFDevice, {.v_device = {kDLCPU, 1}}},
      {kPFStr, {.v_str = "exported"}},
      {kPFObjectHandle, {.v_handle = boxed}},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    PFValue arg = cases[i].v, rv;
    int code = cases[i].code, rc;
    assert_pf_ok(PFFuncCall(f, &arg, &code, 1, &rv, &rc));
    assert_int_equal(rc, cases[i].code);
    if (rc == kPFStr) {
      assert_string_equal(rv.v_str, "exported");
    } else {
      assert_memory_equal(&rv, &cases[i].v, sizeof(PFValue));
      if (rc == kPFObjectHandle) assert_pf_ok(PFObjectFree(rv.v_handle));
    }
  }
  assert_pf_ok(PFObjectFree(boxed));
  assert_pf_ok(PFFuncFree(f));
}

static PFRetValueHandle g_kept;
static int p_keep(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)res;
  g_kept = ret;
  return 0;
}

static void test_stale_handle_through_the_exported_function(void** state) {
  (void)state;
  PFFunctionHandle keep = make(p_keep, NULL);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(keep, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  PFValue v = {.v_int64 = 1};
  int code = kPFInt;
  assert_pf_error(pf_test_set_return_stale(g_kept, &v, &code), kPFErrTypeError, "PFCFuncSetReturn",
                  "'ret'");
  assert_pf_ok(PFFuncFree(keep));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_values_through_the_exported_function),
      cmocka_unit_test(test_stale_handle_through_the_exported_function),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
