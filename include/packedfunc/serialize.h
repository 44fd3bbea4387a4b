/*
 * packedfunc — object graphs as JSON documents: any value the runtime
 * holds written as text and rebuilt from it, sharing and cycles included.
 */
#ifndef PACKEDFUNC_SERIALIZE_H_
#define PACKEDFUNC_SERIALIZE_H_

#include "packedfunc/object.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* JSON documents                                                           */
/* ------------------------------------------------------------------------ */

/*
 * PFToJSON writes a value as a JSON document and PFFromJSON rebuilds the
 * value from one. The format (docs/serialization.md has it whole) is one
 * top-level object {"format": "packedfunc", "version": 1, "root": VALUE,
 * "nodes": [NODE, ...]}: every container, tensor and instance of a
 * registered type is a node, written once however often it is reached,
 * and a VALUE refers to it as {"ref": INDEX}; so a value that holds one
 * Shape twice comes back holding one Shape twice, and a List that holds
 * itself comes back holding itself.
 *
 * What is written, by type code:
 *  - null, bool, str (valid UTF-8) as JSON's null, true/false, string; an
 *    int as a JSON integer when |x| <= 2^53 (which every JSON reader reads
 *    exactly), else {"int": "DECIMAL"}; a float as a JSON number, except
 *    NaN and the infinities ({"float": "nan" | "inf" | "-inf"}); a str that
 *    is not valid UTF-8 as {"str64": BASE64}, bytes as {"bytes": BASE64};
 *    a dtype as {"dtype": TEXT} (PFDataTypeToString), a device as
 *    {"device": [TYPE, ID]};
 *  - Array, List, Map, Dict, Shape: their items, entries or dims in order;
 *  - a tensor (a tensor object or a kPFDLTensorHandle) on the CPU: its
 *    dtype, shape and data (row-major, base64); it comes back as a new,
 *    compact, writable tensor object on the CPU;
 *  - an instance of a registered type: its type key and every field
 *    (PFObjectTypeGetInfo's fields: inherited and read-only ones too). It
 *    comes back as an instance of the type registered under that key,
 *    allocated as PFObjectAlloc does (its __init__ does NOT run) with
 *    every field written from the document (read-only ones too, converted
 *    as PFObjectSetField converts; a read-only accessor field's value is
 *    converted so and not stored: its getter computes it, and it has no
 *    bytes in the struct to write). An instance's state is its fields:
 *    what its C struct holds outside them (zeroed at allocation) is not
 *    written, so a type that keeps state there must not be serialized.
 *
 * Not written (TypeError naming the path from the root, e.g.
 * "root[2].parent"): functions, modules, boxed pointers, host objects,
 * closures, any other object, opaque handles and codes of the extension
 * range. A tensor on another device is a ValueError.
 *
 * Cycles. A List, a Dict and an instance are created empty first and then
 * filled, so they may hold themselves, directly or through any nodes. An
 * Array, Map, Shape or tensor is built from nodes built before it: such
 * nodes refer to each other only without a cycle (as they must in any
 * graph the runtime builds, since they cannot change once made); a
 * document where they do is a ValueError.
 *
 * Bounds. A document longer than PF_JSON_MAX_SIZE bytes or with more than
 * PF_JSON_MAX_CONTAINERS JSON objects and arrays is refused before it is
 * parsed, one with more than PF_JSON_MAX_NODES nodes before any value is
 * built, and both directions refuse values nested deeper than
 * PF_JSON_MAX_DEPTH containers and instances (ValueError); so what a
 * hostile document costs is bounded. The parser is the library's own,
 * strict (RFC 8259: UTF-8, \u escapes with surrogate pairs, ints exact in
 * int64, other numbers the nearest float64) and iterative: it bounds
 * nesting (2048 arrays and objects), refuses an object with a key twice
 * (sorting large objects' keys, so no hash can be flooded), and takes
 * at most 9 bytes of memory per byte of text, in two allocations.
 *
 * Threads. Both entry points are thread-safe. A List or Dict that another
 * thread changes meanwhile is read as one atomic snapshot, as
 * PFStructuralEqual reads it; an instance's fields are read as
 * PFObjectGetField reads them (hosts serialize writers). No user code
 * runs while PFToJSON reads: it holds the snapshots it takes until it has
 * read everything, and only then releases them, which may release the
 * last reference to a value that another thread removed meanwhile
 * (running its finalizer, no lock held, before *out is written).
 * PFFromJSON runs none, except that dropping a half-built value may
 * release the last reference to a value (its finalizer, no lock held).
 */

/* The version of the format that PFToJSON writes and PFFromJSON reads. */
#define PF_JSON_FORMAT_VERSION 1
/* The most containers and instances nested in one another (both ways). */
#define PF_JSON_MAX_DEPTH 1024
/* The most nodes (containers, tensors, instances) of one document. */
#define PF_JSON_MAX_NODES ((int64_t)1 << 20)
/* The longest document PFFromJSON reads, in bytes (64 MiB). */
#define PF_JSON_MAX_SIZE ((size_t)1 << 26)
/* The most JSON objects and arrays in one document, counted before it is
 * parsed (every '{' and '[' byte counts, also inside a string). */
#define PF_JSON_MAX_CONTAINERS ((int64_t)1 << 22)

/*
 * Writes the JSON document of (value, code) (above). The value is borrowed
 * for the call. *out lives in the calling thread's storage as a returned
 * string does (c_api.h, "Returned strings"): valid until the next call on
 * this thread that returns a string; it is NUL-terminated and *out_len
 * (which may be NULL) gets its length without the NUL.
 * Errors (nothing is written): NULL out (TypeError); a value that fails
 * PFFuncCall's check of an argument (TypeError naming "argument 0"); a
 * value that cannot be written (TypeError naming the path and its type);
 * a tensor not on the CPU, with NULL data, a negative dim or more than 64
 * dims (ValueError); a dtype of 0 lanes (ValueError); nesting deeper than
 * PF_JSON_MAX_DEPTH, more than PF_JSON_MAX_NODES nodes (ValueError); a
 * field that cannot be read (PFObjectGetField's error); MemoryError.
 * Thread-safe.
 */
PF_EXPORT int PFToJSON(PFValue value, int code, const char** out, size_t* out_len);

/*
 * Rebuilds the value that the JSON document text[0 .. len) describes
 * (above) and writes it to *out and *out_code as PFFuncCall returns a
 * result: a handle is a new reference that the caller releases
 * (PFObjectFree); a str or bytes value lives in the calling thread's
 * return storage (c_api.h, "Returned strings"). text need not be
 * NUL-terminated and may lie in that storage (a string PFToJSON gave).
 * Errors (nothing is written; whatever was built is released):
 * NULL text with len > 0, NULL out or out_code (TypeError); len above
 * PF_JSON_MAX_SIZE, more than PF_JSON_MAX_CONTAINERS '{' and '[' bytes
 * (ValueError); text that is not JSON, an object with a key twice, an
 * int outside int64, a number outside float64's range, a \u escape that
 * is a lone surrogate or \u0000, more than 2048 arrays and objects
 * nested (ValueError "not JSON: line L, column C (byte B): REASON", the
 * place being the end of the token that failed); a document that is
 * not of this format: a top-level value that is not an object, a missing
 * or unknown member, a "format" other than "packedfunc", a "version"
 * other than PF_JSON_FORMAT_VERSION, more than PF_JSON_MAX_NODES nodes, a
 * node or value of the wrong shape (a member missing or of the wrong JSON
 * type, an unknown "type", an "int" that is not a decimal int64, bad
 * base64, a tensor whose data is not as long as its dtype and shape say),
 * a {"ref": N} outside the node table, an Array, Map, Shape or tensor that
 * holds itself (directly or through others of those), nesting deeper
 * than PF_JSON_MAX_DEPTH (ValueError naming the node and the member); an
 * instance of a type key that no registered type has (ValueError naming
 * the key: the document is fine, this process lacks the type), an
 * instance node missing a field of its type or naming one it lacks
 * (ValueError naming the type and the field); a field value of the wrong
 * type (PFObjectSetField's TypeError or ValueError); a dormant type
 * (RuntimeError); MemoryError. Thread-safe.
 */
PF_EXPORT int PFFromJSON(const char* text, size_t len, PFValue* out, int* out_code);

/* PFFromJSONEx's flags. */
enum {
  /* Refuse a document whose nodes refer to each other in a cycle (a List
   * that holds itself, an instance whose field leads back to it), before
   * anything is built. The runtime never frees a cycle by itself
   * (container.h): a reader that takes documents from a peer it does not
   * trust (remote calls do) sets this flag, so that a document cannot make
   * it keep memory that nothing would ever free. Sharing without a cycle
   * is still kept. */
  kPFJSONRefuseCycles = 1u << 0
};

/*
 * PFFromJSON with flags (kPFJSONRefuseCycles, or 0 for PFFromJSON's
 * behaviour). Errors: PFFromJSON's, named PFFromJSONEx; an unknown flag
 * bit (ValueError); with kPFJSONRefuseCycles, a node on a cycle, or
 * reached only through one (ValueError naming the node: "PFFromJSONEx:
 * node 0: on a cycle, which kPFJSONRefuseCycles refuses ..."). The check
 * is linear in the nodes and references. Thread-safe.
 */
PF_EXPORT int PFFromJSONEx(const char* text, size_t len, uint32_t flags, PFValue* out,
                           int* out_code);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_SERIALIZE_H_ */
