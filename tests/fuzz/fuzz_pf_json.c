/* libFuzzer target: pf's JSON reader and printer (tools/pf_json.c), which
 * read a container argument of `pf call` from the command line.
 *
 * The input (cut at its first NUL byte) is read as a container
 * (pf_json_read) and as a shape (pf_json_read_shape).
 * Checks: each gives a value or a ValueError or MemoryError, never a crash,
 * a leak or undefined behaviour; an error names the argument, or the
 * container entry point that refused the value; and what the printer
 * writes of a value reads back as a value that prints the same. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"
#include "pf_json.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

typedef int (*read_fn)(const char* fname, const char* arg, const char* text, PFValue* v, int* code);

static void fail(const char* what, const char* text, const char* detail) {
  fprintf(stderr, "fuzz_pf_json: %s\n  input: '%s'\n  %s\n", what, text, detail);
  abort();
}

static int starts_with(const char* s, const char* prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* The printed text of v (malloc'd). */
static char* print(PFValue v, int code) {
  char* text = NULL;
  size_t len = 0;
  FILE* f = open_memstream(&text, &len);
  if (f == NULL) abort();
  pf_json_print(f, v, code);
  fclose(f);
  return text;
}

static void check(read_fn read, const char* text) {
  PFValue v;
  int code = -1;
  if (read("f", "argument 0", text, &v, &code) != 0) {
    const char* kind = PFErrorGetKind();
    const char* msg = PFErrorGetMessage();
    if (strcmp(kind, kPFErrValueError) != 0 && strcmp(kind, kPFErrMemoryError) != 0)
      fail("an error of an unexpected kind", text, kind);
    if (!starts_with(msg, "argument 0 of 'f' ") && !starts_with(msg, "PFMapCreate: ") &&
        !starts_with(msg, "PFArrayCreate: ") && !starts_with(msg, "PFShapeCreate: "))
      fail("an error that names neither the argument nor an entry point", text, msg);
    return;
  }
  if (code != kPFObjectHandle) fail("a value that is not a container", text, "");
  char* once = print(v, code);
  PFObjectFree(v.v_handle);
  if (once[0] != '[' && once[0] != '{') fail("a container printed as no container", text, once);
  if (read("f", "argument 0", once, &v, &code) != 0)
    fail("the printed text does not read back", once, PFErrorGetMessage());
  char* twice = print(v, code);
  PFObjectFree(v.v_handle);
  if (strcmp(once, twice) != 0) fail("the printed text reads back as another value", once, twice);
  free(once);
  free(twice);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  char* text = malloc(size + 1);
  if (text == NULL) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  check(pf_json_read, text);
  check(pf_json_read_shape, text);
  free(text);
  return 0;
}
