/* The registry's errors and the host's allocator: recording an error
 * allocates through the allocator, which is host code, and no host code
 * runs while the registry's lock is held. The allocator installed here
 * calls back into the registry whenever it runs (as a host's allocator
 * may: a tracking allocator that looks a function up, a Python allocator
 * that runs other threads' code). An error recorded under the registry's
 * write lock would make that call wait for the lock its own thread holds:
 * an alarm ends the process then, so that the test fails instead of
 * hanging. The allocator is installed before the first allocation, so the
 * test has a process of its own; sealing, at the end, is permanent too. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "support/pf_test.h"

/* How long one case may take before the process is ended as hung. */
#define HANG_SECONDS 10

static atomic_int g_armed;          /* the allocator calls the registry */
static atomic_long g_reentries;     /* how often it did */
static _Thread_local int tl_inside; /* the registry call's own allocations pass */

/* Looks a name up and lists the names, from inside the allocator. */
static void call_registry(void) {
  if (!atomic_load(&g_armed) || tl_inside) return;
  tl_inside = 1;
  PFFunctionHandle f = NULL;
  if (PFFuncGetGlobal("alloc.present", &f) == 0 && f != NULL) PFFuncFree(f);
  int n = 0;
  const char** names = NULL;
  (void)PFFuncListGlobalNamesWithPrefix("alloc.", &n, &names);
  atomic_fetch_add(&g_reentries, 1);
  tl_inside = 0;
}

static void* reentrant_malloc(size_t n, void* ud) {
  (void)ud;
  call_registry();
  return malloc(n);
}

static void* reentrant_realloc(void* p, size_t n, void* ud) {
  (void)ud;
  call_registry();
  return realloc(p, n);
}

static void reentrant_free(void* p, void* ud) {
  (void)ud;
  free(p);
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] =
      "test_registry_alloc: hung: the allocator, called while the registry recorded an "
      "error, waited for the registry's lock (an error recorded under the lock)\n";
  ssize_t rc = write(2, msg, sizeof msg - 1);
  (void)rc;
  _exit(1);
}

/* Runs one refused call with the allocator calling back into the registry:
 * it must return its error, and the error must have gone through the
 * allocator (else the test proves nothing). */
#define REFUSED(call, ...)                            \
  do {                                                \
    long before_ = atomic_load(&g_reentries);         \
    atomic_store(&g_armed, 1);                        \
    alarm(HANG_SECONDS);                              \
    int rc_ = (call);                                 \
    alarm(0);                                         \
    atomic_store(&g_armed, 0);                        \
    assert_pf_error(rc_, __VA_ARGS__);                \
    assert_true(atomic_load(&g_reentries) > before_); \
  } while (0)

static int setup(void** state) {
  (void)state;
  PFAllocator a = {reentrant_malloc, reentrant_realloc, reentrant_free, NULL};
  if (PFSetAllocator(&a) != 0) return -1;
  signal(SIGALRM, on_alarm);
  return 0;
}

static PFFunctionHandle named(const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  assert_pf_ok(PFFuncSetInfo(f, name, NULL, NULL));
  return f;
}

static void test_register_and_remove_errors(void** state) {
  (void)state;
  PFFunctionHandle f = named("present");
  assert_pf_ok(PFFuncRegisterGlobal("alloc.present", f, 0));
  assert_pf_ok(PFFuncRegisterGlobalEx("alloc.protected", f, kPFRegisterProtected));

  REFUSED(PFFuncRegisterGlobal("alloc.present", f, 0), kPFErrKeyError, "PFFuncRegisterGlobal",
          "already registered", "'alloc.present'");
  REFUSED(PFFuncRegisterGlobal("alloc.protected", f, 1), kPFErrRuntimeError, "PFFuncRegisterGlobal",
          "protected", "'alloc.protected'");
  REFUSED(PFFuncRemoveGlobal("alloc.absent"), kPFErrKeyError, "PFFuncRemoveGlobal",
          "'alloc.absent'");
  REFUSED(PFFuncRemoveGlobal("alloc.protected"), kPFErrRuntimeError, "PFFuncRemoveGlobal",
          "protected", "'alloc.protected'");
  /* The errors carry their place, recorded after the lock too. */
  assert_non_null(strstr(PFErrorGetTraceback(), "registry.c"));
  assert_pf_ok(PFFuncFree(f));
}

static void test_export_errors(void** state) {
  (void)state;
  PFFunctionHandle fs[2] = {named("present"), named("fresh")};
  PFModuleHandle mod = NULL;
  assert_pf_ok(PFModCreateFromFunctions("alloc-test", fs, 2, &mod));
  REFUSED(PFModExportGlobal(mod, "alloc.", 0), kPFErrKeyError, "PFModExportGlobal",
          "'alloc.present'", "nothing from the module");
  PFFunctionHandle absent = NULL;
  assert_pf_ok(PFFuncGetGlobal("alloc.fresh", &absent));
  assert_null(absent);
  /* Under another prefix the same module exports whole. */
  assert_pf_ok(PFModExportGlobal(mod, "alloc.ok.", 0));
  PFFunctionHandle got = NULL;
  assert_pf_ok(PFFuncGetGlobal("alloc.ok.fresh", &got));
  assert_non_null(got);
  assert_pf_ok(PFFuncFree(got));

  PFFunctionHandle p = named("protected");
  PFModuleHandle pmod = NULL;
  assert_pf_ok(PFModCreateFromFunctions("alloc-test-protected", &p, 1, &pmod));
  REFUSED(PFModExportGlobal(pmod, "alloc.", kPFRegisterOverride), kPFErrRuntimeError,
          "PFModExportGlobal", "'alloc.protected'", "protected");
  assert_pf_ok(PFModFree(pmod));
  assert_pf_ok(PFFuncFree(p));
  assert_pf_ok(PFModFree(mod));
  assert_pf_ok(PFFuncFree(fs[0]));
  assert_pf_ok(PFFuncFree(fs[1]));
}

/* Last: sealing cannot be undone. */
static void test_sealed_errors(void** state) {
  (void)state;
  assert_pf_ok(PFRegistrySeal());
  PFFunctionHandle f = named("sealed");
  REFUSED(PFFuncRegisterGlobal("alloc.sealed", f, 0), kPFErrRuntimeError, "PFFuncRegisterGlobal",
          "sealed", "'alloc.sealed'");
  REFUSED(PFFuncRemoveGlobal("alloc.present"), kPFErrRuntimeError, "PFFuncRemoveGlobal", "sealed",
          "'alloc.present'");
  PFModuleHandle mod = NULL;
  assert_pf_ok(PFModCreateFromFunctions("alloc-test-sealed", &f, 1, &mod));
  REFUSED(PFModExportGlobal(mod, "alloc.", 0), kPFErrRuntimeError, "PFModExportGlobal", "sealed",
          "'alloc.sealed'");
  assert_pf_ok(PFModFree(mod));
  assert_pf_ok(PFFuncFree(f));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_register_and_remove_errors),
      cmocka_unit_test(test_export_errors),
      cmocka_unit_test(test_sealed_errors),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
