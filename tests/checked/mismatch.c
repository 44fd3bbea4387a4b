/*
 * Checked registrations (checked.h) whose C function does not have the
 * prototype that the declared signature describes. Each case compiles only
 * with -DCASE_NAME, and must fail to compile, at its registration line, with
 * the assertion that names the function marked `expect:` on that line, or,
 * for a type name outside signature.h's table (marked `unknown:`), as an
 * unknown type name;
 * CASE_ok, the same shapes declared right, must compile cleanly.
 * tools/test-checked.sh runs them under gcc and clang. Each mismatch here
 * compiles without a word as a string registration (PF_REGISTER_TYPED).
 */
#include <packedfunc/c_api.h>

/* The method cases' table: used, so that no case warns. */
extern const PFMethodDesc k_methods[];

#if defined(CASE_ok)
static int64_t neg(int64_t a) { return -a; }
PF_REGISTER_CHECKED("t.neg", neg, PF_RET(int64), PF_ARG(int64, a));
static double half(double x) { return x / 2; }
PF_REGISTER_CHECKED("t.half", half, PF_RET(float64), PF_ARG(float64, x));
static int64_t count(const char* s, DLTensor* t, PFObjectHandle o) {
  return (int64_t)(s != NULL) + (t != NULL) + (o != NULL);
}
PF_REGISTER_CHECKED("t.count", count, PF_RET(int64), PF_ARG(str, s), PF_ARG(tensor(float64, 1), t),
                    PF_ARG(obj(t.Thing), o));
static PFByteArray raw(void) { return (PFByteArray){NULL, 0}; }
PF_REGISTER_CHECKED("t.raw", raw, PF_RET(bytes));
const PFMethodDesc k_methods[] = {
    PF_METHOD_CHECKED("count", count, PF_RET(int64), PF_ARG(str, s), PF_ARG(tensor, t),
                      PF_ARG(object, self)),
    PF_STATIC_METHOD_CHECKED("raw", raw, PF_RET(bytes), PF_DOC("No bytes.")),
};

#elif defined(CASE_wrong_param)
static int64_t scale(int64_t a, double b) { return a * (int64_t)b; }
PF_REGISTER_CHECKED("t.scale", scale, PF_RET(int64), PF_ARG(int64, a),
                    PF_ARG(int64, b)); /* expect: scale */

#elif defined(CASE_wrong_result)
static double mean(int64_t n) { return (double)n; }
PF_REGISTER_CHECKED("t.mean", mean, PF_RET(int64), PF_ARG(int64, n)); /* expect: mean */

#elif defined(CASE_more_params)
static int64_t neg(int64_t a) { return -a; }
PF_REGISTER_CHECKED("t.neg", neg, PF_RET(int64), PF_ARG(int64, a),
                    PF_ARG(int64, b)); /* expect: neg */

#elif defined(CASE_fewer_params)
static int64_t add(int64_t a, int64_t b) { return a + b; }
PF_REGISTER_CHECKED("t.add", add, PF_RET(int64), PF_ARG(int64, a),
                    PF_DOC("Adds.")); /* expect: add */

#elif defined(CASE_no_params)
static int64_t neg(int64_t a) { return -a; }
PF_REGISTER_CHECKED("t.neg", neg, PF_RET(int64)); /* expect: neg */

#elif defined(CASE_float_for_double)
static float half(float x) { return x / 2; }
PF_REGISTER_CHECKED("t.half", half, PF_RET(float64), PF_ARG(float64, x)); /* expect: half */

#elif defined(CASE_double_for_float)
static double half(double x) { return x / 2; }
PF_REGISTER_CHECKED("t.half", half, PF_RET(float32), PF_ARG(float32, x)); /* expect: half */

#elif defined(CASE_int32_for_int64)
static int32_t twice(int32_t x) { return 2 * x; }
PF_REGISTER_CHECKED("t.twice", twice, PF_RET(int32), PF_ARG(int64, x)); /* expect: twice */

#elif defined(CASE_int64_result_for_int32)
static int64_t twice(int32_t x) { return 2 * (int64_t)x; }
PF_REGISTER_CHECKED("t.twice", twice, PF_RET(int32), PF_ARG(int32, x)); /* expect: twice */

#elif defined(CASE_long_long_for_int64)
static long long twice(long long x) { return 2 * x; }
PF_REGISTER_CHECKED("t.twice", twice, PF_RET(int64), PF_ARG(int64, x)); /* expect: twice */

#elif defined(CASE_mutable_str)
static int64_t length(char* s) { return s != NULL; }
PF_REGISTER_CHECKED("t.length", length, PF_RET(int64), PF_ARG(str, s)); /* expect: length */

#elif defined(CASE_ptr_for_str)
static int64_t length(void* s) { return s != NULL; }
PF_REGISTER_CHECKED("t.length", length, PF_RET(int64), PF_ARG(str, s)); /* expect: length */

#elif defined(CASE_tensor_for_obj)
static int64_t rank(DLTensor* t) { return t->ndim; }
PF_REGISTER_CHECKED("t.rank", rank, PF_RET(int64), PF_ARG(obj(t.Thing), t)); /* expect: rank */

#elif defined(CASE_obj_for_tensor)
static int64_t rank(PFObjectHandle t) { return t != NULL; }
PF_REGISTER_CHECKED("t.rank", rank, PF_RET(int64),
                    PF_ARG(tensor(float64, 1), t)); /* expect: rank */

#elif defined(CASE_str_result_for_tensor)
static const char* name(DLTensor* t) { return t ? "t" : NULL; }
PF_REGISTER_CHECKED("t.name", name, PF_RET(tensor), PF_ARG(tensor, t)); /* expect: name */

#elif defined(CASE_bytes_result_by_pointer)
static const PFByteArray* raw(void) { return NULL; }
PF_REGISTER_CHECKED("t.raw", raw, PF_RET(bytes)); /* expect: raw */

#elif defined(CASE_void_for_result)
static int64_t reset(PFObjectHandle self) { return self != NULL; }
PF_REGISTER_CHECKED("t.reset", reset, PF_RET(void), PF_ARG(object, self)); /* expect: reset */

#elif defined(CASE_method_param)
static int64_t add(PFObjectHandle self, double n) { return (int64_t)n + (self != NULL); }
const PFMethodDesc k_methods[] = {
    PF_METHOD_CHECKED("add", add, PF_RET(int64), PF_ARG(obj(t.Thing), self),
                      PF_ARG(int64, n)), /* expect: add */
};

#elif defined(CASE_method_missing_self)
static int64_t add(int64_t n) { return n; }
const PFMethodDesc k_methods[] = {
    PF_METHOD_CHECKED("add", add, PF_RET(int64), PF_ARG(obj(t.Thing), self),
                      PF_ARG(int64, n)), /* expect: add */
};

#elif defined(CASE_static_method_result)
static float limit(void) { return 1; }
const PFMethodDesc k_methods[] = {
    PF_STATIC_METHOD_CHECKED("limit", limit, PF_RET(float64),
                             PF_DOC("The limit.")), /* expect: limit */
};

#elif defined(CASE_unknown_type)
static double twice(double x) { return 2 * x; }
PF_REGISTER_CHECKED("t.twice", twice, PF_RET(float64), PF_ARG(double, x)); /* unknown: double */

#elif defined(CASE_type_without_c_type)
static int64_t first(void* x) { return x != NULL; }
PF_REGISTER_CHECKED("t.first", first, PF_RET(int64), PF_ARG(any, x)); /* unknown: any */

#else
#error "define one CASE_ (tools/test-checked.sh)"
#endif
