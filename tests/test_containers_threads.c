/* Containers shared between threads: immutable, so any number of threads
 * read one at once without locks, retain and release it, and the last
 * release (on whichever thread) destroys it once. Runs under TSan too. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/pf_test.h"

#define N_THREADS 4
#define N_ITEMS 500

static int rounds(void) { return getenv("PF_UNDER_VALGRIND") ? 20 : 200; }

static int p_twice(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || c[0] != kPFInt) return PFErrorSetFormat(kPFErrTypeError, "want one int");
  PFValue v = {.v_int64 = 2 * a[0].v_int64};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

typedef struct {
  PFObjectHandle array; /* a reference of this thread's own */
  PFObjectHandle map;   /* likewise */
  int failures;
} reader_arg;

static char g_names[N_ITEMS][16];

/* Reads every item of the array and every key of the map, calls the
 * function in the array, and retains and releases both, many times. */
static void* reader(void* p) {
  reader_arg* r = p;
  for (int round = 0; round < rounds(); ++round) {
    int64_t n = 0;
    if (PFArrayGetSize(r->array, &n) != 0 || n != N_ITEMS + 1) ++r->failures;
    for (int64_t i = 0; i < N_ITEMS; ++i) {
      PFValue v;
      int code;
      if (PFArrayGetItem(r->array, i, &v, &code) != 0) {
        ++r->failures;
        continue;
      }
      if (i % 2 == 0 && (code != kPFInt || v.v_int64 != i)) ++r->failures;
      if (i % 2 == 1 && (code != kPFStr || strcmp(v.v_str, g_names[i]) != 0)) ++r->failures;
      PFValue key = {.v_str = g_names[i]}, out;
      int found = 0;
      if (PFMapGetItem(r->map, key, kPFStr, &out, &code, &found) != 0 || !found || out.v_int64 != i)
        ++r->failures;
    }
    PFValue fv, arg = {.v_int64 = round}, rv;
    int fc, ac = kPFInt, rc;
    if (PFArrayGetItem(r->array, N_ITEMS, &fv, &fc) != 0 || fc != kPFFuncHandle ||
        PFFuncCall(fv.v_handle, &arg, &ac, 1, &rv, &rc) != 0 || rv.v_int64 != 2 * round)
      ++r->failures;
    if (PFObjectRetain(r->array) != 0 || PFObjectRetain(r->map) != 0) ++r->failures;
    PFObjectFree(r->array);
    PFObjectFree(r->map);
  }
  /* Drop this thread's references: one of the threads drops the last. */
  PFObjectFree(r->array);
  PFObjectFree(r->map);
  return NULL;
}

static void test_threads_read_one_container(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle f = pf_test_make_counted(p_twice, &fins);
  /* pf_test_make_counted passes the counter as the resource: p_twice
   * ignores it. */
  assert_non_null(f);
  PFValue v[N_ITEMS + 1], mk[N_ITEMS], mv[N_ITEMS];
  int c[N_ITEMS + 1], mkc[N_ITEMS], mvc[N_ITEMS];
  for (int i = 0; i < N_ITEMS; ++i) {
    snprintf(g_names[i], sizeof(g_names[i]), "name%d", i);
    if (i % 2) {
      v[i].v_str = g_names[i];
      c[i] = kPFStr;
    } else {
      v[i].v_int64 = i;
      c[i] = kPFInt;
    }
    mk[i].v_str = g_names[i];
    mkc[i] = kPFStr;
    mv[i].v_int64 = i;
    mvc[i] = kPFInt;
  }
  v[N_ITEMS].v_handle = f;
  c[N_ITEMS] = kPFFuncHandle;
  PFObjectHandle a = NULL, m = NULL;
  assert_pf_ok(PFArrayCreate(v, c, N_ITEMS + 1, &a));
  assert_pf_ok(PFMapCreate(mk, mkc, mv, mvc, N_ITEMS, &m));
  assert_pf_ok(PFFuncFree(f)); /* the array holds the function now */

  pthread_t th[N_THREADS];
  reader_arg args[N_THREADS];
  for (int i = 0; i < N_THREADS; ++i) {
    assert_pf_ok(PFObjectRetain(a));
    assert_pf_ok(PFObjectRetain(m));
    args[i] = (reader_arg){a, m, 0};
    assert_int_equal(pthread_create(&th[i], NULL, reader, &args[i]), 0);
  }
  /* The threads hold the only references from here on. */
  assert_pf_ok(PFObjectFree(a));
  assert_pf_ok(PFObjectFree(m));
  for (int i = 0; i < N_THREADS; ++i) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(args[i].failures, 0);
  }
  assert_int_equal(atomic_load(&fins), 1);
}

typedef struct {
  PFFunctionHandle f;
  PFObjectHandle shared; /* an Array every thread nests in its own */
  int failures;
} maker_arg;

/* Creates containers that hold the shared function and the shared array,
 * reads them and drops them: the shared references are taken and
 * released by all threads at once. */
static void* maker(void* p) {
  maker_arg* r = p;
  for (int round = 0; round < 20 * rounds(); ++round) {
    char text[32];
    snprintf(text, sizeof(text), "round %d", round);
    PFValue v[] = {{.v_handle = r->f}, {.v_handle = r->shared}, {.v_str = text}};
    int c[] = {kPFFuncHandle, kPFObjectHandle, kPFStr};
    PFObjectHandle a = NULL, m = NULL;
    PFValue k[] = {{.v_int64 = round}, {.v_str = "a"}};
    int kc[] = {kPFInt, kPFStr};
    if (PFArrayCreate(v, c, 3, &a) != 0) {
      ++r->failures;
      continue;
    }
    PFValue mv[] = {{.v_handle = a}, {.v_handle = r->f}};
    int mvc[] = {kPFObjectHandle, kPFFuncHandle};
    if (PFMapCreate(k, kc, mv, mvc, 2, &m) != 0) ++r->failures;
    PFObjectFree(a);
    PFValue out;
    int code, found = 0;
    if (m == NULL || PFMapGetItem(m, k[0], kPFInt, &out, &code, &found) != 0 || !found ||
        code != kPFObjectHandle || PFArrayGetItem(out.v_handle, 2, &out, &code) != 0 ||
        strcmp(out.v_str, text) != 0)
      ++r->failures;
    PFObjectFree(m);
  }
  return NULL;
}

static void test_threads_create_and_drop(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle f = pf_test_make_counted(pf_test_echo, &fins);
  PFValue v = {.v_int64 = 1};
  int c = kPFInt;
  PFObjectHandle shared = NULL;
  assert_pf_ok(PFArrayCreate(&v, &c, 1, &shared));
  pthread_t th[N_THREADS];
  maker_arg args[N_THREADS];
  for (int i = 0; i < N_THREADS; ++i) {
    args[i] = (maker_arg){f, shared, 0};
    assert_int_equal(pthread_create(&th[i], NULL, maker, &args[i]), 0);
  }
  for (int i = 0; i < N_THREADS; ++i) {
    assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(args[i].failures, 0);
  }
  assert_int_equal(atomic_load(&fins), 0);
  assert_pf_ok(PFObjectFree(shared));
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(atomic_load(&fins), 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_threads_read_one_container),
      cmocka_unit_test(test_threads_create_and_drop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
