// Philox4x32-10 counter-based RNG (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11) and the sampler's noise definition. The ONE copy, shared by host code (g++, the CPU
// sampler, the bench workload) and device code (nvcc, the CUDA sampler): the noise of a token is
// a pure function of (seed, step, token), never of the batch or of threads, so both backends
// draw identical noise and seeded sampling is batch-invariant by construction.
//
// Noise for vocabulary entry i of a row with (seed, step):
//   key     = { uint32(seed), uint32(seed >> 32) }
//   counter = { uint32(step), uint32(step >> 32), uint32(i), 0 }
//   x       = philox4x32_10(counter, key)[0]                  (first output word)
//   u       = ((x >> 9) * 2 + 1) * 2^-24                       (exact float, in (0, 1))
//   E       = -log(u) ~ Exp(1),   gumbel = -log(E)
// C++17 (nvcc compiles the .cu files as C++17).
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

NV_HD bool operator==(const Philox4& a, const Philox4& b) {
  return a.v[0] == b.v[0] && a.v[1] == b.v[1] && a.v[2] == b.v[2] && a.v[3] == b.v[3];
}

// Ten rounds of Philox4x32 with the standard multipliers (M0 = 0xD2511F53 on word 0,
// M1 = 0xCD9E8D57 on word 2) and Weyl key increments (0x9E3779B9, 0xBB67AE85).
NV_HD Philox4 philox4x32_10(Philox4 c, uint32_t k0, uint32_t k1) {
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t(0xD2511F53u) * c.v[0];
    const uint64_t p1 = uint64_t(0xCD9E8D57u) * c.v[2];
    c = Philox4{{uint32_t(p1 >> 32) ^ c.v[1] ^ k0, uint32_t(p1), uint32_t(p0 >> 32) ^ c.v[3] ^ k1,
                 uint32_t(p0)}};
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// The sampler's noise word for vocabulary entry i of a request step (layout above).
NV_HD uint32_t sampler_noise_word(uint64_t seed, uint64_t step, uint32_t i) {
  const Philox4 c{{uint32_t(step), uint32_t(step >> 32), i, 0u}};
  return philox4x32_10(c, uint32_t(seed), uint32_t(seed >> 32)).v[0];
}

// Uniform in the open interval (0, 1): an odd multiple of 2^-24, exact in float, so both
// -log(u) and 1 - u are never 0.
NV_HD float noise_uniform(uint32_t x) {
  return float(((x >> 9) << 1) | 1u) * (1.0f / 16777216.0f);
}

// Exp(1) noise E_i = -log(u_i): the CPU sampler races p_i / E_i.
NV_HD float sampler_exp_noise(uint64_t seed, uint64_t step, uint32_t i) {
  return -logf(noise_uniform(sampler_noise_word(seed, step, i)));
}

// Gumbel noise -log(E_i): the CUDA sampler takes argmax z_i + gumbel_i, which is the same
// token as argmax exp(z_i - max) / E_i (up to float rounding of near-exact ties).
NV_HD float sampler_gumbel(uint64_t seed, uint64_t step, uint32_t i) {
  return -logf(sampler_exp_noise(seed, step, i));
}

// Bounds of that noise: u in [2^-24, 1 - 2^-24] gives E in [5.96e-8, 16.64] and gumbel in
// [-2.82, 16.64]. These leave room for logf's error on either backend (tests/unit/sampler check
// every extreme word).
constexpr float kGumbelMax = 17.f, kGumbelMin = -3.f;

// Exact pruning of the Gumbel race: an entry whose scaled logit z is below
// gumbel_prune_below(zc), where zc is the largest scaled logit among the entries it races
// against, cannot win: z + g <= z + kGumbelMax < zc + kGumbelMin <= zc + g_c, and the margin
// (over 2 ulps at |zc| + 20) keeps the float sums strictly ordered, so no tie lets it through
// either. -inf (prune nothing) when zc is not finite. Skipping those entries skips their
// Philox draws, which dominate the race's cost.
NV_HD float gumbel_prune_below(float zc) {
  constexpr float span = kGumbelMax - kGumbelMin;
  if (!(zc > -INFINITY && zc < INFINITY)) return -INFINITY;  // +-inf or NaN
  return zc - span - (1e-5f * (fabsf(zc) + span) + 1e-3f);
}

}  // namespace nanovllm
