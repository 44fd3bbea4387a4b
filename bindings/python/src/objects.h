/*
 * packedfunc._cext, objects.c: what cext.c needs of it.
 *
 * ObjectBase is the compiled base of packedfunc.Object: it holds the
 * handle and the type code that an Object passes to C with, so that a call
 * reads them without an attribute lookup. Field and Method are the
 * descriptors of the classes of registered object types. All three are
 * added to the module by cext.c's type table.
 */
#ifndef PACKEDFUNC_CEXT_OBJECTS_H_
#define PACKEDFUNC_CEXT_OBJECTS_H_

#include <Python.h>
#include <string.h>

#include "packedfunc/c_api.h"

/* An Object's fields that C reads (the rest are the package's slots). */
typedef struct {
  PyObject_HEAD
  unsigned long long handle;   /* PFObjectHandle; 0 once released */
  int code;                    /* the type code it passes to C with */
  unsigned int type_index;     /* its PFObjectTypeIndex */
  PyObject* loan;              /* what the collector was lent (see _holds), or NULL */
  char* data;                  /* the struct of a registered type's instance, else NULL */
  int in_map;                  /* 1 while the identity map holds it */
  PyObject* weakrefs;          /* its weak references (ObjectBase's, for every subtype) */
  unsigned int pins;           /* operations in progress that took it (pf_object_pin) */
  unsigned long long deferred; /* its handle, released by hand while pinned, until the last unpin */
  PyThreadState* owner;        /* the thread whose call holds this instance (pf_instances_lock) */
  unsigned int depth;          /* how many of that thread's calls hold it */
} pf_cext_object;

extern PyTypeObject pf_object_base_type;
extern PyTypeObject pf_field_type;
extern PyTypeObject pf_method_type;

/* For the compiled subtypes of ObjectBase (containers.c), which embed
 * pf_cext_object first: ObjectBase's traverse and clear of its own fields,
 * and its dealloc around a subtype's clear (`clear` also clears the
 * ObjectBase fields, by calling pf_object_clear): it releases the handle
 * if the finalizer did not (see pf_object_release), drops the weak
 * references, clears and frees. */
int pf_object_traverse(PyObject* self, visitproc visit, void* arg);
int pf_object_clear(PyObject* self);
void pf_object_dealloc_as(PyObject* self, inquiry clear);

/* An operation that took an Object (an ObjectBase) holds it until it ends,
 * whatever user code runs meanwhile (a hook, __index__, another thread):
 * it pins the Object before anything else runs, and unpins it at its end.
 * A release while pinned (__del__ by hand) marks the Object released at
 * once, and the last unpin releases its handle. Both with the GIL held. */
static inline void pf_object_pin(PyObject* o) { ++((pf_cext_object*)o)->pins; }
void pf_object_release_deferred(pf_cext_object* o);
static inline void pf_object_unpin(PyObject* self) {
  pf_cext_object* o = (pf_cext_object*)self;
  if (--o->pins == 0 && o->deferred != 0) pf_object_release_deferred(o);
}

/* A call that passes instances of registered types to C holds each of
 * them for its thread while C runs: a method, or a field access from
 * another thread, waits until it is done (object_type.h leaves that
 * serialization to hosts). pf_instances_lock waits, with the GIL released,
 * until no other thread holds any instance among objs[0 .. n) (all at
 * once, so that two calls cannot each hold one that the other waits
 * for), then holds them; Objects of other types are skipped. A thread's
 * own calls (a callback of the method) pass. objs are Objects (ObjectBase
 * or a subtype); both need the GIL. Inline: every method call holds its
 * instance, and the common case is a few loads and stores. */
static inline int pf_is_instance(const pf_cext_object* o) {
  return o->type_index >= kPFObjectTypeRegisteredBegin;
}

static inline int pf_held_elsewhere(PyObject* const* objs, Py_ssize_t n, const PyThreadState* me) {
  for (Py_ssize_t i = 0; i < n; ++i) {
    const pf_cext_object* o = (const pf_cext_object*)objs[i];
    if (pf_is_instance(o) && o->owner != NULL && o->owner != me) return 1;
  }
  return 0;
}

/* Waits until pf_held_elsewhere is false (out of line: the rare case). */
void pf_instances_wait(PyObject* const* objs, Py_ssize_t n, const PyThreadState* me);
/* Wakes the waiters, if any (after an instance was let go). */
void pf_instances_wake(void);

static inline void pf_instances_lock(PyObject* const* objs, Py_ssize_t n) {
  PyThreadState* me = PyThreadState_Get();
  if (pf_held_elsewhere(objs, n, me)) pf_instances_wait(objs, n, me);
  for (Py_ssize_t i = 0; i < n; ++i) {
    pf_cext_object* o = (pf_cext_object*)objs[i];
    if (!pf_is_instance(o)) continue;
    o->owner = me;
    ++o->depth;
  }
}

static inline void pf_instances_unlock(PyObject* const* objs, Py_ssize_t n) {
  int freed = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    pf_cext_object* o = (pf_cext_object*)objs[i];
    if (pf_is_instance(o) && --o->depth == 0) {
      o->owner = NULL;
      freed = 1;
    }
  }
  if (freed) pf_instances_wake();
}

/* The Python value of a PFValue of a plain type, str or bytes: 1 with
 * *out set (NULL with an exception on failure), or 0 for any other code,
 * which the caller converts itself. One place for what every reader of a
 * value (fields, results, container items) does alike. */
static inline int pf_simple_value(const PFValue* v, int code, PyObject** out) {
  switch (code) {
    case kPFInt:
      *out = PyLong_FromLongLong(v->v_int64);
      return 1;
    case kPFFloat:
      *out = PyFloat_FromDouble(v->v_float64);
      return 1;
    case kPFBool:
      *out = PyBool_FromLong(v->v_int64 != 0);
      return 1;
    case kPFNull:
      *out = Py_NewRef(Py_None);
      return 1;
    case kPFStr:
      *out = PyUnicode_DecodeUTF8(v->v_str, (Py_ssize_t)strlen(v->v_str), "surrogateescape");
      return 1;
    case kPFBytes: {
      const PFByteArray* ba = (const PFByteArray*)v->v_handle;
      *out = PyBytes_FromStringAndSize(ba->size ? ba->data : "", (Py_ssize_t)ba->size);
      return 1;
    }
    default:
      return 0;
  }
}

#endif /* PACKEDFUNC_CEXT_OBJECTS_H_ */
