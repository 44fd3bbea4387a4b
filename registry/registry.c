/* The global name registry: one uthash table under a "big reader" lock.
 * Each thread reads under a lock of its own (one of READER_SLOTS, each on
 * its own cache line), and a writer takes all of them. So lookups from
 * different threads write no shared line but the function's reference
 * count, and scale across cores; registering and removing, which are rare,
 * pay for it. Uses only the public API (include/packedfunc), like any other
 * client of the runtime. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"

/* Names are hashed with XXH3, inlined: a lookup of a typical name costs a
 * few dozen instructions of hashing instead of the hundred and more of
 * uthash's default (Jenkins) hash, and XXH3's low bits, which pick the
 * bucket, are as good as its high ones. */
#define XXH_INLINE_ALL
#include <xxhash.h>
#define HASH_FUNCTION(keyptr, keylen, hashv) ((hashv) = (unsigned)XXH3_64bits((keyptr), (keylen)))

/* uthash allocates through the runtime's allocator and reports running out
 * of memory instead of exiting the process. */
static int g_hash_oom; /* set by uthash under the write lock */
#define uthash_malloc(sz) PFMemAlloc(sz)
#define uthash_free(ptr, sz) PFMemFree(ptr)
#define HASH_NONFATAL_OOM 1
#define uthash_nonfatal_oom(obj) (g_hash_oom = 1)
#include <uthash.h>
/* uthash doubles its buckets only when one chain reaches this many entries
 * (10 by default), so a lookup walks past a few entries, each a likely
 * cache miss when the names are many. 5 keeps chains shorter: a random
 * lookup among 10,000 names misses the first-level data cache 5.3 times
 * instead of 6.5 (cachegrind), for a few bytes of bucket per name; 3 makes
 * the bucket array itself too large to stay in cache. The macro is read
 * where HASH_ADD expands, below. */
#undef HASH_BKT_CAPACITY_THRESH
#define HASH_BKT_CAPACITY_THRESH 5U

typedef struct entry {
  UT_hash_handle hh;
  PFFunctionHandle func; /* the registry's own reference */
  int flags;
  char name[]; /* the key */
} entry;

/* A reader slot's lock: one atomic exchange to take it and a plain release
 * store to give it back, where a mutex costs two atomic operations and a
 * hundred and more instructions; a lookup is short enough that this is
 * most of its price. Readers of different slots never meet, so a reader
 * waits only for a writer (rare, and holding the slots briefly) or for a
 * reader sharing its slot (past READER_SLOTS threads); it spins a little
 * and then yields the processor, so a holder that was preempted gets to
 * run. No user code runs while one is held. */
typedef struct {
  _Alignas(64) atomic_int held;
} reader_slot;

__attribute__((noinline)) static void slot_wait(reader_slot* s) {
  for (unsigned spins = 0;; ++spins) {
    if (!atomic_load_explicit(&s->held, memory_order_relaxed) &&
        !atomic_exchange_explicit(&s->held, 1, memory_order_acquire))
      return;
    if (spins >= 64) sched_yield();
  }
}

static inline void slot_lock(reader_slot* s) {
  if (__builtin_expect(atomic_exchange_explicit(&s->held, 1, memory_order_acquire), 0))
    slot_wait(s);
}

static void slot_unlock(reader_slot* s) {
  atomic_store_explicit(&s->held, 0, memory_order_release);
}

/* 32 slots keep up to 32 reading threads apart; more share slots, still
 * correctly. */
#define READER_SLOTS 32
static reader_slot g_readers[READER_SLOTS];
static atomic_uint g_next_reader;
static _Thread_local int tls_reader_plus1 __attribute__((tls_model("initial-exec")));
static entry* g_table;
static atomic_int g_sealed;

static reader_slot* read_lock(void) {
  int r = tls_reader_plus1 - 1;
  if (r < 0) {
    r = (int)(atomic_fetch_add(&g_next_reader, 1) % READER_SLOTS);
    tls_reader_plus1 = r + 1;
  }
  slot_lock(&g_readers[r]);
  return &g_readers[r];
}

static void write_lock(void) {
  for (int i = 0; i < READER_SLOTS; ++i) slot_lock(&g_readers[i]);
}

static void write_unlock(void) {
  for (int i = READER_SLOTS - 1; i >= 0; --i) slot_unlock(&g_readers[i]);
}

/* fork(): a child has only the thread that forked, so a reader slot that
 * another thread held at that moment would stay locked in the child for
 * good. Before fork the forking thread takes every slot, as a
 * writer does, so that no other thread is inside the registry; after it,
 * parent and child each release them. The handlers are installed when the
 * library is loaded, before any registry use; handlers registered later
 * (e.g. a lock that is taken before calling into the registry) run their
 * prepare step first, which keeps lock order. */
static void fork_prepare(void) { write_lock(); }
static void fork_parent(void) { write_unlock(); }
static void fork_child(void) { write_unlock(); }

__attribute__((constructor)) static void registry_install_fork_handlers(void) {
  /* Fails only without memory at load time; fork then stays as unsafe as
   * it was before the handlers existed. */
  (void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* The error for a name that check_name refuses; returns -1. */
__attribute__((noinline, cold)) static long bad_name(const char* where, const char* name) {
  if (name == NULL) return PF_ERROR(kPFErrTypeError, "%s: argument 'name' is NULL", where);
  if (name[0] == '\0') return PF_ERROR(kPFErrValueError, "%s: argument 'name' is empty", where);
  return PF_ERROR(kPFErrValueError, "%s: argument 'name' is longer than %d bytes ('%.40s...')",
                  where, PF_NAME_MAX, name);
}

/* Validates a name argument; returns its length, or -1 with an error. */
static inline long check_name(const char* where, const char* name) {
  size_t n = name != NULL ? strnlen(name, PF_NAME_MAX + 1) : 0;
  if (__builtin_expect(n == 0 || n > PF_NAME_MAX, 0)) return bad_name(where, name);
  return (long)n;
}

/* What a change of the table found under the write lock. The lock only
 * decides; the error is recorded after it is released, because recording
 * allocates through the host's allocator, which is host code. */
typedef enum {
  CHANGE_OK,
  CHANGE_SEALED,
  CHANGE_PROTECTED,
  CHANGE_EXISTS,
  CHANGE_ABSENT,
  CHANGE_NO_MEMORY /* uthash could not grow; PFMemAlloc recorded the MemoryError */
} change_outcome;

/* Records the error of a refused change of `name` and returns -1 (0 for
 * CHANGE_OK). `verb` says what a protected name cannot be ("overridden",
 * "removed"); `hint` follows the message for a name already registered,
 * and `tail` every refusal but the seal's. */
static int change_error(change_outcome o, const char* where, const char* name, const char* verb,
                        const char* hint, const char* tail) {
  switch (o) {
    case CHANGE_OK:
      return 0;
    case CHANGE_SEALED:
      return PF_ERROR(kPFErrRuntimeError, "%s: the registry is sealed; '%s' cannot be changed",
                      where, name);
    case CHANGE_PROTECTED:
      return PF_ERROR(kPFErrRuntimeError, "%s: '%s' is protected and cannot be %s%s", where, name,
                      verb, tail);
    case CHANGE_EXISTS:
      return PF_ERROR(kPFErrKeyError, "%s: a function named '%s' is already registered%s%s", where,
                      name, hint, tail);
    case CHANGE_ABSENT:
      return PF_ERROR(kPFErrKeyError, "%s: no function named '%s' is registered", where, name);
    case CHANGE_NO_MEMORY:
      break;
  }
  return -1;
}

static int register_impl(const char* where, const char* name, PFFunctionHandle func, int flags) {
  long n = check_name(where, name);
  if (n < 0) return -1;
  uint32_t ti = 0;
  if (func == NULL || PFObjectGetTypeIndex(func, &ti) != 0 || ti != kPFObjectFunction)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'func' for '%s' is %s", where, name,
                    func ? "not a live function handle" : "NULL");
  if (flags & ~(kPFRegisterOverride | kPFRegisterProtected))
    return PF_ERROR(kPFErrValueError, "%s: argument 'flags' has unknown bits 0x%x", where,
                    (unsigned)flags);
  entry* fresh = PFMemAlloc(sizeof(entry) + (size_t)n + 1);
  if (fresh == NULL) return -1;
  memcpy(fresh->name, name, (size_t)n + 1);
  fresh->func = func;
  fresh->flags = flags & kPFRegisterProtected;
  PFFuncRetain(func);

  PFFunctionHandle drop = NULL; /* released after the lock is dropped */
  change_outcome outcome = CHANGE_OK;
  write_lock();
  entry* old = NULL;
  HASH_FIND(hh, g_table, name, (size_t)n, old);
  if (atomic_load(&g_sealed)) {
    outcome = CHANGE_SEALED;
  } else if (old != NULL && (old->flags & kPFRegisterProtected)) {
    outcome = CHANGE_PROTECTED;
  } else if (old != NULL && !(flags & kPFRegisterOverride)) {
    outcome = CHANGE_EXISTS;
  } else if (old != NULL) {
    drop = old->func;
    old->func = func;
    old->flags |= fresh->flags;
    fresh->func = NULL;
  } else {
    g_hash_oom = 0;
    HASH_ADD_KEYPTR(hh, g_table, fresh->name, (size_t)n, fresh);
    if (g_hash_oom) outcome = CHANGE_NO_MEMORY;
    else fresh = NULL; /* the table owns it now */
  }
  write_unlock();

  int rc = change_error(outcome, where, name, "overridden", " (pass override to replace it)", "");
  if (fresh != NULL) {
    if (rc != 0) drop = fresh->func;
    PFMemFree(fresh);
  }
  /* On failure `drop` is the reference taken above, and the caller still
   * holds its own: no finalizer can run here to replace the error. */
  PFFuncFree(drop);
  return rc;
}

int PFFuncRegisterGlobal(const char* name, PFFunctionHandle func, int override) {
  return register_impl("PFFuncRegisterGlobal", name, func, override ? kPFRegisterOverride : 0);
}

int PFFuncRegisterGlobalEx(const char* name, PFFunctionHandle func, int flags) {
  return register_impl("PFFuncRegisterGlobalEx", name, func, flags);
}

int PFFuncGetGlobal(const char* name, PFFunctionHandle* out) {
  static const char* const where = "PFFuncGetGlobal";
  long n = check_name(where, name);
  if (n < 0) return -1;
  if (out == NULL) return PF_ERROR(kPFErrTypeError, "%s: argument 'out' is NULL", where);
  entry* e = NULL;
  reader_slot* lock = read_lock();
  HASH_FIND(hh, g_table, name, (size_t)n, e);
  PFFunctionHandle f = e ? e->func : NULL;
  if (f) PFFuncRetain(f); /* before unlocking: an override can't free it */
  slot_unlock(lock);
  *out = f;
  return 0;
}

int PFFuncRemoveGlobal(const char* name) {
  static const char* const where = "PFFuncRemoveGlobal";
  long n = check_name(where, name);
  if (n < 0) return -1;
  entry* e = NULL;
  change_outcome outcome = CHANGE_OK;
  write_lock();
  HASH_FIND(hh, g_table, name, (size_t)n, e);
  if (atomic_load(&g_sealed)) outcome = CHANGE_SEALED;
  else if (e == NULL) outcome = CHANGE_ABSENT;
  else if (e->flags & kPFRegisterProtected) outcome = CHANGE_PROTECTED;
  else HASH_DEL(g_table, e);
  write_unlock();
  if (outcome != CHANGE_OK) return change_error(outcome, where, name, "removed", "", "");
  PFFuncFree(e->func);
  PFMemFree(e);
  return 0;
}

/* ---- exporting a module: every name under one write lock ---- */

int PFModExportGlobal(PFModuleHandle mod, const char* prefix, int flags) {
  static const char* const where = "PFModExportGlobal";
  uint32_t ti = 0;
  if (mod == NULL || PFObjectGetTypeIndex(mod, &ti) != 0 || ti != kPFObjectModule)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'mod' is %s", where,
                    mod ? "not a live module handle" : "NULL");
  if (flags & ~(kPFRegisterOverride | kPFRegisterProtected))
    return PF_ERROR(kPFErrValueError, "%s: argument 'flags' has unknown bits 0x%x", where,
                    (unsigned)flags);
  if (prefix == NULL) prefix = "";
  int n = 0;
  const char** names = NULL; /* the module's; valid while it lives */
  if (PFModListFunctionNames(mod, &n, &names) != 0) return -1;
  size_t plen = strlen(prefix);

  /* Everything that can fail without the lock is done first: the entries
   * (names and function references) are made outside it. */
  entry** fresh = PFMemAlloc(sizeof(*fresh) * (size_t)(n ? n : 1));
  if (fresh == NULL) return -1;
  int made = 0, rc = 0;
  for (; made < n && rc == 0; ++made) {
    size_t len = strlen(names[made]);
    if (plen + len > PF_NAME_MAX) {
      rc = PF_ERROR(kPFErrValueError,
                    "%s: argument 'prefix': '%.40s' + '%.40s' is longer than %d bytes", where,
                    prefix, names[made], PF_NAME_MAX);
      break;
    }
    entry* e = PFMemAlloc(sizeof(entry) + plen + len + 1);
    if (e == NULL) {
      rc = -1;
      break;
    }
    memcpy(e->name, prefix, plen);
    memcpy(e->name + plen, names[made], len + 1);
    e->flags = flags & kPFRegisterProtected;
    e->func = NULL;
    fresh[made] = e;
    if (PFModGetFunction(mod, names[made], 0, &e->func) != 0 || e->func == NULL) {
      if (e->func == NULL && PFErrorGetKind()[0] == '\0')
        PF_ERROR(kPFErrRuntimeError, "%s: the module lost its function '%s'", where, names[made]);
      rc = -1;
      ++made;
      break;
    }
  }

  /* All or nothing under one lock: check every name, then insert them all;
   * no other thread can see a part of a failed export. */
  PFFunctionHandle* dropped = NULL; /* functions that an override replaced */
  if (rc == 0 && (flags & kPFRegisterOverride)) {
    dropped = PFMemAlloc(sizeof(*dropped) * (size_t)(n ? n : 1));
    if (dropped == NULL) rc = -1;
    else memset(dropped, 0, sizeof(*dropped) * (size_t)(n ? n : 1));
  }
  if (rc == 0) {
    change_outcome outcome = CHANGE_OK;
    int bad = 0; /* the entry of fresh that was refused */
    write_lock();
    if (atomic_load(&g_sealed)) outcome = CHANGE_SEALED;
    for (int i = 0; i < n && outcome == CHANGE_OK; ++i) {
      entry* old = NULL;
      HASH_FIND(hh, g_table, fresh[i]->name, strlen(fresh[i]->name), old);
      if (old != NULL && (old->flags & kPFRegisterProtected)) outcome = CHANGE_PROTECTED;
      else if (old != NULL && !(flags & kPFRegisterOverride)) outcome = CHANGE_EXISTS;
      bad = i;
    }
    /* New names first: their insertion is the only step that can fail
     * (uthash growing its buckets), and it is undone by deleting them. */
    g_hash_oom = 0;
    for (int i = 0; i < n && outcome == CHANGE_OK; ++i) {
      entry* old = NULL;
      size_t len = strlen(fresh[i]->name);
      HASH_FIND(hh, g_table, fresh[i]->name, len, old);
      if (old != NULL) continue;
      HASH_ADD_KEYPTR(hh, g_table, fresh[i]->name, len, fresh[i]);
      if (g_hash_oom) {
        outcome = CHANGE_NO_MEMORY;
        for (int j = 0; j < i; ++j) {
          entry* e = NULL;
          HASH_FIND(hh, g_table, fresh[j]->name, strlen(fresh[j]->name), e);
          if (e == fresh[j]) HASH_DEL(g_table, e);
        }
        break;
      }
    }
    /* Then the overrides, which cannot fail. */
    for (int i = 0; i < n && outcome == CHANGE_OK; ++i) {
      entry* old = NULL;
      HASH_FIND(hh, g_table, fresh[i]->name, strlen(fresh[i]->name), old);
      if (old == fresh[i]) {
        fresh[i] = NULL; /* the table owns it now */
        continue;
      }
      dropped[i] = old->func;
      old->func = fresh[i]->func;
      old->flags |= fresh[i]->flags;
      fresh[i]->func = NULL;
    }
    write_unlock();
    /* A refused name is the same as the entry made for it (still ours: on
     * a refusal none went into the table). */
    if (outcome == CHANGE_NO_MEMORY) rc = PF_ERROR(kPFErrMemoryError, "%s: out of memory", where);
    else if (outcome != CHANGE_OK)
      rc = change_error(outcome, where, n ? fresh[bad]->name : prefix, "overridden", "",
                        "; nothing from the module was exported");
  }

  /* Outside the lock. On failure only references the module also holds
   * are dropped, so no finalizer can run and replace the error; on
   * success the functions an override replaced may finalize here. */
  for (int i = 0; i < made; ++i) {
    if (fresh[i] == NULL) continue;
    PFFuncFree(fresh[i]->func);
    PFMemFree(fresh[i]);
  }
  if (dropped != NULL && rc == 0)
    for (int i = 0; i < n; ++i) PFFuncFree(dropped[i]);
  PFMemFree(dropped);
  PFMemFree(fresh);
  return rc;
}

/* ---- name lists: one block per thread, reused ---- */

static _Thread_local void* tls_names;
static pthread_key_t names_key;
static pthread_once_t names_once = PTHREAD_ONCE_INIT;
static int names_key_ok;

/* Frees a thread's name block when the thread exits. The pointer is reset
 * too: a destructor of another thread-specific key may run later in the
 * same exit and list names again, which must not free the block twice
 * (its new block is then freed by a later round of destructors). */
static void names_free(void* p) {
  if (tls_names == p) tls_names = NULL;
  PFMemFree(p);
}
static void names_make_key(void) { names_key_ok = pthread_key_create(&names_key, names_free) == 0; }

static int cmp_names(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

static int list_names(const char* where, const char* prefix, int* out_size,
                      const char*** out_array) {
  if (out_size == NULL || out_array == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: argument '%s' is NULL", where,
                    out_size == NULL ? "out_size" : "out_array");
  size_t plen = prefix ? strlen(prefix) : 0;
  size_t count = 0, bytes = 0;
  char* block = NULL;
  /* Measure under the lock, allocate outside it (the allocator is host
   * code), and measure again in case the table grew meanwhile. */
  for (;;) {
    size_t need_count = 0, need_bytes = 0;
    reader_slot* lock = read_lock();
    for (entry* e = g_table; e != NULL; e = e->hh.next) {
      if (plen && strncmp(e->name, prefix, plen) != 0) continue;
      need_count++;
      need_bytes += strlen(e->name) + 1;
    }
    if (block != NULL && need_count <= count && need_bytes <= bytes) {
      const char** arr = (const char**)block;
      char* p = block + sizeof(char*) * (count + 1);
      size_t i = 0;
      for (entry* e = g_table; e != NULL; e = e->hh.next) {
        if (plen && strncmp(e->name, prefix, plen) != 0) continue;
        size_t l = strlen(e->name) + 1;
        memcpy(p, e->name, l);
        arr[i++] = p;
        p += l;
      }
      arr[i] = NULL;
      slot_unlock(lock);
      count = i;
      break;
    }
    slot_unlock(lock);
    PFMemFree(block);
    block = NULL;
    /* The count must fit *out_size, and the block size must not wrap: both
     * are checked before the arithmetic (with slack for names added while
     * the lock is not held). */
    if (need_count > (size_t)INT32_MAX - 16)
      return PF_ERROR(kPFErrRuntimeError, "%s: too many names (%zu)", where, need_count);
    count = need_count + 16;
    bytes = need_bytes + 16 * 64;
    if (bytes < need_bytes || count + 1 > (SIZE_MAX - bytes) / sizeof(char*))
      return PF_ERROR(kPFErrMemoryError, "%s: the names need more memory than can be allocated",
                      where);
    block = PFMemAlloc(sizeof(char*) * (count + 1) + bytes);
    if (block == NULL) return -1;
  }
  qsort(block, count, sizeof(char*), cmp_names);
  pthread_once(&names_once, names_make_key);
  PFMemFree(tls_names);
  tls_names = block;
  if (names_key_ok) pthread_setspecific(names_key, block);
  *out_size = (int)count;
  *out_array = (const char**)block;
  return 0;
}

int PFFuncListGlobalNamesWithPrefix(const char* prefix, int* out_size, const char*** out_array) {
  return list_names("PFFuncListGlobalNamesWithPrefix", prefix, out_size, out_array);
}

int PFFuncListGlobalNames(int* out_size, const char*** out_array) {
  return list_names("PFFuncListGlobalNames", NULL, out_size, out_array);
}

int PFRegistrySeal(void) {
  atomic_store(&g_sealed, 1);
  return 0;
}

int PFRegistryIsSealed(int* out) {
  if (out == NULL) return PF_ERROR(kPFErrTypeError, "PFRegistryIsSealed: argument 'out' is NULL");
  *out = atomic_load(&g_sealed);
  return 0;
}
