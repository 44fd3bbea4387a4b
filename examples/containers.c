#include <packedfunc/c_api.h>
#include <stdio.h>

/* A packed function that reads the options it is given as one Map. */
static int train(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)ret, (void)res;
  if (n != 1 || codes[0] != kPFObjectHandle)
    return PFErrorSetFormat(kPFErrTypeError, "train: expected one map");
  PFValue key = {.v_str = "lr"}, lr;
  int code, found;
  if (PFMapGetItem(args[0].v_handle, key, kPFStr, &lr, &code, &found) != 0) return -1;
  if (!found || code != kPFFloat) return PFErrorSetFormat(kPFErrKeyError, "train: no float 'lr'");
  printf("train: lr = %g\n", lr.v_float64);
  return 0;
}

int main(void) {
  /* An Array of any values: [1, 2.5, "three"]. The string is copied in. */
  PFValue items[3] = {{.v_int64 = 1}, {.v_float64 = 2.5}, {.v_str = "three"}};
  int item_codes[3] = {kPFInt, kPFFloat, kPFStr};
  PFObjectHandle array;
  if (PFArrayCreate(items, item_codes, 3, &array) != 0) {
    fprintf(stderr, "%s\n", PFGetLastError());
    return 1;
  }

  /* A Map with str keys, in insertion order; it holds a reference to the Array. */
  PFValue keys[3] = {{.v_str = "lr"}, {.v_str = "epochs"}, {.v_str = "items"}};
  int key_codes[3] = {kPFStr, kPFStr, kPFStr};
  PFValue values[3] = {{.v_float64 = 0.1}, {.v_int64 = 10}, {.v_handle = array}};
  int value_codes[3] = {kPFFloat, kPFInt, kPFObjectHandle};
  PFObjectHandle map;
  if (PFMapCreate(keys, key_codes, values, value_codes, 3, &map) != 0) {
    fprintf(stderr, "%s\n", PFGetLastError());
    return 1;
  }
  PFObjectFree(array); /* the Map keeps it alive */

  /* Read it back: each entry in order, and the nested Array's items. */
  int64_t size;
  PFMapGetSize(map, &size);
  for (int64_t i = 0; i < size; ++i) {
    PFValue k, v;
    int kc, vc;
    PFMapGetItemAt(map, i, &k, &kc, &v, &vc);
    printf("%s: %s\n", k.v_str, PFTypeCodeName(vc));
  }
  PFValue key = {.v_str = "items"}, got;
  int code, found;
  PFMapGetItem(map, key, kPFStr, &got, &code, &found);
  PFValue third;
  PFArrayGetItem(got.v_handle, 2, &third, &code);
  printf("items[2] = %s\n", third.v_str); /* borrowed: valid while the Map lives */

  /* A container crosses a call as one object argument. */
  PFFunctionHandle f;
  PFFuncCreateFromCFunc(train, NULL, NULL, &f);
  PFValue arg = {.v_handle = map}, result;
  int arg_code = kPFObjectHandle, result_code;
  if (PFFuncCall(f, &arg, &arg_code, 1, &result, &result_code) != 0)
    fprintf(stderr, "%s\n", PFGetLastError());

  PFFuncFree(f);
  PFObjectFree(map); /* releases the Array too */
  return 0;
}
