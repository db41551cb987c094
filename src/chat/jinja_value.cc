// Python value semantics for the Jinja interpreter: printing, repr, json.dumps, ==, ordering.
#include "chat/jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "util/check.h"
#include "util/json_bounded.h"

namespace nanovllm::jinja {

const Value* CallArgs::get(size_t i, const char* name) const {
  if (i < pos.size()) return &pos[i];
  if (name)
    for (auto& [k, v] : kw)
      if (k == name) return &v;
  return nullptr;
}

Value Value::function(std::string name, std::function<Value(CallArgs&)> fn) {
  auto f = std::make_shared<Function>();
  f->name = std::move(name);
  f->fn = std::move(fn);
  return Value(std::move(f));
}

int64_t Value::as_int() const {
  if (is_bool()) return as_bool() ? 1 : 0;
  if (is_float()) return int64_t(std::get<double>(v_));
  return std::get<int64_t>(v_);
}

double Value::as_double() const {
  if (is_float()) return std::get<double>(v_);
  return double(as_int());
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::Undefined:
    case Kind::None: return false;
    case Kind::Bool: return as_bool();
    case Kind::Int: return as_int() != 0;
    case Kind::Float: return as_double() != 0.0;
    case Kind::String: return !str().empty();
    case Kind::List: return !list().empty();
    case Kind::Dict: return !dict().items.empty();
    case Kind::Function: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (kind()) {
    case Kind::Undefined: return "Undefined";
    case Kind::None: return "NoneType";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "str";
    case Kind::List: return "list";
    case Kind::Dict: return dict().is_namespace ? "Namespace" : "dict";
    case Kind::Function: return "function";
  }
  return "?";
}

const Value* Dict::find(const std::string& key) const {
  for (auto& kv : items)
    if (kv.first == key) return &kv.second;
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& kv : items)
    if (kv.first == key) {
      kv.second = std::move(v);
      return;
    }
  items.emplace_back(key, std::move(v));
}

Value make_dict() { return Value(std::make_shared<Dict>()); }

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // shortest round-trip digits: "-1.2345e+02"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  size_t e = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < e; ++i)
    if (sci[i] != '.') digits += sci[i];
  int exp = std::stoi(sci.substr(e + 1));
  int nd = int(digits.size());
  std::string out;
  if (exp >= -5 + 1 && exp < 16) {  // Python repr uses positional notation for 1e-4 <= |d| < 1e16
    if (exp >= nd - 1) {
      out = digits + std::string(exp - (nd - 1), '0') + ".0";
    } else if (exp >= 0) {
      out = digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
  } else {
    out = digits.substr(0, 1);
    if (nd > 1) out += "." + digits.substr(1);
    char eb[16];
    std::snprintf(eb, sizeof(eb), "e%c%02d", exp < 0 ? '-' : '+', std::abs(exp));
    out += eb;
  }
  return neg ? "-" + out : out;
}

std::string to_repr(const Value& v) {
  if (!v.is_string()) return to_str(v);
  const std::string& s = v.str();
  char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == q || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char b[8];
      std::snprintf(b, sizeof(b), "\\x%02x", c);
      out += b;
    } else {
      out += char(c);
    }
  }
  out += q;
  return out;
}

std::string to_str(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.as_bool() ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.as_int());
    case Value::Kind::Float: return format_float(v.as_double());
    case Value::Kind::String: return v.str();
    case Value::Kind::List: {
      bool tuple = v.list().is_tuple;
      std::string out = tuple ? "(" : "[";
      bool first = true;
      for (auto& x : v.list()) {
        if (!first) out += ", ";
        first = false;
        out += to_repr(x);
      }
      if (tuple && v.list().size() == 1) out += ",";
      return out + (tuple ? ")" : "]");
    }
    case Value::Kind::Dict: {
      if (v.dict().is_namespace) return "<Namespace>";
      std::string out = "{";
      bool first = true;
      for (auto& [k, x] : v.dict().items) {
        if (!first) out += ", ";
        first = false;
        out += to_repr(Value(k)) + ": " + to_repr(x);
      }
      return out + "}";
    }
    case Value::Kind::Function: return "<function " + v.func().name + ">";
  }
  return "";
}

static void json_escape(const std::string& s, std::string& out, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = s[i];
    if (ensure_ascii && c >= 0x80) {  // \uXXXX, with a surrogate pair above the BMP
      size_t n = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
      uint32_t cp = n == 1 ? c : c & (0x7F >> n);
      for (size_t k = 1; k < n && i + k < s.size(); ++k) cp = (cp << 6) | (s[i + k] & 0x3F);
      i += n - 1;
      char b[16];
      if (cp >= 0x10000) {
        cp -= 0x10000;
        std::snprintf(b, sizeof(b), "\\u%04x\\u%04x", 0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF));
      } else {
        std::snprintf(b, sizeof(b), "\\u%04x", cp);
      }
      out += b;
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char b[8];
          std::snprintf(b, sizeof(b), "\\u%04x", c);
          out += b;
        } else {
          out += char(c);
        }
    }
  }
  out += '"';
}

static void json_dump(const Value& v, const JsonOptions& opt, int level, std::string& out) {
  const int indent = opt.indent;
  auto newline = [&](int lvl) {
    out += '\n';
    out.append(size_t(indent * lvl), ' ');
  };
  const char* item_sep = opt.item_sep ? opt.item_sep : indent >= 0 ? "," : ", ";
  switch (v.kind()) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.as_int()); return;
    case Value::Kind::Float: {
      double d = v.as_double();
      if (std::isnan(d)) out += "NaN";
      else if (std::isinf(d)) out += d < 0 ? "-Infinity" : "Infinity";
      else out += format_float(d);
      return;
    }
    case Value::Kind::String: json_escape(v.str(), out, opt.ensure_ascii); return;
    case Value::Kind::List: {
      auto& l = v.list();
      if (l.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      for (size_t i = 0; i < l.size(); ++i) {
        if (i) out += item_sep;
        if (indent >= 0) newline(level + 1);
        json_dump(l[i], opt, level + 1, out);
      }
      if (indent >= 0) newline(level);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      std::vector<const std::pair<std::string, Value>*> items;
      for (auto& kv : v.dict().items) items.push_back(&kv);
      if (opt.sort_keys)
        std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
      if (items.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      for (size_t i = 0; i < items.size(); ++i) {
        if (i) out += item_sep;
        if (indent >= 0) newline(level + 1);
        json_escape(items[i]->first, out, opt.ensure_ascii);
        out += opt.key_sep;
        json_dump(items[i]->second, opt, level + 1, out);
      }
      if (indent >= 0) newline(level);
      out += '}';
      return;
    }
    case Value::Kind::Undefined: NV_THROW("Object of type Undefined is not JSON serializable");
    case Value::Kind::Function: NV_THROW("Object of type function is not JSON serializable");
  }
}

std::string to_json(const Value& v, const JsonOptions& opt) {
  std::string out;
  json_dump(v, opt, 0, out);
  return out;
}

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.str() == b.str();
    case Value::Kind::List: {
      auto &x = a.list(), &y = b.list();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i)
        if (!equals(x[i], y[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      auto &x = a.dict(), &y = b.dict();
      if (&x == &y) return true;
      if (x.is_namespace || y.is_namespace) return false;
      if (x.items.size() != y.items.size()) return false;
      for (auto& [k, v] : x.items) {
        const Value* o = y.find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    case Value::Kind::Function: return &a.func() == &b.func();
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      double x = a.as_double(), y = b.as_double();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    int64_t x = a.as_int(), y = b.as_int();
    return x < y ? -1 : (x > y ? 1 : 0);
  }
  if (a.is_string() && b.is_string()) {
    int c = a.str().compare(b.str());  // UTF-8 byte order == code point order
    return c < 0 ? -1 : (c > 0 ? 1 : 0);
  }
  if (a.is_list() && b.is_list()) {
    auto &x = a.list(), &y = b.list();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (equals(x[i], y[i])) continue;
      return compare(x[i], y[i]);
    }
    return x.size() < y.size() ? -1 : (x.size() > y.size() ? 1 : 0);
  }
  NV_THROW("'<' not supported between instances of '", a.type_name(), "' and '", b.type_name(), "'");
}

// Recursive, so the depth is checked: every JSON reader limits nesting (util/json_bounded.h),
// but a json value can also be built in code. Values nest no deeper than their source.
template <class J>
static Value from_json_impl(const J& j, size_t depth) {
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value(None{});
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const uint64_t u = j.template get<uint64_t>();
      if (u > uint64_t(INT64_MAX)) return Value(double(u));  // no big ints: keep the sign right
      return Value(int64_t(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array:
    case nlohmann::json::value_t::object: break;
    default: return Value(None{});
  }
  // kJsonMaxDepth levels of the caller's values inside the one object of the render context.
  if (depth >= kJsonMaxDepth + 1)
    NV_THROW("template input nested deeper than ", kJsonMaxDepth + 1, " levels");
  if (j.is_array()) {
    List l;
    l.reserve(j.size());
    for (auto& x : j) l.push_back(from_json_impl(x, depth + 1));
    return Value(std::move(l));
  }
  auto d = std::make_shared<Dict>();
  d->items.reserve(j.size());
  for (auto it = j.begin(); it != j.end(); ++it) d->items.emplace_back(it.key(), from_json_impl(it.value(), depth + 1));
  return Value(std::move(d));
}

Value from_json(const nlohmann::json& j) { return from_json_impl(j, 0); }
Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j, 0); }

static size_t utf8_len_at(const std::string& s, size_t i) {
  unsigned char c = s[i];
  size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
  return std::min(n, s.size() - i);
}

std::vector<std::string> utf8_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_len_at(s, i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

size_t utf8_length(const std::string& s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += utf8_len_at(s, i)) ++n;
  return n;
}

}  // namespace nanovllm::jinja
