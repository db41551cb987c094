// Parsing and validation of OpenAI request bodies (/v1/completions, /v1/chat/completions)
// into a GenerationRequest. Every problem becomes ApiError 400 naming the parameter; the
// sampling values are checked by SamplingParams::validate() so the CLI and the server agree.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <variant>
#include <vector>

#include "nanovllm/request_origin.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm::server {

struct GenerationRequest {
  bool chat = false;
  std::string model;  // "" when the client did not name one
  // Completions: text or token ids. Chat: unused (monostate).
  std::variant<std::monostate, std::string, std::vector<int>> prompt;
  nlohmann::json messages;                              // chat: normalized messages
  nlohmann::json template_kwargs = nlohmann::json::object();  // chat: tools, enable_thinking, ...
  bool add_generation_prompt = true;
  SamplingParams params;
  // best_of > n: the engine samples best_of completions (params.n = best_of) and the n with the
  // highest cumulative logprob are returned (num_returned = n). Not with stream.
  int num_returned = 1;
  // params.thinking_budget came from reasoning_effort / Anthropic's budget_tokens, not from an
  // explicit thinking_budget: dropped for a model without a <think> template (as vLLM ignores
  // reasoning_effort there) instead of refusing the request.
  bool soft_thinking_budget = false;
  bool max_tokens_set = false;  // chat without max_tokens: the rest of the context window
  bool stream = false;
  bool include_usage = false;   // stream_options.include_usage
  // stream_options.continuous_usage_stats (vLLM; with include_usage): usage on every chunk
  bool continuous_usage = false;
  bool logprobs = false;        // the response carries logprobs (params.logprobs = top-N)
  bool echo = false;            // completions: the prompt text precedes the output
  bool return_token_ids = false;  // completions: choices carry token_ids (+ prompt_token_ids), vLLM's field
  bool parse_tool_calls = false;  // chat with tools (tool_choice not "none"): output -> tool_calls
  std::string constraint_param;   // the field params.structured_outputs came from (errors name it)
  // The route and body as received, set by the handler only when the engine records requests
  // (--trace-requests): the trace keeps them for `nanovllm replay --url`.
  RequestOrigin origin;
};

// Default nesting limit of request bodies (`serve --max-json-depth`).
inline constexpr size_t kDefaultRequestJsonDepth = 128;

// The body as a JSON object, parsed with the nesting limit (util/json_bounded.h); ApiError 400
// (code invalid_json) otherwise.
nlohmann::json parse_request_body(const std::string& body, size_t max_json_depth = kDefaultRequestJsonDepth);

// `body` is the raw request body. Throws ApiError (400) for malformed JSON (numbers out of
// range included), JSON nested deeper than `max_json_depth`, wrong types and invalid values.
// The same, keys in the order written (nlohmann::ordered_json): Json is json or ordered_json.
template <class Json>
Json parse_request_body_as(const std::string& body, size_t max_json_depth = kDefaultRequestJsonDepth);

GenerationRequest parse_completion_request(const std::string& body,
                                           size_t max_json_depth = kDefaultRequestJsonDepth);
GenerationRequest parse_chat_request(const std::string& body, size_t max_json_depth = kDefaultRequestJsonDepth);

}  // namespace nanovllm::server
