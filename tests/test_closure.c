/* PackedFuncs as C function pointers (PFFuncToCFunction): qsort with a
 * packed comparator, every type through a closure, the kept-error protocol
 * (PFClosureCheckError) and the closure's lifetime. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"
#include "support/pf_test.h"

/* ---- helpers ---------------------------------------------------------- */

static PFFunctionHandle packed(PFPackedCFunc fn, void* res, PFPackedCFuncFinalizer fin) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, res, fin, &f));
  return f;
}

/* Makes a C pointer of `sig` over `f`; *closure gets the owning object. */
static void* to_c(PFFunctionHandle f, const char* sig, PFObjectHandle* closure) {
  void* fp = NULL;
  int st = PFFuncToCFunction(f, sig, closure, &fp);
  if (st != 0) fail_msg("PFFuncToCFunction(\"%s\") failed: %s", sig, PFGetLastError());
  assert_non_null(fp);
  return fp;
}

/* ---- packed functions used as callees --------------------------------- */

/* Compares two int64 through their pointers; resource: call counter.
 * Fails with ValueError "boom" on the call numbered *fail_at (when set). */
typedef struct {
  int calls;
  int fail_at; /* 0: never */
} cmp_state;

static int packed_cmp(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  cmp_state* s = res;
  ++s->calls;
  if (n != 2 || codes[0] != kPFOpaqueHandle || codes[1] != kPFOpaqueHandle)
    return PFErrorSetFormat(kPFErrTypeError, "packed_cmp: bad arguments");
  if (s->fail_at && s->calls == s->fail_at)
    return PFErrorSetFormat(kPFErrValueError, "boom at call %d", s->calls);
  int64_t a = *(const int64_t*)args[0].v_handle, b = *(const int64_t*)args[1].v_handle;
  PFValue v = {.v_int64 = a < b ? -1 : a > b ? 1 : 0};
  int c = kPFInt;
  return PFCFuncSetReturn(ret, &v, &c, 1);
}

/* Returns its first argument as it came, and records the codes it saw. */
static int g_seen_codes[16];
static int g_seen_n;
static int packed_echo(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  g_seen_n = n;
  for (int i = 0; i < n && i < 16; ++i) g_seen_codes[i] = codes[i];
  if (n == 0) return 0;
  return PFCFuncSetReturn(ret, &args[0], &codes[0], 1);
}

/* Returns the value in its resource as the type code stored beside it. */
typedef struct {
  int code;
  PFValue value;
} fixed_result;
static int packed_fixed(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  fixed_result* r = res;
  if (r->code == kPFNull) return 0;
  return PFCFuncSetReturn(ret, &r->value, &r->code, 1);
}

static int packed_sum(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  double s = 0;
  for (int i = 0; i < n; ++i)
    s += codes[i] == kPFFloat ? args[i].v_float64 : (double)args[i].v_int64;
  PFValue v = {.v_float64 = s};
  int c = kPFFloat;
  return PFCFuncSetReturn(ret, &v, &c, 1);
}

static int g_fin_runs;
static void count_fin(void* p) {
  (void)p;
  ++g_fin_runs;
}

/* ---- qsort ------------------------------------------------------------- */

static void test_qsort_with_packed_comparator(void** state) {
  (void)state;
  cmp_state s = {0, 0};
  PFFunctionHandle f = packed(packed_cmp, &s, NULL);
  PFObjectHandle cl = NULL;
  int (*cmp)(const void*, const void*) =
      (int (*)(const void*, const void*))to_c(f, "int32(ptr,ptr)", &cl);
  uint32_t ti = 0;
  assert_pf_ok(PFObjectGetTypeIndex(cl, &ti));
  assert_int_equal(ti, kPFObjectClosure);

  int64_t xs[] = {5, -3, 99, 0, INT64_MIN, 7, 7, INT64_MAX, -1, 42};
  const size_t n = sizeof(xs) / sizeof(xs[0]);
  qsort(xs, n, sizeof(xs[0]), cmp);
  for (size_t i = 1; i < n; ++i) assert_true(xs[i - 1] <= xs[i]);
  assert_true(xs[0] == INT64_MIN);
  assert_true(xs[n - 1] == INT64_MAX);
  assert_true(s.calls > 0);
  assert_int_equal(PFClosureCheckError(cl), 0);
  assert_pf_ok(PFObjectFree(cl));
  assert_pf_ok(PFFuncFree(f));
}

static int c_cmp_i32(const void* a, const void* b) {
  int32_t x = *(const int32_t*)a, y = *(const int32_t*)b;
  return (x > y) - (x < y);
}

static void test_qsort_with_typed_comparator(void** state) {
  (void)state;
  /* C -> typed PackedFunc -> C pointer again: both libffi directions. */
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)c_cmp_i32, "int32(ptr,ptr)", &f));
  PFObjectHandle cl = NULL;
  int (*cmp)(const void*, const void*) =
      (int (*)(const void*, const void*))to_c(f, "int32(ptr, ptr)", &cl);
  int32_t xs[64];
  for (int i = 0; i < 64; ++i) xs[i] = (i * 37) % 64 - 32;
  qsort(xs, 64, sizeof(xs[0]), cmp);
  for (int i = 0; i < 64; ++i) assert_int_equal(xs[i], i - 32);
  assert_int_equal(PFClosureCheckError(cl), 0);
  PFObjectFree(cl);
  PFFuncFree(f);
}

static void test_qsort_comparator_fails(void** state) {
  (void)state;
  cmp_state s = {0, 3};
  PFFunctionHandle f = packed(packed_cmp, &s, NULL);
  assert_pf_ok(PFFuncSetInfo(f, "cmp", NULL, NULL));
  PFObjectHandle cl = NULL;
  int (*cmp)(const void*, const void*) =
      (int (*)(const void*, const void*))to_c(f, "int32(ptr,ptr)", &cl);
  int64_t xs[32];
  for (int i = 0; i < 32; ++i) xs[i] = 31 - i;
  qsort(xs, 32, sizeof(xs[0]), cmp); /* finishes: failed calls return 0 */
  /* The callee ran until it failed, and not once after. */
  assert_int_equal(s.calls, 3);
  PFErrorClear();
  assert_pf_error(PFClosureCheckError(cl), "ValueError", "boom at call 3");
  if (strstr(PFErrorGetTraceback(), "C function pointer int32(ptr,ptr) over 'cmp'") == NULL)
    fail_msg("traceback \"%s\" lacks the closure", PFErrorGetTraceback());
  /* Collected: the next check is clean, and the pointer works again. */
  assert_int_equal(PFClosureCheckError(cl), 0);
  s.fail_at = 0;
  qsort(xs, 32, sizeof(xs[0]), cmp);
  for (int i = 0; i < 32; ++i) assert_true(xs[i] == i);
  assert_int_equal(PFClosureCheckError(cl), 0);
  PFObjectFree(cl);
  PFFuncFree(f);
}

static void test_first_error_is_kept(void** state) {
  (void)state;
  cmp_state s = {0, 1};
  PFFunctionHandle f = packed(packed_cmp, &s, NULL);
  PFObjectHandle cl = NULL;
  int (*cmp)(const void*, const void*) =
      (int (*)(const void*, const void*))to_c(f, "int32(ptr,ptr)", &cl);
  int64_t a = 1, b = 2;
  assert_int_equal(cmp(&a, &b), 0); /* fails: zero */
  assert_int_equal(cmp(&b, &a), 0); /* skipped while the error is kept */
  assert_int_equal(s.calls, 1);
  assert_pf_error(PFClosureCheckError(cl), "ValueError", "boom at call 1");
  s.fail_at = 2;
  assert_int_equal(cmp(&a, &b), 0); /* second failure, a new first error */
  assert_pf_error(PFClosureCheckError(cl), "ValueError", "boom at call 2");
  assert_int_equal(cmp(&a, &b), -1);
  assert_int_equal(cmp(&b, &a), 1);
  assert_int_equal(PFClosureCheckError(cl), 0);
  PFObjectFree(cl);
  PFFuncFree(f);
}

/* ---- every type through a closure --------------------------------------- */

static void test_echo_integers(void** state) {
  (void)state;
  PFFunctionHandle f = packed(packed_echo, NULL, NULL);
  PFObjectHandle cl[8];
  int8_t (*e8)(int8_t) = (int8_t(*)(int8_t))to_c(f, "int8(int8)", &cl[0]);
  int16_t (*e16)(int16_t) = (int16_t(*)(int16_t))to_c(f, "int16(int16)", &cl[1]);
  int32_t (*e32)(int32_t) = (int32_t(*)(int32_t))to_c(f, "int32(int32)", &cl[2]);
  int64_t (*e64)(int64_t) = (int64_t(*)(int64_t))to_c(f, "int64(int64)", &cl[3]);
  uint8_t (*u8)(uint8_t) = (uint8_t(*)(uint8_t))to_c(f, "uint8(uint8)", &cl[4]);
  uint16_t (*u16)(uint16_t) = (uint16_t(*)(uint16_t))to_c(f, "uint16(uint16)", &cl[5]);
  uint32_t (*u32)(uint32_t) = (uint32_t(*)(uint32_t))to_c(f, "uint32(uint32)", &cl[6]);
  uint64_t (*u64)(uint64_t) = (uint64_t(*)(uint64_t))to_c(f, "uint64(uint64)", &cl[7]);
  assert_int_equal(e8(INT8_MIN), INT8_MIN);
  assert_int_equal(g_seen_codes[0], kPFInt);
  assert_int_equal(e8(-1), -1);
  assert_int_equal(e16(INT16_MIN), INT16_MIN);
  assert_int_equal(e32(INT32_MIN), INT32_MIN);
  assert_int_equal(e32(-5), -5);
  assert_true(e64(INT64_MIN) == INT64_MIN);
  assert_int_equal(u8(UINT8_MAX), UINT8_MAX);
  assert_int_equal(u16(UINT16_MAX), UINT16_MAX);
  assert_int_equal(u32(UINT32_MAX), UINT32_MAX);
  assert_true(u64((uint64_t)INT64_MAX) == (uint64_t)INT64_MAX);
  for (int i = 0; i < 8; ++i) assert_int_equal(PFClosureCheckError(cl[i]), 0);
  /* A uint64 argument beyond int64 cannot become a packed int. */
  assert_true(u64(UINT64_MAX) == 0);
  assert_pf_error(PFClosureCheckError(cl[7]), "ValueError", "argument 0",
                  "uint64 value 18446744073709551615 does not fit");
  for (int i = 0; i < 8; ++i) PFObjectFree(cl[i]);
  PFFuncFree(f);
}

static void test_echo_floats_bool(void** state) {
  (void)state;
  PFFunctionHandle f = packed(packed_echo, NULL, NULL);
  PFObjectHandle c1, c2, c3;
  float (*ef)(float) = (float (*)(float))to_c(f, "float32(float32)", &c1);
  double (*ed)(double) = (double (*)(double))to_c(f, "double(double)", &c2);
  bool (*eb)(bool) = (bool (*)(bool))to_c(f, "bool(bool)", &c3);
  assert_true(ef(0.1f) == 0.1f);
  assert_int_equal(g_seen_codes[0], kPFFloat);
  assert_true(isinf(ef(-INFINITY)));
  assert_true(ed(1e300) == 1e300);
  assert_true(eb(true) == true);
  assert_int_equal(g_seen_codes[0], kPFBool);
  assert_true(eb(false) == false);
  assert_int_equal(PFClosureCheckError(c1), 0);
  assert_int_equal(PFClosureCheckError(c2), 0);
  assert_int_equal(PFClosureCheckError(c3), 0);
  PFObjectFree(c1);
  PFObjectFree(c2);
  PFObjectFree(c3);
  PFFuncFree(f);
}

static void test_echo_pointers(void** state) {
  (void)state;
  PFFunctionHandle f = packed(packed_echo, NULL, NULL);
  PFObjectHandle cs, cb, cp, ct, cf;
  const char* (*es)(const char*) = (const char* (*)(const char*))to_c(f, "str(str)", &cs);
  PFByteArray (*eby)(const PFByteArray*) =
      (PFByteArray(*)(const PFByteArray*))to_c(f, "bytes(bytes)", &cb);
  void* (*ep)(void*) = (void* (*)(void*))to_c(f, "ptr(ptr)", &cp);
  DLTensor* (*et)(DLTensor*) = (DLTensor * (*)(DLTensor*)) to_c(f, "tensor(tensor)", &ct);
  PFFunctionHandle (*efn)(PFFunctionHandle) =
      (PFFunctionHandle(*)(PFFunctionHandle))to_c(f, "func(func)", &cf);

  const char* s = es("hello");
  assert_int_equal(g_seen_codes[0], kPFStr);
  assert_string_equal(s, "hello");
  assert_null(es(NULL)); /* NULL -> null -> NULL */
  assert_int_equal(g_seen_codes[0], kPFNull);

  PFByteArray in = {"a\0bc", 4};
  PFByteArray out = eby(&in);
  assert_int_equal(g_seen_codes[0], kPFBytes);
  assert_int_equal(out.size, 4);
  assert_memory_equal(out.data, "a\0bc", 4);
  out = eby(NULL);
  assert_null(out.data);
  assert_int_equal(out.size, 0);
  PFByteArray bad = {NULL, 5};
  out = eby(&bad);
  assert_int_equal(out.size, 0);
  assert_pf_error(PFClosureCheckError(cb), "ValueError",
                  "argument 0: bytes of size 5 with NULL data");

  int x = 0;
  assert_ptr_equal(ep(&x), &x);
  assert_int_equal(g_seen_codes[0], kPFOpaqueHandle);
  assert_null(ep(NULL));

  int64_t shape[1] = {4};
  DLTensor t = {.data = NULL, .ndim = 1, .shape = shape, .dtype = {kDLFloat, 32, 1}};
  assert_ptr_equal(et(&t), &t);
  assert_int_equal(g_seen_codes[0], kPFDLTensorHandle);
  assert_null(et(NULL));

  /* A func result is a new reference for the C caller. */
  g_fin_runs = 0;
  PFFunctionHandle g = packed(packed_echo, NULL, count_fin);
  PFFunctionHandle r = efn(g);
  assert_int_equal(g_seen_codes[0], kPFFuncHandle);
  assert_ptr_equal(r, g);
  PFFuncFree(r);
  assert_null(efn(NULL));
  int not_a_func = 0;
  assert_null(efn(&not_a_func));
  assert_pf_error(PFClosureCheckError(cf), "TypeError",
                  "argument 0: expected func, got a pointer that is not a live function handle");
  PFFuncFree(g);
  assert_int_equal(g_fin_runs, 1);

  assert_int_equal(PFClosureCheckError(cs), 0);
  assert_int_equal(PFClosureCheckError(cp), 0);
  assert_int_equal(PFClosureCheckError(ct), 0);
  PFObjectFree(cs);
  PFObjectFree(cb);
  PFObjectFree(cp);
  PFObjectFree(ct);
  PFObjectFree(cf);
  PFFuncFree(f);
}

static void test_echo_dtype_device(void** state) {
  (void)state;
  PFFunctionHandle f = packed(packed_echo, NULL, NULL);
  PFObjectHandle c1, c2;
  DLDataType (*edt)(DLDataType) = (DLDataType(*)(DLDataType))to_c(f, "dtype(dtype)", &c1);
  DLDevice (*edv)(DLDevice) = (DLDevice(*)(DLDevice))to_c(f, "device(device)", &c2);
  DLDataType dt = edt((DLDataType){kDLBfloat, 16, 8});
  assert_int_equal(g_seen_codes[0], kPFDataType);
  assert_int_equal(dt.code, kDLBfloat);
  assert_int_equal(dt.bits, 16);
  assert_int_equal(dt.lanes, 8);
  DLDevice dv = edv((DLDevice){kDLCUDAHost, 9});
  assert_int_equal(g_seen_codes[0], kPFDevice);
  assert_int_equal(dv.device_type, kDLCUDAHost);
  assert_int_equal(dv.device_id, 9);
  assert_int_equal(PFClosureCheckError(c1), 0);
  assert_int_equal(PFClosureCheckError(c2), 0);
  PFObjectFree(c1);
  PFObjectFree(c2);
  PFFuncFree(f);
}

static void test_many_args_and_void(void** state) {
  (void)state;
  PFFunctionHandle f = packed(packed_sum, NULL, NULL);
  PFObjectHandle cl;
  double (*sum)(int8_t, float, double, uint16_t, bool, int64_t, int32_t, double) =
      (double (*)(int8_t, float, double, uint16_t, bool, int64_t, int32_t, double))to_c(
          f, "float64(int8,float32,float64,uint16,bool,int64,int32,float64)", &cl);
  assert_true(sum(-1, 0.5f, 0.25, 60000, true, -7, 100000, 1.0) ==
              -1 + 0.5 + 0.25 + 60000 + 1 - 7 + 100000 + 1.0);
  assert_int_equal(PFClosureCheckError(cl), 0);
  PFObjectFree(cl);
  PFFuncFree(f);

  f = packed(packed_echo, NULL, NULL);
  void (*v)(int32_t, double) = (void (*)(int32_t, double))to_c(f, "void(int32,float64)", &cl);
  g_seen_n = -1;
  v(3, 2.5);
  assert_int_equal(g_seen_n, 2);
  assert_int_equal(g_seen_codes[0], kPFInt);
  assert_int_equal(g_seen_codes[1], kPFFloat);
  assert_int_equal(PFClosureCheckError(cl), 0);
  PFObjectFree(cl);
  int64_t (*none)(void) = (int64_t(*)(void))to_c(f, "int64()", &cl);
  assert_true(none() == 0); /* echo of nothing is null: not an int64 */
  assert_pf_error(PFClosureCheckError(cl), "TypeError", "result: expected int64, got null");
  PFObjectFree(cl);
  PFFuncFree(f);
}

/* ---- result mismatches --------------------------------------------------- */

static void test_result_mismatch(void** state) {
  (void)state;
  fixed_result r = {kPFStr, {.v_str = "text"}};
  PFFunctionHandle f = packed(packed_fixed, &r, NULL);
  PFObjectHandle cl;
  int64_t (*geti)(void) = (int64_t(*)(void))to_c(f, "int64()", &cl);
  assert_true(geti() == 0);
  assert_pf_error(PFClosureCheckError(cl), "TypeError",
                  "C function pointer int64(): result: expected int64, got str");

  r.code = kPFInt;
  r.value.v_int64 = 5;
  assert_true(geti() == 5);
  PFObjectFree(cl);

  int8_t (*get8)(void) = (int8_t(*)(void))to_c(f, "int8()", &cl);
  r.value.v_int64 = 300;
  assert_int_equal(get8(), 0);
  assert_pf_error(PFClosureCheckError(cl), "ValueError", "result: expected int8, got int 300");
  PFObjectFree(cl);

  /* A float result for an int is a TypeError; an int for a float widens. */
  r.code = kPFFloat;
  r.value.v_float64 = 2.5;
  int32_t (*get32)(void) = (int32_t(*)(void))to_c(f, "int32()", &cl);
  assert_int_equal(get32(), 0);
  assert_pf_error(PFClosureCheckError(cl), "TypeError", "expected int32, got float");
  PFObjectFree(cl);
  r.code = kPFInt;
  r.value.v_int64 = 7;
  float (*getf)(void) = (float (*)(void))to_c(f, "float32()", &cl);
  assert_true(getf() == 7.0f);
  assert_int_equal(PFClosureCheckError(cl), 0);
  PFObjectFree(cl);

  /* A handle result for a non-func type: dropped, so nothing leaks. */
  g_fin_runs = 0;
  PFFunctionHandle g = packed(packed_echo, NULL, count_fin);
  r.code = kPFFuncHandle;
  r.value.v_handle = g;
  geti = (int64_t(*)(void))to_c(f, "int64()", &cl);
  assert_true(geti() == 0);
  assert_pf_error(PFClosureCheckError(cl), "TypeError", "expected int64, got function");
  PFObjectFree(cl);
  r.code = kPFNull; /* f must not hold g any more */
  PFFuncFree(g);
  assert_int_equal(g_fin_runs, 1);

  /* str result: null is NULL. */
  const char* (*gets)(void) = (const char* (*)(void))to_c(f, "str()", &cl);
  assert_null(gets());
  assert_int_equal(PFClosureCheckError(cl), 0);
  PFObjectFree(cl);
  PFFuncFree(f);
}

/* ---- errors that survive finalizers ----------------- */

/* A finalizer that calls entry points that fail (KeyError, ValueError). */
static int g_failing_fin_runs;
static void failing_fin(void* p) {
  (void)p;
  ++g_failing_fin_runs;
  PFFuncRemoveGlobal("closure.finalizer.no.such.name");
  PFErrorSetFormat(kPFErrValueError, "the finalizer's error");
  PFErrorAppendTraceback("  in the finalizer");
}

/* Returns a new boxed object whose finalizer fails; the return slot holds
 * its only reference. With res set, then fails with IndexError. */
static int packed_doomed(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  if (pf_test_return_boxed(ret, failing_fin) != 0) return -1;
  if (res == NULL) return 0;
  return PFErrorSetFormat(kPFErrIndexError, "the callee's own error");
}

static void test_finalizer_does_not_replace_kept_error(void** state) {
  (void)state;
  /* A result of the wrong type, dropped by the closure: its finalizer runs
   * after the TypeError is recorded. */
  g_failing_fin_runs = 0;
  PFFunctionHandle f = packed(packed_doomed, NULL, NULL);
  PFObjectHandle cl;
  int64_t (*geti)(void) = (int64_t(*)(void))to_c(f, "int64()", &cl);
  assert_true(geti() == 0);
  assert_int_equal(g_failing_fin_runs, 1);
  assert_pf_error(-1, "TypeError", "result: expected int64, got object"); /* the thread's */
  PFErrorClear();
  assert_pf_error(PFClosureCheckError(cl), "TypeError", "result: expected int64, got object");
  assert_null(strstr(PFErrorGetTraceback(), "finalizer"));
  PFObjectFree(cl);
  PFFuncFree(f);

  /* The callee fails after setting such a result: PFFuncCall drops it. */
  g_failing_fin_runs = 0;
  f = packed(packed_doomed, (void*)1, NULL);
  void (*run)(void) = (void (*)(void))to_c(f, "void()", &cl);
  run();
  assert_int_equal(g_failing_fin_runs, 1);
  assert_pf_error(-1, "IndexError", "the callee's own error");
  PFErrorClear();
  assert_pf_error(PFClosureCheckError(cl), "IndexError", "the callee's own error");
  assert_null(strstr(PFErrorGetTraceback(), "finalizer"));
  assert_non_null(strstr(PFErrorGetTraceback(), "C function pointer void()"));
  PFObjectFree(cl);
  PFFuncFree(f);
}

/* ---- sizes -------------------------------------------- */

static int packed_bytes_size(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || codes[0] != kPFBytes) return PFErrorSetFormat(kPFErrTypeError, "expected bytes");
  PFValue v = {.v_int64 = (int64_t)((const PFByteArray*)args[0].v_handle)->size};
  int c = kPFInt;
  return PFCFuncSetReturn(ret, &v, &c, 1);
}

static void test_bytes_argument_too_large(void** state) {
  (void)state;
  PFFunctionHandle f = packed(packed_bytes_size, NULL, NULL);
  PFObjectHandle cl;
  int64_t (*size_of)(const PFByteArray*) =
      (int64_t(*)(const PFByteArray*))to_c(f, "int64(bytes)", &cl);
  char data[4] = "abc";
  PFByteArray ok = {data, 3};
  assert_true(size_of(&ok) == 3);
  const size_t sizes[] = {SIZE_MAX, (size_t)PTRDIFF_MAX + 1};
  for (int i = 0; i < 2; ++i) {
    PFByteArray huge = {data, sizes[i]};
    assert_true(size_of(&huge) == 0);
    assert_pf_error(PFClosureCheckError(cl), "ValueError",
                    "C function pointer int64(bytes): argument 0: bytes of size",
                    "larger than any object can be");
  }
  /* The largest possible size passes through (the callee only reads it). */
  PFByteArray largest = {data, (size_t)PTRDIFF_MAX};
  assert_true(size_of(&largest) == PTRDIFF_MAX);
  assert_int_equal(PFClosureCheckError(cl), 0);
  PFObjectFree(cl);
  PFFuncFree(f);
}

/* ---- lifetime and misuse ------------------------------------------------- */

static void test_closure_owns_function(void** state) {
  (void)state;
  g_fin_runs = 0;
  PFFunctionHandle f = packed(packed_sum, NULL, count_fin);
  PFObjectHandle cl;
  double (*add)(double, double) =
      (double (*)(double, double))to_c(f, "float64(float64,float64)", &cl);
  PFFuncFree(f); /* the closure's reference keeps it alive */
  assert_int_equal(g_fin_runs, 0);
  assert_true(add(1.5, 2.0) == 3.5);
  assert_pf_ok(PFObjectRetain(cl));
  assert_pf_ok(PFObjectFree(cl));
  assert_int_equal(g_fin_runs, 0);
  assert_true(add(1.0, 2.0) == 3.0);
  assert_pf_ok(PFObjectFree(cl)); /* last reference: closure and function go */
  assert_int_equal(g_fin_runs, 1);
}

static void test_misuse(void** state) {
  (void)state;
  PFFunctionHandle f = packed(packed_echo, NULL, NULL);
  PFObjectHandle cl = (PFObjectHandle)0x1;
  void* fp = (void*)0x1;
  assert_pf_error(PFFuncToCFunction(NULL, "int64()", &cl, &fp), "TypeError",
                  "PFFuncToCFunction: argument 'func' is NULL");
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  assert_pf_error(PFFuncToCFunction(boxed, "int64()", &cl, &fp), "TypeError",
                  "argument 'func' is not a live function handle");
  assert_pf_error(PFFuncToCFunction(f, NULL, &cl, &fp), "TypeError",
                  "argument 'signature' is NULL");
  assert_pf_error(PFFuncToCFunction(f, "int64()", NULL, &fp), "TypeError",
                  "argument 'out_closure' is NULL");
  assert_pf_error(PFFuncToCFunction(f, "int64()", &cl, NULL), "TypeError",
                  "argument 'out_fn' is NULL");
  assert_pf_error(PFFuncToCFunction(f, "int64(int64", &cl, &fp), "ValueError",
                  "PFFuncToCFunction: bad signature \"int64(int64\" at position 11");
  assert_pf_error(PFFuncToCFunction(f, "int64(void)", &cl, &fp), "ValueError", "void is only");
  assert_ptr_equal(cl, (PFObjectHandle)0x1);
  assert_ptr_equal(fp, (void*)0x1);

  assert_pf_error(PFClosureCheckError(NULL), "TypeError",
                  "PFClosureCheckError: argument 'closure' is NULL");
  assert_pf_error(PFClosureCheckError(f), "TypeError", "is not a live closure handle");
  assert_pf_error(PFClosureCheckError(boxed), "TypeError", "is not a live closure handle");
  /* A clean check leaves the thread's error alone. */
  PFErrorSet("KeyError", "earlier");
  (void)to_c(f, "void()", &cl);
  assert_int_equal(PFClosureCheckError(cl), 0);
  assert_string_equal(PFErrorGetKind(), "KeyError");
  PFObjectFree(cl);
  PFObjectFree(boxed);
  PFFuncFree(f);
}

/* ---- threads ------------------------------------------------------------- */

typedef struct {
  int64_t (*fn)(int64_t, int64_t);
  int64_t sum;
} worker_arg;

static int packed_add2(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)codes;
  (void)n;
  (void)res;
  if (args[0].v_int64 < 0)
    return PFErrorSetFormat(kPFErrValueError, "negative %lld", (long long)args[0].v_int64);
  PFValue v = {.v_int64 = args[0].v_int64 + args[1].v_int64};
  int c = kPFInt;
  return PFCFuncSetReturn(ret, &v, &c, 1);
}

static void* worker(void* p) {
  worker_arg* w = p;
  for (int64_t i = 0; i < 2000; ++i) w->sum += w->fn(i, 1);
  return NULL;
}

static void* fail_once(void* p) {
  worker_arg* w = p;
  w->sum = w->fn(-4, 1);
  return NULL;
}

static void test_threads_share_a_pointer(void** state) {
  (void)state;
  PFFunctionHandle f = packed(packed_add2, NULL, NULL);
  PFObjectHandle cl;
  int64_t (*add)(int64_t, int64_t) =
      (int64_t(*)(int64_t, int64_t))to_c(f, "int64(int64,int64)", &cl);
  pthread_t th[2];
  worker_arg w[2] = {{add, 0}, {add, 0}};
  for (int i = 0; i < 2; ++i) assert_int_equal(pthread_create(&th[i], NULL, worker, &w[i]), 0);
  for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
  for (int i = 0; i < 2; ++i) assert_true(w[i].sum == 2000 * 1999 / 2 + 2000);
  assert_int_equal(PFClosureCheckError(cl), 0);
  /* A failure on one thread is collected on another. */
  worker_arg bad = {add, 0};
  assert_int_equal(pthread_create(&th[0], NULL, fail_once, &bad), 0);
  pthread_join(th[0], NULL);
  assert_true(bad.sum == 0);
  PFErrorClear();
  assert_pf_error(PFClosureCheckError(cl), "ValueError", "negative -4");
  PFObjectFree(cl);
  PFFuncFree(f);
}

/* ---- many threads failing at once keep one error --------------------------- */

typedef struct {
  int64_t (*fn)(int64_t, int64_t);
  int rounds;
} racer_arg;

static void* racer(void* p) {
  racer_arg* r = p;
  for (int i = 0; i < r->rounds; ++i) (void)r->fn(-(int64_t)i - 1, 0);
  return NULL;
}

static void test_concurrent_failures_keep_one_error(void** state) {
  (void)state;
  PFFunctionHandle f = packed(packed_add2, NULL, NULL);
  PFObjectHandle cl;
  int64_t (*add)(int64_t, int64_t) =
      (int64_t(*)(int64_t, int64_t))to_c(f, "int64(int64,int64)", &cl);
  enum { N = 4 };
  pthread_t th[N];
  racer_arg r = {add, 200};
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < N; ++i) assert_int_equal(pthread_create(&th[i], NULL, racer, &r), 0);
    for (int i = 0; i < N; ++i) pthread_join(th[i], NULL);
    assert_pf_error(PFClosureCheckError(cl), "ValueError", "negative");
    assert_int_equal(PFClosureCheckError(cl), 0);
  }
  /* A kept error left uncollected is freed with the closure (LSan checks). */
  assert_true(add(-1, 0) == 0);
  PFObjectFree(cl);
  PFFuncFree(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_qsort_with_packed_comparator),
      cmocka_unit_test(test_qsort_with_typed_comparator),
      cmocka_unit_test(test_qsort_comparator_fails),
      cmocka_unit_test(test_first_error_is_kept),
      cmocka_unit_test(test_echo_integers),
      cmocka_unit_test(test_echo_floats_bool),
      cmocka_unit_test(test_echo_pointers),
      cmocka_unit_test(test_echo_dtype_device),
      cmocka_unit_test(test_many_args_and_void),
      cmocka_unit_test(test_result_mismatch),
      cmocka_unit_test(test_closure_owns_function),
      cmocka_unit_test(test_misuse),
      cmocka_unit_test(test_threads_share_a_pointer),
      cmocka_unit_test(test_finalizer_does_not_replace_kept_error),
      cmocka_unit_test(test_bytes_argument_too_large),
      cmocka_unit_test(test_concurrent_failures_keep_one_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
