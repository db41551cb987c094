// GCC 12 warns falsely inside its own AVX-512 reduce intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/cpu/quant_act.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu/simd.h"

namespace nanovllm::cpu {

namespace {

float scalar_row(const float* x, int64_t K, uint8_t* q, bool offset128) {
  float amax = 0.f;
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::abs(x[k]));
  const float s = amax / 127.f, inv = s > 0.f ? 1.f / s : 0.f;
  const int off = offset128 ? 128 : 0;
  for (int64_t k = 0; k < K; ++k)
    q[k] = uint8_t(std::clamp(int(std::nearbyint(x[k] * inv)), -127, 127) + off);
  return s;
}

NV_TARGET_AVX512 float avx512_row(const float* x, int64_t K, uint8_t* q, bool offset128) {
  const int64_t kv = K / 16 * 16;
  __m512 mx = _mm512_setzero_ps();
  for (int64_t k = 0; k < kv; k += 16) mx = _mm512_max_ps(mx, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
  float amax = _mm512_reduce_max_ps(mx);
  for (int64_t k = kv; k < K; ++k) amax = std::max(amax, std::abs(x[k]));
  const float s = amax / 127.f, inv = s > 0.f ? 1.f / s : 0.f;
  const __m512 vinv = _mm512_set1_ps(inv);
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  const __m128i off = _mm_set1_epi8(offset128 ? char(0x80) : 0);
  for (int64_t k = 0; k < kv; k += 16) {
    // cvtps2dq rounds half to even (the default MXCSR mode), as std::nearbyint does.
    __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + k), vinv));
    v = _mm512_min_epi32(_mm512_max_epi32(v, lo), hi);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + k), _mm_xor_si128(_mm512_cvtepi32_epi8(v), off));
  }
  const int o = offset128 ? 128 : 0;
  for (int64_t k = kv; k < K; ++k)
    q[k] = uint8_t(std::clamp(int(std::nearbyint(x[k] * inv)), -127, 127) + o);
  return s;
}

NV_TARGET_AVX2 float avx2_row(const float* x, int64_t K, uint8_t* q, bool offset128) {
  const int64_t kv = K / 8 * 8;
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 mx = _mm256_setzero_ps();
  for (int64_t k = 0; k < kv; k += 8) mx = _mm256_max_ps(mx, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mx);
  float amax = 0.f;
  for (float l : lanes) amax = std::max(amax, l);
  for (int64_t k = kv; k < K; ++k) amax = std::max(amax, std::abs(x[k]));
  const float s = amax / 127.f, inv = s > 0.f ? 1.f / s : 0.f;
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  const int o = offset128 ? 128 : 0;
  alignas(32) int32_t vals[8];
  for (int64_t k = 0; k < kv; k += 8) {
    __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + k), vinv));
    _mm256_store_si256(reinterpret_cast<__m256i*>(vals), _mm256_min_epi32(_mm256_max_epi32(v, lo), hi));
    for (int i = 0; i < 8; ++i) q[k + i] = uint8_t(vals[i] + o);
  }
  for (int64_t k = kv; k < K; ++k)
    q[k] = uint8_t(std::clamp(int(std::nearbyint(x[k] * inv)), -127, 127) + o);
  return s;
}

}  // namespace

float quantize_row_s8(const float* x, int64_t K, uint8_t* q, bool offset128) {
  switch (active_isa()) {
    case Isa::Avx512: return avx512_row(x, K, q, offset128);
    case Isa::Avx2: return avx2_row(x, K, q, offset128);
    default: return scalar_row(x, K, q, offset128);
  }
}

}  // namespace nanovllm::cpu
