/* Modules: loading shared libraries, registration macros, lookup, imports,
 * global export, lifetime, and every error path. The fixture modules are
 * the tests/modules sources, built into PF_TEST_MODULE_DIR. This binary links the
 * shared runtime, so the modules bind to the same instance as the test. */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "packedfunc/c_api.h"
#include "support/pf_test.h"

#ifndef PF_TEST_MODULE_DIR
#error "the Makefile passes PF_TEST_MODULE_DIR"
#endif

static const char* mod_path(const char* file) {
  static char buf[4096];
  snprintf(buf, sizeof(buf), "%s/%s", PF_TEST_MODULE_DIR, file);
  return buf;
}

static PFModuleHandle load(const char* file) {
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromFile(mod_path(file), &m));
  assert_non_null(m);
  return m;
}

/* Whether the dynamic loader still has the library mapped. */
static int is_loaded(const char* file) {
  void* h = dlopen(mod_path(file), RTLD_NOW | RTLD_NOLOAD);
  if (h != NULL) dlclose(h);
  return h != NULL;
}

static int64_t call_ii(PFFunctionHandle f, int64_t a, int64_t b) {
  PFValue args[2] = {{.v_int64 = a}, {.v_int64 = b}};
  int codes[2] = {kPFInt, kPFInt};
  PFValue r;
  int rc;
  assert_pf_ok(PFFuncCall(f, args, codes, 2, &r, &rc));
  assert_int_equal(rc, kPFInt);
  return r.v_int64;
}

static PFFunctionHandle get(PFModuleHandle m, const char* name, int imports) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFModGetFunction(m, name, imports, &f));
  return f;
}

static int64_t call_global_int(const char* name, int64_t a, int64_t b) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncGetGlobal(name, &f));
  assert_non_null(f);
  int64_t r = call_ii(f, a, b);
  PFFuncFree(f);
  return r;
}

static int has_global(const char* name) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncGetGlobal(name, &f));
  PFFuncFree(f);
  return f != NULL;
}

/* ---- the test binary registers functions of its own ---- */

static int self_answer(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  PFValue v = {.v_int64 = 42};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
PF_REGISTER_PACKED("self.answer", self_answer, "Returns 42.");
PF_REGISTER_PACKED("self.answer_nodoc", self_answer);

static int64_t self_sub(int64_t a, int64_t b) { return a - b; }
PF_REGISTER_TYPED("self.sub", self_sub, "int64( int64 , int64 )", "Subtracts.");
PF_REGISTER_TYPED("self.sub_nodoc", self_sub, "int64(int64,int64)");

/* ---- loading ---- */

static void test_load_and_call(void** state) {
  (void)state;
  PFModuleHandle m = load("mod_basic.so");
  uint32_t ti = 0;
  assert_pf_ok(PFObjectGetTypeIndex(m, &ti));
  assert_int_equal(ti, kPFObjectModule);

  PFFunctionHandle add = get(m, "add", 0);
  PFFunctionHandle mul = get(m, "mul", 0);
  assert_non_null(add);
  assert_non_null(mul);
  assert_int_equal(call_ii(add, 40, 2), 42);
  assert_int_equal(call_ii(mul, 6, 7), 42);
  /* The typed wrapper checks its arguments. */
  PFValue a[1] = {{.v_int64 = 1}};
  int c[1] = {kPFInt};
  PFValue r;
  int rc;
  assert_pf_error(PFFuncCall(mul, a, c, 1, &r, &rc), kPFErrTypeError);

  /* A miss is 0 with NULL. */
  PFFunctionHandle none = (PFFunctionHandle)&ti;
  assert_pf_ok(PFModGetFunction(m, "no.such", 1, &none));
  assert_null(none);

  PFFuncFree(add);
  PFFuncFree(mul);
  assert_pf_ok(PFModFree(m));
  assert_false(is_loaded("mod_basic.so"));
}

static void test_metadata(void** state) {
  (void)state;
  PFModuleHandle m = load("mod_basic.so");
  const char *name, *sig, *doc;
  PFFunctionHandle f = get(m, "mul", 0);
  assert_pf_ok(PFFuncGetInfo(f, &name, &sig, &doc));
  assert_string_equal(name, "mul");
  assert_string_equal(sig, "int64(int64,int64)");
  assert_string_equal(doc, "Multiplies two ints.");
  PFFuncFree(f);

  f = get(m, "add", 0);
  assert_pf_ok(PFFuncGetInfo(f, &name, &sig, &doc));
  assert_string_equal(name, "add");
  assert_null(sig);
  assert_string_equal(doc, "Adds two ints (basic).");
  PFFuncFree(f);

  f = get(m, "half", 0); /* typed, no doc */
  assert_pf_ok(PFFuncGetInfo(f, &name, &sig, &doc));
  assert_string_equal(sig, "float64(float64)");
  assert_null(doc);
  PFFuncFree(f);

  int n = 0;
  const char** names = NULL;
  assert_pf_ok(PFModListFunctionNames(m, &n, &names));
  assert_int_equal(n, 5);
  const char* expected[] = {"add", "call_global", "greet", "half", "mul"};
  for (int i = 0; i < n; ++i) assert_string_equal(names[i], expected[i]);
  assert_null(names[n]);
  PFModFree(m);
}

static void test_str_function(void** state) {
  (void)state;
  PFModuleHandle m = load("mod_basic.so");
  PFFunctionHandle f = get(m, "greet", 0);
  PFValue a = {.v_str = "module"}, r;
  int c = kPFStr, rc;
  assert_pf_ok(PFFuncCall(f, &a, &c, 1, &r, &rc));
  assert_int_equal(rc, kPFStr);
  assert_string_equal(r.v_str, "hello, module");
  PFFuncFree(f);
  PFModFree(m);
}

/* The module sees the test's registry: one runtime instance. */
static int hello(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)res;
  PFValue v = {.v_str = "from the test"};
  int code = kPFStr;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static void test_one_runtime_instance(void** state) {
  (void)state;
  PFFunctionHandle h;
  assert_pf_ok(PFFuncCreateFromCFunc(hello, NULL, NULL, &h));
  assert_pf_ok(PFFuncRegisterGlobal("test_module.hello", h, 0));
  PFFuncFree(h);

  PFModuleHandle m = load("mod_basic.so");
  PFFunctionHandle f = get(m, "call_global", 0);
  PFValue a = {.v_str = "test_module.hello"}, r;
  int c = kPFStr, rc;
  assert_pf_ok(PFFuncCall(f, &a, &c, 1, &r, &rc));
  assert_int_equal(rc, kPFStr);
  assert_string_equal(r.v_str, "from the test");
  /* And the module's error reaches the test with its kind. */
  a.v_str = "test_module.absent";
  assert_pf_error(PFFuncCall(f, &a, &c, 1, &r, &rc), kPFErrKeyError, "test_module.absent");
  PFFuncFree(f);
  PFModFree(m);
  assert_pf_ok(PFFuncRemoveGlobal("test_module.hello"));
}

/* ---- lifetime ---- */

static void test_function_outlives_module(void** state) {
  (void)state;
  PFModuleHandle m = load("mod_basic.so");
  PFFunctionHandle mul = get(m, "mul", 0);
  PFFunctionHandle add = get(m, "add", 0);
  assert_pf_ok(PFModFree(m));
  /* The functions keep the library loaded. */
  assert_true(is_loaded("mod_basic.so"));
  assert_int_equal(call_ii(mul, 3, 5), 15);
  PFFuncFree(mul);
  assert_true(is_loaded("mod_basic.so"));
  assert_int_equal(call_ii(add, 3, 5), 8);
  PFFuncFree(add);
  /* The last one gone, the library is unloaded. */
  assert_false(is_loaded("mod_basic.so"));
}

static void test_exported_function_outlives_module(void** state) {
  (void)state;
  PFModuleHandle m = load("mod_basic.so");
  assert_pf_ok(PFModExportGlobal(m, "life.", 0));
  PFModFree(m);
  assert_true(is_loaded("mod_basic.so"));
  assert_int_equal(call_global_int("life.mul", 4, 4), 16);
  const char* names[] = {"life.add", "life.call_global", "life.greet", "life.half", "life.mul"};
  for (size_t i = 0; i < 5; ++i) assert_pf_ok(PFFuncRemoveGlobal(names[i]));
  assert_false(is_loaded("mod_basic.so"));
}

static void test_load_twice(void** state) {
  (void)state;
  PFModuleHandle a = load("mod_basic.so");
  PFModuleHandle b = load("mod_basic.so");
  assert_ptr_not_equal(a, b);
  PFFunctionHandle fa = get(a, "mul", 0);
  PFFunctionHandle fb = get(b, "mul", 0);
  assert_ptr_not_equal(fa, fb);
  assert_int_equal(call_ii(fa, 2, 3), 6);
  assert_int_equal(call_ii(fb, 2, 4), 8);
  /* The same module gives back the same function object. */
  PFFunctionHandle fa2 = get(a, "mul", 0);
  assert_ptr_equal(fa, fa2);
  PFFuncFree(fa2);
  PFModFree(a);
  PFFuncFree(fa);
  assert_true(is_loaded("mod_basic.so")); /* b still holds it */
  assert_int_equal(call_ii(fb, 5, 5), 25);
  PFFuncFree(fb);
  PFModFree(b);
  assert_false(is_loaded("mod_basic.so"));
}

static void test_module_from_two_files(void** state) {
  (void)state;
  PFModuleHandle m = load("mod_multi.so");
  int n = 0;
  const char** names = NULL;
  assert_pf_ok(PFModListFunctionNames(m, &n, &names));
  assert_int_equal(n, 3);
  assert_string_equal(names[0], "multi.one");
  assert_string_equal(names[1], "multi.three");
  assert_string_equal(names[2], "multi.two");
  PFFunctionHandle two = get(m, "multi.two", 0);
  PFValue r;
  int rc;
  assert_pf_ok(PFFuncCall(two, NULL, NULL, 0, &r, &rc));
  assert_int_equal(r.v_int64, 2);
  PFFuncFree(two);
  PFModFree(m);
}

/* ---- load errors ---- */

static void test_load_bad_path(void** state) {
  (void)state;
  int sentinel;
  PFModuleHandle m = &sentinel;
  assert_pf_error(PFModLoadFromFile(mod_path("no_such_module.so"), &m), kPFErrRuntimeError,
                  "PFModLoadFromFile", "no_such_module.so",
                  "cannot open shared object file"); /* dlopen's own words */
  assert_ptr_equal(m, &sentinel);                    /* untouched */
  assert_pf_error(PFModLoadFromFile(NULL, &m), kPFErrTypeError, "PFModLoadFromFile", "'path'");
  assert_pf_error(PFModLoadFromFile(mod_path("mod_basic.so"), NULL), kPFErrTypeError, "'out'");
  assert_pf_error(PFModLoadFromFile("", &m), kPFErrValueError, "'path' is empty");
  /* A file that is not a shared library at all. */
  assert_pf_error(PFModLoadFromFile(__FILE__, &m), kPFErrRuntimeError, "cannot load");
}

static void test_load_not_a_module(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromFile(mod_path("mod_plain.so"), &m), kPFErrValueError, "mod_plain.so",
                  "is not a packedfunc module");
  assert_false(is_loaded("mod_plain.so")); /* closed again */
  /* Depending on a module does not make a library one. */
  assert_pf_error(PFModLoadFromFile(mod_path("mod_depends.so"), &m), kPFErrValueError,
                  "mod_depends.so", "is not a packedfunc module");
  assert_false(is_loaded("mod_depends.so"));
  assert_false(is_loaded("mod_basic.so"));
  assert_null(m);
}

static void test_load_duplicate_name(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromFile(mod_path("mod_dup.so"), &m), kPFErrKeyError, "mod_dup.so",
                  "'dup.twice' twice");
  assert_null(m);
  assert_false(is_loaded("mod_dup.so"));
}

static void test_load_bad_signature(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromFile(mod_path("mod_badsig.so"), &m), kPFErrValueError,
                  "int64(int64");
  assert_non_null(strstr(PFErrorGetTraceback(), "badsig.broken"));
  assert_non_null(strstr(PFErrorGetTraceback(), "mod_badsig.so"));
  assert_null(m);
  assert_false(is_loaded("mod_badsig.so"));
}

/* A checked registration records the C types its header gave: a plugin
 * built against a header whose float64 was a float is refused, whole,
 * naming the function, instead of calling half() with a double. */
static void test_load_checked_against_a_stale_header(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromFile(mod_path("mod_stale.so"), &m), kPFErrValueError, "mod_stale.so",
                  "function stale.half was checked against a header whose float64", "`float/float`",
                  "this library's is `double/double`");
  assert_null(m);
  assert_false(is_loaded("mod_stale.so"));
}

/* The same for a method (PF_METHOD_CHECKED): the C types it was compiled
 * with travel in its descriptor, and the whole type is refused, naming the
 * method; nothing of the module stays. */
static void test_load_checked_method_against_a_stale_header(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_error(
      PFModLoadFromFile(mod_path("mod_stale_method.so"), &m), kPFErrValueError,
      "object type 'stale.Gauge': method 'scale' was checked against a header whose "
      "float64 is `float/float`, this library's is `double/double`: rebuild the plugin");
  assert_non_null(strstr(PFErrorGetTraceback(), "mod_stale_method.so"));
  assert_null(m);
  assert_false(is_loaded("mod_stale_method.so"));
  uint32_t found = 1;
  assert_pf_ok(PFObjectTypeFind("stale.Gauge", &found));
  assert_int_equal(found, 0);
}

/* ---- bad files: checked before dlopen, descriptors checked before use ---- */

/* What PFModLoadFromFile did in a child process. The old runtime crashed
 * (SIGSEGV, SIGBUS) or hung on some of these files: in a child, with a
 * deadline, that fails one test instead of killing or stalling them all. */
typedef struct {
  int hung;   /* killed at the deadline */
  int signal; /* the signal that killed it, or 0 */
  int status; /* its exit status */
  int rc;
  char kind[PF_ERROR_KIND_MAX];
  char msg[2048];
} child_load;

#define CHILD_DEADLINE_SECONDS 20

/* The child's half: loads `path` and writes "rc\nkind\nmessage" to fd. */
static void report_load(const char* path, int fd) {
  PFModuleHandle m = NULL;
  int rc = PFModLoadFromFile(path, &m);
  char buf[4096];
  int n = snprintf(buf, sizeof(buf), "%d\n%s\n%s", rc, rc ? PFErrorGetKind() : "",
                   rc ? PFErrorGetMessage() : "");
  if (n > (int)sizeof(buf) - 1) n = (int)sizeof(buf) - 1;
  if (write(fd, buf, (size_t)n) != n) rc = 99;
  PFModFree(m);
}

/* Loads `path` in a child process. With `library_path`, the child is this
 * program run again with LD_LIBRARY_PATH set to it (the dynamic loader
 * reads it only at start), in its --load mode. */
static void load_in_child(const char* path, const char* library_path, child_load* out) {
  memset(out, 0, sizeof(*out));
  out->rc = 1;
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
  assert_true(len > 0);
  self[len] = '\0';
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* Not cmocka's handlers: a crash must end this child, not let it run
     * the remaining tests. */
    const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); ++i) signal(fatal[i], SIG_DFL);
    close(fds[0]);
    if (library_path != NULL) {
      setenv("LD_LIBRARY_PATH", library_path, 1);
      dup2(fds[1], STDOUT_FILENO);
      execl(self, self, "--load", path, (char*)NULL);
      _exit(98);
    }
    report_load(path, fds[1]);
    _exit(0);
  }
  close(fds[1]);
  char buf[4096];
  size_t got = 0;
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    struct pollfd p = {fds[0], POLLIN, 0};
    int ready = poll(&p, 1, 100);
    if (ready > 0) {
      ssize_t n = read(fds[0], buf + got, sizeof(buf) - 1 - got);
      if (n <= 0) break; /* the child closed it: done */
      got += (size_t)n;
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec >= CHILD_DEADLINE_SECONDS) {
      out->hung = 1;
      kill(pid, SIGKILL);
      break;
    }
  }
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!out->hung && WIFSIGNALED(status)) out->signal = WTERMSIG(status);
  if (!out->hung && WIFEXITED(status)) out->status = WEXITSTATUS(status);
  buf[got] = '\0';
  char* kind = strchr(buf, '\n');
  char* msg = kind ? strchr(kind + 1, '\n') : NULL;
  if (msg != NULL) {
    *kind++ = '\0';
    *msg++ = '\0';
    out->rc = atoi(buf);
    snprintf(out->kind, sizeof(out->kind), "%s", kind);
    snprintf(out->msg, sizeof(out->msg), "%s", msg);
  }
}

/* Asserts that the child's load failed cleanly with `kind` and a message
 * holding each substring. */
#define assert_child_error(res, kind, ...) \
  child_check_((res), (kind), (const char* const[]){__VA_ARGS__, NULL}, __FILE__, __LINE__)

static void child_check_(const child_load* res, const char* kind, const char* const* subs,
                         const char* file, int line) {
  if (res->hung) {
    print_error("the load hung: killed after %d s\n", CHILD_DEADLINE_SECONDS);
    _fail(file, line);
  }
  if (res->signal != 0) {
    print_error("the load crashed the process: signal %d (%s)\n", res->signal,
                strsignal(res->signal));
    _fail(file, line);
  }
  if (res->status != 0) {
    print_error("the load ended the process with exit status %d\n", res->status);
    _fail(file, line);
  }
  if (res->rc != -1) {
    print_error("expected status -1, got %d\n", res->rc);
    _fail(file, line);
  }
  _assert_string_equal(res->kind, kind, file, line);
  for (; *subs != NULL; ++subs) {
    if (strstr(res->msg, *subs) == NULL) {
      print_error("error message '%s' does not contain '%s'\n", res->msg, *subs);
      _fail(file, line);
    }
  }
}

/* A scratch directory, removed with its files by remove_scratch. */
static char g_scratch[64];

static const char* scratch_path(const char* name) {
  static char buf[256];
  if (g_scratch[0] == '\0') {
    snprintf(g_scratch, sizeof(g_scratch), "/tmp/pf-test-module-XXXXXX");
    assert_non_null(mkdtemp(g_scratch));
  }
  snprintf(buf, sizeof(buf), "%s/%s", g_scratch, name);
  return buf;
}

static void remove_scratch(const char* const* names) {
  for (; *names != NULL; ++names) unlink(scratch_path(*names));
  rmdir(g_scratch);
  g_scratch[0] = '\0';
}

/* Copies the first `size` bytes of a file (all of it for SIZE_MAX) to `dst`. */
static void copy_truncated(const char* src, const char* dst, size_t size) {
  char data[4096];
  FILE* in = fopen(src, "rb");
  assert_non_null(in);
  FILE* out = fopen(dst, "wb");
  assert_non_null(out);
  size_t left = size, n;
  while (left > 0 && (n = fread(data, 1, left < sizeof(data) ? left : sizeof(data), in)) > 0) {
    assert_int_equal(fwrite(data, 1, n, out), n);
    left -= n;
  }
  fclose(in);
  assert_int_equal(fclose(out), 0);
  if (size != SIZE_MAX) assert_int_equal(left, 0);
}

static void test_load_truncated_file(void** state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof(path), "%s", scratch_path("truncated.so"));
  copy_truncated(mod_path("mod_basic.so"), path, 3000);
  child_load res;
  load_in_child(path, NULL, &res);
  assert_child_error(&res, kPFErrRuntimeError, "PFModLoadFromFile", "cannot load", path,
                     "file truncated");
  /* Cut inside the ELF header: too short. */
  copy_truncated(mod_path("mod_basic.so"), path, 20);
  load_in_child(path, NULL, &res);
  assert_child_error(&res, kPFErrRuntimeError, "cannot load", "too short");
  remove_scratch((const char* const[]){"truncated.so", NULL});
}

static void test_load_fifo(void** state) {
  (void)state;
  char path[256];
  snprintf(path, sizeof(path), "%s", scratch_path("fifo.so"));
  assert_int_equal(mkfifo(path, 0600), 0);
  child_load res;
  load_in_child(path, NULL, &res);
  assert_child_error(&res, kPFErrRuntimeError, "cannot load", path, "a FIFO", "not a regular file");
  remove_scratch((const char* const[]){"fifo.so", NULL});
  /* Other files that are not regular. */
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromFile("/dev/zero", &m), kPFErrRuntimeError, "cannot load",
                  "a character device");
  assert_pf_error(PFModLoadFromFile(PF_TEST_MODULE_DIR, &m), kPFErrRuntimeError, "cannot load",
                  "a directory");
  assert_null(m);
}

/* A name without a slash is found in dlopen's search path (here
 * LD_LIBRARY_PATH) and checked before it is loaded. */
static void test_load_bare_name_is_checked(void** state) {
  (void)state;
  copy_truncated(mod_path("mod_basic.so"), scratch_path("libpf_cut.so"), 3000);
  child_load res;
  load_in_child("libpf_cut.so", g_scratch, &res);
  assert_child_error(&res, kPFErrRuntimeError, "cannot load 'libpf_cut.so'", "found as",
                     "file truncated");
  /* The same directory still finds a good module by its bare name. */
  copy_truncated(mod_path("mod_other.so"), scratch_path("libpf_good.so"), SIZE_MAX);
  load_in_child("libpf_good.so", g_scratch, &res);
  assert_false(res.hung);
  assert_int_equal(res.signal, 0);
  assert_int_equal(res.status, 0);
  assert_int_equal(res.rc, 0);
  remove_scratch((const char* const[]){"libpf_cut.so", "libpf_good.so", NULL});
}

/* A name without a slash that names a file in the working directory loads
 * that file, as the caller who sees it there means (dlopen alone searches
 * only its library path), and before a library of the same name on that
 * path. A directory of that name is no file: the search applies. */
static void test_load_bare_name_in_working_directory(void** state) {
  (void)state;
  char cwd[4096];
  assert_non_null(getcwd(cwd, sizeof(cwd)));
  copy_truncated(mod_path("mod_other.so"), scratch_path("libpf_here.so"), SIZE_MAX);
  copy_truncated(mod_path("mod_basic.so"), scratch_path("libpf_cut_here.so"), 3000);
  assert_int_equal(mkdir(scratch_path("lib"), 0700), 0);
  copy_truncated(mod_path("mod_basic.so"), scratch_path("lib/libpf_here.so"), 3000);
  assert_int_equal(mkdir(scratch_path("libm.so.6"), 0700), 0);
  char lib_dir[256];
  snprintf(lib_dir, sizeof(lib_dir), "%s", scratch_path("lib"));
  assert_int_equal(chdir(g_scratch), 0);
  child_load here, first, cut, dir;
  load_in_child("libpf_here.so", NULL, &here);
  load_in_child("libpf_here.so", lib_dir, &first);
  load_in_child("libpf_cut_here.so", NULL, &cut);
  load_in_child("libm.so.6", NULL, &dir);
  assert_int_equal(chdir(cwd), 0);
  unlink(scratch_path("lib/libpf_here.so"));
  rmdir(scratch_path("lib"));
  rmdir(scratch_path("libm.so.6"));
  remove_scratch((const char* const[]){"libpf_here.so", "libpf_cut_here.so", NULL});
  if (here.rc != 0) print_error("%s: %s\n", here.kind, here.msg);
  assert_false(here.hung);
  assert_int_equal(here.signal, 0);
  assert_int_equal(here.rc, 0);
  if (first.rc != 0) print_error("%s: %s\n", first.kind, first.msg);
  assert_int_equal(first.rc, 0);
  assert_child_error(&cut, kPFErrRuntimeError, "cannot load 'libpf_cut_here.so'",
                     "found as './libpf_cut_here.so'", "file truncated");
  assert_child_error(&dir, kPFErrValueError, "'libm.so.6' is not a packedfunc module");
}

static void test_load_junk_descriptor_pointer(void** state) {
  (void)state;
  child_load res;
  load_in_child(mod_path("mod_junk.so"), NULL, &res);
  assert_child_error(&res, kPFErrValueError, "PFModLoadFromFile", "mod_junk.so", "0x1234",
                     "outside the library's loaded data");
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromFile(mod_path("mod_junk.so"), &m), kPFErrValueError, "0x1234");
  assert_null(m);
  assert_false(is_loaded("mod_junk.so"));
}

static void test_load_descriptor_string_outside_library(void** state) {
  (void)state;
  child_load res;
  load_in_child(mod_path("mod_badname.so"), NULL, &res);
  assert_child_error(&res, kPFErrValueError, "mod_badname.so", "has a name at 0x1000",
                     "not a string in the library");
  PFModuleHandle m = NULL;
  assert_pf_error(PFModLoadFromFile(mod_path("mod_badname.so"), &m), kPFErrValueError, "0x1000");
  assert_false(is_loaded("mod_badname.so"));
}

static void test_load_function_pointer_into_data(void** state) {
  (void)state;
  child_load res;
  load_in_child(mod_path("mod_badcode.so"), NULL, &res);
  assert_child_error(&res, kPFErrValueError, "mod_badcode.so", "packed function pointer",
                     "not in any loaded code");
  assert_false(is_loaded("mod_badcode.so"));
}

/* ---- objects that a module's code makes at run time ---- */

/* Calls module function `name` with an int (when `with_int`) and an opaque
 * counter argument; returns the handle it returns. */
static void* make_in_module(PFModuleHandle m, const char* name, int with_int, atomic_int* counter,
                            int expect_code) {
  PFFunctionHandle f = get(m, name, 0);
  assert_non_null(f);
  PFValue args[2];
  int codes[2], n = 0;
  if (with_int) {
    args[n].v_int64 = 4;
    codes[n++] = kPFInt;
  }
  args[n].v_handle = counter;
  codes[n++] = kPFOpaqueHandle;
  PFValue r;
  int rc;
  assert_pf_ok(PFFuncCall(f, args, codes, n, &r, &rc));
  assert_int_equal(rc, expect_code);
  PFFuncFree(f);
  return r.v_handle;
}

static void test_tensor_from_module_outlives_it(void** state) {
  (void)state;
  atomic_int deleted = 0;
  PFModuleHandle m = load("mod_owner.so");
  PFObjectHandle t = make_in_module(m, "owner.tensor", 1, &deleted, kPFObjectHandle);
  assert_pf_ok(PFModFree(m));
  /* The module and all its functions are gone; the tensor's deleter is
   * still the library's code. */
  assert_true(is_loaded("mod_owner.so"));
  DLTensor* dl = NULL;
  assert_pf_ok(PFTensorGetDLTensor(t, &dl));
  assert_int_equal(dl->shape[0], 4);
  assert_true(((double*)dl->data)[3] == 3.0);
  assert_pf_ok(PFObjectFree(t));
  assert_int_equal(atomic_load(&deleted), 1);
  assert_false(is_loaded("mod_owner.so"));
}

static void test_function_from_module_outlives_it(void** state) {
  (void)state;
  atomic_int fins = 0;
  PFModuleHandle m = load("mod_owner.so");
  PFFunctionHandle f = make_in_module(m, "owner.function", 0, &fins, kPFFuncHandle);
  assert_pf_ok(PFModFree(m));
  assert_true(is_loaded("mod_owner.so"));
  PFValue r;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &r, &rc));
  assert_int_equal(r.v_int64, 42);
  assert_pf_ok(PFFuncFree(f));
  assert_int_equal(atomic_load(&fins), 1); /* ran before the library went */
  assert_false(is_loaded("mod_owner.so"));
}

static void test_typed_function_from_module_outlives_it(void** state) {
  (void)state;
  PFModuleHandle m = load("mod_owner.so");
  PFFunctionHandle f = make_in_module(m, "owner.typed", 0, NULL, kPFFuncHandle);
  assert_pf_ok(PFModFree(m));
  assert_true(is_loaded("mod_owner.so"));
  PFValue a = {.v_int64 = 14}, r;
  int c = kPFInt, rc;
  assert_pf_ok(PFFuncCall(f, &a, &c, 1, &r, &rc));
  assert_int_equal(r.v_int64, 42);
  assert_pf_ok(PFFuncFree(f));
  assert_false(is_loaded("mod_owner.so"));
}

static void test_boxed_from_module_outlives_it(void** state) {
  (void)state;
  atomic_int freed = 0;
  PFModuleHandle m = load("mod_owner.so");
  PFObjectHandle b = make_in_module(m, "owner.boxed", 1, &freed, kPFObjectHandle);
  assert_pf_ok(PFModFree(m));
  assert_true(is_loaded("mod_owner.so"));
  void* payload = NULL;
  assert_pf_ok(PFObjectGetBoxedPayload(b, &payload));
  assert_int_equal(*(int64_t*)payload, 4);
  assert_pf_ok(PFObjectFree(b));
  assert_int_equal(atomic_load(&freed), 1);
  assert_false(is_loaded("mod_owner.so"));
}

/* Several objects share the library: it goes with the last of them. */
static void test_library_goes_with_the_last_object(void** state) {
  (void)state;
  atomic_int deleted = 0, fins = 0, freed = 0;
  PFModuleHandle m = load("mod_owner.so");
  PFObjectHandle t = make_in_module(m, "owner.tensor", 1, &deleted, kPFObjectHandle);
  PFFunctionHandle f = make_in_module(m, "owner.function", 0, &fins, kPFFuncHandle);
  PFObjectHandle b = make_in_module(m, "owner.boxed", 1, &freed, kPFObjectHandle);
  PFFunctionHandle typed = make_in_module(m, "owner.typed", 0, NULL, kPFFuncHandle);
  PFModFree(m);
  PFObjectHandle order[4] = {b, t, typed, f};
  for (int i = 0; i < 4; ++i) {
    assert_true(is_loaded("mod_owner.so"));
    assert_pf_ok(PFObjectFree(order[i]));
  }
  assert_false(is_loaded("mod_owner.so"));
  assert_int_equal(atomic_load(&deleted) + atomic_load(&fins) + atomic_load(&freed), 3);
  /* Loading it again works: a fresh library, fresh objects. */
  m = load("mod_owner.so");
  t = make_in_module(m, "owner.tensor", 1, &deleted, kPFObjectHandle);
  PFModFree(m);
  assert_true(is_loaded("mod_owner.so"));
  PFObjectFree(t);
  assert_false(is_loaded("mod_owner.so"));
}

/* ---- argument errors of the other entry points ---- */

static void test_bad_handles(void** state) {
  (void)state;
  PFModuleHandle m = load("mod_basic.so");
  PFFunctionHandle f = get(m, "add", 0);
  PFFunctionHandle out = NULL;
  int n;
  const char** names;
  assert_pf_error(PFModGetFunction(NULL, "add", 0, &out), kPFErrTypeError, "PFModGetFunction",
                  "'mod' is NULL");
  assert_pf_error(PFModGetFunction(f, "add", 0, &out), kPFErrTypeError, "not a live module handle");
  assert_pf_error(PFModGetFunction(m, NULL, 0, &out), kPFErrTypeError, "'name'");
  assert_pf_error(PFModGetFunction(m, "add", 0, NULL), kPFErrTypeError, "'out'");
  assert_pf_error(PFModListFunctionNames(f, &n, &names), kPFErrTypeError, "PFModListFunctionNames");
  assert_pf_error(PFModListFunctionNames(m, NULL, &names), kPFErrTypeError, "'out_size'");
  assert_pf_error(PFModListFunctionNames(m, &n, NULL), kPFErrTypeError, "'out_array'");
  assert_pf_error(PFModImport(m, f), kPFErrTypeError, "PFModImport", "'dep'");
  assert_pf_error(PFModImport(NULL, m), kPFErrTypeError, "PFModImport", "'mod'");
  assert_pf_error(PFModExportGlobal(f, "x.", 0), kPFErrTypeError, "PFModExportGlobal");
  assert_pf_error(PFModExportGlobal(m, "x.", 8), kPFErrValueError, "'flags'");
  assert_pf_error(PFModFree(f), kPFErrTypeError, "PFModFree");
  assert_pf_ok(PFModFree(NULL));
  PFFuncFree(f);
  PFModFree(m);
}

/* ---- imports ---- */

static void test_imports(void** state) {
  (void)state;
  PFModuleHandle basic = load("mod_basic.so");
  PFModuleHandle other = load("mod_other.so");
  PFModuleHandle multi = load("mod_multi.so");
  assert_pf_ok(PFModImport(basic, other));
  assert_pf_ok(PFModImport(basic, other)); /* again: a no-op */
  assert_pf_ok(PFModImport(other, multi));

  /* Without query_imports only the module's own functions. */
  assert_null(get(basic, "neg", 0));
  PFFunctionHandle neg = get(basic, "neg", 1);
  assert_non_null(neg);
  PFValue a = {.v_int64 = 5}, r;
  int c = kPFInt, rc;
  assert_pf_ok(PFFuncCall(neg, &a, &c, 1, &r, &rc));
  assert_int_equal(r.v_int64, -5);
  PFFuncFree(neg);

  /* Own functions first: basic's add, not other's (which adds 1000). */
  PFFunctionHandle add = get(basic, "add", 1);
  assert_int_equal(call_ii(add, 1, 2), 3);
  PFFuncFree(add);

  /* Depth-first through an import's imports. */
  PFFunctionHandle three = get(basic, "multi.three", 1);
  assert_non_null(three);
  PFFuncFree(three);

  /* Cycles are refused. */
  assert_pf_error(PFModImport(multi, basic), kPFErrValueError, "import cycle");
  assert_pf_error(PFModImport(basic, basic), kPFErrValueError, "import cycle");

  /* Imports stay alive through the importer. */
  PFModFree(other);
  PFModFree(multi);
  PFFunctionHandle two = get(basic, "multi.two", 1);
  assert_non_null(two);
  PFModFree(basic);
  PFValue r2;
  assert_pf_ok(PFFuncCall(two, NULL, NULL, 0, &r2, &rc));
  assert_int_equal(r2.v_int64, 2);
  PFFuncFree(two);
  assert_false(is_loaded("mod_multi.so"));
  assert_false(is_loaded("mod_other.so"));
}

/* ---- export ---- */

static void test_export_prefix(void** state) {
  (void)state;
  PFModuleHandle m = load("mod_other.so");
  assert_pf_ok(PFModExportGlobal(m, "exp.", 0));
  assert_int_equal(call_global_int("exp.add", 1, 1), 1002);
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncGetGlobal("exp.neg", &f));
  const char* name = NULL;
  PFFuncGetInfo(f, &name, NULL, NULL);
  assert_string_equal(name, "neg"); /* metadata keeps the module's name */
  PFFuncFree(f);

  /* A second export of the same names fails, leaving the first alone. */
  PFModuleHandle again = load("mod_other.so");
  assert_pf_error(PFModExportGlobal(again, "exp.", 0), kPFErrKeyError, "exp.add",
                  "nothing from the module was exported");
  assert_int_equal(call_global_int("exp.add", 1, 1), 1002);

  /* NULL prefix is "". */
  assert_pf_ok(PFModExportGlobal(again, NULL, 0));
  assert_true(has_global("neg"));
  assert_pf_ok(PFFuncRemoveGlobal("add"));
  assert_pf_ok(PFFuncRemoveGlobal("neg"));
  assert_pf_ok(PFFuncRemoveGlobal("exp.add"));
  assert_pf_ok(PFFuncRemoveGlobal("exp.neg"));
  PFModFree(again);
  PFModFree(m);
}

static void test_export_conflict_registers_nothing(void** state) {
  (void)state;
  /* "conf.neg" is taken; "conf.add" (sorted first) must not stay behind. */
  PFFunctionHandle h;
  assert_pf_ok(PFFuncCreateFromCFunc(hello, NULL, NULL, &h));
  assert_pf_ok(PFFuncRegisterGlobal("conf.neg", h, 0));
  PFModuleHandle m = load("mod_other.so");
  assert_pf_error(PFModExportGlobal(m, "conf.", 0), kPFErrKeyError, "conf.neg");
  assert_false(has_global("conf.add"));
  int n = 0;
  const char** names = NULL;
  assert_pf_ok(PFFuncListGlobalNamesWithPrefix("conf.", &n, &names));
  assert_int_equal(n, 1);
  assert_string_equal(names[0], "conf.neg");
  assert_pf_ok(PFFuncRemoveGlobal("conf.neg"));
  PFFuncFree(h);
  PFModFree(m);
}

static void test_export_rollback_after_partial_register(void** state) {
  (void)state;
  /* With override, a protected name is found only while registering:
   * "ovr.add" is replaced first, then "ovr.neg" fails; "ovr.add" must get
   * its old function back. */
  PFFunctionHandle old_add, prot;
  assert_pf_ok(PFFuncCreateFromCFunc(hello, NULL, NULL, &old_add));
  assert_pf_ok(PFFuncCreateFromCFunc(hello, NULL, NULL, &prot));
  assert_pf_ok(PFFuncRegisterGlobal("ovr.add", old_add, 0));
  assert_pf_ok(PFFuncRegisterGlobalEx("ovr.neg", prot, kPFRegisterProtected));
  PFModuleHandle m = load("mod_other.so");
  assert_pf_error(PFModExportGlobal(m, "ovr.", kPFRegisterOverride), kPFErrRuntimeError, "ovr.neg",
                  "protected");
  PFFunctionHandle now = NULL;
  assert_pf_ok(PFFuncGetGlobal("ovr.add", &now));
  assert_ptr_equal(now, old_add);
  PFFuncFree(now);
  assert_pf_ok(PFFuncRemoveGlobal("ovr.add"));
  PFFuncFree(old_add);
  PFFuncFree(prot); /* the registry keeps the protected name */

  /* Override without conflicts replaces; protected export protects. */
  assert_pf_ok(PFFuncCreateFromCFunc(hello, NULL, NULL, &old_add));
  assert_pf_ok(PFFuncRegisterGlobal("ovr2.add", old_add, 0));
  assert_pf_ok(PFModExportGlobal(m, "ovr2.", kPFRegisterOverride | kPFRegisterProtected));
  assert_int_equal(call_global_int("ovr2.add", 1, 2), 1003);
  assert_pf_error(PFFuncRemoveGlobal("ovr2.add"), kPFErrRuntimeError, "protected");
  PFFuncFree(old_add);
  PFModFree(m);
}

/* ---- registration macros in this program ---- */

static void test_load_self(void** state) {
  (void)state;
  PFModuleHandle self = NULL;
  assert_pf_ok(PF_MODULE_LOAD_SELF(&self));
  int n = 0;
  const char** names = NULL;
  assert_pf_ok(PFModListFunctionNames(self, &n, &names));
  assert_int_equal(n, 4);
  assert_string_equal(names[0], "self.answer");
  assert_string_equal(names[1], "self.answer_nodoc");
  assert_string_equal(names[2], "self.sub");
  assert_string_equal(names[3], "self.sub_nodoc");

  const char *name, *sig, *doc;
  PFFunctionHandle f = get(self, "self.sub", 0);
  assert_pf_ok(PFFuncGetInfo(f, &name, &sig, &doc));
  assert_string_equal(name, "self.sub");
  assert_string_equal(sig, "int64(int64,int64)"); /* canonical */
  assert_string_equal(doc, "Subtracts.");
  assert_int_equal(call_ii(f, 50, 8), 42);
  PFFuncFree(f);
  f = get(self, "self.sub_nodoc", 0);
  assert_pf_ok(PFFuncGetInfo(f, NULL, NULL, &doc));
  assert_null(doc);
  PFFuncFree(f);
  f = get(self, "self.answer", 0);
  assert_pf_ok(PFFuncGetInfo(f, &name, &sig, &doc));
  assert_null(sig);
  assert_string_equal(doc, "Returns 42.");
  PFFuncFree(f);
  f = get(self, "self.answer_nodoc", 0);
  assert_pf_ok(PFFuncGetInfo(f, NULL, NULL, &doc));
  assert_null(doc);
  PFFuncFree(f);

  /* Publishing them; a taken name is a KeyError, never a silent replace. */
  assert_pf_ok(PFModExportGlobal(self, "", 0));
  assert_int_equal(call_global_int("self.sub", 2, 1), 1);
  PFModuleHandle again = NULL;
  assert_pf_ok(PF_MODULE_LOAD_SELF(&again));
  assert_pf_error(PFModExportGlobal(again, "", 0), kPFErrKeyError, "self.answer");
  const char* all[] = {"self.answer", "self.answer_nodoc", "self.sub", "self.sub_nodoc"};
  for (size_t i = 0; i < 4; ++i) assert_pf_ok(PFFuncRemoveGlobal(all[i]));
  PFModFree(again);
  PFModFree(self);
}

/* ---- hand-made descriptor tables ---- */

static void test_descriptor_errors(void** state) {
  (void)state;
  static const PFFuncDescriptor ok = {
      PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorPacked, "t.ok", self_answer, NULL, NULL, NULL};
  static const PFFuncDescriptor bad_abi = {
      99, kPFFuncDescriptorPacked, "t.abi", self_answer, NULL, NULL, NULL};
  static const PFFuncDescriptor bad_kind = {
      PF_FUNC_DESCRIPTOR_ABI, 7, "t.kind", self_answer, NULL, NULL, NULL};
  static const PFFuncDescriptor no_name = {
      PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorPacked, "", self_answer, NULL, NULL, NULL};
  static const PFFuncDescriptor no_fn = {
      PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorPacked, "t.nofn", NULL, NULL, NULL, NULL};
  static const PFFuncDescriptor no_sig = {PF_FUNC_DESCRIPTOR_ABI,
                                          kPFFuncDescriptorTyped,
                                          "t.nosig",
                                          NULL,
                                          (void (*)(void))self_sub,
                                          NULL,
                                          NULL};
  PFModuleHandle m = NULL;
  const PFFuncDescriptor* t1[] = {&ok, &bad_abi};
  assert_pf_error(PFModLoadFromDescriptors(t1, t1 + 2, &m), kPFErrValueError,
                  "PFModLoadFromDescriptors", "ABI version 99");
  const PFFuncDescriptor* t2[] = {&bad_kind};
  assert_pf_error(PFModLoadFromDescriptors(t2, t2 + 1, &m), kPFErrValueError, "kind 7");
  const PFFuncDescriptor* t3[] = {&no_name};
  assert_pf_error(PFModLoadFromDescriptors(t3, t3 + 1, &m), kPFErrValueError, "empty name");
  const PFFuncDescriptor* t4[] = {&no_fn};
  assert_pf_error(PFModLoadFromDescriptors(t4, t4 + 1, &m), kPFErrValueError, "t.nofn",
                  "NULL pointer");
  const PFFuncDescriptor* t5[] = {&no_sig};
  assert_pf_error(PFModLoadFromDescriptors(t5, t5 + 1, &m), kPFErrValueError, "t.nosig",
                  "NULL signature");
  const PFFuncDescriptor* t6[] = {&ok, NULL};
  assert_pf_error(PFModLoadFromDescriptors(t6, t6 + 2, &m), kPFErrValueError,
                  "descriptor 1 is NULL");
  const PFFuncDescriptor* t7[] = {&ok, &ok};
  assert_pf_error(PFModLoadFromDescriptors(t7, t7 + 2, &m), kPFErrKeyError, "'t.ok' twice");
  assert_pf_error(PFModLoadFromDescriptors(t1 + 1, t1, &m), kPFErrValueError, "before");
  assert_pf_error(PFModLoadFromDescriptors(NULL, t1, &m), kPFErrTypeError, "'begin'");
  assert_pf_error(PFModLoadFromDescriptors(t1, t1 + 1, NULL), kPFErrTypeError, "'out'");
  assert_null(m);

  /* Both NULL: an empty module. */
  assert_pf_ok(PFModLoadFromDescriptors(NULL, NULL, &m));
  int n = -1;
  const char** names = NULL;
  assert_pf_ok(PFModListFunctionNames(m, &n, &names));
  assert_int_equal(n, 0);
  assert_pf_ok(PFModExportGlobal(m, "empty.", 0));
  PFModFree(m);

  /* A table on the stack is copied: it may go away after loading. */
  {
    char name[16];
    snprintf(name, sizeof(name), "t.%s", "stack");
    PFFuncDescriptor d = {
        PF_FUNC_DESCRIPTOR_ABI, kPFFuncDescriptorPacked, name, self_answer, NULL, NULL, "doc"};
    const PFFuncDescriptor* t[] = {&d};
    assert_pf_ok(PFModLoadFromDescriptors(t, t + 1, &m));
    memset(name, 'x', sizeof(name) - 1);
  }
  PFFunctionHandle f = get(m, "t.stack", 0);
  assert_non_null(f);
  PFFuncFree(f);
  PFModFree(m);
}

/* ---- the demo plugin (examples/plugin) ---- */

static int call1(PFFunctionHandle f, int n, PFValue* a, int* c, PFValue* r, int* rc) {
  return PFFuncCall(f, a, c, n, r, rc);
}

/* cmp(a, b) for demo.sort: descending order. */
static int descending(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  assert_int_equal(n, 2);
  int64_t d;
  if (codes[0] == kPFInt)
    d = args[1].v_int64 > args[0].v_int64 ? 1 : args[1].v_int64 < args[0].v_int64 ? -1 : 0;
  else
    d = args[1].v_float64 > args[0].v_float64 ? 1 : args[1].v_float64 < args[0].v_float64 ? -1 : 0;
  PFValue v = {.v_int64 = d};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

static int failing_cmp(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)args, (void)codes, (void)n, (void)ret, (void)res;
  return PFErrorSetFormat(kPFErrIndexError, "comparator gave up");
}

static int square(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)codes, (void)n, (void)res;
  PFValue v = {.v_int64 = args[0].v_int64 * args[0].v_int64};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

/* ---- modules of functions made at run time ---- */

static int second_arg(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res);

static int finalized_count;
static void count_fin(void* res) {
  (void)res;
  ++finalized_count;
}

static PFFunctionHandle named(const char* name, PFPackedCFunc fn) {
  PFFunctionHandle f = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(fn, NULL, count_fin, &f));
  if (name) assert_pf_ok(PFFuncSetInfo(f, name, NULL, "made at run time"));
  return f;
}

static void test_module_from_functions(void** state) {
  (void)state;
  finalized_count = 0;
  PFFunctionHandle fs[3] = {named("rt.b", self_answer), named("rt.a", second_arg),
                            named("rt.c", self_answer)};
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModCreateFromFunctions("runtime-made", fs, 3, &m));
  /* The module holds its own references: the caller's may go first. */
  for (int i = 0; i < 3; ++i) PFFuncFree(fs[i]);
  assert_int_equal(finalized_count, 0);
  int n = 0;
  const char** names = NULL;
  assert_pf_ok(PFModListFunctionNames(m, &n, &names));
  assert_int_equal(n, 3);
  assert_string_equal(names[0], "rt.a");
  assert_string_equal(names[2], "rt.c");
  PFFunctionHandle b = get(m, "rt.b", 0);
  PFValue r;
  int rc;
  assert_pf_ok(PFFuncCall(b, NULL, NULL, 0, &r, &rc));
  assert_int_equal(r.v_int64, 42);
  PFFuncFree(b);
  assert_pf_ok(PFModExportGlobal(m, "rtmod.", 0));
  assert_pf_ok(PFFuncGetGlobal("rtmod.rt.c", &b));
  PFFuncFree(b);
  for (int i = 0; i < 3; ++i) {
    char name[32];
    snprintf(name, sizeof(name), "rtmod.rt.%c", 'a' + i);
    assert_pf_ok(PFFuncRemoveGlobal(name));
  }
  PFModFree(m);
  assert_int_equal(finalized_count, 3);

  /* Empty; a bad count, array, handle or name; a name twice. */
  assert_pf_ok(PFModCreateFromFunctions(NULL, NULL, 0, &m));
  assert_pf_ok(PFModListFunctionNames(m, &n, &names));
  assert_int_equal(n, 0);
  PFModFree(m);
  m = NULL;
  finalized_count = 0;
  PFFunctionHandle ok = named("rt.ok", self_answer), anon = named(NULL, self_answer),
                   twin = named("rt.ok", second_arg);
  PFFunctionHandle t1[2] = {ok, anon}, t2[2] = {ok, twin}, t3[2] = {ok, (PFFunctionHandle)&n};
  assert_pf_error(PFModCreateFromFunctions(NULL, t1, -1, &m), kPFErrValueError,
                  "'num_funcs' is negative");
  assert_pf_error(PFModCreateFromFunctions(NULL, NULL, 1, &m), kPFErrTypeError, "'funcs'");
  assert_pf_error(PFModCreateFromFunctions(NULL, t1, 1, NULL), kPFErrTypeError, "'out'");
  assert_pf_error(PFModCreateFromFunctions(NULL, t1, 2, &m), kPFErrValueError, "'funcs[1]'",
                  "has no name");
  assert_pf_error(PFModCreateFromFunctions("twins", t2, 2, &m), kPFErrKeyError, "twins",
                  "two functions named 'rt.ok'");
  assert_pf_error(PFModCreateFromFunctions(NULL, t3, 2, &m), kPFErrTypeError, "'funcs[1]'",
                  "not a live function");
  assert_null(m);
  /* A failed call kept nothing: the caller's references are the last. */
  assert_int_equal(finalized_count, 0);
  PFFuncFree(ok);
  PFFuncFree(anon);
  PFFuncFree(twin);
  assert_int_equal(finalized_count, 3);
}

/* ---- descriptors with a pre-pack hook (layout version 2) ---- */

/* Passes on its second argument, so a test sees what a bound function
 * passes at position 1. */
static int second_arg(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n < 2) return PFErrorSetFormat(kPFErrTypeError, "second_arg: needs 2 arguments");
  return PFCFuncSetReturn(ret, &args[1], &codes[1], 1);
}

/* Packs an int constant at position 1 into its double; leaves others. */
static int double_int(void* res, int position, PFValue value, int code,
                      const PFAllocator* allocator, PFValue* out, int* out_code, int* is_packed) {
  (void)res, (void)allocator;
  *is_packed = position == 1 && code == kPFInt;
  if (*is_packed) {
    out->v_int64 = 2 * value.v_int64;
    *out_code = kPFInt;
  }
  return 0;
}

static void test_descriptor_prepack(void** state) {
  (void)state;
  static const PFFuncDescriptor hooked = {PF_FUNC_DESCRIPTOR_ABI,
                                          kPFFuncDescriptorPacked,
                                          "t.hooked",
                                          second_arg,
                                          NULL,
                                          NULL,
                                          NULL,
                                          "t/doubled",
                                          double_int};
  static const PFFuncDescriptor plain = {PF_FUNC_DESCRIPTOR_ABI,
                                         kPFFuncDescriptorPacked,
                                         "t.plain",
                                         second_arg,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL,
                                         NULL};
  const PFFuncDescriptor* t[] = {&hooked, &plain};
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromDescriptors(t, t + 2, &m));
  int pos = 1;
  PFValue k = {.v_int64 = 21}, arg = {.v_int64 = 0}, r;
  int kc = kPFInt, ac = kPFInt, rc;
  const char* names[2] = {"t.hooked", "t.plain"};
  const int64_t want[2] = {42, 21}; /* only the hooked function packs */
  for (int i = 0; i < 2; ++i) {
    PFFunctionHandle f = get(m, names[i], 0), b = NULL;
    assert_pf_ok(PFFuncBind(f, 1, &pos, &k, &kc, NULL, &b));
    assert_pf_ok(PFFuncCall(b, &arg, &ac, 1, &r, &rc));
    assert_int_equal(rc, kPFInt);
    assert_int_equal(r.v_int64, want[i]);
    /* The hook is set once: a second one is refused as for any function. */
    if (i == 0)
      assert_pf_error(PFFuncSetPrePack(f, "t/other", double_int), kPFErrValueError,
                      "already has a pre-pack hook");
    PFFuncFree(b);
    PFFuncFree(f);
  }
  PFModFree(m);
  m = NULL;

  /* A format without a hook, a hook without a format, an empty format. */
  static const PFFuncDescriptor no_hook = {PF_FUNC_DESCRIPTOR_ABI,
                                           kPFFuncDescriptorPacked,
                                           "t.nohook",
                                           second_arg,
                                           NULL,
                                           NULL,
                                           NULL,
                                           "t/x",
                                           NULL};
  static const PFFuncDescriptor no_format = {PF_FUNC_DESCRIPTOR_ABI,
                                             kPFFuncDescriptorPacked,
                                             "t.noformat",
                                             second_arg,
                                             NULL,
                                             NULL,
                                             NULL,
                                             NULL,
                                             double_int};
  static const PFFuncDescriptor empty_format = {PF_FUNC_DESCRIPTOR_ABI,
                                                kPFFuncDescriptorPacked,
                                                "t.empty",
                                                second_arg,
                                                NULL,
                                                NULL,
                                                NULL,
                                                "",
                                                double_int};
  const PFFuncDescriptor* t1[] = {&no_hook};
  assert_pf_error(PFModLoadFromDescriptors(t1, t1 + 1, &m), kPFErrValueError, "t.nohook",
                  "pre-pack format but no hook");
  const PFFuncDescriptor* t2[] = {&no_format};
  assert_pf_error(PFModLoadFromDescriptors(t2, t2 + 1, &m), kPFErrValueError, "t.noformat",
                  "pre-pack hook but no format");
  const PFFuncDescriptor* t3[] = {&empty_format};
  assert_pf_error(PFModLoadFromDescriptors(t3, t3 + 1, &m), kPFErrValueError,
                  "'pack_format' is empty");
  assert_non_null(strstr(PFErrorGetTraceback(), "t.empty"));
  assert_null(m);
}

/* A module built against the first descriptor layout has no pre-pack
 * fields: loading reads its descriptors up to `doc` and no further. The
 * descriptor sits at the very end of a readable page, so a read past it
 * faults. */
typedef struct {
  uint32_t abi, kind;
  const char* name;
  PFPackedCFunc packed;
  void (*typed)(void);
  const char* signature;
  const char* doc;
} descriptor_v1;

static void test_descriptor_version_1(void** state) {
  (void)state;
  _Static_assert(sizeof(descriptor_v1) == offsetof(PFFuncDescriptor, pack_format),
                 "version 1 is a prefix of the descriptor");
  long page = sysconf(_SC_PAGESIZE);
  char* mem =
      mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(mem != MAP_FAILED);
  assert_int_equal(mprotect(mem + page, (size_t)page, PROT_NONE), 0);
  descriptor_v1* d = (descriptor_v1*)(void*)(mem + page - sizeof(descriptor_v1));
  *d = (descriptor_v1){1, kPFFuncDescriptorPacked, "t.v1", self_answer, NULL, NULL, "old"};
  const PFFuncDescriptor* t[] = {(const PFFuncDescriptor*)(void*)d};
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromDescriptors(t, t + 1, &m));
  PFFunctionHandle f = get(m, "t.v1", 0);
  PFValue r;
  int rc;
  assert_pf_ok(PFFuncCall(f, NULL, NULL, 0, &r, &rc));
  assert_int_equal(r.v_int64, 42);
  const char* doc = NULL;
  assert_pf_ok(PFFuncGetInfo(f, NULL, NULL, &doc));
  assert_string_equal(doc, "old");
  PFFuncFree(f);
  PFModFree(m);
  /* A version newer than this library's is refused, not misread. */
  d->abi = PF_FUNC_DESCRIPTOR_ABI + 1;
  assert_pf_error(PFModLoadFromDescriptors(t, t + 1, &m), kPFErrValueError, "ABI version",
                  "reads versions 1 to");
  munmap(mem, (size_t)page * 2);
}

static void test_load_prepack_pointer_into_data(void** state) {
  (void)state;
  child_load res;
  load_in_child(mod_path("mod_badprepack.so"), NULL, &res);
  assert_child_error(&res, kPFErrValueError, "mod_badprepack.so", "pre-pack function pointer",
                     "not in any loaded code");
  assert_false(is_loaded("mod_badprepack.so"));
}

static DLTensor make_tensor(void* data, int64_t* shape, int ndim, uint8_t code, uint8_t bits) {
  DLTensor t;
  memset(&t, 0, sizeof(t));
  t.data = data;
  t.device.device_type = kDLCPU;
  t.ndim = ndim;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  return t;
}

/* A tensor object over a copy of `n` floats shaped rows x (n / rows). */
static void free_managed(DLManagedTensor* m) { free(m); }

static PFObjectHandle float_matrix(const float* v, int64_t rows, int64_t cols) {
  DLManagedTensor* m =
      calloc(1, sizeof(*m) + sizeof(int64_t) * 2 + sizeof(float) * (size_t)(rows * cols));
  assert_non_null(m);
  int64_t* shape = (int64_t*)(void*)(m + 1);
  float* data = (float*)(void*)(shape + 2);
  shape[0] = rows;
  shape[1] = cols;
  memcpy(data, v, sizeof(float) * (size_t)(rows * cols));
  m->dl_tensor = (DLTensor){
      .data = data, .device = {kDLCPU, 0}, .ndim = 2, .dtype = {kDLFloat, 32, 1}, .shape = shape};
  m->deleter = free_managed;
  PFObjectHandle o = NULL;
  assert_pf_ok(PFTensorCreateFromDLPack(m, &o));
  return o;
}

/* demo.matmul: unbound, bound with and without a cache; the result is the
 * same, the cache holds one column-major copy. */
static void test_demo_matmul(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromFile(PF_TEST_DEMO_PLUGIN, &m));
  PFFunctionHandle mm = get(m, "demo.matmul", 0);
  float xv[6] = {1, 2, 3, 4, 5, 6};                    /* 2 x 3 */
  float wv[12] = {1, 0, 0, 1, 0, 1, 0, 1, 2, 0, 1, 1}; /* 3 x 4 */
  const float want[8] = {7, 2, 3, 6, 16, 5, 6, 15};
  int64_t xs[2] = {2, 3};
  DLTensor x = make_tensor(xv, xs, 2, kDLFloat, 32);
  PFObjectHandle w = float_matrix(wv, 3, 4);
  PFPrePackCacheHandle cache = NULL;
  assert_pf_ok(PFPrePackCacheCreate(&cache));
  PFFunctionHandle fns[4] = {mm, NULL, NULL, NULL};
  int pos = 1, wc = kPFObjectHandle;
  PFValue wval = {.v_handle = w};
  assert_pf_ok(PFFuncBind(mm, 1, &pos, &wval, &wc, NULL, &fns[1]));
  assert_pf_ok(PFFuncBind(mm, 1, &pos, &wval, &wc, cache, &fns[2]));
  assert_pf_ok(PFFuncBind(mm, 1, &pos, &wval, &wc, cache, &fns[3]));
  int64_t entries, bytes, hits;
  assert_pf_ok(PFPrePackCacheGetStats(cache, &entries, &bytes, &hits));
  assert_int_equal(entries, 1);
  assert_int_equal(bytes, 12 * sizeof(float));
  assert_int_equal(hits, 1);
  for (int i = 0; i < 4; ++i) {
    PFValue a[2] = {{.v_handle = &x}, {.v_handle = w}}, r;
    int c[2] = {kPFDLTensorHandle, kPFObjectHandle}, rc;
    assert_pf_ok(PFFuncCall(fns[i], a, c, i == 0 ? 2 : 1, &r, &rc));
    assert_int_equal(rc, kPFObjectHandle);
    DLTensor* y = NULL;
    assert_pf_ok(PFTensorGetDLTensor(r.v_handle, &y));
    assert_int_equal(y->shape[0], 2);
    assert_int_equal(y->shape[1], 4);
    for (int j = 0; j < 8; ++j) assert_true(((float*)y->data)[j] == want[j]);
    PFObjectFree(r.v_handle);
  }
  /* The weight may go: the bound functions keep what they need. */
  PFObjectFree(w);
  for (int i = 1; i < 4; ++i) PFFuncFree(fns[i]);
  assert_pf_ok(PFPrePackCacheGetStats(cache, &entries, &bytes, NULL));
  assert_int_equal(entries, 0);
  assert_int_equal(bytes, 0);

  /* Errors: a weight the hook cannot pack fails the bind; mismatched
   * shapes and non-tensors fail the call, naming the argument. */
  double dv[4] = {0};
  int64_t ds[2] = {2, 2};
  DLTensor d = make_tensor(dv, ds, 2, kDLFloat, 64);
  PFValue a[2] = {{.v_handle = &x}, {.v_handle = &d}}, r;
  int c[2] = {kPFDLTensorHandle, kPFDLTensorHandle}, rc;
  assert_pf_error(PFFuncCall(mm, a, c, 2, &r, &rc), kPFErrValueError, "argument 1 (w)",
                  "2-D float32 CPU tensor", "float64");
  float bad[4] = {0};
  PFObjectHandle wrong = float_matrix(bad, 2, 2);
  PFFunctionHandle b = NULL;
  wval.v_handle = wrong;
  assert_pf_ok(PFFuncBind(mm, 1, &pos, &wval, &wc, cache, &b));
  a[0].v_handle = &x;
  c[0] = kPFDLTensorHandle;
  assert_pf_error(PFFuncCall(b, a, c, 1, &r, &rc), kPFErrValueError, "x is 2 x 3 and w is 2 x 2");
  PFFuncFree(b);
  PFObjectFree(wrong);
  /* Zero strides let a small tensor claim any shape: a copy of one that
   * large is refused, not sized with an overflow. */
  float zero = 0;
  int64_t wide[2] = {2, INT64_C(1) << 62}, tall[2] = {INT64_C(1) << 62, 2}, none[2] = {0, 0};
  DLTensor xw = make_tensor(&zero, wide, 2, kDLFloat, 32);
  DLTensor wt = make_tensor(&zero, tall, 2, kDLFloat, 32);
  xw.strides = none;
  wt.strides = none;
  a[0].v_handle = &xw;
  a[1].v_handle = &wt;
  c[1] = kPFDLTensorHandle;
  assert_pf_error(PFFuncCall(mm, a, c, 2, &r, &rc), kPFErrValueError, "demo.matmul",
                  "matrix is too large");
  a[0].v_handle = &x;
  a[1].v_int64 = 3;
  c[1] = kPFInt;
  assert_pf_error(PFFuncCall(mm, a, c, 2, &r, &rc), kPFErrTypeError, "argument 1 (w)",
                  "must be a tensor, got int");
  assert_pf_error(PFFuncCall(mm, a, c, 1, &r, &rc), kPFErrTypeError, "expected 2 arguments");
  PFObjectFree(cache);
  PFFuncFree(mm);
  PFModFree(m);
}

static void test_demo_plugin(void** state) {
  (void)state;
  PFModuleHandle m = NULL;
  assert_pf_ok(PFModLoadFromFile(PF_TEST_DEMO_PLUGIN, &m));
  PFValue a[2], r;
  int c[2], rc;

  /* demo.sort: int64 and float64, through a C function pointer. */
  PFFunctionHandle sort = get(m, "demo.sort", 0), cmp, bad;
  assert_pf_ok(PFFuncCreateFromCFunc(descending, NULL, NULL, &cmp));
  assert_pf_ok(PFFuncCreateFromCFunc(failing_cmp, NULL, NULL, &bad));
  int64_t iv[6] = {3, 1, 4, 1, 5, 9};
  int64_t shape[2] = {2, 3};
  DLTensor t = make_tensor(iv, shape, 2, kDLInt, 64);
  a[0].v_handle = &t;
  c[0] = kPFDLTensorHandle;
  a[1].v_handle = cmp;
  c[1] = kPFFuncHandle;
  assert_pf_ok(call1(sort, 2, a, c, &r, &rc));
  const int64_t want[6] = {9, 5, 4, 3, 1, 1};
  for (int i = 0; i < 6; ++i) assert_int_equal(iv[i], want[i]);
  double dv[3] = {0.5, -2, 7.25};
  int64_t n3 = 3;
  DLTensor td = make_tensor(dv, &n3, 1, kDLFloat, 64);
  a[0].v_handle = &td;
  assert_pf_ok(call1(sort, 2, a, c, &r, &rc));
  assert_true(dv[0] == 7.25 && dv[1] == 0.5 && dv[2] == -2);
  /* A failing comparator is reported with its own kind. */
  a[1].v_handle = bad;
  assert_pf_error(call1(sort, 2, a, c, &r, &rc), kPFErrIndexError, "comparator gave up");
  /* Unsupported dtype. */
  int32_t i32[2] = {2, 1};
  int64_t n2 = 2;
  DLTensor t32 = make_tensor(i32, &n2, 1, kDLInt, 32);
  a[0].v_handle = &t32;
  a[1].v_handle = cmp;
  assert_pf_error(call1(sort, 2, a, c, &r, &rc), kPFErrTypeError, "demo.sort", "int32");
  PFFuncFree(sort);
  PFFuncFree(bad);

  /* demo.fill on four dtypes; strided tensors are refused. */
  PFFunctionHandle fill = get(m, "demo.fill", 0);
  float f32[4];
  int64_t n4 = 4;
  DLTensor tf = make_tensor(f32, &n4, 1, kDLFloat, 32);
  a[0].v_handle = &tf;
  c[0] = kPFDLTensorHandle;
  a[1].v_float64 = 1.5;
  c[1] = kPFFloat;
  assert_pf_ok(call1(fill, 2, a, c, &r, &rc));
  for (int i = 0; i < 4; ++i) assert_true(f32[i] == 1.5f);
  a[0].v_handle = &t32;
  a[1].v_int64 = -3;
  c[1] = kPFInt;
  assert_pf_ok(call1(fill, 2, a, c, &r, &rc));
  assert_int_equal(i32[0], -3);
  assert_int_equal(i32[1], -3);
  a[1].v_int64 = INT64_C(1) << 40;
  assert_pf_error(call1(fill, 2, a, c, &r, &rc), kPFErrValueError, "does not fit int32");
  a[1].v_float64 = 0.5;
  c[1] = kPFFloat;
  assert_pf_error(call1(fill, 2, a, c, &r, &rc), kPFErrValueError, "not an integer");
  a[0].v_handle = &t;
  a[1].v_int64 = 7;
  c[1] = kPFInt;
  assert_pf_ok(call1(fill, 2, a, c, &r, &rc));
  assert_int_equal(iv[5], 7);
  a[0].v_handle = &td;
  assert_pf_ok(call1(fill, 2, a, c, &r, &rc));
  assert_true(dv[2] == 7.0);
  int64_t strides[1] = {2};
  DLTensor ts = make_tensor(dv, &n2, 1, kDLFloat, 64);
  ts.strides = strides;
  a[0].v_handle = &ts;
  assert_pf_error(call1(fill, 2, a, c, &r, &rc), kPFErrValueError, "contiguous");
  DLTensor tu = make_tensor(dv, &n2, 1, kDLUInt, 8);
  a[0].v_handle = &tu;
  assert_pf_error(call1(fill, 2, a, c, &r, &rc), kPFErrTypeError, "uint8");
  c[0] = kPFInt;
  assert_pf_error(call1(fill, 2, a, c, &r, &rc), kPFErrTypeError, "expected (tensor, number)");
  PFFuncFree(fill);

  /* demo.call_n_times sums the callback's results. */
  PFFunctionHandle times = get(m, "demo.call_n_times", 0), sq;
  assert_pf_ok(PFFuncCreateFromCFunc(square, NULL, NULL, &sq));
  a[0].v_handle = sq;
  c[0] = kPFFuncHandle;
  a[1].v_int64 = 1000;
  c[1] = kPFInt;
  assert_pf_ok(call1(times, 2, a, c, &r, &rc));
  assert_int_equal(r.v_int64, INT64_C(332833500)); /* sum of i^2, i < 1000 */
  a[1].v_int64 = -1;
  assert_pf_error(call1(times, 2, a, c, &r, &rc), kPFErrValueError, "must be >= 0");
  a[0].v_handle = bad = NULL;
  assert_pf_ok(PFFuncCreateFromCFunc(failing_cmp, NULL, NULL, &bad));
  a[0].v_handle = bad;
  a[1].v_int64 = 3;
  assert_pf_error(call1(times, 2, a, c, &r, &rc), kPFErrIndexError, "comparator gave up");
  assert_non_null(strstr(PFErrorGetTraceback(), "demo.call_n_times"));
  PFFuncFree(bad);
  PFFuncFree(sq);
  PFFuncFree(times);
  PFFuncFree(cmp);

  /* Strings, bytes and the failing function. */
  PFFunctionHandle rev = get(m, "demo.reverse", 0);
  PFByteArray ba = {"a\0b", 3};
  a[0].v_handle = &ba;
  c[0] = kPFBytes;
  assert_pf_ok(call1(rev, 1, a, c, &r, &rc));
  assert_int_equal(rc, kPFBytes);
  const PFByteArray* out = r.v_handle;
  assert_int_equal(out->size, 3);
  assert_memory_equal(out->data, "b\0a", 3);
  PFFuncFree(rev);
  PFFunctionHandle fail = get(m, "demo.fail", 0);
  assert_pf_error(call1(fail, 0, a, c, &r, &rc), kPFErrValueError, "demo.fail was called");
  PFFuncFree(fail);
  PFModFree(m);
}

static void test_api_table(void** state) {
  (void)state;
  const PFApi* api = PFGetApiBase()->GetApi(PF_API_VERSION);
  assert_non_null(api);
  assert_ptr_equal(api->ModLoadFromFile, PFModLoadFromFile);
  assert_ptr_equal(api->ModGetFunction, PFModGetFunction);
  assert_ptr_equal(api->ModImport, PFModImport);
  assert_ptr_equal(api->ModListFunctionNames, PFModListFunctionNames);
  assert_ptr_equal(api->ModExportGlobal, PFModExportGlobal);
  assert_ptr_equal(api->ModFree, PFModFree);
  assert_ptr_equal(api->ModLoadFromDescriptors, PFModLoadFromDescriptors);
}

/* A module written in C++17 registers with the same macros: a packed
 * function, one with a signature as metadata, typed functions with named
 * parameters and defaults (one a static member function), an object type
 * with a constructor and a method; each called here from C. A C file of
 * the same library registers too, into the same table. */
static void test_cxx_module(void** state) {
  (void)state;
  PFModuleHandle m = load("mod_cxx.so");
  int n = 0;
  const char** names = NULL;
  assert_pf_ok(PFModListFunctionNames(m, &n, &names));
  assert_int_equal(n, 6);
  assert_string_equal(names[0], "cxx.c_half"); /* from the library's C file */
  assert_string_equal(names[1], "cxx.clamp");
  assert_string_equal(names[2], "cxx.scale");
  assert_string_equal(names[3], "cxx.sum");
  assert_string_equal(names[4], "cxx.sum2");
  assert_string_equal(names[5],
                      "cxx.total"); /* its tensor's constraint: tests/python/test_cxx.py */
  /* packed */
  PFFunctionHandle sum = get(m, "cxx.sum", 0);
  assert_int_equal(call_ii(sum, 40, 2), 42);
  const char* doc = NULL;
  assert_pf_ok(PFFuncGetInfo(sum, NULL, NULL, &doc));
  assert_string_equal(doc, "Sums ints.");
  PFFuncFree(sum);
  /* packed, with a signature as metadata: its default fills a keyword call */
  PFFunctionHandle sum2 = get(m, "cxx.sum2", 0);
  PFValue a = {.v_int64 = 2}, rv;
  int c = kPFInt, rc;
  assert_pf_ok(PFFuncCallKw(sum2, &a, &c, 1, NULL, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rv.v_int64, 42);
  PFFuncFree(sum2);
  /* typed, named, with defaults */
  PFFunctionHandle clamp = get(m, "cxx.clamp", 0);
  const char* sig = NULL;
  assert_pf_ok(PFFuncGetInfo(clamp, NULL, &sig, &doc));
  assert_string_equal(sig, "float64(x:float64,lo:float64=0.0,hi:float64=1.0)");
  assert_string_equal(doc, "Clamps x.");
  PFValue x = {.v_float64 = 7.5}, kw = {.v_float64 = 5};
  int xc = kPFFloat;
  const char* hi = "hi";
  assert_pf_ok(PFFuncCallKw(clamp, &x, &xc, 1, &hi, &kw, &xc, 1, &rv, &rc));
  assert_true(rv.v_float64 == 5);
  PFFuncFree(clamp);
  PFFunctionHandle scale = get(m, "cxx.scale", 0);
  a.v_int64 = 21;
  assert_pf_ok(PFFuncCallKw(scale, &a, &c, 1, NULL, NULL, NULL, 0, &rv, &rc));
  assert_int_equal(rv.v_int64, 42);
  PFFuncFree(scale);
  PFFunctionHandle half = get(m, "cxx.c_half", 0);
  a.v_int64 = 84;
  assert_pf_ok(PFFuncCall(half, &a, &c, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 42);
  PFFuncFree(half);
  /* the object type */
  int nt = 0;
  const uint32_t* types = NULL;
  assert_pf_ok(PFModListTypes(m, &nt, &types));
  assert_int_equal(nt, 1);
  assert_string_equal(PFObjectTypeName(types[0]), "cxx.Counter");
  PFFunctionHandle ctor = NULL;
  assert_pf_ok(PFObjectTypeGetConstructor(types[0], &ctor));
  assert_pf_ok(PFFuncGetInfo(ctor, NULL, &sig, NULL));
  assert_string_equal(sig, "obj<cxx.Counter>(start:int64=0)");
  a.v_int64 = 40;
  assert_pf_ok(PFFuncCall(ctor, &a, &c, 1, &rv, &rc));
  PFObjectHandle obj = rv.v_handle;
  PFFunctionHandle add = NULL;
  assert_pf_ok(PFObjectGetMethod(obj, "add", &add));
  const char* by = "by";
  a.v_int64 = 2;
  assert_pf_ok(PFFuncCallKw(add, NULL, NULL, 0, &by, &a, &c, 1, &rv, &rc));
  assert_int_equal(rv.v_int64, 42);
  PFFuncFree(add);
  PFObjectFree(obj);
  PFFuncFree(ctor);
  PFModFree(m);
}

int main(int argc, char** argv) {
  /* The child half of load_in_child, run again with LD_LIBRARY_PATH. */
  if (argc == 3 && strcmp(argv[1], "--load") == 0) {
    report_load(argv[2], STDOUT_FILENO);
    return 0;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_load_and_call),
      cmocka_unit_test(test_metadata),
      cmocka_unit_test(test_str_function),
      cmocka_unit_test(test_one_runtime_instance),
      cmocka_unit_test(test_function_outlives_module),
      cmocka_unit_test(test_exported_function_outlives_module),
      cmocka_unit_test(test_load_twice),
      cmocka_unit_test(test_module_from_two_files),
      cmocka_unit_test(test_load_bad_path),
      cmocka_unit_test(test_load_not_a_module),
      cmocka_unit_test(test_load_duplicate_name),
      cmocka_unit_test(test_load_bad_signature),
      cmocka_unit_test(test_load_checked_against_a_stale_header),
      cmocka_unit_test(test_load_checked_method_against_a_stale_header),
      cmocka_unit_test(test_load_truncated_file),
      cmocka_unit_test(test_load_fifo),
      cmocka_unit_test(test_load_bare_name_is_checked),
      cmocka_unit_test(test_load_bare_name_in_working_directory),
      cmocka_unit_test(test_load_junk_descriptor_pointer),
      cmocka_unit_test(test_load_descriptor_string_outside_library),
      cmocka_unit_test(test_load_function_pointer_into_data),
      cmocka_unit_test(test_tensor_from_module_outlives_it),
      cmocka_unit_test(test_function_from_module_outlives_it),
      cmocka_unit_test(test_typed_function_from_module_outlives_it),
      cmocka_unit_test(test_boxed_from_module_outlives_it),
      cmocka_unit_test(test_library_goes_with_the_last_object),
      cmocka_unit_test(test_bad_handles),
      cmocka_unit_test(test_imports),
      cmocka_unit_test(test_export_prefix),
      cmocka_unit_test(test_export_conflict_registers_nothing),
      cmocka_unit_test(test_export_rollback_after_partial_register),
      cmocka_unit_test(test_load_self),
      cmocka_unit_test(test_descriptor_errors),
      cmocka_unit_test(test_descriptor_prepack),
      cmocka_unit_test(test_module_from_functions),
      cmocka_unit_test(test_descriptor_version_1),
      cmocka_unit_test(test_load_prepack_pointer_into_data),
      cmocka_unit_test(test_demo_plugin),
      cmocka_unit_test(test_demo_matmul),
      cmocka_unit_test(test_cxx_module),
      cmocka_unit_test(test_api_table),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
