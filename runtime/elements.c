/* Type trees at a call: checking and converting a value against
 * array<T>, list<T>, map<K,V>, dict<K,V>, optional<T> and union<...>
 * (signature.h's element types). */
#include <stdio.h>
#include <string.h>

#include "object_type.h"

typedef struct {
  const pf_tnode* nodes;
  pf_tname_fn name; /* NULL: record nothing */
  const void* ctx;
  int quiet;      /* > 0 inside a union's tries: record nothing */
  char path[160]; /* ", element 3, value at key \"a\"" */
  size_t plen;
} tctx;

static int conv(tctx* c, int idx, int code, const PFValue* v, PFValue* out, int* out_code,
                PFObjectHandle* made);

static int loud(const tctx* c) { return c->name != NULL && c->quiet == 0; }

/* "who" and "what, element 3" for a message. */
static void names(const tctx* c, char* who, size_t wn, char* what, size_t tn) {
  c->name(c->ctx, who, wn, what, tn);
  size_t len = strlen(what);
  if (len < tn) snprintf(what + len, tn - len, "%s", c->path);
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

/* Appends ", element 3" (or a key) to the path; returns the length to
 * go back to. */
static size_t path_push(tctx* c, const char* fmt, int code, const PFValue* key, int64_t index) {
  size_t at = c->plen;
  if (c->name == NULL || at >= sizeof(c->path)) return at;
  size_t room = sizeof(c->path) - at;
  int n;
  if (key == NULL) n = snprintf(c->path + at, room, ", element %lld", (long long)index);
  else if (code == kPFStr) n = snprintf(c->path + at, room, fmt, "\"", key->v_str, "\"");
  else {
    char num[24];
    snprintf(num, sizeof(num), "%lld", (long long)key->v_int64);
    n = snprintf(c->path + at, room, fmt, "", num, "");
  }
  c->plen = n < 0 ? at : at + (size_t)n < sizeof(c->path) ? at + (size_t)n : sizeof(c->path) - 1;
  return at;
}
static void path_pop(tctx* c, size_t at) {
  if (c->name == NULL) return;
  c->plen = at;
  c->path[at] = '\0';
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
  entries e;
  int changed = ti != pf_ctype_object_type(n->t);
  if (entries_read(v->v_handle, ti, &e) != 0) {
    entries_free(&e);
    return -1;
  }
  int vkid = is_map ? c->nodes[n->first].next : n->first;
  for (int64_t i = 0; i < e.size; ++i) {
    size_t at;
    if (is_map) {
      at = path_push(c, ", key %s%.60s%s", e.key_codes[i], &e.keys[i], 0);
      int rc = conv_entry(c, n->first, &e.keys[i], &e.key_codes[i], &e, &changed);
      path_pop(c, at);
      if (rc != 0) {
        entries_free(&e);
        return -1;
      }
      at = path_push(c, ", value at key %s%.60s%s", e.key_codes[i], &e.keys[i], 0);
    } else {
      at = path_push(c, NULL, 0, NULL, i);
    }
    int rc = conv_entry(c, vkid, &e.vals[i], &e.val_codes[i], &e, &changed);
    path_pop(c, at);
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
  c.path[0] = '\0';
  c.plen = 0;
  return conv(&c, idx, code, v, out, out_code, made);
}
