/* libFuzzer target: the `pf` command's argument parser, pf_cli_main() from
 * tools/pf.c (built with PF_CLI_NO_MAIN).
 *
 * The input is split at NUL bytes into argv[1..] (argv[0] is "pf"). A few
 * functions are registered once, packed and typed, so that `describe` and
 * `call` reach the argument conversions (JSON-style containers included)
 * and the result printing. The path
 * after --load is always replaced by one that cannot be loaded: the fuzzer
 * must not dlopen whatever library name it happens to spell, and `pf
 * stubgen` runs /bin/false instead of Python.
 * Checks: the status is 0, 1 or 2; no crash, leak or undefined behaviour;
 * and `call add X Y` with small decimal X and Y prints X + Y. */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int pf_cli_main(int argc, char** argv, FILE* out, FILE* err);

#define MAX_ARGV 40

static int64_t t_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static double t_fl(double a, float b) { return a * (double)b; }
static const char* t_s(const char* s) { return s; }
static bool t_b(bool b) { return !b; }
static PFByteArray t_by(const PFByteArray* b) { return *b; }
static void t_v(void) {}
static int64_t t_sh(PFObjectHandle s) {
  const int64_t* d;
  int64_t n;
  return PFShapeGetData(s, &d, &n) == 0 ? n : -1;
}
static int64_t t_obj(PFObjectHandle o) { return o != NULL; }

static int p_echo(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  return n == 0 ? 0 : PFCFuncSetReturn(ret, &a[n - 1], &c[n - 1], 1);
}

static int p_fail(PFValue* a, int* c, int n, PFRetValueHandle ret, void* res) {
  (void)a, (void)c, (void)ret, (void)res;
  PFErrorSetFormat(kPFErrKeyError, "fail with %d args", n);
  PFErrorAppendTraceback("first line");
  PFErrorAppendTraceback("second line");
  return -1;
}

static void reg_typed(const char* name, void* fn, const char* sig) {
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromTyped(fn, sig, &f) != 0 || PFFuncSetInfo(f, name, NULL, "doc") != 0 ||
      PFFuncRegisterGlobal(name, f, 0) != 0)
    abort();
  PFFuncFree(f);
}

static void reg_packed(const char* name, PFPackedCFunc fn) {
  PFFunctionHandle f = NULL;
  if (PFFuncCreateFromCFunc(fn, NULL, NULL, &f) != 0 || PFFuncRegisterGlobal(name, f, 0) != 0)
    abort();
  PFFuncFree(f);
}

static void setup(void) {
  /* `pf stubgen` runs this instead of Python: the fuzzer must not start an
   * interpreter for every input that spells the command. */
  if (setenv("PF_PYTHON", "/bin/false", 1) != 0) abort();
  reg_typed("add", (void*)t_add, "int64(int64,int64)");
  reg_typed("fl", (void*)t_fl, "float64(float64,float32)");
  reg_typed("s", (void*)t_s, "str(str)");
  reg_typed("b", (void*)t_b, "bool(bool)");
  reg_typed("by", (void*)t_by, "bytes(bytes)");
  reg_typed("v", (void*)t_v, "void()");
  reg_typed("sh", (void*)t_sh, "int64(shape)");
  reg_typed("obj", (void*)t_obj, "int64(object)");
  reg_packed("echo", p_echo);
  reg_packed("fail", p_fail);
}

/* A small decimal integer: optional '-', 1 to 15 digits. */
static int small_int(const char* s, long long* out) {
  const char* p = s + (*s == '-');
  size_t n = strlen(p);
  if (n == 0 || n > 15 || strspn(p, "0123456789") != n) return 0;
  *out = strtoll(s, NULL, 10);
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static FILE* devnull;
  if (devnull == NULL) {
    setup();
    devnull = fopen("/dev/null", "w");
    if (devnull == NULL) abort();
  }
  if (size > 2048) return 0;
  char* buf = malloc(size + 1);
  if (buf == NULL) return 0;
  memcpy(buf, data, size);
  buf[size] = '\0';
  char* argv[MAX_ARGV + 1];
  int argc = 0;
  argv[argc++] = "pf";
  for (size_t i = 0; i <= size && argc < MAX_ARGV;) {
    argv[argc++] = buf + i;
    i += strlen(buf + i) + 1;
  }
  argv[argc] = NULL;
  static char bad_path[] = "/nonexistent/packedfunc-fuzz/module.so";
  static char bad_opt[] = "--load=/nonexistent/packedfunc-fuzz/module.so";
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--load") == 0 && i + 1 < argc && argv[i + 1][0] != '\0')
      argv[++i] = bad_path;
    else if (strncmp(argv[i], "--load=", 7) == 0 && argv[i][7] != '\0') argv[i] = bad_opt;
  }

  char* text = NULL;
  size_t text_len = 0;
  FILE* out = open_memstream(&text, &text_len);
  if (out == NULL) abort();
  int status = pf_cli_main(argc, argv, out, devnull);
  fclose(out);
  if (status < 0 || status > 2) {
    fprintf(stderr, "fuzz_pf_args: status %d\n", status);
    abort();
  }
  long long x, y;
  if (argc == 5 && strcmp(argv[1], "call") == 0 && strcmp(argv[2], "add") == 0 &&
      small_int(argv[3], &x) && small_int(argv[4], &y)) {
    char want[64];
    snprintf(want, sizeof(want), "%lld\n", x + y);
    if (status != 0 || strcmp(text, want) != 0) {
      fprintf(stderr, "fuzz_pf_args: call add %s %s gave status %d, output '%s'\n", argv[3],
              argv[4], status, text);
      abort();
    }
  }
  free(text);
  free(buf);
  return 0;
}
