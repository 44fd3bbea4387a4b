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

/* ---- math: typed functions, converted by their signatures ----
 * A typed function is registered with PF_REGISTER_CHECKED: the compiler
 * checks that its prototype is the one the signature describes. The packed
 * functions below check their own arguments; their registrations carry no
 * signature that C could check. */

static int64_t demo_add(int64_t a, int64_t b) { return a + b; }
PF_REGISTER_CHECKED("demo.add", demo_add, PF_RET(int64), PF_ARG(int64, a), PF_ARG(int64, b),
                    PF_DOC("Adds two integers."));

static double demo_hypot(double x, double y) { return hypot(x, y); }
PF_REGISTER_CHECKED("demo.hypot", demo_hypot, PF_RET(float64), PF_ARG(float64, x),
                    PF_ARG(float64, y),
                    PF_DOC("The length of the vector (x, y), without overflow."));

/* ---- strings ---- */

/* A typed function's str result must outlive the call; the runtime copies it
 * at once, so a per-thread buffer is enough. */
static const char* demo_greet(const char* name) {
  static _Thread_local char buf[256];
  snprintf(buf, sizeof(buf), "Hello, %s!", name);
  return buf;
}
PF_REGISTER_CHECKED("demo.greet", demo_greet, PF_RET(str), PF_ARG(str, name),
                    PF_DOC("Returns 'Hello, NAME!'."));

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
  if (is_str) v.v_str = out;
  else v.v_handle = &ba;
  int rc = PFCFuncSetReturn(ret, &v, &code, 1); /* copies */
  PFMemFree(out);
  return rc;
}
PF_REGISTER_PACKED("demo.reverse", demo_reverse,
                   "Reverses a str (by code point) or bytes (by byte).");

/* ---- callbacks ---- */

static int demo_call_n_times(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || codes[0] != kPFFuncHandle || codes[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError,
                            "demo.call_n_times: expected (function, int), got %d argument(s)", n);
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
      if (out_code == kPFFuncHandle || out_code == kPFModuleHandle || out_code == kPFObjectHandle)
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

/* The element count of t, a tensor that PFArgGetTensor took as compact
 * row-major ("tensor<*,*,contiguous>"), once it is on the CPU and of
 * scalar elements. */
static int check_tensor(const char* where, const DLTensor* t, int64_t* count) {
  if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost)
    return PFErrorSetFormat(kPFErrValueError, "%s: the tensor must be on the CPU", where);
  if (t->dtype.lanes != 1)
    return PFErrorSetFormat(kPFErrTypeError, "%s: vector dtypes (lanes=%u) are not supported",
                            where, (unsigned)t->dtype.lanes);
  int64_t expected = 1;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0)
      return PFErrorSetFormat(kPFErrValueError, "%s: negative shape[%d]", where, i);
    if (__builtin_mul_overflow(expected, t->shape[i], &expected))
      return PFErrorSetFormat(kPFErrValueError, "%s: the tensor is too large", where);
  }
  if (expected > 0 && t->data == NULL)
    return PFErrorSetFormat(kPFErrValueError, "%s: the tensor has no data", where);
  *count = expected;
  return 0;
}

/* The dtype's text, for messages. */
static const char* dtype_text(DLDataType dt) {
  static _Thread_local char buf[PF_DTYPE_STRING_MAX];
  if (PFDataTypeToString(dt, buf, sizeof(buf)) != 0) snprintf(buf, sizeof(buf), "?");
  return buf;
}

/* Argument 0 as a compact tensor, whether it came as a DLTensor* or a
 * tensor object (PFArgGetTensor), or an error that says what the function
 * takes and why the argument is not it. */
static int contiguous_arg(const char* where, const char* takes, PFValue* args, int* codes, int n,
                          DLTensor** out) {
  if (PFArgGetTensor(args, codes, n, 0, "tensor<*,*,contiguous>", out) == 0) return 0;
  /* The kind and message are the thread's own: PFErrorSetFormat reads them
   * before it replaces them. */
  return PFErrorSetFormat(PFErrorGetKind(), "%s: expected %s: %s", where, takes,
                          PFErrorGetMessage());
}

static int demo_fill(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  static const char* const where = "demo.fill";
  (void)res, (void)ret;
  DLTensor* t = NULL;
  if (n != 2 || (codes[1] != kPFInt && codes[1] != kPFFloat && codes[1] != kPFBool))
    return PFErrorSetFormat(kPFErrTypeError, "%s: expected (tensor, number)", where);
  if (contiguous_arg(where, "(tensor, number)", args, codes, n, &t) != 0) return -1;
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
                            "%s: dtype %s is not supported (float32, float64, int32, int64)", where,
                            dtype_text(dt));
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
  DLTensor* t = NULL;
  if (n != 2 || codes[1] != kPFFuncHandle)
    return PFErrorSetFormat(kPFErrTypeError, "%s: expected (tensor, comparator function)", where);
  if (contiguous_arg(where, "(tensor, comparator function)", args, codes, n, &t) != 0) return -1;
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

/* ---- binding constants: a matmul whose weight is pre-packed ---- */

/* demo.matmul(x, w) multiplies float32 matrices, x (M x K) by w (K x N).
 * Its inner loop walks a row of x and a column of w, so it reads w fastest
 * when w is stored column by column (strides (1, K)). Given a weight in any
 * other layout, a call first copies it that way, every time. Bound to a
 * constant weight (PFFuncBind, Function.bind), the pre-pack hook below makes
 * that copy once, and the bound function passes it on every call: the same
 * matrix, in the layout the kernel wants. */

/* A float32 matrix that owns its elements. `allocator` frees it: the
 * pre-pack hook's allocator, or NULL for PFMemFree. */
typedef struct {
  DLManagedTensor managed;
  const PFAllocator* allocator;
  int64_t shape[2];
  int64_t strides[2];
  float data[];
} demo_matrix;

static void demo_matrix_delete(DLManagedTensor* m) {
  demo_matrix* mat = m->manager_ctx;
  if (mat->allocator) mat->allocator->free_fn(mat, mat->allocator->user_data);
  else PFMemFree(mat);
}

/* The bytes of rows x cols float32 elements, or a ValueError when that
 * overflows (a tensor with zero strides can claim any shape). */
static int matrix_bytes(const char* where, int64_t rows, int64_t cols, size_t* out) {
  size_t count;
  if (__builtin_mul_overflow((size_t)rows, (size_t)cols, &count) ||
      __builtin_mul_overflow(count, sizeof(float), out))
    return PFErrorSetFormat(kPFErrValueError, "%s: a %lld x %lld matrix is too large", where,
                            (long long)rows, (long long)cols);
  return 0;
}

/* A new tensor object of rows x cols float32 elements, stored row by row,
 * or column by column if `by_column`, from `allocator` (the pre-pack
 * hook's; NULL: PFMemAlloc); *data receives its elements. (A compact
 * row-major tensor that the runtime allocates is PFTensorAlloc's.) */
static int demo_matrix_new(const char* where, int64_t rows, int64_t cols, int by_column,
                           const PFAllocator* allocator, float** data, PFObjectHandle* out) {
  size_t bytes = 0;
  if (matrix_bytes(where, rows, cols, &bytes) != 0) return -1;
  if (__builtin_add_overflow(bytes, sizeof(demo_matrix), &bytes))
    return PFErrorSetFormat(kPFErrValueError, "%s: a %lld x %lld matrix is too large", where,
                            (long long)rows, (long long)cols);
  demo_matrix* m =
      allocator ? allocator->malloc_fn(bytes, allocator->user_data) : PFMemAlloc(bytes);
  if (m == NULL) return PFErrorSetFormat(kPFErrMemoryError, "%s: out of memory", where);
  memset(m, 0, sizeof(*m));
  m->allocator = allocator;
  m->shape[0] = rows;
  m->shape[1] = cols;
  m->strides[0] = by_column ? 1 : cols;
  m->strides[1] = by_column ? rows : 1;
  m->managed.dl_tensor = (DLTensor){.data = m->data,
                                    .device = {kDLCPU, 0},
                                    .ndim = 2,
                                    .dtype = {kDLFloat, 32, 1},
                                    .shape = m->shape,
                                    .strides = m->strides};
  m->managed.manager_ctx = m;
  m->managed.deleter = demo_matrix_delete;
  *data = m->data;
  return PFTensorCreateFromDLPack(&m->managed, out); /* frees m on failure */
}

/* The argument at `index` as a float32 CPU matrix: a tensor object or a
 * borrowed DLTensor*, of any strides. */
static int matrix_arg(const char* where, const char* name, int index, PFValue v, int code,
                      const DLTensor** out) {
  DLTensor* t = NULL;
  int read_only = 0;
  /* Only read: a read-only tensor object will do, which PFArgGetTensor
   * (a writable DLTensor*) refuses. */
  if (code == kPFObjectHandle && PFTensorIsReadOnly(v.v_handle, &read_only) == 0 && read_only)
    PFTensorGetDLTensor(v.v_handle, &t);
  else if (PFArgGetTensor(&v, &code, 1, 0, NULL, &t) != 0)
    return PFErrorSetFormat(PFErrorGetKind(), "%s: argument %d (%s) must be a tensor, got %s",
                            where, index, name, PFTypeCodeName(code) ? PFTypeCodeName(code) : "?");
  if (t->device.device_type != kDLCPU || t->ndim != 2 || t->dtype.code != kDLFloat ||
      t->dtype.bits != 32 || t->dtype.lanes != 1)
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: argument %d (%s) must be a 2-D float32 CPU tensor, got a "
                            "%d-D %s tensor",
                            where, index, name, (int)t->ndim, dtype_text(t->dtype));
  if (t->shape[0] < 0 || t->shape[1] < 0 || (t->shape[0] > 0 && t->shape[1] > 0 && t->data == NULL))
    return PFErrorSetFormat(kPFErrValueError, "%s: argument %d (%s) is malformed", where, index,
                            name);
  *out = t;
  return 0;
}

/* The element strides of matrix t (row-major when it has none). */
static void matrix_strides(const DLTensor* t, int64_t* s0, int64_t* s1) {
  *s0 = t->strides ? t->strides[0] : t->shape[1];
  *s1 = t->strides ? t->strides[1] : 1;
}

/* Whether w is stored column by column, as the kernel reads it. */
static int stored_by_column(const DLTensor* w) {
  int64_t s0, s1;
  matrix_strides(w, &s0, &s1);
  return (w->shape[0] <= 1 || s0 == 1) && (w->shape[1] <= 1 || s1 == w->shape[0]);
}

/* Copies matrix t (any strides) into dst: row by row, or column by column
 * (its transpose, row by row) if `by_column`. */
static void copy_matrix(const DLTensor* t, int by_column, float* dst) {
  int64_t rows = t->shape[0], cols = t->shape[1], s0, s1;
  matrix_strides(t, &s0, &s1);
  const float* src = (const float*)(const void*)((const char*)t->data + t->byte_offset);
  if (by_column) {
    for (int64_t j = 0; j < cols; ++j)
      for (int64_t i = 0; i < rows; ++i) *dst++ = src[i * s0 + j * s1];
  } else {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) *dst++ = src[i * s0 + j * s1];
  }
}

/* A compact copy of matrix t (see copy_matrix), to be freed with
 * PFMemFree; NULL after recording an error. */
static float* matrix_scratch(const char* where, const DLTensor* t, int by_column) {
  size_t bytes = 0;
  if (matrix_bytes(where, t->shape[0], t->shape[1], &bytes) != 0) return NULL;
  float* p = PFMemAlloc(bytes ? bytes : 1); /* NULL records a MemoryError */
  if (p != NULL) copy_matrix(t, by_column, p);
  return p;
}

/* y[i][j] = sum over k of x[i][k] * w[k][j], with x stored row by row and
 * w column by column: both operands of the inner loop are contiguous. */
static void matmul_kernel(const float* x, const float* w_by_column, float* y, int64_t m, int64_t k,
                          int64_t n) {
  for (int64_t i = 0; i < m; ++i) {
    const float* xr = x + i * k;
    for (int64_t j = 0; j < n; ++j) {
      const float* wc = w_by_column + j * k;
      float a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      int64_t p = 0;
      for (; p + 4 <= k; p += 4) {
        a0 += xr[p] * wc[p];
        a1 += xr[p + 1] * wc[p + 1];
        a2 += xr[p + 2] * wc[p + 2];
        a3 += xr[p + 3] * wc[p + 3];
      }
      for (; p < k; ++p) a0 += xr[p] * wc[p];
      y[i * n + j] = (a0 + a1) + (a2 + a3);
    }
  }
}

static int demo_matmul(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  static const char* const where = "demo.matmul";
  (void)res;
  if (n != 2)
    return PFErrorSetFormat(kPFErrTypeError, "%s: expected 2 arguments (x, w), got %d", where, n);
  const DLTensor *x, *w;
  if (matrix_arg(where, "x", 0, args[0], codes[0], &x) != 0 ||
      matrix_arg(where, "w", 1, args[1], codes[1], &w) != 0)
    return -1;
  int64_t m = x->shape[0], k = x->shape[1], cols = w->shape[1];
  if (w->shape[0] != k)
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: x is %lld x %lld and w is %lld x %lld: the inner dimensions "
                            "differ",
                            where, (long long)m, (long long)k, (long long)w->shape[0],
                            (long long)cols);
  /* The result: a new tensor that the runtime owns, compact row-major. */
  int64_t y_shape[2] = {m, cols};
  PFObjectHandle out;
  DLTensor* y_view;
  if (PFTensorAlloc(2, y_shape, (DLDataType){kDLFloat, 32, 1}, 0, &out, &y_view) != 0) return -1;
  float* y = y_view->data;
  /* Operands in the layouts the kernel reads, copied only when they are
   * not: w is copied on every call unless it was pre-packed. */
  const float* xd = (const float*)(const void*)((const char*)x->data + x->byte_offset);
  const float* wd = (const float*)(const void*)((const char*)w->data + w->byte_offset);
  int64_t xs0, xs1;
  matrix_strides(x, &xs0, &xs1);
  float* xcopy = NULL;
  float* wcopy = NULL;
  int rc = 0;
  if (!((m <= 1 || xs0 == k) && (k <= 1 || xs1 == 1))) {
    xcopy = matrix_scratch(where, x, 0);
    rc = xcopy ? 0 : -1;
    xd = xcopy;
  }
  if (rc == 0 && !stored_by_column(w)) {
    wcopy = matrix_scratch(where, w, 1);
    rc = wcopy ? 0 : -1;
    wd = wcopy;
  }
  if (rc == 0) {
    matmul_kernel(xd, wd, y, m, k, cols);
    PFValue v = {.v_handle = out};
    int code = kPFObjectHandle;
    rc = PFCFuncSetReturn(ret, &v, &code, 1);
  }
  PFMemFree(xcopy);
  PFMemFree(wcopy);
  PFObjectFree(out); /* the return slot holds its own reference */
  return rc;
}

/* The pre-pack hook: stores the weight (position 1) column by column, once.
 * A weight already stored that way, and x (position 0), stay as they are. */
static int demo_matmul_prepack(void* res, int position, PFValue value, int code,
                               const PFAllocator* allocator, PFValue* out, int* out_code,
                               int* is_packed) {
  static const char* const where = "demo.matmul (pre-packing the weight)";
  (void)res;
  *is_packed = 0;
  if (position != 1) return 0;
  const DLTensor* w;
  if (matrix_arg(where, "w", 1, value, code, &w) != 0) return -1;
  if (stored_by_column(w)) return 0;
  float* data = NULL;
  PFObjectHandle packed;
  if (demo_matrix_new(where, w->shape[0], w->shape[1], 1, allocator, &data, &packed) != 0)
    return -1;
  copy_matrix(w, 1, data);
  out->v_handle = packed;
  *out_code = kPFObjectHandle;
  *is_packed = 1;
  return 0;
}
PF_REGISTER_PREPACKED("demo.matmul", demo_matmul, "demo.matmul/column-major", demo_matmul_prepack,
                      "matmul(x, w): the float32 matrix product x @ w, as a new tensor. "
                      "Bind a constant w (Function.bind) to have it stored column by column "
                      "once, the layout the inner loop reads, instead of on every call.");

/* ---- errors ---- */

static int demo_fail(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)ret, (void)res;
  const char* why = n >= 1 && codes[0] == kPFStr ? args[0].v_str : "demo.fail was called";
  return PFErrorSetFormat(kPFErrValueError, "%s", why);
}
PF_REGISTER_PACKED("demo.fail", demo_fail,
                   "fail([message]): always raises ValueError with the message.");
