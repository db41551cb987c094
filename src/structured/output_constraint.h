// The output constraint of a request's SamplingParams::structured_outputs (json schema,
// json_object, regex, choice, or tools + tool_name): a cache key (GrammarCache) and a grammar
// builder. Finding those params in an HTTP body is the server's (server/structured_request.h).
#pragma once
#include <functional>
#include <optional>
#include <string>

#include "chat/tool_call_format.h"
#include "nanovllm/sampling_params.h"
#include "structured/grammar.h"
#include "structured/json_schema.h"

namespace nanovllm::structured {

struct RequestConstraint {
  std::string param;  // the request field it came from, for messages ("response_format", ...)
  std::string key;    // identifies the grammar: equal keys, equal grammars
  std::function<Grammar()> build;
};

// nullopt when params.empty(). `format` is the model's tool-call format (tools only).
// params.disable_any_whitespace overrides opt.max_indent with -1 (no whitespace). Schema text is
// parsed with the bounded JSON parser (ConstraintError when malformed or nested too deeply); the
// builder throws ConstraintError for unsupported schema features (the server's 400).
std::optional<RequestConstraint> constraint_for(const StructuredOutputsParams& params,
                                                chat::ToolCallFormat format = chat::ToolCallFormat::kHermes,
                                                JsonSchemaOptions opt = {});

}  // namespace nanovllm::structured
