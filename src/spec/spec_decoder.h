// The engine's speculative-decoding controller: before each schedule() it asks the proposer
// for drafts for the running sequences that decode next, choosing how many per sequence
// (adaptive K); after postprocess() it learns from what the verification accepted.
//
// Adaptive K: a sequence's acceptance rate a (per drafted token, a geometric model: draft i is
// verified only if drafts 0..i-1 were accepted) is estimated from decayed counts of its own
// verifications, starting from a prior. A step with k drafts is expected to produce
// E(k) = (1 - a^(k+1)) / (1 - a) tokens at a cost of 1 + beta * k decode steps; k = argmax
// E(k) / cost(k) over 0..K, and 0 unless that ratio reaches min_gain. At 0 the sequence does not
// speculate, and its counts decay slowly back toward the prior, so it probes again (one short
// verification) now and then in case its text turned repetitive; the decay is slower the more
// a draft costs, so the probes cost ~1 % of the decode time whatever beta is.
//
// beta, the extra cost of one verified draft row relative to a decode step, is measured, not
// assumed: it depends on the model and the machine (a 0.6B model streaming its weights at
// batch 1: ~0.1; stories260K, whose step is all per-row attention work: ~1). observe_step()
// keeps an average time of decode steps without drafts and turns each decode step with drafts
// into a beta sample; every refresh_every-th decode step drafts nothing so the plain time stays
// current (the context grows, the batch changes). The first two decode steps run plain. Above max_batch decoding sequences no one speculates.
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
  double beta = 0.1;               // initial cost of one verified draft row, in decode steps
  double time_weight = 0.25;       // EMA weight of a new step time / beta sample
  int refresh_every = 16;          // a plain decode step this often, to time it
  bool fixed_k = false;            // K drafts whenever the proposer has them (no adaptation)
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
  // After each step: its wall time, how many sequences decoded in it and how many drafts it
  // verified; steps with prefill tokens are not decode steps and are ignored.
  void observe_step(int num_decode_seqs, int num_spec_tokens, bool has_prefill, double seconds);
  // The sequence finished: the proposer drops what it kept for it.
  void release(uint64_t seq_id) { proposer_->release(seq_id); }
  double beta() const { return beta_; }
  // How many drafts a sequence with this history should get (0..K).
  int choose_k(const Sequence& seq) const;
  const Proposer& proposer() const { return *proposer_; }
  const SpecOptions& options() const { return options_; }

 private:
  SpecOptions options_;
  std::unique_ptr<Proposer> proposer_;
  std::vector<DraftRequest> requests_;  // scratch
  double beta_;
  double plain_seconds_ = 0;  // EMA of decode steps without drafts (0: none yet)
  int64_t decode_steps_ = 0;
};

}  // namespace nanovllm
