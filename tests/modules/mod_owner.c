/* Test fixture: functions that create objects at run time whose code lives
 * in this module (a tensor's deleter, a function and its finalizer, a
 * typed function, a boxed object's finalizer) and return them, so that a
 * test can drop the module and then use and release those objects.
 *
 * Each maker takes an optional last argument: an opaque handle to an
 * atomic_int that the object's finalizer or deleter increments, so the
 * host can see that it ran (and ran in mapped code). */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "packedfunc/c_api.h"

static atomic_int* counter_arg(PFValue* args, int* codes, int n, int i) {
  return n > i && codes[i] == kPFOpaqueHandle ? args[i].v_handle : NULL;
}

static int return_object(PFRetValueHandle ret, void* obj, int code) {
  PFValue v = {.v_handle = obj};
  int rc = PFCFuncSetReturn(ret, &v, &code, 1);
  PFObjectFree(obj); /* the return slot holds its own reference */
  return rc;
}

/* ---- a tensor whose deleter is here ---- */

typedef struct {
  DLManagedTensor managed;
  int64_t shape[1];
  atomic_int* deleted;
  double data[];
} owned_tensor;

static void owned_tensor_delete(DLManagedTensor* m) {
  owned_tensor* t = m->manager_ctx;
  if (t->deleted) atomic_fetch_add(t->deleted, 1);
  free(t);
}

/* owner.tensor(n[, counter]): a float64 tensor [0, 1, ..., n-1]. */
static int make_tensor(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n < 1 || codes[0] != kPFInt || args[0].v_int64 < 0 || args[0].v_int64 > 1 << 20)
    return PFErrorSetFormat(kPFErrTypeError, "owner.tensor: expected a size in [0, 2^20]");
  int64_t len = args[0].v_int64;
  owned_tensor* t = malloc(sizeof(*t) + sizeof(double) * (size_t)(len ? len : 1));
  if (t == NULL) return PFErrorSetFormat(kPFErrMemoryError, "owner.tensor: out of memory");
  for (int64_t i = 0; i < len; ++i) t->data[i] = (double)i;
  t->shape[0] = len;
  t->deleted = counter_arg(args, codes, n, 1);
  t->managed.dl_tensor = (DLTensor){.data = t->data,
                                    .device = {kDLCPU, 0},
                                    .ndim = 1,
                                    .dtype = {kDLFloat, 64, 1},
                                    .shape = t->shape};
  t->managed.manager_ctx = t;
  t->managed.deleter = owned_tensor_delete;
  PFObjectHandle obj = NULL;
  if (PFTensorCreateFromDLPack(&t->managed, &obj) != 0) return -1; /* deleter ran */
  return return_object(ret, obj, kPFObjectHandle);
}
PF_REGISTER_PACKED("owner.tensor", make_tensor, "A tensor whose deleter is in this module.");

/* ---- a packed function, and its finalizer, made here ---- */

static int answer(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  PFValue v = {.v_int64 = 42};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void count_fin(void* res) {
  if (res) atomic_fetch_add((atomic_int*)res, 1);
}

/* owner.function([counter]): a function that returns 42. */
static int make_function(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(answer, counter_arg(args, codes, n, 0), count_fin, &f) != 0) return -1;
  return return_object(ret, f, kPFFuncHandle);
}
PF_REGISTER_PACKED("owner.function", make_function, "A function made at run time.");

/* ---- a typed function made here ---- */

static int64_t triple(int64_t x) { return 3 * x; }

/* owner.typed(): a typed function int64(int64) that triples. */
static int make_typed(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromTyped((void*)(intptr_t)triple, "int64(int64)", &f) != 0) return -1;
  return return_object(ret, f, kPFFuncHandle);
}
PF_REGISTER_PACKED("owner.typed", make_typed, "A typed function made at run time.");

/* ---- a boxed object whose finalizer is here ---- */

typedef struct {
  int64_t value;
  atomic_int* freed;
} boxed_payload;

static void boxed_fin(void* p) {
  boxed_payload* b = p;
  if (b->freed) atomic_fetch_add(b->freed, 1);
  free(b);
}

/* owner.boxed(value[, counter]): a boxed object holding `value`. */
static int make_boxed(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n < 1 || codes[0] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "owner.boxed: expected an int");
  boxed_payload* b = malloc(sizeof(*b));
  if (b == NULL) return PFErrorSetFormat(kPFErrMemoryError, "owner.boxed: out of memory");
  b->value = args[0].v_int64;
  b->freed = counter_arg(args, codes, n, 1);
  PFObjectHandle obj = NULL;
  if (PFObjectCreateBoxed(b, boxed_fin, &obj) != 0) return -1; /* boxed_fin ran */
  return return_object(ret, obj, kPFObjectHandle);
}
PF_REGISTER_PACKED("owner.boxed", make_boxed, "A boxed object whose finalizer is here.");
