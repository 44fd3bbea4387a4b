/* The wire codec: packed values to MessagePack and back, and the checks
 * that a received message passes before anything reads it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "packedfunc/serialize.h"

/* ---- little-endian helpers ---- */
static void put_u16(char* p, uint16_t v) {
  p[0] = (char)(v & 0xff);
  p[1] = (char)(v >> 8);
}
static void put_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = (char)((v >> (8 * i)) & 0xff);
}
static void put_u64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = (char)((v >> (8 * i)) & 0xff);
}
static uint16_t get_u16(const char* p) {
  return (uint16_t)((uint8_t)p[0] | ((uint16_t)(uint8_t)p[1] << 8));
}
static uint32_t get_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | (uint8_t)p[i];
  return v;
}
static uint64_t get_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | (uint8_t)p[i];
  return v;
}

/* ---- packing ---- */

void pf_rpc_packer_init(msgpack_packer* pk, msgpack_sbuffer* sb) {
  msgpack_packer_init(pk, sb, msgpack_sbuffer_write);
}

/* pf_rpc_out_init's packer writes here: its body is an sbuffer too, but
 * the callback tells pack_tensor that side frames may be added. */
static int out_write(void* data, const char* buf, size_t len) {
  return msgpack_sbuffer_write(&((pf_rpc_out*)data)->sb, buf, len);
}

void pf_rpc_out_init(pf_rpc_out* o, msgpack_packer* pk) {
  memset(o, 0, sizeof *o);
  msgpack_sbuffer_init(&o->sb);
  msgpack_packer_init(pk, o, out_write);
}

void pf_rpc_out_destroy(pf_rpc_out* o) {
  for (uint32_t i = 0; i < o->nside; ++i) PFObjectFree(o->side[i].obj);
  free(o->side);
  msgpack_sbuffer_destroy(&o->sb);
  memset(o, 0, sizeof *o);
}

/* The out of a packer made by pf_rpc_out_init, else NULL. */
static pf_rpc_out* out_of(msgpack_packer* pk) {
  return pk->callback == out_write ? pk->data : NULL;
}

/* The body a packer writes into (an sbuffer of this file's making), else
 * NULL. */
static msgpack_sbuffer* body_of(msgpack_packer* pk) {
  pf_rpc_out* o = out_of(pk);
  if (o != NULL) return &o->sb;
  return pk->callback == msgpack_sbuffer_write ? pk->data : NULL; /* this file's copy */
}

/* Puts the `bytes` bytes of tensor object `obj` at `data` into a side
 * frame of `o`, holding a reference to obj. */
static int add_side(pf_rpc_out* o, PFObjectHandle obj, const char* data, size_t bytes,
                    const char* path) {
  if (o->nside == PF_RPC_MAX_SIDE_FRAMES) return 1; /* the rest go in the body */
  if (o->nside == o->cap_side) {
    uint32_t cap = o->cap_side ? o->cap_side * 2 : 4;
    pf_rpc_side* grown = realloc(o->side, cap * sizeof *grown);
    if (grown == NULL)
      return PF_ERROR(kPFErrMemoryError, "%s: out of memory packing a tensor", path);
    o->side = grown;
    o->cap_side = cap;
  }
  PFObjectRetain(obj);
  pf_rpc_side* f = &o->side[o->nside++];
  memset(f, 0, sizeof *f);
  f->data = data;
  f->size = bytes;
  f->obj = obj;
  o->side_bytes += bytes;
  return 0;
}

/* The bytes msgpack_pack_ext writes before an ext body of `len` bytes. */
static size_t ext_header_size(size_t len) {
  if (len == 1 || len == 2 || len == 4 || len == 8 || len == 16) return 2;
  return len < 256 ? 3 : len < 65536 ? 4 : 6;
}

/* Packs tensor `t`, of tensor object `obj` (NULL for a borrowed one). */
static int pack_tensor(msgpack_packer* pk, const DLTensor* t, PFObjectHandle obj, int as_dltensor,
                       const char* path) {
  if (t->device.device_type != kDLCPU)
    return PF_ERROR(kPFErrTypeError,
                    "%s: a tensor on device type %d cannot cross to another process; only CPU "
                    "tensors can",
                    path, (int)t->device.device_type);
  if (t->ndim < 0 || t->ndim > 64)
    return PF_ERROR(kPFErrValueError, "%s: a tensor with ndim %d cannot cross", path, t->ndim);
  if (t->dtype.lanes == 0 || t->dtype.bits == 0 || t->dtype.bits % 8 != 0)
    return PF_ERROR(kPFErrValueError,
                    "%s: a tensor of %u-bit elements in %u lanes cannot cross; only whole bytes",
                    path, (unsigned)t->dtype.bits, (unsigned)t->dtype.lanes);
  uint64_t elem = (uint64_t)(t->dtype.bits / 8) * t->dtype.lanes;
  uint64_t count = 1;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0)
      return PF_ERROR(kPFErrValueError, "%s: tensor shape[%d] is negative (%lld)", path, i,
                      (long long)t->shape[i]);
    if (t->shape[i] != 0 && count > (UINT64_MAX / 2) / (uint64_t)t->shape[i])
      return PF_ERROR(kPFErrValueError, "%s: tensor is too large to cross", path);
    count *= (uint64_t)t->shape[i];
  }
  if (count != 0 && elem > ((uint64_t)1 << 40) / count)
    return PF_ERROR(kPFErrValueError, "%s: tensor is too large to cross", path);
  if (count != 0 && t->data == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: tensor has NULL data", path);
  uint64_t bytes = count * elem;
  size_t head = 1 + 1 + 1 + 2 + 4 + 8 * (size_t)t->ndim;
  char hdr[1 + 1 + 1 + 2 + 4 + 8 * 64 + 8] = {0};
  hdr[0] = (char)(as_dltensor ? PF_RPC_TENSOR_AS_DLTENSOR : 0);
  hdr[1] = (char)t->dtype.code;
  hdr[2] = (char)t->dtype.bits;
  put_u16(hdr + 3, t->dtype.lanes);
  put_u32(hdr + 5, (uint32_t)t->ndim);
  for (int i = 0; i < t->ndim; ++i) put_u64(hdr + 9 + 8 * i, (uint64_t)t->shape[i]);
  if (head + 8 + bytes > UINT32_MAX)
    return PF_ERROR(kPFErrValueError, "%s: tensor of %llu bytes is too large to cross", path,
                    (unsigned long long)bytes);
  const char* base = (const char*)t->data + t->byte_offset;
  int compact = 1;
  if (t->strides != NULL) {
    int64_t expect = 1;
    for (int i = t->ndim - 1; i >= 0; --i) {
      if (t->shape[i] != 1 && t->strides[i] != expect) compact = 0;
      expect *= t->shape[i];
    }
  }
  pf_rpc_out* out = out_of(pk);
  if (out != NULL && obj != NULL && compact && bytes >= PF_RPC_SIDE_FRAME_MIN) {
    int st = add_side(out, obj, base, (size_t)bytes, path);
    if (st < 0) return -1;
    if (st == 0) {
      hdr[0] = (char)(hdr[0] | PF_RPC_TENSOR_FRAME);
      msgpack_pack_ext(pk, head, PF_RPC_EXT_TENSOR);
      msgpack_pack_ext_body(pk, hdr, head);
      return 0;
    }
  }
  msgpack_sbuffer* sb = body_of(pk);
  if (sb != NULL) {
    /* Room for the whole tensor at once, rather than doubling the buffer
     * (and copying what it holds) a dozen times on the way to a megabyte. */
    size_t need = sb->size + 16 + head + 8 + (size_t)bytes;
    if (need > sb->alloc) {
      char* grown = realloc(sb->data, need);
      if (grown == NULL)
        return PF_ERROR(kPFErrMemoryError, "%s: out of memory packing a tensor", path);
      sb->data = grown;
      sb->alloc = need;
    }
    /* The buffer is the message: pad the data to a multiple of 8 from its
     * start (see PF_RPC_TENSOR_PADDED). */
    for (size_t pad = 0; pad < 8; ++pad) {
      size_t len = head + 1 + pad + (size_t)bytes;
      if ((sb->size + ext_header_size(len) + head + 1 + pad) % 8 == 0) {
        hdr[0] = (char)(hdr[0] | PF_RPC_TENSOR_PADDED);
        hdr[head] = (char)pad; /* the zero bytes follow: hdr is zeroed */
        head += 1 + pad;
        break;
      }
    }
  }
  msgpack_pack_ext(pk, head + bytes, PF_RPC_EXT_TENSOR);
  msgpack_pack_ext_body(pk, hdr, head);
  if (bytes == 0) return 0;
  if (compact) { /* one copy */
    msgpack_pack_ext_body(pk, base, (size_t)bytes);
    return 0;
  }
  /* Any strides (negative ones too): walk the elements in row-major order,
   * copying runs of the innermost dimension when it is contiguous. */
  int64_t idx[64] = {0};
  int nd = t->ndim;
  int64_t inner = t->shape[nd - 1];
  int inner_contig = t->strides[nd - 1] == 1;
  for (;;) {
    int64_t off = 0;
    for (int i = 0; i < nd - 1; ++i) off += idx[i] * t->strides[i];
    if (inner_contig) {
      msgpack_pack_ext_body(pk, base + off * (int64_t)elem, (size_t)(inner * (int64_t)elem));
    } else {
      for (int64_t j = 0; j < inner; ++j)
        msgpack_pack_ext_body(pk, base + (off + j * t->strides[nd - 1]) * (int64_t)elem,
                              (size_t)elem);
    }
    int d = nd - 2;
    while (d >= 0 && ++idx[d] == t->shape[d]) idx[d--] = 0;
    if (d < 0) break;
  }
  return 0;
}

/* Packs one value, recursively. Returns 0, -1 with the error recorded, or
 * PF_RPC_HOLDS_INSTANCE when the value holds an instance of a registered
 * type somewhere: then pf_rpc_pack_value sends the whole value as one
 * document instead (what was written of it is dropped). */
#define PF_RPC_HOLDS_INSTANCE 1
static int pack_value(msgpack_packer* pk, PFValue v, int code, const char* path, int depth,
                      pf_rpc_export_fn exp, void* ctx);

/* A List or Dict: a snapshot of it, taken at once (other threads may
 * change it meanwhile), as an array that begins with its marker. */
static int pack_mutable(msgpack_packer* pk, PFObjectHandle obj, uint32_t type, const char* path,
                        int depth, pf_rpc_export_fn exp, void* ctx) {
  if (depth >= PF_RPC_MAX_DEPTH)
    return PF_ERROR(kPFErrValueError, "%s: containers nested deeper than %d levels cannot cross",
                    path, PF_RPC_MAX_DEPTH);
  PFObjectHandle snap = NULL;
  int is_list = type == kPFObjectList;
  if ((is_list ? PFListToArray(obj, 0, INT64_MAX, &snap) : PFDictToArray(obj, &snap)) != 0)
    return -1;
  int64_t n = 0;
  int rc = PFArrayGetSize(snap, &n);
  if (rc == 0 && (uint64_t)n >= UINT32_MAX)
    rc = PF_ERROR(kPFErrValueError, "%s: %s too large to cross", path, is_list ? "list" : "dict");
  if (rc == 0) {
    msgpack_pack_array(pk, (size_t)n + 1);
    msgpack_pack_ext(pk, 0, is_list ? PF_RPC_EXT_LIST : PF_RPC_EXT_DICT);
  }
  char sub[192];
  for (int64_t i = 0; rc == 0 && i < n; ++i) {
    PFValue v;
    int c;
    rc = PFArrayGetItem(snap, i, &v, &c);
    if (rc != 0) break;
    if (is_list) snprintf(sub, sizeof sub, "%s item %lld", path, (long long)i);
    else snprintf(sub, sizeof sub, "%s %s %lld", path, i % 2 ? "value" : "key", (long long)(i / 2));
    rc = pack_value(pk, v, c, sub, depth + 1, exp, ctx);
  }
  PFObjectFree(snap);
  return rc;
}

static int pack_object(msgpack_packer* pk, PFObjectHandle obj, const char* path, int depth,
                       pf_rpc_export_fn exp, void* ctx) {
  uint32_t type = 0;
  if (PFObjectGetTypeIndex(obj, &type) != 0) return -1;
  char sub[192];
  switch (type) {
    case kPFObjectFunction: {
      uint64_t id = 0;
      if (exp == NULL) return PF_ERROR(kPFErrTypeError, "%s: a function cannot cross here", path);
      if (exp(ctx, obj, &id) != 0) return -1;
      char b[8];
      put_u64(b, id);
      msgpack_pack_ext(pk, 8, PF_RPC_EXT_FUNC);
      msgpack_pack_ext_body(pk, b, 8);
      return 0;
    }
    case kPFObjectTensor: {
      DLTensor* t = NULL;
      if (PFTensorGetDLTensor(obj, &t) != 0) return -1;
      return pack_tensor(pk, t, obj, 0, path);
    }
    case kPFObjectShape: {
      const int64_t* dims = NULL;
      int64_t nd = 0;
      if (PFShapeGetData(obj, &dims, &nd) != 0) return -1;
      if ((uint64_t)nd > UINT32_MAX / 8)
        return PF_ERROR(kPFErrValueError, "%s: shape too long to cross", path);
      msgpack_pack_ext(pk, (size_t)nd * 8, PF_RPC_EXT_SHAPE);
      for (int64_t i = 0; i < nd; ++i) {
        char b[8];
        put_u64(b, (uint64_t)dims[i]);
        msgpack_pack_ext_body(pk, b, 8);
      }
      return 0;
    }
    case kPFObjectArray: {
      int64_t n = 0;
      if (PFArrayGetSize(obj, &n) != 0) return -1;
      if (depth >= PF_RPC_MAX_DEPTH)
        return PF_ERROR(kPFErrValueError,
                        "%s: containers nested deeper than %d levels cannot cross", path,
                        PF_RPC_MAX_DEPTH);
      if ((uint64_t)n > UINT32_MAX)
        return PF_ERROR(kPFErrValueError, "%s: array too long to cross", path);
      msgpack_pack_array(pk, (size_t)n);
      for (int64_t i = 0; i < n; ++i) {
        PFValue v;
        int c;
        if (PFArrayGetItem(obj, i, &v, &c) != 0) return -1;
        snprintf(sub, sizeof sub, "%s item %lld", path, (long long)i);
        int st = pack_value(pk, v, c, sub, depth + 1, exp, ctx);
        if (st != 0) return st;
      }
      return 0;
    }
    case kPFObjectMap: {
      int64_t n = 0;
      if (PFMapGetSize(obj, &n) != 0) return -1;
      if (depth >= PF_RPC_MAX_DEPTH)
        return PF_ERROR(kPFErrValueError,
                        "%s: containers nested deeper than %d levels cannot cross", path,
                        PF_RPC_MAX_DEPTH);
      if ((uint64_t)n > UINT32_MAX)
        return PF_ERROR(kPFErrValueError, "%s: map too large to cross", path);
      msgpack_pack_map(pk, (size_t)n);
      for (int64_t i = 0; i < n; ++i) {
        PFValue k, v;
        int kc, vc;
        if (PFMapGetItemAt(obj, i, &k, &kc, &v, &vc) != 0) return -1;
        if (kc == kPFStr) {
          size_t len = strlen(k.v_str);
          msgpack_pack_str(pk, len);
          msgpack_pack_str_body(pk, k.v_str, len);
          snprintf(sub, sizeof sub, "%s value '%.60s'", path, k.v_str);
        } else {
          msgpack_pack_int64(pk, k.v_int64);
          snprintf(sub, sizeof sub, "%s value %lld", path, (long long)k.v_int64);
        }
        int st = pack_value(pk, v, vc, sub, depth + 1, exp, ctx);
        if (st != 0) return st;
      }
      return 0;
    }
    case kPFObjectList:
    case kPFObjectDict:
      return pack_mutable(pk, obj, type, path, depth, exp, ctx);
    default: {
      if (type >= kPFObjectTypeRegisteredBegin) return PF_RPC_HOLDS_INSTANCE;
      const char* tn = PFObjectTypeName(type);
      return PF_ERROR(kPFErrTypeError, "%s: a %s object cannot cross to another process", path,
                      tn ? tn : "unknown");
    }
  }
}

static int pack_value(msgpack_packer* pk, PFValue v, int code, const char* path, int depth,
                      pf_rpc_export_fn exp, void* ctx) {
  switch (code) {
    case kPFInt:
      return msgpack_pack_int64(pk, v.v_int64), 0;
    case kPFFloat:
      return msgpack_pack_double(pk, v.v_float64), 0;
    case kPFBool:
      return (v.v_int64 ? msgpack_pack_true(pk) : msgpack_pack_false(pk)), 0;
    case kPFNull:
      return msgpack_pack_nil(pk), 0;
    case kPFDataType: {
      char b[4];
      b[0] = (char)v.v_type.code;
      b[1] = (char)v.v_type.bits;
      put_u16(b + 2, v.v_type.lanes);
      msgpack_pack_ext(pk, 4, PF_RPC_EXT_DTYPE);
      msgpack_pack_ext_body(pk, b, 4);
      return 0;
    }
    case kPFDevice: {
      char b[8];
      put_u32(b, (uint32_t)v.v_device.device_type);
      put_u32(b + 4, (uint32_t)v.v_device.device_id);
      msgpack_pack_ext(pk, 8, PF_RPC_EXT_DEVICE);
      msgpack_pack_ext_body(pk, b, 8);
      return 0;
    }
    case kPFStr: {
      if (v.v_str == NULL) return PF_ERROR(kPFErrTypeError, "%s: NULL string", path);
      size_t len = strlen(v.v_str);
      if (len > UINT32_MAX) return PF_ERROR(kPFErrValueError, "%s: string too long", path);
      msgpack_pack_str(pk, len);
      msgpack_pack_str_body(pk, v.v_str, len);
      return 0;
    }
    case kPFBytes: {
      const PFByteArray* b = v.v_handle;
      if (b == NULL || (b->data == NULL && b->size != 0))
        return PF_ERROR(kPFErrTypeError, "%s: NULL byte array", path);
      if (b->size > UINT32_MAX) return PF_ERROR(kPFErrValueError, "%s: bytes too long", path);
      msgpack_pack_bin(pk, b->size);
      msgpack_pack_bin_body(pk, b->data, b->size);
      return 0;
    }
    case kPFDLTensorHandle:
      if (v.v_handle == NULL) return PF_ERROR(kPFErrTypeError, "%s: NULL tensor", path);
      return pack_tensor(pk, v.v_handle, NULL, 1, path);
    case kPFFuncHandle:
    case kPFObjectHandle:
      if (v.v_handle == NULL) return PF_ERROR(kPFErrTypeError, "%s: NULL handle", path);
      return pack_object(pk, v.v_handle, path, depth, exp, ctx);
    case kPFOpaqueHandle:
      return PF_ERROR(kPFErrTypeError,
                      "%s: an opaque handle (a borrowed pointer) cannot cross to another "
                      "process",
                      path);
    case kPFModuleHandle:
      return PF_ERROR(kPFErrTypeError, "%s: a module cannot cross to another process", path);
    default:
      return PF_ERROR(kPFErrTypeError, "%s: type code %d cannot cross to another process", path,
                      code);
  }
}

/* A value that holds instances of registered types crosses as one
 * document of serialize.h, which carries each instance's type key and
 * fields and keeps what the value shares, cycles included. */
static int pack_document(msgpack_packer* pk, PFValue v, int code, const char* path) {
  const char* text = NULL;
  size_t len = 0;
  if (PFToJSON(v, code, &text, &len) != 0)
    return PF_ERROR(PFErrorGetKind(), "%s: %s", path, PFErrorGetMessage());
  if (len > UINT32_MAX)
    return PF_ERROR(kPFErrValueError, "%s: a document of %zu bytes is too large to cross", path,
                    len);
  msgpack_pack_ext(pk, len, PF_RPC_EXT_DOCUMENT);
  msgpack_pack_ext_body(pk, text, len);
  return 0;
}

int pf_rpc_pack_value(msgpack_packer* pk, PFValue v, int code, const char* path,
                      pf_rpc_export_fn exp, void* ctx) {
  msgpack_sbuffer* sb = body_of(pk);
  pf_rpc_out* o = out_of(pk);
  size_t body = sb != NULL ? sb->size : 0, side_bytes = o != NULL ? o->side_bytes : 0;
  uint32_t nside = o != NULL ? o->nside : 0;
  int rc = pack_value(pk, v, code, path, 0, exp, ctx);
  if (rc != PF_RPC_HOLDS_INSTANCE) return rc;
  if (sb == NULL) return PF_ERROR(kPFErrRuntimeError, "%s: rpc: a packer of unknown kind", path);
  /* Start again: what was written of the value goes, with the references
   * its side frames took. */
  sb->size = body;
  for (; o != NULL && o->nside > nside; --o->nside) PFObjectFree(o->side[o->nside - 1].obj);
  if (o != NULL) o->side_bytes = side_bytes;
  return pack_document(pk, v, code, path);
}

void pf_rpc_pack_header(msgpack_packer* pk, int kind, uint64_t id, uint64_t parent,
                        uint32_t nrest) {
  msgpack_pack_array(pk, 4 + nrest);
  msgpack_pack_int(pk, PF_RPC_PROTOCOL_VERSION);
  msgpack_pack_int(pk, kind);
  msgpack_pack_uint64(pk, id);
  msgpack_pack_uint64(pk, parent);
}

static void pack_cstr(msgpack_packer* pk, const char* s) {
  size_t n = s ? strlen(s) : 0;
  msgpack_pack_str(pk, n);
  msgpack_pack_str_body(pk, s ? s : "", n);
}

void pf_rpc_pack_error(msgpack_sbuffer* sb, uint64_t id, const char* kind, const char* msg,
                       const char* traceback) {
  msgpack_packer pk;
  pf_rpc_packer_init(&pk, sb);
  pf_rpc_pack_header(&pk, PF_RPC_ERROR, id, 0, 3);
  pack_cstr(&pk, kind);
  pack_cstr(&pk, msg);
  pack_cstr(&pk, traceback);
}

/* ---- the arena ---- */

static int arena_block(pf_rpc_arena* a, void* p) {
  if (a->nblocks == a->cap_blocks) {
    size_t cap = a->cap_blocks ? a->cap_blocks * 2 : 8;
    void** b = realloc(a->blocks, cap * sizeof *b);
    if (b == NULL) return -1;
    a->blocks = b;
    a->cap_blocks = cap;
  }
  a->blocks[a->nblocks++] = p;
  return 0;
}

static int arena_obj(pf_rpc_arena* a, PFObjectHandle o) {
  if (a->nobjs == a->cap_objs) {
    size_t cap = a->cap_objs ? a->cap_objs * 2 : 8;
    PFObjectHandle* b = realloc(a->objs, cap * sizeof *b);
    if (b == NULL) return -1;
    a->objs = b;
    a->cap_objs = cap;
  }
  a->objs[a->nobjs++] = o;
  return 0;
}

void pf_rpc_arena_free(pf_rpc_arena* a) {
  for (size_t i = 0; i < a->nobjs; ++i) PFObjectFree(a->objs[i]);
  for (size_t i = 0; i < a->nblocks; ++i) free(a->blocks[i]);
  free(a->objs);
  free(a->blocks);
  memset(a, 0, sizeof *a);
}

/* Keeps an object in the arena; on failure releases it. */
static int keep_obj(pf_rpc_arena* a, PFObjectHandle o) {
  if (arena_obj(a, o) != 0) {
    PFObjectFree(o);
    return PF_ERROR(kPFErrMemoryError, "rpc: out of memory decoding a message");
  }
  return 0;
}

/* ---- unpacking ---- */

typedef struct {
  DLManagedTensor m;
  pf_rpc_msg* src; /* the message that holds the data; NULL: data is malloc'd */
  int64_t shape[];
} owned_tensor;

static void owned_tensor_delete(DLManagedTensor* m) {
  owned_tensor* t = (owned_tensor*)m;
  if (t->src != NULL) pf_rpc_msg_free(t->src);
  else free(m->dl_tensor.data);
  free(t);
}

/* Tensors at least this large keep their data in the message they came
 * in, when it is aligned there for its elements; smaller ones are copied,
 * which costs less than keeping a whole message alive for them. */
#define PF_RPC_IN_PLACE_MIN (64 * 1024)

/* Whether `data`, in message `src`, can be a tensor's data as it is: the
 * tensor is large and the address a multiple of its elements' alignment
 * (their lane size, when a power of two, up to 16 bytes). */
static int in_place(const pf_rpc_msg* src, const char* data, size_t nbytes, DLDataType dt) {
  unsigned lane = dt.bits / 8u, align = 1;
  while (align < 16 && lane % (align * 2) == 0) align *= 2;
  return src != NULL && nbytes >= PF_RPC_IN_PLACE_MIN && (uintptr_t)data % align == 0;
}

/* A tensor whose data is in the next side frame of the message (see
 * PF_RPC_TENSOR_FRAME): its ext ends after the shape (`rest`, the bytes
 * after it, is 0), and the frame holds exactly count * elem bytes, which
 * *p, *n and *head then describe in place of the ext's. */
static int take_side(pf_rpc_arena* a, size_t rest, uint64_t count, uint64_t elem, const char** p,
                     size_t* n, size_t* head) {
  if (rest != 0)
    return PF_ERROR(kPFErrValueError, "rpc: malformed tensor: %zu bytes after its shape", rest);
  uint32_t k = a->next_side;
  if (a->src == NULL || k >= a->src->nside)
    return PF_ERROR(kPFErrValueError,
                    "rpc: malformed message: a tensor's side frame is missing (the message has "
                    "%u side frames)",
                    a->src ? a->src->nside : 0);
  const pf_rpc_side* f = &a->src->side[k];
  if (count != 0 && elem > UINT64_MAX / count)
    return PF_ERROR(kPFErrValueError, "rpc: malformed tensor shape");
  if (f->size != count * elem)
    return PF_ERROR(kPFErrValueError,
                    "rpc: malformed message: side frame %u holds %zu bytes for a tensor of %llu",
                    k + 1, f->size, (unsigned long long)(count * elem));
  a->next_side = k + 1;
  *p = f->data;
  *n = f->size;
  *head = 0;
  return 0;
}

int pf_rpc_arena_check_sides(const pf_rpc_arena* a) {
  uint32_t have = a->src ? a->src->nside : 0;
  if (a->next_side == have) return 0;
  return PF_ERROR(kPFErrValueError,
                  "rpc: malformed message: %u side frames, of which its tensors take %u", have,
                  a->next_side);
}

static int unpack_tensor(const char* p, size_t n, pf_rpc_arena* a, int as_arg, PFValue* v,
                         int* code) {
  if (n < 9) return PF_ERROR(kPFErrValueError, "rpc: malformed tensor (%zu bytes)", n);
  unsigned flags = (uint8_t)p[0];
  DLDataType dt = {(uint8_t)p[1], (uint8_t)p[2], get_u16(p + 3)};
  uint32_t ndim = get_u32(p + 5);
  if (ndim > 64 || n < 9 + 8 * (size_t)ndim)
    return PF_ERROR(kPFErrValueError, "rpc: malformed tensor (ndim %u)", ndim);
  if (dt.bits == 0 || dt.bits % 8 != 0 || dt.lanes == 0)
    return PF_ERROR(kPFErrValueError, "rpc: malformed tensor dtype");
  if ((flags & ~(PF_RPC_TENSOR_AS_DLTENSOR | PF_RPC_TENSOR_PADDED | PF_RPC_TENSOR_FRAME)) ||
      ((flags & PF_RPC_TENSOR_PADDED) && (flags & PF_RPC_TENSOR_FRAME)))
    return PF_ERROR(kPFErrValueError, "rpc: malformed tensor flags 0x%x", flags);
  uint64_t count = 1, elem = (uint64_t)(dt.bits / 8) * dt.lanes;
  owned_tensor* t = calloc(1, sizeof *t + 8 * (size_t)(ndim ? ndim : 1));
  if (t == NULL) return PF_ERROR(kPFErrMemoryError, "rpc: out of memory decoding a tensor");
  for (uint32_t i = 0; i < ndim; ++i) {
    uint64_t d = get_u64(p + 9 + 8 * i);
    if (d > ((uint64_t)1 << 40) || (d != 0 && count > ((uint64_t)1 << 40) / d)) {
      free(t);
      return PF_ERROR(kPFErrValueError, "rpc: malformed tensor shape");
    }
    count *= d;
    t->shape[i] = (int64_t)d;
  }
  size_t head = 9 + 8 * (size_t)ndim;
  if (flags & PF_RPC_TENSOR_PADDED) {
    unsigned pad = n > head ? (uint8_t)p[head] : 8u;
    int zeros = pad < 8 && n - head > pad;
    for (unsigned i = 0; zeros && i < pad; ++i) zeros = p[head + 1 + i] == 0;
    if (!zeros) {
      free(t);
      return PF_ERROR(kPFErrValueError, "rpc: malformed tensor padding");
    }
    head += 1 + pad;
  }
  if (flags & PF_RPC_TENSOR_FRAME) {
    if (take_side(a, n - head, count, elem, &p, &n, &head) != 0) {
      free(t);
      return -1;
    }
  }
  if (count != 0 && elem > (n - head) / count) {
    free(t);
    return PF_ERROR(kPFErrValueError, "rpc: malformed tensor: data shorter than its shape");
  }
  if (count * elem != n - head) {
    free(t);
    return PF_ERROR(kPFErrValueError, "rpc: malformed tensor: data longer than its shape");
  }
  size_t nbytes = (size_t)(count * elem);
  void* data;
  if (in_place(a->src, p + head, nbytes, dt)) {
    /* The message's bytes are writable memory of its own (a received
     * ZeroMQ message's, or a malloc'd copy): the tensor takes them over
     * with a reference to the message. */
    pf_rpc_msg_retain(a->src);
    t->src = a->src;
    data = (void*)(uintptr_t)(p + head);
  } else {
    data = malloc(nbytes != 0 ? nbytes : 1);
    if (data == NULL) {
      free(t);
      return PF_ERROR(kPFErrMemoryError, "rpc: out of memory decoding a tensor");
    }
    if (nbytes != 0) memcpy(data, p + head, nbytes);
  }
  t->m.dl_tensor.data = data;
  t->m.dl_tensor.device.device_type = kDLCPU;
  t->m.dl_tensor.device.device_id = 0;
  t->m.dl_tensor.ndim = (int32_t)ndim;
  t->m.dl_tensor.dtype = dt;
  t->m.dl_tensor.shape = t->shape;
  t->m.dl_tensor.strides = NULL;
  t->m.dl_tensor.byte_offset = 0;
  t->m.deleter = owned_tensor_delete;
  PFObjectHandle obj = NULL;
  if (PFTensorCreateFromDLPack(&t->m, &obj) != 0) return -1;
  if (keep_obj(a, obj) != 0) return -1;
  if (as_arg && (flags & PF_RPC_TENSOR_AS_DLTENSOR)) {
    v->v_handle = &t->m.dl_tensor;
    *code = kPFDLTensorHandle;
  } else {
    v->v_handle = obj;
    *code = kPFObjectHandle;
  }
  return 0;
}

char* pf_rpc_strdup_obj(const msgpack_object* o) {
  if (o->type != MSGPACK_OBJECT_STR) return NULL;
  char* s = malloc(o->via.str.size + 1);
  if (s == NULL) return NULL;
  /* An empty str may come with a NULL pointer. */
  if (o->via.str.size != 0) memcpy(s, o->via.str.ptr, o->via.str.size);
  s[o->via.str.size] = '\0';
  return s;
}

/* A str as a NUL-terminated string in the arena; an embedded NUL is refused
 * (a kPFStr cannot hold one). */
static int arena_str(const msgpack_object* o, pf_rpc_arena* a, const char** out) {
  if (o->via.str.size != 0 && memchr(o->via.str.ptr, '\0', o->via.str.size) != NULL)
    return PF_ERROR(kPFErrValueError, "rpc: a string with an embedded NUL byte");
  char* s = pf_rpc_strdup_obj(o);
  if (s == NULL || arena_block(a, s) != 0) {
    free(s);
    return PF_ERROR(kPFErrMemoryError, "rpc: out of memory decoding a message");
  }
  *out = s;
  return 0;
}

/* Bytes as a PFByteArray in the arena (one block, its data after it,
 * NUL-terminated), into v->v_handle. */
static int arena_bytes(pf_rpc_arena* a, const char* data, size_t size, PFValue* v) {
  PFByteArray* b = malloc(sizeof *b + size + 1);
  if (b == NULL || arena_block(a, b) != 0) {
    free(b);
    return PF_ERROR(kPFErrMemoryError, "rpc: out of memory decoding bytes");
  }
  char* d = (char*)(b + 1);
  if (size) memcpy(d, data, size);
  d[size] = '\0';
  b->data = d;
  b->size = size;
  v->v_handle = b;
  return 0;
}

/* PF_RPC_EXT_LIST or PF_RPC_EXT_DICT when `o` is that marker, else 0. */
static int marker_of(const msgpack_object* o) {
  if (o->type != MSGPACK_OBJECT_EXT || o->via.ext.size != 0) return 0;
  int t = o->via.ext.type;
  return t == PF_RPC_EXT_LIST || t == PF_RPC_EXT_DICT ? t : 0;
}

/* An array that begins with a List or Dict marker; depth is checked. */
static int unpack_mutable(const msgpack_object* o, int marker, pf_rpc_arena* a, int depth,
                          pf_rpc_import_fn imp, void* ctx, PFValue* v, int* code) {
  uint32_t n = o->via.array.size - 1;
  const msgpack_object* items = o->via.array.ptr + 1;
  if (marker == PF_RPC_EXT_DICT && n % 2 != 0)
    return PF_ERROR(kPFErrValueError, "rpc: a dict with a key and no value");
  PFValue* vals = calloc(n ? n : 1, sizeof *vals);
  int* codes = calloc(n ? n : 1, sizeof *codes);
  int rc = -1;
  if (vals == NULL || codes == NULL) {
    PF_ERROR(kPFErrMemoryError, "rpc: out of memory decoding a %s",
             marker == PF_RPC_EXT_LIST ? "list" : "dict");
    goto done;
  }
  for (uint32_t i = 0; i < n; ++i)
    if (pf_rpc_unpack_value(&items[i], a, depth + 1, 0, imp, ctx, &vals[i], &codes[i]) != 0)
      goto done;
  PFObjectHandle obj = NULL;
  if (marker == PF_RPC_EXT_LIST) {
    if (PFListCreate(vals, codes, n, &obj) != 0) goto done;
  } else {
    /* Keys and values alternate: each half as its own strided view. */
    PFValue* keys = calloc(n / 2 ? n / 2 : 1, sizeof *keys);
    PFValue* dv = calloc(n / 2 ? n / 2 : 1, sizeof *dv);
    int* kc = calloc(n / 2 ? n / 2 : 1, sizeof *kc);
    int* dc = calloc(n / 2 ? n / 2 : 1, sizeof *dc);
    int st = -1;
    if (keys == NULL || dv == NULL || kc == NULL || dc == NULL) {
      PF_ERROR(kPFErrMemoryError, "rpc: out of memory decoding a dict");
    } else {
      for (uint32_t i = 0; i < n / 2; ++i) {
        keys[i] = vals[2 * i];
        kc[i] = codes[2 * i];
        dv[i] = vals[2 * i + 1];
        dc[i] = codes[2 * i + 1];
      }
      st = PFDictCreate(keys, kc, dv, dc, n / 2, &obj);
    }
    free(keys);
    free(dv);
    free(kc);
    free(dc);
    if (st != 0) goto done;
  }
  if (keep_obj(a, obj) != 0) goto done;
  v->v_handle = obj;
  *code = kPFObjectHandle;
  rc = 0;
done:
  free(vals);
  free(codes);
  return rc;
}

/* A value sent as a document (PF_RPC_EXT_DOCUMENT), rebuilt: what
 * PFFromJSON makes belongs to the arena, a str or bytes as a copy of its
 * own (PFFromJSON's is in return storage, which the next call reuses). */
static int unpack_document(const char* p, size_t n, pf_rpc_arena* a, PFValue* v, int* code) {
  if (PFFromJSONEx(p, n, kPFJSONRefuseCycles, v, code) != 0)
    return PF_ERROR(PFErrorGetKind(), "rpc: a value sent by value cannot be rebuilt: %s",
                    PFErrorGetMessage());
  if (*code == kPFObjectHandle || *code == kPFFuncHandle || *code == kPFModuleHandle)
    return keep_obj(a, v->v_handle);
  if (*code == kPFStr) {
    msgpack_object str = {.type = MSGPACK_OBJECT_STR};
    str.via.str.ptr = v->v_str;
    str.via.str.size = (uint32_t)strlen(v->v_str);
    return arena_str(&str, a, &v->v_str);
  }
  if (*code == kPFBytes) {
    const PFByteArray* src = v->v_handle;
    return arena_bytes(a, src->data, src->size, v);
  }
  return 0;
}

int pf_rpc_unpack_value(const msgpack_object* o, pf_rpc_arena* a, int depth, int as_arg,
                        pf_rpc_import_fn imp, void* ctx, PFValue* v, int* code) {
  v->v_int64 = 0;
  switch (o->type) {
    case MSGPACK_OBJECT_NIL:
      *code = kPFNull;
      return 0;
    case MSGPACK_OBJECT_BOOLEAN:
      v->v_int64 = o->via.boolean ? 1 : 0;
      *code = kPFBool;
      return 0;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
      if (o->via.u64 > (uint64_t)INT64_MAX)
        return PF_ERROR(kPFErrValueError, "rpc: integer %llu is out of the int64 range",
                        (unsigned long long)o->via.u64);
      v->v_int64 = (int64_t)o->via.u64;
      *code = kPFInt;
      return 0;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
      v->v_int64 = o->via.i64;
      *code = kPFInt;
      return 0;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
      v->v_float64 = o->via.f64;
      *code = kPFFloat;
      return 0;
    case MSGPACK_OBJECT_STR:
      *code = kPFStr;
      return arena_str(o, a, &v->v_str);
    case MSGPACK_OBJECT_BIN:
      *code = kPFBytes;
      return arena_bytes(a, o->via.bin.ptr, o->via.bin.size, v);
    case MSGPACK_OBJECT_ARRAY: {
      if (depth >= PF_RPC_MAX_DEPTH)
        return PF_ERROR(kPFErrValueError, "rpc: containers nested deeper than %d levels",
                        PF_RPC_MAX_DEPTH);
      uint32_t n = o->via.array.size;
      int marker = n > 0 ? marker_of(&o->via.array.ptr[0]) : 0;
      if (marker != 0) return unpack_mutable(o, marker, a, depth, imp, ctx, v, code);
      PFValue* vals = calloc(n ? n : 1, sizeof *vals);
      int* codes = calloc(n ? n : 1, sizeof *codes);
      int rc = -1;
      if (vals == NULL || codes == NULL) {
        PF_ERROR(kPFErrMemoryError, "rpc: out of memory decoding an array");
        goto array_done;
      }
      for (uint32_t i = 0; i < n; ++i)
        if (pf_rpc_unpack_value(&o->via.array.ptr[i], a, depth + 1, 0, imp, ctx, &vals[i],
                                &codes[i]) != 0)
          goto array_done;
      PFObjectHandle arr = NULL;
      if (PFArrayCreate(vals, codes, n, &arr) != 0 || keep_obj(a, arr) != 0) goto array_done;
      v->v_handle = arr;
      *code = kPFObjectHandle;
      rc = 0;
    array_done:
      free(vals);
      free(codes);
      return rc;
    }
    case MSGPACK_OBJECT_MAP: {
      if (depth >= PF_RPC_MAX_DEPTH)
        return PF_ERROR(kPFErrValueError, "rpc: containers nested deeper than %d levels",
                        PF_RPC_MAX_DEPTH);
      uint32_t n = o->via.map.size;
      PFValue* keys = calloc(n ? n : 1, sizeof *keys);
      PFValue* vals = calloc(n ? n : 1, sizeof *vals);
      int* kc = calloc(n ? n : 1, sizeof *kc);
      int* vc = calloc(n ? n : 1, sizeof *vc);
      int rc = -1;
      if (keys == NULL || vals == NULL || kc == NULL || vc == NULL) {
        PF_ERROR(kPFErrMemoryError, "rpc: out of memory decoding a map");
        goto map_done;
      }
      for (uint32_t i = 0; i < n; ++i) {
        const msgpack_object* k = &o->via.map.ptr[i].key;
        if (k->type != MSGPACK_OBJECT_STR && k->type != MSGPACK_OBJECT_POSITIVE_INTEGER &&
            k->type != MSGPACK_OBJECT_NEGATIVE_INTEGER) {
          PF_ERROR(kPFErrValueError, "rpc: a map key that is neither a str nor an int");
          goto map_done;
        }
        if (pf_rpc_unpack_value(k, a, depth + 1, 0, imp, ctx, &keys[i], &kc[i]) != 0 ||
            pf_rpc_unpack_value(&o->via.map.ptr[i].val, a, depth + 1, 0, imp, ctx, &vals[i],
                                &vc[i]) != 0)
          goto map_done;
      }
      PFObjectHandle map = NULL;
      if (PFMapCreate(keys, kc, vals, vc, n, &map) != 0 || keep_obj(a, map) != 0) goto map_done;
      v->v_handle = map;
      *code = kPFObjectHandle;
      rc = 0;
    map_done:
      free(keys);
      free(vals);
      free(kc);
      free(vc);
      return rc;
    }
    case MSGPACK_OBJECT_EXT: {
      const char* p = o->via.ext.ptr;
      size_t n = o->via.ext.size;
      switch (o->via.ext.type) {
        case PF_RPC_EXT_DTYPE:
          if (n != 4) break;
          v->v_type.code = (uint8_t)p[0];
          v->v_type.bits = (uint8_t)p[1];
          v->v_type.lanes = get_u16(p + 2);
          *code = kPFDataType;
          return 0;
        case PF_RPC_EXT_DEVICE:
          if (n != 8) break;
          v->v_device.device_type = (DLDeviceType)(int32_t)get_u32(p);
          v->v_device.device_id = (int32_t)get_u32(p + 4);
          *code = kPFDevice;
          return 0;
        case PF_RPC_EXT_TENSOR:
          return unpack_tensor(p, n, a, as_arg, v, code);
        case PF_RPC_EXT_SHAPE: {
          if (n % 8 != 0) break;
          size_t nd = n / 8;
          int64_t* dims = malloc(nd ? nd * 8 : 1);
          if (dims == NULL) return PF_ERROR(kPFErrMemoryError, "rpc: out of memory");
          for (size_t i = 0; i < nd; ++i) dims[i] = (int64_t)get_u64(p + 8 * i);
          PFObjectHandle s = NULL;
          int rc = PFShapeCreate(dims, (int64_t)nd, &s);
          free(dims);
          if (rc != 0 || keep_obj(a, s) != 0) return -1;
          v->v_handle = s;
          *code = kPFObjectHandle;
          return 0;
        }
        case PF_RPC_EXT_LIST:
        case PF_RPC_EXT_DICT:
          return PF_ERROR(kPFErrValueError,
                          "rpc: a list or dict marker that does not begin an array");
        case PF_RPC_EXT_DOCUMENT:
          return unpack_document(p, n, a, v, code);
        case PF_RPC_EXT_FUNC: {
          if (n != 8) break;
          if (imp == NULL) return PF_ERROR(kPFErrValueError, "rpc: a function cannot come here");
          PFFunctionHandle f = NULL;
          if (imp(ctx, get_u64(p), &f) != 0 || keep_obj(a, f) != 0) return -1;
          v->v_handle = f;
          *code = kPFFuncHandle;
          return 0;
        }
        default:
          return PF_ERROR(kPFErrValueError, "rpc: unknown value type %d on the wire",
                          (int)o->via.ext.type);
      }
      return PF_ERROR(kPFErrValueError, "rpc: malformed value of type %d (%zu bytes)",
                      (int)o->via.ext.type, n);
    }
    default:
      return PF_ERROR(kPFErrValueError, "rpc: unexpected MessagePack type %d", (int)o->type);
  }
}

/* ---- validation ---- */

/* What decoding costs, in bytes, as pf_rpc_validate estimates it: each
 * item is a msgpack_object, each container a packedfunc object with a
 * value per item (and the arrays that build it), each str, bin and ext a
 * copy with its allocation. */
#define PF_RPC_COST_ITEM 24
#define PF_RPC_COST_CONTAINER 128
#define PF_RPC_COST_PER_ITEM 32
#define PF_RPC_COST_BLOCK 32

/* What rebuilding a document (PF_RPC_EXT_DOCUMENT) costs, as estimated
 * from its text: a value begins at each '[', '{', ',' and ':' (an item),
 * and each '[' and '{' opens a container as well (a string's such bytes
 * count too: an estimate errs high). */
static uint64_t document_cost(const char* p, size_t n) {
  uint64_t cost = 0;
  for (size_t i = 0; i < n; ++i) {
    if (p[i] == '[' || p[i] == '{') cost += PF_RPC_COST_CONTAINER;
    if (p[i] == '[' || p[i] == '{' || p[i] == ',' || p[i] == ':')
      cost += PF_RPC_COST_ITEM + PF_RPC_COST_PER_ITEM;
  }
  return cost;
}

int pf_rpc_validate(const char* p, size_t n) {
  /* pending[d]: items still to read at depth d. */
  uint64_t pending[PF_RPC_MAX_DEPTH + 8];
  int depth = 0;
  pending[0] = 1;
  size_t i = 0;
  uint64_t cost = 0;
  while (depth >= 0) {
    if (pending[depth] == 0) {
      --depth;
      continue;
    }
    pending[depth]--;
    if (i >= n) return PF_ERROR(kPFErrValueError, "rpc: truncated message");
    uint8_t t = (uint8_t)p[i++];
    cost += PF_RPC_COST_ITEM;
    uint64_t skip = 0, items = 0;
    int container = 0;
    size_t need = 0;
    if (t <= 0x7f || t >= 0xe0 || t == 0xc0 || t == 0xc2 || t == 0xc3) {
    } else if (t >= 0x80 && t <= 0x8f) {
      items = 2u * (t & 0x0f), container = 1;
    } else if (t >= 0x90 && t <= 0x9f) {
      items = t & 0x0f, container = 1;
    } else if (t >= 0xa0 && t <= 0xbf) {
      skip = t & 0x1f;
    } else {
      switch (t) {
        case 0xc4:
        case 0xd9:
          need = 1;
          break;
        case 0xc5:
        case 0xda:
          need = 2;
          break;
        case 0xc6:
        case 0xdb:
          need = 4;
          break;
        case 0xc7:
          need = 1;
          break;
        case 0xc8:
          need = 2;
          break;
        case 0xc9:
          need = 4;
          break;
        case 0xca:
          skip = 4;
          break;
        case 0xcb:
          skip = 8;
          break;
        case 0xcc:
        case 0xd0:
          skip = 1;
          break;
        case 0xcd:
        case 0xd1:
          skip = 2;
          break;
        case 0xce:
        case 0xd2:
          skip = 4;
          break;
        case 0xcf:
        case 0xd3:
          skip = 8;
          break;
        case 0xd4:
          skip = 2;
          break;
        case 0xd5:
          skip = 3;
          break;
        case 0xd6:
          skip = 5;
          break;
        case 0xd7:
          skip = 9;
          break;
        case 0xd8:
          skip = 17;
          break;
        case 0xdc:
        case 0xde:
          need = 2;
          container = 1;
          break;
        case 0xdd:
        case 0xdf:
          need = 4;
          container = 1;
          break;
        default:
          return PF_ERROR(kPFErrValueError, "rpc: invalid MessagePack byte 0x%02x", t);
      }
      if (need) {
        if (n - i < need) return PF_ERROR(kPFErrValueError, "rpc: truncated message");
        uint64_t len = 0;
        for (size_t k = 0; k < need; ++k) len = (len << 8) | (uint8_t)p[i + k];
        i += need;
        if (container) {
          items = (t == 0xde || t == 0xdf) ? 2 * len : len;
        } else {
          skip = len + ((t >= 0xc7 && t <= 0xc9) ? 1 : 0); /* ext: its type byte */
        }
      }
    }
    if (container) {
      if (items > n - i)
        return PF_ERROR(kPFErrValueError,
                        "rpc: a container declares %llu items in %zu remaining bytes",
                        (unsigned long long)items, n - i);
      if (depth + 1 >= PF_RPC_MAX_DEPTH + 8)
        return PF_ERROR(kPFErrValueError, "rpc: message nested too deep");
      pending[++depth] = items;
      cost += PF_RPC_COST_CONTAINER + PF_RPC_COST_PER_ITEM * items;
    } else {
      if (skip > n - i) return PF_ERROR(kPFErrValueError, "rpc: truncated message");
      int ext = (t >= 0xc7 && t <= 0xc9) || (t >= 0xd4 && t <= 0xd8);
      if (ext && skip > 0 && (int8_t)p[i] == PF_RPC_EXT_DOCUMENT)
        cost += document_cost(p + i + 1, (size_t)skip - 1);
      i += skip;
      if (skip > 0) cost += skip + PF_RPC_COST_BLOCK;
    }
  }
  if (i != n) return PF_ERROR(kPFErrValueError, "rpc: %zu bytes after the message", n - i);
  if (cost > (uint64_t)PF_RPC_DECODE_FACTOR * n + PF_RPC_DECODE_SLACK)
    return PF_ERROR(kPFErrValueError,
                    "rpc: a message of %zu bytes would take about %llu bytes to decode, more "
                    "than %d times its size (PF_RPC_DECODE_FACTOR): it holds too many small "
                    "items; send many numbers as a tensor or bytes",
                    n, (unsigned long long)cost, PF_RPC_DECODE_FACTOR);
  return 0;
}

static int as_u64(const msgpack_object* o, uint64_t* out) {
  if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER) return -1;
  *out = o->via.u64;
  return 0;
}

/* Reads a non-negative integer at p[*i] (any of MessagePack's integer
 * forms, as msgpack-c reads them: a signed one that is not negative is a
 * positive integer). Returns 0, or -1 when there is none. */
static int peek_uint(const char* p, size_t n, size_t* i, uint64_t* out) {
  if (*i >= n) return -1;
  uint8_t t = (uint8_t)p[(*i)++];
  if (t <= 0x7f) {
    *out = t;
    return 0;
  }
  static const uint8_t widths[8] = {1, 2, 4, 8, 1, 2, 4, 8}; /* 0xcc..0xd3 */
  if (t < 0xcc || t > 0xd3) return -1;
  size_t w = widths[t - 0xcc];
  if (n - *i < w) return -1;
  uint64_t v = 0;
  for (size_t k = 0; k < w; ++k) v = (v << 8) | (uint8_t)p[*i + k];
  *i += w;
  if (t >= 0xd0 && (v >> (8 * w - 1)) != 0) return -1; /* negative */
  *out = v;
  return 0;
}

int pf_rpc_peek(const char* data, size_t n, pf_rpc_header* out) {
  memset(out, 0, sizeof *out);
  size_t i = 0;
  uint64_t items = 0, ver = 0, kind = 0;
  uint8_t t = n > 0 ? (uint8_t)data[i++] : 0;
  if (t >= 0x90 && t <= 0x9f) {
    items = t & 0x0f;
  } else if ((t == 0xdc && n >= 3) || (t == 0xdd && n >= 5)) {
    size_t w = t == 0xdc ? 2 : 4;
    for (size_t k = 0; k < w; ++k) items = (items << 8) | (uint8_t)data[i + k];
    i += w;
  }
  if (items < 4 || peek_uint(data, n, &i, &ver) != 0 || peek_uint(data, n, &i, &kind) != 0 ||
      peek_uint(data, n, &i, &out->id) != 0 || peek_uint(data, n, &i, &out->parent) != 0)
    return PF_ERROR(kPFErrValueError, "rpc: a message without a valid header");
  out->version = (int64_t)(ver > 1000000 ? 1000000 : ver);
  out->kind = (int)(kind > 100 ? 0 : kind);
  out->nrest = (uint32_t)(items - 4);
  out->has_first_uint = out->nrest > 0 && peek_uint(data, n, &i, &out->first_uint) == 0;
  return out->version == PF_RPC_PROTOCOL_VERSION ? 0 : 1;
}

int pf_rpc_parse(const char* data, size_t n, pf_rpc_parsed* out) {
  memset(out, 0, sizeof *out);
  msgpack_unpacked_init(&out->up);
  if (pf_rpc_validate(data, n) != 0) {
    msgpack_unpacked_destroy(&out->up);
    return -1;
  }
  size_t off = 0;
  if (msgpack_unpack_next(&out->up, data, n, &off) != MSGPACK_UNPACK_SUCCESS) {
    msgpack_unpacked_destroy(&out->up);
    return PF_ERROR(kPFErrValueError, "rpc: a message that MessagePack cannot read");
  }
  const msgpack_object* o = &out->up.data;
  uint64_t ver = 0, kind = 0;
  if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 4 ||
      as_u64(&o->via.array.ptr[0], &ver) != 0 || as_u64(&o->via.array.ptr[1], &kind) != 0 ||
      as_u64(&o->via.array.ptr[2], &out->id) != 0 ||
      as_u64(&o->via.array.ptr[3], &out->parent) != 0) {
    msgpack_unpacked_destroy(&out->up);
    return PF_ERROR(kPFErrValueError, "rpc: a message without a valid header");
  }
  out->version = (int64_t)(ver > 1000000 ? 1000000 : ver);
  out->kind = (int)(kind > 100 ? 0 : kind);
  out->rest = o->via.array.ptr + 4;
  out->nrest = o->via.array.size - 4;
  return out->version == PF_RPC_PROTOCOL_VERSION ? 0 : 1;
}

void pf_rpc_parsed_free(pf_rpc_parsed* p) { msgpack_unpacked_destroy(&p->up); }
