/* Dict: kept keys and values in insertion order under a lock of its own,
 * shared by readers (see pf_kept_lock_init), with an open-addressing index over them keyed by the process's random
 * hash seed. The rules (which keys are equal) are in container.h. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>

#include <xxhash.h>

#include "internal.h"

/* A removed entry's key_code; it stays in `entries` until the next resize. */
#define REMOVED (-1)

typedef struct {
  PFValue key, value;
  int key_code, value_code;
  uint64_t hash;
} dict_entry;

/* `entries` holds `used` entries (`size` live ones, the others REMOVED) in
 * insertion order, with room for `cap`. `slots` (mask + 1 places, a power
 * of two, at least twice cap, so at most half full and probes end) holds 0
 * or a live entry's position + 1, probed linearly from its hash. */
typedef struct {
  pf_object base;
  pthread_rwlock_t lock;
  int64_t size, used, cap;
  dict_entry* entries;
  int64_t* slots;
  size_t mask;
} pf_dict;

/* ---- keys ---- */

/* Keys of different classes are never equal; within a class, `i`, `d` or
 * the bytes at `p` (n of them) decide. Numbers that are whole and fit an
 * int64 are NUM_INT whatever their code, so 1, true and 1.0 meet. */
enum { K_NUM_INT, K_NUM_FLOAT, K_STR, K_BYTES, K_NULL, K_DTYPE, K_DEVICE, K_PTR, K_OBJECT };

typedef struct {
  int cls;
  int64_t i;
  double d;
  const void* p;
  size_t n;
} key_view;

/* 1 for the type codes a key may have: every built-in code a Dict keeps,
 * no extension code. */
static int key_code_ok(int code) {
  return (unsigned)code < kPFTypeCodeEnd && code != kPFDLTensorHandle;
}

static void view_of(int code, const PFValue* k, key_view* out) {
  memset(out, 0, sizeof(*out));
  switch (code) {
    case kPFInt:
      out->cls = K_NUM_INT;
      out->i = k->v_int64;
      break;
    case kPFBool:
      out->cls = K_NUM_INT;
      out->i = k->v_int64 != 0;
      break;
    case kPFFloat: {
      double x = k->v_float64;
      /* In this range the conversion is defined; it is exact for a whole x. */
      if (x >= -9223372036854775808.0 && x < 9223372036854775808.0 && (double)(int64_t)x == x) {
        out->cls = K_NUM_INT;
        out->i = (int64_t)x;
      } else {
        out->cls = K_NUM_FLOAT;
        out->d = x;
      }
      break;
    }
    case kPFNull:
      out->cls = K_NULL;
      break;
    case kPFDataType:
      out->cls = K_DTYPE;
      out->i = k->v_type.code | (int64_t)k->v_type.bits << 8 | (int64_t)k->v_type.lanes << 16;
      break;
    case kPFDevice:
      out->cls = K_DEVICE;
      out->i = (int64_t)((uint64_t)(uint32_t)k->v_device.device_type |
                         (uint64_t)(uint32_t)k->v_device.device_id << 32);
      break;
    case kPFOpaqueHandle:
      out->cls = K_PTR;
      out->p = k->v_handle;
      break;
    case kPFStr:
      out->cls = K_STR;
      out->p = k->v_str;
      out->n = strlen(k->v_str);
      break;
    case kPFBytes: {
      const PFByteArray* b = k->v_handle;
      out->cls = K_BYTES;
      out->p = b->data;
      out->n = b->size;
      break;
    }
    default:
      out->cls = K_OBJECT;
      out->p = k->v_handle;
      break; /* the handle codes */
  }
}

static uint64_t hash_view(const key_view* k) {
  uint64_t seed = pf_hash_seed() + (uint64_t)k->cls * 0x9e3779b97f4a7c15ull;
  switch (k->cls) {
    case K_NUM_FLOAT:
      return XXH3_64bits_withSeed(&k->d, sizeof(k->d), seed);
    case K_STR:
    case K_BYTES:
      return XXH3_64bits_withSeed(k->p, k->n, seed);
    case K_PTR:
    case K_OBJECT:
      return XXH3_64bits_withSeed(&k->p, sizeof(k->p), seed);
    default:
      return XXH3_64bits_withSeed(&k->i, sizeof(k->i), seed);
  }
}

static int view_equal(const key_view* a, const key_view* b) {
  if (a->cls != b->cls) return 0;
  switch (a->cls) {
    case K_NUM_FLOAT:
      return a->d == b->d;
    case K_STR:
    case K_BYTES:
      return a->n == b->n && (a->n == 0 || memcmp(a->p, b->p, a->n) == 0);
    case K_NULL:
      return 1;
    case K_PTR:
    case K_OBJECT:
      return a->p == b->p;
    default:
      return a->i == b->i;
  }
}

/* A short text of a key for messages. */
static const char* key_text(int code, const PFValue* k, char* buf, size_t n) {
  switch (code) {
    case kPFStr:
      snprintf(buf, n, "'%.200s'", k->v_str);
      break;
    case kPFInt:
      snprintf(buf, n, "%lld", (long long)k->v_int64);
      break;
    case kPFBool:
      snprintf(buf, n, "%s", k->v_int64 ? "true" : "false");
      break;
    case kPFFloat:
      snprintf(buf, n, "%.17g", k->v_float64);
      break;
    case kPFBytes:
      snprintf(buf, n, "bytes of size %zu", ((const PFByteArray*)k->v_handle)->size);
      break;
    default:
      snprintf(buf, n, "of type code %s", PFTypeCodeName(code));
      break;
  }
  return buf;
}

/* Checks a key: its type code, its value as PFFuncCall checks one, and
 * NaN: refused (ValueError) when `lookup` is 0, otherwise reported by
 * returning 1 (no key equals it). */
static int check_key(const char* where, int64_t i, int code, const PFValue* k, int lookup) {
  if (!key_code_ok(code)) {
    const char* name = PFTypeCodeName(code);
    if (name == NULL || code >= kPFExtBegin)
      return PF_ERROR(kPFErrTypeError,
                      "%s: key %lld has %s type code %d; a dict key has a built-in type code "
                      "other than tensor",
                      where, (long long)i, name ? "extension" : "unknown", code);
    return PF_ERROR(kPFErrTypeError,
                    "%s: key %lld has type code tensor, a DLTensor* that is only borrowed for a "
                    "call, which a dict cannot keep (use a tensor object)",
                    where, (long long)i);
  }
  if (pf_check_value(where, "key", i, code, k) != 0) return -1;
  if (code == kPFFloat && isnan(k->v_float64)) {
    if (lookup) return 1;
    return PF_ERROR(kPFErrValueError, "%s: key %lld is a NaN, which no lookup could find", where,
                    (long long)i);
  }
  return 0;
}

/* ---- the index ---- */

/* The live entry whose key equals `k`: its position, and in *slot its slot;
 * or -1 and in *slot the empty slot where it would go. */
static int64_t find(const pf_dict* d, uint64_t h, const key_view* k, size_t* slot) {
  if (d->slots == NULL) return -1;
  for (size_t i = (size_t)h & d->mask;; i = (i + 1) & d->mask) {
    int64_t s = d->slots[i];
    *slot = i;
    if (s == 0) return -1;
    const dict_entry* e = &d->entries[s - 1];
    if (e->hash != h) continue;
    key_view o;
    view_of(e->key_code, &e->key, &o);
    if (view_equal(&o, k)) return s - 1;
  }
}

/* Moves the live entries into a new block with room for `cap` and a new
 * index; on failure nothing changes. */
static int resize(pf_dict* d, int64_t cap, const char* where) {
  size_t nslots = 8;
  while (nslots < 2 * (size_t)cap) nslots *= 2;
  dict_entry* entries = pf_malloc((size_t)cap * sizeof(dict_entry));
  int64_t* slots = pf_calloc(nslots, sizeof(int64_t));
  if (entries == NULL || slots == NULL) {
    pf_free(entries);
    pf_free(slots);
    return pf_oom(where);
  }
  int64_t n = 0;
  for (int64_t i = 0; i < d->used; ++i) {
    if (d->entries[i].key_code == REMOVED) continue;
    entries[n] = d->entries[i];
    size_t j = (size_t)entries[n].hash & (nslots - 1);
    while (slots[j] != 0) j = (j + 1) & (nslots - 1);
    slots[j] = ++n;
  }
  pf_free(d->entries);
  pf_free(d->slots);
  d->entries = entries;
  d->slots = slots;
  d->mask = nslots - 1;
  d->cap = cap;
  d->used = n;
  return 0;
}

static int too_large(const char* where, int64_t n) {
  return PF_ERROR(kPFErrValueError, "%s: a dict of %lld entries would pass the largest size, %lld",
                  where, (long long)n, (long long)PF_KEPT_MAX_ITEMS);
}

/* Room to append `extra` entries without a resize. */
static int room_for(pf_dict* d, int64_t extra, const char* where) {
  if (extra > PF_KEPT_MAX_ITEMS - d->size) return too_large(where, d->size + extra);
  if (extra <= d->cap - d->used) return 0;
  int64_t want = 2 * (d->size + extra);
  if (want < 8) want = 8;
  if (want > PF_KEPT_MAX_ITEMS) want = PF_KEPT_MAX_ITEMS;
  return resize(d, want, where);
}

/* Removes the entry at `pos`, found in slot `i`: the slots after it in its
 * run move back where their probes allow (no tombstones in the index). */
static void remove_at(pf_dict* d, size_t i, int64_t pos) {
  for (size_t j = (i + 1) & d->mask;; j = (j + 1) & d->mask) {
    int64_t s = d->slots[j];
    if (s == 0) break;
    size_t home = (size_t)d->entries[s - 1].hash & d->mask;
    int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      d->slots[i] = s;
      i = j;
    }
  }
  d->slots[i] = 0;
  d->entries[pos].key_code = REMOVED;
  d->size--;
  while (d->used > 0 && d->entries[d->used - 1].key_code == REMOVED) d->used--;
}

static void drop_entry(dict_entry* e) {
  if (e->key_code == REMOVED) return;
  pf_kept_drop(e->key_code, &e->key);
  pf_kept_drop(e->value_code, &e->value);
}

static void dict_destroy(pf_object* o) {
  pf_dict* d = (pf_dict*)o;
  /* Inside a destroy: nested containers are queued, not recursed into. */
  for (int64_t i = 0; i < d->used; ++i) drop_entry(&d->entries[i]);
  pf_free(d->entries);
  pf_free(d->slots);
  pthread_rwlock_destroy(&d->lock);
  pf_free(d);
}

int pf_dict_children(pf_walk* w, const void* dict) {
  pf_dict* d = (pf_dict*)dict;
  pthread_rwlock_rdlock(&d->lock);
  int st = pf_walk_spend(w, 2 * d->size);
  for (int64_t i = 0; st == 0 && i < d->used; ++i) {
    const dict_entry* e = &d->entries[i];
    if (e->key_code == REMOVED) continue;
    if (pf_code_is_handle(e->key_code)) st = pf_walk_held_child(w, e->key.v_handle);
    if (st == 0 && pf_code_is_handle(e->value_code)) st = pf_walk_held_child(w, e->value.v_handle);
  }
  pthread_rwlock_unlock(&d->lock);
  return st;
}

/* ---- setting entries ---- */

/* Checks n keys and values, and makes the Dict's copies of them with their
 * hashes into made[0 .. n); on failure nothing is kept. */
static int make_entries(const char* where, const PFValue* keys, const int* key_codes,
                        const PFValue* values, const int* value_codes, int64_t n,
                        dict_entry* made) {
  for (int64_t i = 0; i < n; ++i) {
    if (check_key(where, i, key_codes[i], &keys[i], 0) != 0) return -1;
    if (pf_kept_check(where, "value", i, value_codes[i], &values[i]) != 0) return -1;
  }
  for (int64_t i = 0; i < n; ++i) {
    dict_entry* e = &made[i];
    key_view k;
    view_of(key_codes[i], &keys[i], &k);
    e->hash = hash_view(&k);
    e->key_code = e->value_code = kPFNull;
    if (pf_kept_make(where, key_codes[i], &keys[i], &e->key) != 0) goto fail;
    e->key_code = key_codes[i];
    if (pf_kept_make(where, value_codes[i], &values[i], &e->value) != 0) goto fail;
    e->value_code = value_codes[i];
    continue;
  fail : {
    pf_saved_error err;
    pf_error_save(&err);
    for (int64_t j = 0; j <= i; ++j) drop_entry(&made[j]);
    pf_error_restore(&err);
    return -1;
  }
  }
  return 0;
}

/* Applies made[0 .. n) to d, in order, under its lock (taken by the caller
 * when others can see d): a new key appends an entry, which takes over the
 * made key and value (made[i] becomes null); an existing key swaps in the
 * made value, leaving the old value and the made key in made[i] to be
 * dropped after the lock. With `refuse_repeats` (a Dict being created), an
 * existing key is a ValueError instead; made[i ..) are then left as they
 * are. Room for n new entries must be there. */
static int apply(pf_dict* d, const char* where, dict_entry* made, int64_t n, int refuse_repeats,
                 const PFValue* keys, const int* key_codes) {
  for (int64_t i = 0; i < n; ++i) {
    dict_entry* e = &made[i];
    key_view k;
    view_of(e->key_code, &e->key, &k);
    size_t slot;
    int64_t pos = find(d, e->hash, &k, &slot);
    if (pos < 0) {
      d->entries[d->used] = *e;
      d->slots[slot] = ++d->used;
      d->size++;
      e->key_code = e->value_code = kPFNull;
    } else if (refuse_repeats) {
      char text[256];
      return PF_ERROR(kPFErrValueError, "%s: key %lld (%s) repeats key %lld", where, (long long)i,
                      key_text(key_codes[i], &keys[i], text, sizeof(text)), (long long)pos);
    } else {
      dict_entry* old = &d->entries[pos];
      PFValue v = old->value;
      int vc = old->value_code;
      old->value = e->value;
      old->value_code = e->value_code;
      e->value = v;
      e->value_code = vc;
    }
  }
  return 0;
}

/* PFDictSetItem and PFDictUpdate: make, then apply under the lock, then
 * drop what was replaced. */
static int update(pf_dict* d, const char* where, const PFValue* keys, const int* key_codes,
                  const PFValue* values, const int* value_codes, int64_t n) {
  if (n > PF_KEPT_MAX_ITEMS) return too_large(where, n);
  dict_entry one;
  dict_entry* made = n > 1 ? pf_malloc((size_t)n * sizeof(dict_entry)) : &one;
  if (made == NULL) return pf_oom(where);
  int st = make_entries(where, keys, key_codes, values, value_codes, n, made);
  if (st == 0) {
    pthread_rwlock_wrlock(&d->lock);
    st = room_for(d, n, where);
    if (st == 0) st = apply(d, where, made, n, 0, keys, key_codes);
    pthread_rwlock_unlock(&d->lock);
    if (st != 0) {
      pf_saved_error err;
      pf_error_save(&err);
      for (int64_t i = 0; i < n; ++i) drop_entry(&made[i]);
      pf_error_restore(&err);
    } else {
      for (int64_t i = 0; i < n; ++i) drop_entry(&made[i]);
    }
  }
  if (made != &one) pf_free(made);
  return st;
}

/* ---- entry points ---- */

int PFDictCreate(const PFValue* keys, const int* key_codes, const PFValue* values,
                 const int* value_codes, int64_t size, PFObjectHandle* out) {
  static const char* const where = "PFDictCreate";
  PF_CHECK_ARG(out);
  if (pf_kept_check_count(where, "size", size) != 0) return -1;
  if (size > PF_KEPT_MAX_ITEMS) return too_large(where, size);
  if (size > 0) {
    if (keys == NULL) return pf_kept_null_with_count(where, "keys", "size", size);
    if (key_codes == NULL) return pf_kept_null_with_count(where, "key_codes", "size", size);
    if (values == NULL) return pf_kept_null_with_count(where, "values", "size", size);
    if (value_codes == NULL) return pf_kept_null_with_count(where, "value_codes", "size", size);
  }
  pf_dict* d = pf_malloc(sizeof(*d));
  if (d == NULL) return pf_oom(where);
  memset(d, 0, sizeof(*d));
  if (pf_kept_lock_init(&d->lock, where) != 0) {
    pf_free(d);
    return -1;
  }
  pf_object_init(&d->base, kPFObjectDict, dict_destroy);
  dict_entry* made = size > 0 ? pf_malloc((size_t)size * sizeof(dict_entry)) : NULL;
  int st = size > 0 && made == NULL ? pf_oom(where) : 0;
  if (st == 0 && size > 0) st = room_for(d, size, where);
  if (st == 0) st = make_entries(where, keys, key_codes, values, value_codes, size, made);
  if (st == 0 && apply(d, where, made, size, 1, keys, key_codes) != 0) {
    /* What was applied is the Dict's, dropped with it; the rest is made's. */
    pf_saved_error err;
    pf_error_save(&err);
    for (int64_t i = 0; i < size; ++i) drop_entry(&made[i]);
    pf_error_restore(&err);
    st = -1;
  }
  pf_free(made);
  if (st != 0) {
    pf_object_release_keeping_error(d);
    return -1;
  }
  *out = d;
  return 0;
}

int PFDictGetSize(PFObjectHandle dict, int64_t* out) {
  PF_CHECK_OBJECT(dict, kPFObjectDict);
  PF_CHECK_ARG(out);
  pf_dict* d = dict;
  *out = pf_kept_size(&d->lock, &d->size);
  return 0;
}

int PFDictGetItem(PFObjectHandle dict, PFValue key, int key_code, PFValue* out, int* out_code,
                  int* found) {
  PF_CHECK_OBJECT(dict, kPFObjectDict);
  PF_CHECK_ARG(found);
  if ((out == NULL) != (out_code == NULL))
    return pf_err_null_arg(__func__, out == NULL ? "out" : "out_code");
  int nan = check_key(__func__, 0, key_code, &key, 1);
  if (nan < 0) return -1;
  pf_dict* d = dict;
  PFValue v = {.v_int64 = 0};
  int code = kPFNull, st = 0;
  int64_t pos = -1;
  if (!nan) {
    key_view k;
    view_of(key_code, &key, &k);
    uint64_t h = hash_view(&k);
    size_t slot;
    pthread_rwlock_rdlock(&d->lock);
    pos = find(d, h, &k, &slot);
    if (pos >= 0 && out != NULL) {
      code = d->entries[pos].value_code;
      st = pf_kept_read(__func__, code, &d->entries[pos].value, &v);
    }
    pthread_rwlock_unlock(&d->lock);
  }
  if (st != 0) return -1;
  if (out != NULL) {
    *out = v;
    *out_code = code;
  }
  *found = pos >= 0;
  return 0;
}

int PFDictSetItem(PFObjectHandle dict, PFValue key, int key_code, PFValue value, int value_code) {
  PF_CHECK_OBJECT(dict, kPFObjectDict);
  return update(dict, __func__, &key, &key_code, &value, &value_code, 1);
}

int PFDictUpdate(PFObjectHandle dict, const PFValue* keys, const int* key_codes,
                 const PFValue* values, const int* value_codes, int64_t count) {
  PF_CHECK_OBJECT(dict, kPFObjectDict);
  if (pf_kept_check_count(__func__, "count", count) != 0) return -1;
  if (count > 0) {
    if (keys == NULL) return pf_kept_null_with_count(__func__, "keys", "count", count);
    if (key_codes == NULL) return pf_kept_null_with_count(__func__, "key_codes", "count", count);
    if (values == NULL) return pf_kept_null_with_count(__func__, "values", "count", count);
    if (value_codes == NULL)
      return pf_kept_null_with_count(__func__, "value_codes", "count", count);
  }
  return update(dict, __func__, keys, key_codes, values, value_codes, count);
}

int PFDictPop(PFObjectHandle dict, PFValue key, int key_code, PFValue* out, int* out_code) {
  PF_CHECK_OBJECT(dict, kPFObjectDict);
  PF_CHECK_ARG(out);
  PF_CHECK_ARG(out_code);
  int nan = check_key(__func__, 0, key_code, &key, 1);
  if (nan < 0) return -1;
  pf_dict* d = dict;
  dict_entry gone = {.key_code = REMOVED};
  PFValue v = {.v_int64 = 0};
  int st = 0;
  int64_t pos = -1;
  if (!nan) {
    key_view k;
    view_of(key_code, &key, &k);
    uint64_t h = hash_view(&k);
    size_t slot = 0;
    pthread_rwlock_wrlock(&d->lock);
    pos = find(d, h, &k, &slot);
    if (pos >= 0) {
      /* The caller's copy first: if it fails, the entry stays. */
      st = pf_kept_read(__func__, d->entries[pos].value_code, &d->entries[pos].value, &v);
      if (st == 0) {
        gone = d->entries[pos];
        remove_at(d, slot, pos);
      }
    }
    pthread_rwlock_unlock(&d->lock);
  }
  if (st != 0) return -1;
  if (pos < 0) {
    char text[256];
    return PF_ERROR(kPFErrKeyError, "%s: key %s is not in the dict", __func__,
                    key_text(key_code, &key, text, sizeof(text)));
  }
  *out = v;
  *out_code = gone.value_code;
  drop_entry(&gone); /* the caller holds its own reference now */
  return 0;
}

int PFDictClear(PFObjectHandle dict) {
  PF_CHECK_OBJECT(dict, kPFObjectDict);
  pf_dict* d = dict;
  pthread_rwlock_wrlock(&d->lock);
  dict_entry* entries = d->entries;
  int64_t used = d->used;
  pf_free(d->slots);
  d->entries = NULL;
  d->slots = NULL;
  d->size = d->used = d->cap = 0;
  d->mask = 0;
  pthread_rwlock_unlock(&d->lock);
  for (int64_t i = 0; i < used; ++i) drop_entry(&entries[i]);
  pf_free(entries);
  return 0;
}

int PFDictToArray(PFObjectHandle dict, PFObjectHandle* out) {
  PF_CHECK_OBJECT(dict, kPFObjectDict);
  PF_CHECK_ARG(out);
  pf_dict* d = dict;
  PFObjectHandle a = NULL;
  int st = 0;
  pthread_rwlock_rdlock(&d->lock);
  size_t n = 2 * (size_t)d->size;
  PFValue* values = n ? pf_malloc(n * sizeof(PFValue)) : NULL;
  int* codes = n ? pf_malloc(n * sizeof(int)) : NULL;
  if (n && (values == NULL || codes == NULL)) {
    st = -1;
  } else {
    size_t j = 0;
    for (int64_t i = 0; i < d->used; ++i) {
      const dict_entry* e = &d->entries[i];
      if (e->key_code == REMOVED) continue;
      values[j] = e->key;
      codes[j++] = e->key_code;
      values[j] = e->value;
      codes[j++] = e->value_code;
    }
    /* Kept values pass PFArrayCreate's checks: only memory can fail. */
    st = PFArrayCreate(values, codes, (int64_t)n, &a);
  }
  pthread_rwlock_unlock(&d->lock);
  pf_free(values);
  pf_free(codes);
  if (st != 0) return pf_oom(__func__);
  *out = a;
  return 0;
}
