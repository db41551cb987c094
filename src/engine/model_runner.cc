#include "engine/model_runner.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>
#include <sstream>
#include <string>

#include "parallel/make_communicator.h"
#include "engine/config_json.h"
#include "kernels/backend_factory.h"
#include "kernels/batch_contract.h"
#include "loader/finite_check.h"
#include "loader/weight_store.h"

namespace nanovllm {

namespace {
int64_t mem_available_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64_t kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return int64_t(4) << 30;
}
}  // namespace

ModelLoadOptions ModelRunner::load_options(const ResolvedConfig& c) {
  ModelLoadOptions o;
  o.linear_quant = c.quantization;
  o.lm_head_quant = c.lm_head_quantization;
  o.tensor_quant = c.tensor_quantization;
  // GPTQ / AWQ modules, and a GGUF's Q4_K / Q5_K / Q6_K tensors (tensor_quantization is set exactly for a
  // GGUF under auto on the CPU), run on the int4 kernels as stored.
  o.checkpoint_int4 = c.checkpoint_int4 || !c.tensor_quantization.empty();
  return o;
}

int64_t ModelRunner::cpu_kv_budget(const Config& c) {
  if (c.cpu_kvcache_bytes > 0) return c.cpu_kvcache_bytes;
  return int64_t(double(mem_available_bytes()) * c.cpu_kvcache_fraction);
}

ModelRunner::ModelRunner(const ResolvedConfig& config, const ModelConfig& mc)
    : config_(config), mc_(mc) {
  const Config& c = config.spec;
  if (c.tensor_parallel_size > 1) {
    TpShard::plan(mc, 0, c.tensor_parallel_size);  // a shape that cannot split fails here
    DistOptions o;
    o.rank = 0;
    o.world = c.tensor_parallel_size;
    o.init_addr = c.dist_init_addr;
    o.worker_command = c.worker_command;
    o.timeout = config.dist_timeout;
    group_ = std::make_unique<ProcessGroup>(o);
    send_text(group_->control(), config_to_json(c));
  }
  init();
}

ModelRunner::ModelRunner(const ResolvedConfig& config, const ModelConfig& mc,
                         std::unique_ptr<ProcessGroup> group)
    : config_(config), mc_(mc), group_(std::move(group)) {
  NV_CHECK(group_ && group_->rank() > 0, "this constructor is for tensor-parallel ranks > 0");
  NV_CHECK(group_->world() == config.spec.tensor_parallel_size, "rank ", group_->rank(),
           " joined a ", group_->world(), "-rank group but rank 0 runs tensor_parallel_size ",
           config.spec.tensor_parallel_size, " (start every rank with the same size)");
  init();
}

void ModelRunner::init() {
  const Config& spec = config_.spec;
  const int world = spec.tensor_parallel_size, rank = group_ ? group_->rank() : 0;
  backend_ = make_backend(config_.device, config_.num_threads, /*cuda_device=*/rank,
                          spec.backend);
  kv_dtype_ = config_.kv_cache_dtype;
  NV_CHECK(backend_->kv_cache_dtype_supported(kv_dtype_), "--kv-cache-dtype ",
           spec.kv_cache_dtype, " is not supported on the ", backend_->name(), " backend (it uses ",
           dtype_name(backend_->act_dtype()), ")");
  comm_ = make_communicator(group_.get(), *backend_, config_.dist_timeout);
  if (world > 1) channel_ = std::make_unique<StepChannel>(*comm_);
  const TpShard shard = TpShard::plan(mc_, rank, world);
  WeightStore ws = WeightStore::open_dir(spec.model);
  // NaN/Inf: error naming the tensor (rank 0 reads the whole checkpoint once for all ranks)
  if (!spec.allow_nonfinite_weights && rank == 0) check_finite_weights(ws);
  model_ = std::make_unique<DecoderModel>(mc_, *backend_, ws, spec.max_model_len, shard,
                                          comm_.get(), load_options(config_));

  const int bs = spec.kvcache_block_size;
  int num_blocks = spec.num_kvcache_blocks;
  if (num_blocks < 0) {
    // A block holds the rank's KV heads; the budget covers the blocks of all N ranks (CPU: one
    // machine's RAM; CUDA: measured per GPU, so per rank).
    const size_t bb = KVCache::block_bytes(mc_, bs, kv_dtype_, shard.num_kv_heads);
    int64_t budget = -1, ranks_sharing = 1;
    if (backend_->device() != Device::CPU) {
      warmup();  // activation peak at the largest batch, then measure what is left
      budget = backend_->kv_cache_budget_bytes(spec.gpu_memory_utilization);
      if (budget >= 0)  // less a draft model's weights, loaded after us
        budget = std::max<int64_t>(0, budget - config_.kv_reserved_device_bytes);
    }
    if (budget < 0) {
      budget = cpu_kv_budget(spec);
      ranks_sharing = world;
    }
    // A draft model's cache (rank 0) takes kv_extra_block_bytes beside each of our blocks.
    int64_t fit = budget / (int64_t(bb) * ranks_sharing + config_.kv_extra_block_bytes);
    // No more than every sequence at max_model_len could ever use.
    int64_t need = int64_t(spec.max_num_seqs) * ((spec.max_model_len + bs - 1) / bs);
    // Every rank must hold the same blocks: the smallest budget decides.
    num_blocks = int(comm_->all_reduce_min(std::min<int64_t>(fit, need)));
    NV_CHECK(num_blocks >= 1, "KV cache budget of ", budget, " bytes fits no block of ",
             bb * size_t(ranks_sharing), " bytes; raise --kv-cache-bytes");
  }
  kv_ = KVCache::allocate(*backend_, mc_, num_blocks, bs, shard.num_kv_heads, kv_dtype_);

  // Like nano-vLLM: graphs are captured after the KV cache is sized, from what is left.
  StepExecutorOptions eo;
  eo.max_num_seqs = spec.max_num_seqs;
  eo.max_model_len = spec.max_model_len;
  eo.block_size = bs;
  eo.enforce_eager = spec.enforce_eager;
  if (config_.speculative != SpeculativeMethod::kNone) {  // verification steps get graphs too
    eo.spec_query_len = 1 + spec.num_speculative_tokens;
    eo.spec_max_batch = config_.speculative_max_batch;
  }
  executor_ = make_step_executor(
      *backend_, [this](const BatchTensors& b) { return model_->forward_hidden(b, kv_); }, eo);
}

ModelRunner::~ModelRunner() {
  if (!group_ || group_->rank() != 0) return;
  try {
    channel_->send_shutdown();
    group_->shutdown_workers(std::chrono::seconds(10));
  } catch (const std::exception& e) {
    // A worker already gone: the group's destructor stops the rest.
    std::fprintf(stderr, "nanovllm: tensor-parallel shutdown: %s\n", e.what());
  }
}

void ModelRunner::warmup() {
  // nano-vLLM's warm-up: as many max_model_len sequences as the token budget allows, all reading
  // one scratch block table (slot_mapping -1: nothing stored), so the allocator sees its peak.
  const Config& c = config_.spec;
  const int bs = c.kvcache_block_size, len = c.max_model_len;
  const int nseq = std::max(1, std::min(c.max_num_seqs, c.max_num_batched_tokens / len));
  const int nblocks = (len + bs - 1) / bs;
  KVCache scratch = KVCache::allocate(*backend_, mc_, nblocks, bs, model_->num_local_kv_heads(),
                                     kv_dtype_);
  HostBatch hb;
  hb.num_seqs = nseq;
  hb.block_size = bs;
  hb.block_table_stride = nblocks;
  hb.cu_seqlens_q.push_back(0);
  for (int b = 0; b < nseq; ++b) {
    for (int p = 0; p < len; ++p) {
      hb.input_ids.push_back(0);
      hb.positions.push_back(p);
      hb.slot_mapping.push_back(-1);
    }
    hb.cu_seqlens_q.push_back(hb.cu_seqlens_q.back() + len);
    hb.context_lens.push_back(len);
    for (int i = 0; i < nblocks; ++i) hb.block_tables.push_back(i);
    hb.logits_indices.push_back(hb.cu_seqlens_q.back() - 1);
  }
  hb.num_tokens = nseq * len;
  hb.max_seqlen_q = hb.max_seqlen_k = len;
  validate_batch(hb, BatchLimits{mc_.vocab_size, len, nblocks, bs});
  BatchTensors bt = backend_->upload_batch(hb);
  model_->forward(bt, scratch);
  backend_->synchronize();
}

int ModelRunner::num_rows(const ScheduledSeq& s, Rows rows) {
  switch (rows) {
    case Rows::kSample: return s.num_sample_rows();
    case Rows::kLast: return s.sample ? 1 : 0;
    case Rows::kMean: return s.num_new_tokens;
    case Rows::kCls: return s.seq->num_cached_tokens == 0 ? 1 : 0;
  }
  return 0;
}

ModelRunner::PromptRows ModelRunner::prompt_rows(const ScheduledSeq& s) {
  const Sequence& seq = *s.seq;
  if (seq.params.prompt_logprobs < 0) return {};
  const int start = seq.num_cached_tokens;
  const int end = std::min(start + s.num_new_tokens, seq.num_prompt_tokens - 1);
  return end > start ? PromptRows{start, end - start} : PromptRows{};
}

HostBatch ModelRunner::prepare(const SchedulerOutput& out, Rows rows) const {
  HostBatch hb;
  const int bs = config_.spec.kvcache_block_size;
  hb.block_size = bs;
  hb.num_seqs = int(out.seqs.size());
  hb.cu_seqlens_q.push_back(0);
  size_t max_blocks = 1;
  for (const auto& s : out.seqs) max_blocks = std::max(max_blocks, s.seq->block_table.size());
  hb.block_table_stride = int(max_blocks);
  hb.block_tables.assign(size_t(hb.num_seqs) * max_blocks, -1);
  hb.decode_only = true;
  for (int b = 0; b < hb.num_seqs; ++b) {
    const ScheduledSeq& s = out.seqs[size_t(b)];
    const Sequence& seq = *s.seq;
    // Tokens [start, start + n): the sequence's own, then (speculative decoding) its drafts.
    const int start = seq.num_cached_tokens, n = s.num_new_tokens, k = s.num_spec_tokens;
    NV_CHECK(n >= 1 && start + n <= seq.size() + k && k <= int(seq.spec_token_ids.size()),
             "bad schedule for seq ", seq.seq_id, ": start ", start, " + ", n, " > ", seq.size(),
             " + ", k, " drafts");
    NV_CHECK(int64_t(seq.block_table.size()) * bs >= start + n, "seq ", seq.seq_id,
             " has too few blocks");
    for (int p = start; p < start + n; ++p) {
      hb.input_ids.push_back(p < seq.size() ? seq.token_ids[size_t(p)]
                                            : seq.spec_token_ids[size_t(p - seq.size())]);
      hb.positions.push_back(p);
      hb.slot_mapping.push_back(seq.block_table[size_t(p / bs)] * bs + p % bs);
    }
    hb.cu_seqlens_q.push_back(hb.cu_seqlens_q.back() + n);
    hb.context_lens.push_back(start + n);
    hb.max_seqlen_q = std::max(hb.max_seqlen_q, n);
    hb.max_seqlen_k = std::max(hb.max_seqlen_k, start + n);
    std::copy(seq.block_table.begin(), seq.block_table.end(),
              hb.block_tables.begin() + int64_t(b) * int64_t(max_blocks));
    if (n != 1) hb.decode_only = false;
    // Every row of a verification is sampled; otherwise the last row of a sampling sequence.
    // Pooling: the chunk's rows (mean), its first row at position 0 (cls), or the last (last).
    const int first_row = hb.cu_seqlens_q.back() - n;
    if (rows == Rows::kMean || rows == Rows::kCls) {
      for (int r = 0; r < num_rows(s, rows); ++r) hb.logits_indices.push_back(first_row + r);
    } else {
      for (int r = num_rows(s, rows); r >= 1; --r) hb.logits_indices.push_back(hb.cu_seqlens_q.back() - r);
    }
  }
  hb.num_tokens = int(hb.input_ids.size());
  if (rows == Rows::kSample) {
    for (int b = 0; b < hb.num_seqs; ++b) {
      const PromptRows pr = prompt_rows(out.seqs[size_t(b)]);
      const int first_row = hb.cu_seqlens_q[size_t(b)] + (pr.first - out.seqs[size_t(b)].seq->num_cached_tokens);
      for (int r = 0; r < pr.count; ++r) hb.logits_indices.push_back(first_row + r);
      hb.num_extra_rows += pr.count;
    }
  }
  // A pooling step whose chunks hold no wanted row (middle chunks of last / cls pooling) still
  // computes their KV: the forward gathers one row, which the caller ignores.
  if (rows != Rows::kSample && hb.logits_indices.empty() && hb.num_tokens > 0)
    hb.logits_indices.push_back(hb.num_tokens - 1);
  return hb;
}

Tensor ModelRunner::run(const HostBatch& hb, Tensor* prompt_hidden) {
  NV_CHECK(hb.num_extra_rows == 0 || !channel_, "prompt_logprobs run on one rank (tensor_parallel_size 1)");
  NV_CHECK(rank() == 0, "ModelRunner::run is rank 0's; ranks > 0 call serve_step()");
  // Every value of the batch is checked here, on the host where it was made, before either
  // executor (eager upload or graph staging) takes it to the device: kernels cannot report a
  // bad index, and the CPU and CUDA kernels must never see different inputs. Checked before
  // the broadcast, so a bad batch never reaches the other ranks.
  validate_batch(hb, BatchLimits{mc_.vocab_size, config_.spec.max_model_len, kv_.num_blocks,
                                 kv_.block_size});
  if (channel_) channel_->send_step(hb);
  if (hb.num_extra_rows == 0) return forward(hb);
  Tensor hidden = executor_->run(hb);
  const int64_t S = hidden.size(0), sampled = S - hb.num_extra_rows;
  if (prompt_hidden) *prompt_hidden = hidden.rows(sampled, S);
  return model_->compute_logits(hidden.rows(0, sampled));
}

std::vector<TokenLogprobs> ModelRunner::prompt_logprobs(const Tensor& hidden, const std::vector<int>& targets,
                                                        int top_n) {
  const int64_t R = hidden.size(0);
  NV_CHECK_EQ(R, int64_t(targets.size()), "prompt logprob rows");
  std::vector<TokenLogprobs> out(static_cast<size_t>(R));
  constexpr int64_t kSlice = 64;  // [64, V] F32 logits at a time
  std::vector<std::pair<float, int>> top;
  for (int64_t r0 = 0; r0 < R; r0 += kSlice) {
    const int64_t r1 = std::min(R, r0 + kSlice);
    const Tensor logits = backend_->to_host(model_->compute_logits(hidden.rows(r0, r1)));
    const int64_t V = logits.size(-1);
    const float* l = logits.data<float>();
    for (int64_t r = r0; r < r1; ++r) {
      const float* row = l + (r - r0) * V;
      // log_softmax with the max subtracted (float64 sum): logprob = x - max - log(sum exp).
      float mx = row[0];
      for (int64_t j = 1; j < V; ++j) mx = std::max(mx, row[j]);
      double sum = 0;
      for (int64_t j = 0; j < V; ++j) sum += std::exp(double(row[j] - mx));
      const double lse = double(mx) + std::log(sum);
      const int t = targets[size_t(r)];
      TokenLogprobs& o = out[size_t(r)];
      o.logprob = float(double(row[t]) - lse);
      int rank = 1;
      for (int64_t j = 0; j < V; ++j) rank += row[j] > row[t];
      o.rank = rank;
      if (top_n > 0) {
        top.clear();
        for (int64_t j = 0; j < V; ++j) {
          if (int(top.size()) < top_n) {
            top.push_back({row[j], int(j)});
            std::push_heap(top.begin(), top.end(), std::greater<>());
          } else if (row[j] > top.front().first) {
            std::pop_heap(top.begin(), top.end(), std::greater<>());
            top.back() = {row[j], int(j)};
            std::push_heap(top.begin(), top.end(), std::greater<>());
          }
        }
        std::sort_heap(top.begin(), top.end(), std::greater<>());  // largest first
        for (const auto& [x, id] : top) o.top.push_back({id, float(double(x) - lse)});
      }
    }
  }
  return out;
}

Tensor ModelRunner::run_hidden(const HostBatch& hb) {
  NV_CHECK(!channel_, "embedding models run on one rank (tensor_parallel_size 1)");
  validate_batch(hb, BatchLimits{mc_.vocab_size, config_.spec.max_model_len, kv_.num_blocks,
                                 kv_.block_size});
  Tensor host = backend_->to_host(executor_->run(hb));
  if (host.dtype() == DType::F32) return host;
  std::vector<float> f = to_f32_vector(host);
  Tensor out = Tensor::empty(host.shape(), DType::F32);
  std::copy(f.begin(), f.end(), out.data<float>());
  return out;
}

bool ModelRunner::serve_step() {
  NV_CHECK(channel_ && rank() > 0, "serve_step is for tensor-parallel ranks > 0");
  HostBatch hb;
  if (!channel_->receive(&hb)) return false;
  validate_batch(hb, BatchLimits{mc_.vocab_size, config_.spec.max_model_len, kv_.num_blocks,
                                 kv_.block_size});
  forward(hb);
  return true;
}

Tensor ModelRunner::forward(const HostBatch& hb) {
  // Graph replays output hidden states only; the LM head runs eagerly after (graph pool small).
  // Nothing here waits for the GPU: the logits stay on the device for Backend::sample.
  Tensor hidden = executor_->run(hb);
  return model_->compute_logits(hidden);
}

}  // namespace nanovllm
