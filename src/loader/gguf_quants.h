// ggml tensor types as stored in GGUF files: the block geometry of each, and exact
// dequantization to f32 (the same float operations, in the same order, as ggml's reference
// dequantize_row_* functions, so the results are bit-identical to llama.cpp's CPU reference).
//
// A row of n elements (n a multiple of the block size) is n / block_size blocks of
// type_size bytes, back to back. Block layouts (QK_K = 256 for the K-quants):
//   Q4_0  32 x 4b, f16 d:            x = d (q - 8)
//   Q4_1  32 x 4b, f16 d, f16 m:     x = d q + m
//   Q5_0  32 x 5b (high bits in a u32), f16 d:  x = d (q - 16)
//   Q5_1  as Q5_0 with f16 m:        x = d q + m
//   Q8_0  32 x i8, f16 d:            x = d q
//   Q2_K  16 sub-blocks of 16, 4-bit scale and min each, f16 d and dmin
//   Q3_K  16 sub-blocks of 16, 3-bit q (2 low + 1 high bit), 6-bit signed scales, f16 d
//   Q4_K  8 sub-blocks of 32, 6-bit scale and min each (12 bytes), f16 d and dmin
//   Q5_K  as Q4_K with a fifth bit per weight
//   Q6_K  16 sub-blocks of 16, 6-bit q (4 low + 2 high bits), i8 scales, f16 d
//   IQ4_NL 32 x 4b indices into a fixed non-linear table, f16 d
//   IQ4_XS 8 sub-blocks of 32 with 6-bit scales, IQ4_NL's table, f16 d
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace nanovllm {

enum class GgmlType : uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
  IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
  TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct GgmlTypeInfo {
  const char* name;    // "Q4_K", or nullptr for ids that are not ggml types
  int block_size;      // elements per block
  int type_size;       // bytes per block
  bool dequantizable;  // dequantize_row() supports it
};
// Geometry of a ggml type id; name == nullptr for unknown ids (never throws).
GgmlTypeInfo ggml_type_info(uint32_t type);
std::string ggml_type_name(uint32_t type);  // "Q4_K", or "type 99" for unknown ids

// Dequantizes one row of n elements (n % block_size == 0) of a supported type from src
// (n / block_size * type_size bytes) into out[n].
void dequantize_row(GgmlType type, const uint8_t* src, float* out, int64_t n);

// One Q4_K row of n elements (n % 256 == 0) as 4-bit codes and per-32 parameters, so that
// dequantize_row gives exactly scale[k / 32] * q[k] + min[k / 32] (f32; scale = d x sc and
// min = -(dmin x m) are exact products): the int4 kernels' lossless repack (gguf_checkpoint.h).
// q[n], scale[n / 32], min[n / 32]; and the factors: d[n / 256], dmin[n / 256] (f16 values),
// sc[n / 32], m[n / 32] (6-bit), scale = d x sc, min = -(dmin x m).
void unpack_row_q4_k(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* min, float* d,
                     float* dmin, uint8_t* sc, uint8_t* m);
// One Q5_K row likewise, with 5-bit codes (0..31): dequantize_row gives exactly
// scale[k / 32] * q[k] + min[k / 32].
void unpack_row_q5_k(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* min, float* d,
                     float* dmin, uint8_t* sc, uint8_t* m);
// One Q5_1 row of n elements (n % 32 == 0) as 5-bit codes q[n] (0..31) and its f16 d and m per 32
// as scale[n / 32] and min[n / 32], so that dequantize_row gives exactly scale[k / 32] * q[k] +
// min[k / 32]: the int5-g32-zp kernels' lossless repack.
void unpack_row_q5_1(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* min);
// One Q2_K row of n elements (n % 256 == 0) as 2-bit codes q[n] (0..3) and per-16 parameters,
// so that dequantize_row gives exactly scale[k / 16] * q[k] + min[k / 16] (scale = d x sc and
// min = -(dmin x m), exact f32 products); and the factors d[n / 256], dmin[n / 256] (f16 values),
// sc[n / 16], m[n / 16] (4-bit): the int2-g16-zp-k kernels' lossless repack.
void unpack_row_q2_k(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* min, float* d,
                     float* dmin, uint8_t* sc, uint8_t* m);
// One Q6_K row of n elements (n % 256 == 0) as 6-bit codes q[n] (0..63) and per-16 scales
// scale[n / 16] = d x sc (an exact f32 product), so that dequantize_row gives exactly
// scale[k / 16] * (q[k] - 32); and the factors d[n / 256] (f16 values), sc[n / 16] (i8 bits).
void unpack_row_q6_k(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* d, uint8_t* sc);
// One Q3_K row as 3-bit codes (the int3-g16-k kernels hold it losslessly): its value v in
// [-4, 3] as the code q = v + 4 (0..7), its signed 6-bit scale (sc - 32) as the i8 sc, its
// f16 d as d, so that dequantize_row gives exactly scale[k / 16] * (q[k] - 4), scale = d x sc.
void unpack_row_q3_k(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* d, uint8_t* sc);
// One IQ4_NL row (n % 32 == 0) / IQ4_XS row (n % 256 == 0) as its 4-bit codes q[n] (indices
// into kIq4nlTable, kernels/int4_groups.h) and a scale per 32, scale[n / 32] (IQ4_NL: the f16 d;
// IQ4_XS: d x (ls - 32), an exact f32 product), so that dequantize_row gives exactly
// scale[k / 32] * kIq4nlTable[q[k]]: the int4-g32-nl kernels' lossless repack.
void unpack_row_iq4_nl(const uint8_t* src, int64_t n, uint8_t* q, float* scale);
void unpack_row_iq4_xs(const uint8_t* src, int64_t n, uint8_t* q, float* scale);

}  // namespace nanovllm
