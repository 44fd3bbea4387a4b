/* Resolved call targets (PFFuncResolve) and the direct callee convention
 * (PFFuncCreateDirect, PFFuncReturnString): validity while referenced,
 * errors, strings, handles and their references, the checking mode, and
 * PFFuncCall of both conventions. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "support/pf_test.h"
#include "../runtime/internal.h" /* pf_target_checking_reset */

/* ---- callees ------------------------------------------------------------ */

/* add(int, int) in each convention; the direct one's resource is added
 * too, so that a test sees which function a target reached. */
static int add_setter(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || c[0] != kPFInt || c[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "add_setter: expected (int, int)");
  PFValue v = {.v_int64 = a[0].v_int64 + a[1].v_int64};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static int add_direct(void* res, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  if (n != 2 || c[0] != kPFInt || c[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "add_direct: expected (int, int)");
  rv->v_int64 = a[0].v_int64 + a[1].v_int64 + (int64_t)(intptr_t)res;
  *rc = kPFInt;
  return 0;
}

static int fail_direct(void* res, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)res, (void)a, (void)c, (void)n, (void)rv, (void)rc;
  return PFErrorSetFormat(kPFErrValueError, "fail_direct: refused");
}

static int silent_direct(void* res, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)res, (void)a, (void)c, (void)n, (void)rv, (void)rc;
  return -1; /* no error recorded: a broken callee */
}

static int silent_setter(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)ret, (void)res;
  return -1;
}

/* Returns its resource (a C string) as str, or as bytes of 5 with a NUL
 * inside when the resource is NULL. */
static int str_setter(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n;
  static PFByteArray ba = {"ab\0cd", 5};
  PFValue v;
  int code;
  if (res != NULL) v.v_str = res, code = kPFStr;
  else v.v_handle = &ba, code = kPFBytes;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static int str_direct(void* res, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)a, (void)c, (void)n;
  if (res != NULL) return PFFuncReturnString(kPFStr, res, strlen(res), rv, rc);
  return PFFuncReturnString(kPFBytes, "ab\0cd", 5, rv, rc);
}

/* Returns its str or bytes argument as it came (kPFStr or kPFBytes). */
static int echo_direct(void* res, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)res, (void)n;
  if (c[0] == kPFStr) return PFFuncReturnString(kPFStr, a[0].v_str, strlen(a[0].v_str), rv, rc);
  const PFByteArray* ba = a[0].v_handle;
  return PFFuncReturnString(kPFBytes, ba->data, ba->size, rv, rc);
}

/* Calls the function in its resource (which returns a string) before it
 * returns "<its argument>+<that string>": its argument must outlive the
 * nested call's result. */
static int nest_direct(void* res, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)c, (void)n;
  PFValue inner;
  int inner_code;
  if (PFFuncCall(res, NULL, NULL, 0, &inner, &inner_code) != 0) return -1;
  char buf[128];
  snprintf(buf, sizeof buf, "%s+%s", a[0].v_str, inner.v_str);
  return PFFuncReturnString(kPFStr, buf, strlen(buf), rv, rc);
}

/* Returns a new boxed object whose finalizer counts in the resource. */
static int box_direct(void* res, PFValue* a, int* c, int n, PFValue* rv, int* rc) {
  (void)a, (void)c, (void)n;
  PFObjectHandle o = NULL;
  if (PFObjectCreateBoxed(res, pf_test_count_fin, &o) != 0) return -1;
  rv->v_handle = o;
  *rc = kPFObjectHandle;
  return 0;
}

/* ---- helpers ------------------------------------------------------------ */

static PFFunctionHandle make_direct(PFDirectCFunc fn, void* res) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateDirect(fn, res, NULL, &f));
  return f;
}

static PFFunctionHandle make_setter(PFPackedCFunc fn, void* res) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, res, NULL, &f));
  return f;
}

static PFCallTarget resolve(PFFunctionHandle f) {
  PFCallTarget t = {sizeof(PFCallTarget), 0, NULL, NULL};
  assert_pf_ok(PFFuncResolve(f, &t));
  assert_int_equal(t.size, sizeof(PFCallTarget));
  assert_non_null(t.entry);
  return t;
}

/* Calls add(x, 2) through `t`. */
static int call_add(const PFCallTarget* t, int64_t x, PFValue* rv, int* rc) {
  PFValue a[2] = {{.v_int64 = x}, {.v_int64 = 2}};
  int c[2] = {kPFInt, kPFInt};
  return t->entry(t->ctx, a, c, 2, rv, rc);
}

/* Turns the checking mode on or off for the tests that follow. */
static void checking(int on) {
  if (on) setenv("PF_CHECK_TARGETS", "1", 1);
  else unsetenv("PF_CHECK_TARGETS");
  pf_target_checking_reset();
}

/* ---- targets ------------------------------------------------------------ */

static void test_target_of_each_convention(void** state) {
  (void)state;
  checking(0);
  PFFunctionHandle fs = make_setter(add_setter, NULL);
  PFFunctionHandle fd = make_direct(add_direct, (void*)(intptr_t)100);
  PFCallTarget ts = resolve(fs), td = resolve(fd);
  assert_int_equal(ts.flags, kPFTargetAdapter);
  assert_int_equal(td.flags, kPFTargetDirect);
  /* A direct function's target is the callee itself, with its resource. */
  assert_ptr_equal((void*)td.entry, (void*)add_direct);
  assert_ptr_equal(td.ctx, (void*)(intptr_t)100);
  PFValue rv;
  int rc;
  assert_pf_ok(call_add(&ts, 40, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 42);
  assert_pf_ok(call_add(&td, 40, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 142);
  /* The same through the function table. */
  const PFApi* api = PFGetApiBase()->GetApi(PF_API_VERSION);
  PFCallTarget tt = {sizeof(PFCallTarget), 0, NULL, NULL};
  assert_pf_ok(api->FuncResolve(fd, &tt));
  assert_ptr_equal((void*)tt.entry, (void*)add_direct);
  assert_pf_ok(PFFuncFree(fs));
  assert_pf_ok(PFFuncFree(fd));
}

/* A setter callee that sets nothing returns null, with a zero value. */
static int nothing_setter(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)ret, (void)res;
  return 0;
}

static void test_target_setter_sets_nothing(void** state) {
  (void)state;
  checking(0);
  PFFunctionHandle f = make_setter(nothing_setter, NULL);
  PFCallTarget t = resolve(f);
  PFValue rv = {.v_int64 = 99};
  int rc = kPFInt;
  assert_pf_ok(t.entry(t.ctx, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFNull);
  assert_int_equal(rv.v_int64, 0);
  assert_pf_ok(PFFuncFree(f));
}

static void test_target_valid_while_referenced(void** state) {
  (void)state;
  checking(0);
  atomic_int fins = 0;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateDirect(add_direct, (void*)(intptr_t)7, NULL, &f));
  PFFunctionHandle counted = NULL;
  /* A setter function with a counted finalizer, registered by name; the
   * caller holds its own reference from the registry. */
  assert_pf_ok(PFFuncCreateFromCFunc(add_setter, &fins, pf_test_count_fin, &counted));
  assert_pf_ok(PFFuncRegisterGlobal("test.target.add", counted, 1));
  assert_pf_ok(PFFuncFree(counted));
  PFFunctionHandle held = NULL;
  assert_pf_ok(PFFuncGetGlobal("test.target.add", &held));
  PFCallTarget t = resolve(held);
  /* The name now means another function, then nothing: the target still
   * calls the function the caller holds. */
  assert_pf_ok(PFFuncRegisterGlobal("test.target.add", f, 1));
  assert_pf_ok(PFFuncRemoveGlobal("test.target.add"));
  assert_int_equal(atomic_load(&fins), 0);
  PFValue rv;
  int rc;
  assert_pf_ok(call_add(&t, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 3);
  /* A new handle for the name resolves to the new function. */
  assert_pf_ok(PFFuncRegisterGlobal("test.target.add", f, 1));
  PFFunctionHandle now = NULL;
  assert_pf_ok(PFFuncGetGlobal("test.target.add", &now));
  PFCallTarget t2 = resolve(now);
  assert_pf_ok(call_add(&t2, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 10);
  assert_pf_ok(PFFuncFree(now));
  assert_pf_ok(PFFuncRemoveGlobal("test.target.add"));
  /* The last reference goes: the finalizer runs once. */
  assert_pf_ok(PFFuncFree(held));
  assert_int_equal(atomic_load(&fins), 1);
  assert_pf_ok(PFFuncFree(f));
}

static void test_target_errors_leave_outputs(void** state) {
  (void)state;
  checking(0);
  PFFunctionHandle fns[3] = {make_direct(fail_direct, NULL), make_setter(add_setter, NULL),
                             make_setter(silent_setter, NULL)};
  for (int k = 0; k < 3; ++k) {
    PFCallTarget t = resolve(fns[k]);
    PFValue a = {.v_float64 = 1.0}, rv = {.v_int64 = 1234};
    int c = kPFFloat, rc = 77;
    int st = t.entry(t.ctx, &a, &c, 1, &rv, &rc);
    if (k == 0) assert_pf_error(st, "ValueError", "fail_direct: refused");
    else if (k == 1) assert_pf_error(st, "TypeError", "add_setter: expected (int, int)");
    else assert_pf_error(st, "RuntimeError", "returned -1 without recording an error");
    assert_int_equal(rv.v_int64, 1234);
    assert_int_equal(rc, 77);
    assert_pf_ok(PFFuncFree(fns[k]));
  }
  PFErrorClear();
}

static void test_target_strings_and_bytes(void** state) {
  (void)state;
  checking(0);
  PFFunctionHandle fns[4] = {make_setter(str_setter, "hello"), make_setter(str_setter, NULL),
                             make_direct(str_direct, "hello"), make_direct(str_direct, NULL)};
  for (int k = 0; k < 4; ++k) {
    PFCallTarget t = resolve(fns[k]);
    PFValue rv;
    int rc;
    assert_pf_ok(t.entry(t.ctx, NULL, NULL, 0, &rv, &rc));
    if (k % 2 == 0) {
      assert_int_equal(rc, kPFStr);
      assert_string_equal(rv.v_str, "hello");
    } else {
      assert_int_equal(rc, kPFBytes);
      const PFByteArray* ba = rv.v_handle;
      assert_int_equal(ba->size, 5);
      assert_memory_equal(ba->data, "ab\0cd", 5);
      assert_int_equal(ba->data[5], '\0');
    }
    /* A result lives in return storage, not in the callee's memory. */
    assert_ptr_not_equal(rv.v_str, "hello");
    assert_pf_ok(PFFuncFree(fns[k]));
  }
}

static void test_target_handle_result_is_a_new_reference(void** state) {
  (void)state;
  checking(0);
  atomic_int fins = 0;
  PFFunctionHandle f = make_direct(box_direct, &fins);
  PFCallTarget t = resolve(f);
  PFValue rv;
  int rc;
  assert_pf_ok(t.entry(t.ctx, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFObjectHandle);
  assert_int_equal(atomic_load(&fins), 0);
  assert_pf_ok(PFObjectFree(rv.v_handle));
  assert_int_equal(atomic_load(&fins), 1);
  /* Through PFFuncCall the same: one reference, the caller's. */
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFObjectHandle);
  assert_pf_ok(PFObjectFree(rv.v_handle));
  assert_int_equal(atomic_load(&fins), 2);
  assert_pf_ok(PFFuncFree(f));
}

/* ---- the checking mode -------------------------------------------------- */

static void test_checking_mode_catches_a_bad_caller(void** state) {
  (void)state;
  checking(1);
  PFFunctionHandle fns[2] = {make_direct(add_direct, NULL), make_setter(add_setter, NULL)};
  for (int k = 0; k < 2; ++k) {
    PFCallTarget t = resolve(fns[k]);
    assert_int_equal(t.flags, kPFTargetChecked | (k == 0 ? kPFTargetDirect : kPFTargetAdapter));
    PFValue a[2] = {{.v_int64 = 1}, {.v_int64 = 2}}, rv = {.v_int64 = 5};
    int c[2] = {kPFInt, kPFInt}, rc = 6;
    /* A good call passes. */
    assert_pf_ok(t.entry(t.ctx, a, c, 2, &rv, &rc));
    assert_int_equal(rv.v_int64, 3);
    rv.v_int64 = 5, rc = 6;
    /* Wrong codes, wrong counts, NULL arrays and outputs. */
    c[1] = 9999;
    assert_pf_error(t.entry(t.ctx, a, c, 2, &rv, &rc), "TypeError", "PFCallTarget",
                    "argument 1 has unknown type code 9999");
    c[1] = kPFStr;
    a[1].v_str = NULL;
    assert_pf_error(t.entry(t.ctx, a, c, 2, &rv, &rc), "TypeError", "PFCallTarget", "argument 1",
                    "NULL");
    c[1] = kPFFuncHandle;
    a[1].v_handle = &rc;
    assert_pf_error(t.entry(t.ctx, a, c, 2, &rv, &rc), "TypeError", "PFCallTarget", "argument 1",
                    "not a live");
    c[1] = kPFInt;
    a[1].v_int64 = 2;
    assert_pf_error(t.entry(t.ctx, a, c, -1, &rv, &rc), "ValueError", "PFCallTarget", "num_args");
    assert_pf_error(t.entry(t.ctx, NULL, c, 2, &rv, &rc), "TypeError", "PFCallTarget", "args");
    assert_pf_error(t.entry(t.ctx, a, NULL, 2, &rv, &rc), "TypeError", "PFCallTarget",
                    "type_codes");
    assert_pf_error(t.entry(t.ctx, a, c, 2, NULL, &rc), "TypeError", "PFCallTarget", "ret_val");
    assert_pf_error(t.entry(t.ctx, a, c, 2, &rv, NULL), "TypeError", "PFCallTarget",
                    "ret_type_code");
    assert_int_equal(rv.v_int64, 5);
    assert_int_equal(rc, 6);
    assert_pf_ok(PFFuncFree(fns[k]));
  }
  checking(0);
  PFErrorClear();
}

static void test_checking_mode_catches_return_storage_arguments(void** state) {
  (void)state;
  checking(1);
  PFFunctionHandle s = make_setter(str_setter, "kept");
  PFFunctionHandle b = make_setter(str_setter, NULL);
  PFFunctionHandle echo = make_direct(echo_direct, NULL);
  PFCallTarget t = resolve(echo);
  PFValue a, rv;
  int c, rc;
  /* A result of an earlier call, passed on through a target. */
  assert_pf_ok(PFFuncCall(s, NULL, NULL, 0, &a, &c));
  assert_pf_error(t.entry(t.ctx, &a, &c, 1, &rv, &rc), "ValueError", "PFCallTarget",
                  "argument 0 points into this thread's return storage");
  assert_pf_ok(PFFuncCall(b, NULL, NULL, 0, &a, &c));
  assert_pf_error(t.entry(t.ctx, &a, &c, 1, &rv, &rc), "ValueError", "argument 0");
  /* A copy is fine; PFFuncCall takes the result itself. */
  char copy[8] = "kept";
  a.v_str = copy;
  c = kPFStr;
  assert_pf_ok(t.entry(t.ctx, &a, &c, 1, &rv, &rc));
  assert_string_equal(rv.v_str, "kept");
  assert_pf_ok(PFFuncCall(echo, &rv, &rc, 1, &a, &c));
  assert_string_equal(a.v_str, "kept");
  assert_pf_ok(PFFuncFree(s));
  assert_pf_ok(PFFuncFree(b));
  assert_pf_ok(PFFuncFree(echo));
  checking(0);
  PFErrorClear();
}

static void test_checking_mode_catches_a_silent_direct_callee(void** state) {
  (void)state;
  PFFunctionHandle f = make_direct(silent_direct, NULL);
  PFErrorSet("KeyError", "an old error");
  checking(1);
  PFCallTarget t = resolve(f);
  PFValue rv;
  int rc;
  assert_pf_error(t.entry(t.ctx, NULL, NULL, 0, &rv, &rc), "RuntimeError",
                  "returned -1 without recording an error");
  /* Off: the target is the callee itself, which owes an error. */
  checking(0);
  t = resolve(f);
  assert_ptr_equal((void*)t.entry, (void*)silent_direct);
  assert_pf_ok(PFFuncFree(f));
  PFErrorClear();
}

/* ---- the direct convention through PFFuncCall --------------------------- */

static void test_direct_through_pffunccall(void** state) {
  (void)state;
  PFFunctionHandle f = make_direct(add_direct, (void*)(intptr_t)1);
  PFValue a[2] = {{.v_int64 = 20}, {.v_int64 = 21}}, rv;
  int c[2] = {kPFInt, kPFInt}, rc;
  assert_pf_ok(PFFuncCall(f, a, c, 2, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 42);
  /* Its own checks still apply, and a failure writes nothing. */
  rv.v_int64 = 5, rc = 6;
  c[1] = 4242;
  assert_pf_error(PFFuncCall(f, a, c, 2, &rv, &rc), "TypeError", "PFFuncCall", "argument 1");
  c[1] = kPFFloat;
  assert_pf_error(PFFuncCall(f, a, c, 2, &rv, &rc), "TypeError", "add_direct");
  assert_int_equal(rv.v_int64, 5);
  assert_int_equal(rc, 6);
  /* A frame and a keyword call reach it too. */
  c[1] = kPFInt;
  PFCallFrame fr = {.func = f, .args = a, .type_codes = c, .num_args = 2};
  assert_pf_ok(PFFuncCallFrame(&fr));
  assert_int_equal(fr.ret_val.v_int64, 42);
  assert_pf_ok(PFFuncCallKw(f, a, c, 2, NULL, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rv.v_int64, 42);
  assert_pf_ok(PFFuncFree(f));
  PFErrorClear();
}

static void test_direct_failures_through_pffunccall(void** state) {
  (void)state;
  PFFunctionHandle silent = make_direct(silent_direct, NULL);
  PFFunctionHandle fail = make_direct(fail_direct, NULL);
  PFValue rv = {.v_int64 = 5};
  int rc = 6;
  /* An old error is never taken for the callee's. */
  PFErrorSet("KeyError", "an old error");
  assert_pf_error(PFFuncCall(silent, NULL, NULL, 0, &rv, &rc), "RuntimeError",
                  "returned -1 without recording an error");
  assert_pf_error(PFFuncCall(fail, NULL, NULL, 0, &rv, &rc), "ValueError", "fail_direct");
  /* With a str argument (the nested path) the same. */
  PFValue a = {.v_str = "x"};
  int c = kPFStr;
  assert_pf_error(PFFuncCall(silent, &a, &c, 1, &rv, &rc), "RuntimeError", "without recording");
  assert_int_equal(rv.v_int64, 5);
  assert_int_equal(rc, 6);
  assert_pf_ok(PFFuncFree(silent));
  assert_pf_ok(PFFuncFree(fail));
  PFErrorClear();
}

static void test_direct_strings_through_pffunccall(void** state) {
  (void)state;
  PFFunctionHandle s = make_setter(str_setter, "inner");
  PFFunctionHandle echo = make_direct(echo_direct, NULL);
  PFFunctionHandle nest = make_direct(nest_direct, s);
  PFFunctionHandle bytes = make_direct(str_direct, NULL);
  PFValue a, rv;
  int c, rc;
  /* An earlier result as the argument: echoed back intact. */
  assert_pf_ok(PFFuncCall(s, NULL, NULL, 0, &a, &c));
  assert_pf_ok(PFFuncCall(echo, &a, &c, 1, &rv, &rc));
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, "inner");
  /* The argument outlives the callee's nested call that returns a str. */
  char arg[16] = "outer";
  a.v_str = arg;
  c = kPFStr;
  assert_pf_ok(PFFuncCall(nest, &a, &c, 1, &rv, &rc));
  assert_string_equal(rv.v_str, "outer+inner");
  /* The result, as an argument of the next call that nests another. */
  PFValue r2;
  int c2;
  assert_pf_ok(PFFuncCall(nest, &rv, &rc, 1, &r2, &c2));
  assert_string_equal(r2.v_str, "outer+inner+inner");
  /* Bytes, also past a str argument. */
  assert_pf_ok(PFFuncCall(bytes, &a, &c, 1, &rv, &rc));
  assert_int_equal(rc, kPFBytes);
  assert_int_equal(((const PFByteArray*)rv.v_handle)->size, 5);
  assert_memory_equal(((const PFByteArray*)rv.v_handle)->data, "ab\0cd", 5);
  assert_pf_ok(PFFuncCall(echo, &rv, &rc, 1, &r2, &c2));
  assert_int_equal(c2, kPFBytes);
  assert_memory_equal(((const PFByteArray*)r2.v_handle)->data, "ab\0cd", 5);
  assert_pf_ok(PFFuncFree(s));
  assert_pf_ok(PFFuncFree(echo));
  assert_pf_ok(PFFuncFree(nest));
  assert_pf_ok(PFFuncFree(bytes));
}

/* ---- a typed function and a host function ------------------------------- */

static int64_t typed_add(int64_t a, int64_t b) { return a + b; }

static void test_target_of_typed_function(void** state) {
  (void)state;
  checking(0);
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)typed_add, "int64(int64,int64)", &f));
  PFCallTarget t = resolve(f);
  /* A typed function is a direct callee: no adapter in between. */
  assert_int_equal(t.flags, kPFTargetDirect);
  PFValue rv;
  int rc;
  assert_pf_ok(call_add(&t, 40, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 42);
  /* Its conversions and errors are the typed function's own. */
  PFValue a[2] = {{.v_float64 = 1.0}, {.v_int64 = 2}};
  int c[2] = {kPFFloat, kPFInt};
  rv.v_int64 = 5, rc = 6;
  assert_pf_error(t.entry(t.ctx, a, c, 2, &rv, &rc), "TypeError", "typed function", "argument 0");
  assert_pf_error(t.entry(t.ctx, a, c, 1, &rv, &rc), "TypeError", "takes 2 arguments, got 1");
  assert_int_equal(rv.v_int64, 5);
  assert_int_equal(rc, 6);
  assert_pf_ok(PFFuncFree(f));
  PFErrorClear();
}

/* A host function reports its status in its PFHostCall (host.h). */
static int host_add(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  ((PFHostCall*)res)->status = add_setter(a, c, n, ret, NULL);
  return 0;
}

static void test_target_of_host_function(void** state) {
  (void)state;
  checking(0);
  PFObjectHandle gate = NULL;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFHostGateCreate(&gate));
  assert_pf_ok(PFFuncCreateFromHostCFunc(gate, host_add, NULL, NULL, &f));
  PFCallTarget t = resolve(f);
  assert_int_equal(t.flags, kPFTargetAdapter);
  PFValue rv;
  int rc;
  assert_pf_ok(call_add(&t, 5, &rv, &rc));
  assert_int_equal(rv.v_int64, 7);
  /* A closed gate refuses the call through the target as through
   * PFFuncCall. */
  assert_pf_ok(PFHostGateClose(gate, "the host is gone", 1000));
  rv.v_int64 = 5;
  assert_pf_error(call_add(&t, 5, &rv, &rc), "RuntimeError", "the host is gone");
  assert_int_equal(rv.v_int64, 5);
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFObjectFree(gate));
  PFErrorClear();
}

/* ---- the runtime's own callers: closures and bound functions ----------- */

static void test_closure_and_bind_call_direct_callees(void** state) {
  (void)state;
  PFFunctionHandle add = make_direct(add_direct, (void*)(intptr_t)100);
  PFFunctionHandle silent = make_direct(silent_direct, NULL);
  /* A C function pointer over a direct callee. */
  PFObjectHandle closure = NULL;
  void* fn = NULL;
  assert_pf_ok(PFFuncToCFunction(add, "int64(int64,int64)", &closure, &fn));
  int64_t (*cadd)(int64_t, int64_t) = (int64_t(*)(int64_t, int64_t))fn;
  assert_int_equal(cadd(40, 2), 142);
  assert_pf_ok(PFClosureCheckError(closure));
  assert_pf_ok(PFObjectFree(closure));
  /* A callee that fails silently is a RuntimeError there too, never an
   * older error of the thread. */
  assert_pf_ok(PFFuncToCFunction(silent, "int64()", &closure, &fn));
  PFErrorSet("KeyError", "an old error");
  assert_int_equal(((int64_t(*)(void))fn)(), 0);
  assert_pf_error(PFClosureCheckError(closure), "RuntimeError", "without recording an error");
  assert_pf_ok(PFObjectFree(closure));
  /* A bound function whose inner function is a direct callee. */
  PFFunctionHandle bound = NULL;
  int pos = 1;
  PFValue two = {.v_int64 = 2}, a = {.v_int64 = 40}, rv;
  int code = kPFInt, rc;
  assert_pf_ok(PFFuncBind(add, 1, &pos, &two, &code, NULL, &bound));
  assert_pf_ok(PFFuncCall(bound, &a, &code, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 142);
  PFCallTarget t = resolve(bound);
  assert_pf_ok(t.entry(t.ctx, &a, &code, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 142);
  assert_pf_ok(PFFuncFree(bound));
  pos = 0;
  assert_pf_ok(PFFuncBind(silent, 1, &pos, &two, &code, NULL, &bound));
  PFErrorSet("KeyError", "an old error");
  assert_pf_error(PFFuncCall(bound, NULL, NULL, 0, &rv, &rc), "RuntimeError",
                  "without recording an error");
  assert_pf_ok(PFFuncFree(bound));
  assert_pf_ok(PFFuncFree(add));
  assert_pf_ok(PFFuncFree(silent));
  PFErrorClear();
}

/* ---- registration ------------------------------------------------------- */

/* A direct callee in this program's own table. */
PF_REGISTER_DIRECT("target.add", add_direct, "Adds.");
PF_REGISTER_DIRECT("target.add_nodoc", add_direct);

static void test_register_direct(void** state) {
  (void)state;
  checking(0);
  PFModuleHandle self = NULL;
  assert_pf_ok(PF_MODULE_LOAD_SELF(&self));
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(self, "target.add", 0, &f));
  const char *name, *doc;
  assert_pf_ok(PFFuncGetInfo(f, &name, NULL, &doc));
  assert_string_equal(name, "target.add");
  assert_string_equal(doc, "Adds.");
  PFCallTarget t = resolve(f);
  assert_int_equal(t.flags, kPFTargetDirect);
  assert_ptr_equal((void*)t.entry, (void*)add_direct);
  assert_null(t.ctx);
  PFValue rv;
  int rc;
  assert_pf_ok(call_add(&t, 40, &rv, &rc));
  assert_int_equal(rv.v_int64, 42);
  assert_pf_ok(PFFuncFree(f));
  assert_pf_ok(PFModFree(self));
  /* A descriptor of the direct kind without its function. */
  static const PFFuncDescriptor bad = {
      .abi = PF_FUNC_DESCRIPTOR_ABI, .kind = kPFFuncDescriptorDirect, .name = "t.direct"};
  const PFFuncDescriptor* table[1] = {&bad};
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromDescriptors(table, table + 1, &m), "ValueError",
                  "direct function 't.direct' has a NULL pointer");
  assert_null(m);
  PFErrorClear();
}

/* ---- misuse of the new entry points ------------------------------------- */

static void test_resolve_misuse(void** state) {
  (void)state;
  PFFunctionHandle f = make_direct(add_direct, NULL);
  PFCallTarget t = {sizeof(PFCallTarget), 0, NULL, NULL};
  assert_pf_error(PFFuncResolve(NULL, &t), "TypeError", "PFFuncResolve", "func");
  uint64_t not_a_function[4] = {0, 0, 0, 0};
  assert_pf_error(PFFuncResolve(not_a_function, &t), "TypeError", "PFFuncResolve", "func");
  assert_pf_error(PFFuncResolve(f, NULL), "TypeError", "PFFuncResolve", "out");
  t.size = 8;
  assert_pf_error(PFFuncResolve(f, &t), "ValueError", "PFFuncResolve", "size 8");
  assert_null((void*)t.entry);
  /* A larger struct (a newer caller) gets the fields this library has. */
  struct {
    PFCallTarget t;
    uint64_t later;
  } big = {{sizeof(big), 0, NULL, NULL}, 7};
  assert_pf_ok(PFFuncResolve(f, &big.t));
  assert_int_equal(big.t.size, sizeof(PFCallTarget));
  assert_int_equal(big.later, 7);
  size_t size = 0;
  assert_pf_ok(PFGetStructSize("PFCallTarget", &size));
  assert_int_equal(size, sizeof(PFCallTarget));
  assert_pf_ok(PFFuncFree(f));
  PFErrorClear();
}

static void test_create_direct_misuse(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle f = NULL;
  assert_pf_error(PFFuncCreateDirect(NULL, &fins, pf_test_count_fin, &f), "TypeError",
                  "PFFuncCreateDirect", "func");
  assert_int_equal(atomic_load(&fins), 1);
  assert_pf_error(PFFuncCreateDirect(add_direct, &fins, pf_test_count_fin, NULL), "TypeError",
                  "PFFuncCreateDirect", "out");
  assert_int_equal(atomic_load(&fins), 2);
  assert_null(f);
  PFErrorClear();
}

static void test_return_string_misuse(void** state) {
  (void)state;
  PFValue rv = {.v_int64 = 5};
  int rc = 6;
  assert_pf_error(PFFuncReturnString(kPFStr, "x", 1, NULL, &rc), "TypeError", "PFFuncReturnString",
                  "ret_val");
  assert_pf_error(PFFuncReturnString(kPFStr, "x", 1, &rv, NULL), "TypeError", "PFFuncReturnString",
                  "ret_type_code");
  assert_pf_error(PFFuncReturnString(kPFInt, "x", 1, &rv, &rc), "TypeError", "PFFuncReturnString",
                  "type_code");
  assert_pf_error(PFFuncReturnString(kPFBytes, NULL, 3, &rv, &rc), "TypeError",
                  "PFFuncReturnString", "data");
  assert_pf_error(PFFuncReturnString(kPFBytes, "x", (size_t)PTRDIFF_MAX + 1, &rv, &rc),
                  "ValueError", "PFFuncReturnString", "size");
  assert_int_equal(rv.v_int64, 5);
  assert_int_equal(rc, 6);
  /* Empty values are fine, NULL data included; a str stops at a NUL. */
  assert_pf_ok(PFFuncReturnString(kPFBytes, NULL, 0, &rv, &rc));
  assert_int_equal(((const PFByteArray*)rv.v_handle)->size, 0);
  assert_pf_ok(PFFuncReturnString(kPFStr, "ab\0cd", 5, &rv, &rc));
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, "ab");
  PFErrorClear();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_target_of_each_convention),
      cmocka_unit_test(test_target_setter_sets_nothing),
      cmocka_unit_test(test_target_valid_while_referenced),
      cmocka_unit_test(test_target_errors_leave_outputs),
      cmocka_unit_test(test_target_strings_and_bytes),
      cmocka_unit_test(test_target_handle_result_is_a_new_reference),
      cmocka_unit_test(test_checking_mode_catches_a_bad_caller),
      cmocka_unit_test(test_checking_mode_catches_return_storage_arguments),
      cmocka_unit_test(test_checking_mode_catches_a_silent_direct_callee),
      cmocka_unit_test(test_direct_through_pffunccall),
      cmocka_unit_test(test_direct_failures_through_pffunccall),
      cmocka_unit_test(test_direct_strings_through_pffunccall),
      cmocka_unit_test(test_target_of_typed_function),
      cmocka_unit_test(test_target_of_host_function),
      cmocka_unit_test(test_closure_and_bind_call_direct_callees),
      cmocka_unit_test(test_register_direct),
      cmocka_unit_test(test_resolve_misuse),
      cmocka_unit_test(test_create_direct_misuse),
      cmocka_unit_test(test_return_string_misuse),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
