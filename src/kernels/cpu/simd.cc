// GCC 12's _mm512_reduce_add_ps triggers a false -Wmaybe-uninitialized inside its own header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/cpu/simd.h"

#include "util/cpu_features.h"
#include "util/dtype.h"

namespace nanovllm::cpu {

Isa active_isa() {
  static const Isa isa = [] {
    const auto& f = cpu_features();
    if (f.avx512f && f.avx512bw && f.avx512vl) return Isa::Avx512;
    if (f.avx2 && f.fma && f.f16c) return Isa::Avx2;
    return Isa::Scalar;
  }();
  return isa;
}

// Round to nearest even on the bit pattern: u + 0x7FFF + ((u >> 16) & 1), then the top half;
// NaNs are passed through with a quiet bit (as f32_to_bf16 does).
NV_TARGET_AVX512 static void f32_to_bf16_512(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m512i bias = _mm512_set1_epi32(0x7FFF), one = _mm512_set1_epi32(1);
  const __m512i absmask = _mm512_set1_epi32(0x7FFFFFFF), inf = _mm512_set1_epi32(0x7F800000);
  const __m512i quiet = _mm512_set1_epi32(0x00400000);
  for (; i + 16 <= n; i += 16) {
    const __m512i u = _mm512_castps_si512(_mm512_loadu_ps(src + i));
    __m512i r = _mm512_add_epi32(u, _mm512_add_epi32(bias, _mm512_and_si512(_mm512_srli_epi32(u, 16), one)));
    const __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(u, absmask), inf);
    r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(u, quiet));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), _mm512_cvtepi32_epi16(_mm512_srli_epi32(r, 16)));
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}
void f32_to_bf16_row(const float* src, uint16_t* dst, int64_t n) {
  if (active_isa() == Isa::Avx512) return f32_to_bf16_512(src, dst, n);
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

NV_TARGET_AVX512 static float dot_512(const float* a, const float* b, int n) {
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
  }
  for (; i + 16 <= n; i += 16)
    acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
  if (i < n) {
    __mmask16 m = __mmask16((1u << (n - i)) - 1);
    acc1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i), acc1);
  }
  return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
}
NV_TARGET_AVX2 static float dot_256(const float* a, const float* b, int n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
  }
  for (; i + 8 <= n; i += 8)
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float s = hsum8(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}
float dot_f32(const float* a, const float* b, int n) {
  switch (active_isa()) {
    case Isa::Avx512: return dot_512(a, b, n);
    case Isa::Avx2: return dot_256(a, b, n);
    default: {
      float s = 0;
      for (int i = 0; i < n; ++i) s += a[i] * b[i];
      return s;
    }
  }
}

NV_TARGET_AVX512 static void axpy_512(float alpha, const float* x, float* y, int n) {
  __m512 a = _mm512_set1_ps(alpha);
  int i = 0;
  for (; i + 16 <= n; i += 16)
    _mm512_storeu_ps(y + i, _mm512_fmadd_ps(a, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
}
NV_TARGET_AVX2 static void axpy_256(float alpha, const float* x, float* y, int n) {
  __m256 a = _mm256_set1_ps(alpha);
  int i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(y + i, _mm256_fmadd_ps(a, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
  for (; i < n; ++i) y[i] += alpha * x[i];
}
void axpy_f32(float alpha, const float* x, float* y, int n) {
  switch (active_isa()) {
    case Isa::Avx512: axpy_512(alpha, x, y, n); return;
    case Isa::Avx2: axpy_256(alpha, x, y, n); return;
    default:
      for (int i = 0; i < n; ++i) y[i] += alpha * x[i];
  }
}
void scale_f32(float alpha, float* y, int n) {
  for (int i = 0; i < n; ++i) y[i] *= alpha;
}

}  // namespace nanovllm::cpu
