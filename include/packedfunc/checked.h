/*
 * packedfunc — typed registrations that the compiler checks: the signature
 * written as types and names, from which the macros make both the
 * signature text (kept as metadata, as a string signature is) and a static
 * assertion that the C function has the C prototype that the text
 * describes.
 */
#ifndef PACKEDFUNC_CHECKED_H_
#define PACKEDFUNC_CHECKED_H_

#include "packedfunc/module.h"
#include "packedfunc/object_type.h"
#include "packedfunc/signature.h"

/* ------------------------------------------------------------------------ */
/* Checked registration                                                      */
/* ------------------------------------------------------------------------ */

/*
 * A string signature beside a function pointer is a claim that nothing
 * checks: `float half(float)` registered as "float64(float64)" compiles
 * and returns garbage. The checked forms spell the signature as macro
 * arguments instead, so that the compiler sees the types:
 *
 *     static double clamp(double x, double lo, double hi) { ... }
 *     PF_REGISTER_CHECKED("mylib.clamp", clamp, PF_RET(float64), PF_ARG(float64, x),
 *                         PF_ARG_DEFAULT(float64, lo, 0), PF_ARG_DEFAULT(float64, hi, 1),
 *                         PF_DOC("Clamps x to [lo, hi]."));
 *
 * registers what PF_REGISTER_TYPED("mylib.clamp", clamp, "float64(x:float64,
 * lo:float64=0,hi:float64=1)", "Clamps x to [lo, hi].") registers, and
 * fails to compile unless `clamp` is a `double (*)(double, double, double)`,
 * with a message that names the function and the signature, at the
 * registration's line (clang; gcc gives this header's line, with a note
 * "in expansion of macro 'PF_REGISTER_CHECKED'" at the registration's):
 *
 *     demo.c:12:1: error: static assertion failed: "PF_REGISTER_CHECKED:
 *     the C prototype of clamp is not the one that signature
 *     float64(x:float64,lo:float64=0,hi:float64=1) describes (C types:
 *     PF_SIGNATURE_C_TYPES in signature.h)"
 *
 * The items, in this order:
 *   PF_RET(TYPE)                    the result; PF_RET(void) for none
 *   PF_ARG(TYPE, NAME)              a parameter, once per parameter (at most
 *                                   PF_TYPED_MAX_ARGS)
 *   PF_ARG_DEFAULT(TYPE, NAME, LITERAL)  a parameter with a default: LITERAL
 *                                   as signature.h writes it (0, -1.5, "abc",
 *                                   true, null, b"\x00"), taken as written
 *                                   (a macro there is not expanded)
 *   PF_NONBLOCKING                  optional, after the parameters: the
 *                                   function is short and never blocks
 *                                   (kPFFuncNonBlocking, function.h), so
 *                                   hosts may keep their interpreter lock
 *                                   around its calls; a method gets
 *                                   kPFMethodNonBlocking (object_type.h)
 *   PF_DOC("...")                   optional, last: the docstring
 * TYPE is a name of signature.h's table but any (void only as a result),
 * or obj(KEY) for obj<KEY> (`obj(mylib.Counter)`), or tensor(CONSTRAINT)
 * for tensor<CONSTRAINT> (`tensor(float64, 1, contiguous)`). Parameters are
 * always named. The C types are PF_SIGNATURE_C_TYPES's (signature.h): an
 * int64 is an int64_t (not a long long, even where both are 64 bits), a
 * float64 a double, a float32 a float, a str a const char*, a bytes
 * argument a const PFByteArray* and a bytes result a PFByteArray, obj(KEY)
 * a PFObjectHandle, a tensor a DLTensor*. A name outside the table is a
 * compile error too ("unknown type name 'PFSignatureArg_double'", or
 * PFSignatureResult_double for a result).
 *
 * What the compiler cannot see, and stays the loader's or nobody's to
 * check:
 *   - ptr, func, array, map, shape, object, list, dict and obj<KEY> are all
 *     `void*` in C, so one of them written for another compiles (the
 *     runtime still checks each argument's object type at every call);
 *   - KEY, the tensor constraint, the names and the defaults are text: a
 *     KEY that is not registered, a bad constraint, a default that does not
 *     convert are errors when the module loads, as for the string forms;
 *   - a packed function's signature (PF_REGISTER_PACKED_SIG, a method's
 *     metadata) describes what the function reads from its PFValue array,
 *     which C cannot see at all: it stays a string, and a packed function
 *     checks its own arguments;
 *   - signatures made at run time (PFFuncCreateFromTyped, PFFuncToCFunction)
 *     are strings: the compiler never sees them.
 * What the compiler saw is checked again when the module loads:
 * PF_REGISTER_CHECKED emits, beside the function's descriptor, a check
 * record (module.h, kPFFuncDescriptorCheck) with the signature text and
 * PF_SIGNATURE_C_TYPES_TEXT (signature.h), the C types this header gave
 * each type name. Loading fails, whole, with a ValueError naming the
 * function ("function mylib.half was checked against a header whose
 * float64 is `float/float`, this library's is `double/double`: rebuild the
 * plugin against this packedfunc") when the loading library's table gives
 * a type of the signature other C types (a plugin built from a stale
 * header), or when the record names no typed function of the module or
 * another signature (an altered registration). With PF_NONBLOCKING,
 * PF_REGISTER_CHECKED also emits a flags record (module.h,
 * PF_REGISTER_FLAGS). PF_METHOD_CHECKED and
 * PF_STATIC_METHOD_CHECKED sit in a method array, where no record can go
 * beside them: they set kPFMethodChecked (object_type.h) in the method's
 * flags and append PF_METHOD_C_TYPES_SEP and PF_SIGNATURE_C_TYPES_TEXT to
 * its signature string, and registering the type (PFObjectTypeRegister,
 * or loading the module) compares that list with the runtime's in the
 * same way, refusing the type, whole, with a ValueError naming the type
 * and the method ("object type 'mylib.Gauge': method 'scale' was checked
 * against a header whose float64 is `float/float`, this library's is
 * `double/double`: rebuild the plugin against this packedfunc"). The
 * signature and its list are one string, so no registration can part
 * them. A runtime older than kPFMethodChecked refuses such a type
 * ("unknown flag bits 0x4").
 *
 * The forms:
 *   PF_REGISTER_CHECKED(name, fn, PF_RET(...), items...)  at file scope,
 *       followed by `;`, as PF_REGISTER_TYPED (module.h);
 *   PF_METHOD_CHECKED(name, fn, PF_RET(...), items...) and
 *   PF_STATIC_METHOD_CHECKED(...)  a PFMethodDesc, in a static descriptor
 *       array, as PF_METHOD_TYPED and PF_STATIC_METHOD_TYPED (object_type.h):
 *       an instance method's first parameter is the object,
 *       PF_ARG(obj(KEY), self) or PF_ARG(object, self).
 * They need what the registration macros need (module.h) and C11 with the
 * GCC and Clang extensions __typeof__ and __builtin_types_compatible_p; in
 * C++ they are refused with a static assertion (C++ deduces signatures
 * from types: packedfunc.hpp).
 */

#if !defined(__cplusplus) && !defined(PF_NO_REGISTRATION_)

#define PF_RET(type)                                                                        \
  PF_CK_TYPE_(PF_CK_PROBE_##type, (#type, PFSignatureArg_##type, PFSignatureResult_##type), \
              PF_CK_COMPLEX_##type)
#define PF_ARG(type, name)                                                                      \
  PF_CK_ARG_(                                                                                   \
      #name ":", "",                                                                            \
      PF_CK_TYPE_(PF_CK_PROBE_##type, (#type, PFSignatureArg_##type, PFSignatureResult_##type), \
                  PF_CK_COMPLEX_##type))
#define PF_ARG_DEFAULT(type, name, literal)                                                     \
  PF_CK_ARG_(                                                                                   \
      #name ":", "=" #literal,                                                                  \
      PF_CK_TYPE_(PF_CK_PROBE_##type, (#type, PFSignatureArg_##type, PFSignatureResult_##type), \
                  PF_CK_COMPLEX_##type))
#define PF_DOC(text) (D, text, ~)
#define PF_NONBLOCKING (N, ~, ~)

#define PF_REGISTER_CHECKED(...) PF_CK_REGISTER_(__VA_ARGS__, PF_CK_PAD_)
#define PF_METHOD_CHECKED(...) PF_CK_METHOD_(0u, __VA_ARGS__, PF_CK_PAD_)
#define PF_STATIC_METHOD_CHECKED(...) PF_CK_METHOD_(kPFMethodStatic, __VA_ARGS__, PF_CK_PAD_)

/* How they work. Each item is a tuple (KIND, TEXT, C TYPE): A for a
 * parameter, D for the doc, N for PF_NONBLOCKING, E for the padding after
 * the last item. A type
 * is a tuple (TEXT, ARGUMENT TYPE, RESULT TYPE), made where the macro's own
 * argument is pasted and stringified, so that nothing in it is expanded
 * (stdbool.h's `bool`); obj(...) and tensor(...) are told from the plain
 * names by a probe macro that only they define. PF_CK_EACH_ applies a
 * context to the first 18 items (16 parameters, the doc, the padding), each
 * with its position: the signature text, the C parameter types (void
 * when there are none), a struct member of each, the doc. The assertion sits in a struct in a sizeof, which makes
 * it an expression that a static initializer (a descriptor array) can
 * hold. */
#define PF_CK_CAT2_(a, b) a##b
#define PF_CK_CAT_(a, b) PF_CK_CAT2_(a, b)
#define PF_CK_UNPACK_(...) __VA_ARGS__
#define PF_CK_SECOND_(a, b, ...) b
#define PF_CK_PICK_(...) PF_CK_SECOND_(__VA_ARGS__)

#define PF_CK_PROBE_obj(...) ~, 1
#define PF_CK_PROBE_tensor(...) ~, 1
#define PF_CK_COMPLEX_obj(...) ("obj<" #__VA_ARGS__ ">", PFObjectHandle, PFObjectHandle)
#define PF_CK_COMPLEX_tensor(...) ("tensor<" #__VA_ARGS__ ">", DLTensor*, DLTensor*)
#define PF_CK_TYPE_(probe, plain, complex) \
  PF_CK_CAT_(PF_CK_TYPE_, PF_CK_PICK_(probe, 0, ~))(plain, complex)
#define PF_CK_TYPE_0(plain, complex) plain
#define PF_CK_TYPE_1(plain, complex) complex
#define PF_CK_RTEXT_(text, arg, result) text
#define PF_CK_RTYPE_(text, arg, result) result

#define PF_CK_ARG_(prefix, suffix, type) PF_CK_ARG2_(prefix, suffix, PF_CK_UNPACK_ type)
#define PF_CK_ARG2_(...) PF_CK_ARG3_(__VA_ARGS__)
#define PF_CK_ARG3_(prefix, suffix, text, arg, result) (A, prefix text suffix, arg)

#define PF_CK_END_ (E, ~, ~)
#define PF_CK_PAD_                                                                                \
  PF_CK_END_, PF_CK_END_, PF_CK_END_, PF_CK_END_, PF_CK_END_, PF_CK_END_, PF_CK_END_, PF_CK_END_, \
      PF_CK_END_, PF_CK_END_, PF_CK_END_, PF_CK_END_, PF_CK_END_, PF_CK_END_, PF_CK_END_,         \
      PF_CK_END_, PF_CK_END_, PF_CK_END_, PF_CK_END_

/* ctx##KIND(position, text, type) for one item. */
#define PF_CK_ON_(ctx, i, item) PF_CK_ON2_(ctx, i, PF_CK_UNPACK_ item)
#define PF_CK_ON2_(...) PF_CK_ON3_(__VA_ARGS__)
#define PF_CK_ON3_(ctx, i, kind, text, type) ctx##kind(i, text, type)
#define PF_CK_EACH_(c, ...) PF_CK_E18_(c, __VA_ARGS__)
#define PF_CK_E18_(c, x, ...) PF_CK_ON_(c, 0, x) PF_CK_E17_(c, __VA_ARGS__)
#define PF_CK_E17_(c, x, ...) PF_CK_ON_(c, 1, x) PF_CK_E16_(c, __VA_ARGS__)
#define PF_CK_E16_(c, x, ...) PF_CK_ON_(c, 2, x) PF_CK_E15_(c, __VA_ARGS__)
#define PF_CK_E15_(c, x, ...) PF_CK_ON_(c, 3, x) PF_CK_E14_(c, __VA_ARGS__)
#define PF_CK_E14_(c, x, ...) PF_CK_ON_(c, 4, x) PF_CK_E13_(c, __VA_ARGS__)
#define PF_CK_E13_(c, x, ...) PF_CK_ON_(c, 5, x) PF_CK_E12_(c, __VA_ARGS__)
#define PF_CK_E12_(c, x, ...) PF_CK_ON_(c, 6, x) PF_CK_E11_(c, __VA_ARGS__)
#define PF_CK_E11_(c, x, ...) PF_CK_ON_(c, 7, x) PF_CK_E10_(c, __VA_ARGS__)
#define PF_CK_E10_(c, x, ...) PF_CK_ON_(c, 8, x) PF_CK_E9_(c, __VA_ARGS__)
#define PF_CK_E9_(c, x, ...) PF_CK_ON_(c, 9, x) PF_CK_E8_(c, __VA_ARGS__)
#define PF_CK_E8_(c, x, ...) PF_CK_ON_(c, 10, x) PF_CK_E7_(c, __VA_ARGS__)
#define PF_CK_E7_(c, x, ...) PF_CK_ON_(c, 11, x) PF_CK_E6_(c, __VA_ARGS__)
#define PF_CK_E6_(c, x, ...) PF_CK_ON_(c, 12, x) PF_CK_E5_(c, __VA_ARGS__)
#define PF_CK_E5_(c, x, ...) PF_CK_ON_(c, 13, x) PF_CK_E4_(c, __VA_ARGS__)
#define PF_CK_E4_(c, x, ...) PF_CK_ON_(c, 14, x) PF_CK_E3_(c, __VA_ARGS__)
#define PF_CK_E3_(c, x, ...) PF_CK_ON_(c, 15, x) PF_CK_E2_(c, __VA_ARGS__)
#define PF_CK_E2_(c, x, ...) PF_CK_ON_(c, 16, x) PF_CK_E1_(c, __VA_ARGS__)
#define PF_CK_E1_(c, x, ...) PF_CK_ON_(c, 17, x)

/* The contexts. A parameter after the first is preceded by a comma; a C
 * prototype without parameters is (void), since () would take any.
 * PF_CK_IF_FIRST_ picks the name of a macro, which is called after the
 * choice, so that the comma it makes splits nothing. */
#define PF_CK_FIRST_0 ~, 1
#define PF_CK_IF_FIRST_(i, first, other) \
  PF_CK_CAT_(PF_CK_TYPE_, PF_CK_PICK_(PF_CK_FIRST_##i, 0, ~))(other, first)()
#define PF_CK_NOTHING_()
#define PF_CK_COMMA_() ,
#define PF_CK_COMMA_TEXT_() ","
#define PF_CK_VOID_() void
#define PF_CK_TEXT_A(i, text, type) PF_CK_IF_FIRST_(i, PF_CK_NOTHING_, PF_CK_COMMA_TEXT_) text
#define PF_CK_TEXT_D(i, text, type)
#define PF_CK_TEXT_E(i, text, type)
#define PF_CK_PARAM_A(i, text, type) PF_CK_IF_FIRST_(i, PF_CK_NOTHING_, PF_CK_COMMA_) type
#define PF_CK_PARAM_D(i, text, type) PF_CK_IF_FIRST_(i, PF_CK_VOID_, PF_CK_NOTHING_)
#define PF_CK_PARAM_E(i, text, type) PF_CK_IF_FIRST_(i, PF_CK_VOID_, PF_CK_NOTHING_)
#define PF_CK_MEMBER_A(i, text, type) type pf_checked_##i;
#define PF_CK_MEMBER_D(i, text, type)
#define PF_CK_MEMBER_E(i, text, type)
#define PF_CK_DOC_A(i, text, type)
#define PF_CK_DOC_D(i, text, type) , text
#define PF_CK_DOC_E(i, text, type)
#define PF_CK_TEXT_N(i, text, type)
#define PF_CK_PARAM_N(i, text, type) PF_CK_IF_FIRST_(i, PF_CK_VOID_, PF_CK_NOTHING_)
#define PF_CK_MEMBER_N(i, text, type)
#define PF_CK_DOC_N(i, text, type)
/* PF_NONBLOCKING: `~, 1` for the probe of PF_CK_FLAGS_RECORD_, a flag bit
 * for a method. */
#define PF_CK_HAS_N_A(i, text, type)
#define PF_CK_HAS_N_D(i, text, type)
#define PF_CK_HAS_N_E(i, text, type)
#define PF_CK_HAS_N_N(i, text, type) ~, 1
#define PF_CK_MFLAG_A(i, text, type)
#define PF_CK_MFLAG_D(i, text, type)
#define PF_CK_MFLAG_E(i, text, type)
#define PF_CK_MFLAG_N(i, text, type) +kPFMethodNonBlocking

#define PF_CK_SIG_(ret, ...) PF_CK_RTEXT_ ret "(" PF_CK_EACH_(PF_CK_TEXT_, __VA_ARGS__) ")"
#define PF_CK_DOCS_(...) PF_CK_PICK_(NULL PF_CK_EACH_(PF_CK_DOC_, __VA_ARGS__), NULL, ~)
/* 0, or a compile error naming `fn` when its type is not the prototype. A
 * member of each parameter's type comes first, so that a name outside the
 * table is an "unknown type name 'PFSignatureArg_NAME'" in both compilers. */
#define PF_CK_CHECK_(form, fn, ret, ...)                                                        \
  (0 * sizeof(struct {                                                                          \
     PF_CK_EACH_(PF_CK_MEMBER_, __VA_ARGS__)                                                    \
     _Static_assert(                                                                            \
         __builtin_types_compatible_p(                                                          \
             __typeof__(&*(fn)), PF_CK_RTYPE_ ret (*)(PF_CK_EACH_(PF_CK_PARAM_, __VA_ARGS__))), \
         form ": the C prototype of " #fn " is not the one that signature " PF_CK_SIG_(         \
             ret, __VA_ARGS__) " describes (C types: PF_SIGNATURE_C_TYPES in signature.h)");    \
     char pf_checked_;                                                                          \
   }))

/* A flags record (module.h, kPFFuncDescriptorFlags) for a function
 * registered with PF_NONBLOCKING, followed by `;`; nothing otherwise. */
#define PF_CK_FLAGS_RECORD_(name, ...) \
  PF_CK_CAT_(PF_CK_FLAGS_RECORD_, PF_CK_PICK_(PF_CK_EACH_(PF_CK_HAS_N_, __VA_ARGS__), 0, ~))(name)
#define PF_CK_FLAGS_RECORD_0(name)
#define PF_CK_FLAGS_RECORD_1(name) PF_REGISTER_FLAGS(name, kPFFuncNonBlocking);

/* The function's descriptor, its flags record when it has one, then its
 * check record (module.h, kPFFuncDescriptorCheck): what this header's
 * table gave the types. */
#define PF_CK_REGISTER_(name, fn, ret, ...)                                                        \
  PF_REGISTER_(PF_UNIQUE_ID_,                                                                      \
               kPFFuncDescriptorTyped + PF_CK_CHECK_("PF_REGISTER_CHECKED", fn, ret, __VA_ARGS__), \
               name, NULL, (void (*)(void))(fn), PF_CK_SIG_(ret, __VA_ARGS__),                     \
               PF_CK_DOCS_(__VA_ARGS__), NULL, NULL, NULL);                                        \
  PF_CK_FLAGS_RECORD_(name, __VA_ARGS__)                                                           \
  PF_REGISTER_(PF_UNIQUE_ID_, kPFFuncDescriptorCheck, name, NULL, NULL,                            \
               PF_CK_SIG_(ret, __VA_ARGS__), PF_SIGNATURE_C_TYPES_TEXT, NULL, NULL, NULL)
/* A method's: the list travels in its signature string, after the
 * separator (object_type.h, kPFMethodChecked). */
#define PF_CK_METHOD_(flags, name, fn, ret, ...)                                      \
  {                                                                                   \
    (name), NULL, (void (*)(void))(fn),                                               \
        PF_CK_SIG_(ret, __VA_ARGS__) PF_METHOD_C_TYPES_SEP PF_SIGNATURE_C_TYPES_TEXT, \
        (flags) + kPFMethodChecked +                                                  \
            PF_CK_CHECK_("PF_METHOD_CHECKED", fn, ret, __VA_ARGS__)                   \
                PF_CK_EACH_(PF_CK_MFLAG_, __VA_ARGS__),                               \
        PF_CK_DOCS_(__VA_ARGS__)                                                      \
  }

#else /* C++, or a compiler without the registration macros */
#if defined(__cplusplus)
#define PF_CK_REFUSED_(what) \
  static_assert(false, what " is for C; C++ deduces signatures from types (packedfunc.hpp)")
#else
#define PF_CK_REFUSED_(what) PF_NO_REGISTRATION_(what)
#endif
#define PF_REGISTER_CHECKED(...) PF_CK_REFUSED_("PF_REGISTER_CHECKED")
#define PF_METHOD_CHECKED(...) PF_CK_REFUSED_("PF_METHOD_CHECKED")
#define PF_STATIC_METHOD_CHECKED(...) PF_CK_REFUSED_("PF_STATIC_METHOD_CHECKED")
#endif

#endif /* PACKEDFUNC_CHECKED_H_ */
