/* Soak: several threads run a long random mix of registry, call and object
 * operations on a shared set of names and handles, then the test checks
 * invariants that any lost update, stale lookup or double release breaks:
 *   - a name always resolves to a function registered under that name;
 *   - every function's finalizer ran exactly once (a second run would also
 *     be a use-after-free that ASan reports), after all names are removed;
 *   - each thread's error stays its own while others record theirs, and
 *     survives re-raising it with its own strings and finalizers that run
 *     after a failure;
 *   - results of typed calls, closures and nested callbacks are right.
 * PF_SOAK_OPS sets the number of operations in all (default 100000, the
 * short form that `make test` runs under ASan and TSan; `make soak` runs a
 * million). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/pf_test.h"

#define N_THREADS 6
#define N_NAMES 24
#define ID_SCALE 1000000

/* ---- functions with counted, once-only finalizers ------------------------- */

static atomic_long g_created, g_finalized, g_double_fin;

typedef struct {
  int64_t id; /* name index * ID_SCALE + serial */
  atomic_int runs;
} soak_res;

static void res_fin(void* p) {
  soak_res* r = p;
  if (atomic_fetch_add(&r->runs, 1) != 0) atomic_fetch_add(&g_double_fin, 1);
  atomic_fetch_add(&g_finalized, 1);
  free(r);
}

static int p_id(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n;
  PFValue v = {.v_int64 = ((soak_res*)res)->id};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* Calls its first argument (a function) with its second; a nested call
 * into a callback, as a host's callback would be. */
static int p_apply(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || c[0] != kPFFuncHandle)
    return PFErrorSetFormat(kPFErrTypeError, "apply: expected (function, value)");
  PFValue rv;
  int rc;
  if (PFFuncCall(a[0].v_handle, &a[1], &c[1], 1, &rv, &rc) != 0) return -1;
  int st = PFCFuncSetReturn(ret, &rv, &rc, 1);
  if (rc == kPFFuncHandle || rc == kPFObjectHandle || rc == kPFModuleHandle)
    PFObjectFree(rv.v_handle);
  return st;
}

static int p_fail(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)c, (void)n, (void)ret, (void)res;
  return PFErrorSetFormat(kPFErrIndexError, "soak failure %lld", (long long)a[0].v_int64);
}

/* A boxed object's finalizer that records errors of its own. */
static void doomed_fin(void* p) {
  (void)p;
  PFFuncRemoveGlobal("soak.no.such.name"); /* KeyError */
  PFErrorAppendTraceback("in doomed_fin");
}

/* Sets a result whose finalizer fails, then fails: the caller must get
 * this error, not the finalizer's. */
static int p_fail_doomed(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)c, (void)n, (void)res;
  if (pf_test_return_boxed(ret, doomed_fin) != 0) return -1;
  return PFErrorSetFormat(kPFErrIndexError, "soak doomed %lld", (long long)a[0].v_int64);
}

static int p_echo_str(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || c[0] != kPFStr) return PFErrorSetFormat(kPFErrTypeError, "echo_str: want str");
  PFValue v = {.v_str = a[0].v_str};
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static int64_t t_mul(int64_t a, int64_t b) { return a * b; }

/* ---- shared state ------------------------------------------------------------ */

static char g_names[N_NAMES][32];
static atomic_long g_serial;
static PFFunctionHandle g_apply, g_fail, g_fail_doomed, g_typed, g_echo_str;
static PFObjectHandle g_closure, g_boxed;
static int64_t (*g_closure_fn)(int64_t);
static atomic_long g_failures; /* invariant violations seen by workers */
static long g_ops_per_thread;

static void violation(const char* what, long long a, long long b) {
  fprintf(stderr, "soak: %s (%lld vs %lld): %s\n", what, a, b, PFGetLastError());
  atomic_fetch_add(&g_failures, 1);
}

static PFFunctionHandle make_id_func(int name_index) {
  soak_res* r = malloc(sizeof(*r));
  if (r == NULL) return NULL;
  r->id = (int64_t)name_index * ID_SCALE + atomic_fetch_add(&g_serial, 1) % ID_SCALE;
  atomic_init(&r->runs, 0);
  atomic_fetch_add(&g_created, 1);
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(p_id, r, res_fin, &f) != 0) return NULL; /* res_fin ran */
  return f;
}

static uint64_t next_rand(uint64_t* s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Calls f() and checks it answers for name i. */
static void check_id_call(PFFunctionHandle f, int i) {
  PFValue rv;
  int rc;
  if (PFFuncCall(f, NULL, NULL, 0, &rv, &rc) != 0 || rc != kPFInt) {
    violation("call of a looked-up function failed", rc, kPFInt);
    return;
  }
  if (rv.v_int64 / ID_SCALE != i)
    violation("name resolved to another name's function", rv.v_int64 / ID_SCALE, i);
}

static void* worker(void* arg) {
  uint64_t seed = 0x9e3779b97f4a7c15ull * ((uint64_t)(intptr_t)arg + 1);
  char text[64];
  for (long op = 0; op < g_ops_per_thread; ++op) {
    uint64_t r = next_rand(&seed);
    int i = (int)((r >> 8) % N_NAMES);
    const char* name = g_names[i];
    switch (r % 16) {
      case 0:
      case 1: { /* register, or override */
        PFFunctionHandle f = make_id_func(i);
        if (f == NULL) {
          violation("create failed", 0, 0);
          break;
        }
        int st = PFFuncRegisterGlobal(name, f, (int)((r >> 20) & 1));
        if (st != 0 && strcmp(PFErrorGetKind(), kPFErrKeyError) != 0)
          violation("register failed other than KeyError", st, 0);
        PFFuncFree(f);
        break;
      }
      case 2: { /* remove */
        int st = PFFuncRemoveGlobal(name);
        if (st != 0 && strcmp(PFErrorGetKind(), kPFErrKeyError) != 0)
          violation("remove failed other than KeyError", st, 0);
        break;
      }
      case 3:
      case 4:
      case 5:
      case 6: { /* look up and call */
        PFFunctionHandle f = NULL;
        if (PFFuncGetGlobal(name, &f) != 0) {
          violation("lookup failed", 0, 0);
          break;
        }
        if (f != NULL) {
          check_id_call(f, i);
          PFFuncFree(f);
        }
        break;
      }
      case 7: { /* a callback: apply(f, x) calls f inside a call */
        PFFunctionHandle f = NULL;
        if (PFFuncGetGlobal(name, &f) != 0 || f == NULL) break;
        PFValue a[2] = {{.v_handle = f}, {.v_int64 = 5}};
        int c[2] = {kPFFuncHandle, kPFInt}, rc;
        PFValue rv;
        if (PFFuncCall(g_apply, a, c, 2, &rv, &rc) != 0 || rc != kPFInt)
          violation("apply failed", rc, kPFInt);
        else if (rv.v_int64 / ID_SCALE != i)
          violation("apply returned another name's result", rv.v_int64 / ID_SCALE, i);
        PFFuncFree(f);
        break;
      }
      case 8:
      case 9: { /* typed call */
        int64_t x = (int64_t)(r >> 40), y = (int64_t)((r >> 12) & 0xffff);
        PFValue a[2] = {{.v_int64 = x}, {.v_int64 = y}}, rv;
        int c[2] = {kPFInt, kPFInt}, rc;
        if (PFFuncCall(g_typed, a, c, 2, &rv, &rc) != 0 || rv.v_int64 != x * y)
          violation("typed mul wrong", rv.v_int64, x * y);
        break;
      }
      case 10: { /* closure from several threads at once */
        int64_t x = (int64_t)((r >> 16) & 0xfffff);
        int64_t got = g_closure_fn(x);
        if (got != x * 3) violation("closure result wrong", got, x * 3);
        break;
      }
      case 11: { /* thread-local errors and return storage */
        PFValue a = {.v_int64 = (int64_t)op}, rv;
        int c = kPFInt, rc;
        if (PFFuncCall(g_fail, &a, &c, 1, &rv, &rc) != -1) {
          violation("fail succeeded", 0, 0);
          break;
        }
        char want[64];
        snprintf(want, sizeof(want), "soak failure %ld", op);
        if (strcmp(PFErrorGetKind(), kPFErrIndexError) != 0 ||
            strcmp(PFErrorGetMessage(), want) != 0)
          violation("thread's error was changed", op, 0);
        /* Re-raising with the thread's own strings changes nothing. */
        PFErrorAppendTraceback(PFErrorGetMessage());
        PFErrorAppendTraceback(PFErrorGetTraceback());
        PFErrorSetFormat(PFErrorGetKind(), "%s", PFErrorGetMessage());
        if (strcmp(PFErrorGetKind(), kPFErrIndexError) != 0 ||
            strcmp(PFErrorGetMessage(), want) != 0 || PFErrorGetTraceback()[0] != '\0')
          violation("re-raising the thread's own error changed it", op, 0);
        /* A finalizer run after the callee failed leaves its error alone. */
        if (PFFuncCall(g_fail_doomed, &a, &c, 1, &rv, &rc) != -1) {
          violation("fail_doomed succeeded", 0, 0);
          break;
        }
        snprintf(want, sizeof(want), "soak doomed %ld", op);
        if (strcmp(PFErrorGetKind(), kPFErrIndexError) != 0 ||
            strcmp(PFErrorGetMessage(), want) != 0 || PFErrorGetTraceback()[0] != '\0')
          violation("a finalizer replaced the callee's error", op, 0);
        snprintf(text, sizeof(text), "thread %d op %ld", (int)(intptr_t)arg, op);
        PFValue s = {.v_str = text};
        c = kPFStr;
        if (PFFuncCall(g_echo_str, &s, &c, 1, &rv, &rc) != 0 || rc != kPFStr ||
            strcmp(rv.v_str, text) != 0)
          violation("string result wrong", rc, kPFStr);
        break;
      }
      case 12: { /* list names */
        int n = 0;
        const char** names = NULL;
        if (PFFuncListGlobalNamesWithPrefix("soak.", &n, &names) != 0 || n > N_NAMES) {
          violation("list failed", n, N_NAMES);
          break;
        }
        for (int k = 1; k < n; ++k)
          if (strcmp(names[k - 1], names[k]) >= 0) violation("list not sorted", k, n);
        break;
      }
      case 13: { /* shared object references */
        if (PFObjectRetain(g_boxed) != 0) {
          violation("retain failed", 0, 0);
          break;
        }
        void* p = NULL;
        if (PFObjectGetBoxedPayload(g_boxed, &p) != 0 || p != (void*)&g_serial)
          violation("payload wrong", 0, 0);
        PFObjectFree(g_boxed);
        break;
      }
      case 14: { /* metadata on a fresh function, freed at once */
        PFFunctionHandle f = make_id_func(i);
        if (f == NULL) break;
        if (PFFuncSetInfo(f, name, NULL, "soak") != 0) violation("set info failed", 0, 0);
        const char* got = NULL;
        PFFuncGetInfo(f, &got, NULL, NULL);
        if (got == NULL || strcmp(got, name) != 0) violation("info name wrong", 0, 0);
        PFFuncFree(f);
        break;
      }
      default: { /* a typed function made and dropped while others call */
        PFFunctionHandle f = NULL;
        if (PFFuncCreateFromTyped((void*)t_mul, "int64(int64,int64)", &f) != 0) {
          violation("typed create failed", 0, 0);
          break;
        }
        PFValue a[2] = {{.v_int64 = 6}, {.v_int64 = 7}}, rv;
        int c[2] = {kPFInt, kPFInt}, rc;
        if (PFFuncCall(f, a, c, 2, &rv, &rc) != 0 || rv.v_int64 != 42)
          violation("fresh typed call wrong", rv.v_int64, 42);
        PFFuncFree(f);
        break;
      }
    }
  }
  return NULL;
}

static int64_t triple(int64_t x) { return x * 3; }

static void test_soak(void** state) {
  (void)state;
  long total = 100000;
  const char* env = getenv("PF_SOAK_OPS");
  if (env != NULL && atol(env) > 0) total = atol(env);
  g_ops_per_thread = total / N_THREADS;
  for (int i = 0; i < N_NAMES; ++i) snprintf(g_names[i], sizeof(g_names[i]), "soak.fn%02d", i);

  assert_pf_ok(PFFuncCreateFromCFunc(p_apply, NULL, NULL, &g_apply));
  assert_pf_ok(PFFuncCreateFromCFunc(p_fail, NULL, NULL, &g_fail));
  assert_pf_ok(PFFuncCreateFromCFunc(p_fail_doomed, NULL, NULL, &g_fail_doomed));
  assert_pf_ok(PFFuncCreateFromCFunc(p_echo_str, NULL, NULL, &g_echo_str));
  assert_pf_ok(PFFuncCreateFromTyped((void*)t_mul, "int64(int64,int64)", &g_typed));
  PFFunctionHandle tr = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)triple, "int64(int64)", &tr));
  void* fn = NULL;
  assert_pf_ok(PFFuncToCFunction(tr, "int64(int64)", &g_closure, &fn));
  assert_pf_ok(PFFuncFree(tr)); /* the closure holds it */
  memcpy(&g_closure_fn, &fn, sizeof(fn));
  assert_pf_ok(PFObjectCreateBoxed(&g_serial, NULL, &g_boxed));

  pthread_t th[N_THREADS];
  for (intptr_t t = 0; t < N_THREADS; ++t)
    assert_int_equal(pthread_create(&th[t], NULL, worker, (void*)t), 0);
  for (int t = 0; t < N_THREADS; ++t) assert_int_equal(pthread_join(th[t], NULL), 0);
  assert_int_equal(atomic_load(&g_failures), 0);

  /* Every name still registered resolves to its own function. */
  for (int i = 0; i < N_NAMES; ++i) {
    PFFunctionHandle f = NULL;
    assert_pf_ok(PFFuncGetGlobal(g_names[i], &f));
    if (f != NULL) {
      check_id_call(f, i);
      assert_pf_ok(PFFuncFree(f));
      assert_pf_ok(PFFuncRemoveGlobal(g_names[i]));
    }
  }
  assert_int_equal(atomic_load(&g_failures), 0);
  int n = -1;
  const char** names = NULL;
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("soak.", &n, &names));
  assert_int_equal(n, 0);
  assert_pf_ok(PFClosureCheckError(g_closure));
  assert_pf_ok(PFObjectFree(g_closure));
  assert_pf_ok(PFObjectFree(g_boxed));
  assert_pf_ok(PFFuncFree(g_typed));
  assert_pf_ok(PFFuncFree(g_echo_str));
  assert_pf_ok(PFFuncFree(g_fail));
  assert_pf_ok(PFFuncFree(g_fail_doomed));
  assert_pf_ok(PFFuncFree(g_apply));
  /* Every finalizer ran, and none twice. */
  assert_true(atomic_load(&g_created) > total / 16);
  assert_int_equal(atomic_load(&g_finalized), atomic_load(&g_created));
  assert_int_equal(atomic_load(&g_double_fin), 0);
  print_message("soak: %ld operations on %d threads, %ld functions created and finalized\n",
                g_ops_per_thread * N_THREADS, N_THREADS, atomic_load(&g_created));
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_soak)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
