/* PFObjectFindOwnedHosts: the host objects and host functions that one
 * reference alone keeps alive, for a host's cycle collector. The rules are
 * in c_api.h. */
#include "internal.h"

/* One object met by the walk. */
typedef struct {
  pf_object* obj;
  int_fast32_t count;  /* its reference count, read when it was reached */
  int64_t left;        /* its references that would remain (see find_owned) */
  int64_t edges_begin; /* its references: edges[edges_begin .. edges_end) */
  int64_t edges_end;
  int owned; /* freed when the caller's reference to the root goes */
  int held;  /* the walk holds a reference to it (see node_of) */
} walk_node;

struct pf_walk {
  walk_node* nodes; /* in the order reached; nodes[0] is the root */
  int64_t num_nodes, nodes_cap;
  int64_t* index; /* open addressing by address: a node's position + 1, or 0 */
  size_t mask;
  int64_t* edges; /* node positions, per node in the order of nodes */
  int64_t num_edges, edges_cap;
  int64_t budget;        /* values that may still be looked at */
  int exhausted;         /* the budget ran out */
  int64_t mutable_nodes; /* Lists, Dicts, instances met: their references may change */
};

static const char* const k_where = "PFObjectFindOwnedHosts";

static size_t slot_of(const pf_walk* w, const void* obj) {
  uint64_t x = (uint64_t)(uintptr_t)obj;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  return (size_t)x & w->mask;
}

/* The array p of *cap elements of `size` bytes, grown to hold `need`;
 * NULL with a MemoryError (p is still valid then). */
static void* room(void* p, int64_t* cap, size_t size, int64_t need) {
  if (need <= *cap) return p;
  int64_t n = *cap ? *cap : 16;
  while (n < need) n *= 2;
  void* q = (uint64_t)n > PF_MAX_OBJECT_SIZE / size ? NULL : pf_realloc(p, (size_t)n * size);
  if (q == NULL) {
    pf_oom(k_where);
    return NULL;
  }
  *cap = n;
  return q;
}

/* Rebuilds the index with room for twice the nodes. */
static int grow_index(pf_walk* w) {
  size_t cap = (w->mask + 1) * 2;
  int64_t* index = pf_calloc(cap, sizeof(int64_t));
  if (index == NULL) return pf_oom(k_where);
  pf_free(w->index);
  w->index = index;
  w->mask = cap - 1;
  for (int64_t i = 0; i < w->num_nodes; ++i) {
    size_t s = slot_of(w, w->nodes[i].obj);
    while (index[s] != 0) s = (s + 1) & w->mask;
    index[s] = i + 1;
  }
  return 0;
}

/* The position of obj among the nodes, added if new; -1 without memory.
 * With `hold`, a new node gets a reference of the walk's, dropped when the
 * walk ends: an object reached through a List or Dict may be removed from
 * it, and released, by another thread at any time. (Any other object is
 * kept alive by what holds it: the root, which the caller holds, a node
 * that the walk holds, or an instance's field, which no thread may write
 * while the walk reads it: object_type.h, "Threads".) */
static int64_t node_of(pf_walk* w, pf_object* obj, int hold) {
  size_t s = slot_of(w, obj);
  for (; w->index[s] != 0; s = (s + 1) & w->mask)
    if (w->nodes[w->index[s] - 1].obj == obj) return w->index[s] - 1;
  walk_node* nodes = room(w->nodes, &w->nodes_cap, sizeof(walk_node), w->num_nodes + 1);
  if (nodes == NULL) return -1;
  w->nodes = nodes;
  int64_t i = w->num_nodes++;
  walk_node* n = &w->nodes[i];
  n->obj = obj;
  n->held = hold;
  if (hold) pf_object_retain(obj);
  n->count = atomic_load_explicit(&obj->ref_count, memory_order_acquire);
  n->left = n->count - hold;
  n->edges_begin = n->edges_end = 0;
  n->owned = 0;
  w->index[s] = i + 1;
  /* At most half full, so that probes stay short and end. */
  if ((size_t)w->num_nodes * 2 > w->mask + 1 && grow_index(w) != 0) return -1;
  return i;
}

int pf_walk_spend(pf_walk* w, int64_t values) {
  if (values <= w->budget) {
    w->budget -= values;
    return 0;
  }
  w->exhausted = 1;
  return -1;
}

/* Records one reference from the node being visited to `child`. */
static int add_child(pf_walk* w, void* child, int hold) {
  if (pf_walk_spend(w, 1) != 0) return -1;
  int64_t i = node_of(w, child, hold);
  if (i < 0) return -1;
  int64_t* edges = room(w->edges, &w->edges_cap, sizeof(int64_t), w->num_edges + 1);
  if (edges == NULL) return -1;
  w->edges = edges;
  w->edges[w->num_edges++] = i;
  return 0;
}

int pf_walk_child(pf_walk* w, void* child) { return add_child(w, child, 0); }

int pf_walk_held_child(pf_walk* w, void* child) { return add_child(w, child, 1); }

void pf_walk_mutable(pf_walk* w) { ++w->mutable_nodes; }

/* Reports the references that one object holds, of the kinds followed. */
static int children(pf_walk* w, const pf_object* o) {
  switch (o->type_index) {
    case kPFObjectArray:
      return pf_array_children(w, o);
    case kPFObjectMap:
      return pf_map_children(w, o);
    /* A List or Dict may hold a host later: it counts as reachable. */
    case kPFObjectList:
      pf_walk_mutable(w);
      return pf_list_children(w, o);
    case kPFObjectDict:
      pf_walk_mutable(w);
      return pf_dict_children(w, o);
    case kPFObjectFunction:
      return pf_bound_children(w, (const pf_function*)o);
    case kPFObjectClosure:
      return pf_closure_children(w, o);
    default:
      return o->type_index >= kPFObjectTypeRegisteredBegin ? pf_instance_children(w, o) : 0;
  }
}

/* Reaches every object from the root, breadth first, recording each one's
 * references in order. */
static int reach_all(pf_walk* w) {
  for (int64_t i = 0; i < w->num_nodes; ++i) {
    w->nodes[i].edges_begin = w->num_edges;
    if (children(w, w->nodes[i].obj) != 0) return -1;
    w->nodes[i].edges_end = w->num_edges;
  }
  return 0;
}

/* Marks the nodes that dropping the caller's reference to the root would
 * free: the root when that reference is its only one, then, as reference
 * counting would, each node whose every reference is held by freed nodes.
 * A cycle that holds itself (a List that holds itself, an instance whose
 * field holds it back) is never freed so, nor is anything it holds: none
 * of it is owned. */
static int find_owned(pf_walk* w) {
  int64_t* stack = pf_malloc(sizeof(int64_t) * (size_t)w->num_nodes);
  if (stack == NULL) return pf_oom(k_where);
  int64_t top = 0;
  if (--w->nodes[0].left == 0) {
    w->nodes[0].owned = 1;
    stack[top++] = 0;
  }
  while (top > 0) {
    const walk_node* n = &w->nodes[stack[--top]];
    for (int64_t e = n->edges_begin; e < n->edges_end; ++e) {
      walk_node* c = &w->nodes[w->edges[e]];
      /* Below zero only when the graph changed under the walk: then the
       * counts differ at the end, and nothing is reported. */
      if (--c->left != 0) continue;
      c->owned = 1; /* each node reaches 0 once: the stack never overflows */
      stack[top++] = w->edges[e];
    }
  }
  pf_free(stack);
  return 0;
}

/* 1 when every reference count still reads as it did when first read. A
 * count that moved means that another thread holds a way into the graph,
 * and what it took or dropped may have been read half before and half
 * after: nothing is reported as owned then. (Every read is an acquire, so
 * these reads cannot move before the first ones.) */
static int counts_unchanged(const pf_walk* w) {
  for (int64_t i = 0; i < w->num_nodes; ++i)
    if (atomic_load_explicit(&w->nodes[i].obj->ref_count, memory_order_acquire) !=
        w->nodes[i].count)
      return 0;
  return 1;
}

int PFObjectFindOwnedHosts(PFObjectHandle root, PFObjectHandle gate, int64_t max_values, void** out,
                           int64_t cap, int64_t* num_owned, int64_t* num_reachable) {
  PF_CHECK_OBJECT(root, 0);
  PF_CHECK_OBJECT(gate, kPFObjectHostGate);
  PF_CHECK_ARG(num_owned);
  if (max_values < 0)
    return PF_ERROR(kPFErrValueError, "%s: argument 'max_values' is negative (%lld)", k_where,
                    (long long)max_values);
  if (cap < 0)
    return PF_ERROR(kPFErrValueError, "%s: argument 'cap' is negative (%lld)", k_where,
                    (long long)cap);
  if (cap > 0 && out == NULL)
    return PF_ERROR(kPFErrTypeError, "%s: argument 'out' is NULL with cap %lld", k_where,
                    (long long)cap);
  *num_owned = 0;
  if (num_reachable != NULL) *num_reachable = 0;
  /* A root with more than the caller's reference outlives it (held from
   * outside, or by a cycle through itself): nothing is owned (find_owned). */
  if (num_reachable == NULL &&
      atomic_load_explicit(&((pf_object*)root)->ref_count, memory_order_acquire) != 1)
    return 0;
  pf_walk w = {0};
  w.budget = max_values;
  w.mask = 15;
  w.index = pf_calloc(w.mask + 1, sizeof(int64_t));
  int rc = -1;
  if (w.index == NULL) {
    pf_oom(k_where);
    goto done;
  }
  if (node_of(&w, root, 0) < 0 || (reach_all(&w) != 0 && !w.exhausted)) goto done;
  rc = 0;
  if (w.exhausted) {
    if (num_reachable != NULL) *num_reachable = -1;
    goto done;
  }
  if (find_owned(&w) != 0) {
    rc = -1;
    goto done;
  }
  int64_t owned = 0, reachable = 0;
  for (int64_t i = 0; i < w.num_nodes; ++i) {
    void* payload;
    if (!pf_host_payload(w.nodes[i].obj, gate, &payload)) continue;
    ++reachable;
    if (!w.nodes[i].owned) continue;
    if (owned < cap) out[owned] = payload;
    ++owned;
  }
  if (num_reachable != NULL) *num_reachable = reachable + w.mutable_nodes;
  if (owned > 0 && counts_unchanged(&w)) *num_owned = owned;
done:
  /* The walk's own references go last: another thread may have released
   * the others meanwhile, so that these run finalizers (keeping the
   * error of a failed walk). */
  for (int64_t i = 0; i < w.num_nodes; ++i)
    if (w.nodes[i].held) pf_object_release_keeping_error(w.nodes[i].obj);
  pf_free(w.index);
  pf_free(w.nodes);
  pf_free(w.edges);
  return rc;
}
