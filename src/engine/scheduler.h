// Continuous-batching scheduler (nano-vLLM's Scheduler) with two policies:
//  - "prefill-first": the seeds' behaviour: a step is either a prefill batch of waiting
//    sequences or a decode step of all running ones (preempting the youngest when the KV
//    cache is full).
//  - "mixed" (vLLM-v1 style): every step decodes one token for each prefilled running
//    sequence, then fills the remaining token budget with prefill chunks (partly prefilled
//    running sequences first, then newly admitted waiting ones).
// See README.md for the invariants.
#pragma once
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/block_manager.h"
#include "engine/sequence.h"

namespace nanovllm {

enum class SchedulePolicy : uint8_t { kPrefillFirst, kMixed };
// "prefill-first" | "mixed" (Config::policy); throws nanovllm::Error naming the value otherwise.
SchedulePolicy parse_schedule_policy(const std::string& name);

struct SchedulerConfig {
  int max_num_seqs = 512;
  int max_num_batched_tokens = 16384;
  int num_kvcache_blocks = 0;
  int block_size = 256;
  int max_model_len = 4096;
  SchedulePolicy policy = SchedulePolicy::kPrefillFirst;
  bool enable_prefix_caching = true;
  // Config::scheduling_policy "priority": waiting ordered by (params.priority, seq_id);
  // preemption victims chosen by the highest (params.priority, seq_id).
  bool priority = false;
};

// Whether a sequence that just got `token` appended (the `sample_row`-th sampled row of the step)
// finishes, and why (kNone: it goes on). The engine's is StopChecker (engine/stop_checker.h), the
// one place that decides finishes; scheduler tests use its token rules alone.
using StopCheck = std::function<FinishReason(Sequence& seq, int token, size_t sample_row)>;

// This step computes KV/logits for tokens [seq->num_cached_tokens,
// seq->num_cached_tokens + num_new_tokens); sample == the chunk reaches the end of
// seq->token_ids, so the step produces one new token for it.
//
// Speculative decoding: a decoding sequence may also verify num_spec_tokens drafted tokens
// (seq->spec_token_ids, not yet in token_ids): num_new_tokens = 1 + num_spec_tokens, and every
// one of those rows is sampled (row i samples the token after draft i - 1).
struct ScheduledSeq {
  Sequence* seq = nullptr;
  int num_new_tokens = 0;
  bool sample = false;
  int num_spec_tokens = 0;
  int num_sample_rows() const { return sample ? 1 + num_spec_tokens : 0; }
};

struct SchedulerOutput {
  std::vector<ScheduledSeq> seqs;
  // Sequences moved from waiting to running in this step (new, or back after a preemption),
  // in admission order; each is also in `seqs`.
  std::vector<Sequence*> admitted;
  bool is_prefill = false;  // any prefill tokens in the step
  int num_prefill_tokens = 0;
  int num_decode_tokens = 0;
  int num_preempted = 0;
  int num_spec_tokens = 0;  // drafted tokens verified in this step (part of no other count)
  bool empty() const { return seqs.empty(); }
};

class Scheduler {
 public:
  explicit Scheduler(const SchedulerConfig& config);

  // Enqueues `seq` (not owned: the caller keeps it alive until it finished, and does not
  // destroy it between a schedule() and that step's postprocess()). Throws nanovllm::Error
  // (and does not enqueue) when the request can never run: empty prompt, prompt longer than
  // max_model_len, prompt needing more blocks than the whole cache, or (prefill-first) more
  // tokens than max_num_batched_tokens.
  void add(Sequence* seq);
  SchedulerOutput schedule();
  // tokens: one per sampled row (ScheduledSeq::num_sample_rows()), in order. Appends each
  // sequence's token, asks `stop` whether it finishes, and returns the sequences that finished
  // in this call (FINISHED, blocks freed, no longer referenced by the scheduler). Sequences
  // finished in between (finish()) are skipped; their tokens are consumed.
  // A speculating sequence takes its rows' tokens in order while each equals the draft before
  // it (the draft is accepted: its KV is valid) and stops after the first that differs (or the
  // last row): 1 + accepted tokens, each through `stop`. Its blocks past the accepted tokens
  // are freed (BlockManager::trim); seq->num_spec_accepted says how many drafts were accepted.
  std::vector<Sequence*> postprocess(const SchedulerOutput& out, const std::vector<int>& tokens,
                                     const StopCheck& stop);
  // Finishes a waiting or running sequence now (abort, stop string): frees its blocks and
  // forgets it. Returns it, or null if the id is unknown.
  Sequence* finish(uint64_t seq_id, FinishReason reason);

  bool is_finished() const { return waiting_.empty() && running_.empty(); }
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  const std::deque<Sequence*>& waiting() const { return waiting_; }
  const std::deque<Sequence*>& running() const { return running_; }
  BlockManager& block_manager() { return block_manager_; }
  const BlockManager& block_manager() const { return block_manager_; }
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }
  // A sequence finishes ("length") once it has this many tokens: min(max_model_len, one more
  // than the whole cache holds, since the newest token needs no KV yet).
  int max_seq_len() const { return max_seq_len_; }

 private:
  SchedulerOutput schedule_prefill_first();
  SchedulerOutput schedule_mixed();
  void preempt(Sequence* seq, SchedulerOutput& out);
  // Puts `seq` into waiting_: FCFS appends a new one (front: a preempted one), priority inserts
  // it by (priority, seq_id).
  void enqueue_waiting(Sequence* seq, bool preempted);
  // The preemption victim among running_[from, end) and `self`: FCFS the tail of running_ (self
  // when none is left), priority the highest (priority, seq_id). Removes a running_ victim.
  Sequence* take_victim(size_t from, Sequence* self);
  // Priority: running_ by (priority, seq_id) before a decode pass (a no-op under FCFS).
  void sort_running_by_priority();
  // Extends the decode entries out.seqs[0, num_decode) by the drafts their sequences carry, as
  // far as free blocks (never preempting for a draft), the budget, max_tokens and
  // max_seq_len allow.
  void schedule_drafts(SchedulerOutput& out, size_t num_decode, int& budget);
  void take(Sequence* seq, FinishReason reason);

  SchedulerConfig config_;
  bool mixed_;
  int max_seq_len_;
  BlockManager block_manager_;
  std::deque<Sequence*> waiting_;
  std::deque<Sequence*> running_;
  std::unordered_map<uint64_t, Sequence*> live_;  // waiting or running, by id (not owned)
  int64_t num_preemptions_ = 0;
};

}  // namespace nanovllm
