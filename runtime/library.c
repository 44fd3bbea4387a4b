/* Loaded shared libraries as objects, kept open while their code may run. */
#define _GNU_SOURCE /* dlinfo, dladdr1, _dl_find_object, RTLD_NOLOAD */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "module.h"
#include "object_type.h"

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

/* Guards g_libs. Held only to walk and link the list: dlopen, dlclose
 * (which runs library destructors) and allocation happen outside it. */
static pthread_mutex_t g_libs_lock = PTHREAD_MUTEX_INITIALIZER;
static pf_library* g_libs;

/* ---- process-wide setup ---- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
pf_code_span pf_static_code[2]; /* the main program; libpackedfunc or the program it is in */
atomic_int pf_static_code_ready;
const struct link_map* pf_self_map;
const ElfW(Ehdr) * pf_self_ehdr;

/* A fork copies the lock in whatever state other threads left it; the
 * child has only the forking thread. Taking it first makes the copy
 * consistent; the child gets a fresh one. */
static void fork_prepare(void) { pthread_mutex_lock(&g_libs_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&g_libs_lock); }
static void fork_child(void) { pthread_mutex_init(&g_libs_lock, NULL); }

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
    pf_self_map = fo.dlfo_link_map;
    eh = fo.dlfo_map_start; /* the first mapped byte is the ELF header */
  }
#else
  Dl_info info;
  struct link_map* lm = NULL;
  if (dladdr1(self, &info, (void**)&lm, RTLD_DL_LINKMAP) != 0) {
    pf_self_map = lm;
    eh = info.dli_fbase;
  }
#endif
  if (eh != NULL && memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0) pf_self_ehdr = eh;
  pf_static_code[0] = spans[0];
  pf_static_code[1] = spans[1];
  atomic_store_explicit(&pf_static_code_ready, 1, memory_order_release);
}

void pf_library_setup(void) {
  if (!atomic_load_explicit(&pf_static_code_ready, memory_order_acquire))
    pthread_once(&g_once, init_once);
}

/* ---- the library objects ---- */

/* The live entry for `map`, or the one whose addresses hold `addr`, with a
 * new reference, or NULL. Lock held. A live entry keeps its library
 * mapped, so its span cannot belong to another library meanwhile. */
static pf_library* find_library(const struct link_map* map, uintptr_t addr) {
  for (pf_library* l = g_libs; l != NULL; l = l->next)
    if ((map ? l->map == map : addr - l->start < l->end - l->start) &&
        pf_object_try_retain(&l->base))
      return l;
  return NULL;
}

static void library_destroy(pf_object* o) {
  pf_library* l = (pf_library*)o;
  /* Object types whose code is here and was never used go dormant. */
  pf_types_library_gone(o);
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

int pf_library_adopt(void* dl, const struct link_map* map, pf_code_span span, pf_object** out,
                     const char* where) {
  pf_library_setup();
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
  *out = &l->base;
  return 0;
}

/* ---- the library of a code address ---- */

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
  pf_library_setup();
  for (int i = 0; i < 2; ++i)
    if ((uintptr_t)code - pf_static_code[i].start < pf_static_code[i].end - pf_static_code[i].start)
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
  if (map == NULL || map == pf_self_map || map->l_name == NULL || map->l_name[0] == '\0')
    return 0; /* in no library, or in the main program */
  /* A new reference to the loaded library, by its own name. */
  void* dl = dlopen(map->l_name, RTLD_LAZY | RTLD_NOLOAD);
  struct link_map* got = NULL;
  if (dl == NULL || dlinfo(dl, RTLD_DI_LINKMAP, &got) != 0 || got != map) {
    if (dl != NULL) dlclose(dl);
    dlerror();
    return 0; /* not one dlopen can name (the vDSO): it is never unloaded */
  }
  return pf_library_adopt(dl, map, span, out, where);
}
