// The engine's speculative-decoding controller: before each schedule() it asks the proposer
// for drafts for the running sequences that decode next, choosing how many per sequence
// (adaptive K); after postprocess() it learns from what the verification accepted.
//
// Adaptive K: a sequence's acceptance rate a (per drafted token, a geometric model: draft i is
// verified only if drafts 0..i-1 were accepted) is estimated from decayed counts of its own
// verifications, starting from a prior. A step with k drafts is expected to produce
// E(k) = (1 - a^(k+1)) / (1 - a) tokens at a cost of 1 + beta * k decode steps (beta: the
// extra cost of one verified row, docs/perf.md); k = argmax E(k) / cost(k) over 0..K, and 0
// unless that ratio reaches min_gain. At 0 the sequence does not speculate, and its counts
// decay slowly back toward the prior, so it probes again (one short verification) every few
// steps in case its text turned repetitive: with every draft rejected, about one step in eight
// verifies one draft (~1 % of a decode step's cost at beta = 0.1). Above max_batch decoding sequences no one speculates.
#pragma once
#include <deque>
#include <memory>
#include <vector>

#include "spec/proposer.h"

namespace nanovllm {

struct Sequence;

struct SpecOptions {
  int num_speculative_tokens = 4;  // K
  int max_batch = 4;               // speculate only while at most this many sequences decode
  double beta = 0.1;               // cost of one verified draft row, in decode steps
  double prior_rate = 0.6;         // acceptance prior and its weight in trials
  double prior_weight = 2.0;
  double decay = 0.9;              // per verification (history of ~10 steps)
  double idle_decay = 0.99;        // per step without drafts chosen (back to the prior)
  double min_gain = 1.05;          // speculate only when E(k) / cost(k) is at least this
};

class SpecDecoder {
 public:
  SpecDecoder(const SpecOptions& options, std::unique_ptr<Proposer> proposer);
  // Sets spec_token_ids of every running sequence that decodes next (prefilled), or clears it.
  void propose(const std::deque<Sequence*>& running);
  // After postprocess: seq verified k drafts and accepted seq.num_spec_accepted of them.
  void observe(Sequence& seq, int k);
  // How many drafts a sequence with this history should get (0..K).
  int choose_k(const Sequence& seq) const;
  const Proposer& proposer() const { return *proposer_; }
  const SpecOptions& options() const { return options_; }

 private:
  SpecOptions options_;
  std::unique_ptr<Proposer> proposer_;
  std::vector<DraftRequest> requests_;  // scratch
};

}  // namespace nanovllm
