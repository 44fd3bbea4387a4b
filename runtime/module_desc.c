/* Modules from descriptor tables: each descriptor checked, then made a function. */
#include <limits.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "module.h"
#include "object_type.h"
#include "typed.h"

static int load_error(const char* where, const char* origin, const char* fn_name) {
  char line[PF_NAME_MAX + 256];
  snprintf(line, sizeof(line), "while loading function '%.*s' of module '%.200s' (%s)", PF_NAME_MAX,
           fn_name, origin, where);
  PFErrorAppendTraceback(line);
  return -1;
}

/* The bytes of a descriptor of layout version `abi`: version 1 ends with
 * `doc`, version 2 with `prepack`. A version this library does not read
 * counts as the whole struct; make_function refuses it. */
static size_t descriptor_size(uint32_t abi) {
  return abi == 1   ? offsetof(PFFuncDescriptor, pack_format)
         : abi == 2 ? offsetof(PFFuncDescriptor, object_type)
                    : sizeof(PFFuncDescriptor);
}

/* 1 when the descriptor registers an object type rather than a function. */
static int is_type_descriptor(const PFFuncDescriptor* d) {
  return d != NULL && d->abi >= 3 && d->abi <= PF_FUNC_DESCRIPTOR_ABI &&
         d->kind == kPFFuncDescriptorType;
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
  if (is_type_descriptor(d))
    return pf_module_check_type(where, origin, index, d->object_type, segs);
  return 0;
}

/* 1 when the descriptor is a checked registration's record (module.h). */
static int is_check_descriptor(const PFFuncDescriptor* d) {
  return d != NULL && d->abi >= 1 && d->abi <= PF_FUNC_DESCRIPTOR_ABI &&
         d->kind == kPFFuncDescriptorCheck;
}

/* 1 when the descriptor is a flags record (module.h). */
static int is_flags_descriptor(const PFFuncDescriptor* d) {
  return d != NULL && d->abi >= 1 && d->abi <= PF_FUNC_DESCRIPTOR_ABI &&
         (d->kind & 0xffffu) == kPFFuncDescriptorFlags;
}

static int check_name(const char* where, const char* origin, size_t index,
                      const PFFuncDescriptor* d) {
  size_t n = d->name ? strnlen(d->name, PF_NAME_MAX + 1) : 0;
  if (n == 0 || n > PF_NAME_MAX)
    return PF_ERROR(kPFErrValueError, "%s: module '%s': descriptor %zu has a %s name", where,
                    origin, index,
                    d->name == NULL ? "NULL"
                    : n == 0        ? "empty"
                                    : "too long");
  return 0;
}

/* Checks the record `d` (descriptor `index`) against the typed function of
 * the same name in `table`, which loaded. */
static int check_record(const char* where, const char* origin, size_t index,
                        const PFFuncDescriptor* d, const PFFuncDescriptor* const* table,
                        size_t count) {
  if (check_name(where, origin, index, d) != 0) return -1;
  const PFFuncDescriptor* f = NULL;
  for (size_t i = 0; i < count && f == NULL; ++i)
    if (table[i] != NULL && table[i]->kind == kPFFuncDescriptorTyped &&
        strcmp(table[i]->name, d->name) == 0)
      f = table[i];
  if (f == NULL)
    return PF_ERROR(kPFErrValueError,
                    "%s: module '%s': function %s was checked (checked.h) but is not a typed "
                    "function of it: the registration was altered",
                    where, origin, d->name);
  if (d->signature == NULL || d->doc == NULL)
    return PF_ERROR(kPFErrValueError,
                    "%s: module '%s': the check record of function %s has a NULL signature or "
                    "has no C types",
                    where, origin, d->name);
  if (strcmp(d->signature, f->signature) != 0)
    return PF_ERROR(kPFErrValueError,
                    "%s: module '%s': function %s was checked as %s but registered as %s: the "
                    "registration was altered",
                    where, origin, d->name, d->signature, f->signature);
  char who[PF_NAME_MAX + 4200];
  snprintf(who, sizeof(who), "%s: module '%.4096s': function %s", where, origin, d->name);
  return pf_sig_check_c_types(who, d->signature, d->doc);
}

/* Gives the function of module `m` that the flags record `d` (descriptor
 * `index`) names its flags. */
static int apply_flags(const char* where, const char* origin, size_t index,
                       const PFFuncDescriptor* d, const pf_module* m) {
  if (check_name(where, origin, index, d) != 0) return -1;
  uint32_t flags = d->kind >> 16;
  PFFunctionHandle f = pf_module_find_own(m, d->name);
  if (f == NULL)
    return PF_ERROR(kPFErrValueError,
                    "%s: module '%s': the flags record of function %s names no function of it",
                    where, origin, d->name);
  if ((flags & ~(uint32_t)PF_FUNC_FLAGS_KNOWN) != 0)
    return PF_ERROR(kPFErrValueError,
                    "%s: module '%s': the flags record of function %s has unknown bits 0x%x "
                    "(this library knows 0x%x: rebuild the module against its header)",
                    where, origin, d->name, (unsigned)(flags & ~(uint32_t)PF_FUNC_FLAGS_KNOWN),
                    (unsigned)PF_FUNC_FLAGS_KNOWN);
  return PFFuncSetFlags(f, flags);
}

/* Makes the function that one (checked) descriptor describes. */
static int make_function(const char* where, const char* origin, size_t index,
                         const PFFuncDescriptor* d, pf_object* lib, PFFunctionHandle* out) {
  if (d == NULL)
    return PF_ERROR(kPFErrValueError, "%s: module '%s': descriptor %zu is NULL", where, origin,
                    index);
  if (d->abi < 1 || d->abi > PF_FUNC_DESCRIPTOR_ABI)
    return PF_ERROR(kPFErrValueError,
                    "%s: module '%s': descriptor %zu has ABI version %u; this library "
                    "reads versions 1 to %u (rebuild the module against this header)",
                    where, origin, index, (unsigned)d->abi, PF_FUNC_DESCRIPTOR_ABI);
  if (d->kind == kPFFuncDescriptorType) /* is_type_descriptor took those of layout 3 */
    return PF_ERROR(kPFErrValueError,
                    "%s: module '%s': descriptor %zu has descriptor kind 3 (an object type), "
                    "which needs layout version 3, not %u",
                    where, origin, index, (unsigned)d->abi);
  if (check_name(where, origin, index, d) != 0) return -1;
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
  } else if (d->kind == kPFFuncDescriptorDirect) {
    if (d->typed == NULL)
      return PF_ERROR(kPFErrValueError, "%s: module '%s': direct function '%s' has a NULL pointer",
                      where, origin, d->name);
    if (PFFuncCreateDirect((PFDirectCFunc)d->typed, NULL, NULL, &f) != 0)
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

/* Registers the module's object types, all or none: those of a library
 * file to be made ready at their first use (so `lib` is only noted), those
 * of the host's own table at once. */
static int register_types(const char* where, const char* origin, pf_object* lib,
                          const PFFuncDescriptor* const* table, size_t count, pf_module* m) {
  int n = 0;
  for (size_t i = 0; i < count; ++i) n += is_type_descriptor(table[i]);
  if (n == 0) return 0;
  const PFObjectTypeDesc** descs = pf_malloc(sizeof(*descs) * (size_t)n);
  if (descs == NULL) return pf_oom(where);
  n = 0;
  for (size_t i = 0; i < count; ++i)
    if (is_type_descriptor(table[i])) descs[n++] = table[i]->object_type;
  int rc = pf_types_register(where, lib, descs, n, &m->type_indices);
  pf_free(descs);
  if (rc != 0) {
    char line[256];
    snprintf(line, sizeof(line), "while registering the object types of module '%.200s' (%s)",
             origin, where);
    PFErrorAppendTraceback(line);
    return -1;
  }
  m->num_types = n;
  return 0;
}

int pf_module_build(const char* where, const char* origin, pf_object* lib, const pf_segments* segs,
                    const PFFuncDescriptor* const* table, size_t count, pf_module** out) {
  if (count > INT_MAX / 2)
    return PF_ERROR(kPFErrValueError, "%s: module '%s' has too many functions (%zu)", where, origin,
                    count);
  /* Everything is checked before anything is read through it. */
  for (size_t i = 0; segs != NULL && i < count; ++i)
    if (check_descriptor(where, origin, i, table[i], segs) != 0) return -1;
  pf_module* m = pf_module_new(where, origin, lib, count);
  if (m == NULL) return -1;
  /* Types first: the module's functions may name them (obj<KEY>). */
  if (register_types(where, origin, segs != NULL ? lib : NULL, table, count, m) != 0) {
    pf_object_release(&m->base);
    return -1;
  }
  for (size_t i = 0; i < count; ++i) {
    PFFunctionHandle f = NULL;
    if (is_type_descriptor(table[i]) || is_check_descriptor(table[i]) ||
        is_flags_descriptor(table[i]))
      continue;
    if (make_function(where, origin, i, table[i], lib, &f) != 0) {
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
  /* The functions are made: each check or flags record now finds its
   * function (none is published yet, so flags set now are set before any
   * host reads them). */
  for (size_t i = 0; i < count; ++i)
    if ((is_check_descriptor(table[i]) &&
         check_record(where, origin, i, table[i], table, count) != 0) ||
        (is_flags_descriptor(table[i]) && apply_flags(where, origin, i, table[i], m) != 0)) {
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
