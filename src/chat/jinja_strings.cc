// Python str methods on UTF-8 (see jinja_strings.h). Code points are decoded with utf8proc so
// whitespace, case mapping and character classes follow Unicode like Python's str.
#include "chat/jinja_strings.h"

#include <utf8proc.h>

#include <cstdio>

#include "chat/jinja_methods.h"

namespace nanovllm::jinja {
namespace {

// Decodes the code point at byte i; invalid bytes decode as themselves (length 1).
int32_t decode(const std::string& s, size_t i, size_t* len) {
  utf8proc_int32_t cp;
  auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i), utf8proc_ssize_t(s.size() - i), &cp);
  if (n <= 0) {
    *len = 1;
    return (unsigned char)s[i];
  }
  *len = size_t(n);
  return cp;
}

void encode(int32_t cp, std::string& out) {
  utf8proc_uint8_t buf[4];
  auto n = utf8proc_encode_char(cp, buf);
  out.append(reinterpret_cast<char*>(buf), size_t(n));
}

// Python str.isspace() code points.
bool is_py_space(int32_t c) {
  return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200a) || c == 0x2028 || c == 0x2029 || c == 0x202f || c == 0x205f || c == 0x3000;
}

bool is_alpha(int32_t c) {
  auto cat = utf8proc_category(c);
  return cat == UTF8PROC_CATEGORY_LU || cat == UTF8PROC_CATEGORY_LL || cat == UTF8PROC_CATEGORY_LT ||
         cat == UTF8PROC_CATEGORY_LM || cat == UTF8PROC_CATEGORY_LO;
}
bool is_digit(int32_t c) { return utf8proc_category(c) == UTF8PROC_CATEGORY_ND; }

template <class F>
std::string map_cps(const std::string& s, F f) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n;
    int32_t cp = decode(s, i, &n);
    encode(f(cp), out);
    i += n;
  }
  return out;
}

template <class P>
bool all_cps(const std::string& s, P p) {
  if (s.empty()) return false;
  for (size_t i = 0; i < s.size();) {
    size_t n;
    if (!p(decode(s, i, &n))) return false;
    i += n;
  }
  return true;
}

std::vector<std::string> split_ws(const std::string& s, int64_t maxsplit) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t n;
    while (i < s.size() && is_py_space(decode(s, i, &n))) i += n;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) {
      // Python keeps the remainder unsplit but right-stripped only at the end of the input.
      std::string rest = s.substr(i);
      out.push_back(py_strip(rest, nullptr, 'r'));
      return out;
    }
    size_t b = i;
    while (i < s.size() && !is_py_space(decode(s, i, &n))) i += n;
    out.push_back(s.substr(b, i - b));
  }
  return out;
}

std::vector<std::string> split_sep(const std::string& s, const std::string& sep, int64_t maxsplit) {
  if (sep.empty()) fail("empty separator");
  std::vector<std::string> out;
  size_t b = 0;
  for (;;) {
    if (maxsplit >= 0 && int64_t(out.size()) == maxsplit) break;
    size_t p = s.find(sep, b);
    if (p == std::string::npos) break;
    out.push_back(s.substr(b, p - b));
    b = p + sep.size();
  }
  out.push_back(s.substr(b));
  return out;
}

std::vector<std::string> rsplit_sep(const std::string& s, const std::string& sep, int64_t maxsplit) {
  if (maxsplit < 0) return split_sep(s, sep, -1);
  if (sep.empty()) fail("empty separator");
  std::vector<std::string> out;
  size_t e = s.size();
  while (int64_t(out.size()) < maxsplit) {
    if (e < sep.size()) break;
    size_t p = s.rfind(sep, e - sep.size());
    if (p == std::string::npos) break;
    out.insert(out.begin(), s.substr(p + sep.size(), e - p - sep.size()));
    e = p;
  }
  out.insert(out.begin(), s.substr(0, e));
  return out;
}

Value to_list(const std::vector<std::string>& parts) {
  List l;
  l.reserve(parts.size());
  for (auto& p : parts) l.emplace_back(p);
  return Value(std::move(l));
}

int64_t int_arg(const CallArgs& a, size_t i, const char* name, int64_t dflt) {
  const Value* v = a.get(i, name);
  if (!v || v->is_none()) return dflt;
  if (!v->is_int() && !v->is_bool()) fail(std::string("argument '") + name + "' must be an integer");
  return v->as_int();
}

const std::string& str_arg(const CallArgs& a, size_t i, const char* name, const char* method) {
  const Value* v = a.get(i, name);
  if (!v || !v->is_string())
    fail(std::string(method) + "() argument must be str, not " + (v ? v->type_name() : "nothing"));
  return v->str();
}

// str.format: {} {0} {name}, {{ and }}. Format specs are not supported.
std::string py_str_format(const std::string& fmt, const CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      size_t e = fmt.find('}', i);
      if (e == std::string::npos) fail("Single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, e - i - 1);
      if (field.find_first_of(":!") != std::string::npos) fail("format specs are not supported: {" + field + "}");
      const Value* v = nullptr;
      if (field.empty()) v = a.get(auto_idx++, nullptr);
      else if (std::isdigit((unsigned char)field[0])) v = a.get(size_t(std::stoul(field)), nullptr);
      else
        for (auto& [k, x] : a.kw)
          if (k == field) v = &x;
      if (!v) fail("format: missing argument for {" + field + "}");
      out += to_str(*v);
      i = e;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string py_strip(const std::string& s, const Value* chars, char which) {
  if (chars && chars->is_none()) chars = nullptr;
  if (chars && !chars->is_string()) fail("strip arg must be None or str");
  std::vector<int32_t> set;
  if (chars)
    for (size_t i = 0; i < chars->str().size();) {
      size_t n;
      set.push_back(decode(chars->str(), i, &n));
      i += n;
    }
  auto strip_cp = [&](int32_t cp) {
    if (!chars) return is_py_space(cp);
    for (int32_t c : set)
      if (c == cp) return true;
    return false;
  };
  // Scan only the stripped ends (long message contents are common): forward from the front,
  // backward from the back by stepping over UTF-8 continuation bytes.
  size_t b = 0, e = s.size();
  if (which != 'r')
    while (b < e) {
      size_t n;
      if (!strip_cp(decode(s, b, &n))) break;
      b += n;
    }
  if (which != 'l')
    while (e > b) {
      size_t p = e - 1;
      while (p > b && (static_cast<unsigned char>(s[p]) & 0xC0) == 0x80) --p;
      size_t n;
      int32_t cp = decode(s, p, &n);
      if (p + n != e) cp = static_cast<unsigned char>(s[e - 1]), p = e - 1;  // invalid UTF-8 tail byte
      if (!strip_cp(cp)) break;
      e = p;
    }
  return s.substr(b, e - b);
}

std::string py_upper(const std::string& s) { return map_cps(s, [](int32_t c) { return utf8proc_toupper(c); }); }
std::string py_lower(const std::string& s) { return map_cps(s, [](int32_t c) { return utf8proc_tolower(c); }); }

std::string py_title(const std::string& s) {
  bool prev_cased = false;
  return map_cps(s, [&](int32_t c) {
    bool cased = is_alpha(c);
    int32_t r = cased ? (prev_cased ? utf8proc_tolower(c) : utf8proc_totitle(c)) : c;
    prev_cased = cased;
    return r;
  });
}

std::string py_capitalize(const std::string& s) {
  bool first = true;
  return map_cps(s, [&](int32_t c) {
    int32_t r = first ? utf8proc_totitle(c) : utf8proc_tolower(c);
    first = false;
    return r;
  });
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `rep` before every character and at the end
    auto chars = utf8_chars(s);
    int64_t done = 0;
    for (auto& c : chars) {
      if (count < 0 || done < count) {
        out += rep;
        ++done;
      }
      out += c;
    }
    if (count < 0 || done < count) out += rep;
    return out;
  }
  size_t b = 0;
  int64_t done = 0;
  for (;;) {
    size_t p = (count < 0 || done < count) ? s.find(old, b) : std::string::npos;
    if (p == std::string::npos) break;
    out.append(s, b, p - b);
    out += rep;
    b = p + old.size();
    ++done;
  }
  out.append(s, b, std::string::npos);
  return out;
}

std::string py_percent_format(const std::string& fmt, const Value& args) {
  bool tuple = args.is_list() && args.list().is_tuple;  // '%s' % [1] formats the list itself
  List items = tuple ? args.list() : List{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    size_t j = i + 1;
    while (j < fmt.size() && std::strchr("-+ #0123456789.", fmt[j])) ++j;
    if (j >= fmt.size()) fail("incomplete format");
    char conv = fmt[j];
    std::string spec = fmt.substr(i, j - i);
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= items.size()) fail("not enough arguments for format string");
    const Value& v = items[next++];
    char buf[512];
    if (conv == 's' || conv == 'r') {
      std::string s = conv == 's' ? to_str(v) : to_repr(v);
      std::snprintf(buf, sizeof(buf), (spec + "s").c_str(), s.c_str());
      out += spec.size() > 1 ? std::string(buf) : s;
    } else if (conv == 'd' || conv == 'i') {
      if (!v.is_number()) fail("%d format: a number is required, not " + v.type_name());
      std::snprintf(buf, sizeof(buf), (spec + "lld").c_str(), (long long)v.as_int());
      out += buf;
    } else if (std::strchr("feEgGxXo", conv)) {
      if (!v.is_number()) fail(std::string("%") + conv + " format: a number is required, not " + v.type_name());
      if (conv == 'x' || conv == 'X' || conv == 'o')
        std::snprintf(buf, sizeof(buf), (spec + "ll" + conv).c_str(), (long long)v.as_int());
      else
        std::snprintf(buf, sizeof(buf), (spec + conv).c_str(), v.as_double());
      out += buf;
    } else {
      fail(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (next < items.size() && tuple) fail("not all arguments converted during string formatting");
  return out;
}

Value str_method(const std::string& s, const std::string& name, CallArgs& a) {
  if (name == "strip" || name == "lstrip" || name == "rstrip")
    return Value(py_strip(s, a.get(0, "chars"), name[0] == 's' ? 'b' : name[0]));
  if (name == "split" || name == "rsplit") {
    const Value* sep = a.get(0, "sep");
    int64_t maxsplit = int_arg(a, 1, "maxsplit", -1);
    if (!sep || sep->is_none()) {
      if (name == "rsplit" && maxsplit >= 0) fail("rsplit() with maxsplit and no separator is not supported");
      return to_list(split_ws(s, maxsplit));
    }
    if (!sep->is_string()) fail("must be str or None, not " + sep->type_name());
    return to_list(name == "split" ? split_sep(s, sep->str(), maxsplit) : rsplit_sep(s, sep->str(), maxsplit));
  }
  if (name == "startswith" || name == "endswith") {
    const Value* p = a.get(0, nullptr);
    if (!p) fail(name + "() takes at least 1 argument (0 given)");
    List cands = p->is_list() ? p->list() : List{*p};
    for (auto& c : cands) {
      if (!c.is_string()) fail(name + " first arg must be str or a tuple of str, not " + c.type_name());
      const std::string& x = c.str();
      if (x.size() > s.size()) continue;
      if (name[0] == 's' ? s.compare(0, x.size(), x) == 0 : s.compare(s.size() - x.size(), x.size(), x) == 0)
        return Value(true);
    }
    return Value(false);
  }
  if (name == "replace")
    return Value(py_replace(s, str_arg(a, 0, "old", "replace"), str_arg(a, 1, "new", "replace"),
                            int_arg(a, 2, "count", -1)));
  if (name == "upper") return Value(py_upper(s));
  if (name == "lower") return Value(py_lower(s));
  if (name == "title") return Value(py_title(s));
  if (name == "capitalize") return Value(py_capitalize(s));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    const std::string& sub = str_arg(a, 0, "sub", name.c_str());
    size_t p = name[0] == 'r' ? s.rfind(sub) : s.find(sub);
    if (p == std::string::npos) {
      if (name.find("index") != std::string::npos) fail("substring not found");
      return Value(int64_t(-1));
    }
    return Value(int64_t(utf8_length(s.substr(0, p))));
  }
  if (name == "count") {
    const std::string& sub = str_arg(a, 0, "sub", "count");
    if (sub.empty()) return Value(int64_t(utf8_length(s) + 1));
    int64_t n = 0;
    for (size_t p = s.find(sub); p != std::string::npos; p = s.find(sub, p + sub.size())) ++n;
    return Value(n);
  }
  if (name == "join") {
    const Value* it = a.get(0, "iterable");
    if (!it) fail("join() takes exactly one argument (0 given)");
    std::string out;
    bool first = true;
    for (auto& x : iterate(*it)) {
      if (!x.is_string()) fail("sequence item: expected str instance, " + x.type_name() + " found");
      if (!first) out += s;
      first = false;
      out += x.str();
    }
    return Value(std::move(out));
  }
  if (name == "format") return Value(py_str_format(s, a));
  if (name == "splitlines") {
    std::vector<std::string> lines;
    size_t b = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\n' || s[i] == '\r') {
        lines.push_back(s.substr(b, i - b));
        if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        b = i + 1;
      }
    }
    if (b < s.size()) lines.push_back(s.substr(b));
    return to_list(lines);
  }
  if (name == "isdigit") return Value(all_cps(s, is_digit));
  if (name == "isalpha") return Value(all_cps(s, is_alpha));
  if (name == "isspace") return Value(all_cps(s, is_py_space));
  if (name == "isalnum") return Value(all_cps(s, [](int32_t c) { return is_alpha(c) || is_digit(c); }));
  if (name == "islower" || name == "isupper") {
    bool any_cased = false, ok = true;
    for (size_t i = 0; i < s.size();) {
      size_t n;
      int32_t c = decode(s, i, &n);
      i += n;
      if (utf8proc_toupper(c) != c || utf8proc_tolower(c) != c) {
        any_cased = true;
        bool lower = utf8proc_tolower(c) == c;
        if (lower != (name == "islower")) ok = false;
      }
    }
    return Value(any_cased && ok);
  }
  fail("'str' object has no method '" + name + "'");
}

}  // namespace nanovllm::jinja
