// util/philox.h: the one Philox4x32-10 and sampler-noise definition of both backends.
#include <gtest/gtest.h>

#include <cmath>

#include "util/philox.h"

namespace nanovllm {
namespace {

Philox4 P(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return Philox4{{a, b, c, d}}; }

// Known-answer vectors of Random123's kat_vectors file ("philox4x32 10" lines).
TEST(Philox, Random123KnownAnswers) {
  EXPECT_EQ(philox4x32_10(P(0, 0, 0, 0), 0, 0),
            P(0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u));
  EXPECT_EQ(philox4x32_10(P(~0u, ~0u, ~0u, ~0u), ~0u, ~0u),
            P(0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu));
  EXPECT_EQ(philox4x32_10(P(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u), 0xa4093822u,
                          0x299f31d0u),
            P(0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u));
}

TEST(Philox, SamplerNoiseLayout) {
  // key = seed halves, counter = {step lo, step hi, i, 0}, first word.
  const uint64_t seed = 0x0123456789abcdefull, step = 0x0000000500000007ull;
  EXPECT_EQ(sampler_noise_word(seed, step, 42),
            philox4x32_10(P(7u, 5u, 42u, 0u), 0x89abcdefu, 0x01234567u).v[0]);
  EXPECT_NE(sampler_noise_word(seed, step, 42), sampler_noise_word(seed, step + 1, 42));
  EXPECT_NE(sampler_noise_word(seed, step, 42), sampler_noise_word(seed + 1, step, 42));
}

TEST(Philox, UniformIsOpenAndExact) {
  EXPECT_EQ(noise_uniform(0), 1.f / 16777216.f);
  EXPECT_EQ(noise_uniform(~0u), 1.f - 1.f / 16777216.f);
  EXPECT_LT(noise_uniform(~0u), 1.f);
}

TEST(Philox, NoiseMoments) {
  // E[u] = 1/2, E[Exp(1)] = 1, E[Gumbel] = Euler-Mascheroni 0.5772; Gumbel = -log(Exp).
  double u = 0, e = 0, g = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const float x = noise_uniform(sampler_noise_word(1, 2, uint32_t(i)));
    ASSERT_GT(x, 0.f);
    ASSERT_LT(x, 1.f);
    u += x;
    e += sampler_exp_noise(1, 2, uint32_t(i));
    const float gi = sampler_gumbel(3, 9, uint32_t(i));
    ASSERT_TRUE(std::isfinite(gi));
    ASSERT_EQ(gi, -std::log(sampler_exp_noise(3, 9, uint32_t(i))));
    g += gi;
  }
  EXPECT_NEAR(u / n, 0.5, 0.01);
  EXPECT_NEAR(e / n, 1.0, 0.03);
  EXPECT_NEAR(g / n, 0.5772, 0.03);
}

}  // namespace
}  // namespace nanovllm
