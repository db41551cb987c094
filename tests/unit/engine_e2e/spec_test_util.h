// Shared by the speculative-decoding engine tests (spec_decode_test.cc: n-gram; draft_spec_test.cc:
// a draft model): configs, prompts that repeat themselves, and the bitwise comparison of runs.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "nanovllm/llm.h"
#include "random_model.h"

namespace nanovllm::spec_test {

// Under ASan/UBSan (make test's Debug sanitizer build runs every unit test, ~17x slower) the
// cases run fewer tokens and variants: the paths they cover are the same.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
inline int tokens(int n) { return kSanitized ? std::max(8, n / 2) : n; }

inline Config spec_base() {
  Config c;
  c.model = random_tiny_model();
  c.device = "cpu";
  c.num_threads = 2;
  c.max_model_len = 512;
  c.kvcache_block_size = 16;
  c.num_kvcache_blocks = 256;
  c.max_num_batched_tokens = 4096;
  // A fixed team: with adaptive threads a busy machine shrinks the team, and f32 weights above
  // 64 rows (these prefills) run in BLAS, whose sums then differ in the last bits from run to
  // run (seen under ctest -j2: the first token's logprob differed by 1 ulp, spec or not).
  c.backend.adaptive_threads = false;
  return c;
}

// Fixed K by default: the adaptive controller times steps, and the step structure (what the
// statistics below count) would depend on the machine's timing. The outputs do not: the
// Adaptive test runs the timed controller.
inline Config with_spec(Config c, int k = 4, bool fixed = true) {
  c.speculative = "ngram";
  c.num_speculative_tokens = k;
  c.speculative_max_batch = 64;  // speculate at every batch size the tests use
  c.speculative_fixed_k = fixed;
  return c;
}

// Prompts whose text repeats (a random pattern two or three times, then a random tail): the
// n-gram proposer drafts the pattern's continuation, which the model sometimes follows.
inline std::vector<std::vector<int>> repeating_prompts(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int>> out;
  for (int i = 0; i < n; ++i) {
    const int period = std::uniform_int_distribution<int>(3, 12)(rng);
    const int reps = std::uniform_int_distribution<int>(1, 3)(rng);
    std::vector<int> pattern, p;
    for (int j = 0; j < period; ++j) pattern.push_back(std::uniform_int_distribution<int>(3, 150000)(rng));
    for (int r = 0; r < reps; ++r) p.insert(p.end(), pattern.begin(), pattern.end());
    const int tail = std::uniform_int_distribution<int>(0, 6)(rng);
    for (int j = 0; j < tail; ++j) p.push_back(pattern[size_t(std::uniform_int_distribution<int>(0, period - 1)(rng))]);
    out.push_back(p);
  }
  return out;
}

struct SpecRun {
  std::vector<RequestOutput> outputs;
  EngineStats stats;
};

inline SpecRun generate(const Config& c, const std::vector<std::vector<int>>& prompts,
             const std::vector<SamplingParams>& sp) {
  LLM llm(c);
  std::vector<Prompt> ps(prompts.begin(), prompts.end());
  SpecRun r;
  r.outputs = llm.generate(ps, sp);
  r.stats = llm.stats();
  EXPECT_EQ(r.stats.num_blocks_used, 0) << "blocks still held after every request finished";
  return r;
}

// Logprobs are compared bitwise: every ISA runs one attention kernel for every row (since
// 2026-11-29 on AVX-512 too), so a verification row equals plain decoding's row
// (docs/determinism.md).
inline void expect_logprob(float a, float b, const std::string& w) { EXPECT_EQ(a, b) << w; }

inline void expect_identical(const SpecRun& ref, const SpecRun& got, const std::string& what) {
  ASSERT_EQ(ref.outputs.size(), got.outputs.size()) << what;
  for (size_t i = 0; i < ref.outputs.size(); ++i) {
    const RequestOutput& a = ref.outputs[i];
    const RequestOutput& b = got.outputs[i];
    const std::string w = what + ", output " + std::to_string(i);
    EXPECT_EQ(a.token_ids, b.token_ids) << w;
    EXPECT_EQ(a.finish_reason, b.finish_reason) << w;
    EXPECT_EQ(a.text, b.text) << w;
    EXPECT_EQ(a.error, b.error) << w;
    EXPECT_EQ(a.stop_reason, b.stop_reason) << w;
    ASSERT_EQ(a.logprobs.size(), b.logprobs.size()) << w;
    for (size_t t = 0; t < a.logprobs.size(); ++t) {
      expect_logprob(a.logprobs[t].logprob, b.logprobs[t].logprob, w + " token " + std::to_string(t));
      ASSERT_EQ(a.logprobs[t].top.size(), b.logprobs[t].top.size()) << w;
      for (size_t j = 0; j < a.logprobs[t].top.size(); ++j) {
        EXPECT_EQ(a.logprobs[t].top[j].token_id, b.logprobs[t].top[j].token_id) << w;
        expect_logprob(a.logprobs[t].top[j].logprob, b.logprobs[t].top[j].logprob, w);
      }
    }
  }
}

inline SamplingParams greedy(int max_tokens) {
  SamplingParams sp;
  sp.temperature = 0;
  sp.max_tokens = max_tokens;
  sp.ignore_eos = true;
  return sp;
}

// Drafts were verified, some accepted and some rejected (both paths ran).
inline void expect_both_paths(const EngineStats& s, const std::string& what) {
  EXPECT_GT(s.spec_verifications, 0) << what;
  EXPECT_GT(s.spec_accepted_tokens, 0) << what;
  EXPECT_LT(s.spec_accepted_tokens, s.spec_draft_tokens) << what << ": no draft was rejected";
}

}  // namespace nanovllm::spec_test
