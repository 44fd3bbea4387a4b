/* Test fixture: an object type whose prepare hook (PFObjectTypeDesc3)
 * points at data, not code; rebuilding an instance would crash, so loading
 * must refuse it. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static const char not_code[64] = "this is data, not code";
static const PFObjectTypeDesc3 k_bad = {
    {{PF_OBJECT_TYPE_DESC3_ABI, "badprepare.Bad", NULL, 8, NULL, NULL, NULL, 0, NULL, 0}, NULL, 0},
    (PFObjectPrepare)(uintptr_t)not_code};
PF_REGISTER_OBJECT_TYPE(k_bad.v2.base);
