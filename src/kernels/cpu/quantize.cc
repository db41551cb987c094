// Weight quantization: int8 per output channel or per group of 32 (f16 scales), int4 per group
// (symmetric or with zero points),
// written in the kernels' layout (kernels/quantized.h). Scales are rounded to their storage
// type first and the integers computed with the rounded scale, so the stored weight is the
// nearest one the format can express for that scale.
#include "kernels/cpu/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/quantize_int4.h"
#include "kernels/int4_groups.h"
#include "util/check.h"

namespace nanovllm::cpu {

namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

inline int nearest(float v) { return round_nearest(v); }

// q[i] = round(w[i] / s) clamped to [-127, 127] (s = 0: all 0); returns the sum of q.
int32_t int8_codes(const float* w, int64_t n, float s, int8_t* q) {
  const float inv = s > 0.f ? 1.f / s : 0.f;
  int32_t total = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int v = std::clamp(nearest(w[i] * inv), -127, 127);
    q[i] = int8_t(v);
    total += v;
  }
  return total;
}

float abs_max(const float* w, int64_t n) {
  float amax = 0.f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::abs(w[i]));
  return amax;
}

// One row of int8: q = round(w / s), s = max|w| / 127.
void quantize_row_int8(const float* w, int64_t K, int8_t* q, float* scale, int32_t* sum) {
  *scale = abs_max(w, K) / 127.f;
  *sum = int8_codes(w, K, *scale, q);
}

// Whether s * q[i] (the f32 product dequantize_row forms) is w[i] for every i.
bool exact_with(const float* w, int g, float s, const int8_t* q) {
  for (int i = 0; i < g; ++i)
    if (s * float(q[i]) != w[i]) return false;
  return true;
}

// The denominator b <= 127 of the reduced fraction a / b within 1e-5 of t in (0, 1), or 0 when
// there is none: t's continued-fraction convergents, stopped past denominator 127. (Distinct
// fractions of denominators <= 127 are >= 1 / 127^2 = 6e-5 apart, so the tolerance, far above
// t's f32 rounding, picks at most one.)
int small_denominator(double t) {
  double x = t;
  int64_t h0 = 0, h1 = 1, k0 = 1, k1 = 0;  // convergents h / k, seeded h_-2 / k_-2 = 0 / 1, h_-1 / k_-1 = 1 / 0
  for (int it = 0; it < 16; ++it) {
    const double a = std::floor(x);
    const int64_t h2 = int64_t(a) * h1 + h0, k2 = int64_t(a) * k1 + k0;
    if (k2 > 127) return 0;
    if (std::abs(t - double(h2) / double(k2)) < 1e-5) return int(k2);
    h0 = h1, h1 = h2, k0 = k1, k1 = k2;
    if (x - a < 1e-9) return 0;
    x = 1.0 / (x - a);
  }
  return 0;
}

// A group that is exactly s * q for an f16 s and integers |q| <= 127 with max |q| = c < 127:
// ggml's Q5_0 (w = d (q - 16), c <= 16) and IQ4_NL (w = d kvalue[q], c = |kvalue| <= 127)
// blocks, and some IQ4_XS / Q5_1 / Q2_K ones. Then amax / c is exactly s (amax = c |s| is an
// exact f32 product). For an element p strictly between 0 and amax, |w[p]| / amax = q[p] / c
// is a fraction whose reduced denominator divides c: c must be a multiple of the least common
// multiple L of three such elements' denominators, and only those c are checked in full. A
// group on no such grid (a bf16 checkpoint's) usually stops at a fraction or at L > 126 (about
// 3 operations per weight). Returns false when no c fits.
bool exact_int8_group(const float* w, int g, float amax, int8_t* q, uint16_t* scale, int16_t* sum) {
  int64_t L = 1;
  for (int i = 0, probes = 0; i < g && probes < 3; ++i) {
    if (w[i] == 0.f || std::abs(w[i]) == amax) continue;
    const int b = small_denominator(double(std::abs(w[i])) / double(amax));
    if (b == 0) return false;
    L = std::lcm(L, int64_t(b));
    if (L > 126) return false;
    ++probes;
  }
  for (int64_t c = 126 / L * L; c >= 1; c -= L) {
    const uint16_t s16 = f32_to_f16(amax / float(c));
    const float s = f16_to_f32(s16);
    if (!(s > 0.f) || !std::isfinite(s)) continue;
    const float inv = 1.f / s;
    int32_t total = 0;
    int i = 0;
    for (; i < g; ++i) {  // int8_codes' rounding, stopping at the first inexact weight
      const int v = nearest(w[i] * inv);
      if (v < -127 || v > 127 || s * float(v) != w[i]) break;
      q[i] = int8_t(v);
      total += v;
    }
    if (i < g) continue;
    *scale = s16;
    *sum = int16_t(total);
    return true;
  }
  return false;
}

// One int8 group (int8-g32): s = f16(max|w| / 127), q = round(w / s) with the f16 scale. A
// ggml Q8_0 block (w = d q, max |q| = 127: how ggml quantizes) gives back s = d and the same q:
// 127 d / 127 is exactly d in f32, and d q is exact, so the repack is lossless. With
// exact_grid (QuantScheme: weights from a GGUF block type) a group on a coarser exact grid
// (exact_int8_group) keeps that grid: the weights come back unchanged. (Not by default: the
// search costs ~60% more quantization time on a bf16 checkpoint's groups, which never fit.)
void quantize_group_int8(const float* w, int g, bool exact_grid, int8_t* q, uint16_t* scale, int16_t* sum) {
  const float amax = abs_max(w, g);
  // Clamped to the largest finite f16 (65504) so a huge weight cannot make an infinite scale.
  *scale = f32_to_f16(std::min(amax / 127.f, 65504.f));
  *sum = int16_t(int8_codes(w, g, f16_to_f32(*scale), q));  // |sum| <= 32 x 127
  if (!exact_grid || amax == 0.f || !std::isfinite(amax) || exact_with(w, g, f16_to_f32(*scale), q)) return;
  int8_t q2[64];
  uint16_t s2 = 0;
  int16_t sum2 = 0;
  if (exact_int8_group(w, g, amax, q2, &s2, &sum2)) {
    std::memcpy(q, q2, size_t(g));
    *scale = s2;
    *sum = sum2;
  }
}

// Byte offsets in a block of 16 rows (kernels/quantized.h): int8 q[r][k] (also within an
// int8-g32 record, k < 32); int4 q[r][k] of group gi's record (the nibble: high when
// (k % 8) >= 4).
int64_t int8_offset(int64_t r, int64_t k) { return (k / 4) * 64 + 4 * r + k % 4; }
int64_t int4_offset(int64_t r, int64_t e) { return (e / 8) * 64 + 4 * r + e % 4; }

// One block of 16 rows (w: [16, Kp] f32, zero padded) into its bytes.
void quantize_block(const float* w, const QuantizedWeight& qw, int64_t block, uint8_t* dst) {
  const int64_t Kp = qw.Kp, R = QuantizedWeight::kBlockRows;
  std::memset(dst, 0, size_t(qw.block_bytes));
  if (qw.scheme.int8_groups()) {
    const int g = qw.scheme.group;
    const int64_t rec = qw.group_record_bytes();
    int8_t q[64];
    for (int64_t gi = 0; gi < Kp / g; ++gi) {
      uint8_t* r8 = dst + gi * rec;
      uint16_t* scales = reinterpret_cast<uint16_t*>(r8 + 16 * g);
      int16_t* sums = reinterpret_cast<int16_t*>(r8 + 16 * g + 32);
      for (int64_t r = 0; r < R; ++r) {
        quantize_group_int8(w + r * Kp + gi * g, g, qw.scheme.exact_grid, q, &scales[r], &sums[r]);
        for (int e = 0; e < g; ++e) r8[int8_offset(r, e)] = uint8_t(q[e]);
      }
    }
    return;
  }
  if (qw.scheme.kind == QuantKind::Int8) {
    std::vector<int8_t> q(static_cast<size_t>(Kp));
    for (int64_t r = 0; r < R; ++r) {
      const int64_t n = block * R + r;
      quantize_row_int8(w + r * Kp, Kp, q.data(), qw.scales.data<float>() + n,
                        qw.row_sums.data<int32_t>() + n);
      for (int64_t k = 0; k < Kp; ++k) dst[int8_offset(r, k)] = uint8_t(q[size_t(k)]);
    }
    return;
  }
  const int g = qw.scheme.group;
  const bool zp = qw.scheme.zero_points;
  const int64_t rec = qw.group_record_bytes();
  const bool f32 = qw.scheme.f32_params;
  uint8_t q[64];
  for (int64_t gi = 0; gi < Kp / g; ++gi) {
    uint8_t* r8 = dst + gi * rec;
    uint16_t* scales = reinterpret_cast<uint16_t*>(r8 + 8 * g);
    uint16_t* mins = zp ? scales + 16 : nullptr;
    for (int64_t r = 0; r < R; ++r) {
      if (f32) {  // the same f16 fit, its values stored as f32 (the layout exists for repacks)
        uint16_t s16 = 0, m16 = 0;
        quantize_group_int4(w + r * Kp + gi * g, g, true, q, &s16, &m16);
        float* f = reinterpret_cast<float*>(r8 + 8 * g);
        f[r] = f16_to_f32(s16);
        f[16 + r] = f16_to_f32(m16);
      } else {
        quantize_group_int4(w + r * Kp + gi * g, g, zp, q, &scales[r], mins ? &mins[r] : nullptr);
      }
      for (int e = 0; e < g; ++e)
        r8[int4_offset(r, e)] |= uint8_t(q[e] << ((e % 8) >= 4 ? 4 : 0));
    }
  }
}

}  // namespace

QuantizedWeight quantized_layout(int64_t N, int64_t K, const QuantScheme& scheme) {
  NV_CHECK(scheme.enabled(), "quantized_layout: no quantization scheme");
  QuantizedWeight q;
  q.scheme = scheme;
  q.N = N;
  q.K = K;
  q.Np = round_up(N, QuantizedWeight::kBlockRows);
  if (scheme.int8_groups()) {
    NV_CHECK(scheme.group == 32, "int8 group must be 32, got ", scheme.group);
    q.Kp = round_up(K, scheme.group);
    q.block_bytes = q.Kp / scheme.group * q.group_record_bytes();
  } else if (scheme.kind == QuantKind::Int8) {
    q.Kp = round_up(K, 4);
    q.block_bytes = QuantizedWeight::kBlockRows * q.Kp;
  } else if (scheme.kind == QuantKind::Int5 && !scheme.k_superblocks) {
    NV_CHECK(scheme.group == 32 && scheme.zero_points,
             "int5 without superblocks needs group 32 with scales and mins, got ", scheme.str());
    q.Kp = round_up(K, 32);
    q.block_bytes = q.Kp / 32 * q.group_record_bytes();
  } else if (scheme.kind == QuantKind::Int5) {
    NV_CHECK(scheme.group == 32 && scheme.zero_points && scheme.k_superblocks && K % 256 == 0,
             "int5 needs group 32 with zero points in superblocks and K a multiple of 256, got ", scheme.str(),
             " K = ", K);
    q.Kp = K;
    q.block_bytes = K / 256 * QuantScheme::kInt5SuperblockBytes;
  } else if (scheme.kind == QuantKind::Int2) {
    NV_CHECK(scheme.group == 16 && scheme.zero_points && scheme.k_superblocks && K % 256 == 0,
             "int2 needs group 16 with zero points in superblocks and K a multiple of 256, got ", scheme.str(),
             " K = ", K);
    q.Kp = K;
    q.block_bytes = K / 256 * QuantScheme::kInt2SuperblockBytes;
  } else if (scheme.kind == QuantKind::Int6 || scheme.kind == QuantKind::Int3) {
    const bool i3 = scheme.kind == QuantKind::Int3;
    NV_CHECK(scheme.group == 16 && scheme.k_superblocks && !scheme.zero_points && K % 256 == 0, i3 ? "int3" : "int6",
             " needs group 16 in superblocks and K a multiple of 256, got ", scheme.str(), " K = ", K);
    q.Kp = K;
    q.block_bytes = QuantScheme::int6_d_bytes(K / 256) +
                    K / 256 * (i3 ? QuantScheme::kInt3SuperblockBytes : QuantScheme::kInt6SuperblockBytes);
  } else {
    NV_CHECK(scheme.group == 32 || scheme.group == 64, "int4 group must be 32 or 64, got ",
             scheme.group);
    NV_CHECK(!scheme.f32_params || (scheme.group == 32 && scheme.zero_points),
             "int4 f32 parameters need group 32 with zero points, got ", scheme.str());
    NV_CHECK(!scheme.nl_table || (scheme.group == 32 && !scheme.zero_points && !scheme.f32_params &&
                                  !scheme.k_superblocks),
             "the IQ4 table layout is group 32, symmetric, got ", scheme.str());
    if (scheme.k_superblocks) {
      NV_CHECK(scheme.group == 32 && scheme.zero_points && !scheme.f32_params && K % 256 == 0,
               "int4 superblocks need group 32 with zero points and K a multiple of 256, got ",
               scheme.str(), " K = ", K);
      q.Kp = K;
      q.block_bytes = K / 256 * QuantScheme::kSuperblockBytes;
      return q;
    }
    q.Kp = round_up(K, scheme.group);
    q.block_bytes = q.Kp / scheme.group * q.group_record_bytes();
  }
  return q;
}

int64_t quantized_nbytes(int64_t N, int64_t K, const QuantScheme& scheme) {
  const QuantizedWeight q = quantized_layout(N, K, scheme);
  // int8 per row: an f32 scale + an i32 row sum beside the blocks.
  const int64_t per_row = scheme.kind == QuantKind::Int8 && !scheme.int8_groups() ? 8 : 0;
  return q.Np / QuantizedWeight::kBlockRows * q.block_bytes + q.Np * per_row;
}

QuantizedWeight quantize_weight(const Tensor& w, const QuantScheme& scheme, ThreadPool& pool,
                                const U8Allocator& alloc) {
  NV_CHECK(scheme.enabled(), "quantize_weight: no quantization scheme");
  NV_CHECK(!scheme.k_superblocks && !scheme.nl_table && scheme.kind != QuantKind::Int5, "quantize_weight: ", scheme.str(),
           " is made only by a repack of ",
           scheme.nl_table                 ? "IQ4_NL / IQ4_XS"
           : scheme.kind == QuantKind::Int6 ? "Q6_K"
           : scheme.kind == QuantKind::Int5 ? "Q5_K / Q5_1"
           : scheme.kind == QuantKind::Int2 ? "Q2_K"
           : scheme.kind == QuantKind::Int3 ? "Q3_K"
                                            : "Q4_K");
  NV_CHECK(w.ndim() == 2, "quantize_weight: a weight must be [N, K], got ", w.str());
  const DType dt = w.dtype();
  NV_CHECK(dt == DType::F32 || dt == DType::BF16 || dt == DType::F16,
           "quantize_weight: weights must be F32, BF16 or F16, got ", w.str());
  const int64_t R = QuantizedWeight::kBlockRows;
  QuantizedWeight q = quantized_layout(w.size(0), w.size(1), scheme);
  if (scheme.kind == QuantKind::Int8 && !scheme.int8_groups()) {
    q.scales = Tensor::zeros({q.Np}, DType::F32);
    q.row_sums = Tensor::zeros({q.Np}, DType::I32);
  }
  const int64_t nblocks = q.Np / R;
  q.data = alloc ? alloc(nblocks, q.block_bytes) : Tensor::empty({nblocks, q.block_bytes}, DType::U8);
  NV_CHECK(q.data.dtype() == DType::U8 && q.data.numel() == nblocks * q.block_bytes,
           "quantize_weight: allocator returned ", q.data.str());
  const size_t esz = dtype_size(dt);
  const char* src = static_cast<const char*>(w.raw());
  uint8_t* dst = q.data.data<uint8_t>();
  pool.parallel_for(nblocks, [&](int64_t b0, int64_t b1) {
    std::vector<float> rows(size_t(R * q.Kp));
    for (int64_t b = b0; b < b1; ++b) {
      std::fill(rows.begin(), rows.end(), 0.f);  // padded rows and columns quantize to zero
      for (int64_t r = 0; r < R && b * R + r < q.N; ++r)
        convert_to_f32(src + size_t((b * R + r) * q.K) * esz, dt, rows.data() + r * q.Kp, q.K);
      quantize_block(rows.data(), q, b, dst + b * q.block_bytes);
    }
  }, grain_for_work(R * q.K, int64_t(1) << 16));
  return q;
}

void dequantize_row(const QuantizedWeight& q, int64_t n, float* out) {
  NV_CHECK(n >= 0 && n < q.N, "dequantize_row: row ", n, " of ", q.N);
  if (q.composite()) {  // its part's row, in x's column order (the parts share x, not a layout)
    for (const auto& p : q.parts) {
      if (n < p->N) return dequantize_row_inputs(*p, n, out);
      n -= p->N;
    }
  }
  const int64_t R = QuantizedWeight::kBlockRows, r = n % R;
  const uint8_t* blk = q.data.data<uint8_t>() + (n / R) * q.block_bytes;
  if (q.scheme.int8_groups()) {
    const int g = q.scheme.group;
    const int64_t rec = q.group_record_bytes();
    for (int64_t k = 0; k < q.K; ++k) {
      const uint8_t* r8 = blk + (k / g) * rec;
      const float sc = f16_to_f32(reinterpret_cast<const uint16_t*>(r8 + 16 * g)[r]);
      out[k] = sc * float(int8_t(r8[int8_offset(r, k % g)]));
    }
    return;
  }
  if (q.scheme.kind == QuantKind::Int5 && !q.scheme.k_superblocks) {  // f16 / f32 scale and min per record
    for (int64_t k = 0; k < q.K; ++k) {
      const uint8_t* rec = blk + (k / 32) * q.group_record_bytes();
      const float sc = int5_param(rec, q.scheme.f32_params, r), mn = int5_param(rec, q.scheme.f32_params, 16 + r);
      out[k] = sc * float(int5_code(rec, r, int(k % 32))) + mn;
    }
    return;
  }
  if (q.scheme.kind == QuantKind::Int5) {  // scale = d * sc, min = -(dmin * m): exact f32 products
    for (int64_t k = 0; k < q.K; ++k) {
      const uint8_t* sb = blk + (k / 256) * QuantScheme::kInt5SuperblockBytes;
      const int64_t j = (k % 256) / 32;
      const uint16_t* dd = reinterpret_cast<const uint16_t*>(sb + 2816);
      const float sc = f16_to_f32(dd[r]) * float(sb[2560 + 16 * j + r]);
      const float mn = f16_to_f32(dd[16 + r]) * float(sb[2688 + 16 * j + r]);
      out[k] = sc * float(int5_code(sb + 320 * j, r, int(k % 32))) - mn;
    }
    return;
  }
  if (q.scheme.kind == QuantKind::Int2) {  // d * sc, dmin * m: exact f32 products (ggml's dl, ml)
    for (int64_t k = 0; k < q.K; ++k) {
      const uint8_t* sb = blk + (k / 256) * QuantScheme::kInt2SuperblockBytes;
      const int64_t u = (k % 256) / 16;
      const uint16_t* dd = reinterpret_cast<const uint16_t*>(sb + 1280);
      const int scm = sb[1024 + 16 * u + r];
      const float sc = f16_to_f32(dd[r]) * float(scm & 15), mn = f16_to_f32(dd[16 + r]) * float(scm >> 4);
      out[k] = sc * float(int2_code(sb + 64 * u, r, int(k % 16))) - mn;
    }
    return;
  }
  if (q.scheme.kind == QuantKind::Int3) {  // d * sc: an exact f32 product (ggml's dl)
    const uint16_t* dt = reinterpret_cast<const uint16_t*>(blk);
    const uint8_t* sbs = blk + QuantScheme::int6_d_bytes(q.K / 256);
    for (int64_t k = 0; k < q.K; ++k) {
      const uint8_t* sb = sbs + (k / 256) * QuantScheme::kInt3SuperblockBytes;
      const int u = int((k % 256) / 16);
      const float sc = f16_to_f32(dt[(k / 256) * 16 + r]) * float(int8_t(sb[1536 + 16 * u + r]));
      out[k] = sc * float(int3_code(sb, u, r, int(k % 16)) - 4);
    }
    return;
  }
  if (q.scheme.kind == QuantKind::Int6) {  // d * sc: an exact f32 product
    const uint16_t* dt = reinterpret_cast<const uint16_t*>(blk);
    const uint8_t* sbs = blk + QuantScheme::int6_d_bytes(q.K / 256);
    for (int64_t k = 0; k < q.K; ++k) {
      const uint8_t* sb = sbs + (k / 256) * QuantScheme::kInt6SuperblockBytes;
      const int64_t u = (k % 256) / 16;
      const float sc = f16_to_f32(dt[(k / 256) * 16 + r]) * float(int8_t(sb[3072 + 16 * u + r]));
      out[k] = sc * float(int6_code(sb + 192 * u, r, int(k % 16)) - 32);
    }
    return;
  }
  if (q.scheme.kind == QuantKind::Int8) {
    const float s = q.scales.data<float>()[n];
    for (int64_t k = 0; k < q.K; ++k) out[k] = s * float(int8_t(blk[int8_offset(r, k)]));
    return;
  }
  const int g = q.scheme.group;
  const bool zp = q.scheme.zero_points;
  const int64_t rec = q.group_record_bytes();
  if (q.scheme.k_superblocks) {  // scale = d * sc, min = -(dmin * m): exact f32 products
    for (int64_t k = 0; k < q.K; ++k) {
      const uint8_t* sb = blk + (k / 256) * QuantScheme::kSuperblockBytes;
      const int64_t j = (k % 256) / 32, e = k % 32;
      const int v = (sb[j * 256 + int4_offset(r, e)] >> ((e % 8) >= 4 ? 4 : 0)) & 15;
      const uint16_t* dd = reinterpret_cast<const uint16_t*>(sb + 2304);
      const float sc = f16_to_f32(dd[r]) * float(sb[2048 + 16 * j + r]);
      const float mn = f16_to_f32(dd[16 + r]) * float(sb[2176 + 16 * j + r]);
      out[k] = sc * float(v) - mn;
    }
    return;
  }
  for (int64_t k = 0; k < q.K; ++k) {
    const uint8_t* r8 = blk + (k / g) * rec;
    const int64_t e = k % g;
    const int v = (r8[int4_offset(r, e)] >> ((e % 8) >= 4 ? 4 : 0)) & 15;
    if (q.scheme.f32_params) {
      const float* f = reinterpret_cast<const float*>(r8 + 8 * g);
      out[k] = f[r] * float(v) + f[16 + r];
      continue;
    }
    if (q.scheme.nl_table) {  // ggml's dequantize_row_iq4_*: scale x table value
      out[k] = reinterpret_cast<const float*>(r8 + 8 * g)[r] * float(kIq4nlTable[v]);
      continue;
    }
    const uint16_t* scales = reinterpret_cast<const uint16_t*>(r8 + 8 * g);
    const float sc = f16_to_f32(scales[r]);
    out[k] = zp ? sc * float(v) + f16_to_f32(scales[16 + r]) : sc * float(v - 8);
  }
}

void dequantize_row_inputs(const QuantizedWeight& q, int64_t n, float* out) {
  if (!q.act_index.defined()) return dequantize_row(q, n, out);
  std::vector<float> row(size_t(q.K));
  dequantize_row(q, n, row.data());
  std::fill(out, out + q.in_features, 0.f);
  const int32_t* idx = q.act_index.data<int32_t>();
  for (int64_t k = 0; k < q.K; ++k)
    if (idx[k] >= 0) out[idx[k]] = row[size_t(k)];
}

}  // namespace nanovllm::cpu
