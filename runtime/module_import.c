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

/*
 * PFModImport in three steps, so that nothing is allocated under the lock:
 * import_plan looks, under the lock, at what the import needs (the cycle
 * check, room in the import list); import_allocate gets it outside the
 * lock; import_commit takes the lock again and adds the import, unless
 * another import changed the graph in between: the plan is then stale, and
 * the import starts again from a new plan.
 */
typedef enum {
  IMPORT_DONE,     /* imported now, or already */
  IMPORT_CYCLE,    /* refused: dep imports mod, directly or not */
  IMPORT_TOO_MANY, /* refused: mod's import list cannot grow */
  IMPORT_FAILED,   /* an allocation failed; the error is recorded */
  IMPORT_PLANNED,  /* the plan holds what the import needs */
  IMPORT_STALE     /* plan again */
} import_status;

typedef struct {
  uint64_t gen;      /* g_graph_gen when planned */
  size_t stack_need; /* the cycle check needs a walk stack this long */
  int list_need;     /* mod's import list must first grow to this many entries */
  walk_stack stack;
  pf_module** list; /* a longer import list, allocated outside the lock */
  int list_cap;
} import_job;

/* Step 1, under the lock: is `d` imported already, would it close a cycle,
 * and what must be allocated first. */
static import_status import_plan(pf_module* m, pf_module* d, import_job* j) {
  import_status st = IMPORT_PLANNED;
  lock_imports();
  j->gen = g_graph_gen;
  j->stack_need = 0;
  j->list_need = 0;
  for (int i = 0; i < m->num_imports && st == IMPORT_PLANNED; ++i)
    if (m->imports[i] == d) st = IMPORT_DONE;
  if (st == IMPORT_DONE) {
    /* Already imported: nothing to do. */
  } else if (d == m || walk(d, m, NULL, &j->stack, &j->stack_need) != NULL) {
    st = IMPORT_CYCLE;
  } else if (j->stack_need != 0) {
    /* The check did not finish: import_allocate grows the stack. */
  } else if (m->num_imports == INT_MAX) {
    st = IMPORT_TOO_MANY;
  } else if (m->num_imports == m->imports_cap) {
    j->list_need =
        m->num_imports < INT_MAX / 2 ? (m->num_imports ? m->num_imports * 2 : 4) : INT_MAX;
  }
  unlock_imports();
  return st;
}

/* Step 2, outside the lock: what the plan found missing. A longer walk
 * stack means the cycle check must run again: IMPORT_STALE. */
static import_status import_allocate(import_job* j, const char* where) {
  if (j->stack_need != 0)
    return walk_stack_grow(&j->stack, j->stack_need, where) != 0 ? IMPORT_FAILED : IMPORT_STALE;
  if (j->list_need > j->list_cap) {
    pf_free(j->list);
    j->list_cap = 0;
    j->list = pf_malloc(sizeof(*j->list) * (size_t)j->list_need);
    if (j->list == NULL) {
      pf_oom(where);
      return IMPORT_FAILED;
    }
    j->list_cap = j->list_need;
  }
  return IMPORT_PLANNED;
}

/* Step 3, under the lock: adds the import unless an import changed the
 * graph since the plan (each bumps g_graph_gen; while it stands still,
 * m's list and the cycle check are as the plan saw them). The list it
 * replaces is freed after the lock. */
static import_status import_commit(pf_module* m, pf_module* d, import_job* j) {
  pf_module** drop = NULL;
  import_status st = IMPORT_STALE;
  lock_imports();
  if (j->gen == g_graph_gen) {
    if (m->num_imports == m->imports_cap) {
      if (m->num_imports) memcpy(j->list, m->imports, sizeof(*j->list) * (size_t)m->num_imports);
      drop = m->imports;
      m->imports = j->list;
      m->imports_cap = j->list_cap;
      j->list = NULL;
      j->list_cap = 0;
    }
    pf_object_retain(d);
    m->imports[m->num_imports++] = d;
    g_graph_gen++;
    st = IMPORT_DONE;
  }
  unlock_imports();
  pf_free(drop);
  return st;
}

int PFModImport(PFModuleHandle mod, PFModuleHandle dep) {
  static const char* const where = "PFModImport";
  PF_CHECK_OBJECT(mod, kPFObjectModule);
  PF_CHECK_OBJECT(dep, kPFObjectModule);
  pf_module* m = mod;
  pf_module* d = dep;
  import_job j = {0};
  walk_stack_init(&j.stack);
  import_status st;
  do {
    st = import_plan(m, d, &j);
    if (st == IMPORT_PLANNED) st = import_allocate(&j, where);
    if (st == IMPORT_PLANNED) st = import_commit(m, d, &j);
  } while (st == IMPORT_STALE);
  pf_free(j.list);
  pf_free(j.stack.heap);
  switch (st) {
    case IMPORT_DONE:
      return 0;
    case IMPORT_CYCLE:
      return PF_ERROR(kPFErrValueError,
                      "%s: importing module '%s' into '%s' would make an import cycle", where,
                      d->origin, m->origin);
    case IMPORT_TOO_MANY:
      return PF_ERROR(kPFErrValueError, "%s: module '%s' has too many imports", where, m->origin);
    default:
      return -1; /* IMPORT_FAILED: recorded */
  }
}
