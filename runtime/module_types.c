/* The object type descriptions of a library's descriptors, checked to lie
 * in the library before anything reads through them. */
#include <stdint.h>

#include "module.h"
#include "object_type.h"

static int outside(const char* where, const char* origin, size_t index, const char* what,
                   const void* p) {
  return PF_ERROR(kPFErrValueError,
                  "%s: module '%s': descriptor %zu has an object type whose %s at %p is not in "
                  "the library's loaded data",
                  where, origin, index, what, p);
}

/* `n` structs of `size` bytes at `p`, aligned for `align`, readable. */
static int readable(const pf_segments* segs, const void* p, size_t n, size_t size, size_t align) {
  return (uintptr_t)p % align == 0 && n <= SIZE_MAX / size &&
         pf_elf_in_segment(segs, p, n * size, PF_R, NULL);
}

static int strings_ok(const pf_segments* segs, const char* const* s, int n) {
  for (int i = 0; i < n; ++i)
    if (s[i] != NULL && !pf_elf_valid_string(segs, s[i])) return 0;
  return 1;
}

static int not_code(const char* where, const char* origin, size_t index, const char* what,
                    const void* p) {
  return PF_ERROR(kPFErrValueError,
                  "%s: module '%s': descriptor %zu has an object type whose %s pointer %p is "
                  "not in any loaded code",
                  where, origin, index, what, p);
}

static int code_ok(const pf_segments* segs, const void* code) {
  return code == NULL || pf_elf_valid_code(segs, code);
}

int pf_module_check_type(const char* where, const char* origin, size_t index,
                         const PFObjectTypeDesc* td, const pf_segments* segs) {
  if (td == NULL) return 0;
  if (!readable(segs, td, 1, sizeof(*td), _Alignof(PFObjectTypeDesc)) ||
      !readable(segs, td, 1, pf_desc_size(td->abi), _Alignof(PFObjectTypeDesc2)))
    return outside(where, origin, index, "description", td);
  const char* const head[3] = {td->key, td->parent, td->doc};
  if (!strings_ok(segs, head, 3)) return outside(where, origin, index, "key, parent or doc", td);
  if (!code_ok(segs, pf_code_addr((void (*)(void))td->finalizer)))
    return not_code(where, origin, index, "finalizer", pf_code_addr((void (*)(void))td->finalizer));
  PFObjectPrepare prepare = pf_desc_prepare(td);
  if (!code_ok(segs, pf_code_addr((void (*)(void))prepare)))
    return not_code(where, origin, index, "prepare hook", pf_code_addr((void (*)(void))prepare));
  /* Counts out of range and NULL arrays are the registration's to report. */
  int nf = td->num_fields, nm = td->num_methods;
  if (nf > 0 && nf <= PF_OBJECT_TYPE_MAX_MEMBERS && td->fields != NULL) {
    if (!readable(segs, td->fields, (size_t)nf, sizeof(PFFieldDesc), _Alignof(PFFieldDesc)))
      return outside(where, origin, index, "fields", td->fields);
    for (int i = 0; i < nf; ++i) {
      const PFFieldDesc* f = &td->fields[i];
      const char* const s[3] = {f->name, f->type, f->doc};
      if (!strings_ok(segs, s, 3)) return outside(where, origin, index, "field strings", f);
    }
  }
  if (nm > 0 && nm <= PF_OBJECT_TYPE_MAX_MEMBERS && td->methods != NULL) {
    if (!readable(segs, td->methods, (size_t)nm, sizeof(PFMethodDesc), _Alignof(PFMethodDesc)))
      return outside(where, origin, index, "methods", td->methods);
    for (int i = 0; i < nm; ++i) {
      const PFMethodDesc* m = &td->methods[i];
      const char* const s[3] = {m->name, m->signature, m->doc};
      if (!strings_ok(segs, s, 3)) return outside(where, origin, index, "method strings", m);
      if (!code_ok(segs, pf_code_addr((void (*)(void))m->packed)) ||
          !code_ok(segs, pf_code_addr(m->typed)))
        return not_code(where, origin, index, "method function", m);
    }
  }
  int na = pf_desc_num_accessors(td);
  const PFAccessorDesc* acc = pf_desc_accessors(td);
  if (na > 0 && na <= PF_OBJECT_TYPE_MAX_MEMBERS && acc != NULL) {
    if (!readable(segs, acc, (size_t)na, sizeof(PFAccessorDesc), _Alignof(PFAccessorDesc)))
      return outside(where, origin, index, "accessors", acc);
    for (int i = 0; i < na; ++i) {
      const PFAccessorDesc* a = &acc[i];
      const char* const s[3] = {a->name, a->type, a->doc};
      if (!strings_ok(segs, s, 3)) return outside(where, origin, index, "accessor strings", a);
      if (!code_ok(segs, pf_code_addr((void (*)(void))a->get)) ||
          !code_ok(segs, pf_code_addr((void (*)(void))a->set)))
        return not_code(where, origin, index, "accessor function", a);
    }
  }
  return 0;
}
