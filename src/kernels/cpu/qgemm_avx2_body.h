// The AVX2 quantized-linear kernels, compiled twice (qgemm_avx2.cc without and
// qgemm_avxvnni.cc with AVX-VNNI, each under its own `#pragma GCC target`) so the plain AVX2
// build can never contain a VNNI instruction. Include only from those two files, after
// defining NV_QVNNI (0 / 1) and NV_QENTRY (the entry point's name).
//
// 256-bit vectors: a 64-byte weight vector (4 k of a block's 16 rows) is two halves, rows 0-7
// and 8-15. Without VNNI the u8 x s8 products go through pmaddubsw (pairs summed to 16 bits) and
// pmaddwd (to 32 bits). That saturates only beyond 2 * 255 * 127, so int8 uses |w| x sign(x, w)
// (at most 2 * 127 * 127); int4 nibbles (at most 15) are safe as they are.
#include <cstring>

namespace nanovllm::cpu {
namespace {

// GCC reassociates a chain of integer adds into one tree per accumulator, computing every term
// of the chain first (at MB = 4, 32 live vectors: the loop spilled them to the stack, and the
// int4 kernels ran 22-38% slower at M >= 16, docs/perf.md). An empty asm on the sum keeps each chain as written; it emits no
// instruction and changes no value (integer adds).
inline __m256i keep_chain(__m256i r) {
  __asm__("" : "+x"(r));
  return r;
}

inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if NV_QVNNI
  return _mm256_dpbusd_avx_epi32(acc, u, s);
#else
  return keep_chain(_mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))));
#endif
}

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline __m256i bcast4(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// out[16 b + 8 h + r] for the rows that exist (n < N).
inline void store_half(float* dst, __m256 v, int64_t n0, int64_t N) {
  if (N - n0 >= 8) {
    _mm256_storeu_ps(dst, v);
    return;
  }
  alignas(32) float tmp[8];
  _mm256_store_ps(tmp, v);
  for (int64_t i = 0; i < N - n0; ++i) dst[i] = tmp[i];
}

// HB: how many of a block's two 8-row halves one sweep over its lines serves. Decode (MB = 1)
// takes both (each 64-byte line read whole, the block streamed once, in order); more activation
// rows take one (registers), and the second sweep finds the block in L1/L2.
template <int MB, int HB>
void int8_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1, float* out,
               int64_t ldo) {
  const int64_t Kp = w.Kp, steps = Kp / 4;
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    for (int h0 = 0; h0 < 2; h0 += HB) {  // rows 8 h0 .. 8 (h0 + HB) - 1 of the block
      __m256i acc[HB][MB];
      for (int hh = 0; hh < HB; ++hh)
        for (int m = 0; m < MB; ++m) acc[hh][m] = _mm256_setzero_si256();
      for (int64_t i = 0; i < steps; ++i) {
        __m256i wv[HB];
        for (int hh = 0; hh < HB; ++hh) wv[hh] = load256(blk + i * 64 + 32 * (h0 + hh));
#if !NV_QVNNI
        __m256i aw[HB];
        for (int hh = 0; hh < HB; ++hh) aw[hh] = _mm256_sign_epi8(wv[hh], wv[hh]);
#endif
        for (int m = 0; m < MB; ++m) {
          const __m256i xv = bcast4(a.x + m * Kp + 4 * i);
          for (int hh = 0; hh < HB; ++hh) {
#if NV_QVNNI
            acc[hh][m] = dot_u8s8(acc[hh][m], xv, wv[hh]);  // x + 128 (u8) x w (s8)
#else
            acc[hh][m] = dot_u8s8(acc[hh][m], aw[hh], _mm256_sign_epi8(xv, wv[hh]));
#endif
          }
        }
      }
      for (int hh = 0; hh < HB; ++hh) {
        const int64_t n0 = 16 * b + 8 * (h0 + hh);
        __m256i corr = _mm256_setzero_si256();
        if (a.offset128) corr = _mm256_slli_epi32(load256(w.row_sums + n0), 7);
        const __m256 sc = _mm256_loadu_ps(w.scales + n0);
        for (int m = 0; m < MB; ++m) {
          const __m256 y = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[hh][m], corr)),
                                         _mm256_mul_ps(sc, _mm256_set1_ps(a.sx[m])));
          store_half(out + m * ldo + n0, y, n0, w.N);
        }
      }
    }
  }
}

// int8-g32 (kernels/quantized.h): per group record, 8 weight vectors, then 16 f16 scales and 16
// i16 group sums (rows 8h .. 8h+7 at 16 h bytes into each). The group's integer dot is scaled
// by its f16 scale into an f32 accumulator; with VNNI (x8 + 128 as the unsigned operand) minus
// 128 x the group sum first. |w| x sign(x, w) without VNNI: |q| <= 127, so pmaddubsw cannot
// saturate (2 x 127 x 127).
template <int MB, int HB>
void int8g_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1, float* out,
                int64_t ldo) {
  constexpr int G = 32, kVecs = G / 4, kRec = 16 * G + 64;
  const int64_t Kp = w.Kp, ng = Kp / G;
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    for (int h0 = 0; h0 < 2; h0 += HB) {  // rows 8 h0 .. 8 (h0 + HB) - 1 of the block
      __m256 facc[HB][MB];
      for (int hh = 0; hh < HB; ++hh)
        for (int m = 0; m < MB; ++m) facc[hh][m] = _mm256_setzero_ps();
      for (int64_t gi = 0; gi < ng; ++gi) {
        const uint8_t* r = blk + gi * kRec;
        const uint8_t* xg = a.x + gi * G;
        __m256i acc[HB][MB];
        for (int hh = 0; hh < HB; ++hh)
          for (int m = 0; m < MB; ++m) acc[hh][m] = _mm256_setzero_si256();
        for (int t = 0; t < kVecs; ++t) {
          __m256i wv[HB];
          for (int hh = 0; hh < HB; ++hh) wv[hh] = load256(r + 64 * t + 32 * (h0 + hh));
#if !NV_QVNNI
          __m256i aw[HB];
          for (int hh = 0; hh < HB; ++hh) aw[hh] = _mm256_sign_epi8(wv[hh], wv[hh]);
#endif
          for (int m = 0; m < MB; ++m) {
            const __m256i xv = bcast4(xg + m * Kp + 4 * t);
            for (int hh = 0; hh < HB; ++hh) {
#if NV_QVNNI
              acc[hh][m] = dot_u8s8(acc[hh][m], xv, wv[hh]);
#else
              acc[hh][m] = dot_u8s8(acc[hh][m], aw[hh], _mm256_sign_epi8(xv, wv[hh]));
#endif
            }
          }
        }
        for (int hh = 0; hh < HB; ++hh) {
          const int h = h0 + hh;
          const __m256 sc = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 16 * G + 16 * h)));
          __m256i corr = _mm256_setzero_si256();
          if (a.offset128)
            corr = _mm256_slli_epi32(
                _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 16 * G + 32 + 16 * h))), 7);
          for (int m = 0; m < MB; ++m)
            facc[hh][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(acc[hh][m], corr)), sc, facc[hh][m]);
        }
      }
      for (int hh = 0; hh < HB; ++hh) {
        const int64_t n0 = 16 * b + 8 * (h0 + hh);
        for (int m = 0; m < MB; ++m)
          store_half(out + m * ldo + n0, _mm256_mul_ps(facc[hh][m], _mm256_set1_ps(a.sx[m])), n0, w.N);
      }
    }
  }
}

// int4 partial sums over 4 weight lines. Without VNNI the multiplier port is the limit
// (pmaddubsw, then pmaddwd to widen): a nibble (<= 15) times |x8| (<= 127) makes pmaddubsw pairs
// of at most 3810, so the 8 products of 4 lines add exactly in 16 bits (30480 < 32767) and one
// pmaddwd widens them, not one per pmaddubsw. VNNI sums in 32 bits directly. Same integers.
inline __m256i nib_dot(__m256i s, __m256i nibbles, __m256i x) {
#if NV_QVNNI
  return dot_u8s8(s, nibbles, x);
#else
  return keep_chain(_mm256_add_epi16(s, _mm256_maddubs_epi16(nibbles, x)));
#endif
}
inline __m256i widen_add(__m256i acc, __m256i s) {
#if NV_QVNNI
  return _mm256_add_epi32(acc, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(s, _mm256_set1_epi16(1)));
#endif
}

// int4-g32-nl (IQ4_NL / IQ4_XS as stored): each nibble becomes its table value through
// vpshufb. VNNI: value + 128 (1..241) as the unsigned operand, minus 128 x the group's sum of x8
// (gsum8). Without VNNI pmaddubsw would saturate on 241 x 127 pairs, so (as int8) |value| x
// sign(x8, value), pairs <= 2 x 127 x 127, widened by pmaddwd at once (two such pairs overflow
// 16 bits). Both give the integer sum of value x x8; then the group's f32 scale.
inline const void* iq4nl_lut() {
#if NV_QVNNI
  return kIq4nlPlus128.data();
#else
  return kIq4nlTable;
#endif
}

inline __m256i nl_dot(__m256i acc, __m256i vals, __m256i x) {
#if NV_QVNNI
  return dot_u8s8(acc, vals, x);
#else
  return keep_chain(_mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(vals, vals),
                                                                                 _mm256_sign_epi8(x, vals)),
                                                            _mm256_set1_epi16(1))));
#endif
}

template <int MB, int HB, int G, bool ZP, bool F32 = false, bool NL = false>
void int4_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1, float* out,
               int64_t ldo) {
  static_assert(!F32 || ZP, "f32 parameters come with zero points");
  static_assert(!NL || (!ZP && G == 32), "the IQ4 table layout is symmetric, group 32");
  constexpr int kLines = G / 8, kRec = NL ? 8 * G + 64 : F32 ? 8 * G + 128 : 8 * G + 32 + (ZP ? 32 : 0);
  static_assert(kLines % 4 == 0, "nib_dot's 16-bit sums take the lines 4 at a time");
  const int64_t Kp = w.Kp, ng = Kp / G;
  const __m256i lo4 = _mm256_set1_epi8(0x0F);
  const __m256i lut = _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(iq4nl_lut())));
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    for (int h0 = 0; h0 < 2; h0 += HB) {  // rows 8 h0 .. 8 (h0 + HB) - 1 of the block
      __m256 facc[HB][MB];
      for (int hh = 0; hh < HB; ++hh)
        for (int m = 0; m < MB; ++m) facc[hh][m] = _mm256_setzero_ps();
      for (int64_t gi = 0; gi < ng; ++gi) {
        const uint8_t* r = blk + gi * kRec;
        const uint8_t* xg = a.x + gi * G;
        __m256i acc[HB][MB];
        for (int hh = 0; hh < HB; ++hh)
          for (int m = 0; m < MB; ++m) acc[hh][m] = _mm256_setzero_si256();
        for (int t0 = 0; t0 < kLines; t0 += 4) {
          __m256i s[HB][MB];
          for (int hh = 0; hh < HB; ++hh)
            for (int m = 0; m < MB; ++m) s[hh][m] = _mm256_setzero_si256();
          for (int t = t0; t < t0 + 4; ++t) {
            __m256i vlo[HB], vhi[HB];
            for (int hh = 0; hh < HB; ++hh) {
              const __m256i v = load256(r + 64 * t + 32 * (h0 + hh));
              vlo[hh] = _mm256_and_si256(v, lo4);
              vhi[hh] = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
              if constexpr (NL) {
                vlo[hh] = _mm256_shuffle_epi8(lut, vlo[hh]);
                vhi[hh] = _mm256_shuffle_epi8(lut, vhi[hh]);
              }
            }
            for (int m = 0; m < MB; ++m) {
              const uint8_t* xm = xg + m * Kp + 8 * t;
              const __m256i xlo = bcast4(xm), xhi = bcast4(xm + 4);
              for (int hh = 0; hh < HB; ++hh) {
                if constexpr (NL)  // table values: no 16-bit partial sums (see nl_dot)
                  acc[hh][m] = nl_dot(nl_dot(acc[hh][m], vlo[hh], xlo), vhi[hh], xhi);
                else
                  s[hh][m] = nib_dot(nib_dot(s[hh][m], vlo[hh], xlo), vhi[hh], xhi);
              }
            }
          }
          if constexpr (!NL)
            for (int hh = 0; hh < HB; ++hh)
              for (int m = 0; m < MB; ++m) acc[hh][m] = widen_add(acc[hh][m], s[hh][m]);
        }
        for (int hh = 0; hh < HB; ++hh) {
          const int h = h0 + hh;
          __m256 sc, mn = _mm256_setzero_ps();
          if constexpr (NL) {  // [16 f32 scales]
            sc = _mm256_loadu_ps(reinterpret_cast<const float*>(r + 8 * G + 32 * h));
          } else if constexpr (F32) {  // [16 f32 scales][16 f32 mins]: this half's 8 of each
            sc = _mm256_loadu_ps(reinterpret_cast<const float*>(r + 8 * G + 32 * h));
            mn = _mm256_loadu_ps(reinterpret_cast<const float*>(r + 8 * G + 64 + 32 * h));
          } else {
            sc = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 8 * G + 16 * h)));
            if constexpr (ZP) mn = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 8 * G + 32 + 16 * h)));
          }
          for (int m = 0; m < MB; ++m) {
            __m256i d = acc[hh][m];
            if constexpr (!ZP && (!NL || NV_QVNNI))  // (NL without VNNI sums the values themselves)
              d = _mm256_sub_epi32(d, _mm256_set1_epi32(a.gsum8[m * ng + gi]));
            facc[hh][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), sc, facc[hh][m]);
            if constexpr (ZP) facc[hh][m] = _mm256_fmadd_ps(_mm256_set1_ps(a.gsumf[m * ng + gi]), mn, facc[hh][m]);
          }
        }
      }
      for (int hh = 0; hh < HB; ++hh) {
        const int64_t n0 = 16 * b + 8 * (h0 + hh);
        for (int m = 0; m < MB; ++m)
          store_half(out + m * ldo + n0, _mm256_mul_ps(facc[hh][m], _mm256_set1_ps(a.sx[m])), n0, w.N);
      }
    }
  }
}

// int4-g32-zp-k (Q4_K's own parameters, kernels/quantized.h): as int4_rows<.., 32, true, true>,
// with each group's scale d x sc and min dmin x m formed from the superblock's factors (exact f32
// products, and facc - gsum x (dmin x m) rounds as facc + gsum x min: the same bits).
template <int MB, int HB>
void int4k_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1, float* out,
                int64_t ldo) {
  constexpr int G = 32, kLines = 4, SB = QuantScheme::kSuperblockBytes;
  const int64_t Kp = w.Kp, ng = Kp / G, nsb = Kp / 256;
  const __m256i lo4 = _mm256_set1_epi8(0x0F);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    for (int h0 = 0; h0 < 2; h0 += HB) {  // rows 8 h0 .. 8 (h0 + HB) - 1 of the block
      __m256 facc[HB][MB];
      for (int hh = 0; hh < HB; ++hh)
        for (int m = 0; m < MB; ++m) facc[hh][m] = _mm256_setzero_ps();
      for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t* sb = blk + s * SB;
        __m256 dv[HB], dminv[HB];
        for (int hh = 0; hh < HB; ++hh) {
          dv[hh] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 2304 + 16 * (h0 + hh))));
          dminv[hh] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 2336 + 16 * (h0 + hh))));
        }
        for (int j = 0; j < 8; ++j) {
          const int64_t gi = s * 8 + j;
          const uint8_t* r = sb + 256 * j;
          const uint8_t* xg = a.x + gi * G;
          __m256i s16[HB][MB];
          for (int hh = 0; hh < HB; ++hh)
            for (int m = 0; m < MB; ++m) s16[hh][m] = _mm256_setzero_si256();
          for (int t = 0; t < kLines; ++t) {
            __m256i vlo[HB], vhi[HB];
            for (int hh = 0; hh < HB; ++hh) {
              const __m256i v = load256(r + 64 * t + 32 * (h0 + hh));
              vlo[hh] = _mm256_and_si256(v, lo4);
              vhi[hh] = _mm256_and_si256(_mm256_srli_epi16(v, 4), lo4);
            }
            for (int m = 0; m < MB; ++m) {
              const uint8_t* xm = xg + m * Kp + 8 * t;
              const __m256i xlo = bcast4(xm), xhi = bcast4(xm + 4);
              for (int hh = 0; hh < HB; ++hh)
                s16[hh][m] = nib_dot(nib_dot(s16[hh][m], vlo[hh], xlo), vhi[hh], xhi);
            }
          }
          for (int hh = 0; hh < HB; ++hh) {
            const int h = h0 + hh;
            const __m256 sc = _mm256_mul_ps(dv[hh], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 2048 + 16 * j + 8 * h)))));
            const __m256 mn = _mm256_mul_ps(dminv[hh], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 2176 + 16 * j + 8 * h)))));
            for (int m = 0; m < MB; ++m) {
              const __m256i d = widen_add(_mm256_setzero_si256(), s16[hh][m]);
              facc[hh][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), sc, facc[hh][m]);
              facc[hh][m] = _mm256_fnmadd_ps(_mm256_set1_ps(a.gsumf[m * ng + gi]), mn, facc[hh][m]);
            }
          }
        }
      }
      for (int hh = 0; hh < HB; ++hh) {
        const int64_t n0 = 16 * b + 8 * (h0 + hh);
        for (int m = 0; m < MB; ++m)
          store_half(out + m * ldo + n0, _mm256_mul_ps(facc[hh][m], _mm256_set1_ps(a.sx[m])), n0, w.N);
      }
    }
  }
}

// int5-g32-zp-k (as qgemm_avx512.cc's int5k_rows). Without VNNI a pmaddubsw pair sum of 5-bit
// codes is at most 2 * 31 * 127: four of them fit 16 bits, so the group's 8 vectors are two sums.
template <int v>
inline __m256i bit4_of(__m256i h) {  // bit v of each byte of h, at bit 4
  if constexpr (v < 4) return _mm256_slli_epi16(h, 4 - v);
  else if constexpr (v > 4) return _mm256_srli_epi16(h, v - 4);
  else return h;
}

// A group record's 8 vectors of 5-bit codes for the 8 rows at byte offset o (0 or 32) of each line.
inline void int5_half(const uint8_t* r, int o, __m256i lo4, __m256i b4, __m256i* q) {
  const __m256i h = load256(r + 256 + o);
  auto line = [&](auto tc) {
    constexpr int t = decltype(tc)::value;
    const __m256i v = load256(r + 64 * t + o);
    q[2 * t] = _mm256_or_si256(_mm256_and_si256(v, lo4), _mm256_and_si256(bit4_of<2 * t>(h), b4));
    q[2 * t + 1] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), lo4),
                                   _mm256_and_si256(bit4_of<2 * t + 1>(h), b4));
  };
  line(std::integral_constant<int, 0>{});
  line(std::integral_constant<int, 1>{});
  line(std::integral_constant<int, 2>{});
  line(std::integral_constant<int, 3>{});
}

// The group's integer dot of those codes with the 32 activation bytes at xm (two 16-bit sums).
inline __m256i int5_dot(const __m256i* q, const uint8_t* xm) {
  const __m256i z = _mm256_setzero_si256();
  __m256i s0 = z, s1 = z;
  for (int v = 0; v < 4; ++v) s0 = nib_dot(s0, q[v], bcast4(xm + 4 * v));
  for (int v = 4; v < 8; ++v) s1 = nib_dot(s1, q[v], bcast4(xm + 4 * v));
  return widen_add(widen_add(z, s0), s1);
}

template <int MB, int HB>
void int5k_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1, float* out,
                int64_t ldo) {
  constexpr int G = 32, SB = QuantScheme::kInt5SuperblockBytes;
  const int64_t Kp = w.Kp, ng = Kp / G, nsb = Kp / 256;
  const __m256i lo4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    for (int h0 = 0; h0 < 2; h0 += HB) {  // rows 8 h0 .. 8 (h0 + HB) - 1 of the block
      __m256 facc[HB][MB];
      for (int hh = 0; hh < HB; ++hh)
        for (int m = 0; m < MB; ++m) facc[hh][m] = _mm256_setzero_ps();
      for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t* sb = blk + s * SB;
        __m256 dv[HB], dminv[HB];
        for (int hh = 0; hh < HB; ++hh) {
          dv[hh] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 2816 + 16 * (h0 + hh))));
          dminv[hh] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 2848 + 16 * (h0 + hh))));
        }
        for (int j = 0; j < 8; ++j) {
          const int64_t gi = s * 8 + j;
          const uint8_t* r = sb + 320 * j;
          const uint8_t* xg = a.x + gi * G;
          __m256i q[HB][8];
          for (int hh = 0; hh < HB; ++hh) int5_half(r, 32 * (h0 + hh), lo4, b4, q[hh]);
          for (int hh = 0; hh < HB; ++hh) {
            const int h = h0 + hh;
            const __m256 sc = _mm256_mul_ps(dv[hh], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 2560 + 16 * j + 8 * h)))));
            const __m256 mn = _mm256_mul_ps(dminv[hh], _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 2688 + 16 * j + 8 * h)))));
            for (int m = 0; m < MB; ++m) {
              const __m256i d = int5_dot(q[hh], xg + m * Kp);
              facc[hh][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), sc, facc[hh][m]);
              facc[hh][m] = _mm256_fnmadd_ps(_mm256_set1_ps(a.gsumf[m * ng + gi]), mn, facc[hh][m]);
            }
          }
        }
      }
      for (int hh = 0; hh < HB; ++hh) {
        const int64_t n0 = 16 * b + 8 * (h0 + hh);
        for (int m = 0; m < MB; ++m)
          store_half(out + m * ldo + n0, _mm256_mul_ps(facc[hh][m], _mm256_set1_ps(a.sx[m])), n0, w.N);
      }
    }
  }
}

// int5-g32-zp-f32 (as qgemm_avx512.cc's int5f_rows): int5k_rows's codes and sums, the f32 scale
// and min of each record; int5-g32-zp (F32 false, Q5_1 at its own size): the same with f16 ones,
// widened exactly (the same f32 values, so the same sums).
template <int MB, int HB, bool F32>
void int5f_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1, float* out,
                int64_t ldo) {
  constexpr int G = 32, kRec = F32 ? 448 : 384;
  const int64_t Kp = w.Kp, ng = Kp / G;
  const __m256i lo4 = _mm256_set1_epi8(0x0F), b4 = _mm256_set1_epi8(0x10);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    for (int h0 = 0; h0 < 2; h0 += HB) {  // rows 8 h0 .. 8 (h0 + HB) - 1 of the block
      __m256 facc[HB][MB];
      for (int hh = 0; hh < HB; ++hh)
        for (int m = 0; m < MB; ++m) facc[hh][m] = _mm256_setzero_ps();
      for (int64_t gi = 0; gi < ng; ++gi) {
        const uint8_t* r = blk + gi * kRec;
        const uint8_t* xg = a.x + gi * G;
        for (int hh = 0; hh < HB; ++hh) {
          __m256i q[8];
          int5_half(r, 32 * (h0 + hh), lo4, b4, q);
          if constexpr (F32) {
            const __m256 sc = _mm256_loadu_ps(reinterpret_cast<const float*>(r + 320) + 8 * (h0 + hh));
            const __m256 mn = _mm256_loadu_ps(reinterpret_cast<const float*>(r + 384) + 8 * (h0 + hh));
            for (int m = 0; m < MB; ++m) {
              const __m256i d = int5_dot(q, xg + m * Kp);
              facc[hh][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), sc, facc[hh][m]);
              facc[hh][m] = _mm256_fmadd_ps(_mm256_set1_ps(a.gsumf[m * ng + gi]), mn, facc[hh][m]);
            }
          } else {
            // The dots first, then the parameters: f16 ones take a register each (vcvtph2ps), and
            // converted before the dots they were spilled (M = 1, one thread: 14 GB/s, against 23
            // this way and the f32 form's 27-30, docs/perf.md). The same f32 values and sums.
            __m256i d[MB];
            for (int m = 0; m < MB; ++m) d[m] = int5_dot(q, xg + m * Kp);
            const __m256 sc = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 320 + 16 * (h0 + hh))));
            const __m256 mn = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r + 352 + 16 * (h0 + hh))));
            for (int m = 0; m < MB; ++m) {
              facc[hh][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d[m]), sc, facc[hh][m]);
              facc[hh][m] = _mm256_fmadd_ps(_mm256_set1_ps(a.gsumf[m * ng + gi]), mn, facc[hh][m]);
            }
          }
        }
      }
      for (int hh = 0; hh < HB; ++hh) {
        const int64_t n0 = 16 * b + 8 * (h0 + hh);
        for (int m = 0; m < MB; ++m)
          store_half(out + m * ldo + n0, _mm256_mul_ps(facc[hh][m], _mm256_set1_ps(a.sx[m])), n0, w.N);
      }
    }
  }
}

// int6-g16-k (as qgemm_avx512.cc's int6k_rows). Without VNNI a pmaddubsw pair sum of 6-bit codes
// is at most 2 * 63 * 127, so two of them fit 16 bits: each pair of vectors is widened apart.
template <int MB, int HB>
void int6k_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1, float* out,
                int64_t ldo) {
  constexpr int G = 16, SB = QuantScheme::kInt6SuperblockBytes;
  const int64_t Kp = w.Kp, ng = Kp / G, nsb = Kp / 256, dbytes = QuantScheme::int6_d_bytes(nsb);
  const __m256i m63 = _mm256_set1_epi8(0x3F), m03 = _mm256_set1_epi8(0x03), m0c = _mm256_set1_epi8(0x0C),
                m30 = _mm256_set1_epi8(0x30);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    const uint16_t* dt = reinterpret_cast<const uint16_t*>(blk);
    for (int h0 = 0; h0 < 2; h0 += HB) {  // rows 8 h0 .. 8 (h0 + HB) - 1 of the block
      __m256 facc[HB][MB];
      for (int hh = 0; hh < HB; ++hh)
        for (int m = 0; m < MB; ++m) facc[hh][m] = _mm256_setzero_ps();
      for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t* sb = blk + dbytes + s * SB;
        __m256 dv[HB];
        for (int hh = 0; hh < HB; ++hh)
          dv[hh] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dt + 16 * s + 8 * (h0 + hh))));
        for (int u = 0; u < 16; ++u) {
          const int64_t gi = s * 16 + u;
          const uint8_t* r = sb + 192 * u;
          const uint8_t* xg = a.x + gi * G;
          __m256i q[HB][4];
          for (int hh = 0; hh < HB; ++hh) {
            const int o = 32 * (h0 + hh);
            const __m256i p0 = load256(r + o), p1 = load256(r + 64 + o), p2 = load256(r + 128 + o);
            q[hh][0] = _mm256_and_si256(p0, m63);
            q[hh][1] = _mm256_and_si256(p1, m63);
            q[hh][2] = _mm256_and_si256(p2, m63);
            q[hh][3] = _mm256_or_si256(
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(p0, 6), m03),
                                _mm256_and_si256(_mm256_srli_epi16(p1, 4), m0c)),
                _mm256_and_si256(_mm256_srli_epi16(p2, 2), m30));
          }
          for (int hh = 0; hh < HB; ++hh) {
            const __m256 sc = _mm256_mul_ps(dv[hh], _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 3072 + 16 * u + 8 * (h0 + hh))))));
            for (int m = 0; m < MB; ++m) {
              const uint8_t* xm = xg + m * Kp;
              const __m256i z = _mm256_setzero_si256();
              const __m256i s01 = nib_dot(nib_dot(z, q[hh][0], bcast4(xm)), q[hh][1], bcast4(xm + 4));
              const __m256i s23 = nib_dot(nib_dot(z, q[hh][2], bcast4(xm + 8)), q[hh][3], bcast4(xm + 12));
              const __m256i d = widen_add(widen_add(_mm256_set1_epi32(a.gsum8[m * ng + gi]), s01), s23);
              facc[hh][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), sc, facc[hh][m]);
            }
          }
        }
      }
      for (int hh = 0; hh < HB; ++hh) {
        const int64_t n0 = 16 * b + 8 * (h0 + hh);
        for (int m = 0; m < MB; ++m)
          store_half(out + m * ldo + n0, _mm256_mul_ps(facc[hh][m], _mm256_set1_ps(a.sx[m])), n0, w.N);
      }
    }
  }
}

// int2-g16-zp-k (as qgemm_avx512.cc's int2k_rows). Without VNNI a pmaddubsw pair sum of 2-bit
// codes is at most 2 * 3 * 127: the group's 4 vectors sum in 16 bits.
template <int MB, int HB>
void int2k_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1, float* out,
                int64_t ldo) {
  constexpr int G = 16, SB = QuantScheme::kInt2SuperblockBytes;
  const int64_t Kp = w.Kp, ng = Kp / G, nsb = Kp / 256;
  const __m256i m3 = _mm256_set1_epi8(0x03), m15 = _mm256_set1_epi32(15);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    for (int h0 = 0; h0 < 2; h0 += HB) {  // rows 8 h0 .. 8 (h0 + HB) - 1 of the block
      __m256 facc[HB][MB];
      for (int hh = 0; hh < HB; ++hh)
        for (int m = 0; m < MB; ++m) facc[hh][m] = _mm256_setzero_ps();
      for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t* sb = blk + s * SB;
        __m256 dv[HB], dminv[HB];
        for (int hh = 0; hh < HB; ++hh) {
          dv[hh] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 1280 + 16 * (h0 + hh))));
          dminv[hh] = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sb + 1312 + 16 * (h0 + hh))));
        }
        for (int u = 0; u < 16; ++u) {
          const int64_t gi = s * 16 + u;
          const uint8_t* r = sb + 64 * u;
          const uint8_t* xg = a.x + gi * G;
          for (int hh = 0; hh < HB; ++hh) {
            const int h = h0 + hh;
            const __m256i v = load256(r + 32 * h);
            const __m256i q0 = _mm256_and_si256(v, m3), q1 = _mm256_and_si256(_mm256_srli_epi16(v, 2), m3),
                          q2 = _mm256_and_si256(_mm256_srli_epi16(v, 4), m3),
                          q3 = _mm256_and_si256(_mm256_srli_epi16(v, 6), m3);
            const __m256i scm = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 1024 + 16 * u + 8 * h)));
            const __m256 sc = _mm256_mul_ps(dv[hh], _mm256_cvtepi32_ps(_mm256_and_si256(scm, m15)));
            const __m256 mn = _mm256_mul_ps(dminv[hh], _mm256_cvtepi32_ps(_mm256_srli_epi32(scm, 4)));
            for (int m = 0; m < MB; ++m) {
              const uint8_t* xm = xg + m * Kp;
              const __m256i z = _mm256_setzero_si256();
              const __m256i s01 = nib_dot(nib_dot(z, q0, bcast4(xm)), q1, bcast4(xm + 4));
              const __m256i s0123 = nib_dot(nib_dot(s01, q2, bcast4(xm + 8)), q3, bcast4(xm + 12));
              const __m256i d = widen_add(z, s0123);
              facc[hh][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), sc, facc[hh][m]);
              facc[hh][m] = _mm256_fnmadd_ps(_mm256_set1_ps(a.gsumf[m * ng + gi]), mn, facc[hh][m]);
            }
          }
        }
      }
      for (int hh = 0; hh < HB; ++hh) {
        const int64_t n0 = 16 * b + 8 * (h0 + hh);
        for (int m = 0; m < MB; ++m)
          store_half(out + m * ldo + n0, _mm256_mul_ps(facc[hh][m], _mm256_set1_ps(a.sx[m])), n0, w.N);
      }
    }
  }
}

// int3-g16-k (qgemm.cc runs it at the AVX2 and AVX-VNNI levels): one record of 3 lines A B C per pair of
// groups, read in order (kernels/quantized.h). Six of a record's eight code vectors are a shift
// and a mask; vectors 2 and 5 join 2 bits of A (B) with a bit of C. (16-bit shifts: each mask
// keeps bits of the byte's own.)
inline void int3_unpack(__m256i A, __m256i B, __m256i C, __m256i* q) {
  const __m256i m3 = _mm256_set1_epi8(0x03), m4 = _mm256_set1_epi8(0x04), m7 = _mm256_set1_epi8(0x07);
  q[0] = _mm256_and_si256(A, m7);
  q[1] = _mm256_and_si256(_mm256_srli_epi16(A, 3), m7);
  q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 6), m3), _mm256_and_si256(_mm256_srli_epi16(C, 4), m4));
  q[3] = _mm256_and_si256(B, m7);
  q[4] = _mm256_and_si256(_mm256_srli_epi16(B, 3), m7);
  q[5] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(B, 6), m3), _mm256_and_si256(_mm256_srli_epi16(C, 5), m4));
  q[6] = _mm256_and_si256(C, m7);
  q[7] = _mm256_and_si256(_mm256_srli_epi16(C, 3), m7);
}

// The sums are integers up to the superblock (qrows_scalar's order). Each 32-bit lane of a
// pmaddubsw sum holds a row's two 16-bit halves of a group's dot, each at most 8 * 7 * 127 =
// 7112; -4 x the group's x8 sum (gsum8, at most 8128) joins the low half, and one pmaddwd against
// (sc, sc) gives (dot - 4 sum) x sc in 32 bits: the group's widening and its scale in one
// instruction. A superblock's 16 such terms (at most 16 * 8128 * 32 < 2^24) are exact as f32, times
// d in one fma. (Plain AVX2 instructions in the VNNI build too, where NV_QENTRY forwards int3 to
// qrows_avx2 anyway.)
template <int MB, int HB>
void int3k_rows(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1, float* out,
                int64_t ldo) {
  constexpr int G = 16, SB = QuantScheme::kInt3SuperblockBytes;
  const int64_t Kp = w.Kp, ng = Kp / G, nsb = Kp / 256, dbytes = QuantScheme::int6_d_bytes(nsb);
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    const uint16_t* dt = reinterpret_cast<const uint16_t*>(blk);
    for (int h0 = 0; h0 < 2; h0 += HB) {  // rows 8 h0 .. 8 (h0 + HB) - 1 of the block
      __m256 facc[HB][MB];
      for (int hh = 0; hh < HB; ++hh)
        for (int m = 0; m < MB; ++m) facc[hh][m] = _mm256_setzero_ps();
      for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t* sb = blk + dbytes + s * SB;
        __m256i isum[HB][MB];
        for (int hh = 0; hh < HB; ++hh)
          for (int m = 0; m < MB; ++m) isum[hh][m] = _mm256_setzero_si256();
        for (int p = 0; p < 8; ++p) {  // groups 2p, 2p + 1
          const uint8_t* rec = sb + 192 * p;
          for (int hh = 0; hh < HB; ++hh) {
            const int o = 32 * (h0 + hh);
            __m256i q[8];
            int3_unpack(load256(rec + o), load256(rec + 64 + o), load256(rec + 128 + o), q);
            for (int odd = 0; odd < 2; ++odd) {
              const int u = 2 * p + odd;
              const int64_t gi = s * 16 + u;
              const uint8_t* xg = a.x + gi * G;
              const __m256i sc32 = _mm256_cvtepi8_epi32(
                  _mm_loadl_epi64(reinterpret_cast<const __m128i*>(sb + 1536 + 16 * u + 8 * (h0 + hh))));
              const __m256i sc16 = _mm256_blend_epi16(sc32, _mm256_slli_epi32(sc32, 16), 0xAA);  // (sc, sc)
              const __m256i* qg = q + 4 * odd;
              for (int m = 0; m < MB; ++m) {
                const uint8_t* xm = xg + m * Kp;
                const __m256i s01 = _mm256_add_epi16(_mm256_maddubs_epi16(qg[0], bcast4(xm)),
                                                     _mm256_maddubs_epi16(qg[1], bcast4(xm + 4)));
                const __m256i s23 = _mm256_add_epi16(_mm256_maddubs_epi16(qg[2], bcast4(xm + 8)),
                                                     _mm256_maddubs_epi16(qg[3], bcast4(xm + 12)));
                const __m256i g = _mm256_set1_epi32(a.gsum8[m * ng + gi] & 0xFFFF);  // in the low half
                const __m256i d = _mm256_add_epi16(_mm256_add_epi16(s01, s23), g);
                isum[hh][m] = _mm256_add_epi32(isum[hh][m], _mm256_madd_epi16(d, sc16));
              }
            }
          }
        }
        for (int hh = 0; hh < HB; ++hh) {
          const __m256 dv =
              _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(dt + 16 * s + 8 * (h0 + hh))));
          for (int m = 0; m < MB; ++m)
            facc[hh][m] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[hh][m]), dv, facc[hh][m]);
        }
      }
      for (int hh = 0; hh < HB; ++hh) {
        const int64_t n0 = 16 * b + 8 * (h0 + hh);
        for (int m = 0; m < MB; ++m)
          store_half(out + m * ldo + n0, _mm256_mul_ps(facc[hh][m], _mm256_set1_ps(a.sx[m])), n0, w.N);
      }
    }
  }
}

template <int MB>
void rows_m(const QWeightView& w, const QActs& a, int64_t b0, int64_t b1, float* out,
            int64_t ldo) {
  constexpr int HB = MB == 1 ? 2 : 1;
  if (w.kind == QuantKind::Int6) return int6k_rows<MB, HB>(w, a, b0, b1, out, ldo);
  if (w.kind == QuantKind::Int5)
    return w.k_superblocks ? int5k_rows<MB, HB>(w, a, b0, b1, out, ldo)
           : w.f32_params  ? int5f_rows<MB, HB, true>(w, a, b0, b1, out, ldo)
                           : int5f_rows<MB, HB, false>(w, a, b0, b1, out, ldo);
  if (w.kind == QuantKind::Int2) return int2k_rows<MB, HB>(w, a, b0, b1, out, ldo);
  if (w.kind == QuantKind::Int3) return int3k_rows<MB, HB>(w, a, b0, b1, out, ldo);
  if (w.k_superblocks) return int4k_rows<MB, HB>(w, a, b0, b1, out, ldo);
  if (w.kind == QuantKind::Int8)
    return w.group > 0 ? int8g_rows<MB, HB>(w, a, b0, b1, out, ldo) : int8_rows<MB, HB>(w, a, b0, b1, out, ldo);
  if (w.nl_table) return int4_rows<MB, HB, 32, false, false, true>(w, a, b0, b1, out, ldo);
  if (w.f32_params) return int4_rows<MB, HB, 32, true, true>(w, a, b0, b1, out, ldo);  // group 32 only
  if (w.group == 32)
    return w.zero_points ? int4_rows<MB, HB, 32, true>(w, a, b0, b1, out, ldo)
                         : int4_rows<MB, HB, 32, false>(w, a, b0, b1, out, ldo);
  return w.zero_points ? int4_rows<MB, HB, 64, true>(w, a, b0, b1, out, ldo)
                       : int4_rows<MB, HB, 64, false>(w, a, b0, b1, out, ldo);
}

}  // namespace

void NV_QENTRY(const QWeightView& w, const QActs& a, int M, int64_t b0, int64_t b1, float* out,
               int64_t ldo) {
#if NV_QVNNI
  if (w.kind == QuantKind::Int3) return qrows_avx2(w, a, M, b0, b1, out, ldo);  // the tested build of its kernel
#endif
  switch (M) {
    case 1: return rows_m<1>(w, a, b0, b1, out, ldo);
    case 2: return rows_m<2>(w, a, b0, b1, out, ldo);
    case 3: return rows_m<3>(w, a, b0, b1, out, ldo);
    case 4: return rows_m<4>(w, a, b0, b1, out, ldo);
    default:  // 5..8: two calls of up to 4 rows (more ymm accumulators would spill)
      // int6 spends 16 uops per group unpacking its codes: a full chunk of 8 rows shares them
      // (its 8 accumulators fit beside the 4 code vectors; +2-16% at M = 64 / 512 on Zen 4,
      // docs/perf.md).
      if (w.kind == QuantKind::Int6 && M == kQMaxRows) return int6k_rows<kQMaxRows, 1>(w, a, b0, b1, out, ldo);
      rows_m<4>(w, a, b0, b1, out, ldo);
      QActs rest = a;
      rest.x += 4 * a.Kp;
      rest.sx += 4;
      if (rest.gsum8) rest.gsum8 += 4 * (a.Kp / w.group);
      if (rest.gsumf) rest.gsumf += 4 * (a.Kp / w.group);
      return NV_QENTRY(w, rest, M - 4, b0, b1, out + 4 * ldo, ldo);
  }
}

}  // namespace nanovllm::cpu
