/* Threads binding equal constants through one pre-pack cache at once: the
 * hook runs once, every bound function shares its packed value, and the
 * entry goes with the last of them. Runs under TSan too (the Makefile
 * picks up the _threads suffix). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/pf_test.h"

#define THREADS 8
#define ROUNDS 20

typedef struct {
  atomic_int calls;
} hook_state;

static int noop(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n == 0) return 0;
  return PFCFuncSetReturn(ret, &args[0], &codes[0], 1);
}

static void free_payload(void* p) { PFMemFree(p); }

/* Packs into a boxed copy of the first float; yields a little so that
 * other binds arrive while it is packing. */
static int hook(void* resource, int position, PFValue value, int code, const PFAllocator* allocator,
                PFValue* out, int* out_code, int* is_packed) {
  (void)position, (void)code;
  hook_state* h = resource;
  atomic_fetch_add(&h->calls, 1);
  for (int i = 0; i < 50; ++i) sched_yield();
  DLTensor* t = NULL;
  if (PFTensorGetDLTensor(value.v_handle, &t) != 0) return -1;
  float* copy = allocator->malloc_fn(sizeof(float), allocator->user_data);
  if (copy == NULL) return PFErrorSetFormat(kPFErrMemoryError, "hook: no memory");
  *copy = ((const float*)t->data)[0];
  PFObjectHandle o = NULL;
  if (PFObjectCreateBoxed(copy, free_payload, &o) != 0) return -1;
  out->v_handle = o;
  *out_code = kPFObjectHandle;
  *is_packed = 1;
  return 0;
}

typedef struct {
  int64_t shape[1];
  float data[4];
  DLManagedTensor managed;
} own_tensor;

static void own_delete(DLManagedTensor* m) { free(m->manager_ctx); }

/* Each thread binds its own tensor object of the same content. */
static PFObjectHandle make_tensor(void) {
  own_tensor* t = calloc(1, sizeof(*t));
  assert_non_null(t);
  for (int i = 0; i < 4; ++i) t->data[i] = (float)(i + 1);
  t->shape[0] = 4;
  t->managed.dl_tensor = (DLTensor){.data = t->data,
                                    .device = {kDLCPU, 0},
                                    .ndim = 1,
                                    .dtype = {kDLFloat, 32, 1},
                                    .shape = t->shape};
  t->managed.manager_ctx = t;
  t->managed.deleter = own_delete;
  PFObjectHandle o = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(&t->managed, &o));
  return o;
}

typedef struct {
  pthread_barrier_t* start;
  PFFunctionHandle func;
  PFPrePackCacheHandle cache;
  PFObjectHandle tensor;
  PFFunctionHandle bound;
  PFObjectHandle packed;
  int rc;
} worker;

static void* run(void* arg) {
  worker* w = arg;
  pthread_barrier_wait(w->start);
  int pos = 0, code = kPFObjectHandle;
  PFValue v = {.v_handle = w->tensor};
  w->rc = PFFuncBind(w->func, 1, &pos, &v, &code, w->cache, &w->bound);
  if (w->rc != 0) return NULL;
  PFValue rv;
  int rc_code;
  w->rc = PFFuncCall(w->bound, NULL, NULL, 0, &rv, &rc_code);
  if (w->rc == 0) {
    w->packed = rv.v_handle;
    PFObjectFree(rv.v_handle); /* the bound function still holds it */
  }
  return NULL;
}

static void test_concurrent_binds_pack_once(void** state) {
  (void)state;
  for (int round = 0; round < ROUNDS; ++round) {
    hook_state h = {0};
    PFFunctionHandle f = NULL;
    assert_pf_ok(PFFuncCreateFromCFunc(noop, &h, NULL, &f));
    assert_pf_ok(PFFuncSetPrePack(f, "threads/first", hook));
    PFPrePackCacheHandle cache = NULL;
    assert_pf_ok(PFPrePackCacheCreate(&cache));
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, THREADS);
    worker ws[THREADS];
    pthread_t th[THREADS];
    for (int i = 0; i < THREADS; ++i) {
      ws[i] = (worker){.start = &start, .func = f, .cache = cache, .tensor = make_tensor()};
      assert_int_equal(pthread_create(&th[i], NULL, run, &ws[i]), 0);
    }
    for (int i = 0; i < THREADS; ++i) pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    for (int i = 0; i < THREADS; ++i) {
      assert_pf_ok(ws[i].rc);
      assert_ptr_equal(ws[i].packed, ws[0].packed);
    }
    assert_int_equal(atomic_load(&h.calls), 1);
    int64_t entries = -1, hits = -1;
    assert_pf_ok(PFPrePackCacheGetStats(cache, &entries, NULL, &hits));
    assert_int_equal(entries, 1);
    assert_int_equal(hits, THREADS - 1);
    /* The originals may go before or after the functions that share the
     * entry; it goes with the last of those. */
    for (int i = 0; i < THREADS; ++i) {
      PFFuncFree(ws[i].bound);
      PFObjectFree(ws[i].tensor);
    }
    assert_pf_ok(PFPrePackCacheGetStats(cache, &entries, NULL, NULL));
    assert_int_equal(entries, 0);
    PFObjectFree(cache);
    PFFuncFree(f);
  }
}

/* ---- hooks that bind through the cache they are packing for ---- */

/* A tensor object of four floats, the first of them `first`. */
static PFObjectHandle make_tensor_first(float first) {
  PFObjectHandle o = make_tensor();
  DLTensor* t = NULL;
  assert_pf_ok(PFTensorGetDLTensor(o, &t));
  ((float*)t->data)[0] = first;
  return o;
}

/* What a crossed hook does: its outer call (one per binding thread) waits
 * until every binding thread is inside its outer call, so that each
 * thread's constant is being packed, then binds `func` with the constant
 * that another thread is packing, through the same cache, and waits until
 * every such nested bind has returned. */
typedef struct {
  PFFunctionHandle func;
  PFPrePackCacheHandle cache;
  int threads;                 /* binding threads that meet in the hooks */
  PFObjectHandle nested_of[2]; /* per outer constant: the constant its hook binds */
  PFObjectHandle outer[2];
  PFFunctionHandle nested[2]; /* what the outer calls bound */
  atomic_int inside;
  atomic_int nested_done;
  atomic_int calls;
} crossed_state;

static _Thread_local int t_in_hook;

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int crossed_hook(void* resource, int position, PFValue value, int code,
                        const PFAllocator* allocator, PFValue* out, int* out_code, int* is_packed) {
  crossed_state* c = resource;
  atomic_fetch_add(&c->calls, 1);
  if (!t_in_hook) {
    int which = value.v_handle == c->outer[0] ? 0 : 1;
    atomic_fetch_add(&c->inside, 1);
    int64_t deadline = now_ms() + 20000;
    while (atomic_load(&c->inside) < c->threads) {
      if (now_ms() > deadline)
        return PFErrorSetFormat(kPFErrRuntimeError, "crossed_hook: the other thread never came");
      sched_yield();
    }
    t_in_hook = 1;
    int pos = 0, vcode = kPFObjectHandle;
    PFValue v = {.v_handle = c->nested_of[which]};
    int rc = PFFuncBind(c->func, 1, &pos, &v, &vcode, c->cache, &c->nested[which]);
    t_in_hook = 0;
    if (rc != 0) return -1;
    /* No outer call returns (publishing its entry) before every nested
     * bind is done: each nested bind finds an entry still being packed. */
    atomic_fetch_add(&c->nested_done, 1);
    while (atomic_load(&c->nested_done) < c->threads) {
      if (now_ms() > deadline)
        return PFErrorSetFormat(kPFErrRuntimeError, "crossed_hook: the other bind never ended");
      sched_yield();
    }
  }
  return hook(&(hook_state){0}, position, value, code, allocator, out, out_code, is_packed);
}

typedef struct {
  crossed_state* state;
  PFObjectHandle tensor;
  PFFunctionHandle bound;
  int rc;
  char error[256];
  atomic_int* done;
} crossed_worker;

static void* crossed_run(void* arg) {
  crossed_worker* w = arg;
  int pos = 0, code = kPFObjectHandle;
  PFValue v = {.v_handle = w->tensor};
  w->rc = PFFuncBind(w->state->func, 1, &pos, &v, &code, w->state->cache, &w->bound);
  if (w->rc != 0) snprintf(w->error, sizeof(w->error), "%s", PFGetLastError());
  atomic_fetch_add(w->done, 1);
  return NULL;
}

/* The first float of what `bound` passes to its function (the boxed
 * copy that `hook` packs). */
static float packed_first(PFFunctionHandle bound) {
  PFValue rv;
  int rc_code = -1;
  assert_pf_ok(PFFuncCall(bound, NULL, NULL, 0, &rv, &rc_code));
  assert_int_equal(rc_code, kPFObjectHandle);
  void* payload = NULL;
  assert_pf_ok(PFObjectGetBoxedPayload(rv.v_handle, &payload));
  float first = *(const float*)payload;
  PFObjectFree(rv.v_handle);
  return first;
}

/* Runs one binding thread per outer constant and waits for them, at most
 * 30 s (they take milliseconds): a thread that a deadlock keeps fails the
 * test instead of hanging it; its state then stays allocated. */
static int run_crossed(crossed_state* c, crossed_worker* ws) {
  atomic_int done = 0;
  pthread_t th[2];
  for (int i = 0; i < c->threads; ++i) {
    ws[i] = (crossed_worker){.state = c, .tensor = c->outer[i], .done = &done};
    assert_int_equal(pthread_create(&th[i], NULL, crossed_run, &ws[i]), 0);
  }
  int64_t deadline = now_ms() + 30000;
  while (atomic_load(&done) < c->threads && now_ms() < deadline) {
    struct timespec ms = {0, 1000000L};
    nanosleep(&ms, NULL);
  }
  if (atomic_load(&done) < c->threads) {
    for (int i = 0; i < c->threads; ++i) pthread_detach(th[i]);
    return -1;
  }
  for (int i = 0; i < c->threads; ++i) pthread_join(th[i], NULL);
  return 0;
}

/* Thread 1 binds weight A through a cache, and its hook binds weight B
 * through the same cache; thread 2 binds B, and its hook binds A. Each
 * finds the other's constant being packed. A thread that is packing never
 * waits for another's packing (it packs its own copy), so both finish, and
 * each bound function passes what its own constant packs to. */
static void test_crossed_hooks_do_not_deadlock(void** state) {
  (void)state;
  for (int round = 0; round < 5; ++round) {
    crossed_state* c = calloc(1, sizeof(*c));
    assert_non_null(c);
    assert_pf_ok(PFFuncCreateFromCFunc(noop, c, NULL, &c->func));
    assert_pf_ok(PFFuncSetPrePack(c->func, "threads/crossed", crossed_hook));
    assert_pf_ok(PFPrePackCacheCreate(&c->cache));
    c->threads = 2;
    c->outer[0] = make_tensor_first(10.0f);     /* A */
    c->outer[1] = make_tensor_first(20.0f);     /* B */
    c->nested_of[0] = make_tensor_first(20.0f); /* equal to B */
    c->nested_of[1] = make_tensor_first(10.0f); /* equal to A */
    crossed_worker* ws = calloc(2, sizeof(*ws));
    assert_non_null(ws);
    if (run_crossed(c, ws) != 0)
      fail_msg(
          "two threads binding through one cache with crossed hooks did not finish in "
          "30 s: a deadlock (round %d)",
          round);
    for (int i = 0; i < 2; ++i)
      if (ws[i].rc != 0) fail_msg("bind %d failed: %s", i, ws[i].error);
    /* Two outer binds and two nested ones: four hook runs; the outer
     * constants are in the cache, the nested copies are their binds' own. */
    assert_int_equal(atomic_load(&c->calls), 4);
    int64_t entries = -1, hits = -1;
    assert_pf_ok(PFPrePackCacheGetStats(c->cache, &entries, NULL, &hits));
    assert_int_equal(entries, 2);
    assert_int_equal(hits, 0);
    assert_true(packed_first(ws[0].bound) == 10.0f);
    assert_true(packed_first(ws[1].bound) == 20.0f);
    assert_true(packed_first(c->nested[0]) == 20.0f);
    assert_true(packed_first(c->nested[1]) == 10.0f);
    for (int i = 0; i < 2; ++i) {
      PFFuncFree(ws[i].bound);
      PFFuncFree(c->nested[i]);
      PFObjectFree(c->outer[i]);
      PFObjectFree(c->nested_of[i]);
    }
    assert_pf_ok(PFPrePackCacheGetStats(c->cache, &entries, NULL, NULL));
    assert_int_equal(entries, 0);
    PFObjectFree(c->cache);
    PFFuncFree(c->func);
    free(ws);
    free(c);
  }
}

/* One thread whose hook binds a constant equal to the one it is packing,
 * through the same cache: it finds its own entry being packed, and packs
 * its own copy instead of waiting for itself. */
static void test_hook_binding_its_own_constant_does_not_wait(void** state) {
  (void)state;
  crossed_state* c = calloc(1, sizeof(*c));
  assert_non_null(c);
  assert_pf_ok(PFFuncCreateFromCFunc(noop, c, NULL, &c->func));
  assert_pf_ok(PFFuncSetPrePack(c->func, "threads/self", crossed_hook));
  assert_pf_ok(PFPrePackCacheCreate(&c->cache));
  c->threads = 1;
  c->outer[0] = make_tensor_first(30.0f);
  c->outer[1] = NULL;
  c->nested_of[0] = make_tensor_first(30.0f); /* equal to the outer one */
  crossed_worker* ws = calloc(1, sizeof(*ws));
  assert_non_null(ws);
  if (run_crossed(c, ws) != 0)
    fail_msg("a hook that binds an equal constant through its cache did not finish in 30 s");
  if (ws[0].rc != 0) fail_msg("the bind failed: %s", ws[0].error);
  assert_int_equal(atomic_load(&c->calls), 2);
  int64_t entries = -1;
  assert_pf_ok(PFPrePackCacheGetStats(c->cache, &entries, NULL, NULL));
  assert_int_equal(entries, 1);
  assert_true(packed_first(ws[0].bound) == 30.0f);
  assert_true(packed_first(c->nested[0]) == 30.0f);
  /* Bound later, from outside any hook, an equal constant is a hit. */
  PFFunctionHandle again = NULL;
  int pos = 0, code = kPFObjectHandle;
  PFValue v = {.v_handle = c->nested_of[0]};
  assert_pf_ok(PFFuncBind(c->func, 1, &pos, &v, &code, c->cache, &again));
  int64_t hits = -1;
  assert_pf_ok(PFPrePackCacheGetStats(c->cache, &entries, NULL, &hits));
  assert_int_equal(entries, 1);
  assert_int_equal(hits, 1);
  PFFuncFree(again);
  PFFuncFree(ws[0].bound);
  PFFuncFree(c->nested[0]);
  PFObjectFree(c->outer[0]);
  PFObjectFree(c->nested_of[0]);
  PFObjectFree(c->cache);
  PFFuncFree(c->func);
  free(ws);
  free(c);
}

/* fork() while threads read a cache's statistics (which takes its lock):
 * the child must find the lock free, and report through a pipe; a child
 * that hangs is killed at the deadline and fails the test. */
static atomic_int g_stop;
static void* poll_stats(void* arg) {
  PFPrePackCacheHandle cache = arg;
  int64_t entries;
  while (!atomic_load(&g_stop)) PFPrePackCacheGetStats(cache, &entries, NULL, NULL);
  return NULL;
}

static void test_fork_while_threads_use_a_cache(void** state) {
  (void)state;
  PFPrePackCacheHandle cache = NULL;
  assert_pf_ok(PFPrePackCacheCreate(&cache));
  atomic_store(&g_stop, 0);
  pthread_t th[2];
  for (int i = 0; i < 2; ++i) assert_int_equal(pthread_create(&th[i], NULL, poll_stats, cache), 0);
  int hung = 0, failed = 0;
  for (int k = 0; k < 20 && !hung; ++k) {
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      int64_t entries = -1;
      PFPrePackCacheHandle mine = NULL;
      int ok = PFPrePackCacheGetStats(cache, &entries, NULL, NULL) == 0 && entries == 0 &&
               PFPrePackCacheCreate(&mine) == 0;
      char verdict = ok ? 'y' : 'n';
      if (write(fds[1], &verdict, 1) != 1) verdict = 'n';
      _exit(0);
    }
    close(fds[1]);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) != pid) {
      clock_gettime(CLOCK_MONOTONIC, &now);
      if (now.tv_sec - start.tv_sec >= 20) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        hung++;
        break;
      }
      struct timespec ms = {0, 1000000L};
      nanosleep(&ms, NULL);
    }
    char verdict = 0;
    if (!hung && (read(fds[0], &verdict, 1) != 1 || verdict != 'y')) failed++;
    close(fds[0]);
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
  PFObjectFree(cache);
  if (hung || failed) fail_msg("children that hung: %d, that failed: %d", hung, failed);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_binds_pack_once),
      cmocka_unit_test(test_crossed_hooks_do_not_deadlock),
      cmocka_unit_test(test_hook_binding_its_own_constant_does_not_wait),
      cmocka_unit_test(test_fork_while_threads_use_a_cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
