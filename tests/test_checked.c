/* Checked registrations (checked.h): what PF_REGISTER_CHECKED,
 * PF_METHOD_CHECKED and PF_STATIC_METHOD_CHECKED register is what the
 * string forms register with the hand-written signature, for every type of
 * the grammar, and it calls. The compile errors of mismatched ones are
 * tools/test-checked.sh's. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "support/pf_test.h"

/* ---- global functions, each registered both ways ---- */

static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }
PF_REGISTER_CHECKED("ck.clamp", clamp, PF_RET(float64), PF_ARG(float64, x),
                    PF_ARG_DEFAULT(float64, lo, 0), PF_ARG_DEFAULT(float64, hi, 1),
                    PF_DOC("Clamps x to [lo, hi]."));
PF_REGISTER_TYPED("str.clamp", clamp, "float64(x: float64, lo: float64 = 0, hi: float64 = 1)",
                  "Clamps x to [lo, hi].");

static int64_t ints(int8_t a, int16_t b, int32_t c, int64_t d, uint8_t e, uint16_t f, uint32_t g,
                    uint64_t h) {
  return a + b + c + d + e + f + (int64_t)g + (int64_t)h;
}
PF_REGISTER_CHECKED("ck.ints", ints, PF_RET(int64), PF_ARG(int8, a), PF_ARG(int16, b),
                    PF_ARG(int32, c), PF_ARG(int64, d), PF_ARG(uint8, e), PF_ARG(uint16, f),
                    PF_ARG(uint32, g), PF_ARG_DEFAULT(uint64, h, 0x10));
PF_REGISTER_TYPED("str.ints", ints,
                  "int64(a:int8,b:int16,c:int32,d:int64,e:uint8,f:uint16,g:uint32,h:uint64=16)");

static bool flip(bool b, float f) { return f > 0 ? !b : b; }
PF_REGISTER_CHECKED("ck.flip", flip, PF_RET(bool), PF_ARG_DEFAULT(bool, b, true),
                    PF_ARG_DEFAULT(float32, f, 1.5));
PF_REGISTER_TYPED("str.flip", flip, "bool(b: bool = true, f: float32 = 1.5)");

static const char* pick(const char* s, const PFByteArray* raw, void* p) {
  return raw->size > 0 || p != NULL ? s : "none";
}
PF_REGISTER_CHECKED("ck.pick", pick, PF_RET(str), PF_ARG_DEFAULT(str, s, "a \"q\"\n"),
                    PF_ARG_DEFAULT(bytes, raw, b "\x00z"), PF_ARG_DEFAULT(ptr, p, null));
PF_REGISTER_TYPED("str.pick", pick,
                  "str(s: str = \"a \\\"q\\\"\\n\", raw: bytes = b\"\\x00z\", p: ptr = null)");

static PFByteArray first(DLTensor* t, DLDataType dt, DLDevice dev) {
  (void)t, (void)dt, (void)dev;
  return (PFByteArray){"xy", 2};
}
PF_REGISTER_CHECKED("ck.first", first, PF_RET(bytes), PF_ARG(tensor(float64, 1, contiguous), t),
                    PF_ARG(dtype, dt), PF_ARG_DEFAULT(device, dev, "cpu:0"));
PF_REGISTER_TYPED("str.first", first,
                  "bytes(t: tensor<float64, 1, contiguous>, dt: dtype, dev: device = \"cpu:0\")");

static PFObjectHandle handles(PFFunctionHandle f, PFObjectHandle a, PFObjectHandle m,
                              PFObjectHandle s, PFObjectHandle o, PFObjectHandle l,
                              PFObjectHandle d) {
  (void)f, (void)a, (void)m, (void)s, (void)l, (void)d;
  PFObjectRetain(o);
  return o;
}
PF_REGISTER_CHECKED("ck.handles", handles, PF_RET(object), PF_ARG(func, f), PF_ARG(array, a),
                    PF_ARG(map, m), PF_ARG(shape, s), PF_ARG(object, o), PF_ARG(list, l),
                    PF_ARG(dict, d));
PF_REGISTER_TYPED("str.handles", handles,
                  "object(f:func,a:array,m:map,s:shape,o:object,l:list,d:dict)");

static int64_t g_touched;
static void touch(void) { ++g_touched; }
PF_REGISTER_CHECKED("ck.touch", touch, PF_RET(void), PF_DOC("Counts."));
PF_REGISTER_TYPED("str.touch", touch, "void()", "Counts.");

static DLTensor* same(DLTensor* t) { return t; }
PF_REGISTER_CHECKED("ck.same", same, PF_RET(tensor(*, 2)), PF_ARG(tensor, t));
PF_REGISTER_TYPED("str.same", same, "tensor<*,2>(t: tensor)");

/* ---- an object type with checked methods ---- */

typedef struct {
  int64_t count;
} Counter;

static void* data_of(PFObjectHandle self) {
  void* data = NULL;
  PFObjectGetData(self, &data);
  return data;
}
static void counter_init(PFObjectHandle self, int64_t start) {
  ((Counter*)data_of(self))->count = start;
}
static int64_t counter_add(PFObjectHandle self, int64_t n) {
  return ((Counter*)data_of(self))->count += n;
}
static int64_t counter_limit(void) { return 99; }

static const PFFieldDesc k_fields[] = {
    PF_FIELD(Counter, count, "int64", kPFFieldWritable, "The count."),
};
static const PFMethodDesc k_methods[] = {
    PF_METHOD_CHECKED("__init__", counter_init, PF_RET(void), PF_ARG(obj(ck.Counter), self),
                      PF_ARG_DEFAULT(int64, start, 0)),
    PF_METHOD_CHECKED("add", counter_add, PF_RET(int64), PF_ARG(obj(ck.Counter), self),
                      PF_ARG_DEFAULT(int64, n, 1), PF_DOC("Adds n.")),
    PF_STATIC_METHOD_CHECKED("limit", counter_limit, PF_RET(int64), PF_DOC("The limit.")),
};
static const PFObjectTypeDesc k_counter = {PF_OBJECT_TYPE_DESC_ABI,
                                           "ck.Counter",
                                           NULL,
                                           sizeof(Counter),
                                           NULL,
                                           "Counts.",
                                           k_fields,
                                           PF_COUNTOF(k_fields),
                                           k_methods,
                                           PF_COUNTOF(k_methods)};
PF_REGISTER_OBJECT_TYPE(k_counter);

/* obj<KEY> in a global function: the type is registered before the
 * functions are made. */
static PFObjectHandle keep(PFObjectHandle c) {
  PFObjectRetain(c); /* a handle result transfers a reference */
  return c;
}
PF_REGISTER_CHECKED("ck.keep", keep, PF_RET(obj(ck.Counter)), PF_ARG(obj(ck.Counter), c));
PF_REGISTER_TYPED("str.keep", keep, "obj<ck.Counter>(c: obj<ck.Counter>)");

/* ---- the tests ---- */

static PFModuleHandle g_self;

static int load_self(void** state) {
  (void)state;
  if (PF_MODULE_LOAD_SELF(&g_self) == 0) return 0;
  fprintf(stderr, "%s\n", PFGetLastError());
  return -1;
}
static int free_self(void** state) {
  (void)state;
  return PFModFree(g_self);
}

static PFFunctionHandle get(const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(g_self, name, 0, &f));
  assert_non_null(f);
  return f;
}

/* Each checked registration keeps the signature text and doc of its
 * hand-written twin, canonical. */
static void test_same_signature_as_the_string_form(void** state) {
  (void)state;
  static const char* const k_names[] = {"clamp",   "ints",  "flip", "pick", "first",
                                        "handles", "touch", "same", "keep"};
  for (size_t i = 0; i < sizeof(k_names) / sizeof(k_names[0]); ++i) {
    char ck[32], str[32];
    snprintf(ck, sizeof(ck), "ck.%s", k_names[i]);
    snprintf(str, sizeof(str), "str.%s", k_names[i]);
    PFFunctionHandle a = get(ck), b = get(str);
    const char *sig_a, *sig_b, *doc_a, *doc_b;
    assert_pf_ok(PFFuncGetInfo(a, NULL, &sig_a, &doc_a));
    assert_pf_ok(PFFuncGetInfo(b, NULL, &sig_b, &doc_b));
    assert_string_equal(sig_a, sig_b);
    if (doc_b == NULL) assert_null(doc_a);
    else assert_string_equal(doc_a, doc_b);
    PFFuncFree(a);
    PFFuncFree(b);
  }
}

/* The exact texts of a few, as signature.h writes them. */
static void test_canonical_texts(void** state) {
  (void)state;
  static const char* const k_expect[][2] = {
      {"ck.clamp", "float64(x:float64,lo:float64=0.0,hi:float64=1.0)"},
      {"ck.touch", "void()"},
      {"ck.first", "bytes(t:tensor<float64,1,contiguous>,dt:dtype,dev:device=\"cpu:0\")"},
      {"ck.keep", "obj<ck.Counter>(c:obj<ck.Counter>)"},
      {"ck.flip", "bool(b:bool=true,f:float32=1.5)"},
  };
  for (size_t i = 0; i < sizeof(k_expect) / sizeof(k_expect[0]); ++i) {
    PFFunctionHandle f = get(k_expect[i][0]);
    const char* sig;
    assert_pf_ok(PFFuncGetInfo(f, NULL, &sig, NULL));
    assert_string_equal(sig, k_expect[i][1]);
    PFFuncFree(f);
  }
}

/* Calls convert through the registered signature: positional, keyword and
 * default arguments. */
static void test_calls(void** state) {
  (void)state;
  PFFunctionHandle f = get("ck.clamp");
  PFValue args[1] = {{.v_float64 = 1.5}}, kw[1] = {{.v_float64 = 1.25}}, out;
  int codes[1] = {kPFFloat}, kw_codes[1] = {kPFFloat}, out_code;
  const char* kw_names[1] = {"hi"};
  assert_pf_ok(PFFuncCallKw(f, args, codes, 1, kw_names, kw, kw_codes, 1, &out, &out_code));
  assert_int_equal(out_code, kPFFloat);
  assert_true(out.v_float64 == 1.25);
  args[0].v_float64 = -2;
  assert_pf_ok(PFFuncCallKw(f, args, codes, 1, NULL, NULL, NULL, 0, &out, &out_code));
  assert_true(out.v_float64 == 0.0);
  PFFuncFree(f);

  f = get("ck.ints");
  PFValue iv[7];
  int ic[7];
  for (int i = 0; i < 7; ++i) iv[i].v_int64 = i + 1, ic[i] = kPFInt;
  assert_pf_ok(PFFuncCallKw(f, iv, ic, 7, NULL, NULL, NULL, 0, &out, &out_code));
  assert_int_equal(out.v_int64, 1 + 2 + 3 + 4 + 5 + 6 + 7 + 16);
  PFFuncFree(f);

  f = get("ck.pick");
  assert_pf_ok(PFFuncCallKw(f, NULL, NULL, 0, NULL, NULL, NULL, 0, &out, &out_code));
  assert_int_equal(out_code, kPFStr);
  assert_string_equal(out.v_str, "a \"q\"\n");
  PFFuncFree(f);

  g_touched = 0;
  f = get("ck.touch");
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &out, &out_code));
  assert_int_equal(out_code, kPFNull);
  assert_int_equal(g_touched, 1);
  PFFuncFree(f);

  /* The wrong type is still refused at the call, as for any typed function. */
  f = get("ck.flip");
  PFValue s = {.v_str = "no"};
  int s_code = kPFStr;
  assert_pf_error(PFFuncCallKw(f, &s, &s_code, 1, NULL, NULL, NULL, 0, &out, &out_code),
                  "TypeError", "argument 0 'b'");
  PFFuncFree(f);
}

/* The methods: the constructor with its default, an instance method, a
 * static one, each with the text its string form would have. */
static void test_methods(void** state) {
  (void)state;
  uint32_t type;
  assert_pf_ok(PFObjectTypeFind("ck.Counter", &type));
  assert_true(type != 0);
  const PFObjectTypeInfo* info;
  assert_pf_ok(PFObjectTypeGetInfo(type, &info));
  assert_int_equal(info->num_methods, 3);
  assert_string_equal(info->init->signature, "void(self:obj<ck.Counter>,start:int64=0)");
  for (int i = 0; i < info->num_methods; ++i) {
    const PFMethodInfo* m = info->methods[i];
    if (strcmp(m->name, "add") == 0) {
      assert_string_equal(m->signature, "int64(self:obj<ck.Counter>,n:int64=1)");
      assert_string_equal(m->doc, "Adds n.");
      assert_int_equal(m->flags, 0);
    } else if (strcmp(m->name, "limit") == 0) {
      assert_string_equal(m->signature, "int64()");
      assert_int_equal(m->flags, kPFMethodStatic);
    }
  }
  PFFunctionHandle ctor, add, limit;
  assert_pf_ok(PFObjectTypeGetConstructor(type, &ctor));
  PFValue v = {.v_int64 = 40}, out;
  int code = kPFInt, out_code;
  assert_pf_ok(PFFuncCall(ctor, &v, &code, 1, &out, &out_code));
  assert_int_equal(out_code, kPFObjectHandle);
  PFObjectHandle c = out.v_handle;
  assert_pf_ok(PFObjectGetMethod(c, "add", &add));
  v.v_int64 = 2;
  assert_pf_ok(PFFuncCall(add, &v, &code, 1, &out, &out_code));
  assert_int_equal(out.v_int64, 42);
  assert_pf_ok(PFFuncCallKw(add, NULL, NULL, 0, NULL, NULL, NULL, 0, &out, &out_code));
  assert_int_equal(out.v_int64, 43);
  assert_pf_ok(PFObjectTypeGetMethod(type, "limit", &limit));
  assert_pf_ok(PFFuncCall(limit, NULL, NULL, 0, &out, &out_code));
  assert_int_equal(out.v_int64, 99);
  PFFunctionHandle keep_fn = get("ck.keep");
  PFValue cv = {.v_handle = c};
  int c_code = kPFObjectHandle;
  assert_pf_ok(PFFuncCall(keep_fn, &cv, &c_code, 1, &out, &out_code));
  assert_ptr_equal(out.v_handle, c);
  PFObjectFree(out.v_handle); /* the result's reference */
  PFFuncFree(keep_fn);
  PFFuncFree(limit);
  PFFuncFree(add);
  PFFuncFree(ctor);
  PFObjectFree(c);
}

/* signature.h's list of C types names the runtime's types, in its order
 * (signature.c also checks this when it compiles). */
static void test_c_type_list_is_the_runtimes(void** state) {
  (void)state;
  static const char* const k_listed[] = {
#define NAME_(name, arg, result) #name,
      PF_SIGNATURE_C_TYPES(NAME_)
#undef NAME_
  };
  int n = (int)(sizeof(k_listed) / sizeof(k_listed[0]));
  for (int i = 0; i < n; ++i) {
    const char* name;
    assert_pf_ok(PFSignatureTypeInfo(i + 1, &name, NULL)); /* 0 is void */
    assert_string_equal(name, k_listed[i]);
  }
  const char* last;
  assert_pf_ok(PFSignatureTypeInfo(n + 1, &last, NULL));
  assert_string_equal(last, "any"); /* the one named type without a C type */
  assert_pf_error(PFSignatureTypeInfo(n + 2, NULL, NULL), "IndexError");
}

/* ---- check records: what the compiler saw, checked again at load ---- */

static double half(double x) { return x / 2; }
static int nothing(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)ret, (void)res;
  return 0;
}
/* A descriptor as the registration macros make one (module.h). */
static PFFuncDescriptor descriptor(uint32_t kind, const char* name, PFPackedCFunc packed,
                                   void (*typed)(void), const char* sig, const char* doc) {
  return (PFFuncDescriptor){
      PF_FUNC_DESCRIPTOR_ABI, kind, name, packed, typed, sig, doc, NULL, NULL, NULL};
}
static PFFuncDescriptor record(const char* name, const char* sig, const char* c_types) {
  return descriptor(kPFFuncDescriptorCheck, name, NULL, NULL, sig, c_types);
}

/* Loads t.half (typed), t.packed and `check`: the number of functions of
 * the module, or -1 with the load's error. */
static int load_with(PFFuncDescriptor check) {
  const PFFuncDescriptor half_d = descriptor(kPFFuncDescriptorTyped, "t.half", NULL,
                                             (void (*)(void))half, "float64(x: float64)", NULL);
  const PFFuncDescriptor packed_d =
      descriptor(kPFFuncDescriptorPacked, "t.packed", nothing, NULL, "float64(x: float64)", NULL);
  const PFFuncDescriptor* table[] = {&half_d, &packed_d, &check};
  PFModuleHandle m = NULL;
  if (PFModLoadFromDescriptors(table, table + 3, &m) != 0) return -1;
  int n = -1;
  const char** names = NULL;
  assert_pf_ok(PFModListFunctionNames(m, &n, &names));
  assert_pf_ok(PFModFree(m));
  return n;
}

/* A record that agrees loads; the record is not a function of the module. */
static void test_check_record_that_agrees_loads(void** state) {
  (void)state;
  assert_int_equal(load_with(record("t.half", "float64(x: float64)", PF_SIGNATURE_C_TYPES_TEXT)),
                   2);
  /* Every checked registration of this program carries one, and loaded. */
  assert_non_null(g_self);
}

/* A plugin built from a header whose table gives float64 another C type. */
static void test_check_record_of_a_stale_header_fails(void** state) {
  (void)state;
  assert_pf_error(load_with(record("t.half", "float64(x: float64)", "float64=float/float;")),
                  "ValueError", "function t.half was checked against a header whose float64 is",
                  "`float/float`", "`double/double`", "rebuild the plugin");
  /* A table without the type at all, or an empty one. */
  assert_pf_error(load_with(record("t.half", "float64(x: float64)", "int64=int64_t/int64_t;")),
                  "ValueError", "t.half", "float64 is `(none)`");
  assert_pf_error(load_with(record("t.half", "float64(x: float64)", NULL)), "ValueError", "t.half",
                  "has no C types");
}

/* A record beside the wrong function, or none. */
static void test_check_record_that_does_not_match_fails(void** state) {
  (void)state;
  assert_pf_error(load_with(record("t.absent", "float64(x: float64)", PF_SIGNATURE_C_TYPES_TEXT)),
                  "ValueError", "function t.absent was checked", "not a typed function of it");
  assert_pf_error(load_with(record("t.packed", "float64(x: float64)", PF_SIGNATURE_C_TYPES_TEXT)),
                  "ValueError", "function t.packed was checked", "not a typed function of it");
  assert_pf_error(load_with(record("t.half", "float32(x: float32)", PF_SIGNATURE_C_TYPES_TEXT)),
                  "ValueError", "function t.half was checked as float32(x: float32)",
                  "registered as float64(x: float64)");
  assert_pf_error(load_with(record("t.half", NULL, PF_SIGNATURE_C_TYPES_TEXT)), "ValueError",
                  "t.half", "NULL signature");
  assert_pf_error(load_with(record(NULL, "float64(x: float64)", PF_SIGNATURE_C_TYPES_TEXT)),
                  "ValueError", "descriptor 2 has a NULL name");
}

/* ---- checked methods: the C types travel in the signature string ---- */

static double scale(PFObjectHandle self, double by) {
  (void)self;
  return by;
}
static int scale_packed(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  return nothing(args, codes, n, ret, res);
}

/* A checked method's descriptor as the macros make one, with `sig` (the
 * signature, the separator and a list of C types) written by hand. */
static PFMethodDesc checked_method(const char* sig) {
  return (PFMethodDesc){"scale", NULL, (void (*)(void))scale, sig, kPFMethodChecked, NULL};
}

/* PFObjectTypeRegister of the type `key` with `methods`; on success the
 * type is found by its key. */
static int register_type(const char* key, const PFMethodDesc* methods, int num_methods) {
  const PFObjectTypeDesc d = {
      PF_OBJECT_TYPE_DESC_ABI, key, NULL, 8, NULL, NULL, NULL, 0, methods, num_methods};
  uint32_t index = 0, found = 0;
  int rc = PFObjectTypeRegister(&d, &index);
  if (rc == 0) {
    assert_pf_ok(PFObjectTypeFind(key, &found));
    assert_int_equal(found, index);
  }
  return rc;
}

/* 1 when no type has the key `key`. */
static int absent(const char* key) {
  uint32_t found = 1;
  assert_pf_ok(PFObjectTypeFind(key, &found));
  return found == 0;
}

/* The macros mark the method and append the list of C types their header
 * gave, after the separator; the registered signature is the text alone. */
static void test_checked_method_carries_its_c_types(void** state) {
  (void)state;
  const PFMethodDesc* add = &k_methods[1];
  assert_string_equal(add->name, "add");
  assert_int_equal(add->flags, kPFMethodChecked);
  assert_int_equal(k_methods[2].flags, kPFMethodStatic | kPFMethodChecked);
  const char* sep = strchr(add->signature, PF_METHOD_C_TYPES_SEP[0]);
  assert_non_null(sep);
  assert_string_equal(sep + 1, PF_SIGNATURE_C_TYPES_TEXT);
  /* Registered from a program (not a module) through the macro too. */
  const PFMethodDesc m[] = {
      PF_METHOD_CHECKED("scale", scale, PF_RET(float64), PF_ARG(object, self),
                        PF_ARG_DEFAULT(float64, by, 2)),
  };
  assert_pf_ok(register_type("t.checked.Macro", m, 1));
  uint32_t type;
  assert_pf_ok(PFObjectTypeFind("t.checked.Macro", &type));
  const PFObjectTypeInfo* info;
  assert_pf_ok(PFObjectTypeGetInfo(type, &info));
  assert_string_equal(info->methods[0]->signature, "float64(self:object,by:float64=2.0)");
  assert_int_equal(info->methods[0]->flags, 0);
}

/* A list that agrees, written by hand, registers as the macro's does. */
static void test_checked_method_that_agrees_registers(void** state) {
  (void)state;
  const PFMethodDesc m[] = {
      checked_method("float64(self:object,by:float64)" PF_METHOD_C_TYPES_SEP
                     "object=PFObjectHandle/PFObjectHandle;float64=double/double;"),
  };
  assert_pf_ok(register_type("t.checked.Agrees", m, 1));
}

/* A method compiled against a header whose table gave float64 another C
 * type: the type is refused, whole, naming the method. */
static void test_checked_method_of_a_stale_header_fails(void** state) {
  (void)state;
  const PFMethodDesc stale[] = {
      PF_METHOD_CHECKED("fine", scale, PF_RET(float64), PF_ARG(object, self), PF_ARG(float64, by)),
      checked_method("float64(self:object,by:float64)" PF_METHOD_C_TYPES_SEP
                     "int64=int64_t/int64_t;float64=float/float;"),
  };
  assert_pf_error(register_type("t.checked.Stale", stale, 2), "ValueError",
                  "PFObjectTypeRegister: object type 't.checked.Stale': method 'scale' was checked "
                  "against a header whose float64 is `float/float`, this library's is "
                  "`double/double`: rebuild the plugin against this packedfunc");
  assert_true(absent("t.checked.Stale"));
  /* A list without the type, or an empty one. */
  const PFMethodDesc none[] = {
      checked_method("float64(self:object,by:float64)" PF_METHOD_C_TYPES_SEP
                     "int64=int64_t/int64_t;"),
  };
  assert_pf_error(register_type("t.checked.None", none, 1), "ValueError", "method 'scale'",
                  "float64 is `(none)`");
  const PFMethodDesc empty[] = {
      checked_method("float64(self:object,by:float64)" PF_METHOD_C_TYPES_SEP)};
  assert_pf_error(register_type("t.checked.Empty", empty, 1), "ValueError", "method 'scale'",
                  "float64 is `(none)`");
  assert_true(absent("t.checked.None") && absent("t.checked.Empty"));
}

/* The flag on a descriptor that the macros did not make: a signature
 * without the separator (read only up to its NUL: the copy below is
 * exactly as long as the text, so ASan reports any read past it), a
 * packed method. */
static void test_checked_flag_without_c_types_fails(void** state) {
  (void)state;
  static const char k_text[] = "float64(self:object,by:float64)";
  char* sig = malloc(sizeof(k_text));
  assert_non_null(sig);
  memcpy(sig, k_text, sizeof(k_text));
  const PFMethodDesc bare[] = {checked_method(sig)};
  int rc = register_type("t.checked.Bare", bare, 1);
  free(sig);
  assert_pf_error(rc, "ValueError",
                  "PFObjectTypeRegister: object type 't.checked.Bare': method 'scale' has "
                  "kPFMethodChecked but no C types after its signature",
                  "PF_METHOD_CHECKED");
  const PFMethodDesc packed[] = {
      {"scale", scale_packed, NULL,
       "float64(self:object,by:float64)" PF_METHOD_C_TYPES_SEP PF_SIGNATURE_C_TYPES_TEXT,
       kPFMethodChecked, NULL}};
  assert_pf_error(register_type("t.checked.Packed", packed, 1), "ValueError",
                  "method 'scale' has kPFMethodChecked but is packed");
  const PFMethodDesc packed_bare[] = {{"scale", scale_packed, NULL, NULL, kPFMethodChecked, NULL}};
  assert_pf_error(register_type("t.checked.Packed", packed_bare, 1), "ValueError",
                  "method 'scale' has kPFMethodChecked but is packed");
  const PFMethodDesc no_sig[] = {checked_method(NULL)};
  assert_pf_error(register_type("t.checked.NoSig", no_sig, 1), "ValueError",
                  "typed method 'scale' has no signature");
  assert_true(absent("t.checked.Bare") && absent("t.checked.Packed") && absent("t.checked.NoSig"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_same_signature_as_the_string_form),
      cmocka_unit_test(test_canonical_texts),
      cmocka_unit_test(test_calls),
      cmocka_unit_test(test_methods),
      cmocka_unit_test(test_c_type_list_is_the_runtimes),
      cmocka_unit_test(test_check_record_that_agrees_loads),
      cmocka_unit_test(test_check_record_of_a_stale_header_fails),
      cmocka_unit_test(test_check_record_that_does_not_match_fails),
      cmocka_unit_test(test_checked_method_carries_its_c_types),
      cmocka_unit_test(test_checked_method_that_agrees_registers),
      cmocka_unit_test(test_checked_method_of_a_stale_header_fails),
      cmocka_unit_test(test_checked_flag_without_c_types_fails),
  };
  return cmocka_run_group_tests(tests, load_self, free_self);
}
