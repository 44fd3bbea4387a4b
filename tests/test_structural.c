/* Structural equality and hashing: plain values, str and bytes, every
 * container, tensors, registered instances through their fields, cycles,
 * map order, deep nesting, and every refusal. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "support/pf_test.h"
#include "support/pf_fault.h"

static PFValue vi(int64_t x) { return (PFValue){.v_int64 = x}; }
static PFValue vf(double x) { return (PFValue){.v_float64 = x}; }
static PFValue vs(const char* s) { return (PFValue){.v_str = s}; }
static PFValue vh(void* h) { return (PFValue){.v_handle = h}; }

static int eq(PFValue a, int ca, PFValue b, int cb) {
  int out = -1;
  assert_pf_ok(PFStructuralEqual(a, ca, b, cb, &out));
  return out;
}
static uint64_t hs(PFValue v, int c) {
  uint64_t h = 0;
  assert_pf_ok(PFStructuralHash(v, c, &h));
  return h;
}
/* Equal both ways, with equal hashes. */
static void assert_same(PFValue a, int ca, PFValue b, int cb) {
  assert_int_equal(eq(a, ca, b, cb), 1);
  assert_int_equal(eq(b, cb, a, ca), 1);
  assert_true(hs(a, ca) == hs(b, cb));
}
static void assert_differ(PFValue a, int ca, PFValue b, int cb) {
  assert_int_equal(eq(a, ca, b, cb), 0);
  assert_int_equal(eq(b, cb, a, ca), 0);
}
static void same_objects(PFObjectHandle a, PFObjectHandle b) {
  assert_same(vh(a), kPFObjectHandle, vh(b), kPFObjectHandle);
}
static void differ_objects(PFObjectHandle a, PFObjectHandle b) {
  assert_differ(vh(a), kPFObjectHandle, vh(b), kPFObjectHandle);
}

static PFObjectHandle list_of(const PFValue* v, const int* c, int64_t n) {
  PFObjectHandle l = NULL;
  assert_pf_ok(PFListCreate(v, c, n, &l));
  return l;
}
static PFObjectHandle array_of(const PFValue* v, const int* c, int64_t n) {
  PFObjectHandle a = NULL;
  assert_pf_ok(PFArrayCreate(v, c, n, &a));
  return a;
}

static void test_plain_values(void** state) {
  (void)state;
  assert_same(vi(3), kPFInt, vi(3), kPFInt);
  assert_differ(vi(3), kPFInt, vi(4), kPFInt);
  assert_differ(vi(1), kPFInt, vi(1), kPFBool);
  assert_differ(vi(1), kPFInt, vf(1.0), kPFFloat);
  assert_same(vi(1), kPFBool, vi(1), kPFBool);
  /* -0.0 equals 0.0 and NaN equals NaN: one decision, hashes agree. */
  assert_same(vf(0.0), kPFFloat, vf(-0.0), kPFFloat);
  assert_same(vf(NAN), kPFFloat, vf(-NAN), kPFFloat);
  assert_differ(vf(1.5), kPFFloat, vf(2.5), kPFFloat);
  assert_same(vs("abc"), kPFStr, vs("abc"), kPFStr);
  assert_differ(vs("abc"), kPFStr, vs("abd"), kPFStr);
  PFByteArray b1 = {"a\0b", 3}, b2 = {"a\0b", 3}, b3 = {"a\0c", 3};
  assert_same(vh(&b1), kPFBytes, vh(&b2), kPFBytes);
  assert_differ(vh(&b1), kPFBytes, vh(&b3), kPFBytes);
  assert_differ(vs("a"), kPFStr, vh(&(PFByteArray){"a", 1}), kPFBytes);
  assert_same((PFValue){0}, kPFNull, (PFValue){0}, kPFNull);
  PFValue d1 = {.v_type = {kDLFloat, 32, 1}}, d2 = {.v_type = {kDLFloat, 16, 1}};
  assert_same(d1, kPFDataType, d1, kPFDataType);
  assert_differ(d1, kPFDataType, d2, kPFDataType);
  PFValue c0 = {.v_device = {kDLCPU, 0}}, c1 = {.v_device = {kDLCPU, 1}};
  assert_same(c0, kPFDevice, c0, kPFDevice);
  assert_differ(c0, kPFDevice, c1, kPFDevice);
}

static void test_sequences_and_shapes(void** state) {
  (void)state;
  PFValue v[3] = {vi(1), vs("two"), vf(3.0)};
  int c[3] = {kPFInt, kPFStr, kPFFloat};
  PFObjectHandle a = array_of(v, c, 3), b = array_of(v, c, 3), l = list_of(v, c, 3);
  PFObjectHandle l2 = list_of(v, c, 3), shorter = list_of(v, c, 2);
  same_objects(a, b);
  same_objects(l, l2);
  differ_objects(a, l); /* an Array never equals a List */
  differ_objects(l, shorter);
  int64_t d1[2] = {2, 3}, d2[2] = {2, 4};
  PFObjectHandle s1, s2, s3;
  assert_pf_ok(PFShapeCreate(d1, 2, &s1));
  assert_pf_ok(PFShapeCreate(d1, 2, &s2));
  assert_pf_ok(PFShapeCreate(d2, 2, &s3));
  same_objects(s1, s2);
  differ_objects(s1, s3);
  /* Sharing that is not a cycle need not match. */
  PFValue sv[2] = {vh(s1), vh(s1)}, sw[2] = {vh(s1), vh(s2)};
  int sc[2] = {kPFObjectHandle, kPFObjectHandle};
  PFObjectHandle shared = array_of(sv, sc, 2), unshared = array_of(sw, sc, 2);
  same_objects(shared, unshared);
  PFObjectHandle all[] = {a, b, l, l2, shorter, s1, s2, s3, shared, unshared};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) PFObjectFree(all[i]);
}

static void test_maps_ignore_order(void** state) {
  (void)state;
  PFValue k[3] = {vs("x"), vi(7), vs("y")}, v[3] = {vi(1), vs("seven"), vf(2.0)};
  int kc[3] = {kPFStr, kPFInt, kPFStr}, vc[3] = {kPFInt, kPFStr, kPFFloat};
  PFValue rk[3] = {k[2], k[0], k[1]}, rv[3] = {v[2], v[0], v[1]};
  int rkc[3] = {kc[2], kc[0], kc[1]}, rvc[3] = {vc[2], vc[0], vc[1]};
  PFObjectHandle m1, m2, d1, d2, m3, m4;
  assert_pf_ok(PFMapCreate(k, kc, v, vc, 3, &m1));
  assert_pf_ok(PFMapCreate(rk, rkc, rv, rvc, 3, &m2));
  assert_pf_ok(PFDictCreate(k, kc, v, vc, 3, &d1));
  assert_pf_ok(PFDictCreate(rk, rkc, rv, rvc, 3, &d2));
  same_objects(m1, m2);
  same_objects(d1, d2);
  differ_objects(m1, d1); /* a Map never equals a Dict */
  PFValue other[3] = {vi(1), vs("seven"), vf(2.5)};
  assert_pf_ok(PFMapCreate(k, kc, other, vc, 3, &m3)); /* a value differs */
  differ_objects(m1, m3);
  PFValue k2[3] = {vs("x"), vi(8), vs("y")};
  assert_pf_ok(PFMapCreate(k2, kc, v, vc, 3, &m4)); /* a key differs */
  differ_objects(m1, m4);
  /* Dict keys compare as the Dict does: 1, true and 1.0 are one key. */
  PFObjectHandle e1, e2;
  PFValue one = vi(1), onef = vf(1.0), val = vs("v");
  int ic = kPFInt, fc = kPFFloat, sc = kPFStr;
  assert_pf_ok(PFDictCreate(&one, &ic, &val, &sc, 1, &e1));
  assert_pf_ok(PFDictCreate(&onef, &fc, &val, &sc, 1, &e2));
  same_objects(e1, e2);
  PFObjectHandle all[] = {m1, m2, d1, d2, m3, m4, e1, e2};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) PFObjectFree(all[i]);
}

static void tensor(DLTensor* t, float* data, int64_t* shape, int64_t* strides) {
  *t = (DLTensor){data, {kDLCPU, 0}, 2, {kDLFloat, 32, 1}, shape, strides, 0};
}

static void test_tensors(void** state) {
  (void)state;
  float x[6] = {1, 2, 3, 4, 5, 6}, y[6] = {1, 2, 3, 4, 5, 6}, z[6] = {1, 2, 3, 4, 5, 7};
  float xt[6] = {1, 4, 2, 5, 3, 6}; /* x transposed in memory */
  int64_t shape[2] = {2, 3}, strides[2] = {1, 2};
  DLTensor a, b, c, t;
  tensor(&a, x, shape, NULL);
  tensor(&b, y, shape, NULL);
  tensor(&c, z, shape, NULL);
  tensor(&t, xt, shape, strides);
  assert_same(vh(&a), kPFDLTensorHandle, vh(&b), kPFDLTensorHandle);
  assert_differ(vh(&a), kPFDLTensorHandle, vh(&c), kPFDLTensorHandle);
  assert_same(vh(&a), kPFDLTensorHandle, vh(&t), kPFDLTensorHandle); /* strides do not matter */
  DLTensor wrong = a;
  wrong.dtype.code = kDLInt;
  assert_differ(vh(&a), kPFDLTensorHandle, vh(&wrong), kPFDLTensorHandle);
  DLTensor gpu = a;
  gpu.device.device_type = kDLCUDA;
  int out = 7;
  assert_pf_error(PFStructuralEqual(vh(&a), kPFDLTensorHandle, vh(&gpu), kPFDLTensorHandle, &out),
                  kPFErrValueError, "PFStructuralEqual", "device type 2");
  assert_int_equal(out, 7);
  uint64_t h = 9;
  assert_pf_error(PFStructuralHash(vh(&gpu), kPFDLTensorHandle, &h), kPFErrValueError,
                  "PFStructuralHash", "cannot be read");
  assert_true(h == 9);
  DLTensor no_data = a, many_dims = a;
  no_data.data = NULL;
  many_dims.ndim = 65;
  assert_pf_error(PFStructuralHash(vh(&no_data), kPFDLTensorHandle, &h), kPFErrValueError,
                  "PFStructuralHash", "NULL data");
  assert_pf_error(PFStructuralHash(vh(&many_dims), kPFDLTensorHandle, &h), kPFErrValueError,
                  "PFStructuralHash", "65 dims");
  assert_true(h == 9);
  /* A tensor object compares as its DLTensor. */
  PFObjectHandle obj;
  DLTensor* data;
  assert_pf_ok(PFTensorAlloc(2, shape, (DLDataType){kDLFloat, 32, 1}, 0, &obj, &data));
  memcpy(data->data, x, sizeof(x));
  assert_same(vh(obj), kPFObjectHandle, vh(&a), kPFDLTensorHandle);
  PFObjectFree(obj);
}

/* ---- registered instances ---- */
typedef struct {
  int64_t value;
  PFObjectHandle next;
  char* name;
} Node;

static uint32_t node_type(void) {
  static const PFFieldDesc fields[] = {
      PF_FIELD(Node, value, "int64", kPFFieldWritable, NULL),
      PF_FIELD(Node, next, "object", kPFFieldWritable, NULL),
      PF_FIELD(Node, name, "str", kPFFieldWritable, NULL),
  };
  static const PFObjectTypeDesc desc = {PF_OBJECT_TYPE_DESC_ABI,
                                        "test_structural.Node",
                                        NULL,
                                        sizeof(Node),
                                        NULL,
                                        NULL,
                                        fields,
                                        PF_COUNTOF(fields),
                                        NULL,
                                        0};
  uint32_t ix = 0;
  assert_pf_ok(PFObjectTypeRegister(&desc, &ix));
  return ix;
}

static PFObjectHandle node(int64_t value, PFObjectHandle next) {
  PFObjectHandle n;
  assert_pf_ok(PFObjectAlloc(node_type(), &n));
  assert_pf_ok(PFObjectSetFieldByName(n, "value", vi(value), kPFInt));
  if (next) assert_pf_ok(PFObjectSetFieldByName(n, "next", vh(next), kPFObjectHandle));
  return n;
}
static void unlink(PFObjectHandle n) {
  assert_pf_ok(PFObjectSetFieldByName(n, "next", (PFValue){0}, kPFNull));
}

static void test_instances_by_fields(void** state) {
  (void)state;
  PFObjectHandle a = node(1, NULL), b = node(1, NULL), c = node(2, NULL);
  same_objects(a, b);
  differ_objects(a, c);
  assert_pf_ok(PFObjectSetFieldByName(a, "name", vs("n"), kPFStr));
  differ_objects(a, b);
  assert_pf_ok(PFObjectSetFieldByName(b, "name", vs("n"), kPFStr));
  same_objects(a, b);
  PFObjectHandle pa = node(0, a), pb = node(0, b), pc = node(0, c);
  same_objects(pa, pb);
  differ_objects(pa, pc);
  PFObjectHandle all[] = {a, b, c, pa, pb, pc};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) PFObjectFree(all[i]);
}

/* A function, a module or another opaque object compares by identity. */
static void test_functions_by_identity(void** state) {
  (void)state;
  PFFunctionHandle f, g;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &g));
  assert_same(vh(f), kPFFuncHandle, vh(f), kPFObjectHandle);
  assert_differ(vh(f), kPFFuncHandle, vh(g), kPFFuncHandle);
  PFFuncFree(f);
  PFFuncFree(g);
}

static void test_cycles(void** state) {
  (void)state;
  /* Two rings of three nodes: isomorphic, so equal, with equal hashes. */
  PFObjectHandle a3 = node(3, NULL), a2 = node(2, a3), a1 = node(1, a2);
  PFObjectHandle b3 = node(3, NULL), b2 = node(2, b3), b1 = node(1, b2);
  assert_pf_ok(PFObjectSetFieldByName(a3, "next", vh(a1), kPFObjectHandle));
  assert_pf_ok(PFObjectSetFieldByName(b3, "next", vh(b1), kPFObjectHandle));
  same_objects(a1, b1);
  /* A ring of two is not a ring of three, nor is a ring of other values. */
  PFObjectHandle c2 = node(2, NULL), c1 = node(1, c2);
  assert_pf_ok(PFObjectSetFieldByName(c2, "next", vh(c1), kPFObjectHandle));
  differ_objects(a1, c1);
  assert_pf_ok(PFObjectSetFieldByName(b2, "value", vi(5), kPFInt));
  differ_objects(a1, b1);
  unlink(a3);
  unlink(b3);
  unlink(c2);
  PFObjectHandle all[] = {a1, a2, a3, b1, b2, b3, c1, c2};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) PFObjectFree(all[i]);

  /* A List that holds itself equals another that does. */
  PFObjectHandle l1 = list_of(NULL, NULL, 0), l2 = list_of(NULL, NULL, 0);
  assert_pf_ok(PFListAppend(l1, vi(1), kPFInt));
  assert_pf_ok(PFListAppend(l1, vh(l1), kPFObjectHandle));
  assert_pf_ok(PFListAppend(l2, vi(1), kPFInt));
  assert_pf_ok(PFListAppend(l2, vh(l2), kPFObjectHandle));
  same_objects(l1, l2);
  /* A Dict holding itself under a key. */
  PFObjectHandle d1, d2;
  assert_pf_ok(PFDictCreate(NULL, NULL, NULL, NULL, 0, &d1));
  assert_pf_ok(PFDictCreate(NULL, NULL, NULL, NULL, 0, &d2));
  assert_pf_ok(PFDictSetItem(d1, vs("me"), kPFStr, vh(d1), kPFObjectHandle));
  assert_pf_ok(PFDictSetItem(d2, vs("me"), kPFStr, vh(d2), kPFObjectHandle));
  same_objects(d1, d2);
  differ_objects(l1, d1);
  assert_pf_ok(PFListClear(l1));
  assert_pf_ok(PFListClear(l2));
  assert_pf_ok(PFDictClear(d1));
  assert_pf_ok(PFDictClear(d2));
  PFObjectFree(l1);
  PFObjectFree(l2);
  PFObjectFree(d1);
  PFObjectFree(d2);
}

/* A million nested Lists: a clear ValueError, not a stack overflow. */
static void test_deep_chain_is_refused(void** state) {
  (void)state;
  PFObjectHandle inner = list_of(NULL, NULL, 0);
  for (int i = 0; i < 1000000; ++i) {
    PFValue v = vh(inner);
    int c = kPFObjectHandle;
    PFObjectHandle outer = list_of(&v, &c, 1);
    PFObjectFree(inner);
    inner = outer;
  }
  int out = 7;
  uint64_t h = 9;
  assert_pf_error(PFStructuralEqual(vh(inner), kPFObjectHandle, vh(inner), kPFObjectHandle, &out),
                  kPFErrValueError, "PFStructuralEqual", "deeper than 1024");
  assert_pf_error(PFStructuralHash(vh(inner), kPFObjectHandle, &h), kPFErrValueError,
                  "PFStructuralHash", "deeper than 1024");
  assert_int_equal(out, 7);
  assert_true(h == 9);
  PFObjectFree(inner);
  /* Exactly the limit still works. */
  inner = list_of(NULL, NULL, 0);
  for (int i = 1; i < PF_STRUCTURAL_MAX_DEPTH; ++i) {
    PFValue v = vh(inner);
    int c = kPFObjectHandle;
    PFObjectHandle outer = list_of(&v, &c, 1);
    PFObjectFree(inner);
    inner = outer;
  }
  assert_int_equal(eq(vh(inner), kPFObjectHandle, vh(inner), kPFObjectHandle), 1);
  PFObjectFree(inner);
}

/* Another thread changes a List inside the compared values meanwhile:
 * each List is read as one snapshot, so every call gives an answer. */
static void* churn(void* list) {
  for (int i = 0; i < 2000; ++i) {
    PFValue out;
    int code;
    assert_pf_ok(PFListAppend(list, vs("item"), kPFStr));
    assert_pf_ok(PFListPop(list, 0, &out, &code));
  }
  return NULL;
}

/* A level of a graph: a container of the kind `level` picks (List,
 * Array, Map, Dict, then an instance whose field holds a List) that holds
 * `x` and `y`. */
static PFObjectHandle level_of(int level, PFObjectHandle x, PFObjectHandle y) {
  PFValue v[2] = {vh(x), vh(y)}, k[2] = {vs("a"), vs("b")};
  int c[2] = {kPFObjectHandle, kPFObjectHandle}, kc[2] = {kPFStr, kPFStr};
  PFObjectHandle out = NULL;
  switch (level % 5) {
    case 0:
      return list_of(v, c, 2);
    case 1:
      return array_of(v, c, 2);
    case 2:
      assert_pf_ok(PFMapCreate(k, kc, v, c, 2, &out));
      return out;
    case 3:
      assert_pf_ok(PFDictCreate(k, kc, v, c, 2, &out));
      return out;
    default: {
      PFObjectHandle l = list_of(v, c, 2);
      out = node(level, l);
      PFObjectFree(l);
      return out;
    }
  }
}

/* `levels` levels over `leaf` (taken), each holding the one below twice:
 * a graph of `levels` + 1 objects that unfolds to a tree of 2^levels. */
static PFObjectHandle shared_graph(int levels, PFObjectHandle leaf) {
  PFObjectHandle x = leaf;
  for (int i = 0; i < levels; ++i) {
    PFObjectHandle y = level_of(i, x, x);
    PFObjectFree(x);
    x = y;
  }
  return x;
}

/* The same values as shared_graph, with nothing shared: every level holds
 * two objects of its own. */
static PFObjectHandle unshared_tree(int levels) {
  if (levels == 0) return list_of(NULL, NULL, 0);
  PFObjectHandle a = unshared_tree(levels - 1), b = unshared_tree(levels - 1);
  PFObjectHandle out = level_of(levels - 1, a, b);
  PFObjectFree(a);
  PFObjectFree(b);
  return out;
}

/* A List that holds itself, with a second reference for the caller, who
 * empties it and releases that reference when done. */
static PFObjectHandle self_holding_list(void) {
  PFObjectHandle l = list_of(NULL, NULL, 0);
  assert_pf_ok(PFListAppend(l, vh(l), kPFObjectHandle));
  PFObjectRetain(l);
  return l;
}
static void drop_self_holding_list(PFObjectHandle l) {
  assert_pf_ok(PFListClear(l));
  PFObjectFree(l);
}

/* A value held by several containers is walked once, not once per path
 * to it: 40 levels that each hold the level below twice (Lists, Arrays,
 * Maps, Dicts, instances) hash and compare at the cost of 40 objects, not
 * of the 2^40 the graph unfolds to; the results are those of the unfolded
 * tree, also with a List that holds itself at the bottom. (Before, the
 * walk went down every path: 20 levels took a million snapshots, 40 would
 * never end.) */
static void test_shared_values_are_walked_once(void** state) {
  (void)state;
  PFObjectHandle a = shared_graph(20, list_of(NULL, NULL, 0));
  PFObjectHandle b = shared_graph(20, list_of(NULL, NULL, 0));
  pf_fault_count_start();
  same_objects(a, b);
  long walked = pf_fault_count_end();
  if (walked > 2000) fail_msg("comparing and hashing 21 objects allocated %ld times", walked);
  PFObjectFree(a);
  PFObjectFree(b);

  /* As deep as the walk goes, and a tree of the same values. */
  a = shared_graph(40, list_of(NULL, NULL, 0));
  b = shared_graph(40, list_of(NULL, NULL, 0));
  same_objects(a, b);
  PFObjectFree(a);
  PFObjectFree(b);
  a = shared_graph(9, list_of(NULL, NULL, 0));
  b = unshared_tree(9);
  same_objects(a, b);
  PFObjectFree(b);

  /* One difference at the bottom is found, and named. */
  PFValue one = vi(1);
  int ic = kPFInt;
  b = shared_graph(9, list_of(&one, &ic, 1));
  differ_objects(a, b);
  int out = -1;
  const char* path = NULL;
  assert_pf_ok(PFStructuralCompare(vh(a), kPFObjectHandle, vh(b), kPFObjectHandle, 0, &out, &path));
  assert_int_equal(out, 0);
  /* Dict, Map, Array, List, instance (its List), Dict, Map, Array, List. */
  assert_string_equal(path, "$[\"a\"][\"a\"][0][0].next[0][\"a\"][\"a\"][0][0]");
  PFObjectFree(a);
  PFObjectFree(b);

  /* Cycles inside what is shared: each List holds itself. */
  PFObjectHandle la = self_holding_list(), lb = self_holding_list();
  a = shared_graph(40, la);
  b = shared_graph(40, lb);
  same_objects(a, b);
  PFObjectFree(a);
  PFObjectFree(b);
  drop_self_holding_list(la);
  drop_self_holding_list(lb);
  /* A cycle through the shared levels (the top level holds the root) is
   * still compared as a graph. */
  la = self_holding_list();
  lb = self_holding_list();
  a = shared_graph(12, la);
  b = shared_graph(12, lb);
  assert_pf_ok(PFListAppend(la, vh(a), kPFObjectHandle));
  assert_pf_ok(PFListAppend(lb, vh(b), kPFObjectHandle));
  same_objects(a, b);
  assert_pf_ok(PFListAppend(lb, vi(1), kPFInt));
  differ_objects(a, b);
  PFObjectFree(a);
  PFObjectFree(b);
  drop_self_holding_list(la);
  drop_self_holding_list(lb);
}

/* Levels of Lists that each hold the level below twice, the bottom one
 * holding the root: every object is on a cycle, so nothing can be kept,
 * and the walk would go down all 2^levels paths. It stops, with an error
 * naming the entry point and the bound, once it has walked again more
 * than PF_STRUCTURAL_MAX_REWALK steps. (Before, it never ended.) */
static PFObjectHandle cyclic_shared_lists(int levels, PFObjectHandle* bottom) {
  PFObjectHandle x = list_of(NULL, NULL, 0);
  *bottom = x;
  PFObjectRetain(x); /* the caller's, to break the cycle */
  for (int i = 0; i < levels; ++i) {
    PFValue v[2] = {vh(x), vh(x)};
    int c[2] = {kPFObjectHandle, kPFObjectHandle};
    PFObjectHandle y = list_of(v, c, 2);
    PFObjectFree(x);
    x = y;
  }
  assert_pf_ok(PFListAppend(*bottom, vh(x), kPFObjectHandle));
  return x;
}
static void drop_cyclic_shared_lists(PFObjectHandle root, PFObjectHandle bottom) {
  drop_self_holding_list(bottom);
  PFObjectFree(root);
}

static void test_cycles_through_shared_values_are_bounded(void** state) {
  (void)state;
  PFObjectHandle a_end, b_end;
  PFObjectHandle a = cyclic_shared_lists(60, &a_end), b = cyclic_shared_lists(60, &b_end);
  uint64_t h = 0;
  int out = -1;
  const char* path = NULL;
  assert_pf_error(PFStructuralHash(vh(a), kPFObjectHandle, &h), kPFErrValueError,
                  "PFStructuralHash", "PF_STRUCTURAL_MAX_REWALK");
  assert_pf_error(PFStructuralEqual(vh(a), kPFObjectHandle, vh(b), kPFObjectHandle, &out),
                  kPFErrValueError, "PFStructuralEqual", "PF_STRUCTURAL_MAX_REWALK");
  assert_pf_error(
      PFStructuralCompare(vh(a), kPFObjectHandle, vh(b), kPFObjectHandle, 0, &out, &path),
      kPFErrValueError, "PFStructuralCompare", "PF_STRUCTURAL_MAX_REWALK");
  assert_int_equal(out, -1);
  assert_true(h == 0);
  drop_cyclic_shared_lists(a, a_end);
  drop_cyclic_shared_lists(b, b_end);

  /* A few levels stay under the bound: compared and hashed as before. */
  a = cyclic_shared_lists(6, &a_end);
  b = cyclic_shared_lists(6, &b_end);
  same_objects(a, b);
  drop_cyclic_shared_lists(a, a_end);
  drop_cyclic_shared_lists(b, b_end);
}

static void test_list_changed_by_another_thread(void** state) {
  (void)state;
  PFValue one = vs("item");
  int sc = kPFStr;
  PFObjectHandle l = list_of(&one, &sc, 1), stable = list_of(&one, &sc, 1);
  PFValue av[1] = {vh(l)}, bv[1] = {vh(stable)};
  int ac[1] = {kPFObjectHandle};
  PFObjectHandle a = array_of(av, ac, 1), b = array_of(bv, ac, 1);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, churn, l), 0);
  for (int i = 0; i < 500; ++i) {
    int out = -1;
    uint64_t h;
    assert_pf_ok(PFStructuralEqual(vh(a), kPFObjectHandle, vh(b), kPFObjectHandle, &out));
    assert_true(out == 0 || out == 1);
    assert_pf_ok(PFStructuralHash(vh(a), kPFObjectHandle, &h));
  }
  assert_int_equal(pthread_join(t, NULL), 0);
  PFObjectFree(a);
  PFObjectFree(b);
  PFObjectFree(l);
  PFObjectFree(stable);
}

static void test_bad_input(void** state) {
  (void)state;
  int out = 7;
  uint64_t h = 9;
  assert_pf_error(PFStructuralEqual(vi(1), kPFInt, vi(1), kPFInt, NULL), kPFErrTypeError,
                  "PFStructuralEqual", "'out'");
  assert_pf_error(PFStructuralHash(vi(1), kPFInt, NULL), kPFErrTypeError, "PFStructuralHash",
                  "'out'");
  assert_pf_error(PFStructuralEqual(vi(1), -5, vi(1), kPFInt, &out), kPFErrTypeError,
                  "PFStructuralEqual", "argument 0");
  assert_pf_error(PFStructuralEqual(vi(1), kPFInt, vs(NULL), kPFStr, &out), kPFErrTypeError,
                  "PFStructuralEqual", "argument 1");
  static uint64_t not_an_object[16];
  assert_pf_error(PFStructuralHash(vh(not_an_object), kPFObjectHandle, &h), kPFErrTypeError,
                  "PFStructuralHash", "argument 0");
  assert_int_equal(out, 7);
  assert_true(h == 9);
}

/* ---- PFStructuralCompare: the path of the first difference, options ---- */
/* The path at which (a, ca) and (b, cb) first differ, or NULL when equal;
 * PFStructuralCompare's answer agrees with PFStructuralEqual's. */
static const char* mismatch(PFValue a, int ca, PFValue b, int cb, uint32_t flags) {
  int out = -1;
  const char* path = "unset";
  assert_pf_ok(PFStructuralCompare(a, ca, b, cb, flags, &out, &path));
  if (flags == 0) assert_int_equal(out, eq(a, ca, b, cb));
  assert_int_equal(out, path == NULL);
  return path;
}
static const char* obj_mismatch(PFObjectHandle a, PFObjectHandle b) {
  return mismatch(vh(a), kPFObjectHandle, vh(b), kPFObjectHandle, 0);
}
static PFObjectHandle map1(const char* key, PFValue v, int c) {
  PFObjectHandle m;
  PFValue k = vs(key);
  int kc = kPFStr;
  assert_pf_ok(PFMapCreate(&k, &kc, &v, &c, 1, &m));
  return m;
}

static void test_compare_names_first_difference(void** state) {
  (void)state;
  assert_null(mismatch(vi(3), kPFInt, vi(3), kPFInt, 0));
  assert_string_equal(mismatch(vi(3), kPFInt, vi(4), kPFInt, 0), "$");
  /* {"items": [1, 2, {"k": 3}]} against the same with k = 4. */
  PFObjectHandle k3 = map1("k", vi(3), kPFInt), k4 = map1("k", vi(4), kPFInt);
  PFValue i3[3] = {vi(1), vi(2), vh(k3)}, i4[3] = {vi(1), vi(2), vh(k4)};
  int ic[3] = {kPFInt, kPFInt, kPFObjectHandle};
  PFObjectHandle a3 = array_of(i3, ic, 3), a4 = array_of(i4, ic, 3);
  PFObjectHandle r3 = map1("items", vh(a3), kPFObjectHandle);
  PFObjectHandle r3b = map1("items", vh(a3), kPFObjectHandle);
  PFObjectHandle r4 = map1("items", vh(a4), kPFObjectHandle);
  assert_null(obj_mismatch(r3, r3b));
  assert_string_equal(obj_mismatch(r3, r4), "$[\"items\"][2][\"k\"]");
  /* A key of one that the other lacks; sizes that differ; kinds that do. */
  PFObjectHandle other = map1("other", vh(a3), kPFObjectHandle);
  assert_string_equal(obj_mismatch(r3, other), "$[\"items\"]");
  PFObjectHandle a2 = array_of(i3, ic, 2), l3 = list_of(i3, ic, 3);
  assert_string_equal(obj_mismatch(a3, a2), "$");
  assert_string_equal(obj_mismatch(a3, l3), "$");
  /* Int keys, and a str key that needs escaping. */
  PFObjectHandle i1, i2, q1 = map1("a\"b\\", vi(1), kPFInt), q2 = map1("a\"b\\", vi(2), kPFInt);
  PFValue seven = vi(7), one = vi(1), two = vi(2);
  int c = kPFInt;
  assert_pf_ok(PFMapCreate(&seven, &c, &one, &c, 1, &i1));
  assert_pf_ok(PFMapCreate(&seven, &c, &two, &c, 1, &i2));
  assert_string_equal(obj_mismatch(i1, i2), "$[7]");
  assert_string_equal(obj_mismatch(q1, q2), "$[\"a\\\"b\\\\\"]");
  /* Instances: the field's name. */
  PFObjectHandle n1 = node(1, NULL), n2 = node(1, NULL), p1 = node(0, n1), p2 = node(0, n2);
  assert_pf_ok(PFObjectSetFieldByName(n2, "name", vs("x"), kPFStr));
  assert_string_equal(obj_mismatch(p1, p2), "$.next.name");
  PFObjectHandle all[] = {k3, k4, a3, a4, r3, r3b, r4, other, a2,
                          l3, i1, i2, q1, q2, n1,  n2, p1,    p2};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) PFObjectFree(all[i]);
}

static void test_skip_tensor_content(void** state) {
  (void)state;
  float x[6] = {1, 2, 3, 4, 5, 6}, z[6] = {1, 2, 3, 4, 5, 7};
  int64_t shape[2] = {2, 3}, other_shape[2] = {3, 2};
  DLTensor a, c, reshaped;
  tensor(&a, x, shape, NULL);
  tensor(&c, z, shape, NULL);
  tensor(&reshaped, x, other_shape, NULL);
  const uint32_t skip = PF_STRUCTURAL_SKIP_TENSOR_CONTENT;
  assert_string_equal(mismatch(vh(&a), kPFDLTensorHandle, vh(&c), kPFDLTensorHandle, 0), "$");
  assert_null(mismatch(vh(&a), kPFDLTensorHandle, vh(&c), kPFDLTensorHandle, skip));
  assert_string_equal(mismatch(vh(&a), kPFDLTensorHandle, vh(&reshaped), kPFDLTensorHandle, skip),
                      "$");
  uint64_t ha = 0, hc = 1;
  assert_pf_ok(PFStructuralHashEx(vh(&a), kPFDLTensorHandle, skip, &ha));
  assert_pf_ok(PFStructuralHashEx(vh(&c), kPFDLTensorHandle, skip, &hc));
  assert_true(ha == hc);
  assert_pf_ok(PFStructuralHashEx(vh(&c), kPFDLTensorHandle, 0, &hc));
  assert_true(ha != hc && hc == hs(vh(&c), kPFDLTensorHandle));
  /* Without the data to read, a tensor's device does not matter. */
  DLTensor gpu = c;
  gpu.device.device_type = kDLCUDA;
  gpu.data = NULL;
  assert_null(mismatch(vh(&a), kPFDLTensorHandle, vh(&gpu), kPFDLTensorHandle, skip));
  assert_pf_ok(PFStructuralHashEx(vh(&gpu), kPFDLTensorHandle, skip, &hc));
  assert_true(ha == hc);
}

static void test_compare_bad_input(void** state) {
  (void)state;
  int out = 7;
  const char* path = "unset";
  uint64_t h = 9;
  assert_pf_error(PFStructuralCompare(vi(1), kPFInt, vi(1), kPFInt, 0, NULL, &path),
                  kPFErrTypeError, "PFStructuralCompare", "'equal'");
  assert_pf_error(PFStructuralCompare(vi(1), kPFInt, vi(2), kPFInt, 0x80, &out, &path),
                  kPFErrValueError, "PFStructuralCompare", "flags", "0x80");
  assert_pf_error(PFStructuralCompare(vi(1), kPFInt, vs(NULL), kPFStr, 0, &out, &path),
                  kPFErrTypeError, "PFStructuralCompare", "argument 1");
  assert_pf_error(PFStructuralHashEx(vi(1), kPFInt, 0, NULL), kPFErrTypeError, "PFStructuralHashEx",
                  "'out'");
  assert_pf_error(PFStructuralHashEx(vi(1), kPFInt, 2, &h), kPFErrValueError, "PFStructuralHashEx",
                  "flags", "0x2");
  assert_int_equal(out, 7);
  assert_string_equal(path, "unset");
  assert_true(h == 9);
  /* The path is optional. */
  assert_pf_ok(PFStructuralCompare(vi(1), kPFInt, vi(2), kPFInt, 0, &out, NULL));
  assert_int_equal(out, 0);
}

int main(void) {
  if (pf_fault_install() != 0) return 1; /* before the runtime's first allocation */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_values),
      cmocka_unit_test(test_sequences_and_shapes),
      cmocka_unit_test(test_maps_ignore_order),
      cmocka_unit_test(test_tensors),
      cmocka_unit_test(test_instances_by_fields),
      cmocka_unit_test(test_functions_by_identity),
      cmocka_unit_test(test_cycles),
      cmocka_unit_test(test_deep_chain_is_refused),
      cmocka_unit_test(test_shared_values_are_walked_once),
      cmocka_unit_test(test_cycles_through_shared_values_are_bounded),
      cmocka_unit_test(test_list_changed_by_another_thread),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_compare_names_first_difference),
      cmocka_unit_test(test_skip_tensor_content),
      cmocka_unit_test(test_compare_bad_input),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
