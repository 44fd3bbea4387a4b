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

/* An Object's fields that C reads (the rest are the package's slots). */
typedef struct {
  PyObject_HEAD unsigned long long handle; /* PFObjectHandle; 0 once released */
  int code;                                /* the type code it passes to C with */
  unsigned int type_index;                 /* its PFObjectTypeIndex */
  PyObject* loan;                          /* what the collector was lent (see _holds), or NULL */
  char* data;         /* the struct of a registered type's instance, else NULL */
  int in_map;         /* 1 while the identity map holds it */
  PyObject* weakrefs; /* its weak references (ObjectBase's, for every subtype) */
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

#endif /* PACKEDFUNC_CEXT_OBJECTS_H_ */
