/* Test fixture: functions and methods registered as non-blocking
 * (PF_REGISTER_FLAGS, PF_NONBLOCKING, kPFMethodNonBlocking), and the same
 * code without the flag. Each probe calls a function whose address the
 * host gave (nb.set_probe): Python's PyGILState_Check, so that a probe
 * tells whether its call kept the GIL. */
#include <stdint.h>
#include <string.h>

#include "packedfunc/c_api.h"

static int (*g_probe)(void);

static void set_probe(int64_t addr) {
  uintptr_t a = (uintptr_t)addr;
  memcpy(&g_probe, &a, sizeof g_probe);
}
PF_REGISTER_CHECKED("nb.set_probe", set_probe, PF_RET(void), PF_ARG(int64, addr), PF_NONBLOCKING);

static int32_t probe(void) { return g_probe != NULL ? g_probe() : -1; }
PF_REGISTER_CHECKED("nb.checked", probe, PF_RET(int32), PF_NONBLOCKING, PF_DOC("The probe, kept."));
PF_REGISTER_TYPED("nb.flagged", probe, "int32()");
PF_REGISTER_FLAGS("nb.flagged", kPFFuncNonBlocking);
PF_REGISTER_TYPED("nb.released", probe, "int32()");

/* call2(f, a, b): f(a, b) as an int64, where f may be a Python callback:
 * a non-blocking function that calls back into its host. */
static int64_t call2(PFFunctionHandle f, int64_t a, int64_t b) {
  PFValue args[2] = {{.v_int64 = a}, {.v_int64 = b}}, out;
  int codes[2] = {kPFInt, kPFInt}, out_code;
  if (PFFuncCall(f, args, codes, 2, &out, &out_code) != 0) return -1;
  return out_code == kPFInt ? out.v_int64 : -2;
}
PF_REGISTER_CHECKED("nb.call2", call2, PF_RET(int64), PF_ARG(func, f), PF_ARG(int64, a),
                    PF_ARG(int64, b), PF_NONBLOCKING);

/* An object type whose methods are the probe, kept and released. */
typedef struct {
  int64_t unused;
} NbProbe;
static int32_t probe_method(PFObjectHandle self) {
  (void)self;
  return probe();
}
static const PFMethodDesc k_methods[] = {
    PF_METHOD_CHECKED("held", probe_method, PF_RET(int32), PF_ARG(obj(nb.Probe), self),
                      PF_NONBLOCKING),
    PF_METHOD_CHECKED("released", probe_method, PF_RET(int32), PF_ARG(obj(nb.Probe), self)),
    PF_STATIC_METHOD_CHECKED("held_static", probe, PF_RET(int32), PF_NONBLOCKING),
};
static const PFObjectTypeDesc k_probe = {
    PF_OBJECT_TYPE_DESC_ABI, "nb.Probe", NULL, sizeof(NbProbe), NULL,
    "Probes the GIL.",       NULL,       0,    k_methods,       PF_COUNTOF(k_methods)};
PF_REGISTER_OBJECT_TYPE(k_probe);
