#include "kernels/cpu/qgemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/quant_act.h"
#include "kernels/cpu/qgemm_kernels.h"
#include "kernels/int4_groups.h"
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

constexpr int64_t kTileBlocks = 2;                  // 16-row blocks per tile (reused from L1/L2)
constexpr int64_t kMinChunkMacs = int64_t(1) << 17;  // as gemm.cc: tiny linears stay serial
constexpr int64_t kActBlockBytes = 256 * 1024;       // x8 rows per pass over a thread's tiles

QWeightView view_of(const QuantizedWeight& w) {
  QWeightView v;
  v.kind = w.scheme.kind;
  v.group = w.scheme.group;
  v.zero_points = w.scheme.zero_points;
  v.f32_params = w.scheme.f32_params;
  v.k_superblocks = w.scheme.k_superblocks;
  v.nl_table = w.scheme.nl_table;
  v.N = w.N;
  v.Kp = w.Kp;
  v.block_bytes = w.block_bytes;
  v.data = w.data.data<uint8_t>();
  if (w.scheme.kind == QuantKind::Int8 && !w.scheme.int8_groups()) {
    v.scales = w.scales.data<float>();
    v.row_sums = w.row_sums.data<int32_t>();
  }
  return v;
}

// Per-call activation buffers (thread_local: the pool's caller quantizes, workers read).
struct ActBuffers {
  std::vector<float> gathered;  // x's columns in the weight's act_index order
  std::vector<uint8_t> x;
  std::vector<float> sx, gsumf;
  std::vector<int32_t> gsum8;
};

// out[m, j] = x[m, idx[j]] (0 where idx[j] < 0): x [M, Kx] -> out [M, K]. A per-row max of |x|
// (the activation scale) is unchanged: every column of x appears once.
void gather_columns(const float* x, int64_t M, int64_t Kx, const int32_t* idx, int64_t K,
                    std::vector<float>& out, ThreadPool& pool) {
  out.resize(size_t(M * K));
  pool.parallel_for(M, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      const float* xr = x + m * Kx;
      float* o = out.data() + m * K;
      for (int64_t j = 0; j < K; ++j) o[j] = idx[j] >= 0 ? xr[idx[j]] : 0.f;
    }
  }, grain_for_work(K, int64_t(1) << 14));
}

// x [M, K] f32 -> x8 per row (natural order, K zero-padded to Kp), scales, int4 group sums.
QActs quantize_activations(const float* x, int64_t M, int64_t K, const QWeightView& w,
                           bool offset128, ActBuffers& b, ThreadPool& pool) {
  const int64_t Kp = w.Kp;
  // int4 / int5 / int6 / int3 / int2 codes are the unsigned operand: they take signed activations.
  const bool int4 = w.kind == QuantKind::Int4 || w.kind == QuantKind::Int5 || w.kind == QuantKind::Int6 ||
                    w.kind == QuantKind::Int3 || w.kind == QuantKind::Int2;
  const bool offset = offset128 && !int4;
  const int g = w.group;
  const int zero = w.kind == QuantKind::Int6 ? -32 : w.kind == QuantKind::Int3 ? -4 : w.nl_table ? 128 : 8;  // see QActs::gsum8
  const int64_t ng = int4 ? Kp / g : 0;
  b.x.resize(size_t(M * Kp));
  b.sx.resize(size_t(M));
  if (int4 && !w.zero_points) b.gsum8.resize(size_t(M * ng));
  if (int4 && w.zero_points) b.gsumf.resize(size_t(M * ng));
  pool.parallel_for(M, [&](int64_t m0, int64_t m1) {
    for (int64_t m = m0; m < m1; ++m) {
      uint8_t* dst = b.x.data() + m * Kp;
      b.sx[size_t(m)] = quantize_row_s8(x + m * K, K, dst, offset);
      std::fill(dst + K, dst + Kp, uint8_t(offset ? 128 : 0));
      for (int64_t gi = 0; gi < ng; ++gi) {
        const int8_t* src = reinterpret_cast<const int8_t*>(dst) + gi * g;
        int32_t sum = 0;
        for (int e = 0; e < g; ++e) sum += src[e];
        if (w.zero_points) b.gsumf[size_t(m * ng + gi)] = float(sum);
        else b.gsum8[size_t(m * ng + gi)] = zero * sum;
      }
    }
  }, grain_for_work(K, int64_t(1) << 14));
  QActs a;
  a.x = b.x.data();
  a.Kp = Kp;
  a.offset128 = offset;
  a.sx = b.sx.data();
  a.gsum8 = int4 && !w.zero_points ? b.gsum8.data() : nullptr;
  a.gsumf = int4 && w.zero_points ? b.gsumf.data() : nullptr;
  return a;
}

}  // namespace

// The scalar reference: the same integer dots and per-group f32 scaling as the SIMD kernels
// (signed activations, no 128 offset), one row of a block at a time.
void qrows_scalar(const QWeightView& w, const QActs& a, int M, int64_t b0, int64_t b1, float* out,
                  int64_t ldo) {
  const int64_t Kp = w.Kp;
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* blk = w.data + b * w.block_bytes;
    for (int64_t r = 0; r < 16 && 16 * b + r < w.N; ++r) {
      const int64_t n = 16 * b + r;
      for (int m = 0; m < M; ++m) {
        const int8_t* x = reinterpret_cast<const int8_t*>(a.x + m * Kp);
        if (w.kind == QuantKind::Int8 && w.group > 0) {  // int8-g32: f16 scale per group record
          const int g = w.group, rec = 16 * g + 64;
          float acc = 0.f;
          for (int64_t gi = 0; gi < Kp / g; ++gi) {
            const uint8_t* rg = blk + gi * rec;
            int32_t d = 0;
            for (int e = 0; e < g; ++e)
              d += int32_t(x[gi * g + e]) * int8_t(rg[(e / 4) * 64 + 4 * r + e % 4]);
            acc = std::fma(float(d), f16_to_f32(reinterpret_cast<const uint16_t*>(rg + 16 * g)[r]), acc);
          }
          out[m * ldo + n] = acc * a.sx[m];
          continue;
        }
        if (w.kind == QuantKind::Int5 && !w.k_superblocks) {  // f16 / f32 scale and min per record of 32
          const int64_t ng = Kp / 32;
          float acc = 0.f;
          for (int64_t gi = 0; gi < ng; ++gi) {
            const uint8_t* rec = blk + gi * (w.f32_params ? 448 : 384);
            int32_t d = 0;
            for (int e = 0; e < 32; ++e) d += int5_code(rec, r, e) * x[gi * 32 + e];
            acc = std::fma(float(d), int5_param(rec, w.f32_params, r), acc);
            acc = std::fma(a.gsumf[m * ng + gi], int5_param(rec, w.f32_params, 16 + r), acc);
          }
          out[m * ldo + n] = acc * a.sx[m];
          continue;
        }
        if (w.kind == QuantKind::Int5) {  // as int4-g32-zp-k with 5-bit codes
          const int64_t ng = Kp / 32;
          float acc = 0.f;
          for (int64_t gi = 0; gi < ng; ++gi) {
            const uint8_t* sb = blk + (gi / 8) * QuantScheme::kInt5SuperblockBytes;
            int32_t d = 0;
            for (int e = 0; e < 32; ++e) d += int5_code(sb + 320 * (gi % 8), r, e) * x[gi * 32 + e];
            const uint16_t* dd = reinterpret_cast<const uint16_t*>(sb + 2816);
            const float sc = f16_to_f32(dd[r]) * float(sb[2560 + 16 * (gi % 8) + r]);
            const float mn = f16_to_f32(dd[16 + r]) * float(sb[2688 + 16 * (gi % 8) + r]);
            acc = std::fma(float(d), sc, acc);
            acc = std::fma(a.gsumf[m * ng + gi], -mn, acc);
          }
          out[m * ldo + n] = acc * a.sx[m];
          continue;
        }
        if (w.kind == QuantKind::Int2) {  // as int4-g32-zp-k in groups of 16 with 2-bit codes
          const int64_t ng = Kp / 16;
          float acc = 0.f;
          for (int64_t gi = 0; gi < ng; ++gi) {
            const uint8_t* sb = blk + (gi / 16) * QuantScheme::kInt2SuperblockBytes;
            int32_t d = 0;
            for (int e = 0; e < 16; ++e) d += int2_code(sb + 64 * (gi % 16), r, e) * x[gi * 16 + e];
            const uint16_t* dd = reinterpret_cast<const uint16_t*>(sb + 1280);
            const int scm = sb[1024 + 16 * (gi % 16) + r];
            const float sc = f16_to_f32(dd[r]) * float(scm & 15), mn = f16_to_f32(dd[16 + r]) * float(scm >> 4);
            acc = std::fma(float(d), sc, acc);
            acc = std::fma(a.gsumf[m * ng + gi], -mn, acc);
          }
          out[m * ldo + n] = acc * a.sx[m];
          continue;
        }
        if (w.kind == QuantKind::Int3) {  // per superblock: the integer sum of (dot - 4 x sum of x8) x sc, times d
          const uint16_t* dt = reinterpret_cast<const uint16_t*>(blk);
          const uint8_t* sbs = blk + QuantScheme::int6_d_bytes(Kp / 256);
          const int64_t ng = Kp / 16;
          float acc = 0.f;
          for (int64_t s = 0; s < Kp / 256; ++s) {
            const uint8_t* sb = sbs + s * QuantScheme::kInt3SuperblockBytes;
            int32_t isum = 0;  // |isum| <= 16 x 8128 x 32 < 2^24: exact as f32
            for (int u = 0; u < 16; ++u) {
              const int64_t gi = 16 * s + u;
              int32_t d = 0;
              for (int e = 0; e < 16; ++e) d += int3_code(sb, u, r, e) * x[gi * 16 + e];
              d += a.gsum8[m * ng + gi];  // -4 x the group's sum of x8
              isum += d * int8_t(sb[1536 + 16 * u + r]);
            }
            acc = std::fma(float(isum), f16_to_f32(dt[16 * s + r]), acc);
          }
          out[m * ldo + n] = acc * a.sx[m];
          continue;
        }
        if (w.kind == QuantKind::Int6) {  // per group of 16: (dot - 32 x sum of x8) x (d x sc)
          const uint16_t* dt = reinterpret_cast<const uint16_t*>(blk);
          const uint8_t* sbs = blk + QuantScheme::int6_d_bytes(Kp / 256);
          const int64_t ng = Kp / 16;
          float acc = 0.f;
          for (int64_t gi = 0; gi < ng; ++gi) {
            const uint8_t* sb = sbs + (gi / 16) * QuantScheme::kInt6SuperblockBytes;
            int32_t d = 0;
            for (int e = 0; e < 16; ++e) d += int6_code(sb + 192 * (gi % 16), r, e) * x[gi * 16 + e];
            d += a.gsum8[m * ng + gi];  // -32 x the group's sum of x8
            const float sc = f16_to_f32(dt[(gi / 16) * 16 + r]) * float(int8_t(sb[3072 + 16 * (gi % 16) + r]));
            acc = std::fma(float(d), sc, acc);
          }
          out[m * ldo + n] = acc * a.sx[m];
          continue;
        }
        if (w.kind == QuantKind::Int8) {
          int32_t d = 0;
          for (int64_t k = 0; k < Kp; ++k) d += int32_t(x[k]) * int8_t(blk[(k / 4) * 64 + 4 * r + k % 4]);
          out[m * ldo + n] = float(d) * (w.scales[n] * a.sx[m]);
          continue;
        }
        const int g = w.group, rec = w.f32_params ? 8 * g + 128 : 8 * g + 32 + (w.zero_points ? 32 : 0);
        const int64_t ng = Kp / g;
        float acc = 0.f;
        for (int64_t gi = 0; gi < ng; ++gi) {
          if (w.k_superblocks) {  // group gi: lines at 256 (gi % 8) of its superblock, then the factors
            const uint8_t* sb = blk + (gi / 8) * QuantScheme::kSuperblockBytes;
            const uint8_t* rg = sb + (gi % 8) * 256;
            int32_t d = 0;
            for (int e = 0; e < 32; ++e)
              d += ((rg[(e / 8) * 64 + 4 * r + e % 4] >> ((e % 8) >= 4 ? 4 : 0)) & 15) * x[gi * 32 + e];
            const uint16_t* dd = reinterpret_cast<const uint16_t*>(sb + 2304);
            const float sc = f16_to_f32(dd[r]) * float(sb[2048 + 16 * (gi % 8) + r]);
            const float mn = f16_to_f32(dd[16 + r]) * float(sb[2176 + 16 * (gi % 8) + r]);
            acc = std::fma(float(d), sc, acc);
            acc = std::fma(a.gsumf[m * ng + gi], -mn, acc);
            continue;
          }
          if (w.nl_table) {  // int4-g32-nl: the table's values times x8, an f32 scale per group
            const uint8_t* rn = blk + gi * (8 * g + 64);
            int32_t d = 0;
            for (int e = 0; e < g; ++e)
              d += kIq4nlTable[(rn[(e / 8) * 64 + 4 * r + e % 4] >> ((e % 8) >= 4 ? 4 : 0)) & 15] * x[gi * g + e];
            acc = std::fma(float(d), reinterpret_cast<const float*>(rn + 8 * g)[r], acc);
            continue;
          }
          const uint8_t* rg = blk + gi * rec;
          int32_t d = 0;
          for (int e = 0; e < g; ++e) {
            const int q = (rg[(e / 8) * 64 + 4 * r + e % 4] >> ((e % 8) >= 4 ? 4 : 0)) & 15;
            d += q * x[gi * g + e];
          }
          if (w.f32_params) {
            const float* f = reinterpret_cast<const float*>(rg + 8 * g);
            acc = std::fma(float(d), f[r], acc);
            acc = std::fma(a.gsumf[m * ng + gi], f[16 + r], acc);
            continue;
          }
          const uint16_t* sc = reinterpret_cast<const uint16_t*>(rg + 8 * g);
          if (!w.zero_points) d -= a.gsum8[m * ng + gi];
          acc = std::fma(float(d), f16_to_f32(sc[r]), acc);
          if (w.zero_points) acc = std::fma(a.gsumf[m * ng + gi], f16_to_f32(sc[16 + r]), acc);
        }
        out[m * ldo + n] = acc * a.sx[m];
      }
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

namespace {

// One weight in its own layout (not composite) against x [M, x_features()], ready to run: its
// kernel, its quantized activations (in `buf`), and where its outputs go (out[m * ldo + n], n < N).
struct QJob {
  QWeightView wv;
  QActs acts;
  QKernel kernel = nullptr;
  bool unpack_once = false;
  int64_t M = 0, mblock = 0, nblocks = 0;
  float* op = nullptr;
  int64_t ldo = 0;

  QActs rows_from(int64_t m0) const {  // acts of rows [m0, M)
    QActs a = acts;
    a.x += m0 * acts.Kp;
    a.sx += m0;
    if (a.gsum8) a.gsum8 += m0 * (acts.Kp / wv.group);
    if (a.gsumf) a.gsumf += m0 * (acts.Kp / wv.group);
    return a;
  }

  // Tiles of kTileBlocks 16-row blocks: DRAM reads each weight once; the tile is reused from
  // L1/L2 for every chunk of kQMaxRows activation rows (each chunk's int8 rows stay in L1).
  // int5 / int6 unpack their codes once per block for all rows (qtile_avx512_vnni) past one chunk.
  // Many rows (prefill) go in blocks of mblock rows, each block against all the thread's tiles:
  // the block's x8 (<= kActBlockBytes) then stays in L2 for all of them, where one pass of every
  // tile over all M rows read the whole x8 from memory per tile (16 MiB at M = 16k, K = 1024).
  // The order of the sums within each output is unchanged.
  void run_blocks(int64_t bb0, int64_t bb1) const {
    for (int64_t mb0 = 0; mb0 < M; mb0 += mblock) {
      const int64_t mb1 = std::min(M, mb0 + mblock);
      for (int64_t tb = bb0; tb < bb1; tb += kTileBlocks) {
        const int64_t te = std::min(bb1, tb + kTileBlocks);
        if (unpack_once && mb1 - mb0 > kQMaxRows &&
            qtile_avx512_vnni(wv, rows_from(mb0), mb1 - mb0, tb, te, op + mb0 * ldo, ldo))
          continue;
        for (int64_t m0 = mb0; m0 < mb1; m0 += kQMaxRows)
          kernel(wv, rows_from(m0), int(std::min<int64_t>(kQMaxRows, mb1 - m0)), tb, te, op + m0 * ldo, ldo);
      }
    }
  }
};

QJob prepare_job(const float* xp, int64_t M, const QuantizedWeight& w, float* op, int64_t ldo, ActBuffers& buf,
                 ThreadPool& pool) {
  NV_CHECK(w.scheme.enabled() && w.data.dtype() == DType::U8, "quantized linear: weight is not quantized");
  const int64_t K = w.K, Kx = w.x_features();
  const QIsa isa = qisa();
  QJob j;
  j.kernel = isa == QIsa::Avx512Vnni ? qrows_avx512_vnni
             : isa == QIsa::AvxVnni  ? qrows_avx_vnni
             : isa == QIsa::Avx2     ? qrows_avx2
                                     : qrows_scalar;
  // int3-g16-k on AVX-VNNI runs the AVX2 kernel (the 256-bit VNNI build has none of its own;
  // every VNNI level here has AVX2): its codes take signed activations on every kernel, so no
  // activation form changes with it. AVX512-VNNI has its own.
  if (w.scheme.kind == QuantKind::Int3 && isa == QIsa::AvxVnni) j.kernel = qrows_avx2;
  j.wv = view_of(w);
  const bool offset = isa == QIsa::Avx512Vnni || isa == QIsa::AvxVnni;
  if (w.act_index.defined()) {  // repacked GPTQ act-order / cut groups: x's columns in kernel order
    gather_columns(xp, M, Kx, w.act_index.data<int32_t>(), K, buf.gathered, pool);
    xp = buf.gathered.data();
  }
  j.acts = quantize_activations(xp, M, K, j.wv, offset, buf, pool);
  j.unpack_once = isa == QIsa::Avx512Vnni && M > kQMaxRows && w.scheme.k_superblocks &&
                  (w.scheme.kind == QuantKind::Int5 || w.scheme.kind == QuantKind::Int6);
  j.M = M;
  j.mblock = std::max<int64_t>(kQMaxRows, kActBlockBytes / j.acts.Kp / kQMaxRows * kQMaxRows);
  j.nblocks = w.Np / QuantizedWeight::kBlockRows;
  j.op = op;
  j.ldo = ldo;
  return j;
}

}  // namespace

void quantized_linear(const Tensor& x, const QuantizedWeight& w, const Tensor* bias, Tensor& out,
                      ThreadPool& pool) {
  NV_CHECK(x.dtype() == DType::F32 && out.dtype() == DType::F32,
           "quantized linear needs F32 x/out, got ", x.str(), " ", out.str());
  const int64_t N = w.N, Kx = w.x_features(), M = x.numel() / std::max<int64_t>(Kx, 1);
  NV_CHECK_EQ(x.size(-1), Kx, "quantized linear x ", x.str(), " for a [", N, ", ", Kx, "] weight");
  NV_CHECK_EQ(out.numel(), M * N, "quantized linear out ", out.str(), " for x ", x.str());
  if (bias) NV_CHECK_EQ(bias->numel(), N, "quantized linear bias ", bias->str());
  if (M == 0) return;
  const float* xp = x.data<float>();
  float* op = out.data<float>();
  // A composite weight: each part on its own output columns (kernels/quantized.h), all parts'
  // blocks in one parallel region (one hand-off, as for one fused weight).
  const size_t nparts = w.composite() ? w.parts.size() : 1;
  thread_local std::vector<ActBuffers> bufs;  // (the caller's: workers only read them)
  if (bufs.size() < nparts) bufs.resize(nparts);
  std::vector<QJob> jobs;
  int64_t n0 = 0, nblocks = 0;
  for (size_t i = 0; i < nparts; ++i) {
    const QuantizedWeight& p = w.composite() ? *w.parts[i] : w;
    NV_CHECK_EQ(p.x_features(), Kx, "quantized linear: a part of the composite weight");
    jobs.push_back(prepare_job(xp, M, p, op + n0, N, bufs[i], pool));
    n0 += p.N;
    nblocks += jobs.back().nblocks;
  }
  NV_CHECK_EQ(n0, N, "quantized linear: the composite weight's parts");
  pool.parallel_for(nblocks, [&](int64_t bb0, int64_t bb1) {
    int64_t first = 0;  // global block index of jobs[i]'s block 0
    for (const QJob& j : jobs) {
      const int64_t lo = std::max(bb0, first), hi = std::min(bb1, first + j.nblocks);
      if (lo < hi) j.run_blocks(lo - first, hi - first);
      first += j.nblocks;
    }
  }, grain_for_work(M * Kx * QuantizedWeight::kBlockRows, kMinChunkMacs));
  add_bias_rows(bias, op, M, N);
}

}  // namespace nanovllm::cpu
