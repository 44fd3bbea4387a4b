/* PFRegistrySeal. Sealing is permanent for the process, so it has a test
 * binary of its own: everything before the seal runs first, in order. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "support/pf_test.h"

static atomic_int g_fins_registered;
static atomic_int g_fins_refused;

static int64_t call_global_int(const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncGetGlobal(name, &f));
  assert_non_null(f);
  PFValue rv;
  int rc = -1;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_pf_ok(PFFuncFree(f));
  return rv.v_int64;
}

static int return_seven(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)res;
  PFValue v = {.v_int64 = 7};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_seal(void** state) {
  (void)state;
  PFFunctionHandle kept = NULL, removable = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(return_seven, &g_fins_registered, pf_test_count_fin, &kept));
  assert_pf_ok(PFFuncCreateFromCFunc(return_seven, NULL, NULL, &removable));
  assert_pf_ok(PFFuncRegisterGlobal("seal.kept", kept, 0));
  assert_pf_ok(PFFuncRegisterGlobal("seal.removable", removable, 0));
  assert_pf_ok(PFFuncFree(kept));
  assert_pf_ok(PFFuncFree(removable));

  int sealed = -1;
  assert_pf_ok(PFRegistryIsSealed(&sealed));
  assert_int_equal(sealed, 0);
  assert_pf_ok(PFRegistrySeal());
  assert_pf_ok(PFRegistryIsSealed(&sealed));
  assert_int_equal(sealed, 1);
  assert_pf_ok(PFRegistrySeal()); /* idempotent */
  assert_pf_ok(PFRegistryIsSealed(&sealed));
  assert_int_equal(sealed, 1);

  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(return_seven, &g_fins_refused, pf_test_count_fin, &f));
  assert_pf_error(PFFuncRegisterGlobal("seal.new", f, 0), kPFErrRuntimeError,
                  "PFFuncRegisterGlobal", "sealed", "'seal.new'");
  assert_pf_error(PFFuncRegisterGlobal("seal.kept", f, 1), kPFErrRuntimeError,
                  "PFFuncRegisterGlobal", "sealed", "'seal.kept'");
  assert_pf_error(PFFuncRegisterGlobalEx("seal.new2", f, kPFRegisterProtected), kPFErrRuntimeError,
                  "PFFuncRegisterGlobalEx", "sealed");
  assert_pf_error(PFFuncRemoveGlobal("seal.removable"), kPFErrRuntimeError, "PFFuncRemoveGlobal",
                  "sealed", "'seal.removable'");

  /* Lookups, calls and listing go on. */
  assert_int_equal(call_global_int("seal.kept"), 7);
  assert_int_equal(call_global_int("seal.removable"), 7);
  PFFunctionHandle absent = (PFFunctionHandle)(uintptr_t)1;
  assert_pf_ok(PFFuncGetGlobal("seal.new", &absent));
  assert_null(absent);
  int n = 0;
  const char** names = NULL;
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("seal.", &n, &names));
  assert_int_equal(n, 2);
  assert_string_equal(names[0], "seal.kept");
  assert_string_equal(names[1], "seal.removable");

  /* The refused registrations kept no reference to f. */
  assert_int_equal(atomic_load(&g_fins_refused), 0);
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(atomic_load(&g_fins_refused), 1);
  assert_int_equal(atomic_load(&g_fins_registered), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_seal),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
