// fill_normal against textbook Box-Muller (libm, double) on the same uniforms, and moments.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "testing/random_normal.h"

namespace nanovllm {
namespace {

TEST(RandomNormal, MatchesExactBoxMuller) {
  const int64_t n = 100001;  // odd: the last pair is cut
  std::vector<float> got(n);
  fill_normal(12345, 0.f, 1.f, got.data(), n);
  uint64_t state = 12345;
  double max_err = 0;
  for (int64_t i = 0; i < n; i += 2) {
    uint64_t z = splitmix64(state);
    double u1 = double((z >> 40) + 1) / 16777216.0;
    double u2 = double((z >> 16) & 0xffffff) / 16777216.0;
    double r = std::sqrt(-2.0 * std::log(u1));
    double a = 2.0 * M_PI * u2;
    max_err = std::max(max_err, std::fabs(got[size_t(i)] - r * std::cos(a)));
    if (i + 1 < n) max_err = std::max(max_err, std::fabs(got[size_t(i + 1)] - r * std::sin(a)));
  }
  EXPECT_LT(max_err, 1e-5);
  std::printf("max abs error vs libm Box-Muller: %.3g\n", max_err);
}

TEST(RandomNormal, MomentsAndDeterminism) {
  const int64_t n = 1 << 20;
  std::vector<float> a(n), b(n);
  fill_normal(99, 2.f, 0.5f, a.data(), n);
  fill_normal(99, 2.f, 0.5f, b.data(), n);
  EXPECT_EQ(a, b);
  double s = 0, s2 = 0, s4 = 0;
  for (float x : a) {
    double d = (x - 2.0) / 0.5;
    s += d, s2 += d * d, s4 += d * d * d * d;
  }
  EXPECT_NEAR(s / n, 0.0, 0.005);
  EXPECT_NEAR(s2 / n, 1.0, 0.005);
  EXPECT_NEAR(s4 / n, 3.0, 0.05);  // normal kurtosis
  fill_normal(100, 2.f, 0.5f, b.data(), n);
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace nanovllm
