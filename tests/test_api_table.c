/* The stable function table, versions, struct sizes and type code names. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>

#include "support/pf_test.h"

static const PFApi* api(void) {
  const PFApiBase* base = PFGetApiBase();
  assert_non_null(base);
  assert_non_null(base->GetApi);
  const PFApi* t = base->GetApi(PF_API_VERSION);
  assert_non_null(t);
  return t;
}

/* Each slot IS the exported entry point. Comparing typed function pointers
 * also checks at compile time that each slot's signature matches. */
static void test_slots_are_the_entry_points(void** state) {
  (void)state;
  const PFApi* t = api();
#define SLOT(name) assert_true(t->name == PF##name)
  SLOT(FuncCreateFromCFunc);
  SLOT(FuncCall);
  SLOT(CFuncSetReturn);
  SLOT(FuncRetain);
  SLOT(FuncFree);
  SLOT(FuncRegisterGlobal);
  SLOT(FuncGetGlobal);
  SLOT(FuncRemoveGlobal);
  SLOT(FuncListGlobalNames);
  SLOT(GetLastError);
  SLOT(APISetLastError);
  SLOT(ErrorSet);
  SLOT(ErrorAppendTraceback);
  SLOT(ErrorGetKind);
  SLOT(ErrorGetMessage);
  SLOT(ErrorGetTraceback);
  SLOT(ErrorClear);
  SLOT(TypeCodeName);
  SLOT(ObjectRetain);
  SLOT(ObjectFree);
  SLOT(ObjectGetTypeIndex);
  SLOT(ObjectCreateBoxed);
  SLOT(ObjectGetBoxedPayload);
  SLOT(TensorCreateFromDLPack);
  SLOT(TensorGetDLTensor);
  SLOT(TensorToDLPack);
  SLOT(FuncRegisterGlobalEx);
  SLOT(FuncListGlobalNamesWithPrefix);
  SLOT(RegistrySeal);
  SLOT(RegistryIsSealed);
  SLOT(EnvSetSignalChecker);
  SLOT(EnvCheckSignals);
  SLOT(GetVersion);
  SLOT(GetStructSize);
  SLOT(FuncSetInfo);
  SLOT(FuncGetInfo);
  SLOT(FuncCreateFromTyped);
  SLOT(FuncToCFunction);
  SLOT(ClosureCheckError);
  SLOT(ModLoadFromFile);
  SLOT(ModGetFunction);
  SLOT(ModImport);
  SLOT(ModListFunctionNames);
  SLOT(ModExportGlobal);
  SLOT(ModFree);
  SLOT(ModLoadFromDescriptors);
  SLOT(HostGateCreate);
  SLOT(HostGateClose);
  SLOT(FuncCreateFromHostCFunc);
  SLOT(ErrorSetFormat);
  SLOT(SetAllocator);
  SLOT(MemAlloc);
  SLOT(MemRealloc);
  SLOT(MemFree);
  SLOT(SignatureTypeInfo);
  SLOT(ObjectTypeName);
  SLOT(HostObjectCreate);
  SLOT(HostObjectGetPayload);
  SLOT(ArrayCreate);
  SLOT(ArrayGetSize);
  SLOT(ArrayGetItem);
  SLOT(MapCreate);
  SLOT(MapGetSize);
  SLOT(MapGetItem);
  SLOT(MapGetItemAt);
  SLOT(ShapeCreate);
  SLOT(ShapeGetData);
  SLOT(FuncBind);
  SLOT(FuncSetPrePack);
  SLOT(PrePackCacheCreate);
  SLOT(PrePackCacheGetStats);
  SLOT(ModCreateFromFunctions);
  SLOT(FuncCallFrame);
  SLOT(ObjectFindOwnedHosts);
  SLOT(ArrayGetItems);
  SLOT(MapGetItems);
  SLOT(ListCreate);
  SLOT(ListGetSize);
  SLOT(ListGetItem);
  SLOT(ListSetItem);
  SLOT(ListAppend);
  SLOT(ListInsert);
  SLOT(ListExtend);
  SLOT(ListReplace);
  SLOT(ListPop);
  SLOT(ListClear);
  SLOT(ListToArray);
  SLOT(DictCreate);
  SLOT(DictGetSize);
  SLOT(DictGetItem);
  SLOT(DictSetItem);
  SLOT(DictUpdate);
  SLOT(DictPop);
  SLOT(DictClear);
  SLOT(DictToArray);
  SLOT(DataTypeFromString);
  SLOT(DataTypeToString);
  SLOT(TensorCreateFromDLPackVersioned);
  SLOT(TensorIsReadOnly);
  SLOT(TensorToDLPackVersioned);
  SLOT(ObjectTypeRegister);
  SLOT(ObjectTypeFind);
  SLOT(ObjectTypeGetInfo);
  SLOT(ObjectTypeGetField);
  SLOT(ObjectTypeGetMethod);
  SLOT(ObjectTypeGetConstructor);
  SLOT(ObjectAlloc);
  SLOT(ObjectGetData);
  SLOT(ObjectIsInstance);
  SLOT(ObjectGetField);
  SLOT(ObjectSetField);
  SLOT(ObjectGetFieldByName);
  SLOT(ObjectSetFieldByName);
  SLOT(ObjectGetMethod);
  SLOT(ModListTypes);
  SLOT(FuncCallKw);
  SLOT(FuncGetSignatureInfo);
  SLOT(SignatureParse);
  SLOT(SignatureInfoFree);
  SLOT(ArgGetTensor);
  SLOT(TensorAlloc);
  SLOT(FuncCreateDirect);
  SLOT(FuncReturnString);
  SLOT(FuncResolve);
  SLOT(FuncSetFlags);
  SLOT(FuncGetFlags);
  SLOT(StructuralEqual);
  SLOT(StructuralHash);
  SLOT(ToJSON);
  SLOT(FromJSON);
#undef SLOT
  /* The first slots' positions, as a loader compiled against version 1
   * sees them. */
  assert_int_equal(offsetof(PFApi, FuncCreateFromCFunc), 0);
  assert_int_equal(offsetof(PFApi, FuncCall), sizeof(void*));
  assert_int_equal(offsetof(PFApi, FuncGetInfo), 35 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, HostGateCreate), 46 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, FuncCreateFromHostCFunc), 48 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, ArrayCreate), 58 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, ShapeGetData), 66 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, FuncBind), 67 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, FuncSetPrePack), 68 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, PrePackCacheGetStats), 70 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, ModCreateFromFunctions), 71 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, FuncCallFrame), 72 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, ObjectFindOwnedHosts), 73 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, ArrayGetItems), 74 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, TensorToDLPackVersioned), 99 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, ModListTypes), 114 * sizeof(void*));
  /* Version 10 appends, after every earlier slot. */
  assert_int_equal(offsetof(PFApi, FuncCallKw), 115 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, TensorAlloc), 120 * sizeof(void*));
  /* Version 11 appends the direct callee convention, call targets and a
   * function's flags. */
  assert_int_equal(offsetof(PFApi, FuncCreateDirect), 121 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, FuncResolve), 123 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, FuncSetFlags), 124 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, FuncGetFlags), 125 * sizeof(void*));
  /* Version 12 appends structural equality and hashing. */
  assert_int_equal(offsetof(PFApi, StructuralEqual), 126 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, StructuralHash), 127 * sizeof(void*));
  /* Version 13 appends JSON documents of object graphs and the reference
   * count query. */
  assert_int_equal(offsetof(PFApi, ToJSON), 128 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, FromJSON), 129 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, ObjectGetRefCount), 130 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, FromJSONEx), 131 * sizeof(void*));
  /* Version 14 appends structural comparison with options. */
  assert_int_equal(offsetof(PFApi, StructuralCompare), 132 * sizeof(void*));
  assert_int_equal(offsetof(PFApi, StructuralHashEx), 133 * sizeof(void*));
  assert_int_equal(sizeof(PFApi), 134 * sizeof(void*));
  assert_int_equal(PF_API_VERSION, 14);
  /* No slot, including ones appended later, is left empty. */
  size_t n = sizeof(PFApi) / sizeof(void (*)(void));
  assert_true(n >= 49);
  for (size_t i = 0; i < n; ++i) {
    void (*slot)(void);
    memcpy(&slot, (const char*)t + i * sizeof(slot), sizeof(slot));
    if (slot == NULL) fail_msg("PFApi slot %zu is NULL", i);
  }
  /* Every version the library has gives a table. */
  for (uint32_t v = 1; v <= PF_API_VERSION; ++v) assert_non_null(PFGetApiBase()->GetApi(v));
}

static int add(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || codes[0] != kPFInt || codes[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "add: want two ints");
  PFValue v = {.v_int64 = args[0].v_int64 + args[1].v_int64};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_calls_through_the_table(void** state) {
  (void)state;
  const PFApi* t = api();
  PFFunctionHandle f = NULL;
  assert_pf_ok(t->FuncCreateFromCFunc(add, NULL, NULL, &f));
  assert_pf_ok(t->FuncRegisterGlobal("table.add", f, 0));
  assert_pf_ok(t->FuncFree(f));
  PFFunctionHandle g = NULL;
  assert_pf_ok(t->FuncGetGlobal("table.add", &g));
  PFValue args[2] = {{.v_int64 = 40}, {.v_int64 = 2}}, rv;
  int codes[2] = {kPFInt, kPFInt}, rc;
  assert_pf_ok(t->FuncCall(g, args, codes, 2, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 42);
  codes[1] = kPFFloat;
  assert_int_equal(t->FuncCall(g, args, codes, 2, &rv, &rc), -1);
  assert_string_equal(t->ErrorGetKind(), "TypeError");
  assert_string_equal(t->GetLastError(), "TypeError: add: want two ints");
  assert_pf_ok(t->FuncFree(g));
  assert_pf_ok(t->FuncRemoveGlobal("table.add"));
  assert_string_equal(t->TypeCodeName(kPFStr), "str");
}

static void test_unsupported_versions(void** state) {
  (void)state;
  const PFApiBase* base = PFGetApiBase();
  assert_ptr_equal(PFGetApiBase(), base); /* one static struct */
  const uint32_t bad[] = {0, PF_API_VERSION + 1, 1000, UINT32_MAX};
  for (size_t i = 0; i < 4; ++i) {
    PFErrorClear();
    assert_null(base->GetApi(bad[i]));
    char num[32];
    snprintf(num, sizeof(num), "%u", bad[i]);
    assert_string_equal(PFErrorGetKind(), "ValueError");
    assert_non_null(strstr(PFErrorGetMessage(), "GetApi"));
    assert_non_null(strstr(PFErrorGetMessage(), num));
  }
}

static void test_versions_agree(void** state) {
  (void)state;
  assert_string_equal(PFGetApiBase()->GetVersionString(), PF_VERSION_STRING);
  int major = -1, minor = -1, patch = -1;
  assert_pf_ok(PFGetVersion(&major, &minor, &patch));
  assert_int_equal(major, PF_VERSION_MAJOR);
  assert_int_equal(minor, PF_VERSION_MINOR);
  assert_int_equal(patch, PF_VERSION_PATCH);
  char text[64];
  snprintf(text, sizeof(text), "%d.%d.%d", major, minor, patch);
  assert_string_equal(text, PFGetApiBase()->GetVersionString());
  /* Any out may be NULL. */
  assert_pf_ok(PFGetVersion(NULL, NULL, NULL));
  assert_pf_ok(PFGetVersion(NULL, &minor, NULL));
}

static void test_struct_sizes(void** state) {
  (void)state;
  const struct {
    const char* name;
    size_t size;
  } want[] = {
      {"PFValue", sizeof(PFValue)},
      {"PFByteArray", sizeof(PFByteArray)},
      {"DLDataType", sizeof(DLDataType)},
      {"DLDevice", sizeof(DLDevice)},
      {"DLTensor", sizeof(DLTensor)},
      {"DLManagedTensor", sizeof(DLManagedTensor)},
      {"PFDLManagedTensorVersioned", sizeof(PFDLManagedTensorVersioned)},
      {"PFTensorConstraint", sizeof(PFTensorConstraint)},
      {"PFParamInfo", sizeof(PFParamInfo)},
      {"PFSignatureInfo", sizeof(PFSignatureInfo)},
      {"PFTypeInfo", sizeof(PFTypeInfo)},
  };
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); ++i) {
    size_t got = 0;
    assert_pf_ok(PFGetStructSize(want[i].name, &got));
    assert_int_equal(got, want[i].size);
  }
  size_t got = 0;
  assert_pf_ok(PFGetStructSize("PFValue", &got));
  assert_int_equal(got, 8);
  got = 77;
  assert_pf_error(PFGetStructSize("NoSuchStruct", &got), kPFErrKeyError, "PFGetStructSize",
                  "'NoSuchStruct'");
  assert_pf_error(PFGetStructSize("pfvalue", &got), kPFErrKeyError, "'pfvalue'");
  assert_pf_error(PFGetStructSize("", &got), kPFErrKeyError, "PFGetStructSize");
  assert_int_equal(got, 77);
}

static void test_type_code_names(void** state) {
  (void)state;
  const char* names[] = {"int",    "float", "bool",  "null",     "handle", "dtype", "device",
                         "tensor", "str",   "bytes", "function", "module", "object"};
  assert_int_equal(sizeof(names) / sizeof(names[0]), kPFTypeCodeEnd);
  for (int c = 0; c < kPFTypeCodeEnd; ++c) assert_string_equal(PFTypeCodeName(c), names[c]);
  assert_string_equal(PFTypeCodeName(kPFInt), "int");
  assert_string_equal(PFTypeCodeName(kPFObjectHandle), "object");
  for (int c = kPFTypeCodeEnd; c < kPFExtBegin; ++c) assert_null(PFTypeCodeName(c));
  for (int c = kPFExtBegin; c < kPFExtEnd; ++c) assert_string_equal(PFTypeCodeName(c), "ext");
  const int unknown[] = {kPFExtEnd, 128, 255, 1000, -1, INT_MIN, INT_MAX};
  for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); ++i)
    assert_null(PFTypeCodeName(unknown[i]));
  /* It sets no error. */
  PFErrorSet("ValueError", "sentinel");
  (void)PFTypeCodeName(-5);
  assert_string_equal(PFErrorGetMessage(), "sentinel");
}

static void test_object_type_names(void** state) {
  (void)state;
  assert_string_equal(PFObjectTypeName(kPFObjectFunction), "function");
  assert_string_equal(PFObjectTypeName(kPFObjectModule), "module");
  assert_string_equal(PFObjectTypeName(kPFObjectTensor), "tensor");
  assert_string_equal(PFObjectTypeName(kPFObjectBoxed), "boxed");
  assert_string_equal(PFObjectTypeName(kPFObjectClosure), "closure");
  assert_int_equal(kPFObjectArray, 8);
  assert_int_equal(kPFObjectMap, 9);
  assert_int_equal(kPFObjectShape, 10);
  assert_string_equal(PFObjectTypeName(kPFObjectArray), "array");
  assert_string_equal(PFObjectTypeName(kPFObjectMap), "map");
  assert_string_equal(PFObjectTypeName(kPFObjectShape), "shape");
  assert_int_equal(kPFObjectList, 12);
  assert_int_equal(kPFObjectDict, 13);
  assert_string_equal(PFObjectTypeName(kPFObjectList), "list");
  assert_string_equal(PFObjectTypeName(kPFObjectDict), "dict");
  /* Dense from 1: every index below the end has a name, none past it. */
  for (uint32_t i = 1; i < kPFObjectTypeEnd; ++i) assert_non_null(PFObjectTypeName(i));
  const uint32_t unknown[] = {0, kPFObjectTypeEnd, 64, UINT32_MAX};
  for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]); ++i)
    assert_null(PFObjectTypeName(unknown[i]));
    /* Every handle type code names an object type that exists (or 0: any). */
#define CHECK_CODE_(name, num, text, kind, otype) \
  assert_true((kind) != kPFValueHandle || (otype) == 0 || PFObjectTypeName(otype) != NULL);
  PF_TYPE_CODE_LIST(CHECK_CODE_)
#undef CHECK_CODE_
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slots_are_the_entry_points),
      cmocka_unit_test(test_calls_through_the_table),
      cmocka_unit_test(test_unsupported_versions),
      cmocka_unit_test(test_versions_agree),
      cmocka_unit_test(test_struct_sizes),
      cmocka_unit_test(test_type_code_names),
      cmocka_unit_test(test_object_type_names),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
