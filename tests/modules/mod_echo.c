/* Test fixture: functions that hand their arguments back, so that a test
 * of the pf command can see how each argument was parsed and printed. */
#include <stdbool.h>
#include <stdint.h>

#include "packedfunc/c_api.h"

static int echo(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n == 0) return 0; /* null */
  return PFCFuncSetReturn(ret, &args[0], &codes[0], 1);
}
PF_REGISTER_PACKED("echo", echo, "Returns its first argument (null without one).");

static PFByteArray echo_bytes(const PFByteArray* b) { return *b; }
PF_REGISTER_TYPED("echo_bytes", echo_bytes, "bytes(bytes)");

static float echo_float32(float x) { return x; }
PF_REGISTER_TYPED("echo_float32", echo_float32, "float32(float32)");

static bool echo_bool(bool b) { return b; }
PF_REGISTER_TYPED("echo_bool", echo_bool, "bool(bool)");

static int64_t echo_uint8(uint8_t x) { return x; }
PF_REGISTER_TYPED("echo_uint8", echo_uint8, "int64(uint8)");

/* Returns a new function (named "made"), to show how handles print. */
static int make_fn(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  PFFunctionHandle f;
  if (PFFuncCreateFromCFunc(echo, NULL, NULL, &f) != 0) return -1;
  int rc = PFFuncSetInfo(f, "made", NULL, NULL);
  PFValue v = {.v_handle = f};
  int code = kPFFuncHandle;
  if (rc == 0) rc = PFCFuncSetReturn(ret, &v, &code, 1);
  PFFuncFree(f);
  return rc;
}
PF_REGISTER_PACKED("make_fn", make_fn);

/* A shape parameter reads a JSON list of ints; returns the product. */
static int64_t shape_size(PFObjectHandle shape) {
  const int64_t* dims;
  int64_t n, size = 1;
  if (PFShapeGetData(shape, &dims, &n) != 0) return -1;
  for (int64_t i = 0; i < n; ++i) size *= dims[i];
  return size;
}
PF_REGISTER_TYPED("shape_size", shape_size, "int64(shape)");

/* An Array result: [0, 1, ..., n-1] (at most 8 items). */
static PFObjectHandle range(int64_t n) {
  PFValue v[8];
  int c[8];
  if (n < 0 || n > 8) n = 8;
  for (int64_t i = 0; i < n; ++i) v[i].v_int64 = i, c[i] = kPFInt;
  PFObjectHandle a = NULL;
  return PFArrayCreate(v, c, n, &a) == 0 ? a : NULL;
}
PF_REGISTER_TYPED("range", range, "array(int64)");

/* Named parameters and defaults, for keyword arguments (pf call x=1). */
static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }
PF_REGISTER_TYPED("clamp", clamp, "float64(x: float64, lo: float64 = 0, hi: float64 = 1)");

/* A packed function with named parameters: its arguments as an Array. */
static int args_of(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  PFObjectHandle a = NULL;
  if (PFArrayCreate(args, codes, n, &a) != 0) return -1;
  PFValue v = {.v_handle = a};
  int code = kPFObjectHandle;
  int rc = PFCFuncSetReturn(ret, &v, &code, 1);
  PFObjectFree(a);
  return rc;
}
PF_REGISTER_PACKED_SIG("args_of", args_of,
                       "array(text: str, n: int64 = 1, sep: str = \"a=b\", items: any = null)");

/* Parameter names that share their first bytes (7, 8, 9, 15, 16 and 17
 * bytes, each a prefix of the longer ones), in both orders, and names
 * longer than their 8-byte prefixes alone: a keyword binds only the
 * parameter of exactly its name. */
PF_REGISTER_PACKED_SIG("kw_prefixes", args_of,
                       "array(abcdefg: int64 = 0, abcdefgh: int64 = 0, abcdefghi: int64 = 0, "
                       "abcdefghijklmno: int64 = 0, abcdefghijklmnop: int64 = 0, "
                       "abcdefghijklmnopq: int64 = 0)");
PF_REGISTER_PACKED_SIG("kw_prefixes_rev", args_of,
                       "array(abcdefghijklmnopq: int64 = 0, abcdefghijklmnop: int64 = 0, "
                       "abcdefghijklmno: int64 = 0, abcdefghi: int64 = 0, abcdefgh: int64 = 0, "
                       "abcdefg: int64 = 0)");
PF_REGISTER_PACKED_SIG("kw_longer", args_of,
                       "array(interval_ms: int64 = 0, position_x: int64 = 0, "
                       "abcdefghijklmnopq: int64 = 0)");
