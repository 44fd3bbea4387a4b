#include <packedfunc/c_api.h>
#include <stdio.h>

/* A packed function: adds two ints, and says which argument is wrong. */
static int add(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2) return PFErrorSetFormat(kPFErrTypeError, "add: expected 2 arguments, got %d", n);
  for (int i = 0; i < 2; ++i)
    if (codes[i] != kPFInt)
      return PFErrorSetFormat(kPFErrTypeError, "add: argument %d must be int, not %s", i,
                              PFTypeCodeName(codes[i]));
  PFValue sum = {.v_int64 = args[0].v_int64 + args[1].v_int64};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &sum, &code, 1);
}

int main(void) {
  /* Create it and publish it by name; the registry keeps its own reference. */
  PFFunctionHandle f;
  if (PFFuncCreateFromCFunc(add, NULL, NULL, &f) != 0 ||
      PFFuncRegisterGlobal("demo.add", f, 0) != 0) {
    fprintf(stderr, "%s\n", PFGetLastError());
    return 1;
  }
  PFFuncFree(f);

  /* Anyone can now look it up by name and call it. */
  PFFunctionHandle add_fn;
  PFFuncGetGlobal("demo.add", &add_fn);
  PFValue args[2] = {{.v_int64 = 40}, {.v_int64 = 2}};
  int codes[2] = {kPFInt, kPFInt};
  PFValue result;
  int result_code;
  if (PFFuncCall(add_fn, args, codes, 2, &result, &result_code) == 0)
    printf("demo.add(40, 2) = %lld\n", (long long)result.v_int64);

  /* A failing call returns -1; the error's kind and message are separate. */
  codes[1] = kPFStr;
  args[1].v_str = "two";
  if (PFFuncCall(add_fn, args, codes, 2, &result, &result_code) != 0)
    printf("error kind: %s\nmessage: %s\n", PFErrorGetKind(), PFErrorGetMessage());

  PFFuncFree(add_fn);
  return 0;
}
