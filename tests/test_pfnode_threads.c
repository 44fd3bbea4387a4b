/* The Node.js package's C helper (bindings/node/src/pfnode.c) driven from
 * C, so that ASan, TSan and valgrind see it: this test's main thread plays
 * the JavaScript thread. It registers C stand-ins for the JavaScript
 * trampolines (reading and writing the callback slots as lib/callbacks.js
 * jsCall and setResult do), polls the wake pipe and calls pfnode_serve as
 * the event loop does, and counts itself as blocked in C around its own
 * blocking waits as callFunction does (the shared state's first two words).
 *
 * The helper is compiled into the test (mk/node.mk). Its state is per
 * env (one evaluation of the package); the main env lives until
 * pfnode_shutdown, so the tests run in order and its shutdown test comes
 * last. Neither node nor koffi is needed. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support/pf_test.h"

/* ---- the helper's entry points and layouts, as lib/library.js and
 * lib/callbacks.js declare them (it has no header: koffi reads it) ---- */

typedef int32_t (*js_call_fn)(int32_t slot);
typedef void (*js_release_fn)(int64_t key);
typedef struct pfnode_env pfnode_env;
int32_t pfnode_abi(void);
pfnode_env* pfnode_init(js_call_fn call, js_release_fn release, PFObjectHandle gate);
int32_t pfnode_wake_fd(pfnode_env* env);
int32_t pfnode_serve(pfnode_env* env);
int pfnode_func_create(pfnode_env* env, int64_t key, PFFunctionHandle* out);
void* pfnode_slots(pfnode_env* env);
int32_t pfnode_slot_size(void);
int32_t pfnode_max_depth(void);
void* pfnode_shared_state(pfnode_env* env);
int32_t pfnode_set_timeout_ms(pfnode_env* env, int32_t ms);
void pfnode_shutdown(pfnode_env* env, const char* message);
int32_t pfnode_async_size(void);
/* lib/tensors.js writes this for pfnode_tensor_create. */
typedef struct {
  void* data;
  int32_t ndim;
  uint8_t code, bits;
  uint16_t lanes;
  int64_t shape[2];
} js_tensor_spec;
int pfnode_tensor_create(pfnode_env* env, int64_t key, const js_tensor_spec* spec,
                         PFObjectHandle* out);

/* lib/callbacks.js: "0 num_args 4 ret_code 8 key 16 ret_value 24 ret_owned
 * 28 loan 32 args 40 codes 48 ret_bytes 64 values[16] 192 codes[16]" */
#define SLOT_ARGS 16
typedef struct {
  int32_t num_args;
  int32_t ret_code;
  int64_t key;
  PFValue ret_value;
  int32_t ret_owned;
  int32_t loan; /* the callAsync call whose thread waits, or 0 */
  PFValue* args;
  int* codes;
  PFByteArray ret_bytes;
  PFValue values[SLOT_ARGS];
  int32_t value_codes[SLOT_ARGS];
} js_slot;
_Static_assert(offsetof(js_slot, ret_value) == 16 && offsetof(js_slot, ret_owned) == 24 &&
                   offsetof(js_slot, args) == 32 && offsetof(js_slot, ret_bytes) == 48 &&
                   offsetof(js_slot, values) == 64 && offsetof(js_slot, value_codes) == 192 &&
                   sizeof(js_slot) == 256,
               "the slot layout lib/callbacks.js reads");

/* The shared words: JavaScript writes the first two around its
 * synchronous calls into C; the helper keeps the others. */
typedef struct {
  int32_t sync_depth;
  int32_t sync_returns;
  int32_t released;
  int32_t pending;
} js_shared;

/* pfnode_async as lib/async.js (callAsync) reads it. */
typedef struct {
  PFCallFrame frame;
  int32_t status;
  int32_t loan; /* nonzero: the instances lent to the call (JavaScript's) */
  void* copy;
  int64_t copy_size;
  char* err_kind;
  char* err_msg;
  char* err_tb;
} js_async;
_Static_assert(offsetof(js_async, status) == 40 && offsetof(js_async, copy) == 48 &&
                   offsetof(js_async, err_kind) == 64 && sizeof(js_async) == 88,
               "the pfnode_async layout lib/async.js reads");
int32_t pfnode_call_async(js_async* a);
void pfnode_async_clear(js_async* a);

/* ---- the "JavaScript" side: runs on the main thread only ---- */

/* What the JavaScript function of a key does (lib/held.js `held`). */
enum { JS_NONE, JS_ADD, JS_FAIL, JS_ESCAPE, JS_STR, JS_MAKE, JS_CONST, JS_NEST };
#define MAX_KEYS 512

static pthread_t g_main;
static pfnode_env* g_env;
static int g_wake_fd; /* the env's wake pipe, ours to close */
static js_slot* g_slots;
static js_shared* g_shared;
static PFObjectHandle g_gate;
static int g_key_kind[MAX_KEYS];
static int64_t g_key_value[MAX_KEYS];
static int g_next_key = 1;
static int g_held;               /* keys alive in the table */
static char g_str_keep[128][32]; /* a str result stays alive in its slot (slotKeep) */
static atomic_int g_off_thread;  /* stand-ins entered on another thread: must stay 0 */
static PFFunctionHandle g_add;   /* JS_ADD, for JS_NEST */

static void note_thread(void) {
  if (!pthread_equal(pthread_self(), g_main)) atomic_fetch_add(&g_off_thread, 1);
}

static int new_key(int kind, int64_t value) {
  int key = g_next_key++;
  if (key >= MAX_KEYS) return -1;
  g_key_kind[key] = kind;
  g_key_value[key] = value;
  g_held++;
  return key;
}

static void js_release(int64_t key) {
  note_thread();
  if (key > 0 && key < MAX_KEYS && g_key_kind[key] != JS_NONE) {
    g_key_kind[key] = JS_NONE;
    g_held--;
  }
}

static PFFunctionHandle host_function(int kind, int64_t value) {
  int key = new_key(kind, value);
  if (key < 0) return NULL;
  PFFunctionHandle f = NULL;
  if (pfnode_func_create(g_env, key, &f) != 0) return NULL;
  return f;
}

/* The trampoline (lib/callbacks.js jsCall): 1 when done, -1 after recording the
 * error, 0 as koffi returns when an exception escaped. */
static int32_t js_call(int32_t index) {
  note_thread();
  js_slot* s = &g_slots[index];
  int64_t key = s->key;
  int n = s->num_args;
  PFValue* vals = n <= SLOT_ARGS ? s->values : s->args;
  int* codes = n <= SLOT_ARGS ? s->value_codes : s->codes;
  int kind = key > 0 && key < MAX_KEYS ? g_key_kind[key] : JS_NONE;
  int64_t a0 = n > 0 && codes[0] == kPFInt ? vals[0].v_int64 : 0;
  int64_t a1 = n > 1 && codes[1] == kPFInt ? vals[1].v_int64 : 0;
  s->ret_owned = 0;
  switch (kind) {
    case JS_ADD:
      s->ret_value.v_int64 = a0 + a1;
      s->ret_code = kPFInt;
      return 1;
    case JS_FAIL:
      PFErrorSetFormat("ValueError", "js refuses %lld", (long long)a0);
      PFErrorAppendTraceback("  at jsFail (test.mjs:1)");
      return -1;
    case JS_ESCAPE:
      return 0;
    case JS_STR:
      snprintf(g_str_keep[index], sizeof(g_str_keep[index]), "js-%lld", (long long)a0);
      s->ret_value.v_str = g_str_keep[index];
      s->ret_code = kPFStr;
      return 1;
    case JS_MAKE: { /* a new JavaScript function, its reference handed to C */
      PFFunctionHandle f = host_function(JS_CONST, a0);
      if (f == NULL) return -1;
      s->ret_value.v_handle = f;
      s->ret_owned = 1;
      s->ret_code = kPFFuncHandle;
      return 1;
    }
    case JS_CONST:
      s->ret_value.v_int64 = g_key_value[key];
      s->ret_code = kPFInt;
      return 1;
    case JS_NEST: { /* calls C, which calls JavaScript directly again */
      PFValue args[2] = {{.v_int64 = a0}, {.v_int64 = 1000}};
      int acodes[2] = {kPFInt, kPFInt};
      PFValue r;
      int rcode;
      if (PFFuncCall(g_add, args, acodes, 2, &r, &rcode) != 0) return -1;
      s->ret_value.v_int64 = r.v_int64 + 1;
      s->ret_code = kPFInt;
      return 1;
    }
    default:
      PFErrorSet("RuntimeError",
                 "packedfunc: the JavaScript function of this packed function was released");
      return -1;
  }
}

/* ---- helpers ---- */

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static void sleep_ms(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

/* The event loop: polls the wake pipe and serves until *done reaches
 * target; `direct`, when not NULL, is called between polls (JavaScript
 * calling C functions that call it back directly). Fails after 60 s. */
static void event_loop(atomic_int* done, int target, void (*direct)(int round)) {
  double deadline = now_ms() + 60000;
  int round = 0;
  while (atomic_load(done) < target) {
    struct pollfd p = {.fd = g_wake_fd, .events = POLLIN};
    if (poll(&p, 1, 10) > 0) assert_true(pfnode_serve(g_env) >= 0);
    if (direct != NULL) direct(round++);
    assert_true(now_ms() < deadline);
  }
}

static int call_int(PFFunctionHandle f, int64_t a0, int64_t a1, int64_t* out) {
  PFValue args[2] = {{.v_int64 = a0}, {.v_int64 = a1}};
  int codes[2] = {kPFInt, kPFInt};
  PFValue r;
  int rcode = -1;
  if (PFFuncCall(f, args, codes, 2, &r, &rcode) != 0) return -1;
  if (rcode != kPFInt) return PFErrorSetFormat("TypeError", "result code %d", rcode);
  *out = r.v_int64;
  return 0;
}

/* A C thread's outcome, for the main thread to assert (cmocka asserts
 * belong to the main thread). */
typedef struct {
  pthread_t thread;
  int id;
  PFFunctionHandle func;
  int64_t arg;
  int bad;
  int rc;
  char kind[64];
  char message[600];
  char traceback[200];
  double elapsed_ms;
  atomic_int* done;
} worker;

static void record(worker* w, int rc) {
  w->rc = rc;
  if (rc != 0) {
    snprintf(w->kind, sizeof(w->kind), "%s", PFErrorGetKind());
    snprintf(w->message, sizeof(w->message), "%s", PFErrorGetMessage());
    snprintf(w->traceback, sizeof(w->traceback), "%s", PFErrorGetTraceback());
  }
}

/* One call of w->func(w->arg, 1), timed, its error kept. */
static void* one_call(void* p) {
  worker* w = p;
  double t0 = now_ms();
  int64_t r = 0;
  record(w, call_int(w->func, w->arg, 1, &r));
  w->elapsed_ms = now_ms() - t0;
  if (w->rc == 0 && r != w->arg + 1) w->bad++;
  if (w->done != NULL) atomic_fetch_add(w->done, 1);
  return NULL;
}

static void start(worker* w) { assert_int_equal(pthread_create(&w->thread, NULL, one_call, w), 0); }

static int group_setup(void** state) {
  (void)state;
  g_main = pthread_self();
  if (pfnode_abi() != 5 || PFHostGateCreate(&g_gate) != 0) return -1;
  g_env = pfnode_init(js_call, js_release, g_gate);
  if (g_env == NULL) return -1;
  if (pfnode_slot_size() != (int32_t)sizeof(js_slot) || pfnode_max_depth() > 128 ||
      pfnode_async_size() != (int32_t)sizeof(js_async))
    return -1;
  g_wake_fd = pfnode_wake_fd(g_env);
  g_slots = pfnode_slots(g_env);
  g_shared = pfnode_shared_state(g_env);
  g_add = host_function(JS_ADD, 0);
  return g_add == NULL ? -1 : 0;
}

static int group_teardown(void** state) {
  (void)state;
  PFFuncFree(g_add); /* the env's last hold: freed */
  PFHostGateClose(g_gate, "test over", 1000);
  PFObjectFree(g_gate);
  close(g_wake_fd);
  return 0;
}

/* ---- tests ---- */

/* On the JavaScript thread a call runs at once, nested calls included, and
 * a JavaScript error reaches the C caller with its kind. */
static void test_direct_calls(void** state) {
  (void)state;
  int64_t r = 0;
  assert_pf_ok(call_int(g_add, 40, 2, &r));
  assert_int_equal(r, 42);
  PFFunctionHandle nest = host_function(JS_NEST, 0);
  assert_pf_ok(call_int(nest, 5, 0, &r));
  assert_int_equal(r, 1006);
  PFFunctionHandle fail = host_function(JS_FAIL, 0);
  assert_pf_error(call_int(fail, 7, 0, &r), "ValueError", "js refuses 7");
  PFFunctionHandle escape = host_function(JS_ESCAPE, 0);
  assert_pf_error(call_int(escape, 1, 0, &r), "RuntimeError", "did not complete");
  int held = g_held;
  PFFuncFree(nest);
  PFFuncFree(fail);
  PFFuncFree(escape);
  /* Finalized on the JavaScript thread: released at once. */
  assert_int_equal(g_held, held - 3);
  assert_int_equal(atomic_load(&g_off_thread), 0);
}

/* A tensor object over "JavaScript" memory: a compact CPU DLTensor with
 * the spec's shape and dtype, whose last reference hands the key back. */
static void test_tensor_over_javascript_memory(void** state) {
  (void)state;
  static float data[6] = {1, 2, 3, 4, 5, 6};
  int key = new_key(JS_CONST, 0);
  js_tensor_spec spec = {data, 2, kDLFloat, 32, 1, {2, 3}};
  PFObjectHandle t = NULL;
  assert_pf_ok(pfnode_tensor_create(g_env, key, &spec, &t));
  DLTensor* dl = NULL;
  assert_pf_ok(PFTensorGetDLTensor(t, &dl));
  assert_ptr_equal(dl->data, data);
  assert_int_equal(dl->device.device_type, kDLCPU);
  assert_int_equal(dl->ndim, 2);
  assert_int_equal(dl->shape[0], 2);
  assert_int_equal(dl->shape[1], 3);
  assert_null(dl->strides);
  assert_int_equal(dl->dtype.code, kDLFloat);
  assert_int_equal(dl->dtype.bits, 32);
  int held = g_held;
  PFObjectFree(t); /* the last reference, on the JavaScript thread: released at once */
  assert_int_equal(g_held, held - 1);
  assert_int_equal(g_key_kind[key], JS_NONE);
}

/* Four C threads call JavaScript at once (ints, strings, a function that
 * JavaScript makes and C then calls and drops, an error), while the
 * JavaScript thread serves them and calls directly in between. */
#define THREADS 4
#define ROUNDS 150
static PFFunctionHandle g_str_fn, g_make_fn, g_fail_fn;
static atomic_int g_threads_done;

static void* caller_thread(void* p) {
  worker* w = p;
  for (int i = 0; i < ROUNDS; ++i) {
    int64_t x = (int64_t)w->id * 100000 + i, r = -1;
    if (call_int(g_add, x, w->id, &r) != 0 || r != x + w->id) w->bad++;
    if (i % 10 == 0) {
      PFValue arg = {.v_int64 = x}, out;
      int code = kPFInt, rcode = -1;
      char want[32];
      snprintf(want, sizeof(want), "js-%lld", (long long)x);
      if (PFFuncCall(g_str_fn, &arg, &code, 1, &out, &rcode) != 0 || rcode != kPFStr ||
          strcmp(out.v_str, want) != 0)
        w->bad++;
    }
    if (i % 25 == 0) {
      PFValue arg = {.v_int64 = x}, out;
      int code = kPFInt, rcode = -1;
      if (PFFuncCall(g_make_fn, &arg, &code, 1, &out, &rcode) != 0 || rcode != kPFFuncHandle) {
        w->bad++;
      } else {
        if (call_int(out.v_handle, 0, 0, &r) != 0 || r != x) w->bad++;
        PFFuncFree(out.v_handle); /* finalized here, released on the JS thread */
      }
    }
    if (i == ROUNDS / 2) {
      int rc = call_int(g_fail_fn, x, 0, &r);
      char want[64];
      snprintf(want, sizeof(want), "js refuses %lld", (long long)x);
      if (rc != -1 || strcmp(PFErrorGetKind(), "ValueError") != 0 ||
          strcmp(PFErrorGetMessage(), want) != 0 ||
          strstr(PFErrorGetTraceback(), "at jsFail (test.mjs:1)") == NULL)
        w->bad++;
    }
  }
  atomic_fetch_add(&g_threads_done, 1);
  return NULL;
}

static void direct_between(int round) {
  int64_t r = -1;
  assert_pf_ok(call_int(g_add, round, 3, &r));
  assert_int_equal(r, round + 3);
}

static void test_threads_call_javascript(void** state) {
  (void)state;
  int held = g_held;
  g_str_fn = host_function(JS_STR, 0);
  g_make_fn = host_function(JS_MAKE, 0);
  g_fail_fn = host_function(JS_FAIL, 0);
  worker w[THREADS];
  memset(w, 0, sizeof(w));
  atomic_store(&g_threads_done, 0);
  for (int i = 0; i < THREADS; ++i) {
    w[i].id = i + 1;
    assert_int_equal(pthread_create(&w[i].thread, NULL, caller_thread, &w[i]), 0);
  }
  event_loop(&g_threads_done, THREADS, direct_between);
  for (int i = 0; i < THREADS; ++i) {
    pthread_join(w[i].thread, NULL);
    assert_int_equal(w[i].bad, 0);
  }
  pfnode_serve(g_env); /* the last finalizers' keys */
  PFFuncFree(g_str_fn);
  PFFuncFree(g_make_fn);
  PFFuncFree(g_fail_fn);
  assert_int_equal(g_held, held);
  assert_int_equal(atomic_load(&g_off_thread), 0);
}

/* A JavaScript error raised for a C thread reaches it with its kind,
 * message and traceback. */
static void test_error_reaches_thread(void** state) {
  (void)state;
  atomic_int done = 0;
  worker w = {.func = host_function(JS_FAIL, 0), .arg = 31, .done = &done};
  start(&w);
  event_loop(&done, 1, NULL);
  pthread_join(w.thread, NULL);
  assert_int_equal(w.rc, -1);
  assert_string_equal(w.kind, "ValueError");
  assert_string_equal(w.message, "js refuses 31");
  assert_non_null(strstr(w.traceback, "at jsFail (test.mjs:1)"));
  PFFuncFree(w.func);
}

/* A C thread's call fails with the documented RuntimeError once the
 * JavaScript thread has been blocked in one synchronous call into C for the
 * timeout, withdrawn from the queue; a JavaScript thread that is merely
 * slow to serve (not in C) is waited for. */
static void test_timeout_when_javascript_is_blocked(void** state) {
  (void)state;
  const int timeout = 150;
  int32_t previous = pfnode_set_timeout_ms(g_env, timeout);
  /* Blocked in C: callFunction's shared[0]++ around PFFuncCallFrame. */
  __atomic_fetch_add(&g_shared->sync_depth, 1, __ATOMIC_RELAXED);
  worker w = {.func = g_add, .arg = 9};
  start(&w);
  pthread_join(w.thread, NULL); /* the synchronous call: no serving meanwhile */
  __atomic_fetch_sub(&g_shared->sync_depth, 1, __ATOMIC_RELAXED);
  __atomic_fetch_add(&g_shared->sync_returns, 1, __ATOMIC_RELAXED);
  assert_int_equal(w.rc, -1);
  assert_string_equal(w.kind, "RuntimeError");
  assert_non_null(strstr(w.message, "blocked in a synchronous call into C"));
  assert_non_null(strstr(w.message, "callAsync()"));
  assert_true(w.elapsed_ms >= timeout);
  assert_true(w.elapsed_ms < timeout + 10000); /* generous: a loaded machine */
  /* The request was withdrawn: nothing left to serve. */
  assert_int_equal(pfnode_serve(g_env), 0);

  /* Not in C, just not serving yet: the caller waits past the timeout. */
  pfnode_set_timeout_ms(g_env, 20);
  atomic_int done = 0;
  worker slow = {.func = g_add, .arg = 11, .done = &done};
  start(&slow);
  sleep_ms(200);
  event_loop(&done, 1, NULL);
  pthread_join(slow.thread, NULL);
  assert_int_equal(slow.rc, 0);
  assert_int_equal(slow.bad, 0);
  assert_int_equal(pfnode_set_timeout_ms(g_env, previous), 20);
}

/* callAsync: pfnode_call_async on a worker thread, whose function calls
 * JavaScript (served meanwhile) or fails, or returns bytes; its copies are
 * freed by pfnode_async_clear. */
typedef struct {
  js_async* a;
  atomic_int* done;
} async_job;

static void* async_thread(void* p) {
  async_job* j = p;
  pfnode_call_async(j->a);
  atomic_fetch_add(j->done, 1);
  return NULL;
}

static void run_async(js_async* a) {
  atomic_int done = 0;
  async_job j = {a, &done};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, async_thread, &j), 0);
  event_loop(&done, 1, NULL);
  pthread_join(t, NULL);
}

static int return_bytes(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  PFByteArray b = {.data = "a\0b", .size = 3};
  PFValue v = {.v_handle = &b};
  int code = kPFBytes;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_call_async(void** state) {
  (void)state;
  PFFunctionHandle str_fn = host_function(JS_STR, 0);
  PFFunctionHandle fail_fn = host_function(JS_FAIL, 0);
  PFFunctionHandle bytes_fn = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(return_bytes, NULL, NULL, &bytes_fn));
  PFValue arg = {.v_int64 = 77};
  int code = kPFInt;
  js_async a;

  memset(&a, 0, sizeof(a));
  a.frame = (PFCallFrame){.func = str_fn, .num_args = 1, .args = &arg, .type_codes = &code};
  run_async(&a);
  assert_int_equal(a.status, 0);
  assert_int_equal(a.frame.ret_type_code, kPFStr);
  assert_string_equal(a.copy, "js-77");
  assert_int_equal(a.copy_size, 5);
  pfnode_async_clear(&a);
  assert_null(a.copy);

  memset(&a, 0, sizeof(a));
  a.frame = (PFCallFrame){.func = fail_fn, .num_args = 1, .args = &arg, .type_codes = &code};
  run_async(&a);
  assert_int_equal(a.status, -1);
  assert_string_equal(a.err_kind, "ValueError");
  assert_string_equal(a.err_msg, "js refuses 77");
  assert_non_null(strstr(a.err_tb, "at jsFail (test.mjs:1)"));
  pfnode_async_clear(&a);
  assert_null(a.err_kind);

  memset(&a, 0, sizeof(a));
  a.frame = (PFCallFrame){.func = bytes_fn};
  run_async(&a);
  assert_int_equal(a.status, 0);
  assert_int_equal(a.frame.ret_type_code, kPFBytes);
  assert_int_equal(a.copy_size, 3);
  assert_memory_equal(a.copy, "a\0b", 3);
  pfnode_async_clear(&a);

  PFFuncFree(str_fn);
  PFFuncFree(fail_fn);
  PFFuncFree(bytes_fn);
}

/* ---- other envs: a second evaluation in this thread, and a worker ---- */

/* A stand-in for another evaluation's trampoline: its functions return
 * tag * 1000 + key * 100 + their first argument, so that a call that
 * reached the wrong env shows. */
typedef struct {
  pfnode_env* env;
  js_slot* slots;
  int64_t tag;
  atomic_int released; /* keys handed back */
} other_js;

static other_js g_second = {.tag = 2}, g_worker = {.tag = 3};

static int32_t other_call(other_js* o, int32_t index) {
  js_slot* s = &o->slots[index];
  int64_t a0 = s->num_args > 0 && s->value_codes[0] == kPFInt ? s->values[0].v_int64 : 0;
  s->ret_owned = 0;
  s->ret_value.v_int64 = o->tag * 1000 + s->key * 100 + a0;
  s->ret_code = kPFInt;
  return 1;
}
static int32_t second_call(int32_t index) { return other_call(&g_second, index); }
static void second_release(int64_t key) { (void)key, atomic_fetch_add(&g_second.released, 1); }
static int32_t worker_call(int32_t index) { return other_call(&g_worker, index); }
static void worker_release(int64_t key) { (void)key, atomic_fetch_add(&g_worker.released, 1); }

/* A second env on this thread: its key 1 (g_add's key too) reaches its
 * own trampoline, directly and from a C thread; its shutdown leaves the
 * first env alone, and it is freed with its last function. */
static void test_second_env_in_the_same_thread(void** state) {
  (void)state;
  g_second.env = pfnode_init(second_call, second_release, g_gate);
  assert_non_null(g_second.env);
  g_second.slots = pfnode_slots(g_second.env);
  int fd = pfnode_wake_fd(g_second.env);
  PFFunctionHandle f = NULL, g = NULL;
  assert_pf_ok(pfnode_func_create(g_second.env, 1, &f));
  assert_pf_ok(pfnode_func_create(g_second.env, 2, &g));
  int64_t r = 0;
  assert_pf_ok(call_int(f, 5, 0, &r));
  assert_int_equal(r, 2105);
  assert_pf_ok(call_int(g_add, 5, 1, &r));
  assert_int_equal(r, 6);

  /* From a C thread: served by the second env's loop. */
  worker w = {.func = f, .arg = 7};
  start(&w);
  double deadline = now_ms() + 60000;
  struct pollfd p = {.fd = fd, .events = POLLIN};
  while (poll(&p, 1, 10) == 0) assert_true(now_ms() < deadline);
  assert_int_equal(pfnode_serve(g_second.env), 1);
  pthread_join(w.thread, NULL);
  assert_int_equal(w.rc, 0);
  assert_int_equal(w.bad, 1); /* one_call expects arg + 1: it got 2107 */

  PFFuncFree(g); /* finalized on its thread: handed back at once */
  assert_int_equal(atomic_load(&g_second.released), 1);
  pfnode_shutdown(g_second.env, "second env gone");
  close(fd);
  worker later = {.func = f, .arg = 8};
  start(&later);
  pthread_join(later.thread, NULL);
  assert_int_equal(later.rc, -1);
  assert_string_equal(later.message, "second env gone");
  assert_pf_ok(call_int(g_add, 1, 1, &r)); /* the first env is untouched */
  assert_int_equal(r, 2);
  PFFuncFree(f); /* the env's last hold: freed (ASan and valgrind check) */
  assert_int_equal(atomic_load(&g_second.released), 1);
}

/* A worker thread's env: its function, called on the main thread, runs
 * on the worker; the worker ends without shutting down (a terminated
 * Node.js worker), and calls then fail instead of waiting. */
static PFFunctionHandle g_worker_fn;
static atomic_int g_worker_stage;

static void* worker_thread(void* p) {
  (void)p;
  g_worker.env = pfnode_init(worker_call, worker_release, g_gate);
  if (g_worker.env == NULL) return NULL;
  g_worker.slots = pfnode_slots(g_worker.env);
  int fd = pfnode_wake_fd(g_worker.env);
  if (pfnode_func_create(g_worker.env, 1, &g_worker_fn) != 0) g_worker_fn = NULL;
  atomic_store(&g_worker_stage, 1);
  double deadline = now_ms() + 60000;
  while (atomic_load(&g_worker_stage) == 1 && now_ms() < deadline) {
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    if (poll(&pfd, 1, 10) > 0) pfnode_serve(g_worker.env);
  }
  close(fd); /* as Node.js closes its socket; no pfnode_shutdown */
  return NULL;
}

static void test_worker_env_ends_with_its_thread(void** state) {
  (void)state;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, worker_thread, NULL), 0);
  double deadline = now_ms() + 60000;
  while (atomic_load(&g_worker_stage) == 0) {
    assert_true(now_ms() < deadline);
    sleep_ms(1);
  }
  assert_non_null(g_worker_fn);
  int64_t r = 0;
  assert_pf_ok(call_int(g_worker_fn, 4, 0, &r)); /* from the main thread: run on the worker */
  assert_int_equal(r, 3104);
  atomic_store(&g_worker_stage, 2);
  pthread_join(t, NULL);
  assert_pf_error(call_int(g_worker_fn, 4, 0, &r), "RuntimeError",
                  "the Node.js event loop has exited");
  assert_pf_ok(call_int(g_add, 2, 2, &r)); /* the main env is untouched */
  assert_int_equal(r, 4);
  PFFuncFree(g_worker_fn); /* the env's last hold: freed */
  assert_int_equal(atomic_load(&g_worker.released), 0);
}

/* After pfnode_shutdown (process exit), a call that waits and every later
 * call from a C thread fail with the shutdown's message; keys released
 * from other threads are dropped, not leaked. Runs last. */
static void* drop_function(void* p) {
  PFFuncFree(p);
  return NULL;
}

static void test_shutdown(void** state) {
  (void)state;
  static const char kMessage[] = "the Node.js event loop has exited";
  PFFunctionHandle dropped = host_function(JS_CONST, 1);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, drop_function, dropped), 0);
  pthread_join(t, NULL); /* its key now waits in the released list */

  /* A call waiting in the queue when the loop exits. */
  worker waiting = {.func = g_add, .arg = 1};
  start(&waiting);
  double deadline = now_ms() + 30000;
  while (__atomic_load_n(&g_shared->pending, __ATOMIC_RELAXED) == 0 && now_ms() < deadline)
    sleep_ms(1);
  pfnode_shutdown(g_env, kMessage);
  pthread_join(waiting.thread, NULL);
  assert_int_equal(waiting.rc, -1);
  assert_string_equal(waiting.kind, "RuntimeError");
  assert_string_equal(waiting.message, kMessage);

  /* A later call fails at once. */
  worker later = {.func = g_add, .arg = 2};
  start(&later);
  pthread_join(later.thread, NULL);
  assert_int_equal(later.rc, -1);
  assert_string_equal(later.kind, "RuntimeError");
  assert_string_equal(later.message, kMessage);
  assert_int_equal(pfnode_serve(g_env), -1); /* not a live JavaScript thread any more */
  assert_int_equal(atomic_load(&g_off_thread), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_direct_calls),
      cmocka_unit_test(test_tensor_over_javascript_memory),
      cmocka_unit_test(test_threads_call_javascript),
      cmocka_unit_test(test_error_reaches_thread),
      cmocka_unit_test(test_timeout_when_javascript_is_blocked),
      cmocka_unit_test(test_call_async),
      cmocka_unit_test(test_second_env_in_the_same_thread),
      cmocka_unit_test(test_worker_env_ends_with_its_thread),
      cmocka_unit_test(test_shutdown),
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
