// ggml block formats -> f32. Each routine follows the arithmetic of ggml's reference
// dequantize_row_* (scales formed in float first, then multiplied by the integer), so the
// results are the floats llama.cpp's own reference path produces.
#include "loader/gguf_quants.h"

#include <cstring>

#include "kernels/int4_groups.h"
#include "util/check.h"
#include "util/dtype.h"

namespace nanovllm {

namespace {

constexpr int QK_K = 256;

inline float h2f(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

// IQ4_NL / IQ4_XS code book (ggml's kvalues_iq4nl; the int4-g32-nl kernels use the same).
constexpr const int8_t* kIq4nl = kIq4nlTable;

// Q4_K / Q5_K: the 6-bit scale and min of sub-block j from the 12 packed bytes. Sub-blocks
// 0-3 keep their 6 bits in bytes j and j+4; 4-7 take 4 bits from byte j+4 and their top two
// bits from the spare high bits of bytes j-4 (scale) and j (min).
inline void scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Q4_K / Q5_K: the scales and mins (d * sc, dmin * m) of the sub-block pair (is, is + 1).
inline void k4_pair(const uint8_t* sc, int is, float d, float dmin, float* d1, float* m1,
                    float* d2, float* m2) {
  uint8_t s, m;
  scale_min_k4(is, sc, &s, &m);
  *d1 = d * float(s);
  *m1 = dmin * float(m);
  scale_min_k4(is + 1, sc, &s, &m);
  *d2 = d * float(s);
  *m2 = dmin * float(m);
}

void deq_q4_0(const uint8_t* b, float* y) {  // 18 bytes: d, qs[16]
  const float d = h2f(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = float((qs[j] & 0x0F) - 8) * d;
    y[j + 16] = float((qs[j] >> 4) - 8) * d;
  }
}

void deq_q4_1(const uint8_t* b, float* y) {  // 20 bytes: d, m, qs[16]
  const float d = h2f(b), m = h2f(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = float(qs[j] & 0x0F) * d + m;
    y[j + 16] = float(qs[j] >> 4) * d + m;
  }
}

void deq_q5_0(const uint8_t* b, float* y) {  // 22 bytes: d, qh (u32), qs[16]
  const float d = h2f(b);
  uint32_t qh;
  std::memcpy(&qh, b + 2, 4);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int h0 = int(((qh >> j) << 4) & 0x10), h1 = int((qh >> (j + 12)) & 0x10);
    y[j] = float(((qs[j] & 0x0F) | h0) - 16) * d;
    y[j + 16] = float(((qs[j] >> 4) | h1) - 16) * d;
  }
}

void deq_q5_1(const uint8_t* b, float* y) {  // 24 bytes: d, m, qh (u32), qs[16]
  const float d = h2f(b), m = h2f(b + 2);
  uint32_t qh;
  std::memcpy(&qh, b + 4, 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int h0 = int(((qh >> j) << 4) & 0x10), h1 = int((qh >> (j + 12)) & 0x10);
    y[j] = float((qs[j] & 0x0F) | h0) * d + m;
    y[j + 16] = float((qs[j] >> 4) | h1) * d + m;
  }
}

void deq_q8_0(const uint8_t* b, float* y) {  // 34 bytes: d, qs[32] (i8)
  const float d = h2f(b);
  for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
}

void deq_q2_k(const uint8_t* b, float* y) {  // 84 bytes: scales[16], qs[64], d, dmin
  const uint8_t* sc = b;
  const uint8_t* q = b + 16;
  const float d = h2f(b + 80), dmin = h2f(b + 82);
  int is = 0;
  for (int n = 0; n < QK_K; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t s = sc[is++];
        const float dl = d * float(s & 0xF), ml = dmin * float(s >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * float((q[l + 16 * half] >> shift) & 3) - ml;
      }
      shift += 2;
    }
    q += 32;
  }
}

void deq_q3_k(const uint8_t* b, float* y) {  // 110 bytes: hmask[32], qs[64], scales[12], d
  const uint8_t* hm = b;
  const uint8_t* q = b + 32;
  const uint8_t* packed = b + 96;
  const float d_all = h2f(b + 108);
  // 16 6-bit scales: low 4 bits in bytes 0-7 (two per byte), high 2 bits in bytes 8-11.
  int8_t scales[16];
  for (int i = 0; i < 16; ++i) {
    const int lo = (packed[i % 8] >> (4 * (i / 8))) & 0xF;
    const int hi = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    scales[i] = int8_t((lo | (hi << 4)) - 32);
  }
  int is = 0;
  uint8_t m = 1;
  for (int n = 0; n < QK_K; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d_all * float(scales[is++]);
        for (int l = 0; l < 16; ++l) {
          const int k = l + 16 * half;
          const int v = int((q[k] >> shift) & 3) - ((hm[k] & m) ? 0 : 4);
          *y++ = dl * float(v);
        }
      }
      shift += 2;
      m = uint8_t(m << 1);
    }
    q += 32;
  }
}

void deq_q4_k(const uint8_t* b, float* y) {  // 144 bytes: d, dmin, scales[12], qs[128]
  const float d = h2f(b), dmin = h2f(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* q = b + 16;
  for (int j = 0, is = 0; j < QK_K; j += 64, is += 2) {
    float d1, m1, d2, m2;
    k4_pair(sc, is, d, dmin, &d1, &m1, &d2, &m2);
    for (int l = 0; l < 32; ++l) *y++ = d1 * float(q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * float(q[l] >> 4) - m2;
    q += 32;
  }
}

}  // namespace

void unpack_row_q4_k(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* min, float* d_out,
                     float* dmin_out, uint8_t* sc_out, uint8_t* m_out) {
  NV_CHECK(n % QK_K == 0, "unpack_row_q4_k: ", n, " elements are not whole 256-blocks");
  for (int64_t b = 0; b < n / QK_K; ++b, src += 144) {
    const float d = h2f(src), dmin = h2f(src + 2);
    d_out[b] = d, dmin_out[b] = dmin;
    const uint8_t* sc = src + 4;
    const uint8_t* qs = src + 16;
    for (int p = 0; p < 4; ++p, qs += 32) {  // sub-blocks 2p (low nibbles) and 2p + 1 (high)
      float d1, m1, d2, m2;
      k4_pair(sc, 2 * p, d, dmin, &d1, &m1, &d2, &m2);
      scale[0] = d1, min[0] = -m1, scale[1] = d2, min[1] = -m2;
      scale += 2, min += 2;
      for (int i = 0; i < 2; ++i) scale_min_k4(2 * p + i, sc, sc_out++, m_out++);
      for (int l = 0; l < 32; ++l) q[l] = qs[l] & 0xF, q[32 + l] = qs[l] >> 4;
      q += 64;
    }
  }
}

namespace {

void deq_q5_k(const uint8_t* b, float* y) {  // 176 bytes: d, dmin, scales[12], qh[32], qs[128]
  const float d = h2f(b), dmin = h2f(b + 2);
  const uint8_t* sc = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* ql = b + 48;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0, is = 0; j < QK_K; j += 64, is += 2) {
    float d1, m1, d2, m2;
    k4_pair(sc, is, d, dmin, &d1, &m1, &d2, &m2);
    for (int l = 0; l < 32; ++l) *y++ = d1 * float((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * float((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    ql += 32;
    u1 = uint8_t(u1 << 2);
    u2 = uint8_t(u2 << 2);
  }
}

void deq_q6_k(const uint8_t* b, float* y) {  // 210 bytes: ql[128], qh[64], scales[16] (i8), d
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192);
  const float d = h2f(b + 208);
  for (int n = 0; n < QK_K; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * float(sc[is + 0]) * float(q1);
      y[l + 32] = d * float(sc[is + 2]) * float(q2);
      y[l + 64] = d * float(sc[is + 4]) * float(q3);
      y[l + 96] = d * float(sc[is + 6]) * float(q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace

void unpack_row_q5_k(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* min, float* d_out,
                     float* dmin_out, uint8_t* sc_out, uint8_t* m_out) {
  NV_CHECK(n % QK_K == 0, "unpack_row_q5_k: ", n, " elements are not whole 256-blocks");
  for (int64_t b = 0; b < n / QK_K; ++b, src += 176) {  // as deq_q5_k, element e at q[e]
    const float d = h2f(src), dmin = h2f(src + 2);
    d_out[b] = d, dmin_out[b] = dmin;
    const uint8_t* sc = src + 4;
    const uint8_t* qh = src + 16;
    const uint8_t* ql = src + 48;
    for (int p = 0; p < 4; ++p, ql += 32, q += 64) {  // sub-blocks 2p (low nibbles) and 2p + 1 (high)
      float d1, m1, d2, m2;
      k4_pair(sc, 2 * p, d, dmin, &d1, &m1, &d2, &m2);
      scale[0] = d1, min[0] = -m1, scale[1] = d2, min[1] = -m2;
      scale += 2, min += 2;
      for (int i = 0; i < 2; ++i) scale_min_k4(2 * p + i, sc, sc_out++, m_out++);
      const int u1 = 1 << (2 * p), u2 = 2 << (2 * p);
      for (int l = 0; l < 32; ++l) {
        q[l] = uint8_t((ql[l] & 0xF) | ((qh[l] & u1) ? 16 : 0));
        q[32 + l] = uint8_t((ql[l] >> 4) | ((qh[l] & u2) ? 16 : 0));
      }
    }
  }
}

void unpack_row_q5_1(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* min) {
  NV_CHECK(n % 32 == 0, "unpack_row_q5_1: ", n, " elements are not whole 32-blocks");
  for (int64_t b = 0; b < n / 32; ++b, src += 24, q += 32) {  // as deq_q5_1: x = q d + m
    scale[b] = h2f(src), min[b] = h2f(src + 2);
    uint32_t qh;
    std::memcpy(&qh, src + 4, 4);
    const uint8_t* qs = src + 8;
    for (int j = 0; j < 16; ++j) {
      q[j] = uint8_t((qs[j] & 0x0F) | (((qh >> j) << 4) & 0x10));
      q[j + 16] = uint8_t((qs[j] >> 4) | ((qh >> (j + 12)) & 0x10));
    }
  }
}

void unpack_row_q2_k(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* min, float* d_out,
                     float* dmin_out, uint8_t* sc_out, uint8_t* m_out) {
  NV_CHECK(n % QK_K == 0, "unpack_row_q2_k: ", n, " elements are not whole 256-blocks");
  for (int64_t b = 0; b < n / QK_K; ++b, src += 84) {  // as deq_q2_k, element e at q[e]
    const float d = h2f(src + 80), dmin = h2f(src + 82);
    d_out[b] = d, dmin_out[b] = dmin;
    for (int g = 0; g < 16; ++g) {  // group g: elements 16g .. 16g + 15, deq_q2_k's `is`
      const uint8_t s = src[g];
      sc_out[g] = s & 0xF, m_out[g] = s >> 4;
      scale[g] = d * float(s & 0xF);    // deq_q2_k's dl: an exact product (f16 x 4-bit integer)
      min[g] = -(dmin * float(s >> 4));  // minus its ml, exact likewise
      // Element 128h + 32j + 16 half + l: bits 2j, 2j+1 of qs[32h + 16 half + l].
      const int h = g / 8, j = (g % 8) / 2, half = g % 2;
      for (int l = 0; l < 16; ++l) q[16 * g + l] = uint8_t((src[16 + 32 * h + 16 * half + l] >> (2 * j)) & 3);
    }
    q += QK_K, scale += 16, min += 16, sc_out += 16, m_out += 16;
  }
}

void unpack_row_q6_k(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* d_out, uint8_t* sc_out) {
  NV_CHECK(n % QK_K == 0, "unpack_row_q6_k: ", n, " elements are not whole 256-blocks");
  for (int64_t b = 0; b < n / QK_K; ++b, src += 210) {  // as deq_q6_k, element e at q[e]
    const uint8_t* ql = src;
    const uint8_t* qh = src + 128;
    const float d = h2f(src + 208);
    d_out[b] = d;
    for (int g = 0; g < 16; ++g) {
      sc_out[g] = src[192 + g];
      scale[g] = d * float(int8_t(src[192 + g]));
    }
    for (int h = 0; h < 2; ++h, ql += 64, qh += 32, q += 128)
      for (int l = 0; l < 32; ++l) {
        q[l] = uint8_t((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4));
        q[l + 32] = uint8_t((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4));
        q[l + 64] = uint8_t((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
        q[l + 96] = uint8_t((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
      }
    scale += 16, sc_out += 16;
  }
}

void unpack_row_q3_k(const uint8_t* src, int64_t n, uint8_t* q, float* scale, float* d_out, uint8_t* sc_out) {
  NV_CHECK(n % QK_K == 0, "unpack_row_q3_k: ", n, " elements are not whole 256-blocks");
  for (int64_t b = 0; b < n / QK_K; ++b, src += 110) {  // as deq_q3_k, element e at q[e]
    const uint8_t* hm = src;
    const uint8_t* qs = src + 32;
    const uint8_t* packed = src + 96;
    const float d = h2f(src + 108);
    d_out[b] = d;
    for (int i = 0; i < 16; ++i) {
      const int lo = (packed[i % 8] >> (4 * (i / 8))) & 0xF;
      const int hi = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
      const int8_t s = int8_t((lo | (hi << 4)) - 32);
      sc_out[i] = uint8_t(s);
      scale[i] = d * float(s);  // deq_q3_k's dl: an exact product (f16 x 6-bit integer)
    }
    // Element 128h + 32j + l (l < 32): bits 2j, 2j+1 of qs[32h + l], minus 4 unless bit
    // 4h + j of hm[l] is set.
    for (int h = 0; h < 2; ++h)
      for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
          const int v = int((qs[32 * h + l] >> (2 * j)) & 3) - ((hm[l] >> (4 * h + j)) & 1 ? 0 : 4);
          q[128 * h + 32 * j + l] = uint8_t(v + 4);
        }
    q += QK_K, scale += 16, sc_out += 16;
  }
}

void unpack_row_iq4_nl(const uint8_t* src, int64_t n, uint8_t* q, float* scale) {
  NV_CHECK(n % 32 == 0, "unpack_row_iq4_nl: ", n, " elements are not whole 32-blocks");
  for (int64_t b = 0; b < n / 32; ++b, src += 18, q += 32) {  // as deq_iq4_nl
    scale[b] = h2f(src);
    for (int j = 0; j < 16; ++j) q[j] = src[2 + j] & 0xF, q[j + 16] = src[2 + j] >> 4;
  }
}

void unpack_row_iq4_xs(const uint8_t* src, int64_t n, uint8_t* q, float* scale) {
  NV_CHECK(n % QK_K == 0, "unpack_row_iq4_xs: ", n, " elements are not whole 256-blocks");
  for (int64_t b = 0; b < n / QK_K; ++b, src += 136) {  // as deq_iq4_xs
    const float d = h2f(src);
    uint16_t sh;
    std::memcpy(&sh, src + 2, 2);
    const uint8_t* sl = src + 4;
    const uint8_t* qs = src + 8;
    for (int ib = 0; ib < QK_K / 32; ++ib, qs += 16, q += 32) {
      const int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
      *scale++ = d * float(ls - 32);  // deq_iq4_xs's dl: an exact product (f16 x 6-bit integer)
      for (int j = 0; j < 16; ++j) q[j] = qs[j] & 0xF, q[j + 16] = qs[j] >> 4;
    }
  }
}

namespace {

void deq_iq4_nl(const uint8_t* b, float* y) {  // 18 bytes: d, qs[16]
  const float d = h2f(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(kIq4nl[qs[j] & 0xF]);
    y[j + 16] = d * float(kIq4nl[qs[j] >> 4]);
  }
}

void deq_iq4_xs(const uint8_t* b, float* y) {  // 136 bytes: d, scales_h (u16), scales_l[4], qs[128]
  const float d = h2f(b);
  uint16_t sh;
  std::memcpy(&sh, b + 2, 2);
  const uint8_t* sl = b + 4;
  const uint8_t* qs = b + 8;
  for (int ib = 0; ib < QK_K / 32; ++ib) {
    const int ls = ((sl[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
    const float dl = d * float(ls - 32);
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * float(kIq4nl[qs[j] & 0xF]);
      y[j + 16] = dl * float(kIq4nl[qs[j] >> 4]);
    }
    y += 32;
    qs += 16;
  }
}

}  // namespace

GgmlTypeInfo ggml_type_info(uint32_t type) {
  switch (GgmlType(type)) {
    case GgmlType::F32: return {"F32", 1, 4, true};
    case GgmlType::F16: return {"F16", 1, 2, true};
    case GgmlType::BF16: return {"BF16", 1, 2, true};
    case GgmlType::Q4_0: return {"Q4_0", 32, 18, true};
    case GgmlType::Q4_1: return {"Q4_1", 32, 20, true};
    case GgmlType::Q5_0: return {"Q5_0", 32, 22, true};
    case GgmlType::Q5_1: return {"Q5_1", 32, 24, true};
    case GgmlType::Q8_0: return {"Q8_0", 32, 34, true};
    case GgmlType::Q8_1: return {"Q8_1", 32, 36, false};
    case GgmlType::Q2_K: return {"Q2_K", 256, 84, true};
    case GgmlType::Q3_K: return {"Q3_K", 256, 110, true};
    case GgmlType::Q4_K: return {"Q4_K", 256, 144, true};
    case GgmlType::Q5_K: return {"Q5_K", 256, 176, true};
    case GgmlType::Q6_K: return {"Q6_K", 256, 210, true};
    case GgmlType::Q8_K: return {"Q8_K", 256, 292, false};
    case GgmlType::IQ2_XXS: return {"IQ2_XXS", 256, 66, false};
    case GgmlType::IQ2_XS: return {"IQ2_XS", 256, 74, false};
    case GgmlType::IQ3_XXS: return {"IQ3_XXS", 256, 98, false};
    case GgmlType::IQ1_S: return {"IQ1_S", 256, 50, false};
    case GgmlType::IQ4_NL: return {"IQ4_NL", 32, 18, true};
    case GgmlType::IQ3_S: return {"IQ3_S", 256, 110, false};
    case GgmlType::IQ2_S: return {"IQ2_S", 256, 82, false};
    case GgmlType::IQ4_XS: return {"IQ4_XS", 256, 136, true};
    case GgmlType::I8: return {"I8", 1, 1, false};
    case GgmlType::I16: return {"I16", 1, 2, false};
    case GgmlType::I32: return {"I32", 1, 4, false};
    case GgmlType::I64: return {"I64", 1, 8, false};
    case GgmlType::F64: return {"F64", 1, 8, false};
    case GgmlType::IQ1_M: return {"IQ1_M", 256, 56, false};
    case GgmlType::TQ1_0: return {"TQ1_0", 256, 54, false};
    case GgmlType::TQ2_0: return {"TQ2_0", 256, 66, false};
    case GgmlType::MXFP4: return {"MXFP4", 32, 17, false};
  }
  return {nullptr, 1, 1, false};
}

std::string ggml_type_name(uint32_t type) {
  const GgmlTypeInfo i = ggml_type_info(type);
  return i.name ? std::string(i.name) : "type " + std::to_string(type);
}

void dequantize_row(GgmlType type, const uint8_t* src, float* out, int64_t n) {
  const GgmlTypeInfo info = ggml_type_info(uint32_t(type));
  NV_CHECK(info.name && info.dequantizable, "cannot dequantize ggml type ", ggml_type_name(uint32_t(type)));
  NV_CHECK(n % info.block_size == 0, "row of ", n, " elements is not a multiple of the ",
           info.name, " block size ", info.block_size);
  switch (type) {
    case GgmlType::F32: std::memcpy(out, src, size_t(n) * 4); return;
    case GgmlType::F16:
      for (int64_t i = 0; i < n; ++i) out[i] = h2f(src + 2 * i);
      return;
    case GgmlType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      return;
    default: break;
  }
  void (*fn)(const uint8_t*, float*) = nullptr;
  switch (type) {
    case GgmlType::Q4_0: fn = deq_q4_0; break;
    case GgmlType::Q4_1: fn = deq_q4_1; break;
    case GgmlType::Q5_0: fn = deq_q5_0; break;
    case GgmlType::Q5_1: fn = deq_q5_1; break;
    case GgmlType::Q8_0: fn = deq_q8_0; break;
    case GgmlType::Q2_K: fn = deq_q2_k; break;
    case GgmlType::Q3_K: fn = deq_q3_k; break;
    case GgmlType::Q4_K: fn = deq_q4_k; break;
    case GgmlType::Q5_K: fn = deq_q5_k; break;
    case GgmlType::Q6_K: fn = deq_q6_k; break;
    case GgmlType::IQ4_NL: fn = deq_iq4_nl; break;
    case GgmlType::IQ4_XS: fn = deq_iq4_xs; break;
    default: NV_THROW("cannot dequantize ggml type ", info.name);
  }
  const int64_t nb = n / info.block_size;
  for (int64_t i = 0; i < nb; ++i) fn(src + i * info.type_size, out + i * info.block_size);
}

}  // namespace nanovllm
