// oneOf is generated as anyOf, which is only right when no document can match two branches.
// Accepted when that is evident: the branches produce disjoint JSON types (integer counting as
// number), or two object branches differ in a required property's const / enum values (a
// discriminator such as {"kind": {"const": "a"}}). Otherwise a ConstraintError asks for anyOf.
#include <set>

#include "structured/json_schema_compiler.h"

namespace nanovllm::structured {

namespace {

const std::set<std::string> kAllTypes = {"object", "array", "string", "number", "boolean", "null"};

std::string type_of(const ojson& v) {
  if (v.is_object()) return "object";
  if (v.is_array()) return "array";
  if (v.is_string()) return "string";
  if (v.is_number()) return "number";
  if (v.is_boolean()) return "boolean";
  return "null";
}

}  // namespace

const ojson& SchemaCompiler::deref(const ojson& s, const std::string& path, int depth) const {
  if (depth > 32) fail(path, "'$ref' chain too deep");
  if (!s.is_object() || !s.contains("$ref")) return s;
  std::string target;
  return deref(resolve_ref(s["$ref"], path, &target), target, depth + 1);
}

std::set<std::string> SchemaCompiler::possible_types(const ojson& s0, const std::string& path, int depth) const {
  const ojson& s = deref(s0, path, depth);
  if (s.is_boolean()) return s.get<bool>() ? kAllTypes : std::set<std::string>{};
  if (!s.is_object()) return kAllTypes;
  std::set<std::string> out;
  if (s.contains("const")) {
    out.insert(type_of(s["const"]));
  } else if (s.contains("enum") && s["enum"].is_array()) {
    for (auto& v : s["enum"]) out.insert(type_of(v));
  } else if (s.contains("anyOf") || s.contains("oneOf")) {
    const ojson& list = s.contains("anyOf") ? s["anyOf"] : s["oneOf"];
    if (list.is_array())
      for (auto& b : list) {
        auto t = possible_types(b, path, depth + 1);
        out.insert(t.begin(), t.end());
      }
  } else if (s.contains("allOf") && s["allOf"].is_array() && s["allOf"].size() == 1) {
    out = possible_types(s["allOf"][0], path, depth + 1);
  } else {
    for (auto& t : types_of(s, path)) out.insert(t == "integer" ? "number" : t);
    if (out.empty()) out = kAllTypes;
  }
  if (s.contains("nullable") && s["nullable"] == true) out.insert("null");
  return out;
}

// Two object schemas with a property both require and whose const / enum values differ.
bool SchemaCompiler::discriminated(const ojson& a0, const ojson& b0, const std::string& path) const {
  const ojson &a = deref(a0, path, 0), &b = deref(b0, path, 0);
  auto values = [&](const ojson& s, const std::string& p, std::vector<ojson>* out) {
    if (!s.is_object() || !s.contains("properties") || !s["properties"].contains(p) || !s.contains("required")) return false;
    bool required = false;
    for (auto& r : s["required"]) required = required || r == p;
    const ojson& ps = deref(s["properties"][p], path, 0);
    if (!required || !ps.is_object()) return false;
    if (ps.contains("const")) out->push_back(ps["const"]);
    else if (ps.contains("enum") && ps["enum"].is_array()) out->assign(ps["enum"].begin(), ps["enum"].end());
    else return false;
    return true;
  };
  if (!a.is_object() || !a.contains("properties") || !a["properties"].is_object()) return false;
  for (auto& [p, unused] : a["properties"].items()) {
    std::vector<ojson> va, vb;
    if (!values(a, p, &va) || !values(b, p, &vb)) continue;
    bool overlap = false;
    for (auto& x : va)
      for (auto& y : vb) overlap = overlap || x == y;
    if (!overlap) return true;
  }
  return false;
}

void SchemaCompiler::check_one_of(const ojson& list, const std::string& path) const {
  std::vector<std::set<std::string>> types;
  for (size_t i = 0; i < list.size(); ++i) types.push_back(possible_types(list[i], path + "/oneOf/" + std::to_string(i), 0));
  for (size_t i = 0; i < list.size(); ++i) {
    for (size_t j = i + 1; j < list.size(); ++j) {
      std::set<std::string> common;
      for (auto& t : types[i])
        if (types[j].count(t)) common.insert(t);
      if (common.empty()) continue;
      if (common == std::set<std::string>{"object"} && discriminated(list[i], list[j], path)) continue;
      fail(path, "'oneOf' branches " + std::to_string(i) + " and " + std::to_string(j) +
                     " may match the same document (only disjoint types or a const discriminator are "
                     "supported; use anyOf)");
    }
  }
}

}  // namespace nanovllm::structured
