/* Test fixture: a module that registers one name twice; loading it fails. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int64_t first(void) { return 1; }
static int64_t second(void) { return 2; }
PF_REGISTER_TYPED("dup.twice", first, "int64()");
PF_REGISTER_TYPED("dup.unique", first, "int64()");
PF_REGISTER_TYPED("dup.twice", second, "int64()");
