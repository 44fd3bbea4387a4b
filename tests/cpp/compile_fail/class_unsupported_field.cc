// A member whose type no field can have given as a field (a std::vector;
// a pf::Object, which holds a reference, is a prop): arithmetic and
// std::string members only.
// expect: pf::class_::field: an arithmetic or std::string member (use prop for others)
#include <vector>

#include "packedfunc/packedfunc.hpp"

struct Bag {
  std::vector<int> items;
};
PF_CLASS(Bag, "bad.Bag", nullptr).field<&Bag::items>("items");  // registration
