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
  assert_int_equal(PFErrorSetFormat(PFErrorGetMessage(), "%s/%s", PFErrorGetKind(),
                                    PFErrorGetMessage()),
                   -1);
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
static int set_doomed_then_fail(PFValue* args, int* codes, int n, PFRetValueHandle ret,
                                void* res) {
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
static int replace_doomed_then_fail_silently(PFValue* args, int* codes, int n,
                                             PFRetValueHandle ret, void* res) {
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
  origin_line = __LINE__; return PF_ERROR(kPFErrValueError, "fails_with_origin: bad x %d", x);
}

static void test_pf_error_records_its_origin(void** state) {
  (void)state;
  PFErrorAppendTraceback("  left over from an earlier error");
  assert_int_equal(fails_with_origin(7), -1);
  assert_string_equal(PFErrorGetKind(), "ValueError");
  assert_string_equal(PFErrorGetMessage(), "fails_with_origin: bad x 7");
  char want[256];
  snprintf(want, sizeof want, "  File \"%s\", line %d, in fails_with_origin", __FILE__, origin_line);
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
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
