// Mixture-of-experts kernels (Backend::moe_route / moe_experts; launchers in kernels.h).
//
// moe_route: one warp per token row: softmax over E in F32, then top_k rounds of a warp argmax
// (ties: the lower expert id, as on the CPU), the chosen entry masked after each round.
//
// moe_experts, per (token, slot) pair p = t * k + j with expert e = ids[t, j]:
//   gu[p]  = W_gate_up[e] x[t]          [P, 2I] act   (moe_pair_gemv, one warp per output row)
//   h[p]   = silu(gu[p, :I]) * gu[p, I:] [P, I]  act   (launch_silu_and_mul)
//   y[p]   = W_down[e] h[p]              [P, H]  F32   (moe_pair_gemv)
//   out[t] = sum_j weights[t, j] y[t * k + j]           (moe_combine, slots in order j)
// The pairs are not grouped by expert here: each pair reads its expert's rows, so a batch whose
// tokens share experts reads those weights once per pair (decode at batch 1 reads each active
// expert once either way). Fixed launch shapes for a given T: CUDA graphs capture it.
// Verified on an H200 (2026-11-30): the conformance table, and Qwen3-MoE models against the CPU
// backend (gpu-check's new_arch_cuda).
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kernels.h"

namespace nanovllm::cuda {
namespace {

template <class TL>
__global__ void moe_route_kernel(const TL* logits, int64_t T, int E, int k, bool normalize,
                                 int32_t* ids, float* weights) {
  extern __shared__ float sm[];  // [warps_per_block][E]
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t t = int64_t(blockIdx.x) * (blockDim.x >> 5) + warp;
  if (t >= T) return;
  float* p = sm + int64_t(warp) * E;
  float mx = -INFINITY;
  for (int e = lane; e < E; e += 32) {
    p[e] = to_f(logits[t * E + e]);
    mx = fmaxf(mx, p[e]);
  }
  mx = warp_max(mx);
  float sum = 0.f;
  for (int e = lane; e < E; e += 32) sum += p[e] = __expf(p[e] - mx);
  sum = warp_sum(sum);
  const float inv = 1.f / sum;
  for (int e = lane; e < E; e += 32) p[e] *= inv;
  __syncwarp();
  float chosen_sum = 0.f;
  for (int j = 0; j < k; ++j) {
    float best = -1.f;
    int best_id = E;
    for (int e = lane; e < E; e += 32)
      if (p[e] > best || (p[e] == best && e < best_id)) best = p[e], best_id = e;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oi = __shfl_xor_sync(0xffffffffu, best_id, o);
      if (ob > best || (ob == best && oi < best_id)) best = ob, best_id = oi;
    }
    if (lane == 0) {
      ids[t * k + j] = best_id;  // E (an invalid expert, skipped) only for a NaN row
      weights[t * k + j] = best;
      if (best_id < E) p[best_id] = -2.f;  // below every probability: never chosen again
    }
    chosen_sum += best;
    __syncwarp();
  }
  if (normalize)
    for (int j = lane; j < k; j += 32) weights[t * k + j] /= chosen_sum;
}

// y[p, n] = sum_c W[e_p, n, c] * x[row_p, c] for n < N; W [E * N, K]. row_p = p / k when
// x_per_token (x holds tokens, the first GEMV) else p (x holds pairs). A pair whose expert id
// is outside [0, E) writes zeros. One warp per output row n, 8 rows per block; blockIdx.y walks
// the P pairs in strides of gridDim.y (at most 65,535: a prefill chunk of 16,384 tokens with
// top-4 routing has 65,536 pairs).
template <class TX, class TW, class TY>
__global__ void moe_pair_gemv_kernel(const TX* x, const TW* w, const int32_t* ids, int64_t P, int k,
                                     bool x_per_token, int E, int64_t N, int64_t K, TY* y) {
  const int64_t n = int64_t(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (n >= N) return;
  for (int64_t p = blockIdx.y; p < P; p += gridDim.y) {
    const int e = ids[p];
    float acc = 0.f;
    if (e >= 0 && e < E) {
      const TX* xr = x + (x_per_token ? p / k : p) * K;
      const TW* wr = w + (int64_t(e) * N + n) * K;
      for (int64_t c = lane; c < K; c += 32) acc += to_f(wr[c]) * to_f(xr[c]);
      acc = warp_sum(acc);
    }
    if (lane == 0) y[p * N + n] = from_f<TY>(acc);
  }
}

template <class TA>
__global__ void moe_combine_kernel(const float* y, const float* weights, int64_t T, int k,
                                   int64_t H, TA* out) {
  const int64_t n = T * H;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = i / H, c = i % H;
    float acc = 0.f;
    for (int j = 0; j < k; ++j) acc += weights[t * k + j] * y[(t * k + j) * H + c];
    out[i] = from_f<TA>(acc);
  }
}

unsigned grid_1d(int64_t n, int threads) {
  return unsigned(std::min<int64_t>((n + threads - 1) / threads, 65535 * 4));
}

}  // namespace

void launch_moe_route(const void* logits, DType logits_dt, int64_t T, int E, int k, bool normalize,
                      int32_t* ids, float* weights, cudaStream_t s) {
  if (T == 0) return;
  constexpr int kWarps = 4;
  const size_t shmem = size_t(kWarps) * size_t(E) * sizeof(float);
  NV_CHECK(shmem <= 48 * 1024, "moe_route: ", E, " experts exceed the kernel's shared memory");
  NV_CUDA_DISPATCH_ACT(logits_dt, TL, {
    moe_route_kernel<TL><<<ceil_div(T, kWarps), 32 * kWarps, shmem, s>>>(
        static_cast<const TL*>(logits), T, E, k, normalize, ids, weights);
  });
  CUDA_CHECK_LAUNCH();
}

void launch_moe_experts(const MoeLaunch& m, cudaStream_t s) {
  if (m.T == 0) return;
  const int64_t P = m.T * m.k;
  constexpr int kRows = 8;
  const unsigned pair_blocks = unsigned(std::min<int64_t>(P, 65535));  // gridDim.y's limit
  NV_CUDA_DISPATCH_ACT(m.act, TA, {
    NV_CUDA_DISPATCH_FLOAT(m.w_dt, TW, {
      // gate_up: x (tokens) -> gu [P, 2I] act.
      moe_pair_gemv_kernel<TA, TW, TA><<<dim3(ceil_div(2 * m.I, kRows), pair_blocks), 32 * kRows, 0, s>>>(
          static_cast<const TA*>(m.x), static_cast<const TW*>(m.gate_up), m.ids, P, m.k, true, m.E,
          2 * m.I, m.H, static_cast<TA*>(m.gu));
      CUDA_CHECK_LAUNCH();
      launch_silu_and_mul(m.gu, m.h, m.act, P, m.I, s);
      // down: h (pairs) -> y [P, H] F32.
      moe_pair_gemv_kernel<TA, TW, float><<<dim3(ceil_div(m.H, kRows), pair_blocks), 32 * kRows, 0, s>>>(
          static_cast<const TA*>(m.h), static_cast<const TW*>(m.down), m.ids, P, m.k, false, m.E, m.H,
          m.I, m.y);
      CUDA_CHECK_LAUNCH();
    });
    moe_combine_kernel<TA><<<grid_1d(m.T * m.H, 256), 256, 0, s>>>(m.y, m.weights, m.T, m.k, m.H,
                                                                   static_cast<TA*>(m.out));
  });
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::cuda
