/*
 * packedfunc._cext, objects: the compiled base of packedfunc.Object, and the
 * descriptors of the classes that the package makes of registered object
 * types (packedfunc/_object_types.py).
 *
 * ObjectBase holds an Object's handle; its finalizer releases it (the
 * package's Object.__del__ with ctypes). An instance of a registered type is
 * also kept in the identity map (handle -> the one wrapper alive), so that
 * it comes back to Python as the same object, and keeps the address of its
 * struct (PFObjectGetData) for the fields read in place. Field reads and
 * writes a field through its handle (PFObjectGetField and
 * PFObjectSetField), or, for the plain numbers, in place: object_type.h
 * gives the struct's layout as the registering code's, with each field of
 * the C type that its type names at its offset. Method calls the method's
 * unbound Function with the instance first. What is not converted here goes
 * through the package's hooks (see _bind), so that both backends share one
 * encoder table and one set of errors.
 *
 * Everything runs with the GIL held, which orders the identity map and the
 * field accesses of Python threads; a release that may run a finalizer (an
 * object's last reference) releases the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cext.h"
#include "packedfunc/c_api.h"

/* The API version whose slots this file uses (registered object types: 9). */
#define PF_OBJECTS_API_VERSION 9

static const PFApi* pf_oapi;

/* The package's functions (see _bind). */
static PyObject* pf_hook_decode; /* (address of a PFValue, code) -> value; owns its handle */
static PyObject* pf_hook_encode; /* (value, what, field type) -> (code, bits, keep) */
static PyObject* pf_hook_raise;  /* () -> raises the thread's packedfunc error */
static PyObject* pf_hook_track;  /* (wrapper) -> None: _holds.track */
static PyObject* pf_hook_failed; /* (Function) -> raises the error of its failed call */
static PyObject* pf_str_pf_type; /* "__pf_type__" */
/* Set at exit: from then on nothing is released (as the package's
 * Object.__del__ does after its exit handler). */
static int pf_exiting;

/* Raises the thread's packedfunc error through the package; NULL. */
static PyObject* pf_raise_last(void) {
  if (pf_hook_raise == NULL) {
    PyErr_SetString(PyExc_SystemError, "packedfunc: _cext.ObjectBase has no hooks set");
    return NULL;
  }
  PyObject* r = PyObject_CallNoArgs(pf_hook_raise);
  if (r != NULL) { /* the hook always raises; one that did not is a bug */
    Py_DECREF(r);
    PyErr_SetString(PyExc_SystemError, "packedfunc: a failed call raised no error");
  }
  return NULL;
}

/* Drops a reference without the GIL: it may be the last, and run a
 * finalizer that calls back into Python or waits for another thread. */
static void pf_free_released(void* handle) {
  Py_BEGIN_ALLOW_THREADS pf_oapi->ObjectFree(handle);
  Py_END_ALLOW_THREADS
}

/* ------------------------------------------------------------------------ */
/* The identity map                                                         */
/* ------------------------------------------------------------------------ */

/* handle -> its wrapper (borrowed: a wrapper leaves before it goes), for
 * instances of registered types. Open addressing with linear probing, a
 * power-of-two capacity at most three quarters full, and deletion by
 * backward shift (no tombstones). Used only with the GIL held. */
typedef struct {
  void* handle; /* NULL: empty */
  PyObject* obj;
} pf_live_slot;

static pf_live_slot* pf_live;
static size_t pf_live_cap, pf_live_len;

static size_t pf_live_hash(const void* handle) {
  uint64_t x = (uint64_t)(uintptr_t)handle;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

/* The slot of `handle`, or the empty slot where it would go. */
static pf_live_slot* pf_live_find(const void* handle) {
  size_t mask = pf_live_cap - 1, i = pf_live_hash(handle) & mask;
  while (pf_live[i].handle != NULL && pf_live[i].handle != handle) i = (i + 1) & mask;
  return &pf_live[i];
}

/* The wrapper alive for `handle`, borrowed, or NULL. */
static PyObject* pf_live_get(const void* handle) {
  return pf_live_cap == 0 ? NULL : pf_live_find(handle)->obj;
}

/* 0, or -1 with MemoryError. */
static int pf_live_put(void* handle, PyObject* obj) {
  if ((pf_live_len + 1) * 4 > pf_live_cap * 3) {
    size_t cap = pf_live_cap ? pf_live_cap * 2 : 64;
    pf_live_slot* old = pf_live;
    size_t old_cap = pf_live_cap;
    pf_live = PyMem_Calloc(cap, sizeof(pf_live_slot));
    if (pf_live == NULL) {
      pf_live = old;
      PyErr_NoMemory();
      return -1;
    }
    pf_live_cap = cap;
    for (size_t i = 0; i < old_cap; ++i)
      if (old[i].handle != NULL) *pf_live_find(old[i].handle) = old[i];
    PyMem_Free(old);
  }
  pf_live_slot* s = pf_live_find(handle);
  if (s->handle == NULL) ++pf_live_len;
  s->handle = handle;
  s->obj = obj;
  return 0;
}

/* Removes `handle` if `obj` is its wrapper. */
static void pf_live_remove(const void* handle, const PyObject* obj) {
  if (pf_live_cap == 0) return;
  pf_live_slot* s = pf_live_find(handle);
  if (s->handle == NULL || s->obj != obj) return;
  size_t mask = pf_live_cap - 1, i = (size_t)(s - pf_live), j = i;
  for (;;) { /* moves back each later entry of the run that may sit at i */
    j = (j + 1) & mask;
    if (pf_live[j].handle == NULL) break;
    size_t home = pf_live_hash(pf_live[j].handle) & mask;
    if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
      pf_live[i] = pf_live[j];
      i = j;
    }
  }
  pf_live[i].handle = NULL;
  pf_live[i].obj = NULL;
  --pf_live_len;
}

/* ------------------------------------------------------------------------ */
/* ObjectBase                                                               */
/* ------------------------------------------------------------------------ */

/* Takes `o` out of the identity map, if it is there (and still its entry). */
static void pf_forget(pf_cext_object* o, unsigned long long handle) {
  if (!o->in_map) return;
  o->in_map = 0;
  pf_live_remove((void*)(uintptr_t)handle, (PyObject*)o);
}

/* Releases the handle, then gives back what the collector was lent for
 * it. Keeps the caller's exception. */
static void pf_object_drop(pf_cext_object* o, unsigned long long handle) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  pf_free_released((void*)(uintptr_t)handle);
  /* After the release: the holds that it destroyed are dropped, the
   * others go back to C (as _holds.give_back). */
  PyObject* loan = o->loan;
  if (loan != NULL && loan != Py_None) {
    o->loan = NULL;
    PyObject* r = PyObject_CallMethod(loan, "give_back", NULL);
    if (r == NULL) PyErr_WriteUnraisable(loan);
    Py_XDECREF(r);
    Py_DECREF(loan);
  }
  PyErr_Restore(type, value, tb);
}

/* Releases the handle once (nothing after the exit handler ran): at once,
 * or, while an operation holds the Object (pinned), at its end. */
static void pf_object_release(pf_cext_object* o) {
  unsigned long long handle = o->handle;
  if (handle == 0 || pf_exiting) return;
  o->handle = 0;
  o->data = NULL;
  pf_forget(o, handle);
  if (o->pins != 0) {
    o->deferred = handle;
    return;
  }
  pf_object_drop(o, handle);
}

void pf_object_release_deferred(pf_cext_object* o) {
  unsigned long long handle = o->deferred;
  o->deferred = 0;
  if (!pf_exiting) pf_object_drop(o, handle);
}

/* ------------------------------------------------------------------------ */
/* Holding instances for a thread's call                                    */
/* ------------------------------------------------------------------------ */

/* A thread that waits sleeps on one condition for all instances: each
 * release that a waiter may be waiting for advances the generation. The
 * owners and the count of waiters change only with the GIL held; the
 * mutex is held for no more than a read or a wake-up, never with user
 * code, and never while waiting for the GIL. */
static pthread_mutex_t pf_hold_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pf_hold_cv = PTHREAD_COND_INITIALIZER;
static unsigned long pf_hold_gen;    /* under pf_hold_mu */
static unsigned int pf_hold_waiters; /* with the GIL */

void pf_instances_wait(PyObject* const* objs, Py_ssize_t n, const PyThreadState* me) {
  while (pf_held_elsewhere(objs, n, me)) {
    pthread_mutex_lock(&pf_hold_mu);
    unsigned long gen = pf_hold_gen;
    pthread_mutex_unlock(&pf_hold_mu);
    ++pf_hold_waiters;
    PyThreadState* ts = PyEval_SaveThread();
    pthread_mutex_lock(&pf_hold_mu);
    while (pf_hold_gen == gen) pthread_cond_wait(&pf_hold_cv, &pf_hold_mu);
    pthread_mutex_unlock(&pf_hold_mu);
    PyEval_RestoreThread(ts);
    --pf_hold_waiters;
  }
}

void pf_instances_wake(void) {
  if (pf_hold_waiters == 0) return;
  pthread_mutex_lock(&pf_hold_mu);
  ++pf_hold_gen;
  pthread_cond_broadcast(&pf_hold_cv);
  pthread_mutex_unlock(&pf_hold_mu);
}

static void pf_object_finalize(PyObject* self) { pf_object_release((pf_cext_object*)self); }

int pf_object_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(((pf_cext_object*)self)->loan);
  return 0;
}

int pf_object_clear(PyObject* self) {
  Py_CLEAR(((pf_cext_object*)self)->loan);
  return 0;
}

void pf_object_dealloc_as(PyObject* self, inquiry clear) {
  PyObject_GC_UnTrack(self);
  /* Released already, unless a finalizer that resurrected it ran before and
   * so ours will not run again. */
  pf_object_release((pf_cext_object*)self);
  if (((pf_cext_object*)self)->weakrefs != NULL) PyObject_ClearWeakRefs(self);
  clear(self);
  Py_TYPE(self)->tp_free(self);
}

static void pf_object_dealloc(PyObject* self) { pf_object_dealloc_as(self, pf_object_clear); }

/* The registered types whose instances are tracked for the collector
 * (_holds.track): those with handle fields, which the walk that finds the
 * holds a wrapper keeps alive (PFObjectFindOwnedHosts) follows. Others
 * reach no hold, ever, and cost no call. Set by _track_type, read with
 * the GIL held. */
static unsigned char pf_tracked_types[PF_OBJECT_TYPE_MAX_REGISTERED];

static int pf_type_tracked(unsigned int type_index) {
  unsigned int i = type_index - kPFObjectTypeRegisteredBegin;
  return i < PF_OBJECT_TYPE_MAX_REGISTERED && pf_tracked_types[i];
}

/* A new instance of cls (a subclass of ObjectBase) that takes over the
 * reference `handle`; with `data`, an instance of a registered type: it
 * goes into the identity map, and is tracked for the collector when its
 * type has handle fields. On failure the reference is released. */
static PyObject* pf_wrap(PyTypeObject* cls, void* handle, unsigned int type_index, int code,
                         char* data) {
  pf_cext_object* o = (pf_cext_object*)cls->tp_alloc(cls, 0);
  if (o == NULL) {
    pf_free_released(handle);
    return NULL;
  }
  o->handle = (uintptr_t)handle;
  o->code = code;
  o->type_index = type_index;
  o->data = data;
  if (data == NULL) return (PyObject*)o;
  if (pf_live_put(handle, (PyObject*)o) == 0) {
    o->in_map = 1;
    if (pf_hook_track == NULL || !pf_type_tracked(type_index)) return (PyObject*)o;
    PyObject* r = PyObject_CallOneArg(pf_hook_track, (PyObject*)o);
    Py_XDECREF(r);
    if (r != NULL) return (PyObject*)o;
  }
  Py_DECREF(o); /* releases the handle */
  return NULL;
}

/* The registered-type description of a class: its __pf_type__, a tuple
 * (type index, factory or None); NULL with a TypeError for a class that
 * is not of a registered type. */
static PyObject* pf_type_record(PyTypeObject* cls, unsigned int* type_index) {
  PyObject* rec = PyObject_GetAttr((PyObject*)cls, pf_str_pf_type);
  if (rec == NULL) {
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();
      PyErr_SetString(PyExc_TypeError, "packedfunc.Object cannot be created directly");
    }
    return NULL;
  }
  unsigned long ti = PyTuple_Check(rec) && PyTuple_GET_SIZE(rec) == 2
                         ? PyLong_AsUnsignedLong(PyTuple_GET_ITEM(rec, 0))
                         : (unsigned long)-1;
  if (ti == (unsigned long)-1 || ti > UINT32_MAX) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "packedfunc: %s.__pf_type__ is not a type record",
                   cls->tp_name);
    Py_DECREF(rec);
    return NULL;
  }
  *type_index = (unsigned int)ti;
  return rec;
}

/* ObjectBase.__new__: a new instance of a registered type's class. A zeroed
 * instance (PFObjectAlloc), which __init__ then initializes; or, for a type
 * whose __init__ is a static factory, what the factory returns. */
static PyObject* pf_object_new(PyTypeObject* cls, PyObject* args, PyObject* kwargs) {
  unsigned int ti = 0;
  PyObject* rec = pf_type_record(cls, &ti);
  if (rec == NULL) return NULL;
  PyObject* factory = PyTuple_GET_ITEM(rec, 1);
  if (factory != Py_None) {
    PyObject* made = PyObject_Call(factory, args, kwargs);
    if (made != NULL && !PyObject_TypeCheck(made, cls)) {
      PyErr_Format(PyExc_TypeError,
                   "packedfunc: cannot make a %s: the constructor of its type is a static "
                   "factory, whose objects come back as the class registered for their type "
                   "(here %s); register %s with packedfunc.register_object to have it",
                   cls->tp_name, Py_TYPE(made)->tp_name, cls->tp_name);
      Py_CLEAR(made);
    }
    Py_DECREF(rec);
    return made;
  }
  Py_DECREF(rec);
  void* handle = NULL;
  void* data = NULL;
  if (pf_oapi->ObjectAlloc(ti, &handle) != 0) return pf_raise_last();
  if (pf_oapi->ObjectGetData(handle, &data) != 0) { /* never: it is one */
    pf_free_released(handle);
    return pf_raise_last();
  }
  return pf_wrap(cls, handle, ti, kPFObjectHandle, data);
}

/* The handle argument of _adopt and _adopt_instance. */
static void* pf_handle_arg(PyObject* arg) {
  void* h = PyLong_AsVoidPtr(arg);
  if (h == NULL && !PyErr_Occurred())
    PyErr_SetString(PyExc_ValueError, "_cext.ObjectBase: NULL handle");
  return h;
}

static int pf_class_arg(PyObject* cls) {
  if (PyType_Check(cls) && PyType_IsSubtype((PyTypeObject*)cls, &pf_object_base_type)) return 0;
  PyErr_SetString(PyExc_TypeError, "_cext.ObjectBase: cls must subclass ObjectBase");
  return -1;
}

/* _adopt(cls, handle, type_index, code): a new cls instance that takes over
 * the reference `handle`, of an object that is not of a registered type. */
static PyObject* pf_object_adopt(PyObject* unused, PyObject* const* args, Py_ssize_t n) {
  (void)unused;
  if (n != 4) {
    PyErr_SetString(PyExc_TypeError, "_cext.ObjectBase._adopt(cls, handle, type_index, code)");
    return NULL;
  }
  if (pf_class_arg(args[0]) != 0) return NULL;
  void* handle = pf_handle_arg(args[1]);
  unsigned long ti = handle == NULL ? 0 : PyLong_AsUnsignedLong(args[2]);
  long code = PyErr_Occurred() ? 0 : PyLong_AsLong(args[3]);
  if (PyErr_Occurred()) return NULL;
  return pf_wrap((PyTypeObject*)args[0], handle, (unsigned int)ti, (int)code, NULL);
}

/* _adopt_instance(cls, handle, type_index): the Python object of an instance
 * of a registered type, taking over the reference `handle`: the wrapper
 * that is alive already (the reference is then dropped: that wrapper holds
 * one, so no finalizer runs), or a new cls instance. */
static PyObject* pf_object_adopt_instance(PyObject* unused, PyObject* const* args, Py_ssize_t n) {
  (void)unused;
  if (n != 3) {
    PyErr_SetString(PyExc_TypeError, "_cext.ObjectBase._adopt_instance(cls, handle, type_index)");
    return NULL;
  }
  if (pf_class_arg(args[0]) != 0) return NULL;
  void* handle = pf_handle_arg(args[1]);
  unsigned long ti = handle == NULL ? 0 : PyLong_AsUnsignedLong(args[2]);
  if (PyErr_Occurred()) return NULL;
  PyObject* alive = pf_live_get(handle);
  if (alive != NULL) {
    Py_INCREF(alive);
    pf_oapi->ObjectFree(handle);
    return alive;
  }
  void* data = NULL;
  if (pf_oapi->ObjectGetData(handle, &data) != 0) {
    pf_free_released(handle);
    return pf_raise_last();
  }
  return pf_wrap((PyTypeObject*)args[0], handle, (unsigned int)ti, kPFObjectHandle, data);
}

/* _live_count() -> how many instances of registered types have a wrapper. */
static PyObject* pf_object_live_count(PyObject* unused, PyObject* noargs) {
  (void)unused, (void)noargs;
  return PyLong_FromSize_t(pf_live_len);
}

/* _exiting(): the package's exit handler; nothing is released afterwards. */
static PyObject* pf_object_exiting(PyObject* unused, PyObject* noargs) {
  (void)unused, (void)noargs;
  pf_exiting = 1;
  Py_RETURN_NONE;
}

/* _bind(api_base_address): binds to the library that ctypes loaded. */
static PyObject* pf_object_bind(PyObject* unused, PyObject* arg) {
  (void)unused;
  void* addr = PyLong_AsVoidPtr(arg);
  if (addr == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_cext: NULL PFGetApiBase");
    return NULL;
  }
  const PFApiBase* (*get_base)(void) = NULL;
  memcpy(&get_base, &addr, sizeof addr);
  const PFApi* api = get_base()->GetApi(PF_OBJECTS_API_VERSION);
  if (api == NULL) {
    PyErr_Format(PyExc_ImportError, "packedfunc._cext: the library lacks API version %d",
                 PF_OBJECTS_API_VERSION);
    return NULL;
  }
  if (pf_str_pf_type == NULL &&
      (pf_str_pf_type = PyUnicode_InternFromString("__pf_type__")) == NULL)
    return NULL;
  pf_oapi = api;
  Py_RETURN_NONE;
}

/* _set_hooks(decode, encode, raise_error, track, call_failed): the
 * package's functions (see the top of this file), set once by
 * _object_types before it makes any instance of a registered type. */
static PyObject* pf_object_set_hooks(PyObject* unused, PyObject* const* args, Py_ssize_t n) {
  (void)unused;
  PyObject** hooks[] = {&pf_hook_decode, &pf_hook_encode, &pf_hook_raise, &pf_hook_track,
                        &pf_hook_failed};
  const Py_ssize_t count = (Py_ssize_t)(sizeof hooks / sizeof hooks[0]);
  if (n != count) {
    PyErr_SetString(PyExc_TypeError,
                    "_cext.ObjectBase._set_hooks(decode, encode, raise_error, track, "
                    "call_failed)");
    return NULL;
  }
  for (int i = 0; i < count; ++i)
    if (!PyCallable_Check(args[i])) {
      PyErr_SetString(PyExc_TypeError, "_cext.ObjectBase._set_hooks: the hooks must be callable");
      return NULL;
    }
  for (int i = 0; i < count; ++i) {
    Py_INCREF(args[i]);
    Py_XSETREF(*hooks[i], args[i]);
  }
  Py_RETURN_NONE;
}

static PyObject* pf_object_get_data(PyObject* self, void* closure) {
  (void)closure;
  return PyLong_FromVoidPtr(((pf_cext_object*)self)->data);
}

/* Objects compare and hash by their handle, as Functions do: two wrappers
 * of one C object are equal. */
static PyObject* pf_object_richcompare(PyObject* a, PyObject* b, int op) {
  if ((op != Py_EQ && op != Py_NE) || !PyObject_TypeCheck(b, &pf_object_base_type))
    Py_RETURN_NOTIMPLEMENTED;
  int same = ((pf_cext_object*)a)->handle == ((pf_cext_object*)b)->handle;
  return PyBool_FromLong(op == Py_EQ ? same : !same);
}

static Py_hash_t pf_object_hash(PyObject* self) {
  /* The handle's bits, rotated past the alignment's zeros, as CPython
   * hashes pointers. */
  unsigned long long h = ((pf_cext_object*)self)->handle;
  Py_hash_t x = (Py_hash_t)((h >> 4) | (h << 60));
  return x == -1 ? -2 : x;
}

static PyMemberDef pf_object_members[] = {
    {"_handle", T_ULONGLONG, offsetof(pf_cext_object, handle), 0,
     "the PFObjectHandle as an int; 0 once released"},
    {"_code", T_INT, offsetof(pf_cext_object, code), 0, "the type code it passes to C with"},
    {"type_index", T_UINT, offsetof(pf_cext_object, type_index), 0, "its PFObjectTypeIndex"},
    {"_loan", T_OBJECT, offsetof(pf_cext_object, loan), 0,
     "what the collector was lent for this collection (see _holds)"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef pf_object_getset[] = {
    {"_data", pf_object_get_data, NULL,
     "the address of a registered type's struct as an int; 0 otherwise, or once released", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyObject* pf_object_track_type(PyObject* unused, PyObject* arg) {
  (void)unused;
  unsigned long ti = PyLong_AsUnsignedLong(arg);
  if (ti == (unsigned long)-1 && PyErr_Occurred()) return NULL;
  if (ti < kPFObjectTypeRegisteredBegin ||
      ti - kPFObjectTypeRegisteredBegin >= PF_OBJECT_TYPE_MAX_REGISTERED) {
    PyErr_Format(PyExc_ValueError,
                 "_cext.ObjectBase._track_type: %lu is not a registered "
                 "type's index",
                 ti);
    return NULL;
  }
  pf_tracked_types[ti - kPFObjectTypeRegisteredBegin] = 1;
  Py_RETURN_NONE;
}

/* _lock_instances(objects) and _unlock_instances(objects): the package's
 * general call path holds the instances among its arguments as the fast
 * path does (pf_instances_lock). `objects` is a list. */
/* 0 when `arg` is a list of Objects; else -1 with a TypeError. */
static int pf_check_objects(PyObject* arg) {
  if (PyList_CheckExact(arg)) {
    Py_ssize_t i = 0;
    while (i < PyList_GET_SIZE(arg) &&
           PyObject_TypeCheck(PyList_GET_ITEM(arg, i), &pf_object_base_type))
      ++i;
    if (i == PyList_GET_SIZE(arg)) return 0;
  }
  PyErr_SetString(PyExc_TypeError, "_cext.ObjectBase: a list of Objects is needed");
  return -1;
}

static PyObject* pf_object_lock_instances(PyObject* unused, PyObject* arg) {
  (void)unused;
  if (pf_check_objects(arg) != 0) return NULL;
  pf_instances_lock(PySequence_Fast_ITEMS(arg), PyList_GET_SIZE(arg));
  Py_RETURN_NONE;
}

static PyObject* pf_object_unlock_instances(PyObject* unused, PyObject* arg) {
  (void)unused;
  if (pf_check_objects(arg) != 0) return NULL;
  pf_instances_unlock(PySequence_Fast_ITEMS(arg), PyList_GET_SIZE(arg));
  Py_RETURN_NONE;
}

static PyMethodDef pf_object_methods[] = {
    {"_bind", pf_object_bind, METH_O | METH_STATIC, "_bind(api_base_address)"},
    {"_set_hooks", (PyCFunction)(void (*)(void))pf_object_set_hooks, METH_FASTCALL | METH_STATIC,
     "_set_hooks(decode, encode, raise_error, track, call_failed)"},
    {"_track_type", pf_object_track_type, METH_O | METH_STATIC,
     "_track_type(type_index): its instances are tracked for the collector"},
    {"_adopt", (PyCFunction)(void (*)(void))pf_object_adopt, METH_FASTCALL | METH_STATIC,
     "_adopt(cls, handle, type_index, code) -> a cls taking over the reference"},
    {"_adopt_instance", (PyCFunction)(void (*)(void))pf_object_adopt_instance,
     METH_FASTCALL | METH_STATIC,
     "_adopt_instance(cls, handle, type_index) -> the wrapper alive, or a new cls"},
    {"_live_count", pf_object_live_count, METH_NOARGS | METH_STATIC,
     "_live_count() -> how many instances of registered types have a wrapper"},
    {"_lock_instances", pf_object_lock_instances, METH_O | METH_STATIC,
     "_lock_instances(list): holds its instances for this thread's call"},
    {"_unlock_instances", pf_object_unlock_instances, METH_O | METH_STATIC,
     "_unlock_instances(list): lets them go"},
    {"_exiting", pf_object_exiting, METH_NOARGS | METH_STATIC,
     "_exiting(): nothing is released from now on"},
    {NULL, NULL, 0, NULL},
};

PyTypeObject pf_object_base_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "packedfunc._cext.ObjectBase",
    .tp_basicsize = sizeof(pf_cext_object),
    .tp_dealloc = pf_object_dealloc,
    .tp_finalize = pf_object_finalize,
    .tp_hash = pf_object_hash,
    .tp_richcompare = pf_object_richcompare,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "The compiled base of packedfunc.Object (private).",
    .tp_traverse = pf_object_traverse,
    .tp_clear = pf_object_clear,
    .tp_weaklistoffset = offsetof(pf_cext_object, weakrefs),
    .tp_members = pf_object_members,
    .tp_getset = pf_object_getset,
    .tp_methods = pf_object_methods,
    .tp_new = pf_object_new,
};

/* ------------------------------------------------------------------------ */
/* Values of fields                                                         */
/* ------------------------------------------------------------------------ */

/* A field's PFValue, read with the instance held (pf_instances_lock): 1
 * with *out the Python value of a plain type (NULL with an exception), or
 * 0 once a handle is retained here (then pf_result_value converts it and
 * owns that reference), or -1 with an exception. The value is borrowed
 * from the instance: it is read before the instance is let go. */
static int pf_field_take(PFValue* v, int code, PyObject** out) {
  if (pf_simple_value(v, code, out)) return 1;
  switch (code) {
    case kPFFuncHandle:
    case kPFModuleHandle:
    case kPFObjectHandle:
      if (pf_oapi->ObjectRetain(v->v_handle) != 0) {
        *out = pf_raise_last();
        return -1;
      }
      break;
    default:
      break;
  }
  return 0;
}

/* A Python value for a call's result: the plain types here, the others
 * through the decode hook, which takes over a handle (a new reference). */
static PyObject* pf_result_value(PFValue* v, int code) {
  PyObject* simple;
  if (pf_simple_value(v, code, &simple)) return simple;
  PyObject* addr = PyLong_FromVoidPtr(v);
  if (addr == NULL) return NULL;
  return PyObject_CallFunction(pf_hook_decode, "Ni", addr, code);
}

/* Raises the error of a failed call of `func` (a Function), as its own
 * call does; NULL. */
static PyObject* pf_call_failed(PyObject* func) {
  PyObject* r = PyObject_CallOneArg(pf_hook_failed, func);
  if (r != NULL) {
    Py_DECREF(r);
    PyErr_SetString(PyExc_SystemError, "packedfunc: a failed call raised no error");
  }
  return NULL;
}

/* A Python value as a PFValue for a field: the plain types here (0), the
 * others through the encode hook (1, with *keep what must live until the
 * write is done), or -1 with an exception. */
static int pf_field_encode(PyObject* x, PyObject* what, PyObject* ctype, PFValue* v, int* code,
                           PFByteArray* ba, PyObject** keep) {
  PyTypeObject* t = Py_TYPE(x);
  *keep = NULL;
  if (t == &PyLong_Type) {
    int overflow;
    v->v_int64 = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (!overflow) {
      *code = kPFInt;
      return 0;
    }
  } else if (t == &PyFloat_Type) {
    v->v_float64 = PyFloat_AS_DOUBLE(x);
    *code = kPFFloat;
    return 0;
  } else if (t == &PyBool_Type) {
    v->v_int64 = x == Py_True;
    *code = kPFBool;
    return 0;
  } else if (x == Py_None) {
    v->v_int64 = 0;
    *code = kPFNull;
    return 0;
  } else if (t == &PyBytes_Type) {
    ba->data = PyBytes_AS_STRING(x);
    ba->size = (size_t)PyBytes_GET_SIZE(x);
    v->v_handle = ba;
    *code = kPFBytes;
    return 0;
  }
  /* Everything else, str included (a device field takes "cpu:0"), goes
   * through the package's encoder table. */
  PyObject* r = PyObject_CallFunctionObjArgs(pf_hook_encode, x, what, ctype, NULL);
  if (r == NULL) return -1;
  unsigned long long bits = 0;
  long c = 0;
  if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 3 ||
      ((c = PyLong_AsLong(PyTuple_GET_ITEM(r, 0))) == -1 && PyErr_Occurred()) ||
      ((bits = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(r, 1))) == (unsigned long long)-1 &&
       PyErr_Occurred())) {
    if (!PyErr_Occurred())
      PyErr_SetString(PyExc_SystemError,
                      "packedfunc: the encode hook returned no (code, bits, keep)");
    Py_DECREF(r);
    return -1;
  }
  v->v_int64 = (int64_t)bits;
  *code = (int)c;
  *keep = r;
  return 1;
}

/* ------------------------------------------------------------------------ */
/* Field: a descriptor per field                                             */
/* ------------------------------------------------------------------------ */

typedef struct {
  PyObject_HEAD
  const PFFieldInfo* info; /* the field's handle, valid for the process */
  PyTypeObject* owner;     /* the class it is on */
  PyObject* name;          /* __name__ */
  PyObject* qualname;      /* __qualname__, "Counter.count" */
  PyObject* doc;           /* __doc__ */
  PyObject* ctype;         /* its type in the signature grammar, "int64" */
  PyObject* what;          /* how messages name it: "field 'count' of demo.Counter" */
  int fast;                /* a struct format character: read in place; 0: through C */
  int writable;            /* kPFFieldWritable */
  int refs;                /* it holds a reference: a write may release one */
} pf_field;

static int pf_field_check(pf_field* f, PyObject* obj) {
  if (PyObject_TypeCheck(obj, f->owner)) {
    if (((pf_cext_object*)obj)->data != NULL) return 0;
    PyErr_Format(PyExc_ValueError, "packedfunc: the %s was released", Py_TYPE(obj)->tp_name);
    return -1;
  }
  PyErr_Format(PyExc_TypeError, "descriptor '%U' for '%s' objects doesn't apply to a '%s' object",
               f->name, f->owner->tp_name, Py_TYPE(obj)->tp_name);
  return -1;
}

static PyObject* pf_field_get(PyObject* self, PyObject* obj, PyObject* type) {
  (void)type;
  if (obj == NULL) return Py_NewRef(self);
  pf_field* f = (pf_field*)self;
  if (pf_field_check(f, obj) != 0) return NULL;
  pf_cext_object* o = (pf_cext_object*)obj;
  const char* p = o->data + f->info->offset;
  switch (f->fast) {
    case 'q': {
      int64_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromLongLong(x);
    }
    case 'd': {
      double x;
      memcpy(&x, p, sizeof x);
      return PyFloat_FromDouble(x);
    }
    case '?':
      return PyBool_FromLong(*(const _Bool*)p);
    case 'i': {
      int32_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromLong(x);
    }
    case 'I': {
      uint32_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromUnsignedLong(x);
    }
    case 'h': {
      int16_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromLong(x);
    }
    case 'H': {
      uint16_t x;
      memcpy(&x, p, sizeof x);
      return PyLong_FromLong(x);
    }
    case 'b':
      return PyLong_FromLong(*(const int8_t*)p);
    case 'B':
      return PyLong_FromLong(*(const uint8_t*)p);
    case 'f': {
      float x;
      memcpy(&x, p, sizeof x);
      return PyFloat_FromDouble(x);
    }
    default:
      break;
  }
  PFValue v;
  int code;
  PyObject* out = NULL;
  pf_instances_lock(&obj, 1);
  int rc = pf_oapi->ObjectGetField((void*)(uintptr_t)o->handle, f->info, &v, &code);
  int taken = rc == 0 ? pf_field_take(&v, code, &out) : -1;
  pf_instances_unlock(&obj, 1);
  if (rc != 0) return pf_raise_last();
  return taken != 0 ? out : pf_result_value(&v, code);
}

static int pf_field_set(PyObject* self, PyObject* obj, PyObject* value) {
  pf_field* f = (pf_field*)self;
  if (pf_field_check(f, obj) != 0) return -1;
  if (value == NULL) {
    PyErr_Format(PyExc_AttributeError, "packedfunc: %U cannot be deleted", f->what);
    return -1;
  }
  /* The write holds the instance from here on: the value's conversion may
   * run user code that releases it (it then goes after the write). */
  void* handle = (void*)(uintptr_t)((pf_cext_object*)obj)->handle;
  pf_object_pin(obj);
  PFValue v = {.v_int64 = 0};
  int code = kPFNull;
  PFByteArray ba;
  PyObject* keep = NULL;
  /* A read-only field: C says so, whatever the value. */
  if (f->writable && pf_field_encode(value, f->what, f->ctype, &v, &code, &ba, &keep) < 0) {
    pf_object_unpin(obj);
    return -1;
  }
  /* A field that holds a reference: the old value is held here across the
   * write, so that the write cannot run its finalizer with the GIL held;
   * it is released afterwards without the GIL. */
  void* old = NULL;
  pf_instances_lock(&obj, 1);
  if (f->refs && f->writable) {
    PFValue ov;
    int oc;
    if (pf_oapi->ObjectGetField(handle, f->info, &ov, &oc) == 0 && oc != kPFNull &&
        pf_oapi->ObjectRetain(ov.v_handle) == 0)
      old = ov.v_handle;
    else pf_oapi->ErrorClear();
  }
  int rc = pf_oapi->ObjectSetField(handle, f->info, v, code);
  pf_instances_unlock(&obj, 1);
  Py_XDECREF(keep);
  if (old != NULL) {
    /* Keeps this thread's error (of a failed write) across the release. */
    if (rc != 0) {
      pf_oapi->ObjectFree(old); /* the field still holds it: not the last */
    } else {
      pf_free_released(old);
    }
  }
  if (rc != 0) pf_raise_last();
  pf_object_unpin(obj);
  return rc != 0 ? -1 : 0;
}

/* Field(info_address, owner, qualname, doc, what, fast, refs) */
static PyObject* pf_field_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *addr, *owner, *qualname, *doc, *what;
  int fast, refs;
  if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "_cext.Field takes positional arguments only");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "OO!UOUCp:Field", &addr, &PyType_Type, &owner, &qualname, &doc, &what,
                        &fast, &refs))
    return NULL;
  const PFFieldInfo* info = PyLong_AsVoidPtr(addr);
  if (info == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_cext.Field: NULL field");
    return NULL;
  }
  if (!PyType_IsSubtype((PyTypeObject*)owner, &pf_object_base_type)) {
    PyErr_SetString(PyExc_TypeError, "_cext.Field: the owner must subclass ObjectBase");
    return NULL;
  }
  if (fast != 0 && strchr("qd?iIhHbBf", fast) == NULL) {
    PyErr_Format(PyExc_ValueError, "_cext.Field: no fast read '%c'", fast);
    return NULL;
  }
  pf_field* f = (pf_field*)type->tp_alloc(type, 0);
  if (f == NULL) return NULL;
  f->info = info;
  f->name = PyUnicode_DecodeUTF8(info->name, (Py_ssize_t)strlen(info->name), "strict");
  f->ctype = PyUnicode_DecodeUTF8(info->type, (Py_ssize_t)strlen(info->type), "strict");
  if (f->name == NULL || f->ctype == NULL) {
    Py_DECREF(f);
    return NULL;
  }
  f->owner = (PyTypeObject*)Py_NewRef(owner);
  f->qualname = Py_NewRef(qualname);
  f->doc = Py_NewRef(doc);
  f->what = Py_NewRef(what);
  f->fast = fast;
  f->writable = (info->flags & kPFFieldWritable) != 0;
  f->refs = refs;
  return (PyObject*)f;
}

static int pf_field_traverse(PyObject* self, visitproc visit, void* arg) {
  pf_field* f = (pf_field*)self;
  Py_VISIT(f->owner);
  Py_VISIT(f->doc);
  return 0;
}

static int pf_field_clear(PyObject* self) {
  pf_field* f = (pf_field*)self;
  Py_CLEAR(f->owner);
  Py_CLEAR(f->doc);
  return 0;
}

static void pf_field_dealloc(PyObject* self) {
  pf_field* f = (pf_field*)self;
  PyObject_GC_UnTrack(self);
  pf_field_clear(self);
  Py_CLEAR(f->name);
  Py_CLEAR(f->qualname);
  Py_CLEAR(f->ctype);
  Py_CLEAR(f->what);
  Py_TYPE(self)->tp_free(self);
}

static PyObject* pf_field_repr(PyObject* self) {
  pf_field* f = (pf_field*)self;
  return PyUnicode_FromFormat("<packedfunc field %U: %U%s>", f->qualname, f->ctype,
                              f->writable ? "" : ", read-only");
}

static PyObject* pf_field_get_writable(PyObject* self, void* closure) {
  (void)closure;
  return PyBool_FromLong(((pf_field*)self)->writable);
}

static PyMemberDef pf_field_members[] = {
    {"__name__", T_OBJECT, offsetof(pf_field, name), READONLY, NULL},
    {"__qualname__", T_OBJECT, offsetof(pf_field, qualname), READONLY, NULL},
    {"__doc__", T_OBJECT, offsetof(pf_field, doc), READONLY, NULL},
    {"__objclass__", T_OBJECT, offsetof(pf_field, owner), READONLY, NULL},
    {"type", T_OBJECT, offsetof(pf_field, ctype), READONLY,
     "the field's type in the signature grammar"},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef pf_field_getset[] = {
    {"writable", pf_field_get_writable, NULL, "whether Python may write it", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject pf_field_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "packedfunc._cext.Field",
    .tp_basicsize = sizeof(pf_field),
    .tp_dealloc = pf_field_dealloc,
    .tp_repr = pf_field_repr,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A field of a registered object type's class (private).",
    .tp_traverse = pf_field_traverse,
    .tp_clear = pf_field_clear,
    .tp_members = pf_field_members,
    .tp_getset = pf_field_getset,
    .tp_descr_get = pf_field_get,
    .tp_descr_set = pf_field_set,
    .tp_new = pf_field_new,
};

/* ------------------------------------------------------------------------ */
/* Method: a descriptor per method                                          */
/* ------------------------------------------------------------------------ */

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  PyObject* func;      /* the unbound Function: the object first */
  void* fhandle;       /* its PackedFunc: a reference of the Method's own */
  PyTypeObject* owner; /* the class it is on */
  PyObject* name;      /* __name__ */
  PyObject* qualname;  /* __qualname__ */
  PyObject* doc;       /* __doc__ */
  PyObject* signature; /* __signature__: an inspect.Signature, self first */
  int discard;         /* __init__: the result is dropped (None) */
} pf_method;

static PyObject* pf_method_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                                      PyObject* kwnames) {
  pf_method* m = (pf_method*)self;
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  if (n < 1) {
    PyErr_Format(PyExc_TypeError, "descriptor '%U' of '%s' object needs an argument", m->name,
                 m->owner->tp_name);
    return NULL;
  }
  if (!PyObject_TypeCheck(args[0], m->owner)) {
    PyErr_Format(PyExc_TypeError, "descriptor '%U' for '%s' objects doesn't apply to a '%s' object",
                 m->name, m->owner->tp_name, Py_TYPE(args[0])->tp_name);
    return NULL;
  }
  PyObject* r;
  PyObject* obj = args[0];
  const pf_cext_object* self_obj = (const pf_cext_object*)obj;
  if (n == 1 && self_obj->handle != 0 && (kwnames == NULL || PyTuple_GET_SIZE(kwnames) == 0) &&
      pf_function_fill(m->func) <= 1) {
    /* The instance alone (a call such as c.increment()), and no default
     * to take: called here, as the Function's own call would, without
     * converting arguments, holding the instance and releasing the GIL
     * (or keeping it) as it does. */
    PFValue v = {.v_handle = (void*)(uintptr_t)self_obj->handle}, ret;
    int code = self_obj->code, ret_code, rc;
    pf_object_pin(obj);
    pf_instances_lock(&obj, 1);
    rc = pf_function_call_handle(m->func, m->fhandle, &v, &code, 1, &ret, &ret_code);
    pf_instances_unlock(&obj, 1);
    r = rc != 0 ? pf_call_failed(m->func) : pf_result_value(&ret, ret_code);
    pf_object_unpin(obj);
  } else {
    r = PyObject_Vectorcall(m->func, args, nargsf, kwnames);
  }
  if (r != NULL && m->discard) {
    Py_DECREF(r);
    Py_RETURN_NONE;
  }
  return r;
}

static PyObject* pf_method_get(PyObject* self, PyObject* obj, PyObject* type) {
  (void)type;
  if (obj == NULL) return Py_NewRef(self);
  return PyMethod_New(self, obj);
}

/* Method(func, owner, name, qualname, doc, signature, discard): func is a
 * packedfunc Function, whose PackedFunc the Method also holds itself. */
static PyObject* pf_method_new(PyTypeObject* type, PyObject* args, PyObject* kwargs) {
  PyObject *func, *owner, *name, *qualname, *doc, *signature;
  int discard;
  if (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0) {
    PyErr_SetString(PyExc_TypeError, "_cext.Method takes positional arguments only");
    return NULL;
  }
  if (!PyArg_ParseTuple(args, "OO!UUOOp:Method", &func, &PyType_Type, &owner, &name, &qualname,
                        &doc, &signature, &discard))
    return NULL;
  void* fhandle = NULL;
  if (!pf_function_handle(func, &fhandle)) {
    PyErr_SetString(PyExc_TypeError, "_cext.Method: func must be a Function, not released");
    return NULL;
  }
  if (pf_oapi->FuncRetain(fhandle) != 0) return pf_raise_last();
  pf_method* m = (pf_method*)type->tp_alloc(type, 0);
  if (m == NULL) {
    pf_oapi->FuncFree(fhandle); /* the Function holds another: not the last */
    return NULL;
  }
  m->fhandle = fhandle;
  m->vectorcall = pf_method_vectorcall;
  m->func = Py_NewRef(func);
  m->owner = (PyTypeObject*)Py_NewRef(owner);
  m->name = Py_NewRef(name);
  m->qualname = Py_NewRef(qualname);
  m->doc = Py_NewRef(doc);
  m->signature = Py_NewRef(signature);
  m->discard = discard;
  return (PyObject*)m;
}

static int pf_method_traverse(PyObject* self, visitproc visit, void* arg) {
  pf_method* m = (pf_method*)self;
  Py_VISIT(m->func);
  Py_VISIT(m->owner);
  Py_VISIT(m->doc);
  Py_VISIT(m->signature);
  return 0;
}

static int pf_method_clear(PyObject* self) {
  pf_method* m = (pf_method*)self;
  Py_CLEAR(m->func);
  Py_CLEAR(m->owner);
  Py_CLEAR(m->doc);
  Py_CLEAR(m->signature);
  return 0;
}

static void pf_method_dealloc(PyObject* self) {
  pf_method* m = (pf_method*)self;
  PyObject_GC_UnTrack(self);
  if (m->fhandle != NULL && !pf_exiting) {
    void* f = m->fhandle;
    m->fhandle = NULL;
    Py_BEGIN_ALLOW_THREADS pf_oapi->FuncFree(f);
    Py_END_ALLOW_THREADS
  }
  pf_method_clear(self);
  Py_CLEAR(m->name);
  Py_CLEAR(m->qualname);
  Py_TYPE(self)->tp_free(self);
}

static PyObject* pf_method_repr(PyObject* self) {
  return PyUnicode_FromFormat("<packedfunc method %U>", ((pf_method*)self)->qualname);
}

static PyMemberDef pf_method_members[] = {
    {"__name__", T_OBJECT, offsetof(pf_method, name), READONLY, NULL},
    {"__qualname__", T_OBJECT, offsetof(pf_method, qualname), READONLY, NULL},
    {"__doc__", T_OBJECT, offsetof(pf_method, doc), READONLY, NULL},
    {"__signature__", T_OBJECT, offsetof(pf_method, signature), 0,
     "set by the package once the class is made"},
    {"__objclass__", T_OBJECT, offsetof(pf_method, owner), READONLY, NULL},
    {"function", T_OBJECT, offsetof(pf_method, func), READONLY,
     "the method as a Function that takes the object first"},
    {NULL, 0, 0, 0, NULL},
};

PyTypeObject pf_method_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "packedfunc._cext.Method",
    .tp_basicsize = sizeof(pf_method),
    .tp_dealloc = pf_method_dealloc,
    .tp_vectorcall_offset = offsetof(pf_method, vectorcall),
    .tp_repr = pf_method_repr,
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL |
                Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_doc = "A method of a registered object type's class (private).",
    .tp_traverse = pf_method_traverse,
    .tp_clear = pf_method_clear,
    .tp_members = pf_method_members,
    .tp_descr_get = pf_method_get,
    .tp_new = pf_method_new,
};
