/* Signatures: the table of signature types, the grammar (names, defaults,
 * tensor constraints), a signature's libffi description. */
#include <errno.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "signature.h"

_Static_assert(sizeof(bool) == 1, "bool travels through libffi as uint8");
_Static_assert(sizeof(DLDeviceType) == 4, "DLDevice travels through libffi as two 32-bit ints");

/* ---- the table, from the list in typed.h ---- */

/* The struct types carry their size and alignment already, so ffi_prep_cif
 * never writes to them and concurrent creations do not race. */
static ffi_type* k_dtype_elems[] = {&ffi_type_uint8, &ffi_type_uint8, &ffi_type_uint16, NULL};
static ffi_type pf_ffi_dtype = {sizeof(DLDataType), _Alignof(DLDataType), FFI_TYPE_STRUCT,
                                k_dtype_elems};
static ffi_type* k_device_elems[] = {&ffi_type_uint32, &ffi_type_sint32, NULL};
static ffi_type pf_ffi_device = {sizeof(DLDevice), _Alignof(DLDevice), FFI_TYPE_STRUCT,
                                 k_device_elems};
#if SIZE_MAX == UINT64_MAX
#define PF_FFI_SIZE_T ffi_type_uint64
#else
#define PF_FFI_SIZE_T ffi_type_uint32
#endif
/* A bytes result is a PFByteArray by value (an argument is a pointer). */
static ffi_type* k_bytes_elems[] = {&ffi_type_pointer, &PF_FFI_SIZE_T, NULL};
static ffi_type k_ffi_bytes = {sizeof(PFByteArray), _Alignof(PFByteArray), FFI_TYPE_STRUCT,
                               k_bytes_elems};

#define INT_ROW_(id, name, ctype, member, ffi, rcode, lo, hi) \
  [pf_t_##id] = {name, &ffi, rcode, lo, hi, 0},
#define FLOAT_ROW_(id, name, ctype, member, ffi, max) \
  [pf_t_##id] = {name, &ffi, kPFFloat, 0, 0, max},
#define OTHER_ROW_(id, name, member, ffi, rcode) [pf_t_##id] = {name, &ffi, rcode, 0, 0, 0},
const pf_ctype_info pf_ctypes[pf_t_all] = {
    [pf_t_void] = {"void", &ffi_type_void, kPFNull, 0, 0, 0},
    PF_SIG_INT_TYPES(INT_ROW_) PF_SIG_FLOAT_TYPES(FLOAT_ROW_) PF_SIG_OTHER_TYPES(
        OTHER_ROW_)[pf_t_obj] = {"obj", &ffi_type_pointer, kPFObjectHandle, 0, 0, 0},
    [pf_t_optional] = {"optional", &ffi_type_pointer, kPFNull, 0, 0, 0},
    [pf_t_union] = {"union", &ffi_type_pointer, kPFNull, 0, 0, 0}};
#undef INT_ROW_
#undef FLOAT_ROW_
#undef OTHER_ROW_

/* signature.h's public list of C types names the runtime's types, in the
 * runtime's order, from int8 to the last type before any. */
enum {
  pf_public_void,
#define PUBLIC_ENUM_(id, arg, result) pf_public_##id,
  PF_SIGNATURE_C_TYPES(PUBLIC_ENUM_)
#undef PUBLIC_ENUM_
      pf_public_end
};
#define PUBLIC_CHECK_(id, arg, result)                  \
  _Static_assert((int)pf_public_##id == (int)pf_t_##id, \
                 "PF_SIGNATURE_C_TYPES: " #id " is out of order");
PF_SIGNATURE_C_TYPES(PUBLIC_CHECK_)
#undef PUBLIC_CHECK_
_Static_assert((int)pf_public_end == (int)pf_t_any && pf_t_any + 1 == pf_t_count,
               "PF_SIGNATURE_C_TYPES: every type but any has a row");

/* The library's own list, as checked registrations record it. */
static const char k_c_type_rows[] = PF_SIGNATURE_C_TYPES_TEXT;

/* The ARG/RESULT part of type `name`'s row in the rows `list` (*len bytes),
 * or NULL when no row names it. */
static const char* c_types_in(const char* list, const char* name, int* len) {
  size_t n = strlen(name);
  for (const char* row = list; row != NULL && *row != '\0';) {
    const char* end = strchr(row, ';');
    if (strncmp(row, name, n) == 0 && row[n] == '=') {
      *len = (int)((end ? end : row + strlen(row)) - (row + n + 1));
      return row + n + 1;
    }
    row = end ? end + 1 : NULL;
  }
  return NULL;
}

int pf_sig_check_c_types(const char* who, const char* text, const char* recorded) {
  pf_sig sig;
  if (pf_sig_parse(who, text, &sig) != 0) return -1;
  for (int i = -1; i < sig.num_args; ++i) {
    int t = i < 0 ? sig.ret : sig.args[i];
    if (t <= pf_t_void || t >= pf_t_any) continue; /* obj<KEY> and any: no row */
    int ours_len = 0, theirs_len = 0;
    const char* ours = c_types_in(k_c_type_rows, pf_ctypes[t].name, &ours_len);
    const char* theirs = c_types_in(recorded, pf_ctypes[t].name, &theirs_len);
    if (theirs != NULL && theirs_len == ours_len && memcmp(theirs, ours, (size_t)ours_len) == 0)
      continue;
    if (theirs == NULL) theirs = "(none)", theirs_len = 6;
    return PF_ERROR(kPFErrValueError,
                    "%s was checked against a header whose %s is `%.*s`, this library's is "
                    "`%.*s`: rebuild the plugin against this packedfunc",
                    who, pf_ctypes[t].name, theirs_len, theirs, ours_len, ours);
  }
  return 0;
}

const char* pf_ctype_name(int t, const struct pf_type* obj) {
  if (t == pf_t_obj && obj != NULL) return obj->sig_name;
  return (t >= 0 && t < pf_t_all) ? pf_ctypes[t].name : "?";
}

int PFSignatureTypeInfo(int index, const char** name, int* type_code) {
  if (index < 0 || index >= pf_t_count)
    return PF_ERROR(kPFErrIndexError,
                    "PFSignatureTypeInfo: argument 'index' is %d; the signature types "
                    "are numbered 0 to %d",
                    index, pf_t_count - 1);
  if (name) *name = pf_ctypes[index].name;
  if (type_code) *type_code = pf_ctypes[index].result_code;
  return 0;
}

int pf_sig_prep_cif(const char* where, const pf_sig* sig, ffi_cif* cif, ffi_type** atypes) {
  for (int i = 0; i < sig->num_args; ++i) atypes[i] = pf_ctypes[sig->args[i]].ffi;
  ffi_type* rtype = sig->ret == pf_t_bytes ? &k_ffi_bytes : pf_ctypes[sig->ret].ffi;
  ffi_status st = ffi_prep_cif(cif, FFI_DEFAULT_ABI, sig->num_args, rtype, atypes);
  if (st != FFI_OK)
    return PF_ERROR(kPFErrRuntimeError, "%s: libffi could not prepare the call (status %d)", where,
                    (int)st);
  return 0;
}

/* ---- the signature grammar ---- */

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int hex_value(char c) {
  return c >= '0' && c <= '9'   ? c - '0'
         : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                : -1;
}
static size_t skip_blanks(const char* text, size_t i) {
  while (is_blank(text[i])) ++i;
  return i;
}

/* What a text is, for messages: "signature" or "type". */
static _Thread_local const char* t_what = "signature";

static int sig_error(const char* where, const char* text, size_t pos, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int sig_error(const char* where, const char* text, size_t pos, const char* fmt, ...) {
  char detail[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof(detail), fmt, ap);
  va_end(ap);
  return PF_ERROR(kPFErrValueError, "%s: bad %s \"%.200s\" at position %zu: %s", where, t_what,
                  text, pos, detail);
}

static int is_key_char(char c) { return is_name_char(c) || c == '.'; }

/* ---- devices (the DEVICE of tensor.h; DLPack's device types) ---- */

static const struct {
  const char* name;
  uint8_t type;
} k_devices[] = {
    {"cpu", 1},           {"cuda", 2},    {"cuda_host", 3}, {"opencl", 4},     {"vulkan", 7},
    {"metal", 8},         {"vpi", 9},     {"rocm", 10},     {"rocm_host", 11}, {"ext_dev", 12},
    {"cuda_managed", 13}, {"oneapi", 14}, {"webgpu", 15},   {"hexagon", 16},
};

const char* pf_device_name(int device_type) {
  for (size_t k = 0; k < sizeof(k_devices) / sizeof(k_devices[0]); ++k)
    if (k_devices[k].type == device_type) return k_devices[k].name;
  return NULL;
}

/* The device type named by s[0 .. n), or 0. */
static int device_by_name(const char* s, size_t n) {
  for (size_t k = 0; k < sizeof(k_devices) / sizeof(k_devices[0]); ++k)
    if (strlen(k_devices[k].name) == n && memcmp(k_devices[k].name, s, n) == 0)
      return k_devices[k].type;
  return 0;
}

/* ---- tensor constraints ---- */

/* Reads "<DTYPE, RANK, LAYOUT, DEVICE>" (tensor.h) when it follows
 * text[*pos] (blanks allowed before it), advancing *pos past the '>';
 * without one, leaves *pos and a constraint of any tensor. */
static int read_tensor_constraint(const char* where, const char* text, size_t* pos, pf_tc* tc) {
  size_t i = skip_blanks(text, *pos);
  memset(tc, 0, sizeof(*tc));
  if (text[i] != '<') return 0;
  ++i;
  for (int part = 0;; ++part) {
    i = skip_blanks(text, i);
    size_t start = i, n = 0;
    if (text[i] == '*') {
      ++i;
    } else if (part == 0) {
      while (is_name_char(text[i + n]) || text[i + n] == '[' || text[i + n] == ']') ++n;
      char buf[48];
      DLDataType dt;
      if (n == 0) return sig_error(where, text, start, "expected a data type or '*'");
      if (n >= sizeof(buf))
        return sig_error(where, text, start, "unknown data type '%.40s...'", text + start);
      memcpy(buf, text + start, n);
      buf[n] = '\0';
      if (PFDataTypeFromString(buf, &dt) != 0)
        return sig_error(where, text, start, "unknown data type '%s'", buf);
      tc->dtype = dt;
      tc->flags |= kPFTensorCheckDtype;
      i += n;
    } else if (part == 1) {
      int64_t rank = 0;
      while (is_digit(text[i + n])) {
        if (rank <= PF_TENSOR_MAX_NDIM) rank = rank * 10 + (text[i + n] - '0');
        ++n;
      }
      if (n == 0) return sig_error(where, text, start, "expected a rank or '*'");
      if (rank > PF_TENSOR_MAX_NDIM)
        return sig_error(where, text, start, "rank %.*s is above PF_TENSOR_MAX_NDIM (%d)",
                         (int)(n > 20 ? 20 : n), text + start, PF_TENSOR_MAX_NDIM);
      tc->ndim = (int8_t)rank;
      tc->flags |= kPFTensorCheckNdim;
      i += n;
    } else {
      while (is_name_char(text[i + n])) ++n;
      if (part == 2) {
        if (n != 10 || memcmp(text + start, "contiguous", 10) != 0)
          return sig_error(where, text, start, "expected a layout: 'contiguous' or '*'");
        tc->flags |= kPFTensorContiguous;
      } else {
        int dev = device_by_name(text + start, n);
        if (dev == 0)
          return sig_error(where, text, start, "%s '%.*s'",
                           n ? "unknown device type" : "expected a device type or '*'",
                           (int)(n > 40 ? 40 : n), text + start);
        tc->device = (uint8_t)dev;
        tc->flags |= kPFTensorCheckDevice;
      }
      i += n;
    }
    i = skip_blanks(text, i);
    if (text[i] == '>') {
      *pos = i + 1;
      return 0;
    }
    if (text[i] == ',' && part < 3) {
      ++i;
      continue;
    }
    return sig_error(
        where, text, i, "%s",
        part < 3 ? "expected ',' or '>' in the tensor type" : "expected '>' after the device type");
  }
}

void pf_tc_format(const pf_tc* tc, char* buf, size_t n) {
  char parts[4][PF_DTYPE_STRING_MAX];
  int last = -1;
  for (int k = 0; k < 4; ++k) snprintf(parts[k], sizeof(parts[k]), "*");
  if (tc->flags & kPFTensorCheckDtype) {
    if (PFDataTypeToString(tc->dtype, parts[0], sizeof(parts[0])) != 0)
      snprintf(parts[0], sizeof(parts[0]), "?");
    last = 0;
  }
  if (tc->flags & kPFTensorCheckNdim) {
    snprintf(parts[1], sizeof(parts[1]), "%d", (int)tc->ndim);
    last = 1;
  }
  if (tc->flags & kPFTensorContiguous) {
    snprintf(parts[2], sizeof(parts[2]), "contiguous");
    last = 2;
  }
  if (tc->flags & kPFTensorCheckDevice) {
    const char* d = pf_device_name(tc->device);
    snprintf(parts[3], sizeof(parts[3]), "%s", d ? d : "?");
    last = 3;
  }
  if (last < 0) {
    snprintf(buf, n, "tensor");
    return;
  }
  size_t at = (size_t)snprintf(buf, n, "tensor<");
  for (int k = 0; k <= last && at < n; ++k)
    at += (size_t)snprintf(buf + at, n - at, "%s%s", k ? "," : "", parts[k]);
  if (at < n) snprintf(buf + at, n - at, ">");
}

PFTensorConstraint pf_tc_public(const pf_tc* tc) {
  PFTensorConstraint c;
  memset(&c, 0, sizeof(c));
  c.flags = tc->flags;
  if (tc->flags & kPFTensorCheckNdim) c.ndim = tc->ndim;
  if (tc->flags & kPFTensorCheckDtype) c.dtype = tc->dtype;
  if (tc->flags & kPFTensorCheckDevice) c.device_type = tc->device;
  return c;
}

/* ---- types ---- */

/* Reads "<KEY>" after "obj" at text[*pos] (blanks allowed around each
 * token) and resolves KEY; advances *pos past the '>'. */
static int read_obj_key(const char* where, const char* text, size_t* pos,
                        const struct pf_type** obj) {
  size_t i = skip_blanks(text, *pos);
  if (text[i] != '<')
    return sig_error(where, text, i, "'obj' names a registered object type: write obj<KEY>");
  i = skip_blanks(text, i + 1);
  size_t start = i, n = 0;
  while (is_key_char(text[start + n])) ++n;
  if (n == 0) return sig_error(where, text, start, "expected an object type key after 'obj<'");
  const struct pf_type* t = pf_type_resolve(text + start, n);
  if (t == NULL)
    return sig_error(where, text, start, "unknown object type '%.*s' (not registered)",
                     (int)(n > 100 ? 100 : n), text + start);
  i = skip_blanks(text, start + n);
  if (text[i] != '>') return sig_error(where, text, i, "expected '>' after the object type key");
  *obj = t;
  *pos = i + 1;
  return 0;
}

/* The types whose values are one pointer, NULL for null: what optional
 * and union pass as. */
static int is_pointer_type(int t) {
  return pf_ctype_is_ref(t) || t == pf_t_str || t == pf_t_bytes || t == pf_t_ptr ||
         t == pf_t_tensor;
}
static int is_object_type(int t) { return pf_ctype_is_ref(t) && t != pf_t_func; }

/* The carrier of an optional or union node whose element types are read:
 * their one C type when they share it, object when they are all objects,
 * else any (see pf_tnode). */
static void set_carrier(const pf_tnode* nodes, pf_tnode* n) {
  const pf_tnode* k = &nodes[n->first];
  int same = 1, objects = 1;
  for (const pf_tnode* m = k;; m = &nodes[m->next]) {
    same = same && m->carrier == k->carrier && m->obj == k->obj &&
           memcmp(&m->tc, &k->tc, sizeof(pf_tc)) == 0;
    objects = objects && is_object_type(m->carrier);
    if (m->next < 0) break;
  }
  n->carrier = same && is_pointer_type(k->carrier) ? k->carrier : objects ? pf_t_object : pf_t_any;
  n->obj = n->carrier == pf_t_obj ? k->obj : NULL;
  if (n->carrier == pf_t_tensor) n->tc = k->tc;
}

static int read_tnode(const char* where, const char* text, size_t* pos, pf_parsed_sig* ps,
                      int depth, pf_tnode* out);

/* Reads the "<T, ...>" of the type `t` (array, list, map, dict, optional
 * or union) at text[*pos] into n's element types. */
static int read_elements(const char* where, const char* text, size_t* pos, pf_parsed_sig* ps,
                         int depth, pf_tnode* n) {
  size_t at = skip_blanks(text, *pos);
  const char* name = pf_ctypes[n->t].name;
  if (ps == NULL)
    return sig_error(where, text, at, "'%s<...>' is not allowed here: write %s", name,
                     n->t == pf_t_optional || n->t == pf_t_union ? "one type" : name);
  if (depth >= PF_SIGNATURE_DEPTH_MAX)
    return sig_error(where, text, at, "element types nest deeper than %d levels",
                     PF_SIGNATURE_DEPTH_MAX);
  size_t i = skip_blanks(text, at + 1);
  int prev = -1;
  for (;;) {
    pf_tnode k;
    size_t kat = i;
    if (read_tnode(where, text, &i, ps, depth + 1, &k) != 0) return -1;
    if (k.t == pf_t_void) return sig_error(where, text, kat, "void is not an element type");
    int key = (n->t == pf_t_map || n->t == pf_t_dict) && n->nkids == 0;
    if (key && k.t != pf_t_str && k.t != pf_t_int64 && k.t != pf_t_any)
      return sig_error(where, text, kat, "a %s's keys are str, int64 or any", name);
    if (ps->nnodes >= PF_SIGNATURE_TYPES_MAX)
      return sig_error(where, text, kat, "more than %d element types in one signature",
                       PF_SIGNATURE_TYPES_MAX);
    int idx = ps->nnodes++;
    ps->nodes[idx] = k;
    if (prev < 0) n->first = (int8_t)idx;
    else ps->nodes[prev].next = (int8_t)idx;
    prev = idx;
    n->nkids++;
    i = skip_blanks(text, i);
    if (text[i] == ',') {
      i = skip_blanks(text, i + 1);
      continue;
    }
    if (text[i] == '>') break;
    return sig_error(where, text, i, "%s",
                     text[i] ? "expected ',' or '>' after an element type"
                             : "expected ',' or '>', found the end");
  }
  int want = n->t == pf_t_map || n->t == pf_t_dict ? 2 : n->t == pf_t_union ? 0 : 1;
  if (want ? n->nkids != want : n->nkids < 2)
    return sig_error(where, text, at, "%s takes %s, got %d", name,
                     want == 2   ? "two types (<KEY, VALUE>)"
                     : want == 1 ? "one type"
                                 : "at least two types",
                     n->nkids);
  *pos = i + 1;
  if (n->t == pf_t_optional || n->t == pf_t_union) set_carrier(ps->nodes, n);
  return 0;
}

/* Reads one type at text[*pos] into *out (element types into ps, which
 * may be NULL where they are not allowed); advances *pos past it. */
static int read_tnode(const char* where, const char* text, size_t* pos, pf_parsed_sig* ps,
                      int depth, pf_tnode* out) {
  size_t start = *pos, n = 0;
  memset(out, 0, sizeof(*out));
  out->first = out->next = -1;
  while (is_name_char(text[start + n])) ++n;
  if (n == 0)
    return sig_error(where, text, start, "%s",
                     text[start] ? "expected a type name" : "expected a type name, found the end");
  *pos = start + n;
  if (n == 3 && memcmp(text + start, "obj", 3) == 0) {
    out->t = out->carrier = pf_t_obj;
    return read_obj_key(where, text, pos, &out->obj);
  }
  for (int t = 0; t < pf_t_all; ++t) {
    if (t == pf_t_obj || strlen(pf_ctypes[t].name) != n ||
        memcmp(pf_ctypes[t].name, text + start, n) != 0)
      continue;
    out->t = out->carrier = (uint8_t)t;
    if (t == pf_t_tensor) return read_tensor_constraint(where, text, pos, &out->tc);
    int container = t == pf_t_array || t == pf_t_list || t == pf_t_map || t == pf_t_dict;
    int wrapper = t == pf_t_optional || t == pf_t_union;
    if (wrapper && text[skip_blanks(text, *pos)] != '<')
      return sig_error(where, text, start, "'%s' takes types: write %s<...>", pf_ctypes[t].name,
                       pf_ctypes[t].name);
    if ((container || wrapper) && text[skip_blanks(text, *pos)] == '<')
      return read_elements(where, text, pos, ps, depth, out);
    return 0;
  }
  if (n == 6 && memcmp(text + start, "double", 6) == 0) { /* the one alias */
    out->t = out->carrier = pf_t_float64;
    return 0;
  }
  if (n == 5 && memcmp(text + start, "float", 5) == 0)
    return sig_error(where, text, start, "'float' is ambiguous; write float32 or float64");
  return sig_error(where, text, start, "unknown type '%.*s'", (int)(n > 40 ? 40 : n), text + start);
}

/* Reads one type at text[*pos] for a position: its C type (the carrier),
 * obj<KEY>'s type, a tensor's constraint, and *et, the root of its type
 * tree in ps (-1 for a type without one; ps NULL: none allowed). */
static int read_type(const char* where, const char* text, size_t* pos, pf_parsed_sig* ps, int* out,
                     const struct pf_type** obj, pf_tc* tc, int* et) {
  pf_tnode n;
  *et = -1;
  if (read_tnode(where, text, pos, ps, 0, &n) != 0) return -1;
  *out = n.carrier;
  *obj = n.obj;
  *tc = n.tc;
  if (n.nkids == 0) return 0;
  if (ps->nnodes >= PF_SIGNATURE_TYPES_MAX)
    return sig_error(where, text, *pos, "more than %d element types in one signature",
                     PF_SIGNATURE_TYPES_MAX);
  *et = ps->nnodes;
  ps->nodes[ps->nnodes++] = n;
  return 0;
}

/* ---- default literals ---- */

/* The next decoded byte of the STRING contents s[*i ..]; advances *i. The
 * escapes were checked when the literal was read. */
unsigned char pf_sig_next_byte(const char* s, size_t* i) {
  char c = s[(*i)++];
  if (c != '\\') return (unsigned char)c;
  char e = s[(*i)++];
  switch (e) {
    case 'n':
      return '\n';
    case 't':
      return '\t';
    case 'r':
      return '\r';
    case 'x': {
      int v = hex_value(s[*i]) * 16 + hex_value(s[*i + 1]);
      *i += 2;
      return (unsigned char)v;
    }
    default:
      return (unsigned char)e; /* '"' or '\\' */
  }
}

/* Decodes a STRING's contents s[0 .. len) into out (dec_len bytes). */
void pf_sig_decode_string(const char* s, size_t len, char* out) {
  size_t i = 0, k = 0;
  while (i < len) out[k++] = (char)pf_sig_next_byte(s, &i);
}

/* 0 when the decoded STRING s[0 .. len) is UTF-8 without NUL bytes; else
 * the offending decoded byte's index + 1. */
static size_t str_check(const char* s, size_t len) {
  size_t i = 0, k = 0;
  int need = 0;
  unsigned char lo = 0x80, hi = 0xbf;
  while (i < len) {
    unsigned char c = pf_sig_next_byte(s, &i);
    ++k;
    if (need > 0) {
      if (c < lo || c > hi) return k;
      lo = 0x80, hi = 0xbf;
      --need;
      continue;
    }
    if (c == 0) return k;
    if (c < 0x80) continue;
    if (c >= 0xc2 && c <= 0xdf) need = 1;
    else if (c == 0xe0) need = 2, lo = 0xa0;
    else if ((c >= 0xe1 && c <= 0xec) || c == 0xee || c == 0xef) need = 2;
    else if (c == 0xed) need = 2, hi = 0x9f;
    else if (c == 0xf0) need = 3, lo = 0x90;
    else if (c >= 0xf1 && c <= 0xf3) need = 3;
    else if (c == 0xf4) need = 3, hi = 0x8f;
    else return k;
  }
  return need ? k + 1 : 0;
}

/* The C locale, for reading and writing floats whatever the process's
 * LC_NUMERIC is; (locale_t)0 if it cannot be had (the current one then). */
static locale_t g_c_locale;
static pthread_once_t g_c_locale_once = PTHREAD_ONCE_INIT;
static void make_c_locale(void) { g_c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0); }
locale_t pf_c_locale_enter(void) {
  pthread_once(&g_c_locale_once, make_c_locale);
  return g_c_locale != (locale_t)0 ? uselocale(g_c_locale) : (locale_t)0;
}
void pf_c_locale_leave(locale_t old) {
  if (old != (locale_t)0) uselocale(old);
}

/* Reads a STRING, or b STRING (blanks may come between them), at text[*pos]. */
static int read_string(const char* where, const char* text, size_t* pos, pf_parsed_param* p) {
  size_t i = *pos;
  p->lit = text[i] == 'b' ? pf_lit_bytes : pf_lit_str;
  if (p->lit == pf_lit_bytes) i = skip_blanks(text, i + 1);
  size_t start = ++i, dec = 0;
  for (;; ++dec) {
    unsigned char c = (unsigned char)text[i];
    if (c == '"') break;
    if (c == '\0') return sig_error(where, text, i, "the string literal has no closing '\"'");
    if (c == '\\') {
      char e = text[i + 1];
      if (e == '"' || e == '\\' || e == 'n' || e == 't' || e == 'r') i += 2;
      else if (e == 'x' && hex_value(text[i + 2]) >= 0 && hex_value(text[i + 3]) >= 0) i += 4;
      else
        return sig_error(where, text, i,
                         "unknown escape in a string literal (write \\\" \\\\ \\n \\t \\r or "
                         "\\xHH)");
    } else if (c < 0x20 || c > 0x7e) {
      return sig_error(where, text, i, "byte 0x%02x in a string literal: write it as \\x%02x", c,
                       c);
    } else {
      ++i;
    }
  }
  p->str_at = start;
  p->str_len = i - start;
  p->dec_len = dec;
  *pos = i + 1;
  return 0;
}

/* Sets p to the integer literal text[start, end), of magnitude v (over:
 * it overflowed a uint64), negative when neg; refuses one that does not
 * fit an int64. On success *pos = end. */
static int int_literal(const char* where, const char* text, size_t start, size_t end, uint64_t v,
                       int over, int neg, pf_parsed_param* p, size_t* pos) {
  if (over || v > (uint64_t)INT64_MAX + (uint64_t)neg)
    return sig_error(where, text, start, "the integer %.*s does not fit an int64",
                     (int)(end - start > 40 ? 40 : end - start), text + start);
  p->lit = pf_lit_int;
  p->dval.v_int64 = neg ? (int64_t)(0 - v) : (int64_t)v;
  *pos = end;
  return 0;
}

/* Reads a number at text[*pos] into p (pf_lit_int with dval.v_int64, or
 * pf_lit_float with dval.v_float64). */
static int read_number(const char* where, const char* text, size_t* pos, pf_parsed_param* p) {
  size_t start = *pos, i = start;
  int neg = text[i] == '-';
  if (text[i] == '+' || text[i] == '-') ++i;
  size_t body = i, n = 0;
  while (is_name_char(text[i + n])) ++n;
  if ((n == 3 && memcmp(text + i, "inf", 3) == 0) || (n == 3 && memcmp(text + i, "nan", 3) == 0)) {
    p->lit = pf_lit_float;
    p->dval.v_float64 = text[i] == 'n' ? NAN : neg ? -INFINITY : INFINITY;
    *pos = i + 3;
    return 0;
  }
  if (text[i] == '0' && text[i + 1] == 'x') {
    uint64_t v = 0;
    int over = 0;
    i += 2;
    size_t digits = i;
    while (hex_value(text[i]) >= 0) {
      if (v > (UINT64_MAX >> 4)) over = 1;
      v = v * 16 + (uint64_t)hex_value(text[i++]);
    }
    if (i == digits || is_name_char(text[i]) || text[i] == '.')
      return sig_error(where, text, start, "malformed number");
    return int_literal(where, text, start, i, v, over, neg, p, pos);
  }
  int is_float = 0;
  size_t mant = 0;
  while (is_digit(text[i])) ++i, ++mant;
  if (text[i] == '.') {
    is_float = 1;
    ++i;
    while (is_digit(text[i])) ++i, ++mant;
  }
  if (mant == 0) return sig_error(where, text, start, "expected a default value");
  if (text[i] == 'e' || text[i] == 'E') {
    size_t e = i + 1;
    if (text[e] == '+' || text[e] == '-') ++e;
    if (!is_digit(text[e])) return sig_error(where, text, start, "malformed number");
    while (is_digit(text[e])) ++e;
    i = e;
    is_float = 1;
  }
  if (is_name_char(text[i]) || text[i] == '.')
    return sig_error(where, text, start, "malformed number");
  (void)body;
  if (!is_float) {
    uint64_t v = 0;
    int over = 0;
    for (size_t k = body; k < i; ++k) {
      uint64_t d = (uint64_t)(text[k] - '0');
      if (v > (UINT64_MAX - d) / 10) over = 1;
      v = v * 10 + d;
    }
    return int_literal(where, text, start, i, v, over, neg, p, pos);
  }
  char buf[128];
  if (i - start >= sizeof(buf))
    return sig_error(where, text, start, "the number has more than %zu characters",
                     sizeof(buf) - 1);
  memcpy(buf, text + start, i - start);
  buf[i - start] = '\0';
  locale_t old = pf_c_locale_enter();
  errno = 0;
  double d = strtod(buf, NULL);
  int range = errno == ERANGE && isinf(d);
  pf_c_locale_leave(old);
  if (range) return sig_error(where, text, start, "the float %s is beyond any double", buf);
  p->lit = pf_lit_float;
  p->dval.v_float64 = d;
  *pos = i;
  return 0;
}

/* Checks the converted default of p against its type tree, converting it
 * as an argument would be (optional<float64> = 1 keeps 1.0). A literal is
 * no container, so nothing is made. */
static int check_default_tree(const pf_parsed_sig* ps, pf_parsed_param* p) {
  static const char k_probe[1] = "";
  PFValue v = p->dval, out;
  int code;
  PFObjectHandle made = NULL;
  /* A str or bytes default is laid out later: check a stand-in. */
  if (p->dcode == kPFStr) v.v_str = k_probe;
  if (pf_tree_convert(ps->nodes, p->et, NULL, NULL, p->dcode, &v, &out, &code, &made) != 0)
    return -1;
  if (p->dcode != kPFStr && p->dcode != kPFBytes) {
    p->dval = out;
    p->dcode = code;
  }
  return 0;
}

/* Reads the literal at text[*pos] (after "=") and converts it to the
 * parameter's type, which p holds (its tree in ps). */
static int read_default(const char* where, const char* text, size_t* pos, const pf_parsed_sig* ps,
                        pf_parsed_param* p) {
  size_t at = *pos, n = 0;
  int rc;
  p->default_at = at;
  p->has_default = 1;
  while (is_name_char(text[at + n])) ++n;
  if (text[at] == '"' || (text[at] == 'b' && text[skip_blanks(text, at + 1)] == '"')) {
    rc = read_string(where, text, pos, p);
  } else if ((n == 4 && memcmp(text + at, "true", 4) == 0) ||
             (n == 5 && memcmp(text + at, "false", 5) == 0) ||
             (n == 4 && memcmp(text + at, "null", 4) == 0)) {
    p->lit = text[at] == 't' ? pf_lit_true : text[at] == 'f' ? pf_lit_false : pf_lit_null;
    *pos = at + n;
    rc = 0;
  } else if (is_digit(text[at]) || text[at] == '.' || text[at] == '+' || text[at] == '-' ||
             (n == 3 && (memcmp(text + at, "inf", 3) == 0 || memcmp(text + at, "nan", 3) == 0))) {
    rc = read_number(where, text, pos, p);
  } else {
    rc = sig_error(where, text, at, "%s",
                   text[at] ? "expected a default value (a number, true, false, null or a "
                              "string)"
                            : "expected a default value, found the end");
  }
  if (rc != 0) return -1;
  p->default_end = *pos;
  int len = (int)(p->default_end - at > 60 ? 60 : p->default_end - at);
  const char* tname = pf_ctype_name(p->t, p->obj);
  /* The typed conversions take packed values; dtype and device, which no
   * literal is, take strings in their text forms. A type tree's C type
   * takes null (optional<str> = null), which the tree then judges. */
  if (p->t == pf_t_dtype || p->t == pf_t_device) {
    char buf[64];
    if (p->lit != pf_lit_str || p->dec_len >= sizeof(buf))
      return sig_error(where, text, at, "the default %.*s is not a %s (write its text as a string)",
                       len, text + at, tname);
    pf_sig_decode_string(text + p->str_at, p->str_len, buf);
    buf[p->dec_len] = '\0';
    if (p->t == pf_t_dtype) {
      if (PFDataTypeFromString(buf, &p->dval.v_type) != 0)
        return sig_error(where, text, at, "the default %.*s is not a data type", len, text + at);
      p->dcode = kPFDataType;
      return 0;
    }
    char* colon = strchr(buf, ':');
    size_t nlen = colon ? (size_t)(colon - buf) : strlen(buf);
    int dev = device_by_name(buf, nlen);
    int64_t id = 0;
    int ok = dev != 0;
    if (ok && colon) {
      const char* d = colon + 1;
      ok = is_digit(*d);
      for (; ok && *d; ++d) {
        ok = is_digit(*d) && id <= INT32_MAX;
        id = id * 10 + (*d - '0');
      }
      ok = ok && id <= INT32_MAX;
    }
    if (!ok)
      return sig_error(where, text, at,
                       "the default %.*s is not a device (\"NAME\" or \"NAME:ID\", NAME one of "
                       "cpu, cuda, ...)",
                       len, text + at);
    p->dval.v_device.device_type = (DLDeviceType)dev;
    p->dval.v_device.device_id = (int32_t)id;
    p->dcode = kPFDevice;
    return 0;
  }
  PFValue v;
  int code;
  static const char k_dummy[1] = "";
  static const PFByteArray k_dummy_bytes = {k_dummy, 0};
  v.v_int64 = 0;
  switch (p->lit) {
    case pf_lit_int:
      code = kPFInt;
      v = p->dval;
      break;
    case pf_lit_float:
      code = kPFFloat;
      v = p->dval;
      break;
    case pf_lit_true:
      code = kPFBool;
      v.v_int64 = 1;
      break;
    case pf_lit_false:
      code = kPFBool;
      break;
    case pf_lit_null:
      code = kPFNull;
      break;
    case pf_lit_str:
      code = kPFStr;
      v.v_str = k_dummy;
      break;
    default:
      code = kPFBytes;
      v.v_handle = (void*)(uintptr_t)&k_dummy_bytes;
      break;
  }
  pf_cvalue cv;
  if (p->t == pf_t_any) { /* any value: the literal's own */
    p->dcode = code;
    if (p->lit != pf_lit_str && p->lit != pf_lit_bytes) p->dval = v;
  } else if (pf_packed_to_c(p->t, p->obj, code, &v, &cv, p->et >= 0) != pf_conv_ok ||
             pf_c_to_packed(p->t, p->obj, &cv, &p->dval, &p->dcode) != 0)
    return sig_error(where, text, at, "the default %.*s does not convert to %s", len, text + at,
                     tname);
  if (p->et >= 0 && check_default_tree(ps, p) != 0) {
    char want[128];
    pf_tnode_format(ps->nodes, p->et, want, sizeof(want));
    return sig_error(where, text, at, "the default %.*s does not convert to %s", len, text + at,
                     want);
  }
  if (p->lit == pf_lit_str) {
    size_t bad = str_check(text + p->str_at, p->str_len);
    if (bad)
      return sig_error(where, text, at, "the default %.*s is not a str: %s", len, text + at,
                       bad <= p->dec_len ? "it holds a NUL byte or is not valid UTF-8"
                                         : "it ends in the middle of a UTF-8 sequence");
  }
  return 0;
}

/* ---- signatures ---- */

/* Reads one parameter at text[*pos] into ps->p[ps->n]. */
static int read_param(const char* where, const char* text, size_t* pos, pf_parsed_sig* ps) {
  size_t at = *pos, i = at, n = 0;
  pf_parsed_param* p = &ps->p[ps->n < PF_TYPED_MAX_ARGS ? ps->n : PF_TYPED_MAX_ARGS - 1];
  pf_parsed_param scratch;
  if (ps->n >= PF_TYPED_MAX_ARGS) p = &scratch; /* read it only to report it */
  memset(p, 0, sizeof(*p));
  while (is_name_char(text[i + n])) ++n;
  size_t after = skip_blanks(text, i + n);
  int named = n > 0 && text[after] == ':';
  if (ps->n > 0 && named != ps->named)
    return sig_error(where, text, at,
                     named ? "parameter %d is named but the ones before it are not: name every "
                             "parameter or none"
                           : "parameter %d has no name but the ones before it have: name every "
                             "parameter or none",
                     ps->n);
  ps->named = named;
  if (named) {
    if (is_digit(text[i]))
      return sig_error(where, text, i, "a parameter name starts with a letter or '_'");
    if (n > PF_SIGNATURE_NAME_MAX)
      return sig_error(where, text, i, "a parameter name is longer than %d bytes",
                       PF_SIGNATURE_NAME_MAX);
    for (int k = 0; k < ps->n && k < PF_TYPED_MAX_ARGS; ++k)
      if (ps->p[k].name_len == n && memcmp(text + ps->p[k].name_at, text + i, n) == 0)
        return sig_error(where, text, i, "the parameter name '%.*s' repeats parameter %d's",
                         (int)(n > 60 ? 60 : n), text + i, k);
    p->name_at = i;
    p->name_len = n;
    i = skip_blanks(text, after + 1);
  }
  p->type_at = i;
  if (read_type(where, text, &i, ps, &p->t, &p->obj, &p->tc, &p->et) != 0) return -1;
  if (p->t == pf_t_void)
    return sig_error(where, text, p->type_at,
                     "void is only allowed as the return type (write () for no arguments)");
  if (ps->n == PF_TYPED_MAX_ARGS)
    return sig_error(where, text, at, "more than %d arguments", PF_TYPED_MAX_ARGS);
  i = skip_blanks(text, i);
  if (text[i] == '=') {
    i = skip_blanks(text, i + 1);
    if (read_default(where, text, &i, ps, p) != 0) return -1;
  } else if (ps->n > 0 && ps->p[ps->n - 1].has_default) {
    return sig_error(where, text, at,
                     "parameter %d has no default but the one before it has: defaults are "
                     "trailing",
                     ps->n);
  }
  ps->n++;
  *pos = i;
  return 0;
}

int pf_sig_read(const char* where, const char* text, pf_parsed_sig* ps) {
  if (text == NULL) return pf_err_null_arg(where, "signature");
  size_t i = skip_blanks(text, 0);
  memset(&ps->ret, 0, sizeof(ps->ret));
  ps->n = 0;
  ps->named = 0;
  ps->nnodes = 0;
  ps->ret.type_at = i;
  if (read_type(where, text, &i, ps, &ps->ret.t, &ps->ret.obj, &ps->ret.tc, &ps->ret.et) != 0)
    return -1;
  i = skip_blanks(text, i);
  if (text[i] != '(')
    return sig_error(where, text, i, "%s",
                     text[i] ? "expected '(' after the return type"
                             : "expected '(' after the return type, found the end");
  i = skip_blanks(text, i + 1);
  if (text[i] == ')') {
    ++i;
  } else {
    for (;;) {
      if (read_param(where, text, &i, ps) != 0) return -1;
      i = skip_blanks(text, i);
      if (text[i] == ',') {
        i = skip_blanks(text, i + 1);
        continue;
      }
      if (text[i] == ')') {
        ++i;
        break;
      }
      return sig_error(where, text, i, "%s",
                       text[i] ? "expected ',' or ')'" : "expected ',' or ')', found the end");
    }
  }
  i = skip_blanks(text, i);
  if (text[i] != '\0') return sig_error(where, text, i, "unexpected text after ')'");
  return 0;
}

void pf_sig_of(const pf_parsed_sig* ps, pf_sig* out) {
  memset(out, 0, sizeof(*out));
  out->ret = (uint8_t)ps->ret.t;
  out->ret_obj = ps->ret.obj;
  out->ret_tc = ps->ret.tc;
  out->num_args = (uint8_t)ps->n;
  out->ret_et = (int8_t)ps->ret.et;
  out->nodes = ps->nnodes ? ps->nodes : NULL;
  for (int k = 0; k < PF_TYPED_MAX_ARGS; ++k) out->arg_et[k] = -1;
  for (int k = 0; k < ps->n; ++k) {
    out->arg_et[k] = (int8_t)ps->p[k].et;
    out->args[k] = (uint8_t)ps->p[k].t;
    out->arg_obj[k] = ps->p[k].obj;
    out->arg_tc[k] = ps->p[k].tc;
  }
}

int pf_sig_refuse_any(const char* where, const char* text, const pf_sig* sig) {
  int k = sig->ret == pf_t_any ? -1 : 0;
  while (k >= 0 && k < sig->num_args && sig->args[k] != pf_t_any) ++k;
  if (k == sig->num_args) return 0;
  /* The text parsed before: read again for the position and the name. */
  pf_parsed_sig ps;
  if (pf_sig_read(where, text, &ps) != 0) return -1;
  static const char why[] =
      "which has no C type (it describes a packed function's values: PFFuncSetInfo)";
  const pf_parsed_param* p = k < 0 ? &ps.ret : &ps.p[k];
  char type[128] = "any";
  if (p->et >= 0) pf_tnode_format(ps.nodes, p->et, type, sizeof(type));
  if (k < 0) return sig_error(where, text, ps.ret.type_at, "the result is %s, %s", type, why);
  if (p->name_len == 0)
    return sig_error(where, text, p->type_at, "parameter %d is %s, %s", k, type, why);
  return sig_error(where, text, p->type_at, "parameter %d ('%.*s') is %s, %s", k, (int)p->name_len,
                   text + p->name_at, type, why);
}

int pf_sig_parse(const char* where, const char* text, pf_sig* out) {
  pf_parsed_sig ps;
  if (pf_sig_read(where, text, &ps) != 0) return -1;
  pf_sig_of(&ps, out);
  return 0;
}

int pf_sig_parse_type(const char* where, const char* text, int* t, const struct pf_type** obj,
                      struct pf_siginfo** tree) {
  if (text == NULL) return pf_err_null_arg(where, "type");
  size_t i = skip_blanks(text, 0);
  int rc, et;
  pf_tc tc;
  pf_parsed_sig* ps = pf_malloc(sizeof(*ps));
  if (ps == NULL) return pf_oom(where);
  ps->nnodes = 0;
  *tree = NULL;
  t_what = "type";
  rc = read_type(where, text, &i, ps, t, obj, &tc, &et);
  if (rc == 0 && tc.flags != 0 && et < 0)
    rc = sig_error(where, text, skip_blanks(text, 0),
                   "a tensor field takes any tensor: write tensor, without a constraint");
  if (rc == 0) i = skip_blanks(text, i);
  if (rc == 0 && text[i] != '\0') rc = sig_error(where, text, i, "unexpected text after the type");
  t_what = "signature";
  if (rc == 0 && et >= 0) {
    /* The tree as a one-parameter signature's, which keeps it and its
     * canonical text in one block. */
    size_t n = pf_tnode_format(ps->nodes, et, NULL, 0);
    char* sig = pf_malloc(n + 8);
    if (sig == NULL) rc = pf_oom(where);
    if (sig != NULL) {
      memcpy(sig, "void(", 5);
      pf_tnode_format(ps->nodes, et, sig + 5, n + 1);
      memcpy(sig + 5 + n, ")", 2);
      rc = pf_siginfo_parse(where, sig, tree);
      pf_free(sig);
    }
  }
  pf_free(ps);
  return rc;
}

int pf_tc_parse(const char* where, const char* text, pf_tc* out) {
  if (text == NULL) return pf_err_null_arg(where, "constraint");
  size_t i = skip_blanks(text, 0), at = i;
  int rc, t = 0, et;
  const struct pf_type* obj;
  pf_tc tc;
  t_what = "type";
  rc = read_type(where, text, &i, NULL, &t, &obj, &tc, &et);
  if (rc == 0 && t != pf_t_tensor)
    rc = sig_error(where, text, at, "a tensor type is tensor or tensor<...>, not %s",
                   pf_ctype_name(t, obj));
  if (rc == 0) i = skip_blanks(text, i);
  if (rc == 0 && text[i] != '\0') rc = sig_error(where, text, i, "unexpected text after the type");
  t_what = "signature";
  if (rc == 0) *out = tc;
  return rc;
}
