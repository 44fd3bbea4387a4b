/* Private to the runtime: a signature as the grammar reads it, shared by
 * runtime/signature.c (the grammar) and runtime/signature_info.c (the
 * parsed signature as data). */
#ifndef PACKEDFUNC_RUNTIME_SIGNATURE_H_
#define PACKEDFUNC_RUNTIME_SIGNATURE_H_

#include <locale.h>

#include "object_type.h"

/* What a default's literal is (signature.h's LITERAL). */
typedef enum {
  pf_lit_int,
  pf_lit_float,
  pf_lit_true,
  pf_lit_false,
  pf_lit_null,
  pf_lit_str,
  pf_lit_bytes
} pf_lit_kind;

/* One parameter as the text gives it; positions index the text. */
typedef struct {
  int t;
  const struct pf_type* obj;
  pf_tc tc;
  size_t type_at;           /* where the type's text starts */
  size_t name_at, name_len; /* name_len 0: unnamed */
  int has_default;
  size_t default_at, default_end; /* the literal's text */
  pf_lit_kind lit;
  size_t str_at, str_len; /* a STRING's contents between the quotes */
  size_t dec_len;         /* ... and their length decoded */
  int dcode;              /* the default converted: its code and value (a str
                             or bytes value is laid out with the signature) */
  PFValue dval;
  int et; /* the root of its type tree in pf_parsed_sig.nodes; -1: none */
} pf_parsed_param;

typedef struct {
  pf_parsed_param ret;
  pf_parsed_param p[PF_TYPED_MAX_ARGS];
  int n;
  int named;
  pf_tnode nodes[PF_SIG_NODES_MAX]; /* the type trees, nnodes of them */
  int nnodes;
} pf_parsed_sig;

/* Reads `text` (the whole grammar) into *ps, recording nothing on
 * success: the ValueError of pf_sig_parse on failure. */
PF_HIDDEN int pf_sig_read(const char* where, const char* text, pf_parsed_sig* ps);
/* The types a call converts by, from what was read. */
PF_HIDDEN void pf_sig_of(const pf_parsed_sig* ps, pf_sig* out);
/* The next decoded byte of a STRING literal's contents s[*i ..] (checked
 * when read); advances *i. */
PF_HIDDEN unsigned char pf_sig_next_byte(const char* s, size_t* i);
/* Decodes a STRING's contents s[0 .. len) into out (its decoded length). */
PF_HIDDEN void pf_sig_decode_string(const char* s, size_t len, char* out);
/* Floats are read and written in the C locale, whatever the process's
 * LC_NUMERIC is: enter returns the thread's locale to give back to leave
 * ((locale_t)0 when the C locale could not be had: the current one stays). */
PF_HIDDEN locale_t pf_c_locale_enter(void);
PF_HIDDEN void pf_c_locale_leave(locale_t old);

#endif
