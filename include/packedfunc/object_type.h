/*
 * packedfunc — object types that a library registers: instances of a C
 * struct with named, typed fields and methods, described for host
 * languages, which build classes of their own from the description.
 */
#ifndef PACKEDFUNC_OBJECT_TYPE_H_
#define PACKEDFUNC_OBJECT_TYPE_H_

#include "packedfunc/function.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Registered object types                                                   */
/* ------------------------------------------------------------------------ */

/*
 * A C library makes a struct of its own an object type: it registers a
 * description (PFObjectTypeDesc) under a unique key such as "mylib.Counter",
 * and gets the type's index. An instance of the type is a reference-counted
 * object like any other (PFObjectRetain, PFObjectFree, kPFObjectHandle in
 * calls) whose header the library owns, followed by the registering code's
 * struct, zeroed at allocation (PFObjectAlloc; PFObjectGetData gives the
 * struct). The description names fields of that struct (each with a type
 * of the signature grammar and an offset) and methods (functions whose
 * first argument is the object itself). A host language reads the
 * description once (PFObjectTypeGetInfo), makes a class of it, and then
 * reads and writes fields through their handles and calls methods as
 * functions; so `mylib.Counter(3)` in Python creates an instance through
 * the type's constructor.
 *
 * Type indices. A registered type's index is at least
 * kPFObjectTypeRegisteredBegin, below the end of the range; the built-in
 * types (PF_OBJECT_TYPE_LIST in base.h) stay below the range. Indices are
 * given in registration order and are never reused. PFObjectTypeName gives
 * the key of a registered index, and PFObjectGetTypeIndex an instance's
 * index (its own type's, not an ancestor's).
 *
 * Inheritance. A type may name a registered parent: it then has the
 * parent's fields (at the parent's offsets: the child's struct begins with
 * the parent's struct) and methods, may add its own, and may override a
 * method by defining one of the same name. An instance of a child is an
 * instance of each of its ancestors (PFObjectIsInstance, the `obj<KEY>`
 * parameters of typed functions). Single inheritance only; at most
 * PF_OBJECT_TYPE_MAX_DEPTH ancestors.
 *
 * The struct. PFObjectGetData gives the struct that follows the header,
 * aligned to PF_OBJECT_DATA_ALIGN bytes and instance_size bytes long, all
 * zero when allocated; the registering code owns it, and C code reads and
 * writes it directly. Fields are the parts of it that hosts see. A field's
 * type says what its bytes hold (the storage rule) and how a value converts
 * to and from them (the rules of typed calls, signature.h):
 *
 *   field type              bytes at the offset        a read gives, a write takes
 *   ----------------------  -------------------------  ---------------------------
 *   int8 .. int64,          the C type (int64_t, ...)  as a typed function's
 *   uint8 .. uint64,                                   result and argument of that
 *   float32, float64, bool                             type (range-checked)
 *   dtype, device           DLDataType, DLDevice       kPFDataType, kPFDevice; the
 *                                                      zero dtype (no lanes, as a
 *                                                      zeroed struct has) is null,
 *                                                      and null writes it
 *   ptr                     void*, never dereferenced  kPFOpaqueHandle; null is NULL
 *   str                     char*, owned (below)       kPFStr; null is NULL
 *   bytes                   PFByteArray*, owned        kPFBytes; null is NULL
 *   tensor                  PFObjectHandle of a tensor kPFObjectHandle of a tensor
 *                           object, owned              object; null is NULL (a
 *                                                      borrowed kPFDLTensorHandle
 *                                                      cannot be kept: TypeError)
 *   func, array, map,       PFObjectHandle, owned      as a typed function's result
 *   shape, object,                                     and argument of that type
 *   obj<KEY>                                           (obj<KEY>: an instance of
 *                                                      KEY or of a descendant)
 *   array<T>, list<T>,      as array, list, map,       checked and converted as a
 *   map<K,V>, dict<K,V>,    dict; optional and union   typed argument (signature.h):
 *   optional<T>,            as their C type (refused   the field keeps the converted
 *   union<...>              without one)               container
 *
 * A list<T> or dict<K,V> field keeps the List or Dict it was given (when
 * nothing had to convert), which stays mutable: its elements are checked
 * when the field is written, not when someone appends to it later. C code
 * that reads such a field's elements checks each one's type code, as
 * PFListGetItem and PFDictGetItem report it; array<T> and map<K,V> fields
 * hold immutable containers, whose elements stay as checked.
 *
 * Owned means: the instance holds the value and releases it when the
 * instance is destroyed, after its finalizers have run. A str is a
 * NUL-terminated copy and a bytes value one block (the PFByteArray, then
 * its data), both from the runtime's allocator (PFMemAlloc; freed with
 * PFMemFree); a handle is a reference of the instance's own. C code that
 * writes such a field itself follows the same rule: it stores a PFMemAlloc
 * block or a reference of its own and frees or releases the value it
 * replaces. Objects held in fields are released one after another, not by
 * recursion (as containers' items are: object.h, PFObjectFree), so a chain
 * of instances of any length is freed in constant stack.
 *
 * Reading a field gives a borrowed value: a str, bytes or handle points
 * into the instance (take a reference, or copy, to keep it), valid until
 * the field is written again or the instance is destroyed. A field is
 * read-only to hosts unless its flags have kPFFieldWritable (PFObjectSetField
 * on a read-only field is an AttributeError); the registering C code writes
 * its struct as it likes.
 *
 * Methods. A method is a packed C function or a typed C function
 * (signature.h) whose first argument is the object itself (`object` or
 * `obj<KEY>` of the type or an ancestor, for a typed one), unless its flags
 * have kPFMethodStatic: a static method takes only the caller's arguments.
 * Each method becomes a function (PFObjectTypeGetMethod: unbound, the
 * object comes first; PFObjectGetMethod: bound to one instance, through
 * PFFuncBind), with metadata: the name "KEY.NAME", the signature (a typed
 * method's canonical one, or the one given for a packed method) and the
 * doc. An instance method's function checks its first argument before the
 * method's code runs, packed and typed methods alike: it must be an
 * instance of the method's type or of a descendant (so a method declared
 * with `object`, or with an ancestor's obj<KEY>, still gets only instances
 * of its own type); null, another type code, an object of another type or
 * an instance of an ancestor is a TypeError naming both types, e.g.
 * "method 'mylib.Counter.reset': argument 0 (the object): expected
 * obj<mylib.Counter>, got mylib.Base object". The check compares the
 * object's type index with the method's type, and walks the parent chain
 * only when they differ.
 *
 * The constructor. A method named "__init__" makes the type constructible
 * with arguments (the nearest one, own or inherited, is used):
 *   - an instance method: the constructor allocates a zeroed instance of the
 *     type, calls __init__ with it first and the caller's arguments after,
 *     and returns the instance; a failing __init__ fails the constructor,
 *     which then releases the instance (its finalizers run on what __init__
 *     left, so finalizers handle a partly initialized struct). A result of
 *     __init__ is ignored;
 *   - a static method (a factory): the constructor calls it with the
 *     caller's arguments and returns its result, which must be an instance
 *     of the type or a descendant (TypeError otherwise, naming both).
 * A type without __init__ in its chain constructs from no arguments: a
 * zeroed instance. PFObjectTypeGetConstructor gives the constructor as a
 * function whose name is the key, whose doc is the type's, and, when
 * __init__ has a signature, whose signature is "obj<KEY>(ARGS...)".
 *
 * Lifetime of types. A registered type is never removed: its index, key
 * and description (every pointer that PFObjectTypeGetInfo and
 * PFObjectTypeGetField give) stay valid for the rest of the process, so a
 * host may keep them in its classes without references. A type's code (its
 * finalizers, methods and constructor) is made ready when the type is
 * first used — its first instance (PFObjectAlloc or the constructor), its
 * constructor or a method looked up — and stays loaded from then on, with
 * the code of its ancestors: once a type of a module has been used, the
 * module's shared library is never unloaded. Until then, a type registered
 * by a module loaded from a file (PFModLoadFromFile) holds nothing, so that
 * a module loaded only for its functions unloads as before; if that
 * library is unloaded, its unused types become dormant: their indices and
 * descriptions remain, using one fails with a RuntimeError saying that the
 * module is unloaded, and registering the same description again (loading
 * the module again) makes the type usable with the newly loaded code. A
 * type registered with PFObjectTypeRegister or PFModLoadFromDescriptors is
 * made ready when it is registered.
 *
 * Threads. Every entry point here is thread-safe: types may be registered
 * while other threads create instances, read descriptions and call methods.
 * Registration and the first use of a type take a process-wide lock, held
 * only for table work (never while user code runs, and reset in the child
 * of fork()); reading a description, allocating, and reading or writing
 * fields take none. Fields are not guarded: as for a C struct, any number
 * of threads may read an instance's fields at once, but a write must not
 * run while another thread reads or writes the same field (a reader of a
 * str, bytes or handle field could be left with a released value). Hosts
 * serialize access to one instance as they do for their own objects.
 */

/* The first index of a registered type; registered types take
 * [kPFObjectTypeRegisteredBegin, kPFObjectTypeRegisteredBegin +
 * PF_OBJECT_TYPE_MAX_REGISTERED). Fixed: part of the ABI. The indices are
 * given in the order of registration, one after another, and never
 * reused: the registered types are the indices from
 * kPFObjectTypeRegisteredBegin on for which PFObjectTypeName (base.h) is
 * not NULL, up to the first that is (the way to list them:
 * `pf list --types`, Python's registered_types()). */
#define kPFObjectTypeRegisteredBegin 1024u
/* The most types a process can register. */
#define PF_OBJECT_TYPE_MAX_REGISTERED 65536u
/* The most ancestors a type may have (its parent, grandparent, ...). */
#define PF_OBJECT_TYPE_MAX_DEPTH 64
/* The most fields or methods a description may declare (each). */
#define PF_OBJECT_TYPE_MAX_MEMBERS 4096
/* The largest instance_size: a struct keeps bulk data behind a pointer
 * (or in a tensor or bytes field), not inline. */
#define PF_OBJECT_TYPE_MAX_SIZE ((size_t)1 << 24)
/* The longest key and the longest field or method name, in bytes. */
#define PF_OBJECT_TYPE_KEY_MAX 255
/* The alignment of an instance's struct (PFObjectGetData): that of any C
 * type without an extended alignment (max_align_t). */
#define PF_OBJECT_DATA_ALIGN 16

/* Field flags (PFFieldDesc.flags, PFFieldInfo.flags). */
#define kPFFieldWritable 1u /* hosts may write it (PFObjectSetField) */
/* Reported in PFFieldInfo.flags, never given in a PFFieldDesc: the field is
 * an accessor field (PFAccessorDesc), read and written through code. */
#define kPFFieldAccessor 2u
/* Method flags (PFMethodDesc.flags, PFMethodInfo.flags). */
#define kPFMethodStatic 1u /* takes no object: called with the caller's arguments only */
/* The method's function (PFObjectTypeGetMethod, PFObjectGetMethod) gets
 * kPFFuncNonBlocking (function.h): hosts may keep their interpreter lock
 * around its calls. A library older than this flag refuses it as an
 * unknown flag bit. */
#define kPFMethodNonBlocking 2u
/* PFMethodDesc.flags only, set by PF_METHOD_CHECKED and
 * PF_STATIC_METHOD_CHECKED (checked.h), not by hand: the method is typed
 * and its signature string is the signature text, PF_METHOD_C_TYPES_SEP,
 * then the PF_SIGNATURE_C_TYPES_TEXT (signature.h) of the header it was
 * compiled with, all one NUL-terminated string. Registration checks that
 * list against the runtime's own, as a function's check record is checked
 * (module.h), and refuses the type, whole, when they differ; it reads the
 * list only within the string, so a signature without the separator is a
 * ValueError, not a read past its end. PFMethodInfo.flags never has it.
 * A runtime older than this bit refuses it as unknown ("unknown flag bits
 * 0x4"): a plugin with checked methods needs this runtime or a later one. */
#define kPFMethodChecked 4u
/* The separator of a checked method's signature and its C types: the
 * string's last one (no list of C types contains it). */
#define PF_METHOD_C_TYPES_SEP "\x1f"

/* One field of a description. */
typedef struct PFFieldDesc {
  const char*
      name; /* an identifier ([A-Za-z_][A-Za-z0-9_]*), at most PF_OBJECT_TYPE_KEY_MAX bytes */
  const char* type; /* a type of the grammar (table above), e.g. "int64", "obj<mylib.Base>",
                       "list<str>", "optional<obj<mylib.Node>>" (element types,
                       optional and union: signature.h; a write is checked and
                       converted as a typed argument is) */
  size_t offset;    /* of its bytes in the struct (offsetof), aligned for its type */
  uint32_t flags;   /* 0 (read-only to hosts) or kPFFieldWritable */
  const char* doc;  /* NULL, or its docstring */
} PFFieldDesc;

/* One method of a description: exactly one of `packed` and `typed`. */
typedef struct PFMethodDesc {
  const char* name;      /* an identifier, as a field's; "__init__" for the constructor */
  PFPackedCFunc packed;  /* a packed C function, or NULL */
  void (*typed)(void);   /* a typed C function (cast), or NULL */
  const char* signature; /* typed: its signature (required); packed: NULL, or a
                            signature kept as metadata (checked the same way) */
  uint32_t flags;        /* 0, or kPFMethodStatic and kPFMethodNonBlocking, and
                            kPFMethodChecked from the checked macros (checked.h) */
  const char* doc;       /* NULL, or its docstring */
} PFMethodDesc;

/*
 * Accessor fields. A member that is not bytes of the storage rule (a C++
 * std::string, a value computed from others) can still be a field: its
 * description gives a getter and, for a writable one, a setter instead of
 * an offset. Hosts read and write it as any field (PFObjectGetField,
 * PFObjectSetField, obj.name in Python and Node); PFFieldInfo reports it
 * with kPFFieldAccessor, offset 0 and size 0 (nothing to read in place).
 *
 * Its type is a number type, bool, dtype, device, ptr, str or bytes (the
 * types whose values are no references: a field that holds references is
 * an offset field, so that the runtime sees them). Both functions get the
 * struct (PFObjectGetData) of an instance of the type or a descendant:
 *
 *   - the getter writes the field's value to *out and *out_type_code and
 *     returns 0, or returns -1 after recording an error (PFErrorSetFormat).
 *     The value must be one that a typed function's argument of the
 *     field's type takes (for str, kPFStr or kPFNull): the runtime
 *     converts it as such, and a value it refuses is a TypeError or
 *     ValueError naming the field. A str or bytes value is borrowed from
 *     the instance, as an offset field's: it must stay valid until the
 *     field is written again or the instance is destroyed (a pointer into
 *     the struct, such as a std::string's c_str()).
 *   - the setter takes a value already checked and converted as
 *     PFObjectSetField converts one for an offset field of the same type
 *     (kPFInt, kPFFloat, kPFBool, kPFDataType, kPFDevice, kPFOpaqueHandle,
 *     kPFStr or kPFBytes; kPFNull for a NULL ptr, but never for a str or
 *     bytes field: writing null to one is a TypeError before the setter
 *     runs), borrowed for the call: it copies what it keeps. It returns 0,
 *     or -1 after recording an error, and then leaves the member as it
 *     was.
 *
 * They run inside PFObjectGetField and PFObjectSetField, where a host may
 * hold a lock of its own around the instance: like a struct's member
 * access, they touch only the struct, call no other packedfunc function
 * than the error setters and no host code, and do not block. Their code
 * is in the library that registers the type and follows the rules of a
 * method's (see "Lifetime of types"). Threads: as for offset fields.
 */
typedef int (*PFFieldGetter)(const void* data, PFValue* out, int* out_type_code);
typedef int (*PFFieldSetter)(void* data, PFValue value, int type_code);

/* One accessor field of a description (PFObjectTypeDesc2). */
typedef struct PFAccessorDesc {
  const char* name;  /* an identifier, as a field's; shares the fields' and
                       methods' names */
  const char* type;  /* see above: a number type, bool, dtype, device, ptr,
                       str or bytes */
  PFFieldGetter get; /* required */
  PFFieldSetter set; /* NULL: read-only to hosts; else the field is writable */
  const char* doc;   /* NULL, or its docstring */
} PFAccessorDesc;

/* PF_ACCESSOR(name, type, get, set, doc): an accessor field's
 * PFAccessorDesc. */
#define PF_ACCESSOR(name, type, get, set, doc) \
  { (name), (type), (get), (set), (doc) }

/* The layout version of PFObjectTypeDesc; PF_OBJECT_TYPE_DESC2_ABI in its
 * `abi` says that it is the `base` of a PFObjectTypeDesc2 (which adds the
 * accessor fields), PF_OBJECT_TYPE_DESC3_ABI that it is the `v2.base` of a
 * PFObjectTypeDesc3 (which adds the prepare hook), so the registration
 * reads that one. A library older than a version refuses it ("layout
 * version 3; this library reads versions 1 to 2"). */
#define PF_OBJECT_TYPE_DESC_ABI 1u
#define PF_OBJECT_TYPE_DESC2_ABI 2u
#define PF_OBJECT_TYPE_DESC3_ABI 3u

/* A type to register. Read during registration only: everything is
 * copied. */
typedef struct PFObjectTypeDesc {
  uint32_t abi;                /* PF_OBJECT_TYPE_DESC_ABI */
  const char* key;             /* unique: identifiers joined by '.', e.g. "mylib.Counter";
                                   at most PF_OBJECT_TYPE_KEY_MAX bytes */
  const char* parent;          /* NULL, or the key of a registered type */
  size_t instance_size;        /* sizeof the struct; at least the parent's, at most
                                   PF_OBJECT_TYPE_MAX_SIZE */
  PFObjectFinalizer finalizer; /* NULL, or called with the struct when an instance
                                   goes, before the parent's finalizer */
  const char* doc;             /* NULL, or the type's docstring */
  const PFFieldDesc* fields;   /* num_fields entries (NULL when 0) */
  int num_fields;
  const PFMethodDesc* methods; /* num_methods entries (NULL when 0) */
  int num_methods;
} PFObjectTypeDesc;

/* A description with accessor fields: base.abi is PF_OBJECT_TYPE_DESC2_ABI,
 * and a pointer to `base` is what PFObjectTypeRegister and a module's
 * descriptor (PF_REGISTER_OBJECT_TYPE) take. A struct of its own, not
 * members appended to PFObjectTypeDesc, so that the descriptions written
 * with positional initializers before it still compile without warnings. */
typedef struct PFObjectTypeDesc2 {
  PFObjectTypeDesc base;
  const PFAccessorDesc* accessors; /* num_accessors entries (NULL when 0) */
  int num_accessors;
} PFObjectTypeDesc2;

/*
 * Rebuilding from fields. PFFromJSON (serialize.h; so also pickling and
 * deep copies in Python, and instances passed by value over rpc) rebuilds
 * an instance from its fields: it allocates one as PFObjectAlloc does,
 * then writes every field. A struct that needs more than zeroed bytes
 * before its fields can be written (a C++ object, which must be
 * constructed) says so with a prepare hook (PFObjectTypeDesc3): PFFromJSON
 * calls the nearest one of the instance's type and its ancestors (own or
 * inherited) with the zeroed struct, before the first field is written.
 * It returns 0, or -1 after recording an error (PFErrorSetFormat; a
 * RuntimeError naming the type when it recorded none): PFFromJSON then
 * fails with that error, and the instance is released (its finalizers run,
 * so they must handle a struct that the hook left as it was). Only the
 * thread that rebuilds holds the instance while the hook runs, so the hook
 * needs no synchronization. It runs no host code and calls no packedfunc
 * function other than the error setters; its code follows the rules of a
 * method's (see "Lifetime of types").
 *
 * Read-only fields are written too. An accessor field without a setter
 * cannot be: the rebuilt instance computes it itself, and PFFromJSON
 * checks that its getter gives the document's value (a ValueError naming
 * the field and both values otherwise).
 */
typedef int (*PFObjectPrepare)(void* data);

/* A description with accessor fields and a prepare hook: v2.base.abi is
 * PF_OBJECT_TYPE_DESC3_ABI, and a pointer to `v2.base` is what
 * PFObjectTypeRegister and a module's descriptor take. */
typedef struct PFObjectTypeDesc3 {
  PFObjectTypeDesc2 v2;
  PFObjectPrepare prepare; /* NULL, or the hook (above) */
} PFObjectTypeDesc3;

/* PF_FIELD(Struct, member, type, flags, doc): the PFFieldDesc of the
 * member `member` of `Struct`, named as the member. */
#define PF_FIELD(Struct, member, type, flags, doc) \
  { #member, (type), offsetof(Struct, member), (flags), (doc) }
/* PF_METHOD_PACKED(name, fn, doc) and PF_METHOD_TYPED(name, fn, signature,
 * doc): a method's PFMethodDesc; PF_STATIC_METHOD_TYPED is a static one. */
#define PF_METHOD_PACKED(name, fn, doc) \
  { (name), (fn), NULL, NULL, 0u, (doc) }
#define PF_METHOD_TYPED(name, fn, sig, doc) \
  { (name), NULL, (void (*)(void))(fn), (sig), 0u, (doc) }
#define PF_STATIC_METHOD_TYPED(name, fn, sig, doc) \
  { (name), NULL, (void (*)(void))(fn), (sig), kPFMethodStatic, (doc) }
/* The number of entries of an array (for num_fields, num_methods). */
#define PF_COUNTOF(array) ((int)(sizeof(array) / sizeof((array)[0])))

/* What PFObjectTypeGetInfo reports of one field. Owned by the runtime,
 * valid for the process. A pointer to it is also the field's handle for
 * PFObjectGetField and PFObjectSetField: it works on instances of the type
 * that declared the field and of its descendants. Members may be appended
 * in later versions; read it through the pointer. */
typedef struct PFFieldInfo {
  const char* name;
  const char* type;    /* the canonical type, e.g. "int64", "obj<mylib.Base>",
                          "list<str>" */
  const char* doc;     /* NULL when none */
  size_t offset;       /* in the struct (0 for an accessor field) */
  size_t size;         /* of its bytes (the storage rule's C type); 0 for an
                          accessor field, which has none to read in place */
  uint32_t flags;      /* kPFFieldWritable or 0, and kPFFieldAccessor */
  uint32_t type_index; /* the type that declared it */
} PFFieldInfo;

/* What PFObjectTypeGetInfo reports of one method (owned by the runtime,
 * valid for the process; members may be appended). The function itself
 * comes from PFObjectTypeGetMethod. */
typedef struct PFMethodInfo {
  const char* name;
  const char* signature; /* canonical, with the object first for an instance
                            method; NULL for a packed method given none */
  const char* doc;       /* NULL when none */
  uint32_t flags;        /* kPFMethodStatic, kPFMethodNonBlocking or 0 */
  uint32_t type_index;   /* the type that declared it */
} PFMethodInfo;

/* A registered type's description, owned by the runtime and valid for the
 * process; members may be appended in later versions. Fields come in
 * layout order of declaration: the root ancestor's first, then each
 * descendant's own (a type's offset fields, then its accessor fields). Methods likewise, except that an override takes the
 * place of the method it overrides, and so each name appears once. */
typedef struct PFObjectTypeInfo {
  const char* key;
  const char* doc; /* NULL when none */
  uint32_t type_index;
  uint32_t parent_index; /* 0 for a type without a parent */
  int32_t depth;         /* the number of ancestors */
  int32_t num_fields;
  int32_t num_methods;
  size_t instance_size;
  const PFFieldInfo* const* fields;   /* num_fields entries */
  const PFMethodInfo* const* methods; /* num_methods entries */
  const PFMethodInfo* init;           /* the __init__ method (own or inherited), or NULL */
} PFObjectTypeInfo;

/*
 * Registers an object type and writes its index to *out_type_index.
 *
 * The description is checked whole before anything is registered, and
 * copied. A second registration of a key is allowed only when the
 * description is identical (the same parent, size, finalizer, prepare
 * hook, docs, fields
 * and methods with the same names, types, offsets, flags and code): it
 * then writes the index of the registered type and registers nothing (a
 * module loaded twice registers its types once). The type's methods and
 * constructor are made ready at once (see "Lifetime of types" above): each
 * keeps loaded the shared library its code is in.
 *
 * Errors (nothing is registered): NULL desc or out_type_index (TypeError);
 * desc->abi not one of PF_OBJECT_TYPE_DESC_ABI, PF_OBJECT_TYPE_DESC2_ABI
 * and PF_OBJECT_TYPE_DESC3_ABI (ValueError); a NULL, empty,
 * over-long or malformed key, field name or method name (ValueError
 * naming it); a key registered with another description (KeyError naming
 * the key and what differs); a parent that is not registered, the type
 * itself as its parent, more than PF_OBJECT_TYPE_MAX_DEPTH ancestors
 * (ValueError); instance_size smaller than the parent's, or larger than
 * PF_OBJECT_TYPE_MAX_SIZE (ValueError); a negative count, a NULL array with a
 * count, more than PF_OBJECT_TYPE_MAX_MEMBERS fields or methods
 * (ValueError; NULL array: TypeError); a field type that the grammar does
 * not have or that cannot be a field (void), an obj<KEY> of a type not
 * registered (ValueError naming the field); a field whose offset is not
 * aligned for its type, whose bytes pass instance_size, or overlap another
 * field's (own or inherited) (ValueError naming both fields); a field or
 * method whose name is taken by another field or method, own or inherited
 * (ValueError; a method of the same name as an inherited method overrides
 * it instead); unknown flag bits (ValueError); a method with neither or
 * both of packed and typed, a typed method without a signature, a
 * signature that does not parse (ValueError, as PFFuncCreateFromTyped's,
 * naming the method), an instance method whose signature has no first
 * parameter of type object or obj<KEY> of the type or an ancestor, a
 * static __init__ whose result is not object or obj<KEY> of the type
 * (ValueError); a method with kPFMethodChecked that is packed, whose
 * signature has no PF_METHOD_C_TYPES_SEP, or whose recorded C types give a
 * type of its signature other C types than this library's (ValueError
 * naming the type and the method: "... was checked against a header
 * whose float64 is `float/float`, this library's is `double/double`:
 * rebuild the plugin against this packedfunc"); an accessor field
 * (PFObjectTypeDesc2) without a getter, or of a type that is not a number
 * type, bool, dtype, device, ptr, str or bytes (ValueError naming it; its
 * name is checked as a field's, and its count and array as the fields');
 * PF_OBJECT_TYPE_MAX_REGISTERED types registered already (RuntimeError);
 * MemoryError (one that comes while the registered type's
 * code is being made ready leaves the type registered, and its first use,
 * or registering it again, makes it ready).
 * Thread-safe; two threads registering the same description at once both
 * get its one index.
 */
PF_EXPORT int PFObjectTypeRegister(const PFObjectTypeDesc* desc, uint32_t* out_type_index);

/* Looks a key up: writes the type's index to *out_type_index, or 0 when no
 * type has that key (not an error, as PFFuncGetGlobal). A dormant type is
 * found. Errors: NULL key or out_type_index (TypeError). Thread-safe. */
PF_EXPORT int PFObjectTypeFind(const char* key, uint32_t* out_type_index);

/* The description of a registered type: *out points to the runtime's
 * immutable copy, valid for the process (see PFObjectTypeInfo). Reading it
 * does not make the type's code ready. Errors: NULL out (TypeError); an
 * index that is not a registered type (KeyError naming it; a built-in
 * type's index too). Thread-safe, lock-free. */
PF_EXPORT int PFObjectTypeGetInfo(uint32_t type_index, const PFObjectTypeInfo** out);

/* The field `name` of a registered type (own or inherited): *out is its
 * description, which is also its handle (PFObjectGetField). Look a field up
 * once and keep the handle: it is valid for the process.
 * Errors: NULL name or out (TypeError); an index that is not a registered
 * type (KeyError); no such field (AttributeError naming the type and the
 * name). Thread-safe. */
PF_EXPORT int PFObjectTypeGetField(uint32_t type_index, const char* name, const PFFieldInfo** out);

/* The method `name` of a registered type (own or inherited, the override
 * when there is one), unbound: a function that takes the object first
 * (none for a static method). *out is a new reference (PFFuncFree). Makes
 * the type's code ready (see above).
 * Errors: NULL name or out (TypeError); an index that is not a registered
 * type (KeyError); no such method (AttributeError naming the type and the
 * name); a dormant type, or one whose ancestor is dormant (RuntimeError
 * naming the type: its module was unloaded); MemoryError. Thread-safe. */
PF_EXPORT int PFObjectTypeGetMethod(uint32_t type_index, const char* name, PFFunctionHandle* out);

/* The type's constructor (see "The constructor" above), a function: a new
 * reference (PFFuncFree). Makes the type's code ready.
 * Errors: NULL out (TypeError); an index that is not a registered type
 * (KeyError); a dormant type (RuntimeError); MemoryError. Thread-safe. The
 * constructor may be called from any thread. */
PF_EXPORT int PFObjectTypeGetConstructor(uint32_t type_index, PFFunctionHandle* out);

/* Allocates an instance of a registered type, without calling __init__:
 * the header, then instance_size zero bytes (the struct). *out is a new
 * reference (PFObjectFree); when the last reference goes, the finalizers
 * of the type and its ancestors run (the type's own first), then the
 * fields' values are released. Makes the type's code ready.
 * Errors: NULL out (TypeError); an index that is not a registered type
 * (KeyError); a dormant type (RuntimeError); MemoryError. Thread-safe. */
PF_EXPORT int PFObjectAlloc(uint32_t type_index, PFObjectHandle* out);

/* The struct of an instance of a registered type (see "The struct"):
 * borrowed, valid while the instance lives. Costs a check and an addition.
 * Errors: obj not a live object, NULL out (TypeError); an object of a
 * built-in type (TypeError naming it). Thread-safe. */
PF_EXPORT int PFObjectGetData(PFObjectHandle obj, void** out);

/* Writes 1 to *out when obj is an instance of the type type_index or of a
 * descendant of it (for a built-in type_index: when obj's type is that
 * type), else 0. Errors: obj not a live object, NULL out (TypeError);
 * type_index neither a built-in nor a registered type (KeyError).
 * Thread-safe, lock-free. */
PF_EXPORT int PFObjectIsInstance(PFObjectHandle obj, uint32_t type_index, int* out);

/*
 * Reads a field of an instance through its handle (PFObjectTypeGetField,
 * PFObjectTypeInfo.fields): *out and *out_type_code get the field's value,
 * converted by the storage rule above (a str, bytes or handle is borrowed
 * from the instance). The handle must be a field of obj's type or of an
 * ancestor.
 * Errors: obj not a live instance, NULL out or out_type_code, field not a
 * field handle (TypeError); a field of a type that obj is not an instance
 * of (TypeError naming both types and the field); a uint64 field above
 * INT64_MAX (ValueError, as a typed result); an accessor field's getter
 * that fails (its error; a RuntimeError if it recorded none) or gives a
 * value its type does not take (TypeError or ValueError naming the field
 * and "its getter's value"). Nothing is written on error.
 * Cost: a read of an int64, float64 or bool field is a few compares and
 * loads, no more than a packed call (bench/bench_c.c: field_get). Takes no
 * lock; thread-safe as described under "Threads".
 */
PF_EXPORT int PFObjectGetField(PFObjectHandle obj, const PFFieldInfo* field, PFValue* out,
                               int* out_type_code);

/*
 * Writes a field of an instance through its handle: `value` (type code
 * `type_code`) is converted as a typed function converts an argument of
 * the field's type (so a float for an int64 field is a TypeError, an int
 * out of an int8's range a ValueError), with kPFNull also accepted for str,
 * bytes, ptr, tensor and the handle types (NULL; not for a str or bytes
 * accessor field). A str or bytes value is
 * copied; a handle gets a reference of the instance's own. The value the
 * field held is then freed or released (which may run its finalizer).
 * Errors: as PFObjectGetField for obj and field; a read-only field
 * (AttributeError naming the field and the type); a value of the wrong
 * type (TypeError naming the field, its type, its object type and what was
 * given, e.g. "PFObjectSetField: field 'count' of mylib.Counter: expected
 * int64, got str"); a value out of range (ValueError); a kPFDLTensorHandle
 * for a tensor field (TypeError: a borrowed DLTensor* cannot be kept);
 * MemoryError; an accessor field's setter that fails (its error; a
 * RuntimeError if it recorded none). On error the field is unchanged.
 * Takes no lock.
 */
PF_EXPORT int PFObjectSetField(PFObjectHandle obj, const PFFieldInfo* field, PFValue value,
                               int type_code);

/* PFObjectGetField and PFObjectSetField by the field's name (a lookup per
 * call: keep a handle where speed matters). Errors: theirs, and a NULL name
 * (TypeError), no such field (AttributeError naming the type and the name).
 */
PF_EXPORT int PFObjectGetFieldByName(PFObjectHandle obj, const char* name, PFValue* out,
                                     int* out_type_code);
PF_EXPORT int PFObjectSetFieldByName(PFObjectHandle obj, const char* name, PFValue value,
                                     int type_code);

/* The method `name` of an instance's type, bound to the instance: a
 * function that calls the method with obj first and the caller's arguments
 * after (PFFuncBind; it holds a reference to obj). A static method is
 * returned unbound. *out is a new reference (PFFuncFree).
 * Errors: obj not a live instance, NULL name or out (TypeError); no such
 * method (AttributeError naming the type and the name); MemoryError.
 * Thread-safe. */
PF_EXPORT int PFObjectGetMethod(PFObjectHandle obj, const char* name, PFFunctionHandle* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_OBJECT_TYPE_H_ */
