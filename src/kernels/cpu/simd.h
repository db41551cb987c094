// Small SIMD helpers with AVX-512 / AVX2+FMA / scalar variants. Each kernel family compiles
// its hot loops three times via target attributes and picks one at run time (cpu_features),
// so the binary stays runnable on AVX2-only (and older) machines.
#pragma once
#include <immintrin.h>

#include <cstdint>

#define NV_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma,f16c")))
#define NV_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))

namespace nanovllm::cpu {

enum class Isa { Scalar, Avx2, Avx512 };
Isa active_isa();  // from cpu_features(), cached

// Software prefetch lead for bandwidth-bound weight streams (bf16 GEMV, small-M rows, quantized
// small M): on the Intel Xeon (Emerald Rapids) VM the hardware prefetcher alone reached 66% of a
// read pass (20 of 30 GB/s), with a 4 KiB lead 88% (26.5 GB/s); 2 KiB gave 84%, 8 KiB the same
// as 4 (docs/perf.md). Prefetches past a weight's end are never dereferenced: they do not fault.
constexpr int64_t kStreamPrefetchBytes = 4096;

// --- AVX-512: load 16 weights of any dtype as f32 ---------------------------------------
NV_TARGET_AVX512 inline __m512 load16_f32(const float* p) { return _mm512_loadu_ps(p); }
NV_TARGET_AVX512 inline __m512 load16_bf16(const uint16_t* p) {
  __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}
NV_TARGET_AVX512 inline __m512 load16_f16(const uint16_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// 2^x: x = n + f, f in [-0.5, 0.5], 2^f by a degree-7 polynomial (relative error < 1e-7),
// scaled by 2^n with scalef. Inputs below -126 flush towards 0 (callers mask lanes that must be
// exactly 0); large inputs give +inf.
NV_TARGET_AVX512 inline __m512 exp2_512(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-126.f));
  __m512 n = _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 f = _mm512_sub_ps(x, n);
  __m512 p = _mm512_set1_ps(1.5252733804e-5f);  // ln2^7 / 7!
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.5403530393e-4f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.3333558146e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.6181291076e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.5504108665e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.4022650696e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.9314718056e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.f));
  return _mm512_scalef_ps(p, n);
}

// --- AVX2: 8 at a time -------------------------------------------------------------------
NV_TARGET_AVX2 inline __m256 load8_f32(const float* p) { return _mm256_loadu_ps(p); }
NV_TARGET_AVX2 inline __m256 load8_bf16(const uint16_t* p) {
  __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}
NV_TARGET_AVX2 inline __m256 load8_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
NV_TARGET_AVX2 inline float hsum8(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  lo = _mm_add_ps(lo, hi);
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_shuffle_ps(lo, lo, 1));
  return _mm_cvtss_f32(lo);
}

// dst[i] = bf16(src[i]), round to nearest even (NaN stays NaN), AVX-512 when present.
void f32_to_bf16_row(const float* src, uint16_t* dst, int64_t n);

// Dot product and axpy over f32 vectors (attention inner loops).
float dot_f32(const float* a, const float* b, int n);
void axpy_f32(float alpha, const float* x, float* y, int n);  // y += alpha * x
void scale_f32(float alpha, float* y, int n);                 // y *= alpha

}  // namespace nanovllm::cpu
