// A request's prompt, as the engine takes it.
#pragma once
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace nanovllm {

// A prompt: text (tokenized, with special tokens per the tokenizer's post-processor) or ids.
struct Prompt {
  std::variant<std::string, std::vector<int>> value;
  // Text prompts: apply the tokenizer's post-processor (BOS etc.). False for prompts rendered
  // by a chat template, which already carry their special tokens (vLLM does the same).
  bool add_special_tokens = true;
  Prompt(std::string text) : value(std::move(text)) {}
  Prompt(const char* text) : value(std::string(text)) {}
  Prompt(std::vector<int> ids) : value(std::move(ids)) {}
};

}  // namespace nanovllm
