// The small library of docs/guide.md's comparison ("Compared: packedfunc's
// C form and C++ layer, tvm-ffi, nanobind"), with packedfunc's C++ layer:
// a function with defaults, a class with a string field and a method that
// can fail, a function taking a float64 array. The lines between a
// "lines: ROW" marker and "end" are the binding code of that row, which
// tools/test-readme.sh counts against the table; the rest is the library's
// own code. It builds as a plugin, which docs/examples/compare.py uses.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "packedfunc/packedfunc.hpp"

double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

struct Account {
  std::string owner;
  int64_t balance = 0;
  explicit Account(std::string o) : owner(std::move(o)) {}
  int64_t withdraw(int64_t amount) {
    if (amount > balance) throw std::domain_error("withdraw: not enough money");
    return balance -= amount;
  }
};

double total(DLTensor* x) {
  if (x->dtype.code != kDLFloat || x->dtype.bits != 64 || x->ndim != 1)
    throw std::invalid_argument("total: x must be a float64 vector");
  const double* v =
      reinterpret_cast<const double*>(static_cast<const char*>(x->data) + x->byte_offset);
  int64_t stride = x->strides != nullptr ? x->strides[0] : 1;
  double s = 0;
  for (int64_t i = 0; i < x->shape[0]; ++i) s += v[i * stride];
  return s;
}

// lines: clamp
PF_DEF("cmpcpp.clamp", clamp, pf::arg("x"), pf::arg("lo") = 0.0, pf::arg("hi") = 1.0);
// end

// lines: class
PF_CLASS(Account, "cmpcpp.Account", "A bank account.")
    .init<std::string>(pf::arg("owner"))
    .field<&Account::owner>("owner")
    .field<&Account::balance>("balance")
    .def<&Account::withdraw>("withdraw", pf::arg("amount"));
// end

// lines: total
PF_DEF("cmpcpp.total", total, pf::arg("x"));
// end
