// Fuzz target for the chat-template interpreter (make fuzz: fuzz_jinja with libFuzzer; make asan:
// fuzz_smoke_jinja).
// Any input must either render or throw nanovllm::Error: no crash, hang or other exception.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "chat/chat_template.h"
#include "util/check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json ctx = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi <think>x</think>"},
                 {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "f", "arguments": {"a": 1}}}]},
                 {"role": "tool", "content": "r"}],
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"})");
  std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto t = nanovllm::ChatTemplate::compile(text);
    std::string out = t->render(ctx);
    (void)out;
  } catch (const nanovllm::Error&) {
  }
  return 0;
}
