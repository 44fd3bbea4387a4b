/* Test fixture: a module with an object type, mt.Thing, and functions
 * that name it (obj<mt.Thing>) and report its finalizer's runs. */
#include <stdatomic.h>
#include <stdint.h>

#include "packedfunc/c_api.h"

typedef struct {
  int64_t value;
  char* note;
} Thing;

static atomic_int g_fins;

static void thing_fin(void* p) {
  (void)p;
  atomic_fetch_add(&g_fins, 1);
}

static Thing* thing(PFObjectHandle self) {
  void* d = NULL;
  PFObjectGetData(self, &d);
  return d;
}

static void thing_init(PFObjectHandle self, int64_t v) { thing(self)->value = v; }
static int64_t thing_get(PFObjectHandle self) { return thing(self)->value; }
static int64_t fins(void) { return atomic_load(&g_fins); }

PF_REGISTER_TYPED("mt.value_of", thing_get, "int64(obj<mt.Thing>)");
PF_REGISTER_TYPED("mt.fins", fins, "int64()");

static const PFFieldDesc k_fields[] = {
    PF_FIELD(Thing, value, "int64", kPFFieldWritable, "Its value."),
    PF_FIELD(Thing, note, "str", kPFFieldWritable, NULL),
};
static const PFMethodDesc k_methods[] = {
    PF_METHOD_TYPED("__init__", thing_init, "void(obj<mt.Thing>,int64)", NULL),
    PF_METHOD_TYPED("get", thing_get, "int64(obj<mt.Thing>)", "Its value."),
};
static const PFObjectTypeDesc k_thing = {PF_OBJECT_TYPE_DESC_ABI,
                                         "mt.Thing",
                                         NULL,
                                         sizeof(Thing),
                                         thing_fin,
                                         "A thing.",
                                         k_fields,
                                         PF_COUNTOF(k_fields),
                                         k_methods,
                                         PF_COUNTOF(k_methods)};
PF_REGISTER_OBJECT_TYPE(k_thing);
