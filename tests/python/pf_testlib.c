/* The C side of the Python binding's tests: packed functions that echo,
 * fail, call back into Python (also from threads Python did not start),
 * sleep, poll for signals and hand out tensors, plus two plain C functions
 * for the speed comparison with raw ctypes. Uses only the public API.
 *
 * pft_init() registers every packed function under "testing." (override,
 * so that calling it twice is harmless). */
/* For MAP_ANONYMOUS, which POSIX leaves out. */
#define _DEFAULT_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <packedfunc/c_api.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int pft_init(void);
EXPORT int pft_packed_echo(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r);
EXPORT int64_t pft_add(int64_t a, int64_t b);
EXPORT int64_t pft_call_raw_n(int64_t (*cb)(int64_t, int64_t), int64_t n);
EXPORT int64_t pft_tensors_alive(void);
EXPORT int64_t pft_prepack_calls(void);
EXPORT int pft_start_exit_callers(const char* name, int threads, int fd);
EXPORT int64_t pft_exit_callers_ok(void);
EXPORT int64_t pft_tensor_ndim(const DLTensor* t);
EXPORT int64_t pft_device_code(int64_t scale, DLDevice d);
EXPORT int64_t pft_held_objects(void);
EXPORT int pft_start_object_releaser(int64_t pause_us);
EXPORT int64_t pft_array_size(PFObjectHandle array);
EXPORT int64_t pft_map_size(PFObjectHandle map);
EXPORT PFObjectHandle pft_make_shape(int64_t a, int64_t b);
EXPORT int64_t pft_shape_sum(PFObjectHandle shape);
EXPORT int64_t pft_list_push(PFObjectHandle list, int64_t x);
EXPORT int64_t pft_dict_size(PFObjectHandle dict);
EXPORT PFObjectHandle pft_make_list(int64_t n);
EXPORT double pft_clamp(double x, double lo, double hi);
EXPORT double pft_mean(const DLTensor* x);
EXPORT int64_t pft_type_index(PFObjectHandle obj);
EXPORT int64_t pft_first_code(PFObjectHandle array);
EXPORT PFObjectHandle pft_same(PFObjectHandle obj);

static int set_int(PFRetValueHandle ret, int64_t v) {
  PFValue out = {.v_int64 = v};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &out, &code, 1);
}

static int set_str(PFRetValueHandle ret, const char* s) {
  PFValue out = {.v_str = s};
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &out, &code, 1);
}

static int want(const char* fn, int* codes, int n, int need, int i, int code) {
  if (n < need)
    return PFErrorSetFormat(kPFErrTypeError, "%s: expected %d arguments, got %d", fn, need, n);
  if (code >= 0 && codes[i] != code)
    return PFErrorSetFormat(kPFErrTypeError, "%s: argument %d must be %s, not %s", fn, i,
                            PFTypeCodeName(code), PFTypeCodeName(codes[i]));
  return 0;
}

/* testing.echo(x): returns its argument as it came (the identity). */
static int echo(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1)
    return PFErrorSetFormat(kPFErrTypeError, "testing.echo: expected 1 argument, got %d", n);
  return PFCFuncSetReturn(ret, &a[0], &c[0], 1);
}

/* testing.echo by its address, for Function.from_c_pointer. */
int pft_packed_echo(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  return echo(a, c, n, ret, r);
}

/* testing.type_name(x): the type code name C saw. */
static int type_name(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)r;
  if (want("testing.type_name", c, n, 1, 0, -1)) return -1;
  return set_str(ret, PFTypeCodeName(c[0]));
}

/* testing.nargs(...): the number of arguments. */
static int nargs(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)r;
  return set_int(ret, n);
}

/* testing.add(a, b): int + int. */
static int add(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 2)
    return PFErrorSetFormat(kPFErrTypeError, "testing.add: expected 2 arguments, got %d", n);
  if (want("testing.add", c, n, 2, 0, kPFInt) || want("testing.add", c, n, 2, 1, kPFInt)) return -1;
  return set_int(ret, a[0].v_int64 + a[1].v_int64);
}

/* testing.bytes_len(b): the size of a bytes argument (binary safe). */
static int bytes_len(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.bytes_len", c, n, 1, 0, kPFBytes)) return -1;
  return set_int(ret, (int64_t)((PFByteArray*)a[0].v_handle)->size);
}

/* testing.raise_error(kind, message): fails with that kind. */
static int raise_error(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)ret, (void)r;
  if (want("testing.raise_error", c, n, 2, 0, kPFStr) ||
      want("testing.raise_error", c, n, 2, 1, kPFStr))
    return -1;
  PFErrorSet(a[0].v_str, a[1].v_str);
  return -1;
}

/* testing.fail_silently(): returns -1 without recording an error. */
static int fail_silently(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)ret, (void)r;
  return -1;
}

/* testing.call(f, args...): f(args...), its result or its error. */
static int call(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.call", c, n, 1, 0, kPFFuncHandle)) return -1;
  PFValue out;
  int code;
  if (PFFuncCall(a[0].v_handle, a + 1, c + 1, n - 1, &out, &code) != 0) {
    PFErrorAppendTraceback("  in testing.call");
    return -1;
  }
  int rc = PFCFuncSetReturn(ret, &out, &code, 1);
  if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle)
    PFObjectFree(out.v_handle);
  return rc;
}

/* testing.call_ignoring(f, args...): calls f(args...) and ignores a failure,
 * as C code that never reads the error would: 1 when f failed, else 0. The
 * failed call's error stays this thread's error. */
static int call_ignoring(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.call_ignoring", c, n, 1, 0, kPFFuncHandle)) return -1;
  PFValue out;
  int code;
  if (PFFuncCall(a[0].v_handle, a + 1, c + 1, n - 1, &out, &code) != 0) return set_int(ret, 1);
  if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle)
    PFObjectFree(out.v_handle);
  return set_int(ret, 0);
}

/* testing.call_via_closure(f, x): f as a plain C function pointer
 * int64_t(*)(int64_t), called with x; a failure of f comes back through
 * PFClosureCheckError, as C code that used the pointer would report it. */
static int call_via_closure(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.call_via_closure", c, n, 2, 0, kPFFuncHandle) ||
      want("testing.call_via_closure", c, n, 2, 1, kPFInt))
    return -1;
  PFObjectHandle closure = NULL;
  void* fn = NULL;
  if (PFFuncToCFunction(a[0].v_handle, "int64(int64)", &closure, &fn) != 0) return -1;
  int64_t (*f)(int64_t) = (int64_t(*)(int64_t))(uintptr_t)fn;
  int64_t v = f(a[1].v_int64);
  int rc = PFClosureCheckError(closure);
  PFObjectFree(closure);
  if (rc != 0) {
    PFErrorAppendTraceback("  in testing.call_via_closure");
    return -1;
  }
  return set_int(ret, v);
}

/* testing.call_n(f, n): calls f(i, i) for i in 0..n-1 and sums the int
 * results; the C side of the callback benchmark. */
static int call_n(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.call_n", c, n, 2, 0, kPFFuncHandle) ||
      want("testing.call_n", c, n, 2, 1, kPFInt))
    return -1;
  int64_t sum = 0;
  int codes[2] = {kPFInt, kPFInt};
  for (int64_t i = 0; i < a[1].v_int64; ++i) {
    PFValue args[2] = {{.v_int64 = i}, {.v_int64 = i}}, out;
    int code;
    if (PFFuncCall(a[0].v_handle, args, codes, 2, &out, &code) != 0) return -1;
    if (code != kPFInt)
      return PFErrorSetFormat(kPFErrTypeError, "testing.call_n: callback returned %s",
                              PFTypeCodeName(code));
    sum += out.v_int64;
  }
  return set_int(ret, sum);
}

/* ---- calling from a thread that Python did not start ---- */

typedef struct {
  PFFunctionHandle f;
  PFValue* args;
  int* codes;
  int n;
  int rc;
  PFValue out;
  int code;
  char* text; /* a copy of a str result */
  char kind[PF_ERROR_KIND_MAX];
  char* msg;
  char* tb;
} thread_call;

static char* dup_str(const char* s) {
  size_t n = strlen(s) + 1;
  char* d = malloc(n);
  if (d) memcpy(d, s, n);
  return d;
}

static void* thread_main(void* p) {
  thread_call* t = p;
  t->rc = PFFuncCall(t->f, t->args, t->codes, t->n, &t->out, &t->code);
  if (t->rc != 0) {
    /* The error lives in this thread's storage: carry it to the caller. */
    strncpy(t->kind, PFErrorGetKind(), sizeof(t->kind) - 1);
    t->msg = dup_str(PFErrorGetMessage());
    t->tb = dup_str(PFErrorGetTraceback());
  } else if (t->code == kPFStr) {
    t->text = dup_str(t->out.v_str);
  }
  return NULL;
}

/* testing.call_in_thread(f, args...): f(args...) on a new pthread. */
static int call_in_thread(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.call_in_thread", c, n, 1, 0, kPFFuncHandle)) return -1;
  thread_call t;
  memset(&t, 0, sizeof(t));
  t.f = a[0].v_handle;
  t.args = a + 1;
  t.codes = c + 1;
  t.n = n - 1;
  pthread_t th;
  if (pthread_create(&th, NULL, thread_main, &t) != 0)
    return PFErrorSetFormat(kPFErrRuntimeError, "testing.call_in_thread: pthread_create failed");
  pthread_join(th, NULL);
  int rc = 0;
  if (t.rc != 0) {
    PFErrorSet(t.kind, t.msg ? t.msg : "");
    if (t.tb && t.tb[0]) PFErrorAppendTraceback(t.tb);
    PFErrorAppendTraceback("  in testing.call_in_thread");
    rc = -1;
  } else if (t.code == kPFStr) {
    rc = set_str(ret, t.text ? t.text : "");
  } else if (t.code == kPFBytes) {
    rc = PFErrorSetFormat(kPFErrNotImplementedError, "testing.call_in_thread: bytes result");
  } else {
    rc = PFCFuncSetReturn(ret, &t.out, &t.code, 1);
    if (t.code == kPFFuncHandle || t.code == kPFModuleHandle || t.code == kPFObjectHandle)
      PFObjectFree(t.out.v_handle);
  }
  free(t.text);
  free(t.msg);
  free(t.tb);
  return rc;
}

/* ---- holding a function in C ---- */

static PFFunctionHandle g_kept;
static pthread_mutex_t g_kept_lock = PTHREAD_MUTEX_INITIALIZER;

/* testing.keep(f): C keeps its own reference to f (replacing any other). */
static int keep(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)ret, (void)r;
  if (want("testing.keep", c, n, 1, 0, kPFFuncHandle)) return -1;
  PFFuncRetain(a[0].v_handle);
  pthread_mutex_lock(&g_kept_lock);
  PFFunctionHandle old = g_kept;
  g_kept = a[0].v_handle;
  pthread_mutex_unlock(&g_kept_lock);
  return PFFuncFree(old);
}

/* testing.call_kept(args...): calls the kept function. */
static int call_kept(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  pthread_mutex_lock(&g_kept_lock);
  PFFunctionHandle f = g_kept;
  if (f) PFFuncRetain(f);
  pthread_mutex_unlock(&g_kept_lock);
  if (f == NULL) return PFErrorSetFormat(kPFErrValueError, "testing.call_kept: nothing kept");
  PFValue out;
  int code;
  int rc = PFFuncCall(f, a, c, n, &out, &code);
  if (rc == 0) {
    rc = PFCFuncSetReturn(ret, &out, &code, 1);
    if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle)
      PFObjectFree(out.v_handle);
  }
  PFFuncFree(f);
  return rc;
}

/* testing.release_kept(): drops the kept reference. */
static int release_kept(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)ret, (void)r;
  pthread_mutex_lock(&g_kept_lock);
  PFFunctionHandle old = g_kept;
  g_kept = NULL;
  pthread_mutex_unlock(&g_kept_lock);
  return PFFuncFree(old);
}

/* ---- time, signals ---- */

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
}

/* testing.sleep_ms(ms): sleeps without touching Python. */
static int sleep_fn(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)ret, (void)r;
  if (want("testing.sleep_ms", c, n, 1, 0, kPFInt)) return -1;
  sleep_ms((long)a[0].v_int64);
  return 0;
}

/* testing.poll_signals(max_ms): polls PFEnvCheckSignals every millisecond;
 * fails with the host's error, or returns the milliseconds waited. */
static int poll_signals(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.poll_signals", c, n, 1, 0, kPFInt)) return -1;
  for (int64_t i = 0; i < a[0].v_int64; ++i) {
    if (PFEnvCheckSignals() != 0) return -1;
    sleep_ms(1);
  }
  return set_int(ret, a[0].v_int64);
}

/* ---- tensors ---- */

static atomic_long g_tensors_alive;

typedef struct {
  DLManagedTensor managed;
  int64_t shape[1];
  double data[];
} owned_tensor;

static void owned_deleter(DLManagedTensor* self) {
  free(self); /* `managed` is the first member of owned_tensor */
  atomic_fetch_sub(&g_tensors_alive, 1);
}

/* A new C-owned float64 tensor object 0, 1, ..., len-1. */
static int new_owned_tensor(int64_t len, PFObjectHandle* obj) {
  if (len < 0 || len > (1 << 24))
    return PFErrorSetFormat(kPFErrValueError, "testing.make_tensor: bad length %lld",
                            (long long)len);
  owned_tensor* t = calloc(1, sizeof(*t) + sizeof(double) * (size_t)len);
  if (t == NULL) return PFErrorSetFormat(kPFErrMemoryError, "testing.make_tensor: out of memory");
  for (int64_t i = 0; i < len; ++i) t->data[i] = (double)i;
  t->shape[0] = len;
  DLTensor* d = &t->managed.dl_tensor;
  d->data = t->data;
  d->device = (DLDevice){kDLCPU, 0};
  d->ndim = 1;
  d->dtype = (DLDataType){kDLFloat, 64, 1};
  d->shape = t->shape;
  d->strides = NULL;
  d->byte_offset = 0;
  t->managed.deleter = owned_deleter;
  atomic_fetch_add(&g_tensors_alive, 1);
  return PFTensorCreateFromDLPack(&t->managed, obj);
}

/* testing.make_tensor(n): a new C-owned float64 tensor 0, 1, ..., n-1. */
static int make_tensor(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.make_tensor", c, n, 1, 0, kPFInt)) return -1;
  PFObjectHandle obj;
  if (new_owned_tensor(a[0].v_int64, &obj) != 0) return -1;
  PFValue out = {.v_handle = obj};
  int code = kPFObjectHandle;
  int rc = PFCFuncSetReturn(ret, &out, &code, 1);
  PFObjectFree(obj);
  return rc;
}

int64_t pft_tensors_alive(void) { return atomic_load(&g_tensors_alive); }

/* testing.fill(tensor, value): writes value into every element of a
 * float64, float32 or int64 tensor on the CPU (any strides). */
static int fill(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)ret, (void)r;
  if (want("testing.fill", c, n, 2, 0, kPFDLTensorHandle) ||
      want("testing.fill", c, n, 2, 1, kPFFloat))
    return -1;
  DLTensor* t = a[0].v_handle;
  if (t->device.device_type != kDLCPU)
    return PFErrorSetFormat(kPFErrValueError, "testing.fill: not a CPU tensor");
  int64_t count = 1;
  for (int i = 0; i < t->ndim; ++i) count *= t->shape[i];
  int bytes = t->dtype.bits / 8;
  for (int64_t k = 0; k < count; ++k) {
    /* Element k in row-major order, through the strides when present. */
    int64_t rem = k, off = 0, stride = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
      int64_t idx = rem % t->shape[i];
      rem /= t->shape[i];
      off += idx * (t->strides ? t->strides[i] : stride);
      stride *= t->shape[i];
    }
    char* p = (char*)t->data + t->byte_offset + off * bytes;
    if (t->dtype.code == kDLFloat && t->dtype.bits == 64) {
      double v = a[1].v_float64;
      memcpy(p, &v, 8);
    } else if (t->dtype.code == kDLFloat && t->dtype.bits == 32) {
      float v = (float)a[1].v_float64;
      memcpy(p, &v, 4);
    } else if (t->dtype.code == kDLInt && t->dtype.bits == 64) {
      int64_t v = (int64_t)a[1].v_float64;
      memcpy(p, &v, 8);
    } else {
      return PFErrorSetFormat(kPFErrTypeError, "testing.fill: unsupported dtype");
    }
  }
  return 0;
}

/* testing.tensor_info(tensor): "ndim dtype_code bits lanes data_address". */
static int tensor_info(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.tensor_info", c, n, 1, 0, kPFDLTensorHandle)) return -1;
  DLTensor* t = a[0].v_handle;
  char buf[128];
  snprintf(buf, sizeof(buf), "%d %u %u %u %llu", t->ndim, t->dtype.code, t->dtype.bits,
           t->dtype.lanes, (unsigned long long)(uintptr_t)((char*)t->data + t->byte_offset));
  return set_str(ret, buf);
}

/* testing.borrowed_tensor(): a DLTensor* into static storage (borrowed). */
static double g_static_data[3] = {1.5, 2.5, 3.5};
static int64_t g_static_shape[1] = {3};
static DLTensor g_static_tensor = {g_static_data,  {kDLCPU, 0}, 1, {kDLFloat, 64, 1},
                                   g_static_shape, NULL,        0};
static int borrowed_tensor(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)r;
  PFValue out = {.v_handle = &g_static_tensor};
  int code = kPFDLTensorHandle;
  return PFCFuncSetReturn(ret, &out, &code, 1);
}

/* testing.make_boxed(): a boxed object with a static payload. */
static int make_boxed(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)r;
  static int payload;
  PFObjectHandle obj;
  if (PFObjectCreateBoxed(&payload, NULL, &obj) != 0) return -1;
  PFValue out = {.v_handle = obj};
  int code = kPFObjectHandle;
  int rc = PFCFuncSetReturn(ret, &out, &code, 1);
  PFObjectFree(obj);
  return rc;
}

/* testing.make_func(): a new C function (testing.add) as a return value. */
static int make_func(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)r;
  PFFunctionHandle f;
  if (PFFuncCreateFromCFunc(add, NULL, NULL, &f) != 0) return -1;
  PFValue out = {.v_handle = f};
  int code = kPFFuncHandle;
  int rc = PFCFuncSetReturn(ret, &out, &code, 1);
  PFFuncFree(f);
  return rc;
}

/* ---- signals, tensors and threads for the callback defects ---- */

/* testing.signal_then_call(signum, f, args...): raises the signal on this
 * thread, then calls f(args...): a Python handler then runs on the very
 * entry of the callback. Returns f's result, or its error. */
static int signal_then_call(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.signal_then_call", c, n, 2, 0, kPFInt) ||
      want("testing.signal_then_call", c, n, 2, 1, kPFFuncHandle))
    return -1;
  raise((int)a[0].v_int64);
  PFValue out;
  int code;
  if (PFFuncCall(a[1].v_handle, a + 2, c + 2, n - 2, &out, &code) != 0) return -1;
  int rc = PFCFuncSetReturn(ret, &out, &code, 1);
  if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle)
    PFObjectFree(out.v_handle);
  return rc;
}

/* Writes "v0 v1 ..." of `count` doubles `stride` apart into buf. */
static void format_doubles(char* buf, size_t cap, const double* d, int count, int stride) {
  size_t used = 0;
  buf[0] = '\0';
  for (int i = 0; i < count && used < cap; ++i)
    used += (size_t)snprintf(buf + used, cap - used, i ? " %g" : "%g", d[i * stride]);
}

/* testing.call_with_tensor(f, kind): calls f(t) with a borrowed DLTensor t
 * of the float64 values 1, 2, 3, 4, then returns them as C reads them after
 * the call ("1 2 3 4"), and then reuses or unmaps the memory, as C may
 * once a call is over. kind 0: malloc'ed, overwritten with -7 after the
 * call; 1: the same, but every other element of 8 (strides {2}); 2: a page
 * that is read-only during the call and unmapped after it; 3: as 0, but
 * lent twice, as f(t, t). When f fails, the values are in a traceback line
 * of the error. */
static int call_with_tensor(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.call_with_tensor", c, n, 2, 0, kPFFuncHandle) ||
      want("testing.call_with_tensor", c, n, 2, 1, kPFInt))
    return -1;
  int kind = (int)a[1].v_int64;
  int stride = kind == 1 ? 2 : 1;
  size_t page = (size_t)sysconf(_SC_PAGESIZE);
  double* data;
  if (kind == 2) {
    data = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data == MAP_FAILED) return PFErrorSetFormat(kPFErrMemoryError, "mmap failed");
  } else {
    data = calloc(8, sizeof(double));
    if (data == NULL) return PFErrorSetFormat(kPFErrMemoryError, "out of memory");
  }
  for (int i = 0; i < 8; ++i) data[i] = i % stride ? 100 + i : 1 + i / stride;
  if (kind == 2) mprotect(data, page, PROT_READ);
  int64_t shape[1] = {4}, strides[1] = {stride};
  DLTensor t = {data, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, shape, kind == 1 ? strides : NULL, 0};
  PFValue args[2] = {{.v_handle = &t}, {.v_handle = &t}}, out;
  int codes[2] = {kPFDLTensorHandle, kPFDLTensorHandle}, code;
  int rc = PFFuncCall(a[0].v_handle, args, codes, kind == 3 ? 2 : 1, &out, &code);
  char text[256];
  format_doubles(text, sizeof(text), data, kind == 1 ? 8 : 4, 1);
  if (kind == 2) {
    munmap(data, page);
  } else {
    for (int i = 0; i < 8; ++i) data[i] = -7;
    free(data);
  }
  if (rc != 0) {
    char line[300];
    snprintf(line, sizeof(line), "C read after the call: %s", text);
    PFErrorAppendTraceback(line);
    return -1;
  }
  if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle)
    PFObjectFree(out.v_handle);
  return set_str(ret, text);
}

/* testing.call_with_tensor_object(f, n): calls f(obj) with a new tensor
 * object of the float64 values 0..n-1, drops C's reference, and returns
 * the values as C read them after the call. */
static int call_with_tensor_object(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.call_with_tensor_object", c, n, 2, 0, kPFFuncHandle) ||
      want("testing.call_with_tensor_object", c, n, 2, 1, kPFInt))
    return -1;
  PFObjectHandle obj;
  DLTensor* t;
  if (new_owned_tensor(a[1].v_int64, &obj) != 0) return -1;
  if (PFTensorGetDLTensor(obj, &t) != 0) {
    PFObjectFree(obj);
    return -1;
  }
  PFValue args[1] = {{.v_handle = obj}}, out;
  int codes[1] = {kPFObjectHandle}, code;
  int rc = PFFuncCall(a[0].v_handle, args, codes, 1, &out, &code);
  char text[256];
  format_doubles(text, sizeof(text), t->data, (int)t->shape[0], 1);
  PFObjectFree(obj);
  if (rc != 0) return -1;
  if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle)
    PFObjectFree(out.v_handle);
  return set_str(ret, text);
}

/* testing.call_in_thread_n(f, n): a new pthread calls f() n times and
 * ignores its errors, as C code that never reads them would; returns how
 * many calls failed. */
typedef struct {
  PFFunctionHandle f;
  int64_t n, failed;
} repeat_call;

static void* repeat_main(void* p) {
  repeat_call* rc = p;
  for (int64_t i = 0; i < rc->n; ++i) {
    PFValue out;
    int code;
    if (PFFuncCall(rc->f, NULL, NULL, 0, &out, &code) != 0) {
      rc->failed++;
    } else if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle) {
      PFObjectFree(out.v_handle);
    }
  }
  return NULL;
}

static int call_in_thread_n(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.call_in_thread_n", c, n, 2, 0, kPFFuncHandle) ||
      want("testing.call_in_thread_n", c, n, 2, 1, kPFInt))
    return -1;
  repeat_call rc = {a[0].v_handle, a[1].v_int64, 0};
  pthread_t th;
  if (pthread_create(&th, NULL, repeat_main, &rc) != 0)
    return PFErrorSetFormat(kPFErrRuntimeError, "testing.call_in_thread_n: pthread_create failed");
  pthread_join(th, NULL);
  return set_int(ret, rc.failed);
}

/* ---- C threads that call a Python function while the interpreter exits ---- */

typedef struct {
  char name[256];
  int fd;
} exit_caller;

static atomic_llong g_exit_callers_ok;

/* Calls the global function `name`(i) in a loop, forever; the first error
 * is written to fd as one line "Kind: message". */
static void* exit_caller_main(void* p) {
  exit_caller* ec = p;
  int reported = 0;
  for (int64_t i = 0;; ++i) {
    PFFunctionHandle f = NULL;
    if (PFFuncGetGlobal(ec->name, &f) != 0 || f == NULL) continue;
    PFValue arg = {.v_int64 = i}, out;
    int code = kPFInt, out_code;
    int rc = PFFuncCall(f, &arg, &code, 1, &out, &out_code);
    PFFuncFree(f);
    if (rc == 0) {
      atomic_fetch_add(&g_exit_callers_ok, 1);
    } else {
      if (!reported) dprintf(ec->fd, "%s: %s\n", PFErrorGetKind(), PFErrorGetMessage());
      reported = 1;
      sleep_ms(1); /* leave the CPU to the exiting interpreter */
    }
  }
  return NULL;
}

int pft_start_exit_callers(const char* name, int threads, int fd) {
  for (int i = 0; i < threads; ++i) {
    exit_caller* ec = calloc(1, sizeof(*ec)); /* lives as long as the process */
    if (ec == NULL) return -1;
    snprintf(ec->name, sizeof(ec->name), "%s", name);
    ec->fd = fd;
    pthread_t th;
    if (pthread_create(&th, NULL, exit_caller_main, ec) != 0) return -1;
    pthread_detach(th);
  }
  return 0;
}

int64_t pft_exit_callers_ok(void) { return atomic_load(&g_exit_callers_ok); }

/* ---- objects held by C: kept, handed back, released on other threads ---- */

#define HELD_MAX 4096
static PFObjectHandle g_held[HELD_MAX];
static int64_t g_held_count;
static pthread_mutex_t g_held_lock = PTHREAD_MUTEX_INITIALIZER;

/* testing.hold(obj): C keeps its own reference to any object; returns its
 * slot. */
static int hold(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.hold", c, n, 1, 0, kPFObjectHandle)) return -1;
  pthread_mutex_lock(&g_held_lock);
  int64_t slot = g_held_count < HELD_MAX ? g_held_count++ : -1;
  if (slot >= 0) {
    PFObjectRetain(a[0].v_handle);
    g_held[slot] = a[0].v_handle;
  }
  pthread_mutex_unlock(&g_held_lock);
  if (slot < 0) return PFErrorSetFormat(kPFErrIndexError, "testing.hold: all slots are taken");
  return set_int(ret, slot);
}

/* Takes the object out of `slot` (NULL when empty or out of range). */
static PFObjectHandle take_held(int64_t slot) {
  PFObjectHandle obj = NULL;
  pthread_mutex_lock(&g_held_lock);
  if (slot >= 0 && slot < HELD_MAX) {
    obj = g_held[slot];
    g_held[slot] = NULL;
  }
  pthread_mutex_unlock(&g_held_lock);
  return obj;
}

/* testing.held(slot): the object in the slot (a new reference), or None. */
static int held(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.held", c, n, 1, 0, kPFInt)) return -1;
  PFObjectHandle obj = NULL;
  pthread_mutex_lock(&g_held_lock);
  if (a[0].v_int64 >= 0 && a[0].v_int64 < HELD_MAX) obj = g_held[a[0].v_int64];
  if (obj) PFObjectRetain(obj);
  pthread_mutex_unlock(&g_held_lock);
  if (obj == NULL) return 0;
  PFValue out = {.v_handle = obj};
  int code = kPFObjectHandle;
  int rc = PFCFuncSetReturn(ret, &out, &code, 1);
  PFObjectFree(obj);
  return rc;
}

static void* release_main(void* p) {
  PFObjectFree(p);
  return NULL;
}

/* testing.release_in_thread(slot): drops the slot's reference on a new
 * thread (one Python did not start) and waits for it. */
static int release_in_thread(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)ret, (void)r;
  if (want("testing.release_in_thread", c, n, 1, 0, kPFInt)) return -1;
  PFObjectHandle obj = take_held(a[0].v_int64);
  if (obj == NULL)
    return PFErrorSetFormat(kPFErrValueError, "testing.release_in_thread: empty slot");
  pthread_t th;
  if (pthread_create(&th, NULL, release_main, obj) != 0) {
    PFObjectFree(obj);
    return PFErrorSetFormat(kPFErrRuntimeError, "testing.release_in_thread: no thread");
  }
  pthread_join(th, NULL);
  return 0;
}

int64_t pft_held_objects(void) {
  int64_t count = 0;
  pthread_mutex_lock(&g_held_lock);
  for (int64_t i = 0; i < g_held_count; ++i) count += g_held[i] != NULL;
  pthread_mutex_unlock(&g_held_lock);
  return count;
}

static void* releaser_main(void* p) {
  long pause_us = (long)(intptr_t)p;
  for (int64_t i = 0; i < HELD_MAX; ++i) {
    PFObjectHandle obj = take_held(i);
    if (obj == NULL) continue;
    PFObjectFree(obj);
    struct timespec ts = {0, pause_us * 1000L};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* Starts a detached thread that releases every held object, one each
 * `pause_us` microseconds: it goes on while the interpreter exits. */
int pft_start_object_releaser(int64_t pause_us) {
  if (pause_us < 0 || pause_us > 999999) return -1;
  pthread_t th;
  if (pthread_create(&th, NULL, releaser_main, (void*)(intptr_t)pause_us) != 0) return -1;
  pthread_detach(th);
  return 0;
}

/* A typed C function taking a tensor (registered as testing.typed_ndim). */
int64_t pft_tensor_ndim(const DLTensor* t) { return t ? t->ndim : -1; }

/* A typed C function taking a device (testing.typed_device): scale times
 * the device type, plus its id. */
int64_t pft_device_code(int64_t scale, DLDevice d) { return scale * d.device_type + d.device_id; }

/* ---- a tensor on another device ---- */

typedef struct {
  DLManagedTensor managed;
  int64_t shape[2];
} device_tensor;

static void device_deleter(DLManagedTensor* self) {
  free(self); /* `managed` is the first member of device_tensor */
  atomic_fetch_sub(&g_tensors_alive, 1);
}

/* testing.make_device_tensor(device): a 2x3 float32 tensor object, without
 * strides, that claims to live on `device`; its data pointer is a fake
 * (0x1000 plus a byte_offset of 8) that nothing may read. */
static int make_device_tensor(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.make_device_tensor", c, n, 1, 0, kPFDevice)) return -1;
  device_tensor* t = calloc(1, sizeof(*t));
  if (t == NULL)
    return PFErrorSetFormat(kPFErrMemoryError, "testing.make_device_tensor: out of memory");
  t->shape[0] = 2;
  t->shape[1] = 3;
  DLTensor* d = &t->managed.dl_tensor;
  d->data = (void*)(uintptr_t)0x1000;
  d->device = a[0].v_device;
  d->ndim = 2;
  d->dtype = (DLDataType){kDLFloat, 32, 1};
  d->shape = t->shape;
  d->strides = NULL;
  d->byte_offset = 8;
  t->managed.deleter = device_deleter;
  atomic_fetch_add(&g_tensors_alive, 1);
  PFObjectHandle obj;
  if (PFTensorCreateFromDLPack(&t->managed, &obj) != 0) return -1;
  PFValue out = {.v_handle = obj};
  int code = kPFObjectHandle;
  int rc = PFCFuncSetReturn(ret, &out, &code, 1);
  PFObjectFree(obj);
  return rc;
}

/* ---- plain C, for the raw ctypes comparison ---- */

/* testing.call_each(array, args...): calls every function of an Array with
 * args, and returns an Array of the results (not str or bytes, which live
 * only until the next call). */
static int call_each(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.call_each", c, n, 1, 0, kPFObjectHandle)) return -1;
  int64_t size;
  if (PFArrayGetSize(a[0].v_handle, &size) != 0) return -1;
  PFValue* vals = calloc((size_t)size + 1, sizeof(PFValue));
  int* codes = calloc((size_t)size + 1, sizeof(int));
  int64_t done = 0;
  int rc = -1;
  if (vals == NULL || codes == NULL) {
    PFErrorSetFormat(kPFErrMemoryError, "testing.call_each: out of memory");
    goto out;
  }
  for (; done < size; ++done) {
    PFValue f;
    int code;
    if (PFArrayGetItem(a[0].v_handle, done, &f, &code) != 0) goto out;
    if (code != kPFFuncHandle) {
      PFErrorSetFormat(kPFErrTypeError, "testing.call_each: item %lld is %s, not a function",
                       (long long)done, PFTypeCodeName(code));
      goto out;
    }
    if (PFFuncCall(f.v_handle, a + 1, c + 1, n - 1, &vals[done], &codes[done]) != 0) goto out;
    if (codes[done] == kPFStr || codes[done] == kPFBytes) {
      codes[done] = kPFNull;
      PFErrorSetFormat(kPFErrTypeError, "testing.call_each: item %lld returned a str or bytes",
                       (long long)done);
      goto out;
    }
  }
  PFObjectHandle arr;
  if (PFArrayCreate(vals, codes, size, &arr) != 0) goto out;
  PFValue v = {.v_handle = arr};
  int code = kPFObjectHandle;
  rc = PFCFuncSetReturn(ret, &v, &code, 1);
  PFObjectFree(arr);
out:
  /* The results' handles are new references: the Array took its own. */
  for (int64_t i = 0; i < done && vals != NULL && codes != NULL; ++i)
    if (codes[i] == kPFFuncHandle || codes[i] == kPFModuleHandle || codes[i] == kPFObjectHandle)
      PFObjectFree(vals[i].v_handle);
  free(vals);
  free(codes);
  return rc;
}

/* testing.map_get(map, key): the value of key (str or int) as C's lookup
 * finds it, or null when it is absent. */
static int map_get(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.map_get", c, n, 2, 0, kPFObjectHandle)) return -1;
  PFValue v;
  int code, found;
  if (PFMapGetItem(a[0].v_handle, a[1], c[1], &v, &code, &found) != 0) return -1;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* testing.object_type(x): the object type name of an object argument. */
static int object_type(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.object_type", c, n, 1, 0, kPFObjectHandle)) return -1;
  uint32_t ti;
  if (PFObjectGetTypeIndex(a[0].v_handle, &ti) != 0) return -1;
  return set_str(ret, PFObjectTypeName(ti));
}

int64_t pft_array_size(PFObjectHandle array) {
  int64_t size = -1;
  return PFArrayGetSize(array, &size) == 0 ? size : -1;
}

/* Element types (signature.h): what a typed function was given. */
int64_t pft_type_index(PFObjectHandle obj) {
  uint32_t index = 0;
  return obj != NULL && PFObjectGetTypeIndex(obj, &index) == 0 ? (int64_t)index : -1;
}

/* The type code of item 0 of an Array, or -1. */
int64_t pft_first_code(PFObjectHandle array) {
  PFValue v;
  int code = -1;
  return PFArrayGetItem(array, 0, &v, &code) == 0 ? code : -1;
}

/* Its argument, as a new reference (a result transfers one). */
PFObjectHandle pft_same(PFObjectHandle obj) {
  if (obj != NULL) PFObjectRetain(obj);
  return obj;
}

int64_t pft_map_size(PFObjectHandle map) {
  int64_t size = -1;
  return PFMapGetSize(map, &size) == 0 ? size : -1;
}

/* A new Shape (a, b); NULL (null) when it cannot be made. */
PFObjectHandle pft_make_shape(int64_t a, int64_t b) {
  int64_t dims[2] = {a, b};
  PFObjectHandle out = NULL;
  return PFShapeCreate(dims, 2, &out) == 0 ? out : NULL;
}

/* The sum of a Shape's dimensions (for a typed `shape` parameter). */
int64_t pft_shape_sum(PFObjectHandle shape) {
  const int64_t* dims = NULL;
  int64_t ndim = 0, sum = 0;
  if (PFShapeGetData(shape, &dims, &ndim) != 0) return -1;
  for (int64_t i = 0; i < ndim; ++i) sum += dims[i];
  return sum;
}

int64_t pft_add(int64_t a, int64_t b) { return a + b; }

/* ---- List and Dict, changed in C ---- */

/* Appends x to a List (a typed `list` parameter); its new size, or -1. */
int64_t pft_list_push(PFObjectHandle list, int64_t x) {
  PFValue v = {.v_int64 = x};
  int64_t size = -1;
  if (PFListAppend(list, v, kPFInt) != 0 || PFListGetSize(list, &size) != 0) return -1;
  return size;
}

/* The size of a Dict (a typed `dict` parameter), or -1. */
int64_t pft_dict_size(PFObjectHandle dict) {
  int64_t size = -1;
  return PFDictGetSize(dict, &size) == 0 ? size : -1;
}

/* A new List of the ints 0 .. n-1 (a typed `list` result); NULL on error. */
PFObjectHandle pft_make_list(int64_t n) {
  PFObjectHandle out = NULL;
  if (PFListCreate(NULL, NULL, 0, &out) != 0) return NULL;
  for (int64_t i = 0; i < n; ++i) {
    PFValue v = {.v_int64 = i};
    if (PFListAppend(out, v, kPFInt) != 0) {
      PFObjectFree(out);
      return NULL;
    }
  }
  return out;
}

/* testing.list_append(list, x): appends x to a List in C; returns the new
 * size. */
static int list_append(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.list_append", c, n, 2, 0, kPFObjectHandle)) return -1;
  int64_t size;
  if (PFListAppend(a[0].v_handle, a[1], c[1]) != 0) return -1;
  if (PFListGetSize(a[0].v_handle, &size) != 0) return -1;
  return set_int(ret, size);
}

/* testing.list_pop(list, i): removes and returns the item at i in C. */
static int list_pop(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.list_pop", c, n, 2, 0, kPFObjectHandle) ||
      want("testing.list_pop", c, n, 2, 1, kPFInt))
    return -1;
  PFValue v;
  int code;
  if (PFListPop(a[0].v_handle, a[1].v_int64, &v, &code) != 0) return -1;
  int rc = PFCFuncSetReturn(ret, &v, &code, 1);
  if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle)
    PFObjectFree(v.v_handle);
  return rc;
}

/* testing.dict_set(dict, key, value): sets an entry in C; returns the new
 * size. */
static int dict_set(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.dict_set", c, n, 3, 0, kPFObjectHandle)) return -1;
  int64_t size;
  if (PFDictSetItem(a[0].v_handle, a[1], c[1], a[2], c[2]) != 0) return -1;
  if (PFDictGetSize(a[0].v_handle, &size) != 0) return -1;
  return set_int(ret, size);
}

/* testing.dict_get(dict, key): the value of key as C's lookup finds it,
 * or null when absent. */
static int dict_get(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (want("testing.dict_get", c, n, 2, 0, kPFObjectHandle)) return -1;
  PFValue v;
  int code = kPFNull, found;
  if (PFDictGetItem(a[0].v_handle, a[1], c[1], &v, &code, &found) != 0) return -1;
  if (!found) {
    v.v_handle = NULL;
    code = kPFNull;
  }
  int rc = PFCFuncSetReturn(ret, &v, &code, 1);
  if (found && (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle))
    PFObjectFree(v.v_handle);
  return rc;
}

/* Named parameters with defaults, and a constrained tensor (testing.clamp,
 * testing.mean): keyword calls and inspect.signature. */
double pft_clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }
double pft_mean(const DLTensor* x) {
  const double* d = (const double*)((const char*)x->data + x->byte_offset);
  double sum = 0;
  for (int64_t i = 0; i < x->shape[0]; ++i) sum += d[i];
  return x->shape[0] ? sum / (double)x->shape[0] : 0;
}

/* testing.kw_args(a, b="z", c="cpu:0", d=null): a packed function with
 * a signature as metadata; returns its arguments as an Array, so that a
 * test sees what a keyword call passed. */
static int kw_args(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  PFObjectHandle arr;
  if (PFArrayCreate(a, c, n, &arr) != 0) return -1;
  PFValue out = {.v_handle = arr};
  int code = kPFObjectHandle;
  int rc = PFCFuncSetReturn(ret, &out, &code, 1);
  PFObjectFree(arr);
  return rc;
}

int64_t pft_call_raw_n(int64_t (*cb)(int64_t, int64_t), int64_t n) {
  int64_t sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += cb(i, i);
  return sum;
}

/* testing.wsum(x, w): x times the sum of the float64 tensor w. Its
 * pre-pack hook packs w into a boxed double holding that sum, so a bound
 * call reads the sum instead of the tensor; pft_prepack_calls counts the
 * hook's runs. */
static atomic_int g_prepack_calls;
int64_t pft_prepack_calls(void) { return atomic_load(&g_prepack_calls); }

static int tensor_sum(PFValue v, int code, double* out) {
  DLTensor* t = NULL;
  if (code == kPFDLTensorHandle) t = v.v_handle;
  else if (code != kPFObjectHandle || PFTensorGetDLTensor(v.v_handle, &t) != 0) return -1;
  if (t->dtype.code != kDLFloat || t->dtype.bits != 64 || t->ndim != 1)
    return PFErrorSetFormat(kPFErrTypeError, "testing.wsum: w must be 1-d float64");
  double sum = 0;
  for (int64_t i = 0; i < t->shape[0]; ++i)
    sum += ((const double*)((const char*)t->data + t->byte_offset))[i];
  *out = sum;
  return 0;
}

static int wsum(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 2 || c[0] != kPFFloat)
    return PFErrorSetFormat(kPFErrTypeError, "testing.wsum: want (float, w)");
  double sum = 0;
  uint32_t type = 0;
  if (c[1] == kPFObjectHandle && PFObjectGetTypeIndex(a[1].v_handle, &type) == 0 &&
      type == kPFObjectBoxed) {
    void* p = NULL;
    if (PFObjectGetBoxedPayload(a[1].v_handle, &p) != 0) return -1;
    sum = *(double*)p;
  } else if (tensor_sum(a[1], c[1], &sum) != 0) {
    return -1;
  }
  PFValue v = {.v_float64 = a[0].v_float64 * sum};
  int code = kPFFloat;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void free_boxed_double(void* p) { PFMemFree(p); }

static int wsum_prepack(void* r, int position, PFValue value, int code,
                        const PFAllocator* allocator, PFValue* out, int* out_code, int* is_packed) {
  (void)r;
  atomic_fetch_add(&g_prepack_calls, 1);
  if (position != 1) {
    *is_packed = 0;
    return 0;
  }
  double sum = 0;
  if (tensor_sum(value, code, &sum) != 0) return -1;
  double* p = allocator->malloc_fn(sizeof(double), allocator->user_data);
  if (p == NULL) return PFErrorSetFormat(kPFErrMemoryError, "testing.wsum: no memory");
  *p = sum;
  if (PFObjectCreateBoxed(p, free_boxed_double, &out->v_handle) != 0) return -1;
  *out_code = kPFObjectHandle;
  *is_packed = 1;
  return 0;
}

int pft_init(void) {
  static const struct {
    const char* name;
    PFPackedCFunc fn;
    uint32_t flags; /* kPFFuncNonBlocking: Python calls keep the GIL */
  } table[] = {
      {"testing.echo", echo},
      {"testing.type_name", type_name},
      {"testing.nargs", nargs},
      {"testing.add", add},
      {"testing.bytes_len", bytes_len},
      {"testing.raise_error", raise_error},
      {"testing.fail_silently", fail_silently},
      {"testing.call", call},
      {"testing.call_ignoring", call_ignoring},
      {"testing.call_via_closure", call_via_closure},
      {"testing.call_n", call_n},
      {"testing.call_in_thread", call_in_thread},
      {"testing.keep", keep},
      {"testing.call_kept", call_kept},
      {"testing.release_kept", release_kept},
      {"testing.sleep_ms", sleep_fn},
      {"testing.poll_signals", poll_signals},
      {"testing.make_tensor", make_tensor},
      {"testing.fill", fill},
      {"testing.tensor_info", tensor_info},
      {"testing.borrowed_tensor", borrowed_tensor},
      {"testing.make_boxed", make_boxed},
      {"testing.make_func", make_func},
      {"testing.signal_then_call", signal_then_call},
      {"testing.call_with_tensor", call_with_tensor},
      {"testing.call_with_tensor_object", call_with_tensor_object},
      {"testing.call_in_thread_n", call_in_thread_n},
      {"testing.hold", hold},
      {"testing.held", held},
      {"testing.release_in_thread", release_in_thread},
      {"testing.make_device_tensor", make_device_tensor},
      {"testing.call_each", call_each},
      {"testing.map_get", map_get},
      {"testing.object_type", object_type},
      {"testing.list_append", list_append},
      {"testing.list_pop", list_pop},
      {"testing.dict_set", dict_set},
      {"testing.dict_get", dict_get},
      /* The same functions, marked non-blocking: Python keeps the GIL. */
      {"testing.quick_add", add, kPFFuncNonBlocking},
      {"testing.quick_call", call, kPFFuncNonBlocking},
      {"testing.quick_sleep_ms", sleep_fn, kPFFuncNonBlocking},
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i) {
    PFFunctionHandle f;
    if (PFFuncCreateFromCFunc(table[i].fn, NULL, NULL, &f) != 0) return -1;
    int rc = PFFuncSetFlags(f, table[i].flags);
    if (rc == 0) rc = PFFuncRegisterGlobal(table[i].name, f, 1);
    PFFuncFree(f);
    if (rc != 0) return -1;
  }
  {
    PFFunctionHandle f;
    if (PFFuncCreateFromCFunc(wsum, NULL, NULL, &f) != 0) return -1;
    int rc = PFFuncSetPrePack(f, "testing/wsum", wsum_prepack);
    if (rc == 0) rc = PFFuncRegisterGlobal("testing.wsum", f, 1);
    PFFuncFree(f);
    if (rc != 0) return -1;
  }
  static const struct {
    const char* name;
    void* fn;
    const char* signature;
  } typed[] = {
      {"testing.typed_add", (void*)pft_add, "int64(int64,int64)"},
      {"testing.typed_ndim", (void*)pft_tensor_ndim, "int64(tensor)"},
      {"testing.typed_device", (void*)pft_device_code, "int64(int64,device)"},
      {"testing.typed_array_size", (void*)pft_array_size, "int64(array)"},
      {"testing.typed_map_size", (void*)pft_map_size, "int64(map)"},
      {"testing.typed_make_shape", (void*)pft_make_shape, "shape(int64,int64)"},
      {"testing.typed_list_push", (void*)pft_list_push, "int64(list,int64)"},
      {"testing.typed_dict_size", (void*)pft_dict_size, "int64(dict)"},
      {"testing.typed_make_list", (void*)pft_make_list, "list(int64)"},
      {"testing.clamp", (void*)pft_clamp, "float64(x: float64, lo: float64 = 0, hi: float64 = 1)"},
      {"testing.mean", (void*)pft_mean, "float64(x: tensor<float64, 1, contiguous>)"},
  };
  for (size_t i = 0; i < sizeof(typed) / sizeof(typed[0]); ++i) {
    PFFunctionHandle f;
    if (PFFuncCreateFromTyped(typed[i].fn, typed[i].signature, &f) != 0) return -1;
    /* Named as a module's function is: keyword-call errors say clamp(). */
    int named =
        strcmp(typed[i].name, "testing.clamp") == 0 || strcmp(typed[i].name, "testing.mean") == 0;
    int rc = named ? PFFuncSetInfo(f, typed[i].name + 8, NULL, NULL) : 0;
    if (rc == 0) rc = PFFuncRegisterGlobal(typed[i].name, f, 1);
    PFFuncFree(f);
    if (rc != 0) return -1;
  }
  {
    PFFunctionHandle f;
    if (PFFuncCreateFromCFunc(kw_args, NULL, NULL, &f) != 0) return -1;
    int rc =
        PFFuncSetInfo(f, "testing.kw_args",
                      "array(a: int64, b: str = \"z\", c: device = \"cpu\", d: any = null)", NULL);
    if (rc == 0) rc = PFFuncRegisterGlobal("testing.kw_args", f, 1);
    PFFuncFree(f);
    if (rc != 0) return -1;
  }
  return 0;
}
