// The int8 KV cache (--kv-cache-dtype int8): symmetric quantization per token and KV head.
//
// A layer's K (or V) cache is a byte tensor (DType::U8, the raw-bytes type quantized weights also
// use; named kKvCacheInt8 here) [num_slots, Hkv, D + 4]: per slot and KV head, D int8 values q
// and then that row's f32 scale s (4 bytes, native byte order), so x ~= q * s with
//   s = max|x| / 127,  q = round-to-nearest-even(x * (127 / max|x|)) clamped to [-127, 127]
// (an all-zero row: s = 0, q = 0). Non-finite K/V give unspecified (but memory-safe) values.
//
// Why the scale sits at the end of its row rather than in a separate [num_slots, Hkv] array:
// the ops keep their signatures (one K and one V tensor per layer), a key's slot row
// ([Hkv, D + 4], contiguous) is still one sequential run for the decode kernels, and the scale
// arrives with the values it scales. Why f32 and not f16 scales: 2 bytes more per row (D = 128:
// 132 vs 130 bytes, 1.5%) buy an exact scale, and the row stays 4-byte aligned.
//
// Bytes per token and head: D + 4 against 2 D for bf16 -- 1.94x the blocks for D = 128, 1.88x
// for D = 64 (KVCache::block_bytes counts the scales).
//
// The arithmetic is plain IEEE f32 (max, one division, one multiply, round to nearest even), so
// every ISA's store_kv writes the same bytes.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "util/dtype.h"

namespace nanovllm {

constexpr int kKvInt8ScaleBytes = 4;
// The element type of an int8 KV cache tensor (and ResolvedConfig::kv_cache_dtype for "int8").
constexpr DType kKvCacheInt8 = DType::U8;

// Elements of one (slot, head) row of a KV cache of type `dt` for head_dim D.
inline int64_t kv_cache_row_elems(DType dt, int64_t D) {
  return dt == kKvCacheInt8 ? D + kKvInt8ScaleBytes : D;
}

// "int8" for kKvCacheInt8, else the dtype's name (messages).
inline const char* kv_cache_dtype_name(DType dt) {
  return dt == kKvCacheInt8 ? "int8" : dtype_name(dt);
}

// The scale of an int8 row (the 4 bytes after its D values).
inline float kv_int8_scale(const int8_t* row, int D) {
  float s;
  std::memcpy(&s, row + D, sizeof s);
  return s;
}

// The reference quantization of one row x[D] into dst[D + 4] (the CPU kernels' store_kv does
// exactly this arithmetic).
inline void quantize_kv_row(const float* x, int D, int8_t* dst) {
  float amax = 0.f;
  for (int d = 0; d < D; ++d) amax = std::fmax(amax, std::fabs(x[d]));
  const float inv = amax > 0.f ? 127.f / amax : 0.f;
  for (int d = 0; d < D; ++d) {
    float v = x[d] * inv;
    v = v > 127.f ? 127.f : v < -127.f ? -127.f : v;
    dst[d] = v == v ? int8_t(std::nearbyint(v)) : int8_t(0);  // NaN: 0
  }
  const float s = amax / 127.f;
  std::memcpy(dst + D, &s, sizeof s);
}

// Row x ~= q * s as f32 (per-key paths, tests).
inline void dequantize_kv_row(const int8_t* row, int D, float* out) {
  const float s = kv_int8_scale(row, D);
  for (int d = 0; d < D; ++d) out[d] = float(row[d]) * s;
}

}  // namespace nanovllm
