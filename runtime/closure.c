/* PackedFuncs as real C function pointers, through libffi closures. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "typed.h"

typedef struct {
  pf_object base;
  ffi_closure* closure; /* from ffi_closure_alloc: libffi's executable memory */
  void* code;
  PFFunctionHandle func; /* a reference */
  char* sig_text;
  pf_sig sig;
  ffi_cif cif;
  ffi_type* atypes[PF_TYPED_MAX_ARGS];
  /* The first error since the last PFClosureCheckError. */
  pthread_mutex_t mu;
  atomic_int pending;
  char kind[PF_ERROR_KIND_MAX];
  char* msg; /* NULL with pending set: copying the message ran out of memory */
  char* tb;
} pf_closure;

static void closure_destroy(pf_object* o) {
  pf_closure* c = (pf_closure*)o;
  if (c->closure) ffi_closure_free(c->closure);
  if (c->func) pf_object_release(c->func);
  pthread_mutex_destroy(&c->mu);
  pf_free(c->sig_text);
  pf_free(c->msg);
  pf_free(c->tb);
  pf_free(c);
}

/* "C function pointer int32(ptr,ptr) over 'name'", for messages. */
static void describe(const pf_closure* c, char* buf, size_t n) {
  const char* name = NULL;
  PFFuncGetInfo(c->func, &name, NULL, NULL);
  if (name)
    snprintf(buf, n, "C function pointer %s over '%.200s'", c->sig_text, name);
  else
    snprintf(buf, n, "C function pointer %s", c->sig_text);
}

/* Keeps the calling thread's error as the closure's first error, unless one
 * is already kept. */
static void keep_error(pf_closure* c) {
  char where[512];
  describe(c, where, sizeof(where));
  PFErrorAppendTraceback(where);
  pthread_mutex_lock(&c->mu);
  if (!atomic_load_explicit(&c->pending, memory_order_relaxed)) {
    const char* tb = PFErrorGetTraceback();
    snprintf(c->kind, sizeof(c->kind), "%s", PFErrorGetKind());
    c->msg = pf_strdup(PFErrorGetMessage());
    c->tb = tb[0] ? pf_strdup(tb) : NULL;
    atomic_store_explicit(&c->pending, 1, memory_order_release);
  }
  pthread_mutex_unlock(&c->mu);
}

/* The C argument at `p` as a packed value. */
static int c_to_packed(const pf_closure* c, int i, const void* p, PFValue* v, int* code) {
  switch (c->sig.args[i]) {
    case pf_t_int8: v->v_int64 = *(const int8_t*)p; *code = kPFInt; return 0;
    case pf_t_int16: v->v_int64 = *(const int16_t*)p; *code = kPFInt; return 0;
    case pf_t_int32: v->v_int64 = *(const int32_t*)p; *code = kPFInt; return 0;
    case pf_t_int64: v->v_int64 = *(const int64_t*)p; *code = kPFInt; return 0;
    case pf_t_uint8: v->v_int64 = *(const uint8_t*)p; *code = kPFInt; return 0;
    case pf_t_uint16: v->v_int64 = *(const uint16_t*)p; *code = kPFInt; return 0;
    case pf_t_uint32: v->v_int64 = *(const uint32_t*)p; *code = kPFInt; return 0;
    case pf_t_uint64: {
      uint64_t u = *(const uint64_t*)p;
      if (u > (uint64_t)INT64_MAX) {
        char who[512];
        describe(c, who, sizeof(who));
        return PFErrorSetFormat(kPFErrValueError,
                                "%s: argument %d: uint64 value %llu does not fit the int64 of a "
                                "packed value", who, i, (unsigned long long)u);
      }
      v->v_int64 = (int64_t)u;
      *code = kPFInt;
      return 0;
    }
    case pf_t_float32: v->v_float64 = *(const float*)p; *code = kPFFloat; return 0;
    case pf_t_float64: v->v_float64 = *(const double*)p; *code = kPFFloat; return 0;
    case pf_t_bool: v->v_int64 = *(const uint8_t*)p != 0; *code = kPFBool; return 0;
    case pf_t_dtype: memcpy(&v->v_type, p, sizeof(DLDataType)); *code = kPFDataType; return 0;
    case pf_t_device: memcpy(&v->v_device, p, sizeof(DLDevice)); *code = kPFDevice; return 0;
    default: break;
  }
  void* h = *(void* const*)p;
  if (h == NULL) {
    v->v_handle = NULL;
    *code = kPFNull;
    return 0;
  }
  v->v_handle = h;
  switch (c->sig.args[i]) {
    case pf_t_str: *code = kPFStr; return 0;
    case pf_t_ptr: *code = kPFOpaqueHandle; return 0;
    case pf_t_tensor: *code = kPFDLTensorHandle; return 0;
    case pf_t_bytes: {
      const PFByteArray* ba = h;
      *code = kPFBytes;
      if (ba->data != NULL || ba->size == 0) return 0;
      char who[512];
      describe(c, who, sizeof(who));
      return PFErrorSetFormat(kPFErrValueError,
                              "%s: argument %d: bytes of size %zu with NULL data", who, i,
                              ba->size);
    }
    default: /* func */
      *code = kPFFuncHandle;
      if (pf_is_object(h, kPFObjectFunction)) return 0;
      char who[512];
      describe(c, who, sizeof(who));
      return PFErrorSetFormat(kPFErrTypeError,
                              "%s: argument %d: expected func, got a pointer that is not a live "
                              "function handle", who, i);
  }
}

/* Writes a converted result where libffi expects it: integral results
 * narrower than a register are widened to a whole ffi_arg. */
static void write_result(int t, const pf_cvalue* v, void* ret) {
  switch (t) {
    case pf_t_int8: *(ffi_sarg*)ret = v->i8; break;
    case pf_t_int16: *(ffi_sarg*)ret = v->i16; break;
    case pf_t_int32: *(ffi_sarg*)ret = v->i32; break;
    case pf_t_uint8: *(ffi_arg*)ret = v->u8; break;
    case pf_t_uint16: *(ffi_arg*)ret = v->u16; break;
    case pf_t_uint32: *(ffi_arg*)ret = v->u32; break;
    case pf_t_bool: *(ffi_arg*)ret = v->b; break;
    case pf_t_int64: *(int64_t*)ret = v->i64; break;
    case pf_t_uint64: *(uint64_t*)ret = v->u64; break;
    case pf_t_float32: *(float*)ret = v->f32; break;
    case pf_t_float64: *(double*)ret = v->f64; break;
    case pf_t_dtype: memcpy(ret, &v->dt, sizeof(DLDataType)); break;
    case pf_t_device: memcpy(ret, &v->dev, sizeof(DLDevice)); break;
    case pf_t_bytes: {
      PFByteArray ba = {NULL, 0};
      if (v->by) ba = *v->by;
      memcpy(ret, &ba, sizeof(ba));
      break;
    }
    default: *(void**)ret = v->p; break; /* str, ptr, tensor, func */
  }
}

static int is_handle_code(int code) {
  return code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle;
}

static void closure_entry(ffi_cif* cif, void* ret, void** cargs, void* user) {
  pf_closure* c = user;
  /* The documented zero result, in place before anything can fail. */
  if (c->sig.ret != pf_t_void) {
    size_t n = cif->rtype->size < sizeof(ffi_arg) ? sizeof(ffi_arg) : cif->rtype->size;
    memset(ret, 0, n);
  }
  if (atomic_load_explicit(&c->pending, memory_order_acquire)) return;
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
  if (PFFuncCall(c->func, args, codes, c->sig.num_args, &rv, &rc) != 0) {
    keep_error(c);
    return;
  }
  if (c->sig.ret == pf_t_void) {
    if (is_handle_code(rc)) pf_object_release(rv.v_handle);
    return;
  }
  pf_cvalue cv;
  /* Only a func result may carry a reference out; any other handle is a
   * type mismatch, and its reference is dropped here. */
  pf_conv k = (is_handle_code(rc) && rc != kPFFuncHandle) ? pf_conv_type
                                                          : pf_packed_to_c(c->sig.ret, rc, &rv, &cv, 1);
  if (k != pf_conv_ok) {
    char who[512];
    describe(c, who, sizeof(who));
    pf_conv_error(k, who, "result", c->sig.ret, rc, &rv);
    if (is_handle_code(rc)) pf_object_release(rv.v_handle);
    keep_error(c);
    return;
  }
  write_result(c->sig.ret, &cv, ret);
}

int PFFuncToCFunction(PFFunctionHandle func, const char* signature, PFObjectHandle* out_closure,
                      void** out_fn) {
  static const char* const where = "PFFuncToCFunction";
  if (!pf_is_object(func, kPFObjectFunction))
    return PFErrorSetFormat(kPFErrTypeError, "%s: argument 'func' is %s", where,
                            func ? "not a live function handle" : "NULL");
  if (signature == NULL || out_closure == NULL || out_fn == NULL)
    return PFErrorSetFormat(kPFErrTypeError, "%s: argument '%s' is NULL", where,
                            signature == NULL ? "signature" : out_closure == NULL ? "out_closure"
                                                                                  : "out_fn");
  pf_sig sig;
  if (pf_sig_parse(where, signature, &sig) != 0) return -1;
  pf_closure* c = pf_calloc(1, sizeof(*c));
  if (c == NULL) return pf_oom(where);
  c->sig = sig;
  if (pthread_mutex_init(&c->mu, NULL) != 0) {
    pf_free(c);
    return PFErrorSetFormat(kPFErrRuntimeError, "%s: could not create a mutex", where);
  }
  atomic_init(&c->pending, 0);
  pf_object_init(&c->base, kPFObjectClosure, closure_destroy);
  /* From here on closure_destroy cleans up whatever was set. */
  c->sig_text = pf_sig_format(&sig);
  if (c->sig_text == NULL) {
    closure_destroy(&c->base);
    return pf_oom(where);
  }
  if (pf_sig_prep_cif(where, &sig, &c->cif, c->atypes) != 0) {
    closure_destroy(&c->base);
    return -1;
  }
  c->closure = ffi_closure_alloc(sizeof(ffi_closure), &c->code);
  if (c->closure == NULL) {
    closure_destroy(&c->base);
    return PFErrorSetFormat(kPFErrMemoryError, "%s: libffi could not allocate a closure", where);
  }
  ffi_status st = ffi_prep_closure_loc(c->closure, &c->cif, closure_entry, c, c->code);
  if (st != FFI_OK) {
    closure_destroy(&c->base);
    return PFErrorSetFormat(kPFErrRuntimeError, "%s: libffi could not prepare the closure "
                            "(status %d)", where, (int)st);
  }
  pf_object_retain(func);
  c->func = func;
  *out_closure = c;
  *out_fn = c->code;
  return 0;
}

int PFClosureCheckError(PFObjectHandle closure) {
  if (!pf_is_object(closure, kPFObjectClosure))
    return PFErrorSetFormat(kPFErrTypeError, "PFClosureCheckError: argument 'closure' is %s",
                            closure ? "not a live closure object" : "NULL");
  pf_closure* c = closure;
  if (!atomic_load_explicit(&c->pending, memory_order_acquire)) return 0;
  pthread_mutex_lock(&c->mu);
  int pending = atomic_load_explicit(&c->pending, memory_order_relaxed);
  char kind[PF_ERROR_KIND_MAX];
  char* msg = c->msg;
  char* tb = c->tb;
  memcpy(kind, c->kind, sizeof(kind));
  c->msg = NULL;
  c->tb = NULL;
  atomic_store_explicit(&c->pending, 0, memory_order_release);
  pthread_mutex_unlock(&c->mu);
  if (!pending) return 0; /* another thread collected it first */
  if (msg == NULL) {
    pf_free(tb);
    return pf_oom("PFClosureCheckError");
  }
  PFErrorSet(kind, msg);
  if (tb) PFErrorAppendTraceback(tb);
  pf_free(msg);
  pf_free(tb);
  return -1;
}
