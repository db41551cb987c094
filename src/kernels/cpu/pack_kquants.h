// ggml's K-quant superblocks onto their own CPU layouts, without re-quantizing
// (kernels/quantized.h; input: kernels/int4_groups.h):
// - Q6_K (bits 6) -> int6-g16-k: the file's codes, i8 sub-scales and f16 d as they are. Every
//   weight dequantizes bit-identically (d x sc is an exact f32 product, times an integer in
//   [-32, 31]: exact again).
// - Q5_K (bits 5) -> int5-g32-zp-k: Q4_K's scheme (pack_int4.h) with 5-bit codes; scale x q is
//   exact and + min rounds once, as in ggml.
// - Q3_K (bits 3) -> int3-g16-k: the file's 3-bit codes (zero 4), its 6-bit sc (as i8) and f16 d
//   as they are (3.5625 bits per weight; the file's 3.4375). Every weight dequantizes
//   bit-identically, as Q6_K's.
// - Q2_K (bits 2) -> int2-g16-zp-k: the file's 2-bit codes, 4-bit sc / m per 16 and f16 d / dmin
//   per 256 as they are (2.625 bits per weight, as the file); d x sc x q exact, - dmin x m rounds
//   once, as in ggml.
// A tensor-parallel column slice cut inside a superblock keeps its source superblocks whole: the
// slots of the other rank's columns become zero columns of an act_index gather (their bytes are
// read, their activations are 0), so no weight changes.
#pragma once
#include <vector>

#include "kernels/cpu/quantize.h"
#include "kernels/int4_groups.h"

namespace nanovllm::cpu {

// Throw for malformed input: shapes and dtypes, codes past 63 / 31 / 7 / 3, zeros other than 32 (4), factors
// that do not give the scales (and mins), a d (dmin) that is not an f16 value.
QuantizedWeight pack_int6_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc = nullptr);
QuantizedWeight pack_int5_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc = nullptr);
QuantizedWeight pack_int3_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc = nullptr);
QuantizedWeight pack_int2_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc = nullptr);

// The layout of `scheme` for a repack whose kernel column j reads input column act_index[j]
// (-1: a zero column): K = act_index.size(), the gather kept unless `identity`, data allocated.
// (pack_int4.cc and pack_kquants.cc plan their columns differently and share this.)
QuantizedWeight gathered_layout(const Int4Groups& w, const std::vector<int32_t>& act_index, bool identity,
                                const QuantScheme& scheme, const U8Allocator& alloc);

}  // namespace nanovllm::cpu
