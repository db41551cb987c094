// Splits a reasoning model's output into reasoning_content and content (vLLM's field names),
// for Qwen3-style <think>...</think> (and DeepSeek-R1-style templates that open <think> in the
// prompt). Streaming and one-shot parsing give the same result: parse_reasoning(text) is one
// push(text) + finish(), and the parser's decisions do not depend on how the text is split.
//
// Rules:
//  - The output may start (after whitespace) with the start tag; then, or when the prompt
//    already opened it (prompt_opened), the text up to the end tag is reasoning.
//  - Otherwise the output is all content (thinking disabled: Qwen3's template then puts an empty
//    <think></think> in the prompt).
//  - Newlines right after the start tag and right before the end tag are dropped from the
//    reasoning, and newlines right after the end tag from the content (Qwen3 writes
//    "<think>\nR\n</think>\n\nC"; its chat template strips them the same way).
//  - No end tag before the end: everything after the start is reasoning (e.g. max_tokens hit).
#pragma once
#include <string>
#include <string_view>

namespace nanovllm::chat {

struct ReasoningOptions {
  bool prompt_opened = false;  // the prompt ends inside an open start tag
  std::string start_tag = "<think>";
  std::string end_tag = "</think>";
};

struct ReasoningDelta {
  std::string reasoning, content;
};

class ReasoningStreamParser {
 public:
  explicit ReasoningStreamParser(ReasoningOptions opt = {});
  // New text of the output (any split, even inside a tag or a UTF-8 character).
  ReasoningDelta push(std::string_view text);
  // End of the output: releases what was held back.
  ReasoningDelta finish();
  bool in_reasoning() const { return mode_ == Mode::kStart ? opt_.prompt_opened : mode_ == Mode::kReasoning; }

 private:
  enum class Mode { kStart, kReasoning, kContent };
  ReasoningDelta drain(bool final);
  void emit_reasoning(std::string_view s, ReasoningDelta& out);

  ReasoningOptions opt_;
  Mode mode_ = Mode::kStart;
  std::string buf_;            // text not yet attributed
  bool strip_newlines_ = false;  // at the start of reasoning / after the end tag
  size_t held_newlines_ = 0;   // trailing reasoning newlines, emitted only if text follows
};

ReasoningDelta parse_reasoning(std::string_view text, const ReasoningOptions& opt = {});

}  // namespace nanovllm::chat
