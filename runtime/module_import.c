/* The import graph: PFModImport with its cycle check, and the search through imports. */
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "module.h"

/* Guards every module's import list and search mark. Held only around
 * plain memory work on import lists: no user code and no allocation run
 * under it. */
static pthread_mutex_t g_imports_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_walk_epoch;  /* under g_imports_lock */
static uint64_t g_walk_visits; /* under g_imports_lock */
static uint64_t g_graph_gen;   /* under g_imports_lock; bumped by every import */

/* A fork copies the lock in whatever state other threads left it; the
 * child has only the forking thread. Taking it first makes the copy
 * consistent; the child gets a fresh one. */
static pthread_once_t g_fork_once = PTHREAD_ONCE_INIT;
static void fork_prepare(void) { pthread_mutex_lock(&g_imports_lock); }
static void fork_parent(void) { pthread_mutex_unlock(&g_imports_lock); }
static void fork_child(void) { pthread_mutex_init(&g_imports_lock, NULL); }
static void fork_setup(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void lock_imports(void) {
  pthread_once(&g_fork_once, fork_setup);
  pthread_mutex_lock(&g_imports_lock);
}

static void unlock_imports(void) { pthread_mutex_unlock(&g_imports_lock); }

uint64_t pf_mod_import_visits(void) {
  lock_imports();
  uint64_t n = g_walk_visits;
  unlock_imports();
  return n;
}

/* ---- the walk ---- */

/* A walk's stack: on the C stack, or on the heap once it needs more. */
#define PF_WALK_LOCAL 64
typedef struct {
  pf_module* local[PF_WALK_LOCAL];
  pf_module** heap;
  size_t cap;
} walk_stack;

static void walk_stack_init(walk_stack* s) {
  s->heap = NULL;
  s->cap = PF_WALK_LOCAL;
}

static pf_module** walk_stack_entries(walk_stack* s) { return s->heap ? s->heap : s->local; }

/* Grows the stack to at least `need` entries, outside the lock; 0, or -1
 * with a MemoryError. */
static int walk_stack_grow(walk_stack* s, size_t need, const char* where) {
  size_t want = s->cap * 2 > need ? s->cap * 2 : need;
  if (want > SIZE_MAX / sizeof(pf_module*)) return pf_oom(where);
  pf_free(s->heap);
  s->heap = pf_malloc(want * sizeof(pf_module*));
  if (s->heap == NULL) return pf_oom(where);
  s->cap = want;
  return 0;
}

/*
 * Visits every module that `root` imports, directly or through other
 * imports, once each, in the order of a recursive depth-first search (a
 * module before its imports, imports in import order), and returns the
 * first that is `target` or, when target is NULL, that has a function
 * called `name`; NULL when none is. Shared imports are visited once, so the
 * work is linear in the size of the graph, and nothing recurses. Lock
 * held; allocates nothing: when the stack is too small it returns NULL
 * with *need set to a size that is enough for the next step, and the
 * caller drops the lock, grows the stack and starts again.
 */
static pf_module* walk(pf_module* root, const pf_module* target, const char* name, walk_stack* s,
                       size_t* need) {
  pf_module** stack = walk_stack_entries(s);
  uint64_t epoch = ++g_walk_epoch;
  size_t n = 0;
  *need = 0;
  root->seen = epoch;
  for (pf_module* m = root;;) {
    if ((size_t)m->num_imports > s->cap - n) {
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
    if (target != NULL ? m == target : pf_module_find_own(m, name) != NULL) return m;
  }
}

/* ---- looking a name up through imports ---- */

/* The function `name` of the first module that `m` imports (directly or
 * not) which has one, with a new reference, or NULL; *need as walk. */
static PFFunctionHandle search_imports(pf_module* m, const char* name, walk_stack* s,
                                       size_t* need) {
  PFFunctionHandle f = NULL;
  lock_imports();
  pf_module* hit = walk(m, NULL, name, s, need);
  if (hit != NULL) {
    f = pf_module_find_own(hit, name);
    PFFuncRetain(f); /* before unlocking */
  }
  unlock_imports();
  return f;
}

int PFModGetFunction(PFModuleHandle mod, const char* name, int query_imports,
                     PFFunctionHandle* out) {
  static const char* const where = "PFModGetFunction";
  PF_CHECK_OBJECT(mod, kPFObjectModule);
  PF_CHECK_ARG(name);
  PF_CHECK_ARG(out);
  pf_module* m = mod;
  PFFunctionHandle f = pf_module_find_own(m, name);
  if (f != NULL) {
    PFFuncRetain(f);
  } else if (query_imports) {
    walk_stack s;
    walk_stack_init(&s);
    size_t need;
    while ((f = search_imports(m, name, &s, &need)) == NULL && need != 0) {
      if (walk_stack_grow(&s, need, where) != 0) return -1;
    }
    pf_free(s.heap);
  }
  *out = f;
  return 0;
}

/* ---- importing ---- */

int PFModImport(PFModuleHandle mod, PFModuleHandle dep) {
  static const char* const where = "PFModImport";
  PF_CHECK_OBJECT(mod, kPFObjectModule);
  PF_CHECK_OBJECT(dep, kPFObjectModule);
  pf_module* m = mod;
  pf_module* d = dep;
  walk_stack s;
  walk_stack_init(&s);
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
    } else if (d == m || walk(d, m, NULL, &s, &need) != NULL) {
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
    unlock_imports();
    pf_free(drop);
    if (done) break;
    if (need != 0) {
      if (walk_stack_grow(&s, need, where) != 0) {
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
  pf_free(s.heap);
  return rc;
}
