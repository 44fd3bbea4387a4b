/* Data types as text: the grammar and the canonical form are in dtype.h. */
#include <stdio.h>

#include "internal.h"

/* The codes 0 to 6, by the names KIND and SHORT use. */
static const char* const k_kinds[] = {"int",    "uint",    "float", "handle",
                                      "bfloat", "complex", "bool"};
#define N_KINDS ((int)(sizeof(k_kinds) / sizeof(k_kinds[0])))

/* The DLPack 1.1 float codes: the width in their name, the variant after
 * it, and their bits. */
static const struct {
  int code;
  int width; /* 8, 6 or 4: the digit after "float", "f" or "fp" */
  const char* variant;
} k_floats[] = {
    {kDLFloat8_e3m4, 8, "e3m4"},
    {kDLFloat8_e4m3, 8, "e4m3"},
    {kDLFloat8_e4m3b11fnuz, 8, "e4m3b11fnuz"},
    {kDLFloat8_e4m3fn, 8, "e4m3fn"},
    {kDLFloat8_e4m3fnuz, 8, "e4m3fnuz"},
    {kDLFloat8_e5m2, 8, "e5m2"},
    {kDLFloat8_e5m2fnuz, 8, "e5m2fnuz"},
    {kDLFloat8_e8m0fnu, 8, "e8m0fnu"},
    {kDLFloat6_e2m3fn, 6, "e2m3fn"},
    {kDLFloat6_e3m2fn, 6, "e3m2fn"},
    {kDLFloat4_e2m1fn, 4, "e2m1fn"},
};
#define N_FLOATS ((int)(sizeof(k_floats) / sizeof(k_floats[0])))

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int starts(const char* s, const char* prefix, const char** rest) {
  size_t n = strlen(prefix);
  if (strncmp(s, prefix, n) != 0) return 0;
  *rest = s + n;
  return 1;
}

static int bad_text(const char* text) {
  return PF_ERROR(kPFErrValueError,
                  "PFDataTypeFromString: cannot parse '%.100s' as a data type (expected e.g. "
                  "'float32', 'int8x4', 'bool', 'bf16', 'float8_e4m3fn')",
                  text);
}

/* Reads a decimal number of at most `max` at *s; -1 when there is none or
 * it is larger (then *s is left anywhere). */
static long read_number(const char** s, long max) {
  if (!is_digit(**s)) return -1;
  long v = 0;
  for (; is_digit(**s); ++*s) {
    v = v * 10 + (**s - '0');
    if (v > max) return -2;
  }
  return v;
}

/* Reads "[x LANES]" and the end of the text. */
static int read_lanes(const char* text, const char* s, int allow_underscore, DLDataType* dt) {
  if (allow_underscore && s[0] == '_' && s[1] == 'x') ++s;
  if (*s == '\0') {
    dt->lanes = 1;
    return 0;
  }
  if (*s++ != 'x') return bad_text(text);
  long lanes = read_number(&s, 65535);
  if (lanes == -2 || lanes == 0)
    return PF_ERROR(kPFErrValueError,
                    "PFDataTypeFromString: '%.100s': the lanes must be 1 to 65535", text);
  if (lanes < 0 || *s != '\0') return bad_text(text);
  dt->lanes = (uint16_t)lanes;
  return 0;
}

/* A DLPack 1.1 float of width `width` whose variant begins at s, with an
 * optional "_" before it; 1 when it is one (and *dt is set), 0 when s is
 * not a variant, -1 on an error. */
static int read_float_variant(const char* text, const char* s, int width, DLDataType* dt) {
  if (*s == '_') ++s;
  if (*s != 'e') return 0;
  size_t n = 0;
  while (s[n] != '\0' && s[n] != 'x' && s[n] != '_') ++n;
  for (int i = 0; i < N_FLOATS; ++i) {
    if (k_floats[i].width != width || strlen(k_floats[i].variant) != n ||
        memcmp(k_floats[i].variant, s, n) != 0)
      continue;
    dt->code = (uint8_t)k_floats[i].code;
    dt->bits = (uint8_t)width;
    return read_lanes(text, s + n, width == 4, dt) == 0 ? 1 : -1;
  }
  return bad_text(text);
}

static int read_bits(const char* text, const char** s, long deflt, int required, uint8_t* bits) {
  long b = read_number(s, 255);
  if (b == -2)
    return PF_ERROR(kPFErrValueError, "PFDataTypeFromString: '%.100s': the bits must be 0 to 255",
                    text);
  if (b == -1) {
    if (required) return bad_text(text);
    b = deflt;
  }
  *bits = (uint8_t)b;
  return 0;
}

int PFDataTypeFromString(const char* text, DLDataType* out) {
  PF_CHECK_ARG(text);
  PF_CHECK_ARG(out);
  DLDataType dt = {0, 0, 1};
  const char* s;
  if (starts(text, "custom[", &s)) {
    long code = read_number(&s, 255);
    if (code < 0 || *s++ != ']') return bad_text(text);
    dt.code = (uint8_t)code;
    if (read_bits(text, &s, 0, 1, &dt.bits) != 0 || read_lanes(text, s, 0, &dt) != 0) return -1;
    *out = dt;
    return 0;
  }
  /* The float8/6/4 codes: "float8", "fp8" or "f8" and a variant. */
  static const char* const k_float_prefixes[] = {"float", "fp", "f"};
  for (int p = 0; p < 3; ++p) {
    if (!starts(text, k_float_prefixes[p], &s) || !(s[0] == '8' || s[0] == '6' || s[0] == '4'))
      continue;
    if (is_digit(s[1])) continue; /* float16, f64 */
    int got = read_float_variant(text, s + 1, s[0] - '0', &dt);
    if (got < 0) return -1;
    if (got > 0) {
      *out = dt;
      return 0;
    }
    break; /* "float8", "f8x2": a plain float of that width */
  }
  if (strcmp(text, "bool") == 0 || (starts(text, "bool", &s) && s[0] == 'x')) {
    dt.code = kDLBool;
    dt.bits = 8;
    if (read_lanes(text, text + 4, 0, &dt) != 0) return -1;
    *out = dt;
    return 0;
  }
  for (int k = N_KINDS - 1; k >= 0; --k) { /* "bfloat" before "float" */
    if (!starts(text, k_kinds[k], &s)) continue;
    dt.code = (uint8_t)k;
    if (read_bits(text, &s, k == kDLOpaqueHandle ? 64 : 32, 0, &dt.bits) != 0 ||
        read_lanes(text, s, 0, &dt) != 0)
      return -1;
    *out = dt;
    return 0;
  }
  static const struct {
    const char* prefix;
    int code;
  } k_short[] = {{"bf", kDLBfloat}, {"i", kDLInt}, {"u", kDLUInt}, {"f", kDLFloat}};
  for (int k = 0; k < 4; ++k) {
    if (!starts(text, k_short[k].prefix, &s) || !is_digit(*s)) continue;
    dt.code = (uint8_t)k_short[k].code;
    if (read_bits(text, &s, 0, 1, &dt.bits) != 0 || read_lanes(text, s, 0, &dt) != 0) return -1;
    *out = dt;
    return 0;
  }
  return bad_text(text);
}

int PFDataTypeToString(DLDataType dtype, char* buf, size_t size) {
  PF_CHECK_ARG(buf);
  if (dtype.lanes == 0)
    return PF_ERROR(kPFErrValueError,
                    "PFDataTypeToString: a data type of 0 lanes (code %u, bits %u) has no text",
                    (unsigned)dtype.code, (unsigned)dtype.bits);
  char text[PF_DTYPE_STRING_MAX];
  int n = -1;
  if (dtype.code == kDLBool && dtype.bits == 8) {
    n = snprintf(text, sizeof(text), "bool");
  } else if (dtype.code < N_KINDS) {
    n = snprintf(text, sizeof(text), "%s%u", k_kinds[dtype.code], (unsigned)dtype.bits);
  } else {
    for (int i = 0; i < N_FLOATS; ++i)
      if (k_floats[i].code == dtype.code && k_floats[i].width == dtype.bits)
        n = snprintf(text, sizeof(text), "float%d_%s", k_floats[i].width, k_floats[i].variant);
    if (n < 0)
      n = snprintf(text, sizeof(text), "custom[%u]%u", (unsigned)dtype.code, (unsigned)dtype.bits);
  }
  if (dtype.lanes > 1)
    n += snprintf(text + n, sizeof(text) - (size_t)n, "x%u", (unsigned)dtype.lanes);
  if ((size_t)n + 1 > size)
    return PF_ERROR(kPFErrValueError,
                    "PFDataTypeToString: argument 'size' is %zu; the text '%s' needs %d bytes",
                    size, text, n + 1);
  memcpy(buf, text, (size_t)n + 1);
  return 0;
}
