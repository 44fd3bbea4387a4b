/* Object types from module files: loading registers them; a module whose
 * types were never used unloads as before, its types going dormant until
 * it is loaded again; a used type keeps its code loaded for good, so an
 * instance outliving every handle of its module still finalizes; a clash
 * of keys or a bad description fails the load and closes the library; the
 * demo plugin's types work end to end. This binary links the shared
 * runtime, as the fixture modules do. The tests run in order: the first
 * needs mt.Thing unused. */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "support/pf_test.h"

#if !defined(PF_TEST_MODULE_DIR) || !defined(PF_TEST_DEMO_PLUGIN)
#error "the Makefile passes PF_TEST_MODULE_DIR and PF_TEST_DEMO_PLUGIN"
#endif

static const char* mod_path(const char* file) {
  static char buf[4096];
  snprintf(buf, sizeof(buf), "%s/%s", PF_TEST_MODULE_DIR, file);
  return buf;
}

static PFModuleHandle load(const char* path) {
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromFile(path, &m));
  return m;
}

/* Whether the dynamic loader still has the library mapped. */
static int is_loaded(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
  if (h != NULL) dlclose(h);
  return h != NULL;
}

static PFFunctionHandle get(PFModuleHandle m, const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(m, name, 0, &f));
  assert_non_null(f);
  return f;
}

static int64_t call_int(PFFunctionHandle f, int n, PFValue* a, int* c) {
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(f, a, c, n, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  return rv.v_int64;
}

static void test_unused_types_unload_and_come_back(void** state) {
  (void)state;
  const char* path = mod_path("mod_types.so");
  PFModuleHandle m = load(path);
  int n = 0;
  const uint32_t* ix = NULL;
  assert_pf_ok(PFModListTypes(m, &n, &ix));
  assert_int_equal(n, 1);
  uint32_t thing = ix[0];
  assert_string_equal(PFObjectTypeName(thing), "mt.Thing");
  const PFObjectTypeInfo* ti = NULL;
  assert_pf_ok(PFObjectTypeGetInfo(thing, &ti));
  assert_string_equal(ti->doc, "A thing.");
  /* The module's function names its own type. */
  PFFunctionHandle value_of = get(m, "mt.value_of");
  const char* sig = NULL;
  assert_pf_ok(PFFuncGetInfo(value_of, NULL, &sig, NULL));
  assert_string_equal(sig, "int64(obj<mt.Thing>)");
  PFFuncFree(value_of);
  /* Registering copied data only: the library goes with the module. */
  PFModFree(m);
  assert_false(is_loaded(path));
  uint32_t found = 0;
  assert_pf_ok(PFObjectTypeFind("mt.Thing", &found));
  assert_int_equal(found, thing);
  assert_pf_ok(PFObjectTypeGetInfo(thing, &ti)); /* the description stays */
  assert_string_equal(ti->fields[1]->name, "note");
  PFObjectHandle o = NULL;
  assert_pf_error(PFObjectAlloc(thing, &o), kPFErrRuntimeError, "object type 'mt.Thing'",
                  "has been unloaded (load the module again)");
  PFFunctionHandle f = NULL;
  assert_pf_error(PFObjectTypeGetConstructor(thing, &f), kPFErrRuntimeError, "unloaded");
  assert_pf_error(PFObjectTypeGetMethod(thing, "get", &f), kPFErrRuntimeError, "unloaded");
  /* Loading it again makes the same type usable with the new code. */
  m = load(path);
  assert_pf_ok(PFModListTypes(m, &n, &ix));
  assert_int_equal(ix[0], thing);
  PFFunctionHandle ctor = NULL;
  assert_pf_ok(PFObjectTypeGetConstructor(thing, &ctor));
  PFValue a = {.v_int64 = 5}, rv;
  int c = kPFInt, rc;
  assert_pf_ok(PFFuncCall(ctor, &a, &c, 1, &rv, &rc));
  PFObjectHandle inst = rv.v_handle;
  PFFunctionHandle getter = NULL, fins = get(m, "mt.fins");
  assert_pf_ok(PFObjectGetMethod(inst, "get", &getter));
  assert_int_equal(call_int(getter, 0, NULL, NULL), 5);
  int64_t fins_before = call_int(fins, 0, NULL, NULL);
  /* Used: its code stays loaded when every handle of the module goes... */
  PFFuncFree(getter);
  PFFuncFree(ctor);
  PFFuncFree(fins);
  PFModFree(m);
  assert_true(is_loaded(path));
  /* ...so the instance still finalizes through the module's code. */
  PFObjectFree(inst);
  m = load(path);
  fins = get(m, "mt.fins");
  assert_int_equal(call_int(fins, 0, NULL, NULL), fins_before + 1);
  PFFuncFree(fins);
  PFModFree(m);
  assert_true(is_loaded(path));
}

static void test_clash_fails_the_load(void** state) {
  (void)state;
  const char* path = mod_path("mod_types_clash.so");
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromFile(path, &m), kPFErrKeyError,
                  "object type 'mt.Thing' is already registered with another description",
                  "its instance size differs");
  assert_null(m);
  assert_false(is_loaded(path));
  assert_non_null(strstr(PFErrorGetTraceback(), "while registering the object types of module"));
}

/* Loading the module `file` fails: its type `key`'s code pointer `what`
 * points at data, not code (calling it would crash); nothing is
 * registered and the library is closed again. */
static void assert_load_refused(const char* file, const char* key, const char* what) {
  const char* path = mod_path(file);
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromFile(path, &m), kPFErrValueError, file, what,
                  "is not in any loaded code");
  assert_false(is_loaded(path));
  uint32_t found = 1;
  assert_pf_ok(PFObjectTypeFind(key, &found));
  assert_int_equal(found, 0);
}

static void test_bad_type_description_fails_the_load(void** state) {
  (void)state;
  assert_load_refused("mod_badtype.so", "badtype.Bad",
                      "has an object type whose method function pointer");
}

/* The same for an accessor field's getter (PFObjectTypeDesc2). */
static void test_bad_accessor_fails_the_load(void** state) {
  (void)state;
  assert_load_refused("mod_badaccessor.so", "badaccessor.Bad",
                      "has an object type whose accessor function pointer");
}

/* The same for a prepare hook (PFObjectTypeDesc3). */
static void test_bad_prepare_hook_fails_the_load(void** state) {
  (void)state;
  assert_load_refused("mod_badprepare.so", "badprepare.Bad",
                      "has an object type whose prepare hook pointer");
}

/* The demo plugin's demo.Base and demo.Counter, as a host uses them. */
static void test_demo_plugin_types(void** state) {
  (void)state;
  PFModuleHandle m = load(PF_TEST_DEMO_PLUGIN);
  uint32_t counter = 0, base = 0;
  assert_pf_ok(PFObjectTypeFind("demo.Counter", &counter));
  assert_pf_ok(PFObjectTypeFind("demo.Base", &base));
  const PFObjectTypeInfo* ti = NULL;
  assert_pf_ok(PFObjectTypeGetInfo(counter, &ti));
  assert_int_equal(ti->parent_index, base);
  PFFunctionHandle ctor = NULL;
  assert_pf_ok(PFObjectTypeGetConstructor(counter, &ctor));
  PFValue a[2] = {{.v_str = "clicks"}, {.v_int64 = 10}}, rv;
  int c[2] = {kPFStr, kPFInt}, rc;
  assert_pf_ok(PFFuncCall(ctor, a, c, 2, &rv, &rc));
  PFObjectHandle obj = rv.v_handle;
  PFFunctionHandle inc = NULL, add = NULL, describe = NULL, reset = NULL;
  assert_pf_ok(PFObjectGetMethod(obj, "increment", &inc));
  assert_pf_ok(PFObjectGetMethod(obj, "add", &add));
  assert_pf_ok(PFObjectGetMethod(obj, "describe", &describe));
  assert_pf_ok(PFObjectGetMethod(obj, "reset", &reset));
  assert_int_equal(call_int(inc, 0, NULL, NULL), 11);
  const PFFieldInfo* step = NULL;
  assert_pf_ok(PFObjectTypeGetField(counter, "step", &step));
  assert_pf_ok(PFObjectSetField(obj, step, (PFValue){.v_int64 = 5}, kPFInt));
  PFValue two = {.v_int64 = 2};
  int ic = kPFInt;
  assert_int_equal(call_int(add, 1, &two, &ic), 21);
  assert_pf_ok(PFFuncCall(describe, NULL, NULL, 0, &rv, &rc));
  assert_string_equal(rv.v_str, "Counter 'clicks' at 21");
  assert_pf_ok(PFObjectGetFieldByName(obj, "name", &rv, &rc));
  assert_string_equal(rv.v_str, "clicks");
  assert_pf_error(PFObjectSetFieldByName(obj, "name", rv, kPFStr), kPFErrAttributeError,
                  "read-only");
  assert_pf_ok(PFFuncCall(reset, NULL, NULL, 0, &rv, &rc));
  assert_pf_ok(PFObjectGetFieldByName(obj, "count", &rv, &rc));
  assert_int_equal(rv.v_int64, 0);
  /* The base's describe, unbound, on the counter. */
  PFFunctionHandle base_describe = NULL;
  assert_pf_ok(PFObjectTypeGetMethod(base, "describe", &base_describe));
  PFValue self = {.v_handle = obj};
  int oc = kPFObjectHandle;
  assert_pf_ok(PFFuncCall(base_describe, &self, &oc, 1, &rv, &rc));
  assert_non_null(strstr(rv.v_str, "Base 'clicks' #"));
  PFFuncFree(base_describe);
  PFFuncFree(reset);
  PFFuncFree(describe);
  PFFuncFree(add);
  PFFuncFree(inc);
  PFObjectFree(obj);
  PFFuncFree(ctor);
  PFModFree(m);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unused_types_unload_and_come_back),
      cmocka_unit_test(test_clash_fails_the_load),
      cmocka_unit_test(test_bad_type_description_fails_the_load),
      cmocka_unit_test(test_bad_accessor_fails_the_load),
      cmocka_unit_test(test_bad_prepare_hook_fails_the_load),
      cmocka_unit_test(test_demo_plugin_types),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
