/* Test fixture: a descriptor whose pre-pack hook points at data, not code;
 * binding a constant would call it and crash, so loading must refuse it. */
#include <stdint.h>

#include "packedfunc/c_api.h"

static int fine(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)ret, (void)res;
  return 0;
}
PF_REGISTER_PACKED("badprepack.fine", fine);

static const char not_code[64] = "this is data, not code";
static const PFFuncDescriptor bad_hook = {PF_FUNC_DESCRIPTOR_ABI,
                                          kPFFuncDescriptorPacked,
                                          "badprepack.hook",
                                          fine,
                                          NULL,
                                          NULL,
                                          NULL,
                                          "badprepack/layout",
                                          (PFPrePackFunc)(uintptr_t)not_code};
__attribute__((used, section("pf_functions"))) static const PFFuncDescriptor* const bad_entry =
    &bad_hook;
