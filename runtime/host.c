/* Host functions and the gates they are called through (see c_api.h). */
#define _GNU_SOURCE /* syscall */
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__linux__) && defined(__has_include)
#if __has_include(<linux/membarrier.h>) && __has_include(<sys/syscall.h>)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#ifdef SYS_membarrier
#define PF_HAVE_MEMBARRIER 1
#endif
#endif
#endif

#include "internal.h"

/* A gate's state: the number of calls in progress that are not counted in
 * a seat (below), and this bit once it is closed. One word, so that
 * entering this way can never slip past a close. */
#define GATE_CLOSED ((uint_fast64_t)1 << 63)

static const char k_default_message[] = "the host of this function has shut down";

typedef struct pf_host_gate pf_host_gate;
struct pf_host_gate {
  pf_object base;
  atomic_uint_fast64_t state;
  _Atomic(char*) message; /* set before GATE_CLOSED; k_default_message is not freed */
  pf_host_gate* prev;     /* g_gates, under g_gates_lock */
  pf_host_gate* next;
};

/* A host function's resource. */
typedef struct {
  pf_host_gate* gate; /* a reference */
  PFPackedCFunc func;
  void* resource;
  PFPackedCFuncFinalizer fin;
  pf_function* self; /* not a reference: for the name in messages */
} pf_host_fn;

/*
 * Seats: a thread's calls in progress through one gate, counted without a
 * shared write. Counting in the gate's state costs every call two atomic
 * read-modify-writes of a line that all calling threads write. Where the
 * kernel has an asymmetric barrier (Linux membarrier, private expedited),
 * a thread counts its calls in a seat of its own with plain stores
 * instead, and the close, which is rare, pays: it sets GATE_CLOSED, makes
 * every thread of the process pass a full barrier, then adds up the seats.
 * A thread whose count was stored before its barrier is seen by the close;
 * one that stores later reads GATE_CLOSED after storing, and backs out. A
 * seat counts calls through one gate at a time; a call through another
 * gate while it is busy counts in that gate's state.
 */
typedef struct pf_gate_seat pf_gate_seat;
struct pf_gate_seat {
  _Atomic(const pf_host_gate*) gate; /* whose calls `depth` counts */
  atomic_uint_fast64_t depth;
  pf_gate_seat* prev; /* g_seats, under g_gates_lock */
  pf_gate_seat* next;
};

/* One gated call in progress on this thread, on its wrapper's stack. The
 * chain lets PFHostGateClose leave out the caller's own calls. */
typedef struct pf_host_frame pf_host_frame;
struct pf_host_frame {
  PFHostCall call;
  const pf_host_gate* gate;
  pf_gate_seat* seat; /* where the call is counted; NULL: the gate's state */
  pf_host_frame* prev;
};
/* Initial-exec, as the runtime's other per-thread state: every gated call
 * reads and writes it, and the default model for a shared library's TLS
 * costs a __tls_get_addr call each time. */
static _Thread_local pf_host_frame* t_frames __attribute__((tls_model("initial-exec")));

/* ---- every gate, for fork ---- */

static pthread_mutex_t g_gates_lock = PTHREAD_MUTEX_INITIALIZER;
static pf_host_gate* g_gates;
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static int g_fork_rc;
static pf_gate_seat* g_seats;    /* under g_gates_lock */
static pthread_key_t g_seat_key; /* frees a thread's seat when it exits */
static int g_seat_key_ok;
static atomic_int g_seats_on; /* new seats are handed out */
static _Thread_local pf_gate_seat* t_seat __attribute__((tls_model("initial-exec")));

/* This thread's calls through g in progress; with `shared_only`, only
 * those counted in g's state. */
static uint_fast64_t own_calls(const pf_host_gate* g, int shared_only) {
  uint_fast64_t n = 0;
  for (const pf_host_frame* f = t_frames; f != NULL; f = f->prev)
    n += f->gate == g && (!shared_only || f->seat == NULL);
  return n;
}

/* ---- the asymmetric barrier ---- */

static int barrier_register(void) {
#ifdef PF_HAVE_MEMBARRIER
  long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  if (cmds < 0 || !(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED)) return 0;
  return syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
#else
  return 0;
#endif
}

/* Makes every running thread of the process pass a full memory barrier.
 * Only called when seats were handed out, which needs the registration. */
static void barrier_all(void) {
#ifdef PF_HAVE_MEMBARRIER
  if (syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0)
    (void)syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0);
#endif
}

/* ---- seats ---- */

static void seat_unlink(pf_gate_seat* s) {
  if (s->prev) s->prev->next = s->next;
  else g_seats = s->next;
  if (s->next) s->next->prev = s->prev;
}

/* The key's destructor: a thread's seat goes with it (no call of it can be
 * in progress then). */
static void seat_free(void* p) {
  pf_gate_seat* s = p;
  pthread_mutex_lock(&g_gates_lock);
  seat_unlink(s);
  pthread_mutex_unlock(&g_gates_lock);
  if (t_seat == s) t_seat = NULL;
  pf_free(s);
}

/* A seat for this thread, which has none: NULL where seats are off or
 * one cannot be made (its calls then count in the gates' state). */
static pf_gate_seat* seat_get(void) {
  if (!atomic_load_explicit(&g_seats_on, memory_order_relaxed)) return NULL;
  pf_gate_seat* s = pf_calloc(1, sizeof(*s));
  if (s == NULL) return NULL;
  pthread_mutex_lock(&g_gates_lock);
  s->next = g_seats;
  if (g_seats) g_seats->prev = s;
  g_seats = s;
  pthread_mutex_unlock(&g_gates_lock);
  if (pthread_setspecific(g_seat_key, s) != 0) {
    seat_free(s);
    return NULL;
  }
  t_seat = s;
  return s;
}

/* The calls through g in progress on all threads, the caller's included. */
static uint_fast64_t all_calls(const pf_host_gate* g) {
  uint_fast64_t n = atomic_load(&g->state) & ~GATE_CLOSED;
  pthread_mutex_lock(&g_gates_lock);
  for (const pf_gate_seat* s = g_seats; s != NULL; s = s->next)
    if (atomic_load_explicit(&s->gate, memory_order_relaxed) == g)
      n += atomic_load_explicit(&s->depth, memory_order_acquire);
  pthread_mutex_unlock(&g_gates_lock);
  return n;
}

static void fork_prepare(void) { pthread_mutex_lock(&g_gates_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&g_gates_lock); }
/* Only the forking thread lives on in the child: the calls that other
 * threads had in progress will never leave, so they no longer count. */
static void fork_child(void) {
  for (pf_host_gate* g = g_gates; g != NULL; g = g->next) {
    uint_fast64_t closed = atomic_load(&g->state) & GATE_CLOSED;
    atomic_store(&g->state, closed | own_calls(g, 1));
  }
  /* The other threads' seats: their threads are gone, and so are their
   * destructors. This thread's own seat keeps its count. */
  for (pf_gate_seat *s = g_seats, *next; s != NULL; s = next) {
    next = s->next;
    if (s != t_seat) {
      seat_unlink(s);
      pf_free(s);
    }
  }
  pthread_mutex_unlock(&g_gates_lock);
  /* A registration for the child's own address space. */
  if (atomic_load(&g_seats_on) && !barrier_register()) atomic_store(&g_seats_on, 0);
}
static void fork_register(void) {
  g_fork_rc = pthread_atfork(fork_prepare, fork_parent, fork_child);
  g_seat_key_ok = g_fork_rc == 0 && pthread_key_create(&g_seat_key, seat_free) == 0;
  atomic_store(&g_seats_on, g_seat_key_ok && barrier_register());
}

void pf_gate_seats_enable(int on) {
  pthread_once(&g_fork_once, fork_register);
  atomic_store(&g_seats_on, on && g_seat_key_ok && barrier_register());
}

/* ---- entering and leaving ---- */

/* Counts a call through g in `seat` if the seat is free for g: 1 when
 * counted, 0 when the seat counts another gate's calls, -1 when g is
 * closed (nothing counted). */
static inline int seat_enter(pf_gate_seat* seat, pf_host_gate* g) {
  uint_fast64_t d = atomic_load_explicit(&seat->depth, memory_order_relaxed);
  const pf_host_gate* bound = atomic_load_explicit(&seat->gate, memory_order_relaxed);
  if (__builtin_expect(bound != g, 0)) {
    if (d != 0) return 0;
    atomic_store_explicit(&seat->gate, g, memory_order_relaxed);
  }
  atomic_store_explicit(&seat->depth, d + 1, memory_order_relaxed);
  /* The store, then the read of the state: the close's barrier_all does
   * the hardware's half of keeping them in this order. */
  atomic_signal_fence(memory_order_seq_cst);
  if (__builtin_expect(atomic_load_explicit(&g->state, memory_order_relaxed) & GATE_CLOSED, 0)) {
    atomic_store_explicit(&seat->depth, d, memory_order_release);
    return -1;
  }
  return 1;
}

/* Entering without a seat of this thread's yet (one is made), or with a
 * seat busy with another gate: counts in g's state then. */
__attribute__((noinline)) static int gate_enter_slow(pf_host_gate* g, pf_host_frame* fr) {
  pf_gate_seat* seat = t_seat == NULL ? seat_get() : NULL;
  if (seat != NULL) {
    int r = seat_enter(seat, g);
    if (r != 0) {
      fr->seat = seat;
      return r > 0 ? 0 : -1;
    }
  }
  uint_fast64_t s = atomic_load(&g->state);
  do {
    if (s & GATE_CLOSED) return -1;
  } while (!atomic_compare_exchange_weak(&g->state, &s, s + 1));
  fr->seat = NULL;
  return 0;
}

/* Counts a call through g in this thread's seat or g's state, unless g is
 * closed (-1, nothing counted). Sets fr->seat for gate_leave. */
static inline int gate_enter(pf_host_gate* g, pf_host_frame* fr) {
  pf_gate_seat* seat = t_seat;
  if (__builtin_expect(seat != NULL, 1)) {
    int r = seat_enter(seat, g);
    if (__builtin_expect(r > 0, 1)) {
      fr->seat = seat;
      return 0;
    }
    if (r < 0) return -1;
  }
  return gate_enter_slow(g, fr);
}

static void gate_leave(pf_host_gate* g, const pf_host_frame* fr) {
  pf_gate_seat* seat = fr->seat;
  if (seat == NULL) {
    atomic_fetch_sub(&g->state, 1);
    return;
  }
  uint_fast64_t d = atomic_load_explicit(&seat->depth, memory_order_relaxed);
  atomic_store_explicit(&seat->depth, d - 1, memory_order_release);
}

static int closed_error(const pf_host_gate* g) {
  const char* m = atomic_load(&g->message);
  return PF_ERROR(kPFErrRuntimeError, "%s", m != NULL ? m : k_default_message);
}

static void push_frame(pf_host_frame* fr, const pf_host_gate* g, void* resource) {
  fr->call.resource_handle = resource;
  fr->call.status = kPFHostPending;
  fr->call.reserved = 0;
  fr->gate = g;
  fr->prev = t_frames;
  t_frames = fr;
}

/* ---- gates ---- */

static void gate_destroy(pf_object* o) {
  pf_host_gate* g = (pf_host_gate*)o;
  pthread_mutex_lock(&g_gates_lock);
  if (g->prev) g->prev->next = g->next;
  else g_gates = g->next;
  if (g->next) g->next->prev = g->prev;
  pthread_mutex_unlock(&g_gates_lock);
  char* m = atomic_load(&g->message);
  if (m != k_default_message) pf_free(m);
  pf_free(g);
}

int PFHostGateCreate(PFObjectHandle* out) {
  PF_CHECK_ARG(out);
  pthread_once(&g_fork_once, fork_register);
  if (g_fork_rc != 0) return pf_oom("PFHostGateCreate");
  pf_host_gate* g = pf_calloc(1, sizeof(*g));
  if (g == NULL) return pf_oom("PFHostGateCreate");
  pf_object_init(&g->base, kPFObjectHostGate, gate_destroy);
  atomic_init(&g->state, 0);
  atomic_init(&g->message, NULL);
  pthread_mutex_lock(&g_gates_lock);
  g->next = g_gates;
  if (g_gates) g_gates->prev = g;
  g_gates = g;
  pthread_mutex_unlock(&g_gates_lock);
  *out = g;
  return 0;
}

static int gate_arg(const char* where, PFObjectHandle gate) {
  if (pf_is_object(gate, kPFObjectHostGate)) return 0;
  return pf_err_bad_object(where, "gate", gate, kPFObjectHostGate);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int PFHostGateClose(PFObjectHandle gate, const char* message, int timeout_ms) {
  static const char* const where = "PFHostGateClose";
  if (gate_arg(where, gate) != 0) return -1;
  pf_host_gate* g = gate;
  int rc = 0;
  if (atomic_load(&g->message) == NULL) {
    char* copy = message != NULL ? pf_strdup(message) : (char*)k_default_message;
    if (copy == NULL) {
      rc = pf_oom(where);
      copy = (char*)k_default_message;
    }
    char* expected = NULL;
    if (!atomic_compare_exchange_strong(&g->message, &expected, copy) && copy != k_default_message)
      pf_free(copy); /* another close came first: its message stays */
  }
  atomic_fetch_or(&g->state, GATE_CLOSED);
  /* Every call counted in a seat from here on sees the bit (see seats). */
  pthread_mutex_lock(&g_gates_lock);
  int seated = g_seats != NULL;
  pthread_mutex_unlock(&g_gates_lock);
  if (seated) barrier_all();
  uint_fast64_t own = own_calls(g, 0);
  int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;
  for (;;) {
    uint_fast64_t busy = all_calls(g);
    if (busy <= own) break;
    if (timeout_ms >= 0 && now_ms() >= deadline)
      return PF_ERROR("TimeoutError",
                      "%s: %llu call(s) of host functions still in progress on "
                      "other threads after %d ms",
                      where, (unsigned long long)(busy - own), timeout_ms);
    struct timespec ts = {0, 1000000L};
    nanosleep(&ts, NULL);
  }
  return rc;
}

/* ---- host functions ---- */

static int host_call(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  pf_host_fn* h = res;
  pf_host_frame fr;
  if (gate_enter(h->gate, &fr) != 0) return closed_error(h->gate);
  push_frame(&fr, h->gate, h->resource);
  uint64_t gen = pf_hot.err_gen;
  (void)h->func(args, codes, n, ret, &fr.call);
  t_frames = fr.prev;
  int32_t status = fr.call.status;
  gate_leave(h->gate, &fr);
  if (status == 0 || status == -1) return status;
  if (status == kPFHostPending && pf_hot.err_gen != gen) return -1;
  const char* name = atomic_load_explicit(&h->self->name, memory_order_acquire);
  if (status == kPFHostPending)
    return PF_ERROR(kPFErrRuntimeError,
                    "host function '%s' did not complete: it returned without "
                    "reporting success or failure",
                    name ? name : "<anonymous>");
  return PF_ERROR(kPFErrRuntimeError, "host function '%s' reported status %d; expected 0 or -1",
                  name ? name : "<anonymous>", (int)status);
}

/* Runs a host finalizer through the gate: skipped once the gate is closed. */
static void gated_fin(pf_host_gate* g, PFPackedCFuncFinalizer fin, void* resource) {
  pf_host_frame fr;
  if (fin == NULL || gate_enter(g, &fr) != 0) return;
  push_frame(&fr, g, resource);
  fin(resource);
  t_frames = fr.prev;
  gate_leave(g, &fr);
}

static void host_fin(void* res) {
  pf_host_fn* h = res;
  gated_fin(h->gate, h->fin, h->resource);
  pf_object_release(&h->gate->base);
  pf_free(h);
}

int PFFuncCreateFromHostCFunc(PFObjectHandle gate, PFPackedCFunc func, void* resource_handle,
                              PFPackedCFuncFinalizer fin, PFFunctionHandle* out) {
  static const char* const where = "PFFuncCreateFromHostCFunc";
  if (!pf_is_object(gate, kPFObjectHostGate)) {
    if (fin) fin(resource_handle);
    return gate_arg(where, gate);
  }
  pf_host_gate* g = gate;
  if (func == NULL || out == NULL) {
    gated_fin(g, fin, resource_handle);
    return pf_err_null_arg(where, func == NULL ? "func" : "out");
  }
  if (atomic_load(&g->state) & GATE_CLOSED) return closed_error(g); /* fin: skipped */
  pf_host_fn* h = pf_malloc(sizeof(*h));
  if (h == NULL) {
    gated_fin(g, fin, resource_handle);
    return pf_oom(where);
  }
  pf_object_retain(g);
  h->gate = g;
  h->func = func;
  h->resource = resource_handle;
  h->fin = fin;
  h->self = NULL;
  PFFunctionHandle f;
  if (PFFuncCreateFromCFunc(host_call, h, host_fin, &f) != 0) return -1; /* host_fin ran */
  h->self = f;
  *out = f;
  return 0;
}

/* ---- host objects ---- */

typedef struct {
  pf_object base;
  pf_host_gate* gate; /* a reference */
  void* payload;
  PFObjectFinalizer fin;
} pf_host_object;

static void host_object_destroy(pf_object* o) {
  pf_host_object* h = (pf_host_object*)o;
  gated_fin(h->gate, h->fin, h->payload);
  pf_object_release(&h->gate->base);
  pf_free(h);
}

int PFHostObjectCreate(PFObjectHandle gate, void* payload, PFObjectFinalizer fin,
                       PFObjectHandle* out) {
  static const char* const where = "PFHostObjectCreate";
  if (!pf_is_object(gate, kPFObjectHostGate)) {
    if (fin) fin(payload);
    return gate_arg(where, gate);
  }
  pf_host_gate* g = gate;
  if (out == NULL) {
    gated_fin(g, fin, payload);
    return pf_err_null_arg(where, "out");
  }
  pf_host_object* h = pf_malloc(sizeof(*h));
  if (h == NULL) {
    gated_fin(g, fin, payload);
    return pf_oom(where);
  }
  pf_object_init(&h->base, kPFObjectHostObject, host_object_destroy);
  pf_object_retain(&g->base);
  h->gate = g;
  h->payload = payload;
  h->fin = fin;
  /* The finalizer may be a module's code, as a boxed object's may. */
  if (fin && pf_object_hold_code(&h->base, pf_code_addr((void (*)(void))fin), where) != 0) {
    pf_object_release(&h->base); /* runs fin */
    return -1;
  }
  *out = h;
  return 0;
}

int pf_host_payload(const void* obj, const void* gate, void** out) {
  const pf_object* o = obj;
  if (o->type_index == kPFObjectHostObject) {
    const pf_host_object* h = obj;
    if (h->gate != gate) return 0;
    *out = h->payload;
    return 1;
  }
  if (o->type_index != kPFObjectFunction) return 0;
  const pf_function* f = obj;
  if (f->func != host_call) return 0;
  const pf_host_fn* h = f->resource;
  if (h->gate != gate) return 0;
  *out = h->resource;
  return 1;
}

int PFHostObjectGetPayload(PFObjectHandle obj, PFObjectHandle gate, void** out) {
  PF_CHECK_OBJECT(obj, kPFObjectHostObject);
  PF_CHECK_OBJECT(gate, kPFObjectHostGate);
  PF_CHECK_ARG(out);
  pf_host_object* h = obj;
  if (h->gate != gate)
    return PF_ERROR(kPFErrTypeError,
                    "%s: argument 'obj' is a host object of another gate (another host)", __func__);
  *out = h->payload;
  return 0;
}
