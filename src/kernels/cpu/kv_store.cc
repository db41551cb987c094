// store_kv on the CPU: each step token's K and V rows [Hkv, D] into its slot of the paged cache
// (f32 as is, bf16 rounded to nearest even, int8 quantized per (token, head) row:
// kernels/kv_cache_int8.h).
//
// Tokens in parallel (a 16k-token prefill stores 16k x 2 x Hkv rows per layer; one core did it
// while the other waited: 2.7% of bench.py's run in store_kv and ~1.5% more in the libm calls
// fmaxf / nearbyintf of the scalar quantizer, docs/perf.md). The int8 rows are quantized with
// AVX-512 or AVX2 by the same arithmetic as quantize_kv_row (an exact max, one division, one
// multiply, a clamp, round to nearest even), so every ISA writes the bytes the reference does.
// Distinct tokens write distinct slots (slot_mapping's contract); a slot repeated within a step
// (past the contract) ends with one of the tokens' rows, as on CUDA (kernels/README.md).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <algorithm>
#include <cstring>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/simd.h"
#include "kernels/kv_cache_int8.h"

namespace nanovllm::cpu {

namespace {

// Values [d0, D) of a row by quantize_kv_row's scalar steps, then the row's scale.
inline void tail_and_scale(const float* x, int d0, int D, float inv, float amax, int8_t* dst) {
  for (int d = d0; d < D; ++d) {
    float v = x[d] * inv;
    v = v > 127.f ? 127.f : v < -127.f ? -127.f : v;
    dst[d] = v == v ? int8_t(std::nearbyint(v)) : int8_t(0);
  }
  const float s = amax / 127.f;
  std::memcpy(dst + D, &s, sizeof s);
}

// quantize_kv_row's arithmetic, 16 values at a time. NaN values are skipped by the max (as
// std::fmax does) and stored as 0; the D % 16 tail runs the scalar reference's steps.
NV_TARGET_AVX512 void quantize_row_avx512(const float* x, int D, int8_t* dst) {
  const int dv = D / 16 * 16;
  __m512 mx = _mm512_setzero_ps();
  for (int d = 0; d < dv; d += 16) {
    const __m512 v = _mm512_loadu_ps(x + d);
    mx = _mm512_mask_max_ps(mx, _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q), mx, _mm512_abs_ps(v));
  }
  float amax = _mm512_reduce_max_ps(mx);
  for (int d = dv; d < D; ++d) amax = std::fmax(amax, std::fabs(x[d]));
  const float inv = amax > 0.f ? 127.f / amax : 0.f;
  const __m512 vinv = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-127.f), hi = _mm512_set1_ps(127.f);
  for (int d = 0; d < dv; d += 16) {
    const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x + d), vinv);
    const __mmask16 ord = _mm512_cmp_ps_mask(v, v, _CMP_ORD_Q);
    const __m512 c = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    // cvtps2dq rounds half to even (the default MXCSR mode), as std::nearbyint does.
    const __m512i q = _mm512_maskz_cvtps_epi32(ord, c);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + d), _mm512_cvtepi32_epi8(q));
  }
  tail_and_scale(x, dv, D, inv, amax, dst);
}

NV_TARGET_AVX2 void quantize_row_avx2(const float* x, int D, int8_t* dst) {
  const int dv = D / 8 * 8;
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 mx = _mm256_setzero_ps();
  for (int d = 0; d < dv; d += 8) {
    const __m256 v = _mm256_loadu_ps(x + d);
    const __m256 a = _mm256_andnot_ps(sign, v);
    // NaN lanes keep mx (blend on the ordered mask).
    mx = _mm256_blendv_ps(mx, _mm256_max_ps(mx, a), _mm256_cmp_ps(v, v, _CMP_ORD_Q));
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, mx);
  float amax = 0.f;
  for (float l : lanes) amax = std::fmax(amax, l);
  for (int d = dv; d < D; ++d) amax = std::fmax(amax, std::fabs(x[d]));
  const float inv = amax > 0.f ? 127.f / amax : 0.f;
  const __m256 vinv = _mm256_set1_ps(inv), lo = _mm256_set1_ps(-127.f), hi = _mm256_set1_ps(127.f);
  for (int d = 0; d < dv; d += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + d), vinv);
    const __m256 ord = _mm256_cmp_ps(v, v, _CMP_ORD_Q);
    const __m256 c = _mm256_and_ps(_mm256_min_ps(_mm256_max_ps(v, lo), hi), ord);  // NaN: 0
    const __m256i q = _mm256_cvtps_epi32(c);  // round half to even
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst + d), _mm_packs_epi16(w, w));
  }
  tail_and_scale(x, dv, D, inv, amax, dst);
}

// A slot's Hkv K or V rows [Hkv, D] into the cache.
void put_rows(const float* src, float* dst, int Hkv, int D) {
  std::memcpy(dst, src, size_t(Hkv) * D * 4);
}
void put_rows(const float* src, uint16_t* dst, int Hkv, int D) {
  f32_to_bf16_row(src, dst, int64_t(Hkv) * D);
}
void put_rows(const float* src, int8_t* dst, int Hkv, int D) {
  const Isa isa = active_isa();
  for (int h = 0; h < Hkv; ++h) {
    const float* x = src + int64_t(h) * D;
    int8_t* out = dst + int64_t(h) * (D + kKvInt8ScaleBytes);
    if (isa == Isa::Avx512) quantize_row_avx512(x, D, out);
    else if (isa == Isa::Avx2) quantize_row_avx2(x, D, out);
    else quantize_kv_row(x, D, out);
  }
}

// KV: the cache's element type, float, uint16_t (bf16 bits) or int8_t; activations are F32.
template <class KV>
void store_kv_t(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache,
                const AttentionParams& p, ThreadPool& pool) {
  const int D = p.head_dim, Hq = p.num_q_heads, Hkv = p.num_kv_heads;
  const int64_t row = int64_t(Hq + 2 * Hkv) * D, T = slot_mapping.numel();
  const int64_t kvw = int64_t(Hkv) * k_cache.size(2), num_slots = k_cache.size(0);
  const float* src = qkv.data<float>();
  const int32_t* slots = slot_mapping.data<int32_t>();
  KV* kc = k_cache.data<KV>();
  KV* vc = v_cache.data<KV>();
  auto store = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t s = slots[t];
      if (s < 0 || s >= num_slots) continue;  // -1 = padding; out of range: the defensive rule
      put_rows(src + t * row + int64_t(Hq) * D, kc + s * kvw, Hkv, D);
      put_rows(src + t * row + int64_t(Hq + Hkv) * D, vc + s * kvw, Hkv, D);
    }
  };
  // ~2 Hkv D values quantized per token: chunks of >= ~32K values, so decode steps of small
  // batches stay on the caller.
  pool.parallel_for(T, store, grain_for_work(2 * int64_t(Hkv) * D, int64_t(1) << 15));
}

}  // namespace

void store_kv(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache,
              const AttentionParams& p, ThreadPool& pool) {
  if (k_cache.dtype() == DType::BF16)
    store_kv_t<uint16_t>(qkv, slot_mapping, k_cache, v_cache, p, pool);
  else if (k_cache.dtype() == kKvCacheInt8)
    store_kv_t<int8_t>(qkv, slot_mapping, k_cache, v_cache, p, pool);
  else store_kv_t<float>(qkv, slot_mapping, k_cache, v_cache, p, pool);
}

}  // namespace nanovllm::cpu
