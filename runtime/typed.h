/* Private to the runtime: signature types, their grammar and their conversions,
 * shared by signature.c, convert.c, typed.c and closure.c. */
#ifndef PACKEDFUNC_RUNTIME_TYPED_H_
#define PACKEDFUNC_RUNTIME_TYPED_H_

#include <float.h>
#include <stdbool.h>
#include <stdint.h>

#include <ffi.h>

#include "internal.h"

/*
 * The one list of signature types: the grammar's names and how each type
 * converts. Everything per type (the enum, the names, the libffi types, the
 * accepted type codes and ranges, the result codes, the reads and writes of
 * C values) is generated from these rows; PFSignatureTypeInfo hands the
 * names and result codes to bindings and tools. Adding a type means a row
 * here, its conversion in convert.c when it is one of the "other" types, a
 * test, and the README's table.
 *
 * The C types are signature.h's (PF_SIGNATURE_C_TYPES), the public list that
 * checked registrations read too; signature.c checks that the two lists
 * name the same types in the same order.
 *
 * Integers and bool take kPFInt or kPFBool and are range-checked:
 *   X(id, name, C type, pf_cvalue member, libffi type, result code, lowest, highest)
 * Floating point takes kPFFloat, kPFInt or kPFBool (exact ints only):
 *   X(id, name, C type, pf_cvalue member, libffi type, largest finite value)
 * The others convert by code of their own:
 *   X(id, name, pf_cvalue member, libffi type as an argument, result code)
 * `void` (result only) comes first, outside the lists. `any` (last) has no C
 * type: it describes a packed function's parameter in metadata only, and
 * whatever needs a C type refuses it (pf_sig_refuse_any).
 */
#define PF_SIG_INT_TYPES(X)                                                                   \
  X(int8, "int8", PFSignatureArg_int8, i8, ffi_type_sint8, kPFInt, INT8_MIN, INT8_MAX)        \
  X(int16, "int16", PFSignatureArg_int16, i16, ffi_type_sint16, kPFInt, INT16_MIN, INT16_MAX) \
  X(int32, "int32", PFSignatureArg_int32, i32, ffi_type_sint32, kPFInt, INT32_MIN, INT32_MAX) \
  X(int64, "int64", PFSignatureArg_int64, i64, ffi_type_sint64, kPFInt, INT64_MIN, INT64_MAX) \
  X(uint8, "uint8", PFSignatureArg_uint8, u8, ffi_type_uint8, kPFInt, 0, UINT8_MAX)           \
  X(uint16, "uint16", PFSignatureArg_uint16, u16, ffi_type_uint16, kPFInt, 0, UINT16_MAX)     \
  X(uint32, "uint32", PFSignatureArg_uint32, u32, ffi_type_uint32, kPFInt, 0, UINT32_MAX)     \
  X(uint64, "uint64", PFSignatureArg_uint64, u64, ffi_type_uint64, kPFInt, 0, UINT64_MAX)     \
  X(bool, "bool", PFSignatureArg_bool, b, ffi_type_uint8, kPFBool, 0, 1)
#define PF_SIG_FLOAT_TYPES(X)                                                 \
  X(float32, "float32", PFSignatureArg_float32, f32, ffi_type_float, FLT_MAX) \
  X(float64, "float64", PFSignatureArg_float64, f64, ffi_type_double, DBL_MAX)
#define PF_SIG_OTHER_TYPES(X)                                 \
  X(str, "str", s, ffi_type_pointer, kPFStr)                  \
  X(bytes, "bytes", by, ffi_type_pointer, kPFBytes)           \
  X(ptr, "ptr", p, ffi_type_pointer, kPFOpaqueHandle)         \
  X(tensor, "tensor", t, ffi_type_pointer, kPFDLTensorHandle) \
  X(dtype, "dtype", dt, pf_ffi_dtype, kPFDataType)            \
  X(device, "device", dev, pf_ffi_device, kPFDevice)          \
  X(func, "func", fn, ffi_type_pointer, kPFFuncHandle)        \
  X(array, "array", o, ffi_type_pointer, kPFObjectHandle)     \
  X(map, "map", o, ffi_type_pointer, kPFObjectHandle)         \
  X(shape, "shape", o, ffi_type_pointer, kPFObjectHandle)     \
  X(object, "object", o, ffi_type_pointer, kPFObjectHandle)   \
  X(list, "list", o, ffi_type_pointer, kPFObjectHandle)       \
  X(dict, "dict", o, ffi_type_pointer, kPFObjectHandle)       \
  X(any, "any", p, ffi_type_pointer, kPFNull)

typedef enum {
  pf_t_void,
#define PF_SIG_ENUM_INT_(id, name, ctype, member, ffi, rcode, lo, hi) pf_t_##id,
#define PF_SIG_ENUM_FLOAT_(id, name, ctype, member, ffi, max) pf_t_##id,
#define PF_SIG_ENUM_OTHER_(id, name, member, ffi, rcode) pf_t_##id,
  PF_SIG_INT_TYPES(PF_SIG_ENUM_INT_) PF_SIG_FLOAT_TYPES(PF_SIG_ENUM_FLOAT_)
      PF_SIG_OTHER_TYPES(PF_SIG_ENUM_OTHER_)
#undef PF_SIG_ENUM_INT_
#undef PF_SIG_ENUM_FLOAT_
#undef PF_SIG_ENUM_OTHER_
          pf_t_count, /* the named types: PFSignatureTypeInfo's table */
  /* obj<KEY>: an instance of the registered type KEY (object_type.h),
   * passed as an object handle. Outside the named table: each use names
   * its type, which the signature keeps beside it. */
  pf_t_obj = pf_t_count,
  /* optional<T> and union<T1, T2, ...>: nodes of a type tree only
   * (pf_tnode); the position they describe takes their carrier's C type. */
  pf_t_optional,
  pf_t_union,
  pf_t_all
} pf_ctype;

/* The registered object type of an obj<KEY> position (object_type.h). */
struct pf_type;

/* A tensor's constraint (tensor.h), in 8 bytes: the flags of
 * PFTensorConstraint, and each part that a flag sets. */
typedef struct {
  DLDataType dtype;
  int8_t ndim;
  uint8_t flags;
  uint8_t device; /* a DLDeviceType: all of them are below 256 */
  uint8_t unused;
} pf_tc;

/* One node of a type tree: a type with element types (array<T>, list<T>,
 * map<K,V>, dict<K,V>, optional<T>, union<T1,...>) or one of those
 * element types. A signature keeps its trees' nodes in one array; a node
 * names its element types by index (first, then each one's next), -1 for
 * none. */
typedef struct pf_tnode {
  uint8_t t;       /* a pf_ctype: a named type, obj, optional or union */
  uint8_t carrier; /* the C type its values take: its own for a named type
                      and obj; for optional and union, the one C type of
                      every member that is a pointer (NULL for null), else
                      pf_t_any (no C type: metadata only) */
  uint8_t nkids;   /* the number of element types */
  int8_t first, next;
  pf_tc tc;                  /* a tensor's constraint, or the carrier's */
  const struct pf_type* obj; /* obj<KEY>'s type, or the carrier's */
} pf_tnode;

/* A signature's type trees hold at most this many nodes, nested at most
 * PF_SIGNATURE_DEPTH_MAX (signature.h) levels. */
#define PF_SIG_NODES_MAX 64

typedef struct {
  uint8_t ret;
  uint8_t num_args;
  uint8_t args[PF_TYPED_MAX_ARGS];
  /* For each obj<KEY> position, KEY's type (registered types are never
   * freed); NULL elsewhere. */
  const struct pf_type* ret_obj;
  const struct pf_type* arg_obj[PF_TYPED_MAX_ARGS];
  /* For each tensor position, its constraint (flags 0: any tensor). */
  pf_tc ret_tc;
  pf_tc arg_tc[PF_TYPED_MAX_ARGS];
  /* For each position with a type tree, its root in `nodes`; -1 for the
   * others (their type is args[i] alone). `nodes` lives in the
   * pf_siginfo the signature was parsed into (NULL when it has no tree). */
  int8_t ret_et;
  int8_t arg_et[PF_TYPED_MAX_ARGS];
  const pf_tnode* nodes;
} pf_sig;

/* Whether any position of `sig` has a type tree. */
static inline int pf_sig_has_tree(const pf_sig* sig) { return sig->nodes != NULL; }

/* A parsed signature with all it says: the types (sig) for calls, and the
 * public tables (PFSignatureInfo, one PFParamInfo per parameter) with the
 * names, defaults and canonical texts, in one block from pf_malloc that
 * pf_siginfo_free frees. Immutable once made. */
typedef struct {
  PFParamInfo pub;
  PFByteArray bytes; /* a bytes default: pub.default_value points here */
} pf_param;
typedef struct pf_siginfo {
  PFSignatureInfo pub; /* first: a PFSignatureInfo* of the runtime's is one */
  pf_sig sig;
  pf_param result;
  const PFParamInfo* ptrs[PF_TYPED_MAX_ARGS];
  /* Each parameter's name_key (0 when unnamed), for keyword calls. */
  uint64_t name_keys[PF_TYPED_MAX_ARGS];
  pf_param params[]; /* sig.num_args of them; then the type trees' nodes
                        (sig.nodes), their public descriptions (PFTypeInfo:
                        one per node and one per position without a tree)
                        and element type pointers; then the strings */
} pf_siginfo;

/* One C value of any signature type; 8 bytes, so `bytes` returns (a
 * PFByteArray by value) live beside it in pf_cret. */
typedef union {
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  float f32;
  double f64;
  bool b;
  const char* s;
  const PFByteArray* by;
  void* p;
  DLTensor* t;
  DLDataType dt;
  DLDevice dev;
  PFFunctionHandle fn;
  PFObjectHandle o;
} pf_cvalue;

/* Result of converting a packed value to a C value of a signature type. */
typedef enum {
  pf_conv_ok = 0,
  pf_conv_type,     /* the type code is not accepted for this type (TypeError) */
  pf_conv_range,    /* the value does not fit the type (ValueError) */
  pf_conv_dead,     /* a handle that is not a live object (TypeError) */
  pf_conv_object,   /* a live object of another object type (TypeError) */
  pf_conv_readonly, /* a read-only tensor object for a (writable) tensor (TypeError) */
  pf_conv_tdtype,   /* a tensor of another dtype than its constraint's (TypeError) */
  pf_conv_tshape    /* a tensor of another rank, layout or device (ValueError) */
} pf_conv;

/* The types whose values are references: func, and the object types
 * array, map, shape, list, dict and object. A C function that returns one
 * transfers a reference, and a packed result of one carries a reference
 * out. */
static inline int pf_ctype_is_ref(int t) {
  return t == pf_t_func || t == pf_t_array || t == pf_t_map || t == pf_t_shape || t == pf_t_list ||
         t == pf_t_dict || t == pf_t_object || t == pf_t_obj;
}
/* The object type a value of type `t` must be (0: any object), for the
 * reference types other than func. */
static inline uint32_t pf_ctype_object_type(int t) {
  return t == pf_t_array   ? kPFObjectArray
         : t == pf_t_map   ? kPFObjectMap
         : t == pf_t_shape ? kPFObjectShape
         : t == pf_t_list  ? kPFObjectList
         : t == pf_t_dict  ? kPFObjectDict
                           : 0;
}

/* ---- signatures (runtime/signature.c) ---- */

/* What the runtime knows of each signature type, from the lists above:
 * its canonical name, its libffi type as an argument, the packed type code
 * of its values (kPFNull for void), and its range: lo and hi for the
 * integers, max (the largest finite value) for floating point. Indexed by
 * pf_ctype. */
typedef struct {
  const char* name;
  ffi_type* ffi;
  int result_code;
  int64_t lo;
  uint64_t hi;
  double max;
} pf_ctype_info;
PF_HIDDEN extern const pf_ctype_info pf_ctypes[pf_t_all];
/* The canonical name of a type, e.g. "int64"; for obj<KEY> (when `obj` is
 * its type) "obj<KEY>"; "?" outside the table. */
PF_HIDDEN const char* pf_ctype_name(int t, const struct pf_type* obj);
/* Parses `text` (the whole grammar: names, defaults and constraints
 * included) into *out, the types a call needs. On failure records a
 * ValueError (or TypeError for NULL) whose message begins with `where` and
 * points at the offending position, and returns -1. An obj<KEY> resolves
 * KEY through pf_type_resolve (object_type.h). Allocates nothing unless it
 * records an error. */
PF_HIDDEN int pf_sig_parse(const char* where, const char* text, pf_sig* out);
/* As pf_sig_parse, and makes the whole parsed signature: *out is a new
 * block (pf_siginfo_free). -1 with the parse error, or a MemoryError
 * naming `where`. */
PF_HIDDEN int pf_siginfo_parse(const char* where, const char* text, pf_siginfo** out);
PF_HIDDEN void pf_siginfo_free(pf_siginfo* info);
/* 0 when, for the result and each parameter of the signature `text` that
 * has a named type, `recorded` (a PF_SIGNATURE_C_TYPES_TEXT that a checked
 * registration was compiled with) gives that type the C types this library
 * gives it; else -1 with a ValueError "WHO was checked against a header
 * whose TYPE is ..." naming the first type that differs, where `who` names
 * the entry point and what was checked ("PFModLoadFromFile: module 'M':
 * function F", "...: object type 'K': method 'M'"). */
PF_HIDDEN int pf_sig_check_c_types(const char* who, const char* text, const char* recorded);
/* 0 when no parameter or result of `sig` is `any`; else -1 with a
 * ValueError naming `where`, the text and the first such position: a typed
 * C function, a C function pointer and a field need C types. */
PF_HIDDEN int pf_sig_refuse_any(const char* where, const char* text, const pf_sig* sig);
/* The first 8 bytes of a name, NUL-padded, as one integer; *has_rest set
 * when the name fills all 8 (then what follows must be compared too, even
 * when it is empty: "interval" and "interval_ms" have one key). A keyword
 * matches a parameter when their keys are equal and, when the keyword has
 * a rest, the rests are equal. */
static inline uint64_t pf_name_key(const char* s, int* has_rest) {
  uint64_t k = 0;
  int i = 0;
  for (; i < 8 && s[i] != '\0'; ++i) k |= (uint64_t)(unsigned char)s[i] << (8 * i);
  *has_rest = i == 8;
  return k;
}
/* The canonical text of `info` without the parameters whose bits are set
 * in `drop` (bit i: parameter i), as a new pf_malloc'd string; NULL on
 * allocation failure (no error recorded). The rest keep their names,
 * defaults and constraints (defaults stay trailing). */
PF_HIDDEN char* pf_siginfo_text_without(const pf_siginfo* info, uint32_t drop);
/* Parses `text` as one type of the grammar, void included (a field's
 * type): its pf_ctype (the carrier, for a type with a tree) and, for
 * obj<KEY>, KEY's type. A type with element types, optional or union also
 * gets *tree, the signature "void(TYPE)" parsed (pf_siginfo_free), whose
 * parameter 0 has the tree and the canonical text; else *tree is NULL. A
 * tensor constraint outside a tree is refused (a field is any tensor). Errors as pf_sig_parse's, with "bad
 * type" for "bad signature". */
PF_HIDDEN int pf_sig_parse_type(const char* where, const char* text, int* t,
                                const struct pf_type** obj, struct pf_siginfo** tree);
/* Parses `text` as a tensor type ("tensor" or "tensor<...>") into *out;
 * errors as pf_sig_parse_type's, and a ValueError for another type. */
PF_HIDDEN int pf_tc_parse(const char* where, const char* text, pf_tc* out);
/* Writes the canonical text of a tensor type with constraint `tc`
 * ("tensor", "tensor<float64,1>") to buf[0 .. n), cut to fit. */
PF_HIDDEN void pf_tc_format(const pf_tc* tc, char* buf, size_t n);
/* The public form of a constraint. */
PF_HIDDEN PFTensorConstraint pf_tc_public(const pf_tc* tc);
/* Fills `atypes` and prepares `cif` for `sig`; -1 with an error on failure. */
PF_HIDDEN int pf_sig_prep_cif(const char* where, const pf_sig* sig, ffi_cif* cif,
                              ffi_type** atypes);

/* ---- conversions (runtime/convert.c) ---- */
/*
 * A typed function converts its packed arguments to C values and its C
 * result back; a closure (a C function pointer over a packed function)
 * converts its C arguments to packed values and the packed result back to
 * C. Both directions go through pf_cvalue: between packed values and C
 * values here, between C values and the storage libffi reads and writes
 * in the inline functions after (pf_cvalue_load, pf_ffi_ret_load,
 * pf_ffi_ret_store).
 */

/* Converts a packed (code, value) to C type `t` (`obj`: KEY's type when t
 * is obj<KEY>, else NULL; so for every function below). `allow_null_str`
 * lets kPFNull stand for a NULL str or bytes (closure results, fields);
 * arguments of typed functions do not allow it. Records no error. */
PF_HIDDEN pf_conv pf_packed_to_c(int t, const struct pf_type* obj, int code, const PFValue* v,
                                 pf_cvalue* out, int allow_null_str);
/* Records the error for a failed conversion: "<who>: <what>: expected T,
 * got ..." with kind TypeError or ValueError. Returns -1.
 * This and pf_c_to_packed_error (and a typed call's argument count check)
 * record no traceback line: they are the exception to the rule at PF_ERROR
 * (base.h), a call's argument errors, named by the message alone. */
PF_HIDDEN int pf_conv_error(pf_conv c, const char* who, const char* what, int t,
                            const struct pf_type* obj, int code, const PFValue* v);
/* As pf_conv_error, for a type with a tensor constraint `tc` (NULL or
 * flags 0: none), which the message names as the expected type. */
PF_HIDDEN int pf_conv_error_tc(pf_conv c, const char* who, const char* what, int t,
                               const struct pf_type* obj, const pf_tc* tc, int code,
                               const PFValue* v);
/* Whether tensor `dl` meets constraint `tc`: pf_conv_ok, pf_conv_tdtype
 * or pf_conv_tshape (runtime/tensor.c). Records nothing. */
PF_HIDDEN pf_conv pf_tc_check(const pf_tc* tc, const DLTensor* dl);
/* Records the error for a tensor that does not meet `tc` (pf_tc_check's
 * result `c`): "<who>: <what>: expected tensor<...>, got float64 tensor
 * of rank 2 ..." (no "<who>: " when who is NULL), TypeError or ValueError,
 * with no traceback line (a call's argument error). Returns -1. */
PF_HIDDEN int pf_tc_error(pf_conv c, const char* who, const char* what, const pf_tc* tc,
                          const DLTensor* dl);
/* The name of a DLPack device type ("cpu", "cuda", ...), or NULL. */
PF_HIDDEN const char* pf_device_name(int device_type);
/* Converts a C value of type `t` to a packed value (a closure's argument, a
 * typed function's result), as the table in c_api.h says: a NULL pointer
 * becomes kPFNull. For bytes, `c->by` points to the PFByteArray. Returns
 * -1, recording nothing, for a value that cannot cross (a uint64 above
 * INT64_MAX, bytes with NULL data or of an impossible size, a func, array,
 * map, shape, object or obj<KEY> that is not a live object of its type);
 * pf_c_to_packed_error then records why, naming
 * `who` and `what` ("argument 2", "result"), and returns -1. */
PF_HIDDEN int pf_c_to_packed(int t, const struct pf_type* obj, const pf_cvalue* c, PFValue* v,
                             int* code);
PF_HIDDEN int pf_c_to_packed_error(const char* who, const char* what, int t,
                                   const struct pf_type* obj, const pf_cvalue* c);

/* ---- type trees (runtime/elements.c) ---- */

/* Names the position being converted, for an error: writes the "who"
 * ("typed function 'f' int64(array<int64>)") and the "what" ("argument 0
 * 'xs'", "result"). Called only when an error is recorded. */
typedef void (*pf_tname_fn)(const void* ctx, char* who, size_t who_n, char* what, size_t what_n);

/* Checks the packed value (code, v) against node `idx` of `nodes` and
 * converts it as the grammar's rules say (signature.h): *out and
 * *out_code are the value to pass on. When that is a container made here
 * (an element converted, a List where an array<...> is wanted), *made is
 * its reference, which the caller releases when done with *out; else
 * *made is NULL. On failure records a TypeError or ValueError naming the
 * position (through `name`), the element's index or key and the type
 * wanted, and returns -1; with `name` NULL it records nothing (beyond an
 * allocation failure's MemoryError). */
PF_HIDDEN int pf_tree_convert(const pf_tnode* nodes, int idx, pf_tname_fn name, const void* ctx,
                              int code, const PFValue* v, PFValue* out, int* out_code,
                              PFObjectHandle* made);
/* Writes the canonical text of node `idx` ("map<str,list<int64>>") to
 * buf[0 .. n), cut to fit; returns the length it needs (as snprintf). */
PF_HIDDEN size_t pf_tnode_format(const pf_tnode* nodes, int idx, char* buf, size_t n);

/* ---- libffi's storage of C values ---- */
/* Inline, for each is on every call through libffi, in one direction or
 * the other. */

/* Reads the C value of type `t` stored at `p` as its C type (an argument
 * as libffi hands it to a closure). */
static inline void pf_cvalue_load(int t, const void* p, pf_cvalue* out) {
  switch (t) {
#define INT_LOAD_(id, name, ctype, member, ffi, rcode, lo, hi) \
  case pf_t_##id:                                              \
    out->member = *(const ctype*)p;                            \
    break;
#define FLOAT_LOAD_(id, name, ctype, member, ffi, max) \
  case pf_t_##id:                                      \
    out->member = *(const ctype*)p;                    \
    break;
    PF_SIG_INT_TYPES(INT_LOAD_)
    PF_SIG_FLOAT_TYPES(FLOAT_LOAD_)
#undef INT_LOAD_
#undef FLOAT_LOAD_
    case pf_t_dtype:
      memcpy(&out->dt, p, sizeof(DLDataType));
      break;
    case pf_t_device:
      memcpy(&out->dev, p, sizeof(DLDevice));
      break;
    default:
      out->p = *(void* const*)p;
      break; /* the pointer-like types */
  }
}

/* A result as libffi stores it: an integral result narrower than a
 * register as a whole ffi_arg, signed or not as its type is; a bytes
 * result as a PFByteArray by value (16 bytes); any other as its C type. */
typedef union {
  ffi_arg a;
  ffi_sarg sa;
  pf_cvalue v;
  PFByteArray ba;
} pf_ffi_ret;

/* Reads the result of type `t` that ffi_call stored in `ret`; for bytes,
 * out->by points into `ret`. */
static inline void pf_ffi_ret_load(int t, const pf_ffi_ret* ret, pf_cvalue* out) {
  switch (t) {
    case pf_t_void:
      break;
#define INT_LOAD_(id, name, ctype, member, ffi, rcode, lo, hi)                                    \
  case pf_t_##id:                                                                                 \
    if (sizeof(ctype) < sizeof(ffi_arg)) out->member = (lo) < 0 ? (ctype)ret->sa : (ctype)ret->a; \
    else out->member = ret->v.member;                                                             \
    break;
      PF_SIG_INT_TYPES(INT_LOAD_)
#undef INT_LOAD_
    case pf_t_bytes:
      out->by = &ret->ba;
      break;
    default:
      *out = ret->v;
      break;
  }
}

/* Stores the C value `c` of type `t` at `p` as its C type: the inverse of
 * pf_cvalue_load (a field of a registered type). With `ffi_ret` (a
 * constant at each caller, so the other branch goes), stores it as libffi
 * expects a closure's result (`p`, at least an ffi_arg): an integral result
 * narrower than an ffi_arg widened to a whole one, and bytes as a
 * PFByteArray by value, a NULL bytes pointer as empty bytes. */
static inline void pf_cvalue_store_as(int t, const pf_cvalue* c, void* p, int ffi_ret) {
  switch (t) {
#define INT_STORE_(id, name, ctype, member, ffi, rcode, lo, hi)                             \
  case pf_t_##id:                                                                           \
    if (!ffi_ret || sizeof(ctype) >= sizeof(ffi_arg)) memcpy(p, &c->member, sizeof(ctype)); \
    else if ((lo) < 0) *(ffi_sarg*)p = c->member;                                           \
    else *(ffi_arg*)p = c->member;                                                          \
    break;
#define FLOAT_STORE_(id, name, ctype, member, ffi, max) \
  case pf_t_##id:                                       \
    memcpy(p, &c->member, sizeof(ctype));               \
    break;
    PF_SIG_INT_TYPES(INT_STORE_)
    PF_SIG_FLOAT_TYPES(FLOAT_STORE_)
#undef INT_STORE_
#undef FLOAT_STORE_
    case pf_t_dtype:
      memcpy(p, &c->dt, sizeof(DLDataType));
      break;
    case pf_t_device:
      memcpy(p, &c->dev, sizeof(DLDevice));
      break;
    case pf_t_bytes:
      if (ffi_ret) {
        PFByteArray ba = {NULL, 0};
        if (c->by) ba = *c->by;
        memcpy(p, &ba, sizeof(ba));
        break;
      }
      memcpy(p, &c->p, sizeof(void*));
      break;
    default:
      memcpy(p, &c->p, sizeof(void*));
      break; /* str, ptr, tensor and the references */
  }
}

static inline void pf_cvalue_store(int t, const pf_cvalue* c, void* p) {
  pf_cvalue_store_as(t, c, p, 0);
}

/* Stores `v` as a closure's result of type `t` where libffi expects it
 * (`ret`, at least an ffi_arg): see pf_cvalue_store_as. */
static inline void pf_ffi_ret_store(int t, const pf_cvalue* v, void* ret) {
  pf_cvalue_store_as(t, v, ret, 1);
}

/* ---- typed functions (runtime/typed.c) ---- */

/* Test and benchmark hooks for typed functions (not API):
 * pf_typed_path: 1 when `func` calls through a direct cast, 2 through
 * libffi, 0 when it is not a typed function.
 * pf_typed_force_ffi: makes a typed function take the libffi path from now
 * on; not safe while another thread calls it. Returns 0, or -1 when `func`
 * is not a typed function. */
PF_HIDDEN int pf_typed_path(PFFunctionHandle func);
PF_HIDDEN int pf_typed_force_ffi(PFFunctionHandle func);

#endif
