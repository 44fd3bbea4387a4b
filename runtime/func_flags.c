/* A function's flags: hints to the hosts that call it (function.h). */
#include "internal.h"

int PFFuncSetFlags(PFFunctionHandle func, uint32_t flags) {
  PF_CHECK_OBJECT(func, kPFObjectFunction);
  if ((flags & ~(uint32_t)PF_FUNC_FLAGS_KNOWN) != 0)
    return PF_ERROR(kPFErrValueError, "PFFuncSetFlags: argument 'flags' has unknown bits 0x%x",
                    (unsigned)(flags & ~(uint32_t)PF_FUNC_FLAGS_KNOWN));
  atomic_fetch_or_explicit(&((pf_function*)func)->flags, flags, memory_order_release);
  return 0;
}

int PFFuncGetFlags(PFFunctionHandle func, uint32_t* out) {
  PF_CHECK_OBJECT(func, kPFObjectFunction);
  PF_CHECK_ARG(out);
  *out = atomic_load_explicit(&((pf_function*)func)->flags, memory_order_acquire);
  return 0;
}
