// The sharding rules (models/tp_shard.h) with their error messages, the per-step message and
// the config hand-over between ranks, and the CLI-facing errors of a bad group.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/config_json.h"
#include "engine/step_channel.h"
#include "models/tp_shard.h"
#include "nanovllm/llm.h"
#include "tp_test_util.h"

using namespace nanovllm;
using ::testing::HasSubstr;

namespace {

ModelConfig shape(int hq, int hkv, int inter, int vocab) {
  ModelConfig c;
  c.num_attention_heads = hq;
  c.num_key_value_heads = hkv;
  c.intermediate_size = inter;
  c.vocab_size = vocab;
  c.hidden_size = 64;
  c.head_dim = 16;
  return c;
}

std::string plan_error(const ModelConfig& c, int world) {
  try {
    TpShard::plan(c, 0, world);
  } catch (const Error& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST(TpShard, SplitsHeadsIntermediateAndVocab) {
  const ModelConfig c = shape(8, 4, 172, 512);
  for (int r = 0; r < 2; ++r) {
    const TpShard s = TpShard::plan(c, r, 2);
    EXPECT_EQ(s.num_q_heads, 4);
    EXPECT_EQ(s.q_head_begin, 4 * r);
    EXPECT_EQ(s.num_kv_heads, 2);
    EXPECT_EQ(s.kv_head_begin, 2 * r);
    EXPECT_EQ(s.intermediate, 86);
    EXPECT_EQ(s.vocab_rows, 256);
    EXPECT_EQ(s.vocab_begin, 256 * r);
  }
}

// vLLM's replication: fewer KV heads than ranks puts KV head r / (N / Hkv) on rank r, the one
// its query heads (GQA group Hq / Hkv) attend to.
TEST(TpShard, ReplicatesKvHeadsWhenFewerThanRanks) {
  const ModelConfig c = shape(8, 2, 64, 100);
  const int want_kv[4] = {0, 0, 1, 1};
  for (int r = 0; r < 4; ++r) {
    const TpShard s = TpShard::plan(c, r, 4);
    EXPECT_EQ(s.num_q_heads, 2);
    EXPECT_EQ(s.num_kv_heads, 1);
    EXPECT_EQ(s.kv_head_begin, want_kv[r]) << "rank " << r;
    EXPECT_EQ(s.q_head_begin / (8 / 2), s.kv_head_begin);
  }
  const TpShard one = TpShard::plan(shape(8, 1, 64, 100), 3, 8);  // MQA on 8 ranks
  EXPECT_EQ(one.num_kv_heads, 1);
  EXPECT_EQ(one.kv_head_begin, 0);
}

TEST(TpShard, PadsTheVocabularyOfTheLastRank) {
  const ModelConfig c = shape(4, 2, 64, 1001);
  const TpShard last = TpShard::plan(c, 3, 4);
  EXPECT_EQ(last.vocab_rows, 251);  // ceil(1001 / 4); rows 1001..1003 are padding
  EXPECT_EQ(last.vocab_begin, 753);
}

TEST(TpShard, RejectsShapesThatDoNotDivideWithClearErrors) {
  EXPECT_THAT(plan_error(shape(8, 4, 172, 512), 3),
              HasSubstr("tensor_parallel_size 3 does not divide the model's num_attention_heads (8)"));
  EXPECT_THAT(plan_error(shape(12, 6, 96, 512), 4),
              HasSubstr("tensor_parallel_size 4 does not divide the model's num_key_value_heads (6)"));
  EXPECT_THAT(plan_error(shape(12, 4, 96, 512), 6),
              HasSubstr("exceeds the model's num_key_value_heads (4) and is not a multiple"));
  EXPECT_THAT(plan_error(shape(8, 4, 172, 512), 8),
              HasSubstr("does not divide the model's intermediate_size (172)"));
  EXPECT_THAT(plan_error(shape(8, 4, 172, 512), 0), HasSubstr("outside [0, 0)"));
}

TEST(StepChannel, EncodesEveryFieldOfTheBatch) {
  HostBatch hb;
  hb.input_ids = {5, 6, 7};
  hb.positions = {0, 1, 9};
  hb.slot_mapping = {16, 17, -1};
  hb.cu_seqlens_q = {0, 2, 3};
  hb.context_lens = {2, 10};
  hb.block_tables = {1, -1, 3, 4};
  hb.logits_indices = {1, 2};
  hb.num_seqs = 2;
  hb.num_tokens = 3;
  hb.max_seqlen_q = 2;
  hb.max_seqlen_k = 10;
  hb.block_size = 16;
  hb.block_table_stride = 2;
  hb.decode_only = false;
  const std::vector<int32_t> w = encode_step(hb);
  const HostBatch back = decode_step(w.data(), w.size());
  EXPECT_EQ(back.input_ids, hb.input_ids);
  EXPECT_EQ(back.positions, hb.positions);
  EXPECT_EQ(back.slot_mapping, hb.slot_mapping);
  EXPECT_EQ(back.cu_seqlens_q, hb.cu_seqlens_q);
  EXPECT_EQ(back.context_lens, hb.context_lens);
  EXPECT_EQ(back.block_tables, hb.block_tables);
  EXPECT_EQ(back.logits_indices, hb.logits_indices);
  EXPECT_EQ(std::tie(back.num_seqs, back.num_tokens, back.max_seqlen_q, back.max_seqlen_k,
                     back.block_size, back.block_table_stride, back.decode_only),
            std::tie(hb.num_seqs, hb.num_tokens, hb.max_seqlen_q, hb.max_seqlen_k, hb.block_size,
                     hb.block_table_stride, hb.decode_only));
  std::vector<int32_t> cut(w.begin(), w.end() - 1);
  EXPECT_THROW(decode_step(cut.data(), cut.size()), Error);
}

TEST(ConfigJson, RoundTripsEveryField) {
  Config c;
  c.model = "/m";
  c.max_num_batched_tokens = 1;
  c.max_num_seqs = 2;
  c.max_model_len = 3;
  c.gpu_memory_utilization = 0.5f;
  c.tensor_parallel_size = 4;
  c.dist_init_addr = "h:1";
  c.worker_command = {"a", "b"};
  c.dist_timeout_s = 7;
  c.enforce_eager = true;
  c.kvcache_block_size = 32;
  c.num_kvcache_blocks = 9;
  c.cpu_kvcache_bytes = 10;
  c.cpu_kvcache_fraction = 0.25f;
  c.device = "cpu";
  c.policy = "mixed";
  c.enable_prefix_caching = false;
  c.num_threads = 3;
  c.quantization = "int4";
  c.lm_head_quantization = "none";
  c.kv_cache_dtype = "bf16";
  c.max_waiting = 11;
  c.allow_nonfinite_weights = true;
  c.trace_path = "/t.json";
  c.backend.num_threads = 5;
  c.backend.spin_us = 6;
  c.backend.adaptive_threads = false;
  c.backend.cpu_weight_copy = false;
  c.backend.linear_path = LinearPath::kBlas;
  c.backend.isa = IsaCap::kAvx2;
  c.backend.cuda_prefill = CudaPrefill::kTensorCore;
  c.backend.cuda_decode = CudaDecode::kV1;  // not the default (v2)
  const std::string j = config_to_json(c);
  EXPECT_EQ(config_to_json(config_from_json(j)), j);
  // Every field is in the JSON with its changed value (none left at its default).
  const Config d;
  EXPECT_NE(config_to_json(d), j);
  for (const char* f : {"\"num_threads\":5", "\"spin_us\":6", "\"adaptive_threads\":false",
                        "\"cpu_weight_copy\":false", "\"linear_path\":\"blas\"", "\"isa\":\"avx2\"",
                        "\"cuda_prefill\":\"tc\"", "\"cuda_decode\":\"v1\""})
    EXPECT_THAT(j, HasSubstr(f));
  const Config back = config_from_json(j);
  EXPECT_EQ(back.backend.linear_path, LinearPath::kBlas);
  EXPECT_EQ(back.backend.spin_us, 6);
  EXPECT_THROW(config_from_json("{\"model\": 3}"), Error);
}

TEST(TensorParallel, BadGroupsAreClearErrors) {
  auto err = [](Config c) {
    try {
      LLM llm(c);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string m = tp_test::random_model("qwen3");  // 4 heads, 2 KV heads
  Config c = tp_test::tp_config(m, 3);
  EXPECT_THAT(err(c), HasSubstr("tensor_parallel_size 3 does not divide the model's num_attention_heads (4)"));
  c = tp_test::tp_config(m, 2);
  c.worker_command = {};
  EXPECT_THAT(err(c), HasSubstr("no worker command"));
  c.worker_command = {"/bin/false"};  // starts, exits at once: rank 0 must not wait it out
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_THAT(err(c), HasSubstr("worker rank 1 (pid"));
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(30));
  c.dist_timeout_s = 0;
  EXPECT_THAT(err(c), HasSubstr("dist_timeout_s must be > 0"));
}
