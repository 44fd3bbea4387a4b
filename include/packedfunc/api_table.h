/*
 * packedfunc — struct sizes and the stable table of entry points (the
 * version of the library itself is in base.h).
 */
#ifndef PACKEDFUNC_API_TABLE_H_
#define PACKEDFUNC_API_TABLE_H_

#include "packedfunc/registry.h"
#include "packedfunc/host.h"
#include "packedfunc/typed.h"
#include "packedfunc/object_type.h"
#include "packedfunc/module.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Struct sizes and the stable function table                                */
/* ------------------------------------------------------------------------ */

/* The newest version of the function table (PFApi) that this header
 * describes. Pass it to PFApiBase.GetApi. */
#define PF_API_VERSION 14

/* sizeof of a public struct as this library was compiled: "PFValue",
 * "PFByteArray", "DLDataType", "DLDevice", "DLTensor", "DLManagedTensor",
 * "PFCallFrame", "PFCallTarget", "PFDLManagedTensorVersioned", "PFObjectTypeDesc",
 * "PFObjectTypeDesc2", "PFObjectTypeDesc3", "PFAccessorDesc", "PFFieldDesc", "PFMethodDesc",
 * "PFObjectTypeInfo", "PFFieldInfo",
 * "PFMethodInfo", "PFTensorConstraint", "PFParamInfo", "PFSignatureInfo",
 * "PFTypeInfo".
 * Bindings compare it with their own mirrors. Errors: NULL
 * arguments (TypeError), unknown name (KeyError). */
PF_EXPORT int PFGetStructSize(const char* name, size_t* out);

/*
 * The stable table of entry points, in the manner of ONNX Runtime's
 * OrtApi. Slots are only ever appended; a slot's position and signature
 * never change once released. A program that loads the library at run time
 * asks for the version it was compiled against and gets a table at least
 * that new.
 *
 * Version 1 has the slots up to ModLoadFromDescriptors; version 2 adds
 * those up to ObjectTypeName; version 3 adds host objects
 * (HostObjectCreate, HostObjectGetPayload) and containers (ArrayCreate to
 * ShapeGetData); version 4 adds FuncBind to PrePackCacheGetStats (binding
 * constants, pre-packing them, sharing the packed values); version 5
 * adds ModCreateFromFunctions; version 6 adds FuncCallFrame; version 7
 * adds ObjectFindOwnedHosts; version 8 adds ArrayGetItems to
 * TensorToDLPackVersioned (bulk readers, List and Dict, data types as text,
 * versioned DLPack); version 9 adds registered object types
 * (ObjectTypeRegister to ModListTypes); version 10 adds keyword calls,
 * signatures as data and tensor helpers (FuncCallKw to TensorAlloc);
 * version 11 adds the direct callee convention, call targets and a
 * function's flags (FuncCreateDirect, FuncReturnString, FuncResolve,
 * FuncSetFlags, FuncGetFlags); version 12 adds structural equality and
 * hashing (StructuralEqual, StructuralHash); version 13 adds JSON
 * documents of object graphs (ToJSON, FromJSON) and the reference count
 * query (ObjectGetRefCount), and PFFromJSONEx (FromJSONEx); version 14
 * adds structural comparison with options and the path of the first
 * difference (StructuralCompare, StructuralHashEx). Every
 * exported entry point is a slot, except these, each for its
 * reason (tools/check-abi.sh reads this list; keep one entry per line):
 *   PF_API_EXCLUDED(PFGetApiBase)      the way to the table itself
 */
typedef struct PFApi {
  /* Version 1. */
  int (*FuncCreateFromCFunc)(PFPackedCFunc, void*, PFPackedCFuncFinalizer, PFFunctionHandle*);
  int (*FuncCall)(PFFunctionHandle, PFValue*, int*, int, PFValue*, int*);
  int (*CFuncSetReturn)(PFRetValueHandle, PFValue*, int*, int);
  int (*FuncRetain)(PFFunctionHandle);
  int (*FuncFree)(PFFunctionHandle);
  int (*FuncRegisterGlobal)(const char*, PFFunctionHandle, int);
  int (*FuncGetGlobal)(const char*, PFFunctionHandle*);
  int (*FuncRemoveGlobal)(const char*);
  int (*FuncListGlobalNames)(int*, const char***);
  const char* (*GetLastError)(void);
  void (*APISetLastError)(const char*);
  void (*ErrorSet)(const char*, const char*);
  void (*ErrorAppendTraceback)(const char*);
  const char* (*ErrorGetKind)(void);
  const char* (*ErrorGetMessage)(void);
  const char* (*ErrorGetTraceback)(void);
  void (*ErrorClear)(void);
  const char* (*TypeCodeName)(int);
  int (*ObjectRetain)(PFObjectHandle);
  int (*ObjectFree)(PFObjectHandle);
  int (*ObjectGetTypeIndex)(PFObjectHandle, uint32_t*);
  int (*ObjectCreateBoxed)(void*, PFObjectFinalizer, PFObjectHandle*);
  int (*ObjectGetBoxedPayload)(PFObjectHandle, void**);
  int (*TensorCreateFromDLPack)(DLManagedTensor*, PFObjectHandle*);
  int (*TensorGetDLTensor)(PFObjectHandle, DLTensor**);
  int (*TensorToDLPack)(PFObjectHandle, DLManagedTensor**);
  int (*FuncRegisterGlobalEx)(const char*, PFFunctionHandle, int);
  int (*FuncListGlobalNamesWithPrefix)(const char*, int*, const char***);
  int (*RegistrySeal)(void);
  int (*RegistryIsSealed)(int*);
  int (*EnvSetSignalChecker)(PFSignalChecker);
  int (*EnvCheckSignals)(void);
  int (*GetVersion)(int*, int*, int*);
  int (*GetStructSize)(const char*, size_t*);
  int (*FuncSetInfo)(PFFunctionHandle, const char*, const char*, const char*);
  int (*FuncGetInfo)(PFFunctionHandle, const char**, const char**, const char**);
  /* Typed C functions and C function pointers (libffi). */
  int (*FuncCreateFromTyped)(void*, const char*, PFFunctionHandle*);
  int (*FuncToCFunction)(PFFunctionHandle, const char*, PFObjectHandle*, void**);
  int (*ClosureCheckError)(PFObjectHandle);
  /* Modules. */
  int (*ModLoadFromFile)(const char*, PFModuleHandle*);
  int (*ModGetFunction)(PFModuleHandle, const char*, int, PFFunctionHandle*);
  int (*ModImport)(PFModuleHandle, PFModuleHandle);
  int (*ModListFunctionNames)(PFModuleHandle, int*, const char***);
  int (*ModExportGlobal)(PFModuleHandle, const char*, int);
  int (*ModFree)(PFModuleHandle);
  int (*ModLoadFromDescriptors)(const PFFuncDescriptor* const*, const PFFuncDescriptor* const*,
                                PFModuleHandle*);
  /* Version 2. Host functions. */
  int (*HostGateCreate)(PFObjectHandle*);
  int (*HostGateClose)(PFObjectHandle, const char*, int);
  int (*FuncCreateFromHostCFunc)(PFObjectHandle, PFPackedCFunc, void*, PFPackedCFuncFinalizer,
                                 PFFunctionHandle*);
  /* Errors with a format, memory, and the lists a binding reads. */
  int (*ErrorSetFormat)(const char*, const char*, ...);
  int (*SetAllocator)(const PFAllocator*);
  void* (*MemAlloc)(size_t);
  void* (*MemRealloc)(void*, size_t);
  void (*MemFree)(void*);
  int (*SignatureTypeInfo)(int, const char**, int*);
  const char* (*ObjectTypeName)(uint32_t);
  /* Version 3. Host objects. */
  int (*HostObjectCreate)(PFObjectHandle, void*, PFObjectFinalizer, PFObjectHandle*);
  int (*HostObjectGetPayload)(PFObjectHandle, PFObjectHandle, void**);
  /* Containers. */
  int (*ArrayCreate)(const PFValue*, const int*, int64_t, PFObjectHandle*);
  int (*ArrayGetSize)(PFObjectHandle, int64_t*);
  int (*ArrayGetItem)(PFObjectHandle, int64_t, PFValue*, int*);
  int (*MapCreate)(const PFValue*, const int*, const PFValue*, const int*, int64_t,
                   PFObjectHandle*);
  int (*MapGetSize)(PFObjectHandle, int64_t*);
  int (*MapGetItem)(PFObjectHandle, PFValue, int, PFValue*, int*, int*);
  int (*MapGetItemAt)(PFObjectHandle, int64_t, PFValue*, int*, PFValue*, int*);
  int (*ShapeCreate)(const int64_t*, int64_t, PFObjectHandle*);
  int (*ShapeGetData)(PFObjectHandle, const int64_t**, int64_t*);
  /* Version 4. Binding constants. */
  int (*FuncBind)(PFFunctionHandle, int, const int*, PFValue*, int*, PFPrePackCacheHandle,
                  PFFunctionHandle*);
  int (*FuncSetPrePack)(PFFunctionHandle, const char*, PFPrePackFunc);
  int (*PrePackCacheCreate)(PFPrePackCacheHandle*);
  int (*PrePackCacheGetStats)(PFPrePackCacheHandle, int64_t*, int64_t*, int64_t*);
  /* Version 5. Modules of functions made at run time. */
  int (*ModCreateFromFunctions)(const char*, const PFFunctionHandle*, int, PFModuleHandle*);
  /* Version 6. Calls with one frame. */
  int (*FuncCallFrame)(PFCallFrame*);
  /* Version 7. Host cycle collectors. */
  int (*ObjectFindOwnedHosts)(PFObjectHandle, PFObjectHandle, int64_t, void**, int64_t, int64_t*,
                              int64_t*);
  /* Version 8. Bulk readers of Array and Map; List and Dict. */
  int (*ArrayGetItems)(PFObjectHandle, int64_t, int64_t, PFValue*, int*);
  int (*MapGetItems)(PFObjectHandle, int64_t, int64_t, PFValue*, int*, PFValue*, int*);
  int (*ListCreate)(const PFValue*, const int*, int64_t, PFObjectHandle*);
  int (*ListGetSize)(PFObjectHandle, int64_t*);
  int (*ListGetItem)(PFObjectHandle, int64_t, PFValue*, int*);
  int (*ListSetItem)(PFObjectHandle, int64_t, PFValue, int);
  int (*ListAppend)(PFObjectHandle, PFValue, int);
  int (*ListInsert)(PFObjectHandle, int64_t, PFValue, int);
  int (*ListExtend)(PFObjectHandle, const PFValue*, const int*, int64_t);
  int (*ListReplace)(PFObjectHandle, int64_t, int64_t, const PFValue*, const int*, int64_t);
  int (*ListPop)(PFObjectHandle, int64_t, PFValue*, int*);
  int (*ListClear)(PFObjectHandle);
  int (*ListToArray)(PFObjectHandle, int64_t, int64_t, PFObjectHandle*);
  int (*DictCreate)(const PFValue*, const int*, const PFValue*, const int*, int64_t,
                    PFObjectHandle*);
  int (*DictGetSize)(PFObjectHandle, int64_t*);
  int (*DictGetItem)(PFObjectHandle, PFValue, int, PFValue*, int*, int*);
  int (*DictSetItem)(PFObjectHandle, PFValue, int, PFValue, int);
  int (*DictUpdate)(PFObjectHandle, const PFValue*, const int*, const PFValue*, const int*,
                    int64_t);
  int (*DictPop)(PFObjectHandle, PFValue, int, PFValue*, int*);
  int (*DictClear)(PFObjectHandle);
  int (*DictToArray)(PFObjectHandle, PFObjectHandle*);
  /* Data types as text. */
  int (*DataTypeFromString)(const char*, DLDataType*);
  int (*DataTypeToString)(DLDataType, char*, size_t);
  /* Versioned DLPack, read-only tensors. */
  int (*TensorCreateFromDLPackVersioned)(PFDLManagedTensorVersioned*, PFObjectHandle*);
  int (*TensorIsReadOnly)(PFObjectHandle, int*);
  int (*TensorToDLPackVersioned)(PFObjectHandle, PFDLManagedTensorVersioned**);
  /* Version 9. Registered object types. */
  int (*ObjectTypeRegister)(const PFObjectTypeDesc*, uint32_t*);
  int (*ObjectTypeFind)(const char*, uint32_t*);
  int (*ObjectTypeGetInfo)(uint32_t, const PFObjectTypeInfo**);
  int (*ObjectTypeGetField)(uint32_t, const char*, const PFFieldInfo**);
  int (*ObjectTypeGetMethod)(uint32_t, const char*, PFFunctionHandle*);
  int (*ObjectTypeGetConstructor)(uint32_t, PFFunctionHandle*);
  int (*ObjectAlloc)(uint32_t, PFObjectHandle*);
  int (*ObjectGetData)(PFObjectHandle, void**);
  int (*ObjectIsInstance)(PFObjectHandle, uint32_t, int*);
  int (*ObjectGetField)(PFObjectHandle, const PFFieldInfo*, PFValue*, int*);
  int (*ObjectSetField)(PFObjectHandle, const PFFieldInfo*, PFValue, int);
  int (*ObjectGetFieldByName)(PFObjectHandle, const char*, PFValue*, int*);
  int (*ObjectSetFieldByName)(PFObjectHandle, const char*, PFValue, int);
  int (*ObjectGetMethod)(PFObjectHandle, const char*, PFFunctionHandle*);
  int (*ModListTypes)(PFModuleHandle, int*, const uint32_t**);
  /* Version 10. Keyword calls, signatures as data, tensor helpers. */
  int (*FuncCallKw)(PFFunctionHandle, PFValue*, int*, int, const char* const*, PFValue*, int*, int,
                    PFValue*, int*);
  int (*FuncGetSignatureInfo)(PFFunctionHandle, const PFSignatureInfo**);
  int (*SignatureParse)(const char*, PFSignatureInfo**);
  void (*SignatureInfoFree)(PFSignatureInfo*);
  int (*ArgGetTensor)(const PFValue*, const int*, int, int, const char*, DLTensor**);
  int (*TensorAlloc)(int, const int64_t*, DLDataType, uint32_t, PFObjectHandle*, DLTensor**);
  /* Version 11. The direct callee convention, call targets, a function's flags. */
  int (*FuncCreateDirect)(PFDirectCFunc, void*, PFPackedCFuncFinalizer, PFFunctionHandle*);
  int (*FuncReturnString)(int, const char*, size_t, PFValue*, int*);
  int (*FuncResolve)(PFFunctionHandle, PFCallTarget*);
  int (*FuncSetFlags)(PFFunctionHandle, uint32_t);
  int (*FuncGetFlags)(PFFunctionHandle, uint32_t*);
  /* Version 12. Structural equality and hashing. */
  int (*StructuralEqual)(PFValue, int, PFValue, int, int*);
  int (*StructuralHash)(PFValue, int, uint64_t*);
  /* Version 13. JSON documents of object graphs; the reference
   * count query; PFFromJSONEx, which can refuse cycles. */
  int (*ToJSON)(PFValue, int, const char**, size_t*);
  int (*FromJSON)(const char*, size_t, PFValue*, int*);
  int (*ObjectGetRefCount)(PFObjectHandle, int64_t*);
  int (*FromJSONEx)(const char*, size_t, uint32_t, PFValue*, int*);
  /* Version 14. Structural comparison with options, and where it differs. */
  int (*StructuralCompare)(PFValue, int, PFValue, int, uint32_t, int*, const char**);
  int (*StructuralHashEx)(PFValue, int, uint32_t, uint64_t*);
} PFApi;

/* Never changes: two pointers, in this order, with these signatures. */
typedef struct PFApiBase {
  /* The table for `version` (1..PF_API_VERSION), or NULL with an error
   * recorded (ValueError) for a version this library does not have. */
  const PFApi* (*GetApi)(uint32_t version);
  /* The library version, as PF_VERSION_STRING; static storage. */
  const char* (*GetVersionString)(void);
} PFApiBase;

/* The one entry point a dynamic loader needs. Never NULL. Thread-safe. */
PF_EXPORT const PFApiBase* PFGetApiBase(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_API_TABLE_H_ */
