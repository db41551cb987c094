#include "kernels/cpu/pack_kquants.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "util/check.h"

namespace nanovllm::cpu {

namespace {

// The factors must give the scales (and mins) exactly: they are the weight's definition. A NaN / Inf
// d (a corrupt file, loaded under --allow-nonfinite-weights) gives the same.
bool same_value(float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); }
bool f16_value(float v) { return !std::isfinite(v) || f16_to_f32(f32_to_f16(v)) == v; }
bool shaped(const Tensor& t, DType dt, const Shape& s) { return t.defined() && t.dtype() == dt && t.shape() == s; }

// Codes below 2^bits and g_idx in [0, G): what every K-quant repack reads blindly after.
void check_codes(const Int4Groups& w) {
  const uint8_t* q = w.q.data<uint8_t>();
  for (int64_t i = 0; i < w.N * w.K; ++i)
    NV_CHECK(q[i] < (1 << w.bits), "int", w.bits, " groups: row ", i / w.K, " column ", i % w.K, ": code ",
             int(q[i]), " past ", (1 << w.bits) - 1);
  const int32_t* gi = w.g_idx.data<int32_t>();
  for (int64_t k = 0; k < w.K; ++k)
    NV_CHECK(gi[k] >= 0 && gi[k] < w.G, "int", w.bits, " groups: g_idx[", k, "] = ", gi[k], " outside [0, ", w.G, ")");
}

// Q6_K's groups (bits 6: codes 0..63, every zero 32) or Q3_K's (bits 3: codes 0..7, every zero 4,
// sc in [-32, 31]): scale = d x sc per 16 columns, d per 256.
void check_int6(const Int4Groups& w) {
  // (A tensor-parallel column slice keeps the whole weight's groups: K may be less than 16 G.)
  const bool q3 = w.bits == 3;
  const char* form = q3 ? "int3 groups" : "int6 groups";
  const int zero = q3 ? 4 : 32;
  NV_CHECK((w.bits == 6 || q3) && w.N > 0 && w.K > 0 && w.G > 0 && w.G % 16 == 0,
           form, ": weight [", w.N, ", ", w.K, "] in ", w.G, " groups of ", w.bits,
           "-bit codes is not ", q3 ? "Q3_K" : "Q6_K", "'s groups of 16 in superblocks of 256");
  NV_CHECK(shaped(w.q, DType::U8, {w.N, w.K}) && shaped(w.scales, DType::F32, {w.N, w.G}) &&
               shaped(w.zeros, DType::U8, {w.N, w.G}) && shaped(w.d, DType::F32, {w.N, w.G / 16}) &&
               shaped(w.sub_scale, DType::U8, {w.N, w.G}) && shaped(w.g_idx, DType::I32, {w.K}) &&
               !w.has_mins(),
           form, ": q ", w.q.str(), " scales ", w.scales.str(), " zeros ", w.zeros.str(), " d ",
           w.d.str(), " sc ", w.sub_scale.str(), " g_idx ", w.g_idx.str(), " do not match [", w.N, ", ",
           w.K, "] in ", w.G, " groups");
  check_codes(w);
  const float* d = w.d.data<float>();
  const uint8_t* sc = w.sub_scale.data<uint8_t>();
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t g = 0; g < w.G; ++g) {
      const int64_t i = n * w.G + g;
      const float dv = d[n * (w.G / 16) + g / 16];
      NV_CHECK(w.zeros.data<uint8_t>()[i] == zero && f16_value(dv) &&
                   (!q3 || (int8_t(sc[i]) >= -32 && int8_t(sc[i]) < 32)) &&
                   same_value(dv * float(int8_t(sc[i])), w.scales.data<float>()[i]),
               form, ": row ", n, " group ", g, ": zero ", int(w.zeros.data<uint8_t>()[i]), ", factors ",
               dv, " x ", int(int8_t(sc[i])), " do not give its scale ", w.scales.data<float>()[i]);
    }
}

// The kernel's columns: source superblocks ss0 .. ss0 + nsb - 1 in order (`gs`-column groups,
// 256 / gs per superblock), each column at a free slot of its own group there. A whole weight and
// tensor-parallel slices cut at 256 columns map onto themselves (identity: no gather); a slice
// cut inside a superblock (or a group) gets the missing slots as zero columns (act_index -1).
struct SuperblockPlan {
  int64_t ss0 = 0, nsb = 0;
  std::vector<int32_t> act_index;  // [nsb * 256]: the input column of each kernel column, or -1
  bool identity = true;
};

SuperblockPlan plan_columns(const Int4Groups& w, int gs) {
  const int gps = 256 / gs;  // groups per superblock
  const int32_t* gi = w.g_idx.data<int32_t>();
  int32_t lo = gi[0], hi = gi[0];
  for (int64_t k = 0; k < w.K; ++k) lo = std::min(lo, gi[k]), hi = std::max(hi, gi[k]);
  SuperblockPlan p;
  p.ss0 = lo / gps;
  p.nsb = hi / gps - p.ss0 + 1;
  p.act_index.assign(size_t(p.nsb * 256), -1);
  std::vector<int> used(size_t(p.nsb * gps), 0);
  for (int64_t k = 0; k < w.K; ++k) {
    const int64_t g = gi[k] - gps * p.ss0;  // the group's index in the kernel's columns
    NV_CHECK(used[size_t(g)] < gs, "K-quant groups: group ", gi[k], " has more than ", gs, " columns");
    p.act_index[size_t(gs * g + used[size_t(g)]++)] = int32_t(k);
  }
  p.identity = int64_t(p.act_index.size()) == w.K;
  for (int64_t k = 0; p.identity && k < w.K; ++k) p.identity = p.act_index[size_t(k)] == k;
  return p;
}

// The layout's shape for a plan, with the gather when it is not the identity.
QuantizedWeight planned_layout(const Int4Groups& w, const SuperblockPlan& plan, const QuantScheme& scheme,
                               const U8Allocator& alloc) {
  return gathered_layout(w, plan.act_index, plan.identity, scheme, alloc);
}

// Groups with a scale and min from superblock factors (Q5_K: bits 5, groups of 32, 6-bit sc / m;
// Q2_K: bits 2, groups of 16, 4-bit sc / m; 256 columns per superblock either way).
void check_k_mins(const Int4Groups& w) {
  const bool q2 = w.bits == 2;
  const int gs = q2 ? 16 : 32, gps = 256 / gs, sub_max = q2 ? 16 : 64;
  const char* form = q2 ? "int2" : "int5";
  NV_CHECK((w.bits == 5 || q2) && w.N > 0 && w.K > 0 && w.G > 0 && w.G % gps == 0, form,
           " groups: weight [", w.N, ", ", w.K, "] in ", w.G, " groups of ", w.bits, "-bit codes is not ",
           q2 ? "Q2_K" : "Q5_K", "'s groups of ", gs, " in superblocks of 256");
  const int64_t S = w.G / gps;
  NV_CHECK(shaped(w.q, DType::U8, {w.N, w.K}) && shaped(w.scales, DType::F32, {w.N, w.G}) &&
               shaped(w.mins, DType::F32, {w.N, w.G}) && shaped(w.d, DType::F32, {w.N, S}) &&
               shaped(w.dmin, DType::F32, {w.N, S}) && shaped(w.sub_scale, DType::U8, {w.N, w.G}) &&
               shaped(w.sub_min, DType::U8, {w.N, w.G}) && shaped(w.g_idx, DType::I32, {w.K}),
           form, " groups: q ", w.q.str(), " scales ", w.scales.str(), " mins ", w.mins.str(), " d ", w.d.str(),
           " dmin ", w.dmin.str(), " sc ", w.sub_scale.str(), " m ", w.sub_min.str(), " g_idx ", w.g_idx.str(),
           " do not match [", w.N, ", ", w.K, "] in ", w.G, " groups");
  check_codes(w);
  const float* d = w.d.data<float>();
  const float* dm = w.dmin.data<float>();
  const uint8_t* sc = w.sub_scale.data<uint8_t>();
  const uint8_t* mm = w.sub_min.data<uint8_t>();
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t g = 0; g < w.G; ++g) {
      const int64_t i = n * w.G + g, si = n * S + g / gps;
      NV_CHECK(f16_value(d[si]) && f16_value(dm[si]) && sc[i] < sub_max && mm[i] < sub_max &&
                   same_value(d[si] * float(sc[i]), w.scales.data<float>()[i]) &&
                   same_value(-(dm[si] * float(mm[i])), w.mins.data<float>()[i]),
               form, " groups: row ", n, " group ", g, ": superblock factors (", d[si], " x ", int(sc[i]), ", ",
               dm[si], " x ", int(mm[i]), ") do not give its scale ", w.scales.data<float>()[i], " and min ",
               w.mins.data<float>()[i]);
    }
}

}  // namespace

QuantizedWeight pack_int2_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc) {
  NV_CHECK_EQ(w.bits, 2, "pack_int2_groups");
  check_k_mins(w);
  const int64_t N = w.N, K = w.K, G = w.G, S = G / 16;
  const SuperblockPlan plan = plan_columns(w, 16);
  QuantizedWeight qw = planned_layout(w, plan, parse_quant_scheme("int2-g16-zp-k"), alloc);
  const int64_t R = QuantizedWeight::kBlockRows, nblocks = qw.Np / R, SB = QuantScheme::kInt2SuperblockBytes;
  const uint8_t* q = w.q.data<uint8_t>();
  const float* d = w.d.data<float>();
  const float* dm = w.dmin.data<float>();
  const uint8_t* sc = w.sub_scale.data<uint8_t>();
  const uint8_t* mm = w.sub_min.data<uint8_t>();
  pool.parallel_for(nblocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      uint8_t* blk = qw.data.data<uint8_t>() + b * qw.block_bytes;
      std::memset(blk, 0, size_t(qw.block_bytes));  // rows past N: d, dmin 0, codes 0
      for (int64_t s = 0; s < plan.nsb; ++s) {
        uint8_t* sb = blk + s * SB;
        const int64_t src = plan.ss0 + s;  // the source superblock
        const int32_t* cols = plan.act_index.data() + 256 * s;
        for (int64_t r = 0; r < R && b * R + r < N; ++r) {
          const int64_t n = b * R + r;
          reinterpret_cast<uint16_t*>(sb + 1280)[r] = f32_to_f16(d[n * S + src]);
          reinterpret_cast<uint16_t*>(sb + 1312)[r] = f32_to_f16(dm[n * S + src]);
          for (int64_t u = 0; u < 16; ++u) {
            const int64_t g = n * G + 16 * src + u;
            sb[1024 + 16 * u + r] = uint8_t(sc[g] | (mm[g] << 4));
            for (int e = 0; e < 16; ++e) {
              const int32_t col = cols[16 * u + e];
              const int c = col >= 0 ? q[n * K + col] : 0;  // a zero column: its activation is 0
              sb[64 * u + 4 * r + e % 4] |= uint8_t(c << (2 * (e / 4)));
            }
          }
        }
      }
    }
  }, grain_for_work(R * 256 * plan.nsb, int64_t(1) << 16));
  return qw;
}

namespace {

// Q6_K's and Q3_K's forms (kernels/quantized.h: int6-g16-k, int3-g16-k): the rows' f16 d of each
// superblock in a table at the block's start, then per superblock the groups' codes, which
// put(sb, u, r, codes) places for group u of row r, and the 16 x 16 i8 sc at sc_at. A zero column
// (act_index -1) gets zero_code: a zero weight (its activation is 0 anyway).
template <class Put>
QuantizedWeight pack_d_sc_groups(const Int4Groups& w, const char* scheme, int64_t SB, int64_t sc_at, uint8_t zero_code,
                                 ThreadPool& pool, const U8Allocator& alloc, Put put) {
  check_int6(w);
  const int64_t N = w.N, K = w.K, G = w.G, S = G / 16;
  const uint8_t* q = w.q.data<uint8_t>();
  const SuperblockPlan plan = plan_columns(w, 16);
  QuantizedWeight qw = planned_layout(w, plan, parse_quant_scheme(scheme), alloc);
  const int64_t nsb = plan.nsb, Kg = 256 * nsb, dbytes = QuantScheme::int6_d_bytes(nsb);
  const int64_t R = QuantizedWeight::kBlockRows, nblocks = qw.Np / R;
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
          for (int u = 0; u < 16; ++u) {
            sb[sc_at + 16 * u + r] = sc[n * G + 16 * src + u];
            uint8_t codes[16];
            for (int e = 0; e < 16; ++e) {
              const int32_t col = cols[16 * u + e];
              codes[e] = col >= 0 ? q[n * K + col] : zero_code;
            }
            put(sb, u, r, codes);
          }
        }
      }
    }
  }, grain_for_work(R * Kg, int64_t(1) << 16));
  return qw;
}

}  // namespace

QuantizedWeight pack_int6_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc) {
  NV_CHECK_EQ(w.bits, 6, "pack_int6_groups");
  return pack_d_sc_groups(w, "int6-g16-k", QuantScheme::kInt6SuperblockBytes, 3072, 32, pool, alloc,
                          [](uint8_t* sb, int u, int64_t r, const uint8_t* c) {
                            uint8_t* lines = sb + 192 * u;  // P0 P1 P2
                            for (int e = 0; e < 12; ++e) lines[64 * (e / 4) + 4 * r + e % 4] = c[e];
                            for (int j = 0; j < 4; ++j)  // the codes of k 12-15: 2 bits in each line's top
                              for (int i = 0; i < 3; ++i)
                                lines[64 * i + 4 * r + j] |= uint8_t(((c[12 + j] >> (2 * i)) & 3) << 6);
                          });
}

QuantizedWeight pack_int3_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc) {
  NV_CHECK_EQ(w.bits, 3, "pack_int3_groups");
  return pack_d_sc_groups(w, "int3-g16-k", QuantScheme::kInt3SuperblockBytes, 1536, 4, pool, alloc,
                          [](uint8_t* sb, int u, int64_t r, const uint8_t* c) {
                            uint8_t* rec = sb + 192 * (u / 2);  // lines A B C of groups u & ~1, u | 1
                            for (int e = 0; e < 16; ++e) {
                              const int64_t j = 4 * r + e % 4;
                              const int v = 4 * (u % 2) + e / 4;
                              if (v == 2 || v == 5) {  // bits 0-1 at 6-7 of A (B), bit 2 at bit 6 (7) of C
                                rec[64 * (v / 3) + j] |= uint8_t((c[e] & 3) << 6);
                                rec[128 + j] |= uint8_t((c[e] >> 2) << (v == 2 ? 6 : 7));
                              } else {  // v = 0 1 | 3 4 | 6 7: line v / 3 at bits 3 (v % 3)
                                rec[64 * (v / 3) + j] |= uint8_t(c[e] << (3 * (v % 3)));
                              }
                            }
                          });
}

QuantizedWeight pack_int5_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc) {
  NV_CHECK_EQ(w.bits, 5, "pack_int5_groups");
  check_k_mins(w);
  const int64_t N = w.N, K = w.K, G = w.G, S = G / 8;
  const SuperblockPlan plan = plan_columns(w, 32);
  QuantizedWeight qw = planned_layout(w, plan, parse_quant_scheme("int5-g32-zp-k"), alloc);
  const int64_t R = QuantizedWeight::kBlockRows, nblocks = qw.Np / R, SB = QuantScheme::kInt5SuperblockBytes;
  const uint8_t* q = w.q.data<uint8_t>();
  const float* d = w.d.data<float>();
  const float* dm = w.dmin.data<float>();
  const uint8_t* sc = w.sub_scale.data<uint8_t>();
  const uint8_t* mm = w.sub_min.data<uint8_t>();
  pool.parallel_for(nblocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      uint8_t* blk = qw.data.data<uint8_t>() + b * qw.block_bytes;
      std::memset(blk, 0, size_t(qw.block_bytes));  // rows past N: d 0, codes 0
      for (int64_t s = 0; s < plan.nsb; ++s) {
        uint8_t* sb = blk + s * SB;
        const int64_t src = plan.ss0 + s;  // the source superblock
        const int32_t* cols = plan.act_index.data() + 256 * s;
        for (int64_t r = 0; r < R && b * R + r < N; ++r) {
          const int64_t n = b * R + r;
          reinterpret_cast<uint16_t*>(sb + 2816)[r] = f32_to_f16(d[n * S + src]);
          reinterpret_cast<uint16_t*>(sb + 2848)[r] = f32_to_f16(dm[n * S + src]);
          for (int64_t j = 0; j < 8; ++j) {
            sb[2560 + 16 * j + r] = sc[n * G + 8 * src + j];
            sb[2688 + 16 * j + r] = mm[n * G + 8 * src + j];
            uint8_t* rec = sb + 320 * j;
            for (int e = 0; e < 32; ++e) {
              const int32_t col = cols[32 * j + e];
              const int c = col >= 0 ? q[n * K + col] : 0;  // a zero column: its activation is 0
              rec[64 * (e / 8) + 4 * r + e % 4] |= uint8_t((c & 15) << ((e % 8) >= 4 ? 4 : 0));
              rec[256 + 4 * r + e % 4] |= uint8_t((c >> 4) << (e / 4));
            }
          }
        }
      }
    }
  }, grain_for_work(R * 256 * plan.nsb, int64_t(1) << 16));
  return qw;
}

QuantizedWeight gathered_layout(const Int4Groups& w, const std::vector<int32_t>& act_index, bool identity,
                                const QuantScheme& scheme, const U8Allocator& alloc) {
  const int64_t Kg = int64_t(act_index.size());
  QuantizedWeight qw = quantized_layout(w.N, Kg, scheme);
  NV_CHECK_EQ(qw.Kp, Kg, "repack of ", scheme.str(), ": padded K");
  if (!identity) {
    qw.act_index = Tensor::empty({Kg}, DType::I32);
    std::memcpy(qw.act_index.raw(), act_index.data(), size_t(Kg) * 4);
    qw.in_features = w.K;
  }
  const int64_t nblocks = qw.Np / QuantizedWeight::kBlockRows;
  qw.data = alloc ? alloc(nblocks, qw.block_bytes) : Tensor::empty({nblocks, qw.block_bytes}, DType::U8);
  NV_CHECK(qw.data.dtype() == DType::U8 && qw.data.numel() == nblocks * qw.block_bytes,
           "repack of ", scheme.str(), ": allocator returned ", qw.data.str());
  return qw;
}

}  // namespace nanovllm::cpu
