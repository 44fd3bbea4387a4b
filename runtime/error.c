/* Per-thread state: the last error and the return storage. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static _Thread_local pf_thread_state tls_state;
__thread pf_hot_state pf_hot __attribute__((tls_model("initial-exec")));
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;
static int tls_key_ok;

static void state_free(void* p) {
  pf_thread_state* s = p;
  if (!s->msg_static) pf_free(s->msg);
  pf_free(s->tb);
  pf_free(s->full);
  for (int i = 0; i < s->ret_cap; ++i) {
    if (s->ret[i]) pf_free(s->ret[i]->data);
    pf_free(s->ret[i]);
  }
  pf_free(s->ret);
  pf_free(s->read_buf);
  memset(s, 0, sizeof(*s));
}

static void make_key(void) { tls_key_ok = pthread_key_create(&tls_key, state_free) == 0; }

pf_thread_state* pf_tls(void) {
  pf_thread_state* s = &tls_state;
  if (!s->initialized) {
    s->initialized = 1;
    s->msg = "";
    s->msg_static = 1;
    /* The key's destructor frees this thread's buffers when it exits. */
    pthread_once(&tls_once, make_key);
    if (tls_key_ok) pthread_setspecific(tls_key, s);
  }
  return s;
}

/* `kind` may be s->kind itself (a host re-raising the current error with
 * PFErrorSet(PFErrorGetKind(), ...)), so copy with memmove, not snprintf. */
static void set_kind(pf_thread_state* s, const char* kind) {
  size_t n = strnlen(kind, sizeof(s->kind) - 1);
  memmove(s->kind, kind, n);
  s->kind[n] = '\0';
  pf_hot.has_error = n != 0;
}

/* In both setters the kind is copied first: it may point into the message
 * that they free (PFErrorSet(PFErrorGetMessage(), ...)). */
static void set_msg_static(pf_thread_state* s, const char* kind, const char* msg) {
  set_kind(s, kind);
  if (!s->msg_static) pf_free(s->msg);
  s->msg = (char*)msg;
  s->msg_static = 1;
  s->tb_len = 0;
  if (s->tb) s->tb[0] = '\0';
  pf_hot.err_gen++;
}

int(pf_oom)(const char* where) {
  pf_thread_state* s = pf_tls();
  /* Formatted into the thread's own buffer: no allocation. (A message that
   * pf_error_save moved away still points there; a later pf_oom on the
   * thread rewrites it with another "out of memory" text.) */
  snprintf(s->oom_msg, sizeof(s->oom_msg), "%.100s: out of memory", where ? where : "packedfunc");
  set_msg_static(s, kPFErrMemoryError, s->oom_msg);
  return -1;
}

int(pf_err_null_arg)(const char* fn, const char* arg) {
  return PFErrorSetFormat(kPFErrTypeError, "%s: argument '%s' is NULL", fn, arg);
}

int(pf_err_bad_object)(const char* fn, const char* arg, const void* h, uint32_t type) {
  if (h == NULL) return (pf_err_null_arg)(fn, arg);
  const char* name = type ? PFObjectTypeName(type) : "object";
  return PFErrorSetFormat(kPFErrTypeError, "%s: argument '%s' is not a live %s handle", fn, arg,
                          name ? name : "object");
}

int pf_error_static(const char* kind, const char* msg) {
  set_msg_static(pf_tls(), kind, msg);
  return -1;
}

static int valid_kind(const char* k) {
  size_t n = 0;
  if (k == NULL || !((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_')) return 0;
  for (; k[n]; ++n) {
    char c = k[n];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.'))
      return 0;
  }
  return n < PF_ERROR_KIND_MAX;
}

/* Takes ownership of `msg` (allocated), or records OOM when it is NULL. */
static void set_owned(pf_thread_state* s, const char* kind, char* msg) {
  if (msg == NULL) {
    set_msg_static(s, kPFErrMemoryError, "out of memory while recording an error");
    return;
  }
  set_kind(s, kind);
  if (!s->msg_static) pf_free(s->msg);
  s->msg = msg;
  s->msg_static = 0;
  s->tb_len = 0;
  if (s->tb) s->tb[0] = '\0';
  pf_hot.err_gen++;
}

static char* vformat(const char* fmt, va_list ap) {
  va_list ap2;
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap2);
  va_end(ap2);
  if (n < 0) return pf_strdup("(unformattable error message)");
  char* buf = pf_malloc((size_t)n + 1);
  if (buf != NULL) vsnprintf(buf, (size_t)n + 1, fmt, ap);
  return buf;
}

static char* format(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char* r = vformat(fmt, ap);
  va_end(ap);
  return r;
}

void PFErrorSet(const char* kind, const char* msg) {
  pf_thread_state* s = pf_tls();
  if (msg == NULL) msg = "";
  if (valid_kind(kind)) {
    set_owned(s, kind, pf_strdup(msg));
  } else {
    /* Keep what the caller meant, but only ever record a usable kind. */
    set_owned(s, kPFErrRuntimeError,
              format("(invalid error kind '%.80s') %s", kind ? kind : "(null)", msg));
  }
}

int PFErrorSetFormat(const char* kind, const char* fmt, ...) {
  if (fmt == NULL) {
    PFErrorSet(kind, NULL);
    return -1;
  }
  va_list ap;
  va_start(ap, fmt);
  char* msg = vformat(fmt, ap);
  va_end(ap);
  pf_thread_state* s = pf_tls();
  if (msg != NULL && !valid_kind(kind)) {
    char* m = format("(invalid error kind '%.80s') %s", kind ? kind : "(null)", msg);
    pf_free(msg);
    msg = m;
    kind = kPFErrRuntimeError;
  }
  set_owned(s, kind, msg);
  return -1;
}

void PFAPISetLastError(const char* msg) {
  PFErrorSet(kPFErrRuntimeError, msg ? msg : "unknown error");
}

/* `line` may point into the traceback itself (a host passing
 * PFErrorGetTraceback() on): it is then found again by its offset after the
 * buffer moves, and copied with memmove. */
void PFErrorAppendTraceback(const char* line) {
  if (line == NULL) return;
  pf_thread_state* s = pf_tls();
  size_t n = strlen(line);
  int inside = s->tb != NULL && (uintptr_t)line >= (uintptr_t)s->tb &&
               (uintptr_t)line < (uintptr_t)s->tb + s->tb_cap;
  size_t off = inside ? (size_t)((uintptr_t)line - (uintptr_t)s->tb) : 0;
  if (n > PF_MAX_OBJECT_SIZE - 2 - s->tb_len) return; /* cannot be stored */
  size_t need = s->tb_len + n + 2;                    /* line, '\n' when not first, NUL */
  if (need > s->tb_cap) {
    size_t cap = s->tb_cap ? s->tb_cap : 128;
    while (cap < need) cap = cap <= PF_MAX_OBJECT_SIZE / 2 ? cap * 2 : need;
    char* tb = pf_realloc(s->tb, cap);
    if (tb == NULL) return; /* keep the error itself; lose only this line */
    s->tb = tb;
    s->tb_cap = cap;
  }
  if (inside) line = s->tb + off; /* its bytes end at or before tb_len */
  if (s->tb_len > 0) s->tb[s->tb_len++] = '\n';
  memmove(s->tb + s->tb_len, line, n);
  s->tb[s->tb_len + n] = '\0';
  s->tb_len += n;
}

/* No error: answered from the initial-exec block, without pf_tls. */
const char* PFErrorGetKind(void) { return pf_hot.has_error ? pf_tls()->kind : ""; }
const char* PFErrorGetMessage(void) { return pf_tls()->msg; }
const char* PFErrorGetTraceback(void) {
  pf_thread_state* s = pf_tls();
  return s->tb_len ? s->tb : "";
}

void PFErrorClear(void) {
  pf_thread_state* s = pf_tls();
  set_msg_static(s, "", "");
}

const char* PFGetLastError(void) {
  pf_thread_state* s = pf_tls();
  if (s->kind[0] == '\0') return "";
  char* full =
      s->tb_len ? format("%s: %s\n%s", s->kind, s->msg, s->tb) : format("%s: %s", s->kind, s->msg);
  if (full == NULL) return s->msg; /* out of memory: the message alone */
  pf_free(s->full);
  s->full = full;
  return full;
}

/* ---- keeping an error across code that may record others ---- */

void pf_error_save(pf_saved_error* e) {
  pf_thread_state* s = pf_tls();
  memcpy(e->kind, s->kind, sizeof(e->kind));
  e->msg = s->msg;
  e->msg_static = s->msg_static;
  e->tb = s->tb;
  e->tb_len = s->tb_len;
  e->tb_cap = s->tb_cap;
  e->err_gen = pf_hot.err_gen;
  /* The thread goes on with no error and no traceback buffer. */
  s->kind[0] = '\0';
  pf_hot.has_error = 0;
  s->msg = "";
  s->msg_static = 1;
  s->tb = NULL;
  s->tb_len = s->tb_cap = 0;
}

void pf_error_restore(pf_saved_error* e) {
  pf_thread_state* s = pf_tls();
  if (!s->msg_static) pf_free(s->msg);
  pf_free(s->tb);
  memcpy(s->kind, e->kind, sizeof(s->kind));
  pf_hot.has_error = s->kind[0] != '\0';
  s->msg = e->msg;
  s->msg_static = e->msg_static;
  s->tb = e->tb;
  s->tb_len = e->tb_len;
  s->tb_cap = e->tb_cap;
  e->msg = NULL;
  e->tb = NULL;
  pf_hot.err_gen = e->err_gen; /* as if nothing had been recorded meanwhile */
}
