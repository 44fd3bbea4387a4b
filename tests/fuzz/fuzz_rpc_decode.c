/* libFuzzer target: the rpc wire decoder, on any bytes a peer could send.
 *
 * The input is one message. It goes through what a server or a client does
 * with a message from the network: the checks before unpacking
 * (pf_rpc_parse, which validates the MessagePack and its header), then the
 * decoding of a call's arguments or a reply's value into packed values,
 * containers, tensors and remote-function stubs. Whatever decodes is
 * packed again, and the packed bytes must decode to the same bytes once
 * more: the codec is a fixed point on its own output. Each failure must be
 * a -1 with an error of kind ValueError, TypeError or MemoryError; every
 * object made is released, so LeakSanitizer sees any leak. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) {                  \
      fprintf(stderr, __VA_ARGS__); \
      fprintf(stderr, "\n");        \
      abort();                      \
    }                               \
  } while (0)

static int stub(PFValue* a, int* c, int n, PFRetValueHandle r, void* res) {
  (void)a, (void)c, (void)n, (void)r, (void)res;
  return 0;
}

/* A received function id becomes a local stub that remembers it. */
static int import_stub(void* ctx, uint64_t id, PFFunctionHandle* out) {
  (void)ctx;
  return PFFuncCreateFromCFunc(stub, (void*)(uintptr_t)id, NULL, out);
}

/* Packing a function sends the id the stub remembers, so that a round
 * trip gives the same bytes. */
static int export_stub(void* ctx, PFFunctionHandle f, uint64_t* id) {
  (void)ctx;
  (void)f;
  *id = 42;
  return 0;
}

static void check_error(const char* where) {
  const char* k = PFErrorGetKind();
  CHECK(
      strcmp(k, "ValueError") == 0 || strcmp(k, "TypeError") == 0 || strcmp(k, "MemoryError") == 0,
      "%s failed with kind '%s': %s", where, k, PFErrorGetMessage());
}

/* A document (PF_RPC_EXT_DOCUMENT) may make Lists and Dicts that hold
 * themselves, which no release frees: empty every List and Dict that a
 * decoded value reaches, each once, so that LeakSanitizer sees only real
 * leaks. The items live on in the snapshot while they are walked. */
typedef struct {
  PFObjectHandle seen[4096];
  int n;
} walk;

static void break_cycles(walk* w, PFValue v, int code) {
  if (code != kPFObjectHandle || v.v_handle == NULL) return;
  for (int i = 0; i < w->n; ++i)
    if (w->seen[i] == v.v_handle) return;
  if (w->n == (int)(sizeof w->seen / sizeof w->seen[0])) return;
  w->seen[w->n++] = v.v_handle;
  uint32_t type = 0;
  PFObjectGetTypeIndex(v.v_handle, &type);
  PFObjectHandle items = NULL;
  if (type == kPFObjectList) {
    PFListToArray(v.v_handle, 0, INT64_MAX, &items);
    PFListClear(v.v_handle);
  } else if (type == kPFObjectDict) {
    PFDictToArray(v.v_handle, &items);
    PFDictClear(v.v_handle);
  } else if (type == kPFObjectArray) {
    items = v.v_handle;
    PFObjectRetain(items);
  }
  int64_t n = 0;
  if (items != NULL) PFArrayGetSize(items, &n);
  for (int64_t i = 0; i < n; ++i) {
    PFValue item;
    int c;
    if (PFArrayGetItem(items, i, &item, &c) == 0) break_cycles(w, item, c);
  }
  PFObjectFree(items);
  if (type == kPFObjectMap && PFMapGetSize(v.v_handle, &n) == 0) {
    for (int64_t i = 0; i < n; ++i) {
      PFValue key, item;
      int kc, c;
      if (PFMapGetItemAt(v.v_handle, i, &key, &kc, &item, &c) == 0) break_cycles(w, item, c);
    }
  }
}

static void free_decoded(pf_rpc_arena* a, PFValue v, int code) {
  static walk w;
  w.n = 0;
  break_cycles(&w, v, code);
  pf_rpc_arena_free(a);
}

/* Decodes one value, packs it, and checks that the packed form is stable. */
static void round_trip(const msgpack_object* o, int as_arg) {
  pf_rpc_arena a = {0};
  PFValue v;
  int code;
  if (pf_rpc_unpack_value(o, &a, 0, as_arg, import_stub, NULL, &v, &code) != 0) {
    check_error("pf_rpc_unpack_value");
    pf_rpc_arena_free(&a);
    return;
  }
  msgpack_sbuffer s1, s2;
  msgpack_sbuffer_init(&s1);
  msgpack_sbuffer_init(&s2);
  msgpack_packer p1, p2;
  pf_rpc_packer_init(&p1, &s1);
  pf_rpc_packer_init(&p2, &s2);
  if (pf_rpc_pack_value(&p1, v, code, "value", export_stub, NULL) != 0) {
    check_error("pf_rpc_pack_value");
  } else {
    CHECK(pf_rpc_validate(s1.data, s1.size) == 0, "own output does not validate: %s",
          PFErrorGetMessage());
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    CHECK(msgpack_unpack_next(&up, s1.data, s1.size, &off) == MSGPACK_UNPACK_SUCCESS,
          "own output does not unpack");
    pf_rpc_arena b = {0};
    PFValue w;
    int wcode;
    CHECK(pf_rpc_unpack_value(&up.data, &b, 0, as_arg, import_stub, NULL, &w, &wcode) == 0,
          "own output does not decode: %s", PFErrorGetMessage());
    CHECK(wcode == code, "type code changed in a round trip: %d -> %d", code, wcode);
    CHECK(pf_rpc_pack_value(&p2, w, wcode, "value", export_stub, NULL) == 0,
          "decoded value does not pack again: %s", PFErrorGetMessage());
    CHECK(s1.size == s2.size && memcmp(s1.data, s2.data, s1.size) == 0,
          "packing is not stable over a round trip");
    free_decoded(&b, w, wcode);
    msgpack_unpacked_destroy(&up);
  }
  msgpack_sbuffer_destroy(&s1);
  msgpack_sbuffer_destroy(&s2);
  free_decoded(&a, v, code);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  pf_rpc_parsed m;
  int st = pf_rpc_parse((const char*)data, size, &m);
  if (st < 0) {
    check_error("pf_rpc_parse");
    return 0;
  }
  if (st == 0 && m.kind == PF_RPC_CALL && m.nrest == 2 && m.rest[1].type == MSGPACK_OBJECT_ARRAY) {
    for (uint32_t i = 0; i < m.rest[1].via.array.size; ++i)
      round_trip(&m.rest[1].via.array.ptr[i], 1);
  } else if (st == 0 && m.kind == PF_RPC_OK && m.nrest == 1) {
    round_trip(&m.rest[0], 0);
  } else {
    for (uint32_t i = 0; i < m.nrest; ++i) round_trip(&m.rest[i], 0);
  }
  pf_rpc_parsed_free(&m);
  PFErrorClear();
  return 0;
}
