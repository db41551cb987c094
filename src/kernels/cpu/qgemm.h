// CPU linear with a quantized weight (kernels/quantized.h):
//   out[M, N] = x[M, K] @ dequant(w)[N, K]^T (+ bias)
// x is quantized per row to int8 on the fly (x ~ sx[m] * x8[m, :]) and every product is an
// exact integer dot (AVX512-VNNI, AVX-VNNI, AVX2 or scalar, picked at run time). Weight rows are
// streamed once per call in tiles reused by every 8 rows of x, so M = 1..4 (decode) is a
// bandwidth-bound GEMV and larger M (prefill, batched decode) reuses each tile from cache.
#pragma once
#include "kernels/quantized.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

void quantized_linear(const Tensor& x, const QuantizedWeight& w, const Tensor* bias, Tensor& out,
                      ThreadPool& pool);
// The kernel set in use: "avx512-vnni", "avx-vnni", "avx2" or "scalar" (NANOVLLM_ISA caps it).
const char* quantized_isa();

}  // namespace nanovllm::cpu
