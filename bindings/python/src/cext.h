/*
 * packedfunc._cext: what its source files share (private to the extension;
 * every symbol here is hidden: the extension is built with
 * -fvisibility=hidden). cext.c holds calls, callbacks, holds and the
 * module; objects.c ObjectBase and the classes of registered object types
 * (objects.h); containers.c the container types and the conversions of
 * lists, tuples and dicts.
 */
#ifndef PACKEDFUNC_CEXT_H_
#define PACKEDFUNC_CEXT_H_

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "objects.h"
#include "packedfunc/c_api.h"

/* ---- cext.c ---- */

/* The library's function table, bound once by init() before any use. */
extern const PFApi* pf_api;

/* 1 when C holds some Python object through this module (a host object or
 * a host function made here is alive); needs the GIL. */
int pf_any_held(void);

/* 1 with *handle set when x is a Function (a FunctionBase) that was not
 * released; else 0. Borrowed: valid while x lives. */
int pf_function_handle(PyObject* x, void** handle);

/* The _fill of x, a Function (see FunctionBase): a positional call with
 * fewer arguments takes the signature's defaults; PY_SSIZE_T_MAX before
 * it is looked up. */
Py_ssize_t pf_function_fill(PyObject* x);
/* Calls `handle` (func's, or a reference to it of the caller's own)
 * through the checked entry, FuncCall, around which the GIL is released
 * unless the Function func keeps it (Function.release_gil), as func's own
 * calls do; a callback on this thread is served as from func's call. With
 * the GIL; returns FuncCall's status. */
int pf_function_call_handle(PyObject* func, void* handle, PFValue* values, int* codes, int n,
                            PFValue* ret, int* ret_code);

/* ---- containers.c ---- */

/* The compiled bases of the container classes (Array, Map, List, Dict),
 * which the module exports; they derive from ObjectBase (objects.c). */
extern PyTypeObject pf_array_base_type;
extern PyTypeObject pf_map_base_type;
extern PyTypeObject pf_list_base_type;
extern PyTypeObject pf_dict_base_type;

/* The module functions of containers.c (adopt_object, set_container_hooks,
 * should_track, refs_may_change), added to the module beside cext.c's own. */
extern PyMethodDef pf_container_methods[];

/* A list, tuple or dict argument (of exactly those types) as a new C
 * Array or Map: 1 with *value the new reference (the caller releases it
 * with ObjectFree once the call returned) and *code kPFObjectHandle; 0,
 * with no exception, for a value that the package's general path must
 * convert (an item of another type, an int outside int64, nesting too
 * deep...), which then raises the package's errors; -1 with an exception
 * (MemoryError). */
int pf_container_arg(PyObject* x, PFValue* value, int* code);

/* The Python value of an object handle that is an Array, Map, Shape, List
 * or Dict: a new wrapper of the package's class, which takes over the
 * reference when `owned` is 1 and takes a reference of its own otherwise.
 * For an object of any other type: NULL with no exception (the handle is
 * untouched). NULL with an exception on error. */
PyObject* pf_container_value(void* handle, int owned);

#endif /* PACKEDFUNC_CEXT_H_ */
