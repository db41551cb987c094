// Helpers of the sampling-op tests: the CPU backend's op on host vectors, and an independent f64
// reference of the op's definition (kernels/sampling.h) written from the definition only.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "kernels/backend_factory.h"

namespace nanovllm::samplertest {

constexpr double kInf = std::numeric_limits<double>::infinity();

inline Backend& cpu(int threads = 2) {
  static std::unique_ptr<Backend> b1 = make_cpu_backend(1), b2 = make_cpu_backend(2),
                                  b4 = make_cpu_backend(4);
  return threads == 1 ? *b1 : threads == 4 ? *b4 : *b2;
}

inline SampleResult run(const std::vector<float>& logits, int64_t S,
                        const std::vector<SamplingRow>& rows, int threads = 2) {
  const int64_t V = int64_t(logits.size()) / std::max<int64_t>(S, 1);
  Tensor t = Tensor::wrap(const_cast<float*>(logits.data()), {S, V}, DType::F32);
  return cpu(threads).sample(t, SamplingBatch{rows});
}

inline int sample_one(const std::vector<float>& row, const SamplingRow& p) {
  return run(row, 1, {p}).tokens[0];
}

inline SamplingRow make_row(float temperature, uint64_t seed = 0, uint64_t step = 0) {
  SamplingRow r;
  r.temperature = temperature;
  r.seed = seed;
  r.step = step;
  return r;
}

// Six rows over one 6-token row of logits {9, 8, 7, -inf, 1, 9} exercising mask, suppression and
// the "nothing samplable" fallback; run on the CPU op (processing_test.cc) and on the CUDA op
// (tests/gpu/sampler_gpu_test.cc). Owns the spans' data. check() asserts the expected tokens.
struct FallbackBatch {
  std::vector<uint32_t> m = {0b101011u}, only3 = {0b001000u};  // m: tokens 0, 1, 3, 5
  std::vector<int32_t> sup0 = {0}, sup01 = {0, 1, 5};
  std::vector<SamplingRow> rows = std::vector<SamplingRow>(6, make_row(0.f));
  std::vector<float> logits;

  FallbackBatch() {
    const std::vector<float> l = {9.f, 8.f, 7.f, -INFINITY, 1.f, 9.f};
    rows[1].allowed = m;
    rows[2].allowed = m, rows[2].suppress = sup0;
    rows[3].allowed = m, rows[3].suppress = sup01;  // nothing samplable: best allowed raw (0)
    rows[4] = make_row(1.f, 3);
    rows[4].allowed = only3, rows[4].suppress = sup01;  // the mask holds even in the fallback
    rows[5] = make_row(2.f, 4);
    rows[5].suppress = sup01;
    for (int r = 0; r < 6; ++r) logits.insert(logits.end(), l.begin(), l.end());
  }
  // A sixth token ties token 0 at 9, so with 0 suppressed the best allowed token is 5, not 1 (the
  // GPU test expected 1 until it first ran, 2026-11-28, where the CPU and CUDA ops both said 5).
  static void check(const std::vector<int32_t>& t) {
    ASSERT_EQ(t.size(), 6u);
    EXPECT_EQ(t[0], 0);  // tie 0 / 5: lowest index
    EXPECT_EQ(t[1], 0);
    EXPECT_EQ(t[2], 5);
    EXPECT_EQ(t[3], 0);
    EXPECT_EQ(t[4], 3);
    EXPECT_TRUE(t[5] == 2 || t[5] == 4) << t[5];  // sampled among 2, 4 (3: -inf)
  }
};

inline std::vector<float> normal_logits(size_t n, float sigma, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

// Definition step 2 in f64: mask, suppression, bias, repetition, frequency, presence.
inline std::vector<double> ref_processed(const float* raw, int V, const SamplingRow& r) {
  std::vector<double> z(static_cast<size_t>(V));
  for (int i = 0; i < V; ++i) {
    const bool allowed = r.allowed.empty() || ((r.allowed[size_t(i / 32)] >> (i % 32)) & 1u);
    z[size_t(i)] = !allowed || std::isnan(raw[i]) ? -kInf : double(raw[i]);
  }
  for (const TokenBias& b : r.logit_bias) z[size_t(b.token)] += b.bias;
  if (r.has_penalties())
    for (const TokenCount& h : r.history) {
      double& v = z[size_t(h.token)];
      v = v > 0 ? v / r.penalties.repetition : v * r.penalties.repetition;
      v -= r.penalties.frequency * h.count + (h.count > 0 ? r.penalties.presence : 0.0);
    }
  for (int id : r.suppress)
    if (id >= 0 && id < V) z[size_t(id)] = -kInf;
  return z;
}

// The kept set of definition step 3 on scaled logits z (f64), filters with the given params.
inline std::vector<bool> ref_kept(const std::vector<double>& z, int top_k, double top_p,
                                  double min_p) {
  const int V = int(z.size());
  std::vector<int> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return z[a] > z[b]; });
  const double zmax = z[size_t(order[0])];
  double thr = -kInf;
  if (top_k >= 1 && top_k < V) thr = z[size_t(order[size_t(top_k - 1)])];
  if (top_p < 1.0) {
    double total = 0, cum = 0;
    for (int i : order)
      if (z[size_t(i)] >= thr && z[size_t(i)] > -kInf) total += std::exp(z[size_t(i)] - zmax);
    for (int i : order) {
      if (!(z[size_t(i)] >= thr && z[size_t(i)] > -kInf)) break;
      cum += std::exp(z[size_t(i)] - zmax);
      if (cum >= top_p * total) {
        thr = std::max(thr, z[size_t(i)]);
        break;
      }
    }
  }
  if (min_p > 0) thr = std::max(thr, zmax + std::log(min_p));
  std::vector<bool> kept(static_cast<size_t>(V));
  for (int i = 0; i < V; ++i) kept[size_t(i)] = z[size_t(i)] > -kInf && z[size_t(i)] >= thr;
  return kept;
}

// Race score of token i: z_i - log(E_i) (argmax = Gumbel-max with the Philox noise).
inline double race_score(const std::vector<double>& z, const SamplingRow& r, int i) {
  return z[size_t(i)] - std::log(double(sampler_exp_noise(r.seed, r.step, uint32_t(i))));
}

// Checks the op's `token` for one row against the reference; returns whether it matched
// exactly (a mismatch fails the test unless it is a near-tie within 1e-4 or sits on a filter
// boundary that f32 rounding can move).
inline bool check_against_reference(const float* raw, int V, const SamplingRow& r, int token) {
  const std::vector<double> zp = ref_processed(raw, V, r);
  int ref = -1;
  const bool any = std::any_of(zp.begin(), zp.end(), [](double v) { return v > -kInf; });
  if (!any) {  // step 4: allowed token with the largest raw logit
    double best = -kInf;
    for (int i = 0; i < V; ++i) {
      const bool allowed = r.allowed.empty() || ((r.allowed[size_t(i / 32)] >> (i % 32)) & 1u);
      const double v = std::isnan(raw[i]) ? -kInf : raw[i];
      if (allowed && (ref < 0 || v > best)) best = v, ref = i;
    }
    EXPECT_EQ(token, ref) << "fallback";
    return token == ref;
  }
  if (r.greedy()) {
    ref = int(std::max_element(zp.begin(), zp.end()) - zp.begin());
    if (token == ref) return true;
    EXPECT_NEAR(zp[size_t(token)], zp[size_t(ref)], 1e-5) << "greedy token " << token << " vs " << ref;
    return false;
  }
  std::vector<double> z(zp);
  for (double& v : z) v /= r.temperature;
  auto best_of = [&](const std::vector<bool>& kept) {
    int b = -1;
    for (int i = 0; i < V; ++i)
      if (kept[size_t(i)] && (b < 0 || race_score(z, r, i) > race_score(z, r, b))) b = i;
    return b;
  };
  const auto strict = ref_kept(z, r.top_k, r.top_p, r.min_p);
  ref = best_of(strict);
  if (token == ref) return true;
  // Loosened filters: the op's f32 thresholds may keep a boundary token the f64 ones drop.
  const auto loose = ref_kept(z, r.top_k, std::min(1.0, r.top_p + 1e-4), r.min_p * (1 - 1e-4));
  EXPECT_TRUE(token >= 0 && token < V && loose[size_t(token)]) << "token " << token << " not kept";
  if (token < 0 || token >= V || !loose[size_t(token)]) return false;
  const bool boundary = best_of(loose) == token;
  const bool near_tie = std::abs(race_score(z, r, token) - race_score(z, r, ref)) < 1e-4;
  EXPECT_TRUE(boundary || near_tie) << "token " << token << " vs reference " << ref;
  return false;
}

// log_softmax of the raw row in f64.
inline std::vector<double> ref_log_softmax(const float* raw, int V) {
  double m = -kInf;
  for (int i = 0; i < V; ++i)
    if (!std::isnan(raw[i])) m = std::max(m, double(raw[i]));
  double s = 0;
  for (int i = 0; i < V; ++i)
    if (!std::isnan(raw[i])) s += std::exp(double(raw[i]) - m);
  std::vector<double> out(static_cast<size_t>(V));
  for (int i = 0; i < V; ++i) out[size_t(i)] = std::isnan(raw[i]) ? -kInf : raw[i] - m - std::log(s);
  return out;
}

}  // namespace nanovllm::samplertest
