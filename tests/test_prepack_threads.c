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
static int hook(void* resource, int position, PFValue value, int code,
                const PFAllocator* allocator, PFValue* out, int* out_code, int* is_packed) {
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
  t->managed.dl_tensor = (DLTensor){.data = t->data, .device = {kDLCPU, 0}, .ndim = 1,
                                    .dtype = {kDLFloat, 32, 1}, .shape = t->shape};
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
      cmocka_unit_test(test_fork_while_threads_use_a_cache),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
