// End-to-end engine behaviour on real models (stories260K from shared data, and random models
// made by make_random_model): batching, preemption, prefix caching, seeded sampling and the two
// scheduling policies must not change what is generated.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "random_model.h"
#include "nanovllm/llm.h"
#include "util/check.h"

using namespace nanovllm;
namespace fs = std::filesystem;

namespace {

std::string stories_dir() { return std::string(NANOVLLM_SHARED_DATA) + "/models/stories260K-hf"; }
bool have_stories() { return fs::exists(stories_dir() + "/config.json"); }

const std::string& random_model() { return random_tiny_model(); }

// The CPU backend unless NANOVLLM_TEST_DEVICE says otherwise (scripts/gpu-check.sh runs this
// binary once more with "cuda"): never "auto", so a unit run on a GPU machine stays on the CPU.
std::string device_under_test() {
  const char* d = std::getenv("NANOVLLM_TEST_DEVICE");
  return d && *d ? d : "cpu";
}

Config base_config(const std::string& model) {
  Config c;
  c.model = model;
  c.device = device_under_test();
  c.num_threads = 2;
  c.max_model_len = 512;
  c.kvcache_block_size = 16;
  c.num_kvcache_blocks = 512;
  c.max_num_batched_tokens = 4096;
  return c;
}

std::vector<std::vector<int>> make_prompts(int n, int vocab, uint32_t seed, int min_len, int max_len,
                                           int bos = -1) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int>> out;
  for (int i = 0; i < n; ++i) {
    int len = std::uniform_int_distribution<int>(min_len, max_len)(rng);
    std::vector<int> p;
    if (bos >= 0) p.push_back(bos);
    while (int(p.size()) < len) p.push_back(std::uniform_int_distribution<int>(3, vocab - 1)(rng));
    out.push_back(p);
  }
  return out;
}

std::vector<std::vector<int>> run(const Config& c, const std::vector<std::vector<int>>& prompts,
                                  const SamplingParams& sp, EngineStats* stats = nullptr) {
  LLM llm(c);
  std::vector<Prompt> ps(prompts.begin(), prompts.end());
  auto outs = llm.generate(ps, {sp});
  std::vector<std::vector<int>> toks;
  for (auto& o : outs) {
    EXPECT_TRUE(o.error.empty()) << o.error;
    toks.push_back(o.token_ids);
  }
  if (stats) *stats = llm.stats();
  return toks;
}

SamplingParams greedy(int max_tokens) {
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  return sp;
}

}  // namespace

// (a) each sequence of a batch of 64 generates what it generates alone.
TEST(SharedData_EngineE2E, BatchOf64EqualsAlone) {
  if (!have_stories()) GTEST_SKIP() << "shared data absent: " << stories_dir();
  Config c = base_config(stories_dir());
  auto prompts = make_prompts(64, 512, 1, 2, 40, /*bos=*/1);
  auto batched = run(c, prompts, greedy(24));
  LLM alone(c);
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto o = alone.generate({Prompt(prompts[i])}, {greedy(24)});
    EXPECT_EQ(o[0].token_ids, batched[i]) << "prompt " << i;
  }
}

TEST(EngineE2E, RandomModelBatchEqualsAlone) {
  Config c = base_config(random_model());
  auto prompts = make_prompts(12, 151936, 2, 3, 50);
  auto batched = run(c, prompts, greedy(12));
  LLM alone(c);
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto o = alone.generate({Prompt(prompts[i])}, {greedy(12)});
    EXPECT_EQ(o[0].token_ids, batched[i]) << "prompt " << i;
  }
}

// (b) a KV cache so small that sequences are preempted: outputs unchanged.
void check_preemption(const std::string& model, int vocab, int bos) {
  Config big = base_config(model);
  Config small = big;
  small.num_kvcache_blocks = 12;  // 192 tokens for 8 sequences of up to ~70 tokens
  auto prompts = make_prompts(8, vocab, 3, 10, 30, bos);
  EngineStats st;
  auto ref = run(big, prompts, greedy(40));
  auto got = run(small, prompts, greedy(40), &st);
  EXPECT_GT(st.preemptions, 0) << "the cache was meant to force preemption";
  EXPECT_EQ(got, ref);
}
TEST(SharedData_EngineE2E, PreemptionKeepsOutputs) {
  if (!have_stories()) GTEST_SKIP() << "shared data absent: " << stories_dir();
  check_preemption(stories_dir(), 512, 1);
}
TEST(EngineE2E, RandomModelPreemptionKeepsOutputs) { check_preemption(random_model(), 151936, -1); }

// (c) prefix caching: a shared ~250-token prefix with block size 16 hits the cache, same outputs.
void check_prefix_cache(const std::string& model, int vocab, int bos) {
  auto prefix = make_prompts(1, vocab, 4, 250, 250, bos)[0];
  auto tails = make_prompts(6, vocab, 5, 3, 20);
  std::vector<std::vector<int>> prompts;
  for (auto& t : tails) {
    auto p = prefix;
    p.insert(p.end(), t.begin(), t.end());
    prompts.push_back(p);
  }
  Config on = base_config(model), off = on;
  off.enable_prefix_caching = false;
  EngineStats st_on, st_off;
  // Submit one first so the others find its blocks (same engine, two generate calls).
  LLM llm(on);
  auto first = llm.generate({Prompt(prompts[0])}, {greedy(16)});
  std::vector<Prompt> rest(prompts.begin() + 1, prompts.end());
  auto outs = llm.generate(rest, {greedy(16)});
  st_on = llm.stats();
  auto ref = run(off, prompts, greedy(16), &st_off);
  EXPECT_GT(st_on.prefix_cache_hit_tokens, 0);
  EXPECT_EQ(st_off.prefix_cache_hit_tokens, 0);
  EXPECT_EQ(first[0].token_ids, ref[0]);
  for (size_t i = 0; i < outs.size(); ++i) {
    EXPECT_EQ(outs[i].token_ids, ref[i + 1]) << "prompt " << i + 1;
    EXPECT_GE(outs[i].num_cached_tokens, 240) << "prompt " << i + 1;
  }
}
TEST(SharedData_EngineE2E, PrefixCachingKeepsOutputs) {
  if (!have_stories()) GTEST_SKIP() << "shared data absent: " << stories_dir();
  check_prefix_cache(stories_dir(), 512, 1);
}
TEST(EngineE2E, RandomModelPrefixCachingKeepsOutputs) { check_prefix_cache(random_model(), 151936, -1); }

// (d) seeded sampling: identical across runs and across batch compositions.
TEST(EngineE2E, SeededSamplingIsReproducibleAcrossBatches) {
  std::string model = have_stories() ? stories_dir() : random_model();
  int vocab = have_stories() ? 512 : 151936;
  Config c = base_config(model);
  auto prompts = make_prompts(6, vocab, 6, 3, 20);
  SamplingParams sp;
  sp.temperature = 0.9f;
  sp.top_p = 0.95f;
  sp.top_k = 50;
  sp.max_tokens = 20;
  sp.ignore_eos = true;
  sp.seed = 1234;
  auto a = run(c, prompts, sp);
  auto b = run(c, prompts, sp);
  EXPECT_EQ(a, b);
  // Prompt 2 alone and inside a different batch.
  auto alone = run(c, {prompts[2]}, sp);
  auto other = run(c, {prompts[5], prompts[2], prompts[0]}, sp);
  EXPECT_EQ(alone[0], a[2]);
  EXPECT_EQ(other[1], a[2]);
  // A different seed changes the output (sampling is not greedy in disguise).
  SamplingParams sp2 = sp;
  sp2.seed = 99;
  auto d = run(c, prompts, sp2);
  EXPECT_NE(d, a);
}

// (e) prefill-first and mixed (chunked) give identical greedy outputs.
void check_policies(const std::string& model, int vocab, int bos) {
  Config pf = base_config(model), mx = pf;
  mx.policy = "mixed";
  mx.max_num_batched_tokens = 64;  // forces chunked prefill
  auto prompts = make_prompts(10, vocab, 8, 20, 120, bos);
  auto a = run(pf, prompts, greedy(20));
  auto b = run(mx, prompts, greedy(20));
  EXPECT_EQ(a, b);
}
TEST(SharedData_EngineE2E, PoliciesAgree) {
  if (!have_stories()) GTEST_SKIP() << "shared data absent: " << stories_dir();
  check_policies(stories_dir(), 512, 1);
}
TEST(EngineE2E, RandomModelPoliciesAgree) { check_policies(random_model(), 151936, -1); }

// Bad input: a clear per-request error, the rest of the batch completes.
TEST(EngineE2E, BadRequestsFailAloneWithClearErrors) {
  Config c = base_config(random_model());
  c.max_model_len = 64;
  LLM llm(c);
  std::vector<int> too_long(100, 5), good = {1, 2, 3, 4};
  auto outs = llm.generate({Prompt(too_long), Prompt(std::vector<int>{}), Prompt(good)}, {greedy(4)});
  ASSERT_EQ(outs.size(), 3u);
  EXPECT_EQ(outs[0].finish_reason, "error");
  EXPECT_NE(outs[0].error.find("max_model_len"), std::string::npos) << outs[0].error;
  EXPECT_EQ(outs[1].finish_reason, "error");
  EXPECT_NE(outs[1].error.find("empty"), std::string::npos) << outs[1].error;
  EXPECT_EQ(outs[2].finish_reason, "length");
  EXPECT_EQ(outs[2].token_ids.size(), 4u);
  SamplingParams bad;
  bad.top_p = 1.5f;
  EXPECT_THROW(llm.add_request(Prompt(good), bad), Error);
  bad = SamplingParams();
  bad.temperature = -1;
  EXPECT_THROW(llm.add_request(Prompt(good), bad), Error);
  bad = SamplingParams();
  bad.max_tokens = 0;
  EXPECT_THROW(llm.add_request(Prompt(good), bad), Error);
  EXPECT_THROW(llm.add_request(Prompt(std::vector<int>{1, 200000}), greedy(2)), Error);
  EXPECT_TRUE(llm.is_finished());
}

// Abort frees blocks at once; stop token ids and max_tokens finish with the right reason.
TEST(EngineE2E, AbortAndFinishReasons) {
  Config c = base_config(random_model());
  LLM llm(c);
  auto id = llm.add_request(Prompt(std::vector<int>{1, 2, 3, 4, 5}), greedy(50));
  llm.step();
  EXPECT_GT(llm.stats().num_blocks_used, 0);
  llm.abort(id);
  auto outs = llm.step();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].finish_reason, "abort");
  EXPECT_EQ(llm.stats().num_blocks_used, 0);
  // Greedy output of a prompt, then the same with its 3rd token as a stop token id.
  auto ref = llm.generate({Prompt(std::vector<int>{7, 8, 9})}, {greedy(8)})[0];
  SamplingParams sp = greedy(8);
  sp.ignore_eos = false;
  sp.stop_token_ids = {ref.token_ids[2]};
  auto stopped = llm.generate({Prompt(std::vector<int>{7, 8, 9})}, {sp})[0];
  size_t first = size_t(std::find(ref.token_ids.begin(), ref.token_ids.end(), ref.token_ids[2]) -
                        ref.token_ids.begin());
  EXPECT_EQ(stopped.finish_reason, "stop");
  EXPECT_EQ(stopped.token_ids.size(), first + 1);
  EXPECT_EQ(ref.finish_reason, "length");
}
