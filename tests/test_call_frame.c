/* PFFuncCallFrame: a call whose parameters and result live in one struct.
 * Results of every kind come back as PFFuncCall returns them, through the
 * exported function and the table; a frame is read before the callee runs,
 * so a callee that reuses it for a call of its own (nested frames) does
 * not disturb the outer call; many frames run at once on threads. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "support/pf_test.h"

static PFFunctionHandle make(PFPackedCFunc fn, void* resource) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, resource, NULL, &f));
  return f;
}

static int p_add(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || c[0] != kPFInt || c[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "add: expected (int, int)");
  PFValue v = {.v_int64 = a[0].v_int64 + a[1].v_int64};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_frame_layout(void** state) {
  (void)state;
  size_t size = 0;
  assert_pf_ok(PFGetStructSize("PFCallFrame", &size));
  assert_int_equal(size, sizeof(PFCallFrame));
  assert_int_equal(offsetof(PFCallFrame, ret_val), 0);
  assert_int_equal(offsetof(PFCallFrame, ret_type_code), 8);
  assert_int_equal(offsetof(PFCallFrame, num_args), 12);
  assert_int_equal(offsetof(PFCallFrame, func), 16);
  assert_int_equal(offsetof(PFCallFrame, args), 16 + sizeof(void*));
  assert_int_equal(offsetof(PFCallFrame, type_codes), 16 + 2 * sizeof(void*));
}

/* The exported function and the table's slot give the same results. */
static void test_frame_plain_result(void** state) {
  (void)state;
  PFFunctionHandle f = make(p_add, NULL);
  PFValue args[2] = {{.v_int64 = 40}, {.v_int64 = 2}};
  int codes[2] = {kPFInt, kPFInt};
  PFCallFrame fr = {.num_args = 2, .func = f, .args = args, .type_codes = codes};
  assert_pf_ok(PFFuncCallFrame(&fr));
  assert_int_equal(fr.ret_type_code, kPFInt);
  assert_int_equal(fr.ret_val.v_int64, 42);
  /* The same frame again, with one input changed. */
  args[1].v_int64 = -50;
  assert_pf_ok(PFGetApiBase()->GetApi(6)->FuncCallFrame(&fr));
  assert_int_equal(fr.ret_type_code, kPFInt);
  assert_int_equal(fr.ret_val.v_int64, -10);
  /* The callee's error comes back as PFFuncCall's would. */
  codes[1] = kPFFloat;
  assert_pf_error(PFFuncCallFrame(&fr), kPFErrTypeError, "add: expected (int, int)");
  assert_int_equal(fr.ret_val.v_int64, -10);
  PFFuncFree(f);
}

/* A string result lives in the thread's return storage, as with
 * PFFuncCall; a handle result is a new reference. */
static void test_frame_str_and_handle_results(void** state) {
  (void)state;
  PFFunctionHandle echo = make(pf_test_echo, NULL);
  PFValue arg = {.v_str = "a string longer than the sixty-four bytes kept inline in a slot...."};
  int code = kPFStr;
  PFCallFrame fr = {.num_args = 1, .func = echo, .args = &arg, .type_codes = &code};
  assert_pf_ok(PFFuncCallFrame(&fr));
  assert_int_equal(fr.ret_type_code, kPFStr);
  assert_string_equal(fr.ret_val.v_str, arg.v_str);
  assert_true(fr.ret_val.v_str != arg.v_str);
  arg.v_handle = echo;
  code = kPFFuncHandle;
  assert_pf_ok(PFFuncCallFrame(&fr));
  assert_int_equal(fr.ret_type_code, kPFFuncHandle);
  assert_ptr_equal(fr.ret_val.v_handle, echo);
  assert_pf_ok(PFFuncFree(fr.ret_val.v_handle)); /* the result's reference */
  assert_pf_ok(PFFuncFree(echo));
}

/* A callee that calls again with the very frame it was called with: the
 * outer call read its inputs first and writes its result last. */
static int p_reuse_frame(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)c, (void)n, (void)a;
  PFCallFrame* fr = res;
  PFValue inner_args[2] = {{.v_int64 = 1}, {.v_int64 = 2}};
  int inner_codes[2] = {kPFInt, kPFInt};
  PFFunctionHandle outer = fr->func;
  PFFunctionHandle add = make(p_add, NULL);
  fr->func = add;
  fr->args = inner_args;
  fr->type_codes = inner_codes;
  fr->num_args = 2;
  int st = PFFuncCallFrame(fr);
  PFFuncFree(add);
  fr->func = outer;
  if (st != 0) return st;
  PFValue v = {.v_int64 = fr->ret_val.v_int64 * 100};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_frame_reused_inside_the_call(void** state) {
  (void)state;
  PFCallFrame fr = {0};
  PFFunctionHandle f = make(p_reuse_frame, &fr);
  fr.func = f;
  assert_pf_ok(PFFuncCallFrame(&fr));
  assert_int_equal(fr.ret_type_code, kPFInt);
  assert_int_equal(fr.ret_val.v_int64, 300);
  PFFuncFree(f);
}

/* Threads, each with its own frame, call one function at once. */
static PFFunctionHandle g_add;
static void* frame_worker(void* arg) {
  int64_t base = (int64_t)(intptr_t)arg;
  PFValue args[2];
  int codes[2] = {kPFInt, kPFInt};
  PFCallFrame fr = {.num_args = 2, .func = g_add, .args = args, .type_codes = codes};
  for (int64_t i = 0; i < 20000; ++i) {
    args[0].v_int64 = base;
    args[1].v_int64 = i;
    if (PFFuncCallFrame(&fr) != 0 || fr.ret_type_code != kPFInt || fr.ret_val.v_int64 != base + i)
      return (void*)1;
  }
  return NULL;
}

static void test_frame_threads(void** state) {
  (void)state;
  g_add = make(p_add, NULL);
  pthread_t t[4];
  for (intptr_t i = 0; i < 4; ++i)
    assert_int_equal(pthread_create(&t[i], NULL, frame_worker, (void*)(i * 1000000)), 0);
  for (int i = 0; i < 4; ++i) {
    void* r;
    assert_int_equal(pthread_join(t[i], &r), 0);
    assert_null(r);
  }
  PFFuncFree(g_add);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_frame_layout),
      cmocka_unit_test(test_frame_plain_result),
      cmocka_unit_test(test_frame_str_and_handle_results),
      cmocka_unit_test(test_frame_reused_inside_the_call),
      cmocka_unit_test(test_frame_threads),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
