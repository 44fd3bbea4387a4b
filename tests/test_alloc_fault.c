/* Allocation-failure injection, in the manner of SQLite's *fault tests.
 *
 * main() installs a counting allocator through PFSetAllocator before the
 * runtime allocates anything. The test then walks N = 1, 2, ...: it arms
 * the allocator so that the Nth allocation from now fails, runs a scripted
 * workload (create, register, look up, call with strings and bytes, nested
 * calls, typed calls, closures, objects, containers, list names, errors),
 * disarms, and
 * proves for that N:
 *   - nothing crashed (ASan/UBSan would stop the process);
 *   - the first step that failed returned -1 with kind MemoryError, and a
 *     step that succeeded produced the right result;
 *   - after cleaning up what the workload created, nothing leaked: every
 *     finalizer ran exactly once, the allocator's count of live blocks is
 *     back where it was, and LeakSanitizer (when built in) finds nothing;
 *   - the same workload then runs to completion without a fault.
 * The walk ends at the first N that the workload does not reach. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h> /* only for HASH_VALUE, to pick colliding names */

#include "support/pf_test.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PF_HAVE_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define PF_HAVE_LSAN 1
#endif
#ifdef PF_HAVE_LSAN
#include <sanitizer/lsan_interface.h>
#endif

/* ---- the fault-injecting allocator ---------------------------------------- */

static atomic_long g_calls;   /* allocations since arming */
static atomic_long g_fail_at; /* 0: disarmed */
static atomic_int g_fired;    /* the armed allocation was refused */
static atomic_long g_live;    /* blocks handed out and not yet freed */

static int should_fail(void) {
  long at = atomic_load(&g_fail_at);
  if (at == 0) return 0;
  if (atomic_fetch_add(&g_calls, 1) + 1 != at) return 0;
  atomic_store(&g_fired, 1);
  return 1;
}

static void* fault_malloc(size_t n, void* ud) {
  (void)ud;
  if (should_fail()) return NULL;
  void* p = malloc(n);
  if (p) atomic_fetch_add(&g_live, 1);
  return p;
}

static void* fault_realloc(void* p, size_t n, void* ud) {
  (void)ud;
  if (should_fail()) return NULL;
  void* q = realloc(p, n);
  if (q && p == NULL) atomic_fetch_add(&g_live, 1);
  return q;
}

static void fault_free(void* p, void* ud) {
  (void)ud;
  if (p) atomic_fetch_sub(&g_live, 1);
  free(p);
}

static void arm(long n) {
  atomic_store(&g_calls, 0);
  atomic_store(&g_fired, 0);
  atomic_store(&g_fail_at, n);
}

static void disarm(void) { atomic_store(&g_fail_at, 0); }

/* ---- functions the workload uses ------------------------------------------- */

static atomic_int g_fins_expected, g_fins_ran;

static void count_fin(void* res) {
  (void)res;
  atomic_fetch_add(&g_fins_ran, 1);
}

static int p_echo(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  return n == 0 ? 0 : PFCFuncSetReturn(ret, &a[0], &c[0], 1);
}

static int p_fail(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)ret, (void)res;
  return PFErrorSetFormat(kPFErrValueError, "p_fail: failing on purpose with a message %s",
                          "long enough to need its own allocation");
}

/* Calls echo (its resource) with its arguments: a nested call whose string
 * result lives at the next return-storage depth. */
static int p_forward(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  PFValue rv;
  int rc;
  if (PFFuncCall(res, a, c, n, &rv, &rc) != 0) {
    PFErrorAppendTraceback("in p_forward");
    return -1;
  }
  return PFCFuncSetReturn(ret, &rv, &rc, 1);
}

static void release_func(void* f) { PFFuncFree(f); }

static const char* t_str_id(const char* s) { return s; }
static int64_t t_add(int64_t a, int64_t b) { return a + b; }
static int64_t t_size(PFObjectHandle a) {
  int64_t n = -1;
  return PFArrayGetSize(a, &n) == 0 ? n : -1;
}

static void payload_fin(void* p) {
  (void)p;
  atomic_fetch_add(&g_fins_ran, 1);
}

static void managed_deleter(DLManagedTensor* m) {
  (void)m;
  atomic_fetch_add(&g_fins_ran, 1);
}

/* ---- the workload ------------------------------------------------------------ */

/* The registry is a uthash table. Names that uthash's default hash puts
 * in the same one of its 32 initial buckets make it grow its bucket array
 * at the 10th of them, so the walk also fails that allocation. */
#define N_NAMES 24
static char g_names[N_NAMES][24];

static void pick_colliding_names(void) {
  int found = 0;
  for (unsigned k = 0; found < N_NAMES; ++k) {
    char buf[24];
    snprintf(buf, sizeof(buf), "fault.fn.%06u", k);
    unsigned hv = 0;
    HASH_VALUE(buf, strlen(buf), hv);
    if ((hv & 31u) == 0) memcpy(g_names[found++], buf, sizeof(buf));
  }
}

typedef struct {
  int round;  /* varies string sizes so buffers must grow each time */
  char* text; /* a string argument of `round`-dependent length */
  char* blob; /* bytes with NUL inside, same length */
  size_t len;
  PFFunctionHandle echo, fail, forward, typed_str, typed_add, typed_shared, got;
  PFObjectHandle closure, closure_fail, boxed, tensor;
  PFObjectHandle array, map, shape;
  PFFunctionHandle bound, bound_typed;
  DLManagedTensor managed;
  int64_t tensor_shape[1];
  PFPrePackCacheHandle cache;
  PFFunctionHandle cached[2];
  DLManagedTensor* exported;
  PFModuleHandle mod, dep;
  PFFunctionHandle mod_fn;
  int registered[N_NAMES];
  int failed_step; /* index of the first failing step, or -1 */
  char failed_kind[PF_ERROR_KIND_MAX];
  char failed_msg[256];
} work;

typedef int (*step_fn)(work* w);

static const char* name_of(int i) { return g_names[i]; }

static int s_create(work* w) {
  atomic_fetch_add(&g_fins_expected, 1); /* runs even when creation fails */
  if (PFFuncCreateFromCFunc(p_echo, NULL, count_fin, &w->echo) != 0) return -1;
  atomic_fetch_add(&g_fins_expected, 1);
  if (PFFuncCreateFromCFunc(p_fail, NULL, count_fin, &w->fail) != 0) return -1;
  /* forward holds echo through its resource; the finalizer drops it. */
  if (PFFuncRetain(w->echo) != 0) return -1;
  if (PFFuncCreateFromCFunc(p_forward, w->echo, release_func, &w->forward) != 0) return -1;
  return 0;
}

static int s_info(work* w) { return PFFuncSetInfo(w->echo, "echo", "str(str)", "Echoes."); }

static int s_register(work* w) {
  for (int i = 0; i < N_NAMES; ++i) {
    if (PFFuncRegisterGlobal(name_of(i), i % 2 ? w->echo : w->forward, 0) != 0) return -1;
    w->registered[i] = 1;
  }
  /* Overriding allocates a fresh entry too. */
  return PFFuncRegisterGlobal(name_of(3), w->echo, 1);
}

static int s_lookup(work* w) {
  if (PFFuncGetGlobal(name_of(7), &w->got) != 0) return -1;
  assert_ptr_equal(w->got, w->echo);
  return 0;
}

static int s_call_str(work* w) {
  PFValue a = {.v_str = w->text}, rv;
  int c = kPFStr, rc;
  if (PFFuncCall(w->got, &a, &c, 1, &rv, &rc) != 0) return -1;
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, w->text);
  return 0;
}

static int s_call_bytes(work* w) {
  PFByteArray ba = {w->blob, w->len};
  PFValue a = {.v_handle = &ba}, rv;
  int c = kPFBytes, rc;
  if (PFFuncCall(w->echo, &a, &c, 1, &rv, &rc) != 0) return -1;
  assert_int_equal(rc, kPFBytes);
  const PFByteArray* out = rv.v_handle;
  assert_int_equal(out->size, w->len);
  assert_memory_equal(out->data, w->blob, w->len);
  return 0;
}

static int s_call_nested(work* w) {
  PFValue a = {.v_str = w->text}, rv;
  int c = kPFStr, rc;
  if (PFFuncCall(w->forward, &a, &c, 1, &rv, &rc) != 0) return -1;
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, w->text);
  return 0;
}

static int s_typed(work* w) {
  if (PFFuncCreateFromTyped((void*)t_str_id, "str(str)", &w->typed_str) != 0) return -1;
  if (PFFuncCreateFromTyped((void*)t_add, "int64(int64,int64)", &w->typed_add) != 0) return -1;
  PFValue a = {.v_str = w->text}, rv;
  int c = kPFStr, rc;
  if (PFFuncCall(w->typed_str, &a, &c, 1, &rv, &rc) != 0) return -1;
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, w->text);
  PFValue two[2] = {{.v_int64 = 40}, {.v_int64 = w->round}};
  int codes[2] = {kPFInt, kPFInt};
  if (PFFuncCall(w->typed_add, two, codes, 2, &rv, &rc) != 0) return -1;
  assert_int_equal(rc, kPFInt);
  assert_int_equal(rv.v_int64, 40 + w->round);
  /* A typed-argument error: its message is allocated. */
  codes[1] = kPFFloat;
  int st = PFFuncCall(w->typed_add, two, codes, 2, &rv, &rc);
  assert_int_equal(st, -1);
  return strcmp(PFErrorGetKind(), kPFErrTypeError) == 0 ? 0 : -1;
}

/* An Array held twice by the argument: a typed call converts it once,
 * and a structural hash walks it once (each keeps what it did). */
static int s_shared(work* w) {
  PFValue one = {.v_int64 = w->round}, rv;
  int ic = kPFInt, rc, st = -1;
  PFObjectHandle inner = NULL, outer = NULL;
  if (PFArrayCreate(&one, &ic, 1, &inner) != 0) return -1;
  PFValue two[2] = {{.v_handle = inner}, {.v_handle = inner}}, a;
  int hc[2] = {kPFObjectHandle, kPFObjectHandle}, ac = kPFObjectHandle;
  uint64_t h;
  if (PFArrayCreate(two, hc, 2, &outer) == 0 &&
      PFFuncCreateFromTyped((void*)t_size, "int64(array<array<float64>>)", &w->typed_shared) == 0 &&
      PFFuncCall(w->typed_shared, (a.v_handle = outer, &a), &ac, 1, &rv, &rc) == 0 &&
      PFStructuralHash(a, ac, &h) == 0) {
    assert_int_equal(rv.v_int64, 2);
    st = 0;
  }
  PFObjectFree(outer);
  PFObjectFree(inner);
  return st;
}

static int s_closure(work* w) {
  void* fn = NULL;
  if (PFFuncToCFunction(w->echo, "str(str)", &w->closure, &fn) != 0) return -1;
  const char* (*cfn)(const char*) = NULL;
  memcpy(&cfn, &fn, sizeof(fn));
  const char* r = cfn(w->text);
  if (PFClosureCheckError(w->closure) != 0) return -1;
  assert_non_null(r);
  assert_string_equal(r, w->text);
  /* A failing call through a closure: the closure keeps a copy of the
   * error, or a MemoryError when the copy cannot be made. */
  if (PFFuncToCFunction(w->fail, "void(int64)", &w->closure_fail, &fn) != 0) return -1;
  void (*vfn)(int64_t) = NULL;
  memcpy(&vfn, &fn, sizeof(fn));
  vfn(w->round);
  assert_int_equal(PFClosureCheckError(w->closure_fail), -1);
  if (strcmp(PFErrorGetKind(), kPFErrMemoryError) == 0) return -1;
  assert_string_equal(PFErrorGetKind(), kPFErrValueError);
  assert_non_null(strstr(PFErrorGetMessage(), "failing on purpose"));
  return 0;
}

static int s_objects(work* w) {
  atomic_fetch_add(&g_fins_expected, 1);
  if (PFObjectCreateBoxed(w, payload_fin, &w->boxed) != 0) return -1;
  PFValue a = {.v_handle = w->boxed}, rv;
  int c = kPFObjectHandle, rc;
  if (PFFuncCall(w->echo, &a, &c, 1, &rv, &rc) != 0) return -1;
  assert_int_equal(rc, kPFObjectHandle);
  assert_ptr_equal(rv.v_handle, w->boxed);
  PFObjectFree(rv.v_handle);
  memset(&w->managed, 0, sizeof(w->managed));
  w->managed.deleter = managed_deleter;
  /* A CPU tensor over the blob, so that the pre-pack cache can share it. */
  w->tensor_shape[0] = (int64_t)w->len;
  w->managed.dl_tensor = (DLTensor){.data = w->blob,
                                    .device = {kDLCPU, 0},
                                    .ndim = 1,
                                    .dtype = {kDLUInt, 8, 1},
                                    .shape = w->tensor_shape};
  atomic_fetch_add(&g_fins_expected, 1);
  if (PFTensorCreateFromDLPack(&w->managed, &w->tensor) != 0) return -1;
  return PFTensorToDLPack(w->tensor, &w->exported);
}

/* Containers: each is one allocation that copies strings and bytes in and
 * retains handles; a failed create keeps nothing. */
static int s_containers(work* w) {
  int64_t dims[] = {w->round, 3};
  if (PFShapeCreate(dims, 2, &w->shape) != 0) return -1;
  PFByteArray ba = {w->blob, w->len};
  PFValue v[] = {
      {.v_str = w->text}, {.v_handle = &ba}, {.v_handle = w->echo}, {.v_handle = w->shape}};
  int c[] = {kPFStr, kPFBytes, kPFFuncHandle, kPFObjectHandle};
  if (PFArrayCreate(v, c, 4, &w->array) != 0) return -1;
  PFValue k[] = {{.v_str = w->text}, {.v_int64 = w->round}};
  int kc[] = {kPFStr, kPFInt};
  PFValue mv[] = {{.v_handle = w->array}, {.v_handle = &ba}};
  int mvc[] = {kPFObjectHandle, kPFBytes};
  if (PFMapCreate(k, kc, mv, mvc, 2, &w->map) != 0) return -1;
  /* Through a call and back: the result is a new reference. */
  PFValue a = {.v_handle = w->map}, rv;
  int ac = kPFObjectHandle, rc;
  if (PFFuncCall(w->echo, &a, &ac, 1, &rv, &rc) != 0) return -1;
  assert_ptr_equal(rv.v_handle, w->map);
  PFObjectFree(rv.v_handle);
  PFValue out;
  int code, found = 0;
  assert_pf_ok(PFMapGetItem(w->map, k[0], kPFStr, &out, &code, &found));
  assert_int_equal(found, 1);
  assert_pf_ok(PFArrayGetItem(out.v_handle, 0, &out, &code));
  assert_string_equal(out.v_str, w->text);
  return 0;
}

/* Bound constants: the copies of strings and bytes, the references, the
 * rewritten signature and a call that merges the arguments. */
static void fault_free_payload(void* p) { PFMemFree(p); }

/* Packs a bytes constant into a boxed copy allocated with the hook's
 * allocator; keeps every other constant. */
static int fault_hook(void* res, int position, PFValue value, int code,
                      const PFAllocator* allocator, PFValue* out, int* out_code, int* is_packed) {
  (void)res, (void)position;
  *is_packed = 0;
  PFByteArray whole;
  const PFByteArray* ba = value.v_handle;
  if (code == kPFObjectHandle) {
    uint32_t type = 0;
    DLTensor* t = NULL;
    if (PFObjectGetTypeIndex(value.v_handle, &type) != 0) return -1;
    if (type != kPFObjectTensor) return 0; /* keep other objects */
    if (PFTensorGetDLTensor(value.v_handle, &t) != 0) return -1;
    whole = (PFByteArray){t->data, (size_t)t->shape[0]};
    ba = &whole;
  } else if (code != kPFBytes) {
    return 0;
  }
  char* copy = allocator->malloc_fn(ba->size + 1, allocator->user_data);
  if (copy == NULL) return PFErrorSetFormat(kPFErrMemoryError, "fault_hook: no memory");
  memcpy(copy, ba->data, ba->size);
  PFObjectHandle o = NULL;
  if (PFObjectCreateBoxed(copy, fault_free_payload, &o) != 0) return -1;
  out->v_handle = o;
  *out_code = kPFObjectHandle;
  *is_packed = 1;
  return 0;
}

static int s_bind(work* w) {
  if (PFFuncSetPrePack(w->forward, "fault/boxed", fault_hook) != 0) return -1;
  PFByteArray ba = {w->blob, w->len};
  int pos[] = {0, 1, 3};
  PFValue v[] = {{.v_str = w->text}, {.v_handle = &ba}, {.v_handle = w->map}};
  int c[] = {kPFStr, kPFBytes, kPFObjectHandle};
  if (PFFuncBind(w->forward, 3, pos, v, c, NULL, &w->bound) != 0) return -1;
  PFValue a = {.v_int64 = w->round}, rv;
  int ac = kPFInt, rc;
  if (PFFuncCall(w->bound, &a, &ac, 1, &rv, &rc) != 0) return -1;
  assert_int_equal(rc, kPFStr);
  assert_string_equal(rv.v_str, w->text);
  PFValue seven = {.v_int64 = 7};
  int ic = kPFInt, p0 = 0;
  if (PFFuncBind(w->typed_add, 1, &p0, &seven, &ic, NULL, &w->bound_typed) != 0) return -1;
  if (PFFuncCall(w->bound_typed, &a, &ac, 1, &rv, &rc) != 0) return -1;
  assert_int_equal(rv.v_int64, 7 + w->round);
  /* Through a cache: a miss that packs, then a hit that shares. */
  if (PFPrePackCacheCreate(&w->cache) != 0) return -1;
  PFValue tv = {.v_handle = w->tensor};
  int tc = kPFObjectHandle;
  for (int i = 0; i < 2; ++i)
    if (PFFuncBind(w->forward, 1, &p0, &tv, &tc, w->cache, &w->cached[i]) != 0) return -1;
  int64_t hits = 0;
  assert_pf_ok(PFPrePackCacheGetStats(w->cache, NULL, NULL, &hits));
  assert_int_equal(hits, 1);
  return 0;
}

/* Modules from descriptor tables: the same building, lookup, import and
 * export code that PFModLoadFromFile uses, without a dlopen (this test
 * links the runtime statically, and a module file would bring its own). */
static const PFFuncDescriptor k_d_echo = {
    PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorPacked, "echo", p_echo, NULL, NULL, "Echoes."};
static const PFFuncDescriptor k_d_add = {
    PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorTyped, "add", NULL,
    (void (*)(void))t_add,  "int64(int64,int64)",   NULL};
static const PFFuncDescriptor* const k_mod_table[] = {&k_d_echo, &k_d_add};
static const PFFuncDescriptor* const k_dep_table[] = {&k_d_echo};

static int s_module(work* w) {
  if (PFModLoadFromDescriptors(k_mod_table, k_mod_table + 2, &w->mod) != 0) return -1;
  if (PFModLoadFromDescriptors(k_dep_table, k_dep_table + 1, &w->dep) != 0) return -1;
  if (PFModImport(w->dep, w->mod) != 0) return -1;
  if (PFModGetFunction(w->dep, "add", 1, &w->mod_fn) != 0) return -1;
  assert_non_null(w->mod_fn);
  PFValue two[2] = {{.v_int64 = 2}, {.v_int64 = 3}}, rv;
  int codes[2] = {kPFInt, kPFInt}, rc;
  if (PFFuncCall(w->mod_fn, two, codes, 2, &rv, &rc) != 0) return -1;
  assert_int_equal(rv.v_int64, 5);
  int n = 0;
  const char** names = NULL;
  if (PFModListFunctionNames(w->mod, &n, &names) != 0) return -1;
  assert_int_equal(n, 2);
  return PFModExportGlobal(w->mod, "fault.mod.", 0);
}

static int s_list(work* w) {
  (void)w;
  int n = 0;
  const char** names = NULL;
  if (PFFuncListGlobalNamesWithPrefix("fault.fn.", &n, &names) != 0) return -1;
  assert_int_equal(n, N_NAMES);
  assert_string_equal(names[0], g_names[0]);
  if (PFFuncListGlobalNames(&n, &names) != 0) return -1;
  assert_true(n >= N_NAMES);
  return 0;
}

/* An error raised inside a call comes out as itself, or as a MemoryError
 * when recording it ran out of memory. */
static int s_errors(work* w) {
  PFValue rv;
  int rc;
  int st = PFFuncCall(w->fail, NULL, NULL, 0, &rv, &rc);
  assert_int_equal(st, -1);
  if (strcmp(PFErrorGetKind(), kPFErrMemoryError) == 0) return -1;
  assert_string_equal(PFErrorGetKind(), kPFErrValueError);
  assert_non_null(strstr(PFErrorGetMessage(), "failing on purpose"));
  PFErrorAppendTraceback("a traceback line"); /* may be dropped when memory is short */
  (void)PFGetLastError();                     /* may fall back to the message alone */
  /* A registry error names the function: its message is allocated too. */
  st = PFFuncRemoveGlobal("fault.no.such.name");
  assert_int_equal(st, -1);
  if (strcmp(PFErrorGetKind(), kPFErrMemoryError) == 0) return -1;
  assert_string_equal(PFErrorGetKind(), kPFErrKeyError);
  return 0;
}

static const struct {
  const char* name;
  step_fn fn;
  int allocates; /* the step makes at least one runtime allocation */
} k_steps[] = {
    {"create", s_create, 1},           {"info", s_info, 1},
    {"register", s_register, 1},       {"lookup", s_lookup, 0},
    {"call_str", s_call_str, 1},       {"call_bytes", s_call_bytes, 1},
    {"call_nested", s_call_nested, 1}, {"typed", s_typed, 1},
    {"closure", s_closure, 1},         {"objects", s_objects, 1},
    {"containers", s_containers, 1},   {"bind", s_bind, 1},
    {"module", s_module, 1},           {"list", s_list, 1},
    {"errors", s_errors, 1},           {"shared", s_shared, 1},
};
#define N_STEPS ((int)(sizeof(k_steps) / sizeof(k_steps[0])))

static void work_init(work* w, int round) {
  memset(w, 0, sizeof(*w));
  w->round = round;
  w->len = 80 + 16 * (size_t)round;
  w->text = malloc(w->len + 1);
  w->blob = malloc(w->len);
  assert_non_null(w->text);
  assert_non_null(w->blob);
  for (size_t i = 0; i < w->len; ++i) {
    w->text[i] = (char)('a' + i % 26);
    w->blob[i] = (char)(i % 7 == 0 ? 0 : 'A' + i % 26);
  }
  w->text[w->len] = '\0';
  w->failed_step = -1;
}

/* Runs the steps in order up to the first failure, which it records. */
static void work_run(work* w) {
  for (int i = 0; i < N_STEPS; ++i) {
    if (k_steps[i].fn(w) != 0) {
      w->failed_step = i;
      snprintf(w->failed_kind, sizeof(w->failed_kind), "%s", PFErrorGetKind());
      snprintf(w->failed_msg, sizeof(w->failed_msg), "%s", PFErrorGetMessage());
      return;
    }
  }
}

/* Releases everything, whatever step the workload reached. */
static void work_cleanup(work* w) {
  for (int i = 0; i < N_NAMES; ++i) {
    if (!w->registered[i]) continue;
    assert_pf_ok(PFFuncRemoveGlobal(name_of(i)));
  }
  if (w->exported) w->exported->deleter(w->exported);
  /* A failed export rolls itself back; a successful one is undone here. */
  for (int i = 0; i < 2; ++i) {
    const char* exported = i ? "fault.mod.add" : "fault.mod.echo";
    if (PFFuncRemoveGlobal(exported) != 0) assert_string_equal(PFErrorGetKind(), kPFErrKeyError);
  }
  assert_pf_ok(PFFuncFree(w->mod_fn));
  assert_pf_ok(PFModFree(w->dep));
  assert_pf_ok(PFModFree(w->mod));
  assert_pf_ok(PFFuncFree(w->bound));
  assert_pf_ok(PFFuncFree(w->bound_typed));
  assert_pf_ok(PFFuncFree(w->cached[0]));
  assert_pf_ok(PFFuncFree(w->cached[1]));
  assert_pf_ok(PFObjectFree(w->cache));
  assert_pf_ok(PFObjectFree(w->map));
  assert_pf_ok(PFObjectFree(w->array));
  assert_pf_ok(PFObjectFree(w->shape));
  assert_pf_ok(PFObjectFree(w->tensor));
  assert_pf_ok(PFObjectFree(w->boxed));
  assert_pf_ok(PFObjectFree(w->closure));
  assert_pf_ok(PFObjectFree(w->closure_fail));
  assert_pf_ok(PFFuncFree(w->got));
  assert_pf_ok(PFFuncFree(w->typed_str));
  assert_pf_ok(PFFuncFree(w->typed_add));
  assert_pf_ok(PFFuncFree(w->typed_shared));
  assert_pf_ok(PFFuncFree(w->forward));
  assert_pf_ok(PFFuncFree(w->fail));
  assert_pf_ok(PFFuncFree(w->echo));
  free(w->text);
  free(w->blob);
  /* Leave the thread's error storage in one canonical state. */
  PFErrorClear();
}

static void assert_no_leaks(const char* when, long live_before) {
  assert_int_equal(atomic_load(&g_fins_ran), atomic_load(&g_fins_expected));
  long live = atomic_load(&g_live);
  if (live != live_before) {
    print_error("%s: %ld runtime blocks live, expected %ld\n", when, live, live_before);
    fail();
  }
#ifdef PF_HAVE_LSAN
  if (__lsan_do_recoverable_leak_check() != 0) {
    print_error("%s: LeakSanitizer found leaks (see above)\n", when);
    fail();
  }
#endif
}

/* ---- tests ----------------------------------------------------------------- */

/* One clean run, so that per-thread storage (return buffers, the name list
 * block, the traceback buffer) exists before any counting starts. */
static long warm_up(int round) {
  work w;
  work_init(&w, round);
  work_run(&w);
  if (w.failed_step >= 0)
    fail_msg("clean workload failed at step %s: %s: %s", k_steps[w.failed_step].name, w.failed_kind,
             w.failed_msg);
  work_cleanup(&w);
  return atomic_load(&g_live);
}

static void test_every_allocation_can_fail(void** state) {
  (void)state;
  long baseline = warm_up(0);
  int failures_by_step[N_STEPS] = {0};
  long n;
  for (n = 1;; ++n) {
    work w;
    work_init(&w, (int)n);
    arm(n);
    work_run(&w);
    disarm();
    int fired = atomic_load(&g_fired);
    if (w.failed_step >= 0) {
      if (strcmp(w.failed_kind, kPFErrMemoryError) != 0)
        fail_msg("N=%ld: step %s failed with %s: %s (expected a MemoryError)", n,
                 k_steps[w.failed_step].name, w.failed_kind, w.failed_msg);
      assert_true(fired);
      failures_by_step[w.failed_step]++;
    }
    work_cleanup(&w);
    char when[64];
    snprintf(when, sizeof(when), "after failing allocation %ld", n);
    /* The live count is compared after a clean run below: a failed run may
     * leave a per-thread buffer unallocated that the clean run allocates. */
#ifdef PF_HAVE_LSAN
    if (__lsan_do_recoverable_leak_check() != 0) fail_msg("%s: leaks (see above)", when);
#endif
    /* The runtime keeps working. */
    long live = warm_up((int)n);
    assert_no_leaks(when, baseline);
    baseline = live;
    if (!fired) break; /* the workload made fewer than n allocations */
  }
  /* The walk covered real work: at least one failure in each step that
   * allocates. */
  print_message("walked %ld allocation points\n", n - 1);
  for (int i = 0; i < N_STEPS; ++i) {
    if (k_steps[i].allocates && failures_by_step[i] == 0)
      fail_msg("no allocation failure ever hit step %s", k_steps[i].name);
  }
}

/* A failed create still runs the finalizer exactly once, and a registry
 * entry that could not be added leaves no trace. */
static void test_create_and_register_failure(void** state) {
  (void)state;
  int before = atomic_load(&g_fins_ran);
  PFFunctionHandle f = (PFFunctionHandle)0x1;
  atomic_fetch_add(&g_fins_expected, 1);
  arm(1);
  int st = PFFuncCreateFromCFunc(p_echo, NULL, count_fin, &f);
  disarm();
  assert_pf_error(st, kPFErrMemoryError);
  assert_int_equal(atomic_load(&g_fins_ran), before + 1);
  assert_ptr_equal(f, (PFFunctionHandle)0x1); /* outputs untouched on failure */

  atomic_int fins = 0;
  assert_pf_ok(PFFuncCreateFromCFunc(p_echo, &fins, pf_test_count_fin, &f));
  arm(1);
  st = PFFuncRegisterGlobal("fault.single", f, 0);
  disarm();
  assert_pf_error(st, kPFErrMemoryError);
  PFFunctionHandle got = (PFFunctionHandle)0x1;
  assert_pf_ok(PFFuncGetGlobal("fault.single", &got));
  assert_null(got);
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(atomic_load(&fins), 1);
}

/* PFMemAlloc reports MemoryError; PFErrorSet's copy failing leaves a
 * MemoryError instead of the requested error, never a crash. */
static void test_mem_alloc_and_error_copy(void** state) {
  (void)state;
  arm(1);
  void* p = PFMemAlloc(16);
  disarm();
  assert_null(p);
  assert_string_equal(PFErrorGetKind(), kPFErrMemoryError);
  arm(1);
  PFErrorSet(kPFErrKeyError, "this message cannot be copied");
  disarm();
  assert_string_equal(PFErrorGetKind(), kPFErrMemoryError);
  assert_true(strlen(PFErrorGetMessage()) > 0);
  arm(1);
  assert_int_equal(PFErrorSetFormat(kPFErrIndexError, "index %d", 3), -1);
  disarm();
  assert_string_equal(PFErrorGetKind(), kPFErrMemoryError);
  /* And when memory is back, errors are recorded normally again. */
  PFErrorSet(kPFErrKeyError, "fine again");
  assert_string_equal(PFErrorGetKind(), kPFErrKeyError);
  assert_string_equal(PFErrorGetMessage(), "fine again");
}

int main(void) {
  pick_colliding_names();
  /* Before anything allocates: the runtime must accept it now ... */
  PFAllocator a = {fault_malloc, fault_realloc, fault_free, NULL};
  if (PFSetAllocator(&a) != 0) {
    fprintf(stderr, "PFSetAllocator failed: %s\n", PFGetLastError());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mem_alloc_and_error_copy),
      cmocka_unit_test(test_create_and_register_failure),
      cmocka_unit_test(test_every_allocation_can_fail),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
