/*
 * Object types of the demo plugin: a C struct that hosts use as a class.
 *
 * demo.Base is a named thing; demo.Counter is a Base that counts. Each is a
 * C struct (Counter's begins with Base's), described once: its fields (the
 * members hosts may read, and which they may write), its methods (C
 * functions whose first argument is the object, each registered with
 * PF_METHOD_CHECKED, whose signature the compiler checks against the
 * function) and its constructor (__init__). Loading the plugin registers
 * both types; a host then writes
 *
 *     c = demo.Counter("clicks", 10)   # Python, through __init__
 *     c.increment()                    # 11
 *     c.step = 5; c.add(2)             # 21
 *     c.name                           # "clicks" (read-only)
 *
 * and from C, PFObjectTypeFind("demo.Counter") gives the type's index for
 * PFObjectTypeGetConstructor, PFObjectTypeGetField and PFObjectGetMethod
 * (examples/object_types.c).
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "packedfunc/c_api.h"

/* ---- demo.Base ---- */

typedef struct {
  char* name; /* str: the runtime's allocator, owned by the instance */
  int64_t id; /* unique per Base made by __init__ */
} DemoBase;

static atomic_llong g_next_id = 1;

/* The struct of an instance; the runtime has checked its type already. */
static void* data_of(PFObjectHandle self) {
  void* data = NULL;
  PFObjectGetData(self, &data);
  return data;
}

/* Stores a copy of `name` as the str field's rule says: a PFMemAlloc block
 * that the instance frees. */
static int set_name(DemoBase* b, const char* name) {
  size_t n = strlen(name) + 1;
  char* copy = PFMemAlloc(n);
  if (copy == NULL) return -1;
  memcpy(copy, name, n);
  PFMemFree(b->name);
  b->name = copy;
  b->id = atomic_fetch_add(&g_next_id, 1);
  return 0;
}

/* A typed method cannot fail: an allocation failure leaves the name NULL
 * (null to hosts), which describe() shows as such. */
static void base_init(PFObjectHandle self, const char* name) { set_name(data_of(self), name); }

static const char* base_describe(PFObjectHandle self) {
  static _Thread_local char buf[256];
  const DemoBase* b = data_of(self);
  snprintf(buf, sizeof(buf), "Base '%s' #%lld", b->name ? b->name : "(null)", (long long)b->id);
  return buf;
}

static const PFFieldDesc k_base_fields[] = {
    PF_FIELD(DemoBase, name, "str", 0, "The name given to the constructor."),
    PF_FIELD(DemoBase, id, "int64", 0, "A number no other Base has."),
};

static const PFMethodDesc k_base_methods[] = {
    PF_METHOD_CHECKED("__init__", base_init, PF_RET(void), PF_ARG(obj(demo.Base), self),
                      PF_ARG(str, name), PF_DOC("Makes a Base named NAME.")),
    PF_METHOD_CHECKED("describe", base_describe, PF_RET(str), PF_ARG(obj(demo.Base), self),
                      PF_DOC("Says what it is.")),
};

static const PFObjectTypeDesc k_base_type = {PF_OBJECT_TYPE_DESC_ABI,
                                             "demo.Base",
                                             NULL,
                                             sizeof(DemoBase),
                                             NULL,
                                             "A named thing.",
                                             k_base_fields,
                                             PF_COUNTOF(k_base_fields),
                                             k_base_methods,
                                             PF_COUNTOF(k_base_methods)};
PF_REGISTER_OBJECT_TYPE(k_base_type);

/* ---- demo.Counter ---- */

typedef struct {
  DemoBase base; /* first: a Counter is a Base */
  int64_t count;
  int64_t step;
  PFObjectHandle tag; /* object: any object a host attaches, owned by the instance */
} DemoCounter;

static void counter_init(PFObjectHandle self, const char* name, int64_t start) {
  DemoCounter* c = data_of(self);
  set_name(&c->base, name);
  c->count = start;
  c->step = 1;
}

static int64_t counter_increment(PFObjectHandle self) {
  DemoCounter* c = data_of(self);
  return c->count += c->step;
}

static int64_t counter_add(PFObjectHandle self, int64_t n) {
  DemoCounter* c = data_of(self);
  return c->count += n * c->step;
}

static const char* counter_describe(PFObjectHandle self) {
  static _Thread_local char buf[256];
  const DemoCounter* c = data_of(self);
  snprintf(buf, sizeof(buf), "Counter '%s' at %lld", c->base.name ? c->base.name : "(null)",
           (long long)c->count);
  return buf;
}

/* A packed method: resets the count to its argument, or to 0. */
static int counter_reset(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)ret, (void)res;
  if (n < 1 || n > 2 || (n == 2 && codes[1] != kPFInt))
    return PFErrorSetFormat(kPFErrTypeError, "demo.Counter.reset: takes an optional int");
  DemoCounter* c = data_of(args[0].v_handle);
  c->count = n == 2 ? args[1].v_int64 : 0;
  return 0;
}

static int64_t counter_max_step(void) { return 1000; }

static const PFFieldDesc k_counter_fields[] = {
    PF_FIELD(DemoCounter, count, "int64", kPFFieldWritable, "The count so far."),
    PF_FIELD(DemoCounter, step, "int64", kPFFieldWritable, "What increment() adds."),
    PF_FIELD(DemoCounter, tag, "object", kPFFieldWritable, "Anything attached to it."),
};

static const PFMethodDesc k_counter_methods[] = {
    PF_METHOD_CHECKED("__init__", counter_init, PF_RET(void), PF_ARG(obj(demo.Counter), self),
                      PF_ARG(str, name), PF_ARG(int64, start),
                      PF_DOC("Makes a Counter named NAME that starts at START.")),
    PF_METHOD_CHECKED("increment", counter_increment, PF_RET(int64),
                      PF_ARG(obj(demo.Counter), self),
                      PF_DOC("Adds step to the count and returns it.")),
    PF_METHOD_CHECKED("add", counter_add, PF_RET(int64), PF_ARG(obj(demo.Counter), self),
                      PF_ARG(int64, n), PF_DOC("Adds N steps and returns the count.")),
    PF_METHOD_CHECKED("describe", counter_describe, PF_RET(str), PF_ARG(obj(demo.Counter), self),
                      PF_DOC("Says what it is.")),
    /* A packed method checks its own arguments: no signature for C to check. */
    {"reset", counter_reset, NULL, NULL, 0, "Sets the count to its argument (default 0)."},
    PF_STATIC_METHOD_CHECKED("max_step", counter_max_step, PF_RET(int64),
                             PF_DOC("The largest sensible step.")),
};

static const PFObjectTypeDesc k_counter_type = {PF_OBJECT_TYPE_DESC_ABI,
                                                "demo.Counter",
                                                "demo.Base",
                                                sizeof(DemoCounter),
                                                NULL,
                                                "A Base that counts.",
                                                k_counter_fields,
                                                PF_COUNTOF(k_counter_fields),
                                                k_counter_methods,
                                                PF_COUNTOF(k_counter_methods)};
PF_REGISTER_OBJECT_TYPE(k_counter_type);
