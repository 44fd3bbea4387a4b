/* Object types from C: the demo plugin's demo.Counter, as a host uses it. */
#include <stdio.h>

#include <packedfunc/c_api.h>

#define CHECK(call)                              \
  do {                                           \
    if ((call) != 0) {                           \
      fprintf(stderr, "%s\n", PFGetLastError()); \
      return 1;                                  \
    }                                            \
  } while (0)

int main(int argc, char** argv) {
  PFModuleHandle plugin = NULL;
  CHECK(PFModLoadFromFile(argc > 1 ? argv[1] : "build/examples/demo_plugin.so", &plugin));

  /* Loading registered the plugin's types: read one's description. */
  uint32_t counter = 0;
  const PFObjectTypeInfo* type = NULL;
  CHECK(PFObjectTypeFind("demo.Counter", &counter));
  CHECK(PFObjectTypeGetInfo(counter, &type));
  printf("%s(%s): %s\n", type->key, PFObjectTypeName(type->parent_index), type->doc);
  for (int i = 0; i < type->num_fields; ++i)
    printf("  field  %-5s %-6s %s\n", type->fields[i]->name, type->fields[i]->type,
           type->fields[i]->flags & kPFFieldWritable ? "writable" : "read-only");
  for (int i = 0; i < type->num_methods; ++i)
    printf("  method %-9s %s\n", type->methods[i]->name,
           type->methods[i]->signature ? type->methods[i]->signature : "(packed)");

  /* demo.Counter("clicks", 10), through its constructor. */
  PFFunctionHandle make = NULL;
  CHECK(PFObjectTypeGetConstructor(counter, &make));
  PFValue args[2] = {{.v_str = "clicks"}, {.v_int64 = 10}}, rv;
  int codes[2] = {kPFStr, kPFInt}, rc;
  CHECK(PFFuncCall(make, args, codes, 2, &rv, &rc));
  PFObjectHandle clicks = rv.v_handle;

  /* A method bound to the instance; a field through its handle. */
  PFFunctionHandle increment = NULL;
  const PFFieldInfo* step = NULL;
  CHECK(PFObjectGetMethod(clicks, "increment", &increment));
  CHECK(PFObjectTypeGetField(counter, "step", &step));
  CHECK(PFFuncCall(increment, NULL, NULL, 0, &rv, &rc));
  printf("increment() -> %lld\n", (long long)rv.v_int64);
  CHECK(PFObjectSetField(clicks, step, (PFValue){.v_int64 = 5}, kPFInt));
  CHECK(PFFuncCall(increment, NULL, NULL, 0, &rv, &rc));
  printf("step = 5; increment() -> %lld\n", (long long)rv.v_int64);

  /* The runtime checks what hosts write. */
  if (PFObjectSetFieldByName(clicks, "name", (PFValue){.v_str = "x"}, kPFStr) != 0)
    printf("%s: %s\n", PFErrorGetKind(), PFErrorGetMessage());
  if (PFObjectSetField(clicks, step, (PFValue){.v_float64 = 0.5}, kPFFloat) != 0)
    printf("%s: %s\n", PFErrorGetKind(), PFErrorGetMessage());

  PFFuncFree(increment);
  PFObjectFree(clicks);
  PFFuncFree(make);
  PFModFree(plugin);
  return 0;
}
