/* rpc and registered object types: an instance cannot cross to another
 * process, either as an argument (the client refuses it) or as a result
 * (the server refuses it): a TypeError naming the type. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "packedfunc/rpc.h"
#include "support/pf_test.h"

static uint32_t g_type;
static PFRPCServerHandle g_server;
static PFModuleHandle g_mod;

static int make_one(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)res;
  PFObjectHandle o = NULL;
  if (PFObjectAlloc(g_type, &o) != 0) return -1;
  PFValue v = {.v_handle = o};
  int code = kPFObjectHandle;
  int st = PFCFuncSetReturn(ret, &v, &code, 1);
  PFObjectFree(o);
  return st;
}

static void reg(const char* name, PFPackedCFunc fn) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, NULL, NULL, &f));
  assert_pf_ok(PFFuncRegisterGlobal(name, f, 1));
  PFFuncFree(f);
}

static int setup(void** state) {
  (void)state;
  static const PFObjectTypeDesc d = {
      PF_OBJECT_TYPE_DESC_ABI, "rt.Obj", NULL, 8, NULL, NULL, NULL, 0, NULL, 0};
  if (PFObjectTypeRegister(&d, &g_type) != 0) return -1;
  reg("rt.make", make_one);
  reg("rt.echo", pf_test_echo);
  const char* expose[] = {"rt."};
  PFRPCServerOptions o = {0};
  o.expose = expose;
  o.num_expose = 1;
  const char* endpoint = NULL;
  if (PFRPCServe("tcp://127.0.0.1:*", &o, &g_server) != 0 ||
      PFRPCServerGetEndpoint(g_server, &endpoint) != 0)
    return -1;
  PFRPCOptions co = {0};
  co.timeout_ms = 20000;
  return PFRPCConnect(endpoint, &co, &g_mod);
}

static int teardown(void** state) {
  (void)state;
  PFRPCDisconnect(g_mod);
  PFModFree(g_mod);
  PFRPCServerStop(g_server);
  return 0;
}

static PFFunctionHandle remote(const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(g_mod, name, 0, &f));
  assert_non_null(f);
  return f;
}

static void test_instance_argument_is_refused(void** state) {
  (void)state;
  PFFunctionHandle echo = remote("rt.echo");
  PFObjectHandle o = NULL;
  assert_pf_ok(PFObjectAlloc(g_type, &o));
  PFValue v = {.v_handle = o}, rv;
  int c = kPFObjectHandle, rc;
  assert_pf_error(PFFuncCall(echo, &v, &c, 1, &rv, &rc), kPFErrTypeError,
                  "an object of the registered type 'rt.Obj' cannot cross to another process");
  /* Inside a container too, naming the item. */
  PFObjectHandle arr = NULL;
  assert_pf_ok(PFArrayCreate(&v, &c, 1, &arr));
  v.v_handle = arr;
  assert_pf_error(PFFuncCall(echo, &v, &c, 1, &rv, &rc), kPFErrTypeError, "item 0",
                  "registered type 'rt.Obj'");
  /* The connection goes on working. */
  PFValue i = {.v_int64 = 5};
  int ic = kPFInt;
  assert_pf_ok(PFFuncCall(echo, &i, &ic, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 5);
  PFObjectFree(arr);
  PFObjectFree(o);
  PFFuncFree(echo);
}

static void test_instance_result_is_refused(void** state) {
  (void)state;
  PFFunctionHandle make = remote("rt.make");
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(make, NULL, NULL, 0, &rv, &rc), kPFErrTypeError,
                  "an object of the registered type 'rt.Obj' cannot cross to another process");
  PFFuncFree(make);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_instance_argument_is_refused),
      cmocka_unit_test(test_instance_result_is_refused),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
