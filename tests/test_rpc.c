/* Remote functions (libpackedfunc_rpc): values of every kind across a call,
 * errors, timeouts, callbacks both ways, returned functions, the exposed
 * prefixes, CURVE, the protocol version, malformed messages and bad input.
 * Servers run in this process on 127.0.0.1 with ephemeral ports, or as
 * `pf serve` processes that the tests start and stop. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <msgpack.h>
#include <pthread.h>
#include <zmq.h>

#include "internal.h" /* the wire's constants, for the raw peers */
#include "packedfunc/rpc.h"
#include "support/pf_test.h"
#include "support/pf_zmq_tsan.h"

#ifndef PF_TEST_CLI_REL
#error "the Makefile passes PF_TEST_CLI_REL and PF_TEST_DEMO_PLUGIN"
#endif

/* ---- server-side functions (registered under "t.") ---- */

static int f_echo(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  return pf_test_echo(a, c, n, ret, r);
}

static int f_add(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 2 || c[0] != kPFInt || c[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "t.add: expected two ints");
  PFValue v = {.v_int64 = a[0].v_int64 + a[1].v_int64};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static int f_fail(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)ret, (void)r;
  return PF_ERROR(kPFErrIndexError, "t.fail: index 7 is out of range");
}

/* Describes a tensor argument: [ndim, shape..., sum of its int32 data]. */
static int f_tensor_info(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  DLTensor* t = NULL;
  if (n != 1) return PFErrorSetFormat(kPFErrTypeError, "t.tensor_info: one argument");
  if (c[0] == kPFDLTensorHandle) t = a[0].v_handle;
  else if (c[0] != kPFObjectHandle || PFTensorGetDLTensor(a[0].v_handle, &t) != 0)
    return PFErrorSetFormat(kPFErrTypeError, "t.tensor_info: not a tensor (code %d)", c[0]);
  if (t->strides != NULL) return PFErrorSetFormat(kPFErrValueError, "not compact");
  int64_t count = 1, sum = 0;
  for (int i = 0; i < t->ndim; ++i) count *= t->shape[i];
  for (int64_t i = 0; i < count; ++i) sum += ((int32_t*)t->data)[i] * (i + 1);
  PFValue vals[6];
  int codes[6];
  int k = 0;
  vals[k].v_int64 = c[0];
  codes[k++] = kPFInt;
  vals[k].v_int64 = t->ndim;
  codes[k++] = kPFInt;
  for (int i = 0; i < t->ndim && i < 2; ++i) {
    vals[k].v_int64 = t->shape[i];
    codes[k++] = kPFInt;
  }
  vals[k].v_int64 = sum;
  codes[k++] = kPFInt;
  PFObjectHandle arr = NULL;
  if (PFArrayCreate(vals, codes, k, &arr) != 0) return -1;
  PFValue v = {.v_handle = arr};
  int code = kPFObjectHandle;
  int st = PFCFuncSetReturn(ret, &v, &code, 1);
  PFObjectFree(arr);
  return st;
}

/* t.apply(f, x...): calls f(x...) and returns its result. */
static int f_apply(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n < 1 || c[0] != kPFFuncHandle)
    return PFErrorSetFormat(kPFErrTypeError, "t.apply: argument 0 must be a function");
  PFValue rv;
  int rc;
  if (PFFuncCall(a[0].v_handle, a + 1, c + 1, n - 1, &rv, &rc) != 0) return -1;
  int st = PFCFuncSetReturn(ret, &rv, &rc, 1);
  if (rc == kPFFuncHandle || rc == kPFObjectHandle || rc == kPFModuleHandle)
    PFObjectFree(rv.v_handle);
  return st;
}

/* t.apply_in_thread(f, x): calls f(x) on a thread of its own, which
 * serves no request: the callback is routed by the function alone. */
typedef struct {
  PFFunctionHandle f;
  PFValue arg, rv;
  int code, rc, status;
  char err[256];
} thread_call;
static void* run_thread_call(void* p) {
  thread_call* t = p;
  int code = kPFInt;
  t->status = PFFuncCall(t->f, &t->arg, &code, 1, &t->rv, &t->rc);
  if (t->status != 0) snprintf(t->err, sizeof t->err, "%s", PFErrorGetMessage());
  return NULL;
}
static int f_apply_in_thread(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 2 || c[0] != kPFFuncHandle || c[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "t.apply_in_thread: (function, int)");
  thread_call t = {.f = a[0].v_handle, .arg = a[1]};
  pthread_t th;
  if (pthread_create(&th, NULL, run_thread_call, &t) != 0)
    return PFErrorSetFormat(kPFErrRuntimeError, "no thread");
  pthread_join(th, NULL);
  if (t.status != 0) return PFErrorSetFormat(kPFErrRuntimeError, "in thread: %s", t.err);
  return PFCFuncSetReturn(ret, &t.rv, &t.rc, 1);
}

/* t.make_adder(k): a function x -> x + k. */
static int adder(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  if (n != 1 || c[0] != kPFInt) return PFErrorSetFormat(kPFErrTypeError, "adder: one int");
  PFValue v = {.v_int64 = a[0].v_int64 + (int64_t)(intptr_t)r};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
static atomic_int g_adders_freed;
static void adder_fin(void* r) {
  (void)r;
  atomic_fetch_add(&g_adders_freed, 1);
}
/* The adders of t.adders_then_boxed count apart: an adder of an earlier
 * test that its server frees late must not count as one of these. */
static atomic_int g_boxed_adders_freed;
static void boxed_adder_fin(void* r) {
  (void)r;
  atomic_fetch_add(&g_boxed_adders_freed, 1);
}
static int f_make_adder(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1 || c[0] != kPFInt) return PFErrorSetFormat(kPFErrTypeError, "one int");
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(adder, (void*)(intptr_t)a[0].v_int64, adder_fin, &f) != 0) return -1;
  PFValue v = {.v_handle = f};
  int code = kPFFuncHandle;
  int st = PFCFuncSetReturn(ret, &v, &code, 1);
  PFFuncFree(f);
  return st;
}

/* t.keep(f) keeps a callback past its call; t.call_kept() calls it. */
static PFFunctionHandle g_kept;
static int f_keep(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)ret, (void)r;
  if (n != 1 || c[0] != kPFFuncHandle) return PFErrorSetFormat(kPFErrTypeError, "a function");
  PFFuncRetain(a[0].v_handle);
  PFFuncFree(g_kept);
  g_kept = a[0].v_handle;
  return 0;
}
/* Keeps a tensor object past the call (t.keep_tensor), and sums its
 * bytes later (t.kept_tensor_sum): a tensor that arrived must outlive the
 * message it came in. */
static PFObjectHandle g_kept_tensor;
static int f_keep_tensor(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)ret, (void)r;
  DLTensor* t = NULL;
  if (n != 1 || c[0] != kPFObjectHandle || PFTensorGetDLTensor(a[0].v_handle, &t) != 0)
    return PFErrorSetFormat(kPFErrTypeError, "t.keep_tensor: a tensor object");
  PFObjectRetain(a[0].v_handle);
  PFObjectFree(g_kept_tensor);
  g_kept_tensor = a[0].v_handle;
  return 0;
}
static int64_t tensor_byte_sum(const DLTensor* t) {
  int64_t count = 1, sum = 0;
  for (int i = 0; i < t->ndim; ++i) count *= t->shape[i];
  size_t bytes = (size_t)count * (t->dtype.bits / 8u) * t->dtype.lanes;
  for (size_t i = 0; i < bytes; ++i) sum += ((const uint8_t*)t->data)[i];
  return sum;
}
static int f_kept_tensor_sum(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)r;
  DLTensor* t = NULL;
  if (g_kept_tensor == NULL || PFTensorGetDLTensor(g_kept_tensor, &t) != 0)
    return PFErrorSetFormat(kPFErrRuntimeError, "t.kept_tensor_sum: nothing kept");
  PFValue v = {.v_int64 = tensor_byte_sum(t)};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
static int f_call_kept(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)r;
  PFValue rv;
  int rc;
  if (PFFuncCall(g_kept, NULL, NULL, 0, &rv, &rc) != 0) return -1;
  return PFCFuncSetReturn(ret, &rv, &rc, 1);
}

/* t.block(): waits until the test opens the gate (a pipe). */
static int g_gate[2] = {-1, -1};
static int f_block(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)ret, (void)r;
  char b;
  if (read(g_gate[0], &b, 1) != 1) return PFErrorSetFormat(kPFErrRuntimeError, "gate");
  return 0;
}

/* t.sleep_ms(ms): returns ms after that many milliseconds, or at once when
 * the test sets g_wake_sleepers (so that a call left running after its
 * client gave up does not hold a worker for long). */
static atomic_int g_wake_sleepers;
static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
static int f_sleep_ms(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1 || c[0] != kPFInt) return PFErrorSetFormat(kPFErrTypeError, "t.sleep_ms: one int");
  int64_t end = now_ms() + a[0].v_int64;
  while (now_ms() < end && !atomic_load(&g_wake_sleepers)) {
    struct timespec ts = {0, 5 * 1000000L};
    nanosleep(&ts, NULL);
  }
  PFValue v = {.v_int64 = a[0].v_int64};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* t.bytes(n): n bytes (a large reply from a small request). */
static int f_bytes(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1 || c[0] != kPFInt || a[0].v_int64 < 0 || a[0].v_int64 > (1 << 24))
    return PFErrorSetFormat(kPFErrTypeError, "t.bytes: one int in [0, 2^24]");
  static const char zeros[1 << 16];
  char* big = a[0].v_int64 <= (int64_t)sizeof zeros ? NULL : calloc(1, (size_t)a[0].v_int64);
  PFByteArray b = {big ? big : zeros, (size_t)a[0].v_int64};
  PFValue v = {.v_handle = &b};
  int code = kPFBytes;
  int st = PFCFuncSetReturn(ret, &v, &code, 1);
  free(big);
  return st;
}

/* t.empty_maps(n): an array of n empty maps (one map, n times): one
 * byte each on the wire, far more to decode. */
static int f_empty_maps(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1 || c[0] != kPFInt || a[0].v_int64 < 0 || a[0].v_int64 > (1 << 22))
    return PFErrorSetFormat(kPFErrTypeError, "t.empty_maps: one int in [0, 2^22]");
  PFObjectHandle map = NULL, arr = NULL;
  if (PFMapCreate(NULL, NULL, NULL, NULL, 0, &map) != 0) return -1;
  PFValue* vals = calloc((size_t)a[0].v_int64 + 1, sizeof *vals);
  int* codes = calloc((size_t)a[0].v_int64 + 1, sizeof *codes);
  for (int64_t i = 0; vals && codes && i < a[0].v_int64; ++i) {
    vals[i].v_handle = map;
    codes[i] = kPFObjectHandle;
  }
  int st = vals && codes ? PFArrayCreate(vals, codes, a[0].v_int64, &arr) : -1;
  if (st == 0) {
    PFValue v = {.v_handle = arr};
    int code = kPFObjectHandle;
    st = PFCFuncSetReturn(ret, &v, &code, 1);
  }
  PFObjectFree(arr);
  PFObjectFree(map);
  free(vals);
  free(codes);
  return st;
}

/* t.handle(): returns an opaque handle, which cannot cross back. */
static int f_handle(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)r;
  PFValue v = {.v_handle = (void*)0x1234};
  int code = kPFOpaqueHandle;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* An array of k adders, then (with boxed) a boxed object, which cannot
 * cross: the result then fails to pack after k exports. */
static int adders_array(int k, int boxed, PFRetValueHandle ret);

/* t.adders_then_boxed(n): n adders and a boxed object. */
static int f_adders_then_boxed(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1 || c[0] != kPFInt || a[0].v_int64 < 0 || a[0].v_int64 > 1000)
    return PFErrorSetFormat(kPFErrTypeError, "t.adders_then_boxed: one int in [0, 1000]");
  return adders_array((int)a[0].v_int64, 1, ret);
}

/* t.adders(n): n adders. */
static int f_adders(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1 || c[0] != kPFInt || a[0].v_int64 < 0 || a[0].v_int64 > 4096)
    return PFErrorSetFormat(kPFErrTypeError, "t.adders: one int in [0, 4096]");
  return adders_array((int)a[0].v_int64, 0, ret);
}

static int adders_array(int k, int boxed, PFRetValueHandle ret) {
  int st = 0;
  PFValue* vals = calloc((size_t)k + 1, sizeof *vals);
  int* codes = calloc((size_t)k + 1, sizeof *codes);
  for (int i = 0; i < k && st == 0; ++i) {
    st = PFFuncCreateFromCFunc(adder, (void*)(intptr_t)i, boxed ? boxed_adder_fin : adder_fin,
                               (PFFunctionHandle*)&vals[i].v_handle);
    codes[i] = kPFFuncHandle;
  }
  codes[k] = kPFObjectHandle;
  if (st == 0 && boxed) st = PFObjectCreateBoxed(NULL, NULL, (PFObjectHandle*)&vals[k].v_handle);
  PFObjectHandle arr = NULL;
  if (st == 0) st = PFArrayCreate(vals, codes, k + boxed, &arr);
  if (st == 0) {
    PFValue v = {.v_handle = arr};
    int code = kPFObjectHandle;
    st = PFCFuncSetReturn(ret, &v, &code, 1);
  }
  PFObjectFree(arr);
  for (int i = 0; i <= k; ++i) PFObjectFree(vals[i].v_handle);
  free(vals);
  free(codes);
  return st;
}

/* t.adder_after_gate(k): an adder, once the test opens the gate. */
static int f_adder_after_gate(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  if (f_block(NULL, NULL, 0, ret, r) != 0) return -1;
  return f_make_adder(a, c, n, ret, r);
}

static int64_t typed_mul(int64_t x, int64_t y) { return x * y; }

/* Direct callees (PFFuncCreateDirect), which the server's workers call
 * through resolved targets. t.direct_add(x, y): x + y. */
static int d_add(void* r, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)r;
  if (n != 2 || c[0] != kPFInt || c[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "t.direct_add: expected two ints");
  rv->v_int64 = a[0].v_int64 + a[1].v_int64;
  *rc = kPFInt;
  return 0;
}

/* t.direct_greet(name): "hello, " + name, through PFFuncReturnString. */
static int d_greet(void* r, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)r;
  if (n != 1 || c[0] != kPFStr)
    return PFErrorSetFormat(kPFErrTypeError, "t.direct_greet: expected a str");
  char buf[128];
  int len = snprintf(buf, sizeof buf, "hello, %s", a[0].v_str);
  return PFFuncReturnString(kPFStr, buf, (size_t)len, rv, rc);
}

/* t.direct_silent: fails without recording an error. */
static int d_silent(void* r, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)r, (void)a, (void)c, (void)n, (void)rv, (void)rc;
  return -1;
}

/* t.silent: the same, of the setter convention. */
static int f_silent(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)ret, (void)r;
  return -1;
}

/* t.leave_error: succeeds with 1, leaving an error on its thread. */
static int d_leave_error(void* r, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)r, (void)a, (void)c, (void)n;
  PFErrorSetFormat(kPFErrValueError, "t.leave_error: a stale error");
  rv->v_int64 = 1;
  *rc = kPFInt;
  return 0;
}

/* t.version: a direct callee that answers its resource, 1 or 2. */
static int d_version(void* r, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)a, (void)c, (void)n;
  rv->v_int64 = (int64_t)(intptr_t)r;
  *rc = kPFInt;
  return 0;
}

static void reg_direct(const char* name, PFDirectCFunc fn, void* resource) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateDirect(fn, resource, NULL, &f));
  assert_pf_ok(PFFuncRegisterGlobal(name, f, 1));
  PFFuncFree(f);
}

static void reg(const char* name, PFPackedCFunc fn) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, NULL, NULL, &f));
  assert_pf_ok(PFFuncRegisterGlobal(name, f, 1));
  PFFuncFree(f);
}

/* ---- fixtures ---- */

static PFRPCServerHandle g_server;
static const char* g_endpoint;
static PFModuleHandle g_mod;
static atomic_int g_log_lines;
static void count_log(void* user, const char* line) {
  (void)user;
  (void)line;
  atomic_fetch_add(&g_log_lines, 1);
}

static int setup(void** state) {
  (void)state;
  if (pipe(g_gate) != 0) return -1;
  reg("t.echo", f_echo);
  reg("t.add", f_add);
  reg("t.fail", f_fail);
  reg("t.tensor_info", f_tensor_info);
  reg("t.apply", f_apply);
  reg("t.apply_in_thread", f_apply_in_thread);
  reg("t.make_adder", f_make_adder);
  reg("t.keep", f_keep);
  reg("t.call_kept", f_call_kept);
  reg("t.keep_tensor", f_keep_tensor);
  reg("t.kept_tensor_sum", f_kept_tensor_sum);
  reg("t.block", f_block);
  reg("t.handle", f_handle);
  reg("t.empty_maps", f_empty_maps);
  reg("t.sleep_ms", f_sleep_ms);
  reg("t.bytes", f_bytes);
  reg("t.adders_then_boxed", f_adders_then_boxed);
  reg("t.adders", f_adders);
  reg("t.adder_after_gate", f_adder_after_gate);
  reg("hidden.secret", f_echo);
  reg("t.silent", f_silent);
  reg_direct("t.direct_add", d_add, NULL);
  reg_direct("t.direct_greet", d_greet, NULL);
  reg_direct("t.direct_silent", d_silent, NULL);
  reg_direct("t.leave_error", d_leave_error, NULL);
  PFFunctionHandle mul = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)typed_mul, "int64(int64,int64)", &mul));
  assert_pf_ok(PFFuncSetInfo(mul, NULL, NULL, "Multiplies two integers."));
  assert_pf_ok(PFFuncRegisterGlobal("t.mul", mul, 1));
  PFFuncFree(mul);
  const char* expose[] = {"t."};
  PFRPCServerOptions o = {0};
  o.expose = expose;
  o.num_expose = 1;
  o.num_workers = 4;
  o.log = count_log;
  if (PFRPCServe("tcp://127.0.0.1:*", &o, &g_server) != 0) return -1;
  if (PFRPCServerGetEndpoint(g_server, &g_endpoint) != 0) return -1;
  PFRPCOptions co = {0};
  co.timeout_ms = 20000;
  return PFRPCConnect(g_endpoint, &co, &g_mod);
}

static int teardown(void** state) {
  (void)state;
  PFRPCDisconnect(g_mod);
  PFModFree(g_mod);
  PFRPCServerStop(g_server);
  PFFuncFree(g_kept);
  g_kept = NULL;
  PFObjectFree(g_kept_tensor);
  g_kept_tensor = NULL;
  close(g_gate[0]);
  close(g_gate[1]);
  return 0;
}

static PFFunctionHandle fn(const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(g_mod, name, 0, &f));
  assert_non_null(f);
  return f;
}

/* A connection of the test's own to the fixture's server, with a timeout,
 * and its function `name` (a new reference). */
static PFFunctionHandle connect_fn(int timeout_ms, const char* name, PFModuleHandle* mod) {
  PFRPCOptions o = {0};
  o.timeout_ms = timeout_ms;
  assert_pf_ok(PFRPCConnect(g_endpoint, &o, mod));
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(*mod, name, 0, &f));
  return f;
}

static void call1(PFFunctionHandle f, PFValue v, int code, PFValue* out, int* out_code) {
  assert_pf_ok(PFFuncCall(f, &v, &code, 1, out, out_code));
}

/* ---- values ---- */

static void test_plain_values(void** state) {
  (void)state;
  PFFunctionHandle echo = fn("t.echo");
  PFValue rv;
  int rc;
  call1(echo, (PFValue){.v_int64 = -123456789012345}, kPFInt, &rv, &rc);
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, -123456789012345);
  call1(echo, (PFValue){.v_int64 = INT64_MAX}, kPFInt, &rv, &rc);
  assert_int_equal(rv.v_int64, INT64_MAX);
  call1(echo, (PFValue){.v_float64 = 2.5}, kPFFloat, &rv, &rc);
  assert_int_equal(rc, kPFFloat);
  assert_true(rv.v_float64 == 2.5);
  call1(echo, (PFValue){.v_int64 = 1}, kPFBool, &rv, &rc);
  assert_int_equal(rc, kPFBool);
  assert_int_equal(rv.v_int64, 1);
  call1(echo, (PFValue){.v_int64 = 0}, kPFNull, &rv, &rc);
  assert_int_equal(rc, kPFNull);
  PFValue dt = {.v_type = {kDLFloat, 16, 4}};
  call1(echo, dt, kPFDataType, &rv, &rc);
  assert_int_equal(rc, kPFDataType);
  assert_int_equal(rv.v_type.code, kDLFloat);
  assert_int_equal(rv.v_type.bits, 16);
  assert_int_equal(rv.v_type.lanes, 4);
  PFValue dev = {.v_device = {kDLCUDA, 3}};
  call1(echo, dev, kPFDevice, &rv, &rc);
  assert_int_equal(rc, kPFDevice);
  assert_int_equal(rv.v_device.device_type, kDLCUDA);
  assert_int_equal(rv.v_device.device_id, 3);
  call1(echo, (PFValue){.v_str = "héllo"}, kPFStr, &rv, &rc);
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, "héllo");
  /* Empty ones too: MessagePack may carry them without a data pointer. */
  call1(echo, (PFValue){.v_str = ""}, kPFStr, &rv, &rc);
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, "");
  PFByteArray empty = {NULL, 0};
  call1(echo, (PFValue){.v_handle = &empty}, kPFBytes, &rv, &rc);
  assert_int_equal(rc, kPFBytes);
  assert_int_equal(((PFByteArray*)rv.v_handle)->size, 0);
  PFByteArray b = {"a\0b\0c", 5};
  call1(echo, (PFValue){.v_handle = &b}, kPFBytes, &rv, &rc);
  assert_int_equal(rc, kPFBytes);
  PFByteArray* got = rv.v_handle;
  assert_int_equal(got->size, 5);
  assert_memory_equal(got->data, "a\0b\0c", 5);
  PFFuncFree(echo);
}

static void test_containers(void** state) {
  (void)state;
  PFFunctionHandle echo = fn("t.echo");
  int64_t dims[] = {2, -3, 4};
  PFObjectHandle shape = NULL, inner = NULL, map = NULL, outer = NULL;
  assert_pf_ok(PFShapeCreate(dims, 3, &shape));
  PFValue iv[] = {{.v_int64 = 1}, {.v_str = "x"}, {.v_handle = shape}};
  int ic[] = {kPFInt, kPFStr, kPFObjectHandle};
  assert_pf_ok(PFArrayCreate(iv, ic, 3, &inner));
  PFValue keys[] = {{.v_str = "list"}, {.v_int64 = 7}};
  int kc[] = {kPFStr, kPFInt};
  PFValue vals[] = {{.v_handle = inner}, {.v_float64 = 0.5}};
  int vc[] = {kPFObjectHandle, kPFFloat};
  assert_pf_ok(PFMapCreate(keys, kc, vals, vc, 2, &map));
  PFValue ov[] = {{.v_handle = map}};
  int oc[] = {kPFObjectHandle};
  assert_pf_ok(PFArrayCreate(ov, oc, 1, &outer));
  PFValue rv;
  int rc;
  call1(echo, (PFValue){.v_handle = outer}, kPFObjectHandle, &rv, &rc);
  assert_int_equal(rc, kPFObjectHandle);
  PFObjectHandle back = rv.v_handle;
  PFValue m, x;
  int mc, xc, found;
  assert_pf_ok(PFArrayGetItem(back, 0, &m, &mc));
  assert_pf_ok(PFMapGetItem(m.v_handle, (PFValue){.v_int64 = 7}, kPFInt, &x, &xc, &found));
  assert_int_equal(found, 1);
  assert_true(x.v_float64 == 0.5);
  assert_pf_ok(PFMapGetItem(m.v_handle, (PFValue){.v_str = "list"}, kPFStr, &x, &xc, &found));
  assert_int_equal(found, 1);
  PFValue s;
  int sc;
  assert_pf_ok(PFArrayGetItem(x.v_handle, 2, &s, &sc));
  const int64_t* d;
  int64_t nd;
  assert_pf_ok(PFShapeGetData(s.v_handle, &d, &nd));
  assert_int_equal(nd, 3);
  assert_int_equal(d[1], -3);
  assert_pf_ok(PFArrayGetItem(x.v_handle, 1, &s, &sc));
  assert_string_equal(s.v_str, "x");
  PFObjectFree(back);
  PFObjectFree(outer);
  PFObjectFree(map);
  PFObjectFree(inner);
  PFObjectFree(shape);
  PFFuncFree(echo);
}

/* List and Dict cross as List and Dict, nested in each other, with keys of
 * every kind a Dict takes that crosses. */
static void test_lists_and_dicts(void** state) {
  (void)state;
  PFFunctionHandle echo = fn("t.echo");
  PFObjectHandle inner = NULL, dict = NULL, list = NULL;
  PFByteArray blob = {"b\0y", 3};
  PFValue iv[] = {{.v_int64 = 1}, {.v_str = "x"}, {.v_handle = &blob}};
  int ic[] = {kPFInt, kPFStr, kPFBytes};
  assert_pf_ok(PFListCreate(iv, ic, 3, &inner));
  PFValue keys[] = {
      {.v_str = "list"}, {.v_int64 = 7}, {.v_float64 = 0.5}, {.v_int64 = 0}, {.v_handle = &blob}};
  int kc[] = {kPFStr, kPFInt, kPFFloat, kPFNull, kPFBytes};
  PFValue vals[] = {
      {.v_handle = inner}, {.v_float64 = 0.25}, {.v_int64 = 1}, {.v_str = "nil"}, {.v_int64 = 5}};
  int vc[] = {kPFObjectHandle, kPFFloat, kPFBool, kPFStr, kPFInt};
  assert_pf_ok(PFDictCreate(keys, kc, vals, vc, 5, &dict));
  PFValue lv[] = {{.v_handle = dict}};
  int lc[] = {kPFObjectHandle};
  assert_pf_ok(PFListCreate(lv, lc, 1, &list));
  PFValue rv;
  int rc;
  call1(echo, (PFValue){.v_handle = list}, kPFObjectHandle, &rv, &rc);
  assert_int_equal(rc, kPFObjectHandle);
  PFObjectHandle back = rv.v_handle;
  uint32_t type = 0;
  assert_pf_ok(PFObjectGetTypeIndex(back, &type));
  assert_int_equal(type, kPFObjectList);
  PFValue d;
  int dc;
  assert_pf_ok(PFListGetItem(back, 0, &d, &dc));
  assert_pf_ok(PFObjectGetTypeIndex(d.v_handle, &type));
  assert_int_equal(type, kPFObjectDict);
  /* The Dict's order and every key came across. */
  PFObjectHandle snap = NULL;
  assert_pf_ok(PFDictToArray(d.v_handle, &snap));
  PFValue items[10];
  int codes[10];
  int64_t n = 0;
  assert_pf_ok(PFArrayGetSize(snap, &n));
  assert_int_equal(n, 10);
  assert_pf_ok(PFArrayGetItems(snap, 0, 10, items, codes));
  for (int i = 0; i < 5; ++i) assert_int_equal(codes[2 * i], kc[i]);
  assert_string_equal(items[0].v_str, "list");
  assert_true(items[4].v_float64 == 0.5);
  assert_int_equal(codes[5], kPFBool);
  assert_string_equal(items[7].v_str, "nil");
  assert_int_equal(((const PFByteArray*)items[8].v_handle)->size, 3);
  PFObjectHandle l2 = items[1].v_handle;
  assert_pf_ok(PFObjectGetTypeIndex(l2, &type));
  assert_int_equal(type, kPFObjectList);
  PFValue x;
  int xc;
  assert_pf_ok(PFListGetItem(l2, 1, &x, &xc));
  assert_string_equal(x.v_str, "x");
  assert_pf_ok(PFListGetItem(l2, 2, &x, &xc));
  assert_int_equal(xc, kPFBytes);
  assert_memory_equal(((const PFByteArray*)x.v_handle)->data, "b\0y", 3);
  PFObjectFree(snap);
  PFObjectFree(d.v_handle);
  PFObjectFree(back);
  PFObjectFree(list);
  PFObjectFree(dict);
  PFObjectFree(inner);
  /* What a Dict holds that cannot cross is named by its place. */
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  PFValue bk = {.v_str = "b"}, bv = {.v_handle = boxed};
  int bkc = kPFStr, bvc = kPFObjectHandle;
  assert_pf_ok(PFDictCreate(&bk, &bkc, &bv, &bvc, 1, &dict));
  assert_pf_error(
      PFFuncCall(echo, &(PFValue){.v_handle = dict}, &(int){kPFObjectHandle}, 1, &rv, &rc),
      kPFErrTypeError, "argument 0 value 0", "boxed");
  PFObjectFree(dict);
  PFObjectFree(boxed);
  PFFuncFree(echo);
}

static void test_tensors(void** state) {
  (void)state;
  PFFunctionHandle info = fn("t.tensor_info");
  /* A 3x4 int32 matrix, passed transposed (4x3, strides {1, 4}). */
  int32_t data[12];
  for (int i = 0; i < 12; ++i) data[i] = i;
  int64_t shape[] = {4, 3}, strides[] = {1, 4};
  DLTensor t = {data, {kDLCPU, 0}, 2, {kDLInt, 32, 1}, shape, strides, 0};
  PFValue rv;
  int rc;
  call1(info, (PFValue){.v_handle = &t}, kPFDLTensorHandle, &rv, &rc);
  PFValue v;
  int c;
  int64_t expect_sum = 0;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j) expect_sum += data[j * 4 + i] * (i * 3 + j + 1);
  assert_pf_ok(PFArrayGetItem(rv.v_handle, 0, &v, &c));
  assert_int_equal(v.v_int64, kPFDLTensorHandle); /* arrives as it was passed */
  assert_pf_ok(PFArrayGetItem(rv.v_handle, 2, &v, &c));
  assert_int_equal(v.v_int64, 4);
  assert_pf_ok(PFArrayGetItem(rv.v_handle, 4, &v, &c));
  assert_int_equal(v.v_int64, expect_sum);
  PFObjectFree(rv.v_handle);
  /* A negative stride: the rows reversed. */
  int64_t s1[] = {3}, st1[] = {-1};
  DLTensor rev = {data, {kDLCPU, 0}, 1, {kDLInt, 32, 1}, s1, st1, 2 * sizeof(int32_t)};
  call1(info, (PFValue){.v_handle = &rev}, kPFDLTensorHandle, &rv, &rc);
  assert_pf_ok(PFArrayGetItem(rv.v_handle, 3, &v, &c));
  assert_int_equal(v.v_int64, 2 * 1 + 1 * 2 + 0 * 3);
  PFObjectFree(rv.v_handle);
  /* A tensor returned comes back as a compact tensor object. */
  PFFunctionHandle echo = fn("t.echo");
  call1(echo, (PFValue){.v_handle = &t}, kPFDLTensorHandle, &rv, &rc);
  assert_int_equal(rc, kPFObjectHandle);
  DLTensor* back = NULL;
  assert_pf_ok(PFTensorGetDLTensor(rv.v_handle, &back));
  assert_null(back->strides);
  assert_int_equal(back->shape[0], 4);
  assert_int_equal(((int32_t*)back->data)[1], data[4]);
  PFObjectFree(rv.v_handle);
  /* A GPU tensor cannot cross. */
  DLTensor gpu = {data, {kDLCUDA, 0}, 2, {kDLInt, 32, 1}, shape, NULL, 0};
  PFValue g = {.v_handle = &gpu};
  int gc = kPFDLTensorHandle;
  assert_pf_error(PFFuncCall(echo, &g, &gc, 1, &rv, &rc), kPFErrTypeError, "argument 0",
                  "only CPU");
  PFFuncFree(echo);
  PFFuncFree(info);
}

/* Large tensors keep their data in the message they arrived in (when it is
 * aligned there): every result stays valid, and aligned for its elements,
 * after later calls, after its reply is gone and after its connection is
 * closed; a tensor that a server function keeps stays valid past the
 * request it came in. */
static void test_large_tensors(void** state) {
  (void)state;
  enum { kBytes = 256 * 1024, kCalls = 12 };
  static const DLDataType types[] = {{kDLUInt, 8, 1}, {kDLFloat, 32, 1}, {kDLFloat, 64, 1},
                                     {kDLInt, 16, 1}, {kDLFloat, 32, 4}, {kDLComplex, 128, 1}};
  const int ntypes = (int)(sizeof types / sizeof types[0]);
  uint8_t* src = malloc(kBytes);
  assert_non_null(src);
  for (int i = 0; i < kBytes; ++i) src[i] = (uint8_t)(i * 131 + 7);
  PFModuleHandle mod = NULL;
  PFFunctionHandle echo = connect_fn(20000, "t.echo", &mod);
  PFObjectHandle kept[kCalls];
  for (int k = 0; k < kCalls; ++k) {
    DLDataType dt = types[k % ntypes];
    size_t elem = (dt.bits / 8u) * dt.lanes;
    /* Sizes around the in-place threshold, and an odd tail. */
    int64_t shape[1] = {(int64_t)((k % 3 == 0 ? 60 * 1024 : kBytes - 64 * (k % 5)) / elem)};
    DLTensor t = {src, {kDLCPU, 0}, 1, dt, shape, NULL, 0};
    PFValue rv;
    int rc;
    call1(echo, (PFValue){.v_handle = &t}, kPFDLTensorHandle, &rv, &rc);
    assert_int_equal(rc, kPFObjectHandle);
    kept[k] = rv.v_handle;
    DLTensor* back = NULL;
    assert_pf_ok(PFTensorGetDLTensor(kept[k], &back));
    unsigned lane = dt.bits / 8u;
    assert_int_equal((uintptr_t)back->data % (lane < 16 ? lane : 16), 0);
  }
  /* The connection goes; the results stay. */
  PFFuncFree(echo);
  assert_pf_ok(PFRPCDisconnect(mod));
  PFModFree(mod);
  for (int k = 0; k < kCalls; ++k) {
    DLTensor* back = NULL;
    assert_pf_ok(PFTensorGetDLTensor(kept[k], &back));
    size_t bytes = (size_t)back->shape[0] * (back->dtype.bits / 8u) * back->dtype.lanes;
    assert_memory_equal(back->data, src, bytes);
    PFObjectFree(kept[k]);
  }
  /* Two float32 tensor objects in one reply arrive each in a side frame
   * of its own (the second after the first), aligned for its elements. */
  DLManagedTensor mt[2];
  PFObjectHandle objs[2];
  int64_t half[1] = {kBytes / 2 / 4};
  for (int i = 0; i < 2; ++i) {
    mt[i] = (DLManagedTensor){
        {src + i * (kBytes / 2), {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, half, NULL, 0}, NULL, NULL};
    assert_pf_ok(PFTensorCreateFromDLPack(&mt[i], &objs[i]));
  }
  PFValue items[2] = {{.v_handle = objs[0]}, {.v_handle = objs[1]}};
  int item_codes[2] = {kPFObjectHandle, kPFObjectHandle};
  PFObjectHandle pair = NULL;
  assert_pf_ok(PFArrayCreate(items, item_codes, 2, &pair));
  PFFunctionHandle echo_here = fn("t.echo");
  PFValue prv;
  int prc;
  call1(echo_here, (PFValue){.v_handle = pair}, kPFObjectHandle, &prv, &prc);
  DLTensor* back[2];
  for (int i = 0; i < 2; ++i) {
    PFValue it;
    int ic;
    assert_pf_ok(PFArrayGetItem(prv.v_handle, i, &it, &ic));
    assert_pf_ok(PFTensorGetDLTensor(it.v_handle, &back[i]));
    assert_int_equal((uintptr_t)back[i]->data % 8, 0);
    assert_memory_equal(back[i]->data, src + i * (kBytes / 2), kBytes / 2);
  }
  PFObjectFree(prv.v_handle);
  PFObjectFree(pair);
  PFObjectFree(objs[0]);
  PFObjectFree(objs[1]);
  PFFuncFree(echo_here);
  /* A server function keeps a tensor past its request. */
  PFObjectHandle obj = NULL;
  int64_t shape[1] = {kBytes / 4};
  DLManagedTensor managed = {{src, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0}, NULL, NULL};
  assert_pf_ok(PFTensorCreateFromDLPack(&managed, &obj)); /* no deleter: src is freed below */
  PFFunctionHandle keep = fn("t.keep_tensor"), sum = fn("t.kept_tensor_sum");
  PFValue rv;
  int rc;
  call1(keep, (PFValue){.v_handle = obj}, kPFObjectHandle, &rv, &rc);
  int64_t expect = 0;
  for (int i = 0; i < kBytes; ++i) expect += src[i];
  PFValue none = {0};
  int none_code = kPFNull;
  for (int i = 0; i < 3; ++i) { /* later requests reuse what the first one's bytes were in */
    assert_pf_ok(PFFuncCall(sum, &none, &none_code, 0, &rv, &rc));
    assert_int_equal(rv.v_int64, expect);
  }
  PFObjectFree(obj);
  PFFuncFree(keep);
  PFFuncFree(sum);
  free(src);
}

static void test_what_cannot_cross(void** state) {
  (void)state;
  PFFunctionHandle echo = fn("t.echo");
  PFValue rv;
  int rc;
  PFValue args[2] = {{.v_int64 = 1}, {.v_handle = (void*)0x10}};
  int codes[2] = {kPFInt, kPFOpaqueHandle};
  assert_pf_error(PFFuncCall(echo, args, codes, 2, &rv, &rc), kPFErrTypeError, "argument 1",
                  "opaque handle");
  args[1].v_handle = g_mod;
  codes[1] = kPFModuleHandle;
  assert_pf_error(PFFuncCall(echo, args, codes, 2, &rv, &rc), kPFErrTypeError, "argument 1",
                  "module");
  PFObjectHandle boxed = NULL, arr = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  PFValue iv[] = {{.v_int64 = 1}, {.v_handle = boxed}};
  int ic[] = {kPFInt, kPFObjectHandle};
  assert_pf_ok(PFArrayCreate(iv, ic, 2, &arr));
  args[1].v_handle = arr;
  codes[1] = kPFObjectHandle;
  assert_pf_error(PFFuncCall(echo, args, codes, 2, &rv, &rc), kPFErrTypeError, "argument 1 item 1",
                  "boxed");
  PFObjectFree(arr);
  PFObjectFree(boxed);
  /* A result that cannot cross back is the server's TypeError. */
  PFFunctionHandle h = fn("t.handle");
  assert_pf_error(PFFuncCall(h, NULL, NULL, 0, &rv, &rc), kPFErrTypeError, "result",
                  "opaque handle");
  PFFuncFree(h);
  PFFuncFree(echo);
}

/* ---- the module ---- */

static void test_module_lists_exposed_only(void** state) {
  (void)state;
  int n = 0;
  const char** names = NULL;
  assert_pf_ok(PFModListFunctionNames(g_mod, &n, &names));
  int saw_add = 0;
  for (int i = 0; i < n; ++i) {
    assert_true(strncmp(names[i], "t.", 2) == 0);
    saw_add |= strcmp(names[i], "t.add") == 0;
  }
  assert_true(saw_add);
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(g_mod, "hidden.secret", 0, &f));
  assert_null(f);
  PFFunctionHandle mul = fn("t.mul");
  const char *name, *sig, *doc;
  assert_pf_ok(PFFuncGetInfo(mul, &name, &sig, &doc));
  assert_string_equal(name, "t.mul");
  assert_string_equal(sig, "int64(int64,int64)");
  assert_string_equal(doc, "Multiplies two integers.");
  PFValue args[2] = {{.v_int64 = 6}, {.v_int64 = 7}};
  int codes[2] = {kPFInt, kPFInt};
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(mul, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 42);
  /* A remote function is a function like any other: it can be registered
   * locally and called from there. */
  assert_pf_ok(PFFuncRegisterGlobal("local.remote_mul", mul, 1));
  PFFunctionHandle g = NULL;
  assert_pf_ok(PFFuncGetGlobal("local.remote_mul", &g));
  assert_pf_ok(PFFuncCall(g, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 42);
  assert_pf_ok(PFFuncRemoveGlobal("local.remote_mul"));
  PFFuncFree(g);
  PFFuncFree(mul);
}

/* ---- errors ---- */

/* The thread's error names `file` in its traceback, as PF_ERROR does where
 * the library raises an error. */
static void assert_raised_in(const char* file) {
  const char* tb = PFErrorGetTraceback();
  if (strstr(tb, file) == NULL) fail_msg("the traceback does not name %s: '%s'", file, tb);
}

/* ---- calls through resolved targets (the server's workers) ---- */

static void test_target_direct_and_setter_callees(void** state) {
  (void)state;
  PFFunctionHandle add = fn("t.direct_add"), mul = fn("t.mul"), greet = fn("t.direct_greet");
  PFFunctionHandle echo = fn("t.echo");
  PFValue a[2] = {{.v_int64 = 40}, {.v_int64 = 2}}, rv;
  int c[2] = {kPFInt, kPFInt}, rc;
  assert_pf_ok(PFFuncCall(add, a, c, 2, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 42);
  assert_pf_ok(PFFuncCall(mul, a, c, 2, &rv, &rc)); /* typed: direct */
  assert_int_equal(rv.v_int64, 80);
  c[1] = kPFStr;
  a[1].v_str = "x";
  assert_pf_error(PFFuncCall(add, a, c, 2, &rv, &rc), kPFErrTypeError, "t.direct_add", "two ints");
  /* String results, of both conventions, and a string argument. */
  call1(greet, (PFValue){.v_str = "world"}, kPFStr, &rv, &rc);
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, "hello, world");
  call1(echo, (PFValue){.v_str = "back"}, kPFStr, &rv, &rc);
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, "back");
  PFFuncFree(add);
  PFFuncFree(mul);
  PFFuncFree(greet);
  PFFuncFree(echo);
}

static void test_target_of_replaced_function(void** state) {
  (void)state;
  reg_direct("t.version", d_version, (void*)(intptr_t)1);
  PFModuleHandle m = NULL;
  PFFunctionHandle f = connect_fn(20000, "t.version", &m);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rv.v_int64, 1);
  /* Replaced in the registry: the next call sees the new function, as a
   * lookup by name would, on every worker. */
  reg_direct("t.version", d_version, (void*)(intptr_t)2);
  for (int i = 0; i < 8; ++i) {
    assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
    assert_int_equal(rv.v_int64, 2);
  }
  reg("t.version", f_fail); /* a setter-convention function now */
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrIndexError, "t.fail");
  assert_pf_ok(PFFuncRemoveGlobal("t.version"));
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrKeyError, "t.version");
  PFFuncFree(f);
  PFRPCDisconnect(m);
  PFModFree(m);
}

static PFRPCServerHandle start_server(PFRPCServerOptions* so, char* endpoint, size_t cap);

/* A callee that fails without an error gets a RuntimeError, never the
 * error a call before it left on the worker's thread: one worker serves
 * both calls. */
static void test_target_callee_fails_without_error(void** state) {
  (void)state;
  PFRPCServerOptions so = {0};
  so.num_workers = 1;
  char endpoint[128];
  PFRPCServerHandle s = start_server(&so, endpoint, sizeof endpoint);
  PFRPCOptions co = {0};
  co.timeout_ms = 20000;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(endpoint, &co, &m));
  const char* names[] = {"t.direct_silent", "t.silent"};
  for (int round = 0; round < 2; ++round) {
    for (int k = 0; k < 2; ++k) {
      PFFunctionHandle leave = NULL, silent = NULL;
      assert_pf_ok(PFModGetFunction(m, "t.leave_error", 0, &leave));
      assert_pf_ok(PFModGetFunction(m, names[k], 0, &silent));
      PFValue rv = {.v_int64 = 7};
      int rc = kPFInt;
      assert_pf_ok(PFFuncCall(leave, NULL, NULL, 0, &rv, &rc));
      assert_int_equal(rv.v_int64, 1);
      rv.v_int64 = 7;
      rc = -5;
      assert_pf_error(PFFuncCall(silent, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError,
                      "without recording an error");
      assert_int_equal(rv.v_int64, 7); /* nothing written on failure */
      assert_int_equal(rc, -5);
      PFFuncFree(leave);
      PFFuncFree(silent);
    }
  }
  PFRPCDisconnect(m);
  PFModFree(m);
  PFRPCServerStop(s);
  /* A client's thread serves callbacks with its caller's earlier error on
   * it (success does not clear that): a direct callback still succeeds,
   * and a silent one still gets an error of its own. */
  PFFunctionHandle apply = fn("t.apply"), add = NULL, silent = NULL, setter_silent = NULL;
  assert_pf_ok(PFFuncCreateDirect(d_add, NULL, NULL, &add));
  assert_pf_ok(PFFuncCreateDirect(d_silent, NULL, NULL, &silent));
  assert_pf_ok(PFFuncCreateFromCFunc(f_silent, NULL, NULL, &setter_silent));
  PFValue args[3] = {{.v_handle = add}, {.v_int64 = 5}, {.v_int64 = 6}}, rv;
  int codes[3] = {kPFFuncHandle, kPFInt, kPFInt}, rc;
  for (int with_error = 0; with_error < 2; ++with_error) {
    if (with_error) PFErrorSetFormat(kPFErrValueError, "the caller's earlier error");
    args[0].v_handle = add;
    assert_pf_ok(PFFuncCall(apply, args, codes, 3, &rv, &rc));
    assert_int_equal(rv.v_int64, 11);
    args[0].v_handle = silent;
    assert_pf_error(PFFuncCall(apply, args, codes, 1, &rv, &rc), kPFErrRuntimeError,
                    "without recording an error");
    args[0].v_handle = setter_silent;
    assert_pf_error(PFFuncCall(apply, args, codes, 1, &rv, &rc), kPFErrRuntimeError,
                    "without recording an error");
  }
  PFFuncFree(add);
  PFFuncFree(silent);
  PFFuncFree(setter_silent);
  PFFuncFree(apply);
}

static void test_remote_error(void** state) {
  (void)state;
  PFFunctionHandle f = fn("t.fail");
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrIndexError,
                  "t.fail: index 7 is out of range");
  const char* tb = PFErrorGetTraceback();
  assert_non_null(strstr(tb, "tests/test_rpc.c")); /* the server's own frame */
  assert_non_null(strstr(tb, g_endpoint));         /* which server */
  PFFuncFree(f);
  PFFunctionHandle add = fn("t.add");
  PFValue a = {.v_str = "x"};
  int c = kPFStr;
  assert_pf_error(PFFuncCall(add, &a, &c, 1, &rv, &rc), kPFErrTypeError, "expected two ints");
  PFFuncFree(add);
}

static void test_timeout(void** state) {
  (void)state;
  PFModuleHandle quick = NULL;
  PFFunctionHandle block = connect_fn(1000, "t.block", &quick);
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(block, NULL, NULL, 0, &rv, &rc), "TimeoutError", "no reply",
                  "1000 ms");
  assert_int_equal(write(g_gate[1], "x", 1), 1); /* let the worker go */
  assert_raised_in("rpc/core.c");
  /* The connection still works after a timeout. */
  PFFunctionHandle add = NULL;
  assert_pf_ok(PFModGetFunction(quick, "t.add", 0, &add));
  PFValue args[2] = {{.v_int64 = 2}, {.v_int64 = 3}};
  int codes[2] = {kPFInt, kPFInt};
  assert_pf_ok(PFFuncCall(add, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 5);
  PFFuncFree(add);
  PFFuncFree(block);
  assert_pf_ok(PFRPCDisconnect(quick));
  /* After the disconnect, the functions are objects that fail cleanly. */
  assert_pf_ok(PFModGetFunction(quick, "t.add", 0, &add));
  assert_pf_error(PFFuncCall(add, args, codes, 2, &rv, &rc), "ConnectionError", "closed");
  PFFuncFree(add);
  PFModFree(quick);
}

/* A call fails with TimeoutError at its timeout, not later, and never
 * succeeds after it: calls of 0.5, 1.5 and 5 times the timeout, timed.
 * The late reply of the timed-out call is dropped and the next calls on
 * the same connection get their own results. */
static int under_valgrind(void) { return getenv("PF_UNDER_VALGRIND") != NULL; }

static void test_timeout_is_kept(void** state) {
  (void)state;
  const int64_t T = under_valgrind() ? 2000 : 1000;
  /* How late a timeout may fire on a loaded 2-core machine. */
  const int64_t slack = under_valgrind() ? 2000 : 450;
  atomic_store(&g_wake_sleepers, 0);
  PFModuleHandle m = NULL;
  PFFunctionHandle sleep_ms = connect_fn((int)T, "t.sleep_ms", &m);
  PFFunctionHandle add = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.add", 0, &add));
  PFValue rv;
  int rc;
  /* 0.5 T: the result. */
  int64_t t0 = now_ms();
  call1(sleep_ms, (PFValue){.v_int64 = T / 2}, kPFInt, &rv, &rc);
  assert_int_equal(rv.v_int64, T / 2);
  assert_true(now_ms() - t0 >= T / 2);
  /* 1.5 T: TimeoutError at T, before the reply comes. */
  PFValue a = {.v_int64 = T * 3 / 2};
  int code = kPFInt;
  t0 = now_ms();
  assert_pf_error(PFFuncCall(sleep_ms, &a, &code, 1, &rv, &rc), "TimeoutError", "no reply");
  int64_t took = now_ms() - t0;
  print_message("1.5x call: TimeoutError after %lld ms (timeout %lld)\n", (long long)took,
                (long long)T);
  assert_true(took >= T - 5);
  assert_true(took < T + slack);
  /* The next call on the connection gets its own result, before and after
   * the late reply arrives (and is dropped). */
  PFValue args[2] = {{.v_int64 = 2}, {.v_int64 = 3}};
  int codes[2] = {kPFInt, kPFInt};
  assert_pf_ok(PFFuncCall(add, args, codes, 2, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 5);
  while (now_ms() - t0 < T * 3 / 2 + 200) {
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
  call1(sleep_ms, (PFValue){.v_int64 = 1}, kPFInt, &rv, &rc);
  assert_int_equal(rv.v_int64, 1);
  assert_pf_ok(PFFuncCall(add, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 5);
  /* 5 T: TimeoutError at T too. */
  a.v_int64 = T * 5;
  t0 = now_ms();
  assert_pf_error(PFFuncCall(sleep_ms, &a, &code, 1, &rv, &rc), "TimeoutError", "no reply");
  took = now_ms() - t0;
  print_message("5x call: TimeoutError after %lld ms (timeout %lld)\n", (long long)took,
                (long long)T);
  assert_true(took >= T - 5);
  assert_true(took < T + slack);
  atomic_store(&g_wake_sleepers, 1); /* free the worker */
  assert_pf_ok(PFFuncCall(add, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 5);
  PFFuncFree(add);
  PFFuncFree(sleep_ms);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  /* The same from `pf --connect ... --timeout`: a 1.5 s function with a
   * 1 s timeout fails with TimeoutError after about 1 s (pf's start
   * included), and prints no result. */
  atomic_store(&g_wake_sleepers, 0);
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s --connect %s --timeout %lld call t.sleep_ms %lld 2>&1",
           PF_TEST_CLI_REL, g_endpoint, (long long)T, (long long)(T * 3 / 2));
  t0 = now_ms();
  FILE* p = popen(cmd, "r");
  assert_non_null(p);
  char got[512] = {0};
  size_t n = fread(got, 1, sizeof got - 1, p);
  got[n] = '\0';
  int status = pclose(p);
  took = now_ms() - t0;
  print_message("pf --timeout: exit %d after %lld ms: %s", WEXITSTATUS(status), (long long)took,
                got);
  atomic_store(&g_wake_sleepers, 1);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 1);
  assert_non_null(strstr(got, "TimeoutError"));
  assert_true(took < T + 2 * slack + 500);
}

static void test_unreachable(void** state) {
  (void)state;
  /* A port that nothing listens on: bind one, then stop it. */
  PFRPCServerHandle s = NULL;
  const char* ep = NULL;
  assert_pf_ok(PFRPCServe("tcp://127.0.0.1:*", NULL, &s));
  assert_pf_ok(PFRPCServerGetEndpoint(s, &ep));
  char endpoint[128];
  snprintf(endpoint, sizeof endpoint, "%s", ep);
  assert_pf_ok(PFRPCServerStop(s));
  PFRPCOptions o = {0};
  o.timeout_ms = 200;
  PFModuleHandle m = NULL;
  assert_pf_error(PFRPCConnect(endpoint, &o, &m), "ConnectionError", "no server answered",
                  endpoint);
  assert_raised_in("rpc/client.c");
  assert_null(m);
}

/* ---- callbacks ---- */

static PFFunctionHandle g_remote_apply, g_remote_add;

static int cb_times10(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1 || c[0] != kPFInt) return PFErrorSetFormat(kPFErrTypeError, "cb: one int");
  PFValue v = {.v_int64 = a[0].v_int64 * 10};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* Calls back into the server while serving the server's callback. */
static int cb_nested(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1 || c[0] != kPFInt) return PFErrorSetFormat(kPFErrTypeError, "cb: one int");
  PFValue args[2] = {{.v_int64 = a[0].v_int64}, {.v_int64 = 1000}};
  int codes[2] = {kPFInt, kPFInt};
  PFValue rv;
  int rc;
  if (PFFuncCall(g_remote_add, args, codes, 2, &rv, &rc) != 0) return -1;
  return PFCFuncSetReturn(ret, &rv, &rc, 1);
}

/* depth(n) = n == 0 ? 0 : 1 + t.apply(depth, n - 1): nests 2n levels. */
static int cb_depth(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  if (n != 1 || c[0] != kPFInt) return PFErrorSetFormat(kPFErrTypeError, "cb: one int");
  PFValue rv = {.v_int64 = 0};
  int rc = kPFInt;
  if (a[0].v_int64 > 0) {
    PFFunctionHandle self = r;
    PFValue args[2] = {{.v_handle = self}, {.v_int64 = a[0].v_int64 - 1}};
    int codes[2] = {kPFFuncHandle, kPFInt};
    if (PFFuncCall(g_remote_apply, args, codes, 2, &rv, &rc) != 0) return -1;
    rv.v_int64 += 1;
  }
  return PFCFuncSetReturn(ret, &rv, &rc, 1);
}

static int cb_fail(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)ret, (void)r;
  return PF_ERROR(kPFErrValueError, "the client's callback refuses");
}

static void test_callbacks(void** state) {
  (void)state;
  g_remote_apply = fn("t.apply");
  g_remote_add = fn("t.add");
  PFFunctionHandle cb = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(cb_times10, NULL, NULL, &cb));
  PFValue args[2] = {{.v_handle = cb}, {.v_int64 = 4}};
  int codes[2] = {kPFFuncHandle, kPFInt};
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(g_remote_apply, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 40);
  PFFuncFree(cb);
  /* client -> server -> client -> server */
  assert_pf_ok(PFFuncCreateFromCFunc(cb_nested, NULL, NULL, &cb));
  args[0].v_handle = cb;
  assert_pf_ok(PFFuncCall(g_remote_apply, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 1004);
  PFFuncFree(cb);
  PFFuncFree(g_remote_add);
  PFFuncFree(g_remote_apply);
}

/* The deep nesting needs the function to pass itself: a tiny trampoline. */
static PFFunctionHandle g_depth_fn;
static int cb_depth_tramp(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  return cb_depth(a, c, n, ret, g_depth_fn);
}

/* Deeper than the server has workers: each nested call is served by the
 * thread that waits for it, on both sides. */
static void test_nested_deeper_than_workers(void** state) {
  (void)state;
  g_remote_apply = fn("t.apply");
  assert_pf_ok(PFFuncCreateFromCFunc(cb_depth_tramp, NULL, NULL, &g_depth_fn));
  PFValue args[2] = {{.v_handle = g_depth_fn}, {.v_int64 = 12}};
  int codes[2] = {kPFFuncHandle, kPFInt};
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(g_remote_apply, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 12);
  PFFuncFree(g_depth_fn);
  PFFuncFree(g_remote_apply);
}

/* Calls nested in callbacks beyond PF_RPC_MAX_NESTING levels on one thread
 * are refused with an error (rather than growing the server's stack for
 * as long as a client keeps nesting), and the connection goes on. */
static void test_nested_too_deep(void** state) {
  (void)state;
  g_remote_apply = fn("t.apply");
  assert_pf_ok(PFFuncCreateFromCFunc(cb_depth_tramp, NULL, NULL, &g_depth_fn));
  PFValue args[2] = {{.v_handle = g_depth_fn}, {.v_int64 = PF_RPC_MAX_NESTING + 5}};
  int codes[2] = {kPFFuncHandle, kPFInt};
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(g_remote_apply, args, codes, 2, &rv, &rc), kPFErrRuntimeError,
                  "nested more than", "PF_RPC_MAX_NESTING");
  args[1].v_int64 = PF_RPC_MAX_NESTING / 2 - 2;
  assert_pf_ok(PFFuncCall(g_remote_apply, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, PF_RPC_MAX_NESTING / 2 - 2);
  PFFuncFree(g_depth_fn);
  PFFuncFree(g_remote_apply);
}

static void test_callback_from_another_server_thread(void** state) {
  (void)state;
  PFFunctionHandle f = fn("t.apply_in_thread");
  PFFunctionHandle cb = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(cb_times10, NULL, NULL, &cb));
  PFValue args[2] = {{.v_handle = cb}, {.v_int64 = 7}};
  int codes[2] = {kPFFuncHandle, kPFInt};
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(f, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 70);
  PFFuncFree(cb);
  PFFuncFree(f);
}

static void test_callback_error_and_lifetime(void** state) {
  (void)state;
  PFFunctionHandle apply = fn("t.apply");
  PFFunctionHandle cb = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(cb_fail, NULL, NULL, &cb));
  PFValue args[1] = {{.v_handle = cb}};
  int codes[1] = {kPFFuncHandle};
  PFValue rv;
  int rc;
  /* The client's error travels to the server and back. */
  assert_pf_error(PFFuncCall(apply, args, codes, 1, &rv, &rc), kPFErrValueError,
                  "the client's callback refuses");
  PFFuncFree(cb);
  /* A callback kept past its call fails cleanly when called later. */
  PFFunctionHandle keep = fn("t.keep"), call_kept = fn("t.call_kept");
  assert_pf_ok(PFFuncCreateFromCFunc(cb_times10, NULL, NULL, &cb));
  args[0].v_handle = cb;
  assert_pf_ok(PFFuncCall(keep, args, codes, 1, &rv, &rc));
  assert_pf_error(PFFuncCall(call_kept, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError, "no longer");
  PFFuncFree(cb);
  PFFuncFree(keep);
  PFFuncFree(call_kept);
  PFFuncFree(apply);
}

static void test_returned_function(void** state) {
  (void)state;
  PFFunctionHandle make = fn("t.make_adder");
  PFValue rv;
  int rc;
  int before = atomic_load(&g_adders_freed);
  call1(make, (PFValue){.v_int64 = 100}, kPFInt, &rv, &rc);
  assert_int_equal(rc, kPFFuncHandle);
  PFFunctionHandle add100 = rv.v_handle;
  call1(add100, (PFValue){.v_int64 = 5}, kPFInt, &rv, &rc);
  assert_int_equal(rv.v_int64, 105);
  /* It can be passed back to the server as a callback, too. */
  PFFunctionHandle apply = fn("t.apply");
  PFValue args[2] = {{.v_handle = add100}, {.v_int64 = 1}};
  int codes[2] = {kPFFuncHandle, kPFInt};
  assert_pf_ok(PFFuncCall(apply, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 101);
  PFFuncFree(apply);
  PFFuncFree(add100); /* tells the server to release it */
  /* The release is a message; the server frees the function when it
   * arrives. A round trip after it makes sure it arrived. */
  PFFunctionHandle add = fn("t.add");
  PFValue a2[2] = {{.v_int64 = 1}, {.v_int64 = 1}};
  int c2[2] = {kPFInt, kPFInt};
  assert_pf_ok(PFFuncCall(add, a2, c2, 2, &rv, &rc));
  assert_int_equal(atomic_load(&g_adders_freed), before + 1);
  PFFuncFree(add);
  PFFuncFree(make);
}

/* The threads of this process: a connection has some of its own (its
 * housekeeper and ZeroMQ's), which are gone once it is closed. */
static int count_threads(void) {
  int n = 0;
  DIR* d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  for (struct dirent* e; (e = readdir(d)) != NULL;)
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

static void call_adder(PFFunctionHandle f, int64_t x, int64_t want) {
  PFValue rv;
  int rc;
  call1(f, (PFValue){.v_int64 = x}, kPFInt, &rv, &rc);
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, want);
}

/* A remote function keeps its connection open while it is referenced: the
 * connection's module may go (PFRPCDetach, then PFModFree: what the Python
 * binding does when the module is collected) and its functions, and those
 * the server returned, still work; the connection closes by itself when
 * the last of them goes. An explicit PFRPCDisconnect still closes at once. */
static void test_function_keeps_connection(void** state) {
  (void)state;
  int base = count_threads();
  PFModuleHandle m = NULL;
  PFFunctionHandle make = connect_fn(10000, "t.make_adder", &m);
  PFFunctionHandle add = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.add", 0, &add));
  PFValue rv;
  int rc;
  call1(make, (PFValue){.v_int64 = 100}, kPFInt, &rv, &rc);
  assert_int_equal(rc, kPFFuncHandle);
  PFFunctionHandle add100 = rv.v_handle;
  assert_true(count_threads() > base);
  assert_pf_ok(PFRPCDetach(m));
  /* Detached: neither PFRPCDisconnect nor PFRPCDetach takes it again. */
  assert_pf_error(PFRPCDisconnect(m), kPFErrTypeError, "not a module of a live connection");
  assert_pf_error(PFRPCDetach(m), kPFErrTypeError, "PFRPCDetach",
                  "not a module of a live connection");
  PFModFree(m);
  PFFuncFree(make);
  call_adder(add100, 5, 105);
  PFValue args[2] = {{.v_int64 = 1}, {.v_int64 = 2}};
  int codes[2] = {kPFInt, kPFInt};
  assert_pf_ok(PFFuncCall(add, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 3);
  PFFuncFree(add);
  call_adder(add100, 6, 106); /* the returned function alone keeps it open */
  PFFuncFree(add100);         /* the last one: the connection closes now */
  assert_int_equal(count_threads(), base);
  /* A module detached with nothing else referenced closes with it. */
  assert_pf_ok(PFRPCConnect(g_endpoint, NULL, &m));
  assert_pf_ok(PFRPCDetach(m));
  assert_true(count_threads() > base);
  PFModFree(m);
  assert_int_equal(count_threads(), base);
  /* An explicit close closes, whatever is still referenced. */
  make = connect_fn(10000, "t.make_adder", &m);
  call1(make, (PFValue){.v_int64 = 1}, kPFInt, &rv, &rc);
  PFFunctionHandle add1 = rv.v_handle;
  call_adder(add1, 1, 2);
  assert_pf_ok(PFRPCDisconnect(m));
  assert_int_equal(count_threads(), base);
  PFValue one = {.v_int64 = 1};
  int code = kPFInt;
  assert_pf_error(PFFuncCall(add1, &one, &code, 1, &rv, &rc), "ConnectionError", "closed");
  assert_pf_error(PFFuncCall(make, &one, &code, 1, &rv, &rc), "ConnectionError", "closed");
  PFFuncFree(add1);
  PFFuncFree(make);
  PFModFree(m);
  assert_pf_error(PFRPCDetach(NULL), kPFErrTypeError, "PFRPCDetach", "mod");
}

/* ---- the wire, from a raw ZeroMQ socket ---- */

typedef struct {
  void* ctx;
  void* sock;
} raw_peer;

/* A socket of `ctx` that drops what it has not sent when closed and waits
 * at most `rcv_tmo_ms` for a message. */
static void* raw_socket(void* ctx, int type, int rcv_tmo_ms) {
  void* sock = zmq_socket(ctx, type);
  assert_non_null(sock);
  int zero = 0;
  zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(sock, ZMQ_RCVTIMEO, &rcv_tmo_ms, sizeof rcv_tmo_ms);
  return sock;
}

static void raw_open(raw_peer* r, int type, const char* endpoint, int bind) {
  r->ctx = zmq_ctx_new();
  r->sock = raw_socket(r->ctx, type, 10000);
  assert_int_equal(bind ? zmq_bind(r->sock, endpoint) : zmq_connect(r->sock, endpoint), 0);
}
static void raw_close(raw_peer* r) {
  zmq_close(r->sock);
  zmq_ctx_term(r->ctx);
}

/* Sends [V, kind, id, 0, target, args...] built with msgpack. */
static void raw_call(raw_peer* r, int version, uint64_t id, const char* target) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 6);
  msgpack_pack_int(&pk, version);
  msgpack_pack_int(&pk, 2);
  msgpack_pack_uint64(&pk, id);
  msgpack_pack_uint64(&pk, 0);
  msgpack_pack_str(&pk, strlen(target));
  msgpack_pack_str_body(&pk, target, strlen(target));
  msgpack_pack_array(&pk, 1);
  msgpack_pack_int(&pk, 1);
  assert_true(zmq_send(r->sock, sb.data, sb.size, 0) >= 0);
  msgpack_sbuffer_destroy(&sb);
}

/* Sends [V, CALL, id, 0, target, [args]] where the arguments are `nint`
 * ints and, with fid != 0, a function (this side's function id fid). */
static int raw_call_args(void* sock, uint64_t id, const char* target, const int64_t* ints, int nint,
                         uint64_t fid, int flags) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 6);
  msgpack_pack_int(&pk, PF_RPC_PROTOCOL_VERSION);
  msgpack_pack_int(&pk, 2);
  msgpack_pack_uint64(&pk, id);
  msgpack_pack_uint64(&pk, 0);
  msgpack_pack_str(&pk, strlen(target));
  msgpack_pack_str_body(&pk, target, strlen(target));
  msgpack_pack_array(&pk, (size_t)nint + (fid != 0));
  if (fid != 0) {
    uint8_t le[8];
    for (int i = 0; i < 8; ++i) le[i] = (uint8_t)(fid >> (8 * i));
    msgpack_pack_ext(&pk, 8, 5); /* a function of the sender's */
    msgpack_pack_ext_body(&pk, le, 8);
  }
  for (int i = 0; i < nint; ++i) msgpack_pack_int64(&pk, ints[i]);
  int rc = zmq_send(sock, sb.data, sb.size, flags);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* Packs a 1-d float32 tensor of n elements, as a peer would: its bytes
 * inline (from `data`) or, with `flags` PF_RPC_TENSOR_FRAME, in a side
 * frame (the ext ends after the shape). */
static void pack_raw_tensor(msgpack_packer* pk, uint32_t n, const uint8_t* data, unsigned flags) {
  uint8_t hdr[17] = {(uint8_t)flags, kDLFloat, 32, 1, 0, 1, 0, 0, 0};
  for (int i = 0; i < 8; ++i) hdr[9 + i] = (uint8_t)((uint64_t)n >> (8 * i));
  size_t inline_bytes = (flags & PF_RPC_TENSOR_FRAME) ? 0 : 4 * (size_t)n;
  msgpack_pack_ext(pk, sizeof hdr + inline_bytes, PF_RPC_EXT_TENSOR);
  msgpack_pack_ext_body(pk, hdr, sizeof hdr);
  if (inline_bytes) msgpack_pack_ext_body(pk, data, inline_bytes);
}

/* Starts a message [V, kind, id, 0, ...] of 4 + nrest elements. */
static void pack_raw_header(msgpack_packer* pk, int kind, uint64_t id, uint32_t nrest) {
  msgpack_pack_array(pk, 4 + nrest);
  msgpack_pack_int(pk, PF_RPC_PROTOCOL_VERSION);
  msgpack_pack_int(pk, kind);
  msgpack_pack_uint64(pk, id);
  msgpack_pack_uint64(pk, 0);
}

/* Sends `body` and then `nsides` side frames of the given sizes (the
 * bytes of `fill`, which holds at least the largest). */
static void send_frames(void* sock, const msgpack_sbuffer* body, const size_t* sizes, int nsides,
                        const uint8_t* fill) {
  assert_true(zmq_send(sock, body->data, body->size, nsides ? ZMQ_SNDMORE : 0) >= 0);
  for (int i = 0; i < nsides; ++i)
    assert_true(zmq_send(sock, fill, sizes[i], i + 1 < nsides ? ZMQ_SNDMORE : 0) >= 0);
}

/* Sends CALL `target` with one float32 tensor of n elements (inline, or
 * with `flags`) as its argument, then side frames as send_frames. */
static void raw_tensor_call(void* sock, uint64_t id, const char* target, uint32_t n,
                            const uint8_t* data, unsigned flags, const size_t* sizes, int nsides) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  pack_raw_header(&pk, PF_RPC_CALL, id, 2);
  msgpack_pack_str(&pk, strlen(target));
  msgpack_pack_str_body(&pk, target, strlen(target));
  msgpack_pack_array(&pk, 1);
  pack_raw_tensor(&pk, n, data, flags);
  send_frames(sock, &sb, sizes, nsides, data);
  msgpack_sbuffer_destroy(&sb);
}

/* Receives one message whole: its frames' count, and the size and bytes
 * of frame k into *size and *data (malloc) when k is below the count. */
static int recv_frames(void* sock, int k, size_t* size, uint8_t** data) {
  int count = 0, more = 1;
  *data = NULL;
  while (more) {
    zmq_msg_t zm;
    zmq_msg_init(&zm);
    assert_true(zmq_msg_recv(&zm, sock, 0) >= 0);
    if (count == k) {
      *size = zmq_msg_size(&zm);
      *data = malloc(*size ? *size : 1);
      assert_non_null(*data);
      memcpy(*data, zmq_msg_data(&zm), *size);
    }
    more = zmq_msg_more(&zm);
    zmq_msg_close(&zm);
    ++count;
  }
  return count;
}

/* One message received by a raw peer: its kind, and for an ERROR its kind
 * and message. Returns 0, or -1 when nothing came in time. */
typedef struct {
  int kind;
  uint64_t id;
  char err_kind[64];
  char err_msg[512];
} raw_msg;
static int raw_next(void* sock, raw_msg* out) {
  zmq_msg_t zm;
  zmq_msg_init(&zm);
  if (zmq_msg_recv(&zm, sock, 0) < 0) {
    zmq_msg_close(&zm);
    return -1;
  }
  memset(out, 0, sizeof *out);
  msgpack_unpacked up;
  msgpack_unpacked_init(&up);
  size_t off = 0;
  if (msgpack_unpack_next(&up, zmq_msg_data(&zm), zmq_msg_size(&zm), &off) ==
          MSGPACK_UNPACK_SUCCESS &&
      up.data.type == MSGPACK_OBJECT_ARRAY && up.data.via.array.size >= 4) {
    const msgpack_object* e = up.data.via.array.ptr;
    out->kind = (int)e[1].via.u64;
    out->id = e[2].via.u64;
    if (out->kind == 4 && up.data.via.array.size >= 6) {
      snprintf(out->err_kind, sizeof out->err_kind, "%.*s", (int)e[4].via.str.size,
               e[4].via.str.ptr);
      snprintf(out->err_msg, sizeof out->err_msg, "%.*s", (int)e[5].via.str.size, e[5].via.str.ptr);
    }
  }
  msgpack_unpacked_destroy(&up);
  zmq_msg_close(&zm);
  return 0;
}

/* Receives one reply and returns its error message (or "" for OK). */
static void raw_reply(raw_peer* r, uint64_t id, char* kind, char* msg, size_t cap) {
  char buf[4096];
  int n = zmq_recv(r->sock, buf, sizeof buf, 0);
  assert_true(n > 0);
  msgpack_unpacked up;
  msgpack_unpacked_init(&up);
  size_t off = 0;
  assert_int_equal(msgpack_unpack_next(&up, buf, (size_t)n, &off), MSGPACK_UNPACK_SUCCESS);
  msgpack_object o = up.data;
  assert_int_equal(o.type, MSGPACK_OBJECT_ARRAY);
  assert_int_equal(o.via.array.ptr[2].via.u64, id);
  kind[0] = msg[0] = '\0';
  if (o.via.array.ptr[1].via.u64 == 4) {
    snprintf(kind, cap, "%.*s", (int)o.via.array.ptr[4].via.str.size,
             o.via.array.ptr[4].via.str.ptr);
    snprintf(msg, cap, "%.*s", (int)o.via.array.ptr[5].via.str.size,
             o.via.array.ptr[5].via.str.ptr);
  }
  msgpack_unpacked_destroy(&up);
}

static void test_exposed_prefix_reveals_nothing(void** state) {
  (void)state;
  raw_peer r;
  raw_open(&r, ZMQ_DEALER, g_endpoint, 0);
  char k1[256], m1[256], k2[256], m2[256], k3[256], m3[256];
  raw_call(&r, PF_RPC_PROTOCOL_VERSION, 1, "hidden.secret"); /* registered, not exposed */
  raw_reply(&r, 1, k1, m1, sizeof k1);
  raw_call(&r, PF_RPC_PROTOCOL_VERSION, 2, "hidden.nothing"); /* not registered */
  raw_reply(&r, 2, k2, m2, sizeof k2);
  raw_call(&r, PF_RPC_PROTOCOL_VERSION, 3, "t.echo");
  raw_reply(&r, 3, k3, m3, sizeof k3);
  assert_string_equal(k1, "KeyError");
  assert_string_equal(k2, "KeyError");
  assert_string_equal(m1, "no function 'hidden.secret' is available on this server");
  assert_string_equal(m2, "no function 'hidden.nothing' is available on this server");
  assert_string_equal(k3, ""); /* OK */
  raw_close(&r);
}

static void test_malformed_messages(void** state) {
  (void)state;
  raw_peer r;
  raw_open(&r, ZMQ_DEALER, g_endpoint, 0);
  int before = atomic_load(&g_log_lines);
  /* Not MessagePack at all: dropped, one log line. */
  assert_true(zmq_send(r.sock, "\xc1\xc1\xc1", 3, 0) == 3);
  /* An array that claims 4 billion items in 5 bytes: dropped. */
  assert_true(zmq_send(r.sock, "\xdd\xff\xff\xff\xff", 5, 0) == 5);
  /* A well-formed header with bad arguments: an error reply. */
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 6);
  msgpack_pack_int(&pk, PF_RPC_PROTOCOL_VERSION);
  msgpack_pack_int(&pk, 2);
  msgpack_pack_uint64(&pk, 9);
  msgpack_pack_uint64(&pk, 0);
  msgpack_pack_str(&pk, 6);
  msgpack_pack_str_body(&pk, "t.echo", 6);
  msgpack_pack_array(&pk, 1);
  msgpack_pack_ext(&pk, 3, 3); /* a tensor of 3 bytes */
  msgpack_pack_ext_body(&pk, "abc", 3);
  assert_true(zmq_send(r.sock, sb.data, sb.size, 0) >= 0);
  msgpack_sbuffer_destroy(&sb);
  char kind[256], msg[256];
  raw_reply(&r, 9, kind, msg, sizeof kind);
  assert_string_equal(kind, "ValueError");
  assert_non_null(strstr(msg, "malformed tensor"));
  /* A List marker that does not begin an array: an error reply. */
  msgpack_sbuffer_init(&sb);
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 6);
  msgpack_pack_int(&pk, PF_RPC_PROTOCOL_VERSION);
  msgpack_pack_int(&pk, 2);
  msgpack_pack_uint64(&pk, 11);
  msgpack_pack_uint64(&pk, 0);
  msgpack_pack_str(&pk, 6);
  msgpack_pack_str_body(&pk, "t.echo", 6);
  msgpack_pack_array(&pk, 1);
  msgpack_pack_ext(&pk, 0, 6);
  assert_true(zmq_send(r.sock, sb.data, sb.size, 0) >= 0);
  msgpack_sbuffer_destroy(&sb);
  raw_reply(&r, 11, kind, msg, sizeof kind);
  assert_string_equal(kind, "ValueError");
  assert_non_null(strstr(msg, "marker that does not begin an array"));
  /* A message of another version: told so. */
  raw_call(&r, 99, 10, "t.echo");
  raw_reply(&r, 10, kind, msg, sizeof kind);
  assert_string_equal(kind, "ValueError");
  assert_non_null(strstr(msg, "protocol version mismatch"));
  /* The reply above came after the garbage was handled: its lines are in. */
  assert_int_equal(atomic_load(&g_log_lines), before + 2);
  raw_close(&r);
}

/* A fake server that speaks version 99. */
static void* fake_server(void* arg) {
  raw_peer* r = arg;
  zmq_msg_t id, body;
  zmq_msg_init(&id);
  zmq_msg_init(&body);
  if (zmq_msg_recv(&id, r->sock, 0) >= 0 && zmq_msg_recv(&body, r->sock, 0) >= 0) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 5);
    msgpack_pack_int(&pk, 99);
    msgpack_pack_int(&pk, 3);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_uint64(&pk, 0);
    msgpack_pack_nil(&pk);
    zmq_send(r->sock, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE);
    zmq_send(r->sock, sb.data, sb.size, 0);
    msgpack_sbuffer_destroy(&sb);
  }
  zmq_msg_close(&id);
  zmq_msg_close(&body);
  return NULL;
}

static void test_protocol_version_mismatch(void** state) {
  (void)state;
  raw_peer r;
  raw_open(&r, ZMQ_ROUTER, "tcp://127.0.0.1:*", 1);
  char ep[128];
  size_t len = sizeof ep;
  zmq_getsockopt(r.sock, ZMQ_LAST_ENDPOINT, ep, &len);
  pthread_t t;
  pthread_create(&t, NULL, fake_server, &r);
  PFModuleHandle m = NULL;
  PFRPCOptions o = {0};
  o.timeout_ms = 10000;
  assert_pf_error(PFRPCConnect(ep, &o, &m), kPFErrValueError, "protocol version mismatch", "99");
  assert_raised_in("rpc/client.c");
  pthread_join(t, NULL);
  raw_close(&r);
}

/* ---- both sides survive the other's death ---- */

static void test_reconnect_after_server_restart(void** state) {
  (void)state;
  const char* expose[] = {"t."};
  PFRPCServerOptions so = {0};
  so.expose = expose;
  so.num_expose = 1;
  PFRPCServerHandle a = NULL;
  const char* ep = NULL;
  assert_pf_ok(PFRPCServe("tcp://127.0.0.1:*", &so, &a));
  assert_pf_ok(PFRPCServerGetEndpoint(a, &ep));
  char endpoint[128];
  snprintf(endpoint, sizeof endpoint, "%s", ep);
  PFRPCOptions o = {0};
  o.timeout_ms = 10000;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(endpoint, &o, &m));
  PFFunctionHandle add = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.add", 0, &add));
  PFValue args[2] = {{.v_int64 = 1}, {.v_int64 = 2}};
  int codes[2] = {kPFInt, kPFInt};
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(add, args, codes, 2, &rv, &rc));
  assert_pf_ok(PFRPCServerStop(a));
  /* A new server on the same endpoint: the client reconnects by itself,
   * and the next call waits for that (within its timeout). */
  PFRPCServerHandle b = NULL;
  assert_pf_ok(PFRPCServe(endpoint, &so, &b));
  assert_pf_ok(PFFuncCall(add, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 3);
  PFFuncFree(add);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  assert_pf_ok(PFRPCServerStop(b));
}

static void test_server_survives_client_death(void** state) {
  (void)state;
  /* A client sends a call that blocks, and goes away before the reply. */
  raw_peer r;
  raw_open(&r, ZMQ_DEALER, g_endpoint, 0);
  raw_call(&r, PF_RPC_PROTOCOL_VERSION, 1, "t.block");
  char kind[256], msg[256];
  raw_call(&r, PF_RPC_PROTOCOL_VERSION, 2, "t.echo"); /* answered: the first is running */
  raw_reply(&r, 2, kind, msg, sizeof kind);
  raw_close(&r);
  assert_int_equal(write(g_gate[1], "x", 1), 1); /* its reply now has nowhere to go */
  /* The server goes on serving others. */
  PFFunctionHandle add = fn("t.add");
  PFValue args[2] = {{.v_int64 = 4}, {.v_int64 = 5}};
  int codes[2] = {kPFInt, kPFInt};
  PFValue rv;
  int rc;
  for (int i = 0; i < 10; ++i) {
    assert_pf_ok(PFFuncCall(add, args, codes, 2, &rv, &rc));
    assert_int_equal(rv.v_int64, 9);
  }
  PFFuncFree(add);
}

/* ---- clients that misbehave cost only themselves ---- */

/* A hostile client: a raw DEALER that takes in almost nothing (a one-message
 * queue, a tiny socket buffer) and never reads. */
static void open_deaf_client(raw_peer* r, const char* endpoint) {
  r->ctx = zmq_ctx_new();
  r->sock = zmq_socket(r->ctx, ZMQ_DEALER);
  int zero = 0, one = 1, small = 4096, send_tmo = 5000;
  zmq_setsockopt(r->sock, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(r->sock, ZMQ_RCVHWM, &one, sizeof one);
  zmq_setsockopt(r->sock, ZMQ_RCVBUF, &small, sizeof small);
  zmq_setsockopt(r->sock, ZMQ_SNDTIMEO, &send_tmo, sizeof send_tmo);
  assert_int_equal(zmq_connect(r->sock, endpoint), 0);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

typedef struct {
  PFRPCServerHandle server;
  atomic_int done;
} stopper;
static void* stop_server(void* arg) {
  stopper* st = arg;
  PFRPCServerStop(st->server);
  atomic_store(&st->done, 1);
  return NULL;
}
/* Stops a server and returns how long that took; gives up waiting after
 * `limit_ms` (-1 then, and the caller's `unblock` is run so that the stop
 * can finish). */
static int64_t timed_stop(PFRPCServerHandle s, int64_t limit_ms, raw_peer* unblock) {
  stopper st = {s, 0};
  pthread_t t;
  int64_t t0 = now_ms();
  assert_int_equal(pthread_create(&t, NULL, stop_server, &st), 0);
  while (!atomic_load(&st.done) && now_ms() - t0 < limit_ms) sleep_ms(10);
  int64_t took = atomic_load(&st.done) ? now_ms() - t0 : -1;
  if (took < 0 && unblock != NULL) raw_close(unblock), unblock->sock = NULL;
  pthread_join(t, NULL);
  return took;
}

static atomic_int g_drop_lines;
static void count_drop_log(void* user, const char* line) {
  (void)user;
  if (strstr(line, "do not read") != NULL) atomic_fetch_add(&g_drop_lines, 1);
}

/* Calls t.add on `f` `n` times; each must return within `limit_ms`. */
static void prompt_adds(PFFunctionHandle f, int n, int64_t limit_ms) {
  PFValue args[2] = {{.v_int64 = 40}, {.v_int64 = 2}};
  int codes[2] = {kPFInt, kPFInt};
  for (int i = 0; i < n; ++i) {
    PFValue rv;
    int rc;
    int64_t t0 = now_ms();
    assert_pf_ok(PFFuncCall(f, args, codes, 2, &rv, &rc));
    int64_t took = now_ms() - t0;
    if (took >= limit_ms) print_error("call %d took %lld ms\n", i, (long long)took);
    assert_true(took < limit_ms);
    assert_int_equal(rv.v_int64, 42);
  }
}

/* A client that sends requests and never reads its replies: the server
 * drops what it cannot queue to it (and says so in its log), every other
 * client keeps being served, and the server stops promptly. */
static void test_client_that_does_not_read(void** state) {
  (void)state;
  const char* expose[] = {"t."};
  PFRPCServerOptions so = {0};
  so.expose = expose;
  so.num_expose = 1;
  so.num_workers = 2;
  so.max_calls_per_client = 1 << 20; /* admit everything: the replies pile up */
  so.log = count_drop_log;
  atomic_store(&g_drop_lines, 0);
  PFRPCServerHandle s = NULL;
  const char* ep = NULL;
  assert_pf_ok(PFRPCServe("tcp://127.0.0.1:*", &so, &s));
  assert_pf_ok(PFRPCServerGetEndpoint(s, &ep));
  char endpoint[128];
  snprintf(endpoint, sizeof endpoint, "%s", ep);
  raw_peer deaf;
  open_deaf_client(&deaf, endpoint);
  /* More replies of 16 KiB than ZeroMQ queues to one client, and more than
   * the socket buffers hold. */
  const int flood = getenv("PF_UNDER_VALGRIND") ? 1600 : 3000;
  int64_t size = 16384;
  for (int i = 0; i < flood; ++i)
    assert_true(raw_call_args(deaf.sock, (uint64_t)i + 1, "t.bytes", &size, 1, 0, 0) >= 0);
  PFRPCOptions co = {0};
  co.timeout_ms = 10000;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(endpoint, &co, &m));
  PFFunctionHandle add = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.add", 0, &add));
  /* Until the flood is served (or dropped), and after: 1.5 s, and on until
   * the server has said that it dropped (a loaded machine, or valgrind
   * beside other tests, may take longer to fill the queue), 60 s at most. */
  const int64_t limit = getenv("PF_UNDER_VALGRIND") ? 8000 : 2000;
  int64_t t0 = now_ms();
  while (now_ms() - t0 < 1500 || (atomic_load(&g_drop_lines) < 1 && now_ms() - t0 < 60000))
    prompt_adds(add, 1, limit);
  prompt_adds(add, 10, limit);
  assert_true(atomic_load(&g_drop_lines) >= 1);
  PFFuncFree(add);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  int64_t took = timed_stop(s, 10000, &deaf);
  print_message("stopped in %lld ms with the client still not reading\n", (long long)took);
  assert_true(took >= 0 && took < (getenv("PF_UNDER_VALGRIND") ? 8000 : 2000));
  if (deaf.sock) raw_close(&deaf);
}

/* A client that starts many calls whose callbacks it never answers: it
 * holds at most max_callbacks_per_client workers waiting for its callbacks
 * (num_workers - 1 by default) and max_calls_per_client calls (64 by
 * default); the excess is refused at once (calls beyond the limit, and
 * callbacks beyond theirs, which fail the calls that make them), and
 * another client is served promptly. */
static void test_unanswered_callbacks(void** state) {
  (void)state;
  const char* expose[] = {"t."};
  PFRPCServerOptions so = {0};
  so.expose = expose;
  so.num_expose = 1;
  so.num_workers = 4;
  so.callback_timeout_ms = 20000;
  PFRPCServerHandle s = NULL;
  const char* ep = NULL;
  assert_pf_ok(PFRPCServe("tcp://127.0.0.1:*", &so, &s));
  assert_pf_ok(PFRPCServerGetEndpoint(s, &ep));
  char endpoint[128];
  snprintf(endpoint, sizeof endpoint, "%s", ep);
  raw_peer bad;
  raw_open(&bad, ZMQ_DEALER, endpoint, 0);
  int tmo = 3000;
  zmq_setsockopt(bad.sock, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
  const int n = 300;
  for (int i = 0; i < n; ++i)
    assert_true(raw_call_args(bad.sock, (uint64_t)i + 1, "t.apply", NULL, 0, 77, 0) >= 0);
  /* The refusals come at once; the callbacks come and are never answered. */
  int refused = 0, refused_cb = 0, callbacks = 0, other = 0;
  raw_msg rm;
  while (refused + refused_cb + callbacks < n + 3 && raw_next(bad.sock, &rm) == 0) {
    if (rm.kind == 2) {
      ++callbacks;
    } else if (rm.kind == 4 && strcmp(rm.err_kind, "RuntimeError") == 0 &&
               strstr(rm.err_msg, "max_calls_per_client") != NULL) {
      if (refused == 0) print_message("refused: %s\n", rm.err_msg);
      ++refused;
    } else if (rm.kind == 4 && strcmp(rm.err_kind, "RuntimeError") == 0 &&
               strstr(rm.err_msg, "max_callbacks_per_client") != NULL) {
      if (refused_cb == 0) print_message("callback refused: %s\n", rm.err_msg);
      ++refused_cb;
    } else {
      ++other;
    }
  }
  print_message("%d calls refused, %d failed on a refused callback, %d callbacks wait\n", refused,
                refused_cb, callbacks);
  assert_int_equal(other, 0);
  assert_true(refused >= 1);
  assert_int_equal(refused + refused_cb, n - 3);
  assert_int_equal(callbacks, 3); /* num_workers - 1 wait, one worker is left */
  /* Another client is served promptly, however many calls the first has
   * queued. */
  PFRPCOptions co = {0};
  co.timeout_ms = 10000;
  PFModuleHandle m = NULL;
  const int64_t limit = getenv("PF_UNDER_VALGRIND") ? 8000 : 2000;
  int64_t t0 = now_ms();
  assert_pf_ok(PFRPCConnect(endpoint, &co, &m));
  assert_true(now_ms() - t0 < limit);
  PFFunctionHandle add = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.add", 0, &add));
  prompt_adds(add, 20, limit);
  PFFuncFree(add);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  /* Stopping fails the callbacks that wait and drops the queued calls. */
  int64_t took = timed_stop(s, 10000, NULL);
  assert_true(took >= 0 && took < limit);
  raw_close(&bad);
}

/* ---- functions a server passes to its clients ---- */

/* Waits up to `ms` for *counter to reach `want`; returns how long it took,
 * or -1. */
static int64_t wait_count(atomic_int* counter, int want, int64_t ms) {
  int64_t t0 = now_ms();
  while (atomic_load(counter) < want) {
    if (now_ms() - t0 > ms) return -1;
    sleep_ms(10);
  }
  return now_ms() - t0;
}

/* A result that fails to pack after it exported many functions (more than
 * sixteen) exports none: every one is released at once. */
static void test_failed_result_undoes_every_export(void** state) {
  (void)state;
  PFFunctionHandle f = fn("t.adders_then_boxed");
  int before = atomic_load(&g_boxed_adders_freed);
  PFValue arg = {.v_int64 = 40}, rv;
  int code = kPFInt, rc;
  assert_pf_error(PFFuncCall(f, &arg, &code, 1, &rv, &rc), kPFErrTypeError, "result", "boxed");
  /* The array and its functions went when the call ended, so the adders
   * finalize as soon as the exports are undone. */
  assert_true(wait_count(&g_boxed_adders_freed, before + 40, 2000) >= 0);
  assert_int_equal(atomic_load(&g_boxed_adders_freed), before + 40);
  PFFuncFree(f);
}

/* A server of the test's own with `max_exports` per client, and a
 * connection to it. */
static PFRPCServerHandle serve_t(int max_exports, PFRPCLogFunc log, char* endpoint, size_t cap) {
  const char* expose[] = {"t."};
  PFRPCServerOptions so = {0};
  so.expose = expose;
  so.num_expose = 1;
  so.num_workers = 2;
  so.max_exports_per_client = max_exports;
  so.log = log;
  PFRPCServerHandle s = NULL;
  const char* ep = NULL;
  assert_pf_ok(PFRPCServe("tcp://127.0.0.1:*", &so, &s));
  assert_pf_ok(PFRPCServerGetEndpoint(s, &ep));
  snprintf(endpoint, cap, "%s", ep);
  return s;
}

static PFFunctionHandle make_adder_on(PFFunctionHandle make, int64_t k) {
  return pf_test_call1(make, (PFValue){.v_int64 = k}, kPFInt, kPFFuncHandle).v_handle;
}

/* A client holds at most max_exports_per_client functions of the server;
 * one released makes room again. */
static void test_exports_per_client_limit(void** state) {
  (void)state;
  char endpoint[128];
  PFRPCServerHandle s = serve_t(8, NULL, endpoint, sizeof endpoint);
  PFModuleHandle m = NULL;
  PFRPCOptions co = {0};
  co.timeout_ms = 10000;
  assert_pf_ok(PFRPCConnect(endpoint, &co, &m));
  PFFunctionHandle make = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.make_adder", 0, &make));
  PFFunctionHandle held[8];
  for (int i = 0; i < 8; ++i) held[i] = make_adder_on(make, i);
  PFValue arg = {.v_int64 = 8}, rv;
  int code = kPFInt, rc;
  assert_pf_error(PFFuncCall(make, &arg, &code, 1, &rv, &rc), kPFErrRuntimeError,
                  "already holds 8 functions", "max_exports_per_client");
  /* Another client has a limit of its own. */
  PFModuleHandle m2 = NULL;
  assert_pf_ok(PFRPCConnect(endpoint, &co, &m2));
  PFFunctionHandle make2 = NULL;
  assert_pf_ok(PFModGetFunction(m2, "t.make_adder", 0, &make2));
  PFFuncFree(make_adder_on(make2, 1));
  PFFuncFree(make2);
  assert_pf_ok(PFRPCDisconnect(m2));
  PFModFree(m2);
  /* Releasing one makes room (the release travels on its own). */
  PFFuncFree(held[0]);
  held[0] = NULL;
  int64_t t0 = now_ms();
  int st = -1;
  while (st != 0 && now_ms() - t0 < 5000) {
    st = PFFuncCall(make, &arg, &code, 1, &rv, &rc);
    if (st != 0) sleep_ms(20);
  }
  assert_int_equal(st, 0);
  held[0] = rv.v_handle;
  PFValue x = {.v_int64 = 1};
  assert_pf_ok(PFFuncCall(held[0], &x, &code, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 9);
  for (int i = 0; i < 8; ++i) PFFuncFree(held[i]);
  PFFuncFree(make);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  assert_pf_ok(PFRPCServerStop(s));
}

/* A reply that carries a function but cannot be delivered (its client
 * went away while the call ran) releases that function at once. */
static void test_undelivered_reply_releases_its_functions(void** state) {
  (void)state;
  raw_peer r;
  raw_open(&r, ZMQ_DEALER, g_endpoint, 0);
  int64_t k = 5;
  int before = atomic_load(&g_adders_freed);
  assert_true(raw_call_args(r.sock, 1, "t.adder_after_gate", &k, 1, 0, 0) >= 0);
  sleep_ms(200); /* the call is running */
  raw_close(&r);
  sleep_ms(300); /* the server has seen the connection go */
  assert_int_equal(write(g_gate[1], "x", 1), 1);
  int64_t took = wait_count(&g_adders_freed, before + 1, 3000);
  print_message("released %lld ms after the reply was dropped\n", (long long)took);
  /* Well before a sweep for gone clients would (PF_RPC_CLIENT_GONE_MS). */
  assert_true(took >= 0 && took < PF_RPC_CLIENT_GONE_MS / 2);
}

static atomic_int g_released_lines;
static void count_release_log(void* user, const char* line) {
  (void)user;
  if (strstr(line, "released 2 function(s)") != NULL) atomic_fetch_add(&g_released_lines, 1);
}

/* A client that goes away without releasing the functions it holds (its
 * process died; here, it disconnects, and a disconnected connection sends
 * no release) loses them once the server has not reached it for
 * PF_RPC_CLIENT_GONE_MS. */
static void test_gone_client_loses_its_functions(void** state) {
  (void)state;
  char endpoint[128];
  atomic_store(&g_released_lines, 0);
  PFRPCServerHandle s = serve_t(0, count_release_log, endpoint, sizeof endpoint);
  PFModuleHandle m = NULL;
  PFRPCOptions co = {0};
  co.timeout_ms = 10000;
  assert_pf_ok(PFRPCConnect(endpoint, &co, &m));
  PFFunctionHandle make = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.make_adder", 0, &make));
  PFFunctionHandle a = make_adder_on(make, 1), b = make_adder_on(make, 2);
  PFFuncFree(make);
  int before = atomic_load(&g_adders_freed);
  int64_t t0 = now_ms();
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  PFFuncFree(a); /* the connection is closed: no release is sent */
  PFFuncFree(b);
  int64_t took = wait_count(&g_adders_freed, before + 2, PF_RPC_CLIENT_GONE_MS + 10000);
  took = took < 0 ? -1 : now_ms() - t0;
  print_message("released %lld ms after the client went\n", (long long)took);
  assert_true(took >= PF_RPC_CLIENT_GONE_MS);
  assert_int_equal(atomic_load(&g_released_lines), 1);
  assert_pf_ok(PFRPCServerStop(s));
}

/* ---- the bytes queued to a client that does not read ---- */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
/* From the sanitizers' allocator interface (declared here: gcc ships no
 * header for it). The heap in use, as the sanitizer's allocator counts it
 * (freed memory that it keeps in quarantine does not count). */
size_t __sanitizer_get_current_allocated_bytes(void);
static int64_t memory_in_use(void) { return (int64_t)__sanitizer_get_current_allocated_bytes(); }
#else
/* The resident set (under valgrind, the client's heap is in it). */
static int64_t memory_in_use(void) {
  long pages = 0, resident = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  if (f) fclose(f);
  return (int64_t)resident * sysconf(_SC_PAGESIZE);
}
#endif

/* A client that asks for many large replies and never reads them ties up
 * at most about PF_RPC_SEND_QUEUE_BYTES of the server's memory (not
 * PF_RPC_SEND_QUEUE replies' worth), and another client is served
 * meanwhile. */
static void test_send_queue_bounded_in_bytes(void** state) {
  (void)state;
  const char* expose[] = {"t."};
  PFRPCServerOptions so = {0};
  so.expose = expose;
  so.num_expose = 1;
  so.num_workers = 2;
  so.max_calls_per_client = 1 << 20; /* admit everything */
  PFRPCServerHandle s = NULL;
  const char* ep = NULL;
  assert_pf_ok(PFRPCServe("tcp://127.0.0.1:*", &so, &s));
  assert_pf_ok(PFRPCServerGetEndpoint(s, &ep));
  char endpoint[128];
  snprintf(endpoint, sizeof endpoint, "%s", ep);
  PFRPCOptions co = {0};
  co.timeout_ms = 10000;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(endpoint, &co, &m));
  PFFunctionHandle add = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.add", 0, &add));
  int64_t base = memory_in_use();
  raw_peer deaf;
  open_deaf_client(&deaf, endpoint);
  /* 900 replies of 1 MiB: under the message bound, 14 times the bytes. */
  const int flood = 900;
  int64_t size = 1 << 20;
  for (int i = 0; i < flood; ++i)
    assert_true(raw_call_args(deaf.sock, (uint64_t)i + 1, "t.bytes", &size, 1, 0, 0) >= 0);
  const int64_t allowed = 2 * PF_RPC_SEND_QUEUE_BYTES;
  const int64_t limit = getenv("PF_UNDER_VALGRIND") ? 8000 : 2000;
  int64_t peak = 0, t0 = now_ms();
  while (now_ms() - t0 < 3000 && peak <= allowed) {
    prompt_adds(add, 1, limit);
    int64_t grown = memory_in_use() - base;
    if (grown > peak) peak = grown;
    sleep_ms(20);
  }
  print_message("the server's memory grew by at most %lld MiB (allowed %lld MiB)\n",
                (long long)(peak >> 20), (long long)(allowed >> 20));
  assert_true(peak <= allowed);
  PFFuncFree(add);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  int64_t took = timed_stop(s, 10000, &deaf);
  assert_true(took >= 0 && took < (getenv("PF_UNDER_VALGRIND") ? 8000 : 2000));
  if (deaf.sock) raw_close(&deaf);
}

/* ---- CURVE ---- */

static void test_curve_accept_and_refuse(void** state) {
  (void)state;
  char spub[PF_RPC_KEY_SIZE], ssec[PF_RPC_KEY_SIZE], cpub[PF_RPC_KEY_SIZE], csec[PF_RPC_KEY_SIZE],
      opub[PF_RPC_KEY_SIZE], osec[PF_RPC_KEY_SIZE], derived[PF_RPC_KEY_SIZE];
  assert_pf_ok(PFRPCCurveKeypair(spub, ssec));
  assert_pf_ok(PFRPCCurveKeypair(cpub, csec));
  assert_pf_ok(PFRPCCurveKeypair(opub, osec));
  assert_pf_ok(PFRPCCurvePublicKey(ssec, derived));
  assert_string_equal(derived, spub);
  const char* expose[] = {"t."};
  const char* authorized[] = {cpub};
  PFRPCServerOptions so = {0};
  so.expose = expose;
  so.num_expose = 1;
  so.curve_secret_key = ssec;
  so.authorized_keys = authorized;
  so.num_authorized_keys = 1;
  atomic_store(&g_log_lines, 0);
  so.log = count_log;
  PFRPCServerHandle s = NULL;
  const char* ep = NULL;
  assert_pf_ok(PFRPCServe("tcp://127.0.0.1:*", &so, &s));
  assert_pf_ok(PFRPCServerGetEndpoint(s, &ep));
  /* The right keys: calls work. */
  PFRPCOptions co = {0};
  co.timeout_ms = 10000;
  co.server_key = spub;
  co.client_public_key = cpub;
  co.client_secret_key = csec;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(ep, &co, &m));
  PFFunctionHandle add = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.add", 0, &add));
  PFValue args[2] = {{.v_int64 = 20}, {.v_int64 = 22}};
  int codes[2] = {kPFInt, kPFInt};
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(add, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 42);
  PFFuncFree(add);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  /* A key pair the server does not know: refused. */
  co.timeout_ms = 300;
  co.client_public_key = opub;
  co.client_secret_key = osec;
  m = NULL;
  assert_pf_error(PFRPCConnect(ep, &co, &m), "ConnectionError", "no server answered");
  /* The wrong server key: refused. */
  co.server_key = opub;
  co.client_public_key = cpub;
  co.client_secret_key = csec;
  assert_pf_error(PFRPCConnect(ep, &co, &m), "ConnectionError", "no server answered");
  /* No keys at all: refused. */
  PFRPCOptions none = {0};
  none.timeout_ms = 300;
  assert_pf_error(PFRPCConnect(ep, &none, &m), "ConnectionError", "no server answered");
  assert_null(m);
  assert_pf_ok(PFRPCServerStop(s));
  assert_true(atomic_load(&g_log_lines) >= 1); /* the refusals were logged */
}

/* ---- bad input ---- */

static void test_connect_bad_arguments(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_error(PFRPCConnect(NULL, NULL, &m), kPFErrTypeError, "PFRPCConnect", "endpoints");
  assert_pf_error(PFRPCConnect("tcp://127.0.0.1:1", NULL, NULL), kPFErrTypeError, "out");
  assert_pf_error(PFRPCConnect("", NULL, &m), kPFErrValueError, "endpoint 0", "empty");
  assert_pf_error(PFRPCConnect("tcp://127.0.0.1:1,", NULL, &m), kPFErrValueError, "endpoint 1");
  assert_pf_error(PFRPCConnect("nonsense", NULL, &m), kPFErrValueError, "endpoint 'nonsense'");
  PFRPCOptions o = {0};
  o.timeout_ms = -1;
  assert_pf_error(PFRPCConnect("tcp://127.0.0.1:1", &o, &m), kPFErrValueError, "timeout_ms");
  o.timeout_ms = 0;
  o.server_key = "short";
  assert_pf_error(PFRPCConnect("tcp://127.0.0.1:1", &o, &m), kPFErrValueError, "server_key");
  o.server_key = NULL;
  o.client_public_key = "x";
  assert_pf_error(PFRPCConnect("tcp://127.0.0.1:1", &o, &m), kPFErrValueError, "server_key",
                  "missing");
  o.client_public_key = NULL;
  o.max_message_size = -5;
  assert_pf_error(PFRPCConnect("tcp://127.0.0.1:1", &o, &m), kPFErrValueError, "max_message_size");
  assert_null(m);
}

static void test_disconnect_misuse(void** state) {
  (void)state;
  assert_pf_error(PFRPCDisconnect(NULL), kPFErrTypeError, "PFRPCDisconnect", "mod");
  PFModuleHandle self = NULL;
  assert_pf_ok(PFModLoadFromDescriptors(NULL, NULL, &self));
  assert_pf_error(PFRPCDisconnect(self), kPFErrTypeError, "not a module of a live connection");
  PFModFree(self);
  /* Twice: the second is refused. */
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(g_endpoint, NULL, &m));
  assert_pf_ok(PFRPCDisconnect(m));
  assert_pf_error(PFRPCDisconnect(m), kPFErrTypeError, "already disconnected");
  PFModFree(m);
}

static void test_serve_bad_options(void** state) {
  (void)state;
  PFRPCServerHandle s = NULL;
  assert_pf_error(PFRPCServe(NULL, NULL, &s), kPFErrTypeError, "PFRPCServe", "endpoint");
  assert_pf_error(PFRPCServe("tcp://127.0.0.1:*", NULL, NULL), kPFErrTypeError, "out");
  PFRPCServerOptions so = {0};
  so.num_workers = -1;
  assert_pf_error(PFRPCServe("tcp://127.0.0.1:*", &so, &s), kPFErrValueError, "num_workers");
  so.num_workers = 0;
  so.num_expose = 1;
  assert_pf_error(PFRPCServe("tcp://127.0.0.1:*", &so, &s), kPFErrValueError, "expose");
  so.num_expose = 0;
  so.curve_secret_key = "not a key";
  assert_pf_error(PFRPCServe("tcp://127.0.0.1:*", &so, &s), kPFErrValueError, "curve_secret_key");
  so.curve_secret_key = NULL;
  so.max_calls_per_client = -1;
  assert_pf_error(PFRPCServe("tcp://127.0.0.1:*", &so, &s), kPFErrValueError,
                  "max_calls_per_client");
  so.max_calls_per_client = 0;
  so.max_workers_per_client = -2;
  assert_pf_error(PFRPCServe("tcp://127.0.0.1:*", &so, &s), kPFErrValueError,
                  "max_workers_per_client");
  so.max_workers_per_client = 0;
  so.max_callbacks_per_client = -3;
  assert_pf_error(PFRPCServe("tcp://127.0.0.1:*", &so, &s), kPFErrValueError,
                  "max_callbacks_per_client");
  so.max_callbacks_per_client = 0;
  so.max_exports_per_client = -4;
  assert_pf_error(PFRPCServe("tcp://127.0.0.1:*", &so, &s), kPFErrValueError,
                  "max_exports_per_client");
  so.max_exports_per_client = 0;
  assert_pf_error(PFRPCServe("bogus://x", &so, &s), kPFErrRuntimeError, "cannot bind");
  assert_null(s);
  /* An error of the setup keeps its place across the teardown. */
  assert_non_null(strstr(PFErrorGetTraceback(), "rpc/server.c"));
  assert_int_equal(PFRPCServerStop(NULL), 0);
  const char* ep;
  assert_pf_error(PFRPCServerGetEndpoint(NULL, &ep), kPFErrTypeError, "server");
  so.num_authorized_keys = 1;
  const char* keys[] = {"x"};
  so.authorized_keys = keys;
  assert_pf_error(PFRPCServe("tcp://127.0.0.1:*", &so, &s), kPFErrValueError,
                  "authorized_keys needs curve_secret_key");
  assert_null(s);
  char pub[PF_RPC_KEY_SIZE], secret[PF_RPC_KEY_SIZE];
  assert_pf_ok(PFRPCCurveKeypair(pub, secret));
  so.curve_secret_key = secret;
  assert_pf_error(PFRPCServe("tcp://127.0.0.1:*", &so, &s), kPFErrValueError, "PFRPCServe",
                  "authorized_keys[0] is not a CURVE key");
  assert_null(s);
  assert_non_null(strstr(PFErrorGetTraceback(), "rpc/server.c"));
}

static void test_struct_sizes(void** state) {
  (void)state;
  size_t n = 0;
  assert_pf_ok(PFRPCGetStructSize("PFRPCOptions", &n));
  assert_int_equal(n, sizeof(PFRPCOptions));
  assert_pf_ok(PFRPCGetStructSize("PFRPCServerOptions", &n));
  assert_int_equal(n, sizeof(PFRPCServerOptions));
  assert_pf_error(PFRPCGetStructSize("PFValue", &n), kPFErrKeyError, "PFValue");
  assert_pf_error(PFRPCGetStructSize(NULL, &n), kPFErrTypeError, "name");
  assert_pf_error(PFRPCGetStructSize("PFRPCOptions", NULL), kPFErrTypeError, "out");
}

static void test_curve_key_misuse(void** state) {
  (void)state;
  char k[PF_RPC_KEY_SIZE];
  assert_pf_error(PFRPCCurveKeypair(NULL, k), kPFErrTypeError, "public_key");
  assert_pf_error(PFRPCCurvePublicKey("short", k), kPFErrValueError, "secret_key");
}

/* ---- pf serve ---- */

/* In a `pf serve` child: stderr to the pipe `out`, stdout to /dev/null (a
 * pipeline that reads this test's output must not wait for the server),
 * and death with this process, so that a failed assertion leaves no
 * server behind. */
static void child_hygiene(int out[2]) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  dup2(out[1], 2);
  int null = open("/dev/null", O_WRONLY);
  if (null >= 0) dup2(null, 1);
  close(out[0]);
  close(out[1]);
}

static void test_pf_serve_and_connect(void** state) {
  (void)state;
  int out[2];
  assert_int_equal(pipe(out), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    child_hygiene(out);
    execl(PF_TEST_CLI_REL, "pf", "--load", PF_TEST_DEMO_PLUGIN, "serve", "--listen",
          "tcp://127.0.0.1:*", "--expose", "demo.", "--workers", "2", (char*)NULL);
    _exit(127);
  }
  close(out[1]);
  /* The ready line: "pf serve: listening on ENDPOINT ...". */
  char line[512];
  size_t n = 0;
  while (n < sizeof line - 1) {
    ssize_t k = read(out[0], line + n, 1);
    if (k <= 0 || line[n] == '\n') break;
    ++n;
  }
  line[n] = '\0';
  const char* at = strstr(line, "tcp://");
  assert_non_null(at);
  char ep[128];
  snprintf(ep, sizeof ep, "%.*s", (int)strcspn(at, " \n"), at);
  PFModuleHandle m = NULL;
  PFRPCOptions o = {0};
  o.timeout_ms = 10000;
  assert_pf_ok(PFRPCConnect(ep, &o, &m));
  int count = 0;
  const char** names = NULL;
  assert_pf_ok(PFModListFunctionNames(m, &count, &names));
  assert_true(count > 0);
  for (int i = 0; i < count; ++i) assert_true(strncmp(names[i], "demo.", 5) == 0);
  PFFunctionHandle add = NULL;
  assert_pf_ok(PFModGetFunction(m, "demo.add", 0, &add));
  assert_non_null(add);
  PFValue args[2] = {{.v_int64 = 2}, {.v_int64 = 40}};
  int codes[2] = {kPFInt, kPFInt};
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(add, args, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 42);
  /* `pf --connect` against the same server. */
  char cmd[512];
  snprintf(cmd, sizeof cmd, "%s --connect %s call demo.add 1 2", PF_TEST_CLI_REL, ep);
  FILE* p = popen(cmd, "r");
  assert_non_null(p);
  char got[64] = {0};
  assert_non_null(fgets(got, sizeof got, p));
  assert_int_equal(pclose(p), 0);
  assert_string_equal(got, "3\n");
  /* Stopping the server: the client's next call fails cleanly. */
  kill(pid, SIGTERM);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  o.timeout_ms = 300;
  assert_true(PFFuncCall(add, args, codes, 2, &rv, &rc) == -1);
  assert_true(strcmp(PFErrorGetKind(), "ConnectionError") == 0 ||
              strcmp(PFErrorGetKind(), "TimeoutError") == 0);
  PFFuncFree(add);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  close(out[0]);
}

/* Sends [V, CALL, id, 0, target, [bytes of n zero bytes]]. */
static int raw_call_bytes(void* sock, uint64_t id, const char* target, size_t n) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 6);
  msgpack_pack_int(&pk, PF_RPC_PROTOCOL_VERSION);
  msgpack_pack_int(&pk, 2);
  msgpack_pack_uint64(&pk, id);
  msgpack_pack_uint64(&pk, 0);
  msgpack_pack_str(&pk, strlen(target));
  msgpack_pack_str_body(&pk, target, strlen(target));
  msgpack_pack_array(&pk, 1);
  static const char zeros[1 << 16];
  msgpack_pack_bin(&pk, n);
  msgpack_pack_bin_body(&pk, zeros, n);
  int rc = zmq_send(sock, sb.data, sb.size, 0);
  msgpack_sbuffer_destroy(&sb);
  return rc;
}

/* `pf serve` with a client that floods it and never reads: other clients
 * are served, and SIGTERM stops it within about a second. */
static void test_pf_serve_stops_with_deaf_client(void** state) {
  (void)state;
  int out[2];
  assert_int_equal(pipe(out), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    child_hygiene(out);
    execl(PF_TEST_CLI_REL, "pf", "--load", PF_TEST_DEMO_PLUGIN, "serve", "--listen",
          "tcp://127.0.0.1:*", "--expose", "demo.", "--workers", "2", "--max-calls-per-client",
          "1000000", (char*)NULL);
    _exit(127);
  }
  close(out[1]);
  char line[512];
  size_t n = 0;
  while (n < sizeof line - 1 && read(out[0], line + n, 1) == 1 && line[n] != '\n') ++n;
  line[n] = '\0';
  const char* at = strstr(line, "tcp://");
  if (at == NULL) kill(pid, SIGKILL);
  assert_non_null(at);
  char ep[128];
  snprintf(ep, sizeof ep, "%.*s", (int)strcspn(at, " \n"), at);
  raw_peer deaf;
  open_deaf_client(&deaf, ep);
  for (int i = 0; i < 3000; ++i)
    if (raw_call_bytes(deaf.sock, (uint64_t)i + 1, "demo.reverse", 16384) < 0) break;
  PFRPCOptions o = {0};
  o.timeout_ms = 10000;
  PFModuleHandle m = NULL;
  int ok = PFRPCConnect(ep, &o, &m) == 0;
  PFFunctionHandle add = NULL;
  if (ok) ok = PFModGetFunction(m, "demo.add", 0, &add) == 0 && add != NULL;
  int64_t t0 = now_ms();
  while (ok && now_ms() - t0 < 1000) {
    PFValue args[2] = {{.v_int64 = 40}, {.v_int64 = 2}};
    int codes[2] = {kPFInt, kPFInt};
    PFValue rv;
    int rc;
    int64_t c0 = now_ms();
    ok = PFFuncCall(add, args, codes, 2, &rv, &rc) == 0 && rv.v_int64 == 42 && now_ms() - c0 < 2000;
    if (!ok) print_error("pf serve did not answer: %s\n", PFGetLastError());
  }
  PFFuncFree(add);
  if (m) PFRPCDisconnect(m), PFModFree(m);
  /* SIGTERM, with the flooding client still connected and not reading. */
  kill(pid, SIGTERM);
  t0 = now_ms();
  int status = 0;
  pid_t got = 0;
  while ((got = waitpid(pid, &status, WNOHANG)) == 0 && now_ms() - t0 < 5000) sleep_ms(10);
  int64_t took = now_ms() - t0;
  if (got == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
  }
  raw_close(&deaf);
  close(out[0]);
  print_message("pf serve exited %lld ms after SIGTERM\n", (long long)took);
  assert_true(ok);
  assert_int_equal(got, pid);
  assert_true(took < 2000);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* pf serve with CURVE: only the authorized client key gets in. */
static void write_file(const char* path, const char* text) {
  FILE* f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void test_pf_serve_with_curve_keys(void** state) {
  (void)state;
  char spub[PF_RPC_KEY_SIZE], ssec[PF_RPC_KEY_SIZE], cpub[PF_RPC_KEY_SIZE], csec[PF_RPC_KEY_SIZE],
      opub[PF_RPC_KEY_SIZE], osec[PF_RPC_KEY_SIZE];
  assert_pf_ok(PFRPCCurveKeypair(spub, ssec));
  assert_pf_ok(PFRPCCurveKeypair(cpub, csec));
  assert_pf_ok(PFRPCCurveKeypair(opub, osec));
  char dir[] = "/tmp/pf_rpc_keys_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char secret_file[128], authorized_file[128], client_file[128], text[128];
  snprintf(secret_file, sizeof secret_file, "%s/server.key", dir);
  snprintf(authorized_file, sizeof authorized_file, "%s/authorized", dir);
  snprintf(client_file, sizeof client_file, "%s/client.key", dir);
  snprintf(text, sizeof text, "%s\n", ssec);
  write_file(secret_file, text);
  snprintf(text, sizeof text, "# the one client\n%s\n", cpub);
  write_file(authorized_file, text);
  snprintf(text, sizeof text, "%s\n", csec);
  write_file(client_file, text);
  int out[2];
  assert_int_equal(pipe(out), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    child_hygiene(out);
    execl(PF_TEST_CLI_REL, "pf", "serve", "--listen", "tcp://127.0.0.1:*", "--load",
          PF_TEST_DEMO_PLUGIN, "--expose", "demo.", "--curve-secret-key", secret_file,
          "--authorized-keys", authorized_file, (char*)NULL);
    _exit(127);
  }
  close(out[1]);
  char line[512];
  size_t n = 0;
  while (n < sizeof line - 1 && read(out[0], line + n, 1) == 1 && line[n] != '\n') ++n;
  line[n] = '\0';
  const char* at = strstr(line, "tcp://");
  assert_non_null(at);
  char ep[128];
  snprintf(ep, sizeof ep, "%.*s", (int)strcspn(at, " \n"), at);
  /* The authorized client, from C and from pf --connect. */
  PFRPCOptions o = {0};
  o.timeout_ms = 10000;
  o.server_key = spub;
  o.client_public_key = cpub;
  o.client_secret_key = csec;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(ep, &o, &m));
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  char cmd[768];
  /* Z85 has shell characters ('(', '&', ...) but no single quote. */
  snprintf(cmd, sizeof cmd,
           "%s --connect %s --server-key '%s' --client-secret-key %s call demo.add 1 2",
           PF_TEST_CLI_REL, ep, spub, client_file);
  FILE* p = popen(cmd, "r");
  assert_non_null(p);
  char got[64] = {0};
  assert_non_null(fgets(got, sizeof got, p));
  assert_int_equal(pclose(p), 0);
  assert_string_equal(got, "3\n");
  /* Another key pair, which knows the server's public key: refused. */
  o.timeout_ms = 300;
  o.client_public_key = opub;
  o.client_secret_key = osec;
  m = NULL;
  assert_pf_error(PFRPCConnect(ep, &o, &m), "ConnectionError", "no server answered");
  kill(pid, SIGTERM);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  /* One log line per refused handshake, and nothing else. */
  char rest[2048];
  ssize_t k = read(out[0], rest, sizeof rest - 1);
  rest[k > 0 ? k : 0] = '\0';
  assert_non_null(strstr(rest, "handshake failed"));
  close(out[0]);
  unlink(secret_file);
  unlink(authorized_file);
  unlink(client_file);
  rmdir(dir);
}

/* ---- hostile peers, round two (issue 32) ---- */

/* Starts a server on 127.0.0.1 exposing "t." with `so` (expose is set
 * here) and copies its endpoint into `endpoint`. */
static PFRPCServerHandle start_server(PFRPCServerOptions* so, char* endpoint, size_t cap) {
  static const char* const expose[] = {"t."};
  so->expose = expose;
  so->num_expose = 1;
  PFRPCServerHandle s = NULL;
  const char* ep = NULL;
  assert_pf_ok(PFRPCServe("tcp://127.0.0.1:*", so, &s));
  assert_pf_ok(PFRPCServerGetEndpoint(s, &ep));
  snprintf(endpoint, cap, "%s", ep);
  return s;
}

/* A server of its own (start_server) and a raw DEALER connected to it. */
typedef struct {
  PFRPCServerHandle server;
  char endpoint[128];
  raw_peer peer;
} raw_rig;
static void rig_open(raw_rig* g, PFRPCServerOptions* so) {
  g->server = start_server(so, g->endpoint, sizeof g->endpoint);
  raw_open(&g->peer, ZMQ_DEALER, g->endpoint, 0);
}
static void rig_close(raw_rig* g) {
  raw_close(&g->peer);
  assert_pf_ok(PFRPCServerStop(g->server));
}

/* A connection to `endpoint` and its function `name`, made within
 * `limit_ms`. */
static PFFunctionHandle prompt_connect_fn(const char* endpoint, const char* name, int64_t limit_ms,
                                          PFModuleHandle* m) {
  PFRPCOptions co = {0};
  co.timeout_ms = 10000;
  int64_t t0 = now_ms();
  assert_pf_ok(PFRPCConnect(endpoint, &co, m));
  int64_t took = now_ms() - t0;
  if (took >= limit_ms) print_error("connecting took %lld ms\n", (long long)took);
  assert_true(took < limit_ms);
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(*m, name, 0, &f));
  return f;
}

static void close_fn(PFFunctionHandle f, PFModuleHandle m) {
  PFFuncFree(f);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
}

static int64_t slow_limit(int64_t ms) { return getenv("PF_UNDER_VALGRIND") ? 8 * ms : ms; }
/* A count of rounds, smaller under valgrind (which runs one thread at a
 * time, some fifty times slower). */
static int slow_count(int n, int under_valgrind) {
  return getenv("PF_UNDER_VALGRIND") ? under_valgrind : n;
}

/* A client that keeps exactly its limit of calls in flight (a new one as
 * each reply arrives) is never refused: the worker stops counting a call
 * before its reply goes out. */
static void test_calls_at_their_limit_are_not_refused(void** state) {
  (void)state;
  PFRPCServerOptions so = {0};
  so.num_workers = 1;
  so.max_calls_per_client = 8;
  raw_rig g;
  rig_open(&g, &so);
  const int64_t ints[2] = {40, 2};
  const int total = slow_count(2000, 400);
  int sent = 0, ok = 0, refused = 0, other = 0;
  for (; sent < so.max_calls_per_client; ++sent)
    assert_true(raw_call_args(g.peer.sock, (uint64_t)sent + 1, "t.add", ints, 2, 0, 0) >= 0);
  raw_msg rm;
  while (ok + refused + other < total && raw_next(g.peer.sock, &rm) == 0) {
    if (rm.kind == 3) ++ok;
    else if (rm.kind == 4 && strstr(rm.err_msg, "max_calls_per_client") != NULL) ++refused;
    else ++other;
    if (sent < total)
      assert_true(raw_call_args(g.peer.sock, (uint64_t)++sent, "t.add", ints, 2, 0, 0) >= 0);
  }
  print_message("%d replies, %d refusals, %d others\n", ok, refused, other);
  assert_int_equal(refused, 0);
  assert_int_equal(other, 0);
  assert_int_equal(ok, total);
  rig_close(&g);
}

/* Opens a raw client that calls t.apply with a function of its own `n`
 * times and never answers the callbacks; returns how many callbacks came
 * within `ms`. */
static int open_unanswering(raw_peer* r, const char* endpoint, int n, int first_id, int ms) {
  raw_open(r, ZMQ_DEALER, endpoint, 0);
  for (int i = 0; i < n; ++i)
    assert_true(raw_call_args(r->sock, (uint64_t)(first_id + i), "t.apply", NULL, 0, 77, 0) >= 0);
  int tmo = 100, callbacks = 0;
  zmq_setsockopt(r->sock, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
  raw_msg rm;
  int64_t t0 = now_ms();
  while (now_ms() - t0 < ms)
    if (raw_next(r->sock, &rm) == 0 && rm.kind == 2) ++callbacks;
  return callbacks;
}

/* Two clients that never answer their callbacks (each within its own
 * max_callbacks_per_client) leave a worker for everyone else. */
static void test_unanswered_callbacks_of_two_clients_leave_a_worker(void** state) {
  (void)state;
  PFRPCServerOptions so = {0};
  so.num_workers = 4;
  so.callback_timeout_ms = 20000;
  char endpoint[128];
  PFRPCServerHandle s = start_server(&so, endpoint, sizeof endpoint);
  raw_peer a, b;
  int na = open_unanswering(&a, endpoint, 6, 1, 300);
  int nb = open_unanswering(&b, endpoint, 6, 1, 300);
  print_message("callbacks waiting: %d and %d\n", na, nb);
  assert_true(na + nb <= so.num_workers - 1);
  PFModuleHandle m = NULL;
  const int64_t limit = slow_limit(2000);
  PFFunctionHandle add = prompt_connect_fn(endpoint, "t.add", limit, &m);
  prompt_adds(add, 10, limit);
  close_fn(add, m);
  int64_t took = timed_stop(s, 10000, NULL);
  assert_true(took >= 0 && took < limit);
  raw_close(&a);
  raw_close(&b);
}

/* A client that goes away while a worker waits for its callback frees
 * that worker at once, not at the callback timeout: with one worker,
 * another client is served promptly. */
static void test_callback_into_a_gone_client_fails_at_once(void** state) {
  (void)state;
  PFRPCServerOptions so = {0};
  so.num_workers = 1;
  so.callback_timeout_ms = 20000;
  char endpoint[128];
  PFRPCServerHandle s = start_server(&so, endpoint, sizeof endpoint);
  raw_peer r;
  assert_int_equal(open_unanswering(&r, endpoint, 1, 1, 300), 1);
  raw_close(&r);
  PFModuleHandle m = NULL;
  const int64_t limit = slow_limit(3000);
  PFFunctionHandle add = prompt_connect_fn(endpoint, "t.add", limit, &m);
  prompt_adds(add, 3, limit);
  close_fn(add, m);
  assert_pf_ok(PFRPCServerStop(s));
}

/* A request to a name that is not served, of about `n` bytes: `n`
 * MessagePack items (nils; costly to decode, cheap to route) or, with
 * !dense, one bytes argument (cheap to decode too). */
static char* big_request(uint64_t id, uint32_t n, int dense, size_t* size) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 6);
  msgpack_pack_int(&pk, PF_RPC_PROTOCOL_VERSION);
  msgpack_pack_int(&pk, 2);
  msgpack_pack_uint64(&pk, id);
  msgpack_pack_uint64(&pk, 0);
  msgpack_pack_str(&pk, 9);
  msgpack_pack_str_body(&pk, "t.missing", 9);
  if (dense) {
    msgpack_pack_array(&pk, n);
  } else {
    msgpack_pack_array(&pk, 1);
    msgpack_pack_bin(&pk, n);
  }
  char* buf = malloc(sb.size + n);
  assert_non_null(buf);
  memcpy(buf, sb.data, sb.size);
  memset(buf + sb.size, dense ? 0xc0 : 0, n);
  *size = sb.size + n;
  msgpack_sbuffer_destroy(&sb);
  return buf;
}

/* Sends `count` big requests (ids first_id...) on `sock`. */
static void send_big_requests(void* sock, int first_id, int count, uint32_t n, int dense) {
  for (int i = 0; i < count; ++i) {
    size_t size = 0;
    char* big = big_request((uint64_t)(first_id + i), n, dense, &size);
    assert_true(zmq_send(sock, big, size, 0) >= 0);
    free(big);
  }
}

/* Large messages of dense items from one client do not delay another
 * client's small calls: the I/O thread reads only their headers, and the
 * decoding happens on the workers that client may hold. */
static void test_large_messages_do_not_stall_other_clients(void** state) {
  (void)state;
  PFRPCServerOptions so = {0};
  so.num_workers = 4;
  so.max_workers_per_client = 2;
  raw_rig g;
  rig_open(&g, &so);
  PFModuleHandle m = NULL;
  const int64_t limit = slow_limit(500);
  PFFunctionHandle add = prompt_connect_fn(g.endpoint, "t.add", slow_limit(2000), &m);
  const int count = slow_count(10, 4);
  send_big_requests(g.peer.sock, 1, count, slow_count(4 << 20, 1 << 20), 1);
  int64_t t0 = now_ms();
  while (now_ms() - t0 < 1500) prompt_adds(add, 1, limit);
  /* Every large request is answered in the end (KeyError). */
  raw_msg rm;
  for (int i = 0; i < count; ++i) {
    assert_int_equal(raw_next(g.peer.sock, &rm), 0);
    assert_int_equal(rm.kind, 4);
  }
  close_fn(add, m);
  rig_close(&g);
}

/* Queues 40 calls of 4 MiB (inline bytes, or a tensor in a side frame)
 * behind a running one on a server of one worker, and checks that those
 * beyond PF_RPC_QUEUED_BYTES_PER_CLIENT are refused at once. */
static void check_queued_bytes_bound(int in_side_frames) {
  PFRPCServerOptions so = {0};
  so.num_workers = 1;
  raw_rig g;
  rig_open(&g, &so);
  assert_true(raw_call_args(g.peer.sock, 1, "t.block", NULL, 0, 0, 0) >= 0);
  const int count = 40;
  const uint32_t each = 4u << 20;
  if (in_side_frames) {
    uint8_t* fill = calloc(1, each);
    assert_non_null(fill);
    const size_t size = each;
    for (int i = 0; i < count; ++i)
      raw_tensor_call(g.peer.sock, (uint64_t)(2 + i), "t.missing", each / 4, fill,
                      PF_RPC_TENSOR_FRAME, &size, 1);
    free(fill);
  } else {
    send_big_requests(g.peer.sock, 2, count, each, 0);
  }
  /* The refusals come while the worker is blocked; the rest after. */
  int refused = 0, others = 0, quiet = (int)slow_limit(2000);
  zmq_setsockopt(g.peer.sock, ZMQ_RCVTIMEO, &quiet, sizeof quiet);
  raw_msg rm;
  while (raw_next(g.peer.sock, &rm) == 0) {
    if (rm.kind == 4 && strstr(rm.err_msg, "PF_RPC_QUEUED_BYTES_PER_CLIENT") != NULL) {
      if (refused == 0) print_message("refused: %s\n", rm.err_msg);
      ++refused;
    } else {
      ++others;
    }
  }
  assert_int_equal(write(g_gate[1], "x", 1), 1);
  while (refused + others < count + 1 && raw_next(g.peer.sock, &rm) == 0) ++others;
  print_message("%d of %d large calls refused\n", refused, count);
  const int fit = (int)(PF_RPC_QUEUED_BYTES_PER_CLIENT / each);
  assert_true(refused >= count - fit - 1 && refused <= count - fit + 1);
  assert_int_equal(refused + others, count + 1);
  rig_close(&g);
}

/* The calls that wait for a worker are bounded in bytes, not only in
 * number: a client that queues large calls behind a running one gets the
 * calls beyond PF_RPC_QUEUED_BYTES_PER_CLIENT refused at once. */
static void test_queued_calls_bounded_in_bytes(void** state) {
  (void)state;
  check_queued_bytes_bound(0);
}

/* The bytes of a call's side frames count as well as its body's. */
static void test_queued_calls_count_their_side_frames(void** state) {
  (void)state;
  check_queued_bytes_bound(1);
}

/* A message whose decoding would take far more memory than its size
 * (empty maps, a byte each) is refused on either side, with a ValueError,
 * before it is decoded. */
static void test_decoding_is_bounded_by_the_message_size(void** state) {
  (void)state;
  /* A request: refused with an error reply. */
  raw_peer r;
  raw_open(&r, ZMQ_DEALER, g_endpoint, 0);
  size_t size = 0;
  char* req = big_request(3, 2u << 20, 1, &size);
  memset(req + size - (2u << 20), 0x80, 2u << 20); /* empty maps, not nils */
  assert_true(zmq_send(r.sock, req, size, 0) >= 0);
  free(req);
  raw_msg rm;
  assert_int_equal(raw_next(r.sock, &rm), 0);
  print_message("request: %s: %s\n", rm.err_kind, rm.err_msg);
  assert_int_equal(rm.kind, 4);
  assert_string_equal(rm.err_kind, "ValueError");
  assert_non_null(strstr(rm.err_msg, "times its size"));
  raw_close(&r);
  /* A reply: the call fails, and the connection goes on. */
  PFFunctionHandle f = fn("t.empty_maps");
  /* 250,000 is past the bound already (each map costs 152 bytes, 88
   * over it), and packs in time under valgrind. */
  PFValue arg = {.v_int64 = slow_count(1 << 20, 250000)}, rv;
  int code = kPFInt, rc;
  assert_pf_error(PFFuncCall(f, &arg, &code, 1, &rv, &rc), kPFErrValueError, "times its size");
  arg.v_int64 = 1000;
  assert_pf_ok(PFFuncCall(f, &arg, &code, 1, &rv, &rc));
  PFObjectFree(rv.v_handle);
  PFFuncFree(f);
}

/* A fake server that answers HELLO (with no functions), then sends
 * `count` requests and never reads the client's replies. */
typedef struct {
  raw_peer r;
  int count;
  atomic_int done;
} flooder;
static void* flood_client(void* arg) {
  flooder* f = arg;
  zmq_msg_t id, body;
  zmq_msg_init(&id);
  zmq_msg_init(&body);
  if (zmq_msg_recv(&id, f->r.sock, 0) >= 0 && zmq_msg_recv(&body, f->r.sock, 0) >= 0) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_array(&pk, 5);
    msgpack_pack_int(&pk, PF_RPC_PROTOCOL_VERSION);
    msgpack_pack_int(&pk, 3);
    msgpack_pack_uint64(&pk, 1);
    msgpack_pack_uint64(&pk, 0);
    msgpack_pack_array(&pk, 0);
    zmq_send(f->r.sock, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE);
    zmq_send(f->r.sock, sb.data, sb.size, 0);
    msgpack_sbuffer_destroy(&sb);
    for (int i = 0; i < f->count; ++i) {
      if (zmq_send(f->r.sock, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE) < 0) break;
      char req[64];
      msgpack_sbuffer_init(&sb);
      msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
      msgpack_pack_array(&pk, 6);
      msgpack_pack_int(&pk, PF_RPC_PROTOCOL_VERSION);
      msgpack_pack_int(&pk, 2);
      msgpack_pack_uint64(&pk, (uint64_t)i + 100);
      msgpack_pack_uint64(&pk, 0);
      msgpack_pack_str(&pk, 1);
      msgpack_pack_str_body(&pk, "x", 1);
      msgpack_pack_array(&pk, 0);
      memcpy(req, sb.data, sb.size);
      zmq_send(f->r.sock, req, sb.size, 0);
      msgpack_sbuffer_destroy(&sb);
    }
  }
  zmq_msg_close(&id);
  zmq_msg_close(&body);
  atomic_store(&f->done, 1);
  return NULL;
}

/* A server that sends requests and never reads the replies grows an idle
 * client by a bounded amount: the replies it cannot send are dropped. */
static void test_client_replies_to_a_deaf_server_are_bounded(void** state) {
  (void)state;
  flooder f = {.count = slow_count(100000, 20000)};
  raw_open(&f.r, ZMQ_ROUTER, "tcp://127.0.0.1:*", 1);
  int one = 1, tmo = 20000;
  zmq_setsockopt(f.r.sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
  zmq_setsockopt(f.r.sock, ZMQ_SNDTIMEO, &tmo, sizeof tmo);
  char endpoint[128];
  size_t len = sizeof endpoint;
  assert_int_equal(zmq_getsockopt(f.r.sock, ZMQ_LAST_ENDPOINT, endpoint, &len), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, flood_client, &f), 0);
  PFRPCOptions co = {0};
  co.timeout_ms = 10000;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(endpoint, &co, &m));
  int64_t base = memory_in_use(), peak = 0;
  while (!atomic_load(&f.done)) {
    sleep_ms(20);
    int64_t grown = memory_in_use() - base;
    if (grown > peak) peak = grown;
  }
  pthread_join(t, NULL);
  for (int i = 0; i < 25; ++i) { /* the client takes in what is left */
    sleep_ms(20);
    int64_t grown = memory_in_use() - base;
    if (grown > peak) peak = grown;
  }
  print_message("the client grew by at most %lld MiB over %d requests\n", (long long)(peak >> 20),
                f.count);
  assert_true(peak < ((int64_t)48 << 20));
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  raw_close(&f.r);
}

/* Many connections from one address cannot take the room for functions
 * that clients at other addresses need: the clients at one address hold
 * at most PF_RPC_EXPORTS_PER_ADDRESS times max_exports_per_client, and a
 * server has no limit across addresses for them to fill. */
static void test_exports_bounded_per_address(void** state) {
  (void)state;
  PFRPCServerOptions so = {0};
  so.num_workers = 2;
  /* Under valgrind, a smaller limit per client (and so per address). */
  so.max_exports_per_client = slow_count(0, 32);
  char endpoint[128];
  PFRPCServerHandle s = start_server(&so, endpoint, sizeof endpoint);
  enum { kConns = 64 };
  const int64_t each =
      so.max_exports_per_client ? so.max_exports_per_client : PF_RPC_DEFAULT_MAX_EXPORTS_PER_CLIENT;
  void* ctx = zmq_ctx_new();
  void* socks[kConns];
  int ok = 0, refused = 0;
  for (int i = 0; i < kConns; ++i) {
    socks[i] = raw_socket(ctx, ZMQ_DEALER, 20000);
    assert_int_equal(zmq_connect(socks[i], endpoint), 0);
    assert_true(raw_call_args(socks[i], 1, "t.adders", &each, 1, 0, 0) >= 0);
    raw_msg rm;
    assert_int_equal(raw_next(socks[i], &rm), 0);
    if (rm.kind == 3) {
      ++ok;
    } else {
      assert_non_null(strstr(rm.err_msg, "PF_RPC_EXPORTS_PER_ADDRESS"));
      if (refused++ == 0) print_message("refused: %s\n", rm.err_msg);
    }
  }
  print_message("%d connections from 127.0.0.1 got %lld functions each, %d were refused\n", ok,
                (long long)each, refused);
  assert_int_equal(ok, PF_RPC_EXPORTS_PER_ADDRESS);
  /* A client at another address gets functions back. */
  char other[160];
  snprintf(other, sizeof other, "tcp://127.0.0.2:0;%s", endpoint + strlen("tcp://"));
  PFModuleHandle m = NULL;
  PFFunctionHandle make = prompt_connect_fn(other, "t.make_adder", 10000, &m);
  PFFuncFree(make_adder_on(make, 1));
  close_fn(make, m);
  for (int i = 0; i < kConns; ++i) zmq_close(socks[i]);
  zmq_ctx_term(ctx);
  assert_pf_ok(PFRPCServerStop(s));
}

static atomic_int g_bad_lines;
static void count_bad_log(void* user, const char* line) {
  (void)user;
  if (strstr(line, "malformed") != NULL) atomic_fetch_add(&g_bad_lines, 1);
}

/* Malformed messages do not write a log line each: a few, then a summary
 * of how many more were dropped. */
static void test_malformed_messages_log_is_bounded(void** state) {
  (void)state;
  PFRPCServerOptions so = {0};
  so.log = count_bad_log;
  raw_rig g;
  rig_open(&g, &so);
  atomic_store(&g_bad_lines, 0);
  const int n = 2000;
  for (int i = 0; i < n; ++i) assert_true(zmq_send(g.peer.sock, "\xc1", 1, 0) == 1);
  raw_call(&g.peer, PF_RPC_PROTOCOL_VERSION, 5, "t.add");
  raw_msg rm;
  assert_int_equal(raw_next(g.peer.sock, &rm), 0); /* after the garbage was handled */
  int lines = atomic_load(&g_bad_lines);
  print_message("%d malformed messages, %d log lines\n", n, lines);
  assert_true(lines >= 1 && lines <= 20);
  rig_close(&g);
}

/* ---- side frames: large tensor objects cross without a copy ---- */

/* A tensor object of 64 KiB or more in a result goes out in a side frame
 * of its own, the bytes of the tensor as they are; a smaller one stays in
 * the body. */
static void test_large_tensor_result_in_a_side_frame(void** state) {
  (void)state;
  enum { kElems = 64 * 1024 };
  uint8_t* src = malloc(4 * kElems);
  assert_non_null(src);
  for (size_t i = 0; i < 4 * (size_t)kElems; ++i) src[i] = (uint8_t)(i * 13 + 1);
  raw_peer r;
  raw_open(&r, ZMQ_DEALER, g_endpoint, 0);
  /* The server decodes the inline tensor into an object and echoes it. */
  raw_tensor_call(r.sock, 1, "t.echo", kElems, src, 0, NULL, 0);
  size_t size = 0;
  uint8_t* side = NULL;
  assert_int_equal(recv_frames(r.sock, 1, &size, &side), 2);
  assert_int_equal(size, 4 * (size_t)kElems);
  assert_memory_equal(side, src, size);
  free(side);
  uint8_t* body = NULL;
  raw_tensor_call(r.sock, 2, "t.echo", kElems, src, 0, NULL, 0);
  assert_int_equal(recv_frames(r.sock, 0, &size, &body), 2);
  assert_true(size < 256); /* the header and the shape only */
  free(body);
  raw_tensor_call(r.sock, 3, "t.echo", 1024, src, 0, NULL, 0);
  assert_int_equal(recv_frames(r.sock, 0, &size, &body), 1);
  assert_true(size > 4096);
  free(body);
  raw_close(&r);
  free(src);
}

static atomic_int g_side_tensors_freed;
static void count_side_tensor(DLManagedTensor* m) {
  (void)m;
  atomic_fetch_add(&g_side_tensors_freed, 1);
}

/* A tensor object sent in a side frame comes back whole, and the
 * reference that its frame held goes once ZeroMQ is done with it. */
static void test_side_frame_tensor_is_released(void** state) {
  (void)state;
  enum { kElems = 256 * 1024 };
  float* src = malloc(sizeof(float) * kElems);
  assert_non_null(src);
  for (int i = 0; i < kElems; ++i) src[i] = (float)i * 0.5f;
  int64_t shape[1] = {kElems};
  DLManagedTensor managed = {
      {src, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0}, NULL, count_side_tensor};
  PFObjectHandle obj = NULL;
  atomic_store(&g_side_tensors_freed, 0);
  assert_pf_ok(PFTensorCreateFromDLPack(&managed, &obj));
  PFFunctionHandle echo = fn("t.echo");
  PFValue rv;
  int rc;
  call1(echo, (PFValue){.v_handle = obj}, kPFObjectHandle, &rv, &rc);
  assert_int_equal(rc, kPFObjectHandle);
  DLTensor* back = NULL;
  assert_pf_ok(PFTensorGetDLTensor(rv.v_handle, &back));
  assert_int_equal(back->shape[0], kElems);
  assert_memory_equal(back->data, src, sizeof(float) * kElems);
  assert_true(back->data != (void*)src); /* another process's, in general */
  PFObjectFree(rv.v_handle);
  PFObjectFree(obj);
  assert_true(wait_count(&g_side_tensors_freed, 1, 5000) >= 0);
  assert_int_equal(atomic_load(&g_side_tensors_freed), 1);
  PFFuncFree(echo);
  free(src);
}

/* Side frames that do not match the tensors of a request are refused
 * with a ValueError naming the side frame: missing, of the wrong size, or
 * more than its tensors take; a message of more than
 * PF_RPC_MAX_SIDE_FRAMES frames is dropped whole, and the connection goes
 * on. */
static void test_malformed_side_frames_in_a_request(void** state) {
  (void)state;
  enum { kElems = 16 * 1024 };
  uint8_t* fill = calloc(4, kElems);
  assert_non_null(fill);
  raw_peer r;
  raw_open(&r, ZMQ_DEALER, g_endpoint, 0);
  char kind[64], msg[512];
  const size_t right = 4 * kElems, wrong = 1000;
  raw_tensor_call(r.sock, 1, "t.echo", kElems, fill, PF_RPC_TENSOR_FRAME, NULL, 0);
  raw_reply(&r, 1, kind, msg, sizeof msg);
  assert_string_equal(kind, "ValueError");
  assert_non_null(strstr(msg, "side frame is missing"));
  raw_tensor_call(r.sock, 2, "t.echo", kElems, fill, PF_RPC_TENSOR_FRAME, &wrong, 1);
  raw_reply(&r, 2, kind, msg, sizeof msg);
  assert_string_equal(kind, "ValueError");
  assert_non_null(strstr(msg, "side frame 1 holds 1000 bytes for a tensor of 65536"));
  const size_t two[2] = {right, right};
  raw_tensor_call(r.sock, 3, "t.echo", kElems, fill, PF_RPC_TENSOR_FRAME, two, 2);
  raw_reply(&r, 3, kind, msg, sizeof msg);
  assert_string_equal(kind, "ValueError");
  assert_non_null(strstr(msg, "2 side frames, of which its tensors take 1"));
  raw_tensor_call(r.sock, 4, "t.echo", kElems, fill, PF_RPC_TENSOR_FRAME | PF_RPC_TENSOR_PADDED,
                  &right, 1);
  raw_reply(&r, 4, kind, msg, sizeof msg);
  assert_non_null(strstr(msg, "malformed tensor flags"));
  /* Too many frames: dropped unanswered; the next call is answered. */
  size_t many[PF_RPC_MAX_SIDE_FRAMES + 1];
  for (int i = 0; i <= PF_RPC_MAX_SIDE_FRAMES; ++i) many[i] = 8;
  raw_tensor_call(r.sock, 5, "t.echo", kElems, fill, PF_RPC_TENSOR_FRAME, many,
                  PF_RPC_MAX_SIDE_FRAMES + 1);
  raw_tensor_call(r.sock, 6, "t.echo", kElems, fill, PF_RPC_TENSOR_FRAME, &right, 1);
  size_t size = 0;
  uint8_t* body = NULL;
  assert_int_equal(recv_frames(r.sock, 0, &size, &body), 2); /* the echo, in a side frame */
  msgpack_unpacked up;
  msgpack_unpacked_init(&up);
  assert_int_equal(msgpack_unpack_next(&up, (const char*)body, size, NULL), MSGPACK_UNPACK_SUCCESS);
  assert_int_equal(up.data.via.array.ptr[1].via.u64, PF_RPC_OK);
  assert_int_equal(up.data.via.array.ptr[2].via.u64, 6);
  msgpack_unpacked_destroy(&up);
  free(body);
  raw_close(&r);
  free(fill);
}

/* A fake server of version PF_RPC_PROTOCOL_VERSION that exposes "t.f" and
 * answers each call with a float32 tensor of kSideElems elements in a side
 * frame, with the side frames of its `sizes` (nsides[i] of them for call
 * i). */
enum { kSideElems = 16 * 1024, kSideCalls = 4 };
typedef struct {
  raw_peer r;
  int nsides[kSideCalls];
  size_t sizes[kSideCalls][2];
} side_server;
static void* side_server_run(void* arg) {
  side_server* f = arg;
  uint8_t* fill = calloc(4, kSideElems);
  for (int call = -1; fill != NULL && call < kSideCalls; ++call) {
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&id, f->r.sock, 0) < 0 || zmq_msg_recv(&body, f->r.sock, 0) < 0) break;
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    uint64_t rid = 0;
    if (msgpack_unpack_next(&up, zmq_msg_data(&body), zmq_msg_size(&body), NULL) ==
        MSGPACK_UNPACK_SUCCESS)
      rid = up.data.via.array.ptr[2].via.u64;
    msgpack_unpacked_destroy(&up);
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    pack_raw_header(&pk, PF_RPC_OK, rid, 1);
    if (call < 0) { /* HELLO: [["t.f", nil, nil]] */
      msgpack_pack_array(&pk, 1);
      msgpack_pack_array(&pk, 3);
      msgpack_pack_str(&pk, 3);
      msgpack_pack_str_body(&pk, "t.f", 3);
      msgpack_pack_nil(&pk);
      msgpack_pack_nil(&pk);
    } else {
      pack_raw_tensor(&pk, kSideElems, fill, PF_RPC_TENSOR_FRAME);
    }
    zmq_send(f->r.sock, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE);
    send_frames(f->r.sock, &sb, call < 0 ? NULL : f->sizes[call], call < 0 ? 0 : f->nsides[call],
                fill);
    msgpack_sbuffer_destroy(&sb);
    zmq_msg_close(&id);
    zmq_msg_close(&body);
  }
  free(fill);
  return NULL;
}

/* A reply whose side frames do not match its tensors fails its call with
 * a ValueError naming the side frame; the connection goes on. */
static void test_malformed_side_frames_in_a_reply(void** state) {
  (void)state;
  const size_t right = 4 * kSideElems;
  side_server f = {.nsides = {0, 1, 2, 1},
                   .sizes = {{0, 0}, {right - 4, 0}, {right, right}, {right, 0}}};
  raw_open(&f.r, ZMQ_ROUTER, "tcp://127.0.0.1:*", 1);
  char ep[128];
  size_t len = sizeof ep;
  assert_int_equal(zmq_getsockopt(f.r.sock, ZMQ_LAST_ENDPOINT, ep, &len), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, side_server_run, &f), 0);
  PFModuleHandle m = NULL;
  PFFunctionHandle tf = prompt_connect_fn(ep, "t.f", 10000, &m);
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(tf, NULL, NULL, 0, &rv, &rc), kPFErrValueError,
                  "side frame is missing");
  assert_pf_error(PFFuncCall(tf, NULL, NULL, 0, &rv, &rc), kPFErrValueError,
                  "side frame 1 holds 65532 bytes for a tensor of 65536");
  assert_pf_error(PFFuncCall(tf, NULL, NULL, 0, &rv, &rc), kPFErrValueError,
                  "2 side frames, of which its tensors take 1");
  assert_pf_ok(PFFuncCall(tf, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFObjectHandle);
  DLTensor* back = NULL;
  assert_pf_ok(PFTensorGetDLTensor(rv.v_handle, &back));
  assert_int_equal(back->shape[0], kSideElems);
  PFObjectFree(rv.v_handle);
  close_fn(tf, m);
  pthread_join(t, NULL);
  raw_close(&f.r);
}

static atomic_int g_too_large_lines;
static void count_too_large(void* user, const char* line) {
  (void)user;
  if (strstr(line, "larger than max_message_size in all its frames") != NULL)
    atomic_fetch_add(&g_too_large_lines, 1);
}

/* max_message_size bounds a message's frames together, not only each:
 * side frames each under it but together over it drop the message whole,
 * with a log line, and the connection goes on. */
static void test_side_frames_bounded_by_max_message_size(void** state) {
  (void)state;
  enum { kElems = 192 * 1024 }; /* 768 KiB */
  PFRPCServerOptions so = {0};
  so.max_message_size = 1 << 20;
  so.log = count_too_large;
  atomic_store(&g_too_large_lines, 0);
  raw_rig g;
  rig_open(&g, &so);
  uint8_t* fill = calloc(4, kElems);
  assert_non_null(fill);
  const size_t two[2] = {4 * kElems, 4 * kElems};
  raw_tensor_call(g.peer.sock, 1, "t.echo", kElems, fill, PF_RPC_TENSOR_FRAME, two, 2);
  raw_tensor_call(g.peer.sock, 2, "t.echo", kElems, fill, PF_RPC_TENSOR_FRAME, two, 1);
  size_t size = 0;
  uint8_t* body = NULL;
  assert_int_equal(recv_frames(g.peer.sock, 0, &size, &body), 2); /* call 2's echo */
  msgpack_unpacked up;
  msgpack_unpacked_init(&up);
  assert_int_equal(msgpack_unpack_next(&up, (const char*)body, size, NULL), MSGPACK_UNPACK_SUCCESS);
  assert_int_equal(up.data.via.array.ptr[2].via.u64, 2);
  msgpack_unpacked_destroy(&up);
  free(body);
  assert_int_equal(atomic_load(&g_too_large_lines), 1);
  free(fill);
  rig_close(&g);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
#if defined(__SANITIZE_THREAD__)
  /* The ThreadSanitizer run is also the checking mode's (PF_CHECK_TARGETS):
   * every call a worker makes through a target checks that the decoded
   * values keep the target's rules, at no run of its own. */
  setenv("PF_CHECK_TARGETS", "1", 0);
#endif
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_values),
      cmocka_unit_test(test_containers),
      cmocka_unit_test(test_lists_and_dicts),
      cmocka_unit_test(test_tensors),
      cmocka_unit_test(test_large_tensors),
      cmocka_unit_test(test_what_cannot_cross),
      cmocka_unit_test(test_module_lists_exposed_only),
      cmocka_unit_test(test_target_direct_and_setter_callees),
      cmocka_unit_test(test_target_of_replaced_function),
      cmocka_unit_test(test_target_callee_fails_without_error),
      cmocka_unit_test(test_remote_error),
      cmocka_unit_test(test_timeout),
      cmocka_unit_test(test_timeout_is_kept),
      cmocka_unit_test(test_unreachable),
      cmocka_unit_test(test_callbacks),
      cmocka_unit_test(test_nested_deeper_than_workers),
      cmocka_unit_test(test_nested_too_deep),
      cmocka_unit_test(test_callback_from_another_server_thread),
      cmocka_unit_test(test_callback_error_and_lifetime),
      cmocka_unit_test(test_returned_function),
      cmocka_unit_test(test_function_keeps_connection),
      cmocka_unit_test(test_exposed_prefix_reveals_nothing),
      cmocka_unit_test(test_malformed_messages),
      cmocka_unit_test(test_protocol_version_mismatch),
      cmocka_unit_test(test_reconnect_after_server_restart),
      cmocka_unit_test(test_server_survives_client_death),
      cmocka_unit_test(test_client_that_does_not_read),
      cmocka_unit_test(test_unanswered_callbacks),
      cmocka_unit_test(test_failed_result_undoes_every_export),
      cmocka_unit_test(test_exports_per_client_limit),
      cmocka_unit_test(test_undelivered_reply_releases_its_functions),
      cmocka_unit_test(test_gone_client_loses_its_functions),
      cmocka_unit_test(test_send_queue_bounded_in_bytes),
      cmocka_unit_test(test_curve_accept_and_refuse),
      cmocka_unit_test(test_connect_bad_arguments),
      cmocka_unit_test(test_disconnect_misuse),
      cmocka_unit_test(test_serve_bad_options),
      cmocka_unit_test(test_curve_key_misuse),
      cmocka_unit_test(test_struct_sizes),
      cmocka_unit_test(test_pf_serve_and_connect),
      cmocka_unit_test(test_pf_serve_with_curve_keys),
      cmocka_unit_test(test_pf_serve_stops_with_deaf_client),
      cmocka_unit_test(test_calls_at_their_limit_are_not_refused),
      cmocka_unit_test(test_unanswered_callbacks_of_two_clients_leave_a_worker),
      cmocka_unit_test(test_callback_into_a_gone_client_fails_at_once),
      cmocka_unit_test(test_large_messages_do_not_stall_other_clients),
      cmocka_unit_test(test_malformed_messages_log_is_bounded),
      cmocka_unit_test(test_queued_calls_bounded_in_bytes),
      cmocka_unit_test(test_decoding_is_bounded_by_the_message_size),
      cmocka_unit_test(test_client_replies_to_a_deaf_server_are_bounded),
      cmocka_unit_test(test_exports_bounded_per_address),
      cmocka_unit_test(test_large_tensor_result_in_a_side_frame),
      cmocka_unit_test(test_side_frame_tensor_is_released),
      cmocka_unit_test(test_malformed_side_frames_in_a_request),
      cmocka_unit_test(test_malformed_side_frames_in_a_reply),
      cmocka_unit_test(test_queued_calls_count_their_side_frames),
      cmocka_unit_test(test_side_frames_bounded_by_max_message_size),
  };
  /* PF_TEST_ONLY="test_name*" runs the tests whose names match. */
  if (getenv("PF_TEST_ONLY") != NULL) cmocka_set_test_filter(getenv("PF_TEST_ONLY"));
  return cmocka_run_group_tests(tests, setup, teardown);
}
