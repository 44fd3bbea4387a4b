/* PackedFuncs as real C function pointers, through libffi closures. */
#include <stdio.h>
#include <string.h>

#include "typed.h"

/* An error kept by a closure: one allocation, the texts after the struct. */
typedef struct {
  char kind[PF_ERROR_KIND_MAX];
  const char* msg;
  const char* tb; /* NULL: no traceback */
} kept_error;

/* Kept when copying the error ran out of memory: PFClosureCheckError then
 * reports a MemoryError. Never freed. */
static kept_error k_kept_oom;

typedef struct {
  pf_object base;
  ffi_closure* closure; /* from ffi_closure_alloc: libffi's executable memory */
  void* code;
  PFFunctionHandle func; /* a reference */
  /* func's target, through which a signature without str or bytes
   * parameters calls it: its values are valid by construction, and a
   * string of the C caller's could lie in return storage, which only
   * PFFuncCall keeps safe across nested calls. */
  PFCallTarget target;
  int use_target;
  pf_siginfo* info; /* the signature, parsed: its canonical text for messages */
  pf_sig sig;
  ffi_cif cif;
  ffi_type* atypes[PF_TYPED_MAX_ARGS];
  /* The first error since the last PFClosureCheckError, or NULL. Set by
   * compare-and-swap from NULL and taken by exchange, so there is no lock:
   * nothing for fork() to find held. */
  _Atomic(kept_error*) kept;
} pf_closure;

static void kept_free(kept_error* k) {
  if (k != NULL && k != &k_kept_oom) pf_free(k);
}

static void closure_destroy(pf_object* o) {
  pf_closure* c = (pf_closure*)o;
  if (c->closure) ffi_closure_free(c->closure);
  if (c->func) pf_object_release(c->func);
  pf_siginfo_free(c->info);
  kept_free(atomic_load_explicit(&c->kept, memory_order_acquire));
  pf_free(c);
}

int pf_closure_children(pf_walk* w, const void* closure) {
  const pf_closure* c = closure;
  if (pf_walk_spend(w, 1) != 0) return -1;
  return c->func != NULL ? pf_walk_child(w, c->func) : 0;
}

/* "C function pointer int32(ptr,ptr) over 'name'", for messages. */
static void describe(const pf_closure* c, char* buf, size_t n) {
  const char* name = NULL;
  PFFuncGetInfo(c->func, &name, NULL, NULL);
  if (name) snprintf(buf, n, "C function pointer %.200s over '%.200s'", c->info->pub.text, name);
  else snprintf(buf, n, "C function pointer %.200s", c->info->pub.text);
}

/* Keeps the calling thread's error as the closure's first error, unless one
 * is already kept. Threads that fail at once each build a copy; the first
 * to publish it wins and the others free theirs. */
static void keep_error(pf_closure* c) {
  char where[512];
  describe(c, where, sizeof(where));
  PFErrorAppendTraceback(where);
  if (atomic_load_explicit(&c->kept, memory_order_acquire) != NULL) return;
  const char* msg = PFErrorGetMessage();
  const char* tb = PFErrorGetTraceback();
  size_t ml = strlen(msg), tl = strlen(tb);
  /* Both texts are in memory already, so the sum cannot wrap. */
  kept_error* k = pf_malloc(sizeof(*k) + ml + 1 + (tl ? tl + 1 : 0));
  if (k == NULL) {
    k = &k_kept_oom;
  } else {
    char* p = (char*)(k + 1);
    snprintf(k->kind, sizeof(k->kind), "%s", PFErrorGetKind());
    memcpy(p, msg, ml + 1);
    k->msg = p;
    k->tb = NULL;
    if (tl) {
      memcpy(p + ml + 1, tb, tl + 1);
      k->tb = p + ml + 1;
    }
  }
  kept_error* expected = NULL;
  if (!atomic_compare_exchange_strong_explicit(&c->kept, &expected, k, memory_order_acq_rel,
                                               memory_order_acquire))
    kept_free(k); /* another thread kept its error first */
}

/* The C argument at `p` as a packed value. */
static int c_to_packed(const pf_closure* c, int i, const void* p, PFValue* v, int* code) {
  int t = c->sig.args[i];
  pf_cvalue cv;
  pf_cvalue_load(t, p, &cv);
  char who[512], what[128];
  if (pf_c_to_packed(t, c->sig.arg_obj[i], &cv, v, code) == 0) {
    pf_conv k;
    if (t != pf_t_tensor || !c->sig.arg_tc[i].flags || cv.t == NULL ||
        (k = pf_tc_check(&c->sig.arg_tc[i], cv.t)) == pf_conv_ok)
      return 0;
    describe(c, who, sizeof(who));
    const char* name = i < c->info->pub.num_params ? c->info->params[i].pub.name : NULL;
    if (name) snprintf(what, sizeof(what), "argument %d '%.100s'", i, name);
    else snprintf(what, sizeof(what), "argument %d", i);
    return pf_tc_error(k, who, what, &c->sig.arg_tc[i], cv.t);
  }
  describe(c, who, sizeof(who));
  snprintf(what, sizeof(what), "argument %d", i);
  return pf_c_to_packed_error(who, what, t, c->sig.arg_obj[i], &cv);
}

static void closure_entry(ffi_cif* cif, void* ret, void** cargs, void* user) {
  pf_closure* c = user;
  /* The documented zero result, in place before anything can fail. */
  if (c->sig.ret != pf_t_void) {
    size_t n = cif->rtype->size < sizeof(ffi_arg) ? sizeof(ffi_arg) : cif->rtype->size;
    memset(ret, 0, n);
  }
  if (atomic_load_explicit(&c->kept, memory_order_acquire) != NULL) return;
  PFValue args[PF_TYPED_MAX_ARGS];
  int codes[PF_TYPED_MAX_ARGS];
  for (int i = 0; i < c->sig.num_args; ++i) {
    if (c_to_packed(c, i, cargs[i], &args[i], &codes[i]) != 0) {
      keep_error(c);
      return;
    }
  }
  PFValue rv;
  int rc;
  int st = c->use_target
               ? pf_target_call(&c->target, c->func, args, codes, c->sig.num_args, &rv, &rc)
               : PFFuncCall(c->func, args, codes, c->sig.num_args, &rv, &rc);
  if (st != 0) {
    keep_error(c);
    return;
  }
  if (c->sig.ret == pf_t_void) {
    if (pf_code_is_handle(rc)) pf_object_release(rv.v_handle);
    return;
  }
  pf_cvalue cv;
  /* Only a reference type (func, array, map, shape, object) may carry a
   * reference out to the C caller; a handle under any other result type is
   * a type mismatch (a tensor object must not leave as a borrowed
   * DLTensor*), and its reference is dropped here. */
  pf_conv k = (pf_code_is_handle(rc) && !pf_ctype_is_ref(c->sig.ret))
                  ? pf_conv_type
                  : pf_packed_to_c(c->sig.ret, c->sig.ret_obj, rc, &rv, &cv, 1);
  if (k != pf_conv_ok) {
    char who[512];
    describe(c, who, sizeof(who));
    pf_conv_error_tc(k, who, "result", c->sig.ret, c->sig.ret_obj, &c->sig.ret_tc, rc, &rv);
    if (pf_code_is_handle(rc)) pf_object_release_keeping_error(rv.v_handle);
    keep_error(c);
    return;
  }
  if (c->sig.ret == pf_t_tensor && c->sig.ret_tc.flags && cv.t != NULL &&
      (k = pf_tc_check(&c->sig.ret_tc, cv.t)) != pf_conv_ok) {
    char who[512];
    describe(c, who, sizeof(who));
    pf_tc_error(k, who, "result", &c->sig.ret_tc, cv.t);
    keep_error(c);
    return;
  }
  pf_ffi_ret_store(c->sig.ret, &cv, ret);
}

int PFFuncToCFunction(PFFunctionHandle func, const char* signature, PFObjectHandle* out_closure,
                      void** out_fn) {
  static const char* const where = "PFFuncToCFunction";
  PF_CHECK_OBJECT(func, kPFObjectFunction);
  PF_CHECK_ARG(signature);
  PF_CHECK_ARG(out_closure);
  PF_CHECK_ARG(out_fn);
  pf_siginfo* info = NULL;
  if (pf_siginfo_parse(where, signature, &info) != 0) return -1;
  if (pf_sig_refuse_any(where, signature, &info->sig) != 0) {
    pf_siginfo_free(info);
    return -1;
  }
  pf_closure* c = pf_calloc(1, sizeof(*c));
  if (c == NULL) {
    pf_siginfo_free(info);
    return pf_oom(where);
  }
  c->info = info;
  c->sig = info->sig;
  atomic_init(&c->kept, NULL);
  pf_object_init(&c->base, kPFObjectClosure, closure_destroy);
  /* From here on closure_destroy cleans up whatever was set. */
  if (pf_sig_prep_cif(where, &c->sig, &c->cif, c->atypes) != 0) {
    closure_destroy(&c->base);
    return -1;
  }
  c->closure = ffi_closure_alloc(sizeof(ffi_closure), &c->code);
  if (c->closure == NULL) {
    closure_destroy(&c->base);
    return PF_ERROR(kPFErrMemoryError, "%s: libffi could not allocate a closure", where);
  }
  ffi_status st = ffi_prep_closure_loc(c->closure, &c->cif, closure_entry, c, c->code);
  if (st != FFI_OK) {
    closure_destroy(&c->base);
    return PF_ERROR(kPFErrRuntimeError, "%s: libffi could not prepare the closure (status %d)",
                    where, (int)st);
  }
  c->target.size = sizeof(c->target);
  if (PFFuncResolve(func, &c->target) != 0) { /* func was checked: cannot fail */
    closure_destroy(&c->base);
    return -1;
  }
  c->use_target = 1;
  for (int i = 0; i < c->sig.num_args; ++i)
    if (c->sig.args[i] == pf_t_str || c->sig.args[i] == pf_t_bytes) c->use_target = 0;
  pf_object_retain(func);
  c->func = func;
  *out_closure = c;
  *out_fn = c->code;
  return 0;
}

int PFClosureCheckError(PFObjectHandle closure) {
  PF_CHECK_OBJECT(closure, kPFObjectClosure);
  pf_closure* c = closure;
  if (atomic_load_explicit(&c->kept, memory_order_acquire) == NULL) return 0;
  kept_error* k = atomic_exchange_explicit(&c->kept, NULL, memory_order_acq_rel);
  if (k == NULL) return 0; /* another thread collected it first */
  if (k == &k_kept_oom) return pf_oom("PFClosureCheckError");
  /* Passes on an error raised elsewhere, with the traceback it had: no new place. */
  PFErrorSet(k->kind, k->msg);
  if (k->tb) PFErrorAppendTraceback(k->tb);
  kept_free(k);
  return -1;
}
