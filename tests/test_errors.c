/* Errors: kinds, messages, tracebacks, propagation through calls, and
 * per-thread storage. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>

#include "support/pf_test.h"

static PFFunctionHandle make(PFPackedCFunc fn, void* resource) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, resource, NULL, &f));
  return f;
}

/* ---- recording errors ---------------------------------------------------- */

static void test_set_and_read(void** state) {
  (void)state;
  PFErrorSet(kPFErrKeyError, "no such key 'k'");
  assert_string_equal(PFErrorGetKind(), "KeyError");
  assert_string_equal(PFErrorGetMessage(), "no such key 'k'");
  assert_string_equal(PFErrorGetTraceback(), "");
  assert_string_equal(PFGetLastError(), "KeyError: no such key 'k'");
  /* The text is copied. */
  char buf[32];
  snprintf(buf, sizeof(buf), "%s", "mutable");
  PFErrorSet(kPFErrIndexError, buf);
  buf[0] = 'X';
  assert_string_equal(PFErrorGetMessage(), "mutable");
  /* NULL message is "". */
  PFErrorSet(kPFErrValueError, NULL);
  assert_string_equal(PFErrorGetKind(), "ValueError");
  assert_string_equal(PFErrorGetMessage(), "");
  assert_string_equal(PFGetLastError(), "ValueError: ");
}

static void test_set_format_returns_minus_one(void** state) {
  (void)state;
  int rc = PFErrorSetFormat(kPFErrTypeError, "%s-%d-%.2f-%c", "abc", -42, 1.5, 'z');
  assert_int_equal(rc, -1);
  assert_string_equal(PFErrorGetKind(), "TypeError");
  assert_string_equal(PFErrorGetMessage(), "abc--42-1.50-z");
  /* A long formatted message is kept whole. */
  char big[5001];
  memset(big, 'q', 5000);
  big[5000] = '\0';
  assert_int_equal(PFErrorSetFormat(kPFErrValueError, "<%s>", big), -1);
  assert_int_equal(strlen(PFErrorGetMessage()), 5002);
  assert_int_equal(PFErrorGetMessage()[5001], '>');
}

static void test_api_set_last_error(void** state) {
  (void)state;
  PFAPISetLastError("plain message");
  assert_string_equal(PFErrorGetKind(), "RuntimeError");
  assert_string_equal(PFErrorGetMessage(), "plain message");
  assert_string_equal(PFGetLastError(), "RuntimeError: plain message");
  PFAPISetLastError(NULL);
  assert_string_equal(PFErrorGetKind(), "RuntimeError");
  assert_string_equal(PFErrorGetMessage(), "unknown error");
}

static void test_custom_and_invalid_kinds(void** state) {
  (void)state;
  PFErrorSet("KeyboardInterrupt", "stop");
  assert_string_equal(PFErrorGetKind(), "KeyboardInterrupt");
  PFErrorSet("mylib.ParseError", "bad token");
  assert_string_equal(PFErrorGetKind(), "mylib.ParseError");
  char longest[PF_ERROR_KIND_MAX];
  memset(longest, 'K', sizeof(longest) - 1);
  longest[sizeof(longest) - 1] = '\0';
  PFErrorSet(longest, "longest kind");
  assert_string_equal(PFErrorGetKind(), longest);

  const char* invalid[] = {"", "1Error", "has space", "Semi;colon", "Err-or"};
  for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); ++i) {
    PFErrorSet(invalid[i], "the message");
    assert_string_equal(PFErrorGetKind(), "RuntimeError");
    assert_non_null(strstr(PFErrorGetMessage(), "the message"));
    char quoted[64];
    snprintf(quoted, sizeof(quoted), "'%s'", invalid[i]);
    assert_non_null(strstr(PFErrorGetMessage(), quoted));
  }
  char too_long[PF_ERROR_KIND_MAX + 1];
  memset(too_long, 'K', sizeof(too_long) - 1);
  too_long[sizeof(too_long) - 1] = '\0';
  PFErrorSet(too_long, "m");
  assert_string_equal(PFErrorGetKind(), "RuntimeError");
  assert_non_null(strstr(PFErrorGetMessage(), too_long));

  PFErrorSet(NULL, "null kind");
  assert_string_equal(PFErrorGetKind(), "RuntimeError");
  assert_non_null(strstr(PFErrorGetMessage(), "(null)"));
  assert_non_null(strstr(PFErrorGetMessage(), "null kind"));

  assert_int_equal(PFErrorSetFormat("bad kind", "fmt %d", 5), -1);
  assert_string_equal(PFErrorGetKind(), "RuntimeError");
  assert_non_null(strstr(PFErrorGetMessage(), "'bad kind'"));
  assert_non_null(strstr(PFErrorGetMessage(), "fmt 5"));
}

/* Re-raising with the current kind and message as arguments: the inputs
 * alias the thread's own error storage. */
static void test_reraise_with_own_kind_and_message(void** state) {
  (void)state;
  PFErrorSet("AttributeError", "no attribute 'x'");
  PFErrorSetFormat(PFErrorGetKind(), "%s (while loading)", PFErrorGetMessage());
  assert_string_equal(PFErrorGetKind(), "AttributeError");
  assert_string_equal(PFErrorGetMessage(), "no attribute 'x' (while loading)");
  PFErrorSet(PFErrorGetKind(), PFErrorGetMessage());
  assert_string_equal(PFErrorGetKind(), "AttributeError");
  assert_string_equal(PFErrorGetMessage(), "no attribute 'x' (while loading)");
}

/* Every setter may be handed the thread's own error strings: the kind, the
 * message, the traceback and PFGetLastError's text.
 * Each is read before anything it points into is freed or moved; ASan
 * reports it otherwise. */
static void test_setters_take_own_strings(void** state) {
  (void)state;
  /* The message as the kind: it is freed when the new message is stored. */
  PFErrorSet(kPFErrValueError, "KeyError");
  PFErrorSet(PFErrorGetMessage(), "kind from the message");
  assert_string_equal(PFErrorGetKind(), "KeyError");
  assert_string_equal(PFErrorGetMessage(), "kind from the message");
  PFErrorSet(kPFErrValueError, "IndexError");
  assert_int_equal(
      PFErrorSetFormat(PFErrorGetMessage(), "%s/%s", PFErrorGetKind(), PFErrorGetMessage()), -1);
  assert_string_equal(PFErrorGetKind(), "IndexError");
  assert_string_equal(PFErrorGetMessage(), "ValueError/IndexError");
  /* An invalid kind taken from the message is kept in the new message. */
  PFErrorSet(kPFErrValueError, "not an identifier");
  PFErrorSet(PFErrorGetMessage(), PFErrorGetMessage());
  assert_string_equal(PFErrorGetKind(), "RuntimeError");
  assert_string_equal(PFErrorGetMessage(),
                      "(invalid error kind 'not an identifier') not an identifier");

  /* The traceback as kind and message: it is cleared by the new error. */
  PFErrorSet(kPFErrValueError, "v");
  PFErrorAppendTraceback("AttributeError");
  PFErrorSet(PFErrorGetTraceback(), PFErrorGetTraceback());
  assert_string_equal(PFErrorGetKind(), "AttributeError");
  assert_string_equal(PFErrorGetMessage(), "AttributeError");
  assert_string_equal(PFErrorGetTraceback(), "");
  PFErrorSet(kPFErrValueError, "v");
  PFErrorAppendTraceback("  at frame");
  PFErrorSetFormat(kPFErrKeyError, "[%s]", PFErrorGetTraceback());
  assert_string_equal(PFErrorGetMessage(), "[  at frame]");
  assert_string_equal(PFErrorGetTraceback(), "");

  /* PFGetLastError's text, through every setter. */
  PFErrorSet(kPFErrKeyError, "k");
  PFErrorAppendTraceback("  at f");
  PFAPISetLastError(PFGetLastError());
  assert_string_equal(PFErrorGetKind(), "RuntimeError");
  assert_string_equal(PFErrorGetMessage(), "KeyError: k\n  at f");
  PFErrorSet(kPFErrIndexError, PFGetLastError());
  assert_string_equal(PFErrorGetMessage(), "RuntimeError: KeyError: k\n  at f");
  PFErrorSetFormat(kPFErrValueError, "%s|%s", PFGetLastError(), PFErrorGetMessage());
  assert_string_equal(PFErrorGetMessage(),
                      "IndexError: RuntimeError: KeyError: k\n  at f|"
                      "RuntimeError: KeyError: k\n  at f");
  PFErrorSet(kPFErrValueError, "TypeError");
  (void)PFGetLastError();
  PFErrorSet(PFGetLastError() + strlen("ValueError: "), "kind from the full text");
  assert_string_equal(PFErrorGetKind(), "TypeError");

  /* PFAPISetLastError with the message and the traceback. */
  PFErrorSet(kPFErrKeyError, "plain");
  PFAPISetLastError(PFErrorGetMessage());
  assert_string_equal(PFErrorGetMessage(), "plain");
  PFErrorAppendTraceback("  tb line");
  PFAPISetLastError(PFErrorGetTraceback());
  assert_string_equal(PFErrorGetMessage(), "  tb line");
  assert_string_equal(PFErrorGetTraceback(), "");

  /* The kind, the message and the full text as traceback lines. */
  PFErrorSet(kPFErrKeyError, "m");
  PFErrorAppendTraceback(PFErrorGetKind());
  PFErrorAppendTraceback(PFErrorGetMessage());
  PFErrorAppendTraceback(PFGetLastError());
  assert_string_equal(PFErrorGetTraceback(), "KeyError\nm\nKeyError: m\nKeyError\nm");
}

/* PFErrorAppendTraceback(PFErrorGetTraceback()): the line is the buffer
 * that appending grows, so it moves under the copy. */
static void test_append_own_traceback(void** state) {
  (void)state;
  PFErrorSet(kPFErrValueError, "v");
  PFErrorAppendTraceback("  at one");
  PFErrorAppendTraceback(PFErrorGetTraceback());
  assert_string_equal(PFErrorGetTraceback(), "  at one\n  at one");
  /* Doubling each time: the buffer is reallocated again and again. */
  static char expect[8192];
  size_t len = strlen(PFErrorGetTraceback());
  memcpy(expect, PFErrorGetTraceback(), len + 1);
  for (int i = 0; i < 8; ++i) {
    expect[len] = '\n';
    memcpy(expect + len + 1, expect, len);
    len = 2 * len + 1;
    expect[len] = '\0';
    PFErrorAppendTraceback(PFErrorGetTraceback());
    assert_string_equal(PFErrorGetTraceback(), expect);
  }
  assert_int_equal(strlen(PFErrorGetTraceback()), 512 * 8 + 511);
  /* A line that starts inside the traceback (its last line). */
  PFErrorSet(kPFErrValueError, "v");
  PFErrorAppendTraceback("first");
  PFErrorAppendTraceback("second line");
  const char* tb = PFErrorGetTraceback();
  PFErrorAppendTraceback(strrchr(tb, '\n') + 1);
  assert_string_equal(PFErrorGetTraceback(), "first\nsecond line\nsecond line");
  for (int i = 0; i < 6; ++i) {
    tb = PFErrorGetTraceback();
    PFErrorAppendTraceback(tb + strlen("first\n"));
  }
  assert_string_equal(PFGetLastError() + strlen("ValueError: v\n"), PFErrorGetTraceback());
  assert_int_equal(strncmp(PFErrorGetTraceback(), "first\nsecond line\nsecond line\n", 30), 0);
}

static void test_traceback_and_clear(void** state) {
  (void)state;
  PFErrorSet(kPFErrValueError, "v");
  PFErrorAppendTraceback("  at one");
  PFErrorAppendTraceback(NULL); /* ignored */
  PFErrorAppendTraceback("  at two");
  assert_string_equal(PFErrorGetTraceback(), "  at one\n  at two");
  assert_string_equal(PFGetLastError(), "ValueError: v\n  at one\n  at two");
  /* Many lines grow the storage. */
  for (int i = 0; i < 200; ++i) PFErrorAppendTraceback("  at a frame with a longish line");
  assert_int_equal(strlen(PFErrorGetTraceback()), 17 + 200 * 33);
  /* A new error starts without a traceback. */
  PFErrorSet(kPFErrKeyError, "k");
  assert_string_equal(PFErrorGetTraceback(), "");
  assert_string_equal(PFGetLastError(), "KeyError: k");
  PFErrorClear();
  assert_string_equal(PFErrorGetKind(), "");
  assert_string_equal(PFErrorGetMessage(), "");
  assert_string_equal(PFErrorGetTraceback(), "");
  assert_string_equal(PFGetLastError(), "");
}

static void test_success_does_not_clear(void** state) {
  (void)state;
  PFErrorSet(kPFErrIndexError, "kept");
  PFFunctionHandle f = make(pf_test_echo, NULL);
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &rv, &rc));
  assert_pf_ok(PFFuncFree(f));
  assert_string_equal(PFErrorGetKind(), "IndexError");
  assert_string_equal(PFErrorGetMessage(), "kept");
}

/* ---- errors out of packed functions ------------------------------------- */

static int raise_value_error(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)ret;
  (void)res;
  return PFErrorSetFormat(kPFErrValueError, "bad value: %d arguments", n);
}

static void test_callee_error_reaches_caller(void** state) {
  (void)state;
  PFFunctionHandle f = make(raise_value_error, NULL);
  PFValue rv = {.v_int64 = 123};
  int rc = 456;
  PFValue arg = {.v_int64 = 1};
  int code = kPFInt;
  assert_int_equal(PFFuncCall(f, &arg, &code, 1, &rv, &rc), -1);
  assert_string_equal(PFErrorGetKind(), "ValueError");
  assert_string_equal(PFErrorGetMessage(), "bad value: 1 arguments");
  assert_string_equal(PFGetLastError(), "ValueError: bad value: 1 arguments");
  /* Outputs are written only on success. */
  assert_int_equal(rv.v_int64, 123);
  assert_int_equal(rc, 456);
  assert_pf_ok(PFFuncFree(f));
}

static int fail_silently(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  return (int)(intptr_t)res;
}

static void test_callee_fails_without_error(void** state) {
  (void)state;
  PFFunctionHandle f = make(fail_silently, (void*)(intptr_t)-1);
  PFValue rv;
  int rc;
  /* An older error on the thread must not be mistaken for the callee's. */
  PFErrorSet(kPFErrKeyError, "stale");
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError, "PFFuncCall",
                  "<anonymous>", "without recording an error");
  /* Named functions are named. */
  assert_pf_ok(PFFuncSetInfo(f, "errors.silent", NULL, NULL));
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError, "errors.silent",
                  "returned -1");
  assert_pf_ok(PFFuncFree(f));
  /* Any non-zero status is a failure. */
  f = make(fail_silently, (void*)(intptr_t)2);
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError, "returned 2");
  assert_pf_ok(PFFuncFree(f));
}

static int clear_then_fail(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)ret;
  (void)res;
  PFErrorSet(kPFErrValueError, "handled inside");
  PFErrorClear();
  return -1;
}

static void test_callee_clears_then_fails(void** state) {
  (void)state;
  PFFunctionHandle f = make(clear_then_fail, NULL);
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError, "PFFuncCall",
                  "without recording an error");
  assert_pf_ok(PFFuncFree(f));
}

/* A callee that sets a handle return and then fails: the reference the
 * return slot took is dropped. */
static int set_then_fail(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)n;
  (void)res;
  if (PFCFuncSetReturn(ret, &args[0], &codes[0], 1) != 0) return -1;
  return PFErrorSetFormat(kPFErrIndexError, "failed after setting a return");
}

static void test_failure_releases_return_value(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFFunctionHandle g = pf_test_make_counted(pf_test_echo, &fins);
  PFFunctionHandle f = make(set_then_fail, NULL);
  PFValue arg = {.v_handle = g}, rv;
  int code = kPFFuncHandle, rc;
  assert_pf_error(PFFuncCall(f, &arg, &code, 1, &rv, &rc), kPFErrIndexError, "after setting");
  assert_pf_ok(PFFuncFree(g));
  assert_int_equal(atomic_load(&fins), 1);
  /* And a string return is freed (LeakSanitizer checks). */
  char long_str[400];
  memset(long_str, 's', sizeof(long_str) - 1);
  long_str[sizeof(long_str) - 1] = '\0';
  arg.v_str = long_str;
  code = kPFStr;
  assert_pf_error(PFFuncCall(f, &arg, &code, 1, &rv, &rc), kPFErrIndexError);
  assert_pf_ok(PFFuncFree(f));
}

/* ---- finalizers that run after a failure ------------- */

/* A finalizer that calls entry points that fail: a registry lookup of a
 * name that is not there (KeyError), a traceback line, and a packed
 * function that fails (ValueError). */
static atomic_int g_failing_fins;
static void failing_fin(void* payload) {
  (void)payload;
  atomic_fetch_add(&g_failing_fins, 1);
  PFFuncRemoveGlobal("errors.finalizer.no.such.name");
  PFErrorAppendTraceback("  in the finalizer");
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(raise_value_error, NULL, NULL, &f) == 0) {
    PFValue rv;
    int rc;
    PFFuncCall(f, NULL, NULL, 0, &rv, &rc);
    PFFuncFree(f);
  }
}

/* Sets as its return value an object whose only reference is then the
 * return slot's, so that dropping it runs failing_fin; then fails, with
 * an error (res != NULL) or without one. res: "boxed" or "func". */
static int set_doomed_then_fail(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args;
  (void)codes;
  (void)n;
  PFObjectHandle obj = NULL;
  int code;
  if (strcmp(res, "func") == 0 || strcmp(res, "func-silent") == 0) {
    if (PFFuncCreateFromCFunc(pf_test_echo, NULL, failing_fin, &obj) != 0) return -1;
    code = kPFFuncHandle;
  } else {
    if (PFObjectCreateBoxed(NULL, failing_fin, &obj) != 0) return -1;
    code = kPFObjectHandle;
  }
  PFValue v = {.v_handle = obj};
  int st = PFCFuncSetReturn(ret, &v, &code, 1);
  PFObjectFree(obj);
  if (st != 0) return -1;
  if (strstr(res, "silent") != NULL) return -1;
  PFErrorSetFormat(kPFErrIndexError, "the callee's own error (%s)", (const char*)res);
  PFErrorAppendTraceback("  in the callee");
  return -1;
}

/* Calls the function in its resource and passes its failure on. */
static int forward_failure(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  PFValue rv;
  int rc;
  if (PFFuncCall(res, args, codes, n, &rv, &rc) != 0) {
    PFErrorAppendTraceback("  in forward_failure");
    return -1;
  }
  return PFCFuncSetReturn(ret, &rv, &rc, 1);
}

static void test_finalizer_does_not_replace_callee_error(void** state) {
  (void)state;
  const char* kinds[] = {"boxed", "func"};
  for (int i = 0; i < 2; ++i) {
    atomic_store(&g_failing_fins, 0);
    PFFunctionHandle f = make(set_doomed_then_fail, (void*)kinds[i]);
    PFValue rv = {.v_int64 = 7};
    int rc = 8;
    assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrIndexError,
                    "the callee's own error", kinds[i]);
    assert_int_equal(atomic_load(&g_failing_fins), 1); /* it did run, and fail */
    assert_string_equal(PFErrorGetTraceback(), "  in the callee");
    assert_int_equal(rv.v_int64, 7);
    assert_int_equal(rc, 8);
    /* One level up, the error passes on unchanged. */
    PFFunctionHandle outer = make(forward_failure, f);
    assert_pf_error(PFFuncCall(outer, NULL, NULL, 0, &rv, &rc), kPFErrIndexError,
                    "the callee's own error", kinds[i]);
    assert_int_equal(atomic_load(&g_failing_fins), 2);
    assert_string_equal(PFErrorGetTraceback(), "  in the callee\n  in forward_failure");
    assert_pf_ok(PFFuncFree(outer));
    assert_pf_ok(PFFuncFree(f));
  }
}

/* A callee that fails without recording an error is reported as such, not
 * as whatever the finalizer recorded. */
static void test_finalizer_does_not_hide_silent_failure(void** state) {
  (void)state;
  const char* kinds[] = {"boxed-silent", "func-silent"};
  for (int i = 0; i < 2; ++i) {
    atomic_store(&g_failing_fins, 0);
    PFFunctionHandle f = make(set_doomed_then_fail, (void*)kinds[i]);
    assert_pf_ok(PFFuncSetInfo(f, "errors.silent_with_finalizer", NULL, NULL));
    PFValue rv;
    int rc;
    PFErrorSet(kPFErrKeyError, "stale");
    assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError,
                    "errors.silent_with_finalizer", "without recording an error");
    assert_int_equal(atomic_load(&g_failing_fins), 1);
    /* Its traceback is the one line of the place that found the silence,
     * with nothing of the finalizer's. */
    static const char k_origin[] = "  File \"runtime/function.c\", line ";
    assert_int_equal(strncmp(PFErrorGetTraceback(), k_origin, sizeof k_origin - 1), 0);
    assert_null(strchr(PFErrorGetTraceback(), '\n'));
    assert_pf_ok(PFFuncFree(f));
  }
}

/* Sets a result whose finalizer fails, replaces it with an int (which
 * runs the finalizer), then fails without recording an error. */
static int replace_doomed_then_fail_silently(PFValue* args, int* codes, int n, PFRetValueHandle ret,
                                             void* res) {
  (void)args;
  (void)codes;
  (void)n;
  (void)res;
  if (pf_test_return_boxed(ret, failing_fin) != 0) return -1;
  PFValue v = {.v_int64 = 3};
  int code = kPFInt;
  if (PFCFuncSetReturn(ret, &v, &code, 1) != 0) return -1;
  return -1;
}

static void test_replaced_result_finalizer_does_not_hide_silent_failure(void** state) {
  (void)state;
  atomic_store(&g_failing_fins, 0);
  PFFunctionHandle f = make(replace_doomed_then_fail_silently, NULL);
  PFValue rv;
  int rc;
  PFErrorSet(kPFErrKeyError, "stale");
  assert_pf_error(PFFuncCall(f, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError,
                  "without recording an error");
  assert_int_equal(atomic_load(&g_failing_fins), 1);
  assert_pf_ok(PFFuncFree(f));
}

/* ---- a nested chain: A calls B calls C, C raises --------------------------- */

typedef struct {
  PFFunctionHandle next; /* NULL: raise */
  const char* frame;
} level_t;

static int level(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  level_t* lv = res;
  if (lv->next == NULL)
    return PFErrorSetFormat(kPFErrValueError, "innermost failure at depth %d", n);
  PFValue rv;
  int rc;
  if (PFFuncCall(lv->next, args, codes, n, &rv, &rc) != 0) {
    PFErrorAppendTraceback(lv->frame);
    return -1;
  }
  return PFCFuncSetReturn(ret, &rv, &rc, 1);
}

static void test_nested_chain_keeps_kind_and_traceback(void** state) {
  (void)state;
  level_t lc = {NULL, "  in C"};
  PFFunctionHandle c = make(level, &lc);
  level_t lb = {c, "  in B"};
  PFFunctionHandle b = make(level, &lb);
  level_t la = {b, "  in A"};
  PFFunctionHandle a = make(level, &la);
  PFValue arg = {.v_int64 = 0}, rv;
  int code = kPFInt, rc;
  PFErrorSet(kPFErrKeyError, "old");
  PFErrorAppendTraceback("old frame");
  assert_pf_error(PFFuncCall(a, &arg, &code, 1, &rv, &rc), kPFErrValueError,
                  "innermost failure at depth 1");
  assert_string_equal(PFErrorGetTraceback(), "  in B\n  in A");
  assert_string_equal(PFGetLastError(), "ValueError: innermost failure at depth 1\n  in B\n  in A");
  /* And again: nothing carries over from the first failure. */
  assert_pf_error(PFFuncCall(a, &arg, &code, 1, &rv, &rc), kPFErrValueError);
  assert_string_equal(PFErrorGetTraceback(), "  in B\n  in A");
  assert_pf_ok(PFFuncFree(a));
  assert_pf_ok(PFFuncFree(b));
  assert_pf_ok(PFFuncFree(c));
}

/* ---- errors are per thread ---------------------------------------------- */

typedef struct {
  char kind_at_start[PF_ERROR_KIND_MAX];
  char msg_at_start[64];
  char kind_after[PF_ERROR_KIND_MAX];
  char msg_after[64];
  int call_status;
} thread_report;

static void* thread_body(void* p) {
  thread_report* r = p;
  snprintf(r->kind_at_start, sizeof(r->kind_at_start), "%s", PFErrorGetKind());
  snprintf(r->msg_at_start, sizeof(r->msg_at_start), "%s", PFGetLastError());
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(raise_value_error, NULL, NULL, &f) == 0) {
    PFValue rv;
    int rc;
    r->call_status = PFFuncCall(f, NULL, NULL, 0, &rv, &rc);
    PFFuncFree(f);
  }
  snprintf(r->kind_after, sizeof(r->kind_after), "%s", PFErrorGetKind());
  snprintf(r->msg_after, sizeof(r->msg_after), "%s", PFErrorGetMessage());
  return NULL;
}

static void test_errors_are_per_thread(void** state) {
  (void)state;
  PFErrorSet(kPFErrKeyError, "main thread error");
  PFErrorAppendTraceback("main frame");
  thread_report r;
  memset(&r, 0, sizeof(r));
  r.call_status = 99;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, thread_body, &r), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_string_equal(r.kind_at_start, "");
  assert_string_equal(r.msg_at_start, "");
  assert_int_equal(r.call_status, -1);
  assert_string_equal(r.kind_after, "ValueError");
  assert_string_equal(r.msg_after, "bad value: 0 arguments");
  /* The main thread's error is untouched. */
  assert_string_equal(PFErrorGetKind(), "KeyError");
  assert_string_equal(PFErrorGetMessage(), "main thread error");
  assert_string_equal(PFErrorGetTraceback(), "main frame");
}

/* PF_ERROR records the error as PFErrorSetFormat does, and the place that
 * wrote it as the first traceback line. */
static int origin_line;

static int fails_with_origin(int x) {
  origin_line = __LINE__ + 1; /* the next line's */
  return PF_ERROR(kPFErrValueError, "fails_with_origin: bad x %d", x);
}

static void test_pf_error_records_its_origin(void** state) {
  (void)state;
  PFErrorAppendTraceback("  left over from an earlier error");
  assert_int_equal(fails_with_origin(7), -1);
  assert_string_equal(PFErrorGetKind(), "ValueError");
  assert_string_equal(PFErrorGetMessage(), "fails_with_origin: bad x 7");
  char want[256];
  snprintf(want, sizeof want, "  File \"%s\", line %d, in fails_with_origin", __FILE__,
           origin_line);
  assert_string_equal(PFErrorGetTraceback(), want);
  PFErrorClear();
}

/* The runtime's own misuse errors carry the place that detected them. */
static void test_null_argument_error_names_its_origin(void** state) {
  (void)state;
  PFValue out;
  int code;
  assert_int_equal(PFFuncCall(NULL, NULL, NULL, 0, &out, &code), -1);
  assert_string_equal(PFErrorGetKind(), "TypeError");
  assert_non_null(strstr(PFErrorGetTraceback(), "  File \"runtime/"));
  assert_non_null(strstr(PFErrorGetTraceback(), "\", line "));
  assert_null(strchr(PFErrorGetTraceback(), '\n')); /* one line */
  PFErrorClear();
}

/* ---- one idiom: every error the library records says where it began ---- */

/* `rc` is -1 with an error of `kind` whose message begins with `begins` and
 * whose traceback is one line: the place in `file` that raised it. */
#define assert_raised_in(rc, kind, begins, file) \
  check_raised_in_((rc), (kind), (begins), (file), __LINE__)
static void check_raised_in_(int rc, const char* kind, const char* begins, const char* file,
                             int line) {
  char want[128];
  snprintf(want, sizeof want, "  File \"%s\", line ", file);
  const char* tb = PFErrorGetTraceback();
  if (rc != -1 || strcmp(PFErrorGetKind(), kind) != 0 ||
      strncmp(PFErrorGetMessage(), begins, strlen(begins)) != 0 ||
      strncmp(tb, want, strlen(want)) != 0 || strchr(tb, '\n') != NULL)
    fail_msg(
        "line %d: got %d, %s: %s\n  traceback \"%s\"\nwant -1, %s: %s...\n  traceback \"%s...\"",
        line, rc, PFErrorGetKind(), PFErrorGetMessage(), tb, kind, begins, want);
}

static int no_prepack(void* res, int position, PFValue value, int code,
                      const PFAllocator* allocator, PFValue* out, int* out_code, int* packed) {
  (void)res, (void)position, (void)value, (void)code, (void)allocator, (void)out;
  (void)out_code;
  *packed = 0;
  return 0;
}

static int checker_fails_silently(void) { return -1; }

/* One error of each kind of misuse, in each file that records errors: the
 * traceback names the file, whichever raised it (the registry, which uses
 * only the public API, included). A leftover line goes with the old error. */
static void test_library_errors_record_their_origin(void** state) {
  (void)state;
  PFFunctionHandle f = make(pf_test_echo, NULL), g = NULL;
  PFValue v[2] = {{.v_int64 = 3}, {.v_int64 = 3}}, rv;
  int codes[2] = {kPFInt, kPFInt}, bad = 40, flt = kPFFloat, rc;
  static const char* const reg = "registry/registry.c";
  PFErrorSet(kPFErrKeyError, "old");
  PFErrorAppendTraceback("  left over");
  assert_raised_in(PFFuncRegisterGlobal("", f, 0), kPFErrValueError,
                   "PFFuncRegisterGlobal: argument 'name' is empty", reg);
  assert_raised_in(PFFuncRegisterGlobalEx("errors.origin", f, 0x100), kPFErrValueError,
                   "PFFuncRegisterGlobalEx: argument 'flags'", reg);
  assert_raised_in(PFFuncRegisterGlobal("errors.origin", NULL, 0), kPFErrTypeError,
                   "PFFuncRegisterGlobal: argument 'func'", reg);
  assert_raised_in(PFFuncGetGlobal("errors.origin", NULL), kPFErrTypeError,
                   "PFFuncGetGlobal: argument 'out' is NULL", reg);
  assert_raised_in(PFFuncRemoveGlobal("errors.origin"), kPFErrKeyError,
                   "PFFuncRemoveGlobal: no function named", reg);
  assert_raised_in(PFFuncListGlobalNames(NULL, NULL), kPFErrTypeError,
                   "PFFuncListGlobalNames: argument 'out_size' is NULL", reg);
  assert_raised_in(PFRegistryIsSealed(NULL), kPFErrTypeError,
                   "PFRegistryIsSealed: argument 'out' is NULL", reg);
  assert_raised_in(PFModExportGlobal(NULL, "", 0), kPFErrTypeError,
                   "PFModExportGlobal: argument 'mod' is NULL", reg);
  assert_pf_ok(PFFuncRegisterGlobal("errors.origin", f, 0));
  assert_raised_in(PFFuncRegisterGlobal("errors.origin", f, 0), kPFErrKeyError,
                   "PFFuncRegisterGlobal: a function named 'errors.origin'", reg);
  assert_pf_ok(PFFuncRemoveGlobal("errors.origin"));

  static const char* const fn = "runtime/function.c";
  assert_raised_in(PFFuncCall(f, v, &bad, 1, &rv, &rc), kPFErrTypeError,
                   "PFFuncCall: argument 0 has unknown type code 40", fn);
  assert_raised_in(PFFuncCall(f, v, codes, -1, &rv, &rc), kPFErrValueError,
                   "PFFuncCall: argument 'num_args' is negative", fn);
  assert_raised_in(PFFuncCall(f, NULL, codes, 1, &rv, &rc), kPFErrTypeError,
                   "PFFuncCall: argument 'args' is NULL with num_args 1", fn);
  uint64_t not_a_slot[16] = {0};
  assert_raised_in(PFCFuncSetReturn(not_a_slot, v, codes, 1), kPFErrTypeError,
                   "PFCFuncSetReturn: argument 'ret' is not the return handle", fn);
  PFFunctionHandle silent = make(fail_silently, (void*)(intptr_t)-1);
  assert_raised_in(PFFuncCall(silent, NULL, NULL, 0, &rv, &rc), kPFErrRuntimeError,
                   "PFFuncCall: function '<anonymous>' returned -1 without recording", fn);
  assert_pf_ok(PFFuncFree(silent));
  assert_pf_ok(PFFuncSetInfo(f, "errors.origin", NULL, NULL));
  assert_raised_in(PFFuncSetInfo(f, "again", NULL, NULL), kPFErrValueError,
                   "PFFuncSetInfo: argument 'name': the function's name is already set", fn);

  static const char* const bind = "runtime/bind.c";
  int backwards[2] = {1, 0};
  assert_raised_in(PFFuncBind(f, -1, NULL, NULL, NULL, NULL, &g), kPFErrValueError,
                   "PFFuncBind: argument 'num_bound' is negative", bind);
  assert_raised_in(PFFuncBind(f, 1, backwards, NULL, codes, NULL, &g), kPFErrTypeError,
                   "PFFuncBind: argument 'values' is NULL", bind);
  assert_raised_in(PFFuncBind(f, 2, backwards, v, codes, NULL, &g), kPFErrValueError,
                   "PFFuncBind: argument 'positions[1]' is 0, not greater", bind);
  assert_raised_in(PFFuncSetPrePack(f, "", no_prepack), kPFErrValueError,
                   "PFFuncSetPrePack: argument 'pack_format' is empty", bind);
  assert_pf_ok(PFFuncSetPrePack(f, "errors.layout", no_prepack));
  assert_raised_in(PFFuncSetPrePack(f, "errors.layout", no_prepack), kPFErrValueError,
                   "PFFuncSetPrePack: the function already has a pre-pack hook", bind);

  static const char* const cont = "runtime/container.c";
  PFObjectHandle obj = NULL;
  PFValue keys[2] = {{.v_int64 = 5}, {.v_int64 = 5}};
  int found = 0;
  assert_raised_in(PFArrayCreate(NULL, NULL, -1, &obj), kPFErrValueError,
                   "PFArrayCreate: argument 'size' is negative", cont);
  assert_raised_in(PFArrayCreate(NULL, codes, 2, &obj), kPFErrTypeError,
                   "PFArrayCreate: argument 'values' is NULL with size 2", cont);
  assert_raised_in(PFMapCreate(keys, codes, v, codes, 2, &obj), kPFErrValueError,
                   "PFMapCreate: key 1 (5) repeats key 0", cont);
  assert_raised_in(PFMapCreate(keys, &flt, v, codes, 1, &obj), kPFErrTypeError,
                   "PFMapCreate: key 0 has type code float", cont);
  assert_pf_ok(PFArrayCreate(v, codes, 2, &obj));
  assert_raised_in(PFArrayGetItem(obj, 2, &rv, &rc), kPFErrIndexError,
                   "PFArrayGetItem: argument 'index' is 2, out of range", cont);
  assert_pf_ok(PFObjectFree(obj));
  assert_pf_ok(PFMapCreate(keys, codes, v, codes, 1, &obj));
  assert_raised_in(PFMapGetItem(obj, v[0], kPFFloat, &rv, &rc, &found), kPFErrTypeError,
                   "PFMapGetItem: argument 'key_code' is float", cont);
  assert_pf_ok(PFObjectFree(obj));
  /* A value a container is to keep is checked as an argument is. */
  assert_raised_in(PFArrayCreate(v, &bad, 1, &obj), kPFErrTypeError,
                   "PFArrayCreate: value 0 has unknown type code 40", fn);

  size_t size = 0;
  assert_raised_in(PFGetStructSize("NoSuchStruct", &size), kPFErrKeyError,
                   "PFGetStructSize: unknown struct", "runtime/api.c");
  assert_raised_in(PFMemAlloc(SIZE_MAX) == NULL ? -1 : 0, kPFErrMemoryError,
                   "PFMemAlloc: argument 'size' is larger", "runtime/alloc.c");
  assert_raised_in(PFSignatureTypeInfo(-1, NULL, NULL), kPFErrIndexError,
                   "PFSignatureTypeInfo: argument 'index' is -1", "runtime/signature.c");
  assert_raised_in(PFFuncCreateFromTyped((void*)labs, "int64(nope)", &g), kPFErrValueError,
                   "PFFuncCreateFromTyped: bad signature", "runtime/signature.c");

  static const char* const host = "runtime/host.c";
  PFObjectHandle gate = NULL, other = NULL;
  void* payload = NULL;
  assert_pf_ok(PFHostGateCreate(&gate));
  assert_pf_ok(PFHostGateCreate(&other));
  assert_pf_ok(PFHostObjectCreate(gate, NULL, NULL, &obj));
  assert_raised_in(PFHostObjectGetPayload(obj, other, &payload), kPFErrTypeError,
                   "PFHostObjectGetPayload: argument 'obj' is a host object of another gate", host);
  assert_pf_ok(PFObjectFree(obj));
  assert_pf_ok(PFHostGateClose(other, "errors.origin: the host has gone", 0));
  assert_raised_in(PFFuncCreateFromHostCFunc(other, pf_test_echo, NULL, NULL, &g),
                   kPFErrRuntimeError, "errors.origin: the host has gone", host);
  assert_pf_ok(PFObjectFree(other));
  assert_pf_ok(PFObjectFree(gate));
  assert_pf_ok(PFEnvSetSignalChecker(checker_fails_silently));
  assert_raised_in(PFEnvCheckSignals(), kPFErrRuntimeError,
                   "PFEnvCheckSignals: the host's signal checker failed", "runtime/signals.c");
  assert_pf_ok(PFEnvSetSignalChecker(NULL));

  PFModuleHandle mod = NULL;
  assert_pf_ok(PFModCreateFromFunctions("errors.origin.module", &f, 1, &mod));
  assert_raised_in(PFModImport(mod, mod), kPFErrValueError,
                   "PFModImport: importing module 'errors.origin.module'",
                   "runtime/module_import.c");
  assert_pf_ok(PFModFree(mod));
  static const PFFuncDescriptor twice = {
      .abi = 1, .kind = kPFFuncDescriptorPacked, .name = "errors.twice", .packed = pf_test_echo};
  const PFFuncDescriptor* const table[2] = {&twice, &twice};
  assert_raised_in(PFModLoadFromDescriptors(table, table + 2, &mod), kPFErrKeyError,
                   "PFModLoadFromDescriptors: module '<descriptor table>' registers the name",
                   "runtime/module_desc.c");
  assert_pf_ok(PFFuncFree(f));
  PFErrorClear();
}

/* The rule's one exception (base.h, at PF_ERROR): what a function that the
 * runtime made refuses about a call's arguments is the caller's error and
 * records no place. A bound function given too few arguments is one, as a
 * typed function's conversions are (test_typed.c). */
static void test_call_argument_errors_record_no_origin(void** state) {
  (void)state;
  PFFunctionHandle f = make(pf_test_echo, NULL), b = NULL;
  int pos = 1, code = kPFInt, rc;
  PFValue v = {.v_int64 = 7}, rv;
  assert_pf_ok(PFFuncBind(f, 1, &pos, &v, &code, NULL, &b));
  PFErrorAppendTraceback("  left over");
  assert_pf_error(PFFuncCall(b, NULL, NULL, 0, &rv, &rc), kPFErrTypeError,
                  "bound function: a constant is bound at position 1");
  assert_string_equal(PFErrorGetTraceback(), "");
  assert_pf_ok(PFFuncFree(b));
  assert_pf_ok(PFFuncFree(f));
  PFErrorClear();
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_set_and_read),
      cmocka_unit_test(test_set_format_returns_minus_one),
      cmocka_unit_test(test_api_set_last_error),
      cmocka_unit_test(test_custom_and_invalid_kinds),
      cmocka_unit_test(test_reraise_with_own_kind_and_message),
      cmocka_unit_test(test_setters_take_own_strings),
      cmocka_unit_test(test_append_own_traceback),
      cmocka_unit_test(test_traceback_and_clear),
      cmocka_unit_test(test_success_does_not_clear),
      cmocka_unit_test(test_callee_error_reaches_caller),
      cmocka_unit_test(test_callee_fails_without_error),
      cmocka_unit_test(test_callee_clears_then_fails),
      cmocka_unit_test(test_failure_releases_return_value),
      cmocka_unit_test(test_finalizer_does_not_replace_callee_error),
      cmocka_unit_test(test_finalizer_does_not_hide_silent_failure),
      cmocka_unit_test(test_replaced_result_finalizer_does_not_hide_silent_failure),
      cmocka_unit_test(test_nested_chain_keeps_kind_and_traceback),
      cmocka_unit_test(test_errors_are_per_thread),
      cmocka_unit_test(test_pf_error_records_its_origin),
      cmocka_unit_test(test_null_argument_error_names_its_origin),
      cmocka_unit_test(test_library_errors_record_their_origin),
      cmocka_unit_test(test_call_argument_errors_record_no_origin),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
