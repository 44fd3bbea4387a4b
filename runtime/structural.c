/* Structural equality and hashing (include/packedfunc/structural.h). */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "internal.h"

/* Fixed, so that a hash of plain data is the same in every process. */
#define SEED 0x70666571u

/* One step of an access path: an item of a sequence, the entry of a key,
 * or a field; what it points to is borrowed from the walk's views. */
typedef struct {
  int64_t index;      /* an item's index; -1 for a key or a field */
  int code;           /* the key's type code */
  const PFValue* key; /* the key, or NULL */
  const char* field;  /* the field's name, or NULL */
} step;

/* The path from the roots: the containers and instances being walked, and
 * (when asked for) the steps to the pair being compared and the text of
 * the first path where a difference was met. `low` is the lowest level of
 * the path that a reference back (a cycle) reached since the object being
 * walked at the current level began: when it is below that level, the
 * object's result depends on the path and is not kept in `done`, but
 * noted in `redo`; a walk of one noted there is a re-walk, and from the
 * level `rewalk` where it began, every object and item walked counts in
 * `rewalked`, up to PF_STRUCTURAL_MAX_REWALK. */
typedef struct {
  const char* where;
  pf_snapshots snaps; /* the Lists' and Dicts', held until the walk ends */
  /* `done`: what the walk has finished for an object (hashing: b is 0,
   * the value its hash) or a pair (equality, kept only when equal), when
   * the result did not depend on the path above it, so that a value shared
   * by several containers is walked once. */
  pf_pair_map done, redo;
  uint32_t flags;
  int depth, low, rewalk;
  int64_t rewalked;
  const void* a[PF_STRUCTURAL_MAX_DEPTH];
  const void* b[PF_STRUCTURAL_MAX_DEPTH];
  int want_path, nsteps;
  step steps[PF_STRUCTURAL_MAX_DEPTH];
  char* path; /* owned; NULL until a difference is met */
  size_t path_len, path_cap;
} walk;

#define ALL_FLAGS PF_STRUCTURAL_SKIP_TENSOR_CONTENT

/* What a value is, for comparing: its code, with the three handle codes
 * one "object" and a borrowed DLTensor* a tensor. */
enum { K_OBJECT = -1, K_DLTENSOR = -2 };
static int kind_of(int code) {
  if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle) return K_OBJECT;
  return code;
}
static uint32_t type_of(const void* h) { return ((const pf_object*)h)->type_index; }
static int is_tensor(int code, const PFValue* v) {
  return code == kPFDLTensorHandle ||
         (kind_of(code) == K_OBJECT && type_of(v->v_handle) == kPFObjectTensor);
}

static uint64_t mix(uint64_t h, uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
  return XXH3_64bits_withSeed(&h, sizeof(h), SEED);
}
static uint64_t float_bits(double d) {
  uint64_t bits;
  if (isnan(d)) d = NAN;
  if (d == 0.0) d = 0.0;
  memcpy(&bits, &d, sizeof(bits));
  return bits;
}

/* ---- containers as flat views ---- */
/* A sequence's items, or a map's entries (key i at 2i, its value at 2i+1),
 * borrowed from a snapshot that the walk holds or from the container
 * itself; `own` is memory to free. */
typedef struct {
  int64_t n;
  const PFValue* v;
  const int32_t* c;
  void* own;
} view;

static void view_done(view* w) { pf_free(w->own); }

static int map_view(const char* where, PFObjectHandle map, view* w) {
  int64_t n;
  PFMapGetSize(map, &n);
  size_t items = (size_t)n * 2;
  char* mem = pf_malloc(items * (sizeof(PFValue) + sizeof(int32_t)) + 1);
  if (!mem) return pf_oom(where);
  PFValue* v = (PFValue*)mem;
  int32_t* c = (int32_t*)(mem + items * sizeof(PFValue));
  for (int64_t i = 0; i < n; ++i) {
    int kc, vc;
    PFMapGetItemAt(map, i, &v[2 * i], &kc, &v[2 * i + 1], &vc);
    c[2 * i] = kc;
    c[2 * i + 1] = vc;
  }
  *w = (view){n, v, c, mem};
  return 0;
}

/* The view of a container object of type `type`; sequences have n items,
 * maps n entries. */
static int view_of(walk* k, PFObjectHandle h, uint32_t type, view* w) {
  *w = (view){0};
  switch (type) {
    case kPFObjectArray:
      pf_array_view(h, &w->n, &w->v, &w->c);
      return 0;
    case kPFObjectMap:
      return map_view(k->where, h, w);
    default: /* kPFObjectList, kPFObjectDict */
      if (pf_snapshot_take(&k->snaps, k->where, h, type, &w->n, &w->v, &w->c) != 0) return -1;
      if (type == kPFObjectDict) w->n /= 2;
      return 0;
  }
}

/* ---- map keys: the containers' own key equality ---- */
static int key_is_number(int code) { return code == kPFInt || code == kPFBool || code == kPFFloat; }
static double key_number(int code, const PFValue* v) {
  return code == kPFFloat ? v->v_float64 : (double)v->v_int64;
}

static int key_equal(int ca, const PFValue* a, int cb, const PFValue* b) {
  if (key_is_number(ca) && key_is_number(cb)) {
    if (ca != kPFFloat && cb != kPFFloat) return a->v_int64 == b->v_int64;
    return key_number(ca, a) == key_number(cb, b);
  }
  if (kind_of(ca) != kind_of(cb)) return 0;
  switch (ca) {
    case kPFStr:
      return strcmp(a->v_str, b->v_str) == 0;
    case kPFBytes: {
      const PFByteArray *x = a->v_handle, *y = b->v_handle;
      return x->size == y->size && (x->size == 0 || memcmp(x->data, y->data, x->size) == 0);
    }
    case kPFNull:
      return 1;
    default:
      return memcmp(a, b, sizeof(*a)) == 0;
  }
}

static uint64_t key_hash(int code, const PFValue* v) {
  if (key_is_number(code)) {
    double d = key_number(code, v);
    if (code != kPFFloat || (d == floor(d) && d >= -0x1p63 && d < 0x1p63))
      return mix(kPFInt, code == kPFFloat ? (uint64_t)(int64_t)d : (uint64_t)v->v_int64);
    return mix(kPFFloat, float_bits(d));
  }
  switch (code) {
    case kPFStr:
      return mix(kPFStr, XXH3_64bits_withSeed(v->v_str, strlen(v->v_str), SEED));
    case kPFBytes: {
      const PFByteArray* x = v->v_handle;
      return mix(kPFBytes, XXH3_64bits_withSeed(x->data, x->size, SEED));
    }
    case kPFNull:
      return mix(kPFNull, 0);
    default:
      return mix((uint64_t)kind_of(code), v->v_int64);
  }
}

/* ---- tensors ---- */
static int tensor_of(const walk* w, int code, const PFValue* v, DLTensor** out) {
  const char* where = w->where;
  if (code == kPFDLTensorHandle) *out = v->v_handle;
  else PFTensorGetDLTensor(v->v_handle, out);
  if ((*out)->ndim < 0 || (*out)->ndim > PF_TENSOR_MAX_NDIM)
    return PF_ERROR(kPFErrValueError, "%s: a tensor of %d dims (at most %d)", where, (*out)->ndim,
                    PF_TENSOR_MAX_NDIM);
  if (!(w->flags & PF_STRUCTURAL_SKIP_TENSOR_CONTENT) && (*out)->device.device_type != kDLCPU)
    return PF_ERROR(kPFErrValueError, "%s: a tensor on device type %d: its data cannot be read",
                    where, (int)(*out)->device.device_type);
  return 0;
}

static int tensor_equal(const walk* w, const DLTensor* a, const DLTensor* b, int* out) {
  const char* where = w->where;
  *out = 0;
  if (a->dtype.code != b->dtype.code || a->dtype.bits != b->dtype.bits ||
      a->dtype.lanes != b->dtype.lanes || a->ndim != b->ndim)
    return 0;
  for (int i = 0; i < a->ndim; ++i)
    if (a->shape[i] != b->shape[i]) return 0;
  if (w->flags & PF_STRUCTURAL_SKIP_TENSOR_CONTENT) {
    *out = 1;
    return 0;
  }
  const char *da, *db;
  char *oa, *ob = NULL;
  size_t na, nb;
  if (pf_tensor_row_major(where, a, &da, &na, &oa) != 0 ||
      pf_tensor_row_major(where, b, &db, &nb, &ob) != 0) {
    pf_free(oa);
    return -1;
  }
  *out = na == nb && (na == 0 || memcmp(da, db, na) == 0);
  pf_free(oa);
  pf_free(ob);
  return 0;
}

static int tensor_hash(const walk* w, const DLTensor* t, uint64_t* out) {
  uint64_t h = mix(kPFObjectTensor,
                   (uint64_t)t->dtype.code << 32 | (uint64_t)t->dtype.bits << 16 | t->dtype.lanes);
  for (int i = 0; i < t->ndim; ++i) h = mix(h, (uint64_t)t->shape[i]);
  if (w->flags & PF_STRUCTURAL_SKIP_TENSOR_CONTENT) {
    *out = h;
    return 0;
  }
  const char* d;
  char* own;
  size_t n;
  if (pf_tensor_row_major(w->where, t, &d, &n, &own) != 0) return -1;
  *out = mix(h, XXH3_64bits_withSeed(d, n, SEED));
  pf_free(own);
  return 0;
}

/* ---- what the walk has finished ---- */
static const pf_pair_entry* memo_find(const pf_pair_map* m, const void* a, const void* b) {
  return m->count ? pf_pair_find(m, a, (uintptr_t)b) : NULL;
}

/* Keeps the result of (a, b), not present; -1 when out of memory. */
static int memo_add(walk* w, pf_pair_map* m, const void* a, const void* b, uint64_t hash) {
  return pf_pair_add(m, a, (uintptr_t)b, hash) == 0 ? 0 : pf_oom(w->where);
}

static int too_costly(const walk* w) {
  return PF_ERROR(kPFErrValueError,
                  "%s: values whose cycles are reached on too many paths (walking them again "
                  "took more than %d steps, PF_STRUCTURAL_MAX_REWALK)",
                  w->where, PF_STRUCTURAL_MAX_REWALK);
}

/* Counts `steps` when re-walking; -1 past the bound. */
static int rewalk_count(walk* w, int64_t steps) {
  if (w->rewalk < 0) return 0;
  w->rewalked += steps;
  return w->rewalked > PF_STRUCTURAL_MAX_REWALK ? too_costly(w) : 0;
}

/* Begins the object (pair) at a new level: stores the `low` of the level
 * above in *outer_low, for level_end to take back, and counts a re-walk;
 * -1 past the bound. */
static int level_begin(walk* w, const void* a, const void* b, int* outer_low) {
  *outer_low = w->low;
  w->low = PF_STRUCTURAL_MAX_DEPTH;
  if (w->rewalk < 0 && memo_find(&w->redo, a, b)) w->rewalk = w->depth;
  return rewalk_count(w, 1);
}

/* Ends the object at `level` (rc its walk's result): keeps `hash` for
 * (a, b) when `keep` and no reference back left the object's own graph
 * (so nothing above it changed the result); returns rc, or -1 when out of
 * memory. */
static int level_end(walk* w, int level, int outer_low, int rc, int keep, const void* a,
                     const void* b, uint64_t hash) {
  if (rc == 0 && keep && w->low > level && pf_object_held_twice(a) &&
      (!b || pf_object_held_twice(b)))
    rc = memo_add(w, &w->done, a, b, hash);
  else if (rc == 0 && keep && w->low <= level && !memo_find(&w->redo, a, b))
    rc = memo_add(w, &w->redo, a, b, 0);
  if (w->rewalk == level) w->rewalk = -1;
  if (outer_low < w->low) w->low = outer_low;
  return rc;
}

/* Notes a reference back to the path's level `at`. */
static void reached(walk* w, int at) {
  if (at < w->low) w->low = at;
}

/* ---- the path ---- */
static int path_find(const void* const* path, int depth, const void* obj) {
  for (int i = depth - 1; i >= 0; --i)
    if (path[i] == obj) return i;
  return -1;
}
static int too_deep(const walk* w) {
  return PF_ERROR(kPFErrValueError,
                  "%s: values nested deeper than %d levels (PF_STRUCTURAL_MAX_DEPTH)", w->where,
                  PF_STRUCTURAL_MAX_DEPTH);
}

/* ---- the access path of the first difference ---- */
static int path_add(walk* w, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
static int path_add(walk* w, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (w->path_len + (size_t)n + 1 > w->path_cap) {
    size_t cap = (w->path_len + (size_t)n + 1) * 2;
    char* p = pf_realloc(w->path, cap);
    if (!p) return pf_oom(w->where);
    w->path = p;
    w->path_cap = cap;
  }
  va_start(ap, fmt);
  vsnprintf(w->path + w->path_len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  w->path_len += (size_t)n;
  return 0;
}

static int path_add_key(walk* w, int code, const PFValue* key) {
  if (code == kPFInt) return path_add(w, "[%" PRId64 "]", key->v_int64);
  if (code != kPFStr) return path_add(w, "[<%s>]", PFTypeCodeName(code));
  int rc = path_add(w, "[\"");
  for (const char* c = key->v_str; rc == 0 && *c; ++c)
    rc = path_add(w, *c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
  return rc == 0 ? path_add(w, "\"]") : -1;
}

/* Records the steps walked so far as the path of the first difference,
 * unless one was recorded already (deeper: the walk met it first). */
static int path_note(walk* w) {
  if (!w->want_path || w->path) return 0;
  int rc = path_add(w, "$");
  for (int i = 0; rc == 0 && i < w->nsteps; ++i) {
    const step* s = &w->steps[i];
    if (s->field) rc = path_add(w, ".%s", s->field);
    else if (s->key) rc = path_add_key(w, s->code, s->key);
    else rc = path_add(w, "[%" PRId64 "]", s->index);
  }
  return rc;
}

/* ---- equality ---- */
static int equal_at(walk* w, int ca, const PFValue* a, int cb, const PFValue* b, int* out);

/* Compares a pair and notes the path when it differs. */
static int equal(walk* w, int ca, const PFValue* a, int cb, const PFValue* b, int* out) {
  int rc = equal_at(w, ca, a, cb, b, out);
  return rc == 0 && !*out ? path_note(w) : rc;
}

/* Compares the pair one step below the current one. */
static int equal_below(walk* w, step s, int ca, const PFValue* a, int cb, const PFValue* b,
                       int* out) {
  w->steps[w->nsteps++] = s;
  int rc = equal(w, ca, a, cb, b, out);
  --w->nsteps;
  return rc;
}
#define ITEM(i) ((step){(i), 0, NULL, NULL})
#define KEY(code, key) ((step){-1, (code), (key), NULL})
#define FIELD(name) ((step){-1, 0, NULL, (name)})

static int entry_compare(const void* x, const void* y) {
  uint64_t hx = *(const uint64_t*)x, hy = *(const uint64_t*)y;
  return hx < hy ? -1 : hx > hy;
}

/* Maps: every entry of `a` has an equal key in `b` with an equal value.
 * b's keys are sorted by hash once (pairs of hash and index). */
static int maps_equal(walk* w, const view* a, const view* b, int* out) {
  uint64_t* idx = pf_malloc((size_t)b->n * 2 * sizeof(uint64_t) + 1);
  if (!idx) return pf_oom(w->where);
  for (int64_t i = 0; i < b->n; ++i) {
    idx[2 * i] = key_hash(b->c[2 * i], &b->v[2 * i]);
    idx[2 * i + 1] = (uint64_t)i;
  }
  qsort(idx, (size_t)b->n, 2 * sizeof(uint64_t), entry_compare);
  int rc = 0;
  *out = 1;
  for (int64_t i = 0; i < a->n && *out && rc == 0; ++i) {
    uint64_t h = key_hash(a->c[2 * i], &a->v[2 * i]);
    int64_t lo = 0, hi = b->n;
    while (lo < hi) {
      int64_t mid = lo + (hi - lo) / 2;
      if (idx[2 * mid] < h) lo = mid + 1;
      else hi = mid;
    }
    *out = 0;
    step key = KEY(a->c[2 * i], &a->v[2 * i]);
    for (; lo < b->n && idx[2 * lo] == h; ++lo) {
      int64_t j = (int64_t)idx[2 * lo + 1];
      if (!key_equal(a->c[2 * i], &a->v[2 * i], b->c[2 * j], &b->v[2 * j])) continue;
      rc = equal_below(w, key, a->c[2 * i + 1], &a->v[2 * i + 1], b->c[2 * j + 1], &b->v[2 * j + 1],
                       out);
      break;
    }
    if (lo == b->n || idx[2 * lo] != h) { /* b lacks the key: the path ends there */
      w->steps[w->nsteps++] = key;
      rc = path_note(w);
      --w->nsteps;
    }
  }
  pf_free(idx);
  return rc;
}

static int fields_equal(walk* w, PFObjectHandle a, PFObjectHandle b, int* out) {
  const PFObjectTypeInfo* info;
  if (PFObjectTypeGetInfo(type_of(a), &info) != 0) return -1;
  *out = 1;
  for (int32_t i = 0; i < info->num_fields && *out; ++i) {
    PFValue va, vb;
    int fa, fb;
    if (PFObjectGetField(a, info->fields[i], &va, &fa) != 0 ||
        PFObjectGetField(b, info->fields[i], &vb, &fb) != 0 ||
        equal_below(w, FIELD(info->fields[i]->name), fa, &va, fb, &vb, out) != 0)
      return -1;
  }
  return 0;
}

/* Two objects of one type that may hold others: containers, instances. */
static int nested_equal(walk* w, PFObjectHandle a, PFObjectHandle b, uint32_t type, int* out) {
  int ia = path_find(w->a, w->depth, a), ib = path_find(w->b, w->depth, b);
  if (ia >= 0 || ib >= 0) {
    *out = ia == ib;
    reached(w, ia);
    return 0;
  }
  if (memo_find(&w->done, a, b)) {
    *out = 1;
    return 0;
  }
  if (w->depth == PF_STRUCTURAL_MAX_DEPTH) return too_deep(w);
  int level = w->depth, outer_low, rc = level_begin(w, a, b, &outer_low);
  w->a[w->depth] = a;
  w->b[w->depth] = b;
  ++w->depth;
  if (rc != 0) { /* past PF_STRUCTURAL_MAX_REWALK: nothing more is read */
  } else if (type >= kPFObjectTypeRegisteredBegin) {
    rc = fields_equal(w, a, b, out);
  } else {
    view va, vb = {0};
    rc = view_of(w, a, type, &va);
    if (rc == 0) rc = view_of(w, b, type, &vb);
    if (rc == 0) rc = rewalk_count(w, va.n);
    if (rc == 0) {
      *out = va.n == vb.n;
      if (*out && (type == kPFObjectMap || type == kPFObjectDict)) {
        rc = maps_equal(w, &va, &vb, out);
      } else {
        for (int64_t i = 0; i < va.n && *out && rc == 0; ++i)
          rc = equal_below(w, ITEM(i), va.c[i], &va.v[i], vb.c[i], &vb.v[i], out);
      }
    }
    view_done(&va);
    view_done(&vb);
  }
  --w->depth;
  return level_end(w, level, outer_low, rc, *out, a, b, 0);
}

static int objects_equal(walk* w, PFObjectHandle a, PFObjectHandle b, int* out) {
  uint32_t type = type_of(a);
  *out = 0;
  if (type != type_of(b)) return 0;
  switch (type) {
    case kPFObjectShape: {
      const int64_t *da, *db;
      int64_t na, nb;
      PFShapeGetData(a, &da, &na);
      PFShapeGetData(b, &db, &nb);
      *out = na == nb && (na == 0 || memcmp(da, db, (size_t)na * sizeof(int64_t)) == 0);
      return 0;
    }
    case kPFObjectArray:
    case kPFObjectMap:
    case kPFObjectList:
    case kPFObjectDict:
      return nested_equal(w, a, b, type, out);
    default:
      if (type >= kPFObjectTypeRegisteredBegin) return nested_equal(w, a, b, type, out);
      *out = a == b;
      return 0;
  }
}

static int equal_at(walk* w, int ca, const PFValue* a, int cb, const PFValue* b, int* out) {
  *out = 0;
  if (is_tensor(ca, a) || is_tensor(cb, b)) {
    DLTensor *ta, *tb;
    if (!is_tensor(ca, a) || !is_tensor(cb, b)) return 0;
    if (tensor_of(w, ca, a, &ta) != 0 || tensor_of(w, cb, b, &tb) != 0) return -1;
    return tensor_equal(w, ta, tb, out);
  }
  if (kind_of(ca) != kind_of(cb)) return 0;
  switch (kind_of(ca)) {
    case K_OBJECT:
      return objects_equal(w, a->v_handle, b->v_handle, out);
    case kPFFloat:
      *out = a->v_float64 == b->v_float64 || (isnan(a->v_float64) && isnan(b->v_float64));
      return 0;
    case kPFBool:
      *out = !a->v_int64 == !b->v_int64;
      return 0;
    case kPFDataType:
      *out = a->v_type.code == b->v_type.code && a->v_type.bits == b->v_type.bits &&
             a->v_type.lanes == b->v_type.lanes;
      return 0;
    case kPFDevice:
      *out = a->v_device.device_type == b->v_device.device_type &&
             a->v_device.device_id == b->v_device.device_id;
      return 0;
    default: /* int, str, bytes, null, opaque handles, extension codes */
      *out = key_equal(ca, a, cb, b);
      return 0;
  }
}

/* ---- hashing ---- */
static int hash(walk* w, int code, const PFValue* v, uint64_t* out);

static int nested_hash(walk* w, PFObjectHandle h, uint32_t type, uint64_t* out) {
  int at = path_find(w->a, w->depth, h);
  if (at >= 0) {
    *out = mix(0xc7c1e, (uint64_t)(w->depth - at));
    reached(w, at);
    return 0;
  }
  const pf_pair_entry* seen = memo_find(&w->done, h, NULL);
  if (seen) {
    *out = seen->value;
    return 0;
  }
  if (w->depth == PF_STRUCTURAL_MAX_DEPTH) return too_deep(w);
  int level = w->depth, outer_low, rc = level_begin(w, h, NULL, &outer_low);
  w->a[w->depth++] = h;
  uint64_t acc = mix(0x0b1ec7, type), item = 0;
  if (rc != 0) { /* past PF_STRUCTURAL_MAX_REWALK: nothing more is read */
  } else if (type >= kPFObjectTypeRegisteredBegin) {
    const PFObjectTypeInfo* info;
    rc = PFObjectTypeGetInfo(type, &info);
    for (int32_t i = 0; rc == 0 && i < info->num_fields; ++i) {
      PFValue v;
      int c;
      rc = PFObjectGetField(h, info->fields[i], &v, &c);
      if (rc == 0) rc = hash(w, c, &v, &item);
      if (rc == 0) acc = mix(acc, item);
    }
  } else {
    view vw;
    rc = view_of(w, h, type, &vw);
    if (rc == 0) rc = rewalk_count(w, vw.n);
    acc = mix(acc, (uint64_t)vw.n);
    if (type == kPFObjectMap || type == kPFObjectDict) {
      uint64_t sum = 0; /* entries in any order */
      for (int64_t i = 0; rc == 0 && i < vw.n; ++i) {
        rc = hash(w, vw.c[2 * i + 1], &vw.v[2 * i + 1], &item);
        sum += mix(key_hash(vw.c[2 * i], &vw.v[2 * i]), item);
      }
      acc = mix(acc, sum);
    } else {
      for (int64_t i = 0; rc == 0 && i < vw.n; ++i) {
        rc = hash(w, vw.c[i], &vw.v[i], &item);
        acc = mix(acc, item);
      }
    }
    view_done(&vw);
  }
  --w->depth;
  *out = acc;
  return level_end(w, level, outer_low, rc, 1, h, NULL, acc);
}

static int hash(walk* w, int code, const PFValue* v, uint64_t* out) {
  if (is_tensor(code, v)) {
    DLTensor* t;
    return tensor_of(w, code, v, &t) != 0 ? -1 : tensor_hash(w, t, out);
  }
  switch (kind_of(code)) {
    case K_OBJECT: {
      uint32_t type = type_of(v->v_handle);
      if (type == kPFObjectShape) {
        const int64_t* d;
        int64_t n;
        PFShapeGetData(v->v_handle, &d, &n);
        *out = mix(kPFObjectShape, XXH3_64bits_withSeed(d, (size_t)n * sizeof(int64_t), SEED));
        return 0;
      }
      if (type == kPFObjectArray || type == kPFObjectMap || type == kPFObjectList ||
          type == kPFObjectDict || type >= kPFObjectTypeRegisteredBegin)
        return nested_hash(w, v->v_handle, type, out);
      *out = mix(K_OBJECT, v->v_int64);
      return 0;
    }
    case kPFFloat:
      *out = mix(kPFFloat, float_bits(v->v_float64));
      return 0;
    case kPFBool:
      *out = mix(kPFBool, v->v_int64 != 0);
      return 0;
    case kPFDataType:
      *out = mix(kPFDataType,
                 (uint64_t)v->v_type.code << 32 | (uint64_t)v->v_type.bits << 16 | v->v_type.lanes);
      return 0;
    case kPFDevice:
      *out =
          mix(kPFDevice, (uint64_t)v->v_device.device_type << 32 | (uint32_t)v->v_device.device_id);
      return 0;
    default:
      *out = key_hash(code, v);
      return 0;
  }
}

/* ---- entry points ---- */
static walk* walk_new(const char* where, uint32_t flags) {
  if (flags & ~ALL_FLAGS) {
    PF_ERROR(kPFErrValueError, "%s: argument 'flags' has unknown bits 0x%x", where,
             (unsigned)(flags & ~ALL_FLAGS));
    return NULL;
  }
  walk* w = pf_malloc(sizeof(walk));
  if (!w) {
    pf_oom(where);
    return NULL;
  }
  w->where = where;
  w->snaps = (pf_snapshots){0};
  w->done = w->redo = (pf_pair_map){0};
  w->flags = flags;
  w->low = PF_STRUCTURAL_MAX_DEPTH;
  w->rewalk = -1;
  w->rewalked = 0;
  w->depth = w->nsteps = w->want_path = 0;
  w->path = NULL;
  w->path_len = w->path_cap = 0;
  return w;
}

/* Releases the snapshots (their items' finalizers may run here, after the
 * walk) and the walk; not the path, which the caller takes. */
static void walk_free(walk* w) {
  pf_pair_map_free(&w->done);
  pf_pair_map_free(&w->redo);
  pf_snapshots_release(&w->snaps);
  pf_free(w);
}

/* `out_name`: the name of `out` in the entry point's header. */
static int compare(const char* where, PFValue a, int a_code, PFValue b, int b_code, uint32_t flags,
                   int* out, const char* out_name, const char** mismatch) {
  if (!out) return pf_err_null_arg(where, out_name);
  if (pf_check_value(where, "argument", 0, a_code, &a) != 0 ||
      pf_check_value(where, "argument", 1, b_code, &b) != 0)
    return -1;
  walk* w = walk_new(where, flags);
  if (!w) return -1;
  w->want_path = mismatch != NULL;
  int eq, rc = equal(w, a_code, &a, b_code, &b, &eq);
  char* path = w->path;
  size_t path_len = w->path_len;
  /* The snapshots go first: a finalizer they run may return a string of
   * its own on this thread, which must not replace the path. */
  walk_free(w);
  PFValue ret = {0};
  int ret_code;
  if (rc == 0 && path) rc = PFFuncReturnString(kPFStr, path, path_len, &ret, &ret_code);
  pf_free(path);
  if (rc != 0) return -1;
  *out = eq;
  if (mismatch) *mismatch = eq ? NULL : ret.v_str;
  return 0;
}

static int hash_value(const char* where, PFValue value, int code, uint32_t flags, uint64_t* out) {
  if (!out) return pf_err_null_arg(where, "out");
  if (pf_check_value(where, "argument", 0, code, &value) != 0) return -1;
  walk* w = walk_new(where, flags);
  if (!w) return -1;
  uint64_t h;
  int rc = hash(w, code, &value, &h);
  walk_free(w);
  if (rc == 0) *out = h;
  return rc;
}

int PFStructuralEqual(PFValue a, int a_code, PFValue b, int b_code, int* out) {
  return compare(__func__, a, a_code, b, b_code, 0, out, "out", NULL);
}

int PFStructuralCompare(PFValue a, int a_code, PFValue b, int b_code, uint32_t flags, int* equal,
                        const char** mismatch) {
  return compare(__func__, a, a_code, b, b_code, flags, equal, "equal", mismatch);
}

int PFStructuralHash(PFValue value, int code, uint64_t* out) {
  return hash_value(__func__, value, code, 0, out);
}

int PFStructuralHashEx(PFValue value, int code, uint32_t flags, uint64_t* out) {
  return hash_value(__func__, value, code, flags, out);
}
