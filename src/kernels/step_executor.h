// Step executors: how a step's hidden-state forward runs on a backend. The engine hands
// make_step_executor() (kernels/eager_executor.h) the model's forward as a callback (kernels
// never depend on models) and calls run() once per step; the LM head (compute_logits) runs
// after it, eagerly.
//
//   eager       every step: upload_batch + forward (CPU always; CUDA with --enforce-eager).
//   cuda-graph  decode-only steps that fit a graph bucket (graph_policy.h: graph_replay_bucket)
//               replay a CUDA graph captured per bucket at construction, over persistent input
//               buffers; with speculative decoding, verification steps (1..1+K rows per
//               sequence, every row sampled) replay a verification graph of their bucket
//               (graph_verify_bucket); every other step (prefill, mixed, larger batches) runs
//               eagerly (kernels/cuda/graph_executor.h).
#pragma once
#include <cstdint>
#include <vector>

#include "util/tensor.h"

namespace nanovllm {

struct HostBatch;  // kernels/backend.h

struct StepExecutorOptions {
  int max_num_seqs = 1;     // largest graph bucket = min(512, max_num_seqs)
  int max_model_len = 1;    // graphs decode contexts up to this length
  int block_size = 16;      // KV block size the batches use
  bool enforce_eager = false;
  // Speculative decoding: q_max = 1 + K query rows per sequence in a verification step, and
  // the batch cap above which the engine does not speculate. CUDA graphs are captured for
  // verification steps up to that cap when spec_query_len >= 2 (0: no speculation).
  int spec_query_len = 0;
  int spec_max_batch = 0;
  bool verbose = true;      // one progress line on stderr while capturing
};

class StepExecutor {
 public:
  virtual ~StepExecutor() = default;
  virtual const char* name() const = 0;  // "eager" | "cuda-graph"
  // Runs the forward for hb (enqueued on the backend's stream, no sync) and returns hidden
  // states [S, H] on the device, S = hb.logits_indices.size(). Valid until the next run().
  virtual Tensor run(const HostBatch& hb) = 0;
  // Bytes the backend reserved for graphs (scratch + outputs); 0 for eager.
  virtual int64_t graph_pool_bytes() const { return 0; }
  // Batch sizes with a captured graph (empty for eager).
  virtual std::vector<int> graph_batch_sizes() const { return {}; }
  int64_t graph_steps() const { return graph_steps_; }  // steps that replayed a graph
  int64_t eager_steps() const { return eager_steps_; }

 protected:
  int64_t graph_steps_ = 0, eager_steps_ = 0;
};

}  // namespace nanovllm
