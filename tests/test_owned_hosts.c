/* PFObjectFindOwnedHosts: which host objects and host functions one
 * reference alone keeps alive, through Arrays, Maps, Lists, Dicts, bound
 * functions, closures and the handle fields of registered types (cycles
 * among them included); what it refuses; its budget; and allocation
 * failure (main installs an allocator that can be told to fail). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "support/pf_test.h"

/* ---- an allocator that fails on request ---- */

static atomic_long g_fail_at; /* the allocation (from 1) that fails; 0: none */
static atomic_long g_calls;
static atomic_long g_live; /* blocks handed out and not yet freed */

static int should_fail(void) {
  long at = atomic_load(&g_fail_at);
  return at != 0 && atomic_fetch_add(&g_calls, 1) + 1 == at;
}
static void* t_malloc(size_t n, void* ud) {
  (void)ud;
  void* p = should_fail() ? NULL : malloc(n);
  if (p) atomic_fetch_add(&g_live, 1);
  return p;
}
static void* t_realloc(void* p, size_t n, void* ud) {
  (void)ud;
  void* q = should_fail() ? NULL : realloc(p, n);
  if (q && p == NULL) atomic_fetch_add(&g_live, 1);
  return q;
}
static void t_free(void* p, void* ud) {
  (void)ud;
  if (p) atomic_fetch_sub(&g_live, 1);
  free(p);
}

/* ---- helpers ---- */

static atomic_int g_stop;   /* tells the threads of a test to stop */
static atomic_int g_rounds; /* the list mutator's finished rounds */

static PFObjectHandle g_gate; /* made in main */
static atomic_int g_fins;     /* host finalizers run */

static void count_fin(void* payload) {
  (void)payload;
  atomic_fetch_add(&g_fins, 1);
}

static int host_fn(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)ret;
  ((PFHostCall*)res)->status = 0;
  return 0;
}

/* A host object on `gate` whose payload is `tag`; a new reference. */
static PFObjectHandle host_object(PFObjectHandle gate, intptr_t tag) {
  PFObjectHandle h = NULL;
  assert_pf_ok(PFHostObjectCreate(gate, (void*)tag, count_fin, &h));
  return h;
}

static PFFunctionHandle host_function(PFObjectHandle gate, intptr_t tag) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromHostCFunc(gate, host_fn, (void*)tag, count_fin, &f));
  return f;
}

/* An Array of n object handles (the Array takes its own references). */
static PFObjectHandle array_of(int n, PFObjectHandle* items) {
  PFValue v[8];
  int codes[8];
  assert_true(n <= 8);
  for (int i = 0; i < n; ++i) {
    v[i].v_handle = items[i];
    uint32_t ti;
    assert_pf_ok(PFObjectGetTypeIndex(items[i], &ti));
    codes[i] = ti == kPFObjectFunction ? kPFFuncHandle : kPFObjectHandle;
  }
  PFObjectHandle a = NULL;
  assert_pf_ok(PFArrayCreate(v, codes, n, &a));
  return a;
}

/* Finds root's owned hosts; returns *num_owned, writes the payloads as
 * tags into tags[] (sorted) and the reachable count into *reachable. */
static int64_t find(PFObjectHandle root, intptr_t* tags, int64_t* reachable) {
  void* out[16];
  int64_t owned = -7, r = -7;
  assert_pf_ok(PFObjectFindOwnedHosts(root, g_gate, 1 << 20, out, 16, &owned, &r));
  assert_true(owned >= 0 && owned <= 16);
  for (int64_t i = 0; i < owned; ++i) {
    intptr_t t = (intptr_t)out[i];
    int64_t j = i;
    for (; j > 0 && tags[j - 1] > t; --j) tags[j] = tags[j - 1];
    tags[j] = t;
  }
  if (reachable) *reachable = r;
  return owned;
}

/* ---- tests ---- */

static void test_a_host_object_held_only_by_an_array(void** state) {
  (void)state;
  PFObjectHandle h = host_object(g_gate, 11);
  PFObjectHandle a = array_of(1, &h);
  intptr_t tags[16];
  int64_t reachable;
  /* The caller still holds h: not owned through the array. */
  assert_int_equal(find(a, tags, &reachable), 0);
  assert_int_equal(reachable, 1);
  PFObjectFree(h);
  assert_int_equal(find(a, tags, &reachable), 1);
  assert_int_equal(tags[0], 11);
  assert_int_equal(reachable, 1);
  /* A second reference to the root: nothing is owned. */
  PFObjectRetain(a);
  assert_int_equal(find(a, tags, &reachable), 0);
  assert_int_equal(reachable, 1);
  int64_t owned = -7;
  assert_pf_ok(PFObjectFindOwnedHosts(a, g_gate, 100, NULL, 0, &owned, NULL));
  assert_int_equal(owned, 0);
  PFObjectFree(a);
  int before = atomic_load(&g_fins);
  PFObjectFree(a);
  assert_int_equal(atomic_load(&g_fins), before + 1);
}

static void test_nested_shared_and_outside_references(void** state) {
  (void)state;
  /* root = [m, inner, inner, h1] where m = {"k": [h2]}, inner = [h3]
   * (referenced twice, both from within), outside = [h4] held by us too. */
  PFObjectHandle h1 = host_object(g_gate, 1), h2 = host_object(g_gate, 2);
  PFObjectHandle h3 = host_object(g_gate, 3), h4 = host_object(g_gate, 4);
  PFObjectHandle in2 = array_of(1, &h2);
  PFValue key = {.v_str = "k"}, val = {.v_handle = in2};
  int kc = kPFStr, vc = kPFObjectHandle;
  PFObjectHandle m = NULL;
  assert_pf_ok(PFMapCreate(&key, &kc, &val, &vc, 1, &m));
  PFObjectHandle inner = array_of(1, &h3);
  PFObjectHandle outside = array_of(1, &h4);
  PFObjectHandle items[5] = {m, inner, inner, h1, outside};
  PFObjectHandle root = array_of(5, items);
  PFObjectHandle mine[] = {h1, h2, h3, h4, in2, m, inner};
  for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); ++i) PFObjectFree(mine[i]);
  intptr_t tags[16];
  int64_t reachable;
  assert_int_equal(find(root, tags, &reachable), 3);
  assert_int_equal(tags[0], 1);
  assert_int_equal(tags[1], 2);
  assert_int_equal(tags[2], 3);
  assert_int_equal(reachable, 4);
  /* Room for fewer: the count says how many there are. */
  void* out[2] = {NULL, NULL};
  int64_t owned = 0;
  assert_pf_ok(PFObjectFindOwnedHosts(root, g_gate, 1000, out, 1, &owned, NULL));
  assert_int_equal(owned, 3);
  assert_non_null(out[0]);
  assert_null(out[1]);
  PFObjectFree(outside);
  assert_int_equal(find(root, tags, &reachable), 4);
  PFObjectFree(root);
}

/* A List of n object handles (the List takes its own references). */
static PFObjectHandle list_of(int n, PFObjectHandle* items) {
  PFObjectHandle a = array_of(n, items), l = NULL;
  PFValue v[8];
  int codes[8];
  assert_pf_ok(PFArrayGetItems(a, 0, n, v, codes));
  assert_pf_ok(PFListCreate(v, codes, n, &l));
  PFObjectFree(a);
  return l;
}

static void test_lists_and_dicts_are_followed(void** state) {
  (void)state;
  /* root = List[h1, Array[h2], d] where d = Dict{hk: h3, "s": List[h4]}:
   * a Dict's object keys are followed as well as its values. */
  PFObjectHandle h1 = host_object(g_gate, 1), h2 = host_object(g_gate, 2);
  PFObjectHandle h3 = host_object(g_gate, 3), h4 = host_object(g_gate, 4);
  PFObjectHandle hk = host_object(g_gate, 5);
  PFObjectHandle arr = array_of(1, &h2);
  PFObjectHandle inner = list_of(1, &h4);
  PFValue keys[2] = {{.v_handle = hk}, {.v_str = "s"}};
  PFValue vals[2] = {{.v_handle = h3}, {.v_handle = inner}};
  int kc[2] = {kPFObjectHandle, kPFStr}, vc[2] = {kPFObjectHandle, kPFObjectHandle};
  PFObjectHandle d = NULL;
  assert_pf_ok(PFDictCreate(keys, kc, vals, vc, 2, &d));
  PFObjectHandle items[3] = {h1, arr, d};
  PFObjectHandle root = list_of(3, items);
  PFObjectHandle mine[] = {h1, h2, h3, h4, hk, arr, inner, d};
  for (size_t i = 0; i < sizeof(mine) / sizeof(mine[0]); ++i) PFObjectFree(mine[i]);
  intptr_t tags[16];
  int64_t reachable;
  assert_int_equal(find(root, tags, &reachable), 5);
  for (int i = 0; i < 5; ++i) assert_int_equal(tags[i], i + 1);
  /* Reachable counts the hosts and also the Lists and Dicts, whose items
   * may change: 5 hosts, 2 Lists, 1 Dict. */
  assert_int_equal(reachable, 8);
  /* A List with no host in it still says that it may reach one later. */
  PFObjectHandle empty = NULL;
  assert_pf_ok(PFListCreate(NULL, NULL, 0, &empty));
  assert_int_equal(find(empty, tags, &reachable), 0);
  assert_int_equal(reachable, 1);
  PFValue v = {.v_handle = host_object(g_gate, 6)};
  assert_pf_ok(PFListAppend(empty, v, kPFObjectHandle));
  PFObjectFree(v.v_handle);
  assert_int_equal(find(empty, tags, &reachable), 1);
  assert_int_equal(tags[0], 6);
  /* Changes are seen by the next walk: the item went, and with it what it
   * alone held. */
  assert_pf_ok(PFListClear(empty));
  assert_int_equal(find(empty, tags, &reachable), 0);
  PFObjectFree(empty);
  /* Another holder of the Dict: what it holds is not the root's alone. */
  PFValue got;
  int code;
  assert_pf_ok(PFListGetItem(root, 2, &got, &code));
  assert_int_equal(find(root, tags, &reachable), 2); /* h1, h2 */
  PFObjectFree(got.v_handle);
  int before = atomic_load(&g_fins);
  PFObjectFree(root);
  assert_int_equal(atomic_load(&g_fins), before + 5);
}

static void test_cycles_of_lists_and_dicts(void** state) {
  (void)state;
  /* l = List[h, l]: a List that holds itself is never freed by releasing
   * a reference to it, so nothing in it is owned by one. */
  PFObjectHandle h = host_object(g_gate, 7);
  PFObjectHandle l = list_of(1, &h);
  PFObjectFree(h);
  PFValue self = {.v_handle = l};
  assert_pf_ok(PFListAppend(l, self, kPFObjectHandle));
  intptr_t tags[16];
  int64_t reachable;
  assert_int_equal(find(l, tags, &reachable), 0);
  assert_int_equal(reachable, 2);
  int64_t owned = -7;
  void* out[4];
  assert_pf_ok(PFObjectFindOwnedHosts(l, g_gate, 1000, out, 4, &owned, NULL));
  assert_int_equal(owned, 0);
  /* root = Array[d] where d = Dict{"me": d, "h": h2}: d survives the root
   * (it holds itself), so h2 is not the root's either; root's own h3 is. */
  PFObjectHandle h2 = host_object(g_gate, 8), h3 = host_object(g_gate, 9);
  PFValue key = {.v_str = "h"}, val = {.v_handle = h2};
  int kc = kPFStr, vc = kPFObjectHandle;
  PFObjectHandle d = NULL;
  assert_pf_ok(PFDictCreate(&key, &kc, &val, &vc, 1, &d));
  PFValue me = {.v_str = "me"}, dv = {.v_handle = d};
  assert_pf_ok(PFDictSetItem(d, me, kPFStr, dv, kPFObjectHandle));
  PFObjectHandle items[2] = {d, h3};
  PFObjectHandle root = array_of(2, items);
  PFObjectFree(d);
  PFObjectFree(h2);
  PFObjectFree(h3);
  assert_int_equal(find(root, tags, &reachable), 1);
  assert_int_equal(tags[0], 9);
  assert_int_equal(reachable, 3); /* h2, h3 and the Dict */
  /* Breaking the cycle makes the Dict, and h2, the root's alone. */
  PFValue gone;
  int gone_code;
  assert_pf_ok(PFDictPop(d, me, kPFStr, &gone, &gone_code));
  PFObjectFree(gone.v_handle);
  assert_int_equal(find(root, tags, &reachable), 2);
  assert_int_equal(tags[0], 8);
  assert_int_equal(tags[1], 9);
  int before = atomic_load(&g_fins);
  PFObjectFree(root);
  assert_int_equal(atomic_load(&g_fins), before + 2);
  /* Clearing breaks l's cycle (and releases h); l goes with our reference. */
  before = atomic_load(&g_fins);
  assert_pf_ok(PFListClear(l));
  assert_int_equal(atomic_load(&g_fins), before + 1);
  assert_int_equal(find(l, tags, &reachable), 0);
  assert_int_equal(reachable, 1);
  PFObjectFree(l);
}

/* Other threads change a List inside the graph while the walk runs: each
 * answer is one of the true ones, never a crash (TSan: never a race). */
static void* mutate_list(void* p) {
  PFObjectHandle list = p;
  while (!atomic_load(&g_stop)) {
    PFValue v = {.v_handle = host_object(g_gate, 51)};
    if (PFListAppend(list, v, kPFObjectHandle) != 0) abort();
    PFObjectFree(v.v_handle);
    PFValue out;
    int code;
    if (PFListPop(list, 0, &out, &code) != 0) abort();
    PFObjectFree(out.v_handle);
    atomic_fetch_add(&g_rounds, 1);
  }
  return NULL;
}

static void test_lists_changing_under_the_walk(void** state) {
  (void)state;
  PFObjectHandle h = host_object(g_gate, 52);
  PFObjectHandle list = list_of(1, &h);
  PFObjectFree(h);
  PFObjectHandle root = array_of(1, &list);
  /* The mutating thread borrows the List through our reference (as a call
   * in progress would): the walk may or may not see each item. */
  atomic_store(&g_stop, 0);
  atomic_store(&g_rounds, 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, mutate_list, list), 0);
  PFObjectFree(list);
  for (int i = 0; i < 2000; ++i) {
    void* out[16];
    int64_t owned = -7, reachable = -7;
    assert_pf_ok(PFObjectFindOwnedHosts(root, g_gate, 1 << 20, out, 16, &owned, &reachable));
    assert_true(owned >= 0 && owned <= 2);
    assert_true(reachable >= 2 && reachable <= 3); /* the List, and 1 or 2 hosts */
    for (int64_t j = 0; j < owned; ++j) assert_true(out[j] == (void*)51 || out[j] == (void*)52);
  }
  /* At least one round (valgrind runs one thread at a time, and may not
   * have run the mutator yet), so that 52 has gone. */
  while (atomic_load(&g_rounds) == 0) sched_yield();
  atomic_store(&g_stop, 1);
  pthread_join(th, NULL);
  intptr_t tags[16];
  assert_int_equal(find(root, tags, NULL), 1);
  assert_int_equal(tags[0], 51); /* the mutator popped 52 first, then its own */
  PFObjectFree(root);
}

static int plain_fn(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)ret, (void)res;
  return 0;
}

static void test_functions_bound_functions_and_closures(void** state) {
  (void)state;
  PFObjectHandle other_gate = NULL;
  assert_pf_ok(PFHostGateCreate(&other_gate));
  PFFunctionHandle f = host_function(g_gate, 21);
  PFFunctionHandle g = host_function(other_gate, 22);
  PFObjectHandle h = host_object(g_gate, 23);
  /* A host function is its own root. */
  intptr_t tags[16];
  int64_t reachable;
  assert_int_equal(find(f, tags, &reachable), 1);
  assert_int_equal(tags[0], 21);
  assert_int_equal(find(g, tags, &reachable), 0);
  assert_int_equal(reachable, 0); /* another gate's */
  /* bound = f with constants (h, g) */
  int positions[2] = {0, 1};
  PFValue values[2] = {{.v_handle = h}, {.v_handle = g}};
  int codes[2] = {kPFObjectHandle, kPFFuncHandle};
  PFFunctionHandle bound = NULL;
  assert_pf_ok(PFFuncBind(f, 2, positions, values, codes, NULL, &bound));
  PFFuncFree(f);
  PFObjectFree(h);
  PFFuncFree(g);
  assert_int_equal(find(bound, tags, &reachable), 2);
  assert_int_equal(tags[0], 21);
  assert_int_equal(tags[1], 23);
  assert_int_equal(reachable, 2);
  /* A closure over the bound function. */
  PFObjectHandle closure = NULL;
  void* code = NULL;
  assert_pf_ok(PFFuncToCFunction(bound, "void()", &closure, &code));
  assert_int_equal(find(closure, tags, &reachable), 0); /* we still hold bound */
  PFFuncFree(bound);
  assert_int_equal(find(closure, tags, &reachable), 2);
  /* A plain function, a shape: nothing to find, ever. */
  PFFunctionHandle plain = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(plain_fn, NULL, NULL, &plain));
  assert_int_equal(find(plain, tags, &reachable), 0);
  assert_int_equal(reachable, 0);
  PFObjectHandle shape = NULL;
  int64_t dims[2] = {2, 3};
  assert_pf_ok(PFShapeCreate(dims, 2, &shape));
  assert_int_equal(find(shape, tags, &reachable), 0);
  assert_int_equal(reachable, 0);
  int before = atomic_load(&g_fins);
  PFObjectFree(closure);
  assert_int_equal(atomic_load(&g_fins), before + 3);
  PFFuncFree(plain);
  PFObjectFree(shape);
  PFObjectFree(other_gate);
}

static void test_the_budget(void** state) {
  (void)state;
  PFObjectHandle h = host_object(g_gate, 31);
  PFValue v[100];
  int codes[100];
  for (int i = 0; i < 100; ++i) {
    v[i].v_int64 = i;
    codes[i] = kPFInt;
  }
  v[99].v_handle = h;
  codes[99] = kPFObjectHandle;
  PFObjectHandle a = NULL;
  assert_pf_ok(PFArrayCreate(v, codes, 100, &a));
  PFObjectFree(h);
  void* out[1];
  int64_t owned = -7, reachable = -7;
  assert_pf_ok(PFObjectFindOwnedHosts(a, g_gate, 100, out, 1, &owned, &reachable));
  assert_int_equal(owned, 0);
  assert_int_equal(reachable, -1);
  assert_pf_ok(PFObjectFindOwnedHosts(a, g_gate, 101, out, 1, &owned, &reachable));
  assert_int_equal(owned, 1);
  assert_int_equal(reachable, 1);
  assert_ptr_equal(out[0], (void*)31);
  PFObjectFree(a);
}

static void test_bad_input(void** state) {
  (void)state;
  PFObjectHandle a = array_of(0, NULL);
  int64_t owned = 0;
  void* out[1];
  int not_an_object = 0;
  assert_pf_error(PFObjectFindOwnedHosts(NULL, g_gate, 1, out, 1, &owned, NULL), "TypeError",
                  "PFObjectFindOwnedHosts: argument 'root' is NULL");
  assert_pf_error(PFObjectFindOwnedHosts(&not_an_object, g_gate, 1, out, 1, &owned, NULL),
                  "TypeError", "PFObjectFindOwnedHosts: argument 'root' is not a live");
  assert_pf_error(PFObjectFindOwnedHosts(a, a, 1, out, 1, &owned, NULL), "TypeError",
                  "PFObjectFindOwnedHosts: argument 'gate' is not a live host gate");
  assert_pf_error(PFObjectFindOwnedHosts(a, NULL, 1, out, 1, &owned, NULL), "TypeError",
                  "argument 'gate'");
  assert_pf_error(PFObjectFindOwnedHosts(a, g_gate, 1, out, 1, NULL, NULL), "TypeError",
                  "PFObjectFindOwnedHosts: argument 'num_owned' is NULL");
  assert_pf_error(PFObjectFindOwnedHosts(a, g_gate, -1, out, 1, &owned, NULL), "ValueError",
                  "PFObjectFindOwnedHosts: argument 'max_values' is negative (-1)");
  assert_pf_error(PFObjectFindOwnedHosts(a, g_gate, 1, out, -2, &owned, NULL), "ValueError",
                  "PFObjectFindOwnedHosts: argument 'cap' is negative (-2)");
  assert_pf_error(PFObjectFindOwnedHosts(a, g_gate, 1, NULL, 3, &owned, NULL), "TypeError",
                  "PFObjectFindOwnedHosts: argument 'out' is NULL with cap 3");
  assert_pf_ok(PFObjectFindOwnedHosts(a, g_gate, 0, NULL, 0, &owned, NULL));
  assert_int_equal(owned, 0);
  PFObjectFree(a);
}

/* Another thread takes and drops references into the graph while the
 * walk runs: every answer is one of the two true ones, never a crash. */

static void* churn(void* p) {
  PFObjectHandle inner = p;
  while (!atomic_load(&g_stop)) {
    PFObjectRetain(inner);
    PFObjectFree(inner);
  }
  return NULL;
}

static void test_counts_changing_under_the_walk(void** state) {
  (void)state;
  PFObjectHandle h = host_object(g_gate, 41);
  PFObjectHandle inner = array_of(1, &h);
  PFObjectHandle root = array_of(1, &inner);
  PFObjectFree(h);
  /* The churning thread's own reference keeps `inner` alive for it. */
  atomic_store(&g_stop, 0);
  pthread_t th;
  assert_int_equal(pthread_create(&th, NULL, churn, inner), 0);
  for (int i = 0; i < 2000; ++i) {
    intptr_t tags[16];
    int64_t reachable;
    assert_int_equal(find(root, tags, &reachable), 0); /* it holds inner */
    assert_int_equal(reachable, 1);
  }
  atomic_store(&g_stop, 1);
  pthread_join(th, NULL);
  PFObjectFree(inner);
  intptr_t tags[16];
  assert_int_equal(find(root, tags, NULL), 1);
  PFObjectFree(root);
}

static void test_allocation_failure(void** state) {
  (void)state;
  /* A graph big enough to grow every array of the walk. */
  PFObjectHandle items[8];
  for (int i = 0; i < 8; ++i) {
    PFObjectHandle h[8];
    for (int j = 0; j < 8; ++j) h[j] = host_object(g_gate, 100 + 8 * i + j);
    items[i] = array_of(8, h);
    for (int j = 0; j < 8; ++j) PFObjectFree(h[j]);
  }
  /* A List at the root: the walk holds references to its items, which
   * must go on every failure too. */
  PFObjectHandle root = list_of(8, items);
  for (int i = 0; i < 8; ++i) PFObjectFree(items[i]);
  int failures = 0;
  for (long n = 1;; ++n) {
    PFErrorClear(); /* the thread's last error would be freed in the walk's count */
    long live = atomic_load(&g_live);
    atomic_store(&g_calls, 0);
    atomic_store(&g_fail_at, n);
    void* out[64];
    int64_t owned = -7, reachable = -7;
    int rc = PFObjectFindOwnedHosts(root, g_gate, 1000, out, 64, &owned, &reachable);
    int fired = atomic_load(&g_calls) >= n;
    atomic_store(&g_fail_at, 0);
    assert_int_equal(atomic_load(&g_live), live); /* nothing kept, nothing leaked */
    if (!fired) {
      assert_pf_ok(rc);
      assert_int_equal(owned, 64);
      assert_int_equal(reachable, 65); /* and the List */
      break;
    }
    assert_pf_error(rc, "MemoryError", "PFObjectFindOwnedHosts");
    ++failures;
  }
  assert_true(failures >= 3);
  PFObjectFree(root);
}

/* t.owned.Node: a registered type whose handle fields change after it is
 * made (an object and a func field), beside an int64 field. */
typedef struct {
  int64_t n;
  PFObjectHandle o;
  PFFunctionHandle f;
} Node;
static const PFFieldDesc k_node_fields[] = {
    PF_FIELD(Node, n, "int64", kPFFieldWritable, NULL),
    PF_FIELD(Node, o, "object", kPFFieldWritable, NULL),
    PF_FIELD(Node, f, "func", kPFFieldWritable, NULL),
};
static const PFObjectTypeDesc k_node = {PF_OBJECT_TYPE_DESC_ABI,
                                        "t.owned.Node",
                                        NULL,
                                        sizeof(Node),
                                        NULL,
                                        NULL,
                                        k_node_fields,
                                        3,
                                        NULL,
                                        0};
/* t.owned.Plain: no handle field. */
typedef struct {
  int64_t n;
} Plain;
static const PFFieldDesc k_plain_fields[] = {PF_FIELD(Plain, n, "int64", kPFFieldWritable, NULL)};
static const PFObjectTypeDesc k_plain = {PF_OBJECT_TYPE_DESC_ABI,
                                         "t.owned.Plain",
                                         NULL,
                                         sizeof(Plain),
                                         NULL,
                                         NULL,
                                         k_plain_fields,
                                         1,
                                         NULL,
                                         0};

static PFObjectHandle new_of(const PFObjectTypeDesc* d) {
  uint32_t ix = 0;
  assert_pf_ok(PFObjectTypeFind(d->key, &ix));
  if (ix == 0) assert_pf_ok(PFObjectTypeRegister(d, &ix));
  PFObjectHandle o = NULL;
  assert_pf_ok(PFObjectAlloc(ix, &o));
  return o;
}

/* Sets a handle field by name: the instance takes its own reference. */
static void set(PFObjectHandle obj, const char* name, PFObjectHandle value) {
  PFValue v = {.v_handle = value};
  uint32_t ti = 0;
  if (value) assert_pf_ok(PFObjectGetTypeIndex(value, &ti));
  int code = value == NULL ? kPFNull : ti == kPFObjectFunction ? kPFFuncHandle : kPFObjectHandle;
  assert_pf_ok(PFObjectSetFieldByName(obj, name, v, code));
}

static void test_fields_of_registered_types(void** state) {
  (void)state;
  intptr_t tags[16];
  int64_t reachable;
  /* An instance whose fields hold a host object and a host function. */
  PFObjectHandle node = new_of(&k_node), h = host_object(g_gate, 21);
  PFFunctionHandle f = host_function(g_gate, 22);
  set(node, "o", h);
  set(node, "f", f);
  assert_int_equal(find(node, tags, &reachable), 0); /* the caller still holds both */
  assert_int_equal(reachable, 3);                    /* two hosts, and the node's fields */
  PFObjectFree(h);
  PFFuncFree(f);
  assert_int_equal(find(node, tags, &reachable), 2);
  assert_int_equal(tags[0], 21);
  assert_int_equal(tags[1], 22);
  /* Through an Array, and through another instance. */
  PFObjectHandle arr = array_of(1, &node), outer = new_of(&k_node);
  set(outer, "o", node);
  assert_int_equal(find(arr, tags, NULL), 0); /* node is held by the caller and outer */
  PFObjectFree(node);
  assert_int_equal(find(arr, tags, NULL), 0); /* and by outer */
  PFObjectFree(outer);
  assert_int_equal(find(arr, tags, &reachable), 2);
  assert_int_equal(reachable, 3);
  /* An instance without handle fields reaches nothing, ever; with them,
   * it may come to (reachable counts it). */
  PFObjectHandle plain = new_of(&k_plain), empty = new_of(&k_node);
  assert_int_equal(find(plain, tags, &reachable), 0);
  assert_int_equal(reachable, 0);
  assert_int_equal(find(empty, tags, &reachable), 0);
  assert_int_equal(reachable, 1);
  PFObjectFree(plain);
  PFObjectFree(empty);
  int before = atomic_load(&g_fins);
  PFObjectFree(arr);
  assert_int_equal(atomic_load(&g_fins), before + 2);
}

static void test_cycles_through_fields(void** state) {
  (void)state;
  intptr_t tags[16];
  int64_t reachable;
  /* An instance that holds itself outlives the caller's reference: what it
   * holds is not owned. */
  PFObjectHandle self = new_of(&k_node), h = host_object(g_gate, 31);
  set(self, "f", NULL);
  set(self, "o", h);
  PFObjectFree(h);
  assert_int_equal(find(self, tags, &reachable), 1);
  assert_int_equal(tags[0], 31);
  PFObjectHandle arr = array_of(1, &self); /* self.o = [self]: a cycle through an Array */
  set(self, "o", arr);
  PFObjectFree(arr);
  assert_int_equal(find(self, tags, &reachable), 0);
  assert_int_equal(reachable, 1);
  int64_t owned = -7;
  assert_pf_ok(PFObjectFindOwnedHosts(self, g_gate, 100, NULL, 0, &owned, NULL));
  assert_int_equal(owned, 0);
  /* Two instances holding each other, one of them a host object too. */
  PFObjectHandle a = new_of(&k_node), b = new_of(&k_node);
  h = host_object(g_gate, 32);
  set(a, "o", b);
  set(b, "o", a);
  set(b, "f", NULL);
  PFFunctionHandle f = host_function(g_gate, 33);
  set(b, "f", f);
  PFFuncFree(f);
  PFObjectFree(b);
  assert_int_equal(find(a, tags, &reachable), 0); /* a outlives the caller's reference */
  assert_int_equal(reachable, 3);
  /* Broken, the chain is owned again. */
  set(self, "o", NULL); /* frees the Array: self is the caller's alone */
  assert_int_equal(find(self, tags, NULL), 0);
  PFValue bv;
  int bc;
  assert_pf_ok(PFObjectGetFieldByName(a, "o", &bv, &bc)); /* b, borrowed */
  set(bv.v_handle, "o", h);                               /* b lets a go */
  PFObjectFree(h);
  assert_int_equal(find(a, tags, &reachable), 2);
  assert_int_equal(tags[0], 32);
  assert_int_equal(tags[1], 33);
  int before = atomic_load(&g_fins);
  PFObjectFree(a);
  assert_int_equal(atomic_load(&g_fins), before + 2);
  PFObjectFree(self);
}

/* Cycles that pass through both a List and an instance's field: both kinds
 * of reference are followed in one walk, and counted as reference counting
 * would free. */
static void test_cycles_through_lists_and_fields(void** state) {
  (void)state;
  intptr_t tags[16];
  int64_t reachable;
  /* node.o = l = List[h]: a chain, the node's alone once the caller lets
   * the List go. */
  PFObjectHandle node = new_of(&k_node), h = host_object(g_gate, 41);
  PFObjectHandle l = list_of(1, &h);
  PFObjectFree(h);
  set(node, "o", l);
  assert_int_equal(find(node, tags, &reachable), 0); /* the caller still holds l */
  PFObjectFree(l);                                   /* l is now node's (borrowed below) */
  assert_int_equal(find(node, tags, &reachable), 1);
  assert_int_equal(tags[0], 41);
  assert_int_equal(reachable, 3); /* h, the List, the node's fields */
  /* l = List[h, node]: node and l hold each other. Reached from the
   * caller's outer = List[node], nothing is owned: the cycle outlives
   * outer. */
  PFValue nv = {.v_handle = node};
  assert_pf_ok(PFListAppend(l, nv, kPFObjectHandle));
  PFObjectHandle outer = list_of(1, &node);
  PFObjectFree(node);
  assert_int_equal(find(outer, tags, &reachable), 0);
  assert_int_equal(reachable, 4);              /* h, two Lists, the node */
  assert_int_equal(find(node, tags, NULL), 0); /* node: outer's and l's */
  /* The List lets node go: the chain is outer's alone again. */
  PFValue gone;
  int gone_code;
  assert_pf_ok(PFListPop(l, 1, &gone, &gone_code));
  assert_ptr_equal(gone.v_handle, node);
  PFObjectFree(gone.v_handle);
  assert_int_equal(find(outer, tags, &reachable), 1);
  assert_int_equal(tags[0], 41);
  assert_int_equal(reachable, 4);
  int before = atomic_load(&g_fins);
  PFObjectFree(outer);
  assert_int_equal(atomic_load(&g_fins), before + 1);
}

int main(void) {
  static const PFAllocator alloc = {t_malloc, t_realloc, t_free, NULL};
  if (PFSetAllocator(&alloc) != 0) return 1;
  if (PFHostGateCreate(&g_gate) != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_a_host_object_held_only_by_an_array),
      cmocka_unit_test(test_nested_shared_and_outside_references),
      cmocka_unit_test(test_functions_bound_functions_and_closures),
      cmocka_unit_test(test_lists_and_dicts_are_followed),
      cmocka_unit_test(test_cycles_of_lists_and_dicts),
      cmocka_unit_test(test_lists_changing_under_the_walk),
      cmocka_unit_test(test_the_budget),
      cmocka_unit_test(test_bad_input),
      cmocka_unit_test(test_counts_changing_under_the_walk),
      cmocka_unit_test(test_allocation_failure),
      cmocka_unit_test(test_fields_of_registered_types),
      cmocka_unit_test(test_cycles_through_fields),
      cmocka_unit_test(test_cycles_through_lists_and_fields),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  PFObjectFree(g_gate);
  return rc;
}
