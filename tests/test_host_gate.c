/* Host functions and gates: PFHostGateCreate, PFHostGateClose,
 * PFFuncCreateFromHostCFunc; and PFEnvSetSignalChecker waiting for the
 * callers of the checker it replaces. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/pf_test.h"
#include "../runtime/internal.h" /* pf_gate_seats_enable */

/* ---- helpers ---- */

static PFObjectHandle new_gate(void) {
  PFObjectHandle g = NULL;
  assert_pf_ok(PFHostGateCreate(&g));
  assert_non_null(g);
  return g;
}

static PFFunctionHandle new_host(PFObjectHandle gate, PFPackedCFunc fn, void* res,
                                 PFPackedCFuncFinalizer fin) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromHostCFunc(gate, fn, res, fin, &f));
  assert_non_null(f);
  return f;
}

static void pause_briefly(void) {
  struct timespec ts = {0, 200000L};
  nanosleep(&ts, NULL);
}

/* What a host function does, chosen by the int its resource points at. */
enum { kSucceed, kFailWithError, kFailSilently, kPendingWithError, kPendingSilently, kOdd };

static atomic_int g_calls;

/* A host function: returns its resource's int and reports per the mode.
 * Its own return value is the opposite of its status, so that a wrapper
 * that believed it would get every case wrong. */
static int host_mode(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n;
  PFHostCall* call = res;
  atomic_fetch_add(&g_calls, 1);
  assert_int_equal(call->status, kPFHostPending);
  assert_int_equal(call->reserved, 0);
  int mode = *(int*)call->resource_handle;
  PFValue v = {.v_int64 = 100 + mode};
  int code = kPFInt;
  if (PFCFuncSetReturn(ret, &v, &code, 1) != 0) return 0;
  switch (mode) {
    case kSucceed:
      call->status = 0;
      return -1;
    case kFailWithError:
      PFErrorSet("KeyError", "host said no");
      call->status = -1;
      return 0;
    case kFailSilently:
      call->status = -1;
      return 0;
    case kPendingWithError:
      PFErrorSet("KeyboardInterrupt", "escaped before the handler");
      return 0;
    case kPendingSilently:
      return 0;
    default:
      call->status = 7;
      return 0;
  }
}

static int call_int(PFFunctionHandle f, int64_t* out) {
  PFValue rv;
  int rc;
  if (pf_test_call0(f, &rv, &rc) != 0) return -1;
  assert_int_equal(rc, kPFInt);
  *out = rv.v_int64;
  return 0;
}

/* ---- creating gates and host functions ---- */

static void test_gate_is_an_object(void** state) {
  (void)state;
  PFObjectHandle g = new_gate();
  uint32_t ti = 0;
  assert_pf_ok(PFObjectGetTypeIndex(g, &ti));
  assert_int_equal(ti, kPFObjectHostGate);
  assert_pf_ok(PFObjectRetain(g));
  assert_pf_ok(PFObjectFree(g));
  assert_pf_ok(PFObjectFree(g));
}

static void test_status_decides_the_result(void** state) {
  (void)state;
  PFObjectHandle g = new_gate();
  int mode = kSucceed;
  PFFunctionHandle f = new_host(g, host_mode, &mode, NULL);
  assert_pf_ok(PFFuncSetInfo(f, "host.mode", NULL, NULL));
  int64_t v = 0;

  assert_pf_ok(call_int(f, &v));
  assert_int_equal(v, 100);

  mode = kFailWithError;
  assert_pf_error(call_int(f, &v), "KeyError", "host said no");

  mode = kFailSilently;
  assert_pf_error(call_int(f, &v), kPFErrRuntimeError, "'host.mode' returned -1",
                  "without recording an error");

  mode = kPendingWithError;
  assert_pf_error(call_int(f, &v), "KeyboardInterrupt", "escaped before the handler");

  mode = kPendingSilently;
  PFErrorSet("ValueError", "an older error, recorded before the call");
  assert_pf_error(call_int(f, &v), kPFErrRuntimeError, "host function 'host.mode'",
                  "did not complete");

  mode = kOdd;
  assert_pf_error(call_int(f, &v), kPFErrRuntimeError, "'host.mode' reported status 7");

  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFObjectFree(g));
}

static void test_finalizer_gets_the_resource_through_the_gate(void** state) {
  (void)state;
  PFObjectHandle g = new_gate();
  atomic_int fin = 0;
  PFFunctionHandle f = new_host(g, host_mode, &fin, pf_test_count_fin);
  /* The function holds the gate: dropping ours first changes nothing. */
  assert_pf_ok(PFObjectFree(g));
  assert_int_equal(atomic_load(&fin), 0);
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(atomic_load(&fin), 1);
}

/* ---- closing ---- */

static void test_closed_gate_refuses_calls_and_skips_finalizers(void** state) {
  (void)state;
  PFObjectHandle g = new_gate();
  int mode = kSucceed;
  atomic_int fin = 0;
  PFFunctionHandle f = new_host(g, host_mode, &mode, NULL);
  PFFunctionHandle with_fin = new_host(g, host_mode, &fin, pf_test_count_fin);
  assert_pf_ok(PFHostGateClose(g, "the host is shutting down", 0));

  atomic_store(&g_calls, 0);
  int64_t v = 0;
  assert_pf_error(call_int(f, &v), kPFErrRuntimeError, "the host is shutting down");
  assert_string_equal(PFErrorGetMessage(), "the host is shutting down");
  assert_int_equal(atomic_load(&g_calls), 0); /* the host's code never ran */

  /* The finalizer is skipped: its resource is leaked on purpose. */
  assert_pf_ok(PFFuncFree(with_fin));
  assert_int_equal(atomic_load(&fin), 0);

  /* No new host functions either; their finalizer is skipped too. */
  PFFunctionHandle h = NULL;
  assert_pf_error(PFFuncCreateFromHostCFunc(g, host_mode, &fin, pf_test_count_fin, &h),
                  kPFErrRuntimeError, "the host is shutting down");
  assert_null(h);
  assert_int_equal(atomic_load(&fin), 0);

  /* Idempotent; the first message stays. */
  assert_pf_ok(PFHostGateClose(g, "another message", -1));
  assert_pf_error(call_int(f, &v), kPFErrRuntimeError, "the host is shutting down");
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFObjectFree(g));
}

static void test_close_without_message(void** state) {
  (void)state;
  PFObjectHandle g = new_gate();
  int mode = kSucceed;
  PFFunctionHandle f = new_host(g, host_mode, &mode, NULL);
  assert_pf_ok(PFHostGateClose(g, NULL, 0));
  int64_t v = 0;
  assert_pf_error(call_int(f, &v), kPFErrRuntimeError, "has shut down");
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFObjectFree(g));
}

/* A host function that closes its own gate from inside a nested call:
 * resource = the gate. The outer calls are this thread's own, further up
 * its stack, and are not waited for. */
static int host_close_own_gate(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  PFHostCall* call = res;
  (void)codes;
  if (n > 0) { /* the outer call: call ourselves once more, with no argument */
    PFValue rv;
    int rc;
    if (PFFuncCall(args[0].v_handle, NULL, NULL, 0, &rv, &rc) != 0) return 0; /* pending */
    if (PFCFuncSetReturn(ret, &rv, &rc, 1) != 0) return 0;
    call->status = 0;
    return 0;
  }
  if (PFHostGateClose(call->resource_handle, "closed from inside", -1) != 0) return 0;
  PFValue v = {.v_int64 = 42};
  int code = kPFInt;
  if (PFCFuncSetReturn(ret, &v, &code, 1) != 0) return 0;
  call->status = 0;
  return 0;
}

static void test_close_from_inside_a_nested_call(void** state) {
  (void)state;
  PFObjectHandle g = new_gate();
  PFFunctionHandle f = new_host(g, host_close_own_gate, g, NULL);
  PFValue arg = {.v_handle = f}, rv;
  int code = kPFFuncHandle, rc;
  /* Two calls of the gate are in progress on this thread when it closes. */
  assert_pf_ok(PFFuncCall(f, &arg, &code, 1, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 42);
  /* Afterwards the gate is closed for everyone, this thread included. */
  assert_pf_error(PFFuncCall(f, &arg, &code, 1, &rv, &rc), kPFErrRuntimeError,
                  "closed from inside");
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFObjectFree(g));
}

/* ---- waiting for other threads ---- */

typedef struct {
  atomic_int entered;
  atomic_int release;
  atomic_int done; /* set by the host function before it returns */
  PFFunctionHandle f;
  int status;
} blocker;

/* Blocks until released; resource = the blocker. */
static int host_block(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)ret;
  PFHostCall* call = res;
  blocker* b = call->resource_handle;
  atomic_store(&b->entered, 1);
  while (!atomic_load(&b->release)) pause_briefly();
  atomic_store(&b->done, 1);
  call->status = 0;
  return 0;
}

static void* call_blocker(void* p) {
  blocker* b = p;
  PFValue rv;
  int rc;
  b->status = pf_test_call0(b->f, &rv, &rc);
  return NULL;
}

/* Calls `probe` until it fails (its gate is closed), then releases `b`. */
typedef struct {
  PFFunctionHandle probe;
  blocker* b;
} releaser;

static void* release_when_closed(void* p) {
  releaser* r = p;
  PFValue rv;
  int rc;
  while (pf_test_call0(r->probe, &rv, &rc) == 0) pause_briefly();
  atomic_store(&r->b->release, 1);
  return NULL;
}

static void test_close_times_out_while_another_thread_is_inside(void** state) {
  (void)state;
  PFObjectHandle g = new_gate();
  blocker b = {0};
  b.f = new_host(g, host_block, &b, NULL);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, call_blocker, &b), 0);
  while (!atomic_load(&b.entered)) pause_briefly();

  assert_pf_error(PFHostGateClose(g, "bye", 0), "TimeoutError", "PFHostGateClose", "1 call(s)",
                  "after 0 ms");
  assert_pf_error(PFHostGateClose(g, "bye", 20), "TimeoutError", "after 20 ms");
  /* Closed all the same: a new call fails at once. */
  PFValue rv;
  int rc;
  assert_pf_error(pf_test_call0(b.f, &rv, &rc), kPFErrRuntimeError, "bye");

  atomic_store(&b.release, 1);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(b.status, 0); /* the call in progress finished normally */
  assert_pf_ok(PFHostGateClose(g, "bye", 0));
  assert_pf_ok(PFFuncFree(b.f));
  assert_pf_ok(PFObjectFree(g));
}

static void test_close_waits_for_calls_on_other_threads(void** state) {
  (void)state;
  PFObjectHandle g = new_gate();
  blocker b = {0};
  b.f = new_host(g, host_block, &b, NULL);
  int mode = kSucceed;
  releaser r = {new_host(g, host_mode, &mode, NULL), &b};
  pthread_t th, rel;
  assert_int_equal(pthread_create(&th, NULL, call_blocker, &b), 0);
  while (!atomic_load(&b.entered)) pause_briefly();
  /* The releaser lets the blocked call go only once it sees the gate
   * closed, so this close must wait for it (no timeout). */
  assert_int_equal(pthread_create(&rel, NULL, release_when_closed, &r), 0);
  assert_pf_ok(PFHostGateClose(g, "closing", -1));
  assert_int_equal(atomic_load(&b.done), 1);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(pthread_join(rel, NULL), 0);
  assert_int_equal(b.status, 0);
  assert_pf_ok(PFFuncFree(b.f));
  assert_pf_ok(PFFuncFree(r.probe));
  assert_pf_ok(PFObjectFree(g));
}

/* A host function of one gate that calls a host function of another: the
 * thread's seat counts its call through the first, so the inner call is
 * counted in the second gate's own state. Closing the second gate must
 * still see it; closing the first sees the outer one. Resource: the inner
 * blocker's function. */
static int host_call_inner(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)ret;
  PFHostCall* call = res;
  PFValue rv;
  int rc;
  call->status = pf_test_call0(call->resource_handle, &rv, &rc);
  return 0;
}

static void test_close_sees_nested_calls_through_two_gates(void** state) {
  (void)state;
  PFObjectHandle g1 = new_gate(), g2 = new_gate();
  blocker b = {0};
  b.f = new_host(g2, host_block, &b, NULL);
  blocker outer = {0};
  outer.f = new_host(g1, host_call_inner, b.f, NULL);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, call_blocker, &outer), 0);
  while (!atomic_load(&b.entered)) pause_briefly();
  assert_pf_error(PFHostGateClose(g2, "two", 0), "TimeoutError", "1 call(s)");
  assert_pf_error(PFHostGateClose(g1, "one", 0), "TimeoutError", "1 call(s)");
  atomic_store(&b.release, 1);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(outer.status, 0);
  assert_pf_ok(PFHostGateClose(g1, "one", 0));
  assert_pf_ok(PFHostGateClose(g2, "two", 0));
  assert_pf_ok(PFFuncFree(outer.f));
  assert_pf_ok(PFFuncFree(b.f));
  assert_pf_ok(PFObjectFree(g1));
  assert_pf_ok(PFObjectFree(g2));
}

/* Many threads call through one gate, each many times, while it closes:
 * every call either ran to the end or was refused, and once the close
 * returned, none is still running (each counts itself in and out). */
typedef struct {
  PFFunctionHandle f;
  atomic_int* inside;
  atomic_int* ran_after_close;
  atomic_int* closed;
} storm;

static int host_count_inside(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)ret;
  PFHostCall* call = res;
  storm* st = call->resource_handle;
  atomic_fetch_add(st->inside, 1);
  if (atomic_load(st->closed)) atomic_fetch_add(st->ran_after_close, 1);
  for (volatile int i = 0; i < 50; ++i) {}
  atomic_fetch_sub(st->inside, 1);
  call->status = 0;
  return 0;
}

static void* storm_calls(void* p) {
  storm* st = p;
  for (int i = 0; i < 20000; ++i) {
    PFValue rv;
    int rc;
    if (pf_test_call0(st->f, &rv, &rc) != 0) {
      PFErrorClear();
      break; /* closed */
    }
  }
  return NULL;
}

static void test_close_during_a_storm_of_calls(void** state) {
  (void)state;
  for (int round = 0; round < 5; ++round) {
    PFObjectHandle g = new_gate();
    atomic_int inside = 0, ran_after_close = 0, closed = 0;
    storm st = {NULL, &inside, &ran_after_close, &closed};
    st.f = new_host(g, host_count_inside, &st, NULL);
    pthread_t th[4];
    for (int i = 0; i < 4; ++i) assert_int_equal(pthread_create(&th[i], NULL, storm_calls, &st), 0);
    for (int i = 0; i < 20 * round; ++i) pause_briefly();
    assert_pf_ok(PFHostGateClose(g, "storm", -1));
    atomic_store(&closed, 1);
    /* No call is inside once the close returned, and none starts later. */
    assert_int_equal(atomic_load(&inside), 0);
    for (int i = 0; i < 4; ++i) assert_int_equal(pthread_join(th[i], NULL), 0);
    assert_int_equal(atomic_load(&ran_after_close), 0);
    assert_pf_ok(PFFuncFree(st.f));
    assert_pf_ok(PFObjectFree(g));
  }
}

/* A thread that called through a gate and exited counts for nothing. */
static void* call_once(void* p) {
  PFValue rv;
  int rc;
  (void)pf_test_call0(p, &rv, &rc);
  return NULL;
}

static void test_exited_threads_are_not_waited_for(void** state) {
  (void)state;
  PFObjectHandle g = new_gate();
  int mode = kSucceed;
  PFFunctionHandle f = new_host(g, host_mode, &mode, NULL);
  for (int i = 0; i < 8; ++i) {
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, call_once, f), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
  }
  assert_pf_ok(PFHostGateClose(g, "done", 0));
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFObjectFree(g));
}

/* A finalizer in progress counts as a call: resource = the blocker. */
static void fin_block(void* res) {
  blocker* b = res;
  atomic_store(&b->entered, 1);
  while (!atomic_load(&b->release)) pause_briefly();
  atomic_store(&b->done, 1);
}

static void* free_in_thread(void* p) {
  blocker* b = p;
  PFFuncFree(b->f);
  return NULL;
}

static void test_close_waits_for_a_finalizer_in_progress(void** state) {
  (void)state;
  PFObjectHandle g = new_gate();
  blocker b = {0};
  b.f = new_host(g, host_mode, &b, fin_block);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, free_in_thread, &b), 0);
  while (!atomic_load(&b.entered)) pause_briefly();
  assert_pf_error(PFHostGateClose(g, "bye", 0), "TimeoutError", "1 call(s)");
  atomic_store(&b.release, 1);
  assert_pf_ok(PFHostGateClose(g, "bye", -1));
  assert_int_equal(atomic_load(&b.done), 1);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_pf_ok(PFObjectFree(g));
}

/* In a child of fork, calls that other threads of the parent had in
 * progress do not count: they never return there. */
static void test_fork_child_does_not_wait_for_other_threads(void** state) {
  (void)state;
  PFObjectHandle g = new_gate();
  blocker b = {0};
  b.f = new_host(g, host_block, &b, NULL);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, call_blocker, &b), 0);
  while (!atomic_load(&b.entered)) pause_briefly();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(PFHostGateClose(g, "child", 0) == 0 ? 0 : 1);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  /* The parent still has the call in progress. */
  assert_pf_error(PFHostGateClose(g, "bye", 0), "TimeoutError", "1 call(s)");
  atomic_store(&b.release, 1);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_pf_ok(PFFuncFree(b.f));
  assert_pf_ok(PFObjectFree(g));
}

/* ---- bad input ---- */

static void test_bad_input(void** state) {
  (void)state;
  assert_pf_error(PFHostGateCreate(NULL), kPFErrTypeError, "PFHostGateCreate",
                  "argument 'out' is NULL");
  assert_pf_error(PFHostGateClose(NULL, "m", 0), kPFErrTypeError, "PFHostGateClose",
                  "argument 'gate' is NULL");
  PFFunctionHandle plain = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &plain));
  assert_pf_error(PFHostGateClose(plain, "m", 0), kPFErrTypeError,
                  "argument 'gate' is not a live host gate");

  atomic_int fin = 0;
  PFFunctionHandle f = NULL;
  /* Without a gate the finalizer runs directly, at once. */
  assert_pf_error(PFFuncCreateFromHostCFunc(NULL, host_mode, &fin, pf_test_count_fin, &f),
                  kPFErrTypeError, "PFFuncCreateFromHostCFunc", "argument 'gate' is NULL");
  assert_int_equal(atomic_load(&fin), 1);
  assert_pf_error(PFFuncCreateFromHostCFunc(plain, host_mode, &fin, pf_test_count_fin, &f),
                  kPFErrTypeError, "argument 'gate' is not a live host gate");
  assert_int_equal(atomic_load(&fin), 2);

  PFObjectHandle g = new_gate();
  assert_pf_error(PFFuncCreateFromHostCFunc(g, NULL, &fin, pf_test_count_fin, &f), kPFErrTypeError,
                  "argument 'func' is NULL");
  assert_int_equal(atomic_load(&fin), 3);
  assert_pf_error(PFFuncCreateFromHostCFunc(g, host_mode, &fin, pf_test_count_fin, NULL),
                  kPFErrTypeError, "argument 'out' is NULL");
  assert_int_equal(atomic_load(&fin), 4);
  assert_null(f);
  assert_pf_ok(PFFuncFree(plain));
  assert_pf_ok(PFObjectFree(g));
}

/* ---- the signal checker ---- */

static _Thread_local int t_block_in_checker;
static atomic_int g_checker_entered, g_checker_release, g_checker_done, g_checker_calls;

static int blocking_checker(void) {
  atomic_fetch_add(&g_checker_calls, 1);
  if (t_block_in_checker) {
    atomic_store(&g_checker_entered, 1);
    while (!atomic_load(&g_checker_release)) pause_briefly();
    atomic_store(&g_checker_done, 1);
  }
  return 0;
}

static void* check_signals_blocking(void* p) {
  (void)p;
  t_block_in_checker = 1;
  (void)PFEnvCheckSignals();
  return NULL;
}

/* Releases the blocked checker once the checker was replaced: when this
 * thread's own checks stop reaching it. */
static void* release_when_replaced(void* p) {
  (void)p;
  for (;;) {
    int before = atomic_load(&g_checker_calls);
    (void)PFEnvCheckSignals();
    if (atomic_load(&g_checker_calls) == before) break;
    pause_briefly();
  }
  atomic_store(&g_checker_release, 1);
  return NULL;
}

static void test_set_signal_checker_waits_for_old_callers(void** state) {
  (void)state;
  atomic_store(&g_checker_entered, 0);
  atomic_store(&g_checker_release, 0);
  atomic_store(&g_checker_done, 0);
  assert_pf_ok(PFEnvSetSignalChecker(blocking_checker));
  pthread_t th, rel;
  assert_int_equal(pthread_create(&th, NULL, check_signals_blocking, NULL), 0);
  while (!atomic_load(&g_checker_entered)) pause_briefly();
  assert_int_equal(pthread_create(&rel, NULL, release_when_replaced, NULL), 0);
  assert_pf_ok(PFEnvSetSignalChecker(NULL));
  /* It returned only after the old checker's call on the other thread. */
  assert_int_equal(atomic_load(&g_checker_done), 1);
  assert_int_equal(pthread_join(th, NULL), 0);
  assert_int_equal(pthread_join(rel, NULL), 0);
}

static atomic_int g_self_replacing_calls;

/* A checker that removes itself: its own call is not waited for. */
static int self_removing_checker(void) {
  atomic_fetch_add(&g_self_replacing_calls, 1);
  return PFEnvSetSignalChecker(NULL);
}

static void test_checker_may_replace_itself(void** state) {
  (void)state;
  atomic_store(&g_self_replacing_calls, 0);
  assert_pf_ok(PFEnvSetSignalChecker(self_removing_checker));
  assert_int_equal(PFEnvCheckSignals(), 0);
  assert_int_equal(PFEnvCheckSignals(), 0);
  assert_int_equal(atomic_load(&g_self_replacing_calls), 1);
}

static void test_fork_child_does_not_wait_for_old_checker_callers(void** state) {
  (void)state;
  atomic_store(&g_checker_entered, 0);
  atomic_store(&g_checker_release, 0);
  assert_pf_ok(PFEnvSetSignalChecker(blocking_checker));
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, check_signals_blocking, NULL), 0);
  while (!atomic_load(&g_checker_entered)) pause_briefly();
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) _exit(PFEnvSetSignalChecker(NULL) == 0 ? 0 : 1);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  atomic_store(&g_checker_release, 1);
  assert_pf_ok(PFEnvSetSignalChecker(NULL));
  assert_int_equal(pthread_join(th, NULL), 0);
}

/* ---- host objects ---- */

static atomic_int g_obj_fins;
static void count_obj_fin(void* payload) {
  assert_ptr_equal(payload, &g_obj_fins);
  atomic_fetch_add(&g_obj_fins, 1);
}

static void test_host_objects(void** state) {
  (void)state;
  atomic_store(&g_obj_fins, 0);
  PFObjectHandle g = new_gate(), other = new_gate(), obj = NULL;
  assert_pf_ok(PFHostObjectCreate(g, &g_obj_fins, count_obj_fin, &obj));
  uint32_t ti = 0;
  assert_pf_ok(PFObjectGetTypeIndex(obj, &ti));
  assert_int_equal(ti, kPFObjectHostObject);
  assert_string_equal(PFObjectTypeName(ti), "host object");
  void* p = NULL;
  assert_pf_ok(PFHostObjectGetPayload(obj, g, &p));
  assert_ptr_equal(p, &g_obj_fins);
  /* A host recognizes its own objects only. */
  assert_pf_error(PFHostObjectGetPayload(obj, other, &p), kPFErrTypeError, "PFHostObjectGetPayload",
                  "another gate");
  assert_pf_error(PFHostObjectGetPayload(g, g, &p), kPFErrTypeError,
                  "argument 'obj' is not a live host object handle");
  assert_pf_error(PFHostObjectGetPayload(obj, obj, &p), kPFErrTypeError,
                  "argument 'gate' is not a live host gate handle");
  assert_pf_error(PFHostObjectGetPayload(obj, g, NULL), kPFErrTypeError, "argument 'out' is NULL");
  /* It travels through a call as an object, and the finalizer runs once. */
  PFFunctionHandle echo = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &echo));
  PFValue v = {.v_handle = obj}, rv;
  int code = kPFObjectHandle, rc;
  assert_pf_ok(PFFuncCall(echo, &v, &code, 1, &rv, &rc));
  assert_int_equal(rc, kPFObjectHandle);
  assert_ptr_equal(rv.v_handle, obj);
  assert_pf_ok(PFObjectFree(rv.v_handle));
  assert_pf_ok(PFObjectFree(obj));
  assert_int_equal(atomic_load(&g_obj_fins), 1);
  PFFuncFree(echo);

  /* A failed create runs the finalizer at once, through the gate. */
  assert_pf_error(PFHostObjectCreate(g, &g_obj_fins, count_obj_fin, NULL), kPFErrTypeError,
                  "PFHostObjectCreate: argument 'out' is NULL");
  assert_int_equal(atomic_load(&g_obj_fins), 2);
  assert_pf_error(PFHostObjectCreate(NULL, &g_obj_fins, count_obj_fin, &obj), kPFErrTypeError,
                  "argument 'gate' is NULL");
  assert_int_equal(atomic_load(&g_obj_fins), 3);

  /* After the gate closes, the finalizer is skipped. */
  assert_pf_ok(PFHostObjectCreate(g, &g_obj_fins, count_obj_fin, &obj));
  assert_pf_ok(PFHostGateClose(g, "host gone", 0));
  assert_pf_ok(PFObjectFree(obj));
  assert_int_equal(atomic_load(&g_obj_fins), 3);
  assert_pf_error(PFHostObjectCreate(g, &g_obj_fins, count_obj_fin, NULL), kPFErrTypeError,
                  "argument 'out' is NULL");
  assert_int_equal(atomic_load(&g_obj_fins), 3);
  PFObjectFree(g);
  PFObjectFree(other);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_objects),
      cmocka_unit_test(test_gate_is_an_object),
      cmocka_unit_test(test_status_decides_the_result),
      cmocka_unit_test(test_finalizer_gets_the_resource_through_the_gate),
      cmocka_unit_test(test_closed_gate_refuses_calls_and_skips_finalizers),
      cmocka_unit_test(test_close_without_message),
      cmocka_unit_test(test_close_from_inside_a_nested_call),
      cmocka_unit_test(test_close_times_out_while_another_thread_is_inside),
      cmocka_unit_test(test_close_waits_for_calls_on_other_threads),
      cmocka_unit_test(test_close_waits_for_a_finalizer_in_progress),
      cmocka_unit_test(test_fork_child_does_not_wait_for_other_threads),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_set_signal_checker_waits_for_old_callers),
      cmocka_unit_test(test_checker_may_replace_itself),
      cmocka_unit_test(test_fork_child_does_not_wait_for_old_checker_callers),
      cmocka_unit_test(test_close_sees_nested_calls_through_two_gates),
      cmocka_unit_test(test_close_during_a_storm_of_calls),
      cmocka_unit_test(test_exited_threads_are_not_waited_for),
  };
  /* Twice: with calls counted in per-thread seats (where the kernel has
   * the barrier they need), then in the gates' shared state alone. */
  pf_gate_seats_enable(1);
  int failed = cmocka_run_group_tests_name("seats", tests, NULL, NULL);
  pf_gate_seats_enable(0);
  return failed + cmocka_run_group_tests_name("shared state", tests, NULL, NULL);
}
