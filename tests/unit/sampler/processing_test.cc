// The sampling op's logit processing on the CPU backend: min_tokens suppression, penalties,
// logit_bias and the allowed-token mask, each against the f64 reference of the definition.
#include "sampler_test_util.h"

#include <algorithm>

namespace nanovllm::samplertest {
namespace {

TEST(SamplingProcessing, SuppressionMasksEosAndStopTokens) {
  const std::vector<float> l = {5.f, 4.f, 0.f, 1.f};
  const std::vector<int32_t> ids = {0, 1, 1, 999, -3};  // repeats and out-of-range ids are fine
  for (float t : {0.f, 1.f}) {
    for (int s = 0; s < 200; ++s) {
      SamplingRow p = make_row(t, 5, s);
      p.suppress = ids;
      const int tok = sample_one(l, p);
      EXPECT_TRUE(tok == 2 || tok == 3) << tok;
      if (t == 0.f) {
        EXPECT_EQ(tok, 3);
      }
    }
  }
  EXPECT_EQ(sample_one(l, make_row(0.f)), 0);  // not suppressed
  // Everything suppressed: step 4 falls back to the largest raw logit.
  const std::vector<int32_t> all = {0, 1, 2, 3};
  SamplingRow p = make_row(1.f, 1);
  p.suppress = all;
  EXPECT_EQ(sample_one(l, p), 0);
}

TEST(SamplingProcessing, PenaltySemanticsByHand) {
  // Repetition divides a positive logit and multiplies a negative one, for prompt-only tokens
  // too; presence / frequency only touch generated tokens (count > 0).
  const std::vector<float> l = {2.0f, -1.0f, 1.5f, -1.2f};
  const std::vector<TokenCount> prompt_only = {{0, 0}, {1, 0}};
  SamplingRow p = make_row(0.f);
  p.history = prompt_only;
  p.penalties.repetition = 2.f;  // z0 = 1.0 < 1.5: token 2 wins
  EXPECT_EQ(sample_one(l, p), 2);
  std::vector<float> neg = {-1.0f, -1.1f, -3.f, -3.f};
  p.penalties.repetition = 1.05f;  // z0 = -1.05 < -1.1? no: -1.05 > -1.1, token 0 stays
  EXPECT_EQ(sample_one(neg, p), 0);
  p.penalties.repetition = 1.2f;  // z0 = -1.2, z1 = -1.32: token 0 still
  EXPECT_EQ(sample_one(neg, p), 0);
  const std::vector<TokenCount> only0 = {{0, 0}};
  p.history = only0;  // z0 = -1.2 < z1 = -1.1: token 1
  EXPECT_EQ(sample_one(neg, p), 1);
  p.penalties.repetition = 1.f;
  p.penalties.presence = 2.f;  // prompt-only: no presence penalty
  EXPECT_EQ(sample_one(l, p), 0);
  const std::vector<TokenCount> gen = {{0, 3}};
  p.history = gen;  // generated 3 times: presence 0.4 -> 1.6 > 1.5 keeps token 0
  p.penalties.presence = 0.4f;
  EXPECT_EQ(sample_one(l, p), 0);
  p.penalties.frequency = 0.1f;  // 2.0 - 0.3 - 0.4 = 1.3 < 1.5: token 2
  EXPECT_EQ(sample_one(l, p), 2);
  p.penalties = Penalties{0.f, 0.2f, 1.f};  // 2.0 - 0.6 = 1.4 < 1.5
  EXPECT_EQ(sample_one(l, p), 2);
  p.penalties = Penalties{0.f, 0.1f, 1.f};  // 1.7 > 1.5
  EXPECT_EQ(sample_one(l, p), 0);
  p.penalties = Penalties{0.f, -0.5f, 1.f};  // negative penalties encourage
  EXPECT_EQ(sample_one(l, p), 0);
}

TEST(SamplingProcessing, BiasThenPenaltyOrder) {
  // vLLM's order: bias first, then repetition sees the biased logit's sign.
  const std::vector<float> l = {1.0f, 0.3f};
  const std::vector<TokenCount> h = {{0, 0}};
  const std::vector<TokenBias> b = {{0, -1.5f}};
  SamplingRow p = make_row(0.f);
  p.history = h;
  p.logit_bias = b;
  p.penalties.repetition = 0.5f;  // (1.0 - 1.5) * 0.5 = -0.25 < 0.3 (bias after: 1 / 0.5 - 1.5 > 0.3)
  EXPECT_EQ(sample_one(l, p), 1);
}

// Random penalties, histories and biases, greedy and sampled, against the reference.
TEST(SamplingProcessing, PenaltiesAndBiasMatchF64Reference) {
  const int V = 64, S = 48;
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> unif(-2.f, 2.f);
  int inexact = 0, total = 0;
  for (int round = 0; round < 10; ++round) {
    const auto logits = normal_logits(size_t(S) * V, 1.5f, 300 + round);
    std::vector<std::vector<TokenCount>> hists(S);
    std::vector<std::vector<TokenBias>> biases(S);
    std::vector<SamplingRow> rows;
    for (int r = 0; r < S; ++r) {
      SamplingRow p = make_row(r % 2 ? 0.f : 0.8f, 50 + r, round);
      const int kind = r % 6;  // 0..2: one feature alone; 3..5: all together
      if (kind == 0 || kind >= 3) p.penalties.presence = unif(rng);
      if (kind == 1 || kind >= 3) p.penalties.frequency = unif(rng);
      if (kind == 2 || kind >= 3) p.penalties.repetition = 0.5f + std::abs(unif(rng));
      if (kind >= 4) p.top_k = 10;
      for (int t = 0; t < V; ++t) {
        if (rng() % 3 == 0) hists[size_t(r)].push_back({t, int32_t(rng() % 4)});
        if (kind == 5 && rng() % 8 == 0) biases[size_t(r)].push_back({t, 3.f * unif(rng)});
      }
      p.history = hists[size_t(r)];
      p.logit_bias = biases[size_t(r)];
      rows.push_back(p);
    }
    const auto res = run(logits, S, rows);
    for (int r = 0; r < S; ++r, ++total)
      inexact += !check_against_reference(&logits[size_t(r) * V], V, rows[size_t(r)],
                                          res.tokens[size_t(r)]);
  }
  EXPECT_LE(inexact, total / 100);
}

TEST(SamplingProcessing, HistoryIgnoredWithoutPenalties) {
  const std::vector<float> l = {2.f, 1.f};
  const std::vector<TokenCount> h = {{0, 5}};
  SamplingRow p = make_row(0.f);
  p.history = h;  // penalties at their neutral values: nothing changes
  EXPECT_EQ(sample_one(l, p), 0);
}

std::vector<uint32_t> random_mask(int V, std::mt19937& rng, int one_in) {
  std::vector<uint32_t> m(size_t((V + 31) / 32), 0u);
  for (int i = 0; i < V; ++i)
    if (rng() % uint32_t(one_in) == 0) m[size_t(i / 32)] |= 1u << (i % 32);
  if (std::all_of(m.begin(), m.end(), [](uint32_t w) { return w == 0; })) m[0] |= 1u;
  return m;
}

TEST(SamplingProcessing, AllowedMaskIsHard) {
  const int V = 1000, S = 16;
  std::mt19937 rng(4);
  std::vector<std::vector<uint32_t>> masks;
  for (int r = 0; r < S; ++r) masks.push_back(random_mask(V, rng, r % 2 ? 3 : 50));
  std::vector<SamplingRow> rows;
  for (int r = 0; r < S; ++r) {
    SamplingRow p = make_row(r % 4 == 0 ? 0.f : 1.5f, 7 + r);
    if (r % 4 == 1) p.top_p = 0.9f;
    if (r % 4 == 2) p.min_p = 0.01f, p.top_k = 5;
    p.allowed = masks[size_t(r)];
    rows.push_back(p);
  }
  int inexact = 0;
  for (uint64_t step = 0; step < 30; ++step) {
    const auto logits = normal_logits(size_t(S) * V, 3.f, uint32_t(step));
    for (auto& p : rows) p.step = step;
    const auto res = run(logits, S, rows);
    for (int r = 0; r < S; ++r) {
      const int t = res.tokens[size_t(r)];
      ASSERT_TRUE((masks[size_t(r)][size_t(t / 32)] >> (t % 32)) & 1u) << "masked token " << t;
      inexact += !check_against_reference(&logits[size_t(r) * V], V, rows[size_t(r)], t);
    }
  }
  EXPECT_LE(inexact, 30 * S / 100);
}

TEST(SamplingProcessing, MaskWithSuppressionAndFallback) {
  const std::vector<float> l = {9.f, 8.f, 7.f, -INFINITY, 1.f};
  const std::vector<uint32_t> m = {0b01011u};  // tokens 0, 1, 3
  const std::vector<int32_t> sup = {0};
  SamplingRow p = make_row(0.f);
  p.allowed = m;
  EXPECT_EQ(sample_one(l, p), 0);
  p.suppress = sup;  // best allowed, not suppressed
  EXPECT_EQ(sample_one(l, p), 1);
  const std::vector<int32_t> sup01 = {0, 1};
  p.suppress = sup01;  // only token 3 (-inf) left: step 4, best allowed raw logit
  EXPECT_EQ(sample_one(l, p), 0);
  p.temperature = 1.f;
  EXPECT_EQ(sample_one(l, p), 0);
  const std::vector<uint32_t> only3 = {0b01000u};
  p.allowed = only3;  // the mask is hard even for the fallback
  EXPECT_EQ(sample_one(l, p), 3);
}

// The batch tests/gpu/sampler_gpu_test.cc runs through the CUDA op, on the CPU op.
TEST(SamplingProcessing, MaskSuppressionAndFallbackInOneBatch) {
  const FallbackBatch fb;
  FallbackBatch::check(run(fb.logits, 6, fb.rows).tokens);
}

}  // namespace
}  // namespace nanovllm::samplertest
