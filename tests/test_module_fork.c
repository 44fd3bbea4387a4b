/* fork() while other threads import and look up modules: the child must
 * find the module locks usable. Each child imports and looks up, reports
 * through a pipe and _exits; the parent waits with a deadline and kills a
 * child that hangs, so that a deadlock fails the test instead of stalling
 * it. (The child's exit status is not its verdict: under valgrind it is the
 * leak check's, and the child inherits objects that only the threads it
 * did not inherit pointed to.) */
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

#include "packedfunc/c_api.h"
#include "support/pf_test.h"

static int answer(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  PFValue v = {.v_int64 = 42};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static const PFFuncDescriptor k_fn = {
    PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorPacked, "fork.answer", answer, NULL, NULL, NULL};
static const PFFuncDescriptor* const k_table[] = {&k_fn};

/* A chain long enough that a lookup through it holds the import lock for a
 * good part of each thread's time. */
#define CHAIN 200
#define THREADS 2
#define FORKS 12
/* Under valgrind, which runs one thread at a time and checks each child's
 * leaks at its exit, a shorter chain and fewer children keep the run to
 * seconds; the sanitizer runs do the full count. */
#define CHAIN_VALGRIND 20
#define FORKS_VALGRIND 2
/* Generous: a healthy child finishes in milliseconds, even under valgrind. */
#define DEADLINE_SECONDS 20

static PFModuleHandle g_chain[CHAIN];
static int g_chain_len = CHAIN;
static atomic_int g_stop;

static void* busy(void* arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    PFFunctionHandle f = NULL;
    PFModGetFunction(g_chain[0], "fork.answer", 1, &f); /* walks the whole chain */
    PFFuncFree(f);
    PFModGetFunction(g_chain[0], "fork.absent", 1, &f);
    /* Imports too: a fresh pair, then released. */
    PFModuleHandle a = NULL, b = NULL;
    if (PFModLoadFromDescriptors(NULL, NULL, &a) == 0 &&
        PFModLoadFromDescriptors(NULL, NULL, &b) == 0) {
      PFModImport(a, b);
      PFModImport(a, g_chain[g_chain_len / 2]);
    }
    PFModFree(a);
    PFModFree(b);
  }
  return NULL;
}

/* Waits for `pid` up to the deadline, then reads its one-byte verdict from
 * `fd`: 0 for success, 1 for a failure, -1 when it had to be killed. */
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

static void test_fork_while_threads_import(void** state) {
  (void)state;
  int under_valgrind = getenv("PF_UNDER_VALGRIND") != NULL;
  int forks = under_valgrind ? FORKS_VALGRIND : FORKS;
  g_chain_len = under_valgrind ? CHAIN_VALGRIND : CHAIN;
  for (int i = 0; i < g_chain_len; ++i)
    assert_pf_ok(i == g_chain_len - 1 ? PFModLoadFromDescriptors(k_table, k_table + 1, &g_chain[i])
                                      : PFModLoadFromDescriptors(NULL, NULL, &g_chain[i]));
  for (int i = 0; i + 1 < g_chain_len; ++i) assert_pf_ok(PFModImport(g_chain[i], g_chain[i + 1]));
  /* Modules for the children to import: made before, so that the child
   * only imports and looks up. */
  PFModuleHandle mine[FORKS];
  for (int i = 0; i < FORKS; ++i) assert_pf_ok(PFModLoadFromDescriptors(NULL, NULL, &mine[i]));

  atomic_store(&g_stop, 0);
  pthread_t threads[THREADS];
  for (int i = 0; i < THREADS; ++i)
    assert_int_equal(pthread_create(&threads[i], NULL, busy, NULL), 0);
  int hung = 0, failed = 0;
  for (int k = 0; k < forks && !hung; ++k) { /* one hang is enough to fail */
    usleep(2000);                            /* let the threads get into the locks */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      PFFunctionHandle f = NULL;
      int ok = PFModImport(mine[k], g_chain[0]) == 0 &&
               PFModGetFunction(mine[k], "fork.answer", 1, &f) == 0 && f != NULL;
      char verdict = ok ? 'y' : 'n';
      if (write(fds[1], &verdict, 1) != 1) verdict = 'n';
      _exit(0);
    }
    close(fds[1]);
    int r = wait_with_deadline(pid, fds[0]);
    close(fds[0]);
    if (r < 0) hung++;
    else if (r > 0) failed++;
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < FORKS; ++i) PFModFree(mine[i]);
  for (int i = 0; i < g_chain_len; ++i) PFModFree(g_chain[i]);
  if (hung || failed)
    fail_msg("a child hung (killed after %d s): %d; children that failed: %d", DEADLINE_SECONDS,
             hung, failed);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fork_while_threads_import),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
