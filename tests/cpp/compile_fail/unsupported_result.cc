// A result type that has no packedfunc type.
// expect: pf::def: the result type has no packedfunc type
#include <cstdint>
#include <vector>

#include "packedfunc/packedfunc.hpp"

int main() {
  auto range = [](int64_t n) { return std::vector<int64_t>(n); };
  pf::function("bad.range", nullptr, range);  // registration
}
