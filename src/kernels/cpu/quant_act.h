// Per-row int8 quantization of activations for the quantized linear (qgemm.cc):
//   s = max|x| / 127,  q[k] = clamp(round_half_even(x[k] / s), -127, 127)   (s = 0: q = 0)
// AVX-512, AVX2 and scalar give identical bytes (same f32 multiply, same rounding).
#pragma once
#include <cstdint>

namespace nanovllm::cpu {

// q[0..K) for x[0..K); returns s. offset128: store q + 128 (as unsigned bytes) instead.
float quantize_row_s8(const float* x, int64_t K, uint8_t* q, bool offset128);

}  // namespace nanovllm::cpu
