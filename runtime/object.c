/* Reference-counted objects: the common header, boxed values (tensors are
 * in dlpack.c). */
#include <string.h>

#include "internal.h"

void pf_object_init(pf_object* obj, uint32_t type_index, void (*destroy)(pf_object*)) {
  obj->magic = PF_OBJECT_MAGIC;
  obj->type_index = type_index;
  atomic_init(&obj->ref_count, 1);
  obj->destroy = destroy;
  obj->code_libs[0] = obj->code_libs[1] = NULL;
  obj->next_dead = NULL;
}

/* Objects whose last reference went while this thread was destroying
 * another one, oldest first. Private to the thread; initial-exec, as
 * pf_hot, because every last release reads it. */
typedef struct {
  pf_object* head;
  pf_object* tail;
  int busy;
} pf_dead_list;
static _Thread_local pf_dead_list t_dead __attribute__((tls_model("initial-exec")));

static void destroy_now(pf_object* obj) {
  pf_object* lib0 = obj->code_libs[0];
  pf_object* lib1 = obj->code_libs[1];
  obj->destroy(obj);
  /* After destroy: its finalizer may have run code in these libraries. */
  if (lib0) pf_object_release(lib0);
  if (lib1) pf_object_release(lib1);
}

void pf_object_release(pf_object* obj) {
  if (atomic_fetch_sub_explicit(&obj->ref_count, 1, memory_order_acq_rel) != 1) return;
  obj->magic = PF_OBJECT_DEAD;
  if (t_dead.busy) {
    obj->next_dead = NULL;
    if (t_dead.tail) t_dead.tail->next_dead = obj;
    else t_dead.head = obj;
    t_dead.tail = obj;
    return;
  }
  t_dead.busy = 1;
  while (obj != NULL) {
    destroy_now(obj);
    obj = t_dead.head;
    if (obj != NULL) {
      t_dead.head = obj->next_dead;
      if (t_dead.head == NULL) t_dead.tail = NULL;
    }
  }
  t_dead.busy = 0;
}

int pf_object_hold_code_slow(pf_object* obj, const void* code, const char* where) {
  pf_object* lib = NULL;
  if (pf_library_of_code(code, &lib, where) != 0) return -1;
  if (lib == NULL) return 0;
  for (int i = 0; i < 2; ++i) {
    if (obj->code_libs[i] == lib) {
      pf_object_release(lib); /* held already; not the last reference */
      return 0;
    }
    if (obj->code_libs[i] == NULL) {
      obj->code_libs[i] = lib;
      return 0;
    }
  }
  pf_object_release(lib);
  return PF_ERROR(kPFErrRuntimeError,
                  "%s: internal error: an object holds code of more than two libraries", where);
}

int PFObjectRetain(PFObjectHandle obj) {
  PF_CHECK_OBJECT(obj, 0);
  pf_object_retain(obj);
  return 0;
}

int PFObjectFree(PFObjectHandle obj) {
  if (obj == NULL) return 0;
  PF_CHECK_OBJECT(obj, 0);
  pf_object_release(obj);
  return 0;
}

int PFObjectGetTypeIndex(PFObjectHandle obj, uint32_t* out) {
  PF_CHECK_OBJECT(obj, 0);
  PF_CHECK_ARG(out);
  *out = ((pf_object*)obj)->type_index;
  return 0;
}

int PFObjectGetRefCount(PFObjectHandle obj, int64_t* out) {
  PF_CHECK_OBJECT(obj, 0);
  PF_CHECK_ARG(out);
  *out = (int64_t)atomic_load_explicit(&((pf_object*)obj)->ref_count, memory_order_relaxed);
  return 0;
}

/* ---- boxed ---- */

typedef struct {
  pf_object base;
  void* payload;
  PFObjectFinalizer fin;
} pf_boxed;

static void boxed_destroy(pf_object* o) {
  pf_boxed* b = (pf_boxed*)o;
  if (b->fin) b->fin(b->payload);
  pf_free(b);
}

int PFObjectCreateBoxed(void* payload, PFObjectFinalizer fin, PFObjectHandle* out) {
  if (out == NULL) {
    if (fin) fin(payload);
    return pf_err_null_arg(__func__, "out");
  }
  pf_boxed* b = pf_malloc(sizeof(*b));
  if (b == NULL) {
    if (fin) fin(payload);
    return pf_oom("PFObjectCreateBoxed");
  }
  pf_object_init(&b->base, kPFObjectBoxed, boxed_destroy);
  b->payload = payload;
  b->fin = fin;
  if (fin && pf_object_hold_code(&b->base, pf_code_addr((void (*)(void))fin),
                                 "PFObjectCreateBoxed") != 0) {
    pf_object_release(&b->base); /* runs fin */
    return -1;
  }
  *out = b;
  return 0;
}

int PFObjectGetBoxedPayload(PFObjectHandle obj, void** out) {
  PF_CHECK_OBJECT(obj, kPFObjectBoxed);
  PF_CHECK_ARG(out);
  *out = ((pf_boxed*)obj)->payload;
  return 0;
}
