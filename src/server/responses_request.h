// OpenAI Responses API requests (POST /v1/responses) -> the chat request they mean, plus what the
// response object echoes. Mapping (docs/server.md, "Responses"):
//   instructions                          -> a system message first (not carried to follow-ups)
//   input: string                         -> one user message
//   input items: messages (user/assistant/system/developer; input_text / output_text parts),
//     function_call -> assistant tool_calls, function_call_output -> a tool message,
//     reasoning -> the next assistant message's reasoning_content
//   previous_response_id                  -> that response's conversation first (the store)
//   tools [{type: function, name, parameters}], tool_choice, text.format (json_schema |
//   json_object | text), max_output_tokens, temperature, top_p (+ vLLM's sampling fields),
//   reasoning.effort none | minimal -> chat_template_kwargs.enable_thinking = false
// Images, files, item references and hosted tools are 400 naming the type.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "server/openai_request.h"

namespace nanovllm::server {

class ResponseStore;

struct ResponsesRequest {
  GenerationRequest g;  // the chat request (n = 1)
  // The response object's fields that echo the request (instructions, tools, text, ...).
  nlohmann::json echo = nlohmann::json::object();
  // The chat messages of this turn without instructions: the previous conversation + the input.
  nlohmann::json conversation = nlohmann::json::array();
  bool store = true;
  bool background = false;
};

// `store` resolves previous_response_id (an unknown id is a 400 naming the field).
ResponsesRequest parse_responses_request(const std::string& body, size_t max_json_depth, const ResponseStore& store);

}  // namespace nanovllm::server
