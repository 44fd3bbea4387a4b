// A member function whose parameter type has no packedfunc type.
// expect: pf::def: a parameter type has no packedfunc type
#include <vector>

#include "packedfunc/packedfunc.hpp"

struct Bag {
  double first(std::vector<double> v) const { return v.at(0); }
};
PF_CLASS(Bag, "bad.Bag", nullptr).def<&Bag::first>("first");  // registration
