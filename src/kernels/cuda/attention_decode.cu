// Paged attention for decode (one query token per sequence), split-K "flash decoding".
//
// Grid (splits, B, Hkv * head_groups): a block handles one sequence, one KV head and up to
// MAXG = 16 query heads of its GQA group (head_groups = ceil(G / 16) blocks share a KV head when
// G = Hq / Hkv > 16; each K/V row is read once per block), over one partition of the context:
// keys [split * part_len, min(ctx, (split + 1) * part_len)). Keys go in chunks of C = 128:
// thread i scores key i against the block's queries (kept in shared memory, fp32, pre-scaled by
// scale * log2 e), one warp per head updates that head's running max / sum, then thread tid
// accumulates P.V for the (head, column) pairs e = tid + 128 k (head e / D, column e % D).
// With one split the block writes the output; otherwise it writes (o / l, m, l) to `partials`
// and decode_reduce_kernel merges the splits.
//
// head_dim: DM is a compile-time bound (shared memory, accumulators); EXACT instantiations
// (D = DM = 64 / 128) read K in 16-byte vectors, the others element by element.
// The query is the sequence's last token (cu_seqlens_q[b + 1] - 1) at key position ctx - 1.
//
// Partition count is a pure function of (max_seqlen_k, B, Hkv, G, SM count): a CUDA graph must
// be captured with the max_seqlen_k it will be replayed with (use max_model_len).
#include "kernels/cuda/attention_common.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int NT = 128, C = 128, MAXG = 16, MIN_PART = 256;

struct Split {
  int splits = 1, part_len = 0;
};

int head_groups(const AttentionArgs& a) { return (a.Hq / a.Hkv + MAXG - 1) / MAXG; }

Split choose_split(const AttentionArgs& a, int num_sms) {
  Split sp;
  const int maxk = a.max_seqlen_k > 0 ? a.max_seqlen_k : 1;
  const int64_t base = int64_t(a.num_seqs) * a.Hkv * head_groups(a);
  int want = int((2 * int64_t(num_sms) + base - 1) / base);  // ~2 waves of blocks
  const int max_useful = (maxk + MIN_PART - 1) / MIN_PART;
  if (want > max_useful) want = max_useful;
  if (want < 1) want = 1;
  int part = (maxk + want - 1) / want;
  part = (part + C - 1) / C * C;
  sp.part_len = part;
  sp.splits = (maxk + part - 1) / part;
  return sp;
}

// The query token of sequence b, or -1 when the sequence has no row in the batch.
__device__ __forceinline__ int decode_token(const AttentionArgs& a, int b) {
  const SeqRows r = seq_rows(a, b);
  const int t = r.q_start + r.sq - 1;
  return r.sq >= 1 && t >= 0 && t < a.num_tokens ? t : -1;
}

template <class T, int DM, bool EXACT>
__global__ void __launch_bounds__(NT)
    decode_kernel(AttentionArgs a, int part_len, int groups, float* partials) {
  constexpr int VE = EXACT ? 16 / sizeof(T) : 1;   // K elements per load
  constexpr int MAXO = (MAXG * DM + NT - 1) / NT;  // (head, column) pairs per thread
  constexpr bool kColFixed = EXACT && NT % DM == 0;  // all of a thread's pairs: column tid % D
  __shared__ float q_s[MAXG * DM];
  __shared__ float s_s[MAXG * C];
  __shared__ int64_t slot_s[C];
  __shared__ float m_s[MAXG], l_s[MAXG], alpha_s[MAXG];

  const int D = EXACT ? DM : a.D;
  const int split = blockIdx.x, b = blockIdx.y, splits = gridDim.x;
  const int h = blockIdx.z / groups, g_base = (blockIdx.z % groups) * MAXG;
  const int G = min(MAXG, a.Hq / a.Hkv - g_base);  // query heads of this block
  const int hq0 = h * (a.Hq / a.Hkv) + g_base;     // its first query head
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int t = decode_token(a, b);
  if (t < 0) return;  // block-uniform: no row to write
  const int ctx = a.context_lens[b];
  // A sliding window hides keys before ctx - window: splits below that see none (correct, but
  // the split-K partition is not yet re-based on the window: unmeasured on a GPU).
  const int pstart = split * part_len;
  const int start = max(pstart, a.window > 0 ? max(0, ctx - a.window) : 0);
  // The last split runs to ctx, so a max_seqlen_k below a real context length loses no keys.
  const int end = split == splits - 1 ? ctx : min(ctx, pstart + part_len);
  const T* qkv = static_cast<const T*>(a.qkv);
  const int64_t row_stride = int64_t(a.Hq + 2 * a.Hkv) * D;
  const float sc = a.scale * kLog2e;

  for (int e = tid; e < G * D; e += NT) {
    const int g = e / D, d = e % D;
    q_s[g * DM + d] = to_f(qkv[int64_t(t) * row_stride + int64_t(hq0 + g) * D + d]) * sc;
  }
  if (tid < G) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.f;
  }
  float acc[MAXO];
#pragma unroll
  for (int i = 0; i < MAXO; ++i) acc[i] = 0.f;
  __syncthreads();

  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  const int32_t* table = a.block_tables + int64_t(b) * a.table_stride;

  for (int c0 = start; c0 < end; c0 += C) {
    // 1. scores of key c0 + tid for every head of the block (-inf: masked / past the end)
    const int key = c0 + tid;
    const int64_t slot = key < end ? key_slot(a, table, key) : -1;
    slot_s[tid] = slot;
    float s[MAXG];
#pragma unroll
    for (int g = 0; g < MAXG; ++g) s[g] = 0.f;
    if (slot >= 0) {
      const T* krow = kc + (slot * a.Hkv + h) * D;
      for (int d0 = 0; d0 < D; d0 += VE) {
        float kv[VE];
        load_f<T, VE>(krow + d0, kv);
#pragma unroll
        for (int g = 0; g < MAXG; ++g) {
          if (g < G) {
#pragma unroll
            for (int e = 0; e < VE; ++e) s[g] = fmaf(q_s[g * DM + d0 + e], kv[e], s[g]);
          }
        }
      }
    }
#pragma unroll
    for (int g = 0; g < MAXG; ++g)
      if (g < G) s_s[g * C + tid] = slot >= 0 ? s[g] : -INFINITY;
    __syncthreads();

    // 2. online-softmax update, one warp per head
    for (int g = warp; g < G; g += NT / 32) {
      float v[C / 32];
      float mx = -INFINITY;
#pragma unroll
      for (int i = 0; i < C / 32; ++i) {
        v[i] = s_s[g * C + lane + 32 * i];
        mx = fmaxf(mx, v[i]);
      }
      mx = warp_max(mx);
      const float m_old = m_s[g];
      const float m_new = fmaxf(m_old, mx);
      const float m_use = m_new == -INFINITY ? 0.f : m_new;
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < C / 32; ++i) {
        const float p = exp2f(v[i] - m_use);
        s_s[g * C + lane + 32 * i] = p;
        sum += p;
      }
      sum = warp_sum(sum);
      if (lane == 0) {
        const float alpha = exp2f(m_old - m_use);
        alpha_s[g] = alpha;
        l_s[g] = l_s[g] * alpha + sum;
        m_s[g] = m_new;
      }
    }
    __syncthreads();

    // 3. P.V for this thread's (head, column) pairs
#pragma unroll
    for (int i = 0; i < MAXO; ++i) {
      const int g = (tid + NT * i) / D;
      if (g < G) acc[i] *= alpha_s[g];
    }
    const int nk = min(C, end - c0);
#pragma unroll 4
    for (int k = 0; k < nk; ++k) {
      const int64_t sl = slot_s[k];
      if (sl < 0) continue;
      const T* vrow = vc + (sl * a.Hkv + h) * D;
      if constexpr (kColFixed) {
        const float v = to_f(vrow[tid % DM]);
#pragma unroll
        for (int i = 0; i < MAXO; ++i) {
          const int g = tid / DM + (NT / DM) * i;
          if (g < G) acc[i] = fmaf(s_s[g * C + k], v, acc[i]);
        }
      } else {
#pragma unroll
        for (int i = 0; i < MAXO; ++i) {
          const int e = tid + NT * i, g = e / D;
          if (g < G) acc[i] = fmaf(s_s[g * C + k], to_f(vrow[e - g * D]), acc[i]);
        }
      }
    }
    __syncthreads();  // s_s / slot_s are rewritten by the next chunk
  }

#pragma unroll
  for (int i = 0; i < MAXO; ++i) {
    const int e = tid + NT * i, g = e / D, d = e - g * D;
    if (g >= G) continue;
    const int hq = hq0 + g;
    const float l = l_s[g];
    const float o = l > 0.f ? acc[i] / l : 0.f;  // no visible key: zeros
    if (splits == 1) {
      static_cast<T*>(a.out)[int64_t(t) * a.Hq * D + int64_t(hq) * D + d] = from_f<T>(o);
    } else {
      const int64_t idx = (int64_t(b) * a.Hq + hq) * splits + split;
      partials[idx * (D + 2) + d] = o;
      if (d == 0) {
        partials[idx * (D + 2) + D] = m_s[g];
        partials[idx * (D + 2) + D + 1] = l;
      }
    }
  }
}

// Merges the splits of one (sequence, query head): weights l_s * 2^(m_s - M). blockDim = D.
template <class T>
__global__ void decode_reduce_kernel(AttentionArgs a, int splits, const float* partials) {
  const int b = blockIdx.x, hq = blockIdx.y, d = threadIdx.x, D = a.D;
  const int t = decode_token(a, b);
  if (t < 0) return;  // the decode kernel skipped this sequence too
  const float* p = partials + (int64_t(b) * a.Hq + hq) * splits * (D + 2);
  float M = -INFINITY;
  for (int s = 0; s < splits; ++s) M = fmaxf(M, p[s * (D + 2) + D]);
  float num = 0.f, den = 0.f;
  if (M != -INFINITY) {
    for (int s = 0; s < splits; ++s) {
      const float l = p[s * (D + 2) + D + 1];
      if (l <= 0.f) continue;
      const float w = l * exp2f(p[s * (D + 2) + D] - M);
      num += w * p[s * (D + 2) + d];
      den += w;
    }
  }
  static_cast<T*>(a.out)[int64_t(t) * a.Hq * D + int64_t(hq) * D + d] =
      from_f<T>(den > 0.f ? num / den : 0.f);
}

template <class T, int DM, bool EXACT>
void launch_decode_t(const AttentionArgs& a, float* partials, int num_sms, cudaStream_t s) {
  const Split sp = choose_split(a, num_sms);
  NV_CHECK(sp.splits == 1 || partials != nullptr, "decode attention needs a partials buffer");
  const int groups = head_groups(a);
  const dim3 grid(unsigned(sp.splits), unsigned(a.num_seqs), unsigned(a.Hkv * groups));
  decode_kernel<T, DM, EXACT><<<grid, NT, 0, s>>>(a, sp.part_len, groups, partials);
  CUDA_CHECK_LAUNCH();
  if (sp.splits > 1) {
    decode_reduce_kernel<T>
        <<<dim3(unsigned(a.num_seqs), unsigned(a.Hq)), unsigned(a.D), 0, s>>>(a, sp.splits,
                                                                                partials);
    CUDA_CHECK_LAUNCH();
  }
}

}  // namespace

int64_t decode_partials_floats(const AttentionArgs& a, int num_sms) {
  if (a.num_seqs == 0) return 0;
  const Split sp = choose_split(a, num_sms);
  if (sp.splits == 1) return 0;
  return int64_t(a.num_seqs) * a.Hq * sp.splits * (a.D + 2);
}

void launch_attention_decode(const AttentionArgs& a, float* partials, int num_sms, cudaStream_t s) {
  if (a.num_seqs == 0 || a.num_tokens == 0) return;
  NV_CHECK(a.num_seqs <= 65535 && int64_t(a.Hkv) * head_groups(a) <= 65535 && a.Hq <= 65535,
           "too many sequences/heads for one decode launch: ", a.num_seqs, " sequences, ", a.Hq,
           " query heads");
  // K rows are read in 16-byte vectors by the exact instantiations: the cache must be aligned.
  NV_CUDA_DISPATCH_ACT(a.act, TA, {
    dispatch_head_dim(a.D, aligned16(a.k_cache), [&](auto dm, auto exact) {
      launch_decode_t<TA, decltype(dm)::value, decltype(exact)::value>(a, partials, num_sms, s);
    });
  });
}

}  // namespace nanovllm::cuda
