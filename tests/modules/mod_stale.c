/* Test fixture: a checked registration built as if against a stale header,
 * whose table gave float64 another C type: the list it records is altered
 * here, where a stale header would have had it. The compile-time check
 * passes (this header's types); loading must refuse it. */
#include "packedfunc/c_api.h"

#undef PF_SIGNATURE_C_TYPES_TEXT
#define PF_SIGNATURE_C_TYPES_TEXT "int64=int64_t/int64_t;float64=float/float;"

static double half(double x) { return x / 2; }
PF_REGISTER_CHECKED("stale.half", half, PF_RET(float64), PF_ARG(float64, x));
