// Anthropic Messages output: the whole message ({"type": "message", "content": [blocks],
// "stop_reason", "stop_sequence", "usage"}) and its stream, in Anthropic's order:
//   message_start, then per block content_block_start, content_block_delta*, content_block_stop,
//   then message_delta (stop_reason, stop_sequence, usage.output_tokens), message_stop.
// Blocks: reasoning -> {"type": "thinking"}, text -> {"type": "text"}, tool calls ->
// {"type": "tool_use", "id": "toolu_...", "name", "input"} (input streamed as input_json_delta).
// Stop reasons: end_turn, max_tokens, stop_sequence (with the string), tool_use.
#pragma once
#include <string>

#include "server/api_writer.h"

namespace nanovllm::server {

class AnthropicWriter : public ApiWriter {
 public:
  AnthropicWriter(std::string id, std::string model, int prompt_tokens);
  std::string begin() override;
  std::string delta(const nlohmann::json& chat_delta) override;
  std::string finish(const FinishInfo& f) override;
  std::string stream_error(const ApiError& e) override;
  nlohmann::json result() const override { return msg_; }

  // Anthropic's stop_reason for a chat finish.
  static std::string stop_reason(const FinishInfo& f);

 private:
  enum class Kind { kNone, kThinking, kText, kToolUse };
  std::string open(Kind k, nlohmann::json block);
  std::string close();

  nlohmann::json msg_;
  Kind open_ = Kind::kNone;
  std::string tool_args_;  // the open tool_use block's arguments so far
};

}  // namespace nanovllm::server
