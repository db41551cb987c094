#include "testing/random_normal.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <immintrin.h>

namespace nanovllm {

namespace {

constexpr int kBlock = 256;  // pairs per inner block (stack scratch)

// ln(x) for x in (0, 1]: x = 2^e * m with m in [sqrt(1/2), sqrt(2)), so that x near 1 gives
// e = 0 and no cancellation (r = sqrt(-2 ln u1) is very sensitive there);
// ln m = 2 atanh(t), t = (m-1)/(m+1) in (-0.172, 0.172), series to t^9 (truncation < 1e-9).
inline float log_unit(float x) {
  uint32_t b = std::bit_cast<uint32_t>(x);
  uint32_t mant = b & 0x007fffffu;
  // hi = 1 when 1.mant >= sqrt(2) (mantissa bits 0x3504f4), by integer carry: no branch, so
  // the loop vectorises.
  uint32_t hi = (mant + (0x00800000u - 0x003504f4u)) >> 23;
  float ef = float(int32_t(b >> 23) - 127 + int32_t(hi));
  float m = std::bit_cast<float>(mant | ((127u - hi) << 23));  // [sqrt(1/2), sqrt(2))
  float t = (m - 1.f) / (m + 1.f);
  float t2 = t * t;
  float p = 1.f + t2 * (1.f / 3 + t2 * (1.f / 5 + t2 * (1.f / 7 + t2 * (1.f / 9))));
  return ef * 0.6931471805599453f + 2.f * t * p;
}

// sin/cos of b in [-pi/2, pi/2] by Taylor series (truncation < 1e-7).
inline float sin_half(float b) {
  float b2 = b * b;
  return b * (1.f - b2 / 6 * (1.f - b2 / 20 * (1.f - b2 / 42 * (1.f - b2 / 72 * (1.f - b2 / 110)))));
}
inline float cos_half(float b) {
  float b2 = b * b;
  return 1.f - b2 / 2 * (1.f - b2 / 12 * (1.f - b2 / 30 * (1.f - b2 / 56 * (1.f - b2 / 90 *
                                                                                 (1.f - b2 / 132)))));
}

}  // namespace

void fill_normal(uint64_t seed, float mean, float std, float* out, int64_t n) {
  uint64_t state = seed;
  alignas(16) float u1[kBlock], u2[kBlock], r[kBlock], z0[kBlock], z1[kBlock];
  for (int64_t base = 0; base < n; base += 2 * kBlock) {
    // One 64-bit draw gives two 24-bit uniforms: u1 in (0, 1] (finite log), u2 in [0, 1).
    // Always a full block of draws, so the stream does not depend on where n ends.
    for (int k = 0; k < kBlock; ++k) {
      uint64_t z = splitmix64(state);
      u1[k] = float((z >> 40) + 1) * 0x1p-24f;
      u2[k] = float((z >> 16) & 0xffffffu) * 0x1p-24f;
    }
    for (int k = 0; k < kBlock; ++k) r[k] = -2.f * log_unit(u1[k]);
    // std::sqrt would not vectorise (errno handling); the SSE instruction is exact IEEE sqrt.
    for (int k = 0; k < kBlock; k += 4) _mm_storeu_ps(r + k, _mm_sqrt_ps(_mm_loadu_ps(r + k)));
    // Box-Muller: z = r (cos a, sin a) with a = 2 pi u2. With v = u2 - 1/2 in [-1/2, 1/2),
    // a = 2 pi v + pi; using the half angle b = pi v in [-pi/2, pi/2):
    // cos a = -(cos^2 b - sin^2 b) = 2 sin^2 b - 1, sin a = -2 sin b cos b.
    for (int k = 0; k < kBlock; ++k) {
      float b = 3.14159265358979f * (u2[k] - 0.5f);
      float s = sin_half(b), c = cos_half(b);
      z0[k] = r[k] * (2.f * s * s - 1.f);
      z1[k] = r[k] * (-2.f * s * c);
    }
    const int64_t m = std::min<int64_t>(2 * kBlock, n - base);
    float* o = out + base;
    for (int64_t k = 0; k < m / 2; ++k) {
      o[2 * k] = mean + std * z0[k];
      o[2 * k + 1] = mean + std * z1[k];
    }
    if (m & 1) o[m - 1] = mean + std * z0[m / 2];
  }
}

}  // namespace nanovllm
