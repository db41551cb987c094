// ggml's Q6_K weights (kernels/int4_groups.h with bits 6) onto the CPU kernels without
// re-quantizing: int6-g16-k (kernels/quantized.h), the file's codes, i8 sub-scales and f16 d as
// they are. Every weight dequantizes bit-identically (d x sc is an exact f32 product, times an
// integer in [-32, 31]: exact again). A tensor-parallel column slice cut inside a superblock
// keeps its source superblocks whole: the slots of the other rank's columns become zero columns
// of an act_index gather (their bytes are read, their activations are 0).
#pragma once
#include "kernels/cpu/quantize.h"
#include "kernels/int4_groups.h"

namespace nanovllm::cpu {

// Throws for malformed input: shapes and dtypes, codes past 63, zeros other than 32, factors
// that do not give the scales, a d that is not an f16 value.
QuantizedWeight pack_int6_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc = nullptr);

}  // namespace nanovllm::cpu
