// A parameter type that has no packedfunc type.
// expect: pf::def: a parameter type has no packedfunc type
#include <vector>

#include "packedfunc/packedfunc.hpp"

double first(std::vector<double> v) { return v.at(0); }
PF_DEF("bad.first", first);  // registration
