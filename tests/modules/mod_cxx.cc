// Test fixture: a module written in C++17 that registers with the same
// macros as a C one (compiled with g++ -std=c++17 -Wall -Wextra -Werror):
// a packed function, a packed function with a signature kept as metadata, a
// typed function with named parameters and defaults, one with a constrained
// tensor parameter, a static member function, and an object type with a
// typed method and a constructor.
#include <cstdint>
#include <cstring>

#include "packedfunc/c_api.h"

namespace cxx_fixture {

// Packed: the sum of its int arguments.
int sum(PFValue* args, int* codes, int n, PFRetValueHandle ret, void*) {
  int64_t s = 0;
  for (int i = 0; i < n; ++i) {
    if (codes[i] != kPFInt)
      return PFErrorSetFormat(kPFErrTypeError, "cxx.sum: argument %d is not an int", i);
    s += args[i].v_int64;
  }
  PFValue v;
  v.v_int64 = s;
  int code = kPFInt;
  return PFCFuncSetReturn(ret, &v, &code, 1);
}

// Typed, with names and defaults.
double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

// Typed, with a constrained tensor parameter: the sum of a float64 vector.
double total(DLTensor* x, double scale) {
  const double* v =
      reinterpret_cast<const double*>(static_cast<const char*>(x->data) + x->byte_offset);
  double s = 0;
  for (int64_t i = 0; i < x->shape[0]; ++i) s += v[i];
  return s * scale;
}

struct Scaler {
  static int64_t scale(int64_t x, int64_t by) { return x * by; }
};

struct Counter {
  int64_t count;
};

Counter* counter(PFObjectHandle self) {
  void* d = nullptr;
  PFObjectGetData(self, &d);
  return static_cast<Counter*>(d);
}

void counter_init(PFObjectHandle self, int64_t start) { counter(self)->count = start; }
int64_t counter_add(PFObjectHandle self, int64_t by) { return counter(self)->count += by; }

}  // namespace cxx_fixture

PF_REGISTER_PACKED("cxx.sum", cxx_fixture::sum, "Sums ints.");
PF_REGISTER_PACKED_SIG("cxx.sum2", cxx_fixture::sum, "int64(a: int64, b: int64 = 40)");
PF_REGISTER_TYPED("cxx.clamp", cxx_fixture::clamp,
                  "float64(x: float64, lo: float64 = 0, hi: float64 = 1)", "Clamps x.");
PF_REGISTER_TYPED("cxx.scale", cxx_fixture::Scaler::scale, "int64(x: int64, by: int64 = 2)");
PF_REGISTER_TYPED("cxx.total", cxx_fixture::total,
                  "float64(x: tensor<float64, 1, contiguous>, scale: float64 = 1)",
                  "Sums x, times scale.");

static const PFFieldDesc k_counter_fields[] = {
    PF_FIELD(cxx_fixture::Counter, count, "int64", kPFFieldWritable, "The count."),
};
static const PFMethodDesc k_counter_methods[] = {
    PF_METHOD_TYPED("__init__", cxx_fixture::counter_init,
                    "void(self: obj<cxx.Counter>, start: int64 = 0)", nullptr),
    PF_METHOD_TYPED("add", cxx_fixture::counter_add, "int64(self: obj<cxx.Counter>, by: int64 = 1)",
                    "Adds."),
};
static const PFObjectTypeDesc k_counter = {PF_OBJECT_TYPE_DESC_ABI,
                                           "cxx.Counter",
                                           nullptr,
                                           sizeof(cxx_fixture::Counter),
                                           nullptr,
                                           "A counter from C++.",
                                           k_counter_fields,
                                           PF_COUNTOF(k_counter_fields),
                                           k_counter_methods,
                                           PF_COUNTOF(k_counter_methods)};
PF_REGISTER_OBJECT_TYPE(k_counter);
