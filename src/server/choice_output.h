// One choice of a chat completion, from generated text to OpenAI message / delta fields:
// Qwen3-style <think>...</think> becomes `reasoning_content` (vLLM's field), and with tools the
// model's tool-call text (Hermes <tool_call>{...}</tool_call> or Llama-3 JSON) becomes
// `tool_calls` with ids. Streaming and whole responses share this path: the whole message is
// the accumulation of the stream's deltas, so both agree for every split of the text.
// Completions (no chat) pass text through unchanged.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "chat/reasoning_parser.h"
#include "chat/tool_parser.h"

namespace nanovllm::server {

struct ChoiceOptions {
  bool reasoning = false;  // split <think> into reasoning_content
  bool prompt_opened = false;  // the prompt ends inside <think> (DeepSeek-R1-style templates)
  bool tools = false;      // parse tool calls
  chat::ToolCallFormat format = chat::ToolCallFormat::kHermes;
  std::string call_id_prefix = "call_";  // per response: ids are prefix + call index
};

// OpenAI JSON of a parsed call: {"id", "type": "function", "function": {"name", "arguments"}} for
// a message, and {"index", ["id", "type",] "function": {["name",] "arguments"}} for a stream delta.
nlohmann::json to_openai(const chat::ToolCall& c);
nlohmann::json to_openai(const chat::ToolCallDelta& d);

class ChoiceOutput {
 public:
  explicit ChoiceOutput(const ChoiceOptions& opt);
  // Chat delta objects ({"reasoning_content"}, {"content"}, {"tool_calls": [...]}) for new text;
  // finish() releases what the parsers held back.
  std::vector<nlohmann::json> push(const std::string& text);
  std::vector<nlohmann::json> finish();
  // The engine's finish reason, "tool_calls" when the output made calls and stopped by itself.
  std::string finish_reason(const std::string& engine_reason) const;
  // The whole assistant message (after finish()): content (null when only calls), optional
  // reasoning_content and tool_calls.
  nlohmann::json message() const;

 private:
  std::vector<nlohmann::json> reasoning_deltas(const std::string& r);
  std::vector<nlohmann::json> content_deltas(const std::string& c);
  std::vector<nlohmann::json> tool_deltas(const chat::ToolStreamDelta& td);

  ChoiceOptions opt_;
  std::unique_ptr<chat::ReasoningStreamParser> reasoning_;
  std::unique_ptr<chat::ToolCallStreamParser> tools_;
  std::string reasoning_text_;
  chat::ParsedToolCalls parsed_;  // content + calls accumulated
};

}  // namespace nanovllm::server
