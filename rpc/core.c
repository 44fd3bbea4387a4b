/* What the client and the server share: waiters for replies, exported
 * functions, serving a request, making a remote call, remote functions. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

int64_t pf_rpc_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void pf_rpc_error_save(pf_rpc_saved_error* e) {
  snprintf(e->kind, sizeof e->kind, "%s", PFErrorGetKind());
  e->msg = strdup(PFErrorGetMessage());
  e->tb = strdup(PFErrorGetTraceback());
}

int pf_rpc_error_restore(pf_rpc_saved_error* e) {
  if (e->msg == NULL || e->tb == NULL) {
    PFErrorSet(kPFErrMemoryError, "rpc: out of memory keeping an error");
  } else {
    PFErrorSet(e->kind, e->msg);
    if (e->tb[0] != '\0') PFErrorAppendTraceback(e->tb);
  }
  free(e->msg);
  free(e->tb);
  e->msg = e->tb = NULL;
  return -1;
}

int pf_rpc_route_eq(const pf_rpc_route* a, const pf_rpc_route* b) {
  return a->endpoint == b->endpoint && a->ident_len == b->ident_len &&
         memcmp(a->ident, b->ident, a->ident_len) == 0;
}

int pf_rpc_peer_init(pf_rpc_peer* p, int is_server, int timeout_ms) {
  memset(p, 0, sizeof *p);
  p->is_server = is_server;
  p->timeout_ms = timeout_ms;
  atomic_init(&p->next_id, 1);
  atomic_init(&p->closed, 0);
  atomic_init(&p->refs, 1);
  atomic_init(&p->users, 0);
  p->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (p->wake_fd < 0)
    return PF_ERROR(kPFErrRuntimeError, "rpc: eventfd failed: %s", strerror(errno));
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->role_cond, NULL);
  return 0;
}

void pf_rpc_role_released(pf_rpc_peer* p) {
  p->io_role = 0;
  pf_rpc_waiter *w, *tmp;
  HASH_ITER(hh, p->waiters, w, tmp) pthread_cond_signal(&w->cond);
  pthread_cond_broadcast(&p->role_cond);
}

static void free_msgs(pf_rpc_msg* m) {
  while (m != NULL) {
    pf_rpc_msg* next = m->next;
    pf_rpc_msg_free(m);
    m = next;
  }
}

/* Releases a table of exports taken out of a peer; runs their finalizers,
 * so never under the peer's lock. */
static void free_exports(pf_rpc_export* all) {
  pf_rpc_export *e, *tmp;
  HASH_ITER(hh, all, e, tmp) {
    HASH_DEL(all, e);
    PFFuncFree(e->func);
    free(e);
  }
}

void pf_rpc_peer_fini(pf_rpc_peer* p) {
  /* Exports are released outside the lock: their finalizers are user code. */
  pthread_mutex_lock(&p->mu);
  pf_rpc_export* all = p->exports;
  p->exports = NULL;
  p->num_exports = 0;
  pf_rpc_msg* out = p->out;
  p->out = p->out_tail = NULL;
  pthread_mutex_unlock(&p->mu);
  free_exports(all);
  free_msgs(out);
  pf_rpc_waiter *w, *wtmp;
  HASH_ITER(hh, p->waiters, w, wtmp) HASH_DEL(p->waiters, w);
  if (p->wake_fd >= 0) close(p->wake_fd);
  p->wake_fd = -1;
  pthread_cond_destroy(&p->role_cond);
  pthread_mutex_destroy(&p->mu);
}

void pf_rpc_peer_retain(pf_rpc_peer* p) { atomic_fetch_add(&p->refs, 1); }

void pf_rpc_peer_release(pf_rpc_peer* p) {
  if (p != NULL && atomic_fetch_sub(&p->refs, 1) == 1) p->destroy(p);
}

/* Messages up to this size are copied into ZeroMQ; larger ones are handed
 * over (ZeroMQ frees them once they are sent). */
#define PF_RPC_ZERO_COPY_MIN (64 * 1024)

static pf_rpc_msg* msg_shell(const pf_rpc_route* r) {
  pf_rpc_msg* m = malloc(sizeof *m);
  if (m == NULL) return NULL;
  m->next = NULL;
  atomic_init(&m->refs, 1);
  if (r) m->route = *r;
  else memset(&m->route, 0, sizeof m->route);
  m->waiter_id = 0;
  m->size = 0;
  m->data = NULL;
  m->has_zmsg = 0;
  m->tally = NULL;
  m->counted = 0;
  m->exports = NULL;
  m->nexports = 0;
  m->side = NULL;
  m->nside = 0;
  m->side_bytes = 0;
  return m;
}

pf_rpc_msg* pf_rpc_msg_new(const pf_rpc_route* r, const char* data, size_t n) {
  pf_rpc_msg* m = msg_shell(r);
  if (m == NULL) return NULL;
  m->data = malloc(n ? n : 1);
  if (m->data == NULL) {
    free(m);
    return NULL;
  }
  if (n) memcpy(m->data, data, n);
  m->size = n;
  return m;
}

pf_rpc_msg* pf_rpc_msg_take(const pf_rpc_route* r, msgpack_sbuffer* sb) {
  pf_rpc_msg* m = msg_shell(r);
  if (m == NULL) return NULL;
  /* The buffer grew by doubling: a large message gives back what it does
   * not use, so that what it holds is what it counts (its size). */
  if (sb->size >= PF_RPC_ZERO_COPY_MIN && sb->alloc - sb->size > sb->size / 8) {
    char* fit = realloc(sb->data, sb->size);
    if (fit != NULL) {
      sb->data = fit;
      sb->alloc = sb->size;
    }
  }
  m->size = sb->size;
  m->data = msgpack_sbuffer_release(sb);
  if (m->data == NULL) m->data = malloc(1);
  if (m->data == NULL) {
    free(m);
    return NULL;
  }
  return m;
}

pf_rpc_msg* pf_rpc_msg_take_out(const pf_rpc_route* r, pf_rpc_out* o) {
  pf_rpc_msg* m = pf_rpc_msg_take(r, &o->sb);
  if (m == NULL) return NULL;
  m->side = o->side;
  m->nside = o->nside;
  m->side_bytes = o->side_bytes;
  o->side = NULL;
  o->nside = o->cap_side = 0;
  o->side_bytes = 0;
  return m;
}

pf_rpc_msg* pf_rpc_msg_from_zmq(const pf_rpc_route* r, zmq_msg_t* zm) {
  pf_rpc_msg* m = msg_shell(r);
  if (m == NULL) return NULL;
  zmq_msg_init(&m->zmsg);
  zmq_msg_move(&m->zmsg, zm);
  m->has_zmsg = 1;
  m->data = zmq_msg_data(&m->zmsg);
  m->size = zmq_msg_size(&m->zmsg);
  return m;
}

/* Reads and drops the rest of a message whose last frame read was `zm`. */
static void drop_rest(void* sock, zmq_msg_t* zm) {
  for (int more = zmq_msg_more(zm); more;) {
    zmq_msg_t x;
    zmq_msg_init(&x);
    more = zmq_msg_recv(&x, sock, 0) >= 0 && zmq_msg_more(&x);
    zmq_msg_close(&x);
  }
}

pf_rpc_msg* pf_rpc_msg_recv_rest(const pf_rpc_route* r, zmq_msg_t* body, void* sock,
                                 const char** why) {
  *why = NULL;
  int more = zmq_msg_more(body);
  pf_rpc_msg* m = pf_rpc_msg_from_zmq(r, body);
  if (m == NULL) {
    drop_rest(sock, body);
    return NULL;
  }
  /* The socket's max_message_size bounds each frame; this, all of them. */
  int64_t max = -1;
  size_t len = sizeof max;
  if (more) {
    m->side = malloc(PF_RPC_MAX_SIDE_FRAMES * sizeof *m->side);
    if (m->side == NULL || zmq_getsockopt(sock, ZMQ_MAXMSGSIZE, &max, &len) != 0) {
      drop_rest(sock, &m->zmsg);
      pf_rpc_msg_free(m);
      return NULL;
    }
  }
  while (more) {
    const char* bad = NULL;
    if (m->nside < PF_RPC_MAX_SIDE_FRAMES) {
      pf_rpc_side* f = &m->side[m->nside];
      memset(f, 0, sizeof *f);
      zmq_msg_init(&f->zmsg);
      if (zmq_msg_recv(&f->zmsg, sock, 0) < 0) { /* only when the socket closes */
        zmq_msg_close(&f->zmsg);
        pf_rpc_msg_free(m);
        return NULL;
      }
      m->nside++;
      f->data = zmq_msg_data(&f->zmsg);
      f->size = zmq_msg_size(&f->zmsg);
      m->side_bytes += f->size;
      more = zmq_msg_more(&f->zmsg);
      if (max >= 0 && pf_rpc_msg_bytes(m) > (size_t)max)
        bad = "a message larger than max_message_size in all its frames";
    } else {
      bad = "a message of more than PF_RPC_MAX_SIDE_FRAMES side frames";
    }
    if (bad != NULL) {
      *why = bad;
      drop_rest(sock, &m->side[m->nside - 1].zmsg);
      pf_rpc_msg_free(m);
      return NULL;
    }
  }
  return m;
}

/* A context option of libzmq 4.3 that its header declares only for builds
 * with the draft API; the library takes it either way, and an older one
 * refuses it (EINVAL), which is harmless here. */
#ifndef ZMQ_ZERO_COPY_RECV
#define ZMQ_ZERO_COPY_RECV 10
#endif

void* pf_rpc_zmq_context(void) {
  void* ctx = zmq_ctx_new();
  /* Each message received gets an allocation of its own, as ZeroMQ did
   * before 4.3, rather than a place in a buffer shared with the messages
   * around it: a large one is still read straight into it, and its bytes
   * then begin at the same alignment every time, which the sender's
   * padding of tensors counts on (PF_RPC_TENSOR_PADDED). Where the option
   * is unknown, tensors that arrive misaligned are copied instead. */
  if (ctx != NULL) (void)zmq_ctx_set(ctx, ZMQ_ZERO_COPY_RECV, 0);
  return ctx;
}

pf_rpc_tally* pf_rpc_tally_new(void) {
  pf_rpc_tally* t = malloc(sizeof *t);
  if (t == NULL) return NULL;
  atomic_init(&t->bytes, 0);
  atomic_init(&t->refs, 1);
  return t;
}

void pf_rpc_tally_release(pf_rpc_tally* t) {
  if (t != NULL && atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) == 1) free(t);
}

void pf_rpc_msg_retain(pf_rpc_msg* m) {
  atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}

void pf_rpc_msg_free(pf_rpc_msg* m) {
  if (m == NULL || atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) != 1) return;
  if (m->has_zmsg) zmq_msg_close(&m->zmsg);
  else free(m->data);
  for (uint32_t i = 0; i < m->nside; ++i) {
    if (m->side[i].obj != NULL) PFObjectFree(m->side[i].obj);
    else zmq_msg_close(&m->side[i].zmsg);
  }
  free(m->side);
  if (m->tally != NULL) {
    atomic_fetch_sub(&m->tally->bytes, (long long)m->counted);
    pf_rpc_tally_release(m->tally);
  }
  free(m->exports);
  free(m);
}

static void free_bytes(void* data, void* hint) {
  (void)hint;
  free(data);
}

/* ZeroMQ is done with a counted message (on any thread). */
static void release_msg(void* data, void* hint) {
  (void)data;
  pf_rpc_msg_free(hint);
}

/* Whether a message is handed over to ZeroMQ rather than copied: a large
 * one, and every counted one (so that its bytes count until ZeroMQ lets
 * them go). */
static int handed_over(const pf_rpc_msg* m) {
  return !m->has_zmsg && (m->size >= PF_RPC_ZERO_COPY_MIN || m->tally != NULL);
}

/* Hands a message's body to ZeroMQ (handed_over). */
static int send_handed(pf_rpc_msg* m, void* sock, int flags) {
  if (m->tally == NULL) {
    zmq_msg_t zm;
    if (zmq_msg_init_data(&zm, m->data, m->size, free_bytes, NULL) != 0) return -1;
    int rc = zmq_msg_send(&zm, sock, flags);
    if (rc < 0) {
      /* Not taken after all: keep a copy of the bytes for the caller. */
      char* copy = malloc(m->size);
      if (copy) memcpy(copy, m->data, m->size);
      zmq_msg_close(&zm); /* frees m->data */
      m->data = copy;
      if (copy == NULL) m->size = 0;
      return -1;
    }
    m->data = NULL; /* ZeroMQ's now */
    m->size = 0;
    return rc;
  }
  /* A counted message: ZeroMQ holds a reference to the whole message, and
   * its bytes leave the tally when ZeroMQ drops that reference (written
   * out, or discarded with the connection). */
  zmq_msg_t zm;
  pf_rpc_msg_retain(m);
  if (zmq_msg_init_data(&zm, m->data, m->size, release_msg, m) != 0) {
    pf_rpc_msg_free(m);
    return -1;
  }
  int rc = zmq_msg_send(&zm, sock, flags);
  if (rc < 0) zmq_msg_close(&zm); /* drops ZeroMQ's reference; the caller's stays */
  return rc;
}

/* Sends the side frames of a message whose body ZeroMQ took (so it takes
 * these too): each holds a reference to the message, which holds the
 * tensor the frame's bytes are in. */
static int send_sides(pf_rpc_msg* m, void* sock, int flags) {
  for (uint32_t i = 0; i < m->nside; ++i) {
    zmq_msg_t zm;
    pf_rpc_msg_retain(m);
    if (zmq_msg_init_data(&zm, (void*)(uintptr_t)m->side[i].data, m->side[i].size, release_msg,
                          m) != 0) {
      pf_rpc_msg_free(m);
      return -1;
    }
    int more = i + 1 < m->nside ? ZMQ_SNDMORE : 0;
    if (zmq_msg_send(&zm, sock, (flags & ~ZMQ_SNDMORE) | more) < 0) {
      zmq_msg_close(&zm);
      return -1;
    }
  }
  return 0;
}

/* Sends the body, then the side frames. */
static int send_body(pf_rpc_msg* m, void* sock, int flags) {
  int more = m->nside > 0 ? ZMQ_SNDMORE : 0;
  int rc = handed_over(m) ? send_handed(m, sock, flags | more)
                          : zmq_send(sock, m->data, m->size, flags | more);
  if (rc < 0 || m->nside == 0) return rc;
  return send_sides(m, sock, flags) < 0 ? -1 : rc;
}

int pf_rpc_msg_send(pf_rpc_msg* m, void* sock, int flags) {
  if (!handed_over(m) && m->nside == 0) return zmq_send(sock, m->data, m->size, flags);
  /* Hand the bytes over only when the socket can take them now, so that a
   * failed send never leaves them half owned. */
  int ev = 0;
  size_t sz = sizeof ev;
  if (zmq_getsockopt(sock, ZMQ_EVENTS, &ev, &sz) != 0 || !(ev & ZMQ_POLLOUT)) {
    errno = EAGAIN;
    return -1;
  }
  return pf_rpc_msg_send_part(m, sock, flags);
}

int pf_rpc_msg_send_part(pf_rpc_msg* m, void* sock, int flags) { return send_body(m, sock, flags); }

static void wake(pf_rpc_peer* p) {
  uint64_t one = 1;
  ssize_t rc = write(p->wake_fd, &one, sizeof one);
  (void)rc; /* EAGAIN: the counter is already nonzero, the thread wakes */
}

static void enqueue(pf_rpc_peer* p, pf_rpc_msg* m) {
  if (p->out_tail) p->out_tail->next = m;
  else p->out = m;
  p->out_tail = m;
}

/* Under the lock: queues a message, counted in its client's tally on a
 * server. */
static void enqueue_counted(pf_rpc_peer* p, pf_rpc_msg* m) {
  if (p->count_post != NULL) p->count_post(p, m);
  enqueue(p, m);
}

void pf_rpc_post(pf_rpc_peer* p, pf_rpc_msg* m) {
  pthread_mutex_lock(&p->mu);
  enqueue_counted(p, m);
  pthread_mutex_unlock(&p->mu);
  wake(p);
  if (p->after_post) p->after_post(p);
}

pf_rpc_msg* pf_rpc_take_out(pf_rpc_peer* p) {
  uint64_t n;
  ssize_t rc = read(p->wake_fd, &n, sizeof n);
  (void)rc;
  pthread_mutex_lock(&p->mu);
  pf_rpc_msg* m = p->out;
  p->out = p->out_tail = NULL;
  pthread_mutex_unlock(&p->mu);
  return m;
}

/* Posts a copy of an sbuffer to `r`; a failed allocation drops it (the
 * other side times out). */
static void post_buffer(pf_rpc_peer* p, const pf_rpc_route* r, msgpack_sbuffer* sb,
                        uint64_t waiter_id) {
  pf_rpc_msg* m = pf_rpc_msg_take(r, sb);
  if (m == NULL) return;
  m->waiter_id = waiter_id;
  pf_rpc_post(p, m);
}

void pf_rpc_reply_error(pf_rpc_peer* p, const pf_rpc_route* r, uint64_t id, const char* kind,
                        const char* msg) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  pf_rpc_pack_error(&sb, id, kind, msg, "");
  post_buffer(p, r, &sb, 0);
  msgpack_sbuffer_destroy(&sb);
}

/* ---- waiters ---- */

static void waiter_push(pf_rpc_waiter* w, pf_rpc_msg* m) {
  m->next = NULL;
  if (w->inbox_tail) w->inbox_tail->next = m;
  else w->inbox = m;
  w->inbox_tail = m;
  pthread_cond_signal(&w->cond);
}

/* Under the lock: hands the message to waiter `id` if it exists, is bound
 * to the message's route and has not failed; then the waiter owns it. A
 * waiter that failed (a timeout) takes nothing more: its call has ended,
 * and a reply that comes after that is never handed over. */
static int deliver(pf_rpc_peer* p, uint64_t id, pf_rpc_msg* m) {
  pf_rpc_waiter* w = NULL;
  HASH_FIND(hh, p->waiters, &id, sizeof id, w);
  if (w == NULL || w->failed || !pf_rpc_route_eq(&w->route, &m->route)) return 0;
  waiter_push(w, m);
  return 1;
}

static void fail_waiter(pf_rpc_waiter* w, const char* kind, const char* msg) {
  if (w->failed) return;
  w->failed = 1;
  snprintf(w->fail_kind, sizeof w->fail_kind, "%s", kind);
  snprintf(w->fail_msg, sizeof w->fail_msg, "%s", msg);
  pthread_cond_signal(&w->cond);
}

void pf_rpc_fail_waiter(pf_rpc_peer* p, uint64_t id, const char* kind, const char* msg) {
  pthread_mutex_lock(&p->mu);
  pf_rpc_waiter* w = NULL;
  HASH_FIND(hh, p->waiters, &id, sizeof id, w);
  if (w) fail_waiter(w, kind, msg);
  pthread_mutex_unlock(&p->mu);
}

void pf_rpc_mark_sent(pf_rpc_peer* p, uint64_t id) {
  pthread_mutex_lock(&p->mu);
  pf_rpc_waiter* w = NULL;
  HASH_FIND(hh, p->waiters, &id, sizeof id, w);
  if (w) w->sent = 1;
  pthread_mutex_unlock(&p->mu);
}

int pf_rpc_waiter_alive(pf_rpc_peer* p, uint64_t id) {
  pthread_mutex_lock(&p->mu);
  pf_rpc_waiter* w = NULL;
  HASH_FIND(hh, p->waiters, &id, sizeof id, w);
  int alive = w != NULL && !w->failed;
  pthread_mutex_unlock(&p->mu);
  return alive;
}

int pf_rpc_expire(pf_rpc_peer* p, int cap) {
  int64_t now = pf_rpc_now_ms(), next = -1;
  pthread_mutex_lock(&p->mu);
  pf_rpc_waiter *w, *tmp;
  HASH_ITER(hh, p->waiters, w, tmp) {
    if (w->failed) continue;
    if (w->deadline_ms <= now) {
      char where[300], msg[512];
      p->describe_route(p, &w->route, where, sizeof where);
      if (w->sent) {
        snprintf(msg, sizeof msg, "no reply from %s within %d ms", where, p->timeout_ms);
        fail_waiter(w, "TimeoutError", msg);
      } else {
        snprintf(msg, sizeof msg, "could not reach %s within %d ms", where, p->timeout_ms);
        fail_waiter(w, "ConnectionError", msg);
      }
    } else if (next < 0 || w->deadline_ms - now < next) {
      next = w->deadline_ms - now;
    }
  }
  pthread_mutex_unlock(&p->mu);
  if (next < 0 || next > cap) next = cap;
  return (int)next;
}

void pf_rpc_fail_route(pf_rpc_peer* p, const pf_rpc_route* r, int unsent_too, const char* why) {
  pthread_mutex_lock(&p->mu);
  pf_rpc_waiter *w, *tmp;
  HASH_ITER(hh, p->waiters, w, tmp) {
    if ((r == NULL || pf_rpc_route_eq(&w->route, r)) && (w->sent || unsent_too)) {
      char where[300], msg[512];
      p->describe_route(p, &w->route, where, sizeof where);
      snprintf(msg, sizeof msg, "%s: %s", where, why);
      fail_waiter(w, "ConnectionError", msg);
    }
  }
  pthread_mutex_unlock(&p->mu);
}

/* ---- exports ---- */

/* The exports made while packing one message: all of them are undone if
 * the message is never sent, and none is lost track of. */
typedef struct {
  pf_rpc_peer* p;
  pf_rpc_route route;
  uint64_t scope;
  uint64_t* ids; /* malloc */
  uint32_t n, cap;
} export_ctx;

#define PF_RPC_MAX_EXPORTS 65536

/* Under the lock: takes export e out of the table (counted out of its
 * client's on a server); the caller releases it outside the lock. */
static void unlink_export(pf_rpc_peer* p, pf_rpc_export* e) {
  HASH_DEL(p->exports, e);
  p->num_exports--;
  if (p->count_export != NULL) p->count_export(p, &e->route, -1, NULL, 0);
}

/* Releases exports taken out of the table, chained by hh.next; runs
 * finalizers, so never under the lock. */
static void release_unlinked(pf_rpc_export* dead) {
  while (dead) {
    pf_rpc_export* next = dead->hh.next;
    PFFuncFree(dead->func);
    free(dead);
    dead = next;
  }
}

/* Makes room for one more id in the context. */
static int reserve_id(export_ctx* c) {
  if (c->n < c->cap) return 0;
  uint32_t cap = c->cap ? 2 * c->cap : 8;
  uint64_t* ids = realloc(c->ids, cap * sizeof *ids);
  if (ids == NULL) return PF_ERROR(kPFErrMemoryError, "rpc: out of memory exporting a function");
  c->ids = ids;
  c->cap = cap;
  return 0;
}

static int export_fn(void* vctx, PFFunctionHandle func, uint64_t* id) {
  export_ctx* c = vctx;
  pf_rpc_peer* p = c->p;
  if (reserve_id(c) != 0) return -1;
  pf_rpc_export* e = calloc(1, sizeof *e);
  if (e == NULL) return PF_ERROR(kPFErrMemoryError, "rpc: out of memory exporting a function");
  if (PFFuncRetain(func) != 0) {
    free(e);
    return -1;
  }
  e->func = func;
  e->route = c->route;
  e->scope = c->scope;
  e->id = atomic_fetch_add(&p->next_id, 1);
  /* A server counts exports per client and per address (count_export);
   * a client's live only for its calls, of which it has few at once. */
  int refused = 0, full = 0;
  char why[300] = "";
  pthread_mutex_lock(&p->mu);
  if (p->count_export == NULL && p->num_exports >= PF_RPC_MAX_EXPORTS) full = 1;
  else if (p->count_export != NULL) refused = p->count_export(p, &e->route, +1, why, sizeof why);
  if (!full && !refused) {
    HASH_ADD(hh, p->exports, id, sizeof e->id, e);
    p->num_exports++;
  }
  pthread_mutex_unlock(&p->mu);
  if (full || refused) {
    PFFuncFree(func);
    free(e);
    if (full)
      return PF_ERROR(kPFErrRuntimeError,
                      "rpc: too many functions passed to the other side are alive (%d)",
                      PF_RPC_MAX_EXPORTS);
    if (why[0] == '\0')
      return PF_ERROR(kPFErrMemoryError, "rpc: out of memory exporting a function");
    char where[300];
    p->describe_route(p, &c->route, where, sizeof where);
    return PF_ERROR(kPFErrRuntimeError,
                    "rpc: cannot pass a function to %s: %s; a function passed to a client is "
                    "held until the client releases it",
                    where, why);
  }
  c->ids[c->n++] = e->id;
  *id = e->id;
  return 0;
}

void pf_rpc_drop_exports(pf_rpc_peer* p, const uint64_t* ids, uint32_t n) {
  pf_rpc_export* dead = NULL;
  pthread_mutex_lock(&p->mu);
  for (uint32_t i = 0; i < n; ++i) {
    pf_rpc_export* e = NULL;
    HASH_FIND(hh, p->exports, &ids[i], sizeof ids[i], e);
    if (e) {
      unlink_export(p, e);
      e->hh.next = dead;
      dead = e;
    }
  }
  pthread_mutex_unlock(&p->mu);
  release_unlinked(dead);
}

/* Drops the exports of one call of a client (scope != 0), or every export
 * to route r (r != NULL). */
static void drop_matching(pf_rpc_peer* p, uint64_t scope, const pf_rpc_route* r) {
  pf_rpc_export* dead = NULL;
  pthread_mutex_lock(&p->mu);
  pf_rpc_export *e, *tmp;
  HASH_ITER(hh, p->exports, e, tmp) {
    if ((scope != 0 && e->scope == scope) || (r != NULL && pf_rpc_route_eq(&e->route, r))) {
      unlink_export(p, e);
      e->hh.next = dead;
      dead = e;
    }
  }
  pthread_mutex_unlock(&p->mu);
  release_unlinked(dead);
}

static void drop_scope(pf_rpc_peer* p, uint64_t scope) { drop_matching(p, scope, NULL); }

void pf_rpc_drop_route_exports(pf_rpc_peer* p, const pf_rpc_route* r) { drop_matching(p, 0, r); }

/* The message packed with context c failed, or will not be sent: undoes
 * every export it made. */
static void undo_exports(export_ctx* c) {
  pf_rpc_drop_exports(c->p, c->ids, c->n);
  c->n = 0;
}

static void export_ctx_free(export_ctx* c) {
  free(c->ids);
  c->ids = NULL;
  c->n = c->cap = 0;
}

/* Hands the ids of the exports in a message to the message, which
 * releases them if it is dropped unsent (a server's exports: a client's
 * live only for their call). */
static void export_ctx_give(export_ctx* c, pf_rpc_msg* m) {
  if (c->p->is_server && c->n > 0) {
    m->exports = c->ids;
    m->nexports = c->n;
    c->ids = NULL;
    c->n = c->cap = 0;
  }
  export_ctx_free(c);
}

/* ---- serving ---- */

typedef struct pf_rpc_ctx {
  pf_rpc_peer* peer;
  pf_rpc_route route;
  uint64_t req_id;
  struct pf_rpc_ctx* prev;
  int depth; /* requests served on this thread, this one included */
} pf_rpc_ctx;

static _Thread_local pf_rpc_ctx* tl_ctx;

static pf_rpc_ctx* find_ctx(pf_rpc_peer* p) {
  for (pf_rpc_ctx* c = tl_ctx; c != NULL; c = c->prev)
    if (c->peer == p) return c;
  return NULL;
}

typedef struct {
  pf_rpc_peer* p;
  pf_rpc_route route;
} import_ctx;

static int import_fn(void* vctx, uint64_t id, PFFunctionHandle* out) {
  import_ctx* c = vctx;
  /* What a server sends stays alive until released; what a client sends
   * lives for its call, and needs no release. */
  return pf_rpc_make_remote(c->p, NULL, id, &c->route, !c->p->is_server, out);
}

/* Replies to a request with the error on this thread. */
static void reply_last_error(pf_rpc_peer* p, const pf_rpc_route* r, uint64_t id) {
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  pf_rpc_pack_error(&sb, id, PFErrorGetKind(), PFErrorGetMessage(), PFErrorGetTraceback());
  post_buffer(p, r, &sb, 0);
  msgpack_sbuffer_destroy(&sb);
}

/* One request being served: what serving it acquires, which serving_end
 * releases whatever step it reached. */
typedef struct {
  pf_rpc_peer* p;
  pf_rpc_msg* in; /* the request; its route is where the reply goes */
  uint64_t scope; /* a client's: the call whose callback this is */
  pf_rpc_parsed m;
  pf_rpc_out reply; /* the OK reply, as it is written */
  msgpack_packer pk;
  int depth;          /* requests served on this thread, this one included */
  char target[96];    /* the callee, for messages */
  PFFunctionHandle f; /* the callee: a reference, or NULL */
  PFCallTarget call;  /* f resolved, valid while s->f holds f */
  uint32_t nargs;
  PFValue* args;
  int* codes;
  pf_rpc_arena arena; /* what decoding the arguments made */
  PFValue rv;         /* the result */
  int rcode;
  export_ctx exports;      /* the functions in the result */
  pf_rpc_served_fn served; /* called before the reply is posted, or NULL */
  void* served_arg;
} serving;

/* A request that does not parse (the error is on this thread): one whose
 * header reads gets the error as its reply; anything else is dropped and
 * logged. */
static void refuse_unreadable(pf_rpc_peer* p, pf_rpc_msg* in) {
  pf_rpc_header h;
  pf_rpc_saved_error e;
  pf_rpc_error_save(&e);
  int readable = pf_rpc_peek(in->data, in->size, &h) == 0;
  pf_rpc_error_restore(&e);
  if (readable && (h.kind == PF_RPC_CALL || h.kind == PF_RPC_HELLO))
    reply_last_error(p, &in->route, h.id);
  else pf_rpc_note_bad(p, &in->route, PFErrorGetMessage());
}

/* Parses the request into *s. Returns -1 when there is nothing to answer:
 * the dispatcher has checked the message, and answered another version. */
static int serving_begin(serving* s, pf_rpc_peer* p, pf_rpc_msg* in, uint64_t scope) {
  memset(s, 0, sizeof *s);
  s->p = p;
  s->in = in;
  s->scope = scope;
  s->arena.src = in;
  s->rcode = kPFNull;
  s->exports.p = p;
  s->exports.route = in->route;
  s->exports.scope = p->is_server ? 0 : scope;
  int st = pf_rpc_parse(in->data, in->size, &s->m);
  if (st < 0) refuse_unreadable(p, in);
  if (st > 0) pf_rpc_parsed_free(&s->m);
  if (st != 0) return -1;
  pf_rpc_out_init(&s->reply, &s->pk);
  return 0;
}

static int answer_hello(serving* s) {
  if (s->p->hello == NULL) return PF_ERROR(kPFErrValueError, "rpc: HELLO sent to a client");
  pf_rpc_pack_header(&s->pk, PF_RPC_OK, s->m.id, 0, 1);
  return s->p->hello(s->p, &s->pk);
}

/* A CALL is [target, args], and nests at most PF_RPC_MAX_NESTING deep. */
static int check_call(serving* s) {
  const pf_rpc_parsed* m = &s->m;
  if (m->kind != PF_RPC_CALL || m->nrest != 2 || m->rest[1].type != MSGPACK_OBJECT_ARRAY)
    return PF_ERROR(kPFErrValueError, "rpc: malformed request (kind %d)", m->kind);
  s->depth = tl_ctx != NULL ? tl_ctx->depth + 1 : 1;
  if (s->depth > PF_RPC_MAX_NESTING)
    return PF_ERROR(kPFErrRuntimeError,
                    "rpc: call refused: calls nested more than %d deep on one thread (calls "
                    "made from callbacks, PF_RPC_MAX_NESTING)",
                    PF_RPC_MAX_NESTING);
  return 0;
}

static int target_by_name(serving* s, const msgpack_object* o) {
  char* name = pf_rpc_strdup_obj(o);
  if (name == NULL) return PF_ERROR(kPFErrMemoryError, "rpc: out of memory");
  snprintf(s->target, sizeof s->target, "'%.80s'", name);
  int rc = s->p->resolve_name ? s->p->resolve_name(s->p, name, &s->f)
                              : PF_ERROR(kPFErrKeyError, "rpc: no function '%s' here", name);
  free(name);
  return rc;
}

/* A function this side exported, to the route the request came from. */
static int target_by_id(serving* s, uint64_t fid) {
  snprintf(s->target, sizeof s->target, "remote function #%llu", (unsigned long long)fid);
  pthread_mutex_lock(&s->p->mu);
  pf_rpc_export* e = NULL;
  HASH_FIND(hh, s->p->exports, &fid, sizeof fid, e);
  if (e != NULL && pf_rpc_route_eq(&e->route, &s->in->route)) {
    s->f = e->func;
    PFFuncRetain(s->f);
  }
  pthread_mutex_unlock(&s->p->mu);
  if (s->f == NULL)
    return PF_ERROR(kPFErrRuntimeError,
                    "rpc: function #%llu passed to the other side is no longer valid: a "
                    "callback can be called only while the call that passed it is in "
                    "progress, and a returned function only until it is released",
                    (unsigned long long)fid);
  return 0;
}

/* Looks the callee up (a new reference: a function replaced in the
 * registry meanwhile is seen by the next request) and resolves it once
 * for this request. */
static int find_target(serving* s) {
  const msgpack_object* t = &s->m.rest[0];
  int rc;
  if (t->type == MSGPACK_OBJECT_STR) rc = target_by_name(s, t);
  else if (t->type == MSGPACK_OBJECT_POSITIVE_INTEGER) rc = target_by_id(s, t->via.u64);
  else return PF_ERROR(kPFErrValueError, "rpc: malformed request target");
  s->call.size = sizeof s->call;
  return rc != 0 ? rc : PFFuncResolve(s->f, &s->call);
}

static int decode_args(serving* s) {
  const msgpack_object* list = &s->m.rest[1];
  s->nargs = list->via.array.size;
  s->args = calloc(s->nargs ? s->nargs : 1, sizeof *s->args);
  s->codes = calloc(s->nargs ? s->nargs : 1, sizeof *s->codes);
  if (s->args == NULL || s->codes == NULL) return PF_ERROR(kPFErrMemoryError, "rpc: out of memory");
  import_ctx ic = {s->p, s->in->route};
  for (uint32_t i = 0; i < s->nargs; ++i) {
    if (pf_rpc_unpack_value(&list->via.array.ptr[i], &s->arena, 0, 1, import_fn, &ic, &s->args[i],
                            &s->codes[i]) != 0) {
      char line[160];
      snprintf(line, sizeof line, "  while decoding argument %u of a call to %s", i, s->target);
      PFErrorAppendTraceback(line);
      return -1;
    }
  }
  return pf_rpc_arena_check_sides(&s->arena);
}

/* Calls the callee through its resolved target: the decoded arguments
 * keep the target's rules (known codes and counts, handles that the arena
 * keeps alive, strings and bytes in the arena, never in return storage).
 * A direct callee that fails without recording an error must not pass on
 * an error an earlier call left on this thread (a setter callee's adapter
 * tells that itself). A server's worker serving its outermost request
 * clears such an error, which is nobody's; any other thread (a client's
 * serving a callback, a worker under a call of its own) keeps its
 * caller's, and PFFuncCall, which tells them apart, makes the call. */
static int call_resolved(serving* s) {
  int n = (int)s->nargs;
  if (!(s->call.flags & kPFTargetAdapter) && PFErrorGetKind()[0] != '\0') {
    if (!s->p->is_server || s->depth != 1)
      return PFFuncCall(s->f, s->args, s->codes, n, &s->rv, &s->rcode);
    PFErrorClear();
  }
  int rc = s->call.entry(s->call.ctx, s->args, s->codes, n, &s->rv, &s->rcode);
  if (rc != 0 && PFErrorGetKind()[0] == '\0')
    PF_ERROR(kPFErrRuntimeError, "rpc: function %s returned %d without recording an error",
             s->target, rc);
  return rc;
}

/* Calls the target with this request as the thread's innermost serving
 * context, to which the calls the target makes back on the peer go. */
static int call_target(serving* s) {
  pf_rpc_ctx ctx = {s->p, s->in->route, s->m.id, tl_ctx, s->depth};
  tl_ctx = &ctx;
  int rc = call_resolved(s);
  tl_ctx = ctx.prev;
  if (rc != 0) s->rcode = kPFNull; /* nothing to release */
  return rc;
}

/* Writes the OK reply. The functions in the result are exported to the
 * request's route: on a client, for the call that this request serves. */
static int pack_result(serving* s) {
  pf_rpc_pack_header(&s->pk, PF_RPC_OK, s->m.id, 0, 1);
  if (pf_rpc_pack_value(&s->pk, s->rv, s->rcode, "result", export_fn, &s->exports) == 0) return 0;
  undo_exports(&s->exports);
  char line[160];
  snprintf(line, sizeof line, "  while sending the result of %s", s->target);
  PFErrorAppendTraceback(line);
  return -1;
}

static int answer_call(serving* s) {
  if (check_call(s) != 0 || find_target(s) != 0 || decode_args(s) != 0 || call_target(s) != 0)
    return -1;
  return pack_result(s);
}

/* Releases what serving the request acquired, then posts the reply: the
 * one written (status 0), or the error on this thread. */
static void serving_end(serving* s, int status) {
  if (s->served != NULL) s->served(s->served_arg);
  PFFuncFree(s->f);
  free(s->args);
  free(s->codes);
  if (s->rcode == kPFFuncHandle || s->rcode == kPFModuleHandle || s->rcode == kPFObjectHandle)
    PFObjectFree(s->rv.v_handle);
  pf_rpc_arena_free(&s->arena);
  if (status == 0) {
    pf_rpc_msg* m = pf_rpc_msg_take_out(&s->in->route, &s->reply);
    if (m == NULL) {
      undo_exports(&s->exports); /* dropped: the other side times out */
    } else {
      export_ctx_give(&s->exports, m);
      pf_rpc_post(s->p, m);
    }
  }
  export_ctx_free(&s->exports);
  pf_rpc_out_destroy(&s->reply);
  if (status != 0) reply_last_error(s->p, &s->in->route, s->m.id);
  pf_rpc_parsed_free(&s->m);
}

/* Serves one request (HELLO or CALL) and posts its reply. `scope`, on a
 * client, is the call of its own that the request is a callback of. */
static void serve_scoped(pf_rpc_peer* p, pf_rpc_msg* in, uint64_t scope, pf_rpc_served_fn served,
                         void* served_arg) {
  serving s;
  if (serving_begin(&s, p, in, scope) != 0) {
    if (served != NULL) served(served_arg);
    return;
  }
  s.served = served;
  s.served_arg = served_arg;
  serving_end(&s, s.m.kind == PF_RPC_HELLO ? answer_hello(&s) : answer_call(&s));
}

void pf_rpc_serve(pf_rpc_peer* p, pf_rpc_msg* m, pf_rpc_served_fn served, void* served_arg) {
  serve_scoped(p, m, 0, served, served_arg);
}

/* ---- dispatching what arrives ---- */

void pf_rpc_note_bad(pf_rpc_peer* p, const pf_rpc_route* r, const char* why) {
  if (p->log_bad != NULL) p->log_bad(p, r, why);
}

void pf_rpc_dispatch(pf_rpc_peer* p, pf_rpc_msg* in,
                     void (*fresh)(pf_rpc_peer*, pf_rpc_msg*, uint64_t)) {
  const pf_rpc_route* r = &in->route;
  if (in->size == 0) { /* a probe */
    pf_rpc_msg_free(in);
    return;
  }
  /* Only the header: the rest is decoded by the thread that takes the
   * message, within the bounds of the connection it came from. */
  pf_rpc_header m;
  int st = pf_rpc_peek(in->data, in->size, &m);
  if (st < 0) {
    pf_rpc_note_bad(p, r, PFErrorGetMessage());
    pf_rpc_msg_free(in);
    return;
  }
  if (st > 0) {
    /* Another protocol version: say so, in the header every version keeps. */
    char msg[200];
    snprintf(msg, sizeof msg,
             "protocol version mismatch: this side speaks version %d, the other side %lld",
             PF_RPC_PROTOCOL_VERSION, (long long)m.version);
    if (m.kind == PF_RPC_HELLO || m.kind == PF_RPC_CALL) {
      pf_rpc_reply_error(p, r, m.id, "ValueError", msg);
    } else {
      pthread_mutex_lock(&p->mu);
      pf_rpc_waiter* w = NULL;
      HASH_FIND(hh, p->waiters, &m.id, sizeof m.id, w);
      if (w != NULL && pf_rpc_route_eq(&w->route, r)) fail_waiter(w, "ValueError", msg);
      pthread_mutex_unlock(&p->mu);
    }
    pf_rpc_msg_free(in);
    return;
  }
  /* Who takes the message; NULL once someone has. */
  pf_rpc_msg* own = in;
  switch (m.kind) {
    case PF_RPC_OK:
    case PF_RPC_ERROR:
      pthread_mutex_lock(&p->mu);
      if (deliver(p, m.id, own)) own = NULL; /* a late reply to a failed call is dropped */
      pthread_mutex_unlock(&p->mu);
      break;
    case PF_RPC_HELLO:
    case PF_RPC_CALL: {
      int done = 0;
      pthread_mutex_lock(&p->mu);
      if (m.parent != 0) {
        done = deliver(p, m.parent, own);
      } else if (!p->is_server && m.kind == PF_RPC_CALL && m.has_first_uint) {
        /* A callback from a thread of the server that serves no call of
         * ours: the client thread whose call passed the function serves it. */
        pf_rpc_export* e = NULL;
        uint64_t fid = m.first_uint;
        HASH_FIND(hh, p->exports, &fid, sizeof fid, e);
        if (e != NULL && pf_rpc_route_eq(&e->route, r)) done = deliver(p, e->scope, own);
      }
      pthread_mutex_unlock(&p->mu);
      if (done) {
        own = NULL;
        break;
      }
      if (m.parent == 0 && fresh != NULL) {
        fresh(p, own, m.id);
        own = NULL;
      } else {
        pf_rpc_reply_error(
            p, r, m.id, "RuntimeError",
            "rpc: a callback arrived for a call that is no longer in progress, or for a "
            "function that is no longer valid");
      }
      break;
    }
    case PF_RPC_RELEASE:
      if (m.nrest == 1 && m.has_first_uint) {
        uint64_t fid = m.first_uint;
        pf_rpc_export* e = NULL;
        pthread_mutex_lock(&p->mu);
        HASH_FIND(hh, p->exports, &fid, sizeof fid, e);
        if (e != NULL && pf_rpc_route_eq(&e->route, r) && e->scope == 0) {
          unlink_export(p, e);
        } else {
          e = NULL;
        }
        pthread_mutex_unlock(&p->mu);
        if (e) {
          PFFuncFree(e->func);
          free(e);
        }
      }
      break;
    default:
      pf_rpc_note_bad(p, r, "a message of an unknown kind");
      break;
  }
  pf_rpc_msg_free(own);
}

/* ---- calling ---- */

static void waiter_init(pf_rpc_peer* p, pf_rpc_waiter* w, uint64_t id, const pf_rpc_route* r) {
  memset(w, 0, sizeof *w);
  w->id = id;
  w->route = *r;
  w->deadline_ms = pf_rpc_now_ms() + p->timeout_ms;
  w->next_signal_check_ms = w->deadline_ms - p->timeout_ms + PF_RPC_SIGNAL_CHECK_MS;
  pthread_cond_init(&w->cond, NULL);
}

static void waiter_remove(pf_rpc_peer* p, pf_rpc_waiter* w) {
  pthread_mutex_lock(&p->mu);
  HASH_DEL(p->waiters, w);
  pf_rpc_msg* left = w->inbox;
  w->inbox = w->inbox_tail = NULL;
  pthread_mutex_unlock(&p->mu);
  /* Requests that came for this call after it ended are answered. */
  for (pf_rpc_msg* m = left; m != NULL;) {
    pf_rpc_msg* next = m->next;
    pf_rpc_header pm;
    if (pf_rpc_peek(m->data, m->size, &pm) == 0 &&
        (pm.kind == PF_RPC_CALL || pm.kind == PF_RPC_HELLO))
      pf_rpc_reply_error(p, &m->route, pm.id, "RuntimeError",
                         "rpc: a callback arrived for a call that is no longer in progress");
    pf_rpc_msg_free(m);
    m = next;
  }
  pthread_cond_destroy(&w->cond);
}

int pf_rpc_check_interrupt(pf_rpc_peer* p, pf_rpc_waiter* w) {
  /* Not before the call has waited a while: a quick call never asks. */
  int64_t now = pf_rpc_now_ms();
  if (now < w->next_signal_check_ms) return 0;
  w->next_signal_check_ms = now + PF_RPC_SIGNAL_CHECK_MS;
  if (PFEnvCheckSignals() == 0) return 0;
  pthread_mutex_lock(&p->mu);
  if (!w->interrupted && !w->failed) {
    w->interrupted = 1;
    pf_rpc_error_save(&w->interrupt);
    fail_waiter(w, w->interrupt.kind, "interrupted");
  }
  pthread_mutex_unlock(&p->mu);
  return 1;
}

/* The error of a waiter that failed: the host's, when a signal
 * interrupted it (kept whole, as the signal checker recorded it), else its
 * kind and message. Returns -1. */
static int waiter_error(pf_rpc_waiter* w, const char* what) {
  if (w->interrupted) return pf_rpc_error_restore(&w->interrupt);
  if (what == NULL) return PF_ERROR(w->fail_kind, "%s", w->fail_msg);
  return PF_ERROR(w->fail_kind, "rpc: calling %s: %s", what, w->fail_msg);
}

/* Waits for waiter w's next message, or its failure (NULL); `out`, when
 * not NULL, is its request, queued here first: if this thread then takes
 * the I/O role it sends it itself, without waking anyone. */
static pf_rpc_msg* waiter_next_post(pf_rpc_peer* p, pf_rpc_waiter* w, pf_rpc_msg* out) {
  pthread_mutex_lock(&p->mu);
  if (out != NULL) {
    enqueue_counted(p, out);
    if (p->io_poll == NULL || p->io_role || atomic_load(&p->closed)) {
      pthread_mutex_unlock(&p->mu);
      wake(p); /* the I/O thread, or the thread that polls, sends it */
      pthread_mutex_lock(&p->mu);
    }
  }
  while (w->inbox == NULL && !w->failed) {
    if (p->io_poll != NULL && !p->io_role && !atomic_load(&p->closed)) {
      /* Nobody polls the sockets: this thread does, until its own mail. */
      p->io_role = 1;
      pthread_mutex_unlock(&p->mu);
      p->io_poll(p, w);
      pthread_mutex_lock(&p->mu);
      pf_rpc_role_released(p);
      continue;
    }
    /* The I/O thread enforces the deadline; this bound only keeps a waiter
     * from outliving a connection that was torn down under it, and a
     * client's from missing a signal. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    if (p->is_server) {
      ts.tv_sec += 1;
    } else {
      ts.tv_nsec += PF_RPC_SIGNAL_CHECK_MS * 1000000L;
      ts.tv_sec += ts.tv_nsec / 1000000000L;
      ts.tv_nsec %= 1000000000L;
    }
    pthread_cond_timedwait(&w->cond, &p->mu, &ts);
    if (w->inbox == NULL && !w->failed && atomic_load(&p->closed))
      fail_waiter(w, "ConnectionError", p->closed_reason);
    if (w->inbox == NULL && !w->failed && !p->is_server) {
      pthread_mutex_unlock(&p->mu);
      pf_rpc_check_interrupt(p, w);
      pthread_mutex_lock(&p->mu);
    }
  }
  /* Once failed, the call is over even if mail came at the same time:
   * waiter_remove answers or drops what is left in the inbox. */
  pf_rpc_msg* m = w->failed ? NULL : w->inbox;
  if (m) {
    w->inbox = m->next;
    if (w->inbox == NULL) w->inbox_tail = NULL;
  }
  pthread_mutex_unlock(&p->mu);
  return m;
}

int pf_rpc_request_raw(pf_rpc_peer* p, const pf_rpc_route* r, uint64_t id, const char* data,
                       size_t n, pf_rpc_msg** reply) {
  pf_rpc_waiter w;
  waiter_init(p, &w, id, r);
  pf_rpc_msg* m = pf_rpc_msg_new(r, data, n);
  if (m == NULL) {
    pthread_cond_destroy(&w.cond);
    return PF_ERROR(kPFErrMemoryError, "rpc: out of memory");
  }
  m->waiter_id = id;
  pthread_mutex_lock(&p->mu);
  HASH_ADD(hh, p->waiters, id, sizeof w.id, &w);
  pthread_mutex_unlock(&p->mu);
  pf_rpc_msg* got = waiter_next_post(p, &w, m);
  waiter_remove(p, &w);
  *reply = got;
  return got == NULL ? waiter_error(&w, NULL) : 0;
}

/* Turns a reply (parsed from `src`) into the call's result or error. */
static int take_reply(pf_rpc_peer* p, const pf_rpc_parsed* m, pf_rpc_msg* src,
                      const pf_rpc_route* r, const char* what, PFRetValueHandle ret) {
  char where[300];
  p->describe_route(p, r, where, sizeof where);
  if (m->kind == PF_RPC_ERROR) {
    if (m->nrest != 3 || m->rest[0].type != MSGPACK_OBJECT_STR ||
        m->rest[1].type != MSGPACK_OBJECT_STR || m->rest[2].type != MSGPACK_OBJECT_STR)
      return PF_ERROR(kPFErrValueError, "rpc: malformed error reply from %s", where);
    char* kind = pf_rpc_strdup_obj(&m->rest[0]);
    char* msg = pf_rpc_strdup_obj(&m->rest[1]);
    char* tb = pf_rpc_strdup_obj(&m->rest[2]);
    PFErrorSet(kind, msg);
    /* The remote traceback, line by line, then where it came from. */
    for (char *line = tb, *nl; line != NULL && *line != '\0'; line = nl ? nl + 1 : NULL) {
      nl = strchr(line, '\n');
      if (nl) *nl = '\0';
      if (*line) PFErrorAppendTraceback(line);
    }
    char line[600];
    snprintf(line, sizeof line, "  on %s, calling %s", where, what);
    PFErrorAppendTraceback(line);
    free(kind);
    free(msg);
    free(tb);
    return -1;
  }
  if (m->nrest != 1) return PF_ERROR(kPFErrValueError, "rpc: malformed reply from %s", where);
  pf_rpc_arena arena = {.src = src};
  import_ctx ic = {p, *r};
  PFValue v;
  int code;
  int rc = pf_rpc_unpack_value(&m->rest[0], &arena, 0, 0, import_fn, &ic, &v, &code);
  if (rc == 0) rc = pf_rpc_arena_check_sides(&arena);
  if (rc == 0) rc = PFCFuncSetReturn(ret, &v, &code, 1);
  pf_rpc_arena_free(&arena);
  return rc;
}

/* The callback slots this thread holds (a server's), innermost first. */
typedef struct cb_slot {
  pf_rpc_peer* peer;
  pf_rpc_route route;
  struct cb_slot* prev;
} cb_slot;
static _Thread_local cb_slot* tl_cb_slots;

static int call_route(pf_rpc_peer* p, const char* name, uint64_t fid, const char* what,
                      const pf_rpc_route* route_in, uint64_t parent, PFValue* args, int* codes,
                      int nargs, PFRetValueHandle ret);

int pf_rpc_invoke(pf_rpc_peer* p, const char* name, uint64_t fid, const pf_rpc_route* affinity,
                  PFValue* args, int* codes, int nargs, PFRetValueHandle ret) {
  char what[120];
  if (name) snprintf(what, sizeof what, "'%.100s'", name);
  else snprintf(what, sizeof what, "remote function #%llu", (unsigned long long)fid);
  if (atomic_load(&p->closed))
    return PF_ERROR("ConnectionError", "rpc: calling %s: %s", what, p->closed_reason);
  pf_rpc_ctx* ctx = find_ctx(p);
  pf_rpc_route route;
  uint64_t parent = 0;
  if (affinity != NULL) {
    route = *affinity;
    if (ctx != NULL && pf_rpc_route_eq(&ctx->route, affinity)) parent = ctx->req_id;
  } else if (ctx != NULL) {
    route = ctx->route;
    parent = ctx->req_id;
  } else if (p->pick_route == NULL || p->pick_route(p, &route) != 0) {
    return -1;
  }
  if (p->callback_enter == NULL)
    return call_route(p, name, fid, what, &route, parent, args, codes, nargs, ret);
  /* A server's callback into a client holds one of the client's callback
   * slots while it waits, unless this thread already holds one for the
   * same client (a nested callback: the client is answering). */
  cb_slot slot = {p, route, tl_cb_slots};
  int nested = 0;
  for (cb_slot* c = tl_cb_slots; c != NULL && !nested; c = c->prev)
    nested = c->peer == p && pf_rpc_route_eq(&c->route, &route);
  if (!nested && p->callback_enter(p, &route) != 0) return -1;
  tl_cb_slots = &slot;
  int rc = call_route(p, name, fid, what, &route, parent, args, codes, nargs, ret);
  tl_cb_slots = slot.prev;
  if (!nested) p->callback_leave(p, &route);
  return rc;
}

/* Whether a message that did not parse (its error on this thread, kept)
 * is a reply, whose call then fails with that error. */
static int unreadable_reply(const pf_rpc_msg* m) {
  pf_rpc_header h;
  pf_rpc_saved_error e;
  pf_rpc_error_save(&e);
  int st = pf_rpc_peek(m->data, m->size, &h);
  pf_rpc_error_restore(&e);
  return st == 0 && (h.kind == PF_RPC_OK || h.kind == PF_RPC_ERROR);
}

/* Sends the call of `name` or `fid` to `route` and waits for its reply,
 * serving the requests that come for it meanwhile. */
static int call_route(pf_rpc_peer* p, const char* name, uint64_t fid, const char* what,
                      const pf_rpc_route* route_in, uint64_t parent, PFValue* args, int* codes,
                      int nargs, PFRetValueHandle ret) {
  pf_rpc_route route = *route_in;
  uint64_t id = atomic_fetch_add(&p->next_id, 1);
  pf_rpc_out packed;
  msgpack_packer pk;
  pf_rpc_out_init(&packed, &pk);
  pf_rpc_pack_header(&pk, PF_RPC_CALL, id, parent, 2);
  if (name) {
    size_t len = strlen(name);
    msgpack_pack_str(&pk, len);
    msgpack_pack_str_body(&pk, name, len);
  } else {
    msgpack_pack_uint64(&pk, fid);
  }
  msgpack_pack_array(&pk, (size_t)nargs);
  export_ctx ec = {.p = p, .route = route, .scope = p->is_server ? 0 : id};
  for (int i = 0; i < nargs; ++i) {
    char path[160];
    snprintf(path, sizeof path, "remote call of %s: argument %d", what, i);
    if (pf_rpc_pack_value(&pk, args[i], codes[i], path, export_fn, &ec) != 0) {
      pf_rpc_out_destroy(&packed);
      undo_exports(&ec);
      export_ctx_free(&ec);
      return -1;
    }
  }
  pf_rpc_waiter w;
  waiter_init(p, &w, id, &route);
  pf_rpc_msg* out = pf_rpc_msg_take_out(&route, &packed);
  pf_rpc_out_destroy(&packed);
  if (out == NULL) {
    pthread_cond_destroy(&w.cond);
    undo_exports(&ec);
    export_ctx_free(&ec);
    return PF_ERROR(kPFErrMemoryError, "rpc: out of memory sending a call");
  }
  export_ctx_give(&ec, out);
  out->waiter_id = id;
  pthread_mutex_lock(&p->mu);
  HASH_ADD(hh, p->waiters, id, sizeof w.id, &w);
  pthread_mutex_unlock(&p->mu);
  int rc = -1, waited_in_vain = 0;
  for (;;) {
    pf_rpc_msg* m = waiter_next_post(p, &w, out);
    out = NULL;
    if (m == NULL) { /* the error is set below, once the call is over */
      waited_in_vain = 1;
      break;
    }
    pf_rpc_parsed pm;
    if (pf_rpc_parse(m->data, m->size, &pm) != 0) {
      /* A reply that cannot be decoded ends the call with why. */
      int reply = unreadable_reply(m);
      if (!reply) pf_rpc_note_bad(p, &m->route, PFErrorGetMessage());
      pf_rpc_msg_free(m);
      if (!reply) continue;
      char line[300];
      snprintf(line, sizeof line, "  while decoding the reply to the remote call of %s", what);
      PFErrorAppendTraceback(line);
      break;
    }
    if (pm.kind == PF_RPC_CALL || pm.kind == PF_RPC_HELLO) {
      /* A callback (or a nested call) while we wait: serve it here. */
      pf_rpc_parsed_free(&pm);
      serve_scoped(p, m, p->is_server ? 0 : id, NULL, NULL);
      pf_rpc_msg_free(m);
      continue;
    }
    rc = take_reply(p, &pm, m, &route, what, ret);
    pf_rpc_parsed_free(&pm);
    pf_rpc_msg_free(m);
    break;
  }
  waiter_remove(p, &w);
  if (!p->is_server) drop_scope(p, id);
  if (waited_in_vain) rc = waiter_error(&w, what);
  return rc;
}

/* ---- remote functions ---- */

typedef struct {
  pf_rpc_peer* p;
  char* name;
  uint64_t fid;
  pf_rpc_route route;
  int has_route;
  int release;
} remote_fn;

/* A new remote function of a client counts as a user of its connection. */
static void add_user(pf_rpc_peer* p) {
  if (!p->is_server) atomic_fetch_add(&p->users, 1);
}

static int remote_call(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  remote_fn* f = res;
  return pf_rpc_invoke(f->p, f->name, f->fid, f->has_route ? &f->route : NULL, args, codes, n, ret);
}

static void remote_free(void* res) {
  remote_fn* f = res;
  if (f->release && !atomic_load(&f->p->closed)) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    pf_rpc_packer_init(&pk, &sb);
    pf_rpc_pack_header(&pk, PF_RPC_RELEASE, 0, 0, 1);
    msgpack_pack_uint64(&pk, f->fid);
    post_buffer(f->p, &f->route, &sb, 0);
    msgpack_sbuffer_destroy(&sb);
  }
  pf_rpc_peer* p = f->p;
  free(f->name);
  free(f);
  if (!p->is_server && atomic_fetch_sub(&p->users, 1) == 1 && p->unused != NULL) p->unused(p);
  pf_rpc_peer_release(p);
}

int pf_rpc_make_remote(pf_rpc_peer* p, const char* name, uint64_t fid, const pf_rpc_route* affinity,
                       int release, PFFunctionHandle* out) {
  remote_fn* f = calloc(1, sizeof *f);
  if (f == NULL || (name && (f->name = strdup(name)) == NULL)) {
    free(f);
    return PF_ERROR(kPFErrMemoryError, "rpc: out of memory making a remote function");
  }
  f->p = p;
  f->fid = fid;
  if (affinity) {
    f->route = *affinity;
    f->has_route = 1;
  }
  f->release = release;
  pf_rpc_peer_retain(p);
  add_user(p);
  return PFFuncCreateFromCFunc(remote_call, f, remote_free, out);
}

void pf_rpc_peer_shutdown(pf_rpc_peer* p, const char* reason) {
  pthread_mutex_lock(&p->mu);
  if (p->closed_reason[0] == '\0')
    snprintf(p->closed_reason, sizeof p->closed_reason, "%s", reason);
  atomic_store(&p->closed, 1);
  pf_rpc_waiter *w, *wtmp;
  HASH_ITER(hh, p->waiters, w, wtmp) fail_waiter(w, "ConnectionError", p->closed_reason);
  pf_rpc_export* all = p->exports;
  p->exports = NULL;
  p->num_exports = 0;
  pthread_mutex_unlock(&p->mu);
  free_exports(all);
}
