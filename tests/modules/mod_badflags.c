/* Test fixture: a flags record (PF_REGISTER_FLAGS) that names no function
 * of the module, as a typo in the name makes: loading must refuse it,
 * naming the function. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int64_t add(int64_t a, int64_t b) { return a + b; }
PF_REGISTER_TYPED("badflags.add", add, "int64(int64,int64)");
PF_REGISTER_FLAGS("badflags.ad", kPFFuncNonBlocking);
