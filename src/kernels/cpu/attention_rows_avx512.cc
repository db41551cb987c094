// AVX-512 attention for a tile of query rows, flash-style (online softmax over key blocks).
//
// Layout trick: the tile's queries are transposed once into qt[D][16] (16 query rows = the 16
// lanes of a zmm), so a score for one key over 16 rows is D FMAs of qt[d] with a broadcast of
// k[d]; the online-softmax max/sum then run lane-wise across keys, with no horizontal
// reductions in the inner loop. Scores are kept in log2 units (q pre-scaled by scale*log2(e))
// so the exponential is one exp2.
//
// Per 16-row group and 16-key block: QK^T 16 x 16 x D FMAs (4 keys in flight for latency),
// P = exp2(S - m) lane-wise, then acc[r][:] += sum_j P[j][r] * V[j][:] per row.
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

constexpr int kLanes = 16;  // query rows per zmm

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
constexpr int kKeys = 16;   // keys per block

// Pointers to the block's K and V rows as f32: the cache rows themselves (f32 cache), or the
// rows widened into kbuf / vbuf [kKeys][D] (bf16 and int8 caches: widened once per block, not per
// use; int8 times its row's scale).
NV_TARGET_AVX512 inline const float* rows_f32(const float* row, int, float*) { return row; }
NV_TARGET_AVX512 inline const float* rows_f32(const uint16_t* row, int D, float* buf) {
  for (int d = 0; d < D; d += 16) _mm512_storeu_ps(buf + d, load16_bf16(row + d));
  return buf;
}
NV_TARGET_AVX512 inline const float* rows_f32(const int8_t* row, int D, float* buf) {
  const __m512 s = _mm512_set1_ps(kv_int8_scale(row, D));
  for (int d = 0; d < D; d += 16) _mm512_storeu_ps(buf + d, _mm512_mul_ps(load16_kv(row + d), s));
  return buf;
}

template <class KV>
NV_TARGET_AVX512 void tile_avx512(const AttentionTile<KV>& t) {
  const int D = t.D, G = t.G;
  const int rows = (t.q1 - t.q0) * G;
  const float qscale = t.scale * 1.4426950408889634f;  // log2(e)
  const float neg_inf = -std::numeric_limits<float>::infinity();
  // qt[d][lane] and the output accumulator acct[d][lane] (lane = query row), and the widened
  // K / V rows of a bf16 cache.
  std::vector<float> qt(size_t(D) * kLanes), acct(size_t(D) * kLanes);
  std::vector<float> kwide(std::is_same_v<KV, float> ? 0 : size_t(kKeys) * D);
  std::vector<float> vwide(std::is_same_v<KV, float> ? 0 : size_t(kKeys) * D);
  alignas(64) float pbuf[kKeys][kLanes];
  alignas(64) int32_t posbuf[kLanes];

  for (int r0 = 0; r0 < rows; r0 += kLanes) {
    const int nr = std::min(kLanes, rows - r0);
    // Transpose (and pre-scale) the group's query rows; padding lanes get zeros and position
    // -1 (every key masked).
    int max_pos = -1;
    for (int i = 0; i < kLanes; ++i) {
      if (i < nr) {
        const int r = r0 + i, qi = t.q0 + r / G, hq = t.h * G + r % G;
        const float* src = t.q + (t.tok0 + qi) * t.q_stride + int64_t(hq) * D;
        for (int d = 0; d < D; ++d) qt[size_t(d) * kLanes + i] = src[d] * qscale;
        posbuf[i] = t.first_pos + qi;
        max_pos = std::max(max_pos, posbuf[i]);
      } else {
        for (int d = 0; d < D; ++d) qt[size_t(d) * kLanes + i] = 0.f;
        posbuf[i] = -1;
      }
    }
    const __m512i pos = _mm512_load_si512(posbuf);
    __m512 m = _mm512_set1_ps(neg_inf), l = _mm512_setzero_ps();
    std::fill(acct.begin(), acct.end(), 0.f);

    for (int j0 = 0; j0 <= max_pos; j0 += kKeys) {
      const int nj = std::min(kKeys, max_pos + 1 - j0);
      const float* kr[kKeys];
      const float* vr[kKeys];
      for (int j = 0; j < nj; ++j) {
        const int key = j0 + j;
        const int64_t slot = int64_t(t.block_table[key / t.block_size]) * t.block_size + key % t.block_size;
        const int64_t off = slot * t.kv_stride + int64_t(t.h) * t.row;
        kr[j] = rows_f32(t.k_cache + off, D, kwide.data() + size_t(j) * D);
        vr[j] = rows_f32(t.v_cache + off, D, vwide.data() + size_t(j) * D);
      }
      for (int j = nj; j < kKeys; ++j) kr[j] = kr[0], vr[j] = vr[0];  // lanes of absent keys: masked
      // S: 16 rows (lanes) x 16 keys, 8 keys per pass: per d one q load, 8 broadcasts, 8 FMAs.
      __m512 s[kKeys];
      for (int jb = 0; jb < nj; jb += 8) {
        __m512 a[8];
        for (int u = 0; u < 8; ++u) a[u] = _mm512_setzero_ps();
        for (int d = 0; d < D; ++d) {
          const __m512 qd = _mm512_loadu_ps(qt.data() + size_t(d) * kLanes);
          for (int u = 0; u < 8; ++u) a[u] = _mm512_fmadd_ps(qd, _mm512_set1_ps(kr[jb + u][d]), a[u]);
        }
        for (int u = 0; u < 8; ++u) s[jb + u] = a[u];
      }
      // Causal mask per lane, block max, new running max.
      __mmask16 valid[kKeys];
      __m512 bm = _mm512_set1_ps(neg_inf);
      for (int j = 0; j < nj; ++j) {
        valid[j] = _mm512_cmp_epi32_mask(_mm512_set1_epi32(j0 + j), pos, _MM_CMPINT_LE);
        bm = _mm512_mask_max_ps(bm, valid[j], bm, s[j]);
      }
      const __m512 m_new = _mm512_max_ps(m, bm);
      const __mmask16 live = _mm512_cmp_ps_mask(m_new, _mm512_set1_ps(neg_inf), _CMP_NEQ_OQ);
      // c = 2^(m - m_new): 0 where m was -inf (nothing accumulated yet), 1 on dead lanes.
      const __mmask16 had = _mm512_cmp_ps_mask(m, _mm512_set1_ps(neg_inf), _CMP_NEQ_OQ);
      const __m512 c = _mm512_maskz_mov_ps(had & live, exp2_512(_mm512_sub_ps(m, m_new)));
      __m512 psum = _mm512_setzero_ps();
      for (int j = 0; j < nj; ++j) {
        __m512 p = _mm512_maskz_mov_ps(valid[j] & live, exp2_512(_mm512_sub_ps(s[j], m_new)));
        psum = _mm512_add_ps(psum, p);
        _mm512_store_ps(pbuf[j], p);
      }
      l = _mm512_fmadd_ps(l, c, psum);
      m = _mm512_mask_mov_ps(m, live, m_new);
      // acct[d][:] = acct[d][:] * c + sum_j p[j][:] * v[j][d], rows in lanes like S: per key one
      // P load, 8 broadcasts of V, 8 FMAs (the row-major form needed 2 loads per FMA).
      for (int d0 = 0; d0 < D; d0 += 8) {
        __m512 a[8];
        for (int u = 0; u < 8; ++u) a[u] = _mm512_mul_ps(_mm512_loadu_ps(acct.data() + size_t(d0 + u) * kLanes), c);
        for (int j = 0; j < nj; ++j) {
          const __m512 pj = _mm512_load_ps(pbuf[j]);
          for (int u = 0; u < 8; ++u) a[u] = _mm512_fmadd_ps(pj, _mm512_set1_ps(vr[j][d0 + u]), a[u]);
        }
        for (int u = 0; u < 8; ++u) _mm512_storeu_ps(acct.data() + size_t(d0 + u) * kLanes, a[u]);
      }
    }
    // out[row][d] = acct[d][row] / l[row].
    alignas(64) float inv[kLanes];
    _mm512_store_ps(inv, _mm512_div_ps(_mm512_set1_ps(1.f), l));
    for (int i = 0; i < nr; ++i) {
      const int r = r0 + i, qi = t.q0 + r / G, hq = t.h * G + r % G;
      float* dst = t.out + (t.tok0 + qi) * t.out_stride + int64_t(hq) * D;
      for (int d = 0; d < D; ++d) dst[d] = acct[size_t(d) * kLanes + i] * inv[i];
    }
  }
}

// Few rows (decode: one query per sequence, G heads each, for nh adjacent KV heads): two passes
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
template <int NV, class KV>
NV_TARGET_AVX512 void pv_rows(const KV* v_cache, const int64_t* kv_off, int64_t off,
                              int64_t vscale_off, int D, int c0, int c1,
                              const float* s0, const float* s1, const float* in0, const float* in1,
                              float a0, float a1, float* out0, float* out1, float mul0, float mul1) {
  __m512 acc0[NV], acc1[NV];
  const __m512 va0 = _mm512_set1_ps(a0), va1 = _mm512_set1_ps(a1);
#pragma GCC unroll 8
  for (int c = 0; c < NV; ++c) {
    acc0[c] = in0 ? _mm512_mul_ps(va0, _mm512_loadu_ps(in0 + c * 16)) : _mm512_setzero_ps();
    acc1[c] = in1 ? _mm512_mul_ps(va1, _mm512_loadu_ps(in1 + c * 16)) : _mm512_setzero_ps();
  }
  for (int j = c0; j < c1; ++j) {
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

template <class KV>
NV_TARGET_AVX512 void rows_avx512(const AttentionTile<KV>& t) {
  const int D = t.D, G = t.G, nh = t.nh;
  const int R = (t.q1 - t.q0) * G;  // rows per head
  const int rows = R * nh;
  const float qscale = t.scale * 1.4426950408889634f;
  const int max_pos = t.first_pos + t.q1 - 1;
  const int nkeys = max_pos + 1;
  const int span = nh * t.row * int(sizeof(KV));  // bytes of one key's K (or V) rows in the item
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
  // Software prefetch kAhead keys ahead: the item's nh rows of a slot into L1 for pass 1 (K), and
  // into L2 for pass 2 (V, read from there once per head).
  constexpr int kAhead = 8;
  auto prefetch_k = [&](int j) {
    if (j >= nkeys) return;
    const char* p = reinterpret_cast<const char*>(t.k_cache + kv_off[size_t(j)]);
    for (int b = 0; b < span; b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
  };
  auto prefetch_v = [&](int j) {
    if (j >= nkeys) return;
    const char* p = reinterpret_cast<const char*>(t.v_cache + kv_off[size_t(j)]);
    for (int b = 0; b < span; b += 64) _mm_prefetch(p + b, _MM_HINT_T1);
  };
  for (int j = 0; j < kAhead; ++j) prefetch_k(j), prefetch_v(j);
  for (int c0 = 0; c0 < nkeys; c0 += kc) {
    const int c1 = std::min(nkeys, c0 + kc);
    const bool first = c0 == 0, last = c1 == nkeys;
    // Pass 1: scores of keys [c0, c1) into sbuf[r][j - c0].
    for (int j = c0; j < c1; ++j) {
      prefetch_k(j + kAhead);
      prefetch_v(j + kAhead);
      for (int r = 0; r < rows; ++r) {
        const KV* k = t.k_cache + kv_off[size_t(j)] + int64_t(r / R) * t.row;
        const float* qr = qbuf.data() + size_t(r) * D;
        __m512 a0 = _mm512_setzero_ps(), a1 = a0;
        int d = 0;
        for (; d + 32 <= D; d += 32) {
          a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d), load16_kv(k + d), a0);
          a1 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d + 16), load16_kv(k + d + 16), a1);
        }
        if (d < D) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d), load16_kv(k + d), a0);
        sbuf[size_t(r) * stride + (j - c0)] =
            _mm512_reduce_add_ps(_mm512_add_ps(a0, a1)) * row_scale(k, D);
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
    pv_rows<N>(t.v_cache, off, hoff + d0, hoff, D, c0, c1, s0, s1, in[0], in[1], a[0], a[1],     \
               dst[0], dst[1], mul[0], mul[1]);                                                   \
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
bool attention_tile_avx512(const AttentionTile<KV>& t) {
  if (active_isa() != Isa::Avx512 || t.D % 16 != 0 || t.nh != 1) return false;
  tile_avx512(t);
  return true;
}

template <class KV>
bool attention_rows_avx512(const AttentionTile<KV>& t) {
  if (active_isa() != Isa::Avx512 || t.D % 16 != 0) return false;
  rows_avx512(t);
  return true;
}

template bool attention_tile_avx512(const AttentionTile<float>&);
template bool attention_tile_avx512(const AttentionTile<uint16_t>&);
template bool attention_rows_avx512(const AttentionTile<float>&);
template bool attention_rows_avx512(const AttentionTile<uint16_t>&);
template bool attention_tile_avx512(const AttentionTile<int8_t>&);
template bool attention_rows_avx512(const AttentionTile<int8_t>&);

}  // namespace nanovllm::cpu
