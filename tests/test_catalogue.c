/* The bad-input catalogue, docs/bad-input.md, row by row: each test is
 * named after its row and proves what the table says the caller gets. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/pf_test.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PF_HAVE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PF_HAVE_ASAN 1
#endif

/* Memory that belongs to the caller but is not a packedfunc object. */
static uint64_t g_not_an_object[16];

static int p_echo(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  return n == 0 ? 0 : PFCFuncSetReturn(ret, &a[0], &c[0], 1);
}

static int p_silent_failure(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)ret, (void)res;
  return -1;
}

static PFRetValueHandle g_stale_ret;
static int p_keep_ret(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)res;
  g_stale_ret = ret;
  return 0;
}

/* Runs `body` inside a packed function and returns its status. */
static int (*g_inside)(PFRetValueHandle ret);
static int p_inside(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)res;
  return g_inside(ret);
}

static int64_t t_add(int64_t a, int64_t b) { return a + b; }
static int32_t t_i32(int32_t a) { return a; }
static uint8_t t_u8(uint8_t a) { return a; }
static bool t_bool(bool b) { return b; }
static double t_f64(double x) { return x; }
static int64_t t_func(PFFunctionHandle f) { return f != NULL; }

static PFFunctionHandle make(PFPackedCFunc fn) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, NULL, NULL, &f));
  return f;
}

static PFFunctionHandle make_typed(void* fn, const char* sig) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromTyped(fn, sig, &f));
  return f;
}

static int call1(PFFunctionHandle f, int code, PFValue v, PFValue* rv, int* rc) {
  return PFFuncCall(f, &v, &code, 1, rv, rc);
}

/* ==== Calls: PFFuncCall, PFCFuncSetReturn ================================== */

static void test_call_null_func(void** state) {
  (void)state;
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(NULL, NULL, NULL, 0, &rv, &rc), kPFErrTypeError, "PFFuncCall",
                  "'func' is NULL");
}

static void test_call_null_outputs(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  int rc;
  PFValue rv;
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, NULL, &rc), kPFErrTypeError, "'ret_val'");
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, NULL), kPFErrTypeError, "'ret_type_code'");
  PFFuncFree(f);
}

static void test_call_null_arrays_with_count(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  PFValue v = {.v_int64 = 1}, rv;
  int code = kPFInt, rc;
  assert_pf_error(PFFuncCall(f, NULL, &code, 1, &rv, &rc), kPFErrTypeError, "'args'");
  assert_pf_error(PFFuncCall(f, &v, NULL, 1, &rv, &rc), kPFErrTypeError, "'type_codes'");
  PFFuncFree(f);
}

static void test_call_negative_count(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(f, NULL, NULL, -1, &rv, &rc), kPFErrValueError, "num_args", "-1");
  PFFuncFree(f);
}

static void test_call_unknown_type_code(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  PFValue v[2] = {{.v_int64 = 1}, {.v_int64 = 2}}, rv;
  const int bad[] = {-1, kPFTypeCodeEnd, kPFExtBegin - 1, kPFExtEnd, 1000};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    int codes[2] = {kPFInt, bad[i]}, rc;
    assert_pf_error(PFFuncCall(f, v, codes, 2, &rv, &rc), kPFErrTypeError, "argument 1",
                    "unknown type code");
  }
  /* The extension range passes through untouched. */
  int codes[1] = {kPFExtBegin + 3}, rc;
  assert_pf_ok(PFFuncCall(f, v, codes, 1, &rv, &rc));
  assert_int_equal(rc, kPFExtBegin + 3);
  assert_int_equal(rv.v_int64, 1);
  PFFuncFree(f);
}

static void test_call_null_pointer_under_code(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  const int codes[] = {kPFStr,        kPFBytes,        kPFDLTensorHandle,
                       kPFFuncHandle, kPFModuleHandle, kPFObjectHandle};
  for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); ++i) {
    PFValue rv;
    int rc;
    assert_pf_error(call1(f, codes[i], (PFValue){.v_handle = NULL}, &rv, &rc), kPFErrTypeError,
                    "argument 0", "NULL");
  }
  PFFuncFree(f);
}

static void test_call_bytes_null_data(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  PFByteArray ba = {NULL, 4};
  PFValue rv;
  int rc;
  assert_pf_error(call1(f, kPFBytes, (PFValue){.v_handle = &ba}, &rv, &rc), kPFErrTypeError,
                  "argument 0", "NULL data");
  ba.size = 0; /* {NULL, 0} is empty bytes */
  assert_pf_ok(call1(f, kPFBytes, (PFValue){.v_handle = &ba}, &rv, &rc));
  assert_int_equal(((const PFByteArray*)rv.v_handle)->size, 0);
  PFFuncFree(f);
}

static void test_call_wrong_handle_kind(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  PFValue rv;
  int rc;
  assert_pf_error(call1(f, kPFFuncHandle, (PFValue){.v_handle = boxed}, &rv, &rc), kPFErrTypeError,
                  "argument 0", "not a live function handle");
  assert_pf_error(call1(f, kPFModuleHandle, (PFValue){.v_handle = f}, &rv, &rc), kPFErrTypeError,
                  "argument 0", "not a live module handle");
  /* A boxed object is fine where any object is expected. */
  assert_pf_ok(call1(f, kPFObjectHandle, (PFValue){.v_handle = boxed}, &rv, &rc));
  assert_int_equal(rc, kPFObjectHandle);
  PFObjectFree(rv.v_handle);
  PFObjectFree(boxed);
  PFFuncFree(f);
}

/* Detectable only while the memory is the caller's and not an object. */
static void test_call_not_a_live_handle(void** state) {
  (void)state;
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(g_not_an_object, NULL, NULL, 0, &rv, &rc), kPFErrTypeError,
                  "PFFuncCall", "not a live function handle");
  PFFunctionHandle f = make(p_echo);
  assert_pf_error(call1(f, kPFObjectHandle, (PFValue){.v_handle = g_not_an_object}, &rv, &rc),
                  kPFErrTypeError, "argument 0", "not a live");
  PFFuncFree(f);
}

static void test_call_invalid_utf8_str(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  const char* junk = "\xff\xfe\xc3(\x80 not UTF-8";
  PFValue rv;
  int rc;
  assert_pf_ok(call1(f, kPFStr, (PFValue){.v_str = junk}, &rv, &rc));
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, junk);
  PFFuncFree(f);
}

static void test_call_callee_fails_silently(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_silent_failure);
  PFErrorClear();
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError,
                  "without recording an error");
  PFFuncFree(f);
}

/* PFFuncCallFrame: a NULL frame, and every field PFFuncCall would refuse
 * as an argument, with PFFuncCall's wording; the outputs stay as they
 * were. */
static void test_call_frame_bad_input(void** state) {
  (void)state;
  assert_pf_error(PFFuncCallFrame(NULL), kPFErrTypeError, "PFFuncCallFrame", "'frame'", "NULL");
  PFFunctionHandle f = make(p_echo);
  PFValue args[1] = {{.v_int64 = 1}};
  int codes[1] = {kPFInt};
  const PFCallFrame good = {.ret_val = {.v_int64 = 77},
                            .ret_type_code = kPFFloat,
                            .num_args = 1,
                            .func = f,
                            .args = args,
                            .type_codes = codes};
  PFCallFrame fr = good;
  fr.func = NULL;
  assert_pf_error(PFFuncCallFrame(&fr), kPFErrTypeError, "'func'", "NULL");
  fr.func = g_not_an_object;
  assert_pf_error(PFFuncCallFrame(&fr), kPFErrTypeError, "'func'");
  fr = good;
  fr.num_args = -1;
  assert_pf_error(PFFuncCallFrame(&fr), kPFErrValueError, "'num_args' is negative (-1)");
  fr = good;
  fr.args = NULL;
  assert_pf_error(PFFuncCallFrame(&fr), kPFErrTypeError, "'args' is NULL with num_args 1");
  fr = good;
  fr.type_codes = NULL;
  assert_pf_error(PFFuncCallFrame(&fr), kPFErrTypeError, "'type_codes' is NULL with num_args 1");
  fr = good;
  codes[0] = 200;
  assert_pf_error(PFFuncCallFrame(&fr), kPFErrTypeError, "argument 0 has unknown type code 200");
  codes[0] = kPFStr;
  args[0].v_str = NULL;
  assert_pf_error(PFFuncCallFrame(&fr), kPFErrTypeError, "argument 0", "NULL pointer");
  /* Nothing was written to the outputs. */
  assert_int_equal(fr.ret_val.v_int64, 77);
  assert_int_equal(fr.ret_type_code, kPFFloat);
  PFFuncFree(f);
  f = make(p_silent_failure);
  PFErrorClear();
  fr = (PFCallFrame){.ret_val = {.v_int64 = 77}, .ret_type_code = kPFFloat, .func = f};
  assert_pf_error(PFFuncCallFrame(&fr), kPFErrRuntimeError, "without recording an error");
  assert_int_equal(fr.ret_val.v_int64, 77);
  assert_int_equal(fr.ret_type_code, kPFFloat);
  PFFuncFree(f);
}

static int set_return_misuse_body(PFRetValueHandle ret) {
  PFValue v = {.v_int64 = 1};
  int code = kPFInt;
  assert_pf_error(PFCFuncSetReturn(NULL, &v, &code, 1), kPFErrTypeError, "'ret'", "NULL");
  assert_pf_error(PFCFuncSetReturn(g_not_an_object, &v, &code, 1), kPFErrTypeError, "'ret'");
  assert_pf_error(PFCFuncSetReturn(ret, NULL, &code, 1), kPFErrTypeError, "'value'");
  assert_pf_error(PFCFuncSetReturn(ret, &v, NULL, 1), kPFErrTypeError, "'type_code'");
  assert_pf_error(PFCFuncSetReturn(ret, &v, &code, 2), kPFErrValueError, "num_ret");
  code = kPFTypeCodeEnd;
  assert_pf_error(PFCFuncSetReturn(ret, &v, &code, 1), kPFErrTypeError, "unknown type code");
  code = kPFStr;
  v.v_str = NULL;
  assert_pf_error(PFCFuncSetReturn(ret, &v, &code, 1), kPFErrTypeError, "NULL");
  return 0;
}

static void test_set_return_misuse(void** state) {
  (void)state;
  g_inside = set_return_misuse_body;
  PFFunctionHandle f = make(p_inside);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  PFFuncFree(f);
  /* A return handle kept past its call is stale. */
  PFFunctionHandle k = make(p_keep_ret);
  assert_pf_ok(PFFuncCall(k, NULL, NULL, 0, &rv, &rc));
  PFValue v = {.v_int64 = 1};
  int code = kPFInt;
  assert_pf_error(pf_test_set_return_stale(g_stale_ret, &v, &code), kPFErrTypeError, "'ret'");
  PFFuncFree(k);
}

static int forged_ret_body(PFRetValueHandle ret) {
  PFValue v = {.v_int64 = 9};
  int code = kPFInt;
  (void)ret;
  uintptr_t forged[16];
  memset(forged, 0, sizeof(forged));
  assert_pf_error(PFCFuncSetReturn(forged, &v, &code, 1), kPFErrTypeError,
                  "PFCFuncSetReturn: argument 'ret' is not the return handle of a call in "
                  "progress on this thread");
  forged[0] = ~(uintptr_t)0; /* an odd word, as a tag is */
  assert_pf_error(PFCFuncSetReturn(forged, &v, &code, 1), kPFErrTypeError, "'ret'");
  assert_int_equal(forged[1], 0);
  PFFunctionHandle f = make(p_echo);
  assert_pf_error(PFCFuncSetReturn(f, &v, &code, 1), kPFErrTypeError, "'ret'");
  PFFuncFree(f);
  assert_pf_error(PFCFuncSetReturn(&v, &v, &code, 1), kPFErrTypeError, "'ret'");
  assert_int_equal(v.v_int64, 9);
  return 0;
}

static void test_set_return_forged_ret(void** state) {
  (void)state;
  g_inside = forged_ret_body;
  PFFunctionHandle f = make(p_inside);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  PFFuncFree(f);
}

/* Another thread tries the `ret` of this thread's call in progress. */
typedef struct {
  PFRetValueHandle ret;
  int status;
  char message[160];
} foreign_ret;
static void* try_foreign_ret(void* arg) {
  foreign_ret* t = arg;
  PFValue v = {.v_int64 = 666};
  int code = kPFInt;
  t->status = PFCFuncSetReturn(t->ret, &v, &code, 1);
  snprintf(t->message, sizeof(t->message), "%s: %s", PFErrorGetKind(), PFErrorGetMessage());
  return NULL;
}
static foreign_ret g_foreign;
static int foreign_ret_body(PFRetValueHandle ret) {
  PFValue v = {.v_int64 = 1};
  int code = kPFInt;
  assert_pf_ok(PFCFuncSetReturn(ret, &v, &code, 1));
  g_foreign.ret = ret;
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, try_foreign_ret, &g_foreign), 0);
  pthread_join(th, NULL);
  return 0;
}

static void test_set_return_foreign_thread_ret(void** state) {
  (void)state;
  g_inside = foreign_ret_body;
  PFFunctionHandle f = make(p_inside);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(g_foreign.status, -1);
  assert_string_equal(g_foreign.message,
                      "TypeError: PFCFuncSetReturn: argument 'ret' is not the return handle of "
                      "a call in progress on this thread");
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 1); /* unchanged */
  PFFuncFree(f);
}

/* Bytes whose size no object can have: the copy of a result would compute
 * size + 1. The data pointer is real and short: the size is a lie
 * that must be caught before anything reads through it. */
static char g_short_data[8] = "short";

static int big_return_body(PFRetValueHandle ret) {
  PFByteArray ba = {g_short_data, SIZE_MAX};
  PFValue v = {.v_handle = &ba};
  int code = kPFBytes;
  assert_pf_error(PFCFuncSetReturn(ret, &v, &code, 1), kPFErrValueError, "PFCFuncSetReturn",
                  "return value 0 is bytes of size 18446744073709551615",
                  "larger than any object can be");
  ba.size = (size_t)PTRDIFF_MAX; /* possible in principle; its copy is not */
  assert_pf_error(PFCFuncSetReturn(ret, &v, &code, 1), kPFErrMemoryError);
  return 0;
}

static void test_call_bytes_too_large(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  PFByteArray ba = {g_short_data, SIZE_MAX};
  PFValue rv;
  int rc;
  assert_pf_error(call1(f, kPFBytes, (PFValue){.v_handle = &ba}, &rv, &rc), kPFErrValueError,
                  "PFFuncCall: argument 0 is bytes of size 18446744073709551615",
                  "larger than any object can be");
  PFFuncFree(f);
  g_inside = big_return_body;
  f = make(p_inside);
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFNull); /* the failed sets left the result alone */
  PFFuncFree(f);
}

/* ==== Typed functions and closures ========================================= */

static void test_typed_null_arguments(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_error(PFFuncCreateFromTyped(NULL, "void()", &f), kPFErrTypeError, "'fn'");
  assert_pf_error(PFFuncCreateFromTyped((void*)t_add, NULL, &f), kPFErrTypeError, "'signature'");
  assert_pf_error(PFFuncCreateFromTyped((void*)t_add, "void()", NULL), kPFErrTypeError, "'out'");
  assert_null(f);
}

static void test_typed_bad_signature(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  const char* bad[] = {"",
                       "int64(int64,,int64)",
                       "int64(int64",
                       "float(int64)",
                       "int64(void)",
                       "int64(int64) x",
                       "Int64()",
                       "int64(\xff)"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i)
    assert_pf_error(PFFuncCreateFromTyped((void*)t_add, bad[i], &f), kPFErrValueError,
                    "PFFuncCreateFromTyped", "bad signature", "at position");
  assert_null(f);
}

static void test_typed_too_many_arguments(void** state) {
  (void)state;
  char sig[512] = "void(";
  for (int i = 0; i <= PF_TYPED_MAX_ARGS; ++i) strcat(sig, i ? ",int64" : "int64");
  strcat(sig, ")");
  PFFunctionHandle f = NULL;
  assert_pf_error(PFFuncCreateFromTyped((void*)t_add, sig, &f), kPFErrValueError,
                  "more than 16 arguments");
}

static void test_typed_wrong_arity(void** state) {
  (void)state;
  PFFunctionHandle f = make_typed((void*)t_add, "int64(int64,int64)");
  PFValue v[3] = {{.v_int64 = 1}, {.v_int64 = 2}, {.v_int64 = 3}}, rv;
  int codes[3] = {kPFInt, kPFInt, kPFInt}, rc;
  assert_pf_error(PFFuncCall(f, v, codes, 3, &rv, &rc), kPFErrTypeError,
                  "takes 2 arguments, got 3");
  assert_pf_error(PFFuncCall(f, v, codes, 1, &rv, &rc), kPFErrTypeError,
                  "takes 2 arguments, got 1");
  PFFuncFree(f);
}

static void test_typed_wrong_type_code(void** state) {
  (void)state;
  PFFunctionHandle f = make_typed((void*)t_add, "int64(int64,int64)");
  PFValue v[2] = {{.v_int64 = 1}, {.v_float64 = 2.0}}, rv;
  int codes[2] = {kPFInt, kPFFloat}, rc;
  assert_pf_error(PFFuncCall(f, v, codes, 2, &rv, &rc), kPFErrTypeError, "argument 1",
                  "expected int64, got float");
  codes[1] = kPFStr;
  v[1].v_str = "2";
  assert_pf_error(PFFuncCall(f, v, codes, 2, &rv, &rc), kPFErrTypeError, "argument 1",
                  "expected int64, got str");
  PFFuncFree(f);
}

static void test_typed_out_of_range_integer(void** state) {
  (void)state;
  PFFunctionHandle i32 = make_typed((void*)t_i32, "int32(int32)");
  PFFunctionHandle u8 = make_typed((void*)t_u8, "uint8(uint8)");
  PFFunctionHandle b = make_typed((void*)t_bool, "bool(bool)");
  PFFunctionHandle f64 = make_typed((void*)t_f64, "float64(float64)");
  PFValue rv;
  int rc;
  assert_pf_error(call1(i32, kPFInt, (PFValue){.v_int64 = (int64_t)1 << 31}, &rv, &rc),
                  kPFErrValueError, "argument 0", "2147483648", "out of its range");
  assert_pf_error(call1(u8, kPFInt, (PFValue){.v_int64 = -1}, &rv, &rc), kPFErrValueError,
                  "argument 0", "out of its range");
  assert_pf_error(call1(b, kPFInt, (PFValue){.v_int64 = 2}, &rv, &rc), kPFErrValueError,
                  "only 0 and 1");
  assert_pf_error(call1(f64, kPFInt, (PFValue){.v_int64 = ((int64_t)1 << 53) + 1}, &rv, &rc),
                  kPFErrValueError, "exactly");
  /* The edges themselves convert. */
  assert_pf_ok(call1(i32, kPFInt, (PFValue){.v_int64 = INT32_MIN}, &rv, &rc));
  assert_int_equal(rv.v_int64, INT32_MIN);
  assert_pf_ok(call1(u8, kPFInt, (PFValue){.v_int64 = 255}, &rv, &rc));
  assert_int_equal(rv.v_int64, 255);
  PFFuncFree(i32);
  PFFuncFree(u8);
  PFFuncFree(b);
  PFFuncFree(f64);
}

static void test_typed_not_a_live_func_argument(void** state) {
  (void)state;
  PFFunctionHandle f = make_typed((void*)t_func, "int64(func)");
  PFValue rv;
  int rc;
  assert_pf_error(call1(f, kPFFuncHandle, (PFValue){.v_handle = g_not_an_object}, &rv, &rc),
                  kPFErrTypeError, "argument 0", "not a live function handle");
  assert_pf_ok(call1(f, kPFNull, (PFValue){.v_handle = NULL}, &rv, &rc));
  assert_int_equal(rv.v_int64, 0);
  PFFuncFree(f);
}

static void test_closure_bad_input(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  PFObjectHandle c = NULL;
  void* fn = NULL;
  assert_pf_error(PFFuncToCFunction(NULL, "int64(int64)", &c, &fn), kPFErrTypeError,
                  "PFFuncToCFunction", "'func'");
  assert_pf_error(PFFuncToCFunction(g_not_an_object, "int64(int64)", &c, &fn), kPFErrTypeError,
                  "not a live function handle");
  assert_pf_error(PFFuncToCFunction(f, NULL, &c, &fn), kPFErrTypeError, "'signature'");
  assert_pf_error(PFFuncToCFunction(f, "int64(int64)", NULL, &fn), kPFErrTypeError,
                  "'out_closure'");
  assert_pf_error(PFFuncToCFunction(f, "int64(int64)", &c, NULL), kPFErrTypeError, "'out_fn'");
  assert_pf_error(PFFuncToCFunction(f, "int64(nope)", &c, &fn), kPFErrValueError, "bad signature");
  assert_null(c);
  assert_pf_error(PFClosureCheckError(NULL), kPFErrTypeError, "'closure'");
  assert_pf_error(PFClosureCheckError(f), kPFErrTypeError, "'closure'");
  PFFuncFree(f);
}

static PFByteArray t_huge_bytes(void) {
  PFByteArray r = {g_short_data, SIZE_MAX};
  return r;
}

static void test_typed_and_closure_bytes_too_large(void** state) {
  (void)state;
  PFFunctionHandle f = make_typed((void*)t_huge_bytes, "bytes()");
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrValueError,
                  "typed function bytes(): result: bytes of size 18446744073709551615",
                  "larger than any object can be");
  PFFuncFree(f);
  /* A closure's bytes argument: the zero result, and a kept ValueError. */
  f = make(p_echo);
  PFObjectHandle c = NULL;
  void* fn = NULL;
  assert_pf_ok(PFFuncToCFunction(f, "bytes(bytes)", &c, &fn));
  PFByteArray (*echo)(const PFByteArray*) = NULL;
  memcpy(&echo, &fn, sizeof(fn));
  PFByteArray huge = {g_short_data, SIZE_MAX};
  PFByteArray got = echo(&huge);
  assert_null(got.data);
  assert_int_equal(got.size, 0);
  assert_pf_error(PFClosureCheckError(c), kPFErrValueError,
                  "C function pointer bytes(bytes): argument 0: bytes of size "
                  "18446744073709551615, larger than any object can be");
  PFObjectFree(c);
  PFFuncFree(f);
}

/* ==== Functions and objects ================================================ */

static void test_create_null_func_runs_finalizer(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle f = NULL;
  assert_pf_error(PFFuncCreateFromCFunc(NULL, &fins, pf_test_count_fin, &f), kPFErrTypeError,
                  "PFFuncCreateFromCFunc", "'func'");
  assert_int_equal(atomic_load(&fins), 1);
  assert_pf_error(PFFuncCreateFromCFunc(p_echo, &fins, pf_test_count_fin, NULL), kPFErrTypeError,
                  "'out'");
  assert_int_equal(atomic_load(&fins), 2);
  assert_null(f);
}

static void test_free_null_is_noop(void** state) {
  (void)state;
  PFErrorSet(kPFErrKeyError, "untouched");
  assert_int_equal(PFFuncFree(NULL), 0);
  assert_int_equal(PFObjectFree(NULL), 0);
  assert_int_equal(PFModFree(NULL), 0);
  assert_string_equal(PFErrorGetMessage(), "untouched");
}

static void test_handle_not_an_object(void** state) {
  (void)state;
  uint32_t ti;
  assert_pf_error(PFFuncFree(g_not_an_object), kPFErrTypeError, "PFFuncFree", "'func'");
  assert_pf_error(PFFuncRetain(g_not_an_object), kPFErrTypeError, "PFFuncRetain");
  assert_pf_error(PFObjectFree(g_not_an_object), kPFErrTypeError, "PFObjectFree");
  assert_pf_error(PFObjectRetain(NULL), kPFErrTypeError, "PFObjectRetain", "NULL");
  assert_pf_error(PFObjectGetTypeIndex(g_not_an_object, &ti), kPFErrTypeError,
                  "PFObjectGetTypeIndex");
  assert_pf_error(PFModFree(g_not_an_object), kPFErrTypeError, "PFModFree");
}

/* Freeing a handle twice is undefined, as with free(): the memory is gone,
 * so the runtime cannot tell. A sanitizer build reports it; this test
 * proves that in a child process, since the report ends that process. */
static void test_double_free(void** state) {
  (void)state;
#ifdef PF_HAVE_ASAN
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(open("/dev/null", O_WRONLY), 2); /* keep the expected report out of the log */
    PFFunctionHandle f = make(p_echo);
    PFFuncFree(f);
    PFFuncFree(f);
    _exit(0); /* not reached under ASan */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_false(WIFEXITED(status) && WEXITSTATUS(status) == 0);
#else
  skip(); /* undefined behaviour without a sanitizer to catch it */
#endif
}

static void test_set_info_twice(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  assert_pf_ok(PFFuncSetInfo(f, "once", NULL, NULL));
  assert_pf_error(PFFuncSetInfo(f, "twice", NULL, NULL), kPFErrValueError, "already set");
  assert_pf_error(PFFuncSetInfo(NULL, "x", NULL, NULL), kPFErrTypeError, "PFFuncSetInfo");
  PFFuncFree(f);
}

/* One wording for each kind of misuse, whatever the entry point: a NULL
 * handle, and a live object of another type. */
static void test_one_wording_per_misuse(void** state) {
  (void)state;
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  PFFunctionHandle fn = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(p_echo, NULL, NULL, &fn));
  DLTensor* t = NULL;
  DLManagedTensor* m = NULL;
  void* payload = NULL;
  const char* s = NULL;
  int n = 0;
  const char** names = NULL;
  PFModuleHandle mod = NULL;
  assert_pf_error(PFFuncRetain(NULL), kPFErrTypeError, "PFFuncRetain: argument 'func' is NULL");
  assert_pf_error(PFFuncRetain(boxed), kPFErrTypeError,
                  "PFFuncRetain: argument 'func' is not a live function handle");
  assert_pf_error(PFFuncGetInfo(NULL, &s, NULL, NULL), kPFErrTypeError,
                  "PFFuncGetInfo: argument 'func' is NULL");
  assert_pf_error(PFTensorGetDLTensor(NULL, &t), kPFErrTypeError,
                  "PFTensorGetDLTensor: argument 'tensor' is NULL");
  assert_pf_error(PFTensorToDLPack(fn, &m), kPFErrTypeError,
                  "PFTensorToDLPack: argument 'tensor' is not a live tensor handle");
  assert_pf_error(PFObjectGetBoxedPayload(NULL, &payload), kPFErrTypeError,
                  "PFObjectGetBoxedPayload: argument 'obj' is NULL");
  assert_pf_error(PFObjectGetBoxedPayload(fn, &payload), kPFErrTypeError,
                  "PFObjectGetBoxedPayload: argument 'obj' is not a live boxed handle");
  assert_pf_error(PFObjectGetBoxedPayload(boxed, NULL), kPFErrTypeError,
                  "PFObjectGetBoxedPayload: argument 'out' is NULL");
  assert_pf_error(PFObjectRetain(g_not_an_object), kPFErrTypeError,
                  "PFObjectRetain: argument 'obj' is not a live object handle");
  assert_pf_error(PFClosureCheckError(boxed), kPFErrTypeError,
                  "PFClosureCheckError: argument 'closure' is not a live closure handle");
  assert_pf_error(PFModListFunctionNames(boxed, &n, &names), kPFErrTypeError,
                  "PFModListFunctionNames: argument 'mod' is not a live module handle");
  assert_pf_error(PFModLoadFromDescriptors(NULL, NULL, NULL), kPFErrTypeError,
                  "PFModLoadFromDescriptors: argument 'out' is NULL");
  assert_pf_error(PFHostGateClose(fn, NULL, 0), kPFErrTypeError,
                  "PFHostGateClose: argument 'gate' is not a live host gate handle");
  assert_pf_error(PFFuncCreateFromTyped(NULL, "void()", &fn), kPFErrTypeError,
                  "PFFuncCreateFromTyped: argument 'fn' is NULL");
  assert_pf_error(PFGetStructSize("PFValue", NULL), kPFErrTypeError,
                  "PFGetStructSize: argument 'out' is NULL");
  assert_null(mod);
  PFObjectFree(boxed);
  PFFuncFree(fn);
}

static void test_object_wrong_kind(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  void* p;
  DLTensor* t;
  DLManagedTensor* m;
  assert_pf_error(PFObjectGetBoxedPayload(f, &p), kPFErrTypeError, "not a live boxed handle");
  assert_pf_error(PFTensorGetDLTensor(f, &t), kPFErrTypeError, "not a live tensor handle");
  assert_pf_error(PFTensorToDLPack(f, &m), kPFErrTypeError, "not a live tensor handle");
  PFFuncFree(f);
}

static int g_deleter_runs;
static void count_deleter(DLManagedTensor* m) {
  (void)m;
  g_deleter_runs++;
}

static void test_tensor_null_arguments(void** state) {
  (void)state;
  PFObjectHandle t = NULL;
  assert_pf_error(PFTensorCreateFromDLPack(NULL, &t), kPFErrTypeError, "'managed'");
  DLManagedTensor m = {0};
  m.deleter = count_deleter;
  g_deleter_runs = 0;
  assert_pf_error(PFTensorCreateFromDLPack(&m, NULL), kPFErrTypeError, "'out'");
  assert_int_equal(g_deleter_runs, 1); /* ownership was passed: the deleter ran */
  assert_null(t);
}

/* ==== Registry ============================================================ */

static void test_registry_null_name(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo), got;
  assert_pf_error(PFFuncRegisterGlobal(NULL, f, 0), kPFErrTypeError, "'name'", "NULL");
  assert_pf_error(PFFuncGetGlobal(NULL, &got), kPFErrTypeError, "'name'");
  assert_pf_error(PFFuncRemoveGlobal(NULL), kPFErrTypeError, "'name'");
  PFFuncFree(f);
}

static void test_registry_empty_name(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo), got;
  assert_pf_error(PFFuncRegisterGlobal("", f, 0), kPFErrValueError, "'name'", "empty");
  assert_pf_error(PFFuncGetGlobal("", &got), kPFErrValueError, "empty");
  assert_pf_error(PFFuncRemoveGlobal(""), kPFErrValueError, "empty");
  PFFuncFree(f);
}

static void test_registry_overlong_name(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo), got;
  char* name = malloc(PF_NAME_MAX + 2);
  memset(name, 'n', PF_NAME_MAX + 1);
  name[PF_NAME_MAX + 1] = '\0';
  assert_pf_error(PFFuncRegisterGlobal(name, f, 0), kPFErrValueError, "longer than 1024");
  assert_pf_error(PFFuncGetGlobal(name, &got), kPFErrValueError, "longer than 1024");
  assert_pf_error(PFFuncRemoveGlobal(name), kPFErrValueError, "longer than 1024");
  name[PF_NAME_MAX] = '\0'; /* exactly PF_NAME_MAX bytes is fine */
  assert_pf_ok(PFFuncRegisterGlobal(name, f, 0));
  assert_pf_ok(PFFuncRemoveGlobal(name));
  free(name);
  PFFuncFree(f);
}

static void test_registry_unknown_name(void** state) {
  (void)state;
  PFFunctionHandle got = g_not_an_object;
  assert_pf_ok(PFFuncGetGlobal("catalogue.absent", &got));
  assert_null(got); /* a miss is not an error */
  assert_pf_error(PFFuncRemoveGlobal("catalogue.absent"), kPFErrKeyError, "catalogue.absent");
}

static void test_registry_taken_name(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  assert_pf_ok(PFFuncRegisterGlobal("catalogue.taken", f, 0));
  assert_pf_error(PFFuncRegisterGlobal("catalogue.taken", f, 0), kPFErrKeyError, "catalogue.taken",
                  "already registered");
  assert_pf_ok(PFFuncRemoveGlobal("catalogue.taken"));
  PFFuncFree(f);
}

static void test_registry_unknown_flags(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo);
  assert_pf_error(PFFuncRegisterGlobalEx("catalogue.flags", f, 0x40), kPFErrValueError, "'flags'",
                  "0x40");
  PFFuncFree(f);
}

static void test_registry_not_a_function(void** state) {
  (void)state;
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  assert_pf_error(PFFuncRegisterGlobal("catalogue.boxed", boxed, 0), kPFErrTypeError, "'func'");
  assert_pf_error(PFFuncRegisterGlobal("catalogue.null", NULL, 0), kPFErrTypeError, "'func'");
  assert_pf_error(PFFuncRegisterGlobal("catalogue.junk", g_not_an_object, 0), kPFErrTypeError,
                  "'func'");
  PFObjectFree(boxed);
}

static void test_registry_invalid_utf8_name(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo), got = NULL;
  const char* name = "catalogue.\xff\xfe";
  assert_pf_ok(PFFuncRegisterGlobal(name, f, 0));
  assert_pf_ok(PFFuncGetGlobal(name, &got));
  assert_ptr_equal(got, f);
  PFFuncFree(got);
  assert_pf_ok(PFFuncRemoveGlobal(name));
  PFFuncFree(f);
}

static void test_registry_null_outputs(void** state) {
  (void)state;
  int n;
  const char** names;
  assert_pf_error(PFFuncGetGlobal("catalogue.x", NULL), kPFErrTypeError, "'out'");
  assert_pf_error(PFFuncListGlobalNames(NULL, &names), kPFErrTypeError, "'out_size'");
  assert_pf_error(PFFuncListGlobalNames(&n, NULL), kPFErrTypeError, "'out_array'");
  assert_pf_error(PFRegistryIsSealed(NULL), kPFErrTypeError, "'out'");
}

/* ==== Modules ============================================================= */

static void test_module_null_arguments(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  PFFunctionHandle f = NULL;
  int n;
  const char** names;
  assert_pf_error(PFModLoadFromFile(NULL, &m), kPFErrTypeError, "PFModLoadFromFile", "'path'");
  assert_pf_error(PFModLoadFromFile("x.so", NULL), kPFErrTypeError, "'out'");
  assert_pf_error(PFModGetFunction(NULL, "f", 0, &f), kPFErrTypeError, "'mod'");
  assert_pf_error(PFModImport(NULL, NULL), kPFErrTypeError, "'mod'");
  assert_pf_error(PFModListFunctionNames(NULL, &n, &names), kPFErrTypeError, "'mod'");
  assert_pf_error(PFModExportGlobal(NULL, "p.", 0), kPFErrTypeError, "'mod'");
  assert_null(m);
}

static void test_module_empty_path(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromFile("", &m), kPFErrValueError, "'path' is empty");
}

static void test_module_missing_file(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromFile("/nonexistent/catalogue/mod.so", &m), kPFErrRuntimeError,
                  "cannot load", "/nonexistent/catalogue/mod.so");
  /* A file that is not a shared library at all. */
  char path[] = "/tmp/pf-catalogue-XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "not ELF\n", 8), 8);
  close(fd);
  assert_pf_error(PFModLoadFromFile(path, &m), kPFErrRuntimeError, "cannot load", path);
  unlink(path);
  assert_null(m);
}

static void test_module_not_a_module(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  /* A real shared library that registers no functions. */
  assert_pf_error(PFModLoadFromFile("libm.so.6", &m), kPFErrValueError,
                  "is not a packedfunc module");
  assert_null(m);
}

static void test_module_wrong_handle_kind(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_echo), got;
  assert_pf_error(PFModGetFunction(f, "x", 0, &got), kPFErrTypeError, "'mod'",
                  "not a live module handle");
  assert_pf_error(PFModFree(f), kPFErrTypeError, "PFModFree");
  PFFuncFree(f);
}

/* ==== Errors, versions, memory ============================================= */

static void test_error_invalid_kind(void** state) {
  (void)state;
  PFErrorSet("not a kind!", "message");
  assert_string_equal(PFErrorGetKind(), kPFErrRuntimeError);
  assert_non_null(strstr(PFErrorGetMessage(), "not a kind!"));
  assert_non_null(strstr(PFErrorGetMessage(), "message"));
  PFErrorSet(NULL, NULL);
  assert_string_equal(PFErrorGetKind(), kPFErrRuntimeError);
}

/* The thread's own error strings handed back to the setters (a host
 * re-raising the current error): accepted, each read before it is replaced
 *. tests/test_errors.c covers every combination. */
static void test_error_setters_take_own_strings(void** state) {
  (void)state;
  PFErrorSet(kPFErrValueError, "KeyError");
  PFErrorSet(PFErrorGetMessage(), PFErrorGetMessage());
  assert_string_equal(PFErrorGetKind(), kPFErrKeyError);
  assert_string_equal(PFErrorGetMessage(), "KeyError");
  PFErrorAppendTraceback("  at one");
  PFErrorAppendTraceback(PFErrorGetTraceback());
  assert_string_equal(PFErrorGetTraceback(), "  at one\n  at one");
  PFAPISetLastError(PFGetLastError());
  assert_string_equal(PFErrorGetMessage(), "KeyError: KeyError\n  at one\n  at one");
}

static void test_api_unknown_version(void** state) {
  (void)state;
  const PFApiBase* base = PFGetApiBase();
  assert_null(base->GetApi(0));
  assert_string_equal(PFErrorGetKind(), kPFErrValueError);
  assert_null(base->GetApi(PF_API_VERSION + 1));
  assert_string_equal(PFErrorGetKind(), kPFErrValueError);
  assert_non_null(strstr(PFErrorGetMessage(), "not available"));
}

static void test_struct_size_unknown_name(void** state) {
  (void)state;
  size_t n = 0;
  assert_pf_error(PFGetStructSize("PFNothing", &n), kPFErrKeyError, "PFNothing");
  assert_pf_error(PFGetStructSize(NULL, &n), kPFErrTypeError, "'name'");
  assert_pf_error(PFGetStructSize("PFValue", NULL), kPFErrTypeError, "'out'");
}

static void* never_malloc(size_t n, void* ud) {
  (void)n, (void)ud;
  return NULL;
}
static void* never_realloc(void* p, size_t n, void* ud) {
  (void)p, (void)n, (void)ud;
  return NULL;
}
static void never_free(void* p, void* ud) { (void)p, (void)ud; }

static void test_set_allocator_misuse(void** state) {
  (void)state;
  PFAllocator incomplete = {never_malloc, NULL, NULL, NULL};
  assert_pf_error(PFSetAllocator(&incomplete), kPFErrTypeError, "PFSetAllocator");
  /* Earlier tests allocated: too late to switch allocators now. */
  PFAllocator full = {never_malloc, never_realloc, never_free, NULL};
  assert_pf_error(PFSetAllocator(&full), kPFErrRuntimeError, "already allocated");
}

static void test_mem_alloc_too_large(void** state) {
  (void)state;
  const size_t sizes[] = {SIZE_MAX, (size_t)PTRDIFF_MAX + 1};
  for (int i = 0; i < 2; ++i) {
    assert_null(PFMemAlloc(sizes[i]));
    assert_pf_error(-1, kPFErrMemoryError, "PFMemAlloc: argument 'size'",
                    "larger than any object can be");
  }
  char* p = PFMemAlloc(4);
  assert_non_null(p);
  memcpy(p, "abc", 4);
  assert_null(PFMemRealloc(p, SIZE_MAX));
  assert_pf_error(-1, kPFErrMemoryError, "PFMemRealloc: argument 'size'", "unchanged");
  assert_string_equal(p, "abc"); /* still the caller's */
  PFMemFree(p);
}

static void test_type_code_name_unknown(void** state) {
  (void)state;
  assert_null(PFTypeCodeName(kPFTypeCodeEnd));
  assert_null(PFTypeCodeName(-1));
  assert_string_equal(PFTypeCodeName(kPFExtBegin), "ext");
  assert_string_equal(PFTypeCodeName(kPFStr), "str");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_call_null_func),
      cmocka_unit_test(test_call_null_outputs),
      cmocka_unit_test(test_call_null_arrays_with_count),
      cmocka_unit_test(test_call_negative_count),
      cmocka_unit_test(test_call_unknown_type_code),
      cmocka_unit_test(test_call_null_pointer_under_code),
      cmocka_unit_test(test_call_bytes_null_data),
      cmocka_unit_test(test_call_wrong_handle_kind),
      cmocka_unit_test(test_call_not_a_live_handle),
      cmocka_unit_test(test_call_invalid_utf8_str),
      cmocka_unit_test(test_call_callee_fails_silently),
      cmocka_unit_test(test_call_frame_bad_input),
      cmocka_unit_test(test_set_return_misuse),
      cmocka_unit_test(test_set_return_forged_ret),
      cmocka_unit_test(test_set_return_foreign_thread_ret),
      cmocka_unit_test(test_call_bytes_too_large),
      cmocka_unit_test(test_typed_null_arguments),
      cmocka_unit_test(test_typed_bad_signature),
      cmocka_unit_test(test_typed_too_many_arguments),
      cmocka_unit_test(test_typed_wrong_arity),
      cmocka_unit_test(test_typed_wrong_type_code),
      cmocka_unit_test(test_typed_out_of_range_integer),
      cmocka_unit_test(test_typed_not_a_live_func_argument),
      cmocka_unit_test(test_closure_bad_input),
      cmocka_unit_test(test_typed_and_closure_bytes_too_large),
      cmocka_unit_test(test_create_null_func_runs_finalizer),
      cmocka_unit_test(test_free_null_is_noop),
      cmocka_unit_test(test_handle_not_an_object),
      cmocka_unit_test(test_double_free),
      cmocka_unit_test(test_set_info_twice),
      cmocka_unit_test(test_object_wrong_kind),
      cmocka_unit_test(test_one_wording_per_misuse),
      cmocka_unit_test(test_tensor_null_arguments),
      cmocka_unit_test(test_registry_null_name),
      cmocka_unit_test(test_registry_empty_name),
      cmocka_unit_test(test_registry_overlong_name),
      cmocka_unit_test(test_registry_unknown_name),
      cmocka_unit_test(test_registry_taken_name),
      cmocka_unit_test(test_registry_unknown_flags),
      cmocka_unit_test(test_registry_not_a_function),
      cmocka_unit_test(test_registry_invalid_utf8_name),
      cmocka_unit_test(test_registry_null_outputs),
      cmocka_unit_test(test_module_null_arguments),
      cmocka_unit_test(test_module_empty_path),
      cmocka_unit_test(test_module_missing_file),
      cmocka_unit_test(test_module_not_a_module),
      cmocka_unit_test(test_module_wrong_handle_kind),
      cmocka_unit_test(test_error_invalid_kind),
      cmocka_unit_test(test_error_setters_take_own_strings),
      cmocka_unit_test(test_api_unknown_version),
      cmocka_unit_test(test_struct_size_unknown_name),
      cmocka_unit_test(test_set_allocator_misuse),
      cmocka_unit_test(test_mem_alloc_too_large),
      cmocka_unit_test(test_type_code_name_unknown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
