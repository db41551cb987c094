// Paged causal attention for prefill / prefix-cached prefill / chunked prefill (varlen batch).
//
// FlashAttention-2 structure on CUDA cores (fp32 math; no tensor cores yet): a block owns
// BM = 64 "rows" of one sequence and one KV head, a row being (query token, query head of that
// KV head's GQA group) flattened as row = qi * G + g, so K/V tiles are loaded once for the
// whole group. Keys stream through shared memory in tiles of BN = 32 with an online softmax
// (running max m and sum l per row, kept in base-2: scores are pre-multiplied by log2(e)).
//
// Thread layout (128 threads): tr = tid / 8 owns rows 4 tr .. 4 tr + 3; tc = tid % 8 owns
// keys tc + 8 j (j < 4) of a tile and output columns tc + 8 c (c < D / 8). The 8 threads of a
// row group are adjacent lanes, so row max / sum are 3 xor-shuffles.
//
// Query i of sequence b sits at key position context_lens[b] - seqlen_q(b) + i and sees keys
// 0 .. that position. Key j lives in slot block_tables[b][j / block_size] * block_size +
// j % block_size of k_cache / v_cache [num_slots, Hkv, D].
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kernels.h"

namespace nanovllm::cuda {
namespace {

constexpr int BM = 64, BN = 32, NT = 128;
constexpr float kLog2e = 1.4426950408889634f;

template <class T, int D>
struct PrefillSmem {
  static constexpr int VE = 16 / sizeof(T);  // elements per 16-byte vector
  static constexpr int LD = D + VE;          // padded row stride (keeps 16-byte alignment)
  static constexpr int PLD = BN + 1;
  static constexpr size_t bytes =
      size_t(BM) * LD * sizeof(T) + size_t(BN) * LD * sizeof(T) + size_t(BM) * PLD * sizeof(float);
};

// Loads key/value rows k0 .. k0 + BN - 1 (zeros past kend or for invalid table entries).
template <class T, int D>
__device__ __forceinline__ void load_kv_tile(T* dst, const T* cache, const int32_t* table,
                                             int block_size, int64_t num_slots, int Hkv, int h,
                                             int k0, int kend) {
  using S = PrefillSmem<T, D>;
  constexpr int VPR = D / S::VE;  // vectors per row
  for (int e = threadIdx.x; e < BN * VPR; e += NT) {
    const int r = e / VPR, dv = e % VPR;
    const int key = k0 + r;
    Vec<T, S::VE> v;
    bool ok = false;
    if (key < kend) {
      const int blk = table[key / block_size];
      const int64_t slot = int64_t(blk) * block_size + key % block_size;
      if (blk >= 0 && slot < num_slots) {
        v = *reinterpret_cast<const Vec<T, S::VE>*>(cache + (slot * Hkv + h) * D + dv * S::VE);
        ok = true;
      }
    }
    if (!ok) {
#pragma unroll
      for (int i = 0; i < S::VE; ++i) v.v[i] = from_f<T>(0.f);
    }
    *reinterpret_cast<Vec<T, S::VE>*>(dst + r * S::LD + dv * S::VE) = v;
  }
}

template <class T, int D>
__global__ void __launch_bounds__(NT) prefill_kernel(AttentionArgs a) {
  using S = PrefillSmem<T, D>;
  constexpr int VE = S::VE, LD = S::LD, PLD = S::PLD, VPR = D / VE, NC = D / 8;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* Qs = reinterpret_cast<T*>(smem_raw);
  T* KVs = Qs + BM * LD;
  float* Ps = reinterpret_cast<float*>(KVs + BN * LD);

  const int b = blockIdx.y, h = blockIdx.z;
  const int G = a.Hq / a.Hkv;
  const int q_start = a.cu_seqlens_q[b];
  const int sq = a.cu_seqlens_q[b + 1] - q_start;
  const int ctx = a.context_lens[b];
  const int rows_total = sq * G;
  const int row0 = blockIdx.x * BM;
  if (row0 >= rows_total) return;
  const int ctx_off = ctx - sq;  // key position of query 0
  const int qi_last = (min(row0 + BM, rows_total) - 1) / G;
  const int kend = min(ctx, ctx_off + qi_last + 1);  // keys this tile can see: [0, kend)

  const T* qkv = static_cast<const T*>(a.qkv);
  const int64_t row_stride = int64_t(a.Hq + 2 * a.Hkv) * D;
  const int32_t* table = a.block_tables + int64_t(b) * a.table_stride;
  const int tid = threadIdx.x, tr = tid >> 3, tc = tid & 7;

  for (int e = tid; e < BM * VPR; e += NT) {
    const int r = e / VPR, dv = e % VPR, gr = row0 + r;
    Vec<T, VE> v;
    if (gr < rows_total) {
      const int qi = gr / G, g = gr % G;
      v = *reinterpret_cast<const Vec<T, VE>*>(qkv + int64_t(q_start + qi) * row_stride +
                                               int64_t(h * G + g) * D + dv * VE);
    } else {
#pragma unroll
      for (int i = 0; i < VE; ++i) v.v[i] = from_f<T>(0.f);
    }
    *reinterpret_cast<Vec<T, VE>*>(Qs + r * LD + dv * VE) = v;
  }

  int qpos[4];
  bool valid[4];
  float m[4], l[4], acc[4][NC];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int gr = row0 + tr * 4 + i;
    valid[i] = gr < rows_total;
    qpos[i] = ctx_off + (valid[i] ? gr / G : 0);
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int c = 0; c < NC; ++c) acc[i][c] = 0.f;
  }
  const float sc = a.scale * kLog2e;

  for (int k0 = 0; k0 < kend; k0 += BN) {
    __syncthreads();  // previous tile's P.V reads of KVs / Ps are done
    load_kv_tile<T, D>(KVs, static_cast<const T*>(a.k_cache), table, a.block_size, a.num_slots,
                       a.Hkv, h, k0, kend);
    __syncthreads();

    float s[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) s[i][j] = 0.f;
    for (int d0 = 0; d0 < D; d0 += VE) {
      float q[4][VE], k[4][VE];
#pragma unroll
      for (int i = 0; i < 4; ++i) load_f<T, VE>(Qs + (tr * 4 + i) * LD + d0, q[i]);
#pragma unroll
      for (int j = 0; j < 4; ++j) load_f<T, VE>(KVs + (tc + 8 * j) * LD + d0, k[j]);
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < VE; ++e) s[i][j] = fmaf(q[i][e], k[j][e], s[i][j]);
    }

#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int key = k0 + tc + 8 * j;
        s[i][j] = (valid[i] && key <= qpos[i] && key < kend) ? s[i][j] * sc : -INFINITY;
        mx = fmaxf(mx, s[i][j]);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
      const float m_new = fmaxf(m[i], mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;  // fully masked so far: avoid inf-inf
      float rs = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float p = exp2f(s[i][j] - m_use);
        rs += p;
        Ps[(tr * 4 + i) * PLD + tc + 8 * j] = p;
      }
      rs += __shfl_xor_sync(0xffffffffu, rs, 1);
      rs += __shfl_xor_sync(0xffffffffu, rs, 2);
      rs += __shfl_xor_sync(0xffffffffu, rs, 4);
      const float alpha = exp2f(m[i] - m_use);
      l[i] = l[i] * alpha + rs;
      m[i] = m_new;
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[i][c] *= alpha;
    }
    __syncthreads();  // Ps written; every thread is done reading K from KVs
    load_kv_tile<T, D>(KVs, static_cast<const T*>(a.v_cache), table, a.block_size, a.num_slots,
                       a.Hkv, h, k0, kend);
    __syncthreads();
    const int nk = min(BN, kend - k0);
    for (int kk = 0; kk < nk; ++kk) {
      float p[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) p[i] = Ps[(tr * 4 + i) * PLD + kk];
      const T* vrow = KVs + kk * LD;
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const float v = to_f(vrow[tc + 8 * c]);
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i][c] = fmaf(p[i], v, acc[i][c]);
      }
    }
  }

  T* out = static_cast<T*>(a.out);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if (!valid[i]) continue;
    const int gr = row0 + tr * 4 + i, qi = gr / G, g = gr % G;
    const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;
    T* o = out + int64_t(q_start + qi) * a.Hq * D + int64_t(h * G + g) * D;
#pragma unroll
    for (int c = 0; c < NC; ++c) o[tc + 8 * c] = from_f<T>(acc[i][c] * inv);
  }
}

template <class T, int D>
void launch_prefill_t(const AttentionArgs& a, cudaStream_t s) {
  using S = PrefillSmem<T, D>;
  // Opt in to > 48 KiB dynamic shared memory (per device, so set on every launch; cheap).
  CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(S::bytes)));
  const int G = a.Hq / a.Hkv;
  const dim3 grid(unsigned(ceil_div(int64_t(a.max_seqlen_q) * G, BM)), unsigned(a.num_seqs),
                  unsigned(a.Hkv));
  prefill_kernel<T, D><<<grid, NT, S::bytes, s>>>(a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_prefill(const AttentionArgs& a, cudaStream_t s) {
  if (a.num_seqs == 0 || a.max_seqlen_q == 0) return;
  NV_CHECK(a.Hkv > 0 && a.Hq % a.Hkv == 0, "num_q_heads ", a.Hq,
           " must be a multiple of num_kv_heads ", a.Hkv);
  NV_CHECK(a.num_seqs <= 65535 && a.Hkv <= 65535, "too many sequences/heads for one launch");
  NV_CUDA_DISPATCH_ACT(a.act, TA, {
    switch (a.D) {
      case 64:
        launch_prefill_t<TA, 64>(a, s);
        break;
      case 128:
        launch_prefill_t<TA, 128>(a, s);
        break;
      default:
        NV_THROW("CUDA attention supports head_dim 64 and 128, got ", a.D);
    }
  });
}

}  // namespace nanovllm::cuda
