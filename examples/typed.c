#include <packedfunc/c_api.h>
#include <math.h>
#include <stdio.h>

/* A plain C function: the runtime converts arguments and results through
 * its signature, checking types and ranges. The compiler checks the
 * signature against the prototype: `float scale(float, int64_t)` here
 * would not compile. */
static double scale(double x, int32_t times) { return x * times; }
PF_REGISTER_CHECKED("example.scale", scale, PF_RET(float64), PF_ARG(float64, x),
                    PF_ARG(int32, times), PF_DOC("Multiplies x by times."));

static int call(const char* name, PFValue* args, int* codes, int n) {
  PFFunctionHandle f;
  PFValue out;
  int out_code;
  if (PFFuncGetGlobal(name, &f) != 0 || f == NULL) return -1;
  int rc = PFFuncCall(f, args, codes, n, &out, &out_code);
  if (rc == 0) printf("%s -> %g\n", name, out.v_float64);
  else printf("%s failed: %s: %s\n", name, PFErrorGetKind(), PFErrorGetMessage());
  PFFuncFree(f);
  return rc;
}

int main(void) {
  /* The functions this program registered with PF_REGISTER_CHECKED... */
  PFModuleHandle self;
  if (PF_MODULE_LOAD_SELF(&self) != 0 || PFModExportGlobal(self, "", 0) != 0) {
    fprintf(stderr, "%s\n", PFGetLastError());
    return 1;
  }
  PFModFree(self);

  /* ...and one wrapped at run time, from a function pointer and a
   * signature string, which nothing can check at compile time. */
  PFFunctionHandle f;
  if (PFFuncCreateFromTyped((void*)sqrt, "float64(float64)", &f) != 0 ||
      PFFuncRegisterGlobal("example.sqrt", f, 0) != 0) {
    fprintf(stderr, "%s\n", PFGetLastError());
    return 1;
  }
  PFFuncFree(f);

  PFValue args[2] = {{.v_float64 = 1.5}, {.v_int64 = 4}};
  int codes[2] = {kPFFloat, kPFInt};
  call("example.scale", args, codes, 2);
  args[0].v_int64 = 2; /* an int where a float64 is expected converts exactly */
  codes[0] = kPFInt;
  call("example.sqrt", args, codes, 1);
  args[1].v_int64 = 1LL << 40; /* does not fit an int32: a ValueError, not a wrap */
  call("example.scale", args, codes, 2);
  return 0;
}
