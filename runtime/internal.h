/* Private to the runtime: object layout, per-thread state, allocation. */
#ifndef PACKEDFUNC_RUNTIME_INTERNAL_H_
#define PACKEDFUNC_RUNTIME_INTERNAL_H_

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "packedfunc/c_api.h"

#define PF_HIDDEN __attribute__((visibility("hidden")))

/* Every object starts with this header. `magic` lets entry points reject a
 * pointer that is not a live object before they trust its type index. */
#define PF_OBJECT_MAGIC 0x50464f42u /* "PFOB" */
#define PF_OBJECT_DEAD 0xdeadbeefu

typedef struct pf_object pf_object;
struct pf_object {
  uint32_t magic;
  uint32_t type_index;
  atomic_int_fast32_t ref_count;
  void (*destroy)(pf_object* self); /* frees the whole object */
  /* The loaded libraries that hold code this object may still run (its
   * function, finalizer or deleter), or NULL. pf_object_release drops them
   * after `destroy`, so a library is closed only after the last call into
   * it. Set while the object is created, before anyone else can see it. */
  pf_object* code_libs[2];
  /* Links an object whose destruction waits on the releasing thread's
   * deferred list (pf_object_release). */
  pf_object* next_dead;
};

/* A function's pre-pack hook and the layout it packs to (PFFuncSetPrePack);
 * immutable once published. */
typedef struct {
  char* format;
  PFPrePackFunc fn;
} pf_prepack;

struct pf_siginfo;

typedef struct {
  pf_object base;
  PFPackedCFunc func;   /* the setter convention; NULL for a direct function */
  PFDirectCFunc direct; /* the direct convention (PFFuncCreateDirect); else NULL */
  /* PFFuncCall's path for this function's convention once the arguments
   * proved plain, chosen at creation: one indirect jump, no test. */
  int (*call)(PFFunctionHandle self, PFValue* args, int* type_codes, int num_args, PFValue* ret_val,
              int* ret_type_code);
  void* resource;
  PFPackedCFuncFinalizer fin;
  /* Metadata; each is set at most once, then read without a lock. The
   * signature is kept parsed (runtime/typed.h), its canonical text in it. */
  _Atomic(char*) name;
  _Atomic(struct pf_siginfo*) siginfo;
  _Atomic(char*) doc;
  /* An object kept alive as long as this function (e.g. its module). */
  _Atomic(pf_object*) owner;
  /* The pre-pack hook, set at most once, then read without a lock. */
  _Atomic(pf_prepack*) prepack;
  /* kPFFunc* flags (runtime/func_flags.c); bits are only ever added. */
  _Atomic(uint32_t) flags;
} pf_function;
/* Every kPFFunc* flag that function.h defines. */
#define PF_FUNC_FLAGS_KNOWN kPFFuncNonBlocking

PF_HIDDEN void pf_object_init(pf_object* obj, uint32_t type_index, void (*destroy)(pf_object*));
/* Drops a reference; the last one destroys the object. A release made while
 * this thread is already destroying an object (a finalizer or destroy that
 * drops references) is queued and done after that destroy returns, by the
 * outermost release on the thread: so releasing a long chain of objects
 * (modules importing modules) takes constant stack. */
PF_HIDDEN void pf_object_release(pf_object* obj);

/* The items of a live Array, borrowed (an Array never changes): for the
 * checks of a typed call, which read them in place (runtime/container.c). */
PF_HIDDEN void pf_array_view(PFObjectHandle array, int64_t* size, const PFValue** values,
                             const int32_t** codes);
/* Makes `obj`, which is being created, keep loaded the shared library that
 * contains `code` (see pf_library_of_code) until after it is destroyed.
 * NULL code holds nothing. Returns -1 with an error naming `where`
 * (MemoryError) on failure; the caller then releases the object. */
static inline int pf_object_hold_code(pf_object* obj, const void* code, const char* where);

/* The address of a function, for pf_object_hold_code (POSIX lets function
 * pointers and void* convert; the copy keeps ISO C quiet). */
static inline const void* pf_code_addr(void (*fn)(void)) {
  const void* p;
  memcpy(&p, &fn, sizeof(p));
  return p;
}

/* Takes a reference to a live object. Relaxed: whoever passes the object
 * along already holds a reference, which orders everything before. */
static inline void pf_object_retain(void* obj) {
  atomic_fetch_add_explicit(&((pf_object*)obj)->ref_count, 1, memory_order_relaxed);
}
/* Whether more than one reference holds `obj` now: a walk that meets an
 * object held once meets it once (through its one holder), so it need
 * not keep what it found there. */
static inline int pf_object_held_twice(const void* obj) {
  return atomic_load_explicit(&((const pf_object*)obj)->ref_count, memory_order_relaxed) > 1;
}
/* Takes a reference to `obj` unless its last one is already gone (it is
 * then being destroyed and must not come back): 1 when taken, else 0. For
 * objects reachable from a table that does not own them (a weak list). */
static inline int pf_object_try_retain(void* obj) {
  pf_object* o = (pf_object*)obj;
  int_fast32_t n = atomic_load_explicit(&o->ref_count, memory_order_relaxed);
  while (n > 0)
    if (atomic_compare_exchange_weak_explicit(&o->ref_count, &n, n + 1, memory_order_relaxed,
                                              memory_order_relaxed))
      return 1;
  return 0;
}
/* Gives `func` its signature, parsed (PFFuncSetInfo's, without a second
 * parse): takes `info` over, also on failure (a ValueError when the
 * function has a signature already). */
PF_HIDDEN int pf_func_set_siginfo(PFFunctionHandle func, struct pf_siginfo* info);
/* Calls `func` through its resolved target `t` (PFFuncResolve) as the
 * runtime's own callers do, whose values are valid by construction: the
 * callee's status, and a RuntimeError when it failed without recording
 * an error, as PFFuncCall reports it (runtime/function.c). */
PF_HIDDEN int pf_target_call(const PFCallTarget* t, PFFunctionHandle func, PFValue* args,
                             int* type_codes, int num_args, PFValue* ret_val, int* ret_type_code);
/* Test hook (not API): makes the next PFFuncResolve read PF_CHECK_TARGETS
 * again (runtime/function.c). */
PF_HIDDEN void pf_target_checking_reset(void);
/* Makes `owner` live at least as long as `func` (takes a reference); used
 * by modules so that their code stays loaded while their functions live. */
PF_HIDDEN int pf_func_set_owner(PFFunctionHandle func, PFObjectHandle owner);

/* 1 when `h` looks like a live object of `type_index` (0 = any type). */
static inline int pf_is_object(const void* h, uint32_t type_index) {
  const pf_object* o = (const pf_object*)h;
  return o != NULL && o->magic == PF_OBJECT_MAGIC &&
         (type_index == 0 || o->type_index == type_index);
}

/* What the runtime knows of each built-in type code, from PF_TYPE_CODE_LIST:
 * the value kind (kPFValuePlain, kPFValuePointer, kPFValueHandle) and, for a
 * handle, the object type it must be (0: any). Indexed by code; callers
 * check `(unsigned)code < kPFTypeCodeEnd` first. */
typedef struct {
  uint8_t kind;
  uint8_t object_type;
} pf_code_info;
static const pf_code_info pf_codes[kPFTypeCodeEnd] = {
#define PF_CODE_INFO_(name, num, text, kind, otype) [num] = {kind, otype},
    PF_TYPE_CODE_LIST(PF_CODE_INFO_)
#undef PF_CODE_INFO_
};
/* The plain codes (value kind kPFValuePlain) as one bit mask, from
 * PF_TYPE_CODE_LIST: the codes whose values any bits are valid for, and
 * which need no copy and no reference. The codes 0 .. PF_PLAIN_PREFIX - 1
 * are all plain (the mask's run of low ones), so the call path checks an
 * argument with one unsigned compare and sends any other code to the full
 * check. */
#define PF_PLAIN_BIT_(name, num, text, kind, otype) | ((kind) == kPFValuePlain ? 1u << (num) : 0u)
#define PF_PLAIN_CODE_MASK (0u PF_TYPE_CODE_LIST(PF_PLAIN_BIT_))
#define PF_PLAIN_PREFIX ((unsigned)__builtin_ctz(~PF_PLAIN_CODE_MASK))
_Static_assert(kPFTypeCodeEnd <= 32, "PF_PLAIN_CODE_MASK has a bit per built-in code");
_Static_assert(PF_PLAIN_PREFIX >= 1 && PF_PLAIN_PREFIX <= kPFTypeCodeEnd,
               "the plain-code prefix is a run of built-in codes");
static inline int pf_code_is_plain(int code) {
  return (unsigned)code < 32u && ((PF_PLAIN_CODE_MASK >> (unsigned)code) & 1u);
}
static inline int pf_code_is_handle(int code) {
  return (unsigned)code < kPFTypeCodeEnd && pf_codes[code].kind == kPFValueHandle;
}

/* ---- return slots (runtime/function.c) ---- */
/* A PFRetValueHandle points to a slot that PFFuncCall keeps in its own
 * stack frame for the one call. While the call is in progress its tag is
 * the calling thread's tag (pf_ret_tag): plain while the slot holds at most
 * a plain value, with PF_RET_TAG_HELD flipped while it holds a string,
 * bytes or a reference; 0 once the call has returned. The key mixed into
 * the thread pointer sets the low bit, which no aligned pointer has, so
 * memory that is not a slot rarely matches. */
#define PF_RET_TAG_KEY (~(uintptr_t)0x50460100u)
#define PF_RET_TAG_HELD ((uintptr_t)2u)
#if defined(__has_builtin)
#if __has_builtin(__builtin_thread_pointer) && (defined(__x86_64__) || defined(__aarch64__))
#define PF_RET_TAG_FROM_BUILTIN_ 1
#endif
#endif
#ifdef PF_RET_TAG_FROM_BUILTIN_
static inline uintptr_t pf_ret_tag(void) {
  return (uintptr_t)__builtin_thread_pointer() ^ PF_RET_TAG_KEY;
}
#else
#include <pthread.h>
static inline uintptr_t pf_ret_tag(void) { return (uintptr_t)pthread_self() ^ PF_RET_TAG_KEY; }
#endif

/* A stale handle points into a dead frame that a sanitizer may have
 * poisoned: reading its tag is how such a handle is refused, so the read
 * is not instrumented. */
#if defined(__SANITIZE_ADDRESS__)
#define PF_NO_ASAN __attribute__((no_sanitize_address))
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PF_NO_ASAN __attribute__((no_sanitize("address")))
#endif
#endif
#ifndef PF_NO_ASAN
#define PF_NO_ASAN
#endif

/* pf_is_object(h, kPFObjectFunction), for the call path. The magic is
 * compared first, so that memory that is no object (a host's stray pointer
 * to a short block) is read no further than its first 4 bytes, as every
 * other handle check reads it; one 8-byte compare of magic and type read
 * past such a block. */
static inline int pf_is_function(const void* h) { return pf_is_object(h, kPFObjectFunction); }

/* ---- the references that objects hold (runtime/owned.c) ---- */
/* A walk from one object along the references that objects hold, for
 * PFObjectFindOwnedHosts. Each type below reports the references its
 * object holds with pf_walk_child, after paying with pf_walk_spend for the
 * values it looks at; either returns -1 when the walk must stop (its
 * budget is spent, or memory ran out), and the type's function then
 * returns -1 at once. None runs user code; only a List's and a Dict's take
 * a lock (their own, shared with readers, for the report), and report
 * with pf_walk_held_child. */
typedef struct pf_walk pf_walk;
PF_HIDDEN int pf_walk_spend(pf_walk* w, int64_t values);
PF_HIDDEN int pf_walk_child(pf_walk* w, void* child);
/* The same for a child that the caller reads under a lock, which another
 * thread may release once it is unlocked: the walk takes a reference to
 * it (atomic; it is dropped when the walk ends). */
PF_HIDDEN int pf_walk_held_child(pf_walk* w, void* child);
/* An Array's handle items; a Map's handle values (runtime/container.c). */
PF_HIDDEN int pf_array_children(pf_walk* w, const void* array);
PF_HIDDEN int pf_map_children(pf_walk* w, const void* map);
/* A List's handle items (runtime/list.c); a Dict's handle keys and values
 * (runtime/dict.c): what they hold at one moment, under their read lock. */
PF_HIDDEN int pf_list_children(pf_walk* w, const void* list);
PF_HIDDEN int pf_dict_children(pf_walk* w, const void* dict);
/* A bound function's inner function and the constants it holds itself
 * (runtime/bind.c); nothing for any other function. */
PF_HIDDEN int pf_bound_children(pf_walk* w, const pf_function* f);
/* A closure's function (runtime/closure.c). */
PF_HIDDEN int pf_closure_children(pf_walk* w, const void* closure);
/* The objects in an instance's handle fields (func, array, map, shape,
 * object, list, dict, tensor and obj<KEY> fields, inherited ones too) of a
 * registered type (runtime/object_instance.c). Unlike the references
 * above, these may change after the instance is made: such an instance is
 * reported with pf_walk_mutable. */
PF_HIDDEN int pf_instance_children(pf_walk* w, const void* obj);
PF_HIDDEN void pf_walk_mutable(pf_walk* w);
/* 1 and the payload (host object) or resource handle (host function) in
 * *out when `obj` is a host object or host function made on `gate`; 0
 * otherwise (runtime/host.c). */
PF_HIDDEN int pf_host_payload(const void* obj, const void* gate, void** out);

/* ---- host gates (runtime/host.c) ---- */
/* Whether calls through gates are counted in per-thread seats from now on
 * (on: where the kernel has the barrier they need), or in the gates'
 * shared state: both are always correct; tests run both. */
PF_HIDDEN void pf_gate_seats_enable(int on);

/* ---- loaded libraries (runtime/library.c) ---- */
/* Finds the shared library that contains `code` and writes a new reference
 * to the runtime's object for it (one per loaded library, holding one
 * dlopen reference), or NULL when the code never unloads (the main program,
 * libpackedfunc itself) or lies in no library (libffi closures, JIT code).
 * Returns -1 with a MemoryError naming `where` on failure. Takes and drops
 * the library list's lock; runs no user code. */
PF_HIDDEN int pf_library_of_code(const void* code, pf_object** out, const char* where);
/* The address spans of the main program and of libpackedfunc, whose code
 * never unloads; valid once pf_static_code_ready is set (by the first
 * pf_library_of_code call), so that the common case needs no call. */
typedef struct {
  uintptr_t start, end;
} pf_code_span;
PF_HIDDEN extern pf_code_span pf_static_code[2];
PF_HIDDEN extern atomic_int pf_static_code_ready;
PF_HIDDEN int pf_object_hold_code_slow(pf_object* obj, const void* code, const char* where);

static inline int pf_object_hold_code(pf_object* obj, const void* code, const char* where) {
  uintptr_t a = (uintptr_t)code;
  if (code == NULL) return 0;
  if (atomic_load_explicit(&pf_static_code_ready, memory_order_acquire) &&
      (a - pf_static_code[0].start < pf_static_code[0].end - pf_static_code[0].start ||
       a - pf_static_code[1].start < pf_static_code[1].end - pf_static_code[1].start))
    return 0;
  return pf_object_hold_code_slow(obj, code, where);
}

/* ---- the import graph (runtime/module_import.c) ---- */
/* How many modules the import searches of this process have visited, for
 * tests that bound the work of a search. */
PF_HIDDEN uint64_t pf_mod_import_visits(void);

/* ---- misuse at an entry point: one check per kind, one wording ---- */
/* Each records a TypeError naming the entry point (`__func__` of the caller,
 * through the macros) and the argument, and returns -1:
 *   "F: argument 'x' is NULL"
 *   "F: argument 'x' is not a live <object type> handle"  (type 0: "object") */
/* Through the macros of the same names, each also records the place that
 * called it as the first traceback line, as PF_ERROR does. */
PF_HIDDEN int(pf_err_null_arg)(const char* fn, const char* arg);
PF_HIDDEN int(pf_err_bad_object)(const char* fn, const char* arg, const void* h, uint32_t type);
#define PF_HERE_ "  File \"" __FILE__ "\", line " PF_STRINGIFY_(__LINE__) ", in "
#define pf_err_null_arg(fn, arg) \
  ((pf_err_null_arg)((fn), (arg)), pf_error_here_(PF_HERE_, __func__))
#define pf_err_bad_object(fn, arg, h, type) \
  ((pf_err_bad_object)((fn), (arg), (h), (type)), pf_error_here_(PF_HERE_, __func__))

/* Return -1 from the entry point, with the error above, when `arg` is NULL /
 * is not a live object of `type` (0: any type). */
#define PF_CHECK_ARG(arg)                                      \
  do {                                                         \
    if ((arg) == NULL) return pf_err_null_arg(__func__, #arg); \
  } while (0)
#define PF_CHECK_OBJECT(h, type)                                                         \
  do {                                                                                   \
    if (!pf_is_object((h), (type))) return pf_err_bad_object(__func__, #h, (h), (type)); \
  } while (0)

/* ---- checking one value (runtime/function.c) ---- */
/* The check that PFFuncCall makes of every argument, PFCFuncSetReturn of a
 * result and the containers of every item: a known type code (or one in the
 * extension range), a non-NULL pointer under a pointer code, a live object
 * of the right type under a handle code, bytes whose size an object can
 * have. On failure records an error that begins "<where>: <what> <index>"
 * (e.g. "PFFuncCall: argument 2") and returns -1; records nothing on
 * success. Runs no user code. */
PF_HIDDEN int pf_check_value(const char* where, const char* what, int64_t index, int code,
                             const PFValue* v);

/* ---- allocation (runtime/alloc.c) ---- */
PF_HIDDEN void* pf_malloc(size_t n);
PF_HIDDEN void* pf_calloc(size_t n, size_t size);
PF_HIDDEN void* pf_realloc(void* p, size_t n);
PF_HIDDEN void pf_free(void* p);
PF_HIDDEN char* pf_strdup(const char* s);

/* ---- a table by a pair of words (runtime/pair_map.c) ---- */
/* What one walk has met: keyed by a pointer `a` (never NULL) and a word
 * `b`, with a word of value; open addressing, linear probing, at most half
 * full. Not thread-safe: one walk's own. Zeroed is empty. */
typedef struct {
  const void* a;
  uintptr_t b;
  uint64_t value;
} pf_pair_entry;

typedef struct {
  pf_pair_entry* slot; /* cap entries, a power of two; an empty one's a is NULL */
  size_t cap, count;
} pf_pair_map;

/* The entry of (a, b), or NULL. */
PF_HIDDEN const pf_pair_entry* pf_pair_find(const pf_pair_map* m, const void* a, uintptr_t b);
/* Adds (a, b) -> value, which must be absent; -1 when out of memory
 * (nothing added, no error recorded: the caller records its own). */
PF_HIDDEN int pf_pair_add(pf_pair_map* m, const void* a, uintptr_t b, uint64_t value);
/* Frees the slots (not what they point to) and empties the table. */
PF_HIDDEN void pf_pair_map_free(pf_pair_map* m);

/* ---- per-thread state (runtime/error.c) ---- */
typedef struct {
  char* data;
  size_t cap;
  PFByteArray bytes; /* for kPFBytes results */
} pf_ret_buffer;

typedef struct {
  int initialized;
  /* error */
  char kind[PF_ERROR_KIND_MAX];
  char* msg;      /* owned unless msg_static */
  int msg_static; /* msg points to a string literal */
  char* tb;
  size_t tb_len, tb_cap;
  char* full;        /* PFGetLastError's composition */
  char oom_msg[128]; /* pf_oom's message: recording it must not allocate */
  /* return storage, one buffer per call-nesting depth */
  pf_ret_buffer** ret;
  int ret_cap;
  /* the copies that List and Dict readers return (runtime/kept.c) */
  void* read_buf;
  size_t read_cap;
} pf_thread_state;

PF_HIDDEN pf_thread_state* pf_tls(void);

/* The per-thread fields that calls read, in an initial-exec TLS block,
 * which costs one instruction to reach even from a dlopen'ed library,
 * where the general TLS model costs a __tls_get_addr call. err_gen is
 * bumped by every error recorded on this thread, so that PFFuncCall can
 * tell a callee that failed without recording one; str_depth counts the
 * calls in progress on this thread that were given a str or bytes
 * argument: the level of return storage that a string or bytes result is
 * copied to (runtime/function.c). A call with plain arguments and a plain
 * result reads err_gen and writes neither. has_error is zero only when
 * the thread's error kind is empty (runtime/error.c keeps it in step with
 * every write of the kind), so that PFErrorGetKind answers "no error"
 * without reaching the general-dynamic TLS block. */
typedef struct {
  uint64_t err_gen;
  int32_t str_depth;
  int32_t has_error; /* nonzero when this thread's error kind may be set */
} pf_hot_state;
PF_HIDDEN extern __thread pf_hot_state pf_hot __attribute__((tls_model("initial-exec")));
/* Sets a MemoryError naming `where`; returns -1. The message takes no
 * allocation; through the macro, the place that called it is then appended
 * as the first traceback line, as PF_ERROR does (that line is lost if the
 * traceback cannot grow). */
PF_HIDDEN int(pf_oom)(const char* where);
#define pf_oom(where) ((pf_oom)(where), pf_error_here_(PF_HERE_, __func__))
/* Records an error whose kind and message are string literals, without
 * allocating, and so without a traceback line (the traceback is an
 * allocation): the one exception to PF_ERROR's rule, for PFSetAllocator,
 * whose refusal must not count as the runtime's first allocation. Returns
 * -1. */
PF_HIDDEN int pf_error_static(const char* kind, const char* msg);

/* ---- sizes ---- */
/* The largest object C can have (ptrdiff_t must hold its length). Sizes
 * that callers pass are checked against it before any arithmetic on them,
 * and pf_malloc/pf_realloc refuse larger requests without calling the
 * allocator. */
#define PF_MAX_OBJECT_SIZE ((size_t)PTRDIFF_MAX)

/* The bytes that `count` elements of `dtype` take: bits * lanes * count
 * bits, rounded up to whole bytes, for DLPack packs the elements of a
 * sub-byte dtype (int4, uint1, float4) together: 3 int4 are 2 bytes, not
 * 3. The one rule for a size from dtype bits; exact for any count, with
 * every step checked. Returns -1, writing nothing, when the size passes
 * PF_MAX_OBJECT_SIZE. */
static inline int pf_dtype_bytes(DLDataType dtype, uint64_t count, size_t* out) {
  uint64_t bits = (uint64_t)dtype.bits * dtype.lanes; /* below 2^24 */
  uint64_t whole = bits / 8, part = bits % 8;         /* bytes, bits per element */
  uint64_t n, tail;
  /* count * part / 8, rounded up, without forming count * part. */
  tail = (count / 8) * part + ((count % 8) * part + 7) / 8;
  if (__builtin_mul_overflow(count, whole, &n) || __builtin_add_overflow(n, tail, &n) ||
      n > PF_MAX_OBJECT_SIZE)
    return -1;
  *out = (size_t)n;
  return 0;
}

/* The bytes of a tensor's elements from its dtype and shape (as if
 * compact; strides are the caller's concern): pf_dtype_bytes of the
 * product of the dims. Returns -1, writing nothing, for a negative dim, a
 * NULL shape with ndim > 0, a negative ndim, or a size past
 * PF_MAX_OBJECT_SIZE. */
static inline int pf_tensor_bytes(const DLTensor* t, size_t* out) {
  if (t->ndim < 0 || (t->ndim > 0 && t->shape == NULL)) return -1;
  int empty = 0;
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0) return -1;
    empty |= t->shape[i] == 0;
  }
  uint64_t count = 1;
  for (int i = 0; i < t->ndim && !empty; ++i)
    if (__builtin_mul_overflow(count, (uint64_t)t->shape[i], &count)) return -1;
  return pf_dtype_bytes(t->dtype, empty ? 0 : count, out);
}

/* ---- tensors (runtime/dlpack.c) ---- */
/* 1 when a live tensor object is read-only (PFTensorIsReadOnly). */
PF_HIDDEN int pf_tensor_is_read_only(const void* tensor);
/* The data bytes of a CPU tensor in row-major order, *n of them: borrowed
 * from the tensor (*own NULL) when it is compact, else a copy in *own
 * (pf_free it). -1 with a ValueError naming `where` for more than
 * PF_TENSOR_MAX_NDIM dims, a negative dim, a size past PF_MAX_OBJECT_SIZE,
 * NULL data or a strided tensor of a sub-byte dtype; MemoryError.
 * (runtime/tensor.c) */
PF_HIDDEN int pf_tensor_row_major(const char* where, const DLTensor* t, const char** data,
                                  size_t* n, char** own);

/* ---- the keyed hash of container keys (runtime/container.c) ---- */
/* The per-process random seed under which Map and Dict hash their keys
 * (drawn once, kept across fork), so that no caller can pick keys that
 * collide. */
PF_HIDDEN uint64_t pf_hash_seed(void);

/* ---- values kept by List and Dict (runtime/kept.c) ---- */
/* Initializes the lock of a List or Dict: a readers-writer lock, so that
 * readers (which only copy values out and take references) run at once,
 * that prefers writers where the C library lets it say so (glibc), so that
 * a stream of readers cannot starve them. Calls never take one container's
 * lock while holding another's, or run user code under it, so the lock is
 * never taken twice by a thread. -1 with a MemoryError naming `where`. */
PF_HIDDEN int pf_kept_lock_init(pthread_rwlock_t* lock, const char* where);
/* The size of a List or Dict, `*size` read under its read lock `lock`. */
static inline int64_t pf_kept_size(pthread_rwlock_t* lock, const int64_t* size) {
  pthread_rwlock_rdlock(lock);
  int64_t n = *size;
  pthread_rwlock_unlock(lock);
  return n;
}
/* The most items a List or Dict holds: as for the immutable containers, a
 * count above it cannot describe arrays that exist, and below it no size
 * computed from it wraps. */
#define PF_KEPT_MAX_ITEMS ((int64_t)(PF_MAX_OBJECT_SIZE / 64))
/* Checks a value that a List or Dict is to keep, as PFFuncCall checks an
 * argument (a kPFDLTensorHandle refused too); -1 with the error naming
 * `where`, `what` and `i`. Runs no user code. */
PF_HIDDEN int pf_kept_check(const char* where, const char* what, int64_t i, int code,
                            const PFValue* v);
/* Makes the container's own copy of a checked value: a str or bytes in a
 * block of its own, a reference to a handle, any other value as it is.
 * -1 with a MemoryError naming `where`. Runs no user code. */
PF_HIDDEN int pf_kept_make(const char* where, int code, const PFValue* in, PFValue* out);
/* Drops what pf_kept_make made. Releasing a reference may run a finalizer:
 * never with a lock held, unless the reference cannot be the last one. */
PF_HIDDEN void pf_kept_drop(int code, PFValue* v);
/* A reader's copy of a kept value: a str or bytes copied into the calling
 * thread's read storage (which it replaces), a new reference to a handle,
 * any other value as it is. -1 with a MemoryError naming `where`. */
PF_HIDDEN int pf_kept_read(const char* where, int code, const PFValue* kept, PFValue* out);
/* "F: argument 'x' is negative (-1)" (ValueError) for n < 0, else 0. */
PF_HIDDEN int pf_kept_check_count(const char* where, const char* arg, int64_t n);
/* "F: argument 'x' is NULL with count N" (TypeError); returns -1. */
PF_HIDDEN int pf_kept_null_with_count(const char* where, const char* arg, const char* count,
                                      int64_t n);

/* ---- keeping an error across user code (runtime/error.c) ---- */
/* A failure path that must run user code before it returns (a finalizer,
 * when it releases a value) saves the thread's error first and restores it
 * after, so that whatever the user code records does not replace it:
 *
 *   pf_saved_error e;
 *   pf_error_save(&e);       // moves the error out; the thread has none
 *   pf_object_release(obj);  // may record and clear errors freely
 *   pf_error_restore(&e);    // the saved error is the thread's again
 *
 * The restore also puts back pf_hot.err_gen: errors recorded in between
 * do not count as recorded. Neither call allocates; every save must be
 * followed by one restore on the same thread. */
typedef struct {
  char kind[PF_ERROR_KIND_MAX];
  char* msg;
  int msg_static;
  char* tb;
  size_t tb_len, tb_cap;
  uint64_t err_gen;
} pf_saved_error;
PF_HIDDEN void pf_error_save(pf_saved_error* e);
PF_HIDDEN void pf_error_restore(pf_saved_error* e);
/* Drops a reference to `obj` while the thread's error stays the one
 * recorded before: the release may run a finalizer that records errors of
 * its own. */
static inline void pf_object_release_keeping_error(void* obj) {
  pf_saved_error e;
  pf_error_save(&e);
  pf_object_release((pf_object*)obj);
  pf_error_restore(&e);
}

/* ---- the snapshots a walk holds until it ends (runtime/kept.c) ---- */
/* A walk over an object graph (PFToJSON, PFStructuralEqual,
 * PFStructuralHash) reads each List and Dict through a snapshot. Releasing
 * one may drop the last reference to an item that another thread removed
 * meanwhile and run its finalizer, user code that may free what the walk
 * is still reading (the instance whose field it reads next): so the walk
 * keeps every snapshot until it has ended, and then releases them all. */
typedef struct {
  PFObjectHandle* held;
  size_t n, cap;
} pf_snapshots;
/* The snapshot of the List or Dict `h` (object type `type`), kept in `s`:
 * *items points to its values (a Dict's as key, value pairs) and *n is
 * their count. -1 with the error of PFListToArray or PFDictToArray, or a
 * MemoryError naming `where`. Runs no user code. */
PF_HIDDEN int pf_snapshot_take(pf_snapshots* s, const char* where, PFObjectHandle h, uint32_t type,
                               int64_t* n, const PFValue** items, const int32_t** codes);
/* Releases every snapshot that `s` holds (which may run finalizers),
 * keeping the thread's error as it was; `s` is then empty. */
PF_HIDDEN void pf_snapshots_release(pf_snapshots* s);

#endif
