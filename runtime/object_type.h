/* Private to the runtime: registered object types, their fields and
 * methods, and their instances (include/packedfunc/object_type.h is the
 * contract). Shared by object_type.c (the table), object_type_build.c
 * (descriptions into types), object_instance.c (instances and fields) and
 * the signature grammar (obj<KEY>). */
#ifndef PACKEDFUNC_RUNTIME_OBJECT_TYPE_H_
#define PACKEDFUNC_RUNTIME_OBJECT_TYPE_H_

#include "typed.h"

typedef struct pf_type pf_type;

/* How a field's bytes hold its value: as the C type itself, or as a
 * pointer that the instance owns (a char* or a PFByteArray* block from the
 * runtime's allocator; a reference to an object). */
typedef enum {
  pf_store_plain,
  pf_store_str,
  pf_store_bytes,
  pf_store_ref,   /* func, array, map, shape, object, obj<KEY> */
  pf_store_tensor /* a tensor object: a reference */
} pf_store;

/* Fields the getter reads without the general conversion. */
typedef enum { pf_fast_none, pf_fast_int64, pf_fast_float64, pf_fast_bool } pf_fast;

#define PF_FIELD_MAGIC 0x50464644u /* "PFFD" */

/* One field. A handle (const PFFieldInfo*) points at `info`, so it comes
 * first; `magic` lets the accessors refuse a pointer that is not one. */
typedef struct {
  PFFieldInfo info;
  uint32_t magic;
  uint8_t t;            /* its pf_ctype */
  uint8_t store;        /* pf_store */
  uint8_t fast;         /* pf_fast */
  int32_t owner_depth;  /* the declaring type's depth */
  const pf_type* owner; /* the declaring type */
  const pf_type* obj;   /* obj<KEY>: KEY's type; else NULL */
  /* A type with element types, optional or union: "void(TYPE)" parsed
   * (its parameter 0's tree checks what is written); else NULL. */
  struct pf_siginfo* tree;
  /* An accessor field (kPFFieldAccessor): its code, which changes only
   * while its type is dormant, under the table's lock; else NULL. */
  PFFieldGetter get;
  PFFieldSetter set;
} pf_field;

/* One method. Its code pointers change only while its type is dormant,
 * under the table's lock; the function made of them is in the declaring
 * type's code (pf_type_code.methods[own_index]). */
typedef struct {
  PFMethodInfo info;
  PFPackedCFunc packed;
  void (*typed)(void);
  const pf_type* owner;
  int own_index;
} pf_method;

/* What a type's code needs once it is ready: its methods as functions and
 * its constructor, and the libraries its code lies in. Made once, never
 * freed (the type is never removed). */
typedef struct {
  PFFunctionHandle* methods; /* by own index */
  PFFunctionHandle ctor;
  pf_object* libs[2]; /* references kept for the process: the finalizer's library,
                                the module's library; NULL when none */
} pf_type_code;

/* The fields an instance releases when it is destroyed. */
typedef struct {
  size_t offset;
  uint8_t store;
} pf_owned_slot;

struct pf_type {
  PFObjectTypeInfo info; /* public; fields/methods point into the arrays below */
  char* sig_name;        /* "obj<KEY>", the type's name in signatures */
  const pf_type* parent;
  const pf_type** ancestors; /* [0 .. depth]: the root first, this type last */
  PFObjectFinalizer fin;     /* changes only while dormant, under the lock */
  PFObjectPrepare prepare;   /* likewise; NULL when the description has none */
  /* This type's own members (the arrays in `info` also hold inherited ones). */
  pf_field* own_fields;
  int num_own_fields;
  pf_method* own_methods;
  int num_own_methods;
  pf_owned_slot* owned; /* every owning field, inherited ones too */
  int num_owned;
  /* Set once, with release order, when the code is ready; never cleared. */
  _Atomic(pf_type_code*) code;
  /* Under the table's lock: the library of a module type whose code is not
   * ready yet (not a reference: the library clears it as it goes, through
   * pf_types_library_gone), and whether it went first. */
  pf_object* weak_lib;
  int dormant;
  pf_type* hash_next; /* the key table's chain */
};

/* An instance: the object header, its type, then the registering code's
 * struct at PF_INSTANCE_HEAD. */
typedef struct {
  pf_object base;
  const pf_type* type;
} pf_instance;
#define PF_INSTANCE_HEAD 64
_Static_assert(sizeof(pf_instance) <= PF_INSTANCE_HEAD, "the header fits before the struct");
_Static_assert(PF_INSTANCE_HEAD % PF_OBJECT_DATA_ALIGN == 0, "the struct is aligned");

static inline void* pf_instance_data(const void* obj) {
  return (char*)(uintptr_t)obj + PF_INSTANCE_HEAD;
}

/* 1 when `h` is a live instance of a registered type. */
static inline int pf_is_instance(const void* h) {
  if (h == NULL) return 0;
  const pf_object* o = h;
  return o->magic == PF_OBJECT_MAGIC && o->type_index >= kPFObjectTypeRegisteredBegin;
}

/* 1 when type `a` is `t` or descends from it. */
static inline int pf_type_is_a(const pf_type* a, const pf_type* t) {
  int d = t->info.depth;
  return a == t || (a->info.depth > d && a->ancestors[d] == t);
}

/* 1 when `v` is a live instance of `t` or of a descendant: first the
 * object header's type index against t's, then the parent chain. The
 * magic is read first, as pf_is_function reads it. */
static inline int pf_obj_arg_ok(const PFValue* v, const pf_type* t) {
  const pf_object* o = v->v_handle;
  if (!pf_is_object(o, 0)) return 0;
  if (o->type_index == t->info.type_index) return 1;
  return o->type_index >= kPFObjectTypeRegisteredBegin &&
         pf_type_is_a(((const pf_instance*)o)->type, t);
}

/* ---- instances (runtime/object_instance.c) ---- */

/* Writes a field of a live instance of its type as PFObjectSetField does,
 * read-only fields too (for PFFromJSON, which rebuilds an instance from
 * its fields); errors name `where`. */
PF_HIDDEN int pf_instance_restore_field(const char* where, PFObjectHandle obj,
                                        const PFFieldInfo* field, const PFValue* v, int code);
/* Runs the prepare hook (object_type.h, "Rebuilding from fields") of a
 * newly allocated instance, the nearest of its type's chain, if any; errors
 * name `where`. */
PF_HIDDEN int pf_instance_prepare(const char* where, PFObjectHandle obj);
/* Frees or releases every owned value in the fields of a live instance,
 * leaving NULL: breaks the cycles of a half-built graph. */
PF_HIDDEN void pf_instance_drop_fields(PFObjectHandle obj);

/* ---- the table (runtime/object_type.c) ---- */

/* The registered type of an index, or NULL. Lock-free. */
PF_HIDDEN const pf_type* pf_type_at(uint32_t type_index);
/* The type of `key` (len bytes, not NUL-terminated) for the signature
 * grammar: one of the types being built on this thread (pf_type_scope_set),
 * else a registered one; NULL when none. */
PF_HIDDEN const pf_type* pf_type_resolve(const char* key, size_t len);
/* While a registration builds its types, signatures and field types may
 * name them (and the registered types by those keys): the builder lists
 * them here for the calling thread, and clears the list with NULL. */
typedef struct {
  pf_type* const* types;
  int count;
} pf_type_scope;
PF_HIDDEN void pf_type_scope_set(const pf_type_scope* scope);
/* Makes the code of `t` and its ancestors ready (see object_type.h,
 * "Lifetime of types"); -1 with an error naming `where`. */
PF_HIDDEN int pf_type_ready(const char* where, const pf_type* t);
/* Registers the types of `descs` (a module's, or one from
 * PFObjectTypeRegister), all or nothing. `lib` is the library of a module
 * loaded from a file, whose types become ready at their first use, or NULL
 * for types that become ready now. On success writes a new array of their
 * indices (pf_malloc'd; NULL when n is 0) to *out. */
PF_HIDDEN int pf_types_register(const char* where, pf_object* lib,
                                const PFObjectTypeDesc* const* descs, int n, uint32_t** out);
/* A type's field or method by name (own or inherited), or NULL. */
PF_HIDDEN const pf_field* pf_type_find_field(const pf_type* t, const char* name);
PF_HIDDEN const pf_method* pf_type_find_method(const pf_type* t, const char* name);
/* The function of a method of a ready type. */
PF_HIDDEN PFFunctionHandle pf_method_function(const pf_method* m);
/* Called by a library object that is being destroyed, before it is
 * closed: the types whose code is not ready and lies in it become
 * dormant. Takes the table's lock. */
PF_HIDDEN void pf_types_library_gone(const pf_object* lib);
/* The key of a registered index, or NULL (for PFObjectTypeName). */
PF_HIDDEN const char* pf_registered_type_name(uint32_t type_index);

/* ---- building types (runtime/object_type_build.c) ---- */

/* The PFObjectTypeDesc2 that `d` is the base of, or NULL (version 1). */
static inline const PFObjectTypeDesc2* pf_desc2(const PFObjectTypeDesc* d) {
  return d->abi >= PF_OBJECT_TYPE_DESC2_ABI ? (const PFObjectTypeDesc2*)d : NULL;
}
/* Its accessor fields: none in a version 1 description. */
static inline int pf_desc_num_accessors(const PFObjectTypeDesc* d) {
  return pf_desc2(d) ? pf_desc2(d)->num_accessors : 0;
}
static inline const PFAccessorDesc* pf_desc_accessors(const PFObjectTypeDesc* d) {
  return pf_desc2(d) ? pf_desc2(d)->accessors : NULL;
}
/* Its prepare hook: none before version 3. */
static inline PFObjectPrepare pf_desc_prepare(const PFObjectTypeDesc* d) {
  return d->abi >= PF_OBJECT_TYPE_DESC3_ABI ? ((const PFObjectTypeDesc3*)d)->prepare : NULL;
}
/* The bytes of a description of layout version `abi` (1 to 3). */
static inline size_t pf_desc_size(uint32_t abi) {
  return abi >= PF_OBJECT_TYPE_DESC3_ABI   ? sizeof(PFObjectTypeDesc3)
         : abi >= PF_OBJECT_TYPE_DESC2_ABI ? sizeof(PFObjectTypeDesc2)
                                           : sizeof(PFObjectTypeDesc);
}

/* A new, unregistered type from `d`: checked whole, copied. `parent` is
 * the resolved parent (NULL for none). Records an error naming `where`
 * and returns NULL on failure. The scope must be set. */
PF_HIDDEN pf_type* pf_type_build(const char* where, const PFObjectTypeDesc* d,
                                 const pf_type* parent, pf_type* skeleton);
/* A skeleton: the key checked and copied, "obj<KEY>" made, nothing else;
 * NULL with an error. pf_type_build fills it in. */
PF_HIDDEN pf_type* pf_type_skeleton(const char* where, const PFObjectTypeDesc* d, int index);
/* Frees an unregistered type and what it owns (not its parent's members). */
PF_HIDDEN void pf_type_free(pf_type* t);
/* NULL when `fresh` describes the same type as `old`; else a short text
 * saying what differs (static storage). `same_code`: also compare the code
 * pointers (a live type), else only the data (a dormant one). */
PF_HIDDEN const char* pf_type_differs(const pf_type* old, const pf_type* fresh, int same_code);
/* The code of `t`: a function per own method, the constructor, a reference
 * to the finalizer's library; `lib` (a reference or NULL) is taken over,
 * and released if this fails. -1 with an error naming `where`. */
PF_HIDDEN int pf_type_code_build(const char* where, const pf_type* t, pf_object* lib,
                                 pf_type_code** out);
PF_HIDDEN void pf_type_code_free(pf_type_code* c);
/* PFFuncCreateFromTyped for an instance method of `self_type`: its first
 * argument must be an instance of that type or of a descendant (an
 * `object` or ancestor's obj<KEY> first parameter included), else a
 * TypeError (pf_self_error); the signature's text stays as given.
 * (runtime/typed.c) */
PF_HIDDEN int pf_typed_create_method(const char* where, void* fn, const char* signature,
                                     const pf_type* self_type, PFFunctionHandle* out);

/* ---- instances (runtime/object_instance.c) ---- */

/* 1 when `h` is a live object that is an instance of `t` (or a
 * descendant). */
PF_HIDDEN int pf_object_is_a(const void* h, const pf_type* t);
/* The TypeError of an instance method of `t` called with `v` (code
 * `code`) first, which is not an instance of `t`: "WHO: WHAT: expected
 * obj<KEY>, got ...", naming what was given. */
PF_HIDDEN int pf_self_error(const char* who, const char* what, const pf_type* t, int code,
                            const PFValue* v);
/* The packed function of a packed instance method: checks the object,
 * then calls the method's code; its resource is the pf_method. */
PF_HIDDEN int pf_method_call(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res);
/* The constructor's packed function; its resource is the type. */
PF_HIDDEN int pf_type_construct(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res);

#endif
