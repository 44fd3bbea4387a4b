/* The shared cache of pre-packed constants (PFPrePackCacheCreate): one
 * packed copy per (pack format, position, content), shared by every bound
 * function that binds an equal CPU tensor. The rules are in c_api.h. */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include <xxhash.h>

#include "internal.h"
#include "prepack_cache.h"

typedef struct pf_pp_cache_link pf_pp_cache_link;
struct pf_pp_cache_link {
  pf_pp_cache_link* next;
  pf_pp_cache_link* prev;
};

struct pf_pp_entry {
  pf_pp_entry* next;
  char* format;
  int position;
  uint64_t hash;
  /* The original constant, retained: hits compare its bytes, so that two
   * constants whose hashes collide never share a packed value. */
  PFObjectHandle original;
  PFValue packed;
  int packed_code;
  size_t packed_bytes;
  int ready;    /* the hook has run and `packed` is set */
  int64_t refs; /* bound functions using the entry, and a packer */
};

typedef struct {
  pf_object base;
  pthread_mutex_t lock;
  pthread_cond_t changed; /* an entry became ready or went away */
  uint64_t generation;    /* bumped with every signal of `changed` */
  pf_pp_entry* entries;   /* few: one per distinct constant */
  int64_t num_entries;
  uint64_t bytes;
  uint64_t hits;
  pf_pp_cache_link link; /* in g_caches, for fork */
} pf_pp_cache;

atomic_int pf_pp_force_hash;

/* How many hooks this thread is running for entries it published, in any
 * cache (a hook may bind through caches in turn). Only threads at 0 wait
 * for another thread's entry: the threads that are waited for never wait,
 * so no cycle of waits can form, across caches too. */
static _Thread_local int t_packing;

/* ---- every cache, for fork: the forking thread takes every cache's lock,
 * so that the child finds none held by a thread it did not inherit ---- */

static pthread_mutex_t g_caches_lock = PTHREAD_MUTEX_INITIALIZER;
static pf_pp_cache_link g_caches = {&g_caches, &g_caches};
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static int g_fork_rc;

#define CACHE_OF(l) ((pf_pp_cache*)((char*)(l)-offsetof(pf_pp_cache, link)))

static void fork_prepare(void) {
  pthread_mutex_lock(&g_caches_lock);
  for (pf_pp_cache_link* l = g_caches.next; l != &g_caches; l = l->next)
    pthread_mutex_lock(&CACHE_OF(l)->lock);
}
static void fork_parent(void) {
  for (pf_pp_cache_link* l = g_caches.next; l != &g_caches; l = l->next)
    pthread_mutex_unlock(&CACHE_OF(l)->lock);
  pthread_mutex_unlock(&g_caches_lock);
}
/* In the child, a cache's condition variable may have had waiters that no
 * longer exist: it is made anew along with the lock. (An entry that another
 * thread was packing at the fork stays unready in the child; binding an
 * equal constant there again waits for it.) */
static void fork_child(void) {
  for (pf_pp_cache_link* l = g_caches.next; l != &g_caches; l = l->next) {
    pf_pp_cache* c = CACHE_OF(l);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->changed, NULL);
  }
  pthread_mutex_init(&g_caches_lock, NULL);
}
static void fork_register(void) {
  g_fork_rc = pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static void cache_destroy(pf_object* o) {
  pf_pp_cache* c = (pf_pp_cache*)o;
  pthread_mutex_lock(&g_caches_lock);
  c->link.prev->next = c->link.next;
  c->link.next->prev = c->link.prev;
  pthread_mutex_unlock(&g_caches_lock);
  /* No entry is left: each goes with the last bound function that uses
   * it, and bound functions hold a reference to the cache. */
  pthread_cond_destroy(&c->changed);
  pthread_mutex_destroy(&c->lock);
  pf_free(c);
}

int PFPrePackCacheCreate(PFPrePackCacheHandle* out) {
  static const char* const where = "PFPrePackCacheCreate";
  PF_CHECK_ARG(out);
  pthread_once(&g_fork_once, fork_register);
  if (g_fork_rc != 0) return pf_oom(where);
  pf_pp_cache* c = pf_calloc(1, sizeof(*c));
  if (c == NULL) return pf_oom(where);
  if (pthread_mutex_init(&c->lock, NULL) != 0) {
    pf_free(c);
    return pf_oom(where);
  }
  if (pthread_cond_init(&c->changed, NULL) != 0) {
    pthread_mutex_destroy(&c->lock);
    pf_free(c);
    return pf_oom(where);
  }
  pf_object_init(&c->base, kPFObjectPrePackCache, cache_destroy);
  pthread_mutex_lock(&g_caches_lock);
  c->link.next = g_caches.next;
  c->link.prev = &g_caches;
  g_caches.next->prev = &c->link;
  g_caches.next = &c->link;
  pthread_mutex_unlock(&g_caches_lock);
  *out = c;
  return 0;
}

int PFPrePackCacheGetStats(PFPrePackCacheHandle cache, int64_t* entries, int64_t* bytes,
                           int64_t* hits) {
  PF_CHECK_OBJECT(cache, kPFObjectPrePackCache);
  pf_pp_cache* c = cache;
  pthread_mutex_lock(&c->lock);
  if (entries) *entries = c->num_entries;
  if (bytes) *bytes = (int64_t)c->bytes;
  if (hits) *hits = (int64_t)c->hits;
  pthread_mutex_unlock(&c->lock);
  return 0;
}

/* The bytes of a compact CPU tensor (pf_tensor_bytes: sub-byte elements
 * packed), or 0 with *ok = 0 when the tensor is not one (not on the CPU,
 * strided, or of a size no object can have). */
static size_t tensor_bytes(const DLTensor* t, int* ok) {
  *ok = 0;
  size_t n = 0;
  if (t->device.device_type != kDLCPU || pf_tensor_bytes(t, &n) != 0) return 0;
  if (t->strides != NULL) {
    uint64_t expect = 1; /* row-major, in elements */
    for (int i = t->ndim - 1; i >= 0 && n > 0; --i) {
      int64_t d = t->shape[i];
      if (d > 1 && (t->strides[i] < 0 || (uint64_t)t->strides[i] != expect)) return 0;
      expect *= (uint64_t)d; /* cannot wrap: pf_tensor_bytes multiplied the dims */
    }
  }
  if (n > 0 && t->data == NULL) return 0;
  *ok = 1;
  return n;
}

static const char* tensor_data(const DLTensor* t) { return (const char*)t->data + t->byte_offset; }

/* The content hash of a tensor: dtype, shape and bytes. */
static uint64_t tensor_hash(const DLTensor* t, size_t nbytes) {
  if (atomic_load_explicit(&pf_pp_force_hash, memory_order_relaxed)) return 42;
  uint64_t seed = XXH3_64bits(&t->dtype, sizeof(t->dtype));
  seed = XXH3_64bits_withSeed(&t->ndim, sizeof(t->ndim), seed);
  if (t->ndim > 0) seed = XXH3_64bits_withSeed(t->shape, sizeof(int64_t) * (size_t)t->ndim, seed);
  return XXH3_64bits_withSeed(nbytes ? tensor_data(t) : "", nbytes, seed);
}

static int same_tensor(const DLTensor* a, const DLTensor* b, size_t nbytes) {
  if (a->dtype.code != b->dtype.code || a->dtype.bits != b->dtype.bits ||
      a->dtype.lanes != b->dtype.lanes || a->ndim != b->ndim)
    return 0;
  for (int i = 0; i < a->ndim; ++i)
    if (a->shape[i] != b->shape[i]) return 0;
  return nbytes == 0 || memcmp(tensor_data(a), tensor_data(b), nbytes) == 0;
}

/* The bytes a packed tensor's elements span, in any layout (a kernel's
 * layout is often not row-major): one element plus the farthest offset
 * from the first, in elements, sized by pf_dtype_bytes (sub-byte elements
 * packed); 0 for an empty tensor or one whose span overflows. */
static size_t packed_size(PFValue v, int code) {
  DLTensor* t = NULL;
  if (code != kPFObjectHandle || !pf_is_object(v.v_handle, kPFObjectTensor)) return 0;
  if (PFTensorGetDLTensor(v.v_handle, &t) != 0 || t->ndim < 0 || (t->ndim > 0 && t->shape == NULL))
    return 0;
  uint64_t last = 0, stride = 1; /* in elements */
  for (int i = t->ndim - 1; i >= 0; --i) {
    int64_t d = t->shape[i];
    if (d <= 0) return 0;
    uint64_t s = stride;
    if (t->strides != NULL)
      s = t->strides[i] < 0 ? -(uint64_t)t->strides[i] : (uint64_t)t->strides[i];
    uint64_t step;
    if (__builtin_mul_overflow(s, (uint64_t)(d - 1), &step) ||
        __builtin_add_overflow(last, step, &last) ||
        __builtin_mul_overflow(stride, (uint64_t)d, &stride))
      return 0;
  }
  size_t n = 0;
  if (__builtin_add_overflow(last, 1u, &last) || pf_dtype_bytes(t->dtype, last, &n) != 0) return 0;
  return n;
}

/* Frees an entry that no one can reach any more; runs user code (the
 * finalizers of the packed value and of the original), so never under the
 * cache's lock. */
static void entry_free(pf_pp_entry* e) {
  if (e->ready && pf_code_is_handle(e->packed_code)) PFObjectFree(e->packed.v_handle);
  PFObjectFree(e->original);
  pf_free(e->format);
  pf_free(e);
}

static void unlink_entry(pf_pp_cache* c, pf_pp_entry* e) {
  for (pf_pp_entry** p = &c->entries; *p != NULL; p = &(*p)->next) {
    if (*p == e) {
      *p = e->next;
      return;
    }
  }
}

void pf_pp_entry_release(PFPrePackCacheHandle cache, pf_pp_entry* e) {
  pf_pp_cache* c = cache;
  pthread_mutex_lock(&c->lock);
  int last = --e->refs == 0;
  if (last) {
    unlink_entry(c, e);
    if (e->ready) {
      c->bytes -= e->packed_bytes;
      --c->num_entries;
    }
  }
  pthread_mutex_unlock(&c->lock);
  if (last) entry_free(e);
}

int pf_pp_cache_pack(PFPrePackCacheHandle cache, const pf_prepack* pp, PFFunctionHandle func,
                     int position, const PFValue* value, int code, pf_pp_run_fn run, PFValue* out,
                     int* out_code, int* packed, pf_pp_entry** entry) {
  *entry = NULL;
  if (code != kPFObjectHandle || !pf_is_object(value->v_handle, kPFObjectTensor)) return 1;
  DLTensor* t = NULL;
  if (PFTensorGetDLTensor(value->v_handle, &t) != 0) return -1;
  int ok = 0;
  size_t nbytes = tensor_bytes(t, &ok);
  if (!ok) return 1; /* not a compact CPU tensor: each bind packs its own */
  uint64_t hash = tensor_hash(t, nbytes);
  pf_pp_cache* c = cache;

  pthread_mutex_lock(&c->lock);
  for (;;) {
    pf_pp_entry* found = NULL;
    for (pf_pp_entry* e = c->entries; e != NULL; e = e->next) {
      if (e->hash != hash || e->position != position || strcmp(e->format, pp->format) != 0)
        continue;
      DLTensor* other = NULL;
      PFTensorGetDLTensor(e->original, &other);
      if (same_tensor(t, other, nbytes)) {
        found = e;
        break;
      }
    }
    if (found == NULL) break;
    if (!found->ready && t_packing > 0) {
      /* This thread is running a hook for a cache (this one or another):
       * waiting here could close a cycle (its hook binds B while another
       * thread's hook, packing B, binds A, or it finds its own entry). A
       * packer never waits: this bind packs its own copy. */
      pthread_mutex_unlock(&c->lock);
      return 1;
    }
    if (found->ready) {
      ++found->refs;
      ++c->hits;
      *out = found->packed;
      *out_code = found->packed_code;
      *packed = 1;
      *entry = found;
      pthread_mutex_unlock(&c->lock);
      return 0;
    }
    /* Another thread is packing this constant: wait for it to finish (or
     * fail), then look again. */
    uint64_t gen = c->generation;
    while (c->generation == gen) pthread_cond_wait(&c->changed, &c->lock);
  }
  /* A miss: publish an entry that is being packed, so that binds of the
   * same constant on other threads wait for this one. */
  pf_pp_entry* e = pf_calloc(1, sizeof(*e));
  char* format = e ? pf_strdup(pp->format) : NULL;
  if (e == NULL || format == NULL) {
    pthread_mutex_unlock(&c->lock);
    pf_free(e);
    return pf_oom("PFFuncBind");
  }
  e->format = format;
  e->position = position;
  e->hash = hash;
  e->original = value->v_handle;
  pf_object_retain(value->v_handle);
  e->refs = 1;
  e->next = c->entries;
  c->entries = e;
  pthread_mutex_unlock(&c->lock);

  /* The hook is user code: no lock held. */
  int is_packed = 0;
  PFValue result;
  int result_code = kPFNull;
  ++t_packing;
  int rc = run(pp, func, position, value, code, &result, &result_code, &is_packed);
  --t_packing;

  pthread_mutex_lock(&c->lock);
  if (rc != 0 || !is_packed) {
    /* Nothing to share: the entry goes, and waiters look again. */
    unlink_entry(c, e);
    ++c->generation;
    pthread_cond_broadcast(&c->changed);
    pthread_mutex_unlock(&c->lock);
    /* Not ready: only the original goes, keeping the hook's error (if any)
     * across the finalizer this may run. */
    pf_object_release_keeping_error(e->original);
    pf_free(e->format);
    pf_free(e);
    if (rc != 0) return -1;
    *packed = 0;
    return 0;
  }
  e->packed = result;
  e->packed_code = result_code;
  e->packed_bytes = packed_size(result, result_code);
  e->ready = 1;
  c->bytes += e->packed_bytes;
  ++c->num_entries;
  ++c->generation;
  pthread_cond_broadcast(&c->changed);
  pthread_mutex_unlock(&c->lock);
  *out = result;
  *out_code = result_code;
  *packed = 1;
  *entry = e;
  return 0;
}
