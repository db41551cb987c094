#include "structured/output_constraint.h"

#include "structured/constraints.h"
#include "structured/grammar_text.h"
#include "structured/structural_tag.h"
#include "structured/tool_constraint.h"
#include "util/json_bounded.h"

namespace nanovllm::structured {

using ojson = nlohmann::ordered_json;

std::optional<RequestConstraint> constraint_for(const StructuredOutputsParams& p, chat::ToolCallFormat format,
                                                JsonSchemaOptions opt) {
  if (p.empty()) return std::nullopt;
  if (p.disable_any_whitespace) opt.max_indent = -1;
  // The options change the grammar: they are part of the key.
  const std::string ws = "ws" + std::to_string(opt.max_indent) + "\n";
  auto parse = [](const std::string& text, const char* what) {
    try {
      return parse_ordered_json(text, what);
    } catch (const Error& e) {
      throw ConstraintError(e.what());
    }
  };
  if (!p.json.empty()) {
    ojson s = parse(p.json, "json_schema");
    return RequestConstraint{"json", ws + "json_schema\n" + s.dump(), [s, opt] { return json_schema_grammar(s, opt); }};
  }
  if (p.json_object)
    return RequestConstraint{"json_object", ws + "json_object", [opt] { return json_object_grammar(opt); }};
  if (!p.regex.empty()) {
    std::string re = p.regex;
    return RequestConstraint{"regex", "regex\n" + re, [re] { return regex_grammar(re); }};
  }
  if (!p.structural_tag.empty()) {
    ojson spec = parse(p.structural_tag, "structural_tag");
    return RequestConstraint{"structural_tag", ws + "structural_tag\n" + spec.dump(),
                             [spec, opt] { return structural_tag_grammar(spec, opt); }};
  }
  if (!p.grammar.empty()) {
    std::string text = p.grammar;
    return RequestConstraint{"grammar", "grammar\n" + text, [text] { return text_grammar(text); }};
  }
  if (!p.choice.empty()) {
    std::vector<std::string> choices = p.choice;
    return RequestConstraint{"choice", "choice\n" + ojson(choices).dump(), [choices] { return choice_grammar(choices); }};
  }
  ojson tools = parse(p.tools, "tools");
  ojson choice = p.tool_name.empty() ? ojson("required")
                                     : ojson{{"type", "function"}, {"function", {{"name", p.tool_name}}}};
  std::string key = ws + "tools\n" + std::string(chat::to_string(format)) + "\n" + choice.dump() + "\n" + tools.dump();
  return RequestConstraint{"tools", key, [tools, choice, format, opt] {
                             return tool_call_grammar(tools, choice, format, opt);
                           }};
}

}  // namespace nanovllm::structured
