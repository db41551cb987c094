// Element types and scalar conversions (bf16/f16 <-> f32), header-only so kernels inline them.
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace nanovllm {

// U8: raw bytes (quantized weight blobs, kernels/quantized.h).
enum class DType : uint8_t { F32, F16, BF16, I32, I64, U8 };
enum class Device : uint8_t { CPU, CUDA };

inline size_t dtype_size(DType d) {
  switch (d) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::BF16: return 2;
    case DType::I32: return 4;
    case DType::I64: return 8;
    case DType::U8: return 1;
  }
  return 0;
}
const char* dtype_name(DType d);
// Parses "F32"/"float32", "BF16"/"bfloat16", "F16"/"float16"/"half", "I32", "I64", "U8"; throws
// otherwise.
DType parse_dtype(const std::string& s);
const char* device_name(Device d);

inline float bf16_to_f32(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Round-to-nearest-even, NaN preserved (same as PyTorch's conversion).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);

}  // namespace nanovllm
