// Python object model pieces for the Jinja interpreter: attribute/item access as jinja2's
// sandbox does it (attribute first for `.`, item first for `[]`), slicing, `in`, iteration,
// str/dict/list methods and the global functions transformers exposes.
#include "chat/jinja_methods.h"

#include <utf8proc.h>

#include <algorithm>
#include <ctime>

#include "chat/jinja_strings.h"

namespace nanovllm::jinja {

void fail(const std::string& msg) { throw Error(msg); }

void fail_undefined(const Value& v) {
  fail(v.is_undefined() && !v.undefined_hint().empty() ? v.undefined_hint() : "value is undefined");
}

size_t py_len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::String: return utf8_length(v.str());
    case Value::Kind::List: return v.list().size();
    case Value::Kind::Dict: return v.dict().items.size();
    case Value::Kind::Undefined: return 0;
    default: fail("object of type '" + v.type_name() + "' has no len()");
  }
}

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::List: return v.list();
    case Value::Kind::Dict: {
      List keys;
      for (auto& kv : v.dict().items) keys.emplace_back(kv.first);
      return keys;
    }
    case Value::Kind::String: {
      List chars;
      for (auto& c : utf8_chars(v.str())) chars.emplace_back(c);
      return chars;
    }
    case Value::Kind::Undefined: return {};
    default: fail("'" + v.type_name() + "' object is not iterable");
  }
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::String:
      if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + item.type_name());
      return container.str().find(item.str()) != std::string::npos;
    case Value::Kind::List:
      for (auto& x : container.list())
        if (equals(x, item)) return true;
      return false;
    case Value::Kind::Dict: return item.is_string() && container.dict().find(item.str()) != nullptr;
    case Value::Kind::Undefined: return false;
    default: fail("argument of type '" + container.type_name() + "' is not iterable");
  }
}

static const char* kDictMethods[] = {"items", "keys", "values", "get", "copy"};
static const char* kStrMethods[] = {"strip", "lstrip", "rstrip", "split", "rsplit", "startswith", "endswith",
                                    "replace", "upper", "lower", "title", "capitalize", "find", "rfind",
                                    "count", "join", "format", "splitlines", "isdigit", "isalpha", "isspace",
                                    "isalnum", "islower", "isupper", "index", "rindex"};
static const char* kListMethods[] = {"index", "count", "copy"};
static const char* kUnsafe[] = {"append", "pop", "extend", "insert", "remove", "clear", "update", "setdefault",
                                "popitem", "sort", "reverse"};

template <size_t N>
static bool in_list(const char* (&names)[N], const std::string& name) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

bool has_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) return in_list(kStrMethods, name);
  if (obj.is_dict()) return !obj.dict().is_namespace && (in_list(kDictMethods, name) || in_list(kUnsafe, name));
  if (obj.is_list()) return in_list(kListMethods, name) || in_list(kUnsafe, name);
  return false;
}

static std::string no_attr(const Value& obj, const std::string& name) {
  if (obj.is_none()) return "'None' has no attribute '" + name + "'";
  return "'" + obj.type_name() + " object' has no attribute '" + name + "'";
}

Value getattr(const Value& obj, const std::string& name) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict()) {
    if (!has_method(obj, name)) {
      const Value* v = obj.dict().find(name);
      return v ? *v : Value::undefined(no_attr(obj, name));
    }
  }
  if (has_method(obj, name)) {
    Value self = obj;
    return Value::function(name, [self, name](CallArgs& a) {
      Value r;
      if (!call_method(self, name, a, r)) fail("'" + self.type_name() + "' object has no method '" + name + "'");
      return r;
    });
  }
  return Value::undefined(no_attr(obj, name));
}

Value getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  if (obj.is_dict() && key.is_string()) {
    const Value* v = obj.dict().find(key.str());
    if (v) return *v;
    if (has_method(obj, key.str())) return getattr(obj, key.str());
    return Value::undefined(no_attr(obj, key.str()));
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      int64_t n = int64_t(obj.list().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined("list object has no element " + std::to_string(key.as_int()));
      return obj.list()[size_t(i)];
    }
    auto chars = utf8_chars(obj.str());
    int64_t n = int64_t(chars.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("str object has no element " + std::to_string(key.as_int()));
    return Value(chars[size_t(i)]);
  }
  if (key.is_string()) return getattr(obj, key.str());
  return Value::undefined(no_attr(obj, to_str(key)));
}

Value python_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  if (obj.is_undefined()) fail_undefined(obj);
  auto opt = [](const Value& v, const char* what) -> std::pair<bool, int64_t> {
    if (v.is_undefined() || v.is_none()) return {false, 0};
    if (!v.is_int() && !v.is_bool()) fail(std::string("slice ") + what + " must be an integer or None");
    return {true, v.as_int()};
  };
  auto step_opt = opt(step, "step");  // (no structured binding: lambdas below capture it)
  int64_t st = step_opt.first ? step_opt.second : 1;
  if (st == 0) fail("slice step cannot be zero");
  std::vector<std::string> chars;
  int64_t n;
  if (obj.is_string()) {
    chars = utf8_chars(obj.str());
    n = int64_t(chars.size());
  } else if (obj.is_list()) {
    n = int64_t(obj.list().size());
  } else {
    fail("'" + obj.type_name() + "' object is not subscriptable");
  }
  // CPython's PySlice_AdjustIndices.
  auto adjust = [&](std::pair<bool, int64_t> v, int64_t dflt) {
    if (!v.first) return dflt;
    int64_t x = v.second;
    if (x < 0) {
      x += n;
      if (x < 0) x = st < 0 ? -1 : 0;
    } else if (x >= n) {
      x = st < 0 ? n - 1 : n;
    }
    return x;
  };
  int64_t b = adjust(opt(start, "start"), st < 0 ? n - 1 : 0);
  int64_t e = adjust(opt(stop, "stop"), st < 0 ? -1 : n);
  std::vector<int64_t> idx;
  for (int64_t i = b; st > 0 ? i < e : i > e; i += st) idx.push_back(i);
  if (obj.is_string()) {
    std::string s;
    for (int64_t i : idx) s += chars[size_t(i)];
    return Value(std::move(s));
  }
  List l;
  for (int64_t i : idx) l.push_back(obj.list()[size_t(i)]);
  return Value(std::move(l));
}

static Value dict_method(const Value& obj, const std::string& name, CallArgs& a) {
  const Dict& d = obj.dict();
  if (name == "items") {
    List out;
    for (auto& [k, v] : d.items) out.push_back(Value::tuple(List{Value(k), v}));
    return Value(std::move(out));
  }
  if (name == "keys") return Value(iterate(obj));
  if (name == "values") {
    List out;
    for (auto& kv : d.items) out.push_back(kv.second);
    return Value(std::move(out));
  }
  if (name == "get") {
    const Value* k = a.get(0, nullptr);
    if (!k) fail("get expected at least 1 argument, got 0");
    const Value* dflt = a.get(1, nullptr);
    const Value* v = k->is_string() ? d.find(k->str()) : nullptr;
    return v ? *v : (dflt ? *dflt : Value(None{}));
  }
  auto copy = std::make_shared<Dict>(d);
  copy->is_namespace = false;
  return Value(copy);  // copy
}

static Value list_method(const Value& obj, const std::string& name, CallArgs& a) {
  const List& l = obj.list();
  const Value* x = a.get(0, nullptr);
  if (name == "copy") return Value(List(l));
  if (!x) fail(name + "() takes exactly one argument (0 given)");
  int64_t count = 0;
  for (size_t i = 0; i < l.size(); ++i) {
    if (!equals(l[i], *x)) continue;
    if (name == "index") return Value(int64_t(i));
    ++count;
  }
  if (name == "index") fail(to_repr(*x) + " is not in list");
  return Value(count);
}

bool call_method(const Value& obj, const std::string& name, CallArgs& args, Value& result) {
  if (!has_method(obj, name)) return false;
  if (in_list(kUnsafe, name))
    fail("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
  if (obj.is_string()) result = str_method(obj.str(), name, args);
  else if (obj.is_dict()) result = dict_method(obj, name, args);
  else result = list_method(obj, name, args);
  return true;
}

static Value range_fn(CallArgs& a) {
  int64_t start = 0, stop = 0, step = 1;
  auto num = [](const Value& v) {
    if (!v.is_int() && !v.is_bool()) fail("range() arguments must be integers, not " + v.type_name());
    return v.as_int();
  };
  if (a.pos.size() == 1) stop = num(a.pos[0]);
  else if (a.pos.size() == 2 || a.pos.size() == 3) {
    start = num(a.pos[0]);
    stop = num(a.pos[1]);
    if (a.pos.size() == 3) step = num(a.pos[2]);
  } else {
    fail("range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
  }
  if (step == 0) fail("range() arg 3 must not be zero");
  int64_t n = step > 0 ? (stop > start ? (stop - start + step - 1) / step : 0)
                       : (start > stop ? (start - stop - step - 1) / -step : 0);
  if (n > 100000) fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
  List out;
  for (int64_t i = 0; i < n; ++i) out.emplace_back(start + i * step);
  return Value(std::move(out));
}

static Value make_namespace(CallArgs& a, bool is_namespace) {
  auto d = std::make_shared<Dict>();
  d->is_namespace = is_namespace;
  for (auto& p : a.pos) {
    if (!p.is_dict()) fail("namespace()/dict() positional argument must be a dict");
    for (auto& [k, v] : p.dict().items) d->set(k, v);
  }
  for (auto& [k, v] : a.kw) d->set(k, v);
  return Value(d);
}

Value get_global(const std::string& name) {
  if (name == "range") return Value::function("range", range_fn);
  if (name == "namespace") return Value::function("namespace", [](CallArgs& a) { return make_namespace(a, true); });
  if (name == "dict") return Value::function("dict", [](CallArgs& a) { return make_namespace(a, false); });
  if (name == "raise_exception")
    return Value::function("raise_exception", [](CallArgs& a) -> Value {
      const Value* m = a.get(0, "message");
      throw RaiseError(m ? to_str(*m) : std::string());
    });
  if (name == "strftime_now")
    return Value::function("strftime_now", [](CallArgs& a) {
      const Value* f = a.get(0, "format");
      if (!f || !f->is_string()) fail("strftime_now expects a format string");
      std::time_t t = std::time(nullptr);
      std::tm tm{};
      localtime_r(&t, &tm);
      char buf[512];
      size_t n = std::strftime(buf, sizeof(buf), f->str().c_str(), &tm);
      return Value(std::string(buf, n));
    });
  return Value::undefined("'" + name + "' is undefined");
}

}  // namespace nanovllm::jinja
