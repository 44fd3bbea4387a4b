// The C++ layer: a small library bound with one line per function, the
// signatures deduced from the C++ types, C++ exceptions turned into errors.
#include <packedfunc/packedfunc.hpp>

#include <cstdio>
#include <stdexcept>
#include <string>

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

struct Account {
  std::string owner;
  int64_t balance = 0;
  explicit Account(std::string o) : owner(std::move(o)) {}
  int64_t withdraw(int64_t amount) {
    if (amount > balance) throw std::domain_error("withdraw: not enough money");
    return balance -= amount;
  }
};

// The bindings. In a plugin these lines are all there is: PFModLoadFromFile
// finds them as it finds PF_REGISTER_TYPED's. (The comparison table below
// counts the lines between each "lines:" comment and its "end".)
// lines: clamp
PF_DEF("mylib.clamp", clamp, pf::arg("x"), pf::arg("lo") = 0.0, pf::arg("hi") = 1.0);
// end
// lines: total
PF_DEF("mylib.total", total, pf::arg("x"));
// end
// lines: class
PF_CLASS(Account, "mylib.Account", "A bank account.")
    .init<std::string>(pf::arg("owner"))
    .field<&Account::balance>("balance")
    .field<&Account::owner>("owner")
    .def<&Account::withdraw>("withdraw", pf::arg("amount"));
// end

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

  // The class: its constructor, a field, a method that throws.
  uint32_t account = 0;
  PFObjectTypeFind("mylib.Account", &account);
  PFFunctionHandle c = nullptr, m = nullptr;
  PFObjectTypeGetConstructor(account, &c);
  pf::Any a = pf::Function::steal(c)("ada");
  PFObjectHandle obj = a.value().v_handle;
  PFObjectSetFieldByName(obj, "balance", PFValue{10}, kPFInt);
  PFObjectGetMethod(obj, "withdraw", &m);
  pf::Function withdraw = pf::Function::steal(m);
  std::printf("withdraw(3) = %lld\n", static_cast<long long>(withdraw.call<int64_t>(3)));
  try {
    withdraw(100);
  } catch (const pf::Error& e) {
    std::printf("caught %s\n", e.what());
  }
  return 0;
}
