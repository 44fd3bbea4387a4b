/*
 * demo_plugin: a packedfunc module written in C.
 *
 * Build it as a shared library that links against libpackedfunc (make builds
 * it as $(BUILD)/examples/demo_plugin.so):
 *
 *     cc -std=c11 -fPIC -shared demo_plugin.c -lpackedfunc -lm -o demo_plugin.so
 *
 * and load it from any host: `pf --load demo_plugin.so list demo.` from the
 * shell, PFModLoadFromFile in C, or the Python binding. Every function is
 * registered with one line right after it; nothing runs when the library is
 * loaded.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"

_Static_assert(sizeof(double) == sizeof(int64_t), "demo.sort sorts 8-byte elements");

/* ---- math: typed functions, converted by their signatures ---- */

static int64_t demo_add(int64_t a, int64_t b) { return a + b; }
PF_REGISTER_TYPED("demo.add", demo_add, "int64(int64,int64)", "Adds two integers.");

static double demo_hypot(double x, double y) { return hypot(x, y); }
PF_REGISTER_TYPED("demo.hypot", demo_hypot, "float64(float64,float64)",
                  "The length of the vector (x, y), without overflow.");

/* ---- strings ---- */

/* A typed function's str result must outlive the call; the runtime copies it
 * at once, so a per-thread buffer is enough. */
static const char* demo_greet(const char* name) {
  static _Thread_local char buf[256];
  snprintf(buf, sizeof(buf), "Hello, %s!", name);
  return buf;
}
PF_REGISTER_TYPED("demo.greet", demo_greet, "str(str)", "Returns 'Hello, NAME!'.");

/* Length of the UTF-8 sequence that starts with byte c (1 for a stray
 * continuation byte, so malformed text is still reversed byte by byte). */
static size_t utf8_len(unsigned char c) {
  return c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 1;
}

static int demo_reverse(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || (codes[0] != kPFStr && codes[0] != kPFBytes))
    return PFErrorSetFormat(kPFErrTypeError,
                            "demo.reverse: expected one str or bytes argument, got %d "
                            "argument(s)%s%s",
                            n, n ? " starting with " : "", n ? PFTypeCodeName(codes[0]) : "");
  int is_str = codes[0] == kPFStr;
  const char* src = is_str ? args[0].v_str : ((const PFByteArray*)args[0].v_handle)->data;
  size_t len = is_str ? strlen(src) : ((const PFByteArray*)args[0].v_handle)->size;
  char* out = PFMemAlloc(len + 1);
  if (out == NULL) return -1;
  if (is_str) {
    /* Reverse by code point, so the result is valid UTF-8 again. */
    size_t i = 0;
    while (i < len) {
      size_t k = utf8_len((unsigned char)src[i]);
      if (k > len - i) k = len - i;
      memcpy(out + len - i - k, src + i, k);
      i += k;
    }
  } else {
    for (size_t i = 0; i < len; ++i) out[i] = src[len - 1 - i];
  }
  out[len] = '\0';
  PFByteArray ba = {out, len};
  PFValue v;
  int code = codes[0];
  if (is_str)
    v.v_str = out;
  else
    v.v_handle = &ba;
  int rc = PFCFuncSetReturn(ret, &v, &code, 1); /* copies */
  PFMemFree(out);
  return rc;
}
PF_REGISTER_PACKED("demo.reverse", demo_reverse,
                   "Reverses a str (by code point) or bytes (by byte).");

/* ---- callbacks ---- */

static int demo_call_n_times(PFValue* args, int* codes, int n, PFRetValueHandle ret,
                             void* res) {
  (void)res;
  if (n != 2 || codes[0] != kPFFuncHandle || codes[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError,
                            "demo.call_n_times: expected (function, int), got %d argument(s)",
                            n);
  int64_t times = args[1].v_int64;
  if (times < 0)
    return PFErrorSetFormat(kPFErrValueError,
                            "demo.call_n_times: argument 1 (n) must be >= 0, got %lld",
                            (long long)times);
  int64_t sum = 0;
  for (int64_t i = 0; i < times; ++i) {
    /* Let a host interrupt a long loop (Ctrl-C in Python). */
    if ((i & 1023) == 0 && PFEnvCheckSignals() != 0) return -1;
    PFValue arg = {.v_int64 = i}, out;
    int arg_code = kPFInt, out_code;
    if (PFFuncCall(args[0].v_handle, &arg, &arg_code, 1, &out, &out_code) != 0) {
      PFErrorAppendTraceback("in demo.call_n_times, calling the callback");
      return -1;
    }
    if (out_code != kPFInt && out_code != kPFBool) {
      if (out_code == kPFFuncHandle || out_code == kPFModuleHandle ||
          out_code == kPFObjectHandle)
        PFObjectFree(out.v_handle);
      return PFErrorSetFormat(kPFErrTypeError,
                              "demo.call_n_times: the callback returned %s for i=%lld; "
                              "expected int",
                              PFTypeCodeName(out_code) ? PFTypeCodeName(out_code) : "?",
                              (long long)i);
    }
    sum += out.v_int64;
  }
  PFValue v = {.v_int64 = sum};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
PF_REGISTER_PACKED("demo.call_n_times", demo_call_n_times,
                   "call_n_times(f, n): calls f(i) for i in 0..n-1 and returns the sum "
                   "of the results.");

/* ---- tensors ---- */

/* Checks that t is a CPU tensor with compact row-major layout, and returns
 * its element count through *count. */
static int check_tensor(const char* where, const DLTensor* t, int64_t* count) {
  if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost)
    return PFErrorSetFormat(kPFErrValueError, "%s: the tensor must be on the CPU", where);
  if (t->ndim < 0) return PFErrorSetFormat(kPFErrValueError, "%s: negative ndim", where);
  if (t->dtype.lanes != 1)
    return PFErrorSetFormat(kPFErrTypeError, "%s: vector dtypes (lanes=%u) are not supported",
                            where, (unsigned)t->dtype.lanes);
  int64_t expected = 1;
  for (int i = t->ndim - 1; i >= 0; --i) {
    if (t->shape[i] < 0)
      return PFErrorSetFormat(kPFErrValueError, "%s: negative shape[%d]", where, i);
    if (t->strides != NULL && t->shape[i] > 1 && t->strides[i] != expected)
      return PFErrorSetFormat(kPFErrValueError,
                              "%s: the tensor must be contiguous (row-major); strides[%d] "
                              "is %lld, expected %lld",
                              where, i, (long long)t->strides[i], (long long)expected);
    expected *= t->shape[i];
  }
  if (expected > 0 && t->data == NULL)
    return PFErrorSetFormat(kPFErrValueError, "%s: the tensor has no data", where);
  *count = expected;
  return 0;
}

static const char* dtype_text(DLDataType dt) {
  static _Thread_local char buf[32];
  const char* code = dt.code == kDLInt ? "int" : dt.code == kDLUInt ? "uint"
                   : dt.code == kDLFloat ? "float" : dt.code == kDLBfloat ? "bfloat" : "code";
  snprintf(buf, sizeof(buf), "%s%u", code, (unsigned)dt.bits);
  return buf;
}

/* The tensor of an argument given as a DLTensor* or a tensor object. */
static DLTensor* tensor_arg(PFValue v, int code) {
  if (code == kPFDLTensorHandle) return v.v_handle;
  DLTensor* t = NULL;
  if (code == kPFObjectHandle && PFTensorGetDLTensor(v.v_handle, &t) == 0) return t;
  return NULL;
}

static int demo_fill(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  static const char* const where = "demo.fill";
  (void)res, (void)ret;
  DLTensor* t = n == 2 ? tensor_arg(args[0], codes[0]) : NULL;
  if (t == NULL || (codes[1] != kPFInt && codes[1] != kPFFloat && codes[1] != kPFBool))
    return PFErrorSetFormat(kPFErrTypeError, "%s: expected (tensor, number)", where);
  int64_t count;
  if (check_tensor(where, t, &count) != 0) return -1;
  double x = codes[1] == kPFFloat ? args[1].v_float64 : (double)args[1].v_int64;
  int64_t xi = codes[1] == kPFFloat ? (int64_t)args[1].v_float64 : args[1].v_int64;
  char* base = (char*)t->data + t->byte_offset;
  DLDataType dt = t->dtype;
  if (dt.code == kDLFloat && dt.bits == 32) {
    float* p = (float*)(void*)base;
    for (int64_t i = 0; i < count; ++i) p[i] = (float)x;
  } else if (dt.code == kDLFloat && dt.bits == 64) {
    double* p = (double*)(void*)base;
    for (int64_t i = 0; i < count; ++i) p[i] = x;
  } else if (dt.code == kDLInt && (dt.bits == 32 || dt.bits == 64)) {
    if (codes[1] == kPFFloat && (double)xi != x)
      return PFErrorSetFormat(kPFErrValueError, "%s: %g is not an integer, and the tensor is %s",
                              where, x, dtype_text(dt));
    if (dt.bits == 32 && (xi < INT32_MIN || xi > INT32_MAX))
      return PFErrorSetFormat(kPFErrValueError, "%s: %lld does not fit int32", where,
                              (long long)xi);
    if (dt.bits == 32) {
      int32_t* p = (int32_t*)(void*)base;
      for (int64_t i = 0; i < count; ++i) p[i] = (int32_t)xi;
    } else {
      int64_t* p = (int64_t*)(void*)base;
      for (int64_t i = 0; i < count; ++i) p[i] = xi;
    }
  } else {
    return PFErrorSetFormat(kPFErrTypeError,
                            "%s: dtype %s is not supported (float32, float64, int32, int64)",
                            where, dtype_text(dt));
  }
  return 0;
}
PF_REGISTER_PACKED("demo.fill", demo_fill,
                   "fill(tensor, value): sets every element of a contiguous CPU tensor of "
                   "float32, float64, int32 or int64 to value, in place.");

/* demo.sort hands the comparator to qsort as a real C function pointer. The
 * pointer compares values, while qsort passes element addresses; this small
 * adapter, one per element type, bridges the two. */
static _Thread_local void* tls_cmp_fn;

static int cmp_int64(const void* a, const void* b) {
  int32_t (*cmp)(int64_t, int64_t) = (int32_t(*)(int64_t, int64_t))tls_cmp_fn;
  return cmp(*(const int64_t*)a, *(const int64_t*)b);
}

static int cmp_float64(const void* a, const void* b) {
  int32_t (*cmp)(double, double) = (int32_t(*)(double, double))tls_cmp_fn;
  return cmp(*(const double*)a, *(const double*)b);
}

static int demo_sort(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  static const char* const where = "demo.sort";
  (void)res, (void)ret;
  DLTensor* t = n == 2 ? tensor_arg(args[0], codes[0]) : NULL;
  if (t == NULL || codes[1] != kPFFuncHandle)
    return PFErrorSetFormat(kPFErrTypeError, "%s: expected (tensor, comparator function)",
                            where);
  int64_t count;
  if (check_tensor(where, t, &count) != 0) return -1;
  int is_int = t->dtype.code == kDLInt && t->dtype.bits == 64;
  int is_float = t->dtype.code == kDLFloat && t->dtype.bits == 64;
  if (!is_int && !is_float)
    return PFErrorSetFormat(kPFErrTypeError, "%s: dtype %s is not supported (int64, float64)",
                            where, dtype_text(t->dtype));
  PFObjectHandle closure = NULL;
  void* fn = NULL;
  if (PFFuncToCFunction(args[1].v_handle, is_int ? "int32(int64,int64)" : "int32(float64,float64)",
                        &closure, &fn) != 0)
    return -1;
  void* saved = tls_cmp_fn; /* a comparator may itself call demo.sort */
  tls_cmp_fn = fn;
  qsort((char*)t->data + t->byte_offset, (size_t)count, sizeof(int64_t), /* = sizeof(double) */
        is_int ? cmp_int64 : cmp_float64);
  tls_cmp_fn = saved;
  /* A failed comparison cannot stop qsort; it is reported here. The tensor
   * is then in some permutation of its elements. */
  int rc = PFClosureCheckError(closure);
  if (rc != 0) PFErrorAppendTraceback("in demo.sort, calling the comparator");
  PFObjectFree(closure);
  return rc;
}
PF_REGISTER_PACKED("demo.sort", demo_sort,
                   "sort(tensor, cmp): sorts a contiguous 1-D or n-D int64 or float64 CPU "
                   "tensor in place (as a flat array) by cmp(a, b) -> negative, 0 or "
                   "positive; cmp becomes a C function pointer that qsort calls.");

/* ---- errors ---- */

static int demo_fail(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)ret, (void)res;
  const char* why = n >= 1 && codes[0] == kPFStr ? args[0].v_str : "demo.fail was called";
  return PFErrorSetFormat(kPFErrValueError, "%s", why);
}
PF_REGISTER_PACKED("demo.fail", demo_fail,
                   "fail([message]): always raises ValueError with the message.");
