/* The small library of docs/guide.md's comparison ("Compared: packedfunc's
 * C form and C++ layer, tvm-ffi, nanobind"), in packedfunc's C form: a
 * function with defaults, a class with a string field and a method that
 * can fail, a function taking a float64 array. The lines between a
 * "lines: ROW" marker and "end" are the binding code of that row, which
 * tools/test-readme.sh counts against the table; the rest is the library's
 * own code. It builds as a plugin, which docs/examples/compare.py uses;
 * examples/cxx_layer.cc is the same library with the C++ layer. */
#include <string.h>

#include "packedfunc/c_api.h"

static double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

typedef struct {
  char* owner; /* str: the runtime's allocator, owned by the instance */
  int64_t balance;
} Account;

/* 0, or -1 when the balance does not cover the amount. */
static int account_withdraw(Account* a, int64_t amount) {
  if (amount > a->balance) return -1;
  a->balance -= amount;
  return 0;
}

static double total(DLTensor* x) {
  const double* v = (const double*)((const char*)x->data + x->byte_offset);
  double s = 0;
  for (int64_t i = 0; i < x->shape[0]; ++i) s += v[i];
  return s;
}

/* lines: clamp */
PF_REGISTER_CHECKED("cmpc.clamp", clamp, PF_RET(float64), PF_ARG(float64, x),
                    PF_ARG_DEFAULT(float64, lo, 0), PF_ARG_DEFAULT(float64, hi, 1));
/* end */

/* lines: class */
static void init(PFObjectHandle self, const char* owner) {
  Account* a = NULL;
  PFObjectGetData(self, (void**)&a);
  a->owner = PFMemAlloc(strlen(owner) + 1);
  if (a->owner != NULL) strcpy(a->owner, owner);
}
static int withdraw(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* res) {
  (void)res;
  if (n != 2 || codes[1] != kPFInt)
    return PFErrorSetFormat(kPFErrTypeError, "withdraw(amount): amount is an int");
  Account* a = NULL;
  PFObjectGetData(args[0].v_handle, (void**)&a);
  if (account_withdraw(a, args[1].v_int64) != 0)
    return PFErrorSetFormat(kPFErrValueError, "withdraw: not enough money");
  PFValue v = {.v_int64 = a->balance};
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}
static const PFFieldDesc fields[] = {PF_FIELD(Account, owner, "str", kPFFieldWritable, NULL),
                                     PF_FIELD(Account, balance, "int64", kPFFieldWritable, NULL)};
static const PFMethodDesc methods[] = {
    PF_METHOD_CHECKED("__init__", init, PF_RET(void), PF_ARG(obj(cmpc.Account), self),
                      PF_ARG(str, owner)),
    PF_METHOD_PACKED("withdraw", withdraw, NULL)};
static const PFObjectTypeDesc account = {PF_OBJECT_TYPE_DESC_ABI,
                                         "cmpc.Account",
                                         NULL,
                                         sizeof(Account),
                                         NULL,
                                         "A bank account.",
                                         fields,
                                         PF_COUNTOF(fields),
                                         methods,
                                         PF_COUNTOF(methods)};
PF_REGISTER_OBJECT_TYPE(account);
/* end */

/* lines: total */
PF_REGISTER_CHECKED("cmpc.total", total, PF_RET(float64),
                    PF_ARG(tensor(float64, 1, contiguous), x));
/* end */
