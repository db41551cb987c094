// Runtime values of the Jinja interpreter, modelled on the Python objects jinja2 works with:
// Undefined (missing variable/attribute, remembers what was missing for error messages), None,
// bool, int (int64), float, str (UTF-8 bytes), list, dict (insertion-ordered, string keys) and
// callables (builtins, bound methods, macros). Lists/dicts are shared (Python reference
// semantics): `namespace()` objects are dicts mutated through `set ns.x = ...`.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace nanovllm::jinja {

class Value;
struct Dict;
// A Python list, or a tuple (only printing differs: (1, 2)).
struct List : std::vector<Value> {
  using std::vector<Value>::vector;
  bool is_tuple = false;
};

// Positional and keyword arguments of a call, as Python passes them.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Argument `i` by position, or by keyword `name`, or nullptr if absent.
  const Value* get(size_t i, const char* name) const;
};

struct Function {
  std::string name;
  std::function<Value(CallArgs&)> fn;
};

struct Undefined {
  std::string hint;  // e.g. "'foo' is undefined" or "'dict object' has no attribute 'x'"
};
struct None {};

class Value {
 public:
  enum class Kind : uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Function };
  using Storage = std::variant<Undefined, None, bool, int64_t, double, std::string, std::shared_ptr<List>,
                               std::shared_ptr<Dict>, std::shared_ptr<Function>>;

  Value() : v_(Undefined{}) {}
  Value(None) : v_(None{}) {}
  Value(Undefined u) : v_(std::move(u)) {}
  Value(bool b) : v_(b) {}
  Value(int i) : v_(int64_t(i)) {}
  Value(int64_t i) : v_(i) {}
  Value(size_t i) : v_(int64_t(i)) {}
  Value(double d) : v_(d) {}
  Value(std::string s) : v_(std::move(s)) {}
  Value(const char* s) : v_(std::string(s)) {}
  Value(List l) : v_(std::make_shared<List>(std::move(l))) {}
  static Value tuple(List l) {
    l.is_tuple = true;
    return Value(std::move(l));
  }
  Value(std::shared_ptr<List> l) : v_(std::move(l)) {}
  Value(std::shared_ptr<Dict> d) : v_(std::move(d)) {}
  Value(std::shared_ptr<Function> f) : v_(std::move(f)) {}
  static Value undefined(std::string hint) { return Value(Undefined{std::move(hint)}); }
  static Value function(std::string name, std::function<Value(CallArgs&)> fn);

  Kind kind() const { return Kind(v_.index()); }
  bool is_undefined() const { return kind() == Kind::Undefined; }
  bool is_none() const { return kind() == Kind::None; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_float() const { return kind() == Kind::Float; }
  bool is_number() const { return is_int() || is_float() || is_bool(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_list() const { return kind() == Kind::List; }
  bool is_dict() const { return kind() == Kind::Dict; }
  bool is_function() const { return kind() == Kind::Function; }

  bool as_bool() const { return std::get<bool>(v_); }
  int64_t as_int() const;  // int or bool
  double as_double() const;  // int, bool or float
  const std::string& str() const { return std::get<std::string>(v_); }
  const List& list() const { return *std::get<std::shared_ptr<List>>(v_); }
  List& list_mut() { return *std::get<std::shared_ptr<List>>(v_); }
  const Dict& dict() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  Dict& dict_mut() const { return *std::get<std::shared_ptr<Dict>>(v_); }
  const Function& func() const { return *std::get<std::shared_ptr<Function>>(v_); }
  const std::string& undefined_hint() const { return std::get<Undefined>(v_).hint; }

  // Python truthiness.
  bool truthy() const;
  // Python type name as jinja2 error messages show it ("dict object", "str object" ...).
  std::string type_name() const;

 private:
  Storage v_;
};

// Insertion-ordered string-keyed dict (like a Python dict built from JSON).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;  // jinja2 namespace(): attribute assignment allowed
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

Value make_dict();

// str(v) as Python prints it ({{ v }}): None, True, 1.5, ['a', 1], {'k': 'v'}; undefined prints "".
std::string to_str(const Value& v);
// repr(v): strings quoted as Python does.
std::string to_repr(const Value& v);
// Python float repr (shortest round-trip): 1.0, 0.1, 1e-05, 1e+16, inf, nan.
std::string format_float(double d);
// json.dumps options (defaults = transformers' tojson: ensure_ascii=False, indent=None).
struct JsonOptions {
  int indent = -1;  // < 0: None (single line)
  bool sort_keys = false;
  bool ensure_ascii = false;
  const char* item_sep = nullptr;  // nullptr: ", " without indent, "," with indent
  const char* key_sep = ": ";
};
// json.dumps(v, ...) as Python prints it. Throws for undefined/callables.
std::string to_json(const Value& v, const JsonOptions& opt = {});

// Python ==, and <, > ordering (throws nanovllm::Error for unorderable types).
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);

// JSON -> template values. Throws nanovllm::Error when containers nest deeper than
// kJsonMaxDepth + 1 (util/json_bounded.h: the limit every JSON reader applies, plus the render
// context object), so the recursion is bounded.
Value from_json(const nlohmann::json& j);
Value from_json(const nlohmann::ordered_json& j);

// UTF-8 helpers: Python str indexes by code point.
std::vector<std::string> utf8_chars(const std::string& s);
size_t utf8_length(const std::string& s);

}  // namespace nanovllm::jinja
