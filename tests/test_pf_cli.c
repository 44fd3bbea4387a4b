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
  run(&r, "--load", MODS "/mod_multi.so", "--prefix", "o.", "--load", MODS "/mod_other.so",
      "list", NULL);
  expect(&r, 0, "multi.one\nmulti.three\nmulti.two\no.add\no.neg\n", "");
}

static void test_describe(void** state) {
  (void)state;
  run_result r;
  run(&r, "--load", DEMO, "describe", "demo.add", NULL);
  expect(&r, 0, "name: demo.add\nsignature: int64(int64,int64)\ndoc: Adds two integers.\n", "");
  run(&r, "--load", MODS "/mod_multi.so", "describe", "multi.two", NULL);
  expect(&r, 0, "name: multi.two\nsignature: int64()\ndoc: (none)\n", "");
  run(&r, "--load", MODS "/mod_multi.so", "describe", "multi.one", NULL);
  expect(&r, 0, "name: multi.one\nsignature: (packed: any arguments)\ndoc: Returns 1.\n", "");
  run(&r, "--prefix", "p.", "--load", MODS "/mod_other.so", "describe", "p.neg", NULL);
  expect(&r, 0, "name: p.neg\ndefined as: neg\nsignature: int64(int64)\ndoc: Negates.\n", "");
  run(&r, "describe", "no.such", NULL);
  expect(&r, 1, "", "pf: KeyError: no function named 'no.such' is registered\n");
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
      {"echo", "0x", "0x\n"},   /* not a number: a str */
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
  expect(&r, 1, "", "pf: ValueError: argument 0 of 'echo_bool' must be a bool (true or false), got 'yes'\n");
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
    if (strstr(r.err, "pf: ValueError: argument 0 of '") == NULL || strstr(r.err, bad[i].err) == NULL)
      fail_msg("pf call %s '%s' printed '%s', expected a ValueError with '%s'", bad[i].fn,
               bad[i].arg, r.err, bad[i].err);
  }
  /* A repeated key is the Map's own error. */
  run_result r;
  run(&r, "--load", MODS "/mod_echo.so", "call", "echo", "{\"a\": 1, \"a\": 2}", NULL);
  expect(&r, 1, "", "pf: ValueError: PFMapCreate: key 1 ('a') repeats key 0\n");
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
  snprintf(want, sizeof(want), "pf: missing command (list, describe, call or help)\n%s", tail);
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
  run(&r, "describe", NULL);
  snprintf(want, sizeof(want), "pf: describe takes exactly one NAME\n%s", tail);
  expect(&r, 2, "", want);
  run(&r, "describe", "a", "b", NULL);
  expect(&r, 2, "", want);
  run(&r, "list", "a", "b", NULL);
  snprintf(want, sizeof(want), "pf: list takes at most one PREFIX\n%s", tail);
  expect(&r, 2, "", want);
  run(&r, "call", NULL);
  snprintf(want, sizeof(want), "pf: call needs a function NAME\n%s", tail);
  expect(&r, 2, "", want);
  /* A usage error loads nothing (a bad module would otherwise fail first). */
  run(&r, "--load", MODS "/absent.so", "describe", NULL);
  expect(&r, 2, "", NULL);
  /* Options only come before the command; "--" ends them. */
  run(&r, "--", "--help", NULL);
  snprintf(want, sizeof(want), "pf: unknown command '--help'\n%s", tail);
  expect(&r, 2, "", want);
}

static void test_odd_argv(void** state) {
  (void)state;
  /* No crash for any of these; each exits 0, 1 or 2. */
  const char* odd[] = {"", "-", "--", "---", "-=", "--load=", "--prefix=", "call", "\xff\xfe",
                       "0x", "-0x", "+", "1e", "nan", "-inf", "0x8000000000000000"};
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
  char* argv[] = {(char*)"pf", (char*)"--load", (char*)DEMO, (char*)"call", (char*)"demo.add",
                  (char*)"2", (char*)"3", NULL};
  run_result r;
  run_argv(&r, PF_TEST_CLI_REL, argv);
  expect(&r, 0, "5\n", "");
  char* argv2[] = {(char*)"pf", (char*)"--load", (char*)DEMO, (char*)"list", (char*)"demo.",
                   NULL};
  run_argv(&r, PF_TEST_CLI_REL, argv2);
  expect(&r, 0, NULL, "");
  assert_non_null(strstr(r.out, "demo.sort\n"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_help),          cmocka_unit_test(test_list),
      cmocka_unit_test(test_describe),      cmocka_unit_test(test_call_values),
      cmocka_unit_test(test_call_generic_parse),
      cmocka_unit_test(test_call_json_arguments),
      cmocka_unit_test(test_call_errors),
      cmocka_unit_test(test_load_errors),   cmocka_unit_test(test_usage_errors),
      cmocka_unit_test(test_odd_argv),      cmocka_unit_test(test_release_binary),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
