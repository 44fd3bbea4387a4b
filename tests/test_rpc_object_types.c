/* rpc and registered object types: an instance crosses to another process
 * by value, as an argument and as a result, alone or inside containers,
 * with what it shares kept (a cycle is refused); a side that has not registered
 * the type fails the call naming it; a document that is malformed, too
 * large or too costly to rebuild is an error, never a crash. The server
 * that lacks the types is a child forked before this process registers
 * them. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <msgpack.h>
#include <zmq.h>

#include "internal.h" /* the wire's constants, for the raw peer */
#include "packedfunc/rpc.h"
#include "support/pf_test.h"
#include "support/pf_zmq_tsan.h"

typedef struct {
  int64_t n;
  char* name;
  PFObjectHandle items; /* a List, or NULL */
} rt_obj;

static const PFFieldDesc kFields[] = {
    PF_FIELD(rt_obj, n, "int64", kPFFieldWritable, NULL),
    PF_FIELD(rt_obj, name, "str", kPFFieldWritable, NULL),
    PF_FIELD(rt_obj, items, "list", kPFFieldWritable, NULL),
};

static uint32_t g_type;
static PFRPCServerHandle g_server;
static PFModuleHandle g_mod;
static pid_t g_bare_pid; /* the child that has not registered rt.Obj */
static char g_bare_endpoint[128];

static uint32_t register_type(const char* key) {
  const PFObjectTypeDesc d = {
      PF_OBJECT_TYPE_DESC_ABI, key,  NULL, sizeof(rt_obj), NULL, NULL, kFields,
      PF_COUNTOF(kFields),     NULL, 0};
  uint32_t index = 0;
  if (PFObjectTypeRegister(&d, &index) != 0) return 0;
  return index;
}

/* A new instance of `type` with n and name set. */
static PFObjectHandle make_obj(uint32_t type, int64_t n, const char* name) {
  PFObjectHandle o = NULL;
  if (PFObjectAlloc(type, &o) != 0) return NULL;
  PFValue v = {.v_int64 = n};
  PFValue s = {.v_str = name};
  if (PFObjectSetFieldByName(o, "n", v, kPFInt) != 0 ||
      PFObjectSetFieldByName(o, "name", s, kPFStr) != 0) {
    PFObjectFree(o);
    return NULL;
  }
  return o;
}

static uint32_t g_made_type; /* what rt.make makes */
static int f_make(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)c, (void)res;
  PFObjectHandle o = make_obj(g_made_type, n > 0 ? a[0].v_int64 : 0, "made");
  if (o == NULL) return -1;
  PFValue v = {.v_handle = o};
  int code = kPFObjectHandle;
  int st = PFCFuncSetReturn(ret, &v, &code, 1);
  PFObjectFree(o);
  return st;
}

/* rt.n_of(o): o's field n, read on the server from the instance it got. */
static int f_n_of(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  int is = 0;
  if (n != 1 || c[0] != kPFObjectHandle || PFObjectIsInstance(a[0].v_handle, g_type, &is) != 0 ||
      !is)
    return PF_ERROR(kPFErrTypeError, "rt.n_of: expected an rt.Obj");
  PFValue v;
  int code;
  if (PFObjectGetFieldByName(a[0].v_handle, "n", &v, &code) != 0) return -1;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* The List of o's field items, borrowed; NULL when it has none. */
static PFObjectHandle items_of(PFObjectHandle o) {
  PFValue v;
  int c;
  if (PFObjectGetFieldByName(o, "items", &v, &c) != 0 || c != kPFObjectHandle) return NULL;
  return v.v_handle;
}

/* Whether o's items are [o]: a cycle through a List. */
static int is_loop(PFObjectHandle o) {
  PFObjectHandle list = items_of(o);
  PFValue item;
  int c;
  if (list == NULL || PFListGetItem(list, 0, &item, &c) != 0 || c != kPFObjectHandle) return 0;
  PFObjectFree(item.v_handle); /* a List's reader gives a new reference */
  return item.v_handle == o;
}

/* Breaks the cycle o -> items -> o, so that both can go. */
static int clear_items(PFObjectHandle o) {
  PFValue none = {.v_handle = NULL};
  return PFObjectSetFieldByName(o, "items", none, kPFNull);
}

/* o with items [o]. */
static int make_loop(PFObjectHandle o) {
  PFObjectHandle list = NULL;
  PFValue self = {.v_handle = o};
  int sc = kPFObjectHandle;
  if (PFListCreate(&self, &sc, 1, &list) != 0) return -1;
  PFValue lv = {.v_handle = list};
  int st = PFObjectSetFieldByName(o, "items", lv, kPFObjectHandle);
  PFObjectFree(list);
  return st;
}

/* rt.unloop(o): whether o arrived as a cycle; breaks it (a cycle is never
 * freed otherwise). */
static int f_unloop(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 1 || c[0] != kPFObjectHandle) return PF_ERROR(kPFErrTypeError, "rt.unloop: bad call");
  PFValue v = {.v_int64 = is_loop(a[0].v_handle)};
  int code = kPFBool;
  if (clear_items(a[0].v_handle) != 0) return -1;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* rt.make_loop(): a new cycle, which the server keeps (g_loop) until
 * rt.drop_loop() breaks it, on the server's side of the connection (the
 * test's thread only sees the copy). */
static PFObjectHandle g_loop;
static int f_make_loop(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)res;
  g_loop = make_obj(g_type, 8, "made loop");
  if (g_loop == NULL || make_loop(g_loop) != 0) return -1;
  PFValue v = {.v_handle = g_loop};
  int code = kPFObjectHandle;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* rt.drop_loop(): whether the server's cycle was still one; breaks it. */
static int f_drop_loop(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)n, (void)res;
  PFValue v = {.v_int64 = g_loop != NULL && is_loop(g_loop)};
  int code = kPFBool;
  if (g_loop != NULL && clear_items(g_loop) != 0) return -1;
  PFObjectFree(g_loop);
  g_loop = NULL;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void reg(const char* name, PFPackedCFunc fn) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, NULL, NULL, &f));
  assert_pf_ok(PFFuncRegisterGlobal(name, f, 1));
  PFFuncFree(f);
}

static PFRPCServerHandle serve(int64_t max_message_size, char* endpoint, size_t cap) {
  const char* expose[] = {"rt."};
  PFRPCServerOptions o = {0};
  o.expose = expose;
  o.num_expose = 1;
  o.num_workers = 2;
  o.max_message_size = max_message_size;
  PFRPCServerHandle s = NULL;
  const char* e = NULL;
  if (PFRPCServe("tcp://127.0.0.1:*", &o, &s) != 0 || PFRPCServerGetEndpoint(s, &e) != 0)
    return NULL;
  snprintf(endpoint, cap, "%s", e);
  return s;
}

/* Forks the server that lacks rt.Obj: it registers rt.Only instead, and
 * serves rt.echo and rt.make (which makes an rt.Only). Called before this
 * process registers anything, with no thread running. */
static int start_bare_child(void) {
  int ep[2];
  if (pipe(ep) != 0) return -1;
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* a failed assertion leaves no server behind */
    close(ep[0]);
    g_made_type = register_type("rt.Only");
    if (g_made_type == 0) _exit(2);
    reg("rt.echo", pf_test_echo);
    reg("rt.make", f_make);
    char buf[128] = {0};
    if (serve(0, buf, sizeof buf) == NULL) _exit(3);
    if (write(ep[1], buf, sizeof buf) != (ssize_t)sizeof buf) _exit(4);
    close(ep[1]);
    for (;;) pause(); /* until killed */
  }
  close(ep[1]);
  g_bare_pid = pid;
  ssize_t got = read(ep[0], g_bare_endpoint, sizeof g_bare_endpoint);
  close(ep[0]);
  return got == (ssize_t)sizeof g_bare_endpoint ? 0 : -1;
}

static int setup(void** state) {
  (void)state;
  g_type = g_made_type = register_type("rt.Obj");
  if (g_type == 0) return -1;
  reg("rt.make", f_make);
  reg("rt.echo", pf_test_echo);
  reg("rt.n_of", f_n_of);
  reg("rt.unloop", f_unloop);
  reg("rt.make_loop", f_make_loop);
  reg("rt.drop_loop", f_drop_loop);
  char endpoint[128];
  g_server = serve(0, endpoint, sizeof endpoint);
  if (g_server == NULL) return -1;
  PFRPCOptions co = {0};
  co.timeout_ms = 20000;
  return PFRPCConnect(endpoint, &co, &g_mod);
}

static int teardown(void** state) {
  (void)state;
  PFRPCDisconnect(g_mod);
  PFModFree(g_mod);
  PFRPCServerStop(g_server);
  return 0;
}

static PFFunctionHandle remote_on(PFModuleHandle mod, const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(mod, name, 0, &f));
  assert_non_null(f);
  return f;
}

/* Calls f(arg) and returns the result, an object (a new reference). */
static PFObjectHandle call_obj(PFFunctionHandle f, PFObjectHandle arg) {
  return pf_test_call1(f, (PFValue){.v_handle = arg}, kPFObjectHandle, kPFObjectHandle).v_handle;
}

static void assert_obj(PFObjectHandle o, int64_t n, const char* name) {
  int is = 0;
  assert_pf_ok(PFObjectIsInstance(o, g_type, &is));
  assert_true(is);
  PFValue v;
  int c;
  assert_pf_ok(PFObjectGetFieldByName(o, "n", &v, &c));
  assert_int_equal(c, kPFInt);
  assert_int_equal(v.v_int64, n);
  assert_pf_ok(PFObjectGetFieldByName(o, "name", &v, &c));
  assert_int_equal(c, kPFStr);
  assert_string_equal(v.v_str, name);
}

static PFObjectHandle array_item(PFObjectHandle arr, int64_t i) {
  PFValue v;
  int c;
  assert_pf_ok(PFArrayGetItem(arr, i, &v, &c));
  assert_int_equal(c, kPFObjectHandle);
  return v.v_handle;
}

static void test_instance_crosses_both_ways(void** state) {
  (void)state;
  PFFunctionHandle echo = remote_on(g_mod, "rt.echo");
  PFFunctionHandle n_of = remote_on(g_mod, "rt.n_of");
  PFFunctionHandle make = remote_on(g_mod, "rt.make");
  PFObjectHandle o = make_obj(g_type, 7, "seven");
  assert_non_null(o);
  /* An argument: the server gets an rt.Obj with the fields. */
  PFValue ov = {.v_handle = o};
  assert_int_equal(pf_test_call1(n_of, ov, kPFObjectHandle, kPFInt).v_int64, 7);
  /* There and back: a copy, not the object itself. */
  PFObjectHandle back = call_obj(echo, o);
  assert_ptr_not_equal(back, o);
  assert_obj(back, 7, "seven");
  PFObjectFree(back);
  /* A result made on the server. */
  PFValue k = {.v_int64 = 12};
  PFObjectHandle made = pf_test_call1(make, k, kPFInt, kPFObjectHandle).v_handle;
  assert_obj(made, 12, "made");
  PFObjectFree(made);
  PFObjectFree(o);
  PFFuncFree(make);
  PFFuncFree(n_of);
  PFFuncFree(echo);
}

/* One instance twice in an Array arrives as one instance twice, beside
 * plain values and a tensor that cross in the same document. */
static void test_sharing_is_kept(void** state) {
  (void)state;
  PFFunctionHandle echo = remote_on(g_mod, "rt.echo");
  PFObjectHandle o = make_obj(g_type, 3, "shared");
  PFObjectHandle other = make_obj(g_type, 4, "other");
  PFValue items[4] = {{.v_handle = o}, {.v_handle = o}, {.v_handle = other}, {.v_int64 = 5}};
  int codes[4] = {kPFObjectHandle, kPFObjectHandle, kPFObjectHandle, kPFInt};
  PFObjectHandle arr = NULL;
  assert_pf_ok(PFArrayCreate(items, codes, 4, &arr));
  PFObjectHandle back = call_obj(echo, arr);
  int64_t size = 0;
  assert_pf_ok(PFArrayGetSize(back, &size));
  assert_int_equal(size, 4);
  assert_ptr_equal(array_item(back, 0), array_item(back, 1));
  assert_ptr_not_equal(array_item(back, 0), array_item(back, 2));
  assert_obj(array_item(back, 0), 3, "shared");
  assert_obj(array_item(back, 2), 4, "other");
  PFValue last;
  int lc;
  assert_pf_ok(PFArrayGetItem(back, 3, &last, &lc));
  assert_int_equal(lc, kPFInt);
  assert_int_equal(last.v_int64, 5);
  PFObjectFree(back);
  PFObjectFree(arr);
  PFObjectFree(other);
  PFObjectFree(o);
  PFFuncFree(echo);
}

/* A cycle (an instance whose List field holds the instance) does not
 * cross, either way: the receiver refuses the document before it builds
 * anything (kPFJSONRefuseCycles), since the runtime never frees a cycle by
 * itself and a peer sending one per call would grow the receiver's memory
 * without bound. The sender's own cycle is untouched and the connection
 * goes on. */
static void test_a_cycle_is_refused_both_ways(void** state) {
  (void)state;
  PFFunctionHandle unloop = remote_on(g_mod, "rt.unloop");
  PFFunctionHandle make = remote_on(g_mod, "rt.make_loop");
  PFObjectHandle o = make_obj(g_type, 1, "loop");
  assert_pf_ok(make_loop(o));
  PFValue ov = {.v_handle = o}, rv;
  int oc = kPFObjectHandle, rc;
  assert_pf_error(PFFuncCall(unloop, &ov, &oc, 1, &rv, &rc), kPFErrValueError,
                  "rpc: a value sent by value cannot be rebuilt: PFFromJSONEx: node ");
  assert_non_null(strstr(PFErrorGetMessage(), "on a cycle, which kPFJSONRefuseCycles refuses"));
  assert_true(is_loop(o)); /* the sender's own is untouched */
  assert_pf_ok(clear_items(o));
  PFObjectFree(o);
  /* A result: the client refuses it. */
  assert_pf_error(PFFuncCall(make, NULL, NULL, 0, &rv, &rc), kPFErrValueError,
                  "on a cycle, which kPFJSONRefuseCycles refuses");
  PFFunctionHandle drop = remote_on(g_mod, "rt.drop_loop");
  assert_pf_ok(PFFuncCall(drop, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rc, kPFBool);
  assert_true(rv.v_int64); /* the server's own is untouched */
  /* Sharing without a cycle still crosses. */
  PFFunctionHandle echo = remote_on(g_mod, "rt.echo");
  PFValue five = {.v_int64 = 5};
  assert_int_equal(pf_test_call1(echo, five, kPFInt, kPFInt).v_int64, 5);
  PFFuncFree(echo);
  PFFuncFree(drop);
  PFFuncFree(make);
  PFFuncFree(unloop);
}

/* Beside an instance, what a document cannot hold fails on the sending
 * side, naming the argument, and nothing is left held. */
static void test_what_a_document_cannot_hold(void** state) {
  (void)state;
  PFFunctionHandle echo = remote_on(g_mod, "rt.echo");
  PFObjectHandle o = make_obj(g_type, 1, "x");
  PFValue items[2] = {{.v_handle = o}, {.v_handle = echo}};
  int codes[2] = {kPFObjectHandle, kPFFuncHandle};
  PFObjectHandle arr = NULL;
  assert_pf_ok(PFArrayCreate(items, codes, 2, &arr));
  PFValue v = {.v_handle = arr}, rv;
  int c = kPFObjectHandle, rc;
  assert_pf_error(PFFuncCall(echo, &v, &c, 1, &rv, &rc), kPFErrTypeError,
                  "remote call of 'rt.echo': argument 0: ");
  /* The connection goes on working. */
  PFValue five = {.v_int64 = 5};
  assert_int_equal(pf_test_call1(echo, five, kPFInt, kPFInt).v_int64, 5);
  PFObjectFree(arr);
  PFObjectFree(o);
  PFFuncFree(echo);
}

/* An argument whose type the server has not registered: the server's
 * error names the type; a result whose type the client has not registered
 * (rt.Only, only the child's) fails the call on the client, naming it. */
static void test_unregistered_type_fails_naming_it(void** state) {
  (void)state;
  PFModuleHandle bare = NULL;
  PFRPCOptions co = {0};
  co.timeout_ms = 20000;
  assert_pf_ok(PFRPCConnect(g_bare_endpoint, &co, &bare));
  PFFunctionHandle echo = remote_on(bare, "rt.echo");
  PFFunctionHandle make = remote_on(bare, "rt.make");
  PFObjectHandle o = make_obj(g_type, 1, "x");
  PFValue v = {.v_handle = o}, rv;
  int c = kPFObjectHandle, rc;
  assert_pf_error(PFFuncCall(echo, &v, &c, 1, &rv, &rc), kPFErrValueError,
                  "rpc: a value sent by value cannot be rebuilt: ", "'rt.Obj'");
  assert_non_null(strstr(PFErrorGetTraceback(), "while decoding argument 0"));
  assert_pf_error(PFFuncCall(make, NULL, NULL, 0, &rv, &rc), kPFErrValueError,
                  "rpc: a value sent by value cannot be rebuilt: ", "'rt.Only'");
  /* Both sides go on. */
  PFValue five = {.v_int64 = 5};
  assert_int_equal(pf_test_call1(echo, five, kPFInt, kPFInt).v_int64, 5);
  PFObjectFree(o);
  PFFuncFree(make);
  PFFuncFree(echo);
  assert_pf_ok(PFRPCDisconnect(bare));
  PFModFree(bare);
}

/* Sends CALL rt.echo with one argument, a document ext of `text`, and
 * returns the reply's error kind and message ("" for OK). */
static void raw_document_call(const char* endpoint, const char* text, size_t len, char* kind,
                              char* msg, size_t cap) {
  void* ctx = zmq_ctx_new();
  void* sock = zmq_socket(ctx, ZMQ_DEALER);
  int zero = 0, tmo = 20000;
  zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero);
  zmq_setsockopt(sock, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
  assert_int_equal(zmq_connect(sock, endpoint), 0);
  msgpack_sbuffer sb;
  msgpack_sbuffer_init(&sb);
  msgpack_packer pk;
  msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
  msgpack_pack_array(&pk, 6);
  msgpack_pack_int(&pk, PF_RPC_PROTOCOL_VERSION);
  msgpack_pack_int(&pk, PF_RPC_CALL);
  msgpack_pack_uint64(&pk, 1);
  msgpack_pack_uint64(&pk, 0);
  msgpack_pack_str(&pk, 7);
  msgpack_pack_str_body(&pk, "rt.echo", 7);
  msgpack_pack_array(&pk, 1);
  msgpack_pack_ext(&pk, len, PF_RPC_EXT_DOCUMENT);
  msgpack_pack_ext_body(&pk, text, len);
  assert_true(zmq_send(sock, sb.data, sb.size, 0) >= 0);
  msgpack_sbuffer_destroy(&sb);
  zmq_msg_t zm;
  zmq_msg_init(&zm);
  assert_true(zmq_msg_recv(&zm, sock, 0) >= 0);
  msgpack_unpacked up;
  msgpack_unpacked_init(&up);
  assert_int_equal(msgpack_unpack_next(&up, zmq_msg_data(&zm), zmq_msg_size(&zm), NULL),
                   MSGPACK_UNPACK_SUCCESS);
  const msgpack_object* e = up.data.via.array.ptr;
  kind[0] = msg[0] = '\0';
  if (e[1].via.u64 == PF_RPC_ERROR) {
    snprintf(kind, cap, "%.*s", (int)e[4].via.str.size, e[4].via.str.ptr);
    snprintf(msg, cap, "%.*s", (int)e[5].via.str.size, e[5].via.str.ptr);
  }
  msgpack_unpacked_destroy(&up);
  zmq_msg_close(&zm);
  zmq_close(sock);
  zmq_ctx_term(ctx);
}

/* A malformed document, and one whose rebuilding would cost too much
 * memory, are error replies; the server goes on. */
static void test_hostile_documents(void** state) {
  (void)state;
  char endpoint[128];
  PFRPCServerHandle s = serve(0, endpoint, sizeof endpoint);
  assert_non_null(s);
  char kind[512], msg[512];
  static const char* const bad[] = {"", "{", "[1,", "{\"no\": \"format\"}", "\x01\x02\xff"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    raw_document_call(endpoint, bad[i], strlen(bad[i]), kind, msg, sizeof kind);
    assert_string_not_equal(kind, "");
    assert_non_null(strstr(msg, "rpc: a value sent by value cannot be rebuilt: "));
  }
  /* Empty containers, 3 bytes each: refused before anything is built. */
  size_t n = (size_t)PF_RPC_DECODE_SLACK / 2;
  char* text = malloc(n);
  assert_non_null(text);
  text[0] = '[';
  for (size_t i = 1; i + 3 < n; i += 3) memcpy(text + i, "[],", 3);
  size_t len = 1 + (n - 2) / 3 * 3;
  text[len - 1] = ']';
  raw_document_call(endpoint, text, len, kind, msg, sizeof kind);
  assert_string_equal(kind, "ValueError");
  assert_non_null(strstr(msg, "would take about"));
  free(text);
  /* The server goes on: a good document is answered. */
  static const char good[] =
      "{\"format\": \"packedfunc\", \"version\": 1, \"root\": 1, "
      "\"nodes\": []}";
  raw_document_call(endpoint, good, strlen(good), kind, msg, sizeof kind);
  assert_string_equal(kind, "");
  assert_pf_ok(PFRPCServerStop(s));
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  if (start_bare_child() != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_instance_crosses_both_ways),
      cmocka_unit_test(test_sharing_is_kept),
      cmocka_unit_test(test_a_cycle_is_refused_both_ways),
      cmocka_unit_test(test_what_a_document_cannot_hold),
      cmocka_unit_test(test_unregistered_type_fails_naming_it),
      cmocka_unit_test(test_hostile_documents),
  };
  int failed = cmocka_run_group_tests(tests, setup, teardown);
  kill(g_bare_pid, SIGKILL);
  waitpid(g_bare_pid, NULL, 0);
  return failed;
}
