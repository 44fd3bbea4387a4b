/*
 * Benchmarks of remote functions (libpackedfunc_rpc). Every figure is a
 * ratio against a baseline measured in the same run, between the same two
 * processes: this one (the client) and a forked server process that runs
 * both a packedfunc server and a raw ZeroMQ ROUTER which answers each
 * request with the very bytes the packedfunc server would send.
 *
 *   rpc_add        a remote add(1, 2), against a raw ZeroMQ request/reply
 *                  of the same bytes (DEALER to ROUTER, one thread each);
 *   rpc_tensor     a 1 MB float32 tensor there and back (echo), against the raw
 *                  transfer of the same bytes both ways;
 *   rpc_8servers   calls per second from 8 client threads with 8 server
 *                  processes behind one connection (calls spread evenly),
 *                  against the same with 1 server (reported, no target: on
 *                  a machine with fewer cores than servers it measures the
 *                  spreading's cost more than its gain).
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

#define TENSOR_BYTES (1 << 20)

/* ---- the messages the packedfunc server would send ---- */

static _Alignas(16) uint8_t g_tensor_data[TENSOR_BYTES];

static void pack_request(msgpack_sbuffer* sb, const char* name, PFValue* args, int* codes, int n) {
  msgpack_packer pk;
  pf_rpc_packer_init(&pk, sb);
  pf_rpc_pack_header(&pk, PF_RPC_CALL, 1, 0, 2);
  msgpack_pack_str(&pk, strlen(name));
  msgpack_pack_str_body(&pk, name, strlen(name));
  msgpack_pack_array(&pk, (size_t)n);
  for (int i = 0; i < n; ++i)
    if (pf_rpc_pack_value(&pk, args[i], codes[i], "bench", 0, NULL, NULL) != 0) die("pack");
}

static void pack_reply(msgpack_sbuffer* sb, PFValue v, int code) {
  msgpack_packer pk;
  pf_rpc_packer_init(&pk, sb);
  pf_rpc_pack_header(&pk, PF_RPC_OK, 1, 0, 1);
  if (pf_rpc_pack_value(&pk, v, code, "bench", 0, NULL, NULL) != 0) die("pack");
}

/* float32, as most tensors are: its data must land 4-byte aligned in the
 * message to be decoded in place. */
static int64_t g_shape[1] = {TENSOR_BYTES / 4};
static DLTensor g_tensor = {g_tensor_data, {kDLCPU, 0}, 1, {kDLFloat, 32, 1}, g_shape, NULL, 0};

static void build_messages(msgpack_sbuffer* add_req, msgpack_sbuffer* add_rep,
                           msgpack_sbuffer* t_req, msgpack_sbuffer* t_rep) {
  PFValue a[2] = {{.v_int64 = 1}, {.v_int64 = 2}};
  int c[2] = {kPFInt, kPFInt};
  pack_request(add_req, "bench.add", a, c, 2);
  pack_reply(add_rep, (PFValue){.v_int64 = 3}, kPFInt);
  PFValue t = {.v_handle = &g_tensor};
  int tc = kPFDLTensorHandle;
  pack_request(t_req, "bench.echo", &t, &tc, 1);
  /* The server returns the tensor as an object: the same layout. */
  pack_reply(t_rep, t, tc);
}

/* ---- the server process ---- */

static int64_t add_typed(int64_t x, int64_t y) { return x + y; }
static int echo(PFValue* a, int* c, int n, PFRetValueHandle ret, void* r) {
  (void)r;
  if (n != 1) return PFErrorSetFormat(kPFErrTypeError, "echo: one argument");
  return PFCFuncSetReturn(ret, &a[0], &c[0], 1);
}

static void* raw_server(void* sock) {
  msgpack_sbuffer add_req, add_rep, t_req, t_rep;
  msgpack_sbuffer_init(&add_req);
  msgpack_sbuffer_init(&add_rep);
  msgpack_sbuffer_init(&t_req);
  msgpack_sbuffer_init(&t_rep);
  build_messages(&add_req, &add_rep, &t_req, &t_rep);
  for (;;) {
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    if (zmq_msg_recv(&id, sock, 0) < 0 || zmq_msg_recv(&body, sock, 0) < 0) break;
    const msgpack_sbuffer* rep = zmq_msg_size(&body) > 1000 ? &t_rep : &add_rep;
    zmq_send(sock, zmq_msg_data(&id), zmq_msg_size(&id), ZMQ_SNDMORE);
    zmq_send(sock, rep->data, rep->size, 0);
    zmq_msg_close(&id);
    zmq_msg_close(&body);
  }
  return NULL;
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
static void* g_raw;
static msgpack_sbuffer g_add_req, g_add_rep, g_t_req, g_t_rep;

static void run_add(long n) {
  PFValue a[2] = {{.v_int64 = 1}, {.v_int64 = 2}};
  int c[2] = {kPFInt, kPFInt};
  PFValue rv;
  int rc;
  for (long i = 0; i < n; ++i)
    if (PFFuncCall(g_add, a, c, 2, &rv, &rc) != 0 || rv.v_int64 != 3) die("remote add");
}

static void raw_round_trip(const msgpack_sbuffer* req, size_t rep_size) {
  if (zmq_send(g_raw, req->data, req->size, 0) < 0) die("raw send");
  zmq_msg_t m;
  zmq_msg_init(&m);
  if (zmq_msg_recv(&m, g_raw, 0) < 0 || zmq_msg_size(&m) != rep_size) die("raw recv");
  zmq_msg_close(&m);
}

static void raw_add(long n) {
  for (long i = 0; i < n; ++i) raw_round_trip(&g_add_req, g_add_rep.size);
}

static void run_tensor(long n) {
  PFValue t = {.v_handle = &g_tensor};
  int tc = kPFDLTensorHandle;
  PFValue rv;
  int rc;
  for (long i = 0; i < n; ++i) {
    if (PFFuncCall(g_echo, &t, &tc, 1, &rv, &rc) != 0) die("remote echo");
    PFObjectFree(rv.v_handle);
  }
}

static void raw_tensor(long n) {
  for (long i = 0; i < n; ++i) raw_round_trip(&g_t_req, g_t_rep.size);
}

typedef struct {
  PFFunctionHandle f;
  long n;
} thread_arg;

static void* hammer(void* p) {
  thread_arg* t = p;
  PFValue a[2] = {{.v_int64 = 1}, {.v_int64 = 2}};
  int c[2] = {kPFInt, kPFInt};
  PFValue rv;
  int rc;
  for (long i = 0; i < t->n; ++i)
    if (PFFuncCall(t->f, a, c, 2, &rv, &rc) != 0) die("remote add (threads)");
  return NULL;
}

#define NSERVERS 8
#define NCALLERS 8

static void threads_on(PFFunctionHandle f, long n) {
  pthread_t th[NCALLERS];
  thread_arg arg = {f, n / NCALLERS + 1};
  for (int i = 0; i < NCALLERS; ++i) pthread_create(&th[i], NULL, hammer, &arg);
  for (int i = 0; i < NCALLERS; ++i) pthread_join(th[i], NULL);
}
static void many_servers(long n) { threads_on(g_add2, n); }
static void one_server(long n) { threads_on(g_add, n); }

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

int main(int argc, char** argv) {
  int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  double scale = quick ? 0.1 : 1.0;
  if (quick) g_trials = 3;
  signal(SIGPIPE, SIG_IGN);
  for (size_t i = 0; i < sizeof g_tensor_data; ++i) g_tensor_data[i] = (uint8_t)(i * 7);
  char rpc_eps[NSERVERS][128], raw_eps[NSERVERS][128];
  pid_t pids[NSERVERS];
  for (int i = 0; i < NSERVERS; ++i) pids[i] = start_server(rpc_eps[i], raw_eps[i]);
  const char* rpc1 = rpc_eps[0];
  const char* raw1 = raw_eps[0];
  msgpack_sbuffer_init(&g_add_req);
  msgpack_sbuffer_init(&g_add_rep);
  msgpack_sbuffer_init(&g_t_req);
  msgpack_sbuffer_init(&g_t_rep);
  build_messages(&g_add_req, &g_add_rep, &g_t_req, &g_t_rep);

  PFModuleHandle m1 = NULL, m2 = NULL;
  PFRPCOptions o = {0};
  o.timeout_ms = 60000;
  if (PFRPCConnect(rpc1, &o, &m1) != 0) die("connect");
  char all[NSERVERS * 130] = "";
  for (int i = 0; i < NSERVERS; ++i)
    snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", i ? "," : "", rpc_eps[i]);
  if (PFRPCConnect(all, &o, &m2) != 0) die("connect to all");
  if (PFModGetFunction(m1, "bench.add", 0, &g_add) != 0 || g_add == NULL ||
      PFModGetFunction(m1, "bench.echo", 0, &g_echo) != 0 || g_echo == NULL ||
      PFModGetFunction(m2, "bench.add", 0, &g_add2) != 0 || g_add2 == NULL)
    die("functions");
  void* ctx = zmq_ctx_new();
  g_raw = zmq_socket(ctx, ZMQ_DEALER);
  if (zmq_connect(g_raw, raw1) != 0) die("raw connect");

  measure("rpc_add", "remote add(1, 2) round trip (127.0.0.1)", run_add, "zmq_add",
          "raw ZeroMQ DEALER/ROUTER round trip of the same bytes", raw_add, 1.5,
          (long)(2000 * scale));
  measure("rpc_tensor", "1 MB float32 tensor round trip (echo)", run_tensor, "zmq_tensor",
          "raw ZeroMQ round trip of the same bytes", raw_tensor, 1.3, (long)(100 * scale) + 5);
  measure("rpc_8servers", "calls from 8 threads, 8 server processes (ns per call)", many_servers,
          "rpc_1server", "the same with 1 server", one_server, 0, (long)(8000 * scale));

  PFFuncFree(g_add);
  PFFuncFree(g_echo);
  PFFuncFree(g_add2);
  PFRPCDisconnect(m1);
  PFRPCDisconnect(m2);
  PFModFree(m1);
  PFModFree(m2);
  zmq_close(g_raw);
  zmq_ctx_term(ctx);
  for (int i = 0; i < NSERVERS; ++i) {
    kill(pids[i], SIGKILL);
    waitpid(pids[i], NULL, 0);
  }
  return 0;
}
