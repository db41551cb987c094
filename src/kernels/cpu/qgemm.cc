#include "kernels/cpu/qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/quant_act.h"
#include "kernels/cpu/qgemm_kernels.h"
#include "util/cpu_features.h"

namespace nanovllm::cpu {

namespace {

enum class QIsa { Scalar, Avx2, AvxVnni, Avx512Vnni };

QIsa qisa() {
  static const QIsa isa = [] {
    const CpuFeatures& f = cpu_features();
    const bool avx2 = f.avx2 && f.fma && f.f16c;
    if (avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512_vnni) return QIsa::Avx512Vnni;
    if (avx2 && f.avx_vnni) return QIsa::AvxVnni;
    if (avx2) return QIsa::Avx2;
    return QIsa::Scalar;
  }();
  return isa;
}

constexpr int64_t kRowBlock = 32;                   // weight rows per tile (reused from L1/L2)
constexpr int64_t kMinChunkMacs = int64_t(1) << 17;  // as gemm.cc: tiny linears stay serial

QWeightView view_of(const QuantizedWeight& w) {
  QWeightView v;
  v.kind = w.scheme.kind;
  v.group = w.scheme.group;
  v.zero_points = w.scheme.zero_points;
  v.Kp = w.Kp;
  v.row_bytes = w.row_bytes;
  v.data = w.data.data<uint8_t>();
  if (w.scheme.kind == QuantKind::Int8) {
    v.scales = w.scales.data<float>();
    v.row_sums = w.row_sums.data<int32_t>();
  }
  return v;
}

// Per-call activation buffers (thread_local: the pool's caller quantizes, workers read).
struct ActBuffers {
  std::vector<uint8_t> x;
  std::vector<float> sx, gsumf;
  std::vector<int32_t> gsum8;
};

// x [M, K] f32 -> x8 per row (layout of qgemm_kernels.h: QActs), scales and group sums.
QActs quantize_activations(const float* x, int64_t M, int64_t K, const QWeightView& w,
                           bool offset128, ActBuffers& b, ThreadPool& pool) {
  const int64_t Kp = w.Kp;
  const bool int4 = w.kind == QuantKind::Int4;
  const int g = w.group;
  const int64_t ng = int4 ? Kp / g : 0;
  b.x.resize(size_t(M * Kp));
  b.sx.resize(size_t(M));
  if (int4 && !w.zero_points) b.gsum8.resize(size_t(M * ng));
  if (int4 && w.zero_points) b.gsumf.resize(size_t(M * ng));
  pool.parallel_for(M, [&](int64_t m0, int64_t m1) {
    std::vector<int8_t> nat(int4 ? size_t(Kp) : 0);  // int4: natural order, then permuted
    for (int64_t m = m0; m < m1; ++m) {
      uint8_t* dst = b.x.data() + m * Kp;
      if (!int4) {
        b.sx[size_t(m)] = quantize_row_s8(x + m * K, K, dst, offset128);
        std::fill(dst + K, dst + Kp, uint8_t(offset128 ? 128 : 0));
        continue;
      }
      b.sx[size_t(m)] = quantize_row_s8(x + m * K, K, reinterpret_cast<uint8_t*>(nat.data()), false);
      std::fill(nat.begin() + K, nat.end(), int8_t(0));
      // Element e of group j (of superblock s) goes to byte (e/4)*64 + 4j + e%4: the group's
      // 4-byte words are spread 64 bytes apart.
      for (int64_t gi = 0; gi < ng; ++gi) {
        const int64_t s0 = gi / 16 * 16 * int64_t(g), j = gi % 16;
        const int8_t* src = nat.data() + gi * g;
        int32_t sum = 0;
        for (int e = 0; e < g; ++e) sum += src[e];
        for (int i = 0; i < g / 4; ++i) std::memcpy(dst + s0 + i * 64 + 4 * j, src + 4 * i, 4);
        if (w.zero_points) b.gsumf[size_t(m * ng + gi)] = float(sum);
        else b.gsum8[size_t(m * ng + gi)] = 8 * sum;
      }
    }
  }, grain_for_work(K, int64_t(1) << 14));
  QActs a;
  a.x = b.x.data();
  a.Kp = Kp;
  a.offset128 = offset128;
  a.sx = b.sx.data();
  a.gsum8 = int4 && !w.zero_points ? b.gsum8.data() : nullptr;
  a.gsumf = int4 && w.zero_points ? b.gsumf.data() : nullptr;
  return a;
}

}  // namespace

// The scalar reference: the same integer dots and per-group f32 scaling as the SIMD kernels
// (signed activations, no 128 offset).
void qrows_scalar(const QWeightView& w, const QActs& a, int M, int64_t n0, int64_t n1, float* out,
                  int64_t ldo) {
  const int64_t Kp = w.Kp;
  for (int64_t n = n0; n < n1; ++n) {
    const uint8_t* row = w.data + n * w.row_bytes;
    for (int m = 0; m < M; ++m) {
      const int8_t* x = reinterpret_cast<const int8_t*>(a.x + m * Kp);
      if (w.kind == QuantKind::Int8) {
        int32_t d = 0;
        for (int64_t k = 0; k < Kp; ++k) d += int32_t(x[k]) * int8_t(row[k]);
        out[m * ldo + n] = a.sx[m] * w.scales[n] * float(d);
        continue;
      }
      const int g = w.group, rec = 8 * g + 32 + (w.zero_points ? 32 : 0);
      const int64_t nsb = Kp / (16 * g), ng = Kp / g;
      float facc[16] = {};
      for (int64_t s = 0; s < nsb; ++s) {
        const uint8_t* r = row + s * rec;
        const uint16_t* sc = reinterpret_cast<const uint16_t*>(r + 8 * g);
        const int8_t* xs = x + s * 16 * g;
        for (int j = 0; j < 16; ++j) {
          int32_t d = 0;
          for (int e = 0; e < g; ++e) {
            const int i = e / 4, pos = (i / 2) * 64 + 4 * j + e % 4;
            d += int32_t((r[pos] >> (4 * (i % 2))) & 15) * xs[i * 64 + 4 * j + e % 4];
          }
          const int64_t gi = m * ng + s * 16 + j;
          if (!w.zero_points) d -= a.gsum8[gi];
          facc[j] = std::fma(float(d), f16_to_f32(sc[j]), facc[j]);
          if (w.zero_points) facc[j] = std::fma(a.gsumf[gi], f16_to_f32(sc[16 + j]), facc[j]);
        }
      }
      float y = 0.f;
      for (float f : facc) y += f;
      out[m * ldo + n] = a.sx[m] * y;
    }
  }
}

const char* quantized_isa() {
  switch (qisa()) {
    case QIsa::Avx512Vnni: return "avx512-vnni";
    case QIsa::AvxVnni: return "avx-vnni";
    case QIsa::Avx2: return "avx2";
    default: return "scalar";
  }
}

void quantized_linear(const Tensor& x, const QuantizedWeight& w, const Tensor* bias, Tensor& out,
                      ThreadPool& pool) {
  NV_CHECK(x.dtype() == DType::F32 && out.dtype() == DType::F32,
           "quantized linear needs F32 x/out, got ", x.str(), " ", out.str());
  NV_CHECK(w.scheme.enabled() && w.data.dtype() == DType::U8, "quantized linear: weight is not quantized");
  const int64_t K = w.K, N = w.N, M = x.numel() / std::max<int64_t>(K, 1);
  NV_CHECK_EQ(x.size(-1), K, "quantized linear x ", x.str(), " for a [", N, ", ", K, "] weight");
  NV_CHECK_EQ(out.numel(), M * N, "quantized linear out ", out.str(), " for x ", x.str());
  if (bias) NV_CHECK_EQ(bias->numel(), N, "quantized linear bias ", bias->str());
  if (M == 0) return;
  const QIsa isa = qisa();
  const QKernel kernel = isa == QIsa::Avx512Vnni ? qrows_avx512_vnni
                         : isa == QIsa::AvxVnni  ? qrows_avx_vnni
                         : isa == QIsa::Avx2     ? qrows_avx2
                                                 : qrows_scalar;
  const QWeightView wv = view_of(w);
  thread_local ActBuffers buf;
  const bool offset = isa == QIsa::Avx512Vnni || isa == QIsa::AvxVnni;
  const QActs acts = quantize_activations(x.data<float>(), M, K, wv, offset, buf, pool);
  float* op = out.data<float>();
  pool.parallel_for(N, [&](int64_t n0, int64_t n1) {
    for (int64_t nb = n0; nb < n1; nb += kRowBlock) {
      const int64_t ne = std::min(n1, nb + kRowBlock);
      for (int64_t m0 = 0; m0 < M; m0 += kQMaxRows) {
        QActs a = acts;
        a.x += m0 * acts.Kp;
        a.sx += m0;
        if (a.gsum8) a.gsum8 += m0 * (acts.Kp / wv.group);
        if (a.gsumf) a.gsumf += m0 * (acts.Kp / wv.group);
        kernel(wv, a, int(std::min<int64_t>(kQMaxRows, M - m0)), nb, ne, op + m0 * N, N);
      }
    }
  }, grain_for_work(M * K, kMinChunkMacs, kRowBlock));
  add_bias_rows(bias, op, M, N);
}

}  // namespace nanovllm::cpu
