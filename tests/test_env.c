/* PFEnvSetSignalChecker / PFEnvCheckSignals: a host's interrupt check, as
 * a long-running packed function sees it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "support/pf_test.h"

static atomic_int g_checks;
static atomic_int g_interrupt_after; /* the check number that fails; 0: never */

static int host_checker(void) {
  int n = atomic_fetch_add(&g_checks, 1) + 1;
  int after = atomic_load(&g_interrupt_after);
  if (after != 0 && n >= after) {
    PFErrorSet("KeyboardInterrupt", "interrupted by the host");
    return -1;
  }
  return 0;
}

static int reset(void** state) {
  (void)state;
  atomic_store(&g_checks, 0);
  atomic_store(&g_interrupt_after, 0);
  return PFEnvSetSignalChecker(NULL);
}

static void test_no_checker_means_go_on(void** state) {
  (void)state;
  PFErrorSet("ValueError", "sentinel");
  assert_int_equal(PFEnvCheckSignals(), 0);
  assert_string_equal(PFErrorGetMessage(), "sentinel");
}

static void test_checker_ok_and_interrupt(void** state) {
  (void)state;
  assert_pf_ok(PFEnvSetSignalChecker(host_checker));
  assert_int_equal(PFEnvCheckSignals(), 0);
  assert_int_equal(atomic_load(&g_checks), 1);
  atomic_store(&g_interrupt_after, 2);
  assert_pf_error(PFEnvCheckSignals(), "KeyboardInterrupt", "interrupted by the host");
  assert_int_equal(atomic_load(&g_checks), 2);
  /* Removing the checker stops the calls. */
  assert_pf_ok(PFEnvSetSignalChecker(NULL));
  assert_int_equal(PFEnvCheckSignals(), 0);
  assert_int_equal(atomic_load(&g_checks), 2);
}

/* Loops until the host interrupts it, as a long computation would. */
static int long_running(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)res;
  for (int64_t i = 0; i < 1000000; ++i) {
    if (PFEnvCheckSignals() != 0) return -1;
  }
  PFValue v = {.v_int64 = 1};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_interrupt_stops_a_call(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(long_running, NULL, NULL, &f));
  assert_pf_ok(PFEnvSetSignalChecker(host_checker));
  atomic_store(&g_interrupt_after, 10);
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), "KeyboardInterrupt", "interrupted");
  assert_int_equal(atomic_load(&g_checks), 10);
  assert_pf_ok(PFFuncFree(f));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(test_no_checker_means_go_on, reset),
      cmocka_unit_test_setup(test_checker_ok_and_interrupt, reset),
      cmocka_unit_test_setup(test_interrupt_stops_a_call, reset),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
