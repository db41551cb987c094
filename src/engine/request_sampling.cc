#include "engine/request_sampling.h"

#include <algorithm>

namespace nanovllm {

RequestSampling::RequestSampling(const SamplingParams& params, uint64_t seed,
                                 std::span<const int> prompt_ids, std::span<const int> eos_ids)
    : params_(params), seed_(seed) {
  track_history_ = params.presence_penalty != 0.f || params.frequency_penalty != 0.f ||
                   params.repetition_penalty != 1.f;
  if (params.min_tokens > 0) {
    suppress_.assign(eos_ids.begin(), eos_ids.end());
    suppress_.insert(suppress_.end(), params.stop_token_ids.begin(), params.stop_token_ids.end());
  }
  for (const auto& [token, bias] : params.logit_bias) bias_.push_back(TokenBias{token, bias});
  if (track_history_) {
    std::vector<int> ids(prompt_ids.begin(), prompt_ids.end());
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (int t : ids) history_.push_back(TokenCount{t, 0});
  }
}

static void count_token(std::vector<TokenCount>& history, int token) {
  auto it = std::lower_bound(history.begin(), history.end(), token,
                             [](const TokenCount& a, int t) { return a.token < t; });
  if (it == history.end() || it->token != token) it = history.insert(it, TokenCount{token, 0});
  it->count++;
}

void RequestSampling::on_token(int token) {
  if (track_history_) count_token(history_, token);
}

SamplingRow RequestSampling::row_after(int num_generated, std::span<const int> drafts,
                                       std::vector<TokenCount>& history) const {
  SamplingRow r = row(num_generated + int(drafts.size()));
  if (track_history_ && !drafts.empty()) {
    history = history_;
    for (int t : drafts) count_token(history, t);
    r.history = history;
  }
  return r;
}

SamplingRow RequestSampling::row(int num_generated) const {
  SamplingRow r;
  r.temperature = params_.temperature;
  r.top_k = params_.top_k;
  r.top_p = params_.top_p;
  r.min_p = params_.min_p;
  r.seed = seed_;
  r.step = uint64_t(num_generated);
  r.num_logprobs = params_.logprobs;
  r.penalties = Penalties{params_.presence_penalty, params_.frequency_penalty,
                          params_.repetition_penalty};
  r.history = history_;
  r.logit_bias = bias_;
  if (num_generated < params_.min_tokens) r.suppress = suppress_;
  return r;
}

}  // namespace nanovllm
