#include "kernels/cuda/graph_runner.h"

#include <algorithm>
#include <cstring>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"

namespace nanovllm::cuda {

GraphRunner::GraphRunner(CudaBackend& backend, int max_num_seqs, int max_model_len, int block_size,
                         int spec_query_len, int spec_max_batch)
    : be_(backend),
      buckets_(graph_batch_sizes(max_num_seqs)),
      verify_buckets_(verify_graph_batch_sizes(max_num_seqs, spec_max_batch, spec_query_len)),
      max_model_len_(max_model_len),
      block_size_(block_size),
      q_max_(verify_buckets_.empty() ? 0 : spec_query_len) {
  int max_batch = buckets_.back(), max_tokens = buckets_.back();
  if (!verify_buckets_.empty()) {
    max_batch = std::max(max_batch, verify_buckets_.back());
    max_tokens = std::max(max_tokens, verify_buckets_.back() * q_max_);
  }
  layout_ = DecodeStagingLayout::make(max_batch, graph_block_table_width(max_model_len, block_size),
                                      max_tokens);
  CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&host_), size_t(layout_.total) * 4));
  std::memset(host_, 0, size_t(layout_.total) * 4);
  dev_ = be_.empty({layout_.total}, DType::I32);
  CUDA_CHECK(cudaEventCreateWithFlags(&staged_, cudaEventDisableTiming));
}

GraphRunner::~GraphRunner() {
  (void)cudaStreamSynchronize(be_.stream());
  for (auto* list : {&graphs_, &verify_graphs_})
    for (auto& g : *list) {
      if (g.exec) (void)cudaGraphExecDestroy(g.exec);
      if (g.graph) (void)cudaGraphDestroy(g.graph);
    }
  if (staged_) (void)cudaEventDestroy(staged_);
  if (host_) (void)cudaFreeHost(host_);
}

int GraphRunner::bucket_for(int n) const {
  if (n < 1) return -1;
  return graph_bucket_for(n, buckets_);
}

// The captured batch of bs sequences and T token rows: views of the persistent inputs.
BatchTensors GraphRunner::staged_batch(int bs, int T) const {
  const auto& l = layout_;
  auto view = [&](int64_t off, Shape shape) {
    return Tensor::wrap(dev_.data<int32_t>() + off, shape, DType::I32, Device::CUDA, dev_.owner());
  };
  BatchTensors b;
  b.input_ids = view(l.input_ids, {T});
  b.positions = view(l.positions, {T});
  b.slot_mapping = view(l.slot_mapping, {T});
  b.cu_seqlens_q = view(l.cu_seqlens_q, {bs + 1});
  b.context_lens = view(l.context_lens, {bs});
  b.block_tables = view(l.block_tables, {bs, l.table_width});
  b.logits_indices = view(l.logits_indices, {T});
  b.num_seqs = bs;
  b.num_tokens = T;
  b.max_seqlen_k = max_model_len_;
  b.block_size = block_size_;
  return b;
}

BatchTensors GraphRunner::batch_for(int bs) const {
  BatchTensors b = staged_batch(bs, bs);
  b.max_seqlen_q = 1;
  b.decode_only = true;
  return b;
}

BatchTensors GraphRunner::verify_batch_for(int bs) const {
  BatchTensors b = staged_batch(bs, bs * q_max_);
  b.max_seqlen_q = q_max_;
  b.decode_only = false;
  b.padded_tail = true;
  return b;
}

void GraphRunner::stage(const HostBatch& hb, int bs) {
  const int n = hb.num_seqs;
  NV_CHECK(hb.decode_only && hb.num_tokens == n, "graph replay needs a decode-only batch (",
           hb.num_tokens, " tokens for ", n, " sequences)");
  NV_CHECK(int(hb.input_ids.size()) == n && int(hb.positions.size()) == n &&
               int(hb.slot_mapping.size()) == n && int(hb.context_lens.size()) == n,
           "HostBatch arrays must have num_seqs entries");
  NV_CHECK(hb.block_size == block_size_, "batch block_size ", hb.block_size,
           " differs from the captured ", block_size_);
  const int stride = hb.block_table_stride ? hb.block_table_stride
                                           : int(hb.block_tables.size() / size_t(std::max(n, 1)));
  NV_CHECK(int64_t(hb.block_tables.size()) == int64_t(n) * stride, "block_tables size mismatch");
  for (int i = 0; i < n; ++i)
    NV_CHECK(hb.context_lens[i] <= max_model_len_, "context length ", hb.context_lens[i],
             " exceeds max_model_len ", max_model_len_);
  CUDA_CHECK(cudaEventSynchronize(staged_));  // previous copy out of host_ finished
  fill_decode_staging(layout_, bs, n, hb.input_ids.data(), hb.positions.data(),
                      hb.slot_mapping.data(), hb.context_lens.data(), hb.block_tables.data(),
                      stride, host_);
  upload_staged(bs);
}

void GraphRunner::stage_verify(const HostBatch& hb, int bs) {
  NV_CHECK(hb.block_size == block_size_ || hb.num_seqs == 0, "batch block_size ", hb.block_size,
           " differs from the captured ", block_size_);
  for (int i = 0; i < hb.num_seqs; ++i)
    NV_CHECK(hb.context_lens[size_t(i)] <= max_model_len_, "context length ",
             hb.context_lens[size_t(i)], " exceeds max_model_len ", max_model_len_);
  CUDA_CHECK(cudaEventSynchronize(staged_));  // previous copy out of host_ finished
  fill_verify_staging(layout_, bs, q_max_, hb, host_);
  upload_staged(bs);
}

// One copy of everything up to the end of bucket bs's block-table rows (the token arrays come
// before the block tables, so they are copied whole).
void GraphRunner::upload_staged(int bs) {
  CUDA_CHECK(cudaMemcpyAsync(dev_.raw(), host_, size_t(layout_.bytes_for(bs)),
                             cudaMemcpyHostToDevice, be_.stream()));
  CUDA_CHECK(cudaEventRecord(staged_, be_.stream()));
}

GraphRunner::Graph* GraphRunner::find(std::vector<Graph>& graphs, int bs) {
  for (auto& g : graphs)
    if (g.bs == bs) return &g;
  return nullptr;
}

// Warm-up run, then capture of `step` on `batch` (already staged) in the graph pool.
GraphRunner::Graph GraphRunner::capture_one(const StepFn& step, const BatchTensors& batch, int bs) {
  cudaStream_t s = be_.stream();
  be_.allocator().set_graph_pool(true);
  Graph g;
  g.bs = bs;
  try {
    (void)step(batch);  // warm-up: cuBLASLt plans, allocator cache, lazy module loading
    CUDA_CHECK(cudaStreamSynchronize(s));
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    try {
      g.out = step(batch);
    } catch (...) {
      cudaGraph_t broken = nullptr;
      (void)cudaStreamEndCapture(s, &broken);
      if (broken) (void)cudaGraphDestroy(broken);
      throw;
    }
    CUDA_CHECK(cudaStreamEndCapture(s, &g.graph));
    CUDA_CHECK(cudaGraphInstantiate(&g.exec, g.graph, 0));
  } catch (...) {
    if (g.graph) (void)cudaGraphDestroy(g.graph);
    be_.allocator().set_graph_pool(false);
    throw;
  }
  be_.allocator().set_graph_pool(false);
  return g;
}

void GraphRunner::capture(const StepFn& step) {
  NV_CHECK(!captured(), "GraphRunner::capture called twice");
  cudaStream_t s = be_.stream();
  std::vector<int> order(buckets_.rbegin(), buckets_.rend());
  for (int bs : order) {
    // Dummy decode batch: every row is padding (no KV store, empty context).
    HostBatch hb;
    hb.num_seqs = hb.num_tokens = bs;
    hb.input_ids.assign(bs, 0);
    hb.positions.assign(bs, 0);
    hb.slot_mapping.assign(bs, -1);
    hb.context_lens.assign(bs, 0);
    hb.block_tables.assign(size_t(bs), -1);
    hb.block_table_stride = 1;
    hb.block_size = block_size_;
    hb.decode_only = true;
    stage(hb, bs);
    graphs_.push_back(capture_one(step, batch_for(bs), bs));
  }
  // Verification graphs: an all-padding batch (no sequence has rows; attention writes zeros).
  for (auto it = verify_buckets_.rbegin(); it != verify_buckets_.rend(); ++it) {
    HostBatch hb;
    hb.block_size = block_size_;
    stage_verify(hb, *it);
    verify_graphs_.push_back(capture_one(step, verify_batch_for(*it), *it));
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
}

Tensor GraphRunner::run(const HostBatch& hb) {
  const int bs = bucket_for(hb.num_seqs);
  NV_CHECK(bs > 0, "no CUDA graph for a batch of ", hb.num_seqs, " sequences (largest ",
           buckets_.back(), "): run it eagerly");
  Graph* g = find(graphs_, bs);
  NV_CHECK(g != nullptr, "GraphRunner::run before capture()");
  stage(hb, bs);
  CUDA_CHECK(cudaGraphLaunch(g->exec, be_.stream()));
  return g->out.rows(0, hb.num_seqs);
}

Tensor GraphRunner::run_verify(const HostBatch& hb, int bs) {
  Graph* g = find(verify_graphs_, bs);
  NV_CHECK(g != nullptr, "no verification graph for bucket ", bs);
  NV_CHECK(hb.num_seqs >= 1 && hb.num_seqs <= bs && hb.num_tokens <= bs * q_max_,
           "a verification batch of ", hb.num_seqs, " sequences and ", hb.num_tokens,
           " tokens does not fit bucket ", bs, " x ", q_max_);
  stage_verify(hb, bs);
  CUDA_CHECK(cudaGraphLaunch(g->exec, be_.stream()));
  return g->out.rows(0, hb.num_tokens);
}

}  // namespace nanovllm::cuda
