/*
 * packedfunc — the typed-signature grammar: how a C prototype is written
 * as text, and the table of its types.
 */
#ifndef PACKEDFUNC_SIGNATURE_H_
#define PACKEDFUNC_SIGNATURE_H_

#include "packedfunc/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* The signature grammar                                                     */
/* ------------------------------------------------------------------------ */

/*
 * A typed C function is an ordinary C function, such as
 * `int64_t add(int64_t, int64_t)`, described by a signature string; the
 * runtime converts between packed values and C values in both directions
 * through that description.
 *
 * Signature grammar (ASCII; blanks — space, tab, newline, carriage return — may appear
 * around every token):
 *
 *     signature := RET "(" [ ARG { "," ARG } ] ")"
 *     RET       := "void" | TYPE
 *     ARG       := TYPE
 *
 * At most PF_TYPED_MAX_ARGS (16) arguments; "()" means none ("(void)" is
 * an error, to keep one spelling). Type names are case-sensitive:
 *
 *   name     C argument type        from a packed argument     C result -> packed
 *   -------  ---------------------  -------------------------  ------------------
 *   int8     int8_t                 kPFInt, kPFBool (range-    kPFInt
 *   int16    int16_t                checked: a value outside   kPFInt
 *   int32    int32_t                the C type is ValueError)  kPFInt
 *   int64    int64_t                                           kPFInt
 *   uint8    uint8_t                  (negative -> ValueError) kPFInt
 *   uint16   uint16_t                                          kPFInt
 *   uint32   uint32_t                                          kPFInt
 *   uint64   uint64_t               kPFInt >= 0, kPFBool       kPFInt; above
 *                                                              INT64_MAX: ValueError
 *   float32  float                  kPFFloat, kPFInt, kPFBool  kPFFloat (exact)
 *   float64  double ("double" is    kPFFloat, kPFInt, kPFBool  kPFFloat
 *            accepted as an alias;
 *            "float" is an error)
 *   bool     bool (_Bool)           kPFBool; kPFInt 0 or 1     kPFBool
 *   str      const char*            kPFStr                     kPFStr (copied), or
 *                                                              kPFNull for NULL
 *   bytes    const PFByteArray*     kPFBytes                   kPFBytes; the C
 *            (result: PFByteArray                              function returns a
 *            by value)                                         PFByteArray by value
 *   ptr      void*                  kPFOpaqueHandle; kPFNull   kPFOpaqueHandle, or
 *                                   (NULL)                     kPFNull for NULL
 *   tensor   DLTensor*              kPFDLTensorHandle; kPFNull kPFDLTensorHandle, or
 *                                   (NULL); as an argument of  kPFNull for NULL
 *                                   a typed function also a
 *                                   tensor object (its
 *                                   DLTensor, borrowed) that
 *                                   is not read-only
 *   dtype    DLDataType (by value)  kPFDataType                kPFDataType
 *   device   DLDevice (by value)    kPFDevice                  kPFDevice
 *   func     PFFunctionHandle       kPFFuncHandle (a live      kPFFuncHandle, or
 *            (borrowed)             function); kPFNull (NULL)  kPFNull for NULL
 *   array    PFObjectHandle         kPFObjectHandle of a live  kPFObjectHandle, or
 *            (borrowed)             Array; kPFNull (NULL)      kPFNull for NULL
 *   map      PFObjectHandle         the same, of a Map         the same
 *   shape    PFObjectHandle         the same, of a Shape       the same
 *   object   PFObjectHandle         any live object, under     kPFFuncHandle for a
 *            (borrowed)             kPFObjectHandle,           function,
 *                                   kPFFuncHandle or           kPFModuleHandle for a
 *                                   kPFModuleHandle; kPFNull   module, else
 *                                   (NULL)                     kPFObjectHandle; or
 *                                                              kPFNull for NULL
 *   list     PFObjectHandle         as array, of a List        as array
 *   dict     PFObjectHandle         as array, of a Dict        as array
 *   obj<KEY> PFObjectHandle         kPFObjectHandle of a live  kPFObjectHandle, or
 *            (borrowed)             instance of the registered kPFNull for NULL
 *                                   type KEY or of a
 *                                   descendant; kPFNull (NULL)
 *   void     (result only)          -                          no value (kPFNull)
 *
 * Conversion rules, the same in both directions:
 *  - Any other type code is a TypeError; so a float passed where an integer
 *    or bool is expected is a TypeError, never a silent truncation.
 *  - Integers are range-checked against the C type: an int64 that does not
 *    fit an int32 argument, a negative value for an unsigned argument, or an
 *    int other than 0 or 1 for a bool, is a ValueError.
 *  - An int (or bool) converts to float32/float64 when a double holds it
 *    exactly (every int of magnitude up to 2^53, and larger ones that happen
 *    to be exact); otherwise it is a ValueError.
 *  - float32 narrowing rounds a double to the nearest float, as C does; a
 *    finite double beyond +-FLT_MAX is a ValueError; infinities and NaN pass.
 *  - A str, bytes, ptr or tensor pointer is borrowed for the call: the
 *    runtime never frees or keeps it.
 *
 * Results of a typed function (the C function's return value):
 *  - str: the C function returns a `const char*` that must stay valid after
 *    it returns (static, thread-local or owned elsewhere); the runtime
 *    copies it at once into the caller's return storage and never frees it.
 *    A NULL result becomes kPFNull.
 *  - bytes: a PFByteArray returned by value, under the same rule for its
 *    data; {NULL, 0} is empty bytes; NULL data with a nonzero size, or a
 *    size larger than any object can have (PTRDIFF_MAX), is a ValueError.
 *  - tensor and ptr: the pointer is passed on as is; its lifetime is the C
 *    function's business.
 *  - func, array, map, shape, object, list, dict, obj<KEY>: the C
 *    function transfers a reference to the caller (as every packedfunc
 *    entry point that returns a handle does); the runtime hands that
 *    reference to the PFFuncCall caller, who releases it. A result that is not a live object of the type (an array
 *    result that is a Map, a func result that is not a function) fails the
 *    call with a TypeError naming "result"; when it is a live object of
 *    another type, the reference that came with it is released.
 *
 * An argument of type array, map, shape, list or dict must be a
 * kPFObjectHandle of that object type; another object type is a TypeError
 * naming the argument and both types ("argument 0: expected array, got map object").
 * The handle is borrowed for the call, as every argument is.
 *
 * obj<KEY> names an object type that a library registered (object_type.h),
 * by its key: "int64(obj<mylib.Counter>,int64)". Blanks may appear around
 * "<", the key and ">"; the canonical text has none. KEY must be registered
 * when the signature is parsed (a ValueError at KEY's position otherwise:
 * `unknown object type 'mylib.Counter' (not registered)`). An argument or
 * a result must be an instance of KEY or of a type that descends from it;
 * another object is a TypeError naming both types ("argument 0: expected
 * obj<mylib.Counter>, got mylib.Base object"); a result that is not, or not
 * live, is refused as the other object results are (its reference
 * released). A result transfers a reference, as object's does. Unlike the
 * other names, obj<KEY> is not in PFSignatureTypeInfo's table: it is a
 * family of types, one per registered key, whose values all have type code
 * kPFObjectHandle.
 */

/* The largest number of arguments in a typed signature. */
#define PF_TYPED_MAX_ARGS 16

/* The types of the signature grammar, numbered from 0 in the order of the
 * table above, starting with void: writes the name of type `index` (static
 * storage) and the type code that a C value of that type becomes as a packed
 * value (kPFNull for void; for the pointer-like types, also the code of a
 * non-NULL argument; kPFObjectHandle for array, map, shape, object, list
 * and dict, though an object result that is a function or module takes
 * their codes). Either out may be NULL. Bindings and tools read the
 * grammar from here instead of keeping their own list.
 * Errors: index outside the types (IndexError). Thread-safe. */
PF_EXPORT int PFSignatureTypeInfo(int index, const char** name, int* type_code);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_SIGNATURE_H_ */
