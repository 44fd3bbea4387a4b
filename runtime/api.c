/* The stable table of entry points, the version, and the struct sizes a binding checks. */
#include <string.h>

#include "internal.h"

int PFGetVersion(int* major, int* minor, int* patch) {
  if (major) *major = PF_VERSION_MAJOR;
  if (minor) *minor = PF_VERSION_MINOR;
  if (patch) *patch = PF_VERSION_PATCH;
  return 0;
}

int PFGetStructSize(const char* name, size_t* out) {
  static const struct {
    const char* name;
    size_t size;
  } sizes[] = {
      {"PFValue", sizeof(PFValue)},
      {"PFByteArray", sizeof(PFByteArray)},
      {"DLDataType", sizeof(DLDataType)},
      {"DLDevice", sizeof(DLDevice)},
      {"DLTensor", sizeof(DLTensor)},
      {"DLManagedTensor", sizeof(DLManagedTensor)},
      {"PFCallFrame", sizeof(PFCallFrame)},
      {"PFCallTarget", sizeof(PFCallTarget)},
      {"PFDLManagedTensorVersioned", sizeof(PFDLManagedTensorVersioned)},
      {"PFObjectTypeDesc", sizeof(PFObjectTypeDesc)},
      {"PFFieldDesc", sizeof(PFFieldDesc)},
      {"PFMethodDesc", sizeof(PFMethodDesc)},
      {"PFObjectTypeDesc2", sizeof(PFObjectTypeDesc2)},
      {"PFObjectTypeDesc3", sizeof(PFObjectTypeDesc3)},
      {"PFAccessorDesc", sizeof(PFAccessorDesc)},
      {"PFObjectTypeInfo", sizeof(PFObjectTypeInfo)},
      {"PFFieldInfo", sizeof(PFFieldInfo)},
      {"PFMethodInfo", sizeof(PFMethodInfo)},
      {"PFTensorConstraint", sizeof(PFTensorConstraint)},
      {"PFParamInfo", sizeof(PFParamInfo)},
      {"PFSignatureInfo", sizeof(PFSignatureInfo)},
      {"PFTypeInfo", sizeof(PFTypeInfo)},
  };
  PF_CHECK_ARG(name);
  PF_CHECK_ARG(out);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    if (strcmp(sizes[i].name, name) == 0) {
      *out = sizes[i].size;
      return 0;
    }
  }
  return PF_ERROR(kPFErrKeyError, "PFGetStructSize: unknown struct '%.200s'", name);
}

/* ---- the stable table ---- */

_Static_assert(sizeof(PFValue) == 8, "PFValue must stay 8 bytes");
_Static_assert(sizeof(PFApiBase) == 2 * sizeof(void*), "PFApiBase never grows");
_Static_assert(offsetof(PFApiBase, GetApi) == 0, "PFApiBase slots never move");
_Static_assert(offsetof(PFApiBase, GetVersionString) == sizeof(void*),
               "PFApiBase slots never move");

/* Every slot with its position; appending is the only allowed change. The
 * initializer below assigns each entry point to its typed slot, so a
 * signature change fails to compile under -Werror. */
#define PF_API_SLOTS(X)                  \
  X(FuncCreateFromCFunc, 0)              \
  X(FuncCall, 1)                         \
  X(CFuncSetReturn, 2)                   \
  X(FuncRetain, 3)                       \
  X(FuncFree, 4)                         \
  X(FuncRegisterGlobal, 5)               \
  X(FuncGetGlobal, 6)                    \
  X(FuncRemoveGlobal, 7)                 \
  X(FuncListGlobalNames, 8)              \
  X(GetLastError, 9)                     \
  X(APISetLastError, 10)                 \
  X(ErrorSet, 11)                        \
  X(ErrorAppendTraceback, 12)            \
  X(ErrorGetKind, 13)                    \
  X(ErrorGetMessage, 14)                 \
  X(ErrorGetTraceback, 15)               \
  X(ErrorClear, 16)                      \
  X(TypeCodeName, 17)                    \
  X(ObjectRetain, 18)                    \
  X(ObjectFree, 19)                      \
  X(ObjectGetTypeIndex, 20)              \
  X(ObjectCreateBoxed, 21)               \
  X(ObjectGetBoxedPayload, 22)           \
  X(TensorCreateFromDLPack, 23)          \
  X(TensorGetDLTensor, 24)               \
  X(TensorToDLPack, 25)                  \
  X(FuncRegisterGlobalEx, 26)            \
  X(FuncListGlobalNamesWithPrefix, 27)   \
  X(RegistrySeal, 28)                    \
  X(RegistryIsSealed, 29)                \
  X(EnvSetSignalChecker, 30)             \
  X(EnvCheckSignals, 31)                 \
  X(GetVersion, 32)                      \
  X(GetStructSize, 33)                   \
  X(FuncSetInfo, 34)                     \
  X(FuncGetInfo, 35)                     \
  X(FuncCreateFromTyped, 36)             \
  X(FuncToCFunction, 37)                 \
  X(ClosureCheckError, 38)               \
  X(ModLoadFromFile, 39)                 \
  X(ModGetFunction, 40)                  \
  X(ModImport, 41)                       \
  X(ModListFunctionNames, 42)            \
  X(ModExportGlobal, 43)                 \
  X(ModFree, 44)                         \
  X(ModLoadFromDescriptors, 45)          \
  X(HostGateCreate, 46)                  \
  X(HostGateClose, 47)                   \
  X(FuncCreateFromHostCFunc, 48)         \
  X(ErrorSetFormat, 49)                  \
  X(SetAllocator, 50)                    \
  X(MemAlloc, 51)                        \
  X(MemRealloc, 52)                      \
  X(MemFree, 53)                         \
  X(SignatureTypeInfo, 54)               \
  X(ObjectTypeName, 55)                  \
  X(HostObjectCreate, 56)                \
  X(HostObjectGetPayload, 57)            \
  X(ArrayCreate, 58)                     \
  X(ArrayGetSize, 59)                    \
  X(ArrayGetItem, 60)                    \
  X(MapCreate, 61)                       \
  X(MapGetSize, 62)                      \
  X(MapGetItem, 63)                      \
  X(MapGetItemAt, 64)                    \
  X(ShapeCreate, 65)                     \
  X(ShapeGetData, 66)                    \
  X(FuncBind, 67)                        \
  X(FuncSetPrePack, 68)                  \
  X(PrePackCacheCreate, 69)              \
  X(PrePackCacheGetStats, 70)            \
  X(ModCreateFromFunctions, 71)          \
  X(FuncCallFrame, 72)                   \
  X(ObjectFindOwnedHosts, 73)            \
  X(ArrayGetItems, 74)                   \
  X(MapGetItems, 75)                     \
  X(ListCreate, 76)                      \
  X(ListGetSize, 77)                     \
  X(ListGetItem, 78)                     \
  X(ListSetItem, 79)                     \
  X(ListAppend, 80)                      \
  X(ListInsert, 81)                      \
  X(ListExtend, 82)                      \
  X(ListReplace, 83)                     \
  X(ListPop, 84)                         \
  X(ListClear, 85)                       \
  X(ListToArray, 86)                     \
  X(DictCreate, 87)                      \
  X(DictGetSize, 88)                     \
  X(DictGetItem, 89)                     \
  X(DictSetItem, 90)                     \
  X(DictUpdate, 91)                      \
  X(DictPop, 92)                         \
  X(DictClear, 93)                       \
  X(DictToArray, 94)                     \
  X(DataTypeFromString, 95)              \
  X(DataTypeToString, 96)                \
  X(TensorCreateFromDLPackVersioned, 97) \
  X(TensorIsReadOnly, 98)                \
  X(TensorToDLPackVersioned, 99)         \
  /* Version 9. */                       \
  X(ObjectTypeRegister, 100)             \
  X(ObjectTypeFind, 101)                 \
  X(ObjectTypeGetInfo, 102)              \
  X(ObjectTypeGetField, 103)             \
  X(ObjectTypeGetMethod, 104)            \
  X(ObjectTypeGetConstructor, 105)       \
  X(ObjectAlloc, 106)                    \
  X(ObjectGetData, 107)                  \
  X(ObjectIsInstance, 108)               \
  X(ObjectGetField, 109)                 \
  X(ObjectSetField, 110)                 \
  X(ObjectGetFieldByName, 111)           \
  X(ObjectSetFieldByName, 112)           \
  X(ObjectGetMethod, 113)                \
  X(ModListTypes, 114)                   \
  /* Version 10. */                      \
  X(FuncCallKw, 115)                     \
  X(FuncGetSignatureInfo, 116)           \
  X(SignatureParse, 117)                 \
  X(SignatureInfoFree, 118)              \
  X(ArgGetTensor, 119)                   \
  X(TensorAlloc, 120)                    \
  /* Version 11. */                      \
  X(FuncCreateDirect, 121)               \
  X(FuncReturnString, 122)               \
  X(FuncResolve, 123)                    \
  X(FuncSetFlags, 124)                   \
  X(FuncGetFlags, 125)                   \
  /* Version 12. */                      \
  X(StructuralEqual, 126)                \
  X(StructuralHash, 127)                 \
  /* Version 13. */                      \
  X(ToJSON, 128)                         \
  X(FromJSON, 129)                       \
  X(ObjectGetRefCount, 130)              \
  X(FromJSONEx, 131)                     \
  /* Version 14. */                      \
  X(StructuralCompare, 132)              \
  X(StructuralHashEx, 133)

#define PF_API_PIN_(slot, index)                                   \
  _Static_assert(offsetof(PFApi, slot) == (index) * sizeof(void*), \
                 "PFApi slot " #slot " must stay at " #index);
PF_API_SLOTS(PF_API_PIN_)
#undef PF_API_PIN_

#define PF_API_COUNT_(slot, index) +1
_Static_assert(sizeof(PFApi) == (0 PF_API_SLOTS(PF_API_COUNT_)) * sizeof(void*),
               "every PFApi slot is listed in PF_API_SLOTS");
#undef PF_API_COUNT_

static const PFApi g_api = {
#define PF_API_INIT_(slot, index) .slot = PF##slot,
    PF_API_SLOTS(PF_API_INIT_)
#undef PF_API_INIT_
};

static const PFApi* get_api(uint32_t version) {
  if (version >= 1 && version <= PF_API_VERSION) return &g_api;
  PF_ERROR(kPFErrValueError,
           "PFApiBase.GetApi: API version %u is not available; this library "
           "(packedfunc %s) provides versions 1 to %d",
           version, PF_VERSION_STRING, PF_API_VERSION);
  return NULL;
}

static const char* get_version_string(void) { return PF_VERSION_STRING; }

static const PFApiBase g_api_base = {get_api, get_version_string};

const PFApiBase* PFGetApiBase(void) { return &g_api_base; }
