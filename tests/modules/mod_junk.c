/* Test fixture: a corrupt "pf_functions" section. Besides one good
 * registration it holds a pointer that points at no descriptor (as a
 * mis-linked or damaged library might); loading must refuse it, not read
 * through it. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int64_t fine(int64_t a) { return a; }
PF_REGISTER_TYPED("junk.fine", fine, "int64(int64)");

__attribute__((used, section("pf_functions"))) static const PFFuncDescriptor* const junk_entry =
    (const PFFuncDescriptor*)(uintptr_t)0x1234;
