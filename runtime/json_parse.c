/* A strict JSON parser into a tape of tokens (json_parse.h). Iterative:
 * the nesting lives in an array, never on the C stack. Our own rather than
 * yajl 2.1 (Debian's libyajl-dev): yajl decodes a lone surrogate escape
 * to '?', a high one before any \u to a wrong code point and \u0000 to a
 * NUL byte, all without an error, so it accepts text RFC 8259 refuses and
 * changes the str; and its events alone cost more than this whole parse. */
#include "json_parse.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "signature.h" /* pf_c_locale_enter */

typedef struct {
  const char* where;
  const unsigned char* s;
  size_t len, pos;
  pf_json_tok* tok;
  size_t ntok, cap, max; /* max: what no text of len bytes exceeds */
  char* str;             /* the next free byte of the strings block */
  int depth;
  uint32_t open[PF_JSON_PARSE_MAX_DEPTH]; /* the token of each open container */
} parser;

size_t pf_utf8_len(const unsigned char* p, size_t avail) {
  if (p[0] < 0xC2 || p[0] > 0xF4) return 0;
  size_t n = p[0] < 0xE0 ? 2 : p[0] < 0xF0 ? 3 : 4;
  if (n > avail) return 0;
  uint32_t cp = p[0] & (0x7Fu >> n);
  for (size_t i = 1; i < n; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (p[i] & 0x3Fu);
  }
  if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10FFFF ||
      (cp >= 0xD800 && cp <= 0xDFFF))
    return 0;
  return n;
}

__attribute__((format(printf, 3, 4))) static int fail_at(const parser* p, size_t at,
                                                         const char* fmt, ...) {
  char why[160];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  /* The place is the end of the token that failed: a run of letters (a
   * misspelt literal) or one byte; at the end of the text, the end. */
  size_t end = at < p->len ? at + 1 : p->len;
  if (at < p->len && isalpha(p->s[at]))
    while (end < p->len && isalnum(p->s[end])) ++end;
  size_t line = 1, start = 0;
  for (size_t i = 0; i + 1 < end; ++i)
    if (p->s[i] == '\n') ++line, start = i + 1;
  return PF_ERROR(kPFErrValueError, "%s: not JSON: line %zu, column %zu (byte %zu): %s", p->where,
                  line, end - start, end, why);
}

/* A lookup each, not a chain of compares, in the loops that read most of
 * the text. */
const unsigned char pf_json_byte_class[256] = {
    /* 0x00 to 0x7F, 16 a row; 0x80 and above are neither */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    3, 2, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 0, 2, 2, 2,
    2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
};

/* Skips blanks: the byte at the next token, or -1 at the end. */
static int next_byte(parser* p) {
  while (p->pos < p->len && (pf_json_byte_class[p->s[p->pos]] & PF_JSON_BLANK)) ++p->pos;
  return p->pos < p->len ? p->s[p->pos] : -1;
}

/* Grows the tape for emit; -1 when out of memory. */
static int grow_tape(parser* p) {
  size_t cap = p->cap * 2 < p->max ? p->cap * 2 : p->max;
  pf_json_tok* t = cap > p->cap ? pf_realloc(p->tok, cap * sizeof(*t)) : NULL;
  if (!t) return -1;
  p->tok = t;
  p->cap = cap;
  return 0;
}

/* A new token at the end of the tape; NULL when out of memory. Inline:
 * every token passes here. */
static inline pf_json_tok* emit(parser* p, pf_json_type type) {
  if (p->ntok == p->cap && grow_tape(p) != 0) return NULL;
  pf_json_tok* t = &p->tok[p->ntok++];
  t->type = type;
  t->n = 0;
  t->skip = 1;
  return t;
}

static int literal(parser* p, const char* word, pf_json_type type) {
  size_t n = strlen(word);
  if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
    return fail_at(p, p->pos, "not a value (true, false, null, a number, a string, [ or {)");
  if (!emit(p, type)) return pf_oom(p->where);
  p->pos += n;
  return 0;
}

/* The four hex digits at s[i], or -1. */
static long hex4(const parser* p, size_t i) {
  if (p->len - i < 4) return -1;
  long x = 0;
  for (size_t k = i; k < i + 4; ++k) {
    int c = p->s[k];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return -1;
    x = x << 4 | d;
  }
  return x;
}

static char* put_utf8(char* o, uint32_t cp) {
  if (cp < 0x80) {
    *o++ = (char)cp;
  } else if (cp < 0x800) {
    *o++ = (char)(0xC0 | cp >> 6);
    *o++ = (char)(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *o++ = (char)(0xE0 | cp >> 12);
    *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *o++ = (char)(0x80 | (cp & 0x3F));
  } else {
    *o++ = (char)(0xF0 | cp >> 18);
    *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
    *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
    *o++ = (char)(0x80 | (cp & 0x3F));
  }
  return o;
}

/* The escape at s[*i] (its backslash), decoded to *o; advances both. A
 * decoded escape is never longer than its text, so the strings block (as
 * long as the text) always has room. */
static int escape(parser* p, size_t* i, char** o) {
  size_t at = *i;
  int c = at + 1 < p->len ? p->s[at + 1] : -1;
  static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
  const char* e = c > 0 ? strchr(from, c) : NULL;
  if (e) {
    *(*o)++ = to[e - from];
    *i = at + 2;
    return 0;
  }
  if (c != 'u') return fail_at(p, at, "an unknown escape in a string");
  long cp = hex4(p, at + 2);
  size_t end = at + 6;
  if (cp < 0) return fail_at(p, at, "\\u needs four hex digits");
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    long lo = end + 1 < p->len && p->s[end] == '\\' && p->s[end + 1] == 'u' ? hex4(p, end + 2) : -1;
    if (lo < 0xDC00 || lo > 0xDFFF)
      return fail_at(p, at, "\\u%04lX, a high surrogate not followed by a low one", cp);
    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    end += 6;
  } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
    return fail_at(p, at, "\\u%04lX, a low surrogate without a high one", cp);
  } else if (cp == 0) {
    return fail_at(p, at, "\\u0000 (a str holds no NUL byte)");
  }
  *o = put_utf8(*o, (uint32_t)cp);
  *i = end;
  return 0;
}

/* Of 8 bytes read little-endian, a 0x80 bit in each byte that a string
 * cannot hold as it is ('"', '\\', below 0x20, 0x80 or above). Bits above
 * the lowest may be wrong (a borrow carries up); the lowest is exact. */
#define BYTES8(b) (0x0101010101010101u * (b))
static uint64_t not_plain8(uint64_t x) {
  uint64_t q = x ^ BYTES8('"'), b = x ^ BYTES8('\\');
  return (((x - BYTES8(0x20)) & ~x) | ((q - BYTES8(1)) & ~q) | ((b - BYTES8(1)) & ~b) | x) &
         BYTES8(0x80);
}

/* The plain bytes from s[*i] on (up to the first byte that is not) copied
 * to *o; advances both. Eight at a time while eight are left, bytes past
 * the first special one stored too: the strings block has room for them,
 * since what is written to it stays behind what is read of the text
 * (each string gives back at least its two quotes for its NUL). */
static void plain_run(const parser* p, size_t* i, char** o) {
  const unsigned char* s = p->s;
  size_t k = *i;
  char* w = *o;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  while (p->len - k >= 8) {
    uint64_t x;
    memcpy(&x, s + k, 8);
    memcpy(w, &x, 8);
    uint64_t m = not_plain8(x);
    size_t n = m ? (size_t)__builtin_ctzll(m) >> 3 : 8;
    k += n, w += n;
    if (m) {
      *i = k, *o = w;
      return;
    }
  }
#endif
  while (k < p->len && (pf_json_byte_class[s[k]] & PF_JSON_PLAIN)) *w++ = (char)s[k++];
  *i = k, *o = w;
}

/* The string whose opening quote is at p->pos, decoded into the strings
 * block, as token t. */
static int string(parser* p, pf_json_tok* t) {
  const unsigned char* s = p->s;
  size_t i = p->pos + 1;
  char *start = p->str, *o = start;
  for (;;) {
    plain_run(p, &i, &o);
    if (i == p->len) return fail_at(p, i, "a string without its closing quote");
    if (s[i] == '"') break;
    if (s[i] == '\\') {
      if (escape(p, &i, &o) != 0) return -1;
    } else if (s[i] < 0x20) {
      return fail_at(p, i, "a control character in a string (it must be escaped)");
    } else {
      size_t n = pf_utf8_len(s + i, p->len - i);
      if (!n) return fail_at(p, i, "not UTF-8");
      memcpy(o, s + i, n);
      o += n, i += n;
    }
  }
  *o = '\0';
  t->v.s = start;
  t->n = (uint32_t)(o - start);
  p->str = o + 1;
  p->pos = i + 1;
  return 0;
}

static int digit(const parser* p, size_t i) {
  return i < p->len && p->s[i] >= '0' && p->s[i] <= '9';
}

/* s[start .. end), a number with a fraction or an exponent, read as
 * strtod reads it in the C locale. */
static int real(parser* p, size_t start, size_t end, pf_json_tok* t) {
  char small[64], *text = end - start < sizeof(small) ? small : pf_malloc(end - start + 1);
  if (!text) return pf_oom(p->where);
  memcpy(text, p->s + start, end - start);
  text[end - start] = '\0';
  locale_t old = pf_c_locale_enter();
  errno = 0;
  t->v.d = strtod(text, NULL);
  int range = errno == ERANGE && isinf(t->v.d);
  pf_c_locale_leave(old);
  if (text != small) pf_free(text);
  return range ? fail_at(p, start, "a number outside float64's range") : 0;
}

static int number(parser* p) {
  size_t start = p->pos, i = start;
  int neg = p->s[i] == '-';
  i += (size_t)neg;
  if (!digit(p, i)) return fail_at(p, i, "a number needs a digit here");
  if (p->s[i] == '0') ++i;
  else
    while (digit(p, i)) ++i;
  int is_real = 0;
  if (i < p->len && p->s[i] == '.') {
    is_real = 1;
    if (!digit(p, ++i)) return fail_at(p, i, "a number needs a digit here");
    while (digit(p, i)) ++i;
  }
  if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
    is_real = 1;
    ++i;
    if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) ++i;
    if (!digit(p, i)) return fail_at(p, i, "a number needs a digit here");
    while (digit(p, i)) ++i;
  }
  pf_json_tok* t = emit(p, is_real ? pf_json_real : pf_json_int);
  if (!t) return pf_oom(p->where);
  p->pos = i;
  if (is_real) return real(p, start, i, t);
  uint64_t u = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
  /* 18 digits always fit: only a longer number checks each step. */
  int checked = i - start - (size_t)neg > 18;
  for (size_t k = start + (size_t)neg; k < i; ++k) {
    unsigned d = p->s[k] - (unsigned)'0';
    if (checked && u > (lim - d) / 10) return fail_at(p, start, "an integer outside int64");
    u = u * 10 + d;
  }
  t->v.i = !neg ? (int64_t)u : u ? -(int64_t)(u - 1) - 1 : 0;
  return 0;
}

static int same_key(const pf_json_tok* a, const pf_json_tok* b) {
  return a->n == b->n && memcmp(a->v.s, b->v.s, a->n) == 0;
}

static int key_order(const void* a, const void* b) {
  const pf_json_tok *x = *(const pf_json_tok*const*)a, *y = *(const pf_json_tok*const*)b;
  if (x->n != y->n) return x->n < y->n ? -1 : 1;
  return memcmp(x->v.s, y->v.s, x->n);
}

/* Refuses an object (token `at`, just closed) with a key twice: a few
 * keys pairwise, more sorted (O(n log n) whatever the keys). */
static int check_keys(parser* p, size_t at) {
  const pf_json_tok* obj = &p->tok[at];
  const pf_json_tok* k = obj + 1;
  size_t n = obj->n, dup = 0;
  if (n == 2) { /* the most common case by far (every node PFToJSON writes) */
    dup = (size_t)same_key(k, k + 1 + k[1].skip);
  } else {
    const pf_json_tok *small[8], **keys = n <= 8 ? small : pf_malloc(n * sizeof(*keys));
    if (!keys) return pf_oom(p->where);
    for (size_t i = 0; i < n; ++i, k += 1 + k[1].skip) keys[i] = k;
    if (n > 8) {
      qsort(keys, n, sizeof(*keys), key_order);
      for (size_t i = 1; i < n; ++i) dup |= (size_t)same_key(keys[i - 1], keys[i]);
    } else {
      for (size_t i = 0; i < n; ++i)
        for (size_t j = i + 1; j < n; ++j) dup |= (size_t)same_key(keys[i], keys[j]);
    }
    if (keys != small) pf_free(keys);
  }
  return dup ? fail_at(p, p->pos - 1, "duplicate object key") : 0;
}

static pf_json_tok* innermost(parser* p) { return &p->tok[p->open[p->depth - 1]]; }

/* Closes the innermost container at p->pos (its closing bracket). */
static int close_container(parser* p) {
  size_t at = p->open[--p->depth];
  p->tok[at].skip = (uint32_t)(p->ntok - at);
  ++p->pos;
  return p->tok[at].type == pf_json_object && p->tok[at].n > 1 ? check_keys(p, at) : 0;
}

/* An object's key and its colon, counting a member. */
static int key(parser* p) {
  if (next_byte(p) != '"') return fail_at(p, p->pos, "expected a string (an object's key)");
  pf_json_tok* t = emit(p, pf_json_str);
  if (!t) return pf_oom(p->where);
  if (string(p, t) != 0) return -1;
  if (next_byte(p) != ':') return fail_at(p, p->pos, "expected ':'");
  ++p->pos;
  return 0;
}

/* Reads a value, or the start of one: 0 when a whole value was read, 1
 * when an array or object was opened and its first item comes next. */
static int value(parser* p) {
  int c = next_byte(p);
  if (c == '{' || c == '[') {
    if (p->depth == PF_JSON_PARSE_MAX_DEPTH)
      return fail_at(p, p->pos, "more than %d arrays and objects nested", PF_JSON_PARSE_MAX_DEPTH);
    if (!emit(p, c == '{' ? pf_json_object : pf_json_array)) return pf_oom(p->where);
    p->open[p->depth++] = (uint32_t)(p->ntok - 1);
    ++p->pos;
    if (next_byte(p) == c + 2) return close_container(p); /* '{' + 2 is '}', '[' + 2 is ']' */
    innermost(p)->n = 1;
    return c == '{' && key(p) != 0 ? -1 : 1;
  }
  if (c == '"') {
    pf_json_tok* t = emit(p, pf_json_str);
    return t ? string(p, t) : pf_oom(p->where);
  }
  if (c == '-' || (c >= '0' && c <= '9')) return number(p);
  if (c == 't') return literal(p, "true", pf_json_true);
  if (c == 'f') return literal(p, "false", pf_json_false);
  if (c == 'n') return literal(p, "null", pf_json_null);
  if (c < 0) return fail_at(p, p->pos, "the text ends where a value should be");
  return fail_at(p, p->pos, "not a value (true, false, null, a number, a string, [ or {)");
}

/* After an item of the innermost container: 1 when a ',' (and a key) was
 * read and an item comes next, 0 when the container closed. */
static int next_item(parser* p) {
  int c = next_byte(p);
  pf_json_tok* t = innermost(p);
  int obj = t->type == pf_json_object;
  if (c == ',') {
    ++p->pos;
    ++t->n;
    return obj && key(p) != 0 ? -1 : 1;
  }
  if (c == (obj ? '}' : ']')) return close_container(p);
  return fail_at(p, p->pos, obj ? "expected ',' or '}'" : "expected ',' or ']'");
}

static int parse_text(parser* p) {
  for (;;) {
    int rc = value(p);
    while (rc == 0 && p->depth > 0) rc = next_item(p);
    if (rc < 0) return -1;
    if (rc == 0) {
      return next_byte(p) >= 0 ? fail_at(p, p->pos, "more text after the value") : 0;
    }
  }
}

int pf_json_parse(const char* where, const char* text, size_t len, pf_json_doc* doc) {
  /* Every token but one takes two bytes of text or more (a value and its
   * ',', a key and its ':', a container's brackets). */
  size_t max = len / 2 + 2, cap = len / 8 + 16 < max ? len / 8 + 16 : max;
  parser* p = pf_malloc(sizeof(parser));
  doc->strings = pf_malloc(len + 1); /* decoded strings are never longer */
  doc->tok = pf_malloc(cap * sizeof(pf_json_tok));
  if (!p || !doc->strings || !doc->tok) {
    pf_free(p);
    pf_json_free(doc);
    return pf_oom(where);
  }
  p->where = where;
  p->s = (const unsigned char*)(text ? text : "");
  p->len = len;
  p->pos = p->ntok = 0;
  p->tok = doc->tok;
  p->cap = cap;
  p->max = max;
  p->str = doc->strings;
  p->depth = 0;
  int rc = parse_text(p);
  doc->tok = p->tok;
  pf_free(p);
  if (rc != 0) pf_json_free(doc);
  return rc;
}

void pf_json_free(pf_json_doc* doc) {
  pf_free(doc->tok);
  pf_free(doc->strings);
  doc->tok = NULL;
  doc->strings = NULL;
}
