/*
 * packedfunc — modules: shared libraries of functions, and the macros that
 * register functions from C source.
 */
#ifndef PACKEDFUNC_MODULE_H_
#define PACKEDFUNC_MODULE_H_

#include "packedfunc/function.h"
#include "packedfunc/object_type.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Modules                                                                   */
/* ------------------------------------------------------------------------ */

/*
 * A module is a set of named functions that came together: from a shared
 * library (PFModLoadFromFile), or from a table of descriptors such as the
 * one the registration macros below build in a program
 * (PFModLoadFromDescriptors, PF_MODULE_LOAD_SELF). Loading a module does
 * not touch the global registry; PFModExportGlobal publishes its functions
 * there, or a host looks them up in the module with PFModGetFunction. (A
 * module may also bring object types, which loading registers in the
 * process-wide type table: see PFModLoadFromFile.)
 *
 * Lifetime. A module handle is a reference-counted object
 * (kPFObjectModule). Each function of a module loaded from a shared library
 * keeps that library loaded: dlclose runs only when the module handle AND
 * every function handle taken from it are gone, so releasing the module
 * first and calling one of its functions later is safe.
 *
 * The same holds for every object whose code may run later, whoever made
 * it: when an object is created with a code pointer — the function and the
 * finalizer of PFFuncCreateFromCFunc, the `fn` of PFFuncCreateFromTyped,
 * the finalizer of PFObjectCreateBoxed, the DLPack deleter of
 * PFTensorCreateFromDLPack — the runtime asks the dynamic loader which
 * shared library contains that code and takes a reference to it (one
 * dlopen reference per loaded library, shared by all its objects), which it
 * drops after the object's finalizer or deleter has run. So a tensor, a
 * function or a boxed object that a module's code creates and returns may
 * outlive the module and all of its functions; the library is closed when
 * the last of them goes (an object type's code is the exception: from the
 * type's first use it stays loaded for good, object_type.h). Code in the
 * main program and in libpackedfunc itself never unloads and holds
 * nothing; code that no library contains
 * (libffi closures, JIT-compiled code) holds nothing either, and whoever
 * made it must keep it alive as long as objects use it.
 *
 * Releasing. Dropping the last reference of a module releases its
 * functions and imports; an object released by a finalizer or by another
 * object's destruction is destroyed right after that one, by the same
 * release call and on the same thread, not by recursion: so releasing a
 * chain of a million modules, each importing the next, takes constant
 * stack.
 *
 * Threads. Every entry point here is thread-safe. A module's function table
 * never changes after loading; only its import list does (PFModImport). The
 * import lists are guarded by a process-wide lock that is held only for
 * plain memory work, never while user code runs; the runtime resets its
 * module locks in the child of fork() (pthread_atfork), so a child may load,
 * import and look up modules even when other threads were using them when
 * the process forked.
 */

/* Loads the shared library at `path` (dlopen with RTLD_NOW | RTLD_LOCAL)
 * and builds a module of every function that the library registered with
 * PF_REGISTER_PACKED and PF_REGISTER_TYPED. Each function carries metadata
 * (PFFuncGetInfo): its registered name, its doc when given, and for a
 * typed function its canonical signature.
 *
 * Object types that the library registered with PF_REGISTER_OBJECT_TYPE
 * are registered in the process-wide type table (object_type.h) as the
 * module loads, before its functions are made, so that their signatures
 * may name them (obj<KEY>); PFModListTypes lists their indices. Loading
 * registers them, where functions reach the global registry only when
 * exported, because a type key is process-wide by nature: an instance's
 * header carries its type's index, which must mean the same type to every
 * module and host that the instance reaches, whereas two modules may each
 * have a function of one name until one of them is published. And a host
 * that loads a module can make classes of its types at once. Registering
 * copies only data: the library's code is held for good only from the
 * first use of one of its types (object_type.h, "Lifetime of types"), so a
 * module loaded only for its functions unloads as before. Loading the
 * same module again (or loading it after it was unloaded) registers the
 * same descriptions again, which is not an error; a type of the same key
 * and another description is (below).
 *
 * The file is checked before dlopen reads it, so that a bad file is an
 * error and never a crash or a hang: it must be a regular file (not a
 * FIFO, a device or a directory), opened without blocking; its ELF header
 * must be one this process can load (class, byte order, machine); and its
 * program headers and every segment's file range must lie inside the file
 * (a truncated file would make dlopen fault with SIGBUS). After loading,
 * every pointer of the library's function table is checked against the
 * library's own loaded segments (dl_iterate_phdr) before it is read: each
 * descriptor must lie in the library's readable data, its name, signature
 * and doc must be strings that end inside it, and its function pointer must
 * point at loaded code (the library's own, or that of a library it links).
 *
 * Paths. A path with a slash is opened as it is (relative to the current
 * directory). A name without a slash that names an existing file (anything
 * but a directory) in the current directory is that file, opened as
 * "./NAME": the file a caller who sees it there means, which dlopen alone
 * would not look for; so "mylib.so" beside the caller loads, even when
 * dlopen's search path holds another library of that name. Any other name
 * without a slash is searched as dlopen searches it: a
 * library already loaded under that name is used as it is; otherwise the
 * directories of dlopen's search path (DT_RPATH, LD_LIBRARY_PATH,
 * DT_RUNPATH, the system directories, as RTLD_DI_SERINFO lists them) are
 * tried in order, and the first that holds a regular ELF file for this
 * machine is checked and loaded by its full path. A name that none of them
 * holds goes to dlopen unchanged, which then finds it through the loader's
 * cache (ldconfig's system libraries, which are not checked) or fails.
 *
 * The library should link against libpackedfunc.so (DT_NEEDED
 * libpackedfunc.so.0), so that it binds to the same copy of the runtime as
 * its host. Loading the same path twice works and gives two modules with
 * separate function objects over the one loaded copy of the library (the
 * dynamic loader counts the two loads; no constructor reruns). Nothing is
 * registered globally, so two modules may define the same name.
 *
 * *out is a new reference (PFModFree).
 * Errors: NULL path or out (TypeError); empty path (ValueError); a file
 * that cannot be loaded (RuntimeError: "cannot load 'PATH': " and why: the
 * system's "cannot open shared object file: No such file or directory",
 * "it is a FIFO, not a regular file", "invalid ELF header", "file
 * truncated: ...", or dlerror()'s own text); a library without
 * registrations, including one that merely depends on a module
 * (ValueError: "'PATH' is not a packedfunc module"); a corrupt function
 * table, a descriptor or string outside the library, a function pointer
 * that is not code, a descriptor built against an unknown descriptor ABI,
 * or another malformed one (ValueError naming the descriptor's index and
 * the bad address); the same name registered twice in the library
 * (KeyError naming it); a typed function whose signature does not parse
 * (the ValueError of PFFuncCreateFromTyped, with a traceback line naming
 * the function and the library); a checked registration whose check
 * record (kPFFuncDescriptorCheck) names no typed function of the library,
 * another signature, or C types other than this library's for a type of
 * the signature, as a plugin built from a stale header does (ValueError
 * naming the function and the type); a flags record (kPFFuncDescriptorFlags)
 * that names no function of the library or has bits this library does
 * not know (ValueError naming the function); an object type that PFObjectTypeRegister
 * would refuse (its error; all of the module's types are registered or
 * none), such as a key registered with another description (KeyError);
 * MemoryError. On any error the library is closed again (object types
 * registered before a later error stay registered, unused).
 */
PF_EXPORT int PFModLoadFromFile(const char* path, PFModuleHandle* out);

/*
 * Builds a module from functions the caller already has, each under the
 * name its metadata carries (PFFuncSetInfo): for a host or a library whose
 * functions are made at run time (remote functions, functions of another
 * language) rather than registered in a shared library. The module holds a
 * reference to each function, released when the module goes; the caller
 * keeps its own. `origin` names the module in messages (copied; NULL:
 * "<functions>"). `funcs` is read during this call only; NULL is allowed
 * when num_funcs is 0 (an empty module). *out is a new reference
 * (PFModFree); PFModGetFunction, PFModListFunctionNames, PFModImport and
 * PFModExportGlobal work on it as on any module.
 * Errors: NULL out, NULL funcs with num_funcs > 0, an entry that is not a
 * live function (TypeError naming "funcs[I]"); num_funcs < 0, a function
 * without a name (ValueError naming "funcs[I]"); two functions with the
 * same name (KeyError naming it); MemoryError. On error nothing is kept.
 * Thread-safe.
 */
PF_EXPORT int PFModCreateFromFunctions(const char* origin, const PFFunctionHandle* funcs,
                                       int num_funcs, PFModuleHandle* out);

/* Looks `name` up among the module's own functions and, when query_imports
 * is nonzero and the module has none of that name, among its imports,
 * depth-first in import order (an import's own functions before that
 * import's imports). A module that several imports share is searched once,
 * so the work is linear in the number of modules and imports, whatever the
 * number of paths through them, and no recursion limits the depth. A hit
 * is a new reference (PFFuncFree); a miss returns 0 with *out == NULL, as
 * PFFuncGetGlobal does.
 * Errors: mod not a live module, NULL name or out (TypeError);
 * MemoryError (a search that has more than a few dozen modules pending at
 * once needs a buffer). */
PF_EXPORT int PFModGetFunction(PFModuleHandle mod, const char* name, int query_imports,
                               PFFunctionHandle* out);

/* Makes `dep` an import of `mod`: PFModGetFunction(mod, ..., 1) then also
 * searches dep, and mod holds a reference to dep as long as mod lives.
 * Importing a module that is already imported is a no-op. The check for a
 * cycle visits each module reachable from dep once (linear work, as for a
 * lookup).
 * Errors: either argument not a live module (TypeError); an import that
 * would close a cycle, including mod == dep (ValueError); MemoryError. */
PF_EXPORT int PFModImport(PFModuleHandle mod, PFModuleHandle dep);

/* The names of the module's own functions (not its imports'), sorted.
 * *out_array has *out_size entries followed by NULL. The array and the
 * strings belong to the module and stay valid as long as the module handle
 * lives; they never change.
 * Errors: mod not a live module, NULL outputs (TypeError). */
PF_EXPORT int PFModListFunctionNames(PFModuleHandle mod, int* out_size, const char*** out_array);

/*
 * Registers each of the module's own functions globally under prefix +
 * its name (prefix may be NULL or ""), with the kPFRegister* flags. The
 * registry does this (it is part of registry/, built on the module calls
 * above) under its lock, all or nothing: every name is checked first and
 * then all are inserted in one step, so another thread sees either none of
 * the names or all of them, and a failed export changes nothing. Without
 * kPFRegisterOverride a name that is already taken fails the export with a
 * KeyError naming it; a protected name fails it with a RuntimeError, also
 * with kPFRegisterOverride. The functions an override replaced are
 * released after the lock is dropped (their finalizers may run then).
 * Errors: mod not a live module (TypeError); unknown flag bits
 * (ValueError); prefix + a name longer than PF_NAME_MAX (ValueError naming
 * 'prefix'); a taken name (KeyError); a protected name or a sealed registry
 * (RuntimeError); MemoryError. Thread-safe.
 */
PF_EXPORT int PFModExportGlobal(PFModuleHandle mod, const char* prefix, int flags);

/* Drops a reference to a module; see "Lifetime" above for when its library
 * is unloaded. NULL is a no-op that returns 0.
 * Errors: not a live module (TypeError). */
PF_EXPORT int PFModFree(PFModuleHandle mod);

/* The indices of the object types that the module registered when it was
 * loaded (PF_REGISTER_OBJECT_TYPE), in the library's order, each once; a
 * type the table already had (the same module loaded before) is listed
 * too. *out_array has *out_size entries, owned by the module and valid as
 * long as the module handle lives (NULL when there are none).
 * Errors: mod not a live module, NULL outputs (TypeError). Thread-safe. */
PF_EXPORT int PFModListTypes(PFModuleHandle mod, int* out_size, const uint32_t** out_array);

/* ------------------------------------------------------------------------ */
/* Registration from C source                                                */
/* ------------------------------------------------------------------------ */

/*
 * Any C file of a shared library (or of a program) registers functions with
 * one line each, at file scope:
 *
 *     static int scale(PFValue* args, int* codes, int n,
 *                      PFRetValueHandle ret, void* res) { ... }
 *     PF_REGISTER_PACKED("mylib.scale", scale, "Scales a tensor in place.");
 *
 *     static int64_t add(int64_t a, int64_t b) { return a + b; }
 *     PF_REGISTER_TYPED("mylib.add", add, "int64(int64,int64)");
 *     PF_REGISTER_TYPED("mylib.add2", add, "int64(int64,int64)", "Adds.");
 *
 * The last argument, the docstring, may be left out. The name must be a
 * string literal or another constant expression, as must the signature
 * (grammar: signature.h) and the doc.
 *
 * Nothing runs when the library is loaded (no constructor, no registration
 * at dlopen time): a module's functions reach the registry only when a
 * host exports them, and its object types (PF_REGISTER_OBJECT_TYPE, below)
 * reach the type table when a host loads the module. docs/internals.md
 * says how the macros work.
 *
 * A program (or a library linked directly into one) gets the functions it
 * registered itself with PF_MODULE_LOAD_SELF, then publishes them with
 * PFModExportGlobal, which reports a taken name as a KeyError:
 *
 *     PFModuleHandle self;
 *     if (PF_MODULE_LOAD_SELF(&self) != 0 ||
 *         PFModExportGlobal(self, "", 0) != 0) { ... PFGetLastError() ... }
 *     PFModFree(self);
 *
 * Requirements: GCC or Clang and an ELF linker (GNU ld, gold, lld); C99 or
 * later with C99 inline semantics (the default; not -fgnu89-inline), or
 * C++11 or later. The macros work the same in C and C++, and the C and C++
 * files of one library may both use them: a C++ file needs no wrapper and
 * no `extern "C"` of its own (the header gives the accessor C linkage), and
 * registers any function of the right type, a static member function or a
 * function in a namespace alike. A typed function's C++ prototype must be
 * the C one that its signature describes (int64_t, double, const char*,
 * ...); a packed function is a PFPackedCFunc.
 */

/* What kind of function a descriptor describes. */
#define kPFFuncDescriptorPacked 1u /* a PFPackedCFunc */
#define kPFFuncDescriptorTyped 2u  /* a plain C function and its signature */
#define kPFFuncDescriptorType 3u   /* not a function: an object type (layout 3) */
#define kPFFuncDescriptorDirect 4u /* a PFDirectCFunc, in `typed` (any layout) */
/* Not a function: what the compiler saw of a checked registration
 * (checked.h), beside the function's own descriptor (any layout). `name`
 * is the function's, `signature` its signature text, `doc` the
 * PF_SIGNATURE_C_TYPES_TEXT (signature.h) of the header it was built
 * with; the other members are NULL. Loading refuses the whole module
 * (ValueError naming the function) unless a typed function of the same
 * module has that name and that signature text, and the recorded C type
 * of each named type of the signature is this library's. A library older
 * than this kind refuses it as an unknown descriptor kind. */
#define kPFFuncDescriptorCheck 5u
/* Not a function: flags for a function of the same module, as
 * PFFuncSetFlags would set them (function.h: kPFFuncNonBlocking), for a
 * registration that cannot call it (PF_REGISTER_FLAGS, below; checked.h's
 * PF_NONBLOCKING). `name` is the function's; the flag bits are in `kind`
 * above its low 16 bits: kind is PF_FUNC_DESCRIPTOR_FLAGS(flags). The other
 * members are NULL (any layout). Loading refuses the whole module
 * (ValueError naming the function) when no function of the module has
 * that name, or when the bits hold one this library does not know. A
 * library older than this kind refuses it as an unknown descriptor kind. */
#define kPFFuncDescriptorFlags 6u
#define PF_FUNC_DESCRIPTOR_FLAGS(flags) (kPFFuncDescriptorFlags | ((uint32_t)(flags) << 16))

/* The layout version of PFFuncDescriptor. Version 2 appended the pre-pack
 * fields, version 3 the object type; a version 1 or 2 descriptor (a module
 * built against an older header) is still read, as the fields up to `doc`
 * or up to `prepack`. A module built with a version this library does not
 * know is refused with a clear error instead of being misread. */
#define PF_FUNC_DESCRIPTOR_ABI 3u

/* One registered function, or (kind kPFFuncDescriptorType) one object
 * type. The macros fill it in; a host may also build a table of pointers
 * to these by hand for PFModLoadFromDescriptors. */
typedef struct PFFuncDescriptor {
  uint32_t abi;          /* PF_FUNC_DESCRIPTOR_ABI (1 or 2) */
  uint32_t kind;         /* kPFFuncDescriptorPacked or kPFFuncDescriptorTyped */
  const char* name;      /* 1..PF_NAME_MAX bytes */
  PFPackedCFunc packed;  /* packed: the function; typed, direct: NULL */
  void (*typed)(void);   /* typed: the C function; direct: the PFDirectCFunc;
                            both cast; packed: NULL */
  const char* signature; /* typed: its signature; packed: NULL, or a
                            signature kept only as metadata */
  const char* doc;       /* NULL, or the docstring */
  /* Version 2. Both NULL, or the function's pre-pack hook and the layout it
   * produces, which loading gives the function (PFFuncSetPrePack, whose
   * rules apply: a non-empty format). The hook's resource_handle is the
   * function's: NULL for a packed function made from a descriptor. */
  const char* pack_format;
  PFPrePackFunc prepack;
  /* Version 3. For kind kPFFuncDescriptorType, the object type to register
   * (name and the members above are NULL); else NULL. */
  const PFObjectTypeDesc* object_type;
} PFFuncDescriptor;

/* Builds a module from the array of descriptor pointers [begin, end). Both
 * NULL is an empty module. The descriptors are read during this call only:
 * the functions' names, signatures and docs are copied. Functions are made
 * as PFModLoadFromFile makes them; each keeps loaded the shared library
 * that contains its code, if any (see "Lifetime" above). Object types are
 * registered as PFModLoadFromFile registers them, except that they are
 * made ready at once (their code is the host's: object_type.h, "Lifetime
 * of types"). The descriptors are the host's own and are trusted: they are
 * not checked against loaded segments as a library's are.
 * *out is a new reference (PFModFree).
 * Errors: NULL out, one of begin/end NULL (TypeError); end before begin,
 * a malformed descriptor (ValueError); a name given twice (KeyError); a bad
 * typed signature, or a check record that does not match (ValueError, as
 * for PFModLoadFromFile); an object type that PFObjectTypeRegister
 * would refuse (its error); MemoryError. Thread-safe. */
PF_EXPORT int PFModLoadFromDescriptors(const PFFuncDescriptor* const* begin,
                                       const PFFuncDescriptor* const* end, PFModuleHandle* out);

#if (defined(__GNUC__) || defined(__clang__)) &&                                           \
    ((defined(__cplusplus) && __cplusplus >= 201103L) ||                                   \
     (!defined(__cplusplus) && defined(__STDC_VERSION__) && __STDC_VERSION__ >= 199901L && \
      !defined(__GNUC_GNU_INLINE__)))

/* The bounds of this library's (or program's) "pf_functions" section, which
 * the linker defines. Hidden, so that each library sees its own; weak, so
 * that a program without registrations still links (both are NULL). */
extern const PFFuncDescriptor* const __start_pf_functions[]
    __attribute__((weak, visibility("hidden")));
extern const PFFuncDescriptor* const __stop_pf_functions[]
    __attribute__((weak, visibility("hidden")));

/* The accessor that PFModLoadFromFile looks up, with C linkage in both
 * languages. In C it is an inline definition (C99): a file that includes
 * the header emits no code for it; a file that uses a registration macro
 * redeclares it `extern`, which makes that file emit it, weak, so the
 * files of one library merge into one. (Clang wants `weak` on the
 * definition, GCC on a later declaration.) In C++ it is an inline
 * function, which a file emits (as a weak, mergeable definition) when it
 * uses it: a registration macro takes its address in a `used` variable.
 * The C and the C++ definitions are the same code and merge alike. */
#if defined(__cplusplus)
#define PF_ACCESSOR_DEF_ATTR_ __attribute__((visibility("default")))
#elif defined(__clang__)
#define PF_ACCESSOR_DEF_ATTR_ __attribute__((weak, visibility("default")))
#define PF_ACCESSOR_USE_ATTR_
#else
#define PF_ACCESSOR_DEF_ATTR_ __attribute__((visibility("default")))
#define PF_ACCESSOR_USE_ATTR_ __attribute__((weak))
#endif
PF_ACCESSOR_DEF_ATTR_ inline void PFModuleDescriptorsV1(const PFFuncDescriptor* const** begin,
                                                        const PFFuncDescriptor* const** end);
PF_ACCESSOR_DEF_ATTR_ inline void PFModuleDescriptorsV1(const PFFuncDescriptor* const** begin,
                                                        const PFFuncDescriptor* const** end) {
  *begin = __start_pf_functions;
  *end = __stop_pf_functions;
}

#define PF_CAT2_(a, b) a##b
#define PF_CAT_(a, b) PF_CAT2_(a, b)
#if defined(__COUNTER__)
#define PF_UNIQUE_ID_ __COUNTER__
#else
#define PF_UNIQUE_ID_ __LINE__
#endif

/* The pointer entries are 8-byte objects: no compiler pads or over-aligns
 * them, so the section is a plain array. */
#if defined(__cplusplus)
#define PF_ACCESSOR_USE_(id)                                                \
  __attribute__((used)) static void (*const PF_CAT_(pf_accessor_use_, id))( \
      const PFFuncDescriptor* const**, const PFFuncDescriptor* const**) = &PFModuleDescriptorsV1
#else
#define PF_ACCESSOR_USE_(id)                                         \
  extern void PFModuleDescriptorsV1(const PFFuncDescriptor* const**, \
                                    const PFFuncDescriptor* const**) PF_ACCESSOR_USE_ATTR_
#endif
/* A descriptor is a static const aggregate initialized by position, and
 * its entry a const pointer to it in the section: both mean the same in C
 * and C++ (no compound literals, no designated initializers). */
#define PF_REGISTER_AT_(id, kind, name, packed_fn, typed_fn, sig, doc, fmt, pp, ot)            \
  PF_ACCESSOR_USE_(id);                                                                        \
  static const PFFuncDescriptor PF_CAT_(pf_descriptor_, id) = {                                \
      PF_FUNC_DESCRIPTOR_ABI, kind, name, packed_fn, typed_fn, sig, doc, fmt, pp, ot};         \
  __attribute__((used, section("pf_functions"))) static const PFFuncDescriptor* const PF_CAT_( \
      pf_descriptor_entry_, id) = &PF_CAT_(pf_descriptor_, id)
#define PF_REGISTER_(...) PF_REGISTER_AT_(__VA_ARGS__)

#define PF_REGISTER_PACKED_2_(name, fn) \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorPacked, name, fn, NULL, NULL, NULL, NULL, NULL, NULL)
#define PF_REGISTER_PACKED_3_(name, fn, doc) \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorPacked, name, fn, NULL, NULL, doc, NULL, NULL, NULL)
#define PF_REGISTER_TYPED_3_(name, fn, sig)                                                        \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorTyped, name, NULL, (void (*)(void))(fn), sig, NULL, \
               NULL, NULL, NULL)
#define PF_REGISTER_TYPED_4_(name, fn, sig, doc)                                                  \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorTyped, name, NULL, (void (*)(void))(fn), sig, doc, \
               NULL, NULL, NULL)
#define PF_REGISTER_PREPACKED_4_(name, fn, fmt, pp) \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorPacked, name, fn, NULL, NULL, NULL, fmt, pp, NULL)
#define PF_REGISTER_PREPACKED_5_(name, fn, fmt, pp, doc) \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorPacked, name, fn, NULL, NULL, doc, fmt, pp, NULL)
#define PF_REGISTER_PACKED_SIG_3_(name, fn, sig) \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorPacked, name, fn, NULL, sig, NULL, NULL, NULL, NULL)
#define PF_REGISTER_PACKED_SIG_4_(name, fn, sig, doc) \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorPacked, name, fn, NULL, sig, doc, NULL, NULL, NULL)
/* A PFDirectCFunc as the descriptor's `typed` pointer; the conditional
 * makes the compiler check fn's type. */
#define PF_DIRECT_FN_(fn) ((void (*)(void))(1 ? (fn) : (PFDirectCFunc)0))
#define PF_REGISTER_DIRECT_2_(name, fn)                                                           \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorDirect, name, NULL, PF_DIRECT_FN_(fn), NULL, NULL, \
               NULL, NULL, NULL)
#define PF_REGISTER_DIRECT_3_(name, fn, doc)                                                     \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorDirect, name, NULL, PF_DIRECT_FN_(fn), NULL, doc, \
               NULL, NULL, NULL)
#define PF_PICK_3_(a, b, c, d, ...) d
#define PF_PICK_4_(a, b, c, d, e, ...) e
#define PF_PICK_5_(a, b, c, d, e, f, ...) f

/* PF_REGISTER_PACKED(name, fn [, doc]): registers the PFPackedCFunc `fn`
 * (type-checked) under `name`. Use at file scope, followed by `;`. */
#define PF_REGISTER_PACKED(...)                                         \
  PF_PICK_3_(__VA_ARGS__, PF_REGISTER_PACKED_3_, PF_REGISTER_PACKED_2_, \
             PF_REGISTER_PACKED_needs_2_or_3_arguments)                 \
  (__VA_ARGS__)

/* PF_REGISTER_TYPED(name, fn, signature [, doc]): registers the plain C
 * function `fn`, whose C prototype `signature` must describe (the runtime
 * cannot check it; a signature that does not parse fails the load). The
 * signature may name the parameters and give defaults and tensor
 * constraints (signature.h), which keyword calls use:
 *
 *     static double clamp(double x, double lo, double hi) { ... }
 *     PF_REGISTER_TYPED("mylib.clamp", clamp,
 *                       "float64(x: float64, lo: float64 = 0, hi: float64 = 1)");
 */
#define PF_REGISTER_TYPED(...)                                        \
  PF_PICK_4_(__VA_ARGS__, PF_REGISTER_TYPED_4_, PF_REGISTER_TYPED_3_, \
             PF_REGISTER_TYPED_needs_3_or_4_arguments, )              \
  (__VA_ARGS__)

/* PF_REGISTER_DIRECT(name, fn [, doc]): registers the PFDirectCFunc `fn`
 * (type-checked), a callee of the direct convention (function.h), whose
 * resolved target (PFFuncResolve) is `fn` itself with a NULL resource.
 * A library older than this header refuses such a descriptor with a clear
 * error (an unknown descriptor kind). */
#define PF_REGISTER_DIRECT(...)                                         \
  PF_PICK_3_(__VA_ARGS__, PF_REGISTER_DIRECT_3_, PF_REGISTER_DIRECT_2_, \
             PF_REGISTER_DIRECT_needs_2_or_3_arguments)                 \
  (__VA_ARGS__)

/* PF_REGISTER_PACKED_SIG(name, fn, signature [, doc]): registers the
 * PFPackedCFunc `fn` with a signature kept as metadata (PFFuncSetInfo):
 * names, defaults and types that hosts read and keyword calls
 * (PFFuncCallKw) use, while `fn` stays a packed function that checks its
 * own arguments. */
#define PF_REGISTER_PACKED_SIG(...)                                             \
  PF_PICK_4_(__VA_ARGS__, PF_REGISTER_PACKED_SIG_4_, PF_REGISTER_PACKED_SIG_3_, \
             PF_REGISTER_PACKED_SIG_needs_3_or_4_arguments, )                   \
  (__VA_ARGS__)

/* PF_REGISTER_PREPACKED(name, fn, pack_format, prepack [, doc]): registers
 * the PFPackedCFunc `fn` with its pre-pack hook `prepack` (a PFPrePackFunc,
 * type-checked), which produces the layout `pack_format`, a non-empty
 * string literal: loading gives the function the hook, so PFFuncBind packs
 * the constants bound to it (function.h, "Binding constants"). */
#define PF_REGISTER_PREPACKED(...)                                            \
  PF_PICK_5_(__VA_ARGS__, PF_REGISTER_PREPACKED_5_, PF_REGISTER_PREPACKED_4_, \
             PF_REGISTER_PREPACKED_needs_4_or_5_arguments, , )                \
  (__VA_ARGS__)

/* PF_REGISTER_FLAGS(name, flags): gives the function registered under
 * `name` in this library (with any of the macros here, or PF_DEF in C++)
 * the kPFFunc* `flags` (function.h) when the module loads, as
 * PFFuncSetFlags would (a flags record, kPFFuncDescriptorFlags). `flags`
 * is a constant expression. Use at file scope, followed by `;`:
 *
 *     static int64_t add(int64_t a, int64_t b) { return a + b; }
 *     PF_REGISTER_TYPED("mylib.add", add, "int64(int64,int64)");
 *     PF_REGISTER_FLAGS("mylib.add", kPFFuncNonBlocking);
 *
 * kPFFuncNonBlocking lets a host keep its interpreter lock around the
 * call: read what such a function must not do (function.h, and
 * docs/guide.md, "Functions that keep the GIL"). A name that no function
 * of the library has, or an unknown bit, fails the load. */
#define PF_REGISTER_FLAGS(name, flags)                                                             \
  PF_REGISTER_(PF_UNIQUE_ID_, PF_FUNC_DESCRIPTOR_FLAGS(flags), name, NULL, NULL, NULL, NULL, NULL, \
               NULL, NULL)

/* PF_REGISTER_OBJECT_TYPE(desc): registers the object type that the
 * PFObjectTypeDesc variable `desc` (static const, at file scope, with
 * constant members) describes; loading the module registers it
 * (PFModLoadFromFile). A type and its parent may be registered in any
 * order, in any files of the library. Use at file scope, followed by `;`:
 *
 *     typedef struct { int64_t count; } Counter;
 *     static const PFFieldDesc counter_fields[] = {
 *         PF_FIELD(Counter, count, "int64", kPFFieldWritable, "The count."),
 *     };
 *     static const PFObjectTypeDesc counter_type = {
 *         PF_OBJECT_TYPE_DESC_ABI, "mylib.Counter", NULL, sizeof(Counter), NULL,
 *         "Counts.", counter_fields, PF_COUNTOF(counter_fields), NULL, 0};
 *     PF_REGISTER_OBJECT_TYPE(counter_type);
 */
#define PF_REGISTER_OBJECT_TYPE(desc)                                                          \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorType, NULL, NULL, NULL, NULL, NULL, NULL, NULL, \
               &(desc))

/* PF_MODULE_LOAD_SELF(&mod): a module of the functions registered in the
 * program or library that this expression is compiled into (its own
 * "pf_functions" section), as PFModLoadFromDescriptors. */
#define PF_MODULE_LOAD_SELF(out) \
  PFModLoadFromDescriptors(__start_pf_functions, __stop_pf_functions, (out))

#else /* no registration macros here: say why at the first use */
#if defined(__cplusplus)
#define PF_NO_REGISTRATION_(what) \
  static_assert(false, what " needs GCC or Clang and C++11 or later")
#else
#define PF_NO_REGISTRATION_(what) \
  _Static_assert(0, what " needs GCC or Clang with C99 inline semantics")
#endif
#define PF_REGISTER_PACKED(...) PF_NO_REGISTRATION_("PF_REGISTER_PACKED")
#define PF_REGISTER_TYPED(...) PF_NO_REGISTRATION_("PF_REGISTER_TYPED")
#define PF_REGISTER_PACKED_SIG(...) PF_NO_REGISTRATION_("PF_REGISTER_PACKED_SIG")
#define PF_REGISTER_PREPACKED(...) PF_NO_REGISTRATION_("PF_REGISTER_PREPACKED")
#define PF_REGISTER_OBJECT_TYPE(desc) PF_NO_REGISTRATION_("PF_REGISTER_OBJECT_TYPE")
#define PF_REGISTER_FLAGS(name, flags) PF_NO_REGISTRATION_("PF_REGISTER_FLAGS")
#define PF_MODULE_LOAD_SELF(out) PF_NO_REGISTRATION_("PF_MODULE_LOAD_SELF")
#endif /* registration macros */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_MODULE_H_ */
