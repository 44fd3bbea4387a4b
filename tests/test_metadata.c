/* PFFuncSetInfo / PFFuncGetInfo: set-once name, signature and doc. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "support/pf_test.h"

static PFFunctionHandle make(void) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  return f;
}

static void test_unset_reads_null(void** state) {
  (void)state;
  PFFunctionHandle f = make();
  const char* name = "x";
  const char* sig = "x";
  const char* doc = "x";
  assert_pf_ok(PFFuncGetInfo(f, &name, &sig, &doc));
  assert_null(name);
  assert_null(sig);
  assert_null(doc);
  /* Every out may be NULL. */
  assert_pf_ok(PFFuncGetInfo(f, NULL, NULL, NULL));
  assert_pf_ok(PFFuncFree(f));
}

static void test_set_all_and_copy(void** state) {
  (void)state;
  PFFunctionHandle f = make();
  char name_buf[32], doc_buf[64];
  snprintf(name_buf, sizeof(name_buf), "%s", "meta.add");
  snprintf(doc_buf, sizeof(doc_buf), "%s", "Adds two integers.");
  assert_pf_ok(PFFuncSetInfo(f, name_buf, "int64(int64, int64)", doc_buf));
  name_buf[0] = 'X'; /* the strings were copied */
  doc_buf[0] = 'X';
  const char *name = NULL, *sig = NULL, *doc = NULL;
  assert_pf_ok(PFFuncGetInfo(f, &name, &sig, &doc));
  assert_string_equal(name, "meta.add");
  assert_string_equal(sig, "int64(int64, int64)");
  assert_string_equal(doc, "Adds two integers.");
  /* Stable: the same pointers on a second read. */
  const char* name2 = NULL;
  assert_pf_ok(PFFuncGetInfo(f, &name2, NULL, NULL));
  assert_ptr_equal(name2, name);
  assert_pf_ok(PFFuncFree(f));
}

static void test_null_fields_untouched(void** state) {
  (void)state;
  PFFunctionHandle f = make();
  assert_pf_ok(PFFuncSetInfo(f, NULL, NULL, "doc only"));
  const char *name = "x", *sig = "x", *doc = NULL;
  assert_pf_ok(PFFuncGetInfo(f, &name, &sig, &doc));
  assert_null(name);
  assert_null(sig);
  assert_string_equal(doc, "doc only");
  /* Setting the other fields later leaves doc as it is. */
  assert_pf_ok(PFFuncSetInfo(f, "meta.later", NULL, NULL));
  assert_pf_ok(PFFuncSetInfo(f, NULL, "void()", NULL));
  assert_pf_ok(PFFuncSetInfo(f, NULL, NULL, NULL)); /* nothing to do */
  assert_pf_ok(PFFuncGetInfo(f, &name, &sig, &doc));
  assert_string_equal(name, "meta.later");
  assert_string_equal(sig, "void()");
  assert_string_equal(doc, "doc only");
  assert_pf_ok(PFFuncFree(f));
}

static void test_second_set_is_value_error(void** state) {
  (void)state;
  PFFunctionHandle f = make();
  assert_pf_ok(PFFuncSetInfo(f, "meta.first", NULL, NULL));
  assert_pf_error(PFFuncSetInfo(f, "meta.second", NULL, NULL), kPFErrValueError, "PFFuncSetInfo",
                  "'name'", "already set");
  /* Even the same value again. */
  assert_pf_error(PFFuncSetInfo(f, "meta.first", NULL, NULL), kPFErrValueError, "'name'");
  const char* name = NULL;
  assert_pf_ok(PFFuncGetInfo(f, &name, NULL, NULL));
  assert_string_equal(name, "meta.first");

  /* A call that fails changes nothing: the unset signature stays unset. */
  assert_pf_error(PFFuncSetInfo(f, "meta.third", "int64()", NULL), kPFErrValueError, "'name'");
  const char* sig = "x";
  assert_pf_ok(PFFuncGetInfo(f, NULL, &sig, NULL));
  assert_null(sig);

  assert_pf_ok(PFFuncSetInfo(f, NULL, "int64()", "d"));
  assert_pf_error(PFFuncSetInfo(f, NULL, "int32()", NULL), kPFErrValueError, "'signature'");
  assert_pf_error(PFFuncSetInfo(f, NULL, NULL, "d2"), kPFErrValueError, "'doc'");
  assert_pf_ok(PFFuncFree(f));
}

/* The name set by metadata shows in the runtime's own error messages. */
static int fail_silently(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  (void)res;
  return -1;
}

static void test_name_used_in_errors(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fail_silently, NULL, NULL, &f));
  assert_pf_ok(PFFuncSetInfo(f, "meta.silent", NULL, NULL));
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError, "'meta.silent'");
  assert_pf_ok(PFFuncFree(f));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unset_reads_null),
      cmocka_unit_test(test_set_all_and_copy),
      cmocka_unit_test(test_null_fields_untouched),
      cmocka_unit_test(test_second_set_is_value_error),
      cmocka_unit_test(test_name_used_in_errors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
