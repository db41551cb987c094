// Token sampling on the device. One thread block per logits row:
//   temperature <= 0  -> greedy argmax (lowest index on ties);
//   otherwise z = logits / temperature, then the kept set is
//     top-k   (0 < k < V): z >= the k-th largest z (ties at the threshold all kept),
//     top-p   (p < 1):     among those, z >= t where t is the largest value whose kept
//                          probability mass of {z >= t}, renormalized, reaches p,
//     min-p   (> 0):       prob >= min_p * max prob, i.e. z >= max z + log(min_p);
//   and the token is argmax over the kept set of z_i + gumbel(seed, step, i) (Gumbel-max
//   with the Philox noise of philox_rng.h; lowest index on ties).
// Thresholds are found exactly by 4-pass radix selection over the order-preserving uint32 key
// of z (top-p accumulates probability mass in 2^-40 fixed point, so it is deterministic).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

namespace nanovllm::cuda {

struct SampleRow {
  float temperature = 1.f;  // <= 0: greedy
  int32_t top_k = -1;       // <= 0 or >= V: off
  float top_p = 1.f;        // >= 1: off
  float min_p = 0.f;        // <= 0: off
  uint64_t seed = 0;        // Philox key
  uint64_t step = 0;        // Philox counter high part (the request's output position)
};

// logits [S, V] F32, rows [S] (device), out [S] I32 (device).
void launch_sample(const float* logits, int64_t S, int64_t V, const SampleRow* rows, int32_t* out,
                   cudaStream_t s);

}  // namespace nanovllm::cuda
