// Weight quantization at load (kernels/quantized.h describes the schemes and the layout).
#pragma once
#include <functional>

#include "kernels/quantized.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

// Memory for a quantized blob: a U8 tensor [rows, cols] (the CPU backend hands out huge pages).
using U8Allocator = std::function<Tensor(int64_t rows, int64_t cols)>;

// The shape fields (N, K, Np, Kp, block_bytes, scheme) of a quantized [N, K] weight, no data.
QuantizedWeight quantized_layout(int64_t N, int64_t K, const QuantScheme& scheme);
// Bytes a quantized [N, K] weight occupies (= QuantizedWeight::nbytes() of quantize_weight's).
int64_t quantized_nbytes(int64_t N, int64_t K, const QuantScheme& scheme);

// Quantizes a host weight [N, K] (F32 / BF16 / F16) with `scheme` (int8 or int4).
QuantizedWeight quantize_weight(const Tensor& w, const QuantScheme& scheme, ThreadPool& pool,
                                const U8Allocator& alloc = nullptr);
// The dequantized row n of q as f32 (out[K]): what the kernels multiply with (tests, and the
// reference for the accuracy measurements), in the kernel's column order (a composite weight's:
// x's order, its parts' dequantize_row_inputs).
void dequantize_row(const QuantizedWeight& q, int64_t n, float* out);
// The same in x's column order (out[x_features()]): column act_index[k] gets the kernel's column
// k; with no act_index, dequantize_row.
void dequantize_row_inputs(const QuantizedWeight& q, int64_t n, float* out);

}  // namespace nanovllm::cpu
