// Device helpers shared by the .cu files: scalar conversions, dtype dispatch, 16-byte vector
// access and block/warp reductions. Only included from .cu files.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "util/dtype.h"

namespace nanovllm::cuda {

using bf16 = __nv_bfloat16;

template <class T>
__device__ __forceinline__ float to_f(T v);
template <>
__device__ __forceinline__ float to_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float to_f<bf16>(bf16 v) {
  return __bfloat162float(v);
}
template <>
__device__ __forceinline__ float to_f<__half>(__half v) {
  return __half2float(v);
}

template <class T>
__device__ __forceinline__ T from_f(float v);
template <>
__device__ __forceinline__ float from_f<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 from_f<bf16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_f<__half>(float v) {
  return __float2half_rn(v);
}

// N elements of T moved as one aligned access (16 bytes when N * sizeof(T) == 16).
template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};

template <class T, int N>
__device__ __forceinline__ void load_f(const T* p, float (&out)[N]) {
  const Vec<T, N> x = *reinterpret_cast<const Vec<T, N>*>(p);
#pragma unroll
  for (int i = 0; i < N; ++i) out[i] = to_f(x.v[i]);
}
template <class T, int N>
__device__ __forceinline__ void store_f(T* p, const float (&in)[N]) {
  Vec<T, N> x;
#pragma unroll
  for (int i = 0; i < N; ++i) x.v[i] = from_f<T>(in[i]);
  *reinterpret_cast<Vec<T, N>*>(p) = x;
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
// `scratch` holds >= 33 floats; the function syncs so scratch may be reused right after.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < nw ? scratch[lane] : 0.f;
    t = warp_sum(t);
    if (lane == 0) scratch[32] = t;
  }
  __syncthreads();
  const float r = scratch[32];
  __syncthreads();
  return r;
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float t = lane < nw ? scratch[lane] : -INFINITY;
    t = warp_max(t);
    if (lane == 0) scratch[32] = t;
  }
  __syncthreads();
  const float r = scratch[32];
  __syncthreads();
  return r;
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }
inline int ceil_div(int64_t a, int64_t b) { return int((a + b - 1) / b); }

}  // namespace nanovllm::cuda

// Runs the statements with T bound to the element type of a float DType.
#define NV_CUDA_DISPATCH_FLOAT(dt, T, ...)                                        \
  switch (dt) {                                                                   \
    case ::nanovllm::DType::F32: {                                                \
      using T = float;                                                            \
      __VA_ARGS__;                                                                \
    } break;                                                                      \
    case ::nanovllm::DType::BF16: {                                               \
      using T = ::nanovllm::cuda::bf16;                                           \
      __VA_ARGS__;                                                                \
    } break;                                                                      \
    case ::nanovllm::DType::F16: {                                                \
      using T = __half;                                                           \
      __VA_ARGS__;                                                                \
    } break;                                                                      \
    default:                                                                      \
      NV_THROW("unsupported dtype ", ::nanovllm::dtype_name(dt), " for this op"); \
  }
// Activations: F32 or BF16 only (keeps the instantiation count down).
#define NV_CUDA_DISPATCH_ACT(dt, T, ...)                                     \
  switch (dt) {                                                              \
    case ::nanovllm::DType::F32: {                                           \
      using T = float;                                                       \
      __VA_ARGS__;                                                           \
    } break;                                                                 \
    case ::nanovllm::DType::BF16: {                                          \
      using T = ::nanovllm::cuda::bf16;                                      \
      __VA_ARGS__;                                                           \
    } break;                                                                 \
    default:                                                                 \
      NV_THROW("unsupported activation dtype ", ::nanovllm::dtype_name(dt)); \
  }
