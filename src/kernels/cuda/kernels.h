// Launchers of the CUDA kernels (host-callable, no CUDA types beyond cudaStream_t), used by
// CudaBackend. All pointers are device pointers; tensors are row-major and contiguous.
// Activation dtype (act) = BF16 or F32; weight dtype (w) = BF16, F16 or F32.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "util/dtype.h"

namespace nanovllm::cuda {

// out[t, :] = table[ids[t] - vocab_start, :] * scale or 0 outside [vocab_start, + rows).
void launch_embedding(const int32_t* ids, int64_t T, const void* table, DType table_dt,
                      int64_t rows, int64_t H, int64_t vocab_start, float scale, void* out,
                      DType out_dt, cudaStream_t s);
// out[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * w.  x, out [T, H] (same act dtype).
void launch_rms_norm(const void* x, const void* w, DType w_dt, void* out, DType act, int64_t T,
                     int64_t H, float eps, cudaStream_t s);
// residual += x (rounded to act), x = rms_norm(residual) * w.
void launch_add_rms_norm(void* x, void* residual, const void* w, DType w_dt, DType act, int64_t T,
                         int64_t H, float eps, cudaStream_t s);
// out[t, i] = silu(gu[t, i]) * gu[t, I + i].
void launch_silu_and_mul(const void* gate_up, void* out, DType act, int64_t T, int64_t I,
                         cudaStream_t s);
// out[t, i] = gelu_tanh(gu[t, i]) * gu[t, I + i] (gelu_pytorch_tanh).
void launch_gelu_tanh_and_mul(const void* gate_up, void* out, DType act, int64_t T, int64_t I,
                              cudaStream_t s);
// In place on qkv [T, (Hq + 2 Hkv) * D]: optional per-head RMSNorm (q_norm / k_norm [D], may
// be null) then NeoX RoPE with cos_sin [max_pos, D] F32 at positions [T].
void launch_qk_norm_rope(void* qkv, DType act, const int32_t* positions, const void* q_norm,
                         const void* k_norm, DType norm_dt, float eps, const float* cos_sin,
                         int64_t max_pos, int64_t T, int Hq, int Hkv, int D, cudaStream_t s);
// k_cache[slot, h, :] = k[t, h, :], same for v; slot = slots[t], skipped when < 0 or >= num_slots.
void launch_store_kv(const void* qkv, DType act, const int32_t* slots, int64_t T, void* k_cache,
                     void* v_cache, int Hq, int Hkv, int D, int64_t num_slots, cudaStream_t s);
// out[i, :] = x[idx[i], :] (raw bytes, rows of row_bytes); rows outside [0, num_rows) -> zeros.
void launch_gather_rows(const void* x, const int32_t* idx, int64_t S, int64_t row_bytes,
                        int64_t num_rows, void* out, cudaStream_t s);
// a += b, n elements of act dtype.
void launch_add_inplace(void* a, const void* b, DType act, int64_t n, cudaStream_t s);
// dst = src converted (float dtypes).
void launch_convert(const void* src, DType src_dt, void* dst, DType dst_dt, int64_t n,
                    cudaStream_t s);
// out[t, n] += bias[n]; out [T, N].
void launch_add_bias(void* out, DType out_dt, const void* bias, DType bias_dt, int64_t T, int64_t N,
                     cudaStream_t s);

// Skinny GEMM (gemm_skinny.cu, BackendOptions::cuda_gemm = skinny): out[T, N] = x[T, K] w[N, K]^T
// (+ bias[N]) for decode-sized T, one warp per weight row, f32 sums in an order that does not
// depend on T. skinny_gemm_supported: bf16 x / w (16-byte aligned, K % 8 == 0), out bf16 / f32,
// bias none / bf16 / f32, 1 <= T <= kSkinnyMaxT.
constexpr int64_t kSkinnyMaxT = 8;
bool skinny_gemm_supported(const void* x, const void* w, DType in, const void* bias, DType bias_dt,
                           const void* out, DType out_dt, int64_t T, int64_t N, int64_t K);
void launch_skinny_gemm(const void* x, const void* w, const void* bias, DType bias_dt, void* out,
                        DType out_dt, int64_t T, int64_t N, int64_t K, cudaStream_t s);

// Mixture-of-experts (moe.cu). Router: per row of logits [T, E] (act), the top k of the F32
// softmax (ties: lower id) -> ids [T, k], weights [T, k] (renormalized when `normalize`).
void launch_moe_route(const void* logits, DType logits_dt, int64_t T, int E, int k, bool normalize,
                      int32_t* ids, float* weights, cudaStream_t s);
// Experts: out[t] = sum_j weights[t, j] * down_e(silu(gate_e x_t) * up_e x_t), e = ids[t, j]
// (outside [0, E): nothing). Dense expert weights in one allocation each.
struct MoeLaunch {
  const void* x = nullptr;        // [T, H] act
  const void* gate_up = nullptr;  // [E * 2I, H] w_dt
  const void* down = nullptr;     // [E * H, I] w_dt
  const int32_t* ids = nullptr;   // [T, k]
  const float* weights = nullptr; // [T, k]
  void* gu = nullptr;             // scratch [T * k, 2I] act
  void* h = nullptr;              // scratch [T * k, I] act
  float* y = nullptr;             // scratch [T * k, H] F32
  void* out = nullptr;            // [T, H] act
  int64_t T = 0, H = 0, I = 0;
  int k = 0, E = 0;
  DType act = DType::BF16, w_dt = DType::BF16;
};
void launch_moe_experts(const MoeLaunch& m, cudaStream_t s);

// Paged attention (see attention_prefill.cu / attention_decode.cu for the algorithms). Any
// head_dim in [1, 256] and any Hq / Hkv ratio; 64 and 128 have vectorized instantiations
// (used when the caches / qkv are 16-byte aligned), other sizes a generic one.
// Values past the contract (kernels/README.md) are handled as on the CPU: a sequence's query
// rows are [cu_seqlens_q[b], cu_seqlens_q[b+1]) clipped to [0, num_tokens); keys whose block is
// missing (entry < 0, slot >= num_slots, block index >= table_stride) are masked; a query that
// sees no key gets zeros.
struct AttentionArgs {
  const void* qkv = nullptr;      // [T, (Hq + 2 Hkv) * D], q is the first Hq * D columns
  const void* k_cache = nullptr;  // [num_slots, Hkv, D]
  const void* v_cache = nullptr;
  void* out = nullptr;                    // [T, Hq * D]
  const int32_t* cu_seqlens_q = nullptr;  // [B + 1]
  const int32_t* context_lens = nullptr;  // [B]
  const int32_t* block_tables = nullptr;  // [B, table_stride]
  int num_seqs = 0, num_tokens = 0, max_seqlen_q = 0, max_seqlen_k = 0, block_size = 0,
      table_stride = 0;
  int Hq = 0, Hkv = 0, D = 0;
  int64_t num_slots = 0;  // num_blocks * block_size (bounds check of block table entries)
  float scale = 1.f;
  int window = 0;  // sliding window (keys pos - window + 1 .. pos); 0 = none
  DType act = DType::BF16;
};
void launch_attention_prefill(const AttentionArgs& a, cudaStream_t s);
// Tensor-core (WMMA bf16) variant of the same: bf16 activations, head_dim 64 / 128, 16-byte
// aligned tensors; attention_prefill_tc_supported() says when, the caller falls back otherwise.
bool attention_prefill_tc_supported(const AttentionArgs& a);
void launch_attention_prefill_tc(const AttentionArgs& a, cudaStream_t s);
// Split-K decode: one query per sequence (its last, cu_seqlens_q[b + 1] - 1, at key position
// context_lens[b] - 1). `partials` is scratch of decode_partials_floats(a, num_sms) floats (may
// be null when that is 0).
int64_t decode_partials_floats(const AttentionArgs& a, int num_sms);
void launch_attention_decode(const AttentionArgs& a, float* partials, int num_sms, cudaStream_t s);
// The same op with the v2 kernel (attention_decode_v2.cu: lanes split each key row, 16-byte K/V
// loads, register double buffering, splits from the occupancy API). It runs where
// attention_decode_v2_supported(a) (bf16 / f32, head_dim 64 / 128, 16-byte aligned caches) and
// falls back to v1 otherwise; decode_v2_partials_floats sizes the partials of whichever runs.
bool attention_decode_v2_supported(const AttentionArgs& a);
int64_t decode_v2_partials_floats(const AttentionArgs& a, int num_sms);
void launch_attention_decode_v2(const AttentionArgs& a, float* partials, int num_sms,
                                cudaStream_t s);

}  // namespace nanovllm::cuda
