// Test fixture: a module written with the C++ layer (packedfunc.hpp), as a
// C++ author would write one: functions registered by deduction (a
// function, lambdas, a std::function), names and defaults from pf::arg, and
// every standard exception a function may throw, which the layer turns
// into the mapped error kinds. Used from Python (tests/python/test_cxx_layer.py)
// and Node (bindings/node/test/cxx.test.mjs).
#include <cstdint>
#include <functional>
#include <new>
#include <stdexcept>
#include <string>

#include "packedfunc/packedfunc.hpp"

namespace cxxl {

double clamp(double x, double lo, double hi) {
  if (lo > hi) throw std::domain_error("clamp: lo > hi");
  return x < lo ? lo : x > hi ? hi : x;
}

// A user exception type, mapped to KeyError by the trait.
struct NoSuchKey : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Throws what `what` names, with `what` in the message.
int64_t raise(const std::string& what) {
  if (what == "invalid_argument") throw std::invalid_argument("bad argument: " + what);
  if (what == "domain_error") throw std::domain_error("outside the domain: " + what);
  if (what == "out_of_range") throw std::out_of_range("out of range: " + what);
  if (what == "bad_alloc") throw std::bad_alloc();
  if (what == "runtime_error") throw std::runtime_error("it failed: " + what);
  if (what == "logic_error") throw std::logic_error("a logic error: " + what);
  if (what == "user") throw NoSuchKey("no such key: " + what);
  if (what == "pf_error") throw pf::Error(kPFErrNotImplementedError, "not yet: " + what);
  if (what == "int") throw 42;
  return 0;
}

// The sum of a float64 vector, times scale.
double total(DLTensor* x, double scale) {
  if (x == nullptr) throw std::invalid_argument("total: x is null");
  if (x->dtype.code != kDLFloat || x->dtype.bits != 64 || x->dtype.lanes != 1)
    throw std::invalid_argument("total: x must be a float64 tensor");
  if (x->ndim != 1) throw std::invalid_argument("total: x must have rank 1");
  int64_t stride = x->strides != nullptr ? x->strides[0] : 1;
  const double* v =
      reinterpret_cast<const double*>(static_cast<const char*>(x->data) + x->byte_offset);
  double s = 0;
  for (int64_t i = 0; i < x->shape[0]; ++i) s += v[i * stride];
  return s * scale;
}

int64_t next_id = 0;

}  // namespace cxxl

template <>
struct pf::error_kind<cxxl::NoSuchKey> {
  static constexpr const char* value = kPFErrKeyError;
};
static const bool registered_no_such_key = pf::register_error<cxxl::NoSuchKey>();

PF_DEF("cxxl.clamp", cxxl::clamp, pf::arg("x"), pf::arg("lo") = 0.0, pf::arg("hi") = 1.0);
PF_REGISTER_FLAGS("cxxl.clamp", kPFFuncNonBlocking);  // short: hosts may keep their lock
PF_DEF_DOC("cxxl.raise", "Throws the C++ exception it names.", cxxl::raise, pf::arg("what"));
PF_DEF("cxxl.total", cxxl::total, pf::arg("x"), pf::arg("scale") = 1);
PF_DEF(
    "cxxl.greet",
    [](const std::string& name, std::string greeting) { return greeting + ", " + name; },
    pf::arg("name"), pf::arg("greeting") = "hello");
// A callback called from C++: its error comes back as a pf::Error, which
// the layer turns back into the same kind for this function's caller.
PF_DEF("cxxl.apply", [](pf::Function f, double x) { return f.call<double>(x) * 2; });
PF_DEF("cxxl.next_id", std::function<int64_t()>([] { return ++cxxl::next_id; }));
PF_DEF("cxxl.flag", [](bool b, int8_t small) { return b ? small : -small; });

// Classes (pf::class_): a constructor and a destructor that run, fields
// from arithmetic and std::string members, methods (const too) that may
// throw, a static method, and a derived class.
namespace cxxl {

int64_t destroyed = 0;

struct Counter {
  int64_t count;
  double rate = 0.5;
  std::string name;
  std::string unit = "items";
  Counter(int64_t start, std::string n) : count(start), name(std::move(n)) {
    if (start < 0) throw std::invalid_argument("Counter: start < 0");
  }
  ~Counter() { ++destroyed; }
  int64_t bump(int64_t by) {
    if (by == 0) throw std::out_of_range("bump: by is 0");
    return count += by;
  }
  std::string describe() const { return name + "=" + std::to_string(count); }
  int64_t take(int64_t n) {
    if (n > count) throw std::domain_error("take: only " + std::to_string(count) + " left");
    return count -= n;
  }
  static int64_t parse(const std::string& text) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(text, &used);
    } catch (const std::exception&) {}
    if (used == 0 || used != text.size())
      throw std::invalid_argument("parse: not a number: '" + text + "'");
    return v;
  }
};

struct Special : Counter {
  bool loud = false;
  Special() : Counter(100, "special") {}
  std::string shout() const { return loud ? describe() + "!" : describe(); }
};

// Default-constructible, with a constructor that takes arguments: copies
// and pickles go through a document (PFFromJSON), which default-constructs
// the Note and then writes its fields.
struct Note {
  std::string text;
  int64_t stars = 0;
  Note() = default;
  Note(std::string t, int64_t s) : text(std::move(t)), stars(s) {}
  std::string show() const { return text + std::string(static_cast<size_t>(stars), '*'); }
};

}  // namespace cxxl

PF_DEF("cxxl.destroyed", [] { return cxxl::destroyed; });

PF_CLASS(cxxl::Counter, "cxxl.Counter", "Counts, with a name.")
    .init<int64_t, std::string>(pf::arg("start") = 0, pf::arg("name") = "counter")
    .field<&cxxl::Counter::count>("count")
    .readonly<&cxxl::Counter::rate>("rate")
    .field<&cxxl::Counter::name>("name", "Its name.")
    .readonly<&cxxl::Counter::unit>("unit")
    .def<&cxxl::Counter::bump>("bump", pf::arg("by") = 1)
    .def<&cxxl::Counter::describe>("describe")
    .def<&cxxl::Counter::take>("take", pf::arg("n"))
    .def_static<&cxxl::Counter::parse>("parse", pf::arg("text"));

PF_CLASS(cxxl::Special, "cxxl.Special", "A counter that can shout.")
    .inherits<cxxl::Counter>()
    .field<&cxxl::Special::loud>("loud")
    .def<&cxxl::Special::shout>("shout");

PF_CLASS(cxxl::Note, "cxxl.Note", "A note with stars.")
    .init<std::string, int64_t>(pf::arg("text"), pf::arg("stars") = 0)
    .field<&cxxl::Note::text>("text")
    .field<&cxxl::Note::stars>("stars")
    .def<&cxxl::Note::show>("show");
