// Quantized linear weights: what `--quantization int8|int4` makes of a bf16/f16/f32 checkpoint
// at load, and the handle a model holds for each linear (dense or quantized).
//
// Schemes (w ~ dequantized weight, q the stored integer):
// - int8: per output channel (row), symmetric: w[n,k] = scale[n] * q[n,k], q in [-127, 127].
// - int8-g32: per group of 32 consecutive k of a row, symmetric, an f16 scale per group:
//     w = scale[g] * q, q in [-127, 127] (ggml's Q8_0 grid: a Q8_0 tensor repacks losslessly).
// - int4: per group of `group` (32 or 64) consecutive k of a row:
//     symmetric:        w = scale[g] * (q - 8),   q in [0, 15]
//     with zero points: w = scale[g] * q + min[g] (min = the group's minimum, q in [0, 15])
//   f16 scale and min; or (group 32 with zero points, made only by a repack of ggml's Q4_K,
//   whose scale d x sc and min -(dmin x m), an f16 times a 6-bit integer, take up to 17
//   significant bits; kernels/cpu/pack_int4.h):
//     `k_superblocks`: those factors as stored, scale = d[s] * sc[g], min = -(dmin[s] * m[g])
//       for superblock s of 8 groups (256 k): 4.625 bits per weight, as exact as the file;
//     `f32_params`: the products in f32 (any grouping, e.g. a tensor-parallel cut: 6 bits).
// - int5-g32-zp-k (made only by a repack of ggml's Q5_K): Q4_K's form (w = d x sc x q - dmin x m,
//   per 32 k, the factors per 256) with q in [0, 31]: 5.625 bits per weight (the file: 5.5).
// - int5-g32-zp (made only by a repack of ggml's Q5_1): per group of 32, w = scale[g] * q + min[g],
//   q in [0, 31], the file's f16 d and m as stored: 6 bits per weight, the file's own form and size.
// - int5-g32-zp-f32 (made only by a repack of Q5_K groups fused with Q5_1 ones, whose superblock
//   factors the fusion drops, or of any such groups whose scale or min is not an f16 value): as
//   int5-g32-zp with f32 scale and min (Q5_K's exact d x sc, dmin x m take up to 17 bits): 7 bits.
// - int4-g32-nl (made only by a repack of ggml's IQ4_NL / IQ4_XS): per group of 32, w = scale[g] *
//   kIq4nlTable[q] (kernels/int4_groups.h: ggml's 16 values in [-127, 113]), q in [0, 15], an
//   f32 scale (IQ4_XS's d x (ls - 32) takes up to 17 significant bits): 5 bits per weight.
// - int6-g16-k (made only by a repack of ggml's Q6_K, kernels/cpu/pack_kquants.h): per group of 16
//   consecutive k, w = d[s] * sc[g] * (q - 32), q in [0, 63], sc a signed 8-bit integer, d an f16
//   per superblock s of 16 groups (256 k). d x sc is an exact f32 product: 6.5625 bits per
//   weight, the file's own form and size.
// - int2-g16-zp-k (made only by a repack of ggml's Q2_K, kernels/cpu/pack_kquants.h): per group of
//   16 consecutive k, w = d[s] * sc[g] * q - dmin[s] * m[g], q in [0, 3], sc and m 4-bit, d and
//   dmin f16 per superblock s of 16 groups (256 k). d x sc and dmin x m are exact f32 products:
//   2.625 bits per weight, the file's own form and size.
// - int3-g16-k (made only by a repack of ggml's Q3_K, kernels/cpu/pack_kquants.h): per group of 16
//   consecutive k, w = d[s] * sc[g] * (q - 4), q in [0, 7], sc a signed integer in [-32, 31], d an
//   f16 per superblock s of 16 groups (256 k); the kernels sum (q - 4) x sc over a superblock as
//   integers, then times d: 3.5625 bits per weight (the file: 3.4375; its 6-bit sc take 8 here).
// The kernels quantize activations per row on the fly (x ~ sx[m] * x8[m,k], x8 in [-127, 127])
// and accumulate integer dot products (AVX512-VNNI / AVX-VNNI vpdpbusd, AVX2 pmaddubsw).
//
// Storage (QuantizedWeight::data, U8): rows in blocks of 16 (N padded to Np with zero rows),
// block b at data + b * block_bytes; K padded with zero weights to Kp. In a block, each 64-byte
// vector holds 4 consecutive k of all 16 rows (byte 4r + j: row 16b + r, k = 4i + j), so one
// vpdpbusd with 4 broadcast activation bytes adds 4 products to each row's lane, and a block
// ends with its 16 outputs in one vector (no horizontal sums):
// - int8: Kp = K rounded up to 4; a block is Kp / 4 vectors of q (two's complement).
//   scales F32 [Np], row_sums I32 [Np] = sum_k q[n,k] (the VNNI kernels feed x8 + 128 as the
//   unsigned operand and subtract 128 * row_sum).
// - int8-g32: Kp = K rounded up to 32; a block is Kp / 32 records of [8 vectors of 64 bytes as
//   int8 (k = 4i .. 4i+3 of the group in vector i)][16 f16 scales][16 i16 group sums of q]
//   (576 bytes per 16 rows x 32 k; the VNNI kernels subtract 128 * group sum per group).
// - int4: Kp = K rounded up to the group; a block is Kp / group records of
//   [group / 8 lines of 64 bytes][16 f16 scales][16 f16 mins, zero points only] (f32_params:
//   [16 f32 scales][16 f32 mins], 8 * group + 128 bytes; k_superblocks: Kp = K, a multiple
//   of 256, and a block is Kp / 256 superblocks of [8 x 256 bytes of group lines][8 x 16 u8 sc]
//   [8 x 16 u8 m][16 f16 d][16 f16 dmin], 2368 bytes = 37 lines). Line t's low
//   nibbles are the vector of k = 8t .. 8t+3 of the group, its high nibbles k = 8t+4 .. 8t+7.
// - int4-g32-nl: as int4-g32 with [16 f32 scales] in place of the f16 ones (320 bytes per record).
// - int5-g32-zp-k: Kp = K, a multiple of 256; a block is Kp / 256 superblocks of [8 group records
//   of 320 bytes: 4 lines of nibbles as int4's, then a line whose byte 4r + j holds in bit v the
//   fifth bit of the code of k = 4v + j][8 x 16 u8 sc][8 x 16 u8 m][16 f16 d][16 f16 dmin]
//   (2880 bytes = 45 lines; int5_code below).
// - int5-g32-zp: Kp = K rounded up to 32; a block is Kp / 32 records of [int5-g32-zp-k's group
//   record: 4 lines of nibbles, 1 line of fifth bits][16 f16 scales][16 f16 mins] (384 bytes).
//   int5-g32-zp-f32: the same with [16 f32 scales][16 f32 mins] (448 bytes).
// - int6-g16-k: Kp = K, a multiple of 256. A block is [the 16 rows' f16 d of each superblock,
//   Kp / 256 x 32 bytes, zero-padded to a multiple of 64] then Kp / 256 superblocks of
//   [16 groups x 3 lines P0 P1 P2][16 x 16 i8 sc, group u's at 16u] (3328 bytes = 52 lines). In
//   group u, byte 4r + j of P_i holds in bits 0-5 the code of k = 16u + 4i + j (row r), and in
//   bits 6-7 bits 2i, 2i+1 of the code of k = 16u + 12 + j (int6_code below).
// - int2-g16-zp-k: Kp = K, a multiple of 256; a block is Kp / 256 superblocks of [16 group lines:
//   byte 4r + j of group u's line holds in bits 2i, 2i+1 the code of k = 16u + 4i + j (row r)]
//   [16 x 16 u8 sc | m << 4, group u's at 16u][16 f16 d][16 f16 dmin] (1344 bytes = 21 lines, as
//   the file's 84 bytes per 256 k of a row; int2_code below).
// - int3-g16-k: Kp = K, a multiple of 256. A block is [the 16 rows' f16 d of each superblock, as
//   int6-g16-k's table] then Kp / 256 superblocks of [8 records of 3 lines A B C, one per pair of
//   groups 2p, 2p + 1][16 x 16 i8 sc, group u's at 16u] (1792 bytes = 28 lines, read in order). In
//   a record, vector v (0..7) is k = 16 (2p + v / 4) + 4 (v % 4) + j of row r, at byte 4r + j of
//   each line: A holds the codes of v = 0 (bits 0-2), 1 (bits 3-5) and bits 0-1 of v = 2 (bits
//   6-7); B those of v = 3, 4 and bits 0-1 of v = 5; C those of v = 6, 7, bit 2 of v = 2 (bit 6)
//   and of v = 5 (bit 7). Six of the eight vectors take a shift and a mask (int3_code below).
// - act_index (int4 weights repacked from GPTQ / AWQ checkpoints, kernels/cpu/pack_int4.h; int5 /
//   int6 / int2 ones from a tensor-parallel cut inside a superblock, kernels/cpu/pack_kquants.h, or
//   inside a group of int5-g32-zp / int5-g32-zp-f32):
//   the kernel's column k multiplies x[:, act_index[k]] (-1: zero), so groups that a checkpoint
//   stores out of order (GPTQ act-order) or cut (a tensor-parallel slice) become contiguous
//   groups of the layout. The gather is a copy: it changes no product.
// - parts (a fused weight whose parts a GGUF stores in different forms, e.g. a Q4_K_M file's
//   Q4_K q / k and Q6_K v): no data of its own; each part is a whole QuantizedWeight in its own
//   layout, reading the same input, and writes its own output columns, in order.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "util/tensor.h"

namespace nanovllm {

enum class QuantKind : uint8_t { None, Int8, Int4, Int5, Int6, Int2, Int3 };

struct QuantScheme {
  QuantKind kind = QuantKind::None;
  int group = 0;             // int4: 32 or 64; int8: 0 (per row) or 32 (int8-g32); int6, int3, int2: 16
  bool zero_points = false;  // int4: scale + min per group instead of symmetric
  bool f32_params = false;   // int4-g32 with zero points: f32 scale and min (see above)
  bool k_superblocks = false;  // int4-g32 with zero points: Q4_K's two-level parameters (see above);
                               // int5-g32-zp-k, int6, int3 and int2 always (Q5_K's, Q6_K's, Q3_K's, Q2_K's)
  // int8-g32 from a GGUF block type (Q5_0, IQ4_NL, ...; engine/model_files.h): a group that is
  // not exact at step max |w| / 127 may be exact on a coarser step max |w| / c, which the
  // quantizer then searches (kernels/cpu/quantize.cc). Not part of str(): the layout is the same.
  bool exact_grid = false;
  bool nl_table = false;  // int4-g32-nl: codes index ggml's IQ4_NL table (see above)
  static constexpr int kSuperblockBytes = 2368;      // int4 k_superblocks: 16 rows x 256 k
  static constexpr int kInt5SuperblockBytes = 2880;  // int5-g32-zp-k: 16 rows x 256 k
  static constexpr int kInt6SuperblockBytes = 3328;  // int6-g16-k: 16 rows x 256 k, without d
  static constexpr int kInt2SuperblockBytes = 1344;  // int2-g16-zp-k: 16 rows x 256 k
  static constexpr int kInt3SuperblockBytes = 1792;  // int3-g16-k: 16 rows x 256 k, without d
  // int6-g16-k, int3-g16-k: the d table at the start of a block of `superblocks` superblocks.
  static constexpr int64_t int6_d_bytes(int64_t superblocks) { return (superblocks * 32 + 63) / 64 * 64; }
  bool enabled() const { return kind != QuantKind::None; }
  bool int8_groups() const { return kind == QuantKind::Int8 && group > 0; }
  std::string str() const;   // "none", "int8", "int8-g32", "int4-g32", "int4-g64-zp", "int4-g32-zp-f32", "int4-g32-zp-k", "int5-g32-zp-k", "int6-g16-k", "int3-g16-k", "int2-g16-zp-k", ...
};
// "none" | "" | "int8" | "int8-g32" | "int4" (the default int4 scheme) | "int4-g32" | "int4-g64" |
// "int4-g32-zp" | "int4-g64-zp" | "int4-g32-zp-f32" | "int4-g32-nl" | "int5-g32-zp-k" | "int6-g16-k" |
// "int3-g16-k" | "int2-g16-zp-k" | "int5-g32-zp" | "int5-g32-zp-f32" (the last eight name repack
// layouts; quantize_weight refuses the last seven). Throws naming the value and
// the choices otherwise.
QuantScheme parse_quant_scheme(const std::string& s);

struct QuantizedWeight {
  static constexpr int64_t kBlockRows = 16;
  QuantScheme scheme;
  int64_t N = 0, K = 0;     // logical shape [N, K]
  int64_t Np = 0, Kp = 0;   // padded (see above)
  int64_t block_bytes = 0;  // bytes of one block of 16 rows in data
  Tensor data;              // U8 [Np / 16, block_bytes]
  Tensor scales;            // int8 (per row): F32 [Np]
  Tensor row_sums;          // int8 (per row): I32 [Np]
  // Input gather (see above): I32 [K] into x's in_features columns; undefined: x is [.., K].
  Tensor act_index;
  int64_t in_features = 0;  // x's columns when act_index is defined
  int64_t x_features() const { return act_index.defined() ? in_features : K; }
  // Column parts (see above; join_quantized_columns): when not empty, data is undefined, N is the
  // parts' sum and K their common x_features(); scheme is the first part's.
  std::vector<std::shared_ptr<const QuantizedWeight>> parts;
  bool composite() const { return !parts.empty(); }
  // int4, int8-g32: bytes of one group's record in a block.
  int64_t group_record_bytes() const {  // (k_superblocks: the lines of a group, 256 bytes)
    if (scheme.kind == QuantKind::Int8) return 16 * scheme.group + 64;
    if (scheme.kind == QuantKind::Int6) return 192;  // P0 P1 P2
    if (scheme.kind == QuantKind::Int5)  // 4 nibble lines + 1 bit line (+ f16 / f32 params)
      return scheme.k_superblocks ? 320 : scheme.f32_params ? 448 : 384;
    if (scheme.kind == QuantKind::Int2) return 64;   // 1 line of 2-bit codes
    if (scheme.kind == QuantKind::Int3) return 96;   // half a record of 3 lines per pair of groups
    if (scheme.k_superblocks) return 8 * scheme.group;
    if (scheme.f32_params) return 8 * scheme.group + 128;
    if (scheme.nl_table) return 8 * scheme.group + 64;
    return 8 * scheme.group + 32 + (scheme.zero_points ? 32 : 0);
  }
  // (An undefined Tensor is a 0-d scalar to nbytes(): int4 and int8-g32 hold no scales/row_sums
  // tensors.)
  size_t nbytes() const {
    size_t n = 0;
    for (const auto& p : parts) n += p->nbytes();
    if (composite()) return n;
    return data.nbytes() + (scales.defined() ? scales.nbytes() : 0) +
           (row_sums.defined() ? row_sums.nbytes() : 0) + (act_index.defined() ? act_index.nbytes() : 0);
  }
};

// One weight of the parts' output columns, in order: out[:, n0 + j] = parts[i] applied to x, where
// n0 is the rows of the parts before i. Every part must read the same x (same x_features()).
// Throws naming the parts otherwise.
QuantizedWeight join_quantized_columns(const std::vector<std::shared_ptr<const QuantizedWeight>>& parts);

// int5-g32-zp-k: the code (0..31) of element e (0..31) of row r in a group's record.
inline int int5_code(const uint8_t* record, int64_t r, int e) {
  const int64_t j = 4 * r + e % 4;
  const int nib = (record[64 * (e / 8) + j] >> ((e % 8) >= 4 ? 4 : 0)) & 15;
  return nib | (((record[256 + j] >> (e / 4)) & 1) << 4);
}

// int5-g32-zp / int5-g32-zp-f32: parameter i of a group's record (i < 16: row i's scale; 16 + i:
// its min), stored as f16 or as f32 after the code lines.
inline float int5_param(const uint8_t* record, bool f32, int64_t i) {
  if (f32) {
    float v;
    std::memcpy(&v, record + 320 + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, record + 320 + 2 * i, 2);
  return f16_to_f32(h);
}

// int6-g16-k: the code (0..63) of element e (0..15) of row r in a group's lines P0 P1 P2.
inline int int6_code(const uint8_t* group_lines, int64_t r, int e) {
  const int64_t j = 4 * r + e % 4;
  if (e < 12) return group_lines[64 * (e / 4) + j] & 63;
  return (group_lines[j] >> 6) | ((group_lines[64 + j] >> 6) << 2) | ((group_lines[128 + j] >> 6) << 4);
}

// int2-g16-zp-k: the code (0..3) of element e (0..15) of row r in a group's line.
inline int int2_code(const uint8_t* group_line, int64_t r, int e) {
  return (group_line[4 * r + e % 4] >> (2 * (e / 4))) & 3;
}

// int3-g16-k: the code (0..7) of element e (0..15) of row r in group u (0..15) of a superblock.
inline int int3_code(const uint8_t* superblock, int u, int64_t r, int e) {
  const int64_t j = 4 * r + e % 4;
  const uint8_t* rec = superblock + 192 * (u / 2);
  const int v = 4 * (u % 2) + e / 4;
  const int a = rec[j], b = rec[64 + j], c = rec[128 + j];
  switch (v) {
    case 0: return a & 7;
    case 1: return (a >> 3) & 7;
    case 2: return (a >> 6) | (((c >> 6) & 1) << 2);
    case 3: return b & 7;
    case 4: return (b >> 3) & 7;
    case 5: return (b >> 6) | (((c >> 7) & 1) << 2);
    case 6: return c & 7;
    default: return (c >> 3) & 7;
  }
}

// A linear layer's weight [N, K] as the model holds it: dense (checkpoint dtype, on the
// backend's device) or quantized.
struct LinearWeight {
  Tensor dense;
  std::shared_ptr<const QuantizedWeight> quant;
  bool quantized() const { return quant != nullptr; }
  int64_t out_features() const { return quant ? quant->N : dense.size(0); }
  size_t nbytes() const { return quant ? quant->nbytes() : dense.nbytes(); }
};

}  // namespace nanovllm
