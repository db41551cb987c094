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
#include <vector>

#include "kernels/cpu/simd.h"
#include "util/dtype.h"

namespace nanovllm::cpu {

namespace {

constexpr int kLanes = 16;  // query rows per zmm

// 16 K/V elements as f32, and one as a scalar (f32 cache: as is; bf16: the top half of f32).
NV_TARGET_AVX512 inline __m512 load16_kv(const float* p) { return _mm512_loadu_ps(p); }
NV_TARGET_AVX512 inline __m512 load16_kv(const uint16_t* p) { return load16_bf16(p); }
inline float kv_f32(float v) { return v; }
inline float kv_f32(uint16_t v) { return bf16_to_f32(v); }
constexpr int kKeys = 16;   // keys per block

template <class KV>
NV_TARGET_AVX512 void tile_avx512(const AttentionTile<KV>& t) {
  const int D = t.D, G = t.G;
  const int rows = (t.q1 - t.q0) * G;
  const float qscale = t.scale * 1.4426950408889634f;  // log2(e)
  const float neg_inf = -std::numeric_limits<float>::infinity();
  std::vector<float> qt(size_t(D) * kLanes), acc(size_t(kLanes) * D);
  alignas(64) float pbuf[kKeys][kLanes];
  alignas(64) float cbuf[kLanes];
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
    std::fill(acc.begin(), acc.end(), 0.f);

    for (int j0 = 0; j0 <= max_pos; j0 += kKeys) {
      const int nj = std::min(kKeys, max_pos + 1 - j0);
      const KV* kr[kKeys];
      const KV* vr[kKeys];
      for (int j = 0; j < nj; ++j) {
        const int key = j0 + j;
        const int64_t slot = int64_t(t.block_table[key / t.block_size]) * t.block_size + key % t.block_size;
        kr[j] = t.k_cache + slot * t.kv_stride + int64_t(t.h) * D;
        vr[j] = t.v_cache + slot * t.kv_stride + int64_t(t.h) * D;
      }
      // S: 16 rows (lanes) x nj keys, 4 keys at a time (independent FMA chains).
      __m512 s[kKeys];
      for (int j = 0; j < nj; j += 4) {
        const int nk = std::min(4, nj - j);
        __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const KV* k0 = kr[j];
        const KV* k1 = kr[j + (nk > 1 ? 1 : 0)];
        const KV* k2 = kr[j + (nk > 2 ? 2 : 0)];
        const KV* k3 = kr[j + (nk > 3 ? 3 : 0)];
        for (int d = 0; d < D; ++d) {
          const __m512 qd = _mm512_loadu_ps(qt.data() + size_t(d) * kLanes);
          a0 = _mm512_fmadd_ps(qd, _mm512_set1_ps(kv_f32(k0[d])), a0);
          a1 = _mm512_fmadd_ps(qd, _mm512_set1_ps(kv_f32(k1[d])), a1);
          a2 = _mm512_fmadd_ps(qd, _mm512_set1_ps(kv_f32(k2[d])), a2);
          a3 = _mm512_fmadd_ps(qd, _mm512_set1_ps(kv_f32(k3[d])), a3);
        }
        s[j] = a0;
        if (nk > 1) s[j + 1] = a1;
        if (nk > 2) s[j + 2] = a2;
        if (nk > 3) s[j + 3] = a3;
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
      __m512 c = _mm512_maskz_mov_ps(had & live, exp2_512(_mm512_sub_ps(m, m_new)));
      __m512 psum = _mm512_setzero_ps();
      for (int j = 0; j < nj; ++j) {
        __m512 p = _mm512_maskz_mov_ps(valid[j] & live, exp2_512(_mm512_sub_ps(s[j], m_new)));
        psum = _mm512_add_ps(psum, p);
        _mm512_store_ps(pbuf[j], p);
      }
      l = _mm512_fmadd_ps(l, c, psum);
      m = _mm512_mask_mov_ps(m, live, m_new);
      _mm512_store_ps(cbuf, c);
      // acc[i][:] = acc[i][:] * c[i] + sum_j p[j][i] * v[j][:]
      for (int i = 0; i < nr; ++i) {
        float* ar = acc.data() + size_t(i) * D;
        const __m512 ci = _mm512_set1_ps(cbuf[i]);
        for (int d = 0; d < D; d += 16) {
          __m512 a = _mm512_mul_ps(_mm512_loadu_ps(ar + d), ci);
          for (int j = 0; j < nj; ++j)
            a = _mm512_fmadd_ps(_mm512_set1_ps(pbuf[j][i]), load16_kv(vr[j] + d), a);
          _mm512_storeu_ps(ar + d, a);
        }
      }
    }
    alignas(64) float lbuf[kLanes];
    _mm512_store_ps(lbuf, l);
    for (int i = 0; i < nr; ++i) {
      const int r = r0 + i, qi = t.q0 + r / G, hq = t.h * G + r % G;
      float* dst = t.out + (t.tok0 + qi) * t.out_stride + int64_t(hq) * D;
      const __m512 inv = _mm512_set1_ps(1.f / lbuf[i]);
      for (int d = 0; d < D; d += 16)
        _mm512_storeu_ps(dst + d, _mm512_mul_ps(_mm512_loadu_ps(acc.data() + size_t(i) * D + d), inv));
    }
  }
}

// Few rows (decode: one query per sequence, G heads): two passes over the keys, no transpose.
// Pass 1 reads each key row once and dots it with every row's query (scores in log2 units);
// the softmax then runs vectorized along the keys; pass 2 accumulates p * V per row.
template <class KV>
NV_TARGET_AVX512 void rows_avx512(const AttentionTile<KV>& t) {
  const int D = t.D, G = t.G;
  const int rows = (t.q1 - t.q0) * G;
  const float qscale = t.scale * 1.4426950408889634f;
  const int max_pos = t.first_pos + t.q1 - 1;
  const int nkeys = max_pos + 1;
  const int stride = (nkeys + 15) / 16 * 16;  // score row stride (vector tail stays in bounds)
  thread_local std::vector<float> sbuf, qbuf;
  sbuf.resize(size_t(rows) * stride);
  qbuf.resize(size_t(rows) * D);
  std::vector<int> limit(static_cast<size_t>(rows));  // keys [0, limit) visible to row r
  for (int r = 0; r < rows; ++r) {
    const int qi = t.q0 + r / G, hq = t.h * G + r % G;
    const float* src = t.q + (t.tok0 + qi) * t.q_stride + int64_t(hq) * D;
    for (int d = 0; d < D; ++d) qbuf[size_t(r) * D + d] = src[d] * qscale;
    limit[size_t(r)] = t.first_pos + qi + 1;
  }
  thread_local std::vector<int64_t> kv_off;  // offset of key j's row in the K and V caches
  kv_off.resize(size_t(nkeys));
  for (int j = 0; j < nkeys; ++j) {
    const int64_t slot = int64_t(t.block_table[j / t.block_size]) * t.block_size + j % t.block_size;
    kv_off[size_t(j)] = slot * t.kv_stride + int64_t(t.h) * D;
  }
  // Key rows of one head sit kv_stride apart (the cache is [slot, Hkv, D]): every row is in a
  // different 4 KiB page, where hardware prefetchers stop, so rows are prefetched kAhead keys
  // ahead (measured: without it decode attention ran at a fraction of the bandwidth).
  constexpr int kAhead = 8;
  auto prefetch_row = [&](const KV* base, int j) {
    if (j >= nkeys) return;
    const char* p = reinterpret_cast<const char*>(base + kv_off[size_t(j)]);
    for (int b = 0; b < D * int(sizeof(KV)); b += 64) _mm_prefetch(p + b, _MM_HINT_T0);
  };
  for (int j = 0; j < kAhead; ++j) prefetch_row(t.k_cache, j);
  // Pass 1: scores.
  for (int j = 0; j < nkeys; ++j) {
    prefetch_row(t.k_cache, j + kAhead);
    const KV* k = t.k_cache + kv_off[size_t(j)];
    for (int r = 0; r < rows; ++r) {
      const float* qr = qbuf.data() + size_t(r) * D;
      __m512 a0 = _mm512_setzero_ps(), a1 = a0;
      int d = 0;
      for (; d + 32 <= D; d += 32) {
        a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d), load16_kv(k + d), a0);
        a1 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d + 16), load16_kv(k + d + 16), a1);
      }
      if (d < D) a0 = _mm512_fmadd_ps(_mm512_loadu_ps(qr + d), load16_kv(k + d), a0);
      sbuf[size_t(r) * stride + j] = _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
    }
  }
  // Softmax along keys, per row: p = 2^(s - max), masked beyond the row's limit.
  std::vector<float> inv_l(static_cast<size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    float* sr = sbuf.data() + size_t(r) * stride;
    const int n = limit[size_t(r)];
    __m512 mx = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
    for (int j = 0; j < n; j += 16) {
      const __mmask16 mk = n - j >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - j)) - 1);
      mx = _mm512_mask_max_ps(mx, mk, mx, _mm512_maskz_loadu_ps(mk, sr + j));
    }
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mx));
    __m512 sum = _mm512_setzero_ps();
    for (int j = 0; j < stride; j += 16) {
      const int left = n - j;
      const __mmask16 mk = left >= 16 ? __mmask16(0xFFFF) : left > 0 ? __mmask16((1u << left) - 1) : 0;
      __m512 p = _mm512_maskz_mov_ps(mk, exp2_512(_mm512_sub_ps(_mm512_maskz_loadu_ps(mk, sr + j), m)));
      sum = _mm512_add_ps(sum, p);
      _mm512_storeu_ps(sr + j, p);
    }
    inv_l[size_t(r)] = 1.f / _mm512_reduce_add_ps(sum);
  }
  // Pass 2: out[r] = sum_j p[r][j] * v_j / l[r]. Keys outer, so each V row is read once per
  // block of 2 rows and 128 dims; accumulators stay in registers (2 x 8 zmm).
  constexpr int kRows = 2, kChunk = 128;
  for (int d0 = 0; d0 < D; d0 += kChunk) {
    const int nv = std::min(kChunk, D - d0) / 16;
    for (int rb = 0; rb < rows; rb += kRows) {
      const int nr = std::min(kRows, rows - rb);
      __m512 acc[kRows][kChunk / 16];
      for (int i = 0; i < kRows; ++i)
        for (int c = 0; c < kChunk / 16; ++c) acc[i][c] = _mm512_setzero_ps();
      for (int j = 0; j < kAhead; ++j) prefetch_row(t.v_cache, j);
      for (int j = 0; j < nkeys; ++j) {
        prefetch_row(t.v_cache, j + kAhead);
        const KV* v = t.v_cache + kv_off[size_t(j)] + d0;
        const __m512 p0 = _mm512_set1_ps(sbuf[size_t(rb) * stride + j]);
        const __m512 p1 = _mm512_set1_ps(nr > 1 ? sbuf[size_t(rb + 1) * stride + j] : 0.f);
        for (int c = 0; c < nv; ++c) {
          const __m512 vv = load16_kv(v + c * 16);
          acc[0][c] = _mm512_fmadd_ps(p0, vv, acc[0][c]);
          acc[1][c] = _mm512_fmadd_ps(p1, vv, acc[1][c]);
        }
      }
      for (int i = 0; i < nr; ++i) {
        const int r = rb + i, qi = t.q0 + r / G, hq = t.h * G + r % G;
        float* dst = t.out + (t.tok0 + qi) * t.out_stride + int64_t(hq) * D + d0;
        const __m512 inv = _mm512_set1_ps(inv_l[size_t(r)]);
        for (int c = 0; c < nv; ++c) _mm512_storeu_ps(dst + c * 16, _mm512_mul_ps(acc[i][c], inv));
      }
    }
  }
}

}  // namespace

template <class KV>
bool attention_tile_avx512(const AttentionTile<KV>& t) {
  if (active_isa() != Isa::Avx512 || t.D % 16 != 0) return false;
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

}  // namespace nanovllm::cpu
