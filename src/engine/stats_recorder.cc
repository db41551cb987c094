#include "engine/stats_recorder.h"

#include <algorithm>

namespace nanovllm {

StatsRecorder::StatsRecorder(int num_blocks_total, int num_threads, const StepExecutor& executor)
    : executor_(executor) {
  stats_.num_blocks_total = num_blocks_total;
  stats_.num_threads = num_threads;
  stats_.executor = executor.name();
  stats_.graph_pool_bytes = executor.graph_pool_bytes();
}

void StatsRecorder::admitted(const Sequence& seq) {
  stats_.prefix_cache_hit_tokens += seq.num_prefix_hit_tokens;
  stats_.prefix_cache_query_tokens += seq.size();
  if (seq.num_completion_tokens() == 0) stats_.prompt_tokens += seq.num_prompt_tokens;
}

void StatsRecorder::finished(FinishReason reason) {
  if (reason == FinishReason::kAbort) stats_.aborted_requests++;
  else if (reason == FinishReason::kError) stats_.failed_requests++;
  else stats_.finished_requests++;
}

void StatsRecorder::step(const SchedulerOutput& so, double seconds, const Scheduler& scheduler) {
  last_step_ = StepStats{};
  int accepted = 0, verifications = 0, extra_tokens = 0;
  for (const ScheduledSeq& ss : so.seqs) {
    if (ss.num_spec_tokens == 0) continue;
    accepted += ss.seq->num_spec_accepted;
    extra_tokens += std::max(0, ss.seq->num_step_tokens - 1);  // beyond the decode token
    ++verifications;
  }
  last_step_.num_spec_tokens = so.num_spec_tokens;
  last_step_.num_accepted_tokens = accepted;
  stats_.spec_draft_tokens += so.num_spec_tokens;
  stats_.spec_accepted_tokens += accepted;
  stats_.spec_verifications += verifications;
  stats_.decode_tokens += extra_tokens;
  last_step_.num_seqs = int(so.seqs.size());
  last_step_.num_prefill_tokens = so.num_prefill_tokens;
  last_step_.num_decode_tokens = so.num_decode_tokens;
  last_step_.num_preempted = so.num_preempted;
  last_step_.seconds = seconds;
  stats_.steps++;
  stats_.prefill_tokens += so.num_prefill_tokens;
  stats_.decode_tokens += so.num_decode_tokens;
  stats_.preemptions += so.num_preempted;
  stats_.max_batch_size = std::max(stats_.max_batch_size, int(so.seqs.size()));
  if (so.num_prefill_tokens > 0) stats_.prefill_seconds += seconds;
  else stats_.decode_seconds += seconds;
  refresh(scheduler);
  last_step_.num_blocks_used = stats_.num_blocks_used;
}

void StatsRecorder::refresh(const Scheduler& scheduler) {
  stats_.num_blocks_used = scheduler.block_manager().num_used_blocks();
  stats_.peak_blocks_used = std::max(stats_.peak_blocks_used, stats_.num_blocks_used);
  stats_.num_running = int(scheduler.num_running());
  stats_.num_waiting = int(scheduler.num_waiting());
  stats_.graph_steps = executor_.graph_steps();
}

}  // namespace nanovllm
