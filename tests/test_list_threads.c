/* List under concurrent readers and writers (also run under TSan): each
 * call is atomic, a value read stays valid (a str is a copy, a handle the
 * reader's own reference) while writers replace and release it, and no
 * append or pop is lost. */
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

static PFObjectHandle g_list;
static atomic_int g_stop;
static atomic_long g_reads;

static int ops(void) { return getenv("PF_UNDER_VALGRIND") ? 200 : 3000; }

/* ---- whole-list replacements are seen whole ---- */

static void* replacer(void* arg) {
  int id = (int)(intptr_t)arg;
  char text[WIDTH][32];
  PFValue v[WIDTH];
  int c[WIDTH];
  for (int g = 0; g < ops(); ++g) {
    for (int i = 0; i < WIDTH; ++i) {
      snprintf(text[i], sizeof(text[i]), "gen-%d-%d", id, g);
      v[i].v_str = text[i];
      c[i] = kPFStr;
    }
    if (PFListReplace(g_list, 0, INT64_MAX, v, c, WIDTH) != 0) return (void*)1;
  }
  return NULL;
}

static void* snapshot_reader(void* arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    PFObjectHandle a = NULL;
    if (PFListToArray(g_list, 0, INT64_MAX, &a) != 0) return (void*)1;
    PFValue v[WIDTH];
    int c[WIDTH];
    int64_t n = -1;
    if (PFArrayGetSize(a, &n) != 0 || n != WIDTH || PFArrayGetItems(a, 0, WIDTH, v, c) != 0)
      return (void*)2;
    for (int i = 1; i < WIDTH; ++i)
      if (c[i] != kPFStr || strcmp(v[i].v_str, v[0].v_str) != 0) return (void*)3; /* torn */
    PFObjectFree(a);
    /* A single read is a copy that stays intact whatever writers do. */
    PFValue one;
    int oc;
    if (PFListGetItem(g_list, -1, &one, &oc) != 0 || oc != kPFStr) return (void*)4;
    char copy[32];
    snprintf(copy, sizeof(copy), "%s", one.v_str);
    for (volatile int spin = 0; spin < 50; ++spin) {}
    if (strcmp(copy, one.v_str) != 0 || strncmp(copy, "gen-", 4) != 0) return (void*)5;
    atomic_fetch_add(&g_reads, 1);
  }
  return NULL;
}

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

static void test_replacements_are_atomic(void** state) {
  (void)state;
  PFValue v[WIDTH];
  int c[WIDTH];
  for (int i = 0; i < WIDTH; ++i) {
    v[i].v_str = "gen-start";
    c[i] = kPFStr;
  }
  assert_pf_ok(PFListCreate(v, c, WIDTH, &g_list));
  run(replacer, snapshot_reader);
  assert_true(atomic_load(&g_reads) > 0);
  assert_pf_ok(PFObjectFree(g_list));
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
    PFValue v = {.v_handle = b};
    /* The List's reference is now the only one: replacing it releases it. */
    int st = PFListSetItem(g_list, g % WIDTH, v, kPFObjectHandle);
    PFObjectFree(b);
    if (st != 0) return (void*)2;
  }
  return NULL;
}

static void* handle_reader(void* arg) {
  (void)arg;
  while (!atomic_load(&g_stop)) {
    for (int i = 0; i < WIDTH; ++i) {
      PFValue v;
      int c;
      if (PFListGetItem(g_list, i, &v, &c) != 0) return (void*)1;
      if (c != kPFObjectHandle) continue;
      void* payload = NULL;
      for (volatile int spin = 0; spin < 50; ++spin) {}
      /* Still alive: the read gave this thread its own reference. */
      if (PFObjectGetBoxedPayload(v.v_handle, &payload) != 0 || payload != &g_made) return (void*)2;
      PFObjectFree(v.v_handle);
      atomic_fetch_add(&g_reads, 1);
    }
  }
  return NULL;
}

static void test_handles_read_stay_alive(void** state) {
  (void)state;
  PFValue v[WIDTH];
  int c[WIDTH];
  for (int i = 0; i < WIDTH; ++i) {
    v[i].v_int64 = 0;
    c[i] = kPFNull;
  }
  assert_pf_ok(PFListCreate(v, c, WIDTH, &g_list));
  run(handle_writer, handle_reader);
  assert_pf_ok(PFObjectFree(g_list));
  assert_int_equal(atomic_load(&g_finalized), atomic_load(&g_made));
}

/* ---- appends and pops from many threads: none lost ---- */

static atomic_long g_popped_sum, g_popped_count;

static void* appender(void* arg) {
  int id = (int)(intptr_t)arg;
  for (int i = 0; i < ops(); ++i) {
    PFValue v = {.v_int64 = id * 1000000 + i};
    if (PFListAppend(g_list, v, kPFInt) != 0) return (void*)1;
  }
  return NULL;
}

static void* popper(void* arg) {
  (void)arg;
  for (;;) {
    PFValue v;
    int c;
    /* Read before the pop: an empty List after every append has ended. */
    int stopping = atomic_load(&g_stop);
    if (PFListPop(g_list, 0, &v, &c) == 0) {
      atomic_fetch_add(&g_popped_sum, v.v_int64);
      atomic_fetch_add(&g_popped_count, 1);
      continue;
    }
    if (strcmp(PFErrorGetKind(), kPFErrIndexError) != 0) return (void*)1;
    if (stopping) return NULL;
  }
}

static void test_appends_and_pops_are_not_lost(void** state) {
  (void)state;
  assert_pf_ok(PFListCreate(NULL, NULL, 0, &g_list));
  run(appender, popper);
  /* The poppers stop at the first empty List after the appenders end. */
  int64_t left = -1;
  assert_pf_ok(PFListGetSize(g_list, &left));
  assert_int_equal(left, 0);
  long n = ops(), want = 0;
  for (int id = 0; id < WRITERS; ++id) want += id * 1000000L * n + n * (n - 1) / 2;
  assert_int_equal(atomic_load(&g_popped_count), WRITERS * n);
  assert_int_equal(atomic_load(&g_popped_sum), want);
  assert_pf_ok(PFObjectFree(g_list));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_replacements_are_atomic),
      cmocka_unit_test(test_handles_read_stay_alive),
      cmocka_unit_test(test_appends_and_pops_are_not_lost),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
