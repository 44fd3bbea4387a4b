/* Test fixture: mt.Thing again, with another description (a field more):
 * loading it after mod_types.so must fail, and close it again. */
#include <stdint.h>

#include "packedfunc/c_api.h"

typedef struct {
  int64_t value;
  char* note;
  int64_t extra;
} Thing;

static int64_t answer(void) { return 42; }
PF_REGISTER_TYPED("clash.answer", answer, "int64()");

static const PFFieldDesc k_fields[] = {
    PF_FIELD(Thing, value, "int64", kPFFieldWritable, "Its value."),
    PF_FIELD(Thing, note, "str", kPFFieldWritable, NULL),
    PF_FIELD(Thing, extra, "int64", 0, NULL),
};
static const PFObjectTypeDesc k_thing = {
    PF_OBJECT_TYPE_DESC_ABI, "mt.Thing", NULL, sizeof(Thing), NULL, "A thing.", k_fields,
    PF_COUNTOF(k_fields),    NULL,       0};
PF_REGISTER_OBJECT_TYPE(k_thing);
