// A request's sampling inputs that live across steps, turned into the sampling op's row
// (kernels/sampling.h) each step: the min_tokens suppression ids, logit_bias, and the penalty
// history (every prompt and generated token once, sorted by id, with its generated count) kept
// up to date token by token, so building a row costs no pass over the sequence.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/sampling.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm {

class RequestSampling {
 public:
  // params must outlive this object (the engine's Request owns both).
  RequestSampling(const SamplingParams& params, uint64_t seed, std::span<const int> prompt_ids,
                  std::span<const int> eos_ids);
  // After each generated token.
  void on_token(int token);
  // The row for the step that samples generated token number `num_generated` (0-based); its
  // spans view this object, valid until the next on_token().
  SamplingRow row(int num_generated) const;
  // Speculative decoding: the row for the token after `drafts` (as if they had been generated:
  // num_generated + drafts.size() tokens, the penalty history counting them). The history is
  // built in `history` (only when a penalty is on), which the row's span views.
  SamplingRow row_after(int num_generated, std::span<const int> drafts,
                        std::vector<TokenCount>& history) const;
  uint64_t seed() const { return seed_; }

 private:

  const SamplingParams& params_;
  uint64_t seed_;
  bool track_history_;
  std::vector<int32_t> suppress_;  // EOS ids + stop_token_ids
  std::vector<TokenBias> bias_;
  std::vector<TokenCount> history_;  // ascending token ids (only when a penalty is on)
};

}  // namespace nanovllm
