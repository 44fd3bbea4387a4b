/* The global registry: register, override, look up, remove, list, flags.
 * Sealing is process-wide and permanent: it has its own binary,
 * test_registry_seal.c. Each test uses its own name prefix. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>

#include "support/pf_test.h"

/* A function that returns the int it was created with (resource). */
static PFFunctionHandle make_int_func(intptr_t value) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_return_resource_int, (void*)value, NULL, &f));
  return f;
}

/* Resource of a counted int function: the value and a counter. */
typedef struct {
  int64_t value;
  atomic_int fins;
} counted_int;

static int return_counted_int(PFValue* args, int* codes, int n, PFRetValueHandle ret,
                              void* resource) {
  (void)args;
  (void)codes;
  (void)n;
  PFValue v = {.v_int64 = ((counted_int*)resource)->value};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void counted_int_fin(void* resource) {
  atomic_fetch_add(&((counted_int*)resource)->fins, 1);
}

static PFFunctionHandle make_counted_int(counted_int* c, int64_t value) {
  c->value = value;
  atomic_init(&c->fins, 0);
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(return_counted_int, c, counted_int_fin, &f));
  return f;
}

static int64_t call_int(PFFunctionHandle f) {
  PFValue rv;
  int rc = -1;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  return rv.v_int64;
}

static int64_t call_global(const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncGetGlobal(name, &f));
  assert_non_null(f);
  int64_t v = call_int(f);
  assert_pf_ok(PFFuncFree(f));
  return v;
}

/* ---- register / override -------------------------------------------------- */

static void test_register_taken_name_fails(void** state) {
  (void)state;
  PFFunctionHandle a = make_int_func(1), b = make_int_func(2);
  assert_pf_ok(PFFuncRegisterGlobal("reg.taken", a, 0));
  assert_pf_error(PFFuncRegisterGlobal("reg.taken", b, 0), kPFErrKeyError, "PFFuncRegisterGlobal",
                  "'reg.taken'", "already registered");
  assert_int_equal(call_global("reg.taken"), 1); /* unchanged */
  /* The same function again is still a taken name. */
  assert_pf_error(PFFuncRegisterGlobal("reg.taken", a, 0), kPFErrKeyError, "'reg.taken'");
  assert_pf_ok(PFFuncRemoveGlobal("reg.taken"));
  assert_pf_ok(PFFuncFree(a));
  assert_pf_ok(PFFuncFree(b));
}

static void test_override_keeps_old_alive_for_holder(void** state) {
  (void)state;
  counted_int ca, cb;
  PFFunctionHandle a = make_counted_int(&ca, 10);
  PFFunctionHandle b = make_counted_int(&cb, 20);
  assert_pf_ok(PFFuncRegisterGlobal("reg.override", a, 0));
  assert_pf_ok(PFFuncFree(a));
  PFFunctionHandle held = NULL;
  assert_pf_ok(PFFuncGetGlobal("reg.override", &held));
  assert_ptr_equal(held, a);

  assert_pf_ok(PFFuncRegisterGlobal("reg.override", b, 1));
  assert_int_equal(call_global("reg.override"), 20);
  /* The old one is out of the registry but alive for its holder. */
  assert_int_equal(atomic_load(&ca.fins), 0);
  assert_int_equal(call_int(held), 10);
  assert_pf_ok(PFFuncFree(held));
  assert_int_equal(atomic_load(&ca.fins), 1);

  /* Overriding with the same function is harmless. */
  assert_pf_ok(PFFuncRegisterGlobal("reg.override", b, 1));
  assert_int_equal(call_global("reg.override"), 20);
  assert_pf_ok(PFFuncFree(b));
  assert_int_equal(atomic_load(&cb.fins), 0);
  assert_pf_ok(PFFuncRemoveGlobal("reg.override"));
  assert_int_equal(atomic_load(&cb.fins), 1);
}

static void test_override_on_free_name_registers(void** state) {
  (void)state;
  PFFunctionHandle a = make_int_func(5);
  assert_pf_ok(PFFuncRegisterGlobal("reg.override_new", a, 1));
  assert_int_equal(call_global("reg.override_new"), 5);
  assert_pf_ok(PFFuncRemoveGlobal("reg.override_new"));
  assert_pf_ok(PFFuncFree(a));
}

/* ---- lookup / remove ------------------------------------------------------ */

static void test_get_absent(void** state) {
  (void)state;
  PFFunctionHandle out = (PFFunctionHandle)(uintptr_t)0x1;
  assert_int_equal(PFFuncGetGlobal("reg.absent.name", &out), 0);
  assert_null(out);
}

static void test_remove_absent(void** state) {
  (void)state;
  assert_pf_error(PFFuncRemoveGlobal("reg.never.there"), kPFErrKeyError, "PFFuncRemoveGlobal",
                  "'reg.never.there'");
  /* Removed twice: the second is absent. */
  PFFunctionHandle a = make_int_func(1);
  assert_pf_ok(PFFuncRegisterGlobal("reg.twice", a, 0));
  assert_pf_ok(PFFuncRemoveGlobal("reg.twice"));
  assert_pf_error(PFFuncRemoveGlobal("reg.twice"), kPFErrKeyError, "'reg.twice'");
  assert_pf_ok(PFFuncFree(a));
}

static void test_lookup_returns_new_reference(void** state) {
  (void)state;
  counted_int c;
  PFFunctionHandle a = make_counted_int(&c, 3);
  assert_pf_ok(PFFuncRegisterGlobal("reg.newref", a, 0));
  assert_pf_ok(PFFuncFree(a));
  PFFunctionHandle h1 = NULL, h2 = NULL;
  assert_pf_ok(PFFuncGetGlobal("reg.newref", &h1));
  assert_pf_ok(PFFuncGetGlobal("reg.newref", &h2));
  assert_pf_ok(PFFuncRemoveGlobal("reg.newref"));
  assert_pf_ok(PFFuncFree(h1));
  assert_int_equal(atomic_load(&c.fins), 0);
  assert_int_equal(call_int(h2), 3);
  assert_pf_ok(PFFuncFree(h2));
  assert_int_equal(atomic_load(&c.fins), 1);
}

/* ---- names -------------------------------------------------------------- */

static void test_list_sorted_and_prefixed(void** state) {
  (void)state;
  const char* names[] = {"list.b", "list.a.z", "list.c", "list.a", "listx", "list.a.b"};
  const char* sorted[] = {"list.a", "list.a.b", "list.a.z", "list.b", "list.c"};
  PFFunctionHandle f = make_int_func(0);
  for (size_t i = 0; i < 6; ++i) assert_pf_ok(PFFuncRegisterGlobal(names[i], f, 0));

  int n = -1;
  const char** arr = NULL;
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("list.", &n, &arr));
  assert_int_equal(n, 5);
  for (int i = 0; i < n; ++i) assert_string_equal(arr[i], sorted[i]);

  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("list.a.", &n, &arr));
  assert_int_equal(n, 2);
  assert_string_equal(arr[0], "list.a.b");
  assert_string_equal(arr[1], "list.a.z");

  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("no.such.prefix.", &n, &arr));
  assert_int_equal(n, 0);

  /* The unfiltered list and NULL/"" prefixes contain everything, sorted. */
  int n_all = -1, n_null = -1, n_empty = -1;
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix(NULL, &n_null, &arr));
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("", &n_empty, &arr));
  assert_pf_ok(PFFuncListGlobalNames(&n_all, &arr));
  assert_int_equal(n_all, n_null);
  assert_int_equal(n_all, n_empty);
  assert_true(n_all >= 6);
  int found = 0;
  for (int i = 0; i < n_all; ++i) {
    if (i > 0) assert_true(strcmp(arr[i - 1], arr[i]) < 0);
    for (size_t k = 0; k < 6; ++k) found += strcmp(arr[i], names[k]) == 0;
  }
  assert_int_equal(found, 6);

  for (size_t i = 0; i < 6; ++i) assert_pf_ok(PFFuncRemoveGlobal(names[i]));
  assert_pf_ok(PFFuncFree(f));
}

static void test_list_storage_is_stable(void** state) {
  (void)state;
  PFFunctionHandle f = make_int_func(0);
  assert_pf_ok(PFFuncRegisterGlobal("stable.one", f, 0));
  assert_pf_ok(PFFuncRegisterGlobal("stable.two", f, 0));
  int n = 0;
  const char** arr = NULL;
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("stable.", &n, &arr));
  assert_int_equal(n, 2);
  /* Registry changes and other calls do not touch the thread's list. */
  assert_pf_ok(PFFuncRemoveGlobal("stable.one"));
  assert_pf_ok(PFFuncRegisterGlobal("stable.three", f, 0));
  assert_int_equal(call_global("stable.two"), 0);
  PFErrorSet("ValueError", "unrelated");
  assert_string_equal(arr[0], "stable.one");
  assert_string_equal(arr[1], "stable.two");
  assert_null(arr[2]); /* NULL-terminated as well as counted */
  /* The next list call on this thread replaces it. */
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("stable.", &n, &arr));
  assert_int_equal(n, 2);
  assert_string_equal(arr[0], "stable.three");
  assert_string_equal(arr[1], "stable.two");
  assert_pf_ok(PFFuncRemoveGlobal("stable.two"));
  assert_pf_ok(PFFuncRemoveGlobal("stable.three"));
  assert_pf_ok(PFFuncFree(f));
}

static void test_many_names(void** state) {
  (void)state;
  /* Enough names to make the table grow several times. */
  PFFunctionHandle f = make_int_func(0);
  char name[64];
  for (int i = 0; i < 2000; ++i) {
    snprintf(name, sizeof(name), "many.%05d", i);
    assert_pf_ok(PFFuncRegisterGlobal(name, f, 0));
  }
  int n = 0;
  const char** arr = NULL;
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("many.", &n, &arr));
  assert_int_equal(n, 2000);
  assert_string_equal(arr[0], "many.00000");
  assert_string_equal(arr[1999], "many.01999");
  for (int i = 0; i < 2000; ++i) {
    snprintf(name, sizeof(name), "many.%05d", i);
    assert_pf_ok(PFFuncRemoveGlobal(name));
  }
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("many.", &n, &arr));
  assert_int_equal(n, 0);
  assert_pf_ok(PFFuncFree(f));
}

static void test_name_length_limits(void** state) {
  (void)state;
  char* name = malloc(PF_NAME_MAX + 2);
  memset(name, 'n', PF_NAME_MAX + 1);
  name[PF_NAME_MAX] = '\0'; /* exactly PF_NAME_MAX bytes */
  PFFunctionHandle f = make_int_func(8);
  assert_pf_ok(PFFuncRegisterGlobal(name, f, 0));
  assert_int_equal(call_global(name), 8);
  assert_pf_ok(PFFuncRemoveGlobal(name));

  name[PF_NAME_MAX] = 'n';
  name[PF_NAME_MAX + 1] = '\0'; /* PF_NAME_MAX + 1 bytes */
  assert_pf_error(PFFuncRegisterGlobal(name, f, 0), kPFErrValueError, "PFFuncRegisterGlobal",
                  "'name'", "longer than 1024");
  PFFunctionHandle out = NULL;
  assert_pf_error(PFFuncGetGlobal(name, &out), kPFErrValueError, "PFFuncGetGlobal", "'name'");
  assert_pf_error(PFFuncRemoveGlobal(name), kPFErrValueError, "PFFuncRemoveGlobal", "'name'");
  free(name);
  assert_pf_ok(PFFuncFree(f));
}

/* ---- flags ------------------------------------------------------------- */

static void test_protected_names(void** state) {
  (void)state;
  counted_int c;
  PFFunctionHandle a = make_counted_int(&c, 1);
  PFFunctionHandle b = make_int_func(2);
  assert_pf_ok(PFFuncRegisterGlobalEx("prot.a", a, kPFRegisterProtected));
  assert_pf_error(PFFuncRegisterGlobalEx("prot.a", b, kPFRegisterOverride), kPFErrRuntimeError,
                  "PFFuncRegisterGlobalEx", "'prot.a'", "protected");
  assert_pf_error(PFFuncRegisterGlobal("prot.a", b, 1), kPFErrRuntimeError, "PFFuncRegisterGlobal",
                  "'prot.a'", "protected");
  assert_pf_error(PFFuncRemoveGlobal("prot.a"), kPFErrRuntimeError, "PFFuncRemoveGlobal",
                  "'prot.a'", "protected");
  assert_int_equal(call_global("prot.a"), 1);

  /* Overriding a plain name with the protected flag protects it. */
  assert_pf_ok(PFFuncRegisterGlobalEx("prot.b", b, 0));
  assert_pf_ok(PFFuncRegisterGlobalEx("prot.b", a, kPFRegisterOverride | kPFRegisterProtected));
  assert_int_equal(call_global("prot.b"), 1);
  assert_pf_error(PFFuncRemoveGlobal("prot.b"), kPFErrRuntimeError, "'prot.b'", "protected");

  /* The failed calls took no references that they kept. */
  assert_pf_ok(PFFuncFree(a));
  assert_pf_ok(PFFuncFree(b));
  assert_int_equal(atomic_load(&c.fins), 0); /* the registry holds it, forever */
}

static void test_unknown_flags(void** state) {
  (void)state;
  PFFunctionHandle a = make_int_func(1);
  assert_pf_error(PFFuncRegisterGlobalEx("flags.x", a, 4), kPFErrValueError,
                  "PFFuncRegisterGlobalEx", "'flags'", "0x4");
  assert_pf_error(PFFuncRegisterGlobalEx("flags.x", a, -1), kPFErrValueError, "'flags'");
  PFFunctionHandle out = (PFFunctionHandle)(uintptr_t)1;
  assert_pf_ok(PFFuncGetGlobal("flags.x", &out));
  assert_null(out);
  assert_pf_ok(PFFuncFree(a));
}

static void test_not_sealed_by_default(void** state) {
  (void)state;
  int sealed = -1;
  assert_pf_ok(PFRegistryIsSealed(&sealed));
  assert_int_equal(sealed, 0);
}

/* ---- thread exit ------------------------------------- */

/* A thread-specific key created after the registry's own: its destructor
 * runs after the registry has freed the exiting thread's name list, and
 * lists names (and records an error) again. The list block must not be
 * freed a second time, and the blocks made during the exit must be freed
 * too (ASan and LeakSanitizer check both). */
static pthread_key_t g_late_key;
static atomic_int g_late_runs, g_late_count;

static void late_destructor(void* p) {
  (void)p;
  int n = -1;
  const char** arr = NULL;
  if (PFFuncListGlobalNamesWithPrefix("exit.", &n, &arr) == 0 && n == 1 &&
      strcmp(arr[0], "exit.one") == 0)
    atomic_fetch_add(&g_late_count, 1);
  (void)PFFuncListGlobalNames(&n, &arr); /* replaces the block just made */
  PFErrorSet(kPFErrValueError, "recorded while the thread exits");
  atomic_fetch_add(&g_late_runs, 1);
}

static void* exiting_thread(void* p) {
  (void)p;
  int n = 0;
  const char** arr = NULL;
  if (PFFuncListGlobalNames(&n, &arr) != 0) return NULL; /* this thread's block */
  PFErrorSet(kPFErrKeyError, "this thread's error storage");
  pthread_setspecific(g_late_key, (void*)1);
  return NULL;
}

static void test_list_names_in_a_late_thread_exit_destructor(void** state) {
  (void)state;
  PFFunctionHandle f = make_int_func(1);
  assert_pf_ok(PFFuncRegisterGlobal("exit.one", f, 0));
  int n = 0;
  const char** arr = NULL;
  /* The registry's key exists before the test's (it is made at the first
   * list call in the process). */
  assert_pf_ok(PFFuncListGlobalNames(&n, &arr));
  assert_int_equal(pthread_key_create(&g_late_key, late_destructor), 0);
  for (int i = 0; i < 4; ++i) {
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, exiting_thread, NULL), 0);
    assert_int_equal(pthread_join(t, NULL), 0);
  }
  assert_int_equal(atomic_load(&g_late_runs), 4);
  assert_int_equal(atomic_load(&g_late_count), 4);
  assert_int_equal(pthread_key_delete(g_late_key), 0);
  assert_pf_ok(PFFuncRemoveGlobal("exit.one"));
  assert_pf_ok(PFFuncFree(f));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_not_sealed_by_default),
      cmocka_unit_test(test_register_taken_name_fails),
      cmocka_unit_test(test_override_keeps_old_alive_for_holder),
      cmocka_unit_test(test_override_on_free_name_registers),
      cmocka_unit_test(test_get_absent),
      cmocka_unit_test(test_remove_absent),
      cmocka_unit_test(test_lookup_returns_new_reference),
      cmocka_unit_test(test_list_sorted_and_prefixed),
      cmocka_unit_test(test_list_storage_is_stable),
      cmocka_unit_test(test_many_names),
      cmocka_unit_test(test_name_length_limits),
      cmocka_unit_test(test_protected_names),
      cmocka_unit_test(test_unknown_flags),
      cmocka_unit_test(test_list_names_in_a_late_thread_exit_destructor),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
