/* PFFuncCallKw: keyword arguments matched against a signature's names,
 * defaults filled, Python's own errors; typed and packed functions alike. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "support/pf_test.h"

static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

/* A packed function that returns its arguments' count and, as a str,
 * what it was given, so that the assembled call is visible. */
static int describe_args(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  static _Thread_local char buf[512];
  size_t at = 0;
  for (int i = 0; i < n && at < sizeof(buf); ++i) {
    const char* sep = i ? "," : "";
    switch (codes[i]) {
      case kPFInt:
        at +=
            (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%lld", sep, (long long)args[i].v_int64);
        break;
      case kPFFloat:
        at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%g", sep, args[i].v_float64);
        break;
      case kPFStr:
        at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s'%s'", sep, args[i].v_str);
        break;
      case kPFBytes:
        at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%sb%zu", sep,
                               ((PFByteArray*)args[i].v_handle)->size);
        break;
      case kPFNull:
        at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%snull", sep);
        break;
      default:
        at += (size_t)snprintf(buf + at, sizeof(buf) - at, "%s%s", sep, PFTypeCodeName(codes[i]));
        break;
    }
  }
  buf[at < sizeof(buf) ? at : sizeof(buf) - 1] = '\0';
  PFValue v = {.v_str = buf};
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static PFFunctionHandle typed_clamp(const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)clamp,
                                     "float64(x: float64, lo: float64 = 0, hi: float64 = 1)", &f));
  if (name) assert_pf_ok(PFFuncSetInfo(f, name, NULL, NULL));
  return f;
}

#define F(x) ((PFValue){.v_float64 = (x)})

static void test_keywords_and_defaults(void** state) {
  (void)state;
  PFFunctionHandle f = typed_clamp("clamp");
  PFValue a[3] = {F(1.5), F(0), F(1)}, kw[3], rv;
  int c[3] = {kPFFloat, kPFFloat, kPFFloat}, kc[3] = {kPFFloat, kPFFloat, kPFFloat}, rc;
  /* clamp(1.5, hi=1.25) */
  const char* hi[] = {"hi"};
  kw[0] = F(1.25);
  assert_pf_ok(PFFuncCallKw(f, a, c, 1, hi, kw, kc, 1, &rv, &rc));
  assert_int_equal(rc, kPFFloat);
  assert_true(rv.v_float64 == 1.25);
  /* clamp(1.5): both defaults */
  assert_pf_ok(PFFuncCallKw(f, a, c, 1, NULL, NULL, NULL, 0, &rv, &rc));
  assert_true(rv.v_float64 == 1.0);
  /* clamp(hi=3, x=-2, lo=-1): all by keyword, in any order */
  const char* all[] = {"hi", "x", "lo"};
  kw[0] = F(3), kw[1] = F(-2), kw[2] = F(-1);
  assert_pf_ok(PFFuncCallKw(f, NULL, NULL, 0, all, kw, kc, 3, &rv, &rc));
  assert_true(rv.v_float64 == -1.0);
  /* every argument positional: PFFuncCall's result */
  assert_pf_ok(PFFuncCallKw(f, a, c, 3, NULL, NULL, NULL, 0, &rv, &rc));
  assert_true(rv.v_float64 == 1.0);
  /* an int for a float parameter converts, as in a positional call */
  kw[0].v_int64 = -5;
  kc[0] = kPFInt;
  const char* lo[] = {"lo"};
  a[0] = F(-10);
  assert_pf_ok(PFFuncCallKw(f, a, c, 1, lo, kw, kc, 1, &rv, &rc));
  assert_true(rv.v_float64 == -5.0);
  PFFuncFree(f);
}

/* Python's words, in Python's order. */
static void test_python_errors(void** state) {
  (void)state;
  PFFunctionHandle f = typed_clamp("clamp");
  PFValue a[5] = {F(1), F(2), F(3), F(4), F(5)}, kw[3] = {F(1), F(2), F(3)}, rv = F(77);
  int c[5] = {kPFFloat, kPFFloat, kPFFloat, kPFFloat, kPFFloat},
      kc[3] = {kPFFloat, kPFFloat, kPFFloat};
  int rc = 99;
  const char* y[] = {"y"};
  const char* x[] = {"x"};
  const char* xx[] = {"lo", "lo"};
  const char* kw_lo[] = {"lo"};
  assert_pf_error(PFFuncCallKw(f, a, c, 1, y, kw, kc, 1, &rv, &rc), kPFErrTypeError,
                  "clamp() got an unexpected keyword argument 'y'");
  assert_string_equal(PFErrorGetMessage(), "clamp() got an unexpected keyword argument 'y'");
  /* A call's argument error: no place in the traceback. */
  assert_string_equal(PFErrorGetTraceback(), "");
  assert_pf_error(PFFuncCallKw(f, a, c, 1, x, kw, kc, 1, &rv, &rc), kPFErrTypeError,
                  "clamp() got multiple values for argument 'x'");
  assert_pf_error(PFFuncCallKw(f, a, c, 1, xx, kw, kc, 2, &rv, &rc), kPFErrTypeError,
                  "clamp() got multiple values for argument 'lo'");
  assert_pf_error(PFFuncCallKw(f, NULL, NULL, 0, kw_lo, kw, kc, 1, &rv, &rc), kPFErrTypeError,
                  "clamp() missing 1 required positional argument: 'x'");
  assert_string_equal(PFErrorGetMessage(), "clamp() missing 1 required positional argument: 'x'");
  assert_pf_error(PFFuncCallKw(f, a, c, 4, NULL, NULL, NULL, 0, &rv, &rc), kPFErrTypeError,
                  "clamp() takes from 1 to 3 positional arguments but 4 were given");
  /* Keywords are judged before the count, as Python does. */
  assert_pf_error(PFFuncCallKw(f, a, c, 4, y, kw, kc, 1, &rv, &rc), kPFErrTypeError,
                  "unexpected keyword argument 'y'");
  assert_pf_error(PFFuncCallKw(f, a, c, 5, x, kw, kc, 1, &rv, &rc), kPFErrTypeError,
                  "multiple values for argument 'x'");
  /* Nothing is written on error. */
  assert_true(rv.v_float64 == 77);
  assert_int_equal(rc, 99);
  PFFuncFree(f);

  /* Counts and lists of names, as Python words them; no name metadata. */
  PFFunctionHandle g = NULL;
  assert_pf_ok(
      PFFuncCreateFromTyped((void*)clamp, "float64(x: float64, lo: float64, hi: float64)", &g));
  assert_pf_error(PFFuncCallKw(g, NULL, NULL, 0, NULL, NULL, NULL, 0, &rv, &rc), kPFErrTypeError,
                  "<anonymous>() missing 3 required positional arguments: 'x', 'lo', and 'hi'");
  assert_pf_error(PFFuncCallKw(g, a, c, 1, NULL, NULL, NULL, 0, &rv, &rc), kPFErrTypeError,
                  "<anonymous>() missing 2 required positional arguments: 'lo' and 'hi'");
  const char* hi[] = {"hi"};
  assert_pf_error(PFFuncCallKw(g, a, c, 1, hi, kw, kc, 1, &rv, &rc), kPFErrTypeError,
                  "missing 1 required positional argument: 'lo'");
  assert_pf_error(PFFuncCallKw(g, a, c, 4, NULL, NULL, NULL, 0, &rv, &rc), kPFErrTypeError,
                  "<anonymous>() takes 3 positional arguments but 4 were given");
  PFFuncFree(g);
  PFFunctionHandle h = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)clamp,
                                     "float64(x: float64, lo: float64 = 0, hi: float64 = 1)", &h));
  assert_pf_ok(PFFuncSetInfo(h, "one", NULL, NULL));
  PFFuncFree(h);

  /* Unnamed parameters take no keywords; a function without a signature
   * takes none at all. */
  assert_pf_ok(
      PFFuncCreateFromTyped((void*)clamp, "float64(float64, float64 = 0, float64 = 1)", &g));
  assert_pf_error(PFFuncCallKw(g, a, c, 1, x, kw, kc, 1, &rv, &rc), kPFErrTypeError,
                  "<anonymous>() got an unexpected keyword argument 'x'");
  assert_pf_ok(PFFuncCallKw(g, a, c, 2, NULL, NULL, NULL, 0, &rv, &rc)); /* defaults work */
  assert_true(rv.v_float64 == 2.0);
  PFFuncFree(g);
  assert_pf_ok(PFFuncCreateFromCFunc(describe_args, NULL, NULL, &g));
  assert_pf_ok(PFFuncSetInfo(g, "free", NULL, NULL));
  assert_pf_error(PFFuncCallKw(g, a, c, 1, x, kw, kc, 1, &rv, &rc), kPFErrTypeError,
                  "free() takes no keyword arguments");
  /* ... but any positional arguments, as PFFuncCall. */
  assert_pf_ok(PFFuncCallKw(g, a, c, 5, NULL, NULL, NULL, 0, &rv, &rc));
  assert_string_equal(rv.v_str, "1,2,3,4,5");
  PFFuncFree(g);
}

/* A packed function's metadata is used as is: names, defaults of every
 * kind; the callee sees one argument per parameter. */
static void test_packed_metadata(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(describe_args, NULL, NULL, &f));
  assert_pf_ok(PFFuncSetInfo(f, "pk",
                             "str(a: int64, s: str = \"d,e\\x41\", b: bytes = b\"\\x00\\x01\", "
                             "n: float64 = 2, p: ptr = null, t: dtype = \"i8\")",
                             NULL));
  PFValue a = {.v_int64 = 7}, kw[2], rv;
  int c = kPFInt, kc[2], rc;
  assert_pf_ok(PFFuncCallKw(f, &a, &c, 1, NULL, NULL, NULL, 0, &rv, &rc));
  assert_string_equal(rv.v_str, "7,'d,eA',b2,2,null,dtype");
  const char* names[] = {"t", "s"};
  kw[0].v_int64 = 3;
  kc[0] = kPFInt; /* metadata only: the type is not checked */
  kw[1].v_str = "given";
  kc[1] = kPFStr;
  assert_pf_ok(PFFuncCallKw(f, &a, &c, 1, names, kw, kc, 2, &rv, &rc));
  assert_string_equal(rv.v_str, "7,'given',b2,2,null,3");
  /* The assembled values go through PFFuncCall's checks, by position. */
  kc[1] = 40;
  assert_pf_error(PFFuncCallKw(f, &a, &c, 1, names, kw, kc, 2, &rv, &rc), kPFErrTypeError,
                  "PFFuncCall: argument 1 has unknown type code 40");
  /* A bound function keeps the names of the rest. */
  PFFunctionHandle b = NULL;
  int pos = 0;
  assert_pf_ok(PFFuncBind(f, 1, &pos, &a, &c, NULL, &b));
  const char* n_only[] = {"n"};
  kw[0].v_float64 = 0.5;
  kc[0] = kPFFloat;
  assert_pf_ok(PFFuncCallKw(b, NULL, NULL, 0, n_only, kw, kc, 1, &rv, &rc));
  assert_string_equal(rv.v_str, "7,'d,eA',b2,0.5,null,dtype");
  PFFuncFree(b);
  PFFuncFree(f);
}

static void test_misuse(void** state) {
  (void)state;
  PFFunctionHandle f = typed_clamp("clamp");
  PFValue a = F(1), rv;
  int c = kPFFloat, rc;
  const char* names[] = {"lo", NULL};
  PFValue kw[2] = {F(0), F(0)};
  int kc[2] = {kPFFloat, kPFFloat};
  assert_pf_error(PFFuncCallKw(NULL, &a, &c, 1, NULL, NULL, NULL, 0, &rv, &rc), kPFErrTypeError,
                  "PFFuncCallKw: argument 'func' is NULL");
  assert_pf_error(PFFuncCallKw(&a, &a, &c, 1, NULL, NULL, NULL, 0, &rv, &rc), kPFErrTypeError,
                  "PFFuncCallKw: argument 'func' is not a live function handle");
  assert_pf_error(PFFuncCallKw(f, &a, &c, 1, names, kw, kc, -1, &rv, &rc), kPFErrValueError,
                  "PFFuncCallKw: argument 'num_kw' is negative (-1)");
  assert_pf_error(PFFuncCallKw(f, &a, &c, 1, NULL, kw, kc, 1, &rv, &rc), kPFErrTypeError,
                  "PFFuncCallKw: argument 'kw_names' is NULL with num_kw 1");
  assert_pf_error(PFFuncCallKw(f, &a, &c, 1, names, NULL, kc, 1, &rv, &rc), kPFErrTypeError,
                  "'kw_args' is NULL with num_kw 1");
  assert_pf_error(PFFuncCallKw(f, &a, &c, 1, names, kw, NULL, 1, &rv, &rc), kPFErrTypeError,
                  "'kw_codes' is NULL with num_kw 1");
  assert_pf_error(PFFuncCallKw(f, &a, &c, 1, names, kw, kc, 2, &rv, &rc), kPFErrTypeError,
                  "PFFuncCallKw: argument 'kw_names[1]' is NULL");
  assert_non_null(strstr(PFErrorGetTraceback(), "runtime/function.c"));
  /* PFFuncCall's misuse, as PFFuncCall reports it. */
  assert_pf_error(PFFuncCallKw(f, &a, &c, 1, names, kw, kc, 1, NULL, &rc), kPFErrTypeError,
                  "'ret_val' is NULL");
  assert_pf_error(PFFuncCallKw(f, &a, &c, -1, names, kw, kc, 1, &rv, &rc), kPFErrValueError,
                  "'num_args' is negative");
  assert_pf_error(PFFuncCallKw(f, NULL, &c, 1, names, kw, kc, 1, &rv, &rc), kPFErrTypeError,
                  "'args' is NULL with num_args 1");
  assert_pf_error(PFFuncCallKw(f, &a, &c, 1, NULL, NULL, NULL, 0, &rv, NULL), kPFErrTypeError,
                  "'ret_type_code' is NULL");
  PFFuncFree(f);
}

/* Positional calls of every parameter cost what PFFuncCall costs: the
 * same path, in the same function, with the same results and errors. */
static void test_positional_is_pffunccall(void** state) {
  (void)state;
  PFFunctionHandle f = typed_clamp(NULL);
  PFValue a[3] = {F(3), F(0), F(2)}, r1, r2;
  int c[3] = {kPFFloat, kPFFloat, kPFFloat}, c1, c2;
  assert_pf_ok(PFFuncCall(f, a, c, 3, &r1, &c1));
  assert_pf_ok(PFFuncCallKw(f, a, c, 3, NULL, NULL, NULL, 0, &r2, &c2));
  assert_true(r1.v_float64 == r2.v_float64 && c1 == c2);
  c[1] = kPFStr;
  a[1].v_str = "x";
  assert_pf_error(PFFuncCallKw(f, a, c, 3, NULL, NULL, NULL, 0, &r2, &c2), kPFErrTypeError,
                  "argument 1 'lo': expected float64, got str");
  PFFuncFree(f);
}

/* A keyword binds only the parameter of exactly its name: names are
 * compared 8 bytes at a time, and a name of exactly 8 bytes once bound a
 * longer parameter that starts with it. Names of 7, 8, 9, 15, 16 and 17
 * bytes, each a prefix of the longer ones, in both orders; then each name
 * alone, where every other is unexpected. */
static const char k_prefix_text[] = "abcdefghijklmnopq";
static const int k_prefix_lens[] = {7, 8, 9, 15, 16, 17};
#define NUM_PREFIXES ((int)(sizeof(k_prefix_lens) / sizeof(k_prefix_lens[0])))

/* "str(NAME: int64 = 0, ...)" of the names `order` lists (indices into
 * k_prefix_lens), into buf. */
static void prefix_signature(const int* order, int n, char* buf, size_t cap) {
  size_t at = (size_t)snprintf(buf, cap, "str(");
  for (int i = 0; i < n; ++i)
    at += (size_t)snprintf(buf + at, cap - at, "%s%.*s: int64 = 0", i ? ", " : "",
                           k_prefix_lens[order[i]], k_prefix_text);
  snprintf(buf + at, cap - at, ")");
}

static void test_names_sharing_a_prefix(void** state) {
  (void)state;
  static const int orders[2][NUM_PREFIXES] = {{0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}};
  char sig[512], name[32], want[64];
  PFValue kw = {.v_int64 = 5}, rv;
  int kc = kPFInt, rc;
  const char* names[] = {name};
  for (int o = 0; o < 2; ++o) {
    PFFunctionHandle f = NULL;
    prefix_signature(orders[o], NUM_PREFIXES, sig, sizeof(sig));
    assert_pf_ok(PFFuncCreateFromCFunc(describe_args, NULL, NULL, &f));
    assert_pf_ok(PFFuncSetInfo(f, "kw", sig, NULL));
    for (int k = 0; k < NUM_PREFIXES; ++k) {
      snprintf(name, sizeof(name), "%.*s", k_prefix_lens[k], k_prefix_text);
      size_t at = 0;
      for (int j = 0; j < NUM_PREFIXES; ++j)
        at += (size_t)snprintf(want + at, sizeof(want) - at, "%s%d", j ? "," : "",
                               orders[o][j] == k ? 5 : 0);
      assert_pf_ok(PFFuncCallKw(f, NULL, NULL, 0, names, &kw, &kc, 1, &rv, &rc));
      assert_string_equal(rv.v_str, want);
    }
    PFFuncFree(f);
  }
  for (int only = 0; only < NUM_PREFIXES; ++only) {
    PFFunctionHandle f = NULL;
    prefix_signature(&only, 1, sig, sizeof(sig));
    assert_pf_ok(PFFuncCreateFromCFunc(describe_args, NULL, NULL, &f));
    assert_pf_ok(PFFuncSetInfo(f, "kw", sig, NULL));
    for (int k = 0; k < NUM_PREFIXES; ++k) {
      snprintf(name, sizeof(name), "%.*s", k_prefix_lens[k], k_prefix_text);
      if (k == only) {
        assert_pf_ok(PFFuncCallKw(f, NULL, NULL, 0, names, &kw, &kc, 1, &rv, &rc));
        assert_string_equal(rv.v_str, "5");
        continue;
      }
      char msg[96];
      snprintf(msg, sizeof(msg), "kw() got an unexpected keyword argument '%s'", name);
      assert_pf_error(PFFuncCallKw(f, NULL, NULL, 0, names, &kw, &kc, 1, &rv, &rc), kPFErrTypeError,
                      msg);
    }
    PFFuncFree(f);
  }
}

static int64_t interval_pair(int64_t interval_ms, int64_t interval) {
  return interval_ms * 1000 + interval;
}

/* The case, on a typed function. */
static void test_eight_byte_keyword_is_not_a_prefix(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)interval_pair,
                                     "int64(interval_ms: int64 = 0, interval: int64 = 0)", &f));
  assert_pf_ok(PFFuncSetInfo(f, "pair", NULL, NULL));
  PFValue kw = {.v_int64 = 5}, rv;
  int kc = kPFInt, rc;
  const char* interval[] = {"interval"};
  assert_pf_ok(PFFuncCallKw(f, NULL, NULL, 0, interval, &kw, &kc, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 5);
  PFFuncFree(f);
  assert_pf_ok(PFFuncCreateFromTyped((void*)interval_pair,
                                     "int64(interval_ms: int64 = 0, position_x: int64 = 0)", &f));
  assert_pf_ok(PFFuncSetInfo(f, "pair", NULL, NULL));
  const char* position[] = {"position"};
  assert_pf_error(PFFuncCallKw(f, NULL, NULL, 0, interval, &kw, &kc, 1, &rv, &rc), kPFErrTypeError,
                  "pair() got an unexpected keyword argument 'interval'");
  assert_pf_error(PFFuncCallKw(f, NULL, NULL, 0, position, &kw, &kc, 1, &rv, &rc), kPFErrTypeError,
                  "pair() got an unexpected keyword argument 'position'");
  PFFuncFree(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keywords_and_defaults),
      cmocka_unit_test(test_python_errors),
      cmocka_unit_test(test_packed_metadata),
      cmocka_unit_test(test_misuse),
      cmocka_unit_test(test_positional_is_pffunccall),
      cmocka_unit_test(test_names_sharing_a_prefix),
      cmocka_unit_test(test_eight_byte_keyword_is_not_a_prefix),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
