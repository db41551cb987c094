// AVX512-VNNI quantized-linear kernels (qgemm_kernels.h): vpdpbusd multiplies 64 unsigned by
// 64 signed bytes and adds each 4 products into a 32-bit lane.
//   int8: unsigned = activations + 128, signed = weights; the kernel subtracts 128 * row_sum.
//   int4: unsigned = weight nibbles (0..15), signed = activations; one vector covers 4 k of
//         each of a superblock's 16 groups, so lane j ends with group j's dot product.
// Small M (decode) keeps several independent accumulators per row so the 5-cycle vpdpbusd
// latency does not bound a bandwidth-bound stream; each weight byte is loaded once per call
// of up to kQMaxRows activation rows.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "kernels/cpu/qgemm_kernels.h"

#define NV_TARGET_VNNI512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

namespace nanovllm::cpu {

namespace {

// Independent int32 accumulators per activation row: enough chains in flight for small M.
template <int MB>
constexpr int kChains = MB == 1 ? 4 : MB <= 3 ? 2 : 1;

template <int MB>
NV_TARGET_VNNI512 void int8_rows(const QWeightView& w, const QActs& a, int64_t n0, int64_t n1,
                                 float* out, int64_t ldo) {
  constexpr int C = kChains<MB>;
  const int64_t Kp = w.Kp;
  const float* scales = w.scales;
  const int32_t* sums = w.row_sums;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.data + n * w.row_bytes;
    __m512i acc[MB][C];
    for (int m = 0; m < MB; ++m)
      for (int c = 0; c < C; ++c) acc[m][c] = _mm512_setzero_si512();
    int64_t k = 0;
    for (; k + 64 * C <= Kp; k += 64 * C)
      for (int c = 0; c < C; ++c) {
        const __m512i wv = _mm512_loadu_si512(row + k + 64 * c);
        for (int m = 0; m < MB; ++m)
          acc[m][c] = _mm512_dpbusd_epi32(acc[m][c], _mm512_loadu_si512(a.x + m * Kp + k + 64 * c), wv);
      }
    for (; k < Kp; k += 64) {
      const __m512i wv = _mm512_loadu_si512(row + k);
      for (int m = 0; m < MB; ++m)
        acc[m][0] = _mm512_dpbusd_epi32(acc[m][0], _mm512_loadu_si512(a.x + m * Kp + k), wv);
    }
    const int32_t corr = 128 * sums[n];
    for (int m = 0; m < MB; ++m) {
      __m512i s = acc[m][0];
      for (int c = 1; c < C; ++c) s = _mm512_add_epi32(s, acc[m][c]);
      out[m * ldo + n] = a.sx[m] * scales[n] * float(_mm512_reduce_add_epi32(s) - corr);
    }
  }
}

template <int MB, int G, bool ZP>
NV_TARGET_VNNI512 void int4_rows(const QWeightView& w, const QActs& a, int64_t n0, int64_t n1,
                                 float* out, int64_t ldo) {
  constexpr int kLines = G / 8;               // 64-byte lines of packed q per superblock
  constexpr int kRec = 8 * G + 32 + (ZP ? 32 : 0);
  constexpr int C = kChains<MB>;
  const int64_t Kp = w.Kp, nsb = Kp / (16 * G), ng = Kp / G;
  const __m512i lo4 = _mm512_set1_epi8(0x0F);
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.data + n * w.row_bytes;
    __m512 facc[MB];
    for (int m = 0; m < MB; ++m) facc[m] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* r = row + s * kRec;
      const uint8_t* xs = a.x + s * 16 * G;
      __m512i acc[MB][C];
      for (int m = 0; m < MB; ++m)
        for (int c = 0; c < C; ++c) acc[m][c] = _mm512_setzero_si512();
      for (int t = 0; t < kLines; ++t) {
        const __m512i v = _mm512_loadu_si512(r + 64 * t);
        const __m512i vlo = _mm512_and_si512(v, lo4);
        const __m512i vhi = _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4);
        const int ca = (2 * t) % C, cb = (2 * t + 1) % C;
        for (int m = 0; m < MB; ++m) {
          const uint8_t* xm = xs + m * Kp + 128 * t;
          acc[m][ca] = _mm512_dpbusd_epi32(acc[m][ca], vlo, _mm512_loadu_si512(xm));
          acc[m][cb] = _mm512_dpbusd_epi32(acc[m][cb], vhi, _mm512_loadu_si512(xm + 64));
        }
      }
      const __m512 sc = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 8 * G)));
      __m512 mn = _mm512_setzero_ps();
      if constexpr (ZP) mn = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 8 * G + 32)));
      for (int m = 0; m < MB; ++m) {
        __m512i d = acc[m][0];
        for (int c = 1; c < C; ++c) d = _mm512_add_epi32(d, acc[m][c]);
        if constexpr (!ZP) d = _mm512_sub_epi32(d, _mm512_loadu_si512(a.gsum8 + m * ng + s * 16));
        facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, facc[m]);
        if constexpr (ZP) facc[m] = _mm512_fmadd_ps(_mm512_loadu_ps(a.gsumf + m * ng + s * 16), mn, facc[m]);
      }
    }
    for (int m = 0; m < MB; ++m) out[m * ldo + n] = a.sx[m] * _mm512_reduce_add_ps(facc[m]);
  }
}

template <template <int> class F>
QKernel by_rows(int M) {
  switch (M) {
    case 1: return F<1>::run;
    case 2: return F<2>::run;
    case 3: return F<3>::run;
    case 4: return F<4>::run;
    case 5: return F<5>::run;
    case 6: return F<6>::run;
    case 7: return F<7>::run;
    default: return F<8>::run;
  }
}

// Kernel entry points with the qgemm_kernels.h signature (M is a template parameter inside).
template <int MB>
struct Int8K {
  static void run(const QWeightView& w, const QActs& a, int, int64_t n0, int64_t n1,
                  float* out, int64_t ldo) {
    int8_rows<MB>(w, a, n0, n1, out, ldo);
  }
};
template <int G, bool ZP>
struct Int4K {
  template <int MB>
  struct R {
    static void run(const QWeightView& w, const QActs& a, int, int64_t n0, int64_t n1,
                    float* out, int64_t ldo) {
      int4_rows<MB, G, ZP>(w, a, n0, n1, out, ldo);
    }
  };
};

}  // namespace

void qrows_avx512_vnni(const QWeightView& w, const QActs& a, int M, int64_t n0, int64_t n1,
                       float* out, int64_t ldo) {
  QKernel k;
  if (w.kind == QuantKind::Int8) {
    k = by_rows<Int8K>(M);
  } else if (w.group == 32) {
    k = w.zero_points ? by_rows<Int4K<32, true>::R>(M) : by_rows<Int4K<32, false>::R>(M);
  } else {
    k = w.zero_points ? by_rows<Int4K<64, true>::R>(M) : by_rows<Int4K<64, false>::R>(M);
  }
  k(w, a, M, n0, n1, out, ldo);
}

}  // namespace nanovllm::cpu
