/* Accessor fields of registered object types (PFAccessorDesc in a
 * PFObjectTypeDesc2, description layout 2): described as fields, read and written through their getter
 * and setter by PFObjectGetField and PFObjectSetField, the conversions and
 * errors on both sides, bad descriptions, inheritance, registering again,
 * and a description of layout 1 (no accessor members) still read. Types are
 * never removed, so each test registers keys of its own. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdlib.h>

#include "support/pf_test.h"
#include "support/pf_object_test.h"

/* A struct whose name is a fixed buffer, not a char* the instance owns:
 * what an offset field of type str cannot describe. */
typedef struct {
  int64_t id;
  char name[16];
  int sets; /* setter calls that changed the name */
} Tag;

static int tag_get_name(const void* data, PFValue* out, int* out_code) {
  const Tag* t = data;
  out->v_str = t->name;
  *out_code = kPFStr;
  return 0;
}

static int tag_set_name(void* data, PFValue value, int code) {
  Tag* t = data;
  if (code != kPFStr)
    return PFErrorSetFormat(kPFErrTypeError, "tag_set_name: got %s", PFTypeCodeName(code));
  size_t n = strlen(value.v_str);
  if (n >= sizeof(t->name))
    return PFErrorSetFormat(kPFErrValueError, "tag_set_name: '%s' is longer than 15 bytes",
                            value.v_str);
  memcpy(t->name, value.v_str, n + 1);
  ++t->sets;
  return 0;
}

/* A read-only field computed from the struct. */
static int tag_get_length(const void* data, PFValue* out, int* out_code) {
  out->v_int64 = (int64_t)strlen(((const Tag*)data)->name);
  *out_code = kPFInt;
  return 0;
}

/* Getters that break their contract. */
static int get_wrong_code(const void* data, PFValue* out, int* out_code) {
  (void)data;
  out->v_float64 = 1.5;
  *out_code = kPFFloat;
  return 0;
}
static int get_out_of_range(const void* data, PFValue* out, int* out_code) {
  (void)data;
  out->v_int64 = 300;
  *out_code = kPFInt;
  return 0;
}
static int get_fails_silently(const void* data, PFValue* out, int* out_code) {
  (void)data, (void)out, (void)out_code;
  return -1;
}
static int set_fails_silently(void* data, PFValue value, int code) {
  (void)data, (void)value, (void)code;
  return -1;
}

static const PFFieldDesc k_tag_fields[] = {
    PF_FIELD(Tag, id, "int64", kPFFieldWritable, "Its id."),
};
static const PFAccessorDesc k_tag_accessors[] = {
    PF_ACCESSOR("name", "str", tag_get_name, tag_set_name, "Its name, at most 15 bytes."),
    PF_ACCESSOR("length", "int32", tag_get_length, NULL, NULL),
    PF_ACCESSOR("wrong", "int64", get_wrong_code, NULL, NULL),
    PF_ACCESSOR("small", "int8", get_out_of_range, NULL, NULL),
    PF_ACCESSOR("silent", "bool", get_fails_silently, set_fails_silently, NULL),
};

static PFObjectTypeDesc2 tag_desc(const char* key) {
  PFObjectTypeDesc2 d = {{PF_OBJECT_TYPE_DESC2_ABI, key, NULL, sizeof(Tag), NULL, "A tag.",
                          k_tag_fields, PF_COUNTOF(k_tag_fields), NULL, 0},
                         k_tag_accessors,
                         PF_COUNTOF(k_tag_accessors)};
  return d;
}

/* A zeroed instance of the tag type registered under `key`; its index. */
static PFObjectHandle new_tag(const char* key, uint32_t* ix) {
  PFObjectTypeDesc2 d = tag_desc(key);
  *ix = reg(&d.base);
  return alloc(*ix);
}

static int set_str(PFObjectHandle o, const char* name, const char* s) {
  PFValue v = {.v_str = s};
  return PFObjectSetFieldByName(o, name, v, kPFStr);
}

static void assert_str_field(PFObjectHandle o, const char* name, const char* want) {
  PFValue v;
  int code = -1;
  assert_pf_ok(PFObjectGetFieldByName(o, name, &v, &code));
  assert_int_equal(code, kPFStr);
  assert_string_equal(v.v_str, want);
}

static void test_described_as_fields(void** state) {
  (void)state;
  PFObjectTypeDesc2 d = tag_desc("acc.Described");
  uint32_t ix = reg(&d.base);
  const PFObjectTypeInfo* ti = info(ix);
  /* The offset fields first, then the accessor fields, in their order. */
  assert_int_equal(ti->num_fields, 6);
  assert_string_equal(ti->fields[0]->name, "id");
  assert_string_equal(ti->fields[1]->name, "name");
  assert_string_equal(ti->fields[2]->name, "length");
  const PFFieldInfo* name = field(ix, "name");
  assert_ptr_equal(name, ti->fields[1]);
  assert_string_equal(name->type, "str");
  assert_string_equal(name->doc, "Its name, at most 15 bytes.");
  assert_int_equal(name->flags, kPFFieldAccessor | kPFFieldWritable);
  assert_int_equal(name->offset, 0);
  assert_int_equal(name->size, 0);
  assert_int_equal(name->type_index, ix);
  const PFFieldInfo* length = field(ix, "length");
  assert_int_equal(length->flags, kPFFieldAccessor);
  assert_string_equal(length->type, "int32");
  assert_null(length->doc);
  assert_int_equal(field(ix, "id")->flags, kPFFieldWritable);
}

static void test_read_and_write(void** state) {
  (void)state;
  uint32_t ix = 0;
  PFObjectHandle o = new_tag("acc.ReadWrite", &ix);
  Tag* t = data(o);
  assert_str_field(o, "name", ""); /* a zeroed struct's */
  assert_pf_ok(set_str(o, "name", "apples"));
  assert_string_equal(t->name, "apples");
  assert_int_equal(t->sets, 1);
  /* Through the handle: the value is borrowed from the instance. */
  PFValue v;
  int code = -1;
  assert_pf_ok(PFObjectGetField(o, field(ix, "name"), &v, &code));
  assert_int_equal(code, kPFStr);
  assert_ptr_equal(v.v_str, t->name);
  assert_pf_ok(PFObjectGetFieldByName(o, "length", &v, &code));
  assert_int_equal(code, kPFInt);
  assert_int_equal(v.v_int64, 6);
  /* The offset field beside it is untouched. */
  assert_pf_ok(PFObjectGetFieldByName(o, "id", &v, &code));
  assert_int_equal(v.v_int64, 0);
  PFObjectFree(o);
}

static void test_write_errors(void** state) {
  (void)state;
  uint32_t ix = 0;
  PFObjectHandle o = new_tag("acc.WriteErrors", &ix);
  Tag* t = data(o);
  assert_pf_ok(set_str(o, "name", "pears"));
  /* Checked by the runtime before the setter runs. */
  PFValue i = {.v_int64 = 5};
  assert_pf_error(PFObjectSetFieldByName(o, "name", i, kPFInt), kPFErrTypeError,
                  "PFObjectSetFieldByName: field 'name' of acc.WriteErrors: expected str, got int");
  assert_pf_error(PFObjectSetField(o, field(ix, "name"), (PFValue){.v_str = NULL}, kPFStr),
                  kPFErrTypeError, "field 'name' of acc.WriteErrors", "NULL pointer");
  assert_pf_error(PFObjectSetFieldByName(o, "name", (PFValue){.v_handle = NULL}, kPFNull),
                  kPFErrTypeError, "field 'name' of acc.WriteErrors: expected str, got null");
  assert_pf_error(PFObjectSetFieldByName(o, "length", i, kPFInt), kPFErrAttributeError,
                  "field 'length' of acc.WriteErrors is read-only");
  /* The setter's own error, with the field unchanged. */
  assert_pf_error(set_str(o, "name", "a name much too long"), kPFErrValueError,
                  "tag_set_name: 'a name much too long' is longer than 15 bytes");
  assert_int_equal(t->sets, 1);
  assert_str_field(o, "name", "pears");
  /* A setter that fails without recording an error: a RuntimeError. */
  PFErrorClear();
  assert_pf_error(PFObjectSetFieldByName(o, "silent", (PFValue){.v_int64 = 1}, kPFBool),
                  kPFErrRuntimeError,
                  "PFObjectSetFieldByName: the setter of field 'silent' of acc.WriteErrors failed "
                  "without recording an error");
  PFObjectFree(o);
}

static void test_getter_contract(void** state) {
  (void)state;
  uint32_t ix = 0;
  PFObjectHandle o = new_tag("acc.Getters", &ix);
  PFValue v = {.v_int64 = 77};
  int code = 77;
  assert_pf_error(PFObjectGetFieldByName(o, "wrong", &v, &code), kPFErrTypeError,
                  "PFObjectGetFieldByName: field 'wrong' of acc.Getters (its getter's value): "
                  "expected int64, got float");
  assert_pf_error(PFObjectGetFieldByName(o, "small", &v, &code), kPFErrValueError,
                  "field 'small' of acc.Getters (its getter's value): expected int8");
  PFErrorClear();
  assert_pf_error(PFObjectGetField(o, field(ix, "silent"), &v, &code), kPFErrRuntimeError,
                  "PFObjectGetField: the getter of field 'silent' of acc.Getters failed without "
                  "recording an error");
  /* Nothing written on error. */
  assert_int_equal(v.v_int64, 77);
  assert_int_equal(code, 77);
  PFObjectFree(o);
}

/* A child inherits the accessor fields; its struct begins with the
 * parent's. */
typedef struct {
  Tag base;
  double weight;
} Heavy;

static void test_inherited(void** state) {
  (void)state;
  PFObjectTypeDesc2 d = tag_desc("acc.Base");
  reg(&d.base);
  static const PFFieldDesc fields[] = {PF_FIELD(Heavy, weight, "float64", kPFFieldWritable, NULL)};
  PFObjectTypeDesc c = {PF_OBJECT_TYPE_DESC_ABI,
                        "acc.Heavy",
                        "acc.Base",
                        sizeof(Heavy),
                        NULL,
                        NULL,
                        fields,
                        1,
                        NULL,
                        0};
  uint32_t ix = reg(&c);
  PFObjectHandle o = alloc(ix);
  assert_pf_ok(set_str(o, "name", "lead"));
  assert_str_field(o, "name", "lead");
  Heavy* h = data(o);
  assert_string_equal(h->base.name, "lead");
  /* A field of the child, through a handle, on an instance of the parent. */
  uint32_t base = 0;
  assert_pf_ok(PFObjectTypeFind("acc.Base", &base));
  PFObjectHandle b = alloc(base);
  PFValue v;
  int code;
  assert_pf_error(PFObjectGetField(b, field(ix, "weight"), &v, &code), kPFErrTypeError,
                  "is not a field of a acc.Base object");
  PFObjectFree(b);
  PFObjectFree(o);
}

static void test_register_again(void** state) {
  (void)state;
  PFObjectTypeDesc2 d = tag_desc("acc.Again");
  uint32_t ix = reg(&d.base);
  assert_int_equal(reg(&d.base), ix);
  PFAccessorDesc other[PF_COUNTOF(k_tag_accessors)];
  memcpy(other, k_tag_accessors, sizeof(other));
  other[1].get = get_out_of_range; /* the same data, other code */
  d.accessors = other;
  uint32_t got = 0;
  assert_pf_error(PFObjectTypeRegister(&d.base, &got), kPFErrKeyError,
                  "'acc.Again' is already registered with another description",
                  "its field 'length' differs");
  other[1].get = tag_get_length;
  other[1].set = tag_set_name; /* now writable */
  assert_pf_error(PFObjectTypeRegister(&d.base, &got), kPFErrKeyError,
                  "its field 'length' differs");
}

static void test_bad_descriptions(void** state) {
  (void)state;
  uint32_t ix = 0;
  PFObjectTypeDesc2 d = tag_desc("acc.Bad");
  PFAccessorDesc a = PF_ACCESSOR("x", "str", tag_get_name, NULL, NULL);
  d.accessors = &a;
  d.num_accessors = 1;
  a.get = NULL;
  assert_pf_error(PFObjectTypeRegister(&d.base, &ix), kPFErrValueError,
                  "PFObjectTypeRegister: object type 'acc.Bad': field 'x': its getter is NULL");
  a.get = tag_get_name;
  /* Types whose values are references (acc.Base: registered by
   * test_inherited, which runs before). */
  const char* refs[] = {"object", "list<str>", "func", "tensor", "optional<str>", "obj<acc.Base>"};
  for (size_t i = 0; i < sizeof(refs) / sizeof(refs[0]); ++i) {
    a.type = refs[i];
    assert_pf_error(PFObjectTypeRegister(&d.base, &ix), kPFErrValueError,
                    "field 'x': an accessor field's type is a number type", refs[i]);
  }
  a.type = "void";
  assert_pf_error(PFObjectTypeRegister(&d.base, &ix), kPFErrValueError, "void is not a field type");
  a.type = "str";
  a.name = "id"; /* taken by the offset field */
  assert_pf_error(PFObjectTypeRegister(&d.base, &ix), kPFErrValueError, "'id'");
  a.name = "9x";
  assert_pf_error(PFObjectTypeRegister(&d.base, &ix), kPFErrValueError,
                  "the name of accessor field 0 is not an identifier");
  a.name = "x";
  d.num_accessors = -1;
  assert_pf_error(PFObjectTypeRegister(&d.base, &ix), kPFErrValueError, "num_accessors is -1");
  d.num_accessors = 1;
  d.accessors = NULL;
  assert_pf_error(PFObjectTypeRegister(&d.base, &ix), kPFErrTypeError,
                  "accessors is NULL with num_accessors 1");
  d.base.abi = 4;
  assert_pf_error(PFObjectTypeRegister(&d.base, &ix), kPFErrValueError, "layout version 4",
                  "versions 1 to 3");
  PFObjectTypeFind("acc.Bad", &ix);
  assert_int_equal(ix, 0);
}

/* A description of layout 1 is a PFObjectTypeDesc alone: in a block of
 * exactly its size (ASan and valgrind see a read past it), it registers,
 * without accessor fields. */
static void test_layout_1_still_read(void** state) {
  (void)state;
  size_t n = sizeof(PFObjectTypeDesc);
  PFObjectTypeDesc2 full = tag_desc("acc.Layout1");
  full.base.abi = PF_OBJECT_TYPE_DESC_ABI;
  PFObjectTypeDesc* d = malloc(n);
  assert_non_null(d);
  memcpy(d, &full.base, n);
  uint32_t ix = reg(d);
  free(d);
  assert_int_equal(info(ix)->num_fields, 1);
  size_t size = 0;
  assert_pf_ok(PFGetStructSize("PFAccessorDesc", &size));
  assert_int_equal(size, sizeof(PFAccessorDesc));
  assert_pf_ok(PFGetStructSize("PFObjectTypeDesc2", &size));
  assert_int_equal(size, sizeof(PFObjectTypeDesc2));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_described_as_fields), cmocka_unit_test(test_read_and_write),
      cmocka_unit_test(test_write_errors),        cmocka_unit_test(test_getter_contract),
      cmocka_unit_test(test_inherited),           cmocka_unit_test(test_register_again),
      cmocka_unit_test(test_bad_descriptions),    cmocka_unit_test(test_layout_1_still_read),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
