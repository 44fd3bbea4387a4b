/* libFuzzer target: PFFuncCall (and PFFuncCallFrame) with arbitrary type
 * codes, value bits and argument counts, into packed and typed functions.
 *
 * The input is decoded into one call: which function, how many arguments
 * (also negative, or more than a typed function takes), a misuse of the
 * call's own parameters now and then, and for each argument a type code
 * (known, extension, or unknown) and a value. Plain values take the
 * input's bits. Pointer-carrying codes never get invented pointers, which
 * would only be the caller's undefined behaviour: they get NULL or one of a
 * fixed set of real objects and buffers, some of them of the wrong kind.
 *
 * A model of the contract in c_api.h predicts the outcome, and the target
 * aborts (a finding) unless the call does exactly that: the right error
 * kind naming the right argument, or success with the right result. Every
 * returned reference is released, so LeakSanitizer sees any leak. */
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "fuzz_call: check failed: %s\n  ", #cond); \
      fprintf(stderr, __VA_ARGS__);                              \
      fprintf(stderr, "\n  last error: %s\n", PFGetLastError()); \
      abort();                                                   \
    }                                                            \
  } while (0)

#define MAX_ARGS 48

/* ---- input reader -------------------------------------------------------- */

typedef struct {
  const uint8_t* p;
  size_t n;
} reader;

static uint8_t rd8(reader* r) {
  if (r->n == 0) return 0;
  r->n--;
  return *r->p++;
}

static uint64_t rd64(reader* r) {
  uint64_t x = 0;
  for (int i = 0; i < 8; ++i) x |= (uint64_t)rd8(r) << (8 * i);
  return x;
}

/* ---- the objects that pointer codes may carry ----------------------------- */

static PFFunctionHandle g_echo, g_live_func;
static PFObjectHandle g_boxed, g_tensor_obj;
static DLTensor g_tensor2, g_tensor0;
static int64_t g_shape[2] = {3, 4};
static float g_tensor_data[12];
static _Alignas(16) unsigned char g_fake[64]; /* memory that is not an object */
static char g_long_str[300];
static char g_input_str[24];
static const PFByteArray g_bytes[] = {
    {NULL, 0},
    {"a\0b", 3},
    {g_long_str, sizeof(g_long_str) - 1},
    {NULL, 5} /* refused by PFFuncCall */,
    {"\xff\xfe", 2},
    /* Sizes no object can have: refused before any arithmetic on them. */
    {"x", SIZE_MAX},
    {"x", (size_t)PTRDIFF_MAX + 1}};
static DLManagedTensor g_managed;

/* ---- packed functions ---------------------------------------------------- */

static int f_echo(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  return n == 0 ? 0 : PFCFuncSetReturn(ret, &a[0], &c[0], 1);
}

/* Sets every argument as the return value in turn: the last one wins. */
static int f_setall(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  for (int i = 0; i < n; ++i)
    if (PFCFuncSetReturn(ret, &a[i], &c[i], 1) != 0) return -1;
  return 0;
}

/* Calls echo with the same arguments, from inside a call. */
static int f_forward(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  PFValue rv;
  int rc;
  if (PFFuncCall(g_echo, a, c, n, &rv, &rc) != 0) {
    PFErrorAppendTraceback("in forward");
    return -1;
  }
  int st = PFCFuncSetReturn(ret, &rv, &rc, 1);
  if (rc == kPFFuncHandle || rc == kPFModuleHandle || rc == kPFObjectHandle)
    PFObjectFree(rv.v_handle);
  return st;
}

/* Checks what PFFuncCall promises a callee about its arguments. */
static int f_inspect(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  CHECK(n >= 0 && (n == 0 || (a != NULL && c != NULL)), "inspect got n=%d", n);
  for (int i = 0; i < n; ++i) {
    int code = c[i];
    CHECK((code >= 0 && code < kPFTypeCodeEnd) || (code >= kPFExtBegin && code < kPFExtEnd),
          "inspect: argument %d has code %d", i, code);
    uint32_t ti = 0;
    switch (code) {
      case kPFStr:
        CHECK(a[i].v_str != NULL, "NULL str");
        (void)strlen(a[i].v_str);
        break;
      case kPFBytes:
        CHECK(a[i].v_handle != NULL, "NULL bytes");
        break;
      case kPFDLTensorHandle:
        CHECK(a[i].v_handle != NULL, "NULL tensor");
        break;
      case kPFFuncHandle:
        CHECK(PFObjectGetTypeIndex(a[i].v_handle, &ti) == 0 && ti == kPFObjectFunction,
              "argument %d is not a function", i);
        break;
      case kPFModuleHandle:
        CHECK(PFObjectGetTypeIndex(a[i].v_handle, &ti) == 0 && ti == kPFObjectModule,
              "argument %d is not a module", i);
        break;
      case kPFObjectHandle:
        CHECK(PFObjectGetTypeIndex(a[i].v_handle, &ti) == 0, "argument %d is not an object", i);
        break;
      default:
        break;
    }
  }
  PFValue v = {.v_int64 = n};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static int f_fail(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)ret, (void)res;
  if (n > 0) return PFErrorSetFormat(kPFErrValueError, "fail: asked to fail with %d args", n);
  return -1; /* without an error: the runtime must supply one */
}

/* ---- typed C functions ---------------------------------------------------- */

static int64_t t_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static int32_t t_mix(int8_t a, uint16_t b, bool c) { return a * 3 + b - (c ? 7 : 0); }
static double t_fl(double a, float b) { return a + (double)b; }
static const char* t_str(const char* s) { return s; }
static PFByteArray t_bytes(const PFByteArray* b) { return *b; }
static uint64_t t_u64(uint64_t x) { return x ^ 0x5a; }
static int g_void_calls;
static void t_void(void) { g_void_calls++; }
static void* t_ptr(void* p) { return p; }
static DLDataType t_dtype(DLDataType t) {
  t.lanes = (uint16_t)(t.lanes + 1);
  return t;
}
static DLDevice t_device(DLDevice d) {
  d.device_id ^= 1;
  return d;
}
static PFFunctionHandle t_func(PFFunctionHandle f) {
  if (f != NULL && PFFuncRetain(f) != 0) abort();
  return f;
}
static int64_t t_ndim(DLTensor* t) { return t ? t->ndim : -1; }
static double t_many(int8_t a, int16_t b, int32_t c, int64_t d, uint8_t e, uint16_t f, uint32_t g,
                     uint64_t h, float i, double j, bool k) {
  return (double)a + (double)b + (double)c + (double)d + (double)e + (double)f + (double)g +
         (double)h + (double)i + j + (double)k;
}
static bool t_not(bool b) { return !b; }
static uint32_t t_bits(uint32_t a, uint8_t b, int16_t c) { return a ^ b ^ (uint16_t)c; }

/* The model's names for C types. */
enum { I8, I16, I32, I64, U8, U16, U32, U64, F32, F64, B, S, BY, P, T, DT, DV, FN, VOID };

typedef struct {
  const char* sig;
  void* fn;
  int ret;
  int nargs;
  int args[11];
  const char* name; /* metadata name, or NULL */
  PFFunctionHandle h;
} typed_def;

static typed_def g_typed[] = {
    {"int64(int64,int64)", (void*)t_add, I64, 2, {I64, I64}, "add", NULL},
    {"int32(int8, uint16, bool)", (void*)t_mix, I32, 3, {I8, U16, B}, NULL, NULL},
    {"double(float64,float32)", (void*)t_fl, F64, 2, {F64, F32}, "fl", NULL},
    {"str(str)", (void*)t_str, S, 1, {S}, NULL, NULL},
    {"bytes(bytes)", (void*)t_bytes, BY, 1, {BY}, NULL, NULL},
    {"uint64(uint64)", (void*)t_u64, U64, 1, {U64}, NULL, NULL},
    {"void()", (void*)t_void, VOID, 0, {0}, NULL, NULL},
    {"ptr(ptr)", (void*)t_ptr, P, 1, {P}, NULL, NULL},
    {"dtype(dtype)", (void*)t_dtype, DT, 1, {DT}, NULL, NULL},
    {"device(device)", (void*)t_device, DV, 1, {DV}, NULL, NULL},
    {"func(func)", (void*)t_func, FN, 1, {FN}, NULL, NULL},
    {"int64(tensor)", (void*)t_ndim, I64, 1, {T}, NULL, NULL},
    {"float64(int8,int16,int32,int64,uint8,uint16,uint32,uint64,float32,float64,bool)",
     (void*)t_many,
     F64,
     11,
     {I8, I16, I32, I64, U8, U16, U32, U64, F32, F64, B},
     "many",
     NULL},
    {"bool(bool)", (void*)t_not, B, 1, {B}, NULL, NULL},
    {"uint32(uint32,uint8,int16)", (void*)t_bits, U32, 3, {U32, U8, I16}, NULL, NULL},
};
#define N_TYPED ((int)(sizeof(g_typed) / sizeof(g_typed[0])))

enum { PK_ECHO, PK_SETALL, PK_FORWARD, PK_INSPECT, PK_FAIL, N_PACKED };
static PFFunctionHandle g_packed[N_PACKED];

static void setup(void) {
  static const PFPackedCFunc fns[N_PACKED] = {f_echo, f_setall, f_forward, f_inspect, f_fail};
  for (int i = 0; i < N_PACKED; ++i)
    if (PFFuncCreateFromCFunc(fns[i], NULL, NULL, &g_packed[i]) != 0) abort();
  g_echo = g_packed[PK_ECHO];
  g_live_func = g_packed[PK_INSPECT];
  for (int i = 0; i < N_TYPED; ++i) {
    if (PFFuncCreateFromTyped(g_typed[i].fn, g_typed[i].sig, &g_typed[i].h) != 0) {
      fprintf(stderr, "fuzz_call: cannot create %s: %s\n", g_typed[i].sig, PFGetLastError());
      abort();
    }
    if (g_typed[i].name && PFFuncSetInfo(g_typed[i].h, g_typed[i].name, NULL, NULL) != 0) abort();
  }
  if (PFObjectCreateBoxed(g_fake, NULL, &g_boxed) != 0) abort();
  g_tensor2 = (DLTensor){g_tensor_data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, g_shape, NULL, 0};
  g_tensor0 = (DLTensor){g_tensor_data, {kDLCPU, 0}, 0, {kDLFloat, 32, 1}, NULL, NULL, 0};
  g_managed = (DLManagedTensor){g_tensor2, NULL, NULL};
  g_managed.dl_tensor.ndim = 1;
  if (PFTensorCreateFromDLPack(&g_managed, &g_tensor_obj) != 0) abort();
  memset(g_long_str, 'L', sizeof(g_long_str) - 1);
  memcpy(g_fake, "FAKE", 4);
}

/* ---- decoding one argument ------------------------------------------------ */

static const int64_t k_ints[16] = {0,
                                   1,
                                   -1,
                                   2,
                                   127,
                                   128,
                                   -129,
                                   255,
                                   65535,
                                   65536,
                                   INT32_MAX,
                                   (int64_t)INT32_MAX + 1,
                                   (int64_t)UINT32_MAX + 1,
                                   INT64_MAX,
                                   INT64_MIN,
                                   ((int64_t)1 << 53) + 1};

static int decode_code(reader* r) {
  static const int k_odd[8] = {-1,  kPFTypeCodeEnd, 14,     kPFExtBegin - 1, kPFExtEnd,
                               255, INT_MAX,        INT_MIN};
  uint8_t c = rd8(r);
  if (c < 3 * kPFTypeCodeEnd) return c % kPFTypeCodeEnd;
  if (c < 3 * kPFTypeCodeEnd + 8) return kPFExtBegin + (c - 3 * kPFTypeCodeEnd) * 9;
  return k_odd[c % 8];
}

static void* pick(reader* r, void* const* choices, int n) { return choices[rd8(r) % n]; }

static PFValue decode_value(reader* r, int code) {
  PFValue v;
  v.v_int64 = 0;
  switch (code) {
    case kPFInt:
    case kPFBool: {
      uint8_t k = rd8(r);
      v.v_int64 = k < 32 ? k_ints[k % 16] : (int64_t)rd64(r);
      break;
    }
    case kPFStr: {
      void* const c[] = {NULL, "", "hello", g_long_str, g_input_str, "\xff\xfe bad utf-8"};
      v.v_str = pick(r, c, 6);
      break;
    }
    case kPFBytes: {
      void* const c[] = {NULL,
                         (void*)&g_bytes[0],
                         (void*)&g_bytes[1],
                         (void*)&g_bytes[2],
                         (void*)&g_bytes[3],
                         (void*)&g_bytes[4],
                         (void*)&g_bytes[5],
                         (void*)&g_bytes[6]};
      v.v_handle = pick(r, c, 8);
      break;
    }
    case kPFDLTensorHandle: {
      void* const c[] = {NULL, &g_tensor2, &g_tensor0};
      v.v_handle = pick(r, c, 3);
      break;
    }
    case kPFFuncHandle:
    case kPFModuleHandle:
    case kPFObjectHandle: {
      void* const c[] = {NULL, g_live_func, g_typed[0].h, g_boxed, g_tensor_obj, g_fake};
      v.v_handle = pick(r, c, 6);
      break;
    }
    default: /* float, null, opaque handle, dtype, device, extension, unknown */
      v.v_int64 = (int64_t)rd64(r);
      break;
  }
  return v;
}

/* ---- the model ------------------------------------------------------------- */

static int is_handle_code(int c) {
  return c == kPFFuncHandle || c == kPFModuleHandle || c == kPFObjectHandle;
}

/* What PFFuncCall's own checks say about argument i: 0 when it passes, 1
 * for a TypeError, 2 for a ValueError. */
static int arg_invalid(int code, PFValue v) {
  if (!((code >= 0 && code < kPFTypeCodeEnd) || (code >= kPFExtBegin && code < kPFExtEnd)))
    return 1;
  if ((code == kPFStr || code == kPFBytes || code == kPFDLTensorHandle || is_handle_code(code)) &&
      v.v_handle == NULL)
    return 1;
  if (is_handle_code(code)) {
    uint32_t want = code == kPFFuncHandle     ? kPFObjectFunction
                    : code == kPFModuleHandle ? kPFObjectModule
                                              : 0;
    void* h = v.v_handle;
    uint32_t ti = h == g_boxed        ? kPFObjectBoxed
                  : h == g_tensor_obj ? kPFObjectTensor
                  : h == g_fake       ? 0
                                      : kPFObjectFunction;
    if (ti == 0 || (want != 0 && ti != want)) return 1;
  }
  if (code == kPFBytes && ((const PFByteArray*)v.v_handle)->data == NULL &&
      ((const PFByteArray*)v.v_handle)->size != 0)
    return 1;
  if (code == kPFBytes && ((const PFByteArray*)v.v_handle)->size > (size_t)PTRDIFF_MAX) return 2;
  return 0;
}

typedef union {
  int64_t i;
  uint64_t u;
  double d;
  float f;
  bool b;
  const void* p;
  DLDataType dt;
  DLDevice dv;
} cval;

enum { M_OK, M_TYPE, M_RANGE };

static int int_exact_double(int64_t x, double* out) {
  double d = (double)x;
  if (x >= -((int64_t)1 << 53) && x <= ((int64_t)1 << 53)) {
    *out = d;
    return 1;
  }
  if (d >= 0x1p63 || (int64_t)d != x) return 0;
  *out = d;
  return 1;
}

/* Converts a packed argument to C type t as the table in c_api.h says. */
static int model_convert(int t, int code, PFValue v, cval* out) {
  static const int64_t lo[] = {INT8_MIN, INT16_MIN, INT32_MIN, INT64_MIN, 0, 0, 0, 0};
  static const int64_t hi[] = {INT8_MAX,  INT16_MAX,  INT32_MAX,  INT64_MAX,
                               UINT8_MAX, UINT16_MAX, UINT32_MAX, INT64_MAX};
  switch (t) {
    case I8:
    case I16:
    case I32:
    case I64:
    case U8:
    case U16:
    case U32:
    case U64: {
      if (code != kPFInt && code != kPFBool) return M_TYPE;
      int64_t x = code == kPFBool ? v.v_int64 != 0 : v.v_int64;
      if (x < lo[t] || x > hi[t]) return M_RANGE;
      out->i = x;
      return M_OK;
    }
    case F32:
    case F64: {
      double d;
      if (code == kPFFloat) d = v.v_float64;
      else if (code == kPFInt || code == kPFBool) {
        if (!int_exact_double(code == kPFBool ? v.v_int64 != 0 : v.v_int64, &d)) return M_RANGE;
      } else return M_TYPE;
      if (t == F32) {
        if (isfinite(d) && (d > FLT_MAX || d < -FLT_MAX)) return M_RANGE;
        out->f = (float)d;
      } else {
        out->d = d;
      }
      return M_OK;
    }
    case B:
      if (code == kPFBool) out->b = v.v_int64 != 0;
      else if (code == kPFInt && (v.v_int64 == 0 || v.v_int64 == 1)) out->b = v.v_int64 != 0;
      else return code == kPFInt ? M_RANGE : M_TYPE;
      return M_OK;
    case S:
      if (code != kPFStr) return M_TYPE;
      out->p = v.v_str;
      return M_OK;
    case BY:
      if (code != kPFBytes) return M_TYPE;
      out->p = v.v_handle;
      return M_OK;
    case P:
      if (code != kPFOpaqueHandle && code != kPFNull) return M_TYPE;
      out->p = code == kPFNull ? NULL : v.v_handle;
      return M_OK;
    case T:
      if (code == kPFNull) out->p = NULL;
      else if (code == kPFDLTensorHandle) out->p = v.v_handle;
      else if (code == kPFObjectHandle && v.v_handle == g_tensor_obj) out->p = &g_managed.dl_tensor;
      else return M_TYPE;
      return M_OK;
    case DT:
      if (code != kPFDataType) return M_TYPE;
      out->dt = v.v_type;
      return M_OK;
    case DV:
      if (code != kPFDevice) return M_TYPE;
      out->dv = v.v_device;
      return M_OK;
    default: /* FN; a handle under kPFFuncHandle passed arg_invalid, so it is live */
      if (code != kPFNull && code != kPFFuncHandle) return M_TYPE;
      out->p = code == kPFNull ? NULL : v.v_handle;
      return M_OK;
  }
}

static int same_double(double a, double b) {
  return (isnan(a) && isnan(b)) || memcmp(&a, &b, sizeof(a)) == 0;
}

/* Asserts that (rv, rc) is the packed form of `code`/`v` as a result. */
static void expect_value(const char* who, int code, PFValue v, PFValue rv, int rc) {
  CHECK(rc == code, "%s: result code %d, expected %d", who, rc, code);
  switch (code) {
    case kPFNull:
      break;
    case kPFStr:
      CHECK(strcmp(rv.v_str, v.v_str) == 0, "%s: str result differs", who);
      break;
    case kPFBytes: {
      const PFByteArray* a = rv.v_handle;
      const PFByteArray* b = v.v_handle;
      CHECK(a->size == b->size && (a->size == 0 || memcmp(a->data, b->data, a->size) == 0),
            "%s: bytes result differs (%zu vs %zu bytes)", who, a->size, b->size);
      break;
    }
    case kPFDataType:
      CHECK(memcmp(&rv.v_type, &v.v_type, sizeof(DLDataType)) == 0, "%s: dtype differs", who);
      break;
    case kPFFloat:
      CHECK(same_double(rv.v_float64, v.v_float64), "%s: float differs", who);
      break;
    default:
      CHECK(rv.v_int64 == v.v_int64, "%s: value 0x%llx, expected 0x%llx", who,
            (unsigned long long)rv.v_int64, (unsigned long long)v.v_int64);
  }
}

static void release_result(PFValue rv, int rc) {
  if (is_handle_code(rc)) CHECK(PFObjectFree(rv.v_handle) == 0, "release failed");
}

/* The result a typed function must give for converted arguments `cv`;
 * returns M_OK, or M_RANGE when the result itself cannot be packed. */
static int model_typed_result(int which, const cval* cv, PFValue* out, int* code) {
  const typed_def* d = &g_typed[which];
  out->v_int64 = 0;
  switch (which) {
    case 0:
      out->v_int64 = t_add(cv[0].i, cv[1].i);
      break;
    case 1:
      out->v_int64 = t_mix((int8_t)cv[0].i, (uint16_t)cv[1].i, cv[2].b);
      break;
    case 2:
      out->v_float64 = t_fl(cv[0].d, cv[1].f);
      break;
    case 3:
      out->v_str = cv[0].p;
      break;
    case 4:
      out->v_handle = (void*)cv[0].p;
      break; /* PFFuncCall refused {NULL, n > 0} */
    case 5:
      out->v_int64 = (int64_t)t_u64(cv[0].u);
      break;
    case 6:
      break;
    case 7:
      out->v_handle = (void*)cv[0].p;
      break;
    case 8:
      out->v_type = t_dtype(cv[0].dt);
      break;
    case 9:
      out->v_device = t_device(cv[0].dv);
      break;
    case 10:
      out->v_handle = (void*)cv[0].p;
      break;
    case 11:
      out->v_int64 = t_ndim((DLTensor*)cv[0].p);
      break;
    case 12:
      out->v_float64 =
          t_many((int8_t)cv[0].i, (int16_t)cv[1].i, (int32_t)cv[2].i, cv[3].i, (uint8_t)cv[4].i,
                 (uint16_t)cv[5].i, (uint32_t)cv[6].i, cv[7].u, cv[8].f, cv[9].d, cv[10].b);
      break;
    case 13:
      out->v_int64 = t_not(cv[0].b);
      break;
    default:
      out->v_int64 = t_bits((uint32_t)cv[0].i, (uint8_t)cv[1].i, (int16_t)cv[2].i);
      break;
  }
  switch (d->ret) {
    case VOID:
      *code = kPFNull;
      break;
    case F64:
    case F32:
      *code = kPFFloat;
      break;
    case B:
      *code = kPFBool;
      break;
    case S:
      *code = out->v_str ? kPFStr : kPFNull;
      break;
    case BY:
      *code = kPFBytes;
      break;
    case P:
      *code = out->v_handle ? kPFOpaqueHandle : kPFNull;
      break;
    case DT:
      *code = kPFDataType;
      break;
    case DV:
      *code = kPFDevice;
      break;
    case FN:
      *code = out->v_handle ? kPFFuncHandle : kPFNull;
      break;
    default:
      *code = kPFInt;
      break;
  }
  return M_OK;
}

static void expect_error(int st, const char* kind, const char* frag) {
  CHECK(st == -1, "expected a %s, got status %d", kind, st);
  CHECK(strcmp(PFErrorGetKind(), kind) == 0, "expected kind %s, got %s (%s)", kind,
        PFErrorGetKind(), PFErrorGetMessage());
  CHECK(frag == NULL || strstr(PFErrorGetMessage(), frag) != NULL, "message '%s' lacks '%s'",
        PFErrorGetMessage(), frag);
}

/* ---- the target ---------------------------------------------------------- */

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static int ready;
  if (!ready) {
    setup();
    ready = 1;
  }
  reader r = {data, size};
  int which = rd8(&r) % (N_PACKED + N_TYPED);
  uint8_t nb = rd8(&r);
  int n = nb < 200 ? nb % 20 : nb < 230 ? -(int)(nb - 199) : 16 + (nb - 230);
  if (nb == 255) n = INT_MIN;
  uint8_t raw_misuse = rd8(&r);
  uint8_t misuse = (raw_misuse & 0xe0) == 0xe0 ? raw_misuse & 0x1f : 0; /* one input in eight */
  /* Half the calls go through PFFuncCallFrame, which must behave the same
   * (it has no NULL outputs to pass). */
  int via_frame = (raw_misuse & 0x10) && !(misuse & 16);
  /* The string an argument may carry, from the input's last bytes. */
  memset(g_input_str, 0, sizeof(g_input_str));
  for (size_t i = 0; i + 1 < sizeof(g_input_str) && i < size; ++i)
    g_input_str[i] = (char)(data[size - 1 - i] | 1);

  PFValue args[MAX_ARGS];
  int codes[MAX_ARGS];
  int count = n > 0 ? (n < MAX_ARGS ? n : MAX_ARGS) : 0;
  if (n > MAX_ARGS) n = MAX_ARGS;
  for (int i = 0; i < count; ++i) {
    codes[i] = decode_code(&r);
    args[i] = decode_value(&r, codes[i]);
  }

  PFFunctionHandle fn = which < N_PACKED ? g_packed[which] : g_typed[which - N_PACKED].h;
  if (misuse & 1) fn = (misuse & 2) ? g_boxed : NULL;
  PFValue* pa = (misuse & 4) ? NULL : args;
  int* pc = (misuse & 8) ? NULL : codes;
  PFValue rv;
  int rc = -7;
  int st;
  if (via_frame) {
    PFCallFrame frame = {.ret_val = {.v_int64 = 0},
                         .ret_type_code = rc,
                         .num_args = n,
                         .func = fn,
                         .args = pa,
                         .type_codes = pc};
    st = PFFuncCallFrame(&frame);
    rv = frame.ret_val;
    rc = frame.ret_type_code;
    CHECK(st == 0 || rc == -7, "a failed PFFuncCallFrame wrote the result code");
  } else {
    st = PFFuncCall(fn, pa, pc, n, (misuse & 16) ? NULL : &rv, (misuse & 16) ? NULL : &rc);
  }

  /* Errors PFFuncCall finds in its own parameters, in its order. */
  if (misuse & 1) return expect_error(st, kPFErrTypeError, "'func'"), 0;
  if (misuse & 16) return expect_error(st, kPFErrTypeError, "'ret_val'"), 0;
  if (n < 0) return expect_error(st, kPFErrValueError, "num_args"), 0;
  if (n > 0 && (pa == NULL || pc == NULL))
    return expect_error(st, kPFErrTypeError, pa == NULL ? "'args'" : "'type_codes'"), 0;
  for (int i = 0; i < n; ++i) {
    int bad = arg_invalid(codes[i], args[i]);
    if (bad) {
      char frag[32];
      snprintf(frag, sizeof(frag), "argument %d ", i);
      expect_error(st, bad == 2 ? kPFErrValueError : kPFErrTypeError, frag);
      return 0;
    }
  }

  if (which < N_PACKED) {
    switch (which) {
      case PK_INSPECT: {
        PFValue want = {.v_int64 = n};
        CHECK(st == 0, "inspect failed");
        expect_value("inspect", kPFInt, want, rv, rc);
        return 0;
      }
      case PK_FAIL:
        expect_error(st, n > 0 ? kPFErrValueError : kPFErrRuntimeError,
                     n > 0 ? "asked to fail" : "without recording an error");
        return 0;
      default:
        CHECK(st == 0, "packed function %d failed", which);
        if (n == 0) {
          PFValue none = {.v_int64 = 0};
          expect_value("echo", kPFNull, none, rv, rc);
        } else {
          int i = which == PK_SETALL ? n - 1 : 0;
          int want = codes[i];
          expect_value("echo", want, args[i], rv, rc);
        }
        release_result(rv, rc);
        return 0;
    }
  }

  const typed_def* d = &g_typed[which - N_PACKED];
  if (n != d->nargs) return expect_error(st, kPFErrTypeError, "takes"), 0;
  cval cv[11];
  for (int i = 0; i < n; ++i) {
    int m = model_convert(d->args[i], codes[i], args[i], &cv[i]);
    if (m != M_OK) {
      char frag[32];
      snprintf(frag, sizeof(frag), "argument %d:", i);
      expect_error(st, m == M_TYPE ? kPFErrTypeError : kPFErrValueError, frag);
      return 0;
    }
  }
  PFValue want;
  int want_code = kPFNull;
  if (model_typed_result(which - N_PACKED, cv, &want, &want_code) != M_OK) {
    expect_error(st, kPFErrValueError, "result");
    return 0;
  }
  CHECK(st == 0, "typed %s failed", d->sig);
  expect_value(d->sig, want_code, want, rv, rc);
  release_result(rv, rc);
  return 0;
}
