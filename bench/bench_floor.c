/*
 * pf_bench_floor: the floor of bench_python.py, a hand-written CPython
 * extension whose METH_FASTCALL functions do the work of the packed
 * functions of bench_pylib.c with nothing in between: what any binding's
 * call costs at least on this interpreter.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdint.h>
#include <string.h>

PyMODINIT_FUNC PyInit_pf_bench_floor(void);

/* Not inlined, as the packed add is a call too. */
__attribute__((noinline)) static int64_t floor_add_impl(int64_t a, int64_t b) { return a + b; }

static PyObject* floor_add(PyObject* m, PyObject* const* args, Py_ssize_t n) {
  (void)m;
  if (n != 2) {
    PyErr_SetString(PyExc_TypeError, "add(a, b)");
    return NULL;
  }
  long long a = PyLong_AsLongLong(args[0]);
  if (a == -1 && PyErr_Occurred()) return NULL;
  long long b = PyLong_AsLongLong(args[1]);
  if (b == -1 && PyErr_Occurred()) return NULL;
  return PyLong_FromLongLong(floor_add_impl(a, b));
}

static PyObject* floor_noarg(PyObject* m, PyObject* const* args, Py_ssize_t n) {
  (void)m, (void)args;
  if (n != 0) {
    PyErr_SetString(PyExc_TypeError, "noarg()");
    return NULL;
  }
  return PyLong_FromLong(7);
}

static PyObject* floor_strlen(PyObject* m, PyObject* const* args, Py_ssize_t n) {
  (void)m;
  if (n != 1 || !PyUnicode_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "strlen(str)");
    return NULL;
  }
  const char* s = PyUnicode_AsUTF8(args[0]);
  if (s == NULL) return NULL;
  return PyLong_FromSize_t(strlen(s));
}

/* call_n(f, n): C calls f(i, i) n times through PyObject_Vectorcall and
 * sums the int results, as bench.call_n does through a packed function. */
static PyObject* floor_call_n(PyObject* m, PyObject* const* args, Py_ssize_t n) {
  (void)m;
  if (n != 2) {
    PyErr_SetString(PyExc_TypeError, "call_n(f, n)");
    return NULL;
  }
  long long count = PyLong_AsLongLong(args[1]);
  if (count == -1 && PyErr_Occurred()) return NULL;
  long long sum = 0;
  for (long long i = 0; i < count; ++i) {
    PyObject* x = PyLong_FromLongLong(i);
    if (x == NULL) return NULL;
    PyObject* pair[2] = {x, x};
    PyObject* r = PyObject_Vectorcall(args[0], pair, 2, NULL);
    Py_DECREF(x);
    if (r == NULL) return NULL;
    long long v = PyLong_AsLongLong(r);
    Py_DECREF(r);
    if (v == -1 && PyErr_Occurred()) return NULL;
    sum += v;
  }
  return PyLong_FromLongLong(sum);
}

/* list_sum(lst): the sum of a list of ints, read in place: what any
 * binding's passing of a list of ints to C costs at least. */
static PyObject* floor_list_sum(PyObject* m, PyObject* const* args, Py_ssize_t n) {
  (void)m;
  if (n != 1 || !PyList_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "list_sum(list)");
    return NULL;
  }
  PyObject* lst = args[0];
  long long sum = 0;
  for (Py_ssize_t i = 0; i < PyList_GET_SIZE(lst); ++i) {
    long long v = PyLong_AsLongLong(PyList_GET_ITEM(lst, i));
    if (v == -1 && PyErr_Occurred()) return NULL;
    sum += v;
  }
  return PyLong_FromLongLong(sum);
}

/* list_echo(lst): a list of ints copied into a C int64 array, and a new
 * list made from that array: what an echo of a list through C costs at
 * least. */
static PyObject* floor_list_echo(PyObject* m, PyObject* const* args, Py_ssize_t n) {
  (void)m;
  if (n != 1 || !PyList_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "list_echo(list)");
    return NULL;
  }
  PyObject* lst = args[0];
  Py_ssize_t size = PyList_GET_SIZE(lst);
  int64_t* values = PyMem_Malloc((size_t)(size ? size : 1) * sizeof(int64_t));
  if (values == NULL) return PyErr_NoMemory();
  for (Py_ssize_t i = 0; i < size; ++i) {
    values[i] = PyLong_AsLongLong(PyList_GET_ITEM(lst, i));
    if (values[i] == -1 && PyErr_Occurred()) {
      PyMem_Free(values);
      return NULL;
    }
  }
  PyObject* out = PyList_New(size);
  for (Py_ssize_t i = 0; out != NULL && i < size; ++i) {
    PyObject* x = PyLong_FromLongLong(values[i]);
    if (x == NULL) Py_CLEAR(out);
    else PyList_SET_ITEM(out, i, x);
  }
  PyMem_Free(values);
  return out;
}

static PyMethodDef floor_methods[] = {
    {"add", (PyCFunction)(void (*)(void))floor_add, METH_FASTCALL, "add(a, b)"},
    {"noarg", (PyCFunction)(void (*)(void))floor_noarg, METH_FASTCALL, "noarg() -> 7"},
    {"strlen", (PyCFunction)(void (*)(void))floor_strlen, METH_FASTCALL, "strlen(s)"},
    {"call_n", (PyCFunction)(void (*)(void))floor_call_n, METH_FASTCALL, "call_n(f, n)"},
    {"list_sum", (PyCFunction)(void (*)(void))floor_list_sum, METH_FASTCALL, "list_sum(lst)"},
    {"list_echo", (PyCFunction)(void (*)(void))floor_list_echo, METH_FASTCALL,
     "list_echo(lst) -> a copy made through a C array"},
    {NULL, NULL, 0, NULL},
};

/* The fields not named are NULL. */
static struct PyModuleDef floor_module = {PyModuleDef_HEAD_INIT, .m_name = "pf_bench_floor",
                                          .m_doc = "The floor of bench_python.py.", .m_size = -1,
                                          .m_methods = floor_methods};

PyMODINIT_FUNC PyInit_pf_bench_floor(void) { return PyModule_Create(&floor_module); }
