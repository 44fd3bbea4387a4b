/* Shared helpers for the C tests: error assertions that print both sides,
 * finalizer counters, and a few packed functions that many tests need.
 * Header-only (everything static inline): the Makefile compiles each test
 * file alone. Include after cmocka.h. */
#ifndef PACKEDFUNC_TESTS_SUPPORT_PF_TEST_H_
#define PACKEDFUNC_TESTS_SUPPORT_PF_TEST_H_

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "packedfunc/c_api.h"

/* assert_pf_error(rc, kind, substrings...): asserts that `rc` is -1 and
 * the thread's error has kind `kind` and a message containing every one of
 * the substrings (there may be none). Reports the
 * caller's file and line. */
#define assert_pf_error(rc, ...) \
  pf_test_check_error_((rc), (const char* const[]){__VA_ARGS__, NULL}, __FILE__, __LINE__)

/* kind_and_subs: the kind, then the substrings, then NULL. */
static inline void pf_test_check_error_(int rc, const char* const* kind_and_subs, const char* file,
                                        int line) {
  const char* kind = kind_and_subs[0];
  const char* const* subs = kind_and_subs + 1;
  if (rc != -1) {
    print_error("expected status -1, got %d (last error: '%s')\n", rc, PFGetLastError());
    _fail(file, line);
  }
  _assert_string_equal(PFErrorGetKind(), kind, file, line);
  for (; *subs != NULL; ++subs) {
    if (strstr(PFErrorGetMessage(), *subs) == NULL) {
      print_error("error message '%s' does not contain '%s'\n", PFErrorGetMessage(), *subs);
      _fail(file, line);
    }
  }
}

/* Asserts that an entry point succeeded; on failure prints the error. */
#define assert_pf_ok(expr) pf_test_check_ok_((expr), #expr, __FILE__, __LINE__)

static inline void pf_test_check_ok_(int rc, const char* text, const char* file, int line) {
  if (rc != 0) {
    print_error("%s returned %d: %s\n", text, rc, PFGetLastError());
    _fail(file, line);
  }
}

/* A finalizer that counts its runs in the atomic_int its resource points
 * at. Use one counter per function under test. */
static inline void pf_test_count_fin(void* resource) { atomic_fetch_add((atomic_int*)resource, 1); }

/* Packed function: returns its first argument unchanged (or null). */
static inline int pf_test_echo(PFValue* args, int* codes, int n, PFRetValueHandle ret,
                               void* resource) {
  (void)resource;
  if (n == 0) return 0;
  return PFCFuncSetReturn(ret, &args[0], &codes[0], 1);
}

/* Packed function: returns the int stored in the resource handle. */
static inline int pf_test_return_resource_int(PFValue* args, int* codes, int n,
                                              PFRetValueHandle ret, void* resource) {
  (void)args;
  (void)codes;
  (void)n;
  PFValue v = {.v_int64 = (int64_t)(intptr_t)resource};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* Creates a function from `fn` whose finalizer counts into `counter`. */
static inline PFFunctionHandle pf_test_make_counted(PFPackedCFunc fn, atomic_int* counter) {
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(fn, counter, pf_test_count_fin, &f) != 0) return NULL;
  return f;
}

/* Sets a new boxed object whose finalizer is `fin` as the value of the call
 * that `ret` belongs to; the return slot then holds its only reference, so
 * `fin` runs when the slot lets it go. Returns the status. */
static inline int pf_test_return_boxed(PFRetValueHandle ret, PFObjectFinalizer fin) {
  PFObjectHandle obj = NULL;
  if (PFObjectCreateBoxed(NULL, fin, &obj) != 0) return -1;
  PFValue v = {.v_handle = obj};
  int code = kPFObjectHandle;
  int st = PFCFuncSetReturn(ret, &v, &code, 1);
  PFObjectFree(obj);
  return st;
}

/* Not instrumented by ASan (see pf_test_set_return_stale). */
#if defined(__SANITIZE_ADDRESS__)
#define PF_TEST_NO_ASAN __attribute__((no_sanitize_address))
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PF_TEST_NO_ASAN __attribute__((no_sanitize("address")))
#endif
#endif
#ifndef PF_TEST_NO_ASAN
#define PF_TEST_NO_ASAN
#endif

/* pf_test_set_return_stale(ret, value, type_code): PFCFuncSetReturn with a
 * `ret` that may be stale, kept from a PFFuncCall that the calling function
 * made itself. The exported PFFuncCall keeps the slot in its own frame,
 * just below the caller's; the header's inline path keeps it in the
 * caller's frame, which is still live. The runtime refuses such a handle
 * by reading the tag at its address, and a dead frame is what ASan and
 * valgrind report reads of. So the call is made from a frame whose zeroed
 * buffer now covers a dead frame's address, as a program's stack has moved
 * on by the time it misuses a kept handle. Fails the test when `ret` lies
 * below the buffer (a stack layout this did not foresee). */
static __attribute__((noinline, unused)) PF_TEST_NO_ASAN int pf_test_set_return_stale_(
    PFRetValueHandle ret, PFValue* value, int* type_code, const char* file, int line) {
  volatile unsigned char pad[8192];
  for (size_t i = 0; i < sizeof(pad); ++i) pad[i] = 0;
  uintptr_t at = (uintptr_t)ret, lo = (uintptr_t)pad;
  if (at < lo) {
    print_error("stale ret %p is not inside the helper's frame [%p, %p)\n", ret, (void*)lo,
                (void*)(lo + sizeof(pad)));
    _fail(file, line);
  }
  return PFCFuncSetReturn(ret, value, type_code, 1);
}
#define pf_test_set_return_stale(ret, value, type_code) \
  pf_test_set_return_stale_((ret), (value), (type_code), __FILE__, __LINE__)

/* Calls `f` with no arguments; returns the status. */
static inline int pf_test_call0(PFFunctionHandle f, PFValue* rv, int* rc) {
  return PFFuncCall(f, NULL, NULL, 0, rv, rc);
}

/* Calls `f` with the one argument (arg, code), asserts that it succeeds
 * with a result of type code `want`, and returns the result (a handle is
 * a new reference). */
#define pf_test_call1(f, arg, code, want) \
  pf_test_call1_((f), (arg), (code), (want), __FILE__, __LINE__)
static inline PFValue pf_test_call1_(PFFunctionHandle f, PFValue arg, int code, int want,
                                     const char* file, int line) {
  PFValue rv;
  int rc;
  pf_test_check_ok_(PFFuncCall(f, &arg, &code, 1, &rv, &rc), "PFFuncCall", file, line);
  _assert_int_equal(rc, want, file, line);
  return rv;
}

#endif
