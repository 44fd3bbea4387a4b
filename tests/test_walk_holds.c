/* The walks over object graphs (PFToJSON, PFStructuralEqual,
 * PFStructuralHash) hold the snapshots of the Lists and Dicts they read
 * until they end: an item that another thread removes meanwhile is not
 * released in the middle of the walk, where its finalizer could free what
 * the walk is still reading. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include "support/pf_test.h"
#include "support/pf_object_test.h"

/* walk.Node: a child, a List of items and an accessor field whose getter,
 * when armed, clears a List: it stands in for another thread that clears
 * the List at that moment, while the walk holds its snapshot. */
typedef struct {
  PFObjectHandle child;
  PFObjectHandle items;
} Node;

static PFObjectHandle g_clear;  /* the List the getter clears once */
static const void* g_victim;    /* the Node whose finalizer re-enters */
static PFObjectHandle g_parent; /* whose child that finalizer drops */
static int g_victim_done;       /* the finalizer ran */

static int get_meddle(const void* data, PFValue* out, int* out_code) {
  (void)data;
  if (g_clear) {
    PFObjectHandle l = g_clear;
    g_clear = NULL;
    if (PFListClear(l) != 0) return -1;
  }
  out->v_int64 = 0;
  *out_code = kPFInt;
  return 0;
}

/* The victim, released by the walk's snapshot, re-enters: it drops the
 * child of g_parent, the instance that the walk is reading. */
static void node_fin(void* data) {
  if (data != g_victim) return;
  g_victim_done = 1;
  PFValue null = {.v_handle = NULL};
  PFObjectSetFieldByName(g_parent, "child", null, kPFNull);
}

static uint32_t node_type(void) {
  static uint32_t ix;
  if (ix) return ix;
  static const PFFieldDesc fields[] = {
      PF_FIELD(Node, child, "object", kPFFieldWritable, NULL),
      PF_FIELD(Node, items, "list", kPFFieldWritable, NULL),
  };
  static const PFAccessorDesc accessors[] = {
      PF_ACCESSOR("meddle", "int64", get_meddle, NULL, NULL),
  };
  static const PFObjectTypeDesc2 d = {{PF_OBJECT_TYPE_DESC2_ABI, "walk.Node", NULL, sizeof(Node),
                                       node_fin, NULL, fields, PF_COUNTOF(fields), NULL, 0},
                                      accessors,
                                      PF_COUNTOF(accessors)};
  ix = reg(&d.base);
  return ix;
}

static void set_handle(PFObjectHandle o, const char* name, PFObjectHandle v) {
  assert_pf_ok(PFObjectSetFieldByName(o, name, (PFValue){.v_handle = v}, kPFObjectHandle));
}

/* parent.child = P; P.items = L = [M, V]. Reading M's accessor clears L,
 * so that the snapshot of L holds the last references to M and V; V's
 * finalizer then drops P. Returns the parent (the caller's reference);
 * the test holds nothing else. */
static PFObjectHandle hostile_graph(void) {
  uint32_t ix = node_type();
  PFObjectHandle parent = alloc(ix), p = alloc(ix), m = alloc(ix), v = alloc(ix), l = NULL;
  PFValue items[2] = {{.v_handle = m}, {.v_handle = v}};
  int codes[2] = {kPFObjectHandle, kPFObjectHandle};
  assert_pf_ok(PFListCreate(items, codes, 2, &l));
  set_handle(p, "items", l);
  set_handle(parent, "child", p);
  g_clear = l;
  g_victim = data(v);
  g_parent = parent;
  g_victim_done = 0;
  PFObjectFree(l);
  PFObjectFree(p);
  PFObjectFree(m);
  PFObjectFree(v);
  return parent;
}

static void test_to_json_holds_snapshots(void** state) {
  (void)state;
  PFObjectHandle parent = hostile_graph();
  const char* text = NULL;
  size_t n = 0;
  int rc = PFToJSON((PFValue){.v_handle = parent}, kPFObjectHandle, &text, &n);
  assert_pf_ok(rc);
  /* The walk read P whole, its List as the snapshot had it. */
  assert_non_null(strstr(text, "\"items\":[{\"ref\":"));
  assert_non_null(strstr(text, "\"meddle\":0}},{\"type\":\"object\""));
  assert_true(g_victim_done); /* before the call returned */
  PFObjectFree(parent);
}

static void test_structural_hash_holds_snapshots(void** state) {
  (void)state;
  PFObjectHandle parent = hostile_graph();
  uint64_t h = 0;
  int rc = PFStructuralHash((PFValue){.v_handle = parent}, kPFObjectHandle, &h);
  assert_pf_ok(rc);
  assert_true(g_victim_done); /* before the call returned */
  PFObjectFree(parent);
}

static void test_structural_equal_holds_snapshots(void** state) {
  (void)state;
  PFObjectHandle parent = hostile_graph();
  int eq = -1;
  PFValue v = {.v_handle = parent};
  int rc = PFStructuralEqual(v, kPFObjectHandle, v, kPFObjectHandle, &eq);
  assert_pf_ok(rc);
  assert_int_equal(eq, 1);
  assert_true(g_victim_done); /* before the call returned */
  PFObjectFree(parent);
}

/* A walk that fails still releases what it held, keeping its error. */
static void test_failed_walk_releases_and_keeps_its_error(void** state) {
  (void)state;
  PFObjectHandle parent = hostile_graph();
  PFObjectHandle l = NULL, f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  PFValue items[2] = {{.v_handle = parent}, {.v_handle = f}};
  int codes[2] = {kPFObjectHandle, kPFFuncHandle};
  assert_pf_ok(PFListCreate(items, codes, 2, &l));
  const char* text = NULL;
  int rc = PFToJSON((PFValue){.v_handle = l}, kPFObjectHandle, &text, NULL);
  assert_pf_error(rc, kPFErrTypeError, "PFToJSON: ", "root[1]");
  assert_true(g_victim_done); /* before the call returned */
  PFObjectFree(l);
  PFObjectFree(f);
  PFObjectFree(parent);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_to_json_holds_snapshots),
      cmocka_unit_test(test_structural_hash_holds_snapshots),
      cmocka_unit_test(test_structural_equal_holds_snapshots),
      cmocka_unit_test(test_failed_walk_releases_and_keeps_its_error),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
