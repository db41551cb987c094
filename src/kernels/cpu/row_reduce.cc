// row_reduce.h: the scans, by ISA. Each vector scan finds a value or an index that the scalar
// loop's definition pins down exactly (a maximum is order-free; ties resolve by the lowest index
// in a second pass), so no result depends on the vector width.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/cpu/row_reduce.h"

#include <algorithm>
#include <bit>
#include <limits>

#include "kernels/cpu/simd.h"

namespace nanovllm::cpu {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float max_scalar(const float* x, int n) {
  float m = kNegInf;
  for (int i = 0; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

int first_equal_scalar(const float* x, int i, int n, float v) {
  for (; i < n; ++i)
    if (x[i] == v) return i;
  return n;
}

int first_not_below_scalar(const float* x, int i, int n, float t) {
  for (; i < n; ++i)
    if (!(x[i] < t)) return i;
  return n;
}

// maxps returns its second operand when the first is NaN: max(x, acc) skips NaN x.
NV_TARGET_AVX512 float max_avx512(const float* x, int n) {
  __m512 a0 = _mm512_set1_ps(kNegInf), a1 = a0;
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    a0 = _mm512_max_ps(_mm512_loadu_ps(x + i), a0);
    a1 = _mm512_max_ps(_mm512_loadu_ps(x + i + 16), a1);
  }
  float m = _mm512_reduce_max_ps(_mm512_max_ps(a0, a1));
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

NV_TARGET_AVX512 int first_equal_avx512(const float* x, int i, int n, float v) {
  const __m512 vv = _mm512_set1_ps(v);
  for (; i + 16 <= n; i += 16) {
    const __mmask16 k = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), vv, _CMP_EQ_OQ);
    if (k) return i + std::countr_zero(unsigned(k));
  }
  return first_equal_scalar(x, i, n, v);
}

NV_TARGET_AVX512 int first_not_below_avx512(const float* x, int i, int n, float t) {
  const __m512 vt = _mm512_set1_ps(t);
  for (; i + 16 <= n; i += 16) {
    const __mmask16 k = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), vt, _CMP_NLT_UQ);
    if (k) return i + std::countr_zero(unsigned(k));
  }
  return first_not_below_scalar(x, i, n, t);
}

NV_TARGET_AVX2 float max_avx2(const float* x, int n) {
  __m256 a0 = _mm256_set1_ps(kNegInf), a1 = a0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    a0 = _mm256_max_ps(_mm256_loadu_ps(x + i), a0);
    a1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), a1);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_max_ps(a0, a1));
  float m = kNegInf;
  for (float l : lanes) m = std::max(m, l);
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

NV_TARGET_AVX2 int first_equal_avx2(const float* x, int i, int n, float v) {
  const __m256 vv = _mm256_set1_ps(v);
  for (; i + 8 <= n; i += 8) {
    const int k = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vv, _CMP_EQ_OQ));
    if (k) return i + std::countr_zero(unsigned(k));
  }
  return first_equal_scalar(x, i, n, v);
}

NV_TARGET_AVX2 int first_not_below_avx2(const float* x, int i, int n, float t) {
  const __m256 vt = _mm256_set1_ps(t);
  for (; i + 8 <= n; i += 8) {
    const int k = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vt, _CMP_NLT_UQ));
    if (k) return i + std::countr_zero(unsigned(k));
  }
  return first_not_below_scalar(x, i, n, t);
}

int first_equal(const float* x, int i, int n, float v) {
  switch (active_isa()) {
    case Isa::Avx512: return first_equal_avx512(x, i, n, v);
    case Isa::Avx2: return first_equal_avx2(x, i, n, v);
    default: return first_equal_scalar(x, i, n, v);
  }
}

}  // namespace

float max_f32(const float* x, int n) {
  float m;
  switch (active_isa()) {
    case Isa::Avx512: m = max_avx512(x, n); break;
    case Isa::Avx2: m = max_avx2(x, n); break;
    default: return max_scalar(x, n);
  }
  // The vector maximum's value is exact; only a zero's sign depends on the order met: the
  // scalar loop keeps the first zero it meets.
  if (m == 0.f) m = x[first_equal(x, 0, n, 0.f)];
  return m;
}

int argmax_f32(const float* x, int n) {
  const float m = max_f32(x, n);
  if (!(m > kNegInf)) return 0;
  return first_equal(x, 0, n, m);
}

int first_equal_f32(const float* x, int n, float v) { return first_equal(x, 0, n, v); }

int first_not_below(const float* x, int i, int n, float t) {
  switch (active_isa()) {
    case Isa::Avx512: return first_not_below_avx512(x, i, n, t);
    case Isa::Avx2: return first_not_below_avx2(x, i, n, t);
    default: return first_not_below_scalar(x, i, n, t);
  }
}

}  // namespace nanovllm::cpu
