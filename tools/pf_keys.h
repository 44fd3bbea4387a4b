/* pf's CURVE key files: the secret key of `pf serve --curve-secret-key`
 * and `pf --client-secret-key`, and the public keys of
 * `pf serve --authorized-keys`.
 *
 * Part of the pf command (tools/pf.c), not of the library. The files come
 * from the user and are read as untrusted text: anything but the expected
 * form is refused with a message that names the file (and the line), never
 * a crash or a leak. Errors are printed to `err` as pf prints its own
 * ("pf: ValueError: ...", one line) and the functions return -1; they
 * record no packedfunc error. None of this keeps state: every function is
 * safe to call from any thread. */
#ifndef PF_TOOLS_PF_KEYS_H_
#define PF_TOOLS_PF_KEYS_H_

#include <stdio.h>

#include "packedfunc/rpc.h"

/* A key file is small: a larger one is refused unread. */
#define PF_KEY_FILE_MAX 4096
/* The most public keys an authorized-keys file may hold. */
#define PF_MAX_AUTHORIZED_KEYS 1024

/* Reads the CURVE key in the file at `path`, which must hold exactly one
 * key (40 characters of Z85), optionally followed by whitespace, and
 * nothing else. On success `key` holds it, NUL-terminated. Whether the 40
 * characters are valid Z85 is pf_key_check's to ask. Returns 0 or -1. */
int pf_key_read_file(FILE* err, const char* path, char key[PF_RPC_KEY_SIZE]);

/* The public keys of an authorized-keys file, with the line of each. Owns
 * its arrays: pf_key_list_free releases them (and a zeroed list is empty). */
typedef struct {
  char (*keys)[PF_RPC_KEY_SIZE];
  const char** ptrs; /* ptrs[i] == keys[i], for PFRPCServerOptions.authorized_keys */
  int* lines;
  int count;
} pf_key_list;

/* Reads the CURVE public keys of the file at `path` into *out: one per
 * line, each optionally followed by whitespace; blank lines and lines that
 * begin with '#' are skipped. A line that is anything else, more than
 * PF_MAX_AUTHORIZED_KEYS keys or none at all are refused, naming the file
 * and the line. Returns 0, or -1 with *out empty. */
int pf_key_read_authorized(FILE* err, const char* path, pf_key_list* out);

void pf_key_list_free(pf_key_list* l);

/* Whether `key`, read from `path` (at `line`, when not 0), is valid Z85,
 * asked of `public_key` (PFRPCCurvePublicKey, which the caller loaded):
 * it decodes the key first and records a ValueError when it cannot.
 * Returns -1 (with the message printed) for such a key, else 0: other
 * errors (no CURVE support) are left to the call that needs the key. */
int pf_key_check(FILE* err, int (*public_key)(const char*, char*), const char* path, int line,
                 const char* key);

#endif /* PF_TOOLS_PF_KEYS_H_ */
