#include "spec/spec_decoder.h"

#include <cmath>

#include "engine/sequence.h"
#include "util/check.h"

namespace nanovllm {

SpecDecoder::SpecDecoder(const SpecOptions& options, std::unique_ptr<Proposer> proposer)
    : options_(options), proposer_(std::move(proposer)) {
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
    const double gain = expected / (1.0 + o.beta * k);
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
  for (Sequence* s : running) {
    if (!s->prefilled) continue;
    const int k = choose_k(*s);
    if (k == 0) {
      s->spec_accepted *= options_.idle_decay;
      s->spec_trials *= options_.idle_decay;
      continue;
    }
    requests_.push_back(DraftRequest{s, k, &s->spec_token_ids});
  }
  if (!requests_.empty()) proposer_->propose(requests_);
}

void SpecDecoder::observe(Sequence& seq, int k) {
  if (k <= 0) return;
  const int a = seq.num_spec_accepted;
  // Geometric model: a accepted trials, plus the failed one unless all k were accepted.
  seq.spec_accepted = seq.spec_accepted * options_.decay + a;
  seq.spec_trials = seq.spec_trials * options_.decay + a + (a < k ? 1 : 0);
}

}  // namespace nanovllm
