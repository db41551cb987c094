// Prompt lookup (n-gram) drafting: find the most recent earlier occurrence of the sequence's
// last n tokens (n from ngram_max down to ngram_min, the first n that matches wins) in its own
// tokens (prompt and output), and draft the tokens that followed it. When the continuation
// runs into the end of the sequence it repeats itself (a loop of period p drafts p-periodic
// tokens). No model, no state: O(len * (ngram_max - ngram_min + 1)) compares per sequence and
// step at worst, usually a few hundred.
#pragma once
#include "spec/proposer.h"

namespace nanovllm {

class NgramProposer : public Proposer {
 public:
  NgramProposer(int ngram_min, int ngram_max);
  std::string_view name() const override { return "ngram"; }
  void propose(std::span<const DraftRequest> requests) override;
  // The drafts for `tokens` (at most max_tokens), into out (cleared first).
  void propose_one(std::span<const int> tokens, int max_tokens, std::vector<int>& out) const;

 private:
  int ngram_min_, ngram_max_;
};

}  // namespace nanovllm
