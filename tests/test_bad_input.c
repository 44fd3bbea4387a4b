/* Misuse of the core entry points: every detectable misuse is a -1 with an
 * error that names the entry point and the argument, never a crash, and
 * leaves nothing behind (LeakSanitizer checks at exit). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>

#include "support/pf_test.h"

/* Memory that is ours but not an object: zeroes, and a junk pattern. */
static uint64_t g_zero_struct[16];
static uint64_t g_junk_struct[16];

static int g_callee_calls;
static int counting_callee(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  (void)res;
  g_callee_calls++;
  return 0;
}

static int setup(void** state) {
  (void)state;
  memset(g_junk_struct, 0xab, sizeof(g_junk_struct));
  return 0;
}

/* ---- PFFuncCall ------------------------------------------------------------ */

static void test_call_bad_handles_and_outputs(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(counting_callee, NULL, NULL, &f));
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  PFValue rv;
  int rc;
  g_callee_calls = 0;
  assert_pf_error(PFFuncCall(NULL, NULL, NULL, 0, &rv, &rc), kPFErrTypeError, "PFFuncCall",
                  "'func'", "NULL");
  assert_pf_error(PFFuncCall(boxed, NULL, NULL, 0, &rv, &rc), kPFErrTypeError, "PFFuncCall",
                  "'func'");
  assert_pf_error(PFFuncCall(g_zero_struct, NULL, NULL, 0, &rv, &rc), kPFErrTypeError, "PFFuncCall",
                  "'func'");
  assert_pf_error(PFFuncCall(g_junk_struct, NULL, NULL, 0, &rv, &rc), kPFErrTypeError, "PFFuncCall",
                  "'func'");
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, NULL, &rc), kPFErrTypeError, "PFFuncCall",
                  "'ret_val'");
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, NULL), kPFErrTypeError, "PFFuncCall",
                  "'ret_type_code'");
  assert_pf_error(PFFuncCall(f, NULL, NULL, -1, &rv, &rc), kPFErrValueError, "PFFuncCall",
                  "'num_args'", "-1");
  assert_pf_error(PFFuncCall(f, NULL, NULL, INT32_MIN, &rv, &rc), kPFErrValueError, "'num_args'");
  int code = kPFInt;
  PFValue v = {.v_int64 = 1};
  assert_pf_error(PFFuncCall(f, NULL, &code, 1, &rv, &rc), kPFErrTypeError, "PFFuncCall", "'args'");
  assert_pf_error(PFFuncCall(f, &v, NULL, 1, &rv, &rc), kPFErrTypeError, "PFFuncCall",
                  "'type_codes'");
  assert_int_equal(g_callee_calls, 0);
  /* With num_args 0, NULL arrays are fine. */
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(g_callee_calls, 1);
  assert_pf_ok(PFObjectFree(boxed));
  assert_pf_ok(PFFuncFree(f));
}

/* A function handle that points to a block shorter than an object header
 * (a host's stray pointer to a 4-byte value) is refused after reading its
 * first 4 bytes, as every other handle check reads them: the call path
 * once read 8 at once, past the block (ASan: heap-buffer-overflow). */
static void test_call_handle_to_a_short_block(void** state) {
  (void)state;
  uint32_t* shorty = calloc(1, sizeof(uint32_t));
  assert_non_null(shorty);
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(shorty, NULL, NULL, 0, &rv, &rc), kPFErrTypeError, "PFFuncCall",
                  "'func'");
  assert_pf_error(PFFuncCallKw(shorty, NULL, NULL, 0, NULL, NULL, NULL, 0, &rv, &rc),
                  kPFErrTypeError, "PFFuncCallKw", "'func'");
  PFCallTarget t = {.size = sizeof(t)};
  assert_pf_error(PFFuncResolve(shorty, &t), kPFErrTypeError, "PFFuncResolve", "'func'");
  free(shorty);
}

static void test_call_unknown_type_codes(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(counting_callee, NULL, NULL, &f));
  const int bad[] = {kPFTypeCodeEnd, 13, 20, kPFExtBegin - 1, kPFExtEnd, 128, 1000, -1, INT32_MIN};
  PFValue args[3] = {{.v_int64 = 1}, {.v_int64 = 2}, {.v_int64 = 3}};
  PFValue rv;
  int rc;
  g_callee_calls = 0;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    int codes[3] = {kPFInt, kPFInt, bad[i]};
    char want[64];
    snprintf(want, sizeof(want), "unknown type code %d", bad[i]);
    assert_pf_error(PFFuncCall(f, args, codes, 3, &rv, &rc), kPFErrTypeError, "PFFuncCall",
                    "argument 2", want);
  }
  assert_int_equal(g_callee_calls, 0);
  assert_pf_ok(PFFuncFree(f));
}

static void test_call_null_pointers_under_codes(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(counting_callee, NULL, NULL, &f));
  const int codes_with_ptr[] = {kPFDLTensorHandle, kPFStr,          kPFBytes,
                                kPFFuncHandle,     kPFModuleHandle, kPFObjectHandle};
  PFValue rv;
  int rc;
  g_callee_calls = 0;
  for (size_t i = 0; i < sizeof(codes_with_ptr) / sizeof(codes_with_ptr[0]); ++i) {
    PFValue args[2] = {{.v_int64 = 1}, {.v_handle = NULL}};
    int codes[2] = {kPFInt, codes_with_ptr[i]};
    assert_pf_error(PFFuncCall(f, args, codes, 2, &rv, &rc), kPFErrTypeError, "PFFuncCall",
                    "argument 1", PFTypeCodeName(codes_with_ptr[i]), "NULL");
  }
  /* Bytes whose data is NULL but size is not 0. */
  PFByteArray bad_bytes = {NULL, 5};
  PFValue a = {.v_handle = &bad_bytes};
  int c = kPFBytes;
  assert_pf_error(PFFuncCall(f, &a, &c, 1, &rv, &rc), kPFErrTypeError, "PFFuncCall", "argument 0",
                  "NULL data");
  assert_int_equal(g_callee_calls, 0);
  assert_pf_ok(PFFuncFree(f));
}

static void test_call_wrong_handle_kinds(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(counting_callee, NULL, NULL, &f));
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  PFValue rv;
  int rc;
  g_callee_calls = 0;
  PFValue a = {.v_handle = boxed};
  int c = kPFFuncHandle;
  assert_pf_error(PFFuncCall(f, &a, &c, 1, &rv, &rc), kPFErrTypeError, "PFFuncCall", "argument 0",
                  "function");
  c = kPFModuleHandle;
  assert_pf_error(PFFuncCall(f, &a, &c, 1, &rv, &rc), kPFErrTypeError, "argument 0", "module");
  a.v_handle = g_zero_struct;
  c = kPFObjectHandle;
  assert_pf_error(PFFuncCall(f, &a, &c, 1, &rv, &rc), kPFErrTypeError, "argument 0", "object");
  a.v_handle = g_junk_struct;
  c = kPFFuncHandle;
  assert_pf_error(PFFuncCall(f, &a, &c, 1, &rv, &rc), kPFErrTypeError, "argument 0");
  assert_int_equal(g_callee_calls, 0);
  assert_pf_ok(PFObjectFree(boxed));
  assert_pf_ok(PFFuncFree(f));
}

/* ---- PFCFuncSetReturn ------------------------------------------------------ */

static PFRetValueHandle g_saved_ret;

static int save_ret(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)res;
  g_saved_ret = ret;
  return 0;
}

/* Tries every misuse of PFCFuncSetReturn from inside a call; each must fail
 * and leave the slot as it was (an int 5 set first). */
static int misuse_set_return(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  PFValue five = {.v_int64 = 5};
  int int_code = kPFInt;
  assert_pf_ok(PFCFuncSetReturn(ret, &five, &int_code, 1));

  assert_pf_error(PFCFuncSetReturn(NULL, &five, &int_code, 1), kPFErrTypeError, "PFCFuncSetReturn",
                  "'ret'", "NULL");
  assert_pf_error(PFCFuncSetReturn(g_zero_struct, &five, &int_code, 1), kPFErrTypeError,
                  "PFCFuncSetReturn", "'ret'");
  assert_pf_error(PFCFuncSetReturn(g_junk_struct, &five, &int_code, 1), kPFErrTypeError,
                  "PFCFuncSetReturn", "'ret'");
  assert_pf_error(PFCFuncSetReturn(ret, NULL, &int_code, 1), kPFErrTypeError, "PFCFuncSetReturn",
                  "'value'");
  assert_pf_error(PFCFuncSetReturn(ret, &five, NULL, 1), kPFErrTypeError, "PFCFuncSetReturn",
                  "'type_code'");
  assert_pf_error(PFCFuncSetReturn(ret, &five, &int_code, 0), kPFErrValueError, "PFCFuncSetReturn",
                  "'num_ret'", "0");
  assert_pf_error(PFCFuncSetReturn(ret, &five, &int_code, 2), kPFErrValueError, "PFCFuncSetReturn",
                  "'num_ret'", "2");
  const int bad_codes[] = {13, 63, 128, -1};
  for (size_t i = 0; i < 4; ++i) {
    assert_pf_error(PFCFuncSetReturn(ret, &five, (int*)&bad_codes[i], 1), kPFErrTypeError,
                    "PFCFuncSetReturn", "return value", "unknown type code");
  }
  const int ptr_codes[] = {kPFDLTensorHandle, kPFStr,          kPFBytes,
                           kPFFuncHandle,     kPFModuleHandle, kPFObjectHandle};
  PFValue null_v = {.v_handle = NULL};
  for (size_t i = 0; i < 6; ++i) {
    assert_pf_error(PFCFuncSetReturn(ret, &null_v, (int*)&ptr_codes[i], 1), kPFErrTypeError,
                    "PFCFuncSetReturn", "return value", "NULL");
  }
  PFByteArray bad_bytes = {NULL, 3};
  PFValue bv = {.v_handle = &bad_bytes};
  int bytes_code = kPFBytes;
  assert_pf_error(PFCFuncSetReturn(ret, &bv, &bytes_code, 1), kPFErrTypeError, "PFCFuncSetReturn",
                  "NULL data");
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  PFValue hv = {.v_handle = boxed};
  int func_code = kPFFuncHandle;
  assert_pf_error(PFCFuncSetReturn(ret, &hv, &func_code, 1), kPFErrTypeError, "PFCFuncSetReturn",
                  "return value", "function");
  PFObjectFree(boxed);
  /* The handle of a call nested in this one, finished: its slot is not
   * this call's (a finished call's handle that lands on the very slot of
   * a call in progress is that call's handle). */
  PFValue rv;
  int rc;
  g_saved_ret = NULL;
  assert_pf_ok(PFFuncCall(res, NULL, NULL, 0, &rv, &rc));
  assert_non_null(g_saved_ret);
  assert_ptr_not_equal(g_saved_ret, ret);
  assert_pf_error(pf_test_set_return_stale(g_saved_ret, &five, &int_code), kPFErrTypeError,
                  "PFCFuncSetReturn", "'ret'");
  return 0;
}

static void test_set_return_misuse(void** state) {
  (void)state;
  PFFunctionHandle saver = NULL, f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(save_ret, NULL, NULL, &saver));
  assert_pf_ok(PFFuncCreateFromCFunc(misuse_set_return, saver, NULL, &f));
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 5);
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFFuncFree(saver));
}

/* A handle saved from an earlier call, used after every call has returned:
 * no call is in progress, so no handle can be valid. */
static void test_set_return_outside_any_call(void** state) {
  (void)state;
  PFFunctionHandle saver = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(save_ret, NULL, NULL, &saver));
  PFValue rv;
  int rc;
  g_saved_ret = NULL;
  assert_pf_ok(PFFuncCall(saver, NULL, NULL, 0, &rv, &rc));
  assert_non_null(g_saved_ret);
  PFValue v = {.v_int64 = 1};
  int code = kPFInt;
  assert_pf_error(pf_test_set_return_stale(g_saved_ret, &v, &code), kPFErrTypeError,
                  "PFCFuncSetReturn", "'ret'");
  v.v_str = "a string that would need storage";
  code = kPFStr;
  assert_pf_error(pf_test_set_return_stale(g_saved_ret, &v, &code), kPFErrTypeError,
                  "PFCFuncSetReturn", "'ret'");
  assert_pf_ok(PFFuncFree(saver));
}

/* A callee that makes a nested call must not be able to set the nested
 * call's return after it finished, nor the outer one through a stale
 * handle of the inner one. */
static int outer_uses_inner_ret(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  PFFunctionHandle saver = res;
  PFValue rv;
  int rc;
  if (PFFuncCall(saver, NULL, NULL, 0, &rv, &rc) != 0) return -1;
  PFValue v = {.v_int64 = 1};
  int code = kPFInt;
  if (g_saved_ret == ret) return PFErrorSetFormat(kPFErrRuntimeError, "same slot");
  if (pf_test_set_return_stale(g_saved_ret, &v, &code) == 0)
    return PFErrorSetFormat(kPFErrRuntimeError, "a finished call's ret was accepted");
  v.v_int64 = 2;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_set_return_with_finished_nested_handle(void** state) {
  (void)state;
  PFFunctionHandle saver = NULL, outer = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(save_ret, NULL, NULL, &saver));
  assert_pf_ok(PFFuncCreateFromCFunc(outer_uses_inner_ret, saver, NULL, &outer));
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(outer, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 2);
  assert_pf_ok(PFFuncFree(outer));
  assert_pf_ok(PFFuncFree(saver));
}

/* ---- creating, retaining and freeing functions ---------------------------- */

static void test_function_handles(void** state) {
  (void)state;
  PFFunctionHandle out = NULL;
  assert_pf_error(PFFuncCreateFromCFunc(NULL, NULL, NULL, &out), kPFErrTypeError,
                  "PFFuncCreateFromCFunc", "'func'");
  assert_pf_error(PFFuncCreateFromCFunc(counting_callee, NULL, NULL, NULL), kPFErrTypeError,
                  "PFFuncCreateFromCFunc", "'out'");
  assert_null(out);

  atomic_int fins = 0;
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&fins, pf_test_count_fin, &boxed));
  assert_pf_error(PFFuncRetain(NULL), kPFErrTypeError, "PFFuncRetain", "'func'", "NULL");
  assert_pf_error(PFFuncRetain(boxed), kPFErrTypeError, "PFFuncRetain", "'func'");
  assert_pf_error(PFFuncRetain(g_zero_struct), kPFErrTypeError, "PFFuncRetain", "'func'");
  assert_pf_error(PFFuncFree(boxed), kPFErrTypeError, "PFFuncFree", "'func'");
  assert_pf_error(PFFuncFree(g_junk_struct), kPFErrTypeError, "PFFuncFree", "'func'");
  /* The failed free did not drop the boxed object's reference. */
  assert_int_equal(atomic_load(&fins), 0);
  assert_pf_ok(PFObjectFree(boxed));
  assert_int_equal(atomic_load(&fins), 1);
}

/* ---- objects and tensors ------------------------------------------------- */

static void test_objects(void** state) {
  (void)state;
  uint32_t ti = 0;
  void* payload = NULL;
  assert_pf_error(PFObjectRetain(NULL), kPFErrTypeError, "PFObjectRetain", "'obj'", "NULL");
  assert_pf_error(PFObjectRetain(g_zero_struct), kPFErrTypeError, "PFObjectRetain", "'obj'");
  assert_pf_error(PFObjectFree(g_junk_struct), kPFErrTypeError, "PFObjectFree", "'obj'");
  assert_pf_error(PFObjectGetTypeIndex(NULL, &ti), kPFErrTypeError, "PFObjectGetTypeIndex",
                  "'obj'");
  assert_pf_error(PFObjectGetTypeIndex(g_junk_struct, &ti), kPFErrTypeError, "PFObjectGetTypeIndex",
                  "'obj'");
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&ti, NULL, &boxed));
  assert_pf_error(PFObjectGetTypeIndex(boxed, NULL), kPFErrTypeError, "PFObjectGetTypeIndex",
                  "'out'");
  assert_pf_error(PFObjectGetBoxedPayload(NULL, &payload), kPFErrTypeError,
                  "PFObjectGetBoxedPayload", "'obj'");
  assert_pf_error(PFObjectGetBoxedPayload(boxed, NULL), kPFErrTypeError, "PFObjectGetBoxedPayload",
                  "'out'");
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(counting_callee, NULL, NULL, &f));
  assert_pf_error(PFObjectGetBoxedPayload(f, &payload), kPFErrTypeError, "PFObjectGetBoxedPayload",
                  "'obj'", "boxed");
  assert_null(payload);
  assert_pf_error(PFObjectCreateBoxed(NULL, NULL, NULL), kPFErrTypeError, "PFObjectCreateBoxed",
                  "'out'");
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFObjectFree(boxed));
}

static void test_tensors(void** state) {
  (void)state;
  PFObjectHandle out = NULL;
  DLTensor* dl = NULL;
  DLManagedTensor* m = NULL;
  assert_pf_error(PFTensorCreateFromDLPack(NULL, &out), kPFErrTypeError, "PFTensorCreateFromDLPack",
                  "'managed'");
  DLManagedTensor mt = {.dl_tensor = {.ndim = 0}};
  assert_pf_error(PFTensorCreateFromDLPack(&mt, NULL), kPFErrTypeError, "PFTensorCreateFromDLPack",
                  "'out'");
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  assert_pf_error(PFTensorGetDLTensor(NULL, &dl), kPFErrTypeError, "PFTensorGetDLTensor",
                  "'tensor'");
  assert_pf_error(PFTensorGetDLTensor(boxed, &dl), kPFErrTypeError, "PFTensorGetDLTensor",
                  "'tensor'");
  assert_pf_error(PFTensorToDLPack(NULL, &m), kPFErrTypeError, "PFTensorToDLPack", "'tensor'");
  assert_pf_error(PFTensorToDLPack(boxed, &m), kPFErrTypeError, "PFTensorToDLPack", "'tensor'");
  PFObjectHandle t = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(&mt, &t));
  assert_pf_error(PFTensorGetDLTensor(t, NULL), kPFErrTypeError, "PFTensorGetDLTensor", "'out'");
  assert_pf_error(PFTensorToDLPack(t, NULL), kPFErrTypeError, "PFTensorToDLPack", "'out'");
  assert_null(dl);
  assert_null(m);
  assert_pf_ok(PFObjectFree(t));
  assert_pf_ok(PFObjectFree(boxed));
}

/* ---- registry ------------------------------------------------------------- */

static void test_registry_names_and_outputs(void** state) {
  (void)state;
  PFFunctionHandle f = NULL, out = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(counting_callee, NULL, NULL, &f));
  char* long_name = malloc(PF_NAME_MAX + 2);
  memset(long_name, 'L', PF_NAME_MAX + 1);
  long_name[PF_NAME_MAX + 1] = '\0';

  assert_pf_error(PFFuncRegisterGlobal(NULL, f, 0), kPFErrTypeError, "PFFuncRegisterGlobal",
                  "'name'", "NULL");
  assert_pf_error(PFFuncRegisterGlobal("", f, 0), kPFErrValueError, "PFFuncRegisterGlobal",
                  "'name'", "empty");
  assert_pf_error(PFFuncRegisterGlobal(long_name, f, 0), kPFErrValueError, "PFFuncRegisterGlobal",
                  "'name'", "longer");
  assert_pf_error(PFFuncRegisterGlobalEx(NULL, f, 0), kPFErrTypeError, "PFFuncRegisterGlobalEx",
                  "'name'");
  assert_pf_error(PFFuncRegisterGlobalEx("", f, 0), kPFErrValueError, "PFFuncRegisterGlobalEx",
                  "'name'");

  assert_pf_error(PFFuncGetGlobal(NULL, &out), kPFErrTypeError, "PFFuncGetGlobal", "'name'");
  assert_pf_error(PFFuncGetGlobal("", &out), kPFErrValueError, "PFFuncGetGlobal", "'name'");
  assert_pf_error(PFFuncGetGlobal(long_name, &out), kPFErrValueError, "PFFuncGetGlobal", "'name'");
  assert_pf_error(PFFuncGetGlobal("bad.x", NULL), kPFErrTypeError, "PFFuncGetGlobal", "'out'");

  assert_pf_error(PFFuncRemoveGlobal(NULL), kPFErrTypeError, "PFFuncRemoveGlobal", "'name'");
  assert_pf_error(PFFuncRemoveGlobal(""), kPFErrValueError, "PFFuncRemoveGlobal", "'name'");
  assert_pf_error(PFFuncRemoveGlobal(long_name), kPFErrValueError, "PFFuncRemoveGlobal", "'name'");

  int n = 0;
  const char** arr = NULL;
  assert_pf_error(PFFuncListGlobalNames(NULL, &arr), kPFErrTypeError, "PFFuncListGlobalNames",
                  "'out_size'");
  assert_pf_error(PFFuncListGlobalNames(&n, NULL), kPFErrTypeError, "PFFuncListGlobalNames",
                  "'out_array'");
  assert_pf_error(PFFuncListGlobalNamesWithPrefix("x", NULL, &arr), kPFErrTypeError,
                  "PFFuncListGlobalNamesWithPrefix", "'out_size'");
  assert_pf_error(PFFuncListGlobalNamesWithPrefix("x", &n, NULL), kPFErrTypeError,
                  "PFFuncListGlobalNamesWithPrefix", "'out_array'");
  assert_pf_error(PFRegistryIsSealed(NULL), kPFErrTypeError, "PFRegistryIsSealed", "'out'");
  assert_null(out);
  assert_null(arr);
  free(long_name);
  assert_pf_ok(PFFuncFree(f));
}

static void test_registry_non_functions(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&fins, pf_test_count_fin, &boxed));
  assert_pf_error(PFFuncRegisterGlobal("bad.func", NULL, 0), kPFErrTypeError,
                  "PFFuncRegisterGlobal", "'func'", "NULL");
  assert_pf_error(PFFuncRegisterGlobal("bad.func", boxed, 0), kPFErrTypeError,
                  "PFFuncRegisterGlobal", "'func'");
  assert_pf_error(PFFuncRegisterGlobal("bad.func", g_junk_struct, 1), kPFErrTypeError,
                  "PFFuncRegisterGlobal", "'func'");
  assert_pf_error(PFFuncRegisterGlobalEx("bad.func", boxed, kPFRegisterProtected), kPFErrTypeError,
                  "PFFuncRegisterGlobalEx", "'func'");
  PFFunctionHandle out = (PFFunctionHandle)(uintptr_t)1;
  assert_pf_ok(PFFuncGetGlobal("bad.func", &out));
  assert_null(out);
  assert_pf_ok(PFObjectFree(boxed));
  assert_int_equal(atomic_load(&fins), 1);
}

/* ---- outputs on failure ---------------------------------------------------- */

/* The allocator main() installs: the system's, unless a test sets
 * g_fail_allocs, when every allocation fails. */
static atomic_int g_fail_allocs;
static void* switch_malloc(size_t n, void* ud) {
  (void)ud;
  return atomic_load(&g_fail_allocs) ? NULL : malloc(n);
}
static void* switch_realloc(void* p, size_t n, void* ud) {
  (void)ud;
  return atomic_load(&g_fail_allocs) ? NULL : realloc(p, n);
}
static void switch_free(void* p, void* ud) {
  (void)ud;
  free(p);
}

static int failing_hook(void* res, int position, PFValue value, int code,
                        const PFAllocator* allocator, PFValue* out, int* out_code, int* is_packed) {
  (void)res, (void)position, (void)value, (void)code, (void)allocator, (void)out;
  (void)out_code, (void)is_packed;
  return PFErrorSetFormat(kPFErrValueError, "failing_hook: refused");
}

static int failing_callee(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)ret, (void)res;
  return PFErrorSetFormat(kPFErrRuntimeError, "failing_callee: failed");
}

/* The header's rule: outputs are written only on success. Each failing
 * call below, of a representative entry point of every kind (creating,
 * looking up, reading, calling, binding; misuse and lack of memory),
 * leaves the caller's output variables as they were. */
static void test_outputs_untouched_on_failure(void** state) {
  (void)state;
  void* const mark = g_junk_struct; /* what the outputs hold before */
  PFFunctionHandle f = NULL, hooked = NULL, failing = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(counting_callee, NULL, NULL, &f));
  assert_pf_ok(PFFuncCreateFromCFunc(counting_callee, NULL, NULL, &hooked));
  assert_pf_ok(PFFuncSetPrePack(hooked, "test/failing", failing_hook));
  assert_pf_ok(PFFuncCreateFromCFunc(failing_callee, NULL, NULL, &failing));
  void* out = mark;

  /* Binding: a dead function, a bad position, a hook that fails. */
  int pos = 0, code = kPFInt;
  PFValue v = {.v_int64 = 1};
  assert_pf_error(PFFuncBind(g_junk_struct, 1, &pos, &v, &code, NULL, &out), kPFErrTypeError,
                  "PFFuncBind", "'func'");
  assert_ptr_equal(out, mark);
  int bad_pos = -1;
  assert_pf_error(PFFuncBind(f, 1, &bad_pos, &v, &code, NULL, &out), kPFErrValueError, "PFFuncBind",
                  "positions[0]");
  assert_ptr_equal(out, mark);
  assert_pf_error(PFFuncBind(hooked, 1, &pos, &v, &code, NULL, &out), kPFErrValueError,
                  "failing_hook: refused");
  assert_ptr_equal(out, mark);

  /* Creating: functions, containers, a closure, a module. */
  assert_pf_error(PFFuncCreateFromCFunc(NULL, NULL, NULL, &out), kPFErrTypeError,
                  "PFFuncCreateFromCFunc");
  assert_ptr_equal(out, mark);
  assert_pf_error(PFFuncCreateFromTyped((void*)counting_callee, "int64(int64,,int64)", &out),
                  kPFErrValueError, "bad signature");
  assert_ptr_equal(out, mark);
  int bad_code = 200;
  assert_pf_error(PFArrayCreate(&v, &bad_code, 1, &out), kPFErrTypeError, "PFArrayCreate");
  assert_ptr_equal(out, mark);
  PFValue keys[2] = {{.v_int64 = 3}, {.v_int64 = 3}};
  int codes[2] = {kPFInt, kPFInt};
  assert_pf_error(PFMapCreate(keys, codes, keys, codes, 2, &out), kPFErrValueError, "PFMapCreate",
                  "repeats");
  assert_ptr_equal(out, mark);
  assert_pf_error(PFShapeCreate(NULL, 1, &out), kPFErrTypeError, "PFShapeCreate");
  assert_ptr_equal(out, mark);
  void* fn = mark;
  assert_pf_error(PFFuncToCFunction(f, "int64(", &out, &fn), kPFErrValueError, "bad signature");
  assert_ptr_equal(out, mark);
  assert_ptr_equal(fn, mark);
  assert_pf_error(PFModLoadFromFile("/nonexistent/packedfunc-test.so", &out), kPFErrRuntimeError);
  assert_ptr_equal(out, mark);

  /* Looking up and reading. */
  assert_pf_error(PFFuncGetGlobal("", &out), kPFErrValueError, "PFFuncGetGlobal");
  assert_ptr_equal(out, mark);
  PFObjectHandle a = NULL;
  assert_pf_ok(PFArrayCreate(&v, &code, 1, &a));
  PFValue item = {.v_handle = mark};
  int item_code = -5, found = -5;
  assert_pf_error(PFArrayGetItem(a, 1, &item, &item_code), kPFErrIndexError, "PFArrayGetItem");
  assert_pf_error(PFMapGetItem(a, v, kPFInt, &item, &item_code, &found), kPFErrTypeError,
                  "PFMapGetItem");
  assert_ptr_equal(item.v_handle, mark);
  assert_int_equal(item_code, -5);
  assert_int_equal(found, -5);
  size_t size = 77;
  assert_pf_error(PFGetStructSize("NoSuchStruct", &size), kPFErrKeyError, "PFGetStructSize");
  assert_int_equal(size, 77);

  /* Calling a function that fails. */
  PFValue rv = {.v_handle = mark};
  int rc = -5;
  assert_pf_error(PFFuncCall(failing, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError,
                  "failing_callee");
  assert_ptr_equal(rv.v_handle, mark);
  assert_int_equal(rc, -5);

  /* No memory. */
  atomic_store(&g_fail_allocs, 1);
  int rc_cache = PFPrePackCacheCreate(&out);
  int rc_boxed = PFObjectCreateBoxed(NULL, NULL, &out);
  int rc_array = PFArrayCreate(&v, &code, 1, &out);
  int rc_func = PFFuncCreateFromCFunc(counting_callee, NULL, NULL, &out);
  atomic_store(&g_fail_allocs, 0);
  assert_pf_error(rc_cache, kPFErrMemoryError);
  assert_pf_error(rc_boxed, kPFErrMemoryError);
  assert_pf_error(rc_array, kPFErrMemoryError);
  assert_pf_error(rc_func, kPFErrMemoryError);
  assert_ptr_equal(out, mark);

  assert_pf_ok(PFObjectFree(a));
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFFuncFree(hooked));
  assert_pf_ok(PFFuncFree(failing));
}

/* ---- sizes and metadata ------------------------------------------------- */

static void test_struct_size_and_info(void** state) {
  (void)state;
  size_t sz = 0;
  assert_pf_error(PFGetStructSize(NULL, &sz), kPFErrTypeError, "PFGetStructSize", "'name'");
  assert_pf_error(PFGetStructSize("PFValue", NULL), kPFErrTypeError, "PFGetStructSize", "'out'");
  assert_int_equal(sz, 0);

  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  const char* name = NULL;
  assert_pf_error(PFFuncSetInfo(NULL, "n", NULL, NULL), kPFErrTypeError, "PFFuncSetInfo", "'func'");
  assert_pf_error(PFFuncSetInfo(boxed, "n", NULL, NULL), kPFErrTypeError, "PFFuncSetInfo",
                  "'func'");
  assert_pf_error(PFFuncGetInfo(NULL, &name, NULL, NULL), kPFErrTypeError, "PFFuncGetInfo",
                  "'func'");
  assert_pf_error(PFFuncGetInfo(g_junk_struct, &name, NULL, NULL), kPFErrTypeError, "PFFuncGetInfo",
                  "'func'");
  assert_null(name);
  assert_pf_ok(PFObjectFree(boxed));
}

int main(void) {
  /* Before anything allocates (test_outputs_untouched_on_failure). */
  PFAllocator alloc = {switch_malloc, switch_realloc, switch_free, NULL};
  if (PFSetAllocator(&alloc) != 0) {
    fprintf(stderr, "PFSetAllocator failed: %s\n", PFGetLastError());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_call_bad_handles_and_outputs),
      cmocka_unit_test(test_call_handle_to_a_short_block),
      cmocka_unit_test(test_call_unknown_type_codes),
      cmocka_unit_test(test_call_null_pointers_under_codes),
      cmocka_unit_test(test_call_wrong_handle_kinds),
      cmocka_unit_test(test_set_return_misuse),
      cmocka_unit_test(test_set_return_outside_any_call),
      cmocka_unit_test(test_set_return_with_finished_nested_handle),
      cmocka_unit_test(test_function_handles),
      cmocka_unit_test(test_objects),
      cmocka_unit_test(test_tensors),
      cmocka_unit_test(test_registry_names_and_outputs),
      cmocka_unit_test(test_registry_non_functions),
      cmocka_unit_test(test_struct_size_and_info),
      cmocka_unit_test(test_outputs_untouched_on_failure),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
