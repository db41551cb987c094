// The sampling op's contract on the CPU backend (Backend::sample; definition in
// kernels/sampling.h): greedy, temperature, top-k / top-p / min-p against an f64 reference,
// the Philox noise, seeded batch invariance, the sampled distribution, logprobs, bad inputs.
#include <algorithm>
#include <array>
#include <chrono>
#include <map>

#include "sampler_test_util.h"
#include "util/check.h"

namespace nanovllm::samplertest {
namespace {

std::vector<float> logits_of_probs(const std::vector<double>& probs) {
  std::vector<float> l;
  for (double p : probs) l.push_back(static_cast<float>(std::log(p)) + 3.0f);  // shift-invariant
  return l;
}

// Frequencies of the sampled token over `n` consecutive steps.
std::map<int, int> histogram(const std::vector<float>& logits, SamplingRow p, int n,
                             uint64_t seed = 99) {
  std::map<int, int> h;
  p.seed = seed;
  for (int s = 0; s < n; ++s) {
    p.step = uint64_t(s);
    h[sample_one(logits, p)]++;
  }
  return h;
}

TEST(SamplingOp, GreedyRuleIsVllms) {
  EXPECT_TRUE(is_greedy_temperature(0.f));
  EXPECT_TRUE(is_greedy_temperature(9.99e-6f));
  EXPECT_FALSE(is_greedy_temperature(1e-5f));
  EXPECT_FALSE(is_greedy_temperature(0.5f));
  EXPECT_TRUE(is_greedy_temperature(std::nanf("")));
}

TEST(SamplingOp, GreedyIsArgmaxLowestIndexOnTies) {
  std::vector<float> l = {0.1f, 2.f, -1.f, 2.f, 1.9f};
  EXPECT_EQ(sample_one(l, make_row(0.f)), 1);
  l[0] = std::nanf("");
  l[4] = 5.f;
  EXPECT_EQ(sample_one(l, make_row(0.f)), 4);  // NaN never wins
  for (int s = 0; s < 20; ++s) EXPECT_EQ(sample_one(l, make_row(1e-7f, 9, s)), 4);
  const std::vector<float> all_nan(4, std::nanf(""));
  EXPECT_EQ(sample_one(all_nan, make_row(0.f)), 0);    // step 4: lowest allowed index
  EXPECT_EQ(sample_one(all_nan, make_row(1.f, 3)), 0);
}

TEST(SamplingOp, TopKOneIsGreedy) {
  for (int t = 0; t < 50; ++t) {
    const auto l = normal_logits(1000, 3.f, 3 + t);
    SamplingRow p = make_row(1.3f, 7 + t, t);
    p.top_k = 1;
    EXPECT_EQ(sample_one(l, p), int(std::max_element(l.begin(), l.end()) - l.begin()));
  }
}

// Every filter combination against the f64 reference of the definition, with the exact noise.
TEST(SamplingOp, FiltersAndRaceMatchF64Reference) {
  const int V = 3000, S = 36;
  const auto logits = normal_logits(size_t(S) * V, 2.f, 11);
  std::vector<SamplingRow> rows;
  for (int r = 0; r < S; ++r) {
    SamplingRow p = make_row(0.7f + 0.1f * float(r % 7), 1000 + r);
    switch (r % 6) {
      case 0: p.top_k = 20; break;
      case 1: p.top_p = 0.8f; break;
      case 2: p.min_p = 0.05f; break;
      case 3: p.top_k = 50, p.top_p = 0.9f, p.min_p = 0.02f; break;
      case 4: break;  // unfiltered race (the pruned path)
      case 5: p.temperature = 0.f; break;
    }
    rows.push_back(p);
  }
  int inexact = 0, total = 0;
  for (uint64_t step = 0; step < 10; ++step) {
    for (auto& p : rows) p.step = step;
    const auto res = run(logits, S, rows);
    for (int r = 0; r < S; ++r, ++total)
      inexact += !check_against_reference(&logits[size_t(r) * V], V, rows[size_t(r)],
                                          res.tokens[size_t(r)]);
  }
  EXPECT_LE(inexact, total / 100) << "near-ties / boundary cases only";
}

TEST(SamplingOp, FloatOrderKeyIsMonotone) {
  const float vals[] = {-INFINITY, -3e38f, -2.5f, -1.f, -1e-30f, -0.f,    0.f,
                        1e-30f,    0.5f,   1.f,   7.f,  3e38f,   INFINITY};
  for (size_t i = 0; i + 1 < sizeof(vals) / sizeof(vals[0]); ++i) {
    EXPECT_LT(float_order_key(vals[i]), float_order_key(vals[i + 1])) << vals[i];
    EXPECT_EQ(float_from_order_key(float_order_key(vals[i])), vals[i]);
  }
}

// The CUDA sampler takes argmax z + gumbel: the CPU race must pick the same token.
TEST(SamplingOp, RaceEqualsGumbelArgmax) {
  const int V = 3000;
  const auto l = normal_logits(V, 2.f, 17);
  int same = 0;
  for (int step = 0; step < 50; ++step) {
    int expect = 0;
    float best = -INFINITY;
    for (int i = 0; i < V; ++i) {
      const float g = l[size_t(i)] * (1.f / 0.8f) + sampler_gumbel(77, step, uint32_t(i));
      if (g > best) best = g, expect = i;
    }
    same += sample_one(l, make_row(0.8f, 77, step)) == expect;
  }
  EXPECT_GE(same, 49);  // float rounding may flip a near-tie, nothing more
}

// util/philox.h's noise bounds hold at every extreme of the noise word (the 23 bits u keeps are
// all 0 or all 1) and over a million draws.
TEST(SamplingOp, GumbelNoiseStaysWithinItsBounds) {
  auto g_of = [](uint32_t w) { return -std::log(-std::log(noise_uniform(w))); };
  float lo = INFINITY, hi = -INFINITY;
  for (uint32_t w : {0u, 0x1FFu, 0x200u, 0x7FFFFFFFu, 0xFFFFFE00u, 0xFFFFFFFFu}) {
    lo = std::min(lo, g_of(w));
    hi = std::max(hi, g_of(w));
  }
  EXPECT_NEAR(lo, -2.81f, 0.01f);  // u = 2^-24
  EXPECT_NEAR(hi, 16.64f, 0.01f);  // u = 1 - 2^-24
  for (uint32_t i = 0; i < 1000000; ++i) {
    const float g = sampler_gumbel(5, 9, i);
    ASSERT_GE(g, kGumbelMin) << i;
    ASSERT_LE(g, kGumbelMax) << i;
  }
  EXPECT_GT(lo, kGumbelMin);
  EXPECT_LT(hi, kGumbelMax);
}

// The CUDA sampler's split pass skips, in each chunk, the entries below gumbel_prune_below(chunk
// max) without drawing their noise. The chunk's winner (value, then lowest index) must be the
// same as racing every entry: at every logit scale, with -inf / NaN / +inf entries and
// near-max ties, and the pruning must actually skip entries where logits are spread.
TEST(SamplingOp, GumbelPruningKeepsTheChunkWinner) {
  std::mt19937 gen(4242);
  int64_t pruned = 0, raced = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const float scale = std::array{1e-3f, 0.5f, 3.f, 10.f, 60.f, 1e4f, 1e30f}[size_t(trial % 7)];
    const int n = 64 + int(gen() % 2000);
    std::normal_distribution<float> nd(0.f, scale);
    std::vector<float> z(static_cast<size_t>(n));
    for (float& v : z) v = nd(gen) + (trial % 3 == 0 ? 1e6f : 0.f);  // large |zc| for the margin
    if (trial % 5 == 1) z[gen() % size_t(n)] = -INFINITY;
    if (trial % 5 == 2) z[gen() % size_t(n)] = NAN;
    if (trial % 11 == 3) z[gen() % size_t(n)] = INFINITY;
    float zc = -INFINITY;
    for (float v : z) zc = std::fmax(zc, v);
    const float below = gumbel_prune_below(zc);
    if (trial % 4 == 0 && std::isfinite(below)) {  // entries right at the bound: kept, and pruned
      const size_t imax = size_t(std::find(z.begin(), z.end(), zc) - z.begin());  // zc stays the max
      for (int k = 0; k < 8; ++k) {
        size_t j;
        do j = gen() % size_t(n);
        while (j == imax);
        z[j] = k % 2 ? below : std::nextafter(below, -INFINITY);
      }
    }
    const uint64_t seed = gen(), step = gen() % 1000;
    // The CUDA kernel's order: larger value, then lower index; NaN never wins (better()).
    float bv_all = -INFINITY, bv_kept = -INFINITY;
    int bi_all = INT32_MAX, bi_kept = INT32_MAX;
    for (int i = 0; i < n; ++i) {
      const float v = z[size_t(i)] + sampler_gumbel(seed, step, uint32_t(i));
      if (v > bv_all || (v == bv_all && i < bi_all)) bv_all = v, bi_all = i;
      if (z[size_t(i)] < below) {
        ++pruned;
        continue;
      }
      ++raced;
      if (v > bv_kept || (v == bv_kept && i < bi_kept)) bv_kept = v, bi_kept = i;
    }
    ASSERT_EQ(bi_kept, bi_all) << "trial " << trial << " scale " << scale;
  }
  EXPECT_GT(pruned, 10 * raced / 100) << "the bound prunes almost nothing";
  EXPECT_GT(raced, 0);

  // Random chunks almost never draw noise near its extremes, so also the worst case: the
  // largest and smallest noise among a million draws, the low one on the chunk's max logit and
  // the high one d below it, d just under their noise gap (~16.4): the lower logit wins, and a
  // bound tighter than the noise's range would have pruned it.
  const uint64_t seed = 31, step = 7;
  uint32_t i_hi = 0, i_lo = 0;
  for (uint32_t i = 1; i < 1000000; ++i) {
    if (sampler_gumbel(seed, step, i) > sampler_gumbel(seed, step, i_hi)) i_hi = i;
    if (sampler_gumbel(seed, step, i) < sampler_gumbel(seed, step, i_lo)) i_lo = i;
  }
  const float gap = sampler_gumbel(seed, step, i_hi) - sampler_gumbel(seed, step, i_lo);
  ASSERT_GT(gap, 15.f);
  for (float zc : {0.f, 37.5f, -1e4f}) {
    const float z_hi = zc - (gap - 0.05f);  // still wins: z_hi + g_hi > zc + g_lo
    ASSERT_GT(z_hi + sampler_gumbel(seed, step, i_hi), zc + sampler_gumbel(seed, step, i_lo));
    EXPECT_FALSE(z_hi < gumbel_prune_below(zc)) << "the winner would be pruned at zc " << zc;
  }
}

// The same seeded request alone, in batches of several sizes, at several positions, next to
// rows with other features, on 1, 2 and 4 threads: identical tokens.
TEST(SamplingOp, SeededTokensDoNotDependOnBatch) {
  const int V = 5000;
  const auto mine = normal_logits(V, 2.f, 5);
  std::vector<uint32_t> mask(size_t((V + 31) / 32), 0xF0F0F0F0u);
  const std::vector<TokenCount> hist = {{3, 1}, {40, 0}, {41, 2}};
  const std::vector<int32_t> eos = {7};
  for (int variant = 0; variant < 3; ++variant) {
    SamplingRow p = make_row(0.9f, 42);
    if (variant == 1) p.top_p = 0.9f, p.top_k = 50;
    if (variant == 2) p.min_p = 0.1f, p.num_logprobs = 3;
    int differs = 0;
    for (uint64_t step = 0; step < 15; ++step) {
      p.step = step;
      const int alone = sample_one(mine, p);
      SamplingRow other_seed = p;
      other_seed.seed = 43;
      differs += sample_one(mine, other_seed) != alone;
      for (int S : {2, 5, 17})
        for (int pos : {0, S / 2, S - 1})
          for (int threads : {1, 4}) {
            auto batch = normal_logits(size_t(S) * V, 2.f, uint32_t(100 + S + pos));
            std::copy(mine.begin(), mine.end(), batch.begin() + int64_t(pos) * V);
            std::vector<SamplingRow> rows;
            for (int r = 0; r < S; ++r) {
              SamplingRow o = make_row(r % 3 ? 1.1f : 0.f, 1000 + r, step * r);
              o.top_k = r % 2 ? 30 : -1;
              o.penalties.repetition = 1.3f;
              o.history = hist;
              o.suppress = eos;
              if (r % 4 == 1) o.allowed = mask;
              if (r % 5 == 2) o.num_logprobs = 2;
              rows.push_back(r == pos ? p : o);
            }
            ASSERT_EQ(run(batch, S, rows, threads).tokens[size_t(pos)], alone)
                << "variant " << variant << " step " << step << " S " << S << " pos " << pos;
          }
    }
    EXPECT_GT(differs, 5) << "another seed gives other tokens";
  }
}

TEST(SamplingOp, EmpiricalDistributionMatchesSoftmaxOverTemperature) {
  const std::vector<float> l = {1.0f, 0.2f, -0.5f, 2.0f, 0.0f, -2.0f};
  const float T = 0.8f;
  const int n = 40000;
  auto h = histogram(l, make_row(T), n, 2024);
  double z = 0;
  for (float x : l) z += std::exp(x / T);
  double chi2 = 0;
  for (int i = 0; i < 6; ++i) {
    const double e = n * std::exp(l[size_t(i)] / T) / z;
    chi2 += (h[i] - e) * (h[i] - e) / e;
  }
  EXPECT_LT(chi2, 20.5) << "chi-square with 5 degrees of freedom (p = 0.001)";
}

TEST(SamplingOp, TopPKeepsTheSmallestNucleusAndItsTies) {
  const auto l = logits_of_probs({0.5, 0.25, 0.15, 0.1});
  SamplingRow p = make_row(1.f);
  p.top_p = 0.7f;  // 0.5 + 0.25 >= 0.7
  auto h = histogram(l, p, 3000);
  EXPECT_EQ(h.count(2) + h.count(3), 0u);
  EXPECT_GT(h[0], 1700);  // expected 2000 of 3000
  EXPECT_GT(h[1], 700);   // expected 1000
  p.top_p = 0.45f;        // the top token alone
  EXPECT_EQ(histogram(l, p, 500)[0], 500);
  p.top_p = 0.8f;  // needs the third token
  h = histogram(l, p, 3000);
  EXPECT_GT(h[2], 200);
  EXPECT_EQ(h.count(3), 0u);
  // Ties at the threshold all stay: 0.3 reaches p with token 0 alone, token 2 ties it.
  const auto tied = logits_of_probs({0.3, 0.1, 0.3, 0.3});
  p.top_p = 0.25f;
  h = histogram(tied, p, 3000);
  EXPECT_EQ(h.count(1), 0u);
  EXPECT_GT(h[0], 800);
  EXPECT_GT(h[2], 800);
  EXPECT_GT(h[3], 800);
}

TEST(SamplingOp, MinPAndTopKExcludeTheRightTokens) {
  const auto l = logits_of_probs({0.5, 0.25, 0.15, 0.1});
  SamplingRow p = make_row(1.f);
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

TEST(SamplingOp, LogprobsAreRawLogSoftmax) {
  const int V = 400, S = 4;
  auto logits = normal_logits(size_t(S) * V, 3.f, 8);
  logits[5] = logits[9] = 20.f;  // a tie at the top: lower index first
  logits[17] = std::nanf("");
  std::vector<SamplingRow> rows(S);
  rows[0] = make_row(0.3f, 1);  // temperature, filters, penalties, bias, mask: not in logprobs
  rows[0].top_k = 2;
  rows[0].num_logprobs = 5;
  const std::vector<TokenBias> bias = {{9, -50.f}};
  const std::vector<TokenCount> hist = {{5, 3}};
  rows[0].logit_bias = bias;
  rows[0].history = hist;
  rows[0].penalties.frequency = 1.f;
  rows[1] = make_row(0.f);
  rows[1].num_logprobs = 0;  // the chosen token only
  rows[2] = make_row(1.f, 5);  // no logprobs
  rows[3] = make_row(1.f, 6);
  rows[3].num_logprobs = 20;
  const auto res = run(logits, S, rows);
  ASSERT_EQ(res.logprobs.size(), size_t(S));
  for (int r : {0, 1, 3}) {
    const auto ref = ref_log_softmax(&logits[size_t(r) * V], V);
    const auto& lp = res.logprobs[size_t(r)];
    EXPECT_NEAR(lp.logprob, ref[size_t(res.tokens[size_t(r)])], 1e-4) << "row " << r;
    std::vector<int> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return ref[a] > ref[b]; });
    ASSERT_EQ(int(lp.top.size()), std::max(0, rows[size_t(r)].num_logprobs)) << "row " << r;
    for (size_t j = 0; j < lp.top.size(); ++j) {
      EXPECT_EQ(lp.top[j].token_id, order[j]) << "row " << r << " rank " << j;
      EXPECT_NEAR(lp.top[j].logprob, ref[size_t(order[j])], 1e-4);
    }
  }
  EXPECT_EQ(res.logprobs[0].top[0].token_id, 5);
  EXPECT_EQ(res.logprobs[0].top[1].token_id, 9);
  EXPECT_EQ(res.tokens[0], 5);  // token 9's bias of -50 removes it; 5 keeps 20 - 3
  EXPECT_TRUE(res.logprobs[2].top.empty());
  // More logprobs than tokens: all of them.
  const std::vector<float> tiny = {0.f, 1.f, 2.f};
  SamplingRow p = make_row(0.f);
  p.num_logprobs = 20;
  EXPECT_EQ(run(tiny, 1, {p}).logprobs[0].top.size(), 3u);
}

TEST(SamplingOp, LargeVocabTopPIsExactAndFast) {
  const int V = 151936, S = 8;
  const auto logits = normal_logits(size_t(S) * V, 4.f, 5);
  std::vector<SamplingRow> rows;
  for (int r = 0; r < S; ++r) {
    SamplingRow p = make_row(r % 2 ? 1.f : 0.7f, 100 + r, 3);
    if (r % 2 == 0) p.top_p = 0.9f;
    rows.push_back(p);
  }
  auto t0 = std::chrono::steady_clock::now();
  const auto res = run(logits, S, rows);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("sampling %d x %d rows took %.2f ms\n", S, V, ms);
  for (int r = 0; r < S; ++r)
    check_against_reference(&logits[size_t(r) * V], V, rows[size_t(r)], res.tokens[size_t(r)]);
}

TEST(SamplingOp, BadInputsAreClearErrors) {
  const std::vector<float> l(2 * 100, 0.f);
  auto expect_error = [&](const std::vector<SamplingRow>& rows, const char* what) {
    try {
      run(l, 2, rows);
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  expect_error({make_row(1.f)}, "1 sampling rows for 2 logits rows");
  std::vector<SamplingRow> rows(2, make_row(1.f));
  rows[1].top_p = 0.f;
  expect_error(rows, "sampling row 1: top_p must be in (0, 1]");
  rows[1] = make_row(-1.f);
  expect_error(rows, "temperature must be finite and >= 0");
  rows[1] = make_row(1.f);
  rows[1].num_logprobs = 21;
  expect_error(rows, "num_logprobs must be in [-1, 20]");
  rows[1] = make_row(1.f);
  rows[1].penalties.repetition = 0.f;
  expect_error(rows, "repetition_penalty must be finite and > 0");
  rows[1] = make_row(1.f);
  const std::vector<uint32_t> short_mask(3, ~0u);  // V = 100 needs 4 words
  rows[1].allowed = short_mask;
  expect_error(rows, "allowed-token mask has 3 words; vocabulary 100 needs 4");
  const std::vector<uint32_t> none(4, 0u), past_v = {0u, 0u, 0u, 0xFFFFFFF0u};  // bits >= 100
  rows[1].allowed = none;
  expect_error(rows, "allows no token");
  rows[1].allowed = past_v;
  expect_error(rows, "allows no token");
  rows[1] = make_row(1.f);
  rows[1].penalties.presence = 0.5f;
  const std::vector<TokenCount> unsorted = {{5, 1}, {3, 1}}, outside = {{100, 1}};
  rows[1].history = unsorted;
  expect_error(rows, "history must be sorted by token id without repeats; 5 comes before 3");
  rows[1].history = outside;
  expect_error(rows, "history token 100 is outside [0, 100)");
  rows[1] = make_row(1.f);
  const std::vector<TokenBias> bad_bias = {{-1, 1.f}};
  rows[1].logit_bias = bad_bias;
  expect_error(rows, "logit_bias token -1 is outside");
  Tensor bf16 = Tensor::empty({2, 100}, DType::BF16);
  EXPECT_THROW(cpu().sample(bf16, SamplingBatch{std::vector<SamplingRow>(2)}), Error);
}

}  // namespace
}  // namespace nanovllm::samplertest
