/* PackedFunc objects, the call path and return slots. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "typed.h"

/* ---- return slot: lives on PFFuncCall's stack for one call ---- */

#define PF_RET_INLINE 64

/* See internal.h for the tag. While the tag is the thread's plain tag, the
 * slot holds at most a plain value; while it is the held tag it holds a
 * string or bytes copy (len, and heap when the copy is longer than
 * `small`) or a handle reference in value. len, heap and small are
 * meaningful only then. */
typedef struct {
  uintptr_t tag;
  int32_t type_code;
  PFValue value;
  size_t len;
  char* heap;
  char small[PF_RET_INLINE];
} pf_ret_slot;

PF_NO_ASAN static inline uintptr_t slot_tag(const pf_ret_slot* s) { return s->tag; }

int pf_check_value(const char* where, const char* what, int64_t index, int code, const PFValue* v) {
  if ((unsigned)code < kPFTypeCodeEnd) {
    pf_code_info info = pf_codes[code];
    if (info.kind != kPFValuePlain && v->v_handle == NULL)
      return PF_ERROR(kPFErrTypeError, "%s: %s %lld has type code %s but a NULL pointer", where,
                      what, (long long)index, PFTypeCodeName(code));
    if (info.kind == kPFValueHandle && !pf_is_object(v->v_handle, info.object_type))
      return PF_ERROR(kPFErrTypeError, "%s: %s %lld has type code %s but is not a live %s handle",
                      where, what, (long long)index, PFTypeCodeName(code), PFTypeCodeName(code));
    if (code == kPFBytes) {
      const PFByteArray* ba = v->v_handle;
      if (ba->data == NULL && ba->size != 0)
        return PF_ERROR(kPFErrTypeError, "%s: %s %lld is bytes of size %zu with NULL data", where,
                        what, (long long)index, ba->size);
      /* No object is that large; a copy would compute size + 1. */
      if (ba->size > PF_MAX_OBJECT_SIZE)
        return PF_ERROR(kPFErrValueError,
                        "%s: %s %lld is bytes of size %zu, larger than any object can be "
                        "(PTRDIFF_MAX bytes)",
                        where, what, (long long)index, ba->size);
    }
    return 0;
  }
  if (code >= kPFExtBegin && code < kPFExtEnd) return 0;
  return PF_ERROR(kPFErrTypeError, "%s: %s %lld has unknown type code %d", where, what,
                  (long long)index, code);
}

/* Drops what a held slot holds; the slot is then plain and null. The
 * finalizer this may run may record errors of its own; the thread's error
 * stays the one recorded before (a callee's, or none). */
static void slot_release(pf_ret_slot* s, uintptr_t tag) {
  if (pf_code_is_handle(s->type_code)) pf_object_release_keeping_error(s->value.v_handle);
  else pf_free(s->heap);
  s->heap = NULL;
  s->type_code = kPFNull;
  s->tag = tag;
}

__attribute__((noinline)) static int set_return_slow(pf_ret_slot* s, PFValue* value, int* type_code,
                                                     int num_ret) {
  static const char* const where = "PFCFuncSetReturn";
  if (s == NULL) return pf_err_null_arg(where, "ret");
  /* A NULL or forged handle is refused before anything else is read. */
  uintptr_t tag = pf_ret_tag();
  uintptr_t found = slot_tag(s);
  int held = found == (tag ^ PF_RET_TAG_HELD);
  if (found != tag && !held)
    return PF_ERROR(kPFErrTypeError,
                    "%s: argument 'ret' is not the return handle of a call in progress "
                    "on this thread",
                    where);
  if (value == NULL) return pf_err_null_arg(where, "value");
  if (type_code == NULL) return pf_err_null_arg(where, "type_code");
  if (num_ret != 1)
    return PF_ERROR(kPFErrValueError, "%s: argument 'num_ret' must be 1, got %d", where, num_ret);
  int code = *type_code;
  if (pf_check_value(where, "return value", 0, code, value) != 0) return -1;
  const char* data = NULL;
  size_t len = 0;
  if (code == kPFStr) {
    data = value->v_str;
    len = strlen(data);
  } else if (code == kPFBytes) {
    const PFByteArray* ba = value->v_handle; /* checked by pf_check_value */
    data = ba->data;
    len = ba->size;
  }
  char* heap = NULL;
  /* len <= PF_MAX_OBJECT_SIZE (pf_check_value), so len + 1 does not wrap. */
  if (data != NULL && len >= PF_RET_INLINE) {
    heap = pf_malloc(len + 1);
    if (heap == NULL) return pf_oom(where);
  }
  int is_handle = pf_code_is_handle(code);
  if (is_handle) pf_object_retain(value->v_handle);
  /* After the retain: setting the same handle twice is safe. Dropping the
   * earlier value may run a finalizer; its errors are not the callee's,
   * and must not make a later silent failure look like a recorded one. */
  if (held) slot_release(s, tag);
  s->type_code = code;
  s->value = *value;
  if (code == kPFStr || code == kPFBytes) {
    char* dst = heap ? heap : s->small;
    if (len) memcpy(dst, data, len);
    dst[len] = '\0';
    s->heap = heap;
    s->len = len;
    s->tag = tag ^ PF_RET_TAG_HELD;
  } else if (is_handle) {
    s->tag = tag ^ PF_RET_TAG_HELD;
  }
  return 0;
}

int PFCFuncSetReturn(PFRetValueHandle ret, PFValue* value, int* type_code, int num_ret) {
  pf_ret_slot* s = ret;
  if (__builtin_expect(s != NULL && value != NULL && type_code != NULL && num_ret == 1, 1)) {
    int code = *type_code;
    if (__builtin_expect((unsigned)code < PF_PLAIN_PREFIX && slot_tag(s) == pf_ret_tag(), 1)) {
      s->type_code = code;
      s->value = *value;
      return 0;
    }
  }
  return set_return_slow(s, value, type_code, num_ret);
}

/* Copies a str/bytes result (code, `len` bytes of `data`) into the
 * thread's return storage for `depth` and points *out at the copy. Each
 * depth has its own allocation, so the PFByteArray handed out for a
 * shallower call never moves when deeper calls grow the array. `data` may
 * lie in that depth's buffer (a callee that returns its argument): it is
 * then shorter than the buffer, which does not grow, and moves in place. */
static int store_string(pf_thread_state* ts, int depth, int code, const char* data, size_t len,
                        PFValue* out) {
  static const char* const where = "PFFuncCall";
  if (depth >= ts->ret_cap) {
    int cap = ts->ret_cap ? ts->ret_cap * 2 : 4;
    while (cap <= depth) cap *= 2;
    pf_ret_buffer** r = pf_realloc(ts->ret, sizeof(*r) * (size_t)cap);
    if (r == NULL) return pf_oom(where);
    memset(r + ts->ret_cap, 0, sizeof(*r) * (size_t)(cap - ts->ret_cap));
    ts->ret = r;
    ts->ret_cap = cap;
  }
  if (ts->ret[depth] == NULL) {
    ts->ret[depth] = pf_calloc(1, sizeof(pf_ret_buffer));
    if (ts->ret[depth] == NULL) return pf_oom(where);
  }
  pf_ret_buffer* b = ts->ret[depth];
  /* len <= PF_MAX_OBJECT_SIZE (checked by the setter): len + 1 does not wrap. */
  if (len >= b->cap) {
    char* d = pf_realloc(b->data, len + 1);
    if (d == NULL) return pf_oom(where);
    b->data = d;
    b->cap = len + 1;
  }
  if (len) memmove(b->data, data, len);
  b->data[len] = '\0';
  if (code == kPFStr) {
    out->v_str = b->data;
  } else {
    b->bytes.data = b->data;
    b->bytes.size = len;
    out->v_handle = &b->bytes;
  }
  return 0;
}

/* Whether `p` points into this thread's return storage: a str or bytes
 * result of an earlier call (the checking mode of call targets). */
static int in_return_storage(const void* p) {
  const pf_thread_state* ts = pf_tls();
  uintptr_t a = (uintptr_t)p;
  for (int k = 0; k < ts->ret_cap; ++k) {
    const pf_ret_buffer* b = ts->ret[k];
    if (b == NULL) continue;
    uintptr_t d = (uintptr_t)b->data;
    if (p == (const void*)&b->bytes || (d != 0 && a >= d && a - d < b->cap)) return 1;
  }
  return 0;
}

/* Names the first misuse among a call's arguments (PFFuncCall's, or a
 * checked target's: `where`); returns -1. */
__attribute__((noinline, cold)) static int misuse_at(PFFunctionHandle func, PFValue* args,
                                                     int* type_codes, int num_args,
                                                     PFValue* ret_val, int* ret_type_code,
                                                     const char* where) {
  if (!pf_is_object(func, kPFObjectFunction))
    return pf_err_bad_object(where, "func", func, kPFObjectFunction);
  if (ret_val == NULL) return pf_err_null_arg(where, "ret_val");
  if (ret_type_code == NULL) return pf_err_null_arg(where, "ret_type_code");
  if (num_args < 0)
    return PF_ERROR(kPFErrValueError, "%s: argument 'num_args' is negative (%d)", where, num_args);
  (void)type_codes; /* the one left when args is not NULL */
  return PF_ERROR(kPFErrTypeError, "%s: argument '%s' is NULL with num_args %d", where,
                  args == NULL ? "args" : "type_codes", num_args);
}

/* PFFuncCall's misuse: misuse_at with PFFuncCall's own parameters, so
 * that the call path reaches it with a jump. noipa keeps GCC from cloning
 * it with the parameters misuse_at ignores left out, which would cost the
 * call path a move per parameter. */
#if defined(__has_attribute)
#if __has_attribute(noipa)
#define PF_NOIPA_ noipa
#endif
#endif
#ifndef PF_NOIPA_
#define PF_NOIPA_ noinline
#endif
__attribute__((PF_NOIPA_, cold)) static int call_misuse(PFFunctionHandle func, PFValue* args,
                                                        int* type_codes, int num_args,
                                                        PFValue* ret_val, int* ret_type_code) {
  return misuse_at(func, args, type_codes, num_args, ret_val, ret_type_code, "PFFuncCall");
}

/* What PFFuncCall keeps across the callee: the slot and what it needs
 * after the callee returns. All of it lives in memory, so that the call
 * path saves no registers. */
typedef struct {
  pf_ret_slot slot;
  pf_function* f;
  PFValue* ret_val;
  int* ret_type_code;
  uint64_t gen;
  /* The frame's own address, read back from memory by the slow end of
   * the call: the compiler would otherwise keep it in a saved register. */
  void* self;
} pf_call_frame;

/* A call whose callee returned `rc` != 0: the callee's error, or a
 * RuntimeError when it recorded none (`gen`: the thread's error
 * generation before the call) or cleared the one it had. Returns -1. */
static int call_failed(const pf_function* f, int rc, uint64_t gen) {
  if (pf_hot.err_gen == gen || PFErrorGetKind()[0] == '\0') {
    const char* name = atomic_load_explicit(&((pf_function*)f)->name, memory_order_acquire);
    PF_ERROR(kPFErrRuntimeError, "PFFuncCall: function '%s' returned %d without recording an error",
             name ? name : "<anonymous>", rc);
  }
  return -1;
}

/* The end of a call that failed, or whose slot holds a string, bytes or a
 * reference: everything but two stores. `end` is the slot's tag as the
 * callee left it, `gen` the thread's error generation before the call.
 * The thread's string depth is the one outside the call. */
static int finish(pf_ret_slot* s, int rc, uintptr_t end, uint64_t gen, pf_function* f,
                  PFValue* ret_val, int* ret_type_code) {
  int held = end == (pf_ret_tag() ^ PF_RET_TAG_HELD);
  if (rc != 0) {
    call_failed(f, rc, gen);
    /* The callee's error stays the one across the finalizer this may run. */
    if (held) slot_release(s, 0);
    return -1;
  }
  int code = s->type_code;
  if (held && (code == kPFStr || code == kPFBytes)) {
    int st = store_string(pf_tls(), pf_hot.str_depth, code, s->heap ? s->heap : s->small, s->len,
                          ret_val);
    pf_free(s->heap);
    if (st != 0) return -1;
  } else {
    /* A handle: the slot's reference becomes the caller's. */
    *ret_val = s->value;
  }
  *ret_type_code = code;
  return 0;
}

__attribute__((noinline)) static int call_finish(pf_call_frame* fr, int rc, uintptr_t end) {
  return finish(&fr->slot, rc, end, fr->gen, fr->f, fr->ret_val, fr->ret_type_code);
}

/* Calls `f` with a fresh slot. `bump` (a constant where it is inlined):
 * the arguments include a string or bytes, which may live in the return
 * storage of the current depth, so results of calls nested in this one go
 * one level deeper. A call without one touches no thread state but the
 * read of err_gen. */
static inline __attribute__((always_inline)) int call_with_slot(pf_function* f, PFValue* args,
                                                                int* type_codes, int num_args,
                                                                PFValue* ret_val,
                                                                int* ret_type_code, int bump) {
  pf_call_frame fr;
  uintptr_t tag = pf_ret_tag();
  fr.slot.tag = tag;
  fr.slot.type_code = kPFNull;
  /* A callee that sets nothing returns null with a zero value, never the
   * stack's old bytes. */
  fr.slot.value.v_int64 = 0;
  fr.f = f;
  fr.ret_val = ret_val;
  fr.ret_type_code = ret_type_code;
  fr.gen = pf_hot.err_gen;
  int depth = 0;
  if (bump) {
    depth = pf_hot.str_depth;
    pf_hot.str_depth = depth + 1;
  }
  fr.self = &fr;
  int rc = f->func(args, type_codes, num_args, &fr.slot, f->resource);
  if (bump) pf_hot.str_depth = depth;
  uintptr_t end = fr.slot.tag;
  /* The slot is dead from here on: a handle kept past the call must not
   * match. Volatile, so the store is not dropped as one to a dying local. */
  *(volatile uintptr_t*)&fr.slot.tag = 0;
  /* rc == 0 && end == tag, as one test: only PFCFuncSetReturn writes the
   * tag while the call runs, the tag or the tag with PF_RET_TAG_HELD, so
   * the low half tells them apart. */
  if (__builtin_expect(((uint32_t)(end ^ tag) | (uint32_t)rc) == 0, 1)) {
    *fr.ret_val = fr.slot.value;
    *fr.ret_type_code = fr.slot.type_code;
    return 0;
  }
  return call_finish(fr.self, rc, end);
}

/* The end of a direct call given a str or bytes argument that returned a
 * str or bytes: the result (written by PFFuncReturnString one level
 * deeper, or anywhere the callee chose) is copied to the storage of the
 * caller's depth, where PFFuncCall's results live. */
__attribute__((noinline)) static int direct_store(int depth, int code, PFValue v, PFValue* ret_val,
                                                  int* ret_type_code) {
  const char* data = v.v_str;
  size_t len;
  if (code == kPFStr) {
    len = strlen(data);
  } else {
    const PFByteArray* ba = v.v_handle;
    data = ba->data;
    len = ba->size;
  }
  if (store_string(pf_tls(), depth, code, data, len, ret_val) != 0) return -1;
  *ret_type_code = code;
  return 0;
}

/* The two paths of a function whose arguments proved plain (f->call),
 * chosen at creation; each takes PFFuncCall's parameters, so that
 * PFFuncCall reaches it with one indirect jump. The setter convention's is
 * also the entry of its resolved targets. */
__attribute__((noinline)) static int call_setter(PFFunctionHandle f, PFValue* args, int* type_codes,
                                                 int num_args, PFValue* ret_val,
                                                 int* ret_type_code) {
  return call_with_slot(f, args, type_codes, num_args, ret_val, ret_type_code, 0);
}

/* The callee writes the caller's outputs, only on success (PFDirectCFunc).
 * What a failure needs waits in two stack words (volatile: saved
 * registers would cost a push and a pop each). */
__attribute__((noinline)) static int call_direct(PFFunctionHandle func, PFValue* args,
                                                 int* type_codes, int num_args, PFValue* ret_val,
                                                 int* ret_type_code) {
  pf_function* f = func;
  volatile struct {
    pf_function* f;
    uint64_t gen;
  } keep = {f, pf_hot.err_gen};
  int rc = f->direct(f->resource, args, type_codes, num_args, ret_val, ret_type_code);
  if (__builtin_expect(rc != 0, 0)) rc = call_failed(keep.f, rc, keep.gen);
  return rc;
}

/* A direct function given a str or bytes argument (`bump`, as for
 * call_with_slot). The result goes through locals, since its copy to the
 * caller's depth may still fail. */
__attribute__((noinline)) static int call_direct_bumped(pf_function* f, PFValue* args,
                                                        int* type_codes, int num_args,
                                                        PFValue* ret_val, int* ret_type_code) {
  uint64_t gen = pf_hot.err_gen;
  int depth = pf_hot.str_depth;
  pf_hot.str_depth = depth + 1;
  PFValue v;
  int code;
  int rc = f->direct(f->resource, args, type_codes, num_args, &v, &code);
  pf_hot.str_depth = depth;
  if (__builtin_expect(rc != 0, 0)) return call_failed(f, rc, gen);
  if (code == kPFStr || code == kPFBytes)
    return direct_store(depth, code, v, ret_val, ret_type_code);
  *ret_val = v;
  *ret_type_code = code;
  return 0;
}

/* Calls `f` by its convention. */
static inline __attribute__((always_inline)) int call_any(pf_function* f, PFValue* args,
                                                          int* type_codes, int num_args,
                                                          PFValue* ret_val, int* ret_type_code,
                                                          int bump) {
  if (!bump) return f->call(f, args, type_codes, num_args, ret_val, ret_type_code);
  if (f->direct == NULL)
    return call_with_slot(f, args, type_codes, num_args, ret_val, ret_type_code, 1);
  return call_direct_bumped(f, args, type_codes, num_args, ret_val, ret_type_code);
}

/* A call with an argument code outside the plain prefix: the check of
 * each argument (one table lookup; a non-NULL str or tensor, or a live
 * object of the code's type, needs no more; anything else the full
 * check), then the call. */
__attribute__((noinline)) static int call_checked(pf_function* f, PFValue* args, int* type_codes,
                                                  int num_args, PFValue* ret_val,
                                                  int* ret_type_code) {
  int bump = 0;
  for (int i = 0; i < num_args; ++i) {
    int c = type_codes[i];
    if (c == kPFStr && args[i].v_str != NULL) { /* the most common, first */
      bump = 1;
      continue;
    }
    if ((unsigned)c < kPFTypeCodeEnd) {
      uint8_t kind = pf_codes[c].kind;
      if (kind == kPFValuePlain) continue;
      if (kind == kPFValuePointer && c != kPFBytes && args[i].v_handle != NULL) {
        bump |= c == kPFStr;
        continue;
      }
      if (kind == kPFValueHandle && pf_is_object(args[i].v_handle, pf_codes[c].object_type))
        continue;
    }
    if (pf_check_value("PFFuncCall", "argument", i, c, &args[i]) != 0) return -1;
    bump |= c == kPFStr || c == kPFBytes;
  }
  if (bump) return call_any(f, args, type_codes, num_args, ret_val, ret_type_code, 1);
  return call_any(f, args, type_codes, num_args, ret_val, ret_type_code, 0);
}

/* PFFuncCall's body, inlined into both entry points. */
static inline __attribute__((always_inline)) int func_call(PFFunctionHandle func, PFValue* args,
                                                           int* type_codes, int num_args,
                                                           PFValue* ret_val, int* ret_type_code) {
  if (__builtin_expect(!pf_is_function(func) || ret_val == NULL || ret_type_code == NULL, 0))
    return call_misuse(func, args, type_codes, num_args, ret_val, ret_type_code);
  if (num_args > 0) {
    if (__builtin_expect(args == NULL || type_codes == NULL, 0))
      return call_misuse(func, args, type_codes, num_args, ret_val, ret_type_code);
    /* One compare per argument, two a round: a plain code needs no check
     * (any bits are valid); any other code takes the full check. */
    size_t i = (size_t)num_args;
    if (i & 1) {
      if (__builtin_expect((unsigned)type_codes[i - 1] >= PF_PLAIN_PREFIX, 0))
        return call_checked(func, args, type_codes, num_args, ret_val, ret_type_code);
      --i;
    }
    while (i != 0) {
      if (__builtin_expect(((unsigned)type_codes[i - 1] >= PF_PLAIN_PREFIX) |
                               ((unsigned)type_codes[i - 2] >= PF_PLAIN_PREFIX),
                           0))
        return call_checked(func, args, type_codes, num_args, ret_val, ret_type_code);
      i -= 2;
    }
  } else if (__builtin_expect(num_args < 0, 0)) {
    return call_misuse(func, args, type_codes, num_args, ret_val, ret_type_code);
  }
  return call_any(func, args, type_codes, num_args, ret_val, ret_type_code, 0);
}

int PFFuncCall(PFFunctionHandle func, PFValue* args, int* type_codes, int num_args,
               PFValue* ret_val, int* ret_type_code) {
  return func_call(func, args, type_codes, num_args, ret_val, ret_type_code);
}

int PFFuncCallFrame(PFCallFrame* frame) {
  if (__builtin_expect(frame == NULL, 0)) return pf_err_null_arg("PFFuncCallFrame", "frame");
  return func_call(frame->func, frame->args, frame->type_codes, frame->num_args, &frame->ret_val,
                   &frame->ret_type_code);
}

/* ---- function objects ---- */

static void function_destroy(pf_object* o) {
  pf_function* f = (pf_function*)o;
  if (f->fin) f->fin(f->resource);
  pf_free(atomic_load(&f->name));
  pf_siginfo_free(atomic_load(&f->siginfo));
  pf_free(atomic_load(&f->doc));
  pf_prepack* pp = atomic_load(&f->prepack);
  if (pp != NULL) {
    pf_free(pp->format);
    pf_free(pp);
  }
  pf_object* owner = atomic_load(&f->owner);
  pf_free(f);
  /* Last: the owner (a module) may hold the code that `fin` lived in. The
   * libraries in base.code_libs go after this, in pf_object_release. */
  if (owner) pf_object_release(owner);
}

/* A function of either convention (one of func and direct is NULL): the
 * body of both create calls. `code` is the callee, for its library. */
static int create_function(const char* where, PFPackedCFunc func, PFDirectCFunc direct,
                           void (*code)(void), void* resource_handle, PFPackedCFuncFinalizer fin,
                           PFFunctionHandle* out) {
  if (code == NULL || out == NULL) {
    if (fin) fin(resource_handle);
    return pf_err_null_arg(where, code == NULL ? "func" : "out");
  }
  pf_function* f = pf_calloc(1, sizeof(*f));
  if (f == NULL) {
    if (fin) fin(resource_handle);
    return pf_oom(where);
  }
  pf_object_init(&f->base, kPFObjectFunction, function_destroy);
  f->func = func;
  f->direct = direct;
  f->call = direct ? call_direct : call_setter;
  f->resource = resource_handle;
  f->fin = fin;
  /* Both may be a module's code, and both run until the last reference. */
  if (pf_object_hold_code(&f->base, pf_code_addr(code), where) != 0 ||
      (fin && pf_object_hold_code(&f->base, pf_code_addr((void (*)(void))fin), where) != 0)) {
    pf_object_release(&f->base); /* runs fin */
    return -1;
  }
  *out = f;
  return 0;
}

int PFFuncCreateFromCFunc(PFPackedCFunc func, void* resource_handle, PFPackedCFuncFinalizer fin,
                          PFFunctionHandle* out) {
  return create_function("PFFuncCreateFromCFunc", func, NULL, (void (*)(void))func, resource_handle,
                         fin, out);
}

int PFFuncCreateDirect(PFDirectCFunc func, void* resource_handle, PFPackedCFuncFinalizer fin,
                       PFFunctionHandle* out) {
  return create_function("PFFuncCreateDirect", NULL, func, (void (*)(void))func, resource_handle,
                         fin, out);
}

int PFFuncReturnString(int type_code, const char* data, size_t size, PFValue* ret_val,
                       int* ret_type_code) {
  static const char* const where = "PFFuncReturnString";
  if (ret_val == NULL) return pf_err_null_arg(where, "ret_val");
  if (ret_type_code == NULL) return pf_err_null_arg(where, "ret_type_code");
  if (type_code != kPFStr && type_code != kPFBytes)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'type_code' must be kPFStr or kPFBytes, got %d",
                    where, type_code);
  if (data == NULL && size != 0)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'data' is NULL with size %zu", where, size);
  if (size > PF_MAX_OBJECT_SIZE)
    return PF_ERROR(kPFErrValueError,
                    "%s: argument 'size' is %zu, larger than any object can be (PTRDIFF_MAX bytes)",
                    where, size);
  if (type_code == kPFStr && size != 0) size = strnlen(data, size);
  PFValue v;
  if (store_string(pf_tls(), pf_hot.str_depth, type_code, data ? data : "", size, &v) != 0)
    return -1;
  *ret_val = v;
  *ret_type_code = type_code;
  return 0;
}

/* ---- call targets ---- */

int pf_target_call(const PFCallTarget* t, PFFunctionHandle func, PFValue* args, int* type_codes,
                   int num_args, PFValue* ret_val, int* ret_type_code) {
  uint64_t gen = pf_hot.err_gen;
  int rc = t->entry(t->ctx, args, type_codes, num_args, ret_val, ret_type_code);
  if (__builtin_expect(rc != 0, 0)) return call_failed(func, rc, gen);
  return 0;
}

/* The checking mode's entry: what a target caller owes, checked as
 * PFFuncCall checks it, then the call. */
static int checked_entry(void* ctx, PFValue* args, int* type_codes, int num_args, PFValue* ret_val,
                         int* ret_type_code) {
  static const char* const where = "PFCallTarget";
  pf_function* f = ctx;
  if (!pf_is_function(f) || ret_val == NULL || ret_type_code == NULL || num_args < 0 ||
      (num_args > 0 && (args == NULL || type_codes == NULL)))
    return misuse_at(f, args, type_codes, num_args, ret_val, ret_type_code, where);
  for (int i = 0; i < num_args; ++i) {
    int c = type_codes[i];
    if (pf_check_value(where, "argument", i, c, &args[i]) != 0) return -1;
    if ((c == kPFStr || c == kPFBytes) && in_return_storage(args[i].v_handle))
      return PF_ERROR(kPFErrValueError,
                      "%s: argument %d points into this thread's return storage (an earlier "
                      "result): copy it, or call through PFFuncCall",
                      where, i);
  }
  return f->call(f, args, type_codes, num_args, ret_val, ret_type_code);
}

/* PF_CHECK_TARGETS, read once: -1 until read, then 0 or 1. */
static atomic_int g_check_targets = -1;

void pf_target_checking_reset(void) { atomic_store(&g_check_targets, -1); }

static int check_targets(void) {
  int m = atomic_load_explicit(&g_check_targets, memory_order_relaxed);
  if (__builtin_expect(m < 0, 0)) {
    const char* e = getenv("PF_CHECK_TARGETS");
    m = e != NULL && strcmp(e, "1") == 0;
    atomic_store_explicit(&g_check_targets, m, memory_order_relaxed);
  }
  return m;
}

/* The bytes of version 1 of PFCallTarget. */
#define PF_TARGET_V1_SIZE (offsetof(PFCallTarget, ctx) + sizeof(void*))

int PFFuncResolve(PFFunctionHandle func, PFCallTarget* out) {
  static const char* const where = "PFFuncResolve";
  if (!pf_is_function(func)) return pf_err_bad_object(where, "func", func, kPFObjectFunction);
  if (out == NULL) return pf_err_null_arg(where, "out");
  if (out->size < PF_TARGET_V1_SIZE)
    return PF_ERROR(kPFErrValueError,
                    "%s: argument 'out': size %u is smaller than version 1's PFCallTarget (%zu "
                    "bytes); set it to sizeof(PFCallTarget)",
                    where, (unsigned)out->size, (size_t)PF_TARGET_V1_SIZE);
  pf_function* f = func;
  PFCallTarget t = {(uint32_t)sizeof(PFCallTarget), 0, NULL, f};
  if (check_targets()) {
    t.flags = kPFTargetChecked | (f->direct ? kPFTargetDirect : kPFTargetAdapter);
    t.entry = checked_entry;
  } else if (f->direct != NULL) {
    t.flags = kPFTargetDirect;
    t.entry = f->direct;
    t.ctx = f->resource;
  } else {
    t.flags = kPFTargetAdapter;
    t.entry = call_setter;
  }
  /* Only what the caller's struct has room for (an older, smaller one). */
  if (out->size < t.size) t.size = out->size;
  memcpy(out, &t, t.size);
  return 0;
}

int PFFuncRetain(PFFunctionHandle func) {
  PF_CHECK_OBJECT(func, kPFObjectFunction);
  pf_object_retain(func);
  return 0;
}

int PFFuncFree(PFFunctionHandle func) {
  if (func == NULL) return 0;
  PF_CHECK_OBJECT(func, kPFObjectFunction);
  pf_object_release(func);
  return 0;
}

/* ---- metadata ---- */

static int already_set(const char* what) {
  return PF_ERROR(kPFErrValueError,
                  "PFFuncSetInfo: argument '%s': the function's %s is already set", what, what);
}

int PFFuncSetInfo(PFFunctionHandle func, const char* name, const char* signature, const char* doc) {
  static const char* const where = "PFFuncSetInfo";
  PF_CHECK_OBJECT(func, kPFObjectFunction);
  pf_function* f = func;
  _Atomic(char*)* fields[2] = {&f->name, &f->doc};
  const char* values[2] = {name, doc};
  static const char* const what[2] = {"name", "doc"};
  char* copies[2] = {NULL, NULL};
  /* All or nothing: check and copy everything before storing anything, so
   * that a failed call leaves the function as it was. (Two threads racing
   * to set different fields of one function may still both partly win.) */
  for (int i = 0; i < 2; ++i)
    if (values[i] != NULL && atomic_load(fields[i]) != NULL) return already_set(what[i]);
  if (signature != NULL && atomic_load(&f->siginfo) != NULL) return already_set("signature");
  /* A signature is kept parsed, and its text canonical, so that every
   * reader takes it apart without a parser of its own. */
  pf_siginfo* info = NULL;
  if (signature != NULL && pf_siginfo_parse(where, signature, &info) != 0) return -1;
  for (int i = 0; i < 2; ++i) {
    if (values[i] == NULL) continue;
    copies[i] = pf_strdup(values[i]);
    if (copies[i] == NULL) {
      for (int j = 0; j < i; ++j) pf_free(copies[j]);
      pf_siginfo_free(info);
      return pf_oom(where);
    }
  }
  int rc = 0;
  for (int i = 0; i < 2; ++i) {
    char* expected = NULL;
    if (copies[i] != NULL && !atomic_compare_exchange_strong(fields[i], &expected, copies[i])) {
      pf_free(copies[i]);
      rc = already_set(what[i]);
    }
  }
  if (info != NULL) {
    pf_siginfo* expected = NULL;
    if (!atomic_compare_exchange_strong(&f->siginfo, &expected, info)) {
      pf_siginfo_free(info);
      rc = already_set("signature");
    }
  }
  return rc;
}

int pf_func_set_siginfo(PFFunctionHandle func, pf_siginfo* info) {
  pf_function* f = func;
  pf_siginfo* expected = NULL;
  if (!atomic_compare_exchange_strong(&f->siginfo, &expected, info)) {
    pf_siginfo_free(info);
    return already_set("signature");
  }
  return 0;
}

int PFFuncGetInfo(PFFunctionHandle func, const char** name, const char** signature,
                  const char** doc) {
  PF_CHECK_OBJECT(func, kPFObjectFunction);
  pf_function* f = func;
  if (name) *name = atomic_load_explicit(&f->name, memory_order_acquire);
  if (signature) {
    const pf_siginfo* info = atomic_load_explicit(&f->siginfo, memory_order_acquire);
    *signature = info ? info->pub.text : NULL;
  }
  if (doc) *doc = atomic_load_explicit(&f->doc, memory_order_acquire);
  return 0;
}

int PFFuncGetSignatureInfo(PFFunctionHandle func, const PFSignatureInfo** out) {
  PF_CHECK_OBJECT(func, kPFObjectFunction);
  PF_CHECK_ARG(out);
  const pf_siginfo* info =
      atomic_load_explicit(&((pf_function*)func)->siginfo, memory_order_acquire);
  *out = info ? &info->pub : NULL;
  return 0;
}

/* ---- keyword calls ---- */

/* The name of a function in a keyword call's errors, as Python's "f()". */
static const char* kw_func_name(const pf_function* f) {
  const char* name = atomic_load_explicit(&((pf_function*)f)->name, memory_order_acquire);
  return name ? name : "<anonymous>";
}

/* "missing 2 required positional arguments: 'x' and 'y'", Python's words.
 * The call's arguments: the caller's error, with no place (PF_ERROR in
 * base.h); so are the others below. */
__attribute__((cold)) static int kw_missing(const pf_function* f, const pf_siginfo* info,
                                            uint32_t given) {
  char names[PF_TYPED_MAX_ARGS * 64 + 64];
  size_t n = 0;
  int count = 0, total = 0;
  for (int j = 0; j < info->pub.num_params; ++j)
    if (!(given & (1u << j)) && !info->params[j].pub.has_default) ++total;
  for (int j = 0; j < info->pub.num_params; ++j) {
    if ((given & (1u << j)) || info->params[j].pub.has_default) continue;
    const char* name = info->params[j].pub.name;
    ++count;
    const char* sep = count == 1 ? "" : count < total ? ", " : total == 2 ? " and " : ", and ";
    n += (size_t)snprintf(names + n, n < sizeof(names) ? sizeof(names) - n : 0, "%s'%.60s'", sep,
                          name ? name : "?");
    if (n >= sizeof(names)) break;
  }
  return PFErrorSetFormat(kPFErrTypeError, "%.200s() missing %d required positional argument%s: %s",
                          kw_func_name(f), total, total == 1 ? "" : "s", names);
}

__attribute__((cold)) static int kw_too_many(const pf_function* f, const pf_siginfo* info,
                                             int num_args) {
  int hi = info->pub.num_params, lo = info->pub.num_required;
  char takes[64];
  if (lo == hi) snprintf(takes, sizeof(takes), "%d positional argument%s", hi, hi == 1 ? "" : "s");
  else snprintf(takes, sizeof(takes), "from %d to %d positional arguments", lo, hi);
  return PFErrorSetFormat(kPFErrTypeError, "%.200s() takes %s but %d %s given", kw_func_name(f),
                          takes, num_args, num_args == 1 ? "was" : "were");
}

/* Misuse of PFFuncCallKw's keyword arguments; returns -1. */
__attribute__((cold, noinline)) static int kw_misuse(const char* const* kw_names, PFValue* kw_args,
                                                     int* kw_codes, int num_kw) {
  static const char* const where = "PFFuncCallKw";
  if (num_kw < 0)
    return PF_ERROR(kPFErrValueError, "%s: argument 'num_kw' is negative (%d)", where, num_kw);
  const char* null_arg = kw_names == NULL ? "kw_names" : kw_args == NULL ? "kw_args" : "kw_codes";
  if (kw_names == NULL || kw_args == NULL || kw_codes == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: argument '%s' is NULL with num_kw %d", where, null_arg,
                    num_kw);
  for (int k = 0; k < num_kw; ++k)
    if (kw_names[k] == NULL)
      return PF_ERROR(kPFErrTypeError, "%s: argument 'kw_names[%d]' is NULL", where, k);
  return PF_ERROR(kPFErrRuntimeError, "%s: misuse not found", where);
}

/* A keyword call that is not a plain positional one: the arguments laid
 * out by parameter, defaults filled, then PFFuncCall's body. It takes
 * PFFuncCallKw's own parameters, so that the call to it is a jump. */
__attribute__((noinline)) static int call_kw_slow(PFFunctionHandle func, PFValue* args,
                                                  int* type_codes, int num_args,
                                                  const char* const* kw_names, PFValue* kw_args,
                                                  int* kw_codes, int num_kw, PFValue* ret_val,
                                                  int* ret_type_code) {
  pf_function* f = func;
  const pf_siginfo* info = atomic_load_explicit(&f->siginfo, memory_order_acquire);
  /* PFFuncCall's misuse, as PFFuncCall reports it; then the keywords'. */
  if (ret_val == NULL || ret_type_code == NULL || num_args < 0 ||
      (num_args > 0 && (args == NULL || type_codes == NULL)))
    return PFFuncCall(f, args, type_codes, num_args, ret_val, ret_type_code);
  if (num_kw < 0 || (num_kw > 0 && (kw_names == NULL || kw_args == NULL || kw_codes == NULL)))
    return kw_misuse(kw_names, kw_args, kw_codes, num_kw);
  if (info == NULL) {
    if (num_kw > 0)
      return PFErrorSetFormat(kPFErrTypeError, "%.200s() takes no keyword arguments",
                              kw_func_name(f));
    return PFFuncCall(f, args, type_codes, num_args, ret_val, ret_type_code);
  }
  int n = info->pub.num_params;
  int npos = num_args < n ? num_args : n;
  PFValue a[PF_TYPED_MAX_ARGS];
  int c[PF_TYPED_MAX_ARGS];
  uint32_t given = (uint32_t)(((uint64_t)1 << npos) - 1);
  /* In Python's order: each keyword in turn, then the count, then what is
   * missing. */
  for (int k = 0; k < num_kw; ++k) {
    const char* name = kw_names[k];
    if (name == NULL) return kw_misuse(kw_names, kw_args, kw_codes, num_kw);
    /* Names are compared 8 bytes at a time: most are that short. */
    int has_rest;
    uint64_t key = pf_name_key(name, &has_rest);
    int j = info->pub.named ? 0 : n;
    for (; j < n; ++j) {
      if (info->name_keys[j] != key) continue;
      if (!has_rest) break; /* both shorter than 8 bytes, and equal */
      const char* p = info->params[j].pub.name + 8;
      const char* q = name + 8;
      while (*p == *q && *p != '\0') ++p, ++q;
      if (*p == *q) break;
    }
    if (j == n)
      return PFErrorSetFormat(kPFErrTypeError,
                              "%.200s() got an unexpected keyword argument '%.200s'",
                              kw_func_name(f), name);
    if (given & (1u << j))
      return PFErrorSetFormat(kPFErrTypeError, "%.200s() got multiple values for argument '%.200s'",
                              kw_func_name(f), name);
    given |= 1u << j;
    a[j] = kw_args[k];
    c[j] = kw_codes[k];
  }
  if (num_args > n) return kw_too_many(f, info, num_args);
  /* One pass: the positional arguments, then a default for each parameter
   * no keyword gave. */
  for (int j = 0; j < n; ++j) {
    if (j < num_args) {
      a[j] = args[j];
      c[j] = type_codes[j];
    } else if (!(given & (1u << j))) {
      const PFParamInfo* p = &info->params[j].pub;
      if (!p->has_default) return kw_missing(f, info, given);
      a[j] = p->default_value;
      c[j] = p->default_code;
    }
  }
  return func_call(f, a, c, n, ret_val, ret_type_code);
}

int PFFuncCallKw(PFFunctionHandle func, PFValue* args, int* type_codes, int num_args,
                 const char* const* kw_names, PFValue* kw_args, int* kw_codes, int num_kw,
                 PFValue* ret_val, int* ret_type_code) {
  if (__builtin_expect(!pf_is_function(func), 0))
    return pf_err_bad_object("PFFuncCallKw", "func", func, kPFObjectFunction);
  const pf_siginfo* info =
      atomic_load_explicit(&((pf_function*)func)->siginfo, memory_order_acquire);
  /* A positional call of every parameter is PFFuncCall, plus this test. */
  if (__builtin_expect(num_kw == 0 && (info == NULL || num_args == info->pub.num_params), 1))
    return func_call(func, args, type_codes, num_args, ret_val, ret_type_code);
  return call_kw_slow(func, args, type_codes, num_args, kw_names, kw_args, kw_codes, num_kw,
                      ret_val, ret_type_code);
}

int pf_func_set_owner(PFFunctionHandle func, PFObjectHandle owner) {
  pf_function* f = func;
  pf_object* expected = NULL;
  if (owner == NULL) return 0;
  pf_object_retain(owner);
  if (!atomic_compare_exchange_strong(&f->owner, &expected, (pf_object*)owner)) {
    pf_object_release(owner);
    return PF_ERROR(kPFErrValueError, "function already has an owner");
  }
  return 0;
}

/* PFCallFrame is a struct hosts fill by contract: its layout is ABI. */
_Static_assert(offsetof(PFCallFrame, ret_val) == 0 && offsetof(PFCallFrame, ret_type_code) == 8 &&
                   offsetof(PFCallFrame, num_args) == 12 && offsetof(PFCallFrame, func) == 16 &&
                   offsetof(PFCallFrame, args) == 16 + sizeof(void*) &&
                   offsetof(PFCallFrame, type_codes) == 16 + 2 * sizeof(void*) &&
                   sizeof(PFCallFrame) == 16 + 3 * sizeof(void*),
               "PFCallFrame's layout is ABI");
