// A float default for an int64 parameter, which C++ would narrow silently.
// expect: pf::def: a default's type does not fit its parameter's type
#include <cstdint>

#include "packedfunc/packedfunc.hpp"

int main() {
  auto shift = [](int64_t x, int64_t by) { return x << by; };
  pf::def("bad.shift", shift, pf::arg("x"), pf::arg("by") = 1.5);  // registration
}
