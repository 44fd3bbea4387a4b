/*
 * packedfunc._cext: the compiled fast path of the Python binding.
 *
 * It speeds up what the pure-ctypes package already does, and does nothing
 * that package cannot: a Function call converts the common argument types
 * here (int, float, bool, None, str, bytes, Function, Object, DataType,
 * Device, and arrays of the types the package has seen cross through
 * __dlpack__) and the plain result types, and hands every other call, and
 * every value it would have to refuse, to the package's own general path,
 * which raises the package's errors. A Python callback that C calls enters
 * through a C trampoline that takes the GIL itself, converts the plain
 * types here and hands the others to the package's decoder and encoder
 * tables. So the ctypes path stays the one reference for every value and
 * every error message. Host objects (Python objects that C holds, through
 * the holds below, which the package lends to the cycle collector) and the
 * signal checker are here too, so that C reaches Python without ctypes.
 *
 * The library is reached only through its versioned function table
 * (PFGetApiBase), whose address the package passes from the copy of
 * libpackedfunc that ctypes loaded: the extension links to no copy of its
 * own, and cannot bind to a different one. The hooks into the package are
 * set once, at import, before any call, and only read afterwards.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

#include <stdint.h>
#include <string.h>

#include "cext.h"

PyMODINIT_FUNC PyInit__cext(void);

/* The API version whose slots the extension uses (the bulk readers, List
 * and Dict: 8; keyword calls: 10; a function's flags: 11). */
#define PF_CEXT_API_VERSION 11
/* Calls with more arguments than this take the package's general path. */
#define PF_CEXT_MAX_ARGS 8

const PFApi* pf_api;

/* 0 when an entry point got the `want` arguments that `usage` shows; else
 * -1 with a TypeError showing it. */
static int pf_expect_args(Py_ssize_t n, Py_ssize_t want, const char* usage) {
  if (n == want) return 0;
  PyErr_Format(PyExc_TypeError, "_cext.%s", usage);
  return -1;
}

/* The thread state that this thread gave up to call C through a Function,
 * while that call runs and no callback of it has taken the GIL back; NULL
 * otherwise. A callback on this thread resumes it directly. */
static _Thread_local PyThreadState* pf_released __attribute__((tls_model("initial-exec")));
/* This thread's state while it calls C through a Function that keeps the
 * GIL (and holds it); NULL otherwise. A callback on this thread then runs
 * at once, with no GIL switch. */
static _Thread_local PyThreadState* pf_kept __attribute__((tls_model("initial-exec")));

/* The thread state that holds the GIL, if any (no check, no error). */
#if PY_VERSION_HEX >= 0x030D0000
#define pf_current_thread_state() PyThreadState_GetUnchecked()
#else
#define pf_current_thread_state() _PyThreadState_UncheckedGet()
#endif

/* The package's functions that the fast paths defer to (see set_hooks). */
static PyObject* pf_hook_call_general;  /* (func, args, False) -> result */
static PyObject* pf_hook_call_kw;       /* (func, args, kwargs) -> result */
static PyObject* pf_hook_call_failed;   /* (func) -> raises the error */
static PyObject* pf_hook_decode_result; /* (address, code) -> value */
static PyObject* pf_hook_callback_args; /* (fn, args address, codes bytes, n) -> result */
static PyObject* pf_hook_set_return;    /* (ret address, value) -> status */
static PyObject* pf_hook_record;        /* (exception, skip_frames) -> -1 */
/* The package's tables that the fast path reads and writes (with the GIL):
 * the set of types whose values cross as borrowed DLTensors through their
 * __dlpack__, and the DLTensors in calls in progress -> their objects. */
static PyObject* pf_tensor_types;
static PyObject* pf_tensors_in_flight;
/* The package's classes whose values cross by their fields: DataType and
 * Device as the plain values they hold. (An Object crosses as its handle
 * with its own type code: ObjectBase's fields, objects.h.) */
static PyObject* pf_dtype_type;
static PyObject* pf_device_type;

/* ------------------------------------------------------------------------ */
/* FunctionBase: the handle, the parameter conversions, vectorcall          */
/* ------------------------------------------------------------------------ */

typedef struct {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  unsigned long long handle; /* PFFunctionHandle; 0 once released */
  PyObject* conversions;     /* the package's cache of parameters converted first */
  Py_ssize_t fill;           /* positional calls with fewer arguments take defaults: the
                                package's general path; PY_SSIZE_T_MAX until it looks */
  int keep_gil;              /* 1: calls keep the GIL (kPFFuncNonBlocking, or Python's
                                release_gil = False); 0: they release it */
  /* The resolved call target of `handle` (PFFuncResolve), set with it at
   * adopt() and never changed: valid while the handle is held. NULL when
   * the handle is not resolvable, or released: calls then go through the
   * library's checked entries, which say so. */
  PFDirectCFunc entry;
  void* ctx;
  /* Calls in progress that use `handle` (this Function called, or passed
   * as an argument), counted with the GIL held. release() while some are
   * in progress moves the handle to `pending`, which the last of them
   * frees: the handle and its target stay valid until they end. */
  Py_ssize_t busy;
  unsigned long long pending;
} PFCextFunction;

static PyTypeObject pf_function_type;

/* The package's general path for a call: args[0 .. n) are positional, and
 * the nkw values after them the keywords that kwnames names. */
static PyObject* pf_call_general(PyObject* self, PyObject* const* args, Py_ssize_t n,
                                 PyObject* kwnames, Py_ssize_t nkw) {
  PyObject* tuple = PyTuple_New(n);
  if (tuple == NULL) return NULL;
  for (Py_ssize_t i = 0; i < n; ++i) {
    Py_INCREF(args[i]);
    PyTuple_SET_ITEM(tuple, i, args[i]);
  }
  PyObject* out;
  if (nkw == 0) {
    out = PyObject_CallFunctionObjArgs(pf_hook_call_general, self, tuple, Py_False, NULL);
  } else {
    PyObject* kwargs = PyDict_New();
    int rc = kwargs == NULL ? -1 : 0;
    for (Py_ssize_t i = 0; rc == 0 && i < nkw; ++i)
      rc = PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[n + i]);
    out = rc == 0 ? PyObject_CallFunctionObjArgs(pf_hook_call_kw, self, tuple, kwargs, NULL) : NULL;
    Py_XDECREF(kwargs);
  }
  Py_DECREF(tuple);
  return out;
}

/* A Python value for a PFValue: the plain types here, any other type code
 * through the package's decoder table. For a call's result (`result`
 * true) that is the decode_result hook, which reads `*value` and takes over
 * its handles (new references). For a callback's argument (`result` false)
 * the answer is then NULL without an exception: the trampoline hands the
 * whole call to the package, whose decoders take their own reference to
 * each borrowed handle. Inline: it is on the hot path of every call and
 * every callback. */
static inline PyObject* pf_value(PFValue* value, int code, int result) {
  switch (code) {
    case kPFInt:
      return PyLong_FromLongLong(value->v_int64);
    case kPFFloat:
      return PyFloat_FromDouble(value->v_float64);
    case kPFBool:
      return PyBool_FromLong(value->v_int64 != 0);
    case kPFNull:
      Py_RETURN_NONE;
    case kPFStr:
      return PyUnicode_DecodeUTF8(value->v_str, (Py_ssize_t)strlen(value->v_str),
                                  "surrogateescape");
    case kPFBytes: {
      const PFByteArray* ba = value->v_handle;
      return PyBytes_FromStringAndSize(ba->size ? ba->data : "", (Py_ssize_t)ba->size);
    }
    default: {
      if (code == kPFObjectHandle) {
        /* Containers convert in containers.c; any other object below. */
        PyObject* out = pf_container_value(value->v_handle, result);
        if (out != NULL || PyErr_Occurred()) return out;
      }
      if (!result) return NULL;
      PyObject* addr = PyLong_FromVoidPtr(value);
      if (addr == NULL) return NULL;
      return PyObject_CallFunction(pf_hook_decode_result, "Ni", addr, code);
    }
  }
}

/* x.__dlpack__(), checked to be a DLPack capsule; NULL with an exception.
 * The capsule is not consumed: its destructor frees the export. A
 * DLManagedTensor begins with its DLTensor, so the capsule's pointer is
 * the DLTensor's address. */
static PyObject* pf_dlpack_export(PyObject* x) {
  PyObject* capsule = PyObject_CallMethod(x, "__dlpack__", NULL);
  if (capsule != NULL && !PyCapsule_IsValid(capsule, "dltensor")) {
    Py_DECREF(capsule);
    PyErr_SetString(PyExc_TypeError, "not a DLPack capsule");
    return NULL;
  }
  return capsule;
}

/* The destructor of the capsules that dlpack_capsule makes: runs the
 * managed tensor's deleter unless a consumer took the capsule over (renamed
 * it). A consumer that fails drops the capsule with its own error pending,
 * which is kept. Nothing is freed once the interpreter is finalizing, as
 * elsewhere in the package. */
static void pf_capsule_destructor(PyObject* capsule) {
#if PY_VERSION_HEX >= 0x030D0000
  if (Py_IsFinalizing()) return;
#else
  if (_Py_IsFinalizing()) return;
#endif
#if PY_VERSION_HEX >= 0x030C0000
  PyObject* pending = PyErr_GetRaisedException();
#else
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
#endif
  if (PyCapsule_IsValid(capsule, "dltensor")) {
    DLManagedTensor* m = PyCapsule_GetPointer(capsule, "dltensor");
    if (m->deleter != NULL) m->deleter(m);
  } else if (PyCapsule_IsValid(capsule, "dltensor_versioned")) {
    PFDLManagedTensorVersioned* m = PyCapsule_GetPointer(capsule, "dltensor_versioned");
    if (m->deleter != NULL) m->deleter(m);
  }
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(pending);
#else
  PyErr_Restore(type, value, traceback);
#endif
}

/* dlpack_capsule(address, versioned): a capsule of a managed tensor that
 * Tensor.__dlpack__ made ("dltensor_versioned" or "dltensor"). */
static PyObject* pf_dlpack_capsule(PyObject* module, PyObject* const* args, Py_ssize_t n) {
  (void)module;
  if (pf_expect_args(n, 2, "dlpack_capsule(address, versioned)") != 0) return NULL;
  void* managed = PyLong_AsVoidPtr(args[0]);
  int versioned = PyObject_IsTrue(args[1]);
  if (PyErr_Occurred()) return NULL;
  return PyCapsule_New(managed, versioned ? "dltensor_versioned" : "dltensor",
                       pf_capsule_destructor);
}

static PyObject* pf_general_after_tensors(PyObject* self, PyObject* const* args, Py_ssize_t n,
                                          PyObject* kwnames, Py_ssize_t nkw, PyObject** capsules,
                                          int tensors) {
  for (int i = 0; i < tensors; ++i) Py_DECREF(capsules[i]);
  return pf_call_general(self, args, n, kwnames, nkw);
}

/* Records the tensor arguments as in flight (the package's table), so that
 * a callback that gets one of them gets the very object. */
static int pf_tensors_enter(PyObject* const* args, Py_ssize_t n, const PFValue* values,
                            const int* codes) {
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (codes[i] != kPFDLTensorHandle) continue;
    PyObject* key = PyLong_FromVoidPtr(values[i].v_handle);
    int rc = key == NULL ? -1 : PyDict_SetItem(pf_tensors_in_flight, key, args[i]);
    Py_XDECREF(key);
    if (rc != 0) return -1;
  }
  return 0;
}

/* Ends a call with tensor arguments: forgets them as in flight, drops
 * their exports, and gives the result: `out`, or, when the result is the
 * DLTensor `returned` of an argument, that argument itself. */
static PyObject* pf_tensor_call_done(PyObject* out, PyObject* const* args, Py_ssize_t n,
                                     const PFValue* values, const int* codes, PyObject** capsules,
                                     int tensors, void* returned) {
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (codes[i] != kPFDLTensorHandle) continue;
    if (out == NULL && returned != NULL && values[i].v_handle == returned) {
      Py_INCREF(args[i]);
      out = args[i];
    }
    PyObject* key = PyLong_FromVoidPtr(values[i].v_handle);
    if (key == NULL || PyDict_DelItem(pf_tensors_in_flight, key) != 0) PyErr_Clear();
    Py_XDECREF(key);
  }
  for (int i = 0; i < tensors; ++i) Py_DECREF(capsules[i]);
  if (type != NULL) {
    PyErr_Restore(type, value, tb);
  } else if (out == NULL && returned != NULL) {
    PFValue v = {.v_handle = returned}; /* not an argument: the decoder table's */
    out = pf_value(&v, kPFDLTensorHandle, 1);
  }
  return out;
}

/* An int attribute of x, within [lo, hi]; 0, or -1 (no exception left)
 * when it is missing, not an int or out of range: the general path then
 * decides, and raises what the package raises. */
static int pf_int_field(PyObject* x, const char* name, long long lo, long long hi, long long* out) {
  PyObject* v = PyObject_GetAttrString(x, name);
  if (v == NULL) {
    PyErr_Clear();
    return -1;
  }
  int overflow = 0;
  long long n = PyLong_Check(v) ? PyLong_AsLongLongAndOverflow(v, &overflow) : lo - 1;
  Py_DECREF(v);
  if (PyErr_Occurred()) PyErr_Clear();
  if (overflow || n < lo || n > hi) return -1;
  *out = n;
  return 0;
}

/* Object, DataType and Device arguments: 0 with the value and code set (1
 * for an Object), or -1 for the general path (a released Object, a value
 * it refuses). */
static int pf_field_arg(PyObject* x, PyTypeObject* t, PFValue* value, int* code) {
  long long a, b, c;
  if ((PyObject*)t == pf_dtype_type) {
    if (pf_int_field(x, "type_code", 0, UINT8_MAX, &a) ||
        pf_int_field(x, "bits", 0, UINT8_MAX, &b) || pf_int_field(x, "lanes", 0, UINT16_MAX, &c))
      return -1;
    value->v_int64 = 0;
    value->v_type.code = (uint8_t)a;
    value->v_type.bits = (uint8_t)b;
    value->v_type.lanes = (uint16_t)c;
    *code = kPFDataType;
    return 0;
  }
  if ((PyObject*)t == pf_device_type) {
    if (pf_int_field(x, "device_type", INT32_MIN, INT32_MAX, &a) ||
        pf_int_field(x, "device_id", INT32_MIN, INT32_MAX, &b))
      return -1;
    value->v_device.device_type = (DLDeviceType)a;
    value->v_device.device_id = (int32_t)b;
    *code = kPFDevice;
    return 0;
  }
  if (PyObject_TypeCheck(x, &pf_object_base_type)) {
    /* A handle of 0 is a released Object: the general path says so. */
    const pf_cext_object* o = (const pf_cext_object*)x;
    if (o->handle == 0) return -1;
    value->v_handle = (void*)(uintptr_t)o->handle;
    *code = o->code;
    return 1;
  }
  return -1;
}

/* The C objects that a call made of its list, tuple and dict arguments,
 * released when it returns; the Objects it took, pinned until it returns
 * (pf_object_pin); and the Functions it took, entered until it returns
 * (pf_function_enter). */
typedef struct {
  void* objects[PF_CEXT_MAX_ARGS];
  int n;
  PyObject* pinned[PF_CEXT_MAX_ARGS];
  int npinned;
  PyObject* functions[PF_CEXT_MAX_ARGS];
  int nfunctions;
} pf_made;

/* Converts x when it is of exactly one of the plain types: int (within
 * int64), float, bool, None, str (valid UTF-8 without NUL, for a function
 * with no parameter that converts strings: `f` is the callee), bytes (into
 * *array, which must outlive the call) and, when `functions` is 1, a live
 * Function (which the caller then holds: pf_function_enter). 1 with *value
 * and *code set; 0, with no exception, for anything else, which the
 * general path converts or refuses (an int outside int64 raises its
 * OverflowError there). Runs no Python code. */
static inline int pf_plain_arg(const PFCextFunction* f, PyObject* x, PFValue* value, int* code,
                               PFByteArray* array, int functions) {
  PyTypeObject* t = Py_TYPE(x);
  if (t == &PyLong_Type) {
    int overflow;
    value->v_int64 = PyLong_AsLongLongAndOverflow(x, &overflow);
    *code = kPFInt;
    return !overflow;
  }
  if (t == &PyFloat_Type) {
    value->v_float64 = PyFloat_AS_DOUBLE(x);
    *code = kPFFloat;
    return 1;
  }
  if (t == &PyUnicode_Type) {
    /* A function with device parameters turns strings into Devices, and
     * one whose parameters are not looked up yet may have some: the
     * general path decides (and caches the answer). */
    if (f->conversions == NULL || !PyTuple_CheckExact(f->conversions) ||
        PyTuple_GET_SIZE(f->conversions) != 0)
      return 0;
    Py_ssize_t size;
    value->v_str = PyUnicode_AsUTF8AndSize(x, &size);
    if (value->v_str == NULL || strlen(value->v_str) != (size_t)size) {
      PyErr_Clear(); /* a lone surrogate or a NUL: the general path raises its error */
      return 0;
    }
    *code = kPFStr;
    return 1;
  }
  if (t == &PyBool_Type || x == Py_None) {
    value->v_int64 = x == Py_True;
    *code = t == &PyBool_Type ? kPFBool : kPFNull;
    return 1;
  }
  if (t == &PyBytes_Type) {
    array->data = PyBytes_AS_STRING(x);
    array->size = (size_t)PyBytes_GET_SIZE(x);
    value->v_handle = array;
    *code = kPFBytes;
    return 1;
  }
  if (functions && PyObject_TypeCheck(x, &pf_function_type) && ((const PFCextFunction*)x)->handle) {
    value->v_handle = (void*)(uintptr_t)((const PFCextFunction*)x)->handle;
    *code = kPFFuncHandle;
    return 1;
  }
  return 0;
}

/* Frees the handle of a Function released while calls used it, when the
 * last of them has ended (see PFCextFunction.busy). The finalizer this may
 * run may run Python code: a pending exception is kept across it. */
static __attribute__((noinline, cold)) void pf_function_free_pending(PFCextFunction* f) {
  void* handle = (void*)(uintptr_t)f->pending;
  f->pending = 0;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  if (pf_api->FuncFree(handle) != 0) pf_api->ErrorClear(); /* cannot fail: a live function */
  PyErr_Restore(type, value, tb);
}

/* A call in progress uses f's handle (called, or passed as an argument):
 * a release() meanwhile leaves it to pf_function_leave. With the GIL. */
static inline void pf_function_enter(PFCextFunction* f) { ++f->busy; }

/* The end of what pf_function_enter began, after the call's result is
 * converted (freeing the handle may run other calls, which reuse the
 * return storage that a str result lives in). With the GIL. */
static inline void pf_function_leave(PFCextFunction* f) {
  if (--f->busy == 0 && __builtin_expect(f->pending != 0, 0)) pf_function_free_pending(f);
}

/* What a call into C changes of this thread's GIL state, and gives back
 * after it (pf_gil_enter, pf_gil_exit): a call that releases the GIL (the
 * default) marks the thread state it released (pf_released), which a
 * callback on this thread takes back (pf_trampoline); one that keeps it
 * marks the thread state it keeps (pf_kept). Each changes only its own
 * mark, so only that one is saved: `prev`, and `ts` the released thread
 * state (NULL when kept). */
typedef struct {
  PyThreadState *prev, *ts;
} pf_gil_bracket;

static inline void pf_gil_enter(int keep_gil, pf_gil_bracket* b) {
  if (__builtin_expect(keep_gil, 0)) {
    b->prev = pf_kept;
    b->ts = NULL;
    pf_kept = pf_current_thread_state();
  } else {
    b->prev = pf_released;
    pf_released = b->ts = PyEval_SaveThread();
  }
}

static inline void pf_gil_exit(const pf_gil_bracket* b) {
  if (__builtin_expect(b->ts != NULL, 1)) {
    PyEval_RestoreThread(b->ts);
    pf_released = b->prev;
  } else {
    pf_kept = b->prev;
  }
}

/* The call into C of a Function call whose arguments are converted: `n`
 * positional values, then `nkw` keyword values that `names` names. It
 * releases the GIL around the callee unless the function keeps it
 * (keep_gil): then the callee runs with the GIL held, and a callback on
 * this thread needs no GIL switch (pf_trampoline). The one place where a
 * Function call enters the library: a positional call goes straight to
 * the function's resolved target (PFFuncResolve), whose caller's duties
 * the conversions meet (type codes of their own, live handles, no string
 * from the return storage: every str and bytes is a Python object's);
 * keywords need the library's binding (FuncCallKw), and a Function
 * without a target the checked entry. The caller has entered f
 * (pf_function_enter), so the target stays valid. */
static inline int pf_invoke(const PFCextFunction* f, PFValue* values, int* codes, int n,
                            const char* const* names, int nkw, PFValue* ret, int* ret_code) {
  void* handle = (void*)(uintptr_t)f->handle;
  PFDirectCFunc entry = f->entry;
  void* ctx = f->ctx;
  pf_gil_bracket b;
  pf_gil_enter(f->keep_gil, &b);
  int rc = nkw != 0 ? pf_api->FuncCallKw(handle, values, codes, n, names, values + n, codes + n,
                                         nkw, ret, ret_code)
           : __builtin_expect(entry != NULL, 1)
               ? entry(ctx, values, codes, n, ret, ret_code)
               : pf_api->FuncCall(handle, values, codes, n, ret, ret_code);
  pf_gil_exit(&b);
  return rc;
}

int pf_function_call_handle(PyObject* func, void* handle, PFValue* values, int* codes, int n,
                            PFValue* ret, int* ret_code) {
  pf_gil_bracket b;
  pf_gil_enter(((const PFCextFunction*)func)->keep_gil, &b);
  int rc = pf_api->FuncCall(handle, values, codes, n, ret, ret_code);
  pf_gil_exit(&b);
  return rc;
}

/* A failed call's error, raised through the package (NULL). A direct
 * callee called through its target that failed without recording an
 * error (which its contract forbids) gets PFFuncCall's RuntimeError when
 * the thread has no error. */
static __attribute__((noinline, cold)) PyObject* pf_raise_failed(PyObject* self) {
  if (pf_api->ErrorGetKind()[0] == '\0') {
    const char* name = NULL;
    void* handle = (void*)(uintptr_t)((PFCextFunction*)self)->handle;
    if (handle == NULL || pf_api->FuncGetInfo(handle, &name, NULL, NULL) != 0) name = NULL;
    pf_api->ErrorSetFormat("RuntimeError",
                           "PFFuncCall: function '%s' returned -1 without recording an error",
                           name ? name : "<anonymous>");
  }
  PyObject* out = PyObject_CallOneArg(pf_hook_call_failed, self);
  Py_XDECREF(out); /* it raises; a hook that did not is a bug */
  if (out != NULL) PyErr_SetString(PyExc_SystemError, "packedfunc: a failed call raised no error");
  return NULL;
}

/* The plain positional call: no keywords, and only arguments of exactly
 * the types int (within int64), float, bool, None, str (valid UTF-8
 * without NUL, for a function without parameters that convert strings)
 * and bytes (a Function argument, which the call must hold, takes the
 * general path). Their conversion runs no Python code, and the
 * caller's argument array holds every object until the call returns, so
 * there is nothing to hold, pin or give back. 1 with *out the result (or
 * NULL with an exception); 0 for any other call, with nothing done and no
 * exception: the general path (pf_function_call) takes it. A small frame
 * and no bookkeeping: this is the path of most calls. */
static inline int pf_fast_call(PFCextFunction* f, PyObject* const* args, Py_ssize_t n,
                               PyObject** out) {
  if (n > PF_CEXT_MAX_ARGS || f->handle == 0 || n < f->fill) return 0;
  PFValue values[PF_CEXT_MAX_ARGS];
  int codes[PF_CEXT_MAX_ARGS];
  PFByteArray arrays[PF_CEXT_MAX_ARGS];
  for (Py_ssize_t i = 0; i < n; ++i)
    if (!pf_plain_arg(f, args[i], &values[i], &codes[i], &arrays[i], 0)) return 0;
  PFValue ret;
  int ret_code;
  pf_function_enter(f);
  if (pf_invoke(f, values, codes, (int)n, NULL, 0, &ret, &ret_code) != 0)
    *out = pf_raise_failed((PyObject*)f);
  else *out = pf_value(&ret, ret_code, 1);
  pf_function_leave(f);
  return 1;
}

static PyObject* pf_function_call(PyObject* self, PyObject* const* args, size_t nargsf,
                                  PyObject* kwnames, pf_made* made) {
  PFCextFunction* f = (PFCextFunction*)self;
  Py_ssize_t n = PyVectorcall_NARGS(nargsf);
  /* Keyword arguments' values follow the positional ones in args: they are
   * converted alike, and the library binds their names (FuncCallKw). */
  Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames), total = n + nkw;
  if (total > PF_CEXT_MAX_ARGS || f->handle == 0 || (nkw == 0 && n < f->fill))
    return pf_call_general(self, args, n, kwnames, nkw);
  PFValue values[PF_CEXT_MAX_ARGS];
  int codes[PF_CEXT_MAX_ARGS];
  PFByteArray arrays[PF_CEXT_MAX_ARGS];
  PyObject* capsules[PF_CEXT_MAX_ARGS]; /* of tensor arguments, NULL for others */
  int tensors = 0, kind;
  for (Py_ssize_t i = 0; i < total; ++i) {
    PyObject* x = args[i];
    PyTypeObject* t = Py_TYPE(x);
    if (pf_plain_arg(f, x, &values[i], &codes[i], &arrays[i], 1)) {
      /* A Function's handle stays valid, whatever the conversions after it
       * and the callee's callbacks run (a release() of it among them). */
      if (codes[i] == kPFFuncHandle) {
        pf_function_enter((PFCextFunction*)x);
        made->functions[made->nfunctions++] = x;
      }
      continue;
    }
    if ((t == &PyList_Type || t == &PyTuple_Type || t == &PyDict_Type) && f->conversions != NULL &&
        PyTuple_CheckExact(f->conversions) && PyTuple_GET_SIZE(f->conversions) == 0) {
      /* As an Array or Map (where no parameter turns it into a Shape,
       * List or Dict: the general path decides those, as for strings). */
      int rc = pf_container_arg(x, &values[i], &codes[i]);
      if (rc < 0) {
        for (int j = 0; j < tensors; ++j) Py_DECREF(capsules[j]);
        return NULL;
      }
      if (rc == 0) return pf_general_after_tensors(self, args, n, kwnames, nkw, capsules, tensors);
      made->objects[made->n++] = values[i].v_handle;
    } else if ((kind = pf_field_arg(x, t, &values[i], &codes[i])) >= 0) {
      /* An Object, DataType or Device. An Object is held until the call
       * returns, whatever the conversions after it run. */
      if (kind == 1) {
        pf_object_pin(x);
        made->pinned[made->npinned++] = x;
      }
    } else if (pf_tensor_types != NULL && PySet_Contains(pf_tensor_types, (PyObject*)t) == 1) {
      capsules[tensors] = pf_dlpack_export(x);
      if (capsules[tensors] == NULL) {
        /* The general path raises the export's error, or does better. */
        PyErr_Clear();
        return pf_general_after_tensors(self, args, n, kwnames, nkw, capsules, tensors);
      }
      values[i].v_handle = PyCapsule_GetPointer(capsules[tensors], "dltensor");
      codes[i] = kPFDLTensorHandle;
      ++tensors;
    } else {
      return pf_general_after_tensors(self, args, n, kwnames, nkw, capsules, tensors);
    }
  }
  const char* names[PF_CEXT_MAX_ARGS];
  for (Py_ssize_t i = 0; i < nkw; ++i) {
    Py_ssize_t size;
    names[i] = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(kwnames, i), &size);
    if (names[i] == NULL || strlen(names[i]) != (size_t)size) {
      /* A lone surrogate or a NUL: the general path says what it is. */
      PyErr_Clear();
      return pf_general_after_tensors(self, args, n, kwnames, nkw, capsules, tensors);
    }
  }
  if (tensors && pf_tensors_enter(args, total, values, codes) != 0)
    return pf_tensor_call_done(NULL, args, total, values, codes, capsules, tensors, NULL);
  PFValue ret;
  int ret_code, rc;
  /* Other Python threads run, and C threads can call back in, while the
   * callee runs (unless it keeps the GIL). The arguments stay alive: the
   * caller holds them. */
  if (made->npinned) pf_instances_lock(made->pinned, made->npinned);
  rc = pf_invoke(f, values, codes, (int)n, names, (int)nkw, &ret, &ret_code);
  if (made->npinned) pf_instances_unlock(made->pinned, made->npinned);
  PyObject* out;
  if (rc != 0) {
    out = pf_raise_failed(self);
  } else if (tensors && ret_code == kPFDLTensorHandle) {
    out = NULL; /* an argument coming back is itself (below) */
  } else {
    out = pf_value(&ret, ret_code, 1);
  }
  if (!tensors) return out;
  return pf_tensor_call_done(out, args, total, values, codes, capsules, tensors,
                             rc == 0 && ret_code == kPFDLTensorHandle ? ret.v_handle : NULL);
}

/* Any call that the plain positional path does not take. Not inlined: its
 * frame (the conversions' bookkeeping) stays off the plain path. */
static __attribute__((noinline)) PyObject* pf_function_call_general(PyObject* self,
                                                                    PyObject* const* args,
                                                                    size_t nargsf,
                                                                    PyObject* kwnames) {
  pf_made made;
  made.n = 0;
  made.npinned = 0;
  made.nfunctions = 0;
  /* The package's general path, which this may take, calls the handle
   * too: it stays valid until that returns. */
  pf_function_enter((PFCextFunction*)self);
  PyObject* out = pf_function_call(self, args, nargsf, kwnames, &made);
  /* The callee took references of its own to what it kept; ours hold
   * nothing that only they keep alive (the items are the arguments'). */
  for (int i = 0; i < made.n; ++i) pf_api->ObjectFree(made.objects[i]);
  for (int i = 0; i < made.npinned; ++i) pf_object_unpin(made.pinned[i]);
  for (int i = 0; i < made.nfunctions; ++i) pf_function_leave((PFCextFunction*)made.functions[i]);
  pf_function_leave((PFCextFunction*)self);
  return out;
}

static PyObject* pf_function_vectorcall(PyObject* self, PyObject* const* args, size_t nargsf,
                                        PyObject* kwnames) {
  PyObject* out;
  if (kwnames == NULL &&
      pf_fast_call((PFCextFunction*)self, args, PyVectorcall_NARGS(nargsf), &out))
    return out;
  return pf_function_call_general(self, args, nargsf, kwnames);
}

static void pf_function_dealloc(PyObject* self) {
  /* The package's __del__ released the handle; only our own fields go. */
  Py_CLEAR(((PFCextFunction*)self)->conversions);
  Py_TYPE(self)->tp_free(self);
}

static PyMemberDef pf_function_members[] = {
    {"_handle", T_ULONGLONG, offsetof(PFCextFunction, handle), READONLY,
     "the PFFunctionHandle as an int; 0 once released (see release())"},
    {"_conversions", T_OBJECT, offsetof(PFCextFunction, conversions), 0,
     "(position, kind, name) of the device, shape, list and dict parameters, or None before "
     "they are looked up"},
    {"_keep_gil", T_INT, offsetof(PFCextFunction, keep_gil), 0,
     "1 when calls keep the GIL (see Function.release_gil), else 0"},
    {"_fill", T_PYSSIZET, offsetof(PFCextFunction, fill), 0,
     "a positional call with fewer arguments than this takes the signature's defaults (the "
     "general path); 0 without defaults; sys.maxsize before it is looked up"},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject pf_function_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "packedfunc._cext.FunctionBase",
    .tp_basicsize = sizeof(PFCextFunction),
    .tp_dealloc = pf_function_dealloc,
    .tp_vectorcall_offset = offsetof(PFCextFunction, vectorcall),
    .tp_call = PyVectorcall_Call,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "The compiled base of packedfunc.Function (private).",
    .tp_members = pf_function_members,
};

int pf_function_handle(PyObject* x, void** handle) {
  if (!PyObject_TypeCheck(x, &pf_function_type) || ((PFCextFunction*)x)->handle == 0) return 0;
  *handle = (void*)(uintptr_t)((PFCextFunction*)x)->handle;
  return 1;
}

Py_ssize_t pf_function_fill(PyObject* x) { return ((PFCextFunction*)x)->fill; }

/* adopt(cls, handle): a new instance of cls (a subclass of FunctionBase)
 * that takes over the reference `handle`. */
static PyObject* pf_adopt(PyObject* module, PyObject* const* args, Py_ssize_t n) {
  (void)module;
  if (n != 2 || !PyType_Check(args[0]) ||
      !PyType_IsSubtype((PyTypeObject*)args[0], &pf_function_type)) {
    PyErr_SetString(PyExc_TypeError, "_cext.adopt(cls, handle): cls must subclass FunctionBase");
    return NULL;
  }
  unsigned long long handle = PyLong_AsUnsignedLongLong(args[1]);
  if (handle == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  PyTypeObject* cls = (PyTypeObject*)args[0];
  PFCextFunction* self = (PFCextFunction*)cls->tp_alloc(cls, 0);
  if (self == NULL) return NULL;
  self->vectorcall = pf_function_vectorcall;
  self->handle = handle;
  self->conversions = NULL;
  self->fill = PY_SSIZE_T_MAX;
  /* The C author's hint, read once: the package may override it. */
  uint32_t flags = 0;
  if (pf_api->FuncGetFlags((void*)(uintptr_t)handle, &flags) != 0) {
    pf_api->ErrorClear(); /* not a live function: its calls say so */
    flags = 0;
  }
  self->keep_gil = (flags & kPFFuncNonBlocking) != 0;
  /* The target, once: the handle never changes until release(). */
  PFCallTarget target = {.size = sizeof target};
  if (pf_api->FuncResolve((void*)(uintptr_t)handle, &target) != 0) {
    pf_api->ErrorClear(); /* not a live function: the checked entry says so */
    target.entry = NULL;
    target.ctx = NULL;
  }
  self->entry = target.entry;
  self->ctx = target.ctx;
  self->busy = 0;
  self->pending = 0;
  return (PyObject*)self;
}

/* release(function) -> the handle for the package to free (PFFuncFree),
 * or 0: the Function is released (its handle 0, its calls refused) at
 * once, but while calls that use its handle are in progress, the last of
 * them frees it instead (pf_function_leave). The handle and the target
 * never change otherwise. */
static PyObject* pf_release(PyObject* module, PyObject* arg) {
  (void)module;
  if (!PyObject_TypeCheck(arg, &pf_function_type)) {
    PyErr_SetString(PyExc_TypeError, "_cext.release(function): expected a FunctionBase");
    return NULL;
  }
  PFCextFunction* f = (PFCextFunction*)arg;
  unsigned long long handle = f->handle;
  f->handle = 0;
  f->entry = NULL;
  f->ctx = NULL;
  if (handle != 0 && f->busy > 0) {
    f->pending = handle;
    handle = 0;
  }
  return PyLong_FromUnsignedLongLong(handle);
}

/* enable_vectorcall(cls): Python 3.11 does not pass the vectorcall flag on
 * to heap subclasses; the package's Function defines no __call__ of its
 * own, so its instances can be called through the base's vectorcall. */
static PyObject* pf_enable_vectorcall(PyObject* module, PyObject* cls) {
  (void)module;
  if (!PyType_Check(cls) || !PyType_IsSubtype((PyTypeObject*)cls, &pf_function_type) ||
      ((PyTypeObject*)cls)->tp_call != PyVectorcall_Call) {
    PyErr_SetString(PyExc_TypeError,
                    "_cext.enable_vectorcall: expected a FunctionBase subclass without __call__");
    return NULL;
  }
  ((PyTypeObject*)cls)->tp_flags |= Py_TPFLAGS_HAVE_VECTORCALL;
  PyType_Modified((PyTypeObject*)cls);
  Py_RETURN_NONE;
}

/* ------------------------------------------------------------------------ */
/* Holds: C's references to Python objects, and loans of them               */
/* ------------------------------------------------------------------------ */

/* The resource of a host function and the payload of a host object made
 * here: C's reference to a Python object (see packedfunc._holds). While
 * `state` is PF_HELD the record owns the reference; while PF_LENT a Loan
 * owns it (lent to a wrapper for a collection); PF_DEAD: its host object
 * or function went while lent, and the Loan drops the reference and frees
 * the record when it gives back. `obj` is valid in every state; `kind`
 * says whether a host object or a host function holds it. Read and
 * changed only with the GIL. */
typedef struct {
  PyObject* obj;
  int state;
  int kind;
} pf_hold;
enum { PF_HELD, PF_LENT, PF_DEAD };

/* The kinds of holds, counted apart: the object of a host object, the
 * callable of a host function. The package takes these numbers
 * (HOLD_OBJECT, HOLD_FUNCTION) as its own (packedfunc._holds). */
enum { PF_HOLD_OBJECT, PF_HOLD_FUNCTION, PF_HOLD_KINDS };

/* How many holds of each kind C has (lent or not). Changed only with the
 * GIL held. */
static Py_ssize_t pf_live[PF_HOLD_KINDS];

int pf_any_held(void) { return pf_live[PF_HOLD_OBJECT] > 0 || pf_live[PF_HOLD_FUNCTION] > 0; }

/* A new hold of x (a new reference to it), or NULL with MemoryError. Raw
 * memory: it is freed by finalizers, which take the GIL first anyway. */
static pf_hold* pf_hold_new(PyObject* x, int kind) {
  pf_hold* h = PyMem_RawMalloc(sizeof(*h));
  if (h == NULL) {
    PyErr_NoMemory();
    return NULL;
  }
  Py_INCREF(x);
  h->obj = x;
  h->state = PF_HELD;
  h->kind = kind;
  ++pf_live[kind];
  return h;
}

/* The finalizer of the host objects and host functions made here (their
 * payload or resource is the hold): their last reference went, on any
 * thread. Takes the GIL; the reference goes, or, while lent, the Loan
 * drops it. The gate skips it once the interpreter is shutting down. */
static void pf_hold_release(void* hold) {
  pf_hold* h = hold;
  PyGILState_STATE gil = PyGILState_Ensure();
  --pf_live[h->kind];
  if (h->state == PF_LENT) {
    h->state = PF_DEAD;
  } else {
    PyObject* x = h->obj;
    PyMem_RawFree(h);
    Py_DECREF(x);
  }
  PyGILState_Release(gil);
}

/* Loan: the references of holds lent to one wrapper for one collection.
 * The collector sees them as the Loan's (tp_traverse); clearing or
 * freeing it gives them back, as give_back() does. */
typedef struct {
  PyObject_HEAD
  pf_hold** holds;
  Py_ssize_t n, cap;
} PFCextLoan;

/* Gives every lent reference back to its hold, or, when its host object or
 * function went meanwhile, drops it. The Loan is emptied first, and the
 * references dropped last: that may run any code, this Loan's included. */
static void pf_loan_give_back_all(PFCextLoan* loan) {
  pf_hold** holds = loan->holds;
  Py_ssize_t n = loan->n;
  loan->holds = NULL;
  loan->n = loan->cap = 0;
  Py_ssize_t dead = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    if (holds[i]->state == PF_DEAD) holds[dead++] = holds[i];
    else holds[i]->state = PF_HELD;
  }
  for (Py_ssize_t i = 0; i < dead; ++i) {
    PyObject* x = holds[i]->obj;
    PyMem_RawFree(holds[i]);
    Py_DECREF(x);
  }
  PyMem_Free(holds);
}

static int pf_loan_traverse(PyObject* self, visitproc visit, void* arg) {
  PFCextLoan* loan = (PFCextLoan*)self;
  for (Py_ssize_t i = 0; i < loan->n; ++i) Py_VISIT(loan->holds[i]->obj);
  return 0;
}

static int pf_loan_clear(PyObject* self) {
  pf_loan_give_back_all((PFCextLoan*)self);
  return 0;
}

static void pf_loan_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  pf_loan_give_back_all((PFCextLoan*)self);
  Py_TYPE(self)->tp_free(self);
}

/* lend(addresses): takes over the references of the holds at these
 * addresses (payloads or resources that PFObjectFindOwnedHosts reported
 * for the package's gate, so this module's holds) that are still held. */
static PyObject* pf_loan_lend(PyObject* self, PyObject* arg) {
  PFCextLoan* loan = (PFCextLoan*)self;
  PyObject* seq = PySequence_Fast(arg, "Loan.lend: expected a sequence of addresses");
  if (seq == NULL) return NULL;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  PyObject** items = PySequence_Fast_ITEMS(seq);
  for (Py_ssize_t i = 0; i < n; ++i) {
    pf_hold* h = PyLong_AsVoidPtr(items[i]);
    if (h == NULL && PyErr_Occurred()) goto fail;
    if (h == NULL || h->state != PF_HELD) continue; /* gone, or lent already */
    if (loan->n == loan->cap) {
      Py_ssize_t cap = loan->cap ? loan->cap * 2 : 4;
      pf_hold** holds = PyMem_Realloc(loan->holds, (size_t)cap * sizeof(pf_hold*));
      if (holds == NULL) {
        PyErr_NoMemory();
        goto fail;
      }
      loan->holds = holds;
      loan->cap = cap;
    }
    loan->holds[loan->n++] = h;
    h->state = PF_LENT;
  }
  Py_DECREF(seq);
  Py_RETURN_NONE;
fail:
  Py_DECREF(seq);
  return NULL;
}

static PyObject* pf_loan_give_back(PyObject* self, PyObject* unused) {
  (void)unused;
  pf_loan_give_back_all((PFCextLoan*)self);
  Py_RETURN_NONE;
}

static Py_ssize_t pf_loan_length(PyObject* self) { return ((PFCextLoan*)self)->n; }

static PyMethodDef pf_loan_methods[] = {
    {"lend", pf_loan_lend, METH_O, "lend(addresses): takes over the references of these holds"},
    {"give_back", pf_loan_give_back, METH_NOARGS, "gives every lent reference back"},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods pf_loan_as_sequence = {.sq_length = pf_loan_length};

static PyTypeObject pf_loan_type = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "packedfunc._cext.Loan",
    .tp_basicsize = sizeof(PFCextLoan),
    .tp_dealloc = pf_loan_dealloc,
    .tp_as_sequence = &pf_loan_as_sequence,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "References of holds lent to a wrapper for a collection (private).",
    .tp_traverse = pf_loan_traverse,
    .tp_clear = pf_loan_clear,
    .tp_methods = pf_loan_methods,
    .tp_new = PyType_GenericNew,
};

/* owned_holds(handle, gate, max_values, sort) -> (addresses, reachable):
 * PFObjectFindOwnedHosts for one wrapper's C object, without the cost of
 * a ctypes call: the addresses of the holds that it alone keeps alive (a
 * tuple of ints), and, with `sort`, how many holds it reaches (else
 * None). A failure (out of memory) finds nothing, which is safe, with
 * reachable None, and leaves no error. Keeps the GIL, on which the answer
 * rests (see _holds). */
static PyObject* pf_owned_holds(PyObject* module, PyObject* const* args, Py_ssize_t n) {
  (void)module;
  if (pf_expect_args(n, 4, "owned_holds(handle, gate, max_values, sort)")) return NULL;
  void* handle = PyLong_AsVoidPtr(args[0]);
  void* gate = handle == NULL && PyErr_Occurred() ? NULL : PyLong_AsVoidPtr(args[1]);
  long long max_values = PyErr_Occurred() ? -1 : PyLong_AsLongLong(args[2]);
  int sort = PyErr_Occurred() ? -1 : PyObject_IsTrue(args[3]);
  if (PyErr_Occurred()) return NULL;
  void* small[16];
  void** out = small;
  int64_t cap = 16, owned = 0, reachable = 0;
  for (;;) {
    if (pf_api->ObjectFindOwnedHosts(handle, gate, max_values, out, cap, &owned,
                                     sort ? &reachable : NULL) != 0) {
      pf_api->ErrorClear();
      owned = 0;
      sort = 0; /* reachable: None */
      break;
    }
    if (owned <= cap) break;
    if (out != small) PyMem_Free(out);
    out = PyMem_Malloc((size_t)owned * sizeof(void*));
    if (out == NULL) return PyErr_NoMemory();
    cap = owned;
  }
  PyObject* addresses = PyTuple_New((Py_ssize_t)owned);
  for (int64_t i = 0; addresses != NULL && i < owned; ++i) {
    PyObject* a = PyLong_FromVoidPtr(out[i]);
    if (a == NULL) Py_CLEAR(addresses);
    else PyTuple_SET_ITEM(addresses, (Py_ssize_t)i, a);
  }
  if (out != small) PyMem_Free(out);
  if (addresses == NULL) return NULL;
  if (!sort) return Py_BuildValue("(NO)", addresses, Py_None);
  return Py_BuildValue("(NL)", addresses, (long long)reachable);
}

/* ------------------------------------------------------------------------ */
/* Python callables called from C                                           */
/* ------------------------------------------------------------------------ */

/* Records the raised Python exception as this thread's packedfunc error;
 * returns -1. The package's recorder catches everything, but a signal
 * handler can raise on entry to it (Ctrl-C): then that exception, the
 * newer one, is recorded instead. Should that fail too, a RuntimeError
 * says so. */
static int pf_record_raised(void) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb != NULL && value != NULL) PyException_SetTraceback(value, tb);
    PyObject* out = value == NULL ? NULL : PyObject_CallFunction(pf_hook_record, "Oi", value, 0);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    if (out != NULL) {
      Py_DECREF(out);
      return -1;
    }
    if (!PyErr_Occurred()) break;
  }
  PyErr_Clear();
  pf_api->ErrorSet("RuntimeError",
                   "packedfunc: a Python callback failed and its error could not be recorded");
  return -1;
}

/* Sets the callback's result: the common types here, the rest through the
 * package's _set_return (which raises the errors of the encoder table). */
static int pf_set_return(PFRetValueHandle ret, PyObject* r) {
  PyTypeObject* t = Py_TYPE(r);
  PFValue v;
  PFByteArray ba;
  int code;
  if (r == Py_None) return 0;
  if (t == &PyLong_Type) {
    int overflow;
    v.v_int64 = PyLong_AsLongLongAndOverflow(r, &overflow);
    if (overflow) goto general;
    code = kPFInt;
  } else if (t == &PyFloat_Type) {
    v.v_float64 = PyFloat_AS_DOUBLE(r);
    code = kPFFloat;
  } else if (t == &PyBool_Type) {
    v.v_int64 = r == Py_True;
    code = kPFBool;
  } else if (t == &PyUnicode_Type) {
    Py_ssize_t size;
    v.v_str = PyUnicode_AsUTF8AndSize(r, &size);
    if (v.v_str == NULL || strlen(v.v_str) != (size_t)size) {
      PyErr_Clear();
      goto general;
    }
    code = kPFStr;
  } else if (t == &PyBytes_Type) {
    ba.data = PyBytes_AS_STRING(r);
    ba.size = (size_t)PyBytes_GET_SIZE(r);
    v.v_handle = &ba;
    code = kPFBytes;
  } else if (t == &PyList_Type || t == &PyTuple_Type || t == &PyDict_Type) {
    int rc = pf_container_arg(r, &v, &code);
    if (rc < 0) return pf_record_raised();
    if (rc == 0) goto general;
    rc = pf_api->CFuncSetReturn(ret, &v, &code, 1); /* it takes its own reference */
    pf_api->ObjectFree(v.v_handle);
    return rc ? -1 : 0;
  } else {
    goto general;
  }
  return pf_api->CFuncSetReturn(ret, &v, &code, 1) ? -1 : 0;
general : {
  PyObject* out = PyObject_CallFunction(pf_hook_set_return, "NO", PyLong_FromVoidPtr(ret), r);
  if (out == NULL) return pf_record_raised();
  long rc = PyLong_AsLong(out);
  Py_DECREF(out);
  if (rc == -1 && PyErr_Occurred()) return pf_record_raised();
  return rc ? -1 : 0;
}
}

/* The PFPackedCFunc of every Python callable that C can call, entered
 * through the host gate (which keeps it out once the interpreter exits).
 * It may run on any thread, also one that Python did not start:
 * PyGILState_Ensure gives that thread a thread state. The status is
 * written as the last act, as the gate's contract asks. */
static int pf_trampoline(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* resource) {
  PFHostCall* call = resource;
  /* The common case is a thread that Python knows and that released the
   * GIL to call C (a Function call that calls back): it takes the GIL back
   * with its own thread state, without PyGILState's bookkeeping. Any other
   * thread goes through PyGILState_Ensure, which also makes a thread
   * state for a thread that Python did not start. */
  PyThreadState* current = pf_current_thread_state();
  PyThreadState* own = pf_released;
  /* Released by a Function call of this thread (and not taken back since
   * by other means): resume it. A Function that the callback calls
   * releases it again, on its own account. */
  int from_call = own != NULL && own != current;
  /* Kept by a Function call of this thread that keeps the GIL: this
   * thread holds it, and the callback runs at once. */
  int held = !from_call && pf_kept != NULL && pf_kept == current;
  if (from_call) {
    pf_released = NULL;
  } else if (!held) {
    own = PyGILState_GetThisThreadState();
    if (own == current) own = NULL;
  } else {
    own = NULL;
  }
  int resumed = own != NULL;
  PyGILState_STATE gil = PyGILState_UNLOCKED;
  if (resumed) PyEval_RestoreThread(own);
  else if (!held) gil = PyGILState_Ensure();
  PyObject* fn = ((pf_hold*)call->resource_handle)->obj; /* alive, held or lent */
  PyObject* stack[PF_CEXT_MAX_ARGS];
  PyObject* r = NULL;
  int i = 0, native = n <= PF_CEXT_MAX_ARGS, status;
  for (; native && i < n; ++i) {
    stack[i] =
        codes[i] == kPFInt ? PyLong_FromLongLong(args[i].v_int64) : pf_value(&args[i], codes[i], 0);
    if (stack[i] == NULL) native = 0;
  }
  if (native) {
    r = PyObject_Vectorcall(fn, stack, (size_t)n, NULL);
  } else if (!PyErr_Occurred()) {
    /* Handles, tensors, extension codes: the package's decoder table. */
    PyObject* raw = PyBytes_FromStringAndSize((const char*)codes, (Py_ssize_t)n * 4);
    if (raw != NULL)
      r = PyObject_CallFunction(pf_hook_callback_args, "ONNi", fn, PyLong_FromVoidPtr(args), raw,
                                n);
  }
  for (int j = 0; j < i; ++j) Py_XDECREF(stack[j]);
  if (r == NULL) {
    status = pf_record_raised();
  } else {
    status = pf_set_return(ret, r);
    Py_DECREF(r);
  }
  call->status = status;
  if (resumed) {
    PyEval_SaveThread();
    if (from_call) pf_released = own;
  } else if (!held) {
    PyGILState_Release(gil);
  }
  return 0;
}

/* A kind of hold given from Python: HOLD_OBJECT or HOLD_FUNCTION; -1 with
 * an exception for anything else. */
static int pf_hold_kind(PyObject* arg) {
  long kind = PyLong_AsLong(arg);
  if (kind == -1 && PyErr_Occurred()) return -1;
  if (kind < 0 || kind >= PF_HOLD_KINDS) {
    PyErr_Format(PyExc_ValueError, "_cext: %ld is not a kind of hold", kind);
    return -1;
  }
  return (int)kind;
}

/* new_host(kind, gate, x) -> (status, handle): on `gate`, a host object
 * (kind HOLD_OBJECT) whose payload holds a reference to x, or a host
 * function (HOLD_FUNCTION) that calls x through the trampoline; status -1
 * leaves the library's error. */
static PyObject* pf_new_host(PyObject* module, PyObject* const* args, Py_ssize_t n) {
  (void)module;
  if (pf_expect_args(n, 3, "new_host(kind, gate, x)")) return NULL;
  int kind = pf_hold_kind(args[0]);
  if (kind < 0) return NULL;
  void* gate = PyLong_AsVoidPtr(args[1]);
  if (gate == NULL && PyErr_Occurred()) return NULL;
  pf_hold* h = pf_hold_new(args[2], kind); /* the finalizer drops it, also on failure */
  if (h == NULL) return NULL;
  void* out = NULL;
  int rc = kind == PF_HOLD_FUNCTION
               ? pf_api->FuncCreateFromHostCFunc(gate, pf_trampoline, h, pf_hold_release, &out)
               : pf_api->HostObjectCreate(gate, h, pf_hold_release, &out);
  return Py_BuildValue("(iN)", rc, PyLong_FromVoidPtr(rc ? NULL : out));
}

/* The signal checker (PFEnvSetSignalChecker): runs Python's signal
 * handlers (on the main thread; elsewhere PyErr_CheckSignals does nothing)
 * and records an exception that one raises (KeyboardInterrupt for Ctrl-C)
 * as this thread's error. It takes the GIL itself, on any thread; the
 * package removes it at exit, before the interpreter goes. */
static int pf_check_signals(void) {
  PyGILState_STATE gil = PyGILState_Ensure();
  int rc = PyErr_CheckSignals() < 0 ? pf_record_raised() : 0;
  PyGILState_Release(gil);
  return rc;
}

/* signal_checker() -> the address of the checker, for
 * PFEnvSetSignalChecker. */
static PyObject* pf_signal_checker(PyObject* module, PyObject* unused) {
  (void)module, (void)unused;
  PFSignalChecker checker = pf_check_signals;
  void* addr;
  memcpy(&addr, &checker, sizeof addr);
  return PyLong_FromVoidPtr(addr);
}

/* live_count(kind) -> how many holds of that kind C has (lent or not). */
static PyObject* pf_live_count(PyObject* module, PyObject* arg) {
  (void)module;
  int kind = pf_hold_kind(arg);
  return kind < 0 ? NULL : PyLong_FromSsize_t(pf_live[kind]);
}

/* host_object_value(gate, handle) -> (True, the object) for a host object
 * made here on `gate`, (False, None) for any other (with no error left).
 * Borrows the handle. */
static PyObject* pf_host_object_value(PyObject* module, PyObject* const* args, Py_ssize_t n) {
  (void)module;
  if (pf_expect_args(n, 2, "host_object_value(gate, handle)")) return NULL;
  void* gate = PyLong_AsVoidPtr(args[0]);
  if (gate == NULL && PyErr_Occurred()) return NULL;
  void* handle = PyLong_AsVoidPtr(args[1]);
  if (handle == NULL && PyErr_Occurred()) return NULL;
  void* payload = NULL;
  if (pf_api->HostObjectGetPayload(handle, gate, &payload) != 0 || payload == NULL) {
    pf_api->ErrorClear(); /* another gate's object: not ours to look into */
    return Py_BuildValue("(OO)", Py_False, Py_None);
  }
  return Py_BuildValue("(OO)", Py_True, ((pf_hold*)payload)->obj);
}

/* ------------------------------------------------------------------------ */
/* Set-up                                                                   */
/* ------------------------------------------------------------------------ */

/* init(api_base_address): binds to the library that ctypes loaded. */
static PyObject* pf_init(PyObject* module, PyObject* arg) {
  (void)module;
  const PFApiBase* (*get_base)(void) = NULL;
  void* addr = PyLong_AsVoidPtr(arg);
  if (addr == NULL) {
    if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "_cext.init: NULL PFGetApiBase");
    return NULL;
  }
  memcpy(&get_base, &addr, sizeof addr);
  const PFApi* api = get_base()->GetApi(PF_CEXT_API_VERSION);
  if (api == NULL) {
    PyErr_Format(PyExc_ImportError, "packedfunc._cext: the library lacks API version %d",
                 PF_CEXT_API_VERSION);
    return NULL;
  }
  pf_api = api;
  Py_RETURN_NONE;
}

/* What a hook must be: the check of its value, and how an error names it. */
typedef struct {
  const char* what;
  int (*check)(PyObject*);
} pf_hook_kind;

static int pf_is_callable(PyObject* v) { return PyCallable_Check(v); }
static int pf_is_class(PyObject* v) { return PyType_Check(v); }
static int pf_is_set(PyObject* v) { return PyAnySet_CheckExact(v); }
static int pf_is_dict(PyObject* v) { return PyDict_CheckExact(v); }

static const pf_hook_kind pf_kind_callable = {"callable", pf_is_callable};
static const pf_hook_kind pf_kind_class = {"class", pf_is_class};
static const pf_hook_kind pf_kind_set = {"set", pf_is_set};
static const pf_hook_kind pf_kind_dict = {"dict", pf_is_dict};

/* The hooks that set_hooks sets, by keyword: one line each. */
static const struct {
  const char* name;
  PyObject** slot;
  const pf_hook_kind* kind;
} pf_hooks[] = {
    {"call_general", &pf_hook_call_general, &pf_kind_callable},
    {"call_kw", &pf_hook_call_kw, &pf_kind_callable},
    {"call_failed", &pf_hook_call_failed, &pf_kind_callable},
    {"decode_result", &pf_hook_decode_result, &pf_kind_callable},
    {"callback_args", &pf_hook_callback_args, &pf_kind_callable},
    {"set_return", &pf_hook_set_return, &pf_kind_callable},
    {"record_exception", &pf_hook_record, &pf_kind_callable},
    {"tensor_types", &pf_tensor_types, &pf_kind_set},
    {"tensors_in_flight", &pf_tensors_in_flight, &pf_kind_dict},
    {"dtype_type", &pf_dtype_type, &pf_kind_class},
    {"device_type", &pf_device_type, &pf_kind_class},
};

/* set_hooks(**hooks): sets each hook of the table that the keywords name
 * (the package sets those of calls and of callbacks from two of its
 * modules), in the table's order, up to the first value of the wrong
 * kind (TypeError). */
static PyObject* pf_set_hooks(PyObject* module, PyObject* args, PyObject* kwargs) {
  (void)module;
  if (PyTuple_GET_SIZE(args) != 0 || kwargs == NULL) {
    PyErr_SetString(PyExc_TypeError, "_cext.set_hooks takes keyword arguments only");
    return NULL;
  }
  for (size_t i = 0; i < sizeof pf_hooks / sizeof pf_hooks[0]; ++i) {
    PyObject* v = PyDict_GetItemString(kwargs, pf_hooks[i].name);
    if (v == NULL) continue;
    if (!pf_hooks[i].kind->check(v)) {
      PyErr_Format(PyExc_TypeError, "_cext.set_hooks: %s must be a %s", pf_hooks[i].name,
                   pf_hooks[i].kind->what);
      return NULL;
    }
    Py_INCREF(v);
    Py_XSETREF(*pf_hooks[i].slot, v);
  }
  Py_RETURN_NONE;
}

static PyMethodDef pf_methods[] = {
    {"init", pf_init, METH_O, "init(address of PFGetApiBase)"},
    {"set_hooks", (PyCFunction)(void (*)(void))pf_set_hooks, METH_VARARGS | METH_KEYWORDS,
     "set_hooks(**the package's general paths)"},
    {"adopt", (PyCFunction)(void (*)(void))pf_adopt, METH_FASTCALL,
     "adopt(cls, handle) -> a Function taking over the reference"},
    {"enable_vectorcall", pf_enable_vectorcall, METH_O, "enable_vectorcall(Function)"},
    {"release", pf_release, METH_O,
     "release(Function) -> the handle to free now, or 0 when calls in progress free it"},
    {"new_host", (PyCFunction)(void (*)(void))pf_new_host, METH_FASTCALL,
     "new_host(kind, gate, x) -> (status, handle) of a host object or function"},
    {"signal_checker", pf_signal_checker, METH_NOARGS,
     "signal_checker() -> the address of the PFSignalChecker"},
    {"host_object_value", (PyCFunction)(void (*)(void))pf_host_object_value, METH_FASTCALL,
     "host_object_value(gate, handle) -> (found, object)"},
    {"owned_holds", (PyCFunction)(void (*)(void))pf_owned_holds, METH_FASTCALL,
     "owned_holds(handle, gate, max_values, sort) -> (addresses, reachable)"},
    {"dlpack_capsule", (PyCFunction)(void (*)(void))pf_dlpack_capsule, METH_FASTCALL,
     "dlpack_capsule(address, versioned) -> a DLPack capsule of a managed tensor"},
    {"live_count", pf_live_count, METH_O,
     "live_count(kind) -> the number of holds of that kind that C has through this module"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef pf_module = {
    PyModuleDef_HEAD_INIT,
    "packedfunc._cext",
    "The compiled fast path of packedfunc (private; see the package).",
    -1,
    pf_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit__cext(void) {
  static const struct {
    const char* name;
    PyTypeObject* type;
  } types[] = {{"FunctionBase", &pf_function_type},  {"Loan", &pf_loan_type},
               {"ObjectBase", &pf_object_base_type}, {"ArrayBase", &pf_array_base_type},
               {"MapBase", &pf_map_base_type},       {"ListBase", &pf_list_base_type},
               {"DictBase", &pf_dict_base_type},     {"Field", &pf_field_type},
               {"Method", &pf_method_type}};
  PyObject* m = PyModule_Create(&pf_module);
  if (m == NULL) return NULL;
  if (PyModule_AddFunctions(m, pf_container_methods) < 0) goto fail;
  for (size_t i = 0; i < sizeof types / sizeof types[0]; ++i) {
    if (PyType_Ready(types[i].type) < 0) goto fail;
    Py_INCREF(types[i].type);
    if (PyModule_AddObject(m, types[i].name, (PyObject*)types[i].type) < 0) {
      Py_DECREF(types[i].type);
      goto fail;
    }
  }
  if (PyModule_AddIntConstant(m, "HOLD_OBJECT", PF_HOLD_OBJECT) < 0 ||
      PyModule_AddIntConstant(m, "HOLD_FUNCTION", PF_HOLD_FUNCTION) < 0)
    goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
