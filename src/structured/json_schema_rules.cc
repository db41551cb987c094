// JSON Schema objects, arrays and strings, each a rule built state by state.
#include <algorithm>
#include <map>
#include <optional>

#include "structured/json_exprs.h"
#include "structured/json_schema_compiler.h"
#include "structured/regex.h"

namespace nanovllm::structured {

namespace {

// Restores a vector on scope exit (the $ref cycle stack restarts inside each rule).
struct SavedStack {
  std::vector<const ojson*>& ref;
  std::vector<const ojson*> saved;
  explicit SavedStack(std::vector<const ojson*>& r) : ref(r), saved(std::move(r)) { ref.clear(); }
  ~SavedStack() { ref = std::move(saved); }
};

}  // namespace

ExprPtr SchemaCompiler::ws() const { return json_ws(opt_.max_indent); }

int SchemaCompiler::plain_string_rule() {
  if (plain_string_ < 0) {
    plain_string_ = b_.add_rule("string");
    b_.define(plain_string_, *seq({lit("\""), star(json_string_char_any()), lit("\"")}));
  }
  return plain_string_;
}

ExprPtr SchemaCompiler::any_value() {
  return alt({call(object_rule(any_object_, "(any object)")), call(array_rule(any_array_, "(any array)")),
              call(plain_string_rule()), json_number(), lit("true"), lit("false"), lit("null")});
}

// Members in schema order. State (i, first) = "before declared member i; no member written yet
// when first" (a comma is needed iff !first). Each member, with its separator, ends with the
// whitespace before the next "," or "}". Optional members add an epsilon to (i + 1, first).
// Extra members (additionalProperties) come after the declared ones.
int SchemaCompiler::object_rule(const ojson& s, const std::string& path) {
  if (auto it = objects_.find(&s); it != objects_.end()) return it->second;
  int r = b_.add_rule("object " + path);
  objects_[&s] = r;
  SavedStack guard(ref_stack_);

  struct Member {
    std::string name;
    const ojson* schema;
    bool required;
  };
  std::vector<Member> members;
  if (s.contains("properties")) {
    if (!s["properties"].is_object()) fail(path, "'properties' must be an object");
    for (auto& [k, v] : s["properties"].items()) members.push_back({k, &v, false});
  }
  const ojson* ap = s.contains("additionalProperties") ? &s["additionalProperties"] : nullptr;
  if (s.contains("unevaluatedProperties")) {
    const ojson& u = s["unevaluatedProperties"];
    if (!u.is_boolean()) fail(path, "'unevaluatedProperties' other than true / false is not supported");
    if (!ap) ap = &u;
  }
  bool extras = ap ? !(ap->is_boolean() && !ap->get<bool>()) : members.empty();
  const ojson* extra_schema = ap && ap->is_object() ? ap : &true_;
  if (ap && !ap->is_boolean() && !ap->is_object()) fail(path, "'additionalProperties' must be a boolean or a schema");
  if (s.contains("required")) {
    if (!s["required"].is_array()) fail(path, "'required' must be an array");
    for (auto& n : s["required"]) {
      if (!n.is_string()) fail(path, "'required' entries must be strings");
      std::string name = n.get<std::string>();
      auto it = std::find_if(members.begin(), members.end(), [&](const Member& m) { return m.name == name; });
      if (it != members.end()) {
        it->required = true;
      } else {
        if (ap && ap->is_boolean() && !ap->get<bool>())
          fail(path, "required property '" + name + "' is not in 'properties' and additionalProperties is false");
        members.push_back({name, extra_schema, true});
      }
    }
  }
  size_t n = members.size(), n_required = 0;
  for (auto& m : members) n_required += m.required;
  int64_t min_p = count_keyword(s, "minProperties", 0, path), max_p = count_keyword(s, "maxProperties", -1, path);
  if (min_p > static_cast<int64_t>(n_required))
    fail(path, "'minProperties' above the number of required properties is not supported");
  int64_t max_extra = -1;
  if (max_p >= 0) {
    if (max_p < static_cast<int64_t>(n_required)) return r;  // contradiction: the rule matches nothing
    if (n_required < n && max_p < static_cast<int64_t>(n))
      fail(path, "'maxProperties' together with optional properties is not supported");
    if (extras) {
      if (n_required < n) fail(path, "'maxProperties' with optional and additional properties is not supported");
      max_extra = max_p - static_cast<int64_t>(n);
    }
  }

  ExprPtr sep = seq({lit(","), ws()});
  auto member = [&](bool first, ExprPtr key, ExprPtr val) {
    return seq({first ? empty_expr() : sep, std::move(key), ws(), lit(":"), ws(), std::move(val), ws()});
  };
  std::map<std::pair<size_t, bool>, int> at;
  auto state = [&](size_t i, bool first) {
    auto it = at.find({i, first});
    return it != at.end() ? it->second : at[{i, first}] = b_.new_state(r);
  };
  int end = b_.rule_end(r);
  b_.emit(*seq({lit("{"), ws()}), b_.rule_start(r), state(0, true));
  for (size_t i = 0; i < n; ++i) {
    const Member& m = members[i];
    ExprPtr key = lit(json_quote(m.name));
    ExprPtr val = value(*m.schema, path + "/properties/" + json_pointer_token(m.name));
    for (bool first : {true, false}) {
      if (!at.count({i, first})) continue;
      int from = at[{i, first}];
      b_.emit(*member(first, key, val), from, state(i + 1, false));
      if (!m.required) b_.eps(from, state(i + 1, first));
    }
  }
  ExprPtr extra_key, extra_val;
  if (extras) {
    std::vector<std::string> names;
    for (auto& m : members) names.push_back(m.name);
    extra_key = names.empty() ? call(plain_string_rule())
                              : seq({lit("\""), json_string_content_except(names), lit("\"")});
    extra_val = value(*extra_schema, path + "/additionalProperties");
  }
  int loop = -1;
  for (bool first : {true, false}) {
    if (!at.count({n, first})) continue;
    int from = at[{n, first}];
    b_.emit(*lit("}"), from, end);
    if (!extras) continue;
    if (max_extra < 0) {
      if (loop < 0) {
        loop = b_.new_state(r);
        b_.emit(*member(false, extra_key, extra_val), loop, loop);
        b_.emit(*lit("}"), loop, end);
      }
      b_.emit(*member(first, extra_key, extra_val), from, loop);
      continue;
    }
    int cur = from;
    for (int64_t j = 0; j < max_extra; ++j) {
      int nxt = b_.new_state(r);
      b_.emit(*member(first && j == 0, extra_key, extra_val), cur, nxt);
      b_.emit(*lit("}"), nxt, end);
      cur = nxt;
    }
  }
  return r;
}

// States E[j] = "j elements written"; E[j] may close when j >= minItems and continues with
// element j (prefixItems[j], else items). Without maxItems, E[max(#prefix, minItems, 1)] loops.
int SchemaCompiler::array_rule(const ojson& s, const std::string& path) {
  if (auto it = arrays_.find(&s); it != arrays_.end()) return it->second;
  int r = b_.add_rule("array " + path);
  arrays_[&s] = r;
  SavedStack guard(ref_stack_);

  std::vector<const ojson*> prefix;
  const ojson* rest = &true_;
  std::string rest_path = path + "/items";
  const char* prefix_key = s.contains("prefixItems") ? "prefixItems" : nullptr;
  if (!prefix_key && s.contains("items") && s["items"].is_array()) prefix_key = "items";  // draft 4-7 tuple
  if (prefix_key) {
    if (!s[prefix_key].is_array()) fail(path, std::string("'") + prefix_key + "' must be an array");
    for (auto& x : s[prefix_key]) prefix.push_back(&x);
    const char* rest_key = std::string(prefix_key) == "items" ? "additionalItems" : "items";
    if (s.contains(rest_key)) rest = &s[rest_key], rest_path = path + "/" + rest_key;
  } else if (s.contains("items")) {
    rest = &s["items"];
  }
  bool rest_allowed = !(rest->is_boolean() && !rest->get<bool>());
  int64_t min_n = count_keyword(s, "minItems", 0, path), max_n = count_keyword(s, "maxItems", -1, path);
  if (!rest_allowed) max_n = max_n < 0 ? static_cast<int64_t>(prefix.size()) : std::min<int64_t>(max_n, prefix.size());
  if (s.contains("uniqueItems")) {
    if (!s["uniqueItems"].is_boolean()) fail(path, "'uniqueItems' must be a boolean");
    if (s["uniqueItems"].get<bool>() && (max_n < 0 || max_n > 1))
      fail(path, "'uniqueItems': true is not supported (except with maxItems <= 1)");
  }
  if (max_n >= 0 && min_n > max_n) return r;  // contradiction: the rule matches nothing

  std::vector<ExprPtr> prefix_val;
  for (size_t j = 0; j < prefix.size(); ++j)
    prefix_val.push_back(value(*prefix[j], path + "/" + prefix_key + "/" + std::to_string(j)));
  ExprPtr rest_val = rest_allowed ? value(*rest, rest_path) : never_expr();
  ExprPtr sep = seq({lit(","), ws()});
  auto element = [&](int64_t j) {
    ExprPtr v = j < static_cast<int64_t>(prefix.size()) ? prefix_val[j] : rest_val;
    return seq({j ? sep : empty_expr(), v, ws()});
  };
  int end = b_.rule_end(r);
  int cur = b_.new_state(r);
  b_.emit(*seq({lit("["), ws()}), b_.rule_start(r), cur);
  int64_t chain = max_n >= 0 ? max_n : std::max<int64_t>({static_cast<int64_t>(prefix.size()), min_n, 1});
  for (int64_t j = 0; j < chain; ++j) {
    if (j >= min_n) b_.emit(*lit("]"), cur, end);
    int nxt = b_.new_state(r);
    b_.emit(*element(j), cur, nxt);
    cur = nxt;
  }
  b_.emit(*lit("]"), cur, end);
  if (max_n < 0) b_.emit(*element(chain), cur, cur);
  return r;
}

ExprPtr SchemaCompiler::string_value(const ojson& s, const std::string& path) {
  bool has_len = s.contains("minLength") || s.contains("maxLength");
  int families = has_len + s.contains("pattern") + s.contains("format");
  if (families == 0) return call(plain_string_rule());
  if (families > 1) fail(path, "combining 'pattern', 'format' and 'minLength'/'maxLength' is not supported");
  if (auto it = strings_.find(&s); it != strings_.end()) return call(it->second);
  ExprPtr content;
  if (has_len) {
    int64_t lo = count_keyword(s, "minLength", 0, path), hi = count_keyword(s, "maxLength", -1, path);
    if (hi >= 0 && hi < lo) return never_expr();
    content = repeat(json_char(CodepointSet::all()), static_cast<int>(lo), static_cast<int>(hi));
  } else if (s.contains("pattern")) {
    if (!s["pattern"].is_string()) fail(path, "'pattern' must be a string");
    RegexOptions opt;
    opt.json_string = true;
    opt.search = true;
    try {
      content = regex_expr(s["pattern"].get<std::string>(), opt);
    } catch (const ConstraintError& e) {
      fail(path, std::string("'pattern': ") + e.what());
    }
  } else {
    if (!s["format"].is_string()) fail(path, "'format' must be a string");
    std::string f = s["format"].get<std::string>();
    content = json_format_content(f);
    if (!content) fail(path, "format '" + f + "' is not supported (date, time, date-time, uuid, ipv4, email are)");
  }
  int r = b_.add_rule("string " + path);
  strings_[&s] = r;
  b_.define(r, *seq({lit("\""), content, lit("\"")}));
  return call(r);
}

}  // namespace nanovllm::structured
