// ModelRunner: owns the backend, the model, the KV cache and the step executor. Turns the
// scheduler's output into the step's batch metadata (HostBatch: input_ids, positions,
// cu_seqlens_q, context_lens, slot_mapping, block_tables, logits_indices), runs the
// hidden-state forward through the executor (eager, or CUDA-graph replay for decode steps),
// then the LM head, and returns the logits on the backend's device.
//
// Tensor parallel: every rank has a ModelRunner with its shard of the model and of the KV cache.
// Rank 0's (the engine's) forms the group (parallel/process_group.h), sends the config, and before
// each step broadcasts the HostBatch (engine/step_channel.h); ranks 1..N-1 run the same step
// from it (serve_step, engine/tp_worker.h). Only rank 0 prepares batches and gets logits.
#pragma once
#include <memory>

#include "engine/resolved_config.h"
#include "parallel/communicator.h"
#include "parallel/process_group.h"
#include "engine/scheduler.h"
#include "engine/step_channel.h"
#include "kernels/backend.h"
#include "kernels/eager_executor.h"
#include "models/decoder.h"
#include "nanovllm/config.h"

namespace nanovllm {

class ModelRunner {
 public:
  // Loads weights, sizes the KV cache (num_kvcache_blocks == -1: from the budget), then makes
  // the step executor (CUDA without enforce_eager: captures the decode graphs now).
  // Rank 0. tensor_parallel_size > 1: forms the group first (starting ranks 1..N-1 here, or
  // waiting for them at dist_init_addr) and sends them `config.spec`.
  ModelRunner(const ResolvedConfig& config, const ModelConfig& model_config);
  // Rank r > 0 of a formed group, with the config rank 0 sent, resolved here
  // (engine/tp_worker.cc).
  ModelRunner(const ResolvedConfig& config, const ModelConfig& model_config,
              std::unique_ptr<ProcessGroup> group);
  // Rank 0: tells the workers to exit and waits for them (kills them after a grace period).
  ~ModelRunner();
  int rank() const { return comm_->rank(); }
  int world_size() const { return comm_->world_size(); }
  Communicator& communicator() { return *comm_; }
  ProcessGroup* process_group() { return group_.get(); }
  int num_kvcache_blocks() const { return kv_.num_blocks; }
  Backend& backend() { return *backend_; }
  const DecoderModel& model() const { return *model_; }
  const StepExecutor& executor() const { return *executor_; }

  // Which rows of the step's tokens the forward returns (HostBatch::logits_indices), in seqs
  // order: kSample the sampled rows; the pooling rules (embedding models) every row of each
  // chunk (kMean), the row of position 0 (kCls), or the prompt's last row (kLast).
  enum class Rows { kSample, kLast, kMean, kCls };
  // Builds the step's metadata.
  HostBatch prepare(const SchedulerOutput& out, Rows rows = Rows::kSample) const;
  // The rows each scheduled sequence contributes under `rows` (prepare's rule).
  static int num_rows(const ScheduledSeq& s, Rows rows);
  // prompt_logprobs: the prompt positions [first, first + count) of this chunk whose logits
  // score the next prompt token (position P - 1, the prompt's last, is the sampled row).
  // prepare() appends their rows after every sampled row (HostBatch::num_extra_rows).
  struct PromptRows {
    int first = 0, count = 0;
  };
  static PromptRows prompt_rows(const ScheduledSeq& s);
  // Per row of `hidden` (prompt rows from run()): the logprob of targets[i], its rank and the
  // top-n alternatives, computed in slices of rows so that [rows, V] logits never pile up.
  std::vector<TokenLogprobs> prompt_logprobs(const Tensor& hidden, const std::vector<int>& targets, int top_n);
  // Forward for a prepared batch; logits [S, V] F32 on the backend's device (on CUDA the
  // forward is only enqueued: the caller overlaps host work until Backend::sample). Rank 0
  // with TP: broadcasts the batch to the other ranks first.
  Tensor run(const HostBatch& batch, Tensor* prompt_hidden = nullptr);
  // Embedding models (one rank): the final normed hidden states [S, H] of the batch's
  // logits_indices rows, on the host as F32 (no LM head).
  Tensor run_hidden(const HostBatch& batch);
  // Ranks > 0: runs the next step rank 0 broadcasts; false when rank 0 shuts the group down.
  bool serve_step();

  // Quantization of the weights at load.
  static ModelLoadOptions load_options(const ResolvedConfig& config);
  // CPU KV budget in bytes for `config` (explicit bytes, else a fraction of available RAM).
  static int64_t cpu_kv_budget(const Config& config);

 private:
  void init();
  Tensor forward(const HostBatch& batch);
  void warmup();
  ResolvedConfig config_;
  ModelConfig mc_;
  std::unique_ptr<ProcessGroup> group_;  // null: single rank
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Communicator> comm_;
  std::unique_ptr<StepChannel> channel_;
  std::unique_ptr<DecoderModel> model_;
  KVCache kv_;
  DType kv_dtype_ = DType::F32;
  std::unique_ptr<StepExecutor> executor_;  // last: destroyed first (graphs reference kv_)
};

}  // namespace nanovllm
