// A linear weight in 4-bit groups (5- / 6-bit: `bits`) as a GPTQ / AWQ checkpoint stores it, unpacked to one code per
// byte (host memory): the input of Backend::prepare_linear_int4, which places it on the int4
// kernels without re-quantizing (kernels/cpu/pack_int4.h). The loader makes it
// (loader/int4_checkpoint.h); header-only, so the loader needs no kernel library.
//
//   w[n, k] = scale[n, g] * (q[n, k] - zero[n, g]),   g = g_idx[k]
// or, with `mins` (ggml's Q4_K, whose minimum is not an integer number of steps):
//   w[n, k] = scale[n, g] * q[n, k] + min[n, g]
//
// g_idx maps each input column to its group: k / group_size for plain checkpoints, any order
// for GPTQ's act-order (desc_act) and for a tensor-parallel rank's column slice (whose groups
// may be cut). Several input columns share a group's scale and zero per output row.
#pragma once
#include <cstdint>

#include "util/tensor.h"

namespace nanovllm {

// ggml's IQ4_NL code book (kvalues_iq4nl): the value of each 4-bit code.
inline constexpr int8_t kIq4nlTable[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                           1,    13,   25,  38,  53,  69,  89,  113};

struct Int4Groups {
  int64_t N = 0, K = 0;  // logical weight [N, K] (out, in)
  int64_t G = 0;         // groups (columns of scales / zeros)
  Tensor q;              // U8 [N, K]: codes 0..15 (bits 5: 0..31, bits 6: 0..63, bits 3: 0..7, bits 2: 0..3)
  Tensor scales;         // F32 [N, G]: the checkpoint's scales (f16 values, or bf16 / f32)
  Tensor zeros;          // U8 [N, G] (undefined with iq4_table): integer zero points 0..16 (GPTQ v1 stores z - 1: 16 is possible; bits 6: 32, bits 3: 4)
  Tensor mins;           // F32 [N, G] or undefined; when defined, zeros is undefined (see above)
  bool has_mins() const { return mins.defined(); }
  // Optional, with mins (Q4_K, Q5_K): the factors of each scale and min, per superblock of 8 groups:
  //   scale[n, g] = d[n, g / 8] * sub_scale[n, g],  min[n, g] = -(dmin[n, g / 8] * sub_min[n, g])
  // so the kernels can keep Q4_K's own 4.5-bit form (kernels/quantized.h, k_superblocks).
  Tensor d, dmin;              // F32 [N, G / superblock_groups()] (f16 values; bits 6: no dmin)
  Tensor sub_scale, sub_min;   // U8 [N, G] (6-bit; bits 6: sc as i8 bits, no sub_min)
  bool has_superblocks() const { return d.defined(); }
  // 6 (ggml's Q6_K, groups of 16 in superblocks of 16 groups): codes 0..63, every zero 32,
  //   scale[n, g] = d[n, g / 16] * sub_scale[n, g]
  // with d F32 [N, G / 16] (f16 values) and sub_scale U8 [N, G] holding a signed 8-bit integer
  // (two's complement); no dmin, sub_min. The CPU keeps it as int6-g16-k (kernels/quantized.h).
  // 3 (ggml's Q3_K): as 6 with codes 0..7, every zero 4 and sub_scale in [-32, 31]: int3-g16-k.
  // 5 (ggml's Q5_K): as Q4_K (mins and both factors) with codes 0..31: int5-g32-zp-k.
  int bits = 4;
  // 2 (ggml's Q2_K): as Q4_K (mins and both factors, each 4-bit) in groups of 16, superblocks of
  // 16 groups, codes 0..3: int2-g16-zp-k.
  int superblock_groups() const { return bits == 6 || bits == 3 || bits == 2 ? 16 : 8; }
  // ggml's IQ4_NL / IQ4_XS (bits 4, groups of 32, no zeros / mins): each code indexes
  // kIq4nlTable, w[n, k] = scale[n, g] * kIq4nlTable[q[n, k]], scale an exact f32 value (IQ4_XS:
  // d x (ls - 32)). The CPU keeps it as int4-g32-nl (kernels/quantized.h).
  bool iq4_table = false;
  Tensor g_idx;          // I32 [K]: group of each input column, in [0, G)
};

}  // namespace nanovllm
