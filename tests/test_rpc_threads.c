/* Remote functions under threads and faults: three servers behind one
 * client with calls from four threads (each call answered exactly once,
 * each server getting a share), and a server killed in the middle of a
 * call (that call fails with ConnectionError, the others succeed, and
 * nothing is lost or run twice). Also run under ThreadSanitizer. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <pthread.h>

#include "packedfunc/rpc.h"
#include "support/pf_test.h"
#include "support/pf_zmq_tsan.h"

#define NSERVERS 3

/* Each forked server knows its index (g_tag); its t.count returns
 * tag * 1e9 + its argument and reports each call it runs through a pipe,
 * so that the parent can count what every server ran. */
static int g_tag = -1;    /* in a child: its server index */
static int g_report = -1; /* in a child: a pipe to the parent */

static int f_count(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)c, (void)n, (void)r;
  PFValue v = {.v_int64 = g_tag * 1000000000LL + a[0].v_int64};
  int code = kPFInt;
  if (g_report >= 0) {
    char b = 1;
    if (write(g_report, &b, 1) != 1) return PFErrorSetFormat(kPFErrRuntimeError, "report");
  }
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* t.block(): tells the parent it started, then waits forever. */
static int g_started = -1;
static int f_block(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)a, (void)c, (void)n, (void)ret, (void)r;
  if (g_tag == 0 && g_started >= 0) {
    char b = 1;
    if (write(g_started, &b, 1) != 1) return -1;
    for (;;) pause();
  }
  return 0; /* elsewhere it returns at once */
}

static void reg(const char* name, PFPackedCFunc fn) {
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(fn, NULL, NULL, &f) != 0 || PFFuncRegisterGlobal(name, f, 1) != 0)
    abort();
  PFFuncFree(f);
}

typedef struct {
  pid_t pid;
  char endpoint[128];
  int report; /* the read end of the child's report pipe, or -1 */
} child_server;

/* Forks a process that serves "t." and writes its endpoint to a pipe. */
static void start_child(child_server* cs, int tag, int report_calls, int started_fd) {
  int ep[2], rep[2] = {-1, -1};
  assert_int_equal(pipe(ep), 0);
  if (report_calls) assert_int_equal(pipe(rep), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion leaves no server behind */
    close(ep[0]);
    if (rep[0] >= 0) close(rep[0]);
    g_tag = tag;
    g_report = rep[1];
    g_started = started_fd;
    const char* expose[] = {"t."};
    PFRPCServerOptions o = {0};
    o.expose = expose;
    o.num_expose = 1;
    o.num_workers = 2;
    PFRPCServerHandle s = NULL;
    const char* e = NULL;
    if (PFRPCServe("tcp://127.0.0.1:*", &o, &s) != 0 || PFRPCServerGetEndpoint(s, &e) != 0)
      _exit(3);
    char buf[128] = {0};
    snprintf(buf, sizeof buf, "%s", e);
    if (write(ep[1], buf, sizeof buf) != (ssize_t)sizeof buf) _exit(4);
    close(ep[1]);
    for (;;) pause(); /* until killed */
  }
  close(ep[1]);
  if (rep[1] >= 0) close(rep[1]);
  cs->pid = pid;
  cs->report = rep[0];
  assert_int_equal(read(ep[0], cs->endpoint, sizeof cs->endpoint), (ssize_t)sizeof cs->endpoint);
  close(ep[0]);
}

static int setup(void** state) {
  (void)state;
  reg("t.count", f_count);
  reg("t.block", f_block);
  return 0;
}

static int calls_per_thread(void) { return getenv("PF_UNDER_VALGRIND") ? 300 : 10000; }

typedef struct {
  PFFunctionHandle f;
  int thread;
  int n;
  long per_server[NSERVERS];
  int errors;
  int wrong;
} worker_arg;

static void* caller(void* p) {
  worker_arg* w = p;
  for (int i = 0; i < w->n; ++i) {
    PFValue a = {.v_int64 = w->thread * 100000 + i};
    int c = kPFInt;
    PFValue rv;
    int rc;
    if (PFFuncCall(w->f, &a, &c, 1, &rv, &rc) != 0) {
      w->errors++;
      continue;
    }
    int64_t tag = rv.v_int64 / 1000000000LL, echo = rv.v_int64 % 1000000000LL;
    if (tag < 0 || tag >= NSERVERS || echo != a.v_int64) w->wrong++;
    else w->per_server[tag]++;
  }
  return NULL;
}

static void test_three_servers_four_threads(void** state) {
  (void)state;
  child_server cs[NSERVERS];
  for (int k = 0; k < NSERVERS; ++k) start_child(&cs[k], k, 1, -1);
  char eps[512];
  snprintf(eps, sizeof eps, "%s,%s,%s", cs[0].endpoint, cs[1].endpoint, cs[2].endpoint);
  PFRPCOptions o = {0};
  o.timeout_ms = 60000;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(eps, &o, &m));
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.count", 0, &f));
  /* A few calls first, until every server has connected, so that the
   * spreading below is over all three. */
  worker_arg warm = {f, 9, 30, {0}, 0, 0};
  for (int tries = 0; tries < 200; ++tries) {
    caller(&warm);
    if (warm.per_server[0] && warm.per_server[1] && warm.per_server[2]) break;
  }
  pthread_t t[4];
  worker_arg w[4];
  int n = calls_per_thread();
  for (int i = 0; i < 4; ++i) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].f = f;
    w[i].thread = i;
    w[i].n = n;
    assert_int_equal(pthread_create(&t[i], NULL, caller, &w[i]), 0);
  }
  long per_server[NSERVERS] = {0};
  for (int i = 0; i < 4; ++i) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].errors, 0);
    assert_int_equal(w[i].wrong, 0);
    for (int k = 0; k < NSERVERS; ++k) per_server[k] += w[i].per_server[k];
  }
  long total = 0;
  for (int k = 0; k < NSERVERS; ++k) {
    assert_true(per_server[k] > 0); /* each server got a share */
    total += per_server[k] + warm.per_server[k];
  }
  assert_int_equal(per_server[0] + per_server[1] + per_server[2], 4L * n);
  /* Each server ran exactly the calls whose replies came from it: count
   * the bytes each child wrote, one per call it ran. */
  PFFuncFree(f);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  long ran = 0;
  for (int k = 0; k < NSERVERS; ++k) {
    kill(cs[k].pid, SIGKILL);
    waitpid(cs[k].pid, NULL, 0);
    char buf[4096];
    ssize_t got;
    long mine = 0;
    while ((got = read(cs[k].report, buf, sizeof buf)) > 0) mine += got;
    close(cs[k].report);
    assert_int_equal(mine, per_server[k] + warm.per_server[k]);
    ran += mine;
  }
  assert_int_equal(ran, total);
}

typedef struct {
  PFFunctionHandle block;
  int status;
  char kind[64];
  int tries;
} block_arg;

static void* call_block(void* p) {
  block_arg* b = p;
  PFValue rv;
  int rc;
  /* Calls to the second server return at once; the first call that
   * reaches server 0 blocks there until it is killed. */
  for (b->tries = 0; b->tries < 100; ++b->tries) {
    b->status = PFFuncCall(b->block, NULL, NULL, 0, &rv, &rc);
    if (b->status != 0) break;
  }
  snprintf(b->kind, sizeof b->kind, "%s", PFErrorGetKind());
  return NULL;
}

static void test_kill_server_mid_call(void** state) {
  (void)state;
  int started[2];
  assert_int_equal(pipe(started), 0);
  child_server victim, other;
  start_child(&victim, 0, 1, started[1]);
  start_child(&other, 1, 1, -1);
  close(started[1]);
  char eps[300];
  snprintf(eps, sizeof eps, "%s,%s", victim.endpoint, other.endpoint);
  PFRPCOptions o = {0};
  o.timeout_ms = 60000; /* the failure must come from the death, not a timeout */
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(eps, &o, &m));
  block_arg b = {0};
  assert_pf_ok(PFModGetFunction(m, "t.block", 0, &b.block));
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, call_block, &b), 0);
  char x;
  assert_int_equal(read(started[0], &x, 1), 1); /* a call is in progress on the victim */
  /* Meanwhile other calls go on, on both servers. */
  PFFunctionHandle count = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.count", 0, &count));
  worker_arg w = {count, 1, 200, {0}, 0, 0};
  caller(&w);
  assert_int_equal(w.errors, 0);
  kill(victim.pid, SIGKILL);
  waitpid(victim.pid, NULL, 0);
  pthread_join(t, NULL);
  assert_int_equal(b.status, -1);
  assert_string_equal(b.kind, "ConnectionError");
  /* After the death, calls go to the server that is left and succeed. */
  worker_arg after = {count, 2, 200, {0}, 0, 0};
  caller(&after);
  assert_int_equal(after.errors, 0);
  assert_int_equal(after.per_server[0], 0);
  assert_int_equal(after.per_server[1], 200);
  /* Nothing lost, nothing run twice: each server ran exactly the calls
   * that came back from it. */
  char buf[4096];
  ssize_t got;
  long ran0 = 0, ran1 = 0;
  while ((got = read(victim.report, buf, sizeof buf)) > 0) ran0 += got;
  assert_int_equal(ran0, w.per_server[0]);
  PFFuncFree(count);
  PFFuncFree(b.block);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  kill(other.pid, SIGKILL);
  waitpid(other.pid, NULL, 0);
  while ((got = read(other.report, buf, sizeof buf)) > 0) ran1 += got;
  assert_int_equal(ran1, w.per_server[1] + after.per_server[1]);
  close(victim.report);
  close(other.report);
  close(started[0]);
}

/* A server that stops answering without closing its connection (a frozen
 * process, a cut cable): the heartbeats notice, and the call in flight
 * fails with ConnectionError long before its timeout would say
 * TimeoutError. */
static void test_frozen_server_is_connection_error(void** state) {
  (void)state;
  int started[2];
  assert_int_equal(pipe(started), 0);
  child_server victim;
  start_child(&victim, 0, 0, started[1]);
  close(started[1]);
  PFRPCOptions o = {0};
  o.timeout_ms = 60000;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(victim.endpoint, &o, &m));
  block_arg b = {0};
  assert_pf_ok(PFModGetFunction(m, "t.block", 0, &b.block));
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, call_block, &b), 0);
  char x;
  assert_int_equal(read(started[0], &x, 1), 1);
  kill(victim.pid, SIGSTOP); /* its sockets stay open; it just never answers */
  pthread_join(t, NULL);
  assert_int_equal(b.status, -1);
  assert_string_equal(b.kind, "ConnectionError");
  kill(victim.pid, SIGKILL);
  kill(victim.pid, SIGCONT);
  waitpid(victim.pid, NULL, 0);
  PFFuncFree(b.block);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
  close(started[0]);
}

/* In-process: many threads through one connection to one server, with a
 * server stopped while calls are in flight. */
static void* call_until_error(void* p) {
  worker_arg* w = p;
  for (int i = 0; i < w->n; ++i) {
    PFValue a = {.v_int64 = i};
    int c = kPFInt;
    PFValue rv;
    int rc;
    if (PFFuncCall(w->f, &a, &c, 1, &rv, &rc) != 0) {
      if (strcmp(PFErrorGetKind(), "ConnectionError") != 0) w->wrong++;
      w->errors++;
      break; /* the server is gone: later calls would each wait out the timeout */
    } else {
      w->per_server[0]++;
    }
  }
  return NULL;
}

static void test_stop_server_under_load(void** state) {
  (void)state;
  const char* expose[] = {"t."};
  PFRPCServerOptions so = {0};
  so.expose = expose;
  so.num_expose = 1;
  PFRPCServerHandle s = NULL;
  const char* ep = NULL;
  assert_pf_ok(PFRPCServe("tcp://127.0.0.1:*", &so, &s));
  assert_pf_ok(PFRPCServerGetEndpoint(s, &ep));
  PFRPCOptions o = {0};
  o.timeout_ms = 2000;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFRPCConnect(ep, &o, &m));
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.count", 0, &f));
  pthread_t t[3];
  worker_arg w[3];
  int n = getenv("PF_UNDER_VALGRIND") ? 100 : 2000;
  for (int i = 0; i < 3; ++i) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].f = f;
    w[i].n = n;
    assert_int_equal(pthread_create(&t[i], NULL, call_until_error, &w[i]), 0);
  }
  /* Let some calls through, then stop the server under them. */
  worker_arg first = {f, 0, 50, {0}, 0, 0};
  call_until_error(&first);
  assert_int_equal(first.errors, 0);
  assert_pf_ok(PFRPCServerStop(s));
  for (int i = 0; i < 3; ++i) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].wrong, 0); /* only ConnectionErrors */
    assert_true(w[i].errors <= 1);
    assert_true(w[i].per_server[0] + w[i].errors <= n);
  }
  PFFuncFree(f);
  assert_pf_ok(PFRPCDisconnect(m));
  PFModFree(m);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_three_servers_four_threads),
      cmocka_unit_test(test_kill_server_mid_call),
      cmocka_unit_test(test_stop_server_under_load),
      cmocka_unit_test(test_frozen_server_is_connection_error),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
