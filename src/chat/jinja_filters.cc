// Jinja filters and tests (jinja2 3.1 semantics; `tojson` as transformers overrides it:
// json.dumps(x, ensure_ascii=False, indent=indent, sort_keys=sort_keys)).
#include "chat/jinja_filters.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "chat/jinja_methods.h"
#include "chat/jinja_strings.h"

namespace nanovllm::jinja {
namespace {

bool bool_arg(const CallArgs& a, size_t i, const char* name, bool dflt) {
  const Value* v = a.get(i, name);
  return v ? v->truthy() : dflt;
}

// jinja2's make_attrgetter: "a.b.0" walks items/attributes.
Value get_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t b = 0;
  for (;;) {
    size_t e = path.find('.', b);
    std::string part = path.substr(b, e == std::string::npos ? std::string::npos : e - b);
    bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    cur = numeric ? getitem(cur, Value(int64_t(std::stoll(part)))) : getitem(cur, Value(part));
    if (e == std::string::npos) return cur;
    b = e + 1;
  }
}

const Value* attribute_arg(const CallArgs& a, size_t i) { return a.get(i, "attribute"); }

Value attr_of(const Value& v, const Value* attribute) {
  if (!attribute || attribute->is_none()) return v;
  if (attribute->is_int()) return getitem(v, *attribute);
  return get_path(v, to_str(*attribute));
}

// Sort key for sort/unique/min/max: lowercased strings unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(py_lower(v.str()));
  return v;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

// select/reject/selectattr/rejectattr: args after the (attribute) are test name + test args.
Value select_impl(const Value& seq, CallArgs& a, bool by_attr, bool keep) {
  size_t first = by_attr ? 1 : 0;
  std::string attr;
  if (by_attr) {
    if (a.pos.empty()) fail("selectattr/rejectattr need an attribute name");
    attr = to_str(a.pos[0]);
  }
  std::string test;
  CallArgs targs;
  if (a.pos.size() > first) {
    test = to_str(a.pos[first]);
    targs.pos.assign(a.pos.begin() + long(first) + 1, a.pos.end());
  }
  List out;
  for (auto& item : iterate(seq)) {
    Value v = by_attr ? get_path(item, attr) : item;
    bool ok = test.empty() ? v.truthy() : apply_test(test, v, targs);
    if (ok == keep) out.push_back(item);
  }
  return Value(std::move(out));
}

Value map_impl(const Value& seq, CallArgs& a) {
  List out;
  if (const Value* attr = a.get(size_t(-1), "attribute")) {
    const Value* dflt = a.get(size_t(-1), "default");
    for (auto& item : iterate(seq)) {
      Value v = get_path(item, to_str(*attr));
      out.push_back(v.is_undefined() && dflt ? *dflt : v);
    }
    return Value(std::move(out));
  }
  if (a.pos.empty()) fail("map() needs a filter name or attribute=");
  std::string filter = to_str(a.pos[0]);
  CallArgs fargs;
  fargs.pos.assign(a.pos.begin() + 1, a.pos.end());
  fargs.kw = a.kw;
  for (auto& item : iterate(seq)) out.push_back(apply_filter(filter, item, fargs));
  return Value(std::move(out));
}

Value minmax(const Value& seq, CallArgs& a, bool want_max) {
  bool cs = bool_arg(a, 0, "case_sensitive", false);
  const Value* attribute = attribute_arg(a, 1);
  List items = iterate(seq);
  if (items.empty()) return Value::undefined(std::string("No ") + (want_max ? "largest" : "smallest") + " item, sequence was empty.");
  size_t best = 0;
  for (size_t i = 1; i < items.size(); ++i) {
    int c = compare(sort_key(attr_of(items[i], attribute), cs), sort_key(attr_of(items[best], attribute), cs));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}

Value to_int(const Value& v, CallArgs& a) {
  const Value* dflt = a.get(0, "default");
  Value d = dflt ? *dflt : Value(int64_t(0));
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) return std::isfinite(v.as_double()) ? Value(int64_t(v.as_double())) : d;
  if (v.is_string()) {
    std::string s = py_strip(v.str(), nullptr, 'b');
    int base = int(a.get(1, "base") ? a.get(1, "base")->as_int() : 10);
    try {
      size_t n;
      long long x = std::stoll(s, &n, base);
      if (n == s.size()) return Value(int64_t(x));
      double f = std::stod(s, &n);  // jinja2 falls back to int(float(value))
      if (n == s.size()) return Value(int64_t(f));
    } catch (const std::exception&) {
    }
  }
  return d;
}

Value to_float(const Value& v, CallArgs& a) {
  const Value* dflt = a.get(0, "default");
  Value d = dflt ? *dflt : Value(0.0);
  if (v.is_number()) return Value(v.as_double());
  if (v.is_string()) {
    std::string s = py_strip(v.str(), nullptr, 'b');
    try {
      size_t n;
      double f = std::stod(s, &n);
      if (n == s.size()) return Value(f);
    } catch (const std::exception&) {
    }
  }
  return d;
}

Value indent_filter(const std::string& s0, CallArgs& a) {
  const Value* w = a.get(0, "width");
  std::string ind = !w ? "    " : w->is_string() ? w->str() : std::string(size_t(std::max<int64_t>(0, w->as_int())), ' ');
  bool first = bool_arg(a, 1, "first", false), blank = bool_arg(a, 2, "blank", false);
  std::string s = s0 + "\n";
  CallArgs none;
  List lines = str_method(s, "splitlines", none).list();
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) rv += (i ? "\n" + ind : "") + lines[i].str();
  } else {
    rv = lines.empty() ? "" : lines[0].str();
    for (size_t i = 1; i < lines.size(); ++i) rv += "\n" + (lines[i].str().empty() ? "" : ind + lines[i].str());
  }
  if (first) rv = ind + rv;
  return Value(rv);
}

const char* kFilters[] = {"default", "d", "tojson", "length", "count", "string", "safe", "trim", "upper", "lower",
                         "capitalize", "title", "escape", "e", "forceescape", "replace", "join", "first", "last",
                         "list", "items", "reverse", "sort", "unique", "min", "max", "sum", "select", "reject",
                         "selectattr", "rejectattr", "map", "attr", "int", "float", "abs", "round", "indent",
                         "wordcount", "format", "dictsort"};
const char* kTests[] = {"defined", "undefined", "none", "boolean", "true", "false", "integer", "float", "number",
                       "string", "mapping", "sequence", "iterable", "callable", "odd", "even", "divisibleby", "eq",
                       "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">",
                       "ge", ">=", "in", "sameas", "lower", "upper", "escaped"};

}  // namespace

bool is_known_filter(const std::string& name) {
  return std::find(std::begin(kFilters), std::end(kFilters), name) != std::end(kFilters);
}
bool is_known_test(const std::string& name) {
  return std::find(std::begin(kTests), std::end(kTests), name) != std::end(kTests);
}

Value apply_filter(const std::string& name, const Value& v, CallArgs& a) {
  if (name == "default" || name == "d") {
    const Value* dv = a.get(0, "default_value");
    bool boolean = bool_arg(a, 1, "boolean", false);
    if (v.is_undefined() || (boolean && !v.truthy())) return dv ? *dv : Value(std::string());
    return v;
  }
  if (name == "tojson") {
    // transformers: tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False)
    JsonOptions opt;
    const Value* ind = a.get(1, "indent");
    if (ind && !ind->is_none()) opt.indent = int(std::max<int64_t>(0, ind->as_int()));
    opt.ensure_ascii = bool_arg(a, 0, "ensure_ascii", false);
    opt.sort_keys = bool_arg(a, 3, "sort_keys", false);
    std::string item_sep, key_sep;
    if (const Value* sep = a.get(2, "separators"); sep && !sep->is_none()) {
      if (!sep->is_list() || sep->list().size() != 2 || !sep->list()[0].is_string() || !sep->list()[1].is_string())
        fail("tojson: separators must be a (item_separator, key_separator) pair of strings");
      item_sep = sep->list()[0].str();
      key_sep = sep->list()[1].str();
      opt.item_sep = item_sep.c_str();
      opt.key_sep = key_sep.c_str();
    }
    return Value(to_json(v, opt));
  }
  if (name == "length" || name == "count") return Value(int64_t(py_len(v)));
  if (name == "string") return Value(to_str(v));
  if (name == "safe") return v;
  if (name == "trim") return Value(py_strip(to_str(v), a.get(0, "chars"), 'b'));
  if (name == "upper") return Value(py_upper(to_str(v)));
  if (name == "lower") return Value(py_lower(to_str(v)));
  if (name == "capitalize") return Value(py_capitalize(to_str(v)));
  if (name == "title") return Value(py_title(to_str(v)));
  if (name == "escape" || name == "e" || name == "forceescape") return Value(html_escape(to_str(v)));
  if (name == "replace") {
    const Value *o = a.get(0, "old"), *n = a.get(1, "new"), *c = a.get(2, "count");
    if (!o || !n) fail("replace filter needs old and new");
    return Value(py_replace(to_str(v), to_str(*o), to_str(*n), c && !c->is_none() ? c->as_int() : -1));
  }
  if (name == "join") {
    const Value* sep = a.get(0, "d");
    const Value* attribute = attribute_arg(a, 1);
    std::string out, s = sep ? to_str(*sep) : "";
    bool first = true;
    for (auto& x : iterate(v)) {
      if (!first) out += s;
      first = false;
      out += to_str(attr_of(x, attribute));
    }
    return Value(std::move(out));
  }
  if (name == "first" || name == "last") {
    List items = iterate(v);
    if (items.empty()) return Value::undefined("No " + name + " item, sequence was empty.");
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value(iterate(v));
  if (name == "items") {
    if (v.is_undefined()) return Value(List{});
    if (!v.is_dict()) fail("items filter: can only get item pairs from a mapping.");
    CallArgs none;
    Value r;
    call_method(v, "items", none, r);
    return r;
  }
  if (name == "reverse") {
    if (v.is_string()) return python_slice(v, Value(), Value(), Value(int64_t(-1)));
    List items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value(std::move(items));
  }
  if (name == "sort") {
    bool rev = bool_arg(a, 0, "reverse", false), cs = bool_arg(a, 1, "case_sensitive", false);
    const Value* attribute = attribute_arg(a, 2);
    List items = iterate(v);
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      int c = compare(sort_key(attr_of(x, attribute), cs), sort_key(attr_of(y, attribute), cs));
      return rev ? c > 0 : c < 0;
    });
    return Value(std::move(items));
  }
  if (name == "unique") {
    bool cs = bool_arg(a, 0, "case_sensitive", false);
    const Value* attribute = attribute_arg(a, 1);
    List out, seen;
    for (auto& x : iterate(v)) {
      Value k = sort_key(attr_of(x, attribute), cs);
      bool dup = false;
      for (auto& s : seen) dup = dup || equals(s, k);
      if (dup) continue;
      seen.push_back(k);
      out.push_back(x);
    }
    return Value(std::move(out));
  }
  if (name == "min" || name == "max") return minmax(v, a, name == "max");
  if (name == "sum") {
    const Value* attribute = attribute_arg(a, 0);
    const Value* start = a.get(1, "start");
    Value acc = start ? *start : Value(int64_t(0));
    for (auto& x : iterate(v)) {
      Value y = attr_of(x, attribute);
      if (!acc.is_number() || !y.is_number()) fail("sum filter: unsupported operand types");
      acc = (acc.is_float() || y.is_float()) ? Value(acc.as_double() + y.as_double()) : Value(acc.as_int() + y.as_int());
    }
    return acc;
  }
  if (name == "select" || name == "reject") return select_impl(v, a, false, name == "select");
  if (name == "selectattr" || name == "rejectattr") return select_impl(v, a, true, name == "selectattr");
  if (name == "map") return map_impl(v, a);
  if (name == "attr") {
    const Value* n = a.get(0, "name");
    if (!n) fail("attr filter needs a name");
    return getattr(v, to_str(*n));
  }
  if (name == "int") return to_int(v, a);
  if (name == "float") return to_float(v, a);
  if (name == "abs") {
    if (v.is_float()) return Value(std::fabs(v.as_double()));
    if (v.is_number()) return Value(int64_t(std::llabs(v.as_int())));
    fail("bad operand type for abs(): '" + v.type_name() + "'");
  }
  if (name == "round") {
    const Value* p = a.get(0, "precision");
    const Value* m = a.get(1, "method");
    std::string method = m ? to_str(*m) : "common";
    double scale = std::pow(10.0, p ? double(p->as_int()) : 0.0);
    double x = v.as_double() * scale;
    double r = method == "ceil" ? std::ceil(x) : method == "floor" ? std::floor(x) : std::nearbyint(x);
    return Value(r / scale);
  }
  if (name == "indent") return indent_filter(to_str(v), a);
  if (name == "wordcount") {
    int64_t n = 0;
    bool in_word = false;
    for (unsigned char c : to_str(v)) {
      bool w = std::isalnum(c) || c == '_' || c >= 0x80;
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value(n);
  }
  if (name == "format") {
    if (!a.kw.empty()) fail("format filter with keyword arguments is not supported");
    return Value(py_percent_format(to_str(v), Value::tuple(List(a.pos.begin(), a.pos.end()))));
  }
  if (name == "dictsort") {
    if (!v.is_dict()) fail("dictsort: expected a mapping");
    bool cs = bool_arg(a, 0, "case_sensitive", false);
    const Value* by = a.get(1, "by");
    bool by_value = by && to_str(*by) == "value";
    bool rev = bool_arg(a, 2, "reverse", false);
    CallArgs none;
    Value r;
    call_method(v, "items", none, r);
    List items = r.list();
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      int c = compare(sort_key(x.list()[by_value], cs), sort_key(y.list()[by_value], cs));
      return rev ? c > 0 : c < 0;
    });
    return Value(std::move(items));
  }
  fail("no filter named '" + name + "'");
}

bool apply_test(const std::string& name, const Value& v, CallArgs& a) {
  auto arg = [&]() -> const Value& {
    if (a.pos.empty()) fail("test '" + name + "' needs an argument");
    return a.pos[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_dict();
  if (name == "sequence") return v.is_list() || v.is_string() || (v.is_dict() && !v.dict().is_namespace);
  if (name == "iterable") return v.is_list() || v.is_string() || (v.is_dict() && !v.dict().is_namespace);
  if (name == "callable") return v.is_function();
  if (name == "odd" || name == "even") {
    if (!v.is_int() && !v.is_bool()) fail("odd/even test needs an integer");
    return (v.as_int() % 2 != 0) == (name == "odd");
  }
  if (name == "divisibleby") {
    int64_t d = arg().as_int();
    if (d == 0) fail("integer division or modulo by zero");
    return v.as_int() % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, arg());
  if (name == "ne" || name == "!=") return !equals(v, arg());
  if (name == "lt" || name == "lessthan" || name == "<") return compare(v, arg()) < 0;
  if (name == "le" || name == "<=") return compare(v, arg()) <= 0;
  if (name == "gt" || name == "greaterthan" || name == ">") return compare(v, arg()) > 0;
  if (name == "ge" || name == ">=") return compare(v, arg()) >= 0;
  if (name == "in") return contains(arg(), v);
  if (name == "sameas") {
    const Value& o = arg();
    if (v.is_list() && o.is_list()) return &v.list() == &o.list();
    if (v.is_dict() && o.is_dict()) return &v.dict() == &o.dict();
    return v.kind() == o.kind() && equals(v, o);
  }
  if (name == "lower") return v.is_string() && py_lower(v.str()) == v.str();
  if (name == "upper") return v.is_string() && py_upper(v.str()) == v.str();
  if (name == "escaped") return false;
  fail("no test named '" + name + "'");
}

}  // namespace nanovllm::jinja
