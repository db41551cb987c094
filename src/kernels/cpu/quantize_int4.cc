// Why vectorized: the search evaluates 7-13 candidate (scale, min) pairs per group, i.e. 7-13
// passes over every weight of the model; the first scalar version (24 candidates, libm rounding,
// software f16) took 47 s (symmetric) and 86 s (zero points) of CPU to load Qwen3-0.6B; this one
// 5.7 and 7.6 s.
#include "kernels/cpu/quantize_int4.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "kernels/cpu/simd.h"
#include "util/cpu_features.h"
#include "util/dtype.h"

namespace nanovllm::cpu {

namespace {

// Sums over a group for the least-squares refit: u = q - 8 (symmetric) or q (zero points).
struct Sums {
  double su = 0, suu = 0, sw = 0, suw = 0;
};

// The evaluations, scalar and AVX2 (+F16C). sse(): squared error with the f16-rounded (s, m).
struct ScalarEval {
  static uint16_t to_f16(float v) { return f32_to_f16(v); }
  static float from_f16(uint16_t h) { return f16_to_f32(h); }
  static int quant(float w, bool zp, float m, float inv) {
    return zp ? std::clamp(round_nearest((w - m) * inv), 0, 15)
              : std::clamp(round_nearest(w * inv), -8, 7) + 8;
  }
  static float sse(const float* w, int g, bool zp, float s, float m) {
    const float inv = s != 0.f ? 1.f / s : 0.f;
    float e = 0.f;
    for (int i = 0; i < g; ++i) {
      const int v = quant(w[i], zp, m, inv);
      const float d = w[i] - (zp ? s * float(v) + m : s * float(v - 8));
      e += d * d;
    }
    return e;
  }
  // min, max and the first weight of largest magnitude.
  static void range(const float* w, int g, float* lo, float* hi, float* ext) {
    *lo = *hi = w[0];
    *ext = 0.f;
    for (int i = 0; i < g; ++i) {
      if (std::abs(w[i]) > std::abs(*ext)) *ext = w[i];
      *lo = std::min(*lo, w[i]);
      *hi = std::max(*hi, w[i]);
    }
  }
  static void quantize(const float* w, int g, bool zp, float s, float m, uint8_t* q) {
    const float inv = s != 0.f ? 1.f / s : 0.f;
    for (int i = 0; i < g; ++i) q[i] = uint8_t(quant(w[i], zp, m, inv));
  }
  static Sums sums(const float* w, int g, bool zp, float s, float m) {
    const float inv = s != 0.f ? 1.f / s : 0.f;
    Sums r;
    for (int i = 0; i < g; ++i) {
      const double u = quant(w[i], zp, m, inv) - (zp ? 0 : 8);
      r.su += u, r.suu += u * u, r.sw += w[i], r.suw += u * w[i];
    }
    return r;
  }
};

struct Avx2Eval {
  NV_TARGET_AVX2 static uint16_t to_f16(float v) { return uint16_t(_cvtss_sh(v, 0)); }
  NV_TARGET_AVX2 static float from_f16(uint16_t h) { return _cvtsh_ss(h); }
  // Integers u (q - 8 for symmetric, q for zero points) of 8 weights, as floats.
  NV_TARGET_AVX2 static __m256 quant8(__m256 w, bool zp, __m256 m, __m256 inv) {
    const __m256 t = zp ? _mm256_mul_ps(_mm256_sub_ps(w, m), inv) : _mm256_mul_ps(w, inv);
    __m256i q = _mm256_cvtps_epi32(t);  // ties to even, as round_nearest
    q = zp ? _mm256_min_epi32(_mm256_max_epi32(q, _mm256_setzero_si256()), _mm256_set1_epi32(15))
           : _mm256_min_epi32(_mm256_max_epi32(q, _mm256_set1_epi32(-8)), _mm256_set1_epi32(7));
    return _mm256_cvtepi32_ps(q);
  }
  NV_TARGET_AVX2 static float sse(const float* w, int g, bool zp, float s, float m) {
    const __m256 vs = _mm256_set1_ps(s), vm = _mm256_set1_ps(m);
    const __m256 inv = _mm256_set1_ps(s != 0.f ? 1.f / s : 0.f);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < g; i += 8) {
      const __m256 wv = _mm256_loadu_ps(w + i);
      const __m256 u = quant8(wv, zp, vm, inv);
      const __m256 d = _mm256_sub_ps(wv, zp ? _mm256_fmadd_ps(u, vs, vm) : _mm256_mul_ps(u, vs));
      acc = _mm256_fmadd_ps(d, d, acc);
    }
    return hsum8(acc);
  }
  NV_TARGET_AVX2 static void range(const float* w, int g, float* lo, float* hi, float* ext) {
    const __m256 sign = _mm256_set1_ps(-0.f);
    __m256 vlo = _mm256_loadu_ps(w), vhi = vlo, vab = _mm256_setzero_ps();
    for (int i = 0; i < g; i += 8) {
      const __m256 v = _mm256_loadu_ps(w + i);
      vlo = _mm256_min_ps(vlo, v);
      vhi = _mm256_max_ps(vhi, v);
      vab = _mm256_max_ps(vab, _mm256_andnot_ps(sign, v));
    }
    alignas(32) float a[8], b[8], c[8];
    _mm256_store_ps(a, vlo), _mm256_store_ps(b, vhi), _mm256_store_ps(c, vab);
    float amax = 0.f;
    *lo = a[0], *hi = b[0];
    for (int i = 0; i < 8; ++i) *lo = std::min(*lo, a[i]), *hi = std::max(*hi, b[i]), amax = std::max(amax, c[i]);
    *ext = 0.f;  // the first weight of that magnitude (its sign decides the symmetric scale)
    for (int i = 0; i < g; ++i)
      if (std::abs(w[i]) == amax) {
        *ext = w[i];
        break;
      }
  }
  NV_TARGET_AVX2 static void quantize(const float* w, int g, bool zp, float s, float m, uint8_t* q) {
    const __m256 vm = _mm256_set1_ps(m), inv = _mm256_set1_ps(s != 0.f ? 1.f / s : 0.f);
    const __m256 off = _mm256_set1_ps(zp ? 0.f : 8.f);
    alignas(32) int32_t v[8];
    for (int i = 0; i < g; i += 8) {
      _mm256_store_si256(reinterpret_cast<__m256i*>(v), _mm256_cvtps_epi32(_mm256_add_ps(
                                                            quant8(_mm256_loadu_ps(w + i), zp, vm, inv), off)));
      for (int j = 0; j < 8; ++j) q[i + j] = uint8_t(v[j]);
    }
  }
  NV_TARGET_AVX2 static Sums sums(const float* w, int g, bool zp, float s, float m) {
    const __m256 vm = _mm256_set1_ps(m), inv = _mm256_set1_ps(s != 0.f ? 1.f / s : 0.f);
    __m256 su = _mm256_setzero_ps(), suu = su, sw = su, suw = su;
    for (int i = 0; i < g; i += 8) {
      const __m256 wv = _mm256_loadu_ps(w + i), u = quant8(wv, zp, vm, inv);
      su = _mm256_add_ps(su, u);
      suu = _mm256_fmadd_ps(u, u, suu);
      sw = _mm256_add_ps(sw, wv);
      suw = _mm256_fmadd_ps(u, wv, suw);
    }
    return Sums{hsum8(su), hsum8(suu), hsum8(sw), hsum8(suw)};
  }
};

// Inlined into one function per evaluation set, so the AVX2 one runs entirely with AVX2 code
// (no lambdas: their bodies would not get the target and could not inline it).
template <class E>
__attribute__((always_inline)) inline void search(const float* w, int g, bool zp, uint8_t* q,
                                                  uint16_t* scale, uint16_t* min) {
  float lo, hi, ext;
  E::range(w, g, &lo, &hi, &ext);
  // Candidates (s, m) before f16 rounding: the range clipped by 0, 4, ..., 20%.
  float cs[13], cm[13];
  int n = 0;
  for (int c = 0; c <= 5; ++c) {
    const float f = 1.f - 0.04f * float(c);
    if (!zp) {
      cs[n] = ext * f / -8.f, cm[n++] = 0.f;
    } else {
      cs[n] = (hi - lo) * f / 15.f, cm[n++] = lo;                   // clip the top
      cs[n] = (hi - lo) * f / 15.f, cm[n++] = hi - (hi - lo) * f;  // clip the bottom
    }
  }
  float best = INFINITY;
  uint16_t bs = 0, bm = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < n; ++i) {
      const uint16_t s16 = E::to_f16(cs[i]), m16 = zp ? E::to_f16(cm[i]) : 0;
      const float e = E::sse(w, g, zp, E::from_f16(s16), zp ? E::from_f16(m16) : 0.f);
      if (e < best) best = e, bs = s16, bm = m16;
    }
    if (pass == 1) break;
    // Least-squares refit for the chosen integers: min over (s[, m]) of sum (w - s u - m)^2.
    const Sums r = E::sums(w, g, zp, E::from_f16(bs), zp ? E::from_f16(bm) : 0.f);
    n = 0;
    if (!zp && r.suu > 0) {
      cs[n] = float(r.suw / r.suu), cm[n++] = 0.f;
    } else if (zp) {
      const double det = g * r.suu - r.su * r.su;
      if (det > 0)
        cs[n] = float((g * r.suw - r.su * r.sw) / det), cm[n++] = float((r.suu * r.sw - r.su * r.suw) / det);
    }
  }
  E::quantize(w, g, zp, E::from_f16(bs), zp ? E::from_f16(bm) : 0.f, q);
  *scale = bs;
  if (min) *min = bm;
}

NV_TARGET_AVX2 void search_avx2(const float* w, int g, bool zp, uint8_t* q, uint16_t* scale,
                                uint16_t* min) {
  search<Avx2Eval>(w, g, zp, q, scale, min);
}
void search_scalar(const float* w, int g, bool zp, uint8_t* q, uint16_t* scale, uint16_t* min) {
  search<ScalarEval>(w, g, zp, q, scale, min);
}

}  // namespace

void quantize_group_int4(const float* w, int g, bool zp, uint8_t* q, uint16_t* scale,
                         uint16_t* min) {
  const CpuFeatures& f = cpu_features();
  if (f.avx2 && f.fma && f.f16c && g % 8 == 0) return search_avx2(w, g, zp, q, scale, min);
  search_scalar(w, g, zp, q, scale, min);
}

}  // namespace nanovllm::cpu
