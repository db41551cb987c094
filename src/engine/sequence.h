// One request as the scheduler sees it: prompt + generated token ids, its KV block table and
// how many of its tokens already have KV in the cache. Mirrors nano-vLLM's Sequence. The
// engine's Request (request.h) owns it; the scheduler only points at it.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "nanovllm/sampling_params.h"

namespace nanovllm {

struct Completion;  // engine/request.h: the owner of an engine sequence

enum class SequenceStatus { WAITING, RUNNING, FINISHED };

// Why a sequence finished; kNone while it has not.
enum class FinishReason : uint8_t { kNone, kStop, kLength, kAbort, kError };
// The public name (RequestOutput::finish_reason): "", "stop", "length", "abort", "error".
const char* finish_reason_name(FinishReason reason);

struct Sequence {
  // An empty prompt is representable (last_token = -1) so that Scheduler::add can reject it
  // with a clear message instead of crashing here. `params` must outlive the sequence (it is
  // the owning request's; the sequence reads its stop conditions).
  Sequence(uint64_t seq_id, std::vector<int> prompt_ids, const SamplingParams& params,
           int block_size);

  uint64_t seq_id;
  SequenceStatus status = SequenceStatus::WAITING;
  std::vector<int> token_ids;  // prompt followed by generated tokens
  int last_token = -1;
  int num_prompt_tokens = 0;
  // Tokens whose KV is already in the cache: prefix-cache hits after allocate(), then advanced
  // by Scheduler::postprocess() by each step's num_new_tokens; deallocate() resets it to 0.
  int num_cached_tokens = 0;
  std::vector<int> block_table;  // logical block i -> physical KV block id
  const SamplingParams& params;
  int block_size;
  int num_prefix_hit_tokens = 0;  // prefix-cache hits at the (last) allocation, for stats
  FinishReason finish_reason = FinishReason::kNone;
  // True once every token but the last (sampled) one has KV: the sequence decodes next.
  // Set by Scheduler::postprocess when a chunk reaching the end samples; cleared on preemption.
  bool prefilled = false;
  Completion* owner = nullptr;  // the engine's completion holding this sequence (null in scheduler tests)

  // Speculative decoding (src/spec). Drafted tokens to verify after the last token in the next
  // decode step: set by the engine's proposer before schedule(), cut by schedule() to what it
  // scheduled (ScheduledSeq::num_spec_tokens), cleared by postprocess() and by preemption.
  // Never part of token_ids: only accepted tokens are.
  std::vector<int> spec_token_ids;
  int num_spec_accepted = 0;  // drafts the last verification accepted (set by postprocess)
  int num_step_tokens = 0;    // tokens the last postprocess appended (1 + accepted, or fewer at a stop)
  // The proposer's acceptance history (src/spec/spec_decoder.h: decayed counts of accepted
  // drafts and of verification trials).
  double spec_accepted = 0, spec_trials = 0;

  int size() const { return static_cast<int>(token_ids.size()); }
  int num_completion_tokens() const { return size() - num_prompt_tokens; }
  int num_cached_blocks() const { return num_cached_tokens / block_size; }
  int num_blocks() const { return (size() + block_size - 1) / block_size; }
  int last_block_num_tokens() const { return size() - (num_blocks() - 1) * block_size; }
  // Tokens of logical block i (the last one may be partial). Invalidated by append_token().
  std::span<const int> block(int i) const;
  void append_token(int id);
  std::span<const int> prompt_token_ids() const;
  std::span<const int> completion_token_ids() const;
  bool is_finished() const { return status == SequenceStatus::FINISHED; }
};

}  // namespace nanovllm
