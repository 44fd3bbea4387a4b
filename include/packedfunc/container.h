/*
 * packedfunc — containers: Array, Map, Shape.
 */
#ifndef PACKEDFUNC_CONTAINER_H_
#define PACKEDFUNC_CONTAINER_H_

#include "packedfunc/object.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Containers: Array, Map, Shape                                             */
/* ------------------------------------------------------------------------ */

/*
 * Three object types hold values, so that lists, dicts and shapes can cross
 * a call as one kPFObjectHandle argument or result:
 *
 *  - an Array (kPFObjectArray) is an ordered sequence of values of any type
 *    code;
 *  - a Map (kPFObjectMap) maps str or int keys to values of any type code
 *    and keeps its entries in the order they were given;
 *  - a Shape (kPFObjectShape) is a sequence of int64 (a tensor's shape or
 *    strides).
 *
 * Each is reference-counted like every object (PFObjectRetain, PFObjectFree,
 * PFObjectGetTypeIndex) and immutable once created: any number of threads
 * may read one container at once without locks, and pass it on.
 *
 * What a container keeps of each value given at creation:
 *  - kPFStr and kPFBytes: a copy, made by the create call (the caller's
 *    string or byte array may go as soon as it returns);
 *  - kPFFuncHandle, kPFModuleHandle, kPFObjectHandle: a reference, taken by
 *    the create call and dropped when the container is destroyed (so
 *    containers nest: an Array of Maps of functions);
 *  - kPFDLTensorHandle: refused (TypeError naming the position). A
 *    DLTensor* is only borrowed for a call, so a container cannot keep it;
 *    store a tensor object (PFTensorCreateFromDLPack) instead;
 *  - every other built-in code, and codes in the extension range: the
 *    PFValue bit for bit (an extension value is never interpreted or
 *    released; keeping what it points to alive is the extension's job).
 * The values are checked as PFFuncCall checks its arguments: an unknown
 * type code, a NULL pointer under a str, bytes or handle code, a handle
 * that is not a live object of the code's type, bytes with NULL data and a
 * nonzero size (TypeError), bytes larger than any object can be
 * (ValueError); the error names the entry point and the position ("value
 * 3", "key 1").
 *
 * The readers return borrowed values: a str points into the container, a
 * bytes value is a PFByteArray* inside it, and a handle is the container's
 * own reference (take one with PFObjectRetain to keep it longer). All of
 * them stay valid exactly as long as the container lives, whatever else
 * the thread calls meanwhile.
 *
 * Releasing the last reference of a container releases the references it
 * holds; a nested container released that way is destroyed by the same
 * release call, after the outer one, not by recursion: releasing an Array
 * nested a million levels deep takes constant stack.
 */

/* Creates an Array of `size` values: values[i] with type code
 * type_codes[i], kept as described above. `values` and `type_codes` may be
 * NULL when size is 0. *out is a new reference (PFObjectFree).
 * Errors: NULL out, NULL values or type_codes with size > 0 (TypeError);
 * size < 0 (ValueError); a size no array can have, or values whose str and
 * bytes together need more memory than any object can have (ValueError);
 * a value that does not pass the checks above, or a kPFDLTensorHandle
 * (TypeError or ValueError naming "value I"); MemoryError. On error nothing
 * is retained or kept, and *out is not written. Thread-safe. */
PF_EXPORT int PFArrayCreate(const PFValue* values, const int* type_codes, int64_t size,
                            PFObjectHandle* out);

/* Writes the number of values of an Array to *out.
 * Errors: array not a live Array, NULL out (TypeError). Thread-safe. */
PF_EXPORT int PFArrayGetSize(PFObjectHandle array, int64_t* out);

/* Reads the value at `index` (0-based) of an Array: *out and
 * *out_type_code. The value is borrowed from the Array (see above): valid
 * as long as the Array lives; a handle is not retained for the caller.
 * Errors: array not a live Array, NULL out or out_type_code (TypeError);
 * index < 0 or >= the size (IndexError naming the index and the size).
 * Thread-safe. */
PF_EXPORT int PFArrayGetItem(PFObjectHandle array, int64_t index, PFValue* out,
                             int* out_type_code);

/* Creates a Map of `size` entries: keys[i] (type code key_codes[i]) maps to
 * values[i] (type code value_codes[i]). Keys are kPFStr or kPFInt; a str
 * key and an int key never equal each other ("1" is not 1), and two str
 * keys are equal when their bytes are. Keys and values are kept as
 * described above; the entries keep the order given here (PFMapGetItemAt).
 * The arrays may be NULL when size is 0. *out is a new reference
 * (PFObjectFree).
 * Keys are hashed with a seed that each process draws at random, so that
 * no caller can pick keys that collide: creating a Map and looking keys up
 * cost the same, on average, whichever keys are given (a Map built from
 * a remote client's arguments included). Iteration order does not depend
 * on the hash.
 * Errors: NULL out, a NULL array with size > 0 (TypeError); size < 0, a
 * size no map can have, or keys and values whose str and bytes together
 * need more memory than any object can have (ValueError); a key of another
 * type code (TypeError naming "key I" and its type); a key equal to an
 * earlier one (ValueError naming both positions and the key); a value that
 * does not pass the checks above (TypeError or ValueError naming "value
 * I"); MemoryError. On error nothing is retained or kept, and *out is not
 * written. Thread-safe. */
PF_EXPORT int PFMapCreate(const PFValue* keys, const int* key_codes, const PFValue* values,
                          const int* value_codes, int64_t size, PFObjectHandle* out);

/* Writes the number of entries of a Map to *out.
 * Errors: map not a live Map, NULL out (TypeError). Thread-safe. */
PF_EXPORT int PFMapGetSize(PFObjectHandle map, int64_t* out);

/* Looks `key` (type code key_code: kPFStr or kPFInt) up in a Map, by
 * hashing. When it is there, writes *found = 1 and its value to *out and
 * *out_type_code, borrowed from the Map (see above); otherwise writes
 * *found = 0, *out_type_code = kPFNull and a zero *out. A miss is not an
 * error. Errors: map not a live Map, NULL out, out_type_code or found, a
 * NULL str key (TypeError); a key_code other than kPFStr or kPFInt
 * (TypeError naming it: no such key can be in a Map). Thread-safe. */
PF_EXPORT int PFMapGetItem(PFObjectHandle map, PFValue key, int key_code, PFValue* out,
                           int* out_type_code, int* found);

/* Reads the entry at `index` (0-based) of a Map, in the order the entries
 * were given at creation: its key (*key, *key_code) and its value (*value,
 * *value_code), all borrowed from the Map (see above). Iterating the
 * indices 0 .. size-1 visits every entry once.
 * Errors: map not a live Map, a NULL output (TypeError); index < 0 or >=
 * the size (IndexError naming the index and the size). Thread-safe. */
PF_EXPORT int PFMapGetItemAt(PFObjectHandle map, int64_t index, PFValue* key, int* key_code,
                             PFValue* value, int* value_code);

/* Creates a Shape: a copy of the `ndim` int64 values at `dims` (any values,
 * negative ones too: strides may be negative). `dims` may be NULL when ndim
 * is 0. *out is a new reference (PFObjectFree).
 * Errors: NULL out, NULL dims with ndim > 0 (TypeError); ndim < 0 or an
 * ndim no shape can have (ValueError); MemoryError. Thread-safe. */
PF_EXPORT int PFShapeCreate(const int64_t* dims, int64_t ndim, PFObjectHandle* out);

/* Reads a Shape: *dims points to its *ndim values, borrowed: valid as long
 * as the Shape lives (never NULL, also for ndim 0).
 * Errors: shape not a live Shape, NULL dims or ndim (TypeError).
 * Thread-safe. */
PF_EXPORT int PFShapeGetData(PFObjectHandle shape, const int64_t** dims, int64_t* ndim);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_CONTAINER_H_ */
