/* Test fixture: an object type whose method's function pointer points at
 * data, not code; calling the method would crash, so loading must refuse
 * it. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int64_t fine(void) { return 1; }
PF_REGISTER_TYPED("badtype.fine", fine, "int64()");

static const char not_code[64] = "this is data, not code";
static const PFMethodDesc k_methods[] = {
    {"go", (PFPackedCFunc)(uintptr_t)not_code, NULL, NULL, 0, NULL},
};
static const PFObjectTypeDesc k_bad = {
    PF_OBJECT_TYPE_DESC_ABI, "badtype.Bad", NULL, 8, NULL, NULL, NULL, 0, k_methods, 1};
PF_REGISTER_OBJECT_TYPE(k_bad);
