/* JSON documents of object graphs (include/packedfunc/serialize.h; the
 * format: docs/serialization.md). */
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "json_parse.h"
#include "object_type.h"

/* Ints past this magnitude are written as decimal text. */
#define EXACT_INT ((int64_t)1 << 53)

/* ---- base64 ---- */
static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static int b64_digit(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  return c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes s[0 .. n) into out (room for n / 4 * 3 bytes); -1 when it is
 * not padded base64. */
static int b64_decode(const char* s, size_t n, unsigned char* out, size_t* out_n) {
  if (n % 4 != 0) return -1;
  size_t k = 0;
  for (size_t i = 0; i < n; i += 4) {
    int d[4], pad = 0;
    for (int j = 0; j < 4; ++j) {
      d[j] = b64_digit((unsigned char)s[i + j]);
      if (s[i + j] == '=' && i + 4 == n && j >= 2) ++pad, d[j] = 0;
      else if (d[j] < 0 || pad) return -1;
    }
    uint32_t x = (uint32_t)d[0] << 18 | (uint32_t)d[1] << 12 | (uint32_t)d[2] << 6 | (uint32_t)d[3];
    out[k++] = (unsigned char)(x >> 16);
    if (pad < 2) out[k++] = (unsigned char)(x >> 8);
    if (pad < 1) out[k++] = (unsigned char)x;
  }
  *out_n = k;
  return 0;
}

/* ======================================================================== */
/* Writing                                                                  */
/* ======================================================================== */

/* Text that grows; a growth that fails marks it, and later writes do
 * nothing. */
typedef struct {
  char* p;
  size_t n, cap;
  int oom;
} textbuf;

/* room's growth, out of line: room itself is a compare that every write
 * makes, inlined. */
static int grow(textbuf* t, size_t more) {
  size_t cap = t->cap ? t->cap : 4096;
  while (cap - t->n < more && cap <= SIZE_MAX / 4) cap *= 2;
  char* p = t->oom || cap - t->n < more ? NULL : pf_realloc(t->p, cap);
  if (!p) {
    t->oom = 1;
    return -1;
  }
  t->p = p;
  t->cap = cap;
  return 0;
}

static inline int room(textbuf* t, size_t more) {
  return t->cap - t->n >= more ? 0 : grow(t, more);
}

static void put(textbuf* t, const void* s, size_t n) {
  if (room(t, n) == 0) memcpy(t->p + t->n, s, n), t->n += n;
}

static void put_c(textbuf* t, char c) {
  if (room(t, 1) == 0) t->p[t->n++] = c;
}

#define PUT_LIT(t, s) put(t, s, sizeof(s) - 1)

/* Decimal text of x, exact: two digits a step, written backward into
 * the end of a buffer and copied as a fixed 24 bytes (inline, no call of
 * memcpy), of which the text's n count. */
static void put_i64(textbuf* t, int64_t x) {
  static const char pairs[] =
      "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445"
      "46474849505152535455565758596061626364656667686970717273747576777879808182838485868788899091"
      "9293949596979899";
  char d[48], *e = d + 24, *s = e;
  memset(e, 0, 24); /* what the copy takes past the text is defined */
  uint64_t u = x < 0 ? 0 - (uint64_t)x : (uint64_t)x;
  for (; u >= 100; u /= 100) memcpy(s -= 2, &pairs[u % 100 * 2], 2);
  if (u >= 10) memcpy(s -= 2, &pairs[u * 2], 2);
  else *--s = (char)('0' + u);
  if (x < 0) *--s = '-';
  if (room(t, 24) != 0) return;
  memcpy(t->p + t->n, s, 24);
  t->n += (size_t)(e - s);
}

/* An object met on the walk, and its index in the node table: -1 while
 * its node is being written. */
typedef struct {
  const void* obj;
  int64_t index;
} seen;

/* Open addressing by pointer, linear probing, at most half full. */
typedef struct {
  seen* slot;
  size_t cap, count;
} seen_map;

/* The slot of obj in a table of cap (a power of two) slots, or the empty
 * slot where it would go. */
static seen* probe(seen* slot, size_t cap, const void* obj) {
  uint64_t h = (uint64_t)(uintptr_t)obj * 0x9E3779B97F4A7C15u;
  size_t i = (size_t)(h >> 32) & (cap - 1);
  while (slot[i].obj && slot[i].obj != obj) i = (i + 1) & (cap - 1);
  return &slot[i];
}

static seen* seen_find(const seen_map* m, const void* obj) {
  seen* s = m->cap ? probe(m->slot, m->cap, obj) : NULL;
  return s && s->obj ? s : NULL;
}

/* The slot of obj, or the empty one where it goes, in a table with room
 * for one more (grown first when it has none); NULL when out of memory.
 * One probe for a lookup that adds when absent: a probe is a cache miss
 * in a large table. The slot stays valid until the table next grows. */
static seen* seen_slot(seen_map* m, const void* obj) {
  if ((m->count + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 1024;
    seen* slot = pf_calloc(cap, sizeof(seen));
    if (!slot) return NULL;
    for (size_t i = 0; i < m->cap; ++i)
      if (m->slot[i].obj) *probe(slot, cap, m->slot[i].obj) = m->slot[i];
    pf_free(m->slot);
    m->slot = slot;
    m->cap = cap;
  }
  return probe(m->slot, m->cap, obj);
}

/* Where a value is, below the root: one step per container or instance. */
typedef struct {
  char kind; /* '[' an item, 'k' a map key, 'v' a map value, '.' a field */
  int64_t i;
  const char* name;
} step;

/* Values are written at the end of `open`; a node, once written, moves
 * from there to `nodes`, so nodes come in the order they are finished. A
 * reference to a node still being written is a NUL byte and the object's
 * pointer, replaced by the node's index at the end (`holes` of them). */
typedef struct {
  const char* where;
  textbuf open, nodes;
  seen_map table;
  pf_snapshots snaps;  /* the Lists' and Dicts', held until the walk ends */
  int64_t holes, done; /* holes written; nodes finished */
  int depth;
  step path[PF_JSON_MAX_DEPTH];
} writer;

/* The path of a value inside `levels` containers and instances. */
static void path_text(const writer* w, int levels, char* buf, size_t n) {
  size_t k = (size_t)snprintf(buf, n, "root");
  for (int d = 0; d < levels && k < n; ++d) {
    const step* s = &w->path[d];
    if (s->kind == '.') k += (size_t)snprintf(buf + k, n - k, ".%s", s->name);
    else if (s->kind == '[') k += (size_t)snprintf(buf + k, n - k, "[%lld]", (long long)s->i);
    else
      k += (size_t)snprintf(buf + k, n - k, "{%s of entry %lld}", s->kind == 'k' ? "key" : "value",
                            (long long)s->i);
  }
}

static int cannot_write(writer* w, const char* what) {
  char path[512];
  path_text(w, w->depth, path, sizeof(path));
  return PF_ERROR(kPFErrTypeError, "%s: %s is of type %s, which JSON cannot hold", w->where, path,
                  what);
}

static int write_value(writer* w, int code, const PFValue* v);

/* The JSON string of s, escaped as jansson escaped it (kept); -1 (nothing
 * written) when s is not UTF-8. */
static int put_string(textbuf* t, const char* s) {
  size_t start = t->n;
  const unsigned char *p = (const unsigned char*)s, *q = p;
  while (pf_json_byte_class[*q] & PF_JSON_PLAIN) ++q; /* stops at the NUL */
  size_t run = (size_t)(q - p);
  if (!*q && room(t, run + 2) == 0) { /* nothing to escape: most strings */
    char* o = t->p + t->n;
    o[0] = '"';
    memcpy(o + 1, p, run);
    o[run + 1] = '"';
    t->n += run + 2;
    return 0;
  }
  put_c(t, '"');
  for (;;) {
    put(t, p, (size_t)(q - p));
    p = q;
    if (!*p) break;
    if (*p >= 0x80) {
      size_t n = pf_utf8_len(p, 4); /* s is NUL-terminated: no read past it */
      if (!n) {
        if (!t->oom) t->n = start;
        return -1;
      }
      put(t, p, n);
      p += n;
    } else {
      static const char esc[] = "btn?fr";
      char e[7] = {'\\', (char)*p};
      size_t n = 2;
      if (*p >= '\b' && *p <= '\r' && *p != '\v') e[1] = esc[*p - '\b'];
      else if (*p < 0x20) n = 6, snprintf(e + 1, 6, "u%04X", (unsigned)*p);
      put(t, e, n);
      ++p;
    }
    for (q = p; pf_json_byte_class[*q] & PF_JSON_PLAIN;) ++q;
  }
  put_c(t, '"');
  return 0;
}

/* A string the library makes (a key, a type's key, a field's name): one
 * that is not UTF-8 cannot be written, as before. */
static void put_name(writer* w, const char* s) {
  if (put_string(&w->open, s) != 0) w->open.oom = 1;
}

static void put_b64(textbuf* t, const unsigned char* p, size_t n) {
  put_c(t, '"');
  if (room(t, (n + 2) / 3 * 4) != 0) return;
  char* o = t->p + t->n;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t x = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) |
                 (i + 2 < n ? p[i + 2] : 0);
    *o++ = b64[x >> 18];
    *o++ = b64[(x >> 12) & 63];
    *o++ = i + 1 < n ? b64[(x >> 6) & 63] : '=';
    *o++ = i + 2 < n ? b64[x & 63] : '=';
  }
  t->n = (size_t)(o - t->p);
  put_c(t, '"');
}

/* {"tag":"BASE64"} */
static void put_tagged_b64(textbuf* t, const char* tag, const void* p, size_t n) {
  put_c(t, '{');
  put_string(t, tag);
  put_c(t, ':');
  put_b64(t, p, n);
  put_c(t, '}');
}

static void write_int(textbuf* t, int64_t x) {
  if (x >= -EXACT_INT && x <= EXACT_INT) {
    put_i64(t, x);
    return;
  }
  PUT_LIT(t, "{\"int\":\"");
  put_i64(t, x);
  PUT_LIT(t, "\"}");
}

/* 17 significant digits, with a '.' or an exponent so that it reads back
 * as a float, and no '+' or leading zeros in the exponent (jansson's
 * text, kept byte for byte). */
static void write_float(textbuf* t, double x) {
  if (!isfinite(x)) {
    PUT_LIT(t, "{\"float\":\"");
    if (isnan(x)) PUT_LIT(t, "nan");
    else if (x > 0) PUT_LIT(t, "inf");
    else PUT_LIT(t, "-inf");
    PUT_LIT(t, "\"}");
    return;
  }
  char s[40];
  int n = snprintf(s, sizeof(s), "%.17g", x), dot = 0;
  char* e = NULL;
  for (int i = 0; i < n; ++i) {
    if (s[i] == 'e') e = &s[i];
    else if ((s[i] < '0' || s[i] > '9') && s[i] != '-' && s[i] != '+') s[i] = '.', dot = 1;
  }
  if (!e && !dot) s[n++] = '.', s[n++] = '0';
  if (e) {
    char *from = e + 1 + (e[1] == '-'), *to = e + 1 + (e[1] == '-');
    if (*from == '+') ++from;
    while (*from == '0' && from[1]) ++from;
    memmove(to, from, (size_t)(s + n - from));
    n -= (int)(from - to);
  }
  put(t, s, (size_t)n);
}

static void write_str(textbuf* t, const char* s) {
  if (put_string(t, s) != 0) put_tagged_b64(t, "str64", s, strlen(s));
}

/* Writes the JSON of `n` values (a container's items), stepping the
 * path. */
static int write_items(writer* w, const PFValue* v, const int32_t* c, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    w->path[w->depth - 1] = (step){'[', i, NULL};
    if (i) put_c(&w->open, ',');
    if (write_value(w, c[i], &v[i]) != 0) return -1;
  }
  return 0;
}

/* Writes [key, value], entry i of a map. */
static int write_entry(writer* w, int64_t i, int kc, const PFValue* k, int vc, const PFValue* v) {
  w->path[w->depth - 1] = (step){'k', i, NULL};
  if (i) put_c(&w->open, ',');
  put_c(&w->open, '[');
  if (write_value(w, kc, k) != 0) return -1;
  w->path[w->depth - 1].kind = 'v';
  put_c(&w->open, ',');
  if (write_value(w, vc, v) != 0) return -1;
  put_c(&w->open, ']');
  return 0;
}

/* {"type":"TYPE", then the node's members. */
static void node_of(writer* w, const char* type) {
  PUT_LIT(&w->open, "{\"type\":");
  put_name(w, type);
}

static void write_ints(textbuf* t, const int64_t* d, int64_t n) {
  put_c(t, '[');
  for (int64_t i = 0; i < n; ++i) {
    if (i) put_c(t, ',');
    write_int(t, d[i]);
  }
  put_c(t, ']');
}

static int write_tensor(writer* w, const DLTensor* t) {
  if (t->device.device_type != kDLCPU) {
    char path[512];
    path_text(w, w->depth - 1, path, sizeof(path)); /* the tensor's node is open */
    return PF_ERROR(kPFErrValueError,
                    "%s: %s is a tensor on device type %d: only CPU data is written", w->where,
                    path, (int)t->device.device_type);
  }
  const char* data;
  char* own;
  size_t n;
  char dtype[PF_DTYPE_STRING_MAX];
  if (PFDataTypeToString(t->dtype, dtype, sizeof(dtype)) != 0) return -1;
  if (pf_tensor_row_major(w->where, t, &data, &n, &own) != 0) return -1;
  node_of(w, "tensor");
  PUT_LIT(&w->open, ",\"dtype\":");
  put_name(w, dtype);
  PUT_LIT(&w->open, ",\"shape\":");
  write_ints(&w->open, t->shape, t->ndim);
  PUT_LIT(&w->open, ",\"data\":");
  put_b64(&w->open, (const unsigned char*)data, n);
  put_c(&w->open, '}');
  pf_free(own);
  return 0;
}

static int write_instance(writer* w, PFObjectHandle h, uint32_t type) {
  const PFObjectTypeInfo* info;
  if (PFObjectTypeGetInfo(type, &info) != 0) return -1;
  node_of(w, "object");
  PUT_LIT(&w->open, ",\"key\":");
  put_name(w, info->key);
  PUT_LIT(&w->open, ",\"fields\":{");
  for (int32_t i = 0; i < info->num_fields; ++i) {
    PFValue v;
    int c;
    w->path[w->depth - 1] = (step){'.', 0, info->fields[i]->name};
    if (PFObjectGetField(h, info->fields[i], &v, &c) != 0) return -1;
    if (i) put_c(&w->open, ',');
    put_name(w, info->fields[i]->name);
    put_c(&w->open, ':');
    if (write_value(w, c, &v) != 0) return -1;
  }
  PUT_LIT(&w->open, "}}");
  return 0;
}

/* The node of a container object of type `type`. */
static int write_container(writer* w, PFObjectHandle h, uint32_t type) {
  static const char* const names[] = {[kPFObjectArray] = "array",
                                      [kPFObjectMap] = "map",
                                      [kPFObjectList] = "list",
                                      [kPFObjectDict] = "dict",
                                      [kPFObjectShape] = "shape"};
  node_of(w, names[type]);
  if (type == kPFObjectShape) {
    const int64_t* d;
    int64_t n;
    PFShapeGetData(h, &d, &n);
    PUT_LIT(&w->open, ",\"dims\":");
    write_ints(&w->open, d, n);
    put_c(&w->open, '}');
    return 0;
  }
  if (type == kPFObjectMap || type == kPFObjectDict) PUT_LIT(&w->open, ",\"entries\":[");
  else PUT_LIT(&w->open, ",\"items\":[");
  int64_t n = 0;
  const PFValue* v;
  const int32_t* c;
  int rc = 0;
  if (type == kPFObjectMap) {
    PFMapGetSize(h, &n);
    for (int64_t i = 0; rc == 0 && i < n; ++i) {
      PFValue kv[2];
      int kc[2];
      PFMapGetItemAt(h, i, &kv[0], &kc[0], &kv[1], &kc[1]);
      rc = write_entry(w, i, kc[0], &kv[0], kc[1], &kv[1]);
    }
  } else {
    if (type == kPFObjectArray) pf_array_view(h, &n, &v, &c);
    else rc = pf_snapshot_take(&w->snaps, w->where, h, type, &n, &v, &c);
    if (rc == 0 && type == kPFObjectDict) {
      for (int64_t i = 0; rc == 0 && i < n / 2; ++i)
        rc = write_entry(w, i, c[2 * i], &v[2 * i], c[2 * i + 1], &v[2 * i + 1]);
    } else if (rc == 0) {
      rc = write_items(w, v, c, n);
    }
  }
  PUT_LIT(&w->open, "]}");
  return rc;
}

/* {"ref":INDEX}, or a hole for a node still being written. */
static void write_ref(writer* w, const seen* s) {
  PUT_LIT(&w->open, "{\"ref\":");
  if (s->index >= 0) {
    put_i64(&w->open, s->index);
  } else {
    put_c(&w->open, '\0');
    put(&w->open, &s->obj, sizeof(s->obj));
    ++w->holes;
  }
  put_c(&w->open, '}');
}

/* A reference to the node of `obj` ({"ref": INDEX}), writing the node
 * first when it is met for the first time. `type` is its object type, or
 * 0 for a borrowed DLTensor*. */
static int write_node(writer* w, const void* obj, uint32_t type) {
  seen* s = seen_slot(&w->table, obj);
  if (!s) return pf_oom(w->where);
  if (s->obj) return write_ref(w, s), 0;
  if (w->depth == PF_JSON_MAX_DEPTH)
    return PF_ERROR(kPFErrValueError, "%s: values nested deeper than %d levels (PF_JSON_MAX_DEPTH)",
                    w->where, PF_JSON_MAX_DEPTH);
  if ((int64_t)w->table.count >= PF_JSON_MAX_NODES)
    return PF_ERROR(kPFErrValueError, "%s: more than %lld containers, tensors and instances",
                    w->where, (long long)PF_JSON_MAX_NODES);
  *s = (seen){obj, -1};
  ++w->table.count;
  size_t cap = w->table.cap, start = w->open.n;
  int rc;
  ++w->depth;
  if (type == 0) {
    rc = write_tensor(w, obj);
  } else if (type == kPFObjectTensor) {
    DLTensor* t;
    PFTensorGetDLTensor((PFObjectHandle)obj, &t);
    rc = write_tensor(w, t);
  } else if (type >= kPFObjectTypeRegisteredBegin) {
    rc = write_instance(w, (PFObjectHandle)obj, type);
  } else {
    rc = write_container(w, (PFObjectHandle)obj, type);
  }
  --w->depth;
  if (rc != 0) return -1;
  if (w->open.oom) return pf_oom(w->where);
  if (w->done) put_c(&w->nodes, ',');
  put(&w->nodes, w->open.p + start, w->open.n - start);
  w->open.n = start;
  if (w->table.cap != cap) s = seen_find(&w->table, obj); /* it grew meanwhile */
  s->index = w->done++;
  write_ref(w, s);
  return 0;
}

static int write_object(writer* w, PFObjectHandle h) {
  uint32_t type = ((const pf_object*)h)->type_index;
  switch (type) {
    case kPFObjectArray:
    case kPFObjectMap:
    case kPFObjectList:
    case kPFObjectDict:
    case kPFObjectShape:
    case kPFObjectTensor:
      return write_node(w, h, type);
    default:
      if (type >= kPFObjectTypeRegisteredBegin) return write_node(w, h, type);
      return cannot_write(w, PFObjectTypeName(type));
  }
}

static int write_value(writer* w, int code, const PFValue* v) {
  textbuf* t = &w->open;
  switch (code) {
    case kPFNull:
      PUT_LIT(t, "null");
      return 0;
    case kPFBool:
      if (v->v_int64) PUT_LIT(t, "true");
      else PUT_LIT(t, "false");
      return 0;
    case kPFInt:
      write_int(t, v->v_int64);
      return 0;
    case kPFFloat:
      write_float(t, v->v_float64);
      return 0;
    case kPFStr:
      write_str(t, v->v_str);
      return 0;
    case kPFBytes: {
      const PFByteArray* b = v->v_handle;
      put_tagged_b64(t, "bytes", b->data, b->size);
      return 0;
    }
    case kPFDataType: {
      char dtype[PF_DTYPE_STRING_MAX];
      if (PFDataTypeToString(v->v_type, dtype, sizeof(dtype)) != 0) return -1;
      PUT_LIT(t, "{\"dtype\":");
      put_name(w, dtype);
      put_c(t, '}');
      return 0;
    }
    case kPFDevice:
      PUT_LIT(t, "{\"device\":[");
      put_i64(t, (int)v->v_device.device_type);
      put_c(t, ',');
      put_i64(t, v->v_device.device_id);
      PUT_LIT(t, "]}");
      return 0;
    case kPFDLTensorHandle:
      return write_node(w, v->v_handle, 0);
    case kPFFuncHandle:
    case kPFModuleHandle:
    case kPFObjectHandle:
      return write_object(w, v->v_handle);
    default: {
      char what[64];
      if (code >= kPFExtBegin) snprintf(what, sizeof(what), "extension code %d", code);
      else snprintf(what, sizeof(what), "%s", PFTypeCodeName(code));
      return cannot_write(w, what);
    }
  }
}

/* The document: the root and the nodes, each hole filled with its node's
 * index. */
static void put_filled(writer* w, textbuf* doc, const textbuf* part) {
  if (!part->n) return; /* part->p may be NULL */
  const char* p = part->p;
  const char* end = p + part->n;
  while (p < end) {
    const char* hole = w->holes ? memchr(p, '\0', (size_t)(end - p)) : NULL;
    put(doc, p, (size_t)((hole ? hole : end) - p));
    if (!hole) break;
    const void* obj;
    memcpy(&obj, hole + 1, sizeof(obj));
    put_i64(doc, seen_find(&w->table, obj)->index);
    p = hole + 1 + sizeof(obj);
  }
}

/* Bytes kept free before the nodes' text: a document whose head (format,
 * version and root, up to the nodes' '[') fits there is handed out from
 * the nodes' buffer, without one more copy of their text. */
#define HEAD_ROOM 128

int PFToJSON(PFValue value, int code, const char** out, size_t* out_len) {
  PF_CHECK_ARG(out);
  if (pf_check_value(__func__, "argument", 0, code, &value) != 0) return -1;
  writer* w = pf_calloc(1, sizeof(writer));
  if (!w) return pf_oom(__func__);
  w->where = __func__;
  if (room(&w->nodes, HEAD_ROOM) == 0) w->nodes.n = HEAD_ROOM;
  int rc = write_value(w, code, &value);
  textbuf doc = {0};
  const char* text = NULL;
  size_t len = 0;
  if (rc == 0 && !w->nodes.oom) {
    PUT_LIT(&doc, "{\"format\":\"packedfunc\",\"version\":");
    put_i64(&doc, PF_JSON_FORMAT_VERSION);
    PUT_LIT(&doc, ",\"root\":");
    put_filled(w, &doc, &w->open);
    PUT_LIT(&doc, ",\"nodes\":[");
    if (!w->holes && doc.n <= HEAD_ROOM && !doc.oom) {
      PUT_LIT(&w->nodes, "]}");
      char* head = w->nodes.p + HEAD_ROOM - doc.n;
      if (!w->nodes.oom) memcpy(head, doc.p, doc.n);
      text = head;
      len = w->nodes.n - (HEAD_ROOM - doc.n);
    } else {
      const textbuf body = {w->nodes.p + HEAD_ROOM, w->nodes.n - HEAD_ROOM, 0, 0};
      room(&doc, body.n + 2); /* sized once: a filled hole is never longer than the hole */
      put_filled(w, &doc, &body);
      PUT_LIT(&doc, "]}");
      text = doc.p;
      len = doc.n;
    }
  }
  if (rc == 0 && (doc.oom || w->open.oom || w->nodes.oom)) rc = pf_oom(__func__);
  char* nodes = w->nodes.p; /* where text may lie */
  pf_free(w->open.p);
  pf_free(w->table.slot);
  /* Before the document goes to the thread's return storage, which a
   * finalizer that makes packedfunc calls would overwrite. */
  pf_snapshots_release(&w->snaps);
  pf_free(w);
  PFValue ret;
  int ret_code;
  if (rc == 0) rc = PFFuncReturnString(kPFStr, text, len, &ret, &ret_code);
  pf_free(doc.p);
  pf_free(nodes);
  if (rc != 0) return -1;
  *out = ret.v_str;
  if (out_len) *out_len = len;
  return 0;
}

/* ======================================================================== */
/* Reading                                                                  */
/* ======================================================================== */

/* What a node is: its "type". Lists, dicts and instances are created empty
 * first and filled last; the others are built when first needed. */
enum { K_ARRAY, K_MAP, K_SHAPE, K_TENSOR, K_LIST, K_DICT, K_OBJECT, K_COUNT };
static const char* const kind_names[K_COUNT] = {"array", "map",  "shape", "tensor",
                                                "list",  "dict", "object"};
#define MUTABLE(k) ((k) >= K_LIST)
static int pairs_of(int k) { return k == K_MAP || k == K_DICT; }
enum { UNBUILT, BUILDING, BUILT };

/* A value of the parsed document (json_parse.h), or NULL for one that is
 * absent. */
typedef const pf_json_tok* jv;

static jv next_of(jv j) { return j + j->skip; }

static int is_a(jv j, pf_json_type type) { return j && j->type == type; }

/* Whether s is name: the first bytes differ for most names this file
 * compares, which a call of strcmp costs more than. */
static int str_is(const char* s, const char* name) { return *s == *name && strcmp(s, name) == 0; }

/* The member `name` of j, or NULL (also when j is not an object). */
static jv member_of(jv j, const char* name) {
  if (!is_a(j, pf_json_object)) return NULL;
  jv k = j + 1;
  for (uint32_t i = 0; i < j->n; ++i, k = next_of(k + 1))
    if (str_is(k->v.s, name)) return k + 1;
  return NULL;
}

/* Item i of j, or NULL (also when j is not an array). */
static jv item_of(jv j, size_t i) {
  if (!is_a(j, pf_json_array) || i >= j->n) return NULL;
  jv x = j + 1;
  while (i--) x = next_of(x);
  return x;
}

static const char* str_of(jv j) { return is_a(j, pf_json_str) ? j->v.s : NULL; }

/* Memory that values read from the document point into (decoded bytes),
 * freed when the read ends. */
typedef struct block {
  struct block* next;
} block;

typedef struct {
  const char* where;
  jv* node; /* each node's object in the document */
  size_t n;
  PFObjectHandle* objs; /* a reference per built node */
  uint8_t* kind;
  uint8_t* state;
  int depth;
  uint32_t flags; /* PFFromJSONEx's */
  block* scratch;
} reader;

/* Where a value is in the document: the root (node -1) or a member of a
 * node, and an index in it (-1 for none). */
typedef struct {
  int64_t node;
  const char* member;
  int64_t index;
} spot;

__attribute__((format(printf, 3, 4))) static int bad(const reader* r, const spot* at,
                                                     const char* fmt, ...) {
  char what[256], msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (at->node < 0) snprintf(what, sizeof(what), "root");
  else if (!at->member) snprintf(what, sizeof(what), "node %lld", (long long)at->node);
  else if (at->index < 0)
    snprintf(what, sizeof(what), "node %lld '%s'", (long long)at->node, at->member);
  else
    snprintf(what, sizeof(what), "node %lld '%s'[%lld]", (long long)at->node, at->member,
             (long long)at->index);
  return PF_ERROR(kPFErrValueError, "%s: %s: %s", r->where, what, msg);
}

/* After entry point `rc` failed on node i: its error again, with the node
 * named ("PFFromJSON: node 3: PFMapCreate: ..."), of the same kind; an
 * error that names PFFromJSON already (writing a field) names it once. */
static int in_node(const reader* r, size_t i, int rc) {
  if (rc == 0) return 0;
  char kind[PF_ERROR_KIND_MAX], msg[512];
  const char* m = PFErrorGetMessage();
  size_t w = strlen(r->where);
  if (strncmp(m, r->where, w) == 0 && strncmp(m + w, ": ", 2) == 0) m += w + 2;
  snprintf(kind, sizeof(kind), "%s", PFErrorGetKind());
  snprintf(msg, sizeof(msg), "%s", m);
  if (strcmp(kind, kPFErrMemoryError) == 0) return -1;
  return PF_ERROR(kind, "%s: node %zu: %s", r->where, i, msg);
}

static void* scratch(reader* r, size_t n) {
  block* b = pf_malloc(sizeof(block) + n);
  if (!b) return NULL;
  b->next = r->scratch;
  r->scratch = b;
  return b + 1;
}

/* Decodes the base64 string j into scratch memory, after `head` spare
 * bytes: *out is the data, *n its length. */
static int read_b64(reader* r, const spot* at, jv j, size_t head, char** out, size_t* n) {
  if (!is_a(j, pf_json_str)) return bad(r, at, "expected a base64 string");
  size_t len = j->n;
  char* mem = scratch(r, head + len / 4 * 3 + 1);
  if (!mem) return pf_oom(r->where);
  if (b64_decode(j->v.s, len, (unsigned char*)mem + head, n) != 0)
    return bad(r, at, "not padded base64");
  mem[head + *n] = '\0';
  *out = mem + head;
  return 0;
}

/* An int of the document in [lo, hi]. */
static int int_in(jv j, int64_t lo, int64_t hi) {
  return is_a(j, pf_json_int) && j->v.i >= lo && j->v.i <= hi;
}

static int node_ref(reader* r, const spot* at, jv j, PFValue* out);

static int read_tagged(reader* r, const spot* at, const char* tag, jv x, PFValue* out, int* code) {
  const char* s = str_of(x);
  if (str_is(tag, "ref")) {
    *code = kPFObjectHandle;
    return node_ref(r, at, x, out);
  }
  if (strcmp(tag, "int") == 0) {
    char* end;
    errno = 0;
    long long v = s && *s && *s != ' ' && *s != '+' ? strtoll(s, &end, 10) : 0;
    if (!s || !*s || *s == ' ' || *s == '+' || *end || errno)
      return bad(r, at, "\"int\" must be the decimal text of an int64");
    out->v_int64 = v;
    *code = kPFInt;
    return 0;
  }
  if (strcmp(tag, "float") == 0) {
    if (!s || (strcmp(s, "nan") && strcmp(s, "inf") && strcmp(s, "-inf")))
      return bad(r, at, "\"float\" must be \"nan\", \"inf\" or \"-inf\"");
    out->v_float64 = s[0] == 'n' ? NAN : s[0] == '-' ? -INFINITY : INFINITY;
    *code = kPFFloat;
    return 0;
  }
  if (strcmp(tag, "str64") == 0 || strcmp(tag, "bytes") == 0) {
    int is_str = tag[0] == 's';
    size_t head = is_str ? 0 : sizeof(PFByteArray), n;
    char* data;
    if (read_b64(r, at, x, head, &data, &n) != 0) return -1;
    if (is_str && strlen(data) != n) return bad(r, at, "a str holds no NUL byte");
    if (is_str) {
      out->v_str = data;
    } else {
      PFByteArray* b = (PFByteArray*)(void*)(data - head);
      *b = (PFByteArray){data, n};
      out->v_handle = b;
    }
    *code = is_str ? kPFStr : kPFBytes;
    return 0;
  }
  if (strcmp(tag, "dtype") == 0) {
    if (!s || PFDataTypeFromString(s, &out->v_type) != 0)
      return bad(r, at, "\"dtype\" must be a data type's text");
    *code = kPFDataType;
    return 0;
  }
  if (strcmp(tag, "device") == 0) {
    jv t = item_of(x, 0), d = item_of(x, 1);
    if (!is_a(x, pf_json_array) || x->n != 2 || !int_in(t, INT32_MIN, INT32_MAX) ||
        !int_in(d, INT32_MIN, INT32_MAX))
      return bad(r, at, "\"device\" must be [TYPE, ID], two int32");
    out->v_device = (DLDevice){(DLDeviceType)t->v.i, (int32_t)d->v.i};
    *code = kPFDevice;
    return 0;
  }
  return bad(r, at,
             "unknown tag \"%s\" (a value object is one of ref, int, float, str64, "
             "bytes, dtype, device)",
             tag);
}

/* Writes a value read; returns 0. */
static int got(PFValue* out, int* code, PFValue v, int c) {
  *out = v;
  *code = c;
  return 0;
}

static int read_value(reader* r, const spot* at, jv j, PFValue* out, int* code) {
  switch (j->type) {
    case pf_json_null:
      return got(out, code, (PFValue){.v_int64 = 0}, kPFNull);
    case pf_json_true:
    case pf_json_false:
      return got(out, code, (PFValue){.v_int64 = j->type == pf_json_true}, kPFBool);
    case pf_json_int:
      return got(out, code, (PFValue){.v_int64 = j->v.i}, kPFInt);
    case pf_json_real:
      return got(out, code, (PFValue){.v_float64 = j->v.d}, kPFFloat);
    case pf_json_str:
      return got(out, code, (PFValue){.v_str = j->v.s}, kPFStr);
    case pf_json_object:
      if (j->n == 1) return read_tagged(r, at, j[1].v.s, j + 2, out, code);
      return bad(r, at, "a value object has exactly one member, not %u", (unsigned)j->n);
    default:
      return bad(r, at, "a JSON array is not a value");
  }
}

static int build(reader* r, size_t i);

static int bad_ref(const reader* r, const spot* at) {
  if (r->n == 0) return bad(r, at, "\"ref\" must be the index of a node, and there are none");
  return bad(r, at, "\"ref\" must be the index of a node (0 to %zu)", r->n - 1);
}

static int node_ref(reader* r, const spot* at, jv j, PFValue* out) {
  if (!int_in(j, 0, (int64_t)r->n - 1)) return bad_ref(r, at);
  size_t i = (size_t)j->v.i;
  if (r->state[i] == BUILDING && !r->objs[i])
    return bad(r, at,
               "node %zu holds itself through arrays, maps, shapes and tensors, which cannot "
               "form a cycle",
               i);
  if (r->state[i] == UNBUILT && build(r, i) != 0) return -1;
  out->v_handle = r->objs[i];
  return 0;
}

/* The member `name` of node i, which must have JSON type `type`. */
static jv member(reader* r, size_t i, const char* name, pf_json_type type) {
  jv m = member_of(r->node[i], name);
  static const char* const tn[] = {
      [pf_json_null] = "null",      [pf_json_false] = "false",     [pf_json_true] = "true",
      [pf_json_int] = "an integer", [pf_json_real] = "a number",   [pf_json_str] = "a string",
      [pf_json_array] = "an array", [pf_json_object] = "an object"};
  if (!is_a(m, type)) {
    spot at = {(int64_t)i, name, -1};
    bad(r, &at, "a %s node's \"%s\" must be %s", kind_names[r->kind[i]], name, tn[type]);
    return NULL;
  }
  return m;
}

/* The values read from one node: in the struct for a small node (most
 * are), else pf_malloc'd; values_free releases them either way. */
#define SMALL_VALUES 8
typedef struct {
  PFValue* v;
  int* c;
  size_t n; /* items or pairs */
  PFValue small_v[SMALL_VALUES];
  int small_c[SMALL_VALUES];
} values;

static void values_free(values* x) {
  if (x->v != x->small_v) pf_free(x->v);
  if (x->c != x->small_c) pf_free(x->c);
}

/* The values of the JSON array a (node i's member `name`) into *x: each
 * item, or with `pairs` each [key, value] pair (keys at k, values at
 * x->n + k: as the containers take them). The caller calls values_free,
 * also after a failure. */
static int read_values(reader* r, size_t i, const char* name, int pairs, values* x) {
  x->v = x->small_v;
  x->c = x->small_c;
  jv a = member(r, i, name, pf_json_array);
  if (!a) return -1;
  size_t n = x->n = a->n, m = n << pairs;
  if (m > SMALL_VALUES) {
    x->v = pf_malloc(m * sizeof(PFValue));
    x->c = pf_malloc(m * sizeof(int));
    if (!x->v || !x->c) return pf_oom(r->where);
  }
  PFValue* v = x->v;
  int* c = x->c;
  jv j = a + 1;
  for (size_t k = 0; k < n; ++k, j = next_of(j)) {
    spot at = {(int64_t)i, name, (int64_t)k};
    if (!pairs) {
      if (read_value(r, &at, j, &v[k], &c[k]) != 0) return -1;
      continue;
    }
    if (!is_a(j, pf_json_array) || j->n != 2) return bad(r, &at, "an entry is [key, value]");
    if (read_value(r, &at, j + 1, &v[k], &c[k]) != 0 ||
        read_value(r, &at, next_of(j + 1), &v[n + k], &c[n + k]) != 0)
      return -1;
  }
  return 0;
}

/* An array, map, shape or tensor from values read; or a list or dict
 * filled. */
static int make_from_values(reader* r, size_t i) {
  values x;
  int k = r->kind[i], pairs = pairs_of(k), rc;
  rc = read_values(r, i, pairs ? "entries" : "items", pairs, &x);
  if (rc == 0) {
    PFValue* v = x.v;
    int* c = x.c;
    size_t n = x.n;
    int64_t s = (int64_t)n;
    switch (k) {
      case K_ARRAY:
        rc = PFArrayCreate(v, c, s, &r->objs[i]);
        break;
      case K_MAP:
        rc = PFMapCreate(v, c, v + n, c + n, s, &r->objs[i]);
        break;
      case K_LIST:
        rc = PFListExtend(r->objs[i], v, c, s);
        break;
      default: /* K_DICT */
        rc = PFDictUpdate(r->objs[i], v, c, v + n, c + n, s);
    }
    rc = in_node(r, i, rc);
  }
  values_free(&x);
  return rc;
}

/* The int64s of node i's member `name` (an array of ints) into *x, each
 * value's v_int64 in place (read them as x->v cast to int64_t*): the
 * caller calls values_free after a success; a failure releases them. */
static int read_ints(reader* r, size_t i, const char* name, values* x) {
  int rc = read_values(r, i, name, 0, x);
  for (size_t k = 0; rc == 0 && k < x->n; ++k) {
    spot at = {(int64_t)i, name, (int64_t)k};
    if (x->c[k] != kPFInt) rc = bad(r, &at, "expected an int");
  }
  _Static_assert(sizeof(PFValue) == sizeof(int64_t), "values are int64s wide");
  if (rc != 0) values_free(x);
  return rc;
}

static int make_shape(reader* r, size_t i) {
  values d;
  if (read_ints(r, i, "dims", &d) != 0) return -1;
  int rc = in_node(r, i, PFShapeCreate((const int64_t*)(void*)d.v, (int64_t)d.n, &r->objs[i]));
  values_free(&d);
  return rc;
}

static int make_tensor(reader* r, size_t i) {
  jv dt = member(r, i, "dtype", pf_json_str);
  jv data = dt ? member(r, i, "data", pf_json_str) : NULL;
  values dims;
  size_t n = 0, want = 0;
  char* bytes;
  spot at = {(int64_t)i, "shape", -1};
  DLTensor t = {0};
  if (!data || read_ints(r, i, "shape", &dims) != 0) return -1;
  int64_t* shape = (int64_t*)(void*)dims.v;
  size_t ndim = dims.n;
  int rc = 0;
  if (PFDataTypeFromString(dt->v.s, &t.dtype) != 0)
    rc = bad(r, &(spot){(int64_t)i, "dtype", -1}, "not a data type");
  t.ndim = (int)ndim;
  t.shape = shape;
  if (rc == 0 && (ndim > PF_TENSOR_MAX_NDIM || pf_tensor_bytes(&t, &want) != 0))
    rc = bad(r, &at, "more than %d dims, a negative dim, or too large", PF_TENSOR_MAX_NDIM);
  if (rc == 0) rc = read_b64(r, &(spot){(int64_t)i, "data", -1}, data, 0, &bytes, &n);
  if (rc == 0 && n != want)
    rc = bad(r, &(spot){(int64_t)i, "data", -1}, "%zu bytes where dtype and shape need %zu", n,
             want);
  DLTensor* view;
  if (rc == 0) rc = in_node(r, i, PFTensorAlloc(t.ndim, shape, t.dtype, 0, &r->objs[i], &view));
  if (rc == 0 && n) memcpy(view->data, bytes, n);
  values_free(&dims);
  return rc;
}

/* Builds node i, an array, map, shape or tensor. */
static int build(reader* r, size_t i) {
  if (r->depth == PF_JSON_MAX_DEPTH)
    return bad(r, &(spot){(int64_t)i, NULL, -1},
               "values nested deeper than %d levels (PF_JSON_MAX_DEPTH)", PF_JSON_MAX_DEPTH);
  r->state[i] = BUILDING;
  ++r->depth;
  int k = r->kind[i], rc;
  if (k == K_SHAPE) rc = make_shape(r, i);
  else if (k == K_TENSOR) rc = make_tensor(r, i);
  else rc = make_from_values(r, i);
  --r->depth;
  r->state[i] = BUILT;
  return rc;
}

/* Every field of instance node i from its "fields" object. */
static int fill_instance(reader* r, size_t i) {
  jv f = member(r, i, "fields", pf_json_object);
  if (!f) return -1;
  uint32_t type;
  PFObjectGetTypeIndex(r->objs[i], &type);
  const PFObjectTypeInfo* info;
  PFObjectTypeGetInfo(type, &info);
  spot at = {(int64_t)i, "fields", -1};
  if (f->n != (uint32_t)info->num_fields) {
    jv key = f + 1;
    for (uint32_t m = 0; m < f->n; ++m, key = next_of(key + 1)) {
      const PFFieldInfo* fi;
      if (PFObjectTypeGetField(type, key->v.s, &fi) != 0) {
        PFErrorClear();
        return bad(r, &at, "%s has no field '%s'", info->key, key->v.s);
      }
    }
  }
  /* The writer puts the fields in their order: look there first. */
  jv in_order = f + 1;
  for (int32_t k = 0; k < info->num_fields; ++k) {
    const char* name = info->fields[k]->name;
    jv x =
        (uint32_t)k < f->n && strcmp(in_order->v.s, name) == 0 ? in_order + 1 : member_of(f, name);
    if ((uint32_t)k < f->n) in_order = next_of(in_order + 1);
    if (!x) return bad(r, &at, "no value for field '%s' of %s", name, info->key);
    PFValue v;
    int c;
    at.member = name;
    if (read_value(r, &at, x, &v, &c) != 0 ||
        in_node(r, i, pf_instance_restore_field(r->where, r->objs[i], info->fields[k], &v, c)))
      return -1;
  }
  return 0;
}

/* Creates the empty list, dict or instance of node i. */
static int create_mutable(reader* r, size_t i) {
  r->state[i] = BUILDING;
  if (r->kind[i] == K_LIST) return PFListCreate(NULL, NULL, 0, &r->objs[i]);
  if (r->kind[i] == K_DICT) return PFDictCreate(NULL, NULL, NULL, NULL, 0, &r->objs[i]);
  jv key = member(r, i, "key", pf_json_str);
  uint32_t type;
  if (!key || PFObjectTypeFind(key->v.s, &type) != 0) return -1;
  if (type == 0)
    return bad(r, &(spot){(int64_t)i, "key", -1}, "no object type is registered under the key '%s'",
               key->v.s);
  return in_node(r, i,
                 PFObjectAlloc(type, &r->objs[i]) || pf_instance_prepare(r->where, r->objs[i]));
}

/* The kind of each node, and its members: exactly those of its kind. */
static int read_kinds(reader* r) {
  static const char* const members[K_COUNT][3] = {
      {"items"}, {"entries"}, {"dims"},         {"dtype", "shape", "data"},
      {"items"}, {"entries"}, {"key", "fields"}};
  for (size_t i = 0; i < r->n; ++i) {
    jv node = r->node[i];
    spot at = {(int64_t)i, NULL, -1};
    const char* type = str_of(member_of(node, "type"));
    if (!type) return bad(r, &at, "a node is an object with a \"type\"");
    int k = 0;
    while (k < K_COUNT && !str_is(type, kind_names[k])) ++k;
    if (k == K_COUNT) return bad(r, &at, "unknown node type \"%s\"", type);
    r->kind[i] = (uint8_t)k;
    size_t want = 1;
    for (int m = 0; m < 3 && members[k][m]; ++m, ++want)
      if (!member_of(node, members[k][m]))
        return bad(r, &at, "a %s node needs \"%s\"", type, members[k][m]);
    if (node->n != want)
      return bad(r, &at, "a %s node has %u members, not %zu", type, (unsigned)node->n, want);
  }
  return 0;
}

/* Calls fn(r, from, to, ctx) for each reference ({"ref": N}) that the
 * value j (at `at`, in node `from`, or the root: from = -1) is; -1 for a
 * reference that is not to a node, or when fn fails. */
typedef int (*ref_fn)(const reader* r, int64_t from, size_t to, void* ctx);
static int visit_ref(const reader* r, const spot* at, jv j, ref_fn fn, void* ctx) {
  jv n = is_a(j, pf_json_object) && j->n == 1 ? member_of(j, "ref") : NULL;
  if (!n) return 0;
  if (!int_in(n, 0, (int64_t)r->n - 1)) return bad_ref(r, at);
  return fn(r, at->node, (size_t)n->v.i, ctx);
}

/* visit_ref for every reference that node i holds directly. */
static int visit_refs(const reader* r, size_t i, ref_fn fn, void* ctx) {
  int k = r->kind[i], fields = k == K_OBJECT;
  const char* name = fields ? "fields" : pairs_of(k) ? "entries" : "items";
  jv m = member_of(r->node[i], name);
  spot at = {(int64_t)i, name, -1};
  if (k == K_SHAPE || k == K_TENSOR || !is_a(m, fields ? pf_json_object : pf_json_array))
    return 0; /* a member of the wrong type is refused when the node is built */
  jv x = m + 1;
  for (uint32_t e = 0; e < m->n; ++e) {
    if (fields) {
      if (visit_ref(r, &at, x + 1, fn, ctx) != 0) return -1;
      x = next_of(x + 1);
      continue;
    }
    at.index = (int64_t)e;
    if (visit_ref(r, &at, pairs_of(k) ? item_of(x, 0) : x, fn, ctx) != 0 ||
        (pairs_of(k) && visit_ref(r, &at, item_of(x, 1), fn, ctx) != 0))
      return -1;
    x = next_of(x);
  }
  return 0;
}

/* A walk over the nodes: a count or mark per node, and a stack of nodes
 * still to visit. */
typedef struct {
  size_t* count;
  size_t* stack;
  size_t top;
} walk;

static int walk_init(const reader* r, walk* w) {
  w->count = pf_calloc(r->n + 1, sizeof(size_t));
  w->stack = pf_malloc((r->n + 1) * sizeof(size_t));
  w->top = 0;
  return w->count && w->stack ? 0 : pf_oom(r->where);
}

static void walk_done(walk* w) {
  pf_free(w->count);
  pf_free(w->stack);
}

/* Marks and pushes a node not marked yet. */
static int mark_ref(const reader* r, int64_t from, size_t to, void* ctx) {
  (void)r, (void)from;
  walk* w = ctx;
  if (!w->count[to]) w->count[to] = 1, w->stack[w->top++] = to;
  return 0;
}

/* Every node must be reachable from the root: a node that is not would be
 * built and dropped, and one in a cycle of its own would never be freed. */
static int check_reachable(reader* r, jv root) {
  walk w;
  int rc = walk_init(r, &w);
  if (rc == 0) rc = visit_ref(r, &(spot){-1, NULL, -1}, root, mark_ref, &w);
  while (rc == 0 && w.top > 0) rc = visit_refs(r, w.stack[--w.top], mark_ref, &w);
  size_t lost = 0;
  while (rc == 0 && lost < r->n && w.count[lost]) ++lost;
  if (rc == 0 && lost < r->n)
    rc = bad(r, &(spot){(int64_t)lost, NULL, -1}, "not reachable from the root");
  walk_done(&w);
  return rc;
}

/* Counts a reference to `to` (the references a node receives). */
static int count_ref(const reader* r, int64_t from, size_t to, void* ctx) {
  (void)r, (void)from;
  ++((walk*)ctx)->count[to];
  return 0;
}

/* Uncounts a reference to `to`, pushing it once nothing refers to it. */
static int uncount_ref(const reader* r, int64_t from, size_t to, void* ctx) {
  (void)r, (void)from;
  walk* w = ctx;
  if (--w->count[to] == 0) w->stack[w->top++] = to;
  return 0;
}

/* kPFJSONRefuseCycles: peels the nodes that no remaining node refers to,
 * then those that only peeled ones referred to, and so on (linear in the
 * nodes and references); a node left over is on a cycle, or reached only
 * from one. */
static int check_acyclic(reader* r) {
  walk w;
  int rc = walk_init(r, &w);
  for (size_t i = 0; rc == 0 && i < r->n; ++i) rc = visit_refs(r, i, count_ref, &w);
  for (size_t i = 0; rc == 0 && i < r->n; ++i)
    if (w.count[i] == 0) w.stack[w.top++] = i;
  size_t peeled = 0;
  while (rc == 0 && w.top > 0) rc = visit_refs(r, w.stack[--w.top], uncount_ref, &w), ++peeled;
  if (rc == 0 && peeled < r->n) {
    size_t i = 0;
    while (w.count[i] == 0) ++i;
    rc = bad(r, &(spot){(int64_t)i, NULL, -1},
             "on a cycle, which kPFJSONRefuseCycles refuses (nothing would ever free it)");
  }
  walk_done(&w);
  return rc;
}

/* Reads the document's nodes and root into *out (a new reference for a
 * handle; str and bytes still in the document or scratch memory). */
static int read_doc(reader* r, jv doc, PFValue* out, int* code) {
  spot top = {-1, NULL, -1};
  jv format = member_of(doc, "format");
  jv version = member_of(doc, "version");
  jv root = member_of(doc, "root");
  jv nodes = member_of(doc, "nodes");
  if (doc->n != 4 || !format || !version || !root || !nodes)
    return bad(r, &top,
               "a document is an object of exactly \"format\", \"version\", \"root\" and "
               "\"nodes\"");
  if (!is_a(format, pf_json_str) || strcmp(format->v.s, "packedfunc") != 0)
    return bad(r, &top, "\"format\" must be \"packedfunc\"");
  if (!is_a(version, pf_json_int) || version->v.i != PF_JSON_FORMAT_VERSION)
    return bad(r, &top, "\"version\" %lld is not one this library reads (it reads version %d)",
               is_a(version, pf_json_int) ? (long long)version->v.i : -1LL, PF_JSON_FORMAT_VERSION);
  if (!is_a(nodes, pf_json_array)) return bad(r, &top, "\"nodes\" must be an array");
  r->n = nodes->n;
  if ((int64_t)r->n > PF_JSON_MAX_NODES)
    return bad(r, &top, "%zu nodes, more than PF_JSON_MAX_NODES (%lld)", r->n,
               (long long)PF_JSON_MAX_NODES);
  r->objs = pf_calloc(r->n + 1, sizeof(PFObjectHandle));
  r->kind = pf_calloc(r->n + 1, 1);
  r->state = pf_calloc(r->n + 1, 1);
  r->node = pf_malloc((r->n + 1) * sizeof(jv));
  if (!r->objs || !r->kind || !r->state || !r->node) return pf_oom(r->where);
  jv x = nodes + 1;
  for (size_t i = 0; i < r->n; ++i, x = next_of(x)) r->node[i] = x;
  if (read_kinds(r) != 0 || check_reachable(r, root) != 0) return -1;
  if ((r->flags & kPFJSONRefuseCycles) && check_acyclic(r) != 0) return -1;
  for (size_t i = 0; i < r->n; ++i)
    if (MUTABLE(r->kind[i]) && create_mutable(r, i) != 0) return -1;
  for (size_t i = 0; i < r->n; ++i)
    if (r->state[i] == UNBUILT && build(r, i) != 0) return -1;
  for (size_t i = 0; i < r->n; ++i) {
    int rc = r->kind[i] == K_OBJECT ? fill_instance(r, i)
             : MUTABLE(r->kind[i])  ? make_from_values(r, i)
                                    : 0;
    if (rc != 0) return -1;
    r->state[i] = BUILT;
  }
  if (read_value(r, &top, root, out, code) != 0) return -1;
  if (*code == kPFObjectHandle) PFObjectRetain(out->v_handle);
  return 0;
}

/* Releases what the read built; after a failure, first empties the lists,
 * dicts and instances, which may hold each other in cycles. */
static void reader_done(reader* r, int failed) {
  for (size_t i = 0; r->objs && i < r->n; ++i) {
    if (!r->objs[i]) continue;
    if (failed && r->kind[i] == K_LIST) PFListClear(r->objs[i]);
    else if (failed && r->kind[i] == K_DICT) PFDictClear(r->objs[i]);
    else if (failed && r->kind[i] == K_OBJECT) pf_instance_drop_fields(r->objs[i]);
  }
  for (size_t i = 0; r->objs && i < r->n; ++i) PFObjectFree(r->objs[i]);
  while (r->scratch) {
    block* b = r->scratch;
    r->scratch = b->next;
    pf_free(b);
  }
  pf_free(r->objs);
  pf_free(r->kind);
  pf_free(r->state);
  pf_free(r->node);
}

/* How often c occurs in s[0 .. n): memchr's vector scan, not a byte loop
 * (which cost as much as parsing the text). */
static int64_t count_byte(const char* s, size_t n, char c) {
  int64_t k = 0;
  for (const char* p = s; n && (p = memchr(p, c, (size_t)(s + n - p))) != NULL; ++p) ++k;
  return k;
}

static int from_json(const char* where, const char* text, size_t len, uint32_t flags, PFValue* out,
                     int* out_code) {
  if (text == NULL && len > 0) return pf_err_null_arg(where, "text");
  if (out == NULL) return pf_err_null_arg(where, "out");
  if (out_code == NULL) return pf_err_null_arg(where, "out_code");
  if (len > PF_JSON_MAX_SIZE)
    return PF_ERROR(kPFErrValueError,
                    "%s: a document of %zu bytes, longer than PF_JSON_MAX_SIZE (%zu)", where, len,
                    PF_JSON_MAX_SIZE);
  int64_t containers = count_byte(text, len, '{') + count_byte(text, len, '[');
  if (containers > PF_JSON_MAX_CONTAINERS)
    return PF_ERROR(kPFErrValueError,
                    "%s: a document of %lld JSON objects and arrays, more than "
                    "PF_JSON_MAX_CONTAINERS (%lld)",
                    where, (long long)containers, (long long)PF_JSON_MAX_CONTAINERS);
  pf_json_doc doc;
  if (pf_json_parse(where, text, len, &doc) != 0) return -1;
  reader r = {.where = where, .flags = flags};
  PFValue v;
  int code, rc = read_doc(&r, doc.tok, &v, &code);
  if (rc == 0 && (code == kPFStr || code == kPFBytes)) {
    const PFByteArray* b = v.v_handle;
    rc = code == kPFStr ? PFFuncReturnString(code, v.v_str, strlen(v.v_str), &v, &code)
                        : PFFuncReturnString(code, b->data, b->size, &v, &code);
  }
  reader_done(&r, rc != 0);
  pf_json_free(&doc);
  if (rc != 0) return -1;
  *out = v;
  *out_code = code;
  return 0;
}

int PFFromJSON(const char* text, size_t len, PFValue* out, int* out_code) {
  return from_json(__func__, text, len, 0, out, out_code);
}

int PFFromJSONEx(const char* text, size_t len, uint32_t flags, PFValue* out, int* out_code) {
  if (flags & ~(uint32_t)kPFJSONRefuseCycles)
    return PF_ERROR(kPFErrValueError, "%s: unknown flags 0x%x (known: kPFJSONRefuseCycles)",
                    __func__, (unsigned)(flags & ~(uint32_t)kPFJSONRefuseCycles));
  return from_json(__func__, text, len, flags, out, out_code);
}
