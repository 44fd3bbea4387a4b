/* Partial application: PFFuncBind. A bound function is an ordinary packed
 * C function whose resource holds the inner function and owned copies of
 * the bound values; each call merges them with the caller's arguments. The
 * rules are in c_api.h. */
#include <limits.h>
#include <string.h>

#include "typed.h"
#include "prepack_cache.h"

typedef struct {
  PFFunctionHandle inner;
  /* inner's target: the merged arguments are the bound call's (checked by
   * PFFuncCall, or owed by its target's caller) and the constants (checked
   * when bound), so the inner call needs no checks of its own. */
  PFCallTarget target;
  int num_bound;
  int* positions; /* strictly increasing */
  PFValue* values;
  int* codes;
  /* Per constant, the cache entry its packed value is borrowed from, or
   * NULL when the binding owns the value itself; all NULL without a
   * cache. */
  pf_pp_entry** entries;
  PFPrePackCacheHandle cache; /* a reference, or NULL */
} pf_binding;

/* Calls made with this many arguments or fewer merge them on the stack; a
 * longer call allocates its own buffer, so no state is shared between the
 * threads that call one bound function. */
#define BIND_STACK_ARGS 16

static void release_value(int code, PFValue* v) {
  if (code == kPFStr) {
    pf_free((char*)v->v_str);
  } else if (code == kPFBytes) {
    pf_free(v->v_handle); /* the PFByteArray and its data are one block */
  } else if (pf_code_is_handle(code)) {
    PFObjectFree(v->v_handle);
  }
}

/* Runs without any lock of ours: releasing the values and the inner
 * function may run their finalizers. */
static void binding_free(pf_binding* b, int num_kept) {
  if (b == NULL) return;
  for (int i = 0; i < num_kept; ++i) {
    if (b->entries != NULL && b->entries[i] != NULL) pf_pp_entry_release(b->cache, b->entries[i]);
    else release_value(b->codes[i], &b->values[i]);
  }
  if (b->inner != NULL) PFFuncFree(b->inner);
  if (b->cache != NULL) PFObjectFree(b->cache);
  pf_free(b->entries);
  pf_free(b->positions);
  pf_free(b->values);
  pf_free(b->codes);
  pf_free(b);
}

static void binding_fin(void* resource) {
  pf_binding* b = resource;
  binding_free(b, b->num_bound);
}

/* Copies one checked value so that the binding owns it. */
static int keep_value(int code, const PFValue* in, PFValue* out) {
  if (code == kPFStr) {
    char* s = pf_strdup(in->v_str);
    if (s == NULL) return pf_oom("PFFuncBind");
    out->v_str = s;
  } else if (code == kPFBytes) {
    const PFByteArray* src = in->v_handle;
    /* pf_check_value bounded the size by PF_MAX_OBJECT_SIZE, so this sum
     * cannot wrap. */
    PFByteArray* dst = pf_malloc(sizeof(PFByteArray) + src->size);
    if (dst == NULL) return pf_oom("PFFuncBind");
    char* data = (char*)(dst + 1);
    if (src->size) memcpy(data, src->data, src->size);
    dst->data = data;
    dst->size = src->size;
    out->v_handle = dst;
  } else {
    *out = *in;
    if (pf_code_is_handle(code)) pf_object_retain(in->v_handle);
  }
  return 0;
}

static int bound_call(PFValue* args, int* codes, int num_args, PFRetValueHandle ret,
                      void* resource) {
  pf_binding* b = resource;
  /* Both errors are about the call's arguments: the caller's, with no place
   * (the rule at PF_ERROR in base.h). */
  if (num_args > INT_MAX - b->num_bound)
    return PFErrorSetFormat(kPFErrValueError, "bound function: %d arguments are too many",
                            num_args);
  int total = num_args + b->num_bound;
  if (b->num_bound > 0 && b->positions[b->num_bound - 1] >= total)
    return PFErrorSetFormat(kPFErrTypeError,
                            "bound function: a constant is bound at position %d, so the call "
                            "needs at least %d arguments, but it was given %d",
                            b->positions[b->num_bound - 1],
                            b->positions[b->num_bound - 1] + 1 - b->num_bound, num_args);
  PFValue stack_values[BIND_STACK_ARGS];
  int stack_codes[BIND_STACK_ARGS];
  PFValue* all_values = stack_values;
  int* all_codes = stack_codes;
  if (total > BIND_STACK_ARGS) {
    all_values = pf_malloc(sizeof(PFValue) * (size_t)total);
    all_codes = pf_malloc(sizeof(int) * (size_t)total);
    if (all_values == NULL || all_codes == NULL) {
      pf_free(all_values);
      pf_free(all_codes);
      return pf_oom("bound function");
    }
  }
  for (int i = 0, j = 0, k = 0; i < total; ++i) {
    if (j < b->num_bound && b->positions[j] == i) {
      all_values[i] = b->values[j];
      all_codes[i] = b->codes[j];
      ++j;
    } else {
      all_values[i] = args[k];
      all_codes[i] = codes[k];
      ++k;
    }
  }
  PFValue rv;
  int rc_code = kPFNull;
  int rc = pf_target_call(&b->target, b->inner, all_values, all_codes, total, &rv, &rc_code);
  if (all_values != stack_values) {
    pf_free(all_values);
    pf_free(all_codes);
  }
  if (rc != 0) return -1;
  if (rc_code == kPFNull) return 0;
  rc = PFCFuncSetReturn(ret, &rv, &rc_code, 1);
  /* The return slot took its own reference; ours goes, keeping the error
   * (if any) of the set call across the finalizer this may run. */
  if (pf_code_is_handle(rc_code)) pf_object_release_keeping_error(rv.v_handle);
  return rc;
}

int pf_bound_children(pf_walk* w, const pf_function* f) {
  if (f->func != bound_call) return 0;
  const pf_binding* b = f->resource;
  if (pf_walk_spend(w, b->num_bound + 1) != 0 || pf_walk_child(w, b->inner) != 0) return -1;
  /* A constant borrowed from a cache entry is the cache's reference, not
   * the binding's: the cache is not followed. */
  for (int i = 0; i < b->num_bound; ++i)
    if ((b->entries == NULL || b->entries[i] == NULL) && pf_code_is_handle(b->codes[i]) &&
        pf_walk_child(w, b->values[i].v_handle) != 0)
      return -1;
  return 0;
}

/* The allocator that hooks get: the runtime's own, through the same
 * checks as every runtime allocation. */
static void* hook_malloc(size_t n, void* ud) {
  (void)ud;
  return pf_malloc(n);
}
static void* hook_realloc(void* p, size_t n, void* ud) {
  (void)ud;
  return pf_realloc(p, n);
}
static void hook_free(void* p, void* ud) {
  (void)ud;
  pf_free(p);
}
static const PFAllocator k_hook_allocator = {hook_malloc, hook_realloc, hook_free, NULL};

/* Runs a function's pre-pack hook on one constant. On success writes
 * *packed and, when 1, the packed value (owned by the caller from now on)
 * to *out and *out_code. No lock is held: the hook is user code. */
static int run_prepack(const pf_prepack* pp, PFFunctionHandle func, int position,
                       const PFValue* value, int code, PFValue* out, int* out_code, int* packed) {
  static const char* const where = "PFFuncBind";
  PFValue result;
  memset(&result, 0, sizeof(result));
  int result_code = kPFNull, is_packed = 0;
  uint64_t gen = pf_hot.err_gen;
  if (pp->fn(((pf_function*)func)->resource, position, *value, code, &k_hook_allocator, &result,
             &result_code, &is_packed) != 0) {
    if (pf_hot.err_gen == gen)
      return PF_ERROR(kPFErrRuntimeError,
                      "%s: the pre-pack hook of format '%s' failed on the constant at "
                      "position %d without recording an error",
                      where, pp->format, position);
    return -1;
  }
  if (!is_packed) {
    *packed = 0;
    return 0;
  }
  if (!pf_code_is_plain(result_code) && !pf_code_is_handle(result_code))
    return PF_ERROR(kPFErrTypeError,
                    "%s: the pre-pack hook of format '%s' packed the constant at "
                    "position %d into a value of type code %s (%d); a packed value is "
                    "a plain value or a function, module or object handle",
                    where, pp->format, position,
                    PFTypeCodeName(result_code) ? PFTypeCodeName(result_code) : "unknown",
                    result_code);
  if (pf_check_value(where, "packed value for position", position, result_code, &result) != 0) {
    /* The hook handed over a reference, of the wrong kind: ours to drop. */
    if (pf_code_is_handle(result_code) && pf_is_object(result.v_handle, 0))
      pf_object_release_keeping_error(result.v_handle);
    return -1;
  }
  *out = result;
  *out_code = result_code;
  *packed = 1;
  return 0;
}

int PFFuncSetPrePack(PFFunctionHandle func, const char* pack_format, PFPrePackFunc prepack) {
  static const char* const where = "PFFuncSetPrePack";
  PF_CHECK_OBJECT(func, kPFObjectFunction);
  PF_CHECK_ARG(pack_format);
  PF_CHECK_ARG(prepack);
  if (pack_format[0] == '\0')
    return PF_ERROR(kPFErrValueError, "%s: argument 'pack_format' is empty", where);
  pf_function* f = func;
  if (atomic_load(&f->prepack) != NULL)
    return PF_ERROR(kPFErrValueError, "%s: the function already has a pre-pack hook", where);
  pf_prepack* pp = pf_malloc(sizeof(*pp));
  char* format = pf_strdup(pack_format);
  if (pp == NULL || format == NULL) {
    pf_free(pp);
    pf_free(format);
    return pf_oom(where);
  }
  pp->format = format;
  pp->fn = prepack;
  pf_prepack* expected = NULL;
  if (!atomic_compare_exchange_strong(&f->prepack, &expected, pp)) {
    pf_free(format);
    pf_free(pp);
    return PF_ERROR(kPFErrValueError, "%s: the function already has a pre-pack hook", where);
  }
  return 0;
}

int PFFuncBind(PFFunctionHandle func, int num_bound, const int* positions, PFValue* values,
               int* type_codes, PFPrePackCacheHandle cache, PFFunctionHandle* out) {
  static const char* const where = "PFFuncBind";
  PF_CHECK_ARG(out);
  PF_CHECK_OBJECT(func, kPFObjectFunction);
  if (num_bound < 0)
    return PF_ERROR(kPFErrValueError, "%s: argument 'num_bound' is negative (%d)", where,
                    num_bound);
  if (num_bound > 0 && positions == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'positions' is NULL with num_bound %d", where,
                    num_bound);
  if (num_bound > 0 && values == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'values' is NULL with num_bound %d", where,
                    num_bound);
  if (num_bound > 0 && type_codes == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'type_codes' is NULL with num_bound %d", where,
                    num_bound);
  if (cache != NULL) PF_CHECK_OBJECT(cache, kPFObjectPrePackCache);
  const pf_siginfo* info =
      atomic_load_explicit(&((pf_function*)func)->siginfo, memory_order_acquire);
  const char* sig = info ? info->pub.text : NULL;
  int arity = info ? info->pub.num_params : -1;
  for (int i = 0; i < num_bound; ++i) {
    if (positions[i] < 0)
      return PF_ERROR(kPFErrValueError, "%s: argument 'positions[%d]' is negative (%d)", where, i,
                      positions[i]);
    if (i > 0 && positions[i] <= positions[i - 1])
      return PF_ERROR(kPFErrValueError,
                      "%s: argument 'positions[%d]' is %d, not greater than "
                      "positions[%d] (%d): positions must be strictly increasing",
                      where, i, positions[i], i - 1, positions[i - 1]);
    if (arity >= 0 && positions[i] >= arity)
      return PF_ERROR(kPFErrValueError,
                      "%s: argument 'positions[%d]' is %d, out of range for signature "
                      "%s with %d parameters",
                      where, i, positions[i], sig, arity);
  }
  for (int i = 0; i < num_bound; ++i) {
    if (pf_check_value(where, "bound value", i, type_codes[i], &values[i]) != 0) return -1;
    if (type_codes[i] == kPFDLTensorHandle)
      return PF_ERROR(kPFErrTypeError,
                      "%s: bound value %d has type code tensor, a DLTensor* that is only "
                      "borrowed for a call, which a bound function cannot keep (bind a "
                      "tensor object instead)",
                      where, i);
  }
  pf_binding* b = pf_calloc(1, sizeof(*b));
  if (b == NULL) return pf_oom(where);
  int kept = 0;
  if (num_bound > 0) {
    b->positions = pf_malloc(sizeof(int) * (size_t)num_bound);
    b->values = pf_malloc(sizeof(PFValue) * (size_t)num_bound);
    b->codes = pf_malloc(sizeof(int) * (size_t)num_bound);
    if (b->positions == NULL || b->values == NULL || b->codes == NULL) goto oom;
    memcpy(b->positions, positions, sizeof(int) * (size_t)num_bound);
    pf_prepack* pp = atomic_load_explicit(&((pf_function*)func)->prepack, memory_order_acquire);
    if (pp != NULL && cache != NULL) {
      b->entries = pf_calloc((size_t)num_bound, sizeof(pf_pp_entry*));
      if (b->entries == NULL) goto oom;
      PFObjectRetain(cache);
      b->cache = cache;
    }
    for (; kept < num_bound; ++kept) {
      int packed = 0, rc = 1;
      if (b->cache != NULL) {
        rc = pf_pp_cache_pack(cache, pp, func, positions[kept], &values[kept], type_codes[kept],
                              run_prepack, &b->values[kept], &b->codes[kept], &packed,
                              &b->entries[kept]);
        if (rc < 0) goto fail;
      }
      if (rc == 1 && pp != NULL &&
          run_prepack(pp, func, positions[kept], &values[kept], type_codes[kept], &b->values[kept],
                      &b->codes[kept], &packed) != 0)
        goto fail;
      if (packed) continue;
      b->codes[kept] = type_codes[kept];
      if (keep_value(type_codes[kept], &values[kept], &b->values[kept]) != 0) goto fail;
    }
  }
  b->num_bound = num_bound;
  char* new_sig = NULL;
  if (info != NULL) {
    uint32_t drop = 0;
    for (int i = 0; i < num_bound; ++i) drop |= 1u << positions[i];
    if ((new_sig = pf_siginfo_text_without(info, drop)) == NULL) goto oom;
  }
  b->target.size = sizeof(b->target);
  if (PFFuncResolve(func, &b->target) != 0) goto fail; /* func was checked: cannot fail */
  PFFuncRetain(func);
  b->inner = func;
  PFFunctionHandle f = NULL;
  /* On failure the create call has already run binding_fin. */
  if (PFFuncCreateFromCFunc(bound_call, b, binding_fin, &f) != 0) {
    pf_free(new_sig);
    return -1;
  }
  /* A bound call is a call of func: the hosts' hints (kPFFuncNonBlocking)
   * hold for it as they do for func. */
  atomic_store_explicit(&((pf_function*)f)->flags,
                        atomic_load_explicit(&((pf_function*)func)->flags, memory_order_acquire),
                        memory_order_release);
  if (new_sig != NULL) {
    int rc = PFFuncSetInfo(f, NULL, new_sig, NULL);
    pf_free(new_sig);
    if (rc != 0) {
      pf_object_release_keeping_error(f);
      return -1;
    }
  }
  *out = f;
  return 0;
oom:
  pf_oom(where);
fail : {
  pf_saved_error e;
  pf_error_save(&e);
  binding_free(b, kept);
  pf_error_restore(&e);
  return -1;
}
}
