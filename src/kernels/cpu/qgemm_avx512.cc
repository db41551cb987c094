// AVX512-VNNI quantized-linear kernels (qgemm_kernels.h). vpdpbusd multiplies 64 unsigned by 64
// signed bytes and adds each 4 products into a 32-bit lane. A weight vector holds 4 k of the 16
// rows of a block; the 4 activation bytes of those k are broadcast, so lane r accumulates row r.
//   int8: unsigned = activations + 128 (broadcast), signed = weights; minus 128 * row_sum.
//   int8-g32: as int8, minus 128 * group sum and scaled per group of 32 k.
//   int4: unsigned = weight nibbles, signed = activations (broadcast); per group the integer
//         dot is scaled in f32 (minus 8 * group sum first for the symmetric form).
//   int5 / int6 / int2: as int4 with 5- / 6- / 2-bit codes (int6: groups of 16, minus 32 * group
//         sum; int2: groups of 16 with a min).
//   int3: 3-bit codes in groups of 16 (minus 4 * group sum), times the group's i8 sub-scale by
//         vpdpwssd into a per-superblock integer sum, times the superblock's d in f32.
// Small M (decode) splits k over several accumulators so the 5-cycle vpdpbusd latency does not
// bound a bandwidth-bound stream; each weight byte is loaded once per call of up to kQMaxRows
// activation rows.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/qgemm_kernels.h"
#include "kernels/cpu/simd.h"

#define NV_TARGET_VNNI512 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")))

namespace nanovllm::cpu {

namespace {

// Independent int32 accumulators per activation row: enough chains in flight for small M.
template <int MB>
constexpr int kChains = MB == 1 ? 4 : MB <= 3 ? 2 : 1;

NV_TARGET_VNNI512 inline __m512i bcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// out[m * ldo + 16 b + r] for the rows of block b that exist (n < N).
NV_TARGET_VNNI512 inline void store_block(float* dst, __m512 v, int64_t b, int64_t N) {
  const int64_t left = N - 16 * b;
  if (left >= 16) _mm512_storeu_ps(dst, v);
  else _mm512_mask_storeu_ps(dst, __mmask16((1u << left) - 1), v);
}

// Small M streams the weights once (bandwidth-bound): blocks are contiguous, so the stream is
// also prefetched kStreamPrefetchBytes ahead in software (simd.h says why). Larger M reuses a
// tile from L1/L2 and is compute-bound: no prefetch.
template <int MB>
constexpr bool kPrefetch = MB <= 4;

// The `lines` 64-byte lines from p, requested kStreamPrefetchBytes ahead of them (the lines a
// record's or superblock's stream prefetch does not walk: parameters, tables, whole records).
NV_TARGET_VNNI512 inline void prefetch_ahead(const uint8_t* p, int64_t lines) {
  for (int64_t l = 0; l < lines; ++l)
    _mm_prefetch(reinterpret_cast<const char*>(p + 64 * l + kStreamPrefetchBytes), _MM_HINT_T0);
}

template <int MB>
NV_TARGET_VNNI512 void int8_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1,
                                 float* out, int64_t ldo) {
  constexpr int C = kChains<MB>;
  const int64_t Kp = w.Kp, steps = Kp / 4;
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    __m512i acc[MB][C];
    for (int m = 0; m < MB; ++m)
      for (int c = 0; c < C; ++c) acc[m][c] = _mm512_setzero_si512();
    int64_t i = 0;
    for (; i + C <= steps; i += C)
      for (int c = 0; c < C; ++c) {
        if constexpr (kPrefetch<MB>)
          _mm_prefetch(reinterpret_cast<const char*>(blk + (i + c) * 64 + kStreamPrefetchBytes), _MM_HINT_T0);
        const __m512i wv = _mm512_loadu_si512(blk + (i + c) * 64);
        for (int m = 0; m < MB; ++m)
          acc[m][c] = _mm512_dpbusd_epi32(acc[m][c], bcast4(a.x + m * Kp + 4 * (i + c)), wv);
      }
    for (; i < steps; ++i) {
      const __m512i wv = _mm512_loadu_si512(blk + i * 64);
      for (int m = 0; m < MB; ++m)
        acc[m][0] = _mm512_dpbusd_epi32(acc[m][0], bcast4(a.x + m * Kp + 4 * i), wv);
    }
    const __m512i corr = _mm512_slli_epi32(_mm512_loadu_si512(w.row_sums + 16 * b), 7);  // 128 x
    const __m512 sc = _mm512_loadu_ps(w.scales + 16 * b);
    for (int m = 0; m < MB; ++m) {
      __m512i d = acc[m][0];
      for (int c = 1; c < C; ++c) d = _mm512_add_epi32(d, acc[m][c]);
      const __m512 y = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(d, corr)),
                                     _mm512_mul_ps(sc, _mm512_set1_ps(a.sx[m])));
      store_block(out + m * ldo + 16 * b, y, b, w.N);
    }
  }
}

// int8-g32: per group record, 8 vectors of q (4 k x 16 rows each), then 16 f16 scales and 16
// i16 group sums. The group's integer dot (x8 + 128 against q, minus 128 x the group sum) is
// scaled by its f16 scale into an f32 accumulator per row.
template <int MB>
constexpr int kChains8g = MB == 1 ? 2 : 1;

template <int MB>
NV_TARGET_VNNI512 void int8g_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1,
                                  float* out, int64_t ldo) {
  constexpr int G = 32, kVecs = G / 4, kRec = 16 * G + 64;
  constexpr int C = kChains8g<MB>;
  const int64_t Kp = w.Kp, ng = Kp / G;
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    __m512 facc[MB];
    for (int m = 0; m < MB; ++m) facc[m] = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < ng; ++gi) {
      const uint8_t* r = blk + gi * kRec;
      const uint8_t* xg = a.x + gi * G;
      __m512i acc[MB][C];
      for (int m = 0; m < MB; ++m)
        for (int c = 0; c < C; ++c) acc[m][c] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int t = 0; t < kVecs; ++t) {
        if constexpr (kPrefetch<MB>)
          _mm_prefetch(reinterpret_cast<const char*>(r + 64 * t + kStreamPrefetchBytes), _MM_HINT_T0);
        const __m512i wv = _mm512_loadu_si512(r + 64 * t);
        const int c = t % C;
        for (int m = 0; m < MB; ++m)
          acc[m][c] = _mm512_dpbusd_epi32(acc[m][c], bcast4(xg + m * Kp + 4 * t), wv);
      }
      if constexpr (kPrefetch<MB>)  // the scale / sum line of the record, as far ahead
        _mm_prefetch(reinterpret_cast<const char*>(r + 16 * G + kStreamPrefetchBytes), _MM_HINT_T0);
      const __m512 sc = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 16 * G)));
      const __m512i corr = _mm512_slli_epi32(
          _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 16 * G + 32))), 7);
      for (int m = 0; m < MB; ++m) {
        __m512i d = acc[m][0];
        for (int c = 1; c < C; ++c) d = _mm512_add_epi32(d, acc[m][c]);
        facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_sub_epi32(d, corr)), sc, facc[m]);
      }
    }
    for (int m = 0; m < MB; ++m)
      store_block(out + m * ldo + 16 * b, _mm512_mul_ps(facc[m], _mm512_set1_ps(a.sx[m])), b, w.N);
  }
}

// int4: the high nibbles are used in place (v & 0xF0 = 16 q): their products accumulate 16x in
// separate accumulators, shifted right by 4 (exact) per group. One op per 64 bytes less than
// shifting every vector, which matters for the ALU-heavy decode stream.
template <int MB>
constexpr int kChains4 = MB == 1 ? 2 : 1;  // per nibble half

// NL (int4-g32-nl): each nibble becomes its IQ4_NL table value + 128 (vpshufb, 1..241: the
// unsigned operand), the high nibbles shifted down first; minus 128 x the group's sum of x8
// (gsum8), then the group's f32 scale. The same integer dot as the scalar sum of value x x8.

template <int MB, int G, bool ZP, bool F32 = false, bool NL = false>
NV_TARGET_VNNI512 void int4_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1,
                                 float* out, int64_t ldo) {
  static_assert(!F32 || ZP, "f32 parameters come with zero points");
  static_assert(!NL || (!ZP && G == 32), "the IQ4 table layout is symmetric, group 32");
  constexpr int kLines = G / 8;  // 64-byte lines of packed nibbles per group record
  constexpr int kRec = NL ? 8 * G + 64 : F32 ? 8 * G + 128 : 8 * G + 32 + (ZP ? 32 : 0);
  constexpr int C = kChains4<MB>;
  const int64_t Kp = w.Kp, ng = Kp / G;
  const __m512i lo4 = _mm512_set1_epi8(0x0F), hi4 = _mm512_set1_epi8(char(0xF0));
  const __m512i lut = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlPlus128.data())));
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    __m512 facc[MB];
    for (int m = 0; m < MB; ++m) facc[m] = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < ng; ++gi) {
      const uint8_t* r = blk + gi * kRec;
      const uint8_t* xg = a.x + gi * G;
      __m512i lo[MB][C], hi[MB][C];
      for (int m = 0; m < MB; ++m)
        for (int c = 0; c < C; ++c) lo[m][c] = hi[m][c] = _mm512_setzero_si512();
#pragma GCC unroll 8
      for (int t = 0; t < kLines; ++t) {
        if constexpr (kPrefetch<MB>)
          _mm_prefetch(reinterpret_cast<const char*>(r + 64 * t + kStreamPrefetchBytes), _MM_HINT_T0);
        const __m512i v = _mm512_loadu_si512(r + 64 * t);
        __m512i vlo = _mm512_and_si512(v, lo4), vhi16;
        if constexpr (NL) {
          vlo = _mm512_shuffle_epi8(lut, vlo);
          vhi16 = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(v, 4), lo4));  // not 16x
        } else {
          vhi16 = _mm512_and_si512(v, hi4);
        }
        const int c = t % C;
        for (int m = 0; m < MB; ++m) {
          const uint8_t* xm = xg + m * Kp + 8 * t;
          lo[m][c] = _mm512_dpbusd_epi32(lo[m][c], vlo, bcast4(xm));
          hi[m][c] = _mm512_dpbusd_epi32(hi[m][c], vhi16, bcast4(xm + 4));
        }
      }
      if constexpr (kPrefetch<MB>) {  // the scale (and min) line(s) of the record, as far ahead
        _mm_prefetch(reinterpret_cast<const char*>(r + 8 * G + kStreamPrefetchBytes), _MM_HINT_T0);
        if constexpr (F32)
          _mm_prefetch(reinterpret_cast<const char*>(r + 8 * G + 64 + kStreamPrefetchBytes), _MM_HINT_T0);
      }
      __m512 sc, mn = _mm512_setzero_ps();
      if constexpr (NL) {
        sc = _mm512_loadu_ps(r + 8 * G);
      } else if constexpr (F32) {
        sc = _mm512_loadu_ps(r + 8 * G);
        mn = _mm512_loadu_ps(r + 8 * G + 64);
      } else {
        sc = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 8 * G)));
        if constexpr (ZP) mn = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 8 * G + 32)));
      }
      for (int m = 0; m < MB; ++m) {
        __m512i dl = lo[m][0], dh = hi[m][0];
        for (int c = 1; c < C; ++c) dl = _mm512_add_epi32(dl, lo[m][c]), dh = _mm512_add_epi32(dh, hi[m][c]);
        __m512i d = _mm512_add_epi32(dl, NL ? dh : _mm512_srai_epi32(dh, 4));
        if constexpr (!ZP) d = _mm512_sub_epi32(d, _mm512_set1_epi32(a.gsum8[m * ng + gi]));
        facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, facc[m]);
        if constexpr (ZP) facc[m] = _mm512_fmadd_ps(_mm512_set1_ps(a.gsumf[m * ng + gi]), mn, facc[m]);
      }
    }
    for (int m = 0; m < MB; ++m)
      store_block(out + m * ldo + 16 * b, _mm512_mul_ps(facc[m], _mm512_set1_ps(a.sx[m])), b, w.N);
  }
}

// int4-g32-zp-k (Q4_K's own parameters, kernels/quantized.h): per superblock of 8 groups the 16
// rows' f16 d and dmin, per group their u8 sc and m. A group's scale d x sc and min dmin x m
// are exact f32 products, and facc - gsum x (dmin x m) rounds as facc + gsum x (-(dmin x m)):
// the sums are int4_rows<MB, 32, true, true>'s on the same weights, bit for bit.
template <int MB>
NV_TARGET_VNNI512 void int4k_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1,
                                  float* out, int64_t ldo) {
  constexpr int G = 32, kLines = 4, SB = QuantScheme::kSuperblockBytes;
  constexpr int C = kChains4<MB>;
  const int64_t Kp = w.Kp, ng = Kp / G, nsb = Kp / 256;
  const __m512i lo4 = _mm512_set1_epi8(0x0F), hi4 = _mm512_set1_epi8(char(0xF0));
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    __m512 facc[MB];
    for (int m = 0; m < MB; ++m) facc[m] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* sb = blk + s * SB;
      // The group lines' prefetch runs kStreamPrefetchBytes ahead of them; these 5 lines (the
      // factors' length past the lines) close the gap it leaves at each superblock.
      if constexpr (kPrefetch<MB>)
        prefetch_ahead(sb + 2048, 5);
      const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 2304)));
      const __m512 dminv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 2336)));
      for (int j = 0; j < 8; ++j) {
        const int64_t gi = s * 8 + j;
        const uint8_t* r = sb + 256 * j;
        const uint8_t* xg = a.x + gi * G;
        __m512i lo[MB][C], hi[MB][C];
        for (int m = 0; m < MB; ++m)
          for (int c = 0; c < C; ++c) lo[m][c] = hi[m][c] = _mm512_setzero_si512();
#pragma GCC unroll 4
        for (int t = 0; t < kLines; ++t) {
          if constexpr (kPrefetch<MB>)
            _mm_prefetch(reinterpret_cast<const char*>(r + 64 * t + kStreamPrefetchBytes), _MM_HINT_T0);
          const __m512i v = _mm512_loadu_si512(r + 64 * t);
          const __m512i vlo = _mm512_and_si512(v, lo4), vhi16 = _mm512_and_si512(v, hi4);
          const int c = t % C;
          for (int m = 0; m < MB; ++m) {
            const uint8_t* xm = xg + m * Kp + 8 * t;
            lo[m][c] = _mm512_dpbusd_epi32(lo[m][c], vlo, bcast4(xm));
            hi[m][c] = _mm512_dpbusd_epi32(hi[m][c], vhi16, bcast4(xm + 4));
          }
        }
        const __m512 sc = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 2048 + 16 * j)))));
        const __m512 mn = _mm512_mul_ps(dminv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 2176 + 16 * j)))));
        for (int m = 0; m < MB; ++m) {
          __m512i dl = lo[m][0], dh = hi[m][0];
          for (int c = 1; c < C; ++c) dl = _mm512_add_epi32(dl, lo[m][c]), dh = _mm512_add_epi32(dh, hi[m][c]);
          const __m512i d = _mm512_add_epi32(dl, _mm512_srai_epi32(dh, 4));
          facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, facc[m]);
          facc[m] = _mm512_fnmadd_ps(_mm512_set1_ps(a.gsumf[m * ng + gi]), mn, facc[m]);
        }
      }
    }
    for (int m = 0; m < MB; ++m)
      store_block(out + m * ldo + 16 * b, _mm512_mul_ps(facc[m], _mm512_set1_ps(a.sx[m])), b, w.N);
  }
}

// int5-g32-zp-k (Q5_K's own form, kernels/quantized.h): int4k_rows's parameters, and codes of 5
// bits: each 4-k vector's nibbles (low: and; high: shift, and) get their fifth bit from the
// group's bit line, moved to bit 4 (a 16-bit shift by 4 - v, which never crosses a byte there)
// and merged by ternary logic. One accumulator per row takes the group's 8 vectors; the sums are
// qrows_scalar's, bit for bit.
template <int MB>
constexpr int kChains5 = MB == 1 ? 2 : 1;

template <int v>
NV_TARGET_VNNI512 inline __m512i bit4_of(__m512i h) {  // bit v of each byte of h, at bit 4
  if constexpr (v < 4) return _mm512_slli_epi16(h, 4 - v);
  else if constexpr (v > 4) return _mm512_srli_epi16(h, v - 4);
  else return h;
}

// Line t of a group record: the codes of vectors 2t (low nibbles) and 2t + 1 (high), fifth bits
// from h. t | (b & c) is ternary-logic function 0xF8.
template <int t>
NV_TARGET_VNNI512 inline void int5_line(const uint8_t* r, __m512i h, __m512i lo4, __m512i b4, __m512i* q) {
  const __m512i v = _mm512_loadu_si512(r + 64 * t);
  q[2 * t] = _mm512_ternarylogic_epi32(_mm512_and_si512(v, lo4), bit4_of<2 * t>(h), b4, 0xF8);
  q[2 * t + 1] =
      _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(v, 4), lo4), bit4_of<2 * t + 1>(h), b4, 0xF8);
}

// A group record's 8 vectors of 5-bit codes (k 4v .. 4v+3 of the 16 rows, v < 8).
NV_TARGET_VNNI512 inline void int5_group(const uint8_t* r, __m512i lo4, __m512i b4, __m512i* q) {
  const __m512i h = _mm512_loadu_si512(r + 256);
  int5_line<0>(r, h, lo4, b4, q);
  int5_line<1>(r, h, lo4, b4, q);
  int5_line<2>(r, h, lo4, b4, q);
  int5_line<3>(r, h, lo4, b4, q);
}

// The group's integer dot of its codes q with the 32 activation bytes at xm, over C chains.
template <int C>
NV_TARGET_VNNI512 inline __m512i int5_dot(const __m512i* q, const uint8_t* xm) {
  __m512i acc[C];
  for (int c = 0; c < C; ++c) acc[c] = _mm512_setzero_si512();
#pragma GCC unroll 8
  for (int v = 0; v < 8; ++v) acc[v % C] = _mm512_dpbusd_epi32(acc[v % C], q[v], bcast4(xm + 4 * v));
  __m512i d = acc[0];
  for (int c = 1; c < C; ++c) d = _mm512_add_epi32(d, acc[c]);
  return d;
}

template <int MB>
NV_TARGET_VNNI512 void int5k_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1,
                                  float* out, int64_t ldo) {
  constexpr int G = 32, SB = QuantScheme::kInt5SuperblockBytes;
  constexpr int C = kChains5<MB>;
  const int64_t Kp = w.Kp, ng = Kp / G, nsb = Kp / 256;
  const __m512i lo4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    __m512 facc[MB];
    for (int m = 0; m < MB; ++m) facc[m] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* sb = blk + s * SB;
      // The records' prefetch runs kStreamPrefetchBytes ahead of them; these 5 lines (the
      // factors' length past the records) close the gap it leaves at each superblock.
      if constexpr (kPrefetch<MB>)
        prefetch_ahead(sb + 2560, 5);
      const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 2816)));
      const __m512 dminv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 2848)));
      for (int j = 0; j < 8; ++j) {
        const int64_t gi = s * 8 + j;
        const uint8_t* r = sb + 320 * j;
        const uint8_t* xg = a.x + gi * G;
        if constexpr (kPrefetch<MB>)
          prefetch_ahead(r, 5);
        __m512i q[8];
        int5_group(r, lo4, b4, q);
        const __m512 sc = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 2560 + 16 * j)))));
        const __m512 mn = _mm512_mul_ps(dminv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 2688 + 16 * j)))));
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) {  // unrolled: facc stays in registers
          const __m512i d = int5_dot<C>(q, xg + m * Kp);
          facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, facc[m]);
          facc[m] = _mm512_fnmadd_ps(_mm512_set1_ps(a.gsumf[m * ng + gi]), mn, facc[m]);
        }
      }
    }
    for (int m = 0; m < MB; ++m)
      store_block(out + m * ldo + 16 * b, _mm512_mul_ps(facc[m], _mm512_set1_ps(a.sx[m])), b, w.N);
  }
}

// int5-g32-zp-f32 (Q5_K groups fused with Q5_1 ones, kernels/quantized.h): int5k_rows's codes with an f32 scale and
// min per group record; facc + dot x scale, then + the group's activation sum x min (qrows_scalar's
// order). int5-g32-zp (F32 false, Q5_1 at its own size): the same with f16 ones, widened exactly
// (the same f32 values, so the same sums), in records of 6 lines, not 7.
template <int MB, bool F32>
NV_TARGET_VNNI512 void int5f_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1,
                                  float* out, int64_t ldo) {
  constexpr int G = 32, kRec = F32 ? 448 : 384;
  constexpr int C = kChains5<MB>;
  const int64_t Kp = w.Kp, ng = Kp / G;
  const __m512i lo4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    __m512 facc[MB];
    for (int m = 0; m < MB; ++m) facc[m] = _mm512_setzero_ps();
    for (int64_t gi = 0; gi < ng; ++gi) {
      const uint8_t* r = blk + gi * kRec;
      const uint8_t* xg = a.x + gi * G;
      if constexpr (kPrefetch<MB>)
        prefetch_ahead(r, kRec / 64);
      __m512i q[8];
      int5_group(r, lo4, b4, q);
      __m512 sc, mn;
      if constexpr (F32) {
        sc = _mm512_loadu_ps(r + 320);
        mn = _mm512_loadu_ps(r + 384);
      } else {
        sc = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 320)));
        mn = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(r + 352)));
      }
#pragma GCC unroll 8
      for (int m = 0; m < MB; ++m) {
        const __m512i d = int5_dot<C>(q, xg + m * Kp);
        facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, facc[m]);
        facc[m] = _mm512_fmadd_ps(_mm512_set1_ps(a.gsumf[m * ng + gi]), mn, facc[m]);
      }
    }
    for (int m = 0; m < MB; ++m)
      store_block(out + m * ldo + 16 * b, _mm512_mul_ps(facc[m], _mm512_set1_ps(a.sx[m])), b, w.N);
  }
}

// int6-g16-k (Q6_K's own form, kernels/quantized.h): per group of 16 k, three lines whose low
// 6 bits are the codes of k 0-3, 4-7, 8-11 and whose top 2 bits together make the codes of
// k 12-15 (3 shifts, 1 and, 2 ternary-logic merges). The codes are the unsigned operand of
// vpdpbusd; the group's dot minus 32 x its activation sum is scaled by d x sc, an exact f32
// product, in group order: qrows_scalar's sums bit for bit.
// A group's lines P0 P1 P2 -> its 4 vectors of codes (k 0-3, 4-7, 8-11, 12-15).
// t | (b & c) is ternary-logic function 0xF8.
NV_TARGET_VNNI512 inline void int6_group(const uint8_t* r, __m512i* q) {
  const __m512i m63 = _mm512_set1_epi8(0x3F);
  const __m512i p0 = _mm512_loadu_si512(r), p1 = _mm512_loadu_si512(r + 64), p2 = _mm512_loadu_si512(r + 128);
  q[0] = _mm512_and_si512(p0, m63);
  q[1] = _mm512_and_si512(p1, m63);
  q[2] = _mm512_and_si512(p2, m63);
  __m512i q3 = _mm512_and_si512(_mm512_srli_epi16(p0, 6), _mm512_set1_epi8(0x03));
  q3 = _mm512_ternarylogic_epi32(q3, _mm512_srli_epi16(p1, 4), _mm512_set1_epi8(0x0C), 0xF8);
  q[3] = _mm512_ternarylogic_epi32(q3, _mm512_srli_epi16(p2, 2), _mm512_set1_epi8(0x30), 0xF8);
}

template <int MB>
NV_TARGET_VNNI512 void int6k_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1,
                                  float* out, int64_t ldo) {
  constexpr int G = 16, SB = QuantScheme::kInt6SuperblockBytes;
  const int64_t Kp = w.Kp, ng = Kp / G, nsb = Kp / 256, dbytes = QuantScheme::int6_d_bytes(nsb);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    const uint16_t* dt = reinterpret_cast<const uint16_t*>(blk);
    // The d table and each superblock's sc lines are not walked by the group lines' prefetch,
    // which runs kStreamPrefetchBytes ahead: these close the gaps they leave.
    if constexpr (kPrefetch<MB>)
      prefetch_ahead(blk, dbytes / 64);
    __m512 facc[MB];
    for (int m = 0; m < MB; ++m) facc[m] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* sb = blk + dbytes + s * SB;
      if constexpr (kPrefetch<MB>)
        prefetch_ahead(sb + 3072, 4);
      const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dt + 16 * s)));
      for (int u = 0; u < 16; ++u) {
        const int64_t gi = s * 16 + u;
        const uint8_t* r = sb + 192 * u;
        const uint8_t* xg = a.x + gi * G;
        if constexpr (kPrefetch<MB>)
          prefetch_ahead(r, 3);
        __m512i qv[4];
        int6_group(r, qv);
        const __m512i q0 = qv[0], q1 = qv[1], q2 = qv[2], q3 = qv[3];
        const __m512 sc = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 3072 + 16 * u)))));
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) {
          // The chain starts at -32 x the group's activation sum: 2 ops per group after the dots.
          const uint8_t* xm = xg + m * Kp;
          __m512i d = _mm512_set1_epi32(a.gsum8[m * ng + gi]);  // -32 x the sum (QActs)
          d = _mm512_dpbusd_epi32(d, q0, bcast4(xm));
          d = _mm512_dpbusd_epi32(d, q1, bcast4(xm + 4));
          d = _mm512_dpbusd_epi32(d, q2, bcast4(xm + 8));
          d = _mm512_dpbusd_epi32(d, q3, bcast4(xm + 12));
          facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, facc[m]);
        }
      }
    }
    for (int m = 0; m < MB; ++m)
      store_block(out + m * ldo + 16 * b, _mm512_mul_ps(facc[m], _mm512_set1_ps(a.sx[m])), b, w.N);
  }
}

// int2-g16-zp-k (Q2_K's own form, kernels/quantized.h): per group of 16 k one line whose bit
// pairs 2i, 2i+1 are the codes of k 4i .. 4i+3 (a 16-bit shift and an and each); the group's
// dot is scaled by d x sc, then minus its activation sum times dmin x m (exact f32 products;
// sc | m << 4 in one byte), in group order: qrows_scalar's sums bit for bit.
template <int MB>
NV_TARGET_VNNI512 void int2k_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1,
                                  float* out, int64_t ldo) {
  constexpr int G = 16, SB = QuantScheme::kInt2SuperblockBytes;
  const int64_t Kp = w.Kp, ng = Kp / G, nsb = Kp / 256;
  const __m512i m3 = _mm512_set1_epi8(0x03);
  const __m512i m15 = _mm512_set1_epi32(15);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    __m512 facc[MB];
    for (int m = 0; m < MB; ++m) facc[m] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* sb = blk + s * SB;
      // The group lines' prefetch runs kStreamPrefetchBytes ahead of them; these 5 lines (the
      // factors' length past the lines) close the gap it leaves at each superblock.
      if constexpr (kPrefetch<MB>)
        prefetch_ahead(sb + 1024, 5);
      const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 1280)));
      const __m512 dminv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 1312)));
      for (int u = 0; u < 16; ++u) {
        const int64_t gi = s * 16 + u;
        const uint8_t* r = sb + 64 * u;
        const uint8_t* xg = a.x + gi * G;
        if constexpr (kPrefetch<MB>)
          _mm_prefetch(reinterpret_cast<const char*>(r + kStreamPrefetchBytes), _MM_HINT_T0);
        const __m512i v = _mm512_loadu_si512(r);
        const __m512i q0 = _mm512_and_si512(v, m3), q1 = _mm512_and_si512(_mm512_srli_epi16(v, 2), m3),
                      q2 = _mm512_and_si512(_mm512_srli_epi16(v, 4), m3),
                      q3 = _mm512_and_si512(_mm512_srli_epi16(v, 6), m3);
        const __m512i scm = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 1024 + 16 * u)));
        const __m512 sc = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_and_si512(scm, m15)));
        const __m512 mn = _mm512_mul_ps(dminv, _mm512_cvtepi32_ps(_mm512_srli_epi32(scm, 4)));
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) {
          const uint8_t* xm = xg + m * Kp;
          __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q0, bcast4(xm));
          __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q1, bcast4(xm + 4));
          d0 = _mm512_dpbusd_epi32(d0, q2, bcast4(xm + 8));
          d1 = _mm512_dpbusd_epi32(d1, q3, bcast4(xm + 12));
          facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d0, d1)), sc, facc[m]);
          facc[m] = _mm512_fnmadd_ps(_mm512_set1_ps(a.gsumf[m * ng + gi]), mn, facc[m]);
        }
      }
    }
    for (int m = 0; m < MB; ++m)
      store_block(out + m * ldo + 16 * b, _mm512_mul_ps(facc[m], _mm512_set1_ps(a.sx[m])), b, w.N);
  }
}

// int3-g16-k (Q3_K's own form, kernels/quantized.h): one record of 3 lines A B C per pair of
// groups; six of its eight code vectors are a shift and a mask, vectors 2 and 5 join 2 bits of A
// (B) with a bit of C (16-bit shifts: each mask keeps bits of the byte's own).
NV_TARGET_VNNI512 inline void int3_unpack(const uint8_t* rec, __m512i* q) {
  const __m512i m3 = _mm512_set1_epi8(0x03), m4 = _mm512_set1_epi8(0x04), m7 = _mm512_set1_epi8(0x07);
  const __m512i A = _mm512_loadu_si512(rec), B = _mm512_loadu_si512(rec + 64), C = _mm512_loadu_si512(rec + 128);
  q[0] = _mm512_and_si512(A, m7);
  q[1] = _mm512_and_si512(_mm512_srli_epi16(A, 3), m7);
  q[2] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(A, 6), m3), _mm512_srli_epi16(C, 4), m4, 0xF8);
  q[3] = _mm512_and_si512(B, m7);
  q[4] = _mm512_and_si512(_mm512_srli_epi16(B, 3), m7);
  q[5] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(B, 6), m3), _mm512_srli_epi16(C, 5), m4, 0xF8);
  q[6] = _mm512_and_si512(C, m7);
  q[7] = _mm512_and_si512(_mm512_srli_epi16(C, 3), m7);
}

// The sums are integers up to the superblock (qrows_scalar's order). A group's chain starts at -4
// x its activation sum (gsum8) and takes its 4 vpdpbusd: sum (q - 4) x8, at most 16 * 4 * 127 =
// 8,128 in magnitude, so it is exact in a lane's low 16 bits; vpdpwssd against the sub-scale in
// the low half only (the high half 0, whatever d's sign half holds) adds d x sc to the
// superblock's integer sum (at most 16 * 8,128 * 32 < 2^24: exact as f32), times d in one fma.
template <int MB>
NV_TARGET_VNNI512 void int3k_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1,
                                  float* out, int64_t ldo) {
  constexpr int G = 16, SB = QuantScheme::kInt3SuperblockBytes;
  const int64_t Kp = w.Kp, ng = Kp / G, nsb = Kp / 256, dbytes = QuantScheme::int6_d_bytes(nsb);
  const __m512i lo16 = _mm512_set1_epi32(0xFFFF);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    const uint16_t* dt = reinterpret_cast<const uint16_t*>(blk);
    // The d table and each superblock's sc lines are not walked by the records' prefetch, which
    // runs kStreamPrefetchBytes ahead: these close the gaps they leave.
    if constexpr (kPrefetch<MB>)
      prefetch_ahead(blk, dbytes / 64);
    __m512 facc[MB];
    for (int m = 0; m < MB; ++m) facc[m] = _mm512_setzero_ps();
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* sb = blk + dbytes + s * SB;
      if constexpr (kPrefetch<MB>)
        prefetch_ahead(sb + 1536, 4);
      __m512i isum[MB];
      for (int m = 0; m < MB; ++m) isum[m] = _mm512_setzero_si512();
      for (int p = 0; p < 8; ++p) {  // groups 2p, 2p + 1
        const uint8_t* rec = sb + 192 * p;
        if constexpr (kPrefetch<MB>)
          prefetch_ahead(rec, 3);
        __m512i q[8];
        int3_unpack(rec, q);
#pragma GCC unroll 2
        for (int odd = 0; odd < 2; ++odd) {
          const int u = 2 * p + odd;
          const int64_t gi = s * 16 + u;
          const uint8_t* xg = a.x + gi * G;
          const __m512i sc = _mm512_and_si512(
              _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 1536 + 16 * u))), lo16);
          const __m512i* qg = q + 4 * odd;
#pragma GCC unroll 8
          for (int m = 0; m < MB; ++m) {
            const uint8_t* xm = xg + m * Kp;
            __m512i d = _mm512_set1_epi32(a.gsum8[m * ng + gi]);  // -4 x the sum (QActs)
            d = _mm512_dpbusd_epi32(d, qg[0], bcast4(xm));
            d = _mm512_dpbusd_epi32(d, qg[1], bcast4(xm + 4));
            d = _mm512_dpbusd_epi32(d, qg[2], bcast4(xm + 8));
            d = _mm512_dpbusd_epi32(d, qg[3], bcast4(xm + 12));
            isum[m] = _mm512_dpwssd_epi32(isum[m], d, sc);
          }
        }
      }
      const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dt + 16 * s)));
      for (int m = 0; m < MB; ++m) facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m]), dv, facc[m]);
    }
    for (int m = 0; m < MB; ++m)
      store_block(out + m * ldo + 16 * b, _mm512_mul_ps(facc[m], _mm512_set1_ps(a.sx[m])), b, w.N);
  }
}

// Large M on int5 / int6 (qtile_avx512_vnni): a block's codes unpacked once, one byte each in
// the int8 vector order (vector i: k 4i .. 4i+3 of the 16 rows), for every chunk of activation
// rows. The groups' sums are int5k_rows's / int6k_rows's, in the same order.
NV_TARGET_VNNI512 void unpack_codes(const QWeightView& w, const uint8_t* blk, uint8_t* codes) {
  const int64_t nsb = w.Kp / 256;
  const __m512i lo4 = _mm512_set1_epi8(0x0F), b4 = _mm512_set1_epi8(0x10);
  for (int64_t s = 0; s < nsb; ++s) {
    __m512i q[8];
    if (w.kind == QuantKind::Int6) {
      const uint8_t* sb = blk + QuantScheme::int6_d_bytes(nsb) + s * QuantScheme::kInt6SuperblockBytes;
      for (int u = 0; u < 16; ++u) {
        int6_group(sb + 192 * u, q);
        for (int i = 0; i < 4; ++i) _mm512_storeu_si512(codes + (s * 64 + 4 * u + i) * 64, q[i]);
      }
    } else {
      const uint8_t* sb = blk + s * QuantScheme::kInt5SuperblockBytes;
      for (int j = 0; j < 8; ++j) {
        int5_group(sb + 320 * j, lo4, b4, q);
        for (int i = 0; i < 8; ++i) _mm512_storeu_si512(codes + (s * 64 + 8 * j + i) * 64, q[i]);
      }
    }
  }
}

template <int MB>
NV_TARGET_VNNI512 void codes_rows(const QWeightView& w, const uint8_t* blk, const uint8_t* codes, const QActs& a,
                                  int64_t b, float* out, int64_t ldo) {
  const int64_t Kp = w.Kp, nsb = Kp / 256;
  __m512 facc[MB];
  for (int m = 0; m < MB; ++m) facc[m] = _mm512_setzero_ps();
  if (w.kind == QuantKind::Int6) {
    const int64_t ng = Kp / 16;
    const uint16_t* dt = reinterpret_cast<const uint16_t*>(blk);
    const uint8_t* sbs = blk + QuantScheme::int6_d_bytes(nsb);
    for (int64_t s = 0; s < nsb; ++s) {
      const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(dt + 16 * s)));
      const uint8_t* scs = sbs + s * QuantScheme::kInt6SuperblockBytes + 3072;
      for (int u = 0; u < 16; ++u) {
        const int64_t gi = s * 16 + u;
        const uint8_t* cv = codes + gi * 256;
        const __m512 sc = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(scs + 16 * u)))));
        const __m512i q0 = _mm512_loadu_si512(cv), q1 = _mm512_loadu_si512(cv + 64),
                      q2 = _mm512_loadu_si512(cv + 128), q3 = _mm512_loadu_si512(cv + 192);
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) {
          const uint8_t* xm = a.x + m * Kp + gi * 16;
          __m512i d = _mm512_set1_epi32(a.gsum8[m * ng + gi]);  // -32 x the sum (QActs)
          d = _mm512_dpbusd_epi32(d, q0, bcast4(xm));
          d = _mm512_dpbusd_epi32(d, q1, bcast4(xm + 4));
          d = _mm512_dpbusd_epi32(d, q2, bcast4(xm + 8));
          d = _mm512_dpbusd_epi32(d, q3, bcast4(xm + 12));
          facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, facc[m]);
        }
      }
    }
  } else {
    const int64_t ng = Kp / 32;
    for (int64_t s = 0; s < nsb; ++s) {
      const uint8_t* sb = blk + s * QuantScheme::kInt5SuperblockBytes;
      const __m512 dv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 2816)));
      const __m512 dminv = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + 2848)));
      for (int j = 0; j < 8; ++j) {
        const int64_t gi = s * 8 + j;
        const uint8_t* cv = codes + gi * 512;
        const __m512 sc = _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 2560 + 16 * j)))));
        const __m512 mn = _mm512_mul_ps(dminv, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(
                                                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 2688 + 16 * j)))));
        __m512i q[8];  // in registers for every row
        for (int v = 0; v < 8; ++v) q[v] = _mm512_loadu_si512(cv + 64 * v);
#pragma GCC unroll 8
        for (int m = 0; m < MB; ++m) {
          const uint8_t* xm = a.x + m * Kp + gi * 32;
          __m512i d0 = _mm512_setzero_si512(), d1 = _mm512_setzero_si512();  // two chains
#pragma GCC unroll 4
          for (int v = 0; v < 8; v += 2) {
            d0 = _mm512_dpbusd_epi32(d0, q[v], bcast4(xm + 4 * v));
            d1 = _mm512_dpbusd_epi32(d1, q[v + 1], bcast4(xm + 4 * v + 4));
          }
          const __m512i d = _mm512_add_epi32(d0, d1);
          facc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sc, facc[m]);
          facc[m] = _mm512_fnmadd_ps(_mm512_set1_ps(a.gsumf[m * ng + gi]), mn, facc[m]);
        }
      }
    }
  }
  for (int m = 0; m < MB; ++m)
    store_block(out + m * ldo + 16 * b, _mm512_mul_ps(facc[m], _mm512_set1_ps(a.sx[m])), b, w.N);
}

template <int MB>
void rows_m(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1, float* out, int64_t ldo) {
  if (w.kind == QuantKind::Int6) return int6k_rows<MB>(w, a, b0, b1, out, ldo);
  if (w.kind == QuantKind::Int5)
    return w.k_superblocks ? int5k_rows<MB>(w, a, b0, b1, out, ldo)
           : w.f32_params  ? int5f_rows<MB, true>(w, a, b0, b1, out, ldo)
                           : int5f_rows<MB, false>(w, a, b0, b1, out, ldo);
  if (w.kind == QuantKind::Int2) return int2k_rows<MB>(w, a, b0, b1, out, ldo);
  if (w.kind == QuantKind::Int3) return int3k_rows<MB>(w, a, b0, b1, out, ldo);
  if (w.k_superblocks) return int4k_rows<MB>(w, a, b0, b1, out, ldo);
  if (w.kind == QuantKind::Int8)
    return w.group > 0 ? int8g_rows<MB>(w, a, b0, b1, out, ldo) : int8_rows<MB>(w, a, b0, b1, out, ldo);
  if (w.nl_table) return int4_rows<MB, 32, false, false, true>(w, a, b0, b1, out, ldo);
  if (w.f32_params) return int4_rows<MB, 32, true, true>(w, a, b0, b1, out, ldo);  // group 32 only
  if (w.group == 32)
    return w.zero_points ? int4_rows<MB, 32, true>(w, a, b0, b1, out, ldo)
                         : int4_rows<MB, 32, false>(w, a, b0, b1, out, ldo);
  return w.zero_points ? int4_rows<MB, 64, true>(w, a, b0, b1, out, ldo)
                       : int4_rows<MB, 64, false>(w, a, b0, b1, out, ldo);
}

}  // namespace

void qrows_avx512_vnni(const QWeightView& w, const QActs& a, int M, int64_t b0, int64_t b1,
                       float* out, int64_t ldo) {
  switch (M) {
    case 1: return rows_m<1>(w, a, b0, b1, out, ldo);
    case 2: return rows_m<2>(w, a, b0, b1, out, ldo);
    case 3: return rows_m<3>(w, a, b0, b1, out, ldo);
    case 4: return rows_m<4>(w, a, b0, b1, out, ldo);
    case 5: return rows_m<5>(w, a, b0, b1, out, ldo);
    case 6: return rows_m<6>(w, a, b0, b1, out, ldo);
    case 7: return rows_m<7>(w, a, b0, b1, out, ldo);
    default: return rows_m<8>(w, a, b0, b1, out, ldo);
  }
}

bool qtile_avx512_vnni(const QWeightView& w, const QActs& a, int64_t M, int64_t b0, int64_t b1, float* out,
                       int64_t ldo) {
  if ((w.kind != QuantKind::Int5 && w.kind != QuantKind::Int6) || !w.k_superblocks) return false;
  thread_local std::vector<uint8_t> codes;
  codes.resize(size_t(w.Kp) * 16);
  const int64_t ng = w.Kp / w.group;
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    unpack_codes(w, blk, codes.data());
    for (int64_t m0 = 0; m0 < M; m0 += kQMaxRows) {
      QActs c = a;
      c.x += m0 * a.Kp;
      c.sx += m0;
      if (c.gsum8) c.gsum8 += m0 * ng;
      if (c.gsumf) c.gsumf += m0 * ng;
      float* o = out + m0 * ldo;
      switch (std::min<int64_t>(kQMaxRows, M - m0)) {
        case 1: codes_rows<1>(w, blk, codes.data(), c, b, o, ldo); break;
        case 2: codes_rows<2>(w, blk, codes.data(), c, b, o, ldo); break;
        case 3: codes_rows<3>(w, blk, codes.data(), c, b, o, ldo); break;
        case 4: codes_rows<4>(w, blk, codes.data(), c, b, o, ldo); break;
        case 5: codes_rows<5>(w, blk, codes.data(), c, b, o, ldo); break;
        case 6: codes_rows<6>(w, blk, codes.data(), c, b, o, ldo); break;
        case 7: codes_rows<7>(w, blk, codes.data(), c, b, o, ldo); break;
        default: codes_rows<8>(w, blk, codes.data(), c, b, o, ldo); break;
      }
    }
  }
  return true;
}

}  // namespace nanovllm::cpu
