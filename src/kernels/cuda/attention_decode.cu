// Paged attention for decode (one query token per sequence), split-K "flash decoding".
//
// Grid (splits, B, Hkv): a block handles one sequence, one KV head and all G = Hq / Hkv query
// heads of its group (GQA: each K/V row is read once for the group), over one partition of
// the context: keys [split * part_len, min(ctx, (split + 1) * part_len)). Keys go in chunks
// of C = 128: thread i scores key i against the G queries (kept in shared memory, fp32,
// pre-scaled by scale * log2 e), one warp per head updates that head's running max / sum, then
// thread (d = tid % D, heads g = tid / D + (128 / D) k) accumulates P.V for column d.
// With one split the block writes the output; otherwise it writes (o / l, m, l) to `partials`
// and decode_reduce_kernel merges the splits.
//
// Partition count is a pure function of (max_seqlen_k, B, Hkv, SM count): a CUDA graph must
// be captured with the max_seqlen_k it will be replayed with (use max_model_len).
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kernels.h"

namespace nanovllm::cuda {
namespace {

constexpr int NT = 128, C = 128, MAXG = 16, MIN_PART = 256;
constexpr float kLog2e = 1.4426950408889634f;

struct Split {
  int splits = 1, part_len = 0;
};

Split choose_split(const AttentionArgs& a, int num_sms) {
  Split sp;
  const int maxk = a.max_seqlen_k > 0 ? a.max_seqlen_k : 1;
  const int64_t base = int64_t(a.num_seqs) * a.Hkv;
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

template <class T, int D>
__global__ void __launch_bounds__(NT)
    decode_kernel(AttentionArgs a, int part_len, float* partials) {
  constexpr int VE = 16 / sizeof(T), GSTEP = NT / D, MAXO = MAXG / GSTEP;
  __shared__ float q_s[MAXG * D];
  __shared__ float s_s[MAXG * C];
  __shared__ int64_t slot_s[C];
  __shared__ float m_s[MAXG], l_s[MAXG], alpha_s[MAXG];

  const int split = blockIdx.x, b = blockIdx.y, h = blockIdx.z, splits = gridDim.x;
  const int G = a.Hq / a.Hkv;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int ctx = a.context_lens[b];
  const int start = split * part_len;
  // The last split runs to ctx, so a max_seqlen_k below a real context length loses no keys.
  const int end = split == splits - 1 ? ctx : min(ctx, start + part_len);
  const int t = a.cu_seqlens_q[b];  // the sequence's single query token
  const T* qkv = static_cast<const T*>(a.qkv);
  const int64_t row_stride = int64_t(a.Hq + 2 * a.Hkv) * D;
  const float sc = a.scale * kLog2e;

  for (int e = tid; e < G * D; e += NT) {
    const int g = e / D, d = e % D;
    q_s[e] = to_f(qkv[int64_t(t) * row_stride + int64_t(h * G + g) * D + d]) * sc;
  }
  if (tid < G) {
    m_s[tid] = -INFINITY;
    l_s[tid] = 0.f;
  }
  const int d = tid % D, g0 = tid / D;
  float acc[MAXO];
#pragma unroll
  for (int i = 0; i < MAXO; ++i) acc[i] = 0.f;
  __syncthreads();

  const T* kc = static_cast<const T*>(a.k_cache);
  const T* vc = static_cast<const T*>(a.v_cache);
  const int32_t* table = a.block_tables + int64_t(b) * a.table_stride;

  for (int c0 = start; c0 < end; c0 += C) {
    // 1. scores of key c0 + tid for every head of the group
    const int key = c0 + tid;
    int64_t slot = -1;
    if (key < end) {
      const int blk = table[key / a.block_size];
      const int64_t sl = int64_t(blk) * a.block_size + key % a.block_size;
      if (blk >= 0 && sl < a.num_slots) slot = sl;
    }
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
            for (int e = 0; e < VE; ++e) s[g] = fmaf(q_s[g * D + d0 + e], kv[e], s[g]);
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

    // 3. P.V for column d of heads g0 + GSTEP * i
#pragma unroll
    for (int i = 0; i < MAXO; ++i) {
      const int g = g0 + GSTEP * i;
      if (g < G) acc[i] *= alpha_s[g];
    }
    const int nk = min(C, end - c0);
#pragma unroll 4
    for (int k = 0; k < nk; ++k) {
      const int64_t sl = slot_s[k];
      if (sl < 0) continue;
      const float v = to_f(vc[(sl * a.Hkv + h) * D + d]);
#pragma unroll
      for (int i = 0; i < MAXO; ++i) {
        const int g = g0 + GSTEP * i;
        if (g < G) acc[i] = fmaf(s_s[g * C + k], v, acc[i]);
      }
    }
    __syncthreads();  // s_s / slot_s are rewritten by the next chunk
  }

#pragma unroll
  for (int i = 0; i < MAXO; ++i) {
    const int g = g0 + GSTEP * i;
    if (g >= G) continue;
    const int hq = h * G + g;
    const float l = l_s[g];
    const float o = l > 0.f ? acc[i] / l : 0.f;
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

// Merges the splits of one (sequence, query head): weights l_s * 2^(m_s - M).
template <class T, int D>
__global__ void decode_reduce_kernel(AttentionArgs a, int splits, const float* partials) {
  const int b = blockIdx.x, hq = blockIdx.y, d = threadIdx.x;
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
  const int t = a.cu_seqlens_q[b];
  static_cast<T*>(a.out)[int64_t(t) * a.Hq * D + int64_t(hq) * D + d] =
      from_f<T>(den > 0.f ? num / den : 0.f);
}

template <class T, int D>
void launch_decode_t(const AttentionArgs& a, float* partials, int num_sms, cudaStream_t s) {
  const Split sp = choose_split(a, num_sms);
  NV_CHECK(sp.splits == 1 || partials != nullptr, "decode attention needs a partials buffer");
  const dim3 grid(unsigned(sp.splits), unsigned(a.num_seqs), unsigned(a.Hkv));
  decode_kernel<T, D><<<grid, NT, 0, s>>>(a, sp.part_len, partials);
  CUDA_CHECK_LAUNCH();
  if (sp.splits > 1) {
    decode_reduce_kernel<T, D>
        <<<dim3(unsigned(a.num_seqs), unsigned(a.Hq)), D, 0, s>>>(a, sp.splits, partials);
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
  if (a.num_seqs == 0) return;
  NV_CHECK(a.Hkv > 0 && a.Hq % a.Hkv == 0, "num_q_heads ", a.Hq,
           " must be a multiple of num_kv_heads ", a.Hkv);
  NV_CHECK(a.Hq / a.Hkv <= MAXG, "CUDA decode attention supports up to ", MAXG,
           " query heads per KV head, got ", a.Hq / a.Hkv);
  NV_CHECK(a.num_seqs <= 65535 && a.Hkv <= 65535, "too many sequences/heads for one launch");
  NV_CUDA_DISPATCH_ACT(a.act, TA, {
    switch (a.D) {
      case 64:
        launch_decode_t<TA, 64>(a, partials, num_sms, s);
        break;
      case 128:
        launch_decode_t<TA, 128>(a, partials, num_sms, s);
        break;
      default:
        NV_THROW("CUDA attention supports head_dim 64 and 128, got ", a.D);
    }
  });
}

}  // namespace nanovllm::cuda
