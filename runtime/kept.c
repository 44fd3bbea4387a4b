/* Values that the mutable containers (List, Dict) keep, one allocation per
 * str or bytes, and the copies that their readers return in per-thread
 * storage. The rules are in container.h. */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np */
#include <pthread.h>

#include "internal.h"

int pf_kept_lock_init(pthread_rwlock_t* lock, const char* where) {
  pthread_rwlockattr_t attr;
  if (pthread_rwlockattr_init(&attr) != 0) return pf_oom(where);
#if defined(__GLIBC__)
  /* A writer waits for the readers in the lock, and new readers wait for
   * it: readers that keep overlapping cannot starve writers. */
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
  int rc = pthread_rwlock_init(lock, &attr);
  pthread_rwlockattr_destroy(&attr);
  return rc == 0 ? 0 : pf_oom(where);
}

int pf_kept_check(const char* where, const char* what, int64_t i, int code, const PFValue* v) {
  if (pf_check_value(where, what, i, code, v) != 0) return -1;
  if (code == kPFDLTensorHandle)
    return PF_ERROR(kPFErrTypeError,
                    "%s: %s %lld has type code tensor, a DLTensor* that is only borrowed for a "
                    "call, which a container cannot keep (store a tensor object instead)",
                    where, what, (long long)i);
  return 0;
}

int pf_kept_make(const char* where, int code, const PFValue* in, PFValue* out) {
  if (code == kPFStr) {
    size_t n = strlen(in->v_str) + 1;
    char* s = pf_malloc(n);
    if (s == NULL) return pf_oom(where);
    memcpy(s, in->v_str, n);
    out->v_str = s;
  } else if (code == kPFBytes) {
    /* pf_check_value bounded the size by PF_MAX_OBJECT_SIZE. */
    const PFByteArray* src = in->v_handle;
    if (src->size > PF_MAX_OBJECT_SIZE - sizeof(PFByteArray)) return pf_oom(where);
    PFByteArray* b = pf_malloc(sizeof(PFByteArray) + src->size);
    if (b == NULL) return pf_oom(where);
    b->data = (const char*)(b + 1);
    b->size = src->size;
    if (src->size) memcpy(b + 1, src->data, src->size);
    out->v_handle = b;
  } else {
    *out = *in;
    if (pf_code_is_handle(code)) pf_object_retain(in->v_handle);
  }
  return 0;
}

void pf_kept_drop(int code, PFValue* v) {
  if (code == kPFStr || code == kPFBytes) pf_free(v->v_handle);
  else if (pf_code_is_handle(code)) pf_object_release(v->v_handle);
}

/* The calling thread's read storage, grown to at least n bytes; its old
 * contents are gone. NULL with a MemoryError naming `where`. */
static void* read_room(const char* where, size_t n) {
  pf_thread_state* ts = pf_tls();
  if (n > ts->read_cap) {
    size_t cap = ts->read_cap ? ts->read_cap : 64;
    while (cap < n && cap <= PF_MAX_OBJECT_SIZE / 2) cap *= 2;
    if (cap < n) cap = n;
    void* p = pf_malloc(cap);
    if (p == NULL) {
      pf_oom(where);
      return NULL;
    }
    pf_free(ts->read_buf);
    ts->read_buf = p;
    ts->read_cap = cap;
  }
  return ts->read_buf;
}

int pf_kept_read(const char* where, int code, const PFValue* kept, PFValue* out) {
  if (code == kPFStr) {
    size_t n = strlen(kept->v_str) + 1;
    char* s = read_room(where, n);
    if (s == NULL) return -1;
    memcpy(s, kept->v_str, n);
    out->v_str = s;
  } else if (code == kPFBytes) {
    const PFByteArray* src = kept->v_handle;
    PFByteArray* b = read_room(where, sizeof(PFByteArray) + src->size);
    if (b == NULL) return -1;
    b->data = (const char*)(b + 1);
    b->size = src->size;
    if (src->size) memcpy(b + 1, src->data, src->size);
    out->v_handle = b;
  } else {
    *out = *kept;
    if (pf_code_is_handle(code)) pf_object_retain(kept->v_handle);
  }
  return 0;
}

int pf_kept_check_count(const char* where, const char* arg, int64_t n) {
  if (n < 0)
    return PF_ERROR(kPFErrValueError, "%s: argument '%s' is negative (%lld)", where, arg,
                    (long long)n);
  return 0;
}

int pf_kept_null_with_count(const char* where, const char* arg, const char* count, int64_t n) {
  return PF_ERROR(kPFErrTypeError, "%s: argument '%s' is NULL with %s %lld", where, arg, count,
                  (long long)n);
}

int pf_snapshot_take(pf_snapshots* s, const char* where, PFObjectHandle h, uint32_t type,
                     int64_t* n, const PFValue** items, const int32_t** codes) {
  if (s->n == s->cap) {
    size_t cap = s->cap ? 2 * s->cap : 8;
    PFObjectHandle* held = pf_realloc(s->held, cap * sizeof(*held));
    if (held == NULL) return pf_oom(where);
    s->held = held;
    s->cap = cap;
  }
  PFObjectHandle snap = NULL;
  int rc = type == kPFObjectList ? PFListToArray(h, 0, INT64_MAX, &snap) : PFDictToArray(h, &snap);
  if (rc != 0) return -1;
  s->held[s->n++] = snap;
  pf_array_view(snap, n, items, codes);
  return 0;
}

void pf_snapshots_release(pf_snapshots* s) {
  if (s->n) {
    pf_saved_error e;
    pf_error_save(&e);
    for (size_t i = 0; i < s->n; ++i) pf_object_release(s->held[i]);
    pf_error_restore(&e);
  }
  pf_free(s->held);
  *s = (pf_snapshots){0};
}
