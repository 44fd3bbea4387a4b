/* Allocation failures in object types, in the manner of test_alloc_fault.c:
 * a counting allocator fails the Nth allocation from the moment it is
 * armed, for N = 1, 2, ... until a workload runs through without reaching
 * it. Two workloads:
 *   - using a registered type: instances, every owning kind of field,
 *     the constructor, methods bound and unbound, obj<KEY> in typed
 *     functions and closures, a field error's message. After each run
 *     everything is released: the live blocks are back where they were,
 *     every finalizer ran once, and LeakSanitizer finds nothing;
 *   - registering: a type with fields and methods (PFObjectTypeRegister),
 *     and a parent and child from a descriptor table with a function that
 *     names them. A registration that fails says MemoryError and loses
 *     nothing (LeakSanitizer); registering the same description again, with
 *     memory back, succeeds and the type works.
 * Types are never freed, so the registering walk checks leaks with
 * LeakSanitizer (the table reaches what it keeps) rather than by count. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- the fault-injecting allocator ---- */

static atomic_long g_calls, g_fail_at, g_live;
static atomic_int g_fired;

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

static void lsan_check(const char* when) {
#ifdef PF_HAVE_LSAN
  if (__lsan_do_recoverable_leak_check() != 0) fail_msg("%s: LeakSanitizer found leaks", when);
#else
  (void)when;
#endif
}

/* ---- the type ---- */

typedef struct {
  int64_t n;
  char* name;
  PFByteArray* blob;
  PFObjectHandle other;
} Item;

static atomic_int g_fins_expected, g_fins_ran;

static void item_fin(void* p) {
  (void)p;
  atomic_fetch_add(&g_fins_ran, 1);
}
static Item* item(PFObjectHandle self) {
  void* d = NULL;
  PFObjectGetData(self, &d);
  return d;
}
static void item_init(PFObjectHandle self, const char* name, int64_t n) {
  Item* it = item(self);
  size_t len = strlen(name) + 1;
  it->name = PFMemAlloc(len); /* may fail: the field stays null */
  if (it->name) memcpy(it->name, name, len);
  it->n = n;
}
static int64_t item_get(PFObjectHandle self) { return item(self)->n; }
static int64_t item_twice(int64_t x) { return 2 * x; }

static const PFFieldDesc k_fields[] = {
    PF_FIELD(Item, n, "int64", kPFFieldWritable, "n"),
    PF_FIELD(Item, name, "str", kPFFieldWritable, "name"),
    PF_FIELD(Item, blob, "bytes", kPFFieldWritable, NULL),
    PF_FIELD(Item, other, "object", kPFFieldWritable, NULL),
};
static const PFMethodDesc k_methods[] = {
    PF_METHOD_TYPED("__init__", item_init, "void(obj<fault.Item>,str,int64)", "Makes one."),
    PF_METHOD_TYPED("get", item_get, "int64(obj<fault.Item>)", "n."),
    PF_STATIC_METHOD_TYPED("twice", item_twice, "int64(int64)", NULL),
};
static const PFObjectTypeDesc k_item = {PF_OBJECT_TYPE_DESC_ABI,
                                        "fault.Item",
                                        NULL,
                                        sizeof(Item),
                                        item_fin,
                                        "An item.",
                                        k_fields,
                                        PF_COUNTOF(k_fields),
                                        k_methods,
                                        PF_COUNTOF(k_methods)};
static uint32_t g_item;

static void count_fin(void* p) {
  (void)p;
  atomic_fetch_add(&g_fins_ran, 1);
}

/* ---- the using workload ---- */

typedef struct {
  PFObjectHandle a, b, boxed, closure;
  PFFunctionHandle ctor, get, twice, unbound, typed;
} use;

/* Each step returns -1 at the first failure, with the error recorded. */
static int run_use(use* u, int round) {
  char text[200];
  snprintf(text, sizeof(text), "%0*d", 40 + round % 100, round);
  if (PFObjectAlloc(g_item, &u->a) != 0) return -1;
  atomic_fetch_add(&g_fins_expected, 1);
  if (PFObjectSetFieldByName(u->a, "name", (PFValue){.v_str = text}, kPFStr) != 0) return -1;
  PFByteArray ba = {text, strlen(text)};
  if (PFObjectSetFieldByName(u->a, "blob", (PFValue){.v_handle = &ba}, kPFBytes) != 0) return -1;
  atomic_fetch_add(&g_fins_expected, 1);
  if (PFObjectCreateBoxed(NULL, count_fin, &u->boxed) != 0) return -1;
  if (PFObjectSetFieldByName(u->a, "other", (PFValue){.v_handle = u->boxed}, kPFObjectHandle) != 0)
    return -1;
  /* A field error: its message is allocated. */
  int st = PFObjectSetFieldByName(u->a, "n", (PFValue){.v_str = text}, kPFStr);
  if (st == 0 || strcmp(PFErrorGetKind(), kPFErrTypeError) != 0) return -1;
  if (PFObjectTypeGetConstructor(g_item, &u->ctor) != 0) return -1;
  PFValue args[2] = {{.v_str = text}, {.v_int64 = round}}, rv;
  int codes[2] = {kPFStr, kPFInt}, rc;
  if (PFFuncCall(u->ctor, args, codes, 2, &rv, &rc) != 0) return -1;
  u->b = rv.v_handle;
  atomic_fetch_add(&g_fins_expected, 1);
  if (PFObjectGetMethod(u->b, "get", &u->get) != 0) return -1;
  if (PFFuncCall(u->get, NULL, NULL, 0, &rv, &rc) != 0) return -1;
  assert_int_equal(rv.v_int64, round);
  if (PFObjectGetMethod(u->b, "twice", &u->twice) != 0) return -1;
  if (PFObjectTypeGetMethod(g_item, "get", &u->unbound) != 0) return -1;
  if (PFFuncCreateFromTyped((void*)item_get, "int64(obj<fault.Item>)", &u->typed) != 0) return -1;
  PFValue self = {.v_handle = u->b};
  int oc = kPFObjectHandle;
  if (PFFuncCall(u->typed, &self, &oc, 1, &rv, &rc) != 0) return -1;
  void* fn = NULL;
  if (PFFuncToCFunction(u->unbound, "int64(obj<fault.Item>)", &u->closure, &fn) != 0) return -1;
  int64_t (*cfn)(PFObjectHandle) = NULL;
  memcpy(&cfn, &fn, sizeof(fn));
  int64_t got = cfn(u->b);
  if (PFClosureCheckError(u->closure) != 0) return -1;
  assert_int_equal(got, round);
  return 0;
}

static void use_cleanup(use* u) {
  PFObjectFree(u->closure);
  PFFuncFree(u->typed);
  PFFuncFree(u->unbound);
  PFFuncFree(u->twice);
  PFFuncFree(u->get);
  PFFuncFree(u->ctor);
  PFObjectFree(u->b);
  PFObjectFree(u->boxed);
  PFObjectFree(u->a);
  memset(u, 0, sizeof(*u));
  PFErrorClear();
}

static long clean_use(int round) {
  use u = {0};
  if (run_use(&u, round) != 0) fail_msg("clean run failed: %s", PFGetLastError());
  use_cleanup(&u);
  return atomic_load(&g_live);
}

static void test_using_types(void** state) {
  (void)state;
  /* A thread's error storage keeps its traceback buffer for the next error
   * once one has been recorded: let it exist before the baseline, as it
   * will after the first failure. */
  PF_ERROR(kPFErrRuntimeError, "the error storage's buffers exist");
  PFErrorClear();
  long baseline = clean_use(0);
  long n;
  for (n = 1;; ++n) {
    use u = {0};
    arm(n);
    int st = run_use(&u, (int)n);
    disarm();
    int fired = atomic_load(&g_fired);
    if (st != 0) {
      if (strcmp(PFErrorGetKind(), kPFErrMemoryError) != 0)
        fail_msg("N=%ld: failed with %s (expected a MemoryError)", n, PFGetLastError());
      assert_true(fired);
    }
    use_cleanup(&u);
    assert_int_equal(atomic_load(&g_fins_ran), atomic_load(&g_fins_expected));
    char when[64];
    snprintf(when, sizeof(when), "using, failing allocation %ld", n);
    lsan_check(when);
    long live = clean_use((int)n);
    if (live != baseline) fail_msg("%s: %ld blocks live, expected %ld", when, live, baseline);
    if (!fired) break;
  }
  print_message("walked %ld allocation points of using a type\n", n - 1);
  assert_true(n > 15); /* a typed signature is one allocation (it was three) */
}

/* ---- the registering workload ---- */

typedef struct {
  char key[32], child[32], init_sig[64], sig[64];
  PFMethodDesc methods[3];
  PFObjectTypeDesc desc, child_desc;
  PFFuncDescriptor d_type, d_child, d_fn;
} reg_work;

static void reg_init(reg_work* r, long n) {
  memset(r, 0, sizeof(*r));
  snprintf(r->key, sizeof(r->key), "fault.R%ld", n);
  snprintf(r->child, sizeof(r->child), "fault.C%ld", n);
  snprintf(r->init_sig, sizeof(r->init_sig), "void(obj<%s>,str,int64)", r->key);
  snprintf(r->sig, sizeof(r->sig), "int64(obj<%s>)", r->child);
  memcpy(r->methods, k_methods, sizeof(k_methods));
  r->methods[0].signature = r->init_sig;
  r->methods[1].signature = "int64(object)";
  r->desc = k_item;
  r->desc.key = r->key;
  r->desc.methods = r->methods;
  r->child_desc = (PFObjectTypeDesc){
      PF_OBJECT_TYPE_DESC_ABI, r->child, r->key, sizeof(Item) + 8, NULL, NULL, NULL, 0, NULL, 0};
  r->d_type = (PFFuncDescriptor){PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorType};
  r->d_type.object_type = &r->desc;
  r->d_child = r->d_type;
  r->d_child.object_type = &r->child_desc;
  r->d_fn = (PFFuncDescriptor){PF_FUNC_DESCRIPTOR_ABI,
                               kPFFuncDescriptorTyped,
                               "fault.get",
                               NULL,
                               (void (*)(void))item_get,
                               r->sig};
}

/* Registers both ways; uses the types; -1 at the first failure. */
static int run_reg(reg_work* r, PFModuleHandle* m) {
  uint32_t ix = 0;
  if (PFObjectTypeRegister(&r->desc, &ix) != 0) return -1;
  const PFFuncDescriptor* table[] = {&r->d_child, &r->d_fn, &r->d_type};
  if (PFModLoadFromDescriptors(table, table + 3, m) != 0) return -1;
  return 0;
}

static void check_works(reg_work* r) {
  PFModuleHandle m = NULL;
  assert_pf_ok(run_reg(r, &m));
  uint32_t child = 0;
  assert_pf_ok(PFObjectTypeFind(r->child, &child));
  PFObjectHandle o = NULL;
  assert_pf_ok(PFObjectAlloc(child, &o));
  atomic_fetch_add(&g_fins_expected, 1);
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(m, "fault.get", 0, &f));
  PFValue v = {.v_handle = o}, rv;
  int c = kPFObjectHandle, rc;
  assert_pf_ok(PFFuncCall(f, &v, &c, 1, &rv, &rc));
  PFFuncFree(f);
  PFObjectFree(o);
  PFModFree(m);
}

static void test_registering_types(void** state) {
  (void)state;
  long n;
  for (n = 1;; ++n) {
    reg_work r;
    reg_init(&r, n);
    PFModuleHandle m = NULL;
    arm(n);
    int st = run_reg(&r, &m);
    disarm();
    int fired = atomic_load(&g_fired);
    if (st != 0) {
      if (strcmp(PFErrorGetKind(), kPFErrMemoryError) != 0)
        fail_msg("N=%ld: failed with %s (expected a MemoryError)", n, PFGetLastError());
      assert_true(fired);
      assert_null(m);
    }
    PFModFree(m);
    PFErrorClear();
    char when[64];
    snprintf(when, sizeof(when), "registering, failing allocation %ld", n);
    lsan_check(when);
    check_works(&r); /* the same descriptions again, with memory back */
    assert_int_equal(atomic_load(&g_fins_ran), atomic_load(&g_fins_expected));
    if (!fired) break;
  }
  print_message("walked %ld allocation points of registering types\n", n - 1);
  assert_true(n > 20);
}

int main(void) {
  PFAllocator a = {fault_malloc, fault_realloc, fault_free, NULL};
  if (PFSetAllocator(&a) != 0 || PFObjectTypeRegister(&k_item, &g_item) != 0) {
    fprintf(stderr, "setup failed: %s\n", PFGetLastError());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_using_types),
      cmocka_unit_test(test_registering_types),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
