// Qwen3's per-head q/k RMSNorm fused with rotate-half (NeoX) RoPE, in place on the packed
// qkv rows. One warp per (token, head): the lane owning pair (j, j + D/2) normalizes and
// rotates both, so no lane reads another's output.
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kernels.h"

namespace nanovllm::cuda {
namespace {

constexpr int kWarps = 8;

// qkv [T, (Hq + 2 Hkv) * D]; heads 0..Hq-1 are q, Hq..Hq+Hkv-1 are k (contiguous).
// cos_sin [max_pos, D]: columns [0, D/2) cos, [D/2, D) sin.
template <class T, class W>
__global__ void qk_norm_rope_kernel(T* qkv, const int32_t* positions, const W* q_norm,
                                    const W* k_norm, float eps, const float* cos_sin,
                                    int64_t max_pos, int Hq, int Hkv, int D) {
  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int heads = Hq + Hkv, half = D / 2;
  const int64_t pos = positions[t];
  // The contract's defensive rule (kernels/README.md), as on the CPU: a position outside the
  // table leaves the token's q/k normed but not rotated (validate_batch rejects such batches).
  const bool rope_ok = pos >= 0 && pos < max_pos;
  const float* cs = cos_sin + (rope_ok ? pos : 0) * D;
  for (int h = blockIdx.y * kWarps + warp; h < heads; h += gridDim.y * kWarps) {
    T* x = qkv + t * int64_t(Hq + 2 * Hkv) * D + int64_t(h) * D;
    const W* w = h < Hq ? q_norm : k_norm;
    float r = 1.f;
    if (w) {
      float ss = 0.f;
      for (int j = lane; j < D; j += 32) {
        const float v = to_f(x[j]);
        ss += v * v;
      }
      r = rsqrtf(warp_sum(ss) / float(D) + eps);
    }
    for (int j = lane; j < half; j += 32) {
      float a = to_f(x[j]), b = to_f(x[j + half]);
      if (w) {
        a = a * r * to_f(w[j]);
        b = b * r * to_f(w[j + half]);
      }
      if (rope_ok) {
        const float c = cs[j], s = cs[half + j];
        const float na = a * c - b * s, nb = b * c + a * s;
        a = na;
        b = nb;
      }
      x[j] = from_f<T>(a);
      x[j + half] = from_f<T>(b);
    }
  }
}

}  // namespace

void launch_qk_norm_rope(void* qkv, DType act, const int32_t* positions, const void* q_norm,
                         const void* k_norm, DType norm_dt, float eps, const float* cos_sin,
                         int64_t max_pos, int64_t T, int Hq, int Hkv, int D, cudaStream_t s) {
  if (T == 0) return;  // shapes and an even D: checked by the op contract
  const int heads = Hq + Hkv;
  const dim3 grid(unsigned(T), unsigned((heads + kWarps - 1) / kWarps));
  NV_CUDA_DISPATCH_ACT(act, TA, NV_CUDA_DISPATCH_FLOAT(norm_dt, TW, {
                         qk_norm_rope_kernel<TA, TW><<<grid, kWarps * 32, 0, s>>>(
                             static_cast<TA*>(qkv), positions, static_cast<const TW*>(q_norm),
                             static_cast<const TW*>(k_norm), eps, cos_sin, max_pos, Hq, Hkv, D);
                       }));
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::cuda
