/* Host functions and the gates they are called through (see c_api.h). */
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "internal.h"

/* A gate's state: the number of calls in progress, and this bit once it is
 * closed. One word, so that entering can never slip past a close. */
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

/* One gated call in progress on this thread, on its wrapper's stack. The
 * chain lets PFHostGateClose leave out the caller's own calls. */
typedef struct pf_host_frame pf_host_frame;
struct pf_host_frame {
  PFHostCall call;
  const pf_host_gate* gate;
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

static uint_fast64_t own_calls(const pf_host_gate* g) {
  uint_fast64_t n = 0;
  for (const pf_host_frame* f = t_frames; f != NULL; f = f->prev) n += f->gate == g;
  return n;
}

static void fork_prepare(void) { pthread_mutex_lock(&g_gates_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&g_gates_lock); }
/* Only the forking thread lives on in the child: the calls that other
 * threads had in progress will never leave, so they no longer count. */
static void fork_child(void) {
  for (pf_host_gate* g = g_gates; g != NULL; g = g->next) {
    uint_fast64_t closed = atomic_load(&g->state) & GATE_CLOSED;
    atomic_store(&g->state, closed | own_calls(g));
  }
  pthread_mutex_unlock(&g_gates_lock);
}
static void fork_register(void) { g_fork_rc = pthread_atfork(fork_prepare, fork_parent, fork_child); }

/* ---- entering and leaving ---- */

static int gate_enter(pf_host_gate* g) {
  uint_fast64_t s = atomic_load(&g->state);
  do {
    if (s & GATE_CLOSED) return -1;
  } while (!atomic_compare_exchange_weak(&g->state, &s, s + 1));
  return 0;
}

static void gate_leave(pf_host_gate* g) { atomic_fetch_sub(&g->state, 1); }

static int closed_error(const pf_host_gate* g) {
  const char* m = atomic_load(&g->message);
  PFErrorSet(kPFErrRuntimeError, m != NULL ? m : k_default_message);
  return -1;
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
    if (!atomic_compare_exchange_strong(&g->message, &expected, copy) &&
        copy != k_default_message)
      pf_free(copy); /* another close came first: its message stays */
  }
  atomic_fetch_or(&g->state, GATE_CLOSED);
  uint_fast64_t own = own_calls(g);
  int64_t deadline = timeout_ms >= 0 ? now_ms() + timeout_ms : 0;
  for (;;) {
    uint_fast64_t busy = atomic_load(&g->state) & ~GATE_CLOSED;
    if (busy <= own) break;
    if (timeout_ms >= 0 && now_ms() >= deadline)
      return PFErrorSetFormat("TimeoutError",
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
  if (gate_enter(h->gate) != 0) return closed_error(h->gate);
  pf_host_frame fr;
  push_frame(&fr, h->gate, h->resource);
  uint64_t gen = pf_hot.err_gen;
  (void)h->func(args, codes, n, ret, &fr.call);
  t_frames = fr.prev;
  int32_t status = fr.call.status;
  gate_leave(h->gate);
  if (status == 0 || status == -1) return status;
  if (status == kPFHostPending && pf_hot.err_gen != gen) return -1;
  const char* name = atomic_load_explicit(&h->self->name, memory_order_acquire);
  if (status == kPFHostPending)
    return PFErrorSetFormat(kPFErrRuntimeError,
                            "host function '%s' did not complete: it returned without "
                            "reporting success or failure",
                            name ? name : "<anonymous>");
  return PFErrorSetFormat(kPFErrRuntimeError,
                          "host function '%s' reported status %d; expected 0 or -1",
                          name ? name : "<anonymous>", (int)status);
}

/* Runs a host finalizer through the gate: skipped once the gate is closed. */
static void gated_fin(pf_host_gate* g, PFPackedCFuncFinalizer fin, void* resource) {
  if (fin == NULL || gate_enter(g) != 0) return;
  pf_host_frame fr;
  push_frame(&fr, g, resource);
  fin(resource);
  t_frames = fr.prev;
  gate_leave(g);
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

int PFHostObjectGetPayload(PFObjectHandle obj, PFObjectHandle gate, void** out) {
  PF_CHECK_OBJECT(obj, kPFObjectHostObject);
  PF_CHECK_OBJECT(gate, kPFObjectHostGate);
  PF_CHECK_ARG(out);
  pf_host_object* h = obj;
  if (h->gate != gate)
    return PFErrorSetFormat(kPFErrTypeError,
                            "%s: argument 'obj' is a host object of another gate (another host)",
                            __func__);
  *out = h->payload;
  return 0;
}
