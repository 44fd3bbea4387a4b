/* Private to the runtime: typed signatures shared by typed.c and closure.c. */
#ifndef PACKEDFUNC_RUNTIME_TYPED_H_
#define PACKEDFUNC_RUNTIME_TYPED_H_

#include <stdbool.h>
#include <stdint.h>

#include <ffi.h>

#include "internal.h"

/* The types of the signature grammar. The order is the order of the names
 * table in typed.c. */
typedef enum {
  pf_t_void,
  pf_t_int8,
  pf_t_int16,
  pf_t_int32,
  pf_t_int64,
  pf_t_uint8,
  pf_t_uint16,
  pf_t_uint32,
  pf_t_uint64,
  pf_t_float32,
  pf_t_float64,
  pf_t_bool,
  pf_t_str,
  pf_t_bytes,
  pf_t_ptr,
  pf_t_tensor,
  pf_t_dtype,
  pf_t_device,
  pf_t_func,
  pf_t_count
} pf_ctype;

typedef struct {
  uint8_t ret;
  uint8_t num_args;
  uint8_t args[PF_TYPED_MAX_ARGS];
} pf_sig;

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
} pf_cvalue;

/* Result of converting a packed value to a C value of a signature type. */
typedef enum {
  pf_conv_ok = 0,
  pf_conv_type,  /* the type code is not accepted for this type (TypeError) */
  pf_conv_range, /* the value does not fit the type (ValueError) */
  pf_conv_dead   /* a function handle that is not a live function (TypeError) */
} pf_conv;

/* Parses `text` into *out. On failure records a ValueError (or TypeError for
 * NULL) whose message begins with `where` and points at the offending
 * position, and returns -1. */
PF_HIDDEN int pf_sig_parse(const char* where, const char* text, pf_sig* out);
/* Writes the canonical text of `sig` (canonical names, no blanks) to a new
 * pf_malloc'd string; NULL on allocation failure (no error recorded). */
PF_HIDDEN char* pf_sig_format(const pf_sig* sig);
/* The canonical name of a type, e.g. "int64". */
PF_HIDDEN const char* pf_ctype_name(int t);
/* The libffi description of a type. */
PF_HIDDEN ffi_type* pf_ctype_ffi(int t);
/* Fills `atypes` and prepares `cif` for `sig`; -1 with an error on failure. */
PF_HIDDEN int pf_sig_prep_cif(const char* where, const pf_sig* sig, ffi_cif* cif,
                              ffi_type** atypes);

/* Converts a packed (code, value) to C type `t`. `allow_null_str` lets
 * kPFNull stand for a NULL str (closure results); arguments of typed
 * functions do not allow it. Records no error. */
PF_HIDDEN pf_conv pf_packed_to_c(int t, int code, const PFValue* v, pf_cvalue* out,
                                 int allow_null_str);
/* Records the error for a failed conversion: "<who>: <what>: expected T,
 * got ..." with kind TypeError or ValueError. Returns -1. */
PF_HIDDEN int pf_conv_error(pf_conv c, const char* who, const char* what, int t, int code,
                            const PFValue* v);

/* Test and benchmark hooks for typed functions (not API):
 * pf_typed_path: 1 when `func` calls through a direct cast, 2 through
 * libffi, 0 when it is not a typed function.
 * pf_typed_force_ffi: makes a typed function take the libffi path from now
 * on; not safe while another thread calls it. Returns 0, or -1 when `func`
 * is not a typed function. */
PF_HIDDEN int pf_typed_path(PFFunctionHandle func);
PF_HIDDEN int pf_typed_force_ffi(PFFunctionHandle func);

#endif
