// Step executors on the CPU: which executor a backend and the config select (enforce_eager
// honoured, CPU always eager), that the split forward (forward_hidden + compute_logits) gives
// the logits the whole forward gives, and the executor fields of the engine's statistics.
// The CUDA-graph executor itself is tested in tests/gpu/executor_gpu_test.cc.
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/model_runner.h"
#include "engine/stats_json.h"
#include "kernels/backend_factory.h"
#include "kernels/eager_executor.h"
#include "loader/weight_store.h"
#include "models/decoder.h"
#include "nanovllm/llm.h"
#include "random_model.h"

using namespace nanovllm;

namespace {

std::string tiny_model() { return random_tiny_model(); }

// A backend whose ops are never called: it only offers (or not) a graph executor.
class FakeGraphExecutor final : public StepExecutor {
 public:
  const char* name() const override { return "fake-graph"; }
  Tensor run(const HostBatch&) override { return Tensor(); }
};
class FakeBackend final : public Backend {
 public:
  explicit FakeBackend(bool has_graphs) : has_graphs_(has_graphs) {}
  int graph_requests = 0;
  std::unique_ptr<StepExecutor> make_graph_executor(const StepForward&,
                                                    const StepExecutorOptions&) override {
    ++graph_requests;
    if (!has_graphs_) return nullptr;
    return std::make_unique<FakeGraphExecutor>();
  }
  Device device() const override { return Device::CUDA; }
  std::string name() const override { return "fake"; }
  DType act_dtype() const override { return DType::F32; }
#define NV_FAKE_OP(sig) \
  sig override { NV_THROW("FakeBackend op called"); }
  NV_FAKE_OP(Tensor empty(const Shape&, DType))
  NV_FAKE_OP(Tensor to_device(const Tensor&))
  NV_FAKE_OP(Tensor to_host(const Tensor&))
  NV_FAKE_OP(BatchTensors upload_batch_impl(const HostBatch&))
  NV_FAKE_OP(void embedding_impl(const Tensor&, const Tensor&, int64_t, Tensor&, float))
  NV_FAKE_OP(void rms_norm_impl(const Tensor&, const Tensor&, float, Tensor&))
  NV_FAKE_OP(void add_rms_norm_impl(Tensor&, Tensor&, const Tensor&, float))
  NV_FAKE_OP(void linear_impl(const Tensor&, const Tensor&, const Tensor*, Tensor&))
  NV_FAKE_OP(void act_and_mul_impl(const Tensor&, GatedAct, Tensor&))
  NV_FAKE_OP(void qk_norm_rope_impl(Tensor&, const Tensor&, const Tensor*, const Tensor*, float,
                               const Tensor&, const AttentionParams&))
  NV_FAKE_OP(void store_kv_impl(const Tensor&, const Tensor&, Tensor&, Tensor&, const AttentionParams&))
  NV_FAKE_OP(void attention_impl(const Tensor&, const Tensor&, const Tensor&, const BatchTensors&,
                            const AttentionParams&, Tensor&))
  NV_FAKE_OP(void gather_rows_impl(const Tensor&, const Tensor&, Tensor&))
  NV_FAKE_OP(void add_inplace_impl(Tensor&, const Tensor&))
  NV_FAKE_OP(void moe_route_impl(const Tensor&, int, bool, Tensor&, Tensor&))
  NV_FAKE_OP(void moe_experts_impl(const Tensor&, const MoeExperts&, const Tensor&, const Tensor&, Tensor&))
  NV_FAKE_OP(SampleResult sample(const Tensor&, const SamplingBatch&))
#undef NV_FAKE_OP
 private:
  bool has_graphs_;
};

StepForward no_forward() {
  return [](const BatchTensors&) -> Tensor { NV_THROW("forward not expected"); };
}

TEST(StepExecutor, SelectionHonoursEnforceEager) {
  StepExecutorOptions o;
  {
    FakeBackend be(true);
    EXPECT_STREQ(make_step_executor(be, no_forward(), o)->name(), "fake-graph");
    EXPECT_EQ(be.graph_requests, 1);
  }
  {
    FakeBackend be(true);
    o.enforce_eager = true;  // the backend is not even asked (no capture)
    EXPECT_STREQ(make_step_executor(be, no_forward(), o)->name(), "eager");
    EXPECT_EQ(be.graph_requests, 0);
    o.enforce_eager = false;
  }
  {
    FakeBackend be(false);  // a backend without graphs: eager
    EXPECT_STREQ(make_step_executor(be, no_forward(), o)->name(), "eager");
    EXPECT_EQ(be.graph_requests, 1);
  }
  auto cpu = make_cpu_backend(1);  // CPU: eager whatever the option
  for (bool eager : {false, true}) {
    o.enforce_eager = eager;
    auto ex = make_step_executor(*cpu, no_forward(), o);
    EXPECT_STREQ(ex->name(), "eager");
    EXPECT_EQ(ex->graph_pool_bytes(), 0);
    EXPECT_TRUE(ex->graph_batch_sizes().empty());
  }
}

// Two prompts (5 and 7 tokens) in one prefill step, blocks 0 and 1 (block_size 16).
HostBatch two_prompt_prefill(const std::vector<int>& logits_rows) {
  HostBatch hb;
  const int lens[] = {5, 7};
  hb.num_seqs = 2;
  hb.block_size = 16;
  hb.block_table_stride = 1;
  hb.block_tables = {0, 1};
  hb.cu_seqlens_q = {0};
  for (int b = 0; b < 2; ++b) {
    for (int p = 0; p < lens[b]; ++p) {
      hb.input_ids.push_back(3 + 17 * b + 5 * p);
      hb.positions.push_back(p);
      hb.slot_mapping.push_back(16 * b + p);
    }
    hb.cu_seqlens_q.push_back(hb.cu_seqlens_q.back() + lens[b]);
    hb.context_lens.push_back(lens[b]);
  }
  hb.num_tokens = 12;
  hb.max_seqlen_q = hb.max_seqlen_k = 7;
  hb.logits_indices.assign(logits_rows.begin(), logits_rows.end());
  return hb;
}

TEST(StepExecutor, SplitForwardEqualsTheWholeForward) {
  const ModelConfig mc = ModelConfig::from_dir(tiny_model());
  auto be = make_cpu_backend(2);
  WeightStore ws = WeightStore::open_dir(tiny_model());
  DecoderModel model(mc, *be, ws, 64);
  KVCache kv = KVCache::allocate(*be, mc, 2, 16);

  // Every row through forward(): the reference.
  const HostBatch all = two_prompt_prefill({0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  const Tensor ref = model.forward(be->upload_batch(all), kv);
  ASSERT_EQ(ref.size(0), 12);
  ASSERT_EQ(ref.size(1), mc.vocab_size);

  // Only the last row of each prompt, through the eager executor + compute_logits.
  StepExecutorOptions o;
  auto ex = make_step_executor(
      *be, [&](const BatchTensors& b) { return model.forward_hidden(b, kv); }, o);
  const HostBatch last = two_prompt_prefill({4, 11});
  const Tensor hidden = ex->run(last);
  ASSERT_EQ(hidden.size(0), 2);
  ASSERT_EQ(hidden.size(1), mc.hidden_size);
  EXPECT_EQ(hidden.dtype(), be->act_dtype());
  const Tensor logits = model.compute_logits(hidden);
  EXPECT_EQ(logits.dtype(), DType::F32);
  EXPECT_EQ(ex->eager_steps(), 1);
  EXPECT_EQ(ex->graph_steps(), 0);
  const int64_t V = mc.vocab_size;
  for (int r = 0; r < 2; ++r) {
    const float* got = logits.data<float>() + r * V;
    const float* want = ref.data<float>() + (r == 0 ? 4 : 11) * V;
    double max_err = 0, max_ref = 0;
    for (int64_t v = 0; v < V; ++v) {
      max_err = std::max(max_err, double(std::fabs(got[v] - want[v])));
      max_ref = std::max(max_ref, double(std::fabs(want[v])));
    }
    // The same computation; only the LM head GEMM's row count differs (2 vs 12 rows).
    EXPECT_LE(max_err, 1e-5 * std::max(1.0, max_ref)) << "row " << r;
  }
  EXPECT_THROW(model.compute_logits(Tensor::empty({2, mc.hidden_size + 1}, DType::F32)), Error);
}

TEST(StepExecutor, EngineStatsNameTheExecutor) {
  for (bool eager : {false, true}) {
    Config c;
    c.model = tiny_model();
    c.device = "cpu";
    c.num_threads = 2;
    c.max_model_len = 128;
    c.kvcache_block_size = 16;
    c.num_kvcache_blocks = 64;
    c.max_num_batched_tokens = 512;
    c.enforce_eager = eager;
    LLM llm(c);
    SamplingParams sp;
    sp.temperature = 0;
    sp.max_tokens = 4;
    sp.ignore_eos = true;
    auto outs = llm.generate({Prompt(std::vector<int>{1, 2, 3})}, {sp});
    ASSERT_EQ(outs.size(), 1u);
    EXPECT_EQ(outs[0].token_ids.size(), 4u);
    const EngineStats& s = llm.stats();
    EXPECT_EQ(s.executor, "eager");
    EXPECT_EQ(s.graph_pool_bytes, 0);
    EXPECT_EQ(s.graph_steps, 0);
    const auto j = to_json(s);
    EXPECT_EQ(j.at("executor"), "eager");
    EXPECT_EQ(j.at("graph_pool_bytes"), 0);
    EXPECT_EQ(j.at("graph_steps"), 0);
  }
}

}  // namespace
