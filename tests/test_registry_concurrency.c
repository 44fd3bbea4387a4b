/* Registry stress: threads register, override, look up, call and remove
 * the same and different names while calls are in flight. Every function
 * created is finalized exactly once, nothing leaks (LeakSanitizer), and
 * the run is clean under ThreadSanitizer. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>

#include "support/pf_test.h"

#define NTHREADS 8
#define ITERS 4000
#define NSHARED 4
#define NOWN 3
#define REC_MAGIC 0x5354524553534c49ULL

/* The resource of every function under test. */
typedef struct {
  uint64_t magic;
  int64_t id;
} rec;

static atomic_long g_created, g_finalized, g_calls, g_unexpected;
static atomic_long g_next_id = 1;
static char g_first_unexpected[256];
static atomic_int g_have_unexpected;

static void unexpected(const char* what) {
  atomic_fetch_add(&g_unexpected, 1);
  if (atomic_exchange(&g_have_unexpected, 1) == 0)
    snprintf(g_first_unexpected, sizeof(g_first_unexpected), "%s: %s", what, PFGetLastError());
}

static void rec_fin(void* p) {
  rec* r = p;
  if (r->magic != REC_MAGIC) unexpected("finalizer of a dead resource");
  r->magic = 0;
  free(r);
  atomic_fetch_add(&g_finalized, 1);
}

/* Returns its id; with an int argument 1, first makes a nested call to a
 * shared name (which may have been overridden or removed meanwhile). */
static int body(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  rec* r = res;
  if (r->magic != REC_MAGIC) return PFErrorSetFormat(kPFErrRuntimeError, "dead resource");
  if (n == 1 && codes[0] == kPFInt && args[0].v_int64 == 1) {
    char name[32];
    snprintf(name, sizeof(name), "conc.shared.%d", (int)(r->id % NSHARED));
    PFFunctionHandle g = NULL;
    if (PFFuncGetGlobal(name, &g) != 0) return -1;
    if (g != NULL) {
      PFValue rv;
      int rc;
      int st = PFFuncCall(g, NULL, NULL, 0, &rv, &rc);
      PFFuncFree(g);
      if (st != 0) return -1;
      if (rc != kPFInt || rv.v_int64 <= 0)
        return PFErrorSetFormat(kPFErrRuntimeError, "nested call returned a bad value");
    }
  }
  if (r->magic != REC_MAGIC) return PFErrorSetFormat(kPFErrRuntimeError, "resource died");
  PFValue v = {.v_int64 = r->id};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static PFFunctionHandle make_func(void) {
  rec* r = malloc(sizeof(*r));
  if (r == NULL) return NULL;
  r->magic = REC_MAGIC;
  r->id = atomic_fetch_add(&g_next_id, 1);
  PFFunctionHandle f = NULL;
  atomic_fetch_add(&g_created, 1);
  if (PFFuncCreateFromCFunc(body, r, rec_fin, &f) != 0) unexpected("create");
  return f;
}

static void call_checked(PFFunctionHandle f, int nested) {
  PFValue arg = {.v_int64 = nested}, rv;
  int code = kPFInt, rc;
  if (PFFuncCall(f, &arg, &code, 1, &rv, &rc) != 0 || rc != kPFInt || rv.v_int64 <= 0)
    unexpected("call");
  else atomic_fetch_add(&g_calls, 1);
}

static pthread_barrier_t g_start; /* so that the threads really overlap */

static void* worker(void* p) {
  int tid = (int)(intptr_t)p;
  pthread_barrier_wait(&g_start);
  unsigned seed = 12345u + (unsigned)tid * 7919u;
  char name[48];
  for (int it = 0; it < ITERS; ++it) {
    int op = rand_r(&seed) % 7;
    if (rand_r(&seed) % 2) snprintf(name, sizeof(name), "conc.shared.%d", rand_r(&seed) % NSHARED);
    else snprintf(name, sizeof(name), "conc.t%d.%d", tid, rand_r(&seed) % NOWN);
    switch (op) {
      case 0: { /* override */
        PFFunctionHandle f = make_func();
        if (PFFuncRegisterGlobal(name, f, 1) != 0) unexpected("override");
        PFFuncFree(f);
        break;
      }
      case 1: { /* register without override: a taken name is a KeyError */
        PFFunctionHandle f = make_func();
        if (PFFuncRegisterGlobal(name, f, 0) != 0 && strcmp(PFErrorGetKind(), "KeyError") != 0)
          unexpected("register");
        PFFuncFree(f);
        break;
      }
      case 2:
      case 3: { /* look up and call, maybe with a nested call */
        PFFunctionHandle f = NULL;
        if (PFFuncGetGlobal(name, &f) != 0) unexpected("lookup");
        if (f != NULL) {
          call_checked(f, op == 3);
          PFFuncFree(f);
        }
        break;
      }
      case 4: /* remove: an absent name is a KeyError */
        if (PFFuncRemoveGlobal(name) != 0 && strcmp(PFErrorGetKind(), "KeyError") != 0)
          unexpected("remove");
        break;
      case 5: { /* hold a function while it is overridden, then call it */
        PFFunctionHandle held = NULL;
        if (PFFuncGetGlobal(name, &held) != 0) unexpected("lookup");
        PFFunctionHandle f = make_func();
        if (PFFuncRegisterGlobal(name, f, 1) != 0) unexpected("override");
        PFFuncFree(f);
        if (held != NULL) {
          call_checked(held, 0);
          PFFuncFree(held);
        }
        break;
      }
      case 6: { /* list: sorted, every name under the prefix */
        int n = 0;
        const char** names = NULL;
        if (PFFuncListGlobalNamesWithPrefix("conc.", &n, &names) != 0) {
          unexpected("list");
          break;
        }
        for (int i = 1; i < n; ++i)
          if (strcmp(names[i - 1], names[i]) >= 0) unexpected("list order");
        for (int i = 0; i < n; ++i)
          if (strncmp(names[i], "conc.", 5) != 0) unexpected("list prefix");
        break;
      }
    }
  }
  return NULL;
}

static void test_stress(void** state) {
  (void)state;
  pthread_t threads[NTHREADS];
  assert_int_equal(pthread_barrier_init(&g_start, NULL, NTHREADS), 0);
  for (int i = 0; i < NTHREADS; ++i)
    assert_int_equal(pthread_create(&threads[i], NULL, worker, (void*)(intptr_t)i), 0);
  for (int i = 0; i < NTHREADS; ++i) assert_int_equal(pthread_join(threads[i], NULL), 0);
  pthread_barrier_destroy(&g_start);
  if (atomic_load(&g_unexpected) != 0)
    fail_msg("%ld unexpected results; first: %s", atomic_load(&g_unexpected), g_first_unexpected);
  assert_true(atomic_load(&g_calls) > NTHREADS * ITERS / 10);
  print_message("%ld functions created, %ld calls\n", atomic_load(&g_created),
                atomic_load(&g_calls));

  /* Drop what is left in the registry: then every function is gone. */
  int n = 0;
  const char** names = NULL;
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("conc.", &n, &names));
  char copy[NSHARED + NTHREADS * NOWN][48];
  assert_true(n <= NSHARED + NTHREADS * NOWN);
  for (int i = 0; i < n; ++i) snprintf(copy[i], sizeof(copy[i]), "%s", names[i]);
  for (int i = 0; i < n; ++i) assert_pf_ok(PFFuncRemoveGlobal(copy[i]));
  assert_true(atomic_load(&g_created) > NTHREADS * ITERS / 4);
  assert_int_equal(atomic_load(&g_finalized), atomic_load(&g_created));
}

/* Many threads hammer one name: lookups and calls race with overrides
 * and removals of that very name. */
static atomic_int g_stop;

static void* hammer_caller(void* p) {
  (void)p;
  while (!atomic_load(&g_stop)) {
    PFFunctionHandle f = NULL;
    if (PFFuncGetGlobal("conc.hot", &f) != 0) unexpected("lookup");
    if (f != NULL) {
      call_checked(f, 0);
      PFFuncFree(f);
    }
  }
  return NULL;
}

static void test_one_hot_name(void** state) {
  (void)state;
  long created0 = atomic_load(&g_created);
  pthread_t callers[3];
  atomic_store(&g_stop, 0);
  for (int i = 0; i < 3; ++i)
    assert_int_equal(pthread_create(&callers[i], NULL, hammer_caller, NULL), 0);
  for (int i = 0; i < 300; ++i) {
    PFFunctionHandle f = make_func();
    assert_pf_ok(PFFuncRegisterGlobal("conc.hot", f, 1));
    PFFuncFree(f);
    if (i % 5 == 4) assert_pf_ok(PFFuncRemoveGlobal("conc.hot"));
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < 3; ++i) assert_int_equal(pthread_join(callers[i], NULL), 0);
  PFFunctionHandle left = NULL;
  assert_pf_ok(PFFuncGetGlobal("conc.hot", &left));
  if (left != NULL) {
    PFFuncFree(left);
    assert_pf_ok(PFFuncRemoveGlobal("conc.hot"));
  }
  if (atomic_load(&g_unexpected) != 0)
    fail_msg("%ld unexpected results; first: %s", atomic_load(&g_unexpected), g_first_unexpected);
  assert_int_equal(atomic_load(&g_created) - created0, 300);
  assert_int_equal(atomic_load(&g_finalized), atomic_load(&g_created));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_stress),
      cmocka_unit_test(test_one_hot_name),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
