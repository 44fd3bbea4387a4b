/* Test fixture: a module with packed and typed functions, with and without
 * docstrings, and one that calls back into the global registry. */
#include <stdint.h>
#include <stdio.h>

#include "packedfunc/c_api.h"

static int add(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || codes[0] != kPFInt || codes[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "add: expected two ints");
  PFValue v = {.v_int64 = args[0].v_int64 + args[1].v_int64};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
PF_REGISTER_PACKED("add", add, "Adds two ints (basic).");

static int64_t mul(int64_t a, int64_t b) { return a * b; }
PF_REGISTER_TYPED("mul", mul, "int64(int64,int64)", "Multiplies two ints.");

static double half(double x) { return x / 2; }
PF_REGISTER_TYPED("half", half, "float64(float64)");

static const char* greet(const char* who) {
  static _Thread_local char buf[128];
  snprintf(buf, sizeof(buf), "hello, %s", who);
  return buf;
}
PF_REGISTER_TYPED("greet", greet, "str(str)", "Greets someone.");

/* call_global(name): calls the global function `name` with no arguments and
 * returns its result; shows that the module shares its host's registry. */
static int call_global(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || codes[0] != kPFStr)
    return PFErrorSetFormat(kPFErrTypeError, "call_global: expected one str");
  PFFunctionHandle f = NULL;
  if (PFFuncGetGlobal(args[0].v_str, &f) != 0) return -1;
  if (f == NULL)
    return PFErrorSetFormat(kPFErrKeyError, "call_global: no global function '%s'", args[0].v_str);
  PFValue out;
  int code;
  int rc = PFFuncCall(f, NULL, NULL, 0, &out, &code);
  if (rc == 0) rc = PFCFuncSetReturn(ret, &out, &code, 1);
  if (rc == 0 && (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle))
    PFObjectFree(out.v_handle);
  PFFuncFree(f);
  return rc;
}
PF_REGISTER_PACKED("call_global", call_global);
