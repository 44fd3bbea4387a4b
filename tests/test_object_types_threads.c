/* Object types and threads: types registered while other threads create
 * instances, read and write fields, look methods up and call them; one
 * description registered by many threads at once; the first uses of a
 * type racing each other; fork() while all of that goes on. Runs under
 * TSan too. */
#define _GNU_SOURCE /* usleep */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/pf_fork_arena.h"
#include "support/pf_test.h"

typedef struct {
  int64_t n;
  char* name;
} Box;

static int64_t box_bump(PFObjectHandle self, int64_t by) {
  void* d = NULL;
  PFObjectGetData(self, &d);
  return __atomic_add_fetch(&((Box*)d)->n, by, __ATOMIC_RELAXED);
}

static void box_init(PFObjectHandle self, int64_t n) {
  void* d = NULL;
  PFObjectGetData(self, &d);
  ((Box*)d)->n = n;
}

static const PFFieldDesc k_box_fields[] = {
    PF_FIELD(Box, n, "int64", kPFFieldWritable, NULL),
    PF_FIELD(Box, name, "str", kPFFieldWritable, NULL),
};

/* A description of a Box type under `key` (the methods name it). */
typedef struct {
  char key[32];
  char init_sig[64];
  char bump_sig[64];
  PFMethodDesc methods[2];
  PFObjectTypeDesc desc;
} box_desc;

static void make_box_desc(box_desc* b, const char* key) {
  snprintf(b->key, sizeof(b->key), "%s", key);
  snprintf(b->init_sig, sizeof(b->init_sig), "void(obj<%s>,int64)", key);
  snprintf(b->bump_sig, sizeof(b->bump_sig), "int64(obj<%s>,int64)", key);
  b->methods[0] = (PFMethodDesc)PF_METHOD_TYPED("__init__", box_init, b->init_sig, NULL);
  b->methods[1] = (PFMethodDesc)PF_METHOD_TYPED("bump", box_bump, b->bump_sig, NULL);
  b->desc = (PFObjectTypeDesc){PF_OBJECT_TYPE_DESC_ABI,
                               b->key,
                               NULL,
                               sizeof(Box),
                               NULL,
                               NULL,
                               k_box_fields,
                               2,
                               b->methods,
                               2};
}

static int under_valgrind(void) { return getenv("PF_UNDER_VALGRIND") != NULL; }

/* ---- registration while others use types ---- */

#define REGISTRARS 2
#define USERS 2
static atomic_int g_stop;
static atomic_int g_errors;
static uint32_t g_shared;

static void* registrar(void* arg) {
  int id = (int)(intptr_t)arg;
  int n = under_valgrind() ? 10 : 150;
  for (int i = 0; i < n; ++i) {
    char key[32];
    box_desc b;
    snprintf(key, sizeof(key), "th.r%d.T%d", id, i);
    make_box_desc(&b, key);
    uint32_t ix = 0;
    if (PFObjectTypeRegister(&b.desc, &ix) != 0) atomic_fetch_add(&g_errors, 1);
    /* Use it at once: the first use may race the users below. */
    PFObjectHandle o = NULL;
    if (PFObjectAlloc(ix, &o) != 0) atomic_fetch_add(&g_errors, 1);
    PFObjectFree(o);
  }
  return NULL;
}

static void* user(void* arg) {
  (void)arg;
  const PFFieldInfo* n_field = NULL;
  PFFunctionHandle ctor = NULL;
  if (PFObjectTypeGetField(g_shared, "n", &n_field) != 0 ||
      PFObjectTypeGetConstructor(g_shared, &ctor) != 0) {
    atomic_fetch_add(&g_errors, 1);
    return NULL;
  }
  unsigned seed = 1;
  while (!atomic_load(&g_stop)) {
    PFValue a = {.v_int64 = 1}, rv;
    int c = kPFInt, rc;
    if (PFFuncCall(ctor, &a, &c, 1, &rv, &rc) != 0) {
      atomic_fetch_add(&g_errors, 1);
      break;
    }
    PFObjectHandle o = rv.v_handle;
    PFFunctionHandle bump = NULL;
    PFValue by = {.v_int64 = 2};
    if (PFObjectGetMethod(o, "bump", &bump) != 0 || PFFuncCall(bump, &by, &c, 1, &rv, &rc) != 0 ||
        rv.v_int64 != 3)
      atomic_fetch_add(&g_errors, 1);
    PFFuncFree(bump);
    if (PFObjectSetField(o, n_field, (PFValue){.v_int64 = 7}, kPFInt) != 0 ||
        PFObjectGetField(o, n_field, &rv, &rc) != 0 || rv.v_int64 != 7)
      atomic_fetch_add(&g_errors, 1);
    if (PFObjectSetFieldByName(o, "name", (PFValue){.v_str = "x"}, kPFStr) != 0)
      atomic_fetch_add(&g_errors, 1);
    PFObjectFree(o);
    /* Types the registrars are adding: by key, and by index. */
    seed = seed * 1103515245u + 12345u;
    char key[32];
    snprintf(key, sizeof(key), "th.r%u.T%u", (seed >> 8) % REGISTRARS, (seed >> 12) % 150);
    uint32_t ix = 0;
    if (PFObjectTypeFind(key, &ix) != 0) atomic_fetch_add(&g_errors, 1);
    if (ix != 0) {
      const char* name = PFObjectTypeName(ix);
      if (name == NULL || strcmp(name, key) != 0) atomic_fetch_add(&g_errors, 1);
      PFFunctionHandle m = NULL;
      if (PFObjectTypeGetMethod(ix, "bump", &m) != 0) atomic_fetch_add(&g_errors, 1);
      PFFuncFree(m);
    }
  }
  PFFuncFree(ctor);
  return NULL;
}

static void test_register_while_others_use(void** state) {
  (void)state;
  box_desc b;
  make_box_desc(&b, "th.Shared");
  g_shared = 0;
  assert_pf_ok(PFObjectTypeRegister(&b.desc, &g_shared));
  atomic_store(&g_stop, 0);
  atomic_store(&g_errors, 0);
  pthread_t r[REGISTRARS], u[USERS];
  for (int i = 0; i < USERS; ++i) assert_int_equal(pthread_create(&u[i], NULL, user, NULL), 0);
  for (int i = 0; i < REGISTRARS; ++i)
    assert_int_equal(pthread_create(&r[i], NULL, registrar, (void*)(intptr_t)i), 0);
  for (int i = 0; i < REGISTRARS; ++i) pthread_join(r[i], NULL);
  atomic_store(&g_stop, 1);
  for (int i = 0; i < USERS; ++i) pthread_join(u[i], NULL);
  assert_int_equal(atomic_load(&g_errors), 0);
}

/* ---- one description, many registrations at once ---- */

#define SAME 4
static pthread_barrier_t g_barrier;
static uint32_t g_same_ix[SAME];
static box_desc g_same_desc;

static void* register_same(void* arg) {
  int i = (int)(intptr_t)arg;
  pthread_barrier_wait(&g_barrier);
  if (PFObjectTypeRegister(&g_same_desc.desc, &g_same_ix[i]) != 0) atomic_fetch_add(&g_errors, 1);
  /* And the first uses, at once. */
  PFFunctionHandle f = NULL;
  if (PFObjectTypeGetMethod(g_same_ix[i], "bump", &f) != 0) atomic_fetch_add(&g_errors, 1);
  PFFuncFree(f);
  return NULL;
}

static void test_same_description_at_once(void** state) {
  (void)state;
  int rounds = under_valgrind() ? 3 : 30;
  for (int k = 0; k < rounds; ++k) {
    char key[32];
    snprintf(key, sizeof(key), "th.same.T%d", k);
    make_box_desc(&g_same_desc, key);
    atomic_store(&g_errors, 0);
    pthread_barrier_init(&g_barrier, NULL, SAME);
    pthread_t t[SAME];
    for (int i = 0; i < SAME; ++i)
      assert_int_equal(pthread_create(&t[i], NULL, register_same, (void*)(intptr_t)i), 0);
    for (int i = 0; i < SAME; ++i) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&g_barrier);
    assert_int_equal(atomic_load(&g_errors), 0);
    for (int i = 1; i < SAME; ++i) assert_int_equal(g_same_ix[i], g_same_ix[0]);
  }
}

/* ---- fork ---- */

#define DEADLINE_SECONDS 20

static int wait_with_deadline(pid_t pid, int fd) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  int status = 0;
  while (waitpid(pid, &status, WNOHANG) != pid) {
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= DEADLINE_SECONDS) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      return -1;
    }
    usleep(1000);
  }
  char verdict = 0;
  return read(fd, &verdict, 1) == 1 && verdict == 'y' ? 0 : 1;
}

/* A child: registers a type of its own and uses it. */
static int child_works(int k) {
  char key[32];
  box_desc b;
  snprintf(key, sizeof(key), "th.child.T%d", k);
  make_box_desc(&b, key);
  uint32_t ix = 0;
  PFFunctionHandle ctor = NULL;
  PFValue a = {.v_int64 = 40}, rv;
  int c = kPFInt, rc;
  if (PFObjectTypeRegister(&b.desc, &ix) != 0 || PFObjectTypeGetConstructor(ix, &ctor) != 0 ||
      PFFuncCall(ctor, &a, &c, 1, &rv, &rc) != 0)
    return 0;
  PFFunctionHandle bump = NULL;
  PFValue two = {.v_int64 = 2};
  int ok = PFObjectGetMethod(rv.v_handle, "bump", &bump) == 0 &&
           PFFuncCall(bump, &two, &c, 1, &rv, &rc) == 0 && rv.v_int64 == 42;
  return ok;
}

static void test_fork_while_threads_register(void** state) {
  (void)state;
  int forks = under_valgrind() ? 2 : 8;
  box_desc b;
  make_box_desc(&b, "th.ForkShared");
  assert_pf_ok(PFObjectTypeRegister(&b.desc, &g_shared));
  atomic_store(&g_stop, 0);
  atomic_store(&g_errors, 0);
  pthread_t u[USERS];
  for (int i = 0; i < USERS; ++i) assert_int_equal(pthread_create(&u[i], NULL, user, NULL), 0);
  int hung = 0, failed = 0;
  for (int k = 0; k < forks && !hung; ++k) {
    usleep(2000);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      pf_fork_arena_enter_child(); /* no malloc in the child: see pf_fork_arena.h */
      char verdict = child_works(k) ? 'y' : 'n';
      if (write(fds[1], &verdict, 1) != 1) verdict = 'n';
      _exit(0);
    }
    close(fds[1]);
    int r = wait_with_deadline(pid, fds[0]);
    close(fds[0]);
    if (r < 0) hung++;
    else if (r > 0) failed++;
    /* The parent goes on registering too. */
    char key[32];
    box_desc pb;
    snprintf(key, sizeof(key), "th.parent.T%d", k);
    make_box_desc(&pb, key);
    uint32_t ix;
    assert_pf_ok(PFObjectTypeRegister(&pb.desc, &ix));
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < USERS; ++i) pthread_join(u[i], NULL);
  assert_int_equal(atomic_load(&g_errors), 0);
  if (hung || failed)
    fail_msg("a child hung (killed after %d s): %d; children that failed: %d", DEADLINE_SECONDS,
             hung, failed);
}

int main(void) {
  if (pf_fork_arena_install() != 0) return 1; /* before the runtime's first allocation */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_register_while_others_use),
      cmocka_unit_test(test_same_description_at_once),
      cmocka_unit_test(test_fork_while_threads_register),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
