/* Test fixture: typed functions whose signatures have element types
 * (signature.h), for `pf describe` and `pf call`. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int64_t total(PFObjectHandle xs) {
  int64_t n = 0, sum = 0;
  PFValue v;
  int code;
  if (xs == NULL || PFArrayGetSize(xs, &n) != 0) return -1;
  for (int64_t i = 0; i < n; ++i)
    if (PFArrayGetItem(xs, i, &v, &code) == 0) sum += v.v_int64;
  return sum;
}
PF_REGISTER_TYPED("elements.total", total, "int64(xs: array<int64>)", "Sums ints.");

static int64_t count(PFObjectHandle m) {
  int64_t n = -1;
  return m != NULL && PFMapGetSize(m, &n) == 0 ? n : -1;
}
PF_REGISTER_TYPED("elements.count", count,
                  "int64(m: map<str, list<float64>>, tag: optional<str> = null)",
                  "Counts the keys.");

/* An object type whose fields have element types and optional. */
typedef struct {
  PFObjectHandle names;
  PFObjectHandle next;
  PFObjectHandle items;
} Node;

static void node_fin(void* p) {
  Node* n = p;
  (void)n; /* the runtime releases the references its fields keep */
}

static const PFFieldDesc k_node_fields[] = {
    PF_FIELD(Node, names, "list<str>", kPFFieldWritable, "Its names."),
    PF_FIELD(Node, next, "optional<obj<elements.Node>>", kPFFieldWritable, "The next node."),
    PF_FIELD(Node, items, "list<any>", kPFFieldWritable, "Anything."),
};
static const PFObjectTypeDesc k_node = {PF_OBJECT_TYPE_DESC_ABI,
                                        "elements.Node",
                                        NULL,
                                        sizeof(Node),
                                        node_fin,
                                        "A node with names.",
                                        k_node_fields,
                                        PF_COUNTOF(k_node_fields),
                                        NULL,
                                        0};
PF_REGISTER_OBJECT_TYPE(k_node);
