// The request fields beyond plain sampling, parsed into a GenerationRequest: output constraints
// (response_format, vLLM's structured_outputs / guided_*), tools + tool_choice, n / best_of,
// echo and suffix. Every problem is an ApiError 400 naming the field. A constraint's schema is
// only checked for shape here; unsupported schema features are found when the engine compiles
// it (LLM::prepare_constraint, on the handler thread), also a 400.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "server/openai_request.h"

namespace nanovllm::server {

// `b` is the parsed body, `body` its text (re-read with key order kept when a schema is in it).
void parse_n(const nlohmann::json& b, GenerationRequest& r);
void parse_constraints(const nlohmann::json& b, const std::string& body, size_t max_json_depth,
                       GenerationRequest& r);
void parse_echo_suffix(const nlohmann::json& b, GenerationRequest& r);

}  // namespace nanovllm::server
