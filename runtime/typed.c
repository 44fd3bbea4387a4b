/* Typed C functions as PackedFuncs: signatures, conversions, the direct-cast
 * fast path and the libffi path. The grammar and the conversion rules are
 * documented in c_api.h. */
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "typed.h"

_Static_assert(sizeof(pf_cvalue) == 8, "a C value fits in 8 bytes");
_Static_assert(sizeof(pf_cvalue) == sizeof(PFValue) && _Alignof(pf_cvalue) == _Alignof(PFValue),
               "an int64 or float64 result passes as a PFValue");
_Static_assert(sizeof(bool) == 1, "bool travels through libffi as uint8");
_Static_assert(sizeof(DLDeviceType) == 4, "DLDevice travels through libffi as two 32-bit ints");

/* ---- names, libffi types, ranges: from the list in typed.h ---- */

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
static const struct {
  const char* name;
  ffi_type* ffi;
  int result_code;
  int64_t lo; /* integers: the range of the C type */
  uint64_t hi;
  double max; /* floating point: the largest finite value */
} k_types[pf_t_count] = {
    [pf_t_void] = {"void", &ffi_type_void, kPFNull, 0, 0, 0},
    PF_SIG_INT_TYPES(INT_ROW_) PF_SIG_FLOAT_TYPES(FLOAT_ROW_) PF_SIG_OTHER_TYPES(OTHER_ROW_)};
#undef INT_ROW_
#undef FLOAT_ROW_
#undef OTHER_ROW_

const char* pf_ctype_name(int t) {
  return (t >= 0 && t < pf_t_count) ? k_types[t].name : "?";
}

ffi_type* pf_ctype_ffi(int t) { return k_types[t].ffi; }

int pf_ctype_result_code(int t) { return k_types[t].result_code; }

int PFSignatureTypeInfo(int index, const char** name, int* type_code) {
  if (index < 0 || index >= pf_t_count)
    return PFErrorSetFormat(kPFErrIndexError,
                            "PFSignatureTypeInfo: argument 'index' is %d; the signature types "
                            "are numbered 0 to %d",
                            index, pf_t_count - 1);
  if (name) *name = k_types[index].name;
  if (type_code) *type_code = k_types[index].result_code;
  return 0;
}

int pf_sig_prep_cif(const char* where, const pf_sig* sig, ffi_cif* cif, ffi_type** atypes) {
  for (int i = 0; i < sig->num_args; ++i) atypes[i] = pf_ctype_ffi(sig->args[i]);
  ffi_type* rtype = sig->ret == pf_t_bytes ? &k_ffi_bytes : pf_ctype_ffi(sig->ret);
  ffi_status st = ffi_prep_cif(cif, FFI_DEFAULT_ABI, sig->num_args, rtype, atypes);
  if (st != FFI_OK)
    return PFErrorSetFormat(kPFErrRuntimeError, "%s: libffi could not prepare the call (status %d)",
                            where, (int)st);
  return 0;
}

/* ---- the signature grammar ---- */

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static int is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

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
  return PFErrorSetFormat(kPFErrValueError, "%s: bad signature \"%.200s\" at position %zu: %s",
                          where, text, pos, detail);
}

/* Reads one type name at text[*pos]; advances *pos past it. */
static int read_type(const char* where, const char* text, size_t* pos, int* out) {
  size_t start = *pos, n = 0;
  while (is_name_char(text[start + n])) ++n;
  if (n == 0)
    return sig_error(where, text, start, "%s",
                     text[start] ? "expected a type name" : "expected a type name, found the end");
  for (int t = 0; t < pf_t_count; ++t) {
    if (strlen(k_types[t].name) == n && memcmp(k_types[t].name, text + start, n) == 0) {
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
  while (is_blank(text[i])) ++i;
  if (read_type(where, text, &i, &t) != 0) return -1;
  sig.ret = (uint8_t)t;
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
      if (read_type(where, text, &i, &t) != 0) return -1;
      if (t == pf_t_void)
        return sig_error(where, text, at,
                         "void is only allowed as the return type (write () for no arguments)");
      if (sig.num_args == PF_TYPED_MAX_ARGS)
        return sig_error(where, text, at, "more than %d arguments", PF_TYPED_MAX_ARGS);
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

char* pf_sig_format(const pf_sig* sig) {
  size_t n = strlen(k_types[sig->ret].name) + 3;
  for (int i = 0; i < sig->num_args; ++i) n += strlen(k_types[sig->args[i]].name) + 1;
  char* s = pf_malloc(n);
  if (s == NULL) return NULL;
  char* p = s;
  p += sprintf(p, "%s(", k_types[sig->ret].name);
  for (int i = 0; i < sig->num_args; ++i)
    p += sprintf(p, "%s%s", i ? "," : "", k_types[sig->args[i]].name);
  sprintf(p, ")");
  return s;
}

/* ---- packed value -> C value ---- */

/* An int that converts to double without rounding. */
static int int_to_double_exact(int64_t x, double* out) {
  const int64_t lim = (int64_t)1 << 53;
  double d = (double)x;
  if (x < -lim || x > lim) {
    /* Beyond 2^53 only some ints are exact; 2^63 itself is not an int64. */
    if (d >= 9223372036854775808.0 || (int64_t)d != x) return 0;
  }
  *out = d;
  return 1;
}

pf_conv pf_packed_to_c(int t, int code, const PFValue* v, pf_cvalue* out, int allow_null_str) {
  switch (t) {
#define INT_CASE_(id, name, ctype, member, ffi, rcode, lo, hi) case pf_t_##id:
    PF_SIG_INT_TYPES(INT_CASE_) {
      if (code != kPFInt && code != kPFBool) return pf_conv_type;
      int64_t x = code == kPFBool ? (v->v_int64 != 0) : v->v_int64;
      if (x < k_types[t].lo || (x > 0 && (uint64_t)x > k_types[t].hi)) return pf_conv_range;
      switch (t) {
#define INT_STORE_(id, name, ctype, member, ffi, rcode, lo, hi) \
  case pf_t_##id:                                               \
    out->member = (ctype)x;                                     \
    break;
        PF_SIG_INT_TYPES(INT_STORE_)
#undef INT_STORE_
      }
      return pf_conv_ok;
    }
#define FLOAT_CASE_(id, name, ctype, member, ffi, max) case pf_t_##id:
    PF_SIG_FLOAT_TYPES(FLOAT_CASE_) {
      double d;
      if (code == kPFFloat) {
        d = v->v_float64;
      } else if (code == kPFInt || code == kPFBool) {
        if (!int_to_double_exact(code == kPFBool ? (v->v_int64 != 0) : v->v_int64, &d))
          return pf_conv_range;
      } else {
        return pf_conv_type;
      }
      /* Narrowing rounds as C does; a finite value beyond the type is an
       * error, infinities and NaN pass. */
      if (isfinite(d) && fabs(d) > k_types[t].max) return pf_conv_range;
      switch (t) {
#define FLOAT_STORE_(id, name, ctype, member, ffi, max) \
  case pf_t_##id:                                       \
    out->member = (ctype)d;                             \
    break;
        PF_SIG_FLOAT_TYPES(FLOAT_STORE_)
#undef FLOAT_STORE_
      }
      return pf_conv_ok;
    }
    case pf_t_str:
      if (code == kPFStr || (code == kPFNull && allow_null_str)) {
        out->s = code == kPFStr ? v->v_str : NULL;
        return pf_conv_ok;
      }
      return pf_conv_type;
    case pf_t_bytes:
      if (code == kPFBytes || (code == kPFNull && allow_null_str)) {
        out->by = code == kPFBytes ? v->v_handle : NULL;
        return pf_conv_ok;
      }
      return pf_conv_type;
    case pf_t_ptr:
      if (code == kPFOpaqueHandle || code == kPFNull) {
        out->p = code == kPFNull ? NULL : v->v_handle;
        return pf_conv_ok;
      }
      return pf_conv_type;
    case pf_t_tensor:
      if (code == kPFDLTensorHandle || code == kPFNull) {
        out->t = code == kPFNull ? NULL : v->v_handle;
        return pf_conv_ok;
      }
      if (code == kPFObjectHandle && pf_is_object(v->v_handle, kPFObjectTensor))
        return PFTensorGetDLTensor(v->v_handle, &out->t) == 0 ? pf_conv_ok : pf_conv_type;
      return pf_conv_type;
    case pf_t_dtype:
      if (code != kPFDataType) return pf_conv_type;
      out->dt = v->v_type;
      return pf_conv_ok;
    case pf_t_device:
      if (code != kPFDevice) return pf_conv_type;
      out->dev = v->v_device;
      return pf_conv_ok;
    case pf_t_func:
      if (code == kPFNull) {
        out->fn = NULL;
        return pf_conv_ok;
      }
      if (code != kPFFuncHandle) return pf_conv_type;
      if (!pf_is_object(v->v_handle, kPFObjectFunction)) return pf_conv_dead;
      out->fn = v->v_handle;
      return pf_conv_ok;
    case pf_t_object:
      /* Any object, whichever handle code carries it. */
      if (code == kPFNull) {
        out->o = NULL;
        return pf_conv_ok;
      }
      if (!pf_code_is_handle(code)) return pf_conv_type;
      if (!pf_is_object(v->v_handle, 0)) return pf_conv_dead;
      out->o = v->v_handle;
      return pf_conv_ok;
    case pf_t_array:
    case pf_t_map:
    case pf_t_shape:
      if (code == kPFNull) {
        out->o = NULL;
        return pf_conv_ok;
      }
      if (code != kPFObjectHandle) return pf_conv_type;
      if (!pf_is_object(v->v_handle, 0)) return pf_conv_dead;
      if (!pf_is_object(v->v_handle, pf_ctype_object_type(t))) return pf_conv_object;
      out->o = v->v_handle;
      return pf_conv_ok;
    default:
      return pf_conv_type;
  }
#undef INT_CASE_
#undef FLOAT_CASE_
}

static const char* code_name(int code, char* buf, size_t n) {
  const char* s = PFTypeCodeName(code);
  if (s != NULL) return s;
  snprintf(buf, n, "unknown type code %d", code);
  return buf;
}

int pf_conv_error(pf_conv c, const char* who, const char* what, int t, int code,
                  const PFValue* v) {
  char buf[40];
  const char* want = pf_ctype_name(t);
  if (c == pf_conv_dead)
    return PFErrorSetFormat(kPFErrTypeError,
                            "%s: %s: expected %s, got %s handle that is not live", who, what,
                            want, t == pf_t_func ? "a function" : "an object");
  if (c == pf_conv_object) {
    const char* got = PFObjectTypeName(((const pf_object*)v->v_handle)->type_index);
    return PFErrorSetFormat(kPFErrTypeError, "%s: %s: expected %s, got %s object", who, what,
                            want, got ? got : "another");
  }
  if (c != pf_conv_range)
    return PFErrorSetFormat(kPFErrTypeError, "%s: %s: expected %s, got %s", who, what, want,
                            code_name(code, buf, sizeof(buf)));
  if (code == kPFFloat)
    return PFErrorSetFormat(kPFErrValueError, "%s: %s: expected %s, got float %g, which is beyond "
                            "its range of +-%g", who, what, want, v->v_float64, k_types[t].max);
  long long x = code == kPFBool ? (v->v_int64 != 0) : (long long)v->v_int64;
  if (t == pf_t_bool)
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: %s: expected bool, got int %lld; only 0 and 1 convert to bool",
                            who, what, x);
  if (t == pf_t_float32 || t == pf_t_float64)
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: %s: expected %s, got int %lld, which a double cannot hold exactly",
                            who, what, want, x);
  return PFErrorSetFormat(kPFErrValueError, "%s: %s: expected %s, got int %lld, which is out of "
                          "its range [%lld, %llu]", who, what, want, x, (long long)k_types[t].lo,
                          (unsigned long long)k_types[t].hi);
}

/* ---- C value -> packed value ---- */

int pf_c_to_packed(int t, const pf_cvalue* c, PFValue* v, int* code) {
  switch (t) {
#define INT_CASE_(id, name, ctype, member, ffi, rcode, lo, hi)              \
  case pf_t_##id:                                                           \
    if ((uint64_t)(hi) > INT64_MAX && (uint64_t)c->member > INT64_MAX)      \
      return -1;                                                            \
    v->v_int64 = (int64_t)c->member;                                        \
    *code = rcode;                                                          \
    return 0;
    PF_SIG_INT_TYPES(INT_CASE_)
#undef INT_CASE_
#define FLOAT_CASE_(id, name, ctype, member, ffi, max) \
  case pf_t_##id:                                      \
    v->v_float64 = c->member;                          \
    *code = kPFFloat;                                  \
    return 0;
    PF_SIG_FLOAT_TYPES(FLOAT_CASE_)
#undef FLOAT_CASE_
    case pf_t_dtype:
      v->v_type = c->dt;
      *code = kPFDataType;
      return 0;
    case pf_t_device:
      v->v_device = c->dev;
      *code = kPFDevice;
      return 0;
    case pf_t_bytes:
      if (c->by == NULL) break;
      if ((c->by->data == NULL && c->by->size != 0) || c->by->size > PF_MAX_OBJECT_SIZE)
        return -1;
      v->v_handle = (void*)c->by;
      *code = kPFBytes;
      return 0;
    case pf_t_func:
      if (c->fn != NULL && !pf_is_object(c->fn, kPFObjectFunction)) return -1;
      break;
    case pf_t_object:
      if (c->o == NULL) break;
      if (!pf_is_object(c->o, 0)) return -1;
      /* Functions and modules travel under their own codes, as a packed
       * function would return them. */
      v->v_handle = c->o;
      switch (((const pf_object*)c->o)->type_index) {
        case kPFObjectFunction: *code = kPFFuncHandle; break;
        case kPFObjectModule: *code = kPFModuleHandle; break;
        default: *code = kPFObjectHandle; break;
      }
      return 0;
    case pf_t_array:
    case pf_t_map:
    case pf_t_shape:
      if (c->o != NULL && !pf_is_object(c->o, pf_ctype_object_type(t))) return -1;
      break;
    default: /* str, ptr, tensor */
      break;
  }
  /* The pointer-like types: NULL is null. */
  v->v_handle = c->p;
  *code = c->p ? k_types[t].result_code : kPFNull;
  return 0;
}

int pf_c_to_packed_error(const char* who, const char* what, int t, const pf_cvalue* c) {
  if (t == pf_t_func)
    return PFErrorSetFormat(kPFErrTypeError,
                            "%s: %s: expected func, got a pointer that is not a live function "
                            "handle", who, what);
  if (pf_ctype_is_ref(t))
    return PFErrorSetFormat(kPFErrTypeError,
                            "%s: %s: expected %s, got a pointer that is not a live %s handle", who,
                            what, k_types[t].name, k_types[t].name);
  if (t == pf_t_bytes && c->by->data == NULL)
    return PFErrorSetFormat(kPFErrValueError, "%s: %s: bytes of size %zu with NULL data", who,
                            what, c->by->size);
  if (t == pf_t_bytes)
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: %s: bytes of size %zu, larger than any object can be "
                            "(PTRDIFF_MAX bytes)", who, what, c->by->size);
  return PFErrorSetFormat(kPFErrValueError,
                          "%s: %s: %s value %llu does not fit the int64 of a packed value", who,
                          what, k_types[t].name, (unsigned long long)c->u64);
}

/* ---- typed functions ---- */

typedef void (*pf_fn)(void);
/* Calls fn with the arguments' 8 bytes each as its prototype takes them
 * (int64-like from v_int64, float64 from v_float64), straight from the
 * caller's packed values on the simple path. */
typedef void (*pf_fast_caller)(pf_fn fn, const PFValue* a, pf_cvalue* r);

typedef struct {
  pf_fn fn;
  pf_fast_caller fast; /* NULL: call through cif */
  PFFunctionHandle self; /* not a reference: the function owns this struct */
  pf_sig sig;
  ffi_cif cif;
  ffi_type* atypes[PF_TYPED_MAX_ARGS];
} pf_typed;

/* libffi writes integral results narrower than a register as a whole
 * ffi_arg, and a PFByteArray result needs 16 bytes. */
typedef union {
  ffi_arg a;
  ffi_sarg sa;
  pf_cvalue v;
  PFByteArray ba;
} pf_cret;

/*
 * The fast path. On LP64 targets whose C ABI passes a pointer exactly as an
 * int64 (x86-64 System V and AArch64), a signature whose arguments are at
 * most four of int64/uint64/pointer-like ("I") and float64 ("F") values,
 * and whose result is void, an int64-like value, float64, bool or int32,
 * is called through a function pointer cast to that prototype. One caller
 * exists per (result kind, argument pattern) and is chosen at creation, so
 * a call does no dispatch on the signature. Everything else uses libffi.
 */
#if (defined(__x86_64__) || defined(__aarch64__)) && UINTPTR_MAX == UINT64_MAX
#define PF_TYPED_FAST 1

#define PF_TY_I int64_t
#define PF_TY_F double
#define PF_AV_I(k) a[k].v_int64
#define PF_AV_F(k) a[k].v_float64
#define PF_RT_v void
#define PF_RT_i int64_t
#define PF_RT_d double
#define PF_RT_b bool
#define PF_RT_w int32_t
#define PF_ST_v(call) call
#define PF_ST_i(call) r->i64 = call
#define PF_ST_d(call) r->f64 = call
#define PF_ST_b(call) r->b = call
#define PF_ST_w(call) r->i32 = call

#define PF_HEAD(name) static void name(pf_fn fn, const PFValue* a, pf_cvalue* r)
#define PF_FAST0(k)                                              \
  PF_HEAD(fast_##k) {                                            \
    (void)a;                                                     \
    (void)r;                                                     \
    PF_ST_##k(((PF_RT_##k(*)(void))fn)());                      \
  }
#define PF_FAST1(k, A1)                                          \
  PF_HEAD(fast_##k##_##A1) {                                     \
    (void)r;                                                     \
    PF_ST_##k(((PF_RT_##k(*)(PF_TY_##A1))fn)(PF_AV_##A1(0)));   \
  }
#define PF_FAST2(k, A1, A2)                                                         \
  PF_HEAD(fast_##k##_##A1##A2) {                                                    \
    (void)r;                                                                        \
    PF_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2))fn)(PF_AV_##A1(0), PF_AV_##A2(1))); \
  }
#define PF_FAST3(k, A1, A2, A3)                                                   \
  PF_HEAD(fast_##k##_##A1##A2##A3) {                                              \
    (void)r;                                                                      \
    PF_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2, PF_TY_##A3))fn)(             \
        PF_AV_##A1(0), PF_AV_##A2(1), PF_AV_##A3(2)));                            \
  }
#define PF_FAST4(k, A1, A2, A3, A4)                                               \
  PF_HEAD(fast_##k##_##A1##A2##A3##A4) {                                          \
    (void)r;                                                                      \
    PF_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2, PF_TY_##A3, PF_TY_##A4))fn)( \
        PF_AV_##A1(0), PF_AV_##A2(1), PF_AV_##A3(2), PF_AV_##A4(3)));             \
  }

/* Argument patterns in lexicographic order, I before F: the index of a
 * pattern of n arguments is 2^n - 1 plus its bits, the first argument the
 * most significant, F = 1. */
#define PF_PATS1(M, k) M(k, I) M(k, F)
#define PF_PATS2(M, k) M(k, I, I) M(k, I, F) M(k, F, I) M(k, F, F)
#define PF_PATS3(M, k)                                                              \
  M(k, I, I, I) M(k, I, I, F) M(k, I, F, I) M(k, I, F, F) M(k, F, I, I) M(k, F, I, F) \
  M(k, F, F, I) M(k, F, F, F)
#define PF_PATS4(M, k)                                                      \
  M(k, I, I, I, I) M(k, I, I, I, F) M(k, I, I, F, I) M(k, I, I, F, F)       \
  M(k, I, F, I, I) M(k, I, F, I, F) M(k, I, F, F, I) M(k, I, F, F, F)       \
  M(k, F, I, I, I) M(k, F, I, I, F) M(k, F, I, F, I) M(k, F, I, F, F)       \
  M(k, F, F, I, I) M(k, F, F, I, F) M(k, F, F, F, I) M(k, F, F, F, F)

#define PF_FAST_ALL(k) \
  PF_FAST0(k) PF_PATS1(PF_FAST1, k) PF_PATS2(PF_FAST2, k) PF_PATS3(PF_FAST3, k) PF_PATS4(PF_FAST4, k)
PF_FAST_ALL(v)
PF_FAST_ALL(i)
PF_FAST_ALL(d)
PF_FAST_ALL(b)
PF_FAST_ALL(w)

#define PF_ENT0(k) fast_##k,
#define PF_ENT1(k, A1) fast_##k##_##A1,
#define PF_ENT2(k, A1, A2) fast_##k##_##A1##A2,
#define PF_ENT3(k, A1, A2, A3) fast_##k##_##A1##A2##A3,
#define PF_ENT4(k, A1, A2, A3, A4) fast_##k##_##A1##A2##A3##A4,
#define PF_ROW(k) \
  { PF_ENT0(k) PF_PATS1(PF_ENT1, k) PF_PATS2(PF_ENT2, k) PF_PATS3(PF_ENT3, k) PF_PATS4(PF_ENT4, k) }

#define PF_FAST_MAX_ARGS 4
static const pf_fast_caller k_fast[5][31] = {PF_ROW(v), PF_ROW(i), PF_ROW(d), PF_ROW(b), PF_ROW(w)};

/*
 * The simple path: one packed C function per simple signature (void,
 * int64 or float64 result; at most four int64 or float64 arguments), made
 * the function object's own, so that a call with exactly the signature's
 * codes goes from PFFuncCall to the C function with nothing in between but
 * the check of the codes. Any other call takes typed_call_general.
 */
static int typed_call_general(PFValue* args, int* codes, int n, PFRetValueHandle ret,
                              void* res);
/* Sets a plain result through the header's inline PFCFuncSetReturn: the
 * tag check and two stores, or the exported function when the slot is not
 * a live plain slot of this thread. */
static inline int typed_set(PFRetValueHandle ret, int code, PFValue v) {
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
#define PF_CODE_I kPFInt
#define PF_CODE_F kPFFloat
#define PF_PK_ST_v(call) \
  call;                  \
  return 0;
#define PF_PK_ST_i(call)  \
  PFValue v;              \
  v.v_int64 = call;       \
  return typed_set(ret, kPFInt, v);
#define PF_PK_ST_d(call)  \
  PFValue v;              \
  v.v_float64 = call;     \
  return typed_set(ret, kPFFloat, v);
#define PF_PK_HEAD(name) \
  static int name(PFValue* a, int* codes, int n, PFRetValueHandle ret, void* res)
#define PF_PK_OTHER return typed_call_general(a, codes, n, ret, res)
#define PF_PK_FN ((const pf_typed*)res)->fn
#define PF_PK0(k)                                \
  PF_PK_HEAD(packed_##k) {                       \
    if (__builtin_expect(n != 0, 0)) PF_PK_OTHER; \
    PF_PK_ST_##k(((PF_RT_##k(*)(void))PF_PK_FN)()) \
  }
#define PF_PK1(k, A1)                                                            \
  PF_PK_HEAD(packed_##k##_##A1) {                                                \
    if (__builtin_expect(n != 1 || codes[0] != PF_CODE_##A1, 0)) PF_PK_OTHER;    \
    PF_PK_ST_##k(((PF_RT_##k(*)(PF_TY_##A1))PF_PK_FN)(PF_AV_##A1(0)))        \
  }
#define PF_PK2(k, A1, A2)                                                           \
  PF_PK_HEAD(packed_##k##_##A1##A2) {                                               \
    if (__builtin_expect(n != 2 || codes[0] != PF_CODE_##A1 || codes[1] != PF_CODE_##A2, 0)) \
      PF_PK_OTHER;                                                                  \
    PF_PK_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2))PF_PK_FN)(PF_AV_##A1(0),  \
                                                                     PF_AV_##A2(1))) \
  }
#define PF_PK3(k, A1, A2, A3)                                                        \
  PF_PK_HEAD(packed_##k##_##A1##A2##A3) {                                            \
    if (__builtin_expect(n != 3 || codes[0] != PF_CODE_##A1 || codes[1] != PF_CODE_##A2 || \
                             codes[2] != PF_CODE_##A3,                               \
                         0))                                                         \
      PF_PK_OTHER;                                                                   \
    PF_PK_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2, PF_TY_##A3))PF_PK_FN)(     \
        PF_AV_##A1(0), PF_AV_##A2(1), PF_AV_##A3(2)))                                 \
  }
#define PF_PK4(k, A1, A2, A3, A4)                                                    \
  PF_PK_HEAD(packed_##k##_##A1##A2##A3##A4) {                                        \
    if (__builtin_expect(n != 4 || codes[0] != PF_CODE_##A1 || codes[1] != PF_CODE_##A2 || \
                             codes[2] != PF_CODE_##A3 || codes[3] != PF_CODE_##A4,   \
                         0))                                                         \
      PF_PK_OTHER;                                                                   \
    PF_PK_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2, PF_TY_##A3, PF_TY_##A4))      \
                     PF_PK_FN)(PF_AV_##A1(0), PF_AV_##A2(1), PF_AV_##A3(2),        \
                                  PF_AV_##A4(3)))                                    \
  }
#define PF_PK_ALL(k) \
  PF_PK0(k) PF_PATS1(PF_PK1, k) PF_PATS2(PF_PK2, k) PF_PATS3(PF_PK3, k) PF_PATS4(PF_PK4, k)
PF_PK_ALL(v)
PF_PK_ALL(i)
PF_PK_ALL(d)
#define PF_PKE0(k) packed_##k,
#define PF_PKE1(k, A1) packed_##k##_##A1,
#define PF_PKE2(k, A1, A2) packed_##k##_##A1##A2,
#define PF_PKE3(k, A1, A2, A3) packed_##k##_##A1##A2##A3,
#define PF_PKE4(k, A1, A2, A3, A4) packed_##k##_##A1##A2##A3##A4,
#define PF_PK_ROW(k)                                                                        \
  {                                                                                         \
    PF_PKE0(k) PF_PATS1(PF_PKE1, k) PF_PATS2(PF_PKE2, k) PF_PATS3(PF_PKE3, k)             \
        PF_PATS4(PF_PKE4, k)                                                                \
  }
/* By result (void, int64, float64), then by argument pattern as k_fast. */
static const PFPackedCFunc k_simple[3][31] = {PF_PK_ROW(v), PF_PK_ROW(i), PF_PK_ROW(d)};
#endif

static pf_fast_caller pick_fast(const pf_sig* sig) {
#ifdef PF_TYPED_FAST
  int rk;
  switch (sig->ret) {
    case pf_t_void: rk = 0; break;
    /* A reference result is a pointer in a register like any other; it
     * then goes through set_return, which hands the reference on. */
    case pf_t_int64: case pf_t_uint64: case pf_t_ptr: case pf_t_str:
    case pf_t_tensor: case pf_t_func: case pf_t_array: case pf_t_map:
    case pf_t_shape: case pf_t_object: rk = 1; break;
    case pf_t_float64: rk = 2; break;
    case pf_t_bool: rk = 3; break;
    case pf_t_int32: rk = 4; break;
    default: return NULL;
  }
  if (sig->num_args > PF_FAST_MAX_ARGS) return NULL;
  int bits = 0;
  for (int i = 0; i < sig->num_args; ++i) {
    switch (sig->args[i]) {
      case pf_t_int64: case pf_t_uint64: case pf_t_ptr: case pf_t_str: case pf_t_bytes:
      case pf_t_tensor: case pf_t_func: case pf_t_array: case pf_t_map: case pf_t_shape:
      case pf_t_object: bits = bits << 1; break;
      case pf_t_float64: bits = (bits << 1) | 1; break;
      default: return NULL;
    }
  }
  return k_fast[rk][(1 << sig->num_args) - 1 + bits];
#else
  (void)sig;
  return NULL;
#endif
}

/* "typed function 'name' int64(int64,int64)", for messages. */
static void describe(const pf_typed* t, char* buf, size_t n) {
  const char* name = NULL;
  const char* sig = NULL;
  PFFuncGetInfo(t->self, &name, &sig, NULL);
  if (name)
    snprintf(buf, n, "typed function '%.200s' %s", name, sig ? sig : "");
  else
    snprintf(buf, n, "typed function %s", sig ? sig : "");
}

static int arity_error(const pf_typed* t, int n) {
  char who[512];
  describe(t, who, sizeof(who));
  return PFErrorSetFormat(kPFErrTypeError, "%s: takes %d argument%s, got %d", who,
                          t->sig.num_args, t->sig.num_args == 1 ? "" : "s", n);
}

static int arg_error(const pf_typed* t, pf_conv c, int i, int code, const PFValue* v) {
  char who[512], what[32];
  describe(t, who, sizeof(who));
  snprintf(what, sizeof(what), "argument %d", i);
  return pf_conv_error(c, who, what, t->sig.args[i], code, v);
}

static void call_ffi(const pf_typed* t, pf_cvalue* av, pf_cvalue* rv, PFByteArray* ba) {
  void* ptrs[PF_TYPED_MAX_ARGS];
  pf_cret raw;
  for (int i = 0; i < t->sig.num_args; ++i) ptrs[i] = &av[i];
  ffi_call((ffi_cif*)&t->cif, t->fn, &raw, ptrs);
  switch (t->sig.ret) {
    case pf_t_void: break;
    /* libffi widens an integral result narrower than a register to a
     * whole ffi_arg, signed or not as the type is. */
#define INT_RESULT_(id, name, ctype, member, ffi, rcode, lo, hi)              \
  case pf_t_##id:                                                             \
    if (sizeof(ctype) < sizeof(ffi_arg))                                      \
      rv->member = (lo) < 0 ? (ctype)raw.sa : (ctype)raw.a;                   \
    else                                                                      \
      rv->member = raw.v.member;                                              \
    break;
    PF_SIG_INT_TYPES(INT_RESULT_)
#undef INT_RESULT_
    case pf_t_bytes: *ba = raw.ba; break;
    default: *rv = raw.v; break;
  }
}

static int set_return(const pf_typed* t, PFRetValueHandle ret, const pf_cvalue* r,
                      const PFByteArray* ba) {
  if (t->sig.ret == pf_t_void) return 0;
  PFValue v;
  int code;
  pf_cvalue c = *r;
  if (t->sig.ret == pf_t_bytes) c.by = ba; /* returned by value */
  if (pf_c_to_packed(t->sig.ret, &c, &v, &code) != 0) {
    char who[512];
    describe(t, who, sizeof(who));
    pf_c_to_packed_error(who, "result", t->sig.ret, &c);
    /* A live object of the wrong type still came with a reference: drop
     * it, keeping the error (its finalizer may record others). */
    if (pf_ctype_is_ref(t->sig.ret) && pf_is_object(c.o, 0)) {
      pf_saved_error saved;
      pf_error_save(&saved);
      pf_object_release(c.o);
      pf_error_restore(&saved);
    }
    return -1;
  }
  if (!pf_code_is_handle(code)) return PFCFuncSetReturn(ret, &v, &code, 1);
  /* A func, array, map, shape or object: the C function handed us a
   * reference; the return slot takes its own. */
  int st = PFCFuncSetReturn(ret, &v, &code, 1);
  /* The release may run the function's finalizer: keep a failure's error. */
  pf_saved_error saved;
  if (st != 0) pf_error_save(&saved);
  pf_object_release(r->o);
  if (st != 0) pf_error_restore(&saved);
  return st;
}

/* The packed function of a typed function without a simple signature
 * (see k_simple), and of any call of one that does not match it exactly:
 * conversions, libffi, other results, errors. */
__attribute__((noinline)) static int typed_call_general(PFValue* args, int* codes, int n,
                                                        PFRetValueHandle ret, void* res) {
  const pf_typed* t = res;
  if (__builtin_expect(n != t->sig.num_args, 0)) return arity_error(t, n);
  pf_cvalue av[PF_TYPED_MAX_ARGS];
  for (int i = 0; i < n; ++i) {
    int at = t->sig.args[i], code = codes[i];
    /* The exact matches of the common types skip the general conversion. */
    if (at == pf_t_int64 && code == kPFInt) {
      av[i].i64 = args[i].v_int64;
    } else if (at == pf_t_float64 && code == kPFFloat) {
      av[i].f64 = args[i].v_float64;
    } else {
      pf_conv c = pf_packed_to_c(at, code, &args[i], &av[i], 0);
      if (c != pf_conv_ok) return arg_error(t, c, i, code, &args[i]);
    }
  }
  pf_cvalue rv;
  PFByteArray ba = {NULL, 0};
  rv.i64 = 0;
  if (t->fast) {
    /* The converted values, 8 bytes each as the fast callers read them
     * (pf_cvalue and PFValue have one size: see the asserts above). */
    PFValue pv[PF_TYPED_MAX_ARGS];
    memcpy(pv, av, sizeof(PFValue) * (size_t)n);
    t->fast(t->fn, pv, &rv);
  } else
    call_ffi(t, av, &rv, &ba);
  if (t->sig.ret == pf_t_int64 || t->sig.ret == pf_t_float64) {
    int code = t->sig.ret == pf_t_int64 ? kPFInt : kPFFloat;
    return PFCFuncSetReturn(ret, (PFValue*)&rv, &code, 1);
  }
  return set_return(t, ret, &rv, &ba);
}

/* The simple path's packed function for t's signature (see k_simple), or
 * NULL when it is not simple. */
static PFPackedCFunc pick_simple(const pf_typed* t) {
#ifdef PF_TYPED_FAST
  if (t->fast == NULL || t->sig.num_args > PF_FAST_MAX_ARGS) return NULL;
  int r = t->sig.ret;
  int rk = r == pf_t_void ? 0 : r == pf_t_int64 ? 1 : r == pf_t_float64 ? 2 : -1;
  if (rk < 0) return NULL;
  int bits = 0;
  for (int i = 0; i < t->sig.num_args; ++i) {
    int a = t->sig.args[i];
    if (a != pf_t_int64 && a != pf_t_float64) return NULL;
    bits = (bits << 1) | (a == pf_t_float64);
  }
  return k_simple[rk][(1 << t->sig.num_args) - 1 + bits];
#else
  (void)t;
  return NULL;
#endif
}

static void typed_free(void* res) { pf_free(res); }

int PFFuncCreateFromTyped(void* fn, const char* signature, PFFunctionHandle* out) {
  static const char* const where = "PFFuncCreateFromTyped";
  PF_CHECK_ARG(fn);
  PF_CHECK_ARG(signature);
  PF_CHECK_ARG(out);
  pf_sig sig;
  if (pf_sig_parse(where, signature, &sig) != 0) return -1;
  pf_typed* t = pf_calloc(1, sizeof(*t));
  if (t == NULL) return pf_oom(where);
  t->fn = (pf_fn)fn;
  t->sig = sig;
  if (pf_sig_prep_cif(where, &sig, &t->cif, t->atypes) != 0) {
    pf_free(t);
    return -1;
  }
  t->fast = pick_fast(&sig);
  PFPackedCFunc simple = pick_simple(t);
  char* canon = pf_sig_format(&sig);
  if (canon == NULL) {
    pf_free(t);
    return pf_oom(where);
  }
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(simple ? simple : typed_call_general, t, typed_free, &f) != 0) {
    /* typed_free ran */
    pf_free(canon);
    return -1;
  }
  t->self = f;
  int st = PFFuncSetInfo(f, NULL, canon, NULL);
  /* `fn` runs at every call: keep its library loaded while `f` lives. */
  if (st == 0) st = pf_object_hold_code(f, fn, where);
  pf_free(canon);
  if (st != 0) {
    PFFuncFree(f);
    return -1;
  }
  *out = f;
  return 0;
}

static pf_typed* typed_of(PFFunctionHandle func) {
  if (!pf_is_object(func, kPFObjectFunction)) return NULL;
  pf_function* f = func;
  return f->fin == typed_free ? f->resource : NULL;
}

int pf_typed_path(PFFunctionHandle func) {
  pf_typed* t = typed_of(func);
  return t == NULL ? 0 : t->fast ? 1 : 2;
}

int pf_typed_force_ffi(PFFunctionHandle func) {
  pf_typed* t = typed_of(func);
  if (t == NULL) return -1;
  t->fast = NULL;
  ((pf_function*)func)->func = typed_call_general; /* not the simple path's */
  return 0;
}
