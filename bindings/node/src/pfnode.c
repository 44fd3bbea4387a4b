/*
 * pfnode — the C half of the Node.js package's callbacks (private to
 * bindings/node; its symbols are not libpackedfunc's API).
 *
 * JavaScript runs on one thread, and koffi (the package's FFI) can enter
 * it from C only through a callback pointer. A packed function called from
 * C needs more than koffi gives: its result must be set with
 * PFCFuncSetReturn on the thread that called it, a C thread other than
 * the JavaScript thread must wait for the event loop without deadlocking
 * a loop that is blocked in a synchronous call, and nothing may enter
 * JavaScript once the loop is gone. So every JavaScript function that C
 * can call is a host function (host.h) whose C function is
 * pfnode_host_func below:
 *
 *  - On the JavaScript thread it copies the arguments into a slot of
 *    memory that JavaScript reads through typed arrays, calls the one
 *    JavaScript trampoline (a koffi callback, `int32 js_call(slot)`),
 *    sets the result that JavaScript wrote into the slot, and reports the
 *    status to the gate.
 *  - On any other thread it queues a request, writes a byte to the wake
 *    pipe (a socket pair whose read end the event loop reads, through a
 *    Node.js socket, which Node.js closes itself when a worker thread
 *    ends: JavaScript then serves the queue through pfnode_serve, on its
 *    own thread, with the same slots), and waits. No C thread ever blocks
 *    inside koffi, so none is left there when the process exits. The
 *    result and the error are copied back to the
 *    calling thread, which sets them there. A request whose JavaScript
 *    thread stays blocked in one synchronous call into C (the counters in
 *    pfnode_state say so) for longer than the configured timeout is
 *    withdrawn and fails with a RuntimeError that says why, instead of
 *    deadlocking; so does every request once pfnode_shutdown ran (the
 *    thread's exit).
 *
 * Finalizers of host functions (a JavaScript function that C no longer
 * holds) reach JavaScript the same way: directly on the JavaScript thread,
 * queued with a wake-up otherwise.
 *
 * Every evaluation of the package (the main thread's, each worker
 * thread's, and a second one in the same thread, as test runners that
 * reload modules make) has its own state, a pfnode_env: its JavaScript
 * thread, trampolines, slots, queue, wake pipe and gate. Each function
 * made for JavaScript carries its env (a pfnode_ref, its resource), so C
 * reaches the thread and the evaluation that made it and no other, and
 * shutting one env down (its thread exits) leaves the others alone. An env
 * is freed when its JavaScript side has shut down and the last function or
 * tensor that refers to it is gone.
 *
 * No lock is held while user code (JavaScript, koffi, packedfunc calls)
 * runs: an env's lock guards its queue, its request states and its
 * released keys only.
 */
#define _GNU_SOURCE /* dladdr, RTLD_NODELETE */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <packedfunc/c_api.h>

#define PFNODE_EXPORT __attribute__((visibility("default")))

/* The layout version of everything JavaScript reads here (lib/library.js
 * checks it). */
#define PFNODE_ABI 5
/* Callbacks nested on the JavaScript thread, at most. */
#define PFNODE_MAX_DEPTH 128
/* Arguments copied into a slot; more are read through the slot's pointers. */
#define PFNODE_SLOT_ARGS 16

/* One callback in progress on the JavaScript thread. JavaScript reads the
 * arguments and writes the result and its flags; the offsets are mirrored
 * in lib/callbacks.js (pfnode_slot_size() and PFNODE_ABI are checked). */
typedef struct {
  int32_t num_args;                 /*  0 */
  int32_t ret_code;                 /*  4: written by JS; kPFNull for none */
  int64_t key;                      /*  8: the JavaScript function's key */
  PFValue ret_value;                /* 16: written by JS */
  int32_t ret_owned;                /* 24: JS hands its reference to the returned handle over */
  int32_t loan;                     /* 28: the callAsync call whose thread waits (its
                                       loan, see pfnode_async), or 0 */
  PFValue* args;                    /* 32: the caller's arrays (for more than PFNODE_SLOT_ARGS) */
  int* codes;                       /* 40 */
  PFByteArray ret_bytes;            /* 48: a bytes result: ret_value points here */
  PFValue values[PFNODE_SLOT_ARGS]; /* 64 */
  int32_t value_codes[PFNODE_SLOT_ARGS]; /* 192 */
} pfnode_slot;
_Static_assert(sizeof(pfnode_slot) == 256, "pfnode_slot layout");

/* What the JavaScript thread and the waiting threads share: pfnode_call
 * writes the first two words, on the JavaScript thread, around every
 * synchronous call of a packed function; the helper writes the other two
 * (atomically: count_add). */
typedef struct {
  int32_t sync_depth;   /* synchronous calls into C in progress on the JS thread */
  int32_t sync_returns; /* incremented as each returns: progress */
  int32_t released;     /* keys waiting in the released list */
  int32_t pending;      /* requests queued for the JS thread */
} pfnode_shared;

typedef int32_t (*js_call_fn)(int32_t slot);
typedef void (*js_release_fn)(int64_t key);

typedef struct pfnode_async pfnode_async;
typedef struct pfnode_env pfnode_env;
typedef struct pfnode_frame pfnode_frame;

/* What koffi calls; each is described where it is defined. */
PFNODE_EXPORT int32_t pfnode_abi(void);
PFNODE_EXPORT pfnode_env* pfnode_init(js_call_fn call, js_release_fn release, PFObjectHandle gate);
PFNODE_EXPORT int32_t pfnode_wake_fd(pfnode_env* env);
PFNODE_EXPORT int32_t pfnode_serve(pfnode_env* env);
PFNODE_EXPORT int pfnode_func_create(pfnode_env* env, int64_t key, PFFunctionHandle* out);
PFNODE_EXPORT void* pfnode_ref_create(pfnode_env* env, int64_t key);
PFNODE_EXPORT int pfnode_host_func(PFValue* args, int* codes, int n, PFRetValueHandle ret,
                                   void* resource);
PFNODE_EXPORT void pfnode_host_finalizer(void* resource);
typedef struct pfnode_tensor_spec pfnode_tensor_spec;
PFNODE_EXPORT int pfnode_tensor_create(pfnode_env* env, int64_t key, const pfnode_tensor_spec* spec,
                                       PFObjectHandle* out);
PFNODE_EXPORT void* pfnode_slots(pfnode_env* env);
PFNODE_EXPORT int32_t pfnode_slot_size(void);
PFNODE_EXPORT int32_t pfnode_max_depth(void);
PFNODE_EXPORT void* pfnode_shared_state(pfnode_env* env);
PFNODE_EXPORT int32_t pfnode_set_timeout_ms(pfnode_env* env, int32_t ms);
PFNODE_EXPORT void pfnode_shutdown(pfnode_env* env, const char* message);
PFNODE_EXPORT void pfnode_call(pfnode_frame* fr);
PFNODE_EXPORT int32_t pfnode_async_size(void);
PFNODE_EXPORT int32_t pfnode_call_async(pfnode_async* a);
PFNODE_EXPORT void pfnode_async_clear(pfnode_async* a);

enum { REQ_PENDING, REQ_RUNNING, REQ_DONE, REQ_CANCELLED };

/* The loan of the callAsync call that this thread runs (pfnode_call_async),
 * or 0: a callback it waits for may use the instances lent to the call. */
static _Thread_local int32_t tl_loan;

/* A call from another thread, on that thread's stack while it waits. */
typedef struct request {
  struct request* next;
  int state;
  pthread_cond_t cond;
  int64_t key;
  PFValue* args;
  int* codes;
  int num_args;
  int32_t loan; /* the callAsync call this thread runs (tl_loan), or 0 */
  /* The outcome, copied on the JavaScript thread for the caller's. */
  int status;
  PFValue value;
  int code;
  void* owned; /* a copied str or bytes block (PFMemAlloc) or a handle reference */
  char* err_kind;
  char* err_msg;
  char* err_tb;
} request;

typedef struct released_key {
  struct released_key* next;
  int64_t key;
} released_key;

/* One evaluation of the package (see the top). The JavaScript thread alone
 * touches js_thread, the trampolines, the slots and depth; `lock` guards
 * the queue, the request states, the released keys, the wake pipe's state
 * and `closed`. */
struct pfnode_env {
  pfnode_slot slots[PFNODE_MAX_DEPTH];
  pfnode_shared shared;
  pthread_t js_thread;
  js_call_fn js_call;
  js_release_fn js_release;
  PFObjectHandle gate; /* borrowed: JavaScript keeps it for the env's life */
  int depth;           /* JS thread only */
  pthread_mutex_t lock;
  request* queue_head;
  request* queue_tail;
  released_key* released;
  int wake_fds[2];  /* the wake pipe (a socket pair): [0] the event loop's, [1] ours */
  int wake_pending; /* a byte is in the pipe */
  int closed;
  char closed_message[256];
  atomic_int timeout_ms;
  atomic_int refs; /* JavaScript's (until pfnode_shutdown) and one per pfnode_ref */
  struct pfnode_env* next_on_thread; /* the thread's envs not shut down (thread_envs) */
};

/* The resource of a function made for JavaScript, and the manager_ctx of
 * a tensor over JavaScript memory: which env, which JavaScript value. */
typedef struct {
  pfnode_env* env;
  int64_t key;
} pfnode_ref;

/* The counters in env->shared change under env->lock, but the JavaScript thread
 * reads `pending` without it (pfnode_host_func: serve first when requests
 * wait), so every access is atomic; relaxed, as a stale value only delays
 * serving to the next wake-up. */
static void count_add(int32_t* counter, int32_t delta) {
  __atomic_fetch_add(counter, delta, __ATOMIC_RELAXED);
}
static void count_set(int32_t* counter, int32_t value) {
  __atomic_store_n(counter, value, __ATOMIC_RELAXED);
}

/* Whether this is env's JavaScript thread and JavaScript may still run
 * there. `closed` is read without the lock: only the JavaScript thread
 * writes it, and another thread's stale read is false either way (a
 * recycled thread id belongs to a thread that never set it). */
static int on_js_thread(pfnode_env* env) {
  return pthread_equal(pthread_self(), env->js_thread) &&
         !__atomic_load_n(&env->closed, __ATOMIC_RELAXED);
}

/* The read end of the wake pipe belongs to the event loop (pfnode_wake_fd),
 * which closes it. */
static void env_release(pfnode_env* env) {
  if (atomic_fetch_sub(&env->refs, 1) != 1) return;
  close(env->wake_fds[1]);
  pthread_mutex_destroy(&env->lock);
  free(env);
}

/* The envs of each thread that are not shut down, so that a thread that
 * ends without JavaScript's goodbye (a worker terminated: its 'exit' event
 * does not run) shuts them down as it ends. */
static pthread_key_t g_thread_envs;
static pthread_once_t g_thread_envs_once = PTHREAD_ONCE_INIT;
static int g_thread_envs_ok;

static void thread_ended(void* list) {
  for (pfnode_env* env = list; env != NULL;) {
    pfnode_env* next = env->next_on_thread;
    env->next_on_thread = NULL;
    pthread_setspecific(g_thread_envs, next);
    pfnode_shutdown(env, NULL);
    env = next;
  }
}

/* The helper stays loaded for the life of the process: koffi unloads the
 * libraries a worker thread loaded when the worker ends, and thread_ended
 * runs after that. (Compiled into a program, as tests/test_pfnode_threads.c
 * does, it cannot be loaded again, and needs not be.) */
static void thread_envs_init(void) {
  Dl_info self;
  if (dladdr((void*)thread_ended, &self) != 0 && self.dli_fname != NULL)
    (void)dlopen(self.dli_fname, RTLD_NOW | RTLD_NODELETE);
  g_thread_envs_ok = pthread_key_create(&g_thread_envs, thread_ended) == 0;
}

static char* dup_text(const char* s) {
  size_t n = strlen(s) + 1;
  char* d = malloc(n);
  if (d != NULL) memcpy(d, s, n);
  return d;
}

/* ---- the JavaScript thread ------------------------------------------------ */

/* Runs the JavaScript function `key` on this (the JavaScript) thread: its
 * result goes to `ret` when `ret` is not NULL, else stays in the slot for
 * the caller (serving another thread). Returns 0 or -1 (error recorded),
 * and the slot's index through *slot_out (-1 when none was taken). */
static int run_js(pfnode_env* env, int64_t key, PFValue* args, int* codes, int n, int32_t loan,
                  PFRetValueHandle ret, int* slot_out) {
  *slot_out = -1;
  if (env->depth >= PFNODE_MAX_DEPTH)
    return PFErrorSetFormat(kPFErrRuntimeError,
                            "packedfunc (Node.js): JavaScript callbacks nested more than %d deep",
                            PFNODE_MAX_DEPTH);
  int index = env->depth++;
  pfnode_slot* s = &env->slots[index];
  s->num_args = n;
  s->key = key;
  s->ret_code = kPFNull;
  s->ret_value.v_int64 = 0;
  s->ret_owned = 0;
  s->loan = loan;
  s->args = args;
  s->codes = codes;
  for (int i = 0; i < n && i < PFNODE_SLOT_ARGS; ++i) {
    s->values[i] = args[i];
    s->value_codes[i] = codes[i];
  }
  int32_t status = env->js_call(index);
  int rc;
  if (status == 1) {
    rc = 0;
    if (ret != NULL && s->ret_code != kPFNull) {
      int code = s->ret_code;
      rc = PFCFuncSetReturn(ret, &s->ret_value, &code, 1) == 0 ? 0 : -1;
    }
  } else if (status == -1) {
    rc = -1; /* JavaScript recorded the error */
  } else {
    /* koffi returns 0 when an exception escaped the trampoline. */
    rc = PFErrorSetFormat(kPFErrRuntimeError,
                          "packedfunc (Node.js): the JavaScript callback did not complete");
  }
  env->depth--;
  if (ret != NULL && s->ret_owned && s->ret_code >= kPFFuncHandle &&
      s->ret_code <= kPFObjectHandle) {
    PFObjectFree(s->ret_value.v_handle);
    s->ret_owned = 0;
  }
  *slot_out = index;
  return rc;
}

/* Copies what JavaScript left in slot `index` (or the thread's error) into
 * a request, so that its own thread can set it there. */
static void take_outcome(pfnode_env* env, request* r, int rc, int index) {
  r->status = rc;
  r->code = kPFNull;
  r->owned = NULL;
  if (rc != 0) {
    r->err_kind = dup_text(PFErrorGetKind());
    r->err_msg = dup_text(PFErrorGetMessage());
    r->err_tb = dup_text(PFErrorGetTraceback());
    if (index >= 0) {
      pfnode_slot* s = &env->slots[index];
      if (s->ret_owned && s->ret_code >= kPFFuncHandle && s->ret_code <= kPFObjectHandle)
        PFObjectFree(s->ret_value.v_handle);
    }
    return;
  }
  pfnode_slot* s = &env->slots[index];
  r->code = s->ret_code;
  r->value = s->ret_value;
  if (s->ret_code == kPFStr) {
    size_t len = strlen(s->ret_value.v_str) + 1;
    char* copy = PFMemAlloc(len);
    if (copy == NULL) goto no_memory;
    memcpy(copy, s->ret_value.v_str, len);
    r->value.v_str = copy;
    r->owned = copy;
  } else if (s->ret_code == kPFBytes) {
    const PFByteArray* b = s->ret_value.v_handle;
    PFByteArray* copy = PFMemAlloc(sizeof(PFByteArray) + b->size + 1);
    if (copy == NULL) goto no_memory;
    char* data = (char*)(copy + 1);
    if (b->size) memcpy(data, b->data, b->size);
    copy->data = data;
    copy->size = b->size;
    r->value.v_handle = copy;
    r->owned = copy;
  } else if (s->ret_code >= kPFFuncHandle && s->ret_code <= kPFObjectHandle) {
    if (!s->ret_owned && PFObjectRetain(s->ret_value.v_handle) != 0) goto failed;
    r->owned = s->ret_value.v_handle;
  }
  return;
no_memory:
  PFErrorSet(kPFErrMemoryError, "packedfunc (Node.js): no memory for a callback's result");
failed:
  r->status = -1;
  r->code = kPFNull;
  r->err_kind = dup_text(PFErrorGetKind());
  r->err_msg = dup_text(PFErrorGetMessage());
  r->err_tb = dup_text(PFErrorGetTraceback());
}

/* Serves every request queued for the JavaScript thread and hands the
 * released keys to JavaScript. Called by JavaScript (js_wake), and before a
 * direct callback when requests wait. Returns how many requests it ran. */
PFNODE_EXPORT int32_t pfnode_serve(pfnode_env* env) {
  if (env == NULL || !on_js_thread(env)) return -1;
  int32_t served = 0;
  char sink[64];
  pthread_mutex_lock(&env->lock);
  while (read(env->wake_fds[0], sink, sizeof(sink)) > 0) {}
  env->wake_pending = 0;
  pthread_mutex_unlock(&env->lock);
  for (;;) {
    pthread_mutex_lock(&env->lock);
    released_key* keys = env->released;
    env->released = NULL;
    count_set(&env->shared.released, 0);
    request* r = env->queue_head;
    if (r != NULL) {
      env->queue_head = r->next;
      if (env->queue_head == NULL) env->queue_tail = NULL;
      r->state = REQ_RUNNING;
      count_add(&env->shared.pending, -1);
    }
    pthread_mutex_unlock(&env->lock);
    while (keys != NULL) {
      released_key* next = keys->next;
      env->js_release(keys->key);
      free(keys);
      keys = next;
    }
    if (r == NULL) break;
    int index;
    int rc = run_js(env, r->key, r->args, r->codes, r->num_args, r->loan, NULL, &index);
    take_outcome(env, r, rc, index);
    pthread_mutex_lock(&env->lock);
    r->state = REQ_DONE;
    pthread_cond_signal(&r->cond);
    pthread_mutex_unlock(&env->lock);
    ++served;
  }
  return served;
}

/* ---- other threads ------------------------------------------------------- */

/* Under env->lock: makes the event loop call pfnode_serve, with a byte in the
 * wake pipe (one at a time: the loop reads them all). Returns 0, or -1
 * when the pipe cannot be written. */
static int wake_js_locked(pfnode_env* env) {
  if (env->wake_pending) return 0;
  char byte = 1;
  ssize_t n;
  do {
    n = send(env->wake_fds[1], &byte, 1, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != 1 && !(n < 0 && errno == EAGAIN)) return -1;
  env->wake_pending = 1;
  return 0;
}

/* Under env->lock: removes a pending request from the queue. */
static void unqueue_locked(pfnode_env* env, request* r) {
  request** p = &env->queue_head;
  request* prev = NULL;
  while (*p != NULL && *p != r) {
    prev = *p;
    p = &(*p)->next;
  }
  if (*p == r) {
    *p = r->next;
    if (env->queue_tail == r) env->queue_tail = prev;
    count_add(&env->shared.pending, -1);
  }
  r->state = REQ_CANCELLED;
}

static void add_ms(struct timespec* t, int ms) {
  t->tv_sec += ms / 1000;
  t->tv_nsec += (long)(ms % 1000) * 1000000L;
  if (t->tv_nsec >= 1000000000L) {
    t->tv_sec += 1;
    t->tv_nsec -= 1000000000L;
  }
}

/* A call of JavaScript function `key` from a thread other than the
 * JavaScript thread: queued for the event loop, waited for. */
static int call_from_other_thread(pfnode_env* env, int64_t key, PFValue* args, int* codes, int n,
                                  PFRetValueHandle ret) {
  request r;
  memset(&r, 0, sizeof(r));
  r.key = key;
  r.args = args;
  r.codes = codes;
  r.num_args = n;
  r.loan = tl_loan;
  r.state = REQ_PENDING;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&r.cond, &attr);
  pthread_condattr_destroy(&attr);

  const char* refusal = NULL;
  char message[512];
  pthread_mutex_lock(&env->lock);
  if (env->closed) {
    snprintf(message, sizeof(message), "%s", env->closed_message);
    refusal = message;
  } else {
    if (env->queue_tail) env->queue_tail->next = &r;
    else env->queue_head = &r;
    env->queue_tail = &r;
    count_add(&env->shared.pending, 1);
    if (wake_js_locked(env) != 0) {
      unqueue_locked(env, &r);
      refusal = "packedfunc (Node.js): cannot wake the JavaScript event loop (its pipe failed)";
    }
  }
  /* Wait, 10 ms at a time, watching whether the JavaScript thread is stuck
   * in one synchronous call (in C, so its event loop cannot run). */
  int stuck_ms = 0;
  int32_t last_returns = __atomic_load_n(&env->shared.sync_returns, __ATOMIC_RELAXED);
  while (refusal == NULL && r.state != REQ_DONE) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    add_ms(&until, 10);
    int err = pthread_cond_timedwait(&r.cond, &env->lock, &until);
    if (r.state == REQ_DONE) break;
    if (env->closed && r.state == REQ_PENDING) {
      unqueue_locked(env, &r);
      snprintf(message, sizeof(message), "%s", env->closed_message);
      refusal = message;
      break;
    }
    if (err != ETIMEDOUT || r.state != REQ_PENDING) continue;
    int32_t depth = __atomic_load_n(&env->shared.sync_depth, __ATOMIC_RELAXED);
    int32_t returns = __atomic_load_n(&env->shared.sync_returns, __ATOMIC_RELAXED);
    stuck_ms = (depth > 0 && returns == last_returns) ? stuck_ms + 10 : 0;
    last_returns = returns;
    int limit = atomic_load(&env->timeout_ms);
    if (limit >= 0 && stuck_ms >= limit) {
      unqueue_locked(env, &r);
      snprintf(message, sizeof(message),
               "packedfunc (Node.js): a C thread called a JavaScript function while the "
               "JavaScript thread was blocked in a synchronous call into C for %d ms, so "
               "the event loop could not run it (a deadlock if that call waits for this "
               "thread): call the outer function with callAsync(), or raise "
               "setThreadCallTimeout()",
               stuck_ms);
      refusal = message;
    }
  }
  pthread_mutex_unlock(&env->lock);
  pthread_cond_destroy(&r.cond);
  if (refusal != NULL) return PFErrorSetFormat(kPFErrRuntimeError, "%s", refusal);

  if (r.status != 0) {
    PFErrorSet(r.err_kind ? r.err_kind : kPFErrRuntimeError,
               r.err_msg ? r.err_msg : "packedfunc (Node.js): a JavaScript callback failed");
    if (r.err_tb && r.err_tb[0]) PFErrorAppendTraceback(r.err_tb);
    free(r.err_kind);
    free(r.err_msg);
    free(r.err_tb);
    return -1;
  }
  int rc = 0;
  if (r.code != kPFNull) rc = PFCFuncSetReturn(ret, &r.value, &r.code, 1) == 0 ? 0 : -1;
  if (r.code == kPFStr || r.code == kPFBytes) PFMemFree(r.owned);
  else if (r.owned != NULL) PFObjectFree(r.owned);
  return rc;
}

/* ---- the host function and its finalizer ---------------------------------- */

/* The C function of every JavaScript function that C can call (see the top). */
PFNODE_EXPORT int pfnode_host_func(PFValue* args, int* codes, int n, PFRetValueHandle ret,
                                   void* resource) {
  PFHostCall* call = resource;
  const pfnode_ref* ref = call->resource_handle;
  pfnode_env* env = ref->env;
  int rc;
  if (on_js_thread(env)) {
    if (__atomic_load_n(&env->shared.pending, __ATOMIC_RELAXED) > 0) pfnode_serve(env);
    int index;
    rc = run_js(env, ref->key, args, codes, n, 0, ret, &index);
  } else {
    rc = call_from_other_thread(env, ref->key, args, codes, n, ret);
  }
  call->status = rc;
  return rc;
}

/* Hands `key` back to env's JavaScript: at once on its thread, else queued
 * with a wake-up; dropped once env has shut down. */
static void release_key(pfnode_env* env, int64_t key) {
  if (on_js_thread(env)) {
    env->js_release(key);
    return;
  }
  released_key* k = malloc(sizeof(*k));
  if (k == NULL) return; /* the value stays in JavaScript's table: a leak, not a crash */
  k->key = key;
  pthread_mutex_lock(&env->lock);
  if (!env->closed) {
    k->next = env->released;
    env->released = k;
    count_add(&env->shared.released, 1);
    (void)wake_js_locked(env);
    k = NULL;
  }
  pthread_mutex_unlock(&env->lock);
  free(k);
}

/* The finalizer of a host function: JavaScript forgets the function, and
 * the function's hold on its env goes. */
PFNODE_EXPORT void pfnode_host_finalizer(void* resource) {
  pfnode_ref* ref = resource;
  pfnode_env* env = ref->env;
  release_key(env, ref->key);
  free(ref);
  env_release(env);
}

/* A reference to the JavaScript value `key` of env, holding env: the
 * resource of a host function, the manager_ctx of a tensor over JavaScript
 * memory. NULL when there is no memory. */
PFNODE_EXPORT void* pfnode_ref_create(pfnode_env* env, int64_t key) {
  pfnode_ref* ref = malloc(sizeof(*ref));
  if (ref == NULL) return NULL;
  ref->env = env;
  ref->key = key;
  atomic_fetch_add(&env->refs, 1);
  return ref;
}

/* A new host function (*out, a new reference) on env's gate that calls the
 * JavaScript function `key`. Returns 0, or -1 with the error set; on
 * failure JavaScript is handed `key` back, as by the finalizer. */
PFNODE_EXPORT int pfnode_func_create(pfnode_env* env, int64_t key, PFFunctionHandle* out) {
  pfnode_ref* ref = pfnode_ref_create(env, key);
  if (ref == NULL) {
    release_key(env, key);
    return PFErrorSetFormat(kPFErrMemoryError, "packedfunc (Node.js): no memory for a function");
  }
  return PFFuncCreateFromHostCFunc(env->gate, pfnode_host_func, ref, pfnode_host_finalizer, out);
}

/* The deleter of a tensor object made over a JavaScript typed array: the
 * DLManagedTensor (one PFMemAlloc block with its shape) is freed, and
 * JavaScript lets the typed array go (manager_ctx is its pfnode_ref), as a
 * host function's finalizer does. */
static void tensor_deleter(DLManagedTensor* managed) {
  void* ref = managed->manager_ctx;
  PFMemFree(managed);
  pfnode_host_finalizer(ref);
}

/* What JavaScript writes for pfnode_tensor_create (lib/tensors.js): a
 * compact CPU tensor over its memory. */
struct pfnode_tensor_spec {
  void* data;
  int32_t ndim;
  uint8_t code, bits;
  uint16_t lanes;
  int64_t shape[];
};
_Static_assert(offsetof(pfnode_tensor_spec, shape) == 16, "the spec layout lib/tensors.js writes");

/* A new tensor object (*out, a new reference) over JavaScript memory that
 * stays alive (JavaScript holds `key`) until the object's last reference
 * goes: one call, where JavaScript would need five. Returns 0, or -1 with
 * the error set; on failure JavaScript is handed `key` back. */
PFNODE_EXPORT int pfnode_tensor_create(pfnode_env* env, int64_t key, const pfnode_tensor_spec* spec,
                                       PFObjectHandle* out) {
  size_t shape_bytes = (size_t)spec->ndim * sizeof(int64_t);
  DLManagedTensor* managed = PFMemAlloc(sizeof(*managed) + shape_bytes);
  pfnode_ref* ref = managed != NULL ? pfnode_ref_create(env, key) : NULL;
  if (ref == NULL) {
    PFMemFree(managed);
    release_key(env, key);
    return PFErrorSetFormat(kPFErrMemoryError, "packedfunc (Node.js): no memory for a tensor");
  }
  int64_t* shape = (int64_t*)(managed + 1);
  if (shape_bytes) memcpy(shape, spec->shape, shape_bytes);
  managed->dl_tensor = (DLTensor){.data = spec->data,
                                  .device = {kDLCPU, 0},
                                  .ndim = spec->ndim,
                                  .dtype = {spec->code, spec->bits, spec->lanes},
                                  .shape = shape};
  managed->manager_ctx = ref;
  managed->deleter = tensor_deleter;
  return PFTensorCreateFromDLPack(managed, out); /* the deleter ran if it failed */
}

/* ---- set-up, settings, shutdown ------------------------------------------- */

/* PFNODE_ABI, for JavaScript to check before it calls anything else. */
PFNODE_EXPORT int32_t pfnode_abi(void) { return PFNODE_ABI; }

/* A new env for the calling (JavaScript) thread, with koffi's callback
 * pointers and the gate its functions are made on (borrowed: JavaScript
 * keeps it). Returns NULL when there is no memory or the wake pipe cannot
 * be made. */
PFNODE_EXPORT pfnode_env* pfnode_init(js_call_fn call, js_release_fn release, PFObjectHandle gate) {
  pthread_once(&g_thread_envs_once, thread_envs_init);
  if (!g_thread_envs_ok) return NULL;
  pfnode_env* env = calloc(1, sizeof(*env));
  if (env == NULL) return NULL;
  if (socketpair(AF_UNIX, SOCK_STREAM, 0, env->wake_fds) != 0) {
    free(env);
    return NULL;
  }
  for (int i = 0; i < 2; ++i) {
    fcntl(env->wake_fds[i], F_SETFL, fcntl(env->wake_fds[i], F_GETFL) | O_NONBLOCK);
    fcntl(env->wake_fds[i], F_SETFD, FD_CLOEXEC);
  }
  pthread_mutex_init(&env->lock, NULL);
  env->js_thread = pthread_self();
  env->js_call = call;
  env->js_release = release;
  env->gate = gate;
  snprintf(env->closed_message, sizeof(env->closed_message), "%s",
           "the Node.js event loop has exited");
  atomic_init(&env->timeout_ms, 2000);
  atomic_init(&env->refs, 1);
  env->next_on_thread = pthread_getspecific(g_thread_envs);
  pthread_setspecific(g_thread_envs, env);
  return env;
}

/* The read end of env's wake pipe, for the event loop to poll: the caller
 * owns it from then on and closes it (Node.js does, with the handle that
 * reads it, even when a worker thread is terminated). Call it once. */
PFNODE_EXPORT int32_t pfnode_wake_fd(pfnode_env* env) { return env->wake_fds[0]; }

PFNODE_EXPORT void* pfnode_slots(pfnode_env* env) { return env->slots; }
PFNODE_EXPORT int32_t pfnode_slot_size(void) { return (int32_t)sizeof(pfnode_slot); }
PFNODE_EXPORT int32_t pfnode_max_depth(void) { return PFNODE_MAX_DEPTH; }
PFNODE_EXPORT void* pfnode_shared_state(pfnode_env* env) { return &env->shared; }

/* How long a call from another thread waits while env's JavaScript thread
 * is stuck in one synchronous call into C (negative: forever). Returns the
 * previous value. */
PFNODE_EXPORT int32_t pfnode_set_timeout_ms(pfnode_env* env, int32_t ms) {
  return atomic_exchange(&env->timeout_ms, ms);
}

/* env's JavaScript thread is exiting (on its own thread, after it stopped
 * reading the wake pipe): every call from another thread that waits, and
 * every later one, fails with `message` (NULL: "the Node.js event loop has
 * exited"), and JavaScript's hold on env goes. Other envs are not
 * affected. Call it once; a thread that ends calls it for its envs that
 * are left. */
PFNODE_EXPORT void pfnode_shutdown(pfnode_env* env, const char* message) {
  pfnode_env* first = pthread_getspecific(g_thread_envs);
  pfnode_env** link = &first;
  while (*link != NULL && *link != env) link = &(*link)->next_on_thread;
  if (*link == env) {
    *link = env->next_on_thread;
    pthread_setspecific(g_thread_envs, first);
  }
  pthread_mutex_lock(&env->lock);
  __atomic_store_n(&env->closed, 1, __ATOMIC_RELAXED);
  if (message != NULL) snprintf(env->closed_message, sizeof(env->closed_message), "%s", message);
  for (request* r = env->queue_head; r != NULL; r = r->next) pthread_cond_signal(&r->cond);
  released_key* keys = env->released;
  env->released = NULL;
  pthread_mutex_unlock(&env->lock);
  while (keys != NULL) {
    released_key* next = keys->next;
    free(keys);
    keys = next;
  }
  env_release(env);
}

/* ---- synchronous calls of the JavaScript thread -------------------------- */

/* A frame of lib/frames.js: PFFuncCallFrame's fields, then the target that
 * JavaScript resolved once for the function (PFFuncResolve) and copied in
 * with its handle. The arguments are the binding's own: codes it wrote
 * itself, strings and bytes in the frame's arena (never return storage),
 * handles of wrappers that hold them; so the call goes straight to the
 * target. JavaScript adds PFNODE_TARGET_OUTER to the target's flags in the
 * frame of its outermost call, which has no C code below it. */
#define PFNODE_TARGET_OUTER 0x80000000u
struct pfnode_frame {
  PFCallFrame call;      /*  0: 40 bytes */
  PFCallTarget target;   /* 40: 24 bytes */
  pfnode_shared* shared; /* 64: the calling env's counters (written once per frame) */
  int32_t status;        /* 72: the call's outcome: 0, or -1 with the error recorded */
  int32_t reserved;      /* 76 */
};
_Static_assert(sizeof(pfnode_frame) == 80, "pfnode_frame layout (lib/frames.js)");

/* lib/functions.js calls every function here, through its target (with no
 * error standing, PFErrorGetKind costs a few instructions, so the guard
 * below is cheaper than PFFuncCall's checks of the frame).
 * A direct callee that fails must record an error (PFDirectCFunc); one
 * that does not would leave an older error standing, which a call through
 * its target cannot tell from its own. So a direct target runs with no
 * error on the thread: an outermost call drops a standing error, which
 * JavaScript has read already and which nobody below it waits on; a
 * nested one leaves it to PFFuncCall, which tells them apart. The
 * adapter of a setter-convention callee tells them apart itself. */
static int call_frame(pfnode_frame* fr) {
  PFCallFrame* c = &fr->call;
  uint32_t flags = fr->target.flags;
  if (!(flags & kPFTargetAdapter) && PFErrorGetKind()[0] != '\0') {
    if (!(flags & PFNODE_TARGET_OUTER)) return PFFuncCallFrame(c);
    PFErrorClear();
  }
  int rc = fr->target.entry(fr->target.ctx, c->args, c->type_codes, c->num_args, &c->ret_val,
                            &c->ret_type_code);
  if (rc != 0 && PFErrorGetKind()[0] == '\0') {
    const char* name = NULL;
    (void)PFFuncGetInfo(c->func, &name, NULL, NULL);
    PFErrorSetFormat(kPFErrRuntimeError, "function '%s' returned %d without recording an error",
                     name ? name : "<anonymous>", rc);
  }
  return rc;
}

/* The call of a frame, for JavaScript: the outcome goes to fr->status and
 * the call counts as one of the JavaScript thread's synchronous calls into
 * C (pfnode_shared, which threads waiting for that thread read) while it
 * runs. It returns nothing, which koffi converts for free. Only the
 * JavaScript thread writes these two counters, so plain relaxed stores
 * do. */
PFNODE_EXPORT void pfnode_call(pfnode_frame* fr) {
  pfnode_shared* sh = fr->shared;
  count_set(&sh->sync_depth, __atomic_load_n(&sh->sync_depth, __ATOMIC_RELAXED) + 1);
  fr->status = call_frame(fr);
  count_set(&sh->sync_depth, __atomic_load_n(&sh->sync_depth, __ATOMIC_RELAXED) - 1);
  count_set(&sh->sync_returns, __atomic_load_n(&sh->sync_returns, __ATOMIC_RELAXED) + 1);
}

/* ---- calls made off the JavaScript thread (callAsync) --------------------- */

/* One asynchronous call: koffi runs pfnode_call_async on a worker thread;
 * what the call leaves in that thread's storage (a str or bytes result, an
 * error) is copied here, for JavaScript to read on its own thread. The
 * layout is mirrored in lib/function.js. */
struct pfnode_async {
  PFCallFrame frame; /*  0: 40 bytes */
  int32_t status;    /* 40 */
  int32_t loan;      /* 44: written by JavaScript, nonzero: the instances lent to the call */
  void* copy;        /* 48: a str or bytes result's copy (malloc) */
  int64_t copy_size; /* 56 */
  char* err_kind;    /* 64 */
  char* err_msg;     /* 72 */
  char* err_tb;      /* 80 */
};

PFNODE_EXPORT int32_t pfnode_async_size(void) { return (int32_t)sizeof(pfnode_async); }

PFNODE_EXPORT int32_t pfnode_call_async(pfnode_async* a) {
  a->copy = NULL;
  a->copy_size = 0;
  a->err_kind = a->err_msg = a->err_tb = NULL;
  int32_t outer = tl_loan;
  tl_loan = a->loan;
  a->status = PFFuncCallFrame(&a->frame);
  tl_loan = outer;
  if (a->status != 0) {
    a->err_kind = dup_text(PFErrorGetKind());
    a->err_msg = dup_text(PFErrorGetMessage());
    a->err_tb = dup_text(PFErrorGetTraceback());
  } else if (a->frame.ret_type_code == kPFStr) {
    a->copy = dup_text(a->frame.ret_val.v_str);
    a->copy_size = a->copy ? (int64_t)strlen(a->copy) : 0;
  } else if (a->frame.ret_type_code == kPFBytes) {
    const PFByteArray* b = a->frame.ret_val.v_handle;
    a->copy = malloc(b->size ? b->size : 1);
    if (a->copy && b->size) memcpy(a->copy, b->data, b->size);
    a->copy_size = (int64_t)b->size;
  }
  return a->status;
}

/* Frees what pfnode_call_async copied. */
PFNODE_EXPORT void pfnode_async_clear(pfnode_async* a) {
  free(a->copy);
  free(a->err_kind);
  free(a->err_msg);
  free(a->err_tb);
  a->copy = NULL;
  a->err_kind = a->err_msg = a->err_tb = NULL;
}
