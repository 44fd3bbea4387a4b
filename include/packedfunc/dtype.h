/*
 * packedfunc — data types: the DLPack 1.1 type codes that an older
 * <dlpack/dlpack.h> lacks, and the one text form of a DLDataType, which
 * every host (the Python binding, the pf command) reads and writes through
 * these two entry points instead of a parser of its own.
 */
#ifndef PACKEDFUNC_DTYPE_H_
#define PACKEDFUNC_DTYPE_H_

#include "packedfunc/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* DLPack 1.1 type codes                                                     */
/* ------------------------------------------------------------------------ */

/* DLDataTypeCode values that DLPack added after 0.6, defined here by their
 * fixed numbers when the installed dlpack.h predates them (Debian's is
 * 0.6): kDLBool since DLPack 0.8, the float8, float6 and float4 codes
 * since 1.1. A newer dlpack.h defines them itself, with the same numbers.
 * Their natural bit widths: kDLBool 8 (one byte per element), float8 8,
 * float6 6, float4 4 (sub-byte elements are packed, see pf_dtype_bytes in
 * the runtime). */
#if !defined(DLPACK_MAJOR_VERSION) && (!defined(DLPACK_VERSION) || DLPACK_VERSION < 80)
enum { kDLBool = 6 };
#endif
#if !defined(DLPACK_MAJOR_VERSION) || (DLPACK_MAJOR_VERSION == 1 && DLPACK_MINOR_VERSION < 1)
enum {
  kDLFloat8_e3m4 = 7,
  kDLFloat8_e4m3 = 8,
  kDLFloat8_e4m3b11fnuz = 9,
  kDLFloat8_e4m3fn = 10,
  kDLFloat8_e4m3fnuz = 11,
  kDLFloat8_e5m2 = 12,
  kDLFloat8_e5m2fnuz = 13,
  kDLFloat8_e8m0fnu = 14,
  kDLFloat6_e2m3fn = 15,
  kDLFloat6_e3m2fn = 16,
  kDLFloat4_e2m1fn = 17
};
#endif

/* ------------------------------------------------------------------------ */
/* Data types as text                                                        */
/* ------------------------------------------------------------------------ */

/*
 * The text of a DLDataType (ASCII, case-sensitive, no blanks):
 *
 *   dtype  := base [ "x" LANES ]      LANES: 1 to 65535, in decimal
 *   base   := "bool"                  kDLBool, 8 bits
 *           | KIND [ BITS ]           BITS: 0 to 255, in decimal; without
 *                                     them 32 bits (handle: 64)
 *           | SHORT BITS              the bits are required
 *           | FLOAT8 | FLOAT6 | FLOAT4   their bits are fixed: 8, 6, 4
 *           | "custom[" CODE "]" BITS    any code 0 to 255 (how a code
 *                                        without a name is written)
 *   KIND   := "int" | "uint" | "float" | "bfloat" | "complex" | "handle"
 *           | "bool"                  (with bits: kDLBool of that width)
 *   SHORT  := "i" | "u" | "f" | "bf"  int, uint, float, bfloat: "i8" is
 *                                     int8 (numpy's "i1"), "f16", "bf16"
 *   FLOAT8 := F8 ["_"] ( "e3m4" | "e4m3" | "e4m3b11fnuz" | "e4m3fn"
 *                      | "e4m3fnuz" | "e5m2" | "e5m2fnuz" | "e8m0fnu" )
 *   FLOAT6 := F6 ["_"] ( "e2m3fn" | "e3m2fn" )
 *   FLOAT4 := F4 ["_"] "e2m1fn"      after which "_x" may stand for "x":
 *                                    "float4_e2m1fn_x2" (two float4 lanes,
 *                                    as tvm-ffi writes float4_e2m1fnx2)
 *   F8 := "float8" | "f8" | "fp8", and likewise F6, F4
 *
 * So "float32", "int8x4", "uint1", "bool", "bf16", "f8e4m3fn",
 * "float8_e4m3fn", "fp8_e5m2x4" and "float4_e2m1fnx2" are data types;
 * "float8" alone is kDLFloat with 8 bits, not a float8 code.
 *
 * The canonical text, which PFDataTypeToString writes: "bool" for kDLBool
 * of 8 bits; the KIND name and the bits for codes 0 to 6 ("int32",
 * "handle64", "bool1"); the long name for the DLPack 1.1 float codes at
 * their natural width ("float8_e4m3fn"); "custom[C]B" for any other code,
 * or a float8/6/4 code of another width; then "xL" when there are L > 1
 * lanes. Every DLDataType with 1 lane or more has a text, and
 * PFDataTypeFromString reads it back to the same value.
 */

/* The room that any data type's canonical text needs, with its NUL. */
#define PF_DTYPE_STRING_MAX 32

/* Parses `text` (see above) into *out.
 * Errors: NULL text or out (TypeError); a text that is not a data type,
 * bits above 255, lanes 0 or above 65535 (ValueError naming the text).
 * *out is written only on success. Thread-safe; allocates nothing unless
 * it records an error. */
PF_EXPORT int PFDataTypeFromString(const char* text, DLDataType* out);

/* Writes the canonical text of `dtype` (see above), NUL-terminated, to
 * buf[0 .. size); PF_DTYPE_STRING_MAX bytes always suffice.
 * Errors: NULL buf (TypeError); a dtype with 0 lanes, which has no text,
 * or a size too small for the text (ValueError naming the size needed).
 * buf is written only on success. Thread-safe; allocates nothing unless it
 * records an error. */
PF_EXPORT int PFDataTypeToString(DLDataType dtype, char* buf, size_t size);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_DTYPE_H_ */
