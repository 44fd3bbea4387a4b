/* libFuzzer target: object type descriptions.
 *
 * The input is a small text, one directive a line:
 *   type KEY [PARENT] SIZE                starts a description (at most 4)
 *   field NAME TYPE OFFSET FLAGS
 *   method NAME p|t|pt SIGNATURE FLAGS    (p: packed, t: typed)
 *   doc TEXT
 *   count NUM_FIELDS NUM_METHODS          counts that may lie
 * where "-" stands for NULL and numbers are read with strtoull/strtol.
 * Each description goes to PFObjectTypeRegister, and the target checks:
 *   - a refusal is -1 with a TypeError, ValueError, KeyError or
 *     RuntimeError whose message starts with "PFObjectTypeRegister: ", and
 *     it registered nothing under the key;
 *   - an accepted type's description is consistent: its fields lie inside
 *     the instance, aligned, without overlaps or repeated names; its
 *     methods' names are unique; registering it again gives its index;
 *   - an instance works: every field reads, a read-only one refuses a
 *     write, a writable one takes a value of each kind or refuses it with
 *     a TypeError or ValueError, and reads back; the constructor runs when
 *     its __init__ is absent or packed; releasing frees everything
 *     (LeakSanitizer at exit: the table keeps only what it reaches).
 * Typed methods point at a function that is never called: its prototype is
 * whatever the input says. Types are never removed, so a long run fills the
 * table; past its capacity registration fails with a RuntimeError, which
 * the checks allow. */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define CHECK(cond, ...)                                                \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf(stderr, "fuzz_object_type: check failed: %s\n  ", #cond); \
      fprintf(stderr, __VA_ARGS__);                                     \
      fprintf(stderr, "\n");                                            \
      abort();                                                          \
    }                                                                   \
  } while (0)

static void never_called(void) { abort(); }

/* Safe as any method, __init__ included: sets nothing, returns null. */
static int noop_packed(PFValue* a, int* c, int n, PFRetValueHandle r, void* res) {
  (void)a, (void)c, (void)n, (void)r, (void)res;
  return 0;
}

#define MAX_TYPES 4
#define MAX_MEMBERS 24

typedef struct {
  PFObjectTypeDesc desc;
  PFFieldDesc fields[MAX_MEMBERS];
  PFMethodDesc methods[MAX_MEMBERS];
} desc_buf;

static const char* word_or_null(const char* w) { return strcmp(w, "-") ? w : NULL; }

/* Splits `line` at blanks into at most `max` words (in place). */
static int words(char* line, char** w, int max) {
  int n = 0;
  char* save = NULL;
  for (char* p = strtok_r(line, " \t\r", &save); p != NULL && n < max;
       p = strtok_r(NULL, " \t\r", &save))
    w[n++] = p;
  return n;
}

/* One directive into the descriptions so far (`*n` of them). */
static void directive(char** w, int k, desc_buf* d, int* n) {
  if (strcmp(w[0], "type") == 0 && k >= 3 && *n < MAX_TYPES) {
    desc_buf* t = &d[(*n)++];
    memset(t, 0, sizeof(*t));
    t->desc.abi = PF_OBJECT_TYPE_DESC_ABI;
    t->desc.key = word_or_null(w[1]);
    t->desc.parent = k >= 4 ? word_or_null(w[2]) : NULL;
    t->desc.instance_size = (size_t)strtoull(w[k >= 4 ? 3 : 2], NULL, 0);
    t->desc.fields = t->fields;
    t->desc.methods = t->methods;
    return;
  }
  if (*n == 0) return;
  desc_buf* t = &d[*n - 1];
  if (strcmp(w[0], "field") == 0 && k >= 5 && t->desc.num_fields >= 0 &&
      t->desc.num_fields < MAX_MEMBERS && t->desc.fields != NULL) {
    PFFieldDesc* f = &t->fields[t->desc.num_fields++];
    f->name = word_or_null(w[1]);
    f->type = word_or_null(w[2]);
    f->offset = (size_t)strtoull(w[3], NULL, 0);
    f->flags = (uint32_t)strtoul(w[4], NULL, 0);
  } else if (strcmp(w[0], "method") == 0 && k >= 5 && t->desc.num_methods >= 0 &&
             t->desc.num_methods < MAX_MEMBERS && t->desc.methods != NULL) {
    PFMethodDesc* m = &t->methods[t->desc.num_methods++];
    m->name = word_or_null(w[1]);
    m->packed = strchr(w[2], 'p') ? noop_packed : NULL;
    m->typed = strchr(w[2], 't') ? never_called : NULL;
    m->signature = word_or_null(w[3]);
    m->flags = (uint32_t)strtoul(w[4], NULL, 0);
  } else if (strcmp(w[0], "doc") == 0 && k >= 2) {
    t->desc.doc = w[1];
  } else if (strcmp(w[0], "count") == 0 && k >= 3) {
    /* Counts that lie: within the arrays, or with the arrays dropped. */
    t->desc.num_fields = (int)strtol(w[1], NULL, 0);
    t->desc.num_methods = (int)strtol(w[2], NULL, 0);
    if (t->desc.num_fields < 0 || t->desc.num_fields > MAX_MEMBERS) t->desc.fields = NULL;
    if (t->desc.num_methods < 0 || t->desc.num_methods > MAX_MEMBERS) t->desc.methods = NULL;
  }
}

/* Parses the input into descriptions; the strings point into `text`. */
static int parse(char* text, desc_buf* d) {
  int n = 0;
  char* save = NULL;
  for (char* line = strtok_r(text, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
    char* w[6];
    int k = words(line, w, 6);
    if (k > 0) directive(w, k, d, &n);
  }
  return n;
}

static uint32_t find(const char* key) {
  uint32_t ix = 0;
  if (key != NULL && strlen(key) <= PF_OBJECT_TYPE_KEY_MAX)
    CHECK(PFObjectTypeFind(key, &ix) == 0, "find: %s", PFGetLastError());
  return ix;
}

static void check_refused(const char* key, uint32_t before) {
  const char* kind = PFErrorGetKind();
  CHECK(strcmp(kind, kPFErrTypeError) == 0 || strcmp(kind, kPFErrValueError) == 0 ||
            strcmp(kind, kPFErrKeyError) == 0 || strcmp(kind, kPFErrRuntimeError) == 0,
        "kind %s: %s", kind, PFErrorGetMessage());
  CHECK(strncmp(PFErrorGetMessage(), "PFObjectTypeRegister: ", 22) == 0, "message %s",
        PFErrorGetMessage());
  CHECK(find(key) == before, "a refused '%s' was registered", key);
}

/* The alignment of a field's bytes, from its canonical type and size. */
static size_t align_of(const PFFieldInfo* f) {
  if (strcmp(f->type, "dtype") == 0) return 2;
  if (strcmp(f->type, "device") == 0) return 4;
  return f->size;
}

static void check_description(const PFObjectTypeInfo* ti) {
  for (int i = 0; i < ti->num_fields; ++i) {
    const PFFieldInfo* f = ti->fields[i];
    CHECK(f->size > 0 && f->offset <= ti->instance_size && f->size <= ti->instance_size - f->offset,
          "field %s: %zu bytes at %zu of %zu", f->name, f->size, f->offset, ti->instance_size);
    CHECK(f->offset % align_of(f) == 0, "field %s (%s) at %zu", f->name, f->type, f->offset);
    for (int j = 0; j < i; ++j) {
      const PFFieldInfo* g = ti->fields[j];
      CHECK(f->offset >= g->offset + g->size || g->offset >= f->offset + f->size,
            "fields %s and %s overlap", f->name, g->name);
      CHECK(strcmp(f->name, g->name) != 0, "two fields %s", f->name);
    }
  }
  for (int i = 0; i < ti->num_methods; ++i)
    for (int j = 0; j < i; ++j)
      CHECK(strcmp(ti->methods[i]->name, ti->methods[j]->name) != 0, "two methods %s",
            ti->methods[i]->name);
}

/* Reads every field; writes each writable one with values of every kind. */
static void exercise_instance(uint32_t ix, const PFObjectTypeInfo* ti, PFObjectHandle boxed) {
  PFObjectHandle o = NULL;
  CHECK(PFObjectAlloc(ix, &o) == 0, "alloc: %s", PFGetLastError());
  PFByteArray ba = {"b\0y", 3};
  const PFValue vals[] = {{.v_int64 = 1},           {.v_int64 = -5},
                          {.v_float64 = 2.5},       {.v_int64 = 1},
                          {.v_str = "fuzz"},        {.v_handle = &ba},
                          {.v_handle = boxed},      {.v_handle = NULL},
                          {.v_handle = o},          {.v_type = {kDLFloat, 32, 1}},
                          {.v_device = {kDLCPU, 0}}};
  const int codes[] = {kPFInt,          kPFInt,  kPFFloat,        kPFBool,     kPFStr,   kPFBytes,
                       kPFObjectHandle, kPFNull, kPFOpaqueHandle, kPFDataType, kPFDevice};
  for (int i = 0; i < ti->num_fields; ++i) {
    const PFFieldInfo* f = ti->fields[i];
    PFValue v;
    int c;
    CHECK(PFObjectGetField(o, f, &v, &c) == 0, "read %s: %s", f->name, PFGetLastError());
    if (!(f->flags & kPFFieldWritable)) {
      CHECK(PFObjectSetField(o, f, vals[0], codes[0]) == -1 &&
                strcmp(PFErrorGetKind(), kPFErrAttributeError) == 0,
            "wrote read-only %s", f->name);
      continue;
    }
    for (size_t k = 0; k < sizeof(codes) / sizeof(codes[0]); ++k) {
      if (PFObjectSetField(o, f, vals[k], codes[k]) != 0) {
        const char* kind = PFErrorGetKind();
        CHECK(strcmp(kind, kPFErrTypeError) == 0 || strcmp(kind, kPFErrValueError) == 0,
              "set %s (%s) from %s: %s", f->name, f->type, PFTypeCodeName(codes[k]),
              PFGetLastError());
        continue;
      }
      CHECK(PFObjectGetField(o, f, &v, &c) == 0, "read back %s: %s", f->name, PFGetLastError());
    }
  }
  PFObjectFree(o);
}

/* Calls the constructor when its __init__ is absent or packed without a
 * signature (ours, a no-op); a typed one's prototype is the input's. */
static void exercise_constructor(uint32_t ix, const PFObjectTypeInfo* ti) {
  if (ti->init != NULL && ti->init->signature != NULL) return;
  PFFunctionHandle c = NULL;
  CHECK(PFObjectTypeGetConstructor(ix, &c) == 0, "constructor: %s", PFGetLastError());
  PFValue rv;
  int rc;
  if (PFFuncCall(c, NULL, NULL, 0, &rv, &rc) == 0 && rc == kPFObjectHandle)
    PFObjectFree(rv.v_handle);
  PFFuncFree(c);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  char* text = malloc(size + 1);
  desc_buf* d = calloc(MAX_TYPES, sizeof(desc_buf));
  if (text == NULL || d == NULL) abort();
  memcpy(text, data, size);
  text[size] = '\0';
  int n = parse(text, d);
  PFObjectHandle boxed = NULL;
  CHECK(PFObjectCreateBoxed(NULL, NULL, &boxed) == 0, "boxed");
  for (int i = 0; i < n; ++i) {
    const char* key = d[i].desc.key;
    uint32_t before = find(key), ix = 0;
    if (PFObjectTypeRegister(&d[i].desc, &ix) != 0) {
      check_refused(key, before);
      continue;
    }
    CHECK(before == 0 || before == ix, "'%s' changed index", key);
    const PFObjectTypeInfo* ti = NULL;
    CHECK(PFObjectTypeGetInfo(ix, &ti) == 0, "info");
    CHECK(strcmp(ti->key, key) == 0, "key %s", ti->key);
    check_description(ti);
    uint32_t again = 0;
    CHECK(PFObjectTypeRegister(&d[i].desc, &again) == 0 && again == ix, "again: %s",
          PFGetLastError());
    exercise_instance(ix, ti, boxed);
    exercise_constructor(ix, ti);
  }
  PFObjectFree(boxed);
  PFErrorClear();
  free(d);
  free(text);
  return 0;
}
