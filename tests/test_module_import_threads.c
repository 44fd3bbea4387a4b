/* Imports made at once from several threads: the cycle check and the
 * growth of an import list see every import that commits before them, so
 * threads that would close a cycle between them never both succeed, and
 * imports into one module from many threads are all kept. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"
#include "support/pf_test.h"

/* Under valgrind, which runs one thread at a time, races are rare anyway:
 * a few rounds check the paths for leaks. */
static int rounds(int full) { return getenv("PF_UNDER_VALGRIND") ? 20 : full; }

static PFModuleHandle empty_module(void) {
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromDescriptors(NULL, NULL, &m));
  return m;
}

/* ---- two imports that would close a cycle between them ---- */

/* Two threads import, in every round, PAIRS pairs of modules: one thread
 * each pair's second module into its first, the other its first into its
 * second. Both imports of a pair would make a cycle, so exactly one must
 * be refused. The threads live through all rounds and start each on a
 * shared counter, not a barrier, so that their imports overlap as often as
 * the machine allows; the modules' import lists have room (each imports a
 * shared module first), so nothing is allocated between an import's look
 * at the graph and its commit. */
#define PAIRS 16

typedef struct {
  PFModuleHandle m[PAIRS][2];
  atomic_int round;   /* the round the arms may start */
  atomic_int arrived; /* arms finished with the current round */
  int rounds;
  int rc[PAIRS][2];
  int cycle_error[PAIRS][2]; /* the failure was the cycle check's */
} pair_race;

typedef struct {
  pair_race* g;
  int side;
} pair_arm;

static void* import_arm(void* arg) {
  pair_arm* a = arg;
  pair_race* g = a->g;
  for (int r = 1; r <= g->rounds; ++r) {
    while (atomic_load(&g->round) != r) sched_yield();
    for (int k = 0; k < PAIRS; ++k) {
      int rc = PFModImport(g->m[k][a->side], g->m[k][1 - a->side]);
      g->rc[k][a->side] = rc;
      g->cycle_error[k][a->side] = rc != 0 && strstr(PFErrorGetMessage(), "import cycle") != NULL;
    }
    atomic_fetch_add(&g->arrived, 1);
  }
  return NULL;
}

static void test_concurrent_imports_never_close_a_cycle(void** state) {
  (void)state;
  static pair_race g;
  g.rounds = rounds(1000);
  atomic_init(&g.round, 0);
  atomic_init(&g.arrived, 0);
  pair_arm arms[2];
  pthread_t th[2];
  for (int i = 0; i < 2; ++i) {
    arms[i] = (pair_arm){&g, i};
    assert_int_equal(pthread_create(&th[i], NULL, import_arm, &arms[i]), 0);
  }
  PFModuleHandle base = empty_module();
  for (int r = 1; r <= g.rounds; ++r) {
    for (int k = 0; k < PAIRS; ++k) {
      for (int i = 0; i < 2; ++i) {
        g.m[k][i] = empty_module();
        assert_pf_ok(PFModImport(g.m[k][i], base));
      }
    }
    atomic_store(&g.arrived, 0);
    atomic_store(&g.round, r);
    while (atomic_load(&g.arrived) != 2) sched_yield();
    for (int k = 0; k < PAIRS; ++k) {
      int refused = 0;
      for (int i = 0; i < 2; ++i) {
        if (g.rc[k][i] != 0) {
          assert_true(g.cycle_error[k][i]);
          ++refused;
        }
      }
      if (refused != 1)
        fail_msg("round %d, pair %d: %d of 2 imports refused, expected 1", r, k, refused);
      for (int i = 0; i < 2; ++i) assert_pf_ok(PFModFree(g.m[k][i]));
    }
  }
  for (int i = 0; i < 2; ++i) assert_int_equal(pthread_join(th[i], NULL), 0);
  assert_pf_ok(PFModFree(base));
}

/* ---- one module's import list grown by many threads ---- */

#define WRITERS 4
#define PER_WRITER 40

static int named_answer(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n;
  PFValue v = {.v_int64 = (int64_t)(intptr_t)res};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* A module with one function, "w<writer>.<k>", that returns writer*1000+k. */
static PFModuleHandle leaf_module(int writer, int k) {
  char name[32];
  snprintf(name, sizeof(name), "w%d.%d", writer, k);
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(named_answer, (void*)(intptr_t)(writer * 1000 + k), NULL, &f) != 0 ||
      PFFuncSetInfo(f, name, NULL, NULL) != 0)
    return NULL;
  PFModuleHandle m = NULL;
  int rc = PFModCreateFromFunctions(name, &f, 1, &m);
  PFFuncFree(f);
  return rc == 0 ? m : NULL;
}

typedef struct {
  pthread_barrier_t* start;
  PFModuleHandle root;
  int writer;
  int failures;
} writer_job;

static void* import_leaves(void* arg) {
  writer_job* w = arg;
  pthread_barrier_wait(w->start);
  for (int k = 0; k < PER_WRITER; ++k) {
    PFModuleHandle leaf = leaf_module(w->writer, k);
    if (leaf == NULL || PFModImport(w->root, leaf) != 0) ++w->failures;
    PFModFree(leaf); /* the root holds it */
  }
  return NULL;
}

static void test_concurrent_imports_into_one_module_are_all_kept(void** state) {
  (void)state;
  pthread_barrier_t start;
  assert_int_equal(pthread_barrier_init(&start, NULL, WRITERS), 0);
  int n = rounds(20);
  for (int r = 0; r < n; ++r) {
    PFModuleHandle root = empty_module();
    writer_job jobs[WRITERS];
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; ++i) {
      jobs[i] = (writer_job){&start, root, i, 0};
      assert_int_equal(pthread_create(&th[i], NULL, import_leaves, &jobs[i]), 0);
    }
    for (int i = 0; i < WRITERS; ++i) {
      assert_int_equal(pthread_join(th[i], NULL), 0);
      assert_int_equal(jobs[i].failures, 0);
    }
    for (int i = 0; i < WRITERS; ++i) {
      for (int k = 0; k < PER_WRITER; ++k) {
        char name[32];
        snprintf(name, sizeof(name), "w%d.%d", i, k);
        PFFunctionHandle f = NULL;
        assert_pf_ok(PFModGetFunction(root, name, 1, &f));
        if (f == NULL) fail_msg("round %d: the import of '%s' was lost", r, name);
        PFValue v;
        int code;
        assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &v, &code));
        assert_int_equal(v.v_int64, i * 1000 + k);
        PFFuncFree(f);
      }
    }
    assert_pf_ok(PFModFree(root));
  }
  pthread_barrier_destroy(&start);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_concurrent_imports_never_close_a_cycle),
      cmocka_unit_test(test_concurrent_imports_into_one_module_are_all_kept),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
