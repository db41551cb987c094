// Anthropic Messages API requests (POST /v1/messages, /v1/messages/count_tokens) -> the chat
// request they mean. Mapping (docs/server.md, "Anthropic Messages"):
//   system (string | text blocks)        -> a system message first
//   user text blocks                     -> a user message; tool_result blocks -> tool messages
//   assistant text / thinking / tool_use -> content / reasoning_content / tool_calls
//   max_tokens (required), stop_sequences, temperature, top_p, top_k (+ vLLM's sampling fields)
//   tools [{name, description, input_schema}] -> function tools; tool_choice auto | any (=
//   required) | tool (= named) | none
//   thinking {type: enabled | adaptive} -> chat_template_kwargs.enable_thinking = true; disabled
//   or absent -> false (Anthropic's default: no thinking unless asked)
// Images, documents and server tools are 400 naming the block or tool type. Errors use
// Anthropic's shape (anthropic_error_json).
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"
#include "server/openai_request.h"

namespace nanovllm::server {

struct MessagesRequest {
  GenerationRequest g;    // the chat request (n = 1)
  bool thinking = false;  // thinking enabled: reasoning becomes thinking blocks
};

MessagesRequest parse_messages_request(const std::string& body, size_t max_json_depth);
// count_tokens: the same body without max_tokens (sampling fields are ignored).
MessagesRequest parse_count_tokens_request(const std::string& body, size_t max_json_depth);

// {"type": "error", "error": {"type": ..., "message": ...}} with Anthropic's error types
// (invalid_request_error, authentication_error, not_found_error, request_too_large,
// overloaded_error, api_error).
nlohmann::json anthropic_error_json(const ApiError& e);

}  // namespace nanovllm::server
