// Skinny GEMM for decode: out[T, N] = x[T, K] w[N, K]^T (+ bias[N]) for T <= kSkinnyMaxT rows,
// bf16 x and w, f32 accumulation, bf16 or f32 out (BackendOptions::cuda_gemm = skinny).
//
// Why: at decode batch sizes a linear layer only streams its weight once, and the first GPU run
// measured cuBLASLt at 15-16 us per Qwen3-0.6B decode-shaped GEMM (0.4-0.8 TB/s of weights on an
// H200 whose read pass is 4.5 TB/s): ~113 of them make up about half of a 3.5 ms batch-1 step.
// Here one warp owns one weight row: each lane reads 16 bytes (8 bf16) per load, four loads in
// flight, the T activation rows come through L1 (every warp of the SM reads the same x), and a
// shuffle reduction gives the row's T sums. Every output element is summed in the same order
// whatever T is (lane l takes chunks l, l + 32, ...; the reduction tree is fixed), so a row's
// result does not depend on the batch it sits in (unlike cuBLAS, whose algorithm changes with T).
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kernels.h"

namespace nanovllm::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kUnroll = 4;  // 16-byte weight loads in flight per lane

// 8 bf16 packed in a uint4 -> 8 floats (bf16 is the high half of an f32).
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(u[i] << 16);
    f[2 * i + 1] = __uint_as_float(u[i] & 0xFFFF0000u);
  }
}

// grid: ceil(N / kWarpsPerBlock) blocks of kWarpsPerBlock warps; warp -> row n of w.
// x [T, K], w [N, K] (K % 8 == 0, both 16-byte aligned), bias [N] (bf16 / f32 / none),
// out [T, N] (OutT).
template <int T, typename OutT, typename BiasT>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    skinny_gemm_kernel(const bf16* __restrict__ x, const bf16* __restrict__ w,
                       const BiasT* __restrict__ bias, OutT* __restrict__ out, int N, int K) {
  const int lane = threadIdx.x & 31;
  const int n = blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5);
  if (n >= N) return;  // a whole warp leaves together: no shuffle below misses a lane
  const int chunks = K / 8;
  const uint4* wr = reinterpret_cast<const uint4*>(w + size_t(n) * K);
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  float acc[T];
#pragma unroll
  for (int t = 0; t < T; ++t) acc[t] = 0.f;
  for (int base = lane; base < chunks; base += 32 * kUnroll) {
    uint4 wv[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {  // issue all loads first (predicated, no branch)
      const int c = base + 32 * u;
      wv[u] = c < chunks ? __ldg(wr + c) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = base + 32 * u;
      if (c >= chunks) break;
      float wf[8];
      unpack8(wv[u], wf);
#pragma unroll
      for (int t = 0; t < T; ++t) {
        float xf[8];
        unpack8(__ldg(xr + size_t(t) * chunks + c), xf);
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[t] = fmaf(wf[j], xf[j], acc[t]);
      }
    }
  }
#pragma unroll
  for (int t = 0; t < T; ++t)
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) acc[t] += __shfl_xor_sync(0xffffffffu, acc[t], off);
  if (lane == 0) {
    const float b = bias ? to_f(bias[n]) : 0.f;
#pragma unroll
    for (int t = 0; t < T; ++t) out[size_t(t) * N + n] = from_f<OutT>(acc[t] + b);
  }
}

template <int T, typename OutT, typename BiasT>
void launch_t(const void* x, const void* w, const void* bias, void* out, int64_t N, int64_t K,
              cudaStream_t s) {
  const unsigned blocks = unsigned((N + kWarpsPerBlock - 1) / kWarpsPerBlock);
  skinny_gemm_kernel<T, OutT, BiasT><<<blocks, kWarpsPerBlock * 32, 0, s>>>(
      static_cast<const bf16*>(x), static_cast<const bf16*>(w), static_cast<const BiasT*>(bias),
      static_cast<OutT*>(out), int(N), int(K));
}

template <typename OutT, typename BiasT>
void launch_out(const void* x, const void* w, const void* bias, void* out, int64_t T, int64_t N,
                int64_t K, cudaStream_t s) {
  switch (T) {
    case 1: return launch_t<1, OutT, BiasT>(x, w, bias, out, N, K, s);
    case 2: return launch_t<2, OutT, BiasT>(x, w, bias, out, N, K, s);
    case 3: return launch_t<3, OutT, BiasT>(x, w, bias, out, N, K, s);
    case 4: return launch_t<4, OutT, BiasT>(x, w, bias, out, N, K, s);
    case 5: return launch_t<5, OutT, BiasT>(x, w, bias, out, N, K, s);
    case 6: return launch_t<6, OutT, BiasT>(x, w, bias, out, N, K, s);
    case 7: return launch_t<7, OutT, BiasT>(x, w, bias, out, N, K, s);
    default: return launch_t<8, OutT, BiasT>(x, w, bias, out, N, K, s);
  }
}

template <typename OutT>
void launch_bias(const void* x, const void* w, const void* bias, DType bias_dt, void* out,
                 int64_t T, int64_t N, int64_t K, cudaStream_t s) {
  if (bias && bias_dt == DType::F32) return launch_out<OutT, float>(x, w, bias, out, T, N, K, s);
  return launch_out<OutT, bf16>(x, w, bias, out, T, N, K, s);  // bf16 bias, or none
}

}  // namespace

bool skinny_gemm_supported(const void* x, const void* w, DType in, const void* bias, DType bias_dt,
                           const void* out, DType out_dt, int64_t T, int64_t N, int64_t K) {
  (void)out;
  const auto aligned16 = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return in == DType::BF16 && (out_dt == DType::BF16 || out_dt == DType::F32) && T >= 1 &&
         T <= kSkinnyMaxT && N >= 1 && N <= (int64_t(1) << 30) && K >= 8 && K % 8 == 0 &&
         K <= (int64_t(1) << 30) && aligned16(x) && aligned16(w) &&
         (!bias || bias_dt == DType::BF16 || bias_dt == DType::F32);
}

void launch_skinny_gemm(const void* x, const void* w, const void* bias, DType bias_dt, void* out,
                        DType out_dt, int64_t T, int64_t N, int64_t K, cudaStream_t s) {
  if (out_dt == DType::F32)
    launch_bias<float>(x, w, bias, bias_dt, out, T, N, K, s);
  else
    launch_bias<bf16>(x, w, bias, bias_dt, out, T, N, K, s);
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::cuda
