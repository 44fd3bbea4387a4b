/* Test fixture: a typed registration whose signature does not parse. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int64_t fine(int64_t a) { return a; }
PF_REGISTER_TYPED("badsig.fine", fine, "int64(int64)");
PF_REGISTER_TYPED("badsig.broken", fine, "int64(int64");
