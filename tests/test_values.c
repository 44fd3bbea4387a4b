/* Values of every type code through PFFuncCall and PFCFuncSetReturn. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/pf_test.h"

/* ---- helpers ---------------------------------------------------------- */

static PFFunctionHandle make(PFPackedCFunc fn, void* resource) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, resource, NULL, &f));
  return f;
}

/* Calls `f` with one argument and returns the result through rv/rc. */
static void call1(PFFunctionHandle f, PFValue v, int code, PFValue* rv, int* rc) {
  *rc = -12345;
  assert_pf_ok(PFFuncCall(f, &v, &code, 1, rv, rc));
}

static PFValue echo1(PFValue v, int code, int expected_code) {
  PFFunctionHandle f = make(pf_test_echo, NULL);
  PFValue rv;
  int rc;
  call1(f, v, code, &rv, &rc);
  assert_int_equal(rc, expected_code);
  assert_pf_ok(PFFuncFree(f));
  return rv;
}

/* ---- plain values ----------------------------------------------------- */

static void test_ints(void** state) {
  (void)state;
  const int64_t cases[] = {0, 1, -1, 42, INT64_MIN, INT64_MAX, INT64_MIN + 1, INT32_MAX + 1LL};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    PFValue rv = echo1((PFValue){.v_int64 = cases[i]}, kPFInt, kPFInt);
    assert_true(rv.v_int64 == cases[i]);
  }
}

static void test_floats(void** state) {
  (void)state;
  PFValue rv = echo1((PFValue){.v_float64 = 1.5}, kPFFloat, kPFFloat);
  assert_true(rv.v_float64 == 1.5);
  rv = echo1((PFValue){.v_float64 = NAN}, kPFFloat, kPFFloat);
  assert_true(isnan(rv.v_float64));
  rv = echo1((PFValue){.v_float64 = -0.0}, kPFFloat, kPFFloat);
  assert_true(rv.v_float64 == 0.0);
  assert_true(signbit(rv.v_float64));
  rv = echo1((PFValue){.v_float64 = INFINITY}, kPFFloat, kPFFloat);
  assert_true(isinf(rv.v_float64) && rv.v_float64 > 0);
  rv = echo1((PFValue){.v_float64 = -INFINITY}, kPFFloat, kPFFloat);
  assert_true(isinf(rv.v_float64) && rv.v_float64 < 0);
  rv = echo1((PFValue){.v_float64 = DBL_TRUE_MIN}, kPFFloat, kPFFloat);
  assert_true(rv.v_float64 == DBL_TRUE_MIN);
  rv = echo1((PFValue){.v_float64 = DBL_MAX}, kPFFloat, kPFFloat);
  assert_true(rv.v_float64 == DBL_MAX);
}

static void test_bools_and_null(void** state) {
  (void)state;
  assert_int_equal(echo1((PFValue){.v_int64 = 1}, kPFBool, kPFBool).v_int64, 1);
  assert_int_equal(echo1((PFValue){.v_int64 = 0}, kPFBool, kPFBool).v_int64, 0);
  /* The union's bits are ignored under kPFNull: any pattern is accepted. */
  echo1((PFValue){.v_int64 = 0x7777}, kPFNull, kPFNull);
}

static void test_opaque_handle(void** state) {
  (void)state;
  int local = 7;
  PFValue rv = echo1((PFValue){.v_handle = &local}, kPFOpaqueHandle, kPFOpaqueHandle);
  assert_ptr_equal(rv.v_handle, &local);
  /* The runtime never dereferences an opaque handle: NULL and junk pass. */
  rv = echo1((PFValue){.v_handle = NULL}, kPFOpaqueHandle, kPFOpaqueHandle);
  assert_null(rv.v_handle);
  rv = echo1((PFValue){.v_handle = (void*)(uintptr_t)0x10}, kPFOpaqueHandle, kPFOpaqueHandle);
  assert_ptr_equal(rv.v_handle, (void*)(uintptr_t)0x10);
}

static void test_dtype_and_device(void** state) {
  (void)state;
  DLDataType t = {.code = kDLFloat, .bits = 16, .lanes = 4};
  PFValue rv = echo1((PFValue){.v_type = t}, kPFDataType, kPFDataType);
  assert_int_equal(rv.v_type.code, kDLFloat);
  assert_int_equal(rv.v_type.bits, 16);
  assert_int_equal(rv.v_type.lanes, 4);
  DLDevice d = {.device_type = kDLCUDA, .device_id = 3};
  rv = echo1((PFValue){.v_device = d}, kPFDevice, kPFDevice);
  assert_int_equal(rv.v_device.device_type, kDLCUDA);
  assert_int_equal(rv.v_device.device_id, 3);
}

/* ---- every code in one call ------------------------------------------- */

typedef struct {
  int calls;
  int num_args;
  int codes[16];
  PFValue values[16];
} seen_t;

static int inspect(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* resource) {
  seen_t* seen = resource;
  (void)ret;
  seen->calls++;
  seen->num_args = n;
  for (int i = 0; i < n && i < 16; ++i) {
    seen->codes[i] = codes[i];
    seen->values[i] = args[i];
  }
  return 0;
}

static void test_every_code_reaches_callee(void** state) {
  (void)state;
  seen_t seen = {0};
  PFFunctionHandle f = make(inspect, &seen);
  PFFunctionHandle other = make(pf_test_echo, NULL);
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&seen, NULL, &boxed));
  float data[2] = {1, 2};
  int64_t shape[1] = {2};
  DLTensor tensor = {
      .data = data, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = shape};
  PFByteArray bytes = {.data = "a\0b", .size = 3};
  int marker;
  PFValue args[14] = {{.v_int64 = 0}}; /* all 8 bytes defined: compared below */
  int codes[14];
  int n = 0;
  args[n].v_int64 = -9;
  codes[n++] = kPFInt;
  args[n].v_float64 = 2.25;
  codes[n++] = kPFFloat;
  args[n].v_int64 = 1;
  codes[n++] = kPFBool;
  args[n].v_int64 = 0;
  codes[n++] = kPFNull;
  args[n].v_handle = &marker;
  codes[n++] = kPFOpaqueHandle;
  args[n].v_type = (DLDataType){kDLInt, 8, 1};
  codes[n++] = kPFDataType;
  args[n].v_device = (DLDevice){kDLCPU, 5};
  codes[n++] = kPFDevice;
  args[n].v_handle = &tensor;
  codes[n++] = kPFDLTensorHandle;
  args[n].v_str = "text";
  codes[n++] = kPFStr;
  args[n].v_handle = &bytes;
  codes[n++] = kPFBytes;
  args[n].v_handle = other;
  codes[n++] = kPFFuncHandle;
  args[n].v_handle = boxed;
  codes[n++] = kPFObjectHandle;
  args[n].v_int64 = 0x0123456789abcdefLL;
  codes[n++] = kPFExtBegin + 1;
  PFValue rv;
  int rc = -1;
  assert_pf_ok(PFFuncCall(f, args, codes, n, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  assert_int_equal(seen.calls, 1);
  assert_int_equal(seen.num_args, n);
  for (int i = 0; i < n; ++i) {
    assert_int_equal(seen.codes[i], codes[i]);
    /* Arguments are borrowed, not copied: the callee sees the same bits,
     * so the same pointers for strings, bytes, tensors and handles. */
    assert_memory_equal(&seen.values[i], &args[i], sizeof(PFValue));
  }
  assert_pf_ok(PFObjectFree(boxed));
  assert_pf_ok(PFFuncFree(other));
  assert_pf_ok(PFFuncFree(f));
}

/* ---- tensors (borrowed DLTensor*) ------------------------------------- */

static int tensor_sum(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* resource) {
  DLTensor** seen = resource;
  if (n != 1 || codes[0] != kPFDLTensorHandle)
    return PFErrorSetFormat(kPFErrTypeError, "tensor_sum: want one tensor");
  DLTensor* t = args[0].v_handle;
  *seen = t;
  double sum = 0;
  for (int64_t i = 0; i < t->shape[0]; ++i) sum += ((float*)t->data)[i];
  PFValue v = {.v_float64 = sum};
  int code = kPFFloat;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_dltensor_pointer(void** state) {
  (void)state;
  float data[4] = {1, 2, 3, 4.5f};
  int64_t shape[1] = {4};
  DLTensor t = {
      .data = data, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = shape};
  DLTensor* seen = NULL;
  PFFunctionHandle f = make(tensor_sum, &seen);
  PFValue rv;
  int rc;
  call1(f, (PFValue){.v_handle = &t}, kPFDLTensorHandle, &rv, &rc);
  assert_ptr_equal(seen, &t);
  assert_int_equal(rc, kPFFloat);
  assert_true(rv.v_float64 == 10.5);
  assert_pf_ok(PFFuncFree(f));
  /* Returned through the echo: the same pointer back. */
  rv = echo1((PFValue){.v_handle = &t}, kPFDLTensorHandle, kPFDLTensorHandle);
  assert_ptr_equal(rv.v_handle, &t);
}

/* ---- strings ---------------------------------------------------------- */

/* Returns a string of `resource` bytes ('a' + i % 26) built in a heap
 * buffer that it scribbles over and frees before returning. */
static int make_string(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* resource) {
  (void)args;
  (void)codes;
  (void)n;
  size_t len = (size_t)(uintptr_t)resource;
  char* buf = malloc(len + 1);
  if (buf == NULL) return PFErrorSetFormat(kPFErrMemoryError, "make_string");
  for (size_t i = 0; i < len; ++i) buf[i] = (char)('a' + i % 26);
  buf[len] = '\0';
  PFValue v = {.v_str = buf};
  int code = kPFStr;
  int st = PFCFuncSetReturn(ret, &v, &code, 1);
  memset(buf, 'X', len);
  free(buf);
  return st;
}

static void check_pattern(const char* s, size_t len) {
  assert_non_null(s);
  assert_int_equal(strlen(s), len);
  for (size_t i = 0; i < len; ++i) {
    if (s[i] != (char)('a' + i % 26)) fail_msg("byte %zu is '%c'", i, s[i]);
  }
}

static void test_strings_are_copied(void** state) {
  (void)state;
  const size_t lens[] = {0, 1, 5, 62, 63, 64, 65, 200, 5000};
  for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); ++i) {
    PFFunctionHandle f = make(make_string, (void*)(uintptr_t)lens[i]);
    PFValue rv;
    int rc = -1;
    assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
    assert_int_equal(rc, kPFStr);
    check_pattern(rv.v_str, lens[i]);
    /* Still valid after other, non-packedfunc work and after freeing f. */
    void* junk = malloc(lens[i] + 1);
    memset(junk, 'Y', lens[i] + 1);
    free(junk);
    assert_pf_ok(PFFuncFree(f));
    check_pattern(rv.v_str, lens[i]);
  }
}

static void test_string_echo(void** state) {
  (void)state;
  char arg[100];
  snprintf(arg, sizeof(arg), "%s", "hello, packed world");
  PFValue rv = echo1((PFValue){.v_str = arg}, kPFStr, kPFStr);
  assert_ptr_not_equal(rv.v_str, arg); /* a copy, not the argument */
  arg[0] = 'J';
  assert_string_equal(rv.v_str, "hello, packed world");
}

/* Depth-1 helper for the nested test: returns a long string that differs
 * from anything the outer call holds. */
static int long_noise(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* resource) {
  (void)args;
  (void)codes;
  (void)n;
  (void)resource;
  char buf[300];
  memset(buf, 'Z', sizeof(buf) - 1);
  buf[sizeof(buf) - 1] = '\0';
  PFValue v = {.v_str = buf};
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* Receives a string, makes nested calls that return strings, then checks
 * that its argument is intact and returns it. */
static int nested_user(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* resource) {
  PFFunctionHandle noise = resource;
  if (n != 1 || codes[0] != kPFStr)
    return PFErrorSetFormat(kPFErrTypeError, "nested_user: want one string");
  char expected[300];
  snprintf(expected, sizeof(expected), "%s", args[0].v_str);
  for (int i = 0; i < 3; ++i) {
    PFValue rv;
    int rc;
    if (PFFuncCall(noise, NULL, NULL, 0, &rv, &rc) != 0) return -1;
    if (rc != kPFStr || rv.v_str[0] != 'Z')
      return PFErrorSetFormat(kPFErrValueError, "nested_user: bad nested result");
  }
  if (strcmp(expected, args[0].v_str) != 0)
    return PFErrorSetFormat(kPFErrValueError, "nested_user: argument changed to '%.40s'",
                            args[0].v_str);
  return PFCFuncSetReturn(ret, &args[0], &codes[0], 1);
}

static void test_string_result_as_argument_survives_nested_calls(void** state) {
  (void)state;
  PFFunctionHandle noise = make(long_noise, NULL);
  PFFunctionHandle user = make(nested_user, noise);
  const size_t lens[] = {10, 150};
  for (size_t i = 0; i < 2; ++i) {
    PFFunctionHandle src = make(make_string, (void*)(uintptr_t)lens[i]);
    PFValue s;
    int rc;
    assert_pf_ok(PFFuncCall(src, NULL, NULL, 0, &s, &rc));
    assert_int_equal(rc, kPFStr);
    PFValue out;
    call1(user, s, kPFStr, &out, &rc);
    assert_int_equal(rc, kPFStr);
    check_pattern(out.v_str, lens[i]);
    assert_pf_ok(PFFuncFree(src));
  }
  assert_pf_ok(PFFuncFree(user));
  assert_pf_ok(PFFuncFree(noise));
}

/* ---- bytes ------------------------------------------------------------ */

static int bytes_check(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* resource) {
  const PFByteArray* want = resource;
  if (n != 1 || codes[0] != kPFBytes)
    return PFErrorSetFormat(kPFErrTypeError, "bytes_check: want one bytes");
  const PFByteArray* got = args[0].v_handle;
  if (got != want) return PFErrorSetFormat(kPFErrValueError, "bytes_check: not the same array");
  return PFCFuncSetReturn(ret, &args[0], &codes[0], 1);
}

static void test_bytes(void** state) {
  (void)state;
  static const char nul_data[] = {'a', '\0', 'b', '\0', '\0', 'c'};
  char big[1000];
  for (size_t i = 0; i < sizeof(big); ++i) big[i] = (char)(i * 7);
  PFByteArray cases[] = {{nul_data, sizeof(nul_data)}, {"", 0}, {NULL, 0}, {big, sizeof(big)}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    PFFunctionHandle f = make(bytes_check, &cases[i]);
    PFValue rv;
    int rc;
    call1(f, (PFValue){.v_handle = &cases[i]}, kPFBytes, &rv, &rc);
    assert_int_equal(rc, kPFBytes);
    const PFByteArray* out = rv.v_handle;
    assert_non_null(out);
    assert_ptr_not_equal(out, &cases[i]);
    assert_int_equal(out->size, cases[i].size);
    assert_non_null(out->data);
    if (cases[i].size) {
      assert_ptr_not_equal(out->data, cases[i].data);
      assert_memory_equal(out->data, cases[i].data, cases[i].size);
    }
    assert_pf_ok(PFFuncFree(f));
  }
}

/* ---- sizes beyond any object ------------------------ */

typedef struct {
  size_t size;
  int status;
  char kind[PF_ERROR_KIND_MAX];
  char msg[256];
} big_return;

/* Sets an int result, then tries a bytes result of res->size bytes (its
 * data a small buffer: the size is a lie that must be caught before the
 * copy reads it) and records what PFCFuncSetReturn said. */
static int set_big_bytes(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  big_return* b = res;
  PFValue v = {.v_int64 = 5};
  int code = kPFInt;
  if (PFCFuncSetReturn(ret, &v, &code, 1) != 0) return -1;
  static char data[16] = "small";
  PFByteArray ba = {data, b->size};
  v.v_handle = &ba;
  code = kPFBytes;
  b->status = PFCFuncSetReturn(ret, &v, &code, 1);
  snprintf(b->kind, sizeof(b->kind), "%s", PFErrorGetKind());
  snprintf(b->msg, sizeof(b->msg), "%s", PFErrorGetMessage());
  return 0;
}

static void test_bytes_return_too_large(void** state) {
  (void)state;
  const struct {
    size_t size;
    const char* kind;
    const char* text;
  } cases[] = {
      {SIZE_MAX, kPFErrValueError, "larger than any object can be"},
      {SIZE_MAX - 1, kPFErrValueError, "larger than any object can be"},
      {(size_t)PTRDIFF_MAX + 1, kPFErrValueError, "larger than any object can be"},
      /* Possible in principle, but its copy (size + 1 bytes) is not. */
      {(size_t)PTRDIFF_MAX, kPFErrMemoryError, "out of memory"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    big_return b = {cases[i].size, 0, "", ""};
    PFFunctionHandle f = make(set_big_bytes, &b);
    PFValue rv;
    int rc;
    assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
    /* The call's result is the one set before. */
    assert_int_equal(rc, kPFInt);
    assert_int_equal(rv.v_int64, 5);
    assert_int_equal(b.status, -1);
    assert_string_equal(b.kind, cases[i].kind);
    if (strstr(b.msg, cases[i].text) == NULL)
      fail_msg("message '%s' lacks '%s'", b.msg, cases[i].text);
    if (cases[i].kind[0] == 'V') {
      char expect[96];
      snprintf(expect, sizeof(expect), "PFCFuncSetReturn: return value 0 is bytes of size %zu",
               cases[i].size);
      if (strstr(b.msg, expect) == NULL) fail_msg("message '%s' lacks '%s'", b.msg, expect);
    }
    assert_pf_ok(PFFuncFree(f));
  }
}

static int count_calls(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  ++*(int*)res;
  return 0;
}

static void test_bytes_argument_too_large(void** state) {
  (void)state;
  int calls = 0;
  PFFunctionHandle f = make(count_calls, &calls);
  char data[4] = "abc";
  PFByteArray ok = {data, 3}, huge = {data, SIZE_MAX};
  PFValue args[2] = {{.v_handle = &ok}, {.v_handle = &huge}}, rv;
  int codes[2] = {kPFBytes, kPFBytes}, rc;
  assert_pf_error(PFFuncCall(f, args, codes, 2, &rv, &rc), kPFErrValueError,
                  "PFFuncCall: argument 1 is bytes of size 18446744073709551615",
                  "larger than any object can be");
  assert_int_equal(calls, 0);
  huge.size = (size_t)PTRDIFF_MAX; /* the largest possible size passes */
  assert_pf_ok(PFFuncCall(f, args, codes, 2, &rv, &rc));
  assert_int_equal(calls, 1);
  assert_pf_ok(PFFuncFree(f));
}

/* ---- handles returned as new references -------------------------------- */

/* Creates a fresh counted function, returns it, drops its own reference. */
static int make_func(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* resource) {
  (void)args;
  (void)codes;
  (void)n;
  PFFunctionHandle counted = NULL;
  if (PFFuncCreateFromCFunc(pf_test_echo, resource, pf_test_count_fin, &counted) != 0) return -1;
  PFValue v = {.v_handle = counted};
  int code = kPFFuncHandle;
  int st = PFCFuncSetReturn(ret, &v, &code, 1);
  PFFuncFree(counted);
  return st;
}

static void test_function_returned_is_new_reference(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle maker = make(make_func, &fins);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(maker, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFFuncHandle);
  assert_int_equal(atomic_load(&fins), 0); /* the caller's reference holds it */
  PFValue arg = {.v_int64 = 5}, out;
  int code = kPFInt, out_code;
  assert_pf_ok(PFFuncCall(rv.v_handle, &arg, &code, 1, &out, &out_code));
  assert_int_equal(out_code, kPFInt);
  assert_int_equal(out.v_int64, 5);
  assert_pf_ok(PFFuncFree(rv.v_handle));
  assert_int_equal(atomic_load(&fins), 1);
  assert_pf_ok(PFFuncFree(maker));
}

static void test_function_echo_adds_reference(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle g = pf_test_make_counted(pf_test_echo, &fins);
  assert_non_null(g);
  PFValue rv = echo1((PFValue){.v_handle = g}, kPFFuncHandle, kPFFuncHandle);
  assert_ptr_equal(rv.v_handle, g);
  assert_pf_ok(PFFuncFree(g));
  assert_int_equal(atomic_load(&fins), 0);
  assert_pf_ok(PFFuncFree(rv.v_handle));
  assert_int_equal(atomic_load(&fins), 1);
}

static void test_module_code_rejects_non_module(void** state) {
  (void)state;
  PFFunctionHandle f = make(pf_test_echo, NULL);
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  PFValue rv;
  int rc;
  PFValue v = {.v_handle = f};
  int code = kPFModuleHandle;
  assert_pf_error(PFFuncCall(f, &v, &code, 1, &rv, &rc), kPFErrTypeError, "PFFuncCall",
                  "argument 0", "module");
  v.v_handle = boxed;
  assert_pf_error(PFFuncCall(f, &v, &code, 1, &rv, &rc), kPFErrTypeError, "PFFuncCall",
                  "argument 0", "module");
  assert_pf_ok(PFObjectFree(boxed));
  assert_pf_ok(PFFuncFree(f));
}

/* Tries to return its argument under kPFModuleHandle. */
static int return_as_module(PFValue* args, int* codes, int n, PFRetValueHandle ret,
                            void* resource) {
  (void)codes;
  (void)n;
  (void)resource;
  int code = kPFModuleHandle;
  return PFCFuncSetReturn(ret, &args[0], &code, 1);
}

static void test_module_return_rejects_non_module(void** state) {
  (void)state;
  PFFunctionHandle f = make(return_as_module, NULL);
  PFValue rv, v = {.v_handle = f};
  int rc, code = kPFObjectHandle;
  assert_pf_error(PFFuncCall(f, &v, &code, 1, &rv, &rc), kPFErrTypeError, "PFCFuncSetReturn",
                  "return value", "module");
  assert_pf_ok(PFFuncFree(f));
}

/* ---- object handles: boxed and tensor --------------------------------- */

static void test_boxed_object_round_trip(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&fins, pf_test_count_fin, &boxed));
  PFValue rv = echo1((PFValue){.v_handle = boxed}, kPFObjectHandle, kPFObjectHandle);
  assert_ptr_equal(rv.v_handle, boxed);
  void* payload = NULL;
  assert_pf_ok(PFObjectGetBoxedPayload(rv.v_handle, &payload));
  assert_ptr_equal(payload, &fins);
  assert_pf_ok(PFObjectFree(boxed));
  assert_int_equal(atomic_load(&fins), 0);
  assert_pf_ok(PFObjectFree(rv.v_handle));
  assert_int_equal(atomic_load(&fins), 1);
}

static atomic_int g_tensor_deleted;
static void count_deleter(DLManagedTensor* m) {
  (void)m;
  atomic_fetch_add(&g_tensor_deleted, 1);
}

/* Reads a tensor object's DLTensor and returns its first element. */
static int tensor_object_first(PFValue* args, int* codes, int n, PFRetValueHandle ret,
                               void* resource) {
  (void)resource;
  uint32_t ti = 0;
  DLTensor* t = NULL;
  if (n != 1 || codes[0] != kPFObjectHandle)
    return PFErrorSetFormat(kPFErrTypeError, "tensor_object_first: want one object");
  if (PFObjectGetTypeIndex(args[0].v_handle, &ti) != 0) return -1;
  if (ti != kPFObjectTensor)
    return PFErrorSetFormat(kPFErrTypeError, "tensor_object_first: type %u", ti);
  if (PFTensorGetDLTensor(args[0].v_handle, &t) != 0) return -1;
  PFValue v = {.v_float64 = ((double*)t->data)[0]};
  int code = kPFFloat;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_tensor_object_round_trip(void** state) {
  (void)state;
  double data[3] = {6.5, 1, 2};
  int64_t shape[1] = {3};
  DLManagedTensor m = {.dl_tensor = {.data = data,
                                     .device = {kDLCPU, 0},
                                     .ndim = 1,
                                     .dtype = {kDLFloat, 64, 1},
                                     .shape = shape},
                       .deleter = count_deleter};
  atomic_store(&g_tensor_deleted, 0);
  PFObjectHandle tensor = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(&m, &tensor));
  PFFunctionHandle f = make(tensor_object_first, NULL);
  PFValue rv;
  int rc;
  call1(f, (PFValue){.v_handle = tensor}, kPFObjectHandle, &rv, &rc);
  assert_int_equal(rc, kPFFloat);
  assert_true(rv.v_float64 == 6.5);
  PFValue back = echo1((PFValue){.v_handle = tensor}, kPFObjectHandle, kPFObjectHandle);
  assert_ptr_equal(back.v_handle, tensor);
  assert_pf_ok(PFObjectFree(tensor));
  assert_int_equal(atomic_load(&g_tensor_deleted), 0);
  assert_pf_ok(PFObjectFree(back.v_handle));
  assert_int_equal(atomic_load(&g_tensor_deleted), 1);
  assert_pf_ok(PFFuncFree(f));
}

/* A function handle is an object too, so kPFObjectHandle accepts it. */
static void test_function_as_object_handle(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle g = pf_test_make_counted(pf_test_echo, &fins);
  PFValue rv = echo1((PFValue){.v_handle = g}, kPFObjectHandle, kPFObjectHandle);
  assert_ptr_equal(rv.v_handle, g);
  assert_pf_ok(PFObjectFree(rv.v_handle));
  assert_int_equal(atomic_load(&fins), 0);
  assert_pf_ok(PFFuncFree(g));
  assert_int_equal(atomic_load(&fins), 1);
}

/* ---- extension codes -------------------------------------------------- */

static void test_extension_codes_bit_for_bit(void** state) {
  (void)state;
  const int codes[] = {kPFExtBegin, kPFExtBegin + 1, 100, kPFExtEnd - 1};
  const uint64_t bits[] = {0, 0xdeadbeefcafebabeULL, UINT64_MAX, 0x8000000000000001ULL};
  for (size_t i = 0; i < 4; ++i) {
    for (size_t j = 0; j < 4; ++j) {
      PFValue v;
      memcpy(&v, &bits[j], sizeof(v));
      PFValue rv = echo1(v, codes[i], codes[i]);
      assert_memory_equal(&rv, &bits[j], sizeof(rv));
    }
  }
}

/* ---- setting a return twice, and not at all --------------------------- */

static int set_many(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* resource) {
  (void)args;
  (void)codes;
  (void)n;
  char long_a[200], long_b[300];
  memset(long_a, 'a', sizeof(long_a) - 1);
  long_a[sizeof(long_a) - 1] = '\0';
  memset(long_b, 'b', sizeof(long_b) - 1);
  long_b[sizeof(long_b) - 1] = '\0';
  PFValue v;
  int code;
  PFFunctionHandle g = NULL;
  if (PFFuncCreateFromCFunc(pf_test_echo, resource, pf_test_count_fin, &g) != 0) return -1;
  v.v_str = long_a, code = kPFStr;
  if (PFCFuncSetReturn(ret, &v, &code, 1) != 0) goto fail;
  v.v_str = long_b, code = kPFStr;
  if (PFCFuncSetReturn(ret, &v, &code, 1) != 0) goto fail;
  v.v_handle = g, code = kPFFuncHandle;
  if (PFCFuncSetReturn(ret, &v, &code, 1) != 0) goto fail;
  if (PFCFuncSetReturn(ret, &v, &code, 1) != 0) goto fail; /* the same handle again */
  PFByteArray b = {long_a, 150};
  v.v_handle = &b, code = kPFBytes;
  if (PFCFuncSetReturn(ret, &v, &code, 1) != 0) goto fail;
  PFFuncFree(g); /* the slot no longer holds g, so this is the last reference */
  v.v_str = "short", code = kPFStr;
  if (PFCFuncSetReturn(ret, &v, &code, 1) != 0) return -1;
  v.v_int64 = 99, code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
fail:
  PFFuncFree(g);
  return -1;
}

static void test_set_return_twice_replaces(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle f = make(set_many, &fins);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 99);
  assert_int_equal(atomic_load(&fins), 1);
  assert_pf_ok(PFFuncFree(f));
}

static int set_nothing(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* resource) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  (void)resource;
  return 0;
}

static void test_no_return_is_null(void** state) {
  (void)state;
  PFFunctionHandle f = make(set_nothing, NULL);
  PFValue rv = {.v_int64 = 5};
  int rc = kPFInt;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  /* The same through an echo given no arguments. */
  PFFunctionHandle e = make(pf_test_echo, NULL);
  rc = kPFStr;
  assert_pf_ok(PFFuncCall(e, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  assert_pf_ok(PFFuncFree(e));
  assert_pf_ok(PFFuncFree(f));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_ints),
      cmocka_unit_test(test_floats),
      cmocka_unit_test(test_bools_and_null),
      cmocka_unit_test(test_opaque_handle),
      cmocka_unit_test(test_dtype_and_device),
      cmocka_unit_test(test_every_code_reaches_callee),
      cmocka_unit_test(test_dltensor_pointer),
      cmocka_unit_test(test_strings_are_copied),
      cmocka_unit_test(test_string_echo),
      cmocka_unit_test(test_string_result_as_argument_survives_nested_calls),
      cmocka_unit_test(test_bytes),
      cmocka_unit_test(test_bytes_return_too_large),
      cmocka_unit_test(test_bytes_argument_too_large),
      cmocka_unit_test(test_function_returned_is_new_reference),
      cmocka_unit_test(test_function_echo_adds_reference),
      cmocka_unit_test(test_module_code_rejects_non_module),
      cmocka_unit_test(test_module_return_rejects_non_module),
      cmocka_unit_test(test_boxed_object_round_trip),
      cmocka_unit_test(test_tensor_object_round_trip),
      cmocka_unit_test(test_function_as_object_handle),
      cmocka_unit_test(test_extension_codes_bit_for_bit),
      cmocka_unit_test(test_set_return_twice_replaces),
      cmocka_unit_test(test_no_return_is_null),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
