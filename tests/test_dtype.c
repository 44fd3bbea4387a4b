/* Data types as text: DLPack 1.1's codes, the long and short names, the
 * canonical text, the round trip of every DLDataType, and every bad input. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>

#include "support/pf_test.h"

static DLDataType parse(const char* text) {
  DLDataType dt = {99, 99, 99};
  assert_pf_ok(PFDataTypeFromString(text, &dt));
  return dt;
}

static void assert_dtype(const char* text, int code, int bits, int lanes) {
  DLDataType dt = parse(text);
  if (dt.code != code || dt.bits != bits || dt.lanes != lanes)
    fail_msg("'%s' parsed as {%u, %u, %u}, expected {%d, %d, %d}", text, dt.code, dt.bits, dt.lanes,
             code, bits, lanes);
}

static const char* text_of(DLDataType dt) {
  static char buf[PF_DTYPE_STRING_MAX];
  assert_pf_ok(PFDataTypeToString(dt, buf, sizeof(buf)));
  return buf;
}

/* DLPack 1.1's numbers (dlpack.h, DLDataTypeCode). */
static void test_dlpack_codes(void** state) {
  (void)state;
  assert_int_equal(kDLBool, 6);
  assert_int_equal(kDLFloat8_e3m4, 7);
  assert_int_equal(kDLFloat8_e4m3, 8);
  assert_int_equal(kDLFloat8_e4m3b11fnuz, 9);
  assert_int_equal(kDLFloat8_e4m3fn, 10);
  assert_int_equal(kDLFloat8_e4m3fnuz, 11);
  assert_int_equal(kDLFloat8_e5m2, 12);
  assert_int_equal(kDLFloat8_e5m2fnuz, 13);
  assert_int_equal(kDLFloat8_e8m0fnu, 14);
  assert_int_equal(kDLFloat6_e2m3fn, 15);
  assert_int_equal(kDLFloat6_e3m2fn, 16);
  assert_int_equal(kDLFloat4_e2m1fn, 17);
}

static void test_names(void** state) {
  (void)state;
  assert_dtype("float32", kDLFloat, 32, 1);
  assert_dtype("float", kDLFloat, 32, 1);
  assert_dtype("int", kDLInt, 32, 1);
  assert_dtype("handle", kDLOpaqueHandle, 64, 1);
  assert_dtype("int8x4", kDLInt, 8, 4);
  assert_dtype("uint1", kDLUInt, 1, 1);
  assert_dtype("bfloat16", kDLBfloat, 16, 1);
  assert_dtype("complex64", kDLComplex, 64, 1);
  assert_dtype("bool", kDLBool, 8, 1);
  assert_dtype("boolx4", kDLBool, 8, 4);
  assert_dtype("bool1", kDLBool, 1, 1);
  assert_dtype("float16x65535", kDLFloat, 16, 65535);
  /* Short names: the width in bits. */
  assert_dtype("i8", kDLInt, 8, 1);
  assert_dtype("u16", kDLUInt, 16, 1);
  assert_dtype("f16", kDLFloat, 16, 1);
  assert_dtype("f64x2", kDLFloat, 64, 2);
  assert_dtype("bf16", kDLBfloat, 16, 1);
  /* "float8" alone is an 8-bit IEEE float, not a float8 code. */
  assert_dtype("float8", kDLFloat, 8, 1);
  assert_dtype("f8", kDLFloat, 8, 1);
  assert_dtype("float4x2", kDLFloat, 4, 2);
  /* The DLPack 1.1 floats, long and short. */
  assert_dtype("float8_e3m4", kDLFloat8_e3m4, 8, 1);
  assert_dtype("float8_e4m3", kDLFloat8_e4m3, 8, 1);
  assert_dtype("float8_e4m3b11fnuz", kDLFloat8_e4m3b11fnuz, 8, 1);
  assert_dtype("float8_e4m3fn", kDLFloat8_e4m3fn, 8, 1);
  assert_dtype("float8_e4m3fnuz", kDLFloat8_e4m3fnuz, 8, 1);
  assert_dtype("float8_e5m2", kDLFloat8_e5m2, 8, 1);
  assert_dtype("float8_e5m2fnuz", kDLFloat8_e5m2fnuz, 8, 1);
  assert_dtype("float8_e8m0fnu", kDLFloat8_e8m0fnu, 8, 1);
  assert_dtype("float6_e2m3fn", kDLFloat6_e2m3fn, 6, 1);
  assert_dtype("float6_e3m2fn", kDLFloat6_e3m2fn, 6, 1);
  assert_dtype("float4_e2m1fn", kDLFloat4_e2m1fn, 4, 1);
  assert_dtype("f8e4m3fn", kDLFloat8_e4m3fn, 8, 1);
  assert_dtype("f8_e5m2", kDLFloat8_e5m2, 8, 1);
  assert_dtype("fp8_e5m2x4", kDLFloat8_e5m2, 8, 4);
  assert_dtype("float8e4m3fnx2", kDLFloat8_e4m3fn, 8, 2);
  assert_dtype("f6e3m2fn", kDLFloat6_e3m2fn, 6, 1);
  assert_dtype("fp4_e2m1fn", kDLFloat4_e2m1fn, 4, 1);
  /* float4_e2m1fnx2: two float4 lanes, also spelled with "_x2". */
  assert_dtype("float4_e2m1fnx2", kDLFloat4_e2m1fn, 4, 2);
  assert_dtype("float4_e2m1fn_x2", kDLFloat4_e2m1fn, 4, 2);
  assert_dtype("f4_e2m1fn_x2", kDLFloat4_e2m1fn, 4, 2);
  assert_dtype("custom[200]16x3", 200, 16, 3);
}

static void test_canonical_text(void** state) {
  (void)state;
  assert_string_equal(text_of((DLDataType){kDLFloat, 32, 1}), "float32");
  assert_string_equal(text_of((DLDataType){kDLInt, 8, 4}), "int8x4");
  assert_string_equal(text_of((DLDataType){kDLUInt, 1, 1}), "uint1");
  assert_string_equal(text_of((DLDataType){kDLOpaqueHandle, 64, 1}), "handle64");
  assert_string_equal(text_of((DLDataType){kDLBool, 8, 1}), "bool");
  assert_string_equal(text_of((DLDataType){kDLBool, 8, 2}), "boolx2");
  assert_string_equal(text_of((DLDataType){kDLBool, 1, 1}), "bool1");
  assert_string_equal(text_of((DLDataType){kDLFloat8_e4m3fn, 8, 1}), "float8_e4m3fn");
  assert_string_equal(text_of((DLDataType){kDLFloat8_e4m3b11fnuz, 8, 65535}),
                      "float8_e4m3b11fnuzx65535");
  assert_string_equal(text_of((DLDataType){kDLFloat4_e2m1fn, 4, 2}), "float4_e2m1fnx2");
  assert_string_equal(text_of((DLDataType){kDLFloat6_e2m3fn, 6, 1}), "float6_e2m3fn");
  /* A float8 code of another width, or a code without a name. */
  assert_string_equal(text_of((DLDataType){kDLFloat8_e5m2, 16, 1}), "custom[12]16");
  assert_string_equal(text_of((DLDataType){255, 255, 65535}), "custom[255]255x65535");
  /* The buffer: exactly enough works, one byte less does not. */
  char buf[8] = "ZZZZZZZ";
  assert_pf_ok(PFDataTypeToString((DLDataType){kDLFloat, 32, 1}, buf, 8));
  assert_pf_error(PFDataTypeToString((DLDataType){kDLInt, 8, 4}, buf, 6), kPFErrValueError,
                  "PFDataTypeToString: argument 'size' is 6", "'int8x4' needs 7 bytes");
  assert_string_equal(buf, "float32");
  assert_pf_ok(PFDataTypeToString((DLDataType){kDLInt, 8, 4}, buf, 7));
  assert_string_equal(buf, "int8x4");
}

/* Every DLDataType with lanes reads back from its text as itself. */
static void test_round_trip_of_every_dtype(void** state) {
  (void)state;
  const unsigned lanes[] = {1, 2, 3, 16, 255, 256, 65535};
  char buf[PF_DTYPE_STRING_MAX];
  for (unsigned code = 0; code < 256; ++code)
    for (unsigned bits = 0; bits < 256; ++bits)
      for (size_t l = 0; l < sizeof(lanes) / sizeof(lanes[0]); ++l) {
        DLDataType dt = {(uint8_t)code, (uint8_t)bits, (uint16_t)lanes[l]}, back = {0, 0, 0};
        assert_pf_ok(PFDataTypeToString(dt, buf, sizeof(buf)));
        assert_true(strlen(buf) < PF_DTYPE_STRING_MAX);
        if (PFDataTypeFromString(buf, &back) != 0 || back.code != dt.code || back.bits != dt.bits ||
            back.lanes != dt.lanes)
          fail_msg("{%u, %u, %u} -> '%s' -> {%u, %u, %u}: %s", code, bits, lanes[l], buf, back.code,
                   back.bits, back.lanes, PFGetLastError());
      }
}

static void test_bad_input(void** state) {
  (void)state;
  DLDataType dt = {1, 2, 3};
  const char* bad[] = {"",
                       "float32 ",
                       " int8",
                       "Float32",
                       "int8x",
                       "int8x0",
                       "int8y4",
                       "i",
                       "bf",
                       "fp8",
                       "float8_",
                       "float8_e9",
                       "float8_e4m3fn_x2",
                       "float6_e2m1fn",
                       "custom[]8",
                       "custom[1]",
                       "custom[256]8",
                       "int8x4x4",
                       "float4_e2m1fn_",
                       "int-8",
                       "uint8\n",
                       "bfloat16x"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    if (PFDataTypeFromString(bad[i], &dt) != -1) fail_msg("'%s' was accepted", bad[i]);
    assert_string_equal(PFErrorGetKind(), kPFErrValueError);
    assert_non_null(strstr(PFErrorGetMessage(), "PFDataTypeFromString"));
  }
  assert_pf_error(PFDataTypeFromString("xyz", &dt), kPFErrValueError,
                  "cannot parse 'xyz' as a data type");
  assert_pf_error(PFDataTypeFromString("int256", &dt), kPFErrValueError,
                  "'int256': the bits must be 0 to 255");
  assert_pf_error(PFDataTypeFromString("int8x65536", &dt), kPFErrValueError,
                  "the lanes must be 1 to 65535");
  assert_pf_error(PFDataTypeFromString("int8x0", &dt), kPFErrValueError, "the lanes");
  assert_pf_error(PFDataTypeFromString("int8x99999999999999999999", &dt), kPFErrValueError,
                  "the lanes");
  assert_pf_error(PFDataTypeFromString(NULL, &dt), kPFErrTypeError, "argument 'text' is NULL");
  assert_pf_error(PFDataTypeFromString("int8", NULL), kPFErrTypeError, "argument 'out' is NULL");
  assert_int_equal(dt.code, 1); /* untouched */
  assert_int_equal(dt.bits, 2);
  assert_int_equal(dt.lanes, 3);
  char buf[PF_DTYPE_STRING_MAX] = "untouched";
  assert_pf_error(PFDataTypeToString((DLDataType){kDLInt, 8, 0}, buf, sizeof(buf)),
                  kPFErrValueError, "0 lanes");
  assert_pf_error(PFDataTypeToString((DLDataType){kDLInt, 8, 1}, NULL, 8), kPFErrTypeError,
                  "argument 'buf' is NULL");
  assert_pf_error(PFDataTypeToString((DLDataType){kDLInt, 8, 1}, buf, 0), kPFErrValueError,
                  "'size' is 0");
  assert_string_equal(buf, "untouched");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dlpack_codes),   cmocka_unit_test(test_names),
      cmocka_unit_test(test_canonical_text), cmocka_unit_test(test_round_trip_of_every_dtype),
      cmocka_unit_test(test_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
