/* Registered object types: the table by index and by key, registration,
 * lookups, making a type's code ready, dormant types. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <xxhash.h>

#include "object_type.h"

/* The public structs are ABI: read and filled by code built against the
 * header. Pinned where pointers are 8 bytes. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(PFFieldDesc) == 40 && offsetof(PFFieldDesc, offset) == 16 &&
                   offsetof(PFFieldDesc, doc) == 32,
               "PFFieldDesc's layout is ABI");
_Static_assert(sizeof(PFMethodDesc) == 48 && offsetof(PFMethodDesc, signature) == 24 &&
                   offsetof(PFMethodDesc, flags) == 32 && offsetof(PFMethodDesc, doc) == 40,
               "PFMethodDesc's layout is ABI");
_Static_assert(sizeof(PFObjectTypeDesc) == 80 && offsetof(PFObjectTypeDesc, key) == 8 &&
                   offsetof(PFObjectTypeDesc, finalizer) == 32 &&
                   offsetof(PFObjectTypeDesc, num_fields) == 56 &&
                   offsetof(PFObjectTypeDesc, num_methods) == 72,
               "PFObjectTypeDesc's layout is ABI");
_Static_assert(sizeof(PFObjectTypeDesc2) == 96 && offsetof(PFObjectTypeDesc2, accessors) == 80 &&
                   offsetof(PFObjectTypeDesc2, num_accessors) == 88,
               "PFObjectTypeDesc2's layout is ABI");
_Static_assert(sizeof(PFObjectTypeDesc3) == 104 && offsetof(PFObjectTypeDesc3, prepare) == 96,
               "PFObjectTypeDesc3's layout is ABI");
_Static_assert(sizeof(PFAccessorDesc) == 40 && offsetof(PFAccessorDesc, get) == 16 &&
                   offsetof(PFAccessorDesc, doc) == 32,
               "PFAccessorDesc's layout is ABI");
_Static_assert(offsetof(PFFieldInfo, offset) == 24 && offsetof(PFFieldInfo, flags) == 40 &&
                   offsetof(PFFieldInfo, type_index) == 44,
               "PFFieldInfo's members keep their places");
_Static_assert(offsetof(PFMethodInfo, flags) == 24 && offsetof(PFMethodInfo, type_index) == 28,
               "PFMethodInfo's members keep their places");
_Static_assert(offsetof(PFObjectTypeInfo, type_index) == 16 &&
                   offsetof(PFObjectTypeInfo, instance_size) == 40 &&
                   offsetof(PFObjectTypeInfo, fields) == 48 &&
                   offsetof(PFObjectTypeInfo, init) == 64,
               "PFObjectTypeInfo's members keep their places");
#endif

/* ---- the table ---- */

/* Guards registration, the key table, and each type's weak_lib, dormant
 * and code pointers. Held only for table work: no allocation, no user
 * code, no release. */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
/* By index minus kPFObjectTypeRegisteredBegin; written once each, under
 * the lock, with release order; read without the lock. Zero pages until
 * used. */
static _Atomic(pf_type*) g_by_index[PF_OBJECT_TYPE_MAX_REGISTERED];
static atomic_uint g_count; /* written under the lock */
/* By key: chains through pf_type.hash_next, under the lock. */
#define KEY_BUCKETS 4096u
static pf_type* g_by_key[KEY_BUCKETS];

static void fork_prepare(void) { pthread_mutex_lock(&g_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&g_lock); }
static void fork_child(void) { pthread_mutex_init(&g_lock, NULL); }
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void fork_setup(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void lock(void) {
  pthread_once(&g_fork_once, fork_setup);
  pthread_mutex_lock(&g_lock);
}
static void unlock(void) { pthread_mutex_unlock(&g_lock); }

static unsigned bucket_of(const char* key, size_t len) {
  return (unsigned)XXH3_64bits(key, len) & (KEY_BUCKETS - 1u);
}

static int key_is(const pf_type* t, const char* key, size_t len) {
  return strncmp(t->info.key, key, len) == 0 && t->info.key[len] == '\0';
}

/* Lock held. */
static pf_type* find_locked(const char* key, size_t len) {
  for (pf_type* t = g_by_key[bucket_of(key, len)]; t != NULL; t = t->hash_next)
    if (key_is(t, key, len)) return t;
  return NULL;
}

static pf_type* find(const char* key, size_t len) {
  lock();
  pf_type* t = find_locked(key, len);
  unlock();
  return t;
}

const pf_type* pf_type_at(uint32_t type_index) {
  uint32_t i = type_index - kPFObjectTypeRegisteredBegin; /* wraps below the range */
  if (i >= PF_OBJECT_TYPE_MAX_REGISTERED) return NULL;
  return atomic_load_explicit(&g_by_index[i], memory_order_acquire);
}

const char* pf_registered_type_name(uint32_t type_index) {
  const pf_type* t = pf_type_at(type_index);
  return t ? t->info.key : NULL;
}

static _Thread_local const pf_type_scope* t_scope;

void pf_type_scope_set(const pf_type_scope* scope) { t_scope = scope; }

const pf_type* pf_type_resolve(const char* key, size_t len) {
  if (len == 0 || len > PF_OBJECT_TYPE_KEY_MAX) return NULL;
  for (int i = 0; t_scope != NULL && i < t_scope->count; ++i)
    if (key_is(t_scope->types[i], key, len)) return t_scope->types[i];
  return find(key, len);
}

/* ---- lookups ---- */

static int no_type(const char* where, uint32_t type_index) {
  return PF_ERROR(kPFErrKeyError, "%s: %u is not the index of a registered object type", where,
                  (unsigned)type_index);
}

int PFObjectTypeFind(const char* key, uint32_t* out_type_index) {
  PF_CHECK_ARG(key);
  PF_CHECK_ARG(out_type_index);
  size_t len = strnlen(key, PF_OBJECT_TYPE_KEY_MAX + 1);
  const pf_type* t = len <= PF_OBJECT_TYPE_KEY_MAX ? find(key, len) : NULL;
  *out_type_index = t ? t->info.type_index : 0;
  return 0;
}

int PFObjectTypeGetInfo(uint32_t type_index, const PFObjectTypeInfo** out) {
  PF_CHECK_ARG(out);
  const pf_type* t = pf_type_at(type_index);
  if (t == NULL) return no_type(__func__, type_index);
  *out = &t->info;
  return 0;
}

const pf_field* pf_type_find_field(const pf_type* t, const char* name) {
  for (int i = 0; i < t->info.num_fields; ++i)
    if (strcmp(t->info.fields[i]->name, name) == 0) return (const pf_field*)t->info.fields[i];
  return NULL;
}

const pf_method* pf_type_find_method(const pf_type* t, const char* name) {
  for (int i = 0; i < t->info.num_methods; ++i)
    if (strcmp(t->info.methods[i]->name, name) == 0) return (const pf_method*)t->info.methods[i];
  return NULL;
}

PFFunctionHandle pf_method_function(const pf_method* m) {
  const pf_type_code* c = atomic_load_explicit(&m->owner->code, memory_order_acquire);
  return c->methods[m->own_index];
}

int PFObjectTypeGetField(uint32_t type_index, const char* name, const PFFieldInfo** out) {
  PF_CHECK_ARG(name);
  PF_CHECK_ARG(out);
  const pf_type* t = pf_type_at(type_index);
  if (t == NULL) return no_type(__func__, type_index);
  const pf_field* f = pf_type_find_field(t, name);
  if (f == NULL)
    return PF_ERROR(kPFErrAttributeError, "%s: object type '%s' has no field '%.300s'", __func__,
                    t->info.key, name);
  *out = &f->info;
  return 0;
}

int PFObjectTypeGetMethod(uint32_t type_index, const char* name, PFFunctionHandle* out) {
  PF_CHECK_ARG(name);
  PF_CHECK_ARG(out);
  const pf_type* t = pf_type_at(type_index);
  if (t == NULL) return no_type(__func__, type_index);
  const pf_method* m = pf_type_find_method(t, name);
  if (m == NULL)
    return PF_ERROR(kPFErrAttributeError, "%s: object type '%s' has no method '%.300s'", __func__,
                    t->info.key, name);
  if (pf_type_ready(__func__, t) != 0) return -1;
  PFFunctionHandle f = pf_method_function(m);
  pf_object_retain(f);
  *out = f;
  return 0;
}

int PFObjectTypeGetConstructor(uint32_t type_index, PFFunctionHandle* out) {
  PF_CHECK_ARG(out);
  const pf_type* t = pf_type_at(type_index);
  if (t == NULL) return no_type(__func__, type_index);
  if (pf_type_ready(__func__, t) != 0) return -1;
  PFFunctionHandle f = atomic_load_explicit(&t->code, memory_order_acquire)->ctor;
  pf_object_retain(f);
  *out = f;
  return 0;
}

/* ---- making a type's code ready ---- */

static int dormant_error(const char* where, const pf_type* t) {
  return PF_ERROR(kPFErrRuntimeError,
                  "%s: object type '%s' cannot be used: the module that registered it has been "
                  "unloaded (load the module again)",
                  where, t->info.key);
}

/* The code of one type, whose ancestors' code is ready. The library it
 * lies in is kept from being unloaded meanwhile by the reference taken
 * under the lock, and then for good by the code. */
static int ready_one(const char* where, pf_type* t) {
  if (atomic_load_explicit(&t->code, memory_order_acquire) != NULL) return 0;
  pf_object* lib = NULL;
  lock();
  int ready = atomic_load_explicit(&t->code, memory_order_relaxed) != NULL;
  int dormant =
      !ready && (t->dormant || (t->weak_lib != NULL && !pf_object_try_retain(t->weak_lib)));
  if (!ready && !dormant) lib = t->weak_lib;
  unlock();
  if (ready) return 0;
  if (dormant) return dormant_error(where, t);
  pf_type_code* code = NULL;
  if (pf_type_code_build(where, t, lib, &code) != 0) return -1; /* it released lib */
  pf_type_code* expected = NULL;
  lock();
  int won = atomic_compare_exchange_strong_explicit(&t->code, &expected, code, memory_order_release,
                                                    memory_order_relaxed);
  if (won) t->weak_lib = NULL;
  unlock();
  if (!won) pf_type_code_free(code); /* another thread was first */
  return 0;
}

int pf_type_ready(const char* where, const pf_type* t) {
  if (atomic_load_explicit(&t->code, memory_order_acquire) != NULL) return 0;
  /* Ancestors first: a ready type's ancestors are always ready, so an
   * instance's finalizers and inherited methods are loaded. */
  for (int d = 0; d <= t->info.depth; ++d)
    if (ready_one(where, (pf_type*)(uintptr_t)t->ancestors[d]) != 0) return -1;
  return 0;
}

void pf_types_library_gone(const pf_object* lib) {
  lock();
  unsigned n = atomic_load_explicit(&g_count, memory_order_relaxed);
  for (unsigned i = 0; i < n; ++i) {
    pf_type* t = atomic_load_explicit(&g_by_index[i], memory_order_relaxed);
    if (t->weak_lib == lib) {
      t->weak_lib = NULL;
      t->dormant = 1;
    }
  }
  unlock();
}

/* ---- registration ---- */

/* One registration's types, as it plans them. */
typedef struct {
  int n;
  pf_type** fresh;    /* built from the descriptions */
  pf_type** existing; /* the registered type of the same key, or NULL */
  pf_type** scope;    /* what each key names while building: existing, else fresh */
  int* order;         /* the order to build and commit in: parents first */
} plan;

static void plan_free(plan* p, int keep_new) {
  for (int i = 0; i < p->n && p->fresh != NULL; ++i)
    if (p->fresh[i] != NULL && !(keep_new && p->existing[i] == NULL)) pf_type_free(p->fresh[i]);
  pf_free(p->fresh);
  pf_free(p->existing);
  pf_free(p->scope);
  pf_free(p->order);
}

/* The batch index of `key`, or -1. */
static int batch_index(const plan* p, const char* key) {
  for (int i = 0; i < p->n; ++i)
    if (strcmp(p->fresh[i]->info.key, key) == 0) return i;
  return -1;
}

/* Resolves each type's parent: *parents[i] is a registered parent, or
 * in_batch[i] the batch index of a parent being registered with it (-1:
 * none there). Refuses parents that are not registered and a type that is
 * its own parent. */
static int resolve_parents(const char* where, const plan* p, const PFObjectTypeDesc* const* descs,
                           pf_type** parents, int* in_batch) {
  for (int i = 0; i < p->n; ++i) {
    const char* pk = descs[i]->parent;
    in_batch[i] = -1;
    parents[i] = NULL;
    if (pk == NULL) continue;
    if (strcmp(pk, p->fresh[i]->info.key) == 0)
      return PF_ERROR(kPFErrValueError, "%s: object type '%s' names itself as its parent", where,
                      pk);
    int j = batch_index(p, pk);
    if (j >= 0 && p->existing[j] == NULL) {
      in_batch[i] = j; /* resolved once it is built */
      continue;
    }
    size_t len = strnlen(pk, PF_OBJECT_TYPE_KEY_MAX + 1);
    parents[i] = j >= 0 ? p->existing[j] : len <= PF_OBJECT_TYPE_KEY_MAX ? find(pk, len) : NULL;
    if (parents[i] == NULL)
      return PF_ERROR(kPFErrValueError,
                      "%s: object type '%s': its parent '%.300s' is not a registered type", where,
                      p->fresh[i]->info.key, pk);
  }
  return 0;
}

/* Orders the batch parents first (p->order), completing *parents; a pass
 * that places nothing leaves a cycle. */
static int order_batch(const char* where, plan* p, const PFObjectTypeDesc* const* descs,
                       pf_type** parents) {
  int* in_batch = pf_calloc((size_t)p->n, sizeof(int));
  int* done = pf_calloc((size_t)p->n, sizeof(int));
  int rc = in_batch == NULL || done == NULL ? pf_oom(where)
                                            : resolve_parents(where, p, descs, parents, in_batch);
  for (int placed = 0; rc == 0 && placed < p->n;) {
    int progress = 0;
    for (int i = 0; i < p->n; ++i) {
      if (done[i] || (in_batch[i] >= 0 && !done[in_batch[i]])) continue;
      if (in_batch[i] >= 0) parents[i] = p->fresh[in_batch[i]];
      done[i] = 1;
      p->order[placed++] = i;
      progress = 1;
    }
    if (!progress) {
      int i = 0;
      while (done[i]) ++i;
      rc = PF_ERROR(kPFErrValueError,
                    "%s: object type '%s': its parents form a cycle (through '%s')", where,
                    p->fresh[i]->info.key, p->fresh[in_batch[i]]->info.key);
    }
  }
  pf_free(in_batch);
  pf_free(done);
  return rc;
}

/* Builds every type of the batch (plan->fresh), checked whole. */
static int build_batch(const char* where, plan* p, const PFObjectTypeDesc* const* descs) {
  size_t n = (size_t)p->n;
  p->fresh = pf_calloc(n, sizeof(pf_type*));
  p->existing = pf_calloc(n, sizeof(pf_type*));
  p->scope = pf_calloc(n, sizeof(pf_type*));
  p->order = pf_calloc(n, sizeof(int));
  pf_type** parents = pf_calloc(n, sizeof(pf_type*));
  int rc = 0;
  if (p->fresh == NULL || p->existing == NULL || p->scope == NULL || p->order == NULL ||
      parents == NULL) {
    pf_free(parents);
    return pf_oom(where);
  }
  for (int i = 0; i < p->n && rc == 0; ++i) {
    p->fresh[i] = pf_type_skeleton(where, descs[i], i);
    if (p->fresh[i] == NULL) rc = -1;
    for (int j = 0; j < i && rc == 0; ++j)
      if (strcmp(p->fresh[j]->info.key, p->fresh[i]->info.key) == 0)
        rc = PF_ERROR(kPFErrValueError, "%s: object type '%s' is given twice", where,
                      p->fresh[i]->info.key);
  }
  if (rc == 0) {
    lock();
    for (int i = 0; i < p->n; ++i) {
      const char* key = p->fresh[i]->info.key;
      p->existing[i] = find_locked(key, strlen(key));
      p->scope[i] = p->existing[i] ? p->existing[i] : p->fresh[i];
    }
    unlock();
    rc = order_batch(where, p, descs, parents);
  }
  if (rc == 0) {
    pf_type_scope scope = {p->scope, p->n};
    pf_type_scope_set(&scope);
    for (int k = 0; k < p->n && rc == 0; ++k) {
      int i = p->order[k];
      if (pf_type_build(where, descs[i], parents[i], p->fresh[i]) == NULL) rc = -1;
    }
    pf_type_scope_set(NULL);
  }
  pf_free(parents);
  return rc;
}

/* Publishes a built type under the next index. Lock held. */
static void publish_locked(pf_type* t, pf_object* lib) {
  unsigned i = atomic_load_explicit(&g_count, memory_order_relaxed);
  uint32_t index = kPFObjectTypeRegisteredBegin + i;
  t->info.type_index = index;
  t->info.parent_index = t->parent ? t->parent->info.type_index : 0;
  for (int k = 0; k < t->num_own_fields; ++k) t->own_fields[k].info.type_index = index;
  for (int k = 0; k < t->num_own_methods; ++k) t->own_methods[k].info.type_index = index;
  t->weak_lib = lib;
  unsigned b = bucket_of(t->info.key, strlen(t->info.key));
  t->hash_next = g_by_key[b];
  g_by_key[b] = t;
  atomic_store_explicit(&g_by_index[i], t, memory_order_release);
  atomic_store_explicit(&g_count, i + 1, memory_order_relaxed);
}

/* A dormant type takes the code of its identical description, newly
 * loaded. Lock held; the type has no code, so nothing reads these. */
static void revive_locked(pf_type* old, const pf_type* fresh, pf_object* lib) {
  old->fin = fresh->fin;
  old->prepare = fresh->prepare;
  for (int k = 0; k < old->num_own_fields; ++k) {
    old->own_fields[k].get = fresh->own_fields[k].get;
    old->own_fields[k].set = fresh->own_fields[k].set;
  }
  for (int k = 0; k < old->num_own_methods; ++k) {
    old->own_methods[k].packed = fresh->own_methods[k].packed;
    old->own_methods[k].typed = fresh->own_methods[k].typed;
  }
  old->dormant = 0;
  old->weak_lib = lib;
}

/* Checks the planned batch against the table and commits it: 0 done, -1
 * an error, 1 when another thread registered one of its keys meanwhile
 * (plan again). */
static int commit(const char* where, plan* p, pf_object* lib) {
  int rc = 0;
  lock();
  unsigned added = 0;
  for (int i = 0; i < p->n && rc == 0; ++i) {
    const char* key = p->fresh[i]->info.key;
    if (p->existing[i] == NULL) {
      if (find_locked(key, strlen(key)) != NULL) rc = 1;
      ++added;
      continue;
    }
    pf_type* old = p->existing[i];
    int live = !old->dormant;
    const char* why = pf_type_differs(old, p->fresh[i], live);
    if (why != NULL)
      rc = PF_ERROR(kPFErrKeyError,
                    "%s: object type '%s' is already registered with another description "
                    "(%s)",
                    where, key, why);
  }
  unsigned count = atomic_load_explicit(&g_count, memory_order_relaxed);
  if (rc == 0 && added > PF_OBJECT_TYPE_MAX_REGISTERED - count)
    rc = PF_ERROR(kPFErrRuntimeError,
                  "%s: cannot register %u more object types: the process "
                  "has %u of the %u it can have",
                  where, added, count, (unsigned)PF_OBJECT_TYPE_MAX_REGISTERED);
  for (int k = 0; k < p->n && rc == 0; ++k) {
    int i = p->order[k];
    pf_type* old = p->existing[i];
    if (old == NULL) {
      publish_locked(p->fresh[i], lib);
    } else if (old->dormant) {
      revive_locked(old, p->fresh[i], lib);
    } else if (lib != NULL && old->weak_lib != NULL) {
      old->weak_lib = lib; /* the newest load of its library (no code yet) */
    }
  }
  unlock();
  return rc;
}

int pf_types_register(const char* where, pf_object* lib, const PFObjectTypeDesc* const* descs,
                      int n, uint32_t** out) {
  *out = NULL;
  if (n == 0) return 0;
  /* What a commit leaves to do allocates nothing but the types' code. */
  uint32_t* indices = pf_malloc(sizeof(uint32_t) * (size_t)n);
  const pf_type** ready = pf_malloc(sizeof(pf_type*) * (size_t)n);
  if (indices == NULL || ready == NULL) {
    pf_free(indices);
    pf_free(ready);
    return pf_oom(where);
  }
  int rc;
  for (;;) {
    plan p = {n, NULL, NULL, NULL, NULL};
    rc = build_batch(where, &p, descs);
    if (rc == 0) rc = commit(where, &p, lib);
    if (rc == 0)
      for (int i = 0; i < n; ++i) {
        indices[i] = p.scope[i]->info.type_index;
        ready[i] = p.scope[i];
      }
    plan_free(&p, rc == 0); /* on success the new types are the table's */
    if (rc != 1) break;     /* 1: raced with another registration; plan again */
  }
  /* Types not from a library file are made ready at once, and so are the
   * registered ones that such a registration names again. */
  for (int i = 0; i < n && rc == 0 && lib == NULL; ++i) rc = pf_type_ready(where, ready[i]);
  pf_free(ready);
  if (rc != 0) {
    pf_free(indices);
    return -1;
  }
  *out = indices;
  return 0;
}

int PFObjectTypeRegister(const PFObjectTypeDesc* desc, uint32_t* out_type_index) {
  PF_CHECK_ARG(desc);
  PF_CHECK_ARG(out_type_index);
  uint32_t* indices = NULL;
  if (pf_types_register(__func__, NULL, &desc, 1, &indices) != 0) return -1;
  *out_type_index = indices[0];
  pf_free(indices);
  return 0;
}
