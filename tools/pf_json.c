/* pf's JSON: a reader for container arguments and the printer of results
 * (see pf_json.h).
 *
 * The errors here are pf's own messages to its user, not the library's:
 * they are recorded with PFErrorSetFormat rather than PF_ERROR, because pf
 * prints the traceback under the message, and a "File tools/pf_json.c"
 * line would tell a shell user nothing. */
#include "pf_json.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading ---- */

typedef struct {
  const char* text; /* the whole argument, for messages */
  const char* p;
  const char* fname;
  const char* arg; /* "argument 0", "argument 'hi'" */
} json_parser;

/* A growing list of parsed values; each str is owned (freed by
 * json_items_free) and each container is a reference (released there). */
typedef struct {
  PFValue* v;
  int* c;
  char** owned;
  size_t n, cap;
} json_items;

static int json_error(const json_parser* j, const char* what) {
  return PFErrorSetFormat(kPFErrValueError,
                          "%s of '%s' is not valid JSON: %s at offset %d of '%.200s'", j->arg,
                          j->fname, what, (int)(j->p - j->text), j->text);
}

static void json_items_free(json_items* it) {
  for (size_t i = 0; i < it->n; ++i) {
    free(it->owned[i]);
    if (it->c[i] == kPFObjectHandle) PFObjectFree(it->v[i].v_handle);
  }
  free(it->v);
  free(it->c);
  free(it->owned);
  memset(it, 0, sizeof(*it));
}

/* Takes ownership of `owned` and of a container reference, also on failure. */
static int json_items_push(json_items* it, PFValue v, int code, char* owned) {
  if (it->n == it->cap) {
    size_t cap = it->cap ? 2 * it->cap : 8;
    PFValue* nv = realloc(it->v, cap * sizeof(*nv));
    if (nv) it->v = nv;
    int* nc = nv ? realloc(it->c, cap * sizeof(*nc)) : NULL;
    if (nc) it->c = nc;
    char** no = nc ? realloc(it->owned, cap * sizeof(*no)) : NULL;
    if (no == NULL) {
      free(owned);
      if (code == kPFObjectHandle) PFObjectFree(v.v_handle);
      return PFErrorSetFormat(kPFErrMemoryError, "out of memory reading a JSON argument");
    }
    it->owned = no;
    it->cap = cap;
  }
  it->v[it->n] = v;
  it->c[it->n] = code;
  it->owned[it->n] = owned;
  ++it->n;
  return 0;
}

static void json_skip_blanks(json_parser* j) {
  while (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r') ++j->p;
}

static int hex4(const char* p, unsigned* out) {
  unsigned x = 0;
  for (int i = 0; i < 4; ++i) {
    char c = p[i];
    int d = c >= '0' && c <= '9'   ? c - '0'
            : c >= 'a' && c <= 'f' ? c - 'a' + 10
            : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                   : -1;
    if (d < 0) return 0;
    x = x * 16 + (unsigned)d;
  }
  *out = x;
  return 1;
}

/* Reads a string at j->p (a '"'); *out is a new malloc'd UTF-8 text. */
static int json_string(json_parser* j, char** out) {
  const char* start = ++j->p;
  /* The UTF-8 text is never longer than its JSON spelling: an escape of k
   * characters writes at most k bytes. */
  char* buf = malloc(strlen(start) + 1);
  if (buf == NULL)
    return PFErrorSetFormat(kPFErrMemoryError, "out of memory reading a JSON argument");
  size_t n = 0;
  for (;;) {
    unsigned char c = (unsigned char)*j->p;
    if (c == '"') break;
    if (c == '\0') {
      free(buf);
      return json_error(j, "unterminated string");
    }
    if (c < 0x20) {
      free(buf);
      return json_error(j, "control character in a string");
    }
    if (c != '\\') {
      buf[n++] = (char)c;
      ++j->p;
      continue;
    }
    char e = j->p[1];
    static const char k_esc[] = "\"\\/bfnrt";
    static const char k_map[] = "\"\\/\b\f\n\r\t";
    const char* simple = strchr(k_esc, e);
    if (e != '\0' && simple != NULL) {
      buf[n++] = k_map[simple - k_esc];
      j->p += 2;
      continue;
    }
    unsigned u;
    if (e != 'u' || !hex4(j->p + 2, &u)) {
      free(buf);
      return json_error(j, "bad escape in a string");
    }
    j->p += 6;
    if (u >= 0xd800 && u < 0xdc00) {
      unsigned lo;
      if (j->p[0] != '\\' || j->p[1] != 'u' || !hex4(j->p + 2, &lo) || lo < 0xdc00 ||
          lo >= 0xe000) {
        free(buf);
        return json_error(j, "a lone surrogate in a string");
      }
      j->p += 6;
      u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
    } else if (u >= 0xdc00 && u < 0xe000) {
      free(buf);
      return json_error(j, "a lone surrogate in a string");
    } else if (u == 0) {
      free(buf);
      return json_error(j, "a NUL character, which a str cannot hold,");
    }
    if (u < 0x80) {
      buf[n++] = (char)u;
    } else if (u < 0x800) {
      buf[n++] = (char)(0xc0 | (u >> 6));
      buf[n++] = (char)(0x80 | (u & 0x3f));
    } else if (u < 0x10000) {
      buf[n++] = (char)(0xe0 | (u >> 12));
      buf[n++] = (char)(0x80 | ((u >> 6) & 0x3f));
      buf[n++] = (char)(0x80 | (u & 0x3f));
    } else {
      buf[n++] = (char)(0xf0 | (u >> 18));
      buf[n++] = (char)(0x80 | ((u >> 12) & 0x3f));
      buf[n++] = (char)(0x80 | ((u >> 6) & 0x3f));
      buf[n++] = (char)(0x80 | (u & 0x3f));
    }
  }
  ++j->p; /* the closing quote */
  buf[n] = '\0';
  *out = buf;
  return 0;
}

/* Reads a JSON number: an int when it has no fraction or exponent. */
static int json_number(json_parser* j, PFValue* v, int* code) {
  const char* start = j->p;
  const char* q = start + (*start == '-');
  if (!(*q >= '0' && *q <= '9')) return json_error(j, "unexpected character");
  if (*q == '0' && q[1] >= '0' && q[1] <= '9') return json_error(j, "a number with a leading zero");
  while (*q >= '0' && *q <= '9') ++q;
  int is_float = 0;
  if (*q == '.') {
    is_float = 1;
    ++q;
    if (!(*q >= '0' && *q <= '9')) return json_error(j, "a number without digits after '.'");
    while (*q >= '0' && *q <= '9') ++q;
  }
  if (*q == 'e' || *q == 'E') {
    is_float = 1;
    ++q;
    if (*q == '+' || *q == '-') ++q;
    if (!(*q >= '0' && *q <= '9')) return json_error(j, "a number without exponent digits");
    while (*q >= '0' && *q <= '9') ++q;
  }
  char tmp[64];
  size_t len = (size_t)(q - start);
  if (len >= sizeof(tmp)) return json_error(j, "a number longer than 63 characters");
  memcpy(tmp, start, len);
  tmp[len] = '\0';
  /* The grammar is checked: strtoll and strtod read all of tmp. */
  _Static_assert(LLONG_MIN == INT64_MIN && LLONG_MAX == INT64_MAX, "strtoll reads an int64");
  errno = 0;
  if (!is_float) {
    long long i = strtoll(tmp, NULL, 10);
    if (errno == ERANGE) return json_error(j, "an integer outside the int64 range");
    v->v_int64 = (int64_t)i;
    *code = kPFInt;
  } else {
    double x = strtod(tmp, NULL);
    if (errno == ERANGE && isinf(x)) return json_error(j, "a number outside the float64 range");
    v->v_float64 = x;
    *code = kPFFloat;
  }
  j->p = q;
  return 0;
}

static int json_value(json_parser* j, int depth, PFValue* v, int* code, char** owned);

/* Reads a list at j->p (a '[') into `it`. */
static int json_list_items(json_parser* j, int depth, json_items* it) {
  ++j->p;
  json_skip_blanks(j);
  if (*j->p == ']') {
    ++j->p;
    return 0;
  }
  for (;;) {
    PFValue v;
    int code;
    char* owned = NULL;
    if (json_value(j, depth + 1, &v, &code, &owned) != 0) return -1;
    if (json_items_push(it, v, code, owned) != 0) return -1;
    json_skip_blanks(j);
    if (*j->p == ',') {
      ++j->p;
      continue;
    }
    if (*j->p == ']') {
      ++j->p;
      return 0;
    }
    return json_error(j, *j->p ? "expected ',' or ']'" : "expected ',' or ']', found the end");
  }
}

static int json_list(json_parser* j, int depth, PFValue* v, int* code) {
  json_items it = {0};
  int st = json_list_items(j, depth, &it);
  PFObjectHandle a = NULL;
  if (st == 0) st = PFArrayCreate(it.v, it.c, (int64_t)it.n, &a);
  json_items_free(&it); /* the Array copied and retained what it keeps */
  if (st != 0) return -1;
  v->v_handle = a;
  *code = kPFObjectHandle;
  return 0;
}

static int json_object(json_parser* j, int depth, PFValue* v, int* code) {
  json_items keys = {0}, vals = {0};
  int st = 0;
  ++j->p;
  json_skip_blanks(j);
  if (*j->p == '}') {
    ++j->p;
  } else {
    for (;;) {
      PFValue k;
      int kc;
      char* owned = NULL;
      json_skip_blanks(j);
      if (*j->p == '"') {
        st = json_string(j, &owned);
        k.v_str = owned;
        kc = kPFStr;
      } else if (*j->p == '-' || (*j->p >= '0' && *j->p <= '9')) {
        st = json_number(j, &k, &kc);
        if (st == 0 && kc != kPFInt)
          st = json_error(j, "a key that is neither a string nor an integer");
      } else {
        st = json_error(
            j, *j->p ? "expected a key (a string or an integer)" : "expected a key, found the end");
      }
      if (st == 0) st = json_items_push(&keys, k, kc, owned);
      if (st != 0) break;
      json_skip_blanks(j);
      if (*j->p != ':') {
        st = json_error(j, "expected ':' after a key");
        break;
      }
      ++j->p;
      PFValue x;
      int xc;
      owned = NULL;
      if ((st = json_value(j, depth + 1, &x, &xc, &owned)) != 0) break;
      if ((st = json_items_push(&vals, x, xc, owned)) != 0) break;
      json_skip_blanks(j);
      if (*j->p == ',') {
        ++j->p;
        continue;
      }
      if (*j->p == '}') {
        ++j->p;
        break;
      }
      st = json_error(j, *j->p ? "expected ',' or '}'" : "expected ',' or '}', found the end");
      break;
    }
  }
  PFObjectHandle m = NULL;
  if (st == 0) st = PFMapCreate(keys.v, keys.c, vals.v, vals.c, (int64_t)keys.n, &m);
  json_items_free(&keys);
  json_items_free(&vals);
  if (st != 0) return -1;
  v->v_handle = m;
  *code = kPFObjectHandle;
  return 0;
}

/* Reads one value. A str is returned in *owned (the caller frees it); a
 * container is a new reference. */
static int json_value(json_parser* j, int depth, PFValue* v, int* code, char** owned) {
  json_skip_blanks(j);
  if (depth > PF_CLI_JSON_DEPTH)
    return json_error(j, "nested deeper than " PF_STRINGIFY_(PF_CLI_JSON_DEPTH) " levels");
  switch (*j->p) {
    case '[':
      return json_list(j, depth, v, code);
    case '{':
      return json_object(j, depth, v, code);
    case '"':
      if (json_string(j, owned) != 0) return -1;
      v->v_str = *owned;
      *code = kPFStr;
      return 0;
    case 't':
    case 'f':
    case 'n': {
      static const char* const words[] = {"true", "false", "null"};
      for (int i = 0; i < 3; ++i) {
        size_t n = strlen(words[i]);
        if (strncmp(j->p, words[i], n) == 0) {
          j->p += n;
          v->v_int64 = i == 0;
          *code = i == 2 ? kPFNull : kPFBool;
          return 0;
        }
      }
      return json_error(j, "unexpected word");
    }
    case '\0':
      return json_error(j, "expected a value, found the end");
    default:
      return json_number(j, v, code);
  }
}

int pf_json_read(const char* fname, const char* arg, const char* text, PFValue* v, int* code) {
  json_parser j = {text, text, fname, arg};
  /* A container, never a str: *owned stays NULL unless the text is wrong. */
  if (*text != '[' && *text != '{') return json_error(&j, "expected '[' or '{'");
  char* owned = NULL;
  PFValue x;
  int xc;
  if (json_value(&j, 0, &x, &xc, &owned) != 0) return -1;
  json_skip_blanks(&j);
  if (*j.p != '\0') {
    if (xc == kPFObjectHandle) PFObjectFree(x.v_handle);
    free(owned);
    return json_error(&j, "unexpected text after the value");
  }
  *v = x;
  *code = xc;
  return 0;
}

int pf_json_read_shape(const char* fname, const char* arg, const char* text, PFValue* v,
                       int* code) {
  json_parser j = {text, text, fname, arg};
  json_items it = {0};
  json_skip_blanks(&j);
  if (*j.p != '[') return json_error(&j, "a shape is a list of integers, such as [2, 3]");
  int st = json_list_items(&j, 1, &it);
  if (st == 0) {
    json_skip_blanks(&j);
    if (*j.p != '\0') st = json_error(&j, "unexpected text after the value");
  }
  int64_t* dims = NULL;
  if (st == 0 && it.n > 0 && (dims = malloc(it.n * sizeof(*dims))) == NULL)
    st = PFErrorSetFormat(kPFErrMemoryError, "out of memory reading a JSON argument");
  for (size_t i = 0; st == 0 && i < it.n; ++i) {
    if (it.c[i] != kPFInt)
      st = PFErrorSetFormat(kPFErrValueError,
                            "%s of '%s' must be a shape, a list of integers; item %zu is "
                            "not an integer",
                            arg, fname, i);
    else dims[i] = it.v[i].v_int64;
  }
  PFObjectHandle shape = NULL;
  if (st == 0) st = PFShapeCreate(dims, (int64_t)it.n, &shape);
  free(dims);
  json_items_free(&it);
  if (st != 0) return -1;
  v->v_handle = shape;
  *code = kPFObjectHandle;
  return 0;
}

/* ---- printing ---- */

static void print_float(FILE* out, double x) {
  if (isnan(x)) {
    fputs("nan", out);
    return;
  }
  if (isinf(x)) {
    fputs(x > 0 ? "inf" : "-inf", out);
    return;
  }
  /* Like Python's repr: the fewest digits that read back as x, positional
   * for exponents in [-4, 16), scientific otherwise. */
  char buf[400];
  int prec = 0;
  for (; prec < 17; ++prec) {
    snprintf(buf, sizeof(buf), "%.*e", prec, x);
    if (strtod(buf, NULL) == x) break;
  }
  snprintf(buf, sizeof(buf), "%.*e", prec, x);
  int e = atoi(strchr(buf, 'e') + 1);
  if (e >= -4 && e < 16) {
    snprintf(buf, sizeof(buf), "%.*f", prec > e ? prec - e : 0, x);
    if (strchr(buf, '.') == NULL) strcat(buf, ".0");
  }
  fputs(buf, out);
}

static void print_bytes(FILE* out, const PFByteArray* b) {
  fputs("b'", out);
  for (size_t i = 0; i < b->size; ++i) {
    unsigned char c = (unsigned char)b->data[i];
    if (c == '\\' || c == '\'') fprintf(out, "\\%c", c);
    else if (c == '\n') fputs("\\n", out);
    else if (c == '\r') fputs("\\r", out);
    else if (c == '\t') fputs("\\t", out);
    else if (c < 0x20 || c >= 0x7f) fprintf(out, "\\x%02x", c);
    else fputc(c, out);
  }
  fputs("'", out);
}

/* A str inside a container, as JSON writes it. */
static void print_json_string(FILE* out, const char* str) {
  fputc('"', out);
  for (const unsigned char* p = (const unsigned char*)str; *p; ++p) {
    if (*p == '"' || *p == '\\') fprintf(out, "\\%c", *p);
    else if (*p == '\n') fputs("\\n", out);
    else if (*p == '\r') fputs("\\r", out);
    else if (*p == '\t') fputs("\\t", out);
    else if (*p < 0x20) fprintf(out, "\\u%04x", *p);
    else fputc(*p, out);
  }
  fputc('"', out);
}

/* Prints one value, borrowed (nothing is released). A str prints as is at
 * the top and as a JSON string inside a container. The items of containers
 * deeper than PF_CLI_JSON_DEPTH print as "...": a result nested a million
 * levels deep must not exhaust the stack, and what the reader makes (whose
 * containers at that depth are empty) still prints whole. */
static void print_value(FILE* out, PFValue v, int code, int depth) {
  switch (code) {
    case kPFInt:
      fprintf(out, "%" PRId64, v.v_int64);
      break;
    case kPFFloat:
      print_float(out, v.v_float64);
      break;
    case kPFBool:
      fputs(v.v_int64 ? "true" : "false", out);
      break;
    case kPFNull:
      fputs("null", out);
      break;
    case kPFStr:
      if (depth == 0) fputs(v.v_str, out);
      else print_json_string(out, v.v_str);
      break;
    case kPFBytes:
      print_bytes(out, v.v_handle);
      break;
    case kPFOpaqueHandle:
      fprintf(out, "<handle %p>", v.v_handle);
      break;
    case kPFDataType:
      fprintf(out, "<dtype code=%u bits=%u lanes=%u>", (unsigned)v.v_type.code,
              (unsigned)v.v_type.bits, (unsigned)v.v_type.lanes);
      break;
    case kPFDevice:
      fprintf(out, "<device type=%d id=%d>", (int)v.v_device.device_type,
              (int)v.v_device.device_id);
      break;
    case kPFDLTensorHandle:
      fprintf(out, "<tensor %p>", v.v_handle);
      break;
    case kPFFuncHandle: {
      const char* name = NULL;
      PFFuncGetInfo(v.v_handle, &name, NULL, NULL);
      fprintf(out, name ? "<function %s>" : "<function>", name);
      break;
    }
    case kPFModuleHandle:
      fputs("<module>", out);
      break;
    case kPFObjectHandle: {
      uint32_t t = 0;
      PFObjectGetTypeIndex(v.v_handle, &t);
      int64_t n = 0;
      if (t == kPFObjectArray && PFArrayGetSize(v.v_handle, &n) == 0) {
        fputc('[', out);
        if (n > 0 && depth >= PF_CLI_JSON_DEPTH) fputs("...", out);
        for (int64_t i = 0; i < n && depth < PF_CLI_JSON_DEPTH; ++i) {
          PFValue x;
          int xc;
          if (PFArrayGetItem(v.v_handle, i, &x, &xc) != 0) break;
          if (i) fputs(", ", out);
          print_value(out, x, xc, depth + 1);
        }
        fputc(']', out);
      } else if (t == kPFObjectMap && PFMapGetSize(v.v_handle, &n) == 0) {
        fputc('{', out);
        if (n > 0 && depth >= PF_CLI_JSON_DEPTH) fputs("...", out);
        for (int64_t i = 0; i < n && depth < PF_CLI_JSON_DEPTH; ++i) {
          PFValue k, x;
          int kc, xc;
          if (PFMapGetItemAt(v.v_handle, i, &k, &kc, &x, &xc) != 0) break;
          if (i) fputs(", ", out);
          print_value(out, k, kc, depth + 1);
          fputs(": ", out);
          print_value(out, x, xc, depth + 1);
        }
        fputc('}', out);
      } else if (t == kPFObjectShape) {
        const int64_t* dims = NULL;
        if (PFShapeGetData(v.v_handle, &dims, &n) != 0) n = 0;
        fputc('[', out);
        for (int64_t i = 0; i < n; ++i) fprintf(out, "%s%" PRId64, i ? ", " : "", dims[i]);
        fputc(']', out);
      } else {
        fprintf(out, "<object type=%u>", (unsigned)t);
      }
      break;
    }
    default:
      fprintf(out, "<%s %d>", PFTypeCodeName(code) ? PFTypeCodeName(code) : "unknown", code);
      break;
  }
}

void pf_json_print(FILE* out, PFValue v, int code) { print_value(out, v, code, 0); }
