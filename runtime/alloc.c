/* The one allocator behind every runtime allocation. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void* default_malloc(size_t n, void* ud) {
  (void)ud;
  return malloc(n);
}
static void* default_realloc(void* p, size_t n, void* ud) {
  (void)ud;
  return realloc(p, n);
}
static void default_free(void* p, void* ud) {
  (void)ud;
  free(p);
}

static PFAllocator g_alloc = {default_malloc, default_realloc, default_free, NULL};
static atomic_int g_alloc_used;

/* A refusal before the first allocation is recorded without allocating
 * (and so without a traceback line): it must not count as the runtime's
 * first allocation, or a corrected retry would fail. */
int PFSetAllocator(const PFAllocator* a) {
  if (a != NULL && (a->malloc_fn == NULL || a->realloc_fn == NULL || a->free_fn == NULL))
    return pf_error_static(kPFErrTypeError,
                           "PFSetAllocator: argument 'allocator' has a NULL function");
  if (atomic_load(&g_alloc_used))
    return PF_ERROR(kPFErrRuntimeError,
                    "PFSetAllocator: the runtime has already allocated; "
                    "install the allocator before the first call");
  if (a == NULL) {
    g_alloc = (PFAllocator){default_malloc, default_realloc, default_free, NULL};
  } else {
    g_alloc = *a;
  }
  return 0;
}

/* A request beyond the largest possible object fails here, without
 * reaching the allocator (some allocators, and the sanitizers' ones, treat
 * such a size as a fatal error rather than returning NULL). */
void* pf_malloc(size_t n) {
  if (n > PF_MAX_OBJECT_SIZE) return NULL;
  atomic_store_explicit(&g_alloc_used, 1, memory_order_relaxed);
  return g_alloc.malloc_fn(n ? n : 1, g_alloc.user_data);
}

void* pf_realloc(void* p, size_t n) {
  if (n > PF_MAX_OBJECT_SIZE) return NULL;
  atomic_store_explicit(&g_alloc_used, 1, memory_order_relaxed);
  return g_alloc.realloc_fn(p, n ? n : 1, g_alloc.user_data);
}

void* pf_calloc(size_t n, size_t size) {
  if (size != 0 && n > SIZE_MAX / size) return NULL;
  void* p = pf_malloc(n * size);
  if (p != NULL) memset(p, 0, n * size);
  return p;
}

void pf_free(void* p) {
  if (p != NULL) g_alloc.free_fn(p, g_alloc.user_data);
}

char* pf_strdup(const char* s) {
  size_t n = strlen(s) + 1; /* a string in memory is shorter than SIZE_MAX */
  char* d = pf_malloc(n);
  if (d != NULL) memcpy(d, s, n);
  return d;
}

void* PFMemAlloc(size_t size) {
  if (size > PF_MAX_OBJECT_SIZE) {
    PF_ERROR(kPFErrMemoryError,
             "PFMemAlloc: argument 'size' is larger than any object can be (PTRDIFF_MAX bytes)");
    return NULL;
  }
  void* p = pf_malloc(size);
  if (p == NULL) pf_oom("PFMemAlloc");
  return p;
}

void* PFMemRealloc(void* ptr, size_t size) {
  if (size > PF_MAX_OBJECT_SIZE) {
    PF_ERROR(kPFErrMemoryError,
             "PFMemRealloc: argument 'size' is larger than any object can be "
             "(PTRDIFF_MAX bytes); the block is unchanged");
    return NULL;
  }
  void* p = pf_realloc(ptr, size);
  if (p == NULL) pf_oom("PFMemRealloc");
  return p;
}

void PFMemFree(void* ptr) { pf_free(ptr); }
