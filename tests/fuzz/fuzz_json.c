/* libFuzzer target: JSON documents of object graphs (PFFromJSON, PFToJSON;
 * include/packedfunc/serialize.h).
 *
 * The input is a document, read with PFFromJSON. Checks: it gives a value,
 * or a ValueError, TypeError or MemoryError whose message names
 * PFFromJSON, never a crash, a leak or undefined behaviour; a value it
 * gives writes (PFToJSON; only nesting past PF_JSON_MAX_DEPTH may be
 * refused), reads back as a structurally equal value, and writes again to
 * the same text (the writer's output is canonical). A registered type,
 * fuzz.Node, lets documents hold instances, read-only fields included.
 * Values that hold themselves are taken apart before they are released. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

typedef struct {
  int64_t id;
  PFObjectHandle next;
  char* name;
} Node;

static uint32_t g_node;

static void fail(const char* what, const char* text, const char* detail) {
  fprintf(stderr, "fuzz_json: %s\n  input: '%s'\n  %s\n", what, text, detail);
  abort();
}

static void register_node(void) {
  static const PFFieldDesc fields[] = {
      PF_FIELD(Node, id, "int64", 0, NULL),
      PF_FIELD(Node, next, "object", kPFFieldWritable, NULL),
      PF_FIELD(Node, name, "str", kPFFieldWritable, NULL),
  };
  static const PFObjectTypeDesc desc = {PF_OBJECT_TYPE_DESC_ABI, "fuzz.Node", NULL, sizeof(Node),
                                        NULL,                    NULL,        fields,
                                        PF_COUNTOF(fields),      NULL,        0};
  if (PFObjectTypeRegister(&desc, &g_node) != 0) abort();
}

/* ---- taking a graph apart, so that cycles do not leak ---- */
typedef struct {
  PFObjectHandle* v;
  size_t n, cap;
} objects;

static void add(objects* seen, int code, PFValue v) {
  if (code != kPFObjectHandle) return;
  for (size_t i = 0; i < seen->n; ++i)
    if (seen->v[i] == v.v_handle) return;
  if (seen->n == seen->cap) {
    seen->cap = seen->cap ? 2 * seen->cap : 16;
    seen->v = realloc(seen->v, seen->cap * sizeof(PFObjectHandle));
    if (!seen->v) abort();
  }
  PFObjectRetain(v.v_handle);
  seen->v[seen->n++] = v.v_handle;
}

static void add_items(objects* seen, PFObjectHandle array) {
  int64_t n;
  PFArrayGetSize(array, &n);
  for (int64_t i = 0; i < n; ++i) {
    PFValue v;
    int c;
    PFArrayGetItem(array, i, &v, &c);
    add(seen, c, v);
  }
}

/* Every container and instance reachable from (v, code), each with a
 * reference; then the lists, dicts and instances emptied, and all
 * released. */
static void take_apart(PFValue v, int code) {
  objects seen = {0};
  add(&seen, code, v);
  for (size_t i = 0; i < seen.n; ++i) {
    PFObjectHandle h = seen.v[i], snap = NULL;
    uint32_t type;
    PFObjectGetTypeIndex(h, &type);
    if (type == kPFObjectArray) add_items(&seen, h);
    if (type == kPFObjectList && PFListToArray(h, 0, INT64_MAX, &snap) == 0) add_items(&seen, snap);
    if (type == kPFObjectDict && PFDictToArray(h, &snap) == 0) add_items(&seen, snap);
    if (type == kPFObjectMap) {
      int64_t n;
      PFMapGetSize(h, &n);
      for (int64_t k = 0; k < n; ++k) {
        PFValue key, val;
        int kc, vc;
        PFMapGetItemAt(h, k, &key, &kc, &val, &vc);
        add(&seen, vc, val);
      }
    }
    if (type == g_node) {
      PFValue next;
      int c;
      PFObjectGetFieldByName(h, "next", &next, &c);
      add(&seen, c, next);
    }
    PFObjectFree(snap);
  }
  for (size_t i = 0; i < seen.n; ++i) {
    uint32_t type;
    PFObjectGetTypeIndex(seen.v[i], &type);
    if (type == kPFObjectList) PFListClear(seen.v[i]);
    if (type == kPFObjectDict) PFDictClear(seen.v[i]);
    if (type == g_node) PFObjectSetFieldByName(seen.v[i], "next", (PFValue){0}, kPFNull);
  }
  for (size_t i = 0; i < seen.n; ++i) PFObjectFree(seen.v[i]);
  free(seen.v);
  if (code == kPFObjectHandle) PFObjectFree(v.v_handle);
}

/* The document of (v, code), copied; NULL when it is nested too deep. */
static char* write_doc(PFValue v, int code, const char* input) {
  const char* text;
  size_t n;
  if (PFToJSON(v, code, &text, &n) != 0) {
    if (strcmp(PFErrorGetKind(), kPFErrValueError) != 0 ||
        !strstr(PFErrorGetMessage(), "nested deeper than"))
      fail("a value read from a document does not write", input, PFGetLastError());
    return NULL;
  }
  char* copy = malloc(n + 1);
  if (!copy) abort();
  memcpy(copy, text, n + 1);
  return copy;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 8192) return 0;
  if (!g_node) register_node();
  char* input = malloc(size + 1);
  if (!input) return 0;
  memcpy(input, data, size);
  input[size] = '\0';
  PFValue v;
  int code;
  if (PFFromJSON(input, size, &v, &code) != 0) {
    const char* kind = PFErrorGetKind();
    if (strcmp(kind, kPFErrValueError) != 0 && strcmp(kind, kPFErrTypeError) != 0 &&
        strcmp(kind, kPFErrMemoryError) != 0)
      fail("an error of an unexpected kind", input, PFGetLastError());
    if (strncmp(PFErrorGetMessage(), "PFFromJSON: ", 12) != 0)
      fail("an error that does not name PFFromJSON", input, PFErrorGetMessage());
    free(input);
    return 0;
  }
  /* A str or bytes result lives in return storage, which the next write
   * reuses: keep a copy. */
  char* own = NULL;
  PFByteArray bytes;
  if (code == kPFStr || code == kPFBytes) {
    const PFByteArray* b = v.v_handle;
    size_t n = code == kPFStr ? strlen(v.v_str) : b->size;
    own = malloc(n + 1);
    if (!own) abort();
    memcpy(own, code == kPFStr ? v.v_str : b->data, n);
    own[n] = '\0';
    bytes = (PFByteArray){own, n};
    v.v_handle = code == kPFStr ? (void*)own : (void*)&bytes;
  }
  char* once = write_doc(v, code, input);
  if (once) {
    PFValue w;
    int wc;
    if (PFFromJSON(once, strlen(once), &w, &wc) != 0)
      fail("a written document does not read back", once, PFGetLastError());
    int eq = 0;
    if (PFStructuralEqual(v, code, w, wc, &eq) != 0 || !eq)
      fail("a document reads back as another value", once, PFGetLastError());
    char* twice = write_doc(w, wc, once);
    if (!twice || strcmp(once, twice) != 0) fail("the writer is not canonical", once, twice);
    take_apart(w, wc);
    free(twice);
    free(once);
  }
  take_apart(v, code);
  free(own);
  free(input);
  return 0;
}
