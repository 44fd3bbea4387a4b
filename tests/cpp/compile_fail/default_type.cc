// A default whose type does not fit its parameter: a string for a float64.
// expect: pf::def: a default's type does not fit its parameter's type
#include "packedfunc/packedfunc.hpp"

double scale(double x, double by) { return x * by; }
PF_DEF("bad.scale", scale, pf::arg("x"), pf::arg("by") = "2");  // registration
