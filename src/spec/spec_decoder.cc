#include "spec/spec_decoder.h"

#include <algorithm>
#include <cmath>

#include "engine/sequence.h"
#include "util/check.h"

namespace nanovllm {

SpecDecoder::SpecDecoder(const SpecOptions& options, std::unique_ptr<Proposer> proposer)
    : options_(options), proposer_(std::move(proposer)), beta_(options.beta) {
  NV_CHECK(proposer_ != nullptr);
  NV_CHECK_GE(options_.num_speculative_tokens, 1);
}

int SpecDecoder::choose_k(const Sequence& seq) const {
  const SpecOptions& o = options_;
  const double rate = (seq.spec_accepted + o.prior_rate * o.prior_weight) /
                      (seq.spec_trials + o.prior_weight);
  int best = 0;
  double best_gain = o.min_gain, expected = 1.0, term = 1.0;  // E(0) / cost(0) = 1
  for (int k = 1; k <= o.num_speculative_tokens; ++k) {
    term *= rate;
    expected += term;  // E(k) = 1 + a + ... + a^k
    const double gain = expected / (1.0 + beta_ * k);
    if (gain >= best_gain) {
      best_gain = gain;
      best = k;
    }
  }
  return best;
}

void SpecDecoder::propose(const std::deque<Sequence*>& running) {
  requests_.clear();
  int decoding = 0;
  for (Sequence* s : running) {
    s->spec_token_ids.clear();
    decoding += s->prefilled ? 1 : 0;
  }
  if (decoding == 0 || decoding > options_.max_batch) return;
  if (options_.fixed_k) {
    for (Sequence* s : running)
      if (s->prefilled) requests_.push_back(DraftRequest{s, options_.num_speculative_tokens, &s->spec_token_ids});
    if (!requests_.empty()) proposer_->propose(requests_);
    return;
  }
  // A plain step to time: the first decode step, then every refresh_every-th.
  // Plain steps to time: the first two decode steps (the first may pay first-touch costs, so
  // the smaller counts), then every refresh_every-th.
  if (decode_steps_ < 2 || decode_steps_ % options_.refresh_every == 0) return;
  // The idle decay slows down as drafts get dearer: a probe of one draft costs beta steps, so
  // at beta = 1 it comes ~10x less often than at 0.1 (~1 % of the decode time either way).
  const double idle_decay = std::pow(options_.idle_decay, 0.1 / std::max(beta_, 0.1));
  for (Sequence* s : running) {
    if (!s->prefilled) continue;
    const int k = choose_k(*s);
    if (k == 0) {
      s->spec_accepted *= idle_decay;
      s->spec_trials *= idle_decay;
      continue;
    }
    requests_.push_back(DraftRequest{s, k, &s->spec_token_ids});
  }
  if (!requests_.empty()) proposer_->propose(requests_);
}

void SpecDecoder::observe_step(int num_decode_seqs, int num_spec_tokens, bool has_prefill,
                               double seconds) {
  if (has_prefill || num_decode_seqs == 0 || !(seconds > 0)) return;
  ++decode_steps_;
  const double w = options_.time_weight;
  if (num_spec_tokens == 0) {
    if (plain_seconds_ == 0) plain_seconds_ = seconds;
    else if (decode_steps_ <= 2) plain_seconds_ = std::min(plain_seconds_, seconds);
    else plain_seconds_ = (1 - w) * plain_seconds_ + w * seconds;
    return;
  }
  if (plain_seconds_ == 0) return;
  // seconds = plain * (1 + beta * drafts per decoding sequence)
  const double sample = (seconds / plain_seconds_ - 1.0) * num_decode_seqs / num_spec_tokens;
  beta_ = (1 - w) * beta_ + w * std::clamp(sample, 0.0, 4.0);
}

void SpecDecoder::observe(Sequence& seq, int k) {
  if (k <= 0) return;
  const int a = seq.num_spec_accepted;
  // Geometric model: a accepted trials, plus the failed one unless all k were accepted.
  seq.spec_accepted = seq.spec_accepted * options_.decay + a;
  seq.spec_trials = seq.spec_trials * options_.decay + a + (a < k ? 1 : 0);
}

}  // namespace nanovllm
