// The seam between the generation path (one chat completion, n = 1) and the APIs that are not
// OpenAI chat completions: /v1/responses and Anthropic's /v1/messages. Both are the same chat
// completion underneath; they differ in request shape (translated to a chat request by
// responses_request / anthropic_request) and in how the result is written. A writer consumes the
// chat deltas of ChoiceOutput ({"reasoning_content"}, {"content"}, {"tool_calls": [...]}) in
// order and produces that API's server-sent events; the whole (non-streamed) result is the same
// state after finish(), so streamed and whole answers agree for every split of the text.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"

namespace nanovllm::server {

// How the completion ended, in the engine's terms.
struct FinishInfo {
  std::string finish_reason;  // chat finish reason: stop | length | tool_calls | abort | error
  std::string stop_reason;    // the stop string that matched ("" when none)
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;     // prompt tokens served from the prefix cache
  int reasoning_tokens = 0;  // tokens of the reasoning text (re-tokenized)
};

class ApiWriter {
 public:
  virtual ~ApiWriter() = default;
  // SSE text before any delta (response.created / message_start).
  virtual std::string begin() = 0;
  // SSE text for one chat delta; the delta is also accumulated into the whole result.
  virtual std::string delta(const nlohmann::json& chat_delta) = 0;
  // SSE text that closes the stream after the last delta (open parts closed, final events).
  virtual std::string finish(const FinishInfo& f) = 0;
  // An error after the stream started: that API's error event (the stream ends after it).
  virtual std::string stream_error(const ApiError& e) = 0;
  // The whole result (after finish(); before it: the state so far).
  virtual nlohmann::json result() const = 0;
  // SSE end marker after the last event ("" when the API has none).
  virtual std::string done_marker() const { return ""; }
};

// "event: <type>\ndata: <json>\n\n" (Anthropic and Responses name every event).
std::string sse_named_event(const std::string& type, const nlohmann::json& data);

}  // namespace nanovllm::server
