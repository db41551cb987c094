// CPU linear layer: out[M, N] = x[M, K] @ w[N, K]^T (+ bias), x and out F32, w F32/BF16/F16.
// - BF16 weights, M >= onednn_min_rows(): oneDNN bf16 matmul (activations rounded to bf16),
//   only on CPUs that multiply bf16 faster than f32 (AMX, or vdpbf16ps at the FMA rate:
//   bf16_dot_probe.h); elsewhere BF16 weights take the streaming kernel at every M.
// - M == 1, BF16, K % 32 == 0, AVX-512: the decode GEMV (one sequential stream per thread).
// - Other small M: a streaming kernel that reads each weight once, converting in registers, in
//   L2-sized tiles of 32 rows reused by every 8-row chunk of x (AVX-512 / AVX2 / scalar).
// - F32 weights above gemv_max_rows(): OpenBLAS sgemm (F16: converted panels, then sgemm).
#pragma once
#include "nanovllm/backend_options.h"
#include "util/tensor.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

// path: LinearPath::kAuto picks by shape and dtype (above); the others force one kernel (tests,
// benchmarks): kStreaming, kBlas, kOnednn (BF16 weights; falls back to streaming when oneDNN is
// unavailable). The CPU backend passes BackendOptions::linear_path.
void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out, ThreadPool& pool,
            LinearPath path = LinearPath::kAuto);

// out[m, n] += bias[n] for an [M, N] F32 output (no-op when bias is null).
void add_bias_rows(const Tensor* bias, float* out, int64_t M, int64_t N);

// Largest M handled by the streaming kernel for F32 weights (above it: BLAS).
int gemv_max_rows();
// Smallest M that BF16 weights send to oneDNN under kAuto (when it supports the shape); INT_MAX
// where this CPU's bf16 multiplies are no faster than f32 (then kAuto never uses oneDNN).
int onednn_min_rows();

}  // namespace nanovllm::cpu
