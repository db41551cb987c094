// Responses API output: the response object ({"object": "response", "status", "output": [items],
// "usage", ...}) and its stream of typed events, each with a sequence_number:
//   response.created, response.in_progress, then per output item
//     output_item.added, (content_part.added, output_text.delta* | reasoning_text.delta*,
//     ..._text.done, content_part.done | function_call_arguments.delta*, .done), output_item.done
//   then response.completed (status completed) or response.incomplete (length: reason
//   max_output_tokens; abort: reason cancelled / status cancelled) or response.failed.
// Items: reasoning -> {"type": "reasoning", "content": [reasoning_text]}, text -> {"type":
// "message", "content": [output_text]}, tool calls -> {"type": "function_call", "call_id", ...}.
#pragma once
#include <functional>
#include <string>

#include "server/api_writer.h"

namespace nanovllm::server {

class ResponsesWriter : public ApiWriter {
 public:
  // `response`: the object without output (id, created_at, model, status, echoed fields).
  explicit ResponsesWriter(nlohmann::json response);
  std::string begin() override;
  std::string delta(const nlohmann::json& chat_delta) override;
  std::string finish(const FinishInfo& f) override;
  std::string stream_error(const ApiError& e) override;
  nlohmann::json result() const override { return resp_; }
  bool finished() const { return finished_; }

  // Called once by finish() with the final response and the whole chat assistant message
  // (the store keeps both).
  std::function<void(const nlohmann::json& response, const nlohmann::json& message)> on_finish;

 private:
  enum class Kind { kNone, kReasoning, kMessage, kFunctionCall };
  std::string event(const std::string& type, nlohmann::json fields);
  std::string open(Kind k, nlohmann::json item);
  std::string close(const char* status = "completed");
  nlohmann::json& item() { return resp_["output"].back(); }
  std::string item_id(const char* prefix) const;

  nlohmann::json resp_;
  Kind open_ = Kind::kNone;
  int seq_ = 0;
  bool finished_ = false;
  nlohmann::json message_ = nlohmann::json{{"role", "assistant"}, {"content", ""}};  // chat form
};

}  // namespace nanovllm::server
