/* Test fixture: one module from two source files (see mod_multi_b.c). */
#include "packedfunc/c_api.h"

static int one(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  PFValue v = {.v_int64 = 1};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
PF_REGISTER_PACKED("multi.one", one, "Returns 1.");
