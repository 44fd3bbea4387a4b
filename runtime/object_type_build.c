/* Object types from descriptions: every check of a description, the copy
 * the table keeps, the comparison of two descriptions, and a type's code
 * (its methods and constructor as functions). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "object_type.h"

/* "WHERE: object type 'KEY': " and the rest. */
#define TYPE_ERROR(kind, fmt, ...) \
  PF_ERROR(kind, "%s: object type '%s': " fmt, where, t->info.key, __VA_ARGS__)

/* ---- names ---- */

static int is_ident_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_ident_char(char c) { return is_ident_start(c) || (c >= '0' && c <= '9'); }

/* The length of the identifier at s, 0 when there is none. */
static size_t ident_len(const char* s) {
  size_t n = 0;
  if (!is_ident_start(s[0])) return 0;
  while (is_ident_char(s[n])) ++n;
  return n;
}

/* Why `name` is not an identifier of at most PF_OBJECT_TYPE_KEY_MAX bytes
 * (dotted: identifiers joined by '.'), or NULL. */
static const char* bad_name(const char* name, int dotted) {
  if (name == NULL) return "is NULL";
  size_t len = strnlen(name, PF_OBJECT_TYPE_KEY_MAX + 1);
  if (len == 0) return "is empty";
  if (len > PF_OBJECT_TYPE_KEY_MAX) return "is longer than PF_OBJECT_TYPE_KEY_MAX (255) bytes";
  for (size_t i = 0;;) {
    size_t n = ident_len(name + i);
    if (n == 0) break;
    i += n;
    if (name[i] == '\0') return NULL;
    if (!dotted || name[i] != '.') break;
    ++i;
  }
  return dotted ? "is not identifiers joined by '.' (such as \"mylib.Counter\")"
                : "is not an identifier ([A-Za-z_][A-Za-z0-9_]*)";
}

static char* dup_or_null(const char* s, int* oom) {
  if (s == NULL) return NULL;
  char* d = pf_strdup(s);
  if (d == NULL) *oom = 1;
  return d;
}

static int same_text(const char* a, const char* b) {
  return a == b || (a != NULL && b != NULL && strcmp(a, b) == 0);
}

/* ---- the skeleton ---- */

pf_type* pf_type_skeleton(const char* where, const PFObjectTypeDesc* d, int index) {
  if (d == NULL) {
    PF_ERROR(kPFErrTypeError, "%s: object type description %d is NULL", where, index);
    return NULL;
  }
  if (d->abi < 1 || d->abi > PF_OBJECT_TYPE_DESC3_ABI) {
    PF_ERROR(kPFErrValueError,
             "%s: object type description %d has layout version %u; this library reads "
             "versions 1 to %u (rebuild against this header)",
             where, index, (unsigned)d->abi, PF_OBJECT_TYPE_DESC3_ABI);
    return NULL;
  }
  const char* why = bad_name(d->key, 1);
  if (why != NULL) {
    PF_ERROR(kPFErrValueError, "%s: the key of object type description %d %s%s%.300s%s", where,
             index, why, d->key ? " ('" : "", d->key ? d->key : "", d->key ? "')" : "");
    return NULL;
  }
  pf_type* t = pf_calloc(1, sizeof(*t));
  size_t n = strlen(d->key);
  char* key = pf_strdup(d->key);
  char* sig = pf_malloc(n + 6);
  if (t == NULL || key == NULL || sig == NULL) {
    pf_free(t);
    pf_free(key);
    pf_free(sig);
    pf_oom(where);
    return NULL;
  }
  snprintf(sig, n + 6, "obj<%s>", key);
  t->info.key = key;
  t->sig_name = sig;
  atomic_init(&t->code, NULL);
  return t;
}

void pf_type_free(pf_type* t) {
  if (t == NULL) return;
  for (int i = 0; i < t->num_own_fields; ++i) {
    pf_free((char*)(uintptr_t)t->own_fields[i].info.name);
    pf_free((char*)(uintptr_t)t->own_fields[i].info.doc);
    pf_siginfo_free(t->own_fields[i].tree);
  }
  for (int i = 0; i < t->num_own_methods; ++i) {
    pf_free((char*)(uintptr_t)t->own_methods[i].info.name);
    pf_free((char*)(uintptr_t)t->own_methods[i].info.signature);
    pf_free((char*)(uintptr_t)t->own_methods[i].info.doc);
  }
  pf_free(t->own_fields);
  pf_free(t->own_methods);
  pf_free((void*)(uintptr_t)t->info.fields);
  pf_free((void*)(uintptr_t)t->info.methods);
  pf_free(t->owned);
  pf_free(t->ancestors);
  pf_free((char*)(uintptr_t)t->info.key);
  pf_free((char*)(uintptr_t)t->info.doc);
  pf_free(t->sig_name);
  pf_free(t);
}

/* ---- fields ---- */

typedef struct {
  uint8_t size, align, store, fast;
} field_layout;

/* How a field of type `ct` lies in the struct; -1 for void. */
static int layout_of(int ct, field_layout* out) {
  switch (ct) {
#define INT_LAYOUT_(id, name, ctype, member, ffi, rcode, lo, hi)          \
  case pf_t_##id:                                                         \
    *out = (field_layout){sizeof(ctype), _Alignof(ctype), pf_store_plain, \
                          ct == pf_t_int64  ? pf_fast_int64               \
                          : ct == pf_t_bool ? pf_fast_bool                \
                                            : pf_fast_none};              \
    return 0;
#define FLOAT_LAYOUT_(id, name, ctype, member, ffi, max)                        \
  case pf_t_##id:                                                               \
    *out = (field_layout){sizeof(ctype), _Alignof(ctype), pf_store_plain,       \
                          ct == pf_t_float64 ? pf_fast_float64 : pf_fast_none}; \
    return 0;
    PF_SIG_INT_TYPES(INT_LAYOUT_)
    PF_SIG_FLOAT_TYPES(FLOAT_LAYOUT_)
#undef INT_LAYOUT_
#undef FLOAT_LAYOUT_
    case pf_t_dtype:
      *out = (field_layout){sizeof(DLDataType), _Alignof(DLDataType), pf_store_plain, 0};
      return 0;
    case pf_t_device:
      *out = (field_layout){sizeof(DLDevice), _Alignof(DLDevice), pf_store_plain, 0};
      return 0;
    case pf_t_ptr:
      *out = (field_layout){sizeof(void*), _Alignof(void*), pf_store_plain, 0};
      return 0;
    case pf_t_str:
      *out = (field_layout){sizeof(char*), _Alignof(char*), pf_store_str, 0};
      return 0;
    case pf_t_bytes:
      *out = (field_layout){sizeof(PFByteArray*), _Alignof(PFByteArray*), pf_store_bytes, 0};
      return 0;
    case pf_t_tensor:
      *out = (field_layout){sizeof(void*), _Alignof(void*), pf_store_tensor, 0};
      return 0;
    case pf_t_void:
      return -1;
    default: /* func, array, map, shape, object, obj<KEY> */
      *out = (field_layout){sizeof(void*), _Alignof(void*), pf_store_ref, 0};
      return 0;
  }
}

/* What an offset field and an accessor field share: the name, doc and
 * type (into f), its layout (into *lay); `what` names the kind of member
 * ("field", "accessor field"), `at` gets "WHERE: object type 'KEY': field
 * 'NAME'". */
static int build_field_head(const char* where, pf_type* t, int i, const char* what,
                            const char* name, const char* type, const char* doc, pf_field* f,
                            field_layout* lay, char* at, size_t at_size) {
  const char* why = bad_name(name, 0);
  if (why != NULL) return TYPE_ERROR(kPFErrValueError, "the name of %s %d %s", what, i, why);
  int oom = 0;
  f->info.name = dup_or_null(name, &oom);
  f->info.doc = dup_or_null(doc, &oom);
  if (oom) return pf_oom(where);
  snprintf(at, at_size, "%s: object type '%s': field '%s'", where, t->info.key, name);
  int ct;
  const pf_type* obj = NULL;
  if (pf_sig_parse_type(at, type, &ct, &obj, &f->tree) != 0) return -1;
  if (ct == pf_t_any)
    return PF_ERROR(kPFErrValueError, "%s: its type is %s, which has no C type", at,
                    f->tree ? f->tree->params[0].pub.type : "any");
  if (layout_of(ct, lay) != 0)
    return PF_ERROR(kPFErrValueError, "%s: void is not a field type", at);
  f->info.type = f->tree ? f->tree->params[0].pub.type : obj ? obj->sig_name : pf_ctypes[ct].name;
  f->magic = PF_FIELD_MAGIC;
  f->t = (uint8_t)ct;
  f->store = lay->store;
  f->owner = t;
  f->owner_depth = t->info.depth;
  f->obj = obj;
  return 0;
}

static int build_field(const char* where, const PFObjectTypeDesc* d, pf_type* t, int i) {
  const PFFieldDesc* fd = &d->fields[i];
  pf_field* f = &t->own_fields[i];
  char at[PF_OBJECT_TYPE_KEY_MAX * 2 + 256];
  field_layout lay;
  if (build_field_head(where, t, i, "field", fd->name, fd->type, fd->doc, f, &lay, at,
                       sizeof(at)) != 0)
    return -1;
  int ct = f->t;
  const pf_type* obj = f->obj;
  if ((fd->flags & ~kPFFieldWritable) != 0)
    return PF_ERROR(kPFErrValueError, "%s: unknown flag bits 0x%x", at,
                    (unsigned)(fd->flags & ~kPFFieldWritable));
  if (fd->offset % lay.align != 0)
    return PF_ERROR(kPFErrValueError,
                    "%s: offset %zu is not aligned for its type %s (a multiple of %u)", at,
                    fd->offset, pf_ctype_name(ct, obj), (unsigned)lay.align);
  if (fd->offset > d->instance_size || lay.size > d->instance_size - fd->offset)
    return PF_ERROR(kPFErrValueError,
                    "%s: its %u bytes at offset %zu end past the instance size %zu", at,
                    (unsigned)lay.size, fd->offset, d->instance_size);
  f->info.offset = fd->offset;
  f->info.size = lay.size;
  f->info.flags = fd->flags;
  f->fast = lay.fast;
  return 0;
}

/* An accessor field: own field d->num_fields + i. No bytes of the struct;
 * its values cross as an offset field's of its type would, and are no
 * references. */
static int build_accessor(const char* where, const PFObjectTypeDesc* d, pf_type* t, int i) {
  const PFAccessorDesc* ad = &pf_desc_accessors(d)[i];
  pf_field* f = &t->own_fields[d->num_fields + i];
  char at[PF_OBJECT_TYPE_KEY_MAX * 2 + 256];
  field_layout lay;
  if (build_field_head(where, t, i, "accessor field", ad->name, ad->type, ad->doc, f, &lay, at,
                       sizeof(at)) != 0)
    return -1;
  if (f->tree != NULL ||
      (lay.store != pf_store_plain && lay.store != pf_store_str && lay.store != pf_store_bytes))
    return PF_ERROR(kPFErrValueError,
                    "%s: an accessor field's type is a number type, bool, dtype, device, ptr, "
                    "str or bytes, not %s (a field that holds references is an offset field)",
                    at, f->info.type);
  if (ad->get == NULL) return PF_ERROR(kPFErrValueError, "%s: its getter is NULL", at);
  f->info.flags = kPFFieldAccessor | (ad->set != NULL ? kPFFieldWritable : 0u);
  f->store = pf_store_plain; /* the instance owns nothing of it */
  f->fast = pf_fast_none;
  f->get = ad->get;
  f->set = ad->set;
  return 0;
}

/* ---- methods ---- */

/* 1 when `x` (a type a signature names) is `t` or an ancestor of it. A
 * description registered again names its own key, which resolves to the
 * registered type, so `t` is also matched by key. */
static int names_self_or_ancestor(const pf_type* t, const pf_type* x) {
  return x == t || strcmp(x->info.key, t->info.key) == 0 || pf_type_is_a(t, x);
}

/* Checks a method's signature `text` and keeps its canonical text; `at`
 * names the method. */
static int method_signature(const char* where, const char* at, pf_type* t, const PFMethodDesc* md,
                            const char* text, pf_method* m) {
  pf_siginfo* info = NULL;
  if (pf_siginfo_parse(at, text, &info) != 0) return -1;
  const pf_sig sig = info->sig;
  int is_static = (md->flags & kPFMethodStatic) != 0;
  if (!is_static && (sig.num_args == 0 ||
                     !(sig.args[0] == pf_t_object ||
                       (sig.args[0] == pf_t_obj && names_self_or_ancestor(t, sig.arg_obj[0]))))) {
    pf_siginfo_free(info);
    return PF_ERROR(kPFErrValueError,
                    "%s: an instance method takes the object first: its first parameter must be "
                    "object or obj<KEY> of '%s' or an ancestor, in \"%.200s\"",
                    at, t->info.key, text);
  }
  if (is_static && strcmp(md->name, "__init__") == 0 &&
      !(sig.ret == pf_t_object ||
        (sig.ret == pf_t_obj && strcmp(sig.ret_obj->info.key, t->info.key) == 0))) {
    pf_siginfo_free(info);
    return PF_ERROR(kPFErrValueError,
                    "%s: a static __init__ is a factory: its result must be object or %s, in "
                    "\"%.200s\"",
                    at, t->sig_name, text);
  }
  char* canon = pf_strdup(info->pub.text);
  pf_siginfo_free(info);
  if (canon == NULL) return pf_oom(where);
  m->info.signature = canon;
  return 0;
}

/* A checked method's signature (kPFMethodChecked): the text before the
 * separator, checked as any, then the C types after it, compared with this
 * library's. Nothing past the string's NUL is read. */
static int checked_method_signature(const char* where, const char* at, pf_type* t,
                                    const PFMethodDesc* md, pf_method* m) {
  const char* sep = strrchr(md->signature, PF_METHOD_C_TYPES_SEP[0]);
  if (sep == NULL)
    return PF_ERROR(kPFErrValueError,
                    "%s has kPFMethodChecked but no C types after its signature "
                    "(PF_METHOD_C_TYPES_SEP): the flag is set by PF_METHOD_CHECKED and "
                    "PF_STATIC_METHOD_CHECKED (checked.h), not by hand",
                    at);
  size_t n = (size_t)(sep - md->signature);
  char* text = pf_malloc(n + 1);
  if (text == NULL) return pf_oom(where);
  memcpy(text, md->signature, n);
  text[n] = '\0';
  int rc = method_signature(where, at, t, md, text, m);
  if (rc == 0) rc = pf_sig_check_c_types(at, text, sep + 1);
  pf_free(text);
  return rc;
}

static int build_method(const char* where, const PFObjectTypeDesc* d, pf_type* t, int i) {
  const PFMethodDesc* md = &d->methods[i];
  pf_method* m = &t->own_methods[i];
  const char* why = bad_name(md->name, 0);
  if (why != NULL) return TYPE_ERROR(kPFErrValueError, "the name of method %d %s", i, why);
  int oom = 0;
  m->info.name = dup_or_null(md->name, &oom);
  m->info.doc = dup_or_null(md->doc, &oom);
  if (oom) return pf_oom(where);
  const uint32_t known = kPFMethodStatic | kPFMethodNonBlocking | kPFMethodChecked;
  if ((md->flags & ~known) != 0)
    return TYPE_ERROR(kPFErrValueError, "method '%s': unknown flag bits 0x%x", md->name,
                      (unsigned)(md->flags & ~known));
  if ((md->packed == NULL) == (md->typed == NULL))
    return TYPE_ERROR(kPFErrValueError,
                      "method '%s' needs exactly one of a packed and a typed "
                      "function, it has %s",
                      md->name, md->packed ? "both" : "neither");
  if (md->typed != NULL && md->signature == NULL)
    return TYPE_ERROR(kPFErrValueError, "typed method '%s' has no signature", md->name);
  if ((md->flags & kPFMethodChecked) && md->packed != NULL)
    return TYPE_ERROR(kPFErrValueError,
                      "method '%s' has kPFMethodChecked but is packed: the flag is "
                      "PF_METHOD_CHECKED's (checked.h), for a typed method",
                      md->name);
  if (md->signature != NULL) {
    char at[PF_OBJECT_TYPE_KEY_MAX * 2 + 256];
    snprintf(at, sizeof(at), "%s: object type '%s': method '%s'", where, t->info.key, md->name);
    if ((md->flags & kPFMethodChecked) ? checked_method_signature(where, at, t, md, m)
                                       : method_signature(where, at, t, md, md->signature, m))
      return -1;
  }
  m->info.flags = md->flags & ~kPFMethodChecked; /* the check leaves nothing to report */
  m->packed = md->packed;
  m->typed = md->typed;
  m->owner = t;
  m->own_index = i;
  return 0;
}

/* ---- the whole ---- */

/* A name of the type's namespace, for the clash check. */
typedef struct {
  const char* name;
  int kind; /* 0 own field, 1 own method, 2 inherited field, 3 inherited method */
} name_entry;

static int cmp_names(const void* a, const void* b) {
  const name_entry* x = a;
  const name_entry* y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : x->kind - y->kind;
}

static const char* const k_kinds[] = {"a field", "a method", "an inherited field",
                                      "an inherited method"};

/* Field and method names are one namespace (a host's attributes): a name
 * is taken once, except that a method overrides an inherited method. */
static int check_names(const char* where, pf_type* t) {
  const pf_type* p = t->parent;
  int inh_f = p ? p->info.num_fields : 0, inh_m = p ? p->info.num_methods : 0;
  size_t n = (size_t)t->num_own_fields + (size_t)t->num_own_methods + (size_t)inh_f + (size_t)inh_m;
  name_entry* e = pf_malloc(sizeof(*e) * (n ? n : 1));
  if (e == NULL) return pf_oom(where);
  size_t k = 0;
  for (int i = 0; i < t->num_own_fields; ++i) e[k++] = (name_entry){t->own_fields[i].info.name, 0};
  for (int i = 0; i < t->num_own_methods; ++i)
    e[k++] = (name_entry){t->own_methods[i].info.name, 1};
  for (int i = 0; i < inh_f; ++i) e[k++] = (name_entry){p->info.fields[i]->name, 2};
  for (int i = 0; i < inh_m; ++i) e[k++] = (name_entry){p->info.methods[i]->name, 3};
  qsort(e, n, sizeof(*e), cmp_names);
  int rc = 0;
  for (size_t i = 0; i + 1 < n && rc == 0; ++i) {
    if (strcmp(e[i].name, e[i + 1].name) != 0) continue;
    int override = e[i].kind == 1 && e[i + 1].kind == 3 &&
                   (i + 2 >= n || strcmp(e[i + 2].name, e[i].name) != 0);
    if (!override)
      rc = TYPE_ERROR(kPFErrValueError, "the name '%s' is taken twice: by %s and by %s", e[i].name,
                      k_kinds[e[i].kind], k_kinds[e[i + 1].kind]);
    ++i; /* an override is a pair */
  }
  pf_free(e);
  return rc;
}

static int cmp_offsets(const void* a, const void* b) {
  const PFFieldInfo* x = *(const PFFieldInfo* const*)a;
  const PFFieldInfo* y = *(const PFFieldInfo* const*)b;
  return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* No two fields, own or inherited, share a byte. */
static int check_overlaps(const char* where, pf_type* t) {
  size_t n = (size_t)t->info.num_fields;
  const PFFieldInfo** s = pf_malloc(sizeof(*s) * (n ? n : 1));
  if (s == NULL) return pf_oom(where);
  size_t m = 0; /* the offset fields: an accessor field has no bytes */
  for (size_t i = 0; i < n; ++i)
    if (!(t->info.fields[i]->flags & kPFFieldAccessor)) s[m++] = t->info.fields[i];
  n = m;
  qsort(s, n, sizeof(*s), cmp_offsets);
  int rc = 0;
  for (size_t i = 0; i + 1 < n && rc == 0; ++i)
    if (s[i]->offset + s[i]->size > s[i + 1]->offset)
      rc = TYPE_ERROR(kPFErrValueError,
                      "field '%s' (%zu bytes at offset %zu) overlaps field '%s' (at offset %zu)",
                      s[i]->name, s[i]->size, s[i]->offset, s[i + 1]->name, s[i + 1]->offset);
  pf_free(s);
  return rc;
}

/* The inherited and own members as the description lists them, and what
 * an instance releases. */
static int build_tables(const char* where, pf_type* t) {
  const pf_type* p = t->parent;
  int inh_f = p ? p->info.num_fields : 0, inh_m = p ? p->info.num_methods : 0;
  int inh_o = p ? p->num_owned : 0;
  const PFFieldInfo** fields = pf_malloc(sizeof(*fields) * (size_t)(inh_f + t->num_own_fields + 1));
  const PFMethodInfo** methods =
      pf_malloc(sizeof(*methods) * (size_t)(inh_m + t->num_own_methods + 1));
  pf_owned_slot* owned = pf_malloc(sizeof(*owned) * (size_t)(inh_o + t->num_own_fields + 1));
  t->info.fields = fields;
  t->info.methods = methods;
  t->owned = owned;
  if (fields == NULL || methods == NULL || owned == NULL) return pf_oom(where);
  int nf = 0, nm = 0, no = 0;
  for (int i = 0; i < inh_f; ++i) fields[nf++] = p->info.fields[i];
  for (int i = 0; i < t->num_own_fields; ++i) fields[nf++] = &t->own_fields[i].info;
  for (int i = 0; i < inh_m; ++i) methods[nm++] = p->info.methods[i];
  for (int i = 0; i < t->num_own_methods; ++i) {
    const PFMethodInfo* m = &t->own_methods[i].info;
    int j = 0;
    while (j < inh_m && strcmp(methods[j]->name, m->name) != 0) ++j;
    if (j < inh_m) methods[j] = m; /* overrides in place */
    else methods[nm++] = m;
  }
  for (int i = 0; i < inh_o; ++i) owned[no++] = p->owned[i];
  for (int i = 0; i < t->num_own_fields; ++i)
    if (t->own_fields[i].store != pf_store_plain)
      owned[no++] = (pf_owned_slot){t->own_fields[i].info.offset, t->own_fields[i].store};
  t->info.num_fields = nf;
  t->info.num_methods = nm;
  t->num_owned = no;
  t->info.init = NULL;
  for (int i = 0; i < nm; ++i)
    if (strcmp(methods[i]->name, "__init__") == 0) t->info.init = methods[i];
  return check_overlaps(where, t);
}

/* The counts and arrays of members. */
static int check_members(const char* where, pf_type* t, const char* what, int n, const void* arr) {
  if (n < 0 || n > PF_OBJECT_TYPE_MAX_MEMBERS)
    return TYPE_ERROR(kPFErrValueError, "num_%s is %d; a type has 0 to %d", what, n,
                      PF_OBJECT_TYPE_MAX_MEMBERS);
  if (n > 0 && arr == NULL)
    return TYPE_ERROR(kPFErrTypeError, "%s is NULL with num_%s %d", what, what, n);
  return 0;
}

/* Size, depth, ancestors, doc. */
static int build_head(const char* where, const PFObjectTypeDesc* d, const pf_type* parent,
                      pf_type* t) {
  t->parent = parent;
  t->info.depth = parent ? parent->info.depth + 1 : 0;
  if (t->info.depth > PF_OBJECT_TYPE_MAX_DEPTH)
    return TYPE_ERROR(kPFErrValueError, "it would have more than %d ancestors",
                      PF_OBJECT_TYPE_MAX_DEPTH);
  if (parent && d->instance_size < parent->info.instance_size)
    return TYPE_ERROR(kPFErrValueError,
                      "instance_size %zu is smaller than its parent '%s''s %zu (its struct "
                      "begins with the parent's)",
                      d->instance_size, parent->info.key, parent->info.instance_size);
  if (d->instance_size > PF_OBJECT_TYPE_MAX_SIZE)
    return TYPE_ERROR(kPFErrValueError,
                      "instance_size %zu is larger than PF_OBJECT_TYPE_MAX_SIZE (%zu bytes)",
                      d->instance_size, PF_OBJECT_TYPE_MAX_SIZE);
  int na = pf_desc_num_accessors(d);
  if (check_members(where, t, "fields", d->num_fields, d->fields) != 0 ||
      check_members(where, t, "methods", d->num_methods, d->methods) != 0 ||
      check_members(where, t, "accessors", na, pf_desc_accessors(d)) != 0)
    return -1;
  if (d->num_fields + na > PF_OBJECT_TYPE_MAX_MEMBERS)
    return TYPE_ERROR(kPFErrValueError, "it has %d fields and accessor fields; a type has 0 to %d",
                      d->num_fields + na, PF_OBJECT_TYPE_MAX_MEMBERS);
  t->info.instance_size = d->instance_size;
  t->fin = d->finalizer;
  t->prepare = pf_desc_prepare(d);
  int oom = 0;
  t->info.doc = dup_or_null(d->doc, &oom);
  t->ancestors = pf_malloc(sizeof(pf_type*) * (size_t)(t->info.depth + 1));
  t->own_fields = pf_calloc((size_t)(d->num_fields + na + 1), sizeof(pf_field));
  t->own_methods = pf_calloc((size_t)(d->num_methods ? d->num_methods : 1), sizeof(pf_method));
  if (oom || t->ancestors == NULL || t->own_fields == NULL || t->own_methods == NULL)
    return pf_oom(where);
  for (int i = 0; i < t->info.depth; ++i) t->ancestors[i] = parent->ancestors[i];
  t->ancestors[t->info.depth] = t;
  /* Counted before they are filled, so that pf_type_free frees what is. */
  t->num_own_fields = d->num_fields + na;
  t->num_own_methods = d->num_methods;
  return 0;
}

pf_type* pf_type_build(const char* where, const PFObjectTypeDesc* d, const pf_type* parent,
                       pf_type* t) {
  if (build_head(where, d, parent, t) != 0) return NULL;
  for (int i = 0; i < d->num_fields; ++i)
    if (build_field(where, d, t, i) != 0) return NULL;
  for (int i = 0; i < pf_desc_num_accessors(d); ++i)
    if (build_accessor(where, d, t, i) != 0) return NULL;
  for (int i = 0; i < d->num_methods; ++i)
    if (build_method(where, d, t, i) != 0) return NULL;
  if (check_names(where, t) != 0 || build_tables(where, t) != 0) return NULL;
  return t;
}

/* ---- comparing descriptions ---- */

const char* pf_type_differs(const pf_type* old, const pf_type* fresh, int same_code) {
  static _Thread_local char why[PF_OBJECT_TYPE_KEY_MAX + 64];
  if (!same_text(old->parent ? old->parent->info.key : NULL,
                 fresh->parent ? fresh->parent->info.key : NULL))
    return "its parent differs";
  if (old->info.instance_size != fresh->info.instance_size) return "its instance size differs";
  if (!same_text(old->info.doc, fresh->info.doc)) return "its doc differs";
  if (same_code && old->fin != fresh->fin) return "its finalizer differs";
  if (same_code ? old->prepare != fresh->prepare
                : (old->prepare == NULL) != (fresh->prepare == NULL))
    return "its prepare hook differs";
  if (old->num_own_fields != fresh->num_own_fields) return "its number of fields differs";
  if (old->num_own_methods != fresh->num_own_methods) return "its number of methods differs";
  for (int i = 0; i < old->num_own_fields; ++i) {
    const PFFieldInfo* a = &old->own_fields[i].info;
    const PFFieldInfo* b = &fresh->own_fields[i].info;
    const pf_field* fa = &old->own_fields[i];
    const pf_field* fb = &fresh->own_fields[i];
    if (strcmp(a->name, b->name) != 0 || strcmp(a->type, b->type) != 0 || a->offset != b->offset ||
        a->flags != b->flags || !same_text(a->doc, b->doc) ||
        (same_code && (fa->get != fb->get || fa->set != fb->set))) {
      snprintf(why, sizeof(why), "its field '%s' differs", a->name);
      return why;
    }
  }
  for (int i = 0; i < old->num_own_methods; ++i) {
    const pf_method* a = &old->own_methods[i];
    const pf_method* b = &fresh->own_methods[i];
    if (strcmp(a->info.name, b->info.name) != 0 ||
        !same_text(a->info.signature, b->info.signature) || a->info.flags != b->info.flags ||
        !same_text(a->info.doc, b->info.doc) || (a->packed == NULL) != (b->packed == NULL) ||
        (same_code && (a->packed != b->packed || a->typed != b->typed))) {
      snprintf(why, sizeof(why), "its method '%s' differs%s", a->info.name,
               same_code ? " (its code too is compared: another copy of the library?)" : "");
      return why;
    }
  }
  return NULL;
}

/* ---- a type's code ---- */

void pf_type_code_free(pf_type_code* c) {
  if (c == NULL) return;
  pf_saved_error e;
  pf_error_save(&e);
  for (int i = 0; c->methods != NULL && c->methods[i] != NULL; ++i) PFFuncFree(c->methods[i]);
  PFFuncFree(c->ctor);
  for (int i = 0; i < 2; ++i)
    if (c->libs[i] != NULL) pf_object_release(c->libs[i]);
  pf_free(c->methods);
  pf_free(c);
  pf_error_restore(&e);
}

/* An instance method checks its object before its code runs: a typed one
 * as its first argument's conversion, a packed one in pf_method_call. */
static int make_method(const char* where, const pf_type* t, const pf_method* m,
                       PFFunctionHandle* out) {
  PFFunctionHandle f = NULL;
  int is_static = (m->info.flags & kPFMethodStatic) != 0;
  void* typed = m->typed ? (void*)(uintptr_t)pf_code_addr(m->typed) : NULL;
  int rc = typed && is_static ? PFFuncCreateFromTyped(typed, m->info.signature, &f)
           : typed            ? pf_typed_create_method(where, typed, m->info.signature, t, &f)
           : is_static        ? PFFuncCreateFromCFunc(m->packed, NULL, NULL, &f)
                       : PFFuncCreateFromCFunc(pf_method_call, (void*)(uintptr_t)m, NULL, &f);
  /* pf_method_call runs the method's code: keep its library loaded. */
  if (rc == 0 && !typed && !is_static)
    rc = pf_object_hold_code(f, pf_code_addr((void (*)(void))m->packed), where);
  size_t n = strlen(t->info.key) + strlen(m->info.name) + 2;
  char* name = rc == 0 ? pf_malloc(n) : NULL;
  if (rc == 0 && name == NULL) rc = pf_oom(where);
  if (rc == 0) {
    snprintf(name, n, "%s.%s", t->info.key, m->info.name);
    rc = PFFuncSetInfo(f, name, m->typed ? NULL : m->info.signature, m->info.doc);
  }
  if (rc == 0 && (m->info.flags & kPFMethodNonBlocking)) rc = PFFuncSetFlags(f, kPFFuncNonBlocking);
  pf_free(name);
  if (rc != 0) {
    PFFuncFree(f);
    char line[PF_OBJECT_TYPE_KEY_MAX * 2 + 64];
    snprintf(line, sizeof(line), "  while making method %s.%s (%s)", t->info.key, m->info.name,
             where);
    PFErrorAppendTraceback(line);
    return -1;
  }
  *out = f;
  return 0;
}

/* "obj<KEY>(ARGS)": the constructor's signature, from its __init__'s
 * (without the object, for an instance method; names, defaults and
 * constraints kept); NULL when __init__ has none; "obj<KEY>()" without
 * __init__. *oom on allocation failure. */
static char* ctor_signature(const char* where, const pf_type* t, int* oom) {
  const PFMethodInfo* init = t->info.init;
  char* args = NULL;
  if (init != NULL) {
    if (init->signature == NULL) return NULL;
    pf_siginfo* info = NULL;
    /* The text is canonical and its types registered: only memory fails. */
    if (pf_siginfo_parse(where, init->signature, &info) != 0) {
      *oom = 1;
      return NULL;
    }
    args = pf_siginfo_text_without(info, (init->flags & kPFMethodStatic) ? 0u : 1u);
    pf_siginfo_free(info);
    if (args == NULL) {
      *oom = 1;
      return NULL;
    }
  }
  const char* list = args ? strchr(args, '(') : "()";
  size_t n = strlen(t->sig_name) + strlen(list) + 1;
  char* s = pf_malloc(n);
  if (s != NULL) snprintf(s, n, "%s%s", t->sig_name, list);
  pf_free(args);
  if (s == NULL) *oom = 1;
  return s;
}

static int make_ctor(const char* where, const pf_type* t, PFFunctionHandle* out) {
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(pf_type_construct, (void*)(uintptr_t)t, NULL, &f) != 0) return -1;
  int oom = 0;
  char* sig = ctor_signature(where, t, &oom);
  int rc = oom ? pf_oom(where) : PFFuncSetInfo(f, t->info.key, sig, t->info.doc);
  pf_free(sig);
  if (rc != 0) {
    PFFuncFree(f);
    return -1;
  }
  *out = f;
  return 0;
}

int pf_type_code_build(const char* where, const pf_type* t, pf_object* lib, pf_type_code** out) {
  pf_type_code* c = pf_calloc(1, sizeof(*c));
  if (c == NULL) {
    if (lib != NULL) pf_object_release_keeping_error(lib);
    return pf_oom(where);
  }
  c->libs[1] = lib;
  /* NULL-terminated, so that a partial one frees what it holds. */
  c->methods = pf_calloc((size_t)t->num_own_methods + 1, sizeof(PFFunctionHandle));
  int rc = c->methods == NULL ? pf_oom(where) : 0;
  /* The finalizer's library, or the prepare hook's: one library's code. */
  void (*first)(void) = t->fin != NULL ? (void (*)(void))t->fin : (void (*)(void))t->prepare;
  if (rc == 0 && first != NULL) rc = pf_library_of_code(pf_code_addr(first), &c->libs[0], where);
  for (int i = 0; i < t->num_own_methods && rc == 0; ++i)
    rc = make_method(where, t, &t->own_methods[i], &c->methods[i]);
  if (rc == 0) rc = make_ctor(where, t, &c->ctor);
  if (rc != 0) {
    pf_type_code_free(c);
    return -1;
  }
  *out = c;
  return 0;
}
