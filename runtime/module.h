/* Private to the runtime: modules and the shared libraries they come from,
 * shared by library.c and the module*.c files. The contract is in c_api.h,
 * section "Modules". */
#ifndef PACKEDFUNC_RUNTIME_MODULE_H_
#define PACKEDFUNC_RUNTIME_MODULE_H_

#include <link.h>

#include "internal.h"

/* ---- the module object (runtime/module_object.c) ---- */

typedef struct {
  const char* name; /* the function's metadata name: lives as long as it */
  PFFunctionHandle func;
} pf_mod_entry;

typedef struct pf_module pf_module;
struct pf_module {
  pf_object base;
  pf_object* lib; /* the library it came from (library.c); NULL for a descriptor table */
  char* origin;   /* the path, for messages */
  int count;
  pf_mod_entry* entries; /* sorted by name; immutable after load */
  const char** names;    /* the same names, NULL-terminated */
  /* Imports and the search mark, guarded by the imports lock
   * (module_import.c). */
  pf_module** imports;
  int num_imports, imports_cap;
  uint64_t seen; /* the last walk that visited this module */
  /* The object types it registered (PFModListTypes); immutable. */
  uint32_t* type_indices;
  int num_types;
};

/* A new module with room for `count` entries and none filled in, holding a
 * reference to `lib` (may be NULL); NULL with a MemoryError naming `where`.
 * The caller adds up to `count` functions with pf_module_add, then calls
 * pf_module_index. Releasing it at any point frees what was added. */
PF_HIDDEN pf_module* pf_module_new(const char* where, const char* origin, pf_object* lib,
                                   size_t count);
/* Adds `f` to a new module under its name, which must be set: the module
 * takes over the caller's reference to `f`. */
PF_HIDDEN void pf_module_add(pf_module* m, PFFunctionHandle f);
/* Sorts a new module's entries by name for lookups and lists the names. A
 * name given twice returns -1, recording nothing, with that name in
 * names[0]. */
PF_HIDDEN int pf_module_index(pf_module* m);
/* The module's own function called `name` (borrowed), or NULL. */
PF_HIDDEN PFFunctionHandle pf_module_find_own(const pf_module* m, const char* name);

/* ---- loaded libraries and the process-wide setup (runtime/library.c) ---- */

/* Runs once per process: the library list's fork handlers, the spans of
 * the code that never unloads (pf_static_code), and libpackedfunc's own
 * link map and ELF header below. Cheap after the first call. */
PF_HIDDEN void pf_library_setup(void);
/* libpackedfunc's link map (whose search path dlopen uses for a bare name)
 * and its ELF header (what "an ELF file for this machine" means), or NULL
 * where the loader cannot tell; set by pf_library_setup. */
PF_HIDDEN extern const struct link_map* pf_self_map;
PF_HIDDEN extern const ElfW(Ehdr) * pf_self_ehdr;
/* Takes over one dlopen reference `dl` to the library `map`, loaded at
 * `span`, and writes a new reference to its library object (an existing
 * one, or one made here). On failure closes `dl` and returns -1 with a
 * MemoryError naming `where`. */
PF_HIDDEN int pf_library_adopt(void* dl, const struct link_map* map, pf_code_span span,
                               pf_object** out, const char* where);

/* ---- ELF checks (runtime/module_elf.c) ---- */

/* The mapped segments of a loaded library. */
#define PF_MAX_SEGMENTS 32
typedef struct {
  uintptr_t start, end;
  uint32_t flags; /* PF_R, PF_W, PF_X */
} pf_segment;
typedef struct {
  int count; /* -1 when the library has more than PF_MAX_SEGMENTS */
  pf_segment seg[PF_MAX_SEGMENTS];
} pf_segments;

/* Copies the PT_LOAD ranges of the loaded object whose dynamic section is
 * at `dynamic` (its link map's l_ld); returns their count: 0 when no
 * loaded object has that dynamic section, -1 when it has too many. */
PF_HIDDEN int pf_elf_segments(const void* dynamic, pf_segments* s);
/* 1 when [p, p + len) lies inside one segment with all of `flags` (and
 * writes that segment's end to *seg_end when seg_end is not NULL). */
PF_HIDDEN int pf_elf_in_segment(const pf_segments* s, const void* p, size_t len, uint32_t flags,
                                uintptr_t* seg_end);
/* 1 when `str` starts in a readable segment and ends with a NUL in it. */
PF_HIDDEN int pf_elf_valid_string(const pf_segments* s, const char* str);
/* 1 when `code` lies in an executable segment of the library, or of any
 * other loaded object: a module may register a function of a library it
 * links (the function then keeps that library loaded instead). */
PF_HIDDEN int pf_elf_valid_code(const pf_segments* s, const void* code);
/* 1 when the open file `fd` is a regular file that starts with an ELF
 * header for this machine (the test dlopen's search applies). */
PF_HIDDEN int pf_elf_file_matches(int fd);
/* Why the open file `fd` is not a regular file holding an ELF shared object
 * for this machine whose program headers and segments lie inside the file
 * (so that dlopen would not touch a mapping past the end of the file and
 * die of SIGBUS), written to `why` (`n` bytes) as the end of a sentence
 * ("file truncated: ..."). Returns 0 and writes nothing when there is no
 * such reason, otherwise the length of the reason (not 0). Reads the file
 * with pread only. */
PF_HIDDEN int pf_elf_file_problem(int fd, char* why, size_t n);

/* ---- object types of a library (runtime/module_types.c) ---- */

/* Checks, before anything reads through them, that the object type
 * description of descriptor `index` and everything it points to (strings,
 * field and method arrays, code) lie in the library. NULL passes (the
 * registration reports it). -1 with a ValueError naming the descriptor. */
PF_HIDDEN int pf_module_check_type(const char* where, const char* origin, size_t index,
                                   const PFObjectTypeDesc* td, const pf_segments* segs);

/* ---- modules from descriptor tables (runtime/module_desc.c) ---- */

/* Builds a module named `origin` from `count` descriptors at `table`,
 * holding `lib` (NULL for a table in the process). When `segs` is not NULL
 * (a library's table), each descriptor and what it points to is first
 * checked to lie in the library. Returns 0 and a new module, or -1 with an
 * error naming `where`, `origin` and the descriptor. */
PF_HIDDEN int pf_module_build(const char* where, const char* origin, pf_object* lib,
                              const pf_segments* segs, const PFFuncDescriptor* const* table,
                              size_t count, pf_module** out);

#endif
