// The CUDA backend's step executor (kernels/step_executor.h, name "cuda-graph"): at
// construction it captures the hidden-state forward once per decode batch bucket
// (graph_policy.h, up to min(512, max_num_seqs)) and, with speculative decoding, once per
// verification bucket (up to the speculation batch cap) through GraphRunner, with a progress
// line on stderr; run() replays the bucket's graph for decode-only steps that qualify
// (graph_replay_bucket) and for verification steps (graph_verify_bucket), and runs every other
// step eagerly. graph_steps counts both kinds of replay. A replay allocates nothing: inputs
// go through GraphRunner's persistent buffers, intermediates and the [bs, H] outputs were
// placed in the allocator's graph pool at capture.
#pragma once
#include "kernels/cuda/graph_runner.h"
#include "kernels/backend.h"

namespace nanovllm::cuda {

class GraphStepExecutor final : public StepExecutor {
 public:
  GraphStepExecutor(CudaBackend& backend, StepForward forward, const StepExecutorOptions& o);
  const char* name() const override { return "cuda-graph"; }
  Tensor run(const HostBatch& hb) override;
  int64_t graph_pool_bytes() const override { return pool_bytes_; }
  std::vector<int> graph_batch_sizes() const override { return runner_.buckets(); }

 private:
  CudaBackend& be_;
  StepForward forward_;
  int block_size_, max_model_len_;
  GraphRunner runner_;
  int64_t pool_bytes_ = 0;
};

}  // namespace nanovllm::cuda
