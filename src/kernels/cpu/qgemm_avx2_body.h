// The AVX2 quantized-linear kernels, compiled twice (qgemm_avx2.cc without and
// qgemm_avxvnni.cc with AVX-VNNI, each under its own `#pragma GCC target`) so the plain AVX2
// build can never contain a VNNI instruction. Include only from those two files, after
// defining NV_QVNNI (0 / 1) and NV_QENTRY (the entry point's name).
//
// 256-bit vectors: a 64-byte int4 line is two halves, groups 0-7 and 8-15 of the superblock.
// Without VNNI the u8 x s8 products go through pmaddubsw (pairs summed to 16 bits) and pmaddwd
// (to 32 bits). That saturates only beyond 2 * 255 * 127, so int8 uses |w| x sign(x, w) (at most
// 2 * 127 * 127); int4 nibbles (at most 15) are safe as they are.
#include <immintrin.h>

#include "kernels/cpu/qgemm_kernels.h"

namespace nanovllm::cpu {
namespace {

inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if NV_QVNNI
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

inline int32_t hsum_epi32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

template <int MB>
void int8_rows(const QWeightView& w, const QActs& a, int64_t n0, int64_t n1, float* out,
               int64_t ldo) {
  const int64_t Kp = w.Kp;
  const float* scales = w.scales;
  const int32_t* sums = w.row_sums;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.data + n * w.row_bytes;
    __m256i acc[MB][2];
    for (int m = 0; m < MB; ++m) acc[m][0] = acc[m][1] = _mm256_setzero_si256();
    for (int64_t k = 0; k < Kp; k += 32) {
      const __m256i wv = load256(row + k);
#if !NV_QVNNI
      const __m256i aw = _mm256_sign_epi8(wv, wv);
#endif
      const int c = int(k / 32) & 1;
      for (int m = 0; m < MB; ++m) {
        const __m256i xv = load256(a.x + m * Kp + k);
#if NV_QVNNI
        acc[m][c] = dot_u8s8(acc[m][c], xv, wv);  // x + 128 (u8) x w (s8)
#else
        acc[m][c] = dot_u8s8(acc[m][c], aw, _mm256_sign_epi8(xv, wv));
#endif
      }
    }
    const int32_t corr = a.offset128 ? 128 * sums[n] : 0;
    for (int m = 0; m < MB; ++m)
      out[m * ldo + n] = a.sx[m] * scales[n] *
                         float(hsum_epi32(_mm256_add_epi32(acc[m][0], acc[m][1])) - corr);
  }
}

template <int MB, int G, bool ZP>
void int4_rows(const QWeightView& w, const QActs& a, int64_t n0, int64_t n1, float* out,
               int64_t ldo) {
  constexpr int kLines = G / 8, kRec = 8 * G + 32 + (ZP ? 32 : 0);
  const int64_t Kp = w.Kp, nsb = Kp / (16 * G), ng = Kp / G;
  const __m256i lo4 = _mm256_set1_epi8(0x0F);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.data + n * w.row_bytes;
    __m256 facc[MB][2];
    for (int m = 0; m < MB; ++m) facc[m][0] = facc[m][1] = _mm256_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* r = row + s * kRec;
      const uint8_t* xs = a.x + s * 16 * G;
      for (int h = 0; h < 2; ++h) {  // groups 8h .. 8h + 7
        __m256i acc[MB];
        for (int m = 0; m < MB; ++m) acc[m] = _mm256_setzero_si256();
        for (int t = 0; t < kLines; ++t) {
          const __m256i v = load256(r + 64 * t + 32 * h);
          const __m256i vlo = _mm256_and_si256(v, lo4);
          const __m256i vhi = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
          for (int m = 0; m < MB; ++m) {
            const uint8_t* xm = xs + m * Kp + 128 * t + 32 * h;
            acc[m] = dot_u8s8(acc[m], vlo, load256(xm));
            acc[m] = dot_u8s8(acc[m], vhi, load256(xm + 64));
          }
        }
        const __m256 sc = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 8 * G + 16 * h)));
        __m256 mn = _mm256_setzero_ps();
        if constexpr (ZP) mn = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 8 * G + 32 + 16 * h)));
        for (int m = 0; m < MB; ++m) {
          __m256i d = acc[m];
          const int64_t gi = m * ng + s * 16 + 8 * h;
          if constexpr (!ZP) d = _mm256_sub_epi32(d, load256(a.gsum8 + gi));
          facc[m][h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), sc, facc[m][h]);
          if constexpr (ZP) facc[m][h] = _mm256_fmadd_ps(_mm256_loadu_ps(a.gsumf + gi), mn, facc[m][h]);
        }
      }
    }
    for (int m = 0; m < MB; ++m) out[m * ldo + n] = a.sx[m] * hsum_ps(_mm256_add_ps(facc[m][0], facc[m][1]));
  }
}

template <int MB>
void rows_m(const QWeightView& w, const QActs& a, int64_t n0, int64_t n1, float* out,
            int64_t ldo) {
  if (w.kind == QuantKind::Int8) return int8_rows<MB>(w, a, n0, n1, out, ldo);
  if (w.group == 32)
    return w.zero_points ? int4_rows<MB, 32, true>(w, a, n0, n1, out, ldo)
                                : int4_rows<MB, 32, false>(w, a, n0, n1, out, ldo);
  return w.zero_points ? int4_rows<MB, 64, true>(w, a, n0, n1, out, ldo)
                              : int4_rows<MB, 64, false>(w, a, n0, n1, out, ldo);
}

}  // namespace

void NV_QENTRY(const QWeightView& w, const QActs& a, int M, int64_t n0, int64_t n1, float* out,
               int64_t ldo) {
  switch (M) {
    case 1: return rows_m<1>(w, a, n0, n1, out, ldo);
    case 2: return rows_m<2>(w, a, n0, n1, out, ldo);
    case 3: return rows_m<3>(w, a, n0, n1, out, ldo);
    case 4: return rows_m<4>(w, a, n0, n1, out, ldo);
    default:  // 5..8: two calls of up to 4 rows (16 ymm accumulators would spill)
      rows_m<4>(w, a, n0, n1, out, ldo);
      QActs rest = a;
      rest.x += 4 * a.Kp;
      rest.sx += 4;
      if (rest.gsum8) rest.gsum8 += 4 * (a.Kp / w.group);
      if (rest.gsumf) rest.gsumf += 4 * (a.Kp / w.group);
      return NV_QENTRY(w, rest, M - 4, n0, n1, out + 4 * ldo, ldo);
  }
}

}  // namespace nanovllm::cpu
