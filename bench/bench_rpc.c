/*
 * Benchmarks of remote functions (libpackedfunc_rpc). Every figure is a
 * ratio against a floor measured in the same run, between the same two
 * processes: this one (the client) and a forked server process that runs
 * both a packedfunc server and a floor written on raw ZeroMQ and msgpack-c
 * (a ROUTER thread that decodes each add request, adds and encodes the
 * reply, and echoes a tensor's frames back as they came, without a copy).
 *
 *   rpc_add          a remote add(1, 2), mean round trip, against the raw
 *                    DEALER/ROUTER round trip doing the same add;
 *   rpc_add_p50/p99  the same, the median and the 99th percentile of the
 *                    single round trips of a trial, against the floor's;
 *   rpc_add_4threads calls from 4 client threads on one connection
 *                    (ns per call, the inverse of throughput), against 4
 *                    threads with a raw DEALER each;
 *   rpc_tensor       a 64 MiB float32 tensor object there and back (echo),
 *                    against raw ZeroMQ sending the same bytes each way as
 *                    zero-copy messages (zmq_msg_init_data);
 *   rpc_8servers     calls per second from 8 client threads with 8 server
 *                    processes behind one connection (calls spread evenly),
 *                    against the same with 1 server (reported, no target: on
 *                    a machine with fewer cores than servers it measures the
 *                    spreading's cost more than its gain).
 *
 * Output: one JSON object per row, as bench_c.c prints them, for
 * bench/report.py. --quick runs short trials (the test command runs it).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "internal.h"
#include "bench_measure.h"

static void die(const char* what) {
  fprintf(stderr, "bench_rpc: %s: %s\n", what, PFGetLastError());
  exit(1);
}

#define TENSOR_BYTES ((size_t)64 << 20)

/* ---- the raw floor: the same add on raw ZeroMQ and msgpack-c ---- */

static _Alignas(64) uint8_t g_tensor_data[TENSOR_BYTES];

/* Packs [V, CALL, id, 0, "bench.add", [x, y]] as the floor's request. */
static void pack_add_request(msgpack_sbuffer* sb, uint64_t id, int64_t x, int64_t y) {
  msgpack_packer pk;
  msgpack_sbuffer_clear(sb);
  pf_rpc_packer_init(&pk, sb);
  pf_rpc_pack_header(&pk, PF_RPC_CALL, id, 0, 2);
  msgpack_pack_str(&pk, 9);
  msgpack_pack_str_body(&pk, "bench.add", 9);
  msgpack_pack_array(&pk, 2);
  msgpack_pack_int64(&pk, x);
  msgpack_pack_int64(&pk, y);
}

/* The element `i` of a decoded message, or NULL. */
static const msgpack_object* item(const msgpack_object* o, uint32_t i) {
  return o->type == MSGPACK_OBJECT_ARRAY && i < o->via.array.size ? &o->via.array.ptr[i] : NULL;
}

/* Decodes an add request and packs its OK reply; -1 when it is none. */
static int raw_answer_add(const char* data, size_t n, msgpack_unpacked* up, msgpack_sbuffer* out) {
  if (msgpack_unpack_next(up, data, n, NULL) != MSGPACK_UNPACK_SUCCESS) return -1;
  const msgpack_object *id = item(&up->data, 2), *args = item(&up->data, 5);
  const msgpack_object *x = args ? item(args, 0) : NULL, *y = args ? item(args, 1) : NULL;
  if (!id || !x || !y) return -1;
  msgpack_packer pk;
  msgpack_sbuffer_clear(out);
  pf_rpc_packer_init(&pk, out);
  pf_rpc_pack_header(&pk, PF_RPC_OK, id->via.u64, 0, 1);
  msgpack_pack_int64(&pk, x->via.i64 + y->via.i64);
  return 0;
}

/* The floor's server: answers adds, and sends every frame of a message
 * of several frames (a tensor's) back as it came, without a copy. */
static void* raw_server(void* sock) {
  msgpack_unpacked up;
  msgpack_unpacked_init(&up);
  msgpack_sbuffer out;
  msgpack_sbuffer_init(&out);
  for (;;) {
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&id, sock, 0) < 0 || zmq_msg_recv(&body, sock, 0) < 0) break;
    if (zmq_msg_send(&id, sock, ZMQ_SNDMORE) < 0) break;
    if (zmq_msg_more(&body)) {
      int more = 1;
      while (more) {
        more = zmq_msg_more(&body);
        if (zmq_msg_send(&body, sock, more ? ZMQ_SNDMORE : 0) < 0) return NULL;
        if (more && zmq_msg_recv(&body, sock, 0) < 0) return NULL;
      }
    } else if (raw_answer_add(zmq_msg_data(&body), zmq_msg_size(&body), &up, &out) == 0) {
      zmq_send(sock, out.data, out.size, 0);
    } else {
      zmq_send(sock, "", 0, 0);
    }
    zmq_msg_close(&id);
    zmq_msg_close(&body);
  }
  return NULL;
}

/* ---- the server process ---- */

static int64_t add_typed(int64_t x, int64_t y) { return x + y; }
static int echo(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1) return PFErrorSetFormat(kPFErrTypeError, "echo: one argument");
  return PFCFuncSetReturn(ret, &a[0], &c[0], 1);
}

/* Forks a server; returns its pid and writes its two endpoints. */
static pid_t start_server(char* rpc_ep, char* raw_ep) {
  int fds[2];
  if (pipe(fds) != 0) die("pipe");
  pid_t pid = fork();
  if (pid < 0) die("fork");
  if (pid == 0) {
    close(fds[0]);
    PFFunctionHandle f = NULL;
    if (PFFuncCreateFromTyped((void*)add_typed, "int64(int64,int64)", &f) != 0 ||
        PFFuncRegisterGlobal("bench.add", f, 1) != 0)
      die("register");
    PFFuncFree(f);
    if (PFFuncCreateFromCFunc(echo, NULL, NULL, &f) != 0 ||
        PFFuncRegisterGlobal("bench.echo", f, 1) != 0)
      die("register");
    PFFuncFree(f);
    const char* expose[] = {"bench."};
    PFRPCServerOptions o = {0};
    o.expose = expose;
    o.num_expose = 1;
    o.num_workers = 2;
    PFRPCServerHandle s = NULL;
    const char* ep = NULL;
    if (PFRPCServe("tcp://127.0.0.1:*", &o, &s) != 0 || PFRPCServerGetEndpoint(s, &ep) != 0)
      die("PFRPCServe");
    char buf[256] = {0};
    snprintf(buf, 128, "%s", ep);
    void* ctx = zmq_ctx_new();
    void* sock = zmq_socket(ctx, ZMQ_ROUTER);
    if (zmq_bind(sock, "tcp://127.0.0.1:*") != 0) die("raw bind");
    size_t len = 128;
    zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, buf + 128, &len);
    if (write(fds[1], buf, sizeof buf) != (ssize_t)sizeof buf) _exit(1);
    raw_server(sock);
    _exit(0);
  }
  close(fds[1]);
  char buf[256];
  if (read(fds[0], buf, sizeof buf) != (ssize_t)sizeof buf) die("server start");
  close(fds[0]);
  memcpy(rpc_ep, buf, 128);
  memcpy(raw_ep, buf + 128, 128);
  return pid;
}

/* ---- cases ---- */

static PFFunctionHandle g_add, g_echo, g_add2;
static PFObjectHandle g_tensor_obj;
static void* g_ctx;
static void* g_raw; /* the floor's DEALER of the main thread */
static char g_raw_ep[128];

static void rpc_add_once(void) {
  PFValue a[2] = {{.v_int64 = 1}, {.v_int64 = 2}}, rv;
  int c[2] = {kPFInt, kPFInt}, rc;
  if (PFFuncCall(g_add, a, c, 2, &rv, &rc) != 0 || rv.v_int64 != 3) die("remote add");
}
static void run_add(long n) {
  for (long i = 0; i < n; ++i) rpc_add_once();
}

/* The floor's add: packs the request, sends it, decodes the reply. */
typedef struct {
  void* sock;
  msgpack_sbuffer req;
  msgpack_unpacked up;
  uint64_t next_id;
} raw_client;

static void raw_client_open(raw_client* rc, void* sock) {
  rc->sock = sock;
  msgpack_sbuffer_init(&rc->req);
  msgpack_unpacked_init(&rc->up);
  rc->next_id = 1;
}
static void raw_client_close(raw_client* rc) {
  msgpack_sbuffer_destroy(&rc->req);
  msgpack_unpacked_destroy(&rc->up);
}

static void raw_add_once(raw_client* rc) {
  pack_add_request(&rc->req, rc->next_id++, 1, 2);
  if (zmq_send(rc->sock, rc->req.data, rc->req.size, 0) < 0) die("raw send");
  zmq_msg_t m;
  zmq_msg_init(&m);
  if (zmq_msg_recv(&m, rc->sock, 0) < 0 ||
      msgpack_unpack_next(&rc->up, zmq_msg_data(&m), zmq_msg_size(&m), NULL) !=
          MSGPACK_UNPACK_SUCCESS)
    die("raw recv");
  const msgpack_object* v = item(&rc->up.data, 4);
  if (v == NULL || v->via.i64 != 3) die("raw add");
  zmq_msg_close(&m);
}

static raw_client g_raw_client;
static void raw_add_main(void) { raw_add_once(&g_raw_client); }
static void raw_add(long n) {
  for (long i = 0; i < n; ++i) raw_add_main();
}

static void run_tensor(long n) {
  PFValue t = {.v_handle = g_tensor_obj}, rv;
  int tc = kPFObjectHandle, rc;
  for (long i = 0; i < n; ++i) {
    if (PFFuncCall(g_echo, &t, &tc, 1, &rv, &rc) != 0) die("remote echo");
    PFObjectFree(rv.v_handle);
  }
}

static void no_free(void* data, void* hint) { (void)data, (void)hint; }

/* The floor's echo: a small header frame and the data as a zero-copy
 * frame, there and back. */
static void raw_tensor(long n) {
  for (long i = 0; i < n; ++i) {
    zmq_msg_t data;
    zmq_msg_init_data(&data, g_tensor_data, TENSOR_BYTES, no_free, NULL);
    if (zmq_send(g_raw, "tensor", 6, ZMQ_SNDMORE) < 0 || zmq_msg_send(&data, g_raw, 0) < 0)
      die("raw send");
    size_t got = 0;
    int more = 1;
    while (more) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      if (zmq_msg_recv(&m, g_raw, 0) < 0) die("raw recv");
      got += zmq_msg_size(&m);
      more = zmq_msg_more(&m);
      zmq_msg_close(&m);
    }
    if (got != TENSOR_BYTES + 6) die("raw echo");
  }
}

/* ---- threads ---- */

typedef struct {
  PFFunctionHandle f; /* NULL: the floor's add on a DEALER of its own */
  long n;
} thread_arg;

static void* hammer(void* p) {
  thread_arg* t = p;
  PFValue a[2] = {{.v_int64 = 1}, {.v_int64 = 2}}, rv;
  int c[2] = {kPFInt, kPFInt}, rc;
  if (t->f != NULL) {
    for (long i = 0; i < t->n; ++i)
      if (PFFuncCall(t->f, a, c, 2, &rv, &rc) != 0) die("remote add (threads)");
    return NULL;
  }
  raw_client raw;
  raw_client_open(&raw, zmq_socket(g_ctx, ZMQ_DEALER));
  if (zmq_connect(raw.sock, g_raw_ep) != 0) die("raw connect");
  for (long i = 0; i < t->n; ++i) raw_add_once(&raw);
  zmq_close(raw.sock);
  raw_client_close(&raw);
  return NULL;
}

static void threads_on(PFFunctionHandle f, int nthreads, long n) {
  pthread_t th[16];
  thread_arg arg = {f, n / nthreads + 1};
  for (int i = 0; i < nthreads; ++i) pthread_create(&th[i], NULL, hammer, &arg);
  for (int i = 0; i < nthreads; ++i) pthread_join(th[i], NULL);
}

#define NSERVERS 8

static void rpc_4threads(long n) { threads_on(g_add, 4, n); }
static void raw_4threads(long n) { threads_on(NULL, 4, n); }
static void many_servers(long n) { threads_on(g_add2, 8, n); }
static void one_server(long n) { threads_on(g_add, 8, n); }

/* ---- measuring ---- */

static int g_trials = 11;

static void measure(const char* id, const char* what, void (*run)(long), const char* base_id,
                    const char* base_what, void (*base)(long), double target, long n) {
  bench_stats sa, sb, sr;
  bench_interleave(run, base, n, g_trials, &sa, &sb, &sr);
  char extra[96];
  snprintf(extra, sizeof extra, ", \"per_second\": %.0f, \"base_per_second\": %.0f", 1e9 / sa.med,
           1e9 / sb.med);
  bench_print_row(id, what, base_id, base_what, sa, sb, sr, target, g_trials, n, extra);
}

/* Times each of n calls of once() and sorts the times. */
static void time_each(void (*once)(void), long n, double* ns) {
  for (long i = 0; i < n; ++i) {
    double t0 = bench_now_ns();
    once();
    ns[i] = bench_now_ns() - t0;
  }
  qsort(ns, (size_t)n, sizeof *ns, bench_cmp);
}

/* Rows of the median and the 99th percentile of single round trips, in
 * interleaved trials of n calls each (the ratio taken per trial). */
static void measure_latency(long n) {
  double *a = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
  double q[2][3][BENCH_MAX_TRIALS]; /* [p50, p99][rpc, raw, ratio][trial] */
  if (a == NULL || b == NULL) die("out of memory");
  time_each(rpc_add_once, n / 10 + 1, a);
  time_each(raw_add_main, n / 10 + 1, b);
  for (int t = 0; t < g_trials; ++t) {
    if (t % 2) time_each(rpc_add_once, n, a), time_each(raw_add_main, n, b);
    else time_each(raw_add_main, n, b), time_each(rpc_add_once, n, a);
    for (int k = 0; k < 2; ++k) {
      long at = k == 0 ? n / 2 : n * 99 / 100;
      q[k][0][t] = a[at];
      q[k][1][t] = b[at];
      q[k][2][t] = a[at] / b[at];
    }
  }
  static const char* const ids[2] = {"rpc_add_p50", "rpc_add_p99"};
  static const char* const base_ids[2] = {"zmq_add_p50", "zmq_add_p99"};
  static const char* const whats[2] = {"remote add(1, 2), median single round trip",
                                       "remote add(1, 2), 99th percentile round trip"};
  static const char* const base_whats[2] = {"the raw ZeroMQ + msgpack add's median",
                                            "the raw ZeroMQ + msgpack add's 99th percentile"};
  static const double targets[2] = {1.3, 1.5};
  for (int k = 0; k < 2; ++k)
    bench_print_row(ids[k], whats[k], base_ids[k], base_whats[k],
                    bench_summarize(q[k][0], g_trials), bench_summarize(q[k][1], g_trials),
                    bench_summarize(q[k][2], g_trials), targets[k], g_trials, n, "");
  free(a);
  free(b);
}

static void tensor_deleter(DLManagedTensor* m) { (void)m; }

int main(int argc, char** argv) {
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  double scale = quick ? 0.1 : 1.0;
  if (quick) g_trials = 3;
  signal(SIGPIPE, SIG_IGN);
  for (size_t i = 0; i < sizeof g_tensor_data; ++i) g_tensor_data[i] = (uint8_t)(i * 7);
  char rpc_eps[NSERVERS][128], raw_eps[NSERVERS][128];
  pid_t pids[NSERVERS];
  for (int i = 0; i < NSERVERS; ++i) pids[i] = start_server(rpc_eps[i], raw_eps[i]);
  snprintf(g_raw_ep, sizeof g_raw_ep, "%s", raw_eps[0]);

  /* float32, as most tensors are, held by a tensor object. */
  static int64_t shape[1] = {TENSOR_BYTES / 4};
  static DLManagedTensor managed = {
      {g_tensor_data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, shape, NULL, 0}, NULL, tensor_deleter};
  if (PFTensorCreateFromDLPack(&managed, &g_tensor_obj) != 0) die("tensor");

  PFModuleHandle m1 = NULL, m2 = NULL;
  PFRPCOptions o = {0};
  o.timeout_ms = 60000;
  if (PFRPCConnect(rpc_eps[0], &o, &m1) != 0) die("connect");
  char all[NSERVERS * 130] = "";
  for (int i = 0; i < NSERVERS; ++i)
    snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", i ? "," : "", rpc_eps[i]);
  if (PFRPCConnect(all, &o, &m2) != 0) die("connect to all");
  if (PFModGetFunction(m1, "bench.add", 0, &g_add) != 0 || g_add == NULL ||
      PFModGetFunction(m1, "bench.echo", 0, &g_echo) != 0 || g_echo == NULL ||
      PFModGetFunction(m2, "bench.add", 0, &g_add2) != 0 || g_add2 == NULL)
    die("functions");
  g_ctx = zmq_ctx_new();
  g_raw = zmq_socket(g_ctx, ZMQ_DEALER);
  if (zmq_connect(g_raw, g_raw_ep) != 0) die("raw connect");
  raw_client_open(&g_raw_client, g_raw);

  measure("rpc_add", "remote add(1, 2) round trip (127.0.0.1)", run_add, "zmq_add",
          "the raw ZeroMQ DEALER/ROUTER + msgpack add", raw_add, 1.3, (long)(2000 * scale));
  measure_latency((long)(2000 * scale));
  /* Throughput: at least 0.85x the floor's calls per second, that is at
   * most 1/0.85 its time per call. */
  measure("rpc_add_4threads", "remote adds from 4 threads, one connection (ns per call)",
          rpc_4threads, "zmq_add_4threads", "the raw add from 4 threads, a DEALER each",
          raw_4threads, 1 / 0.85, (long)(8000 * scale));
  /* Bandwidth: at least 0.95x the floor's. */
  measure("rpc_tensor", "64 MiB float32 tensor echo (time per round trip)", run_tensor,
          "zmq_tensor", "raw ZeroMQ zero-copy frames of the same bytes, there and back", raw_tensor,
          1 / 0.95, quick ? 1 : 3);
  measure("rpc_8servers", "calls from 8 threads, 8 server processes (ns per call)", many_servers,
          "rpc_1server", "the same with 1 server", one_server, 0, (long)(8000 * scale));

  PFFuncFree(g_add);
  PFFuncFree(g_echo);
  PFFuncFree(g_add2);
  PFObjectFree(g_tensor_obj);
  PFRPCDisconnect(m1);
  PFRPCDisconnect(m2);
  PFModFree(m1);
  PFModFree(m2);
  raw_client_close(&g_raw_client);
  zmq_close(g_raw);
  zmq_ctx_term(g_ctx);
  for (int i = 0; i < NSERVERS; ++i) {
    kill(pids[i], SIGKILL);
    waitpid(pids[i], NULL, 0);
  }
  return 0;
}
