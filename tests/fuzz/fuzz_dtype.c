/* libFuzzer target: data types as text (PFDataTypeFromString and
 * PFDataTypeToString).
 *
 * The input, cut at its first NUL, is a text; its first four bytes are also
 * read as a DLDataType. Checked:
 *   - a text that parses has a canonical text that parses to the same
 *     DLDataType, and whose canonical text is itself;
 *   - an accepted text uses only the grammar's characters;
 *   - a rejected text gets -1, a ValueError naming PFDataTypeFromString,
 *     and leaves the output untouched;
 *   - any DLDataType with lanes has a canonical text of fewer than
 *     PF_DTYPE_STRING_MAX bytes that parses back to it; with 0 lanes, a
 *     ValueError;
 *   - nothing crashes or leaks. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      fprintf(stderr, "fuzz_dtype: check failed: %s\n  ", #cond); \
      fprintf(stderr, __VA_ARGS__);                               \
      fprintf(stderr, "\n");                                      \
      abort();                                                    \
    }                                                             \
  } while (0)

static int same(DLDataType a, DLDataType b) {
  return a.code == b.code && a.bits == b.bits && a.lanes == b.lanes;
}

/* The canonical text of dt, which must parse back to dt. */
static void check_round_trip(DLDataType dt, char* text) {
  CHECK(PFDataTypeToString(dt, text, PF_DTYPE_STRING_MAX) == 0, "{%u,%u,%u}: %s", dt.code, dt.bits,
        dt.lanes, PFGetLastError());
  CHECK(strlen(text) < PF_DTYPE_STRING_MAX, "too long: %s", text);
  DLDataType back = {0, 0, 0};
  CHECK(PFDataTypeFromString(text, &back) == 0, "'%s' does not parse: %s", text, PFGetLastError());
  CHECK(same(back, dt), "'%s' parses to {%u,%u,%u}, not {%u,%u,%u}", text, back.code, back.bits,
        back.lanes, dt.code, dt.bits, dt.lanes);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 256) return 0;
  char* text = malloc(size + 1);
  if (text == NULL) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  char canon[PF_DTYPE_STRING_MAX], canon2[PF_DTYPE_STRING_MAX];

  DLDataType dt = {7, 7, 7};
  int rc = PFDataTypeFromString(text, &dt);
  if (rc == 0) {
    CHECK(strspn(text, "abcdefghijklmnopqrstuvwxyz0123456789_[]") == strlen(text), "accepted '%s'",
          text);
    CHECK(dt.lanes >= 1, "'%s' has 0 lanes", text);
    check_round_trip(dt, canon);
    check_round_trip(dt, canon2);
    DLDataType again = {0, 0, 0};
    CHECK(PFDataTypeFromString(canon, &again) == 0 && same(again, dt), "'%s'", canon);
  } else {
    CHECK(rc == -1, "'%s': status %d", text, rc);
    CHECK(strcmp(PFErrorGetKind(), kPFErrValueError) == 0, "'%s': %s", text, PFGetLastError());
    CHECK(strstr(PFErrorGetMessage(), "PFDataTypeFromString") != NULL, "'%s': %s", text,
          PFErrorGetMessage());
    CHECK(dt.code == 7 && dt.bits == 7 && dt.lanes == 7, "'%s': output written", text);
  }

  if (size >= 4) {
    DLDataType raw = {data[0], data[1], (uint16_t)(data[2] | data[3] << 8)};
    if (raw.lanes == 0) {
      CHECK(PFDataTypeToString(raw, canon, sizeof(canon)) == -1 &&
                strcmp(PFErrorGetKind(), kPFErrValueError) == 0,
            "0 lanes: %s", PFGetLastError());
    } else {
      check_round_trip(raw, canon);
    }
  }
  free(text);
  return 0;
}
