/* Test fixture: a descriptor whose function pointer points at data, not
 * code; calling it would crash, so loading must refuse it. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int64_t fine(int64_t a) { return a; }
PF_REGISTER_TYPED("badcode.fine", fine, "int64(int64)");

static const char not_code[64] = "this is data, not code";
static const PFFuncDescriptor bad_code = {PF_FUNC_DESCRIPTOR_ABI,
                                          kPFFuncDescriptorPacked,
                                          "badcode.data",
                                          (PFPackedCFunc)(uintptr_t)not_code,
                                          NULL,
                                          NULL,
                                          NULL};
__attribute__((used, section("pf_functions"))) static const PFFuncDescriptor* const bad_entry =
    &bad_code;
