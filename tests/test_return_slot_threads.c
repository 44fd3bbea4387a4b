/* The return slot across threads: a handle is only good on the thread of
 * its call, and calls on many threads at once (plain results through the
 * inline path, string results at several depths) share no state. Runs
 * under ASan and TSan. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/pf_test.h"

static PFFunctionHandle make(PFPackedCFunc fn, void* resource) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, resource, NULL, &f));
  return f;
}

/* ---- another thread's handle ---------------------------------------------- */

typedef struct {
  PFRetValueHandle ret;
  int status[3];
  char kind[3][32];
  char msg[3][200];
} foreign_try;

/* On a thread of its own: tries to set the result of a call in progress on
 * the thread that started it, by each way of reaching PFCFuncSetReturn. */
static void* try_foreign(void* arg) {
  foreign_try* t = arg;
  PFValue v = {.v_int64 = 666};
  int code = kPFInt;
  t->status[0] = PFCFuncSetReturn(t->ret, &v, &code, 1);
  snprintf(t->kind[0], sizeof(t->kind[0]), "%s", PFErrorGetKind());
  snprintf(t->msg[0], sizeof(t->msg[0]), "%s", PFErrorGetMessage());
  t->status[1] = PFGetApiBase()->GetApi(1)->CFuncSetReturn(t->ret, &v, &code, 1);
  snprintf(t->kind[1], sizeof(t->kind[1]), "%s", PFErrorGetKind());
  snprintf(t->msg[1], sizeof(t->msg[1]), "%s", PFErrorGetMessage());
  v.v_str = "a string from the wrong thread";
  code = kPFStr;
  t->status[2] = PFCFuncSetReturn(t->ret, &v, &code, 1);
  snprintf(t->kind[2], sizeof(t->kind[2]), "%s", PFErrorGetKind());
  snprintf(t->msg[2], sizeof(t->msg[2]), "%s", PFErrorGetMessage());
  return NULL;
}

static int p_hand_to_another_thread(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n;
  foreign_try* t = res;
  t->ret = ret;
  pthread_t th;
  if (pthread_create(&th, NULL, try_foreign, t) != 0)
    return PF_ERROR(kPFErrRuntimeError, "pthread_create");
  pthread_join(th, NULL);
  PFValue v = {.v_int64 = 42};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_handle_of_another_thread_is_refused(void** state) {
  (void)state;
  foreign_try t;
  memset(&t, 0, sizeof(t));
  PFFunctionHandle f = make(p_hand_to_another_thread, &t);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 42);
  for (int i = 0; i < 3; ++i) {
    assert_int_equal(t.status[i], -1);
    assert_string_equal(t.kind[i], kPFErrTypeError);
    assert_non_null(strstr(t.msg[i], "PFCFuncSetReturn: argument 'ret'"));
    assert_non_null(strstr(t.msg[i], "on this thread"));
  }
  assert_pf_ok(PFFuncFree(f));
}

/* ---- many threads at once ------------------------------------------------ */

static int p_mul(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || c[0] != kPFInt || c[1] != kPFInt) return PF_ERROR(kPFErrTypeError, "mul");
  PFValue v = {.v_int64 = a[0].v_int64 * a[1].v_int64};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* echo(s) after a nested call that returns a long string of its own. */
static PFFunctionHandle g_mul, g_echo_after_noise, g_noise;
static int p_noise(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)res;
  char buf[257];
  memset(buf, '#', 256);
  buf[256] = '\0';
  PFValue v = {.v_str = buf};
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
static int p_echo_after_noise(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || c[0] != kPFStr) return PF_ERROR(kPFErrTypeError, "echo");
  char copy[64];
  snprintf(copy, sizeof(copy), "%s", a[0].v_str);
  PFValue rv;
  int rc;
  if (PFFuncCall(g_noise, NULL, NULL, 0, &rv, &rc) != 0) return -1;
  if (strcmp(copy, a[0].v_str) != 0) return PF_ERROR(kPFErrValueError, "argument changed");
  return PFCFuncSetReturn(ret, &a[0], &c[0], 1);
}

typedef struct {
  int id;
  int rounds;
  int bad;
} worker;

static void* work(void* arg) {
  worker* w = arg;
  for (int i = 0; i < w->rounds; ++i) {
    PFValue args[2] = {{.v_int64 = w->id}, {.v_int64 = i}}, rv;
    int codes[2] = {kPFInt, kPFInt}, rc;
    if (PFFuncCall(g_mul, args, codes, 2, &rv, &rc) != 0 || rc != kPFInt ||
        rv.v_int64 != (int64_t)w->id * i)
      ++w->bad;
    char s[32];
    snprintf(s, sizeof(s), "thread %d round %d", w->id, i);
    PFValue sv = {.v_str = s};
    int sc = kPFStr;
    if (PFFuncCall(g_echo_after_noise, &sv, &sc, 1, &rv, &rc) != 0 || rc != kPFStr ||
        strcmp(rv.v_str, s) != 0)
      ++w->bad;
    /* The result, passed on: the nested noise must not touch it. */
    PFValue again = rv;
    if (PFFuncCall(g_echo_after_noise, &again, &sc, 1, &rv, &rc) != 0 || rc != kPFStr ||
        strcmp(rv.v_str, s) != 0)
      ++w->bad;
  }
  return NULL;
}

static void test_calls_on_many_threads_share_nothing(void** state) {
  (void)state;
  g_mul = make(p_mul, NULL);
  g_noise = make(p_noise, NULL);
  g_echo_after_noise = make(p_echo_after_noise, NULL);
  enum { kThreads = 4 };
  pthread_t th[kThreads];
  worker w[kThreads];
  int rounds = getenv("PF_UNDER_VALGRIND") ? 50 : 2000;
  for (int i = 0; i < kThreads; ++i) {
    w[i] = (worker){i + 1, rounds, 0};
    assert_int_equal(pthread_create(&th[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < kThreads; ++i) pthread_join(th[i], NULL);
  for (int i = 0; i < kThreads; ++i) assert_int_equal(w[i].bad, 0);
  PFFuncFree(g_mul);
  PFFuncFree(g_noise);
  PFFuncFree(g_echo_after_noise);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_handle_of_another_thread_is_refused),
      cmocka_unit_test(test_calls_on_many_threads_share_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
