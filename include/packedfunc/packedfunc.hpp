/*
 * packedfunc — the C++17 layer: header-only, over the stable C API
 * (c_api.h) and nothing else. It adds no entry point and no symbol to the
 * library; a C++ library that uses it links libpackedfunc as a C one does.
 *
 * What it gives, in the order of this file:
 *   - pf::Error, the exception a packedfunc error becomes in C++, and the
 *     rule that turns a C++ exception into a packedfunc error (below);
 *   - the one table from C++ types to the signature grammar's type names
 *     (signature.h), with the conversions between packed values and C++
 *     values that the typed calls of the runtime make;
 *   - RAII handles: pf::Object, pf::Function, pf::Array, pf::Map,
 *     pf::Module, and pf::Any (one value of any type code);
 *   - registration by deduction from the C++ type of a function, a lambda
 *     (captureless or capturing) or a std::function: pf::function makes a
 *     function, pf::def registers one globally, and PF_DEF registers one in
 *     the module of the library it is compiled into, as PF_REGISTER_TYPED
 *     does for C (module.h). Names and defaults come from pf::arg:
 *
 *         double clamp(double x, double lo, double hi);
 *         PF_DEF("mylib.clamp", clamp, pf::arg("x"), pf::arg("lo") = 0.0,
 *                pf::arg("hi") = 1.0);
 *
 *     registers "mylib.clamp" with the signature text
 *     "float64(x:float64,lo:float64=0.0,hi:float64=1.0)" kept as metadata.
 *     A parameter type outside the table, a default whose type does not fit
 *     its parameter (a string for a float64), names on some parameters
 *     only, or a default followed by a parameter without one, is a
 *     static_assert whose message starts with "pf::def:" and whose
 *     "required from here" note points at the registration.
 *   - object types from C++ classes: pf::class_<T> and PF_CLASS (the
 *     constructor by placement-new, the destructor once in the finalizer,
 *     members as fields or properties, member functions as methods, C++
 *     inheritance as the parent type; see "Object types from C++ classes").
 *
 * Errors. C++ exceptions never cross into C. A function made here runs the
 * C++ callable inside a try block; what it throws becomes the calling
 * thread's packedfunc error and the call returns -1 to its caller (Python
 * raises it, Node throws it), with the kinds of base.h:
 *
 *     pf::Error                               its own kind and message
 *     a type E with pf::error_kind<E> given   error_kind<E>::value
 *       (and pf::register_error<E>() called)
 *     std::invalid_argument, std::domain_error ValueError
 *     std::out_of_range                       IndexError
 *     std::bad_alloc                          MemoryError
 *     any other std::exception                RuntimeError, its what()
 *     anything else                           RuntimeError "unknown C++ exception"
 *
 * The message is what() (a pf::Error's message), and a traceback line names
 * the function. The other way round, a packedfunc call that fails throws
 * pf::Error (kind, message) from the throwing forms (Function::operator(),
 * call<R>, Module::load, ...), and returns -1 with the error left in the
 * thread's storage from the non-throwing ones (Function::try_call).
 *
 * Threads. Handles are as thread-safe as the C calls beneath them: one
 * handle may be used from several threads, copied and released anywhere.
 * pf::register_error is meant for start-up (its table is append-only and
 * lock-free).
 */
#ifndef PACKEDFUNC_PACKEDFUNC_HPP_
#define PACKEDFUNC_PACKEDFUNC_HPP_

#if !defined(__cplusplus) || __cplusplus < 201703L
#error "packedfunc/packedfunc.hpp needs C++17 or later"
#endif

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "packedfunc/c_api.h"

namespace pf {

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

// A packedfunc error as a C++ exception: a kind (base.h's kPFErr*, or a
// host's) and a message; what() is "Kind: message". Throw one from a
// registered function to choose the kind the caller sees.
class Error : public std::exception {
 public:
  Error(std::string kind, std::string message)
      : kind_(std::move(kind)), message_(std::move(message)), text_(kind_ + ": " + message_) {}
  // The calling thread's last packedfunc error, copied.
  static Error last() { return Error(PFErrorGetKind(), PFErrorGetMessage()); }
  const char* what() const noexcept override { return text_.c_str(); }
  const std::string& kind() const noexcept { return kind_; }
  const std::string& message() const noexcept { return message_; }

 private:
  std::string kind_, message_, text_;
};

// Throws the calling thread's last error when `status` is not 0.
inline void check(int status) {
  if (status != 0) throw Error::last();
}

// The trait that maps a user exception type to an error kind: specialize it
// with `static constexpr const char* value = kPFErrKeyError;` (or a host's
// kind) and call pf::register_error<E>() once, before E can be thrown.
template <class E>
struct error_kind {};

namespace detail {

template <class T>
using bare = std::remove_cv_t<std::remove_reference_t<T>>;
template <class T>
struct is_str
    : std::bool_constant<std::is_same_v<T, std::string> || std::is_same_v<T, std::string_view> ||
                         std::is_same_v<T, const char*>> {};

template <class E, class = void>
struct has_error_kind : std::false_type {};
template <class E>
struct has_error_kind<E, std::void_t<decltype(error_kind<E>::value)>> : std::true_type {};

// An error about a call's arguments: the caller's, so it carries no
// traceback line (base.h, PF_ERROR).
struct ArgError : Error {
  using Error::Error;
};

// Records the exception in flight as the thread's error; returns -1. Only
// inside a catch block.
using Translator = bool (*)(const std::exception_ptr&);
constexpr int kMaxTranslators = 64;
inline std::atomic<Translator> g_translators[kMaxTranslators];
inline std::atomic<int> g_num_translators{0};

inline void set_error(const char* kind, const char* message, const char* where) noexcept {
  PFErrorSet(kind, message);
  std::string line = std::string("  in C++ function '") + where + "'";
  PFErrorAppendTraceback(line.c_str());
}

inline int raise_current(const char* where) noexcept {
  try {
    std::exception_ptr p = std::current_exception();
    int n = g_num_translators.load(std::memory_order_acquire);
    for (int i = 0; i < n; ++i) {
      Translator t = g_translators[i].load(std::memory_order_acquire);
      if (t != nullptr && t(p)) {
        PFErrorAppendTraceback((std::string("  in C++ function '") + where + "'").c_str());
        return -1;
      }
    }
    std::rethrow_exception(p);
  } catch (const ArgError& e) {
    PFErrorSet(e.kind().c_str(), e.message().c_str());
  } catch (const Error& e) {
    set_error(e.kind().c_str(), e.message().c_str(), where);
  } catch (const std::invalid_argument& e) {
    set_error(kPFErrValueError, e.what(), where);
  } catch (const std::domain_error& e) {
    set_error(kPFErrValueError, e.what(), where);
  } catch (const std::out_of_range& e) {
    set_error(kPFErrIndexError, e.what(), where);
  } catch (const std::bad_alloc&) {
    PFErrorSet(kPFErrMemoryError, "out of memory (std::bad_alloc)");
  } catch (const std::exception& e) {
    set_error(kPFErrRuntimeError, e.what(), where);
  } catch (...) {
    set_error(kPFErrRuntimeError, "unknown C++ exception", where);
  }
  return -1;
}

template <class E>
bool translate(const std::exception_ptr& p) {
  try {
    std::rethrow_exception(p);
  } catch (const E& e) {
    if constexpr (std::is_base_of_v<std::exception, E>) PFErrorSet(error_kind<E>::value, e.what());
    else PFErrorSet(error_kind<E>::value, "C++ exception");
    return true;
  } catch (...) {
    return false;
  }
}

}  // namespace detail

// Makes exceptions of type E (and of types derived from it) become errors
// of kind error_kind<E>::value, before the standard rules apply. At most 64
// types; registering one twice is harmless. Returns false when the table
// is full.
template <class E>
bool register_error() {
  static_assert(detail::has_error_kind<E>::value,
                "pf::register_error<E>: specialize pf::error_kind<E> with a `value` kind first");
  int i = detail::g_num_translators.load(std::memory_order_acquire);
  for (int k = 0; k < i; ++k)
    if (detail::g_translators[k].load() == &detail::translate<E>) return true;
  i = detail::g_num_translators.fetch_add(1);
  if (i >= detail::kMaxTranslators) {
    detail::g_num_translators.fetch_sub(1);
    return false;
  }
  detail::g_translators[i].store(&detail::translate<E>, std::memory_order_release);
  return true;
}

// ---------------------------------------------------------------------------
// Handles
// ---------------------------------------------------------------------------

// A reference to any packedfunc object; releases it when it goes. Copying
// takes another reference. An empty Object holds nothing (NULL).
class Object {
 public:
  Object() noexcept = default;
  Object(const Object& o) noexcept : h_(o.h_) {
    if (h_ != nullptr) PFObjectRetain(h_);
  }
  Object(Object&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
  Object& operator=(Object o) noexcept {
    std::swap(h_, o.h_);
    return *this;
  }
  ~Object() {
    if (h_ != nullptr) PFObjectFree(h_);
  }
  // Takes over a reference the caller owns (a new reference from the C API).
  static Object steal(PFObjectHandle h) noexcept { return Object(h); }
  // Takes a reference of its own to a borrowed handle.
  static Object borrow(PFObjectHandle h) noexcept {
    if (h != nullptr) PFObjectRetain(h);
    return Object(h);
  }
  static Object borrow_as(PFObjectHandle h) noexcept { return borrow(h); }
  PFObjectHandle get() const noexcept { return h_; }
  // Gives up the reference to the caller, who then releases it.
  PFObjectHandle release() noexcept { return std::exchange(h_, nullptr); }
  explicit operator bool() const noexcept { return h_ != nullptr; }
  // The object's type index (PFObjectGetTypeIndex); 0 when empty.
  uint32_t type_index() const noexcept {
    uint32_t t = 0;
    if (h_ != nullptr && PFObjectGetTypeIndex(h_, &t) != 0) PFErrorClear();
    return t;
  }

 protected:
  explicit Object(PFObjectHandle h) noexcept : h_(h) {}
  PFObjectHandle h_ = nullptr;
};

class Any;
class Function;
class Array;
class Map;

// ---------------------------------------------------------------------------
// The type table: C++ types, signature type names, conversions
// ---------------------------------------------------------------------------

// type<T> says how a C++ parameter or result type T (without const and
// reference) crosses: `name` is its type in the signature grammar
// (signature.h), `from` converts a packed argument (throwing pf::Error with
// the runtime's TypeError/ValueError rules), `to` makes a packed value that
// borrows from the C++ value. A type without a specialization is not
// supported: registering a function that uses it is a static_assert.
template <class T, class = void>
struct type {
  static constexpr bool supported = false;
};

namespace detail {

[[noreturn]] inline void bad_arg(const char* expected, int code) {
  const char* got = PFTypeCodeName(code);
  throw Error(kPFErrTypeError, std::string("expected ") + expected + ", got " +
                                   (got != nullptr ? got : "an unknown type code"));
}

template <class T>
constexpr const char* int_name() {
  constexpr bool s = std::is_signed_v<T>;
  switch (sizeof(T)) {
    case 1:
      return s ? "int8" : "uint8";
    case 2:
      return s ? "int16" : "uint16";
    case 4:
      return s ? "int32" : "uint32";
    default:
      return s ? "int64" : "uint64";
  }
}

// The exact double of an int, or nullopt when a double does not hold it.
inline std::optional<double> exact_double(int64_t v) {
  double d = static_cast<double>(v);
  if (d >= 9223372036854775808.0 || static_cast<int64_t>(d) != v) return std::nullopt;
  return d;
}

}  // namespace detail

template <>
struct type<bool> {
  static constexpr bool supported = true;
  static constexpr const char* name = "bool";
  static bool from(PFValue v, int code) {
    if (code == kPFBool || (code == kPFInt && (v.v_int64 == 0 || v.v_int64 == 1)))
      return v.v_int64 != 0;
    if (code == kPFInt)
      throw Error(kPFErrValueError, "expected bool, got int " + std::to_string(v.v_int64));
    detail::bad_arg(name, code);
  }
  static int to(bool b, PFValue* v) {
    v->v_int64 = b ? 1 : 0;
    return kPFBool;
  }
};

template <class T>
struct type<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool> &&
                                !std::is_same_v<T, char> && sizeof(T) <= 8>> {
  static constexpr bool supported = true;
  static constexpr const char* name = detail::int_name<T>();
  static T from(PFValue v, int code) {
    if (code != kPFInt && code != kPFBool) detail::bad_arg(name, code);
    int64_t x = v.v_int64;
    bool fits;
    if constexpr (std::is_signed_v<T>)
      fits = x >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
             x <= static_cast<int64_t>(std::numeric_limits<T>::max());
    else fits = x >= 0 && static_cast<uint64_t>(x) <= std::numeric_limits<T>::max();
    if (!fits)
      throw Error(kPFErrValueError, std::string("expected ") + name + ", got int " +
                                        std::to_string(x) + ", which is out of its range");
    return static_cast<T>(x);
  }
  static int to(T x, PFValue* v) {
    if constexpr (std::is_unsigned_v<T> && sizeof(T) == 8)
      if (x > static_cast<uint64_t>(INT64_MAX))
        throw Error(kPFErrValueError, "uint64 result " + std::to_string(x) + " exceeds int64");
    v->v_int64 = static_cast<int64_t>(x);
    return kPFInt;
  }
};

template <class T>
struct type<T, std::enable_if_t<std::is_same_v<T, float> || std::is_same_v<T, double>>> {
  static constexpr bool supported = true;
  static constexpr const char* name = std::is_same_v<T, float> ? "float32" : "float64";
  static T from(PFValue v, int code) {
    double d;
    if (code == kPFFloat) {
      d = v.v_float64;
    } else if (code == kPFInt || code == kPFBool) {
      std::optional<double> e = detail::exact_double(v.v_int64);
      if (!e)
        throw Error(kPFErrValueError, "int " + std::to_string(v.v_int64) + " has no exact " + name);
      d = *e;
    } else {
      detail::bad_arg(name, code);
    }
    if constexpr (std::is_same_v<T, float>)
      if (d == d && (d > FLT_MAX || d < -FLT_MAX) && d - d == 0.0)
        throw Error(kPFErrValueError, "float " + std::to_string(d) + " is out of float32's range");
    return static_cast<T>(d);
  }
  static int to(T x, PFValue* v) {
    v->v_float64 = static_cast<double>(x);
    return kPFFloat;
  }
};

template <class T>
struct type<T, std::enable_if_t<detail::is_str<T>::value>> {
  static constexpr bool supported = true;
  static constexpr const char* name = "str";
  static T from(PFValue v, int code) {
    if (code != kPFStr) detail::bad_arg(name, code);
    return T(v.v_str);
  }
  // A string_view is not NUL-terminated: the caller keeps the copy alive.
  static int to(const T& s, PFValue* v, std::string* keep = nullptr) {
    if constexpr (std::is_same_v<T, std::string_view>) {
      *keep = std::string(s);
      v->v_str = keep->c_str();
    } else if constexpr (std::is_same_v<T, std::string>) {
      v->v_str = s.c_str();
    } else {
      if (s == nullptr) return kPFNull;
      v->v_str = s;
    }
    return kPFStr;
  }
};

template <>
struct type<DLTensor*> {
  static constexpr bool supported = true;
  static constexpr const char* name = "tensor";
  static DLTensor* from(PFValue v, int code) {
    if (code == kPFNull) return nullptr;
    if (code == kPFDLTensorHandle) return static_cast<DLTensor*>(v.v_handle);
    if (code == kPFObjectHandle) {
      DLTensor* t = nullptr;
      if (PFTensorGetDLTensor(v.v_handle, &t) == 0) return t;
      PFErrorClear();
    }
    detail::bad_arg(name, code);
  }
  static int to(DLTensor* t, PFValue* v) {
    if (t == nullptr) return kPFNull;
    v->v_handle = t;
    return kPFDLTensorHandle;
  }
};

// The handle types: an argument is retained for the C++ callee's own
// handle; a result passes a borrowed handle (the runtime takes its own).
namespace detail {
template <class H, uint32_t kIndex>
struct handle_type {
  static constexpr bool supported = true;
  // type<H> derives from this and gives the name.
  static H from(PFValue v, int code) {
    const char* name = type<H>::name;
    if (code == kPFNull) return H();
    bool ok = code == kPFObjectHandle || code == kPFFuncHandle || code == kPFModuleHandle;
    uint32_t t = 0;
    if (ok && kIndex != 0) ok = PFObjectGetTypeIndex(v.v_handle, &t) == 0 && t == kIndex;
    if (!ok) {
      PFErrorClear();
      detail::bad_arg(name, code);
    }
    return H::borrow_as(v.v_handle);
  }
  static int to(const Object& o, PFValue* v) {
    if (!o) return kPFNull;
    v->v_handle = o.get();
    uint32_t t = o.type_index();
    return t == kPFObjectFunction ? kPFFuncHandle
           : t == kPFObjectModule ? kPFModuleHandle
                                  : kPFObjectHandle;
  }
};
}  // namespace detail

// ---------------------------------------------------------------------------
// Any: one packed value that owns what it refers to
// ---------------------------------------------------------------------------

// A value of any type code: a number, a string (copied), or a handle (a
// reference of its own). Results of Function calls come as Any.
class Any {
 public:
  Any() noexcept { v_.v_int64 = 0; }
  // Copies a borrowed packed value: a string's bytes, a handle's reference.
  static Any borrow(PFValue v, int code) {
    Any a;
    a.code_ = code;
    a.v_ = v;
    if (code == kPFStr) {
      a.s_ = v.v_str;
    } else if (code == kPFBytes) {
      const PFByteArray* b = static_cast<const PFByteArray*>(v.v_handle);
      a.s_.assign(b->data != nullptr ? b->data : "", b->size);
    } else if (is_handle(code)) {
      a.obj_ = Object::borrow(v.v_handle);
    }
    return a;
  }
  // Takes a packed result: a handle's new reference is taken over.
  static Any take(PFValue v, int code) {
    if (!is_handle(code)) return borrow(v, code);
    Any a;
    a.code_ = code;
    a.v_ = v;
    a.obj_ = Object::steal(v.v_handle);
    return a;
  }
  // Any of a C++ value of a supported type.
  template <class T, class = std::enable_if_t<!std::is_same_v<std::decay_t<T>, Any>>>
  Any(T&& x);  // defined below, with pack()

  int type_code() const noexcept { return code_; }
  bool is_null() const noexcept { return code_ == kPFNull; }
  // The value as the C API sees it, borrowed from this Any.
  PFValue value() const noexcept {
    PFValue v = v_;
    if (code_ == kPFStr) v.v_str = s_.c_str();
    if (code_ == kPFBytes) {
      bytes_.data = s_.data();
      bytes_.size = s_.size();
      v.v_handle = &bytes_;
    }
    return v;
  }
  // Converts by the rules of a typed call; pf::Error when it does not.
  template <class T>
  T as() const {
    using U = std::decay_t<T>;
    static_assert(type<U>::supported, "pf::Any::as<T>: T is not a packedfunc type");
    if constexpr (std::is_same_v<U, std::string_view> || std::is_same_v<U, const char*>)
      static_assert(!sizeof(T), "pf::Any::as<T>: use std::string: a view would dangle");
    return type<U>::from(value(), code_);
  }

 private:
  static bool is_handle(int code) {
    return code == kPFObjectHandle || code == kPFFuncHandle || code == kPFModuleHandle;
  }
  PFValue v_;
  int code_ = kPFNull;
  std::string s_;
  Object obj_;
  mutable PFByteArray bytes_{nullptr, 0};
};

template <>
struct type<Any> {
  static constexpr bool supported = true;
  static constexpr const char* name = "any";
  static Any from(PFValue v, int code) { return Any::borrow(v, code); }
  static int to(const Any& a, PFValue* v) {
    *v = a.value();
    return a.type_code();
  }
};

// ---------------------------------------------------------------------------
// Packing C++ values as call arguments
// ---------------------------------------------------------------------------

namespace detail {

template <class T>
using param_t = std::conditional_t<std::is_array_v<bare<T>>, const char*, std::decay_t<T>>;

// Packs one C++ value into (v, code); strings that need a terminating copy
// go to `keep`. The value is borrowed from x.
template <class T>
int pack(const T& x, PFValue* v, std::string* keep) {
  using U = param_t<T>;
  static_assert(type<U>::supported,
                "pf: this C++ type has no packedfunc type (see packedfunc.hpp's type table)");
  if constexpr (std::is_same_v<U, const char*> && std::is_array_v<T>) {
    return type<U>::to(static_cast<const char*>(x), v);
  } else if constexpr (is_str<U>::value) {
    return type<U>::to(x, v, keep);
  } else {
    return type<U>::to(x, v);
  }
}

}  // namespace detail

namespace detail {

// N C++ values packed as call arguments or items: the values, their codes,
// and the string copies they borrow from (so it is never copied or moved).
template <size_t N>
struct Packed {
  PFValue v[N > 0 ? N : 1];
  int c[N > 0 ? N : 1];
  std::string keep[N > 0 ? N : 1];
  template <class... A>
  explicit Packed(const A&... xs) {
    size_t i = 0;
    ((c[i] = pack(xs, &v[i], &keep[i]), ++i), ...);
    (void)i;
  }
  Packed(const Packed&) = delete;
  Packed& operator=(const Packed&) = delete;
};

}  // namespace detail

template <class T, class>
Any::Any(T&& x) {
  std::string keep;
  PFValue v;
  int code = detail::pack(x, &v, &keep);
  *this = Any::borrow(v, code);
}

// ---------------------------------------------------------------------------
// Functions
// ---------------------------------------------------------------------------

// A reference to a packedfunc function (a C function, a Python or Node
// callable, a remote function...).
class Function : public Object {
 public:
  Function() noexcept = default;
  static Function steal(PFFunctionHandle h) noexcept { return Function(h); }
  static Function borrow_as(PFFunctionHandle h) noexcept {
    if (h != nullptr) PFObjectRetain(h);
    return Function(h);
  }
  // The global function `name`; an empty Function when there is none.
  static Function find(const char* name) {
    PFFunctionHandle h = nullptr;
    check(PFFuncGetGlobal(name, &h));
    return Function(h);
  }
  // The global function `name`; pf::Error (KeyError) when there is none.
  static Function global(const char* name) {
    Function f = find(name);
    if (!f) throw Error(kPFErrKeyError, std::string("no global function named '") + name + "'");
    return f;
  }

  // Calls with C++ arguments; the result as an Any. Throws pf::Error.
  template <class... A>
  Any operator()(const A&... args) const {
    Any out;
    check(try_call(&out, args...));
    return out;
  }
  // Calls and converts the result to R (void: drops it). Throws pf::Error.
  template <class R, class... A>
  R call(const A&... args) const {
    Any out = (*this)(args...);
    if constexpr (!std::is_void_v<R>) return out.as<R>();
  }
  // The non-throwing form: 0 and *out set, or -1 with the error in the
  // thread's storage (PFGetLastError). An argument that does not convert
  // (a uint64 above INT64_MAX) fails the same way. `out` may be NULL.
  template <class... A>
  int try_call(Any* out, const A&... args) const noexcept {
    try {
      detail::Packed<sizeof...(A)> p(args...);
      PFValue rv;
      int rc = kPFNull;
      // Call target (issue 35, the resolved call targets of function.h):
      // once they exist, a Function resolves its target once and calls
      // through it here; until then, the checked entry.
      if (PFFuncCall(h_, p.v, p.c, static_cast<int>(sizeof...(A)), &rv, &rc) != 0) return -1;
      Any result = Any::take(rv, rc);
      if (out != nullptr) *out = std::move(result);
      return 0;
    } catch (...) {
      return detail::raise_current("pf::Function::try_call");
    }
  }

 private:
  explicit Function(PFFunctionHandle h) noexcept : Object(h) {}
};

template <>
struct type<Function> : detail::handle_type<Function, kPFObjectFunction> {
  static constexpr const char* name = "func";
};

template <>
struct type<Object> : detail::handle_type<Object, 0> {
  static constexpr const char* name = "object";
};

// ---------------------------------------------------------------------------
// Containers (container.h)
// ---------------------------------------------------------------------------

namespace detail {
// What the container handles share: a borrowed handle's reference, and the
// size, read by GetSize.
template <class D, int (*GetSize)(PFObjectHandle, int64_t*)>
class Container : public Object {
 public:
  static D borrow_as(PFObjectHandle h) noexcept {
    D d;
    static_cast<Container&>(d).h_ = Object::borrow(h).release();
    return d;
  }
  int64_t size() const {
    int64_t n = 0;
    check(GetSize(h_, &n));
    return n;
  }

 protected:
  static D adopt(PFObjectHandle h) noexcept {
    D d;
    static_cast<Container&>(d).h_ = h;
    return d;
  }
};
}  // namespace detail

// An immutable Array of values (PFArrayCreate).
class Array : public detail::Container<Array, PFArrayGetSize> {
 public:
  template <class... A>
  static Array of(const A&... xs) {
    detail::Packed<sizeof...(A)> p(xs...);
    PFObjectHandle h = nullptr;
    check(PFArrayCreate(p.v, p.c, static_cast<int64_t>(sizeof...(A)), &h));
    return adopt(h);
  }
  // The value at i: pf::Error (IndexError) outside [0, size).
  Any operator[](int64_t i) const {
    PFValue v;
    int code = kPFNull;
    check(PFArrayGetItem(h_, i, &v, &code));
    return Any::borrow(v, code);
  }
};

// An immutable Map from str or int keys to values (PFMapCreate).
class Map : public detail::Container<Map, PFMapGetSize> {
 public:
  // From alternating keys and values: Map::of("a", 1, "b", 2.5).
  template <class... A>
  static Map of(const A&... kv) {
    static_assert(sizeof...(A) % 2 == 0, "pf::Map::of: give keys and values in pairs");
    detail::Packed<sizeof...(A)> p(kv...);
    std::vector<PFValue> keys, vals;
    std::vector<int> kc, vc;
    for (size_t i = 0; i < sizeof...(A); i += 2) {
      keys.push_back(p.v[i]);
      kc.push_back(p.c[i]);
      vals.push_back(p.v[i + 1]);
      vc.push_back(p.c[i + 1]);
    }
    PFObjectHandle h = nullptr;
    check(PFMapCreate(keys.data(), kc.data(), vals.data(), vc.data(),
                      static_cast<int64_t>(keys.size()), &h));
    return adopt(h);
  }
  // The value of `key`, or nullopt when absent.
  template <class K>
  std::optional<Any> get(const K& key) const {
    std::string keep;
    PFValue k, v;
    int kcode = detail::pack(key, &k, &keep), code = kPFNull, found = 0;
    check(PFMapGetItem(h_, k, kcode, &v, &code, &found));
    if (!found) return std::nullopt;
    return Any::borrow(v, code);
  }
  // The value of `key`: pf::Error (KeyError) when absent.
  template <class K>
  Any at(const K& key) const {
    std::optional<Any> a = get(key);
    if (!a) throw Error(kPFErrKeyError, "pf::Map::at: no such key");
    return *a;
  }
};

template <>
struct type<Array> : detail::handle_type<Array, kPFObjectArray> {
  static constexpr const char* name = "array";
};
template <>
struct type<Map> : detail::handle_type<Map, kPFObjectMap> {
  static constexpr const char* name = "map";
};

// ---------------------------------------------------------------------------
// Modules (module.h)
// ---------------------------------------------------------------------------

class Module : public Object {
 public:
  Module() noexcept = default;
  // Takes over a module reference (PF_MODULE_LOAD_SELF's, for example).
  static Module steal(PFModuleHandle h) noexcept { return Module(Object::steal(h)); }
  // Loads a shared library's module (PFModLoadFromFile). Throws pf::Error.
  static Module load(const char* path) {
    PFModuleHandle h = nullptr;
    check(PFModLoadFromFile(path, &h));
    return Module(Object::steal(h));
  }
  // The module's function `name`, or an empty Function.
  Function find(const char* name, bool query_imports = true) const {
    PFFunctionHandle f = nullptr;
    check(PFModGetFunction(h_, name, query_imports ? 1 : 0, &f));
    return Function::steal(f);
  }
  // The module's function `name`: pf::Error (KeyError) when absent.
  Function function(const char* name) const {
    Function f = find(name);
    if (!f) throw Error(kPFErrKeyError, std::string("no function named '") + name + "' in module");
    return f;
  }
  std::vector<std::string> function_names() const {
    int n = 0;
    const char** names = nullptr;
    check(PFModListFunctionNames(h_, &n, &names));
    return std::vector<std::string>(names, names + n);
  }
  // Publishes the module's functions globally (PFModExportGlobal).
  void export_global(const char* prefix = "", int flags = 0) const {
    check(PFModExportGlobal(h_, prefix, flags));
  }

 private:
  explicit Module(Object o) noexcept : Object(std::move(o)) {}
};

// ---------------------------------------------------------------------------
// Registration by deduction
// ---------------------------------------------------------------------------

// A parameter's name, and with `= value` its default.
template <class T>
struct arg_default {
  const char* name;
  T value;
};
struct arg {
  const char* name;
  constexpr explicit arg(const char* n) : name(n) {}
  template <class T>
  constexpr arg_default<detail::param_t<T>> operator=(T&& value) const {
    return {name, std::forward<T>(value)};
  }
};

namespace detail {

// The parameter and result types of a callable: a function (pointer), a
// lambda or functor with one operator(), a std::function.
template <class F, class = void>
struct callable : callable<decltype(&F::operator())> {};
template <class R, class... P>
struct callable<R (*)(P...)> {
  using result = R;
  using params = std::tuple<P...>;
};
template <class R, class... P>
struct callable<R (*)(P...) noexcept> : callable<R (*)(P...)> {};
template <class R, class... P>
struct callable<R(P...)> : callable<R (*)(P...)> {};
template <class R, class... P>
struct callable<R(P...) noexcept> : callable<R (*)(P...)> {};
template <class C, class R, class... P>
struct callable<R (C::*)(P...)> : callable<R (*)(P...)> {};
template <class C, class R, class... P>
struct callable<R (C::*)(P...) const> : callable<R (*)(P...)> {};
template <class C, class R, class... P>
struct callable<R (C::*)(P...) noexcept> : callable<R (*)(P...)> {};
template <class C, class R, class... P>
struct callable<R (C::*)(P...) const noexcept> : callable<R (*)(P...)> {};

template <class T>
struct is_default : std::false_type {};
template <class T>
struct is_default<arg_default<T>> : std::true_type {};
template <class T>
struct default_value {
  using type = void;
};
template <class T>
struct default_value<arg_default<T>> {
  using type = T;
};

// Whether a default of type D suits a parameter of type P: the same kind
// of value (an int for an int or a float, a float for a float, a string
// for a str, a bool for a bool, nullptr for a handle), not any conversion
// C++ allows.
template <class P, class D>
constexpr bool default_fits() {
  if constexpr (std::is_same_v<P, bool>) return std::is_same_v<D, bool>;
  else if constexpr (std::is_integral_v<P>)
    return std::is_integral_v<D> && !std::is_same_v<D, bool>;
  else if constexpr (std::is_floating_point_v<P>)
    return std::is_arithmetic_v<D> && !std::is_same_v<D, bool>;
  else if constexpr (std::is_same_v<P, std::string> || std::is_same_v<P, std::string_view> ||
                     std::is_same_v<P, const char*>)
    return std::is_same_v<D, const char*> || std::is_same_v<D, std::string>;
  else return std::is_same_v<D, std::nullptr_t>;
}

// The literal of a default (signature.h's LITERAL).
template <class D>
std::string literal(const D& d) {
  if constexpr (std::is_same_v<D, bool>) {
    return d ? "true" : "false";
  } else if constexpr (std::is_integral_v<D>) {
    return std::to_string(d);
  } else if constexpr (std::is_floating_point_v<D>) {
    if (d != d) return "nan";
    if (d == std::numeric_limits<D>::infinity()) return "inf";
    if (d == -std::numeric_limits<D>::infinity()) return "-inf";
    char buf[64];
    std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, static_cast<double>(d));
    std::string s(buf, r.ptr);
    if (s.find_first_of(".en") == std::string::npos) s += ".0";
    return s;
  } else if constexpr (!is_str<D>::value) {
    return "null";  // a handle's default: nullptr
  } else {
    std::string s = "\"";
    static const char hex[] = "0123456789abcdef";
    for (unsigned char ch : std::string_view(d)) {
      if (ch == '"' || ch == '\\') {
        s += '\\';
        s += static_cast<char>(ch);
      } else if (ch >= 0x20 && ch < 0x7f) {
        s += static_cast<char>(ch);
      } else {
        s += "\\x";
        s += hex[ch >> 4];
        s += hex[ch & 15];
      }
    }
    return s + "\"";
  }
}

// One parameter's metadata and (optional) default, kept as its C++ type.
template <class P>
struct param_spec {
  const char* name = nullptr;
  std::optional<P> def;
};

// Checks a registration at compile time. The messages start with
// "pf::def:" and the compiler's "required from here" points at the call.
template <class R, class Params, class... A>
struct check_registration;
template <class R, class... P, class... A>
struct check_registration<R, std::tuple<P...>, A...> {
  static_assert(std::is_void_v<R> || type<bare<R>>::supported,
                "pf::def: the result type has no packedfunc type (packedfunc.hpp's type table)");
  static_assert((type<bare<P>>::supported && ...),
                "pf::def: a parameter type has no packedfunc type (packedfunc.hpp's type table)");
  static_assert(sizeof...(A) == 0 || sizeof...(A) == sizeof...(P),
                "pf::def: give a pf::arg for every parameter or for none");
  static constexpr bool value = true;
};

template <class P, class A>
constexpr bool check_default() {
  if constexpr (is_default<A>::value) {
    static_assert(default_fits<bare<P>, typename default_value<A>::type>(),
                  "pf::def: a default's type does not fit its parameter's type");
    return true;
  } else {
    static_assert(std::is_same_v<A, arg>, "pf::def: describe parameters with pf::arg(\"name\")");
    return false;
  }
}

// The implementation behind one function: the callable, its name, its
// parameters' metadata; `call` is its PFPackedCFunc (resource_handle is
// the Impl), `signature` the text kept as metadata.
template <class F, class R, class... P>
class Impl {
 public:
  static constexpr size_t N = sizeof...(P);

  template <class... A>
  Impl(const char* name, F f, A&&... args) : f_(std::move(f)), name_(name ? name : "<anonymous>") {
    static_assert(check_registration<R, std::tuple<P...>, bare<A>...>::value);
    if constexpr (sizeof...(A) == N && N > 0) {
      constexpr bool defs[] = {check_default<P, bare<A>>()...};
      bool seen = false;
      for (bool d : defs) {
        if (seen && !d) throw Error(kPFErrValueError, "pf::def: defaults must be trailing");
        seen = seen || d;
      }
      set_specs(std::index_sequence_for<P...>{}, std::forward<A>(args)...);
    }
    signature_ = build_signature(std::index_sequence_for<P...>{});
  }

  const std::string& signature() const noexcept { return signature_; }
  const std::string& name() const noexcept { return name_; }

  static int call(PFValue* args, int* codes, int n, PFRetValueHandle ret, void* self) noexcept {
    Impl* impl = static_cast<Impl*>(self);
    try {
      return impl->invoke(args, codes, n, ret, std::index_sequence_for<P...>{});
    } catch (...) {
      return raise_current(impl->name_.c_str());
    }
  }
  static void destroy(void* self) noexcept { delete static_cast<Impl*>(self); }

 private:
  template <size_t... I, class... A>
  void set_specs(std::index_sequence<I...>, A&&... args) {
    (set_spec<I>(std::forward<A>(args)), ...);
  }
  template <size_t I, class A>
  void set_spec(A&& a) {
    auto& spec = std::get<I>(specs_);
    spec.name = a.name;
    if constexpr (is_default<bare<A>>::value) {
      using PT = bare<std::tuple_element_t<I, std::tuple<P...>>>;
      if constexpr (std::is_same_v<typename default_value<bare<A>>::type, std::nullptr_t>)
        spec.def = PT();
      else if constexpr (std::is_same_v<PT, const char*> || std::is_same_v<PT, std::string_view>) {
        static_assert(!std::is_same_v<typename default_value<bare<A>>::type, std::string>,
                      "pf::def: a const char* parameter's default must be a string literal");
        spec.def = PT(a.value);
      } else {
        spec.def = static_cast<PT>(a.value);
      }
    }
  }

  template <size_t... I>
  std::string build_signature(std::index_sequence<I...>) const {
    std::string s;
    if constexpr (std::is_void_v<R>) s = "void";
    else s = type<bare<R>>::name;
    s += '(';
    size_t i = 0;
    auto one = [&](auto& spec, const char* tname) {
      if (i++ > 0) s += ',';
      if (spec.name != nullptr) {
        s += spec.name;
        s += ':';
      }
      s += tname;
      if (spec.def) {
        s += '=';
        s += literal(*spec.def);
      }
    };
    (one(std::get<I>(specs_), type<bare<P>>::name), ...);
    (void)one;  // no parameters
    return s + ')';
  }

  template <size_t I>
  auto get(PFValue* args, int* codes, int n) const {
    using PT = bare<std::tuple_element_t<I, std::tuple<P...>>>;
    const auto& spec = std::get<I>(specs_);
    if (static_cast<int>(I) >= n) {
      if (!spec.def) throw_missing(n);
      return *spec.def;
    }
    try {
      return type<PT>::from(args[I], codes[I]);
    } catch (const Error& e) {
      std::string where = name_ + ": argument " + std::to_string(I);
      if (spec.name != nullptr) where += std::string(" '") + spec.name + "'";
      throw ArgError(e.kind(), where + ": " + e.message());
    }
  }

  [[noreturn]] void throw_missing(int n) const {
    throw ArgError(kPFErrTypeError, name_ + "() takes " + std::to_string(N) + " arguments but " +
                                        std::to_string(n) + " were given");
  }

  template <size_t... I>
  int invoke(PFValue* args, int* codes, int n, PFRetValueHandle ret,
             std::index_sequence<I...>) const {
    (void)args;  // no parameters
    (void)codes;
    if (n > static_cast<int>(N) || n < 0) throw_missing(n);
    // The arguments are converted first, in order, then the call is made.
    std::tuple<bare<P>...> values{get<I>(args, codes, n)...};
    if constexpr (std::is_void_v<R>) {
      std::apply(f_, std::move(values));
      return 0;
    } else {
      bare<R> r = std::apply(f_, std::move(values));
      PFValue v;
      std::string keep;
      int code = pack(r, &v, &keep);
      return PFCFuncSetReturn(ret, &v, &code, 1);
    }
  }

  mutable F f_;
  std::string name_;
  std::tuple<param_spec<bare<P>>...> specs_;
  std::string signature_;
};

template <class F, class R, class Params>
struct impl_of;
template <class F, class R, class... P>
struct impl_of<F, R, std::tuple<P...>> {
  using type = Impl<F, R, P...>;
};
template <class F>
using impl_t = typename impl_of<std::decay_t<F>, typename callable<std::decay_t<F>>::result,
                                typename callable<std::decay_t<F>>::params>::type;

}  // namespace detail

// A function made from a C++ callable, not registered anywhere: to pass as
// a callback, or to register later. `name` (may be NULL) and `doc` (may be
// NULL) become its metadata with the deduced signature. Throws pf::Error.
template <class F, class... A>
Function function(const char* name, const char* doc, F&& f, A&&... args) {
  using Impl = detail::impl_t<F>;
  Impl* impl = new Impl(name, std::forward<F>(f), std::forward<A>(args)...);
  PFFunctionHandle h = nullptr;
  // The finalizer runs at once when the create call fails: impl is freed.
  check(PFFuncCreateFromCFunc(&Impl::call, impl, &Impl::destroy, &h));
  Function fn = Function::steal(h);
  check(PFFuncSetInfo(h, name, impl->signature().c_str(), doc));
  return fn;
}

// Registers a C++ callable globally under `name` (PFFuncRegisterGlobalEx with
// `flags`, kPFRegister* of registry.h): pf::def("mylib.clamp", clamp,
// pf::arg("x"), pf::arg("lo") = 0.0). Returns the function. Throws pf::Error
// (KeyError for a taken name).
template <class F, class... A>
Function def(const char* name, F&& f, A&&... args) {
  Function fn = function(name, nullptr, std::forward<F>(f), std::forward<A>(args)...);
  check(PFFuncRegisterGlobalEx(name, fn.get(), 0));
  return fn;
}

// pf::nonblocking(), first among the extras of pf::def and of class_'s def
// and def_static: the function is short and never blocks, so hosts may
// keep their interpreter lock around its calls (kPFFuncNonBlocking,
// function.h, which says what such a function must not do; a method gets
// kPFMethodNonBlocking). For PF_DEF, PF_REGISTER_FLAGS(name,
// kPFFuncNonBlocking) beside it (module.h).
struct nonblocking {};

template <class F, class... A>
Function def(const char* name, F&& f, nonblocking, A&&... args) {
  Function fn = function(name, nullptr, std::forward<F>(f), std::forward<A>(args)...);
  check(PFFuncSetFlags(fn.get(), kPFFuncNonBlocking));
  check(PFFuncRegisterGlobalEx(name, fn.get(), 0));
  return fn;
}

namespace detail {

// PF_DEF's registration: a module descriptor in this library's
// "pf_functions" section (module.h), filled in when the library's static
// objects are constructed (at dlopen, before PFModLoadFromFile reads the
// section). Its strings live in the library itself, as the loader wants:
// the name is the literal, the signature this object's buffer.
constexpr size_t kSignatureMax = 1024;
template <class Tag>
struct StaticDef {
  static inline PFFuncDescriptor desc{};
  static inline char signature[kSignatureMax];
  static inline void* impl = nullptr;

  template <class F, class... A>
  StaticDef(const char* name, const char* doc, F&& f, A&&... args) noexcept {
    using Impl = impl_t<F>;
    static std::optional<Impl> keep;
    try {
      keep.emplace(name, std::forward<F>(f), std::forward<A>(args)...);
    } catch (...) {
      return;  // the descriptor stays empty: the module fails to load
    }
    impl = &*keep;
    const std::string& s = keep->signature();
    if (s.size() >= kSignatureMax) return;
    std::memcpy(signature, s.c_str(), s.size() + 1);
    desc = PFFuncDescriptor{PF_FUNC_DESCRIPTOR_ABI,
                            kPFFuncDescriptorPacked,
                            name,
                            &call<Impl>,
                            nullptr,
                            signature,
                            doc,
                            nullptr,
                            nullptr,
                            nullptr};
  }
  template <class Impl>
  static int call(PFValue* a, int* c, int n, PFRetValueHandle r, void*) noexcept {
    return Impl::call(a, c, n, r, impl);
  }
};

}  // namespace detail

// ---------------------------------------------------------------------------
// Object types from C++ classes
// ---------------------------------------------------------------------------

// pf::class_<T> makes the C++ class T an object type (object_type.h). An
// instance's struct holds a small header, then a T made by placement-new
// in the runtime's storage: a constructor registered with init<Args...>
// (or T's default constructor when none is) runs when a host constructs
// one, and ~T runs exactly once, in the type's finalizer. Members become:
//
//   field<&T::m>(name [, doc])     a field, writable or read-only to hosts:
//   readonly<&T::m>(name [, doc])  an arithmetic member (bool, integers,
//                                  float, double) is a plain field at its
//                                  offset; a std::string member is an
//                                  accessor field of type str (its getter
//                                  and setter are made here, object_type.h),
//                                  read and written as obj.name by hosts;
//   prop<&T::m>(name [, doc])      any member of a supported type: two
//                                  methods, NAME() giving it and
//                                  set_NAME(value) setting it (for the
//                                  types a field cannot have: pf::Object,
//                                  pf::Function, ...);
//   def<&T::f>(name, args...)      a member function, const or not: a method
//                                  with its deduced signature, names and
//                                  defaults from pf::arg as for pf::def;
//   def_static<&T::f>(name, args...) a static member function (or any
//                                  function): a static method, called
//                                  without an object (`T.name(...)` in
//                                  Python); def and def_static take
//                                  pf::nonblocking() first among args for
//                                  a short, non-blocking method
//                                  (kPFMethodNonBlocking);
//   inherits<Base>()               the parent type: Base's class_ (declared
//                                  before, in the same file) becomes the
//                                  parent, so isinstance holds and Base's
//                                  fields and methods are inherited. Base
//                                  must be a non-virtual base at offset 0.
//
// The member pointers are template arguments, so every descriptor is made
// from constant expressions; the code behind each method is a function of
// its own, as the loader wants. Exceptions from a constructor or a method
// become errors as pf::def's do. A method called on an instance that was
// allocated but not constructed (PFObjectAlloc) is a RuntimeError; so is
// calling __init__ on a constructed one.
//
// Copies by value. An instance serializes through its fields: PFToJSON
// writes them, and PFFromJSON (so pickle and copy.deepcopy in Python, and
// an instance passed to or returned by a remote function) rebuilds one:
// the type's prepare hook (object_type.h) constructs T() in the fresh
// storage, then each field is written (a readonly std::string must equal
// what T() gives it: a ValueError naming the field otherwise). So a copy
// equals the original field by field, inside containers and C types'
// fields too, shared instances shared; what T holds outside its fields is
// what T() makes. A T that is not default-constructible cannot be rebuilt:
// TypeError "KEY cannot be rebuilt from its fields: its C++ type has no
// default constructor"; an exception from T() is the rebuild's error.
//
// In a plugin, PF_CLASS(T, key, doc) declares the type in the library's
// module (the type is registered when the module loads):
//
//     PF_CLASS(Counter, "mylib.Counter", "Counts.")
//         .init<int64_t>(pf::arg("start") = 0)
//         .field<&Counter::count>("count")
//         .field<&Counter::name>("name")
//         .def<&Counter::bump>("bump", pf::arg("by") = 1)
//         .def_static<&Counter::parse>("parse", pf::arg("text"));
//
// In a program, pf::class_<T>(key, doc)....register_type() registers it
// at once and gives its index (throws pf::Error). A class is described once
// per process: each T has one description. A registration that fails to
// build (a default after which a parameter has none) leaves the description
// invalid, and loading the module fails with a ValueError.
namespace detail {

// What the storage of an instance begins with: the destructor of the T
// constructed after it, NULL while none is (zeroed storage).
constexpr int kClassMembers = 64;    // fields, and methods, of one class_
constexpr size_t kClassText = 8192;  // bytes of signatures and names of one class_
struct ClassHeader {
  void (*destroy)(void*);
};
constexpr size_t kClassPrefix = PF_OBJECT_DATA_ALIGN;
static_assert(sizeof(ClassHeader) <= kClassPrefix, "pf::class_: the header must fit its prefix");

template <class T>
void destroy_as(void* p) noexcept {
  static_cast<T*>(p)->~T();
}
inline void* class_value(void* data) { return static_cast<char*>(data) + kClassPrefix; }

// The finalizer of every class_: the header names the most derived type
// constructed, so the first finalizer in the chain destroys it and the
// ancestors' find nothing left to do.
inline void class_finalize(void* data) noexcept {
  ClassHeader* h = static_cast<ClassHeader*>(data);
  if (void (*destroy)(void*) = std::exchange(h->destroy, nullptr)) destroy(class_value(data));
}

inline void* class_data(PFValue v, int code) {
  void* data = nullptr;
  if (code != kPFObjectHandle) bad_arg("object", code);
  check(PFObjectGetData(v.v_handle, &data));
  return data;
}

// The object argument of a method (Self: a constructed T) and of __init__
// (Raw: storage without a T yet).
template <class T, bool kConstructed>
struct ClassArg {
  ClassHeader* h;
  T* p;
};
template <class T>
using Self = ClassArg<T, true>;
template <class T>
using Raw = ClassArg<T, false>;

// The per-class description, filled by class_ while the library's static
// objects are constructed, read by the loader afterwards.
template <class T>
struct class_info {
  // Constant-initialized, so that they are ready before any builder runs.
  static inline const char* key = nullptr;
  static inline bool has_init = false;
  static inline PFObjectTypeDesc3 desc{};
  // The loader wants every array and string of a description in the
  // library's own data, so they are fixed arrays here, not the heap's.
  static inline PFFieldDesc fields[kClassMembers]{};
  static inline PFMethodDesc methods[kClassMembers]{};
  static inline PFAccessorDesc accessors[kClassMembers]{};
  static inline int num_fields = 0, num_methods = 0, num_accessors = 0;
  static inline char texts[kClassText]{};  // signatures and made names
  static inline size_t text_used = 0;
  static inline const PFFuncDescriptor descriptor = {PF_FUNC_DESCRIPTOR_ABI,
                                                     kPFFuncDescriptorType,
                                                     nullptr,
                                                     nullptr,
                                                     nullptr,
                                                     nullptr,
                                                     nullptr,
                                                     nullptr,
                                                     nullptr,
                                                     &desc.v2.base};
  static void sync() {
    desc.v2.base.fields = num_fields > 0 ? fields : nullptr;
    desc.v2.base.num_fields = num_fields;
    desc.v2.base.methods = num_methods > 0 ? methods : nullptr;
    desc.v2.base.num_methods = num_methods;
    desc.v2.accessors = num_accessors > 0 ? accessors : nullptr;
    desc.v2.num_accessors = num_accessors;
  }
};

// The constructed T of an instance's struct, or nullptr after recording a
// RuntimeError naming the field (an instance allocated without __init__).
template <class T>
T* constructed(const void* data, const char* name) noexcept {
  if (static_cast<const ClassHeader*>(data)->destroy != nullptr)
    return static_cast<T*>(class_value(const_cast<void*>(data)));
  PFErrorSetFormat(kPFErrRuntimeError,
                   "%s: field '%s': the object is not constructed (allocated without __init__)",
                   class_info<T>::key, name);
  return nullptr;
}

// The prepare hook of every class_ (object_type.h, "Rebuilding from
// fields"): an instance that PFFromJSON rebuilds gets a default-constructed
// T, which its fields are then written to. Only the rebuilding thread holds
// the instance meanwhile, so nothing else can see it half made; the header
// names the destructor only once T is made, so a T() that throws leaves
// nothing for the finalizer to destroy.
template <class T>
int class_prepare(void* data) noexcept {
  if constexpr (std::is_default_constructible_v<T>) {
    try {
      new (class_value(data)) T();
    } catch (...) {
      return raise_current(class_info<T>::key);
    }
    static_cast<ClassHeader*>(data)->destroy = &destroy_as<T>;
    return 0;
  } else {
    return PFErrorSetFormat(kPFErrTypeError,
                            "%s cannot be rebuilt from its fields: its C++ type has no default "
                            "constructor",
                            class_info<T>::key);
  }
}

// The getter and setter of a std::string member M of T: an accessor field
// (object_type.h). A read borrows the member's characters (valid until the
// member is written or the instance goes); a write assigns a copy.
template <class T, auto M>
struct string_member {
  static inline const char* name = nullptr;
  static int get(const void* data, PFValue* out, int* out_type_code) noexcept {
    const T* t = constructed<T>(data, name);
    if (t == nullptr) return -1;
    out->v_str = (t->*M).c_str();
    *out_type_code = kPFStr;
    return 0;
  }
  static int set(void* data, PFValue value, int type_code) noexcept {
    T* t = constructed<T>(data, name);
    if (t == nullptr) return -1;
    if (type_code != kPFStr)  // the runtime passes str, or null for a str field
      return PFErrorSetFormat(kPFErrTypeError, "%s: field '%s': expected str, got %s",
                              class_info<T>::key, name, PFTypeCodeName(type_code));
    try {
      t->*M = value.v_str;
      return 0;
    } catch (...) {
      return raise_current(name);
    }
  }
};

// The packed function behind one method: a function of its own per Impl
// (every Impl here has a lambda type of its own), with the Impl kept for
// the process (types are never removed).
template <class Impl>
struct method_slot {
  static inline Impl* impl = nullptr;
  static int call(PFValue* a, int* c, int n, PFRetValueHandle r, void*) noexcept {
    return Impl::call(a, c, n, r, impl);
  }
};

template <class T, class U>
size_t member_offset(U T::*m) {
  alignas(T) static unsigned char buf[sizeof(T)];
  const T* t = static_cast<const T*>(static_cast<const void*>(buf));
  return static_cast<size_t>(static_cast<const unsigned char*>(static_cast<const void*>(&(t->*m))) -
                             buf);
}

template <class M>
struct member_of;
template <class T, class U>
struct member_of<U T::*> {
  using cls = T;
  using type = U;
};

}  // namespace detail

template <class T, bool kConstructed>
struct type<detail::ClassArg<T, kConstructed>> {
  static constexpr bool supported = true;
  static constexpr const char* name = "object";
  static detail::ClassArg<T, kConstructed> from(PFValue v, int code) {
    void* data = detail::class_data(v, code);
    detail::ClassHeader* h = static_cast<detail::ClassHeader*>(data);
    if ((h->destroy != nullptr) != kConstructed)
      throw Error(kPFErrRuntimeError,
                  kConstructed ? "the object is not constructed (allocated without __init__)"
                               : "the object is constructed already");
    return {h, static_cast<T*>(detail::class_value(data))};
  }
};

template <class T>
class class_ {
  static_assert(std::is_class_v<T>, "pf::class_<T>: T must be a class");
  static_assert(alignof(T) <= PF_OBJECT_DATA_ALIGN,
                "pf::class_<T>: T's alignment exceeds PF_OBJECT_DATA_ALIGN");
  // A finalizer runs when the last reference goes, from any host, with no
  // caller to give an exception to: a destructor that may throw would end
  // the process (std::terminate), so it is refused here.
  static_assert(std::is_nothrow_destructible_v<T>,
                "pf::class_<T>: T's destructor may throw (noexcept(false)); a finalizer has no "
                "caller to throw to: make it noexcept");
  using info = detail::class_info<T>;

 public:
  class_(const char* key, const char* doc = nullptr) noexcept {
    info::key = key;
    info::desc.v2.base.abi = PF_OBJECT_TYPE_DESC3_ABI;
    info::desc.v2.base.key = key;
    info::desc.v2.base.doc = doc;
    info::desc.v2.base.instance_size = detail::kClassPrefix + sizeof(T);
    info::desc.v2.base.finalizer = &detail::class_finalize;
    info::desc.prepare = &detail::class_prepare<T>;
    guard([] {
      if constexpr (std::is_default_constructible_v<T>) {
        add_init<>();
      } else {
        // Not the parent's __init__ on a T's storage: no constructor at all.
        add_method("__init__", nullptr, [](detail::Raw<T>) {
          throw Error(kPFErrTypeError, "no constructor: give one with pf::class_::init");
        });
        to_front();
      }
    });
  }

  // The constructor T(Args...), with pf::arg names and defaults.
  template <class... Args, class... A>
  class_& init(A&&... args) {
    guard([&] {
      if (info::has_init)
        std::move(info::methods + 1, info::methods + info::num_methods--, info::methods);
      add_init<Args...>(std::forward<A>(args)...);
    });
    return *this;
  }

  template <auto M>
  class_& field(const char* name, const char* doc = nullptr) {
    return add_field<M>(name, doc, kPFFieldWritable);
  }
  template <auto M>
  class_& readonly(const char* name, const char* doc = nullptr) {
    return add_field<M>(name, doc, 0);
  }

  template <auto M>
  class_& prop(const char* name, const char* doc = nullptr) {
    using U = typename detail::member_of<decltype(M)>::type;
    guard([&] {
      add_method(name, doc, [](detail::Self<T> s) -> U { return s.p->*M; });
      add_method(
          keep(std::string("set_") + name), doc,
          [](detail::Self<T> s, U v) { s.p->*M = std::move(v); }, arg("value"));
    });
    return *this;
  }

  template <auto M, class... A>
  class_& def(const char* name, A&&... args) {
    guard([&] { add_member_function<M, 0u>(name, std::forward<A>(args)...); });
    return *this;
  }
  template <auto M, class... A>
  class_& def(const char* name, nonblocking, A&&... args) {
    guard([&] { add_member_function<M, kPFMethodNonBlocking>(name, std::forward<A>(args)...); });
    return *this;
  }

  template <auto F, class... A>
  class_& def_static(const char* name, A&&... args) {
    static_assert(!std::is_member_function_pointer_v<decltype(F)>,
                  "pf::class_::def_static: a static member function or a function, not a member "
                  "function (which takes the object: use def)");
    using C = detail::callable<decltype(F)>;
    guard([&] {
      add_static<F, kPFMethodStatic>(name, static_cast<typename C::result*>(nullptr),
                                     static_cast<typename C::params*>(nullptr),
                                     std::forward<A>(args)...);
    });
    return *this;
  }
  template <auto F, class... A>
  class_& def_static(const char* name, nonblocking, A&&... args) {
    using C = detail::callable<decltype(F)>;
    guard([&] {
      add_static<F, kPFMethodStatic | kPFMethodNonBlocking>(
          name, static_cast<typename C::result*>(nullptr),
          static_cast<typename C::params*>(nullptr), std::forward<A>(args)...);
    });
    return *this;
  }

  template <class Base>
  class_& inherits() {
    static_assert(std::is_base_of_v<Base, T>,
                  "pf::class_<T>::inherits<Base>: Base is not a base of T");
    guard([] {
      alignas(T) static unsigned char buf[sizeof(T)];
      T* t = static_cast<T*>(static_cast<void*>(buf));
      if (static_cast<void*>(static_cast<Base*>(t)) != static_cast<void*>(t) ||
          detail::class_info<Base>::key == nullptr)
        throw Error(kPFErrValueError,
                    "inherits: the base is not at offset 0 or not declared first");
      info::desc.v2.base.parent = detail::class_info<Base>::key;
    });
    return *this;
  }

  // Registers the type now (PFObjectTypeRegister); its index. Throws
  // pf::Error.
  uint32_t register_type() const {
    uint32_t index = 0;
    check(PFObjectTypeRegister(&info::desc.v2.base, &index));
    return index;
  }

 private:
  // Runs a step of the description; a failure makes the description
  // invalid (abi 0) instead of escaping a static initializer.
  template <class G>
  static void guard(G&& g) noexcept {
    try {
      g();
      info::sync();
    } catch (...) {
      info::desc.v2.base.abi = 0;
    }
  }
  static const char* keep(const std::string& s) {
    if (s.size() >= detail::kClassText - info::text_used)
      throw Error(kPFErrValueError, "too much signature text");
    char* p = info::texts + info::text_used;
    std::memcpy(p, s.c_str(), s.size() + 1);
    info::text_used += s.size() + 1;
    return p;
  }

  template <class... Args, class... A>
  static void add_init(A&&... args) {
    auto f = [](detail::Raw<T> r, Args... a) {
      if constexpr (std::is_constructible_v<T, Args&&...>)
        new (static_cast<void*>(r.p)) T(std::move(a)...);
      else new (static_cast<void*>(r.p)) T{std::move(a)...};
      r.h->destroy = &detail::destroy_as<T>;
    };
    add_method("__init__", nullptr, f, std::forward<A>(args)...);
    to_front();
  }
  // The __init__ just added goes first, where init() replaces it.
  static void to_front() {
    std::rotate(info::methods, info::methods + info::num_methods - 1,
                info::methods + info::num_methods);
    info::has_init = true;
  }

  template <auto M>
  class_& add_field(const char* name, const char* doc, uint32_t flags) {
    using U = typename detail::member_of<decltype(M)>::type;
    constexpr bool kString = std::is_same_v<U, std::string>;
    static_assert((std::is_arithmetic_v<U> && type<U>::supported) || kString,
                  "pf::class_::field: an arithmetic or std::string member (use prop for others)");
    guard([&] {
      if constexpr (kString) {
        using S = detail::string_member<T, M>;
        if (info::num_accessors == detail::kClassMembers)
          throw Error(kPFErrValueError, "too many fields");
        S::name = name;
        info::accessors[info::num_accessors++] = PFAccessorDesc{
            name, "str", &S::get, (flags & kPFFieldWritable) ? &S::set : nullptr, doc};
      } else {
        size_t offset = detail::kClassPrefix + detail::member_offset<T>(M);
        if (info::num_fields == detail::kClassMembers)
          throw Error(kPFErrValueError, "too many fields");
        info::fields[info::num_fields++] = PFFieldDesc{name, type<U>::name, offset, flags, doc};
      }
    });
    return *this;
  }

  template <auto M, uint32_t kFlags, class... A>
  static void add_member_function(const char* name, A&&... args) {
    using C = detail::callable<decltype(M)>;
    add_bound<M, kFlags>(name, static_cast<typename C::result*>(nullptr),
                         static_cast<typename C::params*>(nullptr), std::forward<A>(args)...);
  }
  template <auto M, uint32_t kFlags, class R, class... P, class... A>
  static void add_bound(const char* name, R*, std::tuple<P...>*, A&&... args) {
    add_method_flags<kFlags>(
        name, nullptr,
        [](detail::Self<T> s, P... p) -> R { return (s.p->*M)(std::forward<P>(p)...); },
        std::forward<A>(args)...);
  }

  template <auto F, uint32_t kFlags, class R, class... P, class... A>
  static void add_static(const char* name, R*, std::tuple<P...>*, A&&... args) {
    add_method_flags<kFlags>(
        name, nullptr, [](P... p) -> R { return F(std::forward<P>(p)...); },
        std::forward<A>(args)...);
  }

  // One method: its Impl (named KEY.NAME), its trampoline, its signature.
  // An instance method's object comes first, named "self".
  template <class F, class... A>
  static void add_method(const char* name, const char* doc, F f, A&&... args) {
    add_method_flags<0u>(name, doc, f, std::forward<A>(args)...);
  }
  template <uint32_t kFlags, class F, class... A>
  static void add_method_flags(const char* name, const char* doc, F f, A&&... args) {
    using Impl = detail::impl_t<F>;
    std::string full = std::string(info::key != nullptr ? info::key : "") + "." + name;
    Impl* impl;
    if constexpr (sizeof...(A) > 0 && !(kFlags & kPFMethodStatic))
      impl = new Impl(full.c_str(), f, arg("self"), std::forward<A>(args)...);
    else impl = new Impl(full.c_str(), f, std::forward<A>(args)...);
    detail::method_slot<Impl>::impl = impl;
    if (info::num_methods == detail::kClassMembers)
      throw Error(kPFErrValueError, "too many methods");
    info::methods[info::num_methods++] = PFMethodDesc{
        name, &detail::method_slot<Impl>::call, nullptr, keep(impl->signature()), kFlags, doc};
  }
};

}  // namespace pf

#if defined(PF_ACCESSOR_USE_)
/* PF_DEF(name, fn, args...): registers the C++ callable `fn` (a function, a
 * lambda, a std::function) under `name` in the module of the library (or
 * program) it is compiled into, as PF_REGISTER_TYPED does for a C function:
 * PFModLoadFromFile finds it, PF_MODULE_LOAD_SELF gives it. `args` are
 * pf::arg names and defaults, or none. The signature, deduced, is kept as
 * metadata; the function converts its arguments itself and turns C++
 * exceptions into errors. Use at file scope, followed by `;`. At most
 * pf::detail::kSignatureMax bytes of signature text (a longer one leaves
 * the descriptor empty, which fails the load). PF_DEF_DOC(name, doc, fn,
 * args...) also gives a docstring. */
#define PF_DEF(name, ...) PF_DEF_DOC(name, nullptr, __VA_ARGS__)
#define PF_DEF_DOC(name, doc, ...) PF_DEF_AT_(PF_UNIQUE_ID_, name, doc, __VA_ARGS__)
#define PF_DEF_AT_(id, name, doc, ...) PF_DEF_AT2_(id, name, doc, __VA_ARGS__)
#define PF_DEF_AT2_(id, name, doc, ...)                                                        \
  PF_ACCESSOR_USE_(id);                                                                        \
  struct PF_CAT_(pf_def_tag_, id);                                                             \
  static ::pf::detail::StaticDef<struct PF_CAT_(pf_def_tag_, id)> PF_CAT_(pf_def_, id){        \
      name, doc, __VA_ARGS__};                                                                 \
  __attribute__((used, section("pf_functions"))) static const PFFuncDescriptor* const PF_CAT_( \
      pf_def_entry_, id) = &::pf::detail::StaticDef<struct PF_CAT_(pf_def_tag_, id)>::desc
/* PF_CLASS(T, key, doc): declares the C++ class T as the object type `key`
 * of the module of the library it is compiled into (registered when the
 * module loads, as PF_REGISTER_OBJECT_TYPE does for C); the class_<T>
 * builder calls follow (see pf::class_), then `;`. At file scope. */
#define PF_CLASS(T, key, doc) PF_CLASS_AT_(PF_UNIQUE_ID_, T, key, doc)
#define PF_CLASS_AT_(id, T, key, doc) PF_CLASS_AT2_(id, T, key, doc)
#define PF_CLASS_AT2_(id, T, key, doc)                                                         \
  PF_ACCESSOR_USE_(id);                                                                        \
  __attribute__((used, section("pf_functions"))) static const PFFuncDescriptor* const PF_CAT_( \
      pf_class_entry_, id) = &::pf::detail::class_info<T>::descriptor;                         \
  static const ::pf::class_<T> PF_CAT_(pf_class_, id) = ::pf::class_<T>(key, doc)
#endif

#endif /* PACKEDFUNC_PACKEDFUNC_HPP_ */
