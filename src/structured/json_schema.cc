// JSON Schema compiler: keyword checks, $ref, enum/const, combinators, types and scalars.
#include "structured/json_schema.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include "structured/json_exprs.h"
#include "structured/json_schema_compiler.h"

namespace nanovllm::structured {

namespace {

const std::set<std::string> kAnnotations = {
    "title", "description", "$schema", "$id", "$comment", "default", "examples", "deprecated",
    "readOnly", "writeOnly", "$defs", "definitions", "contentMediaType", "contentEncoding"};
const std::set<std::string> kHandled = {
    "type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "nullable",
    "properties", "required", "additionalProperties", "unevaluatedProperties", "minProperties", "maxProperties",
    "items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems",
    "minLength", "maxLength", "pattern", "format",
    "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
const std::set<std::string> kObjectKeys = {"properties", "required", "additionalProperties", "unevaluatedProperties",
                                           "minProperties", "maxProperties"};
const std::set<std::string> kArrayKeys = {"items", "prefixItems", "additionalItems", "minItems", "maxItems", "uniqueItems"};
const std::set<std::string> kStringKeys = {"minLength", "maxLength", "pattern", "format"};
const std::set<std::string> kNumberKeys = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};

bool is_annotation(const std::string& k) { return kAnnotations.count(k) > 0; }

bool json_has_type(const ojson& v, const std::string& t) {
  if (t == "null") return v.is_null();
  if (t == "boolean") return v.is_boolean();
  if (t == "string") return v.is_string();
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "number") return v.is_number();
  if (t == "integer") return v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  return false;
}

}  // namespace

SchemaCompiler::SchemaCompiler(GrammarBuilder& b, const ojson& root, const JsonSchemaOptions& opt)
    : b_(b), root_(root), opt_(opt) {}

void SchemaCompiler::fail(const std::string& path, const std::string& what) const {
  throw ConstraintError("json_schema at " + path + ": " + what);
}

void SchemaCompiler::check_keywords(const ojson& s, const std::string& path) const {
  for (auto& [k, v] : s.items())
    if (!is_annotation(k) && !kHandled.count(k)) fail(path, "unsupported keyword '" + k + "'");
}

ExprPtr SchemaCompiler::value(const ojson& s, const std::string& path) {
  if (s.is_boolean()) return s.get<bool>() ? any_value() : never_expr();
  if (!s.is_object()) fail(path, "a schema must be an object or a boolean, not " + s.dump());
  check_keywords(s, path);
  if (s.contains("$ref")) {
    for (auto& [k, v] : s.items())
      if (k != "$ref" && !is_annotation(k)) fail(path, "'$ref' together with '" + k + "' is not supported");
    std::string target_path;
    const ojson& t = resolve_ref(s["$ref"], path, &target_path);
    if (std::find(ref_stack_.begin(), ref_stack_.end(), &t) != ref_stack_.end())
      fail(path, "recursive '$ref' to " + target_path + " that does not pass through an object or array");
    ref_stack_.push_back(&t);
    ExprPtr e = value(t, target_path);
    ref_stack_.pop_back();
    return e;
  }
  ExprPtr e = value_body(s, path);
  if (s.contains("nullable")) {
    if (!s["nullable"].is_boolean()) fail(path, "'nullable' must be a boolean");
    if (s["nullable"].get<bool>()) e = alt({e, lit("null")});
  }
  return e;
}

ExprPtr SchemaCompiler::value_body(const ojson& s, const std::string& path) {
  if (s.contains("enum") || s.contains("const")) return enum_value(s, path);
  for (const char* comb : {"anyOf", "oneOf", "allOf"}) {
    if (!s.contains(comb)) continue;
    for (auto& [k, v] : s.items())
      if (k != comb && k != "nullable" && !is_annotation(k))
        fail(path, std::string("'") + comb + "' together with '" + k + "' is not supported");
    const ojson& list = s[comb];
    if (!list.is_array() || list.empty()) fail(path, std::string("'") + comb + "' must be a non-empty array");
    if (std::string(comb) == "allOf") {
      if (list.size() != 1) fail(path, "'allOf' with more than one schema is not supported");
      return value(list[0], path + "/allOf/0");
    }
    if (std::string(comb) == "oneOf") check_one_of(list, path);
    std::vector<ExprPtr> kids;
    for (size_t i = 0; i < list.size(); ++i) kids.push_back(value(list[i], path + "/" + comb + "/" + std::to_string(i)));
    return alt(std::move(kids));
  }
  std::vector<std::string> types = types_of(s, path);
  if (types.empty()) return any_value();
  std::vector<ExprPtr> kids;
  for (auto& t : types) kids.push_back(typed(s, t, path));
  return alt(std::move(kids));
}

ExprPtr SchemaCompiler::enum_value(const ojson& s, const std::string& path) {
  for (auto& [k, v] : s.items())
    if (k != "enum" && k != "const" && k != "type" && k != "nullable" && !is_annotation(k))
      fail(path, "'enum' / 'const' together with '" + k + "' is not supported");
  std::vector<ojson> values;
  if (s.contains("const")) {
    values.push_back(s["const"]);
  } else {
    if (!s["enum"].is_array()) fail(path, "'enum' must be an array");
    for (auto& v : s["enum"]) values.push_back(v);
  }
  std::vector<std::string> types = s.contains("type") ? types_of(s, path) : std::vector<std::string>{};
  std::vector<ExprPtr> kids;
  for (auto& v : values) {
    bool ok = types.empty();
    for (auto& t : types) ok = ok || json_has_type(v, t);
    if (ok) kids.push_back(lit(v.dump()));
  }
  return alt(std::move(kids));  // none left: matches nothing
}

std::vector<std::string> SchemaCompiler::types_of(const ojson& s, const std::string& path) const {
  static const std::set<std::string> kTypes = {"object", "array", "string", "integer", "number", "boolean", "null"};
  std::vector<std::string> types;
  if (s.contains("type")) {
    const ojson& t = s["type"];
    if (t.is_string()) types.push_back(t.get<std::string>());
    else if (t.is_array())
      for (auto& x : t) {
        if (!x.is_string()) fail(path, "'type' entries must be strings");
        types.push_back(x.get<std::string>());
      }
    else
      fail(path, "'type' must be a string or an array of strings");
    for (auto& x : types)
      if (!kTypes.count(x)) fail(path, "unknown type '" + x + "'");
    if (types.empty()) fail(path, "'type' is an empty array");
    return types;
  }
  // No "type": type-specific keywords only constrain their own type; generate just those types.
  auto any_of = [&](const std::set<std::string>& keys) {
    for (auto& [k, v] : s.items())
      if (keys.count(k)) return true;
    return false;
  };
  if (any_of(kObjectKeys)) types.push_back("object");
  if (any_of(kArrayKeys)) types.push_back("array");
  if (any_of(kStringKeys)) types.push_back("string");
  if (any_of(kNumberKeys)) types.push_back("number");
  return types;
}

ExprPtr SchemaCompiler::typed(const ojson& s, const std::string& type, const std::string& path) {
  if (type == "object") return call(object_rule(s, path));
  if (type == "array") return call(array_rule(s, path));
  if (type == "string") return string_value(s, path);
  if (type == "integer") return integer_value(s, path);
  if (type == "number") return number_value(s, path);
  if (type == "boolean") return alt({lit("true"), lit("false")});
  return lit("null");
}

const ojson& SchemaCompiler::resolve_ref(const ojson& ref, const std::string& path, std::string* target_path) const {
  if (!ref.is_string()) fail(path, "'$ref' must be a string");
  std::string r = ref.get<std::string>();
  if (r.empty() || r[0] != '#') fail(path, "'$ref' \"" + r + "\" is not supported (only \"#...\" JSON pointers)");
  std::string ptr;  // percent-decoded
  for (size_t i = 1; i < r.size(); ++i) {
    if (r[i] == '%' && i + 2 < r.size() && std::isxdigit(static_cast<unsigned char>(r[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(r[i + 2]))) {
      ptr.push_back(static_cast<char>(std::stoi(r.substr(i + 1, 2), nullptr, 16)));
      i += 2;
    } else {
      ptr.push_back(r[i]);
    }
  }
  if (!ptr.empty() && ptr[0] != '/') fail(path, "'$ref' \"" + r + "\" to an anchor is not supported");
  try {
    const ojson& t = root_.at(ojson::json_pointer(ptr));
    *target_path = "#" + ptr;
    return t;
  } catch (const nlohmann::json::exception&) {
    fail(path, "'$ref' \"" + r + "\" does not resolve");
  }
}

int add_json_schema_rule(GrammarBuilder& b, const ojson& schema, const JsonSchemaOptions& opt) {
  SchemaCompiler c(b, schema, opt);
  ExprPtr e = c.value(schema, "#");
  int r = b.add_rule("json_schema");
  b.define(r, *e);
  return r;
}

Grammar json_schema_grammar(const ojson& schema, const JsonSchemaOptions& opt) {
  GrammarBuilder b(opt.max_states);
  int r = add_json_schema_rule(b, schema, opt);
  return b.finish(r);
}

ojson parse_json_schema(std::string_view schema_text) {
  try {
    return ojson::parse(schema_text);
  } catch (const nlohmann::json::exception& e) {
    throw ConstraintError(std::string("json_schema is not valid JSON: ") + e.what());
  }
}

std::string json_pointer_token(const std::string& key) {
  std::string o;
  for (char c : key) o += c == '~' ? "~0" : c == '/' ? "~1" : std::string(1, c);
  return o;
}

Grammar json_object_grammar(const JsonSchemaOptions& opt) {
  return json_schema_grammar(ojson{{"type", "object"}}, opt);
}

}  // namespace nanovllm::structured
