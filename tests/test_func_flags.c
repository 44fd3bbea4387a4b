/* A function's flags (PFFuncSetFlags, PFFuncGetFlags): the hints that hosts
 * read, such as kPFFuncNonBlocking (keep the interpreter lock), and the
 * refusals of bad input. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>

#include "support/pf_test.h"

/* A function starts with no flag, gains the ones set, and keeps them: a
 * second set adds, never clears. */
static void test_flags_set_and_read(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  uint32_t flags = 99;
  assert_pf_ok(PFFuncGetFlags(f, &flags));
  assert_int_equal(flags, 0);
  assert_pf_ok(PFFuncSetFlags(f, kPFFuncNonBlocking));
  assert_pf_ok(PFFuncGetFlags(f, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  assert_pf_ok(PFFuncSetFlags(f, 0));
  assert_pf_ok(PFFuncGetFlags(f, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  /* The flag is a hint: calls are unchanged. */
  PFValue v = {.v_int64 = 5}, rv;
  int code = kPFInt, rc;
  assert_pf_ok(PFFuncCall(f, &v, &code, 1, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 5);
  /* Through the API table too. */
  const PFApi* api = PFGetApiBase()->GetApi(11);
  assert_non_null(api);
  flags = 0;
  assert_pf_ok(api->FuncGetFlags(f, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  assert_pf_ok(PFFuncFree(f));
}

/* Bad input: -1 with an error naming the entry point and the argument;
 * nothing set, nothing written. */
static void test_flags_bad_input(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  uint32_t flags = 7;
  assert_pf_error(PFFuncSetFlags(NULL, kPFFuncNonBlocking), "TypeError", "PFFuncSetFlags",
                  "'func'");
  assert_pf_error(PFFuncGetFlags(NULL, &flags), "TypeError", "PFFuncGetFlags", "'func'");
  assert_int_equal(flags, 7);
  /* Not a function: an array. */
  PFObjectHandle arr = NULL;
  assert_pf_ok(PFArrayCreate(NULL, NULL, 0, &arr));
  assert_pf_error(PFFuncSetFlags(arr, kPFFuncNonBlocking), "TypeError", "PFFuncSetFlags", "'func'");
  assert_pf_error(PFFuncGetFlags(arr, &flags), "TypeError", "PFFuncGetFlags", "'func'");
  assert_pf_ok(PFObjectFree(arr));
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  assert_pf_error(PFFuncGetFlags(f, NULL), "TypeError", "PFFuncGetFlags", "'out'");
  assert_pf_error(PFFuncSetFlags(f, kPFFuncNonBlocking | 0x80u), "ValueError", "PFFuncSetFlags",
                  "'flags'", "unknown bits 0x80");
  assert_pf_ok(PFFuncGetFlags(f, &flags));
  assert_int_equal(flags, 0); /* all or nothing */
  assert_pf_ok(PFFuncFree(f));
}

static void* set_flags_thread(void* f) {
  return PFFuncSetFlags(f, kPFFuncNonBlocking) == 0 ? f : NULL;
}

/* Threads that set and read the flags of one function at once (TSan). */
static void test_flags_threads(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  pthread_t t[4];
  for (int i = 0; i < 4; ++i) assert_int_equal(pthread_create(&t[i], NULL, set_flags_thread, f), 0);
  for (int i = 0; i < 4; ++i) {
    void* r = NULL;
    uint32_t flags;
    assert_pf_ok(PFFuncGetFlags(f, &flags));
    assert_true(flags == 0 || flags == kPFFuncNonBlocking);
    assert_int_equal(pthread_join(t[i], &r), 0);
    assert_ptr_equal(r, f);
  }
  uint32_t flags = 0;
  assert_pf_ok(PFFuncGetFlags(f, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  assert_pf_ok(PFFuncFree(f));
}

/* A function bound to constants (PFFuncBind) calls the function it binds:
 * it has that function's flags, whatever is bound. */
static void test_bound_functions_inherit_flags(void** state) {
  (void)state;
  PFFunctionHandle quick = NULL, plain = NULL, bound = NULL, twice = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &quick));
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &plain));
  assert_pf_ok(PFFuncSetFlags(quick, kPFFuncNonBlocking));
  int pos = 0, code = kPFInt;
  PFValue v = {.v_int64 = 7};
  uint32_t flags = 99;
  assert_pf_ok(PFFuncBind(quick, 1, &pos, &v, &code, NULL, &bound));
  assert_pf_ok(PFFuncGetFlags(bound, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  /* A binding of a binding, with nothing bound. */
  assert_pf_ok(PFFuncBind(bound, 0, NULL, NULL, NULL, NULL, &twice));
  assert_pf_ok(PFFuncGetFlags(twice, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(twice, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rv.v_int64, 7);
  assert_pf_ok(PFFuncFree(twice));
  assert_pf_ok(PFFuncFree(bound));
  assert_pf_ok(PFFuncBind(plain, 1, &pos, &v, &code, NULL, &bound));
  assert_pf_ok(PFFuncGetFlags(bound, &flags));
  assert_int_equal(flags, 0);
  assert_pf_ok(PFFuncFree(bound));
  assert_pf_ok(PFFuncFree(quick));
  assert_pf_ok(PFFuncFree(plain));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_flags_set_and_read),
      cmocka_unit_test(test_flags_bad_input),
      cmocka_unit_test(test_flags_threads),
      cmocka_unit_test(test_bound_functions_inherit_flags),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
