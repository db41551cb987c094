// AVX-512 paged attention: one two-pass kernel for every work item (decode rows, prefill tiles,
// chunked-prefill and verification rows; f32 / bf16 / int8 caches; windows take the per-key
// loop in attention.cc).
//
// One kernel for every row keeps a row's bits independent of its batch (docs/determinism.md).
// Until 2026-11-29 prefill items (>= 8 query rows) ran a lane-parallel tile kernel (16 query rows
// in the lanes of a zmm, an online softmax per 16 keys) and decode items this kernel, so a
// position computed by a prefill in one run and by a decode or a short chunk in another differed
// in the last bits. With scores in blocks of 4 keys x 2 rows (below) this kernel prefills about
// as fast as the tile kernel did (docs/perf.md).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/cpu/attention_tile.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/simd.h"
#include "kernels/kv_cache_int8.h"
#include "util/dtype.h"

namespace nanovllm::cpu {

namespace {

// 16 K/V elements as f32 (f32 cache: as is; bf16: the top half of f32; int8: the integers, the
// caller applies the row's scale).
NV_TARGET_AVX512 inline __m512 load16_kv(const float* p) { return _mm512_loadu_ps(p); }
NV_TARGET_AVX512 inline __m512 load16_kv(const uint16_t* p) { return load16_bf16(p); }
NV_TARGET_AVX512 inline __m512 load16_kv(const int8_t* p) {
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b));
}
// The scale of a K/V row (f32, bf16: 1; int8: the 4 bytes after its D values).
template <class KV>
inline float row_scale(const KV* row, int D) {
  if constexpr (std::is_same_v<KV, int8_t>) return kv_int8_scale(row, D);
  else return 1.f;
}

// Each item (one sequence; decode: one query, G heads each, for nh adjacent KV heads): two passes
// over the keys, no transpose. Pass 1 reads each key's slot row -- the nh heads' K rows side by
// side, and the next key's slot follows in the same block -- once, and dots it with every row's
// query (scores in log2 units); the softmax then runs vectorized along the keys; pass 2
// accumulates p * V per head and pair of rows, in registers.
//
// Why nh heads per item: one head's K rows sit kv_stride (Hkv * D) apart, so an item per head
// read 256-512 B out of every 2-4 KiB: the hardware prefetcher does not follow that and the loads
// stalled (B = 64 decode: a third of the step in this kernel, mostly on the first K load). An
// item over all heads reads the cache as one sequential stream per pass.
//
// Why chunks of keys: pass 1 prefetches V into L2 for pass 2, but a long context's V (2 KiB a
// key for 8 bf16 heads of 128: 2 MiB at 1024 keys) no longer fits there, so pass 2 read it from
// memory a second time. Keys now go in chunks of at most ~256 KiB of V: both passes per chunk,
// the running max / sum / accumulator carried from chunk to chunk (flash-decoding's rescale); a
// context within one chunk runs as before, with no accumulator traffic. The chunk length is a
// function of the cache's slot row (all Hkv heads), not of the item's nh heads: nh depends on
// the batch size and the thread count, and chunk boundaries change a row's rounding.
constexpr int kChunkVBytes = 256 * 1024;

// Pass 2 of the rows kernel for one or two rows and NV x 16 dims: acc_i = a_i * in_i (no in_i:
// 0) + sum_{j in [c0, c1)} s_i[j - c0] * V_j[off ..], then out_i = acc_i * mul_i. NV is a
// compile-time count so the 2 x NV accumulators stay in registers (with a run-time count GCC
// kept them on the stack: a load and a store around every FMA; docs/perf.md, session 25).
// int8: each p is multiplied by its key's V scale (read at vscale_off + the key's offset).
//
// The head's V row of key j + kPvAhead (row_bytes from vscale_off) is prefetched into L1: one
// head's rows sit a slot (Hkv rows) apart, which the L1 prefetchers do not follow, and without
// it every key waited on its row from L2 (the int8 scale load first): the kernel took 1.2-1.8x
// as long at B = 32, L = 512-2048 (bench_decode_attention, docs/perf.md). int8 rows go 12 keys
// ahead, not 6: an int8 key's pass-2 work is short enough that 6 keys did not cover the latency
// under the K stream (perf: a fifth of the kernel's samples on the V scale's load and on the
// prefetches); int8 decode per layer 5-19% faster on Emerald Rapids, where bf16 rows ran 0-5%
// slower with 12 (docs/perf.md, 2026-12-01).
template <class KV>
constexpr int kPvAhead = std::is_same_v<KV, int8_t> ? 12 : 6;

template <int NV, class KV>
NV_TARGET_AVX512 void pv_rows(const KV* v_cache, const int64_t* kv_off, int64_t off,
                              int64_t vscale_off, int row_bytes, int D, int c0, int c1,
                              const float* s0, const float* s1, const float* in0, const float* in1,
                              float a0, float a1, float* out0, float* out1, float mul0, float mul1,
                              KStream<KV>& ks) {
  __m512 acc0[NV], acc1[NV];
  const __m512 va0 = _mm512_set1_ps(a0), va1 = _mm512_set1_ps(a1);
#pragma GCC unroll 8
  for (int c = 0; c < NV; ++c) {
    acc0[c] = in0 ? _mm512_mul_ps(va0, _mm512_loadu_ps(in0 + c * 16)) : _mm512_setzero_ps();
    acc1[c] = in1 ? _mm512_mul_ps(va1, _mm512_loadu_ps(in1 + c * 16)) : _mm512_setzero_ps();
  }
  for (int j = c0; j < c1; ++j) {
    if (j + kPvAhead<KV> < c1) {
      const char* pf = reinterpret_cast<const char*>(v_cache + kv_off[j + kPvAhead<KV>] + vscale_off);
      for (int b = 0; b < row_bytes; b += 64) _mm_prefetch(pf + b, _MM_HINT_T0);
      _mm_prefetch(pf + row_bytes - 1, _MM_HINT_T0);  // the row's last line when not 64-aligned
    }
    ks.step();
    const KV* v = v_cache + kv_off[j] + off;
    const float vs = row_scale(v_cache + kv_off[j] + vscale_off, D);
    const __m512 p0 = _mm512_set1_ps(s0[j - c0] * vs);
    const __m512 p1 = _mm512_set1_ps(s1 ? s1[j - c0] * vs : 0.f);
#pragma GCC unroll 8
    for (int c = 0; c < NV; ++c) {
      const __m512 vv = load16_kv(v + c * 16);
      acc0[c] = _mm512_fmadd_ps(p0, vv, acc0[c]);
      acc1[c] = _mm512_fmadd_ps(p1, vv, acc1[c]);
    }
  }
  const __m512 m0 = _mm512_set1_ps(mul0), m1 = _mm512_set1_ps(mul1);
#pragma GCC unroll 8
  for (int c = 0; c < NV; ++c) {
    _mm512_storeu_ps(out0 + c * 16, _mm512_mul_ps(acc0[c], m0));
    if (out1) _mm512_storeu_ps(out1 + c * 16, _mm512_mul_ps(acc1[c], m1));
  }
}

// The lane sums of 8 vectors of 16: out lane i = sum of v[i]'s 16 lanes, each by the same tree
// (the 512-bit halves added, then the AVX2 8 x 8 tree ((x0 + x1) + (x2 + x3)) + ...).
NV_TARGET_AVX512 inline __m256 hsum_8x16(const __m512* v) {
  __m256 h[8];
  for (int u = 0; u < 8; ++u)
    h[u] = _mm256_add_ps(_mm512_castps512_ps256(v[u]),
                         _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v[u]), 1)));
  const __m256 t0 = _mm256_hadd_ps(h[0], h[1]), t1 = _mm256_hadd_ps(h[2], h[3]);
  const __m256 t2 = _mm256_hadd_ps(h[4], h[5]), t3 = _mm256_hadd_ps(h[6], h[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Pass 1 for two rows (q1 may repeat q0) and kKeyBlock keys: out[i * kKeyBlock + u] = q_i . k_u
// (without the key's int8 scale). Eight accumulators, one per (row, key): 4 K rows in flight,
// each loaded once for both rows, and one reduction tree for all eight sums (a horizontal sum
// per score cost more than its 8 FMAs at D = 128). A score's bits depend only on its q and k.
constexpr int kKeyBlock = 4;
template <class KV>
NV_TARGET_AVX512 inline void score_block(const float* q0, const float* q1, const KV* const* k, int D,
                                         float* out) {
  __m512 a[8];
  for (int u = 0; u < 8; ++u) a[u] = _mm512_setzero_ps();
  for (int d = 0; d < D; d += 16) {
    const __m512 x0 = _mm512_loadu_ps(q0 + d), x1 = _mm512_loadu_ps(q1 + d);
#pragma GCC unroll 4
    for (int u = 0; u < kKeyBlock; ++u) {
      const __m512 kv = load16_kv(k[u] + d);
      a[u] = _mm512_fmadd_ps(x0, kv, a[u]);
      a[kKeyBlock + u] = _mm512_fmadd_ps(x1, kv, a[kKeyBlock + u]);
    }
  }
  _mm256_storeu_ps(out, hsum_8x16(a));
}

template <class KV>
NV_TARGET_AVX512 void rows_avx512(const AttentionTile<KV>& t) {
  const int D = t.D, G = t.G, nh = t.nh;
  const int R = (t.q1 - t.q0) * G;  // rows per head
  const int rows = R * nh;
  const float qscale = t.scale * 1.4426950408889634f;
  const int max_pos = t.first_pos + t.q1 - 1;
  const int nkeys = max_pos + 1;
  const int row_bytes = t.row * int(sizeof(KV));  // one head's K (or V) row, int8 scale included
  const int span = nh * row_bytes;  // bytes of one key's K (or V) rows in the item
  const int slot_bytes = int(t.kv_stride * int64_t(sizeof(KV)));  // one key's rows, all heads
  const int kc = std::max(64, kChunkVBytes / slot_bytes / 16 * 16);  // keys per chunk
  const int stride = (std::min(nkeys, kc) + 15) / 16 * 16;   // score row stride (vector tail)
  const bool one_chunk = nkeys <= kc;
  thread_local std::vector<float> sbuf, qbuf, accbuf;
  sbuf.resize(size_t(rows) * stride);
  qbuf.resize(size_t(rows) * D);
  if (!one_chunk) accbuf.resize(size_t(rows) * D);
  std::vector<int> limit(static_cast<size_t>(rows));  // keys [0, limit) visible to row r
  // Running max (log2 units), sum, and this chunk's rescale of the earlier chunks, per row.
  std::vector<float> mrun(size_t(rows), -std::numeric_limits<float>::infinity());
  std::vector<float> lrun(size_t(rows), 0.f), alpha(size_t(rows), 0.f);
  // Row r = head (r / R) of the item, query / q head as in attention_tile.h within it.
  auto row_query = [&](int r) { return t.q0 + (r % R) / G; };
  auto row_qhead = [&](int r) { return (t.h + r / R) * G + (r % R) % G; };
  for (int r = 0; r < rows; ++r) {
    const float* src = t.q + (t.tok0 + row_query(r)) * t.q_stride + int64_t(row_qhead(r)) * D;
    for (int d = 0; d < D; ++d) qbuf[size_t(r) * D + d] = src[d] * qscale;
    limit[size_t(r)] = t.first_pos + row_query(r) + 1;
  }
  thread_local std::vector<int64_t> kv_off;  // offset of key j's row of head t.h in K and V
  kv_off.resize(size_t(nkeys));
  for (int j = 0; j < nkeys; ++j) {
    const int64_t slot = int64_t(t.block_table[j / t.block_size]) * t.block_size + j % t.block_size;
    kv_off[size_t(j)] = slot * t.kv_stride + int64_t(t.h) * t.row;
  }
  // Software prefetch: the item's V rows kVAhead keys ahead into L2 during pass 1 (pass 2 reads
  // them from there once per head), its K rows kAhead keys ahead into L1; and K into L2 during
  // the pass 2 before (KStream: the next chunk's K, or the next item's first chunk), so that
  // each pass streams one of K and V from memory while it computes on the other. Only what no
  // pass 2 brought -- the first chunk of an item whose predecessor (same thread) did not -- is
  // prefetched kKFar keys ahead in pass 1. Until 2026-11-29 pass 1 fetched both K and V of its
  // chunk (twice the bytes per second a core sustains with this much compute, ~10 GB/s here)
  // and pass 2 none: B = 64 decode at L = 1024-2048 took 1.2-1.4x as long per layer
  // (bench_decode_attention, docs/perf.md). Before that K went into L1 8 keys ahead only: ~140
  // lines in flight, more than a core's L1 fill buffers.
  constexpr int kAhead = 2, kKFar = 24, kVAhead = 8;
  auto prefetch = [&](const KV* cache, int j, int hint) {
    if (j >= nkeys) return;
    const char* p = reinterpret_cast<const char*>(cache + kv_off[size_t(j)]);
    if (hint == 0) for (int b = 0; b < span; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
    else if (hint == 1) for (int b = 0; b < span; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
    else for (int b = 0; b < span; b += 64) _mm_prefetch(p + b, _MM_HINT_T2);
  };
  // The next item's first chunk of keys (their K is prefetched during this item's last pass 2).
  thread_local std::vector<int64_t> next_off;
  int next_n = 0;
  if (t.next_table) {
    next_n = std::min(kc, t.next_keys);
    next_off.resize(size_t(next_n));
    for (int j = 0; j < next_n; ++j) {
      const int64_t slot = int64_t(t.next_table[j / t.block_size]) * t.block_size + j % t.block_size;
      next_off[size_t(j)] = slot * t.kv_stride + int64_t(t.next_h) * t.row;
    }
  }
  const bool k_in_l2 = t.k_prefetched;  // chunk 0's K came with the previous item
  for (int j = 0; j < kKFar; ++j)
    if (j < kAhead || !k_in_l2) prefetch(t.k_cache, j, j < kAhead ? 0 : 2);
  for (int j = 0; j < kVAhead; ++j) prefetch(t.v_cache, j, 1);
  for (int c0 = 0; c0 < nkeys; c0 += kc) {
    const int c1 = std::min(nkeys, c0 + kc);
    const bool first = c0 == 0, last = c1 == nkeys;
    // K into L2 from far ahead only where no pass 2 brought it: the first chunk, unless the
    // previous item did.
    const bool kfar = first && !k_in_l2;
    // Pass 1: scores of keys [c0, c1) into sbuf[r][j - c0], kKeyBlock keys x 2 rows of one head
    // at a time (a head's odd last row is paired with itself; the block's missing keys repeat
    // its last key and are dropped).
    for (int j = c0; j < c1; j += kKeyBlock) {
      const int nk = std::min(kKeyBlock, c1 - j);
      for (int u = 0; u < kKeyBlock; ++u) {
        if (kfar) prefetch(t.k_cache, j + u + kKFar, 2);
        prefetch(t.k_cache, j + u + kAhead, 0);
        prefetch(t.v_cache, j + u + kVAhead, 1);
      }
      for (int hh = 0; hh < nh; ++hh) {
        const KV* k[kKeyBlock];
        float ks[kKeyBlock];
        for (int u = 0; u < kKeyBlock; ++u) {
          k[u] = t.k_cache + kv_off[size_t(j + std::min(u, nk - 1))] + int64_t(hh) * t.row;
          ks[u] = row_scale(k[u], D);
        }
        for (int rb = hh * R; rb < (hh + 1) * R; rb += 2) {
          const int r1 = std::min(rb + 1, (hh + 1) * R - 1);
          alignas(32) float sc[2 * kKeyBlock];
          score_block(qbuf.data() + size_t(rb) * D, qbuf.data() + size_t(r1) * D, k, D, sc);
          for (int u = 0; u < nk; ++u) {
            sbuf[size_t(rb) * stride + (j + u - c0)] = sc[u] * ks[u];
            sbuf[size_t(r1) * stride + (j + u - c0)] = sc[kKeyBlock + u] * ks[u];
          }
        }
      }
    }
    // Softmax along the chunk's keys, per row: p = 2^(s - m), m the running max, masked beyond
    // the row's limit; earlier chunks' sum (and, in pass 2, accumulator) scale by 2^(m_old - m).
    const int cstride = (c1 - c0 + 15) / 16 * 16;
    for (int r = 0; r < rows; ++r) {
      float* sr = sbuf.data() + size_t(r) * stride;
      const int n = std::clamp(limit[size_t(r)] - c0, 0, c1 - c0);
      __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
      for (int j = 0; j < n; j += 16) {
        const __mmask16 mk = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
        mx = _mm512_mask_max_ps(mx, mk, mx, _mm512_maskz_loadu_ps(mk, sr + j));
      }
      // n == 0 (a row that sees no key of this chunk): p = 0, and the row's state stays.
      const float mnew = n > 0 ? std::max(mrun[size_t(r)], _mm512_reduce_max_ps(mx)) : mrun[size_t(r)];
      const __m512 m = _mm512_set1_ps(mnew);
      __m512 sum = _mm512_setzero_ps();
      for (int j = 0; j < cstride; j += 16) {
        const int left = n - j;
        const __mmask16 mk = left >= 16 ? __mmask16(0xFFFF) : left > 0 ? __mmask16((1u << left) - 1) : 0;
        __m512 p = _mm512_maskz_mov_ps(mk, exp2_512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, sr + j), m)));
        sum = _mm512_add_ps(sum, p);
        _mm512_storeu_ps(sr + j, p);
      }
      // The first chunk has no earlier state (alpha unused); later ones rescale it.
      alpha[size_t(r)] = first ? 0.f : std::exp2(mrun[size_t(r)] - mnew);
      lrun[size_t(r)] = (first ? 0.f : lrun[size_t(r)] * alpha[size_t(r)]) + _mm512_reduce_add_ps(sum);
      mrun[size_t(r)] = mnew;
    }
    // Pass 2: acc[r] = alpha[r] * acc[r] + sum_j p[r][j] * v_j, per head and pair of its rows.
    // Keys inner, so each V row is read once per pair of rows and 128 dims (from L2: pass 1
    // prefetched it); accumulators stay in registers (2 x 8 zmm). The last chunk writes
    // out = acc / l; earlier ones keep acc in accbuf [rows][D].
    constexpr int kRows = 2, kDims = 128;
    KStream<KV> ks;
    if (!last) ks = {t.k_cache, kv_off.data() + c1, std::min(kc, nkeys - c1), span};
    else if (next_n > 0) ks = {t.k_cache, next_off.data(), next_n, t.next_nh * row_bytes};
    const int64_t pv_keys = int64_t(nh) * ((D + kDims - 1) / kDims) * ((R + kRows - 1) / kRows) * (c1 - c0);
    ks.rate = int((int64_t(ks.lines()) * 256 + pv_keys - 1) / pv_keys);
    for (int hh = 0; hh < nh; ++hh) {
      const int64_t hoff = int64_t(hh) * t.row;
      for (int d0 = 0; d0 < D; d0 += kDims) {
        const int nv = std::min(kDims, D - d0) / 16;
        for (int rb = hh * R; rb < (hh + 1) * R; rb += kRows) {
          const int nr = std::min(kRows, (hh + 1) * R - rb);
          const float* in[kRows] = {nullptr, nullptr};
          float a[kRows] = {0.f, 0.f}, mul[kRows] = {1.f, 1.f};
          float* dst[kRows] = {nullptr, nullptr};
          for (int i = 0; i < nr; ++i) {
            const int r = rb + i;
            if (!first) in[i] = accbuf.data() + size_t(r) * D + d0, a[i] = alpha[size_t(r)];
            if (last) {
              dst[i] = t.out + (t.tok0 + row_query(r)) * t.out_stride + int64_t(row_qhead(r)) * D + d0;
              mul[i] = 1.f / lrun[size_t(r)];
            } else {
              dst[i] = accbuf.data() + size_t(r) * D + d0;
            }
          }
          const float* s0 = sbuf.data() + size_t(rb) * stride;
          const float* s1 = nr > 1 ? s0 + stride : nullptr;
          const int64_t* off = kv_off.data();
          switch (nv) {
#define NV_PV(N)                                                                                  \
  case N:                                                                                         \
    pv_rows<N>(t.v_cache, off, hoff + d0, hoff, row_bytes, D, c0, c1, s0, s1, in[0], in[1], a[0], \
               a[1], dst[0], dst[1], mul[0], mul[1], ks);                                         \
    break;
            NV_PV(1) NV_PV(2) NV_PV(3) NV_PV(4) NV_PV(5) NV_PV(6) NV_PV(7) NV_PV(8)
#undef NV_PV
          }
        }
      }
    }
  }
}

}  // namespace

template <class KV>
bool attention_rows_avx512(const AttentionTile<KV>& t) {
  if (active_isa() != Isa::Avx512 || t.D % 16 != 0) return false;
  rows_avx512(t);
  return true;
}

template bool attention_rows_avx512(const AttentionTile<float>&);
template bool attention_rows_avx512(const AttentionTile<uint16_t>&);
template bool attention_rows_avx512(const AttentionTile<int8_t>&);

}  // namespace nanovllm::cpu
