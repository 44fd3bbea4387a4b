/* The shape of a signature text that PFSignatureParse refuses, and the
 * check of one, for the tests of the signature grammar (test_signature_*.c),
 * each of which lists the texts of its own concern. Include after cmocka.h
 * and support/pf_test.h. */
#ifndef PACKEDFUNC_TESTS_SUPPORT_PF_SIGNATURE_REFUSAL_H_
#define PACKEDFUNC_TESTS_SUPPORT_PF_SIGNATURE_REFUSAL_H_

#include <stddef.h>
#include <stdint.h>

#include "packedfunc/c_api.h"

/* A text, where its error is ("at position N") and what the message says. */
typedef struct {
  const char* text;
  const char* pos;
  const char* why;
} PFTestRefusal;

/* Asserts that PFSignatureParse refuses `c->text` with a ValueError that
 * names itself, the position and the reason, and leaves its output
 * untouched. `index` names the case in a failure's message. */
#define pf_test_check_refusal(c, index) pf_test_check_refusal_((c), (index), __FILE__, __LINE__)

static inline void pf_test_check_refusal_(const PFTestRefusal* c, size_t index, const char* file,
                                          int line) {
  PFSignatureInfo* const untouched = (PFSignatureInfo*)(uintptr_t)1;
  PFSignatureInfo* info = untouched;
  int rc = PFSignatureParse(c->text, &info);
  if (rc != -1 || strstr(PFErrorGetMessage(), c->pos) == NULL ||
      strstr(PFErrorGetMessage(), c->why) == NULL) {
    print_error("case %zu (%s): rc %d, %s\n", index, c->text, rc, PFGetLastError());
    _fail(file, line);
  }
  pf_test_check_error_(
      rc, (const char* const[]){kPFErrValueError, "PFSignatureParse: bad signature", NULL}, file,
      line);
  if (info != untouched) {
    print_error("case %zu (%s): PFSignatureParse wrote its output on failure\n", index, c->text);
    _fail(file, line);
  }
}

#endif
