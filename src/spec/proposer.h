// The seam every speculative-decoding proposer plugs into. A proposer drafts tokens for
// sequences that decode next; the engine's target model verifies them in its own step
// (engine/scheduler.h: ScheduledSeq::num_spec_tokens), so a proposer never touches the target's
// KV cache, its blocks, sampling or stop conditions: a wrong draft costs compute, never output.
//
// Proposers today: NgramProposer (prompt lookup). A draft model, EAGLE or MTP head implements
// the same interface; what each needs beyond it is in README.md.
#pragma once
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace nanovllm {

struct Sequence;

// One sequence to draft for: at most max_tokens drafts, written to *out (cleared first).
struct DraftRequest {
  const Sequence* seq = nullptr;
  int max_tokens = 0;  // >= 1
  std::vector<int>* out = nullptr;
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  virtual std::string_view name() const = 0;
  // Drafts for every request of the step at once (a model-based proposer runs them as one
  // batch). Fewer drafts than max_tokens (none included) are fine.
  virtual void propose(std::span<const DraftRequest> requests) = 0;
  // The sequence finished or was preempted: drop any state kept for it (a draft model's KV).
  virtual void release(uint64_t /*seq_id*/) {}
};

}  // namespace nanovllm
