/* libFuzzer target: the typed-signature parser.
 *
 * The input, cut at its first NUL, is a signature text. It goes through
 * every entry point that parses signatures, PFFuncCreateFromTyped,
 * PFFuncToCFunction, PFSignatureParse and PFFuncSetInfo, and is checked
 * against a small independent recognizer of the grammar of unnamed
 * parameters without defaults or tensor constraints (signature.h):
 *   - a text the recognizer accepts is accepted everywhere, its stored
 *     signature is the recognizer's canonical form, and that form parses
 *     again to itself;
 *   - a text it rejects is accepted only if it uses the rest of the grammar
 *     (a name's ':', a default's '=', a constraint's '<'); then every entry
 *     point accepts it with one canonical text, which parses to itself and
 *     is what the parameter table spells out (name, type, default text),
 *     and a keyword call with no arguments fills every default or reports
 *     the first required parameter as missing;
 *   - a rejected text gets -1, a ValueError naming the entry point, the
 *     text's position and "bad signature", and nothing leaks.
 * The C function behind the typed function is never called: its prototype
 * is whatever the input says. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define CHECK(cond, ...)                                              \
  do {                                                                \
    if (!(cond)) {                                                    \
      fprintf(stderr, "fuzz_signature: check failed: %s\n  ", #cond); \
      fprintf(stderr, __VA_ARGS__);                                   \
      fprintf(stderr, "\n");                                          \
      abort();                                                        \
    }                                                                 \
  } while (0)

static void never_called(void) {}

static int noop_packed(PFValue* a, int* c, int n, PFRetValueHandle r, void* res) {
  (void)a, (void)c, (void)n, (void)r, (void)res;
  return 0;
}

/* ---- the reference recognizer ---------------------------------------- */

static const char* const k_types[] = {
    "int8",    "int16",   "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float32", "float64", "bool",  "str",   "bytes", "ptr",    "tensor", "dtype",
    "device",  "func",    "array", "map",   "shape", "object", "list",   "dict",
};

/* The runtime also takes '\r' as a blank, so that CRLF text parses. */
static int blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* Reads a type word at s[*i]; appends its canonical name to `canon`.
 * Returns 1 for a type, 2 for "void", 0 for anything else. */
static int word(const char* s, size_t* i, char* canon) {
  size_t n = 0;
  while (word_char(s[*i + n])) ++n;
  if (n == 0) return 0;
  const char* name = NULL;
  if (n == 4 && memcmp(s + *i, "void", 4) == 0) name = "void";
  if (n == 6 && memcmp(s + *i, "double", 6) == 0) name = "float64";
  for (size_t k = 0; name == NULL && k < sizeof(k_types) / sizeof(k_types[0]); ++k)
    if (strlen(k_types[k]) == n && memcmp(s + *i, k_types[k], n) == 0) name = k_types[k];
  if (name == NULL) return 0;
  *i += n;
  strcat(canon, name);
  return strcmp(name, "void") == 0 ? 2 : 1;
}

/* 1 when `s` is a valid signature; its canonical text goes to `canon`
 * (at least 19 * 8 + 4 bytes). */
static int recognize(const char* s, char* canon) {
  size_t i = 0;
  canon[0] = '\0';
  while (blank(s[i])) ++i;
  if (word(s, &i, canon) == 0) return 0;
  while (blank(s[i])) ++i;
  if (s[i++] != '(') return 0;
  strcat(canon, "(");
  while (blank(s[i])) ++i;
  int nargs = 0;
  if (s[i] != ')') {
    for (;;) {
      while (blank(s[i])) ++i;
      if (nargs) strcat(canon, ",");
      if (word(s, &i, canon) != 1) return 0; /* void or junk as an argument */
      if (++nargs > PF_TYPED_MAX_ARGS) return 0;
      while (blank(s[i])) ++i;
      if (s[i] == ',') {
        ++i;
        continue;
      }
      if (s[i] == ')') break;
      return 0;
    }
  }
  ++i; /* ')' */
  strcat(canon, ")");
  while (blank(s[i])) ++i;
  return s[i] == '\0';
}

/* ---- the target ---------------------------------------------------------- */

static void check_rejected(int rc, const char* entry, const char* text) {
  CHECK(rc == -1, "%s accepted \"%s\"", entry, text);
  CHECK(strcmp(PFErrorGetKind(), kPFErrValueError) == 0, "%s(\"%s\"): kind %s, message %s", entry,
        text, PFErrorGetKind(), PFErrorGetMessage());
  /* The documented shape: `ENTRY: bad signature "TEXT" at position N: ...`
   * (the runtime quotes at most 200 bytes of the text). */
  const char* msg = PFErrorGetMessage();
  char prefix[320];
  snprintf(prefix, sizeof(prefix), "%s: bad signature \"%.200s\" at position ", entry, text);
  CHECK(strncmp(msg, prefix, strlen(prefix)) == 0, "%s(\"%s\"): message %s", entry, text, msg);
  char* end = NULL;
  size_t pos = (size_t)strtoull(msg + strlen(prefix), &end, 10);
  CHECK(end != msg + strlen(prefix) && end[0] == ':', "%s: no position in %s", entry, msg);
  CHECK(pos <= strlen(text), "%s(\"%s\"): position %zu past the end", entry, text, pos);
}

/* A text beyond the recognizer's grammar that the runtime accepted: the
 * properties every accepted signature has. */
static void check_extended(const char* text, PFFunctionHandle f) {
  CHECK(strpbrk(text, ":=<") != NULL, "\"%s\" accepted without a name, default or constraint",
        text);
  const char* sig = NULL;
  CHECK(PFFuncGetInfo(f, NULL, &sig, NULL) == 0 && sig != NULL, "no signature");
  PFSignatureInfo* info = NULL;
  CHECK(PFSignatureParse(text, &info) == 0, "PFSignatureParse rejected \"%s\": %s", text,
        PFGetLastError());
  CHECK(strcmp(info->text, sig) == 0, "two canonical texts: %s and %s", info->text, sig);
  /* The table spells the canonical text out. */
  char again[8192];
  size_t n = (size_t)snprintf(again, sizeof(again), "%s(", info->result->type);
  for (int i = 0; i < info->num_params && n < sizeof(again); ++i) {
    const PFParamInfo* p = info->params[i];
    CHECK((p->name != NULL) == (info->named != 0), "param %d of %s: name mismatch", i, sig);
    CHECK((i >= info->num_required) == (p->has_default != 0), "param %d of %s: defaults", i, sig);
    n += (size_t)snprintf(again + n, sizeof(again) - n, "%s%s%s%s%s%s", i ? "," : "",
                          p->name ? p->name : "", p->name ? ":" : "", p->type,
                          p->has_default ? "=" : "", p->has_default ? p->default_text : "");
  }
  if (n < sizeof(again)) snprintf(again + n, sizeof(again) - n, ")");
  CHECK(n >= sizeof(again) || strcmp(again, sig) == 0, "table of %s spells %s", sig, again);
  /* The canonical text parses to itself. */
  PFSignatureInfo* info2 = NULL;
  CHECK(PFSignatureParse(sig, &info2) == 0, "canonical \"%s\" rejected: %s", sig, PFGetLastError());
  CHECK(strcmp(info2->text, sig) == 0, "canonical \"%s\" reparsed as \"%s\"", sig, info2->text);
  PFSignatureInfoFree(info2);
  /* As metadata of a packed function, and in a keyword call of nothing. */
  PFFunctionHandle g = NULL;
  CHECK(PFFuncCreateFromCFunc(noop_packed, NULL, NULL, &g) == 0, "create");
  CHECK(PFFuncSetInfo(g, "fz", text, NULL) == 0, "PFFuncSetInfo rejected \"%s\"", text);
  const char* sig3 = NULL;
  PFFuncGetInfo(g, NULL, &sig3, NULL);
  CHECK(strcmp(sig3, sig) == 0, "PFFuncSetInfo kept %s, typed %s", sig3, sig);
  PFValue rv;
  int rc;
  int st = PFFuncCallKw(g, NULL, NULL, 0, NULL, NULL, NULL, 0, &rv, &rc);
  if (info->num_required == 0) {
    CHECK(st == 0, "keyword call of %s failed: %s", sig, PFGetLastError());
  } else {
    CHECK(st == -1 && strcmp(PFErrorGetKind(), kPFErrTypeError) == 0 &&
              strstr(PFErrorGetMessage(), "fz() missing") != NULL,
          "keyword call of %s: %s", sig, PFGetLastError());
  }
  PFFuncFree(g);
  PFSignatureInfoFree(info);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static PFFunctionHandle target = NULL;
  if (target == NULL && PFFuncCreateFromCFunc(noop_packed, NULL, NULL, &target) != 0) abort();
  if (size > 4096) return 0;
  char* text = malloc(size + 1);
  if (text == NULL) return 0;
  memcpy(text, data, size);
  text[size] = '\0';

  char canon[256];
  int valid = recognize(text, canon);

  PFFunctionHandle f = NULL;
  int rc = PFFuncCreateFromTyped((void*)never_called, text, &f);
  int extended = !valid && rc == 0;
  if (extended) {
    check_extended(text, f);
    PFFuncFree(f);
  } else if (valid) {
    CHECK(rc == 0 && f != NULL, "PFFuncCreateFromTyped rejected \"%s\": %s", text,
          PFGetLastError());
    const char* sig = NULL;
    CHECK(PFFuncGetInfo(f, NULL, &sig, NULL) == 0 && sig != NULL, "no signature");
    CHECK(strcmp(sig, canon) == 0, "canonical of \"%s\" is \"%s\", expected \"%s\"", text, sig,
          canon);
    /* The canonical form parses to itself. */
    PFFunctionHandle g = NULL;
    CHECK(PFFuncCreateFromTyped((void*)never_called, sig, &g) == 0, "canonical \"%s\" rejected",
          sig);
    const char* sig2 = NULL;
    PFFuncGetInfo(g, NULL, &sig2, NULL);
    CHECK(strcmp(sig, sig2) == 0, "canonical \"%s\" reparsed as \"%s\"", sig, sig2);
    PFFuncFree(g);
    PFFuncFree(f);
  } else {
    check_rejected(rc, "PFFuncCreateFromTyped", text);
  }

  PFObjectHandle closure = NULL;
  void* fn = NULL;
  rc = PFFuncToCFunction(target, text, &closure, &fn);
  if (valid || extended) {
    CHECK(rc == 0 && closure != NULL && fn != NULL, "PFFuncToCFunction rejected \"%s\": %s", text,
          PFGetLastError());
    CHECK(PFClosureCheckError(closure) == 0, "fresh closure has an error");
    PFObjectFree(closure);
  } else {
    check_rejected(rc, "PFFuncToCFunction", text);
  }
  free(text);
  return 0;
}
