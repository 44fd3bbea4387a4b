/*
 * pf: list, describe, call and serve packedfunc functions from the shell
 * (and list and describe object types), and write type stubs (`pf stubgen`,
 * which runs the Python package's stub generator: one implementation,
 * which knows the Python types).
 *
 * Everything happens in pf_cli_main(argc, argv, out, err), which returns the
 * exit status and never exits, aborts or keeps state between calls beyond
 * what the runtime's registry keeps; main() is a thin wrapper, left out when
 * PF_CLI_NO_MAIN is defined (so that a fuzzer can drive the parser).
 * Container arguments are read, and results printed, by pf_json.c; key
 * files are read by pf_keys.c.
 *
 * pf's own errors (a bad argument, an unknown function) are recorded with
 * PFErrorSetFormat, not PF_ERROR: they are messages to the user, and pf
 * prints an error's traceback below it, where a "File tools/pf.c" line
 * would tell a shell user nothing.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "packedfunc/c_api.h"
#include "packedfunc/rpc.h"
#include "pf_json.h"
#include "pf_keys.h"

/* Exit statuses. */
#define PF_EXIT_OK 0
#define PF_EXIT_ERROR 1 /* a packedfunc error: printed as "pf: Kind: message" */
#define PF_EXIT_USAGE 2 /* a bad command line */

int pf_cli_main(int argc, char** argv, FILE* out, FILE* err);

/* ---- options ----
 * The options of pf (before the command) are one table: the parser, the
 * usage text and the error for an option put after the command all read
 * it. The commands are a table too (k_commands, after the commands). */

typedef enum {
  OPT_CONNECT,
  OPT_TIMEOUT,
  OPT_SERVER_KEY,
  OPT_CLIENT_KEY,
  OPT_LOAD,
  OPT_PREFIX,
  OPT_HELP,
  OPT_VERSION,
  OPT_END,
  OPT_COUNT
} option_id;

typedef struct {
  const char* name;      /* "--load" */
  const char* alias;     /* another spelling ("-h"), or NULL */
  const char* value;     /* what its value is called ("LIB.so"); NULL: it takes none */
  const char* help;      /* for the usage text; lines separated by '\n' */
  const char* bad_value; /* the usage error for a missing or bad value */
} pf_option;

static const pf_option k_options[OPT_COUNT] = {
    [OPT_CONNECT] = {"--connect", NULL, "ENDPOINTS",
                     "work on the functions of remote servers\n"
                     "(`pf serve`; several endpoints separated by\n"
                     "commas) instead of the local registry",
                     "--connect needs ENDPOINTS"},
    [OPT_TIMEOUT] = {"--timeout", NULL, "MS", "the remote call timeout (default 30000)",
                     "--timeout needs a positive number of milliseconds"},
    [OPT_SERVER_KEY] = {"--server-key", NULL, "KEY",
                        "CURVE: the server's public key (Z85); needs\n"
                        "--client-secret-key too",
                        "--server-key needs a KEY"},
    [OPT_CLIENT_KEY] = {"--client-secret-key", NULL, "FILE",
                        "CURVE: the client's secret key, in FILE (which\n"
                        "holds that one key)",
                        "--client-secret-key needs a FILE"},
    [OPT_LOAD] = {"--load", NULL, "LIB.so",
                  "load a packedfunc module and register its functions\n"
                  "globally; repeatable, loaded in order",
                  "--load needs a library path"},
    [OPT_PREFIX] = {"--prefix", NULL, "PREFIX",
                    "register the functions of the modules loaded by the\n"
                    "--load options that follow under PREFIX + name",
                    "--prefix needs a value"},
    [OPT_HELP] = {"--help", "-h", NULL, "print this help", NULL},
    [OPT_VERSION] = {"--version", NULL, NULL, "print the packedfunc version", NULL},
    [OPT_END] = {"--", NULL, NULL, "end of options", NULL},
};

static const char k_usage_tail[] =
    "Exit status: 0 on success; 1 on an error, printed to stderr as\n"
    "\"pf: Kind: message\" (followed by the traceback, if any); 2 on a bad\n"
    "command line.\n"
    "\n"
    "Examples:\n"
    "  pf --load ./demo_plugin.so call demo.add 40 2\n"
    "  pf --load ./demo_plugin.so serve --listen tcp://127.0.0.1:9190 --expose demo.\n"
    "  pf --connect tcp://127.0.0.1:9190 call demo.add 40 2\n";

/* ---- help text ---- */

/* The column where the descriptions of commands and options begin. */
#define HELP_COLUMN 23

/* Prints `text` (lines separated by '\n') from column `col`, each further
 * line after `indent` spaces; returns the column where it ends. */
static int put_text(FILE* out, const char* text, int col, int indent) {
  for (const char* p = text;;) {
    size_t n = strcspn(p, "\n");
    fprintf(out, "%.*s", (int)n, p);
    col += (int)n;
    if (p[n] == '\0') return col;
    fprintf(out, "\n%*s", indent, "");
    col = indent;
    p += n + 1;
  }
}

/* Ends an entry of a list that began with its names (up to column `col`):
 * its description at HELP_COLUMN, beside the names when they leave room,
 * else below them. */
static void put_description(FILE* out, int col, const char* help) {
  if (col <= HELP_COLUMN - 2) fprintf(out, "%*s", HELP_COLUMN - col, "");
  else fprintf(out, "\n%*s", HELP_COLUMN, "");
  put_text(out, help, HELP_COLUMN, HELP_COLUMN);
  fputc('\n', out);
}

static void put_options(FILE* out) {
  fputs("Options (before the command):\n", out);
  for (int k = 0; k < OPT_COUNT; ++k) {
    const pf_option* o = &k_options[k];
    int col =
        o->alias ? fprintf(out, "  %s, %s", o->alias, o->name) : fprintf(out, "  %s", o->name);
    if (o->value) col += fprintf(out, " %s", o->value);
    put_description(out, col, o->help);
  }
}

/* The option of pf that `arg` spells ("--load", "--load=VALUE", "-h"), or
 * NULL ("--", which ends the options, is none). */
static const pf_option* option_of_pf(const char* arg) {
  for (int k = 0; k < OPT_COUNT; ++k) {
    const pf_option* o = &k_options[k];
    size_t n = strlen(o->name);
    if (k == OPT_END) continue;
    if (strcmp(arg, o->name) == 0 || (o->alias && strcmp(arg, o->alias) == 0) ||
        (o->value && strncmp(arg, o->name, n) == 0 && arg[n] == '='))
      return o;
  }
  return NULL;
}

/* ---- reporting ---- */

static int usage_error(FILE* err, const char* fmt, const char* detail) {
  fputs("pf: ", err);
  fprintf(err, fmt, detail);
  fputs("\nTry 'pf --help' for more information.\n", err);
  return PF_EXIT_USAGE;
}

/* A usage error of command `cmd`, which points at the command's own help. */
static int command_error(FILE* err, const char* cmd, const char* fmt, const char* detail) {
  fputs("pf: ", err);
  fprintf(err, fmt, detail);
  fprintf(err, "\nTry 'pf %s --help' for more information.\n", cmd);
  return PF_EXIT_USAGE;
}

/* An option of pf given after the command `cmd`. */
static int misplaced_option(FILE* err, const char* cmd, const pf_option* o) {
  fprintf(err,
          "pf: '%s' is an option of pf, not of %s: options go before the command "
          "(pf [OPTIONS] %s ...)\nTry 'pf --help' for more information.\n",
          o->name, cmd, cmd);
  return PF_EXIT_USAGE;
}

/* An argument that command `cmd` does not take. */
static int unknown_argument(FILE* err, const char* cmd, const char* arg) {
  const pf_option* o = option_of_pf(arg);
  if (o != NULL) return misplaced_option(err, cmd, o);
  fprintf(err, "pf: %s: unknown argument '%s'\nTry 'pf %s --help' for more information.\n", cmd,
          arg, cmd);
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
typedef enum { ARG_AUTO, ARG_INT, ARG_FLOAT, ARG_BOOL, ARG_STR, ARG_BYTES, ARG_SHAPE } arg_kind;

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
 * command-line spelling of their own (ptr, tensor, func, dtype, device) and
 * for array, map and object, which the generic parse reads as JSON. A
 * shape reads a JSON list of ints. */
static arg_kind kind_of_type(const char* t, size_t n) {
  const char* name;
  int code;
  if (n == 5 && memcmp(t, "shape", 5) == 0) return ARG_SHAPE;
  for (int i = 0; PFSignatureTypeInfo(i, &name, &code) == 0; ++i) {
    if (strlen(name) != n || memcmp(name, t, n) != 0) continue;
    switch (code) {
      case kPFInt:
        return ARG_INT;
      case kPFFloat:
        return ARG_FLOAT;
      case kPFBool:
        return ARG_BOOL;
      case kPFStr:
        return ARG_STR;
      case kPFBytes:
        return ARG_BYTES;
      default:
        return ARG_AUTO;
    }
  }
  return ARG_AUTO;
}

/* The kind of parameter i of `info` (NULL: no signature): its type's, from
 * the parameter table (a tensor<...> or obj<KEY> type reads generically);
 * ARG_AUTO beyond the parameters: the function reports a wrong count. */
static arg_kind kind_of_param(const PFSignatureInfo* info, int i) {
  if (info == NULL || i < 0 || i >= info->num_params) return ARG_AUTO;
  const char* t = info->params[i]->type;
  return kind_of_type(t, strlen(t));
}

/* 1 when argv-text `s` is a keyword argument NAME=VALUE of a function with
 * named parameters (`named`); *value is then VALUE and *name_len NAME's
 * length. Whether NAME is a parameter is the library's to say. */
static int keyword_arg(int named, const char* s, size_t* name_len, const char** value) {
  size_t n = 0;
  if (!named || !((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= 'A' && s[0] <= 'Z') || s[0] == '_'))
    return 0;
  while ((s[n] >= 'a' && s[n] <= 'z') || (s[n] >= 'A' && s[n] <= 'Z') ||
         (s[n] >= '0' && s[n] <= '9') || s[n] == '_')
    ++n;
  if (s[n] != '=') return 0;
  *name_len = n;
  *value = s + n + 1;
  return 1;
}

/* Converts argv-text `s` (`arg` names it: "argument 0", "argument 'hi'") to a packed value.
 * `bytes` is this argument's PFByteArray storage. A container (from JSON
 * text) is a new reference that the caller releases after the call.
 * Returns 0, or -1 with a packedfunc error recorded. */
static int convert_arg(const char* fname, const char* arg, const char* s, arg_kind kind, PFValue* v,
                       int* code, PFByteArray* bytes) {
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
                              "%s of '%s' must be a bool (true or false), got '%s'", arg, fname, s);
    case ARG_INT:
      r = parse_int(s, &i);
      if (r == 1) {
        v->v_int64 = i;
        *code = kPFInt;
        return 0;
      }
      return PFErrorSetFormat(kPFErrValueError, "%s of '%s' must be an integer%s, got '%s'", arg,
                              fname, r < 0 ? " within the int64 range" : "", s);
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
      return PFErrorSetFormat(kPFErrValueError, "%s of '%s' must be a number%s, got '%s'", arg,
                              fname, r < 0 ? " within the float64 range" : "", s);
    case ARG_SHAPE:
      return pf_json_read_shape(fname, arg, s, v, code);
    case ARG_AUTO:
      break;
  }
  if (s[0] == '[' || s[0] == '{') return pf_json_read(fname, arg, s, v, code);
  r = parse_int(s, &i);
  if (r == 1) {
    v->v_int64 = i;
    *code = kPFInt;
    return 0;
  }
  if (r < 0)
    return PFErrorSetFormat(
        kPFErrValueError, "%s of '%s' ('%s') is an integer outside the int64 range", arg, fname, s);
  r = parse_float(s, &x);
  if (r < 0)
    return PFErrorSetFormat(
        kPFErrValueError, "%s of '%s' ('%s') is a number outside the float64 range", arg, fname, s);
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

/* Prints a call's result and releases it when it is a reference. */
static void print_result(FILE* out, PFValue v, int code) {
  pf_json_print(out, v, code);
  fputc('\n', out);
  if (code == kPFFuncHandle || code == kPFModuleHandle || code == kPFObjectHandle)
    PFObjectFree(v.v_handle);
}

/* ---- commands ---- */

/* With --connect, the commands work on the remote servers' module. */
static PFModuleHandle g_remote;

static int cmd_list(FILE* out, FILE* err, const char* prefix) {
  int n = 0;
  const char** names = NULL;
  if (g_remote != NULL) {
    if (PFModListFunctionNames(g_remote, &n, &names) != 0) return report_error(err);
    for (int i = 0; i < n; ++i)
      if (prefix == NULL || strncmp(names[i], prefix, strlen(prefix)) == 0)
        fprintf(out, "%s\n", names[i]);
    return PF_EXIT_OK;
  }
  if (PFFuncListGlobalNamesWithPrefix(prefix, &n, &names) != 0) return report_error(err);
  for (int i = 0; i < n; ++i) fprintf(out, "%s\n", names[i]);
  return PF_EXIT_OK;
}

/* Looks `name` up; prints a KeyError and returns NULL when it is absent. */
static PFFunctionHandle lookup(FILE* err, const char* name) {
  PFFunctionHandle f = NULL;
  if ((g_remote ? PFModGetFunction(g_remote, name, 0, &f) : PFFuncGetGlobal(name, &f)) != 0) {
    report_error(err);
    return NULL;
  }
  if (f == NULL) {
    PFErrorSetFormat(kPFErrKeyError,
                     g_remote ? "no function named '%s' is exposed by the server"
                              : "no function named '%s' is registered",
                     name);
    report_error(err);
  }
  return f;
}

/* `pf list --types [PREFIX]`: the keys of the registered object types (the
 * loaded modules' among them), sorted. Registered types have the indices
 * from kPFObjectTypeRegisteredBegin on, and PFObjectTypeName names each. */
static int cmp_str(const void* a, const void* b) {
  return strcmp(*(const char* const*)a, *(const char* const*)b);
}

static int cmd_list_types(FILE* out, FILE* err, const char* prefix) {
  const char** keys = malloc(PF_OBJECT_TYPE_MAX_REGISTERED * sizeof(*keys));
  if (keys == NULL) {
    fputs("pf: MemoryError: out of memory\n", err);
    return PF_EXIT_ERROR;
  }
  size_t n = 0;
  for (uint32_t i = 0; i < PF_OBJECT_TYPE_MAX_REGISTERED; ++i) {
    const char* key = PFObjectTypeName(kPFObjectTypeRegisteredBegin + i);
    if (key != NULL && (prefix == NULL || strncmp(key, prefix, strlen(prefix)) == 0))
      keys[n++] = key;
  }
  qsort(keys, n, sizeof(*keys), cmp_str);
  for (size_t i = 0; i < n; ++i) fprintf(out, "%s\n", keys[i]);
  free(keys);
  return PF_EXIT_OK;
}

/* Prints a doc under a member, indented, or nothing without one. */
static void put_member_doc(FILE* out, const char* doc) {
  if (doc == NULL) return;
  while (*doc) {
    size_t n = strcspn(doc, "\n");
    fprintf(out, "    %.*s\n", (int)n, doc);
    doc += n + (doc[n] == '\n');
  }
}

/* " (from KEY)" for a member that type `t` inherits from type `from`. */
static void put_origin(FILE* out, const PFObjectTypeInfo* t, uint32_t from) {
  if (from != t->type_index) fprintf(out, " (from %s)", PFObjectTypeName(from));
}

/* `pf describe KEY` of an object type: its parent, doc, fields (type,
 * access, doc) and methods (signature, doc), the inherited ones marked. */
static int describe_type(FILE* out, FILE* err, uint32_t index) {
  const PFObjectTypeInfo* t = NULL;
  if (PFObjectTypeGetInfo(index, &t) != 0) return report_error(err);
  fprintf(out, "type: %s\n", t->key);
  fprintf(out, "parent: %s\n", t->parent_index ? PFObjectTypeName(t->parent_index) : "(none)");
  fprintf(out, "doc: %s\n", t->doc ? t->doc : "(none)");
  fprintf(out, "fields:%s\n", t->num_fields ? "" : " (none)");
  for (int i = 0; i < t->num_fields; ++i) {
    const PFFieldInfo* f = t->fields[i];
    fprintf(out, "  %s: %s, %s", f->name, f->type,
            f->flags & kPFFieldWritable ? "writable" : "read-only");
    put_origin(out, t, f->type_index);
    fputc('\n', out);
    put_member_doc(out, f->doc);
  }
  fprintf(out, "methods:%s\n", t->num_methods ? "" : " (none)");
  for (int i = 0; i < t->num_methods; ++i) {
    const PFMethodInfo* m = t->methods[i];
    fprintf(out, "  %s: %s%s", m->name, m->signature ? m->signature : "(packed: any arguments)",
            m->flags & kPFMethodStatic ? " (static)" : "");
    put_origin(out, t, m->type_index);
    fputc('\n', out);
    put_member_doc(out, m->doc);
  }
  return PF_EXIT_OK;
}

static int cmd_describe(FILE* out, FILE* err, const char* name) {
  /* A registered function, or else (locally) an object type. */
  if (g_remote == NULL) {
    PFFunctionHandle f = NULL;
    uint32_t type = 0;
    if (PFFuncGetGlobal(name, &f) != 0) return report_error(err);
    if (f == NULL && PFObjectTypeFind(name, &type) != 0) return report_error(err);
    if (f == NULL && type != 0) return describe_type(out, err, type);
    if (f == NULL) {
      PFErrorSetFormat(kPFErrKeyError, "no function or object type named '%s' is registered", name);
      return report_error(err);
    }
    PFFuncFree(f);
  }
  PFFunctionHandle f = lookup(err, name);
  if (f == NULL) return PF_EXIT_ERROR;
  const char *own = NULL, *sig = NULL, *doc = NULL;
  PFFuncGetInfo(f, &own, &sig, &doc);
  fprintf(out, "name: %s\n", name);
  if (own != NULL && strcmp(own, name) != 0) fprintf(out, "defined as: %s\n", own);
  fprintf(out, "signature: %s\n", sig ? sig : "(packed: any arguments)");
  uint32_t flags = 0; /* kPFFuncNonBlocking: hosts may keep their lock around it */
  if (PFFuncGetFlags(f, &flags) == 0 && (flags & kPFFuncNonBlocking))
    fputs("flags: non-blocking\n", out);
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
  PFByteArray* bytes = calloc(cap, sizeof(*bytes));
  char** kw_names = calloc(cap, sizeof(*kw_names));
  int status = PF_EXIT_OK, npos = 0, nkw = 0;
  if (vals == NULL || codes == NULL || bytes == NULL || kw_names == NULL) {
    fputs("pf: MemoryError: out of memory\n", err);
    status = PF_EXIT_ERROR;
  } else {
    const PFSignatureInfo* info = NULL;
    PFFuncGetSignatureInfo(f, &info);
    int named = info != NULL && info->named;
    /* Positional arguments first, then NAME=VALUE keywords (as Python
     * has them): values in one array, the keywords' after the others. */
    for (int i = 0; i < nargs && status == PF_EXIT_OK; ++i) {
      size_t n = 0;
      const char* text = argv[i];
      char what[PF_SIGNATURE_NAME_MAX + 16];
      arg_kind kind = ARG_AUTO;
      if (keyword_arg(named, argv[i], &n, &text)) {
        if ((kw_names[nkw] = strndup(argv[i], n)) == NULL) {
          fputs("pf: MemoryError: out of memory\n", err);
          status = PF_EXIT_ERROR;
          break;
        }
        snprintf(what, sizeof(what), "argument '%s'", kw_names[nkw]);
        /* The parameter's type reads the value; an unknown name reads
         * generically, and the call reports it. */
        for (int k = 0; k < info->num_params; ++k)
          if (strcmp(info->params[k]->name, kw_names[nkw]) == 0) kind = kind_of_param(info, k);
        ++nkw;
      } else if (nkw > 0) {
        status = command_error(err, "call",
                               "call: positional argument '%s' follows a keyword "
                               "argument (NAME=VALUE arguments come last)",
                               argv[i]);
        break;
      } else {
        snprintf(what, sizeof(what), "argument %d", i);
        kind = kind_of_param(info, i);
        ++npos;
      }
      if (convert_arg(name, what, text, kind, &vals[i], &codes[i], &bytes[i]) != 0) {
        codes[i] = kPFNull; /* nothing to release */
        status = report_error(err);
      }
    }
    PFValue ret;
    int ret_code;
    if (status == PF_EXIT_OK) {
      /* A keyword, or a default to take: the library binds the call. */
      int defaults = info != NULL && info->num_required < info->num_params;
      int rc = nkw > 0 || (defaults && npos < info->num_params)
                   ? PFFuncCallKw(f, vals, codes, npos, (const char* const*)kw_names, vals + npos,
                                  codes + npos, nkw, &ret, &ret_code)
                   : PFFuncCall(f, vals, codes, npos, &ret, &ret_code);
      if (rc != 0) status = report_error(err);
      else print_result(out, ret, ret_code);
    }
    /* The containers that JSON arguments became (only they are handles). */
    for (int i = 0; i < npos + nkw; ++i)
      if (codes[i] == kPFObjectHandle) PFObjectFree(vals[i].v_handle);
  }
  for (int i = 0; kw_names != NULL && i < nkw; ++i) free(kw_names[i]);
  free(vals);
  free(codes);
  free(bytes);
  free(kw_names);
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

/* ---- remote functions ---- */

/* libpackedfunc_rpc is loaded only by the commands that need it, so that
 * pf itself depends on the core library alone. */
typedef struct {
  int (*connect)(const char*, const PFRPCOptions*, PFModuleHandle*);
  int (*disconnect)(PFModuleHandle);
  int (*serve)(const char*, const PFRPCServerOptions*, PFRPCServerHandle*);
  int (*get_endpoint)(PFRPCServerHandle, const char**);
  int (*stop)(PFRPCServerHandle);
  int (*public_key)(const char*, char*);
} rpc_api;

static int load_rpc(FILE* err, rpc_api* api) {
#ifdef PF_CLI_NO_MAIN
  /* The parser's fuzzer must not open sockets or wait for signals. */
  (void)api;
  fputs("pf: RuntimeError: remote functions are not available in this build\n", err);
  return -1;
#else
  void* lib =
      dlopen("libpackedfunc_rpc.so." PF_STRINGIFY_(PF_VERSION_MAJOR), RTLD_NOW | RTLD_LOCAL);
  if (lib == NULL) {
    fprintf(err, "pf: RuntimeError: cannot load the remote-function library: %s\n", dlerror());
    return -1;
  }
  *(void**)&api->connect = dlsym(lib, "PFRPCConnect");
  *(void**)&api->disconnect = dlsym(lib, "PFRPCDisconnect");
  *(void**)&api->serve = dlsym(lib, "PFRPCServe");
  *(void**)&api->get_endpoint = dlsym(lib, "PFRPCServerGetEndpoint");
  *(void**)&api->stop = dlsym(lib, "PFRPCServerStop");
  *(void**)&api->public_key = dlsym(lib, "PFRPCCurvePublicKey");
  if (!api->connect || !api->disconnect || !api->serve || !api->get_endpoint || !api->stop ||
      !api->public_key) {
    fputs("pf: RuntimeError: the remote-function library lacks an entry point\n", err);
    return -1;
  }
  return 0; /* the library stays loaded for the process */
#endif
}

static void log_line(void* user, const char* line) {
  fprintf((FILE*)user, "%s\n", line);
  fflush((FILE*)user);
}

/* pf serve: parses its options, serves until SIGINT or SIGTERM. */
static int cmd_serve(FILE* err, int nargs, char** argv) {
  const char* listen = NULL;
  const char* key_file = NULL;
  const char* authorized_file = NULL;
  const char** expose = calloc((size_t)nargs + 1, sizeof *expose);
  const char** loads = calloc((size_t)nargs + 1, sizeof *loads);
  int nexpose = 0, nloads = 0, status = -1;
  int64_t workers = 4, max_calls = 0, max_workers = 0, max_callbacks = 0, max_exports = 0;
  if (expose == NULL || loads == NULL) {
    free(expose);
    free(loads);
    fputs("pf: MemoryError: out of memory\n", err);
    return PF_EXIT_ERROR;
  }
  for (int i = 0; i < nargs && status < 0; ++i) {
    const char* v = NULL;
    int r;
    if ((r = option_value(nargs, argv, &i, "--listen", &v)) != 0) {
      if (r < 0 || v[0] == '\0') status = usage_error(err, "%s", "--listen needs an ENDPOINT");
      listen = v;
    } else if ((r = option_value(nargs, argv, &i, "--expose", &v)) != 0) {
      if (r < 0) status = usage_error(err, "%s", "--expose needs a PREFIX");
      expose[nexpose++] = v;
    } else if ((r = option_value(nargs, argv, &i, "--load", &v)) != 0) {
      if (r < 0 || v[0] == '\0') status = usage_error(err, "%s", "--load needs a library path");
      loads[nloads++] = v;
    } else if ((r = option_value(nargs, argv, &i, "--workers", &v)) != 0) {
      if (r < 0 || parse_int(v, &workers) != 1 || workers < 1 || workers > 256)
        status = usage_error(err, "%s", "--workers needs a number from 1 to 256");
    } else if ((r = option_value(nargs, argv, &i, "--max-calls-per-client", &v)) != 0) {
      if (r < 0 || parse_int(v, &max_calls) != 1 || max_calls < 1 || max_calls > INT32_MAX)
        status = usage_error(err, "%s", "--max-calls-per-client needs a positive number");
    } else if ((r = option_value(nargs, argv, &i, "--max-callbacks-per-client", &v)) != 0) {
      if (r < 0 || parse_int(v, &max_callbacks) != 1 || max_callbacks < 1 || max_callbacks > 256)
        status = usage_error(err, "%s", "--max-callbacks-per-client needs a number from 1 to 256");
    } else if ((r = option_value(nargs, argv, &i, "--max-workers-per-client", &v)) != 0) {
      if (r < 0 || parse_int(v, &max_workers) != 1 || max_workers < 1 || max_workers > 256)
        status = usage_error(err, "%s", "--max-workers-per-client needs a number from 1 to 256");
    } else if ((r = option_value(nargs, argv, &i, "--max-exports-per-client", &v)) != 0) {
      if (r < 0 || parse_int(v, &max_exports) != 1 || max_exports < 1 || max_exports > INT32_MAX)
        status = usage_error(err, "%s", "--max-exports-per-client needs a positive number");
    } else if ((r = option_value(nargs, argv, &i, "--curve-secret-key", &v)) != 0) {
      if (r < 0 || v[0] == '\0') status = usage_error(err, "%s", "--curve-secret-key needs a FILE");
      key_file = v;
    } else if ((r = option_value(nargs, argv, &i, "--authorized-keys", &v)) != 0) {
      if (r < 0 || v[0] == '\0') status = usage_error(err, "%s", "--authorized-keys needs a FILE");
      authorized_file = v;
    } else {
      status = unknown_argument(err, "serve", argv[i]);
    }
  }
  if (status < 0 && listen == NULL)
    status = usage_error(err, "%s", "serve needs --listen ENDPOINT");
  if (status < 0 && authorized_file != NULL && key_file == NULL)
    status = usage_error(err, "%s", "--authorized-keys needs --curve-secret-key FILE");
  rpc_api api;
  char secret[PF_RPC_KEY_SIZE];
  for (int k = 0; status < 0 && k < nloads; ++k)
    if (load_module(err, loads[k], "") != PF_EXIT_OK) status = PF_EXIT_ERROR;
  if (status < 0 && key_file != NULL && pf_key_read_file(err, key_file, secret) != 0)
    status = PF_EXIT_ERROR;
  pf_key_list authorized = {0};
  if (status < 0 && authorized_file != NULL &&
      pf_key_read_authorized(err, authorized_file, &authorized) != 0)
    status = PF_EXIT_ERROR;
  if (status < 0 && load_rpc(err, &api) != 0) status = PF_EXIT_ERROR;
  if (status < 0 && key_file != NULL && pf_key_check(err, api.public_key, key_file, 0, secret) != 0)
    status = PF_EXIT_ERROR;
  for (int k = 0; status < 0 && k < authorized.count; ++k)
    if (pf_key_check(err, api.public_key, authorized_file, authorized.lines[k],
                     authorized.keys[k]) != 0)
      status = PF_EXIT_ERROR;
  if (status < 0) {
    /* Block the signals before the server's threads start, so that they
     * inherit the mask and the signals come to sigwait below. */
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    PFRPCServerOptions o;
    memset(&o, 0, sizeof o);
    o.num_workers = (int)workers;
    o.max_calls_per_client = (int)max_calls;
    o.max_workers_per_client = (int)max_workers;
    o.max_callbacks_per_client = (int)max_callbacks;
    o.max_exports_per_client = (int)max_exports;
    o.expose = expose;
    o.num_expose = nexpose;
    o.curve_secret_key = key_file ? secret : NULL;
    o.authorized_keys = authorized.ptrs;
    o.num_authorized_keys = authorized.count;
    o.log = log_line;
    o.log_user_data = err;
    PFRPCServerHandle server = NULL;
    const char* ep = NULL;
    if (api.serve(listen, &o, &server) != 0 || api.get_endpoint(server, &ep) != 0) {
      status = report_error(err);
    } else {
      fprintf(err, "pf serve: listening on %s (%d workers; %s%s%s%s)\n", ep, (int)workers,
              nexpose ? "exposing names that begin with" : "exposing nothing: use --expose PREFIX",
              nexpose ? " '" : "", nexpose ? expose[0] : "",
              nexpose ? (nexpose > 1 ? "' and more" : "'") : "");
      fflush(err);
      int sig = 0;
      sigwait(&set, &sig);
      api.stop(server);
      status = PF_EXIT_OK;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  pf_key_list_free(&authorized);
  free(expose);
  free(loads);
  return status;
}

/* ---- the commands ---- */

/* What a command gets: its streams, the arguments after its name, and the
 * --load options of pf (for a command that runs before they are loaded). */
typedef struct {
  FILE* out;
  FILE* err;
  int nargs;
  char** args;
  const char** loads;    /* --load paths, in order */
  const char** prefixes; /* the --prefix in force for each */
  int num_loads;
} cmd_args;

typedef struct {
  const char* name;
  const char* synopsis;  /* its arguments as the usage shows them; further lines: '\n' */
  const char* summary;   /* what it does; lines separated by '\n' */
  const char* details;   /* more, after the command list and in its own help; or NULL */
  int min_args;          /* how many arguments it takes */
  int max_args;          /* -1: any number */
  const char* bad_count; /* the usage error for another number */
  int scan;              /* how many of its arguments may be --help or a misplaced
                            option of pf (-1: all of them; the arguments of a
                            function that `call` calls are the function's) */
  int own_options;       /* it parses options of its own, and says itself which
                            options of pf were put after it */
  int remote;            /* it works on the functions of --connect servers */
  int early;             /* it runs before any module is loaded */
  int (*run)(const cmd_args* a);
  /* NULL, or checks its arguments further before anything is loaded or
   * connected: a usage error's exit status, or -1. */
  int (*check)(FILE* err, int nargs, char** args, int remote);
} pf_command;

/* list [--types] [PREFIX]: --types anywhere, and at most one PREFIX; a
 * second --types is a PREFIX. */
static const char* list_args(int nargs, char** args, int* types, int* extra) {
  const char* prefix = NULL;
  *types = *extra = 0;
  for (int k = 0; k < nargs; ++k) {
    if (strcmp(args[k], "--types") == 0 && !*types) *types = 1;
    else if (prefix == NULL) prefix = args[k];
    else *extra = 1;
  }
  return prefix;
}

static int check_list(FILE* err, int nargs, char** args, int remote) {
  int types, extra;
  list_args(nargs, args, &types, &extra);
  if (extra) return command_error(err, "list", "%s", "list takes at most one PREFIX");
  if (types && remote)
    return command_error(err, "list", "%s",
                         "list --types lists the object types of this process: it does not "
                         "take --connect");
  return -1;
}

static int run_list(const cmd_args* a) {
  int types, extra;
  const char* prefix = list_args(a->nargs, a->args, &types, &extra);
  return types ? cmd_list_types(a->out, a->err, prefix) : cmd_list(a->out, a->err, prefix);
}

static int run_describe(const cmd_args* a) { return cmd_describe(a->out, a->err, a->args[0]); }

static int run_call(const cmd_args* a) {
  return cmd_call(a->out, a->err, a->args[0], a->nargs - 1, a->args + 1);
}

static int run_serve(const cmd_args* a) { return cmd_serve(a->err, a->nargs, a->args); }

extern char** environ;

/* How to choose a Python for `pf stubgen`, for its errors. */
#define PF_CHOOSE_PYTHON                                                                    \
  "set PF_PYTHON (or PYTHON) to a Python that can, or make packedfunc importable (install " \
  "it, or add its bindings/python to PYTHONPATH)"

/* Whether `python` finds the packedfunc package (without importing it, on
 * no stream of pf's): 1 yes, 0 no, or -1 after printing that it cannot be
 * run. */
static int python_has_packedfunc(FILE* err, const char* python, const char* source) {
  char* argv[] = {(char*)python, (char*)"-c",
                  (char*)"import importlib.util, sys\n"
                         "sys.exit(importlib.util.find_spec('packedfunc') is None)",
                  NULL};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  for (int fd = 0; fd <= 2; ++fd)
    posix_spawn_file_actions_addopen(&fa, fd, "/dev/null", fd ? O_WRONLY : O_RDONLY, 0);
  pid_t pid;
  int rc = posix_spawnp(&pid, python, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) {
    if (source != NULL)
      fprintf(err, "pf: stubgen: cannot run %s (%s): %s; " PF_CHOOSE_PYTHON "\n", python, source,
              strerror(rc));
    return -1;
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0)
    if (errno != EINTR) return 0;
  return WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
}

/* The Python that `pf stubgen` runs: $PF_PYTHON, else $PYTHON, else the
 * first of python3 (on PATH) and /usr/bin/python3 that finds packedfunc
 * (the first on PATH may be another install of Python); NULL after
 * printing why none will do. */
static const char* stubgen_python(FILE* err) {
  static const char* const chosen[] = {"PF_PYTHON", "PYTHON"};
  for (size_t i = 0; i < sizeof chosen / sizeof chosen[0]; ++i) {
    const char* python = getenv(chosen[i]);
    if (python == NULL || python[0] == '\0') continue;
    int has = python_has_packedfunc(err, python, chosen[i]);
    if (has == 0)
      fprintf(err, "pf: stubgen: %s (%s) cannot import packedfunc: " PF_CHOOSE_PYTHON "\n", python,
              chosen[i]);
    return has == 1 ? python : NULL;
  }
  static const char* const fallbacks[] = {"python3", "/usr/bin/python3"};
  for (size_t i = 0; i < sizeof fallbacks / sizeof fallbacks[0]; ++i)
    if (python_has_packedfunc(err, fallbacks[i], NULL) == 1) return fallbacks[i];
  fprintf(err,
          "pf: stubgen: no Python that can import packedfunc (tried python3, /usr/bin/python3): "
          "" PF_CHOOSE_PYTHON "\n");
  return NULL;
}

/* `pf stubgen ARG...` runs `PYTHON -m packedfunc.stubgen` (stubgen_python
 * chooses it) with pf's --prefix/--load options, then ARG..., on pf's
 * streams, and exits as it does (2 for its usage errors, 1 for any other
 * failure). */
static int run_stubgen(const cmd_args* a) {
  const char* python = stubgen_python(a->err);
  if (python == NULL) return PF_EXIT_ERROR;
  size_t cap = 4 + 4 * (size_t)a->num_loads + (size_t)a->nargs;
  char** argv = calloc(cap, sizeof(*argv));
  if (argv == NULL) {
    fputs("pf: MemoryError: out of memory\n", a->err);
    return PF_EXIT_ERROR;
  }
  size_t n = 0;
  argv[n++] = (char*)python;
  argv[n++] = (char*)"-m";
  argv[n++] = (char*)"packedfunc.stubgen";
  for (int k = 0; k < a->num_loads; ++k) {
    argv[n++] = (char*)"--prefix";
    argv[n++] = (char*)a->prefixes[k];
    argv[n++] = (char*)"--load";
    argv[n++] = (char*)a->loads[k];
  }
  for (int k = 0; k < a->nargs; ++k) argv[n++] = a->args[k];
  fflush(a->out);
  fflush(a->err);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  int fd_out = fileno(a->out), fd_err = fileno(a->err);
  if (fd_out >= 0 && fd_out != 1) posix_spawn_file_actions_adddup2(&fa, fd_out, 1);
  if (fd_err >= 0 && fd_err != 2) posix_spawn_file_actions_adddup2(&fa, fd_err, 2);
  pid_t pid;
  int rc = posix_spawnp(&pid, python, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  free(argv);
  if (rc != 0) {
    fprintf(a->err, "pf: stubgen: cannot run %s: %s\n", python, strerror(rc));
    return PF_EXIT_ERROR;
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0)
    if (errno != EINTR) return PF_EXIT_ERROR;
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) return PF_EXIT_OK;
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == PF_EXIT_USAGE) return PF_EXIT_USAGE;
  return PF_EXIT_ERROR;
}

static int run_help(const cmd_args* a);

static const pf_command k_commands[] = {
    {"list", "[--types] [PREFIX]",
     "print the registered function names (those that\n"
     "begin with PREFIX), one per line, sorted; with\n"
     "--types, the keys of the registered object types\n"
     "(the loaded modules' among them)",
     NULL, 0, 2, "list takes at most one PREFIX", -1, 0, 1, 0, run_list, check_list},
    {"describe", "NAME",
     "print a function's name, signature and docstring,\n"
     "or an object type's parent, doc, fields (type,\n"
     "access, doc) and methods (signature, doc)",
     NULL, 1, 1, "describe takes exactly one NAME", -1, 0, 1, 0, run_describe, NULL},
    {"call", "NAME [ARG...]", "call a function and print its result",
     "Arguments of `call`: each ARG becomes an int (decimal or 0x hex, within\n"
     "int64), a float (3.5, 1e-3, inf, nan), a bool (true, false), null (null),\n"
     "a container when it begins with [ or { (JSON: [1, \"a\"] is an array,\n"
     "{\"k\": 1.5} a map; keys may also be integers; nested up to " PF_STRINGIFY_(
         PF_CLI_JSON_DEPTH) " levels),\n"
                            "or else a str. A function with a signature (a typed function) gets "
                            "each\n"
                            "argument converted by the signature's type instead: \"3\" is 3.0 for "
                            "a\n"
                            "float64 parameter, and stays the text \"3\" for a str parameter; a\n"
                            "shape parameter takes a JSON list of ints, such as [2, 3].\n"
                            "\n"
                            "When the signature names its parameters, an ARG NAME=VALUE passes "
                            "VALUE\n"
                            "(read by that parameter's type) by keyword, after the positional "
                            "ARGs:\n"
                            "  pf call clamp 1.5 hi=1\n"
                            "The library matches the names and fills the defaults of the "
                            "parameters\n"
                            "left out, with Python's errors (\"clamp() got an unexpected keyword\n"
                            "argument 'y'\"). To pass text with \"=\" positionally to such a "
                            "function,\n"
                            "name its parameter: text=a=b.\n"
                            "\n"
                            "Results print as: an int or float in decimal (floats with enough "
                            "digits\n"
                            "to read back exactly), true/false, null, a str as is, bytes as "
                            "b'...',\n"
                            "an array or shape as [...] and a map as {...} (JSON-style, strings\n"
                            "quoted), other values as <kind ...>.\n",
     1, -1, "call needs a function NAME", 1, 0, 1, 0, run_call, NULL},
    {"serve",
     "--listen ENDPOINT [--expose PREFIX]... [--workers N]\n"
     "[--load LIB.so]... [--curve-secret-key FILE [--authorized-keys FILE]]\n"
     "[--max-calls-per-client N] [--max-callbacks-per-client N]\n"
     "[--max-workers-per-client N] [--max-exports-per-client N]",
     "serve the registered functions whose names begin\n"
     "with an exposed PREFIX (none unless --expose is\n"
     "given; --expose '' exposes all) to remote clients\n"
     "on a ZeroMQ ENDPOINT such as tcp://127.0.0.1:9190,\n"
     "with N worker threads (4), until SIGINT or SIGTERM;\n"
     "prints one line to stderr when ready; with CURVE,\n"
     "only clients whose public key is in the\n"
     "authorized-keys FILE (one per line) may connect.\n"
     "Clients (connections) take turns for the workers;\n"
     "each may have at most --max-calls-per-client calls\n"
     "queued or running (64), at most\n"
     "--max-callbacks-per-client workers waiting for its\n"
     "callbacks (N - 1, or 1), and at most\n"
     "--max-workers-per-client workers (N), and hold at\n"
     "most --max-exports-per-client functions that the\n"
     "server returned to it (1024); a call or a callback\n"
     "beyond a limit fails at once with a RuntimeError\n"
     "that names the limit",
     NULL, 0, -1, NULL, -1, 1, 0, 0, run_serve, NULL},
    {"stubgen", "(MODULE.so | --registry PREFIX) [--lang ts] [-o FILE] [ARG...]",
     "write Python type stubs (.pyi) of a module's, or of\n"
     "the registered, functions and object types; with\n"
     "--lang ts, a module's TypeScript declarations (.d.ts)",
     "`pf stubgen ARG...` runs `PYTHON -m packedfunc.stubgen ARG...` (the\n"
     "Python package's stub generator, which knows the Python types and the\n"
     "Node.js package's: --lang ts), after the --prefix and --load options\n"
     "given to pf, and exits as it does.\n"
     "PYTHON is $PF_PYTHON, else $PYTHON, else the first of python3 (on\n"
     "PATH) and /usr/bin/python3 that can import packedfunc;\n"
     "`PYTHON -m packedfunc.stubgen --help` lists every ARG.\n",
     0, -1, NULL, -1, 1, 0, 1, run_stubgen, NULL},
    {"help", "[COMMAND]",
     "print this help, or the help of COMMAND (as\n"
     "pf COMMAND --help does)",
     NULL, 0, 1, "help takes at most one COMMAND", -1, 0, 1, 1, run_help, NULL},
};

#define NUM_COMMANDS ((int)(sizeof(k_commands) / sizeof(k_commands[0])))

static const pf_command* find_command(const char* name) {
  for (int k = 0; k < NUM_COMMANDS; ++k)
    if (strcmp(k_commands[k].name, name) == 0) return &k_commands[k];
  return NULL;
}

static void put_usage(FILE* out) {
  fputs(
      "usage: pf [OPTIONS] COMMAND [ARGS]\n"
      "\n"
      "List, describe, call and serve packedfunc functions from the shell.\n"
      "\n"
      "Commands:\n",
      out);
  for (int k = 0; k < NUM_COMMANDS; ++k) {
    const pf_command* c = &k_commands[k];
    int col = fprintf(out, "  %s ", c->name);
    put_description(out, put_text(out, c->synopsis, col, 8), c->summary);
  }
  fputc('\n', out);
  put_options(out);
  for (int k = 0; k < NUM_COMMANDS; ++k)
    if (k_commands[k].details) fprintf(out, "\n%s", k_commands[k].details);
  fprintf(out, "\n%s", k_usage_tail);
}

/* `pf COMMAND --help`. */
static void put_command_help(FILE* out, const pf_command* c) {
  int col = fprintf(out, "usage: pf [OPTIONS] %s ", c->name);
  put_text(out, c->synopsis, col, 8);
  fputs("\n\n  ", out);
  put_text(out, c->summary, 2, 2);
  fputs("\n", out);
  if (c->details) fprintf(out, "\n%s", c->details);
  fputs("\nOptions go before the command; 'pf --help' lists them.\n", out);
}

static int run_help(const cmd_args* a) {
  if (a->nargs == 0) {
    put_usage(a->out);
    return PF_EXIT_OK;
  }
  const pf_command* c = find_command(a->args[0]);
  if (c == NULL) return usage_error(a->err, "unknown command '%s'", a->args[0]);
  put_command_help(a->out, c);
  return PF_EXIT_OK;
}

/* Checks the arguments of command `c`: prints its help when it is asked
 * for, or a usage error; otherwise returns -1. */
static int check_command(FILE* out, FILE* err, const pf_command* c, int nargs, char** args,
                         int remote) {
  int scan = c->scan < 0 || c->scan > nargs ? nargs : c->scan;
  for (int k = 0; k < scan; ++k) {
    if (strcmp(args[k], k_options[OPT_HELP].name) == 0 ||
        strcmp(args[k], k_options[OPT_HELP].alias) == 0) {
      put_command_help(out, c);
      return PF_EXIT_OK;
    }
  }
  for (int k = 0; k < scan && !c->own_options; ++k) {
    const pf_option* o = option_of_pf(args[k]);
    if (o != NULL) return misplaced_option(err, c->name, o);
  }
  if (nargs < c->min_args || (c->max_args >= 0 && nargs > c->max_args))
    return command_error(err, c->name, "%s", c->bad_count);
  if (remote && !c->remote)
    return command_error(err, c->name, "%s does not take --connect", c->name);
  return c->check ? c->check(err, nargs, args, remote) : -1;
}

/* "list, describe, call, serve or help", from the table. */
static void command_names(char* buf, size_t cap) {
  size_t used = 0;
  buf[0] = '\0';
  for (int k = 0; k < NUM_COMMANDS && used < cap; ++k)
    used += (size_t)snprintf(buf + used, cap - used, "%s%s",
                             k == 0                  ? ""
                             : k == NUM_COMMANDS - 1 ? " or "
                                                     : ", ",
                             k_commands[k].name);
}

/* --connect: reads the client's key file (before the library, so that a
 * bad file is named whether or not the library loads), loads the rpc
 * library into *api and connects g_remote. Returns -1 on success. */
static int connect_remote(FILE* err, rpc_api* api, const char* endpoints, int64_t timeout_ms,
                          const char* server_key, const char* key_file) {
  char secret[PF_RPC_KEY_SIZE], pub[PF_RPC_KEY_SIZE];
  PFRPCOptions o;
  memset(&o, 0, sizeof o);
  o.timeout_ms = (int)timeout_ms;
  if (key_file != NULL && pf_key_read_file(err, key_file, secret) != 0) return PF_EXIT_ERROR;
  if (load_rpc(err, api) != 0) return PF_EXIT_ERROR;
  if (key_file != NULL) {
    if (pf_key_check(err, api->public_key, key_file, 0, secret) != 0) return PF_EXIT_ERROR;
    if (api->public_key(secret, pub) != 0) return report_error(err);
    o.server_key = server_key;
    o.client_public_key = pub;
    o.client_secret_key = secret;
  }
  if (api->connect(endpoints, &o, &g_remote) != 0) return report_error(err);
  return -1;
}

/* What the options of pf asked for. */
typedef struct {
  const char** loads;    /* --load paths, in order */
  const char** prefixes; /* the --prefix in force for each */
  int num_loads;
  const char* connect_to;
  const char* server_key;
  const char* client_key_file;
  int64_t timeout_ms;
} pf_options;

/* Parses the options of pf (before the command) into *o; returns the index
 * of the command in argv, with *status -1, or *status an exit status (help,
 * version, a usage error). */
static int parse_options(int argc, char** argv, FILE* out, FILE* err, pf_options* o, int* status) {
  const char* prefix = "";
  int i = 1;
  *status = -1;
  for (; *status < 0 && i < argc && argv[i][0] == '-' && argv[i][1] != '\0'; ++i) {
    const char* v = NULL;
    int k = -1;
    for (int j = 0; j < OPT_COUNT && k < 0; ++j) {
      const pf_option* opt = &k_options[j];
      if (opt->value != NULL
              ? option_value(argc, argv, &i, opt->name, &v) != 0
              : strcmp(argv[i], opt->name) == 0 || (opt->alias && strcmp(argv[i], opt->alias) == 0))
        k = j;
    }
    switch (k) {
      case OPT_END:
        return i + 1;
      case OPT_HELP:
        put_usage(out);
        *status = PF_EXIT_OK;
        break;
      case OPT_VERSION:
        fprintf(out, "pf (packedfunc) %s\n", PFGetApiBase()->GetVersionString());
        *status = PF_EXIT_OK;
        break;
      case OPT_LOAD:
        if (v == NULL || v[0] == '\0') break;
        o->loads[o->num_loads] = v;
        o->prefixes[o->num_loads++] = prefix;
        continue;
      case OPT_PREFIX:
        if (v == NULL) break;
        prefix = v;
        continue;
      case OPT_CONNECT:
        if (v == NULL || v[0] == '\0') break;
        o->connect_to = v;
        continue;
      case OPT_TIMEOUT:
        if (v == NULL || parse_int(v, &o->timeout_ms) != 1 || o->timeout_ms < 1 ||
            o->timeout_ms > INT32_MAX)
          break;
        continue;
      case OPT_SERVER_KEY:
        if (v == NULL || v[0] == '\0') break;
        o->server_key = v;
        continue;
      case OPT_CLIENT_KEY:
        if (v == NULL || v[0] == '\0') break;
        o->client_key_file = v;
        continue;
      default:
        *status = usage_error(err, "unknown option '%s'", argv[i]);
        continue;
    }
    /* A missing or bad value (help and version set the status). */
    if (*status < 0) *status = usage_error(err, "%s", k_options[k].bad_value);
  }
  return i;
}

int pf_cli_main(int argc, char** argv, FILE* out, FILE* err) {
  if (argc < 1 || argv == NULL) return usage_error(err, "%s", "no arguments");
  for (int k = 0; k < argc; ++k)
    if (argv[k] == NULL) return usage_error(err, "%s", "argv holds a NULL argument");
  /* First the whole command line is checked, so a usage error has no side
   * effects; then modules are loaded, in order; then the command runs. */
  pf_options o;
  memset(&o, 0, sizeof o);
  o.loads = calloc((size_t)argc, sizeof(*o.loads));
  o.prefixes = calloc((size_t)argc, sizeof(*o.prefixes));
  if (o.loads == NULL || o.prefixes == NULL) {
    free(o.loads);
    free(o.prefixes);
    fputs("pf: MemoryError: out of memory\n", err);
    return PF_EXIT_ERROR;
  }
  int status;
  int i = parse_options(argc, argv, out, err, &o, &status);
  const pf_command* cmd = NULL;
  cmd_args a = {out,
                err,
                i < argc ? argc - i - 1 : 0,
                argv + (i < argc ? i + 1 : argc),
                o.loads,
                o.prefixes,
                o.num_loads};
  if (status >= 0) {
    /* done: help, version or a usage error */
  } else if (i >= argc) {
    char names[128];
    command_names(names, sizeof names);
    status = usage_error(err, "missing command (%s)", names);
  } else if ((cmd = find_command(argv[i])) == NULL) {
    status = usage_error(err, "unknown command '%s'", argv[i]);
  } else {
    status = check_command(out, err, cmd, a.nargs, a.args, o.connect_to != NULL);
  }
  if (status < 0 && o.server_key != NULL && o.client_key_file == NULL)
    status = usage_error(err, "%s", "--server-key needs --client-secret-key FILE too");
  if (status < 0 && cmd->early) status = cmd->run(&a);
  for (int k = 0; status < 0 && k < o.num_loads; ++k)
    if (load_module(err, o.loads[k], o.prefixes[k]) != PF_EXIT_OK) status = PF_EXIT_ERROR;
  rpc_api api;
  if (status < 0 && o.connect_to != NULL)
    status = connect_remote(err, &api, o.connect_to, o.timeout_ms, o.server_key, o.client_key_file);
  if (status < 0) status = cmd->run(&a);
  if (g_remote != NULL) {
    api.disconnect(g_remote);
    PFModFree(g_remote);
    g_remote = NULL;
  }
  free(o.loads);
  free(o.prefixes);
  fflush(out);
  return status;
}

#ifndef PF_CLI_NO_MAIN
int main(int argc, char** argv) { return pf_cli_main(argc, argv, stdout, stderr); }
#endif
