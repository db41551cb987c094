#include "structured/tool_constraint.h"

namespace nanovllm::structured {

using ojson = nlohmann::ordered_json;

namespace {

void rebase_refs(ojson& s, const std::string& prefix) {
  if (s.is_object()) {
    for (auto& [k, v] : s.items()) {
      if (k == "$ref" && v.is_string() && v.get<std::string>().rfind('#', 0) == 0)
        v = prefix + v.get<std::string>().substr(1);
      else
        rebase_refs(v, prefix);
    }
  } else if (s.is_array()) {
    for (auto& v : s) rebase_refs(v, prefix);
  }
}

}  // namespace

ojson tool_call_schema(const ojson& tools, const std::string& only_name, const std::string& args_key) {
  if (!tools.is_array() || tools.empty()) throw ConstraintError("tools: must be a non-empty array");
  ojson branches = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("function") || !t["function"].is_object())
      throw ConstraintError(where + ": expected {\"type\": \"function\", \"function\": {...}}");
    if (t.contains("type") && t["type"] != "function")
      throw ConstraintError(where + ": type " + t["type"].dump() + " is not supported (only \"function\")");
    const ojson& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string()) throw ConstraintError(where + ": function.name must be a string");
    std::string name = f["name"].get<std::string>();
    if (!only_name.empty() && name != only_name) continue;
    ojson params = f.contains("parameters") ? f["parameters"]
                                            : ojson{{"type", "object"}, {"properties", ojson::object()}, {"additionalProperties", false}};
    ojson props = ojson::object();
    props["name"] = {{"const", name}};
    props[args_key] = params;
    branches.push_back({{"type", "object"}, {"properties", props}, {"required", {"name", args_key}},
                        {"additionalProperties", false}});
  }
  if (branches.empty()) throw ConstraintError("tool_choice: no tool named '" + only_name + "' in tools");
  // A parameters schema's "#..." references are relative to itself: point them at its new place.
  std::string key = json_pointer_token(args_key);
  if (branches.size() == 1) {
    rebase_refs(branches[0]["properties"][args_key], "#/properties/" + key);
    return branches[0];
  }
  for (size_t i = 0; i < branches.size(); ++i)
    rebase_refs(branches[i]["properties"][args_key], "#/anyOf/" + std::to_string(i) + "/properties/" + key);
  return {{"anyOf", branches}};
}

Grammar tool_call_grammar(const ojson& tools, const ojson& tool_choice, chat::ToolCallFormat format,
                          const JsonSchemaOptions& opt) {
  std::string only;
  if (tool_choice.is_object()) {
    if (!tool_choice.contains("function") || !tool_choice["function"].contains("name") ||
        !tool_choice["function"]["name"].is_string())
      throw ConstraintError("tool_choice: expected {\"type\": \"function\", \"function\": {\"name\": ...}}");
    only = tool_choice["function"]["name"].get<std::string>();
  } else if (tool_choice != "required") {
    throw ConstraintError("tool_choice " + tool_choice.dump() + " does not constrain the output");
  }
  bool hermes = format == chat::ToolCallFormat::kHermes;
  ojson schema = tool_call_schema(tools, only, hermes ? "arguments" : "parameters");
  GrammarBuilder b(opt.max_states);
  int one = add_json_schema_rule(b, schema, opt);
  ExprPtr call_text = hermes ? seq({lit("<tool_call>\n"), call(one), lit("\n</tool_call>")}) : call(one);
  ExprPtr more = only.empty() ? star(seq({lit(hermes ? "\n" : "; "), call_text})) : empty_expr();
  int root = b.add_rule("tool_calls");
  b.define(root, *seq({call_text, more}));
  return b.finish(root);
}

}  // namespace nanovllm::structured
