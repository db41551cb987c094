// Quantized linear weights: what `--quantization int8|int4` makes of a bf16/f16/f32 checkpoint
// at load, and the handle a model holds for each linear (dense or quantized).
//
// Schemes (w ~ dequantized weight, q the stored integer):
// - int8: per output channel (row), symmetric: w[n,k] = scale[n] * q[n,k], q in [-127, 127].
// - int4: per group of `group` (32 or 64) consecutive k of a row:
//     symmetric:        w = scale[g] * (q - 8),   q in [0, 15]
//     with zero points: w = scale[g] * q + min[g] (min = the group's minimum, q in [0, 15])
// The kernels quantize activations per row on the fly (x ~ sx[m] * x8[m,k], x8 in [-127, 127])
// and accumulate integer dot products (AVX512-VNNI / AVX-VNNI vpdpbusd, AVX2 pmaddubsw).
//
// Storage (QuantizedWeight::data, U8, row n at data + n * row_bytes; K padded with zero
// weights to Kp):
// - int8: Kp = K rounded up to 64; row = Kp bytes of q (two's complement). scales F32 [N],
//   row_sums I32 [N] = sum_k q[n,k] (the kernels feed x8 + 128 as unsigned bytes and subtract
//   128 * row_sum).
// - int4: superblocks of 16 groups (SB = 16 * group weights); Kp = K rounded up to SB. A row is
//   Kp / SB records of [8 * group bytes of packed q][16 f16 scales][16 f16 mins, zero points
//   only]. In a record, 64-byte line t holds unpacked vectors V(2t) (low nibbles) and V(2t+1)
//   (high nibbles); V(i) byte 4j + b is q of group j, element 4i + b. So one vpdpbusd of V(i)
//   with the matching activation bytes adds 4 products to every group's lane j, and a
//   superblock ends with 16 per-group integer dots in one vector (no horizontal sums).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "util/tensor.h"

namespace nanovllm {

enum class QuantKind : uint8_t { None, Int8, Int4 };

struct QuantScheme {
  QuantKind kind = QuantKind::None;
  int group = 0;             // int4: 32 or 64
  bool zero_points = false;  // int4: scale + min per group instead of symmetric
  bool enabled() const { return kind != QuantKind::None; }
  std::string str() const;   // "none", "int8", "int4-g32", "int4-g64-zp", ...
};
// "none" | "" | "int8" | "int4" (the default int4 scheme) | "int4-g32" | "int4-g64" |
// "int4-g32-zp" | "int4-g64-zp". Throws naming the value and the choices otherwise.
QuantScheme parse_quant_scheme(const std::string& s);

struct QuantizedWeight {
  QuantScheme scheme;
  int64_t N = 0, K = 0;   // logical shape [N, K]
  int64_t Kp = 0;         // padded K (see above)
  int64_t row_bytes = 0;  // bytes of one row in data
  Tensor data;            // U8 [N, row_bytes]
  Tensor scales;          // int8: F32 [N]
  Tensor row_sums;        // int8: I32 [N]
  int64_t superblock() const { return int64_t(16) * scheme.group; }
  size_t nbytes() const { return data.nbytes() + scales.nbytes() + row_sums.nbytes(); }
};

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
