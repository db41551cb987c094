// Tensor-core variant of the paged prefill attention (bf16 only): same contract and row
// mapping as attention_prefill.cu, but S = Q K^T and O += P V run on WMMA 16x16x16 bf16 tiles
// with fp32 accumulation. Block = 4 warps, BM = 64 rows (16 per warp), BN = 64 keys per tile.
// Each warp owns its 16 rows end to end (S, P, O and the online-softmax state live in its
// own slices of shared memory); block-wide barriers only guard the shared K-then-V tile buffer.
// O stays in shared memory (fp32) because WMMA accumulator fragments cannot be rescaled row by
// row. Softmax lanes: lane l handles row l / 2, columns (l % 2) * 32 .. + 32 of the key tile.
// Like the CUDA-core kernel, blocks stride over row tiles and keys whose block is missing are
// masked (a flag per key of the tile). Other head sizes, dtypes or unaligned tensors use the
// CUDA-core kernel (attention_prefill_tc_supported).
#include <mma.h>

#include <algorithm>

#include "kernels/cuda/attention_common.cuh"

namespace nanovllm::cuda {
namespace {

namespace wmma = nvcuda::wmma;

constexpr int BM = 64, BN = 64, NT = 128;

template <int D>
struct TcSmem {
  // Row strides padded against bank conflicts while keeping every 16-row WMMA tile 32-byte aligned.
  static constexpr int LDQ = D + 8, LDS = BN + 4, LDP = BN + 8, LDO = D + 4;
  static constexpr size_t q = size_t(BM) * LDQ * 2, kv = size_t(BN) * LDQ * 2,
                          s = size_t(BM) * LDS * 4, p = size_t(BM) * LDP * 2,
                          o = size_t(BM) * LDO * 4, flags = size_t(BN) * 4;
  // K and V tiles share one buffer: D = 128 needs 93 KiB, under sm_86/89's 99 KiB limit.
  static constexpr size_t bytes = q + kv + s + p + o + flags;
};

// Key rows k0 .. k0 + BN - 1 (zeros past kend or where the block is missing); with `flags`,
// records which keys are present.
__device__ __forceinline__ void load_rows_bf16(bf16* dst, int ld, const bf16* cache,
                                               const AttentionArgs& a, const int32_t* table,
                                               int h, int D, int k0, int kend, int* flags) {
  const int vpr = D / 8;
  for (int e = threadIdx.x; e < BN * vpr; e += NT) {
    const int r = e / vpr, dv = e % vpr, key = k0 + r;
    const int64_t slot = key < kend ? key_slot(a, table, key) : -1;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (slot >= 0) v = *reinterpret_cast<const uint4*>(cache + (slot * a.Hkv + h) * D + dv * 8);
    *reinterpret_cast<uint4*>(dst + r * ld + dv * 8) = v;
    if (flags && dv == 0) flags[r] = slot >= 0;
  }
}

template <int D>
__global__ void __launch_bounds__(NT) prefill_tc_kernel(AttentionArgs a) {
  using S = TcSmem<D>;
  constexpr int LDQ = S::LDQ, LDS = S::LDS, LDP = S::LDP, LDO = S::LDO;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  bf16* Qs = reinterpret_cast<bf16*>(smem_raw);
  bf16* KVs = reinterpret_cast<bf16*>(smem_raw + S::q);  // the K tile, then the V tile
  float* Ss = reinterpret_cast<float*>(smem_raw + S::q + S::kv);
  bf16* Ps = reinterpret_cast<bf16*>(smem_raw + S::q + S::kv + S::s);
  float* Os = reinterpret_cast<float*>(smem_raw + S::q + S::kv + S::s + S::p);
  int* kok = reinterpret_cast<int*>(smem_raw + S::q + S::kv + S::s + S::p + S::o);

  const int b = blockIdx.y, h = blockIdx.z;
  const int G = a.Hq / a.Hkv;
  const SeqRows sr = seq_rows(a, b);
  const int ctx = a.context_lens[b];
  const int rows_total = sr.sq * G;
  const int ctx_off = ctx - sr.sq;
  const bf16* qkv = static_cast<const bf16*>(a.qkv);
  const int64_t row_stride = int64_t(a.Hq + 2 * a.Hkv) * D;
  const int32_t* table = a.block_tables + int64_t(b) * a.table_stride;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const float sc = a.scale * kLog2e;
  // This lane's softmax row (shared with lane ^ 1) and column half.
  const int r_local = lane >> 1, half = lane & 1;
  const int r_blk = warp * 16 + r_local;
  bf16* Qw = Qs + warp * 16 * LDQ;
  float* Sw = Ss + warp * 16 * LDS;
  bf16* Pw = Ps + warp * 16 * LDP;
  float* Ow = Os + warp * 16 * LDO;

  for (int row0 = blockIdx.x * BM; row0 < rows_total; row0 += gridDim.x * BM) {
    const int row_lo = max(row0, sr.qlo * G);
    const int row_hi = min(min(row0 + BM, rows_total), sr.qhi * G);
    if (row_lo >= row_hi) continue;  // block-uniform
    const int kend = min(ctx, ctx_off + (row_hi - 1) / G + 1);
    __syncthreads();  // the previous row tile is done with Qs / Os

    // Q tile and a zeroed O.
    constexpr int VPR = D / 8;
    for (int e = tid; e < BM * VPR; e += NT) {
      const int r = e / VPR, dv = e % VPR, gr = row0 + r;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (gr >= row_lo && gr < row_hi) {
        const int qi = gr / G, g = gr % G;
        v = *reinterpret_cast<const uint4*>(qkv + int64_t(sr.q_start + qi) * row_stride +
                                            int64_t(h * G + g) * D + dv * 8);
      }
      *reinterpret_cast<uint4*>(Qs + r * LDQ + dv * 8) = v;
    }
    for (int e = tid; e < BM * LDO; e += NT) Os[e] = 0.f;
    __syncthreads();  // Q / O visible to every warp (also when there is no key tile at all)

    const int gr = row0 + r_blk;
    const bool valid = gr >= row_lo && gr < row_hi;
    const int qpos = ctx_off + (valid ? gr / G : 0);
    float m = -INFINITY, l = 0.f;

    const int kbeg = a.window > 0 ? max(0, ctx_off + row_lo / G - a.window + 1) : 0;  // window
    for (int k0 = kbeg; k0 < kend; k0 += BN) {
      __syncthreads();  // all warps are done with the previous V tile
      load_rows_bf16(KVs, LDQ, static_cast<const bf16*>(a.k_cache), a, table, h, D, k0, kend,
                     kok);
      __syncthreads();

      // S_w [16 x 64] = Q_w [16 x D] . K^T
#pragma unroll
      for (int j = 0; j < BN / 16; ++j) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::fill_fragment(acc, 0.f);
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> fb;
          wmma::load_matrix_sync(fa, Qw + kk * 16, LDQ);
          wmma::load_matrix_sync(fb, KVs + j * 16 * LDQ + kk * 16, LDQ);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(Sw + j * 16, acc, LDS, wmma::mem_row_major);
      }
      __syncwarp();

      // Online softmax of this lane's 32 columns of row r_local.
      float* srow = Sw + r_local * LDS + half * 32;
      float mx = -INFINITY;
#pragma unroll 8
      for (int c = 0; c < 32; ++c) {
        const int kk = half * 32 + c, key = k0 + kk;
        const bool see = valid && key <= qpos && key < kend && kok[kk] &&
                         (a.window == 0 || key > qpos - a.window);
        const float v = see ? srow[c] * sc : -INFINITY;
        srow[c] = v;
        mx = fmaxf(mx, v);
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      const float m_new = fmaxf(m, mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      float rs = 0.f;
      bf16* prow = Pw + r_local * LDP + half * 32;
#pragma unroll 8
      for (int c = 0; c < 32; ++c) {
        const float p = exp2f(srow[c] - m_use);
        rs += p;
        prow[c] = __float2bfloat16_rn(p);
      }
      rs += __shfl_xor_sync(0xffffffffu, rs, 1);
      const float alpha = exp2f(m - m_use);
      l = l * alpha + rs;
      m = m_new;
      float* orow = Ow + r_local * LDO + half * (D / 2);
#pragma unroll 8
      for (int c = 0; c < D / 2; ++c) orow[c] *= alpha;
      __syncthreads();  // every warp is done reading K; its own P / O writes are visible
      load_rows_bf16(KVs, LDQ, static_cast<const bf16*>(a.v_cache), a, table, h, D, k0, kend,
                     nullptr);
      __syncthreads();

      // O_w [16 x D] += P_w [16 x 64] . V [64 x D]
#pragma unroll
      for (int c = 0; c < D / 16; ++c) {
        wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
        wmma::load_matrix_sync(acc, Ow + c * 16, LDO, wmma::mem_row_major);
#pragma unroll
        for (int kk = 0; kk < BN / 16; ++kk) {
          wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> fa;
          wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> fb;
          wmma::load_matrix_sync(fa, Pw + kk * 16, LDP);
          wmma::load_matrix_sync(fb, KVs + kk * 16 * LDQ + c * 16, LDQ);
          wmma::mma_sync(acc, fa, fb, acc);
        }
        wmma::store_matrix_sync(Ow + c * 16, acc, LDO, wmma::mem_row_major);
      }
      __syncwarp();
    }
    __syncwarp();

    if (valid) {
      const int qi = gr / G, g = gr % G;
      const float inv = l > 0.f ? 1.f / l : 0.f;  // no visible key: zeros
      bf16* o = static_cast<bf16*>(a.out) + int64_t(sr.q_start + qi) * a.Hq * D +
                int64_t(h * G + g) * D + half * (D / 2);
      const float* orow = Ow + r_local * LDO + half * (D / 2);
      for (int c = 0; c < D / 2; ++c) o[c] = __float2bfloat16_rn(orow[c] * inv);
    }
  }
}

template <int D>
void launch_tc(const AttentionArgs& a, cudaStream_t s) {
  using S = TcSmem<D>;
  CUDA_CHECK(cudaFuncSetAttribute(prefill_tc_kernel<D>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  int(S::bytes)));
  const int G = a.Hq / a.Hkv;
  const int64_t tiles = std::max<int64_t>(1, (int64_t(a.max_seqlen_q) * G + BM - 1) / BM);
  const dim3 grid(unsigned(std::min<int64_t>(tiles, 1 << 20)), unsigned(a.num_seqs),
                  unsigned(a.Hkv));
  prefill_tc_kernel<D><<<grid, NT, S::bytes, s>>>(a);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

bool attention_prefill_tc_supported(const AttentionArgs& a) {
  // uint4 loads of qkv rows and cache rows: 16-byte aligned tensors.
  return a.act == DType::BF16 && (a.D == 64 || a.D == 128) && a.Hkv > 0 && a.Hq % a.Hkv == 0 &&
         aligned16(a.qkv) && aligned16(a.k_cache) && aligned16(a.v_cache);
}

void launch_attention_prefill_tc(const AttentionArgs& a, cudaStream_t s) {
  if (a.num_seqs == 0 || a.num_tokens == 0) return;
  NV_CHECK(attention_prefill_tc_supported(a),
           "tensor-core prefill needs bf16, head_dim 64/128 and 16-byte aligned tensors");
  NV_CHECK(a.num_seqs <= 65535 && a.Hkv <= 65535, "too many sequences/heads for one launch");
  if (a.D == 64)
    launch_tc<64>(a, s);
  else
    launch_tc<128>(a, s);
}

}  // namespace nanovllm::cuda
