/*
 * packedfunc._cext: containers. The compiled bases of packedfunc.Object and
 * of Array, Map, List and Dict, the decoding of those and of Shape, and the
 * conversions of lists, tuples and dicts to C, all through the library's
 * function table.
 *
 * Decoding. An Array or Map never changes, and what it gives Python are
 * owned copies (a str is a new str, a host object the very Python object),
 * so a wrapper reads all its items with one bulk call and keeps them: a
 * tuple of values (and, for a Map, a dict from key to position). Values
 * that hold a C reference of their own (a Function, an Object, a nested
 * container) are not kept but read again at each access, so that a cached
 * Python wrapper never adds to the C reference counts that the package's
 * cycle collection relies on (packedfunc._holds): such a position holds a
 * hole. A List or Dict changes under Python's feet: it keeps nothing, and
 * reads through the library's copying readers or a snapshot.
 *
 * Encoding. A list, tuple or dict of plain values (int, float, bool, None,
 * str, bytes, Function, Object, and such lists, tuples and dicts) becomes
 * an Array or Map here; anything else (another type, an int outside int64,
 * nesting deeper than PF_ENC_MAX_DEPTH) is left to the package's general
 * path, which converts it or raises the package's error. List and Dict
 * items of other types go through the package's encoder one by one (the
 * hooks below). Everything here runs with the GIL, except the List and
 * Dict calls that may release references (and so run finalizers), which
 * release it.
 */
#include "cext.h"

#include <structmember.h>

#include <math.h>
#include <stdint.h>
#include <string.h>

/* Nesting deeper than this goes to the package's path (which allows 1000
 * levels and names the errors): the recursion here stays shallow. */
#define PF_ENC_MAX_DEPTH 64
/* Items encoded into stack buffers; more take the heap. */
#define PF_ENC_STACK 16

/* ------------------------------------------------------------------------ */
/* Hooks into the package                                                    */
/* ------------------------------------------------------------------------ */

/* The classes made for each container type, and the package's functions
 * that the code here defers to (see set_container_hooks). */
static PyObject* pf_array_cls;
static PyObject* pf_map_cls;
static PyObject* pf_list_cls;
static PyObject* pf_dict_cls;
static PyObject* pf_shape_cls;
static PyObject* pf_dims_name;     /* "_dims", Shape's slot of its dimensions */
static PyObject* pf_hook_decode;   /* (address, code, borrowed, container) -> value */
static PyObject* pf_hook_encode;   /* (x, pos) -> (code, raw int, keep) */
static PyObject* pf_hook_dict_key; /* (x, pos, lookup) -> (code, raw int, keep) or None */
static PyObject* pf_hook_map_key;  /* (x) -> the str or int a Map may hold, or None */
static PyObject* pf_hook_raise;    /* () -> raises the thread's packedfunc error */
static PyObject* pf_hook_track;    /* (wrapper) -> tracks it for the cycle collection */

/* Set once a List or Dict wrapper was made, or the package said that
 * references may change (refs_may_change: a registered type with handle
 * fields is in use): from then on every container wrapper is tracked for
 * the cycle collection, since what the walk follows may change after the
 * wrapper was made. */
static int pf_refs_change;

static int pf_should_track(void) { return pf_refs_change || pf_any_held(); }

/* Raises the thread's packedfunc error as the package's exception; NULL.
 * An exception already set (pf_live: a released container) stands. */
static PyObject* pf_raise_last(void) {
  if (PyErr_Occurred()) {
    pf_api->ErrorClear();
    return NULL;
  }
  if (pf_hook_raise == NULL) {
    PyErr_Format(PyExc_RuntimeError, "packedfunc: %s", pf_api->ErrorGetMessage());
    return NULL;
  }
  PyObject* r = PyObject_CallNoArgs(pf_hook_raise);
  Py_XDECREF(r);
  if (r != NULL) PyErr_SetString(PyExc_SystemError, "packedfunc: an error raised nothing");
  return NULL;
}

static int pf_raise_last_int(void) {
  pf_raise_last();
  return -1;
}

/* 1 when the thread's packedfunc error has this kind. */
static int pf_error_is(const char* kind) {
  const char* k = pf_api->ErrorGetKind();
  return k != NULL && strcmp(k, kind) == 0;
}

/* What a cache holds in place of a value that is read again at each
 * access (a plain object, made by set_container_hooks). */
static PyObject* pf_hole;

static void pf_release(void* handle);

/* ------------------------------------------------------------------------ */
/* ObjectBase                                                               */
/* ------------------------------------------------------------------------ */

/* The fields of packedfunc.Object (objects.h): its handle (0 once
 * released), the type code it passes with, its object type index, what
 * the collector was lent for one collection (_holds). ObjectBase
 * (objects.c) releases the handle in its finalizer; the container bases
 * here embed it first and dealloc through pf_object_dealloc_as. */
typedef pf_cext_object pf_object;

#define PF_HANDLE(self) ((void*)(uintptr_t)((pf_object*)(self))->handle)

/* The handle of a container that an operation uses, read after the
 * operation converted its arguments (whose __index__ or hooks may have
 * released it: x.__del__()). Once released: NULL with ValueError, which
 * the C call refusing NULL leaves in place (pf_raise_last). */
static void* pf_live(PyObject* self) {
  void* h = PF_HANDLE(self);
  if (h == NULL)
    PyErr_Format(PyExc_ValueError, "packedfunc: the %s was released", Py_TYPE(self)->tp_name);
  return h;
}

/* ------------------------------------------------------------------------ */
/* Decoding values                                                          */
/* ------------------------------------------------------------------------ */

static PyObject* pf_adopt(PyTypeObject* cls, void* handle, unsigned int type_index);

/* The Python value of a PFValue read from a container: borrowed from an
 * Array, Map or snapshot (`borrowed` 1: a handle gets a reference of its
 * own), or given by a List's or Dict's reader (0: a handle's new reference
 * is taken over). *cache is set to 0 for a value that holds a C reference
 * of its own, which a cache must not keep (see the top). */
static PyObject* pf_decode(PFValue* v, int code, int borrowed, const char* container, int* cache) {
  *cache = 1;
  PyObject* simple;
  if (pf_simple_value(v, code, &simple)) return simple;
  switch (code) {
    case kPFObjectHandle: {
      PyObject* out = pf_container_value(v->v_handle, !borrowed);
      if (out != NULL || PyErr_Occurred()) {
        *cache = 0;
        return out;
      }
      break;
    }
    default:
      break;
  }
  if (pf_hook_decode == NULL) {
    PyErr_SetString(PyExc_RuntimeError, "packedfunc._cext: set_container_hooks was not called");
    return NULL;
  }
  PyObject* out = PyObject_CallFunction(pf_hook_decode, "NiOs", PyLong_FromVoidPtr(v), code,
                                        borrowed ? Py_True : Py_False, container);
  void* unused;
  if (out != NULL && (code == kPFOpaqueHandle || pf_function_handle(out, &unused) ||
                      PyObject_TypeCheck(out, &pf_object_base_type)))
    *cache = 0; /* holds a reference (or, a ctypes handle, can be changed) */
  return out;
}

/* The values of `count` items of an Array (or snapshot) from `start`, in a
 * new tuple (`as_tuple`) or list; with `keep`, keep[i] is set to 0 for
 * each value that a cache must not keep. NULL with an exception. */
static PyObject* pf_read_items(void* array, int64_t start, int64_t count, const char* container,
                               char* keep, int as_tuple) {
  PFValue small_v[PF_ENC_STACK];
  int small_c[PF_ENC_STACK];
  PFValue* v = small_v;
  int* c = small_c;
  if (count > PF_ENC_STACK) {
    v = PyMem_Malloc((size_t)count * (sizeof(PFValue) + sizeof(int)));
    if (v == NULL) return PyErr_NoMemory();
    c = (int*)(v + count);
  }
  PyObject* out = NULL;
  if (pf_api->ArrayGetItems(array, start, count, v, c) != 0) {
    pf_raise_last();
  } else if ((out = as_tuple ? PyTuple_New((Py_ssize_t)count) : PyList_New((Py_ssize_t)count)) !=
             NULL) {
    /* Both kinds are filled in place: ob_item of a new tuple or list. */
    PyObject** slots = as_tuple ? ((PyTupleObject*)out)->ob_item : ((PyListObject*)out)->ob_item;
    for (int64_t i = 0; i < count; ++i) {
      int cache = 1;
      PyObject* x = c[i] == kPFInt ? PyLong_FromLongLong(v[i].v_int64) /* the common case */
                                   : pf_decode(&v[i], c[i], 1, container, &cache);
      if (x == NULL) {
        Py_CLEAR(out);
        break;
      }
      if (keep != NULL) keep[i] = (char)cache;
      slots[i] = x;
    }
  }
  if (v != small_v) PyMem_Free(v);
  return out;
}

/* Every value of an Array (or snapshot), in a new list. */
static PyObject* pf_read_all(void* array, const char* container) {
  int64_t n;
  if (pf_api->ArrayGetSize(array, &n) != 0) return pf_raise_last();
  return pf_read_items(array, 0, n, container, NULL, 0);
}

/* Releases an object (a snapshot, a popped value) that may hold the last
 * reference to others, whose finalizers may wait for a thread that needs
 * the GIL: so without it. */
static void pf_release(void* handle) {
  Py_BEGIN_ALLOW_THREADS pf_api->ObjectFree(handle);
  Py_END_ALLOW_THREADS
}

/* ------------------------------------------------------------------------ */
/* Encoding values                                                          */
/* ------------------------------------------------------------------------ */

/* One encoding: the C containers made for nested lists, tuples and dicts
 * (new references, released by pf_enc_done; a container met twice is made
 * once: `memo`, open addressing by address), and what must outlive the C
 * call that takes the values (`keep`: what the package's encoder said). */
typedef struct {
  PyObject* key;
  void* handle;
} pf_memo_slot;

typedef struct {
  void** made;
  Py_ssize_t num_made, made_cap;
  pf_memo_slot* memo;
  size_t memo_mask, memo_used;
  PyObject* keep;
} pf_enc;

static void pf_enc_done(pf_enc* e) {
  for (Py_ssize_t i = 0; i < e->num_made; ++i) pf_api->ObjectFree(e->made[i]);
  PyMem_Free(e->made);
  PyMem_Free(e->memo);
  Py_CLEAR(e->keep);
  memset(e, 0, sizeof(*e));
}

static size_t pf_memo_slot_of(const pf_enc* e, PyObject* x) {
  uint64_t h = (uint64_t)(uintptr_t)x;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return (size_t)h & e->memo_mask;
}

static void* pf_memo_get(const pf_enc* e, PyObject* x) {
  if (e->memo == NULL) return NULL;
  for (size_t s = pf_memo_slot_of(e, x); e->memo[s].key != NULL; s = (s + 1) & e->memo_mask)
    if (e->memo[s].key == x) return e->memo[s].handle;
  return NULL;
}

/* Records a reference of the encoding's own, released by pf_enc_done; -1
 * with MemoryError (the reference is then released). */
static int pf_made_add(pf_enc* e, void* handle) {
  if (e->num_made == e->made_cap) {
    Py_ssize_t cap = e->made_cap ? 2 * e->made_cap : 8;
    void** made = PyMem_Realloc(e->made, (size_t)cap * sizeof(void*));
    if (made == NULL) {
      pf_api->ObjectFree(handle);
      PyErr_NoMemory();
      return -1;
    }
    e->made = made;
    e->made_cap = cap;
  }
  e->made[e->num_made++] = handle;
  return 0;
}

/* Holds the handle of a value just encoded (a Function's or Object's,
 * borrowed from a Python object) until the operation ends: user code that
 * runs later in it (a hook, __index__) may release that object. 0 or -1. */
static int pf_enc_hold(pf_enc* e, const PFValue* v, int code) {
  if (code != kPFFuncHandle && code != kPFModuleHandle && code != kPFObjectHandle) return 0;
  if (pf_api->ObjectRetain(v->v_handle) != 0) return pf_raise_last_int();
  return pf_made_add(e, v->v_handle);
}

/* Records `handle`, made for x, as made (and met); -1 with MemoryError
 * (the handle is then released). */
static int pf_memo_put(pf_enc* e, PyObject* x, void* handle) {
  if (pf_made_add(e, handle) != 0) return -1;
  if ((e->memo_used + 1) * 2 > (e->memo == NULL ? 0 : e->memo_mask + 1)) {
    size_t cap = e->memo == NULL ? 16 : 2 * (e->memo_mask + 1);
    pf_memo_slot* memo = PyMem_Calloc(cap, sizeof(pf_memo_slot));
    if (memo == NULL) {
      PyErr_NoMemory();
      return -1;
    }
    pf_memo_slot* old = e->memo;
    size_t old_cap = old == NULL ? 0 : e->memo_mask + 1;
    e->memo = memo;
    e->memo_mask = cap - 1;
    for (size_t i = 0; i < old_cap; ++i) {
      if (old[i].key == NULL) continue;
      size_t s = pf_memo_slot_of(e, old[i].key);
      while (memo[s].key != NULL) s = (s + 1) & e->memo_mask;
      memo[s] = old[i];
    }
    PyMem_Free(old);
  }
  size_t s = pf_memo_slot_of(e, x);
  while (e->memo[s].key != NULL) s = (s + 1) & e->memo_mask;
  e->memo[s].key = x;
  e->memo[s].handle = handle;
  ++e->memo_used;
  return 0;
}

/* A str as UTF-8 without NUL: 1 with v set, 0 for one that the package
 * must refuse (a NUL, a lone surrogate), with no exception left. */
static int pf_enc_str(PyObject* x, PFValue* v) {
  Py_ssize_t size;
  const char* s = PyUnicode_AsUTF8AndSize(x, &size);
  if (s == NULL) {
    if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) return -1;
    PyErr_Clear();
    return 0;
  }
  if (memchr(s, 0, (size_t)size) != NULL) return 0;
  v->v_str = s;
  return 1;
}

/* A value of the plain types, Function or Object: 1 with *v, *code (a
 * bytes value points at *ba), 0 for any other value (no exception), -1
 * with an exception. Borrowed from x, which the caller holds. */
static int pf_enc_plain(PyObject* x, PFValue* v, int* code, PFByteArray* ba) {
  PyTypeObject* t = Py_TYPE(x);
  if (t == &PyLong_Type) {
    int overflow;
    v->v_int64 = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow) return 0;
    *code = kPFInt;
  } else if (t == &PyFloat_Type) {
    v->v_float64 = PyFloat_AS_DOUBLE(x);
    *code = kPFFloat;
  } else if (t == &PyUnicode_Type) {
    int rc = pf_enc_str(x, v);
    if (rc <= 0) return rc;
    *code = kPFStr;
  } else if (t == &PyBool_Type) {
    v->v_int64 = x == Py_True;
    *code = kPFBool;
  } else if (x == Py_None) {
    v->v_int64 = 0;
    *code = kPFNull;
  } else if (t == &PyBytes_Type) {
    ba->data = PyBytes_AS_STRING(x);
    ba->size = (size_t)PyBytes_GET_SIZE(x);
    v->v_handle = ba;
    *code = kPFBytes;
  } else if (pf_function_handle(x, &v->v_handle)) {
    *code = kPFFuncHandle;
  } else if (PyObject_TypeCheck(x, &pf_object_base_type) && ((pf_object*)x)->handle != 0) {
    v->v_handle = PF_HANDLE(x);
    *code = ((pf_object*)x)->code;
  } else {
    return 0;
  }
  return 1;
}

static int pf_enc_container(pf_enc* e, PyObject* x, void** out, int depth);

/* pf_enc_plain, and lists, tuples and dicts as nested containers. */
static int pf_enc_value(pf_enc* e, PyObject* x, PFValue* v, int* code, PFByteArray* ba, int depth) {
  PyTypeObject* t = Py_TYPE(x);
  if (t != &PyList_Type && t != &PyTuple_Type && t != &PyDict_Type)
    return pf_enc_plain(x, v, code, ba);
  void* made = pf_memo_get(e, x);
  if (made == NULL) {
    int rc = pf_enc_container(e, x, &made, depth + 1);
    if (rc <= 0) return rc;
    if (pf_memo_put(e, x, made) != 0) return -1;
  }
  v->v_handle = made;
  *code = kPFObjectHandle;
  return 1;
}

/* Room for n values, their codes and byte arrays (twice that: a Map's keys
 * too), on the stack when small. */
typedef struct {
  PFValue small_v[2 * PF_ENC_STACK];
  int small_c[2 * PF_ENC_STACK];
  PFByteArray small_b[2 * PF_ENC_STACK];
  PFValue* v;
  int* c;
  PFByteArray* b;
  void* heap;
} pf_room;

static int pf_room_take(pf_room* r, Py_ssize_t n) {
  r->heap = NULL;
  if (n <= 2 * PF_ENC_STACK) {
    r->v = r->small_v;
    r->c = r->small_c;
    r->b = r->small_b;
    return 0;
  }
  size_t each = sizeof(PFValue) + sizeof(PFByteArray) + sizeof(int);
  if ((size_t)n > SIZE_MAX / each || (r->heap = PyMem_Malloc((size_t)n * each)) == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  r->v = r->heap;
  r->b = (PFByteArray*)(r->v + n);
  r->c = (int*)(r->b + n);
  return 0;
}

/* A key of a Map: an exact str or an int in int64 (else 0). */
static int pf_enc_map_key(PyObject* k, PFValue* v, int* code) {
  if (Py_IS_TYPE(k, &PyUnicode_Type)) {
    int rc = pf_enc_str(k, v);
    *code = kPFStr;
    return rc;
  }
  if (!Py_IS_TYPE(k, &PyLong_Type)) return 0;
  int overflow;
  v->v_int64 = PyLong_AsLongLongAndOverflow(k, &overflow);
  *code = kPFInt;
  return overflow ? 0 : 1;
}

/* An item of a nested container: pf_enc_value, with an int (the common
 * case) inline. */
static inline int pf_enc_nested(pf_enc* e, PyObject* x, PFValue* v, int* code, PFByteArray* ba,
                                int depth) {
  if (!Py_IS_TYPE(x, &PyLong_Type)) return pf_enc_value(e, x, v, code, ba, depth);
  int overflow;
  v->v_int64 = PyLong_AsLongLongAndOverflow(x, &overflow);
  *code = kPFInt;
  return !overflow;
}

/* A new Array (list, tuple) or Map (dict) in *out for x: 1, 0 (the
 * package's path must convert it; no exception) or -1 (an exception). No
 * Python code runs meanwhile, so x cannot change under the loop. */
static int pf_enc_container(pf_enc* e, PyObject* x, void** out, int depth) {
  if (depth > PF_ENC_MAX_DEPTH) return 0;
  pf_room r;
  int rc = 1;
  if (!PyDict_CheckExact(x)) {
    Py_ssize_t n = PySequence_Fast_GET_SIZE(x);
    PyObject** items = PySequence_Fast_ITEMS(x);
    if (pf_room_take(&r, n) != 0) return -1;
    for (Py_ssize_t i = 0; i < n && rc == 1; ++i) {
      rc = pf_enc_nested(e, items[i], &r.v[i], &r.c[i], &r.b[i], depth);
    }
    if (rc == 1 && pf_api->ArrayCreate(r.v, r.c, n, out) != 0) {
      /* Refused by C (a size no object can have...): the package's path
       * raises that error in its words. */
      pf_api->ErrorClear();
      rc = 0;
    }
  } else {
    Py_ssize_t n = PyDict_GET_SIZE(x), pos = 0, i = 0;
    PyObject *k, *val;
    if (pf_room_take(&r, 2 * n) != 0) return -1;
    PFValue* kv = r.v + n;
    int* kc = r.c + n;
    while (rc == 1 && PyDict_Next(x, &pos, &k, &val)) {
      rc = pf_enc_map_key(k, &kv[i], &kc[i]);
      if (rc != 1) break;
      rc = pf_enc_nested(e, val, &r.v[i], &r.c[i], &r.b[i], depth);
      ++i;
    }
    if (rc == 1 && pf_api->MapCreate(kv, kc, r.v, r.c, n, out) != 0) {
      pf_api->ErrorClear();
      rc = 0;
    }
  }
  PyMem_Free(r.heap);
  return rc;
}

int pf_container_arg(PyObject* x, PFValue* value, int* code) {
  pf_enc e;
  memset(&e, 0, sizeof(e));
  void* out = NULL;
  int rc = pf_enc_container(&e, x, &out, 1);
  pf_enc_done(&e);
  if (rc == 1) {
    value->v_handle = out;
    *code = kPFObjectHandle;
  }
  return rc;
}

/* Appends o to e->keep (what must outlive the C call); -1 on error. */
static int pf_enc_keep(pf_enc* e, PyObject* o) {
  if (e->keep == NULL && (e->keep = PyList_New(0)) == NULL) return -1;
  return PyList_Append(e->keep, o);
}

/* Reads the package's answer (code, raw int, keep) into v and code. */
static int pf_enc_answer(pf_enc* e, PyObject* answer, PFValue* v, int* code) {
  unsigned long long raw;
  if (!PyTuple_Check(answer) || PyTuple_GET_SIZE(answer) != 3) {
    PyErr_SetString(PyExc_SystemError, "packedfunc: an encoder hook answered no triple");
    return -1;
  }
  *code = (int)PyLong_AsLong(PyTuple_GET_ITEM(answer, 0));
  raw = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(answer, 1));
  if (PyErr_Occurred()) return -1;
  memcpy(v, &raw, sizeof(raw));
  return pf_enc_keep(e, PyTuple_GET_ITEM(answer, 2));
}

/* Any value given to a List or Dict: here when it can, else through the
 * package's encoder (naming it `pos` in its errors). 0 or -1. */
static int pf_enc_any(pf_enc* e, PyObject* x, PFValue* v, int* code, PFByteArray* ba,
                      const char* pos) {
  int rc = pf_enc_value(e, x, v, code, ba, 0);
  if (rc != 0) return rc < 0 ? -1 : pf_enc_hold(e, v, *code);
  /* The package's answer holds what it encoded (encode_item). */
  PyObject* answer = PyObject_CallFunction(pf_hook_encode, "Os", x, pos);
  if (answer == NULL) return -1;
  rc = pf_enc_answer(e, answer, v, code);
  Py_DECREF(answer);
  return rc;
}

/* A key of a Dict: 1 with v and code set; 0 for a key that no Dict can
 * hold when `lookup` (absent, not an error); -1 with an exception (a key
 * that no Dict can hold, for a change). */
static int pf_enc_dict_key(pf_enc* e, PyObject* x, PFValue* v, int* code, PFByteArray* ba,
                           int lookup, const char* pos) {
  PyTypeObject* t = Py_TYPE(x);
  if ((t == &PyFloat_Type && isnan(PyFloat_AS_DOUBLE(x))) || t == &PyList_Type ||
      t == &PyTuple_Type || t == &PyDict_Type || t->tp_hash == PyObject_HashNotImplemented) {
    /* The package's rules: a NaN, a tuple, an unhashable key (a list, an
     * Array or a List...). */
  } else {
    int rc = pf_enc_plain(x, v, code, ba);
    if (rc != 0) return rc < 0 ? -1 : pf_enc_hold(e, v, *code) == 0 ? 1 : -1;
  }
  PyObject* answer =
      PyObject_CallFunction(pf_hook_dict_key, "OsO", x, pos, lookup ? Py_True : Py_False);
  if (answer == NULL) return -1;
  int rc = answer == Py_None ? 0 : pf_enc_answer(e, answer, v, code) == 0 ? 1 : -1;
  Py_DECREF(answer);
  return rc;
}

/* ------------------------------------------------------------------------ */
/* Wrappers of handles                                                       */
/* ------------------------------------------------------------------------ */

/* The package's class for an object type index, if it is a container's. */
static PyObject* pf_class_of(unsigned int type_index) {
  switch (type_index) {
    case kPFObjectArray:
      return pf_array_cls;
    case kPFObjectMap:
      return pf_map_cls;
    case kPFObjectList:
      return pf_list_cls;
    case kPFObjectDict:
      return pf_dict_cls;
    default:
      return NULL;
  }
}

typedef struct {
  pf_object base;
  Py_ssize_t size;  /* the number of items, read once */
  PyObject* items;  /* the values (PF_HOLE where read at each access), or NULL */
  Py_ssize_t holes; /* how many holes items has */
  Py_ssize_t reads; /* single reads before items was made */
} pf_array;

typedef struct {
  pf_object base;
  Py_ssize_t size;
  PyObject* keys;  /* tuple of keys (str or int), or NULL before the first read */
  PyObject* pairs; /* tuple of (key, value), holes as (key, PF_HOLE) */
  PyObject* index; /* dict: key -> position */
  Py_ssize_t holes, reads;
} pf_map;

/* A new wrapper of class cls (a subclass of ObjectBase) that takes over
 * the reference `handle`. An Array or Map reads its size; a container is
 * tracked for the cycle collection (_holds). */
static PyObject* pf_adopt(PyTypeObject* cls, void* handle, unsigned int type_index) {
  PyObject* self = cls->tp_alloc(cls, 0);
  if (self == NULL) {
    pf_release(handle);
    return NULL;
  }
  pf_object* o = (pf_object*)self;
  o->handle = (unsigned long long)(uintptr_t)handle;
  o->code = kPFObjectHandle;
  o->type_index = type_index;
  int64_t size = 0;
  int container = 1, rc = 0;
  if (PyObject_TypeCheck(self, &pf_array_base_type)) {
    rc = pf_api->ArrayGetSize(handle, &size);
    ((pf_array*)self)->size = (Py_ssize_t)size;
  } else if (PyObject_TypeCheck(self, &pf_map_base_type)) {
    rc = pf_api->MapGetSize(handle, &size);
    ((pf_map*)self)->size = (Py_ssize_t)size;
  } else if (PyObject_TypeCheck(self, &pf_list_base_type) ||
             PyObject_TypeCheck(self, &pf_dict_base_type)) {
    pf_refs_change = 1;
  } else {
    container = 0;
  }
  if (rc != 0) {
    pf_raise_last();
    Py_DECREF(self); /* its __del__ releases the handle, which it owns */
    return NULL;
  }
  if (container && pf_should_track() && pf_hook_track != NULL) {
    PyObject* r = PyObject_CallOneArg(pf_hook_track, self);
    if (r == NULL) {
      Py_DECREF(self);
      return NULL;
    }
    Py_DECREF(r);
  }
  return self;
}

/* A new Shape of the package's class that takes over the reference
 * `handle`, its dimensions read once into a tuple (as Shape._adopt does). */
static PyObject* pf_shape_value(void* handle) {
  PyObject* self = pf_adopt((PyTypeObject*)pf_shape_cls, handle, kPFObjectShape);
  if (self == NULL) return NULL;
  const int64_t* dims;
  int64_t ndim;
  PyObject* t = NULL;
  if (pf_api->ShapeGetData(handle, &dims, &ndim) != 0) {
    pf_raise_last();
  } else if ((t = PyTuple_New((Py_ssize_t)ndim)) != NULL) {
    for (int64_t i = 0; i < ndim; ++i) {
      PyObject* d = PyLong_FromLongLong(dims[i]);
      if (d == NULL) {
        Py_CLEAR(t);
        break;
      }
      PyTuple_SET_ITEM(t, (Py_ssize_t)i, d);
    }
  }
  if (t == NULL || PyObject_SetAttr(self, pf_dims_name, t) != 0) Py_CLEAR(self);
  Py_XDECREF(t);
  return self;
}

PyObject* pf_container_value(void* handle, int owned) {
  uint32_t ti;
  if (pf_api->ObjectGetTypeIndex(handle, &ti) != 0) {
    pf_api->ErrorClear(); /* the package's decoder says what is wrong */
    return NULL;
  }
  if (ti == kPFObjectShape && pf_shape_cls != NULL) {
    if (!owned && pf_api->ObjectRetain(handle) != 0) return pf_raise_last();
    return pf_shape_value(handle);
  }
  PyObject* cls = pf_class_of(ti);
  if (cls == NULL) return NULL;
  if (!owned && pf_api->ObjectRetain(handle) != 0) return pf_raise_last();
  return pf_adopt((PyTypeObject*)cls, handle, ti);
}

/* adopt_object(cls, handle, type_index): a new instance of cls (a subclass
 * of ObjectBase) that takes over the reference `handle`. */
static PyObject* pf_adopt_object(PyObject* module, PyObject* const* args, Py_ssize_t n) {
  (void)module;
  if (n != 3 || !PyType_Check(args[0]) ||
      !PyType_IsSubtype((PyTypeObject*)args[0], &pf_object_base_type)) {
    PyErr_SetString(PyExc_TypeError,
                    "_cext.adopt_object(cls, handle, type_index): cls must subclass ObjectBase");
    return NULL;
  }
  void* handle = PyLong_AsVoidPtr(args[1]);
  if (handle == NULL && PyErr_Occurred()) return NULL;
  unsigned long ti = PyLong_AsUnsignedLong(args[2]);
  if (ti == (unsigned long)-1 && PyErr_Occurred()) return NULL;
  return pf_adopt((PyTypeObject*)args[0], handle, (unsigned int)ti);
}

/* The slots a container base shares with the others: len and `in`
 * (sequence), subscripts (mapping), iteration, its methods, a GC'd type
 * that Python classes derive from. `ass`: its item assignment, or NULL. */
#define PF_CONTAINER_BASE(name, Name, object, ass, dealloc, traverse, clear)     \
  static PySequenceMethods pf_##name##_as_sequence = {                           \
      .sq_length = pf_##name##_length,                                           \
      .sq_contains = pf_##name##_contains,                                       \
  };                                                                             \
  static PyMappingMethods pf_##name##_as_mapping = {                             \
      .mp_length = pf_##name##_length,                                           \
      .mp_subscript = pf_##name##_subscript,                                     \
      .mp_ass_subscript = ass,                                                   \
  };                                                                             \
  PyTypeObject pf_##name##_base_type = {                                         \
      PyVarObject_HEAD_INIT(NULL, 0).tp_name = "packedfunc._cext." Name "Base",  \
      .tp_basicsize = sizeof(object),                                            \
      .tp_base = &pf_object_base_type,                                           \
      .tp_dealloc = dealloc,                                                     \
      .tp_as_sequence = &pf_##name##_as_sequence,                                \
      .tp_as_mapping = &pf_##name##_as_mapping,                                  \
      .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC, \
      .tp_doc = "The compiled base of packedfunc." Name " (private).",           \
      .tp_traverse = traverse,                                                   \
      .tp_clear = clear,                                                         \
      .tp_iter = pf_##name##_iter,                                               \
      .tp_methods = pf_##name##_methods,                                         \
  }

/* ------------------------------------------------------------------------ */
/* ArrayBase                                                                */
/* ------------------------------------------------------------------------ */

static int pf_array_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(((pf_array*)self)->items);
  return pf_object_traverse(self, visit, arg);
}

static int pf_array_clear(PyObject* self) {
  Py_CLEAR(((pf_array*)self)->items);
  return pf_object_clear(self);
}

static void pf_array_dealloc(PyObject* self) { pf_object_dealloc_as(self, pf_array_clear); }

static Py_ssize_t pf_array_length(PyObject* self) { return ((pf_array*)self)->size; }

/* Reads every item with one call: a new tuple of the values. Makes the
 * cache when there is none yet: that tuple itself when it has no hole,
 * else a copy with holes. */
static PyObject* pf_array_read(pf_array* a) {
  Py_ssize_t n = a->size;
  char small[64];
  char* keep = n <= (Py_ssize_t)sizeof small ? small : PyMem_Malloc((size_t)n);
  if (keep == NULL) return PyErr_NoMemory();
  PyObject* fresh = pf_read_items(pf_live((PyObject*)a), 0, n, "Array", keep, 1);
  if (fresh != NULL && a->items == NULL) {
    Py_ssize_t holes = 0;
    for (Py_ssize_t i = 0; i < n; ++i) holes += !keep[i];
    PyObject* items = fresh;
    if (holes == 0) {
      Py_INCREF(items);
    } else if ((items = PyTuple_New(n)) != NULL) {
      /* A copy (a whole-tuple slice would be the tuple itself). */
      for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject* x = keep[i] ? PyTuple_GET_ITEM(fresh, i) : pf_hole;
        Py_INCREF(x);
        PyTuple_SET_ITEM(items, i, x);
      }
    }
    if (items == NULL) {
      Py_CLEAR(fresh);
    } else {
      a->holes = holes;
      a->items = items;
    }
  }
  if (keep != small) PyMem_Free(keep);
  return fresh;
}

/* All the values (new reference): the cache itself when it has no hole,
 * else a new tuple. */
static PyObject* pf_array_values(pf_array* a) {
  if (a->items == NULL || a->holes != 0) {
    PyObject* fresh = pf_array_read(a);
    if (fresh == NULL || a->holes != 0) return fresh;
    Py_DECREF(fresh);
  }
  Py_INCREF(a->items);
  return a->items;
}

/* The value at i, 0 <= i < size. Single reads make the cache once they
 * add up to an eighth of the size: a large Array read at a few places is
 * not converted whole. */
static PyObject* pf_array_item(pf_array* a, Py_ssize_t i) {
  if (a->items == NULL && ++a->reads * 8 >= a->size) {
    PyObject* fresh = pf_array_read(a);
    if (fresh == NULL) return NULL;
    Py_DECREF(fresh);
  }
  if (a->items != NULL) {
    PyObject* x = PyTuple_GET_ITEM(a->items, i);
    if (x != pf_hole) {
      Py_INCREF(x);
      return x;
    }
  }
  PyObject* one = pf_read_items(pf_live((PyObject*)a), i, 1, "Array", NULL, 1);
  if (one == NULL) return NULL;
  PyObject* x = PyTuple_GET_ITEM(one, 0);
  Py_INCREF(x);
  Py_DECREF(one);
  return x;
}

/* An index (an int, or anything with __index__) as a Py_ssize_t, clamped;
 * -1 with TypeError naming `what` for anything else. *obj: the index as
 * an int, for messages (a new reference). */
static int pf_index_of(PyObject* key, const char* what, Py_ssize_t* out, PyObject** obj) {
  if (!PyIndex_Check(key)) {
    PyErr_Format(PyExc_TypeError, "%s indices must be integers or slices, not %.200s", what,
                 Py_TYPE(key)->tp_name);
    return -1;
  }
  *obj = PyNumber_Index(key);
  if (*obj == NULL) return -1;
  *out = PyNumber_AsSsize_t(*obj, NULL);
  return 0;
}

static PyObject* pf_array_subscript(PyObject* self, PyObject* key) {
  pf_array* a = (pf_array*)self;
  Py_ssize_t i;
  if (PyLong_CheckExact(key)) {
    i = PyLong_AsSsize_t(key);
    if (i == -1 && PyErr_Occurred()) {
      PyErr_Clear();
      i = PY_SSIZE_T_MAX; /* out of range below */
    }
    if (i < 0) i += a->size;
    if (i >= 0 && i < a->size) return pf_array_item(a, i);
    return PyErr_Format(PyExc_IndexError, "Array index %S out of range (size %zd)", key, a->size);
  }
  if (PySlice_Check(key)) {
    PyObject* values = pf_array_values(a);
    if (values == NULL) return NULL;
    PyObject* part = PyObject_GetItem(values, key);
    Py_DECREF(values);
    if (part == NULL || PyList_CheckExact(part)) return part;
    PyObject* out = PySequence_List(part); /* a slice is a list, as it was */
    Py_DECREF(part);
    return out;
  }
  PyObject* obj;
  if (pf_index_of(key, "Array", &i, &obj) != 0) return NULL;
  Py_ssize_t j = i < 0 ? i + a->size : i;
  PyObject* out =
      j >= 0 && j < a->size
          ? pf_array_item(a, j)
          : PyErr_Format(PyExc_IndexError, "Array index %S out of range (size %zd)", obj, a->size);
  Py_DECREF(obj);
  return out;
}

static int pf_array_contains(PyObject* self, PyObject* x) {
  PyObject* values = pf_array_values((pf_array*)self);
  if (values == NULL) return -1;
  int rc = PySequence_Contains(values, x);
  Py_DECREF(values);
  return rc;
}

static PyObject* pf_array_iter(PyObject* self) {
  PyObject* values = pf_array_values((pf_array*)self);
  if (values == NULL) return NULL;
  PyObject* it = PyObject_GetIter(values);
  Py_DECREF(values);
  return it;
}

static PyObject* pf_array_values_method(PyObject* self, PyObject* unused) {
  (void)unused;
  return pf_array_values((pf_array*)self);
}

static PyMethodDef pf_array_methods[] = {
    {"_values", pf_array_values_method, METH_NOARGS,
     "every value, as a tuple (the kept one when it has no hole)"},
    {NULL, NULL, 0, NULL},
};

PF_CONTAINER_BASE(array, "Array", pf_array, NULL, pf_array_dealloc, pf_array_traverse,
                  pf_array_clear);

/* ------------------------------------------------------------------------ */
/* MapBase                                                                  */
/* ------------------------------------------------------------------------ */

static int pf_map_traverse(PyObject* self, visitproc visit, void* arg) {
  pf_map* m = (pf_map*)self;
  Py_VISIT(m->keys);
  Py_VISIT(m->pairs);
  Py_VISIT(m->index);
  return pf_object_traverse(self, visit, arg);
}

static int pf_map_clear(PyObject* self) {
  pf_map* m = (pf_map*)self;
  Py_CLEAR(m->keys);
  Py_CLEAR(m->pairs);
  Py_CLEAR(m->index);
  return pf_object_clear(self);
}

static void pf_map_dealloc(PyObject* self) { pf_object_dealloc_as(self, pf_map_clear); }

static Py_ssize_t pf_map_length(PyObject* self) { return ((pf_map*)self)->size; }

/* Reads every entry with one call and makes the cache: keys, pairs (with
 * holes) and the index. 0, or -1 with an exception. */
static int pf_map_fill(pf_map* m) {
  Py_ssize_t n = m->size;
  PFValue small_v[2 * PF_ENC_STACK];
  int small_c[2 * PF_ENC_STACK];
  PFValue* v = small_v;
  int* c = small_c;
  if (n > PF_ENC_STACK) {
    v = PyMem_Malloc((size_t)n * 2 * (sizeof(PFValue) + sizeof(int)));
    if (v == NULL) {
      PyErr_NoMemory();
      return -1;
    }
    c = (int*)(v + 2 * n);
  }
  PyObject *keys = NULL, *pairs = NULL, *index = NULL;
  Py_ssize_t holes = 0;
  int rc = -1;
  if (pf_api->MapGetItems(pf_live((PyObject*)m), 0, n, v, c, v + n, c + n) != 0) {
    pf_raise_last();
    goto done;
  }
  keys = PyTuple_New(n);
  pairs = PyTuple_New(n);
  index = PyDict_New();
  if (keys == NULL || pairs == NULL || index == NULL) goto done;
  for (Py_ssize_t i = 0; i < n; ++i) {
    int cache;
    PyObject* k = pf_decode(&v[i], c[i], 1, "Map", &cache);
    if (k == NULL) goto done;
    PyTuple_SET_ITEM(keys, i, k);
    PyObject* x = pf_decode(&v[n + i], c[n + i], 1, "Map", &cache);
    if (x == NULL) goto done;
    if (!cache) {
      Py_DECREF(x);
      Py_INCREF(pf_hole);
      x = pf_hole;
      ++holes;
    }
    Py_INCREF(k);
    PyObject* pair = PyTuple_New(2);
    if (pair == NULL) {
      Py_DECREF(k);
      Py_DECREF(x);
      goto done;
    }
    PyTuple_SET_ITEM(pair, 0, k);
    PyTuple_SET_ITEM(pair, 1, x);
    PyTuple_SET_ITEM(pairs, i, pair);
    PyObject* pos = PyLong_FromSsize_t(i);
    if (pos == NULL || PyDict_SetItem(index, k, pos) != 0) {
      Py_XDECREF(pos);
      goto done;
    }
    Py_DECREF(pos);
  }
  if (m->index == NULL) {
    m->keys = keys;
    m->pairs = pairs;
    m->index = index;
    m->holes = holes;
    keys = pairs = index = NULL;
  }
  rc = 0;
done:
  Py_XDECREF(keys);
  Py_XDECREF(pairs);
  Py_XDECREF(index);
  if (v != small_v) PyMem_Free(v);
  return rc;
}

static int pf_map_ready(pf_map* m) { return m->index != NULL ? 0 : pf_map_fill(m); }

/* The value at position i of a filled Map (new reference). */
static PyObject* pf_map_value_at(pf_map* m, Py_ssize_t i) {
  PyObject* x = PyTuple_GET_ITEM(PyTuple_GET_ITEM(m->pairs, i), 1);
  if (x != pf_hole) {
    Py_INCREF(x);
    return x;
  }
  PFValue k, v;
  int kc, vc, cache;
  if (pf_api->MapGetItemAt(pf_live((PyObject*)m), i, &k, &kc, &v, &vc) != 0) return pf_raise_last();
  return pf_decode(&v, vc, 1, "Map", &cache);
}

/* Looks key up: a new reference to its value, or NULL (with no exception
 * when the key is absent). A lookup finds what a dict would (the package's
 * map_key hook says which str or int any other key stands for). */
static PyObject* pf_map_lookup(pf_map* m, PyObject* key) {
  PyObject* k = key;
  if (!PyUnicode_CheckExact(key) && !PyLong_CheckExact(key)) {
    k = PyObject_CallOneArg(pf_hook_map_key, key);
    if (k == NULL || k == Py_None) {
      Py_XDECREF(k);
      return NULL;
    }
  } else {
    Py_INCREF(k);
  }
  PyObject* out = NULL;
  if (m->index == NULL && ++m->reads * 8 < m->size) {
    /* A large Map read at a few keys: looked up in C, not converted. */
    PFValue kv, v;
    int kc, vc, found = 0, rc = 1, cache;
    if (PyUnicode_CheckExact(k)) {
      kc = kPFStr;
      rc = pf_enc_str(k, &kv); /* 0: a NUL or a surrogate escape: below */
    } else {
      int overflow;
      kc = kPFInt;
      kv.v_int64 = PyLong_AsLongLongAndOverflow(k, &overflow);
      if (overflow) goto absent;
    }
    if (rc < 0) goto done;
    if (rc == 1) {
      if (pf_api->MapGetItem(pf_live((PyObject*)m), kv, kc, &v, &vc, &found) != 0) {
        pf_raise_last();
        goto done;
      }
      if (found) out = pf_decode(&v, vc, 1, "Map", &cache);
      goto done;
    }
  }
  if (pf_map_ready(m) != 0) goto done;
  PyObject* pos = PyDict_GetItemWithError(m->index, k);
  if (pos != NULL) out = pf_map_value_at(m, PyLong_AsSsize_t(pos));
  goto done;
absent:
  out = NULL;
done:
  Py_DECREF(k);
  return out;
}

static void pf_set_key_error(PyObject* key) {
  PyObject* args = PyTuple_Pack(1, key);
  if (args == NULL) return;
  PyErr_SetObject(PyExc_KeyError, args);
  Py_DECREF(args);
}

static PyObject* pf_map_subscript(PyObject* self, PyObject* key) {
  PyObject* out = pf_map_lookup((pf_map*)self, key);
  if (out == NULL && !PyErr_Occurred()) pf_set_key_error(key);
  return out;
}

static int pf_map_contains(PyObject* self, PyObject* key) {
  PyObject* out = pf_map_lookup((pf_map*)self, key);
  if (out == NULL) return PyErr_Occurred() ? -1 : 0;
  Py_DECREF(out);
  return 1;
}

/* -1 with dict's TypeError unless a method `name` got 1 or 2 arguments. */
static int pf_one_or_two(const char* name, Py_ssize_t n) {
  if (n == 1 || n == 2) return 0;
  if (n == 0) PyErr_Format(PyExc_TypeError, "%s expected at least 1 argument, got 0", name);
  else PyErr_Format(PyExc_TypeError, "%s expected at most 2 arguments, got %zd", name, n);
  return -1;
}

static PyObject* pf_map_get(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  if (pf_one_or_two("get", n) != 0) return NULL;
  PyObject* out = pf_map_lookup((pf_map*)self, args[0]);
  if (out != NULL || PyErr_Occurred()) return out;
  out = n == 2 ? args[1] : Py_None;
  Py_INCREF(out);
  return out;
}

static PyObject* pf_map_iter(PyObject* self) {
  if (pf_map_ready((pf_map*)self) != 0) return NULL;
  return PyObject_GetIter(((pf_map*)self)->keys);
}

static PyObject* pf_map_keys(PyObject* self, PyObject* unused) {
  (void)unused;
  if (pf_map_ready((pf_map*)self) != 0) return NULL;
  Py_INCREF(((pf_map*)self)->keys);
  return ((pf_map*)self)->keys;
}

/* (key, value) pairs: the cached tuple when it has no hole, else a new
 * list; with `values_only`, a list of the values. */
static PyObject* pf_map_entries(pf_map* m, int values_only) {
  if (pf_map_ready(m) != 0) return NULL;
  if (!values_only && m->holes == 0) {
    Py_INCREF(m->pairs);
    return m->pairs;
  }
  PyObject* out = PyList_New(m->size);
  for (Py_ssize_t i = 0; out != NULL && i < m->size; ++i) {
    PyObject* pair = PyTuple_GET_ITEM(m->pairs, i);
    PyObject* x = pf_map_value_at(m, i);
    if (x != NULL && !values_only) {
      PyObject* p = PyTuple_Pack(2, PyTuple_GET_ITEM(pair, 0), x);
      Py_DECREF(x);
      x = p;
    }
    if (x == NULL) Py_CLEAR(out);
    else PyList_SET_ITEM(out, i, x);
  }
  return out;
}

static PyObject* pf_map_pairs(PyObject* self, PyObject* unused) {
  (void)unused;
  return pf_map_entries((pf_map*)self, 0);
}

static PyObject* pf_map_values(PyObject* self, PyObject* unused) {
  (void)unused;
  return pf_map_entries((pf_map*)self, 1);
}

static PyMethodDef pf_map_methods[] = {
    {"get", (PyCFunction)(void (*)(void))pf_map_get, METH_FASTCALL,
     "get(key, default=None) -> the value of key, or default"},
    {"_keys", pf_map_keys, METH_NOARGS, "the keys, as a tuple"},
    {"_pairs", pf_map_pairs, METH_NOARGS, "the (key, value) pairs, as a tuple or list"},
    {"_values", pf_map_values, METH_NOARGS, "the values, as a list"},
    {NULL, NULL, 0, NULL},
};

PF_CONTAINER_BASE(map, "Map", pf_map, NULL, pf_map_dealloc, pf_map_traverse, pf_map_clear);

/* ------------------------------------------------------------------------ */
/* ListBase and DictBase: shared                                            */
/* ------------------------------------------------------------------------ */

/* Releases a value that a List's or Dict's reader gave (a handle's new
 * reference; a str or bytes is the thread's copy, nothing to release). */
static void pf_release_value(PFValue* v, int code) {
  if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle)
    pf_release(v->v_handle);
}

/* A snapshot of a List (ListToArray) or Dict (DictToArray): a new reference
 * to an Array, or NULL with an exception. */
static void* pf_snapshot_of(PyObject* self) {
  void* out = NULL;
  int rc = PyObject_TypeCheck(self, &pf_list_base_type)
               ? pf_api->ListToArray(pf_live(self), 0, INT64_MAX, &out)
               : pf_api->DictToArray(pf_live(self), &out);
  if (rc != 0) {
    pf_raise_last();
    return NULL;
  }
  return out;
}

/* _snapshot(): an Array of the items (a Dict's: key, value, key, ...). */
static PyObject* pf_mutable_snapshot(PyObject* self, PyObject* unused) {
  (void)unused;
  void* a = pf_snapshot_of(self);
  return a == NULL ? NULL : pf_adopt((PyTypeObject*)pf_array_cls, a, kPFObjectArray);
}

/* clear(): removes every item (ListClear) or entry (DictClear), without
 * the GIL (the references dropped may run finalizers). */
static PyObject* pf_mutable_clear(PyObject* self, PyObject* unused) {
  (void)unused;
  int rc, list = PyObject_TypeCheck(self, &pf_list_base_type);
  void* h = pf_live(self);
  Py_BEGIN_ALLOW_THREADS rc = list ? pf_api->ListClear(h) : pf_api->DictClear(h);
  Py_END_ALLOW_THREADS if (rc != 0) return pf_raise_last();
  Py_RETURN_NONE;
}

/* The raw values of an Array, Map (keys then values) or of a snapshot, to
 * make a new List or Dict from: *n values at *v (heap, PyMem_Free), borrowed
 * from `source`. 0, or -1 with an exception. */
static int pf_raw_values(PyObject* source, PFValue** v, int** c, int64_t* n) {
  int64_t size;
  int is_map = PyObject_TypeCheck(source, &pf_map_base_type);
  if (!is_map && !PyObject_TypeCheck(source, &pf_array_base_type)) {
    PyErr_Format(PyExc_TypeError, "expected an Array or Map, not %.200s", Py_TYPE(source)->tp_name);
    return -1;
  }
  void* h = pf_live(source);
  if ((is_map ? pf_api->MapGetSize(h, &size) : pf_api->ArrayGetSize(h, &size)) != 0)
    return pf_raise_last_int();
  int64_t total = is_map ? 2 * size : size;
  *v = PyMem_Malloc((size_t)(total ? total : 1) * (sizeof(PFValue) + sizeof(int)));
  if (*v == NULL) {
    PyErr_NoMemory();
    return -1;
  }
  *c = (int*)(*v + total);
  int rc = is_map ? pf_api->MapGetItems(h, 0, size, *v, *c, *v + size, *c + size)
                  : pf_api->ArrayGetItems(h, 0, size, *v, *c);
  if (rc != 0) {
    PyMem_Free(*v);
    return pf_raise_last_int();
  }
  *n = size;
  return 0;
}

/* ------------------------------------------------------------------------ */
/* ListBase                                                                 */
/* ------------------------------------------------------------------------ */

static int pf_mutable_traverse(PyObject* self, visitproc visit, void* arg) {
  return pf_object_traverse(self, visit, arg);
}

static Py_ssize_t pf_list_length(PyObject* self) {
  int64_t n;
  if (pf_api->ListGetSize(pf_live(self), &n) != 0) return pf_raise_last_int();
  return (Py_ssize_t)n;
}

/* The values of the items [start, start + count) (clipped), in a new list. */
static PyObject* pf_list_read(PyObject* self, int64_t start, int64_t count) {
  void* a = NULL;
  if (pf_api->ListToArray(pf_live(self), start, count, &a) != 0) return pf_raise_last();
  PyObject* out = pf_read_all(a, "List");
  pf_release(a);
  return out;
}

static PyObject* pf_list_values(PyObject* self, PyObject* unused) {
  (void)unused;
  return pf_list_read(self, 0, INT64_MAX);
}

/* Raises IndexError with Python's words for a List's IndexError, or the
 * library's error for any other. */
static void pf_list_index_error(const char* words) {
  if (pf_error_is("IndexError")) {
    pf_api->ErrorClear();
    PyErr_SetString(PyExc_IndexError, words);
  } else {
    pf_raise_last();
  }
}

/* A List index as list's subscripts take it: -1 with TypeError for a key
 * that is no index, IndexError for one outside Py_ssize_t. */
static int pf_list_index(PyObject* key, Py_ssize_t* out) {
  if (!PyIndex_Check(key)) {
    PyErr_Format(PyExc_TypeError, "list indices must be integers or slices, not %.200s",
                 Py_TYPE(key)->tp_name);
    return -1;
  }
  *out = PyNumber_AsSsize_t(key, PyExc_IndexError);
  return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

/* An index argument of pop and insert, as list's take it (TypeError for no
 * index, OverflowError outside Py_ssize_t). */
static int pf_ssize_arg(PyObject* x, Py_ssize_t* out) {
  PyObject* i = PyNumber_Index(x);
  if (i == NULL) return -1;
  *out = PyLong_AsSsize_t(i);
  Py_DECREF(i);
  return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject* pf_list_subscript(PyObject* self, PyObject* key) {
  Py_ssize_t i;
  if (PySlice_Check(key)) {
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
    if (step == 1) {
      Py_ssize_t size = pf_list_length(self);
      if (size < 0) return NULL;
      Py_ssize_t count = PySlice_AdjustIndices(size, &start, &stop, step);
      return pf_list_read(self, start, count);
    }
    PyObject* all = pf_list_values(self, NULL);
    if (all == NULL) return NULL;
    PyObject* out = PyObject_GetItem(all, key);
    Py_DECREF(all);
    return out;
  } else if (pf_list_index(key, &i) != 0) {
    return NULL;
  }
  PFValue v;
  int code, cache;
  if (pf_api->ListGetItem(pf_live(self), i, &v, &code) != 0) {
    pf_list_index_error("list index out of range");
    return NULL;
  }
  return pf_decode(&v, code, 0, "List", &cache);
}

static int pf_list_ass_subscript(PyObject* self, PyObject* key, PyObject* value) {
  Py_ssize_t i;
  if (PySlice_Check(key)) {
    PyObject* r = value == NULL ? PyObject_CallMethod(self, "_del_slice", "O", key)
                                : PyObject_CallMethod(self, "_set_slice", "OO", key, value);
    Py_XDECREF(r);
    return r == NULL ? -1 : 0;
  }
  if (pf_list_index(key, &i) != 0) return -1;
  int rc;
  if (value == NULL) {
    PFValue out;
    int code;
    rc = pf_api->ListPop(pf_live(self), i, &out, &code);
    if (rc == 0) pf_release_value(&out, code);
  } else {
    pf_enc e;
    memset(&e, 0, sizeof(e));
    PFValue v;
    int code;
    PFByteArray ba;
    if (pf_enc_any(&e, value, &v, &code, &ba, "the value given to List.__setitem__") != 0) {
      pf_enc_done(&e);
      return -1;
    }
    void* h = pf_live(self);
    Py_BEGIN_ALLOW_THREADS rc = pf_api->ListSetItem(h, i, v, code);
    Py_END_ALLOW_THREADS pf_enc_done(&e);
  }
  if (rc != 0) {
    pf_list_index_error("list assignment index out of range");
    return -1;
  }
  return 0;
}

static int pf_list_contains(PyObject* self, PyObject* x) {
  PyObject* all = pf_list_values(self, NULL);
  if (all == NULL) return -1;
  int rc = PySequence_Contains(all, x);
  Py_DECREF(all);
  return rc;
}

static PyObject* pf_list_iter(PyObject* self) {
  PyObject* all = pf_list_values(self, NULL);
  if (all == NULL) return NULL;
  PyObject* it = PyObject_GetIter(all);
  Py_DECREF(all);
  return it;
}

/* Encodes the items of `seq` (a list or tuple) into room r; `what` names
 * them in the package's errors ("item 3 given to List.extend"). */
static int pf_enc_items(pf_enc* e, PyObject* seq, pf_room* r, const char* what) {
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  if (pf_room_take(r, n) != 0) return -1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    char pos[96];
    PyOS_snprintf(pos, sizeof pos, "item %zd given to %s", i, what);
    if (pf_enc_any(e, items[i], &r->v[i], &r->c[i], &r->b[i], pos) != 0) return -1;
  }
  return 0;
}

/* What an operation that writes many values encodes them into: the
 * encoding (with what it holds) and the room for the values. */
typedef struct {
  pf_enc e;
  pf_room r;
} pf_batch;

static void pf_batch_init(pf_batch* b) {
  memset(&b->e, 0, sizeof(b->e));
  b->r.heap = NULL;
}

/* Ends a batch: None after rc 0, else NULL (the error is raised). */
static PyObject* pf_batch_done(pf_batch* b, int rc) {
  PyMem_Free(b->r.heap);
  pf_enc_done(&b->e);
  if (rc != 0) return NULL;
  Py_RETURN_NONE;
}

/* Runs a List call that takes `n` encoded values, `items` (a list or
 * tuple). kind: 'e' ListExtend, 'r' ListReplace(start, count). */
static PyObject* pf_list_put(PyObject* self, PyObject* items, const char* what, int kind,
                             int64_t start, int64_t count) {
  pf_batch b;
  pf_batch_init(&b);
  int rc = -1;
  if (pf_enc_items(&b.e, items, &b.r, what) == 0) {
    int64_t n = PySequence_Fast_GET_SIZE(items);
    PFValue* v = b.r.v;
    int* c = b.r.c;
    void* h = pf_live(self);
    Py_BEGIN_ALLOW_THREADS rc = kind == 'e' ? pf_api->ListExtend(h, v, c, n)
                                            : pf_api->ListReplace(h, start, count, v, c, n);
    Py_END_ALLOW_THREADS if (rc != 0) pf_raise_last();
  }
  return pf_batch_done(&b, rc);
}

static PyObject* pf_list_append(PyObject* self, PyObject* x) {
  pf_enc e;
  memset(&e, 0, sizeof(e));
  PFValue v;
  int code, rc = -1;
  PFByteArray ba;
  if (pf_enc_any(&e, x, &v, &code, &ba, "the value given to List.append") == 0) {
    rc = pf_api->ListAppend(pf_live(self), v, code); /* drops nothing: keeps the GIL */
    if (rc != 0) pf_raise_last();
  }
  pf_enc_done(&e);
  if (rc != 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject* pf_list_insert(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  if (n != 2) {
    PyErr_Format(PyExc_TypeError, "insert expected 2 arguments, got %zd", n);
    return NULL;
  }
  Py_ssize_t i;
  if (pf_ssize_arg(args[0], &i) != 0) return NULL;
  if (i < 0) {
    /* As list.insert: counted from the end, then clipped to the front. */
    Py_ssize_t size = pf_list_length(self);
    if (size < 0) return NULL;
    i = i + size < 0 ? 0 : i + size;
  }
  PyObject* one = PyTuple_Pack(1, args[1]);
  if (one == NULL) return NULL;
  PyObject* out = pf_list_put(self, one, "List.insert", 'r', i, 0);
  Py_DECREF(one);
  return out;
}

static PyObject* pf_list_extend(PyObject* self, PyObject* iterable) {
  if (PyObject_TypeCheck(iterable, &pf_array_base_type) ||
      PyObject_TypeCheck(iterable, &pf_list_base_type)) {
    /* C's own values, as they are: no conversion to Python and back. */
    void* snap = NULL;
    PyObject* source = iterable;
    if (PyObject_TypeCheck(iterable, &pf_list_base_type)) {
      if ((snap = pf_snapshot_of(iterable)) == NULL) return NULL;
      source = pf_adopt((PyTypeObject*)pf_array_cls, snap, kPFObjectArray);
      if (source == NULL) return NULL;
    } else {
      Py_INCREF(source);
    }
    PFValue* v;
    int* c;
    int64_t n;
    int rc = pf_raw_values(source, &v, &c, &n);
    if (rc == 0) {
      void* h = pf_live(self);
      Py_BEGIN_ALLOW_THREADS rc = pf_api->ListExtend(h, v, c, n);
      Py_END_ALLOW_THREADS PyMem_Free(v);
      if (rc != 0) pf_raise_last();
    }
    Py_DECREF(source);
    if (rc != 0) return NULL;
    Py_RETURN_NONE;
  }
  /* A list is copied first: an item's conversion (a hook) may change it. */
  PyObject* seq = PyList_Check(iterable)
                      ? PyList_GetSlice(iterable, 0, PY_SSIZE_T_MAX)
                      : PySequence_Fast(iterable, "List.extend: argument must be iterable");
  if (seq == NULL) return NULL;
  PyObject* out = pf_list_put(self, seq, "List.extend", 'e', 0, 0);
  Py_DECREF(seq);
  return out;
}

/* _replace(start, count, values): the items [start, start + count)
 * (clipped) become `values` (a list or tuple), as one change. */
static PyObject* pf_list_replace(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  if (n != 3 || !(PyList_Check(args[2]) || PyTuple_Check(args[2]))) {
    PyErr_SetString(PyExc_TypeError, "_replace(start, count, values: list or tuple)");
    return NULL;
  }
  Py_ssize_t start = PyNumber_AsSsize_t(args[0], PyExc_OverflowError);
  if (start == -1 && PyErr_Occurred()) return NULL;
  Py_ssize_t count = PyNumber_AsSsize_t(args[1], PyExc_OverflowError);
  if (count == -1 && PyErr_Occurred()) return NULL;
  return pf_list_put(self, args[2], "List", 'r', start, count);
}

static PyObject* pf_list_pop(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  Py_ssize_t i = -1;
  if (n > 1) {
    PyErr_Format(PyExc_TypeError, "pop expected at most 1 argument, got %zd", n);
    return NULL;
  }
  if (n == 1 && pf_ssize_arg(args[0], &i) != 0) return NULL;
  PFValue v;
  int code, cache;
  if (pf_api->ListPop(pf_live(self), i, &v, &code) != 0) {
    int64_t size = 1;
    if (pf_error_is("IndexError") && pf_api->ListGetSize(PF_HANDLE(self), &size) != 0) size = 1;
    pf_list_index_error(size == 0 ? "pop from empty list" : "pop index out of range");
    return NULL;
  }
  return pf_decode(&v, code, 0, "List", &cache);
}

/* _assign_from(array, order): the List's items become array[order[0]],
 * array[order[1]], ... (the Array's own values, as they are), as one
 * change: sort and reverse permute a snapshot with it. */
static PyObject* pf_list_assign_from(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  if (n != 2 || !PyObject_TypeCheck(args[0], &pf_array_base_type)) {
    PyErr_SetString(PyExc_TypeError, "_assign_from(array, order)");
    return NULL;
  }
  PyObject* order = PySequence_Fast(args[1], "_assign_from: order must be a sequence");
  if (order == NULL) return NULL;
  PFValue* v = NULL;
  int* c = NULL;
  int64_t size;
  PyObject* out = NULL;
  if (pf_raw_values(args[0], &v, &c, &size) != 0) goto done;
  Py_ssize_t m = PySequence_Fast_GET_SIZE(order);
  PFValue* pv = PyMem_Malloc((size_t)(m ? m : 1) * (sizeof(PFValue) + sizeof(int)));
  if (pv == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  int* pc = (int*)(pv + m);
  for (Py_ssize_t i = 0; i < m; ++i) {
    Py_ssize_t j = PyNumber_AsSsize_t(PySequence_Fast_GET_ITEM(order, i), PyExc_IndexError);
    if (j == -1 && PyErr_Occurred()) goto free_pv;
    if (j < 0 || j >= size) {
      PyErr_SetString(PyExc_IndexError, "_assign_from: position out of range");
      goto free_pv;
    }
    pv[i] = v[j];
    pc[i] = c[j];
  }
  int rc;
  void* h = pf_live(self);
  Py_BEGIN_ALLOW_THREADS rc = pf_api->ListReplace(h, 0, INT64_MAX, pv, pc, m);
  Py_END_ALLOW_THREADS if (rc != 0) { pf_raise_last(); }
  else {
    Py_INCREF(Py_None);
    out = Py_None;
  }
free_pv:
  PyMem_Free(pv);
done:
  PyMem_Free(v);
  Py_DECREF(order);
  return out;
}

/* _from_array(array): a new List (of the class it is called on) of an
 * Array's values, as they are. */
static PyObject* pf_list_from_array(PyObject* cls, PyObject* source) {
  PFValue* v;
  int* c;
  int64_t n;
  if (pf_raw_values(source, &v, &c, &n) != 0) return NULL;
  void* out = NULL;
  int rc = pf_api->ListCreate(v, c, n, &out);
  PyMem_Free(v);
  if (rc != 0) return pf_raise_last();
  return pf_adopt((PyTypeObject*)cls, out, kPFObjectList);
}

/* _from_values(values): a new List of the values of a list or tuple. */
static PyObject* pf_list_from_values(PyObject* cls, PyObject* values) {
  PyObject* seq = PySequence_Fast(values, "List: argument must be iterable");
  if (seq == NULL) return NULL;
  pf_batch b;
  pf_batch_init(&b);
  void* out = NULL;
  PyObject* self = NULL;
  if (pf_enc_items(&b.e, seq, &b.r, "List") == 0) {
    if (pf_api->ListCreate(b.r.v, b.r.c, PySequence_Fast_GET_SIZE(seq), &out) != 0) pf_raise_last();
    else self = pf_adopt((PyTypeObject*)cls, out, kPFObjectList);
  }
  Py_XDECREF(pf_batch_done(&b, 0));
  Py_DECREF(seq);
  return self;
}

static PyMethodDef pf_list_methods[] = {
    {"append", pf_list_append, METH_O, "append(x): adds x at the end"},
    {"insert", (PyCFunction)(void (*)(void))pf_list_insert, METH_FASTCALL,
     "insert(index, x): inserts x before index (clipped, as list.insert)"},
    {"extend", pf_list_extend, METH_O, "extend(iterable): appends its items, as one change"},
    {"pop", (PyCFunction)(void (*)(void))pf_list_pop, METH_FASTCALL,
     "pop(index=-1): removes and returns the item at index"},
    {"clear", pf_mutable_clear, METH_NOARGS, "clear(): removes every item"},
    {"_values", pf_list_values, METH_NOARGS, "the values now, as a new list"},
    {"_snapshot", pf_mutable_snapshot, METH_NOARGS, "an Array of the items now"},
    {"_replace", (PyCFunction)(void (*)(void))pf_list_replace, METH_FASTCALL,
     "_replace(start, count, values): one change, as PFListReplace"},
    {"_assign_from", (PyCFunction)(void (*)(void))pf_list_assign_from, METH_FASTCALL,
     "_assign_from(array, order): the items become array's, in that order"},
    {"_from_array", pf_list_from_array, METH_O | METH_CLASS,
     "_from_array(array): a new List of an Array's values"},
    {"_from_values", pf_list_from_values, METH_O | METH_CLASS,
     "_from_values(values): a new List of the values of a list or tuple"},
    {NULL, NULL, 0, NULL},
};

static void pf_mutable_dealloc(PyObject* self) { pf_object_dealloc_as(self, pf_object_clear); }

PF_CONTAINER_BASE(list, "List", pf_object, pf_list_ass_subscript, pf_mutable_dealloc,
                  pf_mutable_traverse, pf_object_clear);

/* ------------------------------------------------------------------------ */
/* DictBase                                                                 */
/* ------------------------------------------------------------------------ */

static Py_ssize_t pf_dict_length(PyObject* self) {
  int64_t n;
  if (pf_api->DictGetSize(pf_live(self), &n) != 0) return pf_raise_last_int();
  return (Py_ssize_t)n;
}

/* Looks key up: 1 with *out (new reference; NULL to test membership
 * only), 0 when absent, -1 with an exception. */
static int pf_dict_lookup(PyObject* self, PyObject* key, PyObject** out) {
  pf_enc e;
  memset(&e, 0, sizeof(e));
  PFValue k, v;
  int kc, vc = kPFNull, found = 0, cache;
  PFByteArray ba;
  int rc = pf_enc_dict_key(&e, key, &k, &kc, &ba, 1, "the key given to a Dict lookup");
  if (rc == 1) {
    rc = pf_api->DictGetItem(pf_live(self), k, kc, out ? &v : NULL, out ? &vc : NULL, &found);
    if (rc != 0) {
      rc = pf_raise_last_int();
    } else if (!found) {
      rc = 0;
    } else {
      rc = 1;
      if (out != NULL && (*out = pf_decode(&v, vc, 0, "Dict", &cache)) == NULL) rc = -1;
    }
  }
  pf_enc_done(&e);
  return rc;
}

static PyObject* pf_dict_subscript(PyObject* self, PyObject* key) {
  PyObject* out = NULL;
  int rc = pf_dict_lookup(self, key, &out);
  if (rc == 0) pf_set_key_error(key);
  return rc == 1 ? out : NULL;
}

static int pf_dict_contains(PyObject* self, PyObject* key) {
  return pf_dict_lookup(self, key, NULL);
}

/* Removes key: 1 with *out its value (new reference; or, with out NULL,
 * the value dropped), 0 when absent, -1 with an exception. */
static int pf_dict_remove(PyObject* self, PyObject* key, PyObject** out) {
  pf_enc e;
  memset(&e, 0, sizeof(e));
  PFValue k, v;
  int kc, vc, cache;
  PFByteArray ba;
  int rc = pf_enc_dict_key(&e, key, &k, &kc, &ba, 1, "the key given to a Dict removal");
  if (rc == 1) {
    void* h = pf_live(self);
    Py_BEGIN_ALLOW_THREADS /* the key is released after the Dict's lock */
        rc = pf_api->DictPop(h, k, kc, &v, &vc);
    Py_END_ALLOW_THREADS if (rc == 0) {
      rc = 1;
      if (out == NULL) pf_release_value(&v, vc);
      else if ((*out = pf_decode(&v, vc, 0, "Dict", &cache)) == NULL) rc = -1;
    }
    else if (pf_error_is("KeyError")) {
      pf_api->ErrorClear();
      rc = 0;
    }
    else {
      rc = pf_raise_last_int();
    }
  }
  pf_enc_done(&e);
  return rc;
}

static int pf_dict_ass_subscript(PyObject* self, PyObject* key, PyObject* value) {
  if (value == NULL) {
    int rc = pf_dict_remove(self, key, NULL);
    if (rc == 0) pf_set_key_error(key);
    return rc == 1 ? 0 : -1;
  }
  pf_enc e;
  memset(&e, 0, sizeof(e));
  PFValue k, v;
  int kc, vc, rc = -1;
  PFByteArray kb, vb;
  if (pf_enc_dict_key(&e, key, &k, &kc, &kb, 0, "the key given to Dict.__setitem__") == 1 &&
      pf_enc_any(&e, value, &v, &vc, &vb, "the value given to Dict.__setitem__") == 0) {
    void* h = pf_live(self);
    Py_BEGIN_ALLOW_THREADS /* the value replaced is released after the lock */
        rc = pf_api->DictSetItem(h, k, kc, v, vc);
    Py_END_ALLOW_THREADS if (rc != 0) pf_raise_last();
  }
  pf_enc_done(&e);
  return rc;
}

/* The keys, values or (key, value) pairs now (what: 'k', 'v', 'p'), from
 * one snapshot, in a new list. */
static PyObject* pf_dict_read(PyObject* self, int what) {
  void* a = pf_snapshot_of(self);
  if (a == NULL) return NULL;
  int64_t n;
  PFValue* v = NULL;
  int* c;
  PyObject* out = NULL;
  if (pf_api->ArrayGetSize(a, &n) != 0) {
    pf_raise_last();
    goto done;
  }
  v = PyMem_Malloc((size_t)(n ? n : 1) * (sizeof(PFValue) + sizeof(int)));
  if (v == NULL) {
    PyErr_NoMemory();
    goto done;
  }
  c = (int*)(v + n);
  if (pf_api->ArrayGetItems(a, 0, n, v, c) != 0) {
    pf_raise_last();
    goto done;
  }
  out = PyList_New((Py_ssize_t)(n / 2));
  for (int64_t i = 0; out != NULL && i < n / 2; ++i) {
    int cache;
    PyObject *k = NULL, *x = NULL, *item;
    if (what != 'v' && (k = pf_decode(&v[2 * i], c[2 * i], 1, "Dict", &cache)) == NULL) goto fail;
    if (what != 'k' && (x = pf_decode(&v[2 * i + 1], c[2 * i + 1], 1, "Dict", &cache)) == NULL)
      goto fail;
    if (what == 'p') {
      item = PyTuple_Pack(2, k, x);
      Py_DECREF(k);
      Py_DECREF(x);
      if (item == NULL) goto fail_item;
    } else {
      item = what == 'k' ? k : x;
    }
    PyList_SET_ITEM(out, (Py_ssize_t)i, item);
    continue;
  fail:
    Py_XDECREF(k);
    Py_XDECREF(x);
  fail_item:
    Py_CLEAR(out);
  }
done:
  PyMem_Free(v);
  pf_release(a);
  return out;
}

static PyObject* pf_dict_keys(PyObject* self, PyObject* unused) {
  (void)unused;
  return pf_dict_read(self, 'k');
}

static PyObject* pf_dict_values(PyObject* self, PyObject* unused) {
  (void)unused;
  return pf_dict_read(self, 'v');
}

static PyObject* pf_dict_pairs(PyObject* self, PyObject* unused) {
  (void)unused;
  return pf_dict_read(self, 'p');
}

static PyObject* pf_dict_iter(PyObject* self) {
  PyObject* keys = pf_dict_read(self, 'k');
  if (keys == NULL) return NULL;
  PyObject* it = PyObject_GetIter(keys);
  Py_DECREF(keys);
  return it;
}

static PyObject* pf_dict_get(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  if (pf_one_or_two("get", n) != 0) return NULL;
  PyObject* out = NULL;
  int rc = pf_dict_lookup(self, args[0], &out);
  if (rc != 0) return rc == 1 ? out : NULL;
  out = n == 2 ? args[1] : Py_None;
  Py_INCREF(out);
  return out;
}

static PyObject* pf_dict_pop(PyObject* self, PyObject* const* args, Py_ssize_t n) {
  if (pf_one_or_two("pop", n) != 0) return NULL;
  PyObject* out = NULL;
  int rc = pf_dict_remove(self, args[0], &out);
  if (rc != 0) return rc == 1 ? out : NULL;
  if (n == 1) {
    pf_set_key_error(args[0]);
    return NULL;
  }
  Py_INCREF(args[1]);
  return args[1];
}

/* Encodes (key, value) pairs (a list or tuple of pairs) into room r: keys
 * at r->v[n ..), values at r->v[0 .. n). */
static int pf_enc_pairs(pf_enc* e, PyObject* pairs, pf_room* r, const char* what) {
  Py_ssize_t n = PySequence_Fast_GET_SIZE(pairs);
  PyObject** items = PySequence_Fast_ITEMS(pairs);
  if (pf_room_take(r, 2 * n) != 0) return -1;
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject* pair = items[i];
    if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
      PyErr_Format(PyExc_TypeError, "%s: pair %zd is not a (key, value) tuple", what, i);
      return -1;
    }
    char pos[96];
    PyOS_snprintf(pos, sizeof pos, "key %zd given to %s", i, what);
    if (pf_enc_dict_key(e, PyTuple_GET_ITEM(pair, 0), &r->v[n + i], &r->c[n + i], &r->b[n + i], 0,
                        pos) != 1)
      return -1;
    PyOS_snprintf(pos, sizeof pos, "value %zd given to %s", i, what);
    if (pf_enc_any(e, PyTuple_GET_ITEM(pair, 1), &r->v[i], &r->c[i], &r->b[i], pos) != 0) return -1;
  }
  return 0;
}

/* _update(pairs): sets every (key, value) of a list of pairs, in order, as
 * one change. */
static PyObject* pf_dict_update_pairs(PyObject* self, PyObject* pairs) {
  if (!PyList_Check(pairs) && !PyTuple_Check(pairs)) {
    PyErr_SetString(PyExc_TypeError, "_update(pairs: list or tuple)");
    return NULL;
  }
  pf_batch b;
  pf_batch_init(&b);
  int rc = -1;
  if (pf_enc_pairs(&b.e, pairs, &b.r, "Dict.update") == 0) {
    int64_t n = PySequence_Fast_GET_SIZE(pairs);
    PFValue* v = b.r.v;
    int* c = b.r.c;
    void* h = pf_live(self);
    Py_BEGIN_ALLOW_THREADS rc = pf_api->DictUpdate(h, v + n, c + n, v, c, n);
    Py_END_ALLOW_THREADS if (rc != 0) pf_raise_last();
  }
  return pf_batch_done(&b, rc);
}

/* _from_array(source): a new Dict of a Map's entries or of a Dict's
 * snapshot (key, value, key, ...), as they are. */
static PyObject* pf_dict_from_array(PyObject* cls, PyObject* source) {
  PFValue* v;
  int* c;
  int64_t n;
  if (pf_raw_values(source, &v, &c, &n) != 0) return NULL;
  int64_t entries = n;
  PFValue* kv = v;
  int* kc = c;
  PFValue* vv = v + n;
  int* vcodes = c + n;
  PFValue* split = NULL;
  if (!PyObject_TypeCheck(source, &pf_map_base_type)) {
    /* A snapshot: key, value, key, ...: split in two. */
    entries = n / 2;
    split = PyMem_Malloc((size_t)(n ? n : 1) * (sizeof(PFValue) + sizeof(int)));
    if (split == NULL) {
      PyMem_Free(v);
      return PyErr_NoMemory();
    }
    kv = split;
    vv = split + entries;
    kc = (int*)(split + n);
    vcodes = kc + entries;
    for (int64_t i = 0; i < entries; ++i) {
      kv[i] = v[2 * i];
      kc[i] = c[2 * i];
      vv[i] = v[2 * i + 1];
      vcodes[i] = c[2 * i + 1];
    }
  }
  void* out = NULL;
  int rc = pf_api->DictCreate(kv, kc, vv, vcodes, entries, &out);
  PyMem_Free(split);
  PyMem_Free(v);
  if (rc != 0) return pf_raise_last();
  return pf_adopt((PyTypeObject*)cls, out, kPFObjectDict);
}

/* _from_pairs(pairs): a new Dict of (key, value) pairs (a later key
 * replaces an equal earlier one's value, as in dict()). */
static PyObject* pf_dict_from_pairs(PyObject* cls, PyObject* pairs) {
  void* out = NULL;
  if (pf_api->DictCreate(NULL, NULL, NULL, NULL, 0, &out) != 0) return pf_raise_last();
  PyObject* self = pf_adopt((PyTypeObject*)cls, out, kPFObjectDict);
  if (self == NULL) return NULL;
  PyObject* r = pf_dict_update_pairs(self, pairs);
  if (r == NULL) Py_CLEAR(self);
  Py_XDECREF(r);
  return self;
}

static PyMethodDef pf_dict_methods[] = {
    {"get", (PyCFunction)(void (*)(void))pf_dict_get, METH_FASTCALL,
     "get(key, default=None) -> the value of key, or default"},
    {"pop", (PyCFunction)(void (*)(void))pf_dict_pop, METH_FASTCALL,
     "pop(key[, default]) -> removes key and returns its value (default, if given, "
     "when absent)"},
    {"clear", pf_mutable_clear, METH_NOARGS, "clear(): removes every entry"},
    {"_keys", pf_dict_keys, METH_NOARGS, "the keys now, as a new list"},
    {"_values", pf_dict_values, METH_NOARGS, "the values now, as a new list"},
    {"_pairs", pf_dict_pairs, METH_NOARGS, "the (key, value) pairs now, as a new list"},
    {"_snapshot", pf_mutable_snapshot, METH_NOARGS,
     "an Array of the entries now: key, value, key, ..."},
    {"_update", pf_dict_update_pairs, METH_O, "_update(pairs): one change, as PFDictUpdate"},
    {"_from_array", pf_dict_from_array, METH_O | METH_CLASS,
     "_from_array(map or snapshot): a new Dict of those entries"},
    {"_from_pairs", pf_dict_from_pairs, METH_O | METH_CLASS,
     "_from_pairs(pairs): a new Dict of (key, value) pairs"},
    {NULL, NULL, 0, NULL},
};

PF_CONTAINER_BASE(dict, "Dict", pf_object, pf_dict_ass_subscript, pf_mutable_dealloc,
                  pf_mutable_traverse, pf_object_clear);

/* ------------------------------------------------------------------------ */
/* Module functions                                                         */
/* ------------------------------------------------------------------------ */

/* What set_container_hooks sets, by keyword. */
static const struct {
  const char* name;
  PyObject** slot;
  int is_class; /* 1: a subclass of the base below; 0: a callable */
  PyTypeObject* base;
} pf_container_hooks[] = {
    {"array_class", &pf_array_cls, 1, &pf_array_base_type},
    {"map_class", &pf_map_cls, 1, &pf_map_base_type},
    {"list_class", &pf_list_cls, 1, &pf_list_base_type},
    {"dict_class", &pf_dict_cls, 1, &pf_dict_base_type},
    {"shape_class", &pf_shape_cls, 1, &pf_object_base_type},
    {"decode", &pf_hook_decode, 0, NULL},
    {"encode", &pf_hook_encode, 0, NULL},
    {"dict_key", &pf_hook_dict_key, 0, NULL},
    {"map_key", &pf_hook_map_key, 0, NULL},
    {"raise_last_error", &pf_hook_raise, 0, NULL},
    {"track", &pf_hook_track, 0, NULL},
};

/* set_container_hooks(**hooks): the package's classes and functions that
 * the code here uses; each keyword sets one, checked (TypeError). */
static PyObject* pf_set_container_hooks(PyObject* module, PyObject* args, PyObject* kwargs) {
  (void)module;
  if (PyTuple_GET_SIZE(args) != 0 || kwargs == NULL) {
    PyErr_SetString(PyExc_TypeError, "_cext.set_container_hooks takes keyword arguments only");
    return NULL;
  }
  if (pf_hole == NULL && (pf_hole = PyObject_CallNoArgs((PyObject*)&PyBaseObject_Type)) == NULL)
    return NULL;
  if (pf_dims_name == NULL && (pf_dims_name = PyUnicode_InternFromString("_dims")) == NULL)
    return NULL;
  Py_ssize_t used = 0;
  for (size_t i = 0; i < sizeof pf_container_hooks / sizeof pf_container_hooks[0]; ++i) {
    PyObject* v = PyDict_GetItemString(kwargs, pf_container_hooks[i].name);
    if (v == NULL) continue;
    ++used;
    int ok = pf_container_hooks[i].is_class
                 ? PyType_Check(v) && PyType_IsSubtype((PyTypeObject*)v, pf_container_hooks[i].base)
                 : PyCallable_Check(v);
    if (!ok) {
      PyErr_Format(PyExc_TypeError, "_cext.set_container_hooks: %s must be a %s",
                   pf_container_hooks[i].name,
                   pf_container_hooks[i].is_class ? "subclass of its base" : "callable");
      return NULL;
    }
    Py_INCREF(v);
    Py_XSETREF(*pf_container_hooks[i].slot, v);
  }
  if (used != PyDict_GET_SIZE(kwargs)) {
    PyErr_SetString(PyExc_TypeError, "_cext.set_container_hooks: unknown keyword");
    return NULL;
  }
  Py_RETURN_NONE;
}

/* should_track() -> whether new wrappers must be tracked for the cycle
 * collection (C holds a Python object, or a List or Dict was seen). */
static PyObject* pf_should_track_py(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  return PyBool_FromLong(pf_should_track());
}

/* refs_may_change(): from now on every wrapper is tracked (see
 * _holds.refs_may_change). */
static PyObject* pf_refs_may_change_py(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  pf_refs_change = 1;
  Py_RETURN_NONE;
}

PyMethodDef pf_container_methods[] = {
    {"adopt_object", (PyCFunction)(void (*)(void))pf_adopt_object, METH_FASTCALL,
     "adopt_object(cls, handle, type_index) -> an Object taking over the reference"},
    {"set_container_hooks", (PyCFunction)(void (*)(void))pf_set_container_hooks,
     METH_VARARGS | METH_KEYWORDS, "set_container_hooks(**the package's classes and functions)"},
    {"should_track", pf_should_track_py, METH_NOARGS,
     "should_track() -> whether container and function wrappers are tracked (_holds)"},
    {"refs_may_change", pf_refs_may_change_py, METH_NOARGS,
     "refs_may_change(): every wrapper is tracked from now on (_holds)"},
    {NULL, NULL, 0, NULL},
};
