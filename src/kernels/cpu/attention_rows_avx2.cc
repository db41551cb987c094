// AVX2 paged attention: one two-pass kernel for every work item (decode rows and prefill tiles),
// f32 / bf16 / int8 caches, sliding windows.
//
// Per item (one sequence, nh adjacent KV heads, a tile of queries; R = queries x G rows per head):
//   pass 1: scores s[r][j] = q_r . k_j (log2 units: q pre-scaled by scale * log2 e; int8: times
//           the row's K scale) for the chunk's keys, in blocks of 8 / NR keys x NR rows (8
//           accumulators: 4 keys in flight per row pair, each K row loaded once per pair);
//   softmax along the keys per row, vectorized (a polynomial exp2), with the running max / sum
//           carried across chunks (flash-decoding's rescale);
//   pass 2: acc_r += p[r][j] * v_j (int8: p times the row's V scale), 2 rows x 32 dims in
//           registers per sweep over the chunk's keys (1 row for a head's odd last row).
// Keys go in chunks of at most ~256 KiB of V (all Hkv heads: the chunk length must not depend on
// the item's heads) so pass 2 re-reads a bounded span.
//
// Memory-level parallelism (docs/perf.md, "decode attention at long context"): one slot's K
// rows of the item's nh heads are one contiguous run, and a key block reads 4 such runs at once;
// K is prefetched kPrefetchBytes ahead through the block table (the next block's rows before
// the walk reaches them; a block's slots are adjacent, blocks are not). One tensor streams from
// memory per pass: V towards L2 during pass 1, the next pass 1's K during pass 2 (KStream).
//
// Batch invariance (docs/determinism.md): a row's scores are each their own accumulator summed
// over d in one order and reduced by one fixed tree; its softmax sees keys at fixed vector lanes
// (key index mod 8 within chunks aligned to multiples of the chunk length from key 0); keys
// outside its range contribute exact zeros. So the bits of a row do not depend on which rows,
// heads or keys share its item -- the batch, chunking and thread count do not change them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels/cpu/attention_tile.h"
#include "kernels/cpu/simd.h"
#include "kernels/kv_cache_int8.h"

namespace nanovllm::cpu {

namespace {

constexpr int kChunkVBytes = 256 * 1024;
// Bytes of K requested into L1 ahead of the key being scored (at least 4 keys). On the AMD dev
// VM (Zen 1, FMA-bound: 256-bit FMAs issue at one per cycle) prefetching K neither helped nor
// hurt; on Zen 4 the V and K streams below pay (docs/perf.md).
constexpr int kPrefetchBytes = 4096;
// Keys ahead whose V bytes pass 2 requests while it sums the current one. A decode item's first
// sweep (32 dims of a head) otherwise waits on memory for every key: slots are 2 KiB or more
// apart and blocks are scattered, and on Zen 4 (AVX2) 56% of the kernel's samples sat on that
// load at B = 64 (docs/perf.md).
constexpr int kPrefetchVKeys = 8;
// Keys ahead whose whole V rows (the item's heads) pass 1 requests towards L2 (prefetcht2), so
// pass 2 finds its chunk near: on Zen 4 (AVX2, 2 threads, 8 layers' caches) decode attention at
// B = 64, L = 1024 went from 16-18 to 11 ms per layer with an int8 cache (pass 1 then also read
// each V row's scale, which had been a demand miss per key and head; the scales are now gathered
// after pass 1) and from 19-20 to 15.5-16.5 ms with bf16 (docs/perf.md). Prefetches into L1
// (prefetcht0) at 64 keys were no better than none.
constexpr int kPrefetchVPass1Keys = 32;
// Keys ahead whose K pass 1 requests towards L2 where no pass 2 streamed it (an item's first
// chunk, when the thread's previous item did not).
constexpr int kKFar = 24;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// 8 K/V elements as f32 (int8: the integers; the row's scale is applied by the caller).
NV_TARGET_AVX2 inline __m256 load8_kv(const float* p) { return _mm256_loadu_ps(p); }
NV_TARGET_AVX2 inline __m256 load8_kv(const uint16_t* p) { return load8_bf16(p); }
NV_TARGET_AVX2 inline __m256 load8_kv(const int8_t* p) {
  const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}
template <class KV>
inline float row_scale(const KV* row, int D) {
  if constexpr (std::is_same_v<KV, int8_t>)
    return kv_int8_scale(row, D);
  else
    return 1.f;
}

// 2^x for x <= 0 (x = n + f, f in [-0.5, 0.5], the AVX-512 kernel's degree-7 polynomial; below
// -126 flushes towards 0 -- callers mask lanes that must be exactly 0).
NV_TARGET_AVX2 inline __m256 exp2_256(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-126.f));
  const __m256 n = _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 f = _mm256_sub_ps(x, n);
  __m256 p = _mm256_set1_ps(1.5252733804e-5f);
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.5403530393e-4f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.3333558146e-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(9.6181291076e-3f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(5.5504108665e-2f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(2.4022650696e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(6.9314718056e-1f));
  p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.f));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// The lane sums of 8 vectors, lane i = sum of v[i], each by the same tree
// ((x0 + x1) + (x2 + x3)) + ((x4 + x5) + (x6 + x7)).
NV_TARGET_AVX2 inline __m256 hsum_8x8(const __m256* v) {
  const __m256 t0 = _mm256_hadd_ps(v[0], v[1]), t1 = _mm256_hadd_ps(v[2], v[3]);
  const __m256 t2 = _mm256_hadd_ps(v[4], v[5]), t3 = _mm256_hadd_ps(v[6], v[7]);
  const __m256 u0 = _mm256_hadd_ps(t0, t1), u1 = _mm256_hadd_ps(t2, t3);
  return _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20), _mm256_permute2f128_ps(u0, u1, 0x31));
}

// Lanes [lo, hi) of a vector of 8 (others 0).
NV_TARGET_AVX2 inline __m256 lane_mask(int lo, int hi) {
  const __m256i i = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i ge = _mm256_cmpgt_epi32(i, _mm256_set1_epi32(lo - 1));
  const __m256i lt = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi), i);
  return _mm256_castsi256_ps(_mm256_and_si256(ge, lt));
}

// Pass 1 for NR rows (1 or 2; q1 may repeat q0) and keys k[0 .. 8 / NR): out[i * KB + u] =
// q_i . k_u times the key's scale (KB = 8 / NR keys per row).
template <int NR, class KV>
NV_TARGET_AVX2 inline void score_block(const float* q0, const float* q1, const KV* const* k, int D,
                                       __m256 kscale, float* out) {
  constexpr int KB = 8 / NR;
  __m256 a[8];
  for (int u = 0; u < 8; ++u) a[u] = _mm256_setzero_ps();
  for (int d = 0; d < D; d += 8) {
    const __m256 x0 = _mm256_loadu_ps(q0 + d);
    const __m256 x1 = NR == 2 ? _mm256_loadu_ps(q1 + d) : x0;
#pragma GCC unroll 8
    for (int u = 0; u < KB; ++u) {
      const __m256 kv = load8_kv(k[u] + d);
      a[u] = _mm256_fmadd_ps(x0, kv, a[u]);
      if (NR == 2) a[KB + u] = _mm256_fmadd_ps(x1, kv, a[KB + u]);
    }
  }
  _mm256_storeu_ps(out, _mm256_mul_ps(hsum_8x8(a), kscale));
}

// Pass 2 for one or two rows and NV x 8 dims: acc_i = a_i * in_i (no in_i: 0) +
// sum_{j < n} p_i[j] * V_j[off ..] (V_j at v_cache + kv_off[j]), then out_i = acc_i * mul_i.
// p already holds the V scale (int8). NV is a compile-time count so the accumulators stay in
// registers. NR: 1 or 2 rows (one row skips the second accumulators: with G = 1, or an odd
// G's last row, half the FMAs were on a zero p).
template <int NV, int NR, class KV>
NV_TARGET_AVX2 void pv_rows(const KV* v_cache, const int64_t* kv_off, int64_t off, int n,
                            const float* p0, const float* p1, const float* in0, const float* in1,
                            float a0, float a1, float* out0, float* out1, float mul0, float mul1,
                            KStream<KV>& ks) {
  __m256 acc0[NV], acc1[NV];
  const __m256 va0 = _mm256_set1_ps(a0), va1 = _mm256_set1_ps(a1);
#pragma GCC unroll 4
  for (int c = 0; c < NV; ++c) {
    acc0[c] = in0 ? _mm256_mul_ps(va0, _mm256_loadu_ps(in0 + c * 8)) : _mm256_setzero_ps();
    if constexpr (NR == 2)
      acc1[c] = in1 ? _mm256_mul_ps(va1, _mm256_loadu_ps(in1 + c * 8)) : _mm256_setzero_ps();
  }
  for (int j = 0; j < n; ++j) {
    const KV* v = v_cache + kv_off[j] + off;
    if (j + kPrefetchVKeys < n) {  // this sweep's bytes of a later key (one or two lines)
      const char* pv = reinterpret_cast<const char*>(v_cache + kv_off[j + kPrefetchVKeys] + off);
      _mm_prefetch(pv, _MM_HINT_T0);
      _mm_prefetch(pv + NV * 8 * sizeof(KV) - 1, _MM_HINT_T0);
    }
    ks.step();
    const __m256 b0 = _mm256_set1_ps(p0[j]);
    const __m256 b1 = NR == 2 ? _mm256_set1_ps(p1[j]) : b0;
#pragma GCC unroll 4
    for (int c = 0; c < NV; ++c) {
      const __m256 vv = load8_kv(v + c * 8);
      acc0[c] = _mm256_fmadd_ps(b0, vv, acc0[c]);
      if constexpr (NR == 2) acc1[c] = _mm256_fmadd_ps(b1, vv, acc1[c]);
    }
  }
  const __m256 m0 = _mm256_set1_ps(mul0), m1 = _mm256_set1_ps(mul1);
#pragma GCC unroll 4
  for (int c = 0; c < NV; ++c) {
    _mm256_storeu_ps(out0 + c * 8, _mm256_mul_ps(acc0[c], m0));
    if constexpr (NR == 2) _mm256_storeu_ps(out1 + c * 8, _mm256_mul_ps(acc1[c], m1));
  }
}

// Per-thread buffers, reused from item to item.
struct Scratch {
  std::vector<float> s, q, acc, mrun, lrun, alpha, vscale;
  std::vector<int> lo, hi;
  std::vector<int64_t> kv_off;
};

template <class KV>
NV_TARGET_AVX2 void rows_avx2(const AttentionTile<KV>& t) {
  constexpr bool kInt8 = std::is_same_v<KV, int8_t>;
  const int D = t.D, G = t.G, nh = t.nh;
  const int R = (t.q1 - t.q0) * G;  // rows per head
  const int rows = R * nh;
  const float qscale = t.scale * 1.4426950408889634f;
  // Row r = head (r / R) of the item; within it query q0 + (r % R) / G, q head (r % R) % G. It
  // sees keys [lo, hi): hi = its key position + 1, lo = hi - window (or 0).
  auto row_query = [&](int r) { return t.q0 + (r % R) / G; };
  auto row_qhead = [&](int r) { return (t.h + r / R) * G + (r % R) % G; };
  const int khi = t.first_pos + t.q1;  // the item's keys [klo, khi)
  const int klo = t.window > 0 ? std::max(0, t.first_pos + t.q0 + 1 - t.window) : 0;
  const int slot_bytes = int(t.kv_stride * int64_t(sizeof(KV)));
  const int kc = std::max(64, kChunkVBytes / slot_bytes / 16 * 16);  // keys per chunk
  const int c_first = klo / kc * kc;
  const int stride = std::min(kc, khi - c_first + 7) / 8 * 8 + 8;  // score row stride

  thread_local Scratch sc;
  sc.s.resize(size_t(rows) * stride);
  sc.q.resize(size_t(rows) * D);
  sc.acc.resize(size_t(rows) * D);
  sc.mrun.assign(size_t(rows), kNegInf);
  sc.lrun.assign(size_t(rows), 0.f);
  sc.alpha.resize(size_t(rows));
  sc.lo.resize(size_t(rows));
  sc.hi.resize(size_t(rows));
  sc.vscale.resize(kInt8 ? size_t(nh) * stride : 0);
  for (int r = 0; r < rows; ++r) {
    const float* src = t.q + (t.tok0 + row_query(r)) * t.q_stride + int64_t(row_qhead(r)) * D;
    const __m256 qs = _mm256_set1_ps(qscale);
    for (int d = 0; d < D; d += 8)
      _mm256_storeu_ps(&sc.q[size_t(r) * D + d], _mm256_mul_ps(_mm256_loadu_ps(src + d), qs));
    sc.hi[size_t(r)] = t.first_pos + row_query(r) + 1;
    sc.lo[size_t(r)] = t.window > 0 ? std::max(0, sc.hi[size_t(r)] - t.window) : 0;
  }
  // kv_off[j - klo]: offset of key j's row of head t.h in K and V.
  sc.kv_off.resize(size_t(khi - klo));
  for (int j = klo; j < khi; ++j) {
    const int64_t slot = int64_t(t.block_table[j / t.block_size]) * t.block_size + j % t.block_size;
    sc.kv_off[size_t(j - klo)] = slot * t.kv_stride + int64_t(t.h) * t.row;
  }
  auto off = [&](int j) { return sc.kv_off[size_t(j - klo)]; };  // j in [klo, khi)
  const int span = nh * t.row * int(sizeof(KV));         // bytes of one key's rows in the item
  const int ahead = std::max(4, kPrefetchBytes / span);  // keys
  // Every cache line of key j's K rows in the item, into L1 for pass 1 (the next block's rows
  // too: the offsets come through the block table).
  auto prefetch = [&](int j) {
    if (j >= khi) return;
    const uintptr_t pk = reinterpret_cast<uintptr_t>(t.k_cache + off(j));
    const uintptr_t lines = ((pk & 63) + uintptr_t(span) + 63) / 64;
    for (uintptr_t i = 0; i < lines; ++i)
      _mm_prefetch(reinterpret_cast<const char*>((pk & ~uintptr_t(63)) + 64 * i), _MM_HINT_T0);
  };
  for (int j = klo; j < std::min(khi, klo + ahead); ++j) prefetch(j);
  // K of keys kKFar ahead towards L2, only where no pass 2 streamed it: the item's first chunk,
  // unless the thread's previous item did (t.k_prefetched).
  auto prefetch_far = [&](int j) {
    if (j >= khi) return;
    const uintptr_t pk = reinterpret_cast<uintptr_t>(t.k_cache + off(j));
    const uintptr_t lines = ((pk & 63) + uintptr_t(span) + 63) / 64;
    for (uintptr_t i = 0; i < lines; ++i)
      _mm_prefetch(reinterpret_cast<const char*>((pk & ~uintptr_t(63)) + 64 * i), _MM_HINT_T2);
  };
  if (!t.k_prefetched)
    for (int j = klo + ahead; j < std::min(khi, klo + kKFar); ++j) prefetch_far(j);
  // The next item's first chunk of keys (their K is streamed during this item's last pass 2).
  thread_local std::vector<int64_t> next_off;
  int next_n = 0;
  if (t.next_table) {
    next_n = std::min(kc, t.next_keys);
    next_off.resize(size_t(next_n));
    for (int j = 0; j < next_n; ++j) {
      const int64_t slot =
          int64_t(t.next_table[j / t.block_size]) * t.block_size + j % t.block_size;
      next_off[size_t(j)] = slot * t.kv_stride + int64_t(t.next_h) * t.row;
    }
  }

  for (int c0 = c_first; c0 < khi; c0 += kc) {
    const int ka = std::max(c0, klo), kb = std::min(c0 + kc, khi);  // this chunk's keys
    const bool first = c0 == c_first, last = kb == khi;
    // Pass 1: s[r][j - c0] for j in [ka, kb), in blocks of 8 / NR keys (a short last block
    // repeats its first key; those scores are never read).
    const int kbs = R == 1 ? 8 : 4;
    for (int j = ka; j < kb; j += kbs) {
      for (int u = 0; u < kbs; ++u) prefetch(j + ahead + u);
      if (first && !t.k_prefetched)
        for (int u = 0; u < kbs; ++u) prefetch_far(j + kKFar + u);
      // V of the keys kPrefetchVPass1Keys ahead, written out here: as a lambda beside
      // `prefetch` it measured no gain (GCC 12), inline it did.
      for (int u = 0; u < kbs; ++u) {
        const int jv = j + kPrefetchVPass1Keys + u;
        if (jv >= khi) break;
        const uintptr_t pv = reinterpret_cast<uintptr_t>(t.v_cache + off(jv));
        const uintptr_t lines = ((pv & 63) + uintptr_t(span) + 63) / 64;
        for (uintptr_t i = 0; i < lines; ++i)
          _mm_prefetch(reinterpret_cast<const char*>((pv & ~uintptr_t(63)) + 64 * i), _MM_HINT_T2);
      }
      for (int hh = 0; hh < nh; ++hh) {
        const KV* k[8];
        float ks[8] = {};
        for (int u = 0; u < kbs; ++u) {
          k[u] = t.k_cache + off(j + u < kb ? j + u : j) + int64_t(hh) * t.row;
          ks[u] = row_scale(k[u], D);
        }
        // The key scales as one vector, built from the scalars (a 32-byte load of the 4 or 8
        // just-stored floats would wait for the stores to retire: no store forwarding).
        const __m256 ksv =
            kbs == 8 ? _mm256_setr_ps(ks[0], ks[1], ks[2], ks[3], ks[4], ks[5], ks[6], ks[7])
                     : _mm256_setr_ps(ks[0], ks[1], ks[2], ks[3], ks[0], ks[1], ks[2], ks[3]);
        const int n = std::min(kbs, kb - j);
        alignas(32) float out[8];
        for (int r = hh * R; r < (hh + 1) * R; r += 2) {
          const float* q0 = &sc.q[size_t(r) * D];
          if (R == 1) {
            score_block<1>(q0, q0, k, D, ksv, out);
            std::copy(out, out + n, &sc.s[size_t(r) * stride + size_t(j - c0)]);
            continue;
          }
          const bool two = r + 1 < (hh + 1) * R;
          const float* q1 = two ? q0 + D : q0;
          score_block<2>(q0, q1, k, D, ksv, out);
          std::copy(out, out + n, &sc.s[size_t(r) * stride + size_t(j - c0)]);
          if (two) std::copy(out + 4, out + 4 + n, &sc.s[size_t(r + 1) * stride + size_t(j - c0)]);
        }
      }
    }
    // int8: the chunk's V scales, gathered in one loop of independent loads after pass 1 (V was
    // requested 32 keys ahead during it). Read inside pass 1's key blocks, each was a miss that
    // held the block's dots up (16-20% of the kernel's samples at B = 8, L = 1024).
    if constexpr (kInt8) {
      for (int hh = 0; hh < nh; ++hh) {
        float* vs = &sc.vscale[size_t(hh) * stride];
        const KV* vh = t.v_cache + int64_t(hh) * t.row;
        for (int j = ka; j < kb; ++j) vs[j - c0] = row_scale(vh + off(j), D);
      }
    }
    // Softmax per row over the chunk's vectors [va, vb) (8 keys each, lanes at fixed key
    // positions); keys outside the row's [lo, hi) get p = 0. int8: the stored p carries the V
    // scale (the sum does not).
    const int va = (ka - c0) / 8 * 8, vb = (kb - c0 + 7) / 8 * 8;
    for (int r = 0; r < rows; ++r) {
      float* sr = &sc.s[size_t(r) * stride];
      const int lo = sc.lo[size_t(r)] - c0, hi = sc.hi[size_t(r)] - c0;
      const int xa = std::max(lo, ka - c0), xb = std::min(hi, kb - c0);  // live keys, may be empty
      __m256 mx = _mm256_set1_ps(kNegInf);
      for (int i = va; i < vb; i += 8) {
        if (i + 8 <= xa || i >= xb) continue;
        const __m256 m = lane_mask(xa - i, xb - i);
        mx = _mm256_max_ps(mx,
                           _mm256_blendv_ps(_mm256_set1_ps(kNegInf), _mm256_loadu_ps(sr + i), m));
      }
      alignas(32) float mlanes[8];
      _mm256_store_ps(mlanes, mx);
      float cmax = kNegInf;
      for (float x : mlanes) cmax = std::max(cmax, x);
      const float mold = sc.mrun[size_t(r)], mnew = std::max(mold, cmax);
      const __m256 mv = _mm256_set1_ps(mnew);
      const float* vs = kInt8 ? &sc.vscale[size_t(r / R) * stride] : nullptr;
      __m256 sum = _mm256_setzero_ps();
      for (int i = va; i < vb; i += 8) {
        __m256 p = _mm256_setzero_ps();
        if (xa < xb && i + 8 > xa && i < xb) {
          const __m256 live = lane_mask(xa - i, xb - i);
          const __m256 e = exp2_256(_mm256_sub_ps(_mm256_loadu_ps(sr + i), mv));
          p = _mm256_and_ps(live, e);
          if constexpr (kInt8) {
            sum = _mm256_add_ps(sum, p);
            p = _mm256_and_ps(live, _mm256_mul_ps(e, _mm256_loadu_ps(vs + i)));
          }
        }
        if constexpr (!kInt8) sum = _mm256_add_ps(sum, p);
        _mm256_storeu_ps(sr + i, p);
      }
      // No earlier key (first chunk, or a window starting later): nothing to rescale.
      const float a = mold == kNegInf ? 0.f : std::exp2(mold - mnew);
      sc.alpha[size_t(r)] = a;
      alignas(32) float slanes[8];
      _mm256_store_ps(slanes, sum);
      const float csum = ((slanes[0] + slanes[1]) + (slanes[2] + slanes[3])) +
                         ((slanes[4] + slanes[5]) + (slanes[6] + slanes[7]));
      sc.lrun[size_t(r)] = sc.lrun[size_t(r)] * a + csum;
      sc.mrun[size_t(r)] = mnew;
    }
    // Pass 2: acc[r] = alpha[r] * acc[r] + sum_j p[r][j] * v_j per head, pair of its rows and 32
    // dims; the last chunk writes out = acc / l.
    constexpr int kDims = 32;
    KStream<KV> ks;
    if (!last)
      ks = {t.k_cache, &sc.kv_off[size_t(kb - klo)], std::min(kc, khi - kb), span};
    else if (next_n > 0)
      ks = {t.k_cache, next_off.data(), next_n, t.next_nh * t.row * int(sizeof(KV))};
    const int64_t pv_keys = int64_t(nh) * ((D + kDims - 1) / kDims) * ((R + 1) / 2) * (kb - ka);
    ks.rate = pv_keys > 0 ? int((int64_t(ks.lines()) * 256 + pv_keys - 1) / pv_keys) : 0;
    for (int hh = 0; hh < nh; ++hh) {
      const int64_t hoff = int64_t(hh) * t.row;
      for (int d0 = 0; d0 < D; d0 += kDims) {
        const int nv = std::min(kDims, D - d0) / 8;
        for (int rb = hh * R; rb < (hh + 1) * R; rb += 2) {
          const int nr = std::min(2, (hh + 1) * R - rb);
          const float* in[2] = {nullptr, nullptr};
          float a[2] = {0.f, 0.f}, mul[2] = {1.f, 1.f};
          float* dst[2] = {nullptr, nullptr};
          for (int i = 0; i < nr; ++i) {
            const int r = rb + i;
            if (!first) in[i] = &sc.acc[size_t(r) * D + d0], a[i] = sc.alpha[size_t(r)];
            if (last) {
              dst[i] =
                  t.out + (t.tok0 + row_query(r)) * t.out_stride + int64_t(row_qhead(r)) * D + d0;
              mul[i] = sc.lrun[size_t(r)] > 0.f ? 1.f / sc.lrun[size_t(r)] : 0.f;
            } else {
              dst[i] = &sc.acc[size_t(r) * D + d0];
            }
          }
          const float* p0 = &sc.s[size_t(rb) * stride + size_t(ka - c0)];  // keys [ka, kb)
          const float* p1 = nr > 1 ? p0 + stride : nullptr;
          const int64_t* koff = &sc.kv_off[size_t(ka - klo)];
          switch (nv) {
#define NV_PV(N)                                                                                 \
  case N:                                                                                        \
    if (nr == 2)                                                                                 \
      pv_rows<N, 2>(t.v_cache, koff, hoff + d0, kb - ka, p0, p1, in[0], in[1], a[0], a[1],       \
                    dst[0], dst[1], mul[0], mul[1], ks);                                         \
    else                                                                                         \
      pv_rows<N, 1>(t.v_cache, koff, hoff + d0, kb - ka, p0, nullptr, in[0], nullptr, a[0], 0.f, \
                    dst[0], nullptr, mul[0], 1.f, ks);                                           \
    break;
            NV_PV(1) NV_PV(2) NV_PV(3) NV_PV(4)
#undef NV_PV
          }
        }
      }
    }
  }
}

}  // namespace

template <class KV>
bool attention_rows_avx2(const AttentionTile<KV>& t) {
  if (active_isa() != Isa::Avx2 || t.D % 8 != 0) return false;
  rows_avx2(t);
  return true;
}

template bool attention_rows_avx2(const AttentionTile<float>&);
template bool attention_rows_avx2(const AttentionTile<uint16_t>&);
template bool attention_rows_avx2(const AttentionTile<int8_t>&);

}  // namespace nanovllm::cpu
