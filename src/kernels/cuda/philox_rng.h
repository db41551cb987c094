// Philox4x32-10 counter-based RNG and the sampler's noise definition, shared by host and
// device code (compiles with g++ and nvcc) so the CPU sampler and the CUDA sampler can draw
// identical noise and unit tests check it on the CPU.
//
// Noise for vocabulary entry i of a row with (seed, step):
//   key     = { uint32(seed), uint32(seed >> 32) }
//   counter = { uint32(step), uint32(step >> 32), uint32(i), 0 }
//   x       = philox4x32_10(counter, key)[0]                  (first output word)
//   u       = ((x >> 9) * 2 + 1) * 2^-24                       (exact float, in (0, 1))
//   gumbel  = -log(-log(u))
// Sampling picks argmax_i (logit_i / temperature + gumbel_i) over the kept entries.
#pragma once
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define NV_HD __host__ __device__ __forceinline__
#else
#define NV_HD inline
#endif

namespace nanovllm {

struct Philox4 {
  uint32_t v[4];
};

NV_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  const uint64_t p = uint64_t(a) * uint64_t(b);
  hi = uint32_t(p >> 32);
  lo = uint32_t(p);
}

// Ten rounds of Philox4x32 (Salmon et al., SC'11) with the standard multipliers and Weyl
// key increments.
NV_HD Philox4 philox4x32_10(Philox4 c, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(0xD2511F53u, c.v[0], hi0, lo0);
    philox_mulhilo(0xCD9E8D57u, c.v[2], hi1, lo1);
    Philox4 n;
    n.v[0] = hi1 ^ c.v[1] ^ k0;
    n.v[1] = lo1;
    n.v[2] = hi0 ^ c.v[3] ^ k1;
    n.v[3] = lo0;
    c = n;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// Uniform in the open interval (0, 1): an odd multiple of 2^-24, exact in float.
NV_HD float philox_uniform(uint32_t x) {
  return float(((x >> 9) << 1) | 1u) * (1.0f / 16777216.0f);
}

NV_HD uint32_t sampler_noise_bits(uint64_t seed, uint64_t step, uint32_t i) {
  Philox4 c;
  c.v[0] = uint32_t(step);
  c.v[1] = uint32_t(step >> 32);
  c.v[2] = i;
  c.v[3] = 0;
  return philox4x32_10(c, uint32_t(seed), uint32_t(seed >> 32)).v[0];
}

NV_HD float sampler_gumbel(uint64_t seed, uint64_t step, uint32_t i) {
  const float u = philox_uniform(sampler_noise_bits(seed, step, i));
  return -logf(-logf(u));
}

// Maps a float to a uint32 whose unsigned order equals the float order (-0 < +0; NaN
// unspecified). Used for exact radix selection of top-k / top-p thresholds.
NV_HD uint32_t float_order_key(float f) {
  uint32_t u;
#if defined(__CUDA_ARCH__)
  u = __float_as_uint(f);
#else
  __builtin_memcpy(&u, &f, 4);
#endif
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
NV_HD float float_from_order_key(uint32_t k) {
  uint32_t u = (k & 0x80000000u) ? (k & 0x7fffffffu) : ~k;
  float f;
#if defined(__CUDA_ARCH__)
  f = __uint_as_float(u);
#else
  __builtin_memcpy(&f, &u, 4);
#endif
  return f;
}

}  // namespace nanovllm
