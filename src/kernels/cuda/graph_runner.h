// CUDA graphs for decode steps. One graph per bucket of graph_batch_sizes(max_num_seqs)
// (graph_policy.h), and with speculative decoding one verification graph per bucket of
// verify_graph_batch_sizes (bs sequences, bs * q_max token rows); all graphs read their inputs
// from ONE persistent device buffer (layout DecodeStagingLayout, a bucket uses the first
// entries of each array) that a step fills with a single copy from a pinned host staging
// buffer, so a replay allocates nothing.
//
// Capture contract for `step`: it enqueues a whole decode forward for `batch` on the backend's
// stream and returns the output tensor (the engine's: hidden states [bs, H], so the outputs
// kept for every bucket stay small; the LM head runs after the replay, eagerly, see
// graph_executor.h); it must not synchronize, copy to
// the host, or depend on host-side values of the batch other than its shapes, since a graph
// replays exactly the captured launches. The batch it sees has max_seqlen_k = max_model_len
// (decode attention's split count is fixed at capture); a verification batch has
// max_seqlen_q = q_max, decode_only false and padded_tail set. Intermediates come from the
// allocator's graph pool (device_allocator.h); the returned tensor is kept by the runner and
// overwritten by each replay of its bucket.
#pragma once
#include <cuda_runtime_api.h>

#include <functional>
#include <vector>

#include "kernels/backend.h"
#include "kernels/cuda/graph_policy.h"

namespace nanovllm::cuda {

class CudaBackend;

class GraphRunner {
 public:
  using StepFn = std::function<Tensor(const BatchTensors&)>;
  // spec_query_len = 1 + K (0 or 1: no verification graphs), spec_max_batch: their largest bucket.
  GraphRunner(CudaBackend& backend, int max_num_seqs, int max_model_len, int block_size,
              int spec_query_len = 0, int spec_max_batch = 0);
  ~GraphRunner();
  GraphRunner(const GraphRunner&) = delete;
  GraphRunner& operator=(const GraphRunner&) = delete;

  // Warms up and captures `step` for every bucket (largest first), decode then verification.
  void capture(const StepFn& step);
  bool captured() const { return !graphs_.empty(); }
  // The bucket a decode batch of n sequences replays, or -1 (run eagerly).
  int bucket_for(int n) const;
  const std::vector<int>& buckets() const { return buckets_; }
  const std::vector<int>& verify_buckets() const { return verify_buckets_; }
  int spec_query_len() const { return q_max_; }
  int table_width() const { return layout_.table_width; }

  // Replays the graph for a decode-only batch (hb.num_seqs <= the largest bucket) and returns
  // the first hb.num_seqs rows of that bucket's output, valid until the next replay of any
  // graph (all graphs share the allocator's graph pool).
  Tensor run(const HostBatch& hb);
  // Replays the verification graph of bucket bs (graph_verify_bucket) and returns the first
  // hb.num_tokens rows of its output.
  Tensor run_verify(const HostBatch& hb, int bs);

 private:
  struct Graph {
    int bs = 0;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    Tensor out;
  };
  BatchTensors staged_batch(int bs, int T) const;
  BatchTensors batch_for(int bs) const;
  BatchTensors verify_batch_for(int bs) const;
  void stage(const HostBatch& hb, int bs);
  void stage_verify(const HostBatch& hb, int bs);
  void upload_staged(int bs);
  Graph capture_one(const StepFn& step, const BatchTensors& batch, int bs);
  static Graph* find(std::vector<Graph>& graphs, int bs);

  CudaBackend& be_;
  std::vector<int> buckets_, verify_buckets_;
  int max_model_len_, block_size_, q_max_;
  DecodeStagingLayout layout_;
  int32_t* host_ = nullptr;  // pinned staging, layout_.total int32
  Tensor dev_;               // persistent device inputs, same layout
  cudaEvent_t staged_ = nullptr;
  std::vector<Graph> graphs_, verify_graphs_;
};

}  // namespace nanovllm::cuda
