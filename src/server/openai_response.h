// OpenAI response bodies and server-sent-event chunks for completions and chat completions.
// Pure functions of their inputs (no engine access) so they are unit-testable.
#pragma once
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "nanovllm/request_output.h"

namespace nanovllm::server {

// Identity shared by every chunk of one response.
struct ResponseMeta {
  std::string id;       // "cmpl-..." / "chatcmpl-..."
  std::string model;    // served model name
  int64_t created = 0;  // unix seconds
  bool chat = false;
};

// Text of one token for logprobs (the tokenizer's decode of that id alone).
using TokenText = std::function<std::string(int)>;

std::string new_response_id(bool chat);

nlohmann::json usage_json(int prompt_tokens, int completion_tokens);

// Logprobs of tokens `ids` (one TokenLogprobs each). Completions format:
// {tokens, token_logprobs, top_logprobs: [{text: logprob}], text_offset}; `text_offset` starts at
// `offset` (bytes into the generated text) and is advanced past these tokens.
nlohmann::json completion_logprobs(const std::vector<int>& ids, const std::vector<TokenLogprobs>& lps,
                                   const TokenText& text_of, size_t& offset);
// Chat format: {content: [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]}.
nlohmann::json chat_logprobs(const std::vector<int>& ids, const std::vector<TokenLogprobs>& lps,
                             const TokenText& text_of);

// Non-streamed bodies. `logprobs` is null when not requested.
nlohmann::json completion_response(const ResponseMeta& m, const std::string& text,
                                   const std::string& finish_reason, const nlohmann::json& logprobs,
                                   const nlohmann::json& usage);
nlohmann::json chat_response(const ResponseMeta& m, const std::string& text,
                             const std::string& finish_reason, const nlohmann::json& logprobs,
                             const nlohmann::json& usage);

// Streamed chunks. finish_reason "" -> null. Chat `delta` is e.g. {"content": "..."}.
nlohmann::json completion_chunk(const ResponseMeta& m, const std::string& text,
                                const std::string& finish_reason, const nlohmann::json& logprobs,
                                int index = 0);
nlohmann::json chat_chunk(const ResponseMeta& m, const nlohmann::json& delta,
                          const std::string& finish_reason, const nlohmann::json& logprobs, int index = 0);

// n > 1: one choice object each ({"index", "message" | "text", "logprobs", "finish_reason"}),
// then the body around them.
nlohmann::json chat_choice(int index, const nlohmann::json& message, const std::string& finish_reason,
                           const nlohmann::json& logprobs);
nlohmann::json completion_choice(int index, const std::string& text, const std::string& finish_reason,
                                 const nlohmann::json& logprobs);
nlohmann::json response_body(const ResponseMeta& m, nlohmann::json choices, const nlohmann::json& usage);
// The final usage-only chunk (stream_options.include_usage): empty choices.
nlohmann::json usage_chunk(const ResponseMeta& m, const nlohmann::json& usage);

// SSE framing: "data: <json>\n\n" and the terminator "data: [DONE]\n\n".
std::string sse_event(const nlohmann::json& j);
std::string sse_done();

}  // namespace nanovllm::server
