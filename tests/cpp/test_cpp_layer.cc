// The C++ layer (include/packedfunc/packedfunc.hpp): registration by
// deduction, the type table against C's, conversions, exceptions to errors
// and back, RAII handles, containers and modules. Built by mk/cpp.mk with
// g++ and clang++, C++17 and C++20, -Werror, under ASan+UBSan.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

// Debian's cmocka.h declares its functions without C linkage for C++.
extern "C" {
#include <cmocka.h>
}

#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "packedfunc/packedfunc.hpp"

namespace {

double clamp(double x, double lo, double hi) {
  if (lo > hi) throw std::domain_error("lo > hi");
  return x < lo ? lo : x > hi ? hi : x;
}

struct Missing : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

template <>
struct pf::error_kind<Missing> {
  static constexpr const char* value = kPFErrKeyError;
};

PF_DEF("cpptest.clamp", clamp, pf::arg("x"), pf::arg("lo") = 0.0, pf::arg("hi") = 1);
PF_DEF_DOC(
    "cpptest.greet", "Greets.",
    [](std::string_view name, const std::string& greeting) {
      return greeting + ", " + std::string(name);
    },
    pf::arg("name"), pf::arg("greeting") = "hello");

namespace {

// Calls f through the checked entry with int64 arguments; returns its status.
int call_ints(const pf::Function& f, std::vector<int64_t> xs, PFValue* rv, int* rc) {
  std::vector<PFValue> v(xs.size());
  std::vector<int> c(xs.size(), kPFInt);
  for (size_t i = 0; i < xs.size(); ++i) v[i].v_int64 = xs[i];
  return PFFuncCall(f.get(), v.data(), c.data(), static_cast<int>(v.size()), rv, rc);
}

const char* signature_of(const pf::Function& f) {
  const char *name = nullptr, *sig = nullptr, *doc = nullptr;
  assert_int_equal(PFFuncGetInfo(f.get(), &name, &sig, &doc), 0);
  return sig;
}

// Every name of the C++ type table is one of the C grammar's
// (PFSignatureTypeInfo): the table cannot name a type C does not know.
void test_type_names_are_cs(void**) {
  std::vector<std::string> c_names;
  const char* name = nullptr;
  for (int i = 0; PFSignatureTypeInfo(i, &name, nullptr) == 0; ++i) c_names.push_back(name);
  PFErrorClear();
  const char* cxx_names[] = {pf::type<bool>::name,
                             pf::type<int8_t>::name,
                             pf::type<int16_t>::name,
                             pf::type<int32_t>::name,
                             pf::type<int64_t>::name,
                             pf::type<uint8_t>::name,
                             pf::type<uint16_t>::name,
                             pf::type<uint32_t>::name,
                             pf::type<uint64_t>::name,
                             pf::type<float>::name,
                             pf::type<double>::name,
                             pf::type<std::string>::name,
                             pf::type<std::string_view>::name,
                             pf::type<const char*>::name,
                             pf::type<DLTensor*>::name,
                             pf::type<pf::Function>::name,
                             pf::type<pf::Object>::name,
                             pf::type<pf::Array>::name,
                             pf::type<pf::Map>::name,
                             pf::type<pf::Any>::name};
  for (const char* n : cxx_names) {
    bool found = false;
    for (const std::string& c : c_names) found = found || c == n;
    if (!found) fail_msg("the C++ type name '%s' is not in C's table", n);
  }
  static_assert(!pf::type<std::vector<int>>::supported);
  static_assert(!pf::type<char>::supported);  // char is neither signed nor unsigned text
}

void test_signatures_are_deduced(void**) {
  pf::Function f =
      pf::function("f", nullptr, [](int32_t a, uint8_t b, float c, bool d, const char* e) {
        return a + b + c + d + (e != nullptr);
      });
  assert_string_equal(signature_of(f), "float32(int32,uint8,float32,bool,str)");
  pf::Function g =
      pf::function(nullptr, nullptr, [](pf::Function, pf::Array, pf::Map, pf::Object) {});
  assert_string_equal(signature_of(g), "void(func,array,map,object)");
  pf::Function h = pf::function(
      "h", nullptr,
      [](int64_t a, bool b, std::string c, DLTensor* t) {
        return a + b + c.size() + (t == nullptr);
      },
      pf::arg("a") = -3, pf::arg("b") = true, pf::arg("c") = "q\"\n\x01", pf::arg("t") = nullptr);
  assert_string_equal(signature_of(h),
                      "uint64(a:int64=-3,b:bool=true,c:str=\"q\\\"\\n\\x01\",t:tensor=null)");
  assert_int_equal(h.call<int64_t>(), -3 + 1 + 4 + 1);
}

void test_calls_with_defaults_and_keywords(void**) {
  pf::Function f = pf::Function::global("cpptest.clamp");
  assert_string_equal(signature_of(f), "float64(x:float64,lo:float64=0.0,hi:float64=1.0)");
  assert_true(f.call<double>(5.0) == 1.0);
  assert_true(f.call<double>(0.5, 0, 2) == 0.5);
  assert_true(f.call<double>(-1, 0) == 0.0);  // an int converts to float64 when exact
  // Keyword calls use the signature's defaults.
  PFValue x, hi, rv;
  x.v_float64 = 7.5;
  hi.v_int64 = 5;
  int xc = kPFFloat, hic = kPFInt, rc = 0;
  const char* kw[] = {"hi"};
  assert_int_equal(PFFuncCallKw(f.get(), &x, &xc, 1, kw, &hi, &hic, 1, &rv, &rc), 0);
  assert_int_equal(rc, kPFFloat);
  assert_true(rv.v_float64 == 5.0);
  pf::Function g = pf::Function::global("cpptest.greet");
  assert_string_equal(g.call<std::string>("ada").c_str(), "hello, ada");
  assert_string_equal(g.call<std::string>(std::string("ada"), std::string_view("hi")).c_str(),
                      "hi, ada");
}

void test_arguments_that_do_not_convert(void**) {
  pf::Function f = pf::function(
      "conv", nullptr, [](int8_t a, uint32_t b) { return a + b; }, pf::arg("a"), pf::arg("b"));
  PFValue rv;
  int rc;
  assert_int_equal(call_ints(f, {1, 2}, &rv, &rc), 0);
  assert_int_equal(rv.v_int64, 3);
  assert_int_equal(call_ints(f, {300, 2}, &rv, &rc), -1);
  assert_string_equal(PFErrorGetKind(), "ValueError");
  assert_string_equal(
      PFErrorGetMessage(),
      "conv: argument 0 'a': expected int8, got int 300, which is out of its range");
  // An argument error is the caller's: no traceback line (base.h, PF_ERROR).
  assert_string_equal(PFErrorGetTraceback(), "");
  assert_int_equal(call_ints(f, {1, -2}, &rv, &rc), -1);
  assert_string_equal(PFErrorGetKind(), "ValueError");
  assert_int_equal(call_ints(f, {1}, &rv, &rc), -1);
  assert_string_equal(PFErrorGetKind(), "TypeError");
  assert_string_equal(PFErrorGetMessage(), "conv() takes 2 arguments but 1 were given");
  assert_int_equal(call_ints(f, {1, 2, 3}, &rv, &rc), -1);
  assert_string_equal(PFErrorGetKind(), "TypeError");
  try {
    f("x", 1);
    fail_msg("no exception");
  } catch (const pf::Error& e) {
    assert_string_equal(e.kind().c_str(), "TypeError");
    assert_string_equal(e.message().c_str(), "conv: argument 0 'a': expected int8, got str");
  }
  pf::Function d = pf::function("d", nullptr, [](double v) { return v; });
  try {
    d(int64_t{1} << 60 | 1);  // no double holds it
    fail_msg("no exception");
  } catch (const pf::Error& e) {
    assert_string_equal(e.kind().c_str(), "ValueError");
  }
  // A result that no packed int holds.
  pf::Function u = pf::function("u", nullptr, [] { return UINT64_MAX; });
  pf::Any out;
  assert_int_equal(u.try_call(&out), -1);
  assert_string_equal(PFErrorGetKind(), "ValueError");
}

int64_t throw_what(const std::string& what) {
  if (what == "invalid_argument") throw std::invalid_argument("ia");
  if (what == "domain_error") throw std::domain_error("de");
  if (what == "out_of_range") throw std::out_of_range("oor");
  if (what == "bad_alloc") throw std::bad_alloc();
  if (what == "runtime_error") throw std::runtime_error("re");
  if (what == "missing") throw Missing("gone");
  if (what == "pf") throw pf::Error("CustomKind", "custom");
  if (what == "int") throw 7;
  return 1;
}

void test_exceptions_become_errors(void**) {
  assert_true(pf::register_error<Missing>());
  assert_true(pf::register_error<Missing>());  // twice is harmless
  pf::Function f = pf::function("thrower", nullptr, throw_what);
  struct {
    const char* what;
    const char* kind;
    const char* message;
  } cases[] = {
      {"invalid_argument", "ValueError", "ia"}, {"domain_error", "ValueError", "de"},
      {"out_of_range", "IndexError", "oor"},    {"bad_alloc", "MemoryError", nullptr},
      {"runtime_error", "RuntimeError", "re"},  {"missing", "KeyError", "gone"},
      {"pf", "CustomKind", "custom"},           {"int", "RuntimeError", "unknown C++ exception"}};
  for (const auto& c : cases) {
    PFValue a, rv;
    a.v_str = c.what;
    int code = kPFStr, rc = 0;
    assert_int_equal(PFFuncCall(f.get(), &a, &code, 1, &rv, &rc), -1);
    assert_string_equal(PFErrorGetKind(), c.kind);
    if (c.message != nullptr) {
      assert_string_equal(PFErrorGetMessage(), c.message);
      assert_non_null(std::strstr(PFErrorGetTraceback(), "in C++ function 'thrower'"));
    }
    // The same error, thrown from the throwing call form.
    try {
      f(c.what);
      fail_msg("no exception for %s", c.what);
    } catch (const pf::Error& e) {
      assert_string_equal(e.kind().c_str(), c.kind);
    }
  }
  assert_int_equal(f.call<int64_t>("nothing"), 1);
}

void test_callbacks_throw_through_cxx(void**) {
  int calls = 0;
  // A capturing lambda as a callback, called from a C++ function.
  pf::Function cb = pf::function("cb", nullptr, [&calls](double x) -> double {
    ++calls;
    if (x < 0) throw std::out_of_range("negative");
    return x * 2;
  });
  pf::Function apply = pf::function("apply", nullptr,
                                    [](pf::Function g, double x) { return g.call<double>(x) + 1; });
  assert_true(apply.call<double>(cb, 2.0) == 5.0);
  try {
    apply(cb, -1.0);
    fail_msg("no exception");
  } catch (const pf::Error& e) {
    assert_string_equal(e.kind().c_str(), "IndexError");
    assert_string_equal(e.message().c_str(), "negative");
  }
  assert_int_equal(calls, 2);
  // The non-throwing form leaves the error in the thread's storage.
  pf::Any out;
  assert_int_equal(apply.try_call(&out, cb, -1.0), -1);
  assert_string_equal(PFErrorGetKind(), "IndexError");
  std::function<int64_t(int64_t)> sf = [](int64_t v) { return v + 1; };
  assert_int_equal(pf::function("sf", nullptr, sf).call<int64_t>(41), 42);
}

void test_global_registration(void**) {
  pf::Function f = pf::def("cpptest.twice", [](int64_t v) { return 2 * v; });
  assert_int_equal(pf::Function::global("cpptest.twice").call<int64_t>(21), 42);
  try {
    pf::def("cpptest.twice", [](int64_t v) { return v; });
    fail_msg("no exception");
  } catch (const pf::Error& e) {
    assert_string_equal(e.kind().c_str(), "KeyError");
  }
  assert_int_equal(PFFuncRemoveGlobal("cpptest.twice"), 0);
  assert_false(static_cast<bool>(pf::Function::find("cpptest.twice")));
  try {
    pf::Function::global("cpptest.twice");
    fail_msg("no exception");
  } catch (const pf::Error& e) {
    assert_string_equal(e.kind().c_str(), "KeyError");
  }
}

uint32_t flags_of(PFFunctionHandle f) {
  uint32_t flags = 99;
  pf::check(PFFuncGetFlags(f, &flags));
  return flags;
}

struct Tally {
  int64_t n = 0;
  int64_t get() const { return n; }
  void bump() { ++n; }
  static int64_t seven() { return 7; }
};

// pf::nonblocking() among the extras gives the function (or the method)
// kPFFuncNonBlocking; without it there is none.
void test_nonblocking_functions_and_methods(void**) {
  pf::Function quick = pf::def(
      "cpptest.quick", [](int64_t a, int64_t b) { return a + b; }, pf::nonblocking(), pf::arg("a"),
      pf::arg("b") = 1);
  pf::Function slow = pf::def("cpptest.slow", [](int64_t v) { return v; });
  assert_int_equal(flags_of(quick.get()), kPFFuncNonBlocking);
  assert_int_equal(flags_of(slow.get()), 0);
  assert_int_equal(pf::Function::global("cpptest.quick").call<int64_t>(int64_t{41}), 42);
  const char* sig = nullptr;
  pf::check(PFFuncGetInfo(quick.get(), nullptr, &sig, nullptr));
  assert_string_equal(sig, "int64(a:int64,b:int64=1)");
  pf::check(PFFuncRemoveGlobal("cpptest.quick"));
  pf::check(PFFuncRemoveGlobal("cpptest.slow"));

  static const uint32_t tally = pf::class_<Tally>("cpptest.Tally")
                                    .def<&Tally::get>("get", pf::nonblocking())
                                    .def<&Tally::bump>("bump")
                                    .def_static<&Tally::seven>("seven", pf::nonblocking())
                                    .register_type();
  const struct {
    const char* name;
    uint32_t method_flags, func_flags;
  } expect[] = {{"get", kPFMethodNonBlocking, kPFFuncNonBlocking},
                {"bump", 0, 0},
                {"seven", kPFMethodStatic | kPFMethodNonBlocking, kPFFuncNonBlocking}};
  const PFObjectTypeInfo* ti = nullptr;
  pf::check(PFObjectTypeGetInfo(tally, &ti));
  for (const auto& e : expect) {
    const PFMethodInfo* mi = nullptr;
    for (int i = 0; i < ti->num_methods; ++i)
      if (std::string(ti->methods[i]->name) == e.name) mi = ti->methods[i];
    assert_non_null(mi);
    assert_int_equal(mi->flags, e.method_flags);
    PFFunctionHandle f = nullptr;
    pf::check(PFObjectTypeGetMethod(tally, e.name, &f));
    pf::Function fn = pf::Function::steal(f);
    assert_int_equal(flags_of(f), e.func_flags);
  }
  PFFunctionHandle seven = nullptr;
  pf::check(PFObjectTypeGetMethod(tally, "seven", &seven));
  assert_int_equal(pf::Function::steal(seven).call<int64_t>(), 7);
}

void test_handles_and_values(void**) {
  pf::Function f = pf::function("id", nullptr, [](pf::Any a) { return a; });
  pf::Any s = f("text");
  assert_int_equal(s.type_code(), kPFStr);
  assert_string_equal(s.as<std::string>().c_str(), "text");
  assert_true(f(nullptr == nullptr).as<bool>());
  assert_true(f(2.5).as<double>() == 2.5);
  pf::Any fn = f(f);
  assert_int_equal(fn.type_code(), kPFFuncHandle);
  assert_int_equal(fn.as<pf::Function>().call<int64_t>(int64_t{9}), 9);
  try {
    s.as<int64_t>();
    fail_msg("no exception");
  } catch (const pf::Error& e) {
    assert_string_equal(e.kind().c_str(), "TypeError");
  }
  // Copies and moves hold references of their own.
  pf::Object a = pf::Object::borrow(f.get());
  pf::Object b = a;
  pf::Object c = std::move(b);
  assert_null(b.get());
  assert_ptr_equal(c.get(), f.get());
  assert_int_equal(c.type_index(), kPFObjectFunction);
}

void test_containers(void**) {
  pf::Array arr = pf::Array::of(int64_t{1}, "two", 3.0);
  assert_int_equal(arr.size(), 3);
  assert_string_equal(arr[1].as<std::string>().c_str(), "two");
  assert_true(arr[2].as<double>() == 3.0);
  try {
    arr[3];
    fail_msg("no exception");
  } catch (const pf::Error& e) {
    assert_string_equal(e.kind().c_str(), "IndexError");
  }
  pf::Map map = pf::Map::of("a", int64_t{1}, "b", arr);
  assert_int_equal(map.size(), 2);
  assert_int_equal(map.at("a").as<int64_t>(), 1);
  assert_int_equal(map.at("b").as<pf::Array>().size(), 3);
  assert_false(map.get("c").has_value());
  try {
    map.at("c");
    fail_msg("no exception");
  } catch (const pf::Error& e) {
    assert_string_equal(e.kind().c_str(), "KeyError");
  }
  pf::Function len = pf::function("len", nullptr, [](pf::Array x) { return x.size(); });
  assert_int_equal(len.call<int64_t>(arr), 3);
  try {
    len(map);
    fail_msg("no exception");
  } catch (const pf::Error& e) {
    assert_string_equal(e.kind().c_str(), "TypeError");
  }
}

void test_modules(void**) {
  PFModuleHandle h = nullptr;
  assert_int_equal(PF_MODULE_LOAD_SELF(&h), 0);
  pf::Module self = pf::Module::steal(h);
  std::vector<std::string> names = self.function_names();
  assert_int_equal(names.size(), 2);
  assert_string_equal(names[0].c_str(), "cpptest.clamp");
  assert_string_equal(names[1].c_str(), "cpptest.greet");
  assert_true(self.function("cpptest.clamp").call<double>(3.0, 0, 2) == 2.0);
  assert_false(static_cast<bool>(self.find("cpptest.none")));
  try {
    self.function("cpptest.none");
    fail_msg("no exception");
  } catch (const pf::Error& e) {
    assert_string_equal(e.kind().c_str(), "KeyError");
  }
  try {
    pf::Module::load("/nonexistent/mod.so");
    fail_msg("no exception");
  } catch (const pf::Error& e) {
    assert_string_equal(e.kind().c_str(), "RuntimeError");
  }
}

// Classes (pf::class_), registered at run time with register_type.
int g_shapes_destroyed = 0;
struct Shape {
  int32_t sides;
  double size = 1.0;
  std::string label;
  Shape(int32_t n, std::string l) : sides(n), label(std::move(l)) {
    if (n < 0) throw std::invalid_argument("Shape: sides < 0");
  }
  ~Shape() { ++g_shapes_destroyed; }
  double grow(double by) {
    if (by < 0) throw std::domain_error("grow: by < 0");
    return size += by;
  }
  std::string text() const { return label + ":" + std::to_string(sides); }
};
struct Square : Shape {
  Square() : Shape(4, "square") {}
  double area() const { return size * size; }
};
struct NoDefault {
  explicit NoDefault(int32_t v) : value(v) {}
  int32_t value;
};

// std::string members as fields, and static methods.
struct Note {
  std::string text;
  std::string author = "anonymous";
  static std::string join(const std::string& a, const std::string& b) {
    if (a.empty()) throw std::invalid_argument("join: a is empty");
    return a + " " + b;
  }
};

pf::Any call_method(PFObjectHandle obj, const char* name, double arg) {
  PFFunctionHandle m = nullptr;
  pf::check(PFObjectGetMethod(obj, name, &m));
  pf::Function f = pf::Function::steal(m);
  return f(arg);
}

template <class F>
std::string error_kind_of(F&& f) {
  try {
    f();
  } catch (const pf::Error& e) {
    return e.kind() + ": " + e.message();
  }
  return "no exception";
}

std::string read_str(PFObjectHandle obj, const char* name) {
  PFValue v;
  int code = 0;
  pf::check(PFObjectGetFieldByName(obj, name, &v, &code));
  if (code != kPFStr) throw pf::Error(kPFErrTypeError, "not a str");
  return v.v_str;
}

void test_string_fields_and_static_methods(void**) {
  static const uint32_t note = pf::class_<Note>("cpptest.Note", "A note.")
                                   .field<&Note::text>("text", "What it says.")
                                   .readonly<&Note::author>("author")
                                   .def_static<&Note::join>("join", pf::arg("a"), pf::arg("b"))
                                   .register_type();
  // Fields in the reflection: accessor fields of type str, no methods.
  const PFFieldInfo* text = nullptr;
  pf::check(PFObjectTypeGetField(note, "text", &text));
  assert_string_equal(text->type, "str");
  assert_string_equal(text->doc, "What it says.");
  assert_int_equal(text->flags, kPFFieldAccessor | kPFFieldWritable);
  const PFFieldInfo* author = nullptr;
  pf::check(PFObjectTypeGetField(note, "author", &author));
  assert_int_equal(author->flags, kPFFieldAccessor);
  const PFObjectTypeInfo* ti = nullptr;
  pf::check(PFObjectTypeGetInfo(note, &ti));
  assert_int_equal(ti->num_fields, 2);
  assert_int_equal(ti->num_methods, 2);  // __init__ and join
  PFFunctionHandle c = nullptr;
  pf::check(PFObjectTypeGetConstructor(note, &c));
  {
    pf::Any n = pf::Function::steal(c)();
    PFObjectHandle h = n.value().v_handle;
    assert_string_equal(read_str(h, "text").c_str(), "");
    assert_string_equal(read_str(h, "author").c_str(), "anonymous");
    PFValue v;
    v.v_str = "a longer text than any small-string buffer holds, on the heap";
    pf::check(PFObjectSetField(h, text, v, kPFStr));
    void* data = nullptr;
    pf::check(PFObjectGetData(h, &data));
    int code = 0;
    pf::check(PFObjectGetField(h, text, &v, &code));
    assert_string_equal(v.v_str, "a longer text than any small-string buffer holds, on the heap");
    assert_string_equal(
        error_kind_of([&] { pf::check(PFObjectSetField(h, author, v, kPFStr)); }).c_str(),
        "AttributeError: PFObjectSetField: field 'author' of cpptest.Note is "
        "read-only");
    v.v_handle = nullptr;
    assert_string_equal(
        error_kind_of([&] { pf::check(PFObjectSetField(h, text, v, kPFNull)); }).c_str(),
        "TypeError: PFObjectSetField: field 'text' of cpptest.Note: expected str, "
        "got null");
  }
  // Allocated without __init__: no std::string to read.
  PFObjectHandle raw = nullptr;
  pf::check(PFObjectAlloc(note, &raw));
  pf::Object raw_obj = pf::Object::steal(raw);
  assert_string_equal(error_kind_of([&] { read_str(raw, "text"); }).c_str(),
                      "RuntimeError: cpptest.Note: field 'text': the object is not constructed "
                      "(allocated without __init__)");
  // The static method: flagged static, called without an object.
  const PFMethodInfo* join_info = nullptr;
  for (int i = 0; i < ti->num_methods; ++i)
    if (std::string(ti->methods[i]->name) == "join") join_info = ti->methods[i];
  assert_non_null(join_info);
  assert_int_equal(join_info->flags, kPFMethodStatic);
  assert_string_equal(join_info->signature, "str(a:str,b:str)");
  PFFunctionHandle m = nullptr;
  pf::check(PFObjectTypeGetMethod(note, "join", &m));
  pf::Function join = pf::Function::steal(m);
  assert_string_equal(join.call<std::string>("to", "be").c_str(), "to be");
  assert_string_equal(error_kind_of([&] { join("", "x"); }).c_str(),
                      "ValueError: join: a is empty");
}

void test_classes(void**) {
  static const uint32_t shape =
      pf::class_<Shape>("cpptest.Shape", "A shape.")
          .init<int32_t, std::string>(pf::arg("sides"), pf::arg("label") = "")
          .field<&Shape::sides>("sides")
          .readonly<&Shape::size>("size")
          .prop<&Shape::label>("label")
          .def<&Shape::grow>("grow", pf::arg("by") = 1.0)
          .def<&Shape::text>("text")
          .register_type();
  static const uint32_t square = pf::class_<Square>("cpptest.Square")
                                     .inherits<Shape>()
                                     .def<&Square::area>("area")
                                     .register_type();
  PFFunctionHandle c = nullptr;
  pf::check(PFObjectTypeGetConstructor(shape, &c));
  pf::Function make_shape = pf::Function::steal(c);
  pf::check(PFObjectTypeGetConstructor(square, &c));
  pf::Function make_square = pf::Function::steal(c);
  int destroyed = g_shapes_destroyed;
  {
    pf::Any s = make_shape(3, "tri");
    PFObjectHandle h = s.value().v_handle;
    PFValue v;
    int code = 0;
    pf::check(PFObjectGetFieldByName(h, "sides", &v, &code));
    assert_int_equal(v.v_int64, 3);
    pf::check(PFObjectSetFieldByName(h, "sides", v, code));
    assert_int_equal(PFObjectSetFieldByName(h, "size", v, kPFInt), -1);  // read-only
    assert_true(call_method(h, "grow", 2.0).as<double>() == 3.0);
    PFFunctionHandle m = nullptr;
    pf::check(PFObjectGetMethod(h, "text", &m));
    assert_string_equal(pf::Function::steal(m).call<std::string>().c_str(), "tri:3");
    pf::check(PFObjectGetMethod(h, "set_label", &m));
    pf::Function::steal(m)("quad");
    pf::check(PFObjectGetMethod(h, "label", &m));
    assert_string_equal(pf::Function::steal(m).call<std::string>().c_str(), "quad");
    // Exceptions from a method and a constructor; __init__ again.
    assert_string_equal(error_kind_of([&] { call_method(h, "grow", -1.0); }).c_str(),
                        "ValueError: grow: by < 0");
    assert_string_equal(error_kind_of([&] { make_shape(-1); }).c_str(),
                        "ValueError: Shape: sides < 0");
    assert_string_equal(error_kind_of([&] { call_method(h, "__init__", 1.0); }).c_str(),
                        "RuntimeError: cpptest.Shape.__init__: argument 0 'self': the object is "
                        "constructed already");
    // Inheritance.
    pf::Any q = make_square();
    int is = 0;
    pf::check(PFObjectIsInstance(q.value().v_handle, shape, &is));
    assert_int_equal(is, 1);
    assert_true(call_method(q.value().v_handle, "grow", 1.0).as<double>() == 2.0);
    pf::check(PFObjectGetMethod(q.value().v_handle, "area", &m));
    assert_true(pf::Function::steal(m).call<double>() == 4.0);
    // Allocated without __init__: no T, so methods refuse and nothing is destroyed.
    PFObjectHandle raw = nullptr;
    pf::check(PFObjectAlloc(shape, &raw));
    pf::Object raw_obj = pf::Object::steal(raw);
    assert_string_equal(error_kind_of([&] { call_method(raw, "grow", 1.0); }).c_str(),
                        "RuntimeError: cpptest.Shape.grow: argument 0 'self': the object is not "
                        "constructed (allocated without __init__)");
  }
  // The shape and the square, each once; not the failed one nor the raw one.
  assert_int_equal(g_shapes_destroyed - destroyed, 2);
  // A class without a default constructor and without init() cannot be made.
  static const uint32_t nodef =
      pf::class_<NoDefault>("cpptest.NoDefault").field<&NoDefault::value>("value").register_type();
  pf::check(PFObjectTypeGetConstructor(nodef, &c));
  pf::Function make_nodef = pf::Function::steal(c);
  assert_string_equal(error_kind_of([&] { make_nodef(); }).c_str(),
                      "TypeError: no constructor: give one with pf::class_::init");
}

// Instances rebuilt from their fields (PFToJSON, PFFromJSON): a class
// whose C++ type is default-constructible is default-constructed, then
// given the document's fields; others are refused, naming the type.
int g_memos_made = 0, g_memos_destroyed = 0;
struct Memo {
  int64_t count = 7;
  double rate = 0.25;
  std::string text;
  std::string tag = "memo";  // read-only: the rebuilt one must agree
  Memo() { ++g_memos_made; }
  Memo(int64_t c, std::string t) : count(c), text(std::move(t)) { ++g_memos_made; }
  Memo(const Memo&) = delete;
  ~Memo() { ++g_memos_destroyed; }
  std::string show() const { return text + "/" + std::to_string(count) + "/" + tag; }
};
struct Reply : Memo {
  bool urgent = false;
  std::string to;
  std::string show_reply() const { return to + ":" + show() + (urgent ? "!" : ""); }
};
struct Fixed {
  explicit Fixed(std::string n) : name(std::move(n)) {}
  std::string name;
};
bool g_fussy_throws = false;
struct Fussy {
  Fussy() {
    if (g_fussy_throws) throw std::runtime_error("Fussy: not now");
  }
  int64_t value = 1;
};
// A C type that holds a C++ instance and a list (which may hold the holder).
struct Holder {
  PFObjectHandle memo;
  PFObjectHandle items;
};

pf::Any from_json(const std::string& text) {
  PFValue v;
  int code = 0;
  pf::check(PFFromJSON(text.c_str(), text.size(), &v, &code));
  return pf::Any::take(v, code);
}

std::string to_json(PFValue v, int code) {
  const char* text = nullptr;
  size_t n = 0;
  pf::check(PFToJSON(v, code, &text, &n));
  return std::string(text, n);
}

bool equal(PFValue a, PFValue b) {
  int eq = 0;
  const char* where = nullptr;
  pf::check(PFStructuralCompare(a, kPFObjectHandle, b, kPFObjectHandle, 0, &eq, &where));
  if (!eq) std::fprintf(stderr, "differ at %s\n", where);
  return eq == 1;
}

std::string call_str(PFObjectHandle obj, const char* name) {
  PFFunctionHandle m = nullptr;
  pf::check(PFObjectGetMethod(obj, name, &m));
  return pf::Function::steal(m).call<std::string>();
}

void test_instances_rebuild_from_json(void**) {
  static const uint32_t memo = pf::class_<Memo>("cpptest.Memo", "A memo.")
                                   .init<int64_t, std::string>(pf::arg("count"), pf::arg("text"))
                                   .field<&Memo::count>("count")
                                   .readonly<&Memo::rate>("rate")
                                   .field<&Memo::text>("text")
                                   .readonly<&Memo::tag>("tag")
                                   .def<&Memo::show>("show")
                                   .register_type();
  static const uint32_t reply = pf::class_<Reply>("cpptest.Reply")
                                    .inherits<Memo>()
                                    .field<&Reply::urgent>("urgent")
                                    .field<&Reply::to>("to")
                                    .def<&Reply::show_reply>("show_reply")
                                    .register_type();
  static const PFFieldDesc holder_fields[] = {
      PF_FIELD(Holder, memo, "obj<cpptest.Memo>", kPFFieldWritable, nullptr),
      PF_FIELD(Holder, items, "list", kPFFieldWritable, nullptr)};
  static const PFObjectTypeDesc holder_desc = {PF_OBJECT_TYPE_DESC_ABI,
                                               "cpptest.Holder",
                                               nullptr,
                                               sizeof(Holder),
                                               nullptr,
                                               nullptr,
                                               holder_fields,
                                               PF_COUNTOF(holder_fields),
                                               nullptr,
                                               0};
  uint32_t holder = 0;
  pf::check(PFObjectTypeRegister(&holder_desc, &holder));
  int made = g_memos_made, destroyed = g_memos_destroyed;
  {
    PFFunctionHandle c = nullptr;
    pf::check(PFObjectTypeGetConstructor(memo, &c));
    pf::Any m =
        pf::Function::steal(c)(int64_t{42}, "a text longer than a small-string buffer holds");
    pf::check(PFObjectTypeGetConstructor(reply, &c));
    pf::Any r = pf::Function::steal(c)();
    PFObjectHandle rh = r.value().v_handle;
    PFValue v;
    v.v_str = "ada";
    pf::check(PFObjectSetFieldByName(rh, "to", v, kPFStr));
    v.v_int64 = 1;
    pf::check(PFObjectSetFieldByName(rh, "urgent", v, kPFBool));
    v.v_str = "reply";
    pf::check(PFObjectSetFieldByName(rh, "text", v, kPFStr));
    // One instance of each, alone: equal field by field, and a C++ object
    // that methods work on.
    pf::Any m2 = from_json(to_json(m.value(), kPFObjectHandle));
    assert_true(equal(m.value(), m2.value()));
    assert_string_equal(call_str(m2.value().v_handle, "show").c_str(),
                        "a text longer than a small-string buffer holds/42/memo");
    pf::Any r2 = from_json(to_json(r.value(), kPFObjectHandle));
    assert_int_equal(r2.as<pf::Object>().type_index(), reply);
    assert_true(equal(r.value(), r2.value()));
    assert_string_equal(call_str(r2.value().v_handle, "show_reply").c_str(), "ada:reply/7/memo!");
    // In containers and a C type's fields: a shared instance comes back
    // shared, and a cycle through the holder comes back a cycle.
    PFObjectHandle hh = nullptr;
    pf::check(PFObjectAlloc(holder, &hh));
    pf::Object h = pf::Object::steal(hh);
    pf::check(PFObjectSetFieldByName(hh, "memo", m.value(), kPFObjectHandle));
    PFObjectHandle items = nullptr;
    PFValue iv[3] = {m.value(), r.value(), {}};
    iv[2].v_handle = hh;
    int ic[3] = {kPFObjectHandle, kPFObjectHandle, kPFObjectHandle};
    pf::check(PFListCreate(iv, ic, 3, &items));
    pf::Object items_obj = pf::Object::steal(items);
    v.v_handle = items;
    pf::check(PFObjectSetFieldByName(hh, "items", v, kPFObjectHandle));
    v.v_handle = hh;
    pf::Any h2 = from_json(to_json(v, kPFObjectHandle));
    PFObjectHandle h2h = h2.value().v_handle;
    assert_true(equal(v, h2.value()));
    PFValue got;
    int code = 0;
    pf::check(PFObjectGetFieldByName(h2h, "memo", &got, &code));
    PFObjectHandle memo_again = got.v_handle;
    pf::check(PFObjectGetFieldByName(h2h, "items", &got, &code));
    PFObjectHandle items2 = got.v_handle;
    pf::check(PFListGetItem(items2, 0, &got, &code));                     // a new reference
    assert_ptr_equal(pf::Object::steal(got.v_handle).get(), memo_again);  // shared, not copied
    pf::check(PFListGetItem(items2, 2, &got, &code));
    assert_ptr_equal(pf::Object::steal(got.v_handle).get(), h2h);  // the cycle
    pf::check(PFListClear(items2));                                // so that the rebuilt graph goes
    pf::check(PFListClear(items));
    // A read-only field that the rebuilt instance does not agree with.
    std::string doc = to_json(m.value(), kPFObjectHandle);
    doc.replace(doc.find("\"memo\""), 6, "\"note\"");
    assert_string_equal(
        error_kind_of([&] { from_json(doc); }).c_str(),
        "ValueError: PFFromJSON: node 0: field 'tag' of cpptest.Memo is read-only (an accessor "
        "field without a setter): the rebuilt instance has 'memo', the document 'note'");
    doc.replace(doc.find("\"note\""), 6, "null");  // null, as a setter would not get it
    assert_string_equal(error_kind_of([&] { from_json(doc); }).c_str(),
                        "TypeError: PFFromJSON: node 0: field 'tag' of cpptest.Memo: expected str, "
                        "got null");
  }
  // Every C++ object made was destroyed once: the originals, the copies,
  // and the two whose rebuilding failed.
  assert_int_equal(g_memos_made - made, 8);
  assert_int_equal(g_memos_destroyed - destroyed, 8);
  // A class without a default constructor: refused, naming the type.
  static const uint32_t fixed = pf::class_<Fixed>("cpptest.Fixed")
                                    .init<std::string>(pf::arg("name"))
                                    .field<&Fixed::name>("name")
                                    .register_type();
  PFFunctionHandle c = nullptr;
  pf::check(PFObjectTypeGetConstructor(fixed, &c));
  pf::Any f = pf::Function::steal(c)("x");
  assert_string_equal(
      error_kind_of([&] { from_json(to_json(f.value(), kPFObjectHandle)); }).c_str(),
      "TypeError: PFFromJSON: node 0: cpptest.Fixed cannot be rebuilt from its fields: its C++ "
      "type has no default constructor");
  // A default constructor that throws: its error, and nothing to destroy.
  static const uint32_t fussy =
      pf::class_<Fussy>("cpptest.Fussy").field<&Fussy::value>("value").register_type();
  pf::check(PFObjectTypeGetConstructor(fussy, &c));
  pf::Any fu = pf::Function::steal(c)();
  std::string fussy_doc = to_json(fu.value(), kPFObjectHandle);
  g_fussy_throws = true;
  assert_string_equal(error_kind_of([&] { from_json(fussy_doc); }).c_str(),
                      "RuntimeError: PFFromJSON: node 0: Fussy: not now");
  g_fussy_throws = false;
  assert_true(equal(fu.value(), from_json(fussy_doc).value()));
}

}  // namespace

int main(void) {
  // cpptest.* are registered globally once, from this program's module.
  PFModuleHandle self = nullptr;
  if (PF_MODULE_LOAD_SELF(&self) != 0 || PFModExportGlobal(self, "", 0) != 0) {
    std::fprintf(stderr, "%s\n", PFGetLastError());
    return 1;
  }
  PFModFree(self);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_type_names_are_cs),
      cmocka_unit_test(test_signatures_are_deduced),
      cmocka_unit_test(test_calls_with_defaults_and_keywords),
      cmocka_unit_test(test_arguments_that_do_not_convert),
      cmocka_unit_test(test_exceptions_become_errors),
      cmocka_unit_test(test_callbacks_throw_through_cxx),
      cmocka_unit_test(test_global_registration),
      cmocka_unit_test(test_nonblocking_functions_and_methods),
      cmocka_unit_test(test_handles_and_values),
      cmocka_unit_test(test_containers),
      cmocka_unit_test(test_modules),
      cmocka_unit_test(test_classes),
      cmocka_unit_test(test_string_fields_and_static_methods),
      cmocka_unit_test(test_instances_rebuild_from_json),
  };
  return cmocka_run_group_tests(tests, nullptr, nullptr);
}
