/*
 * packedfunc — structural equality and hashing of values: containers,
 * tensors and instances of registered types compared by what they hold.
 */
#ifndef PACKEDFUNC_STRUCTURAL_H_
#define PACKEDFUNC_STRUCTURAL_H_

#include "packedfunc/object.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Structural equality and hashing                                          */
/* ------------------------------------------------------------------------ */

/*
 * Two values are structurally equal when they hold the same thing, whether
 * or not they are the same objects. The rules, by type code (a value's type
 * code must match the other's, except that kPFFuncHandle, kPFModuleHandle
 * and kPFObjectHandle are all "an object", compared by its type, and a
 * kPFDLTensorHandle is compared as a tensor object is):
 *
 *  - int, bool: the same number (1 and true are not equal: their codes
 *    differ; nor are 1 and 1.0);
 *  - float: the same number, with 0.0 equal to -0.0, and every NaN equal
 *    to every NaN (a value is structurally equal to itself);
 *  - null: always equal; dtype, device: the same fields; opaque handle: the
 *    same pointer; a code in the extension range: the same 8 bytes;
 *  - str: the same bytes; bytes: the same size and bytes;
 *  - Array, List, Shape: the same kind of container (an Array never equals
 *    a List), the same size, and items equal in order;
 *  - Map, Dict: the same kind, the same size, and for every key of one an
 *    equal key in the other (keys compared as the containers compare them:
 *    numbers by value, str and bytes by contents, objects by identity)
 *    whose values are equal: the order of insertion does not matter;
 *  - tensors: the same dtype and shape, both on the CPU, and the same data
 *    bytes in row-major order (whatever the strides; so float data is
 *    compared as bytes: there, -0.0 and 0.0 differ and NaNs of the same
 *    bits are equal); a tensor on another device is a ValueError;
 *  - instances of registered types: the same type, and every field
 *    (PFObjectTypeGetInfo's fields, inherited ones included) equal;
 *  - any other object (functions, modules, boxed pointers, host objects,
 *    closures): the same object (identity).
 *
 * Cycles. Containers and instances may refer to themselves (a List that
 * holds itself, a node whose field points back to its parent). The
 * comparison walks both graphs together, keeping the path from the roots;
 * reaching an object already on one path is equal only when the other
 * side reaches, at the same moment, the object paired with it on its path.
 * So a graph that refers to itself equals an isomorphic one, and both calls
 * terminate. Sharing that does not form a cycle is not required to match:
 * an Array holding one Shape twice equals one holding two equal Shapes.
 * An object (a pair of objects, when comparing) that is on no cycle is
 * walked once per call, and its result reused on every other path to it,
 * so a graph costs its own size, not that of the tree it unfolds to (40
 * Lists that each hold the next one twice are 40 objects, not 2^40).
 * Objects on a cycle are walked again on each path that enters the cycle
 * elsewhere, since their result depends on where it was entered. Those
 * walks again are bounded: when they take more than
 * PF_STRUCTURAL_MAX_REWALK steps (an object or pair entered, or an item
 * of one) in one call, the call fails with a ValueError, so a graph whose
 * cycles are reached on exponentially many paths (Lists that each hold
 * the next twice, the last holding the first) costs a bounded time. A
 * graph with no cycle never walks anything again.
 *
 * Depth. The walk recurses once per container or instance nested in
 * another: more than PF_STRUCTURAL_MAX_DEPTH levels is a ValueError (never
 * a stack overflow), whatever the value.
 *
 * Hashing. Structurally equal values have equal hashes (PFStructuralHash
 * follows the rules above: 0.0 and -0.0 hash alike, every NaN alike; map
 * entries are combined without regard to order; a reference back to an
 * object on the path hashes as its distance up the path). Str, bytes and
 * tensor data are hashed with XXH3 under a fixed seed, so such hashes are
 * the same in every process of one version of the library; a hash that
 * includes an object compared by identity (a function, an opaque pointer,
 * a map key object) is not. Hashes are not a stable format across
 * versions.
 *
 * Threads. Both entry points are thread-safe. Another thread may change a
 * List or Dict during a call: each one is read as one atomic snapshot
 * (PFListToArray, PFDictToArray), so the result is that of some state each
 * had, never a crash. Fields of instances are read as PFObjectGetField
 * reads them: a field must not be written by another thread during the
 * call (object_type.h, "Threads"); hosts serialize that as they do for
 * their own objects. Neither entry point runs user code while it reads:
 * each holds the snapshots it takes until it has read everything, and
 * only then releases them, which may release the last reference to a
 * value that another thread removed meanwhile (running its finalizer, no
 * lock held).
 *
 * Errors (nothing is written): NULL out (TypeError); a value that fails
 * PFFuncCall's check of an argument (an unknown type code, a NULL string,
 * a handle that is not a live object of its code: TypeError naming
 * "argument 0" or "argument 1"); nesting deeper than
 * PF_STRUCTURAL_MAX_DEPTH, walking objects on a cycle again for more
 * than PF_STRUCTURAL_MAX_REWALK steps, a tensor not on the CPU, a tensor with more
 * than 64 dims, NULL data or a negative dim, a strided tensor of a
 * sub-byte dtype (ValueError); a field that cannot be read
 * (PFObjectGetField's error); MemoryError.
 */

/* The most containers and instances nested in one another that a
 * structural comparison or hash walks through. */
#define PF_STRUCTURAL_MAX_DEPTH 1024

/* The most steps (an object or a pair of objects entered, or one of their
 * items) that a structural comparison or hash may take walking again
 * objects on a cycle that it has already walked (see "Cycles"). */
#define PF_STRUCTURAL_MAX_REWALK 262144

/* Writes 1 to *out when (a, a_code) and (b, b_code) are structurally equal
 * (above), else 0. Both values are borrowed for the call. Thread-safe. */
PF_EXPORT int PFStructuralEqual(PFValue a, int a_code, PFValue b, int b_code, int* out);

/* Writes the structural hash of (value, code) to *out: equal values (above)
 * have equal hashes. The value is borrowed for the call. Thread-safe. */
PF_EXPORT int PFStructuralHash(PFValue value, int code, uint64_t* out);

/* Flags of PFStructuralCompare and PFStructuralHashEx; any other bit is a
 * ValueError. PF_STRUCTURAL_SKIP_TENSOR_CONTENT compares and hashes a
 * tensor by its dtype and shape alone: its data is not read, so a tensor
 * on any device (or with NULL data) is accepted, and its device is not
 * compared. */
#define PF_STRUCTURAL_SKIP_TENSOR_CONTENT 0x1u

/*
 * PFStructuralEqual with options, which also says where the values differ.
 * Writes 1 to *equal when (a, a_code) and (b, b_code) are structurally
 * equal under `flags` (above), else 0. When `mismatch` is not NULL it gets
 * NULL for equal values, else the access path of the first difference the
 * walk met, as text: "$" is the root, "[3]" an item of a sequence or the
 * entry of an int key, "[\"k\"]" the entry of a str key (a '"' or '\\'
 * in it escaped by a '\\'; a key of another kind shows as "[<float>]",
 * "[<bytes>]", "[<object>]"...), ".name" a field of an instance: so
 * "$[\"items\"][2].value". The path ends at the pair that differs: the
 * values themselves, or the containers whose kind, size or keys differ
 * (a key of `a` that `b` lacks ends the path at that key). The path lives
 * in the calling thread's storage as a returned string does (c_api.h,
 * "Returned strings"). Both values are borrowed for the call.
 * Thread-safe, as PFStructuralEqual. Errors (nothing is written): NULL
 * equal (TypeError), an unknown flag (ValueError), and
 * PFStructuralEqual's.
 */
PF_EXPORT int PFStructuralCompare(PFValue a, int a_code, PFValue b, int b_code, uint32_t flags,
                                  int* equal, const char** mismatch);

/* PFStructuralHash under `flags` (above): values equal under the same
 * flags have equal hashes. Errors: PFStructuralHash's, and an unknown flag
 * (ValueError). Thread-safe. */
PF_EXPORT int PFStructuralHashEx(PFValue value, int code, uint32_t flags, uint64_t* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_STRUCTURAL_H_ */
