/* Tensors for C code: constrained tensor parameters of typed functions and
 * C function pointers, PFArgGetTensor, PFTensorAlloc; and running out of
 * memory in everything this feature allocates (names, defaults, tables). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <string.h>

#include "support/pf_test.h"
#include "support/pf_fault.h"

static DLTensor make(void* data, int64_t* shape, int ndim, uint8_t code, uint8_t bits) {
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

static double sum1(const DLTensor* t) {
  const double* p = t->data;
  double s = 0;
  for (int64_t i = 0; i < t->shape[0]; ++i) s += p[i];
  return s;
}

static int call1(PFFunctionHandle f, PFValue v, int code, PFValue* rv, int* rc) {
  return PFFuncCall(f, &v, &code, 1, rv, rc);
}

/* A typed function's constrained parameter: what passes, and the refusals
 * that name the parameter, what it needs and what came. */
static void test_typed_constraints(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(
      PFFuncCreateFromTyped((void*)sum1, "float64(x: tensor<float64, 1, contiguous>)", &f));
  assert_pf_ok(PFFuncSetInfo(f, "sum1", NULL, NULL));
  double d[4] = {1, 2, 3, 4};
  int64_t n4 = 4, n22[2] = {2, 2}, s2 = 2;
  DLTensor t = make(d, &n4, 1, kDLFloat, 64);
  PFValue v = {.v_handle = &t}, rv;
  int rc;
  assert_pf_ok(call1(f, v, kPFDLTensorHandle, &rv, &rc));
  assert_true(rv.v_float64 == 10);
  /* Strides equal to the compact ones are contiguous. */
  int64_t one = 1;
  t.strides = &one;
  assert_pf_ok(call1(f, v, kPFDLTensorHandle, &rv, &rc));
  /* dtype: TypeError; rank, layout, device: ValueError. No place. */
  DLTensor ti = make(d, &n4, 1, kDLInt, 64);
  v.v_handle = &ti;
  assert_pf_error(call1(f, v, kPFDLTensorHandle, &rv, &rc), kPFErrTypeError,
                  "typed function 'sum1' float64(x:tensor<float64,1,contiguous>): argument 0 "
                  "'x': expected tensor<float64,1,contiguous>, got int64 tensor of rank 1");
  assert_string_equal(PFErrorGetTraceback(), "");
  DLTensor t2 = make(d, n22, 2, kDLFloat, 64);
  v.v_handle = &t2;
  assert_pf_error(
      call1(f, v, kPFDLTensorHandle, &rv, &rc), kPFErrValueError,
      "argument 0 'x': expected tensor<float64,1,contiguous>, got float64 tensor of rank 2");
  t.strides = &s2;
  t.shape = &s2;
  v.v_handle = &t;
  assert_pf_error(call1(f, v, kPFDLTensorHandle, &rv, &rc), kPFErrValueError,
                  "got float64 tensor of rank 1 that is not contiguous (strides [2])");
  t.strides = NULL;
  t.shape = &n4;
  t.device.device_type = kDLCUDA;
  assert_pf_ok(call1(f, v, kPFDLTensorHandle, &rv, &rc)); /* no device constraint */
  t.device.device_type = kDLCPU;
  /* Not a tensor: the constrained type named. */
  v.v_int64 = 3;
  assert_pf_error(call1(f, v, kPFInt, &rv, &rc), kPFErrTypeError,
                  "argument 0 'x': expected tensor<float64,1,contiguous>, got int");
  PFFuncFree(f);

  /* Device, lanes, and a tensor object; null is not checked. */
  assert_pf_ok(PFFuncCreateFromTyped((void*)sum1, "float64(tensor<*,*,*,cuda>)", &f));
  v.v_handle = &t;
  assert_pf_error(call1(f, v, kPFDLTensorHandle, &rv, &rc), kPFErrValueError,
                  "argument 0: expected tensor<*,*,*,cuda>, got float64 tensor of rank 1 on cpu:0");
  PFFuncFree(f);
  assert_pf_ok(PFFuncCreateFromTyped((void*)sum1, "float64(tensor<float64x2>)", &f));
  assert_pf_error(call1(f, v, kPFDLTensorHandle, &rv, &rc), kPFErrTypeError,
                  "expected tensor<float64x2>, got float64 tensor of rank 1");
  PFFuncFree(f);
  /* Any empty tensor is contiguous; dimensions of size 1 take any stride. */
  int64_t shp[3] = {2, 1, 3}, str[3] = {3, 99, 1}, z[2] = {0, 5}, zs[2] = {7, 7};
  DLTensor t3 = make(d, shp, 3, kDLFloat, 64);
  t3.strides = str;
  PFValue out[1];
  int oc[1];
  v.v_handle = &t3;
  DLTensor* got = NULL;
  assert_pf_ok(
      PFArgGetTensor(&v, (int[]){kPFDLTensorHandle}, 1, 0, "tensor<*,3,contiguous>", &got));
  DLTensor te = make(d, z, 2, kDLFloat, 64);
  te.strides = zs;
  v.v_handle = &te;
  assert_pf_ok(
      PFArgGetTensor(&v, (int[]){kPFDLTensorHandle}, 1, 0, "tensor<*,*,contiguous>", &got));
  (void)out, (void)oc;
}

static DLTensor* g_result;
static DLTensor* give_result(void) { return g_result; }

/* A constrained result of a typed function, and the arguments and result
 * of a C function pointer. */
static void test_results_and_closures(void** state) {
  (void)state;
  double d[2] = {1, 2};
  int64_t n2 = 2;
  DLTensor t = make(d, &n2, 1, kDLFloat, 64);
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)give_result, "tensor<float32>()", &f));
  g_result = &t;
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrTypeError,
                  "result: expected tensor<float32>, got float64 tensor of rank 1");
  g_result = NULL; /* NULL is null, unchecked */
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  PFFuncFree(f);

  /* A C function pointer whose tensor argument is constrained. */
  assert_pf_ok(PFFuncCreateFromTyped((void*)sum1, "float64(tensor)", &f));
  PFObjectHandle closure = NULL;
  void* fn = NULL;
  assert_pf_ok(PFFuncToCFunction(f, "float64(t: tensor<float64,1>)", &closure, &fn));
  double (*c)(DLTensor*) = (double (*)(DLTensor*))fn;
  assert_true(c(&t) == 3);
  DLTensor ti = make(d, &n2, 1, kDLInt, 32);
  assert_true(c(&ti) == 0);
  assert_pf_error(PFClosureCheckError(closure), kPFErrTypeError,
                  "argument 0 't': expected tensor<float64,1>, got int32 tensor of rank 1");
  PFObjectFree(closure);
  PFFuncFree(f);
}

/* PFArgGetTensor: both forms of a tensor argument, the same refusals. */
static void test_arg_get_tensor(void** state) {
  (void)state;
  float fl[6] = {0};
  int64_t shape[2] = {2, 3};
  DLTensor t = make(fl, shape, 2, kDLFloat, 32);
  PFObjectHandle obj = NULL;
  DLTensor* view = NULL;
  assert_pf_ok(PFTensorAlloc(2, shape, (DLDataType){kDLFloat, 32, 1}, 0, &obj, &view));
  PFValue args[4] = {{.v_handle = &t}, {.v_handle = obj}, {.v_int64 = 1}, {.v_handle = NULL}};
  int codes[4] = {kPFDLTensorHandle, kPFObjectHandle, kPFInt, kPFNull};
  DLTensor* out = NULL;
  assert_pf_ok(PFArgGetTensor(args, codes, 4, 0, NULL, &out));
  assert_ptr_equal(out, &t);
  assert_pf_ok(
      PFArgGetTensor(args, codes, 4, 1, " tensor < float32 , 2 , contiguous , cpu > ", &out));
  assert_ptr_equal(out, view);
  /* Refusals about the argument: no place. */
  out = (DLTensor*)(uintptr_t)1;
  assert_pf_error(PFArgGetTensor(args, codes, 4, 2, "tensor<float32>", &out), kPFErrTypeError,
                  "argument 2: expected tensor<float32>, got int");
  assert_string_equal(PFErrorGetTraceback(), "");
  assert_pf_error(PFArgGetTensor(args, codes, 4, 3, NULL, &out), kPFErrTypeError,
                  "argument 3: expected tensor, got null");
  assert_pf_error(PFArgGetTensor(args, codes, 4, 4, NULL, &out), kPFErrTypeError,
                  "argument 4: expected tensor, but the call has 4 arguments");
  assert_pf_error(PFArgGetTensor(args, codes, 4, 0, "tensor<float64>", &out), kPFErrTypeError,
                  "argument 0: expected tensor<float64>, got float32 tensor of rank 2");
  assert_pf_error(PFArgGetTensor(args, codes, 4, 1, "tensor<*,1>", &out), kPFErrValueError,
                  "argument 1: expected tensor<*,1>, got float32 tensor of rank 2");
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  args[2].v_handle = boxed;
  codes[2] = kPFObjectHandle;
  assert_pf_error(PFArgGetTensor(args, codes, 4, 2, NULL, &out), kPFErrTypeError,
                  "argument 2: expected tensor, got boxed object");
  PFObjectFree(boxed);
  assert_ptr_equal(out, (DLTensor*)(uintptr_t)1);
  /* Misuse: named, with a place. */
  assert_pf_error(PFArgGetTensor(args, codes, 4, 0, NULL, NULL), kPFErrTypeError,
                  "PFArgGetTensor: argument 'out' is NULL");
  assert_non_null(strstr(PFErrorGetTraceback(), "runtime/tensor.c"));
  assert_pf_error(PFArgGetTensor(args, codes, 4, -1, NULL, &out), kPFErrValueError,
                  "PFArgGetTensor: argument 'index' is negative (-1)");
  assert_pf_error(PFArgGetTensor(args, codes, -2, 0, NULL, &out), kPFErrValueError,
                  "'num_args' is negative (-2)");
  assert_pf_error(PFArgGetTensor(NULL, codes, 4, 0, NULL, &out), kPFErrTypeError,
                  "'args' is NULL with num_args 4");
  assert_pf_error(PFArgGetTensor(args, codes, 4, 0, "int64", &out), kPFErrValueError,
                  "PFArgGetTensor: bad type \"int64\" at position 0",
                  "a tensor type is tensor or tensor<...>, not int64");
  assert_pf_error(PFArgGetTensor(args, codes, 4, 0, "tensor<float64", &out), kPFErrValueError,
                  "at position 14", "expected ',' or '>'");
  assert_pf_error(PFArgGetTensor(args, codes, 4, 0, "tensor x", &out), kPFErrValueError,
                  "unexpected text after the type");
  /* A read-only tensor object is refused, as by a typed tensor parameter. */
  static int64_t rshape[1] = {1};
  static float rdata[1];
  static PFDLManagedTensorVersioned ro;
  memset(&ro, 0, sizeof(ro));
  ro.version.major = PF_DLPACK_MAJOR_VERSION;
  ro.flags = PF_DLPACK_FLAG_READ_ONLY;
  ro.dl_tensor = make(rdata, rshape, 1, kDLFloat, 32);
  PFObjectHandle rot = NULL;
  assert_pf_ok(PFTensorCreateFromDLPackVersioned(&ro, &rot));
  args[0].v_handle = rot;
  codes[0] = kPFObjectHandle;
  assert_pf_error(PFArgGetTensor(args, codes, 4, 0, NULL, &out), kPFErrTypeError,
                  "argument 0: expected tensor, got a read-only tensor object");
  PFObjectFree(rot);
  PFObjectFree(obj);
}

/* PFTensorAlloc: layout, alignment, zeroing, packed sub-byte sizes, and
 * every refusal. */
static void test_tensor_alloc(void** state) {
  (void)state;
  int64_t shape[3] = {2, 3, 5};
  PFObjectHandle obj = NULL;
  DLTensor* t = NULL;
  assert_pf_ok(
      PFTensorAlloc(3, shape, (DLDataType){kDLFloat, 64, 1}, kPFTensorAllocZero, &obj, &t));
  shape[0] = 99; /* the shape was copied */
  assert_int_equal(t->ndim, 3);
  assert_int_equal(t->shape[0], 2);
  assert_int_equal(t->shape[2], 5);
  assert_null(t->strides);
  assert_int_equal(t->byte_offset, 0);
  assert_int_equal(t->device.device_type, kDLCPU);
  assert_int_equal(t->device.device_id, 0);
  assert_int_equal((uintptr_t)t->data % PF_TENSOR_ALIGN, 0);
  for (int i = 0; i < 30; ++i) assert_true(((double*)t->data)[i] == 0.0);
  ((double*)t->data)[29] = 1; /* all of it is writable */
  DLTensor* same = NULL;
  assert_pf_ok(PFTensorGetDLTensor(obj, &same));
  assert_ptr_equal(same, t);
  int ro = 1;
  assert_pf_ok(PFTensorIsReadOnly(obj, &ro));
  assert_int_equal(ro, 0);
  /* It leaves as DLPack and stays alive while exported. */
  PFDLManagedTensorVersioned* ex = NULL;
  assert_pf_ok(PFTensorToDLPackVersioned(obj, &ex));
  PFObjectFree(obj);
  assert_true(((double*)ex->dl_tensor.data)[29] == 1);
  ex->deleter(ex);
  /* Scalars, empty tensors, sub-byte elements. */
  assert_pf_ok(PFTensorAlloc(0, NULL, (DLDataType){kDLInt, 32, 1}, 0, &obj, &t));
  assert_non_null(t->data);
  assert_int_equal((uintptr_t)t->data % PF_TENSOR_ALIGN, 0);
  PFObjectFree(obj);
  int64_t empty[2] = {0, 7};
  assert_pf_ok(PFTensorAlloc(2, empty, (DLDataType){kDLInt, 8, 1}, kPFTensorAllocZero, &obj, NULL));
  PFObjectFree(obj);
  int64_t three = 3;
  assert_pf_ok(PFTensorAlloc(1, &three, (DLDataType){kDLInt, 4, 1}, kPFTensorAllocZero, &obj, &t));
  int64_t cache_entries = 0;
  (void)cache_entries;
  PFObjectFree(obj);
  /* Refusals: nothing written. */
  obj = (PFObjectHandle)(uintptr_t)1;
  DLDataType f32 = {kDLFloat, 32, 1};
  assert_pf_error(PFTensorAlloc(1, &three, f32, 0, NULL, NULL), kPFErrTypeError,
                  "PFTensorAlloc: argument 'out' is NULL");
  assert_pf_error(PFTensorAlloc(1, NULL, f32, 0, &obj, NULL), kPFErrTypeError,
                  "'shape' is NULL with ndim 1");
  assert_pf_error(PFTensorAlloc(-1, &three, f32, 0, &obj, NULL), kPFErrValueError,
                  "argument 'ndim' is -1; a tensor has 0 to 64 dimensions");
  assert_pf_error(PFTensorAlloc(65, &three, f32, 0, &obj, NULL), kPFErrValueError, "'ndim' is 65");
  int64_t neg[2] = {2, -1};
  assert_pf_error(PFTensorAlloc(2, neg, f32, 0, &obj, NULL), kPFErrValueError,
                  "argument 'shape[1]' is negative (-1)");
  assert_pf_error(PFTensorAlloc(1, &three, (DLDataType){kDLFloat, 0, 1}, 0, &obj, NULL),
                  kPFErrValueError, "'dtype' has 0 bits and 1 lanes");
  assert_pf_error(PFTensorAlloc(1, &three, (DLDataType){kDLFloat, 32, 0}, 0, &obj, NULL),
                  kPFErrValueError, "'dtype' has 32 bits and 0 lanes");
  assert_pf_error(PFTensorAlloc(1, &three, f32, 6, &obj, NULL), kPFErrValueError,
                  "argument 'flags' has unknown bits 0x6");
  int64_t huge[2] = {INT64_MAX, INT64_MAX}, big[1] = {INT64_MAX / 4};
  assert_pf_error(PFTensorAlloc(2, huge, f32, 0, &obj, NULL), kPFErrValueError,
                  "larger than any object can be");
  assert_pf_error(PFTensorAlloc(1, big, f32, 0, &obj, NULL), kPFErrValueError,
                  "larger than any object can be");
  assert_ptr_equal(obj, (PFObjectHandle)(uintptr_t)1);
}

/* What a packed function does with both: a tensor in, a new one out. */
static int doubled(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  DLTensor* x = NULL;
  if (PFArgGetTensor(args, codes, n, 0, "tensor<float64,1,contiguous>", &x) != 0) return -1;
  PFObjectHandle y = NULL;
  DLTensor* yv = NULL;
  if (PFTensorAlloc(1, x->shape, x->dtype, 0, &y, &yv) != 0) return -1;
  const double* src = (const double*)(const void*)((const char*)x->data + x->byte_offset);
  for (int64_t i = 0; i < x->shape[0]; ++i) ((double*)yv->data)[i] = 2 * src[i];
  PFValue v = {.v_handle = y};
  int code = kPFObjectHandle;
  int rc = PFCFuncSetReturn(ret, &v, &code, 1);
  PFObjectFree(y);
  return rc;
}

static void test_packed_tensor_in_and_out(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(doubled, NULL, NULL, &f));
  double d[3] = {1, 2, 3};
  int64_t n3 = 3;
  DLTensor t = make(d, &n3, 1, kDLFloat, 64);
  PFValue v = {.v_handle = &t}, rv;
  int code = kPFDLTensorHandle, rc;
  assert_pf_ok(PFFuncCall(f, &v, &code, 1, &rv, &rc));
  assert_int_equal(rc, kPFObjectHandle);
  DLTensor* y = NULL;
  assert_pf_ok(PFTensorGetDLTensor(rv.v_handle, &y));
  assert_true(((double*)y->data)[2] == 6);
  /* Its result, a tensor object, goes in again. */
  v.v_handle = rv.v_handle;
  code = kPFObjectHandle;
  PFValue rv2;
  assert_pf_ok(PFFuncCall(f, &v, &code, 1, &rv2, &rc));
  assert_pf_ok(PFTensorGetDLTensor(rv2.v_handle, &y));
  assert_true(((double*)y->data)[2] == 12);
  PFObjectFree(rv2.v_handle);
  PFObjectFree(rv.v_handle);
  PFFuncFree(f);
}

/* ---- running out of memory ---- */

static double clamp3(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

static int fault_work(void) {
  int rc = 0;
  PFSignatureInfo* info = NULL;
  PFFunctionHandle f = NULL, p = NULL, b = NULL;
  PFObjectHandle t = NULL;
  PFValue a = {.v_float64 = 3}, rv;
  int c = kPFFloat, code;
  int64_t shape[2] = {3, 4};
  const char* hi = "hi";
  PFValue kw = {.v_float64 = 2};
  if ((rc = PFSignatureParse("str(s: str = \"x\\ny\", b: bytes = b\"\\x00\", d: dtype = \"f16\", "
                             "t: tensor<float32,2,contiguous> = null, f: float32 = 0.1)",
                             &info)) != 0)
    goto out;
  if ((rc = PFFuncCreateFromTyped((void*)clamp3,
                                  "float64(x: float64, lo: float64 = 0, "
                                  "hi: float64 = 1)",
                                  &f)) != 0)
    goto out;
  if ((rc = PFFuncCallKw(f, &a, &c, 1, &hi, &kw, &c, 1, &rv, &code)) != 0) goto out;
  if (rv.v_float64 != 2) return PFErrorSetFormat(kPFErrRuntimeError, "wrong result");
  if ((rc = PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &p)) != 0) goto out;
  if ((rc = PFFuncSetInfo(p, "echo", "str(s: str = \"default\", n: int64 = 1)", NULL)) != 0)
    goto out;
  if ((rc = PFFuncCallKw(p, NULL, NULL, 0, NULL, NULL, NULL, 0, &rv, &code)) != 0) goto out;
  if (code != kPFStr || strcmp(rv.v_str, "default") != 0)
    return PFErrorSetFormat(kPFErrRuntimeError, "wrong default");
  {
    int pos = 1;
    PFValue one = {.v_int64 = 1};
    int ic = kPFInt;
    if ((rc = PFFuncBind(p, 1, &pos, &one, &ic, NULL, &b)) != 0) goto out;
  }
  if ((rc = PFTensorAlloc(2, shape, (DLDataType){kDLFloat, 32, 1}, kPFTensorAllocZero, &t, NULL)) !=
      0)
    goto out;
out:
  PFObjectFree(t);
  PFFuncFree(b);
  PFFuncFree(p);
  PFFuncFree(f);
  PFSignatureInfoFree(info);
  return rc;
}

static void test_allocation_failures(void** state) {
  (void)state;
  assert_true(pf_fault_walk(fault_work, "signatures and tensors") >= 8);
}

int main(void) {
  if (pf_fault_install() != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_typed_constraints),        cmocka_unit_test(test_results_and_closures),
      cmocka_unit_test(test_arg_get_tensor),           cmocka_unit_test(test_tensor_alloc),
      cmocka_unit_test(test_packed_tensor_in_and_out), cmocka_unit_test(test_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
