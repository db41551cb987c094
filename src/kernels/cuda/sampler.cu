// Device sampling op (see sampler.h and kernels/sampling.h for what is computed).
#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/sampler.h"

namespace nanovllm::cuda {
namespace {

constexpr int NT = 1024;
constexpr double kMassScale = 1099511627776.0;  // 2^40 fixed point for probability mass
constexpr int kSplitThreads = 256;
static_assert(kSplitChunk % 32 == 0, "a chunk holds whole words of the edited bitmap");
static_assert(kSplitChunk % kSplitThreads == 0, "a thread holds a whole number of a chunk's entries");

struct ArgMax {
  float v;
  int64_t i;
};
// Larger value wins, then the lower index: the order of greedy, top-N and the race.
__device__ __forceinline__ ArgMax better(ArgMax a, ArgMax b) {
  if (b.v > a.v || (b.v == a.v && b.i < a.i)) return b;
  return a;
}
// Loses to every candidate, -inf ones included.
__device__ __forceinline__ ArgMax no_argmax() { return ArgMax{-INFINITY, INT64_MAX}; }

// Block-wide argmax (every thread gets the result). `sv` / `si` hold >= 33 entries.
__device__ ArgMax block_argmax(ArgMax a, float* sv, int64_t* si) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ArgMax b{__shfl_xor_sync(0xffffffffu, a.v, o), __shfl_xor_sync(0xffffffffu, a.i, o)};
    a = better(a, b);
  }
  if (lane == 0) {
    sv[warp] = a.v;
    si[warp] = a.i;
  }
  __syncthreads();
  if (warp == 0) {
    ArgMax b = no_argmax();
    if (lane < int(blockDim.x >> 5)) b = ArgMax{sv[lane], si[lane]};
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      ArgMax c{__shfl_xor_sync(0xffffffffu, b.v, o), __shfl_xor_sync(0xffffffffu, b.i, o)};
      b = better(b, c);
    }
    if (lane == 0) {
      sv[32] = b.v;
      si[32] = b.i;
    }
  }
  __syncthreads();
  ArgMax r{sv[32], si[32]};
  __syncthreads();
  return r;
}

__device__ __forceinline__ float clean(float z) { return isnan(z) ? -INFINITY : z; }

// One row's raw and processed logits (definition steps 1 and 2), element by element.
struct RowView {
  const float* x;
  const uint32_t* mask;     // allowed-token bits; null: all allowed
  const uint32_t* edited;   // shared bitmap of tokens with an edit; null: none
  int64_t edited_base;      // the bitmap's first word is word edited_base of the row
  const LogitEdit* edits;   // ascending tokens
  int32_t num_edits;
  Penalties pen;

  __device__ float raw(int64_t i) const { return clean(x[i]); }
  __device__ float z(int64_t i) const {
    if (!token_allowed(mask, i)) return -INFINITY;
    float v = clean(x[i]);
    if (edited != nullptr && ((edited[(i >> 5) - edited_base] >> (i & 31)) & 1u)) {
      int lo = 0, hi = num_edits - 1;  // the edit of token i (present: its bit is set)
      while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (edits[mid].token < i) lo = mid + 1;
        else hi = mid;
      }
      v = apply_logit_edit(v, edits[lo], pen);
    }
    return v;
  }
};

// Largest key t with  sum over { i : key_i >= max(t, floor) } of weight(z_i)  >= target,
// found digit by digit (8 bits per pass, most significant first). zs(i) = scaled logit.
template <class ZFn, class WeightFn>
__device__ uint32_t radix_select(ZFn zs, int64_t V, uint32_t floor, unsigned long long target,
                                 WeightFn weight, unsigned long long* hist, uint32_t* shared_u32) {
  uint32_t prefix = 0, mask = 0;
  unsigned long long above = 0;  // weight strictly above the current prefix range
  for (int shift = 24; shift >= 0; shift -= 8) {
    for (int d = threadIdx.x; d < 256; d += blockDim.x) hist[d] = 0;
    __syncthreads();
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
      const float z = zs(i);
      const uint32_t k = float_order_key(z);
      if (k >= floor && (k & mask) == prefix) atomicAdd(&hist[(k >> shift) & 255u], weight(z));
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      unsigned long long cum = above;
      int chosen = 0;
      for (int d = 255; d >= 0; --d) {
        if (cum + hist[d] >= target) {
          chosen = d;
          break;
        }
        cum += hist[d];
      }
      shared_u32[0] = prefix | (uint32_t(chosen) << shift);
      shared_u32[1] = uint32_t(cum >> 32);
      shared_u32[2] = uint32_t(cum);
    }
    __syncthreads();
    prefix = shared_u32[0];
    above = (unsigned long long)(shared_u32[1]) << 32 | shared_u32[2];
    mask |= 255u << shift;
    __syncthreads();
  }
  return prefix;
}

// The split path. A row that asks for no logprobs, and is greedy or has no top-k, top-p or
// min-p, needs no quantity of the whole row before its argmax: greedy is argmax z_i (it ignores
// the filters), and Gumbel-max is argmax z_i / T + g_i
// (neither needs max z: that it is -inf shows as a winner of value -inf). So the row is cut into
// chunks of kSplitChunk entries, one block each (sample_split_kernel, all rows' chunks in one
// grid), and sample_kernel takes the best of the chunk winners. Argmax with ties to the lower
// index does not depend on how the entries are grouped: the tokens are those of the one-block
// path, bit for bit. Why: one 1,024-thread block per row left a decode step of the H200 with
// 1 to 2 blocks per SM, each thread with one load in flight, and read the row twice (max, then
// the race): 194 us at batch 1 and 433 us at batch 256 per step (ncu, 2026-11-30), 12% of the step.
// Which rows: sample_split_row (sampler.h).

__global__ void __launch_bounds__(kSplitThreads)
    sample_split_kernel(const float* logits, int64_t V, int nsplit, const SampleRowDev* rows,
                        const LogitEdit* edits, const uint32_t* masks, ArgMax* scratch) {
  __shared__ uint32_t edited_bits[kSplitChunk / 32];  // this chunk's words of the bitmap
  __shared__ float red[33];
  __shared__ float sv[33];
  __shared__ int64_t si[33];
  const int64_t row = blockIdx.x / nsplit;
  const int chunk = int(blockIdx.x % nsplit);
  const SampleRowDev p = rows[row];
  if (!sample_split_row(p, V)) return;
  const int64_t c0 = int64_t(chunk) * kSplitChunk, c1 = min(V, c0 + kSplitChunk);
  RowView rv{logits + row * V, p.mask_offset >= 0 ? masks + p.mask_offset : nullptr, nullptr,
             c0 / 32, edits + p.edit_begin, p.edit_count, p.penalties};
  if (p.edit_count > 0) {
    for (int w = threadIdx.x; w < kSplitChunk / 32; w += blockDim.x) edited_bits[w] = 0u;
    // This chunk's edits (ascending tokens): [first token >= c0, first token >= c1).
    auto first_at_least = [&](int64_t tok) {
      int lo = 0, hi = p.edit_count;
      while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (rv.edits[mid].token < tok) lo = mid + 1;
        else hi = mid;
      }
      return lo;
    };
    const int e0 = first_at_least(c0), e1 = first_at_least(c1);
    __syncthreads();
    for (int e = e0 + threadIdx.x; e < e1; e += blockDim.x) {
      const int32_t t = rv.edits[e].token;
      atomicOr(&edited_bits[(t - c0) >> 5], 1u << (t & 31));
    }
    __syncthreads();
    rv.edited = edited_bits;
  }
  ArgMax a = no_argmax();
  if (is_greedy_temperature(p.temperature)) {
#pragma unroll 4
    for (int64_t i = c0 + threadIdx.x; i < c1; i += blockDim.x) a = better(a, ArgMax{rv.z(i), i});
  } else {
    // The same float operations as the one-block path: __fmul_rn(z, 1 / T) + gumbel. The
    // chunk's scaled logits stay in registers (kPer a thread); entries more than ~20 below the
    // chunk's largest cannot beat it (gumbel_prune_below, util/philox.h) and draw no noise.
    constexpr int kPer = int(kSplitChunk / kSplitThreads);
    const float inv_t = 1.f / p.temperature;
    float zv[kPer];
    float zc = -INFINITY;
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t i = c0 + threadIdx.x + int64_t(k) * kSplitThreads;
      zv[k] = i < c1 ? __fmul_rn(rv.z(i), inv_t) : -INFINITY;
      zc = fmaxf(zc, zv[k]);
    }
    const float below = gumbel_prune_below(block_max(zc, red));
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t i = c0 + threadIdx.x + int64_t(k) * kSplitThreads;
      if (i < c1 && !(zv[k] < below))
        a = better(a, ArgMax{zv[k] + sampler_gumbel(p.seed, p.step, uint32_t(i)), i});
    }
  }
  a = block_argmax(a, sv, si);
  if (threadIdx.x == 0) scratch[row * nsplit + chunk] = a;  // the chunk's winner
}

__global__ void __launch_bounds__(NT)
    sample_kernel(const float* logits, int64_t V, const SampleRowDev* rows,
                  const LogitEdit* edits, const uint32_t* masks, SampleOutputs out,
                  int nsplit, const ArgMax* scratch) {
  extern __shared__ uint32_t edited_bits[];  // ceil(V / 32) words
  __shared__ float red[33];
  __shared__ float sv[33];
  __shared__ int64_t si[33];
  __shared__ unsigned long long hist[256];
  __shared__ uint32_t su[3];
  const int64_t row = blockIdx.x;
  const SampleRowDev p = rows[row];
  RowView rv{logits + row * V, p.mask_offset >= 0 ? masks + p.mask_offset : nullptr, nullptr, 0,
             edits + p.edit_begin, p.edit_count, p.penalties};
  int64_t token = -1;
  if (sample_split_row(p, V)) {
    // 2-3 were done by sample_split_kernel: the best of its chunks' winners.
    ArgMax a = no_argmax();
    for (int c = threadIdx.x; c < nsplit; c += blockDim.x) a = better(a, scratch[row * nsplit + c]);
    a = block_argmax(a, sv, si);
    if (a.v != -INFINITY) token = a.i;
  } else if (p.edit_count > 0) {
    for (int64_t w = threadIdx.x; w < (V + 31) / 32; w += blockDim.x) edited_bits[w] = 0u;
    __syncthreads();
    for (int e = threadIdx.x; e < p.edit_count; e += blockDim.x) {
      const int32_t t = rv.edits[e].token;
      atomicOr(&edited_bits[t >> 5], 1u << (t & 31));
    }
    __syncthreads();
    rv.edited = edited_bits;
  }

  // 1. Logprobs of the raw row: logsumexp, then the top N in (value desc, index asc) order, one
  //    block argmax per rank over the entries after the previous one.
  float lse = 0.f;
  if (p.num_logprobs >= 0) {  // (never a split row)
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) m = fmaxf(m, rv.raw(i));
    m = block_max(m, red);
    if (isfinite(m)) {
      float s = 0.f;
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) s += expf(rv.raw(i) - m);
      lse = m + logf(block_sum(s, red));
    }
    ArgMax prev{INFINITY, -1};
    const int n = int(p.num_logprobs < V ? p.num_logprobs : V);
    for (int r = 0; r < n; ++r) {
      ArgMax a = no_argmax();
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
        const float v = rv.raw(i);
        if (v < prev.v || (v == prev.v && i > prev.i)) a = better(a, ArgMax{v, i});
      }
      a = block_argmax(a, sv, si);
      if (threadIdx.x == 0) {
        out.top_ids[p.lp_offset + r] = int32_t(a.i);
        out.top_logprobs[p.lp_offset + r] = a.v - lse;
      }
      prev = a;
    }
  }

  // 2-3. Greedy or Gumbel-max over the processed logits; -1 = nothing samplable.
  if (sample_split_row(p, V)) {
    // done above
  } else if (is_greedy_temperature(p.temperature)) {
    ArgMax a = no_argmax();
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) a = better(a, ArgMax{rv.z(i), i});
    a = block_argmax(a, sv, si);
    if (a.v != -INFINITY) token = a.i;
  } else {
    const float inv_t = 1.f / p.temperature;
    auto zs = [&](int64_t i) { return __fmul_rn(rv.z(i), inv_t); };
    float mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x) mx = fmaxf(mx, zs(i));
    const float zmax = block_max(mx, red);
    if (zmax != -INFINITY) {
      uint32_t floor = 0;  // kept: order key >= floor
      if (p.top_k > 0 && p.top_k < V) {
        floor = radix_select(zs, V, 0u, (unsigned long long)p.top_k,
                             [](float) { return 1ull; }, hist, su);
      }
      if (p.top_p < 1.f) {
        float tot = 0.f;
        for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
          const float z = zs(i);
          if (float_order_key(z) >= floor) tot += __expf(z - zmax);
        }
        const float total = block_sum(tot, red);
        const float scale = float(kMassScale) / total;
        auto mass = [=](float z) { return (unsigned long long)(__expf(z - zmax) * scale); };
        // Exact fixed-point total, then the threshold reaching top_p of it.
        if (threadIdx.x == 0) hist[0] = 0;
        __syncthreads();
        unsigned long long part = 0;
        for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
          const float z = zs(i);
          if (float_order_key(z) >= floor) part += mass(z);
        }
        atomicAdd(&hist[0], part);
        __syncthreads();
        const unsigned long long fx_total = hist[0];
        __syncthreads();
        unsigned long long target =
            (unsigned long long)(double(fx_total) * double(fmaxf(p.top_p, 0.f)));
        if (target < 1) target = 1;
        floor = radix_select(zs, V, floor, target, mass, hist, su);
      }
      if (p.min_p > 0.f) {
        const uint32_t k = float_order_key(zmax + logf(fminf(p.min_p, 1.f)));
        if (k > floor) floor = k;
      }
      ArgMax a = no_argmax();
      for (int64_t i = threadIdx.x; i < V; i += blockDim.x) {
        const float z = zs(i);
        if (float_order_key(z) < floor) continue;
        a = better(a, ArgMax{z + sampler_gumbel(p.seed, p.step, uint32_t(i)), i});
      }
      a = block_argmax(a, sv, si);
      token = a.i == INT64_MAX ? -1 : a.i;
    }
  }

  // 4. Nothing samplable: the allowed token with the largest raw logit.
  if (token < 0) {
    ArgMax a = no_argmax();
    for (int64_t i = threadIdx.x; i < V; i += blockDim.x)
      if (token_allowed(rv.mask, i)) a = better(a, ArgMax{rv.raw(i), i});
    a = block_argmax(a, sv, si);
    token = a.i == INT64_MAX ? 0 : a.i;
  }
  if (threadIdx.x == 0) {
    out.tokens[row] = int32_t(token);
    if (p.num_logprobs >= 0) out.chosen_logprob[row] = rv.raw(token) - lse;
  }
}

}  // namespace

size_t sample_scratch_bytes(int64_t S, int64_t V) {
  return size_t(S) * size_t(sample_split_count(V)) * sizeof(ArgMax);
}

void launch_sample(const float* logits, int64_t S, int64_t V, const SampleRowDev* rows,
                   const LogitEdit* edits, const uint32_t* masks, const SampleOutputs& out,
                   void* scratch, bool any_split, cudaStream_t s) {
  if (S == 0) return;
  NV_CHECK(V > 0 && V < (int64_t(1) << 31), "bad vocabulary size ", V);
  NV_CHECK(S <= 0x7fffffff, "too many rows to sample: ", S);
  const size_t smem = size_t((V + 31) / 32) * sizeof(uint32_t);  // the edited-token bitmap
  if (smem > 48 * 1024) {
    const cudaError_t e = cudaFuncSetAttribute(
        sample_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    NV_CHECK(e == cudaSuccess, "sampling a vocabulary of ", V, " needs ", smem,
             " bytes of shared memory: ", cudaGetErrorString(e));
  }
  const int64_t nsplit = sample_split_count(V);
  NV_CHECK(S * nsplit <= 0x7fffffff, "too many rows to sample: ", S);
  auto* best = static_cast<ArgMax*>(scratch);
  if (any_split) {
    sample_split_kernel<<<unsigned(S * nsplit), kSplitThreads, 0, s>>>(logits, V, int(nsplit), rows,
                                                                       edits, masks, best);
    CUDA_CHECK_LAUNCH();
  }
  sample_kernel<<<unsigned(S), NT, smem, s>>>(logits, V, rows, edits, masks, out, int(nsplit), best);
  CUDA_CHECK_LAUNCH();
}

}  // namespace nanovllm::cuda
