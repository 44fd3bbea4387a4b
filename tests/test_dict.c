/* Dict: a mutable map in insertion order. Which keys are equal, the order,
 * what the readers return, updates as one change, removal against a model,
 * snapshots, finalizers that use the Dict, deep nesting, typed signatures,
 * every bad input, and every allocation failing in turn. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "support/pf_test.h"
#include "support/pf_fault.h"

static uint64_t g_not_an_object[16];

static PFValue iv(int64_t x) { return (PFValue){.v_int64 = x}; }
static PFValue fv(double x) { return (PFValue){.v_float64 = x}; }
static PFValue sv(const char* s) { return (PFValue){.v_str = s}; }

static PFObjectHandle empty_dict(void) {
  PFObjectHandle d = NULL;
  assert_pf_ok(PFDictCreate(NULL, NULL, NULL, NULL, 0, &d));
  return d;
}

static int64_t dict_size(PFObjectHandle d) {
  int64_t n = -1;
  assert_pf_ok(PFDictGetSize(d, &n));
  return n;
}

/* The int value of `key`, or -1 when absent. */
static int64_t get_int(PFObjectHandle d, PFValue key, int code) {
  PFValue v;
  int vc, found = -1;
  assert_pf_ok(PFDictGetItem(d, key, code, &v, &vc, &found));
  if (!found) {
    assert_int_equal(vc, kPFNull);
    return -1;
  }
  assert_int_equal(vc, kPFInt);
  return v.v_int64;
}

static void set_int(PFObjectHandle d, PFValue key, int code, int64_t x) {
  assert_pf_ok(PFDictSetItem(d, key, code, iv(x), kPFInt));
}

/* The Dict's entries through a snapshot: keys[i], codes[i], ints[i]. */
static int64_t entries(PFObjectHandle d, PFValue* keys, int* codes, int64_t* ints, int64_t cap) {
  PFObjectHandle a = NULL;
  assert_pf_ok(PFDictToArray(d, &a));
  int64_t n = -1;
  assert_pf_ok(PFArrayGetSize(a, &n));
  assert_true(n % 2 == 0 && n / 2 <= cap);
  for (int64_t i = 0; i < n / 2; ++i) {
    PFValue kv[2];
    int kc[2];
    assert_pf_ok(PFArrayGetItems(a, 2 * i, 2, kv, kc));
    keys[i] = kv[0];
    codes[i] = kc[0];
    if (kc[0] == kPFStr) keys[i].v_str = NULL; /* borrowed from the snapshot */
    ints[i] = kc[1] == kPFInt ? kv[1].v_int64 : -999;
  }
  assert_pf_ok(PFObjectFree(a));
  return n / 2;
}

/* ==== keys ================================================================== */

static void test_dict_key_equality(void** state) {
  (void)state;
  PFObjectHandle d = empty_dict();
  /* Numbers: 1, true and 1.0 are one key; 0.0 and -0.0 too. */
  set_int(d, iv(1), kPFInt, 10);
  set_int(d, iv(1), kPFBool, 11);
  set_int(d, fv(1.0), kPFFloat, 12);
  assert_int_equal(dict_size(d), 1);
  assert_int_equal(get_int(d, iv(1), kPFInt), 12);
  assert_int_equal(get_int(d, iv(7), kPFBool), 12); /* any nonzero bool is true */
  set_int(d, fv(-0.0), kPFFloat, 20);
  assert_int_equal(get_int(d, iv(0), kPFInt), 20);
  assert_int_equal(get_int(d, iv(0), kPFBool), 20);
  set_int(d, fv(0.5), kPFFloat, 30);
  assert_int_equal(get_int(d, fv(0.5), kPFFloat), 30);
  assert_int_equal(get_int(d, iv(0), kPFInt), 20);
  /* Large numbers: equal only when exactly equal. */
  set_int(d, iv(((int64_t)1 << 53) + 1), kPFInt, 40);
  assert_int_equal(get_int(d, fv(9007199254740992.0), kPFFloat), -1);
  set_int(d, fv(9223372036854775808.0), kPFFloat, 41); /* 2^63: no int64 */
  assert_int_equal(get_int(d, iv(INT64_MAX), kPFInt), -1);
  assert_int_equal(get_int(d, fv(9223372036854775808.0), kPFFloat), 41);
  set_int(d, fv(INFINITY), kPFFloat, 42);
  assert_int_equal(get_int(d, fv(INFINITY), kPFFloat), 42);
  /* NaN is never found, and refused as a key. */
  assert_int_equal(get_int(d, fv(NAN), kPFFloat), -1);
  /* str and bytes: by bytes, never equal to each other. */
  char abc[] = "abc";
  PFByteArray b_abc = {"abc", 3}, b_empty = {NULL, 0};
  set_int(d, sv(abc), kPFStr, 50);
  abc[0] = 'x'; /* the Dict has its own copy */
  assert_int_equal(get_int(d, sv("abc"), kPFStr), 50);
  assert_int_equal(get_int(d, (PFValue){.v_handle = &b_abc}, kPFBytes), -1);
  set_int(d, (PFValue){.v_handle = &b_abc}, kPFBytes, 51);
  set_int(d, (PFValue){.v_handle = &b_empty}, kPFBytes, 52);
  set_int(d, sv(""), kPFStr, 53);
  assert_int_equal(get_int(d, (PFValue){.v_handle = &b_empty}, kPFBytes), 52);
  assert_int_equal(get_int(d, sv(""), kPFStr), 53);
  assert_int_equal(get_int(d, sv("1"), kPFStr), -1); /* "1" is not 1 */
  /* null, dtype, device, opaque: by value. */
  set_int(d, iv(0), kPFNull, 60);
  assert_int_equal(get_int(d, iv(12345), kPFNull), 60);
  set_int(d, (PFValue){.v_type = {kDLFloat, 32, 1}}, kPFDataType, 61);
  assert_int_equal(get_int(d, (PFValue){.v_type = {kDLFloat, 32, 2}}, kPFDataType), -1);
  assert_int_equal(get_int(d, (PFValue){.v_type = {kDLFloat, 32, 1}}, kPFDataType), 61);
  set_int(d, (PFValue){.v_device = {kDLCUDA, 1}}, kPFDevice, 62);
  assert_int_equal(get_int(d, (PFValue){.v_device = {kDLCUDA, 1}}, kPFDevice), 62);
  assert_int_equal(get_int(d, (PFValue){.v_device = {kDLCUDA, 0}}, kPFDevice), -1);
  int marker;
  set_int(d, (PFValue){.v_handle = &marker}, kPFOpaqueHandle, 63);
  assert_int_equal(get_int(d, (PFValue){.v_handle = &marker}, kPFOpaqueHandle), 63);
  /* Objects: by identity, under any handle code; the Dict keeps them. */
  atomic_int fins = 0;
  PFFunctionHandle f = pf_test_make_counted(pf_test_echo, &fins), g = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &g));
  set_int(d, (PFValue){.v_handle = f}, kPFFuncHandle, 70);
  assert_int_equal(get_int(d, (PFValue){.v_handle = f}, kPFObjectHandle), 70);
  assert_int_equal(get_int(d, (PFValue){.v_handle = g}, kPFFuncHandle), -1);
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(fins, 0);
  assert_pf_ok(PFFuncFree(g));
  assert_int_equal(dict_size(d), 15);
  assert_pf_ok(PFObjectFree(d));
  assert_int_equal(fins, 1);
}

/* Insertion order; a replaced value keeps its entry's place and key. */
static void test_dict_order(void** state) {
  (void)state;
  PFObjectHandle d = empty_dict();
  set_int(d, sv("b"), kPFStr, 1);
  set_int(d, iv(1), kPFInt, 2);
  set_int(d, sv("a"), kPFStr, 3);
  set_int(d, iv(1), kPFBool, 4); /* true: the key stays int 1 */
  PFValue keys[8];
  int codes[8];
  int64_t ints[8];
  assert_int_equal(entries(d, keys, codes, ints, 8), 3);
  assert_int_equal(codes[0], kPFStr);
  assert_int_equal(codes[1], kPFInt);
  assert_int_equal(keys[1].v_int64, 1);
  assert_int_equal(ints[0], 1);
  assert_int_equal(ints[1], 4);
  assert_int_equal(ints[2], 3);
  /* A key popped and set again goes to the end. */
  PFValue v;
  int vc;
  assert_pf_ok(PFDictPop(d, sv("b"), kPFStr, &v, &vc));
  assert_int_equal(v.v_int64, 1);
  set_int(d, sv("b"), kPFStr, 5);
  assert_int_equal(entries(d, keys, codes, ints, 8), 3);
  assert_int_equal(ints[0], 4);
  assert_int_equal(ints[1], 3);
  assert_int_equal(ints[2], 5);
  assert_pf_ok(PFObjectFree(d));
}

/* ==== changes =============================================================== */

static void test_dict_create_update_pop_clear(void** state) {
  (void)state;
  PFValue k[3] = {sv("x"), iv(2), fv(2.5)};
  int kc[3] = {kPFStr, kPFInt, kPFFloat};
  PFValue v[3] = {iv(1), sv("two"), iv(3)};
  int vc[3] = {kPFInt, kPFStr, kPFInt};
  PFObjectHandle d = NULL;
  assert_pf_ok(PFDictCreate(k, kc, v, vc, 3, &d));
  uint32_t type = 0;
  assert_pf_ok(PFObjectGetTypeIndex(d, &type));
  assert_int_equal(type, kPFObjectDict);
  assert_string_equal(PFObjectTypeName(type), "dict");
  assert_int_equal(dict_size(d), 3);
  PFValue got;
  int gc, found;
  assert_pf_ok(PFDictGetItem(d, iv(2), kPFInt, &got, &gc, &found));
  assert_int_equal(found, 1);
  assert_int_equal(gc, kPFStr);
  assert_string_equal(got.v_str, "two");
  assert_pf_ok(PFDictGetItem(d, fv(2.0), kPFFloat, NULL, NULL, &found)); /* membership */
  assert_int_equal(found, 1);
  /* Update: later wins within the batch; new keys go at the end. */
  PFValue uk[3] = {sv("x"), sv("new"), sv("x")};
  int ukc[3] = {kPFStr, kPFStr, kPFStr};
  PFValue uv[3] = {iv(10), iv(11), iv(12)};
  int uvc[3] = {kPFInt, kPFInt, kPFInt};
  assert_pf_ok(PFDictUpdate(d, uk, ukc, uv, uvc, 3));
  assert_pf_ok(PFDictUpdate(d, NULL, NULL, NULL, NULL, 0));
  assert_int_equal(dict_size(d), 4);
  assert_int_equal(get_int(d, sv("x"), kPFStr), 12);
  assert_int_equal(get_int(d, sv("new"), kPFStr), 11);
  /* An update with a bad item changes nothing. */
  uk[1].v_str = NULL;
  assert_pf_error(PFDictUpdate(d, uk, ukc, uv, uvc, 3), kPFErrTypeError, "PFDictUpdate", "key 1");
  uk[1] = fv(NAN);
  ukc[1] = kPFFloat;
  assert_pf_error(PFDictUpdate(d, uk, ukc, uv, uvc, 3), kPFErrValueError, "key 1", "NaN");
  assert_int_equal(get_int(d, sv("x"), kPFStr), 12);
  assert_int_equal(dict_size(d), 4);
  /* Pop: the value, or a KeyError. */
  assert_pf_ok(PFDictPop(d, iv(2), kPFInt, &got, &gc));
  assert_string_equal(got.v_str, "two");
  assert_pf_error(PFDictPop(d, iv(2), kPFInt, &got, &gc), kPFErrKeyError,
                  "PFDictPop: key 2 is not in the dict");
  assert_pf_error(PFDictPop(d, sv("nope"), kPFStr, &got, &gc), kPFErrKeyError, "'nope'");
  assert_pf_error(PFDictPop(d, fv(NAN), kPFFloat, &got, &gc), kPFErrKeyError, "nan");
  assert_int_equal(dict_size(d), 3);
  assert_pf_ok(PFDictClear(d));
  assert_int_equal(dict_size(d), 0);
  assert_int_equal(get_int(d, sv("x"), kPFStr), -1);
  set_int(d, sv("x"), kPFStr, 1); /* usable after a clear */
  assert_int_equal(get_int(d, sv("x"), kPFStr), 1);
  assert_pf_ok(PFObjectFree(d));
  /* Create refuses a repeated key, as PFMapCreate does. */
  PFValue rk[3] = {sv("lr"), iv(1), fv(1.0)};
  int rkc[3] = {kPFStr, kPFInt, kPFFloat};
  PFObjectHandle out = (PFObjectHandle)0x1;
  assert_pf_error(PFDictCreate(rk, rkc, v, vc, 3, &out), kPFErrValueError,
                  "PFDictCreate: key 2 (1) repeats key 1");
  assert_ptr_equal(out, (PFObjectHandle)0x1);
}

/* Many inserts and removals against a model: the index stays right. */
static void test_dict_against_a_model(void** state) {
  (void)state;
  enum { KEYS = 300 };
  int64_t model[KEYS];
  for (int i = 0; i < KEYS; ++i) model[i] = -1;
  PFObjectHandle d = empty_dict();
  srand(12345);
  int64_t live = 0;
  for (int op = 0; op < 60000; ++op) {
    int64_t k = rand() % KEYS;
    if (rand() % 3 != 0) {
      live += model[k] < 0;
      model[k] = op;
      set_int(d, iv(k), kPFInt, op);
    } else if (model[k] >= 0) {
      PFValue v;
      int vc;
      assert_pf_ok(PFDictPop(d, iv(k), kPFInt, &v, &vc));
      assert_int_equal(v.v_int64, model[k]);
      model[k] = -1;
      --live;
    }
    if (op % 997 == 0) {
      assert_int_equal(dict_size(d), live);
      for (int64_t j = 0; j < KEYS; ++j) assert_int_equal(get_int(d, iv(j), kPFInt), model[j]);
    }
  }
  assert_pf_ok(PFObjectFree(d));
}

/* Reads are copies and new references, as List's. */
static void test_dict_reads_are_copies(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFObjectHandle b = NULL, d = empty_dict();
  assert_pf_ok(PFObjectCreateBoxed(&fins, pf_test_count_fin, &b));
  assert_pf_ok(PFDictSetItem(d, sv("s"), kPFStr, sv("value"), kPFStr));
  assert_pf_ok(PFDictSetItem(d, sv("b"), kPFStr, (PFValue){.v_handle = b}, kPFObjectHandle));
  assert_pf_ok(PFObjectFree(b));
  PFValue s, h;
  int sc, hc, found;
  assert_pf_ok(PFDictGetItem(d, sv("b"), kPFStr, &h, &hc, &found));
  assert_pf_ok(PFDictGetItem(d, sv("s"), kPFStr, &s, &sc, &found));
  assert_pf_ok(PFDictSetItem(d, sv("s"), kPFStr, iv(0), kPFInt));
  assert_pf_ok(PFObjectFree(d));
  assert_string_equal(s.v_str, "value");
  assert_int_equal(hc, kPFObjectHandle);
  assert_int_equal(fins, 0); /* the caller's reference */
  assert_pf_ok(PFObjectFree(h.v_handle));
  assert_int_equal(fins, 1);
}

static PFObjectHandle g_reentrant_dict;
static atomic_int g_reentrant_fins;
static void reentrant_fin(void* payload) {
  (void)payload;
  atomic_fetch_add(&g_reentrant_fins, 1);
  assert_pf_ok(PFDictSetItem(g_reentrant_dict, sv("fin"), kPFStr, iv(1), kPFInt));
}

/* References dropped by SetItem, Pop, Clear are released after the lock. */
static void test_dict_finalizers_run_after_the_lock(void** state) {
  (void)state;
  g_reentrant_dict = empty_dict();
  for (int way = 0; way < 3; ++way) {
    PFObjectHandle b = NULL;
    assert_pf_ok(PFObjectCreateBoxed(NULL, reentrant_fin, &b));
    assert_pf_ok(PFDictSetItem(g_reentrant_dict, iv(way), kPFInt, (PFValue){.v_handle = b},
                               kPFObjectHandle));
    assert_pf_ok(PFObjectFree(b));
    PFValue got;
    int gc;
    if (way == 0) {
      assert_pf_ok(PFDictSetItem(g_reentrant_dict, iv(way), kPFInt, iv(0), kPFInt));
    } else if (way == 1) {
      assert_pf_ok(PFDictPop(g_reentrant_dict, iv(way), kPFInt, &got, &gc));
      assert_pf_ok(PFObjectFree(got.v_handle));
    } else {
      assert_pf_ok(PFDictClear(g_reentrant_dict));
    }
    assert_int_equal(g_reentrant_fins, way + 1);
  }
  assert_int_equal(dict_size(g_reentrant_dict), 1);
  assert_pf_ok(PFObjectFree(g_reentrant_dict));
}

/* Releasing Dicts nested 300,000 deep (as values and as keys) takes
 * constant stack. */
static void test_dict_deep_nesting_releases_iteratively(void** state) {
  (void)state;
  PFObjectHandle inner = empty_dict();
  for (int i = 0; i < 300000; ++i) {
    PFValue k = i % 2 ? sv("k") : (PFValue){.v_handle = inner};
    int kc = i % 2 ? kPFStr : kPFObjectHandle;
    PFValue v = {.v_handle = inner};
    int vc = kPFObjectHandle;
    PFObjectHandle outer = NULL;
    assert_pf_ok(PFDictCreate(&k, &kc, &v, &vc, 1, &outer));
    assert_pf_ok(PFObjectFree(inner));
    inner = outer;
  }
  assert_pf_ok(PFObjectFree(inner));
}

static int64_t c_dict_size(PFObjectHandle d) {
  int64_t n = -1;
  return PFDictGetSize(d, &n) == 0 ? n : -1;
}

static void test_dict_typed_signature(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)c_dict_size, "int64(dict)", &f));
  PFObjectHandle d = empty_dict(), l = NULL;
  set_int(d, iv(1), kPFInt, 1);
  PFValue a = {.v_handle = d}, rv;
  int ac = kPFObjectHandle, rc;
  assert_pf_ok(PFFuncCall(f, &a, &ac, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 1);
  assert_pf_ok(PFListCreate(NULL, NULL, 0, &l));
  a.v_handle = l;
  assert_pf_error(PFFuncCall(f, &a, &ac, 1, &rv, &rc), kPFErrTypeError,
                  "expected dict, got list object");
  assert_pf_ok(PFObjectFree(l));
  assert_pf_ok(PFObjectFree(d));
  assert_pf_ok(PFFuncFree(f));
}

/* ==== bad input ============================================================= */

static void test_dict_bad_input(void** state) {
  (void)state;
  PFValue k = sv("k"), v = iv(1), got = iv(77);
  int kc = kPFStr, vc = kPFInt, gc = 77, found = 77;
  PFObjectHandle out = (PFObjectHandle)0x1;
  assert_pf_error(PFDictCreate(&k, &kc, &v, &vc, 1, NULL), kPFErrTypeError, "'out' is NULL");
  assert_pf_error(PFDictCreate(&k, NULL, &v, &vc, 1, &out), kPFErrTypeError,
                  "'key_codes' is NULL with size 1");
  assert_pf_error(PFDictCreate(&k, &kc, &v, &vc, -1, &out), kPFErrValueError,
                  "'size' is negative (-1)");
  assert_pf_error(PFDictCreate(&k, &kc, &v, &vc, INT64_MAX, &out), kPFErrValueError,
                  "largest size");
  const int bad_key_codes[] = {kPFDLTensorHandle, kPFExtBegin, 13, -1};
  for (int i = 0; i < 4; ++i)
    assert_pf_error(PFDictCreate(&k, &bad_key_codes[i], &v, &vc, 1, &out), kPFErrTypeError,
                    "PFDictCreate: key 0");
  PFValue nan = fv(NAN);
  int fc = kPFFloat;
  assert_pf_error(PFDictCreate(&nan, &fc, &v, &vc, 1, &out), kPFErrValueError, "key 0 is a NaN");
  int tc = kPFDLTensorHandle;
  assert_pf_error(PFDictCreate(&k, &kc, &v, &tc, 1, &out), kPFErrTypeError, "value 0", "DLTensor*");
  assert_ptr_equal(out, (PFObjectHandle)0x1);

  PFObjectHandle d = empty_dict();
  set_int(d, k, kc, 5);
  assert_pf_error(PFDictGetSize(g_not_an_object, &got.v_int64), kPFErrTypeError,
                  "PFDictGetSize: argument 'dict' is not a live dict handle");
  assert_pf_error(PFDictGetItem(d, k, kc, &got, &gc, NULL), kPFErrTypeError, "'found' is NULL");
  assert_pf_error(PFDictGetItem(d, k, kc, &got, NULL, &found), kPFErrTypeError,
                  "'out_code' is NULL");
  assert_pf_error(PFDictGetItem(d, (PFValue){.v_str = NULL}, kPFStr, &got, &gc, &found),
                  kPFErrTypeError, "PFDictGetItem: key 0 has type code str but a NULL pointer");
  assert_pf_error(
      PFDictGetItem(d, (PFValue){.v_handle = g_not_an_object}, kPFObjectHandle, &got, &gc, &found),
      kPFErrTypeError, "not a live object handle");
  assert_pf_error(PFDictGetItem(d, k, kPFExtBegin, &got, &gc, &found), kPFErrTypeError,
                  "extension type code");
  assert_pf_error(PFDictSetItem(d, nan, kPFFloat, v, vc), kPFErrValueError, "PFDictSetItem", "NaN");
  assert_pf_error(PFDictSetItem(d, k, kc, v, 200), kPFErrTypeError, "value 0",
                  "unknown type code 200");
  assert_pf_error(PFDictPop(d, k, kc, NULL, &gc), kPFErrTypeError, "'out' is NULL");
  assert_pf_error(PFDictUpdate(d, &k, &kc, &v, &vc, -1), kPFErrValueError, "'count' is negative");
  assert_pf_error(PFDictUpdate(d, &k, &kc, NULL, &vc, 1), kPFErrTypeError,
                  "'values' is NULL with count 1");
  assert_pf_error(PFDictToArray(d, NULL), kPFErrTypeError, "'out' is NULL");
  assert_int_equal(got.v_int64, 77);
  assert_int_equal(gc, 77);
  assert_int_equal(found, 77);
  assert_int_equal(get_int(d, k, kc), 5);
  assert_int_equal(dict_size(d), 1);
  assert_pf_ok(PFObjectFree(d));
}

/* ==== allocation failures =================================================== */

static int fault_work(void) {
  PFObjectHandle d = NULL, a = NULL, b = NULL;
  PFValue got;
  int gc, found, st = -1;
  if (PFObjectCreateBoxed(NULL, NULL, &b) != 0) return -1;
  PFValue k[3] = {sv("a key long enough to be its own block"), iv(2), {.v_handle = b}};
  int kc[3] = {kPFStr, kPFInt, kPFObjectHandle};
  PFValue v[3] = {iv(1), sv("a value long enough"), {.v_handle = b}};
  int vc[3] = {kPFInt, kPFStr, kPFObjectHandle};
  if (PFDictCreate(k, kc, v, vc, 3, &d) != 0) goto done;
  for (int64_t i = 0; i < 12; ++i) /* grows */
    if (PFDictSetItem(d, iv(100 + i), kPFInt, v[1], kPFStr) != 0) goto done;
  if (PFDictUpdate(d, k, kc, v, vc, 3) != 0) goto done;
  if (PFDictGetItem(d, iv(2), kPFInt, &got, &gc, &found) != 0) goto done;
  if (PFDictPop(d, iv(101), kPFInt, &got, &gc) != 0) goto done;
  if (PFDictToArray(d, &a) != 0) goto done;
  if (PFDictClear(d) != 0) goto done;
  st = 0;
done:;
  char kind[64];
  snprintf(kind, sizeof(kind), "%s", PFErrorGetKind());
  PFObjectFree(a);
  PFObjectFree(d);
  PFObjectFree(b);
  if (st != 0) PFErrorSet(kind, "failed step");
  return st;
}

static void test_dict_allocation_failures(void** state) {
  (void)state;
  long points = pf_fault_walk(fault_work, "dict");
  print_message("walked %ld allocation points\n", points);
  assert_true(points >= 10);
}

int main(void) {
  if (pf_fault_install() != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_dict_key_equality),
      cmocka_unit_test(test_dict_order),
      cmocka_unit_test(test_dict_create_update_pop_clear),
      cmocka_unit_test(test_dict_against_a_model),
      cmocka_unit_test(test_dict_reads_are_copies),
      cmocka_unit_test(test_dict_finalizers_run_after_the_lock),
      cmocka_unit_test(test_dict_deep_nesting_releases_iteratively),
      cmocka_unit_test(test_dict_typed_signature),
      cmocka_unit_test(test_dict_bad_input),
      cmocka_unit_test(test_dict_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
