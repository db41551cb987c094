// CPU linear layer: out[M, N] = x[M, K] @ w[N, K]^T (+ bias), x and out F32, w F32/BF16/F16.
// M <= 64 (decode batches): a hand-written streaming kernel that reads each weight once from
// DRAM, converting bf16 in registers, in L2-sized tiles of 32 rows reused by every 8-row chunk
// of x (AVX-512 / AVX2 / scalar picked at run time). Larger M (prefill): OpenBLAS sgemm, with
// bf16/f16 weights converted to f32 in row panels first.
#pragma once
#include "util/tensor.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

void linear(const Tensor& x, const Tensor& w, const Tensor* bias, Tensor& out, ThreadPool& pool);

// Largest M handled by the streaming kernel (above it: BLAS). Exposed for tests/benchmarks.
int gemv_max_rows();
// Forces a path for tests/benchmarks: 0 = auto, 1 = streaming kernel, 2 = BLAS,
// 3 = oneDNN bf16 (BF16 weights; falls back to streaming when unavailable).
void set_linear_path(int path);

}  // namespace nanovllm::cpu
