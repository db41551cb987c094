// Speculative decoding with a draft model (`--speculative draft --draft-model DIR`): a smaller
// model with the same vocabulary drafts greedily, the target verifies in its own step
// (spec/proposer.h). It lives in engine/ rather than spec/ because it owns a ModelRunner.
//
// State per target sequence: a mirror Sequence holding the tokens the draft has seen (the
// target's tokens, then its own drafts) and a block table into the draft's own KV cache.
// Rollback needs no signal from the engine: at each propose() the mirror is cut back to its
// longest common prefix with the target's tokens (rejected drafts fall off, accepted ones were
// already fed), num_cached_tokens with it; the rest is fed again. So the draft's KV is always
// the KV of exactly the tokens in the mirror's first num_cached_tokens.
//
// One propose() for B sequences: one forward that catches each mirror up to its target (a
// chunk per sequence, split across forwards at max_num_batched_tokens) and samples draft 1 from
// each, then K - 1 batched decode forwards. Drafts are the argmax (lowest id on ties): a
// point-mass proposer, so the engine's accept-iff-equal rule is exact rejection sampling.
//
// KV blocks: the draft's cache has as many blocks as the target's (engine: both come out of
// one budget). A mirror holds blocks for its size() + K - 1 tokens (draft K is never fed). When
// blocks run out, mirrors not drafting in this step are dropped, least recently used first; if
// that is not enough, the sequence gets no drafts this step (never an error: drafts are optional).
#pragma once
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/model_runner.h"
#include "engine/sequence.h"
#include "nanovllm/sampling_params.h"
#include "spec/proposer.h"

namespace nanovllm {

struct DraftProposerOptions {
  int block_size = 16;
  int max_num_batched_tokens = 2048;  // tokens per draft forward (catch-up chunks)
  int max_len = 0;                    // positions the draft may hold (its max_model_len)
};

class DraftModelProposer final : public Proposer {
 public:
  // `runner` is the draft model's own ModelRunner (one rank) with its KV cache allocated.
  DraftModelProposer(std::unique_ptr<ModelRunner> runner, const DraftProposerOptions& options);
  std::string_view name() const override { return "draft"; }
  void propose(std::span<const DraftRequest> requests) override;
  void release(uint64_t seq_id) override;

  // For tests and stats: draft forwards run, tokens fed to the draft, mirrors alive, free blocks.
  int64_t num_forwards() const { return num_forwards_; }
  int64_t num_fed_tokens() const { return num_fed_tokens_; }
  size_t num_mirrors() const { return mirrors_.size(); }
  int num_free_blocks() const { return int(free_blocks_.size()); }
  const ModelRunner& runner() const { return *runner_; }

 private:
  struct Mirror {
    std::unique_ptr<Sequence> seq;
    int64_t last_used = 0;  // propose() call that last drafted with it
  };
  // Cuts m back to its common prefix with `target`, then appends the rest of target's tokens.
  void sync(Sequence& m, const Sequence& target);
  // Gives m exactly `blocks` blocks (evicting other mirrors, least recently used first, when
  // the free list runs short). False (m unchanged) when they cannot be found.
  bool reserve(Mirror& m, int blocks, int64_t call);
  void drop_blocks(Sequence& m);
  // One forward of `so`; appends the argmax of each sampled row to its mirror and to `outs`.
  void forward(const SchedulerOutput& so, const std::vector<std::vector<int>*>& outs);

  std::unique_ptr<ModelRunner> runner_;
  DraftProposerOptions options_;
  SamplingParams params_;  // the mirrors' (never sampled: prepare() reads prompt_logprobs only)
  std::unordered_map<uint64_t, Mirror> mirrors_;
  std::vector<int> free_blocks_;
  int64_t calls_ = 0, num_forwards_ = 0, num_fed_tokens_ = 0;
};

}  // namespace nanovllm
