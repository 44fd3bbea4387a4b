/* pf's JSON: reading a `call` argument that is a container ([...] or {...})
 * into packedfunc objects, and printing results JSON-style.
 *
 * Part of the pf command (tools/pf.c), not of the library. The argument
 * text comes from the command line, so the reader assumes it is hostile:
 * any text gets a value or an error, never a crash, a leak or unbounded
 * recursion. Errors are recorded on the calling thread as packedfunc
 * errors (which pf prints as "pf: Kind: message"), with messages that name
 * the function and the argument. None of this keeps state: every function
 * is safe to call from any thread. */
#ifndef PF_TOOLS_PF_JSON_H_
#define PF_TOOLS_PF_JSON_H_

#include <stdio.h>

#include "packedfunc/c_api.h"

/* How deep containers may nest in an argument; deeper is an error. */
#define PF_CLI_JSON_DEPTH 64

/* Reads `text`, argument `index` of a call of `fname` (both only for
 * messages), as one JSON container and nothing else but blanks: a list
 * becomes an Array, an object a Map (keys are strings, or integers as an
 * extension of JSON), with strings, integers (within int64), floats, true,
 * false, null and containers inside. On success *v is a new reference to
 * the container (*code kPFObjectHandle), which the caller releases with
 * PFObjectFree. Text that does not begin with '[' or '{', or is not valid
 * JSON, is a ValueError that names the offset; out of memory is a
 * MemoryError; a map with a repeated key is PFMapCreate's ValueError.
 * Returns 0, or -1 with the error recorded and nothing to release. */
int pf_json_read(const char* fname, const char* arg, const char* text, PFValue* v, int* code);

/* As pf_json_read, for a shape parameter: `text` must be a JSON list of
 * integers ("[2, 3]"), and *v is a new reference to a Shape. */
int pf_json_read_shape(const char* fname, const char* arg, const char* text, PFValue* v, int* code);

/* Prints `v` (of type `code`, borrowed: nothing is released) as pf shows a
 * result: an int or float in decimal (floats with the fewest digits that
 * read back exactly, as Python's repr), true/false, null, a str as is,
 * bytes as b'...', an Array or Shape as [...] and a Map as {...}, with the
 * strings inside quoted as JSON does; other values as <kind ...>. The
 * items of containers nested deeper than PF_CLI_JSON_DEPTH print as "...",
 * so that any value pf_json_read makes prints whole, and the printed text
 * of such a value reads back as an equal one. No newline follows. */
void pf_json_print(FILE* out, PFValue v, int code);

#endif /* PF_TOOLS_PF_JSON_H_ */
