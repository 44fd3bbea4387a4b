/* Typed C functions as packed functions: the direct-cast callers and the libffi path. */
#include <stdio.h>
#include <string.h>

#include "object_type.h"

typedef void (*pf_fn)(void);
/* Calls fn with the arguments' 8 bytes each as its prototype takes them
 * (int64-like from v_int64, float64 from v_float64), straight from the
 * caller's packed values on the simple path. */
typedef void (*pf_fast_caller)(pf_fn fn, const PFValue* a, pf_cvalue* r);

typedef struct {
  pf_fn fn;
  pf_fast_caller fast;   /* NULL: call through cif */
  PFFunctionHandle self; /* not a reference: the function owns this struct */
  /* An instance method's type, whose instance its first argument must be
   * (then sig.args[0] is obj<that type>); NULL for other functions. */
  const pf_type* self_type;
  pf_sig sig;
  ffi_cif cif;
  ffi_type* atypes[PF_TYPED_MAX_ARGS];
} pf_typed;

/*
 * The fast path. On LP64 targets whose C ABI passes a pointer exactly as an
 * int64 (x86-64 System V and AArch64), a signature whose arguments are at
 * most four of int64/uint64/pointer-like ("I") and float64 ("F") values,
 * and whose result is void, an int64-like value, float64, bool or int32,
 * is called through a function pointer cast to that prototype. One caller
 * exists per (result kind, argument pattern) and is chosen at creation, so
 * a call does no dispatch on the signature. Everything else uses libffi.
 */
#if (defined(__x86_64__) || defined(__aarch64__)) && UINTPTR_MAX == UINT64_MAX
#define PF_TYPED_FAST 1

#define PF_TY_I int64_t
#define PF_TY_F double
#define PF_AV_I(k) a[k].v_int64
#define PF_AV_F(k) a[k].v_float64
#define PF_RT_v void
#define PF_RT_i int64_t
#define PF_RT_d double
#define PF_RT_b bool
#define PF_RT_w int32_t
#define PF_ST_v(call) call
#define PF_ST_i(call) r->i64 = call
#define PF_ST_d(call) r->f64 = call
#define PF_ST_b(call) r->b = call
#define PF_ST_w(call) r->i32 = call

/* The generated callers read as tables. */
/* clang-format off */
#define PF_HEAD(name) static void name(pf_fn fn, const PFValue* a, pf_cvalue* r)
#define PF_FAST0(k)                                              \
  PF_HEAD(fast_##k) {                                            \
    (void)a;                                                     \
    (void)r;                                                     \
    PF_ST_##k(((PF_RT_##k(*)(void))fn)());                      \
  }
#define PF_FAST1(k, A1)                                          \
  PF_HEAD(fast_##k##_##A1) {                                     \
    (void)r;                                                     \
    PF_ST_##k(((PF_RT_##k(*)(PF_TY_##A1))fn)(PF_AV_##A1(0)));   \
  }
#define PF_FAST2(k, A1, A2)                                                         \
  PF_HEAD(fast_##k##_##A1##A2) {                                                    \
    (void)r;                                                                        \
    PF_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2))fn)(PF_AV_##A1(0), PF_AV_##A2(1))); \
  }
#define PF_FAST3(k, A1, A2, A3)                                                   \
  PF_HEAD(fast_##k##_##A1##A2##A3) {                                              \
    (void)r;                                                                      \
    PF_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2, PF_TY_##A3))fn)(             \
        PF_AV_##A1(0), PF_AV_##A2(1), PF_AV_##A3(2)));                            \
  }
#define PF_FAST4(k, A1, A2, A3, A4)                                               \
  PF_HEAD(fast_##k##_##A1##A2##A3##A4) {                                          \
    (void)r;                                                                      \
    PF_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2, PF_TY_##A3, PF_TY_##A4))fn)( \
        PF_AV_##A1(0), PF_AV_##A2(1), PF_AV_##A3(2), PF_AV_##A4(3)));             \
  }

/* Argument patterns in lexicographic order, I before F: the index of a
 * pattern of n arguments is 2^n - 1 plus its bits, the first argument the
 * most significant, F = 1. */
#define PF_PATS1(M, k) M(k, I) M(k, F)
#define PF_PATS2(M, k) M(k, I, I) M(k, I, F) M(k, F, I) M(k, F, F)
#define PF_PATS3(M, k)                                                              \
  M(k, I, I, I) M(k, I, I, F) M(k, I, F, I) M(k, I, F, F) M(k, F, I, I) M(k, F, I, F) \
  M(k, F, F, I) M(k, F, F, F)
#define PF_PATS4(M, k)                                                      \
  M(k, I, I, I, I) M(k, I, I, I, F) M(k, I, I, F, I) M(k, I, I, F, F)       \
  M(k, I, F, I, I) M(k, I, F, I, F) M(k, I, F, F, I) M(k, I, F, F, F)       \
  M(k, F, I, I, I) M(k, F, I, I, F) M(k, F, I, F, I) M(k, F, I, F, F)       \
  M(k, F, F, I, I) M(k, F, F, I, F) M(k, F, F, F, I) M(k, F, F, F, F)

#define PF_FAST_ALL(k) \
  PF_FAST0(k) PF_PATS1(PF_FAST1, k) PF_PATS2(PF_FAST2, k) PF_PATS3(PF_FAST3, k) PF_PATS4(PF_FAST4, k)
PF_FAST_ALL(v)
PF_FAST_ALL(i)
PF_FAST_ALL(d)
PF_FAST_ALL(b)
PF_FAST_ALL(w)

/*
 * The simple path: one direct C function (PFDirectCFunc) per simple
 * signature (void, int64 or float64 result; at most four int64 or float64
 * arguments), made the function object's own, so that a call with exactly
 * the signature's codes goes from its caller (a call target, or PFFuncCall)
 * to the C function with nothing in between but the check of the codes,
 * and writes the result through the caller's pointers. Any other call
 * takes typed_call_general.
 */
static int typed_call_general(void* res, PFValue* args, int* codes, int n, PFValue* rv, int* rc);
#define PF_CODE_I kPFInt
#define PF_CODE_F kPFFloat
/* A direct cast cannot fail, so the outputs (PFDirectCFunc: written on
 * success only) may be written before the call: nothing but `rv` then
 * lives across it (nothing at all for void, a tail call). */
#define PF_PK_ST_v(call) \
  rv->v_int64 = 0;       \
  *rc = kPFNull;         \
  call;                  \
  return 0;
#define PF_PK_ST_i(call) \
  *rc = kPFInt;          \
  rv->v_int64 = call;    \
  return 0;
#define PF_PK_ST_d(call) \
  *rc = kPFFloat;        \
  rv->v_float64 = call;  \
  return 0;
#define PF_PK_HEAD(name) \
  static int name(void* res, PFValue* a, int* codes, int n, PFValue* rv, int* rc)
#define PF_PK_OTHER return typed_call_general(res, a, codes, n, rv, rc)
#define PF_PK_FN ((const pf_typed*)res)->fn
#define PF_PK0(k)                                \
  PF_PK_HEAD(packed_##k) {                       \
    if (__builtin_expect(n != 0, 0)) PF_PK_OTHER; \
    PF_PK_ST_##k(((PF_RT_##k(*)(void))PF_PK_FN)()) \
  }
#define PF_PK1(k, A1)                                                            \
  PF_PK_HEAD(packed_##k##_##A1) {                                                \
    if (__builtin_expect(n != 1 || codes[0] != PF_CODE_##A1, 0)) PF_PK_OTHER;    \
    PF_PK_ST_##k(((PF_RT_##k(*)(PF_TY_##A1))PF_PK_FN)(PF_AV_##A1(0)))        \
  }
#define PF_PK2(k, A1, A2)                                                           \
  PF_PK_HEAD(packed_##k##_##A1##A2) {                                               \
    if (__builtin_expect(n != 2 || codes[0] != PF_CODE_##A1 || codes[1] != PF_CODE_##A2, 0)) \
      PF_PK_OTHER;                                                                  \
    PF_PK_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2))PF_PK_FN)(PF_AV_##A1(0),  \
                                                                     PF_AV_##A2(1))) \
  }
#define PF_PK3(k, A1, A2, A3)                                                        \
  PF_PK_HEAD(packed_##k##_##A1##A2##A3) {                                            \
    if (__builtin_expect(n != 3 || codes[0] != PF_CODE_##A1 || codes[1] != PF_CODE_##A2 || \
                             codes[2] != PF_CODE_##A3,                               \
                         0))                                                         \
      PF_PK_OTHER;                                                                   \
    PF_PK_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2, PF_TY_##A3))PF_PK_FN)(     \
        PF_AV_##A1(0), PF_AV_##A2(1), PF_AV_##A3(2)))                                 \
  }
#define PF_PK4(k, A1, A2, A3, A4)                                                    \
  PF_PK_HEAD(packed_##k##_##A1##A2##A3##A4) {                                        \
    if (__builtin_expect(n != 4 || codes[0] != PF_CODE_##A1 || codes[1] != PF_CODE_##A2 || \
                             codes[2] != PF_CODE_##A3 || codes[3] != PF_CODE_##A4,   \
                         0))                                                         \
      PF_PK_OTHER;                                                                   \
    PF_PK_ST_##k(((PF_RT_##k(*)(PF_TY_##A1, PF_TY_##A2, PF_TY_##A3, PF_TY_##A4))      \
                     PF_PK_FN)(PF_AV_##A1(0), PF_AV_##A2(1), PF_AV_##A3(2),        \
                                  PF_AV_##A4(3)))                                    \
  }
#define PF_PK_ALL(k) \
  PF_PK0(k) PF_PATS1(PF_PK1, k) PF_PATS2(PF_PK2, k) PF_PATS3(PF_PK3, k) PF_PATS4(PF_PK4, k)
PF_PK_ALL(v)
PF_PK_ALL(i)
PF_PK_ALL(d)
/* The same for one obj<KEY> argument (a method without arguments): a call
 * with a live instance of KEY or of a type descending from it. */
#define PF_PK_OBJ1(k)                                                                  \
  PF_PK_HEAD(packed_##k##_O) {                                                         \
    if (__builtin_expect(n != 1 || codes[0] != kPFObjectHandle ||                      \
                             !pf_obj_arg_ok(&a[0], ((const pf_typed*)res)->sig.arg_obj[0]), \
                         0))                                                           \
      PF_PK_OTHER;                                                                     \
    PF_PK_ST_##k(((PF_RT_##k(*)(PF_TY_I))PF_PK_FN)(PF_AV_I(0)))                        \
  }
PF_PK_OBJ1(v)
PF_PK_OBJ1(i)
PF_PK_OBJ1(d)

/* Both kinds of caller, by result kind (v, i, d, b, w), then by argument
 * pattern: the simple path's packed function exists for v, i and d only. */
typedef struct {
  pf_fast_caller fast;
  PFDirectCFunc simple;
} pf_callers;
#define PF_SIMPLE_v(f) f
#define PF_SIMPLE_i(f) f
#define PF_SIMPLE_d(f) f
#define PF_SIMPLE_b(f) NULL
#define PF_SIMPLE_w(f) NULL
#define PF_ENT(k, suffix) {fast_##k##suffix, PF_SIMPLE_##k(packed_##k##suffix)},
#define PF_ENT0(k) PF_ENT(k, )
#define PF_ENT1(k, A1) PF_ENT(k, _##A1)
#define PF_ENT2(k, A1, A2) PF_ENT(k, _##A1##A2)
#define PF_ENT3(k, A1, A2, A3) PF_ENT(k, _##A1##A2##A3)
#define PF_ENT4(k, A1, A2, A3, A4) PF_ENT(k, _##A1##A2##A3##A4)
#define PF_ROW(k) \
  { PF_ENT0(k) PF_PATS1(PF_ENT1, k) PF_PATS2(PF_ENT2, k) PF_PATS3(PF_ENT3, k) PF_PATS4(PF_ENT4, k) }
#define PF_FAST_MAX_ARGS 4
static const pf_callers k_callers[5][31] = {PF_ROW(v), PF_ROW(i), PF_ROW(d), PF_ROW(b), PF_ROW(w)};
/* clang-format on */
#endif

#ifdef PF_TYPED_FAST
/* Whether a value of type `t` is one 64-bit word in a general register,
 * as an int64 is: int64, uint64, and the pointers (ptr, str, tensor and
 * the references). */
static int in_word(int t) {
  return t == pf_t_int64 || t == pf_t_uint64 || t == pf_t_ptr || t == pf_t_str ||
         t == pf_t_tensor || pf_ctype_is_ref(t);
}
#endif

/* The callers for `sig` (see k_callers); NULL for what libffi and
 * typed_call_general do instead. */
static pf_callers pick_callers(const pf_sig* sig) {
  pf_callers none = {NULL, NULL};
#ifdef PF_TYPED_FAST
  int rk;
  switch (sig->ret) {
    case pf_t_void:
      rk = 0;
      break;
    case pf_t_float64:
      rk = 2;
      break;
    case pf_t_bool:
      rk = 3;
      break;
    case pf_t_int32:
      rk = 4;
      break;
    default:
      /* A reference result is a pointer in a register like any other; it
       * then goes through set_return, which hands the reference on. */
      if (!in_word(sig->ret)) return none;
      rk = 1;
      break;
  }
  if (sig->num_args > PF_FAST_MAX_ARGS) return none;
  /* The simple path takes exactly int64 and float64, whose packed codes
   * it checks; the direct cast takes any int64-like argument. */
  int simple = sig->ret == pf_t_void || sig->ret == pf_t_int64 || sig->ret == pf_t_float64;
  int bits = 0;
  for (int i = 0; i < sig->num_args; ++i) {
    int t = sig->args[i];
    if (t == pf_t_float64) {
      bits = (bits << 1) | 1;
    } else if (t == pf_t_int64) {
      bits = bits << 1;
    } else if (in_word(t) || t == pf_t_bytes) { /* bytes: a pointer to its PFByteArray */
      bits = bits << 1;
      simple = 0;
    } else {
      return none;
    }
  }
  pf_callers c = k_callers[rk][(1 << sig->num_args) - 1 + bits];
  if (!simple) c.simple = NULL;
  return c;
#else
  (void)sig;
  return none;
#endif
}

/* "typed function 'name' int64(int64,int64)", for messages. */
static void describe(const pf_typed* t, char* buf, size_t n) {
  const char* name = NULL;
  const char* sig = NULL;
  PFFuncGetInfo(t->self, &name, &sig, NULL);
  if (name) snprintf(buf, n, "typed function '%.200s' %s", name, sig ? sig : "");
  else snprintf(buf, n, "typed function %s", sig ? sig : "");
}

static int arity_error(const pf_typed* t, int n) {
  char who[512];
  describe(t, who, sizeof(who));
  /* The call's arguments: the caller's error, with no place (PF_ERROR in base.h). */
  return PFErrorSetFormat(kPFErrTypeError, "%s: takes %d argument%s, got %d", who, t->sig.num_args,
                          t->sig.num_args == 1 ? "" : "s", n);
}

/* "argument 2" or "argument 2 'lo'", for messages. */
static void arg_what(const pf_typed* t, int i, char* buf, size_t n) {
  const pf_siginfo* info =
      atomic_load_explicit(&((pf_function*)t->self)->siginfo, memory_order_acquire);
  const char* name = info && i < info->pub.num_params ? info->params[i].pub.name : NULL;
  if (name) snprintf(buf, n, "argument %d '%.100s'", i, name);
  else snprintf(buf, n, "argument %d", i);
}

static int arg_error(const pf_typed* t, pf_conv c, int i, int code, const PFValue* v) {
  char who[512], what[128];
  describe(t, who, sizeof(who));
  arg_what(t, i, what, sizeof(what));
  return pf_conv_error_tc(c, who, what, t->sig.args[i], t->sig.arg_obj[i], &t->sig.arg_tc[i], code,
                          v);
}

/* A method's object that is not an instance of its type. */
__attribute__((cold, noinline)) static int self_error(const pf_typed* t, int code,
                                                      const PFValue* v) {
  char who[512], what[128];
  describe(t, who, sizeof(who));
  arg_what(t, 0, what, sizeof(what));
  return pf_self_error(who, what, t->self_type, code, v);
}

/* A tensor argument that does not meet its constraint. */
__attribute__((cold, noinline)) static int tensor_error(const pf_typed* t, pf_conv c, int i,
                                                        const DLTensor* dl) {
  char who[512], what[128];
  describe(t, who, sizeof(who));
  if (i < 0) snprintf(what, sizeof(what), "result");
  else arg_what(t, i, what, sizeof(what));
  return pf_tc_error(c, who, what, i < 0 ? &t->sig.ret_tc : &t->sig.arg_tc[i], dl);
}

/* ---- positions with a type tree (element types, optional, union) ---- */

typedef struct {
  const pf_typed* t;
  int i; /* -1: the result */
} tree_pos;

static void tree_name(const void* ctx, char* who, size_t wn, char* what, size_t tn) {
  const tree_pos* p = ctx;
  describe(p->t, who, wn);
  if (p->i < 0) snprintf(what, tn, "result");
  else arg_what(p->t, p->i, what, tn);
}

/* Checks and converts argument i by its tree into av[i]; *made is what the
 * call releases after (a converted container), or NULL. */
__attribute__((noinline)) static int tree_arg(const pf_typed* t, int i, int code, const PFValue* v,
                                              pf_cvalue* av, PFObjectHandle* made) {
  tree_pos pos = {t, i};
  PFValue pv;
  int pc;
  if (pf_tree_convert(t->sig.nodes, t->sig.arg_et[i], tree_name, &pos, code, v, &pv, &pc, made) !=
      0)
    return -1;
  /* The tree took the value: its C type takes it as it is (null too, which
   * the tree allowed). */
  pf_conv c = pf_packed_to_c(t->sig.args[i], t->sig.arg_obj[i], pc, &pv, av, 1);
  if (c == pf_conv_ok) return 0;
  PFObjectFree(*made);
  *made = NULL;
  return arg_error(t, c, i, code, v);
}

/* Writes the packed value (pv, pc) to the caller's outputs, as the direct
 * convention does (PFDirectCFunc): a str or bytes through the thread's
 * return storage, a handle with a reference the caller takes over. */
static int write_return(PFValue* pv, int pc, PFValue* rv, int* rc) {
  if (pc == kPFStr) return PFFuncReturnString(pc, pv->v_str, strlen(pv->v_str), rv, rc);
  if (pc == kPFBytes) {
    const PFByteArray* ba = pv->v_handle;
    return PFFuncReturnString(pc, ba->data, ba->size, rv, rc);
  }
  *rv = *pv;
  *rc = pc;
  return 0;
}

/* The result (v, code) of a typed function whose result has a tree, which
 * came with a reference when it is a handle: checked and converted, then
 * written to the caller's outputs with a reference of the caller's own. */
__attribute__((noinline)) static int tree_return(const pf_typed* t, const PFValue* v, int code,
                                                 PFValue* rv, int* rc) {
  tree_pos pos = {t, -1};
  PFValue pv;
  int pc;
  PFObjectHandle made = NULL;
  int st = pf_tree_convert(t->sig.nodes, t->sig.ret_et, tree_name, &pos, code, v, &pv, &pc, &made);
  if (st == 0) {
    if (pf_code_is_handle(pc) && pv.v_handle != NULL) pf_object_retain(pv.v_handle);
    st = write_return(&pv, pc, rv, rc);
  }
  PFObjectFree(made);
  if (pf_code_is_handle(code)) {
    if (st != 0) pf_object_release_keeping_error(v->v_handle);
    else pf_object_release(v->v_handle);
  }
  return st;
}

static void call_ffi(const pf_typed* t, pf_cvalue* av, pf_ffi_ret* raw, pf_cvalue* rv) {
  void* ptrs[PF_TYPED_MAX_ARGS];
  for (int i = 0; i < t->sig.num_args; ++i) ptrs[i] = &av[i];
  ffi_call((ffi_cif*)&t->cif, t->fn, raw, ptrs);
  pf_ffi_ret_load(t->sig.ret, raw, rv);
}

/* Writes the C function's result `r` to the caller's outputs, as the
 * direct convention does (PFDirectCFunc). */
static int set_return(const pf_typed* t, const pf_cvalue* r, PFValue* rv, int* rc) {
  PFValue v;
  int code;
  if (t->sig.ret == pf_t_void) {
    rv->v_int64 = 0;
    *rc = kPFNull;
    return 0;
  }
  pf_conv tc;
  if (t->sig.ret == pf_t_tensor && t->sig.ret_tc.flags && r->t != NULL &&
      (tc = pf_tc_check(&t->sig.ret_tc, r->t)) != pf_conv_ok)
    return tensor_error(t, tc, -1, r->t);
  if (pf_c_to_packed(t->sig.ret, t->sig.ret_obj, r, &v, &code) != 0) {
    char who[512];
    describe(t, who, sizeof(who));
    pf_c_to_packed_error(who, "result", t->sig.ret, t->sig.ret_obj, r);
    /* A live object of the wrong type still came with a reference. */
    if (pf_ctype_is_ref(t->sig.ret) && pf_is_object(r->o, 0)) pf_object_release_keeping_error(r->o);
    return -1;
  }
  if (t->sig.ret_et >= 0) return tree_return(t, &v, code, rv, rc);
  /* A plain value; or a func, array, map, shape or object, whose
   * reference the C function handed over and the caller now takes. */
  return write_return(&v, code, rv, rc);
}

/* Hands the C function's result `r` to the caller. */
static inline int typed_finish(const pf_typed* t, pf_cvalue* r, PFValue* rv, int* rc) {
  if (t->sig.ret == pf_t_int64 || t->sig.ret == pf_t_float64) {
    memcpy(rv, r, sizeof(*rv));
    *rc = t->sig.ret == pf_t_int64 ? kPFInt : kPFFloat;
    return 0;
  }
  return set_return(t, r, rv, rc);
}

/* A call of a typed function with type trees: typed_call_general's, with
 * each tree's position converted by its tree and what that made
 * released after the call. */
__attribute__((noinline)) static int typed_call_trees(const pf_typed* t, PFValue* args, int* codes,
                                                      int n, PFValue* ret, int* ret_code) {
  pf_cvalue av[PF_TYPED_MAX_ARGS];
  PFObjectHandle made[PF_TYPED_MAX_ARGS] = {NULL};
  int st = 0;
  for (int i = 0; i < n && st == 0; ++i) {
    if (t->sig.arg_et[i] >= 0) {
      st = tree_arg(t, i, codes[i], &args[i], &av[i], &made[i]);
      continue;
    }
    pf_conv c = pf_packed_to_c(t->sig.args[i], t->sig.arg_obj[i], codes[i], &args[i], &av[i], 0);
    if (c != pf_conv_ok) st = arg_error(t, c, i, codes[i], &args[i]);
    else if (t->sig.args[i] == pf_t_tensor && t->sig.arg_tc[i].flags && av[i].t != NULL &&
             (c = pf_tc_check(&t->sig.arg_tc[i], av[i].t)) != pf_conv_ok)
      st = tensor_error(t, c, i, av[i].t);
  }
  if (st == 0) {
    pf_cvalue rv;
    pf_ffi_ret raw;
    rv.i64 = 0;
    call_ffi(t, av, &raw, &rv);
    st = typed_finish(t, &rv, ret, ret_code);
  }
  for (int i = 0; i < n; ++i) PFObjectFree(made[i]);
  return st;
}

/* The packed function of a typed function without a simple signature
 * (see k_callers), and of any call of one that does not match it exactly:
 * conversions, libffi, other results, errors. */
__attribute__((noinline)) static int typed_call_general(void* res, PFValue* args, int* codes, int n,
                                                        PFValue* ret, int* ret_code) {
  const pf_typed* t = res;
  if (__builtin_expect(n != t->sig.num_args, 0)) return arity_error(t, n);
  if (t->self_type != NULL && !(codes[0] == kPFObjectHandle && pf_obj_arg_ok(args, t->self_type)))
    return self_error(t, codes[0], args);
  pf_cvalue av[PF_TYPED_MAX_ARGS];
  if (pf_sig_has_tree(&t->sig)) return typed_call_trees(t, args, codes, n, ret, ret_code);
  for (int i = 0; i < n; ++i) {
    int at = t->sig.args[i], code = codes[i];
    /* The exact matches of the common types skip the general conversion. */
    if (at == pf_t_int64 && code == kPFInt) {
      av[i].i64 = args[i].v_int64;
    } else if (at == pf_t_float64 && code == kPFFloat) {
      av[i].f64 = args[i].v_float64;
    } else {
      pf_conv c = pf_packed_to_c(at, t->sig.arg_obj[i], code, &args[i], &av[i], 0);
      if (c != pf_conv_ok) return arg_error(t, c, i, code, &args[i]);
      if (at == pf_t_tensor && t->sig.arg_tc[i].flags && av[i].t != NULL &&
          (c = pf_tc_check(&t->sig.arg_tc[i], av[i].t)) != pf_conv_ok)
        return tensor_error(t, c, i, av[i].t);
    }
  }
  pf_cvalue rv;
  pf_ffi_ret raw;
  rv.i64 = 0;
  if (t->fast) {
    /* The converted values, 8 bytes each as the fast callers read them
     * (pf_cvalue and PFValue have one size: see convert.c). */
    PFValue pv[PF_TYPED_MAX_ARGS];
    memcpy(pv, av, sizeof(PFValue) * (size_t)n);
    t->fast(t->fn, pv, &rv);
  } else call_ffi(t, av, &raw, &rv);
  return typed_finish(t, &rv, ret, ret_code);
}

/* The obj<KEY> path: a typed function with a direct cast whose arguments
 * are all int64, float64 or obj<KEY> (a method taking int64 and float64),
 * when at least one is obj<KEY>. A call whose int64 and float64 codes match
 * exactly and whose every obj<KEY> passes pf_obj_arg_ok goes straight to the
 * direct cast; any other call, a None included, takes typed_call_general
 * and its errors. A single obj<KEY> with a void, int64 or float64 result
 * has its own packed function (PF_PK_OBJ1). */
static int typed_call_obj(void* res, PFValue* args, int* codes, int n, PFValue* ret,
                          int* ret_code) {
  const pf_typed* t = res;
  if (__builtin_expect(n != t->sig.num_args, 0))
    return typed_call_general(res, args, codes, n, ret, ret_code);
  for (int i = 0; i < n; ++i) {
    int at = t->sig.args[i];
    int ok = at == pf_t_int64 ? codes[i] == kPFInt
             : at == pf_t_float64
                 ? codes[i] == kPFFloat
                 : codes[i] == kPFObjectHandle && pf_obj_arg_ok(&args[i], t->sig.arg_obj[i]);
    if (__builtin_expect(!ok, 0)) return typed_call_general(res, args, codes, n, ret, ret_code);
  }
  pf_cvalue rv;
  rv.i64 = 0;
  t->fast(t->fn, args, &rv);
  return typed_finish(t, &rv, ret, ret_code);
}

/* The packed function of the obj<KEY> path for `sig`, whose direct cast
 * exists; NULL when `sig` is not one for it. */
static PFDirectCFunc pick_obj_entry(const pf_sig* sig) {
  int objs = 0;
  for (int i = 0; i < sig->num_args; ++i) {
    if (sig->args[i] == pf_t_obj) ++objs;
    else if (sig->args[i] != pf_t_int64 && sig->args[i] != pf_t_float64) return NULL;
  }
  if (objs == 0) return NULL;
#ifdef PF_TYPED_FAST
  if (sig->num_args == 1) {
    if (sig->ret == pf_t_void) return packed_v_O;
    if (sig->ret == pf_t_int64) return packed_i_O;
    if (sig->ret == pf_t_float64) return packed_d_O;
  }
#endif
  return typed_call_obj;
}

static void typed_free(void* res) { pf_free(res); }

/* PFFuncCreateFromTyped, and for an instance method of `self_type` (not
 * NULL) one whose first argument must be an instance of that type. */
static int create_typed(const char* where, void* fn, const char* signature,
                        const pf_type* self_type, PFFunctionHandle* out) {
  pf_siginfo* info = NULL;
  if (pf_siginfo_parse(where, signature, &info) != 0) return -1;
  if (pf_sig_refuse_any(where, signature, &info->sig) != 0) {
    pf_siginfo_free(info);
    return -1;
  }
  pf_typed* t = pf_calloc(1, sizeof(*t));
  if (t == NULL) {
    pf_siginfo_free(info);
    return pf_oom(where);
  }
  t->fn = (pf_fn)fn;
  t->sig = info->sig;
  t->self_type = self_type;
  if (self_type != NULL) { /* `object`, or obj<an ancestor>: both one pointer */
    t->sig.args[0] = pf_t_obj;
    t->sig.arg_obj[0] = self_type;
  }
  if (pf_sig_prep_cif(where, &t->sig, &t->cif, t->atypes) != 0) {
    pf_siginfo_free(info);
    pf_free(t);
    return -1;
  }
  pf_callers callers = pick_callers(&t->sig);
  t->fast = callers.fast;
  PFDirectCFunc entry = callers.simple ? callers.simple
                        : callers.fast ? pick_obj_entry(&t->sig)
                                       : NULL;
  if (entry == NULL || pf_sig_has_tree(&t->sig)) entry = typed_call_general;
  PFFunctionHandle f = NULL;
  if (PFFuncCreateDirect(entry, t, typed_free, &f) != 0) {
    /* typed_free ran */
    pf_siginfo_free(info);
    return -1;
  }
  t->self = f;
  /* The parsed signature becomes the function's metadata: its canonical
   * text, names and defaults. */
  int st = pf_func_set_siginfo(f, info);
  /* `fn` runs at every call: keep its library loaded while `f` lives. */
  if (st == 0) st = pf_object_hold_code(f, fn, where);
  if (st != 0) {
    PFFuncFree(f);
    return -1;
  }
  *out = f;
  return 0;
}

int PFFuncCreateFromTyped(void* fn, const char* signature, PFFunctionHandle* out) {
  static const char* const where = "PFFuncCreateFromTyped";
  PF_CHECK_ARG(fn);
  PF_CHECK_ARG(signature);
  PF_CHECK_ARG(out);
  return create_typed(where, fn, signature, NULL, out);
}

int pf_typed_create_method(const char* where, void* fn, const char* signature,
                           const pf_type* self_type, PFFunctionHandle* out) {
  return create_typed(where, fn, signature, self_type, out);
}

static pf_typed* typed_of(PFFunctionHandle func) {
  if (!pf_is_object(func, kPFObjectFunction)) return NULL;
  pf_function* f = func;
  return f->fin == typed_free ? f->resource : NULL;
}

int pf_typed_path(PFFunctionHandle func) {
  pf_typed* t = typed_of(func);
  return t == NULL ? 0 : t->fast ? 1 : 2;
}

int pf_typed_force_ffi(PFFunctionHandle func) {
  pf_typed* t = typed_of(func);
  if (t == NULL) return -1;
  t->fast = NULL;
  ((pf_function*)func)->direct = typed_call_general; /* not the simple path's */
  return 0;
}
