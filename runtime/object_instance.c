/* Instances of registered object types: allocation and destruction, their
 * struct, is-instance, fields through their handles, methods, the
 * constructor. */
#include <stdio.h>
#include <string.h>

#include "object_type.h"

/* ---- allocation ---- */

/* Takes the value of an owning field out of its slot (leaving NULL) and
 * frees or releases it. */
static void release_slot(char* data, const pf_owned_slot* s) {
  void* p;
  memcpy(&p, data + s->offset, sizeof(p));
  if (p == NULL) return;
  memset(data + s->offset, 0, sizeof(p));
  if (s->store == pf_store_str || s->store == pf_store_bytes) pf_free(p);
  else pf_object_release(p); /* inside a destroy: queued, not recursed into */
}

void pf_instance_drop_fields(PFObjectHandle obj) {
  const pf_type* t = ((pf_instance*)obj)->type;
  for (int i = 0; i < t->num_owned; ++i) release_slot(pf_instance_data(obj), &t->owned[i]);
}

static void instance_destroy(pf_object* o) {
  pf_instance* in = (pf_instance*)o;
  const pf_type* t = in->type;
  char* data = pf_instance_data(in);
  /* The type's own finalizer first, then its parent's, as C++ destructors
   * run; the fields' values after them, since finalizers may read them. */
  for (const pf_type* k = t; k != NULL; k = k->parent)
    if (k->fin != NULL) k->fin(data);
  for (int i = 0; i < t->num_owned; ++i) release_slot(data, &t->owned[i]);
  pf_free(in);
}

/* A zeroed instance of a ready type; NULL with a MemoryError. */
static pf_instance* instance_new(const char* where, const pf_type* t) {
  pf_instance* in = pf_calloc(1, PF_INSTANCE_HEAD + t->info.instance_size);
  if (in == NULL) {
    pf_oom(where);
    return NULL;
  }
  pf_object_init(&in->base, t->info.type_index, instance_destroy);
  in->type = t;
  return in;
}

static int no_type(const char* where, uint32_t type_index) {
  return PF_ERROR(kPFErrKeyError, "%s: %u is not the index of a registered object type", where,
                  (unsigned)type_index);
}

int PFObjectAlloc(uint32_t type_index, PFObjectHandle* out) {
  PF_CHECK_ARG(out);
  const pf_type* t = pf_type_at(type_index);
  if (t == NULL) return no_type(__func__, type_index);
  if (pf_type_ready(__func__, t) != 0) return -1;
  pf_instance* in = instance_new(__func__, t);
  if (in == NULL) return -1;
  *out = in;
  return 0;
}

/* "F: argument 'obj' is not a live instance of a registered type (a T
 * object)". */
static int not_instance(const char* where, const void* obj) {
  if (!pf_is_object(obj, 0)) return pf_err_bad_object(where, "obj", obj, 0);
  const char* name = PFObjectTypeName(((const pf_object*)obj)->type_index);
  return PF_ERROR(kPFErrTypeError,
                  "%s: argument 'obj' is a %s object, not an instance of a registered type", where,
                  name ? name : "unknown");
}

int PFObjectGetData(PFObjectHandle obj, void** out) {
  if (!pf_is_instance(obj)) return not_instance(__func__, obj);
  PF_CHECK_ARG(out);
  *out = pf_instance_data(obj);
  return 0;
}

int pf_object_is_a(const void* h, const pf_type* t) {
  return pf_is_instance(h) && pf_type_is_a(((const pf_instance*)h)->type, t);
}

int PFObjectIsInstance(PFObjectHandle obj, uint32_t type_index, int* out) {
  PF_CHECK_OBJECT(obj, 0);
  PF_CHECK_ARG(out);
  const pf_type* t = pf_type_at(type_index);
  if (t != NULL) {
    *out = pf_object_is_a(obj, t);
    return 0;
  }
  if (type_index == 0 || type_index >= kPFObjectTypeEnd || PFObjectTypeName(type_index) == NULL)
    return PF_ERROR(kPFErrKeyError, "%s: argument 'type_index' is %u, not an object type", __func__,
                    (unsigned)type_index);
  *out = ((const pf_object*)obj)->type_index == type_index;
  return 0;
}

/* ---- fields ---- */

static int is_field(const pf_field* f) { return f != NULL && f->magic == PF_FIELD_MAGIC; }

/* 1 when the instance's type is the field's type or descends from it. */
static inline int has_field(const pf_instance* in, const pf_field* f) {
  const pf_type* t = in->type;
  return t == f->owner ||
         (t->info.depth > f->owner_depth && t->ancestors[f->owner_depth] == f->owner);
}

/* The first misuse of a field accessor's arguments; -1. */
__attribute__((noinline, cold)) static int field_misuse(const char* where, const void* obj,
                                                        const pf_field* f, const void* out,
                                                        const void* out_code) {
  if (!pf_is_instance(obj)) return not_instance(where, obj);
  if (f == NULL) return pf_err_null_arg(where, "field");
  if (!is_field(f))
    return PF_ERROR(kPFErrTypeError, "%s: argument 'field' is not a field handle", where);
  if (!has_field(obj, f))
    return PF_ERROR(kPFErrTypeError,
                    "%s: field '%s' of %s is not a field of a %s object (not an instance of %s)",
                    where, f->info.name, f->owner->info.key,
                    ((const pf_instance*)obj)->type->info.key, f->owner->info.key);
  return pf_err_null_arg(where, out == NULL ? "out" : out_code == NULL ? "out_type_code" : "?");
}

/* "field 'NAME' of KEY" (cut to n - 1 bytes), for conversion errors. Every
 * field write makes it, so it is copied, not formatted: snprintf cost more
 * than the write itself (a third of PFFromJSON's time on instances). */
static void field_what(const pf_instance* in, const pf_field* f, char* buf, size_t n) {
  const char* const parts[] = {"field '", f->info.name, "' of ", in->type->info.key};
  size_t k = 0;
  for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); ++i) {
    size_t m = strlen(parts[i]);
    if (m > n - 1 - k) m = n - 1 - k;
    memcpy(buf + k, parts[i], m);
    k += m;
  }
  buf[k] = '\0';
}

/* An accessor's -1: its error, or a RuntimeError when it recorded none
 * (`gen`: the thread's error generation before it ran). */
static int accessor_failed(const char* where, const pf_instance* in, const pf_field* f,
                           const char* which, uint64_t gen) {
  if (pf_hot.err_gen != gen && PFErrorGetKind()[0] != '\0') return -1;
  char what[PF_OBJECT_TYPE_KEY_MAX * 2 + 32];
  field_what(in, f, what, sizeof(what));
  return PF_ERROR(kPFErrRuntimeError, "%s: the %s of %s failed without recording an error", where,
                  which, what);
}

/* Reads an accessor field: its getter's value, converted as an offset
 * field's bytes would be (so a getter gives only what the type holds). */
static int accessor_read(const char* where, const pf_instance* in, const pf_field* f, PFValue* out,
                         int* out_code) {
  PFValue v = {.v_int64 = 0};
  int code = kPFNull;
  uint64_t gen = pf_hot.err_gen;
  if (f->get(pf_instance_data(in), &v, &code) != 0)
    return accessor_failed(where, in, f, "getter", gen);
  char what[PF_OBJECT_TYPE_KEY_MAX * 2 + 48];
  pf_cvalue c;
  pf_conv k = pf_packed_to_c(f->t, NULL, code, &v, &c, 1);
  if (k == pf_conv_ok && pf_c_to_packed(f->t, NULL, &c, out, out_code) == 0) return 0;
  field_what(in, f, what, sizeof(what) - 24);
  strcat(what, " (its getter's value)");
  if (k != pf_conv_ok) return pf_conv_error(k, where, what, f->t, NULL, code, &v);
  return pf_c_to_packed_error(where, what, f->t, NULL, &c);
}

/* Reads a field that the getter's fast path does not. */
__attribute__((noinline)) static int field_read(const char* where, const pf_instance* in,
                                                const pf_field* f, const char* p, PFValue* out,
                                                int* out_code) {
  if (f->get != NULL) return accessor_read(where, in, f, out, out_code);
  pf_cvalue c;
  int t = f->t;
  switch (f->store) {
    case pf_store_plain:
      pf_cvalue_load(t, p, &c);
      if (t == pf_t_dtype && c.dt.code == 0 && c.dt.bits == 0 && c.dt.lanes == 0) {
        out->v_handle = NULL; /* a zeroed struct's dtype: no data type (no lanes) */
        *out_code = kPFNull;
        return 0;
      }
      break;
    case pf_store_tensor: {
      void* o;
      memcpy(&o, p, sizeof(o));
      if (o != NULL && !pf_is_object(o, kPFObjectTensor)) {
        char what[PF_OBJECT_TYPE_KEY_MAX * 2 + 32];
        field_what(in, f, what, sizeof(what));
        return PF_ERROR(kPFErrTypeError, "%s: %s holds a pointer that is not a live tensor object",
                        where, what);
      }
      out->v_handle = o;
      *out_code = o ? kPFObjectHandle : kPFNull;
      return 0;
    }
    default:
      memcpy(&c.p, p, sizeof(c.p));
      break; /* str, bytes, the references */
  }
  if (pf_c_to_packed(t, f->obj, &c, out, out_code) == 0) return 0;
  char what[PF_OBJECT_TYPE_KEY_MAX * 2 + 32];
  field_what(in, f, what, sizeof(what));
  return pf_c_to_packed_error(where, what, t, f->obj, &c);
}

static inline int field_get(const char* where, PFObjectHandle obj, const pf_field* f, PFValue* out,
                            int* out_code) {
  const pf_instance* in = obj;
  if (__builtin_expect(!pf_is_instance(in) || !is_field(f) || !has_field(in, f) || out == NULL ||
                           out_code == NULL,
                       0))
    return field_misuse(where, obj, f, out, out_code);
  const char* p = (const char*)pf_instance_data(in) + f->info.offset;
  switch (f->fast) {
    case pf_fast_int64:
      memcpy(&out->v_int64, p, sizeof(int64_t));
      *out_code = kPFInt;
      return 0;
    case pf_fast_float64:
      memcpy(&out->v_float64, p, sizeof(double));
      *out_code = kPFFloat;
      return 0;
    case pf_fast_bool:
      out->v_int64 = *(const bool*)p;
      *out_code = kPFBool;
      return 0;
    default:
      return field_read(where, in, f, p, out, out_code);
  }
}

int PFObjectGetField(PFObjectHandle obj, const PFFieldInfo* field, PFValue* out,
                     int* out_type_code) {
  return field_get("PFObjectGetField", obj, (const pf_field*)field, out, out_type_code);
}

/* Replaces the pointer at p with `fresh`, then frees or releases the old
 * one. */
int pf_instance_children(pf_walk* w, const void* obj) {
  const pf_type* t = ((const pf_instance*)obj)->type;
  const char* d = pf_instance_data(obj);
  int mutable_refs = 0;
  for (int i = 0; i < t->num_owned; ++i) {
    if (t->owned[i].store != pf_store_ref && t->owned[i].store != pf_store_tensor) continue;
    mutable_refs = 1;
    void* o;
    memcpy(&o, d + t->owned[i].offset, sizeof(o));
    if (pf_walk_spend(w, 1) != 0 || (o != NULL && pf_walk_child(w, o) != 0)) return -1;
  }
  if (mutable_refs) pf_walk_mutable(w);
  return 0;
}

static void swap_owned(char* p, void* fresh, int store) {
  void* old;
  memcpy(&old, p, sizeof(old));
  memcpy(p, &fresh, sizeof(fresh));
  if (old == NULL) return;
  if (store == pf_store_str || store == pf_store_bytes) pf_free(old);
  else pf_object_release(old);
}

/* What a write cannot take before conversion: a NULL pointer under a
 * pointer code, bytes that do not describe memory. */
static int check_pointer(const char* where, const char* what, int code, const PFValue* v) {
  if ((code == kPFStr || code == kPFBytes || code == kPFDLTensorHandle) && v->v_handle == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: %s: got type code %s with a NULL pointer", where, what,
                    PFTypeCodeName(code));
  if (code != kPFBytes) return 0;
  const PFByteArray* ba = v->v_handle;
  if (ba->data == NULL && ba->size != 0)
    return PF_ERROR(kPFErrTypeError, "%s: %s: got bytes of size %zu with NULL data", where, what,
                    ba->size);
  if (ba->size > PF_MAX_OBJECT_SIZE - sizeof(PFByteArray))
    return PF_ERROR(kPFErrValueError,
                    "%s: %s: got bytes of size %zu, larger than any object can "
                    "be",
                    where, what, ba->size);
  return 0;
}

typedef struct {
  const char* where;
  const char* what;
} field_pos;

static void field_name(const void* ctx, char* who, size_t wn, char* what, size_t tn) {
  const field_pos* p = ctx;
  snprintf(who, wn, "%s", p->where);
  snprintf(what, tn, "%s", p->what);
}

static int field_store(const char* where, const char* what, pf_instance* in, const pf_field* f,
                       const PFValue* v, int code);

/* Writes a field: its tree (element types, optional, union) checks and
 * converts the value first; what that made is the field's to keep. */
static int field_write(const char* where, pf_instance* in, const pf_field* f, const PFValue* v,
                       int code, int any) {
  char what[PF_OBJECT_TYPE_KEY_MAX * 2 + 32];
  field_what(in, f, what, sizeof(what));
  if (!any && !(f->info.flags & kPFFieldWritable))
    return PF_ERROR(kPFErrAttributeError, "%s: %s is read-only", where, what);
  if (check_pointer(where, what, code, v) != 0) return -1;
  if (f->tree == NULL) return field_store(where, what, in, f, v, code);
  field_pos pos = {where, what};
  const pf_sig* sig = &f->tree->sig;
  PFValue pv;
  int pc;
  PFObjectHandle made = NULL;
  if (pf_tree_convert(sig->nodes, sig->arg_et[0], field_name, &pos, code, v, &pv, &pc, &made) != 0)
    return -1;
  int st = field_store(where, what, in, f, &pv, pc);
  PFObjectFree(made);
  return st;
}

static int field_store(const char* where, const char* what, pf_instance* in, const pf_field* f,
                       const PFValue* v, int code) {
  char* p = (char*)pf_instance_data(in) + f->info.offset;
  int t = f->t;
  pf_cvalue c;
  if (f->store == pf_store_tensor) {
    if (code == kPFDLTensorHandle)
      return PF_ERROR(kPFErrTypeError,
                      "%s: %s: expected a tensor object, got a DLTensor* (type code tensor), "
                      "which is only borrowed for a call and cannot be kept",
                      where, what);
    /* A tensor object, kept as the object: the field's value is its owner. */
    if (code != kPFNull && !(code == kPFObjectHandle && pf_is_object(v->v_handle, kPFObjectTensor)))
      return pf_conv_error(code == kPFObjectHandle && pf_is_object(v->v_handle, 0) ? pf_conv_object
                           : code == kPFObjectHandle                               ? pf_conv_dead
                                                                                   : pf_conv_type,
                           where, what, t, NULL, code, v);
    c.o = code == kPFNull ? NULL : v->v_handle;
  } else if (t == pf_t_dtype && code == kPFNull) {
    memset(&c.dt, 0, sizeof(c.dt)); /* what a zero dtype reads as */
  } else {
    /* null is a NULL str or bytes for an offset field; an accessor takes none */
    pf_conv k = pf_packed_to_c(t, f->obj, code, v, &c, f->set == NULL);
    if (k != pf_conv_ok) return pf_conv_error(k, where, what, t, f->obj, code, v);
  }
  /* A read-only accessor field restored from a document: its getter
   * computes it, and it has no bytes in the struct to write. */
  if (f->get != NULL && f->set == NULL) return 0;
  if (f->set != NULL) { /* an accessor field: the setter takes the converted value */
    PFValue pv;
    int pc;
    if (pf_c_to_packed(t, f->obj, &c, &pv, &pc) != 0)
      return pf_c_to_packed_error(where, what, t, f->obj, &c);
    uint64_t gen = pf_hot.err_gen;
    if (f->set(pf_instance_data(in), pv, pc) != 0)
      return accessor_failed(where, in, f, "setter", gen);
    return 0;
  }
  switch (f->store) {
    case pf_store_plain:
      pf_cvalue_store(t, &c, p);
      return 0;
    case pf_store_str: {
      char* s = c.s ? pf_strdup(c.s) : NULL;
      if (c.s && s == NULL) return pf_oom(where);
      swap_owned(p, s, pf_store_str);
      return 0;
    }
    case pf_store_bytes: {
      PFByteArray* b = NULL;
      if (c.by != NULL) {
        b = pf_malloc(sizeof(PFByteArray) + c.by->size);
        if (b == NULL) return pf_oom(where);
        b->data = (const char*)(b + 1);
        b->size = c.by->size;
        if (c.by->size) memcpy(b + 1, c.by->data, c.by->size);
      }
      swap_owned(p, b, pf_store_bytes);
      return 0;
    }
    default: /* a reference of the instance's own */
      if (c.o != NULL) pf_object_retain(c.o);
      swap_owned(p, c.o, f->store);
      return 0;
  }
}

int PFObjectSetField(PFObjectHandle obj, const PFFieldInfo* field, PFValue value, int type_code) {
  const pf_field* f = (const pf_field*)field;
  if (!pf_is_instance(obj) || !is_field(f) || !has_field(obj, f))
    return field_misuse(__func__, obj, f, "", "");
  return field_write(__func__, obj, f, &value, type_code, 0);
}

int pf_instance_restore_field(const char* where, PFObjectHandle obj, const PFFieldInfo* field,
                              const PFValue* v, int code) {
  return field_write(where, obj, (const pf_field*)field, v, code, 1);
}

/* The field `name` of an instance, or -1 with an AttributeError. */
static int field_by_name(const char* where, PFObjectHandle obj, const char* name,
                         const pf_field** out) {
  if (!pf_is_instance(obj)) return not_instance(where, obj);
  if (name == NULL) return pf_err_null_arg(where, "name");
  const pf_type* t = ((const pf_instance*)obj)->type;
  *out = pf_type_find_field(t, name);
  if (*out == NULL)
    return PF_ERROR(kPFErrAttributeError, "%s: '%s' object has no field '%.300s'", where,
                    t->info.key, name);
  return 0;
}

int PFObjectGetFieldByName(PFObjectHandle obj, const char* name, PFValue* out, int* out_type_code) {
  const pf_field* f = NULL;
  if (field_by_name(__func__, obj, name, &f) != 0) return -1;
  return field_get(__func__, obj, f, out, out_type_code);
}

int PFObjectSetFieldByName(PFObjectHandle obj, const char* name, PFValue value, int type_code) {
  const pf_field* f = NULL;
  if (field_by_name(__func__, obj, name, &f) != 0) return -1;
  return field_write(__func__, obj, f, &value, type_code, 0);
}

/* ---- methods ---- */

int PFObjectGetMethod(PFObjectHandle obj, const char* name, PFFunctionHandle* out) {
  if (!pf_is_instance(obj)) return not_instance(__func__, obj);
  PF_CHECK_ARG(name);
  PF_CHECK_ARG(out);
  const pf_type* t = ((const pf_instance*)obj)->type;
  const pf_method* m = pf_type_find_method(t, name);
  if (m == NULL)
    return PF_ERROR(kPFErrAttributeError, "%s: '%s' object has no method '%.300s'", __func__,
                    t->info.key, name);
  /* An instance exists, so its type and their ancestors are ready. */
  PFFunctionHandle f = pf_method_function(m);
  if (m->info.flags & kPFMethodStatic) {
    pf_object_retain(f);
    *out = f;
    return 0;
  }
  int pos = 0, code = kPFObjectHandle;
  PFValue self = {.v_handle = obj};
  return PFFuncBind(f, 1, &pos, &self, &code, NULL, out);
}

/* ---- the constructor ---- */

/* A factory's result: an instance of the type, handed to the caller. */
static int construct_by_factory(const pf_type* t, PFFunctionHandle init, PFValue* args, int* codes,
                                int n, PFRetValueHandle ret) {
  PFValue rv;
  int rc;
  if (PFFuncCall(init, args, codes, n, &rv, &rc) != 0) return -1;
  if (rc != kPFObjectHandle || !pf_object_is_a(rv.v_handle, t)) {
    const char* got = rc == kPFObjectHandle || rc == kPFFuncHandle || rc == kPFModuleHandle
                          ? PFObjectTypeName(((const pf_object*)rv.v_handle)->type_index)
                          : PFTypeCodeName(rc);
    PF_ERROR(kPFErrTypeError, "%s(): its factory __init__ returned %s%s, not an instance of %s",
             t->info.key, got ? got : "an unknown value", pf_code_is_handle(rc) ? " object" : "",
             t->info.key);
    if (pf_code_is_handle(rc)) pf_object_release_keeping_error(rv.v_handle);
    return -1;
  }
  int st = PFCFuncSetReturn(ret, &rv, &rc, 1);
  pf_object_release_keeping_error(rv.v_handle);
  return st;
}

/* A zeroed instance, given to __init__ first; then the caller's. */
static int construct_by_init(const pf_type* t, PFFunctionHandle init, PFValue* args, int* codes,
                             int n, PFRetValueHandle ret) {
  PFValue small_args[PF_TYPED_MAX_ARGS + 1];
  int small_codes[PF_TYPED_MAX_ARGS + 1];
  PFValue* a = small_args;
  int* c = small_codes;
  if (n > PF_TYPED_MAX_ARGS) {
    a = pf_malloc(sizeof(PFValue) * ((size_t)n + 1));
    c = pf_malloc(sizeof(int) * ((size_t)n + 1));
    if (a == NULL || c == NULL) {
      pf_free(a);
      pf_free(c);
      return pf_oom(t->info.key);
    }
  }
  pf_instance* in = instance_new(t->info.key, t);
  int st = in == NULL ? -1 : 0;
  if (st == 0) {
    a[0].v_handle = in;
    c[0] = kPFObjectHandle;
    if (n > 0) {
      memcpy(a + 1, args, sizeof(PFValue) * (size_t)n);
      memcpy(c + 1, codes, sizeof(int) * (size_t)n);
    }
    PFValue rv;
    int rc;
    st = PFFuncCall(init, a, c, n + 1, &rv, &rc);
    if (st == 0 && pf_code_is_handle(rc)) pf_object_release(rv.v_handle); /* ignored */
    if (st == 0) {
      PFValue v = {.v_handle = in};
      int code = kPFObjectHandle;
      st = PFCFuncSetReturn(ret, &v, &code, 1);
    }
    pf_object_release_keeping_error(in); /* the caller's, or gone on failure */
  }
  if (a != small_args) {
    pf_free(a);
    pf_free(c);
  }
  return st;
}

int pf_self_error(const char* who, const char* what, const pf_type* t, int code, const PFValue* v) {
  pf_conv c = code != kPFObjectHandle        ? pf_conv_type
              : pf_is_object(v->v_handle, 0) ? pf_conv_object
                                             : pf_conv_dead;
  return pf_conv_error(c, who, what, pf_t_obj, t, code, v);
}

__attribute__((cold, noinline)) static int method_self_error(const pf_method* m, PFValue* args,
                                                             int* codes, int n) {
  char who[PF_OBJECT_TYPE_KEY_MAX * 2 + 16];
  snprintf(who, sizeof(who), "method '%s.%s'", m->owner->info.key, m->info.name);
  if (n < 1)
    return PFErrorSetFormat(kPFErrTypeError, "%s: takes the object (%s) first, got no arguments",
                            who, m->owner->sig_name);
  return pf_self_error(who, "argument 0 (the object)", m->owner, codes[0], args);
}

int pf_method_call(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  const pf_method* m = res;
  if (__builtin_expect(n < 1 || codes[0] != kPFObjectHandle || !pf_obj_arg_ok(args, m->owner), 0))
    return method_self_error(m, args, codes, n);
  return m->packed(args, codes, n, ret, NULL);
}

int pf_type_construct(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  const pf_type* t = res;
  const pf_method* init = (const pf_method*)t->info.init;
  if (init == NULL) {
    if (n != 0)
      return PF_ERROR(kPFErrTypeError,
                      "%s(): takes no arguments (the type has no __init__), "
                      "got %d",
                      t->info.key, n);
    pf_instance* in = instance_new(t->info.key, t);
    if (in == NULL) return -1;
    PFValue v = {.v_handle = in};
    int code = kPFObjectHandle;
    int st = PFCFuncSetReturn(ret, &v, &code, 1);
    pf_object_release_keeping_error(in);
    return st;
  }
  PFFunctionHandle f = pf_method_function(init);
  if (init->info.flags & kPFMethodStatic) return construct_by_factory(t, f, args, codes, n, ret);
  return construct_by_init(t, f, args, codes, n, ret);
}
