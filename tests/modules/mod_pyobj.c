/* Test fixture for tests/python/test_object_types.py: object types with
 * every kind of field, each kind of constructor, inheritance with an
 * override, and functions that take and return instances. */
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "packedfunc/c_api.h"

static void* data_of(PFObjectHandle self) {
  void* d = NULL;
  PFObjectGetData(self, &d);
  return d;
}

/* ---- pyt.Scalars: a field of each plain type, no constructor ---- */

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
  int64_t ro;
} Scalars;

#define W kPFFieldWritable
static const PFFieldDesc k_scalar_fields[] = {
    PF_FIELD(Scalars, i8, "int8", W, NULL),     PF_FIELD(Scalars, i16, "int16", W, NULL),
    PF_FIELD(Scalars, i32, "int32", W, NULL),   PF_FIELD(Scalars, i64, "int64", W, NULL),
    PF_FIELD(Scalars, u8, "uint8", W, NULL),    PF_FIELD(Scalars, u16, "uint16", W, NULL),
    PF_FIELD(Scalars, u32, "uint32", W, NULL),  PF_FIELD(Scalars, u64, "uint64", W, NULL),
    PF_FIELD(Scalars, f32, "float32", W, NULL), PF_FIELD(Scalars, f64, "float64", W, NULL),
    PF_FIELD(Scalars, b, "bool", W, "A flag."), PF_FIELD(Scalars, ro, "int64", 0, "Fixed."),
};

/* Sets ro (read-only to hosts), as C code may. */
static void scalars_set_ro(PFObjectHandle self, int64_t v) { ((Scalars*)data_of(self))->ro = v; }

static const PFMethodDesc k_scalar_methods[] = {
    PF_METHOD_TYPED("set_ro", scalars_set_ro, "void(obj<pyt.Scalars>,int64)", "Sets ro."),
};

static const PFObjectTypeDesc k_scalars = {PF_OBJECT_TYPE_DESC_ABI,
                                           "pyt.Scalars",
                                           NULL,
                                           sizeof(Scalars),
                                           NULL,
                                           "One of each number.",
                                           k_scalar_fields,
                                           PF_COUNTOF(k_scalar_fields),
                                           k_scalar_methods,
                                           PF_COUNTOF(k_scalar_methods)};
PF_REGISTER_OBJECT_TYPE(k_scalars);

/* ---- pyt.Point: every field writable, no constructor: copyable ---- */

typedef struct {
  double x, y;
} Point;

static double point_norm2(PFObjectHandle p) {
  const Point* q = data_of(p);
  return q->x * q->x + q->y * q->y;
}

static const PFFieldDesc k_point_fields[] = {
    PF_FIELD(Point, x, "float64", W, "The abscissa."),
    PF_FIELD(Point, y, "float64", W, "The ordinate."),
};
static const PFMethodDesc k_point_methods[] = {
    PF_METHOD_TYPED("norm2", point_norm2, "float64(obj<pyt.Point>)", "x*x + y*y."),
};
static const PFObjectTypeDesc k_point = {PF_OBJECT_TYPE_DESC_ABI,
                                         "pyt.Point",
                                         NULL,
                                         sizeof(Point),
                                         NULL,
                                         "A point.",
                                         k_point_fields,
                                         PF_COUNTOF(k_point_fields),
                                         k_point_methods,
                                         PF_COUNTOF(k_point_methods)};
PF_REGISTER_OBJECT_TYPE(k_point);

static PFObjectHandle make_point(double x, double y) {
  uint32_t ti = 0;
  PFObjectHandle p = NULL;
  if (PFObjectTypeFind("pyt.Point", &ti) != 0 || PFObjectAlloc(ti, &p) != 0) return NULL;
  Point* q = data_of(p);
  q->x = x;
  q->y = y;
  return p;
}
PF_REGISTER_TYPED("pyt.make_point", make_point, "obj<pyt.Point>(float64,float64)");
PF_REGISTER_TYPED("pyt.norm2", point_norm2, "float64(obj<pyt.Point>)");

/* ---- pyt.Holder: a field of each pointer type, all writable ---- */

typedef struct {
  char* s;
  PFByteArray* by;
  void* p;
  DLDataType dt;
  DLDevice dev;
  PFObjectHandle t;
  PFObjectHandle f;
  PFObjectHandle o;
  PFObjectHandle pt;
  PFObjectHandle shp;
} Holder;

static const PFFieldDesc k_holder_fields[] = {
    PF_FIELD(Holder, s, "str", W, NULL),
    PF_FIELD(Holder, by, "bytes", W, NULL),
    PF_FIELD(Holder, p, "ptr", W, NULL),
    PF_FIELD(Holder, dt, "dtype", W, NULL),
    PF_FIELD(Holder, dev, "device", W, NULL),
    PF_FIELD(Holder, t, "tensor", W, NULL),
    PF_FIELD(Holder, f, "func", W, NULL),
    PF_FIELD(Holder, o, "object", W, NULL),
    PF_FIELD(Holder, pt, "obj<pyt.Point>", W, NULL),
    PF_FIELD(Holder, shp, "shape", W, NULL),
};
static const PFObjectTypeDesc k_holder = {
    PF_OBJECT_TYPE_DESC_ABI,     "pyt.Holder", NULL, sizeof(Holder), NULL, NULL, k_holder_fields,
    PF_COUNTOF(k_holder_fields), NULL,         0};
PF_REGISTER_OBJECT_TYPE(k_holder);

/* ---- pyt.Every: a field of every type of the grammar, named v_TYPE, all
 * writable, no constructor: a zeroed instance reads, copies and takes back
 * every field ---- */

typedef struct {
  int8_t v_int8;
  int16_t v_int16;
  int32_t v_int32;
  int64_t v_int64;
  uint8_t v_uint8;
  uint16_t v_uint16;
  uint32_t v_uint32;
  uint64_t v_uint64;
  bool v_bool;
  float v_float32;
  double v_float64;
  char* v_str;
  PFByteArray* v_bytes;
  void* v_ptr;
  PFObjectHandle v_tensor;
  DLDataType v_dtype;
  DLDevice v_device;
  PFObjectHandle v_func, v_array, v_map, v_shape, v_object, v_list, v_dict, v_obj;
} Every;

#define EVERY(member, type) PF_FIELD(Every, member, type, W, NULL)
static const PFFieldDesc k_every_fields[] = {
    EVERY(v_int8, "int8"),          EVERY(v_int16, "int16"),     EVERY(v_int32, "int32"),
    EVERY(v_int64, "int64"),        EVERY(v_uint8, "uint8"),     EVERY(v_uint16, "uint16"),
    EVERY(v_uint32, "uint32"),      EVERY(v_uint64, "uint64"),   EVERY(v_bool, "bool"),
    EVERY(v_float32, "float32"),    EVERY(v_float64, "float64"), EVERY(v_str, "str"),
    EVERY(v_bytes, "bytes"),        EVERY(v_ptr, "ptr"),         EVERY(v_tensor, "tensor"),
    EVERY(v_dtype, "dtype"),        EVERY(v_device, "device"),   EVERY(v_func, "func"),
    EVERY(v_array, "array"),        EVERY(v_map, "map"),         EVERY(v_shape, "shape"),
    EVERY(v_object, "object"),      EVERY(v_list, "list"),       EVERY(v_dict, "dict"),
    EVERY(v_obj, "obj<pyt.Point>"),
};
#undef EVERY
static const PFObjectTypeDesc k_every = {
    PF_OBJECT_TYPE_DESC_ABI,    "pyt.Every", NULL, sizeof(Every), NULL, NULL, k_every_fields,
    PF_COUNTOF(k_every_fields), NULL,        0};
PF_REGISTER_OBJECT_TYPE(k_every);

/* ---- pyt.Base and pyt.Child: inheritance, an override, a callback ---- */

static atomic_llong g_live; /* Bases made by __init__ and not yet finalized */

typedef struct {
  int64_t v;
  int inited;
} Base;

typedef struct {
  Base base;
  int64_t extra;
} Child;

static void base_fin(void* data) {
  if (((Base*)data)->inited) atomic_fetch_sub(&g_live, 1);
}

static void base_init(PFObjectHandle self, int64_t v) {
  Base* b = data_of(self);
  b->v = v;
  if (!b->inited) atomic_fetch_add(&g_live, 1);
  b->inited = 1;
}

static const char* base_who(PFObjectHandle self) {
  (void)self;
  return "base";
}

static const char* child_who(PFObjectHandle self) {
  (void)self;
  return "child";
}

static int64_t live(void) { return atomic_load(&g_live); }
PF_REGISTER_TYPED("pyt.live", live, "int64()");

/* visit(f): calls f(self) and returns what it returns. */
static int base_visit(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || codes[1] != kPFFuncHandle)
    return PFErrorSetFormat(kPFErrTypeError, "pyt.Base.visit: takes a function");
  PFValue r;
  int rc;
  if (PFFuncCall(args[1].v_handle, &args[0], &codes[0], 1, &r, &rc) != 0) return -1;
  int out = PFCFuncSetReturn(ret, &r, &rc, 1);
  if (rc == kPFObjectHandle || rc == kPFFuncHandle || rc == kPFModuleHandle)
    PFObjectFree(r.v_handle);
  return out;
}

static int64_t base_twice(int64_t x) { return 2 * x; }

static const PFFieldDesc k_base_fields[] = {PF_FIELD(Base, v, "int64", W, "A value.")};
static const PFMethodDesc k_base_methods[] = {
    PF_METHOD_TYPED("__init__", base_init, "void(obj<pyt.Base>,int64)", "Makes a Base of V."),
    PF_METHOD_TYPED("who", base_who, "str(obj<pyt.Base>)", "Says which."),
    {"visit", base_visit, NULL, NULL, 0, "Calls F with the object."},
    PF_STATIC_METHOD_TYPED("twice", base_twice, "int64(int64)", "2*x."),
};
static const PFObjectTypeDesc k_base = {PF_OBJECT_TYPE_DESC_ABI,
                                        "pyt.Base",
                                        NULL,
                                        sizeof(Base),
                                        base_fin,
                                        "A base.",
                                        k_base_fields,
                                        PF_COUNTOF(k_base_fields),
                                        k_base_methods,
                                        PF_COUNTOF(k_base_methods)};
PF_REGISTER_OBJECT_TYPE(k_base);

static const PFFieldDesc k_child_fields[] = {PF_FIELD(Child, extra, "int64", W, NULL)};
static const PFMethodDesc k_child_methods[] = {
    PF_METHOD_TYPED("who", child_who, "str(obj<pyt.Child>)", "Says which, differently."),
};
static const PFObjectTypeDesc k_child = {PF_OBJECT_TYPE_DESC_ABI,
                                         "pyt.Child",
                                         "pyt.Base",
                                         sizeof(Child),
                                         NULL,
                                         "A child.",
                                         k_child_fields,
                                         PF_COUNTOF(k_child_fields),
                                         k_child_methods,
                                         PF_COUNTOF(k_child_methods)};
PF_REGISTER_OBJECT_TYPE(k_child);

static int64_t child_extra(PFObjectHandle c) { return ((Child*)data_of(c))->extra; }
PF_REGISTER_TYPED("pyt.child_extra", child_extra, "int64(obj<pyt.Child>)");

/* A Child made in C, to come to Python first as a result. */
static PFObjectHandle make_child(int64_t v) {
  uint32_t ti = 0;
  PFObjectHandle c = NULL;
  if (PFObjectTypeFind("pyt.Child", &ti) != 0 || PFObjectAlloc(ti, &c) != 0) return NULL;
  base_init(c, v);
  return c;
}
PF_REGISTER_TYPED("pyt.make_child", make_child, "obj<pyt.Child>(int64)");

/* ---- pyt.Made: a static factory; pyt.Loose: a packed __init__ ---- */

typedef struct {
  int64_t v;
} Made;

static PFObjectHandle made_new(int64_t v) {
  uint32_t ti = 0;
  PFObjectHandle m = NULL;
  if (PFObjectTypeFind("pyt.Made", &ti) != 0 || PFObjectAlloc(ti, &m) != 0) return NULL;
  ((Made*)data_of(m))->v = v * 10;
  return m;
}

static const PFFieldDesc k_made_fields[] = {PF_FIELD(Made, v, "int64", W, NULL)};
static const PFMethodDesc k_made_methods[] = {
    PF_STATIC_METHOD_TYPED("__init__", made_new, "obj<pyt.Made>(int64)", "Makes one of 10*V."),
};
static const PFObjectTypeDesc k_made = {PF_OBJECT_TYPE_DESC_ABI,
                                        "pyt.Made",
                                        NULL,
                                        sizeof(Made),
                                        NULL,
                                        NULL,
                                        k_made_fields,
                                        PF_COUNTOF(k_made_fields),
                                        k_made_methods,
                                        PF_COUNTOF(k_made_methods)};
PF_REGISTER_OBJECT_TYPE(k_made);

typedef struct {
  int64_t nargs;
} Loose;

static int loose_init(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)ret, (void)res;
  ((Loose*)data_of(args[0].v_handle))->nargs = n - 1;
  return 0;
}

static const PFFieldDesc k_loose_fields[] = {PF_FIELD(Loose, nargs, "int64", W, NULL)};
static const PFMethodDesc k_loose_methods[] = {
    {"__init__", loose_init, NULL, NULL, 0, "Counts its arguments."},
};
static const PFObjectTypeDesc k_loose = {PF_OBJECT_TYPE_DESC_ABI,
                                         "pyt.Loose",
                                         NULL,
                                         sizeof(Loose),
                                         NULL,
                                         NULL,
                                         k_loose_fields,
                                         PF_COUNTOF(k_loose_fields),
                                         k_loose_methods,
                                         PF_COUNTOF(k_loose_methods)};
PF_REGISTER_OBJECT_TYPE(k_loose);

/* ---- pyt.Bound, pyt.Sub: types for register_object, pyt.Late: unused ---- */

typedef struct {
  int64_t n;
} Bound;

static int64_t bound_get(PFObjectHandle self) { return ((Bound*)data_of(self))->n; }

static const PFFieldDesc k_bound_fields[] = {PF_FIELD(Bound, n, "int64", W, NULL)};
static const PFMethodDesc k_bound_methods[] = {
    PF_METHOD_TYPED("get", bound_get, "int64(obj<pyt.Bound>)", "n."),
};
static const PFObjectTypeDesc k_bound = {PF_OBJECT_TYPE_DESC_ABI,
                                         "pyt.Bound",
                                         NULL,
                                         sizeof(Bound),
                                         NULL,
                                         "Bound in Python.",
                                         k_bound_fields,
                                         PF_COUNTOF(k_bound_fields),
                                         k_bound_methods,
                                         PF_COUNTOF(k_bound_methods)};
PF_REGISTER_OBJECT_TYPE(k_bound);

static const PFObjectTypeDesc k_bound_sub = {PF_OBJECT_TYPE_DESC_ABI,
                                             "pyt.BoundSub",
                                             "pyt.Bound",
                                             sizeof(Bound),
                                             NULL,
                                             NULL,
                                             NULL,
                                             0,
                                             NULL,
                                             0};
PF_REGISTER_OBJECT_TYPE(k_bound_sub);

/* pyt.Slots, pyt.SlotsDict, pyt.SlotsOwn: root types with pyt.Bound's field,
 * for register_object's slotted classes (one key per way of declaring
 * slots, since a type has one class per process). */
#define PYT_PLAIN_TYPE(key)                                                          \
  {                                                                                  \
    PF_OBJECT_TYPE_DESC_ABI, (key), NULL, sizeof(Bound), NULL, NULL, k_bound_fields, \
        PF_COUNTOF(k_bound_fields), NULL, 0                                          \
  }
static const PFObjectTypeDesc k_slots = PYT_PLAIN_TYPE("pyt.Slots");
PF_REGISTER_OBJECT_TYPE(k_slots);
static const PFObjectTypeDesc k_slots_dict = PYT_PLAIN_TYPE("pyt.SlotsDict");
PF_REGISTER_OBJECT_TYPE(k_slots_dict);
static const PFObjectTypeDesc k_slots_own = PYT_PLAIN_TYPE("pyt.SlotsOwn");
PF_REGISTER_OBJECT_TYPE(k_slots_own);

static const PFObjectTypeDesc k_late = {
    PF_OBJECT_TYPE_DESC_ABI, "pyt.Late", "pyt.Base", sizeof(Base), NULL, NULL, NULL, 0, NULL, 0};
PF_REGISTER_OBJECT_TYPE(k_late);

/* Echoes any object: an instance comes back as itself. */
static PFObjectHandle echo_object(PFObjectHandle o) {
  if (o != NULL) PFObjectRetain(o);
  return o;
}
PF_REGISTER_TYPED("pyt.echo", echo_object, "object(object)");

/* ---- pyt.Dog: defaults, hand releases while a call converts, a method
 * that reads a str field while another thread writes it ---- */

typedef struct {
  int64_t age;
  int64_t tricks;
  char* name;
} Dog;

static atomic_llong g_dog_fins;     /* Dogs finalized */
static atomic_llong g_dog_watching; /* watch() calls that have read the name */

static void dog_fin(void* data) {
  (void)data;
  atomic_fetch_add(&g_dog_fins, 1);
}

static void dog_init(PFObjectHandle self, int64_t age) { ((Dog*)data_of(self))->age = age; }

/* Adds n tricks; returns them, plus 1000 per Dog finalized so far (so that
 * a caller sees whether this one was freed before it ran). */
static int64_t dog_learn(PFObjectHandle self, int64_t n) {
  Dog* d = data_of(self);
  d->tricks += n;
  return d->tricks + 1000 * atomic_load(&g_dog_fins);
}

/* Reads the name, then for up to `ms` milliseconds watches whether another
 * thread replaces it, and reads what it read again (freed memory if it was
 * replaced). Its length, or -1 when the name changed while it ran. */
static int64_t dog_watch(PFObjectHandle self, int64_t ms) {
  Dog* d = data_of(self);
  const char* seen = __atomic_load_n(&d->name, __ATOMIC_ACQUIRE);
  size_t len = seen != NULL ? strlen(seen) : 0;
  atomic_fetch_add(&g_dog_watching, 1);
  int changed = 0;
  for (int64_t i = 0; i < ms && !changed; ++i) {
    struct timespec t = {0, 1000000};
    nanosleep(&t, NULL);
    changed = __atomic_load_n(&d->name, __ATOMIC_ACQUIRE) != seen;
  }
  size_t again = seen != NULL ? strlen(seen) : 0;
  return changed || again != len ? -1 : (int64_t)len;
}

static int64_t dog_fins(void) { return atomic_load(&g_dog_fins); }
static int64_t dog_watching(void) { return atomic_load(&g_dog_watching); }
PF_REGISTER_TYPED("pyt.dog_fins", dog_fins, "int64()");
PF_REGISTER_TYPED("pyt.dog_watching", dog_watching, "int64()");
PF_REGISTER_TYPED("pyt.dog_learn", dog_learn, "int64(dog: obj<pyt.Dog>, n: int64)");

static const PFFieldDesc k_dog_fields[] = {
    PF_FIELD(Dog, age, "int64", W, NULL),
    PF_FIELD(Dog, tricks, "int64", W, NULL),
    PF_FIELD(Dog, name, "str", W, NULL),
};
static const PFMethodDesc k_dog_methods[] = {
    PF_METHOD_TYPED("__init__", dog_init, "void(self: obj<pyt.Dog>, age: int64 = 3)", NULL),
    PF_METHOD_TYPED("learn", dog_learn, "int64(self: obj<pyt.Dog>, n: int64 = 1)", NULL),
    PF_METHOD_TYPED("watch", dog_watch, "int64(self: obj<pyt.Dog>, ms: int64)", NULL),
};
static const PFObjectTypeDesc k_dog = {.abi = PF_OBJECT_TYPE_DESC_ABI,
                                       .key = "pyt.Dog",
                                       .instance_size = sizeof(Dog),
                                       .finalizer = dog_fin,
                                       .fields = k_dog_fields,
                                       .num_fields = PF_COUNTOF(k_dog_fields),
                                       .methods = k_dog_methods,
                                       .num_methods = PF_COUNTOF(k_dog_methods)};
PF_REGISTER_OBJECT_TYPE(k_dog);

/* ---- pyt.Names: members named as the binding's own attributes (fields
 * type_index, _handle, _data, _code, _loan; methods handle, _adopt);
 * pyt.DunderMethod, pyt.DunderField: names Python keeps for itself ---- */

typedef struct {
  int64_t type_index;
  PFObjectHandle _handle;
  char* _data;
  int32_t _code;
  double _loan;
} Names;

static atomic_llong g_names_alive; /* Names initialized and not yet finalized */

static void names_fin(void* data) {
  (void)data;
  atomic_fetch_sub(&g_names_alive, 1);
}

static void names_init(PFObjectHandle self) {
  ((Names*)data_of(self))->type_index = 7;
  atomic_fetch_add(&g_names_alive, 1);
}

static int64_t names_handle(PFObjectHandle self) { return ((Names*)data_of(self))->_code; }
static int64_t names_adopt(PFObjectHandle self, int64_t n) {
  return ((Names*)data_of(self))->type_index + n;
}
static int64_t names_alive(void) { return atomic_load(&g_names_alive); }
PF_REGISTER_TYPED("pyt.names_alive", names_alive, "int64()");

static const PFFieldDesc k_names_fields[] = {
    PF_FIELD(Names, type_index, "int64", W, NULL), PF_FIELD(Names, _handle, "object", W, NULL),
    PF_FIELD(Names, _data, "str", W, NULL),        PF_FIELD(Names, _code, "int32", W, NULL),
    PF_FIELD(Names, _loan, "float64", W, NULL),
};
static const PFMethodDesc k_names_methods[] = {
    PF_METHOD_TYPED("__init__", names_init, "void(self: obj<pyt.Names>)", NULL),
    PF_METHOD_TYPED("handle", names_handle, "int64(self: obj<pyt.Names>)", "_code."),
    PF_METHOD_TYPED("_adopt", names_adopt, "int64(self: obj<pyt.Names>, n: int64)", NULL),
};
static const PFObjectTypeDesc k_names = {.abi = PF_OBJECT_TYPE_DESC_ABI,
                                         .key = "pyt.Names",
                                         .instance_size = sizeof(Names),
                                         .finalizer = names_fin,
                                         .fields = k_names_fields,
                                         .num_fields = PF_COUNTOF(k_names_fields),
                                         .methods = k_names_methods,
                                         .num_methods = PF_COUNTOF(k_names_methods)};
PF_REGISTER_OBJECT_TYPE(k_names);

static const PFMethodDesc k_dunder_methods[] = {
    PF_METHOD_TYPED("__class__", names_handle, "int64(self: obj<pyt.DunderMethod>)", NULL),
};
static const PFObjectTypeDesc k_dunder_method = {.abi = PF_OBJECT_TYPE_DESC_ABI,
                                                 .key = "pyt.DunderMethod",
                                                 .instance_size = sizeof(Names),
                                                 .methods = k_dunder_methods,
                                                 .num_methods = PF_COUNTOF(k_dunder_methods)};
PF_REGISTER_OBJECT_TYPE(k_dunder_method);

/* Not PF_FIELD: the member it names is not called __dict__. */
static const PFFieldDesc k_dunder_fields[] = {
    {"__dict__", "int32", offsetof(Names, _code), W, NULL},
};
static const PFObjectTypeDesc k_dunder_field = {.abi = PF_OBJECT_TYPE_DESC_ABI,
                                                .key = "pyt.DunderField",
                                                .instance_size = sizeof(Names),
                                                .fields = k_dunder_fields,
                                                .num_fields = PF_COUNTOF(k_dunder_fields)};
PF_REGISTER_OBJECT_TYPE(k_dunder_field);
