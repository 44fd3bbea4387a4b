/* Test fixture: a descriptor whose name points outside the library (at an
 * address that nothing maps); loading must refuse it, not read it. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int64_t fine(int64_t a) { return a; }
PF_REGISTER_TYPED("badname.fine", fine, "int64(int64)");

static const PFFuncDescriptor bad_name = {PF_FUNC_DESCRIPTOR_ABI,
                                          kPFFuncDescriptorTyped,
                                          (const char*)(uintptr_t)0x1000,
                                          NULL,
                                          (void (*)(void))fine,
                                          "int64(int64)",
                                          NULL};
__attribute__((used, section("pf_functions"))) static const PFFuncDescriptor* const bad_entry =
    &bad_name;
