/* Signatures: the table of signature types, the grammar, a signature's libffi description. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "object_type.h"

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
#define FLOAT_ROW_(id, name, ctype, member, ffi, max) [pf_t_##id] = {name, &ffi, kPFFloat, 0, 0, max},
#define OTHER_ROW_(id, name, member, ffi, rcode) [pf_t_##id] = {name, &ffi, rcode, 0, 0, 0},
const pf_ctype_info pf_ctypes[pf_t_all] = {
    [pf_t_void] = {"void", &ffi_type_void, kPFNull, 0, 0, 0},
    PF_SIG_INT_TYPES(INT_ROW_) PF_SIG_FLOAT_TYPES(FLOAT_ROW_) PF_SIG_OTHER_TYPES(OTHER_ROW_)
    [pf_t_obj] = {"obj", &ffi_type_pointer, kPFObjectHandle, 0, 0, 0}};
#undef INT_ROW_
#undef FLOAT_ROW_
#undef OTHER_ROW_

const char* pf_ctype_name(int t, const struct pf_type* obj) {
  if (t == pf_t_obj && obj != NULL) return obj->sig_name;
  return (t >= 0 && t < pf_t_all) ? pf_ctypes[t].name : "?";
}

int PFSignatureTypeInfo(int index, const char** name, int* type_code) {
  if (index < 0 || index >= pf_t_count)
    return PF_ERROR(kPFErrIndexError,
                    "PFSignatureTypeInfo: argument 'index' is %d; the signature types "
                    "are numbered 0 to %d", index, pf_t_count - 1);
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

/* What a text is, for messages: "signature" or "type". */
static _Thread_local const char* t_what = "signature";

static int sig_error(const char* where, const char* text, size_t pos, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;

static int sig_error(const char* where, const char* text, size_t pos, const char* fmt, ...) {
  char detail[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof(detail), fmt, ap);
  va_end(ap);
  return PF_ERROR(kPFErrValueError, "%s: bad %s \"%.200s\" at position %zu: %s", where, t_what,
                  text, pos, detail);
}

static int is_key_char(char c) { return is_name_char(c) || c == '.'; }

/* Reads "<KEY>" after "obj" at text[*pos] (blanks allowed around each
 * token) and resolves KEY; advances *pos past the '>'. */
static int read_obj_key(const char* where, const char* text, size_t* pos,
                        const struct pf_type** obj) {
  size_t i = *pos;
  while (is_blank(text[i])) ++i;
  if (text[i] != '<')
    return sig_error(where, text, i, "'obj' names a registered object type: write obj<KEY>");
  ++i;
  while (is_blank(text[i])) ++i;
  size_t start = i, n = 0;
  while (is_key_char(text[start + n])) ++n;
  if (n == 0)
    return sig_error(where, text, start, "expected an object type key after 'obj<'");
  const struct pf_type* t = pf_type_resolve(text + start, n);
  if (t == NULL)
    return sig_error(where, text, start, "unknown object type '%.*s' (not registered)",
                     (int)(n > 100 ? 100 : n), text + start);
  i = start + n;
  while (is_blank(text[i])) ++i;
  if (text[i] != '>') return sig_error(where, text, i, "expected '>' after the object type key");
  *obj = t;
  *pos = i + 1;
  return 0;
}

/* Reads one type name at text[*pos]; advances *pos past it. For obj<KEY>,
 * *obj is KEY's type (else NULL). */
static int read_type(const char* where, const char* text, size_t* pos, int* out,
                     const struct pf_type** obj) {
  size_t start = *pos, n = 0;
  *obj = NULL;
  while (is_name_char(text[start + n])) ++n;
  if (n == 0)
    return sig_error(where, text, start, "%s",
                     text[start] ? "expected a type name" : "expected a type name, found the end");
  if (n == 3 && memcmp(text + start, "obj", 3) == 0) {
    *pos = start + n;
    *out = pf_t_obj;
    return read_obj_key(where, text, pos, obj);
  }
  for (int t = 0; t < pf_t_count; ++t) {
    if (strlen(pf_ctypes[t].name) == n && memcmp(pf_ctypes[t].name, text + start, n) == 0) {
      *out = t;
      *pos = start + n;
      return 0;
    }
  }
  if (n == 6 && memcmp(text + start, "double", 6) == 0) { /* the one alias */
    *out = pf_t_float64;
    *pos = start + n;
    return 0;
  }
  if (n == 5 && memcmp(text + start, "float", 5) == 0)
    return sig_error(where, text, start, "'float' is ambiguous; write float32 or float64");
  return sig_error(where, text, start, "unknown type '%.*s'", (int)(n > 40 ? 40 : n),
                   text + start);
}

int pf_sig_parse(const char* where, const char* text, pf_sig* out) {
  if (text == NULL) return pf_err_null_arg(where, "signature");
  pf_sig sig;
  memset(&sig, 0, sizeof(sig));
  size_t i = 0;
  int t;
  const struct pf_type* obj;
  while (is_blank(text[i])) ++i;
  if (read_type(where, text, &i, &t, &obj) != 0) return -1;
  sig.ret = (uint8_t)t;
  sig.ret_obj = obj;
  while (is_blank(text[i])) ++i;
  if (text[i] != '(')
    return sig_error(where, text, i, "%s",
                     text[i] ? "expected '(' after the return type"
                             : "expected '(' after the return type, found the end");
  ++i;
  while (is_blank(text[i])) ++i;
  if (text[i] == ')') {
    ++i;
  } else {
    for (;;) {
      size_t at = i;
      if (read_type(where, text, &i, &t, &obj) != 0) return -1;
      if (t == pf_t_void)
        return sig_error(where, text, at,
                         "void is only allowed as the return type (write () for no arguments)");
      if (sig.num_args == PF_TYPED_MAX_ARGS)
        return sig_error(where, text, at, "more than %d arguments", PF_TYPED_MAX_ARGS);
      sig.arg_obj[sig.num_args] = obj;
      sig.args[sig.num_args++] = (uint8_t)t;
      while (is_blank(text[i])) ++i;
      if (text[i] == ',') {
        ++i;
        while (is_blank(text[i])) ++i;
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
  while (is_blank(text[i])) ++i;
  if (text[i] != '\0') return sig_error(where, text, i, "unexpected text after ')'");
  *out = sig;
  return 0;
}

int pf_sig_parse_type(const char* where, const char* text, int* t, const struct pf_type** obj) {
  if (text == NULL) return pf_err_null_arg(where, "type");
  size_t i = 0;
  int rc;
  t_what = "type";
  while (is_blank(text[i])) ++i;
  rc = read_type(where, text, &i, t, obj);
  while (rc == 0 && is_blank(text[i])) ++i;
  if (rc == 0 && text[i] != '\0') rc = sig_error(where, text, i, "unexpected text after the type");
  t_what = "signature";
  return rc;
}

char* pf_sig_format(const pf_sig* sig) {
  size_t n = strlen(pf_ctype_name(sig->ret, sig->ret_obj)) + 3;
  for (int i = 0; i < sig->num_args; ++i)
    n += strlen(pf_ctype_name(sig->args[i], sig->arg_obj[i])) + 1;
  char* s = pf_malloc(n);
  if (s == NULL) return NULL;
  char* p = s;
  p += sprintf(p, "%s(", pf_ctype_name(sig->ret, sig->ret_obj));
  for (int i = 0; i < sig->num_args; ++i)
    p += sprintf(p, "%s%s", i ? "," : "", pf_ctype_name(sig->args[i], sig->arg_obj[i]));
  sprintf(p, ")");
  return s;
}
