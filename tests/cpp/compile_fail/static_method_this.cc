// A member function (which takes `this`) given as a static method.
// expect: pf::class_::def_static: a static member function or a function, not a member function
#include <cstdint>

#include "packedfunc/packedfunc.hpp"

struct Clock {
  int64_t ticks = 0;
  int64_t tick() { return ++ticks; }
};
PF_CLASS(Clock, "bad.Clock", nullptr).def_static<&Clock::tick>("tick");  // registration
