/* List: a mutable sequence. Every entry point, Python's index and slice
 * rules, what the readers return (copies and new references, never the
 * List's own memory), snapshots, cycles, deep nesting, finalizers that use
 * the List, typed signatures, every bad input, and every allocation
 * failing in turn. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdlib.h>

#include "support/pf_test.h"
#include "support/pf_fault.h"

static uint64_t g_not_an_object[16];

static PFObjectHandle make_list(const PFValue* v, const int* c, int64_t n) {
  PFObjectHandle l = NULL;
  assert_pf_ok(PFListCreate(v, c, n, &l));
  return l;
}

static int64_t list_size(PFObjectHandle l) {
  int64_t n = -1;
  assert_pf_ok(PFListGetSize(l, &n));
  return n;
}

/* A List of ints from a C array. */
static PFObjectHandle int_list(const int64_t* xs, int64_t n) {
  PFValue v[64];
  int c[64];
  for (int64_t i = 0; i < n; ++i) {
    v[i].v_int64 = xs[i];
    c[i] = kPFInt;
  }
  return make_list(v, c, n);
}

/* Asserts that a List holds exactly the ints `want`. */
static void assert_ints(PFObjectHandle l, const int64_t* want, int64_t n) {
  assert_int_equal(list_size(l), n);
  for (int64_t i = 0; i < n; ++i) {
    PFValue v;
    int c = -1;
    assert_pf_ok(PFListGetItem(l, i, &v, &c));
    assert_int_equal(c, kPFInt);
    assert_int_equal(v.v_int64, want[i]);
  }
}

static PFValue iv(int64_t x) { return (PFValue){.v_int64 = x}; }

/* ==== values ================================================================ */

/* What the List keeps and what its reader returns, for every kind of value. */
static void test_list_every_type_code(void** state) {
  (void)state;
  atomic_int fins = 0;
  char text[] = "hello";
  char blob[] = {'a', '\0', 'b'};
  PFByteArray bytes = {blob, sizeof(blob)};
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&fins, pf_test_count_fin, &boxed));
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  int marker = 0;
  PFValue v[] = {{.v_int64 = -42},
                 {.v_float64 = 2.5},
                 {.v_int64 = 1},
                 {.v_int64 = 0},
                 {.v_handle = &marker},
                 {.v_type = {kDLFloat, 32, 4}},
                 {.v_device = {kDLCUDA, 3}},
                 {.v_str = text},
                 {.v_handle = &bytes},
                 {.v_handle = f},
                 {.v_handle = boxed},
                 {.v_int64 = 0x1122334455667788}};
  int c[] = {kPFInt,    kPFFloat, kPFBool,  kPFNull,       kPFOpaqueHandle, kPFDataType,
             kPFDevice, kPFStr,   kPFBytes, kPFFuncHandle, kPFObjectHandle, kPFExtBegin + 3};
  const int64_t n = (int64_t)(sizeof(c) / sizeof(c[0]));
  PFObjectHandle l = make_list(v, c, n);
  uint32_t type = 0;
  assert_pf_ok(PFObjectGetTypeIndex(l, &type));
  assert_int_equal(type, kPFObjectList);
  assert_string_equal(PFObjectTypeName(type), "list");
  /* Copies and references: the caller's may go now. */
  text[0] = 'J';
  blob[0] = 'z';
  assert_pf_ok(PFObjectFree(boxed));
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(list_size(l), n);
  PFValue got;
  int code;
  for (int64_t i = 0; i < n; ++i) {
    assert_pf_ok(PFListGetItem(l, i, &got, &code));
    assert_int_equal(code, c[i]);
    if (c[i] == kPFFuncHandle || c[i] == kPFObjectHandle) assert_pf_ok(PFObjectFree(got.v_handle));
  }
  assert_pf_ok(PFListGetItem(l, 0, &got, &code));
  assert_int_equal(got.v_int64, -42);
  assert_pf_ok(PFListGetItem(l, 5, &got, &code));
  assert_int_equal(got.v_type.lanes, 4);
  assert_pf_ok(PFListGetItem(l, 6, &got, &code));
  assert_int_equal(got.v_device.device_id, 3);
  assert_pf_ok(PFListGetItem(l, 7, &got, &code));
  assert_string_equal(got.v_str, "hello");
  assert_pf_ok(PFListGetItem(l, 8, &got, &code));
  const PFByteArray* b = got.v_handle;
  assert_int_equal(b->size, 3);
  assert_memory_equal(b->data, "a\0b", 3);
  assert_pf_ok(PFListGetItem(l, -1, &got, &code));
  assert_int_equal(code, kPFExtBegin + 3);
  assert_int_equal(got.v_int64, 0x1122334455667788);
  /* A handle read is the caller's own reference: it outlives the List. */
  assert_pf_ok(PFListGetItem(l, 10, &got, &code));
  assert_pf_ok(PFObjectFree(l));
  assert_int_equal(fins, 0);
  void* payload = NULL;
  assert_pf_ok(PFObjectGetBoxedPayload(got.v_handle, &payload));
  assert_ptr_equal(payload, &fins);
  assert_pf_ok(PFObjectFree(got.v_handle));
  assert_int_equal(fins, 1);
}

/* A str read is a copy: replacing or removing the item, or freeing the
 * List, leaves it readable until the thread's next List or Dict read. */
static void test_list_reads_are_copies(void** state) {
  (void)state;
  PFValue v[2] = {{.v_str = "first"}, {.v_str = "second"}};
  int c[2] = {kPFStr, kPFStr};
  PFObjectHandle l = make_list(v, c, 2);
  PFValue got;
  int code;
  assert_pf_ok(PFListGetItem(l, 0, &got, &code));
  assert_pf_ok(PFListSetItem(l, 0, iv(7), kPFInt));
  assert_pf_ok(PFListClear(l));
  assert_pf_ok(PFObjectFree(l));
  assert_string_equal(got.v_str, "first");
  /* Another thread's storage, PFFuncCall's results: not affected. */
  PFFunctionHandle echo = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &echo));
  PFValue arg = {.v_str = "call"}, rv;
  int ac = kPFStr, rc;
  assert_pf_ok(PFFuncCall(echo, &arg, &ac, 1, &rv, &rc));
  assert_string_equal(got.v_str, "first");
  assert_pf_ok(PFFuncFree(echo));
  /* A pop hands over the item; a str as a copy. */
  l = make_list(v, c, 2);
  assert_pf_ok(PFListPop(l, -1, &got, &code));
  assert_int_equal(code, kPFStr);
  assert_int_equal(list_size(l), 1);
  assert_pf_ok(PFObjectFree(l));
  assert_string_equal(got.v_str, "second");
}

/* ==== changes =============================================================== */

static void test_list_python_semantics(void** state) {
  (void)state;
  PFObjectHandle l = make_list(NULL, NULL, 0);
  assert_ints(l, NULL, 0);
  for (int64_t i = 0; i < 5; ++i) assert_pf_ok(PFListAppend(l, iv(i), kPFInt));
  assert_ints(l, (int64_t[]){0, 1, 2, 3, 4}, 5);
  assert_pf_ok(PFListInsert(l, 0, iv(-1), kPFInt));  /* front */
  assert_pf_ok(PFListInsert(l, 6, iv(5), kPFInt));   /* end: the size */
  assert_pf_ok(PFListInsert(l, -1, iv(45), kPFInt)); /* before the last */
  assert_pf_ok(PFListInsert(l, -8, iv(-2), kPFInt)); /* -size: the front */
  assert_ints(l, (int64_t[]){-2, -1, 0, 1, 2, 3, 4, 45, 5}, 9);
  assert_pf_ok(PFListSetItem(l, -1, iv(50), kPFInt));
  assert_pf_ok(PFListSetItem(l, 0, iv(-20), kPFInt));
  PFValue got;
  int code;
  assert_pf_ok(PFListPop(l, -2, &got, &code));
  assert_int_equal(got.v_int64, 45);
  assert_pf_ok(PFListPop(l, 0, &got, &code));
  assert_int_equal(got.v_int64, -20);
  assert_ints(l, (int64_t[]){-1, 0, 1, 2, 3, 4, 50}, 7);
  PFValue more[2] = {iv(60), iv(70)};
  int mc[2] = {kPFInt, kPFInt};
  assert_pf_ok(PFListExtend(l, more, mc, 2));
  assert_pf_ok(PFListExtend(l, NULL, NULL, 0));
  assert_ints(l, (int64_t[]){-1, 0, 1, 2, 3, 4, 50, 60, 70}, 9);
  assert_pf_ok(PFListClear(l));
  assert_ints(l, NULL, 0);
  assert_pf_ok(PFListAppend(l, iv(1), kPFInt)); /* usable after a clear */
  assert_ints(l, (int64_t[]){1}, 1);
  assert_pf_ok(PFObjectFree(l));
}

/* PFListReplace is Python's slice assignment, clipped as slices are. */
static void test_list_replace_is_slice_assignment(void** state) {
  (void)state;
  PFValue ab[2] = {iv(100), iv(200)};
  int cc[2] = {kPFInt, kPFInt};
  PFObjectHandle l = int_list((int64_t[]){0, 1, 2, 3, 4}, 5);
  assert_pf_ok(PFListReplace(l, 1, 2, ab, cc, 2)); /* l[1:3] = [100, 200] */
  assert_ints(l, (int64_t[]){0, 100, 200, 3, 4}, 5);
  assert_pf_ok(PFListReplace(l, 1, 3, ab, cc, 1)); /* shrink: l[1:4] = [100] */
  assert_ints(l, (int64_t[]){0, 100, 4}, 3);
  assert_pf_ok(PFListReplace(l, 1, 0, ab, cc, 2)); /* insert: l[1:1] = ... */
  assert_ints(l, (int64_t[]){0, 100, 200, 100, 4}, 5);
  assert_pf_ok(PFListReplace(l, 2, 2, NULL, NULL, 0)); /* del l[2:4] */
  assert_ints(l, (int64_t[]){0, 100, 4}, 3);
  assert_pf_ok(PFListReplace(l, 99, 5, ab, cc, 1)); /* past the end: appends */
  assert_ints(l, (int64_t[]){0, 100, 4, 100}, 4);
  assert_pf_ok(PFListReplace(l, 2, INT64_MAX, NULL, NULL, 0)); /* del l[2:] */
  assert_ints(l, (int64_t[]){0, 100}, 2);
  assert_pf_ok(PFListReplace(l, 0, INT64_MAX, ab, cc, 2)); /* l[:] = ... */
  assert_ints(l, (int64_t[]){100, 200}, 2);
  assert_pf_ok(PFObjectFree(l));
}

/* A snapshot is an Array of the items at one moment, unaffected by later
 * changes, and clipped as a slice. */
static void test_list_to_array(void** state) {
  (void)state;
  PFValue v[3] = {{.v_str = "a"}, iv(2), {.v_str = "c"}};
  int c[3] = {kPFStr, kPFInt, kPFStr};
  PFObjectHandle l = make_list(v, c, 3);
  PFObjectHandle a = NULL, tail = NULL, none = NULL;
  assert_pf_ok(PFListToArray(l, 0, INT64_MAX, &a));
  assert_pf_ok(PFListToArray(l, 1, 1, &tail));
  assert_pf_ok(PFListToArray(l, 7, 3, &none));
  assert_pf_ok(PFListClear(l));
  assert_pf_ok(PFObjectFree(l));
  PFValue got[3];
  int gc[3];
  assert_pf_ok(PFArrayGetItems(a, 0, 3, got, gc));
  assert_int_equal(gc[0], kPFStr);
  assert_string_equal(got[0].v_str, "a");
  assert_int_equal(got[1].v_int64, 2);
  assert_string_equal(got[2].v_str, "c");
  int64_t n = -1;
  assert_pf_ok(PFArrayGetSize(tail, &n));
  assert_int_equal(n, 1);
  assert_pf_ok(PFArrayGetSize(none, &n));
  assert_int_equal(n, 0);
  assert_pf_ok(PFObjectFree(a));
  assert_pf_ok(PFObjectFree(tail));
  assert_pf_ok(PFObjectFree(none));
}

/* An empty List has no storage: every call works on it without touching
 * any (the rpc decoder's fuzzer found a snapshot of one doing arithmetic on
 * NULL, which UBSan refuses). */
static void test_list_empty_has_no_storage(void** state) {
  (void)state;
  PFObjectHandle l = NULL, a = NULL;
  assert_pf_ok(PFListCreate(NULL, NULL, 0, &l));
  assert_pf_ok(PFListToArray(l, 0, INT64_MAX, &a));
  int64_t n = -1;
  assert_pf_ok(PFArrayGetSize(a, &n));
  assert_int_equal(n, 0);
  assert_pf_ok(PFObjectFree(a));
  assert_pf_ok(PFListReplace(l, 0, 0, NULL, NULL, 0));
  assert_pf_ok(PFListReplace(l, 0, 5, NULL, NULL, 0));
  assert_pf_ok(PFListExtend(l, NULL, NULL, 0));
  assert_pf_ok(PFListClear(l));
  assert_pf_ok(PFListGetSize(l, &n));
  assert_int_equal(n, 0);
  assert_pf_ok(PFObjectFree(l));
}

/* ==== references ============================================================ */

/* A replaced or removed handle is released once, after the List's lock:
 * its finalizer may use the List again (here it appends to it). */
static PFObjectHandle g_reentrant_list;
static atomic_int g_reentrant_fins;
static void reentrant_fin(void* payload) {
  (void)payload;
  atomic_fetch_add(&g_reentrant_fins, 1);
  assert_pf_ok(PFListAppend(g_reentrant_list, iv(99), kPFInt));
  int64_t n = -1;
  assert_pf_ok(PFListGetSize(g_reentrant_list, &n));
}

static void test_list_finalizers_run_after_the_lock(void** state) {
  (void)state;
  g_reentrant_list = make_list(NULL, NULL, 0);
  PFObjectHandle b = NULL;
  /* SetItem, Pop (then the caller's release), Replace, Clear: each drops
   * the last reference to a boxed object whose finalizer appends. */
  for (int way = 0; way < 4; ++way) {
    assert_pf_ok(PFObjectCreateBoxed(NULL, reentrant_fin, &b));
    assert_pf_ok(PFListAppend(g_reentrant_list, (PFValue){.v_handle = b}, kPFObjectHandle));
    assert_pf_ok(PFObjectFree(b));
    int64_t last = list_size(g_reentrant_list) - 1;
    PFValue got;
    int code;
    switch (way) {
      case 0:
        assert_pf_ok(PFListSetItem(g_reentrant_list, last, iv(0), kPFInt));
        break;
      case 1:
        assert_pf_ok(PFListPop(g_reentrant_list, last, &got, &code));
        assert_int_equal(code, kPFObjectHandle);
        assert_int_equal(g_reentrant_fins, way);
        assert_pf_ok(PFObjectFree(got.v_handle));
        break;
      case 2:
        assert_pf_ok(PFListReplace(g_reentrant_list, last, 1, NULL, NULL, 0));
        break;
      default:
        assert_pf_ok(PFListClear(g_reentrant_list));
        break;
    }
    assert_int_equal(g_reentrant_fins, way + 1);
  }
  assert_int_equal(list_size(g_reentrant_list), 1); /* the last finalizer's 99 */
  assert_pf_ok(PFObjectFree(g_reentrant_list));
}

/* A List that holds itself lives until a clear breaks the cycle. */
static void test_list_cycle_broken_by_clear(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFObjectHandle l = make_list(NULL, NULL, 0), b = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&fins, pf_test_count_fin, &b));
  assert_pf_ok(PFListAppend(l, (PFValue){.v_handle = l}, kPFObjectHandle));
  assert_pf_ok(PFListAppend(l, (PFValue){.v_handle = b}, kPFObjectHandle));
  assert_pf_ok(PFObjectFree(b));
  PFValue self;
  int code;
  assert_pf_ok(PFListGetItem(l, 0, &self, &code));
  assert_ptr_equal(self.v_handle, l);
  assert_pf_ok(PFObjectFree(self.v_handle));
  assert_pf_ok(PFListClear(l));
  assert_int_equal(fins, 1);
  assert_pf_ok(PFObjectFree(l));
}

/* Releasing a List nested 300,000 deep takes constant stack. */
static void test_list_deep_nesting_releases_iteratively(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFObjectHandle inner = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&fins, pf_test_count_fin, &inner));
  for (int i = 0; i < 300000; ++i) {
    PFValue v = {.v_handle = inner};
    int c = kPFObjectHandle;
    PFObjectHandle outer = make_list(&v, &c, 1);
    assert_pf_ok(PFObjectFree(inner));
    inner = outer;
  }
  assert_pf_ok(PFObjectFree(inner));
  assert_int_equal(fins, 1);
}

/* ==== typed signatures ====================================================== */

static int64_t c_list_size(PFObjectHandle l) {
  int64_t n = -1;
  return PFListGetSize(l, &n) == 0 ? n : -1;
}

static PFObjectHandle c_new_list(int64_t n) {
  PFObjectHandle l = NULL;
  for (int64_t i = 0; i < n && (l != NULL || PFListCreate(NULL, NULL, 0, &l) == 0); ++i)
    PFListAppend(l, iv(i), kPFInt);
  if (l == NULL) PFListCreate(NULL, NULL, 0, &l);
  return l;
}

static void test_list_typed_signatures(void** state) {
  (void)state;
  int found_list = 0, found_dict = 0;
  const char* name;
  int code;
  for (int i = 0; PFSignatureTypeInfo(i, &name, &code) == 0; ++i) {
    if (strcmp(name, "list") == 0) found_list = code == kPFObjectHandle;
    if (strcmp(name, "dict") == 0) found_dict = code == kPFObjectHandle;
  }
  PFErrorClear();
  assert_true(found_list);
  assert_true(found_dict);
  PFFunctionHandle size = NULL, make = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)c_list_size, "int64(list)", &size));
  assert_pf_ok(PFFuncCreateFromTyped((void*)c_new_list, "list(int64)", &make));
  PFValue a = iv(3), rv;
  int ac = kPFInt, rc;
  assert_pf_ok(PFFuncCall(make, &a, &ac, 1, &rv, &rc));
  assert_int_equal(rc, kPFObjectHandle);
  PFObjectHandle l = rv.v_handle;
  assert_ints(l, (int64_t[]){0, 1, 2}, 3);
  PFValue arg = {.v_handle = l};
  int argc = kPFObjectHandle;
  assert_pf_ok(PFFuncCall(size, &arg, &argc, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 3);
  /* Another object type, or another code: TypeError naming both. */
  PFObjectHandle d = NULL;
  assert_pf_ok(PFDictCreate(NULL, NULL, NULL, NULL, 0, &d));
  arg.v_handle = d;
  assert_pf_error(PFFuncCall(size, &arg, &argc, 1, &rv, &rc), kPFErrTypeError, "argument 0",
                  "expected list, got dict object");
  assert_pf_error(PFFuncCall(size, &a, &ac, 1, &rv, &rc), kPFErrTypeError,
                  "expected list, got int");
  assert_pf_ok(PFObjectFree(d));
  /* A C function pointer over a packed function takes and returns lists. */
  PFObjectHandle cl = NULL;
  void* fn = NULL;
  assert_pf_ok(PFFuncToCFunction(make, "list(int64)", &cl, &fn));
  PFObjectHandle (*cmake)(int64_t) = NULL;
  memcpy(&cmake, &fn, sizeof(fn));
  PFObjectHandle l2 = cmake(2);
  assert_pf_ok(PFClosureCheckError(cl));
  assert_ints(l2, (int64_t[]){0, 1}, 2);
  assert_pf_ok(PFObjectFree(l2));
  assert_pf_ok(PFObjectFree(cl));
  assert_pf_ok(PFFuncToCFunction(size, "int64(list)", &cl, &fn));
  int64_t (*csize)(PFObjectHandle) = NULL;
  memcpy(&csize, &fn, sizeof(fn));
  assert_int_equal(csize(l), 3);
  assert_pf_ok(PFClosureCheckError(cl));
  assert_int_equal(csize((PFObjectHandle)g_not_an_object), 0);
  assert_pf_error(PFClosureCheckError(cl), kPFErrTypeError,
                  "expected list, got a pointer that is not a live list handle");
  assert_pf_ok(PFObjectFree(cl));
  assert_pf_ok(PFObjectFree(l));
  assert_pf_ok(PFFuncFree(size));
  assert_pf_ok(PFFuncFree(make));
}

/* ==== bad input ============================================================= */

static void test_list_bad_input(void** state) {
  (void)state;
  PFObjectHandle out = (PFObjectHandle)0x1;
  PFValue v = iv(1), got = iv(77);
  int c = kPFInt, gc = 77;
  assert_pf_error(PFListCreate(&v, &c, 1, NULL), kPFErrTypeError, "PFListCreate",
                  "argument 'out' is NULL");
  assert_pf_error(PFListCreate(NULL, &c, 1, &out), kPFErrTypeError,
                  "argument 'values' is NULL with size 1");
  assert_pf_error(PFListCreate(&v, NULL, 1, &out), kPFErrTypeError,
                  "argument 'codes' is NULL with size 1");
  assert_pf_error(PFListCreate(&v, &c, -1, &out), kPFErrValueError,
                  "argument 'size' is negative (-1)");
  assert_pf_error(PFListCreate(&v, &c, INT64_MAX, &out), kPFErrValueError, "largest size");
  int bad_codes[] = {13, -1, kPFExtEnd, kPFDLTensorHandle};
  for (int i = 0; i < 4; ++i)
    assert_pf_error(PFListCreate(&v, &bad_codes[i], 1, &out), kPFErrTypeError, "PFListCreate",
                    "value 0");
  PFValue null_str = {.v_str = NULL};
  int sc = kPFStr;
  assert_pf_error(PFListCreate(&null_str, &sc, 1, &out), kPFErrTypeError,
                  "value 0 has type code str but a NULL pointer");
  assert_ptr_equal(out, (PFObjectHandle)0x1);

  PFObjectHandle l = int_list((int64_t[]){10, 20, 30}, 3);
  /* Wrong handles. */
  PFObjectHandle arr = NULL;
  assert_pf_ok(PFArrayCreate(NULL, NULL, 0, &arr));
  int64_t n = 5;
  assert_pf_error(PFListGetSize(arr, &n), kPFErrTypeError,
                  "PFListGetSize: argument 'list' is not a live list handle");
  assert_pf_error(PFListAppend(g_not_an_object, v, c), kPFErrTypeError, "not a live list handle");
  assert_pf_error(PFListGetSize(NULL, &n), kPFErrTypeError, "argument 'list' is NULL");
  assert_pf_error(PFListGetSize(l, NULL), kPFErrTypeError, "argument 'out' is NULL");
  assert_int_equal(n, 5);
  /* Indices: [-size, size), [-size, size] to insert. */
  const int64_t bad_index[] = {3, -4, INT64_MAX, INT64_MIN};
  for (int i = 0; i < 4; ++i) {
    assert_pf_error(PFListGetItem(l, bad_index[i], &got, &gc), kPFErrIndexError,
                    "PFListGetItem: argument 'index'", "out of range for a list of size 3");
    assert_pf_error(PFListSetItem(l, bad_index[i], v, c), kPFErrIndexError, "PFListSetItem");
    assert_pf_error(PFListPop(l, bad_index[i], &got, &gc), kPFErrIndexError, "PFListPop");
  }
  assert_pf_error(PFListInsert(l, 4, v, c), kPFErrIndexError, "PFListInsert", "'index' is 4");
  assert_pf_error(PFListInsert(l, -4, v, c), kPFErrIndexError, "'index' is -4");
  assert_int_equal(got.v_int64, 77);
  assert_int_equal(gc, 77);
  PFObjectHandle empty = make_list(NULL, NULL, 0);
  assert_pf_error(PFListPop(empty, -1, &got, &gc), kPFErrIndexError, "size 0");
  assert_pf_ok(PFObjectFree(empty));
  /* Counts and ranges. */
  assert_pf_error(PFListExtend(l, &v, &c, -1), kPFErrValueError, "'count' is negative");
  assert_pf_error(PFListExtend(l, NULL, &c, 1), kPFErrTypeError, "'values' is NULL with count 1");
  assert_pf_error(PFListReplace(l, -1, 0, &v, &c, 1), kPFErrValueError, "'start' is negative");
  assert_pf_error(PFListReplace(l, 0, -1, &v, &c, 1), kPFErrValueError, "'count' is negative");
  assert_pf_error(PFListReplace(l, 0, 0, &v, &c, -1), kPFErrValueError, "'num_values' is negative");
  assert_pf_error(PFListReplace(l, 0, 0, &v, NULL, 1), kPFErrTypeError,
                  "'codes' is NULL with num_values 1");
  assert_pf_error(PFListToArray(l, -1, 1, &out), kPFErrValueError, "'start' is negative");
  assert_pf_error(PFListToArray(l, 0, 1, NULL), kPFErrTypeError, "'out' is NULL");
  /* Bad values: nothing changes, not even the values before the bad one. */
  PFValue two[2] = {iv(1), {.v_str = NULL}};
  int two_c[2] = {kPFInt, kPFStr};
  assert_pf_error(PFListExtend(l, two, two_c, 2), kPFErrTypeError, "PFListExtend", "value 1");
  assert_pf_error(PFListReplace(l, 0, 3, two, two_c, 2), kPFErrTypeError, "PFListReplace",
                  "value 1");
  assert_pf_error(PFListAppend(l, v, kPFDLTensorHandle), kPFErrTypeError, "value 0", "DLTensor*");
  assert_pf_error(PFListSetItem(l, 0, (PFValue){.v_handle = g_not_an_object}, kPFObjectHandle),
                  kPFErrTypeError, "value 0", "not a live object handle");
  assert_pf_error(PFListGetItem(l, 0, NULL, &gc), kPFErrTypeError, "'out' is NULL");
  assert_pf_error(PFListPop(l, 0, &got, NULL), kPFErrTypeError, "'out_code' is NULL");
  assert_ints(l, (int64_t[]){10, 20, 30}, 3);
  assert_pf_ok(PFObjectFree(arr));
  assert_pf_ok(PFObjectFree(l));
}

/* ==== allocation failures =================================================== */

static int fault_work(void) {
  PFObjectHandle l = NULL, a = NULL, b = NULL;
  PFValue v[3] = {{.v_str = "a string long enough to be copied"}, iv(2), {.v_handle = NULL}};
  int c[3] = {kPFStr, kPFInt, kPFObjectHandle};
  static char blob[40];
  PFByteArray bytes = {blob, sizeof(blob)};
  PFValue got;
  int code, st = -1;
  if (PFObjectCreateBoxed(NULL, NULL, &b) != 0) return -1;
  v[2].v_handle = b;
  if (PFListCreate(v, c, 3, &l) != 0) goto done;
  for (int i = 0; i < 6; ++i) /* grows past its first room */
    if (PFListAppend(l, (PFValue){.v_handle = &bytes}, kPFBytes) != 0) goto done;
  if (PFListInsert(l, 1, v[0], kPFStr) != 0) goto done;
  if (PFListSetItem(l, 0, v[2], kPFObjectHandle) != 0) goto done;
  if (PFListExtend(l, v, c, 3) != 0) goto done;
  if (PFListReplace(l, 1, 4, v, c, 2) != 0) goto done;
  if (PFListGetItem(l, 1, &got, &code) != 0) goto done;
  if (PFListPop(l, 2, &got, &code) != 0) goto done;
  if (code == kPFObjectHandle) PFObjectFree(got.v_handle);
  if (PFListToArray(l, 0, INT64_MAX, &a) != 0) goto done;
  st = 0;
done:;
  /* The failing step's kind outlives the releases. */
  char kind[64];
  snprintf(kind, sizeof(kind), "%s", PFErrorGetKind());
  PFObjectFree(a);
  PFObjectFree(l);
  PFObjectFree(b);
  if (st != 0) PFErrorSet(kind, "failed step");
  return st;
}

static void test_list_allocation_failures(void** state) {
  (void)state;
  long points = pf_fault_walk(fault_work, "list");
  print_message("walked %ld allocation points\n", points);
  assert_true(points >= 10);
}

int main(void) {
  if (pf_fault_install() != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_list_every_type_code),
      cmocka_unit_test(test_list_reads_are_copies),
      cmocka_unit_test(test_list_python_semantics),
      cmocka_unit_test(test_list_replace_is_slice_assignment),
      cmocka_unit_test(test_list_to_array),
      cmocka_unit_test(test_list_empty_has_no_storage),
      cmocka_unit_test(test_list_finalizers_run_after_the_lock),
      cmocka_unit_test(test_list_cycle_broken_by_clear),
      cmocka_unit_test(test_list_deep_nesting_releases_iteratively),
      cmocka_unit_test(test_list_typed_signatures),
      cmocka_unit_test(test_list_bad_input),
      cmocka_unit_test(test_list_allocation_failures),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
