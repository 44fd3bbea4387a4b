/* The signature grammar's element types, optional and union: what parses,
 * the canonical text, the type trees of PFTypeInfo, the limits and every
 * refusal; a typed call's checks and conversions of elements, arguments
 * and results. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "support/pf_test.h"
#include "support/pf_fault.h"
#include "support/pf_signature_refusal.h"

static void never_called(void) {}

static PFSignatureInfo* parse_ok(const char* text) {
  PFSignatureInfo* info = NULL;
  assert_pf_ok(PFSignatureParse(text, &info));
  return info;
}

static void assert_canonical(const char* text, const char* want) {
  PFSignatureInfo* info = parse_ok(text);
  assert_string_equal(info->text, want);
  PFSignatureInfo* again = parse_ok(info->text);
  assert_string_equal(again->text, want);
  PFSignatureInfoFree(again);
  PFSignatureInfoFree(info);
}

static void test_every_new_type_parses(void** state) {
  (void)state;
  assert_canonical("int64(xs: array<int64>)", "int64(xs:array<int64>)");
  assert_canonical("void(list < str >)", "void(list<str>)");
  assert_canonical("void(m: map<str, float64>)", "void(m:map<str,float64>)");
  assert_canonical("void(d: dict<int64, any>)", "void(d:dict<int64,any>)");
  assert_canonical("optional<str>(x: optional<tensor<float32,1>>)",
                   "optional<str>(x:optional<tensor<float32,1>>)");
  assert_canonical("void(u: union< int64 , str, array<float64> >)",
                   "void(u:union<int64,str,array<float64>>)");
  assert_canonical("void(d: dict<str, list<array<optional<bool>>>> = null)",
                   "void(d:dict<str,list<array<optional<bool>>>>=null)");
  /* Unconstrained containers stay as they were. */
  assert_canonical("array(array, map, list, dict)", "array(array,map,list,dict)");
  /* A default is checked and converted against the tree. */
  assert_canonical("void(x: optional<float64> = 1)", "void(x:optional<float64>=1.0)");
  assert_canonical("void(x: union<int64, str> = \"a\")", "void(x:union<int64,str>=\"a\")");
  assert_canonical("void(x: optional<str> = null)", "void(x:optional<str>=null)");
}

static void test_type_trees(void** state) {
  (void)state;
  PFSignatureInfo* info = parse_ok(
      "map<str,list<int64>>(a: array<float64>, "
      "u: union<int64, optional<str>>, t: tensor<float64>)");
  const PFTypeInfo* r = info->result->type_info;
  assert_string_equal(r->text, "map<str,list<int64>>");
  assert_string_equal(r->name, "map");
  assert_int_equal(r->type_code, kPFObjectHandle);
  assert_int_equal(r->num_args, 2);
  assert_string_equal(r->args[0]->name, "str");
  assert_int_equal(r->args[0]->type_code, kPFStr);
  assert_string_equal(r->args[1]->text, "list<int64>");
  assert_int_equal(r->args[1]->num_args, 1);
  assert_string_equal(r->args[1]->args[0]->text, "int64");
  assert_int_equal(r->args[1]->args[0]->num_args, 0);
  const PFParamInfo* a = info->params[0];
  assert_string_equal(a->type, "array<float64>");
  assert_int_equal(a->type_code, kPFObjectHandle);
  assert_string_equal(a->type_info->args[0]->name, "float64");
  const PFParamInfo* u = info->params[1];
  assert_string_equal(u->type, "union<int64,optional<str>>");
  assert_string_equal(u->type_info->name, "union");
  assert_int_equal(u->type_info->type_code, kPFNull);
  assert_int_equal(u->type_info->num_args, 2);
  assert_string_equal(u->type_info->args[1]->name, "optional");
  assert_string_equal(u->type_info->args[1]->args[0]->text, "str");
  /* A type without element types is a tree of one node. */
  const PFTypeInfo* t = info->params[2]->type_info;
  assert_string_equal(t->text, "tensor<float64>");
  assert_string_equal(t->name, "tensor");
  assert_int_equal(t->num_args, 0);
  assert_int_equal(t->tensor.flags, kPFTensorCheckDtype);
  PFSignatureInfoFree(info);
}

/* Nesting: PF_SIGNATURE_DEPTH_MAX levels parse, one more does not; a
 * signature holds PF_SIGNATURE_TYPES_MAX element types. */
static void test_limits(void** state) {
  (void)state;
  char text[2048];
  int at = snprintf(text, sizeof(text), "void(x: ");
  for (int k = 0; k < PF_SIGNATURE_DEPTH_MAX; ++k) at += snprintf(text + at, 20, "array<");
  at += snprintf(text + at, 20, "int64");
  for (int k = 0; k < PF_SIGNATURE_DEPTH_MAX; ++k) at += snprintf(text + at, 20, ">");
  snprintf(text + at, 20, ")");
  PFSignatureInfoFree(parse_ok(text));
  at = snprintf(text, sizeof(text), "void(x: ");
  for (int k = 0; k <= PF_SIGNATURE_DEPTH_MAX; ++k) at += snprintf(text + at, 20, "list<");
  snprintf(text + at, 20, "int64>>>>>>>>>)");
  PFSignatureInfo* info = NULL;
  assert_pf_error(PFSignatureParse(text, &info), kPFErrValueError, "PFSignatureParse",
                  "element types nest deeper than 8 levels");
  at = snprintf(text, sizeof(text), "void(x: union<int64");
  for (int k = 2; k < PF_SIGNATURE_TYPES_MAX; ++k) at += snprintf(text + at, 20, ",str");
  snprintf(text + at, 20, ">)"); /* the union and its 63 members */
  PFSignatureInfoFree(parse_ok(text));
  at = snprintf(text, sizeof(text), "void(x: union<int64");
  for (int k = 2; k < PF_SIGNATURE_TYPES_MAX; ++k) at += snprintf(text + at, 20, ",str");
  snprintf(text + at, 20, ">, y: array<int64>)");
  assert_pf_error(PFSignatureParse(text, &info), kPFErrValueError,
                  "more than 64 element types in one signature");
}

static void test_refusals(void** state) {
  (void)state;
  static const PFTestRefusal cases[] = {
      {"void(x: array<>)", "at position 14", "expected a type name"},
      {"void(x: array<int64)", "at position 19", "expected ',' or '>'"},
      {"void(x: array<int64, str>)", "at position 13", "array takes one type, got 2"},
      {"void(x: map<str>)", "at position 11", "map takes two types (<KEY, VALUE>), got 1"},
      {"void(x: map<float64, str>)", "at position 12", "a map's keys are str, int64 or any"},
      {"void(x: dict<array<int64>, str>)", "at position 13", "a dict's keys are str, int64"},
      {"void(x: union<int64>)", "at position 13", "union takes at least two types, got 1"},
      {"void(x: optional)", "at position 8", "'optional' takes types: write optional<...>"},
      {"void(x: union)", "at position 8", "'union' takes types"},
      {"void(x: list<void>)", "at position 13", "void is not an element type"},
      {"void(x: list<flt>)", "at position 13", "unknown type 'flt'"},
      {"void(x: list<obj<no.Such>>)", "at position 17", "unknown object type 'no.Such'"},
      {"void(x: array<int64>", "at position 20", "expected ',' or ')', found the end"},
      {"void(x: optional<int64> = \"a\")", "at position 26",
       "the default \"a\" does not convert to optional<int64>"},
      {"void(x: array<int64> = 1)", "at position 23", "the default 1 does not convert to array"},
      {"void(x: array<str> = \"a\")", "at position 21", "the default \"a\" does not convert"},
      {"void(x: union<array<int64>, str> = 1)", "at position 35",
       "the default 1 does not convert to union<array<int64>,str>"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    pf_test_check_refusal(&cases[i], i);
  }
}

/* optional and union of types without one pointer type have no C type:
 * metadata only, as any. */
static void test_no_c_type_is_metadata_only(void** state) {
  (void)state;
  PFFunctionHandle f = NULL;
  assert_pf_error(PFFuncCreateFromTyped((void*)never_called, "void(x: optional<int64>)", &f),
                  kPFErrValueError, "parameter 0 ('x') is optional<int64>, which has no C type");
  assert_pf_error(PFFuncCreateFromTyped((void*)never_called, "union<int64,str>()", &f),
                  kPFErrValueError, "the result is union<int64,str>, which has no C type");
  /* A packed function's metadata takes them, and PFFuncCall does not
   * check them. */
  PFSignatureInfo* info = parse_ok("optional<int64>(x: union<int64, str>)");
  assert_int_equal(info->params[0]->type_code, kPFNull);
  PFSignatureInfoFree(info);
  /* One pointer type: the C type it is. */
  info = parse_ok(
      "void(a: optional<str>, b: union<array<int64>, list<str>>, "
      "c: union<array<int64>, array<str>>)");
  assert_int_equal(info->params[0]->type_code, kPFStr);
  assert_int_equal(info->params[1]->type_code, kPFObjectHandle);
  int index = -1;
  const char* name = NULL;
  for (; PFSignatureTypeInfo(index + 1, &name, NULL) == 0; ++index)
    if (strcmp(name, "object") == 0) break;
  assert_int_equal(info->params[1]->type_index, index + 1);
  PFSignatureInfoFree(info);
}

/* ---- typed calls ---- */

static int64_t size_of(PFObjectHandle o) {
  int64_t n = -1;
  uint32_t ti = 0;
  PFObjectGetTypeIndex(o, &ti);
  if (ti == kPFObjectArray) PFArrayGetSize(o, &n);
  else if (ti == kPFObjectList) PFListGetSize(o, &n);
  else if (ti == kPFObjectMap) PFMapGetSize(o, &n);
  else if (ti == kPFObjectDict) PFDictGetSize(o, &n);
  return n;
}

/* What the C function saw: its argument's type index and item 0's code. */
static uint32_t g_index;
static int g_first_code;
static int64_t see(PFObjectHandle o) {
  PFValue v;
  g_index = 0;
  g_first_code = -1;
  if (o == NULL) return -1;
  PFObjectGetTypeIndex(o, &g_index);
  if (g_index == kPFObjectArray && PFArrayGetItem(o, 0, &v, &g_first_code) != 0) PFErrorClear();
  return size_of(o);
}

static PFObjectHandle same(PFObjectHandle o) {
  if (o != NULL) PFObjectRetain(o);
  return o;
}

static PFFunctionHandle typed(void* fn, const char* sig) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromTyped(fn, sig, &f));
  return f;
}

static int call1(PFFunctionHandle f, PFObjectHandle arg, PFValue* out, int* code) {
  PFValue a = {.v_handle = arg};
  int c = arg ? kPFObjectHandle : kPFNull;
  return PFFuncCall(f, &a, &c, 1, out, code);
}

static PFObjectHandle array_of(const PFValue* v, const int* codes, int n) {
  PFObjectHandle o = NULL;
  assert_pf_ok(PFArrayCreate(v, codes, n, &o));
  return o;
}

static void test_call_checks_elements(void** state) {
  (void)state;
  PFFunctionHandle f = typed((void*)see, "int64(xs: array<int64>)");
  PFValue v[3] = {{.v_int64 = 1}, {.v_int64 = 2}, {.v_str = "x"}};
  int codes[3] = {kPFInt, kPFInt, kPFStr};
  PFObjectHandle good = array_of(v, codes, 2), bad = array_of(v, codes, 3);
  PFValue out;
  int code;
  assert_pf_ok(call1(f, good, &out, &code));
  assert_int_equal(out.v_int64, 2);
  assert_int_equal(g_index, kPFObjectArray);
  assert_pf_error(call1(f, bad, &out, &code), kPFErrTypeError,
                  "typed function int64(xs:array<int64>): argument 0 'xs', element 2: expected "
                  "int64, got str");
  /* A value out of the element type's range is a ValueError. */
  PFFunctionHandle small = typed((void*)see, "int64(xs: array<int8>)");
  PFValue big = {.v_int64 = 300};
  int ic = kPFInt;
  PFObjectHandle bigs = array_of(&big, &ic, 1);
  assert_pf_error(call1(small, bigs, &out, &code), kPFErrValueError,
                  "argument 0 'xs', element 0: expected int8, got int 300");
  /* Another container: a TypeError naming the whole type. */
  PFObjectHandle m = NULL;
  assert_pf_ok(PFMapCreate(NULL, NULL, NULL, NULL, 0, &m));
  assert_pf_error(call1(f, m, &out, &code), kPFErrTypeError,
                  "argument 0 'xs': expected array<int64>, got map object");
  /* null passes, as for an array. */
  assert_pf_ok(call1(f, NULL, &out, &code));
  assert_int_equal(out.v_int64, -1);
  PFObjectFree(m);
  PFObjectFree(bigs);
  PFObjectFree(good);
  PFObjectFree(bad);
  PFFuncFree(small);
  PFFuncFree(f);
}

static void test_call_converts(void** state) {
  (void)state;
  PFValue ints[2] = {{.v_int64 = 1}, {.v_int64 = 2}};
  int icodes[2] = {kPFInt, kPFInt};
  PFObjectHandle arr = array_of(ints, icodes, 2);
  PFValue out;
  int code;
  /* Exact ints become floats, as for a float64 argument. */
  PFFunctionHandle f = typed((void*)see, "int64(xs: array<float64>)");
  assert_pf_ok(call1(f, arr, &out, &code));
  assert_int_equal(g_first_code, kPFFloat);
  PFValue huge = {.v_int64 = (1LL << 53) + 1};
  PFObjectHandle inexact = array_of(&huge, icodes, 1);
  assert_pf_error(call1(f, inexact, &out, &code), kPFErrValueError,
                  "element 0: expected float64, got int 9007199254740993, which a double cannot");
  PFFuncFree(f);
  /* A List where an array<...> is wanted becomes an Array, and back. */
  PFObjectHandle lst = NULL;
  assert_pf_ok(PFListCreate(ints, icodes, 2, &lst));
  f = typed((void*)see, "int64(xs: array<int64>)");
  assert_pf_ok(call1(f, lst, &out, &code));
  assert_int_equal(g_index, kPFObjectArray);
  assert_int_equal(out.v_int64, 2);
  PFFuncFree(f);
  f = typed((void*)see, "int64(xs: list<int64>)");
  assert_pf_ok(call1(f, arr, &out, &code));
  assert_int_equal(g_index, kPFObjectList);
  PFFuncFree(f);
  /* A Dict where a map<...> is wanted becomes a Map, and back. */
  PFValue keys[2] = {{.v_str = "a"}, {.v_str = "b"}};
  int kcodes[2] = {kPFStr, kPFStr};
  PFObjectHandle d = NULL, m = NULL;
  assert_pf_ok(PFDictCreate(keys, kcodes, ints, icodes, 2, &d));
  assert_pf_ok(PFMapCreate(keys, kcodes, ints, icodes, 2, &m));
  f = typed((void*)see, "int64(m: map<str, float64>)");
  assert_pf_ok(call1(f, d, &out, &code));
  assert_int_equal(g_index, kPFObjectMap);
  assert_int_equal(out.v_int64, 2);
  PFFuncFree(f);
  f = typed((void*)see, "int64(m: dict<str, int64>)");
  assert_pf_ok(call1(f, m, &out, &code));
  assert_int_equal(g_index, kPFObjectDict);
  PFFuncFree(f);
  f = typed((void*)see, "int64(m: map<str, str>)");
  assert_pf_error(call1(f, m, &out, &code), kPFErrTypeError,
                  "argument 0 'm', value at key \"a\": expected str, got int");
  PFFuncFree(f);
  f = typed((void*)see, "int64(m: map<int64, int64>)");
  assert_pf_error(call1(f, d, &out, &code), kPFErrTypeError,
                  "argument 0 'm', key \"a\": expected int64, got str");
  PFFuncFree(f);
  /* Nested: a Map of Lists of ints, for dict<str, array<float64>>. */
  PFValue inner = {.v_handle = lst};
  int hc = kPFObjectHandle;
  PFObjectHandle nested = NULL;
  assert_pf_ok(PFMapCreate(keys, kcodes, &inner, &hc, 1, &nested));
  f = typed((void*)see, "int64(d: dict<str, array<float64>>)");
  assert_pf_ok(call1(f, nested, &out, &code));
  assert_int_equal(g_index, kPFObjectDict);
  PFFuncFree(f);
  f = typed((void*)see, "int64(d: map<str, array<str>>)");
  assert_pf_error(call1(f, nested, &out, &code), kPFErrTypeError,
                  "argument 0 'd', value at key \"a\", element 0: expected str, got int");
  PFFuncFree(f);
  PFObjectFree(nested);
  PFObjectFree(d);
  PFObjectFree(m);
  PFObjectFree(lst);
  PFObjectFree(inexact);
  PFObjectFree(arr);
}

/* What the C function saw of a graph of Arrays: 1 when, at every level
 * down item 0, every item is the same Array; the leaves' first code. */
static int g_all_shared;
static int64_t see_shared(PFObjectHandle o) {
  g_all_shared = 1;
  int64_t levels = 0;
  for (;;) {
    PFValue v, w;
    int c, d;
    int64_t n = size_of(o);
    assert_pf_ok(PFArrayGetItem(o, 0, &v, &c));
    if (c != kPFObjectHandle) {
      g_first_code = c;
      return levels + 1;
    }
    for (int64_t i = 1; i < n; ++i) {
      assert_pf_ok(PFArrayGetItem(o, i, &w, &d));
      if (w.v_handle != v.v_handle) g_all_shared = 0;
    }
    o = v.v_handle;
    ++levels;
  }
}

/* `levels` Arrays, each holding the one below `k` times, over an Array of
 * k ints; and the signature array<...<float64>...> of that depth. */
static PFObjectHandle shared_arrays(int levels, int k, char* sig, size_t n) {
  PFValue items[32];
  int codes[32];
  for (int i = 0; i < k; ++i) items[i].v_int64 = i, codes[i] = kPFInt;
  PFObjectHandle x = array_of(items, codes, k);
  for (int l = 1; l < levels; ++l) {
    for (int i = 0; i < k; ++i) items[i].v_handle = x, codes[i] = kPFObjectHandle;
    PFObjectHandle y = array_of(items, codes, k);
    PFObjectFree(x);
    x = y;
  }
  int at = snprintf(sig, n, "int64(xs: ");
  for (int l = 0; l < levels; ++l) at += snprintf(sig + at, n - (size_t)at, "array<");
  at += snprintf(sig + at, n - (size_t)at, "float64");
  for (int l = 0; l < levels; ++l) at += snprintf(sig + at, n - (size_t)at, ">");
  snprintf(sig + at, n - (size_t)at, ")");
  return x;
}

/* A container that an argument holds in several places is converted once
 * per call, and the converted one is shared as the given one was: 8
 * levels of Arrays that each hold the one below 20 times, for
 * array<...<float64>...>, are 8 conversions, not the 20^7 of the tree they
 * unfold to. (Before: each path was converted, with a new Array each, so
 * such an argument of 8 Arrays needed 25 billion floats.) */
static void test_shared_elements_convert_once(void** state) {
  (void)state;
  char sig[256];
  PFValue out;
  int code;
  PFObjectHandle x = shared_arrays(4, 12, sig, sizeof(sig));
  PFFunctionHandle f = typed((void*)see_shared, sig);
  pf_fault_count_start();
  assert_pf_ok(call1(f, x, &out, &code));
  long spent = pf_fault_count_end();
  if (spent > 400) fail_msg("converting 4 Arrays allocated %ld times", spent);
  assert_int_equal(out.v_int64, 4);
  assert_int_equal(g_first_code, kPFFloat);
  assert_int_equal(g_all_shared, 1);
  PFFuncFree(f);
  PFObjectFree(x);
  /* As deep as a type goes. */
  x = shared_arrays(PF_SIGNATURE_DEPTH_MAX, 20, sig, sizeof(sig));
  f = typed((void*)see_shared, sig);
  assert_pf_ok(call1(f, x, &out, &code));
  assert_int_equal(out.v_int64, PF_SIGNATURE_DEPTH_MAX);
  assert_int_equal(g_all_shared, 1);
  PFFuncFree(f);
  /* A wrong element is still named, on its first path. */
  f = typed((void*)see_shared, "int64(xs: array<array<array<array<array<array<array<str>>>>>>>)");
  assert_pf_error(call1(f, x, &out, &code), kPFErrTypeError,
                  "argument 0 'xs', element 0, element 0, element 0, element 0, element 0, "
                  "element 0, element 0: expected str, got object");
  PFFuncFree(f);
  PFObjectFree(x);
}

static void test_optional_and_union(void** state) {
  (void)state;
  PFValue out;
  int code;
  PFValue one = {.v_int64 = 1}, s = {.v_str = "x"}, nul = {.v_int64 = 0};
  int ic = kPFInt, sc = kPFStr, nc = kPFNull;
  PFObjectHandle ints = array_of(&one, &ic, 1), strs = array_of(&s, &sc, 1),
                 nulls = array_of(&nul, &nc, 1);
  PFFunctionHandle f = typed((void*)see, "int64(x: union<array<int64>, list<str>>)");
  assert_pf_ok(call1(f, ints, &out, &code));
  assert_int_equal(g_index, kPFObjectArray);
  assert_pf_ok(call1(f, strs, &out, &code)); /* the second member: made a List */
  assert_int_equal(g_index, kPFObjectList);
  assert_pf_error(call1(f, nulls, &out, &code), kPFErrTypeError,
                  "argument 0 'x': expected union<array<int64>,list<str>>, got array object");
  PFFuncFree(f);
  /* null in a container only under optional. */
  f = typed((void*)see, "int64(x: array<optional<int64>>)");
  assert_pf_ok(call1(f, nulls, &out, &code));
  PFFuncFree(f);
  f = typed((void*)see, "int64(x: array<array>)");
  assert_pf_ok(call1(f, nulls, &out, &code)); /* an unconstrained array takes null */
  PFFuncFree(f);
  f = typed((void*)see, "int64(x: array<str>)");
  assert_pf_error(call1(f, nulls, &out, &code), kPFErrTypeError,
                  "element 0: expected str, got null");
  PFFuncFree(f);
  PFObjectFree(ints);
  PFObjectFree(strs);
  PFObjectFree(nulls);
}

static void test_results_are_checked(void** state) {
  (void)state;
  PFValue v[2] = {{.v_int64 = 1}, {.v_str = "x"}};
  int codes[2] = {kPFInt, kPFStr};
  PFObjectHandle good = array_of(v, codes, 1), bad = array_of(v, codes, 2);
  PFFunctionHandle f = typed((void*)same, "array<int64>(array)");
  PFValue out;
  int code;
  assert_pf_ok(call1(f, good, &out, &code));
  assert_int_equal(code, kPFObjectHandle);
  assert_ptr_equal(out.v_handle, good);
  PFObjectFree(out.v_handle);
  assert_pf_error(call1(f, bad, &out, &code), kPFErrTypeError,
                  "typed function array<int64>(array): result, element 1: expected int64, got str");
  PFFuncFree(f);
  /* A converted result is a new container, the C function's released. */
  f = typed((void*)same, "array<float64>(array)");
  assert_pf_ok(call1(f, good, &out, &code));
  assert_ptr_not_equal(out.v_handle, good);
  PFValue item;
  int ic;
  assert_pf_ok(PFArrayGetItem(out.v_handle, 0, &item, &ic));
  assert_int_equal(ic, kPFFloat);
  PFObjectFree(out.v_handle);
  PFFuncFree(f);
  PFObjectFree(good);
  PFObjectFree(bad);
}

/* ---- fields ---- */

typedef struct {
  PFObjectHandle names; /* list<str> */
  PFObjectHandle next;  /* optional<obj<tt.Node>> */
  PFObjectHandle any;   /* array (unconstrained) */
} Node;

static const PFFieldDesc k_node_fields[] = {
    PF_FIELD(Node, names, "list< str >", kPFFieldWritable, "Its names."),
    PF_FIELD(Node, next, "optional<obj<tt.Node>>", kPFFieldWritable, NULL),
    PF_FIELD(Node, any, "array", kPFFieldWritable, NULL),
};

static int set_field(PFObjectHandle o, uint32_t ix, const char* name, PFValue v, int code) {
  const PFFieldInfo* f = NULL;
  assert_pf_ok(PFObjectTypeGetField(ix, name, &f));
  return PFObjectSetField(o, f, v, code);
}

static void test_fields_take_the_same_types(void** state) {
  (void)state;
  PFObjectTypeDesc d = {PF_OBJECT_TYPE_DESC_ABI,
                        "tt.Node",
                        NULL,
                        sizeof(Node),
                        NULL,
                        NULL,
                        k_node_fields,
                        3,
                        NULL,
                        0};
  uint32_t ix = 0;
  assert_pf_ok(PFObjectTypeRegister(&d, &ix));
  const PFFieldInfo* f = NULL;
  assert_pf_ok(PFObjectTypeGetField(ix, "names", &f));
  assert_string_equal(f->type, "list<str>"); /* canonical */
  assert_pf_ok(PFObjectTypeGetField(ix, "next", &f));
  assert_string_equal(f->type, "optional<obj<tt.Node>>");
  PFObjectHandle o = NULL, other = NULL;
  assert_pf_ok(PFObjectAlloc(ix, &o));
  assert_pf_ok(PFObjectAlloc(ix, &other));
  /* An Array of str becomes the List the field keeps. */
  PFValue s[2] = {{.v_str = "a"}, {.v_int64 = 3}};
  int sc[2] = {kPFStr, kPFInt};
  PFObjectHandle strs = array_of(s, sc, 1), mixed = array_of(s, sc, 2);
  PFValue v = {.v_handle = strs}, out;
  int code;
  assert_pf_ok(set_field(o, ix, "names", v, kPFObjectHandle));
  assert_pf_ok(PFObjectTypeGetField(ix, "names", &f));
  assert_pf_ok(PFObjectGetField(o, f, &out, &code));
  uint32_t got = 0;
  assert_pf_ok(PFObjectGetTypeIndex(out.v_handle, &got));
  assert_int_equal(got, kPFObjectList); /* borrowed from the instance */
  v.v_handle = mixed;
  assert_pf_error(set_field(o, ix, "names", v, kPFObjectHandle), kPFErrTypeError,
                  "PFObjectSetField", "field 'names'", "element 1: expected str, got int");
  /* optional<obj<KEY>>: null or an instance. */
  v.v_handle = other;
  assert_pf_ok(set_field(o, ix, "next", v, kPFObjectHandle));
  v.v_int64 = 0;
  assert_pf_ok(set_field(o, ix, "next", v, kPFNull));
  v.v_handle = strs;
  assert_pf_error(set_field(o, ix, "next", v, kPFObjectHandle), kPFErrTypeError,
                  "field 'next' of tt.Node: expected obj<tt.Node>, got array object");
  v.v_handle = mixed;
  assert_pf_ok(set_field(o, ix, "any", v, kPFObjectHandle)); /* unconstrained */
  /* A field type with no C type is refused when the type is made. */
  static const PFFieldDesc bad_fields[] = {
      PF_FIELD(Node, names, "optional<int64>", 0, NULL),
  };
  PFObjectTypeDesc bad = {
      PF_OBJECT_TYPE_DESC_ABI, "tt.Bad", NULL, sizeof(Node), NULL, NULL, bad_fields, 1, NULL, 0};
  assert_pf_error(PFObjectTypeRegister(&bad, &ix), kPFErrValueError,
                  "field 'names': its type is optional<int64>, which has no C type");
  PFObjectFree(o);
  PFObjectFree(other);
  PFObjectFree(strs);
  PFObjectFree(mixed);
}

int main(void) {
  if (pf_fault_install() != 0) return 1; /* before the runtime's first allocation */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_every_new_type_parses),
      cmocka_unit_test(test_type_trees),
      cmocka_unit_test(test_limits),
      cmocka_unit_test(test_refusals),
      cmocka_unit_test(test_no_c_type_is_metadata_only),
      cmocka_unit_test(test_call_checks_elements),
      cmocka_unit_test(test_call_converts),
      cmocka_unit_test(test_shared_elements_convert_once),
      cmocka_unit_test(test_optional_and_union),
      cmocka_unit_test(test_results_are_checked),
      cmocka_unit_test(test_fields_take_the_same_types),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
