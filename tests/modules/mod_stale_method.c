/* Test fixture: an object type whose checked method was built as if
 * against a stale header, whose table gave float64 another C type: the
 * list the method records is altered here, where a stale header would have
 * had it (as mod_stale.c does for a function). The compile-time check
 * passes (this header's types); loading must refuse the type, naming the
 * method. */
#include "packedfunc/c_api.h"

#undef PF_SIGNATURE_C_TYPES_TEXT
#define PF_SIGNATURE_C_TYPES_TEXT "int64=int64_t/int64_t;float64=float/float;"

static double gauge_scale(PFObjectHandle self, double by) {
  (void)self; /* never called: the type is refused */
  return by;
}
static int64_t gauge_limit(void) { return 7; }

static const PFMethodDesc k_methods[] = {
    PF_STATIC_METHOD_CHECKED("limit", gauge_limit, PF_RET(int64)),
    PF_METHOD_CHECKED("scale", gauge_scale, PF_RET(float64), PF_ARG(obj(stale.Gauge), self),
                      PF_ARG(float64, by)),
};
static const PFObjectTypeDesc k_gauge = {
    PF_OBJECT_TYPE_DESC_ABI, "stale.Gauge", NULL, 8, NULL, NULL, NULL, 0, k_methods,
    PF_COUNTOF(k_methods)};
PF_REGISTER_OBJECT_TYPE(k_gauge);
