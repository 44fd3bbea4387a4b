/* PFFuncBind: constants inserted among a call's arguments, what a bound
 * function owns, its signature, and every bad input. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/pf_test.h"
#include "../runtime/prepack_cache.h" /* pf_pp_force_hash */

/* Packed function: returns its arguments as an Array, so that a test can
 * read back exactly what the inner function received. The Array copies
 * strings and bytes and retains handles, so nothing it returns is borrowed
 * from the call. */
static int collect(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  PFObjectHandle a = NULL;
  if (PFArrayCreate(args, codes, n, &a) != 0) return -1;
  PFValue v = {.v_handle = a};
  int code = kPFObjectHandle;
  int rc = PFCFuncSetReturn(ret, &v, &code, 1);
  PFObjectFree(a);
  return rc;
}

static int fail_always(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)ret, (void)res;
  return PFErrorSetFormat(kPFErrKeyError, "inner failure");
}

static PFFunctionHandle make(PFPackedCFunc fn) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, NULL, NULL, &f));
  return f;
}

/* Calls `f` and returns the Array it returned (a new reference). */
static PFObjectHandle call_collect(PFFunctionHandle f, PFValue* args, int* codes, int n) {
  PFValue rv;
  int rc = -1;
  assert_pf_ok(PFFuncCall(f, args, codes, n, &rv, &rc));
  assert_int_equal(rc, kPFObjectHandle);
  return rv.v_handle;
}

static void item(PFObjectHandle a, int64_t i, PFValue* v, int* code) {
  assert_pf_ok(PFArrayGetItem(a, i, v, code));
}

/* Every type code a bound value may have, each bound between two of the
 * caller's arguments, reaches the inner function unchanged at its
 * position; strings and bytes are the bound function's own copies. */
static void test_every_type_code(void** state) {
  (void)state;
  atomic_int boxed_fin = 0;
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&boxed_fin, pf_test_count_fin, &boxed));
  PFFunctionHandle inner = make(collect);
  PFFunctionHandle other = make(pf_test_echo);
  char text[] = "bound text";
  char raw[] = {'a', 0, 'b'};
  PFByteArray bytes = {raw, sizeof(raw)};
  int dummy;
  enum { N = 12 };
  PFValue values[N];
  int codes[N];
  memset(values, 0, sizeof(values));
  values[0].v_int64 = -42, codes[0] = kPFInt;
  values[1].v_float64 = 2.5, codes[1] = kPFFloat;
  values[2].v_int64 = 1, codes[2] = kPFBool;
  codes[3] = kPFNull;
  values[4].v_handle = &dummy, codes[4] = kPFOpaqueHandle;
  values[5].v_type = (DLDataType){kDLFloat, 32, 1}, codes[5] = kPFDataType;
  values[6].v_device = (DLDevice){kDLCPU, 3}, codes[6] = kPFDevice;
  values[7].v_str = text, codes[7] = kPFStr;
  values[8].v_handle = &bytes, codes[8] = kPFBytes;
  values[9].v_handle = other, codes[9] = kPFFuncHandle;
  values[10].v_handle = boxed, codes[10] = kPFObjectHandle;
  values[11].v_int64 = 77, codes[11] = kPFExtBegin + 1;
  /* Bound at the odd positions 1, 3, ..., 23: the caller's arguments take
   * the even ones. */
  int positions[N];
  for (int i = 0; i < N; ++i) positions[i] = 2 * i + 1;
  PFFunctionHandle bound = NULL;
  assert_pf_ok(PFFuncBind(inner, N, positions, values, codes, NULL, &bound));
  /* The bound function keeps its own copies and references. */
  memset(text, 'X', sizeof(text) - 1);
  memset(raw, 'Y', sizeof(raw));
  PFObjectFree(boxed);
  PFFuncFree(other);
  assert_int_equal(boxed_fin, 0);

  PFValue args[N];
  int arg_codes[N];
  for (int i = 0; i < N; ++i) args[i].v_int64 = 1000 + i, arg_codes[i] = kPFInt;
  for (int round = 0; round < 2; ++round) {
    PFObjectHandle a = call_collect(bound, args, arg_codes, N);
    int64_t size = 0;
    assert_pf_ok(PFArrayGetSize(a, &size));
    assert_int_equal(size, 2 * N);
    PFValue v;
    int c;
    for (int i = 0; i < N; ++i) {
      item(a, 2 * i, &v, &c);
      assert_int_equal(c, kPFInt);
      assert_int_equal(v.v_int64, 1000 + i);
    }
    item(a, 1, &v, &c), assert_int_equal(c, kPFInt), assert_int_equal(v.v_int64, -42);
    item(a, 3, &v, &c), assert_int_equal(c, kPFFloat), assert_true(v.v_float64 == 2.5);
    item(a, 5, &v, &c), assert_int_equal(c, kPFBool), assert_int_equal(v.v_int64, 1);
    item(a, 7, &v, &c), assert_int_equal(c, kPFNull);
    item(a, 9, &v, &c), assert_int_equal(c, kPFOpaqueHandle), assert_ptr_equal(v.v_handle, &dummy);
    item(a, 11, &v, &c), assert_int_equal(c, kPFDataType);
    assert_int_equal(v.v_type.code, kDLFloat), assert_int_equal(v.v_type.bits, 32);
    item(a, 13, &v, &c), assert_int_equal(c, kPFDevice), assert_int_equal(v.v_device.device_id, 3);
    item(a, 15, &v, &c), assert_int_equal(c, kPFStr), assert_string_equal(v.v_str, "bound text");
    item(a, 17, &v, &c), assert_int_equal(c, kPFBytes);
    const PFByteArray* ba = v.v_handle;
    assert_int_equal(ba->size, 3);
    assert_memory_equal(ba->data, "a\0b", 3);
    item(a, 19, &v, &c), assert_int_equal(c, kPFFuncHandle), assert_ptr_equal(v.v_handle, other);
    item(a, 21, &v, &c), assert_int_equal(c, kPFObjectHandle), assert_ptr_equal(v.v_handle, boxed);
    item(a, 23, &v, &c), assert_int_equal(c, kPFExtBegin + 1), assert_int_equal(v.v_int64, 77);
    PFObjectFree(a);
  }
  PFFuncFree(bound);
  assert_int_equal(boxed_fin, 1);
  PFFuncFree(inner);
}

/* The bound function holds the inner function and its object constants,
 * and releases both when it goes. */
static void test_ownership(void** state) {
  (void)state;
  atomic_int inner_fin = 0, boxed_fin = 0;
  PFFunctionHandle inner = pf_test_make_counted(collect, &inner_fin);
  assert_non_null(inner);
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&boxed_fin, pf_test_count_fin, &boxed));
  int pos = 0;
  PFValue v = {.v_handle = boxed};
  int code = kPFObjectHandle;
  PFFunctionHandle bound = NULL;
  assert_pf_ok(PFFuncBind(inner, 1, &pos, &v, &code, NULL, &bound));
  PFFuncFree(inner);
  PFObjectFree(boxed);
  assert_int_equal(inner_fin, 0);
  assert_int_equal(boxed_fin, 0);
  PFObjectFree(call_collect(bound, NULL, NULL, 0));
  PFFuncFree(bound);
  assert_int_equal(inner_fin, 1);
  assert_int_equal(boxed_fin, 1);
}

/* A bound function binds again; zero constants is a plain forwarder. */
static void test_nested_and_empty(void** state) {
  (void)state;
  PFFunctionHandle inner = make(collect);
  PFFunctionHandle b0 = NULL, b1 = NULL, b2 = NULL;
  assert_pf_ok(PFFuncBind(inner, 0, NULL, NULL, NULL, NULL, &b0));
  int pos = 0;
  PFValue v = {.v_int64 = 5};
  int code = kPFInt;
  assert_pf_ok(PFFuncBind(b0, 1, &pos, &v, &code, NULL, &b1));
  v.v_int64 = 6;
  assert_pf_ok(PFFuncBind(b1, 1, &pos, &v, &code, NULL, &b2));
  PFValue arg = {.v_int64 = 7};
  PFObjectHandle a = call_collect(b2, &arg, &code, 1);
  PFValue got;
  int c;
  item(a, 0, &got, &c), assert_int_equal(got.v_int64, 5);
  item(a, 1, &got, &c), assert_int_equal(got.v_int64, 6);
  item(a, 2, &got, &c), assert_int_equal(got.v_int64, 7);
  PFObjectFree(a);
  PFFuncFree(b2);
  PFFuncFree(b1);
  PFFuncFree(b0);
  PFFuncFree(inner);
}

/* More arguments than the stack buffer of a call holds take the heap. */
static void test_bind_many_arguments(void** state) {
  (void)state;
  PFFunctionHandle inner = make(collect);
  int pos[2] = {0, 40};
  PFValue v[2] = {{.v_int64 = -1}, {.v_int64 = -2}};
  int codes[2] = {kPFInt, kPFInt};
  PFFunctionHandle bound = NULL;
  assert_pf_ok(PFFuncBind(inner, 2, pos, v, codes, NULL, &bound));
  PFValue args[45];
  int arg_codes[45];
  for (int i = 0; i < 45; ++i) args[i].v_int64 = i, arg_codes[i] = kPFInt;
  PFObjectHandle a = call_collect(bound, args, arg_codes, 45);
  PFValue got;
  int c;
  item(a, 0, &got, &c), assert_int_equal(got.v_int64, -1);
  item(a, 1, &got, &c), assert_int_equal(got.v_int64, 0);
  item(a, 40, &got, &c), assert_int_equal(got.v_int64, -2);
  item(a, 41, &got, &c), assert_int_equal(got.v_int64, 39);
  item(a, 46, &got, &c), assert_int_equal(got.v_int64, 44);
  PFObjectFree(a);
  /* Too few arguments to reach the constant at position 40. */
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(bound, args, arg_codes, 3, &rv, &rc), "TypeError", "position 40",
                  "at least 39 arguments", "given 3");
  PFFuncFree(bound);
  PFFuncFree(inner);
}

/* The inner function's error is the bound call's error. */
static void test_inner_error(void** state) {
  (void)state;
  PFFunctionHandle inner = make(fail_always);
  int pos = 0;
  PFValue v = {.v_int64 = 1};
  int code = kPFInt;
  PFFunctionHandle bound = NULL;
  assert_pf_ok(PFFuncBind(inner, 1, &pos, &v, &code, NULL, &bound));
  PFValue rv;
  int rc;
  assert_pf_error(PFFuncCall(bound, NULL, NULL, 0, &rv, &rc), "KeyError", "inner failure");
  PFFuncFree(bound);
  PFFuncFree(inner);
}

static int64_t mix(int64_t a, double b, int64_t c) { return a * 100 + (int64_t)b * 10 + c; }

/* A typed function's signature loses the bound parameters; calls convert
 * as before. */
static void test_signature(void** state) {
  (void)state;
  PFFunctionHandle inner = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)mix, "int64(int64, double, int64)", &inner));
  int pos = 1;
  PFValue v = {.v_float64 = 7.0};
  int code = kPFFloat;
  PFFunctionHandle bound = NULL;
  assert_pf_ok(PFFuncBind(inner, 1, &pos, &v, &code, NULL, &bound));
  const char* sig = NULL;
  assert_pf_ok(PFFuncGetInfo(bound, NULL, &sig, NULL));
  assert_string_equal(sig, "int64(int64,int64)");
  PFValue args[2] = {{.v_int64 = 3}, {.v_int64 = 4}};
  int codes[2] = {kPFInt, kPFInt};
  PFValue rv;
  int rc;
  assert_pf_ok(PFFuncCall(bound, args, codes, 2, &rv, &rc));
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 374);
  /* Binding everything leaves "()". */
  int all[3] = {0, 1, 2};
  PFValue vals[3] = {{.v_int64 = 1}, {.v_float64 = 2.0}, {.v_int64 = 3}};
  int all_codes[3] = {kPFInt, kPFFloat, kPFInt};
  PFFunctionHandle full = NULL;
  assert_pf_ok(PFFuncBind(inner, 3, all, vals, all_codes, NULL, &full));
  assert_pf_ok(PFFuncGetInfo(full, NULL, &sig, NULL));
  assert_string_equal(sig, "int64()");
  assert_pf_ok(PFFuncCall(full, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rv.v_int64, 123);
  /* Past the end of the signature. */
  int past = 3;
  PFFunctionHandle out = (PFFunctionHandle)0x1;
  assert_pf_error(PFFuncBind(inner, 1, &past, &v, &code, NULL, &out), "ValueError", "PFFuncBind",
                  "positions[0]", "is 3", "3 parameters");
  assert_ptr_equal(out, (PFFunctionHandle)0x1); /* outputs are written only on success */
  PFFuncFree(full);
  PFFuncFree(bound);
  PFFuncFree(inner);
}

/* Bad input: each an error naming the argument, nothing retained. */
static void test_bind_bad_input(void** state) {
  (void)state;
  atomic_int boxed_fin = 0;
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&boxed_fin, pf_test_count_fin, &boxed));
  PFFunctionHandle inner = make(collect);
  PFFunctionHandle out = NULL;
  int pos[2] = {0, 1};
  PFValue v[2] = {{.v_handle = boxed}, {.v_int64 = 0}};
  int codes[2] = {kPFObjectHandle, kPFInt};
  assert_pf_error(PFFuncBind(inner, 1, pos, v, codes, NULL, NULL), "TypeError", "PFFuncBind",
                  "'out'");
  assert_pf_error(PFFuncBind(NULL, 1, pos, v, codes, NULL, &out), "TypeError", "PFFuncBind",
                  "'func'");
  assert_pf_error(PFFuncBind(boxed, 1, pos, v, codes, NULL, &out), "TypeError", "'func'");
  assert_pf_error(PFFuncBind(inner, -1, pos, v, codes, NULL, &out), "ValueError", "'num_bound'",
                  "-1");
  assert_pf_error(PFFuncBind(inner, 1, NULL, v, codes, NULL, &out), "TypeError", "'positions'");
  assert_pf_error(PFFuncBind(inner, 1, pos, NULL, codes, NULL, &out), "TypeError", "'values'");
  assert_pf_error(PFFuncBind(inner, 1, pos, v, NULL, NULL, &out), "TypeError", "'type_codes'");
  int neg[1] = {-2};
  assert_pf_error(PFFuncBind(inner, 1, neg, v, codes, NULL, &out), "ValueError", "'positions[0]'",
                  "negative");
  int repeated[2] = {1, 1};
  assert_pf_error(PFFuncBind(inner, 2, repeated, v, codes, NULL, &out), "ValueError",
                  "'positions[1]'", "strictly increasing");
  int unsorted[2] = {3, 1};
  assert_pf_error(PFFuncBind(inner, 2, unsorted, v, codes, NULL, &out), "ValueError",
                  "'positions[1]'", "strictly increasing");
  assert_pf_error(PFFuncBind(inner, 1, pos, v, codes, (PFPrePackCacheHandle)boxed, &out),
                  "TypeError", "'cache'", "not a live prepack cache handle");
  /* A bad second value: the first (an object) must not stay retained. */
  PFValue bad[2] = {{.v_handle = boxed}, {.v_str = NULL}};
  int bad_codes[2] = {kPFObjectHandle, kPFStr};
  assert_pf_error(PFFuncBind(inner, 2, pos, bad, bad_codes, NULL, &out), "TypeError", "PFFuncBind",
                  "bound value 1", "NULL");
  bad_codes[1] = 200;
  bad[1].v_int64 = 0;
  assert_pf_error(PFFuncBind(inner, 2, pos, bad, bad_codes, NULL, &out), "TypeError",
                  "bound value 1", "unknown type code 200");
  bad_codes[1] = kPFFuncHandle;
  bad[1].v_handle = boxed;
  assert_pf_error(PFFuncBind(inner, 2, pos, bad, bad_codes, NULL, &out), "TypeError",
                  "bound value 1", "not a live function");
  float data[2] = {1, 2};
  int64_t shape[1] = {2};
  DLTensor t = {
      .data = data, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = shape};
  bad[1].v_handle = &t;
  bad_codes[1] = kPFDLTensorHandle;
  assert_pf_error(PFFuncBind(inner, 2, pos, bad, bad_codes, NULL, &out), "TypeError",
                  "bound value 1", "DLTensor*", "tensor object");
  assert_null(out);
  PFObjectFree(boxed);
  assert_int_equal(boxed_fin, 1);
  PFFuncFree(inner);
}

/* ---- pre-pack hooks ---- */

/* What a hook saw and what it is to do; the resource of the function. */
typedef struct {
  int calls;
  int positions[8];
  int mode;        /* 0: keep, 1: pack, 2: fail at fail_at, 3: fail silently, 4: bad code */
  int fail_at;     /* call index that fails in mode 2 */
  int bad_code;    /* the code mode 4 packs into */
  atomic_int* fin; /* counts the finalizers of boxed packed values */
  const PFAllocator* allocator;
} hook_state;

static void free_payload(void* p) { PFMemFree(p); }

static int test_hook(void* resource, int position, PFValue value, int code,
                     const PFAllocator* allocator, PFValue* out, int* out_code, int* is_packed) {
  hook_state* h = resource;
  int call = h->calls++;
  if (call < 8) h->positions[call] = position;
  h->allocator = allocator;
  switch (h->mode) {
    case 0:
      *is_packed = 0;
      return 0;
    case 2:
      if (call == h->fail_at) return PFErrorSetFormat(kPFErrKeyError, "hook refused %d", position);
      break;
    case 3:
      return -1;
    case 4:
      *out_code = h->bad_code;
      if (h->bad_code == kPFFuncHandle) {
        /* A live object, but not a function: handed over all the same. */
        PFObjectHandle o = NULL;
        if (PFObjectCreateBoxed(h->fin, pf_test_count_fin, &o) != 0) return -1;
        out->v_handle = o;
      } else {
        out->v_str = "not ownable";
      }
      *is_packed = 1;
      return 0;
    default:
      break;
  }
  /* Pack: an int becomes ten times itself; anything else becomes a boxed
   * int64 allocated with the given allocator. */
  if (code == kPFInt) {
    out->v_int64 = value.v_int64 * 10;
    *out_code = kPFInt;
  } else {
    int64_t* payload = allocator->malloc_fn(sizeof(int64_t), allocator->user_data);
    if (payload == NULL) return PFErrorSetFormat(kPFErrMemoryError, "hook: no memory");
    *payload = 1000 + position;
    PFObjectHandle o = NULL;
    if (PFObjectCreateBoxed(payload, free_payload, &o) != 0) return -1;
    out->v_handle = o;
    *out_code = kPFObjectHandle;
  }
  *is_packed = 1;
  return 0;
}

static PFFunctionHandle make_hooked(hook_state* h) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(collect, h, NULL, &f));
  assert_pf_ok(PFFuncSetPrePack(f, "test/x10", test_hook));
  return f;
}

/* No pre-packing: the hook runs once per constant and the constants stay
 * as they are. */
static void test_prepack_keep(void** state) {
  (void)state;
  hook_state h = {.mode = 0};
  PFFunctionHandle inner = make_hooked(&h);
  int pos[2] = {1, 2};
  PFValue v[2] = {{.v_int64 = 4}, {.v_str = "w"}};
  int codes[2] = {kPFInt, kPFStr};
  PFFunctionHandle bound = NULL;
  assert_pf_ok(PFFuncBind(inner, 2, pos, v, codes, NULL, &bound));
  assert_int_equal(h.calls, 2);
  assert_int_equal(h.positions[0], 1);
  assert_int_equal(h.positions[1], 2);
  PFValue arg = {.v_int64 = 0};
  int ac = kPFInt;
  for (int i = 0; i < 3; ++i) {
    PFObjectHandle a = call_collect(bound, &arg, &ac, 1);
    PFValue got;
    int c;
    item(a, 1, &got, &c), assert_int_equal(got.v_int64, 4);
    item(a, 2, &got, &c), assert_string_equal(got.v_str, "w");
    PFObjectFree(a);
  }
  assert_int_equal(h.calls, 2); /* never again on a call */
  PFFuncFree(bound);
  PFFuncFree(inner);
}

/* Packed replacement: every call gets the packed values; an object that
 * the hook replaced is not kept; the packed object goes with the bound
 * function; the hook got a working allocator. */
static void test_prepack_replace(void** state) {
  (void)state;
  hook_state h = {.mode = 1};
  PFFunctionHandle inner = make_hooked(&h);
  atomic_int orig_fin = 0;
  PFObjectHandle orig = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&orig_fin, pf_test_count_fin, &orig));
  int pos[2] = {0, 2};
  PFValue v[2] = {{.v_int64 = 4}, {.v_handle = orig}};
  int codes[2] = {kPFInt, kPFObjectHandle};
  PFFunctionHandle bound = NULL;
  assert_pf_ok(PFFuncBind(inner, 2, pos, v, codes, NULL, &bound));
  assert_non_null(h.allocator);
  PFObjectFree(orig);
  assert_int_equal(orig_fin, 1); /* the bound function did not keep it */
  PFValue arg = {.v_int64 = 5};
  int ac = kPFInt;
  PFObjectHandle a = call_collect(bound, &arg, &ac, 1);
  PFValue got;
  int c;
  item(a, 0, &got, &c), assert_int_equal(c, kPFInt), assert_int_equal(got.v_int64, 40);
  item(a, 1, &got, &c), assert_int_equal(got.v_int64, 5);
  item(a, 2, &got, &c), assert_int_equal(c, kPFObjectHandle);
  void* payload = NULL;
  assert_pf_ok(PFObjectGetBoxedPayload(got.v_handle, &payload));
  assert_int_equal(*(int64_t*)payload, 1002);
  PFObjectFree(a);
  PFFuncFree(bound); /* frees the packed object: ASan checks the payload */
  PFFuncFree(inner);
}

/* A hook that fails fails the bind with its error; what earlier constants
 * were packed into is released; no function is created. */
static void test_prepack_hook_errors(void** state) {
  (void)state;
  hook_state h = {.mode = 2, .fail_at = 1};
  PFFunctionHandle inner = make_hooked(&h);
  atomic_int orig_fin = 0;
  PFObjectHandle orig = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&orig_fin, pf_test_count_fin, &orig));
  int pos[2] = {0, 3};
  PFValue v[2] = {{.v_handle = orig}, {.v_int64 = 1}};
  int codes[2] = {kPFObjectHandle, kPFInt};
  PFFunctionHandle out = (PFFunctionHandle)0x1;
  assert_pf_error(PFFuncBind(inner, 2, pos, v, codes, NULL, &out), "KeyError", "hook refused 3");
  assert_ptr_equal(out, (PFFunctionHandle)0x1); /* outputs are written only on success */
  /* Silent failure. */
  h.mode = 3;
  h.calls = 0;
  assert_pf_error(PFFuncBind(inner, 2, pos, v, codes, NULL, &out), "RuntimeError", "PFFuncBind",
                  "test/x10", "position 0", "without recording an error");
  /* A packed value of a code that cannot be owned. */
  h.mode = 4;
  h.bad_code = kPFStr;
  assert_pf_error(PFFuncBind(inner, 2, pos, v, codes, NULL, &out), "TypeError", "PFFuncBind",
                  "position 0", "type code str");
  h.bad_code = kPFDLTensorHandle;
  assert_pf_error(PFFuncBind(inner, 2, pos, v, codes, NULL, &out), "TypeError", "type code tensor");
  h.bad_code = 200;
  assert_pf_error(PFFuncBind(inner, 2, pos, v, codes, NULL, &out), "TypeError", "(200)");
  /* A live object under the wrong handle code: refused and released. */
  atomic_int wrong_fin = 0;
  h.fin = &wrong_fin;
  h.bad_code = kPFFuncHandle;
  assert_pf_error(PFFuncBind(inner, 2, pos, v, codes, NULL, &out), "TypeError",
                  "packed value for position 0", "not a live function");
  assert_int_equal(wrong_fin, 1);
  assert_ptr_equal(out, (PFFunctionHandle)0x1);
  PFObjectFree(orig);
  assert_int_equal(orig_fin, 1);
  PFFuncFree(inner);
}

static void test_set_prepack_bad_input(void** state) {
  (void)state;
  hook_state h = {.mode = 0};
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(collect, &h, NULL, &f));
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  assert_pf_error(PFFuncSetPrePack(NULL, "a", test_hook), "TypeError", "PFFuncSetPrePack",
                  "'func'");
  assert_pf_error(PFFuncSetPrePack(boxed, "a", test_hook), "TypeError", "'func'");
  assert_pf_error(PFFuncSetPrePack(f, NULL, test_hook), "TypeError", "'pack_format'");
  assert_pf_error(PFFuncSetPrePack(f, "a", NULL), "TypeError", "'prepack'");
  assert_pf_error(PFFuncSetPrePack(f, "", test_hook), "ValueError", "'pack_format'", "empty");
  assert_pf_ok(PFFuncSetPrePack(f, "a", test_hook));
  assert_pf_error(PFFuncSetPrePack(f, "b", test_hook), "ValueError", "already has");
  PFObjectFree(boxed);
  PFFuncFree(f);
}

/* ---- the shared cache ---- */

/* A tensor object that owns a copy of `n` floats shaped (rows, n / rows);
 * its deleter counts into `deleted` (may be NULL). */
typedef struct {
  DLManagedTensor managed;
  int64_t shape[2];
  int64_t strides[2];
  atomic_int* deleted;
  float data[];
} test_tensor;

static void test_tensor_delete(DLManagedTensor* m) {
  test_tensor* t = m->manager_ctx;
  if (t->deleted) atomic_fetch_add(t->deleted, 1);
  free(t);
}

static PFObjectHandle make_tensor(const float* values, int n, int rows, atomic_int* deleted) {
  test_tensor* t = calloc(1, sizeof(*t) + sizeof(float) * (size_t)n);
  assert_non_null(t);
  memcpy(t->data, values, sizeof(float) * (size_t)n);
  t->shape[0] = rows;
  t->shape[1] = n / rows;
  t->deleted = deleted;
  t->managed.dl_tensor = (DLTensor){.data = t->data,
                                    .device = {kDLCPU, 0},
                                    .ndim = 2,
                                    .dtype = {kDLFloat, 32, 1},
                                    .shape = t->shape};
  t->managed.manager_ctx = t;
  t->managed.deleter = test_tensor_delete;
  PFObjectHandle o = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(&t->managed, &o));
  return o;
}

/* Counts its calls; packs a tensor into a tensor of its doubled values
 * (same shape), allocated with the hook's allocator. */
typedef struct {
  atomic_int calls;
  atomic_int packed_deleted;
  int keep; /* 1: leave constants as they are */
  int fail; /* 1: fail */
} cache_hook_state;

static void packed_delete(DLManagedTensor* m) {
  test_tensor* t = m->manager_ctx;
  if (t->deleted) atomic_fetch_add(t->deleted, 1);
  PFMemFree(t);
}

static int cache_hook(void* resource, int position, PFValue value, int code,
                      const PFAllocator* allocator, PFValue* out, int* out_code, int* is_packed) {
  (void)position;
  cache_hook_state* h = resource;
  atomic_fetch_add(&h->calls, 1);
  if (h->fail) return PFErrorSetFormat(kPFErrValueError, "cache_hook: refused");
  if (h->keep || code != kPFObjectHandle) {
    *is_packed = 0;
    return 0;
  }
  DLTensor* src = NULL;
  if (PFTensorGetDLTensor(value.v_handle, &src) != 0) return -1;
  int n = (int)(src->shape[0] * src->shape[1]);
  test_tensor* t =
      allocator->malloc_fn(sizeof(*t) + sizeof(float) * (size_t)n, allocator->user_data);
  if (t == NULL) return PFErrorSetFormat(kPFErrMemoryError, "cache_hook: no memory");
  memset(t, 0, sizeof(*t));
  for (int i = 0; i < n; ++i) t->data[i] = 2 * ((const float*)src->data)[i];
  t->shape[0] = src->shape[0];
  t->shape[1] = src->shape[1];
  t->deleted = &h->packed_deleted;
  t->managed.dl_tensor = (DLTensor){.data = t->data,
                                    .device = {kDLCPU, 0},
                                    .ndim = 2,
                                    .dtype = {kDLFloat, 32, 1},
                                    .shape = t->shape};
  t->managed.manager_ctx = t;
  t->managed.deleter = packed_delete;
  PFObjectHandle o = NULL;
  if (PFTensorCreateFromDLPack(&t->managed, &o) != 0) return -1;
  out->v_handle = o;
  *out_code = kPFObjectHandle;
  *is_packed = 1;
  return 0;
}

static PFFunctionHandle make_cache_hooked(cache_hook_state* h, const char* format) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(collect, h, NULL, &f));
  assert_pf_ok(PFFuncSetPrePack(f, format, cache_hook));
  return f;
}

/* The tensor a bound function passes at position `pos` on a call with one
 * int argument. */
static PFObjectHandle passed_tensor(PFFunctionHandle bound, int64_t pos) {
  PFValue arg = {.v_int64 = 0};
  int ac = kPFInt;
  PFObjectHandle a = call_collect(bound, &arg, &ac, 1);
  PFValue got;
  int c;
  item(a, pos, &got, &c);
  assert_int_equal(c, kPFObjectHandle);
  PFObjectHandle t = got.v_handle;
  PFObjectFree(a); /* the bound function still holds it */
  return t;
}

static void stats(PFPrePackCacheHandle cache, int64_t entries, int64_t bytes, int64_t hits) {
  int64_t e = -1, b = -1, h = -1;
  assert_pf_ok(PFPrePackCacheGetStats(cache, &e, &b, &h));
  assert_int_equal(e, entries);
  assert_int_equal(b, bytes);
  assert_int_equal(h, hits);
}

static PFFunctionHandle bind_one(PFFunctionHandle f, int pos, PFObjectHandle tensor,
                                 PFPrePackCacheHandle cache) {
  PFValue v = {.v_handle = tensor};
  int code = kPFObjectHandle;
  PFFunctionHandle out = NULL;
  assert_pf_ok(PFFuncBind(f, 1, &pos, &v, &code, cache, &out));
  return out;
}

/* Sharing: equal constants (other objects, same content) bound through one
 * cache share one packed value; the hook runs on the miss only; the entry
 * goes with the last function that uses it. */
static void test_cache_hit_and_miss(void** state) {
  (void)state;
  cache_hook_state h = {0};
  PFFunctionHandle f = make_cache_hooked(&h, "test/double");
  PFFunctionHandle g = make_cache_hooked(&h, "test/double");
  PFPrePackCacheHandle cache = NULL;
  assert_pf_ok(PFPrePackCacheCreate(&cache));
  uint32_t type = 0;
  assert_pf_ok(PFObjectGetTypeIndex(cache, &type));
  assert_int_equal(type, kPFObjectPrePackCache);
  assert_string_equal(PFObjectTypeName(type), "prepack cache");
  stats(cache, 0, 0, 0);
  const float w[4] = {1, 2, 3, 4};
  atomic_int d1 = 0, d2 = 0;
  PFObjectHandle t1 = make_tensor(w, 4, 2, &d1);
  PFObjectHandle t2 = make_tensor(w, 4, 2, &d2);
  PFFunctionHandle b1 = bind_one(f, 1, t1, cache);
  assert_int_equal(h.calls, 1);
  stats(cache, 1, 16, 0);
  PFFunctionHandle b2 = bind_one(g, 1, t2, cache); /* another function, same format */
  assert_int_equal(h.calls, 1);
  stats(cache, 1, 16, 1);
  PFObjectHandle p1 = passed_tensor(b1, 1), p2 = passed_tensor(b2, 1);
  assert_ptr_equal(p1, p2);
  DLTensor* pt = NULL;
  assert_pf_ok(PFTensorGetDLTensor(p1, &pt));
  assert_true(((float*)pt->data)[3] == 8.0f);
  /* Another position or another format is another entry. */
  PFFunctionHandle b3 = bind_one(f, 0, t1, cache);
  PFFunctionHandle other = make_cache_hooked(&h, "test/other");
  PFFunctionHandle b4 = bind_one(other, 1, t1, cache);
  assert_int_equal(h.calls, 3);
  stats(cache, 3, 48, 1);
  assert_ptr_not_equal(passed_tensor(b3, 0), p1);
  /* The cache may go first: bound functions hold it. */
  PFObjectFree(cache);
  PFObjectFree(t2);
  assert_int_equal(d2, 1); /* a hit keeps nothing of its constant */
  PFFuncFree(b1);
  assert_int_equal(h.packed_deleted, 0); /* b2 still uses the entry */
  assert_ptr_equal(passed_tensor(b2, 1), p1);
  PFFuncFree(b2);
  assert_int_equal(h.packed_deleted, 1);
  PFFuncFree(b3);
  PFFuncFree(b4);
  assert_int_equal(h.packed_deleted, 3);
  PFObjectFree(t1);
  assert_int_equal(d1, 1);
  PFFuncFree(other);
  PFFuncFree(g);
  PFFuncFree(f);
}

/* Different contents never share, even when their hashes are forced
 * equal: the bytes are compared. */
static void test_cache_forced_collision(void** state) {
  (void)state;
  cache_hook_state h = {0};
  PFFunctionHandle f = make_cache_hooked(&h, "test/double");
  PFPrePackCacheHandle cache = NULL;
  assert_pf_ok(PFPrePackCacheCreate(&cache));
  atomic_store(&pf_pp_force_hash, 1);
  const float w1[4] = {1, 2, 3, 4}, w2[4] = {1, 2, 3, 5};
  PFObjectHandle t1 = make_tensor(w1, 4, 2, NULL), t2 = make_tensor(w2, 4, 2, NULL);
  PFObjectHandle t3 = make_tensor(w1, 4, 1, NULL); /* same bytes, other shape */
  PFFunctionHandle b1 = bind_one(f, 0, t1, cache);
  PFFunctionHandle b2 = bind_one(f, 0, t2, cache);
  PFFunctionHandle b3 = bind_one(f, 0, t3, cache);
  PFFunctionHandle b4 = bind_one(f, 0, t1, cache); /* a true hit */
  atomic_store(&pf_pp_force_hash, 0);
  assert_int_equal(h.calls, 3);
  stats(cache, 3, 48, 1);
  DLTensor* d = NULL;
  assert_pf_ok(PFTensorGetDLTensor(passed_tensor(b2, 0), &d));
  assert_true(((float*)d->data)[3] == 10.0f);
  assert_pf_ok(PFTensorGetDLTensor(passed_tensor(b1, 0), &d));
  assert_true(((float*)d->data)[3] == 8.0f);
  assert_ptr_equal(passed_tensor(b4, 0), passed_tensor(b1, 0));
  PFFuncFree(b1), PFFuncFree(b2), PFFuncFree(b3), PFFuncFree(b4);
  stats(cache, 0, 0, 1);
  PFObjectFree(t1), PFObjectFree(t2), PFObjectFree(t3);
  PFObjectFree(cache);
  PFFuncFree(f);
}

/* Non-sharing mode: no cache, a non-CPU tensor, a strided one, a
 * non-tensor constant: each bind packs its own. A hook that keeps the
 * constant or fails leaves nothing in the cache. */
static void test_cache_non_sharing(void** state) {
  (void)state;
  cache_hook_state h = {0};
  PFFunctionHandle f = make_cache_hooked(&h, "test/double");
  PFPrePackCacheHandle cache = NULL;
  assert_pf_ok(PFPrePackCacheCreate(&cache));
  const float w[4] = {1, 2, 3, 4};
  PFObjectHandle t = make_tensor(w, 4, 2, NULL);
  PFFunctionHandle a = bind_one(f, 0, t, NULL), b = bind_one(f, 0, t, NULL);
  assert_int_equal(h.calls, 2);
  assert_ptr_not_equal(passed_tensor(a, 0), passed_tensor(b, 0));
  PFFuncFree(a), PFFuncFree(b);
  assert_int_equal(h.packed_deleted, 2);
  /* Strided (column-major) and non-CPU tensors are not shared. */
  DLTensor* dt = NULL;
  PFObjectHandle strided = make_tensor(w, 4, 2, NULL);
  assert_pf_ok(PFTensorGetDLTensor(strided, &dt));
  test_tensor* tt = (test_tensor*)((char*)dt - offsetof(test_tensor, managed));
  tt->strides[0] = 1, tt->strides[1] = 2;
  dt->strides = tt->strides;
  PFObjectHandle gpu = make_tensor(w, 4, 2, NULL);
  assert_pf_ok(PFTensorGetDLTensor(gpu, &dt));
  dt->device.device_type = kDLCUDA;
  h.calls = 0;
  a = bind_one(f, 0, strided, cache), b = bind_one(f, 0, strided, cache);
  PFFunctionHandle c = bind_one(f, 0, gpu, cache), d = bind_one(f, 0, gpu, cache);
  assert_int_equal(h.calls, 4);
  stats(cache, 0, 0, 0);
  PFFuncFree(a), PFFuncFree(b), PFFuncFree(c), PFFuncFree(d);
  /* Keep, then fail: nothing stays. */
  h.keep = 1;
  a = bind_one(f, 0, t, cache);
  stats(cache, 0, 0, 0);
  assert_ptr_equal(passed_tensor(a, 0), t);
  PFFuncFree(a);
  h.keep = 0, h.fail = 1;
  int pos = 0;
  PFValue v = {.v_handle = t};
  int code = kPFObjectHandle;
  PFFunctionHandle out = NULL;
  assert_pf_error(PFFuncBind(f, 1, &pos, &v, &code, cache, &out), "ValueError",
                  "cache_hook: refused");
  stats(cache, 0, 0, 0);
  PFObjectFree(strided), PFObjectFree(gpu), PFObjectFree(t);
  PFObjectFree(cache);
  PFFuncFree(f);
}

/* ---- sub-byte dtypes ---- */

/* DLPack 1.1's 4-bit float (e2m1fn), which Debian's DLPack 0.6 header lacks. */
#define TEST_DL_FLOAT4_E2M1FN 17

/* A 1-D tensor whose data is a block of exactly the bytes its elements
 * take, packed: ceil(bits * lanes * n / 8). A read past it is a
 * heap-buffer-overflow under ASan and valgrind. */
typedef struct {
  DLManagedTensor managed;
  int64_t shape[1];
  unsigned char* data;
} packed_tensor;

static size_t packed_bytes(DLDataType dt, int64_t n) {
  return ((size_t)dt.bits * dt.lanes * (size_t)n + 7) / 8;
}

static void packed_tensor_delete(DLManagedTensor* m) {
  packed_tensor* t = m->manager_ctx;
  free(t->data);
  free(t);
}

static PFObjectHandle make_packed_tensor(DLDataType dt, int64_t n, unsigned char fill) {
  packed_tensor* t = calloc(1, sizeof(*t));
  assert_non_null(t);
  size_t nbytes = packed_bytes(dt, n);
  t->data = malloc(nbytes);
  assert_non_null(t->data);
  memset(t->data, fill, nbytes);
  t->shape[0] = n;
  t->managed.dl_tensor =
      (DLTensor){.data = t->data, .device = {kDLCPU, 0}, .ndim = 1, .dtype = dt, .shape = t->shape};
  t->managed.manager_ctx = t;
  t->managed.deleter = packed_tensor_delete;
  PFObjectHandle o = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(&t->managed, &o));
  return o;
}

static void packed_tensor_free_hooked(DLManagedTensor* m) {
  packed_tensor* t = m->manager_ctx;
  PFMemFree(t->data);
  PFMemFree(t);
}

/* Packs a tensor into a copy of its packed bytes, inverted, of the same
 * dtype and shape, with memory from the hook's allocator. */
static int subbyte_hook(void* resource, int position, PFValue value, int code,
                        const PFAllocator* allocator, PFValue* out, int* out_code, int* is_packed) {
  (void)position, (void)code;
  atomic_fetch_add((atomic_int*)resource, 1);
  DLTensor* src = NULL;
  if (PFTensorGetDLTensor(value.v_handle, &src) != 0) return -1;
  size_t nbytes = packed_bytes(src->dtype, src->shape[0]);
  packed_tensor* t = allocator->malloc_fn(sizeof(*t), allocator->user_data);
  unsigned char* data = allocator->malloc_fn(nbytes ? nbytes : 1, allocator->user_data);
  if (t == NULL || data == NULL) {
    allocator->free_fn(t, allocator->user_data);
    allocator->free_fn(data, allocator->user_data);
    return PFErrorSetFormat(kPFErrMemoryError, "subbyte_hook: no memory");
  }
  memset(t, 0, sizeof(*t));
  for (size_t i = 0; i < nbytes; ++i)
    data[i] = (unsigned char)~((const unsigned char*)src->data)[i];
  t->data = data;
  t->shape[0] = src->shape[0];
  t->managed.dl_tensor = (DLTensor){
      .data = data, .device = {kDLCPU, 0}, .ndim = 1, .dtype = src->dtype, .shape = t->shape};
  t->managed.manager_ctx = t;
  t->managed.deleter = packed_tensor_free_hooked;
  PFObjectHandle o = NULL;
  if (PFTensorCreateFromDLPack(&t->managed, &o) != 0) return -1;
  out->v_handle = o;
  *out_code = kPFObjectHandle;
  *is_packed = 1;
  return 0;
}

/* Tensors of sub-byte dtypes (int4, uint1, float4) take bits * n / 8
 * bytes, rounded up, not one byte per element: the cache hashes and
 * compares exactly those bytes (ASan reports a read past them), counts
 * exactly those of a packed value, and still tells contents apart by
 * their last element. */
static void test_cache_subbyte_dtypes(void** state) {
  (void)state;
  atomic_int calls = 0;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(collect, &calls, NULL, &f));
  assert_pf_ok(PFFuncSetPrePack(f, "test/invert", subbyte_hook));
  PFPrePackCacheHandle cache = NULL;
  assert_pf_ok(PFPrePackCacheCreate(&cache));
  const struct {
    DLDataType dtype;
    int64_t n;
  } cases[] = {
      {{kDLInt, 4, 1}, 3},                /* 12 bits: 2 bytes, not 3 */
      {{kDLUInt, 1, 1}, 9},               /* 9 bits: 2 bytes, not 9 */
      {{TEST_DL_FLOAT4_E2M1FN, 4, 1}, 5}, /* 20 bits: 3 bytes, not 5 */
      {{kDLInt, 4, 2}, 3},                /* int4x2: 24 bits, 3 bytes */
  };
  enum { NCASES = sizeof(cases) / sizeof(cases[0]) };
  PFFunctionHandle bound[NCASES][3];
  int64_t bytes = 0;
  for (int i = 0; i < NCASES; ++i) {
    PFObjectHandle w1 = make_packed_tensor(cases[i].dtype, cases[i].n, 0x5a);
    PFObjectHandle w2 = make_packed_tensor(cases[i].dtype, cases[i].n, 0x5a); /* equal */
    PFObjectHandle w3 = make_packed_tensor(cases[i].dtype, cases[i].n, 0x5a);
    DLTensor* d3 = NULL;
    assert_pf_ok(PFTensorGetDLTensor(w3, &d3));
    ((unsigned char*)d3->data)[packed_bytes(cases[i].dtype, cases[i].n) - 1] ^= 0x01;
    bound[i][0] = bind_one(f, 0, w1, cache);
    bound[i][1] = bind_one(f, 0, w2, cache); /* a hit: compares the bytes */
    bound[i][2] = bind_one(f, 0, w3, cache); /* differs in the last byte only */
    bytes += 2 * (int64_t)packed_bytes(cases[i].dtype, cases[i].n);
    stats(cache, 2 * (i + 1), bytes, i + 1);
    assert_ptr_equal(passed_tensor(bound[i][0], 0), passed_tensor(bound[i][1], 0));
    assert_ptr_not_equal(passed_tensor(bound[i][0], 0), passed_tensor(bound[i][2], 0));
    PFObjectFree(w1), PFObjectFree(w2), PFObjectFree(w3);
  }
  assert_int_equal(atomic_load(&calls), 2 * NCASES);
  for (int i = 0; i < NCASES; ++i)
    for (int j = 0; j < 3; ++j) PFFuncFree(bound[i][j]);
  stats(cache, 0, 0, NCASES);
  PFObjectFree(cache);
  PFFuncFree(f);
}

static void test_cache_bad_input(void** state) {
  (void)state;
  assert_pf_error(PFPrePackCacheCreate(NULL), "TypeError", "PFPrePackCacheCreate", "'out'");
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(NULL, NULL, &boxed));
  int64_t n;
  assert_pf_error(PFPrePackCacheGetStats(boxed, &n, &n, &n), "TypeError", "PFPrePackCacheGetStats",
                  "'cache'");
  assert_pf_error(PFPrePackCacheGetStats(NULL, &n, &n, &n), "TypeError", "'cache'");
  PFPrePackCacheHandle cache = NULL;
  assert_pf_ok(PFPrePackCacheCreate(&cache));
  assert_pf_ok(PFPrePackCacheGetStats(cache, NULL, NULL, NULL));
  PFObjectFree(cache);
  PFObjectFree(boxed);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_type_code),
      cmocka_unit_test(test_ownership),
      cmocka_unit_test(test_nested_and_empty),
      cmocka_unit_test(test_bind_many_arguments),
      cmocka_unit_test(test_inner_error),
      cmocka_unit_test(test_signature),
      cmocka_unit_test(test_bind_bad_input),
      cmocka_unit_test(test_prepack_keep),
      cmocka_unit_test(test_prepack_replace),
      cmocka_unit_test(test_prepack_hook_errors),
      cmocka_unit_test(test_set_prepack_bad_input),
      cmocka_unit_test(test_cache_hit_and_miss),
      cmocka_unit_test(test_cache_forced_collision),
      cmocka_unit_test(test_cache_non_sharing),
      cmocka_unit_test(test_cache_bad_input),
      cmocka_unit_test(test_cache_subbyte_dtypes),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
