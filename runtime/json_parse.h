/* Private to the runtime: a strict JSON parser (RFC 8259) into a flat
 * tape of tokens, for PFFromJSON (serialize.c). No tree: one array of
 * tokens and one block of decoded strings, so a document costs two
 * allocations and memory linear in its length. */
#ifndef PACKEDFUNC_RUNTIME_JSON_PARSE_H_
#define PACKEDFUNC_RUNTIME_JSON_PARSE_H_

#include "internal.h"

typedef enum {
  pf_json_null,
  pf_json_false,
  pf_json_true,
  pf_json_int,  /* an integer without fraction or exponent: exact int64 */
  pf_json_real, /* any other number: the nearest float64 */
  pf_json_str,
  pf_json_array,
  pf_json_object
} pf_json_type;

/* One value. An array's items follow its token; an object's members
 * follow it as a str token (the key) and the value's tokens. `skip` is
 * the number of tokens the whole value takes, so the next sibling is at
 * tok + tok->skip. */
typedef struct {
  uint32_t type : 4; /* pf_json_type */
  uint32_t n : 28;   /* items or members; a str's length in bytes */
  uint32_t skip;     /* tokens in this value, this one included */
  union {
    int64_t i;
    double d;
    const char* s; /* NUL-terminated valid UTF-8 without NUL bytes */
  } v;
} pf_json_tok;

typedef struct {
  pf_json_tok* tok; /* tok[0] is the top-level value */
  char* strings;    /* where every str token points */
} pf_json_doc;

/* The longest run of arrays and objects nested in one another. */
#define PF_JSON_PARSE_MAX_DEPTH 2048

/* Parses text[0 .. len) (len below 2^28, which PF_JSON_MAX_SIZE keeps it
 * under) into *doc, which pf_json_free releases. Refuses, with a
 * ValueError "WHERE: not JSON: line L, column C (byte B): REASON" (B the
 * bytes up to the end of the token that failed, C the 1-based column of
 * its last byte; a token is a run of letters or one byte, and at the end
 * of the text the place is the end): anything RFC 8259 refuses,
 * text that is not UTF-8, a \u escape that is not a code point (a lone
 * surrogate) or is \u0000, an integer outside int64, a number outside
 * float64's range, nesting deeper than PF_JSON_PARSE_MAX_DEPTH and an
 * object with a key twice. MemoryError. What it allocates is at most
 * 9 bytes per byte of text. */
PF_HIDDEN int pf_json_parse(const char* where, const char* text, size_t len, pf_json_doc* doc);
PF_HIDDEN void pf_json_free(pf_json_doc* doc);

/* Byte classes (a bit each, by byte value): a blank between JSON tokens,
 * and a byte that a JSON string holds as it is (printable ASCII but '"'
 * and '\\'), which both the parser and PFToJSON's writer scan for. */
enum { PF_JSON_BLANK = 1, PF_JSON_PLAIN = 2 };
PF_HIDDEN extern const unsigned char pf_json_byte_class[256];

/* The length of the UTF-8 sequence at p (p[0] >= 0x80) of at most `avail`
 * bytes, or 0 when it is not one: overlong forms, surrogates and code
 * points past U+10FFFF are refused. */
PF_HIDDEN size_t pf_utf8_len(const unsigned char* p, size_t avail);

#endif /* PACKEDFUNC_RUNTIME_JSON_PARSE_H_ */
