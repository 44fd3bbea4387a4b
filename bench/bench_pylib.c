/*
 * The C side of bench_python.py: packed functions registered under
 * "bench.", and plain C counterparts that raw ctypes calls as baselines.
 * Each pair does the same work.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <valgrind/callgrind.h>

#include "packedfunc/c_api.h"

#define EXPORT __attribute__((visibility("default")))

/* What ctypes calls by name. */
EXPORT int64_t raw_add(int64_t a, int64_t b);
EXPORT int64_t raw_noarg(void);
EXPORT int64_t raw_strlen(const char* s);
EXPORT double raw_first(const double* p);
EXPORT int64_t raw_call_n(int64_t (*cb)(int64_t, int64_t), int64_t n);
EXPORT int bench_init(void);
EXPORT int64_t raw_array_sum(PFObjectHandle a);
/* bench_python.py --count calls it around its runs: bench_measure.h says why. */
EXPORT void bench_count_mark(void);

EXPORT void bench_count_mark(void) { CALLGRIND_DUMP_STATS; }

static int ret_int(PFRetValueHandle ret, int64_t v) {
  PFValue out = {.v_int64 = v};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &out, &code, 1);
}

static int want(const char* fn, int n, int expect, const int* codes, const int* types) {
  if (n != expect)
    return PFErrorSetFormat(kPFErrTypeError, "%s: expected %d arguments", fn, expect);
  for (int i = 0; i < n; ++i)
    if (codes[i] != types[i])
      return PFErrorSetFormat(kPFErrTypeError, "%s: argument %d must be %s", fn, i,
                              PFTypeCodeName(types[i]));
  return 0;
}

static int add(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  static const int t[] = {kPFInt, kPFInt};
  if (want("bench.add", n, 2, c, t)) return -1;
  return ret_int(ret, a[0].v_int64 + a[1].v_int64);
}

static int noarg(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)res;
  if (want("bench.noarg", n, 0, c, NULL)) return -1;
  return ret_int(ret, 7);
}

static int str_len(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  static const int t[] = {kPFStr};
  if (want("bench.strlen", n, 1, c, t)) return -1;
  return ret_int(ret, (int64_t)strlen(a[0].v_str));
}

/* Reads the first float64 of a tensor, as raw_first reads it through a
 * plain pointer. */
static int first(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  static const int t[] = {kPFDLTensorHandle};
  if (want("bench.first", n, 1, c, t)) return -1;
  DLTensor* x = a[0].v_handle;
  if (x->dtype.code != kDLFloat || x->dtype.bits != 64 || x->ndim < 1 || x->shape[0] < 1)
    return PFErrorSetFormat(kPFErrTypeError, "bench.first: expected a non-empty float64 tensor");
  PFValue out = {.v_float64 = ((const double*)x->data)[x->byte_offset / 8]};
  int code = kPFFloat;
  return PFCFuncSetReturn(ret, &out, &code, 1);
}

/* call_n(f, n): calls f(i, i) n times and sums the int results. */
static int call_n(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  static const int t[] = {kPFFuncHandle, kPFInt};
  if (want("bench.call_n", n, 2, c, t)) return -1;
  int64_t sum = 0;
  for (int64_t i = 0; i < a[1].v_int64; ++i) {
    PFValue args[2] = {{.v_int64 = i}, {.v_int64 = i}};
    int codes[2] = {kPFInt, kPFInt};
    PFValue r;
    int rc;
    if (PFFuncCall(a[0].v_handle, args, codes, 2, &r, &rc) != 0) return -1;
    if (rc != kPFInt)
      return PFErrorSetFormat(kPFErrTypeError, "bench.call_n: callback must return int");
    sum += r.v_int64;
  }
  return ret_int(ret, sum);
}

/* array_sum(a): the sum of an Array of ints, read through the public bulk
 * reader a chunk at a time, as a C consumer of a Python list reads it. */
static int array_sum(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  static const int t[] = {kPFObjectHandle};
  if (want("bench.array_sum", n, 1, c, t)) return -1;
  int64_t size, sum = 0;
  if (PFArrayGetSize(a[0].v_handle, &size) != 0) return -1;
  for (int64_t start = 0; start < size; start += 256) {
    PFValue v[256];
    int codes[256];
    int64_t count = size - start < 256 ? size - start : 256;
    if (PFArrayGetItems(a[0].v_handle, start, count, v, codes) != 0) return -1;
    for (int64_t i = 0; i < count; ++i) {
      if (codes[i] != kPFInt)
        return PFErrorSetFormat(kPFErrTypeError, "bench.array_sum: item %lld is not an int",
                                (long long)(start + i));
      sum += v[i].v_int64;
    }
  }
  return ret_int(ret, sum);
}

/* The sum of an Array of ints, as a typed C function (int64(array) and
 * int64(xs: array<int64>): the cost of an element-typed parameter). */
EXPORT int64_t raw_array_sum(PFObjectHandle a) {
  int64_t size = 0, sum = 0;
  if (PFArrayGetSize(a, &size) != 0) return -1;
  for (int64_t start = 0; start < size; start += 256) {
    PFValue v[256];
    int codes[256];
    int64_t count = size - start < 256 ? size - start : 256;
    if (PFArrayGetItems(a, start, count, v, codes) != 0) return -1;
    for (int64_t i = 0; i < count; ++i) sum += v[i].v_int64;
  }
  return sum;
}

/* echo(x): its argument, as the result. */
static int echo(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1) return PFErrorSetFormat(kPFErrTypeError, "bench.echo: expected 1 argument");
  return PFCFuncSetReturn(ret, &a[0], &c[0], 1);
}

/* tensor_sum(t): the sum of a 1-d int64 tensor, the numpy counterpart. */
static int tensor_sum(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  static const int t[] = {kPFDLTensorHandle};
  if (want("bench.tensor_sum", n, 1, c, t)) return -1;
  const DLTensor* x = a[0].v_handle;
  if (x->dtype.code != kDLInt || x->dtype.bits != 64 || x->ndim != 1 ||
      (x->strides && x->strides[0] != 1))
    return PFErrorSetFormat(kPFErrTypeError,
                            "bench.tensor_sum: expected a compact 1-d int64 tensor");
  const int64_t* p = (const int64_t*)((const char*)x->data + x->byte_offset);
  int64_t sum = 0;
  for (int64_t i = 0; i < x->shape[0]; ++i) sum += p[i];
  return ret_int(ret, sum);
}

/* make_array(n): a new Array of the ints 0 .. n-1. */
static int make_array(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  static const int t[] = {kPFInt};
  if (want("bench.make_array", n, 1, c, t)) return -1;
  int64_t size = a[0].v_int64;
  if (size < 0 || size > 1 << 20)
    return PFErrorSetFormat(kPFErrValueError, "bench.make_array: bad size");
  PFValue* vals = malloc(sizeof(PFValue) * (size_t)(size ? size : 1));
  int* codes = malloc(sizeof(int) * (size_t)(size ? size : 1));
  if (vals == NULL || codes == NULL) {
    free(vals);
    free(codes);
    return PFErrorSetFormat(kPFErrMemoryError, "bench.make_array: out of memory");
  }
  for (int64_t i = 0; i < size; ++i) {
    vals[i].v_int64 = i;
    codes[i] = kPFInt;
  }
  PFObjectHandle arr;
  int rc = PFArrayCreate(vals, codes, size, &arr);
  free(vals);
  free(codes);
  if (rc != 0) return -1;
  PFValue out = {.v_handle = arr};
  int code = kPFObjectHandle;
  rc = PFCFuncSetReturn(ret, &out, &code, 1);
  PFObjectFree(arr);
  return rc;
}

/* bench.Pair: a registered object type with two int64 fields, made from
 * Python as Pair(a, b), whose fields and methods Python uses as a class's
 * (the counterpart of a __slots__ class with the same fields). */
typedef struct {
  int64_t a, b;
} BenchPair;

static BenchPair* pair_of(PFObjectHandle self) {
  void* d = NULL;
  PFObjectGetData(self, &d);
  return d;
}

static void pair_init(PFObjectHandle self, int64_t a, int64_t b) {
  BenchPair* p = pair_of(self);
  p->a = a;
  p->b = b;
}

static int64_t pair_sum(PFObjectHandle self) {
  const BenchPair* p = pair_of(self);
  return p->a + p->b;
}

static const PFFieldDesc k_pair_fields[] = {
    PF_FIELD(BenchPair, a, "int64", kPFFieldWritable, NULL),
    PF_FIELD(BenchPair, b, "int64", kPFFieldWritable, NULL),
};
static const PFMethodDesc k_pair_methods[] = {
    PF_METHOD_TYPED("__init__", pair_init, "void(obj<bench.Pair>,int64,int64)", NULL),
    PF_METHOD_TYPED("sum", pair_sum, "int64(obj<bench.Pair>)", NULL),
};
static const PFObjectTypeDesc k_pair_type = {PF_OBJECT_TYPE_DESC_ABI,
                                             "bench.Pair",
                                             NULL,
                                             sizeof(BenchPair),
                                             NULL,
                                             NULL,
                                             k_pair_fields,
                                             PF_COUNTOF(k_pair_fields),
                                             k_pair_methods,
                                             PF_COUNTOF(k_pair_methods)};

/* bench.Node: a tree node, for to_json/from_json of an object graph. */
typedef struct {
  int64_t value;
  char* name;
  PFObjectHandle children;
} BenchNode;

static const PFFieldDesc k_node_fields[] = {
    PF_FIELD(BenchNode, value, "int64", kPFFieldWritable, NULL),
    PF_FIELD(BenchNode, name, "str", kPFFieldWritable, NULL),
    PF_FIELD(BenchNode, children, "list", kPFFieldWritable, NULL),
};
static const PFObjectTypeDesc k_node_type = {
    PF_OBJECT_TYPE_DESC_ABI,   "bench.Node", NULL, sizeof(BenchNode), NULL, NULL, k_node_fields,
    PF_COUNTOF(k_node_fields), NULL,         0};

EXPORT int64_t raw_add(int64_t a, int64_t b) { return a + b; }
EXPORT int64_t raw_noarg(void) { return 7; }
EXPORT int64_t raw_strlen(const char* s) { return (int64_t)strlen(s); }
EXPORT double raw_first(const double* p) { return p[0]; }
EXPORT int64_t raw_call_n(int64_t (*cb)(int64_t, int64_t), int64_t n) {
  int64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += cb(i, i);
  return sum;
}

/* clamp(x, lo=0, hi=1): a typed function with named parameters and
 * defaults, for keyword calls against positional ones. */
static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

/* Registers a typed function under `name` (its metadata name too). */
static int register_typed(const char* name, void* fn, const char* signature) {
  PFFunctionHandle f;
  if (PFFuncCreateFromTyped(fn, signature, &f) != 0) return -1;
  int rc = PFFuncSetInfo(f, name, NULL, NULL);
  if (rc == 0) rc = PFFuncRegisterGlobal(name, f, 1);
  PFFuncFree(f);
  return rc;
}

EXPORT int bench_init(void) {
  static const struct {
    const char* name;
    PFPackedCFunc fn;
    uint32_t flags; /* kPFFuncNonBlocking: Python calls keep the GIL */
  } fns[] = {{"bench.add", add},
             {"bench.noarg", noarg},
             {"bench.strlen", str_len},
             {"bench.first", first},
             {"bench.call_n", call_n},
             {"bench.array_sum", array_sum},
             {"bench.tensor_sum", tensor_sum},
             {"bench.make_array", make_array},
             {"bench.echo", echo},
             /* The same, marked short and non-blocking (issue 34). */
             {"bench.add_quick", add, kPFFuncNonBlocking},
             {"bench.noarg_quick", noarg, kPFFuncNonBlocking},
             {"bench.strlen_quick", str_len, kPFFuncNonBlocking},
             {"bench.call_n_quick", call_n, kPFFuncNonBlocking}};
  for (size_t i = 0; i < sizeof fns / sizeof fns[0]; ++i) {
    PFFunctionHandle f;
    if (PFFuncCreateFromCFunc(fns[i].fn, NULL, NULL, &f) != 0) return -1;
    int rc = PFFuncSetFlags(f, fns[i].flags);
    if (rc == 0) rc = PFFuncRegisterGlobal(fns[i].name, f, 1);
    PFFuncFree(f);
    if (rc != 0) return -1;
  }
  /* raw_add typed (the Node.js binding's typed add, issue 34). */
  if (register_typed("bench.clamp", (void*)clamp,
                     "float64(x: float64, lo: float64 = 0, hi: float64 = 1)") != 0 ||
      register_typed("bench.typed_add", (void*)raw_add, "int64(int64,int64)") != 0)
    return -1;
  uint32_t pair, node;
  if (PFObjectTypeRegister(&k_node_type, &node) != 0) return -1;
  return PFObjectTypeRegister(&k_pair_type, &pair);
}
