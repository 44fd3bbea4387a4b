/* Modules: shared libraries whose functions are declared with the
 * PF_REGISTER_* macros, and modules built from descriptor tables. The
 * contract is in c_api.h, section "Modules". */
#define _GNU_SOURCE /* dlinfo, dladdr1, _dl_find_object, RTLD_NOLOAD */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
#define PF_HAVE_DL_FIND_OBJECT 1 /* lock-free; dladdr takes the loader's lock */
#endif

/* A loaded shared library, held open (one dlopen reference) for as long as
 * any object runs its code: the modules built from it, their functions, and
 * every object whose function, finalizer or deleter lies in it. One per
 * library at a time, in g_libs. A private object type; it never leaves the
 * runtime. */
#define PF_OBJECT_LIBRARY 0x4c494255u /* "LIBU" */

typedef struct pf_library pf_library;
struct pf_library {
  pf_object base;
  void* dl;
  const struct link_map* map; /* the library's identity while dl is held */
  uintptr_t start, end;       /* its loaded addresses, mapped while dl is held */
  pf_library* next;           /* in g_libs, under g_libs_lock */
};

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
  /* Imports and the search mark, guarded by g_imports_lock. */
  pf_module** imports;
  int num_imports, imports_cap;
  uint64_t seen; /* the last walk that visited this module */
};

/* Guards every module's import list and search mark. Held only around
 * plain memory work on import lists: no user code and no allocation run
 * under it. */
static pthread_mutex_t g_imports_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_walk_epoch;  /* under g_imports_lock */
static uint64_t g_walk_visits; /* under g_imports_lock */
static uint64_t g_graph_gen;   /* under g_imports_lock; bumped by every import */

/* Guards g_libs. Held only to walk and link the list: dlopen, dlclose
 * (which runs library destructors) and allocation happen outside it. */
static pthread_mutex_t g_libs_lock = PTHREAD_MUTEX_INITIALIZER;
static pf_library* g_libs;

typedef void (*pf_descriptors_fn)(const PFFuncDescriptor* const**,
                                  const PFFuncDescriptor* const**);

/* ---- process-wide setup: fork handlers, the code that never unloads ---- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
pf_code_span pf_static_code[2]; /* the main program; libpackedfunc or the program it is in */
atomic_int pf_static_code_ready;
static const struct link_map* g_self_map; /* for dlopen's search path */
static const ElfW(Ehdr)* g_self_ehdr;     /* "an ELF file for this machine" */

/* A fork copies our locks in whatever state other threads left them; the
 * child has only the forking thread. Taking them first makes the copy
 * consistent; the child gets fresh ones. Never nested elsewhere, so this
 * order cannot deadlock. */
static void fork_prepare(void) {
  pthread_mutex_lock(&g_imports_lock);
  pthread_mutex_lock(&g_libs_lock);
}
static void fork_parent(void) {
  pthread_mutex_unlock(&g_libs_lock);
  pthread_mutex_unlock(&g_imports_lock);
}
static void fork_child(void) {
  pthread_mutex_init(&g_libs_lock, NULL);
  pthread_mutex_init(&g_imports_lock, NULL);
}

/* The span of loaded addresses of the first object dl_iterate_phdr reports
 * (the main program), or of the one that contains data->start. */
static int span_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  pf_code_span* want = data;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || ph->p_memsz == 0) continue;
    uintptr_t a = info->dlpi_addr + ph->p_vaddr;
    if (a < lo) lo = a;
    if (a + ph->p_memsz > hi) hi = a + ph->p_memsz;
  }
  if (lo >= hi) return 0;
  if (want->start != 0 && (want->start < lo || want->start >= hi)) return 0;
  want->start = lo;
  want->end = hi;
  return 1;
}

/* Runs once, possibly inside a library constructor that creates objects
 * while dlopen holds the loader's lock: so nothing here waits for that
 * lock (dl_iterate_phdr takes only the list's write lock; dladdr would
 * wait). */
static void init_once(void) {
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  const void* self = pf_code_addr((void (*)(void))init_once);
  pf_code_span spans[2] = {{0, 0}, {(uintptr_t)self, 0}};
  dl_iterate_phdr(span_cb, &spans[0]);
  if (dl_iterate_phdr(span_cb, &spans[1]) == 0) spans[1].start = 0;
  const ElfW(Ehdr)* eh = NULL;
#ifdef PF_HAVE_DL_FIND_OBJECT
  struct dl_find_object fo;
  if (_dl_find_object((void*)self, &fo) == 0) {
    g_self_map = fo.dlfo_link_map;
    eh = fo.dlfo_map_start; /* the first mapped byte is the ELF header */
  }
#else
  Dl_info info;
  struct link_map* lm = NULL;
  if (dladdr1(self, &info, (void**)&lm, RTLD_DL_LINKMAP) != 0) {
    g_self_map = lm;
    eh = info.dli_fbase;
  }
#endif
  if (eh != NULL && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0) g_self_ehdr = eh;
  pf_static_code[0] = spans[0];
  pf_static_code[1] = spans[1];
  atomic_store_explicit(&pf_static_code_ready, 1, memory_order_release);
}

static void setup(void) {
  if (!atomic_load_explicit(&pf_static_code_ready, memory_order_acquire))
    pthread_once(&g_once, init_once);
}

static void lock_imports(void) {
  setup();
  pthread_mutex_lock(&g_imports_lock);
}

uint64_t pf_mod_import_visits(void) {
  lock_imports();
  uint64_t n = g_walk_visits;
  pthread_mutex_unlock(&g_imports_lock);
  return n;
}

/* ---- loaded libraries ---- */

/* A reference to `o` unless its last one is already gone (it is then being
 * destroyed, and must not come back). */
static int try_retain(pf_object* o) {
  int_fast32_t n = atomic_load_explicit(&o->ref_count, memory_order_relaxed);
  while (n > 0)
    if (atomic_compare_exchange_weak_explicit(&o->ref_count, &n, n + 1, memory_order_relaxed,
                                              memory_order_relaxed))
      return 1;
  return 0;
}

/* The live entry for `map`, or the one whose addresses hold `addr`, with a
 * new reference, or NULL. Lock held. A live entry keeps its library
 * mapped, so its span cannot belong to another library meanwhile. */
static pf_library* find_library(const struct link_map* map, uintptr_t addr) {
  for (pf_library* l = g_libs; l != NULL; l = l->next)
    if ((map ? l->map == map : addr - l->start < l->end - l->start) && try_retain(&l->base))
      return l;
  return NULL;
}

static void library_destroy(pf_object* o) {
  pf_library* l = (pf_library*)o;
  pthread_mutex_lock(&g_libs_lock);
  for (pf_library** p = &g_libs; *p != NULL; p = &(*p)->next) {
    if (*p == l) {
      *p = l->next;
      break;
    }
  }
  pthread_mutex_unlock(&g_libs_lock);
  dlclose(l->dl); /* runs the library's destructors; nothing to report to */
  pf_free(l);
}

/* Takes over one dlopen reference `dl` to the library `map`, loaded at
 * `span`, and writes a new reference to its entry (an existing one, or one
 * made here). */
static int adopt_library(void* dl, const struct link_map* map, pf_code_span span,
                         pf_library** out, const char* where) {
  setup();
  pthread_mutex_lock(&g_libs_lock);
  pf_library* l = find_library(map, 0);
  pthread_mutex_unlock(&g_libs_lock);
  if (l == NULL) {
    pf_library* fresh = pf_malloc(sizeof(*fresh));
    if (fresh == NULL) {
      dlclose(dl);
      return pf_oom(where);
    }
    pthread_mutex_lock(&g_libs_lock);
    l = find_library(map, 0); /* another thread may have been first */
    if (l == NULL) {
      pf_object_init(&fresh->base, PF_OBJECT_LIBRARY, library_destroy);
      fresh->dl = dl;
      fresh->map = map;
      fresh->start = span.start;
      fresh->end = span.end;
      fresh->next = g_libs;
      g_libs = fresh;
      l = fresh;
      dl = NULL;
      fresh = NULL;
    }
    pthread_mutex_unlock(&g_libs_lock);
    pf_free(fresh);
  }
  if (dl != NULL) dlclose(dl); /* the entry holds the library already */
  *out = l;
  return 0;
}

/* The link map of the object that contains `addr` and its loaded span, or
 * NULL. */
static const struct link_map* object_of(const void* addr, pf_code_span* span) {
#ifdef PF_HAVE_DL_FIND_OBJECT
  struct dl_find_object fo;
  if (_dl_find_object((void*)addr, &fo) != 0) return NULL;
  span->start = (uintptr_t)fo.dlfo_map_start;
  span->end = (uintptr_t)fo.dlfo_map_end;
  return fo.dlfo_link_map;
#else
  Dl_info info;
  struct link_map* lm = NULL;
  if (dladdr1(addr, &info, (void**)&lm, RTLD_DL_LINKMAP) == 0) return NULL;
  span->start = (uintptr_t)addr;
  if (dl_iterate_phdr(span_cb, span) == 0) span->start = span->end = 0;
  return lm;
#endif
}

int pf_library_of_code(const void* code, pf_object** out, const char* where) {
  *out = NULL;
  if (code == NULL) return 0;
  setup();
  for (int i = 0; i < 2; ++i)
    if ((uintptr_t)code - pf_static_code[i].start <
        pf_static_code[i].end - pf_static_code[i].start)
      return 0; /* never unloaded */
  /* Most code comes from a library that something holds already. */
  pthread_mutex_lock(&g_libs_lock);
  pf_library* l = find_library(NULL, (uintptr_t)code);
  pthread_mutex_unlock(&g_libs_lock);
  if (l != NULL) {
    *out = &l->base;
    return 0;
  }
  pf_code_span span = {0, 0};
  const struct link_map* map = object_of(code, &span);
  if (map == NULL || map == g_self_map || map->l_name == NULL || map->l_name[0] == '\0')
    return 0; /* in no library, or in the main program */
  /* A new reference to the loaded library, by its own name. */
  void* dl = dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD);
  struct link_map* got = NULL;
  if (dl == NULL || dlinfo(dl, RTLD_DI_LINKMAP, &got) != 0 || got != map) {
    if (dl != NULL) dlclose(dl);
    dlerror();
    return 0; /* not one dlopen can name (the vDSO): it is never unloaded */
  }
  if (adopt_library(dl, map, span, &l, where) != 0) return -1;
  *out = &l->base;
  return 0;
}

/* ---- objects ---- */

static void module_destroy(pf_object* o) {
  pf_module* m = (pf_module*)o;
  for (int i = 0; i < m->count; ++i) PFFuncFree(m->entries[i].func);
  /* Queued, not recursive, when they are the last references: see
   * pf_object_release. */
  for (int i = 0; i < m->num_imports; ++i) pf_object_release(&m->imports[i]->base);
  /* Last: the functions released above may be the library's last users. */
  if (m->lib) pf_object_release(&m->lib->base);
  pf_free(m->entries);
  pf_free(m->names);
  pf_free(m->imports);
  pf_free(m->origin);
  pf_free(m);
}



static int cmp_entries(const void* a, const void* b) {
  return strcmp(((const pf_mod_entry*)a)->name, ((const pf_mod_entry*)b)->name);
}

/* ---- the mapped segments of a loaded library ---- */

#define PF_MAX_SEGMENTS 32

typedef struct {
  uintptr_t start, end;
  uint32_t flags; /* PF_R, PF_W, PF_X */
} pf_segment;

typedef struct {
  const void* dynamic; /* in: the library's link_map l_ld */
  int count;           /* out: -1 when it has more than PF_MAX_SEGMENTS */
  pf_segment seg[PF_MAX_SEGMENTS];
} pf_segments;

/* Finds the object whose dynamic section is at segs->dynamic, and copies
 * its PT_LOAD ranges. */
static int segments_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  pf_segments* s = data;
  int match = 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum && !match; ++i)
    match = info->dlpi_phdr[i].p_type == PT_DYNAMIC &&
            (const void*)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr) == s->dynamic;
  if (!match) return 0;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD || ph->p_memsz == 0) continue;
    if (s->count == PF_MAX_SEGMENTS) {
      s->count = -1;
      break;
    }
    pf_segment* g = &s->seg[s->count++];
    g->start = info->dlpi_addr + ph->p_vaddr;
    g->end = g->start + ph->p_memsz;
    g->flags = ph->p_flags;
  }
  return 1;
}

/* 1 when [p, p + len) lies inside one segment with all of `flags`. */
static int in_segment(const pf_segments* s, const void* p, size_t len, uint32_t flags,
                      uintptr_t* seg_end) {
  uintptr_t a = (uintptr_t)p;
  for (int i = 0; i < s->count; ++i) {
    const pf_segment* g = &s->seg[i];
    if ((g->flags & flags) == flags && a >= g->start && a < g->end && len <= g->end - a) {
      if (seg_end) *seg_end = g->end;
      return 1;
    }
  }
  return 0;
}

/* 1 when `str` starts in a readable segment and ends with a NUL in it. */
static int valid_string(const pf_segments* s, const char* str) {
  uintptr_t end;
  return in_segment(s, str, 1, PF_R, &end) && memchr(str, '\0', end - (uintptr_t)str) != NULL;
}

/* 1 when `code` lies in an executable segment of any loaded object: a
 * module may register a function of a library it links (the function then
 * keeps that library loaded instead). */
static int exec_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  uintptr_t a = *(const uintptr_t*)data;
  for (ElfW(Half) i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)* ph = &info->dlpi_phdr[i];
    uintptr_t start = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && a >= start && a - start < ph->p_memsz)
      return 1;
  }
  return 0;
}

static int valid_code(const pf_segments* s, const void* code) {
  if (in_segment(s, code, 1, PF_X, NULL)) return 1;
  uintptr_t a = (uintptr_t)code;
  return dl_iterate_phdr(exec_cb, &a) != 0;
}

/* ---- building a module from descriptors ---- */

static int load_error(const char* where, const char* origin, const char* fn_name) {
  char line[PF_NAME_MAX + 256];
  snprintf(line, sizeof(line), "while loading function '%.*s' of module '%.200s' (%s)",
           PF_NAME_MAX, fn_name, origin, where);
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
      !in_segment(segs, d, sizeof(d->abi), PF_R, NULL) ||
      !in_segment(segs, d, descriptor_size(d->abi), PF_R, NULL))
    return PF_ERROR(kPFErrValueError,
                            "%s: module '%s': descriptor %zu is at %p, outside the library's "
                            "loaded data (a corrupt \"pf_functions\" section)",
                            where, origin, index, (const void*)d);
  int v2 = d->abi >= 2;
  const char* const strs[4] = {d->name, d->signature, d->doc, v2 ? d->pack_format : NULL};
  static const char* const what[4] = {"name", "signature", "doc", "pack format"};
  for (int i = 0; i < 4; ++i)
    if (strs[i] != NULL && !valid_string(segs, strs[i]))
      return PF_ERROR(kPFErrValueError,
                              "%s: module '%s': descriptor %zu has a %s at %p that is not a "
                              "string in the library's loaded data",
                              where, origin, index, what[i], (const void*)strs[i]);
  const void* code[3] = {pf_code_addr((void (*)(void))d->packed), pf_code_addr(d->typed),
                         v2 ? pf_code_addr((void (*)(void))d->prepack) : NULL};
  static const char* const kind[3] = {"packed", "typed", "pre-pack"};
  for (int i = 0; i < 3; ++i)
    if (code[i] != NULL && !valid_code(segs, code[i]))
      return PF_ERROR(kPFErrValueError,
                              "%s: module '%s': descriptor %zu has a %s function pointer %p "
                              "that is not in any loaded code",
                              where, origin, index, kind[i], code[i]);
  return 0;
}

/* Makes the function that one descriptor describes. */
static int make_function(const char* where, const char* origin, size_t index,
                         const PFFuncDescriptor* d, pf_library* lib, const pf_segments* segs,
                         PFFunctionHandle* out) {
  if (segs != NULL && check_descriptor(where, origin, index, d, segs) != 0) return -1;
  if (d == NULL)
    return PF_ERROR(kPFErrValueError, "%s: module '%s': descriptor %zu is NULL", where,
                            origin, index);
  if (d->abi < 1 || d->abi > PF_FUNC_DESCRIPTOR_ABI)
    return PF_ERROR(kPFErrValueError,
                            "%s: module '%s': descriptor %zu has ABI version %u; this library "
                            "reads versions 1 to %u (rebuild the module against this header)",
                            where, origin, index, (unsigned)d->abi, PF_FUNC_DESCRIPTOR_ABI);
  size_t n = d->name ? strnlen(d->name, PF_NAME_MAX + 1) : 0;
  if (n == 0 || n > PF_NAME_MAX)
    return PF_ERROR(kPFErrValueError,
                            "%s: module '%s': descriptor %zu has a %s name", where, origin,
                            index, d->name == NULL ? "NULL" : n == 0 ? "empty" : "too long");
  const char* pack_format = d->abi >= 2 ? d->pack_format : NULL;
  PFPrePackFunc prepack = d->abi >= 2 ? d->prepack : NULL;
  if ((pack_format == NULL) != (prepack == NULL))
    return PF_ERROR(kPFErrValueError,
                            "%s: module '%s': function '%s' has a pre-pack %s but no %s", where,
                            origin, d->name,
                            prepack ? "hook" : "format", prepack ? "format" : "hook");
  PFFunctionHandle f = NULL;
  if (d->kind == kPFFuncDescriptorPacked) {
    if (d->packed == NULL)
      return PF_ERROR(kPFErrValueError,
                              "%s: module '%s': packed function '%s' has a NULL pointer", where,
                              origin, d->name);
    if (PFFuncCreateFromCFunc(d->packed, NULL, NULL, &f) != 0)
      return load_error(where, origin, d->name);
  } else if (d->kind == kPFFuncDescriptorTyped) {
    if (d->typed == NULL || d->signature == NULL)
      return PF_ERROR(kPFErrValueError,
                              "%s: module '%s': typed function '%s' has a NULL %s", where,
                              origin, d->name, d->typed == NULL ? "pointer" : "signature");
    if (PFFuncCreateFromTyped((void*)pf_code_addr(d->typed), d->signature, &f) != 0)
      return load_error(where, origin, d->name);
  } else {
    return PF_ERROR(kPFErrValueError,
                            "%s: module '%s': function '%s' has unknown descriptor kind %u",
                            where, origin, d->name, (unsigned)d->kind);
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

/* A new module with room for `count` entries and none filled in, holding
 * a reference to `lib` (may be NULL); NULL with a MemoryError. */
static pf_module* new_module(const char* where, const char* origin, pf_library* lib,
                             size_t count) {
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

/* Sorts a new module's entries by name for lookups and lists the names.
 * A name given twice returns -1 with that name in names[0]. */
static int index_entries(pf_module* m) {
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

static int build_module(const char* where, const char* origin, pf_library* lib,
                        const pf_segments* segs, const PFFuncDescriptor* const* table,
                        size_t count, pf_module** out) {
  if (count > INT_MAX / 2)
    return PF_ERROR(kPFErrValueError, "%s: module '%s' has too many functions (%zu)",
                            where, origin, count);
  pf_module* m = new_module(where, origin, lib, count);
  if (m == NULL) return -1;
  for (size_t i = 0; i < count; ++i) {
    PFFunctionHandle f = NULL;
    if (make_function(where, origin, i, table[i], lib, segs, &f) != 0) {
      pf_object_release(&m->base);
      return -1;
    }
    m->entries[i].func = f;
    PFFuncGetInfo(f, &m->entries[i].name, NULL, NULL);
    m->count = (int)i + 1;
  }
  if (index_entries(m) != 0) {
    PFErrorSetFormat(kPFErrKeyError, "%s: module '%s' registers the name '%s' twice", where,
                     origin, m->names[0]);
    pf_object_release(&m->base);
    return -1;
  }
  *out = m;
  return 0;
}

/* ---- checking a file before dlopen reads it ---- */

static const char* file_type(mode_t mode) {
  return S_ISFIFO(mode)   ? "a FIFO"
         : S_ISDIR(mode)  ? "a directory"
         : S_ISCHR(mode)  ? "a character device"
         : S_ISBLK(mode)  ? "a block device"
         : S_ISSOCK(mode) ? "a socket"
                          : "not a regular file";
}

/* errno's text in the caller's buffer (strerror may share one between
 * threads). */
static const char* error_text(int err, char* buf, size_t size) {
  return strerror_r(err, buf, size); /* the GNU strerror_r returns the text */
}

static int read_at(int fd, void* buf, size_t len, off_t off) {
  size_t done = 0;
  while (done < len) {
    ssize_t n = pread(fd, (char*)buf + done, len - done, off + (off_t)done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    done += (size_t)n;
  }
  return 0;
}

/* Why an ELF header is not one this process can load, or NULL. */
static const char* header_problem(const ElfW(Ehdr)* eh) {
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return "invalid ELF header";
  const ElfW(Ehdr)* own = g_self_ehdr;
  unsigned char want_class = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
  if (eh->e_ident[EI_CLASS] != want_class) return "wrong ELF class (32 or 64 bits)";
  if (own != NULL && eh->e_ident[EI_DATA] != own->e_ident[EI_DATA])
    return "ELF file of the wrong byte order";
  if (eh->e_ident[EI_VERSION] != EV_CURRENT) return "unknown ELF version";
  if (own != NULL && eh->e_machine != own->e_machine)
    return "ELF file for another machine";
  return NULL;
}

/* Opens `file` without blocking (a FIFO would block open and read) and
 * checks that it is a regular file holding an ELF shared object for this
 * machine whose program headers and segments lie inside the file, so that
 * dlopen neither hangs nor touches a mapping past the end of the file
 * (SIGBUS). `shown` is the path as the caller gave it, for messages. */
static int check_file(const char* where, const char* shown, const char* file) {
  char text[128];
  int fd = open(file, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return PF_ERROR(kPFErrRuntimeError,
                            "%s: cannot load '%s': %s: cannot open shared object file: %s",
                            where, shown, file, error_text(errno, text, sizeof(text)));
  char why[160] = "";
  struct stat st;
  ElfW(Ehdr) eh;
  if (fstat(fd, &st) != 0) {
    snprintf(why, sizeof(why), "cannot stat it: %s", error_text(errno, text, sizeof(text)));
  } else if (!S_ISREG(st.st_mode)) {
    snprintf(why, sizeof(why), "it is %s, not a regular file", file_type(st.st_mode));
  } else if ((uint64_t)st.st_size < sizeof(eh) || read_at(fd, &eh, sizeof(eh), 0) != 0) {
    snprintf(why, sizeof(why), "file too short (%lld bytes) for an ELF header",
             (long long)st.st_size);
  } else if (header_problem(&eh) != NULL) {
    snprintf(why, sizeof(why), "%s", header_problem(&eh));
  } else if (eh.e_type != ET_DYN) {
    snprintf(why, sizeof(why), "not a shared object (ELF type %u)", (unsigned)eh.e_type);
  } else if (eh.e_phentsize != sizeof(ElfW(Phdr)) || eh.e_phnum == 0) {
    snprintf(why, sizeof(why), "corrupt ELF program header table");
  } else {
    uint64_t size = (uint64_t)st.st_size;
    uint64_t table = (uint64_t)eh.e_phnum * sizeof(ElfW(Phdr));
    if (eh.e_phoff > size || table > size - eh.e_phoff)
      snprintf(why, sizeof(why), "file truncated: its program headers end past its %llu bytes",
               (unsigned long long)size);
    for (ElfW(Half) i = 0; i < eh.e_phnum && why[0] == '\0'; ++i) {
      ElfW(Phdr) ph;
      if (read_at(fd, &ph, sizeof(ph), (off_t)(eh.e_phoff + i * sizeof(ph))) != 0) {
        snprintf(why, sizeof(why), "cannot read program header %u", (unsigned)i);
      } else if (ph.p_filesz > 0 && (ph.p_offset > size || ph.p_filesz > size - ph.p_offset)) {
        snprintf(why, sizeof(why),
                 "file truncated: segment %u needs bytes up to %llu, the file has %llu",
                 (unsigned)i, (unsigned long long)ph.p_offset + ph.p_filesz,
                 (unsigned long long)size);
      } else if (ph.p_type == PT_LOAD && ph.p_filesz > ph.p_memsz) {
        snprintf(why, sizeof(why), "corrupt segment %u (more file than memory)", (unsigned)i);
      }
    }
  }
  close(fd);
  if (why[0] == '\0') return 0;
  if (strcmp(shown, file) == 0)
    return PF_ERROR(kPFErrRuntimeError, "%s: cannot load '%s': %s", where, shown, why);
  return PF_ERROR(kPFErrRuntimeError, "%s: cannot load '%s' (found as '%s'): %s", where,
                          shown, file, why);
}

/* dlopen's search for a name without a slash, without the loader's cache:
 * the directories that RTLD_DI_SERINFO lists for this library (the caller
 * of dlopen), in order. Writes the first path there that opens as a
 * regular file with an ELF header for this machine, as dlopen would take
 * it, or NULL when none does (dlopen then gets the name as it is). */
static int resolve_name(const char* where, const char* name, char** out) {
  *out = NULL;
  const struct link_map* self = g_self_map;
  void* h = self == NULL || self->l_name == NULL || self->l_name[0] == '\0'
                ? dlopen(NULL, RTLD_LAZY)
                : dlopen(self->l_name, RTLD_LAZY | RTLD_NOLOAD);
  if (h == NULL) {
    dlerror();
    return 0;
  }
  Dl_serinfo size;
  if (dlinfo(h, RTLD_DI_SERINFOSIZE, &size) != 0) {
    dlerror();
    dlclose(h);
    return 0;
  }
  Dl_serinfo* info = pf_malloc(size.dls_size);
  if (info == NULL) {
    dlclose(h);
    return pf_oom(where);
  }
  info->dls_size = size.dls_size;
  info->dls_cnt = size.dls_cnt;
  if (dlinfo(h, RTLD_DI_SERINFO, info) != 0) {
    dlerror();
    info->dls_cnt = 0;
  }
  int rc = 0;
  size_t nlen = strlen(name);
  for (unsigned i = 0; i < info->dls_cnt && *out == NULL; ++i) {
    const char* dir = info->dls_serpath[i].dls_name;
    if (dir == NULL || dir[0] == '\0') dir = ".";
    size_t dlen = strlen(dir);
    char* cand = pf_malloc(dlen + nlen + 2);
    if (cand == NULL) {
      rc = pf_oom(where);
      break;
    }
    memcpy(cand, dir, dlen);
    cand[dlen] = '/';
    memcpy(cand + dlen + 1, name, nlen + 1);
    int fd = open(cand, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    ElfW(Ehdr) eh;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
        read_at(fd, &eh, sizeof(eh), 0) == 0 && header_problem(&eh) == NULL)
      *out = cand;
    else
      pf_free(cand);
    if (fd >= 0) close(fd);
  }
  pf_free(info);
  dlclose(h);
  return rc;
}

/* ---- loading ---- */

int PFModLoadFromFile(const char* path, PFModuleHandle* out) {
  static const char* const where = "PFModLoadFromFile";
  PF_CHECK_ARG(path);
  PF_CHECK_ARG(out);
  if (path[0] == '\0')
    return PF_ERROR(kPFErrValueError, "%s: argument 'path' is empty", where);
  setup();
  void* dl = NULL;
  char* found = NULL;
  struct stat st;
  if (strchr(path, '/') == NULL && stat(path, &st) == 0 && !S_ISDIR(st.st_mode)) {
    /* A file here: the one the caller means, which dlopen would not see. */
    size_t n = strlen(path);
    if ((found = pf_malloc(n + 3)) == NULL) return pf_oom(where);
    memcpy(found, "./", 2);
    memcpy(found + 2, path, n + 1);
  } else if (strchr(path, '/') == NULL) {
    /* Already loaded under this name: the loader has mapped it whole. */
    dl = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (dl == NULL && resolve_name(where, path, &found) != 0) return -1;
  }
  if (dl == NULL) {
    const char* file = found ? found : path;
    /* A bare name that no directory holds goes to dlopen as it is: only
     * the loader's cache (ldconfig's system libraries) can still find it. */
    if ((found != NULL || strchr(path, '/') != NULL) && check_file(where, path, file) != 0) {
      pf_free(found);
      return -1;
    }
    dlerror();
    dl = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    pf_free(found);
    if (dl == NULL) {
      const char* e = dlerror();
      return PF_ERROR(kPFErrRuntimeError, "%s: cannot load '%s': %s", where, path,
                              e ? e : "dlopen failed without a message");
    }
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
    return PF_ERROR(kPFErrValueError,
                            "%s: '%s' is not a packedfunc module: it registers no functions "
                            "(no PF_REGISTER_PACKED or PF_REGISTER_TYPED in it)",
                            where, path);
  }
  pf_segments segs;
  segs.dynamic = lm->l_ld;
  segs.count = 0;
  if (dl_iterate_phdr(segments_cb, &segs) == 0 || segs.count <= 0) {
    dlclose(dl);
    return PF_ERROR(kPFErrValueError,
                            "%s: '%s': cannot find the library's loaded segments%s", where, path,
                            segs.count < 0 ? " (more than 32)" : "");
  }
  pf_descriptors_fn get;
  memcpy(&get, &sym, sizeof(get));
  const PFFuncDescriptor* const* begin = NULL;
  const PFFuncDescriptor* const* end = NULL;
  get(&begin, &end);
  uintptr_t b = (uintptr_t)begin, e = (uintptr_t)end;
  if ((begin == NULL) != (end == NULL) || e < b || (e - b) % sizeof(*begin) != 0 ||
      b % _Alignof(const PFFuncDescriptor*) != 0 ||
      (e > b && !in_segment(&segs, begin, e - b, PF_R, NULL))) {
    dlclose(dl);
    return PF_ERROR(kPFErrValueError, "%s: '%s' has a corrupt function table", where,
                            path);
  }
  pf_code_span span = {UINTPTR_MAX, 0};
  for (int i = 0; i < segs.count; ++i) {
    if (segs.seg[i].start < span.start) span.start = segs.seg[i].start;
    if (segs.seg[i].end > span.end) span.end = segs.seg[i].end;
  }
  pf_library* lib = NULL;
  if (adopt_library(dl, lm, span, &lib, where) != 0) return -1;
  pf_module* m = NULL;
  int rc = build_module(where, path, lib, &segs, begin, (e - b) / sizeof(*begin), &m);
  pf_object_release(&lib->base); /* the module and its functions hold it now */
  if (rc != 0) return -1;
  *out = m;
  return 0;
}

int PFModLoadFromDescriptors(const PFFuncDescriptor* const* begin,
                             const PFFuncDescriptor* const* end, PFModuleHandle* out) {
  static const char* const where = "PFModLoadFromDescriptors";
  PF_CHECK_ARG(out);
  if ((begin == NULL) != (end == NULL))
    return PF_ERROR(kPFErrTypeError, "%s: argument '%s' is NULL but '%s' is not",
                            where, begin == NULL ? "begin" : "end",
                            begin == NULL ? "end" : "begin");
  if (end < begin)
    return PF_ERROR(kPFErrValueError, "%s: argument 'end' is before 'begin'", where);
  pf_module* m = NULL;
  if (build_module(where, "<descriptor table>", NULL, NULL, begin,
                   begin ? (size_t)(end - begin) : 0, &m) != 0)
    return -1;
  *out = m;
  return 0;
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
  pf_module* m = new_module(where, origin, NULL, (size_t)num_funcs);
  if (m == NULL) return -1;
  for (int i = 0; i < num_funcs; ++i) {
    PFFuncRetain(funcs[i]);
    m->entries[i].func = funcs[i];
    /* A name is set once (PFFuncSetInfo), so the entry may borrow it. */
    PFFuncGetInfo(funcs[i], &m->entries[i].name, NULL, NULL);
    m->count = i + 1;
  }
  if (index_entries(m) != 0) {
    PF_ERROR(kPFErrKeyError, "%s: module '%.200s' has two functions named '%s'", where, origin,
             m->names[0]);
    pf_object_release(&m->base);
    return -1;
  }
  *out = m;
  return 0;
}

/* ---- the import graph ---- */

static PFFunctionHandle find_own(const pf_module* m, const char* name) {
  pf_mod_entry key = {name, NULL};
  const pf_mod_entry* e = m->count ? bsearch(&key, m->entries, (size_t)m->count,
                                             sizeof(*m->entries), cmp_entries)
                                   : NULL;
  return e ? e->func : NULL;
}

/* Entries of a walk's stack kept on the C stack; longer walks use the heap. */
#define PF_WALK_LOCAL 64

/*
 * Visits every module that `root` imports, directly or through other
 * imports, once each, in the order of a recursive depth-first search (a
 * module before its imports, imports in import order), and returns the
 * first that is `target` or, when target is NULL, that has a function
 * called `name`; NULL when none is. Shared imports are visited once, so the
 * work is linear in the size of the graph, and nothing recurses. Lock
 * held; allocates nothing: when `stack` (cap entries) is too small it
 * returns NULL with *need set to a size that is enough for the next step,
 * and the caller drops the lock, grows the stack and starts again.
 */
static pf_module* walk(pf_module* root, const pf_module* target, const char* name,
                       pf_module** stack, size_t cap, size_t* need) {
  uint64_t epoch = ++g_walk_epoch;
  size_t n = 0;
  root->seen = epoch;
  for (pf_module* m = root;;) {
    if ((size_t)m->num_imports > cap - n) {
      *need = n + (size_t)m->num_imports;
      return NULL;
    }
    for (int i = m->num_imports; i-- > 0;)
      if (m->imports[i]->seen != epoch) stack[n++] = m->imports[i];
    do {
      if (n == 0) return NULL;
      m = stack[--n];
    } while (m->seen == epoch);
    m->seen = epoch;
    g_walk_visits++;
    if (target != NULL ? m == target : find_own(m, name) != NULL) return m;
  }
}

/* Grows a walk's stack outside the lock; 0, or -1 with a MemoryError. */
static int grow_stack(pf_module*** heap, size_t* cap, size_t need, const char* where) {
  size_t want = *cap * 2 > need ? *cap * 2 : need;
  if (want > SIZE_MAX / sizeof(pf_module*)) return pf_oom(where);
  pf_free(*heap);
  *heap = pf_malloc(want * sizeof(pf_module*));
  if (*heap == NULL) return pf_oom(where);
  *cap = want;
  return 0;
}

int PFModGetFunction(PFModuleHandle mod, const char* name, int query_imports,
                     PFFunctionHandle* out) {
  static const char* const where = "PFModGetFunction";
  PF_CHECK_OBJECT(mod, kPFObjectModule);
  PF_CHECK_ARG(name);
  PF_CHECK_ARG(out);
  pf_module* m = mod;
  PFFunctionHandle f = find_own(m, name);
  if (f != NULL) {
    PFFuncRetain(f);
  } else if (query_imports) {
    pf_module* local[PF_WALK_LOCAL];
    pf_module** heap = NULL;
    size_t cap = PF_WALK_LOCAL;
    for (;;) {
      size_t need = 0;
      lock_imports();
      pf_module* hit = walk(m, NULL, name, heap ? heap : local, cap, &need);
      if (hit != NULL) {
        f = find_own(hit, name);
        PFFuncRetain(f); /* before unlocking */
      }
      pthread_mutex_unlock(&g_imports_lock);
      if (need == 0) break;
      if (grow_stack(&heap, &cap, need, where) != 0) return -1;
    }
    pf_free(heap);
  }
  *out = f;
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

int PFModImport(PFModuleHandle mod, PFModuleHandle dep) {
  static const char* const where = "PFModImport";
  PF_CHECK_OBJECT(mod, kPFObjectModule);
  PF_CHECK_OBJECT(dep, kPFObjectModule);
  pf_module* m = mod;
  pf_module* d = dep;
  pf_module* local[PF_WALK_LOCAL];
  pf_module** heap = NULL; /* the walk's stack, when local is too small */
  size_t cap = PF_WALK_LOCAL;
  pf_module** grown = NULL; /* a longer import list, allocated outside the lock */
  int grown_cap = 0;
  int rc = 0;
  uint64_t acyclic_at = 0; /* g_graph_gen + 1 when the cycle check last passed */
  for (;;) {
    pf_module** drop = NULL;
    size_t need = 0;
    int done = 0, want_cap = 0;
    lock_imports();
    for (int i = 0; i < m->num_imports && !done; ++i) done = m->imports[i] == d;
    if (done) {
      /* Already imported: nothing to do. */
    } else if (acyclic_at == g_graph_gen + 1) {
      /* No import since the last check: it still holds. */
    } else if (d == m || walk(d, m, NULL, heap ? heap : local, cap, &need) != NULL) {
      rc = PFErrorSetFormat(kPFErrValueError,
                            "%s: importing module '%s' into '%s' would make an import cycle",
                            where, d->origin, m->origin);
      done = 1;
    } else if (need == 0) {
      acyclic_at = g_graph_gen + 1;
    }
    if (done || need != 0) {
      /* Finished, or the walk needs a longer stack. */
    } else if (m->num_imports < m->imports_cap) {
      pf_object_retain(d);
      m->imports[m->num_imports++] = d;
      g_graph_gen++;
      done = 1;
    } else if (m->num_imports == INT_MAX) {
      rc = PFErrorSetFormat(kPFErrValueError, "%s: module '%s' has too many imports", where,
                            m->origin);
      done = 1;
    } else if (grown != NULL && grown_cap > m->num_imports) {
      if (m->num_imports) memcpy(grown, m->imports, sizeof(*grown) * (size_t)m->num_imports);
      drop = m->imports;
      m->imports = grown;
      m->imports_cap = grown_cap;
      grown = NULL;
      pf_object_retain(d);
      m->imports[m->num_imports++] = d;
      g_graph_gen++;
      done = 1;
    } else {
      want_cap = m->num_imports < INT_MAX / 2 ? (m->num_imports ? m->num_imports * 2 : 4)
                                              : INT_MAX;
    }
    pthread_mutex_unlock(&g_imports_lock);
    pf_free(drop);
    if (done) break;
    if (need != 0) {
      if (grow_stack(&heap, &cap, need, where) != 0) {
        rc = -1;
        break;
      }
    } else {
      pf_free(grown);
      grown_cap = want_cap;
      grown = pf_malloc(sizeof(*grown) * (size_t)grown_cap);
      if (grown == NULL) {
        rc = pf_oom(where);
        break;
      }
    }
  }
  pf_free(grown);
  pf_free(heap);
  return rc;
}

int PFModFree(PFModuleHandle mod) {
  if (mod == NULL) return 0;
  PF_CHECK_OBJECT(mod, kPFObjectModule);
  pf_object_release(mod);
  return 0;
}
