/* A parsed signature as data: one block with the types, the public
 * parameter table and every string it points to (typed.h, pf_siginfo). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signature.h"

/* A writer that counts when `p` is NULL, so that one walk sizes the block
 * and the next fills it. */
typedef struct {
  char* p;
  size_t n;
  size_t cap; /* with p: write at most cap bytes (0: no limit) */
} wbuf;

static void w_put(wbuf* w, const char* s, size_t n) {
  if (w->p && (w->cap == 0 || w->n + n <= w->cap)) memcpy(w->p + w->n, s, n);
  else if (w->p && w->n < w->cap) memcpy(w->p + w->n, s, w->cap - w->n);
  w->n += n;
}
static void w_str(wbuf* w, const char* s) { w_put(w, s, strlen(s)); }
static void w_char(wbuf* w, char c) { w_put(w, &c, 1); }
/* Ends a string begun at `start`; returns it (NULL when counting). */
static const char* w_end(wbuf* w, size_t start) {
  w_char(w, '\0');
  return w->p ? w->p + start : NULL;
}

/* A type without element types: its name, obj<KEY>, tensor<...>. */
static void w_leaf(wbuf* w, int t, const struct pf_type* obj, const pf_tc* tc) {
  char buf[96];
  if (t == pf_t_tensor && tc->flags) {
    pf_tc_format(tc, buf, sizeof(buf));
    w_str(w, buf);
  } else {
    w_str(w, pf_ctype_name(t, obj));
  }
}

static void w_tree(wbuf* w, const pf_tnode* nodes, int idx) {
  const pf_tnode* n = &nodes[idx];
  if (n->nkids == 0) {
    w_leaf(w, n->t, n->obj, &n->tc);
    return;
  }
  w_str(w, pf_ctypes[n->t].name);
  w_char(w, '<');
  for (int k = n->first; k >= 0; k = nodes[k].next) {
    if (k != n->first) w_char(w, ',');
    w_tree(w, nodes, k);
  }
  w_char(w, '>');
}

size_t pf_tnode_format(const pf_tnode* nodes, int idx, char* buf, size_t n) {
  wbuf w = {buf, 0, n ? n - 1 : 0};
  if (n == 0) w.p = NULL;
  w_tree(&w, nodes, idx);
  if (n) buf[w.n < n ? w.n : n - 1] = '\0';
  return w.n;
}

static void w_type(wbuf* w, const pf_parsed_sig* ps, const pf_parsed_param* p) {
  if (p->et >= 0) w_tree(w, ps->nodes, p->et);
  else w_leaf(w, p->t, p->obj, &p->tc);
}

/* The shortest decimal that reads back to d (to the same float, for a
 * float32), written so that it reads as a float. */
static void float_text(double d, int is_f32, char* buf, size_t n) {
  if (isnan(d)) {
    snprintf(buf, n, "nan");
    return;
  }
  if (isinf(d)) {
    snprintf(buf, n, "%sinf", d < 0 ? "-" : "");
    return;
  }
  locale_t old = pf_c_locale_enter();
  for (int prec = 1; prec <= 17; ++prec) {
    snprintf(buf, n, "%.*g", prec, d);
    double back = strtod(buf, NULL);
    if (is_f32 ? (float)back == (float)d : back == d) break;
  }
  pf_c_locale_leave(old);
  if (strpbrk(buf, ".e") == NULL && strlen(buf) + 3 <= n) strcat(buf, ".0");
}

static void w_default(wbuf* w, const char* text, const pf_parsed_param* p) {
  char buf[64];
  switch (p->dcode) {
    case kPFInt:
      snprintf(buf, sizeof(buf), "%lld", (long long)p->dval.v_int64);
      break;
    case kPFFloat:
      float_text(p->dval.v_float64, p->t == pf_t_float32, buf, sizeof(buf));
      break;
    case kPFBool:
      snprintf(buf, sizeof(buf), "%s", p->dval.v_int64 ? "true" : "false");
      break;
    case kPFNull:
      snprintf(buf, sizeof(buf), "null");
      break;
    case kPFDataType: {
      char dt[PF_DTYPE_STRING_MAX];
      if (PFDataTypeToString(p->dval.v_type, dt, sizeof(dt)) != 0) dt[0] = '\0';
      snprintf(buf, sizeof(buf), "\"%s\"", dt);
      break;
    }
    case kPFDevice:
      snprintf(buf, sizeof(buf), "\"%s:%d\"", pf_device_name(p->dval.v_device.device_type),
               (int)p->dval.v_device.device_id);
      break;
    default: { /* str or bytes: the decoded bytes, escaped again */
      const char* s = text + p->str_at;
      size_t i = 0;
      if (p->dcode == kPFBytes) w_char(w, 'b');
      w_char(w, '"');
      while (i < p->str_len) {
        unsigned char c = pf_sig_next_byte(s, &i);
        if (c == '"' || c == '\\') {
          w_char(w, '\\');
          w_char(w, (char)c);
        } else if (c == '\n') {
          w_str(w, "\\n");
        } else if (c == '\t') {
          w_str(w, "\\t");
        } else if (c == '\r') {
          w_str(w, "\\r");
        } else if (c < 0x20 || c > 0x7e) {
          char esc[5];
          snprintf(esc, sizeof(esc), "\\x%02x", c);
          w_str(w, esc);
        } else {
          w_char(w, (char)c);
        }
      }
      w_char(w, '"');
      return;
    }
  }
  w_str(w, buf);
}

static void w_param_text(wbuf* w, const char* text, const pf_parsed_sig* ps,
                         const pf_parsed_param* p) {
  if (p->name_len) {
    w_put(w, text + p->name_at, p->name_len);
    w_char(w, ':');
  }
  w_type(w, ps, p);
  if (p->has_default) {
    w_char(w, '=');
    w_default(w, text, p);
  }
}

/* Where the type descriptions go: the nodes' (PFTypeInfo i for node i),
 * then one per position without a tree (next_free on), and the element
 * type pointers (next_arg on). NULL areas when counting. */
typedef struct {
  PFTypeInfo* types;
  const PFTypeInfo** args;
  int next_free, next_arg;
} tlay;

/* The public description of type tree node `idx` (and its element
 * types'), its text at the writer. */
static const PFTypeInfo* lay_out_tree(wbuf* w, const pf_tnode* nodes, int idx, tlay* tl) {
  const pf_tnode* n = &nodes[idx];
  size_t at = w->n;
  w_tree(w, nodes, idx);
  const char* text = w_end(w, at);
  for (int k = n->first; k >= 0; k = nodes[k].next) lay_out_tree(w, nodes, k, tl);
  if (tl->types == NULL) return NULL;
  PFTypeInfo* ti = &tl->types[idx];
  memset(ti, 0, sizeof(*ti));
  ti->text = text;
  ti->name = pf_ctypes[n->t].name;
  ti->type_code = pf_ctypes[n->t].result_code;
  ti->object_type = n->t == pf_t_obj ? n->obj->info.type_index : 0;
  ti->tensor = pf_tc_public(&n->tc);
  ti->num_args = n->nkids;
  ti->args = &tl->args[tl->next_arg];
  for (int k = n->first; k >= 0; k = nodes[k].next) tl->args[tl->next_arg++] = &tl->types[k];
  return ti;
}

/* The public description of one parameter (or the result, `name` 0). */
static void lay_out_param(wbuf* w, const char* text, const pf_parsed_sig* ps,
                          const pf_parsed_param* p, pf_param* out, tlay* tl) {
  PFParamInfo info;
  memset(&info, 0, sizeof(info));
  info.type_index = p->t == pf_t_obj ? -1 : p->t;
  info.type_code = pf_ctypes[p->t].result_code;
  info.object_type = p->obj ? p->obj->info.type_index : 0;
  info.default_code = kPFNull;
  info.tensor = pf_tc_public(&p->tc);
  size_t at = w->n;
  if (p->name_len) {
    w_put(w, text + p->name_at, p->name_len);
    info.name = w_end(w, at);
  }
  at = w->n;
  w_type(w, ps, p);
  info.type = w_end(w, at);
  if (p->et >= 0) {
    info.type_info = lay_out_tree(w, ps->nodes, p->et, tl);
  } else if (tl->types != NULL) {
    PFTypeInfo* ti = &tl->types[tl->next_free++];
    memset(ti, 0, sizeof(*ti));
    ti->text = info.type;
    ti->name = pf_ctypes[p->t].name;
    ti->type_code = info.type_code;
    ti->object_type = info.object_type;
    ti->tensor = info.tensor;
    ti->args = NULL;
    info.type_info = ti;
  }
  if (p->has_default) {
    info.has_default = 1;
    info.default_code = p->dcode;
    info.default_value = p->dval;
    at = w->n;
    w_default(w, text, p);
    info.default_text = w_end(w, at);
    if (p->dcode == kPFStr || p->dcode == kPFBytes) {
      at = w->n;
      if (w->p) pf_sig_decode_string(text + p->str_at, p->str_len, w->p + at);
      w->n += p->dec_len;
      const char* data = w_end(w, at);
      if (p->dcode == kPFStr) {
        info.default_value.v_str = data;
      } else if (out) {
        out->bytes.data = data;
        out->bytes.size = p->dec_len;
        info.default_value.v_handle = &out->bytes;
      }
    }
  }
  if (out) out->pub = info;
}

/* Walks the whole layout: sizes the strings (info NULL) or writes them. */
static void lay_out(wbuf* w, const char* text, const pf_parsed_sig* ps, pf_siginfo* info,
                    tlay* tl) {
  size_t at = w->n;
  w_type(w, ps, &ps->ret);
  w_char(w, '(');
  for (int k = 0; k < ps->n; ++k) {
    if (k) w_char(w, ',');
    w_param_text(w, text, ps, &ps->p[k]);
  }
  w_char(w, ')');
  const char* canon = w_end(w, at);
  lay_out_param(w, text, ps, &ps->ret, info ? &info->result : NULL, tl);
  for (int k = 0; k < ps->n; ++k)
    lay_out_param(w, text, ps, &ps->p[k], info ? &info->params[k] : NULL, tl);
  if (info == NULL) return;
  info->pub.text = canon;
  info->pub.num_params = ps->n;
  info->pub.num_required = ps->n;
  for (int k = ps->n - 1; k >= 0 && ps->p[k].has_default; --k) info->pub.num_required = k;
  info->pub.named = ps->named;
  info->pub.result = &info->result.pub;
  for (int k = 0; k < ps->n; ++k) {
    int has_rest;
    info->ptrs[k] = &info->params[k].pub;
    info->name_keys[k] = ps->named ? pf_name_key(info->params[k].pub.name, &has_rest) : 0;
  }
  info->pub.params = info->ptrs;
}

int pf_siginfo_parse(const char* where, const char* text, pf_siginfo** out) {
  pf_parsed_sig ps;
  if (pf_sig_read(where, text, &ps) != 0) return -1;
  wbuf count = {NULL, 0, 0};
  tlay none = {NULL, NULL, 0, 0};
  lay_out(&count, text, &ps, NULL, &none);
  /* The block: the header and parameters, the nodes, the type
   * descriptions (every node's, then one per position without a tree),
   * the element type pointers, the strings. */
  int trees = ps.ret.et >= 0;
  for (int k = 0; k < ps.n; ++k) trees += ps.p[k].et >= 0;
  size_t ntypes = (size_t)ps.nnodes + (size_t)(ps.n + 1 - trees);
  size_t head = sizeof(pf_siginfo) + sizeof(pf_param) * (size_t)ps.n;
  size_t nodes_at = head, types_at = nodes_at + sizeof(pf_tnode) * (size_t)ps.nnodes;
  size_t args_at = types_at + sizeof(PFTypeInfo) * ntypes;
  size_t strings_at = args_at + sizeof(PFTypeInfo*) * (size_t)ps.nnodes;
  pf_siginfo* info = pf_malloc(strings_at + count.n);
  if (info == NULL) return pf_oom(where);
  memset(info, 0, head);
  pf_sig_of(&ps, &info->sig);
  char* block = (char*)info;
  if (ps.nnodes) {
    memcpy(block + nodes_at, ps.nodes, sizeof(pf_tnode) * (size_t)ps.nnodes);
    info->sig.nodes = (const pf_tnode*)(block + nodes_at);
  }
  tlay tl = {(PFTypeInfo*)(block + types_at), (const PFTypeInfo**)(block + args_at), ps.nnodes, 0};
  wbuf w = {block + strings_at, 0, 0};
  lay_out(&w, text, &ps, info, &tl);
  *out = info;
  return 0;
}

void pf_siginfo_free(pf_siginfo* info) { pf_free(info); }

char* pf_siginfo_text_without(const pf_siginfo* info, uint32_t drop) {
  wbuf w = {NULL, 0, 0};
  char* s = NULL;
  for (int pass = 0; pass < 2; ++pass) {
    w.n = 0;
    w_str(&w, info->result.pub.type);
    w_char(&w, '(');
    int first = 1;
    for (int k = 0; k < info->pub.num_params; ++k) {
      if (drop & (1u << k)) continue;
      const PFParamInfo* p = &info->params[k].pub;
      if (!first) w_char(&w, ',');
      first = 0;
      if (p->name) {
        w_str(&w, p->name);
        w_char(&w, ':');
      }
      w_str(&w, p->type);
      if (p->has_default) {
        w_char(&w, '=');
        w_str(&w, p->default_text);
      }
    }
    w_char(&w, ')');
    w_char(&w, '\0');
    if (pass == 0) {
      s = pf_malloc(w.n);
      if (s == NULL) return NULL;
      w.p = s;
    }
  }
  return s;
}

int PFSignatureParse(const char* text, PFSignatureInfo** out) {
  PF_CHECK_ARG(text);
  PF_CHECK_ARG(out);
  pf_siginfo* info;
  if (pf_siginfo_parse("PFSignatureParse", text, &info) != 0) return -1;
  *out = &info->pub;
  return 0;
}

void PFSignatureInfoFree(PFSignatureInfo* info) { pf_siginfo_free((pf_siginfo*)info); }

/* The public tables are read by bindings through mirrors: pinned (on
 * 64-bit targets, whose layout the bindings check). */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(sizeof(PFTensorConstraint) == 16 && offsetof(PFTensorConstraint, dtype) == 8 &&
                   offsetof(PFTensorConstraint, device_type) == 12,
               "PFTensorConstraint's layout is ABI");
_Static_assert(offsetof(PFParamInfo, type) == sizeof(void*) &&
                   offsetof(PFParamInfo, type_index) == 2 * sizeof(void*) &&
                   offsetof(PFParamInfo, default_value) == 2 * sizeof(void*) + 16 &&
                   offsetof(PFParamInfo, default_text) == 2 * sizeof(void*) + 32 &&
                   offsetof(PFParamInfo, tensor) == 3 * sizeof(void*) + 32,
               "PFParamInfo's layout is ABI");
_Static_assert(offsetof(PFSignatureInfo, num_params) == sizeof(void*) &&
                   offsetof(PFSignatureInfo, result) == sizeof(void*) + 16 &&
                   offsetof(PFSignatureInfo, params) == 2 * sizeof(void*) + 16,
               "PFSignatureInfo's layout is ABI");
#endif
