/* Dict under concurrent readers and writers (also run under TSan): an
 * update is seen whole, a value read stays valid while writers replace and
 * release it, and no insertion is lost while the index grows. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/pf_test.h"

#define WIDTH 8
#define READERS 3
#define WRITERS 2

static PFObjectHandle g_dict;
static atomic_int g_stop;
static atomic_long g_reads;

static int ops(void) { return getenv("PF_UNDER_VALGRIND") ? 200 : 3000; }

static const char* const k_keys[WIDTH] = {"a", "b", "c", "d", "e", "f", "g", "h"};

static void run(void* (*writer)(void*), void* (*reader)(void*)) {
  pthread_t w[WRITERS], r[READERS];
  atomic_store(&g_stop, 0);
  atomic_store(&g_reads, 0);
  for (int i = 0; i < READERS; ++i) assert_int_equal(pthread_create(&r[i], NULL, reader, NULL), 0);
  for (int i = 0; i < WRITERS; ++i)
    assert_int_equal(pthread_create(&w[i], NULL, writer, (void*)(intptr_t)i), 0);
  for (int i = 0; i < WRITERS; ++i) {
    void* res = NULL;
    pthread_join(w[i], &res);
    if (res != NULL) fail_msg("writer %d failed (%p): %s", i, res, PFGetLastError());
  }
  atomic_store(&g_stop, 1);
  for (int i = 0; i < READERS; ++i) {
    void* res = NULL;
    pthread_join(r[i], &res);
    if (res != NULL) fail_msg("reader %d failed (%p): %s", i, res, PFGetLastError());
  }
}

/* ---- an update of every key is seen whole ---- */

static void* updater(void* arg) {
  int id = (int)(intptr_t)arg;
  PFValue k[WIDTH], v[WIDTH];
  int kc[WIDTH], vc[WIDTH];
  char text[32];
  for (int g = 0; g < ops(); ++g) {
    snprintf(text, sizeof(text), "gen-%d-%d", id, g);
    for (int i = 0; i < WIDTH; ++i) {
      k[i].v_str = k_keys[i];
      kc[i] = kPFStr;
      v[i].v_str = text;
      vc[i] = kPFStr;
    }
    if (PFDictUpdate(g_dict, k, kc, v, vc, WIDTH) != 0) return (void*)1;
  }
  return NULL;
}

static void* snapshot_reader(void* arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    PFObjectHandle a = NULL;
    if (PFDictToArray(g_dict, &a) != 0) return (void*)1;
    int64_t n = -1;
    if (PFArrayGetSize(a, &n) != 0 || n != 2 * WIDTH) return (void*)2;
    PFValue v[2 * WIDTH];
    int c[2 * WIDTH];
    if (PFArrayGetItems(a, 0, n, v, c) != 0) return (void*)3;
    /* Every value of one update, in the keys' first order. */
    for (int64_t i = 0; i < WIDTH; ++i)
      if (c[2 * i] != kPFStr || strcmp(v[2 * i].v_str, k_keys[i]) != 0 || c[2 * i + 1] != kPFStr ||
          strcmp(v[2 * i + 1].v_str, v[1].v_str) != 0)
        return (void*)4;
    PFObjectFree(a);
    PFValue one;
    int oc, found;
    if (PFDictGetItem(g_dict, (PFValue){.v_str = "a"}, kPFStr, &one, &oc, &found) != 0)
      return (void*)5;
    if (found && (oc != kPFStr || strncmp(one.v_str, "gen-", 4) != 0)) return (void*)6;
    atomic_fetch_add(&g_reads, 1);
  }
  return NULL;
}

static void test_updates_are_atomic(void** state) {
  (void)state;
  assert_pf_ok(PFDictCreate(NULL, NULL, NULL, NULL, 0, &g_dict));
  PFValue k[WIDTH], v[WIDTH];
  int kc[WIDTH], vc[WIDTH];
  for (int i = 0; i < WIDTH; ++i) {
    k[i].v_str = k_keys[i];
    kc[i] = kPFStr;
    v[i].v_str = "gen-start";
    vc[i] = kPFStr;
  }
  assert_pf_ok(PFDictUpdate(g_dict, k, kc, v, vc, WIDTH));
  run(updater, snapshot_reader);
  assert_true(atomic_load(&g_reads) > 0);
  assert_pf_ok(PFObjectFree(g_dict));
}

/* ---- handles read while writers release them ---- */

static atomic_long g_made, g_finalized;
static void count_fin(void* p) {
  (void)p;
  atomic_fetch_add(&g_finalized, 1);
}

static void* handle_writer(void* arg) {
  (void)arg;
  for (int g = 0; g < ops(); ++g) {
    PFObjectHandle b = NULL;
    if (PFObjectCreateBoxed(&g_made, count_fin, &b) != 0) return (void*)1;
    atomic_fetch_add(&g_made, 1);
    PFValue key = {.v_int64 = g % WIDTH}, v = {.v_handle = b};
    int st = PFDictSetItem(g_dict, key, kPFInt, v, kPFObjectHandle);
    PFObjectFree(b);
    if (st != 0) return (void*)2;
    if (g % 3 == 0) {
      PFValue got;
      int gc;
      if (PFDictPop(g_dict, key, kPFInt, &got, &gc) == 0) PFObjectFree(got.v_handle);
    }
  }
  return NULL;
}

static void* handle_reader(void* arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    for (int i = 0; i < WIDTH; ++i) {
      PFValue v;
      int c, found;
      if (PFDictGetItem(g_dict, (PFValue){.v_int64 = i}, kPFInt, &v, &c, &found) != 0)
        return (void*)1;
      if (!found) continue;
      for (volatile int spin = 0; spin < 50; ++spin) {}
      void* payload = NULL;
      if (PFObjectGetBoxedPayload(v.v_handle, &payload) != 0 || payload != &g_made) return (void*)2;
      PFObjectFree(v.v_handle);
      atomic_fetch_add(&g_reads, 1);
    }
  }
  return NULL;
}

static void test_handles_read_stay_alive(void** state) {
  (void)state;
  assert_pf_ok(PFDictCreate(NULL, NULL, NULL, NULL, 0, &g_dict));
  run(handle_writer, handle_reader);
  assert_pf_ok(PFObjectFree(g_dict));
  assert_int_equal(atomic_load(&g_finalized), atomic_load(&g_made));
}

/* ---- inserts from many threads while the index grows ---- */

static void* inserter(void* arg) {
  int id = (int)(intptr_t)arg;
  for (int i = 0; i < ops(); ++i) {
    PFValue k = {.v_int64 = id * 1000000 + i}, v = {.v_int64 = i};
    if (PFDictSetItem(g_dict, k, kPFInt, v, kPFInt) != 0) return (void*)1;
  }
  return NULL;
}

static void* size_reader(void* arg) {
  (void)arg;
  int64_t last = 0;
  while (!atomic_load(&g_stop)) {
    int64_t n = -1;
    if (PFDictGetSize(g_dict, &n) != 0 || n < last) return (void*)1; /* only grows */
    last = n;
    PFValue v;
    int c, found;
    if (PFDictGetItem(g_dict, (PFValue){.v_int64 = 0}, kPFInt, &v, &c, &found) != 0)
      return (void*)2;
    atomic_fetch_add(&g_reads, 1);
  }
  return NULL;
}

static void test_inserts_are_not_lost(void** state) {
  (void)state;
  assert_pf_ok(PFDictCreate(NULL, NULL, NULL, NULL, 0, &g_dict));
  run(inserter, size_reader);
  int64_t n = -1;
  assert_pf_ok(PFDictGetSize(g_dict, &n));
  assert_int_equal(n, WRITERS * ops());
  for (int id = 0; id < WRITERS; ++id)
    for (int i = 0; i < ops(); i += 7) {
      PFValue v;
      int c, found;
      assert_pf_ok(
          PFDictGetItem(g_dict, (PFValue){.v_int64 = id * 1000000 + i}, kPFInt, &v, &c, &found));
      assert_int_equal(found, 1);
      assert_int_equal(v.v_int64, i);
    }
  assert_pf_ok(PFObjectFree(g_dict));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_updates_are_atomic),
      cmocka_unit_test(test_handles_read_stay_alive),
      cmocka_unit_test(test_inserts_are_not_lost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
