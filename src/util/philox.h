// Philox4x32-10 counter-based RNG (Salmon et al., "Parallel random numbers: as easy as 1, 2,
// 3", SC'11). A pure function of (counter, key): random numbers for element i of step t of a
// request depend only on (seed, t, i), never on what else is in the batch or on threads.
#pragma once
#include <array>
#include <cstdint>

namespace nanovllm {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

inline PhiloxCounter philox4x32_10(PhiloxCounter c, PhiloxKey k) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {  // the key schedule advances between rounds
      k[0] += kWeyl0;
      k[1] += kWeyl1;
    }
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
  }
  return c;
}

// The key for a 64-bit seed.
inline PhiloxKey philox_key(uint64_t seed) {
  return {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)};
}

// The sampler's noise for vocabulary entry i of a request step (the same definition as
// src/kernels/cuda/philox_rng.h, so CPU and CUDA sampling draw identical noise):
//   key = {seed lo, seed hi}, counter = {step lo, step hi, i, 0}, first output word.
inline uint32_t sampler_noise_word(uint64_t seed, uint64_t step, uint32_t i) {
  return philox4x32_10({static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32), i, 0u},
                       philox_key(seed))[0];
}

// Uniform in the open interval (0, 1): an odd multiple of 2^-24, exact in float, so both
// -log(u) and 1 - u are never 0.
inline float noise_uniform(uint32_t x) {
  return static_cast<float>(((x >> 9) << 1) | 1u) * (1.0f / 16777216.0f);
}

}  // namespace nanovllm
