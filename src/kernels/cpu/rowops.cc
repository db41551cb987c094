// GCC 12 warns falsely inside its own AVX-512 reduce intrinsics.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/cpu/rowops.h"

#include <cmath>

#include "kernels/cpu/simd.h"

namespace nanovllm::cpu {

namespace {

NV_TARGET_AVX512 void rms_row_512(const float* x, const float* w, float eps, float* out, int64_t H) {
  __m512d a0 = _mm512_setzero_pd(), a1 = a0;
  int64_t i = 0;
  for (; i + 16 <= H; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
    const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
    a0 = _mm512_fmadd_pd(lo, lo, a0);
    a1 = _mm512_fmadd_pd(hi, hi, a1);
  }
  double ss = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
  for (int64_t j = i; j < H; ++j) ss += double(x[j]) * x[j];
  const float inv = float(1.0 / std::sqrt(ss / double(H) + double(eps)));
  const __m512 vi = _mm512_set1_ps(inv);
  for (i = 0; i + 16 <= H; i += 16)
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_mul_ps(_mm512_loadu_ps(x + i), vi), _mm512_loadu_ps(w + i)));
  for (; i < H; ++i) out[i] = x[i] * inv * w[i];
}

NV_TARGET_AVX512 void silu_mul_row_512(const float* g, const float* u, float* out, int64_t n) {
  const __m512 nlog2e = _mm512_set1_ps(-1.4426950408889634f), one = _mm512_set1_ps(1.f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(g + i);
    const __m512 e = exp2_512(_mm512_mul_ps(v, nlog2e));  // e^-v (+inf for v << 0: silu -> 0)
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_div_ps(v, _mm512_add_ps(one, e)), _mm512_loadu_ps(u + i)));
  }
  for (; i < n; ++i) out[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
}

NV_TARGET_AVX512 void rope_row_512(float* v, const float* c, const float* s, int half) {
  int i = 0;
  for (; i + 16 <= half; i += 16) {
    const __m512 x1 = _mm512_loadu_ps(v + i), x2 = _mm512_loadu_ps(v + half + i);
    const __m512 cv = _mm512_loadu_ps(c + i), sv = _mm512_loadu_ps(s + i);
    _mm512_storeu_ps(v + i, _mm512_fmsub_ps(x1, cv, _mm512_mul_ps(x2, sv)));
    _mm512_storeu_ps(v + half + i, _mm512_fmadd_ps(x2, cv, _mm512_mul_ps(x1, sv)));
  }
  for (; i < half; ++i) {
    const float x1 = v[i], x2 = v[i + half];
    v[i] = x1 * c[i] - x2 * s[i];
    v[i + half] = x2 * c[i] + x1 * s[i];
  }
}

}  // namespace

void rms_row(const float* x, const float* w, float eps, float* out, int64_t H) {
  if (active_isa() == Isa::Avx512) return rms_row_512(x, w, eps, out, H);
  double ss = 0;
  for (int64_t i = 0; i < H; ++i) ss += double(x[i]) * x[i];
  const float inv = float(1.0 / std::sqrt(ss / double(H) + double(eps)));
  for (int64_t i = 0; i < H; ++i) out[i] = x[i] * inv * w[i];
}

void silu_mul_row(const float* g, const float* u, float* out, int64_t n) {
  if (active_isa() == Isa::Avx512) return silu_mul_row_512(g, u, out, n);
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.f + std::exp(-g[i])) * u[i];
}

void rope_row(float* v, const float* c, const float* s, int half) {
  if (active_isa() == Isa::Avx512) return rope_row_512(v, c, s, half);
  for (int i = 0; i < half; ++i) {
    const float x1 = v[i], x2 = v[i + half];
    v[i] = x1 * c[i] - x2 * s[i];
    v[i + half] = x2 * c[i] + x1 * s[i];
  }
}

}  // namespace nanovllm::cpu
