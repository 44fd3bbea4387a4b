/* The server: a ROUTER socket owned by one I/O thread, which hands fresh
 * requests to a pool of workers and nested requests and replies to the
 * worker that waits for them. Fresh requests wait in one queue per client,
 * and the workers take from the clients in turn (round-robin), each client
 * holding at most max_calls calls queued or running, max_workers workers,
 * max_callbacks threads waiting for its callbacks and max_exports
 * functions of the server, and getting no worker while the bytes queued to
 * it exceed PF_RPC_SEND_QUEUE_BYTES; the I/O thread never blocks on a
 * client, and releases the functions of a client it has not been able to
 * reach for PF_RPC_CLIENT_GONE_MS (see rpc.h, "Fairness", "Clients that do
 * not read" and "Clients that go away"). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#include "internal.h"

/* What the server holds for one client: its fresh calls (those queued,
 * how many are running), how many threads wait for a callback into it, how
 * many functions of the server it holds, and the bytes queued to it. A
 * record exists while the client has any of these; it is in the ready
 * list while it has a queued call that a worker may take (running <
 * max_workers, its queued bytes under the bound), and in the held list
 * while it waits for its queued bytes to drain (to be ready, or to be
 * forgotten). */
/* The clients at one network address (one peer, however many connections
 * it opens): how many records point here, and the functions of the
 * server they hold together. */
typedef struct peer_host {
  UT_hash_handle hh; /* keyed by addr */
  char addr[64];
  int clients, exports;
} peer_host;

typedef struct client_calls {
  UT_hash_handle hh; /* keyed by the ROUTER identity, route.ident */
  peer_host* host;   /* NULL until its first call says where it is */
  pf_rpc_route route;
  pf_rpc_msg *head, *tail;
  int queued, running, callbacks, exports;
  long long queued_bytes; /* the bytes of its queued calls */
  int ready, held;
  pf_rpc_tally* tally;
  int64_t unreachable_since; /* I/O thread: first found unreachable (0: reachable) */
  struct client_calls* next_ready;
  struct client_calls* next_held;
} client_calls;

/* How many messages the I/O thread takes in before it sends what is
 * waiting, so that a client that floods it cannot keep replies from going
 * out. */
#define PF_RPC_RECV_BATCH 256
/* How often, at most, the log tells of messages dropped for clients that
 * do not read. */
#define PF_RPC_DROP_LOG_MS 5000
/* How many malformed messages the log tells of one by one in each period
 * of PF_RPC_BAD_LOG_MS; the others are counted, and summed up in one line
 * when the period ends. */
#define PF_RPC_BAD_LOG_BURST 10
#define PF_RPC_BAD_LOG_MS 5000
/* How often the I/O thread looks at the clients whose queued bytes are
 * draining, while there are any. */
#define PF_RPC_HELD_CHECK_MS 20
/* How often the server asks whether the clients that hold its functions
 * can still be reached: every PF_RPC_SWEEP_MS after a connection drops
 * (until PF_RPC_CLIENT_GONE_MS has passed, and while one is unreachable),
 * else every PF_RPC_SWEEP_IDLE_MS. */
#define PF_RPC_SWEEP_MS 500
/* After a connection drops, how often and for how long the server looks
 * for callbacks that wait for a client that is gone (ZeroMQ lets its
 * routing id go shortly after the event). */
#define PF_RPC_PROBE_MS 50
#define PF_RPC_PROBE_FOR_MS 2000
#define PF_RPC_SWEEP_IDLE_MS 60000

typedef struct {
  pf_rpc_peer base;
  void* zctx;
  void* router;
  void* monitor;
  void* zap; /* the authentication handler, with authorized keys */
  char endpoint[512];
  char** prefixes;
  int nprefix;
  uint8_t (*keys)[32];
  int nkeys;
  int nworkers;
  pthread_t* workers;
  int nstarted;
  pthread_t io;
  int io_started;
  pthread_cond_t work_cond; /* under base.mu */
  client_calls* clients;    /* under base.mu */
  peer_host* hosts;         /* under base.mu */
  client_calls *ready, *ready_tail;
  client_calls* held;
  int max_calls, max_workers, max_callbacks, max_exports, max_exports_host;
  /* Threads waiting for callbacks into any client (under base.mu), and how
   * many may: fewer than the workers, so that a few clients that do not
   * answer their callbacks never hold every worker between them. */
  int callbacks, max_callbacks_total;
  /* The bytes of the calls queued for all clients (under base.mu). */
  long long queued_bytes;
  long long max_queue_bytes;
  /* The I/O thread's: when to sweep for unreachable clients next, and until
   * when to sweep often (after a connection dropped). */
  int64_t next_sweep_ms, sweep_often_until_ms;
  /* The I/O thread's: when to look next, and until when, for callbacks
   * that wait for a client whose connection dropped. */
  int64_t next_probe_ms, probe_until_ms;
  atomic_int stop;    /* workers: finish the call in hand, then exit */
  atomic_int io_stop; /* the I/O thread: exit */
  PFRPCLogFunc log;
  void* log_user;
  /* Malformed messages in the current period of the log (under base.mu):
   * when it began, how many were told of, and how many not yet. */
  int64_t bad_period_ms;
  int bad_said;
  long long bad_unsaid;
  /* Messages dropped for clients that do not read (I/O thread only). */
  int64_t dropped, drop_logged_ms;
} pf_rpc_server;

static void logf_(pf_rpc_server* s, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(pf_rpc_server* s, const char* fmt, ...) {
  if (s->log == NULL) return;
  char line[600];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  s->log(s->log_user, line);
}

static void ident_hex(const pf_rpc_route* r, char* buf, size_t cap) {
  size_t o = 0;
  for (int i = 0; i < r->ident_len && o + 3 < cap && i < 8; ++i)
    o += (size_t)snprintf(buf + o, cap - o, "%02x", r->ident[i]);
  buf[o] = '\0';
}

static void describe(pf_rpc_peer* p, const pf_rpc_route* r, char* buf, size_t cap) {
  char hex[40];
  ident_hex(r, hex, sizeof hex);
  snprintf(buf, cap, "client %s of server %s", hex, ((pf_rpc_server*)p)->endpoint);
}

static int exposed(pf_rpc_server* s, const char* name) {
  for (int i = 0; i < s->nprefix; ++i)
    if (strncmp(name, s->prefixes[i], strlen(s->prefixes[i])) == 0) return 1;
  return 0;
}

static int resolve(pf_rpc_peer* p, const char* name, PFFunctionHandle* out) {
  pf_rpc_server* s = (pf_rpc_server*)p;
  PFFunctionHandle f = NULL;
  if (exposed(s, name) && PFFuncGetGlobal(name, &f) == 0 && f != NULL) {
    *out = f;
    return 0;
  }
  /* The same answer whether the name is registered or not. */
  return PF_ERROR(kPFErrKeyError, "no function '%.200s' is available on this server", name);
}

static void pack_opt_str(msgpack_packer* pk, const char* s) {
  if (s == NULL) {
    msgpack_pack_nil(pk);
    return;
  }
  size_t n = strlen(s);
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, s, n);
}

static int hello(pf_rpc_peer* p, msgpack_packer* pk) {
  pf_rpc_server* s = (pf_rpc_server*)p;
  int n = 0;
  const char** names = NULL;
  if (PFFuncListGlobalNames(&n, &names) != 0) return -1;
  /* Copy: the list lives in this thread's storage, which lookups below do
   * not touch, but keep the rule simple. */
  char** mine = calloc((size_t)n + 1, sizeof *mine);
  int m = 0;
  if (mine == NULL) return PF_ERROR(kPFErrMemoryError, "rpc: out of memory");
  for (int i = 0; i < n; ++i)
    if (exposed(s, names[i]) && (mine[m] = strdup(names[i])) != NULL) ++m;
  /* Functions whose lookup fails (removed meanwhile) are left out. */
  PFFunctionHandle* fs = calloc((size_t)m + 1, sizeof *fs);
  int live = 0;
  for (int i = 0; fs && i < m; ++i)
    if (PFFuncGetGlobal(mine[i], &fs[i]) == 0 && fs[i] != NULL) ++live;
  msgpack_pack_array(pk, (size_t)live);
  for (int i = 0; fs && i < m; ++i) {
    if (fs[i] == NULL) continue;
    const char *sig = NULL, *doc = NULL;
    PFFuncGetInfo(fs[i], NULL, &sig, &doc);
    msgpack_pack_array(pk, 3);
    pack_opt_str(pk, mine[i]);
    pack_opt_str(pk, sig);
    pack_opt_str(pk, doc);
  }
  for (int i = 0; i < m; ++i) {
    if (fs) PFFuncFree(fs[i]);
    free(mine[i]);
  }
  free(fs);
  free(mine);
  return 0;
}

/* Under the lock: puts c in the held list (once). */
static void hold(pf_rpc_server* s, client_calls* c) {
  if (c->held) return;
  c->held = 1;
  c->next_held = s->held;
  s->held = c;
}

/* Under the lock: puts c at the end of the ready list if a worker may take
 * one of its calls now; returns whether it did. A client whose queued
 * bytes are over the bound is held instead, until they drain. */
static int make_ready(pf_rpc_server* s, client_calls* c) {
  if (c->ready || c->queued == 0 || c->running >= s->max_workers) return 0;
  if (atomic_load(&c->tally->bytes) >= s->max_queue_bytes) {
    hold(s, c);
    return 0;
  }
  c->ready = 1;
  c->next_ready = NULL;
  if (s->ready_tail) s->ready_tail->next_ready = c;
  else s->ready = c;
  s->ready_tail = c;
  return 1;
}

/* Under the lock: the record of the address `addr` (made if need be, NULL
 * when out of memory), which client c now counts in. */
static void join_host(pf_rpc_server* s, client_calls* c, const char* addr) {
  peer_host* h = NULL;
  size_t len = strnlen(addr, sizeof h->addr - 1);
  HASH_FIND(hh, s->hosts, addr, len, h);
  if (h == NULL) {
    if ((h = calloc(1, sizeof *h)) == NULL) return;
    memcpy(h->addr, addr, len);
    HASH_ADD(hh, s->hosts, addr, len, h);
  }
  h->clients++;
  h->exports += c->exports;
  c->host = h;
}

/* Under the lock: client c no longer counts in its address's record. */
static void leave_host(pf_rpc_server* s, client_calls* c) {
  peer_host* h = c->host;
  if (h == NULL) return;
  c->host = NULL;
  h->exports -= c->exports;
  if (--h->clients > 0) return;
  HASH_DEL(s->hosts, h);
  free(h);
}

static void client_free(client_calls* c) {
  for (pf_rpc_msg* m = c->head; m;) {
    pf_rpc_msg* next = m->next;
    pf_rpc_msg_free(m);
    m = next;
  }
  pf_rpc_tally_release(c->tally);
  free(c);
}

/* Under the lock: forgets a client that has nothing queued or running,
 * holds no function and no thread waiting for it; one whose queued bytes
 * have not drained yet is held until they have (the held list is the I/O
 * thread's to walk, and a record in it is forgotten only from there). */
static void forget_if_idle(pf_rpc_server* s, client_calls* c) {
  if (c->queued || c->running || c->callbacks || c->exports || c->ready || c->held) return;
  if (atomic_load(&c->tally->bytes) > 0) {
    hold(s, c);
    return;
  }
  HASH_DEL(s->clients, c);
  leave_host(s, c);
  client_free(c);
}

/* Under the lock: the record of the client at `r`, made if need be (NULL
 * when out of memory). */
static client_calls* client_of(pf_rpc_server* s, const pf_rpc_route* r) {
  client_calls* c = NULL;
  HASH_FIND(hh, s->clients, r->ident, r->ident_len, c);
  if (c != NULL) return c;
  c = calloc(1, sizeof *c);
  if (c == NULL || (c->tally = pf_rpc_tally_new()) == NULL) {
    free(c);
    return NULL;
  }
  c->route = *r;
  HASH_ADD_KEYPTR(hh, s->clients, c->route.ident, c->route.ident_len, c);
  return c;
}

/* count_export: one function more (or fewer) held by the client at r,
 * within its limit and its address's. */
static int count_export(pf_rpc_peer* p, const pf_rpc_route* r, int delta, char* why, size_t cap) {
  pf_rpc_server* s = (pf_rpc_server*)p;
  client_calls* c = NULL;
  if (delta < 0) {
    HASH_FIND(hh, s->clients, r->ident, r->ident_len, c);
    if (c != NULL) {
      c->exports--;
      if (c->host != NULL) c->host->exports--;
      forget_if_idle(s, c);
    }
    return 0;
  }
  if ((c = client_of(s, r)) == NULL) {
    why[0] = '\0';
    return -1;
  }
  if (c->exports >= s->max_exports) {
    snprintf(why, cap,
             "it already holds %d functions of this server, its limit (max_exports_per_client)",
             c->exports);
  } else if (c->host != NULL && c->host->exports >= s->max_exports_host) {
    snprintf(why, cap,
             "the clients at its address %s already hold %d functions of this server, their "
             "limit (PF_RPC_EXPORTS_PER_ADDRESS times max_exports_per_client)",
             c->host->addr, c->host->exports);
  } else {
    c->exports++;
    if (c->host != NULL) c->host->exports++;
    return 0;
  }
  forget_if_idle(s, c);
  return -1;
}

/* count_post: a message to a client counts in its tally until it is
 * written out or dropped (an uncounted one, when out of memory here). */
static void count_post(pf_rpc_peer* p, pf_rpc_msg* m) {
  pf_rpc_server* s = (pf_rpc_server*)p;
  client_calls* c = client_of(s, &m->route);
  if (c == NULL || m->tally != NULL) return;
  atomic_fetch_add(&c->tally->refs, 1);
  m->tally = c->tally;
  m->counted = pf_rpc_msg_bytes(m) + sizeof *m;
  atomic_fetch_add(&c->tally->bytes, (long long)m->counted);
  forget_if_idle(s, c); /* a record made for this message: held until it drains */
}

/* The I/O thread: the held clients whose bytes have drained become ready,
 * or are forgotten; the others stay held. */
static void walk_held(pf_rpc_server* s) {
  int woke = 0;
  pthread_mutex_lock(&s->base.mu);
  client_calls* list = s->held;
  s->held = NULL;
  while (list != NULL) {
    client_calls* c = list;
    list = c->next_held;
    c->held = 0;
    woke |= make_ready(s, c);
    forget_if_idle(s, c);
  }
  if (woke) pthread_cond_broadcast(&s->work_cond);
  pthread_mutex_unlock(&s->base.mu);
}

/* callback_enter: a thread is about to wait for a callback into the client
 * at r; refused when the client has max_callbacks such threads already. */
static int callback_enter(pf_rpc_peer* p, const pf_rpc_route* r) {
  pf_rpc_server* s = (pf_rpc_server*)p;
  pthread_mutex_lock(&p->mu);
  client_calls* c = client_of(s, r);
  int held = c == NULL ? -1 : c->callbacks, total = s->callbacks;
  int room = c != NULL && held < s->max_callbacks && total < s->max_callbacks_total;
  if (room) {
    c->callbacks++;
    s->callbacks++;
  } else if (c != NULL) {
    forget_if_idle(s, c);
  }
  pthread_mutex_unlock(&p->mu);
  if (held < 0) return PF_ERROR(kPFErrMemoryError, "rpc: out of memory");
  if (room) return 0;
  if (held < s->max_callbacks)
    return PF_ERROR(kPFErrRuntimeError,
                    "rpc: callback refused: %d callbacks into clients already wait for their "
                    "replies on server %.200s, the most that leaves a worker for other calls",
                    total, s->endpoint);
  char hex[40];
  ident_hex(r, hex, sizeof hex);
  return PF_ERROR(kPFErrRuntimeError,
                  "rpc: callback refused: %d callbacks into client %s already wait for their "
                  "replies on server %.200s, its limit (max_callbacks_per_client)",
                  held, hex, s->endpoint);
}

static void callback_leave(pf_rpc_peer* p, const pf_rpc_route* r) {
  pf_rpc_server* s = (pf_rpc_server*)p;
  pthread_mutex_lock(&p->mu);
  client_calls* c = NULL;
  HASH_FIND(hh, s->clients, r->ident, r->ident_len, c);
  s->callbacks--;
  if (c != NULL) {
    c->callbacks--;
    forget_if_idle(s, c);
  }
  pthread_mutex_unlock(&p->mu);
}

/* Under the lock: whether a call of `size` bytes fits in the bytes that
 * may wait in the queues: its client's (one call always fits in an empty
 * queue) and all clients' together (0, or why not). */
static const char* bytes_refusal(pf_rpc_server* s, client_calls* c, long long size) {
  if (c->queued_bytes > 0 && c->queued_bytes + size > PF_RPC_QUEUED_BYTES_PER_CLIENT)
    return "this client's calls waiting for a worker already hold PF_RPC_QUEUED_BYTES_PER_CLIENT "
           "bytes";
  if (s->queued_bytes > 0 && s->queued_bytes + size > PF_RPC_QUEUED_BYTES)
    return "the calls waiting for a worker already hold PF_RPC_QUEUED_BYTES bytes";
  return NULL;
}

/* A fresh request (the I/O thread): into its client's queue, or refused at
 * once when the client has max_calls calls queued or running, or when its
 * bytes do not fit (see bytes_refusal). */
static void fresh(pf_rpc_peer* p, pf_rpc_msg* m, uint64_t id) {
  pf_rpc_server* s = (pf_rpc_server*)p;
  const char *refused = NULL, *full = NULL;
  int held = 0;
  long long size = (long long)pf_rpc_msg_bytes(m);
  /* Where the client is: its connection's peer address (ZeroMQ's
   * metadata of the message), read before the lock. */
  const char* addr = m->has_zmsg ? zmq_msg_gets(&m->zmsg, "Peer-Address") : NULL;
  pthread_mutex_lock(&p->mu);
  client_calls* c = client_of(s, &m->route);
  if (c != NULL && c->host == NULL && addr != NULL) join_host(s, c, addr);
  if (c == NULL) {
    refused = "MemoryError";
  } else if (c->queued + c->running >= s->max_calls) {
    refused = "RuntimeError";
    held = c->queued + c->running;
    forget_if_idle(s, c);
  } else if ((full = bytes_refusal(s, c, size)) != NULL) {
    refused = "RuntimeError";
    forget_if_idle(s, c);
  } else {
    m->next = NULL;
    if (c->tail) c->tail->next = m;
    else c->head = m;
    c->tail = m;
    c->queued++;
    c->queued_bytes += size;
    s->queued_bytes += size;
    make_ready(s, c);
    if (c->ready) pthread_cond_signal(&s->work_cond);
  }
  pthread_mutex_unlock(&p->mu);
  if (refused == NULL) return;
  char msg[400];
  if (held > 0)
    snprintf(msg, sizeof msg,
             "rpc: call refused: this client already has %d calls queued or running on server "
             "%.200s, its limit (max_calls_per_client); call again when some have returned",
             held, s->endpoint);
  else if (full != NULL)
    snprintf(msg, sizeof msg,
             "rpc: call refused: a call of %lld bytes does not fit on server %.200s: %s; call "
             "again when some have returned",
             size, s->endpoint, full);
  else snprintf(msg, sizeof msg, "rpc: call refused: server %.200s is out of memory", s->endpoint);
  pf_rpc_reply_error(p, &m->route, id, refused, msg);
  pf_rpc_msg_free(m);
}

/* Says how many malformed messages went unmentioned in the period that
 * ended, if it has ended and there were any (no lock held). */
static void bad_summary(pf_rpc_server* s, int64_t now) {
  long long unsaid = 0;
  pthread_mutex_lock(&s->base.mu);
  if (now - s->bad_period_ms >= PF_RPC_BAD_LOG_MS) {
    unsaid = s->bad_unsaid;
    s->bad_unsaid = 0;
    s->bad_said = 0;
    s->bad_period_ms = now;
  }
  pthread_mutex_unlock(&s->base.mu);
  if (unsaid > 0)
    logf_(s, "pf rpc %s: dropped %lld more malformed message(s) in the last %d s", s->endpoint,
          unsaid, PF_RPC_BAD_LOG_MS / 1000);
}

/* log_bad: the first PF_RPC_BAD_LOG_BURST malformed messages of a period
 * get a line each, the rest one line at the period's end. */
static void log_bad(pf_rpc_peer* p, const pf_rpc_route* r, const char* why) {
  pf_rpc_server* s = (pf_rpc_server*)p;
  if (s->log == NULL) return;
  bad_summary(s, pf_rpc_now_ms());
  pthread_mutex_lock(&p->mu);
  int say = s->bad_said < PF_RPC_BAD_LOG_BURST;
  if (say) s->bad_said++;
  else s->bad_unsaid++;
  pthread_mutex_unlock(&p->mu);
  if (!say) return;
  char hex[40];
  ident_hex(r, hex, sizeof hex);
  logf_(s, "pf rpc %s: dropped a malformed message from client %s: %s", s->endpoint, hex, why);
}

/* A call a worker runs, until its reply is about to go out. */
typedef struct {
  pf_rpc_server* s;
  client_calls* c;
} running_call;

/* The call stops counting before its reply is posted: a client that sends
 * its next call as soon as a reply arrives is never over its limit. The
 * record may be forgotten here; the worker does not touch it again. */
static void call_served(void* arg) {
  running_call* rc = arg;
  pf_rpc_server* s = rc->s;
  pthread_mutex_lock(&s->base.mu);
  rc->c->running--;
  if (make_ready(s, rc->c)) pthread_cond_signal(&s->work_cond);
  forget_if_idle(s, rc->c);
  pthread_mutex_unlock(&s->base.mu);
}

/* A worker takes the first ready client's oldest call, and puts the client
 * back at the end of the list: the clients take turns. */
static void* worker(void* arg) {
  pf_rpc_server* s = arg;
  pthread_mutex_lock(&s->base.mu);
  for (;;) {
    while (s->ready == NULL && !atomic_load(&s->stop))
      pthread_cond_wait(&s->work_cond, &s->base.mu);
    if (atomic_load(&s->stop)) break; /* what is still queued is dropped */
    client_calls* c = s->ready;
    s->ready = c->next_ready;
    if (s->ready == NULL) s->ready_tail = NULL;
    c->ready = 0;
    pf_rpc_msg* m = c->head;
    c->head = m->next;
    if (c->head == NULL) c->tail = NULL;
    c->queued--;
    c->queued_bytes -= (long long)pf_rpc_msg_bytes(m);
    s->queued_bytes -= (long long)pf_rpc_msg_bytes(m);
    c->running++;
    make_ready(s, c);
    if (s->ready != NULL) pthread_cond_signal(&s->work_cond); /* more for another worker */
    pthread_mutex_unlock(&s->base.mu);
    running_call rc = {s, c};
    pf_rpc_serve(&s->base, m, call_served, &rc);
    pf_rpc_msg_free(m);
    pthread_mutex_lock(&s->base.mu);
  }
  pthread_mutex_unlock(&s->base.mu);
  return NULL;
}

/* A connection dropped. The event names a file descriptor, not the client
 * (ZeroMQ tells the ROUTER's routing ids of its connections only through a
 * draft option), so the clients that hold functions are asked, from now
 * on, whether they can still be reached: see sweep_gone. */
static void note_disconnect(pf_rpc_server* s) {
  int64_t now = pf_rpc_now_ms();
  s->next_probe_ms = now;
  s->probe_until_ms = now + PF_RPC_PROBE_FOR_MS;
  s->sweep_often_until_ms = now + PF_RPC_CLIENT_GONE_MS + 2 * PF_RPC_SWEEP_MS;
  if (s->next_sweep_ms > now + PF_RPC_SWEEP_MS) s->next_sweep_ms = now + PF_RPC_SWEEP_MS;
}

static void on_event(pf_rpc_server* s) {
  zmq_msg_t f1, f2;
  zmq_msg_init(&f1);
  zmq_msg_init(&f2);
  if (zmq_msg_recv(&f1, s->monitor, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&f1) &&
      zmq_msg_recv(&f2, s->monitor, 0) >= 0 && zmq_msg_size(&f1) >= 6) {
    uint16_t ev;
    memcpy(&ev, zmq_msg_data(&f1), 2);
    int len = (int)zmq_msg_size(&f2);
    const char* addr = zmq_msg_data(&f2);
    if (ev & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
              ZMQ_EVENT_HANDSHAKE_FAILED_AUTH))
      logf_(s, "pf rpc %s: a client's security handshake failed (%s)", s->endpoint,
            ev == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH ? "key not authorized" : "wrong keys or no keys");
    else if (ev == ZMQ_EVENT_ACCEPT_FAILED)
      logf_(s, "pf rpc %.*s: accepting a connection failed", len, addr);
    else if (ev == ZMQ_EVENT_DISCONNECTED) note_disconnect(s);
  }
  zmq_msg_close(&f1);
  zmq_msg_close(&f2);
}

/* ZAP (RFC 27): accepts a CURVE client whose key is authorized. */
static void on_zap(pf_rpc_server* s) {
  zmq_msg_t parts[8];
  int n = 0, more = 1;
  while (more && n < 8) {
    zmq_msg_init(&parts[n]);
    if (zmq_msg_recv(&parts[n], s->zap, n == 0 ? ZMQ_DONTWAIT : 0) < 0) {
      zmq_msg_close(&parts[n]);
      break;
    }
    more = zmq_msg_more(&parts[n]);
    ++n;
  }
  while (more) { /* too many parts: drain */
    zmq_msg_t x;
    zmq_msg_init(&x);
    if (zmq_msg_recv(&x, s->zap, 0) < 0) more = 0;
    else more = zmq_msg_more(&x);
    zmq_msg_close(&x);
  }
  if (n >= 2) {
    int ok = 0;
    if (n >= 7 && zmq_msg_size(&parts[5]) == 5 &&
        memcmp(zmq_msg_data(&parts[5]), "CURVE", 5) == 0 && zmq_msg_size(&parts[6]) == 32)
      for (int i = 0; i < s->nkeys && !ok; ++i)
        ok = memcmp(zmq_msg_data(&parts[6]), s->keys[i], 32) == 0;
    zmq_send(s->zap, "1.0", 3, ZMQ_SNDMORE);
    zmq_send(s->zap, zmq_msg_data(&parts[1]), zmq_msg_size(&parts[1]), ZMQ_SNDMORE);
    zmq_send(s->zap, ok ? "200" : "400", 3, ZMQ_SNDMORE);
    zmq_send(s->zap, ok ? "OK" : "key not authorized", ok ? 2 : 18, ZMQ_SNDMORE);
    zmq_send(s->zap, "", 0, ZMQ_SNDMORE);
    zmq_send(s->zap, "", 0, 0);
  }
  for (int i = 0; i < n; ++i) zmq_msg_close(&parts[i]);
}

/* Sends one message to its client without blocking: 0, or the errno of
 * the routing frame (EHOSTUNREACH: the client is gone; EAGAIN: its queue
 * is full, as it does not read). Once the routing frame is taken, ZeroMQ
 * takes the body too. */
static int send_routed(pf_rpc_server* s, pf_rpc_msg* m) {
  if (zmq_send(s->router, m->route.ident, m->route.ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
    return zmq_errno();
  while (pf_rpc_msg_send_part(m, s->router, ZMQ_DONTWAIT) < 0 && zmq_errno() == EINTR) {}
  return 0;
}

/* Counts a message dropped for a client that does not read, and says so
 * in the log, at most once per PF_RPC_DROP_LOG_MS. */
static void note_dropped(pf_rpc_server* s, const pf_rpc_route* r) {
  s->dropped++;
  int64_t now = pf_rpc_now_ms();
  if (s->log == NULL || now - s->drop_logged_ms < PF_RPC_DROP_LOG_MS) return;
  char hex[40];
  ident_hex(r, hex, sizeof hex);
  logf_(s,
        "pf rpc %s: dropped %lld message(s) for clients that do not read their replies (the "
        "latest: client %s, whose queue holds %d messages)",
        s->endpoint, (long long)s->dropped, hex, PF_RPC_SEND_QUEUE);
  s->dropped = 0;
  s->drop_logged_ms = now;
}

static void send_out(pf_rpc_server* s) {
  for (pf_rpc_msg* m = pf_rpc_take_out(&s->base); m;) {
    pf_rpc_msg* next = m->next;
    int err = 0, sent = 0;
    if (m->waiter_id && !pf_rpc_waiter_alive(&s->base, m->waiter_id)) {
      /* failed already: never send late */
    } else if ((err = send_routed(s, m)) == 0) {
      sent = 1;
      if (m->waiter_id) pf_rpc_mark_sent(&s->base, m->waiter_id);
    } else if (err == EAGAIN) {
      note_dropped(s, &m->route);
      if (m->waiter_id)
        pf_rpc_fail_waiter(&s->base, m->waiter_id, "ConnectionError",
                           "the client does not read its messages (its queue is full)");
    } else if (m->waiter_id) {
      pf_rpc_fail_route(&s->base, &m->route, 1, "the client is gone");
    }
    /* The client never learns the functions of a message it does not get. */
    if (!sent && m->nexports > 0) pf_rpc_drop_exports(&s->base, m->exports, m->nexports);
    pf_rpc_msg_free(m);
    m = next;
  }
}

/* Whether the client at r can be reached: ROUTER_MANDATORY refuses a
 * message to a routing id that has no connection (EHOSTUNREACH); one whose
 * queue is full (EAGAIN) is still there. A reachable client gets an empty
 * frame, which it ignores. */
static int reachable(pf_rpc_server* s, const pf_rpc_route* r) {
  if (zmq_send(s->router, r->ident, r->ident_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
    return zmq_errno() != EHOSTUNREACH;
  while (zmq_send(s->router, "", 0, ZMQ_DONTWAIT) < 0 && zmq_errno() == EINTR) {}
  return 1;
}

/* The I/O thread: asks each client that holds functions of the server
 * whether it can still be reached, and releases the functions of one that
 * has not been for PF_RPC_CLIENT_GONE_MS. Returns whether one is
 * unreachable and not yet released (then the next sweep comes soon). */
static int sweep_gone(pf_rpc_server* s, int64_t now) {
  pthread_mutex_lock(&s->base.mu);
  size_t n = 0;
  client_calls *c, *tmp;
  HASH_ITER(hh, s->clients, c, tmp) n += c->exports > 0;
  pf_rpc_route* routes = n ? malloc(n * sizeof *routes) : NULL;
  size_t k = 0;
  HASH_ITER(hh, s->clients, c, tmp) if (routes && c->exports > 0) routes[k++] = c->route;
  pthread_mutex_unlock(&s->base.mu);
  int pending = 0;
  for (size_t i = 0; i < k; ++i) {
    int up = reachable(s, &routes[i]);
    int gone = 0;
    pthread_mutex_lock(&s->base.mu);
    HASH_FIND(hh, s->clients, routes[i].ident, routes[i].ident_len, c);
    if (c != NULL && up) {
      c->unreachable_since = 0;
    } else if (c != NULL && c->unreachable_since == 0) {
      c->unreachable_since = now;
      pending = 1;
    } else if (c != NULL && now - c->unreachable_since >= PF_RPC_CLIENT_GONE_MS) {
      c->unreachable_since = 0;
      gone = c->exports;
    } else if (c != NULL) {
      pending = 1;
    }
    pthread_mutex_unlock(&s->base.mu);
    if (gone == 0) continue;
    char hex[40];
    ident_hex(&routes[i], hex, sizeof hex);
    logf_(s, "pf rpc %s: released %d function(s) held by client %s, unreachable for %d ms",
          s->endpoint, gone, hex, PF_RPC_CLIENT_GONE_MS);
    pf_rpc_drop_route_exports(&s->base, &routes[i]);
  }
  free(routes);
  return pending;
}

/* The I/O thread, after a connection dropped: the callbacks that wait
 * for a client that cannot be reached any more fail now, rather than at
 * their timeout, so that the threads waiting for them go back to work. */
static void fail_gone_waiters(pf_rpc_server* s) {
  pthread_mutex_lock(&s->base.mu);
  size_t n = HASH_COUNT(s->base.waiters), k = 0;
  pf_rpc_route* routes = n ? malloc(n * sizeof *routes) : NULL;
  pf_rpc_waiter *w, *tmp;
  HASH_ITER(hh, s->base.waiters, w, tmp) {
    if (routes != NULL && w->sent && !w->failed) routes[k++] = w->route;
  }
  pthread_mutex_unlock(&s->base.mu);
  for (size_t i = 0; i < k; ++i)
    if (!reachable(s, &routes[i])) pf_rpc_fail_route(&s->base, &routes[i], 0, "the client is gone");
  free(routes);
}

/* The I/O thread's periodic work, when it is due; returns the time until
 * it is due next, at most `cap` ms. */
static int housekeeping(pf_rpc_server* s, int cap) {
  int64_t now = pf_rpc_now_ms();
  if (s->log != NULL) bad_summary(s, now);
  int probing = now < s->probe_until_ms;
  if (probing && now >= s->next_probe_ms) {
    fail_gone_waiters(s);
    s->next_probe_ms = now + PF_RPC_PROBE_MS;
  }
  if (probing && s->next_probe_ms - now < cap) cap = (int)(s->next_probe_ms - now);
  if (now >= s->next_sweep_ms) {
    int pending = atomic_load(&s->base.closed) ? 0 : sweep_gone(s, now);
    int often = pending || now < s->sweep_often_until_ms;
    s->next_sweep_ms = now + (often ? PF_RPC_SWEEP_MS : PF_RPC_SWEEP_IDLE_MS);
  }
  pthread_mutex_lock(&s->base.mu);
  int held = s->held != NULL;
  pthread_mutex_unlock(&s->base.mu);
  if (held) walk_held(s);
  int64_t next = s->next_sweep_ms - now;
  if (held && next > PF_RPC_HELD_CHECK_MS) next = PF_RPC_HELD_CHECK_MS;
  if (next < 0) next = 0;
  return next < cap ? (int)next : cap;
}

static void recv_in(pf_rpc_server* s) {
  for (int taken = 0; taken < PF_RPC_RECV_BATCH; ++taken) {
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    if (zmq_msg_recv(&id, s->router, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&id);
      return;
    }
    pf_rpc_route r;
    memset(&r, 0, sizeof r);
    size_t il = zmq_msg_size(&id);
    r.ident_len = (uint8_t)(il > 255 ? 255 : il);
    memcpy(r.ident, zmq_msg_data(&id), r.ident_len);
    int more = zmq_msg_more(&id);
    zmq_msg_close(&id);
    if (!more) continue;
    zmq_msg_init(&body);
    if (zmq_msg_recv(&body, s->router, 0) < 0) {
      zmq_msg_close(&body);
      continue;
    }
    const char* why = NULL;
    pf_rpc_msg* in = pf_rpc_msg_recv_rest(&r, &body, s->router, &why);
    zmq_msg_close(&body);
    if (in) pf_rpc_dispatch(&s->base, in, fresh);
    else if (why) log_bad(&s->base, &r, why);
  }
}

static void* server_io(void* arg) {
  pf_rpc_server* s = arg;
  zmq_pollitem_t items[4] = {
      {NULL, s->base.wake_fd, ZMQ_POLLIN, 0},
      {s->router, 0, ZMQ_POLLIN, 0},
      {s->monitor, 0, ZMQ_POLLIN, 0},
      {s->zap, 0, ZMQ_POLLIN, 0},
  };
  int np = s->zap ? 4 : 3;
  s->next_sweep_ms = pf_rpc_now_ms() + PF_RPC_SWEEP_IDLE_MS;
  while (!atomic_load(&s->io_stop)) {
    int timeout = housekeeping(s, pf_rpc_expire(&s->base, 1000));
    if (zmq_poll(items, np, timeout) < 0 && errno != EINTR) break;
    if (items[0].revents & ZMQ_POLLIN) send_out(s);
    if (items[1].revents & ZMQ_POLLIN) recv_in(s); /* a batch; the poll comes back for more */
    if (items[2].revents & ZMQ_POLLIN) on_event(s);
    if (np == 4 && (items[3].revents & ZMQ_POLLIN)) on_zap(s);
  }
  send_out(s); /* the replies of the calls that finished while stopping */
  return NULL;
}

static void server_free(pf_rpc_server* s) {
  for (int i = 0; i < s->nprefix; ++i) free(s->prefixes[i]);
  free(s->prefixes);
  free(s->keys);
  free(s->workers);
  client_calls *c, *tmp;
  HASH_ITER(hh, s->clients, c, tmp) {
    HASH_DEL(s->clients, c);
    leave_host(s, c);
    client_free(c);
  }
  pthread_cond_destroy(&s->work_cond);
  pf_rpc_peer_fini(&s->base);
  free(s);
}

static void server_destroy(pf_rpc_peer* p) { server_free((pf_rpc_server*)p); }

/* Stops everything; the struct goes with its last reference. */
static void server_close(pf_rpc_server* s) {
  atomic_store(&s->stop, 1);
  pthread_mutex_lock(&s->base.mu);
  pthread_cond_broadcast(&s->work_cond);
  pthread_mutex_unlock(&s->base.mu);
  /* Callbacks that workers wait for, or would start, fail, so that the
   * workers finish; the I/O thread still sends their replies. */
  pthread_mutex_lock(&s->base.mu);
  snprintf(s->base.closed_reason, sizeof s->base.closed_reason, "the server is stopping");
  atomic_store(&s->base.closed, 1);
  pthread_mutex_unlock(&s->base.mu);
  pf_rpc_fail_route(&s->base, NULL, 1, "the server is stopping");
  for (int i = 0; i < s->nstarted; ++i) pthread_join(s->workers[i], NULL);
  s->nstarted = 0;
  atomic_store(&s->io_stop, 1);
  if (s->io_started) {
    uint64_t one = 1;
    ssize_t rc = write(s->base.wake_fd, &one, sizeof one);
    (void)rc;
    pthread_join(s->io, NULL);
    s->io_started = 0;
  }
  pf_rpc_peer_shutdown(&s->base, "the server has stopped");
  if (s->router) {
    zmq_socket_monitor(s->router, NULL, 0);
    zmq_close(s->router);
  }
  if (s->monitor) zmq_close(s->monitor);
  if (s->zap) zmq_close(s->zap);
  s->router = s->monitor = s->zap = NULL;
  if (s->zctx) zmq_ctx_term(s->zctx);
  s->zctx = NULL;
}

static int opt(void* sock, int o, const void* v, size_t n, const char* what) {
  if (zmq_setsockopt(sock, o, v, n) != 0)
    return PF_ERROR(kPFErrValueError, "PFRPCServe: option %s: %s", what, zmq_strerror(zmq_errno()));
  return 0;
}

/* ---- starting: each step acquires into the server, which serve_failed
 * releases whatever step was reached ---- */

static const char* const k_serve = "PFRPCServe";

/* The options that can be refused before anything is acquired. */
static int check_server_options(const PFRPCServerOptions* o) {
  if (o->num_workers < 0 || o->num_workers > 256)
    return PF_ERROR(kPFErrValueError, "%s: option num_workers must be in [0, 256], got %d", k_serve,
                    o->num_workers);
  if (o->num_expose < 0 || (o->num_expose > 0 && o->expose == NULL))
    return PF_ERROR(kPFErrValueError, "%s: option expose/num_expose is inconsistent", k_serve);
  if (o->num_authorized_keys < 0 || (o->num_authorized_keys > 0 && o->authorized_keys == NULL))
    return PF_ERROR(kPFErrValueError,
                    "%s: option authorized_keys/num_authorized_keys is inconsistent", k_serve);
  if (o->num_authorized_keys > 0 && o->curve_secret_key == NULL)
    return PF_ERROR(kPFErrValueError, "%s: option authorized_keys needs curve_secret_key", k_serve);
  if (o->callback_timeout_ms < 0 || o->max_message_size < 0)
    return PF_ERROR(kPFErrValueError, "%s: negative callback_timeout_ms or max_message_size",
                    k_serve);
  if (o->max_calls_per_client < 0)
    return PF_ERROR(kPFErrValueError, "%s: option max_calls_per_client is negative (%d)", k_serve,
                    o->max_calls_per_client);
  if (o->max_workers_per_client < 0)
    return PF_ERROR(kPFErrValueError, "%s: option max_workers_per_client is negative (%d)", k_serve,
                    o->max_workers_per_client);
  if (o->max_callbacks_per_client < 0)
    return PF_ERROR(kPFErrValueError, "%s: option max_callbacks_per_client is negative (%d)",
                    k_serve, o->max_callbacks_per_client);
  if (o->max_exports_per_client < 0)
    return PF_ERROR(kPFErrValueError, "%s: option max_exports_per_client is negative (%d)", k_serve,
                    o->max_exports_per_client);
  for (int i = 0; i < o->num_expose; ++i)
    if (o->expose[i] == NULL)
      return PF_ERROR(kPFErrValueError, "%s: option expose[%d] is NULL", k_serve, i);
  if (o->curve_secret_key != NULL) {
    uint8_t secret[32];
    if (strlen(o->curve_secret_key) != 40 || zmq_z85_decode(secret, o->curve_secret_key) == NULL)
      return PF_ERROR(kPFErrValueError,
                      "%s: option curve_secret_key is not a CURVE key (40 characters of Z85)",
                      k_serve);
    if (!zmq_has("curve"))
      return PF_ERROR(kPFErrNotImplementedError, "%s: this ZeroMQ has no CURVE support", k_serve);
  }
  return 0;
}

/* A server with its limits set and nothing running; *out is NULL when
 * even the struct could not be made. */
static int server_new(const PFRPCServerOptions* o, pf_rpc_server** out) {
  pf_rpc_server* s = calloc(1, sizeof *s);
  *out = NULL;
  if (s == NULL) return PF_ERROR(kPFErrMemoryError, "%s: out of memory", k_serve);
  int timeout = o->callback_timeout_ms ? o->callback_timeout_ms : PF_RPC_DEFAULT_TIMEOUT_MS;
  if (pf_rpc_peer_init(&s->base, 1, timeout) != 0) {
    free(s);
    return -1;
  }
  pthread_cond_init(&s->work_cond, NULL);
  s->base.describe_route = describe;
  s->base.resolve_name = resolve;
  s->base.hello = hello;
  s->base.callback_enter = callback_enter;
  s->base.callback_leave = callback_leave;
  s->base.count_export = count_export;
  s->base.count_post = count_post;
  s->base.log_bad = log_bad;
  s->base.destroy = server_destroy;
  s->log = o->log;
  s->log_user = o->log_user_data;
  s->nworkers = o->num_workers ? o->num_workers : 4;
  s->max_calls =
      o->max_calls_per_client ? o->max_calls_per_client : PF_RPC_DEFAULT_MAX_CALLS_PER_CLIENT;
  s->max_workers = o->max_workers_per_client ? o->max_workers_per_client : s->nworkers;
  s->max_callbacks = o->max_callbacks_per_client ? o->max_callbacks_per_client
                     : s->nworkers > 1           ? s->nworkers - 1
                                                 : 1;
  s->max_callbacks_total = s->nworkers > 1 ? s->nworkers - 1 : 1;
  s->max_exports_host = PF_RPC_EXPORTS_PER_ADDRESS * (o->max_exports_per_client
                                                          ? o->max_exports_per_client
                                                          : PF_RPC_DEFAULT_MAX_EXPORTS_PER_CLIENT);
  s->max_exports =
      o->max_exports_per_client ? o->max_exports_per_client : PF_RPC_DEFAULT_MAX_EXPORTS_PER_CLIENT;
  s->max_queue_bytes = PF_RPC_SEND_QUEUE_BYTES;
  *out = s;
  return 0;
}

/* Copies the exposed prefixes and decodes the authorized keys. */
static int copy_options(pf_rpc_server* s, const PFRPCServerOptions* o) {
  s->prefixes = calloc((size_t)o->num_expose + 1, sizeof *s->prefixes);
  s->keys = calloc((size_t)o->num_authorized_keys + 1, 32);
  s->workers = calloc((size_t)s->nworkers, sizeof *s->workers);
  if (!s->prefixes || !s->keys || !s->workers)
    return PF_ERROR(kPFErrMemoryError, "%s: out of memory", k_serve);
  for (; s->nprefix < o->num_expose; s->nprefix++)
    if ((s->prefixes[s->nprefix] = strdup(o->expose[s->nprefix])) == NULL)
      return PF_ERROR(kPFErrMemoryError, "%s: out of memory", k_serve);
  for (; s->nkeys < o->num_authorized_keys; s->nkeys++) {
    const char* k = o->authorized_keys[s->nkeys];
    if (k == NULL || strlen(k) != 40 || zmq_z85_decode(s->keys[s->nkeys], k) == NULL)
      return PF_ERROR(kPFErrValueError, "%s: option authorized_keys[%d] is not a CURVE key",
                      k_serve, s->nkeys);
  }
  return 0;
}

/* The ZeroMQ context, and the authentication handler when keys are
 * authorized. */
static int open_context(pf_rpc_server* s) {
  s->zctx = pf_rpc_zmq_context();
  if (s->zctx == NULL)
    return PF_ERROR(kPFErrRuntimeError, "%s: cannot make a ZeroMQ context", k_serve);
  if (s->nkeys == 0) return 0;
  int zero = 0;
  s->zap = zmq_socket(s->zctx, ZMQ_REP);
  if (s->zap == NULL || zmq_setsockopt(s->zap, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
      zmq_bind(s->zap, "inproc://zeromq.zap.01") != 0)
    return PF_ERROR(kPFErrRuntimeError, "%s: cannot start the authentication handler: %s", k_serve,
                    zmq_strerror(zmq_errno()));
  return 0;
}

/* The ROUTER socket and its options. */
static int open_router(pf_rpc_server* s, const PFRPCServerOptions* o) {
  s->router = zmq_socket(s->zctx, ZMQ_ROUTER);
  if (s->router == NULL) return PF_ERROR(kPFErrRuntimeError, "%s: cannot make a socket", k_serve);
  int zero = 0, one = 1, hb = 1000, hb_timeout = 5000, queue = PF_RPC_SEND_QUEUE;
  int64_t maxmsg = o->max_message_size ? o->max_message_size : PF_RPC_DEFAULT_MAX_MESSAGE;
  if (opt(s->router, ZMQ_LINGER, &zero, sizeof zero, "linger") != 0 ||
      opt(s->router, ZMQ_SNDHWM, &queue, sizeof queue, "send queue") != 0 ||
      opt(s->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one, "mandatory") != 0 ||
      opt(s->router, ZMQ_ROUTER_HANDOVER, &one, sizeof one, "handover") != 0 ||
      opt(s->router, ZMQ_HEARTBEAT_IVL, &hb, sizeof hb, "heartbeat") != 0 ||
      opt(s->router, ZMQ_HEARTBEAT_TIMEOUT, &hb_timeout, sizeof hb_timeout, "heartbeat") != 0 ||
      opt(s->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg, "max_message_size") != 0)
    return -1;
  if (o->curve_secret_key != NULL &&
      (opt(s->router, ZMQ_CURVE_SERVER, &one, sizeof one, "curve_server") != 0 ||
       opt(s->router, ZMQ_CURVE_SECRETKEY, o->curve_secret_key, 40, "curve_secret_key") != 0))
    return -1;
  return 0;
}

/* The monitor of the ROUTER's connection events. */
static int open_monitor(pf_rpc_server* s) {
  char addr[64];
  int zero = 0;
  snprintf(addr, sizeof addr, "inproc://pf-rpc-server-monitor-%p", (void*)s);
  if (zmq_socket_monitor(
          s->router, addr,
          ZMQ_EVENT_ACCEPT_FAILED | ZMQ_EVENT_DISCONNECTED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
              ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0 ||
      (s->monitor = zmq_socket(s->zctx, ZMQ_PAIR)) == NULL ||
      zmq_setsockopt(s->monitor, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
      zmq_connect(s->monitor, addr) != 0)
    return PF_ERROR(kPFErrRuntimeError, "%s: cannot monitor the socket: %s", k_serve,
                    zmq_strerror(zmq_errno()));
  return 0;
}

static int bind_router(pf_rpc_server* s, const char* endpoint) {
  if (zmq_bind(s->router, endpoint) != 0)
    return PF_ERROR(kPFErrRuntimeError, "%s: cannot bind '%s': %s", k_serve, endpoint,
                    zmq_strerror(zmq_errno()));
  size_t len = sizeof s->endpoint;
  if (zmq_getsockopt(s->router, ZMQ_LAST_ENDPOINT, s->endpoint, &len) != 0)
    snprintf(s->endpoint, sizeof s->endpoint, "%s", endpoint);
  return 0;
}

static int start_threads(pf_rpc_server* s) {
  if (pthread_create(&s->io, NULL, server_io, s) != 0)
    return PF_ERROR(kPFErrRuntimeError, "%s: cannot start the I/O thread", k_serve);
  s->io_started = 1;
  for (; s->nstarted < s->nworkers; s->nstarted++)
    if (pthread_create(&s->workers[s->nstarted], NULL, worker, s) != 0)
      return PF_ERROR(kPFErrRuntimeError, "%s: cannot start worker %d", k_serve, s->nstarted);
  return 0;
}

/* Releases what the steps acquired, keeping their error; returns -1. */
static int serve_failed(pf_rpc_server* s) {
  pf_rpc_saved_error e;
  pf_rpc_error_save(&e);
  server_close(s);
  pf_rpc_peer_release(&s->base);
  return pf_rpc_error_restore(&e);
}

int PFRPCServe(const char* endpoint, const PFRPCServerOptions* o, PFRPCServerHandle* out) {
  if (endpoint == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'endpoint' is NULL", k_serve);
  if (out == NULL) return PF_ERROR(kPFErrTypeError, "%s: argument 'out' is NULL", k_serve);
  PFRPCServerOptions defaults;
  memset(&defaults, 0, sizeof defaults);
  if (o == NULL) o = &defaults;
  pf_rpc_server* s = NULL;
  if (check_server_options(o) != 0 || server_new(o, &s) != 0) return -1;
  if (copy_options(s, o) != 0 || open_context(s) != 0 || open_router(s, o) != 0 ||
      open_monitor(s) != 0 || bind_router(s, endpoint) != 0 || start_threads(s) != 0)
    return serve_failed(s);
  *out = s;
  return 0;
}

int PFRPCServerGetEndpoint(PFRPCServerHandle server, const char** out) {
  if (server == NULL)
    return PF_ERROR(kPFErrTypeError, "PFRPCServerGetEndpoint: argument 'server' is NULL");
  if (out == NULL)
    return PF_ERROR(kPFErrTypeError, "PFRPCServerGetEndpoint: argument 'out' is NULL");
  *out = ((pf_rpc_server*)server)->endpoint;
  return 0;
}

int PFRPCServerStop(PFRPCServerHandle server) {
  if (server == NULL) return 0;
  pf_rpc_server* s = server;
  server_close(s);
  pf_rpc_peer_release(&s->base);
  return 0;
}

int PFRPCGetStructSize(const char* name, size_t* out) {
  if (name == NULL) return PF_ERROR(kPFErrTypeError, "PFRPCGetStructSize: argument 'name' is NULL");
  if (out == NULL) return PF_ERROR(kPFErrTypeError, "PFRPCGetStructSize: argument 'out' is NULL");
  if (strcmp(name, "PFRPCOptions") == 0) {
    *out = sizeof(PFRPCOptions);
  } else if (strcmp(name, "PFRPCServerOptions") == 0) {
    *out = sizeof(PFRPCServerOptions);
  } else {
    return PF_ERROR(kPFErrKeyError, "PFRPCGetStructSize: no struct named '%.100s'", name);
  }
  return 0;
}

int PFRPCCurveKeypair(char* public_key, char* secret_key) {
  if (public_key == NULL || secret_key == NULL)
    return PF_ERROR(kPFErrTypeError, "PFRPCCurveKeypair: argument '%s' is NULL",
                    public_key == NULL ? "public_key" : "secret_key");
  if (!zmq_has("curve") || zmq_curve_keypair(public_key, secret_key) != 0)
    return PF_ERROR(kPFErrNotImplementedError, "PFRPCCurveKeypair: this ZeroMQ has no CURVE");
  return 0;
}

int PFRPCCurvePublicKey(const char* secret_key, char* public_key) {
  if (public_key == NULL || secret_key == NULL)
    return PF_ERROR(kPFErrTypeError, "PFRPCCurvePublicKey: argument '%s' is NULL",
                    public_key == NULL ? "public_key" : "secret_key");
  uint8_t bin[32];
  if (strlen(secret_key) != 40 || zmq_z85_decode(bin, secret_key) == NULL)
    return PF_ERROR(kPFErrValueError,
                    "PFRPCCurvePublicKey: argument 'secret_key' is not 40 characters of Z85");
  if (!zmq_has("curve"))
    return PF_ERROR(kPFErrNotImplementedError, "PFRPCCurvePublicKey: this ZeroMQ has no CURVE");
  if (zmq_curve_public(public_key, secret_key) != 0)
    return PF_ERROR(kPFErrValueError, "PFRPCCurvePublicKey: %s", zmq_strerror(zmq_errno()));
  return 0;
}
