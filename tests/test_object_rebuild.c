/* Instances rebuilt from their fields (PFFromJSON; object_type.h,
 * "Rebuilding from fields"): a description's prepare hook
 * (PFObjectTypeDesc3, layout 3) runs on the zeroed struct before the first
 * field is written, the nearest one of the type's chain; a hook that fails
 * fails the rebuild, naming the node; a read-only accessor field is
 * checked against the document, not written; a description of layout 2
 * is read no further than its own size. Types are never removed, so each
 * test registers keys of its own. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "support/pf_test.h"
#include "support/pf_object_test.h"

/* A side and its area, computed: a read-only accessor field. The side is
 * at offset 0, where a read-only accessor's value must never be written. */
typedef struct {
  int64_t side;
} Square;

static int square_area(const void* data, PFValue* out, int* out_code) {
  const Square* s = data;
  out->v_int64 = s->side * s->side;
  *out_code = kPFInt;
  return 0;
}

static const PFFieldDesc k_square_fields[] = {
    PF_FIELD(Square, side, "int64", kPFFieldWritable, NULL)};
static const PFAccessorDesc k_square_accessors[] = {
    PF_ACCESSOR("area", "int64", square_area, NULL, NULL)};

/* A struct that its hook marks ready; the value is a field. */
typedef struct {
  int64_t ready; /* which hook ran: 0 none */
  int64_t value;
} Ready;

static int g_prepared, g_finalized;
static int prepare_1(void* data) {
  ++g_prepared;
  ((Ready*)data)->ready = 1;
  return 0;
}
static int prepare_2(void* data) {
  ++g_prepared;
  ((Ready*)data)->ready = 2;
  return 0;
}
static int prepare_refuses(void* data) {
  (void)data;
  return PFErrorSetFormat(kPFErrTypeError, "prepare_refuses: not from a document");
}
static int prepare_silent(void* data) {
  (void)data;
  return -1;
}
static void finalize(void* data) {
  (void)data;
  ++g_finalized;
}
static int ready_get(const void* data, PFValue* out, int* out_code) {
  out->v_int64 = ((const Ready*)data)->ready;
  *out_code = kPFInt;
  return 0;
}

static const PFFieldDesc k_ready_fields[] = {
    PF_FIELD(Ready, value, "int64", kPFFieldWritable, NULL)};
static const PFAccessorDesc k_ready_accessors[] = {
    PF_ACCESSOR("ready", "int64", ready_get, NULL, NULL)};

static PFObjectTypeDesc3 ready_desc(const char* key, const char* parent, PFObjectPrepare prepare) {
  PFObjectTypeDesc3 d = {
      {{PF_OBJECT_TYPE_DESC3_ABI, key, parent, sizeof(Ready), parent ? NULL : finalize, NULL,
        parent ? NULL : k_ready_fields, parent ? 0 : 1, NULL, 0},
       parent ? NULL : k_ready_accessors,
       parent ? 0 : 1},
      prepare};
  return d;
}

static char* to_json(PFObjectHandle o) {
  const char* text = NULL;
  size_t n = 0;
  PFValue v = {.v_handle = o};
  assert_pf_ok(PFToJSON(v, kPFObjectHandle, &text, &n));
  return strdup(text);
}

static PFObjectHandle from_json(const char* text) {
  PFValue v;
  int code = 0;
  assert_pf_ok(PFFromJSON(text, strlen(text), &v, &code));
  assert_int_equal(code, kPFObjectHandle);
  return v.v_handle;
}

static int64_t int_field(PFObjectHandle o, const char* name) {
  PFValue v;
  int code = 0;
  assert_pf_ok(PFObjectGetFieldByName(o, name, &v, &code));
  assert_int_equal(code, kPFInt);
  return v.v_int64;
}

static void set_int(PFObjectHandle o, const char* name, int64_t x) {
  PFValue v = {.v_int64 = x};
  assert_pf_ok(PFObjectSetFieldByName(o, name, v, kPFInt));
}

/* A read-only accessor field is checked, and the fields stay as written:
 * its value once landed on offset 0, the side. */
static void test_read_only_accessor_checked_not_written(void** state) {
  (void)state;
  PFObjectTypeDesc2 d = {{PF_OBJECT_TYPE_DESC2_ABI, "rb.Square", NULL, sizeof(Square), NULL, NULL,
                          k_square_fields, 1, NULL, 0},
                         k_square_accessors,
                         1};
  uint32_t ix = reg(&d.base);
  PFObjectHandle s = alloc(ix);
  set_int(s, "side", 3);
  char* text = to_json(s);
  PFObjectHandle t = from_json(text);
  assert_int_equal(int_field(t, "side"), 3);
  assert_int_equal(int_field(t, "area"), 9);
  PFObjectFree(t);
  /* A document whose area the side does not give. */
  char* at = strstr(text, "\"area\":9");
  assert_non_null(at);
  memcpy(at, "\"area\":8", 8);
  PFValue v;
  int code = 0;
  assert_pf_error(PFFromJSON(text, strlen(text), &v, &code), kPFErrValueError,
                  "PFFromJSON: node 0: field 'area' of rb.Square is read-only (an accessor field "
                  "without a setter): the rebuilt instance has 9, the document 8");
  free(text);
  PFObjectFree(s);
}

/* The hook runs once per rebuilt instance, before the fields; the nearest
 * of the chain: a child without one gets its parent's. */
static void test_prepare_hook_runs_before_the_fields(void** state) {
  (void)state;
  PFObjectTypeDesc3 base = ready_desc("rb.Ready", NULL, prepare_1);
  PFObjectTypeDesc3 heir = ready_desc("rb.Heir", "rb.Ready", NULL);
  PFObjectTypeDesc3 own = ready_desc("rb.Own", "rb.Ready", prepare_2);
  uint32_t ix[3] = {reg(&base.v2.base), reg(&heir.v2.base), reg(&own.v2.base)};
  for (int i = 0; i < 3; ++i) {
    PFObjectHandle o = alloc(ix[i]);
    assert_int_equal(int_field(o, "ready"), 0); /* PFObjectAlloc runs no hook */
    set_int(o, "value", 10 + i);
    char* text = to_json(o);
    /* The document says 0; the rebuilt instance has what its hook set. */
    char* at = strstr(text, "\"ready\":0");
    assert_non_null(at);
    memcpy(at, i == 2 ? "\"ready\":2" : "\"ready\":1", 9);
    int prepared = g_prepared, finalized = g_finalized;
    PFObjectHandle t = from_json(text);
    assert_int_equal(g_prepared - prepared, 1);
    assert_int_equal(int_field(t, "ready"), i == 2 ? 2 : 1);
    assert_int_equal(int_field(t, "value"), 10 + i);
    PFObjectFree(t);
    assert_int_equal(g_finalized - finalized, 1);
    free(text);
    PFObjectFree(o);
  }
  /* Registered again: the same hook is the same description, another is
   * not. */
  assert_int_equal(reg(&base.v2.base), ix[0]);
  base.prepare = prepare_2;
  uint32_t got = 0;
  assert_pf_error(PFObjectTypeRegister(&base.v2.base, &got), kPFErrKeyError,
                  "'rb.Ready' is already registered with another description",
                  "its prepare hook differs");
  base.prepare = NULL;
  assert_pf_error(PFObjectTypeRegister(&base.v2.base, &got), kPFErrKeyError,
                  "its prepare hook differs");
}

/* A hook's error fails the rebuild, naming the node; one that records none
 * is a RuntimeError naming the type. The instance is released: its
 * finalizer runs. */
static void test_prepare_hook_failures(void** state) {
  (void)state;
  PFObjectTypeDesc3 refuses = ready_desc("rb.Refuses", NULL, prepare_refuses);
  PFObjectTypeDesc3 silent = ready_desc("rb.Silent", NULL, prepare_silent);
  uint32_t ix[2] = {reg(&refuses.v2.base), reg(&silent.v2.base)};
  const char* want[2][2] = {
      {kPFErrTypeError, "PFFromJSON: node 0: prepare_refuses: not from a document"},
      {kPFErrRuntimeError,
       "PFFromJSON: node 0: the prepare hook of rb.Silent failed without recording an error"}};
  for (int i = 0; i < 2; ++i) {
    PFObjectHandle o = alloc(ix[i]);
    char* text = to_json(o);
    int finalized = g_finalized;
    PFValue v;
    int code = 0;
    assert_pf_error(PFFromJSON(text, strlen(text), &v, &code), want[i][0], want[i][1]);
    assert_int_equal(g_finalized - finalized, 1);
    free(text);
    PFObjectFree(o);
  }
}

/* A description of layout 2 has no hook after it: in a block of exactly
 * its size (ASan and valgrind see a read past it), it registers, and its
 * instances rebuild without one. PFGetStructSize knows layout 3's size. */
static void test_layout_2_has_no_hook(void** state) {
  (void)state;
  PFObjectTypeDesc3 full = ready_desc("rb.Layout2", NULL, prepare_1);
  full.v2.base.abi = PF_OBJECT_TYPE_DESC2_ABI;
  PFObjectTypeDesc2* d = malloc(sizeof(*d));
  assert_non_null(d);
  memcpy(d, &full.v2, sizeof(*d));
  uint32_t ix = reg(&d->base);
  free(d);
  PFObjectHandle o = alloc(ix);
  char* text = to_json(o);
  int prepared = g_prepared;
  PFObjectHandle t = from_json(text);
  assert_int_equal(g_prepared, prepared);
  assert_int_equal(int_field(t, "ready"), 0);
  PFObjectFree(t);
  free(text);
  PFObjectFree(o);
  size_t size = 0;
  assert_pf_ok(PFGetStructSize("PFObjectTypeDesc3", &size));
  assert_int_equal(size, sizeof(PFObjectTypeDesc3));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_read_only_accessor_checked_not_written),
      cmocka_unit_test(test_prepare_hook_runs_before_the_fields),
      cmocka_unit_test(test_prepare_hook_failures),
      cmocka_unit_test(test_layout_2_has_no_hook),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
