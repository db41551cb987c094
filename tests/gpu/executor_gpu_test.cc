// The CUDA-graph step executor on a small random Qwen3 model (head_dim 64, written to a temp
// folder): decode steps replayed from graphs give the hidden states and logits the eager
// forward gives, a replay allocates nothing, repeated replays do not grow the allocator, and
// steps that do not qualify (prefill) run eagerly; speculative verification steps replay their
// own graphs.
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gpu_test_util.h"
#include "kernels/cuda/graph_executor.h"
#include "kernels/eager_executor.h"
#include "loader/safetensors_writer.h"
#include "loader/weight_store.h"
#include "models/decoder.h"

namespace nanovllm::gputest {
namespace {

namespace fs = std::filesystem;
constexpr int kH = 256, kI = 512, kL = 2, kHq = 4, kHkv = 2, kD = 64, kV = 4096;

// A random bf16 Qwen3 checkpoint (tied embeddings) in a fresh temp folder.
std::string write_model() {
  const fs::path dir = fs::temp_directory_path() / ("nanovllm-exec-gpu-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json c = {{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"},
                      {"hidden_size", kH}, {"intermediate_size", kI}, {"num_hidden_layers", kL},
                      {"num_attention_heads", kHq}, {"num_key_value_heads", kHkv},
                      {"head_dim", kD}, {"vocab_size", kV}, {"max_position_embeddings", 4096},
                      {"rms_norm_eps", 1e-6}, {"rope_theta", 1000000.0},
                      {"tie_word_embeddings", true}, {"torch_dtype", "bfloat16"},
                      {"hidden_act", "silu"}, {"eos_token_id", 1}};
  std::ofstream(dir / "config.json") << c.dump();
  std::map<std::string, Tensor> t;
  auto add = [&](const std::string& name, Shape shape, float lo, float hi) {
    Tensor h = Tensor::empty(shape, DType::BF16);
    std::vector<float> v(size_t(h.numel()));
    std::uniform_real_distribution<float> u(lo, hi);
    for (auto& x : v) x = u(rng());
    convert_f32_to(v.data(), h.raw(), DType::BF16, h.numel());
    t[name] = h;
  };
  const float a = 1.f / std::sqrt(float(kH)), b = 1.f / std::sqrt(float(kI));
  add("model.embed_tokens.weight", {kV, kH}, -1.f, 1.f);
  add("model.norm.weight", {kH}, 0.8f, 1.2f);
  for (int l = 0; l < kL; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "self_attn.q_proj.weight", {kHq * kD, kH}, -a, a);
    add(p + "self_attn.k_proj.weight", {kHkv * kD, kH}, -a, a);
    add(p + "self_attn.v_proj.weight", {kHkv * kD, kH}, -a, a);
    add(p + "self_attn.o_proj.weight", {kH, kHq * kD}, -a, a);
    add(p + "self_attn.q_norm.weight", {kD}, 0.8f, 1.2f);
    add(p + "self_attn.k_norm.weight", {kD}, 0.8f, 1.2f);
    add(p + "input_layernorm.weight", {kH}, 0.8f, 1.2f);
    add(p + "post_attention_layernorm.weight", {kH}, 0.8f, 1.2f);
    add(p + "mlp.gate_proj.weight", {kI, kH}, -a, a);
    add(p + "mlp.up_proj.weight", {kI, kH}, -a, a);
    add(p + "mlp.down_proj.weight", {kH, kI}, -b, b);
  }
  write_safetensors((dir / "model.safetensors").string(), t);
  return dir.string();
}

constexpr int kBlock = 16, kMaxLen = 64, kSeqs = 32, kBlocksPerSeq = kMaxLen / kBlock;

// Decode batch of the first n sequences: sequence i has lens[i] cached tokens, blocks
// i*kBlocksPerSeq.., and decodes token ids[i] at position lens[i].
HostBatch decode_batch(int n, const std::vector<int>& lens, const std::vector<int>& ids) {
  HostBatch hb;
  hb.num_seqs = hb.num_tokens = n;
  hb.block_size = kBlock;
  hb.block_table_stride = kBlocksPerSeq;
  hb.decode_only = true;
  hb.max_seqlen_q = 1;
  hb.cu_seqlens_q.push_back(0);
  for (int i = 0; i < n; ++i) {
    const int p = lens[size_t(i)];
    hb.input_ids.push_back(ids[size_t(i)]);
    hb.positions.push_back(p);
    hb.slot_mapping.push_back((i * kBlocksPerSeq + p / kBlock) * kBlock + p % kBlock);
    hb.context_lens.push_back(p + 1);
    hb.cu_seqlens_q.push_back(i + 1);
    hb.logits_indices.push_back(i);
    for (int j = 0; j < kBlocksPerSeq; ++j) hb.block_tables.push_back(i * kBlocksPerSeq + j);
    hb.max_seqlen_k = std::max(hb.max_seqlen_k, p + 1);
  }
  return hb;
}

// Prefill of all kSeqs sequences (lens[i] tokens each), every sequence sampled.
HostBatch prefill_batch(const std::vector<int>& lens) {
  HostBatch hb;
  hb.num_seqs = kSeqs;
  hb.block_size = kBlock;
  hb.block_table_stride = kBlocksPerSeq;
  hb.cu_seqlens_q.push_back(0);
  for (int i = 0; i < kSeqs; ++i) {
    for (int p = 0; p < lens[size_t(i)]; ++p) {
      hb.input_ids.push_back(int32_t(rng()() % kV));
      hb.positions.push_back(p);
      hb.slot_mapping.push_back((i * kBlocksPerSeq + p / kBlock) * kBlock + p % kBlock);
    }
    hb.cu_seqlens_q.push_back(hb.cu_seqlens_q.back() + lens[size_t(i)]);
    hb.context_lens.push_back(lens[size_t(i)]);
    hb.logits_indices.push_back(hb.cu_seqlens_q.back() - 1);
    for (int j = 0; j < kBlocksPerSeq; ++j) hb.block_tables.push_back(i * kBlocksPerSeq + j);
    hb.max_seqlen_q = std::max(hb.max_seqlen_q, lens[size_t(i)]);
  }
  hb.num_tokens = hb.cu_seqlens_q.back();
  hb.max_seqlen_k = hb.max_seqlen_q;
  return hb;
}

std::vector<double> as_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(GpuExecutor, GraphReplayMatchesEagerAndDoesNotAllocate) {
  NV_NEED_GPU();
  auto* be = backend();
  const std::string dir = write_model();
  const ModelConfig mc = ModelConfig::from_dir(dir);
  DecoderModel model(mc, *be, WeightStore::open_dir(dir), kMaxLen);
  KVCache kv = KVCache::allocate(*be, mc, kSeqs * kBlocksPerSeq, kBlock);
  fs::remove_all(dir);

  std::vector<int> lens(kSeqs);
  for (auto& l : lens) l = 1 + int(rng()() % (kMaxLen - 8));
  model.forward_hidden(be->upload_batch(prefill_batch(lens)), kv);  // fills the KV cache

  StepExecutorOptions o;
  o.max_num_seqs = kSeqs;
  o.max_model_len = kMaxLen;
  o.block_size = kBlock;
  o.verbose = false;
  StepForward fwd = [&](const BatchTensors& b) { return model.forward_hidden(b, kv); };
  auto& alloc = be->allocator();
  const size_t pool_before_capture = alloc.graph_pool_bytes();  // other tests' graphs
  auto ex = make_step_executor(*be, fwd, o);
  ASSERT_STREQ(ex->name(), "cuda-graph");
  EXPECT_EQ(ex->graph_batch_sizes(), graph_batch_sizes(kSeqs));
  EXPECT_GT(ex->graph_pool_bytes(), 0);
  RecordProperty("graph_pool_bytes", std::to_string(ex->graph_pool_bytes()));

  // Three passes over the same batch sizes: every replay must allocate nothing, and after the
  // first pass (which warms the eager comparisons' cache) nothing may grow at all.
  size_t reserved_after_pass = 0, pool_after_pass = 0;
  for (int pass = 0; pass < 3; ++pass) {
  for (int n : {1, 3, 17, 32, 2, 9, 31, 1, 16, 32, 5}) {
    std::vector<int> ids(static_cast<size_t>(n));
    for (auto& t : ids) t = int32_t(rng()() % kV);
    const HostBatch hb = decode_batch(n, lens, ids);
    const int64_t steps0 = ex->graph_steps();
    be->synchronize();
    const size_t cur0 = alloc.current_bytes(), res0 = alloc.reserved_bytes();
    Tensor hg = ex->run(hb);
    // The replay itself allocates nothing: inputs are staged into persistent buffers, the
    // output is a view of the bucket's [bs, H] output.
    EXPECT_EQ(alloc.current_bytes(), cur0) << "batch " << n;
    EXPECT_EQ(alloc.reserved_bytes(), res0) << "batch " << n;
    EXPECT_EQ(ex->graph_steps(), steps0 + 1);
    ASSERT_EQ(hg.size(0), n);
    ASSERT_EQ(hg.size(1), kH);
    const auto hidden_g = download(hg);
    const auto logits_g = download(model.compute_logits(hg));
    // Eager on the same batch (rewrites the same K/V slots with the same values).
    Tensor he = model.forward_hidden(be->upload_batch(hb), kv);
    const auto hidden_e = download(he);
    const auto logits_e = download(model.compute_logits(he));
    // Not bitwise: cuBLASLt may pick another algorithm for the bucket's padded row count.
    EXPECT_LE(rel_err(hidden_g, as_double(hidden_e)), 2e-2) << "batch " << n;
    EXPECT_LE(rel_err(logits_g, as_double(logits_e)), 2e-2) << "batch " << n;
    for (int r = 0; r < n; ++r) {  // top-1 agrees unless the eager top-2 are a near tie
      auto row_e = logits_e.begin() + int64_t(r) * kV, row_g = logits_g.begin() + int64_t(r) * kV;
      const auto te = std::max_element(row_e, row_e + kV) - row_e;
      const auto tg = std::max_element(row_g, row_g + kV) - row_g;
      if (te != tg) {
        EXPECT_LE(std::abs(row_e[te] - row_e[tg]), 2e-2 * std::abs(row_e[te]))
            << "batch " << n << " row " << r << ": top-1 " << tg << " vs eager " << te;
      }
    }
    be->synchronize();
    EXPECT_EQ(alloc.graph_pool_bytes(), size_t(ex->graph_pool_bytes()) + pool_before_capture);
    if (pass == 1 && n == 5) {
      reserved_after_pass = alloc.reserved_bytes();
      pool_after_pass = alloc.graph_pool_bytes();
    } else if (pass == 2) {
      EXPECT_EQ(alloc.reserved_bytes(), reserved_after_pass) << "batch " << n;
      EXPECT_EQ(alloc.graph_pool_bytes(), pool_after_pass) << "batch " << n;
    }
  }
  }

  // A prefill step does not qualify: it runs eagerly and matches the forward.
  const int64_t eager0 = ex->eager_steps(), graph0 = ex->graph_steps();
  std::vector<int> short_lens(kSeqs, 4);
  const HostBatch pf = prefill_batch(short_lens);
  const auto got = download(ex->run(pf));
  const auto want = download(model.forward_hidden(be->upload_batch(pf), kv));
  EXPECT_EQ(ex->eager_steps(), eager0 + 1);
  EXPECT_EQ(ex->graph_steps(), graph0);
  EXPECT_EQ(got, want);  // same launches, same algorithms: bitwise
}

// Speculative verification batch of the first q.size() sequences: sequence i scores q[i] rows
// (its token and q[i] - 1 drafts) at positions lens[i] .., every row sampled.
HostBatch verify_batch(const std::vector<int>& q, const std::vector<int>& lens) {
  HostBatch hb;
  const int n = int(q.size());
  hb.num_seqs = n;
  hb.block_size = kBlock;
  hb.block_table_stride = kBlocksPerSeq;
  hb.cu_seqlens_q.push_back(0);
  for (int i = 0; i < n; ++i) {
    for (int r = 0; r < q[size_t(i)]; ++r) {
      const int p = lens[size_t(i)] + r;
      hb.logits_indices.push_back(int32_t(hb.input_ids.size()));
      hb.input_ids.push_back(int32_t(rng()() % kV));
      hb.positions.push_back(p);
      hb.slot_mapping.push_back((i * kBlocksPerSeq + p / kBlock) * kBlock + p % kBlock);
    }
    hb.cu_seqlens_q.push_back(int32_t(hb.input_ids.size()));
    hb.context_lens.push_back(lens[size_t(i)] + q[size_t(i)]);
    for (int j = 0; j < kBlocksPerSeq; ++j) hb.block_tables.push_back(i * kBlocksPerSeq + j);
    hb.max_seqlen_q = std::max(hb.max_seqlen_q, q[size_t(i)]);
    hb.max_seqlen_k = std::max(hb.max_seqlen_k, hb.context_lens.back());
  }
  hb.num_tokens = int(hb.input_ids.size());
  hb.decode_only = hb.num_tokens == n;
  return hb;
}

// Speculative decoding's verification steps (1..1+K rows per sequence) replay verification
// graphs (bucket x q_max rows, padding rows zeroed) and give what the eager forward gives.
TEST(GpuExecutor, VerificationGraphMatchesEager) {
  NV_NEED_GPU();
  auto* be = backend();
  const std::string dir = write_model();
  const ModelConfig mc = ModelConfig::from_dir(dir);
  DecoderModel model(mc, *be, WeightStore::open_dir(dir), kMaxLen);
  KVCache kv = KVCache::allocate(*be, mc, kSeqs * kBlocksPerSeq, kBlock);
  fs::remove_all(dir);
  std::vector<int> lens(kSeqs);
  for (auto& l : lens) l = 1 + int(rng()() % (kMaxLen - 8));
  model.forward_hidden(be->upload_batch(prefill_batch(lens)), kv);

  StepExecutorOptions o;
  o.max_num_seqs = kSeqs;
  o.max_model_len = kMaxLen;
  o.block_size = kBlock;
  o.spec_query_len = 5;  // K = 4
  o.spec_max_batch = 8;
  o.verbose = false;
  StepForward fwd = [&](const BatchTensors& b) { return model.forward_hidden(b, kv); };
  auto ex = make_step_executor(*be, fwd, o);
  ASSERT_STREQ(ex->name(), "cuda-graph");
  auto& alloc = be->allocator();
  for (int pass = 0; pass < 2; ++pass) {
    for (const std::vector<int>& q : std::vector<std::vector<int>>{
             {5}, {1}, {2, 5, 1}, {5, 5, 5, 5}, {3, 1, 1, 4, 2, 5, 1, 2}, {1, 1, 1, 1, 1, 1, 1, 1, 1}}) {
      const HostBatch hb = verify_batch(q, lens);
      const bool fits = int(q.size()) <= 8;  // above the speculation cap: a decode graph or eager
      const int64_t g0 = ex->graph_steps();
      // Layer 0's keys before the replay: padding rows (slot -1) must not store any.
      const auto k_before = download(kv.k[0]);
      be->synchronize();
      const size_t cur0 = alloc.current_bytes(), res0 = alloc.reserved_bytes();
      Tensor hg = ex->run(hb);
      if (fits) {
        EXPECT_EQ(alloc.current_bytes(), cur0) << "rows " << hb.num_tokens;
        EXPECT_EQ(alloc.reserved_bytes(), res0) << "rows " << hb.num_tokens;
      }
      {
        const auto k_after = download(kv.k[0]);
        const int64_t per_slot = int64_t(k_after.size()) / (int64_t(kSeqs) * kBlocksPerSeq * kBlock);
        std::vector<bool> written(size_t(kSeqs) * kBlocksPerSeq * kBlock, false);
        for (int32_t s : hb.slot_mapping) written[size_t(s)] = true;
        int64_t changed_elsewhere = 0;
        for (size_t s = 0; s < written.size(); ++s)
          if (!written[s])
            for (int64_t c = 0; c < per_slot; ++c)
              changed_elsewhere += std::memcmp(&k_after[s * size_t(per_slot) + size_t(c)],
                                               &k_before[s * size_t(per_slot) + size_t(c)],
                                               sizeof(float)) != 0;  // bits: NaN-safe
        EXPECT_EQ(changed_elsewhere, 0) << "keys outside the batch's slots changed";
      }
      EXPECT_EQ(ex->graph_steps(), g0 + 1) << "rows " << hb.num_tokens;  // 9 x 1: decode graph
      ASSERT_EQ(hg.size(0), hb.num_tokens);
      const auto logits_g = download(model.compute_logits(hg));
      const auto logits_e = download(model.compute_logits(model.forward_hidden(be->upload_batch(hb), kv)));
      EXPECT_LE(rel_err(logits_g, as_double(logits_e)), 2e-2) << "rows " << hb.num_tokens;
      for (int r = 0; r < hb.num_tokens; ++r) {
        auto row_e = logits_e.begin() + int64_t(r) * kV, row_g = logits_g.begin() + int64_t(r) * kV;
        for (int64_t c = 0; c < kV; ++c) ASSERT_TRUE(std::isfinite(row_g[c])) << "row " << r;
        const auto te = std::max_element(row_e, row_e + kV) - row_e;
        const auto tg = std::max_element(row_g, row_g + kV) - row_g;
        if (te != tg) {
          EXPECT_LE(std::abs(row_e[te] - row_e[tg]), 2e-2 * std::abs(row_e[te]))
              << "row " << r << ": top-1 " << tg << " vs eager " << te;
        }
      }
    }
  }
  // Nine speculating sequences exceed the cap's buckets: eager.
  const int64_t e0 = ex->eager_steps();
  (void)download(ex->run(verify_batch({2, 2, 2, 2, 2, 2, 2, 2, 2}, lens)));
  EXPECT_EQ(ex->eager_steps(), e0 + 1);
}

TEST(GpuExecutor, EnforceEagerCapturesNothing) {
  NV_NEED_GPU();
  auto* be = backend();
  const size_t pool0 = be->allocator().graph_pool_bytes();
  StepExecutorOptions o;
  o.enforce_eager = true;
  auto ex = make_step_executor(*be, [](const BatchTensors&) { return Tensor(); }, o);
  EXPECT_STREQ(ex->name(), "eager");
  EXPECT_EQ(ex->graph_pool_bytes(), 0);
  EXPECT_EQ(be->allocator().graph_pool_bytes(), pool0);
}

}  // namespace
}  // namespace nanovllm::gputest
