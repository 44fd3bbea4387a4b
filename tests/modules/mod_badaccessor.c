/* Test fixture: an object type whose accessor field's getter points at
 * data, not code; reading the field would crash, so loading must refuse
 * it. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static const char not_code[64] = "this is data, not code";
static const PFAccessorDesc k_accessors[] = {
    PF_ACCESSOR("name", "str", (PFFieldGetter)(uintptr_t)not_code, NULL, NULL),
};
static const PFObjectTypeDesc2 k_bad = {
    {PF_OBJECT_TYPE_DESC2_ABI, "badaccessor.Bad", NULL, 8, NULL, NULL, NULL, 0, NULL, 0},
    k_accessors,
    1};
PF_REGISTER_OBJECT_TYPE(k_bad.base);
