/* The runtime's allocator for tests that fork while other threads use the
 * runtime (include once, in the test's .c; installed by
 * pf_fork_arena_install() before the runtime's first allocation).
 *
 *  - In a child, the runtime must not allocate from the process's malloc:
 *    the sanitizers' allocators (GCC 12's ASan at least) take no lock
 *    around fork(), so a size-class lock that a parent thread held stays
 *    held in the child, and a malloc there can hang for reasons that are
 *    not packedfunc's. A child calls pf_fork_arena_enter_child() first and
 *    then allocates from a static arena, freeing nothing (it ends at once).
 *  - In the parent, a thread that sets t_slow makes its allocations slow
 *    (a short spin), as a loaded allocator is: code that allocates under a
 *    lock then holds it long enough that a fork is likely to find it held. */
#ifndef PF_FORK_ARENA_H
#define PF_FORK_ARENA_H

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <packedfunc/c_api.h>

#define HEADER 16 /* each block starts with its size; keeps 16-byte alignment */
static atomic_int g_in_child;
static _Thread_local int t_slow;
static _Alignas(16) unsigned char g_arena[8 << 20];
static size_t g_arena_used; /* the child's only thread touches it */

static void spin(void) {
  for (volatile int i = 0; i < 20000; ++i) {}
}

static void* arena_alloc(size_t n) {
  size_t need = (HEADER + n + 15) & ~(size_t)15;
  if (need > sizeof(g_arena) - g_arena_used) return NULL;
  unsigned char* p = g_arena + g_arena_used;
  g_arena_used += need;
  memcpy(p, &n, sizeof(n));
  return p + HEADER;
}

static size_t block_size(void* p) {
  size_t n;
  memcpy(&n, (unsigned char*)p - HEADER, sizeof(n));
  return n;
}

static void* t_malloc(size_t n, void* ud) {
  (void)ud;
  if (atomic_load_explicit(&g_in_child, memory_order_relaxed)) return arena_alloc(n);
  if (t_slow) spin();
  unsigned char* p = malloc(HEADER + n);
  if (p == NULL) return NULL;
  memcpy(p, &n, sizeof(n));
  return p + HEADER;
}

static void t_free(void* p, void* ud) {
  (void)ud;
  if (p == NULL || atomic_load_explicit(&g_in_child, memory_order_relaxed)) return;
  free((unsigned char*)p - HEADER);
}

static void* t_realloc(void* p, size_t n, void* ud) {
  if (p == NULL) return t_malloc(n, ud);
  void* q = t_malloc(n, ud);
  if (q == NULL) return NULL;
  size_t old = block_size(p);
  memcpy(q, p, old < n ? old : n);
  t_free(p, ud);
  return q;
}

/* Installs the allocator; call before the runtime's first allocation. */
static int pf_fork_arena_install(void) {
  PFAllocator a = {t_malloc, t_realloc, t_free, NULL};
  if (PFSetAllocator(&a) != 0) {
    fprintf(stderr, "PFSetAllocator failed: %s\n", PFGetLastError());
    return -1;
  }
  return 0;
}

/* The child's first step after fork(). */
static void pf_fork_arena_enter_child(void) {
  atomic_store_explicit(&g_in_child, 1, memory_order_relaxed);
}

#endif
