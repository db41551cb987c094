// Paged causal attention for prefill / prefix-cached prefill / chunked prefill (varlen batch).
//
// FlashAttention-2 structure on CUDA cores (fp32 math): a block owns BM = 64 "rows" of one
// sequence and one KV head, a row being (query token, query head of that KV head's GQA group)
// flattened as row = qi * G + g, so K/V tiles are loaded once for the whole group. Keys stream
// through shared memory in tiles of BN = 32 with an online softmax (running max m and sum l per
// row, kept in base-2: scores are pre-multiplied by log2(e)). Blocks stride over the row tiles
// (row0 += gridDim.x * BM), so a max_seqlen_q below a real seqlen_q costs speed, never rows.
//
// Thread layout (128 threads): tr = tid / 8 owns rows 4 tr .. 4 tr + 3; tc = tid % 8 owns
// keys tc + 8 j (j < 4) of a tile and output columns tc + 8 c (c < DM / 8). The 8 threads of a
// row group are adjacent lanes, so row max / sum are 3 xor-shuffles.
//
// head_dim: DM is a compile-time bound (accumulators); EXACT instantiations (D = DM = 64 / 128,
// 16-byte aligned tensors) move 16-byte vectors, the others single elements with column guards.
//
// Query i of sequence b sits at key position context_lens[b] - seqlen_q(b) + i and sees keys
// 0 .. that position. Key j lives in slot block_tables[b][j / block_size] * block_size +
// j % block_size of k_cache / v_cache [num_slots, Hkv, D]; keys whose block is missing are
// masked (attention_common.cuh).
#include <algorithm>

#include "kernels/cuda/attention_common.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int BM = 64, BN = 32, NT = 128;

// Shared memory: Q tile [BM][ld], K-then-V tile [BN][ld] (T), P [BM][BN + 1] (f32), and one
// flag per key of the tile (1: its block is present).
template <class T, int DM, bool EXACT>
struct PrefillSmem {
  static constexpr int VE = EXACT ? 16 / sizeof(T) : 1;  // elements per load
  static constexpr int PLD = BN + 1;
  // Row stride: D + VE keeps 16-byte alignment for the vector path; D + 1 spreads banks.
  static __host__ __device__ int ld(int D) { return EXACT ? DM + VE : D + 1; }
  static __host__ __device__ size_t a16(size_t n) { return (n + 15) / 16 * 16; }
  static __host__ __device__ size_t kv_off(int D) { return a16(size_t(BM) * ld(D) * sizeof(T)); }
  static __host__ __device__ size_t p_off(int D) {
    return kv_off(D) + a16(size_t(BN) * ld(D) * sizeof(T));
  }
  static __host__ __device__ size_t flag_off(int D) { return p_off(D) + size_t(BM) * PLD * 4; }
  static size_t bytes(int D) { return flag_off(D) + size_t(BN) * 4; }
};

// Loads key/value rows k0 .. k0 + BN - 1 (zeros past kend or where the block is missing); with
// `flags`, records which keys are present.
template <class T, int VE>
__device__ __forceinline__ void load_kv_tile(T* dst, int ld, const T* cache, const AttentionArgs& a,
                                             const int32_t* table, int h, int D, int k0, int kend,
                                             int* flags) {
  const int vpr = D / VE;  // vectors per row
  for (int e = threadIdx.x; e < BN * vpr; e += NT) {
    const int r = e / vpr, dv = e % vpr, key = k0 + r;
    const int64_t slot = key < kend ? key_slot(a, table, key) : -1;
    Vec<T, VE> v;
    if (slot >= 0) {
      v = *reinterpret_cast<const Vec<T, VE>*>(cache + (slot * a.Hkv + h) * D + dv * VE);
    } else {
#pragma unroll
      for (int i = 0; i < VE; ++i) v.v[i] = from_f<T>(0.f);
    }
    *reinterpret_cast<Vec<T, VE>*>(dst + r * ld + dv * VE) = v;
    if (flags && dv == 0) flags[r] = slot >= 0;
  }
}

template <class T, int DM, bool EXACT>
__global__ void __launch_bounds__(NT) prefill_kernel(AttentionArgs a) {
  using S = PrefillSmem<T, DM, EXACT>;
  constexpr int VE = S::VE, PLD = S::PLD, NC = DM / 8;
  const int D = EXACT ? DM : a.D, LD = S::ld(D), VPR = D / VE;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* Qs = reinterpret_cast<T*>(smem_raw);
  T* KVs = reinterpret_cast<T*>(smem_raw + S::kv_off(D));
  float* Ps = reinterpret_cast<float*>(smem_raw + S::p_off(D));
  int* kok = reinterpret_cast<int*>(smem_raw + S::flag_off(D));

  const int b = blockIdx.y, h = blockIdx.z;
  const int G = a.Hq / a.Hkv;
  const SeqRows sr = seq_rows(a, b);
  const int ctx = a.context_lens[b];
  const int rows_total = sr.sq * G;  // <= 0: no rows
  const int ctx_off = ctx - sr.sq;   // key position of query 0
  const T* qkv = static_cast<const T*>(a.qkv);
  const int64_t row_stride = int64_t(a.Hq + 2 * a.Hkv) * D;
  const int32_t* table = a.block_tables + int64_t(b) * a.table_stride;
  const int tid = threadIdx.x, tr = tid >> 3, tc = tid & 7;
  const float sc = a.scale * kLog2e;

  for (int row0 = blockIdx.x * BM; row0 < rows_total; row0 += gridDim.x * BM) {
    // Rows of this tile whose token lies in the batch (all of them in a valid batch).
    const int row_lo = max(row0, sr.qlo * G);
    const int row_hi = min(min(row0 + BM, rows_total), sr.qhi * G);
    if (row_lo >= row_hi) continue;  // block-uniform
    const int kend = min(ctx, ctx_off + (row_hi - 1) / G + 1);  // keys the tile can see
    __syncthreads();  // the previous row tile is done with Qs

    for (int e = tid; e < BM * VPR; e += NT) {
      const int r = e / VPR, dv = e % VPR, gr = row0 + r;
      Vec<T, VE> v;
      if (gr >= row_lo && gr < row_hi) {
        const int qi = gr / G, g = gr % G;
        v = *reinterpret_cast<const Vec<T, VE>*>(qkv + int64_t(sr.q_start + qi) * row_stride +
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
      valid[i] = gr >= row_lo && gr < row_hi;
      qpos[i] = ctx_off + (valid[i] ? gr / G : 0);
      m[i] = -INFINITY;
      l[i] = 0.f;
#pragma unroll
      for (int c = 0; c < NC; ++c) acc[i][c] = 0.f;
    }

    // Sliding window: the tile's first query sees keys from its position - window + 1 on.
    const int kbeg = a.window > 0 ? max(0, ctx_off + row_lo / G - a.window + 1) : 0;
    for (int k0 = kbeg; k0 < kend; k0 += BN) {
      __syncthreads();  // previous tile's P.V reads of KVs / Ps are done
      load_kv_tile<T, VE>(KVs, LD, static_cast<const T*>(a.k_cache), a, table, h, D, k0, kend,
                          kok);
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
          const int kk = tc + 8 * j, key = k0 + kk;
          const bool see = valid[i] && key <= qpos[i] && key < kend && kok[kk] &&
                           (a.window == 0 || key > qpos[i] - a.window);
          s[i][j] = see ? s[i][j] * sc : -INFINITY;
          mx = fmaxf(mx, s[i][j]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
        const float m_new = fmaxf(m[i], mx);
        const float m_use = m_new == -INFINITY ? 0.f : m_new;  // fully masked so far: no inf-inf
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
      load_kv_tile<T, VE>(KVs, LD, static_cast<const T*>(a.v_cache), a, table, h, D, k0, kend,
                          nullptr);
      __syncthreads();
      const int nk = min(BN, kend - k0);
      for (int kk = 0; kk < nk; ++kk) {
        float p[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) p[i] = Ps[(tr * 4 + i) * PLD + kk];
        const T* vrow = KVs + kk * LD;
#pragma unroll
        for (int c = 0; c < NC; ++c) {
          const int col = tc + 8 * c;
          if (!EXACT && col >= D) continue;
          const float v = to_f(vrow[col]);
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
      const float inv = l[i] > 0.f ? 1.f / l[i] : 0.f;  // no visible key: zeros
      T* o = out + int64_t(sr.q_start + qi) * a.Hq * D + int64_t(h * G + g) * D;
#pragma unroll
      for (int c = 0; c < NC; ++c) {
        const int col = tc + 8 * c;
        if (EXACT || col < D) o[col] = from_f<T>(acc[i][c] * inv);
      }
    }
  }
}

template <class T, int DM, bool EXACT>
void launch_prefill_t(const AttentionArgs& a, cudaStream_t s) {
  using S = PrefillSmem<T, DM, EXACT>;
  const size_t bytes = S::bytes(a.D);
  int dev = 0, optin = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  NV_CHECK(bytes <= size_t(optin), "CUDA prefill attention with head_dim ", a.D, " and ",
           dtype_name(a.act), " activations needs ", bytes,
           " bytes of shared memory per block; this GPU allows ", optin);
  // Opt in to > 48 KiB dynamic shared memory (per device, so set on every launch; cheap).
  CUDA_CHECK(cudaFuncSetAttribute(prefill_kernel<T, DM, EXACT>,
                                  cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes)));
  const int G = a.Hq / a.Hkv;
  const int64_t tiles = std::max<int64_t>(1, (int64_t(a.max_seqlen_q) * G + BM - 1) / BM);
  const dim3 grid(unsigned(std::min<int64_t>(tiles, 1 << 20)), unsigned(a.num_seqs),
                  unsigned(a.Hkv));
  prefill_kernel<T, DM, EXACT><<<grid, NT, bytes, s>>>(a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_attention_prefill(const AttentionArgs& a, cudaStream_t s) {
  if (a.num_seqs == 0 || a.num_tokens == 0) return;
  NV_CHECK(a.num_seqs <= 65535 && a.Hkv <= 65535, "too many sequences/heads for one launch");
  const bool vec_ok = aligned16(a.qkv) && aligned16(a.k_cache) && aligned16(a.v_cache);
  NV_CUDA_DISPATCH_ACT(a.act, TA, {
    dispatch_head_dim(a.D, vec_ok, [&](auto dm, auto exact) {
      launch_prefill_t<TA, decltype(dm)::value, decltype(exact)::value>(a, s);
    });
  });
}

}  // namespace nanovllm::cuda
