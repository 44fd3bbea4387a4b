/*
 * packedfunc — containers: Array, Map, Shape (immutable), List and Dict
 * (mutable).
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
PF_EXPORT int PFArrayGetItem(PFObjectHandle array, int64_t index, PFValue* out, int* out_type_code);

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

/* Reads `count` values of an Array, from index `start` on, into
 * values[0 .. count) and codes[0 .. count): what `count` calls of
 * PFArrayGetItem would read, in one call. The values are borrowed from the
 * Array as PFArrayGetItem's are. values and codes may be NULL when count is
 * 0. Errors: array not a live Array, NULL values or codes with count > 0
 * (TypeError); count < 0 (ValueError); start < 0, or start + count past the
 * size (IndexError naming start, count and the size). Nothing is written
 * on error. Thread-safe. */
PF_EXPORT int PFArrayGetItems(PFObjectHandle array, int64_t start, int64_t count, PFValue* values,
                              int* codes);

/* Reads `count` entries of a Map, from position `start` on, in the order
 * PFMapGetItemAt gives them: entry start + i goes to keys[i], key_codes[i],
 * values[i] and value_codes[i], borrowed from the Map. Either half may be
 * left out: keys and key_codes both NULL read only the values, values and
 * value_codes both NULL only the keys. Errors: map not a live Map; one of
 * a pair NULL and the other not, or both pairs NULL, with count > 0
 * (TypeError); count < 0 (ValueError); start < 0, or start + count past
 * the size (IndexError naming start, count and the size). Nothing is
 * written on error. Thread-safe. */
PF_EXPORT int PFMapGetItems(PFObjectHandle map, int64_t start, int64_t count, PFValue* keys,
                            int* key_codes, PFValue* values, int* value_codes);

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

/* ------------------------------------------------------------------------ */
/* Mutable containers: List, Dict                                            */
/* ------------------------------------------------------------------------ */

/*
 * A List (kPFObjectList) is a sequence of values that grows and shrinks; a
 * Dict (kPFObjectDict) maps keys to values and keeps its entries in the
 * order their keys were first inserted. Both are reference-counted objects
 * like the others and cross calls as kPFObjectHandle. They keep values as
 * an Array does (see above): copies of str and bytes, references to
 * handles, kPFDLTensorHandle refused, every value checked as PFFuncCall
 * checks an argument, with errors naming the entry point and the position
 * ("value 2", "key 0").
 *
 * Threads. Any number of threads may call the entry points below on one
 * List or Dict at once. Each call is atomic: it sees the container, and
 * leaves it, as it was before or after each other thread's call, never
 * half-way through one; a call that changes many items (PFListExtend,
 * PFListReplace, PFListClear, PFDictUpdate, PFDictClear) is one change, and
 * a call that fails changes nothing. Each container has a lock of its own,
 * held for that work only and never while user code runs: the references
 * that a call drops (values replaced or removed, the old contents of a
 * cleared container) are released after the lock, so a finalizer that
 * they run may use the container again. The runtime's allocator
 * (PFSetAllocator) may be called with the lock held. A List or Dict that
 * another thread holds locked when the process forks stays locked in the
 * child: a forked child must not use the containers that other threads were
 * changing.
 *
 * What a reader returns. Another thread may replace or remove a value just
 * after a reader returns it, so the readers never lend the container's own
 * memory, as the immutable containers' readers do:
 *  - a function, module or object handle is a new reference, which the
 *    caller releases (PFObjectFree);
 *  - a str or bytes value is copied into storage of the calling thread,
 *    valid until the next call on that thread of one of PFListGetItem,
 *    PFListPop, PFDictGetItem and PFDictPop (not affected by any other
 *    call, PFFuncCall's own return storage included);
 *  - any other value is returned as it is (bit for bit for an extension
 *    code, as PFArrayGetItem does).
 * To read many values at once, take a snapshot: PFListToArray and
 * PFDictToArray copy the contents, in one atomic step, into a new Array,
 * whose values are then borrowed from it (PFArrayGetItems) for as long as
 * it lives. Converting nested containers (a List of Lists of str) that way
 * is safe at any depth, where the readers' per-thread storage would be
 * overwritten by the next container's reads.
 *
 * Indices. A single index (PFListGetItem, PFListSetItem, PFListPop) may be
 * negative and then counts from the end, as in Python: -1 is the last
 * item; an index outside [-size, size) is an IndexError naming the index
 * and the size at the time of the call (for PFListInsert, outside
 * [-size, size]). A range (PFListReplace, PFListToArray) is clipped to the
 * size, as Python's slices are, so that it is valid whatever other threads
 * did to the size meanwhile.
 *
 * Dict keys. A key may have any built-in type code that a Dict keeps as a
 * value (so not kPFDLTensorHandle, and no extension code: the runtime
 * cannot tell when two extension values are equal). Two keys are equal:
 *  - int, bool and float: when their numbers are equal, as in Python: 1,
 *    true and 1.0 are one key; 0.0 and -0.0 too. A NaN key is refused
 *    (ValueError): no lookup could ever find it;
 *  - str: when their bytes are equal; bytes likewise (a str never equals
 *    a bytes value);
 *  - null: every null is the same key;
 *  - dtype, device, opaque handle: when the values are equal;
 *  - function, module and object handles: when they are the same object
 *    (identity), whichever of the three codes carries it; the Dict keeps a
 *    reference to a key object.
 * A key that equals one already in the Dict keeps the first key's type
 * code and value and replaces only the value (d[1] = a, then d[true] = b
 * leaves key 1 with value b). Keys are hashed with the per-process random
 * seed that Map uses, so no caller can pick keys that collide.
 *
 * Cycles. References are counted: a List or Dict that holds itself,
 * directly or through other containers, is never freed, until PFListClear
 * or PFDictClear (or a removal) breaks the cycle. Releasing the last
 * reference to a deeply nested List or Dict takes constant stack, as for
 * Array.
 */

/* Creates a List of `size` values, kept as described above. values and
 * codes may be NULL when size is 0. *out is a new reference (PFObjectFree).
 * Errors: NULL out, NULL values or codes with size > 0 (TypeError);
 * size < 0, or a size no list can have (ValueError); a value that fails
 * the checks (TypeError or ValueError naming "value I"); MemoryError. On
 * error nothing is retained or kept. Thread-safe. */
PF_EXPORT int PFListCreate(const PFValue* values, const int* codes, int64_t size,
                           PFObjectHandle* out);

/* Writes the number of items of a List to *out.
 * Errors: list not a live List, NULL out (TypeError). Thread-safe. */
PF_EXPORT int PFListGetSize(PFObjectHandle list, int64_t* out);

/* Reads the item at `index` (negative: from the end) into *out and
 * *out_code: a new reference for a handle, a per-thread copy for str and
 * bytes (see above). Errors: list not a live List, NULL out or out_code
 * (TypeError); index outside [-size, size) (IndexError); MemoryError
 * (copying a str or bytes). Thread-safe. */
PF_EXPORT int PFListGetItem(PFObjectHandle list, int64_t index, PFValue* out, int* out_code);

/* Replaces the item at `index` (negative: from the end) with `value`
 * (type code `code`), kept as described above; the old item is released
 * after the call's lock. Errors: list not a live List (TypeError); a value
 * that fails the checks (TypeError or ValueError naming "value 0"); index
 * outside [-size, size) (IndexError); MemoryError. Thread-safe. */
PF_EXPORT int PFListSetItem(PFObjectHandle list, int64_t index, PFValue value, int code);

/* Appends one value at the end. Errors: list not a live List (TypeError);
 * a value that fails the checks (naming "value 0"); a List that would
 * pass the largest size (ValueError); MemoryError. Thread-safe. */
PF_EXPORT int PFListAppend(PFObjectHandle list, PFValue value, int code);

/* Inserts one value before the item at `index`: 0 inserts at the front,
 * the size at the end, a negative index counts from the end (-1 inserts
 * before the last item). Errors: as PFListAppend; index outside
 * [-size, size] (IndexError: for Python's clipping list.insert, use
 * PFListReplace with count 0). Thread-safe. */
PF_EXPORT int PFListInsert(PFObjectHandle list, int64_t index, PFValue value, int code);

/* Appends `count` values at the end, as one change. values and codes may
 * be NULL when count is 0. Errors: list not a live List, NULL values or
 * codes with count > 0 (TypeError); count < 0 (ValueError); a value that
 * fails the checks (naming "value I": then nothing is appended); a List
 * that would pass the largest size (ValueError); MemoryError.
 * Thread-safe. */
PF_EXPORT int PFListExtend(PFObjectHandle list, const PFValue* values, const int* codes,
                           int64_t count);

/* Replaces the items [start, start + count) with the `num_values` values
 * given, as one change: Python's `list[start:start+count] = values`, also
 * an insertion (count 0) and a deletion (num_values 0). The range is
 * clipped to the size: a start past the end appends. The items removed are
 * released after the call's lock. values and codes may be NULL when
 * num_values is 0. Errors: list not a live List, NULL values or codes
 * with num_values > 0 (TypeError); start, count or num_values negative
 * (ValueError); a value that fails the checks (naming "value I": then
 * nothing changes); a List that would pass the largest size (ValueError);
 * MemoryError. Thread-safe. */
PF_EXPORT int PFListReplace(PFObjectHandle list, int64_t start, int64_t count,
                            const PFValue* values, const int* codes, int64_t num_values);

/* Removes the item at `index` (negative: from the end; -1 is the last)
 * and returns it in *out and *out_code: a handle's reference passes to the
 * caller, a str or bytes is a per-thread copy (see above). Errors: list
 * not a live List, NULL out or out_code (TypeError); index outside
 * [-size, size), so also any index of an empty List (IndexError);
 * MemoryError (copying a str or bytes: the item then stays). Thread-safe. */
PF_EXPORT int PFListPop(PFObjectHandle list, int64_t index, PFValue* out, int* out_code);

/* Removes every item; they are released after the call's lock.
 * Errors: list not a live List (TypeError). Thread-safe. */
PF_EXPORT int PFListClear(PFObjectHandle list);

/* A snapshot: a new Array (new reference, PFObjectFree) of the items
 * [start, start + count) as they are at one moment, clipped to the size
 * (start past the end: an empty Array; count may be INT64_MAX for "to the
 * end"). Its values are the Array's own (see Array above), read with
 * PFArrayGetItems. Errors: list not a live List, NULL out (TypeError);
 * start or count negative (ValueError); MemoryError. Thread-safe. */
PF_EXPORT int PFListToArray(PFObjectHandle list, int64_t start, int64_t count, PFObjectHandle* out);

/* Creates a Dict of `size` entries: keys[i] (type code key_codes[i]) maps
 * to values[i] (type code value_codes[i]), in that order. A key equal to an
 * earlier one is an error, as in PFMapCreate (PFDictUpdate lets a later
 * one win). The arrays may be NULL when size is 0. *out is a new
 * reference (PFObjectFree). Errors: NULL out, a NULL array with size > 0
 * (TypeError); size < 0, or a size no dict can have (ValueError); a key of
 * a type code no key can have (TypeError naming "key I"), a NaN key
 * (ValueError); a key equal to an earlier one (ValueError naming both
 * positions); a value that fails the checks (naming "value I");
 * MemoryError. On error nothing is retained or kept. Thread-safe. */
PF_EXPORT int PFDictCreate(const PFValue* keys, const int* key_codes, const PFValue* values,
                           const int* value_codes, int64_t size, PFObjectHandle* out);

/* Writes the number of entries of a Dict to *out.
 * Errors: dict not a live Dict, NULL out (TypeError). Thread-safe. */
PF_EXPORT int PFDictGetSize(PFObjectHandle dict, int64_t* out);

/* Looks `key` up. When it is there, writes *found = 1 and its value to
 * *out and *out_code (a new reference for a handle, a per-thread copy for
 * str and bytes: see above); otherwise *found = 0, *out_code = kPFNull and
 * a zero *out. out and out_code may both be NULL to test membership only.
 * A miss is not an error, nor is a NaN key (never found). Errors: dict not
 * a live Dict, NULL found, only one of out and out_code NULL, a key that no
 * Dict key can be (a type code outside the keys', a NULL str, a handle that
 * is not live) (TypeError); MemoryError. Thread-safe. */
PF_EXPORT int PFDictGetItem(PFObjectHandle dict, PFValue key, int key_code, PFValue* out,
                            int* out_code, int* found);

/* Maps `key` to `value`: replaces the value of an equal key (which keeps
 * its place in the order and its own key), or appends a new entry. The
 * value replaced is released after the call's lock. Errors: dict not a live
 * Dict (TypeError); a bad key (TypeError naming "key 0"; a NaN key:
 * ValueError); a value that fails the checks (naming "value 0"); a Dict
 * that would pass the largest size (ValueError); MemoryError.
 * Thread-safe. */
PF_EXPORT int PFDictSetItem(PFObjectHandle dict, PFValue key, int key_code, PFValue value,
                            int value_code);

/* PFDictSetItem for `count` entries, in order, as one change (a key that
 * repeats within them ends with the last value given): Python's
 * dict.update. The arrays may be NULL when count is 0. Errors: as
 * PFDictSetItem, naming "key I" and "value I", with NULL arrays and
 * count > 0 (TypeError) and count < 0 (ValueError); on any error nothing
 * changes. Thread-safe. */
PF_EXPORT int PFDictUpdate(PFObjectHandle dict, const PFValue* keys, const int* key_codes,
                           const PFValue* values, const int* value_codes, int64_t count);

/* Removes `key` and returns its value in *out and *out_code: a handle's
 * reference passes to the caller, a str or bytes is a per-thread copy (see
 * above); the key is released after the call's lock. Errors: dict not a
 * live Dict, NULL out or out_code, a bad key (TypeError); a key that is not
 * there (KeyError naming it); MemoryError (copying a str or bytes: the
 * entry then stays). Thread-safe. */
PF_EXPORT int PFDictPop(PFObjectHandle dict, PFValue key, int key_code, PFValue* out,
                        int* out_code);

/* Removes every entry; they are released after the call's lock.
 * Errors: dict not a live Dict (TypeError). Thread-safe. */
PF_EXPORT int PFDictClear(PFObjectHandle dict);

/* A snapshot: a new Array (new reference, PFObjectFree) of 2 * size values,
 * each entry's key then its value, in the Dict's order, as they are at one
 * moment: key i is item 2i, its value item 2i + 1 (read them with
 * PFArrayGetItems). Errors: dict not a live Dict, NULL out (TypeError);
 * MemoryError. Thread-safe. */
PF_EXPORT int PFDictToArray(PFObjectHandle dict, PFObjectHandle* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_CONTAINER_H_ */
