/* Test fixture: the second source file of mod_multi.so. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int64_t two(void) { return 2; }
PF_REGISTER_TYPED("multi.two", two, "int64()");

static int64_t three(void) { return 3; }
PF_REGISTER_TYPED("multi.three", three, "int64()", "Returns 3.");
