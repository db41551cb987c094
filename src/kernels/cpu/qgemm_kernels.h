// The quantized-linear inner kernels, one set per ISA (internal to kernels/cpu; qgemm.cc
// quantizes the activations, splits the work and picks the set).
//
// Every kernel computes, for the M (<= kQMaxRows) activation rows of `a` and the 16-row weight
// blocks [b0, b1) (kernels/quantized.h: layout):
//   out[m * ldo + n] = sx[m] * sum_k x8[m, k] * w_dequantized[n, k],  n < N
// with exact integer dot products (per int4 / int5 / int6 / int3 / int2 / int8-g32 group, per int8 row) and f32 scaling. A block's 16
// rows are the 16 lanes of a vector, so each output is stored once, 16 at a time.
#pragma once
#include <cstdint>

#include <array>

#include "kernels/int4_groups.h"
#include "kernels/quantized.h"

namespace nanovllm::cpu {

constexpr int kQMaxRows = 8;  // activation rows per kernel call (register accumulators)

// int4-g32-nl on the VNNI kernels: each table value + 128 (1..241), the unsigned vpdpbusd operand.
inline constexpr std::array<uint8_t, 16> kIq4nlPlus128 = [] {
  std::array<uint8_t, 16> t{};
  for (int i = 0; i < 16; ++i) t[size_t(i)] = uint8_t(kIq4nlTable[i] + 128);
  return t;
}();

// The weight as plain pointers (no library code runs inside the ISA-specific files).
struct QWeightView {
  QuantKind kind = QuantKind::None;
  int group = 0;  // int4: 32 / 64; int8: 0 (per row) or 32 (int8-g32); int5: 32; int6, int3, int2: 16
  bool zero_points = false;
  bool f32_params = false;     // int4-g32-zp with f32 scale and min (kernels/quantized.h)
  bool k_superblocks = false;  // int4-g32-zp with Q4_K's two-level scale and min (same)
  bool nl_table = false;       // int4-g32-nl: codes index ggml's IQ4_NL table, f32 scales (same)
  int64_t N = 0, Kp = 0, block_bytes = 0;
  const uint8_t* data = nullptr;
  const float* scales = nullptr;      // int8 [Np]
  const int32_t* row_sums = nullptr;  // int8 [Np]
};

// Quantized activations for M rows (qgemm.cc fills them), natural k order.
struct QActs {
  // [M, Kp] bytes: x8 (s8), or for int8 weights on the VNNI kernels x8 + 128 (u8, `offset128`).
  const uint8_t* x = nullptr;
  int64_t Kp = 0;
  bool offset128 = false;
  const float* sx = nullptr;       // [M] per-row scale: x ~ sx * x8
  // int4 symmetric: 8 * sum of x8 over each group [M, Kp/g]; int6: -32 * that sum, int3: -4 * it (where their
  // kernels start each group's dot chain: one broadcast load, no negation in the loop);
  // int4-g32-nl: 128 * that sum (the VNNI kernels take table value + 128 as the unsigned operand)
  const int32_t* gsum8 = nullptr;
  const float* gsumf = nullptr;    // int4 zero points: sum of x8 over each group [M, Kp/g]
};

using QKernel = void (*)(const QWeightView& w, const QActs& a, int M, int64_t b0, int64_t b1,
                         float* out, int64_t ldo);

// One per ISA level. The x86 ones are compiled with target attributes (AVX2: per file) and only
// called when cpu_features() has the instructions. The VNNI ones want int8 activations offset
// by 128 (the vpdpbusd u8 x s8 form); the others signed.
void qrows_scalar(const QWeightView& w, const QActs& a, int M, int64_t b0, int64_t b1, float* out,
                  int64_t ldo);
// (int3-g16-k runs on qrows_avx2 at the AVX-VNNI level too: qrows_avx_vnni has no int3 kernel.)
void qrows_avx2(const QWeightView& w, const QActs& a, int M, int64_t b0, int64_t b1, float* out,
                int64_t ldo);
void qrows_avx_vnni(const QWeightView& w, const QActs& a, int M, int64_t b0, int64_t b1,
                    float* out, int64_t ldo);
void qrows_avx512_vnni(const QWeightView& w, const QActs& a, int M, int64_t b0, int64_t b1,
                       float* out, int64_t ldo);
// All M activation rows of `a` against blocks [b0, b1) of an int5 / int6 weight (false, doing
// nothing, for other kinds): each block's codes are unpacked once into a thread-local buffer and
// reused by every chunk of kQMaxRows rows, where qrows_avx512_vnni would unpack them per chunk
// (for M > kQMaxRows). The same sums, in the same order.
bool qtile_avx512_vnni(const QWeightView& w, const QActs& a, int64_t M, int64_t b0, int64_t b1, float* out,
                       int64_t ldo);

}  // namespace nanovllm::cpu
