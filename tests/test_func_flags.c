/* A function's flags (PFFuncSetFlags, PFFuncGetFlags): the hints that hosts
 * read, such as kPFFuncNonBlocking (keep the interpreter lock), the
 * refusals of bad input, and the flags that registrations give
 * (PF_REGISTER_FLAGS, PF_NONBLOCKING, kPFMethodNonBlocking) when their
 * module loads. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "support/pf_test.h"

/* f() as an int64. */
static int64_t call_no_args(PFFunctionHandle f) {
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  return rv.v_int64;
}

/* A function starts with no flag, gains the ones set, and keeps them: a
 * second set adds, never clears. */
static void test_flags_set_and_read(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  uint32_t flags = 99;
  assert_pf_ok(PFFuncGetFlags(f, &flags));
  assert_int_equal(flags, 0);
  assert_pf_ok(PFFuncSetFlags(f, kPFFuncNonBlocking));
  assert_pf_ok(PFFuncGetFlags(f, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  assert_pf_ok(PFFuncSetFlags(f, 0));
  assert_pf_ok(PFFuncGetFlags(f, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  /* The flag is a hint: calls are unchanged. */
  PFValue v = {.v_int64 = 5}, rv;
  int code = kPFInt, rc;
  assert_pf_ok(PFFuncCall(f, &v, &code, 1, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 5);
  /* Through the API table too. */
  const PFApi* api = PFGetApiBase()->GetApi(11);
  assert_non_null(api);
  flags = 0;
  assert_pf_ok(api->FuncGetFlags(f, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  assert_pf_ok(PFFuncFree(f));
}

/* Bad input: -1 with an error naming the entry point and the argument;
 * nothing set, nothing written. */
static void test_flags_bad_input(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  uint32_t flags = 7;
  assert_pf_error(PFFuncSetFlags(NULL, kPFFuncNonBlocking), "TypeError", "PFFuncSetFlags",
                  "'func'");
  assert_pf_error(PFFuncGetFlags(NULL, &flags), "TypeError", "PFFuncGetFlags", "'func'");
  assert_int_equal(flags, 7);
  /* Not a function: an array. */
  PFObjectHandle arr = NULL;
  assert_pf_ok(PFArrayCreate(NULL, NULL, 0, &arr));
  assert_pf_error(PFFuncSetFlags(arr, kPFFuncNonBlocking), "TypeError", "PFFuncSetFlags", "'func'");
  assert_pf_error(PFFuncGetFlags(arr, &flags), "TypeError", "PFFuncGetFlags", "'func'");
  assert_pf_ok(PFObjectFree(arr));
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  assert_pf_error(PFFuncGetFlags(f, NULL), "TypeError", "PFFuncGetFlags", "'out'");
  assert_pf_error(PFFuncSetFlags(f, kPFFuncNonBlocking | 0x80u), "ValueError", "PFFuncSetFlags",
                  "'flags'", "unknown bits 0x80");
  assert_pf_ok(PFFuncGetFlags(f, &flags));
  assert_int_equal(flags, 0); /* all or nothing */
  assert_pf_ok(PFFuncFree(f));
}

static void* set_flags_thread(void* f) {
  return PFFuncSetFlags(f, kPFFuncNonBlocking) == 0 ? f : NULL;
}

/* Threads that set and read the flags of one function at once (TSan). */
static void test_flags_threads(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  pthread_t t[4];
  for (int i = 0; i < 4; ++i) assert_int_equal(pthread_create(&t[i], NULL, set_flags_thread, f), 0);
  for (int i = 0; i < 4; ++i) {
    void* r = NULL;
    uint32_t flags;
    assert_pf_ok(PFFuncGetFlags(f, &flags));
    assert_true(flags == 0 || flags == kPFFuncNonBlocking);
    assert_int_equal(pthread_join(t[i], &r), 0);
    assert_ptr_equal(r, f);
  }
  uint32_t flags = 0;
  assert_pf_ok(PFFuncGetFlags(f, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  assert_pf_ok(PFFuncFree(f));
}

/* A function bound to constants (PFFuncBind) calls the function it binds:
 * it has that function's flags, whatever is bound. */
static void test_bound_functions_inherit_flags(void** state) {
  (void)state;
  PFFunctionHandle quick = NULL, plain = NULL, bound = NULL, twice = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &quick));
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &plain));
  assert_pf_ok(PFFuncSetFlags(quick, kPFFuncNonBlocking));
  int pos = 0, code = kPFInt;
  PFValue v = {.v_int64 = 7};
  uint32_t flags = 99;
  assert_pf_ok(PFFuncBind(quick, 1, &pos, &v, &code, NULL, &bound));
  assert_pf_ok(PFFuncGetFlags(bound, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  /* A binding of a binding, with nothing bound. */
  assert_pf_ok(PFFuncBind(bound, 0, NULL, NULL, NULL, NULL, &twice));
  assert_pf_ok(PFFuncGetFlags(twice, &flags));
  assert_int_equal(flags, kPFFuncNonBlocking);
  assert_int_equal(call_no_args(twice), 7);
  assert_pf_ok(PFFuncFree(twice));
  assert_pf_ok(PFFuncFree(bound));
  assert_pf_ok(PFFuncBind(plain, 1, &pos, &v, &code, NULL, &bound));
  assert_pf_ok(PFFuncGetFlags(bound, &flags));
  assert_int_equal(flags, 0);
  assert_pf_ok(PFFuncFree(bound));
  assert_pf_ok(PFFuncFree(quick));
  assert_pf_ok(PFFuncFree(plain));
}

/* ---- flags given at registration ---- */

static int64_t ff_add(int64_t a, int64_t b) { return a + b; }
static int64_t ff_seven(void) { return 7; }
PF_REGISTER_TYPED("ff.typed", ff_add, "int64(int64,int64)");
PF_REGISTER_FLAGS("ff.typed", kPFFuncNonBlocking);
PF_REGISTER_PACKED("ff.packed", pf_test_echo);
PF_REGISTER_FLAGS("ff.packed", kPFFuncNonBlocking);
PF_REGISTER_PACKED("ff.plain", pf_test_echo);
PF_REGISTER_CHECKED("ff.checked", ff_add, PF_RET(int64), PF_ARG(int64, a), PF_ARG(int64, b),
                    PF_NONBLOCKING, PF_DOC("Adds."));
PF_REGISTER_CHECKED("ff.checked_doc_first", ff_add, PF_RET(int64), PF_ARG(int64, a),
                    PF_ARG(int64, b), PF_DOC("Adds."), PF_NONBLOCKING);
PF_REGISTER_CHECKED("ff.checked_no_args", ff_seven, PF_RET(int64), PF_NONBLOCKING);
PF_REGISTER_CHECKED("ff.checked_plain", ff_add, PF_RET(int64), PF_ARG(int64, a), PF_ARG(int64, b));

typedef struct {
  int64_t n;
} FfBox;
static int64_t ff_box_get(PFObjectHandle self) {
  void* data = NULL;
  return PFObjectGetData(self, &data) == 0 ? ((FfBox*)data)->n + 1 : -1;
}
static const PFMethodDesc k_ff_methods[] = {
    PF_METHOD_CHECKED("get", ff_box_get, PF_RET(int64), PF_ARG(obj(ff.Box), self), PF_NONBLOCKING),
    PF_STATIC_METHOD_CHECKED("seven", ff_seven, PF_RET(int64), PF_NONBLOCKING, PF_DOC("7.")),
    {"by_hand", NULL, (void (*)(void))ff_box_get, "int64(self: object)", kPFMethodNonBlocking,
     NULL},
    PF_METHOD_CHECKED("slow_get", ff_box_get, PF_RET(int64), PF_ARG(obj(ff.Box), self)),
};
static const PFObjectTypeDesc k_ff_box = {
    PF_OBJECT_TYPE_DESC_ABI, "ff.Box", NULL, sizeof(FfBox), NULL, NULL, NULL, 0, k_ff_methods,
    PF_COUNTOF(k_ff_methods)};
PF_REGISTER_OBJECT_TYPE(k_ff_box);

static uint32_t flags_of(PFFunctionHandle f) {
  uint32_t flags = 99;
  assert_pf_ok(PFFuncGetFlags(f, &flags));
  return flags;
}

static uint32_t module_flags(PFModuleHandle m, const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(m, name, 0, &f));
  assert_non_null(f);
  uint32_t flags = flags_of(f);
  assert_pf_ok(PFFuncFree(f));
  return flags;
}

/* Every form gives its function the flag when the module loads; the
 * others have none; the records are not functions of the module. */
static void test_registered_flags_arrive(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_ok(PF_MODULE_LOAD_SELF(&m));
  static const char* const kept[] = {"ff.typed", "ff.packed", "ff.checked", "ff.checked_doc_first",
                                     "ff.checked_no_args"};
  for (size_t i = 0; i < PF_COUNTOF(kept); ++i)
    assert_int_equal(module_flags(m, kept[i]), kPFFuncNonBlocking);
  assert_int_equal(module_flags(m, "ff.plain"), 0);
  assert_int_equal(module_flags(m, "ff.checked_plain"), 0);
  int n = 0;
  const char** names = NULL;
  assert_pf_ok(PFModListFunctionNames(m, &n, &names));
  assert_int_equal(n, 7);
  /* The flag changes neither the signature nor the doc nor the call. */
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(m, "ff.checked_doc_first", 0, &f));
  const char *sig = NULL, *doc = NULL;
  assert_pf_ok(PFFuncGetInfo(f, NULL, &sig, &doc));
  assert_string_equal(sig, "int64(a:int64,b:int64)");
  assert_string_equal(doc, "Adds.");
  PFValue v[2] = {{.v_int64 = 2}, {.v_int64 = 3}}, rv;
  int codes[2] = {kPFInt, kPFInt}, rc;
  assert_pf_ok(PFFuncCall(f, v, codes, 2, &rv, &rc));
  assert_int_equal(rv.v_int64, 5);
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFModGetFunction(m, "ff.checked_no_args", 0, &f));
  assert_pf_ok(PFFuncGetInfo(f, NULL, &sig, NULL));
  assert_string_equal(sig, "int64()");
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFModFree(m));
}

/* A method flagged kPFMethodNonBlocking (PF_NONBLOCKING in the checked
 * forms, or by hand) makes a function with kPFFuncNonBlocking, unbound and
 * bound; the flag is reported in the method's info. */
static void test_method_flags_arrive(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_ok(PF_MODULE_LOAD_SELF(&m));
  uint32_t type = 0;
  assert_pf_ok(PFObjectTypeFind("ff.Box", &type));
  const PFObjectTypeInfo* info = NULL;
  assert_pf_ok(PFObjectTypeGetInfo(type, &info));
  static const struct {
    const char* name;
    uint32_t method_flags, func_flags;
  } k_expect[] = {
      {"get", kPFMethodNonBlocking, kPFFuncNonBlocking},
      {"seven", kPFMethodStatic | kPFMethodNonBlocking, kPFFuncNonBlocking},
      {"by_hand", kPFMethodNonBlocking, kPFFuncNonBlocking},
      {"slow_get", 0, 0},
  };
  assert_int_equal(info->num_methods, PF_COUNTOF(k_expect));
  for (size_t i = 0; i < PF_COUNTOF(k_expect); ++i) {
    const PFMethodInfo* mi = NULL;
    for (int j = 0; j < info->num_methods; ++j)
      if (strcmp(info->methods[j]->name, k_expect[i].name) == 0) mi = info->methods[j];
    assert_non_null(mi);
    assert_int_equal(mi->flags, k_expect[i].method_flags);
    PFFunctionHandle f = NULL;
    assert_pf_ok(PFObjectTypeGetMethod(type, k_expect[i].name, &f));
    assert_int_equal(flags_of(f), k_expect[i].func_flags);
    assert_pf_ok(PFFuncFree(f));
  }
  PFObjectHandle box = NULL;
  assert_pf_ok(PFObjectAlloc(type, &box));
  PFFunctionHandle get = NULL;
  assert_pf_ok(PFObjectGetMethod(box, "get", &get));
  assert_int_equal(flags_of(get), kPFFuncNonBlocking);
  assert_int_equal(call_no_args(get), 1);
  assert_pf_ok(PFFuncFree(get));
  assert_pf_ok(PFObjectFree(box));
  assert_pf_ok(PFModFree(m));
}

/* A descriptor of `kind` (module.h) with only a name and a packed function. */
static PFFuncDescriptor descriptor(uint32_t kind, const char* name, PFPackedCFunc packed) {
  return (PFFuncDescriptor){
      .abi = PF_FUNC_DESCRIPTOR_ABI, .kind = kind, .name = name, .packed = packed};
}

static PFFuncDescriptor flags_record(const char* name, uint32_t flags) {
  return descriptor(PF_FUNC_DESCRIPTOR_FLAGS(flags), name, NULL);
}

/* Loads the packed t.echo and `rec`: t.echo's flags, or -1 with the
 * load's error. */
static int64_t load_with(PFFuncDescriptor rec) {
  const PFFuncDescriptor echo = descriptor(kPFFuncDescriptorPacked, "t.echo", pf_test_echo);
  const PFFuncDescriptor* table[] = {&rec, &echo};
  PFModuleHandle m = NULL;
  if (PFModLoadFromDescriptors(table, table + 2, &m) != 0) return -1;
  int64_t flags = module_flags(m, "t.echo");
  assert_pf_ok(PFModFree(m));
  return flags;
}

/* A flags record before its function works; one without flags changes
 * nothing; one naming no function of the module, or with bits this
 * library does not know, fails the whole load, naming the function. */
static void test_flags_records(void** state) {
  (void)state;
  assert_int_equal(load_with(flags_record("t.echo", kPFFuncNonBlocking)), kPFFuncNonBlocking);
  assert_int_equal(load_with(flags_record("t.echo", 0)), 0);
  assert_pf_error(load_with(flags_record("t.absent", kPFFuncNonBlocking)), "ValueError",
                  "PFModLoadFromDescriptors", "flags record of function t.absent",
                  "names no function of it");
  assert_pf_error(load_with(flags_record("t.echo", kPFFuncNonBlocking | 0x40u)), "ValueError",
                  "flags record of function t.echo", "unknown bits 0x40", "knows 0x1");
  assert_pf_error(load_with(flags_record(NULL, kPFFuncNonBlocking)), "ValueError",
                  "descriptor 0 has a NULL name");
  assert_pf_error(load_with(flags_record("", kPFFuncNonBlocking)), "ValueError",
                  "descriptor 0 has a empty name");
}

/* A method with a flag bit that this library does not know is refused
 * with the type, naming the method. */
static void test_unknown_method_flag_bits(void** state) {
  (void)state;
  const PFMethodDesc methods[] = {
      {"get", NULL, (void (*)(void))ff_box_get, "int64(self: object)", kPFMethodNonBlocking | 0x8u,
       NULL},
  };
  const PFObjectTypeDesc desc = {
      PF_OBJECT_TYPE_DESC_ABI, "ff.BadFlags", NULL, sizeof(FfBox), NULL, NULL, NULL, 0, methods, 1};
  uint32_t type = 0;
  assert_pf_error(PFObjectTypeRegister(&desc, &type), "ValueError", "ff.BadFlags",
                  "method 'get': unknown flag bits 0x8");
  assert_int_equal(type, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_flags_set_and_read),
      cmocka_unit_test(test_flags_bad_input),
      cmocka_unit_test(test_flags_threads),
      cmocka_unit_test(test_bound_functions_inherit_flags),
      cmocka_unit_test(test_registered_flags_arrive),
      cmocka_unit_test(test_method_flags_arrive),
      cmocka_unit_test(test_flags_records),
      cmocka_unit_test(test_unknown_method_flag_bits),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
