#include "kernels/cpu/pack_int6.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "util/check.h"

namespace nanovllm::cpu {

namespace {

void check_input(const Int4Groups& w) {
  // (A tensor-parallel column slice keeps the whole weight's groups: K may be less than 16 G.)
  NV_CHECK(w.bits == 6 && w.N > 0 && w.K > 0 && w.G > 0 && w.G % 16 == 0,
           "int6 groups: weight [", w.N, ", ", w.K, "] in ", w.G, " groups of ", w.bits,
           "-bit codes is not Q6_K's groups of 16 in superblocks of 256");
  auto shaped = [](const Tensor& t, DType dt, const Shape& s) { return t.defined() && t.dtype() == dt && t.shape() == s; };
  NV_CHECK(shaped(w.q, DType::U8, {w.N, w.K}) && shaped(w.scales, DType::F32, {w.N, w.G}) &&
               shaped(w.zeros, DType::U8, {w.N, w.G}) && shaped(w.d, DType::F32, {w.N, w.G / 16}) &&
               shaped(w.sub_scale, DType::U8, {w.N, w.G}) && shaped(w.g_idx, DType::I32, {w.K}) &&
               !w.has_mins(),
           "int6 groups: q ", w.q.str(), " scales ", w.scales.str(), " zeros ", w.zeros.str(), " d ",
           w.d.str(), " sc ", w.sub_scale.str(), " g_idx ", w.g_idx.str(), " do not match [", w.N, ", ",
           w.K, "] in ", w.G, " groups");
  const uint8_t* q = w.q.data<uint8_t>();
  for (int64_t i = 0; i < w.N * w.K; ++i)
    NV_CHECK(q[i] < 64, "int6 groups: row ", i / w.K, " column ", i % w.K, ": code ", int(q[i]), " past 63");
  const int32_t* gi = w.g_idx.data<int32_t>();
  for (int64_t k = 0; k < w.K; ++k)
    NV_CHECK(gi[k] >= 0 && gi[k] < w.G, "int6 groups: g_idx[", k, "] = ", gi[k], " outside [0, ", w.G, ")");
  // The factors must give the scales exactly (they are the weight's definition). A NaN / Inf d
  // (a corrupt file, loaded under --allow-nonfinite-weights) gives the same.
  auto same = [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  auto f16_value = [](float v) { return !std::isfinite(v) || f16_to_f32(f32_to_f16(v)) == v; };
  const float* d = w.d.data<float>();
  const uint8_t* sc = w.sub_scale.data<uint8_t>();
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t g = 0; g < w.G; ++g) {
      const int64_t i = n * w.G + g;
      const float dv = d[n * (w.G / 16) + g / 16];
      NV_CHECK(w.zeros.data<uint8_t>()[i] == 32 && f16_value(dv) &&
                   same(dv * float(int8_t(sc[i])), w.scales.data<float>()[i]),
               "int6 groups: row ", n, " group ", g, ": zero ", int(w.zeros.data<uint8_t>()[i]), ", factors ",
               dv, " x ", int(int8_t(sc[i])), " do not give its scale ", w.scales.data<float>()[i]);
    }
}

// The kernel's columns: source superblocks ss0 .. ss0 + nsb - 1 in order, each column at a
// free slot of its own group there. A whole weight and tensor-parallel slices cut at 256 columns
// map onto themselves (identity: no gather); a slice cut inside a superblock (or a group) gets
// the missing slots as zero columns (act_index -1), so no weight changes.
struct Int6Plan {
  int64_t ss0 = 0, nsb = 0;
  std::vector<int32_t> act_index;  // [nsb * 256]: the input column of each kernel column, or -1
  bool identity = true;
};

Int6Plan plan_columns(const Int4Groups& w) {
  const int32_t* gi = w.g_idx.data<int32_t>();
  int32_t lo = gi[0], hi = gi[0];
  for (int64_t k = 0; k < w.K; ++k) lo = std::min(lo, gi[k]), hi = std::max(hi, gi[k]);
  Int6Plan p;
  p.ss0 = lo / 16;
  p.nsb = hi / 16 - p.ss0 + 1;
  p.act_index.assign(size_t(p.nsb * 256), -1);
  std::vector<int> used(size_t(p.nsb * 16), 0);
  for (int64_t k = 0; k < w.K; ++k) {
    const int64_t g = gi[k] - 16 * p.ss0;  // the group's index in the kernel's columns
    NV_CHECK(used[size_t(g)] < 16, "int6 groups: group ", gi[k], " has more than 16 columns");
    p.act_index[size_t(16 * g + used[size_t(g)]++)] = int32_t(k);
  }
  p.identity = int64_t(p.act_index.size()) == w.K;
  for (int64_t k = 0; p.identity && k < w.K; ++k) p.identity = p.act_index[size_t(k)] == k;
  return p;
}

}  // namespace

QuantizedWeight pack_int6_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc) {
  check_input(w);
  const int64_t N = w.N, K = w.K, G = w.G, S = G / 16;
  const uint8_t* q = w.q.data<uint8_t>();
  const Int6Plan plan = plan_columns(w);
  QuantScheme scheme;
  scheme.kind = QuantKind::Int6;
  scheme.group = 16;
  scheme.k_superblocks = true;
  const int64_t nsb = plan.nsb, Kg = 256 * nsb, dbytes = QuantScheme::int6_d_bytes(nsb);
  QuantizedWeight qw = quantized_layout(N, Kg, scheme);
  if (!plan.identity) {
    qw.act_index = Tensor::empty({Kg}, DType::I32);
    std::memcpy(qw.act_index.raw(), plan.act_index.data(), size_t(Kg) * 4);
    qw.in_features = K;
  }
  const int64_t R = QuantizedWeight::kBlockRows, nblocks = qw.Np / R, SB = QuantScheme::kInt6SuperblockBytes;
  qw.data = alloc ? alloc(nblocks, qw.block_bytes) : Tensor::empty({nblocks, qw.block_bytes}, DType::U8);
  NV_CHECK(qw.data.dtype() == DType::U8 && qw.data.numel() == nblocks * qw.block_bytes,
           "pack_int6_groups: allocator returned ", qw.data.str());
  const float* d = w.d.data<float>();
  const uint8_t* sc = w.sub_scale.data<uint8_t>();
  pool.parallel_for(nblocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      uint8_t* blk = qw.data.data<uint8_t>() + b * qw.block_bytes;
      std::memset(blk, 0, size_t(qw.block_bytes));  // rows past N: d 0, codes 0
      uint16_t* dt = reinterpret_cast<uint16_t*>(blk);
      for (int64_t s = 0; s < nsb; ++s) {
        uint8_t* sb = blk + dbytes + s * SB;
        const int64_t src = plan.ss0 + s;  // the source superblock
        const int32_t* cols = plan.act_index.data() + 256 * s;
        for (int64_t r = 0; r < R && b * R + r < N; ++r) {
          const int64_t n = b * R + r;
          dt[16 * s + r] = f32_to_f16(d[n * S + src]);
          // A zero column's code: 32 (a zero weight; its activation is 0 anyway).
          auto code = [&](int64_t c) { return cols[c] >= 0 ? q[n * K + cols[c]] : uint8_t(32); };
          for (int64_t u = 0; u < 16; ++u) {
            sb[3072 + 16 * u + r] = sc[n * G + 16 * src + u];
            uint8_t* lines = sb + 192 * u;
            for (int e = 0; e < 12; ++e) lines[64 * (e / 4) + 4 * r + e % 4] = code(16 * u + e);
            for (int j = 0; j < 4; ++j) {  // the codes of k 12-15: 2 bits in each line's top
              const int c = code(16 * u + 12 + j);
              for (int i = 0; i < 3; ++i) lines[64 * i + 4 * r + j] |= uint8_t(((c >> (2 * i)) & 3) << 6);
            }
          }
        }
      }
    }
  }, grain_for_work(R * Kg, int64_t(1) << 16));
  return qw;
}

}  // namespace nanovllm::cpu
