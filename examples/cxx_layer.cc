// The C++ layer: a small library bound with one line per function, the
// signatures deduced from the C++ types, C++ exceptions turned into errors.
#include <packedfunc/packedfunc.hpp>

#include <cstdio>
#include <stdexcept>

// The library: plain C++, which knows nothing of packedfunc.
double clamp(double x, double lo, double hi) {
  if (lo > hi) throw std::domain_error("clamp: lo > hi");
  return x < lo ? lo : x > hi ? hi : x;
}

double total(DLTensor* x) {
  if (x->dtype.code != kDLFloat || x->dtype.bits != 64 || x->ndim != 1)
    throw std::invalid_argument("total: x must be a float64 vector");
  const double* v = static_cast<const double*>(x->data);
  double s = 0;
  for (int64_t i = 0; i < x->shape[0]; ++i) s += v[i];
  return s;
}

// The bindings. In a plugin these lines are all there is: PFModLoadFromFile
// finds them as it finds PF_REGISTER_TYPED's.
PF_DEF("mylib.clamp", clamp, pf::arg("x"), pf::arg("lo") = 0.0, pf::arg("hi") = 1.0);
PF_DEF("mylib.total", total, pf::arg("x"));

int main() {
  PFModuleHandle h = nullptr;
  if (PF_MODULE_LOAD_SELF(&h) != 0) return std::puts(PFGetLastError()), 1;
  pf::Module self = pf::Module::steal(h);
  self.export_global("");

  pf::Function f = pf::Function::global("mylib.clamp");
  const char *name, *sig, *doc;
  PFFuncGetInfo(f.get(), &name, &sig, &doc);
  std::printf("%s %s\n", name, sig);
  std::printf("clamp(7.5) = %g, clamp(7.5, 0, 5) = %g\n", f.call<double>(7.5),
              f.call<double>(7.5, 0, 5));

  // Errors: a C++ exception became a packedfunc error, which the throwing
  // call form throws as pf::Error; try_call leaves it in the thread's storage.
  try {
    f(0.5, 2, 1);
  } catch (const pf::Error& e) {
    std::printf("caught %s\n", e.what());
  }
  pf::Any out;
  if (f.try_call(&out, "x") != 0) std::printf("%s\n", PFGetLastError());

  double data[] = {1, 2, 3, 4};
  int64_t shape[] = {4};
  DLTensor t = {data, {kDLCPU, 0}, 1, {kDLFloat, 64, 1}, shape, nullptr, 0};
  std::printf("total = %g\n", pf::Function::global("mylib.total").call<double>(&t));
  return 0;
}
