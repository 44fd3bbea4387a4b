/*
 * packedfunc — tensors for C code: the constraints a tensor parameter can
 * state (tensor<DTYPE, RANK, LAYOUT, DEVICE>), a packed function's view of
 * a tensor argument whatever form it came in, and new tensors that C code
 * fills and returns.
 */
#ifndef PACKEDFUNC_TENSOR_H_
#define PACKEDFUNC_TENSOR_H_

#include "packedfunc/object.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Tensor constraints                                                        */
/* ------------------------------------------------------------------------ */

/*
 * A tensor type of the signature grammar (signature.h) may say what its
 * tensors must be:
 *
 *     tensor                          any tensor
 *     tensor< DTYPE [, RANK [, LAYOUT [, DEVICE ]]] >
 *
 *     DTYPE   a data type in the text of dtype.h ("float64", "int8x4",
 *             "bf16"), or "*" for any; elements must have exactly this
 *             code, bits and lanes
 *     RANK    the number of dimensions, 0 to PF_TENSOR_MAX_NDIM, in
 *             decimal, or "*" for any
 *     LAYOUT  "contiguous": compact and row-major (C order): no strides,
 *             or strides equal to the row-major ones, ignoring dimensions
 *             of size 1 (numpy's C-contiguous; a tensor with no elements
 *             is contiguous); "*" for any strides. byte_offset may be
 *             anything
 *     DEVICE  a DLPack device type by name: cpu, cuda, cuda_host, opencl,
 *             vulkan, metal, vpi, rocm, rocm_host, ext_dev, cuda_managed,
 *             oneapi, webgpu, hexagon; or "*" for any. The device id is not
 *             constrained
 *
 * Blanks may appear around every part. The canonical text has none and
 * drops trailing "*" parts: "tensor<float64, *, *>" is "tensor<float64>",
 * "tensor<*>" is "tensor", "tensor< *, 2 >" is "tensor<*,2>". So
 * "tensor<float64,1,contiguous>" takes 1-D compact float64 vectors.
 *
 * Where a tensor meets its constraint (an argument or result of a typed
 * function, an argument or result of a C function pointer made by
 * PFFuncToCFunction, PFArgGetTensor), a tensor that does not meet it is
 * refused, naming what was required and what was given:
 *  - a wrong dtype is a TypeError;
 *  - a wrong rank, a layout that is not contiguous, a wrong device type is
 *    a ValueError;
 * checked in that order, the first failure reported, e.g.
 *   "argument 0 'x': expected tensor<float64,1,contiguous>, got int64
 *    tensor of rank 1"
 *   "argument 0 'x': expected tensor<float64,1,contiguous>, got float64
 *    tensor of rank 1 that is not contiguous (strides [2])".
 * These are errors about a call's arguments: they carry no traceback line
 * (PF_ERROR in base.h). A NULL tensor (kPFNull, where a typed function
 * takes it) is not checked: its C parameter is NULL.
 *
 * PFTensorConstraint is a constraint as PFParamInfo (signature.h) reports
 * it: `flags` says which parts are set; the others are read only with
 * their flag.
 */

/* The largest RANK a constraint may name, and the largest ndim that
 * PFTensorAlloc makes (numpy's limit). */
#define PF_TENSOR_MAX_NDIM 64

#define kPFTensorCheckDtype 1u  /* dtype is set */
#define kPFTensorCheckNdim 2u   /* ndim is set */
#define kPFTensorContiguous 4u  /* compact row-major */
#define kPFTensorCheckDevice 8u /* device_type is set */

typedef struct PFTensorConstraint {
  uint32_t flags;      /* kPFTensorCheck* and kPFTensorContiguous bits; 0: any tensor */
  int32_t ndim;        /* with kPFTensorCheckNdim: the rank */
  DLDataType dtype;    /* with kPFTensorCheckDtype: the data type */
  int32_t device_type; /* with kPFTensorCheckDevice: a DLDeviceType */
} PFTensorConstraint;

/* ------------------------------------------------------------------------ */
/* Tensor arguments of packed functions                                      */
/* ------------------------------------------------------------------------ */

/*
 * Gives a packed function the DLTensor of its argument `index`, whichever
 * form it came in: a borrowed DLTensor* (kPFDLTensorHandle) or a tensor
 * object (kPFObjectHandle of a kPFObjectTensor: its DLTensor). *out is
 * borrowed for the call, as the argument is: valid until the packed
 * function returns (longer only for a tensor object the function retains).
 *
 * `constraint` is NULL (any tensor) or a tensor type of the grammar above,
 * "tensor<float64, 1, contiguous>", which the tensor must meet; it is
 * parsed on each call (a few hundred instructions: keep it short where
 * calls are hot). As a typed function's `tensor` parameter does, this
 * refuses a read-only tensor object (object.h), whose data a DLTensor*
 * could write: a function that only reads one takes it with
 * PFTensorGetDLTensor. Unlike a typed parameter, it also refuses kPFNull:
 * *out is never NULL on success.
 *
 * Errors about the argument, worded as a typed function's, with no
 * traceback line: index not below num_args ("argument 2: expected tensor,
 * but the call has 2 arguments"), a type code that is not a tensor, a
 * tensor object that is not live, a read-only one (TypeError); a tensor
 * that does not meet the constraint (TypeError or ValueError, above).
 * Misuse, with the entry point's name: NULL out, NULL args or type_codes
 * with num_args > 0 (TypeError); negative num_args or index (ValueError);
 * a constraint outside the grammar, or not a tensor type (ValueError
 * naming the position, as a bad signature). *out is written only on
 * success. Thread-safe; allocates nothing unless it records an error.
 */
PF_EXPORT int PFArgGetTensor(const PFValue* args, const int* type_codes, int num_args, int index,
                             const char* constraint, DLTensor** out);

/* ------------------------------------------------------------------------ */
/* New tensors                                                               */
/* ------------------------------------------------------------------------ */

/* PFTensorAlloc's flags. */
#define kPFTensorAllocZero 1u /* the elements start as zero bytes */

/* The alignment of a tensor's data from PFTensorAlloc, in bytes (a cache
 * line; enough for any SIMD load). */
#define PF_TENSOR_ALIGN 64

/*
 * Allocates a new tensor object (kPFObjectTensor) of `ndim` dimensions of
 * sizes shape[0 .. ndim), elements of `dtype`, on the CPU (device
 * {kDLCPU, 0}), compact row-major (strides NULL, byte_offset 0), writable.
 * Its data is aligned to PF_TENSOR_ALIGN bytes, never NULL (also for no
 * elements), and bits * lanes * count bits long, rounded up to whole
 * bytes (sub-byte elements are packed, as DLPack lays them out: 3 int4
 * take 2 bytes); zero bytes with kPFTensorAllocZero, else unspecified. The
 * shape is copied. All of it comes from the runtime's allocator
 * (PFSetAllocator).
 *
 * *out is a new reference (PFObjectFree): return it from a packed
 * function with PFCFuncSetReturn, which takes its own, then release
 * yours. The memory goes when the last reference goes. *view, when view
 * is not NULL, is the tensor's DLTensor (as PFTensorGetDLTensor gives it),
 * valid as long as the object lives: fill its data through it.
 *
 * Errors: NULL out, NULL shape with ndim > 0 (TypeError); ndim negative or
 * above PF_TENSOR_MAX_NDIM, a negative dimension, a dtype of 0 bits or 0
 * lanes, unknown flag bits, a size larger than any object can have
 * (PTRDIFF_MAX bytes, checked without overflow) (ValueError naming the
 * argument); MemoryError. Nothing is written on error. Thread-safe.
 */
PF_EXPORT int PFTensorAlloc(int ndim, const int64_t* shape, DLDataType dtype, uint32_t flags,
                            PFObjectHandle* out, DLTensor** view);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_TENSOR_H_ */
