// oneDNN bf16 matmul for prefill-sized linears with BF16 weights: out[M, N] = bf16(x)[M, K] @
// w[N, K]^T, F32 accumulate and output. Uses AVX-512 BF16 / AMX through oneDNN where the CPU has
// them (measured 1.5-2.5x the F32 paths from M = 16 up, docs/perf.md). Activations are rounded to
// bf16 first, as a bf16 model computes natively; batch-1..15 decode keeps the exact streaming
// kernel.
#pragma once
#include "util/tensor.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

// True when it ran; false when oneDNN is absent or rejects the shape/ISA (caller falls back).
bool onednn_bf16_linear(const Tensor& x, const Tensor& w, Tensor& out, ThreadPool& pool);
// Whether onednn_bf16_linear would run for a [N, K] weight (oneDNN present, shape/ISA accepted).
bool onednn_bf16_supported(int64_t N, int64_t K);

}  // namespace nanovllm::cpu
