/* The runtime's allocator: installing one, the rules around it, and
 * allocation failures injected through it. The tests run in order: the
 * first ones install the allocator before the runtime allocates. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "support/pf_test.h"

/* A counting allocator that can be told to fail the n-th allocation. */
typedef struct {
  atomic_long mallocs, reallocs, frees;
  atomic_long countdown; /* > 0: the allocation that brings it to 0 fails */
  atomic_long failures;
} counting_state;

static counting_state g_state;

static int should_fail(counting_state* st) {
  long c = atomic_load(&st->countdown);
  if (c <= 0) return 0;
  if (atomic_fetch_sub(&st->countdown, 1) == 1) {
    atomic_fetch_add(&st->failures, 1);
    return 1;
  }
  return 0;
}

static void* counting_malloc(size_t n, void* ud) {
  counting_state* st = ud;
  if (should_fail(st)) return NULL;
  atomic_fetch_add(&st->mallocs, 1);
  return malloc(n);
}

static void* counting_realloc(void* p, size_t n, void* ud) {
  counting_state* st = ud;
  if (should_fail(st)) return NULL;
  atomic_fetch_add(&st->reallocs, 1);
  return realloc(p, n);
}

static void counting_free(void* p, void* ud) {
  counting_state* st = ud;
  if (p != NULL) atomic_fetch_add(&st->frees, 1);
  free(p);
}

/* ---- installing ---------------------------------------------------------- */

static void test_incomplete_allocator_is_type_error(void** state) {
  (void)state;
  PFAllocator a = {counting_malloc, counting_realloc, NULL, &g_state};
  assert_pf_error(PFSetAllocator(&a), kPFErrTypeError, "PFSetAllocator", "'allocator'");
  /* No traceback line either: it would be the first allocation (the rule's
   * exception, at pf_error_static in runtime/internal.h). */
  assert_string_equal(PFErrorGetTraceback(), "");
  a = (PFAllocator){NULL, counting_realloc, counting_free, &g_state};
  assert_pf_error(PFSetAllocator(&a), kPFErrTypeError, "PFSetAllocator", "'allocator'");
  a = (PFAllocator){counting_malloc, NULL, counting_free, &g_state};
  assert_pf_error(PFSetAllocator(&a), kPFErrTypeError, "PFSetAllocator", "'allocator'");
}

static void test_install_before_first_allocation(void** state) {
  (void)state;
  /* The failed calls above did not count as allocating. */
  assert_pf_ok(PFSetAllocator(NULL)); /* the default, still allowed */
  PFAllocator a = {counting_malloc, counting_realloc, counting_free, &g_state};
  assert_pf_ok(PFSetAllocator(&a));
  a.malloc_fn = NULL; /* the allocator was copied */
  long before = atomic_load(&g_state.mallocs);
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  assert_true(atomic_load(&g_state.mallocs) > before);
  long frees = atomic_load(&g_state.frees);
  assert_pf_ok(PFFuncFree(f));
  assert_true(atomic_load(&g_state.frees) > frees);
  void* p = PFMemAlloc(100);
  assert_non_null(p);
  p = PFMemRealloc(p, 1000);
  assert_non_null(p);
  assert_true(atomic_load(&g_state.reallocs) >= 1);
  PFMemFree(p);
}

static void test_set_after_use_is_runtime_error(void** state) {
  (void)state;
  PFAllocator a = {counting_malloc, counting_realloc, counting_free, &g_state};
  assert_pf_error(PFSetAllocator(&a), kPFErrRuntimeError, "PFSetAllocator", "already allocated");
  assert_pf_error(PFSetAllocator(NULL), kPFErrRuntimeError, "PFSetAllocator");
  /* The incomplete check still comes first. */
  a.free_fn = NULL;
  assert_pf_error(PFSetAllocator(&a), kPFErrTypeError, "'allocator'");
}

static void assert_begins(const char* s, const char* prefix) {
  if (strncmp(s, prefix, strlen(prefix)) != 0)
    fail_msg("\"%s\" does not begin with \"%s\"", s, prefix);
}

static void test_mem_alloc_failure(void** state) {
  (void)state;
  atomic_store(&g_state.countdown, 1);
  assert_null(PFMemAlloc(16));
  assert_string_equal(PFErrorGetKind(), "MemoryError");
  /* The message names the entry point that ran out, without allocating,
   * and the traceback the place that found out. */
  assert_string_equal(PFErrorGetMessage(), "PFMemAlloc: out of memory");
  assert_begins(PFErrorGetTraceback(), "  File \"runtime/alloc.c\", line ");
  void* p = PFMemAlloc(16);
  assert_non_null(p);
  atomic_store(&g_state.countdown, 1);
  assert_null(PFMemRealloc(p, 4096));
  assert_string_equal(PFErrorGetKind(), "MemoryError");
  assert_string_equal(PFErrorGetMessage(), "PFMemRealloc: out of memory");
  /* A function that runs out names itself too. */
  PFFunctionHandle f = NULL;
  atomic_store(&g_state.countdown, 1);
  assert_pf_error(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f), kPFErrMemoryError,
                  "PFFuncCreateFromCFunc: out of memory");
  assert_begins(PFErrorGetTraceback(), "  File \"runtime/function.c\", line ");
  PFMemFree(p); /* a failed realloc leaves the block as it was */
}

/* ---- failure injection ----------------------------------------------------- */

/* Asserts that a failed step failed for lack of memory. */
#define STEP(expr)                                                                 \
  do {                                                                             \
    if ((expr) != 0) {                                                             \
      if (strcmp(PFErrorGetKind(), "MemoryError") != 0)                            \
        fail_msg("%s failed with '%s', not MemoryError", #expr, PFGetLastError()); \
      failed = 1;                                                                  \
    }                                                                              \
  } while (0)

static int long_string(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)res;
  char buf[300];
  memset(buf, 'w', sizeof(buf) - 1);
  buf[sizeof(buf) - 1] = '\0';
  PFValue v = {.v_str = buf};
  int code = kPFStr;
  if (PFCFuncSetReturn(ret, &v, &code, 1) != 0) return -1;
  /* Errors recorded inside a call allocate too. */
  PFErrorSet("ValueError", "a handled error inside the call");
  PFErrorAppendTraceback("  a frame");
  return 0;
}

/* One pass of a scenario that touches most allocation sites; the
 * `fail_at`-th allocation fails. Returns 1 when nothing failed. */
static int scenario(long fail_at) {
  atomic_int fins = 0;
  int failed = 0;
  atomic_store(&g_state.failures, 0);
  atomic_store(&g_state.countdown, fail_at);

  PFFunctionHandle f = NULL;
  int created = PFFuncCreateFromCFunc(long_string, &fins, pf_test_count_fin, &f) == 0;
  if (!created) {
    STEP(-1);
    atomic_store(&g_state.countdown, 0);
    assert_int_equal(atomic_load(&fins), 1); /* the finalizer ran at once */
    return 0;
  }
  int registered = PFFuncRegisterGlobal("alloc.scenario", f, 0) == 0;
  if (!registered) STEP(-1);
  PFFunctionHandle g = NULL;
  STEP(PFFuncGetGlobal("alloc.scenario", &g));
  if (g != NULL) {
    PFValue rv;
    int rc = kPFNull;
    int st = PFFuncCall(g, NULL, NULL, 0, &rv, &rc);
    STEP(st);
    if (st == 0) {
      assert_int_equal(rc, kPFStr);
      assert_int_equal(strlen(rv.v_str), 299);
    }
    PFFuncFree(g);
  }
  STEP(PFFuncSetInfo(f, "alloc.scenario", "str()", "returns a long string"));
  int n = 0;
  const char** names = NULL;
  STEP(PFFuncListGlobalNamesWithPrefix("alloc.", &n, &names));
  PFObjectHandle boxed = NULL;
  atomic_int box_fins = 0;
  STEP(PFObjectCreateBoxed(&box_fins, pf_test_count_fin, &boxed));
  PFObjectFree(boxed);
  assert_int_equal(atomic_load(&box_fins), 1);
  PFErrorSet("KeyError", "an error with a message");
  PFErrorAppendTraceback("  line");
  (void)PFGetLastError();
  atomic_store(&g_state.countdown, 0);

  if (registered) assert_pf_ok(PFFuncRemoveGlobal("alloc.scenario"));
  PFFunctionHandle absent = NULL;
  assert_pf_ok(PFFuncGetGlobal("alloc.scenario", &absent));
  assert_null(absent);
  assert_int_equal(atomic_load(&fins), 0);
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(atomic_load(&fins), 1);
  return !failed && atomic_load(&g_state.failures) == 0;
}

static void test_each_allocation_failing_in_turn(void** state) {
  (void)state;
  /* Warm up this thread's storage, then fail the 1st, 2nd, ... allocation
   * until a pass sees no failure at all. */
  assert_true(scenario(0));
  long k = 1;
  for (; k < 200; ++k) {
    if (scenario(k)) break;
  }
  assert_true(k > 3);   /* the scenario did reach several allocations */
  assert_true(k < 200); /* and then ran clean */
}

/* Many registrations, so that the registry's table grows under failures. */
static void test_registry_growth_under_failures(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  char name[64];
  for (long k = 1; k < 400; k += 7) {
    int ok[300];
    int registered = 0;
    atomic_store(&g_state.countdown, k);
    for (int i = 0; i < 300; ++i) {
      snprintf(name, sizeof(name), "grow.%03d", i);
      ok[i] = PFFuncRegisterGlobal(name, f, 0) == 0;
      if (!ok[i]) assert_string_equal(PFErrorGetKind(), "MemoryError");
      registered += ok[i];
    }
    atomic_store(&g_state.countdown, 0);
    int n = 0;
    const char** names = NULL;
    assert_pf_ok(PFFuncListGlobalNamesWithPrefix("grow.", &n, &names));
    assert_int_equal(n, registered);
    for (int i = 0; i < 300; ++i) {
      snprintf(name, sizeof(name), "grow.%03d", i);
      PFFunctionHandle g = NULL;
      assert_pf_ok(PFFuncGetGlobal(name, &g));
      assert_int_equal(g != NULL, ok[i]);
      PFFuncFree(g);
      if (ok[i]) assert_pf_ok(PFFuncRemoveGlobal(name));
    }
  }
  assert_pf_ok(PFFuncFree(f));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_incomplete_allocator_is_type_error),
      cmocka_unit_test(test_install_before_first_allocation),
      cmocka_unit_test(test_set_after_use_is_runtime_error),
      cmocka_unit_test(test_mem_alloc_failure),
      cmocka_unit_test(test_each_allocation_failing_in_turn),
      cmocka_unit_test(test_registry_growth_under_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
