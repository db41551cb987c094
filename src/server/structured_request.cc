#include "server/structured_request.h"

#include "util/json_bounded.h"

namespace nanovllm::server {

using ojson = nlohmann::ordered_json;
using structured::ConstraintError;

namespace {

[[noreturn]] void bad(const std::string& param, const std::string& what) { throw ConstraintError(param + ": " + what); }

// A request field and the constraint it gives.
struct Found {
  std::string param;
  StructuredOutputsParams so;
};

Found schema_field(const std::string& param, const ojson& schema) {
  ojson s = schema;
  if (s.is_string()) {
    try {
      s = structured::parse_json_schema(s.get<std::string>());
    } catch (const ConstraintError& e) {
      bad(param, e.what());
    }
  }
  if (!s.is_object() && !s.is_boolean()) bad(param, "the schema must be a JSON object");
  Found f{param, {}};
  f.so.json = s.dump();
  return f;
}

Found json_object_field(const std::string& param) {
  Found f{param, {}};
  f.so.json_object = true;
  return f;
}

Found regex_field(const std::string& param, const ojson& v) {
  if (!v.is_string()) bad(param, "must be a string (a regular expression)");
  Found f{param, {}};
  f.so.regex = v.get<std::string>();
  return f;
}

Found grammar_field(const std::string& param, const ojson& v) {
  if (!v.is_string() || v.get<std::string>().empty())
    bad(param, "must be a non-empty string (a GBNF / EBNF or Lark grammar)");
  Found f{param, {}};
  f.so.grammar = v.get<std::string>();
  return f;
}

Found choice_field(const std::string& param, const ojson& v) {
  if (!v.is_array() || v.empty()) bad(param, "must be a non-empty array of strings");
  Found f{param, {}};
  for (auto& c : v) {
    if (!c.is_string()) bad(param, "must be a non-empty array of strings");
    f.so.choice.push_back(c.get<std::string>());
  }
  return f;
}

std::optional<Found> from_response_format(const ojson& rf) {
  const std::string p = "response_format";
  if (!rf.is_object() || !rf.contains("type") || !rf["type"].is_string()) bad(p, "expected an object with a \"type\"");
  std::string type = rf["type"].get<std::string>();
  if (type == "text") return std::nullopt;
  if (type == "json_object") return json_object_field(p);
  if (type == "structural_tag") {
    Found f{p, {}};
    f.so.structural_tag = ojson{{"structures", rf.value("structures", ojson())}, {"triggers", rf.value("triggers", ojson())}}.dump();
    return f;
  }
  if (type != "json_schema")
    bad(p, "type \"" + type + "\" is not supported (text, json_object, json_schema, structural_tag are)");
  if (!rf.contains("json_schema") || !rf["json_schema"].is_object() || !rf["json_schema"].contains("schema"))
    bad(p, "json_schema.schema is required");
  return schema_field(p + ".json_schema.schema", rf["json_schema"]["schema"]);
}

std::optional<Found> from_structured_outputs(const ojson& so) {
  const std::string p = "structured_outputs";
  if (!so.is_object()) bad(p, "expected an object");
  std::optional<Found> r;
  bool compact = false;
  for (auto& [k, v] : so.items()) {
    std::optional<Found> c;
    if (k == "json") c = schema_field(p + ".json", v);
    else if (k == "regex") c = regex_field(p + ".regex", v);
    else if (k == "choice") c = choice_field(p + ".choice", v);
    else if (k == "json_object") {
      if (v == true) c = json_object_field(p + ".json_object");
    } else if (k == "disable_any_whitespace") {
      if (!v.is_null() && !v.is_boolean()) bad(p + "." + k, "must be a boolean");
      compact = v == true;
    } else if (k == "grammar") {
      c = grammar_field(p + ".grammar", v);
    } else if (k == "structural_tag") {
      // JSON text (vLLM) or the object itself.
      ojson spec = v;
      if (v.is_string()) {
        try {
          spec = parse_ordered_json(v.get<std::string>(), "structural_tag");  // bounded nesting
        } catch (const Error&) {
          bad(p + "." + k, "is not valid JSON");
        }
      }
      if (!spec.is_object()) bad(p + "." + k, "must be {\"structures\": [...], \"triggers\": [...]}");
      c = Found{p + "." + k, {}};
      c->so.structural_tag = spec.dump();
    }
    else if (!v.is_null() && k != "disable_fallback" && k != "whitespace_pattern")
      bad(p + "." + k, "is not a known field");
    if (c && r) bad(p, "give only one of json, regex, choice, json_object, grammar, structural_tag");
    if (c) r = std::move(c);
  }
  if (r) r->so.disable_any_whitespace = compact;
  return r;
}

}  // namespace

std::optional<StructuredOutputsParams> request_structured_outputs(const ojson& body, std::string* param) {
  std::vector<Found> found;
  auto add = [&](std::optional<Found> c) {
    if (c) found.push_back(std::move(*c));
  };
  auto present = [&](const char* k) { return body.contains(k) && !body[k].is_null(); };
  if (present("response_format")) add(from_response_format(body["response_format"]));
  if (present("structured_outputs")) add(from_structured_outputs(body["structured_outputs"]));
  if (present("guided_json")) add(schema_field("guided_json", body["guided_json"]));
  if (present("guided_regex")) add(regex_field("guided_regex", body["guided_regex"]));
  if (present("guided_choice")) add(choice_field("guided_choice", body["guided_choice"]));
  if (present("guided_grammar")) add(grammar_field("guided_grammar", body["guided_grammar"]));
  // llama.cpp's server field (GBNF).
  if (present("grammar")) add(grammar_field("grammar", body["grammar"]));
  if (found.size() > 1) bad(found[1].param, "conflicts with " + found[0].param + ": give one output constraint");
  if (found.empty()) return std::nullopt;
  if (param) *param = found[0].param;
  return found[0].so;
}

std::optional<structured::RequestConstraint> request_constraint(const ojson& body,
                                                               const structured::JsonSchemaOptions& opt) {
  std::string param;
  std::optional<StructuredOutputsParams> so = request_structured_outputs(body, &param);
  if (!so) return std::nullopt;
  std::optional<structured::RequestConstraint> c =
      structured::constraint_for(*so, chat::ToolCallFormat::kHermes, opt);
  c->param = param;
  return c;
}

}  // namespace nanovllm::server
