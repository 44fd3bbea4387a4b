/* The client: one DEALER socket per server endpoint. The sockets belong to
 * whichever thread holds the connection's I/O role (the peer's io_role):
 * usually a caller waiting for its reply, else the housekeeping thread.
 * Calls are spread over the connected servers by the client
 * itself, one after another, rather than by one DEALER connected to all of
 * them: a DEALER does not say which server took a request, and the client
 * must know it, to fail exactly the calls that a dying server held, and to
 * send a callback's reply or a returned function's calls to its server. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#include "internal.h"

typedef struct {
  pf_rpc_msg *head, *tail;
  int unasked; /* messages no call of ours waits for: replies, releases */
} msg_queue;

/* The messages no call waits for (replies to the server's requests,
 * releases) that a connection queues to one server while the server does
 * not read them; beyond it they are dropped, so that a server that sends
 * requests and never reads the replies cannot grow the client without
 * bound. */
#define PF_RPC_CLIENT_UNASKED PF_RPC_SEND_QUEUE
/* How many messages one pass of I/O takes in. */
#define PF_RPC_CLIENT_RECV_BATCH 256

typedef struct pf_rpc_client {
  pf_rpc_peer base;
  struct pf_rpc_client* next; /* in the list of live connections */
  void* zctx;
  int n;
  char** endpoints;
  void** dealers;
  void** monitors;
  atomic_int* connected;
  char** problem; /* the last handshake problem per endpoint (I/O thread) */
  msg_queue* pending;
  atomic_uint rr;
  pthread_t io; /* the housekeeper */
  int io_started;
  atomic_int stop;
  pthread_cond_t hk_cond; /* wakes the housekeeper (under base.mu) */
  zmq_pollitem_t* items;  /* used by the holder of the I/O role */
  int nitems;
  pthread_cond_t up_cond; /* an endpoint connected (under base.mu) */
  PFModuleHandle module;  /* the connection's own reference, until detached */
  atomic_int detached;    /* PFRPCDetach: closes when its last user goes */
  atomic_int finished;    /* closed for good, by whichever path came first */
} pf_rpc_client;

/* Live connections, for PFRPCDisconnect. */
static pthread_mutex_t g_clients_mu = PTHREAD_MUTEX_INITIALIZER;
static pf_rpc_client* g_live;

static void describe(pf_rpc_peer* p, const pf_rpc_route* r, char* buf, size_t cap) {
  pf_rpc_client* c = (pf_rpc_client*)p;
  if (r->endpoint >= 0 && r->endpoint < c->n)
    snprintf(buf, cap, "server %s", c->endpoints[r->endpoint]);
  else snprintf(buf, cap, "server #%d", r->endpoint);
}

static int pick(pf_rpc_peer* p, pf_rpc_route* out) {
  pf_rpc_client* c = (pf_rpc_client*)p;
  unsigned start = atomic_fetch_add(&c->rr, 1);
  int k = (int)(start % (unsigned)c->n);
  for (int i = 0; i < c->n; ++i) {
    int j = (int)((start + (unsigned)i) % (unsigned)c->n);
    if (atomic_load(&c->connected[j])) {
      k = j;
      break;
    }
  }
  memset(out, 0, sizeof *out);
  out->endpoint = k;
  return 0;
}

static void client_free(pf_rpc_client* c) {
  for (int i = 0; i < c->n; ++i) {
    free(c->endpoints[i]);
    free(c->problem[i]);
    for (pf_rpc_msg* m = c->pending[i].head; m;) {
      pf_rpc_msg* next = m->next;
      pf_rpc_msg_free(m);
      m = next;
    }
  }
  free(c->endpoints);
  free(c->problem);
  free(c->dealers);
  free(c->monitors);
  free((void*)c->connected);
  free(c->pending);
  free(c->items);
  pthread_cond_destroy(&c->up_cond);
  pthread_cond_destroy(&c->hk_cond);
  pf_rpc_peer_fini(&c->base);
  free(c);
}

static void client_destroy(pf_rpc_peer* p) { client_free((pf_rpc_client*)p); }

/* ---- the I/O thread ---- */

static void queue_push(msg_queue* q, pf_rpc_msg* m) {
  if (m->waiter_id == 0 && q->unasked >= PF_RPC_CLIENT_UNASKED) {
    pf_rpc_msg_free(m);
    return;
  }
  q->unasked += m->waiter_id == 0;
  m->next = NULL;
  if (q->tail) q->tail->next = m;
  else q->head = m;
  q->tail = m;
}

static void flush(pf_rpc_client* c, int k) {
  msg_queue* q = &c->pending[k];
  while (q->head) {
    pf_rpc_msg* m = q->head;
    if (m->waiter_id && !pf_rpc_waiter_alive(&c->base, m->waiter_id)) {
      /* Its call already failed: never send it late. */
    } else if (pf_rpc_msg_send(m, c->dealers[k], ZMQ_DONTWAIT) < 0) {
      return; /* not connected (ZMQ_IMMEDIATE) or full: later */
    } else if (m->waiter_id) {
      pf_rpc_mark_sent(&c->base, m->waiter_id);
    }
    q->head = m->next;
    if (q->head == NULL) q->tail = NULL;
    q->unasked -= m->waiter_id == 0;
    pf_rpc_msg_free(m);
  }
}

static void on_event(pf_rpc_client* c, int k) {
  zmq_msg_t f1, f2;
  zmq_msg_init(&f1);
  zmq_msg_init(&f2);
  if (zmq_msg_recv(&f1, c->monitors[k], ZMQ_DONTWAIT) < 0) goto done;
  if (!zmq_msg_more(&f1) || zmq_msg_recv(&f2, c->monitors[k], 0) < 0) goto done;
  if (zmq_msg_size(&f1) < 6) goto done;
  uint16_t ev;
  memcpy(&ev, zmq_msg_data(&f1), 2);
  if (ev == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
    pthread_mutex_lock(&c->base.mu);
    atomic_store(&c->connected[k], 1);
    pthread_cond_broadcast(&c->up_cond);
    pthread_mutex_unlock(&c->base.mu);
    flush(c, k);
  } else if (ev == ZMQ_EVENT_DISCONNECTED) {
    if (atomic_exchange(&c->connected[k], 0)) {
      pf_rpc_route r;
      memset(&r, 0, sizeof r);
      r.endpoint = k;
      pf_rpc_fail_route(&c->base, &r, 0, "the connection was lost during the call");
    }
  } else if (ev & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                   ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)) {
    /* PFRPCConnect reads it, under the lock, to say why nothing answered. */
    char* why = strdup("the security handshake failed (check the CURVE keys)");
    pthread_mutex_lock(&c->base.mu);
    free(c->problem[k]);
    c->problem[k] = why;
    pthread_mutex_unlock(&c->base.mu);
  }
done:
  zmq_msg_close(&f1);
  zmq_msg_close(&f2);
}

/* The thread that holds the I/O role on this thread, if any: a message
 * posted while it is held is sent by the holder's loop, not re-entrantly. */
static _Thread_local pf_rpc_client* tl_role;

/* Moves what other threads queued to the per-endpoint queues. */
static void move_out(pf_rpc_client* c) {
  for (pf_rpc_msg* m = pf_rpc_take_out(&c->base); m;) {
    pf_rpc_msg* next = m->next;
    int k = m->route.endpoint;
    if (k < 0 || k >= c->n) pf_rpc_msg_free(m);
    else queue_push(&c->pending[k], m);
    m = next;
  }
}

/* Takes in up to PF_RPC_CLIENT_RECV_BATCH messages: the replies that
 * requests among them make are queued (and bounded) before more come in. */
static void recv_batch(pf_rpc_client* c, int k) {
  for (int taken = 0; taken < PF_RPC_CLIENT_RECV_BATCH; ++taken) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, c->dealers[k], ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&msg);
      return;
    }
    pf_rpc_route r;
    memset(&r, 0, sizeof r);
    r.endpoint = k;
    const char* why = NULL;
    pf_rpc_msg* in = pf_rpc_msg_recv_rest(&r, &msg, c->dealers[k], &why);
    zmq_msg_close(&msg);
    if (in) pf_rpc_dispatch(&c->base, in, NULL);
    else if (why) pf_rpc_note_bad(&c->base, &r, why);
  }
}

static void drain_events(pf_rpc_client* c, int k) {
  for (;;) {
    int ev = 0;
    size_t sz = sizeof ev;
    if (zmq_getsockopt(c->monitors[k], ZMQ_EVENTS, &ev, &sz) != 0 || !(ev & ZMQ_POLLIN)) return;
    on_event(c, k);
  }
}

/* One round of I/O, by the holder of the role: send what is queued, wait
 * up to timeout_ms for anything, then take in what came. */
static void io_pass(pf_rpc_client* c, int timeout_ms) {
  move_out(c);
  for (int k = 0; k < c->n; ++k) flush(c, k);
  if (zmq_poll(c->items, c->nitems, timeout_ms) < 0 && errno != EINTR) return;
  move_out(c);
  for (int k = 0; k < c->n; ++k) {
    if (c->items[2 + 2 * k].revents & ZMQ_POLLIN) drain_events(c, k);
    flush(c, k);
    if (c->items[1 + 2 * k].revents & ZMQ_POLLIN) recv_batch(c, k);
  }
}

/* io_poll: polls until w has mail or has failed (or the connection closes). */
static void client_poll(pf_rpc_peer* p, pf_rpc_waiter* w) {
  pf_rpc_client* c = (pf_rpc_client*)p;
  tl_role = c;
  for (;;) {
    /* Deadlines first: a waiter that has just expired must not wait
     * through another poll (nor get a reply that comes during it). */
    int wait_ms = pf_rpc_expire(p, PF_RPC_SIGNAL_CHECK_MS);
    pthread_mutex_lock(&p->mu);
    int done = w->inbox != NULL || w->failed || atomic_load(&p->closed);
    pthread_mutex_unlock(&p->mu);
    if (done || pf_rpc_check_interrupt(p, w)) break;
    io_pass(c, wait_ms);
  }
  /* Replies this thread queued while it polled (errors for stray
   * requests) go out before the role does. */
  move_out(c);
  for (int k = 0; k < c->n; ++k) flush(c, k);
  tl_role = NULL;
}

/* Runs one pass with the role if nobody holds it; returns whether it did. */
static int pass_if_free(pf_rpc_client* c, int timeout_ms) {
  pthread_mutex_lock(&c->base.mu);
  int mine = !c->base.io_role && !atomic_load(&c->base.closed);
  if (mine) c->base.io_role = 1;
  pthread_mutex_unlock(&c->base.mu);
  if (!mine) return 0;
  tl_role = c;
  pf_rpc_expire(&c->base, 0);
  io_pass(c, timeout_ms);
  tl_role = NULL;
  pthread_mutex_lock(&c->base.mu);
  pf_rpc_role_released(&c->base);
  pthread_mutex_unlock(&c->base.mu);
  return 1;
}

/* after_post: a message queued when nobody polls goes out at once. */
static void client_after_post(pf_rpc_peer* p) {
  pf_rpc_client* c = (pf_rpc_client*)p;
  if (tl_role != c) pass_if_free(c, 0);
}

/* The housekeeper: when no caller polls, it notices what happens on an idle
 * connection (a server's coming and going), fails calls past their
 * deadline, and sends what finalizers queued. */
static void* client_housekeeper(void* arg) {
  pf_rpc_client* c = arg;
  pthread_mutex_lock(&c->base.mu);
  while (!atomic_load(&c->stop)) {
    pthread_mutex_unlock(&c->base.mu);
    pass_if_free(c, 0);
    pthread_mutex_lock(&c->base.mu);
    if (atomic_load(&c->stop)) break;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50 * 1000000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(&c->hk_cond, &c->base.mu, &ts);
  }
  pthread_mutex_unlock(&c->base.mu);
  return NULL;
}

/* ---- connecting ---- */

static int set_opt(void* s, int opt, const void* v, size_t n, const char* what) {
  if (zmq_setsockopt(s, opt, v, n) != 0)
    return PF_ERROR(kPFErrValueError, "PFRPCConnect: option %s: %s", what,
                    zmq_strerror(zmq_errno()));
  return 0;
}

static int check_key(const char* k, const char* what) {
  if (k == NULL) return PF_ERROR(kPFErrValueError, "PFRPCConnect: option %s is missing", what);
  uint8_t bin[32];
  if (strlen(k) != 40 || zmq_z85_decode(bin, k) == NULL)
    return PF_ERROR(kPFErrValueError,
                    "PFRPCConnect: option %s is not a CURVE key (40 characters of Z85)", what);
  return 0;
}

static int open_socket(pf_rpc_client* c, int k, const PFRPCOptions* o, int64_t maxmsg) {
  void* s = zmq_socket(c->zctx, ZMQ_DEALER);
  if (s == NULL)
    return PF_ERROR(kPFErrRuntimeError, "PFRPCConnect: cannot make a socket: %s",
                    zmq_strerror(zmq_errno()));
  c->dealers[k] = s;
  int zero = 0, one = 1, reconnect = 100, reconnect_max = 2000, hb = 1000, hb_timeout = 5000;
  uint8_t rid[16];
  if (getrandom(rid, sizeof rid, 0) != (ssize_t)sizeof rid)
    for (size_t i = 0; i < sizeof rid; ++i) rid[i] = (uint8_t)(rand() & 0xff);
  rid[0] |= 1; /* a routing id must not begin with a zero byte */
  if (set_opt(s, ZMQ_LINGER, &zero, sizeof zero, "linger") != 0 ||
      set_opt(s, ZMQ_IMMEDIATE, &one, sizeof one, "immediate") != 0 ||
      set_opt(s, ZMQ_ROUTING_ID, rid, sizeof rid, "routing id") != 0 ||
      set_opt(s, ZMQ_RECONNECT_IVL, &reconnect, sizeof reconnect, "reconnect") != 0 ||
      set_opt(s, ZMQ_RECONNECT_IVL_MAX, &reconnect_max, sizeof reconnect_max, "reconnect") != 0 ||
      set_opt(s, ZMQ_HEARTBEAT_IVL, &hb, sizeof hb, "heartbeat") != 0 ||
      set_opt(s, ZMQ_HEARTBEAT_TIMEOUT, &hb_timeout, sizeof hb_timeout, "heartbeat") != 0 ||
      set_opt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg, "max_message_size") != 0)
    return -1;
  if (o != NULL && o->server_key != NULL) {
    if (set_opt(s, ZMQ_CURVE_SERVERKEY, o->server_key, 40, "server_key") != 0 ||
        set_opt(s, ZMQ_CURVE_PUBLICKEY, o->client_public_key, 40, "client_public_key") != 0 ||
        set_opt(s, ZMQ_CURVE_SECRETKEY, o->client_secret_key, 40, "client_secret_key") != 0)
      return -1;
  }
  char addr[64];
  snprintf(addr, sizeof addr, "inproc://pf-rpc-monitor-%p-%d", (void*)c, k);
  if (zmq_socket_monitor(s, addr,
                         ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
                             ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) != 0)
    return PF_ERROR(kPFErrRuntimeError, "PFRPCConnect: cannot monitor a socket: %s",
                    zmq_strerror(zmq_errno()));
  c->monitors[k] = zmq_socket(c->zctx, ZMQ_PAIR);
  if (c->monitors[k] == NULL || zmq_setsockopt(c->monitors[k], ZMQ_LINGER, &zero, sizeof zero) ||
      zmq_connect(c->monitors[k], addr) != 0)
    return PF_ERROR(kPFErrRuntimeError, "PFRPCConnect: cannot monitor a socket: %s",
                    zmq_strerror(zmq_errno()));
  if (zmq_connect(s, c->endpoints[k]) != 0)
    return PF_ERROR(kPFErrValueError, "PFRPCConnect: endpoint '%s': %s", c->endpoints[k],
                    zmq_strerror(zmq_errno()));
  return 0;
}

/* Stops the I/O thread and closes the sockets; the struct stays. */
static void client_close(pf_rpc_client* c, const char* reason) {
  pf_rpc_peer_shutdown(&c->base, reason);
  /* Nobody takes the I/O role once closed; wait for its holder to give it
   * up (the eventfd ends its poll), then nobody touches the sockets. */
  uint64_t one = 1;
  ssize_t wrc = write(c->base.wake_fd, &one, sizeof one);
  (void)wrc;
  pthread_mutex_lock(&c->base.mu);
  atomic_store(&c->stop, 1);
  pthread_cond_broadcast(&c->hk_cond);
  while (c->base.io_role) pthread_cond_wait(&c->base.role_cond, &c->base.mu);
  pthread_mutex_unlock(&c->base.mu);
  if (c->io_started) {
    pthread_join(c->io, NULL);
    c->io_started = 0;
  }
  for (int k = 0; k < c->n; ++k) {
    if (c->dealers[k]) {
      zmq_socket_monitor(c->dealers[k], NULL, 0);
      zmq_close(c->dealers[k]);
    }
    if (c->monitors[k]) zmq_close(c->monitors[k]);
    c->dealers[k] = c->monitors[k] = NULL;
  }
  if (c->zctx) zmq_ctx_term(c->zctx);
  c->zctx = NULL;
}

static void client_unused(pf_rpc_peer* p);

/* ---- the module: built from the server's answer to HELLO ---- */

/* What building the module holds: the parsed reply and the functions made
 * so far (the module takes its own references). */
typedef struct {
  pf_rpc_parsed m;
  PFFunctionHandle* fns;
  uint32_t nfns;
} hello_answer;

/* The server answered HELLO with an error. */
static int hello_refused(pf_rpc_client* c, const pf_rpc_parsed* m) {
  char* kind = m->nrest >= 2 ? pf_rpc_strdup_obj(&m->rest[0]) : NULL;
  char* msg = m->nrest >= 2 ? pf_rpc_strdup_obj(&m->rest[1]) : NULL;
  PF_ERROR(kind ? kind : kPFErrRuntimeError, "PFRPCConnect: %s: %s", c->endpoints[0],
           msg ? msg : "the server refused");
  free(kind);
  free(msg);
  return -1;
}

/* The list of [name, signature, doc] in an OK reply. */
static int hello_list(const pf_rpc_parsed* m, const msgpack_object** list) {
  if (m->kind != PF_RPC_OK || m->nrest != 1 || m->rest[0].type != MSGPACK_OBJECT_ARRAY)
    return PF_ERROR(kPFErrValueError, "PFRPCConnect: malformed reply to HELLO");
  if (m->rest[0].via.array.size > INT_MAX)
    return PF_ERROR(kPFErrValueError, "PFRPCConnect: the server lists too many functions (%u)",
                    m->rest[0].via.array.size);
  *list = &m->rest[0];
  return 0;
}

/* The remote function of list entry `i`, with the server's signature and
 * doc as its metadata; *out is a new reference. */
static int make_function(pf_rpc_client* c, const msgpack_object* e, uint32_t i,
                         PFFunctionHandle* out) {
  if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 3 ||
      e->via.array.ptr[0].type != MSGPACK_OBJECT_STR)
    return PF_ERROR(kPFErrValueError, "PFRPCConnect: malformed function list entry %u", i);
  char* name = pf_rpc_strdup_obj(&e->via.array.ptr[0]);
  char* sig = pf_rpc_strdup_obj(&e->via.array.ptr[1]);
  char* doc = pf_rpc_strdup_obj(&e->via.array.ptr[2]);
  int st = name == NULL ? PF_ERROR(kPFErrMemoryError, "PFRPCConnect: out of memory")
                        : pf_rpc_make_remote(&c->base, name, 0, NULL, 0, out);
  if (st == 0 && (st = PFFuncSetInfo(*out, name, sig, doc)) != 0) {
    PFFuncFree(*out);
    *out = NULL;
  }
  free(name);
  free(sig);
  free(doc);
  return st;
}

static int make_module(pf_rpc_client* c, hello_answer* h) {
  const msgpack_object* list = NULL;
  if (h->m.kind == PF_RPC_ERROR) return hello_refused(c, &h->m);
  if (hello_list(&h->m, &list) != 0) return -1;
  uint32_t n = list->via.array.size;
  h->fns = calloc(n ? n : 1, sizeof *h->fns);
  if (h->fns == NULL) return PF_ERROR(kPFErrMemoryError, "PFRPCConnect: out of memory");
  for (uint32_t i = 0; i < n; ++i, ++h->nfns)
    if (make_function(c, &list->via.array.ptr[i], i, &h->fns[i]) != 0) return -1;
  if (PFModCreateFromFunctions(c->endpoints[0], h->fns, (int)h->nfns, &c->module) != 0) {
    PFErrorAppendTraceback("  while building the module of PFRPCConnect");
    return -1;
  }
  return 0;
}

/* Parses the HELLO reply and builds the module: one remote function per
 * name the server exposes, each holding a reference to the connection. */
static int build_module(pf_rpc_client* c, const pf_rpc_msg* reply) {
  hello_answer h;
  memset(&h, 0, sizeof h);
  if (pf_rpc_parse(reply->data, reply->size, &h.m) != 0)
    return PF_ERROR(kPFErrValueError, "PFRPCConnect: malformed reply to HELLO");
  int rc = make_module(c, &h);
  for (uint32_t i = 0; i < h.nfns; ++i) PFFuncFree(h.fns[i]);
  free(h.fns);
  pf_rpc_parsed_free(&h.m);
  return rc;
}

/* ---- connecting: each step acquires into the connection, which
 * connect_failed releases whatever step was reached ---- */

static const char* const k_connect = "PFRPCConnect";

/* Reads the options into *timeout and *maxmsg, refusing bad ones. */
static int check_connect_options(const PFRPCOptions* o, int* timeout, int64_t* maxmsg) {
  *timeout = PF_RPC_DEFAULT_TIMEOUT_MS;
  *maxmsg = PF_RPC_DEFAULT_MAX_MESSAGE;
  if (o == NULL) return 0;
  if (o->timeout_ms < 0)
    return PF_ERROR(kPFErrValueError, "%s: option timeout_ms is negative (%d)", k_connect,
                    o->timeout_ms);
  if (o->timeout_ms > 0) *timeout = o->timeout_ms;
  if (o->max_message_size < 0)
    return PF_ERROR(kPFErrValueError, "%s: option max_message_size is negative", k_connect);
  if (o->max_message_size > 0) *maxmsg = o->max_message_size;
  if (o->server_key == NULL && o->client_public_key == NULL && o->client_secret_key == NULL)
    return 0;
  if (check_key(o->server_key, "server_key") != 0 ||
      check_key(o->client_public_key, "client_public_key") != 0 ||
      check_key(o->client_secret_key, "client_secret_key") != 0)
    return -1;
  if (!zmq_has("curve"))
    return PF_ERROR(kPFErrNotImplementedError, "%s: this ZeroMQ has no CURVE support", k_connect);
  return 0;
}

/* A connection to `n` endpoints with nothing open yet; *out is NULL when
 * even the struct could not be made. */
static int client_new(int timeout, int n, pf_rpc_client** out) {
  pf_rpc_client* c = calloc(1, sizeof *c);
  *out = NULL;
  if (c == NULL) return PF_ERROR(kPFErrMemoryError, "%s: out of memory", k_connect);
  if (pf_rpc_peer_init(&c->base, 0, timeout) != 0) {
    free(c);
    return -1;
  }
  pthread_cond_init(&c->up_cond, NULL);
  pthread_cond_init(&c->hk_cond, NULL);
  c->base.io_poll = client_poll;
  c->base.after_post = client_after_post;
  c->base.pick_route = pick;
  c->base.describe_route = describe;
  c->base.destroy = client_destroy;
  c->base.unused = client_unused;
  *out = c;
  c->endpoints = calloc((size_t)n, sizeof *c->endpoints);
  c->problem = calloc((size_t)n, sizeof *c->problem);
  c->dealers = calloc((size_t)n, sizeof *c->dealers);
  c->monitors = calloc((size_t)n, sizeof *c->monitors);
  c->connected = calloc((size_t)n, sizeof *c->connected);
  c->pending = calloc((size_t)n, sizeof *c->pending);
  if (!c->endpoints || !c->problem || !c->dealers || !c->monitors || !c->connected || !c->pending)
    return PF_ERROR(kPFErrMemoryError, "%s: out of memory", k_connect);
  c->n = n;
  for (int k = 0; k < n; ++k) atomic_init(&c->connected[k], 0);
  return 0;
}

/* Copies the endpoints of the comma-separated list, without the blanks
 * around each. */
static int split_endpoints(pf_rpc_client* c, const char* endpoints) {
  const char* s = endpoints;
  for (int k = 0; k < c->n; ++k) {
    const char* e = strchr(s, ',');
    size_t len = e ? (size_t)(e - s) : strlen(s);
    while (len && (*s == ' ')) ++s, --len;
    while (len && s[len - 1] == ' ') --len;
    if (len == 0)
      return PF_ERROR(kPFErrValueError, "%s: argument 'endpoints': endpoint %d of \"%s\" is empty",
                      k_connect, k, endpoints);
    if ((c->endpoints[k] = strndup(s, len)) == NULL)
      return PF_ERROR(kPFErrMemoryError, "%s: out of memory", k_connect);
    s = e ? e + 1 : s + len;
  }
  return 0;
}

/* The context, a DEALER and its monitor per endpoint, and the poll items
 * of whoever holds the I/O role. */
static int open_sockets(pf_rpc_client* c, const PFRPCOptions* o, int64_t maxmsg) {
  c->zctx = pf_rpc_zmq_context();
  if (c->zctx == NULL)
    return PF_ERROR(kPFErrRuntimeError, "%s: cannot make a ZeroMQ context", k_connect);
  for (int k = 0; k < c->n; ++k)
    if (open_socket(c, k, o, maxmsg) != 0) return -1;
  c->nitems = 1 + 2 * c->n;
  c->items = calloc((size_t)c->nitems, sizeof *c->items);
  if (c->items == NULL) return PF_ERROR(kPFErrMemoryError, "%s: out of memory", k_connect);
  c->items[0].fd = c->base.wake_fd;
  c->items[0].events = ZMQ_POLLIN;
  for (int k = 0; k < c->n; ++k) {
    c->items[1 + 2 * k].socket = c->dealers[k];
    c->items[1 + 2 * k].events = ZMQ_POLLIN;
    c->items[2 + 2 * k].socket = c->monitors[k];
    c->items[2 + 2 * k].events = ZMQ_POLLIN;
  }
  return 0;
}

static int start_housekeeper(pf_rpc_client* c) {
  if (pthread_create(&c->io, NULL, client_housekeeper, c) != 0)
    return PF_ERROR(kPFErrRuntimeError, "%s: cannot start the housekeeping thread", k_connect);
  c->io_started = 1;
  return 0;
}

/* Waits up to the timeout for a server's handshake; *r is its route. */
static int wait_for_server(pf_rpc_client* c, const char* endpoints, pf_rpc_route* r) {
  int64_t deadline = pf_rpc_now_ms() + c->base.timeout_ms;
  memset(r, 0, sizeof *r);
  r->endpoint = -1;
  for (;;) {
    for (int k = 0; k < c->n && r->endpoint < 0; ++k)
      if (atomic_load(&c->connected[k])) r->endpoint = k;
    int64_t now = pf_rpc_now_ms();
    if (r->endpoint >= 0) return 0;
    if (now >= deadline) break;
    int wait = (int)(deadline - now < 20 ? deadline - now : 20);
    /* Poll the handshakes here, or wait while the housekeeper does. */
    if (!pass_if_free(c, wait)) {
      pthread_mutex_lock(&c->base.mu);
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_nsec += (long)wait * 1000000L;
      ts.tv_sec += ts.tv_nsec / 1000000000L;
      ts.tv_nsec %= 1000000000L;
      pthread_cond_timedwait(&c->up_cond, &c->base.mu, &ts);
      pthread_mutex_unlock(&c->base.mu);
    }
  }
  char why[128] = "";
  pthread_mutex_lock(&c->base.mu);
  for (int k = 0; k < c->n && why[0] == '\0'; ++k)
    if (c->problem[k]) snprintf(why, sizeof why, ": %s", c->problem[k]);
  pthread_mutex_unlock(&c->base.mu);
  return PF_ERROR("ConnectionError", "%s: no server answered at %s within %d ms%s", k_connect,
                  endpoints, c->base.timeout_ms, why);
}

/* Asks the server at `r` what it exposes and builds the module. */
static int say_hello(pf_rpc_client* c, const pf_rpc_route* r) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  pf_rpc_packer_init(&pk, &sb);
  uint64_t id = atomic_fetch_add(&c->base.next_id, 1);
  pf_rpc_pack_header(&pk, PF_RPC_HELLO, id, 0, 0);
  pf_rpc_msg* reply = NULL;
  int st = pf_rpc_request_raw(&c->base, r, id, sb.data, sb.size, &reply);
  msgpack_sbuffer_destroy(&sb);
  if (st != 0) return PF_ERROR(PFErrorGetKind(), "%s: %s", k_connect, PFErrorGetMessage());
  st = build_module(c, reply);
  pf_rpc_msg_free(reply);
  return st;
}

/* Releases what the steps acquired, keeping their error; returns -1. */
static int connect_failed(pf_rpc_client* c) {
  pf_rpc_saved_error e;
  pf_rpc_error_save(&e);
  client_close(c, "the connection was closed");
  PFModuleHandle mod = c->module;
  c->module = NULL;
  PFModFree(mod);
  pf_rpc_peer_release(&c->base);
  return pf_rpc_error_restore(&e);
}

int PFRPCConnect(const char* endpoints, const PFRPCOptions* options, PFModuleHandle* out) {
  if (endpoints == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'endpoints' is NULL", k_connect);
  if (out == NULL) return PF_ERROR(kPFErrTypeError, "%s: argument 'out' is NULL", k_connect);
  int timeout;
  int64_t maxmsg;
  if (check_connect_options(options, &timeout, &maxmsg) != 0) return -1;
  int n = 1;
  for (const char* s = endpoints; *s; ++s) n += *s == ',';
  pf_rpc_client* c = NULL;
  pf_rpc_route r;
  if (client_new(timeout, n, &c) != 0) return c ? connect_failed(c) : -1;
  if (split_endpoints(c, endpoints) != 0 || open_sockets(c, options, maxmsg) != 0 ||
      start_housekeeper(c) != 0 || wait_for_server(c, endpoints, &r) != 0 || say_hello(c, &r) != 0)
    return connect_failed(c);
  PFObjectRetain(c->module);
  *out = c->module;
  pthread_mutex_lock(&g_clients_mu);
  c->next = g_live;
  g_live = c;
  pthread_mutex_unlock(&g_clients_mu);
  return 0;
}

/* Takes the connection of `mod` out of the live list (NULL: none). */
static pf_rpc_client* take_live(PFModuleHandle mod) {
  pthread_mutex_lock(&g_clients_mu);
  pf_rpc_client** pp = &g_live;
  while (*pp && (*pp)->module != mod) pp = &(*pp)->next;
  pf_rpc_client* c = *pp;
  if (c) *pp = c->next;
  pthread_mutex_unlock(&g_clients_mu);
  return c;
}

/* Closes the connection once, whichever path comes first, and drops the
 * connection's own reference to its record (the record goes when the last
 * remote function does). */
static void finish(pf_rpc_client* c, const char* reason) {
  if (atomic_exchange(&c->finished, 1)) return;
  client_close(c, reason);
  pf_rpc_peer_release(&c->base);
}

/* unused: the last remote function of the connection went. */
static void client_unused(pf_rpc_peer* p) {
  pf_rpc_client* c = (pf_rpc_client*)p;
  if (atomic_load(&c->detached))
    finish(c, "the connection was closed: nothing referenced it any more");
}

int PFRPCDisconnect(PFModuleHandle mod) {
  if (mod == NULL) return PF_ERROR(kPFErrTypeError, "PFRPCDisconnect: argument 'mod' is NULL");
  pf_rpc_client* c = take_live(mod);
  if (c == NULL)
    return PF_ERROR(kPFErrTypeError,
                    "PFRPCDisconnect: argument 'mod' is not a module of a live connection "
                    "(not made by PFRPCConnect, or already disconnected or detached)");
  pf_rpc_peer_retain(&c->base);
  finish(c, "the connection was closed (PFRPCDisconnect)");
  PFModuleHandle m = c->module;
  c->module = NULL;
  PFModFree(m);
  pf_rpc_peer_release(&c->base);
  return 0;
}

int PFRPCDetach(PFModuleHandle mod) {
  if (mod == NULL) return PF_ERROR(kPFErrTypeError, "PFRPCDetach: argument 'mod' is NULL");
  pf_rpc_client* c = take_live(mod);
  if (c == NULL)
    return PF_ERROR(kPFErrTypeError,
                    "PFRPCDetach: argument 'mod' is not a module of a live connection "
                    "(not made by PFRPCConnect, or already disconnected or detached)");
  pf_rpc_peer_retain(&c->base); /* the close below may drop the connection's own */
  atomic_store(&c->detached, 1);
  PFModuleHandle m = c->module;
  c->module = NULL;
  PFModFree(m); /* may release the last user, which closes it */
  if (atomic_load(&c->base.users) == 0)
    finish(c, "the connection was closed: nothing referenced it any more");
  pf_rpc_peer_release(&c->base);
  return 0;
}
