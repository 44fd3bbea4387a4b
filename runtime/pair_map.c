/* A table by a pair of words (internal.h, pf_pair_map): what a structural
 * walk or a typed conversion has met already. */
#include "internal.h"

/* The slot of (a, b) in a table of cap slots, or the empty slot where it
 * would go. */
static pf_pair_entry* probe(pf_pair_entry* slot, size_t cap, const void* a, uintptr_t b) {
  uint64_t h = ((uint64_t)(uintptr_t)a ^ (uint64_t)b * 0xff51afd7ed558ccdu) * 0x9E3779B97F4A7C15u;
  size_t i = (size_t)(h >> 32) & (cap - 1);
  while (slot[i].a && (slot[i].a != a || slot[i].b != b)) i = (i + 1) & (cap - 1);
  return &slot[i];
}

const pf_pair_entry* pf_pair_find(const pf_pair_map* m, const void* a, uintptr_t b) {
  const pf_pair_entry* e = m->cap ? probe(m->slot, m->cap, a, b) : NULL;
  return e && e->a ? e : NULL;
}

int pf_pair_add(pf_pair_map* m, const void* a, uintptr_t b, uint64_t value) {
  if ((m->count + 1) * 2 > m->cap) {
    size_t cap = m->cap ? m->cap * 2 : 32;
    pf_pair_entry* slot = pf_calloc(cap, sizeof(pf_pair_entry));
    if (!slot) return -1;
    for (size_t i = 0; i < m->cap; ++i)
      if (m->slot[i].a) *probe(slot, cap, m->slot[i].a, m->slot[i].b) = m->slot[i];
    pf_free(m->slot);
    m->slot = slot;
    m->cap = cap;
  }
  *probe(m->slot, m->cap, a, b) = (pf_pair_entry){a, b, value};
  ++m->count;
  return 0;
}

void pf_pair_map_free(pf_pair_map* m) {
  pf_free(m->slot);
  *m = (pf_pair_map){0};
}
