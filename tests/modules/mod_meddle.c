/* Test fixture: md.Node, an object type with a child, a List of items and
 * an accessor field whose getter, once armed (md.arm), clears a List: it
 * stands in for another thread that clears the List at the moment a walk
 * (to_json, structural_equal) reads the field, while the walk holds its
 * snapshot of it. */
#include <stdint.h>

#include "packedfunc/c_api.h"

typedef struct {
  PFObjectHandle child;
  PFObjectHandle items;
} Node;

static PFObjectHandle g_armed; /* a reference of its own */

static int64_t arm(PFObjectHandle list) {
  PFObjectRetain(list);
  PFObjectFree(g_armed);
  g_armed = list;
  return 0;
}
PF_REGISTER_TYPED("md.arm", arm, "int64(list)");

static int get_meddle(const void* data, PFValue* out, int* out_code) {
  (void)data;
  PFObjectHandle list = g_armed;
  g_armed = NULL;
  if (list) {
    int rc = PFListClear(list);
    PFObjectFree(list);
    if (rc != 0) return -1;
  }
  out->v_int64 = 0;
  *out_code = kPFInt;
  return 0;
}

static const PFFieldDesc k_fields[] = {
    PF_FIELD(Node, child, "object", kPFFieldWritable, NULL),
    PF_FIELD(Node, items, "list", kPFFieldWritable, NULL),
};
static const PFAccessorDesc k_accessors[] = {
    PF_ACCESSOR("meddle", "int64", get_meddle, NULL, NULL),
};
static const PFObjectTypeDesc2 k_node = {{PF_OBJECT_TYPE_DESC2_ABI, "md.Node", NULL, sizeof(Node),
                                          NULL, "A node that meddles.", k_fields,
                                          PF_COUNTOF(k_fields), NULL, 0},
                                         k_accessors,
                                         PF_COUNTOF(k_accessors)};
PF_REGISTER_OBJECT_TYPE(k_node.base);
