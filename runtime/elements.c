/* Type trees at a call: checking and converting a value against
 * array<T>, list<T>, map<K,V>, dict<K,V>, optional<T> and union<...>
 * (signature.h's element types). */
#include <stdio.h>
#include <string.h>

#include "object_type.h"

/* Where in the value a conversion is: one frame per container entered,
 * spelled out only for a message. */
typedef struct {
  int kind; /* 0: element `index`; 1: key `key`; 2: the value at key `key` */
  int key_code;
  int64_t index;
  PFValue key;
} frame;

typedef struct {
  const pf_tnode* nodes;
  pf_tname_fn name; /* NULL: record nothing */
  const void* ctx;
  int quiet; /* > 0 inside a union's tries: record nothing */
  int depth;
  frame frames[PF_SIGNATURE_DEPTH_MAX + 1];
  /* A container met inside the value, for one type node (a, b: the
   * container and the node's index), and what it became (value: the
   * converted container, or 0 when it passes as it is). The table holds a
   * reference to both until the conversion ends, so that a container that
   * the value holds in many places is converted once and the converted
   * one is shared as the given one was. */
  pf_pair_map done;
} tctx;

static int conv(tctx* c, int idx, int code, const PFValue* v, PFValue* out, int* out_code,
                PFObjectHandle* made);

static int loud(const tctx* c) { return c->name != NULL && c->quiet == 0; }

/* "who" and "what, element 3, value at key \"a\"" for a message. */
static void names(const tctx* c, char* who, size_t wn, char* what, size_t tn) {
  c->name(c->ctx, who, wn, what, tn);
  for (int k = 0; k < c->depth; ++k) {
    const frame* f = &c->frames[k];
    size_t len = strlen(what);
    if (len + 1 >= tn) return;
    const char* label = f->kind == 1 ? "key" : "value at key";
    if (f->kind == 0) snprintf(what + len, tn - len, ", element %lld", (long long)f->index);
    else if (f->key_code == kPFStr)
      snprintf(what + len, tn - len, ", %s \"%.60s\"", label, f->key.v_str);
    else snprintf(what + len, tn - len, ", %s %lld", label, (long long)f->key.v_int64);
  }
}

/* A leaf that does not convert: the scalar conversions' own error. */
static int leaf_error(tctx* c, const pf_tnode* n, pf_conv k, int code, const PFValue* v,
                      const DLTensor* dl) {
  if (!loud(c)) return -1;
  char who[512], what[320];
  names(c, who, sizeof(who), what, sizeof(what));
  if (k == pf_conv_tdtype || k == pf_conv_tshape) return pf_tc_error(k, who, what, &n->tc, dl);
  return pf_conv_error_tc(k, who, what, n->t, n->obj, &n->tc, code, v);
}

/* A value that is not the container, optional or union wanted. */
static int tree_error(tctx* c, int idx, int code, const PFValue* v) {
  if (!loud(c)) return -1;
  char who[512], what[320], want[200], got[80];
  names(c, who, sizeof(who), what, sizeof(what));
  pf_tnode_format(c->nodes, idx, want, sizeof(want));
  const char* tn = NULL;
  if (pf_code_is_handle(code) && pf_is_object(v->v_handle, 0))
    tn = PFObjectTypeName(((const pf_object*)v->v_handle)->type_index);
  if (tn != NULL) snprintf(got, sizeof(got), "%s object", tn);
  else snprintf(got, sizeof(got), "%s", PFTypeCodeName(code) ? PFTypeCodeName(code) : "?");
  /* A call's arguments or result: the caller's error, with no place (PF_ERROR in base.h). */
  return PFErrorSetFormat(kPFErrTypeError, "%s: %s: expected %s, got %s", who, what, want, got);
}

static int conv_leaf(tctx* c, const pf_tnode* n, int code, const PFValue* v, PFValue* out,
                     int* out_code) {
  *out = *v;
  *out_code = code;
  if (n->t == pf_t_any) return 0;
  pf_cvalue cv;
  pf_conv k = pf_packed_to_c(n->t, n->obj, code, v, &cv, 0);
  if (k == pf_conv_ok && n->t == pf_t_tensor && n->tc.flags && cv.t != NULL)
    k = pf_tc_check(&n->tc, cv.t);
  if (k != pf_conv_ok) return leaf_error(c, n, k, code, v, cv.t);
  /* Numbers take their type's code (an int for a float64 becomes a
   * float); every other value passes as it came (a tensor object stays an
   * object, which a container keeps). */
  if (n->t < pf_t_str && pf_c_to_packed(n->t, n->obj, &cv, out, out_code) != 0)
    return leaf_error(c, n, pf_conv_range, code, v, NULL);
  return 0;
}

/* Enters an entry of a container (at most one frame per tree level). */
static void enter(tctx* c, int kind, int64_t index, int key_code, const PFValue* key) {
  frame* f = &c->frames[c->depth++];
  f->kind = kind;
  f->index = index;
  f->key_code = key_code;
  if (key) f->key = *key;
}

/* Whether the leaf element (code, v) already is what node n wants, so it
 * needs no conversion: the common cases of a hot loop. */
static int exact(const pf_tnode* n, int code) {
  switch (n->t) {
    case pf_t_int64:
      return code == kPFInt;
    case pf_t_float64:
      return code == kPFFloat;
    case pf_t_str:
      return code == kPFStr;
    case pf_t_bool:
      return code == kPFBool;
    case pf_t_any:
      return 1;
    default:
      return 0;
  }
}

/* Whether every item of Array `array` already is what `kid` wants: the
 * common case, read in place with no copy. */
static int all_exact(const pf_tnode* kid, PFObjectHandle array) {
  int64_t size;
  const PFValue* values;
  const int32_t* codes;
  pf_array_view(array, &size, &values, &codes);
  int want = kid->t == pf_t_int64     ? kPFInt
             : kid->t == pf_t_float64 ? kPFFloat
             : kid->t == pf_t_str     ? kPFStr
             : kid->t == pf_t_bool    ? kPFBool
                                      : -1;
  if (kid->t == pf_t_any) return 1;
  if (want < 0) return 0;
  int64_t i = 0;
  while (i < size && codes[i] == want) ++i;
  return i == size;
}

/* ---- containers converted already ---- */
/* Keeps what `in` became for node idx (not present); -1 when out of
 * memory. */
static int done_add(tctx* c, PFObjectHandle in, int idx, PFObjectHandle out) {
  if (pf_pair_add(&c->done, in, (uintptr_t)idx, (uint64_t)(uintptr_t)out) != 0)
    return pf_oom("typed call");
  pf_object_retain(in);
  if (out) pf_object_retain(out);
  return 0;
}

static void done_free(tctx* c) {
  for (size_t i = 0; i < c->done.cap; ++i) {
    PFObjectFree((PFObjectHandle)c->done.slot[i].a);
    PFObjectFree((PFObjectHandle)(uintptr_t)c->done.slot[i].value);
  }
  pf_pair_map_free(&c->done);
}

/* A container's entries as arrays: values (and keys, for a map kind),
 * read from a snapshot that `keep` holds. */
typedef struct {
  int64_t size;
  PFValue* keys;
  int* key_codes;
  PFValue* vals;
  int* val_codes;
  PFObjectHandle keep; /* a snapshot Array to release, or NULL */
  PFObjectHandle* made;
  int64_t nmade;
} entries;

static void entries_free(entries* e) {
  for (int64_t i = 0; i < e->nmade; ++i) PFObjectFree(e->made[i]);
  PFObjectFree(e->keep);
  pf_free(e->keys);
  pf_free(e->key_codes);
  pf_free(e->vals);
  pf_free(e->val_codes);
  pf_free(e->made);
}

static int entries_alloc(entries* e, int with_keys, const char* where) {
  size_t n = (size_t)(e->size ? e->size : 1);
  e->vals = pf_malloc(n * sizeof(PFValue));
  e->val_codes = pf_malloc(n * sizeof(int));
  if (with_keys) {
    e->keys = pf_malloc(n * sizeof(PFValue));
    e->key_codes = pf_malloc(n * sizeof(int));
  }
  if (e->vals == NULL || e->val_codes == NULL || (with_keys && (!e->keys || !e->key_codes)))
    return pf_oom(where);
  return 0;
}

/* Reads the entries of `src` (an Array, List, Map or Dict). */
static int entries_read(PFObjectHandle src, uint32_t ti, entries* e) {
  static const char* const where = "typed call";
  memset(e, 0, sizeof(*e));
  if (ti == kPFObjectList) {
    if (PFListToArray(src, 0, INT64_MAX, &e->keep) != 0) return -1;
    src = e->keep;
    ti = kPFObjectArray;
  } else if (ti == kPFObjectDict) {
    if (PFDictToArray(src, &e->keep) != 0) return -1;
    if (PFArrayGetSize(e->keep, &e->size) != 0) return -1;
    e->size /= 2;
    if (entries_alloc(e, 1, where) != 0) return -1;
    for (int64_t i = 0; i < e->size; ++i)
      if (PFArrayGetItem(e->keep, 2 * i, &e->keys[i], &e->key_codes[i]) != 0 ||
          PFArrayGetItem(e->keep, 2 * i + 1, &e->vals[i], &e->val_codes[i]) != 0)
        return -1;
    return 0;
  }
  if (ti == kPFObjectArray) {
    if (PFArrayGetSize(src, &e->size) != 0 || entries_alloc(e, 0, where) != 0) return -1;
    return PFArrayGetItems(src, 0, e->size, e->vals, e->val_codes);
  }
  if (PFMapGetSize(src, &e->size) != 0 || entries_alloc(e, 1, where) != 0) return -1;
  return PFMapGetItems(src, 0, e->size, e->keys, e->key_codes, e->vals, e->val_codes);
}

/* Converts one entry's part in place; notes a change and what was made. */
static int conv_entry(tctx* c, int kid, PFValue* v, int* code, entries* e, int* changed) {
  if (exact(&c->nodes[kid], *code)) return 0;
  PFValue out;
  int out_code;
  PFObjectHandle made = NULL;
  if (conv(c, kid, *code, v, &out, &out_code, &made) != 0) return -1;
  if (made != NULL) {
    if (e->made == NULL &&
        (e->made = pf_malloc(sizeof(PFObjectHandle) * 2 * (size_t)e->size)) == NULL) {
      PFObjectFree(made);
      return pf_oom("typed call");
    }
    e->made[e->nmade++] = made;
  }
  if (out_code != *code || memcmp(&out, v, sizeof(PFValue)) != 0) *changed = 1;
  *v = out;
  *code = out_code;
  return 0;
}

/* array<T>, list<T>, map<K,V> or dict<K,V>. */
static int conv_container(tctx* c, int idx, int code, const PFValue* v, PFValue* out, int* out_code,
                          PFObjectHandle* made) {
  const pf_tnode* n = &c->nodes[idx];
  *out = *v;
  *out_code = code;
  if (code == kPFNull) return 0; /* as the container type alone takes it */
  int is_map = n->t == pf_t_map || n->t == pf_t_dict;
  uint32_t ti = code == kPFObjectHandle && pf_is_object(v->v_handle, 0)
                    ? ((const pf_object*)v->v_handle)->type_index
                    : 0;
  int ok = is_map ? ti == kPFObjectMap || ti == kPFObjectDict
                  : ti == kPFObjectArray || ti == kPFObjectList;
  if (!ok) return tree_error(c, idx, code, v);
  /* Inside the value, a container met before for this node is what it
   * became then (the value as a whole is met once). */
  int nested = c->depth > 0;
  const pf_pair_entry* seen = nested ? pf_pair_find(&c->done, v->v_handle, (uintptr_t)idx) : NULL;
  if (seen) {
    PFObjectHandle was = (PFObjectHandle)(uintptr_t)seen->value;
    if (was) {
      pf_object_retain(was);
      *made = out->v_handle = was;
    }
    return 0;
  }
  int changed = ti != pf_ctype_object_type(n->t);
  int keep = nested && pf_object_held_twice(v->v_handle);
  if (!changed && ti == kPFObjectArray && all_exact(&c->nodes[n->first], v->v_handle))
    return keep ? done_add(c, v->v_handle, idx, NULL) : 0;
  entries e;
  if (entries_read(v->v_handle, ti, &e) != 0) {
    entries_free(&e);
    return -1;
  }
  int vkid = is_map ? c->nodes[n->first].next : n->first;
  for (int64_t i = 0; i < e.size; ++i) {
    int rc = 0;
    if (is_map) {
      /* The key as given, for the messages of both the key and its value. */
      PFValue key = e.keys[i];
      int key_code = e.key_codes[i];
      enter(c, 1, i, key_code, &key);
      rc = conv_entry(c, n->first, &e.keys[i], &e.key_codes[i], &e, &changed);
      c->frames[c->depth - 1].kind = 2;
    } else {
      enter(c, 0, i, 0, NULL);
    }
    if (rc == 0) rc = conv_entry(c, vkid, &e.vals[i], &e.val_codes[i], &e, &changed);
    c->depth--;
    if (rc != 0) {
      entries_free(&e);
      return -1;
    }
  }
  int st = 0;
  if (changed) {
    PFObjectHandle o = NULL;
    switch (n->t) {
      case pf_t_array:
        st = PFArrayCreate(e.vals, e.val_codes, e.size, &o);
        break;
      case pf_t_list:
        st = PFListCreate(e.vals, e.val_codes, e.size, &o);
        break;
      case pf_t_map:
        st = PFMapCreate(e.keys, e.key_codes, e.vals, e.val_codes, e.size, &o);
        break;
      default:
        st = PFDictCreate(e.keys, e.key_codes, e.vals, e.val_codes, e.size, &o);
        break;
    }
    if (st == 0) {
      *made = o;
      out->v_handle = o;
      *out_code = kPFObjectHandle;
    }
  }
  entries_free(&e);
  if (st == 0 && keep && done_add(c, v->v_handle, idx, *made) != 0) {
    PFObjectFree(*made);
    *made = NULL;
    return -1;
  }
  return st;
}

static int conv(tctx* c, int idx, int code, const PFValue* v, PFValue* out, int* out_code,
                PFObjectHandle* made) {
  const pf_tnode* n = &c->nodes[idx];
  *made = NULL;
  if (n->t == pf_t_optional) {
    if (code == kPFNull) {
      *out = *v;
      *out_code = code;
      return 0;
    }
    return conv(c, n->first, code, v, out, out_code, made);
  }
  if (n->t == pf_t_union) {
    c->quiet++;
    int rc = -1;
    for (int k = n->first; k >= 0 && rc != 0; k = c->nodes[k].next)
      rc = conv(c, k, code, v, out, out_code, made);
    c->quiet--;
    if (rc == 0) return 0;
    PFErrorClear();
    return tree_error(c, idx, code, v);
  }
  if (n->nkids > 0) return conv_container(c, idx, code, v, out, out_code, made);
  return conv_leaf(c, n, code, v, out, out_code);
}

int pf_tree_convert(const pf_tnode* nodes, int idx, pf_tname_fn name, const void* ctx, int code,
                    const PFValue* v, PFValue* out, int* out_code, PFObjectHandle* made) {
  tctx c;
  c.nodes = nodes;
  c.name = name;
  c.ctx = ctx;
  c.quiet = 0;
  c.depth = 0;
  c.done = (pf_pair_map){0};
  int rc = conv(&c, idx, code, v, out, out_code, made);
  done_free(&c);
  return rc;
}
