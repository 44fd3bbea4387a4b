/* Private to the runtime: the pre-pack cache's side of PFFuncBind. */
#ifndef PACKEDFUNC_RUNTIME_PREPACK_CACHE_H_
#define PACKEDFUNC_RUNTIME_PREPACK_CACHE_H_

#include "internal.h"

/* One shared packed value; owned by the cache, counted by its users. */
typedef struct pf_pp_entry pf_pp_entry;

/* Runs a pre-pack hook on one constant (runtime/bind.c's run_prepack). */
typedef int (*pf_pp_run_fn)(const pf_prepack* pp, PFFunctionHandle func, int position,
                            const PFValue* value, int code, PFValue* out, int* out_code,
                            int* packed);

/* Packs one constant through `cache`. Returns 1 when the constant cannot
 * be shared (not a compact CPU tensor object), or when this thread is
 * itself packing for a cache and the constant's entry is still being
 * packed (c_api.h: a packer never waits): the caller packs it itself.
 * Otherwise returns 0 with *packed: when 1, *out and *out_code are the shared
 * packed value, borrowed from *entry, which the caller releases with
 * pf_pp_entry_release when it no longer uses it; when 0, the hook kept the
 * constant as it is. Returns -1 with the error of the hook or a
 * MemoryError. Runs the hook with no lock held; binds of an equal
 * constant on threads that are not packing wait for it, so that it runs
 * once. */
PF_HIDDEN int pf_pp_cache_pack(PFPrePackCacheHandle cache, const pf_prepack* pp,
                               PFFunctionHandle func, int position, const PFValue* value, int code,
                               pf_pp_run_fn run, PFValue* out, int* out_code, int* packed,
                               pf_pp_entry** entry);

/* Drops a user of an entry; the last one removes it and releases its
 * values (finalizers run, after the cache's lock is released). */
PF_HIDDEN void pf_pp_entry_release(PFPrePackCacheHandle cache, pf_pp_entry* e);

/* Test hook: when nonzero, every content hash is the same number, so that
 * the byte comparison alone keeps different constants apart. */
PF_HIDDEN extern atomic_int pf_pp_force_hash;

#endif
