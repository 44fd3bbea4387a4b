/* Test fixture: a second module, for imports and export conflicts. Its
 * "add" differs from mod_basic's so that a test can tell them apart. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int64_t add(int64_t a, int64_t b) { return a + b + 1000; }
PF_REGISTER_TYPED("add", add, "int64(int64,int64)", "Adds two ints plus 1000 (other).");

static int64_t neg(int64_t a) { return -a; }
PF_REGISTER_TYPED("neg", neg, "int64(int64)", "Negates.");
