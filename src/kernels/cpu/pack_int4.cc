#include "kernels/cpu/pack_int4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/pack_kquants.h"
#include "util/check.h"

namespace nanovllm::cpu {

namespace {

// Byte of element e of row r in a group record (kernels/quantized.h; as quantize.cc).
int64_t int4_offset(int64_t r, int64_t e) { return (e / 8) * 64 + 4 * r + e % 4; }

void check_input(const Int4Groups& w) {
  NV_CHECK(w.N > 0 && w.K > 0 && w.G > 0, "int4 groups: empty weight [", w.N, ", ", w.K, "], ", w.G, " groups");
  NV_CHECK(w.q.dtype() == DType::U8 && (w.q.shape() == Shape{w.N, w.K}), "int4 groups: q ", w.q.str(),
           " must be U8 [", w.N, ", ", w.K, "]");
  NV_CHECK(w.scales.dtype() == DType::F32 && (w.scales.shape() == Shape{w.N, w.G}), "int4 groups: scales ",
           w.scales.str(), " must be F32 [", w.N, ", ", w.G, "]");
  if (w.has_mins())
    NV_CHECK(w.mins.dtype() == DType::F32 && (w.mins.shape() == Shape{w.N, w.G}), "int4 groups: mins ",
             w.mins.str(), " must be F32 [", w.N, ", ", w.G, "]");
  else if (!w.iq4_table)
    NV_CHECK(w.zeros.dtype() == DType::U8 && (w.zeros.shape() == Shape{w.N, w.G}), "int4 groups: zeros ",
             w.zeros.str(), " must be U8 [", w.N, ", ", w.G, "]");
  NV_CHECK(w.g_idx.dtype() == DType::I32 && (w.g_idx.shape() == Shape{w.K}), "int4 groups: g_idx ",
           w.g_idx.str(), " must be I32 [", w.K, "]");
  for (int64_t k = 0; k < w.K; ++k)
    NV_CHECK(w.g_idx.data<int32_t>()[k] >= 0 && w.g_idx.data<int32_t>()[k] < w.G, "int4 groups: g_idx[", k,
             "] = ", w.g_idx.data<int32_t>()[k], " outside [0, ", w.G, ")");
}

// The kernel's column order: input columns sorted by group, each group's run padded with -1 to
// a multiple of the layout group. src_group[j]: the checkpoint group of layout group j.
struct ColumnPlan {
  int group = 32;
  std::vector<int32_t> act_index;
  std::vector<int32_t> src_group;
  bool identity = true;
};

ColumnPlan plan_columns(const Int4Groups& w, bool group64) {
  const int32_t* gi = w.g_idx.data<int32_t>();
  std::vector<int32_t> order(size_t(w.K));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return gi[a] < gi[b]; });
  std::vector<std::pair<int64_t, int64_t>> runs;  // [begin, end) in `order`
  for (int64_t i = 0; i < w.K; ++i)
    if (i == 0 || gi[order[size_t(i)]] != gi[order[size_t(i - 1)]]) runs.push_back({i, i + 1});
    else runs.back().second = i + 1;
  ColumnPlan p;
  p.group = group64 ? 64 : 32;
  for (const auto& [b, e] : runs)
    if ((e - b) % 64 != 0) p.group = 32;
  for (const auto& [b, e] : runs) {
    for (int64_t i = b; i < e; ++i) p.act_index.push_back(order[size_t(i)]);
    while (p.act_index.size() % size_t(p.group) != 0) p.act_index.push_back(-1);
    const int64_t pieces = (e - b + p.group - 1) / p.group;
    for (int64_t j = 0; j < pieces; ++j) p.src_group.push_back(gi[order[size_t(b)]]);
  }
  p.identity = int64_t(p.act_index.size()) == w.K;
  for (int64_t k = 0; p.identity && k < w.K; ++k) p.identity = p.act_index[size_t(k)] == k;
  return p;
}

// Q4_K's two-level form fits the k_superblocks layout when the columns need no gather and
// every run of 8 layout groups is one checkpoint superblock (8 consecutive groups from a
// multiple of 8): a whole Q4_K weight, and tensor-parallel halves cut at 256 columns.
bool superblocks_fit(const Int4Groups& w, const ColumnPlan& p) {
  if (!p.identity || w.K % 256 != 0 || w.G % 8 != 0) return false;
  for (size_t j = 0; j < p.src_group.size(); j += 8)
    for (size_t i = 0; i < 8; ++i)
      if (p.src_group[j + i] != p.src_group[j] + int32_t(i) || p.src_group[j] % 8 != 0) return false;
  return true;
}

QuantizedWeight pack_superblocks(const Int4Groups& w, const ColumnPlan& plan, ThreadPool& pool,
                                 const U8Allocator& alloc) {
  const int64_t N = w.N, G = w.G, S = G / 8;
  NV_CHECK(w.d.dtype() == DType::F32 && (w.d.shape() == Shape{N, S}) && w.dmin.dtype() == DType::F32 &&
               (w.dmin.shape() == Shape{N, S}) && w.sub_scale.dtype() == DType::U8 &&
               (w.sub_scale.shape() == Shape{N, G}) && w.sub_min.dtype() == DType::U8 &&
               (w.sub_min.shape() == Shape{N, G}),
           "int4 groups: superblock factors d ", w.d.str(), " dmin ", w.dmin.str(), " sc ", w.sub_scale.str(),
           " m ", w.sub_min.str(), " do not match [", N, ", ", G, "]");
  const float* d = w.d.data<float>();
  const float* dm = w.dmin.data<float>();
  const uint8_t* sc = w.sub_scale.data<uint8_t>();
  const uint8_t* mm = w.sub_min.data<uint8_t>();
  // The factors must give the scales and mins exactly (they are the weight's definition). A
  // NaN / Inf d (a corrupt file, loaded under --allow-nonfinite-weights) gives the same.
  auto same = [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  auto f16_value = [](float v) { return !std::isfinite(v) || f16_to_f32(f32_to_f16(v)) == v; };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < G; ++g) {
      const int64_t i = n * G + g, si = n * S + g / 8;
      NV_CHECK(f16_value(d[si]) && f16_value(dm[si]) && sc[i] < 64 && mm[i] < 64 &&
                   same(d[si] * float(sc[i]), w.scales.data<float>()[i]) &&
                   same(-(dm[si] * float(mm[i])), w.mins.data<float>()[i]),
               "int4 groups: row ", n, " group ", g, ": superblock factors (", d[si], " x ", int(sc[i]), ", ", dm[si],
               " x ", int(mm[i]), ") do not give its scale ", w.scales.data<float>()[i], " and min ",
               w.mins.data<float>()[i]);
    }
  QuantScheme scheme;
  scheme.kind = QuantKind::Int4;
  scheme.group = 32;
  scheme.zero_points = scheme.k_superblocks = true;
  QuantizedWeight qw = quantized_layout(N, w.K, scheme);
  const int64_t R = QuantizedWeight::kBlockRows, nblocks = qw.Np / R, SB = QuantScheme::kSuperblockBytes;
  qw.data = alloc ? alloc(nblocks, qw.block_bytes) : Tensor::empty({nblocks, qw.block_bytes}, DType::U8);
  NV_CHECK(qw.data.dtype() == DType::U8 && qw.data.numel() == nblocks * qw.block_bytes,
           "pack_int4_groups: allocator returned ", qw.data.str());
  const uint8_t* q = w.q.data<uint8_t>();
  pool.parallel_for(nblocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      uint8_t* blk = qw.data.data<uint8_t>() + b * qw.block_bytes;
      std::memset(blk, 0, size_t(qw.block_bytes));  // rows past N: d 0, codes 0
      for (int64_t s = 0; s < w.K / 256; ++s) {
        uint8_t* sb = blk + s * SB;
        const int64_t src_sb = plan.src_group[size_t(8 * s)] / 8;
        for (int64_t r = 0; r < R && b * R + r < N; ++r) {
          const int64_t n = b * R + r;
          reinterpret_cast<uint16_t*>(sb + 2304)[r] = f32_to_f16(d[n * S + src_sb]);
          reinterpret_cast<uint16_t*>(sb + 2336)[r] = f32_to_f16(dm[n * S + src_sb]);
          for (int64_t j = 0; j < 8; ++j) {
            sb[2048 + 16 * j + r] = sc[n * G + 8 * src_sb + j];
            sb[2176 + 16 * j + r] = mm[n * G + 8 * src_sb + j];
            for (int64_t e = 0; e < 32; ++e)
              sb[256 * j + int4_offset(r, e)] |=
                  uint8_t((q[n * w.K + 256 * s + 32 * j + e] & 15) << ((e % 8) >= 4 ? 4 : 0));
          }
        }
      }
    }
  }, grain_for_work(R * w.K, int64_t(1) << 16));
  return qw;
}

// The layout of `scheme` for the plan's columns, its gather and data (pack_kquants.h).
QuantizedWeight planned_layout(const Int4Groups& w, const ColumnPlan& plan, const QuantScheme& scheme,
                               const U8Allocator& alloc) {
  return gathered_layout(w, plan.act_index, plan.identity, scheme, alloc);
}

// IQ4_NL / IQ4_XS codes (indices into kIq4nlTable) with their f32 scales: int4-g32-nl, the codes
// and scales as they are (groups cut by a tensor-parallel slice become gathered groups of 32).
QuantizedWeight pack_iq4(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc) {
  NV_CHECK(!w.has_mins() && !w.has_superblocks(), "int4 groups: IQ4 table codes come with scales only");
  for (int64_t i = 0; i < w.N * w.K; ++i)
    NV_CHECK(w.q.data<uint8_t>()[i] < 16, "int4 groups: row ", i / w.K, " column ", i % w.K, ": code ",
             int(w.q.data<uint8_t>()[i]), " is not 4-bit");
  const ColumnPlan plan = plan_columns(w, false);
  QuantizedWeight qw = planned_layout(w, plan, parse_quant_scheme("int4-g32-nl"), alloc);
  const int64_t R = QuantizedWeight::kBlockRows, nblocks = qw.Np / R, rec = qw.group_record_bytes(), Kg = qw.Kp;
  const uint8_t* q = w.q.data<uint8_t>();
  const float* s = w.scales.data<float>();
  pool.parallel_for(nblocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      uint8_t* blk = qw.data.data<uint8_t>() + b * qw.block_bytes;
      std::memset(blk, 0, size_t(qw.block_bytes));  // rows past N: scale 0
      for (int64_t j = 0; j < Kg / 32; ++j) {
        uint8_t* r8 = blk + j * rec;
        const int64_t src = plan.src_group[size_t(j)];
        for (int64_t r = 0; r < R && b * R + r < w.N; ++r) {
          const int64_t n = b * R + r;
          reinterpret_cast<float*>(r8 + 256)[r] = s[n * w.G + src];
          for (int64_t e = 0; e < 32; ++e) {
            const int32_t col = plan.act_index[size_t(j * 32 + e)];  // padding: x is 0 there
            const uint8_t code = col >= 0 ? q[n * w.K + col] : uint8_t(8);
            r8[int4_offset(r, e)] |= uint8_t(code << ((e % 8) >= 4 ? 4 : 0));
          }
        }
      }
    }
  }, grain_for_work(R * Kg, int64_t(1) << 16));
  return qw;
}

// Groups of 5-bit codes with a scale and min per group and no superblock factors (ggml's Q5_1; or
// Q5_K parts fused with Q5_1 ones, whose factors int4_concat_rows drops): the codes, scales and
// mins as they are (groups cut by a tensor-parallel slice become gathered ones). int5-g32-zp when
// every scale and min is an f16 value (a Q5_1's d and m always are: 6 bits per weight, the file's
// size), else int5-g32-zp-f32 (Q5_K's exact products take up to 17 bits: 7 bits per weight).
QuantizedWeight pack_int5_flat(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc) {
  check_input(w);
  NV_CHECK(w.has_mins() && !w.iq4_table, "int5 groups: 5-bit codes come with a scale and min per group");
  for (int64_t i = 0; i < w.N * w.K; ++i)
    NV_CHECK(w.q.data<uint8_t>()[i] < 32, "int5 groups: row ", i / w.K, " column ", i % w.K, ": code ",
             int(w.q.data<uint8_t>()[i]), " past 31");
  const float* s = w.scales.data<float>();
  const float* mn = w.mins.data<float>();
  auto is_f16 = [](float v) {  // bit for bit, -0 and all (a NaN is not: it takes the f32 form)
    const float back = f16_to_f32(f32_to_f16(v));
    return std::memcmp(&back, &v, 4) == 0;
  };
  bool f16 = true;
  for (int64_t i = 0; i < w.N * w.G && f16; ++i) f16 = is_f16(s[i]) && is_f16(mn[i]);
  const ColumnPlan plan = plan_columns(w, false);
  QuantizedWeight qw = planned_layout(w, plan, parse_quant_scheme(f16 ? "int5-g32-zp" : "int5-g32-zp-f32"), alloc);
  const int64_t R = QuantizedWeight::kBlockRows, nblocks = qw.Np / R, rec = qw.group_record_bytes(), Kg = qw.Kp;
  const uint8_t* q = w.q.data<uint8_t>();
  pool.parallel_for(nblocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      uint8_t* blk = qw.data.data<uint8_t>() + b * qw.block_bytes;
      std::memset(blk, 0, size_t(qw.block_bytes));  // rows past N: scale and min 0
      for (int64_t j = 0; j < Kg / 32; ++j) {
        uint8_t* r8 = blk + j * rec;
        const int64_t src = plan.src_group[size_t(j)];
        for (int64_t r = 0; r < R && b * R + r < w.N; ++r) {
          const int64_t n = b * R + r;
          if (f16) {  // [16 f16 scales][16 f16 mins]
            uint16_t* params = reinterpret_cast<uint16_t*>(r8 + 320);
            params[r] = f32_to_f16(s[n * w.G + src]);
            params[16 + r] = f32_to_f16(mn[n * w.G + src]);
          } else {  // [16 f32 scales][16 f32 mins]
            float* params = reinterpret_cast<float*>(r8 + 320);
            params[r] = s[n * w.G + src];
            params[16 + r] = mn[n * w.G + src];
          }
          for (int64_t e = 0; e < 32; ++e) {
            const int32_t col = plan.act_index[size_t(j * 32 + e)];  // padding: x is 0 there
            const int c = col >= 0 ? q[n * w.K + col] : 0;
            r8[int4_offset(r, e)] |= uint8_t((c & 15) << ((e % 8) >= 4 ? 4 : 0));
            r8[256 + 4 * r + e % 4] |= uint8_t((c >> 4) << (e / 4));
          }
        }
      }
    }
  }, grain_for_work(R * Kg, int64_t(1) << 16));
  return qw;
}

}  // namespace

QuantizedWeight pack_int4_groups(const Int4Groups& w, ThreadPool& pool, const U8Allocator& alloc) {
  if (w.bits == 6) return pack_int6_groups(w, pool, alloc);  // Q6_K
  if (w.bits == 5)  // Q5_K (its superblock factors) or Q5_1
    return w.has_superblocks() ? pack_int5_groups(w, pool, alloc) : pack_int5_flat(w, pool, alloc);
  if (w.bits == 2) return pack_int2_groups(w, pool, alloc);  // Q2_K
  if (w.bits == 3) return pack_int3_groups(w, pool, alloc);  // Q3_K
  NV_CHECK(w.bits == 4, "int4 groups: ", w.bits, "-bit codes");
  check_input(w);
  if (w.iq4_table) return pack_iq4(w, pool, alloc);
  const bool f32 = w.has_mins();  // scale and min in f32: the f32_params layout (group 32 only)
  const ColumnPlan plan = plan_columns(w, !f32);
  if (f32 && w.has_superblocks() && superblocks_fit(w, plan)) return pack_superblocks(w, plan, pool, alloc);
  bool symmetric = !f32;
  for (int64_t i = 0; i < w.N * w.G && symmetric; ++i) symmetric = w.zeros.data<uint8_t>()[i] == 8;
  // f16 must hold every scale (and min): checked before the parallel pass.
  for (int64_t i = 0; !f32 && i < w.N * w.G; ++i) {
    const float sc = w.scales.data<float>()[i], mn = sc * float(w.zeros.data<uint8_t>()[i]);
    NV_CHECK(std::isfinite(f16_to_f32(f32_to_f16(sc))) && std::isfinite(f16_to_f32(f32_to_f16(mn))),
             "int4 repack: row ", i / w.G, " group ", i % w.G, ": scale ", sc, " (x zero ",
             int(w.zeros.data<uint8_t>()[i]), ") is not finite in f16");
  }
  QuantScheme scheme;
  scheme.kind = QuantKind::Int4;
  scheme.group = plan.group;
  scheme.zero_points = !symmetric;
  scheme.f32_params = f32;
  QuantizedWeight qw = planned_layout(w, plan, scheme, alloc);
  const int64_t R = QuantizedWeight::kBlockRows, nblocks = qw.Np / R, g = plan.group, Kg = qw.Kp;
  const int64_t rec = qw.group_record_bytes();
  const uint8_t* q = w.q.data<uint8_t>();
  const uint8_t* z = f32 ? nullptr : w.zeros.data<uint8_t>();
  const float* mn = f32 ? w.mins.data<float>() : nullptr;
  const float* s = w.scales.data<float>();
  pool.parallel_for(nblocks, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      uint8_t* blk = qw.data.data<uint8_t>() + b * qw.block_bytes;
      std::memset(blk, 0, size_t(qw.block_bytes));  // rows past N: scale 0, codes 0
      for (int64_t j = 0; j < Kg / g; ++j) {
        uint8_t* r8 = blk + j * rec;
        uint16_t* scales = reinterpret_cast<uint16_t*>(r8 + 8 * g);
        const int64_t src = plan.src_group[size_t(j)];
        for (int64_t r = 0; r < R && b * R + r < w.N; ++r) {
          const int64_t n = b * R + r;
          const float sc = s[n * w.G + src];
          if (f32) {  // the values themselves: w = sc * q + min exactly as the checkpoint's
            float* params = reinterpret_cast<float*>(r8 + 8 * g);
            params[r] = sc;
            params[16 + r] = mn[n * w.G + src];
          } else {
            const int zero = z[n * w.G + src];
            scales[r] = f32_to_f16(sc);
            if (!symmetric) scales[16 + r] = f32_to_f16(-sc * float(zero));  // exact in f32 for an f16 scale
          }
          for (int64_t e = 0; e < g; ++e) {
            const int32_t col = plan.act_index[size_t(j * g + e)];
            // Padding: code 8 is the symmetric zero; with zero points x is 0 there anyway.
            const uint8_t code = col >= 0 ? q[n * w.K + col] : uint8_t(symmetric ? 8 : 0);
            r8[int4_offset(r, e)] |= uint8_t((code & 15) << ((e % 8) >= 4 ? 4 : 0));
          }
        }
      }
    }
  }, grain_for_work(R * Kg, int64_t(1) << 16));
  return qw;
}

}  // namespace nanovllm::cpu
