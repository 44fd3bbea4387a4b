/* The names of type codes and object types, from their lists in c_api.h. */
#include "object_type.h"

const char* PFTypeCodeName(int type_code) {
  switch (type_code) {
#define PF_TYPE_CODE_CASE_(name, num, text, kind, otype) \
  case name:                                             \
    return text;
    PF_TYPE_CODE_LIST(PF_TYPE_CODE_CASE_)
#undef PF_TYPE_CODE_CASE_
    default:
      return (type_code >= kPFExtBegin && type_code < kPFExtEnd) ? "ext" : NULL;
  }
}

const char* PFObjectTypeName(uint32_t type_index) {
  switch (type_index) {
#define PF_OBJECT_TYPE_CASE_(name, index, text) \
  case name:                                    \
    return text;
    PF_OBJECT_TYPE_LIST(PF_OBJECT_TYPE_CASE_)
#undef PF_OBJECT_TYPE_CASE_
    default:
      return pf_registered_type_name(type_index); /* a key, or NULL */
  }
}
#define PF_OBJECT_TYPE_DENSE_(name, index, text)               \
  _Static_assert(index >= 1 && index < kPFObjectTypeEnd, #name \
                 " is outside "                                \
                 "1..kPFObjectTypeEnd-1");
PF_OBJECT_TYPE_LIST(PF_OBJECT_TYPE_DENSE_)
#undef PF_OBJECT_TYPE_DENSE_

/* The list is dense from 0 (so kPFTypeCodeEnd is also the largest code plus
 * one) and below the extension range; duplicate numbers already fail to
 * compile as duplicate cases above. */
#define PF_TYPE_CODE_DENSE_(name, num, text, kind, otype) \
  _Static_assert(num >= 0 && num < kPFTypeCodeEnd, #name " is outside 0..kPFTypeCodeEnd-1");
PF_TYPE_CODE_LIST(PF_TYPE_CODE_DENSE_)
#undef PF_TYPE_CODE_DENSE_
_Static_assert(kPFTypeCodeEnd <= kPFExtBegin, "built-in codes stay below the extension range");
_Static_assert(kPFObjectTypeEnd <= kPFObjectTypeRegisteredBegin,
               "built-in object types stay below the registered range");
