/* The signature grammar's named parameters, defaults and tensor
 * constraints: what parses, the canonical text, the parameter table
 * (PFSignatureParse, PFFuncGetSignatureInfo), and every refusal. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "support/pf_test.h"
#include "support/pf_signature_refusal.h"

static int noop(PFValue* a, int* c, int n, PFRetValueHandle r, void* res) {
  (void)a, (void)c, (void)n, (void)r, (void)res;
  return 0;
}
static void never_called(void) {}

/* The canonical text of `text`, through PFSignatureParse; it must also be
 * what a typed function and PFFuncSetInfo keep, and parse to itself. */
static void assert_canonical(const char* text, const char* want) {
  PFSignatureInfo* info = NULL;
  assert_pf_ok(PFSignatureParse(text, &info));
  assert_string_equal(info->text, want);
  PFSignatureInfo* again = NULL;
  assert_pf_ok(PFSignatureParse(info->text, &again));
  assert_string_equal(again->text, want);
  PFSignatureInfoFree(again);
  PFSignatureInfoFree(info);
  PFFunctionHandle f = NULL;
  const char* sig = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)never_called, text, &f));
  assert_pf_ok(PFFuncGetInfo(f, NULL, &sig, NULL));
  assert_string_equal(sig, want);
  PFFuncFree(f);
  assert_pf_ok(PFFuncCreateFromCFunc(noop, NULL, NULL, &f));
  assert_pf_ok(PFFuncSetInfo(f, NULL, text, NULL));
  assert_pf_ok(PFFuncGetInfo(f, NULL, &sig, NULL));
  assert_string_equal(sig, want);
  PFFuncFree(f);
}

/* Unnamed signatures keep the canonical text they always had. */
static void test_unnamed_canonical_unchanged(void** state) {
  (void)state;
  assert_canonical("int64(int64,int64)", "int64(int64,int64)");
  assert_canonical(" double ( int32 ,\tuint8\r\n, bool ) ", "float64(int32,uint8,bool)");
  assert_canonical("void()", "void()");
  assert_canonical("tensor(tensor,ptr)", "tensor(tensor,ptr)");
  PFSignatureInfo* info = NULL;
  assert_pf_ok(PFSignatureParse("int64(int64,float64)", &info));
  assert_int_equal(info->num_params, 2);
  assert_int_equal(info->num_required, 2);
  assert_int_equal(info->named, 0);
  assert_null(info->params[0]->name);
  assert_string_equal(info->params[1]->type, "float64");
  assert_int_equal(info->params[1]->type_code, kPFFloat);
  assert_int_equal(info->params[1]->has_default, 0);
  assert_null(info->params[1]->default_text);
  assert_string_equal(info->result->type, "int64");
  PFSignatureInfoFree(info);
  PFSignatureInfoFree(NULL);
}

static void test_named_and_defaults(void** state) {
  (void)state;
  assert_canonical("float64(x: float64, lo: float64 = 0, hi: float64 = 1)",
                   "float64(x:float64,lo:float64=0.0,hi:float64=1.0)");
  assert_canonical("float64(float64, float64 = 2)", "float64(float64,float64=2.0)");
  assert_canonical("void(int64: int64)", "void(int64:int64)");
  /* Floats: shortest, read back exactly; float32 to the same float. */
  assert_canonical(
      "void(a: float32 = 0.1, b: float64 = 0.1, c: float64 = 1e300, "
      "d: float64 = -inf, e: float64 = nan, f: float64 = 2.5e-3, g: float32 = inf, "
      "h: float64 = -0.0, i: float64 = 1, j: float64 = .5)",
      "void(a:float32=0.1,b:float64=0.1,c:float64=1e+300,d:float64=-inf,"
      "e:float64=nan,f:float64=0.0025,g:float32=inf,h:float64=-0.0,"
      "i:float64=1.0,j:float64=0.5)");
  /* Integers: decimal, hex, the edges; true and false convert. */
  assert_canonical(
      "void(a: int64 = -9223372036854775808, b: int64 = 0x7fffffffffffffff, "
      "c: uint8 = 255, d: int8 = -0x80, e: int32 = true, f: bool = 0)",
      "void(a:int64=-9223372036854775808,b:int64=9223372036854775807,c:uint8=255,"
      "d:int8=-128,e:int32=1,f:bool=false)");
  /* Strings: escapes in, the canonical escapes out. */
  assert_canonical(
      "void(s: str = \"a\\\"b\\\\c\\n\\t\\r\\x41\\xc3\\xa9()\", "
      "b: bytes = b\"\\x00\\xFF,\")",
      "void(s:str=\"a\\\"b\\\\c\\n\\t\\rA\\xc3\\xa9()\",b:bytes=b\"\\x00\\xff,\")");
  /* b and its STRING are two tokens, blanks between them as around any (a
   * checked registration's default arrives as clang-format spaced it). */
  assert_canonical("void(b: bytes = b \"z\", c: bytes = b\t\"\\x01\")",
                   "void(b:bytes=b\"z\",c:bytes=b\"\\x01\")");
  /* dtype, device, null. */
  assert_canonical(
      "void(d: dtype = \"f32\", e: device = \"cuda:1\", g: device = \"cpu\", "
      "p: ptr = null, t: tensor = null, o: object = null, l: list = null)",
      "void(d:dtype=\"float32\",e:device=\"cuda:1\",g:device=\"cpu:0\",p:ptr=null,"
      "t:tensor=null,o:object=null,l:list=null)");

  PFSignatureInfo* info = NULL;
  assert_pf_ok(PFSignatureParse(
      "float64(x: float64, n: int32 = -3, s: str = \"hi\", b: bytes = b\"\\x00z\", "
      "d: dtype = \"int8\", v: device = \"cuda:2\", on: bool = true)",
      &info));
  assert_int_equal(info->num_params, 7);
  assert_int_equal(info->num_required, 1);
  assert_int_equal(info->named, 1);
  const PFParamInfo* const* p = info->params;
  assert_string_equal(p[0]->name, "x");
  assert_int_equal(p[0]->has_default, 0);
  assert_int_equal(p[0]->default_code, kPFNull);
  assert_int_equal(p[1]->default_code, kPFInt);
  assert_int_equal(p[1]->default_value.v_int64, -3);
  assert_string_equal(p[1]->default_text, "-3");
  assert_int_equal(p[2]->default_code, kPFStr);
  assert_string_equal(p[2]->default_value.v_str, "hi");
  assert_string_equal(p[2]->default_text, "\"hi\"");
  assert_int_equal(p[3]->default_code, kPFBytes);
  const PFByteArray* ba = p[3]->default_value.v_handle;
  assert_int_equal(ba->size, 2);
  assert_memory_equal(ba->data, "\0z", 2);
  assert_int_equal(p[4]->default_code, kPFDataType);
  assert_int_equal(p[4]->default_value.v_type.code, kDLInt);
  assert_int_equal(p[4]->default_value.v_type.bits, 8);
  assert_int_equal(p[5]->default_code, kPFDevice);
  assert_int_equal(p[5]->default_value.v_device.device_type, kDLCUDA);
  assert_int_equal(p[5]->default_value.v_device.device_id, 2);
  assert_int_equal(p[6]->default_code, kPFBool);
  assert_int_equal(p[6]->default_value.v_int64, 1);
  assert_int_equal(p[6]->type_index, 9); /* bool in PFSignatureTypeInfo's table */
  const char* name = NULL;
  assert_pf_ok(PFSignatureTypeInfo(p[6]->type_index, &name, NULL));
  assert_string_equal(name, "bool");
  assert_string_equal(info->result->type, "float64");
  assert_null(info->result->name);
  PFSignatureInfoFree(info);
}

/* Floats read and written in the C locale, whatever LC_NUMERIC says. */
static void test_floats_ignore_the_locale(void** state) {
  (void)state;
  static const char* const commas[] = {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8"};
  const char* got = NULL;
  for (size_t i = 0; i < 4 && got == NULL; ++i) got = setlocale(LC_NUMERIC, commas[i]);
  if (got == NULL) {
    /* No such locale installed: the C locale's reading is checked above. */
    assert_canonical("void(x: float64 = 2.5)", "void(x:float64=2.5)");
    return;
  }
  assert_canonical("void(x: float64 = 2.5, y: float32 = 0.1)", "void(x:float64=2.5,y:float32=0.1)");
  setlocale(LC_NUMERIC, "C");
}

/* A constraint's parts, canonical, and as data. */
static void test_tensor_constraints(void** state) {
  (void)state;
  assert_canonical(
      "tensor<float64, 1, contiguous>(x: tensor<float64,*,*>, y: tensor< *, 2 >, "
      "z: tensor<*>, w: tensor <i8x4,*,*,cpu>, v: tensor<*,*,contiguous>)",
      "tensor<float64,1,contiguous>(x:tensor<float64>,y:tensor<*,2>,z:tensor,"
      "w:tensor<int8x4,*,*,cpu>,v:tensor<*,*,contiguous>)");
  assert_canonical("void(tensor<bf16,0>,tensor<*,*,*,cuda_host>)",
                   "void(tensor<bfloat16,0>,tensor<*,*,*,cuda_host>)");
  PFSignatureInfo* info = NULL;
  assert_pf_ok(PFSignatureParse("void(tensor<float32,3,contiguous,cuda>, tensor)", &info));
  const PFTensorConstraint* c = &info->params[0]->tensor;
  assert_int_equal(c->flags, kPFTensorCheckDtype | kPFTensorCheckNdim | kPFTensorContiguous |
                                 kPFTensorCheckDevice);
  assert_int_equal(c->ndim, 3);
  assert_int_equal(c->dtype.code, kDLFloat);
  assert_int_equal(c->dtype.bits, 32);
  assert_int_equal(c->dtype.lanes, 1);
  assert_int_equal(c->device_type, kDLCUDA);
  assert_int_equal(info->params[0]->type_code, kPFDLTensorHandle);
  assert_int_equal(info->params[1]->tensor.flags, 0);
  PFSignatureInfoFree(info);
}

/* What a text says wrong, and where. */
static void test_refusals(void** state) {
  (void)state;
  static const PFTestRefusal cases[] = {
      {"void(x: int64, y)", "at position 15", "has no name but the ones before it have"},
      {"void(int64, y: int64)", "at position 12", "is named but the ones before it are not"},
      {"void(x: int64, x: int64)", "at position 15", "'x' repeats parameter 0's"},
      {"void(x: int64 = 1, y: int64)", "at position 19", "defaults are trailing"},
      {"void(x: int64 = 1.5)", "at position 16", "the default 1.5 does not convert to int64"},
      {"void(x: uint8 = 256)", "at position 16", "does not convert to uint8"},
      {"void(x: uint8 = -1)", "at position 16", "does not convert to uint8"},
      {"void(x: float32 = 1e39)", "at position 18", "does not convert to float32"},
      {"void(x: float64 = 9007199254740993)", "at position 18", "does not convert"},
      {"void(x: int64 = 9223372036854775808)", "at position 16", "does not fit an int64"},
      {"void(x: int64 = 0x8000000000000000)", "at position 16", "does not fit an int64"},
      {"void(x: int64 = 99999999999999999999999)", "at position 16", "does not fit an int64"},
      {"void(x: float64 = 1e400)", "at position 18", "beyond any double"},
      {"void(x: int64 = )", "at position 16", "expected a default value"},
      {"void(x: int64 =", "at position 15", "found the end"},
      {"void(x: int64 = 12abc)", "at position 16", "malformed number"},
      {"void(x: int64 = 1e)", "at position 16", "malformed number"},
      {"void(x: int64 = 0x)", "at position 16", "malformed number"},
      {"void(x: int64 = 1.2.3)", "at position 16", "malformed number"},
      {"void(x: int64 = True)", "at position 16", "expected a default value"},
      {"void(x: bool = 2)", "at position 15", "does not convert to bool"},
      {"void(x: str = null)", "at position 14", "does not convert to str"},
      {"void(x: str = b\"a\")", "at position 14", "does not convert to str"},
      {"void(x: bytes = \"a\")", "at position 16", "does not convert to bytes"},
      {"void(x: ptr = 0)", "at position 14", "does not convert to ptr"},
      {"void(x: func = \"f\")", "at position 15", "does not convert to func"},
      {"void(x: str = \"\\x00\")", "at position 14", "NUL byte or is not valid UTF-8"},
      {"void(x: str = \"\\xff\")", "at position 14", "not valid UTF-8"},
      {"void(x: str = \"\\xed\\xa0\\x80\")", "at position 14", "not valid UTF-8"}, /* a surrogate */
      {"void(x: str = \"\\xc3\")", "at position 14", "in the middle of a UTF-8 sequence"},
      {"void(x: str = \"abc)", "at position 19", "no closing '\"'"},
      {"void(x: str = \"\\q\")", "at position 15", "unknown escape"},
      {"void(x: str = \"\\x4\")", "at position 15", "unknown escape"},
      {"void(x: str = \"a\tb\")", "at position 16", "byte 0x09 in a string literal"},
      {"void(x: str = \"\xc3\xa9\")", "at position 15", "byte 0xc3"},
      {"void(x: dtype = \"flt\")", "at position 16", "is not a data type"},
      {"void(x: dtype = 3)", "at position 16", "is not a dtype"},
      {"void(x: device = \"tpu\")", "at position 17", "is not a device"},
      {"void(x: device = \"cuda:\")", "at position 17", "is not a device"},
      {"void(x: device = \"cuda:99999999999\")", "at position 17", "is not a device"},
      {"void(1x: int64)", "at position 5", "starts with a letter or '_'"},
      {"void(x: void)", "at position 8", "void is only allowed as the return type"},
      {"void(x int64)", "at position 5", "unknown type 'x'"},
      {"void(x: tensor<float65x0>)", "at position 15", "unknown data type 'float65x0'"},
      {"void(x: tensor<>)", "at position 15", "expected a data type or '*'"},
      {"void(x: tensor<float64,65>)", "at position 23", "above PF_TENSOR_MAX_NDIM (64)"},
      {"void(x: tensor<float64,-1>)", "at position 23", "expected a rank or '*'"},
      {"void(x: tensor<float64,1,strided>)", "at position 25", "'contiguous' or '*'"},
      {"void(x: tensor<*,*,*,tpu>)", "at position 21", "unknown device type 'tpu'"},
      {"void(x: tensor<*,*,*,cpu,1>)", "at position 24", "expected '>' after the device type"},
      {"void(x: tensor<float64)", "at position 22", "expected ',' or '>'"},
      {"void(x: tensor<float64 1>)", "at position 23", "expected ',' or '>'"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    pf_test_check_refusal(&cases[i], i);
    PFFunctionHandle f = NULL;
    assert_pf_error(PFFuncCreateFromTyped((void*)never_called, cases[i].text, &f), kPFErrValueError,
                    "PFFuncCreateFromTyped: bad signature", cases[i].pos);
    assert_pf_ok(PFFuncCreateFromCFunc(noop, NULL, NULL, &f));
    assert_pf_error(PFFuncSetInfo(f, "n", cases[i].text, NULL), kPFErrValueError,
                    "PFFuncSetInfo: bad signature");
    const char* name = "x";
    assert_pf_ok(PFFuncGetInfo(f, &name, NULL, NULL));
    assert_null(name); /* all or nothing */
    PFFuncFree(f);
  }
  /* A name longer than PF_SIGNATURE_NAME_MAX. */
  char text[600];
  snprintf(text, sizeof(text), "void(%0*d: int64)", PF_SIGNATURE_NAME_MAX + 1, 0);
  text[5] = 'n';
  PFSignatureInfo* info = NULL;
  assert_pf_error(PFSignatureParse(text, &info), kPFErrValueError, "longer than 255 bytes");
  text[5 + PF_SIGNATURE_NAME_MAX] = ':';
  text[6 + PF_SIGNATURE_NAME_MAX] = 'i';
  snprintf(text + 5 + PF_SIGNATURE_NAME_MAX, 20, ": int64)");
  assert_pf_ok(PFSignatureParse(text, &info));
  assert_int_equal(strlen(info->params[0]->name), PF_SIGNATURE_NAME_MAX);
  PFSignatureInfoFree(info);
  /* Misuse. */
  assert_pf_error(PFSignatureParse(NULL, &info), kPFErrTypeError, "PFSignatureParse",
                  "'text' is NULL");
  assert_pf_error(PFSignatureParse("void()", NULL), kPFErrTypeError, "'out' is NULL");
  /* Fields take any tensor: a constraint there is refused. */
  PFFieldDesc field = {"t", "tensor<float64>", 0, 0, NULL};
  PFObjectTypeDesc d = {
      PF_OBJECT_TYPE_DESC_ABI, "sig.Fielded", NULL, 16, NULL, NULL, &field, 1, NULL, 0};
  uint32_t ix = 0;
  assert_pf_error(PFObjectTypeRegister(&d, &ix), kPFErrValueError,
                  "a tensor field takes any tensor");
}

/* A function's own table, borrowed; none without a signature. */
static void test_function_signature_info(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  const PFSignatureInfo* info = (const PFSignatureInfo*)(uintptr_t)1;
  assert_pf_ok(PFFuncCreateFromCFunc(noop, NULL, NULL, &f));
  assert_pf_ok(PFFuncGetSignatureInfo(f, &info));
  assert_null(info);
  assert_pf_ok(PFFuncSetInfo(f, "g", "int64(a: int64, b: str = \"z\")", NULL));
  assert_pf_ok(PFFuncGetSignatureInfo(f, &info));
  const char* sig = NULL;
  assert_pf_ok(PFFuncGetInfo(f, NULL, &sig, NULL));
  assert_ptr_equal(info->text, sig);
  assert_int_equal(info->num_params, 2);
  assert_int_equal(info->num_required, 1);
  assert_string_equal(info->params[1]->default_value.v_str, "z");
  assert_pf_error(PFFuncSetInfo(f, NULL, "int64()", NULL), kPFErrValueError, "already set");
  assert_pf_error(PFFuncGetSignatureInfo(f, NULL), kPFErrTypeError, "'out' is NULL");
  assert_pf_error(PFFuncGetSignatureInfo(&info, &info), kPFErrTypeError, "not a live function");
  /* A bound function's signature keeps the other parameters as they were. */
  PFValue v = {.v_int64 = 1};
  int code = kPFInt, pos = 0;
  PFFunctionHandle b = NULL;
  assert_pf_ok(PFFuncBind(f, 1, &pos, &v, &code, NULL, &b));
  assert_pf_ok(PFFuncGetInfo(b, NULL, &sig, NULL));
  assert_string_equal(sig, "int64(b:str=\"z\")");
  PFFuncFree(b);
  PFFuncFree(f);
  assert_pf_ok(PFFuncCreateFromCFunc(noop, NULL, NULL, &f));
  assert_pf_ok(PFFuncSetInfo(f, NULL,
                             "void(x: tensor<float32,2>, s: str = \"a,b)\", "
                             "n: int64 = 3)",
                             NULL));
  pos = 1;
  v.v_str = "q";
  code = kPFStr;
  assert_pf_ok(PFFuncBind(f, 1, &pos, &v, &code, NULL, &b));
  assert_pf_ok(PFFuncGetInfo(b, NULL, &sig, NULL));
  assert_string_equal(sig, "void(x:tensor<float32,2>,n:int64=3)");
  PFFuncFree(b);
  PFFuncFree(f);
}

/* Methods with named parameters: their signatures, the constructor's. */
typedef struct {
  int64_t count;
} counter;
static void counter_init(PFObjectHandle self, int64_t start) {
  void* d = NULL;
  PFObjectGetData(self, &d);
  ((counter*)d)->count = start;
}
static int64_t counter_add(PFObjectHandle self, int64_t by) {
  void* d = NULL;
  PFObjectGetData(self, &d);
  return ((counter*)d)->count += by;
}

static void test_methods_keep_names(void** state) {
  (void)state;
  static const PFFieldDesc fields[] = {PF_FIELD(counter, count, "int64", 0, NULL)};
  static const PFMethodDesc methods[] = {
      PF_METHOD_TYPED("__init__", counter_init, "void(self: object, start: int64 = 10)", NULL),
      PF_METHOD_TYPED("add", counter_add, "int64(self: obj<sig.Counter>, by: int64 = 1)", NULL),
  };
  static const PFObjectTypeDesc d = {PF_OBJECT_TYPE_DESC_ABI,
                                     "sig.Counter",
                                     NULL,
                                     sizeof(counter),
                                     NULL,
                                     NULL,
                                     fields,
                                     1,
                                     methods,
                                     2};
  uint32_t ix = 0;
  assert_pf_ok(PFObjectTypeRegister(&d, &ix));
  const PFObjectTypeInfo* ti = NULL;
  assert_pf_ok(PFObjectTypeGetInfo(ix, &ti));
  assert_string_equal(ti->methods[1]->signature, "int64(self:obj<sig.Counter>,by:int64=1)");
  PFFunctionHandle ctor = NULL;
  const char* sig = NULL;
  assert_pf_ok(PFObjectTypeGetConstructor(ix, &ctor));
  assert_pf_ok(PFFuncGetInfo(ctor, NULL, &sig, NULL));
  assert_string_equal(sig, "obj<sig.Counter>(start:int64=10)");
  /* A keyword call of the constructor, and of a bound method. */
  PFValue kv = {.v_int64 = 5}, rv;
  int kc = kPFInt, rc;
  const char* start = "start";
  assert_pf_ok(PFFuncCallKw(ctor, NULL, NULL, 0, &start, &kv, &kc, 1, &rv, &rc));
  PFObjectHandle obj = rv.v_handle;
  PFFunctionHandle add = NULL;
  assert_pf_ok(PFObjectGetMethod(obj, "add", &add));
  assert_pf_ok(PFFuncGetInfo(add, NULL, &sig, NULL));
  assert_string_equal(sig, "int64(by:int64=1)");
  assert_pf_ok(PFFuncCallKw(add, NULL, NULL, 0, NULL, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rv.v_int64, 6);
  const char* by = "by";
  kv.v_int64 = 10;
  assert_pf_ok(PFFuncCallKw(add, NULL, NULL, 0, &by, &kv, &kc, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 16);
  PFFuncFree(add);
  PFObjectFree(obj);
  /* Without arguments the constructor takes __init__'s default. */
  assert_pf_ok(PFFuncCallKw(ctor, NULL, NULL, 0, NULL, NULL, NULL, 0, &rv, &rc));
  PFValue got;
  int gc;
  assert_pf_ok(PFObjectGetFieldByName(rv.v_handle, "count", &got, &gc));
  assert_int_equal(got.v_int64, 10);
  PFObjectFree(rv.v_handle);
  PFFuncFree(ctor);
}

/* A C function pointer takes the whole grammar; names and defaults mean
 * nothing to a C caller, who passes every argument. */
static int64_t sum2(int64_t a, int64_t b) { return a + b; }
static void test_closure_takes_names(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromTyped((void*)sum2, "int64(a: int64, b: int64 = 2)", &f));
  PFObjectHandle closure = NULL;
  void* fn = NULL;
  assert_pf_ok(PFFuncToCFunction(f, "int64(x: int64, y: int64 = 7)", &closure, &fn));
  int64_t (*c)(int64_t, int64_t) = (int64_t(*)(int64_t, int64_t))fn;
  assert_int_equal(c(40, 2), 42);
  assert_pf_ok(PFClosureCheckError(closure));
  PFObjectFree(closure);
  PFFuncFree(f);
}

/* `any`: a packed function's parameter of any value (a Python function's
 * unannotated one), as metadata only: its default keeps the literal's own
 * value; a typed function, a C function pointer and a field need C types
 * and refuse it. */
static void test_any_is_metadata_only(void** state) {
  (void)state;
  PFSignatureInfo* info = NULL;
  assert_pf_ok(
      PFSignatureParse("any(x: any, n: any = 2, f: any = 0.5, s: any = \"a\", "
                       "b: any = b\"\\x01\", t: any = true, z: any = null)",
                       &info));
  assert_string_equal(info->text,
                      "any(x:any,n:any=2,f:any=0.5,s:any=\"a\",b:any=b\"\\x01\","
                      "t:any=true,z:any=null)");
  const PFParamInfo* const* p = info->params;
  assert_string_equal(p[0]->type, "any");
  assert_int_equal(p[0]->type_code, kPFNull);
  const char* name = NULL;
  assert_pf_ok(PFSignatureTypeInfo(p[0]->type_index, &name, NULL));
  assert_string_equal(name, "any");
  assert_int_equal(p[1]->default_code, kPFInt);
  assert_int_equal(p[1]->default_value.v_int64, 2);
  assert_int_equal(p[2]->default_code, kPFFloat);
  assert_int_equal(p[3]->default_code, kPFStr);
  assert_string_equal(p[3]->default_value.v_str, "a");
  assert_int_equal(p[4]->default_code, kPFBytes);
  assert_int_equal(((const PFByteArray*)p[4]->default_value.v_handle)->size, 1);
  assert_int_equal(p[5]->default_code, kPFBool);
  assert_int_equal(p[6]->default_code, kPFNull);
  assert_string_equal(info->result->type, "any");
  PFSignatureInfoFree(info);
  assert_pf_error(PFSignatureParse("void(s: any = \"\\xff\")", &info), kPFErrValueError,
                  "not valid UTF-8");
  /* A packed function carries it, and a keyword call fills its default. */
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(noop, NULL, NULL, &f));
  assert_pf_ok(PFFuncSetInfo(f, NULL, "any(x: any, y: any = 3)", NULL));
  PFFuncFree(f);
  /* What needs a C type refuses it, naming the parameter. */
  assert_pf_error(PFFuncCreateFromTyped((void*)never_called, "int64(a: int64, b: any = 1)", &f),
                  kPFErrValueError, "PFFuncCreateFromTyped: bad signature",
                  "parameter 1 ('b') is any, which has no C type");
  assert_pf_error(PFFuncCreateFromTyped((void*)never_called, "any(int64)", &f), kPFErrValueError,
                  "the result is any, which has no C type");
  /* Like every refusal of a text, it says where: the type's position. */
  assert_pf_error(PFFuncCreateFromTyped((void*)never_called, "int64(a: int64, b: any = 1)", &f),
                  kPFErrValueError, "\"int64(a: int64, b: any = 1)\" at position 19: parameter 1");
  assert_pf_error(PFFuncCreateFromTyped((void*)never_called, "void(any\n)", &f), kPFErrValueError,
                  "at position 5: parameter 0 is any");
  assert_pf_error(PFFuncCreateFromTyped((void*)never_called, " any(int64)", &f), kPFErrValueError,
                  "at position 1: the result is any");
  assert_pf_ok(PFFuncCreateFromCFunc(noop, NULL, NULL, &f));
  PFObjectHandle closure = NULL;
  void* fn = NULL;
  assert_pf_error(PFFuncToCFunction(f, "void(any)", &closure, &fn), kPFErrValueError,
                  "PFFuncToCFunction: bad signature", "parameter 0 is any");
  PFFuncFree(f);
  PFFieldDesc field = {"v", "any", 0, 0, NULL};
  PFObjectTypeDesc d = {
      PF_OBJECT_TYPE_DESC_ABI, "sig.AnyField", NULL, 16, NULL, NULL, &field, 1, NULL, 0};
  uint32_t ix = 0;
  assert_pf_error(PFObjectTypeRegister(&d, &ix), kPFErrValueError, "field 'v'",
                  "any, which has no C type");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_unnamed_canonical_unchanged),
      cmocka_unit_test(test_named_and_defaults),
      cmocka_unit_test(test_floats_ignore_the_locale),
      cmocka_unit_test(test_tensor_constraints),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_function_signature_info),
      cmocka_unit_test(test_methods_keep_names),
      cmocka_unit_test(test_closure_takes_names),
      cmocka_unit_test(test_any_is_metadata_only),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
