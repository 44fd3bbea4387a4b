/*
 * packedfunc — host languages: the interrupt check, host functions and host
 * objects behind a gate, and the host cycle collector's question.
 */
#ifndef PACKEDFUNC_HOST_H_
#define PACKEDFUNC_HOST_H_

#include "packedfunc/function.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Environment                                                               */
/* ------------------------------------------------------------------------ */

/* A host's check for a pending interrupt (Ctrl-C): returns 0, or -1 after
 * recording an error (kind "KeyboardInterrupt" by convention). */
typedef int (*PFSignalChecker)(void);

/* Installs the host's checker (NULL removes it). Bindings call this; a
 * Python host wires it to Python's own signal check. Thread-safe.
 *
 * When it returns, no other thread is running the previous checker or
 * about to call it: it waits (polling every millisecond, without holding
 * any lock) until the calls of the old checker that are in progress on
 * other threads have returned. So a host that is shutting down can remove
 * its checker and then free what the checker uses. Calls of the old
 * checker further up the calling thread's own stack are not waited for.
 * Because of that wait, do not call it while holding something that a
 * running checker needs (a Python host calls it with the GIL released).
 * Calls that begin while two threads set checkers at once may be waited
 * for by both. Returns 0. */
PF_EXPORT int PFEnvSetSignalChecker(PFSignalChecker checker);

/* Lets a long-running function ask whether the user asked to interrupt:
 * returns 0 to go on, or -1 with the host's error recorded, which the
 * function should pass up by returning -1. Returns 0 when no host installed
 * a checker. Cheap enough to call every few milliseconds. Thread-safe. */
PF_EXPORT int PFEnvCheckSignals(void);

/* ------------------------------------------------------------------------ */
/* Host functions                                                            */
/* ------------------------------------------------------------------------ */

/*
 * A host function is a packed function whose code belongs to a host
 * language runtime, such as a Python interpreter, that may stop being able
 * to run it while C still holds the function: an interpreter that exits
 * frees its callbacks, and calling one afterwards crashes. A host function
 * is also one whose code cannot be trusted to return a status: a Python
 * exception raised on the very entry of a callback (a Ctrl-C handler runs
 * there) escapes before the callback's own handler, and the foreign-function
 * layer then returns an undefined int to C.
 *
 * A gate (an object of type kPFObjectHostGate) solves both. Every call of a
 * host function, and its finalizer, goes through the function's gate:
 *
 *  - While the gate is open, the call is counted as in progress on the gate
 *    (a lock-free counter), `func` runs, and the call's result is the
 *    status that the host wrote into the PFHostCall it was given, never
 *    func's own return value.
 *  - Once the gate is closed (PFHostGateClose), a call fails at once, with
 *    kind RuntimeError and the message given to PFHostGateClose, without
 *    running any host code; and the finalizer is skipped.
 *
 * So a host that shuts down closes its gate, which waits for the calls in
 * progress to return; after that no thread enters host code again, and the
 * host may free it. Gates, host functions and the wrapper that calls them
 * hold no lock while host code runs.
 */

/* One call of a host function, on the C stack of the gate's wrapper; its
 * address is the `resource_handle` argument of the host's PFPackedCFunc,
 * valid only during that call. */
typedef struct {
  void* resource_handle; /* the resource given at creation */
  int32_t status;        /* kPFHostPending on entry; the host writes 0 or -1 as its last act */
  int32_t reserved;      /* 0; the host leaves it alone */
} PFHostCall;

/* The `status` of a PFHostCall before the host has reported. */
#define kPFHostPending 1

/* Creates an open gate. *out is a new reference (PFObjectFree); every host
 * function made on the gate holds another one.
 * Errors: NULL out (TypeError); MemoryError. Thread-safe. */
PF_EXPORT int PFHostGateCreate(PFObjectHandle* out);

/*
 * Closes a gate, then waits for the calls of its host functions (and their
 * finalizers) that are in progress on OTHER threads to return.
 *
 * From the moment it is closed, a call of any host function of the gate
 * fails at once with kind RuntimeError and the message `message` (copied;
 * NULL gives "the host of this function has shut down"), and a finalizer of
 * one of them is skipped: its resource is deliberately leaked, since the
 * host can no longer take it back. Calls of the gate's functions that are
 * further up the calling thread's own stack (a host function that closes
 * its own gate) are not waited for; they finish after this returns.
 *
 * The wait polls every millisecond and holds no lock between polls (each
 * poll counts the calls under the runtime's gate list lock, running no
 * user code); docs/internals.md says how calls are counted. `timeout_ms`
 * bounds it: 0 checks once, a negative value waits as long as it takes. Call it
 * without holding anything that host code in progress needs (a Python host
 * calls it with the GIL released), or those calls cannot finish.
 *
 * Idempotent: closing a closed gate keeps the first message and waits
 * again. Returns 0 when no call is in progress on another thread.
 * Errors: gate NULL or not a live gate (TypeError); calls still in progress
 * on other threads at the deadline (kind "TimeoutError", -1; the gate is
 * closed all the same, and those calls go on); MemoryError when the
 * message cannot be copied (the gate is closed all the same, with the
 * default message). Thread-safe.
 */
PF_EXPORT int PFHostGateClose(PFObjectHandle gate, const char* message, int timeout_ms);

/*
 * Creates a host function on `gate`: a PackedFunc that calls `func` through
 * the gate. *out is a new reference (PFFuncFree); the function holds a
 * reference to the gate.
 *
 * Each call passes `func` the caller's args, type codes, count and return
 * handle as usual, and as its resource_handle a PFHostCall* whose
 * resource_handle member is `resource_handle` and whose status is
 * kPFHostPending. `func` sets its value with PFCFuncSetReturn as any
 * packed function does, and writes the call's status into the PFHostCall
 * as its last act: 0 for success; -1 for failure, after recording the error.
 * Its own return value is ignored. The call's result is then:
 *   - status 0: success;
 *   - status -1: failure with the error the host recorded (or, if it
 *     recorded none, PFFuncCall's RuntimeError saying so);
 *   - still kPFHostPending (the host could not report, e.g. an exception
 *     escaped its handler): failure with the error that the host recorded
 *     on this thread during the call, if it recorded one; otherwise a
 *     RuntimeError saying that the host function did not complete;
 *   - any other status: a RuntimeError naming it.
 *
 * `fin` (may be NULL) receives `resource_handle` itself, not a PFHostCall.
 * It runs through the gate, exactly once, when the function's last
 * reference goes, unless the gate is closed by then: then it is skipped
 * and the resource is leaked. If this call fails, `fin` runs at once under
 * the same rule (or directly, when `gate` is not a gate at all).
 *
 * Errors: gate NULL or not a live gate, NULL func or out (TypeError); a
 * closed gate (RuntimeError with the gate's message); MemoryError.
 * Thread-safe; the function may be called from any thread, as the host
 * allows.
 */
PF_EXPORT int PFFuncCreateFromHostCFunc(PFObjectHandle gate, PFPackedCFunc func,
                                        void* resource_handle, PFPackedCFuncFinalizer fin,
                                        PFFunctionHandle* out);

/*
 * A host object is a value of a host language (a Python object) that C
 * holds as a reference-counted object (kPFObjectHostObject), so that it can
 * travel through calls as kPFObjectHandle, be kept with PFObjectRetain and
 * come back to the host as itself. `payload` is the host's own pointer (a
 * key or a reference it keeps); the runtime never reads it. `fin` (may be
 * NULL) releases it when the last reference goes, on whatever thread drops
 * that reference, through the gate like a host function's finalizer: once
 * the gate is closed it is skipped (the payload is deliberately leaked).
 * If this call fails, `fin` runs at once (also through the gate).
 * *out is a new reference (PFObjectFree); the object holds a reference to
 * the gate. Errors: gate not a live host gate, NULL out (TypeError);
 * MemoryError. Thread-safe.
 */
PF_EXPORT int PFHostObjectCreate(PFObjectHandle gate, void* payload, PFObjectFinalizer fin,
                                 PFObjectHandle* out);

/* Reads the payload of a host object made on `gate` (so that a host
 * recognizes its own objects). *out is borrowed: valid while the object
 * lives. Errors: obj not a live host object, gate not a live host gate,
 * NULL out, an object made on another gate (TypeError). Thread-safe. */
PF_EXPORT int PFHostObjectGetPayload(PFObjectHandle obj, PFObjectHandle gate, void** out);

/*
 * For a host's cycle collector: the host objects and host functions of
 * `gate` that the caller's one reference to `root` alone keeps alive.
 *
 * docs/internals.md says why a collector needs this.
 *
 * The walk starts at `root` and follows the references that objects
 * hold: an Array's items, a Map's values, a List's items, a Dict's keys
 * and values, a bound function's inner function and the constants it
 * holds itself (PFFuncBind), a closure's function (PFFuncToCFunction),
 * and the objects in the handle fields (func, array, map, shape, object,
 * list, dict, tensor, obj<KEY>) of an instance of a registered type
 * (object_type.h). No other reference is followed (a module's functions,
 * a function's module, a pre-pack cache's values, whatever a boxed
 * object's payload or an extension value holds). An object counts as
 * owned by the caller when dropping the caller's reference to `root`
 * would free it: `root` when the caller's is its only reference, and any
 * object whose every reference is held by owned objects. Lists, Dicts and
 * instances' fields may make cycles (a List that holds itself, directly
 * or through other Lists, Dicts and instances; an instance whose field
 * holds it back); a cycle that holds itself is never freed by reference
 * counting, so neither it nor anything it holds is owned. Objects met
 * only through references that are not followed are never reported: an
 * unknown reference errs on the side of keeping things alive.
 *
 * Lists and Dicts change at any time. The walk reads each one's items at
 * one moment, under the container's read lock (held for that read only),
 * and holds a reference of its own to each object it reached through one
 * until it returns: another thread may remove an item and release it
 * meanwhile, and then it is the walk's release that frees the object,
 * running its finalizer on the calling thread before the call returns
 * (only then does this call run user code). What it reports is as true as
 * the rest of the answer (below) for a graph that no one else can reach,
 * and may be out of date as soon as it returns for one that others can.
 * The walk reads an instance's handle fields as any reader of them does
 * (object_type.h, "Threads"): no write to them may run during the call.
 *
 * out[0 .. min(cap, *num_owned)) receives the payload (PFHostObjectCreate)
 * or resource_handle (PFFuncCreateFromHostCFunc) of each owned host object
 * and host function made on `gate`, each object once; when *num_owned is
 * larger than cap, call again with room for that many. *num_owned is 0
 * when root has other references than the caller's, and when a reference
 * count in the graph changed during the walk (another thread took or
 * dropped a reference into it; nothing is reported as owned then).
 *
 * `num_reachable` may be NULL; otherwise it receives how many host
 * objects and host functions of `gate` the walk reached, owned or not,
 * plus one for each List, Dict and instance with handle fields reached
 * (its items or fields may come to hold one later). 0 means that root
 * never reaches one, now or later (the references followed through
 * Arrays, Maps and functions never change), so a collector can stop
 * asking about root. With NULL, the call returns at once when root has
 * other references.
 *
 * `max_values` bounds the work: the walk looks at that many values
 * (items, constants, references) at most; past it, the call gives up with
 * *num_owned 0 and *num_reachable -1. Memory for the walk is allocated and
 * freed by the call.
 *
 * The answer holds while nobody else can take a new reference to an owned
 * object: so, for a reference that its holder alone can use (a Python
 * wrapper under the GIL). A call in progress that borrowed root (or an
 * object inside it) may take one at any time: the host must then still
 * treat a reported object as alive until its finalizer runs. Reads the
 * graph without changing it; takes no lock but the read locks of the
 * Lists and Dicts it meets, one at a time; runs no user code except the
 * finalizers described above; thread-safe.
 * Errors: root not a live object, gate not a live gate, NULL num_owned,
 * NULL out with cap > 0 (TypeError); negative max_values or cap
 * (ValueError); MemoryError.
 */
PF_EXPORT int PFObjectFindOwnedHosts(PFObjectHandle root, PFObjectHandle gate, int64_t max_values,
                                     void** out, int64_t cap, int64_t* num_owned,
                                     int64_t* num_reachable);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_HOST_H_ */
