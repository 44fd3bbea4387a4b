/*
 * packedfunc — the typed-signature grammar: how a C prototype is written
 * as text, and the table of its types.
 */
#ifndef PACKEDFUNC_SIGNATURE_H_
#define PACKEDFUNC_SIGNATURE_H_

#include "packedfunc/base.h"
#include "packedfunc/tensor.h"

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
 * Signature grammar (ASCII; blanks — space, tab, newline, carriage return —
 * may appear around every token), in EBNF:
 *
 *     signature := RESULT "(" [ PARAM { "," PARAM } ] ")"
 *     RESULT    := "void" | TYPE
 *     PARAM     := [ NAME ":" ] TYPE [ "=" LITERAL ]
 *     TYPE      := a type name of the table below
 *                | "obj" "<" KEY ">"                   (below)
 *                | "tensor" "<" CONSTRAINT ">"         (tensor.h)
 *                | ( "array" | "list" ) "<" TYPE ">"   (element types, below)
 *                | ( "map" | "dict" ) "<" TYPE "," TYPE ">"
 *                | "optional" "<" TYPE ">"
 *                | "union" "<" TYPE "," TYPE { "," TYPE } ">
 *     NAME      := ( letter | "_" ) { letter | digit | "_" }
 *
 * So "int64(int64,int64)" and "float64(x: float64, lo: float64 = 0,
 * hi: float64 = 1)" are signatures. Parameters are either all named or
 * all unnamed; names are distinct and at most PF_SIGNATURE_NAME_MAX bytes.
 * A parameter with a default ("= LITERAL") may be left out of a keyword
 * call (PFFuncCallKw, function.h): defaults are trailing, as in Python
 * (no parameter without one follows one with one). Named or not, every
 * parameter is positional; names let a caller pass arguments by keyword.
 *
 * Default literals:
 *
 *     LITERAL := INT | FLOAT | "true" | "false" | "null" | STRING | "b" STRING
 *     INT     := [ "+" | "-" ] ( DIGITS | "0x" HEXDIGITS )   fits an int64
 *     FLOAT   := [ "+" | "-" ] ( DIGITS "." [ DIGITS ] [ EXP ] | "." DIGITS [ EXP ]
 *                              | DIGITS EXP | "inf" | "nan" )
 *     EXP     := ( "e" | "E" ) [ "+" | "-" ] DIGITS
 *     STRING  := '"' { CHAR | "\" ESCAPE } '"'
 *     CHAR    := a printable ASCII character (space to '~') but '"' and '\'
 *     ESCAPE  := '"' | "\" | "n" | "t" | "r" | "x" HEXDIGIT HEXDIGIT
 *
 * Blanks may separate "b" from its STRING, as any two tokens (the canonical
 * text has none): `b "\x00"` is `b"\x00"`.
 *
 * A literal is the packed value an argument could be — an INT a kPFInt, a
 * FLOAT a kPFFloat (read in the C locale, whatever the process's is), true
 * and false a kPFBool, null a kPFNull, a STRING a kPFStr of its bytes, a
 * b STRING a kPFBytes — and a default must convert to its parameter's type
 * by the rules of a typed call (below), except that a dtype takes a STRING
 * in the text of dtype.h ("float32") and a device a STRING "NAME" or
 * "NAME:ID" (the names of tensor.h's DEVICE; "cuda:1"). So an int64 takes
 * an INT (or true/false), a float64 an INT or FLOAT, a str a STRING that
 * is valid UTF-8 without a NUL byte, bytes a b STRING (any bytes), and the
 * pointer-like and object types (ptr, tensor, func, array, map, shape,
 * object, list, dict, obj<KEY>) only null, and an any every literal. A default that does not
 * convert, or an integer that no int64 holds, is a ValueError when the
 * signature is parsed, naming its position. The default is kept converted:
 * `lo: float64 = 0` passes the float 0.0.
 *
 * The canonical text, which the runtime keeps and reports: canonical type
 * names, no blanks, "NAME:TYPE=LITERAL" for each parameter with both, the
 * canonical literal of the converted default: an int in decimal; a float
 * as the shortest decimal that reads back to the same value (for a float32
 * parameter, the same float), with ".0" when it would read as an int, or
 * inf, -inf, nan; true or false; null; a STRING with printable ASCII as
 * itself, \" \\ \n \t \r, and every other byte as \xHH (lowercase); a
 * dtype's canonical text, quoted; a device as "NAME:ID". For example
 * "float64(x:float64,lo:float64=0.0,hi:float64=1.0)". A signature without
 * names and defaults has the canonical text it always had:
 * "int64(int64,float64)". The canonical text parses to itself.
 *
 * At most PF_TYPED_MAX_ARGS (16) parameters; "()" means none ("(void)" is
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
 *   any      (none: metadata only)  any value                  any value
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
 * any is a value of any type: a packed function's parameter or result
 * that takes whatever it is given (a Python function's parameter without
 * an annotation). It has no C type, so it is for the metadata of packed
 * functions only (PFFuncSetInfo, PF_REGISTER_PACKED_SIG): a typed
 * function, a C function pointer (PFFuncToCFunction) and an object field
 * refuse it (ValueError naming the parameter). Its default is the
 * literal's own value (an INT a kPFInt, a STRING a kPFStr, ...), and
 * PFSignatureTypeInfo gives it the type code kPFNull, since no one code is
 * its values'.
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
 *
 * Element types, optional and union. array<T>, list<T>, map<K,V> and
 * dict<K,V> say what a container holds: "int64(xs: array<int64>)",
 * "void(m: map<str, float64>)", "dict<str,list<obj<mylib.Node>>>()".
 * optional<T> is T or null; union<T1, T2, ...> is a value of any of its
 * members, tried in order. Element types nest, at most
 * PF_SIGNATURE_DEPTH_MAX levels of "<" deep, and one signature holds at
 * most PF_SIGNATURE_TYPES_MAX types with or inside "<...>" in all
 * (map<str,list<int64>> counts four), which keeps a parsed signature
 * small; past either limit is a ValueError at the position. A key type K is str, int64 or any (the
 * keys of a Map and a Dict are str or int). void is no element type, and
 * a union has at least two members. The canonical text has no blanks:
 * "map<str,float64>".
 *
 * A position's C type is its container's (array<int64> passes a
 * PFObjectHandle of an Array, as array does); optional<T> and union<...>
 * pass as the one pointer type that every member is (optional<str> a
 * const char*, NULL for null; union<array<int64>,list<str>> a
 * PFObjectHandle, as object); when there is none (optional<int64>,
 * union<int64,str>) the type has no C type and is for the metadata of
 * packed functions only, as any is.
 *
 * A typed function checks and converts each
 * argument of such a type before the C function runs, and its result
 * after, by the rules of the scalar types applied to every element:
 *  - an element converts as a typed argument of its type does: an
 *    array<float64> given ints that a double holds exactly passes an
 *    Array of floats; a bool element of an array<int64> passes as an int;
 *  - a List where an array<...> (or array) element type is wanted
 *    becomes an Array, an Array where a list<...> is wanted a List, and a
 *    Dict for a map<...> a Map and back;
 *  - when anything converts, the C function gets a new container, which
 *    the call releases when the C function returns (keep a reference to
 *    keep it); otherwise it gets the caller's container itself;
 *  - a container that the value holds in several places is checked and
 *    converted once per call (and read once, if a List or Dict), and what
 *    it became is shared as it was: the cost is that of the value's
 *    containers, not of the tree they unfold to;
 *  - null is accepted where the container type alone accepts it (a null
 *    array) and, inside a container, only under optional<T>;
 *  - a List or Dict is checked as it is when the call starts (a copy is
 *    read in one step), so another thread's later change is not checked;
 *  - a wrong element is a TypeError (or ValueError, for a value out of
 *    range) naming the argument, the element's index or key, and the type
 *    wanted: "argument 0 'xs', element 3: expected int64, got str"; a
 *    result names "result".
 * A C function pointer over a packed function (PFFuncToCFunction) checks
 * its arguments' and result's C types only: the element types are the
 * packed function's to check.
 * A packed function's metadata (PFFuncSetInfo, PF_REGISTER_PACKED_SIG)
 * may use every type, and PFFuncCall does not check a packed function's
 * arguments against it: for a packed function the types are metadata only,
 * which hosts, tools and stub generators read.
 */

/* The deepest nesting of element types, and the most types with or inside
 * "<...>" one signature holds. */
#define PF_SIGNATURE_DEPTH_MAX 8
#define PF_SIGNATURE_TYPES_MAX 64

/* The largest number of arguments in a typed signature. */
#define PF_TYPED_MAX_ARGS 16

/* The types of the signature grammar, numbered from 0 in the order of the
 * table above, starting with void: writes the name of type `index` (static
 * storage) and the type code that a C value of that type becomes as a packed
 * value (kPFNull for void and any; for the pointer-like types, also the code of a
 * non-NULL argument; kPFObjectHandle for array, map, shape, object, list
 * and dict, though an object result that is a function or module takes
 * their codes). Either out may be NULL. Bindings and tools read the
 * grammar from here instead of keeping their own list.
 * Errors: index outside the types (IndexError). Thread-safe. */
PF_EXPORT int PFSignatureTypeInfo(int index, const char** name, int* type_code);

/* The C types of the named types, in the table's order (void first, before
 * the list; any, which has no C type, last, after it): one row per name,
 *   X(name, C argument type, C result type)
 * which the runtime's conversions and the checked registrations (checked.h)
 * both read, so the table above and the compiler cannot disagree. Each row
 * also names its types: PFSignatureArg_NAME and PFSignatureResult_NAME
 * (PFSignatureResult_void is void); obj<KEY> is a PFObjectHandle and a
 * constrained tensor a DLTensor*, as an argument and as a result. */
#ifdef __cplusplus
#define PF_SIGNATURE_BOOL_ bool
#else
#define PF_SIGNATURE_BOOL_ _Bool
#endif
#define PF_SIGNATURE_C_TYPES(X)                   \
  X(int8, int8_t, int8_t)                         \
  X(int16, int16_t, int16_t)                      \
  X(int32, int32_t, int32_t)                      \
  X(int64, int64_t, int64_t)                      \
  X(uint8, uint8_t, uint8_t)                      \
  X(uint16, uint16_t, uint16_t)                   \
  X(uint32, uint32_t, uint32_t)                   \
  X(uint64, uint64_t, uint64_t)                   \
  X(bool, PF_SIGNATURE_BOOL_, PF_SIGNATURE_BOOL_) \
  X(float32, float, float)                        \
  X(float64, double, double)                      \
  X(str, const char*, const char*)                \
  X(bytes, const PFByteArray*, PFByteArray)       \
  X(ptr, void*, void*)                            \
  X(tensor, DLTensor*, DLTensor*)                 \
  X(dtype, DLDataType, DLDataType)                \
  X(device, DLDevice, DLDevice)                   \
  X(func, PFFunctionHandle, PFFunctionHandle)     \
  X(array, PFObjectHandle, PFObjectHandle)        \
  X(map, PFObjectHandle, PFObjectHandle)          \
  X(shape, PFObjectHandle, PFObjectHandle)        \
  X(object, PFObjectHandle, PFObjectHandle)       \
  X(list, PFObjectHandle, PFObjectHandle)         \
  X(dict, PFObjectHandle, PFObjectHandle)

/* One row of the list as text, "NAME=ARG/RESULT;" with the C types spelt
 * as this header expands them ("bool=_Bool/_Bool;"), and the whole list as
 * one string literal. A checked registration (checked.h) records the whole
 * list beside the function; loading compares it, type by type, with the
 * library's own, so that a plugin built against a header whose table gives
 * a type another C type is refused instead of miscalled. */
#define PF_SIGNATURE_STR2_(x) #x
#define PF_SIGNATURE_STR_(x) PF_SIGNATURE_STR2_(x)
#define PF_SIGNATURE_C_TYPE_TEXT(name, arg, result) \
#name "=" PF_SIGNATURE_STR_(arg) "/" PF_SIGNATURE_STR_(result) ";"
#define PF_SIGNATURE_C_TYPES_TEXT PF_SIGNATURE_C_TYPES(PF_SIGNATURE_C_TYPE_TEXT)

#define PF_SIGNATURE_TYPEDEF_(name, arg, result) \
  typedef arg PFSignatureArg_##name;             \
  typedef result PFSignatureResult_##name;
PF_SIGNATURE_C_TYPES(PF_SIGNATURE_TYPEDEF_)
#undef PF_SIGNATURE_TYPEDEF_
typedef void PFSignatureResult_void;

/* ------------------------------------------------------------------------ */
/* Reading a signature                                                       */
/* ------------------------------------------------------------------------ */

/* The longest parameter name, in bytes. */
#define PF_SIGNATURE_NAME_MAX 255

/* A type of a parsed signature as a tree, for hosts and tools that map it
 * to their own types (stubs' list[int], TypeScript declarations). Owned by
 * the PFSignatureInfo it belongs to; members may be appended in later
 * versions. */
typedef struct PFTypeInfo {
  const char* text;     /* the canonical text: "map<str,list<obj<mylib.Node>>>" */
  const char* name;     /* the type's name: a name of PFSignatureTypeInfo's table
                             ("int64", "array", "tensor"), or "obj", "optional",
                             "union" */
  int32_t type_code;    /* the type code of its values (PFSignatureTypeInfo's;
                             kPFObjectHandle for obj<KEY>; kPFNull for optional and
                             union) */
  uint32_t object_type; /* obj<KEY>: KEY's registered type index; else 0 */
  int32_t num_args;     /* its element types: 1 for array<T>, list<T> and
                             optional<T>; 2 for map<K,V> and dict<K,V> (the key's,
                             then the value's); one per member of a union; 0 for
                             every other type (array without "<...>" included) */
  int32_t reserved;
  const struct PFTypeInfo* const* args; /* num_args entries */
  PFTensorConstraint tensor;            /* a tensor's constraint (flags 0: any tensor, or not
                                a tensor) */
} PFTypeInfo;

/* One parameter (or the result) of a parsed signature. Owned by the
 * PFSignatureInfo it belongs to, and valid as long as that is; members may
 * be appended in later versions: read it through the pointer that
 * PFSignatureInfo gives. */
typedef struct PFParamInfo {
  const char* name;            /* NULL for an unnamed parameter, and the result */
  const char* type;            /* the canonical type: "float64", "obj<mylib.Counter>",
                                "tensor<float64,1,contiguous>", "void" for no result */
  int32_t type_index;          /* the type's index in PFSignatureTypeInfo's table (0 is
                                void; tensor's for a constrained tensor; the
                                container's for array<T> and the others; for optional
                                and union, their C type's (any's when none)); -1
                                for obj<KEY> and an optional<obj<KEY>> */
  int32_t type_code;           /* the type code of its values (PFSignatureTypeInfo's;
                                kPFObjectHandle for obj<KEY>) */
  uint32_t object_type;        /* obj<KEY>: KEY's registered type index; else 0 */
  int32_t has_default;         /* 1 when the parameter has a default, else 0 */
  PFValue default_value;       /* the default, converted to the parameter's type (a
                                kPFStr's text and a kPFBytes's PFByteArray live as
                                long as the PFSignatureInfo); zero without one */
  int32_t default_code;        /* its type code; kPFNull without one */
  const char* default_text;    /* its canonical literal (`0.0`, `"abc"`, `null`); NULL
                                without one */
  PFTensorConstraint tensor;   /* a tensor's constraint (tensor.h); flags 0 for any
                                tensor and for the other types */
  const PFTypeInfo* type_info; /* the type as a tree (element types, optional,
                                  union); for a type without element types, a
                                  tree of one node */
} PFParamInfo;

/* A parsed signature: what its text says, as data, so that hosts and tools
 * (keyword calls, inspect.signature, stubs) read it without a parser of
 * their own. Owned by the runtime; members may be appended in later
 * versions. */
typedef struct PFSignatureInfo {
  const char* text;                 /* the canonical text */
  int32_t num_params;               /* 0 .. PF_TYPED_MAX_ARGS */
  int32_t num_required;             /* the parameters before the first default */
  int32_t named;                    /* 1 when the parameters are named, else 0 */
  const PFParamInfo* result;        /* the result (type "void" for none) */
  const PFParamInfo* const* params; /* num_params entries, in order */
} PFSignatureInfo;

/* Parses a signature text (the grammar above) into a new PFSignatureInfo,
 * for a tool or host that has a text without a function (a method's
 * PFMethodInfo.signature, a remote function's). *out is owned by the
 * caller: free it with PFSignatureInfoFree; it holds no references (an
 * obj<KEY>'s type is registered for good). A function's own signature is
 * read without parsing through PFFuncGetSignatureInfo (function.h).
 * Errors: NULL text or out (TypeError); a text outside the grammar, a
 * default that does not convert, an obj<KEY> of a type not registered
 * (ValueError naming the position: `PFSignatureParse: bad signature "..."
 * at position N: ...`); MemoryError. *out is written only on success.
 * Thread-safe. */
PF_EXPORT int PFSignatureParse(const char* text, PFSignatureInfo** out);

/* Frees what PFSignatureParse made. NULL is a no-op. Not for the borrowed
 * info of a function (PFFuncGetSignatureInfo). Returns nothing: it cannot
 * fail. */
PF_EXPORT void PFSignatureInfoFree(PFSignatureInfo* info);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_SIGNATURE_H_ */
