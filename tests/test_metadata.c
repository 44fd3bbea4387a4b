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
  assert_string_equal(sig, "int64(int64,int64)"); /* canonical: no blanks */
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

/* A signature is checked and kept canonical, so readers need no parser. */
static void test_signature_is_checked_and_canonical(void** state) {
  (void)state;
  PFFunctionHandle f = make();
  assert_pf_ok(PFFuncSetInfo(f, NULL, " double ( int32 ,\tuint8\r\n, bool ) ", NULL));
  const char* sig = NULL;
  assert_pf_ok(PFFuncGetInfo(f, NULL, &sig, NULL));
  assert_string_equal(sig, "float64(int32,uint8,bool)");
  assert_pf_ok(PFFuncFree(f));

  static const char* const bad[] = {"int64(int64,,int64)",
                                    "float(int64)",
                                    "int64(void)",
                                    "int64(int64",
                                    "int64 int64)",
                                    "int64(int64) x",
                                    "",
                                    "(int64)",
                                    "Int64()",
                                    "int64(int64,)"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    f = make();
    /* All or nothing: the name given in the same call is not set either. */
    assert_pf_error(PFFuncSetInfo(f, "meta.bad", bad[i], "doc"), kPFErrValueError, "PFFuncSetInfo",
                    "bad signature");
    const char *name = "x", *doc = "x";
    sig = "x";
    assert_pf_ok(PFFuncGetInfo(f, &name, &sig, &doc));
    assert_null(name);
    assert_null(sig);
    assert_null(doc);
    assert_pf_ok(PFFuncFree(f));
  }
}

/* Every type of the grammar, by index: the names parse, and each type's
 * packed code is what a typed function gives for it. */
static void test_signature_type_info(void** state) {
  (void)state;
  const char* name = NULL;
  int code = -1, count = 0;
  assert_pf_ok(PFSignatureTypeInfo(0, &name, &code));
  assert_string_equal(name, "void");
  assert_int_equal(code, kPFNull);
  for (int i = 0; PFSignatureTypeInfo(i, &name, &code) == 0; ++i, ++count) {
    char text[64];
    snprintf(text, sizeof(text), "%s()", name);
    PFFunctionHandle f = make();
    assert_pf_ok(PFFuncSetInfo(f, NULL, text, NULL)); /* each name is in the grammar */
    assert_pf_ok(PFFuncFree(f));
    assert_non_null(PFTypeCodeName(code));
  }
  assert_pf_error(PFSignatureTypeInfo(count, NULL, NULL), kPFErrIndexError, "PFSignatureTypeInfo",
                  "'index'");
  assert_pf_error(PFSignatureTypeInfo(-1, NULL, NULL), kPFErrIndexError, "'index'");
  assert_int_equal(count, 26); /* then array, map, shape, object, list, dict, any */
  assert_pf_ok(PFSignatureTypeInfo(1, &name, &code));
  assert_string_equal(name, "int8");
  assert_int_equal(code, kPFInt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unset_reads_null),
      cmocka_unit_test(test_set_all_and_copy),
      cmocka_unit_test(test_null_fields_untouched),
      cmocka_unit_test(test_second_set_is_value_error),
      cmocka_unit_test(test_name_used_in_errors),
      cmocka_unit_test(test_signature_is_checked_and_canonical),
      cmocka_unit_test(test_signature_type_info),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
