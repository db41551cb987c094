// The engine's statistics (nanovllm/stats.h): the counters each admission, step and finish adds,
// and the gauges (blocks in use, queue lengths, graph replays) read after every step.
#pragma once
#include "engine/scheduler.h"
#include "kernels/step_executor.h"
#include "nanovllm/stats.h"

namespace nanovllm {

class StatsRecorder {
 public:
  // executor must outlive the recorder (the engine's ModelRunner owns it).
  StatsRecorder(int num_blocks_total, int num_threads, const StepExecutor& executor);

  // A sequence the scheduler admitted (SchedulerOutput::admitted): its prefix-cache hits and
  // lookups; its prompt tokens when it has generated nothing yet.
  void admitted(const Sequence& seq);
  // A request that finished: kAbort counts as aborted, kError as failed, the rest as finished.
  void finished(FinishReason reason);
  // After a step that ran `so` in `seconds`: the step counters and last_step().
  void step(const SchedulerOutput& so, double seconds, const Scheduler& scheduler);
  // The gauges (blocks, queues, graph steps) from the scheduler and the executor.
  void refresh(const Scheduler& scheduler);

  const EngineStats& stats() const { return stats_; }
  const StepStats& last_step() const { return last_step_; }

 private:
  const StepExecutor& executor_;
  EngineStats stats_;
  StepStats last_step_;
};

}  // namespace nanovllm
