/* The pf command: runs the built binary (PF_TEST_CLI, an ASan build; and
 * PF_TEST_CLI_REL, the shipped one) and checks its stdout, stderr and exit
 * status for every command, the argument parser, and the error paths. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PF_TEST_CLI
#error "the Makefile passes PF_TEST_CLI, PF_TEST_CLI_REL, PF_TEST_MODULE_DIR, PF_TEST_DEMO_PLUGIN"
#endif

#define DEMO PF_TEST_DEMO_PLUGIN
#define MODS PF_TEST_MODULE_DIR

typedef struct {
  int status; /* exit status, or 128 + signal */
  char out[16384];
  char err[16384];
} run_result;

static void slurp(FILE* f, char* buf, size_t cap) {
  rewind(f);
  size_t n = fread(buf, 1, cap - 1, f);
  buf[n] = '\0';
}

/* Runs `bin` with the NULL-terminated argument list (argv[0] included). */
static void run_argv(run_result* r, const char* bin, char* const* argv) {
  FILE* out = tmpfile();
  FILE* err = tmpfile();
  assert_non_null(out);
  assert_non_null(err);
  fflush(NULL);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    dup2(fileno(out), 1);
    dup2(fileno(err), 2);
    execv(bin, argv);
    _exit(127);
  }
  int ws = 0;
  assert_int_equal(waitpid(pid, &ws, 0), pid);
  r->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
  slurp(out, r->out, sizeof(r->out));
  slurp(err, r->err, sizeof(r->err));
  fclose(out);
  fclose(err);
}

/* run(&r, "list", "demo.", NULL): runs the ASan pf. */
static void run(run_result* r, ...) {
  char* argv[64];
  int n = 0;
  argv[n++] = (char*)"pf";
  va_list ap;
  va_start(ap, r);
  for (char* a; (a = va_arg(ap, char*)) != NULL && n < 63;) argv[n++] = a;
  va_end(ap);
  argv[n] = NULL;
  run_argv(r, PF_TEST_CLI, argv);
}

static void expect(const run_result* r, int status, const char* out, const char* err) {
  if (r->status != status) print_error("stdout: %s\nstderr: %s\n", r->out, r->err);
  assert_int_equal(r->status, status);
  if (out) assert_string_equal(r->out, out);
  if (err) assert_string_equal(r->err, err);
}

static void test_help(void** state) {
  (void)state;
  run_result r;
  run(&r, "--help", NULL);
  expect(&r, 0, NULL, "");
  assert_non_null(strstr(r.out, "usage: pf [OPTIONS] COMMAND"));
  assert_non_null(strstr(r.out, "--load LIB.so"));
  assert_non_null(strstr(r.out, "describe NAME"));
  run_result r2;
  run(&r2, "-h", NULL);
  assert_string_equal(r2.out, r.out);
  run(&r2, "help", NULL);
  assert_string_equal(r2.out, r.out);
  run(&r2, "--version", NULL);
  expect(&r2, 0, NULL, "");
  assert_non_null(strstr(r2.out, "packedfunc"));
}

static void test_list(void** state) {
  (void)state;
  run_result r;
  run(&r, "--load", DEMO, "list", "demo.", NULL);
  expect(&r, 0,
         "demo.add\ndemo.call_n_times\ndemo.fail\ndemo.fill\ndemo.greet\ndemo.hypot\n"
         "demo.matmul\ndemo.reverse\ndemo.sort\n",
         "");
  run(&r, "--load=" DEMO, "list", "demo.h", NULL);
  expect(&r, 0, "demo.hypot\n", "");
  run(&r, "list", NULL); /* nothing loaded: an empty registry */
  expect(&r, 0, "", "");
  /* Several modules, with prefixes for the ones after --prefix. */
  run(&r, "--load", MODS "/mod_multi.so", "--prefix", "o.", "--load", MODS "/mod_other.so", "list",
      NULL);
  expect(&r, 0, "multi.one\nmulti.three\nmulti.two\no.add\no.neg\n", "");
}

static void test_describe(void** state) {
  (void)state;
  run_result r;
  run(&r, "--load", DEMO, "describe", "demo.add", NULL);
  expect(&r, 0, "name: demo.add\nsignature: int64(a:int64,b:int64)\ndoc: Adds two integers.\n", "");
  run(&r, "--load", MODS "/mod_multi.so", "describe", "multi.two", NULL);
  expect(&r, 0, "name: multi.two\nsignature: int64()\ndoc: (none)\n", "");
  run(&r, "--load", MODS "/mod_multi.so", "describe", "multi.one", NULL);
  expect(&r, 0, "name: multi.one\nsignature: (packed: any arguments)\ndoc: Returns 1.\n", "");
  run(&r, "--prefix", "p.", "--load", MODS "/mod_other.so", "describe", "p.neg", NULL);
  expect(&r, 0, "name: p.neg\ndefined as: neg\nsignature: int64(int64)\ndoc: Negates.\n", "");
  run(&r, "describe", "no.such", NULL);
  expect(&r, 1, "", "pf: KeyError: no function or object type named 'no.such' is registered\n");
  /* A function registered non-blocking says so (PF_REGISTER_FLAGS,
   * PF_NONBLOCKING); one without the flag prints no such line. */
  run(&r, "--load", MODS "/mod_nonblocking.so", "describe", "nb.flagged", NULL);
  expect(&r, 0, "name: nb.flagged\nsignature: int32()\nflags: non-blocking\ndoc: (none)\n", "");
  run(&r, "--load", MODS "/mod_nonblocking.so", "describe", "nb.released", NULL);
  expect(&r, 0, "name: nb.released\nsignature: int32()\ndoc: (none)\n", "");
}

/* Element types, optional and union show in describe, and a call checks
 * the elements of the JSON it is given. */
static void test_element_types(void** state) {
  (void)state;
  run_result r;
  run(&r, "--load", MODS "/mod_elements.so", "describe", "elements.count", NULL);
  expect(&r, 0,
         "name: elements.count\nsignature: int64(m:map<str,list<float64>>,tag:optional<str>=null)"
         "\ndoc: Counts the keys.\n",
         "");
  run(&r, "--load", MODS "/mod_elements.so", "call", "elements.total", "[1, 2, 3]", NULL);
  expect(&r, 0, "6\n", "");
  run(&r, "--load", MODS "/mod_elements.so", "call", "elements.count", "{\"a\": [1, 2.5]}", NULL);
  expect(&r, 0, "1\n", "");
  run(&r, "--load", MODS "/mod_elements.so", "call", "elements.total", "[1, \"x\"]", NULL);
  expect(&r, 1, "",
         "pf: TypeError: typed function 'elements.total' int64(xs:array<int64>): argument 0 "
         "'xs', element 1: expected int64, got str\n");
}

/* describe KEY of an object type: its parent, doc, fields and methods, the
 * inherited ones marked (examples/plugin/counter.c). */
static void test_describe_type(void** state) {
  (void)state;
  run_result r;
  run(&r, "--load", DEMO, "describe", "demo.Counter", NULL);
  expect(&r, 0,
         "type: demo.Counter\n"
         "parent: demo.Base\n"
         "doc: A Base that counts.\n"
         "fields:\n"
         "  name: str, read-only (from demo.Base)\n"
         "    The name given to the constructor.\n"
         "  id: int64, read-only (from demo.Base)\n"
         "    A number no other Base has.\n"
         "  count: int64, writable\n"
         "    The count so far.\n"
         "  step: int64, writable\n"
         "    What increment() adds.\n"
         "  tag: object, writable\n"
         "    Anything attached to it.\n"
         "methods:\n"
         "  __init__: void(self:obj<demo.Counter>,name:str,start:int64)\n"
         "    Makes a Counter named NAME that starts at START.\n"
         "  describe: str(self:obj<demo.Counter>)\n"
         "    Says what it is.\n"
         "  increment: int64(self:obj<demo.Counter>)\n"
         "    Adds step to the count and returns it.\n"
         "  add: int64(self:obj<demo.Counter>,n:int64)\n"
         "    Adds N steps and returns the count.\n"
         "  reset: (packed: any arguments)\n"
         "    Sets the count to its argument (default 0).\n"
         "  max_step: int64() (static)\n"
         "    The largest sensible step.\n",
         "");
  /* A type of inherited members only; one without a doc or methods. */
  run(&r, "--load", MODS "/mod_pyobj.so", "describe", "pyt.BoundSub", NULL);
  expect(&r, 0,
         "type: pyt.BoundSub\nparent: pyt.Bound\ndoc: (none)\nfields:\n"
         "  n: int64, writable (from pyt.Bound)\nmethods:\n"
         "  get: int64(obj<pyt.Bound>) (from pyt.Bound)\n    n.\n",
         "");
  run(&r, "--load", MODS "/mod_pyobj.so", "describe", "pyt.Holder", NULL);
  expect(&r, 0, NULL, "");
  assert_non_null(strstr(r.out, "type: pyt.Holder\nparent: (none)\ndoc: (none)\nfields:\n"));
  assert_non_null(strstr(r.out, "  shp: shape, writable\nmethods: (none)\n"));
  run(&r, "--load", MODS "/mod_types.so", "describe", "mt.Thing", NULL);
  expect(&r, 0, NULL, "");
  assert_non_null(strstr(r.out, "type: mt.Thing\nparent: (none)\ndoc: A thing.\n"));
  assert_non_null(strstr(r.out, "  note: str, writable\nmethods:\n"));
  /* A function of the key's name would come first; a type is found only
   * once its module is loaded. */
  run(&r, "describe", "demo.Counter", NULL);
  expect(&r, 1, "",
         "pf: KeyError: no function or object type named 'demo.Counter' is registered\n");
}

/* list --types [PREFIX]: the registered object types' keys, sorted. */
static void test_list_types(void** state) {
  (void)state;
  run_result r;
  run(&r, "--load", DEMO, "--load", MODS "/mod_types.so", "list", "--types", NULL);
  expect(&r, 0, "demo.Base\ndemo.Counter\nmt.Thing\n", "");
  run(&r, "--load", DEMO, "--load", MODS "/mod_types.so", "list", "demo.C", "--types", NULL);
  expect(&r, 0, "demo.Counter\n", "");
  run(&r, "list", "--types", NULL); /* nothing loaded: none */
  expect(&r, 0, "", "");
  run(&r, "--load", DEMO, "list", "--types", "a", "b", NULL);
  expect(&r, 2, "",
         "pf: list takes at most one PREFIX\nTry 'pf list --help' for more information.\n");
  /* Types are this process's: with --connect it refuses at once, before
   * connecting. */
  run(&r, "--connect", "tcp://127.0.0.1:1", "list", "--types", NULL);
  expect(&r, 2, "",
         "pf: list --types lists the object types of this process: it does not take "
         "--connect\nTry 'pf list --help' for more information.\n");
}

static void test_call_values(void** state) {
  (void)state;
  run_result r;
  run(&r, "--load", DEMO, "call", "demo.add", "40", "2", NULL);
  expect(&r, 0, "42\n", "");
  run(&r, "--load", DEMO, "call", "demo.add", "0x10", "-0x1", NULL);
  expect(&r, 0, "15\n", "");
  run(&r, "--load", DEMO, "call", "demo.add", "-9223372036854775808", "0", NULL);
  expect(&r, 0, "-9223372036854775808\n", "");
  /* Typed float64 parameters take ints as floats; results print exactly. */
  run(&r, "--load", DEMO, "call", "demo.hypot", "3", "4", NULL);
  expect(&r, 0, "5.0\n", "");
  run(&r, "--load", DEMO, "call", "demo.hypot", "0.1", "0", NULL);
  expect(&r, 0, "0.1\n", "");
  run(&r, "--load", DEMO, "call", "demo.hypot", "1", "1", NULL);
  expect(&r, 0, "1.4142135623730951\n", "");
  run(&r, "--load", DEMO, "call", "demo.hypot", "inf", "1", NULL);
  expect(&r, 0, "inf\n", "");
  /* A str parameter keeps numeric-looking text as text. */
  run(&r, "--load", DEMO, "call", "demo.greet", "42", NULL);
  expect(&r, 0, "Hello, 42!\n", "");
  run(&r, "--load", DEMO, "call", "demo.greet", "true", NULL);
  expect(&r, 0, "Hello, true!\n", "");
  /* A packed function gets the generic parse: str stays str. */
  run(&r, "--load", DEMO, "call", "demo.reverse", "abc", NULL);
  expect(&r, 0, "cba\n", "");
  run(&r, "--load", DEMO, "call", "demo.reverse", "h\xc3\xa9llo", NULL);
  expect(&r, 0, "oll\xc3\xa9h\n", "");
  /* Generic parse gives an int where a packed function wanted a str. */
  run(&r, "--load", DEMO, "call", "demo.reverse", "12", NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, "pf: TypeError: demo.reverse: expected one str or bytes"));
  assert_non_null(strstr(r.err, "starting with int"));
}

/* mod_echo hands its argument back: what pf parsed is what it prints. */
static void test_call_generic_parse(void** state) {
  (void)state;
  static const struct {
    const char* fn;
    const char* arg;
    const char* printed;
  } cases[] = {
      {"echo", "42", "42\n"},
      {"echo", "-7", "-7\n"},
      {"echo", "0xff", "255\n"},
      {"echo", "007", "7\n"}, /* decimal, not octal */
      {"echo", "3.5", "3.5\n"},
      {"echo", "1e3", "1000.0\n"},
      {"echo", "-0.0", "-0.0\n"},
      {"echo", "nan", "nan\n"},
      {"echo", "-inf", "-inf\n"},
      {"echo", "true", "true\n"},
      {"echo", "false", "false\n"},
      {"echo", "null", "null\n"},
      {"echo", "hello world", "hello world\n"},
      {"echo", "0x", "0x\n"}, /* not a number: a str */
      {"echo", "1e", "1e\n"},
      {"echo", "", "\n"},
      {"echo", "True", "True\n"}, /* only lowercase is a bool */
      {"echo_bytes", "a'b\\c\n\x01", "b'a\\'b\\\\c\\n\\x01'\n"},
      {"echo_bytes", "123", "b'123'\n"},
      {"echo_float32", "0.1", "0.10000000149011612\n"},
      {"echo_float32", "2", "2.0\n"},
      {"echo_bool", "true", "true\n"},
      {"echo_bool", "0", "false\n"},
      {"echo_uint8", "255", "255\n"},
      {"make_fn", NULL, "<function made>\n"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    run_result r;
    run(&r, "--load", MODS "/mod_echo.so", "call", cases[i].fn, cases[i].arg, NULL);
    if (r.status != 0 || strcmp(r.out, cases[i].printed) != 0)
      print_error("pf call %s '%s'\n", cases[i].fn, cases[i].arg ? cases[i].arg : "");
    expect(&r, 0, cases[i].printed, "");
  }
  run_result r;
  run(&r, "--load", MODS "/mod_echo.so", "call", "echo", NULL);
  expect(&r, 0, "null\n", "");
  /* Typed conversions the function itself refuses. */
  run(&r, "--load", MODS "/mod_echo.so", "call", "echo_uint8", "256", NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, "pf: ValueError: "));
  run(&r, "--load", MODS "/mod_echo.so", "call", "echo_bool", "yes", NULL);
  expect(&r, 1, "",
         "pf: ValueError: argument 0 of 'echo_bool' must be a bool (true or false), got 'yes'\n");
  /* demo.fail raises ValueError with the message it is given. */
  run(&r, "--load", DEMO, "call", "demo.fail", "it broke", NULL);
  expect(&r, 1, "", "pf: ValueError: it broke\n");
}

/* JSON-style arguments become containers, and containers print back the
 * same way (mod_echo returns its argument). */
static void test_call_json_arguments(void** state) {
  (void)state;
  static const struct {
    const char* fn;
    const char* arg;
    const char* printed;
  } cases[] = {
      {"echo", "[1, [2.5, \"x\"], {\"k\": null}]", "[1, [2.5, \"x\"], {\"k\": null}]\n"},
      {"echo", "[]", "[]\n"},
      {"echo", "{}", "{}\n"},
      {"echo", "[ true ,false,null ] ", "[true, false, null]\n"},
      {"echo", " [1]", " [1]\n"}, /* JSON only when [ or { comes first */
      {"echo", "{\"lr\": 0.1, \"n\": -3, \"s\": \"a\\\"b\\\\c\\n\"}",
       "{\"lr\": 0.1, \"n\": -3, \"s\": \"a\\\"b\\\\c\\n\"}\n"},
      {"echo", "[\"\\u00e9\\ud83d\\ude00\"]", "[\"\xc3\xa9\xf0\x9f\x98\x80\"]\n"},
      {"echo", "{1: \"one\", -2: [3]}", "{1: \"one\", -2: [3]}\n"}, /* int keys */
      {"echo", "[1e3, -0.0, 9223372036854775807]", "[1000.0, -0.0, 9223372036854775807]\n"},
      {"shape_size", "[2, 3, 4]", "24\n"},
      {"shape_size", "[]", "1\n"},
      {"range", "3", "[0, 1, 2]\n"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    run_result r;
    run(&r, "--load", MODS "/mod_echo.so", "call", cases[i].fn, cases[i].arg, NULL);
    if (r.status != 0 || strcmp(r.out, cases[i].printed) != 0)
      print_error("pf call %s '%s'\n", cases[i].fn, cases[i].arg);
    expect(&r, 0, cases[i].printed, "");
  }
  static const struct {
    const char* fn;
    const char* arg;
    const char* err;
  } bad[] = {
      {"echo", "[1,", "expected a value, found the end at offset 3"},
      {"echo", "[1] x", "unexpected text after the value at offset 4"},
      {"echo", "{\"x\" 1}", "expected ':' after a key"},
      {"echo", "[01]", "a number with a leading zero"},
      {"echo", "[99999999999999999999]", "an integer outside the int64 range"},
      {"echo", "[1e999]", "a number outside the float64 range"},
      {"echo", "[\"\\u0000\"]", "a NUL character"},
      {"echo", "[\"\\ud800\"]", "a lone surrogate"},
      {"echo", "[nan]", "unexpected word"},
      {"echo", "{[1]: 2}", "expected a key (a string or an integer)"},
      {"echo", "{1.5: 2}", "a key that is neither a string nor an integer"},
      {"echo", "[\"a\tb\"]", "control character in a string"},
      {"shape_size", "[1, \"x\"]", "must be a shape, a list of integers; item 1 is not an integer"},
      {"shape_size", "7", "a shape is a list of integers"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    run_result r;
    run(&r, "--load", MODS "/mod_echo.so", "call", bad[i].fn, bad[i].arg, NULL);
    expect(&r, 1, "", NULL);
    if (strstr(r.err, "pf: ValueError: argument 0 of '") == NULL ||
        strstr(r.err, bad[i].err) == NULL)
      fail_msg("pf call %s '%s' printed '%s', expected a ValueError with '%s'", bad[i].fn,
               bad[i].arg, r.err, bad[i].err);
  }
  /* A repeated key is the Map's own error, with the place that raised it
   * as its one traceback line. */
  run_result r;
  run(&r, "--load", MODS "/mod_echo.so", "call", "echo", "{\"a\": 1, \"a\": 2}", NULL);
  expect(&r, 1, "", NULL);
  static const char k_map_error[] =
      "pf: ValueError: PFMapCreate: key 1 ('a') repeats key 0\n"
      "    File \"runtime/container.c\", line ";
  if (strncmp(r.err, k_map_error, sizeof k_map_error - 1) != 0 ||
      strchr(r.err + sizeof k_map_error - 1, '\n') != r.err + strlen(r.err) - 1)
    fail_msg("pf printed \"%s\", expected \"%s...\" and no more lines", r.err, k_map_error);
  /* Nesting is bounded when parsing and when printing. */
  char deep[200];
  memset(deep, '[', 70);
  memset(deep + 70, ']', 70);
  deep[140] = '\0';
  run(&r, "--load", MODS "/mod_echo.so", "call", "echo", deep, NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, "nested deeper than 64 levels"));
}

static void test_call_errors(void** state) {
  (void)state;
  run_result r;
  run(&r, "--load", DEMO, "call", "demo.add", "x", "2", NULL);
  expect(&r, 1, "", "pf: ValueError: argument 0 of 'demo.add' must be an integer, got 'x'\n");
  run(&r, "--load", DEMO, "call", "demo.add", "1.5", "2", NULL);
  expect(&r, 1, "", "pf: ValueError: argument 0 of 'demo.add' must be an integer, got '1.5'\n");
  run(&r, "--load", DEMO, "call", "demo.add", "9223372036854775808", "2", NULL);
  expect(&r, 1, "",
         "pf: ValueError: argument 0 of 'demo.add' must be an integer within the int64 "
         "range, got '9223372036854775808'\n");
  run(&r, "--load", DEMO, "call", "demo.hypot", "abc", "1", NULL);
  expect(&r, 1, "", "pf: ValueError: argument 0 of 'demo.hypot' must be a number, got 'abc'\n");
  run(&r, "--load", DEMO, "call", "demo.hypot", "1e999", "1", NULL);
  expect(&r, 1, "",
         "pf: ValueError: argument 0 of 'demo.hypot' must be a number within the float64 "
         "range, got '1e999'\n");
  /* Generic parse: out-of-range integers are errors, not strings. */
  run(&r, "--load", DEMO, "call", "demo.fail", "99999999999999999999", NULL);
  expect(&r, 1, "",
         "pf: ValueError: argument 0 of 'demo.fail' ('99999999999999999999') is an integer "
         "outside the int64 range\n");
  /* The function's own checks. */
  run(&r, "--load", DEMO, "call", "demo.add", "1", NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, "pf: TypeError: "));
  assert_non_null(strstr(r.err, "takes 2 arguments, got 1"));
  run(&r, "call", "no.such", NULL);
  expect(&r, 1, "", "pf: KeyError: no function named 'no.such' is registered\n");
}

/* A keyword binds only the parameter of exactly its name, whichever
 * names share its first bytes (tests/modules/mod_echo.c: kw_prefixes). */
static void test_call_keyword_prefixes(void** state) {
  (void)state;
  static const char* const names[] = {"abcdefg",         "abcdefgh",         "abcdefghi",
                                      "abcdefghijklmno", "abcdefghijklmnop", "abcdefghijklmnopq"};
  run_result r;
  char arg[32], want[128];
  for (int rev = 0; rev < 2; ++rev) {
    for (int k = 0; k < 6; ++k) {
      snprintf(arg, sizeof(arg), "%s=5", names[k]);
      int at = rev ? 5 - k : k;
      snprintf(want, sizeof(want), "[%d, %d, %d, %d, %d, %d]\n", 5 * (at == 0), 5 * (at == 1),
               5 * (at == 2), 5 * (at == 3), 5 * (at == 4), 5 * (at == 5));
      run(&r, "--load", MODS "/mod_echo.so", "call", rev ? "kw_prefixes_rev" : "kw_prefixes", arg,
          NULL);
      expect(&r, 0, want, "");
    }
  }
  static const char* const strangers[] = {"interval", "position", "abcdefgh", "abcdefghijklmnop"};
  for (int k = 0; k < 4; ++k) {
    snprintf(arg, sizeof(arg), "%s=5", strangers[k]);
    snprintf(want, sizeof(want),
             "pf: TypeError: kw_longer() got an unexpected keyword argument "
             "'%s'\n",
             strangers[k]);
    run(&r, "--load", MODS "/mod_echo.so", "call", "kw_longer", arg, NULL);
    expect(&r, 1, "", want);
  }
}

/* NAME=VALUE arguments: keywords, bound by the library (PFFuncCallKw),
 * each read by its parameter's type; defaults fill the rest. */
static void test_call_keywords(void** state) {
  (void)state;
  run_result r;
  run(&r, "--load", MODS "/mod_echo.so", "call", "clamp", "1.5", "hi=1", NULL);
  expect(&r, 0, "1.0\n", "");
  run(&r, "--load", MODS "/mod_echo.so", "call", "clamp", "0.5", NULL); /* lo, hi: defaults */
  expect(&r, 0, "0.5\n", "");
  run(&r, "--load", MODS "/mod_echo.so", "call", "clamp", "hi=2", "x=5", "lo=-1", NULL);
  expect(&r, 0, "2.0\n", "");
  /* A packed function's signature: "42" stays text for a str parameter,
   * n reads as an int64, and what is left out takes its default. */
  run(&r, "--load", MODS "/mod_echo.so", "call", "args_of", "text=42", "n=3", NULL);
  expect(&r, 0, "[\"42\", 3, \"a=b\", null]\n", "");
  run(&r, "--load", MODS "/mod_echo.so", "call", "args_of", "x", "sep=c=d", "items=[1, 2]", NULL);
  expect(&r, 0, "[\"x\", 1, \"c=d\", [1, 2]]\n", "");
  /* Python's errors, from the library. */
  run(&r, "--load", MODS "/mod_echo.so", "call", "clamp", "1", "y=2", NULL);
  expect(&r, 1, "", "pf: TypeError: clamp() got an unexpected keyword argument 'y'\n");
  run(&r, "--load", MODS "/mod_echo.so", "call", "clamp", "1", "x=2", NULL);
  expect(&r, 1, "", "pf: TypeError: clamp() got multiple values for argument 'x'\n");
  run(&r, "--load", MODS "/mod_echo.so", "call", "clamp", "hi=2", NULL);
  expect(&r, 1, "", "pf: TypeError: clamp() missing 1 required positional argument: 'x'\n");
  /* A keyword's value is read by its parameter's type, and named so. */
  run(&r, "--load", MODS "/mod_echo.so", "call", "clamp", "1", "hi=abc", NULL);
  expect(&r, 1, "", "pf: ValueError: argument 'hi' of 'clamp' must be a number, got 'abc'\n");
  /* Positional arguments come first. */
  run(&r, "--load", MODS "/mod_echo.so", "call", "clamp", "hi=2", "1", NULL);
  expect(&r, 2, "", NULL);
  assert_non_null(strstr(r.err, "pf: call: positional argument '1' follows a keyword argument"));
  /* Without named parameters NAME=VALUE is an ordinary argument. */
  run(&r, "--load", MODS "/mod_echo.so", "call", "echo", "a=b", NULL);
  expect(&r, 0, "a=b\n", "");
  /* With them, text with "=" is passed by naming its parameter. */
  run(&r, "--load", DEMO, "call", "demo.greet", "name=x=1", NULL);
  expect(&r, 0, "Hello, x=1!\n", "");
}

static void test_load_errors(void** state) {
  (void)state;
  run_result r;
  run(&r, "--load", MODS "/absent.so", "list", NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, "pf: RuntimeError: PFModLoadFromFile: cannot load"));
  assert_non_null(strstr(r.err, "No such file"));
  run(&r, "--load", MODS "/mod_plain.so", "list", NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, "pf: ValueError: "));
  assert_non_null(strstr(r.err, "is not a packedfunc module"));
  run(&r, "--load", MODS "/mod_dup.so", "list", NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, "pf: KeyError: "));
  /* Two modules with the same names: the second export is refused. */
  run(&r, "--load", MODS "/mod_other.so", "--load", MODS "/mod_other.so", "list", NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, "pf: KeyError: PFModExportGlobal: a function named 'add'"));
  /* A traceback prints indented under the error. */
  run(&r, "--load", MODS "/mod_badsig.so", "list", NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, "pf: ValueError: "));
  assert_non_null(strstr(r.err, "\n  while loading function 'badsig.broken'"));
}

static void test_usage_errors(void** state) {
  (void)state;
  run_result r;
  const char* tail = "Try 'pf --help' for more information.\n";
  char want[512];
  run(&r, NULL);
  snprintf(want, sizeof(want),
           "pf: missing command (list, describe, call, serve, stubgen or help)\n%s", tail);
  expect(&r, 2, "", want);
  run(&r, "frobnicate", NULL);
  snprintf(want, sizeof(want), "pf: unknown command 'frobnicate'\n%s", tail);
  expect(&r, 2, "", want);
  run(&r, "--bogus", "list", NULL);
  snprintf(want, sizeof(want), "pf: unknown option '--bogus'\n%s", tail);
  expect(&r, 2, "", want);
  run(&r, "--load", NULL);
  snprintf(want, sizeof(want), "pf: --load needs a library path\n%s", tail);
  expect(&r, 2, "", want);
  run(&r, "--load=", "list", NULL);
  expect(&r, 2, "", want);
  run(&r, "--prefix", NULL);
  snprintf(want, sizeof(want), "pf: --prefix needs a value\n%s", tail);
  expect(&r, 2, "", want);
  /* A command's own usage errors point at its own help. */
  run(&r, "describe", NULL);
  snprintf(want, sizeof(want),
           "pf: describe takes exactly one NAME\nTry 'pf describe --help' for more information.\n");
  expect(&r, 2, "", want);
  run(&r, "describe", "a", "b", NULL);
  expect(&r, 2, "", want);
  run(&r, "list", "a", "b", NULL);
  snprintf(want, sizeof(want),
           "pf: list takes at most one PREFIX\nTry 'pf list --help' for more information.\n");
  expect(&r, 2, "", want);
  run(&r, "call", NULL);
  snprintf(want, sizeof(want),
           "pf: call needs a function NAME\nTry 'pf call --help' for more information.\n");
  expect(&r, 2, "", want);
  run(&r, "--connect", "tcp://127.0.0.1:1", "serve", "--listen", "tcp://127.0.0.1:*", NULL);
  snprintf(want, sizeof(want),
           "pf: serve does not take --connect\nTry 'pf serve --help' for more information.\n");
  expect(&r, 2, "", want);
  /* The per-client limits of serve take positive numbers. */
  const char* limits[][2] = {{"--max-calls-per-client", "a positive number"},
                             {"--max-exports-per-client", "a positive number"},
                             {"--max-callbacks-per-client", "a number from 1 to 256"},
                             {"--max-workers-per-client", "a number from 1 to 256"}};
  for (size_t k = 0; k < sizeof limits / sizeof limits[0]; ++k) {
    run(&r, "serve", "--listen", "tcp://127.0.0.1:*", limits[k][0], "0", NULL);
    snprintf(want, sizeof(want), "pf: %s needs %s\nTry 'pf --help' for more information.\n",
             limits[k][0], limits[k][1]);
    expect(&r, 2, "", want);
  }
  /* A usage error loads nothing (a bad module would otherwise fail first). */
  run(&r, "--load", MODS "/absent.so", "describe", NULL);
  expect(&r, 2, "", NULL);
  /* Options only come before the command; "--" ends them. */
  run(&r, "--", "--help", NULL);
  snprintf(want, sizeof(want), "pf: unknown command '--help'\n%s", tail);
  expect(&r, 2, "", want);
}

/* `pf COMMAND --help` (or -h, or `pf help COMMAND`) prints that command's
 * usage to stdout and exits 0, whatever else is on the line; it loads
 * nothing. */
static void test_command_help(void** state) {
  (void)state;
  static const struct {
    const char* cmd;
    const char* usage; /* how its usage line begins */
    const char* also;  /* and something else it says */
  } cases[] = {
      {"list", "usage: pf [OPTIONS] list [--types] [PREFIX]\n", "one per line"},
      {"describe", "usage: pf [OPTIONS] describe NAME\n", "an object type's parent"},
      {"call", "usage: pf [OPTIONS] call NAME [ARG...]\n", "Arguments of `call`"},
      {"serve", "usage: pf [OPTIONS] serve --listen ENDPOINT", "--curve-secret-key FILE"},
      {"help", "usage: pf [OPTIONS] help [COMMAND]\n", "print this help"},
      {"stubgen", "usage: pf [OPTIONS] stubgen (MODULE.so | --registry PREFIX)",
       "PYTHON -m packedfunc.stubgen"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
    const char* cmd = cases[i].cmd;
    run_result r, r2;
    run(&r, cmd, "--help", NULL);
    if (r.status != 0) print_error("pf %s --help\n", cmd);
    expect(&r, 0, NULL, "");
    if (strncmp(r.out, cases[i].usage, strlen(cases[i].usage)) != 0)
      fail_msg("pf %s --help printed '%s'", cmd, r.out);
    assert_non_null(strstr(r.out, cases[i].also));
    assert_non_null(strstr(r.out, "Options go before the command"));
    run(&r2, cmd, "-h", NULL);
    expect(&r2, 0, r.out, "");
    run(&r2, "help", cmd, NULL);
    expect(&r2, 0, r.out, "");
    /* Nothing is loaded for it, not even a module that is not there. */
    run(&r2, "--load", MODS "/absent.so", cmd, "--help", NULL);
    expect(&r2, 0, r.out, "");
  }
  /* Where a command takes only names, --help anywhere asks for help; the
   * arguments of a function (after call's NAME) are its own. */
  run_result r, r2;
  run(&r, "describe", "--help", NULL);
  run(&r2, "describe", "demo.add", "--help", NULL);
  expect(&r2, 0, r.out, "");
  run(&r, "--load", MODS "/mod_echo.so", "call", "echo", "--help", NULL);
  expect(&r, 0, "--help\n", "");
  /* The full help lists every command, serve included. */
  run(&r, "--help", NULL);
  assert_non_null(strstr(r.out, "\n  serve --listen ENDPOINT"));
  assert_non_null(strstr(r.out, "\n  help [COMMAND]"));
  run(&r, "help", "frobnicate", NULL);
  expect(&r, 2, "", "pf: unknown command 'frobnicate'\nTry 'pf --help' for more information.\n");
}

/* An option of pf after the command is an error that says where options
 * go (it used to be a PREFIX, a NAME or a function to look up). */
static void test_option_after_the_command(void** state) {
  (void)state;
  static const char* const lines[][6] = {
      {"list", "--load", DEMO, NULL},
      {"list", "--load=" DEMO, NULL},
      {"describe", "--connect", "tcp://127.0.0.1:1", NULL},
      {"call", "--load", DEMO, "demo.add", "1", NULL},
      {"call", "--prefix=p.", NULL},
      {"serve", "--listen", "tcp://127.0.0.1:*", "--connect", "tcp://127.0.0.1:1", NULL},
  };
  for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); ++i) {
    char* argv[8] = {(char*)"pf"};
    for (int k = 0; lines[i][k] != NULL; ++k) argv[k + 1] = (char*)lines[i][k];
    run_result r;
    run_argv(&r, PF_TEST_CLI, argv);
    expect(&r, 2, "", NULL);
    char want[256];
    const char* opt = lines[i][0][0] == 's' ? "--connect" : lines[i][1];
    snprintf(want, sizeof want,
             "pf: '%.*s' is an option of pf, not of %s: options go before the "
             "command (pf [OPTIONS] %s ...)\n",
             (int)strcspn(opt, "="), opt, lines[i][0], lines[i][0]);
    if (strncmp(r.err, want, strlen(want)) != 0)
      fail_msg("pf %s %s printed '%s', expected '%s'", lines[i][0], lines[i][1], r.err, want);
  }
}

/* `pf stubgen` runs $PF_PYTHON -m packedfunc.stubgen with pf's --prefix and
 * --load options, then its own arguments, on pf's streams, and exits as it
 * does (2 stays a usage error, any other failure is 1). A script stands in
 * for Python here: it prints its arguments and exits with the status that
 * its first argument after the module names. */
static void test_stubgen_runs_the_python_generator(void** state) {
  (void)state;
  char dir[] = "/tmp/pf_stubgen_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char script[64];
  snprintf(script, sizeof script, "%s/python", dir);
  FILE* f = fopen(script, "w");
  assert_non_null(f);
  fputs(
      "#!/bin/sh\necho \"$@\"\necho to-stderr >&2\n"
      "case \"$3\" in usage) exit 2;; fail) exit 3;; esac\nexit 0\n",
      f);
  fclose(f);
  assert_int_equal(chmod(script, 0755), 0);
  assert_int_equal(setenv("PF_PYTHON", script, 1), 0);
  run_result r;
  run(&r, "--prefix", "p.", "--load", DEMO, "stubgen", "--registry", "p", "-o", "x.pyi", NULL);
  expect(&r, 0, "-m packedfunc.stubgen --prefix p. --load " DEMO " --registry p -o x.pyi\n",
         "to-stderr\n");
  run(&r, "stubgen", "usage", NULL);
  expect(&r, 2, "-m packedfunc.stubgen usage\n", "to-stderr\n");
  run(&r, "stubgen", "fail", NULL);
  expect(&r, 1, "-m packedfunc.stubgen fail\n", "to-stderr\n");
  /* Modules are the generator's to load: pf loads none, not even a missing one. */
  run(&r, "--load", MODS "/absent.so", "stubgen", "m.so", NULL);
  expect(&r, 0, "-m packedfunc.stubgen --prefix  --load " MODS "/absent.so m.so\n", NULL);
  run(&r, "--connect", "tcp://127.0.0.1:1", "stubgen", "m.so", NULL);
  expect(&r, 2, "", NULL);
  assert_non_null(strstr(r.err, "stubgen does not take --connect"));
  char missing[80];
  snprintf(missing, sizeof missing, "%s/no-python", dir);
  assert_int_equal(setenv("PF_PYTHON", missing, 1), 0);
  run(&r, "stubgen", "m.so", NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, "pf: stubgen: cannot run"));
  assert_int_equal(unsetenv("PF_PYTHON"), 0);
  assert_int_equal(unlink(script), 0);
  assert_int_equal(rmdir(dir), 0);
}

/* A script DIR/NAME that stands for a Python: it answers pf's probe
 * (-c CODE) with exit status `probe`, and otherwise prints its name and
 * arguments. */
static void fake_python(const char* dir, const char* name, int probe) {
  char path[128];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "w");
  assert_non_null(f);
  fprintf(f, "#!/bin/sh\n[ \"$1\" = -c ] && exit %d\necho %s \"$@\"\n", probe, name);
  fclose(f);
  assert_int_equal(chmod(path, 0755), 0);
}

/* Sets (value) or unsets (NULL) an environment variable. */
static void set_env(const char* name, const char* value) {
  assert_int_equal(value ? setenv(name, value, 1) : unsetenv(name), 0);
}

/* `pf stubgen` runs a Python that can import packedfunc: $PF_PYTHON, else
 * $PYTHON, else the first of python3 (on PATH) and /usr/bin/python3 that
 * can; when the one named cannot, or none can, it says how to choose. */
static void test_stubgen_chooses_a_python_that_has_packedfunc(void** state) {
  (void)state;
  char dir[] = "/tmp/pf_pythons_XXXXXX";
  assert_non_null(mkdtemp(dir));
  fake_python(dir, "with", 0);
  fake_python(dir, "without", 1);
  fake_python(dir, "python3", 1);
  char with[64], without[64], path[4096], package[4096];
  snprintf(with, sizeof with, "%s/with", dir);
  snprintf(without, sizeof without, "%s/without", dir);
  snprintf(path, sizeof path, "%s:%s", dir, getenv("PATH"));
  assert_non_null(getcwd(package, sizeof package - 32)); /* the repository */
  strcat(package, "/bindings/python");
  char* saved_path = strdup(getenv("PATH"));
  char* saved_pythonpath = getenv("PYTHONPATH") ? strdup(getenv("PYTHONPATH")) : NULL;
  set_env("PF_PYTHON", NULL);
  run_result r;
  set_env("PYTHON", with);
  run(&r, "stubgen", "m.so", NULL);
  expect(&r, 0, "with -m packedfunc.stubgen m.so\n", NULL);
  set_env("PF_PYTHON", without); /* PF_PYTHON first, and it is not passed over */
  run(&r, "stubgen", "m.so", NULL);
  expect(&r, 1, "", NULL);
  char want[512];
  snprintf(want, sizeof want,
           "pf: stubgen: %s (PF_PYTHON) cannot import packedfunc: set PF_PYTHON (or PYTHON) "
           "to a Python that can, or make packedfunc importable (install it, or add its "
           "bindings/python to PYTHONPATH)\n",
           without);
  assert_string_equal(r.err, want);
  /* Neither set: python3 on PATH (here one without packedfunc), then
   * /usr/bin/python3, which finds the package on PYTHONPATH and runs the
   * generator, which refuses the missing module. */
  set_env("PF_PYTHON", NULL);
  set_env("PYTHON", NULL);
  set_env("PATH", path);
  set_env("PYTHONPATH", package);
  run(&r, "stubgen", MODS "/absent.so", NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, "python -m packedfunc.stubgen: FileNotFoundError"));
  /* And none that can (unless Debian's Python has packedfunc installed). */
  set_env("PYTHONPATH", dir);
  if (system("/usr/bin/python3 -c 'import packedfunc' 2>/dev/null") != 0) {
    run(&r, "stubgen", "m.so", NULL);
    expect(&r, 1, "", NULL);
    assert_string_equal(r.err,
                        "pf: stubgen: no Python that can import packedfunc (tried python3, "
                        "/usr/bin/python3): set PF_PYTHON (or PYTHON) to a Python that can, or "
                        "make packedfunc importable (install it, or add its bindings/python to "
                        "PYTHONPATH)\n");
  }
  set_env("PATH", saved_path);
  set_env("PYTHONPATH", saved_pythonpath);
  free(saved_path);
  free(saved_pythonpath);
  static const char* const fakes[] = {"with", "without", "python3"};
  for (size_t i = 0; i < sizeof fakes / sizeof fakes[0]; ++i) {
    char file[128];
    snprintf(file, sizeof file, "%s/%s", dir, fakes[i]);
    assert_int_equal(unlink(file), 0);
  }
  assert_int_equal(rmdir(dir), 0);
}

/* ---- key files ---- */

/* A valid CURVE key pair (the ZeroMQ test vectors, Z85). */
#define SERVER_SECRET "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh6"
#define SERVER_PUBLIC "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"

static char g_key_dir[64];

static const char* key_file(const char* name, const char* text, size_t len) {
  static char path[8][128];
  static int next;
  if (g_key_dir[0] == '\0') {
    snprintf(g_key_dir, sizeof g_key_dir, "/tmp/pf_cli_keys_XXXXXX");
    assert_non_null(mkdtemp(g_key_dir));
  }
  char* p = path[next++ % 8];
  snprintf(p, 128, "%s/%s", g_key_dir, name);
  FILE* f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(text, 1, len, f), len);
  assert_int_equal(fclose(f), 0);
  return p;
}

/* A string literal and its length (it may hold NUL bytes). */
#define TXT(lit) (lit), sizeof(lit) - 1
#define KEY_FILE(name, lit) key_file((name), TXT(lit))

/* The teardown of the key-file tests, which runs also when one fails. */
static int remove_key_dir(void** state) {
  (void)state;
  if (g_key_dir[0] == '\0') return 0;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_key_dir);
  g_key_dir[0] = '\0';
  return system(cmd) == 0 ? 0 : -1;
}

/* A key file holds exactly one key, trailing whitespace aside; anything
 * else is refused with a message naming the file (the old reader took the
 * first 40 characters that were not blanks and ignored the rest). */
static void test_secret_key_files(void** state) {
  (void)state;
  static const struct {
    const char* name;
    const char* text;
    size_t len;
    const char* why;
  } bad[] = {
      {"k41", TXT(SERVER_SECRET "x\n"), "its key has 41 characters"},
      {"two", TXT(SERVER_SECRET "\n" SERVER_SECRET "\n"), "more follows the key (at byte 42)"},
      {"junk", TXT(SERVER_SECRET " junk\n"), "more follows the key (at byte 42)"},
      {"nul",
       TXT(SERVER_SECRET "\n\0"
                         "x"),
       "it holds a NUL byte"},
      {"short", TXT("abc\n"), "its key has 3 characters"},
      {"split", TXT("JTKVSB%%)wK0E.X)V>+}o?pNm C{O&4W4b!Ni{Lh6\n"), "its key has 25 characters"},
      {"lead", TXT(" " SERVER_SECRET "\n"), "it begins with whitespace"},
      {"empty", TXT(""), "it is empty"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    const char* f = key_file(bad[i].name, bad[i].text, bad[i].len);
    char want[512];
    snprintf(want, sizeof want,
             "pf: ValueError: the key file '%s' must hold one CURVE key (40 characters of Z85) "
             "and nothing else but trailing whitespace: %s\n",
             f, bad[i].why);
    run_result r;
    run(&r, "serve", "--listen", "tcp://127.0.0.1:*", "--curve-secret-key", f, NULL);
    if (r.status != 1 || strcmp(r.err, want) != 0)
      print_error("pf serve --curve-secret-key (%s)\n", bad[i].name);
    expect(&r, 1, "", want);
    run(&r, "--connect", "tcp://127.0.0.1:1", "--server-key", SERVER_PUBLIC, "--client-secret-key",
        f, "list", NULL);
    if (r.status != 1 || strcmp(r.err, want) != 0)
      print_error("pf --client-secret-key (%s)\n", bad[i].name);
    expect(&r, 1, "", want);
  }
  /* Too large to be a key file: refused without reading it all. */
  static char big[70000];
  memset(big, 'a', sizeof big);
  const char* f = key_file("big", big, sizeof big);
  run_result r;
  run(&r, "serve", "--listen", "tcp://127.0.0.1:*", "--curve-secret-key", f, NULL);
  expect(&r, 1, "", NULL);
  assert_non_null(strstr(r.err, f));
  assert_non_null(strstr(r.err, "it is larger than"));
  /* Forty characters that are not Z85: the file is named too. */
  f = KEY_FILE("notz85", "JTKVSB%%)wK0E.X)V>+}o?pNmC{O&4W4b!Ni{Lh~\n");
  char* argv[] = {(char*)"pf",
                  (char*)"serve",
                  (char*)"--listen",
                  (char*)"bogus://x",
                  (char*)"--curve-secret-key",
                  (char*)f,
                  NULL};
  run_argv(&r, PF_TEST_CLI_REL, argv);
  expect(&r, 1, "", NULL);
  if (strstr(r.err, f) == NULL || strstr(r.err, "is not valid Z85") == NULL)
    fail_msg("a key that is not Z85 printed '%s'", r.err);
  /* Good files: one key, then any trailing whitespace. The shipped pf then
   * gets as far as the endpoint, which is bad on purpose. */
  const char* good[] = {KEY_FILE("good1", SERVER_SECRET), KEY_FILE("good2", SERVER_SECRET "\n"),
                        KEY_FILE("good3", SERVER_SECRET " \t\r\n\n  \n")};
  for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); ++i) {
    argv[5] = (char*)good[i];
    run_argv(&r, PF_TEST_CLI_REL, argv);
    expect(&r, 1, "", NULL);
    if (strstr(r.err, "cannot bind 'bogus://x'") == NULL)
      fail_msg("pf serve with the good key file %s printed '%s'", good[i], r.err);
  }
}

/* The authorized keys: one public key per line; blank lines and '#' lines
 * skipped; trailing whitespace allowed; anything else names file and line. */
static void test_authorized_key_files(void** state) {
  (void)state;
  const char* secret = KEY_FILE("secret", SERVER_SECRET "\n");
  static const struct {
    const char* name;
    const char* text;
    size_t len;
    const char* why;
  } bad[] = {
      {"nul", TXT("# one\n" SERVER_PUBLIC "\0junk\n"), "line 2: it holds a NUL byte"},
      {"long",
       TXT("# one\n" SERVER_PUBLIC SERVER_PUBLIC SERVER_PUBLIC SERVER_PUBLIC SERVER_PUBLIC
               SERVER_PUBLIC SERVER_PUBLIC "\n"),
       "line 2: not one CURVE public key"},
      {"two", TXT(SERVER_PUBLIC " " SERVER_PUBLIC "\n"), "line 1: not one CURVE public key"},
      {"none", TXT("# nobody\n\n"), "holds no key"},
  };
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); ++i) {
    const char* f = key_file(bad[i].name, bad[i].text, bad[i].len);
    run_result r;
    run(&r, "serve", "--listen", "tcp://127.0.0.1:*", "--curve-secret-key", secret,
        "--authorized-keys", f, NULL);
    expect(&r, 1, "", NULL);
    if (strncmp(r.err, "pf: ValueError: ", 16) != 0 || strstr(r.err, f) == NULL ||
        strstr(r.err, bad[i].why) == NULL)
      fail_msg("--authorized-keys (%s) printed '%s', expected '%s'", bad[i].name, r.err,
               bad[i].why);
  }
  /* Forty characters that are not Z85, on line 3. */
  const char* f = KEY_FILE("notz85", "\n# x\nrq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf~\n");
  char* argv[] = {(char*)"pf",
                  (char*)"serve",
                  (char*)"--listen",
                  (char*)"bogus://x",
                  (char*)"--curve-secret-key",
                  (char*)secret,
                  (char*)"--authorized-keys",
                  (char*)f,
                  NULL};
  run_result r;
  run_argv(&r, PF_TEST_CLI_REL, argv);
  expect(&r, 1, "", NULL);
  if (strstr(r.err, f) == NULL || strstr(r.err, "line 3") == NULL ||
      strstr(r.err, "is not valid Z85") == NULL)
    fail_msg("an authorized key that is not Z85 printed '%s'", r.err);
  /* Trailing whitespace and CRLF line ends are fine. */
  argv[7] = (char*)KEY_FILE("good", "# clients\r\n" SERVER_PUBLIC " \t\r\n\r\n" SERVER_PUBLIC);
  run_argv(&r, PF_TEST_CLI_REL, argv);
  expect(&r, 1, "", NULL);
  if (strstr(r.err, "cannot bind 'bogus://x'") == NULL)
    fail_msg("pf serve with good authorized keys printed '%s'", r.err);
}

static void test_odd_argv(void** state) {
  (void)state;
  /* No crash for any of these; each exits 0, 1 or 2. */
  const char* odd[] = {
      "",         "-",  "--",  "---", "-=", "--load=", "--prefix=", "call",
      "\xff\xfe", "0x", "-0x", "+",   "1e", "nan",     "-inf",      "0x8000000000000000"};
  size_t n = sizeof(odd) / sizeof(odd[0]);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = 0; j < n; ++j) {
      char* argv[] = {(char*)"pf", (char*)odd[i], (char*)odd[j], NULL};
      run_result r;
      run_argv(&r, PF_TEST_CLI, argv);
      if (r.status > 2) print_error("pf '%s' '%s': %s\n", odd[i], odd[j], r.err);
      assert_in_range(r.status, 0, 2);
    }
  }
  /* Argument edge cases against a real function. */
  const char* vals[] = {"0x", "-0x", "+", "1e", "nan", "-inf", "0x8000000000000000", "", "-"};
  for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); ++i) {
    run_result r;
    run(&r, "--load", DEMO, "call", "demo.hypot", vals[i], "1", NULL);
    assert_in_range(r.status, 0, 1);
  }
}

/* The shipped (non-sanitized) binary works the same. */
static void test_release_binary(void** state) {
  (void)state;
  char* argv[] = {(char*)"pf",       (char*)"--load", (char*)DEMO, (char*)"call",
                  (char*)"demo.add", (char*)"2",      (char*)"3",  NULL};
  run_result r;
  run_argv(&r, PF_TEST_CLI_REL, argv);
  expect(&r, 0, "5\n", "");
  char* argv2[] = {(char*)"pf", (char*)"--load", (char*)DEMO, (char*)"list", (char*)"demo.", NULL};
  run_argv(&r, PF_TEST_CLI_REL, argv2);
  expect(&r, 0, NULL, "");
  assert_non_null(strstr(r.out, "demo.sort\n"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_help),
      cmocka_unit_test(test_list),
      cmocka_unit_test(test_describe),
      cmocka_unit_test(test_element_types),
      cmocka_unit_test(test_describe_type),
      cmocka_unit_test(test_list_types),
      cmocka_unit_test(test_call_values),
      cmocka_unit_test(test_call_generic_parse),
      cmocka_unit_test(test_call_json_arguments),
      cmocka_unit_test(test_call_errors),
      cmocka_unit_test(test_call_keywords),
      cmocka_unit_test(test_call_keyword_prefixes),
      cmocka_unit_test(test_load_errors),
      cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_command_help),
      cmocka_unit_test(test_option_after_the_command),
      cmocka_unit_test_teardown(test_secret_key_files, remove_key_dir),
      cmocka_unit_test_teardown(test_authorized_key_files, remove_key_dir),
      cmocka_unit_test(test_odd_argv),
      cmocka_unit_test(test_release_binary),
      cmocka_unit_test(test_stubgen_runs_the_python_generator),
      cmocka_unit_test(test_stubgen_chooses_a_python_that_has_packedfunc),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
