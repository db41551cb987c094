#include "kernels/cuda/graph_executor.h"

#include <chrono>
#include <cstdio>

#include "kernels/cuda/cuda_backend.h"

namespace nanovllm::cuda {

GraphStepExecutor::GraphStepExecutor(CudaBackend& backend, StepForward forward,
                                     const StepExecutorOptions& o)
    : be_(backend),
      forward_(std::move(forward)),
      block_size_(o.block_size),
      max_model_len_(o.max_model_len),
      runner_(backend, o.max_num_seqs, o.max_model_len, o.block_size, o.spec_query_len,
              o.spec_max_batch) {
  const auto& b = runner_.buckets();
  const auto& vb = runner_.verify_buckets();
  if (o.verbose) {
    std::fprintf(stderr, "nanovllm: capturing CUDA graphs for %zu decode batch sizes (%d..%d)",
                 b.size(), b.front(), b.back());
    if (!vb.empty())
      std::fprintf(stderr, " and %zu speculative verification sizes (%d..%d x %d rows)", vb.size(),
                   vb.front(), vb.back(), runner_.spec_query_len());
    std::fputs("...", stderr);
  }
  const size_t before = be_.allocator().graph_pool_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    runner_.capture(forward_);
  } catch (...) {
    if (o.verbose) std::fputs(" failed\n", stderr);
    throw;
  }
  pool_bytes_ = int64_t(be_.allocator().graph_pool_bytes() - before);
  if (o.verbose)
    std::fprintf(stderr, " done in %.1f s, graph pool %.1f MiB\n",
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                 double(pool_bytes_) / double(1 << 20));
}

Tensor GraphStepExecutor::run(const HostBatch& hb) {
  if (graph_replay_bucket(hb, runner_.buckets(), runner_.table_width(), block_size_,
                          max_model_len_) > 0) {
    ++graph_steps_;
    return runner_.run(hb);
  }
  const int vb = graph_verify_bucket(hb, runner_.verify_buckets(), runner_.spec_query_len(),
                                     runner_.table_width(), block_size_, max_model_len_);
  if (vb > 0) {
    ++graph_steps_;
    return runner_.run_verify(hb, vb);
  }
  ++eager_steps_;
  return forward_(be_.upload_batch(hb));
}

std::unique_ptr<StepExecutor> CudaBackend::make_graph_executor(const StepForward& forward,
                                                               const StepExecutorOptions& o) {
  return std::make_unique<GraphStepExecutor>(*this, forward, o);
}

}  // namespace nanovllm::cuda
