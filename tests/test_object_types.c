/* Registered object types: registration and every bad description, the
 * description read back, instances and their fields through handles and
 * by name, methods bound and unbound, the constructor, obj<KEY> in the
 * signature grammar, descriptor tables (layouts 1, 2 and 3), the API table.
 * Types are never removed, so each test registers keys of its own. */
#define _DEFAULT_SOURCE /* MAP_ANONYMOUS */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "support/pf_test.h"
#include "support/pf_object_test.h"

/* ---- helpers ---- */

/* Memory that is not a packedfunc object, and a borrowed DLTensor. */
static uint64_t g_not_an_object[16];
#define g_not_a_function_ptr ((void*)g_not_an_object)
static DLTensor g_a_dltensor;

static PFFunctionHandle method(PFObjectHandle o, const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFObjectGetMethod(o, name, &f));
  return f;
}

static PFFunctionHandle ctor(uint32_t ix) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFObjectTypeGetConstructor(ix, &f));
  return f;
}

static PFValue call(PFFunctionHandle f, int n, PFValue* a, int* c, int* rc) {
  PFValue rv;
  assert_pf_ok(PFFuncCall(f, a, c, n, &rv, rc));
  return rv;
}

static PFValue vi(int64_t x) { return (PFValue){.v_int64 = x}; }
static PFValue vs(const char* s) { return (PFValue){.v_str = s}; }
static PFValue vh(void* h) { return (PFValue){.v_handle = h}; }

static PFValue get(PFObjectHandle o, const char* name, int* code) {
  PFValue v;
  assert_pf_ok(PFObjectGetFieldByName(o, name, &v, code));
  return v;
}

/* ---- a small hierarchy: t.Shape <- t.Rect <- t.Square ---- */

typedef struct {
  char* label;
  int64_t sides;
} Shape;

typedef struct {
  Shape shape;
  double w, h;
} Rect;

typedef struct {
  Rect rect;
  int32_t level;
} Square;

static atomic_int g_shape_fins, g_rect_fins;
static char g_fin_order[64];
static atomic_int g_fin_pos;

static void shape_fin(void* p) {
  Shape* s = p;
  atomic_fetch_add(&g_shape_fins, 1);
  int i = atomic_fetch_add(&g_fin_pos, 1);
  if (i < 63) g_fin_order[i] = 'S';
  (void)s;
}

static void rect_fin(void* p) {
  atomic_fetch_add(&g_rect_fins, 1);
  int i = atomic_fetch_add(&g_fin_pos, 1);
  if (i < 63) g_fin_order[i] = 'R';
  (void)p;
}

static void* self_data(PFObjectHandle self) {
  void* d = NULL;
  PFObjectGetData(self, &d);
  return d;
}

static void shape_init(PFObjectHandle self, const char* label, int64_t sides) {
  Shape* s = self_data(self);
  size_t n = strlen(label) + 1;
  s->label = PFMemAlloc(n);
  memcpy(s->label, label, n);
  s->sides = sides;
}

static double shape_area(PFObjectHandle self) {
  (void)self;
  return 0.0;
}

static const char* shape_kind(PFObjectHandle self) {
  (void)self;
  return "shape";
}

static double rect_area(PFObjectHandle self) {
  Rect* r = self_data(self);
  return r->w * r->h;
}

static void rect_init(PFObjectHandle self, double w, double h) {
  Rect* r = self_data(self);
  shape_init(self, "rect", 4);
  r->w = w;
  r->h = h;
}

static int64_t shape_count(void) { return 3; }

/* A packed method: scales w and h by its argument. */
static int rect_scale(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || c[1] != kPFFloat) return PFErrorSetFormat(kPFErrTypeError, "scale: want float");
  Rect* r = self_data(a[0].v_handle);
  r->w *= a[1].v_float64;
  r->h *= a[1].v_float64;
  PFValue v = {.v_float64 = r->w * r->h};
  int code = kPFFloat;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static const PFFieldDesc k_shape_fields[] = {
    PF_FIELD(Shape, label, "str", kPFFieldWritable, "What it is called."),
    PF_FIELD(Shape, sides, "int64", 0, "How many sides."),
};
static const PFMethodDesc k_shape_methods[] = {
    PF_METHOD_TYPED("__init__", shape_init, "void(obj<t.Shape>,str,int64)", "Makes a shape."),
    PF_METHOD_TYPED("area", shape_area, "float64(obj<t.Shape>)", "Its area."),
    PF_METHOD_TYPED("kind", shape_kind, "str(object)", NULL),
    PF_STATIC_METHOD_TYPED("count", shape_count, "int64()", "How many kinds."),
};
static const PFObjectTypeDesc k_shape = {PF_OBJECT_TYPE_DESC_ABI,
                                         "t.Shape",
                                         NULL,
                                         sizeof(Shape),
                                         shape_fin,
                                         "A shape.",
                                         k_shape_fields,
                                         PF_COUNTOF(k_shape_fields),
                                         k_shape_methods,
                                         PF_COUNTOF(k_shape_methods)};

static const PFFieldDesc k_rect_fields[] = {
    PF_FIELD(Rect, w, "float64", kPFFieldWritable, "Width."),
    PF_FIELD(Rect, h, "double", kPFFieldWritable, NULL),
};
static const PFMethodDesc k_rect_methods[] = {
    PF_METHOD_TYPED("__init__", rect_init, "void(obj<t.Rect>,float64,float64)", NULL),
    PF_METHOD_TYPED("area", rect_area, "float64(obj<t.Rect>)", "w * h."),
    {"scale", rect_scale, NULL, "float64(obj<t.Rect>,float64)", 0, "Scales it."},
};
static const PFObjectTypeDesc k_rect = {PF_OBJECT_TYPE_DESC_ABI,
                                        "t.Rect",
                                        "t.Shape",
                                        sizeof(Rect),
                                        rect_fin,
                                        NULL,
                                        k_rect_fields,
                                        PF_COUNTOF(k_rect_fields),
                                        k_rect_methods,
                                        PF_COUNTOF(k_rect_methods)};

static const PFFieldDesc k_square_fields[] = {
    PF_FIELD(Square, level, "int32", kPFFieldWritable, NULL),
};
static const PFObjectTypeDesc k_square = {PF_OBJECT_TYPE_DESC_ABI,
                                          "t.Square",
                                          "t.Rect",
                                          sizeof(Square),
                                          NULL,
                                          NULL,
                                          k_square_fields,
                                          1,
                                          NULL,
                                          0};

static uint32_t g_shape, g_rect, g_square;

static int setup(void** state) {
  (void)state;
  if (PFObjectTypeRegister(&k_shape, &g_shape) != 0 ||
      PFObjectTypeRegister(&k_rect, &g_rect) != 0 ||
      PFObjectTypeRegister(&k_square, &g_square) != 0) {
    fprintf(stderr, "setup: %s\n", PFGetLastError());
    return -1;
  }
  return 0;
}

/* ---- registration and descriptions ---- */

static void test_register_and_describe(void** state) {
  (void)state;
  assert_true(g_shape < g_rect && g_rect < g_square);
  assert_string_equal(PFObjectTypeName(g_rect), "t.Rect");
  uint32_t found = 0;
  assert_pf_ok(PFObjectTypeFind("t.Square", &found));
  assert_int_equal(found, g_square);
  assert_pf_ok(PFObjectTypeFind("t.Nothing", &found));
  assert_int_equal(found, 0);
  const PFObjectTypeInfo* ti = info(g_rect);
  assert_string_equal(ti->key, "t.Rect");
  assert_null(ti->doc);
  assert_int_equal(ti->type_index, g_rect);
  assert_int_equal(ti->parent_index, g_shape);
  assert_int_equal(ti->depth, 1);
  assert_int_equal(ti->instance_size, sizeof(Rect));
  assert_int_equal(ti->num_fields, 4);
  const char* names[] = {"label", "sides", "w", "h"};
  const char* types[] = {"str", "int64", "float64", "float64"};
  for (int i = 0; i < 4; ++i) {
    assert_string_equal(ti->fields[i]->name, names[i]);
    assert_string_equal(ti->fields[i]->type, types[i]); /* "double" is canonical float64 */
  }
  assert_int_equal(ti->fields[0]->type_index, g_shape);
  assert_int_equal(ti->fields[2]->type_index, g_rect);
  assert_int_equal(ti->fields[1]->flags, 0);
  assert_int_equal(ti->fields[2]->flags, kPFFieldWritable);
  assert_int_equal(ti->fields[2]->offset, offsetof(Rect, w));
  assert_int_equal(ti->fields[2]->size, sizeof(double));
  assert_string_equal(ti->fields[0]->doc, "What it is called.");
  /* Methods: the parent's order, overrides in place, then new ones. */
  assert_int_equal(ti->num_methods, 5);
  const char* mnames[] = {"__init__", "area", "kind", "count", "scale"};
  const uint32_t by[] = {g_rect, g_rect, g_shape, g_shape, g_rect};
  for (int i = 0; i < 5; ++i) {
    assert_string_equal(ti->methods[i]->name, mnames[i]);
    assert_int_equal(ti->methods[i]->type_index, by[i]);
  }
  assert_string_equal(ti->methods[1]->signature, "float64(obj<t.Rect>)");
  assert_string_equal(ti->methods[4]->signature, "float64(obj<t.Rect>,float64)");
  assert_int_equal(ti->methods[3]->flags, kPFMethodStatic);
  assert_ptr_equal(ti->init, ti->methods[0]);
  /* The square inherits __init__ from the rect. */
  const PFObjectTypeInfo* sq = info(g_square);
  assert_int_equal(sq->depth, 2);
  assert_int_equal(sq->num_fields, 5);
  assert_ptr_equal(sq->init, ti->init);
  /* Field handles are shared along the chain. */
  assert_ptr_equal(field(g_square, "w"), field(g_rect, "w"));
  const PFFieldInfo* f = NULL;
  assert_pf_error(PFObjectTypeGetField(g_rect, "nope", &f), kPFErrAttributeError, "t.Rect",
                  "no field 'nope'");
  assert_pf_error(PFObjectTypeGetInfo(kPFObjectFunction, &ti), kPFErrKeyError,
                  "is not the index of a registered object type");
  assert_pf_error(PFObjectTypeGetInfo(kPFObjectTypeRegisteredBegin + 60000, &ti), kPFErrKeyError);
  assert_null(PFObjectTypeName(kPFObjectTypeRegisteredBegin + 60000));
  assert_string_equal(PFObjectTypeName(kPFObjectFunction), "function");
}

static void test_register_again(void** state) {
  (void)state;
  /* The identical description: the same index, nothing new. */
  assert_int_equal(reg(&k_rect), g_rect);
  /* Another description of the key: KeyError saying what differs. */
  PFObjectTypeDesc d = k_rect;
  d.doc = "other";
  uint32_t ix = 0;
  assert_pf_error(PFObjectTypeRegister(&d, &ix), kPFErrKeyError, "'t.Rect' is already registered",
                  "its doc differs");
  d = k_rect;
  d.instance_size += 8;
  assert_pf_error(PFObjectTypeRegister(&d, &ix), kPFErrKeyError, "instance size");
  PFMethodDesc m[3];
  memcpy(m, k_rect_methods, sizeof(m));
  m[1].typed = (void (*)(void))shape_area;
  d = k_rect;
  d.methods = m;
  assert_pf_error(PFObjectTypeRegister(&d, &ix), kPFErrKeyError, "method 'area' differs");
  assert_int_equal(ix, 0);
}

/* Expects registering `d` to fail with `kind` and a message with `sub`. */
#define assert_bad(d, kind, ...)                                         \
  do {                                                                   \
    uint32_t ix_ = 77;                                                   \
    assert_pf_error(PFObjectTypeRegister((d), &ix_), kind, __VA_ARGS__); \
    assert_int_equal(ix_, 77);                                           \
  } while (0)

typedef struct {
  int64_t a;
  int32_t b;
  int32_t c;
  char* s;
} Plain;

static void noop_typed(void) {}
static int noop_packed(PFValue* a, int* c, int n, PFRetValueHandle r, void* res) {
  (void)a, (void)c, (void)n, (void)r, (void)res;
  return 0;
}

static void test_bad_descriptions(void** state) {
  (void)state;
  uint32_t ix;
  assert_pf_error(PFObjectTypeRegister(NULL, &ix), kPFErrTypeError, "'desc' is NULL");
  PFFieldDesc f[3] = {PF_FIELD(Plain, a, "int64", 0, NULL), PF_FIELD(Plain, b, "int32", 0, NULL),
                      PF_FIELD(Plain, s, "str", 0, NULL)};
  PFMethodDesc m[1] = {PF_METHOD_TYPED("go", noop_typed, "void(obj<t.bad.Ok>)", NULL)};
  const PFObjectTypeDesc ok = {
      PF_OBJECT_TYPE_DESC_ABI, "t.bad.Ok", NULL, sizeof(Plain), NULL, NULL, f, 3, m, 1};
  assert_pf_error(PFObjectTypeRegister(&ok, NULL), kPFErrTypeError, "'out_type_index' is NULL");
  PFObjectTypeDesc d = ok;
  d.abi = 4;
  assert_bad(&d, kPFErrValueError, "layout version 4", "versions 1 to 3");
  d.abi = 0;
  assert_bad(&d, kPFErrValueError, "layout version 0");
  /* Keys. */
  const char* bad_keys[] = {"", "1abc", "a..b", "a.", ".a", "a b", "a-b", "a.1"};
  for (size_t i = 0; i < sizeof(bad_keys) / sizeof(bad_keys[0]); ++i) {
    d = ok;
    d.key = bad_keys[i];
    assert_bad(&d, kPFErrValueError, "the key of object type description 0");
  }
  d = ok;
  d.key = NULL;
  assert_bad(&d, kPFErrValueError, "key", "is NULL");
  char longkey[300];
  memset(longkey, 'k', sizeof(longkey) - 1);
  longkey[sizeof(longkey) - 1] = '\0';
  d.key = longkey;
  assert_bad(&d, kPFErrValueError, "longer than PF_OBJECT_TYPE_KEY_MAX");
  /* Parents. */
  d = ok;
  d.parent = "t.bad.Missing";
  assert_bad(&d, kPFErrValueError, "its parent 't.bad.Missing' is not a registered type");
  d.parent = "t.bad.Ok";
  assert_bad(&d, kPFErrValueError, "names itself as its parent");
  d = ok;
  d.key = "t.bad.Small";
  d.parent = "t.Rect";
  d.num_fields = 0;
  d.num_methods = 0;
  d.instance_size = sizeof(Shape);
  assert_bad(&d, kPFErrValueError, "smaller than its parent 't.Rect'");
  d = ok;
  d.instance_size = SIZE_MAX - 8;
  assert_bad(&d, kPFErrValueError, "larger than PF_OBJECT_TYPE_MAX_SIZE");
  d.instance_size = PF_OBJECT_TYPE_MAX_SIZE + 1;
  assert_bad(&d, kPFErrValueError, "larger than PF_OBJECT_TYPE_MAX_SIZE");
  /* Counts and arrays. */
  d = ok;
  d.num_fields = -1;
  assert_bad(&d, kPFErrValueError, "num_fields is -1");
  d.num_fields = PF_OBJECT_TYPE_MAX_MEMBERS + 1;
  assert_bad(&d, kPFErrValueError, "num_fields is 4097");
  d = ok;
  d.fields = NULL;
  assert_bad(&d, kPFErrTypeError, "fields is NULL with num_fields 3");
  d = ok;
  d.methods = NULL;
  assert_bad(&d, kPFErrTypeError, "methods is NULL with num_methods 1");
  /* Fields. */
  struct {
    PFFieldDesc f;
    const char* kind;
    const char* sub;
  } bad_fields[] = {
      {{"a", "int65", 0, 0, NULL}, kPFErrValueError, "field 'a': bad type \"int65\" at position 0"},
      {{"a", "void", 0, 0, NULL}, kPFErrValueError, "void is not a field type"},
      {{"a", "float", 0, 0, NULL}, kPFErrValueError, "'float' is ambiguous"},
      {{"a", "obj<t.bad.Nope>", 0, 0, NULL}, kPFErrValueError, "unknown object type 't.bad.Nope'"},
      {{"a", "obj", 0, 0, NULL}, kPFErrValueError, "write obj<KEY>"},
      {{"a", "int64 x", 0, 0, NULL}, kPFErrValueError, "unexpected text after the type"},
      {{"a", NULL, 0, 0, NULL}, kPFErrTypeError, "'type' is NULL"},
      {{"a", "int64", 4, 0, NULL}, kPFErrValueError, "offset 4 is not aligned for its type int64"},
      {{"a", "int64", 16, 0, NULL},
       kPFErrValueError,
       "its 8 bytes at offset 16 end past the instance size"},
      {{"a", "int64", SIZE_MAX - 7, 0, NULL}, kPFErrValueError, "end past the instance size"},
      {{"a", "int32", 4, 0, NULL}, kPFErrValueError, "overlaps field"},
      {{"b", "int64", 0, 0, NULL}, kPFErrValueError, "overlaps field"},
      {{"s", "int64", 8, 0, NULL}, kPFErrValueError, "the name 's' is taken twice"},
      {{"go", "int64", 8, 0, NULL}, kPFErrValueError, "the name 'go' is taken twice",
       /* by a field and a method */},
      {{"x", "int64", 8, 4, NULL}, kPFErrValueError, "unknown flag bits 0x4"},
      {{"9x", "int64", 8, 0, NULL}, kPFErrValueError, "the name of field 1 is not an identifier"},
      {{NULL, "int64", 8, 0, NULL}, kPFErrValueError, "the name of field 1 is NULL"},
  };
  for (size_t i = 0; i < sizeof(bad_fields) / sizeof(bad_fields[0]); ++i) {
    PFFieldDesc two[2] = {{"s", "str", 0, 0, NULL}, bad_fields[i].f};
    d = ok;
    d.instance_size = 16;
    d.fields = two;
    d.num_fields = 2;
    if (strcmp(bad_fields[i].sub, "overlaps field") == 0 || bad_fields[i].f.offset == 4) {
      two[0] = (PFFieldDesc){"first", "int64", 0, 0, NULL};
    }
    assert_bad(&d, bad_fields[i].kind, bad_fields[i].sub);
  }
  /* A field over an inherited one. */
  PFFieldDesc over[1] = {{"z", "int32", offsetof(Shape, sides) + 4, 0, NULL}};
  d = (PFObjectTypeDesc){
      PF_OBJECT_TYPE_DESC_ABI, "t.bad.Over", "t.Shape", sizeof(Rect), NULL, NULL, over, 1, NULL, 0};
  assert_bad(&d, kPFErrValueError, "overlaps field 'z'");
  over[0] = (PFFieldDesc){"sides", "int64", sizeof(Shape), 0, NULL};
  assert_bad(&d, kPFErrValueError, "the name 'sides' is taken twice", "an inherited field");
  /* A method named as an inherited field. */
  PFMethodDesc mm[1] = {PF_METHOD_TYPED("label", noop_typed, "void(object)", NULL)};
  d = (PFObjectTypeDesc){
      PF_OBJECT_TYPE_DESC_ABI, "t.bad.Meth", "t.Shape", sizeof(Shape), NULL, NULL, NULL, 0, mm, 1};
  assert_bad(&d, kPFErrValueError, "the name 'label' is taken twice");
  /* Methods. */
  struct {
    PFMethodDesc m;
    const char* sub;
  } bad_methods[] = {
      {{"go", NULL, NULL, NULL, 0, NULL}, "neither"},
      {{"go", noop_packed, noop_typed, "void(object)", 0, NULL}, "both"},
      {{"go", NULL, noop_typed, NULL, 0, NULL}, "typed method 'go' has no signature"},
      {{"go", NULL, noop_typed, "void(object", 0, NULL}, "method 'go': bad signature"},
      {{"go", NULL, noop_typed, "void()", 0, NULL}, "takes the object first"},
      {{"go", NULL, noop_typed, "void(int64)", 0, NULL}, "takes the object first"},
      {{"go", noop_packed, NULL, "void(obj<t.Shape>)", 0, NULL}, "takes the object first"},
      {{"__init__", NULL, noop_typed, "int64()", kPFMethodStatic, NULL},
       "a static __init__ is a factory"},
      {{"go", NULL, noop_typed, "void()", 8, NULL},
       "unknown flag bits 0x8"}, /* 2: non-blocking, 4: checked */
      {{"go go", NULL, noop_typed, "void()", 0, NULL}, "the name of method 1 is not an identifier"},
  };
  for (size_t i = 0; i < sizeof(bad_methods) / sizeof(bad_methods[0]); ++i) {
    PFMethodDesc two[2] = {m[0], bad_methods[i].m};
    two[0].name = "other";
    d = ok;
    d.methods = two;
    d.num_methods = 2;
    assert_bad(&d, kPFErrValueError, bad_methods[i].sub);
  }
  PFMethodDesc dup[2] = {m[0], m[0]};
  d = ok;
  d.methods = dup;
  d.num_methods = 2;
  assert_bad(&d, kPFErrValueError, "the name 'go' is taken twice", "a method");
  /* Too deep: a chain of PF_OBJECT_TYPE_MAX_DEPTH + 1 ancestors. */
  char key[32], parent[32];
  for (int i = 0; i <= PF_OBJECT_TYPE_MAX_DEPTH; ++i) {
    snprintf(key, sizeof(key), "t.deep.T%d", i);
    snprintf(parent, sizeof(parent), "t.deep.T%d", i - 1);
    d = (PFObjectTypeDesc){
        PF_OBJECT_TYPE_DESC_ABI, key, i ? parent : NULL, 8, NULL, NULL, NULL, 0, NULL, 0};
    reg(&d);
  }
  snprintf(key, sizeof(key), "t.deep.T%d", PF_OBJECT_TYPE_MAX_DEPTH + 1);
  snprintf(parent, sizeof(parent), "t.deep.T%d", PF_OBJECT_TYPE_MAX_DEPTH);
  d.key = key;
  d.parent = parent;
  assert_bad(&d, kPFErrValueError, "more than 64 ancestors");
  /* Nothing of the failures was registered; the good one registers. */
  uint32_t found = 1;
  assert_pf_ok(PFObjectTypeFind("t.bad.Ok", &found));
  assert_int_equal(found, 0);
  reg(&ok);
}

/* ---- instances and fields ---- */

static void test_alloc_and_data(void** state) {
  (void)state;
  PFObjectHandle o = alloc(g_square);
  Square* s = data(o);
  assert_int_equal((uintptr_t)s % PF_OBJECT_DATA_ALIGN, 0);
  assert_null(s->rect.shape.label);
  assert_true(s->rect.w == 0.0 && s->level == 0);
  uint32_t ti = 0;
  assert_pf_ok(PFObjectGetTypeIndex(o, &ti));
  assert_int_equal(ti, g_square);
  int yes = -1;
  uint32_t want[] = {g_square, g_rect, g_shape};
  for (int i = 0; i < 3; ++i) {
    assert_pf_ok(PFObjectIsInstance(o, want[i], &yes));
    assert_int_equal(yes, 1);
  }
  PFObjectHandle shape = alloc(g_shape);
  assert_pf_ok(PFObjectIsInstance(shape, g_rect, &yes));
  assert_int_equal(yes, 0);
  assert_pf_ok(PFObjectIsInstance(shape, kPFObjectFunction, &yes));
  assert_int_equal(yes, 0);
  assert_pf_error(PFObjectIsInstance(shape, 999, &yes), kPFErrKeyError, "999, not an object type");
  assert_pf_error(PFObjectIsInstance(shape, 0, &yes), kPFErrKeyError);
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(noop_packed, NULL, NULL, &f));
  assert_pf_ok(PFObjectIsInstance(f, kPFObjectFunction, &yes));
  assert_int_equal(yes, 1);
  void* d = NULL;
  assert_pf_error(PFObjectGetData(f, &d), kPFErrTypeError,
                  "is a function object, not an instance of a registered type");
  assert_pf_error(PFObjectGetData(NULL, &d), kPFErrTypeError, "'obj' is NULL");
  assert_pf_error(PFObjectGetData(o, NULL), kPFErrTypeError, "'out' is NULL");
  PFObjectHandle none = NULL;
  assert_pf_error(PFObjectAlloc(kPFObjectFunction, &none), kPFErrKeyError);
  assert_pf_error(PFObjectAlloc(g_shape, NULL), kPFErrTypeError);
  assert_null(none);
  int before = atomic_load(&g_shape_fins), rect_before = atomic_load(&g_rect_fins);
  atomic_store(&g_fin_pos, 0);
  PFObjectFree(o);
  /* The rect's finalizer, then the shape's: the most derived first. */
  assert_int_equal(atomic_load(&g_rect_fins), rect_before + 1);
  assert_int_equal(atomic_load(&g_shape_fins), before + 1);
  assert_memory_equal(g_fin_order, "RS", 2);
  PFObjectFree(shape);
  PFFuncFree(f);
}

typedef struct {
  int8_t i8;
  int16_t i16;
  int32_t i32;
  int64_t i64;
  uint8_t u8;
  uint16_t u16;
  uint32_t u32;
  uint64_t u64;
  float f32;
  double f64;
  bool b;
  DLDataType dt;
  DLDevice dev;
  void* p;
  char* s;
  PFByteArray* by;
  PFObjectHandle tensor, fn, arr, map, shape, obj, rect;
  int64_t ro;
} All;

#define WF(m, t) PF_FIELD(All, m, t, kPFFieldWritable, NULL)
static const PFFieldDesc k_all_fields[] = {
    WF(i8, "int8"),
    WF(i16, "int16"),
    WF(i32, "int32"),
    WF(i64, "int64"),
    WF(u8, "uint8"),
    WF(u16, "uint16"),
    WF(u32, "uint32"),
    WF(u64, "uint64"),
    WF(f32, "float32"),
    WF(f64, "float64"),
    WF(b, "bool"),
    WF(dt, "dtype"),
    WF(dev, "device"),
    WF(p, "ptr"),
    WF(s, "str"),
    WF(by, "bytes"),
    WF(tensor, "tensor"),
    WF(fn, "func"),
    WF(arr, "array"),
    WF(map, "map"),
    WF(shape, "shape"),
    WF(obj, "object"),
    WF(rect, " obj < t.Rect > "),
    PF_FIELD(All, ro, "int64", 0, "read-only"),
};
static const PFObjectTypeDesc k_all = {
    PF_OBJECT_TYPE_DESC_ABI,  "t.All", NULL, sizeof(All), NULL, NULL, k_all_fields,
    PF_COUNTOF(k_all_fields), NULL,    0};

static void set_ok(PFObjectHandle o, const char* name, PFValue v, int code) {
  const PFFieldInfo* f = NULL;
  uint32_t ti;
  assert_pf_ok(PFObjectGetTypeIndex(o, &ti));
  assert_pf_ok(PFObjectTypeGetField(ti, name, &f));
  assert_pf_ok(PFObjectSetField(o, f, v, code));
}

static void test_every_field_type(void** state) {
  (void)state;
  uint32_t ix = reg(&k_all);
  assert_string_equal(field(ix, "rect")->type, "obj<t.Rect>"); /* canonical */
  PFObjectHandle o = alloc(ix);
  All* a = data(o);
  int code;
  PFValue v;
  /* A zeroed struct reads as zeros and nulls. */
  v = get(o, "i64", &code);
  assert_int_equal(code, kPFInt);
  get(o, "s", &code);
  assert_int_equal(code, kPFNull);
  get(o, "obj", &code);
  assert_int_equal(code, kPFNull);
  get(o, "by", &code);
  assert_int_equal(code, kPFNull);
  get(o, "p", &code);
  assert_int_equal(code, kPFNull);
  /* Integers through their C types, range-checked. */
  set_ok(o, "i8", vi(-128), kPFInt);
  set_ok(o, "u16", vi(65535), kPFInt);
  set_ok(o, "i32", (PFValue){.v_int64 = 1}, kPFBool);
  assert_int_equal(a->i8, -128);
  assert_int_equal(a->u16, 65535);
  assert_int_equal(a->i32, 1);
  set_ok(o, "u64", vi(7), kPFInt);
  assert_int_equal(a->u64, 7);
  a->u64 = UINT64_MAX; /* C may write what no packed int holds */
  PFValue out;
  assert_pf_error(PFObjectGetFieldByName(o, "u64", &out, &code), kPFErrValueError,
                  "field 'u64' of t.All", "does not fit the int64");
  set_ok(o, "f32", (PFValue){.v_float64 = 1.5}, kPFFloat);
  set_ok(o, "f64", vi(3), kPFInt);
  set_ok(o, "b", (PFValue){.v_int64 = 1}, kPFBool);
  assert_true(a->f32 == 1.5f && a->f64 == 3.0 && a->b);
  v = get(o, "b", &code);
  assert_int_equal(code, kPFBool);
  assert_int_equal(v.v_int64, 1);
  v = get(o, "f32", &code);
  assert_int_equal(code, kPFFloat);
  assert_true(v.v_float64 == 1.5);
  DLDataType dt = {kDLFloat, 16, 4};
  set_ok(o, "dt", (PFValue){.v_type = dt}, kPFDataType);
  v = get(o, "dt", &code);
  assert_int_equal(code, kPFDataType);
  assert_int_equal(v.v_type.bits, 16);
  DLDevice dev = {kDLCUDA, 3};
  set_ok(o, "dev", (PFValue){.v_device = dev}, kPFDevice);
  assert_int_equal(a->dev.device_id, 3);
  set_ok(o, "p", vh(a), kPFOpaqueHandle);
  v = get(o, "p", &code);
  assert_int_equal(code, kPFOpaqueHandle);
  assert_ptr_equal(v.v_handle, a);
  /* str and bytes: copies, owned; null clears. */
  char text[] = "hello";
  set_ok(o, "s", vs(text), kPFStr);
  text[0] = 'j';
  v = get(o, "s", &code);
  assert_int_equal(code, kPFStr);
  assert_string_equal(v.v_str, "hello");
  set_ok(o, "s", vs("again"), kPFStr); /* the old copy is freed (ASan would see a leak) */
  PFByteArray ba = {"a\0b", 3};
  set_ok(o, "by", vh(&ba), kPFBytes);
  v = get(o, "by", &code);
  assert_int_equal(code, kPFBytes);
  assert_int_equal(((PFByteArray*)v.v_handle)->size, 3);
  assert_memory_equal(((PFByteArray*)v.v_handle)->data, "a\0b", 3);
  PFByteArray empty = {NULL, 0};
  set_ok(o, "by", vh(&empty), kPFBytes);
  v = get(o, "by", &code);
  assert_int_equal(((PFByteArray*)v.v_handle)->size, 0);
  /* References: the instance's own, released with it. */
  atomic_int fins = 0;
  PFObjectHandle boxed = NULL;
  assert_pf_ok(PFObjectCreateBoxed(&fins, pf_test_count_fin, &boxed));
  set_ok(o, "obj", vh(boxed), kPFObjectHandle);
  PFObjectFree(boxed);
  v = get(o, "obj", &code);
  assert_int_equal(code, kPFObjectHandle);
  assert_ptr_equal(v.v_handle, boxed);
  PFFunctionHandle fn = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(noop_packed, &fins, pf_test_count_fin, &fn));
  set_ok(o, "fn", vh(fn), kPFFuncHandle);
  set_ok(o, "obj", vh(fn), kPFFuncHandle); /* an object field takes any object; boxed goes */
  assert_int_equal(atomic_load(&fins), 1);
  v = get(o, "obj", &code);
  assert_int_equal(code, kPFFuncHandle); /* read back under its own code */
  PFFuncFree(fn);
  int64_t dims[] = {2, 3};
  PFObjectHandle shp = NULL, arr = NULL, map = NULL;
  assert_pf_ok(PFShapeCreate(dims, 2, &shp));
  assert_pf_ok(PFArrayCreate(NULL, NULL, 0, &arr));
  assert_pf_ok(PFMapCreate(NULL, NULL, NULL, NULL, 0, &map));
  set_ok(o, "shape", vh(shp), kPFObjectHandle);
  set_ok(o, "arr", vh(arr), kPFObjectHandle);
  set_ok(o, "map", vh(map), kPFObjectHandle);
  PFObjectFree(shp);
  PFObjectFree(arr);
  PFObjectFree(map);
  /* A tensor field keeps a tensor object. */
  static float buf[2];
  static int64_t tshape[1] = {2};
  DLManagedTensor* mt = calloc(1, sizeof(*mt));
  mt->dl_tensor = (DLTensor){
      .data = buf, .device = {kDLCPU, 0}, .ndim = 1, .dtype = {kDLFloat, 32, 1}, .shape = tshape};
  mt->deleter = (void (*)(DLManagedTensor*))free;
  PFObjectHandle tensor = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(mt, &tensor));
  set_ok(o, "tensor", vh(tensor), kPFObjectHandle);
  PFObjectFree(tensor);
  v = get(o, "tensor", &code);
  assert_int_equal(code, kPFObjectHandle);
  assert_ptr_equal(v.v_handle, tensor);
  /* obj<t.Rect>: a Rect, or a Square. */
  PFObjectHandle sq = alloc(g_square);
  set_ok(o, "rect", vh(sq), kPFObjectHandle);
  PFObjectFree(sq);
  v = get(o, "rect", &code);
  assert_ptr_equal(v.v_handle, sq);
  set_ok(o, "rect", (PFValue){.v_handle = NULL}, kPFNull);
  assert_null(a->rect);
  /* Releasing the instance releases what its fields hold. */
  PFObjectFree(o);
  assert_int_equal(atomic_load(&fins), 2);
}

/* A zeroed instance with a field of every type of the grammar (read from
 * PFSignatureTypeInfo, so a type added to the grammar is covered; void and
 * any are no field types) and obj<KEY>: every field reads as a value, or
 * null, and takes back what it read. (Before: a zero dtype read as a
 * DLDataType that no host can represent, and could not be written.) */
static void test_zeroed_instance_round_trips(void** state) {
  (void)state;
  PFFieldDesc fields[64];
  char names[64][8];
  int n = 0;
  const char* type = NULL;
  for (int i = 0; PFSignatureTypeInfo(i, &type, NULL) == 0; ++i) {
    if (strcmp(type, "void") == 0 || strcmp(type, "any") == 0) continue;
    assert_true(n < 63);
    snprintf(names[n], sizeof(names[n]), "f%d", n);
    fields[n] = (PFFieldDesc){names[n], type, 16 * (size_t)n, kPFFieldWritable, NULL};
    ++n;
  }
  PFErrorClear();
  assert_true(n >= 20);
  snprintf(names[n], sizeof(names[n]), "f%d", n);
  fields[n] = (PFFieldDesc){names[n], "obj<t.Rect>", 16 * (size_t)n, kPFFieldWritable, NULL};
  ++n;
  PFObjectTypeDesc d = {
      PF_OBJECT_TYPE_DESC_ABI, "t.Zeroed", NULL, 16 * (size_t)n, NULL, NULL, fields, n, NULL, 0};
  uint32_t ix = reg(&d);
  PFObjectHandle o = alloc(ix);
  const PFObjectTypeInfo* ti = info(ix);
  for (int k = 0; k < n; ++k) {
    const PFFieldInfo* f = ti->fields[k];
    PFValue v, again;
    int code = -1, code2 = -1;
    if (PFObjectGetField(o, f, &v, &code) != 0)
      fail_msg("field %s (%s) of a zeroed instance: %s", f->name, f->type, PFGetLastError());
    if (PFObjectSetField(o, f, v, code) != 0)
      fail_msg("field %s (%s) takes back what it read (%s): %s", f->name, f->type,
               PFTypeCodeName(code), PFGetLastError());
    assert_pf_ok(PFObjectGetField(o, f, &again, &code2));
    assert_int_equal(code2, code);
    assert_memory_equal(&again, &v, sizeof(v));
  }
  /* The zero dtype is null, both ways; any other dtype is itself. */
  PFValue v;
  int code;
  const PFFieldInfo* dt = NULL;
  for (int k = 0; k < n; ++k)
    if (strcmp(ti->fields[k]->type, "dtype") == 0) dt = ti->fields[k];
  assert_non_null(dt);
  assert_pf_ok(PFObjectGetField(o, dt, &v, &code));
  assert_int_equal(code, kPFNull);
  DLDataType i8 = {kDLInt, 8, 1};
  assert_pf_ok(PFObjectSetField(o, dt, (PFValue){.v_type = i8}, kPFDataType));
  assert_pf_ok(PFObjectGetField(o, dt, &v, &code));
  assert_int_equal(code, kPFDataType);
  assert_int_equal(v.v_type.bits, 8);
  assert_pf_ok(PFObjectSetField(o, dt, (PFValue){.v_handle = NULL}, kPFNull));
  assert_pf_ok(PFObjectGetField(o, dt, &v, &code));
  assert_int_equal(code, kPFNull);
  PFObjectFree(o);
}

static void test_field_write_errors(void** state) {
  (void)state;
  uint32_t ix;
  assert_pf_ok(PFObjectTypeRegister(&k_all, &ix));
  PFObjectHandle o = alloc(ix);
  All* a = data(o);
  a->i64 = 5;
  struct {
    const char* name;
    PFValue v;
    int code;
    const char* kind;
    const char* sub;
  } cases[] = {
      {"i64",
       {.v_str = "x"},
       kPFStr,
       kPFErrTypeError,
       "PFObjectSetFieldByName: field 'i64' of t.All: expected int64, got str"},
      {"i64", {.v_float64 = 1.0}, kPFFloat, kPFErrTypeError, "expected int64, got float"},
      {"i8", {.v_int64 = 128}, kPFInt, kPFErrValueError, "expected int8, got int 128"},
      {"u8", {.v_int64 = -1}, kPFInt, kPFErrValueError, "out of its range"},
      {"b", {.v_int64 = 2}, kPFInt, kPFErrValueError, "only 0 and 1 convert to bool"},
      {"f32", {.v_float64 = 1e300}, kPFFloat, kPFErrValueError, "beyond its range"},
      {"s", {.v_int64 = 1}, kPFInt, kPFErrTypeError, "expected str, got int"},
      {"s", {.v_str = NULL}, kPFStr, kPFErrTypeError, "type code str with a NULL pointer"},
      {"by", {.v_handle = NULL}, kPFBytes, kPFErrTypeError, "NULL pointer"},
      {"fn",
       {.v_handle = g_not_a_function_ptr},
       kPFFuncHandle,
       kPFErrTypeError,
       "a function handle that is not live"},
      {"arr", {.v_int64 = 0}, kPFInt, kPFErrTypeError, "expected array, got int"},
      {"tensor",
       {.v_handle = &g_a_dltensor},
       kPFDLTensorHandle,
       kPFErrTypeError,
       "only borrowed for a call and cannot be kept"},
      {"tensor", {.v_int64 = 1}, kPFInt, kPFErrTypeError, "expected tensor, got int"},
      {"ro", {.v_int64 = 1}, kPFInt, kPFErrAttributeError, "field 'ro' of t.All is read-only"},
      {"p", {.v_str = "s"}, kPFStr, kPFErrTypeError, "expected ptr, got str"},
      {"dt", {.v_int64 = 1}, kPFInt, kPFErrTypeError, "expected dtype, got int"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i)
    assert_pf_error(PFObjectSetFieldByName(o, cases[i].name, cases[i].v, cases[i].code),
                    cases[i].kind, cases[i].sub);
  PFByteArray nul = {NULL, 4};
  assert_pf_error(PFObjectSetFieldByName(o, "by", vh(&nul), kPFBytes), kPFErrTypeError,
                  "bytes of size 4 with NULL data");
  PFByteArray huge = {"x", SIZE_MAX};
  assert_pf_error(PFObjectSetFieldByName(o, "by", vh(&huge), kPFBytes), kPFErrValueError,
                  "larger than any object can be");
  /* obj<t.Rect> refuses a Shape, naming both types. */
  PFObjectHandle shape = alloc(g_shape);
  assert_pf_error(PFObjectSetFieldByName(o, "rect", vh(shape), kPFObjectHandle), kPFErrTypeError,
                  "field 'rect' of t.All: expected obj<t.Rect>, got t.Shape object");
  assert_pf_error(PFObjectSetFieldByName(o, "map", vh(shape), kPFObjectHandle), kPFErrTypeError,
                  "expected map, got t.Shape object");
  assert_pf_error(PFObjectSetFieldByName(o, "nope", vi(1), kPFInt), kPFErrAttributeError,
                  "'t.All' object has no field 'nope'");
  /* On error the field is unchanged. */
  assert_int_equal(a->i64, 5);
  /* Handles: the wrong instance, a forged handle, NULLs. */
  const PFFieldInfo* rf = field(g_rect, "w");
  PFValue out;
  int code;
  assert_pf_error(PFObjectGetField(shape, rf, &out, &code), kPFErrTypeError,
                  "field 'w' of t.Rect is not a field of a t.Shape object");
  assert_pf_error(PFObjectSetField(o, rf, out, kPFFloat), kPFErrTypeError,
                  "not a field of a t.All object");
  /* Memory of the caller's that is not a field (large enough to hold one). */
  assert_pf_error(PFObjectGetField(shape, (const PFFieldInfo*)(void*)g_not_an_object, &out, &code),
                  kPFErrTypeError, "'field' is not a field handle");
  assert_pf_error(PFObjectGetField(shape, NULL, &out, &code), kPFErrTypeError, "'field' is NULL");
  const PFFieldInfo* sf = field(g_shape, "sides");
  assert_pf_error(PFObjectGetField(shape, sf, NULL, &code), kPFErrTypeError, "'out' is NULL");
  assert_pf_error(PFObjectGetField(shape, sf, &out, NULL), kPFErrTypeError,
                  "'out_type_code' is NULL");
  assert_pf_error(PFObjectGetField(NULL, sf, &out, &code), kPFErrTypeError, "'obj' is NULL");
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(noop_packed, NULL, NULL, &f));
  assert_pf_error(PFObjectGetField(f, sf, &out, &code), kPFErrTypeError, "is a function object");
  assert_pf_error(PFObjectGetFieldByName(f, "x", &out, &code), kPFErrTypeError);
  assert_pf_error(PFObjectGetFieldByName(shape, NULL, &out, &code), kPFErrTypeError,
                  "'name' is NULL");
  assert_pf_error(PFObjectSetField(shape, sf, vi(1), kPFInt), kPFErrAttributeError, "read-only");
  /* A parent's handle works on a child's instance. */
  PFObjectHandle sq = alloc(g_square);
  assert_pf_ok(PFObjectGetField(sq, sf, &out, &code));
  assert_int_equal(code, kPFInt);
  PFFuncFree(f);
  PFObjectFree(sq);
  PFObjectFree(shape);
  PFObjectFree(o);
}

/* A chain of a great many instances, each holding the next in a field:
 * released in constant stack. */
typedef struct {
  PFObjectHandle next;
} Link;
static void test_release_chain_without_recursion(void** state) {
  (void)state;
  static const PFFieldDesc fields[] = {PF_FIELD(Link, next, "obj<t.Link>", kPFFieldWritable, NULL)};
  static const PFObjectTypeDesc d = {
      PF_OBJECT_TYPE_DESC_ABI, "t.Link", NULL, sizeof(Link), NULL, NULL, fields, 1, NULL, 0};
  uint32_t ix = reg(&d);
  const PFFieldInfo* next = field(ix, "next");
  PFObjectHandle head = NULL;
  for (int i = 0; i < 300000; ++i) {
    PFObjectHandle o = alloc(ix);
    if (head != NULL) {
      assert_pf_ok(PFObjectSetField(o, next, vh(head), kPFObjectHandle));
      PFObjectFree(head);
    }
    head = o;
  }
  PFObjectFree(head); /* a recursive release would overflow the stack */
}

/* ---- methods ---- */

static void test_methods(void** state) {
  (void)state;
  PFFunctionHandle c = ctor(g_rect);
  PFValue a[2] = {{.v_float64 = 2.0}, {.v_float64 = 3.0}};
  int codes[2] = {kPFFloat, kPFFloat}, rc;
  PFObjectHandle r = call(c, 2, a, codes, &rc).v_handle;
  assert_int_equal(rc, kPFObjectHandle);
  /* Bound: the object comes first by itself. */
  PFFunctionHandle area = method(r, "area");
  PFValue rv = call(area, 0, NULL, NULL, &rc);
  assert_true(rv.v_float64 == 6.0);
  const char* sig = NULL;
  assert_pf_ok(PFFuncGetInfo(area, NULL, &sig, NULL));
  assert_string_equal(sig, "float64()");
  /* Inherited, with an `object` first parameter. */
  PFFunctionHandle kind = method(r, "kind");
  rv = call(kind, 0, NULL, NULL, &rc);
  assert_string_equal(rv.v_str, "shape");
  /* A packed method. */
  PFFunctionHandle scale = method(r, "scale");
  PFValue two = {.v_float64 = 2.0};
  int fc = kPFFloat;
  rv = call(scale, 1, &two, &fc, &rc);
  assert_true(rv.v_float64 == 24.0);
  /* Static: unbound. */
  PFFunctionHandle count = method(r, "count");
  assert_int_equal(call(count, 0, NULL, NULL, &rc).v_int64, 3);
  /* The bound method holds the instance. */
  PFObjectFree(r);
  rv = call(area, 0, NULL, NULL, &rc);
  assert_true(rv.v_float64 == 24.0);
  /* Unbound, from the type: the object first; an override per type. */
  PFFunctionHandle shape_area_fn = NULL, rect_area_fn = NULL;
  assert_pf_ok(PFObjectTypeGetMethod(g_shape, "area", &shape_area_fn));
  assert_pf_ok(PFObjectTypeGetMethod(g_square, "area", &rect_area_fn));
  const char* name = NULL;
  const char* doc = NULL;
  assert_pf_ok(PFFuncGetInfo(rect_area_fn, &name, &sig, &doc));
  assert_string_equal(name, "t.Rect.area");
  assert_string_equal(sig, "float64(obj<t.Rect>)");
  assert_string_equal(doc, "w * h.");
  PFObjectHandle sq = alloc(g_square);
  ((Square*)data(sq))->rect.w = 5;
  ((Square*)data(sq))->rect.h = 5;
  PFValue self = vh(sq);
  int oc = kPFObjectHandle;
  assert_true(call(rect_area_fn, 1, &self, &oc, &rc).v_float64 == 25.0);
  assert_true(call(shape_area_fn, 1, &self, &oc, &rc).v_float64 == 0.0);
  /* A Shape is not a Rect: the typed call names both types. */
  PFObjectHandle s = alloc(g_shape);
  PFValue sv = vh(s);
  assert_pf_error(PFFuncCall(rect_area_fn, &sv, &oc, 1, &rv, &rc), kPFErrTypeError,
                  "typed function 't.Rect.area' float64(obj<t.Rect>): argument 0: expected "
                  "obj<t.Rect>, got t.Shape object");
  /* Misses and misuse. */
  PFFunctionHandle none = NULL;
  assert_pf_error(PFObjectGetMethod(s, "nope", &none), kPFErrAttributeError,
                  "'t.Shape' object has no method 'nope'");
  assert_pf_error(PFObjectTypeGetMethod(g_shape, "scale", &none), kPFErrAttributeError,
                  "object type 't.Shape' has no method 'scale'");
  assert_pf_error(PFObjectGetMethod(area, "area", &none), kPFErrTypeError, "is a function object");
  assert_pf_error(PFObjectGetMethod(s, NULL, &none), kPFErrTypeError, "'name' is NULL");
  assert_pf_error(PFObjectTypeGetMethod(1, "x", &none), kPFErrKeyError);
  assert_null(none);
  PFObjectFree(s);
  PFObjectFree(sq);
  PFFuncFree(shape_area_fn);
  PFFuncFree(rect_area_fn);
  PFFuncFree(count);
  PFFuncFree(scale);
  PFFuncFree(kind);
  PFFuncFree(area);
  PFFuncFree(c);
}

/* An instance method's object is checked, packed and typed methods alike:
 * NULL, a value that is not an object, an object of another type and an
 * instance of an ancestor are TypeErrors naming the method's type and what
 * was given; an instance of a descendant passes. (Before: NULL reached the
 * C function, and a packed method of t.Rect wrote past a t.Shape.) */
static void test_methods_check_their_object(void** state) {
  (void)state;
  static const char* const names[] = {"scale", "area", "kind", "__init__"};
  PFObjectHandle shape = alloc(g_shape), square = alloc(g_square), boxed = NULL;
  atomic_int fins = 0;
  assert_pf_ok(PFObjectCreateBoxed(&fins, pf_test_count_fin, &boxed));
  PFValue a[3] = {vh(NULL), {.v_float64 = 2.0}, {.v_float64 = 2.0}}, rv = vi(77);
  int c[3] = {kPFNull, kPFFloat, kPFFloat}, rc = 99;
  for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); ++k) {
    PFFunctionHandle f = NULL;
    assert_pf_ok(PFObjectTypeGetMethod(g_rect, names[k], &f));
    int n = k == 0 ? 2 : k == 3 ? 3 : 1;
    const char* key = k == 2 ? "t.Shape" : "t.Rect";
    char want[64];
    snprintf(want, sizeof(want), "expected obj<%s>", key);
    a[0] = vh(NULL), c[0] = kPFNull;
    assert_pf_error(PFFuncCall(f, a, c, n, &rv, &rc), kPFErrTypeError, names[k], want, "got null");
    a[0] = vi(5), c[0] = kPFInt;
    assert_pf_error(PFFuncCall(f, a, c, n, &rv, &rc), kPFErrTypeError, want, "got int");
    a[0] = vh(boxed), c[0] = kPFObjectHandle;
    assert_pf_error(PFFuncCall(f, a, c, n, &rv, &rc), kPFErrTypeError, want, "got boxed object");
    if (k != 2) { /* kind is t.Shape's: a t.Shape is its own */
      a[0] = vh(shape);
      assert_pf_error(PFFuncCall(f, a, c, n, &rv, &rc), kPFErrTypeError, want,
                      "got t.Shape object");
    }
    a[0] = vh(g_not_an_object); /* PFFuncCall's own check */
    assert_pf_error(PFFuncCall(f, a, c, n, &rv, &rc), kPFErrTypeError, "not a live object");
    /* Nothing is written on error; a descendant's instance passes. */
    assert_int_equal(rc, 99);
    if (k != 3) {
      a[0] = vh(square);
      assert_pf_ok(PFFuncCall(f, a, c, n, &rv, &rc));
      rc = 99;
    }
    PFFuncFree(f);
  }
  /* The bound form checks the same (PFFuncBind of an unbound method). */
  PFFunctionHandle scale = NULL, bound = NULL;
  assert_pf_ok(PFObjectTypeGetMethod(g_rect, "scale", &scale));
  int pos = 0, oc = kPFObjectHandle;
  PFValue sv = vh(shape);
  assert_pf_error(PFFuncCall(scale, NULL, NULL, 0, &rv, &rc), kPFErrTypeError,
                  "method 't.Rect.scale': takes the object (obj<t.Rect>) first, got no arguments");
  assert_pf_ok(PFFuncBind(scale, 1, &pos, &sv, &oc, NULL, &bound));
  assert_pf_error(PFFuncCall(bound, &a[1], &c[1], 1, &rv, &rc), kPFErrTypeError,
                  "expected obj<t.Rect>, got t.Shape object");
  PFFuncFree(bound);
  PFFuncFree(scale);
  /* A static method takes no object. */
  PFFunctionHandle count = NULL;
  assert_pf_ok(PFObjectTypeGetMethod(g_rect, "count", &count));
  assert_int_equal(call(count, 0, NULL, NULL, &rc).v_int64, 3);
  PFFuncFree(count);
  PFObjectFree(boxed);
  PFObjectFree(square);
  PFObjectFree(shape);
}

/* ---- the constructor ---- */

static atomic_int g_failing_fins;
static void failing_fin(void* p) {
  (void)p;
  atomic_fetch_add(&g_failing_fins, 1);
}
static int failing_init(PFValue* a, int* c, int n, PFRetValueHandle r, void* res) {
  (void)c, (void)r, (void)res;
  *(int64_t*)self_data(a[0].v_handle) = 99;
  return PFErrorSetFormat(kPFErrValueError, "failing_init: no, with %d arguments", n);
}
static PFObjectHandle g_made;
static PFObjectHandle factory(int64_t k) {
  if (k < 0) return NULL;
  PFObjectHandle o = NULL;
  PFObjectAlloc(k == 0 ? (uint32_t)g_shape : (uint32_t)g_rect, &o);
  g_made = o;
  return o;
}

static void test_constructor(void** state) {
  (void)state;
  /* Through an __init__: its metadata comes from it. */
  PFFunctionHandle c = ctor(g_shape);
  const char *name, *sig, *doc;
  assert_pf_ok(PFFuncGetInfo(c, &name, &sig, &doc));
  assert_string_equal(name, "t.Shape");
  assert_string_equal(sig, "obj<t.Shape>(str,int64)");
  assert_string_equal(doc, "A shape.");
  PFValue a[2] = {vs("tri"), vi(3)};
  int codes[2] = {kPFStr, kPFInt}, rc;
  PFObjectHandle s = call(c, 2, a, codes, &rc).v_handle;
  int code;
  assert_string_equal(get(s, "label", &code).v_str, "tri");
  assert_int_equal(get(s, "sides", &code).v_int64, 3);
  /* A wrong argument: __init__'s TypeError; the instance is released. */
  int fins = atomic_load(&g_shape_fins);
  codes[1] = kPFStr;
  PFValue rv;
  assert_pf_error(PFFuncCall(c, a, codes, 2, &rv, &rc), kPFErrTypeError,
                  "typed function 't.Shape.__init__'", "argument 2: expected int64, got str");
  assert_int_equal(atomic_load(&g_shape_fins), fins + 1);
  /* An inherited __init__ makes an instance of the type asked for. */
  PFFunctionHandle csq = ctor(g_square);
  assert_pf_ok(PFFuncGetInfo(csq, NULL, &sig, NULL));
  assert_string_equal(sig, "obj<t.Square>(float64,float64)");
  PFValue wh[2] = {{.v_float64 = 1}, {.v_float64 = 2}};
  int whc[2] = {kPFFloat, kPFFloat};
  PFObjectHandle sq = call(csq, 2, wh, whc, &rc).v_handle;
  uint32_t ti;
  assert_pf_ok(PFObjectGetTypeIndex(sq, &ti));
  assert_int_equal(ti, g_square);
  PFObjectFree(sq);
  PFFuncFree(csq);
  /* No __init__: no arguments. */
  static const PFObjectTypeDesc bare = {
      PF_OBJECT_TYPE_DESC_ABI, "t.Bare", NULL, 8, NULL, "Bare.", NULL, 0, NULL, 0};
  uint32_t bix = reg(&bare);
  PFFunctionHandle cb = ctor(bix);
  assert_pf_ok(PFFuncGetInfo(cb, NULL, &sig, NULL));
  assert_string_equal(sig, "obj<t.Bare>()");
  PFObjectHandle b = call(cb, 0, NULL, NULL, &rc).v_handle;
  assert_non_null(b);
  PFObjectFree(b);
  assert_pf_error(PFFuncCall(cb, a, codes, 1, &rv, &rc), kPFErrTypeError,
                  "t.Bare(): takes no arguments", "got 1");
  /* A failing packed __init__: its error, and the instance goes. */
  static const PFMethodDesc fm[] = {PF_METHOD_PACKED("__init__", failing_init, NULL)};
  static const PFObjectTypeDesc failing = {
      PF_OBJECT_TYPE_DESC_ABI, "t.Failing", NULL, 8, failing_fin, NULL, NULL, 0, fm, 1};
  PFFunctionHandle cf = ctor(reg(&failing));
  assert_pf_ok(PFFuncGetInfo(cf, NULL, &sig, NULL));
  assert_null(sig);
  assert_pf_error(PFFuncCall(cf, a, codes, 1, &rv, &rc), kPFErrValueError,
                  "failing_init: no, with 2 arguments");
  assert_int_equal(atomic_load(&g_failing_fins), 1);
  /* A factory: a static __init__ whose result must be an instance. */
  static const PFMethodDesc fa[] = {
      PF_STATIC_METHOD_TYPED("__init__", factory, "obj<t.Fact>(int64)", "By factory.")};
  static const PFObjectTypeDesc fact = {
      PF_OBJECT_TYPE_DESC_ABI, "t.Fact", "t.Rect", sizeof(Rect), NULL, NULL, NULL, 0, fa, 1};
  uint32_t fix = reg(&fact);
  PFFunctionHandle cfa = ctor(fix);
  assert_pf_ok(PFFuncGetInfo(cfa, NULL, &sig, NULL));
  assert_string_equal(sig, "obj<t.Fact>(int64)");
  PFValue k = vi(0);
  int kc = kPFInt;
  /* The typed factory itself refuses a Shape as its obj<t.Fact> result. */
  assert_pf_error(PFFuncCall(cfa, &k, &kc, 1, &rv, &rc), kPFErrTypeError,
                  "expected obj<t.Fact>, got t.Shape object");
  k = vi(-1);
  assert_pf_error(PFFuncCall(cfa, &k, &kc, 1, &rv, &rc), kPFErrTypeError,
                  "t.Fact(): its factory __init__ returned null, not an instance of t.Fact");
  PFFuncFree(cfa);
  PFFuncFree(cf);
  PFFuncFree(cb);
  PFObjectFree(s);
  PFFuncFree(c);
  PFFunctionHandle none = NULL;
  assert_pf_error(PFObjectTypeGetConstructor(7, &none), kPFErrKeyError);
  assert_pf_error(PFObjectTypeGetConstructor(g_shape, NULL), kPFErrTypeError);
}

/* ---- obj<KEY> in the grammar ---- */

static int64_t sides_of(PFObjectHandle s) { return ((Shape*)self_data(s))->sides; }
static PFObjectHandle pass_through(PFObjectHandle s) {
  PFObjectRetain(s);
  return s;
}

static void test_grammar(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)sides_of, " int64 ( obj < t.Shape > ) ", &f));
  const char* sig = NULL;
  assert_pf_ok(PFFuncGetInfo(f, NULL, &sig, NULL));
  assert_string_equal(sig, "int64(obj<t.Shape>)");
  PFObjectHandle sq = alloc(g_square);
  ((Shape*)data(sq))->sides = 4;
  PFValue v = vh(sq), rv;
  int c = kPFObjectHandle, rc;
  assert_int_equal(call(f, 1, &v, &c, &rc).v_int64, 4);
  /* Not an instance: another object, another code, null. */
  PFFunctionHandle g = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(noop_packed, NULL, NULL, &g));
  v = vh(g);
  assert_pf_error(PFFuncCall(f, &v, &c, 1, &rv, &rc), kPFErrTypeError,
                  "expected obj<t.Shape>, got function object");
  int ic = kPFInt;
  v = vi(3);
  assert_pf_error(PFFuncCall(f, &v, &ic, 1, &rv, &rc), kPFErrTypeError,
                  "expected obj<t.Shape>, got int");
  /* A result of the wrong type is refused and released. */
  PFFunctionHandle p = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)pass_through, "obj<t.Rect>(object)", &p));
  PFObjectHandle shape = alloc(g_shape);
  v = vh(shape);
  assert_pf_error(PFFuncCall(p, &v, &c, 1, &rv, &rc), kPFErrTypeError, "result",
                  "expected obj<t.Rect>, got t.Shape object");
  v = vh(sq);
  assert_ptr_equal(call(p, 1, &v, &c, &rc).v_handle, sq);
  assert_int_equal(rc, kPFObjectHandle);
  PFObjectFree(sq); /* the result's reference */
  /* Unknown keys are bad signatures, at their position. */
  PFFunctionHandle bad = NULL;
  assert_pf_error(PFFuncCreateFromTyped((void*)sides_of, "int64(obj<t.Nope>)", &bad),
                  kPFErrValueError, "bad signature \"int64(obj<t.Nope>)\" at position 10",
                  "unknown object type 't.Nope' (not registered)");
  assert_pf_error(PFFuncCreateFromTyped((void*)sides_of, "int64(obj<t.Shape)", &bad),
                  kPFErrValueError, "expected '>'");
  assert_pf_error(PFFuncCreateFromTyped((void*)sides_of, "int64(obj<>)", &bad), kPFErrValueError,
                  "expected an object type key");
  assert_pf_error(PFFuncCreateFromTyped((void*)sides_of, "int64(obj)", &bad), kPFErrValueError,
                  "write obj<KEY>");
  /* Metadata of a packed function, and a C function pointer over it. */
  assert_pf_ok(PFFuncSetInfo(g, NULL, "void(obj<t.Rect>)", NULL));
  assert_pf_ok(PFFuncGetInfo(g, NULL, &sig, NULL));
  assert_string_equal(sig, "void(obj<t.Rect>)");
  PFObjectHandle closure = NULL;
  void* fn = NULL;
  assert_pf_ok(PFFuncToCFunction(f, "int64(obj<t.Shape>)", &closure, &fn));
  int64_t (*cfn)(PFObjectHandle) = NULL;
  memcpy(&cfn, &fn, sizeof(fn));
  ((Shape*)data(shape))->sides = 9;
  assert_int_equal(cfn(shape), 9);
  assert_pf_ok(PFClosureCheckError(closure));
  assert_int_equal(cfn(g), 0); /* not a Shape: the zero result, the error kept */
  assert_pf_error(PFClosureCheckError(closure), kPFErrTypeError, "argument 0",
                  "expected obj<t.Shape>, got function object");
  PFObjectFree(closure);
  /* Binding the object of a typed method drops it from the signature. */
  PFFunctionHandle bound = NULL;
  int pos = 0;
  v = vh(shape);
  assert_pf_ok(PFFuncBind(f, 1, &pos, &v, &c, NULL, &bound));
  assert_pf_ok(PFFuncGetInfo(bound, NULL, &sig, NULL));
  assert_string_equal(sig, "int64()");
  assert_int_equal(call(bound, 0, NULL, NULL, &rc).v_int64, 9);
  PFFuncFree(bound);
  /* The named grammar's table does not list obj (it names each type). */
  const char* name;
  for (int i = 0; PFSignatureTypeInfo(i, &name, NULL) == 0; ++i)
    assert_string_not_equal(name, "obj");
  PFErrorClear();
  PFObjectFree(sq);
  PFObjectFree(shape);
  PFFuncFree(p);
  PFFuncFree(g);
  PFFuncFree(f);
}

/* The calls of a typed function over obj<KEY>, int64 and float64 that go
 * straight to the C function (an instance of KEY or of a descendant, the
 * exact codes), and those that take the general conversion: each with the
 * result or the error of the general path. */
static double shape_mix(PFObjectHandle s, int64_t i, double x) {
  return s == NULL ? -1.0 : (double)((Shape*)self_data(s))->sides * (double)i + x;
}
static void shape_touch(PFObjectHandle s) {
  if (s != NULL) ((Shape*)self_data(s))->sides += 1;
}
static double rect_width(PFObjectHandle r) { return r == NULL ? -1.0 : ((Rect*)self_data(r))->w; }

static void test_obj_args_fast_path(void** state) {
  (void)state;
  PFFunctionHandle mix = NULL, touch = NULL, width = NULL, g = NULL;
  assert_pf_ok(
      PFFuncCreateFromTyped((void*)shape_mix, "float64(obj<t.Shape>,int64,float64)", &mix));
  assert_pf_ok(PFFuncCreateFromTyped((void*)shape_touch, "void(obj<t.Shape>)", &touch));
  assert_pf_ok(PFFuncCreateFromTyped((void*)rect_width, "float64(obj<t.Rect>)", &width));
  assert_pf_ok(PFFuncCreateFromCFunc(noop_packed, NULL, NULL, &g));
  PFObjectHandle shape = alloc(g_shape), sq = alloc(g_square);
  ((Shape*)data(shape))->sides = 3;
  ((Shape*)data(sq))->sides = 4;
  ((Rect*)data(sq))->w = 2.5;
  PFValue a[3], rv;
  int c[3] = {kPFObjectHandle, kPFInt, kPFFloat}, rc;
  /* KEY itself and a descendant, exact codes. */
  a[0] = vh(shape), a[1] = vi(2), a[2].v_float64 = 0.5;
  assert_true(call(mix, 3, a, c, &rc).v_float64 == 6.5);
  assert_int_equal(rc, kPFFloat);
  a[0] = vh(sq);
  assert_true(call(mix, 3, a, c, &rc).v_float64 == 8.5);
  assert_true(call(width, 1, a, c, &rc).v_float64 == 2.5);
  call(touch, 1, a, c, &rc);
  assert_int_equal(rc, kPFNull);
  assert_int_equal(((Shape*)data(sq))->sides, 5);
  /* Codes that convert: an int for float64, a bool for int64, null for an object. */
  c[1] = kPFBool, a[1] = vi(1), c[2] = kPFInt, a[2] = vi(1);
  assert_true(call(mix, 3, a, c, &rc).v_float64 == 6.0);
  c[0] = kPFNull, a[0] = vh(NULL);
  assert_true(call(mix, 3, a, c, &rc).v_float64 == -1.0);
  assert_true(call(width, 1, a, c, &rc).v_float64 == -1.0);
  call(touch, 1, a, c, &rc);
  /* The errors of the general path: another object, an ancestor of KEY,
   * another code, a value out of range, the wrong count. */
  c[0] = kPFObjectHandle, a[0] = vh(g);
  assert_pf_error(PFFuncCall(mix, a, c, 3, &rv, &rc), kPFErrTypeError,
                  "typed function float64(obj<t.Shape>,int64,float64): argument 0: expected "
                  "obj<t.Shape>, got function object");
  assert_pf_error(PFFuncCall(touch, a, c, 1, &rv, &rc), kPFErrTypeError,
                  "typed function void(obj<t.Shape>): argument 0: expected obj<t.Shape>, got "
                  "function object");
  a[0] = vh(shape);
  assert_pf_error(PFFuncCall(width, a, c, 1, &rv, &rc), kPFErrTypeError,
                  "argument 0: expected obj<t.Rect>, got t.Shape object");
  c[0] = kPFInt, a[0] = vi(1);
  assert_pf_error(PFFuncCall(touch, a, c, 1, &rv, &rc), kPFErrTypeError,
                  "argument 0: expected obj<t.Shape>, got int");
  c[0] = kPFObjectHandle, a[0] = vh(shape), c[1] = kPFBool, a[1] = vi(1), c[2] = kPFStr,
  a[2] = vs("x");
  assert_pf_error(PFFuncCall(mix, a, c, 3, &rv, &rc), kPFErrTypeError,
                  "argument 2: expected float64, got str");
  c[2] = kPFInt, a[2] = vi(INT64_MAX);
  assert_pf_error(PFFuncCall(mix, a, c, 3, &rv, &rc), kPFErrValueError,
                  "argument 2: expected float64, got int 9223372036854775807, which a double "
                  "cannot hold exactly");
  assert_pf_error(PFFuncCall(mix, a, c, 2, &rv, &rc), kPFErrTypeError, "takes 3 arguments, got 2");
  assert_pf_error(PFFuncCall(touch, a, c, 2, &rv, &rc), kPFErrTypeError, "takes 1 argument, got 2");
  assert_pf_error(PFFuncCall(touch, a, c, 0, &rv, &rc), kPFErrTypeError, "takes 1 argument, got 0");
  PFErrorClear();
  PFObjectFree(sq);
  PFObjectFree(shape);
  PFFuncFree(g);
  PFFuncFree(width);
  PFFuncFree(touch);
  PFFuncFree(mix);
}

/* ---- descriptor tables ---- */

static int64_t mod_node_value(PFObjectHandle n) { return *(int64_t*)self_data(n); }

typedef struct {
  int64_t value;
  PFObjectHandle child;
} Node;
/* Fields that name types of the same table, before and after. */
static const PFFieldDesc k_node_fields[] = {
    PF_FIELD(Node, value, "int64", kPFFieldWritable, NULL),
    PF_FIELD(Node, child, "obj<t.mod.Leaf>", kPFFieldWritable, NULL),
};
static const PFMethodDesc k_node_methods[] = {
    PF_METHOD_TYPED("value_of", mod_node_value, "int64(obj<t.mod.Node>)", NULL)};
/* The child is listed before its parent: the table's order does not matter. */
static const PFObjectTypeDesc k_leaf = {PF_OBJECT_TYPE_DESC_ABI,
                                        "t.mod.Leaf",
                                        "t.mod.Node",
                                        sizeof(Node),
                                        NULL,
                                        NULL,
                                        NULL,
                                        0,
                                        NULL,
                                        0};
static const PFObjectTypeDesc k_node = {PF_OBJECT_TYPE_DESC_ABI,
                                        "t.mod.Node",
                                        NULL,
                                        sizeof(Node),
                                        NULL,
                                        NULL,
                                        k_node_fields,
                                        2,
                                        k_node_methods,
                                        1};
static const PFFuncDescriptor k_d_leaf = {PF_FUNC_DESCRIPTOR_ABI,
                                          kPFFuncDescriptorType,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          &k_leaf};
static const PFFuncDescriptor k_d_node = {PF_FUNC_DESCRIPTOR_ABI,
                                          kPFFuncDescriptorType,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          NULL,
                                          &k_node};
static const PFFuncDescriptor k_d_value = {PF_FUNC_DESCRIPTOR_ABI,
                                           kPFFuncDescriptorTyped,
                                           "t.mod.value",
                                           NULL,
                                           (void (*)(void))mod_node_value,
                                           "int64(obj<t.mod.Leaf>)",
                                           NULL,
                                           NULL,
                                           NULL,
                                           NULL};

static void test_descriptor_tables(void** state) {
  (void)state;
  const PFFuncDescriptor* table[] = {&k_d_leaf, &k_d_value, &k_d_node};
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromDescriptors(table, table + 3, &m));
  int n = 0;
  const uint32_t* ix = NULL;
  assert_pf_ok(PFModListTypes(m, &n, &ix));
  assert_int_equal(n, 2);
  assert_string_equal(PFObjectTypeName(ix[0]), "t.mod.Leaf");
  assert_string_equal(PFObjectTypeName(ix[1]), "t.mod.Node");
  assert_true(ix[1] < ix[0]); /* the parent is registered first */
  int nf = 0;
  const char** names = NULL;
  assert_pf_ok(PFModListFunctionNames(m, &nf, &names));
  assert_int_equal(nf, 1); /* types are not functions */
  PFFunctionHandle value = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.mod.value", 0, &value));
  PFObjectHandle leaf = alloc(ix[0]);
  ((Node*)data(leaf))->value = 12;
  PFValue v = vh(leaf);
  int c = kPFObjectHandle, rc;
  assert_int_equal(call(value, 1, &v, &c, &rc).v_int64, 12);
  /* Loading the table again registers nothing new. */
  PFModuleHandle m2 = NULL;
  assert_pf_ok(PFModLoadFromDescriptors(table, table + 3, &m2));
  const uint32_t* ix2 = NULL;
  assert_pf_ok(PFModListTypes(m2, &n, &ix2));
  assert_int_equal(ix2[0], ix[0]);
  assert_int_equal(ix2[1], ix[1]);
  PFModFree(m2);
  assert_pf_error(PFModListTypes(m, NULL, &ix2), kPFErrTypeError);
  assert_pf_error(PFModListTypes(leaf, &n, &ix2), kPFErrTypeError, "not a live module handle");
  PFObjectFree(leaf);
  PFFuncFree(value);
  PFModFree(m);
  /* A module without types lists none. */
  const PFFuncDescriptor* fonly[] = {&k_d_value};
  assert_pf_ok(PFModLoadFromDescriptors(fonly, fonly + 1, &m));
  assert_pf_ok(PFModListTypes(m, &n, &ix));
  assert_int_equal(n, 0);
  PFModFree(m);
}

static void test_descriptor_table_errors(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  /* Two types whose parents make a cycle: none is registered. */
  static const PFObjectTypeDesc a = {
      PF_OBJECT_TYPE_DESC_ABI, "t.cyc.A", "t.cyc.B", 8, NULL, NULL, NULL, 0, NULL, 0};
  static const PFObjectTypeDesc b = {
      PF_OBJECT_TYPE_DESC_ABI, "t.cyc.B", "t.cyc.A", 8, NULL, NULL, NULL, 0, NULL, 0};
  static const PFObjectTypeDesc ok = {
      PF_OBJECT_TYPE_DESC_ABI, "t.cyc.Ok", NULL, 8, NULL, NULL, NULL, 0, NULL, 0};
  PFFuncDescriptor da = {
      PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorType, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &a};
  PFFuncDescriptor db = da, dok = da;
  db.object_type = &b;
  dok.object_type = &ok;
  const PFFuncDescriptor* cyc[] = {&dok, &da, &db};
  assert_pf_error(PFModLoadFromDescriptors(cyc, cyc + 3, &m), kPFErrValueError,
                  "its parents form a cycle");
  uint32_t found = 1;
  assert_pf_ok(PFObjectTypeFind("t.cyc.Ok", &found));
  assert_int_equal(found, 0); /* all or nothing */
  /* The same key twice in one table. */
  const PFFuncDescriptor* twice[] = {&dok, &dok};
  assert_pf_error(PFModLoadFromDescriptors(twice, twice + 2, &m), kPFErrValueError,
                  "object type 't.cyc.Ok' is given twice");
  /* A type descriptor without a description. */
  PFFuncDescriptor none = da;
  none.object_type = NULL;
  const PFFuncDescriptor* tn[] = {&none};
  assert_pf_error(PFModLoadFromDescriptors(tn, tn + 1, &m), kPFErrTypeError,
                  "object type description 0 is NULL");
  /* Kind 3 exists only in layout 3. */
  PFFuncDescriptor old = da;
  old.abi = 2;
  const PFFuncDescriptor* to[] = {&old};
  assert_pf_error(PFModLoadFromDescriptors(to, to + 1, &m), kPFErrValueError,
                  "descriptor kind 3 (an object type), which needs layout version 3, not 2");
  assert_null(m);
}

/* A module built against layout 2 (pre-pack, no object type) still loads:
 * its descriptors end before `object_type`, here at the end of a page. */
typedef struct {
  uint32_t abi, kind;
  const char* name;
  PFPackedCFunc packed;
  void (*typed)(void);
  const char* signature;
  const char* doc;
  const char* pack_format;
  PFPrePackFunc prepack;
} descriptor_v2;

static int answer(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)res;
  PFValue v = {.v_int64 = 42};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_descriptor_layout_2(void** state) {
  (void)state;
  _Static_assert(sizeof(descriptor_v2) == offsetof(PFFuncDescriptor, object_type),
                 "layout 2 is a prefix of the descriptor");
  long page = sysconf(_SC_PAGESIZE);
  char* mem =
      mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(mem != MAP_FAILED);
  assert_int_equal(mprotect(mem + page, (size_t)page, PROT_NONE), 0);
  descriptor_v2* d = (descriptor_v2*)(void*)(mem + page - sizeof(descriptor_v2));
  *d = (descriptor_v2){2, kPFFuncDescriptorPacked, "t.v2", answer, NULL, NULL, "two"};
  const PFFuncDescriptor* t[] = {(const PFFuncDescriptor*)(void*)d};
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromDescriptors(t, t + 1, &m));
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(m, "t.v2", 0, &f));
  int rc;
  assert_int_equal(call(f, 0, NULL, NULL, &rc).v_int64, 42);
  PFFuncFree(f);
  PFModFree(m);
  munmap(mem, (size_t)page * 2);
}

/* ---- the API table ---- */

static void test_api_table_slots(void** state) {
  (void)state;
  const PFApi* t = PFGetApiBase()->GetApi(PF_API_VERSION);
  assert_non_null(t);
  assert_true(PF_API_VERSION >= 9);
#define SLOT(name, at)              \
  assert_true(t->name == PF##name); \
  assert_int_equal(offsetof(PFApi, name), (at) * sizeof(void*))
  SLOT(ObjectTypeRegister, 100);
  SLOT(ObjectTypeFind, 101);
  SLOT(ObjectTypeGetInfo, 102);
  SLOT(ObjectTypeGetField, 103);
  SLOT(ObjectTypeGetMethod, 104);
  SLOT(ObjectTypeGetConstructor, 105);
  SLOT(ObjectAlloc, 106);
  SLOT(ObjectGetData, 107);
  SLOT(ObjectIsInstance, 108);
  SLOT(ObjectGetField, 109);
  SLOT(ObjectSetField, 110);
  SLOT(ObjectGetFieldByName, 111);
  SLOT(ObjectSetFieldByName, 112);
  SLOT(ObjectGetMethod, 113);
  SLOT(ModListTypes, 114);
#undef SLOT
  /* The structs a binding mirrors report their sizes. */
  const struct {
    const char* name;
    size_t size;
  } sizes[] = {{"PFObjectTypeDesc", sizeof(PFObjectTypeDesc)},
               {"PFFieldDesc", sizeof(PFFieldDesc)},
               {"PFMethodDesc", sizeof(PFMethodDesc)},
               {"PFObjectTypeInfo", sizeof(PFObjectTypeInfo)},
               {"PFFieldInfo", sizeof(PFFieldInfo)},
               {"PFMethodInfo", sizeof(PFMethodInfo)}};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); ++i) {
    size_t got = 0;
    assert_pf_ok(PFGetStructSize(sizes[i].name, &got));
    assert_int_equal(got, sizes[i].size);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_register_and_describe),
      cmocka_unit_test(test_register_again),
      cmocka_unit_test(test_bad_descriptions),
      cmocka_unit_test(test_alloc_and_data),
      cmocka_unit_test(test_every_field_type),
      cmocka_unit_test(test_zeroed_instance_round_trips),
      cmocka_unit_test(test_field_write_errors),
      cmocka_unit_test(test_release_chain_without_recursion),
      cmocka_unit_test(test_methods),
      cmocka_unit_test(test_methods_check_their_object),
      cmocka_unit_test(test_constructor),
      cmocka_unit_test(test_grammar),
      cmocka_unit_test(test_obj_args_fast_path),
      cmocka_unit_test(test_descriptor_tables),
      cmocka_unit_test(test_descriptor_table_errors),
      cmocka_unit_test(test_descriptor_layout_2),
      cmocka_unit_test(test_api_table_slots),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
