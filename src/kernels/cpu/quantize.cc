// Weight quantization: int8 per output channel, int4 per group (symmetric or with zero points),
// written in the kernels' layout (kernels/quantized.h). Scales are rounded to their storage
// type first and the integers computed with the rounded scale, so the stored weight is the
// nearest one the format can express for that scale.
#include "kernels/cpu/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/quantize_int4.h"
#include "util/check.h"

namespace nanovllm::cpu {

namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

inline int nearest(float v) { return round_nearest(v); }

// One row of int8: q = round(w / s), s = max|w| / 127.
void quantize_row_int8(const float* w, int64_t K, int8_t* q, float* scale, int32_t* sum) {
  float amax = 0.f;
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::abs(w[k]));
  const float s = amax / 127.f;
  const float inv = s > 0.f ? 1.f / s : 0.f;
  int32_t total = 0;
  for (int64_t k = 0; k < K; ++k) {
    const int v = std::clamp(nearest(w[k] * inv), -127, 127);
    q[k] = int8_t(v);
    total += v;
  }
  *scale = s;
  *sum = total;
}

// One row of int4 in superblock records (see kernels/quantized.h for the byte order).
void quantize_row_int4(const float* w, const QuantizedWeight& qw, uint8_t* row) {
  const int g = qw.scheme.group;
  const bool zp = qw.scheme.zero_points;
  const int64_t sb = qw.superblock(), nsb = qw.Kp / sb;
  const int64_t rec = 8 * g + 32 + (zp ? 32 : 0);
  std::vector<uint8_t> q(static_cast<size_t>(g));
  for (int64_t s = 0; s < nsb; ++s) {
    uint8_t* r = row + s * rec;
    std::memset(r, 0, size_t(8 * g));
    uint16_t* scales = reinterpret_cast<uint16_t*>(r + 8 * g);
    uint16_t* mins = zp ? scales + 16 : nullptr;
    for (int j = 0; j < 16; ++j) {
      const float* src = w + s * sb + int64_t(j) * g;  // padded rows are zero
      quantize_group_int4(src, g, zp, q.data(), &scales[j], mins ? &mins[j] : nullptr);
      for (int e = 0; e < g; ++e) {
        const int i = e / 4, b = e % 4;  // element e of group j sits in V(i), byte 4j + b
        r[(i / 2) * 64 + 4 * j + b] |= uint8_t(q[size_t(e)] << (4 * (i % 2)));
      }
    }
  }
}

}  // namespace

QuantizedWeight quantize_weight(const Tensor& w, const QuantScheme& scheme, ThreadPool& pool,
                                const U8Allocator& alloc) {
  NV_CHECK(scheme.enabled(), "quantize_weight: no quantization scheme");
  NV_CHECK(w.ndim() == 2, "quantize_weight: a weight must be [N, K], got ", w.str());
  const DType dt = w.dtype();
  NV_CHECK(dt == DType::F32 || dt == DType::BF16 || dt == DType::F16,
           "quantize_weight: weights must be F32, BF16 or F16, got ", w.str());
  QuantizedWeight q;
  q.scheme = scheme;
  q.N = w.size(0);
  q.K = w.size(1);
  if (scheme.kind == QuantKind::Int8) {
    q.Kp = round_up(q.K, 64);
    q.row_bytes = q.Kp;
    q.scales = Tensor::empty({q.N}, DType::F32);
    q.row_sums = Tensor::empty({q.N}, DType::I32);
  } else {
    NV_CHECK(scheme.group == 32 || scheme.group == 64, "int4 group must be 32 or 64, got ",
             scheme.group);
    q.Kp = round_up(q.K, q.superblock());
    q.row_bytes = q.Kp / q.superblock() * (8 * scheme.group + 32 + (scheme.zero_points ? 32 : 0));
  }
  q.data = alloc ? alloc(q.N, q.row_bytes) : Tensor::empty({q.N, q.row_bytes}, DType::U8);
  NV_CHECK(q.data.dtype() == DType::U8 && q.data.numel() == q.N * q.row_bytes,
           "quantize_weight: allocator returned ", q.data.str());
  const size_t esz = dtype_size(dt);
  const char* src = static_cast<const char*>(w.raw());
  uint8_t* dst = q.data.data<uint8_t>();
  pool.parallel_for(q.N, [&](int64_t n0, int64_t n1) {
    std::vector<float> row(static_cast<size_t>(q.Kp), 0.f);
    for (int64_t n = n0; n < n1; ++n) {
      convert_to_f32(src + size_t(n * q.K) * esz, dt, row.data(), q.K);
      uint8_t* out = dst + n * q.row_bytes;
      if (scheme.kind == QuantKind::Int8) {
        std::memset(out, 0, size_t(q.row_bytes));
        quantize_row_int8(row.data(), q.K, reinterpret_cast<int8_t*>(out),
                          q.scales.data<float>() + n, q.row_sums.data<int32_t>() + n);
      } else {
        quantize_row_int4(row.data(), q, out);
      }
    }
  }, grain_for_work(q.K, int64_t(1) << 16));
  return q;
}

void dequantize_row(const QuantizedWeight& q, int64_t n, float* out) {
  NV_CHECK(n >= 0 && n < q.N, "dequantize_row: row ", n, " of ", q.N);
  const uint8_t* row = q.data.data<uint8_t>() + n * q.row_bytes;
  if (q.scheme.kind == QuantKind::Int8) {
    const float s = q.scales.data<float>()[n];
    for (int64_t k = 0; k < q.K; ++k) out[k] = s * float(int8_t(row[k]));
    return;
  }
  const int g = q.scheme.group;
  const bool zp = q.scheme.zero_points;
  const int64_t sb = q.superblock(), rec = 8 * g + 32 + (zp ? 32 : 0);
  for (int64_t k = 0; k < q.K; ++k) {
    const int64_t s = k / sb, j = (k % sb) / g, e = k % g, i = e / 4, b = e % 4;
    const uint8_t* r = row + s * rec;
    const int v = (r[(i / 2) * 64 + 4 * j + b] >> (4 * (i % 2))) & 15;
    const uint16_t* scales = reinterpret_cast<const uint16_t*>(r + 8 * g);
    const float sc = f16_to_f32(scales[j]);
    out[k] = zp ? sc * float(v) + f16_to_f32(scales[16 + j]) : sc * float(v - 8);
  }
}

}  // namespace nanovllm::cpu
