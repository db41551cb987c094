#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/simd.h"
#include "kernels/kv_cache_int8.h"

namespace nanovllm::cpu {

namespace {

// A K or V row as f32 (the per-key fallback loop reads f32 rows).
const float* get_row(const float* row, int, float*) { return row; }
const float* get_row(const uint16_t* row, int n, float* buf) {
  for (int i = 0; i < n; ++i) buf[i] = bf16_to_f32(row[i]);
  return buf;
}
const float* get_row(const int8_t* row, int n, float* buf) {
  dequantize_kv_row(row, n, buf);
  return buf;
}

// One work item = (sequence, kv head, tile of up to 16 query rows). The queries of all q heads
// sharing the kv head are processed together so each K/V row is read once per tile (GQA).
//
// Values that validate_batch would reject get the contract's defensive rules (kernels/README.md),
// the same as on CUDA: a sequence's query rows are [cu[b], cu[b+1]) clipped to [0, T); a key whose
// block is missing (entry < 0 or >= num_blocks, or past the table's width) is masked; a query that
// sees no key (context_lens[b] < seqlen_q) gets zeros. Such sequences take the per-key loop.
//
// Sliding window W (p.sliding_window > 0): query at key position pos sees keys (pos - W, pos].
// The AVX2 kernel and the per-key loop start at the tile's first visible key, so a windowed
// layer reads at most W + tile keys per query tile whatever the context. (The AVX-512 kernels
// have no lower key bound yet: sequences whose window excludes a key take the per-key loop.)
//
// Which kernel computes a row depends only on the ISA and the row's own sequence (AVX2: the one
// kernel for every row of a valid batch), never on the rest of the batch: docs/determinism.md.
template <class KV>
void paged_attention_t(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                       const BatchTensors& batch, const AttentionParams& p, Tensor& out,
                       ThreadPool& pool) {
  const int D = p.head_dim, Hq = p.num_q_heads, Hkv = p.num_kv_heads, G = Hq / Hkv;
  const int64_t row = int64_t(Hq + 2 * Hkv) * D;
  const int kvrow = int(k_cache.size(2));  // D, or D + 4 (int8 rows carry their scale)
  const int64_t kvw = int64_t(Hkv) * kvrow;
  const int B = batch.num_seqs, bs = batch.block_size;
  const int64_t T = qkv.size(0), num_blocks = k_cache.size(0) / bs;
  const int32_t* cu = batch.cu_seqlens_q.data<int32_t>();
  const int32_t* ctx = batch.context_lens.data<int32_t>();
  const int32_t* bt = batch.block_tables.data<int32_t>();
  const int64_t bt_stride = B ? batch.block_tables.size(1) : 0;
  const float* q = qkv.data<float>();
  const KV* kc = k_cache.data<KV>();
  const KV* vc = v_cache.data<KV>();
  float* o = out.data<float>();
  const int W = p.sliding_window;
  constexpr int kTile = 16;
  constexpr int kMinTileRows = 8;

  // Slot of key j through a sequence's table, or -1 when its block is missing.
  auto key_slot = [&](const int32_t* table, int64_t j) -> int64_t {
    const int64_t bi = j / bs;
    if (bi >= bt_stride) return -1;
    const int64_t blk = table[bi];
    return blk >= 0 && blk < num_blocks ? blk * bs + j % bs : -1;
  };

  struct Item {
    int b, h, q0, q1;
    bool fast;      // every query sees a key and every key's block is present: vector kernels
    bool windowed;  // some query's window excludes a key (the AVX-512 kernels cannot)
    int nh;         // KV heads h .. h + nh - 1 (decode items; prefill tiles take one)
  };
  // Decode items (fewer than kMinTileRows rows per head) take nh adjacent KV heads, so the rows
  // kernel reads each key's slot row as one run (attention_rows_avx512.cc says why), as long as there
  // are still >= 4 items per thread (batch-1 decode: one head per item).
  const int per_seq_groups = std::max(1, (4 * pool.size() + std::max(B, 1) - 1) / std::max(B, 1));
  const int decode_nh = std::max(1, Hkv / per_seq_groups);
  std::vector<Item> items;
  for (int b = 0; b < B; ++b) {
    const int64_t start = cu[b], nq = int64_t(cu[b + 1]) - start;
    const int64_t qlo = std::max<int64_t>(0, -start), qhi = std::min<int64_t>(nq, T - start);
    if (qlo >= qhi) continue;
    const int64_t first_pos = int64_t(ctx[b]) - nq;  // key position of query 0
    const int64_t last_key = first_pos + qhi - 1;
    const int32_t* table = bt + int64_t(b) * bt_stride;
    bool fast = first_pos + qlo >= 0;
    for (int64_t j = 0; fast && j <= last_key; j += bs) fast = key_slot(table, j) >= 0;
    const bool windowed = W > 0 && last_key >= W;
    // Heads outer, query tiles inner: a parallel chunk then holds whole causal triangles
    // (tiles in query order would give one thread the cheap early tiles of every head).
    const int nh = (qhi - qlo) * G < kMinTileRows ? decode_nh : 1;
    for (int h = 0; h < Hkv; h += nh)
      for (int64_t q0 = qlo; q0 < qhi; q0 += kTile)
        items.push_back({b, h, int(q0), int(std::min(qhi, q0 + kTile)), fast, windowed,
                         std::min(nh, Hkv - h)});
  }

  // Chunks of at least ~64K multiply-adds (score + value FMAs), so short contexts of tiny models
  // run on the caller (thread_pool.h: grain_for_work).
  //
  // parallel_for splits its range evenly by count, but items differ by their keys (a decode
  // batch mixes 100- and 2,000-key sequences), so the range is of parts: runs of whole items of
  // about equal work, several per thread, so the threads finish together (with an even split
  // by count, the pool's barrier held 9% of bench.py's 32-sequence profile; docs/perf.md).
  std::vector<int64_t> cum(items.size() + 1, 0);  // work of items [0, i)
  for (size_t i = 0; i < items.size(); ++i) {
    const Item& w = items[i];
    cum[i + 1] = cum[i] + int64_t(w.q1 - w.q0) * G * w.nh *
                              std::max<int64_t>(1, int64_t(ctx[w.b]) - (int64_t(cu[w.b + 1]) - cu[w.b]) + w.q1) * D;
  }
  const int64_t total_work = cum.back();
  const int64_t nparts = std::min<int64_t>(int64_t(items.size()), 8 * int64_t(pool.size()));
  std::vector<int64_t> part_begin(size_t(nparts) + 1, int64_t(items.size()));
  for (int64_t p = 0, i = 0; p < nparts; ++p) {  // part p: the items whose work starts at >= p/nparts
    while (i < int64_t(items.size()) && cum[size_t(i)] * nparts < p * total_work) ++i;
    part_begin[size_t(p)] = i;
  }
  const int64_t per_part = nparts ? total_work / nparts : 1;
  pool.parallel_for(nparts, [&](int64_t pa, int64_t pe) {
    // Per query row r (tile rows x G heads): running max m, sum l, accumulator acc[D].
    std::vector<float> acc(size_t(kTile * G * D)), m(size_t(kTile * G)), l(size_t(kTile * G));
    std::vector<float> kbuf(static_cast<size_t>(D)), vbuf(static_cast<size_t>(D));
    for (int64_t it = part_begin[size_t(pa)]; it < part_begin[size_t(pe)]; ++it) {
      const Item& w = items[size_t(it)];
      const int64_t nq_total = int64_t(cu[w.b + 1]) - cu[w.b];
      const int64_t first_pos = int64_t(ctx[w.b]) - nq_total;
      const int rows = (w.q1 - w.q0) * G;
      const int32_t* table = bt + int64_t(w.b) * bt_stride;
      // AVX-512 and AVX2: each its two-pass kernel for every item (one kernel per ISA: a row's
      // bits do not depend on its batch). Scalar, D % 16 (AVX2: 8) != 0, AVX-512 windows or
      // defensive cases: the per-key loop below.
      if (w.fast) {
        AttentionTile<KV> t{q, row, kc, vc, kvw, table, bs, o, int64_t(Hq) * D, D, G, w.h,
                            int64_t(cu[w.b]), int(first_pos), w.q0, w.q1, p.scale, w.nh, kvrow, W};
        // The thread's next item, when it takes the same kernel: its first K rows are prefetched
        // during this one's last pass (the previous item did the same for this one).
        if (it + 1 < part_begin[size_t(pe)] && items[size_t(it) + 1].fast && !items[size_t(it) + 1].windowed) {
          const Item& n = items[size_t(it) + 1];
          const int64_t n_first = int64_t(ctx[n.b]) - (int64_t(cu[n.b + 1]) - cu[n.b]);
          t.next_table = bt + int64_t(n.b) * bt_stride;
          t.next_keys = int(n_first + n.q1);
          t.next_h = n.h;
          t.next_nh = n.nh;
        }
        // (Only a fast, non-windowed item is given as the next one above.)
        t.k_prefetched = it > part_begin[size_t(pa)] && items[size_t(it) - 1].fast &&
                         !items[size_t(it) - 1].windowed && !w.windowed;
        if (attention_rows_avx2(t)) continue;
        t.window = 0;
        if (!w.windowed && attention_rows_avx512(t)) continue;
      }
      for (int h = w.h; h < w.h + w.nh; ++h) {
        std::fill(acc.begin(), acc.begin() + rows * D, 0.f);
        std::fill(m.begin(), m.begin() + rows, -std::numeric_limits<float>::infinity());
        std::fill(l.begin(), l.begin() + rows, 0.f);
        // The tile's last query sees keys [0, last_key]; none exist past the table's width.
        const int64_t last_key = std::min(first_pos + w.q1 - 1, bt_stride * bs - 1);
        // The tile's first query sees keys from first_pos + q0 - W + 1 on (window), else 0.
        const int64_t first_key = W > 0 ? std::max<int64_t>(0, first_pos + w.q0 - W + 1) : 0;
        for (int64_t j = first_key; j <= last_key; ++j) {
          const int64_t slot = key_slot(table, j);
          if (slot < 0) continue;  // missing block: masked
          const float* kr = get_row(kc + slot * kvw + int64_t(h) * kvrow, D, kbuf.data());
          const float* vr = get_row(vc + slot * kvw + int64_t(h) * kvrow, D, vbuf.data());
          for (int qi = w.q0; qi < w.q1; ++qi) {
            if (j > first_pos + qi) continue;                 // causal
            if (W > 0 && j <= first_pos + qi - W) continue;  // outside the window
            const int64_t tok = cu[w.b] + qi;
            for (int g = 0; g < G; ++g) {
              const int r = (qi - w.q0) * G + g;
              const float* qr = q + tok * row + int64_t(h * G + g) * D;
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
            const float inv = l[size_t(r)] > 0.f ? 1.f / l[size_t(r)] : 0.f;  // no key: zeros
            float* dst = o + tok * int64_t(Hq) * D + int64_t(h * G + g) * D;
            const float* ar = acc.data() + int64_t(r) * D;
            for (int d = 0; d < D; ++d) dst[d] = ar[d] * inv;
          }
        }
      }
    }
  }, grain_for_work(per_part, int64_t(1) << 16));
}

}  // namespace

void paged_attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                     const BatchTensors& batch, const AttentionParams& p, Tensor& out,
                     ThreadPool& pool) {
  if (k_cache.dtype() == DType::BF16)
    paged_attention_t<uint16_t>(qkv, k_cache, v_cache, batch, p, out, pool);
  else if (k_cache.dtype() == kKvCacheInt8)
    paged_attention_t<int8_t>(qkv, k_cache, v_cache, batch, p, out, pool);
  else
    paged_attention_t<float>(qkv, k_cache, v_cache, batch, p, out, pool);
}

}  // namespace nanovllm::cpu
