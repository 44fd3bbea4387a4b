/*
 * pf: list, describe and call packedfunc functions from the shell.
 *
 * Everything happens in pf_cli_main(argc, argv, out, err), which returns the
 * exit status and never exits, aborts or keeps state between calls beyond
 * what the runtime's registry keeps; main() is a thin wrapper, left out when
 * PF_CLI_NO_MAIN is defined (so that a fuzzer can drive the parser).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "packedfunc/c_api.h"

/* Exit statuses. */
#define PF_EXIT_OK 0
#define PF_EXIT_ERROR 1 /* a packedfunc error: printed as "pf: Kind: message" */
#define PF_EXIT_USAGE 2 /* a bad command line */

int pf_cli_main(int argc, char** argv, FILE* out, FILE* err);

static const char k_usage[] =
    "usage: pf [OPTIONS] COMMAND [ARGS]\n"
    "\n"
    "List, describe and call packedfunc functions from the shell.\n"
    "\n"
    "Commands:\n"
    "  list [PREFIX]        print the registered function names (those that\n"
    "                       begin with PREFIX), one per line, sorted\n"
    "  describe NAME        print a function's name, signature and docstring\n"
    "  call NAME [ARG...]   call a function and print its result\n"
    "  help                 print this help\n"
    "\n"
    "Options (before the command):\n"
    "  --load LIB.so        load a packedfunc module and register its functions\n"
    "                       globally; repeatable, loaded in order\n"
    "  --prefix PREFIX      register the functions of the modules loaded by the\n"
    "                       --load options that follow under PREFIX + name\n"
    "  -h, --help           print this help\n"
    "  --version            print the packedfunc version\n"
    "  --                   end of options\n"
    "\n"
    "Arguments of `call`: each ARG becomes an int (decimal or 0x hex, within\n"
    "int64), a float (3.5, 1e-3, inf, nan), a bool (true, false), null (null),\n"
    "or else a str. A function with a signature (a typed function) gets each\n"
    "argument converted by the signature's type instead: \"3\" is 3.0 for a\n"
    "float64 parameter, and stays the text \"3\" for a str parameter.\n"
    "\n"
    "Results print as: an int or float in decimal (floats with enough digits\n"
    "to read back exactly), true/false, null, a str as is, bytes as b'...',\n"
    "other values as <kind ...>.\n"
    "\n"
    "Exit status: 0 on success; 1 on an error, printed to stderr as\n"
    "\"pf: Kind: message\" (followed by the traceback, if any); 2 on a bad\n"
    "command line.\n"
    "\n"
    "Example:\n"
    "  pf --load ./demo_plugin.so call demo.add 40 2\n";

/* ---- reporting ---- */

static int usage_error(FILE* err, const char* fmt, const char* detail) {
  fputs("pf: ", err);
  fprintf(err, fmt, detail);
  fputs("\nTry 'pf --help' for more information.\n", err);
  return PF_EXIT_USAGE;
}

/* Prints the thread's packedfunc error; returns PF_EXIT_ERROR. */
static int report_error(FILE* err) {
  const char* kind = PFErrorGetKind();
  fprintf(err, "pf: %s: %s\n", kind[0] ? kind : kPFErrRuntimeError, PFErrorGetMessage());
  const char* tb = PFErrorGetTraceback();
  while (*tb) {
    size_t n = strcspn(tb, "\n");
    fprintf(err, "  %.*s\n", (int)n, tb);
    tb += n + (tb[n] == '\n');
  }
  return PF_EXIT_ERROR;
}

/* ---- parsing arguments ---- */

/* How to read one command-line argument. */
typedef enum { ARG_AUTO, ARG_INT, ARG_FLOAT, ARG_BOOL, ARG_STR, ARG_BYTES } arg_kind;

/* Parses a whole decimal or 0x-hex integer with an optional sign.
 * Returns 1 and *out on success, 0 when `s` is not an integer, and -1 when
 * it is one outside the int64 range. */
static int parse_int(const char* s, int64_t* out) {
  const char* p = s;
  int neg = 0;
  if (*p == '+' || *p == '-') neg = *p++ == '-';
  int base = 10;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  }
  if (*p == '\0') return 0;
  for (const char* q = p; *q; ++q) {
    int ok = (*q >= '0' && *q <= '9') ||
             (base == 16 && ((*q >= 'a' && *q <= 'f') || (*q >= 'A' && *q <= 'F')));
    if (!ok) return 0;
  }
  errno = 0;
  unsigned long long mag = strtoull(p, NULL, base);
  if (errno == ERANGE) return -1;
  if (neg) {
    if (mag > (unsigned long long)INT64_MAX + 1) return -1;
    *out = mag == (unsigned long long)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
  } else {
    if (mag > (unsigned long long)INT64_MAX) return -1;
    *out = (int64_t)mag;
  }
  return 1;
}

static int ieq(const char* a, const char* b) {
  for (; *a && *b; ++a, ++b) {
    char x = *a >= 'A' && *a <= 'Z' ? (char)(*a - 'A' + 'a') : *a;
    if (x != *b) return 0;
  }
  return *a == *b;
}

/* Parses a float: digits with an optional point and exponent, or inf / nan
 * (any case, optionally signed). Returns 1, 0 (not a float) or -1 (beyond
 * the float64 range). */
static int parse_float(const char* s, double* out) {
  const char* body = s + (*s == '+' || *s == '-');
  int special = ieq(body, "inf") || ieq(body, "infinity") || ieq(body, "nan");
  if (!special && strpbrk(body, "0123456789") == NULL) return 0;
  if (!special && strpbrk(s, "xXpP") != NULL) return 0; /* no hex floats */
  char* end = NULL;
  errno = 0;
  double x = strtod(s, &end);
  if (end == s || *end != '\0') return 0;
  if (errno == ERANGE && isinf(x)) return -1;
  *out = x;
  return 1;
}

/* The kind for a signature type name, from the type code that the grammar
 * gives the type (PFSignatureTypeInfo); ARG_AUTO for types that have no
 * command-line spelling of their own (ptr, tensor, func, dtype, device). */
static arg_kind kind_of_type(const char* t, size_t n) {
  const char* name;
  int code;
  for (int i = 0; PFSignatureTypeInfo(i, &name, &code) == 0; ++i) {
    if (strlen(name) != n || memcmp(name, t, n) != 0) continue;
    switch (code) {
      case kPFInt: return ARG_INT;
      case kPFFloat: return ARG_FLOAT;
      case kPFBool: return ARG_BOOL;
      case kPFStr: return ARG_STR;
      case kPFBytes: return ARG_BYTES;
      default: return ARG_AUTO;
    }
  }
  return ARG_AUTO;
}

/* Reads the parameter types of `sig` into kinds[0..max). A signature is
 * stored canonical ("ret(a,b)", no blanks: see PFFuncSetInfo), so a split
 * at "(", "," and ")" reads it. Parameters beyond the signature stay
 * ARG_AUTO; the function itself reports a wrong argument count. */
static void kinds_from_signature(const char* sig, arg_kind* kinds, int max) {
  for (int i = 0; i < max; ++i) kinds[i] = ARG_AUTO;
  const char* p = sig ? strchr(sig, '(') : NULL;
  if (p == NULL) return;
  ++p;
  for (int i = 0; i < max && *p && *p != ')'; ++i) {
    size_t n = strcspn(p, ",)");
    kinds[i] = kind_of_type(p, n);
    p += n;
    if (*p == ',') ++p;
  }
}

/* Converts argv-text `s` (argument `index` of the call) to a packed value.
 * `bytes` is this argument's PFByteArray storage. Returns 0, or -1 with a
 * packedfunc error recorded. */
static int convert_arg(const char* fname, int index, const char* s, arg_kind kind,
                       PFValue* v, int* code, PFByteArray* bytes) {
  int64_t i;
  double x;
  int r;
  switch (kind) {
    case ARG_STR:
      v->v_str = s;
      *code = kPFStr;
      return 0;
    case ARG_BYTES:
      bytes->data = s;
      bytes->size = strlen(s);
      v->v_handle = bytes;
      *code = kPFBytes;
      return 0;
    case ARG_BOOL:
      if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0 || strcmp(s, "false") == 0 ||
          strcmp(s, "0") == 0) {
        v->v_int64 = s[0] == 't' || s[0] == '1';
        *code = kPFBool;
        return 0;
      }
      return PFErrorSetFormat(kPFErrValueError,
                              "argument %d of '%s' must be a bool (true or false), got '%s'",
                              index, fname, s);
    case ARG_INT:
      r = parse_int(s, &i);
      if (r == 1) {
        v->v_int64 = i;
        *code = kPFInt;
        return 0;
      }
      return PFErrorSetFormat(kPFErrValueError, "argument %d of '%s' must be an integer%s, got '%s'",
                              index, fname, r < 0 ? " within the int64 range" : "", s);
    case ARG_FLOAT:
      r = parse_int(s, &i);
      if (r == 1) {
        v->v_float64 = (double)i;
        *code = kPFFloat;
        return 0;
      }
      r = parse_float(s, &x);
      if (r == 1) {
        v->v_float64 = x;
        *code = kPFFloat;
        return 0;
      }
      return PFErrorSetFormat(kPFErrValueError, "argument %d of '%s' must be a number%s, got '%s'",
                              index, fname, r < 0 ? " within the float64 range" : "", s);
    case ARG_AUTO:
      break;
  }
  r = parse_int(s, &i);
  if (r == 1) {
    v->v_int64 = i;
    *code = kPFInt;
    return 0;
  }
  if (r < 0)
    return PFErrorSetFormat(kPFErrValueError,
                            "argument %d of '%s' ('%s') is an integer outside the int64 range",
                            index, fname, s);
  r = parse_float(s, &x);
  if (r < 0)
    return PFErrorSetFormat(kPFErrValueError,
                            "argument %d of '%s' ('%s') is a number outside the float64 range",
                            index, fname, s);
  if (r == 1) {
    v->v_float64 = x;
    *code = kPFFloat;
  } else if (strcmp(s, "true") == 0 || strcmp(s, "false") == 0) {
    v->v_int64 = s[0] == 't';
    *code = kPFBool;
  } else if (strcmp(s, "null") == 0) {
    v->v_int64 = 0;
    *code = kPFNull;
  } else {
    v->v_str = s;
    *code = kPFStr;
  }
  return 0;
}

/* ---- printing results ---- */

static void print_float(FILE* out, double x) {
  if (isnan(x)) {
    fputs("nan", out);
    return;
  }
  if (isinf(x)) {
    fputs(x > 0 ? "inf" : "-inf", out);
    return;
  }
  /* Like Python's repr: the fewest digits that read back as x, positional
   * for exponents in [-4, 16), scientific otherwise. */
  char buf[400];
  int prec = 0;
  for (; prec < 17; ++prec) {
    snprintf(buf, sizeof(buf), "%.*e", prec, x);
    if (strtod(buf, NULL) == x) break;
  }
  snprintf(buf, sizeof(buf), "%.*e", prec, x);
  int e = atoi(strchr(buf, 'e') + 1);
  if (e >= -4 && e < 16) {
    snprintf(buf, sizeof(buf), "%.*f", prec > e ? prec - e : 0, x);
    if (strchr(buf, '.') == NULL) strcat(buf, ".0");
  }
  fputs(buf, out);
}

static void print_bytes(FILE* out, const PFByteArray* b) {
  fputs("b'", out);
  for (size_t i = 0; i < b->size; ++i) {
    unsigned char c = (unsigned char)b->data[i];
    if (c == '\\' || c == '\'')
      fprintf(out, "\\%c", c);
    else if (c == '\n')
      fputs("\\n", out);
    else if (c == '\r')
      fputs("\\r", out);
    else if (c == '\t')
      fputs("\\t", out);
    else if (c < 0x20 || c >= 0x7f)
      fprintf(out, "\\x%02x", c);
    else
      fputc(c, out);
  }
  fputs("'", out);
}

/* Prints a call's result and releases it when it is a reference. */
static void print_result(FILE* out, PFValue v, int code) {
  switch (code) {
    case kPFInt:
      fprintf(out, "%" PRId64, v.v_int64);
      break;
    case kPFFloat:
      print_float(out, v.v_float64);
      break;
    case kPFBool:
      fputs(v.v_int64 ? "true" : "false", out);
      break;
    case kPFNull:
      fputs("null", out);
      break;
    case kPFStr:
      fputs(v.v_str, out);
      break;
    case kPFBytes:
      print_bytes(out, v.v_handle);
      break;
    case kPFOpaqueHandle:
      fprintf(out, "<handle %p>", v.v_handle);
      break;
    case kPFDataType:
      fprintf(out, "<dtype code=%u bits=%u lanes=%u>", (unsigned)v.v_type.code,
              (unsigned)v.v_type.bits, (unsigned)v.v_type.lanes);
      break;
    case kPFDevice:
      fprintf(out, "<device type=%d id=%d>", (int)v.v_device.device_type,
              (int)v.v_device.device_id);
      break;
    case kPFDLTensorHandle:
      fprintf(out, "<tensor %p>", v.v_handle);
      break;
    case kPFFuncHandle: {
      const char* name = NULL;
      PFFuncGetInfo(v.v_handle, &name, NULL, NULL);
      fprintf(out, name ? "<function %s>" : "<function>", name);
      PFFuncFree(v.v_handle);
      break;
    }
    case kPFModuleHandle:
      fputs("<module>", out);
      PFModFree(v.v_handle);
      break;
    case kPFObjectHandle: {
      uint32_t t = 0;
      PFObjectGetTypeIndex(v.v_handle, &t);
      fprintf(out, "<object type=%u>", (unsigned)t);
      PFObjectFree(v.v_handle);
      break;
    }
    default:
      fprintf(out, "<%s %d>", PFTypeCodeName(code) ? PFTypeCodeName(code) : "unknown", code);
      break;
  }
  fputc('\n', out);
}

/* ---- commands ---- */

static int cmd_list(FILE* out, FILE* err, const char* prefix) {
  int n = 0;
  const char** names = NULL;
  if (PFFuncListGlobalNamesWithPrefix(prefix, &n, &names) != 0) return report_error(err);
  for (int i = 0; i < n; ++i) fprintf(out, "%s\n", names[i]);
  return PF_EXIT_OK;
}

/* Looks `name` up; prints a KeyError and returns NULL when it is absent. */
static PFFunctionHandle lookup(FILE* err, const char* name) {
  PFFunctionHandle f = NULL;
  if (PFFuncGetGlobal(name, &f) != 0) {
    report_error(err);
    return NULL;
  }
  if (f == NULL) {
    PFErrorSetFormat(kPFErrKeyError, "no function named '%s' is registered", name);
    report_error(err);
  }
  return f;
}

static int cmd_describe(FILE* out, FILE* err, const char* name) {
  PFFunctionHandle f = lookup(err, name);
  if (f == NULL) return PF_EXIT_ERROR;
  const char *own = NULL, *sig = NULL, *doc = NULL;
  PFFuncGetInfo(f, &own, &sig, &doc);
  fprintf(out, "name: %s\n", name);
  if (own != NULL && strcmp(own, name) != 0) fprintf(out, "defined as: %s\n", own);
  fprintf(out, "signature: %s\n", sig ? sig : "(packed: any arguments)");
  fprintf(out, "doc: %s\n", doc ? doc : "(none)");
  PFFuncFree(f);
  return PF_EXIT_OK;
}

static int cmd_call(FILE* out, FILE* err, const char* name, int nargs, char** argv) {
  PFFunctionHandle f = lookup(err, name);
  if (f == NULL) return PF_EXIT_ERROR;
  size_t cap = nargs > 0 ? (size_t)nargs : 1;
  PFValue* vals = calloc(cap, sizeof(*vals));
  int* codes = calloc(cap, sizeof(*codes));
  arg_kind* kinds = calloc(cap, sizeof(*kinds));
  PFByteArray* bytes = calloc(cap, sizeof(*bytes));
  int status = PF_EXIT_OK;
  if (vals == NULL || codes == NULL || kinds == NULL || bytes == NULL) {
    fputs("pf: MemoryError: out of memory\n", err);
    status = PF_EXIT_ERROR;
  } else {
    const char* sig = NULL;
    PFFuncGetInfo(f, NULL, &sig, NULL);
    kinds_from_signature(sig, kinds, nargs);
    for (int i = 0; i < nargs && status == PF_EXIT_OK; ++i)
      if (convert_arg(name, i, argv[i], kinds[i], &vals[i], &codes[i], &bytes[i]) != 0)
        status = report_error(err);
    PFValue ret;
    int ret_code;
    if (status == PF_EXIT_OK) {
      if (PFFuncCall(f, vals, codes, nargs, &ret, &ret_code) != 0)
        status = report_error(err);
      else
        print_result(out, ret, ret_code);
    }
  }
  free(vals);
  free(codes);
  free(kinds);
  free(bytes);
  PFFuncFree(f);
  return status;
}

/* Loads one module and registers its functions under `prefix`. */
static int load_module(FILE* err, const char* path, const char* prefix) {
  PFModuleHandle mod = NULL;
  if (PFModLoadFromFile(path, &mod) != 0) return report_error(err);
  int rc = PFModExportGlobal(mod, prefix, 0);
  if (rc != 0) report_error(err);
  PFModFree(mod); /* the registered functions keep the library loaded */
  return rc == 0 ? PF_EXIT_OK : PF_EXIT_ERROR;
}

/* Matches "--name VALUE" and "--name=VALUE" at argv[*i]; returns 1 and
 * *value (advancing *i past a separate value), 0 for another option, or -1
 * when the value is missing. */
static int option_value(int argc, char** argv, int* i, const char* name, const char** value) {
  size_t n = strlen(name);
  const char* a = argv[*i];
  if (strncmp(a, name, n) != 0) return 0;
  if (a[n] == '=') {
    *value = a + n + 1;
    return 1;
  }
  if (a[n] != '\0') return 0;
  if (*i + 1 >= argc || argv[*i + 1] == NULL) return -1;
  *value = argv[++*i];
  return 1;
}

int pf_cli_main(int argc, char** argv, FILE* out, FILE* err) {
  if (argc < 1 || argv == NULL) return usage_error(err, "%s", "no arguments");
  for (int k = 0; k < argc; ++k)
    if (argv[k] == NULL) return usage_error(err, "%s", "argv holds a NULL argument");
  /* First the whole command line is checked, so a usage error has no side
   * effects; then modules are loaded, in order; then the command runs. */
  const char** loads = calloc((size_t)argc, sizeof(*loads));
  const char** prefixes = calloc((size_t)argc, sizeof(*prefixes));
  if (loads == NULL || prefixes == NULL) {
    free(loads);
    free(prefixes);
    fputs("pf: MemoryError: out of memory\n", err);
    return PF_EXIT_ERROR;
  }
  int num_loads = 0, status = -1, i = 1;
  const char* prefix = "";
  while (status < 0 && i < argc && argv[i][0] == '-' && argv[i][1] != '\0') {
    const char* a = argv[i];
    const char* value = NULL;
    int r;
    if (strcmp(a, "--") == 0) {
      ++i;
      break;
    } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      fputs(k_usage, out);
      status = PF_EXIT_OK;
    } else if (strcmp(a, "--version") == 0) {
      fprintf(out, "pf (packedfunc) %s\n", PFGetApiBase()->GetVersionString());
      status = PF_EXIT_OK;
    } else if ((r = option_value(argc, argv, &i, "--load", &value)) != 0) {
      if (r < 0 || value[0] == '\0')
        status = usage_error(err, "%s", "--load needs a library path");
      loads[num_loads] = value;
      prefixes[num_loads++] = prefix;
    } else if ((r = option_value(argc, argv, &i, "--prefix", &value)) != 0) {
      if (r < 0) status = usage_error(err, "%s", "--prefix needs a value");
      prefix = value;
    } else {
      status = usage_error(err, "unknown option '%s'", a);
    }
    ++i;
  }
  const char* cmd = status < 0 && i < argc ? argv[i++] : NULL;
  int nargs = argc - i;
  char** args = argv + i;
  if (status >= 0) {
    /* done: help, version or a usage error */
  } else if (cmd == NULL) {
    status = usage_error(err, "%s", "missing command (list, describe, call or help)");
  } else if (strcmp(cmd, "help") == 0) {
    fputs(k_usage, out);
    status = PF_EXIT_OK;
  } else if (strcmp(cmd, "list") == 0) {
    if (nargs > 1) status = usage_error(err, "%s", "list takes at most one PREFIX");
  } else if (strcmp(cmd, "describe") == 0) {
    if (nargs != 1) status = usage_error(err, "%s", "describe takes exactly one NAME");
  } else if (strcmp(cmd, "call") == 0) {
    if (nargs < 1) status = usage_error(err, "%s", "call needs a function NAME");
  } else {
    status = usage_error(err, "unknown command '%s'", cmd);
  }
  for (int k = 0; status < 0 && k < num_loads; ++k)
    if (load_module(err, loads[k], prefixes[k]) != PF_EXIT_OK) status = PF_EXIT_ERROR;
  if (status < 0) {
    if (strcmp(cmd, "list") == 0)
      status = cmd_list(out, err, nargs ? args[0] : NULL);
    else if (strcmp(cmd, "describe") == 0)
      status = cmd_describe(out, err, args[0]);
    else
      status = cmd_call(out, err, args[0], nargs - 1, args + 1);
  }
  free(loads);
  free(prefixes);
  fflush(out);
  return status;
}

#ifndef PF_CLI_NO_MAIN
int main(int argc, char** argv) { return pf_cli_main(argc, argv, stdout, stderr); }
#endif
