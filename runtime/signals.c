/* Signal checks: the host's checker, and the calls of it in progress. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "internal.h"

/* Calls of the checker in progress are counted, so that replacing it can
 * wait for the callers of the old one. Two counters alternate: a call
 * counts itself in the counter that g_checker_epoch selects, and a setter
 * flips the epoch after storing the new checker, then waits for the old
 * counter to drain. Calls that start after the flip load the new checker
 * and count elsewhere, so a busy thread cannot keep the setter waiting. */
static _Atomic(PFSignalChecker) g_checker;
static atomic_uint g_checker_epoch;
static atomic_long g_checker_calls[2];
/* This thread's own calls in each counter: a setter does not wait for
 * checker calls further up its own stack. */
static _Thread_local long t_checker_calls[2];

static pthread_once_t g_checker_fork_once = PTHREAD_ONCE_INIT;

/* In a child of fork only the forking thread lives on; the calls that
 * other threads had in progress never return there. */
static void checker_fork_child(void) {
  for (int i = 0; i < 2; ++i) atomic_store(&g_checker_calls[i], t_checker_calls[i]);
}

static void checker_fork_register(void) { (void)pthread_atfork(NULL, NULL, checker_fork_child); }

static void sleep_1ms(void) {
  struct timespec ts = {0, 1000000L};
  nanosleep(&ts, NULL);
}

int PFEnvSetSignalChecker(PFSignalChecker checker) {
  pthread_once(&g_checker_fork_once, checker_fork_register);
  atomic_store(&g_checker, checker);
  unsigned old = atomic_fetch_add(&g_checker_epoch, 1u) & 1u;
  while (atomic_load(&g_checker_calls[old]) > t_checker_calls[old]) sleep_1ms();
  return 0;
}

/* Counts a call of the checker in the counter of the current epoch, which
 * it returns. */
static unsigned checker_enter(void) {
  for (;;) {
    unsigned e = atomic_load(&g_checker_epoch) & 1u;
    atomic_fetch_add(&g_checker_calls[e], 1);
    if ((atomic_load(&g_checker_epoch) & 1u) == e) {
      ++t_checker_calls[e];
      return e;
    }
    atomic_fetch_sub(&g_checker_calls[e], 1); /* a setter flipped meanwhile */
  }
}

static void checker_leave(unsigned e) {
  --t_checker_calls[e];
  atomic_fetch_sub(&g_checker_calls[e], 1);
}

int PFEnvCheckSignals(void) {
  unsigned e = checker_enter();
  int rc = 0;
  PFSignalChecker c = atomic_load(&g_checker);
  if (c != NULL) {
    uint64_t gen = pf_hot.err_gen;
    if (c() != 0) {
      rc = -1;
      if (pf_hot.err_gen == gen)
        PF_ERROR(kPFErrRuntimeError,
                 "PFEnvCheckSignals: the host's signal checker failed without recording an "
                 "error");
    }
  }
  checker_leave(e);
  return rc;
}
