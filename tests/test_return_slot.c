/* The return handle of a call: every kind of value through
 * PFCFuncSetReturn and through the function table, misuse of a handle
 * (NULL, forged, stale, set twice), and string results at several call
 * depths. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/pf_test.h"

/* ---- helpers ---------------------------------------------------------- */

static PFFunctionHandle make(PFPackedCFunc fn, void* resource) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, resource, NULL, &f));
  return f;
}

/* The two ways a callee can reach PFCFuncSetReturn: the exported function,
 * and the function table as a program that loads the library at run time
 * does. */
typedef int (*set_return_fn)(PFRetValueHandle, PFValue*, int*, int);
static int set_exported(PFRetValueHandle ret, PFValue* v, int* code, int n) {
  return PFCFuncSetReturn(ret, v, code, n);
}
static int set_table(PFRetValueHandle ret, PFValue* v, int* code, int n) {
  return PFGetApiBase()->GetApi(1)->CFuncSetReturn(ret, v, code, n);
}
static const set_return_fn k_setters[] = {set_exported, set_table};
static const char* const k_setter_names[] = {"exported", "table"};
#define N_SETTERS 2

/* Runs `body(ret)` inside a packed function; returns PFFuncCall's status
 * and the result through rv/rc. */
typedef int (*body_fn)(PFRetValueHandle ret, void* ctx);
typedef struct {
  body_fn body;
  void* ctx;
} inside;
static int p_inside(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n;
  inside* in = res;
  return in->body(ret, in->ctx);
}
static int run_inside(body_fn body, void* ctx, PFValue* rv, int* rc) {
  inside in = {body, ctx};
  PFFunctionHandle f = make(p_inside, &in);
  int st = PFFuncCall(f, NULL, NULL, 0, rv, rc);
  assert_pf_ok(PFFuncFree(f));
  return st;
}

/* ---- every value through each way of setting it ------------------------- */

typedef struct {
  set_return_fn set;
  int code;
  PFValue v;
} set_one;
static int body_set_one(PFRetValueHandle ret, void* ctx) {
  set_one* s = ctx;
  return s->set(ret, &s->v, &s->code, 1);
}

static void test_each_setter_each_kind_of_value(void** state) {
  (void)state;
  PFObjectHandle boxed = NULL;
  atomic_int fins = 0;
  assert_pf_ok(PFObjectCreateBoxed(&fins, pf_test_count_fin, &boxed));
  PFByteArray ba = {"b\0y", 3};
  for (int k = 0; k < N_SETTERS; ++k) {
    const set_one cases[] = {
        {k_setters[k], kPFInt, {.v_int64 = -7}},
        {k_setters[k], kPFBool, {.v_int64 = 1}},
        {k_setters[k], kPFNull, {.v_int64 = 0}},
        {k_setters[k], kPFOpaqueHandle, {.v_handle = &fins}},
        {k_setters[k], kPFDataType, {.v_type = {kDLFloat, 32, 1}}},
        {k_setters[k], kPFDevice, {.v_device = {kDLCPU, 3}}},
        {k_setters[k], kPFStr, {.v_str = "a str"}},
        {k_setters[k], kPFBytes, {.v_handle = &ba}},
        {k_setters[k], kPFObjectHandle, {.v_handle = boxed}},
        {k_setters[k], 70, {.v_int64 = 99}}, /* extension range: bits pass through */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
      set_one s = cases[i];
      PFValue rv;
      int rc = -1;
      assert_pf_ok(run_inside(body_set_one, &s, &rv, &rc));
      assert_int_equal(rc, s.code);
      if (s.code == kPFStr) {
        assert_string_equal(rv.v_str, "a str");
      } else if (s.code == kPFBytes) {
        const PFByteArray* got = rv.v_handle;
        assert_int_equal(got->size, 3);
        assert_memory_equal(got->data, "b\0y", 3);
      } else if (s.code == kPFObjectHandle) {
        assert_ptr_equal(rv.v_handle, boxed);
        assert_pf_ok(PFObjectFree(rv.v_handle)); /* the caller's new reference */
      } else if (s.code != kPFNull) {
        assert_memory_equal(&rv, &s.v, sizeof(PFValue));
      }
    }
  }
  assert_int_equal(atomic_load(&fins), 0);
  assert_pf_ok(PFObjectFree(boxed));
  assert_int_equal(atomic_load(&fins), 1);
}

/* ---- misuse of the handle, by each way ---------------------------------- */

static atomic_int g_misuse_checks;

static int body_misuse(PFRetValueHandle ret, void* ctx) {
  set_return_fn set = ctx;
  PFValue five = {.v_int64 = 5}, v = {.v_int64 = 1};
  int code = kPFInt;
  assert_pf_ok(set(ret, &five, &code, 1));
  /* NULL. */
  assert_pf_error(set(NULL, &v, &code, 1), kPFErrTypeError, "PFCFuncSetReturn", "'ret'", "NULL");
  /* Forged: memory that is no handle, zeroed or full of pointers. */
  uintptr_t forged[16] = {0}, before[16];
  assert_pf_error(set(forged, &v, &code, 1), kPFErrTypeError, "PFCFuncSetReturn", "'ret'",
                  "not the return handle of a call in progress on this thread");
  for (int i = 0; i < 16; ++i) forged[i] = (uintptr_t)&forged[i]; /* aligned pointers */
  memcpy(before, forged, sizeof(forged));
  assert_pf_error(set(forged, &v, &code, 1), kPFErrTypeError, "'ret'");
  assert_memory_equal(forged, before, sizeof(forged)); /* nothing was written */
  /* A function handle and a value are not slots either. */
  PFFunctionHandle f = make(pf_test_echo, NULL);
  assert_pf_error(set(f, &v, &code, 1), kPFErrTypeError, "'ret'");
  assert_pf_ok(PFFuncFree(f));
  assert_pf_error(set(&v, &v, &code, 1), kPFErrTypeError, "'ret'");
  /* Bad values into the real slot: refused, the 5 stays. */
  assert_pf_error(set(ret, NULL, &code, 1), kPFErrTypeError, "'value'");
  assert_pf_error(set(ret, &v, NULL, 1), kPFErrTypeError, "'type_code'");
  assert_pf_error(set(ret, &v, &code, 0), kPFErrValueError, "'num_ret'");
  int bad = kPFTypeCodeEnd;
  assert_pf_error(set(ret, &v, &bad, 1), kPFErrTypeError, "unknown type code");
  bad = -1;
  assert_pf_error(set(ret, &v, &bad, 1), kPFErrTypeError, "unknown type code");
  atomic_fetch_add(&g_misuse_checks, 1);
  return 0;
}

static void test_misuse_is_refused_by_each_setter(void** state) {
  (void)state;
  atomic_store(&g_misuse_checks, 0);
  for (int k = 0; k < N_SETTERS; ++k) {
    PFValue rv;
    int rc;
    assert_pf_ok(run_inside(body_misuse, (void*)k_setters[k], &rv, &rc));
    assert_int_equal(rc, kPFInt);
    assert_int_equal(rv.v_int64, 5);
  }
  assert_int_equal(atomic_load(&g_misuse_checks), N_SETTERS);
}

/* ---- stale handles -------------------------------------------------------- */

static PFRetValueHandle g_kept;
static int p_keep(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)res;
  g_kept = ret;
  PFValue v = {.v_int64 = 1};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* After its call returned, from outside any call: the tag is gone. */
static void test_set_after_the_call_returned(void** state) {
  (void)state;
  PFFunctionHandle keep = make(p_keep, NULL);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(keep, NULL, NULL, 0, &rv, &rc));
  assert_non_null(g_kept);
  PFValue v = {.v_int64 = 2};
  int code = kPFInt;
  assert_pf_error(pf_test_set_return_stale(g_kept, &v, &code), kPFErrTypeError, "PFCFuncSetReturn",
                  "'ret'", "not the return handle of a call in progress");
  /* A value that would need the slot's storage is refused the same way. */
  v.v_str = "would be copied";
  code = kPFStr;
  assert_pf_error(pf_test_set_return_stale(g_kept, &v, &code), kPFErrTypeError, "'ret'");
  /* The call that returned kept its own result. */
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 1);
  assert_pf_ok(PFFuncFree(keep));
}

/* Inside a call, with the handle of a call nested in it that returned. */
static int body_nested_stale(PFRetValueHandle ret, void* ctx) {
  PFFunctionHandle keep = ctx;
  PFValue rv;
  int rc;
  g_kept = NULL;
  assert_pf_ok(PFFuncCall(keep, NULL, NULL, 0, &rv, &rc));
  assert_ptr_not_equal(g_kept, ret);
  PFValue v = {.v_int64 = 3};
  int code = kPFInt;
  assert_pf_error(pf_test_set_return_stale(g_kept, &v, &code), kPFErrTypeError, "'ret'");
  v.v_int64 = 4;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_set_with_a_finished_nested_handle(void** state) {
  (void)state;
  PFFunctionHandle keep = make(p_keep, NULL);
  PFValue rv;
  int rc;
  assert_pf_ok(run_inside(body_nested_stale, keep, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 4);
  assert_pf_ok(PFFuncFree(keep));
}

/* The handle of an enclosing call still in progress stays valid: a
 * nested callee may set the outer result (documented). */
static PFRetValueHandle g_outer;
static int p_set_outer(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)ret, (void)res;
  PFValue v = {.v_int64 = 77};
  int code = kPFInt;
  return PFCFuncSetReturn(g_outer, &v, &code, 1);
}
static int body_outer(PFRetValueHandle ret, void* ctx) {
  g_outer = ret;
  PFValue rv;
  int rc;
  return PFFuncCall(ctx, NULL, NULL, 0, &rv, &rc);
}

static void test_enclosing_call_handle_is_live(void** state) {
  (void)state;
  PFFunctionHandle inner = make(p_set_outer, NULL);
  PFValue rv;
  int rc;
  assert_pf_ok(run_inside(body_outer, inner, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 77);
  assert_pf_ok(PFFuncFree(inner));
}

/* ---- setting twice: each replaces the last, nothing leaks ---------------- */

static atomic_int g_twice_fins;
static void twice_fin(void* p) {
  (void)p;
  atomic_fetch_add(&g_twice_fins, 1);
}

typedef struct {
  set_return_fn set;
  int first, second; /* 0 int, 1 long str, 2 object, 3 short bytes */
} twice;
static int set_kind(set_return_fn set, PFRetValueHandle ret, int kind) {
  static char long_str[200];
  memset(long_str, 'L', sizeof(long_str) - 1);
  PFValue v;
  int code;
  switch (kind) {
    case 0:
      v.v_int64 = 11;
      code = kPFInt;
      return set(ret, &v, &code, 1);
    case 1:
      v.v_str = long_str;
      code = kPFStr;
      return set(ret, &v, &code, 1);
    case 2: {
      PFObjectHandle obj = NULL;
      if (PFObjectCreateBoxed(NULL, twice_fin, &obj) != 0) return -1;
      v.v_handle = obj;
      code = kPFObjectHandle;
      int st = set(ret, &v, &code, 1);
      PFObjectFree(obj); /* the slot holds the only reference now */
      return st;
    }
    default: {
      static const PFByteArray ba = {"xyz", 3};
      v.v_handle = (void*)&ba;
      code = kPFBytes;
      return set(ret, &v, &code, 1);
    }
  }
}
static int body_twice(PFRetValueHandle ret, void* ctx) {
  twice* t = ctx;
  if (set_kind(t->set, ret, t->first) != 0) return -1;
  return set_kind(t->set, ret, t->second);
}

static void test_set_twice_replaces(void** state) {
  (void)state;
  for (int k = 0; k < N_SETTERS; ++k) {
    for (int a = 0; a < 4; ++a) {
      for (int b = 0; b < 4; ++b) {
        atomic_store(&g_twice_fins, 0);
        twice t = {k_setters[k], a, b};
        PFValue rv;
        int rc;
        assert_pf_ok(run_inside(body_twice, &t, &rv, &rc));
        /* The first object, if any, went when it was replaced. */
        assert_int_equal(atomic_load(&g_twice_fins), a == 2 ? 1 : 0);
        switch (b) {
          case 0:
            assert_int_equal(rc, kPFInt);
            assert_int_equal(rv.v_int64, 11);
            break;
          case 1:
            assert_int_equal(rc, kPFStr);
            assert_int_equal(strlen(rv.v_str), 199);
            break;
          case 2:
            assert_int_equal(rc, kPFObjectHandle);
            assert_pf_ok(PFObjectFree(rv.v_handle));
            assert_int_equal(atomic_load(&g_twice_fins), a == 2 ? 2 : 1);
            break;
          default:
            assert_int_equal(rc, kPFBytes);
            assert_int_equal(((const PFByteArray*)rv.v_handle)->size, 3);
            break;
        }
      }
    }
  }
}

/* A callee that set a value then fails: the value is released, the error
 * is the callee's. */
static int body_set_then_fail(PFRetValueHandle ret, void* ctx) {
  twice* t = ctx;
  if (set_kind(t->set, ret, t->first) != 0) return -1;
  return PFErrorSetFormat(kPFErrValueError, "set then failed");
}

static void test_set_then_fail_releases(void** state) {
  (void)state;
  for (int k = 0; k < N_SETTERS; ++k) {
    for (int a = 0; a < 4; ++a) {
      atomic_store(&g_twice_fins, 0);
      twice t = {k_setters[k], a, 0};
      PFValue rv = {.v_int64 = 123};
      int rc = 456;
      assert_pf_error(run_inside(body_set_then_fail, &t, &rv, &rc), kPFErrValueError,
                      "set then failed");
      assert_int_equal(atomic_load(&g_twice_fins), a == 2 ? 1 : 0);
      /* Outputs are written only on success. */
      assert_int_equal(rv.v_int64, 123);
      assert_int_equal(rc, 456);
    }
  }
}

/* ---- the error state on the plain path ---------------------------------- */

static int p_add(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || c[0] != kPFInt || c[1] != kPFInt) return PF_ERROR(kPFErrTypeError, "add");
  PFValue v = {.v_int64 = a[0].v_int64 + a[1].v_int64};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
static int p_silent(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)ret, (void)res;
  return -1;
}

/* A successful call leaves an earlier error as it was; a later callee that
 * fails silently is still told apart from that earlier error. */
static void test_plain_calls_leave_the_error_alone(void** state) {
  (void)state;
  PFFunctionHandle add = make(p_add, NULL), silent = make(p_silent, NULL);
  PFErrorSetFormat(kPFErrKeyError, "an earlier error");
  PFValue args[2] = {{.v_int64 = 2}, {.v_int64 = 3}};
  int codes[2] = {kPFInt, kPFInt};
  PFValue rv;
  int rc;
  for (int i = 0; i < 3; ++i) {
    assert_pf_ok(PFFuncCall(add, args, codes, 2, &rv, &rc));
    assert_int_equal(rv.v_int64, 5);
    assert_string_equal(PFErrorGetKind(), kPFErrKeyError);
    assert_string_equal(PFErrorGetMessage(), "an earlier error");
  }
  assert_pf_error(PFFuncCall(silent, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError,
                  "without recording an error");
  assert_pf_ok(PFFuncFree(add));
  assert_pf_ok(PFFuncFree(silent));
}

/* Argument codes past the plain ones take the full check, wherever they
 * are in the list. */
static void test_argument_codes_checked_at_any_position(void** state) {
  (void)state;
  PFFunctionHandle f = make(pf_test_echo, NULL);
  PFValue args[5] = {
      {.v_int64 = 1}, {.v_int64 = 2}, {.v_int64 = 3}, {.v_int64 = 4}, {.v_int64 = 5}};
  int codes[5];
  PFValue rv;
  int rc;
  for (int pos = 0; pos < 5; ++pos) {
    for (int i = 0; i < 5; ++i) codes[i] = kPFInt;
    codes[pos] = kPFTypeCodeEnd;
    char want[32];
    snprintf(want, sizeof(want), "argument %d", pos);
    assert_pf_error(PFFuncCall(f, args, codes, 5, &rv, &rc), kPFErrTypeError, want,
                    "unknown type code");
    codes[pos] = kPFStr;
    args[pos].v_str = NULL;
    assert_pf_error(PFFuncCall(f, args, codes, 5, &rv, &rc), kPFErrTypeError, want, "NULL");
    args[pos].v_str = "ok";
    assert_pf_ok(PFFuncCall(f, args, codes, 5, &rv, &rc));
    assert_int_equal(rc, pos == 0 ? kPFStr : kPFInt);
    args[pos].v_int64 = pos + 1;
  }
  assert_pf_ok(PFFuncFree(f));
}

/* ---- strings at several depths ----------------------------------------- */

/* Returns a 300-byte string of one letter: noise for the storage of the
 * depth it is called at. */
static int p_noise(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n;
  char buf[301];
  memset(buf, (int)(intptr_t)res, 300);
  buf[300] = '\0';
  PFValue v = {.v_str = buf};
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static PFFunctionHandle g_level, g_check, g_noise, g_noise_bytes;

/* check(s): makes nested calls returning strings and bytes, then returns
 * "<s>+" after verifying that s is as it came. */
static int p_check(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || (c[0] != kPFStr && c[0] != kPFBytes)) return PF_ERROR(kPFErrTypeError, "check");
  char copy[512];
  size_t len;
  if (c[0] == kPFStr) {
    len = strlen(a[0].v_str);
    memcpy(copy, a[0].v_str, len + 1);
  } else {
    const PFByteArray* ba = a[0].v_handle;
    len = ba->size;
    memcpy(copy, ba->data, len);
  }
  for (int i = 0; i < 3; ++i) {
    PFValue rv;
    int rc;
    if (PFFuncCall(i % 2 ? g_noise_bytes : g_noise, NULL, NULL, 0, &rv, &rc) != 0) return -1;
  }
  const char* now = c[0] == kPFStr ? a[0].v_str : ((const PFByteArray*)a[0].v_handle)->data;
  if (memcmp(now, copy, len) != 0) return PF_ERROR(kPFErrValueError, "argument changed");
  char out[600];
  snprintf(out, sizeof(out), "%.*s+", (int)len, copy);
  PFValue v = {.v_str = out};
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* level(k): "leaf" at 0; otherwise check(level(k - 1)), after noise, with
 * the nested result passed on as a str at even k and as bytes at odd k. */
static int p_level(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || c[0] != kPFInt) return PF_ERROR(kPFErrTypeError, "level");
  int64_t k = a[0].v_int64;
  PFValue v;
  int code;
  if (k == 0) {
    v.v_str = "leaf";
    code = kPFStr;
    return PFCFuncSetReturn(ret, &v, &code, 1);
  }
  PFValue arg = {.v_int64 = k - 1}, s;
  int argc = kPFInt, sc;
  if (PFFuncCall(g_level, &arg, &argc, 1, &s, &sc) != 0) return -1;
  if (sc != kPFStr) return PF_ERROR(kPFErrTypeError, "level: nested result not a str");
  PFByteArray ba = {s.v_str, strlen(s.v_str)};
  PFValue pass = k % 2 ? (PFValue){.v_handle = &ba} : s;
  int pass_code = k % 2 ? kPFBytes : kPFStr;
  if (PFFuncCall(g_check, &pass, &pass_code, 1, &v, &code) != 0) return -1;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* descend(k, s): s is the caller's own string result, borrowed for this
 * call. Makes a string result of its own at this depth, passes it down to
 * descend(k - 1, ...), and checks on the way back that s never moved or
 * changed while the calls below it stored theirs. Returns s's first letter
 * after what the call below returned, so that the result spells the chain. */
static PFFunctionHandle g_descend, g_letter;
static int p_letter(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)c, (void)n, (void)res;
  char buf[100];
  memset(buf, 'a' + (int)(a[0].v_int64 % 26), sizeof(buf) - 1);
  buf[sizeof(buf) - 1] = '\0';
  PFValue v = {.v_str = buf};
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
static int p_descend(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || c[0] != kPFInt || c[1] != kPFStr) return PF_ERROR(kPFErrTypeError, "descend");
  int64_t k = a[0].v_int64;
  const char* s = a[1].v_str;
  char copy[128];
  snprintf(copy, sizeof(copy), "%s", s);
  char out[128] = "";
  if (k > 0) {
    PFValue mine;
    int mc;
    PFValue kv = {.v_int64 = k};
    int kc = kPFInt;
    if (PFFuncCall(g_letter, &kv, &kc, 1, &mine, &mc) != 0) return -1;
    PFValue args[2] = {{.v_int64 = k - 1}, mine};
    int codes[2] = {kPFInt, kPFStr};
    PFValue below;
    int bc;
    if (PFFuncCall(g_descend, args, codes, 2, &below, &bc) != 0) return -1;
    snprintf(out, sizeof(out), "%s", below.v_str);
  }
  if (strcmp(s, copy) != 0 || a[1].v_str != s)
    return PF_ERROR(kPFErrValueError, "descend(%d): argument changed", (int)k);
  size_t len = strlen(out);
  out[len] = s[0];
  out[len + 1] = '\0';
  PFValue v = {.v_str = out};
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_string_arguments_nested_deep(void** state) {
  (void)state;
  g_letter = make(p_letter, NULL);
  g_descend = make(p_descend, NULL);
  for (int64_t depth = 0; depth <= 30; ++depth) {
    PFValue args[2] = {{.v_int64 = depth}, {.v_str = "top"}}, rv;
    int codes[2] = {kPFInt, kPFStr}, rc;
    assert_pf_ok(PFFuncCall(g_descend, args, codes, 2, &rv, &rc));
    assert_int_equal(rc, kPFStr);
    char want[64];
    size_t w = 0;
    for (int64_t k = 1; k <= depth; ++k) want[w++] = (char)('a' + k % 26);
    want[w++] = 't';
    want[w] = '\0';
    assert_string_equal(rv.v_str, want);
  }
  PFFuncFree(g_descend);
  PFFuncFree(g_letter);
}

static void test_strings_at_several_depths(void** state) {
  (void)state;
  g_noise = make(p_noise, (void*)(intptr_t)'N');
  g_noise_bytes = make(p_noise, (void*)(intptr_t)'B');
  g_check = make(p_check, NULL);
  g_level = make(p_level, NULL);
  for (int64_t depth = 0; depth <= 12; ++depth) {
    PFValue arg = {.v_int64 = depth}, rv;
    int code = kPFInt, rc;
    assert_pf_ok(PFFuncCall(g_level, &arg, &code, 1, &rv, &rc));
    assert_int_equal(rc, kPFStr);
    char want[64] = "leaf";
    for (int64_t i = 0; i < depth; ++i) strcat(want, "+");
    assert_string_equal(rv.v_str, want);
  }
  /* A top-level result passed on survives the nested calls of the callee. */
  PFValue s, out;
  int sc, oc;
  PFValue arg = {.v_int64 = 3};
  int code = kPFInt;
  assert_pf_ok(PFFuncCall(g_level, &arg, &code, 1, &s, &sc));
  assert_pf_ok(PFFuncCall(g_check, &s, &sc, 1, &out, &oc));
  assert_string_equal(out.v_str, "leaf++++");
  PFFuncFree(g_level);
  PFFuncFree(g_check);
  PFFuncFree(g_noise);
  PFFuncFree(g_noise_bytes);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_each_setter_each_kind_of_value),
      cmocka_unit_test(test_misuse_is_refused_by_each_setter),
      cmocka_unit_test(test_set_after_the_call_returned),
      cmocka_unit_test(test_set_with_a_finished_nested_handle),
      cmocka_unit_test(test_enclosing_call_handle_is_live),
      cmocka_unit_test(test_set_twice_replaces),
      cmocka_unit_test(test_set_then_fail_releases),
      cmocka_unit_test(test_plain_calls_leave_the_error_alone),
      cmocka_unit_test(test_argument_codes_checked_at_any_position),
      cmocka_unit_test(test_strings_at_several_depths),
      cmocka_unit_test(test_string_arguments_nested_deep),
  };
  (void)k_setter_names;
  return cmocka_run_group_tests(tests, NULL, NULL);
}
