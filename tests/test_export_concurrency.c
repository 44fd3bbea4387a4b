/* PFModExportGlobal is all or nothing, also as other threads see it: a
 * failing export never shows any of its names, even for a moment. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>

#include "support/pf_test.h"

static int answer(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)res;
  PFValue v = {.v_int64 = 42};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static const PFFuncDescriptor k_aa = {
    PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorPacked, "aa", answer, NULL, NULL, NULL};
static const PFFuncDescriptor k_mm = {
    PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorPacked, "mm", answer, NULL, NULL, NULL};
static const PFFuncDescriptor k_zz = {
    PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorPacked, "zz", answer, NULL, NULL, NULL};
static const PFFuncDescriptor* const k_table[] = {&k_aa, &k_mm, &k_zz};

static atomic_int g_done;
static atomic_int g_seen;

static void* watcher(void* arg) {
  (void)arg;
  while (!atomic_load(&g_done)) {
    PFFunctionHandle f = NULL;
    if (PFFuncGetGlobal("expc.aa", &f) != 0 || f != NULL) atomic_fetch_add(&g_seen, 1);
    PFFuncFree(f);
    f = NULL;
    if (PFFuncGetGlobal("expc.mm", &f) != 0 || f != NULL) atomic_fetch_add(&g_seen, 1);
    PFFuncFree(f);
  }
  return NULL;
}

/* "expc.zz" is protected, so an overriding export of aa, mm, zz fails on
 * its last name; aa and mm must never be visible. */
static void test_failed_export_is_never_seen(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromDescriptors(k_table, k_table + 3, &m));
  PFFunctionHandle prot = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(answer, NULL, NULL, &prot));
  assert_pf_ok(PFFuncRegisterGlobalEx("expc.zz", prot, kPFRegisterProtected));
  PFFuncFree(prot);

  pthread_t th[2];
  for (int i = 0; i < 2; ++i) assert_int_equal(pthread_create(&th[i], NULL, watcher, NULL), 0);
  for (int i = 0; i < 3000; ++i) {
    assert_pf_error(PFModExportGlobal(m, "expc.", kPFRegisterOverride), kPFErrRuntimeError,
                    "expc.zz", "protected", "nothing from the module was exported");
  }
  atomic_store(&g_done, 1);
  for (int i = 0; i < 2; ++i) pthread_join(th[i], NULL);
  assert_int_equal(atomic_load(&g_seen), 0);

  /* And the registry is as it was. */
  int n = 0;
  const char** names = NULL;
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("expc.", &n, &names));
  assert_int_equal(n, 1);
  assert_string_equal(names[0], "expc.zz");
  assert_pf_ok(PFModFree(m));
}

/* A successful export shows every name at once, with the flags asked for. */
static void test_export_protects_and_overrides(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromDescriptors(k_table, k_table + 3, &m));
  PFFunctionHandle old = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(answer, NULL, NULL, &old));
  assert_pf_ok(PFFuncRegisterGlobal("expd.mm", old, 0));
  assert_pf_error(PFModExportGlobal(m, "expd.", 0), kPFErrKeyError, "expd.mm");
  assert_pf_ok(PFModExportGlobal(m, "expd.", kPFRegisterOverride | kPFRegisterProtected));
  PFFunctionHandle now = NULL;
  assert_pf_ok(PFFuncGetGlobal("expd.mm", &now));
  assert_ptr_not_equal(now, old);
  PFFuncFree(now);
  PFFuncFree(old);
  const char* const names[] = {"expd.aa", "expd.mm", "expd.zz"};
  for (int i = 0; i < 3; ++i)
    assert_pf_error(PFFuncRemoveGlobal(names[i]), kPFErrRuntimeError, "protected");
  /* An over-long prefix blames the prefix. */
  char prefix[PF_NAME_MAX + 2];
  memset(prefix, 'p', sizeof(prefix) - 1);
  prefix[sizeof(prefix) - 1] = '\0';
  assert_pf_error(PFModExportGlobal(m, prefix, 0), kPFErrValueError, "PFModExportGlobal",
                  "argument 'prefix'");
  assert_pf_ok(PFModFree(m));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_failed_export_is_never_seen),
      cmocka_unit_test(test_export_protects_and_overrides),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
