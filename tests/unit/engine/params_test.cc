#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/model_runner.h"
#include "engine/resolved_config.h"
#include "nanovllm/config.h"
#include "nanovllm/sampling_params.h"
#include "util/check.h"

namespace nanovllm {
namespace {

using ::testing::HasSubstr;

std::string error_of(const SamplingParams& p) {
  try {
    p.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

std::string error_of(const Config& c) {
  try {
    c.validate();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SamplingParams, DefaultsAndEdgesAreValid) {
  SamplingParams p;
  EXPECT_EQ(error_of(p), "");
  p.temperature = 0;
  p.top_k = 0;
  p.top_p = 1;
  p.min_p = 1;
  p.max_tokens = 1;
  p.min_tokens = 1;
  p.logprobs = 20;
  p.stop = {"x"};
  EXPECT_EQ(error_of(p), "");
  p.top_k = -1;
  p.logprobs = -1;
  EXPECT_EQ(error_of(p), "");
}

TEST(SamplingParams, InvalidValuesNameParameterAndValue) {
  auto with = [](auto f) {
    SamplingParams p;
    f(p);
    return error_of(p);
  };
  EXPECT_THAT(with([](auto& p) { p.top_p = 1.5f; }), HasSubstr("top_p must be in (0, 1], got 1.5"));
  EXPECT_THAT(with([](auto& p) { p.top_p = 0.f; }), HasSubstr("top_p must be in (0, 1], got 0"));
  EXPECT_THAT(with([](auto& p) { p.temperature = -0.5f; }), HasSubstr("temperature"));
  EXPECT_THAT(with([](auto& p) { p.temperature = std::numeric_limits<float>::infinity(); }),
              HasSubstr("temperature"));
  EXPECT_THAT(with([](auto& p) { p.temperature = std::numeric_limits<float>::quiet_NaN(); }),
              HasSubstr("temperature"));
  EXPECT_THAT(with([](auto& p) { p.top_k = -2; }), HasSubstr("top_k"));
  EXPECT_THAT(with([](auto& p) { p.min_p = 1.25f; }), HasSubstr("min_p must be in [0, 1], got 1.25"));
  EXPECT_THAT(with([](auto& p) { p.max_tokens = 0; }), HasSubstr("max_tokens must be >= 1, got 0"));
  EXPECT_THAT(with([](auto& p) { p.min_tokens = 65; }), HasSubstr("min_tokens"));
  EXPECT_THAT(with([](auto& p) { p.min_tokens = -1; }), HasSubstr("min_tokens"));
  EXPECT_THAT(with([](auto& p) { p.logprobs = 21; }), HasSubstr("logprobs must be in [-1, 20], got 21"));
  EXPECT_THAT(with([](auto& p) { p.stop = {"ok", ""}; }), HasSubstr("stop"));
  EXPECT_THAT(with([](auto& p) { p.presence_penalty = 2.5f; }),
              HasSubstr("presence_penalty must be in [-2, 2], got 2.5"));
  EXPECT_THAT(with([](auto& p) { p.frequency_penalty = -2.01f; }),
              HasSubstr("frequency_penalty must be in [-2, 2], got -2.01"));
  EXPECT_THAT(with([](auto& p) { p.frequency_penalty = std::nanf(""); }),
              HasSubstr("frequency_penalty"));
  EXPECT_THAT(with([](auto& p) { p.repetition_penalty = 0.f; }),
              HasSubstr("repetition_penalty must be finite and > 0, got 0"));
  EXPECT_THAT(with([](auto& p) { p.logit_bias = {{5, 100.5f}}; }),
              HasSubstr("logit_bias values must be in [-100, 100], got 100.5 for token 5"));
  EXPECT_THAT(with([](auto& p) { p.logit_bias = {{-1, 1.f}}; }),
              HasSubstr("logit_bias token ids must be >= 0, got -1"));
}

TEST(SamplingParams, PenaltyEdgesAreValid) {
  SamplingParams p;
  p.presence_penalty = -2.f;
  p.frequency_penalty = 2.f;
  p.repetition_penalty = 0.01f;
  p.logit_bias = {{0, -100.f}, {7, 100.f}};
  EXPECT_EQ(error_of(p), "");
}

TEST(Config, ValidateChecksEveryField) {
  EXPECT_EQ(error_of(Config{}), "");
  auto with = [](auto f) {
    Config c;
    f(c);
    return error_of(c);
  };
  EXPECT_THAT(with([](auto& c) { c.kvcache_block_size = 24; }),
              HasSubstr("kvcache_block_size must be a positive multiple of 16, got 24"));
  EXPECT_THAT(with([](auto& c) { c.kvcache_block_size = 0; }), HasSubstr("kvcache_block_size"));
  EXPECT_EQ(with([](auto& c) { c.kvcache_block_size = 16; }), "");
  EXPECT_THAT(with([](auto& c) { c.max_num_seqs = 0; }), HasSubstr("max_num_seqs"));
  EXPECT_THAT(with([](auto& c) { c.max_num_batched_tokens = 0; }), HasSubstr("max_num_batched_tokens"));
  EXPECT_THAT(with([](auto& c) { c.max_model_len = 0; }), HasSubstr("max_model_len"));
  EXPECT_THAT(with([](auto& c) { c.tensor_parallel_size = 0; }), HasSubstr("tensor_parallel_size"));
  EXPECT_EQ(with([](auto& c) { c.tensor_parallel_size = 2; }), "");  // real ranks since issue 15
  EXPECT_THAT(with([](auto& c) { c.dist_timeout_s = 0; }), HasSubstr("dist_timeout_s must be > 0, got 0"));
  EXPECT_THAT(with([](auto& c) { c.policy = "fifo"; }), HasSubstr("policy must be prefill-first or mixed, got 'fifo'"));
  EXPECT_EQ(with([](auto& c) { c.policy = "mixed"; }), "");
  EXPECT_THAT(with([](auto& c) { c.device = "tpu"; }), HasSubstr("device"));
  EXPECT_EQ(with([](auto& c) { c.device = "cpu"; }), "");
  EXPECT_THAT(with([](auto& c) { c.gpu_memory_utilization = 0.f; }), HasSubstr("gpu_memory_utilization"));
  EXPECT_THAT(with([](auto& c) { c.gpu_memory_utilization = 1.1f; }), HasSubstr("gpu_memory_utilization"));
  EXPECT_THAT(with([](auto& c) { c.num_kvcache_blocks = 0; }), HasSubstr("num_kvcache_blocks"));
  EXPECT_EQ(with([](auto& c) { c.num_kvcache_blocks = 5; }), "");
}

// The LM head's format: `auto` is int8 under int4 layers (docs/perf.md, "LM head"), else the
// layers' scheme; an explicit value wins.
TEST(Config, LmHeadQuantization) {
  auto head = [](const std::string& layers, const std::string& h) {
    Config c;
    c.quantization = layers;
    c.lm_head_quantization = h;
    return resolve(c).lm_head_quantization.str();
  };
  EXPECT_EQ(head("none", "auto"), "none");
  EXPECT_EQ(head("int8", "auto"), "int8");
  EXPECT_EQ(head("int4", "auto"), "int8");
  EXPECT_EQ(head("int4-g64-zp", "auto"), "int8");
  EXPECT_EQ(head("int4", "none"), "none");
  EXPECT_EQ(head("int4", "int4-g64"), "int4-g64");
  EXPECT_EQ(head("none", "int8"), "int8");
  EXPECT_THROW(head("int4", "int5"), Error);
}

}  // namespace
}  // namespace nanovllm
