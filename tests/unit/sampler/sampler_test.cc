#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "kernels/cuda/philox_rng.h"  // host-compilable; the CUDA sampler's noise
#include "layers/sampler.h"
#include "util/philox.h"
#include "util/thread_pool.h"

namespace nanovllm {
namespace {

SampleRequest req(const SamplingParams& p, uint64_t seed, int64_t step) {
  SampleRequest r;
  r.params = &p;
  r.seed = seed;
  r.step = step;
  return r;
}

std::vector<float> logits_of_probs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)) + 3.0f);  // shift-invariant
  return l;
}

// Frequencies of sample_row over `n` consecutive steps.
std::map<int, int> histogram(const std::vector<float>& logits, const SamplingParams& p, int n,
                             uint64_t seed = 99) {
  std::map<int, int> h;
  for (int s = 0; s < n; ++s)
    h[sample_row(logits.data(), static_cast<int>(logits.size()), req(p, seed, s))]++;
  return h;
}

TEST(Sampler, GreedyIsArgmaxLowestIndexOnTies) {
  SamplingParams p;
  p.temperature = 0;
  std::vector<float> l = {0.1f, 2.f, -1.f, 2.f, 1.9f};
  EXPECT_EQ(sample_row(l.data(), 5, req(p, 1, 0)), 1);
  l[0] = std::nanf("");
  l[4] = 5.f;
  EXPECT_EQ(sample_row(l.data(), 5, req(p, 1, 0)), 4);
  p.temperature = 1e-7f;  // treated as greedy instead of overflowing logits / T
  for (int s = 0; s < 20; ++s) EXPECT_EQ(sample_row(l.data(), 5, req(p, 9, s)), 4);
}

TEST(Sampler, TopKOneIsGreedy) {
  std::mt19937 rng(3);
  std::normal_distribution<float> nd(0.f, 3.f);
  SamplingParams p;
  p.temperature = 1.3f;
  p.top_k = 1;
  for (int t = 0; t < 50; ++t) {
    std::vector<float> l(1000);
    for (float& x : l) x = nd(rng);
    const int expect = static_cast<int>(std::max_element(l.begin(), l.end()) - l.begin());
    EXPECT_EQ(sample_row(l.data(), 1000, req(p, 7 + t, t)), expect);
  }
}

TEST(Sampler, SeededTokensDoNotDependOnBatchComposition) {
  const int V = 5000;
  std::mt19937 rng(11);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> batch(static_cast<size_t>(6 * V));
  for (float& x : batch) x = nd(rng);
  SamplingParams p;
  p.temperature = 0.9f;
  SamplingParams q = p;
  q.top_p = 0.9f;
  q.top_k = 50;
  ThreadPool pool(4);
  int differs = 0;
  for (int step = 0; step < 20; ++step) {
    // Row 2 (seed 42) alone...
    const int alone = sample_row(batch.data() + 2 * V, V, req(p, 42, step));
    // ...and inside a batch of 6 with other seeds, params and steps, sequentially and pooled.
    std::vector<SampleRequest> reqs;
    for (int r = 0; r < 6; ++r)
      reqs.push_back(r == 2 ? req(p, 42, step) : req(r % 2 ? q : p, 1000 + r, step * r));
    EXPECT_EQ(sample(batch.data(), 6, V, reqs, nullptr)[2], alone);
    EXPECT_EQ(sample(batch.data(), 6, V, reqs, &pool)[2], alone);
    differs += sample_row(batch.data() + 2 * V, V, req(p, 43, step)) != alone;
  }
  EXPECT_GT(differs, 10);  // another seed gives other tokens
}

// The host sampler must draw the same noise as the CUDA sampler (kernels/cuda/philox_rng.h),
// and pick the token the CUDA formulation argmax(z + gumbel) picks.
TEST(Sampler, NoiseMatchesCudaDefinition) {
  for (uint64_t seed : {0ull, 1ull, 0xdeadbeefcafef00dull})
    for (uint64_t step : {0ull, 3ull, 1ull << 33})
      for (uint32_t i : {0u, 1u, 151935u}) {
        const uint32_t w = sampler_noise_word(seed, step, i);
        ASSERT_EQ(w, sampler_noise_bits(seed, step, i));
        ASSERT_EQ(noise_uniform(w), philox_uniform(w));
      }
  const int V = 3000;
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.f, 2.f);
  std::vector<float> l(V);
  for (float& x : l) x = nd(rng);
  SamplingParams p;
  p.temperature = 0.8f;
  int same = 0;
  for (int step = 0; step < 50; ++step) {
    int expect = 0;
    float best = -INFINITY;
    for (int i = 0; i < V; ++i) {
      const float g = l[static_cast<size_t>(i)] / 0.8f + sampler_gumbel(77, step, i);
      if (g > best) {
        best = g;
        expect = i;
      }
    }
    same += sample_row(l.data(), V, req(p, 77, step)) == expect;
  }
  EXPECT_GE(same, 49);  // float rounding may flip a near-tie, nothing more
}

TEST(Sampler, EmpiricalDistributionMatchesSoftmaxOverTemperature) {
  const std::vector<float> l = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -2.0f};
  const float T = 0.8f;
  SamplingParams p;
  p.temperature = T;
  const int n = 40000;
  auto h = histogram(l, p, n, 2024);
  double z = 0;
  for (float x : l) z += std::exp(x / T);
  double chi2 = 0;
  for (int i = 0; i < 6; ++i) {
    const double e = n * std::exp(l[static_cast<size_t>(i)] / T) / z;
    const double d = h[i] - e;
    chi2 += d * d / e;
  }
  EXPECT_LT(chi2, 20.5) << "chi-square with 5 degrees of freedom (p = 0.001)";
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  const auto l = logits_of_probs({0.5, 0.25, 0.15, 0.1});
  SamplingParams p;
  p.top_p = 0.7f;  // 0.5 + 0.25 >= 0.7
  auto h = histogram(l, p, 3000);
  EXPECT_EQ(h.count(2) + h.count(3), 0u);
  EXPECT_GT(h[0], 1700);  // expected 2000 of 3000
  EXPECT_GT(h[1], 700);   // expected 1000
  p.top_p = 0.45f;        // the top token alone
  h = histogram(l, p, 500);
  EXPECT_EQ(h[0], 500);
  p.top_p = 0.8f;  // needs the third token
  h = histogram(l, p, 3000);
  EXPECT_GT(h[2], 200);
  EXPECT_EQ(h.count(3), 0u);
}

TEST(Sampler, MinPAndTopKExcludeTheRightTokens) {
  const auto l = logits_of_probs({0.5, 0.25, 0.15, 0.1});
  SamplingParams p;
  p.min_p = 0.35f;  // drops p < 0.175
  auto h = histogram(l, p, 2000);
  EXPECT_EQ(h.count(2) + h.count(3), 0u);
  EXPECT_GT(h[1], 400);
  p.min_p = 0;
  p.top_k = 3;
  h = histogram(l, p, 3000);
  EXPECT_EQ(h.count(3), 0u);
  EXPECT_GT(h[2], 250);
}

TEST(Sampler, SuppressEosMasksEosAndStopTokens) {
  std::vector<float> l = {5.f, 4.f, 0.f, 1.f};
  std::vector<int> eos = {0};
  SamplingParams p;
  p.stop_token_ids = {1};
  for (float t : {0.f, 1.f}) {
    p.temperature = t;
    for (int s = 0; s < 200; ++s) {
      SampleRequest r = req(p, 5, s);
      r.suppress_eos = true;
      r.eos_ids = &eos;
      const int tok = sample_row(l.data(), 4, r);
      EXPECT_TRUE(tok == 2 || tok == 3);
      if (t == 0.f) {
        EXPECT_EQ(tok, 3);
      }
    }
  }
  p.temperature = 0;
  EXPECT_EQ(sample_row(l.data(), 4, req(p, 5, 0)), 0);  // not suppressed
}

TEST(Sampler, LogprobsAreRawLogSoftmax) {
  const std::vector<float> l = {1.0f, 3.0f, -1.0f, 2.5f, 3.0f};
  double z = 0;
  for (float x : l) z += std::exp(static_cast<double>(x));
  SamplingParams p;
  p.temperature = 0.3f;  // must not affect the reported logprobs
  p.top_k = 2;
  p.logprobs = 3;
  std::vector<SampleRequest> reqs = {req(p, 1, 0), req(p, 2, 5)};
  SamplingParams none;
  reqs.push_back(req(none, 3, 0));
  std::vector<float> batch;
  for (int r = 0; r < 3; ++r) batch.insert(batch.end(), l.begin(), l.end());
  std::vector<TokenLogprobs> lps;
  auto toks = sample(batch.data(), 3, 5, reqs, nullptr, &lps);
  ASSERT_EQ(lps.size(), 3u);
  for (int r = 0; r < 2; ++r) {
    const int t = toks[static_cast<size_t>(r)];
    EXPECT_TRUE(t == 1 || t == 4);  // top_k = 2 keeps the two 3.0 logits
    EXPECT_NEAR(lps[static_cast<size_t>(r)].logprob, l[static_cast<size_t>(t)] - std::log(z), 1e-5);
    const auto& top = lps[static_cast<size_t>(r)].top;
    ASSERT_EQ(top.size(), 3u);
    EXPECT_EQ(top[0].token_id, 1);
    EXPECT_EQ(top[1].token_id, 4);
    EXPECT_EQ(top[2].token_id, 3);
    EXPECT_NEAR(top[2].logprob, 2.5 - std::log(z), 1e-5);
  }
  EXPECT_TRUE(lps[2].top.empty());  // logprobs = -1: nothing requested
  p.logprobs = 0;
  TokenLogprobs one;
  sample_row(l.data(), 5, req(p, 1, 0), &one);
  EXPECT_TRUE(one.top.empty());
  EXPECT_LT(one.logprob, 0.f);
}

TEST(Sampler, LargeVocabTopPStaysInNucleusAndIsFast) {
  const int V = 151936, S = 8;
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 4.f);
  std::vector<float> logits(static_cast<size_t>(S) * V);
  for (float& x : logits) x = nd(rng);
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_p = 0.9f;
  SamplingParams plain;
  plain.temperature = 1.0f;
  std::vector<SampleRequest> reqs;
  for (int r = 0; r < S; ++r) reqs.push_back(req(r % 2 ? plain : p, 100 + r, 3));
  ThreadPool pool(2);
  auto t0 = std::chrono::steady_clock::now();
  auto toks = sample(logits.data(), S, V, reqs, &pool);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("sampling %d x %d rows took %.2f ms\n", S, V, ms);
  for (int r = 0; r < S; r += 2) {  // check the top-p rows against a full sort
    const float* row = logits.data() + static_cast<size_t>(r) * V;
    std::vector<int> idx(V);
    std::iota(idx.begin(), idx.end(), 0);
    std::sort(idx.begin(), idx.end(), [&](int a, int b) { return row[a] > row[b]; });
    double z = 0;
    for (int i = 0; i < V; ++i) z += std::exp((row[i] - row[idx[0]]) / 0.7);
    std::set<int> nucleus;
    double cum = 0;
    for (int i : idx) {
      nucleus.insert(i);
      cum += std::exp((row[i] - row[idx[0]]) / 0.7) / z;
      if (cum >= 0.9) break;
    }
    EXPECT_TRUE(nucleus.count(toks[static_cast<size_t>(r)])) << "row " << r;
  }
}

}  // namespace
}  // namespace nanovllm
