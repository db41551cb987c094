// SamplingParams::validate (include/nanovllm/sampling_params.h): the field table's rules, then
// the checks that involve two fields.
#include "nanovllm/sampling_params.h"

#include "util/check.h"

namespace nanovllm {

void SamplingParams::validate() const {
  const std::string p = fields_problem(*this, [](const auto& f) { return f.name; });
  if (!p.empty()) NV_THROW(p);
  if (min_tokens < 0 || min_tokens > max_tokens)
    NV_THROW("min_tokens must be in [0, max_tokens=", max_tokens, "], got ", min_tokens);
  const StructuredOutputsParams& so = structured_outputs;
  const int constraints = int(!so.json.empty()) + int(!so.regex.empty()) + int(!so.choice.empty()) +
                          int(so.json_object) + int(!so.tools.empty()) + int(!so.grammar.empty()) +
                          int(!so.structural_tag.empty());
  if (constraints > 1)
    NV_THROW("structured_outputs: give only one of json, regex, choice, json_object, grammar, structural_tag, tools");
  if (!so.tool_name.empty() && so.tools.empty())
    NV_THROW("structured_outputs.tool_name '", so.tool_name, "' needs structured_outputs.tools");
}

}  // namespace nanovllm
