/* Modules: shared libraries whose functions are declared with the
 * PF_REGISTER_* macros, and modules built from descriptor tables. The
 * contract is in c_api.h, section "Modules". */
#define _GNU_SOURCE /* dlinfo, dladdr1, RTLD_DI_LINKMAP */
#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A loaded shared library: the owner of every function a module built from
 * it, so that dlclose runs only after the module and all those functions are
 * gone. A private object type; it never leaves the runtime. */
#define PF_OBJECT_LIBRARY 0x4c494255u /* "LIBU" */

typedef struct {
  pf_object base;
  void* dl;
} pf_library;

typedef struct {
  const char* name; /* the function's metadata name: lives as long as it */
  PFFunctionHandle func;
} pf_mod_entry;

typedef struct pf_module pf_module;
struct pf_module {
  pf_object base;
  pf_library* lib; /* NULL for a descriptor table */
  char* origin;    /* the path, for messages */
  int count;
  pf_mod_entry* entries; /* sorted by name; immutable after load */
  const char** names;    /* the same names, NULL-terminated */
  /* Imports, guarded by g_imports_lock. */
  pf_module** imports;
  int num_imports;
};

/* Guards every module's import list. Held only around plain memory work on
 * import lists: no user code and no allocation run under it. */
static pthread_mutex_t g_imports_lock = PTHREAD_MUTEX_INITIALIZER;

typedef void (*pf_descriptors_fn)(const PFFuncDescriptor* const**,
                                  const PFFuncDescriptor* const**);

/* ---- objects ---- */

static void library_destroy(pf_object* o) {
  pf_library* l = (pf_library*)o;
  if (l->dl) dlclose(l->dl); /* nothing to report to: a failure is ignored */
  pf_free(l);
}

static void module_destroy(pf_object* o) {
  pf_module* m = (pf_module*)o;
  for (int i = 0; i < m->count; ++i) PFFuncFree(m->entries[i].func);
  for (int i = 0; i < m->num_imports; ++i) pf_object_release(&m->imports[i]->base);
  /* Last: the functions released above may be the library's last users. */
  if (m->lib) pf_object_release(&m->lib->base);
  pf_free(m->entries);
  pf_free(m->names);
  pf_free(m->imports);
  pf_free(m->origin);
  pf_free(m);
}

static int check_module(const char* where, const char* arg, PFModuleHandle mod) {
  if (pf_is_object(mod, kPFObjectModule)) return 0;
  return PFErrorSetFormat(kPFErrTypeError, "%s: argument '%s' is %s", where, arg,
                          mod ? "not a live module handle" : "NULL");
}

static int cmp_entries(const void* a, const void* b) {
  return strcmp(((const pf_mod_entry*)a)->name, ((const pf_mod_entry*)b)->name);
}

/* ---- building a module from descriptors ---- */

static int load_error(const char* where, const char* origin, const char* fn_name) {
  char line[PF_NAME_MAX + 256];
  snprintf(line, sizeof(line), "while loading function '%.*s' of module '%.200s' (%s)",
           PF_NAME_MAX, fn_name, origin, where);
  PFErrorAppendTraceback(line);
  return -1;
}

/* Makes the function that one descriptor describes. */
static int make_function(const char* where, const char* origin, size_t index,
                         const PFFuncDescriptor* d, pf_library* lib, PFFunctionHandle* out) {
  if (d == NULL)
    return PFErrorSetFormat(kPFErrValueError, "%s: module '%s': descriptor %zu is NULL", where,
                            origin, index);
  if (d->abi != PF_FUNC_DESCRIPTOR_ABI)
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: module '%s': descriptor %zu has ABI version %u; this library "
                            "reads version %d (rebuild the module against this header)",
                            where, origin, index, (unsigned)d->abi, PF_FUNC_DESCRIPTOR_ABI);
  size_t n = d->name ? strnlen(d->name, PF_NAME_MAX + 1) : 0;
  if (n == 0 || n > PF_NAME_MAX)
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: module '%s': descriptor %zu has a %s name", where, origin,
                            index, d->name == NULL ? "NULL" : n == 0 ? "empty" : "too long");
  PFFunctionHandle f = NULL;
  if (d->kind == kPFFuncDescriptorPacked) {
    if (d->packed == NULL)
      return PFErrorSetFormat(kPFErrValueError,
                              "%s: module '%s': packed function '%s' has a NULL pointer", where,
                              origin, d->name);
    if (PFFuncCreateFromCFunc(d->packed, NULL, NULL, &f) != 0)
      return load_error(where, origin, d->name);
  } else if (d->kind == kPFFuncDescriptorTyped) {
    if (d->typed == NULL || d->signature == NULL)
      return PFErrorSetFormat(kPFErrValueError,
                              "%s: module '%s': typed function '%s' has a NULL %s", where,
                              origin, d->name, d->typed == NULL ? "pointer" : "signature");
    /* POSIX guarantees that function and object pointers convert. */
    void* fn;
    memcpy(&fn, &d->typed, sizeof(fn));
    if (PFFuncCreateFromTyped(fn, d->signature, &f) != 0)
      return load_error(where, origin, d->name);
  } else {
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: module '%s': function '%s' has unknown descriptor kind %u",
                            where, origin, d->name, (unsigned)d->kind);
  }
  /* A typed function already carries its canonical signature. */
  const char* sig = NULL;
  PFFuncGetInfo(f, NULL, &sig, NULL);
  if (PFFuncSetInfo(f, d->name, sig ? NULL : d->signature, d->doc) != 0 ||
      (lib && pf_func_set_owner(f, lib) != 0)) {
    PFFuncFree(f);
    return load_error(where, origin, d->name);
  }
  *out = f;
  return 0;
}

static int build_module(const char* where, const char* origin, pf_library* lib,
                        const PFFuncDescriptor* const* table, size_t count,
                        pf_module** out) {
  if (count > INT_MAX / 2)
    return PFErrorSetFormat(kPFErrValueError, "%s: module '%s' has too many functions (%zu)",
                            where, origin, count);
  pf_module* m = pf_calloc(1, sizeof(*m));
  if (m == NULL) return pf_oom(where);
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
    return pf_oom(where);
  }
  for (size_t i = 0; i < count; ++i) {
    PFFunctionHandle f = NULL;
    if (make_function(where, origin, i, table[i], lib, &f) != 0) {
      pf_object_release(&m->base);
      return -1;
    }
    m->entries[i].func = f;
    PFFuncGetInfo(f, &m->entries[i].name, NULL, NULL);
    m->count = (int)i + 1;
  }
  qsort(m->entries, count, sizeof(*m->entries), cmp_entries);
  for (size_t i = 0; i < count; ++i) {
    if (i > 0 && strcmp(m->entries[i - 1].name, m->entries[i].name) == 0) {
      PFErrorSetFormat(kPFErrKeyError, "%s: module '%s' registers the name '%s' twice", where,
                       origin, m->entries[i].name);
      pf_object_release(&m->base);
      return -1;
    }
    m->names[i] = m->entries[i].name;
  }
  *out = m;
  return 0;
}

/* ---- loading ---- */

int PFModLoadFromFile(const char* path, PFModuleHandle* out) {
  static const char* const where = "PFModLoadFromFile";
  if (path == NULL || out == NULL)
    return PFErrorSetFormat(kPFErrTypeError, "%s: argument '%s' is NULL", where,
                            path == NULL ? "path" : "out");
  if (path[0] == '\0')
    return PFErrorSetFormat(kPFErrValueError, "%s: argument 'path' is empty", where);
  dlerror();
  void* dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (dl == NULL) {
    const char* e = dlerror();
    return PFErrorSetFormat(kPFErrRuntimeError, "%s: cannot load '%s': %s", where, path,
                            e ? e : "dlopen failed without a message");
  }
  /* The accessor must be the library's own: dlsym also searches the
   * libraries it depends on, and one of those may be a module. */
  dlerror();
  void* sym = dlsym(dl, "PFModuleDescriptorsV1");
  struct link_map* lm = NULL;
  struct link_map* sym_lm = NULL;
  Dl_info info;
  if (sym == NULL || dlinfo(dl, RTLD_DI_LINKMAP, &lm) != 0 ||
      dladdr1(sym, &info, (void**)&sym_lm, RTLD_DL_LINKMAP) == 0 || sym_lm != lm) {
    dlclose(dl);
    return PFErrorSetFormat(kPFErrValueError,
                            "%s: '%s' is not a packedfunc module: it registers no functions "
                            "(no PF_REGISTER_PACKED or PF_REGISTER_TYPED in it)",
                            where, path);
  }
  pf_descriptors_fn get;
  memcpy(&get, &sym, sizeof(get));
  const PFFuncDescriptor* const* begin = NULL;
  const PFFuncDescriptor* const* end = NULL;
  get(&begin, &end);
  if ((begin == NULL) != (end == NULL) || end < begin) {
    dlclose(dl);
    return PFErrorSetFormat(kPFErrValueError, "%s: '%s' has a corrupt function table", where,
                            path);
  }
  pf_library* lib = pf_malloc(sizeof(*lib));
  if (lib == NULL) {
    dlclose(dl);
    return pf_oom(where);
  }
  pf_object_init(&lib->base, PF_OBJECT_LIBRARY, library_destroy);
  lib->dl = dl;
  pf_module* m = NULL;
  int rc = build_module(where, path, lib, begin, begin ? (size_t)(end - begin) : 0, &m);
  pf_object_release(&lib->base); /* the module and its functions hold it now */
  if (rc != 0) return -1;
  *out = m;
  return 0;
}

int PFModLoadFromDescriptors(const PFFuncDescriptor* const* begin,
                             const PFFuncDescriptor* const* end, PFModuleHandle* out) {
  static const char* const where = "PFModLoadFromDescriptors";
  if (out == NULL)
    return PFErrorSetFormat(kPFErrTypeError, "%s: argument 'out' is NULL", where);
  if ((begin == NULL) != (end == NULL))
    return PFErrorSetFormat(kPFErrTypeError, "%s: argument '%s' is NULL but '%s' is not",
                            where, begin == NULL ? "begin" : "end",
                            begin == NULL ? "end" : "begin");
  if (end < begin)
    return PFErrorSetFormat(kPFErrValueError, "%s: argument 'end' is before 'begin'", where);
  pf_module* m = NULL;
  if (build_module(where, "<descriptor table>", NULL, begin,
                   begin ? (size_t)(end - begin) : 0, &m) != 0)
    return -1;
  *out = m;
  return 0;
}

/* ---- lookup ---- */

static PFFunctionHandle find_own(const pf_module* m, const char* name) {
  pf_mod_entry key = {name, NULL};
  const pf_mod_entry* e = m->count ? bsearch(&key, m->entries, (size_t)m->count,
                                             sizeof(*m->entries), cmp_entries)
                                   : NULL;
  return e ? e->func : NULL;
}

/* Depth-first through the imports, in import order. Called with the lock
 * held; the import graph is acyclic (PFModImport refuses cycles). */
static PFFunctionHandle find_in_imports(const pf_module* m, const char* name) {
  for (int i = 0; i < m->num_imports; ++i) {
    PFFunctionHandle f = find_own(m->imports[i], name);
    if (f == NULL) f = find_in_imports(m->imports[i], name);
    if (f != NULL) return f;
  }
  return NULL;
}

int PFModGetFunction(PFModuleHandle mod, const char* name, int query_imports,
                     PFFunctionHandle* out) {
  static const char* const where = "PFModGetFunction";
  if (check_module(where, "mod", mod) != 0) return -1;
  if (name == NULL || out == NULL)
    return PFErrorSetFormat(kPFErrTypeError, "%s: argument '%s' is NULL", where,
                            name == NULL ? "name" : "out");
  pf_module* m = mod;
  PFFunctionHandle f = find_own(m, name);
  if (f != NULL) {
    PFFuncRetain(f);
  } else if (query_imports) {
    pthread_mutex_lock(&g_imports_lock);
    f = find_in_imports(m, name);
    if (f != NULL) PFFuncRetain(f); /* before unlocking */
    pthread_mutex_unlock(&g_imports_lock);
  }
  *out = f;
  return 0;
}

int PFModListFunctionNames(PFModuleHandle mod, int* out_size, const char*** out_array) {
  static const char* const where = "PFModListFunctionNames";
  if (check_module(where, "mod", mod) != 0) return -1;
  if (out_size == NULL || out_array == NULL)
    return PFErrorSetFormat(kPFErrTypeError, "%s: argument '%s' is NULL", where,
                            out_size == NULL ? "out_size" : "out_array");
  pf_module* m = mod;
  *out_size = m->count;
  *out_array = m->names;
  return 0;
}

/* ---- imports ---- */

/* 1 when `target` is `from` or reachable from it. Lock held. */
static int reaches(const pf_module* from, const pf_module* target) {
  if (from == target) return 1;
  for (int i = 0; i < from->num_imports; ++i)
    if (reaches(from->imports[i], target)) return 1;
  return 0;
}

int PFModImport(PFModuleHandle mod, PFModuleHandle dep) {
  static const char* const where = "PFModImport";
  if (check_module(where, "mod", mod) != 0 || check_module(where, "dep", dep) != 0) return -1;
  pf_module* m = mod;
  pf_module* d = dep;
  pf_module** grown = NULL; /* allocated outside the lock */
  int grown_cap = 0;
  for (;;) {
    pthread_mutex_lock(&g_imports_lock);
    int rc = 0, done = 0;
    pf_module** drop = NULL;
    for (int i = 0; i < m->num_imports && !done; ++i) done = m->imports[i] == d;
    if (done) {
      /* Already imported: nothing to do. */
    } else if (reaches(d, m)) {
      rc = PFErrorSetFormat(kPFErrValueError,
                            "%s: importing module '%s' into '%s' would make an import cycle",
                            where, d->origin, m->origin);
      done = 1;
    } else if (grown != NULL && grown_cap > m->num_imports) {
      if (m->num_imports) memcpy(grown, m->imports, sizeof(*grown) * (size_t)m->num_imports);
      drop = m->imports;
      m->imports = grown;
      grown = NULL;
      pf_object_retain(d);
      m->imports[m->num_imports++] = d;
      done = 1;
    }
    int need = m->num_imports + 1;
    pthread_mutex_unlock(&g_imports_lock);
    if (done) {
      pf_free(drop);
      pf_free(grown);
      return rc;
    }
    pf_free(grown);
    grown_cap = need;
    grown = pf_malloc(sizeof(*grown) * (size_t)grown_cap);
    if (grown == NULL) return pf_oom(where);
  }
}

int PFModFree(PFModuleHandle mod) {
  if (mod == NULL) return 0;
  if (!pf_is_object(mod, kPFObjectModule))
    return PFErrorSetFormat(kPFErrTypeError,
                            "PFModFree: argument 'mod' is not a live module handle");
  pf_object_release(mod);
  return 0;
}
