/* Containers: Array, Map and Shape. Each is one allocation, immutable once
 * created, so readers need no lock. The rules are in c_api.h. */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "internal.h"

/* ---- keeping values ---- */

/* What a container's values need beyond their PFValue slots: a PFByteArray
 * per bytes value, and room for the characters of str and bytes values. */
typedef struct {
  size_t num_bytes;
  size_t chars;
} store_need;

/* Where the next copied PFByteArray and characters go. */
typedef struct {
  PFByteArray* bytes;
  char* chars;
} store_cursor;

/* Counts `n` more bytes of characters; -1 past the largest object. */
static int need_chars(store_need* need, size_t n) {
  if (n > PF_MAX_OBJECT_SIZE - need->chars) return -1;
  need->chars += n;
  return 0;
}

/* A total that no object can have is the caller's input at fault, as a
 * count no container can hold is: a ValueError, not a MemoryError. */
static int too_large(const char* where) {
  return PF_ERROR(kPFErrValueError,
                  "%s: the values need more memory than any object can have "
                  "(PTRDIFF_MAX bytes)",
                  where);
}

/* Checks one value that a container is to keep, as PFFuncCall checks an
 * argument, and counts what keeping it needs. */
static inline int check_item(const char* where, const char* what, int64_t i, int code,
                             const PFValue* v, store_need* need) {
  /* A plain code (an int, a float...): any bits are valid, nothing to count
   * (the common case, without the call). */
  if ((unsigned)code < PF_PLAIN_PREFIX) return 0;
  if (pf_check_value(where, what, i, code, v) != 0) return -1;
  if (code == kPFDLTensorHandle)
    return PF_ERROR(kPFErrTypeError,
                    "%s: %s %lld has type code tensor, a DLTensor* that is only borrowed "
                    "for a call, which a container cannot keep (store a tensor object "
                    "instead)",
                    where, what, (long long)i);
  if (code == kPFStr) {
    if (need_chars(need, strlen(v->v_str) + 1) != 0) return too_large(where);
  } else if (code == kPFBytes) {
    /* pf_check_value bounded the size by PF_MAX_OBJECT_SIZE. */
    if (need_chars(need, ((const PFByteArray*)v->v_handle)->size) != 0) return too_large(where);
    ++need->num_bytes;
  }
  return 0;
}

/* Copies a checked value into the container: str and bytes into its own
 * memory, a reference for a handle, everything else as it is. */
static inline void store_item(store_cursor* cur, int code, const PFValue* in, PFValue* out) {
  if ((unsigned)code < PF_PLAIN_PREFIX) {
    *out = *in;
  } else if (code == kPFStr) {
    size_t n = strlen(in->v_str) + 1;
    memcpy(cur->chars, in->v_str, n);
    out->v_str = cur->chars;
    cur->chars += n;
  } else if (code == kPFBytes) {
    const PFByteArray* src = in->v_handle;
    PFByteArray* dst = cur->bytes++;
    dst->data = cur->chars;
    dst->size = src->size;
    if (src->size) memcpy(cur->chars, src->data, src->size);
    cur->chars += src->size;
    out->v_handle = dst;
  } else {
    *out = *in;
    if (pf_code_is_handle(code)) pf_object_retain(in->v_handle);
  }
}

static void release_item(int code, PFValue* v) {
  /* Inside a destroy: a nested container's destruction is queued by
   * pf_object_release, not recursed into. */
  if (pf_code_is_handle(code)) pf_object_release(v->v_handle);
}

/* Sizes that callers pass are checked before arithmetic: a count above
 * this limit cannot describe arrays that exist, and below it no layout
 * offset computed here can wrap a size_t (an item takes at most 96 bytes
 * of layout, a map entry with its slots and bytes included); each total is
 * then checked against the largest object. */
#define MAX_ITEMS ((int64_t)(PF_MAX_OBJECT_SIZE / 64))

static int check_count(const char* where, const char* arg, int64_t n, const char* what) {
  if (n < 0)
    return PF_ERROR(kPFErrValueError, "%s: argument '%s' is negative (%lld)", where, arg,
                    (long long)n);
  if (n > MAX_ITEMS)
    return PF_ERROR(kPFErrValueError, "%s: argument '%s' is %lld, more than any %s can hold", where,
                    arg, (long long)n, what);
  return 0;
}

static int null_with_count(const char* where, const char* arg, const char* count, int64_t n) {
  return PF_ERROR(kPFErrTypeError, "%s: argument '%s' is NULL with %s %lld", where, arg, count,
                  (long long)n);
}

static int index_error(const char* where, int64_t index, int64_t size, const char* what) {
  return PF_ERROR(kPFErrIndexError,
                  "%s: argument 'index' is %lld, out of range for %s of size %lld", where,
                  (long long)index, what, (long long)size);
}

/* Rounds up to a multiple of 8 (every part of a container is 8-aligned:
 * PFValue, PFByteArray and int64 need no more). */
static size_t align8(size_t n) { return (n + 7u) & ~(size_t)7u; }

/* ---- Array ---- */

typedef struct {
  pf_object base;
  int64_t size;
  PFValue* values;
  int32_t* codes;
} pf_array;

void pf_array_view(PFObjectHandle array, int64_t* size, const PFValue** values,
                   const int32_t** codes) {
  const pf_array* a = array;
  *size = a->size;
  *values = a->values;
  *codes = a->codes;
}

static void array_destroy(pf_object* o) {
  pf_array* a = (pf_array*)o;
  for (int64_t i = 0; i < a->size; ++i) release_item(a->codes[i], &a->values[i]);
  pf_free(a);
}

int PFArrayCreate(const PFValue* values, const int* type_codes, int64_t size, PFObjectHandle* out) {
  static const char* const where = "PFArrayCreate";
  PF_CHECK_ARG(out);
  if (check_count(where, "size", size, "array") != 0) return -1;
  if (size > 0 && values == NULL) return null_with_count(where, "values", "size", size);
  if (size > 0 && type_codes == NULL) return null_with_count(where, "type_codes", "size", size);
  store_need need = {0, 0};
  for (int64_t i = 0; i < size; ++i)
    if (check_item(where, "value", i, type_codes[i], &values[i], &need) != 0) return -1;
  size_t n = (size_t)size;
  size_t off_values = align8(sizeof(pf_array));
  size_t off_bytes = off_values + n * sizeof(PFValue);
  size_t off_codes = off_bytes + need.num_bytes * sizeof(PFByteArray);
  size_t off_chars = off_codes + align8(n * sizeof(int32_t));
  if (off_chars > PF_MAX_OBJECT_SIZE || need.chars > PF_MAX_OBJECT_SIZE - off_chars)
    return too_large(where);
  char* block = pf_malloc(off_chars + need.chars);
  if (block == NULL) return pf_oom(where);
  pf_array* a = (pf_array*)block;
  pf_object_init(&a->base, kPFObjectArray, array_destroy);
  a->size = size;
  a->values = (PFValue*)(block + off_values);
  a->codes = (int32_t*)(block + off_codes);
  store_cursor cur = {(PFByteArray*)(block + off_bytes), block + off_chars};
  for (size_t i = 0; i < n; ++i) {
    a->codes[i] = type_codes[i];
    store_item(&cur, type_codes[i], &values[i], &a->values[i]);
  }
  *out = a;
  return 0;
}

int PFArrayGetSize(PFObjectHandle array, int64_t* out) {
  PF_CHECK_OBJECT(array, kPFObjectArray);
  PF_CHECK_ARG(out);
  *out = ((const pf_array*)array)->size;
  return 0;
}

int PFArrayGetItem(PFObjectHandle array, int64_t index, PFValue* out, int* out_type_code) {
  PF_CHECK_OBJECT(array, kPFObjectArray);
  PF_CHECK_ARG(out);
  PF_CHECK_ARG(out_type_code);
  const pf_array* a = array;
  if (index < 0 || index >= a->size) return index_error(__func__, index, a->size, "an array");
  *out = a->values[index];
  *out_type_code = a->codes[index];
  return 0;
}

/* start and count of a bulk read: count >= 0 (ValueError), and the range
 * [start, start + count) inside [0, size] (IndexError). */
static int check_range(const char* where, int64_t start, int64_t count, int64_t size,
                       const char* what) {
  if (count < 0)
    return PF_ERROR(kPFErrValueError, "%s: argument 'count' is negative (%lld)", where,
                    (long long)count);
  if (start < 0 || start > size || count > size - start)
    return PF_ERROR(kPFErrIndexError,
                    "%s: the range of start %lld and count %lld is out of range for %s of size "
                    "%lld",
                    where, (long long)start, (long long)count, what, (long long)size);
  return 0;
}

int PFArrayGetItems(PFObjectHandle array, int64_t start, int64_t count, PFValue* values,
                    int* codes) {
  PF_CHECK_OBJECT(array, kPFObjectArray);
  const pf_array* a = array;
  if (count > 0 && values == NULL) return null_with_count(__func__, "values", "count", count);
  if (count > 0 && codes == NULL) return null_with_count(__func__, "codes", "count", count);
  if (check_range(__func__, start, count, a->size, "an array") != 0) return -1;
  if (count == 0) return 0;
  memcpy(values, a->values + start, (size_t)count * sizeof(PFValue));
  for (int64_t i = 0; i < count; ++i) codes[i] = a->codes[start + i];
  return 0;
}

int pf_array_children(pf_walk* w, const void* array) {
  const pf_array* a = array;
  if (pf_walk_spend(w, a->size) != 0) return -1;
  for (int64_t i = 0; i < a->size; ++i)
    if (pf_code_is_handle(a->codes[i]) && pf_walk_child(w, a->values[i].v_handle) != 0) return -1;
  return 0;
}

/* ---- Map ---- */

typedef struct {
  PFValue key, value;
  int32_t key_code, value_code;
  uint64_t hash;
} map_entry;

/* Entries in the order given, and an open-addressing index over them:
 * `slots` has mask + 1 (a power of two, at least twice the size) places,
 * each 0 or an entry's position + 1, probed linearly. The keyed hash
 * below keeps the runs short whichever keys a caller picks: at most half
 * full, a probe takes at most 2.5 steps on average. */
typedef struct {
  pf_object base;
  int64_t size;
  size_t mask;
  map_entry* entries;
  uint64_t* slots;
} pf_map;

/* ---- the keyed hash ----
 * Keys come from callers, and through any exposed function from remote
 * clients: with a hash they can predict, they could pick keys that all
 * land in one run of the index and make PFMapCreate quadratic. So keys are
 * hashed with XXH3 under a seed drawn from the kernel once per process
 * (kept across fork: maps made before a fork are used after it). */

static pthread_once_t g_seed_once = PTHREAD_ONCE_INIT;
static uint64_t g_seed;

static void seed_init(void) {
  uint64_t seed = 0;
  ssize_t got;
  do {
    got = getrandom(&seed, sizeof(seed), GRND_NONBLOCK);
  } while (got < 0 && errno == EINTR);
  if (got != (ssize_t)sizeof(seed)) {
    /* No entropy from the kernel (a seccomp filter, a kernel before 3.17,
     * early boot): what this process alone knows (the addresses that ASLR
     * picked, the time, the pid) is a weaker secret, but still one. */
    struct timespec ts[2];
    clock_gettime(CLOCK_REALTIME, &ts[0]);
    clock_gettime(CLOCK_MONOTONIC, &ts[1]);
    uintptr_t bits[5] = {(uintptr_t)&seed, (uintptr_t)&g_seed, (uintptr_t)getpid(),
                         (uintptr_t)ts[0].tv_nsec, (uintptr_t)ts[1].tv_nsec};
    seed = XXH3_64bits_withSeed(bits, sizeof(bits), (uint64_t)ts[0].tv_sec);
  }
  g_seed = seed;
}

uint64_t pf_hash_seed(void) {
  pthread_once(&g_seed_once, seed_init);
  return g_seed;
}

static uint64_t hash_key(uint64_t seed, int code, const PFValue* k) {
  if (code == kPFInt) return XXH3_64bits_withSeed(&k->v_int64, sizeof(k->v_int64), seed);
  return XXH3_64bits_withSeed(k->v_str, strlen(k->v_str), seed);
}

static int key_equal(const map_entry* e, uint64_t hash, int code, const PFValue* k) {
  if (e->hash != hash || e->key_code != code) return 0;
  return code == kPFInt ? e->key.v_int64 == k->v_int64 : strcmp(e->key.v_str, k->v_str) == 0;
}

/* The entry with key `k`, or NULL. */
static const map_entry* map_find(const pf_map* m, int code, const PFValue* k) {
  if (m->size == 0) return NULL;
  uint64_t h = hash_key(pf_hash_seed(), code, k);
  for (size_t i = (size_t)h & m->mask;; i = (i + 1) & m->mask) {
    uint64_t s = m->slots[i];
    if (s == 0) return NULL;
    const map_entry* e = &m->entries[s - 1];
    if (key_equal(e, h, code, k)) return e;
  }
}

static void map_destroy(pf_object* o) {
  pf_map* m = (pf_map*)o;
  /* Only values hold references: keys are str or int. */
  for (int64_t i = 0; i < m->size; ++i)
    release_item(m->entries[i].value_code, &m->entries[i].value);
  pf_free(m);
}

int pf_map_children(pf_walk* w, const void* map) {
  const pf_map* m = map;
  /* Keys are str or int: only values hold references. */
  if (pf_walk_spend(w, m->size) != 0) return -1;
  for (int64_t i = 0; i < m->size; ++i) {
    const map_entry* e = &m->entries[i];
    if (pf_code_is_handle(e->value_code) && pf_walk_child(w, e->value.v_handle) != 0) return -1;
  }
  return 0;
}

static int key_type_error(const char* where, const char* what, int64_t i, int code) {
  const char* name = PFTypeCodeName(code);
  if (name == NULL || code >= kPFExtBegin)
    return PF_ERROR(kPFErrTypeError, "%s: %s %lld has %s type code %d; map keys are str or int",
                    where, what, (long long)i, name ? "extension" : "unknown", code);
  return PF_ERROR(kPFErrTypeError, "%s: %s %lld has type code %s; map keys are str or int", where,
                  what, (long long)i, name);
}

int PFMapCreate(const PFValue* keys, const int* key_codes, const PFValue* values,
                const int* value_codes, int64_t size, PFObjectHandle* out) {
  static const char* const where = "PFMapCreate";
  PF_CHECK_ARG(out);
  if (check_count(where, "size", size, "map") != 0) return -1;
  if (size > 0) {
    if (keys == NULL) return null_with_count(where, "keys", "size", size);
    if (key_codes == NULL) return null_with_count(where, "key_codes", "size", size);
    if (values == NULL) return null_with_count(where, "values", "size", size);
    if (value_codes == NULL) return null_with_count(where, "value_codes", "size", size);
  }
  store_need need = {0, 0};
  for (int64_t i = 0; i < size; ++i) {
    if (key_codes[i] != kPFStr && key_codes[i] != kPFInt)
      return key_type_error(where, "key", i, key_codes[i]);
    if (check_item(where, "key", i, key_codes[i], &keys[i], &need) != 0) return -1;
    if (check_item(where, "value", i, value_codes[i], &values[i], &need) != 0) return -1;
  }
  size_t n = (size_t)size;
  size_t cap = n ? 2 : 0; /* at most half full: probes stay short and end */
  while (cap && cap < 2 * n) cap *= 2;
  size_t off_entries = align8(sizeof(pf_map));
  size_t off_slots = off_entries + n * sizeof(map_entry);
  size_t off_bytes = off_slots + cap * sizeof(uint64_t);
  size_t off_chars = off_bytes + need.num_bytes * sizeof(PFByteArray);
  if (off_chars > PF_MAX_OBJECT_SIZE || need.chars > PF_MAX_OBJECT_SIZE - off_chars)
    return too_large(where);
  char* block = pf_malloc(off_chars + need.chars);
  if (block == NULL) return pf_oom(where);
  pf_map* m = (pf_map*)block;
  m->mask = cap ? cap - 1 : 0;
  m->entries = (map_entry*)(block + off_entries);
  m->slots = (uint64_t*)(block + off_slots);
  if (cap) memset(m->slots, 0, cap * sizeof(uint64_t));
  store_cursor cur = {(PFByteArray*)(block + off_bytes), block + off_chars};
  uint64_t seed = n ? pf_hash_seed() : 0;
  /* Keys first: a repeated key is found before any value is retained, so
   * the error path only frees the block. */
  for (size_t i = 0; i < n; ++i) {
    map_entry* e = &m->entries[i];
    e->key_code = key_codes[i];
    const char* chars = cur.chars;
    store_item(&cur, key_codes[i], &keys[i], &e->key);
    /* A str key's length is what its copy took, less the NUL: no strlen. */
    e->hash = e->key_code == kPFStr
                  ? XXH3_64bits_withSeed(e->key.v_str, (size_t)(cur.chars - chars) - 1, seed)
                  : hash_key(seed, e->key_code, &e->key);
    size_t j = (size_t)e->hash & m->mask;
    for (; m->slots[j] != 0; j = (j + 1) & m->mask) {
      const map_entry* o = &m->entries[m->slots[j] - 1];
      if (!key_equal(o, e->hash, e->key_code, &e->key)) continue;
      int64_t first = (int64_t)(m->slots[j] - 1);
      if (e->key_code == kPFInt)
        PF_ERROR(kPFErrValueError, "%s: key %zu (%lld) repeats key %lld", where, i,
                 (long long)e->key.v_int64, (long long)first);
      else
        PF_ERROR(kPFErrValueError, "%s: key %zu ('%.200s') repeats key %lld", where, i,
                 e->key.v_str, (long long)first);
      pf_free(block);
      return -1;
    }
    m->slots[j] = (uint64_t)i + 1;
  }
  for (size_t i = 0; i < n; ++i) {
    map_entry* e = &m->entries[i];
    e->value_code = value_codes[i];
    store_item(&cur, value_codes[i], &values[i], &e->value);
  }
  m->size = size;
  pf_object_init(&m->base, kPFObjectMap, map_destroy);
  *out = m;
  return 0;
}

int PFMapGetSize(PFObjectHandle map, int64_t* out) {
  PF_CHECK_OBJECT(map, kPFObjectMap);
  PF_CHECK_ARG(out);
  *out = ((const pf_map*)map)->size;
  return 0;
}

int PFMapGetItem(PFObjectHandle map, PFValue key, int key_code, PFValue* out, int* out_type_code,
                 int* found) {
  PF_CHECK_OBJECT(map, kPFObjectMap);
  PF_CHECK_ARG(out);
  PF_CHECK_ARG(out_type_code);
  PF_CHECK_ARG(found);
  if (key_code != kPFStr && key_code != kPFInt) {
    const char* name = PFTypeCodeName(key_code);
    if (name == NULL || key_code >= kPFExtBegin)
      return PF_ERROR(kPFErrTypeError,
                      "%s: argument 'key_code' is %s type code %d; map keys are str or int",
                      __func__, name ? "the extension" : "the unknown", key_code);
    return PF_ERROR(kPFErrTypeError, "%s: argument 'key_code' is %s; map keys are str or int",
                    __func__, name);
  }
  if (key_code == kPFStr && key.v_str == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'key' has type code str but a NULL pointer",
                    __func__);
  const map_entry* e = map_find(map, key_code, &key);
  if (e == NULL) {
    out->v_int64 = 0;
    *out_type_code = kPFNull;
    *found = 0;
    return 0;
  }
  *out = e->value;
  *out_type_code = e->value_code;
  *found = 1;
  return 0;
}

int PFMapGetItemAt(PFObjectHandle map, int64_t index, PFValue* key, int* key_code, PFValue* value,
                   int* value_code) {
  PF_CHECK_OBJECT(map, kPFObjectMap);
  PF_CHECK_ARG(key);
  PF_CHECK_ARG(key_code);
  PF_CHECK_ARG(value);
  PF_CHECK_ARG(value_code);
  const pf_map* m = map;
  if (index < 0 || index >= m->size) return index_error(__func__, index, m->size, "a map");
  const map_entry* e = &m->entries[index];
  *key = e->key;
  *key_code = e->key_code;
  *value = e->value;
  *value_code = e->value_code;
  return 0;
}

int PFMapGetItems(PFObjectHandle map, int64_t start, int64_t count, PFValue* keys, int* key_codes,
                  PFValue* values, int* value_codes) {
  PF_CHECK_OBJECT(map, kPFObjectMap);
  const pf_map* m = map;
  if (count > 0) {
    if ((keys == NULL) != (key_codes == NULL))
      return null_with_count(__func__, keys == NULL ? "keys" : "key_codes", "count", count);
    if ((values == NULL) != (value_codes == NULL))
      return null_with_count(__func__, values == NULL ? "values" : "value_codes", "count", count);
    if (keys == NULL && values == NULL)
      return PF_ERROR(kPFErrTypeError,
                      "%s: arguments 'keys' and 'values' are both NULL with count %lld: "
                      "nothing to read",
                      __func__, (long long)count);
  }
  if (check_range(__func__, start, count, m->size, "a map") != 0) return -1;
  for (int64_t i = 0; i < count; ++i) {
    const map_entry* e = &m->entries[start + i];
    if (keys != NULL) {
      keys[i] = e->key;
      key_codes[i] = e->key_code;
    }
    if (values != NULL) {
      values[i] = e->value;
      value_codes[i] = e->value_code;
    }
  }
  return 0;
}

/* ---- Shape ---- */

typedef struct {
  pf_object base;
  int64_t ndim;
  int64_t dims[];
} pf_shape;

static void shape_destroy(pf_object* o) { pf_free(o); }

int PFShapeCreate(const int64_t* dims, int64_t ndim, PFObjectHandle* out) {
  static const char* const where = "PFShapeCreate";
  PF_CHECK_ARG(out);
  if (check_count(where, "ndim", ndim, "shape") != 0) return -1;
  if (ndim > 0 && dims == NULL) return null_with_count(where, "dims", "ndim", ndim);
  size_t n = (size_t)ndim;
  pf_shape* s = pf_malloc(sizeof(pf_shape) + n * sizeof(int64_t));
  if (s == NULL) return pf_oom(where);
  pf_object_init(&s->base, kPFObjectShape, shape_destroy);
  s->ndim = ndim;
  if (n) memcpy(s->dims, dims, n * sizeof(int64_t));
  *out = s;
  return 0;
}

int PFShapeGetData(PFObjectHandle shape, const int64_t** dims, int64_t* ndim) {
  PF_CHECK_OBJECT(shape, kPFObjectShape);
  PF_CHECK_ARG(dims);
  PF_CHECK_ARG(ndim);
  const pf_shape* s = shape;
  *dims = s->dims;
  *ndim = s->ndim;
  return 0;
}
