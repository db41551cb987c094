#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/simd.h"

namespace nanovllm::cpu {

namespace {

// A K or V row into the cache: f32 as is, bf16 rounded to nearest even.
void put_row(const float* src, float* dst, int64_t n) { std::memcpy(dst, src, size_t(n) * 4); }
void put_row(const float* src, uint16_t* dst, int64_t n) { f32_to_bf16_row(src, dst, n); }

// A K or V row as f32 (the per-key fallback loop reads f32 rows).
const float* get_row(const float* row, int64_t, float*) { return row; }
const float* get_row(const uint16_t* row, int64_t n, float* buf) {
  for (int64_t i = 0; i < n; ++i) buf[i] = bf16_to_f32(row[i]);
  return buf;
}

template <class KV>
void store_kv_t(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache,
                const AttentionParams& p) {
  const int D = p.head_dim, Hq = p.num_q_heads, Hkv = p.num_kv_heads;
  const int64_t row = int64_t(Hq + 2 * Hkv) * D, T = slot_mapping.numel();
  const int64_t kvw = int64_t(Hkv) * D, num_slots = k_cache.size(0);
  const float* src = qkv.data<float>();
  const int32_t* slots = slot_mapping.data<int32_t>();
  KV* kc = k_cache.data<KV>();
  KV* vc = v_cache.data<KV>();
  for (int64_t t = 0; t < T; ++t) {
    int64_t s = slots[t];
    if (s < 0) continue;
    NV_CHECK_LT(s, num_slots, "slot out of the KV cache");
    put_row(src + t * row + int64_t(Hq) * D, kc + s * kvw, kvw);
    put_row(src + t * row + int64_t(Hq + Hkv) * D, vc + s * kvw, kvw);
  }
}

}  // namespace

void store_kv(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache,
              const AttentionParams& p) {
  NV_CHECK(k_cache.dtype() == v_cache.dtype() &&
               (k_cache.dtype() == DType::F32 || k_cache.dtype() == DType::BF16),
           "cpu KV cache must be F32 or BF16, got ", k_cache.str(), " / ", v_cache.str());
  if (k_cache.dtype() == DType::BF16) store_kv_t<uint16_t>(qkv, slot_mapping, k_cache, v_cache, p);
  else store_kv_t<float>(qkv, slot_mapping, k_cache, v_cache, p);
}

namespace {

// One work item = (sequence, kv head, tile of up to 16 query rows). The queries of all q heads
// sharing the kv head are processed together so each K/V row is read once per tile (GQA).
template <class KV>
void paged_attention_t(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                       const BatchTensors& batch, const AttentionParams& p, Tensor& out,
                       ThreadPool& pool) {
  const int D = p.head_dim, Hq = p.num_q_heads, Hkv = p.num_kv_heads, G = Hq / Hkv;
  const int64_t row = int64_t(Hq + 2 * Hkv) * D, kvw = int64_t(Hkv) * D;
  const int B = batch.num_seqs, bs = batch.block_size;
  const int32_t* cu = batch.cu_seqlens_q.data<int32_t>();
  const int32_t* ctx = batch.context_lens.data<int32_t>();
  const int32_t* bt = batch.block_tables.data<int32_t>();
  const int64_t bt_stride = batch.block_tables.ndim() == 2 ? batch.block_tables.size(1) : 0;
  const float* q = qkv.data<float>();
  const KV* kc = k_cache.data<KV>();
  const KV* vc = v_cache.data<KV>();
  float* o = out.data<float>();
  constexpr int kTile = 16;
  constexpr int kMinTileRows = 8;

  struct Item { int b, h, q0, q1; };
  std::vector<Item> items;
  for (int b = 0; b < B; ++b) {
    int nq = cu[b + 1] - cu[b];
    NV_CHECK(nq >= 0 && nq <= ctx[b], "sequence ", b, ": ", nq, " queries but context ", ctx[b]);
    NV_CHECK_LE(int64_t(ctx[b] + bs - 1) / bs, bt_stride, "block table too narrow");
    for (int h = 0; h < Hkv; ++h)
      for (int q0 = 0; q0 < nq; q0 += kTile) items.push_back({b, h, q0, std::min(nq, q0 + kTile)});
  }

  // Chunks of at least ~64K multiply-adds (score + value FMAs), so short contexts of tiny models
  // run on the caller (thread_pool.h: grain_for_work).
  int64_t total_work = 0;
  for (const Item& w : items)
    total_work += int64_t(w.q1 - w.q0) * G * (ctx[w.b] - (cu[w.b + 1] - cu[w.b]) + w.q1) * D;
  const int64_t per_item = items.empty() ? 1 : total_work / int64_t(items.size());
  pool.parallel_for(int64_t(items.size()), [&](int64_t a, int64_t e) {
    // Per query row r (tile rows x G heads): running max m, sum l, accumulator acc[D].
    std::vector<float> acc(size_t(kTile * G * D)), m(size_t(kTile * G)), l(size_t(kTile * G));
    std::vector<float> kbuf(static_cast<size_t>(D)), vbuf(static_cast<size_t>(D));
    for (int64_t it = a; it < e; ++it) {
      const Item& w = items[size_t(it)];
      const int nq_total = cu[w.b + 1] - cu[w.b];
      const int first_pos = ctx[w.b] - nq_total;  // key position of query 0
      const int rows = (w.q1 - w.q0) * G;
      // AVX-512: many query rows (prefill) take the lane-parallel tile kernel, few rows (decode)
      // the two-pass kernel. Other ISAs, or D % 16 != 0: the per-key loop below.
      {
        AttentionTile<KV> t{q, row, kc, vc, kvw, bt + int64_t(w.b) * bt_stride, bs, o,
                        int64_t(Hq) * D, D, G, w.h, int64_t(cu[w.b]), first_pos, w.q0, w.q1,
                        p.scale};
        if (rows >= kMinTileRows ? attention_tile_avx512(t) : attention_rows_avx512(t)) continue;
      }
      std::fill(acc.begin(), acc.begin() + rows * D, 0.f);
      std::fill(m.begin(), m.begin() + rows, -std::numeric_limits<float>::infinity());
      std::fill(l.begin(), l.begin() + rows, 0.f);
      const int last_key = first_pos + w.q1 - 1;  // the tile's last query sees keys [0, last_key]
      const int32_t* table = bt + int64_t(w.b) * bt_stride;
      for (int j = 0; j <= last_key; ++j) {
        const int64_t slot = int64_t(table[j / bs]) * bs + j % bs;
        const float* kr = get_row(kc + slot * kvw + int64_t(w.h) * D, D, kbuf.data());
        const float* vr = get_row(vc + slot * kvw + int64_t(w.h) * D, D, vbuf.data());
        for (int qi = w.q0; qi < w.q1; ++qi) {
          if (j > first_pos + qi) continue;  // causal
          const int64_t tok = cu[w.b] + qi;
          for (int g = 0; g < G; ++g) {
            const int r = (qi - w.q0) * G + g;
            const float* qr = q + tok * row + int64_t(w.h * G + g) * D;
            float s = dot_f32(qr, kr, D) * p.scale;
            float* ar = acc.data() + int64_t(r) * D;
            if (s > m[size_t(r)]) {
              float c = std::exp(m[size_t(r)] - s);
              l[size_t(r)] *= c;
              scale_f32(c, ar, D);
              m[size_t(r)] = s;
            }
            float pexp = std::exp(s - m[size_t(r)]);
            l[size_t(r)] += pexp;
            axpy_f32(pexp, vr, ar, D);
          }
        }
      }
      for (int qi = w.q0; qi < w.q1; ++qi) {
        const int64_t tok = cu[w.b] + qi;
        for (int g = 0; g < G; ++g) {
          const int r = (qi - w.q0) * G + g;
          float inv = 1.f / l[size_t(r)];
          float* dst = o + tok * int64_t(Hq) * D + int64_t(w.h * G + g) * D;
          const float* ar = acc.data() + int64_t(r) * D;
          for (int d = 0; d < D; ++d) dst[d] = ar[d] * inv;
        }
      }
    }
  }, grain_for_work(per_item, int64_t(1) << 16));
}

}  // namespace

void paged_attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                     const BatchTensors& batch, const AttentionParams& p, Tensor& out,
                     ThreadPool& pool) {
  NV_CHECK(k_cache.dtype() == v_cache.dtype() &&
               (k_cache.dtype() == DType::F32 || k_cache.dtype() == DType::BF16),
           "cpu KV cache must be F32 or BF16, got ", k_cache.str(), " / ", v_cache.str());
  if (k_cache.dtype() == DType::BF16)
    paged_attention_t<uint16_t>(qkv, k_cache, v_cache, batch, p, out, pool);
  else
    paged_attention_t<float>(qkv, k_cache, v_cache, batch, p, out, pool);
}

}  // namespace nanovllm::cpu
