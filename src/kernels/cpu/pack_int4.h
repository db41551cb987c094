// GPTQ / AWQ weights onto the int4 kernels without re-quantizing (kernels/quantized.h has the
// layout, kernels/int4_groups.h the input):
//
// - Groups become the layout's groups of 32 (or 64 when every run of a group is a multiple of
//   64 columns): each checkpoint group's scale (and zero) is repeated for its 32-column pieces.
//   Columns are ordered by group (stable): a GPTQ act-order weight or a tensor-parallel slice
//   whose groups are cut gets an act_index gather of its input, each group's run padded to the
//   layout group with zero columns; a plain weight needs none.
// - All zero points 8 (symmetric GPTQ): int4 symmetric, same codes, scale = f16(scale):
//   w = scale * (q - 8) bit-identically (f16 scales; bf16 / f32 scales round to f16).
// - Otherwise (asymmetric GPTQ, AWQ): int4 with zero points, same codes, scale = f16(scale),
//   min = f16(-scale * zero). scale * zero is exact in f32 but may need up to 15 significant
//   bits, so min rounds to f16's 11: |error| <= 2^-11 |scale * zero| <= scale / 128 per weight
//   (zero <= 16), and none where f16 holds scale * zero (zero 0, 1, 2, 4, 8, 16, or scales with
//   trailing zero bits). The layout's f16 min cannot do better; an f32 min would be exact.
// - With mins (ggml's Q4_K: w = scale * q + min, scale and min f32 with up to 17 significant
//   bits): int4-g32-zp-f32, same codes, the f32 scale and min stored as they are: every weight
//   dequantizes bit-identically (scale * q is exact, + min rounds once, as in ggml).
// - 5- and 6-bit codes (ggml's Q5_K, Q6_K): kernels/cpu/pack_kquants.h.
#pragma once
#include "kernels/cpu/quantize.h"
#include "kernels/int4_groups.h"

namespace nanovllm::cpu {

// Throws for malformed input (shapes, dtypes, g_idx outside [0, G), a scale * zero past f16).
QuantizedWeight pack_int4_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc = nullptr);

}  // namespace nanovllm::cpu
