/* A direct callee, called through PFFuncCall and through a resolved target. */
#include <packedfunc/c_api.h>
#include <stdio.h>

/* The direct convention: the result goes through the caller's pointers. */
static int add(void* resource, PFValue* args, int* codes, int n, PFValue* ret, int* ret_code) {
  (void)resource;
  if (n != 2 || codes[0] != kPFInt || codes[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "add: expected (int, int)");
  ret->v_int64 = args[0].v_int64 + args[1].v_int64;
  *ret_code = kPFInt;
  return 0;
}

static int greet(void* resource, PFValue* args, int* codes, int n, PFValue* ret, int* ret_code) {
  (void)resource, (void)args, (void)codes, (void)n;
  char text[] = "hello from a direct callee";
  return PFFuncReturnString(kPFStr, text, sizeof text - 1, ret, ret_code); /* copied */
}

int main(void) {
  PFFunctionHandle f = NULL, g = NULL;
  if (PFFuncCreateDirect(add, NULL, NULL, &f) != 0 || PFFuncCreateDirect(greet, NULL, NULL, &g))
    return 1;
  PFValue args[2] = {{.v_int64 = 40}, {.v_int64 = 2}}, ret;
  int codes[2] = {kPFInt, kPFInt}, ret_code;

  /* The checked entry: any caller, any values. */
  if (PFFuncCall(f, args, codes, 2, &ret, &ret_code) != 0) return 1;
  printf("PFFuncCall: %lld\n", (long long)ret.v_int64);

  /* Resolved once; then each call goes straight to the callee. The caller
   * owes what PFFuncCall would have checked, and keeps its reference to f. */
  PFCallTarget t = {.size = sizeof(PFCallTarget)};
  if (PFFuncResolve(f, &t) != 0) return 1;
  long long sum = 0;
  for (int i = 0; i < 1000; ++i) {
    args[0].v_int64 = i;
    if (t.entry(t.ctx, args, codes, 2, &ret, &ret_code) != 0) return 1;
    sum += ret.v_int64;
  }
  printf("through the target: %lld\n", sum);

  codes[0] = kPFFloat; /* the callee's own check still speaks */
  if (t.entry(t.ctx, args, codes, 2, &ret, &ret_code) != 0)
    printf("error: %s\n", PFErrorGetMessage());

  PFCallTarget tg = {.size = sizeof(PFCallTarget)};
  if (PFFuncResolve(g, &tg) != 0 || tg.entry(tg.ctx, NULL, NULL, 0, &ret, &ret_code) != 0) return 1;
  printf("%s\n", ret.v_str); /* valid until this thread's next call */
  PFFuncFree(f);
  PFFuncFree(g);
  return 0;
}
