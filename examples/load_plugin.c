#include <packedfunc/c_api.h>
#include <stdio.h>

/* Usage: load_plugin PATH/demo_plugin.so */
int main(int argc, char** argv) {
  PFModuleHandle mod;
  if (argc != 2 || PFModLoadFromFile(argv[1], &mod) != 0) {
    fprintf(stderr, "%s\n", argc == 2 ? PFGetLastError() : "usage: load_plugin PLUGIN.so");
    return 1;
  }
  int n;
  const char** names;
  PFModListFunctionNames(mod, &n, &names);
  printf("%d functions, the first is %s\n", n, names[0]);

  /* Look a function up in the module (or publish them all with
   * PFModExportGlobal and use PFFuncGetGlobal). */
  PFFunctionHandle greet;
  const char *sig, *doc;
  if (PFModGetFunction(mod, "demo.greet", 0, &greet) != 0 || greet == NULL) return 1;
  PFFuncGetInfo(greet, NULL, &sig, &doc);
  printf("demo.greet: %s, \"%s\"\n", sig, doc);

  /* The function keeps the library loaded after the module handle goes. */
  PFModFree(mod);
  PFValue arg = {.v_str = "C"}, out;
  int code = kPFStr, out_code;
  if (PFFuncCall(greet, &arg, &code, 1, &out, &out_code) == 0) printf("%s\n", out.v_str);
  PFFuncFree(greet);
  return 0;
}
