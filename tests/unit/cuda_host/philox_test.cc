#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "kernels/cuda/philox_rng.h"

namespace nanovllm {
namespace {

Philox4 P(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return Philox4{{a, b, c, d}}; }

// Random123's published known-answer vectors for Philox4x32-10.
TEST(CudaPhilox, KnownAnswers) {
  auto r = philox4x32_10(P(0, 0, 0, 0), 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = philox4x32_10(P(~0u, ~0u, ~0u, ~0u), ~0u, ~0u);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[1], 0x41c83b0eu);
  EXPECT_EQ(r.v[2], 0xa20bc7c6u);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
  r = philox4x32_10(P(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u), 0xa4093822u,
                    0x299f31d0u);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
}

TEST(CudaPhilox, NoiseLayout) {
  // Documented layout: key = seed halves, counter = {step lo, step hi, i, 0}, word 0.
  const uint64_t seed = 0x0123456789abcdefull, step = 0x0000000500000007ull;
  const auto r = philox4x32_10(P(7, 5, 42, 0), 0x89abcdefu, 0x01234567u);
  EXPECT_EQ(sampler_noise_bits(seed, step, 42), r.v[0]);
  EXPECT_NE(sampler_noise_bits(seed, step, 42), sampler_noise_bits(seed, step + 1, 42));
  EXPECT_NE(sampler_noise_bits(seed, step, 42), sampler_noise_bits(seed + 1, step, 42));
}

TEST(CudaPhilox, UniformIsOpenAndExact) {
  EXPECT_GT(philox_uniform(0), 0.f);
  EXPECT_EQ(philox_uniform(0), 1.f / 16777216.f);
  EXPECT_LT(philox_uniform(~0u), 1.f);
  EXPECT_EQ(philox_uniform(~0u), 1.f - 1.f / 16777216.f);
  double sum = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const float u = philox_uniform(sampler_noise_bits(1, 2, uint32_t(i)));
    ASSERT_GT(u, 0.f);
    ASSERT_LT(u, 1.f);
    sum += u;
  }
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  // Gumbel(0, 1) has mean ~0.5772 (Euler-Mascheroni).
  double g = 0;
  for (int i = 0; i < n; ++i) {
    const float x = sampler_gumbel(3, 9, uint32_t(i));
    ASSERT_TRUE(std::isfinite(x));
    g += x;
  }
  EXPECT_NEAR(g / n, 0.5772, 0.03);
}

TEST(CudaPhilox, OrderKeyIsMonotone) {
  const float vals[] = {-INFINITY, -3e38f, -2.5f, -1.f, -1e-30f, -0.f,    0.f,
                        1e-30f,    0.5f,   1.f,   7.f,  3e38f,   INFINITY};
  for (size_t i = 0; i + 1 < sizeof(vals) / sizeof(vals[0]); ++i) {
    EXPECT_LT(float_order_key(vals[i]), float_order_key(vals[i + 1])) << vals[i];
    EXPECT_EQ(float_from_order_key(float_order_key(vals[i])), vals[i]);
  }
}

}  // namespace
}  // namespace nanovllm
