/* Modules from descriptor tables: each descriptor checked, then made a function. */
#include <limits.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "module.h"

static int load_error(const char* where, const char* origin, const char* fn_name) {
  char line[PF_NAME_MAX + 256];
  snprintf(line, sizeof(line), "while loading function '%.*s' of module '%.200s' (%s)", PF_NAME_MAX,
           fn_name, origin, where);
  PFErrorAppendTraceback(line);
  return -1;
}

/* The bytes of a descriptor of layout version `abi`: version 1 ends with
 * `doc`. A version this library does not read counts as the whole struct;
 * make_function refuses it. */
static size_t descriptor_size(uint32_t abi) {
  return abi == 1 ? offsetof(PFFuncDescriptor, pack_format) : sizeof(PFFuncDescriptor);
}

/* Checks, before anything reads through them, that a library's descriptor
 * and the strings and code it points to lie in the library. */
static int check_descriptor(const char* where, const char* origin, size_t index,
                            const PFFuncDescriptor* d, const pf_segments* segs) {
  if (d == NULL) return 0; /* reported by make_function */
  /* The version comes first and says how much of the descriptor there is. */
  if ((uintptr_t)d % _Alignof(PFFuncDescriptor) != 0 ||
      !pf_elf_in_segment(segs, d, sizeof(d->abi), PF_R, NULL) ||
      !pf_elf_in_segment(segs, d, descriptor_size(d->abi), PF_R, NULL))
    return PF_ERROR(kPFErrValueError,
                    "%s: module '%s': descriptor %zu is at %p, outside the library's "
                    "loaded data (a corrupt \"pf_functions\" section)",
                    where, origin, index, (const void*)d);
  int v2 = d->abi >= 2;
  const char* const strs[4] = {d->name, d->signature, d->doc, v2 ? d->pack_format : NULL};
  static const char* const what[4] = {"name", "signature", "doc", "pack format"};
  for (int i = 0; i < 4; ++i)
    if (strs[i] != NULL && !pf_elf_valid_string(segs, strs[i]))
      return PF_ERROR(kPFErrValueError,
                      "%s: module '%s': descriptor %zu has a %s at %p that is not a "
                      "string in the library's loaded data",
                      where, origin, index, what[i], (const void*)strs[i]);
  const void* code[3] = {pf_code_addr((void (*)(void))d->packed), pf_code_addr(d->typed),
                         v2 ? pf_code_addr((void (*)(void))d->prepack) : NULL};
  static const char* const kind[3] = {"packed", "typed", "pre-pack"};
  for (int i = 0; i < 3; ++i)
    if (code[i] != NULL && !pf_elf_valid_code(segs, code[i]))
      return PF_ERROR(kPFErrValueError,
                      "%s: module '%s': descriptor %zu has a %s function pointer %p "
                      "that is not in any loaded code",
                      where, origin, index, kind[i], code[i]);
  return 0;
}

/* Makes the function that one descriptor describes. */
static int make_function(const char* where, const char* origin, size_t index,
                         const PFFuncDescriptor* d, pf_object* lib, const pf_segments* segs,
                         PFFunctionHandle* out) {
  if (segs != NULL && check_descriptor(where, origin, index, d, segs) != 0) return -1;
  if (d == NULL)
    return PF_ERROR(kPFErrValueError, "%s: module '%s': descriptor %zu is NULL", where, origin,
                    index);
  if (d->abi < 1 || d->abi > PF_FUNC_DESCRIPTOR_ABI)
    return PF_ERROR(kPFErrValueError,
                    "%s: module '%s': descriptor %zu has ABI version %u; this library "
                    "reads versions 1 to %u (rebuild the module against this header)",
                    where, origin, index, (unsigned)d->abi, PF_FUNC_DESCRIPTOR_ABI);
  size_t n = d->name ? strnlen(d->name, PF_NAME_MAX + 1) : 0;
  if (n == 0 || n > PF_NAME_MAX)
    return PF_ERROR(kPFErrValueError, "%s: module '%s': descriptor %zu has a %s name", where,
                    origin, index, d->name == NULL ? "NULL" : n == 0 ? "empty" : "too long");
  const char* pack_format = d->abi >= 2 ? d->pack_format : NULL;
  PFPrePackFunc prepack = d->abi >= 2 ? d->prepack : NULL;
  if ((pack_format == NULL) != (prepack == NULL))
    return PF_ERROR(kPFErrValueError, "%s: module '%s': function '%s' has a pre-pack %s but no %s",
                    where, origin, d->name, prepack ? "hook" : "format",
                    prepack ? "format" : "hook");
  PFFunctionHandle f = NULL;
  if (d->kind == kPFFuncDescriptorPacked) {
    if (d->packed == NULL)
      return PF_ERROR(kPFErrValueError, "%s: module '%s': packed function '%s' has a NULL pointer",
                      where, origin, d->name);
    if (PFFuncCreateFromCFunc(d->packed, NULL, NULL, &f) != 0)
      return load_error(where, origin, d->name);
  } else if (d->kind == kPFFuncDescriptorTyped) {
    if (d->typed == NULL || d->signature == NULL)
      return PF_ERROR(kPFErrValueError, "%s: module '%s': typed function '%s' has a NULL %s", where,
                      origin, d->name, d->typed == NULL ? "pointer" : "signature");
    if (PFFuncCreateFromTyped((void*)pf_code_addr(d->typed), d->signature, &f) != 0)
      return load_error(where, origin, d->name);
  } else {
    return PF_ERROR(kPFErrValueError,
                    "%s: module '%s': function '%s' has unknown descriptor kind %u", where, origin,
                    d->name, (unsigned)d->kind);
  }
  /* A typed function already carries its canonical signature. The library
   * owner is also found from the code address; naming it here keeps that
   * true where the dynamic loader cannot tell. */
  const char* sig = NULL;
  PFFuncGetInfo(f, NULL, &sig, NULL);
  if (PFFuncSetInfo(f, d->name, sig ? NULL : d->signature, d->doc) != 0 ||
      (prepack && PFFuncSetPrePack(f, pack_format, prepack) != 0) ||
      (lib && pf_func_set_owner(f, lib) != 0)) {
    PFFuncFree(f);
    return load_error(where, origin, d->name);
  }
  *out = f;
  return 0;
}

int pf_module_build(const char* where, const char* origin, pf_object* lib, const pf_segments* segs,
                    const PFFuncDescriptor* const* table, size_t count, pf_module** out) {
  if (count > INT_MAX / 2)
    return PF_ERROR(kPFErrValueError, "%s: module '%s' has too many functions (%zu)", where, origin,
                    count);
  pf_module* m = pf_module_new(where, origin, lib, count);
  if (m == NULL) return -1;
  for (size_t i = 0; i < count; ++i) {
    PFFunctionHandle f = NULL;
    if (make_function(where, origin, i, table[i], lib, segs, &f) != 0) {
      pf_object_release(&m->base);
      return -1;
    }
    pf_module_add(m, f);
  }
  if (pf_module_index(m) != 0) {
    PF_ERROR(kPFErrKeyError, "%s: module '%s' registers the name '%s' twice", where, origin,
             m->names[0]);
    pf_object_release(&m->base);
    return -1;
  }
  *out = m;
  return 0;
}

int PFModLoadFromDescriptors(const PFFuncDescriptor* const* begin,
                             const PFFuncDescriptor* const* end, PFModuleHandle* out) {
  static const char* const where = "PFModLoadFromDescriptors";
  PF_CHECK_ARG(out);
  if ((begin == NULL) != (end == NULL))
    return PF_ERROR(kPFErrTypeError, "%s: argument '%s' is NULL but '%s' is not", where,
                    begin == NULL ? "begin" : "end", begin == NULL ? "end" : "begin");
  if (end < begin) return PF_ERROR(kPFErrValueError, "%s: argument 'end' is before 'begin'", where);
  pf_module* m = NULL;
  if (pf_module_build(where, "<descriptor table>", NULL, NULL, begin,
                      begin ? (size_t)(end - begin) : 0, &m) != 0)
    return -1;
  *out = m;
  return 0;
}
