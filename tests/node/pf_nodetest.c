/* The C side of the Node.js package's tests, beside tests/python/pf_testlib.c
 * (which they load too): calls of a function from several C threads, a
 * function looked up by name and called from C, and a reference released
 * on another thread. Uses only the public API.
 *
 * pfn_init() registers every packed function under "nodetest." (override,
 * so that calling it twice is harmless). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <packedfunc/c_api.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT int pfn_init(void);

static int set_int(PFRetValueHandle ret, int64_t v) {
  PFValue out = {.v_int64 = v};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &out, &code, 1);
}

static void release_result(PFValue v, int code) {
  if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle)
    PFObjectFree(v.v_handle);
}

/* ---- nodetest.call_in_threads(f, threads, n) ---- */

typedef struct {
  PFFunctionHandle f;
  int64_t first, n;
  int64_t sum;
  int failed;
  char kind[PF_ERROR_KIND_MAX];
  char message[512];
  char traceback[2048];
} worker;

static void* worker_main(void* p) {
  worker* w = p;
  for (int64_t i = w->first; i < w->first + w->n; ++i) {
    PFValue arg = {.v_int64 = i}, out;
    int code = kPFInt, out_code;
    if (PFFuncCall(w->f, &arg, &code, 1, &out, &out_code) != 0) {
      /* The error lives in this thread's storage: carry it to the caller. */
      w->failed = 1;
      snprintf(w->kind, sizeof(w->kind), "%s", PFErrorGetKind());
      snprintf(w->message, sizeof(w->message), "%s", PFErrorGetMessage());
      snprintf(w->traceback, sizeof(w->traceback), "%s", PFErrorGetTraceback());
      return NULL;
    }
    if (out_code == kPFInt) w->sum += out.v_int64;
    release_result(out, out_code);
  }
  return NULL;
}

/* Calls f(i) for i in 0 .. threads*n-1, split over `threads` new threads
 * (at most 16), joins them and returns the sum of the int results; the
 * first thread's error fails the call, with a traceback line naming it. */
static int call_in_threads(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 3 || c[0] != kPFFuncHandle || c[1] != kPFInt || c[2] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError,
                            "nodetest.call_in_threads: expected (function, int, int)");
  int64_t threads = a[1].v_int64, per = a[2].v_int64;
  if (threads < 1 || threads > 16 || per < 0)
    return PFErrorSetFormat(kPFErrValueError, "nodetest.call_in_threads: bad counts");
  worker w[16];
  pthread_t th[16];
  memset(w, 0, sizeof(w));
  int started = 0;
  for (int i = 0; i < threads; ++i) {
    w[i].f = a[0].v_handle;
    w[i].first = i * per;
    w[i].n = per;
    if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) break;
    ++started;
  }
  int64_t sum = 0;
  int bad = -1;
  for (int i = 0; i < started; ++i) {
    pthread_join(th[i], NULL);
    sum += w[i].sum;
    if (w[i].failed && bad < 0) bad = i;
  }
  if (started < threads)
    return PFErrorSetFormat(kPFErrRuntimeError, "nodetest.call_in_threads: pthread_create failed");
  if (bad >= 0) {
    PFErrorSet(w[bad].kind, w[bad].message);
    if (w[bad].traceback[0]) PFErrorAppendTraceback(w[bad].traceback);
    PFErrorAppendTraceback("  in nodetest.call_in_threads (a worker thread)");
    return -1;
  }
  return set_int(ret, sum);
}

/* ---- nodetest.call_global(name, args...) ---- */

/* Looks `name` up in the global registry (PFFuncGetGlobal) and calls it
 * with the other arguments: C finding a host's function by name. */
static int call_global(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n < 1 || c[0] != kPFStr)
    return PFErrorSetFormat(kPFErrTypeError, "nodetest.call_global: expected (name, args...)");
  PFFunctionHandle f = NULL;
  if (PFFuncGetGlobal(a[0].v_str, &f) != 0) return -1;
  if (f == NULL)
    return PFErrorSetFormat(kPFErrKeyError, "nodetest.call_global: no function named '%s'",
                            a[0].v_str);
  PFValue out;
  int code;
  int rc = PFFuncCall(f, a + 1, c + 1, n - 1, &out, &code);
  PFFuncFree(f);
  if (rc != 0) {
    PFErrorAppendTraceback("  in nodetest.call_global");
    return -1;
  }
  rc = PFCFuncSetReturn(ret, &out, &code, 1);
  release_result(out, code);
  return rc;
}

/* ---- nodetest.error_of(f, args...) ---- */

/* Calls f(args...) and returns what C sees of its failure, "Kind: message"
 * ("" when it succeeded): the error as a C caller reads it. */
static int error_of(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n < 1 || c[0] != kPFFuncHandle)
    return PFErrorSetFormat(kPFErrTypeError, "nodetest.error_of: expected (function, args...)");
  PFValue out;
  int code;
  char text[600] = "";
  if (PFFuncCall(a[0].v_handle, a + 1, c + 1, n - 1, &out, &code) != 0)
    snprintf(text, sizeof(text), "%s: %s", PFErrorGetKind(), PFErrorGetMessage());
  else release_result(out, code);
  PFValue v = {.v_str = text};
  int sc = kPFStr;
  return PFCFuncSetReturn(ret, &v, &sc, 1);
}

/* ---- nodetest.release_in_thread(obj) ---- */

static void* release_main(void* p) {
  PFObjectFree(p);
  return NULL;
}

/* Takes a reference to any object or function and drops it on a new
 * thread, which it waits for: what remains of the object is released
 * there (a host function's finalizer runs on that thread). */
static int release_in_thread(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)ret, (void)r;
  if (n != 1 || (c[0] != kPFFuncHandle && c[0] != kPFObjectHandle))
    return PFErrorSetFormat(kPFErrTypeError, "nodetest.release_in_thread: expected an object");
  if (PFObjectRetain(a[0].v_handle) != 0) return -1;
  pthread_t th;
  if (pthread_create(&th, NULL, release_main, a[0].v_handle) != 0) {
    PFObjectFree(a[0].v_handle);
    return PFErrorSetFormat(kPFErrRuntimeError, "nodetest.release_in_thread: no thread");
  }
  pthread_join(th, NULL);
  return 0;
}

/* ---- nodetest.make_tensor2d(rows, cols) ---- */

typedef struct {
  DLManagedTensor managed;
  int64_t shape[2];
  float data[];
} matrix;

static void matrix_delete(DLManagedTensor* m) { free(m); }

/* A new C-owned float32 tensor object of rows x cols, holding 0, 1, 2, ...
 * in row-major order. */
static int make_tensor2d(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 2 || c[0] != kPFInt || c[1] != kPFInt || a[0].v_int64 < 0 || a[1].v_int64 < 0 ||
      a[0].v_int64 * a[1].v_int64 > (1 << 24))
    return PFErrorSetFormat(kPFErrValueError, "nodetest.make_tensor2d: expected two small ints");
  int64_t count = a[0].v_int64 * a[1].v_int64;
  matrix* m = calloc(1, sizeof(*m) + sizeof(float) * (size_t)count);
  if (m == NULL) return PFErrorSetFormat(kPFErrMemoryError, "nodetest.make_tensor2d: no memory");
  for (int64_t i = 0; i < count; ++i) m->data[i] = (float)i;
  m->shape[0] = a[0].v_int64;
  m->shape[1] = a[1].v_int64;
  m->managed.dl_tensor = (DLTensor){m->data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, m->shape, NULL, 0};
  m->managed.deleter = matrix_delete;
  PFObjectHandle obj;
  if (PFTensorCreateFromDLPack(&m->managed, &obj) != 0) return -1;
  PFValue out = {.v_handle = obj};
  int code = kPFObjectHandle;
  int rc = PFCFuncSetReturn(ret, &out, &code, 1);
  PFObjectFree(obj);
  return rc;
}

/* ---- nodetest.tensor_sum(t), nodetest.sum_after(t, f) ---- */

/* The sum of a float64, float32 or int32 CPU tensor (compact), as C reads
 * it: a tensor argument, or a tensor object. */
static int sum_of(const char* where, PFValue a, int code, double* sum) {
  DLTensor* t = NULL;
  if (code == kPFDLTensorHandle) t = a.v_handle;
  if (code == kPFObjectHandle && PFTensorGetDLTensor(a.v_handle, &t) != 0) return -1;
  if (t == NULL) return PFErrorSetFormat(kPFErrTypeError, "%s: expected a tensor", where);
  int64_t count = 1;
  for (int i = 0; i < t->ndim; ++i) count *= t->shape[i];
  const char* base = (const char*)t->data + t->byte_offset;
  *sum = 0;
  for (int64_t i = 0; i < count; ++i) {
    if (t->dtype.code == kDLFloat && t->dtype.bits == 64)
      *sum += ((const double*)(const void*)base)[i];
    else if (t->dtype.code == kDLFloat && t->dtype.bits == 32)
      *sum += ((const float*)(const void*)base)[i];
    else if (t->dtype.code == kDLInt && t->dtype.bits == 32)
      *sum += ((const int32_t*)(const void*)base)[i];
    else return PFErrorSetFormat(kPFErrTypeError, "%s: unsupported dtype", where);
  }
  return 0;
}

static int set_float(PFRetValueHandle ret, double v) {
  PFValue out = {.v_float64 = v};
  int code = kPFFloat;
  return PFCFuncSetReturn(ret, &out, &code, 1);
}

static int tensor_sum(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  double sum;
  if (n != 1) return PFErrorSetFormat(kPFErrTypeError, "nodetest.tensor_sum: expected a tensor");
  if (sum_of("nodetest.tensor_sum", a[0], c[0], &sum) != 0) return -1;
  return set_float(ret, sum);
}

/* Calls f() (which may move or shrink the tensor's memory from
 * JavaScript), then sums the tensor: its memory must still be there. */
static int sum_after(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 2 || c[1] != kPFFuncHandle)
    return PFErrorSetFormat(kPFErrTypeError, "nodetest.sum_after: expected (tensor, function)");
  PFValue out;
  int code;
  if (PFFuncCall(a[1].v_handle, NULL, NULL, 0, &out, &code) != 0) return -1;
  double sum;
  if (sum_of("nodetest.sum_after", a[0], c[0], &sum) != 0) return -1;
  return set_float(ret, sum);
}

/* nodetest.long_string(n): a str result of n 'x' characters (up to 2^31),
 * longer than JavaScript's longest string for large n. */
static int long_string(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1 || c[0] != kPFInt || a[0].v_int64 < 0 || a[0].v_int64 > ((int64_t)1 << 31))
    return PFErrorSetFormat(kPFErrValueError, "nodetest.long_string: expected a length");
  size_t len = (size_t)a[0].v_int64;
  char* text = malloc(len + 1);
  if (text == NULL) return PFErrorSetFormat(kPFErrMemoryError, "nodetest.long_string: no memory");
  memset(text, 'x', len);
  text[len] = '\0';
  PFValue out = {.v_str = text};
  int code = kPFStr;
  int rc = PFCFuncSetReturn(ret, &out, &code, 1);
  free(text);
  return rc;
}

/* nodetest.codes(x, y=2.5): the type codes its arguments arrived with, as
 * "int,float": its signature names float64 parameters, which a host
 * passes an integer-valued number to as a float. */
static int codes_of(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)r;
  char text[64] = "";
  for (int i = 0; i < n && i < 4; ++i) {
    if (i) strcat(text, ",");
    strcat(text, PFTypeCodeName(c[i]));
  }
  PFValue out = {.v_str = text};
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &out, &code, 1);
}

/* ---- direct-convention callees (the binding calls them through targets) ---- */

/* nodetest.direct_silent(): fails without recording an error. */
static int direct_silent(void* r, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)r, (void)a, (void)c, (void)n, (void)rv, (void)rc;
  return -1;
}

/* nodetest.direct_greet(s): "hello, " + s, a str result through
 * PFFuncReturnString; any other argument is a TypeError. */
static int direct_greet(void* r, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)r;
  if (n != 1 || c[0] != kPFStr)
    return PFErrorSetFormat(kPFErrTypeError, "nodetest.direct_greet: expected one str");
  char buf[256];
  int len = snprintf(buf, sizeof buf, "hello, %s", a[0].v_str);
  return PFFuncReturnString(kPFStr, buf, len < 0 ? 0 : (size_t)len, rv, rc);
}

/* An adder of nodetest.make_adder: its resource holds k. */
static int direct_add_k(void* r, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  if (n != 1 || c[0] != kPFInt) return PFErrorSetFormat(kPFErrTypeError, "adder: expected one int");
  rv->v_int64 = a[0].v_int64 + *(int64_t*)r;
  *rc = kPFInt;
  return 0;
}

/* A multiplier of nodetest.make_adder. */
static int direct_mul_k(void* r, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  if (n != 1 || c[0] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "multiplier: expected one int");
  rv->v_int64 = a[0].v_int64 * *(int64_t*)r;
  *rc = kPFInt;
  return 0;
}

/* Returns the new function f, whose reference this call then drops. */
static int return_func(PFRetValueHandle ret, PFFunctionHandle f) {
  PFValue out = {.v_handle = f};
  int code = kPFFuncHandle;
  int st = PFCFuncSetReturn(ret, &out, &code, 1);
  PFFuncFree(f);
  return st;
}

/* nodetest.make_adder(k, mul = 0): a new direct function x -> x + k (x * k
 * when mul is nonzero), whose only reference is the result (its finalizer
 * frees k's box). */
static int make_adder(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n < 1 || n > 2 || c[0] != kPFInt || (n == 2 && c[1] != kPFInt))
    return PFErrorSetFormat(kPFErrTypeError, "nodetest.make_adder: expected one or two ints");
  int64_t* k = malloc(sizeof *k);
  if (k == NULL) return PFErrorSetFormat(kPFErrMemoryError, "nodetest.make_adder: out of memory");
  *k = a[0].v_int64;
  PFFunctionHandle f;
  int mul = n == 2 && a[1].v_int64 != 0;
  if (PFFuncCreateDirect(mul ? direct_mul_k : direct_add_k, k, free, &f) != 0) return -1;
  return return_func(ret, f);
}

/* nodetest.make_guarded(direct = 0): a new function g(cb) (setter
 * convention, or direct when `direct` is nonzero) whose only reference is
 * the result. g calls cb(), then returns 42 if its resource is still
 * alive, or fails with a RuntimeError if the resource's finalizer ran
 * meanwhile (its function was freed during its own call).
 * nodetest.guarded_finalized() counts the finalizer's runs. */
static struct {
  int alive;
  int64_t finalized;
} g_guard;

static void guard_finalize(void* r) {
  ((void)r, g_guard.alive = 0);
  g_guard.finalized++;
}

static int guarded_body(int* c, int n, PFValue* a, void* r, int64_t* out) {
  if (n != 1 || c[0] != kPFFuncHandle)
    return PFErrorSetFormat(kPFErrTypeError, "nodetest.guarded: expected one function");
  PFValue rv;
  int rc;
  if (PFFuncCall(a[0].v_handle, NULL, NULL, 0, &rv, &rc) != 0) return -1;
  release_result(rv, rc);
  if (!((int*)r)[0])
    return PFErrorSetFormat(kPFErrRuntimeError, "nodetest.guarded: freed during its own call");
  *out = 42;
  return 0;
}

static int guarded(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  int64_t v;
  return guarded_body(c, n, a, r, &v) != 0 ? -1 : set_int(ret, v);
}

static int guarded_direct(void* r, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  if (guarded_body(c, n, a, r, &rv->v_int64) != 0) return -1;
  *rc = kPFInt;
  return 0;
}

static int make_guarded(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n > 1 || (n == 1 && c[0] != kPFInt))
    return PFErrorSetFormat(kPFErrTypeError, "nodetest.make_guarded: expected at most one int");
  PFFunctionHandle f;
  g_guard.alive = 1;
  int made = n == 1 && a[0].v_int64 != 0
                 ? PFFuncCreateDirect(guarded_direct, &g_guard.alive, guard_finalize, &f)
                 : PFFuncCreateFromCFunc(guarded, &g_guard.alive, guard_finalize, &f);
  if (made != 0) return -1;
  return return_func(ret, f);
}

static int guarded_finalized(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)r;
  return set_int(ret, g_guard.finalized);
}

static int64_t typed_add(int64_t x, int64_t y) { return x + y; }

/* Registers *f, made with status `made`, under `name` (its metadata name
 * too, with `signature` when not NULL) and drops the reference. */
static int publish(int made, PFFunctionHandle* f, const char* name, const char* signature) {
  if (made != 0) return -1;
  int rc = PFFuncSetInfo(*f, name, signature, NULL);
  if (rc == 0) rc = PFFuncRegisterGlobal(name, *f, 1);
  PFFuncFree(*f);
  return rc;
}

int pfn_init(void) {
  PFFunctionHandle f = NULL;
  if (publish(PFFuncCreateDirect(direct_silent, NULL, NULL, &f), &f, "nodetest.direct_silent",
              NULL) != 0 ||
      publish(PFFuncCreateDirect(direct_greet, NULL, NULL, &f), &f, "nodetest.direct_greet",
              NULL) != 0 ||
      publish(PFFuncCreateFromTyped((void*)typed_add, "int64(int64,int64)", &f), &f,
              "nodetest.typed_add", NULL) != 0 ||
      publish(PFFuncCreateFromCFunc(codes_of, NULL, NULL, &f), &f, "nodetest.codes",
              "str(x: float64, y: float64 = 2.5)") != 0)
    return -1;
  static const struct {
    const char* name;
    PFPackedCFunc fn;
  } table[] = {
      {"nodetest.call_in_threads", call_in_threads},
      {"nodetest.call_global", call_global},
      {"nodetest.error_of", error_of},
      {"nodetest.release_in_thread", release_in_thread},
      {"nodetest.make_tensor2d", make_tensor2d},
      {"nodetest.tensor_sum", tensor_sum},
      {"nodetest.sum_after", sum_after},
      {"nodetest.long_string", long_string},
      {"nodetest.make_adder", make_adder},
      {"nodetest.make_guarded", make_guarded},
      {"nodetest.guarded_finalized", guarded_finalized},
  };
  for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); ++i) {
    if (PFFuncCreateFromCFunc(table[i].fn, NULL, NULL, &f) != 0) return -1;
    int rc = PFFuncRegisterGlobal(table[i].name, f, 1);
    PFFuncFree(f);
    if (rc != 0) return -1;
  }
  return 0;
}

/* ---- nodetest.Note: a str field that a method reads while JavaScript
 * runs (callAsync) ----
 *
 * pfn_init_note() registers the type and its functions. watch(note, ms)
 * copies the text, counts itself started, waits until nodetest.note_go(1)
 * (or ms milliseconds), then compares the text it read first with its
 * copy: its length, or -1 when the text changed (it was freed meanwhile:
 * the allocator reuses a freed block's first bytes). */

#include <stdatomic.h>
#include <time.h>

EXPORT int pfn_init_note(void);

typedef struct {
  char* text;
} Note;

static atomic_llong g_note_started;
static atomic_int g_note_go;

static int64_t note_watch(PFObjectHandle self, int64_t ms) {
  void* data = NULL;
  if (PFObjectGetData(self, &data) != 0) return -2;
  const char* seen = __atomic_load_n(&((Note*)data)->text, __ATOMIC_ACQUIRE);
  char copy[256] = "";
  if (seen != NULL) snprintf(copy, sizeof(copy), "%s", seen);
  atomic_fetch_add(&g_note_started, 1);
  for (int64_t i = 0; i < ms && !atomic_load(&g_note_go); ++i) {
    struct timespec t = {0, 1000000};
    nanosleep(&t, NULL);
  }
  if (seen == NULL) return 0;
  return strncmp(seen, copy, sizeof(copy)) != 0 ? -1 : (int64_t)strlen(copy);
}

static int64_t note_started(void) { return atomic_load(&g_note_started); }
static void note_go(int64_t go) { atomic_store(&g_note_go, go != 0); }

int pfn_init_note(void) {
  static const PFFieldDesc fields[] = {PF_FIELD(Note, text, "str", kPFFieldWritable, NULL)};
  static const PFMethodDesc methods[] = {
      PF_METHOD_TYPED("watch", note_watch, "int64(self: obj<nodetest.Note>, ms: int64)", NULL),
  };
  static const PFObjectTypeDesc desc = {.abi = PF_OBJECT_TYPE_DESC_ABI,
                                        .key = "nodetest.Note",
                                        .instance_size = sizeof(Note),
                                        .fields = fields,
                                        .num_fields = PF_COUNTOF(fields),
                                        .methods = methods,
                                        .num_methods = PF_COUNTOF(methods)};
  uint32_t index; /* registering it again (a second load) gives the same index */
  if (PFObjectTypeRegister(&desc, &index) != 0) return -1;
  static const struct {
    const char* name;
    void* fn;
    const char* sig;
  } typed[] = {
      {"nodetest.note_watch", (void*)note_watch, "int64(note: obj<nodetest.Note>, ms: int64)"},
      {"nodetest.note_started", (void*)note_started, "int64()"},
      {"nodetest.note_go", (void*)note_go, "void(go: int64)"},
  };
  for (size_t i = 0; i < sizeof(typed) / sizeof(typed[0]); ++i) {
    PFFunctionHandle f;
    if (PFFuncCreateFromTyped(typed[i].fn, typed[i].sig, &f) != 0) return -1;
    int rc = PFFuncRegisterGlobal(typed[i].name, f, 1);
    PFFuncFree(f);
    if (rc != 0) return -1;
  }
  return 0;
}

/* nodetest.note_call(note, f): calls f() (a callback that may write the
 * note from JavaScript while this call waits for it), then returns the
 * length of the note's text. Registered by pfn_init_note_call(). */

EXPORT int pfn_init_note_call(void);

static int64_t note_call(PFObjectHandle note, PFFunctionHandle f) {
  PFValue out;
  int code;
  if (PFFuncCall(f, NULL, NULL, 0, &out, &code) != 0) return -1;
  release_result(out, code);
  void* data = NULL;
  if (PFObjectGetData(note, &data) != 0) return -2;
  const char* text = ((Note*)data)->text;
  return text != NULL ? (int64_t)strlen(text) : 0;
}

int pfn_init_note_call(void) {
  PFFunctionHandle f;
  if (PFFuncCreateFromTyped((void*)note_call, "int64(note: obj<nodetest.Note>, f: func)", &f) != 0)
    return -1;
  int rc = PFFuncRegisterGlobal("nodetest.note_call", f, 1);
  PFFuncFree(f);
  return rc;
}
