// A std::string member given as a plain field: fields are raw bytes, so a
// non-arithmetic member must be a prop.
// expect: pf::class_::field: an arithmetic member (use prop for others)
#include <string>

#include "packedfunc/packedfunc.hpp"

struct Named {
  std::string name;
};
PF_CLASS(Named, "bad.Named", nullptr).field<&Named::name>("name");  // registration
