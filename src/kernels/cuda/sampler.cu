// Device sampler (see sampler.h for the exact definition of what is sampled).
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/philox_rng.h"
#include "kernels/cuda/sampler.h"

namespace nanovllm::cuda {
namespace {

constexpr int NT = 1024;
constexpr double kMassScale = 1099511627776.0;  // 2^40 fixed point for probability mass

struct ArgMax {
  float v;
  int64_t i;
};
__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}

// Block-wide argmax (every thread gets the result). `sv` / `si` hold >= 32 entries.
__device__ ArgMax block_argmax(ArgMax a, float* sv, int64_t* si) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ArgMax b{__shfl_xor_sync(0xffffffffu, a.v, o), __shfl_xor_sync(0xffffffffu, a.i, o)};
    a = better(a, b);
  }
  if (lane == 0) {
    sv[warp] = a.v;
    si[warp] = a.i;
  }
  __syncthreads();
  if (warp == 0) {
    ArgMax b{-INFINITY, INT64_MAX};
    if (lane < int(blockDim.x >> 5)) b = ArgMax{sv[lane], si[lane]};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      ArgMax c{__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o)};
      b = better(b, c);
    }
    if (lane == 0) {
      sv[32] = b.v;
      si[32] = b.i;
    }
  }
  __syncthreads();
  ArgMax r{sv[32], si[32]};
  __syncthreads();
  return r;
}

__device__ __forceinline__ float clean(float z) { return isnan(z) ? -INFINITY : z; }

// Largest key t with  sum over { i : key_i >= max(t, floor) } of weight(i)  >= target,
// found digit by digit (8 bits per pass, most significant first).
template <class WeightFn>
__device__ uint32_t radix_select(const float* x, int64_t V, float inv_t, uint32_t floor,
                                 unsigned long long target, WeightFn weight,
                                 unsigned long long* hist, uint32_t* shared_u32) {
  uint32_t prefix = 0, mask = 0;
  unsigned long long above = 0;  // weight strictly above the current prefix range
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      const float z = clean(__fmul_rn(x[i], inv_t));
      const uint32_t k = float_order_key(z);
      if (k >= floor && (k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 255u], weight(z));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long cum = above;
      int chosen = 0;
      for (int d = 255; d >= 0; --d) {
        if (cum + hist[d] >= target) {
          chosen = d;
          break;
        }
        cum += hist[d];
      }
      shared_u32[0] = prefix | (uint32_t(chosen) << shift);
      shared_u32[1] = uint32_t(cum >> 32);
      shared_u32[2] = uint32_t(cum);
    }
    __syncthreads();
    prefix = shared_u32[0];
    above = (unsigned long long)(shared_u32[1]) << 32 | shared_u32[2];
    mask |= 255u << shift;
    __syncthreads();
  }
  return prefix;
}

__global__ void __launch_bounds__(NT)
    sample_kernel(const float* logits, int64_t V, const SampleRow* rows, int32_t* out) {
  __shared__ float red[33];
  __shared__ float sv[33];
  __shared__ int64_t si[33];
  __shared__ unsigned long long hist[256];
  __shared__ uint32_t su[3];
  const int64_t row = blockIdx.x;
  const float* x = logits + row * V;
  const SampleRow p = rows[row];

  if (!(p.temperature > 0.f)) {  // greedy (also catches NaN temperature)
    ArgMax a{-INFINITY, INT64_MAX};
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) a = better(a, ArgMax{clean(x[i]), i});
    a = block_argmax(a, sv, si);
    if (threadIdx.x == 0) out[row] = int32_t(a.i == INT64_MAX ? 0 : a.i);
    return;
  }
  const float inv_t = 1.f / p.temperature;
  float mx = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x)
    mx = fmaxf(mx, clean(__fmul_rn(x[i], inv_t)));
  const float zmax = block_max(mx, red);

  uint32_t floor = 0;  // kept: order key >= floor
  if (zmax != -INFINITY) {
    if (p.top_k > 0 && p.top_k < V) {
      floor = radix_select(
          x, V, inv_t, 0u, (unsigned long long)p.top_k, [](float) { return 1ull; }, hist, su);
    }
    if (p.top_p < 1.f) {
      float tot = 0.f;
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
        const float z = clean(__fmul_rn(x[i], inv_t));
        if (float_order_key(z) >= floor) tot += __expf(z - zmax);
      }
      const float total = block_sum(tot, red);
      const float scale = float(kMassScale) / total;
      auto mass = [=](float z) { return (unsigned long long)(__expf(z - zmax) * scale); };
      // Exact fixed-point total, then the threshold reaching top_p of it.
      if (threadIdx.x == 0) hist[0] = 0;
      __syncthreads();
      unsigned long long part = 0;
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
        const float z = clean(__fmul_rn(x[i], inv_t));
        if (float_order_key(z) >= floor) part += mass(z);
      }
      atomicAdd(&hist[0], part);
      __syncthreads();
      const unsigned long long fx_total = hist[0];
      __syncthreads();
      unsigned long long target =
          (unsigned long long)(double(fx_total) * double(fmaxf(p.top_p, 0.f)));
      if (target < 1) target = 1;
      floor = radix_select(x, V, inv_t, floor, target, mass, hist, su);
    }
    if (p.min_p > 0.f) {
      const uint32_t k = float_order_key(zmax + logf(fminf(p.min_p, 1.f)));
      if (k > floor) floor = k;
    }
  }

  ArgMax a{-INFINITY, INT64_MAX};
  for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
    const float z = clean(__fmul_rn(x[i], inv_t));
    if (float_order_key(z) < floor) continue;
    a = better(a, ArgMax{z + sampler_gumbel(p.seed, p.step, uint32_t(i)), i});
  }
  a = block_argmax(a, sv, si);
  if (threadIdx.x == 0) out[row] = int32_t(a.i == INT64_MAX ? 0 : a.i);
}

}  // namespace

void launch_sample(const float* logits, int64_t S, int64_t V, const SampleRow* rows, int32_t* out,
                   cudaStream_t s) {
  if (S == 0) return;
  NV_CHECK(V > 0 && V < (int64_t(1) << 31), "bad vocabulary size ", V);
  NV_CHECK(S <= 0x7fffffff, "too many rows to sample: ", S);
  sample_kernel<<<unsigned(S), NT, 0, s>>>(logits, V, rows, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::cuda
