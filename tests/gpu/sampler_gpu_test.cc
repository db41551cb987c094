// Device sampler: greedy exactness, Gumbel-max with the documented Philox noise against a host
// re-implementation, the filters' guarantees, and the sampled distribution.
#include <algorithm>
#include <numeric>

#include "gpu_test_util.h"
#include "kernels/cuda/philox_rng.h"

namespace nanovllm::gputest {
namespace {

using cuda::SampleRow;

struct Logits {
  Tensor dev;
  std::vector<float> host;
  int64_t S, V;
};

Logits make_logits(int64_t S, int64_t V, float lo = -5.f, float hi = 5.f) {
  auto t = random_tensor({S, V}, DType::F32, lo, hi);
  return {t.dev, t.host, S, V};
}

int64_t argmax(const float* x, int64_t V) {
  return std::max_element(x, x + V) - x;  // first maximum
}

std::vector<int32_t> sample(const Logits& l, const std::vector<SampleRow>& rows) {
  return download_i32(backend()->sample(l.dev, rows));
}

TEST(GpuSampler, Greedy) {
  NV_NEED_GPU();
  auto l = make_logits(64, 1000);
  std::vector<SampleRow> rows(64);
  for (auto& r : rows) r.temperature = 0.f;
  const auto tok = sample(l, rows);
  for (int64_t s = 0; s < l.S; ++s) EXPECT_EQ(tok[s], argmax(&l.host[s * l.V], l.V)) << s;
}

TEST(GpuSampler, TopK1IsGreedy) {
  NV_NEED_GPU();
  auto l = make_logits(32, 5000);
  std::vector<SampleRow> rows(32);
  for (size_t i = 0; i < rows.size(); ++i) {
    rows[i].top_k = 1;
    rows[i].seed = 99;
    rows[i].step = i;
  }
  const auto tok = sample(l, rows);
  for (int64_t s = 0; s < l.S; ++s) EXPECT_EQ(tok[s], argmax(&l.host[s * l.V], l.V)) << s;
}

// Host version of the documented Gumbel-max draw (no filters).
int64_t host_gumbel(const float* x, int64_t V, const SampleRow& r) {
  const float inv_t = 1.f / r.temperature;
  int64_t best = 0;
  float bv = -INFINITY;
  for (int64_t i = 0; i < V; ++i) {
    const float v = x[i] * inv_t + sampler_gumbel(r.seed, r.step, uint32_t(i));
    if (v > bv) {
      bv = v;
      best = i;
    }
  }
  return best;
}

TEST(GpuSampler, GumbelMatchesHostNoise) {
  NV_NEED_GPU();
  const int64_t S = 256;
  auto l = make_logits(S, 1000);
  std::vector<SampleRow> rows(S);
  for (int64_t i = 0; i < S; ++i) {
    rows[i].temperature = 0.7f;
    rows[i].seed = 1234 + uint64_t(i % 3);
    rows[i].step = uint64_t(i);
  }
  const auto tok = sample(l, rows);
  int same = 0;
  for (int64_t s = 0; s < S; ++s) same += tok[s] == host_gumbel(&l.host[s * l.V], l.V, rows[s]);
  // Device and host logf may differ in the last ulp, which can only flip near-exact ties.
  EXPECT_GE(same, S - 2) << "GPU and host Gumbel-max disagree on " << S - same << " rows";
}

std::vector<double> softmax(const float* x, int64_t V, float temp) {
  std::vector<double> p(V);
  double mx = -INFINITY, sum = 0;
  for (int64_t i = 0; i < V; ++i) mx = std::max(mx, double(x[i]) / temp);
  for (int64_t i = 0; i < V; ++i) sum += (p[i] = std::exp(double(x[i]) / temp - mx));
  for (auto& v : p) v /= sum;
  return p;
}

TEST(GpuSampler, FiltersAreRespected) {
  NV_NEED_GPU();
  const int64_t S = 300, V = 2000;
  auto l = make_logits(S, V, -3.f, 3.f);
  std::vector<SampleRow> rows(S);
  for (int64_t i = 0; i < S; ++i) {
    rows[i].seed = 7;
    rows[i].step = uint64_t(i);
    rows[i].temperature = 0.9f;
    if (i % 3 == 0) rows[i].top_k = 5;
    if (i % 3 == 1) rows[i].top_p = 0.3f;
    if (i % 3 == 2) rows[i].min_p = 0.3f;
  }
  const auto tok = sample(l, rows);
  for (int64_t s = 0; s < S; ++s) {
    const float* x = &l.host[s * V];
    const auto p = softmax(x, V, rows[s].temperature);
    ASSERT_GE(tok[s], 0);
    ASSERT_LT(tok[s], V);
    const double pt = p[tok[s]];
    if (s % 3 == 0) {  // among the 5 largest
      int larger = 0;
      for (int64_t i = 0; i < V; ++i) larger += x[i] > x[tok[s]];
      EXPECT_LT(larger, 5) << "row " << s;
    } else if (s % 3 == 1) {  // mass strictly above the token < top_p
      double above = 0;
      for (int64_t i = 0; i < V; ++i)
        if (p[i] > pt) above += p[i];
      EXPECT_LT(above, 0.3 + 1e-4) << "row " << s;
    } else {  // prob >= min_p * max prob
      const double pmax = *std::max_element(p.begin(), p.end());
      EXPECT_GE(pt, 0.3 * pmax * (1 - 1e-4)) << "row " << s;
    }
  }
}

TEST(GpuSampler, Distribution) {
  NV_NEED_GPU();
  const int64_t S = 4000, V = 4;
  std::vector<float> x(S * V);
  for (int64_t s = 0; s < S; ++s)
    for (int64_t i = 0; i < V; ++i) x[s * V + i] = float(i) * 0.5f;
  Logits l{from_host_f32(x, {S, V}, DType::F32), x, S, V};
  std::vector<SampleRow> rows(S);
  for (int64_t i = 0; i < S; ++i) {
    rows[i].seed = 42;
    rows[i].step = uint64_t(i);
  }
  const auto tok = sample(l, rows);
  std::vector<double> freq(V, 0);
  for (auto t : tok) freq[t] += 1.0 / S;
  const auto p = softmax(x.data(), V, 1.f);
  for (int64_t i = 0; i < V; ++i) EXPECT_NEAR(freq[i], p[i], 0.03) << "token " << i;
}

}  // namespace
}  // namespace nanovllm::gputest
