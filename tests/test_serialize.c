/* JSON documents of object graphs: every type written and read back,
 * sharing and cycles, instances through their fields (read-only ones too),
 * tensors, what cannot be written, and hostile documents. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "support/pf_test.h"

static PFValue vi(int64_t x) { return (PFValue){.v_int64 = x}; }
static PFValue vf(double x) { return (PFValue){.v_float64 = x}; }
static PFValue vs(const char* s) { return (PFValue){.v_str = s}; }
static PFValue vh(void* h) { return (PFValue){.v_handle = h}; }

/* The document of a value, copied (the returned string is the thread's). */
static char* to_json(PFValue v, int code) {
  const char* text = NULL;
  size_t n = 0;
  assert_pf_ok(PFToJSON(v, code, &text, &n));
  assert_int_equal(strlen(text), n);
  char* copy = strdup(text);
  assert_non_null(copy);
  return copy;
}

static int from_json(const char* text, PFValue* out) {
  int code = -1;
  assert_pf_ok(PFFromJSON(text, strlen(text), out, &code));
  return code;
}

static int equal(PFValue a, int ca, PFValue b, int cb) {
  int eq = -1;
  assert_pf_ok(PFStructuralEqual(a, ca, b, cb, &eq));
  return eq;
}

static void release(PFValue v, int code) {
  if (code == kPFObjectHandle || code == kPFFuncHandle || code == kPFModuleHandle)
    PFObjectFree(v.v_handle);
}

/* Writes (v, code), reads it back, and checks that what came back is
 * structurally equal and of the same code; returns the copy's code and
 * value in *back (the caller releases it). */
static int round_trip(PFValue v, int code, PFValue* back) {
  char* text = to_json(v, code);
  int bc = from_json(text, back);
  free(text);
  assert_int_equal(bc, code == kPFDLTensorHandle ? kPFObjectHandle : code);
  assert_int_equal(equal(v, code, *back, bc), 1);
  return bc;
}

static void assert_round_trips(PFValue v, int code) {
  PFValue back;
  int bc = round_trip(v, code, &back); /* before `back` is read */
  release(back, bc);
}

static void test_plain_values(void** state) {
  (void)state;
  assert_round_trips((PFValue){0}, kPFNull);
  assert_round_trips(vi(1), kPFBool);
  assert_round_trips(vi(0), kPFBool);
  int64_t ints[] = {
      0,         -1,       42, (int64_t)1 << 53, -((int64_t)1 << 53), ((int64_t)1 << 53) + 1,
      INT64_MAX, INT64_MIN};
  for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); ++i) {
    PFValue back;
    assert_int_equal(round_trip(vi(ints[i]), kPFInt, &back), kPFInt);
    assert_true(back.v_int64 == ints[i]);
  }
  /* Past 2^53 an int is written as text, so that any reader keeps it. */
  char* big = to_json(vi(INT64_MAX), kPFInt);
  assert_non_null(strstr(big, "{\"int\":\"9223372036854775807\"}"));
  free(big);
  double floats[] = {0.0, -0.0, 1.5, 0.1, 1e300, -2.5e-300, INFINITY, -INFINITY, NAN};
  for (size_t i = 0; i < sizeof(floats) / sizeof(floats[0]); ++i) {
    PFValue back;
    assert_int_equal(round_trip(vf(floats[i]), kPFFloat, &back), kPFFloat);
    if (!isnan(floats[i])) assert_memory_equal(&back.v_float64, &floats[i], sizeof(double));
  }
  assert_round_trips(vs(""), kPFStr);
  assert_round_trips(vs("h\xc3\xa9llo \"quoted\"\n"), kPFStr);
  /* A str that is not UTF-8 still comes back byte for byte. */
  PFValue back;
  assert_int_equal(round_trip(vs("\xff\xfe bad"), kPFStr, &back), kPFStr);
  assert_string_equal(back.v_str, "\xff\xfe bad");
  PFByteArray bytes = {"a\0b\xff", 4}, empty = {"", 0};
  assert_round_trips(vh(&bytes), kPFBytes);
  assert_round_trips(vh(&empty), kPFBytes);
  assert_round_trips((PFValue){.v_type = {kDLFloat, 32, 4}}, kPFDataType);
  assert_round_trips((PFValue){.v_type = {kDLInt, 4, 1}}, kPFDataType);
  assert_round_trips((PFValue){.v_device = {kDLCUDA, 3}}, kPFDevice);
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
static PFObjectHandle shape_of(int64_t a, int64_t b) {
  int64_t d[2] = {a, b};
  PFObjectHandle s = NULL;
  assert_pf_ok(PFShapeCreate(d, 2, &s));
  return s;
}
static void round_trips_object(PFObjectHandle h) { assert_round_trips(vh(h), kPFObjectHandle); }

static void test_containers(void** state) {
  (void)state;
  PFByteArray b = {"xy", 2};
  PFObjectHandle shape = shape_of(2, INT64_MAX);
  PFValue v[6] = {vi(1), vs("two"), vf(3.5), vh(&b), (PFValue){0}, vh(shape)};
  int c[6] = {kPFInt, kPFStr, kPFFloat, kPFBytes, kPFNull, kPFObjectHandle};
  PFObjectHandle a = array_of(v, c, 6), l = list_of(v, c, 6), e = array_of(NULL, NULL, 0);
  round_trips_object(a);
  round_trips_object(l);
  round_trips_object(e);
  round_trips_object(shape);
  PFValue k[3] = {vs("x"), vi(7), vi(-8)}, mv[3] = {vh(a), vs("seven"), vh(shape)};
  int kc[3] = {kPFStr, kPFInt, kPFInt}, mvc[3] = {kPFObjectHandle, kPFStr, kPFObjectHandle};
  PFObjectHandle m, d;
  assert_pf_ok(PFMapCreate(k, kc, mv, mvc, 3, &m));
  assert_pf_ok(PFDictCreate(k, kc, mv, mvc, 3, &d));
  round_trips_object(m);
  round_trips_object(d);
  PFObjectHandle all[] = {a, l, e, shape, m, d};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) PFObjectFree(all[i]);
}

/* One Shape held twice comes back as one Shape held twice. */
static void test_sharing(void** state) {
  (void)state;
  PFObjectHandle s = shape_of(2, 3);
  PFValue v[2] = {vh(s), vh(s)};
  int c[2] = {kPFObjectHandle, kPFObjectHandle};
  PFObjectHandle a = array_of(v, c, 2);
  char* text = to_json(vh(a), kPFObjectHandle);
  /* Written once: the node table has the shape and the array. */
  assert_non_null(strstr(text, "\"nodes\":[{\"type\":\"shape\",\"dims\":[2,3]},"));
  PFValue back, x, y;
  int xc, yc;
  assert_int_equal(from_json(text, &back), kPFObjectHandle);
  assert_pf_ok(PFArrayGetItem(back.v_handle, 0, &x, &xc));
  assert_pf_ok(PFArrayGetItem(back.v_handle, 1, &y, &yc));
  assert_ptr_equal(x.v_handle, y.v_handle);
  assert_ptr_not_equal(x.v_handle, s);
  PFObjectFree(back.v_handle);
  PFObjectFree(a);
  PFObjectFree(s);
  free(text);
}

static void test_list_holding_itself(void** state) {
  (void)state;
  PFObjectHandle l = list_of(NULL, NULL, 0);
  assert_pf_ok(PFListAppend(l, vi(1), kPFInt));
  assert_pf_ok(PFListAppend(l, vh(l), kPFObjectHandle));
  PFValue back, item;
  int code;
  assert_int_equal(round_trip(vh(l), kPFObjectHandle, &back), kPFObjectHandle);
  assert_pf_ok(PFListGetItem(back.v_handle, 1, &item, &code));
  assert_ptr_equal(item.v_handle, back.v_handle);
  PFObjectFree(item.v_handle); /* a new reference */
  /* A dict that holds an array that holds the dict: the dict is created
   * empty, the array built, the dict filled. */
  PFObjectHandle d;
  assert_pf_ok(PFDictCreate(NULL, NULL, NULL, NULL, 0, &d));
  PFValue dv = vh(d);
  int dc = kPFObjectHandle;
  PFObjectHandle a = array_of(&dv, &dc, 1);
  assert_pf_ok(PFDictSetItem(d, vs("a"), kPFStr, vh(a), kPFObjectHandle));
  PFValue dback, aback;
  round_trip(vh(a), kPFObjectHandle, &aback);
  round_trip(vh(d), kPFObjectHandle, &dback);
  /* Break the cycles so that everything is freed. */
  assert_pf_ok(PFListClear(l));
  assert_pf_ok(PFListClear(back.v_handle));
  assert_pf_ok(PFDictClear(d));
  PFValue inner;
  assert_pf_ok(PFArrayGetItem(aback.v_handle, 0, &inner, &code));
  assert_pf_ok(PFDictClear(inner.v_handle));
  assert_pf_ok(PFDictClear(dback.v_handle));
  PFObjectHandle all[] = {l, back.v_handle, d, a, aback.v_handle, dback.v_handle};
  for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) PFObjectFree(all[i]);
}

/* An array that holds a list that holds the array, entered through the
 * array: the array needs the list, which is created empty first. */
static void test_cycle_entered_through_an_array(void** state) {
  (void)state;
  PFObjectHandle m = list_of(NULL, NULL, 0);
  PFValue mv = vh(m);
  int mc = kPFObjectHandle;
  PFObjectHandle x = array_of(&mv, &mc, 1);
  PFValue xv = vh(x);
  PFObjectHandle a = array_of(&xv, &mc, 1);
  assert_pf_ok(PFListAppend(m, vh(a), kPFObjectHandle));
  PFValue back;
  round_trip(vh(x), kPFObjectHandle, &back);
  PFValue inner;
  int code;
  assert_pf_ok(PFArrayGetItem(back.v_handle, 0, &inner, &code));
  assert_pf_ok(PFListClear(inner.v_handle));
  assert_pf_ok(PFListClear(m));
  PFObjectFree(back.v_handle);
  PFObjectFree(x);
  PFObjectFree(a);
  PFObjectFree(m);
}

static void test_tensors(void** state) {
  (void)state;
  int64_t shape[2] = {2, 3};
  PFObjectHandle t;
  DLTensor* view;
  assert_pf_ok(PFTensorAlloc(2, shape, (DLDataType){kDLFloat, 32, 1}, 0, &t, &view));
  for (int i = 0; i < 6; ++i) ((float*)view->data)[i] = (float)i * 0.5f;
  round_trips_object(t);
  /* A borrowed DLTensor*, strided (the transpose), comes back compact. */
  int64_t tshape[2] = {3, 2}, strides[2] = {1, 3};
  DLTensor tr = *view;
  tr.shape = tshape;
  tr.strides = strides;
  PFValue back;
  assert_int_equal(round_trip(vh(&tr), kPFDLTensorHandle, &back), kPFObjectHandle);
  DLTensor* bt;
  assert_pf_ok(PFTensorGetDLTensor(back.v_handle, &bt));
  assert_null(bt->strides);
  assert_true(((float*)bt->data)[1] == 1.5f); /* [0][1] of the transpose is [1][0] */
  PFObjectFree(back.v_handle);
  /* A tensor on another device is refused. */
  DLTensor gpu = *view;
  gpu.device.device_type = kDLCUDA;
  const char* text;
  assert_pf_error(PFToJSON(vh(&gpu), kPFDLTensorHandle, &text, NULL), kPFErrValueError, "PFToJSON",
                  "root is a tensor on device type 2");
  PFObjectFree(t);
}

/* ---- registered instances ---- */
typedef struct {
  int64_t id;    /* read-only to hosts */
  double weight; /* writable */
  char* name;    /* writable */
  PFObjectHandle parent;
  PFObjectHandle children;
  int8_t small;
} Node;

typedef struct {
  Node base;
  PFByteArray* blob;
} Leaf;

static int node_init(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)codes, (void)ret, (void)res, (void)n;
  Node* self;
  if (PFObjectGetData(args[0].v_handle, (void**)&self) != 0) return -1;
  self->id = args[1].v_int64;
  return 0;
}

static uint32_t node_type(void) {
  static const PFFieldDesc fields[] = {
      PF_FIELD(Node, id, "int64", 0, NULL),
      PF_FIELD(Node, weight, "float64", kPFFieldWritable, NULL),
      PF_FIELD(Node, name, "str", kPFFieldWritable, NULL),
      PF_FIELD(Node, parent, "optional<obj<test_serialize.Node>>", kPFFieldWritable, NULL),
      PF_FIELD(Node, children, "list", kPFFieldWritable, NULL),
      PF_FIELD(Node, small, "int8", kPFFieldWritable, NULL),
  };
  static const PFMethodDesc methods[] = {{"__init__", node_init, NULL, NULL, 0, NULL}};
  static const PFObjectTypeDesc desc = {PF_OBJECT_TYPE_DESC_ABI,
                                        "test_serialize.Node",
                                        NULL,
                                        sizeof(Node),
                                        NULL,
                                        NULL,
                                        fields,
                                        PF_COUNTOF(fields),
                                        methods,
                                        1};
  uint32_t ix = 0;
  assert_pf_ok(PFObjectTypeRegister(&desc, &ix));
  return ix;
}

static uint32_t leaf_type(void) {
  node_type();
  static const PFFieldDesc fields[] = {PF_FIELD(Leaf, blob, "bytes", 0, NULL)};
  static const PFObjectTypeDesc desc = {PF_OBJECT_TYPE_DESC_ABI,
                                        "test_serialize.Leaf",
                                        "test_serialize.Node",
                                        sizeof(Leaf),
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

static PFObjectHandle new_node(uint32_t type, int64_t id, const char* name) {
  PFObjectHandle n;
  assert_pf_ok(PFObjectAlloc(type, &n));
  Node* d;
  assert_pf_ok(PFObjectGetData(n, (void**)&d));
  d->id = id;
  assert_pf_ok(PFObjectSetFieldByName(n, "name", vs(name), kPFStr));
  assert_pf_ok(PFObjectSetFieldByName(n, "weight", vf(0.25 * (double)id), kPFFloat));
  assert_pf_ok(PFObjectSetFieldByName(n, "children", vh(list_of(NULL, NULL, 0)), kPFObjectHandle));
  PFValue l;
  int c;
  assert_pf_ok(PFObjectGetFieldByName(n, "children", &l, &c));
  PFObjectFree(l.v_handle); /* the field holds it */
  return n;
}

static void adopt(PFObjectHandle parent, PFObjectHandle child) {
  assert_pf_ok(PFObjectSetFieldByName(child, "parent", vh(parent), kPFObjectHandle));
  PFValue l;
  int c;
  assert_pf_ok(PFObjectGetFieldByName(parent, "children", &l, &c));
  assert_pf_ok(PFListAppend(l.v_handle, vh(child), kPFObjectHandle));
}

static void orphan_all(PFObjectHandle n) {
  PFValue l;
  int c;
  assert_pf_ok(PFObjectGetFieldByName(n, "children", &l, &c));
  int64_t size;
  assert_pf_ok(PFListGetSize(l.v_handle, &size));
  for (int64_t i = 0; i < size; ++i) {
    PFValue child;
    assert_pf_ok(PFListGetItem(l.v_handle, i, &child, &c));
    assert_pf_ok(PFObjectSetFieldByName(child.v_handle, "parent", (PFValue){0}, kPFNull));
    PFObjectFree(child.v_handle);
  }
  assert_pf_ok(PFListClear(l.v_handle));
}

/* A tree with parent pointers: read-only fields, inherited fields, a
 * constructor that takes arguments (never run by PFFromJSON). */
static void test_instances(void** state) {
  (void)state;
  uint32_t nt = node_type(), lt = leaf_type();
  PFObjectHandle root = new_node(nt, 1, "root"), a = new_node(nt, 2, "a"),
                 leaf = new_node(lt, 3, "leaf");
  PFByteArray blob = {"\x01\x02", 2};
  Leaf* ld;
  assert_pf_ok(PFObjectGetData(leaf, (void**)&ld));
  ld->blob = PFMemAlloc(sizeof(PFByteArray) + 2);
  ld->blob->data = (const char*)(ld->blob + 1);
  ld->blob->size = 2;
  memcpy(ld->blob + 1, blob.data, 2);
  assert_pf_ok(PFObjectSetFieldByName(leaf, "small", vi(-7), kPFInt));
  adopt(root, a);
  adopt(a, leaf);
  char* text = to_json(vh(root), kPFObjectHandle);
  assert_non_null(strstr(text, "\"key\":\"test_serialize.Leaf\""));
  PFValue back;
  assert_int_equal(from_json(text, &back), kPFObjectHandle);
  assert_int_equal(equal(vh(root), kPFObjectHandle, back, kPFObjectHandle), 1);
  /* The read-only id came back, and the leaf's parent is the copy of a. */
  Node* rd;
  assert_pf_ok(PFObjectGetData(back.v_handle, (void**)&rd));
  assert_int_equal(rd->id, 1);
  PFValue kids, ca, cl, up;
  int c;
  assert_pf_ok(PFObjectGetFieldByName(back.v_handle, "children", &kids, &c));
  assert_pf_ok(PFListGetItem(kids.v_handle, 0, &ca, &c));
  assert_pf_ok(PFObjectGetFieldByName(ca.v_handle, "children", &kids, &c));
  assert_pf_ok(PFListGetItem(kids.v_handle, 0, &cl, &c));
  assert_pf_ok(PFObjectGetFieldByName(cl.v_handle, "parent", &up, &c));
  assert_ptr_equal(up.v_handle, ca.v_handle);
  uint32_t ix;
  assert_pf_ok(PFObjectGetTypeIndex(cl.v_handle, &ix));
  assert_int_equal(ix, lt);
  Leaf* bl;
  assert_pf_ok(PFObjectGetData(cl.v_handle, (void**)&bl));
  assert_int_equal(bl->blob->size, 2);
  assert_int_equal(bl->base.small, -7);
  orphan_all(a);
  orphan_all(root);
  orphan_all(ca.v_handle);
  orphan_all(back.v_handle);
  PFObjectFree(ca.v_handle);
  PFObjectFree(cl.v_handle);
  PFObjectFree(back.v_handle);
  PFObjectFree(root);
  PFObjectFree(a);
  PFObjectFree(leaf);
  free(text);
}

/* ---- accessor fields ---- */
typedef struct {
  PFObjectHandle child; /* at offset 0, where an accessor field has none */
  int64_t n;
} Computed;

/* A read-only accessor field: computed from the struct, stored nowhere. */
static int computed_twice(const void* data, PFValue* out, int* out_code) {
  out->v_int64 = 2 * ((const Computed*)data)->n;
  *out_code = kPFInt;
  return 0;
}

static uint32_t computed_type(void) {
  static const PFFieldDesc fields[] = {
      PF_FIELD(Computed, child, "object", kPFFieldWritable, NULL),
      PF_FIELD(Computed, n, "int64", kPFFieldWritable, NULL),
  };
  static const PFAccessorDesc accessors[] = {
      PF_ACCESSOR("twice", "int64", computed_twice, NULL, NULL),
  };
  static const PFObjectTypeDesc2 desc = {
      {PF_OBJECT_TYPE_DESC2_ABI, "test_serialize.Computed", NULL, sizeof(Computed), NULL, NULL,
       fields, PF_COUNTOF(fields), NULL, 0},
      accessors,
      PF_COUNTOF(accessors)};
  uint32_t ix = 0;
  assert_pf_ok(PFObjectTypeRegister(&desc.base, &ix));
  return ix;
}

static const char* const computed_doc =
    "{\"format\":\"packedfunc\",\"version\":1,\"root\":{\"ref\":0},\"nodes\":[{\"type\":"
    "\"object\",\"key\":\"test_serialize.Computed\",\"fields\":{\"child\":null,\"n\":4,"
    "\"twice\":%s}}%s]}";

/* A read-only accessor field is written (its getter's value) and read
 * back as a value of its type, but not stored: its getter computes it. A
 * document's value for it cannot write the struct. (Before: it was stored
 * at the accessor's offset, 0, over the field there: a copy lost its
 * child, and a document's "twice": 12345 became the child pointer, which
 * crashed the reader of the field.) */
static void test_read_only_accessor_fields_are_checked_not_stored(void** state) {
  (void)state;
  uint32_t ct = computed_type();
  PFObjectHandle parent, child;
  assert_pf_ok(PFObjectAlloc(ct, &parent));
  assert_pf_ok(PFObjectAlloc(ct, &child));
  assert_pf_ok(PFObjectSetFieldByName(parent, "child", vh(child), kPFObjectHandle));
  assert_pf_ok(PFObjectSetFieldByName(parent, "n", vi(21), kPFInt));
  assert_pf_ok(PFObjectSetFieldByName(child, "n", vi(5), kPFInt));
  char* text = to_json(vh(parent), kPFObjectHandle);
  assert_non_null(strstr(text, "\"twice\":42"));
  PFValue back, v;
  int c;
  assert_int_equal(from_json(text, &back), kPFObjectHandle);
  assert_int_equal(equal(vh(parent), kPFObjectHandle, back, kPFObjectHandle), 1);
  assert_pf_ok(PFObjectGetFieldByName(back.v_handle, "twice", &v, &c));
  assert_int_equal(v.v_int64, 42);
  assert_pf_ok(PFObjectGetFieldByName(back.v_handle, "child", &v, &c));
  assert_int_equal(c, kPFObjectHandle); /* borrowed from the field */
  PFObjectFree(back.v_handle);
  free(text);
  PFObjectFree(parent);
  PFObjectFree(child);

  /* A value the getter would not give is refused, naming both: the field
   * has no bytes to take it, and dropping it would lose what the document
   * says. */
  char doc[512];
  int code = -1;
  snprintf(doc, sizeof(doc), computed_doc, "12345", "");
  assert_pf_error(PFFromJSON(doc, strlen(doc), &back, &code), kPFErrValueError, "node 0",
                  "field 'twice' of test_serialize.Computed is read-only",
                  "the rebuilt instance has 8, the document 12345");
  assert_int_equal(code, -1);
  /* A value of another type is refused as the field's type refuses it;
   * a node that only it refers to is not built and leaked. */
  snprintf(doc, sizeof(doc), computed_doc, "\"x\"", "");
  assert_pf_error(PFFromJSON(doc, strlen(doc), &back, &code), kPFErrTypeError, "node 0",
                  "field 'twice' of test_serialize.Computed");
  snprintf(doc, sizeof(doc), computed_doc, "{\"ref\":1}",
           ",{\"type\":\"list\",\"items\":[{\"ref\":1}]}");
  assert_pf_error(PFFromJSON(doc, strlen(doc), &back, &code), kPFErrTypeError, "node 0",
                  "field 'twice' of test_serialize.Computed");
  assert_int_equal(code, -1);
}

/* ---- what cannot be written ---- */
static void test_what_cannot_be_written(void** state) {
  (void)state;
  const char* text = NULL;
  PFFunctionHandle f;
  assert_pf_ok(PFFuncCreateFromCFunc(pf_test_echo, NULL, NULL, &f));
  assert_pf_error(PFToJSON(vh(f), kPFFuncHandle, &text, NULL), kPFErrTypeError, "PFToJSON",
                  "root is of type function, which JSON cannot hold");
  PFValue v[2] = {vi(1), vh(f)};
  int c[2] = {kPFInt, kPFFuncHandle};
  PFObjectHandle l = list_of(v, c, 2);
  PFValue k = vs("f"), lv = vh(l);
  int kc = kPFStr, lc = kPFObjectHandle;
  PFObjectHandle m;
  assert_pf_ok(PFMapCreate(&k, &kc, &lv, &lc, 1, &m));
  assert_pf_error(PFToJSON(vh(m), kPFObjectHandle, &text, NULL), kPFErrTypeError,
                  "root{value of entry 0}[1] is of type function");
  assert_pf_error(PFToJSON(vh(&k), kPFOpaqueHandle, &text, NULL), kPFErrTypeError,
                  "root is of type handle");
  assert_pf_error(PFToJSON(vi(1), kPFExtBegin, &text, NULL), kPFErrTypeError,
                  "root is of type extension code 64");
  uint32_t nt = node_type();
  PFObjectHandle n = new_node(nt, 9, "n");
  PFObjectHandle boxed;
  assert_pf_ok(PFObjectCreateBoxed(&k, NULL, &boxed));
  PFValue kids;
  assert_pf_ok(PFObjectGetFieldByName(n, "children", &kids, &kc));
  assert_pf_ok(PFListAppend(kids.v_handle, vh(boxed), kPFObjectHandle));
  assert_pf_error(PFToJSON(vh(n), kPFObjectHandle, &text, NULL), kPFErrTypeError,
                  "root.children[0] is of type boxed");
  assert_pf_error(PFToJSON(vi(1), kPFInt, NULL, NULL), kPFErrTypeError, "PFToJSON", "'out'");
  assert_pf_error(PFToJSON(vs(NULL), kPFStr, &text, NULL), kPFErrTypeError, "argument 0");
  assert_pf_error(PFToJSON((PFValue){.v_type = {kDLFloat, 32, 0}}, kPFDataType, &text, NULL),
                  kPFErrValueError);
  assert_null(text);
  PFObjectFree(n);
  PFObjectFree(boxed);
  PFObjectFree(m);
  PFObjectFree(l);
  PFFuncFree(f);
}

static void test_deep_nesting_is_refused(void** state) {
  (void)state;
  PFObjectHandle inner = array_of(NULL, NULL, 0);
  for (int i = 0; i < PF_JSON_MAX_DEPTH; ++i) {
    PFValue v = vh(inner);
    int c = kPFObjectHandle;
    PFObjectHandle outer = array_of(&v, &c, 1);
    PFObjectFree(inner);
    inner = outer;
  }
  const char* text;
  assert_pf_error(PFToJSON(vh(inner), kPFObjectHandle, &text, NULL), kPFErrValueError,
                  "nested deeper than 1024");
  PFObjectFree(inner);
  /* A document of a chain of arrays one deeper than the bound, each
   * referring to the next node: each needs the next built first. */
  size_t cap = (size_t)(PF_JSON_MAX_DEPTH + 2) * 48 + 128, k = 0;
  char* doc = malloc(cap);
  k += (size_t)snprintf(doc + k, cap - k,
                        "{\"format\":\"packedfunc\",\"version\":1,\"root\":{\"ref\":0},"
                        "\"nodes\":[");
  for (int i = 0; i <= PF_JSON_MAX_DEPTH; ++i)
    k += (size_t)snprintf(doc + k, cap - k, "%s{\"type\":\"array\",\"items\":[%s%d%s]}",
                          i ? "," : "", i < PF_JSON_MAX_DEPTH ? "{\"ref\":" : "", i + 1,
                          i < PF_JSON_MAX_DEPTH ? "}" : "");
  snprintf(doc + k, cap - k, "]}");
  PFValue out;
  int code;
  assert_pf_error(PFFromJSON(doc, strlen(doc), &out, &code), kPFErrValueError,
                  "nested deeper than 1024");
  free(doc);
}

/* ---- hostile documents ---- */
#define DOC(root, nodes) \
  "{\"format\":\"packedfunc\",\"version\":1,\"root\":" root ",\"nodes\":[" nodes "]}"

static void refused(const char* doc, const char* kind, const char* what) {
  PFValue out = vi(77);
  int code = 77;
  assert_pf_error(PFFromJSON(doc, strlen(doc), &out, &code), kind, "PFFromJSON", what);
  assert_int_equal(code, 77);
  assert_int_equal(out.v_int64, 77);
}

static void test_hostile_documents(void** state) {
  (void)state;
  node_type();
  refused("", kPFErrValueError, "not JSON: line 1, column 0");
  refused("{\"format\":", kPFErrValueError, "not JSON");
  refused("[1]", kPFErrValueError, "a document is an object of exactly");
  refused("{\"format\":\"packedfunc\",\"version\":1,\"root\":1,\"nodes\":[],\"x\":1}",
          kPFErrValueError, "a document is an object of exactly");
  refused("{\"format\":\"other\",\"version\":1,\"root\":1,\"nodes\":[]}", kPFErrValueError,
          "\"format\" must be \"packedfunc\"");
  refused("{\"format\":\"packedfunc\",\"version\":2,\"root\":1,\"nodes\":[]}", kPFErrValueError,
          "\"version\" 2 is not one this library reads");
  refused("{\"format\":\"packedfunc\",\"version\":\"1\",\"root\":1,\"nodes\":[]}", kPFErrValueError,
          "\"version\"");
  refused("{\"format\":\"packedfunc\",\"version\":1,\"root\":1,\"nodes\":{}}", kPFErrValueError,
          "\"nodes\" must be an array");
  /* Duplicate members are refused (json_parse.h). */
  refused(
      "{\"format\":\"packedfunc\",\"format\":\"packedfunc\",\"version\":1,\"root\":1,"
      "\"nodes\":[]}",
      kPFErrValueError, "duplicate object key");
  /* Values of the wrong shape. */
  refused(DOC("[1]", ""), kPFErrValueError, "root: a JSON array is not a value");
  refused(DOC("{\"int\":\"12x\"}", ""), kPFErrValueError, "decimal text of an int64");
  refused(DOC("{\"int\":\"99999999999999999999\"}", ""), kPFErrValueError, "int64");
  refused(DOC("{\"int\":5}", ""), kPFErrValueError, "int64");
  refused(DOC("{\"float\":\"huge\"}", ""), kPFErrValueError, "\"nan\", \"inf\"");
  refused(DOC("{\"bytes\":\"abc\"}", ""), kPFErrValueError, "not padded base64");
  refused(DOC("{\"bytes\":\"a=bc\"}", ""), kPFErrValueError, "not padded base64");
  refused(DOC("{\"str64\":\"AA==\"}", ""), kPFErrValueError, "no NUL");
  refused(DOC("{\"dtype\":\"floaty\"}", ""), kPFErrValueError, "data type");
  refused(DOC("{\"device\":[1]}", ""), kPFErrValueError, "[TYPE, ID]");
  refused(DOC("{\"device\":[1, 4294967296]}", ""), kPFErrValueError, "[TYPE, ID]");
  refused(DOC("{\"what\":1}", ""), kPFErrValueError, "unknown tag \"what\"");
  refused(DOC("{\"ref\":0,\"int\":\"1\"}", ""), kPFErrValueError, "exactly one member");
  refused(DOC("\"a\\u0000b\"", ""), kPFErrValueError, "not JSON");
  /* References: dangling, negative, not an int. */
  refused(DOC("{\"ref\":0}", ""), kPFErrValueError, "root: \"ref\" must be the index of a node");
  refused(DOC("{\"ref\":1}", "{\"type\":\"list\",\"items\":[]}"), kPFErrValueError,
          "\"ref\" must be the index");
  refused(DOC("{\"ref\":-1}", "{\"type\":\"list\",\"items\":[]}"), kPFErrValueError,
          "\"ref\" must be the index");
  refused(DOC("{\"ref\":\"0\"}", "{\"type\":\"list\",\"items\":[]}"), kPFErrValueError,
          "\"ref\" must be the index");
  refused(DOC("{\"ref\":0}", "{\"type\":\"list\",\"items\":[{\"ref\":5}]}"), kPFErrValueError,
          "node 0 'items'[0]: \"ref\" must be the index");
  /* Nodes of the wrong shape. */
  refused(DOC("{\"ref\":0}", "[]"), kPFErrValueError, "node 0: a node is an object");
  refused(DOC("{\"ref\":0}", "{\"type\":\"set\",\"items\":[]}"), kPFErrValueError,
          "unknown node type \"set\"");
  refused(DOC("{\"ref\":0}", "{\"type\":\"list\"}"), kPFErrValueError,
          "a list node needs \"items\"");
  refused(DOC("{\"ref\":0}", "{\"type\":\"list\",\"items\":[],\"more\":1}"), kPFErrValueError,
          "a list node has 3 members, not 2");
  refused(DOC("{\"ref\":0}", "{\"type\":\"array\",\"items\":{}}"), kPFErrValueError,
          "node 0 'items': a array node's \"items\" must be an array");
  refused(DOC("{\"ref\":0}", "{\"type\":\"map\",\"entries\":[[1]]}"), kPFErrValueError,
          "node 0 'entries'[0]: an entry is [key, value]");
  refused(DOC("{\"ref\":0}", "{\"type\":\"map\",\"entries\":[[1,2],[1,3]]}"), kPFErrValueError,
          "node 0: PFMapCreate: key 1 (1) repeats key 0");
  refused(DOC("{\"ref\":0}", "{\"type\":\"shape\",\"dims\":[1,\"2\"]}"), kPFErrValueError,
          "node 0 'dims'[1]: expected an int");
  /* Tensors whose data lies about its length. */
  refused(DOC("{\"ref\":0}",
              "{\"type\":\"tensor\",\"dtype\":\"float32\",\"shape\":[2],\"data\":\"AAAA\"}"),
          kPFErrValueError, "3 bytes where dtype and shape need 8");
  refused(DOC("{\"ref\":0}",
              "{\"type\":\"tensor\",\"dtype\":\"float32\",\"shape\":[1099511627776,"
              "1099511627776],\"data\":\"\"}"),
          kPFErrValueError, "too large");
  refused(DOC("{\"ref\":0}",
              "{\"type\":\"tensor\",\"dtype\":\"float32\",\"shape\":[-2],\"data\":\"\"}"),
          kPFErrValueError, "a negative dim");
  refused(DOC("{\"ref\":0}", "{\"type\":\"tensor\",\"dtype\":\"f\",\"shape\":[],\"data\":\"\"}"),
          kPFErrValueError, "node 0 'dtype': not a data type");
  /* An array or map that holds itself, directly or through another. */
  refused(DOC("{\"ref\":0}", "{\"type\":\"array\",\"items\":[{\"ref\":0}]}"), kPFErrValueError,
          "node 0 holds itself through arrays, maps");
  refused(DOC("{\"ref\":0}",
              "{\"type\":\"array\",\"items\":[{\"ref\":1}]},"
              "{\"type\":\"map\",\"entries\":[[1,{\"ref\":0}]]}"),
          kPFErrValueError, "holds itself");
  /* A node that nothing reaches, or a cycle of its own. */
  refused(DOC("1", "{\"type\":\"list\",\"items\":[{\"ref\":0}]}"), kPFErrValueError,
          "node 0: not reachable from the root");
  /* Instances: unknown keys, missing and unknown fields, wrong field
   * values; each half-built graph is freed (ASan and valgrind check). */
  refused(DOC("{\"ref\":0}", "{\"type\":\"object\",\"key\":\"nobody.Knows\",\"fields\":{}}"),
          kPFErrValueError, "no object type is registered under the key 'nobody.Knows'");
  refused(DOC("{\"ref\":0}", "{\"type\":\"object\",\"key\":7,\"fields\":{}}"), kPFErrValueError,
          "\"key\" must be a string");
  refused(DOC("{\"ref\":0}", "{\"type\":\"object\",\"key\":\"test_serialize.Node\",\"fields\":{}}"),
          kPFErrValueError, "no value for field 'id' of test_serialize.Node");
  refused(DOC("{\"ref\":1}",
              "{\"type\":\"list\",\"items\":[{\"ref\":1}]},"
              "{\"type\":\"object\",\"key\":\"test_serialize.Node\",\"fields\":{"
              "\"id\":1,\"weight\":0.5,\"name\":null,\"parent\":{\"ref\":1},"
              "\"children\":{\"ref\":0},\"small\":1,\"extra\":2}}"),
          kPFErrValueError, "test_serialize.Node has no field 'extra'");
  refused(DOC("{\"ref\":1}",
              "{\"type\":\"list\",\"items\":[{\"ref\":1}]},"
              "{\"type\":\"object\",\"key\":\"test_serialize.Node\",\"fields\":{"
              "\"id\":1,\"weight\":0.5,\"name\":null,\"parent\":{\"ref\":1},"
              "\"children\":{\"ref\":0},\"small\":1000}}"),
          kPFErrValueError, "small");
  refused(DOC("{\"ref\":1}",
              "{\"type\":\"list\",\"items\":[{\"ref\":1}]},"
              "{\"type\":\"object\",\"key\":\"test_serialize.Node\",\"fields\":{"
              "\"id\":\"one\",\"weight\":0.5,\"name\":null,\"parent\":{\"ref\":1},"
              "\"children\":{\"ref\":0},\"small\":1}}"),
          kPFErrTypeError, "field 'id'");
  refused(DOC("{\"ref\":0}",
              "{\"type\":\"object\",\"key\":\"test_serialize.Node\",\"fields\":{"
              "\"id\":1,\"weight\":0.5,\"name\":null,\"parent\":{\"ref\":0},"
              "\"children\":{\"ref\":0},\"small\":1}}"),
          kPFErrTypeError, "children");
  /* NULL arguments and an over-long length. */
  PFValue out;
  int code;
  assert_pf_error(PFFromJSON(NULL, 3, &out, &code), kPFErrTypeError, "'text'");
  assert_pf_error(PFFromJSON("1", 1, NULL, &code), kPFErrTypeError, "'out'");
  assert_pf_error(PFFromJSON("1", 1, &out, NULL), kPFErrTypeError, "'out_code'");
  assert_pf_error(PFFromJSON("1", PF_JSON_MAX_SIZE + 1, &out, &code), kPFErrValueError,
                  "longer than PF_JSON_MAX_SIZE");
}

/* The parser is strict (RFC 8259) and bounded, whatever the text: a
 * value, or a ValueError naming where the text stops being JSON. */
static void read_root(const char* root, PFValue* out, int* code) {
  char doc[256];
  snprintf(doc, sizeof(doc), DOC("%s", ""), root);
  assert_pf_ok(PFFromJSON(doc, strlen(doc), out, code));
}

static void test_strict_json(void** state) {
  (void)state;
  PFValue v;
  int code;
  /* Escapes: a surrogate pair is one code point; a lone surrogate and
   * \u0000 are not a str. */
  read_root("\"\\ud83d\\ude00\\u00e9\\/\\t\"", &v, &code);
  assert_int_equal(code, kPFStr);
  assert_string_equal(v.v_str, "\xf0\x9f\x98\x80\xc3\xa9/\t");
  refused(DOC("\"a\\ud800\"", ""), kPFErrValueError, "a high surrogate not followed by a low one");
  refused(DOC("\"\\ud800\\u0041\"", ""), kPFErrValueError, "high surrogate");
  refused(DOC("\"\\udc00\"", ""), kPFErrValueError, "a low surrogate without a high one");
  refused(DOC("\"\\u12\"", ""), kPFErrValueError, "four hex digits");
  refused(DOC("\"\\x\"", ""), kPFErrValueError, "unknown escape");
  refused(DOC("\"a\tb\"", ""), kPFErrValueError, "control character");
  refused(DOC("\"\xc0\xaf\"", ""), kPFErrValueError, "not UTF-8");
  refused(DOC("\"\xed\xa0\x80\"", ""), kPFErrValueError, "not UTF-8");
  refused("{\"format\":\"packedf", kPFErrValueError, "without its closing quote");
  /* Numbers: exact int64 and float64, or refused. */
  read_root("-9223372036854775808", &v, &code);
  assert_int_equal(code, kPFInt);
  assert_true(v.v_int64 == INT64_MIN);
  read_root("9223372036854775807", &v, &code);
  assert_true(v.v_int64 == INT64_MAX);
  read_root("-0", &v, &code);
  assert_int_equal(code, kPFInt);
  assert_int_equal(v.v_int64, 0);
  read_root("0.1", &v, &code);
  assert_int_equal(code, kPFFloat);
  assert_true(v.v_float64 == 0.1);
  read_root("1E-400", &v, &code);
  assert_true(v.v_float64 == 0.0);
  read_root("-1.7976931348623157e308", &v, &code);
  assert_true(v.v_float64 == -1.7976931348623157e308);
  refused(DOC("9223372036854775808", ""), kPFErrValueError, "an integer outside int64");
  refused(DOC("-9223372036854775809", ""), kPFErrValueError, "an integer outside int64");
  refused(DOC("1e400", ""), kPFErrValueError, "outside float64's range");
  static const char* const not_numbers[] = {"01", "1.", ".5", "-", "1e", "+1", "1.e5", "0x10"};
  for (size_t i = 0; i < sizeof(not_numbers) / sizeof(not_numbers[0]); ++i) {
    char doc[128];
    snprintf(doc, sizeof(doc), DOC("%s", ""), not_numbers[i]);
    refused(doc, kPFErrValueError, "not JSON");
  }
  /* Structure, with the place named. */
  refused("{\"format\":\"packedfunc\",\n  \"version\":1,,", kPFErrValueError,
          "not JSON: line 2, column 15 (byte 39): expected a string (an object's key)");
  refused(DOC("1", "") " x", kPFErrValueError, "more text after the value");
  refused(DOC("[1,]", ""), kPFErrValueError, "not JSON");
  refused(DOC("[1 2]", ""), kPFErrValueError, "expected ',' or ']'");
  refused(DOC("{\"a\" 1}", ""), kPFErrValueError, "expected ':'");
  refused(DOC("tru", ""), kPFErrValueError, "not a value");
  refused("{\"format\":\"packedfunc\"", kPFErrValueError, "expected ',' or '}'");
  refused(DOC("nul", ""), kPFErrValueError, "not a value");
  /* A key twice, in a small object and in a large one (sorted). */
  refused(DOC("{\"ref\":0,\"ref\":0}", ""), kPFErrValueError, "duplicate object key");
  refused(
      DOC("{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"e\":0}", ""),
      kPFErrValueError, "duplicate object key");
  refused(
      DOC("{\"a\":1,\"b\":2,\"c\":3,\"d\":4,\"e\":5,\"f\":6,\"g\":7,\"h\":8,\"i\":9,\"j\":0}", ""),
      kPFErrValueError, "exactly one member, not 10");
  /* Nesting: no recursion on it, and a bound. */
  size_t n = 100000;
  char* doc = malloc(2 * n + 1);
  memset(doc, '[', n);
  memset(doc + n, ']', n);
  doc[2 * n] = '\0';
  refused(doc, kPFErrValueError, "more than 2048 arrays and objects nested");
  doc[2048] = '\0';
  memset(doc + 1024, ']', 1024);
  refused(doc, kPFErrValueError, "a document is an object of exactly");
  free(doc);
}

/* More nodes than PF_JSON_MAX_NODES are refused before any is built. */
/* kPFJSONRefuseCycles: a document whose nodes form a cycle, or reach one,
 * is refused before anything is built; sharing without a cycle is read. */
static void test_refuse_cycles(void** state) {
  (void)state;
  node_type();
  static const char* const cycles[] = {
      DOC("{\"ref\":0}", "{\"type\":\"list\",\"items\":[{\"ref\":0}]}"), /* itself */
      DOC("{\"ref\":2}", /* list -> dict -> list, reached through an array */
          "{\"type\":\"list\",\"items\":[{\"ref\":1}]},"
          "{\"type\":\"dict\",\"entries\":[[\"k\",{\"ref\":0}]]},"
          "{\"type\":\"array\",\"items\":[{\"ref\":0}]}"),
      DOC("{\"ref\":1}", /* an instance whose List field holds it */
          "{\"type\":\"list\",\"items\":[{\"ref\":1}]},"
          "{\"type\":\"object\",\"key\":\"test_serialize.Node\",\"fields\":{"
          "\"id\":1,\"weight\":0.5,\"name\":null,\"parent\":null,"
          "\"children\":{\"ref\":0},\"small\":1}}"),
  };
  for (size_t i = 0; i < sizeof(cycles) / sizeof(cycles[0]); ++i) {
    PFValue out = vi(77);
    int code = 77;
    assert_pf_error(PFFromJSONEx(cycles[i], strlen(cycles[i]), kPFJSONRefuseCycles, &out, &code),
                    kPFErrValueError, "PFFromJSONEx: node ",
                    "on a cycle, which kPFJSONRefuseCycles refuses");
    assert_int_equal(code, 77);
    assert_int_equal(out.v_int64, 77);
    /* Without the flag, the same document is read (then taken apart). */
    assert_pf_ok(PFFromJSONEx(cycles[i], strlen(cycles[i]), 0, &out, &code));
    assert_int_equal(code, kPFObjectHandle);
    PFObjectHandle list = out.v_handle;
    if (i == 1) {
      PFValue item;
      int ic;
      assert_pf_ok(PFArrayGetItem(out.v_handle, 0, &item, &ic));
      list = item.v_handle;
    } else if (i == 2) {
      PFValue f;
      int fc;
      assert_pf_ok(PFObjectGetFieldByName(out.v_handle, "children", &f, &fc));
      list = f.v_handle;
    }
    assert_pf_ok(PFListClear(list));
    PFObjectFree(out.v_handle);
  }
  /* Sharing without a cycle: one Shape twice. */
  const char* shared = DOC("{\"ref\":1}",
                           "{\"type\":\"shape\",\"dims\":[2]},"
                           "{\"type\":\"list\",\"items\":[{\"ref\":0},{\"ref\":0}]}");
  PFValue out, x, y;
  int code, xc, yc;
  assert_pf_ok(PFFromJSONEx(shared, strlen(shared), kPFJSONRefuseCycles, &out, &code));
  assert_pf_ok(PFListGetItem(out.v_handle, 0, &x, &xc));
  assert_pf_ok(PFListGetItem(out.v_handle, 1, &y, &yc));
  assert_ptr_equal(x.v_handle, y.v_handle);
  PFObjectFree(x.v_handle);
  PFObjectFree(y.v_handle);
  PFObjectFree(out.v_handle);
  /* An unknown flag. */
  assert_pf_error(PFFromJSONEx(shared, strlen(shared), 1u << 7, &out, &code), kPFErrValueError,
                  "PFFromJSONEx: unknown flags 0x80");
}

static void test_too_many_nodes(void** state) {
  (void)state;
  const char* head = "{\"format\":\"packedfunc\",\"version\":1,\"root\":1,\"nodes\":[";
  size_t n = (size_t)PF_JSON_MAX_NODES + 1, cap = strlen(head) + n * 3 + 8;
  char* doc = malloc(cap);
  size_t k = strlen(head);
  memcpy(doc, head, k);
  for (size_t i = 0; i < n; ++i) memcpy(doc + k + 3 * i, i ? ",{}" : "{} ", 3);
  memcpy(doc + k + 3 * n, "]}", 3);
  refused(doc, kPFErrValueError, "more than PF_JSON_MAX_NODES");
  free(doc);
  /* More JSON objects and arrays than PF_JSON_MAX_CONTAINERS: refused
   * before parsing, so without the memory a parse would take. */
  n = (size_t)PF_JSON_MAX_CONTAINERS + 1;
  doc = malloc(n + 1);
  memset(doc, '[', n);
  doc[n] = '\0';
  refused(doc, kPFErrValueError, "more than PF_JSON_MAX_CONTAINERS");
  free(doc);
}

/* A document with many keys in one object and a long text still costs
 * only its size: a map of 100,000 entries reads back whole. */
static void test_many_entries(void** state) {
  (void)state;
  enum { N = 100000 };
  PFValue* k = malloc(N * sizeof(PFValue));
  int* c = malloc(N * sizeof(int));
  for (int i = 0; i < N; ++i) k[i] = vi(i), c[i] = kPFInt;
  PFObjectHandle d;
  assert_pf_ok(PFDictCreate(k, c, k, c, N, &d));
  round_trips_object(d);
  PFObjectFree(d);
  free(k);
  free(c);
}

/* A str or bytes result lives in the thread's return storage; the text
 * may itself be there. */
/* The document's exact text, kept byte for byte as the format's first
 * writer (jansson) wrote it: the tests of other programs compare texts. */
static void assert_text(PFValue v, int code, const char* root, const char* nodes) {
  char want[1024];
  snprintf(want, sizeof(want),
           "{\"format\":\"packedfunc\",\"version\":%d,\"root\":%s,\"nodes\":[%s]}",
           PF_JSON_FORMAT_VERSION, root, nodes);
  char* got = to_json(v, code);
  assert_string_equal(got, want);
  free(got);
}

static void test_exact_text(void** state) {
  (void)state;
  assert_text(vs("a\x01\x1f\x7f/\"\\\t\b\f\r\n\xc3\xa9 \xf0\x9f\x98\x80"), kPFStr,
              "\"a\\u0001\\u001F\x7f/\\\"\\\\\\t\\b\\f\\r\\n\xc3\xa9 \xf0\x9f\x98\x80\"", "");
  /* Not UTF-8: overlong, a surrogate, past U+10FFFF, cut short. */
  assert_text(vs("\xc0\xaf"), kPFStr, "{\"str64\":\"wK8=\"}", "");
  assert_text(vs("\xed\xa0\x80"), kPFStr, "{\"str64\":\"7aCA\"}", "");
  assert_text(vs("\xf4\x90\x80\x80"), kPFStr, "{\"str64\":\"9JCAgA==\"}", "");
  assert_text(vs("ok\xe2\x82"), kPFStr, "{\"str64\":\"b2vigg==\"}", "");
  static const struct {
    double x;
    const char* text;
  } floats[] = {{1e20, "1e20"},
                {1e-5, "1.0000000000000001e-5"},
                {-0.0, "-0.0"},
                {5.0, "5.0"},
                {1e16, "10000000000000000.0"},
                {0.1, "0.10000000000000001"},
                {-1.5e300, "-1.5000000000000001e300"},
                {2.5e-300, "2.5e-300"},
                {NAN, "{\"float\":\"nan\"}"},
                {-INFINITY, "{\"float\":\"-inf\"}"}};
  for (size_t i = 0; i < sizeof(floats) / sizeof(floats[0]); ++i)
    assert_text(vf(floats[i].x), kPFFloat, floats[i].text, "");
  static const struct {
    int64_t x;
    const char* text;
  } ints[] = {{0, "0"},
              {-7, "-7"},
              {9007199254740992, "9007199254740992"},
              {-9007199254740992, "-9007199254740992"},
              {9007199254740993, "{\"int\":\"9007199254740993\"}"},
              {INT64_MIN, "{\"int\":\"-9223372036854775808\"}"}};
  for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); ++i)
    assert_text(vi(ints[i].x), kPFInt, ints[i].text, "");
  PFByteArray bytes = {"a\0b\xff", 4};
  assert_text(vh(&bytes), kPFBytes, "{\"bytes\":\"YQBi/w==\"}", "");
  assert_text((PFValue){.v_type = {kDLFloat, 32, 4}}, kPFDataType, "{\"dtype\":\"float32x4\"}", "");
  assert_text((PFValue){.v_device = {kDLCUDA, 3}}, kPFDevice, "{\"device\":[2,3]}", "");
  /* A list holding itself (a reference to a node still being written) and
   * another list twice. */
  PFObjectHandle inner = list_of(NULL, NULL, 0), outer = list_of(NULL, NULL, 0);
  PFValue items[] = {vh(outer), vh(inner), vh(inner)};
  int codes[] = {kPFObjectHandle, kPFObjectHandle, kPFObjectHandle};
  assert_pf_ok(PFListExtend(outer, items, codes, 3));
  assert_text(vh(outer), kPFObjectHandle, "{\"ref\":1}",
              "{\"type\":\"list\",\"items\":[]},"
              "{\"type\":\"list\",\"items\":[{\"ref\":1},{\"ref\":0},{\"ref\":0}]}");
  PFListClear(outer);
  PFObjectFree(outer);
  PFObjectFree(inner);
}

/* The paths that make a round trip cheap decide by position and size: a
 * string is scanned eight bytes at a time while eight are left, an int is
 * written two digits a step, a node's values sit on the stack up to 8
 * (else on the heap), the table of nodes met grows while a node is being
 * written. Each boundary, both sides of it. */
static void test_scan_and_size_boundaries(void** state) {
  (void)state;
  /* A special byte at every place of strings of 0 to 19 bytes: a decoded
   * escape, an escaped quote, a 2-byte UTF-8 sequence, DEL (plain); and a
   * raw control byte, refused at its own byte. */
  static const struct {
    const char *text, *decoded;
  } specials[] = {{"\\n", "\n"}, {"\\\"", "\""}, {"\xc3\xa9", "\xc3\xa9"}, {"\x7f", "\x7f"}};
  const size_t head = strlen(DOC("", "")) - strlen(",\"nodes\":[]}");
  for (size_t len = 1; len < 20; ++len) {
    for (size_t at = 0; at < len; ++at) {
      char text[64], want[64], root[80], doc[256];
      for (size_t k = 0; k < sizeof(specials) / sizeof(specials[0]); ++k) {
        snprintf(text, sizeof(text), "%.*s%s%.*s", (int)at, "abcdefghijklmnopqrs", specials[k].text,
                 (int)(len - at - 1), "ABCDEFGHIJKLMNOPQRS");
        snprintf(want, sizeof(want), "%.*s%s%.*s", (int)at, "abcdefghijklmnopqrs",
                 specials[k].decoded, (int)(len - at - 1), "ABCDEFGHIJKLMNOPQRS");
        snprintf(root, sizeof(root), "\"%s\"", text);
        PFValue v;
        int code;
        read_root(root, &v, &code);
        assert_int_equal(code, kPFStr);
        assert_string_equal(v.v_str, want);
        assert_round_trips(vs(want), kPFStr);
      }
      snprintf(root, sizeof(root), "\"%.*s\x01%.*s\"", (int)at, "abcdefghijklmnopqrs",
               (int)(len - at - 1), "ABCDEFGHIJKLMNOPQRS");
      snprintf(doc, sizeof(doc), DOC("%s", ""), root);
      char where[64];
      snprintf(where, sizeof(where), "(byte %zu): a control character", head + 2 + at);
      refused(doc, kPFErrValueError, where);
    }
  }
  /* A string that the text cuts short, with fewer than eight bytes left
   * at each cut, and more. */
  const char cut[] = DOC("\"abcdefghijklmnop\"", "");
  PFValue out;
  int code;
  for (size_t n = head + 2; n < head + 18; ++n)
    assert_pf_error(PFFromJSON(cut, n, &out, &code), kPFErrValueError, "PFFromJSON",
                    "a string without its closing quote");
  /* Ints of every length, both signs, written and read exactly; 18 digits
   * read without the overflow check, 20 refused. */
  int64_t x = 1;
  for (int digits = 1; digits <= 19; ++digits, x = digits < 19 ? x * 10 : x) {
    int64_t edge[] = {x, x - 1, -x, 1 - x, digits == 19 ? INT64_MAX : x * 10 - 1};
    for (size_t k = 0; k < sizeof(edge) / sizeof(edge[0]); ++k) {
      char want[48];
      int exact = edge[k] >= -9007199254740992 && edge[k] <= 9007199254740992;
      snprintf(want, sizeof(want), exact ? "%lld" : "{\"int\":\"%lld\"}", (long long)edge[k]);
      assert_text(vi(edge[k]), kPFInt, want, "");
      snprintf(want, sizeof(want), "%lld", (long long)edge[k]);
      PFValue v;
      read_root(want, &v, &code);
      assert_int_equal(code, kPFInt);
      assert_true(v.v_int64 == edge[k]);
    }
  }
  read_root("-999999999999999999", &out, &code);
  assert_true(out.v_int64 == -999999999999999999);
  refused(DOC("10000000000000000000", ""), kPFErrValueError, "an integer outside int64");
  refused(DOC("-10000000000000000000", ""), kPFErrValueError, "an integer outside int64");
  /* Nodes of 7 to 9 values (items, or pairs' keys and values), dims. */
  PFValue v[9], k[9];
  int c[9];
  for (int i = 0; i < 9; ++i) v[i] = vi(i * 11), k[i] = vi(-i), c[i] = kPFInt;
  for (int n = 3; n <= 9; ++n) {
    PFObjectHandle a = array_of(v, c, n), l = list_of(v, c, n), m, d, shape;
    assert_pf_ok(PFMapCreate(k, c, v, c, n, &m));
    assert_pf_ok(PFDictCreate(k, c, v, c, n, &d));
    int64_t dims[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    assert_pf_ok(PFShapeCreate(dims, n, &shape));
    PFObjectHandle all[] = {a, l, m, d, shape};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); ++i) {
      round_trips_object(all[i]);
      PFObjectFree(all[i]);
    }
  }
  refused(DOC("{\"ref\":0}", "{\"type\":\"shape\",\"dims\":[1,2,3,4,5,6,7,8,\"9\"]}"),
          kPFErrValueError, "node 0 'dims'[8]: expected an int");
  /* A root longer than the room kept before the nodes' text for the
   * document's head: the document is put together by a copy instead. */
  char long_str[301], long_root[304];
  memset(long_str, 'x', 300);
  long_str[300] = '\0';
  snprintf(long_root, sizeof(long_root), "\"%s\"", long_str);
  assert_text(vs(long_str), kPFStr, long_root, "");
  assert_round_trips(vs(long_str), kPFStr);
  /* 1500 arrays and the first again after them: the table grows while the
   * outer array is written, and the last item still refers to node 0. */
  enum { M = 1500 };
  PFValue* items = malloc((M + 1) * sizeof(PFValue));
  int* codes = malloc((M + 1) * sizeof(int));
  assert_non_null(items);
  assert_non_null(codes);
  for (int i = 0; i < M; ++i) {
    PFValue one = vi(i);
    int ic = kPFInt;
    items[i] = vh(array_of(&one, &ic, 1));
    codes[i] = kPFObjectHandle;
  }
  items[M] = items[0];
  codes[M] = kPFObjectHandle;
  PFObjectHandle outer = array_of(items, codes, M + 1);
  PFValue back;
  round_trip(vh(outer), kPFObjectHandle, &back);
  PFValue first, last;
  int fc, lc;
  assert_pf_ok(PFArrayGetItem(back.v_handle, 0, &first, &fc));
  assert_pf_ok(PFArrayGetItem(back.v_handle, M, &last, &lc));
  assert_ptr_equal(first.v_handle, last.v_handle);
  PFObjectFree(back.v_handle);
  PFObjectFree(outer);
  for (int i = 0; i < M; ++i) PFObjectFree(items[i].v_handle);
  free(items);
  free(codes);
}

static void test_text_from_return_storage(void** state) {
  (void)state;
  const char* text;
  size_t n;
  assert_pf_ok(PFToJSON(vs("hello"), kPFStr, &text, &n));
  PFValue out;
  int code;
  assert_pf_ok(PFFromJSON(text, n, &out, &code));
  assert_int_equal(code, kPFStr);
  assert_string_equal(out.v_str, "hello");
  /* Not NUL-terminated: only len bytes are read. */
  const char doc[] = DOC("7", "") "garbage";
  assert_pf_ok(PFFromJSON(doc, strlen(doc) - 7, &out, &code));
  assert_int_equal(code, kPFInt);
  assert_int_equal(out.v_int64, 7);
}

/* Another thread changes a List while it is written: each write sees one
 * snapshot (runs under TSan). */
static void* churn(void* arg) {
  for (int i = 0; i < 2000; ++i) {
    PFListAppend(arg, vi(i), kPFInt);
    PFValue v;
    int c;
    PFListPop(arg, 0, &v, &c);
  }
  return NULL;
}

static void test_list_changed_by_another_thread(void** state) {
  (void)state;
  PFValue v[4] = {vi(1), vi(2), vi(3), vi(4)};
  int c[4] = {kPFInt, kPFInt, kPFInt, kPFInt};
  PFObjectHandle l = list_of(v, c, 4);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, churn, l), 0);
  for (int i = 0; i < 200; ++i) {
    const char* text;
    size_t n;
    assert_pf_ok(PFToJSON(vh(l), kPFObjectHandle, &text, &n));
    PFValue back;
    int code;
    assert_pf_ok(PFFromJSON(text, n, &back, &code));
    int64_t size;
    assert_pf_ok(PFListGetSize(back.v_handle, &size));
    assert_true(size == 4 || size == 5);
    PFObjectFree(back.v_handle);
  }
  pthread_join(t, NULL);
  PFObjectFree(l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plain_values),
      cmocka_unit_test(test_containers),
      cmocka_unit_test(test_sharing),
      cmocka_unit_test(test_list_holding_itself),
      cmocka_unit_test(test_cycle_entered_through_an_array),
      cmocka_unit_test(test_tensors),
      cmocka_unit_test(test_instances),
      cmocka_unit_test(test_read_only_accessor_fields_are_checked_not_stored),
      cmocka_unit_test(test_what_cannot_be_written),
      cmocka_unit_test(test_deep_nesting_is_refused),
      cmocka_unit_test(test_hostile_documents),
      cmocka_unit_test(test_strict_json),
      cmocka_unit_test(test_refuse_cycles),
      cmocka_unit_test(test_too_many_nodes),
      cmocka_unit_test(test_many_entries),
      cmocka_unit_test(test_exact_text),
      cmocka_unit_test(test_scan_and_size_boundaries),
      cmocka_unit_test(test_text_from_return_storage),
      cmocka_unit_test(test_list_changed_by_another_thread),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
