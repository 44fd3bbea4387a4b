/* PFFuncCall: plain and string arguments, every kind of result (plain,
 * a string too long for the inline copy, a handle), failures with and
 * without an error (also after an earlier error that nobody cleared), and
 * every misuse it detects. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "support/pf_test.h"

static PFFunctionHandle make(PFPackedCFunc fn, void* resource) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, resource, NULL, &f));
  return f;
}

/* Returns what its resource (an int) says: 0 its first argument, 1 a long
 * string, 2 itself (a handle), 3 fails with an error, 4 fails silently,
 * 5 the string length of its first argument. */
static int p_mode(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  int mode = *(int*)res;
  switch (mode) {
    case 0:
      return n ? PFCFuncSetReturn(ret, &a[0], &c[0], 1) : 0;
    case 1: {
      PFValue v = {.v_str = "a result longer than the sixty-four bytes a slot keeps inline....!"};
      int code = kPFStr;
      return PFCFuncSetReturn(ret, &v, &code, 1);
    }
    case 2: {
      PFValue v = {.v_handle = a[0].v_handle};
      int code = kPFFuncHandle;
      return PFCFuncSetReturn(ret, &v, &code, 1);
    }
    case 3:
      return PFErrorSetFormat(kPFErrKeyError, "mode three");
    case 4:
      return -1;
    default: {
      PFValue v = {.v_int64 = (int64_t)strlen(a[0].v_str)};
      int code = kPFInt;
      return PFCFuncSetReturn(ret, &v, &code, 1);
    }
  }
}

static void test_plain_and_string_arguments(void** state) {
  (void)state;
  int echo = 0, len = 5;
  PFFunctionHandle fe = make(p_mode, &echo), fl = make(p_mode, &len);
  PFValue a[2] = {{.v_int64 = 41}, {.v_float64 = 2.5}};
  int c[2] = {kPFInt, kPFFloat};
  PFValue rv, rv2;
  int rc, rc2;
  assert_pf_ok(PFFuncCall(fe, a, c, 2, &rv, &rc));
  assert_pf_ok(PFGetApiBase()->GetApi(1)->FuncCall(fe, a, c, 2, &rv2, &rc2));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rc2, kPFInt);
  assert_int_equal(rv.v_int64, 41);
  a[0].v_str = "hello";
  c[0] = kPFStr;
  assert_pf_ok(PFFuncCall(fl, a, c, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 5);
  /* A string result: a copy in this thread's return storage. */
  assert_pf_ok(PFFuncCall(fe, a, c, 1, &rv, &rc));
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, "hello");
  assert_true(rv.v_str != a[0].v_str);
  PFFuncFree(fe);
  PFFuncFree(fl);
}

static void test_results_that_end_out_of_line(void** state) {
  (void)state;
  int longstr = 1, self = 2;
  PFFunctionHandle fs = make(p_mode, &longstr), fh = make(p_mode, &self);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(fs, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str,
                      "a result longer than the sixty-four bytes a slot keeps inline....!");
  PFValue arg = {.v_handle = fh};
  int code = kPFFuncHandle;
  assert_pf_ok(PFFuncCall(fh, &arg, &code, 1, &rv, &rc));
  assert_int_equal(rc, kPFFuncHandle);
  assert_ptr_equal(rv.v_handle, fh);
  assert_pf_ok(PFFuncFree(rv.v_handle)); /* the result's own reference */
  PFFuncFree(fs);
  PFFuncFree(fh);
}

static void test_failures(void** state) {
  (void)state;
  int err = 3, silent = 4;
  PFFunctionHandle fe = make(p_mode, &err), fs = make(p_mode, &silent);
  PFValue rv = {.v_int64 = 77};
  int rc = 99;
  assert_pf_error(PFFuncCall(fe, NULL, NULL, 0, &rv, &rc), kPFErrKeyError, "mode three");
  assert_int_equal(rv.v_int64, 77); /* the outputs are left alone */
  assert_int_equal(rc, 99);
  /* An earlier error that nobody cleared is not taken for this one's. */
  assert_pf_error(PFFuncCall(fs, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError,
                  "returned -1 without recording an error");
  PFErrorClear();
  assert_pf_error(PFFuncCall(fs, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError,
                  "without recording an error");
  PFFuncFree(fe);
  PFFuncFree(fs);
}

static void test_misuse(void** state) {
  (void)state;
  int echo = 0;
  PFFunctionHandle f = make(p_mode, &echo);
  PFValue a[1] = {{.v_int64 = 1}};
  int c[1] = {kPFInt};
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(NULL, a, c, 1, &rv, &rc), kPFErrTypeError, "'func'");
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  assert_pf_error(PFFuncCall(boxed, a, c, 1, &rv, &rc), kPFErrTypeError, "'func'");
  PFObjectFree(boxed);
  assert_pf_error(PFFuncCall(f, a, c, 1, NULL, &rc), kPFErrTypeError, "'ret_val'");
  assert_pf_error(PFFuncCall(f, a, c, 1, &rv, NULL), kPFErrTypeError, "'ret_type_code'");
  assert_pf_error(PFFuncCall(f, a, c, -1, &rv, &rc), kPFErrValueError, "num_args");
  assert_pf_error(PFFuncCall(f, NULL, c, 1, &rv, &rc), kPFErrTypeError, "'args'");
  assert_pf_error(PFFuncCall(f, a, NULL, 1, &rv, &rc), kPFErrTypeError, "'type_codes'");
  c[0] = 200;
  assert_pf_error(PFFuncCall(f, a, c, 1, &rv, &rc), kPFErrTypeError, "unknown type code 200");
  c[0] = kPFStr;
  a[0].v_str = NULL;
  assert_pf_error(PFFuncCall(f, a, c, 1, &rv, &rc), kPFErrTypeError, "NULL pointer");
  PFByteArray ba = {"xy", 2};
  a[0].v_handle = &ba;
  c[0] = kPFBytes;
  assert_pf_ok(PFFuncCall(f, a, c, 1, &rv, &rc));
  assert_int_equal(rc, kPFBytes);
  PFFuncFree(f);
}

/* A direct callee that returns its argument count. */
static int d_count(void* res, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)res, (void)a, (void)c;
  rv->v_int64 = n;
  *rc = kPFInt;
  return 0;
}

/* PFFuncCall checks every argument, whatever the count and the callee's
 * convention: a bad code at any position of calls of 1 to 6 arguments is
 * refused by position, before the callee runs. */
static void test_every_argument_is_checked(void** state) {
  (void)state;
  int echo = 0;
  PFFunctionHandle fs[2] = {make(p_mode, &echo), NULL};
  assert_pf_ok(PFFuncCreateDirect(d_count, NULL, NULL, &fs[1]));
  PFValue a[6];
  int c[6];
  for (int k = 0; k < 2; ++k) {
    for (int n = 1; n <= 6; ++n) {
      for (int i = 0; i < n; ++i) {
        a[i].v_int64 = i;
        c[i] = kPFInt;
      }
      PFValue rv = {.v_int64 = -1};
      int rc = -1;
      assert_pf_ok(PFFuncCall(fs[k], a, c, n, &rv, &rc));
      assert_int_equal(rc, kPFInt);
      assert_int_equal(rv.v_int64, k == 0 ? 0 : n);
      for (int bad = 0; bad < n; ++bad) {
        char want[64];
        snprintf(want, sizeof(want), "argument %d has unknown type code 200", bad);
        c[bad] = 200;
        rv.v_int64 = 77;
        rc = 99;
        assert_pf_error(PFFuncCall(fs[k], a, c, n, &rv, &rc), kPFErrTypeError, want);
        assert_int_equal(rv.v_int64, 77);
        assert_int_equal(rc, 99);
        c[bad] = kPFInt;
      }
    }
  }
  PFFuncFree(fs[0]);
  PFFuncFree(fs[1]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_and_string_arguments),
      cmocka_unit_test(test_results_that_end_out_of_line),
      cmocka_unit_test(test_failures),
      cmocka_unit_test(test_misuse),
      cmocka_unit_test(test_every_argument_is_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
