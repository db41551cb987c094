// A thinking budget (SamplingParams::thinking_budget): at most N generated tokens inside the
// model's <think> ... </think>; once N are spent, the next token is forced to </think> (its mask
// allows that id alone) and the answer follows. Counted per completion over the whole output;
// a prompt whose last think marker is an open <think> (the template opened it) starts inside.
// Drafted tokens (speculative decoding) are walked through the same rule, so a verification row
// is forced exactly where plain decoding would be.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace nanovllm {

class Tokenizer;

// The model's think markers as single token ids (Qwen3: <think> 151667, </think> 151668).
struct ThinkTokens {
  int open = -1, close = -1;
  bool valid() const { return open >= 0 && close >= 0; }
  static ThinkTokens from(const Tokenizer* tok);
};

class ThinkingBudget {
 public:
  // `vocab_size`: the logits width (the mask has ceil(vocab_size / 32) words).
  ThinkingBudget(int budget, ThinkTokens t, std::span<const int> prompt_ids, int vocab_size);

  // After each generated token.
  void on_token(int token);
  // The next token's mask: empty (free) unless the budget is spent inside <think>.
  std::span<const uint32_t> allowed() const { return forced(thinking_, used_) ? close_mask_ : std::span<const uint32_t>(); }
  // The same for the token after `drafts` (the state itself unchanged).
  std::span<const uint32_t> allowed_after(std::span<const int> drafts) const;
  int used() const { return used_; }
  bool thinking() const { return thinking_; }

 private:
  bool forced(bool thinking, int used) const { return thinking && used >= budget_; }
  void advance(bool& thinking, int& used, int token) const;

  int budget_;
  ThinkTokens t_;
  bool thinking_ = false;
  int used_ = 0;  // tokens generated inside <think> so far (the markers not counted)
  std::vector<uint32_t> close_mask_;
};

}  // namespace nanovllm
