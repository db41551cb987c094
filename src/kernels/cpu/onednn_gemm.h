// oneDNN bf16 matmul for prefill-sized linears with BF16 weights: out[M, N] = bf16(x)[M, K] @
// w[N, K]^T, F32 accumulate and output. Uses AVX-512 BF16 / AMX through oneDNN where the CPU has
// them (measured ~2.5x the F32 paths, docs/perf.md). Activations are rounded to bf16 first, as a
// bf16 model computes natively; decode-sized M keeps the exact streaming kernel.
#pragma once
#include "util/tensor.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

// True when it ran; false when oneDNN is absent or rejects the shape/ISA (caller falls back).
bool onednn_bf16_linear(const Tensor& x, const Tensor& w, Tensor& out, ThreadPool& pool);

}  // namespace nanovllm::cpu
