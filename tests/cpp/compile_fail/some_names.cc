// Names for some parameters only.
// expect: pf::def: give a pf::arg for every parameter or for none
#include "packedfunc/packedfunc.hpp"

double clamp(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }
PF_DEF("bad.clamp", clamp, pf::arg("x"), pf::arg("lo") = 0.0);  // registration
