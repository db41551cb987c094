// Tensor parallelism end to end on the CPU backend, with real worker processes (the built
// `nanovllm worker`): TP = 2 (and 4 where the shapes allow) must give the logits of TP = 1
// within 1e-5 relative and the same greedy tokens, on stories260K (8 heads, 4 KV heads), random
// Qwen3 / Qwen2 (q/k/v bias) / Llama models (4 heads, 2 KV heads: TP 4 replicates KV heads) and
// an untied, odd-vocabulary Qwen2 (padded vocab shards); with prefix caching, preemption and
// the mixed policy's chunked prefill.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "engine/model_runner.h"
#include "nanovllm/llm.h"
#include "tp_test_util.h"

using namespace nanovllm;
using namespace nanovllm::tp_test;

namespace {

// Two sequences prefilling 7 and 12 tokens (blocks {0} and {1, 2}), then one decode step each.
HostBatch prefill_batch(int vocab) {
  HostBatch hb;
  hb.block_size = 16;
  hb.block_table_stride = 2;
  hb.num_seqs = 2;
  hb.cu_seqlens_q = {0};
  const std::vector<std::vector<int>> tables = {{0, -1}, {1, 2}};
  const int lens[2] = {7, 12};
  for (int b = 0; b < 2; ++b) {
    for (int p = 0; p < lens[b]; ++p) {
      hb.input_ids.push_back((37 * (p + 1) + 101 * b) % vocab);
      hb.positions.push_back(p);
      hb.slot_mapping.push_back(tables[size_t(b)][size_t(p / 16)] * 16 + p % 16);
    }
    hb.cu_seqlens_q.push_back(hb.cu_seqlens_q.back() + lens[b]);
    hb.context_lens.push_back(lens[b]);
    hb.block_tables.insert(hb.block_tables.end(), tables[size_t(b)].begin(), tables[size_t(b)].end());
    hb.logits_indices.push_back(hb.cu_seqlens_q.back() - 1);
  }
  hb.num_tokens = 19;
  hb.max_seqlen_q = hb.max_seqlen_k = 12;
  return hb;
}

HostBatch decode_batch(int vocab) {
  HostBatch hb;
  hb.block_size = 16;
  hb.block_table_stride = 2;
  hb.num_seqs = 2;
  hb.input_ids = {5 % vocab, 9 % vocab};
  hb.positions = {7, 12};
  hb.slot_mapping = {7, 16 + 12};
  hb.cu_seqlens_q = {0, 1, 2};
  hb.context_lens = {8, 13};
  hb.block_tables = {0, -1, 1, 2};
  hb.logits_indices = {0, 1};
  hb.num_tokens = 2;
  hb.max_seqlen_q = 1;
  hb.max_seqlen_k = 13;
  hb.decode_only = true;
  return hb;
}

std::vector<std::vector<float>> step_logits(const std::string& model, int tp) {
  Config c = tp_config(model, tp);
  const ModelConfig mc = ModelConfig::from_dir(model);
  c.max_model_len = std::min(c.max_model_len, mc.max_position_embeddings);
  ModelRunner runner(resolve(c), mc);
  EXPECT_EQ(runner.world_size(), tp);
  std::vector<std::vector<float>> out;
  for (const HostBatch& hb : {prefill_batch(mc.vocab_size), decode_batch(mc.vocab_size)}) {
    Tensor logits = runner.backend().to_host(runner.run(hb));
    EXPECT_EQ(logits.size(1), mc.vocab_size);
    for (int64_t s = 0; s < logits.size(0); ++s)
      out.emplace_back(logits.data<float>() + s * logits.size(1),
                       logits.data<float>() + (s + 1) * logits.size(1));
  }
  return out;
}

// Per row: max |tp - ref| <= 1e-5 * max |ref| (relative to the row's scale: elementwise
// relative error is meaningless for logits near 0).
void expect_logits_match(const std::string& model, int tp) {
  const auto ref = step_logits(model, 1), got = step_logits(model, tp);
  ASSERT_EQ(ref.size(), got.size());
  for (size_t r = 0; r < ref.size(); ++r) {
    ASSERT_EQ(ref[r].size(), got[r].size());
    float scale = 0, diff = 0;
    for (size_t i = 0; i < ref[r].size(); ++i) {
      scale = std::max(scale, std::fabs(ref[r][i]));
      diff = std::max(diff, std::fabs(ref[r][i] - got[r][i]));
    }
    EXPECT_GT(scale, 0.f);
    EXPECT_LE(diff, 1e-5f * scale) << model << " TP " << tp << " row " << r << ": max diff "
                                   << diff << " vs row scale " << scale;
  }
}

// Six prompts, three sharing a 40-token prefix (prefix-cache hits at block size 16).
std::vector<std::vector<int>> workload_prompts(int vocab) {
  std::mt19937 rng(5);
  auto tok = [&] { return std::uniform_int_distribution<int>(3, std::min(vocab, 4000) - 1)(rng); };
  std::vector<int> prefix(40);
  for (int& t : prefix) t = tok();
  std::vector<std::vector<int>> ps;
  for (int i = 0; i < 6; ++i) {
    std::vector<int> p = i < 3 ? prefix : std::vector<int>();
    const int extra = 8 + 9 * i;
    for (int k = 0; k < extra; ++k) p.push_back(tok());
    ps.push_back(p);
  }
  return ps;
}

struct RunResult {
  std::vector<std::vector<int>> tokens;
  EngineStats stats;
};

RunResult generate(const Config& c, const std::vector<std::vector<int>>& prompts) {
  LLM llm(c);
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = 24;
  sp.ignore_eos = true;
  std::vector<Prompt> ps(prompts.begin(), prompts.end());
  RunResult r;
  for (auto& o : llm.generate(ps, {sp})) {
    EXPECT_EQ(o.finish_reason, "length") << o.error;
    r.tokens.push_back(o.token_ids);
  }
  r.stats = llm.stats();
  return r;
}

// Prefix caching with a cache small enough to preempt (14 blocks of 16 for six sequences of up
// to ~120 tokens), and the mixed policy with a 32-token budget (chunked prefill).
void expect_tokens_match(const std::string& model, const std::vector<int>& tps,
                         const std::string& kv = "auto") {
  const int vocab = ModelConfig::from_dir(model).vocab_size;
  const auto prompts = workload_prompts(vocab);
  auto preempting = [&](int tp) {
    Config c = tp_config(model, tp);
    c.kv_cache_dtype = kv;
    c.num_kvcache_blocks = 14;
    return c;
  };
  auto mixed = [&](int tp) {
    Config c = tp_config(model, tp);
    c.kv_cache_dtype = kv;
    c.policy = "mixed";
    c.max_num_batched_tokens = 32;
    return c;
  };
  const RunResult ref = generate(preempting(1), prompts), ref_mixed = generate(mixed(1), prompts);
  EXPECT_GT(ref.stats.preemptions, 0) << "the workload must preempt";
  EXPECT_GT(ref.stats.prefix_cache_hit_tokens, 0) << "the workload must hit the prefix cache";
  for (int tp : tps) {
    const RunResult got = generate(preempting(tp), prompts);
    EXPECT_EQ(got.tokens, ref.tokens) << model << " TP " << tp << " (prefix caching, preemption)";
    EXPECT_EQ(got.stats.preemptions, ref.stats.preemptions);
    EXPECT_EQ(got.stats.prefix_cache_hit_tokens, ref.stats.prefix_cache_hit_tokens);
    EXPECT_EQ(generate(mixed(tp), prompts).tokens, ref_mixed.tokens)
        << model << " TP " << tp << " (mixed policy, chunked prefill)";
  }
}

}  // namespace

TEST(SharedData_TensorParallel, Stories260KLogitsAndTokens) {
  if (!have_stories()) GTEST_SKIP() << "shared data absent: " << stories_dir();
  expect_logits_match(stories_dir(), 2);
  expect_logits_match(stories_dir(), 4);
  expect_tokens_match(stories_dir(), {2, 4});
}

TEST(TensorParallel, Qwen3LogitsAndTokensWithReplicatedKvHeads) {
  const std::string m = random_model("qwen3");
  expect_logits_match(m, 2);
  expect_logits_match(m, 4);  // 2 KV heads on 4 ranks: each KV head on two ranks
  expect_tokens_match(m, {2, 4});
}

// An int8 KV cache: each rank quantizes its own KV heads' rows (per token and head, so the
// split changes no scale) -- the same greedy tokens as one rank.
TEST(TensorParallel, Int8KvCache) { expect_tokens_match(random_model("qwen3"), {2}, "int8"); }

TEST(TensorParallel, Qwen2WithQkvBias) {
  const std::string m = random_model("qwen2");
  expect_logits_match(m, 2);
  expect_tokens_match(m, {2});
}

TEST(TensorParallel, Llama) {
  const std::string m = random_model("llama");
  expect_logits_match(m, 2);
  expect_tokens_match(m, {2});
}

// attention_bias: q/k/v biases column-parallel, the row-parallel o_proj's bias added once (rank 0).
TEST(TensorParallel, Qwen3WithAttentionBiasIncludingOProj) {
  const std::string m = random_model("qwen3", /*attention_bias=*/true);
  expect_logits_match(m, 2);
  expect_tokens_match(m, {2});
}

TEST(TensorParallel, UntiedLmHeadAndPaddedVocabulary) {
  const std::string m = untied_odd_vocab_model();
  expect_logits_match(m, 2);
  expect_logits_match(m, 4);
  expect_tokens_match(m, {2});
}

// Qwen3-MoE (tiny: layer 0 sparse, 8 experts top 2; layer 1 dense): every rank holds every
// expert's slice of moe_intermediate_size / N, the router is replicated, and the experts' partial
// outputs are summed by the all-reduce after the block. The routing is computed on each rank
// from the same (all-reduced) hidden states, so it agrees across ranks.
TEST(TensorParallel, Qwen3MoeExpertsSliced) {
  const std::string m = random_model("qwen3_moe");
  expect_logits_match(m, 2);
  expect_logits_match(m, 4);
  expect_tokens_match(m, {2});
}
