// ModelRunner: owns the backend, the model, the KV cache and the step executor. Turns the
// scheduler's output into the step's batch metadata (HostBatch: input_ids, positions,
// cu_seqlens_q, context_lens, slot_mapping, block_tables, logits_indices), runs the
// hidden-state forward through the executor (eager, or CUDA-graph replay for decode steps),
// then the LM head, and returns the logits on the backend's device.
#pragma once
#include <memory>

#include "engine/scheduler.h"
#include "kernels/backend.h"
#include "kernels/eager_executor.h"
#include "models/decoder.h"
#include "nanovllm/config.h"

namespace nanovllm {

class ModelRunner {
 public:
  // Loads weights, sizes the KV cache (config.num_kvcache_blocks == -1: from the budget), then
  // makes the step executor (CUDA without enforce_eager: captures the decode graphs now).
  ModelRunner(const Config& config, const ModelConfig& model_config);
  ~ModelRunner();
  int num_kvcache_blocks() const { return kv_.num_blocks; }
  Backend& backend() { return *backend_; }
  const DecoderModel& model() const { return *model_; }
  const StepExecutor& executor() const { return *executor_; }

  // Builds the step's metadata. Logits rows follow the order of seqs with sample == true.
  HostBatch prepare(const SchedulerOutput& out) const;
  // Forward for a prepared batch; logits [S, V] F32 on the backend's device (on CUDA the
  // forward is only enqueued: the caller overlaps host work until Backend::sample).
  Tensor run(const HostBatch& batch);

  // CPU KV budget in bytes for `config` (explicit bytes, else a fraction of available RAM).
  static int64_t cpu_kv_budget(const Config& config);

 private:
  void warmup();
  Config config_;
  ModelConfig mc_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<DecoderModel> model_;
  KVCache kv_;
  std::unique_ptr<StepExecutor> executor_;  // last: destroyed first (graphs reference kv_)
};

}  // namespace nanovllm
