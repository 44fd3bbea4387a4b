/* Typed C functions through PFFuncCreateFromTyped: the signature grammar,
 * conversions of every type in both directions, range and type errors, and
 * both call paths (direct cast and libffi). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "packedfunc/c_api.h"
#include "support/pf_test.h"
#include "../runtime/typed.h"

/* ---- helpers ---------------------------------------------------------- */

#define FN(f) ((void*)(f))

static PFFunctionHandle typed(void* fn, const char* sig) {
  PFFunctionHandle f = NULL;
  int st = PFFuncCreateFromTyped(fn, sig, &f);
  if (st != 0) fail_msg("PFFuncCreateFromTyped(\"%s\") failed: %s", sig, PFGetLastError());
  assert_non_null(f);
  return f;
}

/* Calls f; returns PFFuncCall's status. */
static int call(PFFunctionHandle f, int n, PFValue* args, int* codes, PFValue* rv, int* rc) {
  *rc = -12345;
  return PFFuncCall(f, args, codes, n, rv, rc);
}

static PFValue I(int64_t x) { return (PFValue){.v_int64 = x}; }
static PFValue F(double x) { return (PFValue){.v_float64 = x}; }
static PFValue H(void* p) { return (PFValue){.v_handle = p}; }

/* Runs the call once on the path the function chose and once through
 * libffi, and checks both give the same status, type code and bits. */
static int call_both(PFFunctionHandle f, int n, PFValue* args, int* codes, PFValue* rv, int* rc) {
  int path = pf_typed_path(f);
  assert_int_not_equal(path, 0);
  int st1 = call(f, n, args, codes, rv, rc);
  if (path == 1) {
    PFValue rv2;
    int rc2;
    assert_int_equal(pf_typed_force_ffi(f), 0);
    assert_int_equal(pf_typed_path(f), 2);
    int st2 = call(f, n, args, codes, &rv2, &rc2);
    assert_int_equal(st1, st2);
    if (st1 == 0) {
      assert_int_equal(*rc, rc2);
      if (*rc != kPFStr && *rc != kPFBytes) assert_memory_equal(rv, &rv2, sizeof(PFValue));
      if (rc2 == kPFFuncHandle) PFFuncFree(rv2.v_handle); /* the caller frees *rv */
    }
  }
  return st1;
}

/* ---- C functions under test ------------------------------------------- */

static int64_t add_i64(int64_t a, int64_t b) { return a + b; }
static double mul_f64(double a, double b) { return a * b; }
static int64_t answer(void) { return 42; }
static int g_void_hits;
static void bump(void) { ++g_void_hits; }
static bool is_neg(int64_t x) { return x < 0; }
static int32_t cmp_mixed(double a, double b, int64_t bias, void* p) {
  return (int32_t)((a < b ? -1 : a > b ? 1 : 0) + bias + (p ? 100 : 0));
}
static double mix4(double a, int64_t b, double c, int64_t d) {
  return a * (double)b + c - (double)d;
}
static void* ptr_plus(void* p, int64_t k) { return p ? (char*)p + k : NULL; }
static uint64_t u64_id(uint64_t x) { return x; }
static uint64_t u64_max(void) { return UINT64_MAX; }

static int8_t id_i8(int8_t x) { return x; }
static int16_t id_i16(int16_t x) { return x; }
static int32_t id_i32(int32_t x) { return x; }
static uint8_t id_u8(uint8_t x) { return x; }
static uint16_t id_u16(uint16_t x) { return x; }
static uint32_t id_u32(uint32_t x) { return x; }
static float id_f32(float x) { return x; }
static float half_f32(float x) { return x / 2; }
static bool not_b(bool b) { return !b; }

static const char* skip_first(const char* s) { return s[0] ? s + 1 : NULL; }
static const char* g_static = "static text";
static const char* get_static(void) { return g_static; }
static bool has_nul(const PFByteArray* b) { return memchr(b->data, '\0', b->size) != NULL; }
static PFByteArray tail_bytes(const PFByteArray* b) {
  PFByteArray r = {b->data + 1, b->size - 1};
  return r;
}
static PFByteArray bad_bytes(void) {
  PFByteArray r = {NULL, 3};
  return r;
}
static void store_i32(void* p, int32_t v) {
  if (p) *(int32_t*)p = v;
}
static DLTensor* same_tensor(DLTensor* t) { return t; }
static int64_t tensor_ndim(DLTensor* t) { return t ? t->ndim : -1; }
static DLDataType widen(DLDataType t) {
  t.bits = (uint8_t)(t.bits * 2);
  t.lanes = (uint16_t)(t.lanes + 1);
  return t;
}
static DLDevice next_dev(DLDevice d) {
  d.device_id += 1;
  return d;
}
static int64_t dt_dev_sum(DLDataType t, DLDevice d, int32_t k) {
  return (int64_t)t.code * 1000000 + t.bits * 10000 + t.lanes * 100 + d.device_type * 10 +
         d.device_id + k;
}
static PFFunctionHandle retain_func(PFFunctionHandle f) {
  if (f) PFFuncRetain(f);
  return f;
}
static int64_t call_with(PFFunctionHandle f, int64_t x) {
  PFValue a[2] = {I(x), I(x)}, rv;
  int c[2] = {kPFInt, kPFInt}, rc;
  if (f == NULL) return -1;
  return PFFuncCall(f, a, c, 2, &rv, &rc) == 0 ? rv.v_int64 : -2;
}
static int64_t sum16(int64_t a0, int64_t a1, int64_t a2, int64_t a3, int64_t a4, int64_t a5,
                     int64_t a6, int64_t a7, int64_t a8, int64_t a9, int64_t a10, int64_t a11,
                     int64_t a12, int64_t a13, int64_t a14, int64_t a15) {
  return a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11 + a12 + a13 + a14 + a15;
}
static double mixed6(int8_t a, float b, double c, uint16_t d, bool e, int32_t f) {
  return a + b + c + d + (e ? 1000 : 0) + f;
}

/* ---- the grammar -------------------------------------------------------- */

static void test_signature_errors(void** state) {
  (void)state;
  static const struct {
    const char* sig;
    const char* pos;
    const char* detail;
  } cases[] = {
      {"int64(int64,,int64)", "at position 12", "expected a type name"},
      {"", "at position 0", "expected a type name"},
      {"   ", "at position 3", "expected a type name"},
      {"int64", "at position 5", "expected '('"},
      {"int64 int64)", "at position 6", "expected '('"},
      {"int64(int64", "at position 11", "expected ',' or ')'"},
      {"int64(int64 int64)", "at position 12", "expected ',' or ')'"},
      {"int64(int64) x", "at position 13", "unexpected text after ')'"},
      {"int64(int64);", "at position 12", "unexpected text after ')'"},
      {"int(int64)", "at position 0", "unknown type 'int'"},
      {"int64(int64,Int64)", "at position 12", "unknown type 'Int64'"},
      {"int64(float)", "at position 6", "'float' is ambiguous"},
      {"int64(void)", "at position 6", "void is only allowed as the return type"},
      {"void(int64, void)", "at position 12", "void is only allowed"},
      {"int64(int64,)", "at position 12", "expected a type name"},
      {"(int64)", "at position 0", "expected a type name"},
      {"int64(*)", "at position 6", "expected a type name"},
      {"int64(int64*)", "at position 11", "expected ',' or ')'"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    PFFunctionHandle f = (PFFunctionHandle)0x1;
    int st = PFFuncCreateFromTyped(FN(add_i64), cases[i].sig, &f);
    assert_pf_error(st, "ValueError", "PFFuncCreateFromTyped: bad signature", cases[i].pos,
                    cases[i].detail);
    assert_ptr_equal(f, (PFFunctionHandle)0x1); /* untouched on failure */
  }
  /* The example from the header, word for word. */
  PFFunctionHandle f = NULL;
  PFFuncCreateFromTyped(FN(add_i64), "int64(int64,,int64)", &f);
  assert_string_equal(PFErrorGetMessage(),
                      "PFFuncCreateFromTyped: bad signature \"int64(int64,,int64)\" at position "
                      "12: expected a type name");
}

static void test_signature_arg_limit(void** state) {
  (void)state;
  char sig[512];
  strcpy(sig, "int64(");
  for (int i = 0; i < PF_TYPED_MAX_ARGS; ++i) strcat(sig, i ? ",int64" : "int64");
  strcat(sig, ")");
  PFFunctionHandle f = typed(FN(sum16), sig);
  PFValue a[PF_TYPED_MAX_ARGS], rv;
  int c[PF_TYPED_MAX_ARGS], rc;
  for (int i = 0; i < PF_TYPED_MAX_ARGS; ++i) {
    a[i] = I(i + 1);
    c[i] = kPFInt;
  }
  assert_int_equal(pf_typed_path(f), 2);
  assert_pf_ok(call(f, PF_TYPED_MAX_ARGS, a, c, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 136);
  PFFuncFree(f);

  sig[strlen(sig) - 1] = '\0';
  strcat(sig, ",int64)"); /* 17 arguments */
  assert_pf_error(PFFuncCreateFromTyped(FN(sum16), sig, &f), "ValueError", "more than 16 arguments",
                  "at position 102");
}

static void test_blanks_alias_and_metadata(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(mul_f64), " double ( double ,\tfloat64 )\n");
  const char* name = "x";
  const char* sig = NULL;
  const char* doc = "x";
  assert_pf_ok(PFFuncGetInfo(f, &name, &sig, &doc));
  assert_null(name);
  assert_null(doc);
  assert_string_equal(sig, "float64(float64,float64)");
  /* Name and doc remain settable; the name then shows in errors. */
  assert_pf_ok(PFFuncSetInfo(f, "mul", NULL, "multiplies"));
  PFValue a[2] = {F(1.5), H(NULL)}, rv;
  int c[2] = {kPFFloat, kPFStr}, rc;
  a[1].v_str = "x";
  assert_pf_error(
      call(f, 2, a, c, &rv, &rc), "TypeError",
      "typed function 'mul' float64(float64,float64): argument 1: expected float64, got str");
  c[1] = kPFFloat;
  a[1] = F(4);
  assert_pf_ok(call(f, 2, a, c, &rv, &rc));
  assert_int_equal(rc, kPFFloat);
  assert_true(rv.v_float64 == 6.0);
  PFFuncFree(f);

  f = typed(FN(answer), "int64()");
  assert_pf_ok(PFFuncGetInfo(f, NULL, &sig, NULL));
  assert_string_equal(sig, "int64()");
  PFFuncFree(f);
}

static void test_null_arguments(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_error(PFFuncCreateFromTyped(NULL, "int64()", &f), "TypeError",
                  "PFFuncCreateFromTyped: argument 'fn' is NULL");
  assert_pf_error(PFFuncCreateFromTyped(FN(answer), NULL, &f), "TypeError",
                  "PFFuncCreateFromTyped: argument 'signature' is NULL");
  assert_pf_error(PFFuncCreateFromTyped(FN(answer), "int64()", NULL), "TypeError",
                  "PFFuncCreateFromTyped: argument 'out' is NULL");
  assert_null(f);
}

/* ---- calls -------------------------------------------------------------- */

static void test_add_both_paths(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(add_i64), "int64(int64,int64)");
  assert_int_equal(pf_typed_path(f), 1);
  PFValue a[2] = {I(40), I(2)}, rv;
  int c[2] = {kPFInt, kPFInt}, rc;
  assert_pf_ok(call_both(f, 2, a, c, &rv, &rc)); /* leaves f on the libffi path */
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 42);
  a[0] = I(INT64_MIN + 5);
  a[1] = I(-5);
  assert_pf_ok(call(f, 2, a, c, &rv, &rc));
  assert_true(rv.v_int64 == INT64_MIN);
  PFFuncFree(f);
  /* Not a typed function: no path, and the hook refuses it. */
  assert_int_equal(pf_typed_path(NULL), 0);
  assert_int_equal(pf_typed_force_ffi(NULL), -1);
}

/* The simple path compares the first two codes as one word: a call whose
 * codes differ from the signature's in either half (or both) converts
 * them, as the general path does, and gives the same result. */
static void test_simple_path_code_mismatch(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(mul_f64), "float64(float64,float64)");
  const int cases[4][2] = {
      {kPFFloat, kPFFloat}, {kPFInt, kPFFloat}, {kPFFloat, kPFInt}, {kPFInt, kPFInt}};
  for (int k = 0; k < 4; ++k) {
    PFValue a[2];
    int c[2] = {cases[k][0], cases[k][1]};
    a[0] = c[0] == kPFInt ? I(3) : F(3.0);
    a[1] = c[1] == kPFInt ? I(-4) : F(-4.0);
    PFValue rv;
    int rc;
    assert_pf_ok(call(f, 2, a, c, &rv, &rc));
    assert_int_equal(rc, kPFFloat);
    assert_true(rv.v_float64 == -12.0);
  }
  int c[2] = {kPFFloat, kPFStr};
  PFValue a[2] = {F(1.0), {.v_str = "x"}};
  PFValue rv;
  int rc;
  assert_pf_error(call(f, 2, a, c, &rv, &rc), "TypeError", "argument 1");
  PFFuncFree(f);
}

static void test_fast_path_result_kinds(void** state) {
  (void)state;
  PFValue a[4], rv;
  int c[4], rc;

  PFFunctionHandle f = typed(FN(answer), "int64()");
  assert_int_equal(pf_typed_path(f), 1);
  assert_pf_ok(call_both(f, 0, NULL, NULL, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 42);
  PFFuncFree(f);

  f = typed(FN(bump), "void()");
  assert_int_equal(pf_typed_path(f), 1);
  g_void_hits = 0;
  assert_pf_ok(call_both(f, 0, NULL, NULL, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  assert_int_equal(g_void_hits, 2);
  PFFuncFree(f);

  f = typed(FN(is_neg), "bool(int64)");
  assert_int_equal(pf_typed_path(f), 1);
  a[0] = I(-3);
  c[0] = kPFInt;
  assert_pf_ok(call_both(f, 1, a, c, &rv, &rc));
  assert_int_equal(rc, kPFBool);
  assert_int_equal(rv.v_int64, 1);
  a[0] = I(3);
  assert_pf_ok(call(f, 1, a, c, &rv, &rc));
  assert_int_equal(rv.v_int64, 0);
  PFFuncFree(f);

  int32_t cell = 0;
  f = typed(FN(cmp_mixed), "int32(float64,float64,int64,ptr)");
  assert_int_equal(pf_typed_path(f), 1);
  a[0] = F(1.0);
  a[1] = F(2.0);
  a[2] = I(-7);
  a[3] = H(&cell);
  c[0] = kPFFloat;
  c[1] = kPFFloat;
  c[2] = kPFInt;
  c[3] = kPFOpaqueHandle;
  assert_pf_ok(call_both(f, 4, a, c, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, -1 - 7 + 100);
  PFFuncFree(f);

  f = typed(FN(mix4), "float64(float64,int64,float64,int64)");
  assert_int_equal(pf_typed_path(f), 1);
  a[0] = F(2.5);
  a[1] = I(4);
  a[2] = F(0.25);
  a[3] = I(1);
  c[0] = kPFFloat;
  c[1] = kPFInt;
  c[2] = kPFFloat;
  c[3] = kPFInt;
  assert_pf_ok(call_both(f, 4, a, c, &rv, &rc));
  assert_int_equal(rc, kPFFloat);
  assert_true(rv.v_float64 == 9.25);
  PFFuncFree(f);

  char buf[8];
  f = typed(FN(ptr_plus), "ptr(ptr,int64)");
  assert_int_equal(pf_typed_path(f), 1);
  a[0] = H(buf);
  a[1] = I(3);
  c[0] = kPFOpaqueHandle;
  c[1] = kPFInt;
  assert_pf_ok(call_both(f, 2, a, c, &rv, &rc));
  assert_int_equal(rc, kPFOpaqueHandle);
  assert_ptr_equal(rv.v_handle, buf + 3);
  c[0] = kPFNull; /* NULL in, NULL out as null */
  assert_pf_ok(call(f, 2, a, c, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  PFFuncFree(f);

  /* A narrow argument or a fifth one leaves the fast path. */
  f = typed(FN(id_i32), "int32(int32)");
  assert_int_equal(pf_typed_path(f), 2);
  PFFuncFree(f);
  f = typed(FN(sum16), "int64(int64,int64,int64,int64,int64)");
  assert_int_equal(pf_typed_path(f), 2);
  PFFuncFree(f);
}

static void test_arity(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(add_i64), "int64(int64,int64)");
  PFValue a[3] = {I(1), I(2), I(3)}, rv;
  int c[3] = {kPFInt, kPFInt, kPFInt}, rc;
  assert_pf_error(call(f, 3, a, c, &rv, &rc), "TypeError",
                  "typed function int64(int64,int64): takes 2 arguments, got 3");
  assert_pf_error(call(f, 1, a, c, &rv, &rc), "TypeError", "takes 2 arguments, got 1");
  assert_pf_error(call(f, 0, NULL, NULL, &rv, &rc), "TypeError", "got 0");
  PFFuncFree(f);
  f = typed(FN(answer), "int64()");
  assert_pf_error(call(f, 1, a, c, &rv, &rc), "TypeError", "takes 0 arguments, got 1");
  PFFuncFree(f);
  f = typed(FN(is_neg), "bool(int64)");
  assert_pf_error(call(f, 2, a, c, &rv, &rc), "TypeError", "takes 1 argument, got 2");
  PFFuncFree(f);
}

static void test_integer_ranges(void** state) {
  (void)state;
  static const struct {
    void* fn;
    const char* sig;
    const char* name;
    int64_t lo, hi;
    const char* range;
  } cases[] = {
      {FN(id_i8), "int8(int8)", "int8", INT8_MIN, INT8_MAX, "[-128, 127]"},
      {FN(id_i16), "int16(int16)", "int16", INT16_MIN, INT16_MAX, "[-32768, 32767]"},
      {FN(id_i32), "int32(int32)", "int32", INT32_MIN, INT32_MAX, "[-2147483648, 2147483647]"},
      {FN(id_u8), "uint8(uint8)", "uint8", 0, UINT8_MAX, "[0, 255]"},
      {FN(id_u16), "uint16(uint16)", "uint16", 0, UINT16_MAX, "[0, 65535]"},
      {FN(id_u32), "uint32(uint32)", "uint32", 0, UINT32_MAX, "[0, 4294967295]"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    PFFunctionHandle f = typed(cases[i].fn, cases[i].sig);
    assert_int_equal(pf_typed_path(f), 2);
    PFValue a, rv;
    int c = kPFInt, rc;
    const int64_t ok[] = {cases[i].lo, cases[i].hi, 0, 1};
    for (size_t k = 0; k < 4; ++k) {
      a = I(ok[k]);
      assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
      assert_int_equal(rc, kPFInt);
      assert_true(rv.v_int64 == ok[k]);
    }
    char want[64], got[64];
    snprintf(want, sizeof(want), "expected %s", cases[i].name);
    const int64_t bad[] = {cases[i].lo - 1, cases[i].hi + 1, INT64_MIN, INT64_MAX};
    for (size_t k = 0; k < 4; ++k) {
      a = I(bad[k]);
      snprintf(got, sizeof(got), "got int %lld,", (long long)bad[k]);
      assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "ValueError", cases[i].sig, "argument 0", want,
                      got, cases[i].range);
    }
    /* A float is never truncated into an integer. */
    a = F(1.0);
    c = kPFFloat;
    assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "TypeError", "argument 0", want, "got float");
    /* A bool is an integer. */
    a = I(1);
    c = kPFBool;
    assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
    assert_int_equal(rv.v_int64, 1);
    PFFuncFree(f);
  }
}

static void test_int32_narrowing_message(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(id_i32), "int32(int32)");
  assert_pf_ok(PFFuncSetInfo(f, "scale", NULL, NULL));
  PFValue a = I(4294967296LL), rv;
  int c = kPFInt, rc;
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "ValueError");
  assert_string_equal(PFErrorGetMessage(),
                      "typed function 'scale' int32(int32): argument 0: expected int32, got int "
                      "4294967296, which is out of its range [-2147483648, 2147483647]");
  PFFuncFree(f);
}

/* A typed call's own checks (argument count, argument and result
 * conversions) name the typed function and the value in the message, and
 * record no traceback line: the place of the check inside the runtime is
 * not a level the caller reads; the error begins at the call. */
static void test_conversion_errors_record_no_location(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(add_i64), "int64(int64,int64)");
  PFValue a[3] = {I(1), {.v_str = "two"}, I(3)}, rv;
  int c[3] = {kPFInt, kPFStr, kPFInt}, rc;
  PFErrorAppendTraceback("  left over");
  assert_pf_error(call(f, 3, a, c, &rv, &rc), "TypeError", "takes 2 arguments, got 3");
  assert_string_equal(PFErrorGetTraceback(), "");
  assert_pf_error(call(f, 2, a, c, &rv, &rc), "TypeError", "argument 1: expected int64, got str");
  assert_string_equal(PFErrorGetTraceback(), "");
  PFFuncFree(f);
  f = typed(FN(u64_max), "uint64()");
  assert_pf_error(call_both(f, 0, NULL, NULL, &rv, &rc), "ValueError", "result: uint64 value");
  assert_string_equal(PFErrorGetTraceback(), "");
  PFFuncFree(f);
  PFErrorClear();
}

static void test_uint64(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(u64_id), "uint64(uint64)");
  assert_int_equal(pf_typed_path(f), 1);
  PFValue a = I(INT64_MAX), rv;
  int c = kPFInt, rc;
  assert_pf_ok(call_both(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_true(rv.v_int64 == INT64_MAX);
  a = I(-1);
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "ValueError", "expected uint64, got int -1",
                  "[0, 18446744073709551615]");
  PFFuncFree(f);

  f = typed(FN(u64_max), "uint64()");
  assert_pf_error(call_both(f, 0, NULL, NULL, &rv, &rc), "ValueError",
                  "result: uint64 value 18446744073709551615 does not fit the int64");
  PFFuncFree(f);
}

static void test_floats(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(id_f32), "float32(float32)");
  assert_int_equal(pf_typed_path(f), 2);
  PFValue a = F(0.1), rv;
  int c = kPFFloat, rc;
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rc, kPFFloat);
  assert_true(rv.v_float64 == (double)0.1f); /* rounded to nearest float */
  assert_true(rv.v_float64 != 0.1);
  a = F(FLT_MAX);
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_true(rv.v_float64 == (double)FLT_MAX);
  a = F(-INFINITY);
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_true(isinf(rv.v_float64) && rv.v_float64 < 0);
  a = F(NAN);
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_true(isnan(rv.v_float64));
  a = F(1e-50); /* underflows to zero, like C */
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_true(rv.v_float64 == 0.0);
  a = F(1e39);
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "ValueError", "expected float32, got float 1e+39",
                  "beyond its range");
  a = F(-1e300);
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "ValueError", "expected float32");
  /* Ints widen when a double holds them exactly. */
  a = I(3);
  c = kPFInt;
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_true(rv.v_float64 == 3.0);
  a = I(16777217); /* exact in a double, then rounded like any float */
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_true(rv.v_float64 == 16777216.0);
  a = I(1);
  c = kPFBool;
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_true(rv.v_float64 == 1.0);
  a.v_str = "1.0";
  c = kPFStr;
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "TypeError", "expected float32, got str");
  PFFuncFree(f);

  f = typed(FN(half_f32), "float32(float32)");
  a = F(3.0);
  c = kPFFloat;
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_true(rv.v_float64 == 1.5);
  PFFuncFree(f);

  f = typed(FN(mul_f64), "float64(float64,float64)");
  assert_int_equal(pf_typed_path(f), 1);
  PFValue aa[2] = {I((int64_t)1 << 53), F(1.0)};
  int cc[2] = {kPFInt, kPFFloat};
  assert_pf_ok(call_both(f, 2, aa, cc, &rv, &rc));
  assert_true(rv.v_float64 == 9007199254740992.0);
  aa[0] = I(((int64_t)1 << 53) + 1);
  assert_pf_error(call(f, 2, aa, cc, &rv, &rc), "ValueError", "argument 0", "expected float64",
                  "got int 9007199254740993", "cannot hold exactly");
  aa[0] = I(INT64_MAX);
  assert_pf_error(call(f, 2, aa, cc, &rv, &rc), "ValueError", "cannot hold exactly");
  aa[0] = I(INT64_MIN); /* -2^63 is exact */
  assert_pf_ok(call(f, 2, aa, cc, &rv, &rc));
  assert_true(rv.v_float64 == -9223372036854775808.0);
  PFFuncFree(f);
}

static void test_bool(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(not_b), "bool(bool)");
  assert_int_equal(pf_typed_path(f), 2);
  PFValue a = I(1), rv;
  int c = kPFBool, rc;
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rc, kPFBool);
  assert_int_equal(rv.v_int64, 0);
  a = I(0);
  c = kPFInt;
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rv.v_int64, 1);
  a = I(2);
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "ValueError", "expected bool, got int 2",
                  "only 0 and 1");
  a = F(1.0);
  c = kPFFloat;
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "TypeError", "expected bool, got float");
  PFFuncFree(f);
}

static void test_str(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(skip_first), "str(str)");
  assert_int_equal(pf_typed_path(f), 1);
  PFValue a, rv;
  int c = kPFStr, rc;
  a.v_str = "hello";
  assert_pf_ok(call_both(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, "ello");
  assert_true(rv.v_str != a.v_str + 1); /* copied */
  a.v_str = "";                         /* the C function returns NULL: null */
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  c = kPFNull; /* a str argument is never NULL */
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "TypeError", "expected str, got null");
  a = I(5);
  c = kPFInt;
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "TypeError", "expected str, got int");
  PFFuncFree(f);

  f = typed(FN(get_static), "str()");
  assert_pf_ok(call(f, 0, NULL, NULL, &rv, &rc));
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, "static text");
  assert_ptr_not_equal(rv.v_str, g_static);
  PFFuncFree(f);
}

static void test_bytes(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(has_nul), "bool(bytes)");
  assert_int_equal(pf_typed_path(f), 1);
  PFByteArray b1 = {"a\0b", 3}, b2 = {"abc", 3};
  PFValue a = H(&b1), rv;
  int c = kPFBytes, rc;
  assert_pf_ok(call_both(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rc, kPFBool);
  assert_int_equal(rv.v_int64, 1);
  a = H(&b2);
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rv.v_int64, 0);
  a.v_str = "abc";
  c = kPFStr;
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "TypeError", "expected bytes, got str");
  PFFuncFree(f);

  f = typed(FN(tail_bytes), "bytes(bytes)");
  assert_int_equal(pf_typed_path(f), 2);
  a = H(&b1);
  c = kPFBytes;
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rc, kPFBytes);
  const PFByteArray* r = rv.v_handle;
  assert_int_equal(r->size, 2);
  assert_memory_equal(r->data, "\0b", 2);
  PFFuncFree(f);

  f = typed(FN(bad_bytes), "bytes()");
  assert_pf_error(call(f, 0, NULL, NULL, &rv, &rc), "ValueError",
                  "result: bytes of size 3 with NULL data");
  PFFuncFree(f);
}

static void test_ptr_void(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(store_i32), "void(ptr,int32)");
  assert_int_equal(pf_typed_path(f), 2);
  int32_t cell = 0;
  PFValue a[2] = {H(&cell), I(-77)}, rv;
  int c[2] = {kPFOpaqueHandle, kPFInt}, rc;
  assert_pf_ok(call(f, 2, a, c, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  assert_int_equal(cell, -77);
  c[0] = kPFNull;
  assert_pf_ok(call(f, 2, a, c, &rv, &rc));
  a[0].v_str = "not a pointer";
  c[0] = kPFStr;
  assert_pf_error(call(f, 2, a, c, &rv, &rc), "TypeError", "argument 0: expected ptr, got str");
  a[0] = H(&cell);
  c[0] = kPFOpaqueHandle;
  a[1] = I(INT64_C(1) << 40);
  assert_pf_error(call(f, 2, a, c, &rv, &rc), "ValueError", "argument 1: expected int32");
  assert_int_equal(cell, -77); /* not called */
  PFFuncFree(f);
}

static void noop_deleter(DLManagedTensor* m) { (void)m; }

static void test_tensor(void** state) {
  (void)state;
  int64_t shape[2] = {2, 3};
  float data[6] = {0};
  DLTensor t = {
      .data = data, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = shape};
  PFFunctionHandle f = typed(FN(same_tensor), "tensor(tensor)");
  assert_int_equal(pf_typed_path(f), 1);
  PFValue a = H(&t), rv;
  int c = kPFDLTensorHandle, rc;
  assert_pf_ok(call_both(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rc, kPFDLTensorHandle);
  assert_ptr_equal(rv.v_handle, &t);
  c = kPFNull;
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  a = I(1);
  c = kPFInt;
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "TypeError", "expected tensor, got int");
  PFFuncFree(f);

  /* A tensor object converts to its DLTensor. */
  DLManagedTensor m = {.dl_tensor = t, .manager_ctx = NULL, .deleter = noop_deleter};
  PFObjectHandle obj = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(&m, &obj));
  f = typed(FN(tensor_ndim), "int64(tensor)");
  a = H(obj);
  c = kPFObjectHandle;
  assert_pf_ok(call_both(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rv.v_int64, 2);
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  a = H(boxed);
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "TypeError", "expected tensor, got object");
  PFObjectFree(boxed);
  PFObjectFree(obj);
  PFFuncFree(f);
}

static void test_dtype_device(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(widen), "dtype(dtype)");
  assert_int_equal(pf_typed_path(f), 2);
  PFValue a, rv;
  int c = kPFDataType, rc;
  a.v_type = (DLDataType){kDLInt, 16, 4};
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rc, kPFDataType);
  assert_int_equal(rv.v_type.code, kDLInt);
  assert_int_equal(rv.v_type.bits, 32);
  assert_int_equal(rv.v_type.lanes, 5);
  a = I(3);
  c = kPFInt;
  assert_pf_error(call(f, 1, &a, &c, &rv, &rc), "TypeError", "expected dtype, got int");
  PFFuncFree(f);

  f = typed(FN(next_dev), "device(device)");
  a.v_device = (DLDevice){kDLCUDA, 6};
  c = kPFDevice;
  assert_pf_ok(call(f, 1, &a, &c, &rv, &rc));
  assert_int_equal(rc, kPFDevice);
  assert_int_equal(rv.v_device.device_type, kDLCUDA);
  assert_int_equal(rv.v_device.device_id, 7);
  PFFuncFree(f);

  f = typed(FN(dt_dev_sum), "int64(dtype, device, int32)");
  PFValue aa[3];
  int cc[3] = {kPFDataType, kPFDevice, kPFInt};
  aa[0].v_type = (DLDataType){kDLFloat, 64, 1};
  aa[1].v_device = (DLDevice){kDLCPU, 3};
  aa[2] = I(5);
  assert_pf_ok(call(f, 3, aa, cc, &rv, &rc));
  assert_int_equal(rv.v_int64, 2 * 1000000 + 64 * 10000 + 100 + 10 + 3 + 5);
  cc[1] = kPFDataType;
  assert_pf_error(call(f, 3, aa, cc, &rv, &rc), "TypeError",
                  "argument 1: expected device, got dtype");
  PFFuncFree(f);
}

static int g_adder_freed;
static int packed_add(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)codes;
  (void)n;
  (void)res;
  PFValue v = I(args[0].v_int64 + args[1].v_int64);
  int c = kPFInt;
  return PFCFuncSetReturn(ret, &v, &c, 1);
}
static void adder_fin(void* p) {
  (void)p;
  ++g_adder_freed;
}

static void test_func(void** state) {
  (void)state;
  g_adder_freed = 0;
  PFFunctionHandle adder = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(packed_add, NULL, adder_fin, &adder));

  PFFunctionHandle f = typed(FN(call_with), "int64(func,int64)");
  assert_int_equal(pf_typed_path(f), 1);
  PFValue a[2] = {H(adder), I(21)}, rv;
  int c[2] = {kPFFuncHandle, kPFInt}, rc;
  assert_pf_ok(call_both(f, 2, a, c, &rv, &rc));
  assert_int_equal(rv.v_int64, 42);
  c[0] = kPFNull;
  assert_pf_ok(call(f, 2, a, c, &rv, &rc));
  assert_int_equal(rv.v_int64, -1);
  c[0] = kPFOpaqueHandle;
  assert_pf_error(call(f, 2, a, c, &rv, &rc), "TypeError", "expected func, got handle");
  PFFuncFree(f);

  /* A func result transfers the C function's reference to the caller. */
  f = typed(FN(retain_func), "func(func)");
  a[0] = H(adder);
  c[0] = kPFFuncHandle;
  assert_pf_ok(call_both(f, 1, a, c, &rv, &rc));
  assert_int_equal(rc, kPFFuncHandle);
  assert_ptr_equal(rv.v_handle, adder);
  PFFuncFree(rv.v_handle);
  assert_pf_ok(call(f, 1, a, c, &rv, &rc));
  PFFuncFree(rv.v_handle);
  c[0] = kPFNull;
  assert_pf_ok(call(f, 1, a, c, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  PFFuncFree(f);

  assert_int_equal(g_adder_freed, 0);
  PFFuncFree(adder); /* the last reference: no leak, no double release */
  assert_int_equal(g_adder_freed, 1);
}

/* ---- sizes and errors kept across finalizers ---- */

static char g_small[8] = "small";
static PFByteArray huge_bytes(void) {
  PFByteArray r = {g_small, SIZE_MAX};
  return r;
}
static PFByteArray largest_bytes(void) {
  PFByteArray r = {g_small, (size_t)PTRDIFF_MAX};
  return r;
}

static void test_bytes_result_too_large(void** state) {
  (void)state;
  PFValue rv;
  int rc;
  PFFunctionHandle f = typed(FN(huge_bytes), "bytes()");
  assert_pf_error(call(f, 0, NULL, NULL, &rv, &rc), "ValueError",
                  "typed function bytes(): result: bytes of size 18446744073709551615, "
                  "larger than any object can be");
  PFFuncFree(f);
  /* Possible in principle; its copy is not. */
  f = typed(FN(largest_bytes), "bytes()");
  assert_pf_error(call(f, 0, NULL, NULL, &rv, &rc), "MemoryError");
  PFFuncFree(f);
}

static int g_failing_fin_runs;
static void failing_fin(void* p) {
  (void)p;
  ++g_failing_fin_runs;
  PFFuncRemoveGlobal("typed.finalizer.no.such.name"); /* KeyError */
  PFErrorAppendTraceback("  in the finalizer");
}
static int packed_nothing(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)ret, (void)res;
  return 0;
}
/* Hands its caller the only reference to a function whose finalizer fails. */
static PFFunctionHandle make_doomed(void) {
  PFFunctionHandle g = NULL;
  if (PFFuncCreateFromCFunc(packed_nothing, NULL, failing_fin, &g) != 0) return NULL;
  return g;
}

static PFObjectHandle make_doomed_object(void) {
  PFObjectHandle o = NULL;
  if (PFObjectCreateBoxed(NULL, failing_fin, &o) != 0) return NULL;
  return o;
}

/* When a func result is refused, the typed function drops the reference
 * the C function handed it, which runs that object's finalizer: the error
 * stays the result's. (A typed function is a direct callee: a func result
 * it accepts passes to the caller through a pointer, with no store that
 * could fail.) */
static void test_func_result_error_survives_finalizer(void** state) {
  (void)state;
  g_failing_fin_runs = 0;
  PFFunctionHandle bad = typed(FN(make_doomed_object), "func()");
  PFValue rv;
  int rc;
  assert_pf_error(call(bad, 0, NULL, NULL, &rv, &rc), "TypeError", "result");
  assert_int_equal(g_failing_fin_runs, 1);
  /* Only the place that detected the misuse, nothing of the finalizer's. */
  assert_null(strstr(PFErrorGetTraceback(), "finalizer"));
  assert_null(strstr(PFErrorGetMessage(), "finalizer"));
  PFFuncFree(bad);
  /* A function result is the caller's. */
  PFFunctionHandle f = typed(FN(make_doomed), "func()");
  assert_pf_ok(call(f, 0, NULL, NULL, &rv, &rc));
  assert_int_equal(rc, kPFFuncHandle);
  assert_int_equal(g_failing_fin_runs, 1);
  PFFuncFree(rv.v_handle);
  assert_int_equal(g_failing_fin_runs, 2);
  PFFuncFree(f);
}

static void test_libffi_mixed(void** state) {
  (void)state;
  PFFunctionHandle f = typed(FN(mixed6), "float64(int8,float32,float64,uint16,bool,int32)");
  assert_int_equal(pf_typed_path(f), 2);
  PFValue a[6] = {I(-3), F(0.5), F(0.25), I(60000), I(1), I(-100000)}, rv;
  int c[6] = {kPFInt, kPFFloat, kPFFloat, kPFInt, kPFBool, kPFInt}, rc;
  assert_pf_ok(call(f, 6, a, c, &rv, &rc));
  assert_int_equal(rc, kPFFloat);
  assert_true(rv.v_float64 == -3 + 0.5 + 0.25 + 60000 + 1000 - 100000);
  a[3] = I(70000);
  assert_pf_error(call(f, 6, a, c, &rv, &rc), "ValueError", "argument 3: expected uint16");
  PFFuncFree(f);
}

static void test_api_table(void** state) {
  (void)state;
  const PFApi* api = PFGetApiBase()->GetApi(1);
  assert_non_null(api);
  assert_ptr_equal(api->FuncCreateFromTyped, PFFuncCreateFromTyped);
  assert_ptr_equal(api->FuncToCFunction, PFFuncToCFunction);
  assert_ptr_equal(api->ClosureCheckError, PFClosureCheckError);
  PFFunctionHandle f = NULL;
  assert_pf_ok(api->FuncCreateFromTyped(FN(add_i64), "int64(int64,int64)", &f));
  PFValue a[2] = {I(1), I(2)}, rv;
  int c[2] = {kPFInt, kPFInt}, rc;
  assert_pf_ok(api->FuncCall(f, a, c, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 3);
  api->FuncFree(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_signature_errors),
      cmocka_unit_test(test_signature_arg_limit),
      cmocka_unit_test(test_blanks_alias_and_metadata),
      cmocka_unit_test(test_null_arguments),
      cmocka_unit_test(test_add_both_paths),
      cmocka_unit_test(test_simple_path_code_mismatch),
      cmocka_unit_test(test_fast_path_result_kinds),
      cmocka_unit_test(test_arity),
      cmocka_unit_test(test_conversion_errors_record_no_location),
      cmocka_unit_test(test_integer_ranges),
      cmocka_unit_test(test_int32_narrowing_message),
      cmocka_unit_test(test_uint64),
      cmocka_unit_test(test_floats),
      cmocka_unit_test(test_bool),
      cmocka_unit_test(test_str),
      cmocka_unit_test(test_bytes),
      cmocka_unit_test(test_ptr_void),
      cmocka_unit_test(test_tensor),
      cmocka_unit_test(test_dtype_device),
      cmocka_unit_test(test_func),
      cmocka_unit_test(test_bytes_result_too_large),
      cmocka_unit_test(test_func_result_error_survives_finalizer),
      cmocka_unit_test(test_libffi_mixed),
      cmocka_unit_test(test_api_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
