/*
 * packedfunc remote functions — the public C contract of libpackedfunc_rpc.
 *
 * A server publishes the functions of its global registry whose names begin
 * with one of its exposed prefixes on a ZeroMQ endpoint; a client connects
 * to one or several servers and gets a module (PFModuleHandle) whose
 * functions are remote functions: ordinary PackedFuncs that send their
 * arguments to a server, run the function there and bring its result or
 * its error back. Transport is ZeroMQ (DEALER sockets on the client, a
 * ROUTER on the server), the wire format MessagePack (msgpack-c). This
 * library is separate from libpackedfunc so that the core keeps depending
 * only on libffi and uthash; it uses only the core's public API
 * (packedfunc/c_api.h), whose conventions hold here too: 0/-1 status, the
 * error in per-thread storage with a kind, outputs last, never a print, an
 * abort or an exit.
 *
 * What crosses a call, in both directions:
 *   - every plain type code (int, float, bool, null, dtype, device);
 *   - str and bytes (copied);
 *   - containers (Array, Map, Shape, List, Dict), recursively, up to
 *     PF_RPC_MAX_DEPTH levels of nesting; a List or Dict arrives as a new
 *     List or Dict with what it held when the call was sent (a snapshot:
 *     changes on either side later are not seen by the other; a peer built
 *     before List and Dict refuses them with a ValueError);
 *   - CPU tensors, as kPFDLTensorHandle or as tensor objects: copied, any
 *     strides, arriving compact (row-major) as a tensor object (a
 *     kPFDLTensorHandle argument arrives as a kPFDLTensorHandle whose
 *     tensor lives for the call) whose data is aligned for its elements;
 *     one of 64 KiB or more usually keeps its data in the received message,
 *     which then lives as long as the tensor (no copy on arrival). A
 *     compact tensor object of 64 KiB or more is not copied on sending
 *     either: its bytes go out in a ZeroMQ frame of their own, straight
 *     from its memory, and the message holds a reference to the object
 *     until ZeroMQ has written them: a change to its data before then
 *     (before the call returns; after a call that failed, possibly
 *     later; for a result, after it is returned) may reach the other side. A kPFDLTensorHandle, which
 *     the caller owns only for the call, is copied into the message;
 *     wrap it in a tensor object to send it without a copy;
 *   - functions: a function that a client passes (an argument, or the
 *     result of a callback) becomes, on the server, a remote function that
 *     calls back into the client over the same connection while the client's
 *     call that passed it is in progress; calling it later fails with a
 *     RuntimeError. A function that a server passes (a result, or an
 *     argument of a callback) becomes, on the client, a remote function that
 *     stays callable until the client releases it (or until the server
 *     finds the client gone: see "Clients that go away" at PFRPCServe),
 *     served by the same server; a client holds at most
 *     max_exports_per_client of them at once. Callbacks nest both ways: a
 *     callback that the
 *     server makes during a call is served by the client thread that is
 *     waiting for that call, and a remote call that this callback makes is
 *     served by the server thread that is waiting for the callback, up to
 *     PF_RPC_MAX_NESTING calls deep on one thread.
 *   - instances of registered object types (object_type.h), by value, in
 *     both directions: an argument or a result that holds one anywhere
 *     (itself, or inside its containers) crosses whole as one document of
 *     serialize.h (PFToJSON; the wire's PF_RPC_EXT_DOCUMENT, version 4),
 *     which carries each instance's type key and fields, recursively, and
 *     keeps what the value shares: an instance met twice in it arrives as
 *     one instance met twice. A cycle (an instance whose List field holds
 *     the instance) does not cross: the runtime never frees a cycle by
 *     itself, so a peer could make the receiver keep memory with every
 *     call; the receiver refuses such a document before building anything
 *     (PFFromJSONEx with kPFJSONRefuseCycles; ValueError "... on a cycle,
 *     which kPFJSONRefuseCycles refuses ..."): the server's error reply
 *     for an argument, the client's call for a result. The receiver
 *     rebuilds it with PFFromJSONEx: each instance a new one of the registered type
 *     of the same key, made without its constructor (its prepare hook runs:
 *     a C++ class's default-constructs it, object_type.h), its fields set. What
 *     crosses is a copy: a change on either side later is not seen by the
 *     other. Sharing holds within one argument (or the result), not
 *     across arguments. A type that the receiving side has not registered
 *     fails the call naming its key: an argument, with the server's error
 *     reply ("rpc: a value sent by value cannot be rebuilt: ..."); a
 *     result, on the client. Everything in such a value must be something
 *     a document holds (serialize.h): a function, a module or an opaque
 *     handle beside an instance fails the call on the sending side, naming
 *     the argument ("remote call of 'F': argument 0: ..."). The document
 *     is part of the message: it counts toward max_message_size and the
 *     server's queued bytes, and the receiver refuses one whose rebuilding
 *     would cost too much memory (PF_RPC_DECODE_FACTOR, counting each
 *     container and item the text may hold).
 * Opaque handles (kPFOpaqueHandle), modules, extension codes, tensors on
 * other devices and objects other than functions, containers, tensors and
 * instances cannot cross: TypeError naming the argument (and the item
 * inside a container).
 *
 * Errors. A remote error arrives with its kind, its message and its
 * traceback lines, followed by one line naming the server
 * ("  on server tcp://HOST:PORT"). A call that gets no reply within its
 * timeout fails with kind "TimeoutError", at the timeout (not when the
 * reply comes); a call interrupted by a signal (the host's signal checker,
 * PFEnvCheckSignals, which a client's waiting thread asks about ten times
 * a second, fails) fails at once with the host's error (Python's
 * KeyboardInterrupt for Ctrl-C); a reply that arrives after its call failed is dropped,
 * never handed to that call or to another one. A call to a server that is
 * unreachable, or that dies or drops the connection while the call is in
 * flight, fails with kind "ConnectionError" within the timeout. The library
 * never sends a request twice: a call that failed with ConnectionError may
 * or may not have run on the server, and never ran twice. Both sides survive
 * the other's death: the client reconnects by itself when a server comes
 * back on the same endpoint. A client, too, assumes a hostile server: it
 * queues at most PF_RPC_SEND_QUEUE messages per server that no call of its
 * own waits for (replies to the server's requests, releases) while the
 * server does not read them, and drops the rest; and it refuses a reply
 * that would take too much memory to decode (PF_RPC_DECODE_FACTOR).
 *
 * Threads. Every entry point is thread-safe. Remote functions may be called
 * from any number of threads at once. A connection's sockets belong to one
 * thread at a time: a caller that waits for a reply polls them itself when
 * no other thread does (so a lone caller's round trip crosses no thread of
 * this library), and otherwise sleeps until its reply is handed to it; a
 * housekeeping thread per connection follows it while nobody calls. A
 * server runs one I/O thread, which never blocks on a client and reads
 * only the header of each message (a message is decoded by the worker
 * that runs its call), and its workers (see "Fairness" at PFRPCServe). No user code runs while a lock
 * of this library is held.
 */
#ifndef PACKEDFUNC_RPC_H_
#define PACKEDFUNC_RPC_H_

#include <stddef.h>
#include <stdint.h>

#include "packedfunc/c_api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this library, which follows the core's. */
#define PF_RPC_VERSION_STRING PF_VERSION_STRING

/* The wire protocol's version. Every message carries it; a peer that speaks
 * another version is refused with a clear error at connect. Version 3
 * sends large tensor objects' bytes in frames of their own after the
 * message's MessagePack body (version 2 allowed one frame); version 4
 * sends a value that holds instances of registered types as a document
 * (see "instances" above). */
#define PF_RPC_PROTOCOL_VERSION 4

/* The deepest nesting of containers that crosses a call. */
#define PF_RPC_MAX_DEPTH 24

/* The deepest nesting of calls served on one thread: a call made from a
 * callback, which calls back again, and so on (see "functions" in the list
 * above); each side refuses a call that would nest deeper, with a
 * RuntimeError, so that a peer cannot grow the other's stack without
 * bound. */
#define PF_RPC_MAX_NESTING 64

/* The call timeout when none is given, in milliseconds. */
#define PF_RPC_DEFAULT_TIMEOUT_MS 30000

/* The largest message either side accepts, unless told otherwise: larger
 * ones are refused by the transport (the connection that sent one is
 * dropped); a message whose frames are each within it but together larger
 * is dropped whole. */
#define PF_RPC_DEFAULT_MAX_MESSAGE ((int64_t)1 << 30)

/* Decoding a message takes memory: about 24 bytes for each MessagePack
 * item, more for each container. Either side refuses a message whose
 * decoding would take more than PF_RPC_DECODE_FACTOR times its size plus
 * PF_RPC_DECODE_SLACK bytes (a request with a ValueError reply, a reply
 * by failing its call with a ValueError "rpc: a message of N bytes would
 * take about M bytes to decode, ..."), so that a message of a few
 * megabytes of empty containers cannot take gigabytes. Arrays of numbers
 * of any size pass; many numbers cross best as a tensor or bytes. */
#define PF_RPC_DECODE_FACTOR 64
#define PF_RPC_DECODE_SLACK ((int64_t)16 << 20)

/* The calls one client may have queued or running on a server at once,
 * unless told otherwise (PFRPCServerOptions.max_calls_per_client). */
#define PF_RPC_DEFAULT_MAX_CALLS_PER_CLIENT 64

/* The bytes of the calls of one client that wait in a server's queue for
 * a worker, and of the calls of all clients together: a call beyond either
 * is refused at once (see "Fairness" at PFRPCServe). One call always fits
 * in a queue that is empty. */
#define PF_RPC_QUEUED_BYTES_PER_CLIENT ((int64_t)64 << 20)
#define PF_RPC_QUEUED_BYTES ((int64_t)1 << 30)

/* The messages a server queues to one client (ZeroMQ's send high-water
 * mark) while the client does not read them; beyond it, messages to that
 * client are dropped (see "Clients that do not read" at PFRPCServe). */
#define PF_RPC_SEND_QUEUE 1000

/* The bytes of messages a server queues to one client before it stops
 * running that client's calls until they drain (see "Clients that do not
 * read" at PFRPCServe). */
#define PF_RPC_SEND_QUEUE_BYTES ((int64_t)64 << 20)

/* The functions of a server that one client may hold at once, unless told
 * otherwise (PFRPCServerOptions.max_exports_per_client). */
#define PF_RPC_DEFAULT_MAX_EXPORTS_PER_CLIENT 1024

/* The functions of a server that the clients at one network address (one
 * peer, however many connections it opens) may hold together: this many
 * times max_exports_per_client. A server has no limit across addresses, so
 * that no peer can take the room of another. */
#define PF_RPC_EXPORTS_PER_ADDRESS 16

/* How long a server goes on holding the functions it passed to a client
 * that it cannot reach any more (see "Clients that go away" at
 * PFRPCServe), in milliseconds. */
#define PF_RPC_CLIENT_GONE_MS 5000

/* A CURVE key in Z85 text: 40 characters and a NUL. */
#define PF_RPC_KEY_SIZE 41

/* ------------------------------------------------------------------------ */
/* Client                                                                    */
/* ------------------------------------------------------------------------ */

/* Options of a connection. Zero-initialize, then set what you need; every
 * field has a default when left 0 or NULL. The strings are copied by
 * PFRPCConnect. */
typedef struct {
  /* How long a call waits for its reply, in milliseconds (also how long
   * PFRPCConnect waits for the first server): 0 means
   * PF_RPC_DEFAULT_TIMEOUT_MS. Negative values are refused. */
  int timeout_ms;
  /* CURVE: the server's public key (Z85). When set, the connection is
   * encrypted and authenticated, and client_public_key and
   * client_secret_key must be set too. */
  const char* server_key;
  const char* client_public_key;
  const char* client_secret_key;
  /* The largest reply accepted, in bytes: 0 means
   * PF_RPC_DEFAULT_MAX_MESSAGE. */
  int64_t max_message_size;
} PFRPCOptions;

/*
 * Connects to one server, or to several: `endpoints` is one ZeroMQ endpoint
 * ("tcp://127.0.0.1:9190") or several separated by commas. With several,
 * calls are spread over the servers that are connected, one after another;
 * a call that the server has to call back, or a function that a server
 * returned, stays with that server.
 *
 * Waits, up to the timeout, until one server answers with the list of the
 * functions it exposes, and builds the module from that list: *out is a
 * new reference to a module (kPFObjectModule) whose functions are remote
 * functions named as on the server, with the server's signature and doc as
 * metadata (PFModGetFunction, PFModListFunctionNames and PFFuncGetInfo
 * work on it as on any module).
 *
 * Lifetime. The connection (its housekeeping thread, ZeroMQ's threads and
 * its sockets) is open until one of these two ends it, and every
 * PFRPCConnect that succeeds must be paired with exactly one of them:
 *   - PFRPCDisconnect(*out) closes it at once, explicitly, whatever is
 *     still referenced (as close() does to a file);
 *   - PFRPCDetach(*out) hands it over to its references: it stays open
 *     while its module or any remote function of it is referenced (the
 *     module's functions, which the module holds, and every function a
 *     server returned), and closes by itself when the last of them goes.
 * Until then the connection holds its own reference to the module, so
 * PFModFree on yours alone closes nothing. Every remote function counts,
 * whatever it came from, so a function the server returned keeps working
 * after the module it came from is gone, as long as the connection was
 * detached rather than disconnected. After PFRPCDisconnect, the module's
 * functions and the remote functions the servers returned stay valid
 * objects whose calls fail with ConnectionError; each holds a reference to
 * a small record of the connection, which goes with the last of them.
 *
 * Errors: NULL endpoints or out (TypeError); an empty or malformed endpoint
 * list, a negative timeout, incomplete or malformed CURVE keys (ValueError
 * naming the option); no server answered within the timeout
 * (ConnectionError, naming the endpoints); a server that speaks another
 * protocol version (ValueError naming both versions); MemoryError. On error
 * nothing is left running. Thread-safe: connections are independent.
 */
PF_EXPORT int PFRPCConnect(const char* endpoints, const PFRPCOptions* options, PFModuleHandle* out);

/*
 * Closes the connection behind a module made by PFRPCConnect, explicitly
 * and at once: calls in flight on other threads fail with ConnectionError,
 * the I/O thread stops and the sockets close, then the connection's
 * reference to the module is released. The caller's own reference to the
 * module is not touched. Functions of the connection (the module's, and
 * those the servers returned) called afterwards fail with ConnectionError.
 * Must not be called from a callback of the same connection.
 * Errors: mod NULL, or not a module made by PFRPCConnect, or one already
 * disconnected or detached (TypeError). Thread-safe.
 */
PF_EXPORT int PFRPCDisconnect(PFModuleHandle mod);

/*
 * Ends the caller's duty to close the connection behind `mod` without
 * closing it (as pthread_detach does for a thread): the connection drops
 * its own reference to the module, and from then on stays open exactly as
 * long as something of it is referenced — the module (which holds its
 * functions) or any remote function of the connection, including those
 * the servers returned. When the last of them is released the connection
 * closes by itself, on the thread that released it (that release then
 * waits for the connection's threads to stop, as PFRPCDisconnect does); if
 * nothing is referenced any more when PFRPCDetach is called, it closes
 * before PFRPCDetach returns. The caller's own reference to the module is
 * not touched. PFRPCDisconnect and PFRPCDetach refuse the module
 * afterwards. Language bindings call this when their module object is
 * collected without an explicit close, so that functions still referenced
 * keep working.
 * Errors: mod NULL, or not a module made by PFRPCConnect, or one already
 * disconnected or detached (TypeError). Thread-safe.
 */
PF_EXPORT int PFRPCDetach(PFModuleHandle mod);

/* ------------------------------------------------------------------------ */
/* Server                                                                    */
/* ------------------------------------------------------------------------ */

/* A running server, made by PFRPCServe and ended by PFRPCServerStop. */
typedef void* PFRPCServerHandle;

/* Receives the server's log lines: one line (without a newline) per
 * connection problem (a failed CURVE handshake, a malformed message that
 * could not be answered), never one per call. Malformed messages get a
 * line each for the first 10 of every 5 seconds, and the rest one line
 * that counts them when those 5 seconds end. Called on one of the
 * server's threads (its I/O thread or a worker) with no lock of this
 * library held; the line is borrowed for the call. */
typedef void (*PFRPCLogFunc)(void* user_data, const char* line);

/* Options of a server. Zero-initialize, then set what you need; the strings
 * are copied by PFRPCServe. New fields are added at the end only, each
 * with its default at 0; PFRPCGetStructSize reports the size the library
 * was built with, which bindings compare with their mirrors. */
typedef struct {
  /* Worker threads that run calls: 0 means 4. At most 256. */
  int num_workers;
  /* The registry names that clients may list and call: those that begin
   * with one of these prefixes. With no prefix nothing is exposed; the
   * empty prefix "" exposes every name. A name outside them is, to a
   * client, a KeyError that reveals nothing about what else is registered. */
  const char* const* expose;
  int num_expose;
  /* CURVE: the server's secret key (Z85). When set, only clients that know
   * the matching public key can connect; with authorized_keys, only
   * clients whose public key is in that list. */
  const char* curve_secret_key;
  const char* const* authorized_keys;
  int num_authorized_keys;
  /* How long a callback into a client waits for its reply, in
   * milliseconds: 0 means PF_RPC_DEFAULT_TIMEOUT_MS. */
  int callback_timeout_ms;
  /* The largest request accepted, in bytes: 0 means
   * PF_RPC_DEFAULT_MAX_MESSAGE. */
  int64_t max_message_size;
  /* Where log lines go (NULL: nowhere). */
  PFRPCLogFunc log;
  void* log_user_data;
  /* The calls one client (one connection) may have queued or running at
   * once: 0 means PF_RPC_DEFAULT_MAX_CALLS_PER_CLIENT. A call beyond it is
   * refused at once (see "Fairness" at PFRPCServe). Negative: refused. */
  int max_calls_per_client;
  /* The workers one client's calls may hold at once: 0 means num_workers
   * (no limit besides the turns clients take). A client's queued calls
   * wait while it holds this many. Negative: refused. */
  int max_workers_per_client;
  /* The threads (workers, or threads of the server's functions) that may
   * wait at once for a callback into one client: 0 means num_workers - 1
   * (1 with a single worker), so that a client that does not answer its
   * callbacks never holds every worker. A callback made by a thread that
   * already waits for one into the same client (a nested callback) does
   * not count again. A callback beyond it fails at once in the server's
   * function. Negative: refused. */
  int max_callbacks_per_client;
  /* The functions of the server that one client may hold at once (those
   * returned to it, or passed to its callbacks, that it has not released):
   * 0 means PF_RPC_DEFAULT_MAX_EXPORTS_PER_CLIENT. A function beyond it is
   * not sent: the call that returns it, or the callback that passes it,
   * fails with a RuntimeError naming the limit. Negative: refused. */
  int max_exports_per_client;
} PFRPCServerOptions;

/*
 * Binds `endpoint` ("tcp://127.0.0.1:9190"; "tcp://127.0.0.1:*" picks a
 * free port) and starts serving the global registry in background threads:
 * one I/O thread and num_workers workers. Returns once the endpoint is
 * bound: *out is the server, running. The functions are looked up in the
 * registry at each call, so functions registered later are served too (if
 * exposed).
 *
 * Fairness. A server assumes that its clients may be hostile, and one
 * client (one connection: one ZeroMQ identity) costs only itself:
 *   - each client's calls wait in a queue of their own, and the workers
 *     take from the clients in turn (round-robin), so one client's queued
 *     calls never delay another's by more than one call per worker;
 *   - a client may have at most max_calls_per_client calls queued or
 *     running (PF_RPC_DEFAULT_MAX_CALLS_PER_CLIENT by default); a call
 *     beyond it is refused at once, without running, with a RuntimeError
 *     "rpc: call refused: this client already has N calls queued or
 *     running on server E, its limit (max_calls_per_client); ...";
 *     a call stops counting before its reply is sent, so a client that
 *     sends its next call when a reply arrives is never refused;
 *   - the calls of a client that wait for a worker hold at most
 *     PF_RPC_QUEUED_BYTES_PER_CLIENT bytes, and those of all clients
 *     PF_RPC_QUEUED_BYTES (a call always fits in a queue that is empty);
 *     a call beyond it is refused at once with a RuntimeError "rpc: call
 *     refused: a call of N bytes does not fit on server E: ...";
 *   - its calls hold at most max_workers_per_client workers at once (all of
 *     them by default); the rest of its calls wait in its queue;
 *   - at most max_callbacks_per_client threads of the server (num_workers -
 *     1 by default) wait at once for callbacks into the client; a callback
 *     beyond it fails at once in the server's function, with a RuntimeError
 *     "rpc: callback refused: ... (max_callbacks_per_client)", which then
 *     usually becomes the call's error. So a client that never answers its
 *     callbacks holds at most that many workers, each for at most
 *     callback_timeout_ms, and the other workers keep serving the others;
 *   - across all clients together, at most num_workers - 1 threads (1 with
 *     a single worker) wait for callbacks at once; a callback beyond it
 *     fails at once the same way ("rpc: callback refused: N callbacks into
 *     clients already wait for their replies on server E, the most that
 *     leaves a worker for other calls"), so that a few clients that do not
 *     answer never hold every worker between them;
 *   - it holds at most max_exports_per_client functions of the server
 *     (PF_RPC_DEFAULT_MAX_EXPORTS_PER_CLIENT by default): a result or a
 *     callback argument that would pass one more fails with a RuntimeError
 *     "rpc: cannot pass a function to client ...: it already holds N
 *     functions of this server, its limit (max_exports_per_client); ...";
 *     and the clients at one network address (one peer, however many
 *     connections it opens) hold at most PF_RPC_EXPORTS_PER_ADDRESS times
 *     that together ("... the clients at its address A already hold N
 *     functions of this server, their limit (PF_RPC_EXPORTS_PER_ADDRESS
 *     times max_exports_per_client) ..."). There is no limit across
 *     addresses, which a few peers could fill for everyone.
 * Calls nested inside a callback (a client's call made while it serves the
 * server's callback) run on the thread that waits for that callback and
 * count against none of these limits.
 *
 * Clients that do not read. The server's I/O thread never blocks on a
 * client: replies and callbacks are queued to each client, up to
 * PF_RPC_SEND_QUEUE messages (ZeroMQ's send high-water mark) besides what
 * the operating system buffers. While a client's queue is full (the client
 * sends but does not read), further messages to it are dropped: a reply
 * is lost (that client's call times out), a callback fails at once with
 * ConnectionError in the server's function. The log says so, at most once
 * every few seconds. The queue is bounded in bytes too: while the messages
 * queued to a client (counted until they are written to the operating
 * system) exceed PF_RPC_SEND_QUEUE_BYTES, the client's calls wait in its
 * queue, and run once the client has read enough; so a client that does
 * not read ties up at most that many bytes, plus the replies of the calls
 * it had running (at most max_workers_per_client). Nothing is dropped for
 * the bytes: a client that reads slowly is only served slowly. Every
 * other client goes on being served, and PFRPCServerStop is not delayed
 * by such a client.
 *
 * Clients that go away. A function the server passed to a client (a
 * result, a callback argument) is held until the client releases it. One
 * that a client never gets (its message was dropped, or could not be
 * written whole) is released at once. When a connection drops, the server
 * asks the clients that hold its functions whether they can still be
 * reached (ZeroMQ's disconnect events do not say which client went), and
 * releases the functions of a client it has not been able to reach for
 * PF_RPC_CLIENT_GONE_MS; the log says so. A client that reconnects within
 * that time (ZeroMQ reconnects by itself) keeps them; after it, calling
 * one fails with a RuntimeError saying that the function is no longer
 * valid. A callback into a client whose connection drops fails within a
 * fraction of a second with ConnectionError ("... the client is gone"),
 * not at callback_timeout_ms, so the thread that waited for it goes back
 * to work.
 *
 * Errors: NULL endpoint or out (TypeError); bad options (ValueError naming
 * the field); an endpoint that cannot be bound (RuntimeError with ZeroMQ's
 * reason); MemoryError. Thread-safe.
 */
PF_EXPORT int PFRPCServe(const char* endpoint, const PFRPCServerOptions* options,
                         PFRPCServerHandle* out);

/* The endpoint the server is bound to, with the port it picked:
 * "tcp://127.0.0.1:40231". *out is owned by the server and valid until
 * PFRPCServerStop. Errors: NULL arguments (TypeError). Thread-safe. */
PF_EXPORT int PFRPCServerGetEndpoint(PFRPCServerHandle server, const char** out);

/*
 * Stops a server and frees it: it stops taking requests, drops the calls
 * still queued (they never run), waits for the calls in progress to return
 * (callbacks they wait for fail with ConnectionError), joins its threads
 * and closes its socket. It takes as long as the longest function running
 * at that moment, however many calls were queued and whatever the clients
 * do. Clients see the connection drop: their calls in flight fail with
 * ConnectionError.
 * Safe to call from any thread except the server's own (a function that
 * the server is running). NULL is a no-op that returns 0.
 */
PF_EXPORT int PFRPCServerStop(PFRPCServerHandle server);

/* ------------------------------------------------------------------------ */
/* CURVE keys                                                                */
/* ------------------------------------------------------------------------ */

/* Makes a new CURVE key pair, each key PF_RPC_KEY_SIZE bytes of Z85 text.
 * Errors: NULL arguments (TypeError); ZeroMQ without CURVE support
 * (NotImplementedError). Thread-safe. */
PF_EXPORT int PFRPCCurveKeypair(char* public_key, char* secret_key);

/* Derives the public key (Z85, PF_RPC_KEY_SIZE bytes) of a secret key.
 * Errors: NULL arguments (TypeError); a secret key that is not 40
 * characters of Z85 (ValueError); no CURVE support (NotImplementedError).
 * Thread-safe. */
PF_EXPORT int PFRPCCurvePublicKey(const char* secret_key, char* public_key);

/* ------------------------------------------------------------------------ */
/* Sizes                                                                     */
/* ------------------------------------------------------------------------ */

/* sizeof of a public struct of this header as the library was compiled:
 * "PFRPCOptions", "PFRPCServerOptions". Bindings compare it with their own
 * mirrors (as PFGetStructSize does for the core's structs).
 * Errors: NULL arguments (TypeError), unknown name (KeyError naming it).
 * Thread-safe. */
PF_EXPORT int PFRPCGetStructSize(const char* name, size_t* out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PACKEDFUNC_RPC_H_ */
