/* fork() while other threads use the runtime.
 *
 * Several threads hammer the registry (register, look up, call, list,
 * remove) and a shared closure (calls that succeed and calls that fail, so
 * that the closure keeps and hands out errors), while the main thread forks
 * children. A child has only the thread that forked it, so any lock that
 * another thread held at that moment stays held in the child unless the
 * runtime's fork handlers took it first. Each child registers, looks up,
 * calls, lists and removes names, creates a function, and calls the
 * closure (success and failure), reports the result through a pipe and
 * ends. The parent waits for all of them with a deadline and kills
 * whatever is left: a child that deadlocked fails the test instead of
 * hanging it.
 *
 * Creating closures in a child is not exercised: libffi's own allocator
 * lock is outside packedfunc's reach. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/pf_fork_arena.h"
#include "support/pf_test.h"

#define N_THREADS 4
#define N_CHILDREN 50
#define DEADLINE_SECONDS 30

/* A child's result, reported through the pipe: which step failed. */
enum {
  CHILD_OK = 0,
  CHILD_CREATE = 10,
  CHILD_REGISTER,
  CHILD_LOOKUP,
  CHILD_CALL,
  CHILD_LIST,
  CHILD_REMOVE,
  CHILD_CLOSURE_OK,
  CHILD_CLOSURE_FAIL,
  CHILD_ERROR_KIND,
};

/* int64 x: x / 2 when x is even, else a ValueError. */
static int p_half(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || codes[0] != kPFInt) return PFErrorSetFormat(kPFErrTypeError, "half: bad arguments");
  if (args[0].v_int64 % 2 != 0)
    return PFErrorSetFormat(kPFErrValueError, "half: %lld is odd", (long long)args[0].v_int64);
  PFValue v = {.v_int64 = args[0].v_int64 / 2};
  int c = kPFInt;
  return PFCFuncSetReturn(ret, &v, &c, 1);
}

static PFFunctionHandle g_half;
static PFObjectHandle g_closure;
static int64_t (*g_half_c)(int64_t);
static atomic_int g_stop;
static atomic_long g_thread_ops, g_thread_errors;

static void* hammer(void* p) {
  int id = (int)(intptr_t)p;
  t_slow = 1;
  char name[64];
  for (long k = 0; !atomic_load_explicit(&g_stop, memory_order_relaxed); ++k) {
    snprintf(name, sizeof(name), "fork.t%d.%ld", id, k % 8);
    if (PFFuncRegisterGlobal(name, g_half, 1) != 0) atomic_fetch_add(&g_thread_errors, 1);
    for (int j = 0; j < 4; ++j) {
      PFFunctionHandle f = NULL;
      if (PFFuncGetGlobal(name, &f) != 0 || f == NULL) {
        atomic_fetch_add(&g_thread_errors, 1);
        continue;
      }
      PFValue a = {.v_int64 = 2 * k}, rv;
      int c = kPFInt, rc;
      if (PFFuncCall(f, &a, &c, 1, &rv, &rc) != 0 || rv.v_int64 != k)
        atomic_fetch_add(&g_thread_errors, 1);
      PFFuncFree(f);
    }
    int n = 0;
    const char** arr = NULL;
    if (PFFuncListGlobalNamesWithPrefix("fork.", &n, &arr) != 0)
      atomic_fetch_add(&g_thread_errors, 1);
    if (k % 2) (void)PFFuncRemoveGlobal(name);
    /* The closure: odd arguments fail and are kept; collect now and then.
     * While an error is kept, every call returns 0 at once. */
    for (int j = 0; j < 4; ++j) {
      int64_t x = k + j;
      int64_t r = g_half_c(x);
      if (r != 0 && (x % 2 != 0 || r != x / 2)) atomic_fetch_add(&g_thread_errors, 1);
      if (x % 2 != 0) (void)PFClosureCheckError(g_closure);
    }
    atomic_fetch_add_explicit(&g_thread_ops, 1, memory_order_relaxed);
  }
  return NULL;
}

/* Runs in the child, which has one thread; returns CHILD_OK or the step
 * that failed. */
static int child_run(int index) {
  char name[64];
  snprintf(name, sizeof(name), "fork.child.%d", index);
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(p_half, NULL, NULL, &f) != 0) return CHILD_CREATE;
  if (PFFuncRegisterGlobal(name, f, 0) != 0) return CHILD_REGISTER;
  PFFunctionHandle got = NULL;
  if (PFFuncGetGlobal(name, &got) != 0 || got != f) return CHILD_LOOKUP;
  PFValue a = {.v_int64 = 84}, rv;
  int c = kPFInt, rc;
  if (PFFuncCall(got, &a, &c, 1, &rv, &rc) != 0 || rv.v_int64 != 42) return CHILD_CALL;
  PFFuncFree(got);
  int n = 0;
  const char** arr = NULL;
  if (PFFuncListGlobalNamesWithPrefix("fork.child.", &n, &arr) != 0 || n != 1 ||
      strcmp(arr[0], name) != 0)
    return CHILD_LIST;
  if (PFFuncRemoveGlobal(name) != 0) return CHILD_REMOVE;
  PFFuncFree(f);
  /* A parent thread may have left an error in the closure: collect it. */
  (void)PFClosureCheckError(g_closure);
  if (g_half_c(10) != 5 || PFClosureCheckError(g_closure) != 0) return CHILD_CLOSURE_OK;
  if (g_half_c(11) != 0 || PFClosureCheckError(g_closure) != -1) return CHILD_CLOSURE_FAIL;
  if (strcmp(PFErrorGetKind(), kPFErrValueError) != 0) return CHILD_ERROR_KIND;
  return CHILD_OK;
}

/* The child reports {index, result} through the pipe, then kills itself:
 * no exit-time checker runs in it (valgrind's leak check would count the
 * memory that only the parent's other threads referenced as lost). */
static void child_main(int index, int report_fd) {
  pf_fork_arena_enter_child();
  unsigned char msg[2] = {(unsigned char)index, (unsigned char)child_run(index)};
  if (write(report_fd, msg, sizeof(msg)) != (ssize_t)sizeof(msg)) _exit(1);
  kill(getpid(), SIGKILL);
  _exit(1);
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static double now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void test_fork_while_threads_use_the_runtime(void** state) {
  (void)state;
  assert_pf_ok(PFFuncCreateFromCFunc(p_half, NULL, NULL, &g_half));
  void* fp = NULL;
  assert_pf_ok(PFFuncToCFunction(g_half, "int64(int64)", &g_closure, &fp));
  memcpy(&g_half_c, &fp, sizeof(fp));

  pthread_t th[N_THREADS];
  for (int i = 0; i < N_THREADS; ++i)
    assert_int_equal(pthread_create(&th[i], NULL, hammer, (void*)(intptr_t)i), 0);
  /* Let every thread get going before the first fork. */
  while (atomic_load(&g_thread_ops) < 100 * N_THREADS) sleep_us(1000);

  int report[2];
  assert_int_equal(pipe(report), 0);
  pid_t pids[N_CHILDREN];
  int forked = 0;
  for (int i = 0; i < N_CHILDREN; ++i) {
    long before = atomic_load(&g_thread_ops);
    pid_t pid = fork();
    if (pid == 0) child_main(i, report[1]);
    if (pid < 0) break;
    pids[forked++] = pid;
    /* The threads move on between forks. */
    while (atomic_load(&g_thread_ops) < before + 20) sleep_us(100);
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < N_THREADS; ++i) pthread_join(th[i], NULL);
  assert_int_equal(forked, N_CHILDREN);

  /* Wait for every child, up to the deadline; then kill the rest. */
  int status_of[N_CHILDREN];
  int done[N_CHILDREN] = {0};
  int remaining = forked;
  double deadline = now_seconds() + DEADLINE_SECONDS;
  while (remaining > 0 && now_seconds() < deadline) {
    for (int i = 0; i < forked; ++i) {
      if (done[i]) continue;
      int st = 0;
      pid_t r = waitpid(pids[i], &st, WNOHANG);
      if (r == pids[i]) {
        done[i] = 1;
        status_of[i] = st;
        --remaining;
      }
    }
    if (remaining > 0) sleep_us(10000);
  }
  int hung = 0, failed = 0;
  for (int i = 0; i < forked; ++i) {
    if (!done[i]) {
      kill(pids[i], SIGKILL);
      waitpid(pids[i], NULL, 0);
      ++hung;
    }
  }
  /* Every child that finished reported once, then died of its SIGKILL. */
  close(report[1]);
  int result_of[N_CHILDREN];
  for (int i = 0; i < N_CHILDREN; ++i) result_of[i] = -1;
  unsigned char msg[2];
  while (read(report[0], msg, sizeof(msg)) == (ssize_t)sizeof(msg))
    if (msg[0] < N_CHILDREN) result_of[msg[0]] = msg[1];
  close(report[0]);
  for (int i = 0; i < forked; ++i) {
    if (!done[i]) continue;
    int st = status_of[i];
    if (result_of[i] != CHILD_OK || !WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) {
      ++failed;
      print_message("child %d: result %d, %s %d\n", i, result_of[i],
                    WIFSIGNALED(st) ? "signal" : "exit status",
                    WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    }
  }
  if (hung || failed)
    fail_msg("%d of %d children hung (killed after %d s) and %d failed", hung, forked,
             DEADLINE_SECONDS, failed);
  assert_int_equal(atomic_load(&g_thread_errors), 0);

  /* The parent goes on working too. */
  assert_pf_ok(PFFuncRegisterGlobal("fork.parent", g_half, 0));
  PFFunctionHandle got = NULL;
  assert_pf_ok(PFFuncGetGlobal("fork.parent", &got));
  assert_ptr_equal(got, g_half);
  assert_pf_ok(PFFuncFree(got));
  int n = 0;
  const char** arr = NULL;
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("fork.", &n, &arr));
  for (int i = 0; i < n; ++i) assert_pf_ok(PFFuncRemoveGlobal(arr[i]));
  (void)PFClosureCheckError(g_closure);
  assert_pf_ok(PFObjectFree(g_closure));
  assert_pf_ok(PFFuncFree(g_half));
}

int main(void) {
  /* Before the runtime's first allocation. */
  if (pf_fork_arena_install() != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fork_while_threads_use_the_runtime),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
