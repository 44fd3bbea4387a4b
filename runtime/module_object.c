/* The module object: named functions sorted for lookup, listed, created from functions, freed. */
#include <stdlib.h>
#include <string.h>

#include "module.h"

static void module_destroy(pf_object* o) {
  pf_module* m = (pf_module*)o;
  for (int i = 0; i < m->count; ++i) PFFuncFree(m->entries[i].func);
  /* Queued, not recursive, when they are the last references: see
   * pf_object_release. */
  for (int i = 0; i < m->num_imports; ++i) pf_object_release(&m->imports[i]->base);
  /* Last: the functions released above may be the library's last users. */
  if (m->lib) pf_object_release(m->lib);
  pf_free(m->entries);
  pf_free(m->names);
  pf_free(m->imports);
  pf_free(m->origin);
  pf_free(m->type_indices);
  pf_free(m);
}

static int cmp_entries(const void* a, const void* b) {
  return strcmp(((const pf_mod_entry*)a)->name, ((const pf_mod_entry*)b)->name);
}

pf_module* pf_module_new(const char* where, const char* origin, pf_object* lib, size_t count) {
  pf_module* m = pf_calloc(1, sizeof(*m));
  if (m == NULL) {
    pf_oom(where);
    return NULL;
  }
  pf_object_init(&m->base, kPFObjectModule, module_destroy);
  if (lib) {
    pf_object_retain(lib);
    m->lib = lib;
  }
  m->origin = pf_strdup(origin);
  m->entries = pf_calloc(count ? count : 1, sizeof(*m->entries));
  m->names = pf_calloc(count + 1, sizeof(*m->names));
  if (m->origin == NULL || m->entries == NULL || m->names == NULL) {
    pf_object_release(&m->base);
    pf_oom(where);
    return NULL;
  }
  return m;
}

void pf_module_add(pf_module* m, PFFunctionHandle f) {
  pf_mod_entry* e = &m->entries[m->count++];
  e->func = f;
  /* A name is set once (PFFuncSetInfo), so the entry may borrow it. */
  PFFuncGetInfo(f, &e->name, NULL, NULL);
}

int pf_module_index(pf_module* m) {
  size_t count = (size_t)m->count;
  qsort(m->entries, count, sizeof(*m->entries), cmp_entries);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0 && strcmp(m->entries[i - 1].name, m->entries[i].name) == 0) {
      m->names[0] = m->entries[i].name;
      return -1;
    }
    m->names[i] = m->entries[i].name;
  }
  return 0;
}

PFFunctionHandle pf_module_find_own(const pf_module* m, const char* name) {
  pf_mod_entry key = {name, NULL};
  const pf_mod_entry* e =
      m->count ? bsearch(&key, m->entries, (size_t)m->count, sizeof(*m->entries), cmp_entries)
               : NULL;
  return e ? e->func : NULL;
}

int PFModCreateFromFunctions(const char* origin, const PFFunctionHandle* funcs, int num_funcs,
                             PFModuleHandle* out) {
  static const char* const where = "PFModCreateFromFunctions";
  PF_CHECK_ARG(out);
  if (num_funcs < 0)
    return PF_ERROR(kPFErrValueError, "%s: argument 'num_funcs' is negative (%d)", where,
                    num_funcs);
  if (num_funcs > 0 && funcs == NULL) return pf_err_null_arg(where, "funcs");
  if (origin == NULL) origin = "<functions>";
  /* Everything is checked before the module takes a reference. */
  for (int i = 0; i < num_funcs; ++i) {
    const char* name = NULL;
    if (!pf_is_object(funcs[i], kPFObjectFunction))
      return PF_ERROR(kPFErrTypeError, "%s: argument 'funcs[%d]' is not a live function handle",
                      where, i);
    PFFuncGetInfo(funcs[i], &name, NULL, NULL);
    if (name == NULL)
      return PF_ERROR(kPFErrValueError,
                      "%s: argument 'funcs[%d]' has no name (give it one with PFFuncSetInfo)",
                      where, i);
  }
  pf_module* m = pf_module_new(where, origin, NULL, (size_t)num_funcs);
  if (m == NULL) return -1;
  for (int i = 0; i < num_funcs; ++i) {
    PFFuncRetain(funcs[i]);
    pf_module_add(m, funcs[i]);
  }
  if (pf_module_index(m) != 0) {
    PF_ERROR(kPFErrKeyError, "%s: module '%.200s' has two functions named '%s'", where, origin,
             m->names[0]);
    pf_object_release(&m->base);
    return -1;
  }
  *out = m;
  return 0;
}

int PFModListFunctionNames(PFModuleHandle mod, int* out_size, const char*** out_array) {
  PF_CHECK_OBJECT(mod, kPFObjectModule);
  PF_CHECK_ARG(out_size);
  PF_CHECK_ARG(out_array);
  pf_module* m = mod;
  *out_size = m->count;
  *out_array = m->names;
  return 0;
}

int PFModListTypes(PFModuleHandle mod, int* out_size, const uint32_t** out_array) {
  PF_CHECK_OBJECT(mod, kPFObjectModule);
  PF_CHECK_ARG(out_size);
  PF_CHECK_ARG(out_array);
  pf_module* m = mod;
  *out_size = m->num_types;
  *out_array = m->type_indices;
  return 0;
}

int PFModFree(PFModuleHandle mod) {
  if (mod == NULL) return 0;
  PF_CHECK_OBJECT(mod, kPFObjectModule);
  pf_object_release(mod);
  return 0;
}
