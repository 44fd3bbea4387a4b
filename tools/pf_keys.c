/* pf's CURVE key files (see pf_keys.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"
#include "pf_keys.h"

static int is_blank(int c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

int pf_key_read_file(FILE* err, const char* path, char key[PF_RPC_KEY_SIZE]) {
  FILE* f = fopen(path, "rb");
  char buf[PF_KEY_FILE_MAX + 1];
  size_t n = f ? fread(buf, 1, sizeof buf, f) : 0;
  if (f == NULL || ferror(f)) {
    fprintf(err, "pf: ValueError: cannot read the key file '%s': %s\n", path, strerror(errno));
    if (f) fclose(f);
    return -1;
  }
  fclose(f);
  size_t len = 0, rest = 0;
  while (len < n && !is_blank((unsigned char)buf[len])) ++len;
  for (rest = len; rest < n && is_blank((unsigned char)buf[rest]);) ++rest;
  char why[64];
  if (n > PF_KEY_FILE_MAX) snprintf(why, sizeof why, "it is larger than %d bytes", PF_KEY_FILE_MAX);
  else if (memchr(buf, '\0', n) != NULL) snprintf(why, sizeof why, "it holds a NUL byte");
  else if (n == 0) snprintf(why, sizeof why, "it is empty");
  else if (len == 0)
    snprintf(why, sizeof why, rest == n ? "it holds only whitespace" : "it begins with whitespace");
  else if (len != PF_RPC_KEY_SIZE - 1) snprintf(why, sizeof why, "its key has %zu characters", len);
  else if (rest < n) snprintf(why, sizeof why, "more follows the key (at byte %zu)", rest + 1);
  else why[0] = '\0';
  if (why[0] != '\0') {
    fprintf(err,
            "pf: ValueError: the key file '%s' must hold one CURVE key (40 characters of Z85) "
            "and nothing else but trailing whitespace: %s\n",
            path, why);
    return -1;
  }
  memcpy(key, buf, PF_RPC_KEY_SIZE - 1);
  key[PF_RPC_KEY_SIZE - 1] = '\0';
  return 0;
}

void pf_key_list_free(pf_key_list* l) {
  free(l->keys);
  free(l->ptrs);
  free(l->lines);
  memset(l, 0, sizeof *l);
}

/* Reads a line of f without its '\n', keeping at most cap - 1 characters
 * in buf; *len is its length without trailing whitespace, and *nul tells
 * whether it holds a NUL byte. Returns 0, or -1 at the end of the file. */
static int read_line(FILE* f, char* buf, size_t cap, size_t* len, int* nul) {
  size_t n = 0;
  int c = EOF;
  *len = 0;
  *nul = 0;
  while ((c = getc(f)) != EOF && c != '\n') {
    if (c == '\0') *nul = 1;
    if (n < cap - 1) buf[n] = (char)c;
    ++n;
    if (!is_blank(c)) *len = n;
  }
  buf[n < cap - 1 ? n : cap - 1] = '\0';
  return c == EOF && n == 0 ? -1 : 0;
}

int pf_key_read_authorized(FILE* err, const char* path, pf_key_list* out) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    fprintf(err, "pf: ValueError: cannot read the authorized keys '%s': %s\n", path,
            strerror(errno));
    return -1;
  }
  out->keys = calloc(PF_MAX_AUTHORIZED_KEYS, sizeof *out->keys);
  out->ptrs = calloc(PF_MAX_AUTHORIZED_KEYS, sizeof *out->ptrs);
  out->lines = calloc(PF_MAX_AUTHORIZED_KEYS, sizeof *out->lines);
  if (out->keys == NULL || out->ptrs == NULL || out->lines == NULL) {
    fclose(f);
    pf_key_list_free(out);
    fputs("pf: MemoryError: out of memory\n", err);
    return -1;
  }
  char line[PF_RPC_KEY_SIZE + 2];
  size_t len;
  int nul, lineno = 0;
  const char* why = NULL;
  while (why == NULL && read_line(f, line, sizeof line, &len, &nul) == 0) {
    ++lineno;
    if (!nul && (len == 0 || line[0] == '#')) continue;
    if (nul) why = "it holds a NUL byte";
    else if (len != PF_RPC_KEY_SIZE - 1 || strcspn(line, " \t\n\r\v\f") != len)
      why = "not one CURVE public key (40 characters of Z85, then only whitespace)";
    else if (out->count == PF_MAX_AUTHORIZED_KEYS)
      why = "more keys than " PF_STRINGIFY_(PF_MAX_AUTHORIZED_KEYS);
    else {
      memcpy(out->keys[out->count], line, PF_RPC_KEY_SIZE - 1);
      out->ptrs[out->count] = out->keys[out->count];
      out->lines[out->count++] = lineno;
    }
  }
  int failed = ferror(f);
  fclose(f);
  if (why != NULL || failed) {
    if (failed) fprintf(err, "pf: ValueError: cannot read the authorized keys '%s'\n", path);
    else
      fprintf(err, "pf: ValueError: the authorized-keys file '%s' line %d: %s\n", path, lineno,
              why);
    pf_key_list_free(out);
    return -1;
  }
  if (out->count == 0) {
    fprintf(err, "pf: ValueError: the authorized-keys file '%s' holds no key\n", path);
    pf_key_list_free(out);
    return -1;
  }
  return 0;
}

int pf_key_check(FILE* err, int (*public_key)(const char*, char*), const char* path, int line,
                 const char* key) {
  char pub[PF_RPC_KEY_SIZE];
  if (public_key(key, pub) == 0 || strcmp(PFErrorGetKind(), kPFErrValueError) != 0) return 0;
  if (line > 0)
    fprintf(err,
            "pf: ValueError: the authorized-keys file '%s' line %d: the key is not valid Z85\n",
            path, line);
  else fprintf(err, "pf: ValueError: the key file '%s': the key is not valid Z85\n", path);
  return -1;
}
