#include "structured/request_constraint.h"

#include "structured/constraints.h"

namespace nanovllm::structured {

using ojson = nlohmann::ordered_json;

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& what) { throw ConstraintError(param + ": " + what); }

RequestConstraint schema_constraint(const std::string& param, const ojson& schema, const JsonSchemaOptions& opt) {
  ojson s = schema;
  if (s.is_string()) {
    try {
      s = parse_json_schema(s.get<std::string>());
    } catch (const ConstraintError& e) {
      bad(param, e.what());
    }
  }
  if (!s.is_object() && !s.is_boolean()) bad(param, "the schema must be a JSON object");
  return {param, "json_schema\n" + s.dump(), [s, opt] { return json_schema_grammar(s, opt); }};
}

RequestConstraint json_object_constraint(const std::string& param, const JsonSchemaOptions& opt) {
  return {param, "json_object", [opt] { return json_object_grammar(opt); }};
}

RequestConstraint regex_constraint(const std::string& param, const ojson& v) {
  if (!v.is_string()) bad(param, "must be a string (a regular expression)");
  std::string re = v.get<std::string>();
  return {param, "regex\n" + re, [re] { return regex_grammar(re); }};
}

RequestConstraint choice_constraint(const std::string& param, const ojson& v) {
  if (!v.is_array() || v.empty()) bad(param, "must be a non-empty array of strings");
  std::vector<std::string> choices;
  for (auto& c : v) {
    if (!c.is_string()) bad(param, "must be a non-empty array of strings");
    choices.push_back(c.get<std::string>());
  }
  return {param, "choice\n" + v.dump(), [choices] { return choice_grammar(choices); }};
}

std::optional<RequestConstraint> from_response_format(const ojson& rf, const JsonSchemaOptions& opt) {
  const std::string p = "response_format";
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) bad(p, "expected an object with a \"type\"");
  std::string type = rf["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return json_object_constraint(p, opt);
  if (type != "json_schema") bad(p, "type \"" + type + "\" is not supported (text, json_object, json_schema are)");
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object() || !rf["json_schema"].contains("schema"))
    bad(p, "json_schema.schema is required");
  return schema_constraint(p + ".json_schema.schema", rf["json_schema"]["schema"], opt);
}

std::optional<RequestConstraint> from_structured_outputs(const ojson& so, const JsonSchemaOptions& opt) {
  const std::string p = "structured_outputs";
  if (!so.is_object()) bad(p, "expected an object");
  std::optional<RequestConstraint> r;
  for (auto& [k, v] : so.items()) {
    std::optional<RequestConstraint> c;
    if (k == "json") c = schema_constraint(p + ".json", v, opt);
    else if (k == "regex") c = regex_constraint(p + ".regex", v);
    else if (k == "choice") c = choice_constraint(p + ".choice", v);
    else if (k == "json_object") {
      if (v == true) c = json_object_constraint(p + ".json_object", opt);
    } else if (k == "grammar" || k == "structural_tag")
      bad(p + "." + k, "is not supported (json, regex, choice, json_object are)");
    else if (!v.is_null() && k != "disable_fallback" && k != "disable_any_whitespace" && k != "whitespace_pattern")
      bad(p + "." + k, "is not a known field");
    if (c && r) bad(p, "give only one of json, regex, choice, json_object");
    if (c) r = std::move(c);
  }
  return r;
}

}  // namespace

std::optional<RequestConstraint> request_constraint(const ojson& body, const JsonSchemaOptions& opt) {
  std::vector<RequestConstraint> found;
  auto add = [&](std::optional<RequestConstraint> c) {
    if (c) found.push_back(std::move(*c));
  };
  auto present = [&](const char* k) { return body.contains(k) && !body[k].is_null(); };
  if (present("response_format")) add(from_response_format(body["response_format"], opt));
  if (present("structured_outputs")) add(from_structured_outputs(body["structured_outputs"], opt));
  if (present("guided_json")) add(schema_constraint("guided_json", body["guided_json"], opt));
  if (present("guided_regex")) add(regex_constraint("guided_regex", body["guided_regex"]));
  if (present("guided_choice")) add(choice_constraint("guided_choice", body["guided_choice"]));
  if (present("guided_grammar")) bad("guided_grammar", "is not supported (guided_json, guided_regex, guided_choice are)");
  if (found.size() > 1) bad(found[1].param, "conflicts with " + found[0].param + ": give one output constraint");
  if (found.empty()) return std::nullopt;
  return found[0];
}

}  // namespace nanovllm::structured
