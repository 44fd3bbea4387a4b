// A class whose destructor may throw: its finalizer runs when the last
// reference goes, with no caller to take the exception, so the layer
// refuses it instead of letting std::terminate end the process.
// expect: pf::class_<T>: T's destructor may throw
#include <stdexcept>

#include "packedfunc/packedfunc.hpp"

struct Leaky {
  int n = 0;
  ~Leaky() noexcept(false) {
    if (n < 0) throw std::runtime_error("negative");
  }
};
PF_CLASS(Leaky, "bad.Leaky", nullptr).field<&Leaky::n>("n");  // registration
