/* Test fixture: the C file of mod_cxx.so, whose other file is C++: the
 * registrations of both land in one table, behind one accessor. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int64_t c_half(int64_t x) { return x / 2; }
PF_REGISTER_TYPED("cxx.c_half", c_half, "int64(x: int64)", "From the C file.");
