/* Conversions of signature types between packed values and C values, and their errors. */
#include <math.h>
#include <stdio.h>

#include "object_type.h"

_Static_assert(sizeof(pf_cvalue) == 8, "a C value fits in 8 bytes");
_Static_assert(sizeof(pf_cvalue) == sizeof(PFValue) && _Alignof(pf_cvalue) == _Alignof(PFValue),
               "an int64 or float64 result passes as a PFValue");

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

/* An int or bool for the integer type `t`, in its range. */
static pf_conv to_int(int t, int code, const PFValue* v, int64_t* x) {
  if (code != kPFInt && code != kPFBool) return pf_conv_type;
  *x = code == kPFBool ? (v->v_int64 != 0) : v->v_int64;
  if (*x < pf_ctypes[t].lo || (*x > 0 && (uint64_t)*x > pf_ctypes[t].hi)) return pf_conv_range;
  return pf_conv_ok;
}

/* A float, or an int or bool that a double holds exactly, for the floating
 * point type `t`. Narrowing rounds as C does; a finite value beyond the
 * type is an error, infinities and NaN pass. */
static pf_conv to_double(int t, int code, const PFValue* v, double* d) {
  if (code == kPFFloat) {
    *d = v->v_float64;
  } else if (code == kPFInt || code == kPFBool) {
    if (!int_to_double_exact(code == kPFBool ? (v->v_int64 != 0) : v->v_int64, d))
      return pf_conv_range;
  } else {
    return pf_conv_type;
  }
  if (isfinite(*d) && fabs(*d) > pf_ctypes[t].max) return pf_conv_range;
  return pf_conv_ok;
}

pf_conv pf_packed_to_c(int t, const struct pf_type* obj, int code, const PFValue* v, pf_cvalue* out,
                       int allow_null_str) {
  pf_conv c;
  int64_t x;
  double d;
  switch (t) {
#define INT_CASE_(id, name, ctype, member, ffi, rcode, lo, hi)              \
  case pf_t_##id:                                                           \
    if ((c = to_int(t, code, v, &x)) == pf_conv_ok) out->member = (ctype)x; \
    return c;
#define FLOAT_CASE_(id, name, ctype, member, ffi, max)                         \
  case pf_t_##id:                                                              \
    if ((c = to_double(t, code, v, &d)) == pf_conv_ok) out->member = (ctype)d; \
    return c;
    PF_SIG_INT_TYPES(INT_CASE_)
    PF_SIG_FLOAT_TYPES(FLOAT_CASE_)
#undef INT_CASE_
#undef FLOAT_CASE_
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
      if (code == kPFObjectHandle && pf_is_object(v->v_handle, kPFObjectTensor)) {
        /* A DLTensor* argument is writable: a read-only tensor is not one. */
        if (pf_tensor_is_read_only(v->v_handle)) return pf_conv_readonly;
        return PFTensorGetDLTensor(v->v_handle, &out->t) == 0 ? pf_conv_ok : pf_conv_type;
      }
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
    case pf_t_list:
    case pf_t_dict:
    case pf_t_obj:
      if (code == kPFNull) {
        out->o = NULL;
        return pf_conv_ok;
      }
      if (code != kPFObjectHandle) return pf_conv_type;
      if (!pf_is_object(v->v_handle, 0)) return pf_conv_dead;
      if (t == pf_t_obj ? !pf_object_is_a(v->v_handle, obj)
                        : !pf_is_object(v->v_handle, pf_ctype_object_type(t)))
        return pf_conv_object;
      out->o = v->v_handle;
      return pf_conv_ok;
    default:
      return pf_conv_type;
  }
}

static const char* code_name(int code, char* buf, size_t n) {
  const char* s = PFTypeCodeName(code);
  if (s != NULL) return s;
  snprintf(buf, n, "unknown type code %d", code);
  return buf;
}

int pf_conv_error(pf_conv c, const char* who, const char* what, int t, const struct pf_type* obj,
                  int code, const PFValue* v) {
  return pf_conv_error_tc(c, who, what, t, obj, NULL, code, v);
}

int pf_conv_error_tc(pf_conv c, const char* who, const char* what, int t, const struct pf_type* obj,
                     const pf_tc* tc, int code, const PFValue* v) {
  char buf[40], tbuf[96];
  const char* want = pf_ctype_name(t, obj);
  if (t == pf_t_tensor && tc != NULL && tc->flags != 0) {
    pf_tc_format(tc, tbuf, sizeof(tbuf));
    want = tbuf;
  }
  /* A call's arguments or result: the caller's error, with no place (PF_ERROR in base.h). */
  if (c == pf_conv_dead)
    return PFErrorSetFormat(kPFErrTypeError, "%s: %s: expected %s, got %s handle that is not live",
                            who, what, want, t == pf_t_func ? "a function" : "an object");
  if (c == pf_conv_readonly)
    return PFErrorSetFormat(kPFErrTypeError,
                            "%s: %s: expected %s, got a read-only tensor object, whose data "
                            "a DLTensor* argument could write",
                            who, what, want);
  if (c == pf_conv_object) {
    const char* got = PFObjectTypeName(((const pf_object*)v->v_handle)->type_index);
    return PFErrorSetFormat(kPFErrTypeError, "%s: %s: expected %s, got %s object", who, what, want,
                            got ? got : "another");
  }
  if (c != pf_conv_range)
    return PFErrorSetFormat(kPFErrTypeError, "%s: %s: expected %s, got %s", who, what, want,
                            code_name(code, buf, sizeof(buf)));
  if (code == kPFFloat)
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: %s: expected %s, got float %g, which is beyond "
                            "its range of +-%g",
                            who, what, want, v->v_float64, pf_ctypes[t].max);
  long long x = code == kPFBool ? (v->v_int64 != 0) : (long long)v->v_int64;
  if (t == pf_t_bool)
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: %s: expected bool, got int %lld; only 0 and 1 convert to bool",
                            who, what, x);
  if (t == pf_t_float32 || t == pf_t_float64)
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: %s: expected %s, got int %lld, which a double cannot hold exactly",
                            who, what, want, x);
  return PFErrorSetFormat(kPFErrValueError,
                          "%s: %s: expected %s, got int %lld, which is out of "
                          "its range [%lld, %llu]",
                          who, what, want, x, (long long)pf_ctypes[t].lo,
                          (unsigned long long)pf_ctypes[t].hi);
}

/* ---- C value -> packed value ---- */

int pf_c_to_packed(int t, const struct pf_type* obj, const pf_cvalue* c, PFValue* v, int* code) {
  switch (t) {
#define INT_CASE_(id, name, ctype, member, ffi, rcode, lo, hi)                    \
  case pf_t_##id:                                                                 \
    if ((uint64_t)(hi) > INT64_MAX && (uint64_t)c->member > INT64_MAX) return -1; \
    v->v_int64 = (int64_t)c->member;                                              \
    *code = rcode;                                                                \
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
      if ((c->by->data == NULL && c->by->size != 0) || c->by->size > PF_MAX_OBJECT_SIZE) return -1;
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
        case kPFObjectFunction:
          *code = kPFFuncHandle;
          break;
        case kPFObjectModule:
          *code = kPFModuleHandle;
          break;
        default:
          *code = kPFObjectHandle;
          break;
      }
      return 0;
    case pf_t_array:
    case pf_t_map:
    case pf_t_shape:
    case pf_t_list:
    case pf_t_dict:
      if (c->o != NULL && !pf_is_object(c->o, pf_ctype_object_type(t))) return -1;
      break;
    case pf_t_obj:
      if (c->o != NULL && !pf_object_is_a(c->o, obj)) return -1;
      break;
    default: /* str, ptr, tensor */
      break;
  }
  /* The pointer-like types: NULL is null. */
  v->v_handle = c->p;
  *code = c->p ? pf_ctypes[t].result_code : kPFNull;
  return 0;
}

int pf_c_to_packed_error(const char* who, const char* what, int t, const struct pf_type* obj,
                         const pf_cvalue* c) {
  /* A call's arguments or result: the caller's error, with no place (PF_ERROR in base.h). */
  if (t == pf_t_func)
    return PFErrorSetFormat(kPFErrTypeError,
                            "%s: %s: expected func, got a pointer that is not a live function "
                            "handle",
                            who, what);
  if (t == pf_t_obj && pf_is_object(c->o, 0)) {
    const char* got = PFObjectTypeName(((const pf_object*)c->o)->type_index);
    return PFErrorSetFormat(kPFErrTypeError, "%s: %s: expected %s, got %s object", who, what,
                            obj->sig_name, got ? got : "another");
  }
  if (t == pf_t_obj)
    return PFErrorSetFormat(kPFErrTypeError,
                            "%s: %s: expected %s, got a pointer that is not a live object handle",
                            who, what, obj->sig_name);
  if (pf_ctype_is_ref(t))
    return PFErrorSetFormat(kPFErrTypeError,
                            "%s: %s: expected %s, got a pointer that is not a live %s handle", who,
                            what, pf_ctypes[t].name, pf_ctypes[t].name);
  if (t == pf_t_bytes && c->by->data == NULL)
    return PFErrorSetFormat(kPFErrValueError, "%s: %s: bytes of size %zu with NULL data", who, what,
                            c->by->size);
  if (t == pf_t_bytes)
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: %s: bytes of size %zu, larger than any object can be "
                            "(PTRDIFF_MAX bytes)",
                            who, what, c->by->size);
  return PFErrorSetFormat(kPFErrValueError,
                          "%s: %s: %s value %llu does not fit the int64 of a packed value", who,
                          what, pf_ctypes[t].name, (unsigned long long)c->u64);
}
