/* Module import graphs at scale: shared dependencies are searched once
 * (the work of an import or a lookup is linear in the graph, not in its
 * paths), and long import chains are searched and released without
 * recursion. Modules here come from descriptor tables, so this test links
 * the static runtime and reads its visit counter. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "packedfunc/c_api.h"
#include "support/pf_test.h"
#include "../runtime/internal.h"

static int answer(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  PFValue v = {.v_int64 = 42};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static const PFFuncDescriptor k_deep = {
    PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorPacked, "graph.deep", answer, NULL, NULL, NULL};
static const PFFuncDescriptor* const k_deep_table[] = {&k_deep};

static PFModuleHandle empty_module(void) {
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromDescriptors(NULL, NULL, &m));
  return m;
}

static PFModuleHandle deep_module(void) {
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromDescriptors(k_deep_table, k_deep_table + 1, &m));
  return m;
}

/* ---- shared dependencies ---- */

/* Layers of two modules, each importing both modules of the layer below:
 * 2^LAYERS paths from the top to the bottom, 2 * LAYERS modules. Searching
 * every path took 16 s at 31 layers and doubled with each layer. */
#define LAYERS 48

static void test_shared_dependencies_are_searched_once(void** state) {
  (void)state;
  PFModuleHandle mods[LAYERS][2];
  mods[0][0] = deep_module();
  mods[0][1] = empty_module();
  uint64_t before = pf_mod_import_visits();
  for (int k = 1; k < LAYERS; ++k) {
    for (int j = 0; j < 2; ++j) {
      mods[k][j] = empty_module();
      /* Each import first checks that it closes no cycle. */
      assert_pf_ok(PFModImport(mods[k][j], mods[k - 1][0]));
      assert_pf_ok(PFModImport(mods[k][j], mods[k - 1][1]));
    }
  }
  /* Each cycle check visits at most the modules below: 2 per layer. */
  uint64_t imports = pf_mod_import_visits() - before;
  assert_true(imports <= (uint64_t)4 * LAYERS * LAYERS);

  /* A lookup from the top finds the bottom's function after visiting
   * each module at most once. */
  before = pf_mod_import_visits();
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(mods[LAYERS - 1][0], "graph.deep", 1, &f));
  assert_non_null(f);
  PFValue r;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &r, &rc));
  assert_int_equal(r.v_int64, 42);
  PFFuncFree(f);
  uint64_t visits = pf_mod_import_visits() - before;
  assert_true(visits <= 2 * LAYERS);

  /* A miss visits every module below once, and no more. */
  before = pf_mod_import_visits();
  f = (PFFunctionHandle)&r;
  assert_pf_ok(PFModGetFunction(mods[LAYERS - 1][1], "graph.absent", 1, &f));
  assert_null(f);
  assert_int_equal(pf_mod_import_visits() - before, 2 * (LAYERS - 1));

  /* Closing a cycle from the bottom is refused, with the same bound. */
  before = pf_mod_import_visits();
  assert_pf_error(PFModImport(mods[0][1], mods[LAYERS - 1][0]), kPFErrValueError, "PFModImport",
                  "import cycle");
  assert_true(pf_mod_import_visits() - before <= 2 * LAYERS);

  for (int k = 0; k < LAYERS; ++k)
    for (int j = 0; j < 2; ++j) assert_pf_ok(PFModFree(mods[k][j]));
}

/* One module importing many: the walk's stack grows past the part kept on
 * the C stack, and the search order stays depth-first in import order. */
static void test_wide_imports_keep_their_order(void** state) {
  (void)state;
  enum { WIDE = 300 };
  PFModuleHandle top = empty_module();
  PFModuleHandle mods[WIDE];
  for (int i = 0; i < WIDE; ++i) {
    mods[i] = i == WIDE - 1 ? deep_module() : empty_module();
    assert_pf_ok(PFModImport(top, mods[i]));
    if (i > 0) assert_pf_ok(PFModImport(mods[i - 1], mods[i])); /* more paths to the last */
  }
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(top, "graph.deep", 1, &f));
  assert_non_null(f);
  PFFuncFree(f);
  /* The first import is searched before the second, and its imports
   * before the second too: another "graph.deep" behind mods[0] wins. */
  PFModuleHandle first = deep_module();
  PFModuleHandle holder = empty_module();
  assert_pf_ok(PFModImport(holder, first));
  PFModuleHandle root = empty_module();
  assert_pf_ok(PFModImport(root, holder));
  assert_pf_ok(PFModImport(root, top));
  PFFunctionHandle own_of_first = NULL;
  assert_pf_ok(PFModGetFunction(first, "graph.deep", 0, &own_of_first));
  assert_pf_ok(PFModGetFunction(root, "graph.deep", 1, &f));
  assert_ptr_equal(f, own_of_first);
  PFFuncFree(f);
  PFFuncFree(own_of_first);
  PFModFree(root);
  PFModFree(holder);
  PFModFree(first);
  PFModFree(top);
  for (int i = 0; i < WIDE; ++i) PFModFree(mods[i]);
}

/* ---- long chains ---- */

/* Deep enough that one stack frame per module overflows the 1 MiB stack the
 * chain runs on (a recursive release needs more than 16 MiB here, under
 * every build flavour), and fast under ASan and valgrind. */
#define CHAIN 200000

typedef struct {
  int failed;
  int64_t answer;
  uint64_t visits;
} chain_result;

static void* run_chain(void* arg) {
  chain_result* res = arg;
  PFModuleHandle* mods = malloc(sizeof(*mods) * CHAIN);
  if (mods == NULL) {
    res->failed = 1;
    return NULL;
  }
  for (int i = 0; i < CHAIN; ++i) {
    int rc = i == CHAIN - 1 ? PFModLoadFromDescriptors(k_deep_table, k_deep_table + 1, &mods[i])
                            : PFModLoadFromDescriptors(NULL, NULL, &mods[i]);
    if (rc != 0) res->failed = 1;
  }
  /* Top-down, so that each cycle check finds an import-free module. */
  for (int i = 0; i + 1 < CHAIN && !res->failed; ++i)
    if (PFModImport(mods[i], mods[i + 1]) != 0) res->failed = 1;
  /* Only the head stays referenced: each module holds the next. */
  for (int i = 1; i < CHAIN; ++i) PFModFree(mods[i]);
  uint64_t before = pf_mod_import_visits();
  PFFunctionHandle f = NULL;
  if (PFModGetFunction(mods[0], "graph.deep", 1, &f) != 0 || f == NULL) res->failed = 1;
  res->visits = pf_mod_import_visits() - before;
  PFValue r = {.v_int64 = 0};
  int code;
  if (f != NULL && PFFuncCall(f, NULL, NULL, 0, &r, &code) == 0) res->answer = r.v_int64;
  PFFuncFree(f);
  /* Releases the whole chain. */
  PFModFree(mods[0]);
  free(mods);
  return NULL;
}

static void test_long_chain_is_searched_and_released_iteratively(void** state) {
  (void)state;
  pthread_attr_t attr;
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstacksize(&attr, 1 << 20), 0);
  chain_result res = {0, 0, 0};
  pthread_t t;
  assert_int_equal(pthread_create(&t, &attr, run_chain, &res), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  pthread_attr_destroy(&attr);
  assert_false(res.failed);
  assert_int_equal(res.answer, 42);
  assert_int_equal(res.visits, CHAIN - 1);
}

/* The deferred release is generic: a finalizer that drops the last
 * reference of another object, whose finalizer drops another, and so on,
 * also runs in constant stack, and every finalizer runs exactly once. */
static atomic_int g_chain_fins;

static void release_next(void* next) {
  atomic_fetch_add(&g_chain_fins, 1);
  PFObjectFree(next);
}

static void* run_boxed_chain(void* arg) {
  int* failed = arg;
  PFObjectHandle next = NULL;
  for (int i = 0; i < CHAIN; ++i) {
    PFObjectHandle o = NULL;
    if (PFObjectCreateBoxed(next, release_next, &o) != 0) {
      *failed = 1;
      break;
    }
    next = o;
  }
  PFObjectFree(next);
  return NULL;
}

static void test_finalizer_chain_is_released_iteratively(void** state) {
  (void)state;
  atomic_store(&g_chain_fins, 0);
  pthread_attr_t attr;
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstacksize(&attr, 1 << 20), 0);
  int failed = 0;
  pthread_t t;
  assert_int_equal(pthread_create(&t, &attr, run_boxed_chain, &failed), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  pthread_attr_destroy(&attr);
  assert_false(failed);
  assert_int_equal(atomic_load(&g_chain_fins), CHAIN);
}

/* A release inside a finalizer completes before the outer release returns:
 * the caller sees every finalizer it caused. */
static atomic_int g_inner_fins;

static void count_inner(void* p) {
  (void)p;
  atomic_fetch_add(&g_inner_fins, 1);
}

static void test_nested_release_finishes_before_returning(void** state) {
  (void)state;
  atomic_store(&g_inner_fins, 0);
  PFObjectHandle inner = NULL, outer = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, count_inner, &inner));
  assert_pf_ok(PFObjectCreateBoxed(inner, release_next, &outer));
  atomic_store(&g_chain_fins, 0);
  assert_pf_ok(PFObjectFree(outer));
  assert_int_equal(atomic_load(&g_chain_fins), 1);
  assert_int_equal(atomic_load(&g_inner_fins), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_dependencies_are_searched_once),
      cmocka_unit_test(test_wide_imports_keep_their_order),
      cmocka_unit_test(test_long_chain_is_searched_and_released_iteratively),
      cmocka_unit_test(test_finalizer_chain_is_released_iteratively),
      cmocka_unit_test(test_nested_release_finishes_before_returning),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
