/*
 * packedfunc — the global registry of functions by name.
 */
#ifndef PACKEDFUNC_REGISTRY_H_
#define PACKEDFUNC_REGISTRY_H_

#include "packedfunc/function.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Global registry                                                           */
/* ------------------------------------------------------------------------ */

/* Flags for PFFuncRegisterGlobalEx. */
#define kPFRegisterOverride 1  /* replace a function of the same name */
#define kPFRegisterProtected 2 /* this name can't be overridden or removed */

/* Longest registry name, in bytes, without the terminating NUL. */
#define PF_NAME_MAX 1024

/*
 * Publishes `func` under `name`. The registry takes its own reference (the
 * caller keeps its own) and copies the name. With override == 0 a taken
 * name is an error (KeyError naming it); with override != 0 the new
 * function replaces the old one, whose registry reference is released after
 * the registry's lock is dropped: callers that hold the old function keep
 * it alive. Errors: NULL/empty/over-long name, NULL or non-function func
 * (TypeError/ValueError); taken name (KeyError); protected name or sealed
 * registry (RuntimeError); MemoryError. Thread-safe.
 */
PF_EXPORT int PFFuncRegisterGlobal(const char* name, PFFunctionHandle func, int override);

/* As PFFuncRegisterGlobal with kPFRegister* flags. kPFRegisterProtected
 * marks the name so that later register, override and remove calls on it
 * fail. */
PF_EXPORT int PFFuncRegisterGlobalEx(const char* name, PFFunctionHandle func, int flags);

/* Looks a name up. On a hit *out is a new reference (release it with
 * PFFuncFree), so a concurrent override or removal cannot free the function
 * under the caller. On a miss returns 0 with *out == NULL.
 * Errors: NULL/empty name, NULL out (TypeError/ValueError). Thread-safe. */
PF_EXPORT int PFFuncGetGlobal(const char* name, PFFunctionHandle* out);

/* Removes a name, releasing the registry's reference after the lock is
 * dropped. Errors: NULL/empty name (TypeError/ValueError); absent name
 * (KeyError naming it); protected name or sealed registry (RuntimeError).
 * Thread-safe. */
PF_EXPORT int PFFuncRemoveGlobal(const char* name);

/* Lists the registered names, sorted. *out_array and the strings live in
 * the calling thread's list storage until the next PFFuncListGlobalNames*
 * call on this thread; the storage is freed when the thread exits (a call
 * from a thread-specific-data destructor during the exit is fine, and its
 * list is freed too). Errors: NULL outputs (TypeError), MemoryError. */
PF_EXPORT int PFFuncListGlobalNames(int* out_size, const char*** out_array);

/* As PFFuncListGlobalNames, keeping only names that begin with `prefix`
 * (NULL or "" keeps all). */
PF_EXPORT int PFFuncListGlobalNamesWithPrefix(const char* prefix, int* out_size,
                                              const char*** out_array);

/* Seals the registry for the rest of the process: registering, overriding
 * and removing then fail with a RuntimeError, while lookups and calls go
 * on. Lets a host make sure that plugins loaded later cannot replace the
 * functions it relies on. Idempotent. Thread-safe. */
PF_EXPORT int PFRegistrySeal(void);

/* Writes 1 to *out when the registry is sealed, else 0. */
PF_EXPORT int PFRegistryIsSealed(int* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_REGISTRY_H_ */
