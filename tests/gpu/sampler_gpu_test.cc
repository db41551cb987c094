// The CUDA sampling op against the CPU op on identical logits and parameters (kernels/sampling.h
// defines both): tokens equal (a difference is only allowed at a near-tie or a filter boundary,
// checked against the f64 reference of the definition), logprobs within tolerance, masks hard,
// seeded rows batch-invariant, the sampled distribution right.
#include <algorithm>
#include <numeric>

#include "../unit/sampler/sampler_test_util.h"
#include "gpu_test_util.h"

namespace nanovllm::gputest {
namespace {

using samplertest::check_against_reference;
using samplertest::make_row;
using samplertest::normal_logits;

SampleResult gpu_sample(const std::vector<float>& logits, int64_t S,
                        const std::vector<SamplingRow>& rows) {
  const int64_t V = int64_t(logits.size()) / S;
  return backend()->sample(from_host_f32(logits, {S, V}, DType::F32), SamplingBatch{rows});
}

// Owns the spans' data of a batch of rows exercising every feature.
struct MixedBatch {
  std::vector<std::vector<TokenCount>> hist;
  std::vector<std::vector<TokenBias>> bias;
  std::vector<std::vector<int32_t>> sup;
  std::vector<std::vector<uint32_t>> masks;
  std::vector<SamplingRow> rows;

  MixedBatch(int S, int V, uint64_t step) : hist(S), bias(S), sup(S), masks(S) {
    std::mt19937 g(1234);
    for (int r = 0; r < S; ++r) {
      SamplingRow p = make_row(r % 5 == 0 ? 0.f : 0.6f + 0.1f * float(r % 9), 77 + r, step + r);
      if (r % 4 == 1) p.top_k = 1 + r % 40;
      if (r % 6 == 2) p.top_p = 0.5f + 0.05f * float(r % 9);
      if (r % 7 == 3) p.min_p = 0.02f * float(1 + r % 5);
      if (r % 3 == 0) {
        p.penalties = Penalties{0.3f, 0.2f, 1.2f};
        for (int t = 0; t < V; t += 1 + int(g() % 97)) hist[size_t(r)].push_back({t, int32_t(g() % 3)});
      }
      if (r % 8 == 5)
        for (int t = int(g() % 50); t < V; t += 200 + int(g() % 300))
          bias[size_t(r)].push_back({t, float(int(g() % 21) - 10)});
      if (r % 5 == 4) sup[size_t(r)] = {0, 1, 2, int32_t(g() % uint32_t(V))};
      if (r % 9 == 7) {
        masks[size_t(r)].assign(size_t((V + 31) / 32), 0u);
        for (int t = 0; t < V; ++t)
          if (g() % 10 == 0) masks[size_t(r)][size_t(t / 32)] |= 1u << (t % 32);
        masks[size_t(r)][0] |= 1u;
      }
      if (r % 10 == 6) p.num_logprobs = r % 21;
      p.history = hist[size_t(r)];
      p.logit_bias = bias[size_t(r)];
      p.suppress = sup[size_t(r)];
      p.allowed = masks[size_t(r)];
      rows.push_back(p);
    }
  }
};

void compare_with_cpu(int S, int V, uint64_t step, uint32_t seed) {
  const auto logits = normal_logits(size_t(S) * size_t(V), 3.f, seed);
  MixedBatch b(S, V, step);
  const SampleResult g = gpu_sample(logits, S, b.rows);
  const SampleResult c = samplertest::run(logits, S, b.rows);
  ASSERT_EQ(g.tokens.size(), size_t(S));
  int differ = 0;
  for (int r = 0; r < S; ++r) {
    const SamplingRow& p = b.rows[size_t(r)];
    const int t = g.tokens[size_t(r)];
    ASSERT_TRUE(t >= 0 && t < V) << "row " << r;
    if (!p.allowed.empty()) {
      EXPECT_TRUE((p.allowed[size_t(t / 32)] >> (t % 32)) & 1u) << "row " << r;
    }
    if (t != c.tokens[size_t(r)]) {
      ++differ;  // only where f32 rounding can decide: the reference says which
      check_against_reference(&logits[size_t(r) * V], V, p, t);
    }
    if (p.num_logprobs >= 0) {
      const auto &gl = g.logprobs[size_t(r)], &cl = c.logprobs[size_t(r)];
      const auto ref = samplertest::ref_log_softmax(&logits[size_t(r) * V], V);
      EXPECT_NEAR(gl.logprob, ref[size_t(t)], 2e-4) << "row " << r;
      ASSERT_EQ(gl.top.size(), cl.top.size()) << "row " << r;
      for (size_t j = 0; j < gl.top.size(); ++j) {
        EXPECT_EQ(gl.top[j].token_id, cl.top[j].token_id) << "row " << r << " rank " << j;
        EXPECT_NEAR(gl.top[j].logprob, cl.top[j].logprob, 2e-4);
      }
    } else {
      EXPECT_TRUE(g.logprobs[size_t(r)].top.empty());
    }
  }
  EXPECT_LE(differ, std::max(1, S / 100)) << "CPU and CUDA differ on " << differ << " of " << S;
}

TEST(GpuSampler, MatchesCpuOpEveryFeature) {
  NV_NEED_GPU();
  for (uint64_t step = 0; step < 4; ++step) compare_with_cpu(256, 5000, step, 10 + uint32_t(step));
}

TEST(GpuSampler, MatchesCpuOpQwenVocab) {
  NV_NEED_GPU();
  compare_with_cpu(32, 151936, 3, 99);
}

TEST(GpuSampler, HugeVocabUsesLargeSharedBitmap) {
  NV_NEED_GPU();
  compare_with_cpu(4, 600000, 1, 5);  // 75 KB edited-token bitmap: opt-in shared memory
}

TEST(GpuSampler, GreedyAndFallbackAreExact) {
  NV_NEED_GPU();
  const samplertest::FallbackBatch fb;
  const auto g = gpu_sample(fb.logits, 6, fb.rows);
  EXPECT_EQ(g.tokens, samplertest::run(fb.logits, 6, fb.rows).tokens);
  samplertest::FallbackBatch::check(g.tokens);
}

TEST(GpuSampler, SeededRowsAreBatchInvariant) {
  NV_NEED_GPU();
  const int V = 20000;
  const auto mine = normal_logits(V, 2.f, 8);
  SamplingRow p = make_row(0.9f, 42, 5);
  p.top_p = 0.95f;
  const int alone = gpu_sample(mine, 1, {p}).tokens[0];
  for (int S : {3, 64, 200}) {
    auto logits = normal_logits(size_t(S) * V, 2.f, uint32_t(S));
    const int pos = S / 3;
    std::copy(mine.begin(), mine.end(), logits.begin() + int64_t(pos) * V);
    MixedBatch b(S, V, 9);
    b.rows[size_t(pos)] = p;
    EXPECT_EQ(gpu_sample(logits, S, b.rows).tokens[size_t(pos)], alone) << "batch " << S;
  }
  EXPECT_EQ(samplertest::sample_one(mine, p), alone);  // and the CPU agrees
}

// The split pass (sampler.cu) against the one-block path, bit for bit. min_p = 1e-30 sends a
// sampling row down the one-block path without changing its token (it drops only entries more
// than 69 below the max, and the noise spans under 20); num_logprobs = 0 does so for a greedy
// row (greedy ignores the filters, which some of those rows carry). Masks, suppression,
// logit_bias and penalties included, the Qwen vocabulary (75 chunks, the last one partial) and a
// small one (one partial chunk), logits spread (most entries pruned) and flat (none).
TEST(GpuSampler, SplitPassEqualsOneBlockPath) {
  NV_NEED_GPU();
  for (int V : {151936, 1000}) {
    for (float spread : {40.f, 0.01f}) {
      const int S = 48;
      const auto logits = normal_logits(size_t(S) * size_t(V), spread, uint32_t(V) + 7);
      MixedBatch b(S, V, 3);
      std::vector<SamplingRow> split = b.rows, whole = b.rows;
      for (int r = 0; r < S; ++r) {
        SamplingRow& p = split[size_t(r)];
        p.num_logprobs = -1;
        // A greedy row keeps MixedBatch's filters (it takes the split pass anyway); a sampling
        // row drops them.
        if (!is_greedy_temperature(p.temperature)) p.top_k = -1, p.top_p = 1.f, p.min_p = 0.f;
        whole[size_t(r)] = p;
        if (is_greedy_temperature(p.temperature)) whole[size_t(r)].num_logprobs = 0;
        else whole[size_t(r)].min_p = 1e-30f;
      }
      const SampleResult a = gpu_sample(logits, S, split), c = gpu_sample(logits, S, whole);
      EXPECT_EQ(a.tokens, c.tokens) << "V " << V << " spread " << spread;
    }
  }
}

TEST(GpuSampler, Distribution) {
  NV_NEED_GPU();
  const int64_t S = 4000, V = 4;
  std::vector<float> x(S * V);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t i = 0; i < V; ++i) x[s * V + i] = float(i) * 0.5f;
  std::vector<SamplingRow> rows;
  for (int64_t i = 0; i < S; ++i) rows.push_back(make_row(1.f, 42, uint64_t(i)));
  const auto tok = gpu_sample(x, S, rows).tokens;
  std::vector<double> freq(V, 0);
  for (auto t : tok) freq[t] += 1.0 / S;
  double z = 0;
  for (int64_t i = 0; i < V; ++i) z += std::exp(0.5 * double(i));
  for (int64_t i = 0; i < V; ++i) EXPECT_NEAR(freq[i], std::exp(0.5 * double(i)) / z, 0.03) << i;
}

TEST(GpuSampler, BadInputsAreClearErrors) {
  NV_NEED_GPU();
  const std::vector<float> l(2 * 100, 0.f);
  EXPECT_THROW(gpu_sample(l, 2, {make_row(1.f)}), Error);  // 1 row of parameters for 2 rows
  Tensor host = Tensor::empty({2, 100}, DType::F32);
  EXPECT_THROW(backend()->sample(host, SamplingBatch{std::vector<SamplingRow>(2)}), Error);
}

}  // namespace
}  // namespace nanovllm::gputest
