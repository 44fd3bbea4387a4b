/*
 * packedfunc — the public C contract.
 *
 * This header and the headers it includes are the whole API of packedfunc.
 * Anything that is not declared in a header under include/packedfunc/ is
 * private: it may change or vanish in any release, and the shared library
 * does not export it. Include this one; the others, one concern each, read
 * top to bottom in this order:
 *
 *   base.h       versions, type codes, PFValue, handles, errors, memory
 *   dtype.h      data types: DLPack 1.1 codes, dtypes as text
 *   object.h     objects: references, boxed pointers, tensors, DLPack
 *   container.h  Array, Map, Shape (immutable); List, Dict (mutable)
 *   tensor.h     tensor constraints, tensor arguments, new tensors
 *   signature.h  the typed-signature grammar: names, defaults, types
 *   function.h   packed functions: create, call, return, metadata, bind
 *   registry.h   the global registry of functions by name
 *   host.h       host languages: interrupts, host functions and objects
 *   typed.h      typed C functions and C function pointers (libffi)
 *   object_type.h  object types a library registers: fields, methods, instances
 *   module.h     modules (shared libraries) and the registration macros
 *   checked.h    typed registrations whose C prototype the compiler checks
 *   api_table.h  versions, struct sizes and the stable function table
 *   rpc.h        (a library of its own) remote functions
 *
 * packedfunc calls functions through one type-erased convention. A call
 * passes an array of PFValue (an 8-byte tagged union), a parallel array of
 * type codes and a count; the callee returns a status and, optionally, one
 * value. Every function — a hand-written packed C function, a typed C
 * function wrapped through libffi, or a callable of a host language such as
 * Python — becomes a reference-counted PackedFunc behind a PFFunctionHandle,
 * and may be published in a thread-safe global registry by name.
 *
 * Conventions that hold for every entry point unless its comment says
 * otherwise:
 *
 *  - Status. Entry points return int: 0 on success, -1 on failure. Outputs
 *    are the last parameters and are written only on success.
 *  - Errors. A failure records an error in storage private to the calling
 *    thread: a kind (such as "TypeError"), a message that names the entry
 *    point and the offending argument, and an optional traceback text. Read
 *    them with PFGetLastError, PFErrorGetKind, PFErrorGetMessage and
 *    PFErrorGetTraceback. An error stays until the next error on the same
 *    thread replaces it, or PFErrorClear. Success does not clear it.
 *  - Borrowed and owned. Arguments are borrowed for the duration of the
 *    call: the library does not keep a pointer you pass in unless the
 *    comment says it takes a reference or a copy. A handle that an entry
 *    point returns through an out-parameter is a new reference that the
 *    caller releases with the matching *Free function.
 *  - Returned strings. A const char* or PFByteArray that a call returns
 *    (a string or bytes result of PFFuncCall, a name list, an error text)
 *    lives in storage private to the calling thread and stays valid until
 *    the next packedfunc call on that same thread that returns a value of
 *    the same kind; copy it if you need it longer. Each such entry point
 *    says so.
 *  - Never fatal. The library never prints, aborts or exits. Misuse that
 *    can be detected (NULL where a value is needed, negative counts,
 *    unknown type codes, wrong handle kinds) is a -1 with an error.
 *    Allocation failure is a -1 with kind "MemoryError".
 *  - C++. Every header compiles as C++11 or later, the registration macros
 *    of module.h and object_type.h included (checked.h's are C only);
 *    nothing else is needed.
 *  - Threads. Every entry point may be called from any thread. Function
 *    handles may be shared between threads; reference counting is atomic.
 *  - fork(). A child process forked while other threads are inside
 *    packedfunc calls may go on using the registry, its functions and
 *    existing closures: the runtime's locks are taken around fork() (with
 *    pthread_atfork handlers installed when the library loads) and released
 *    in both processes. Creating new closures in such a child depends on
 *    libffi's own allocator.
 */
#ifndef PACKEDFUNC_C_API_H_
#define PACKEDFUNC_C_API_H_

#include "packedfunc/base.h"
#include "packedfunc/dtype.h"
#include "packedfunc/object.h"
#include "packedfunc/container.h"
#include "packedfunc/structural.h"
#include "packedfunc/serialize.h"
#include "packedfunc/tensor.h"
#include "packedfunc/signature.h"
#include "packedfunc/function.h"
#include "packedfunc/registry.h"
#include "packedfunc/host.h"
#include "packedfunc/typed.h"
#include "packedfunc/object_type.h"
#include "packedfunc/module.h"
#include "packedfunc/checked.h"
#include "packedfunc/api_table.h"

#endif /* PACKEDFUNC_C_API_H_ */
