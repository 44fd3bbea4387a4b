/* List: a mutable sequence of kept values under a lock of its own, shared
 * by readers (see pf_kept_lock_init). Every change goes through splice();
 * references it drops are released after the lock. The rules are in
 * container.h. */
#include <pthread.h>

#include "internal.h"

typedef struct {
  pf_object base;
  pthread_rwlock_t lock;
  int64_t size, cap;
  PFValue* values;
  int* codes;
} pf_list;

static void drop_all(PFValue* values, int* codes, int64_t n) {
  for (int64_t i = 0; i < n; ++i) pf_kept_drop(codes[i], &values[i]);
}

static void list_destroy(pf_object* o) {
  pf_list* l = (pf_list*)o;
  /* Inside a destroy: a nested container's destruction is queued by
   * pf_object_release, not recursed into. */
  drop_all(l->values, l->codes, l->size);
  pf_free(l->values);
  pf_free(l->codes);
  pthread_rwlock_destroy(&l->lock);
  pf_free(l);
}

/* Room for `need` items; -1 with a MemoryError. need <= PF_KEPT_MAX_ITEMS. */
static int reserve(pf_list* l, int64_t need, const char* where) {
  if (need <= l->cap) return 0;
  int64_t cap = l->cap < 4 ? 4 : l->cap;
  while (cap < need) cap = cap > PF_KEPT_MAX_ITEMS / 2 ? PF_KEPT_MAX_ITEMS : cap * 2;
  PFValue* v = pf_realloc(l->values, (size_t)cap * sizeof(PFValue));
  if (v == NULL) return pf_oom(where);
  l->values = v;
  /* If this one fails, `values` is merely larger than `cap` says. */
  int* c = pf_realloc(l->codes, (size_t)cap * sizeof(int));
  if (c == NULL) return pf_oom(where);
  l->codes = c;
  l->cap = cap;
  return 0;
}

/* The position of a single index: [-size, size) (or [-size, size] to
 * insert), negative ones counted from the end. */
static int resolve(const char* where, int64_t index, int64_t size, int insert, int64_t* out) {
  int64_t i = index < 0 ? index + size : index;
  if (i < 0 || i > size || (i == size && !insert))
    return PF_ERROR(kPFErrIndexError,
                    "%s: argument 'index' is %lld, out of range for a list of size %lld", where,
                    (long long)index, (long long)size);
  *out = i;
  return 0;
}

static int too_long(const char* where, int64_t size) {
  return PF_ERROR(kPFErrValueError, "%s: a list of %lld items would pass the largest size, %lld",
                  where, (long long)size, (long long)PF_KEPT_MAX_ITEMS);
}

/* Checks and makes the container's copies of n values, into `out` and
 * `out_codes`; on failure nothing is kept. */
static int make_all(const char* where, const PFValue* values, const int* codes, int64_t n,
                    PFValue* out, int* out_codes) {
  for (int64_t i = 0; i < n; ++i)
    if (pf_kept_check(where, "value", i, codes[i], &values[i]) != 0) return -1;
  for (int64_t i = 0; i < n; ++i) {
    if (pf_kept_make(where, codes[i], &values[i], &out[i]) != 0) {
      pf_saved_error e;
      pf_error_save(&e);
      drop_all(out, out_codes, i);
      pf_error_restore(&e);
      return -1;
    }
    out_codes[i] = codes[i];
  }
  return 0;
}

/* Where a change applies: a range clipped to the size, an insertion before
 * a single index, or the replacement of the item at a single index. */
typedef enum { AT_RANGE, AT_INSERT, AT_SET } splice_at;

/* Replaces the items [start, start + count) with the n values given, as
 * one change under the lock; `at` says how start and count are read. The
 * values are checked and copied before the lock, the items removed are
 * released after it. */
static int splice(pf_list* l, const char* where, splice_at at, int64_t start, int64_t count,
                  const PFValue* values, const int* codes, int64_t n) {
  PFValue one_value, one_dropped;
  int one_code, one_dropped_code;
  PFValue* made = &one_value;
  int* made_codes = &one_code;
  PFValue* dropped = &one_dropped;
  int* dropped_codes = &one_dropped_code;
  if (n > PF_KEPT_MAX_ITEMS) return too_long(where, n);
  if (n > 1) {
    made = pf_malloc((size_t)n * sizeof(PFValue));
    made_codes = pf_malloc((size_t)n * sizeof(int));
    if (made == NULL || made_codes == NULL) {
      pf_free(made);
      pf_free(made_codes);
      return pf_oom(where);
    }
  }
  int st = make_all(where, values, codes, n, made, made_codes);
  int64_t removed = 0;
  if (st == 0) {
    pthread_rwlock_wrlock(&l->lock);
    int64_t size = l->size;
    if (at == AT_RANGE) {
      if (start > size) start = size;
      if (count > size - start) count = size - start;
    } else {
      st = resolve(where, start, size, at == AT_INSERT, &start);
      count = at == AT_SET;
    }
    if (st == 0 && n > PF_KEPT_MAX_ITEMS - (size - count)) st = too_long(where, size - count + n);
    if (st == 0) st = reserve(l, size - count + n, where);
    if (st == 0 && count > 1) {
      dropped = pf_malloc((size_t)count * sizeof(PFValue));
      dropped_codes = pf_malloc((size_t)count * sizeof(int));
      if (dropped == NULL || dropped_codes == NULL) {
        pf_free(dropped);
        pf_free(dropped_codes);
        dropped = &one_dropped;
        dropped_codes = &one_dropped_code;
        st = pf_oom(where);
      }
    }
    /* An empty List that stays empty has no storage (values NULL): nothing
     * to move. */
    if (st == 0 && l->values != NULL) {
      removed = count;
      memcpy(dropped, l->values + start, (size_t)count * sizeof(PFValue));
      memcpy(dropped_codes, l->codes + start, (size_t)count * sizeof(int));
      int64_t tail = size - start - count;
      memmove(l->values + start + n, l->values + start + count, (size_t)tail * sizeof(PFValue));
      memmove(l->codes + start + n, l->codes + start + count, (size_t)tail * sizeof(int));
      memcpy(l->values + start, made, (size_t)n * sizeof(PFValue));
      memcpy(l->codes + start, made_codes, (size_t)n * sizeof(int));
      l->size = size - count + n;
    }
    pthread_rwlock_unlock(&l->lock);
    if (st != 0) {
      pf_saved_error e;
      pf_error_save(&e);
      drop_all(made, made_codes, n);
      pf_error_restore(&e);
    }
  }
  drop_all(dropped, dropped_codes, removed);
  if (dropped != &one_dropped) {
    pf_free(dropped);
    pf_free(dropped_codes);
  }
  if (made != &one_value) {
    pf_free(made);
    pf_free(made_codes);
  }
  return st;
}

int pf_list_children(pf_walk* w, const void* list) {
  pf_list* l = (pf_list*)list;
  pthread_rwlock_rdlock(&l->lock);
  int st = pf_walk_spend(w, l->size);
  for (int64_t i = 0; st == 0 && i < l->size; ++i)
    if (pf_code_is_handle(l->codes[i])) st = pf_walk_held_child(w, l->values[i].v_handle);
  pthread_rwlock_unlock(&l->lock);
  return st;
}

int PFListCreate(const PFValue* values, const int* codes, int64_t size, PFObjectHandle* out) {
  static const char* const where = "PFListCreate";
  PF_CHECK_ARG(out);
  if (pf_kept_check_count(where, "size", size) != 0) return -1;
  if (size > PF_KEPT_MAX_ITEMS) return too_long(where, size);
  if (size > 0 && values == NULL) return pf_kept_null_with_count(where, "values", "size", size);
  if (size > 0 && codes == NULL) return pf_kept_null_with_count(where, "codes", "size", size);
  pf_list* l = pf_malloc(sizeof(*l));
  if (l == NULL) return pf_oom(where);
  memset(l, 0, sizeof(*l));
  if (reserve(l, size, where) != 0 || make_all(where, values, codes, size, l->values, l->codes)) {
    pf_free(l->values);
    pf_free(l->codes);
    pf_free(l);
    return -1;
  }
  l->size = size;
  if (pf_kept_lock_init(&l->lock, where) != 0) {
    drop_all(l->values, l->codes, size);
    pf_free(l->values);
    pf_free(l->codes);
    pf_free(l);
    return -1;
  }
  pf_object_init(&l->base, kPFObjectList, list_destroy);
  *out = l;
  return 0;
}

int PFListGetSize(PFObjectHandle list, int64_t* out) {
  PF_CHECK_OBJECT(list, kPFObjectList);
  PF_CHECK_ARG(out);
  pf_list* l = list;
  *out = pf_kept_size(&l->lock, &l->size);
  return 0;
}

/* Copies item `index` out to the caller (pf_kept_read); with `pop`, also
 * removes it from the list and drops the list's own copy. Inlined, so that
 * each caller's constant `pop` leaves a reader no step of pop's. */
static inline __attribute__((always_inline)) int take_item(pf_list* l, const char* who,
                                                           int64_t index, int pop, PFValue* out,
                                                           int* out_code) {
  int64_t i;
  PFValue v, kept = {.v_int64 = 0};
  int code = kPFNull;
  if (pop) pthread_rwlock_wrlock(&l->lock);
  else pthread_rwlock_rdlock(&l->lock);
  int st = resolve(who, index, l->size, 0, &i);
  if (st == 0) {
    code = l->codes[i];
    /* The caller's copy first: if it fails, the item stays. */
    st = pf_kept_read(who, code, &l->values[i], &v);
  }
  if (st == 0 && pop) {
    kept = l->values[i];
    int64_t tail = l->size - i - 1;
    memmove(l->values + i, l->values + i + 1, (size_t)tail * sizeof(PFValue));
    memmove(l->codes + i, l->codes + i + 1, (size_t)tail * sizeof(int));
    l->size--;
  }
  pthread_rwlock_unlock(&l->lock);
  if (st != 0) return -1;
  if (pop) pf_kept_drop(code, &kept); /* the caller holds its own reference now */
  *out = v;
  *out_code = code;
  return 0;
}

int PFListGetItem(PFObjectHandle list, int64_t index, PFValue* out, int* out_code) {
  PF_CHECK_OBJECT(list, kPFObjectList);
  PF_CHECK_ARG(out);
  PF_CHECK_ARG(out_code);
  return take_item(list, __func__, index, 0, out, out_code);
}

int PFListSetItem(PFObjectHandle list, int64_t index, PFValue value, int code) {
  PF_CHECK_OBJECT(list, kPFObjectList);
  return splice(list, __func__, AT_SET, index, 1, &value, &code, 1);
}

int PFListAppend(PFObjectHandle list, PFValue value, int code) {
  PF_CHECK_OBJECT(list, kPFObjectList);
  return splice(list, __func__, AT_RANGE, INT64_MAX, 0, &value, &code, 1);
}

int PFListInsert(PFObjectHandle list, int64_t index, PFValue value, int code) {
  PF_CHECK_OBJECT(list, kPFObjectList);
  return splice(list, __func__, AT_INSERT, index, 0, &value, &code, 1);
}

int PFListExtend(PFObjectHandle list, const PFValue* values, const int* codes, int64_t count) {
  PF_CHECK_OBJECT(list, kPFObjectList);
  if (pf_kept_check_count(__func__, "count", count) != 0) return -1;
  if (count > 0 && values == NULL)
    return pf_kept_null_with_count(__func__, "values", "count", count);
  if (count > 0 && codes == NULL) return pf_kept_null_with_count(__func__, "codes", "count", count);
  return splice(list, __func__, AT_RANGE, INT64_MAX, 0, values, codes, count);
}

int PFListReplace(PFObjectHandle list, int64_t start, int64_t count, const PFValue* values,
                  const int* codes, int64_t num_values) {
  PF_CHECK_OBJECT(list, kPFObjectList);
  if (pf_kept_check_count(__func__, "start", start) != 0 ||
      pf_kept_check_count(__func__, "count", count) != 0 ||
      pf_kept_check_count(__func__, "num_values", num_values) != 0)
    return -1;
  if (num_values > 0 && values == NULL)
    return pf_kept_null_with_count(__func__, "values", "num_values", num_values);
  if (num_values > 0 && codes == NULL)
    return pf_kept_null_with_count(__func__, "codes", "num_values", num_values);
  return splice(list, __func__, AT_RANGE, start, count, values, codes, num_values);
}

int PFListPop(PFObjectHandle list, int64_t index, PFValue* out, int* out_code) {
  PF_CHECK_OBJECT(list, kPFObjectList);
  PF_CHECK_ARG(out);
  PF_CHECK_ARG(out_code);
  return take_item(list, __func__, index, 1, out, out_code);
}

int PFListClear(PFObjectHandle list) {
  PF_CHECK_OBJECT(list, kPFObjectList);
  pf_list* l = list;
  pthread_rwlock_wrlock(&l->lock);
  PFValue* values = l->values;
  int* codes = l->codes;
  int64_t n = l->size;
  l->values = NULL;
  l->codes = NULL;
  l->size = l->cap = 0;
  pthread_rwlock_unlock(&l->lock);
  drop_all(values, codes, n);
  pf_free(values);
  pf_free(codes);
  return 0;
}

int PFListToArray(PFObjectHandle list, int64_t start, int64_t count, PFObjectHandle* out) {
  PF_CHECK_OBJECT(list, kPFObjectList);
  PF_CHECK_ARG(out);
  if (pf_kept_check_count(__func__, "start", start) != 0 ||
      pf_kept_check_count(__func__, "count", count) != 0)
    return -1;
  pf_list* l = list;
  PFObjectHandle a = NULL;
  pthread_rwlock_rdlock(&l->lock);
  if (start > l->size) start = l->size;
  if (count > l->size - start) count = l->size - start;
  /* The kept values pass PFArrayCreate's checks (a handle is alive: the
   * List holds it), so only memory can fail. */
  int st = count == 0 ? PFArrayCreate(NULL, NULL, 0, &a)
                      : PFArrayCreate(l->values + start, l->codes + start, count, &a);
  pthread_rwlock_unlock(&l->lock);
  if (st != 0) return pf_oom(__func__);
  *out = a;
  return 0;
}
