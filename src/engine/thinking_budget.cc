#include "engine/thinking_budget.h"

#include "tokenizer/tokenizer.h"

namespace nanovllm {

ThinkTokens ThinkTokens::from(const Tokenizer* tok) {
  ThinkTokens t;
  if (!tok) return t;
  if (auto id = tok->token_to_id("<think>")) t.open = *id;
  if (auto id = tok->token_to_id("</think>")) t.close = *id;
  return t;
}

ThinkingBudget::ThinkingBudget(int budget, ThinkTokens t, std::span<const int> prompt_ids, int vocab_size)
    : budget_(budget), t_(t), close_mask_(size_t((vocab_size + 31) / 32), 0u) {
  close_mask_[size_t(t.close) / 32] |= 1u << (t.close % 32);
  // Inside a think block when the prompt's last marker opens one.
  for (auto it = prompt_ids.rbegin(); it != prompt_ids.rend(); ++it) {
    if (*it == t.close) break;
    if (*it == t.open) {
      thinking_ = true;
      break;
    }
  }
}

void ThinkingBudget::advance(bool& thinking, int& used, int token) const {
  if (token == t_.open) thinking = true;
  else if (token == t_.close) thinking = false;
  else if (thinking) ++used;
}

void ThinkingBudget::on_token(int token) { advance(thinking_, used_, token); }

std::span<const uint32_t> ThinkingBudget::allowed_after(std::span<const int> drafts) const {
  bool thinking = thinking_;
  int used = used_;
  for (int d : drafts) advance(thinking, used, d);
  return forced(thinking, used) ? close_mask_ : std::span<const uint32_t>();
}

}  // namespace nanovllm
