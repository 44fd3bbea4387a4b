/* Allocation-failure injection for one test file, in the manner of
 * tests/test_alloc_fault.c: pf_fault_install() (first thing in main, before
 * the runtime allocates) routes the runtime's allocations through a
 * counting allocator; pf_fault_walk() then runs a workload once per
 * allocation it makes, failing that allocation, and checks each run:
 *   - the workload reports the failure as -1 with kind MemoryError, or
 *     succeeds (an allocation whose failure it survives);
 *   - nothing leaks: the allocator's count of live blocks is back where it
 *     was after a clean run;
 *   - the same workload then runs clean.
 * The workload cleans up after itself whatever step failed, and returns 0
 * or the -1 of the first step that failed (with the thread's error).
 * Header-only; include after cmocka.h and support/pf_test.h. */
#ifndef PACKEDFUNC_TESTS_SUPPORT_PF_FAULT_H_
#define PACKEDFUNC_TESTS_SUPPORT_PF_FAULT_H_

#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>

static atomic_long pf_fault_calls_;
static atomic_long pf_fault_at_; /* 0: disarmed */
static atomic_int pf_fault_fired_;
static atomic_long pf_fault_live_;

static inline int pf_fault_should_fail_(void) {
  long at = atomic_load(&pf_fault_at_);
  if (at == 0) return 0;
  if (atomic_fetch_add(&pf_fault_calls_, 1) + 1 != at) return 0;
  atomic_store(&pf_fault_fired_, 1);
  return 1;
}

static inline void* pf_fault_malloc_(size_t n, void* ud) {
  (void)ud;
  if (pf_fault_should_fail_()) return NULL;
  void* p = malloc(n);
  if (p) atomic_fetch_add(&pf_fault_live_, 1);
  return p;
}

static inline void* pf_fault_realloc_(void* p, size_t n, void* ud) {
  (void)ud;
  if (pf_fault_should_fail_()) return NULL;
  void* q = realloc(p, n);
  if (q && p == NULL) atomic_fetch_add(&pf_fault_live_, 1);
  return q;
}

static inline void pf_fault_free_(void* p, void* ud) {
  (void)ud;
  if (p) atomic_fetch_sub(&pf_fault_live_, 1);
  free(p);
}

/* Installs the counting allocator; returns 0, or -1 after printing why. */
static inline int pf_fault_install(void) {
  PFAllocator a = {pf_fault_malloc_, pf_fault_realloc_, pf_fault_free_, NULL};
  if (PFSetAllocator(&a) != 0) {
    fprintf(stderr, "PFSetAllocator failed: %s\n", PFGetLastError());
    return -1;
  }
  return 0;
}

static inline void pf_fault_arm(long n) {
  atomic_store(&pf_fault_calls_, 0);
  atomic_store(&pf_fault_fired_, 0);
  atomic_store(&pf_fault_at_, n);
}

static inline void pf_fault_disarm(void) { atomic_store(&pf_fault_at_, 0); }

/* Counts the runtime's allocations (failing none) from pf_fault_count_start
 * to pf_fault_count_end, which returns their number: what a call costs,
 * for a test that bounds it. */
static inline void pf_fault_count_start(void) { pf_fault_arm(LONG_MAX); }
static inline long pf_fault_count_end(void) {
  long n = atomic_load(&pf_fault_calls_);
  pf_fault_disarm();
  return n;
}

/* Runs `work` failing its 1st, 2nd, ... allocation until a run makes no
 * more; returns how many allocation points it walked. Fails the test on a
 * wrong error kind, a leak, or a clean run that fails. */
static inline long pf_fault_walk(int (*work)(void), const char* name) {
  if (work() != 0) fail_msg("%s: clean run failed: %s", name, PFGetLastError());
  /* The thread's traceback buffer, which a failing run may create, exists
   * from here on: it is not a leak of the workload. */
  char line[200];
  memset(line, 'x', sizeof(line) - 1);
  line[sizeof(line) - 1] = '\0';
  PFErrorSet(kPFErrValueError, "warm-up");
  PFErrorAppendTraceback(line);
  PFErrorClear();
  long baseline = atomic_load(&pf_fault_live_);
  long n;
  for (n = 1;; ++n) {
    pf_fault_arm(n);
    int rc = work();
    pf_fault_disarm();
    int fired = atomic_load(&pf_fault_fired_);
    if (rc != 0) {
      if (!fired)
        fail_msg("%s: N=%ld failed without a refused allocation: %s", name, n, PFGetLastError());
      if (strcmp(PFErrorGetKind(), kPFErrMemoryError) != 0)
        fail_msg("%s: N=%ld failed with %s (expected a MemoryError)", name, n, PFGetLastError());
    }
    PFErrorClear();
    if (work() != 0) fail_msg("%s: clean run after N=%ld failed: %s", name, n, PFGetLastError());
    long live = atomic_load(&pf_fault_live_);
    if (live != baseline)
      fail_msg("%s: after failing allocation %ld, %ld runtime blocks live, expected %ld", name, n,
               live, baseline);
    if (!fired) break;
  }
  return n - 1;
}

#endif /* PACKEDFUNC_TESTS_SUPPORT_PF_FAULT_H_ */
