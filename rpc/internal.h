/* Private to libpackedfunc_rpc: the wire codec and the machinery that the
 * client and the server share. Nothing here is exported. */
#ifndef PF_RPC_INTERNAL_H_
#define PF_RPC_INTERNAL_H_

#include <msgpack.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uthash.h>
#include <zmq.h>

#include "packedfunc/c_api.h"
#include "packedfunc/rpc.h"

#define PF_RPC_HIDDEN __attribute__((visibility("hidden")))

/* ---- the wire format ------------------------------------------------------
 * A message is one ZeroMQ frame holding one MessagePack array, the body,
 * followed by its side frames (version 3; see PF_RPC_TENSOR_FRAME):
 *   [version, kind, id, parent, ...]
 *   HELLO   [V, 1, id, 0]                     -> OK with the exposed list
 *   CALL    [V, 2, id, parent, target, args]  target: a name (str) or the
 *                                             id of a function the receiver
 *                                             exported (uint)
 *   OK      [V, 3, id, 0, value]
 *   ERROR   [V, 4, id, 0, kind, message, traceback]
 *   RELEASE [V, 5, 0, 0, function id]
 * The first three elements never change, so that a peer of another version
 * can be told so. `parent` is the id of a request of the receiver's that
 * the sender is serving (a nested call), else 0. An empty frame is a
 * probe: a server sends one to learn whether a client can still be
 * reached, and the receiver ignores it (a peer of version 2 and before
 * drops it as malformed, silently on a client). */
enum { PF_RPC_HELLO = 1, PF_RPC_CALL = 2, PF_RPC_OK = 3, PF_RPC_ERROR = 4, PF_RPC_RELEASE = 5 };

/* MessagePack ext types of the values that have no MessagePack form. */
enum {
  PF_RPC_EXT_DTYPE = 1,  /* code u8, bits u8, lanes u16le */
  PF_RPC_EXT_DEVICE = 2, /* device_type i32le, device_id i32le */
  PF_RPC_EXT_TENSOR = 3, /* flags u8, code u8, bits u8, lanes u16le, ndim u32le,
                            shape i64le[ndim], (PADDED: pad u8, pad zero bytes,)
                            then the compact data */
  PF_RPC_EXT_SHAPE = 4,  /* i64le[n] */
  PF_RPC_EXT_FUNC = 5,   /* the sender's function id, u64le */
  /* Markers, of no bytes, that are never values: an array whose first item
   * is one is a List (its items follow) or a Dict (its keys and values
   * follow, alternating, in the Dict's order). */
  PF_RPC_EXT_LIST = 6,
  PF_RPC_EXT_DICT = 7,
  /* (version 4) A whole argument or result that holds instances of
   * registered types, as the JSON text of PFToJSON (serialize.h), which
   * the receiver rebuilds with PFFromJSON: each instance by its type key
   * and fields, sharing and cycles kept within the document. */
  PF_RPC_EXT_DOCUMENT = 8
};
#define PF_RPC_TENSOR_AS_DLTENSOR 1u /* flags: it was a kPFDLTensorHandle */
/* flags: the data starts a multiple of 8 bytes from the message's start,
 * after a pad count (0-7) and that many zero bytes; so that the receiver
 * can leave a large tensor's data where it arrived, aligned. */
#define PF_RPC_TENSOR_PADDED 2u
/* flags (version 3): the data is not in the ext, which ends after the
 * shape, but in the next side frame of the message, a ZeroMQ frame of its
 * own after the body whose size is exactly the data's: the k-th such
 * tensor in the order of decoding takes the k-th side frame, and a message
 * has exactly as many side frames as such tensors. So large tensor bytes
 * cross without a copy on either side: the sender hands ZeroMQ the
 * tensor's own memory (the message holds a reference to the tensor until
 * ZeroMQ lets the frame go) and the receiver keeps the data in the frame
 * it arrived in. Only tensor objects of PF_RPC_SIDE_FRAME_MIN bytes or
 * more, compact, go this way; a borrowed kPFDLTensorHandle, which the
 * sender cannot hold past the call, is copied into the body. */
#define PF_RPC_TENSOR_FRAME 4u
/* The smallest tensor that goes in a side frame. */
#define PF_RPC_SIDE_FRAME_MIN (64 * 1024)
/* The most side frames one message may have; a message with more is
 * dropped as malformed. */
#define PF_RPC_MAX_SIDE_FRAMES 64

/* A side frame. Outgoing: `data` is the memory of the tensor object `obj`,
 * a reference the message holds. Incoming: the ZeroMQ frame received
 * (obj NULL). */
typedef struct {
  const char* data;
  size_t size;
  PFObjectHandle obj;
  zmq_msg_t zmsg;
} pf_rpc_side;

/* What a message is packed into: the body and its side frames. Packing a
 * value into pf_rpc_out_init's packer puts large tensor objects into side
 * frames; pf_rpc_packer_init's keeps everything in the body. */
typedef struct {
  msgpack_sbuffer sb; /* first: the packer's data points here */
  pf_rpc_side* side;  /* malloc */
  uint32_t nside, cap_side;
  size_t side_bytes;
} pf_rpc_out;
PF_RPC_HIDDEN void pf_rpc_out_init(pf_rpc_out* o, msgpack_packer* pk);
/* Releases what `o` still holds (what pf_rpc_msg_take_out did not take). */
PF_RPC_HIDDEN void pf_rpc_out_destroy(pf_rpc_out* o);

/* Exports a function being sent: writes the id under which the sender will
 * serve it. Returns 0 or -1 with an error recorded. */
typedef int (*pf_rpc_export_fn)(void* ctx, PFFunctionHandle func, uint64_t* id);
/* Imports a function id received: *out is a new reference to a remote
 * function that calls it. */
typedef int (*pf_rpc_import_fn)(void* ctx, uint64_t id, PFFunctionHandle* out);

/* Makes `pk` write to `sb`. Use this, not msgpack_packer_init with
 * msgpack_sbuffer_write: that function is static inline, one copy per
 * file, and only this one's tells the packer of a tensor that it writes
 * straight into the message (to reserve room at once and to pad). */
PF_RPC_HIDDEN void pf_rpc_packer_init(msgpack_packer* pk, msgpack_sbuffer* sb);

/* Packs one value, an argument or a result; `path` names it in errors
 * ("PFFuncCall: argument 2"). A value that holds an instance of a
 * registered type anywhere goes as one PF_RPC_EXT_DOCUMENT. */
PF_RPC_HIDDEN int pf_rpc_pack_value(msgpack_packer* pk, PFValue v, int code, const char* path,
                                    pf_rpc_export_fn exp, void* ctx);

struct pf_rpc_msg;
/* What the decoder made that must be released after the call. `src`, when
 * not NULL, is the message being decoded: a large tensor then keeps a
 * reference to it and its data stays in the message's bytes, uncopied. */
typedef struct {
  void** blocks;
  size_t nblocks, cap_blocks;
  PFObjectHandle* objs;
  size_t nobjs, cap_objs;
  struct pf_rpc_msg* src;
  uint32_t next_side; /* the side frame of src the next such tensor takes */
} pf_rpc_arena;
PF_RPC_HIDDEN void pf_rpc_arena_free(pf_rpc_arena* a);
/* After the last value of a message is decoded: -1 with a ValueError when
 * its tensors took fewer side frames than it has. */
PF_RPC_HIDDEN int pf_rpc_arena_check_sides(const pf_rpc_arena* a);

/* Unpacks one value into *v and *code; strings, byte arrays and objects it makes
 * belong to the arena. With as_arg, a tensor sent as a kPFDLTensorHandle
 * arrives as one (its object is in the arena); otherwise as an object. */
PF_RPC_HIDDEN int pf_rpc_unpack_value(const msgpack_object* o, pf_rpc_arena* a, int depth,
                                      int as_arg, pf_rpc_import_fn imp, void* ctx, PFValue* v,
                                      int* code);

/* Checks that [p, p+n) is exactly one well-formed MessagePack object whose
 * containers declare no more items than the bytes that remain could hold
 * and nest at most PF_RPC_MAX_DEPTH + 4 deep, so that unpacking it cannot
 * allocate more than a small multiple of n. Returns 0, or -1 with a
 * ValueError recorded. */
PF_RPC_HIDDEN int pf_rpc_validate(const char* p, size_t n);

/* A message, parsed: the header and the remaining elements. */
typedef struct {
  msgpack_unpacked up;
  int64_t version;
  int kind;
  uint64_t id, parent;
  const msgpack_object* rest;
  uint32_t nrest;
} pf_rpc_parsed;
/* Parses a message; on success pf_rpc_parsed_free must follow. A message
 * whose version differs parses (with its header) and returns 1. Returns -1
 * with a ValueError for anything malformed. */
PF_RPC_HIDDEN int pf_rpc_parse(const char* data, size_t n, pf_rpc_parsed* out);
PF_RPC_HIDDEN void pf_rpc_parsed_free(pf_rpc_parsed* p);

/* A message's header, read without decoding the rest (what the I/O
 * threads need to route a message): its version, kind, id and parent, how
 * many elements follow, and the first of them when it is a non-negative
 * integer (a function id). */
typedef struct {
  int64_t version;
  int kind;
  uint64_t id, parent;
  uint32_t nrest;
  int has_first_uint;
  uint64_t first_uint;
} pf_rpc_header;
/* Reads the header of a message in time independent of its size. Returns
 * 0, 1 for a header of another version, or -1 with a ValueError. The rest
 * of the message is not checked: pf_rpc_parse does that where the message
 * is decoded. */
PF_RPC_HIDDEN int pf_rpc_peek(const char* data, size_t n, pf_rpc_header* out);

/* Writes the header of a message. */
PF_RPC_HIDDEN void pf_rpc_pack_header(msgpack_packer* pk, int kind, uint64_t id, uint64_t parent,
                                      uint32_t nrest);
/* Packs an ERROR message with `kind`, `msg` and `traceback`. */
PF_RPC_HIDDEN void pf_rpc_pack_error(msgpack_sbuffer* sb, uint64_t id, const char* kind,
                                     const char* msg, const char* traceback);
/* A str object as a fresh NUL-terminated copy (malloc), or NULL. */
PF_RPC_HIDDEN char* pf_rpc_strdup_obj(const msgpack_object* o);

/* ---- errors --------------------------------------------------------------- */

/* The thread's error, kept whole (kind, message, traceback) across code
 * that may record others, such as a teardown; with the public API only. */
typedef struct {
  char kind[PF_ERROR_KIND_MAX];
  char* msg; /* malloc, or NULL when out of memory */
  char* tb;
} pf_rpc_saved_error;
PF_RPC_HIDDEN void pf_rpc_error_save(pf_rpc_saved_error* e);
/* Records the kept error again (and frees the copy); returns -1. */
PF_RPC_HIDDEN int pf_rpc_error_restore(pf_rpc_saved_error* e);

/* ---- peers: what the client and the server share ----------------------- */

/* Where a message goes or came from: the client's endpoint index, or the
 * ROUTER identity of the server's client. */
typedef struct {
  int endpoint;
  uint8_t ident_len;
  uint8_t ident[255];
} pf_rpc_route;

/* The bytes a server has queued to one client and not yet written out
 * (its posted messages, counted until ZeroMQ lets them go), shared by the
 * client's record and the messages counted in it; the last reference
 * frees it. Any thread: ZeroMQ's own threads drop messages too. */
typedef struct {
  atomic_llong bytes;
  atomic_int refs;
} pf_rpc_tally;
PF_RPC_HIDDEN pf_rpc_tally* pf_rpc_tally_new(void);
PF_RPC_HIDDEN void pf_rpc_tally_release(pf_rpc_tally* t);

/* A message on its way. Its bytes are its own (malloc), or, for one that
 * arrived, still ZeroMQ's (has_zmsg): large tensors are not copied between
 * the socket and the decoder, nor between the encoder and the socket, nor
 * out of the message into the tensor the decoder makes (which keeps a
 * reference to the message: `refs`, one for its owner and one for each
 * such tensor, and one for ZeroMQ while it sends a counted message;
 * pf_rpc_msg_free drops one). */
typedef struct pf_rpc_msg {
  struct pf_rpc_msg* next;
  atomic_int refs;
  pf_rpc_route route;
  uint64_t waiter_id; /* the request's waiter, for an outgoing request */
  size_t size;
  char* data;
  int has_zmsg;
  zmq_msg_t zmsg;
  /* A server's outgoing message: the tally it is counted in (`counted`
   * bytes, given back when the last reference goes), and the functions
   * exported in it, released when it is dropped unsent. */
  pf_rpc_tally* tally;
  size_t counted;
  uint64_t* exports; /* malloc */
  uint32_t nexports;
  /* The side frames after the body (malloc), and their bytes. */
  pf_rpc_side* side;
  uint32_t nside;
  size_t side_bytes;
} pf_rpc_msg;

/* The bytes a message holds: its body and its side frames. */
static inline size_t pf_rpc_msg_bytes(const pf_rpc_msg* m) { return m->size + m->side_bytes; }

/* A request this side sent and waits for. The waiting thread owns it; the
 * I/O thread and the workers reach it through the peer's table, under the
 * peer's lock. */
typedef struct pf_rpc_waiter {
  uint64_t id;
  UT_hash_handle hh;
  pf_rpc_route route;
  pthread_cond_t cond;
  pf_rpc_msg *inbox, *inbox_tail;
  int sent;   /* handed to the transport */
  int failed; /* set by the I/O thread: a timeout or a lost connection */
  int64_t deadline_ms;
  char fail_kind[32];
  char fail_msg[512];
  /* A client's call that a signal interrupted (PFEnvCheckSignals failed
   * while it waited): the host's error, kept for the caller. */
  int interrupted;
  pf_rpc_saved_error interrupt;
  int64_t next_signal_check_ms; /* the waiting thread's own */
} pf_rpc_waiter;

/* How often a client's thread that waits for a reply asks the host
 * whether a signal came (PFEnvCheckSignals), in milliseconds. */
#define PF_RPC_SIGNAL_CHECK_MS 100

/* A function this side exported: callable by its id from `route`. A client
 * exports for the duration of one call (scope = the waiter's id); a server
 * until the client releases it (scope = 0). */
typedef struct pf_rpc_export {
  uint64_t id;
  UT_hash_handle hh;
  PFFunctionHandle func;
  pf_rpc_route route;
  uint64_t scope;
} pf_rpc_export;

typedef struct pf_rpc_peer pf_rpc_peer;
struct pf_rpc_peer {
  int is_server;
  pthread_mutex_t mu;
  pf_rpc_waiter* waiters;
  pf_rpc_export* exports;
  size_t num_exports;
  pf_rpc_msg *out, *out_tail; /* to the I/O thread */
  int wake_fd;                /* an eventfd the I/O thread polls */
  atomic_uint_fast64_t next_id;
  atomic_int closed;
  atomic_int refs;
  /* On a client: the live remote functions of the connection (its
   * module's and those the servers returned); when the count drops to 0,
   * `unused` is called (on the thread that released the last one, with no
   * lock held). */
  atomic_int users;
  void (*unused)(pf_rpc_peer* p);
  int timeout_ms;
  char closed_reason[128];
  /* The client's sockets belong to whichever thread holds the I/O role
   * (under mu): a caller waiting for its reply polls them itself, so that
   * a reply reaches it without a hand-off between threads. io_poll (NULL
   * on the server) polls until waiter w has mail or has failed. */
  int io_role;
  pthread_cond_t role_cond; /* io_role was given up */
  void (*io_poll)(pf_rpc_peer* p, pf_rpc_waiter* w);
  /* After a message is queued (client): sends it now if the role is free. */
  void (*after_post)(pf_rpc_peer* p);
  /* The side's own parts. */
  int (*pick_route)(pf_rpc_peer* p, pf_rpc_route* out);
  void (*describe_route)(pf_rpc_peer* p, const pf_rpc_route* r, char* buf, size_t cap);
  int (*resolve_name)(pf_rpc_peer* p, const char* name, PFFunctionHandle* out);
  int (*hello)(pf_rpc_peer* p, msgpack_packer* pk);
  /* A server's: before a callback into the client at `r` waits for its
   * reply (0, or -1 with the error when the client has all the callbacks
   * it may have waiting), and after. NULL on a client. */
  int (*callback_enter)(pf_rpc_peer* p, const pf_rpc_route* r);
  void (*callback_leave)(pf_rpc_peer* p, const pf_rpc_route* r);
  /* A server's, under mu: counts a function exported to the client at `r`
   * (delta +1) or released (-1). Returns 0, or -1 when the export is
   * refused: `why` (cap bytes) then says why, after "cannot pass a
   * function to CLIENT: ", or is empty when out of memory (recording
   * nothing: the caller records the error once the lock is released).
   * NULL on a client. */
  int (*count_export)(pf_rpc_peer* p, const pf_rpc_route* r, int delta, char* why, size_t cap);
  /* A server's, under mu: counts message `m`, about to be queued, in the
   * tally of its client. NULL on a client. */
  void (*count_post)(pf_rpc_peer* p, pf_rpc_msg* m);
  /* A server's: a malformed message from `r` was dropped (any thread, no
   * lock held). NULL on a client. */
  void (*log_bad)(pf_rpc_peer* p, const pf_rpc_route* r, const char* why);
  void (*destroy)(pf_rpc_peer* p);
};

PF_RPC_HIDDEN int pf_rpc_peer_init(pf_rpc_peer* p, int is_server, int timeout_ms);
/* Asks the host whether a signal came for the thread that waits on w (no
 * lock held), at most once per PF_RPC_SIGNAL_CHECK_MS and not in the
 * call's first PF_RPC_SIGNAL_CHECK_MS; if so, w fails with the host's error, kept in w, and 1 is
 * returned. */
PF_RPC_HIDDEN int pf_rpc_check_interrupt(pf_rpc_peer* p, pf_rpc_waiter* w);
/* Under p->mu: gives the I/O role up and wakes the waiters, one of which
 * may take it. */
PF_RPC_HIDDEN void pf_rpc_role_released(pf_rpc_peer* p);
PF_RPC_HIDDEN void pf_rpc_peer_fini(pf_rpc_peer* p);
/* Closes the peer for good: calls fail with ConnectionError(reason), waiters
 * are failed, exports released (outside the lock). */
PF_RPC_HIDDEN void pf_rpc_peer_shutdown(pf_rpc_peer* p, const char* reason);
PF_RPC_HIDDEN void pf_rpc_peer_retain(pf_rpc_peer* p);
PF_RPC_HIDDEN void pf_rpc_peer_release(pf_rpc_peer* p);
PF_RPC_HIDDEN int64_t pf_rpc_now_ms(void);
PF_RPC_HIDDEN int pf_rpc_route_eq(const pf_rpc_route* a, const pf_rpc_route* b);

/* Queues a message for the I/O thread (takes it) and wakes the thread. */
PF_RPC_HIDDEN void pf_rpc_post(pf_rpc_peer* p, pf_rpc_msg* m);
/* Takes everything queued for the I/O thread. */
PF_RPC_HIDDEN pf_rpc_msg* pf_rpc_take_out(pf_rpc_peer* p);
PF_RPC_HIDDEN pf_rpc_msg* pf_rpc_msg_new(const pf_rpc_route* r, const char* data, size_t n);
/* A message that takes the bytes of `sb` (which is left empty), or NULL. */
PF_RPC_HIDDEN pf_rpc_msg* pf_rpc_msg_take(const pf_rpc_route* r, msgpack_sbuffer* sb);
/* A message that takes the body and the side frames of `o` (left empty),
 * or NULL (o keeps them). */
PF_RPC_HIDDEN pf_rpc_msg* pf_rpc_msg_take_out(const pf_rpc_route* r, pf_rpc_out* o);
/* A message that takes a received ZeroMQ message (`zm` is left empty). */
PF_RPC_HIDDEN pf_rpc_msg* pf_rpc_msg_from_zmq(const pf_rpc_route* r, zmq_msg_t* zm);
/* A message that takes `body`, the first frame received from `sock` (left
 * empty), and receives its side frames. NULL when it is dropped, all its
 * frames read: *why says why (too many frames), or is NULL when out of
 * memory. */
PF_RPC_HIDDEN pf_rpc_msg* pf_rpc_msg_recv_rest(const pf_rpc_route* r, zmq_msg_t* body, void* sock,
                                               const char** why);
/* A new ZeroMQ context for a client or server, or NULL. */
PF_RPC_HIDDEN void* pf_rpc_zmq_context(void);
/* Adds a reference to a message, for a holder of its bytes. Any thread. */
PF_RPC_HIDDEN void pf_rpc_msg_retain(pf_rpc_msg* m);
/* Drops a reference to a message (NULL: nothing); the last frees it. Any
 * thread. */
PF_RPC_HIDDEN void pf_rpc_msg_free(pf_rpc_msg* m);
/* Sends a message's bytes on `sock` without copying large ones (the
 * message keeps nothing it needs afterwards), then its side frames, each
 * holding a reference to the message. Returns zmq_send's status; on
 * failure the message is intact. A large message, or one with side
 * frames, is handed over only when the socket says it can take it now
 * (ZMQ_POLLOUT): once its first frame is taken, ZeroMQ takes the rest. */
PF_RPC_HIDDEN int pf_rpc_msg_send(pf_rpc_msg* m, void* sock, int flags);
/* The same without asking the socket first: for the body of a ROUTER's
 * message, whose routing frame was taken (and whose body then always is).
 * A counted message (tally set) is always handed over: ZeroMQ holds a
 * reference to it, and its bytes stay counted, until ZeroMQ lets it go. */
PF_RPC_HIDDEN int pf_rpc_msg_send_part(pf_rpc_msg* m, void* sock, int flags);

/* The I/O thread's side: message `m` (taken) arrived from m->route; only
 * its header is read here. Requests with a parent, and replies, go to
 * their waiter; fresh requests go to `fresh(p, m, id)` (the server's work
 * queues; id is the request's), or get an error reply. */
PF_RPC_HIDDEN void pf_rpc_dispatch(pf_rpc_peer* p, pf_rpc_msg* m,
                                   void (*fresh)(pf_rpc_peer*, pf_rpc_msg*, uint64_t));
/* A malformed message from `r` was dropped: tells the peer's log_bad. */
PF_RPC_HIDDEN void pf_rpc_note_bad(pf_rpc_peer* p, const pf_rpc_route* r, const char* why);
/* Marks a waiter's request as handed to the transport. */
PF_RPC_HIDDEN void pf_rpc_mark_sent(pf_rpc_peer* p, uint64_t waiter_id);
/* Whether a waiter still wants its request sent. */
PF_RPC_HIDDEN int pf_rpc_waiter_alive(pf_rpc_peer* p, uint64_t waiter_id);
/* Posts an ERROR reply with `kind` and `msg` to request `id` of `r`. */
PF_RPC_HIDDEN void pf_rpc_reply_error(pf_rpc_peer* p, const pf_rpc_route* r, uint64_t id,
                                      const char* kind, const char* msg);
/* Fails waiter `id` (if it still waits) with `kind` and `msg`. */
PF_RPC_HIDDEN void pf_rpc_fail_waiter(pf_rpc_peer* p, uint64_t id, const char* kind,
                                      const char* msg);
/* Fails the waiters whose deadline passed, and returns the time to the next
 * deadline in ms (-1: none, capped at `cap`). */
PF_RPC_HIDDEN int pf_rpc_expire(pf_rpc_peer* p, int cap);
/* Fails the waiters for `r` (every route when r is NULL) that were sent
 * (or all of them, with unsent too) with a ConnectionError. */
PF_RPC_HIDDEN void pf_rpc_fail_route(pf_rpc_peer* p, const pf_rpc_route* r, int unsent_too,
                                     const char* why);

/* Releases the exports with these ids (those still there). */
PF_RPC_HIDDEN void pf_rpc_drop_exports(pf_rpc_peer* p, const uint64_t* ids, uint32_t n);
/* Releases every export to route `r`: its client is gone. */
PF_RPC_HIDDEN void pf_rpc_drop_route_exports(pf_rpc_peer* p, const pf_rpc_route* r);

/* Serves one request (a fresh one, on a worker) and posts its reply;
 * `served(served_arg)`, when not NULL, is called once before the reply is
 * posted (or when there is none), so that whoever counts the request stops
 * counting it before the client can send the next one. */
typedef void (*pf_rpc_served_fn)(void* arg);
PF_RPC_HIDDEN void pf_rpc_serve(pf_rpc_peer* p, pf_rpc_msg* m, pf_rpc_served_fn served,
                                void* served_arg);

/* Calls `target` (a name, or the id of a function the peer exported when
 * name is NULL) on the peer, from inside a packed function: sets `ret`, or
 * returns -1 with the error. `affinity` is the route a function id belongs
 * to (NULL for a name). `what` names the callee in errors. */
PF_RPC_HIDDEN int pf_rpc_invoke(pf_rpc_peer* p, const char* name, uint64_t fid,
                                const pf_rpc_route* affinity, PFValue* args, int* codes, int nargs,
                                PFRetValueHandle ret);

/* A remote function: calls `name` (as the functions of a client's module
 * do, with fid 0 and no affinity) or function `fid` of the peer. *out is a
 * new reference; it holds a reference to the peer. With release, its end
 * tells the peer's other side to forget `fid`. */
PF_RPC_HIDDEN int pf_rpc_make_remote(pf_rpc_peer* p, const char* name, uint64_t fid,
                                     const pf_rpc_route* affinity, int release,
                                     PFFunctionHandle* out);

/* Sends a request built by the caller (its id is `id`) to `r` and waits
 * for the reply without serving anything: *reply is the reply message
 * (free()), or -1 with the error (TimeoutError, ConnectionError). */
PF_RPC_HIDDEN int pf_rpc_request_raw(pf_rpc_peer* p, const pf_rpc_route* r, uint64_t id,
                                     const char* data, size_t n, pf_rpc_msg** reply);

#endif /* PF_RPC_INTERNAL_H_ */
