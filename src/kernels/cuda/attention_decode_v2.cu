// Paged decode attention, v2 (BackendOptions::cuda_decode = "v2"): the same contract as
// attention_decode.cu (v1, kept as is; the two are compared by measurement), reorganized for
// memory bandwidth. One query per sequence (its last token, cu_seqlens_q[b + 1] - 1, at key
// position context_lens[b] - 1), split-K over key partitions, partial results merged by a reduce
// kernel in v1's partials layout [B, Hq, splits, D + 2] = (o / l, m, l), scores in log2 units.
//
// Shapes: qkv [T, (Hq + 2 Hkv) * D], caches [num_slots, Hkv, D], out [T, Hq * D].
// Fast path only: bf16 or f32 activations (caches of the same dtype), head_dim 64 or 128, both
// caches 16-byte aligned. Every other shape (other head_dim, unaligned caches) runs v1: see
// attention_decode_v2_supported(); decode_v2_partials_floats() then sizes v1's partials.
//
// Grid (Hkv * groups, splits, B), 128 threads (4 warps). A block handles one sequence b, one KV
// head h, up to 8 query heads of its GQA group (decode_split.h: decode_v2_heads; GB = 1/2/4/8 is
// the compile-time bound) and keys [split * part_len, end), end = min(ctx, next partition) or
// ctx for the last split. Heads vary fastest (v1: slowest), so the blocks that run together
// read all Hkv stripes of the same slots: a slot's K (and V) row [Hkv, D] is contiguous, and
// together they stream whole rows rather than one D-element stripe of each (vLLM's paged
// attention orders its grid the same way). Unmeasured on its own: part of v2 vs v1.
//
// Inside a block the warps are independent until the end (no __syncthreads in the key loop):
//  - A key row (D elements = D * sizeof(T) bytes = 128 / 256 / 512 B) is read by TPK =
//    D * sizeof(T) / 16 lanes, each holding one 16-byte slice (VEC = 8 bf16 or 4 f32 elements);
//    a warp reads KPW = 32 / TPK keys per row step (bf16 D = 128: 16 lanes per key, 2 keys).
//  - A warp chunk is U = 4 row steps = CH = 4 * KPW keys; warp w takes chunks w, w + 4, ...
//    of the partition. Per lane and chunk: U K slices + U V slices (128 B) in registers.
//  - Double buffering in registers (two buffers, ping-pong, no copies): the K/V of the warp's
//    next chunk are loaded (16-byte __ldg) before its current chunk is computed, so up to two
//    chunks per warp are in flight; the block-table lookups (one key per lane, shuffled to the
//    lanes that read it) run one chunk further ahead, so a chunk's loads never wait on its slots.
//  - Scores: each lane dots its slice with its slice of the block's queries (registers, fp32,
//    pre-scaled by scale * log2 e), then log2(TPK) xor-shuffles give every lane of the key's
//    group the full q.k.
//  - Masked keys (missing block, past the partition) are predicated: no load (K and V slices
//    are zeros), score -inf, p = 0. No `continue`, no divergent trip counts within a warp.
//  - Online softmax per lane group: running max m, sum l and the P.V accumulator of its slice
//    of the output, per head. At the end the KPW key groups of a warp merge by shuffles, the 4
//    warps through shared memory (acc_s [4][GB][D] floats + m/l), and the block writes the
//    output (one split) or its partial.
//
// Split count (decode_split.h: choose_decode_split): the most partitions of >= 256 keys such
// that B * Hkv * groups * splits still fits one wave of resident blocks, SMs x blocks per SM from
// cudaOccupancyMaxActiveBlocksPerMultiprocessor for the instantiation that runs (computed once
// per instantiation and device, then cached). A pure function of (max_seqlen_k, B, Hkv, G,
// dtype, head_dim, device): CUDA graphs capture it (with max_seqlen_k = max_model_len).
#include <atomic>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/decode_split.h"

namespace nanovllm::cuda {
namespace {

constexpr int kNT = 128;           // threads per block
constexpr int kNW = kNT / 32;      // warps per block
constexpr int kU = 4;              // row steps per warp chunk
constexpr unsigned kFull = 0xffffffffu;

template <class T>
struct TypeTag {
  using type = T;
};

// 16 bytes of T as floats (bf16: 8, f32: 4).
template <class T>
__device__ __forceinline__ void unpack16(const uint4& x, float (&f)[16 / sizeof(T)]);
template <>
__device__ __forceinline__ void unpack16<bf16>(const uint4& x, float (&f)[8]) {
  const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {  // element 2i is the low half (little endian)
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
template <>
__device__ __forceinline__ void unpack16<float>(const uint4& x, float (&f)[4]) {
  f[0] = __uint_as_float(x.x);
  f[1] = __uint_as_float(x.y);
  f[2] = __uint_as_float(x.z);
  f[3] = __uint_as_float(x.w);
}

// The query token of sequence b, or -1 when the sequence has no row in the batch (as v1).
__device__ __forceinline__ int decode_row(const AttentionArgs& a, int b) {
  const SeqRows r = seq_rows(a, b);
  const int t = r.q_start + r.sq - 1;
  return r.sq >= 1 && t >= 0 && t < a.num_tokens ? t : -1;
}

template <class T, int D, int GB>
__global__ void __launch_bounds__(kNT)
    decode_v2_kernel(AttentionArgs a, int part_len, int groups, int per_block, float* partials) {
  constexpr int VEC = 16 / int(sizeof(T));  // elements per 16-byte slice
  constexpr int TPK = D / VEC;              // lanes per key
  static_assert(D % VEC == 0 && TPK >= 1 && TPK <= 32 && 32 % TPK == 0, "row must split over lanes");
  constexpr int KPW = 32 / TPK;  // keys per warp row step
  constexpr int CH = kU * KPW;   // keys per warp chunk
  static_assert(CH <= 32, "one lane looks up one key of a chunk");

  __shared__ float acc_s[kNW][GB][D];  // each warp's un-normalized P.V, [warp][head][column]
  __shared__ float m_s[kNW][GB], l_s[kNW][GB];

  const int split = blockIdx.y, splits = gridDim.y, b = blockIdx.z;
  const int Gk = a.Hq / a.Hkv;  // query heads per KV head
  const int h = blockIdx.x / groups, g0 = (blockIdx.x % groups) * per_block;
  const int Gb = min(per_block, Gk - g0);  // this block's heads, <= GB
  const int hq0 = h * Gk + g0;             // its first query head
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int ks = lane / TPK, part = lane % TPK;  // key group within the row step, 16-byte slice
  const int t = decode_row(a, b);
  if (t < 0 || Gb <= 0) return;  // block-uniform: nothing to write (the reduce skips it too)
  const int ctx = a.context_lens[b];
  // A sliding window hides keys before ctx - window: splits below that see none (correct, but
  // the split-K partition is not yet re-based on the window: unmeasured on a GPU).
  const int pstart = split * part_len;
  const int start = max(pstart, a.window > 0 ? max(0, ctx - a.window) : 0);
  // The last split runs to ctx, so a max_seqlen_k below a real context length loses no keys.
  const int end = split == splits - 1 ? ctx : min(ctx, pstart + part_len);
  const int nkeys = end > start ? end - start : 0;
  const int nchunks = nkeys / CH + (nkeys % CH != 0);  // no overflow near INT_MAX keys

  // This lane's slice of the block's queries, pre-scaled (log2 domain); heads >= Gb are zeros.
  float q[GB][VEC];
  {
    const T* qrow = static_cast<const T*>(a.qkv) + int64_t(t) * (a.Hq + 2 * a.Hkv) * D +
                    int64_t(hq0) * D + part * VEC;
    const float sc = a.scale * kLog2e;
#pragma unroll
    for (int g = 0; g < GB; ++g)
#pragma unroll
      for (int e = 0; e < VEC; ++e) q[g][e] = g < Gb ? to_f(qrow[g * D + e]) * sc : 0.f;
  }

  const int32_t* table = a.block_tables + int64_t(b) * a.table_stride;
  const int64_t slot_stride = int64_t(a.Hkv) * D;  // elements between two slots' rows
  const T* kh = static_cast<const T*>(a.k_cache) + int64_t(h) * D + part * VEC;
  const T* vh = static_cast<const T*>(a.v_cache) + int64_t(h) * D + part * VEC;

  // Lane i < CH: the slot of key i of chunk c (-1: masked or outside the partition). Chunks
  // past the end give -1 everywhere, so the lookahead below reads nothing there.
  auto lookup = [&](int c) -> int64_t {
    const int64_t key = int64_t(start) + int64_t(c) * CH + lane;
    return lane < CH && key < end ? key_slot(a, table, int(key)) : -1;
  };
  // K/V slices of the chunk whose slots `sl` holds (from lookup): row step u, key group ks reads
  // key u * KPW + ks. Returns the bit mask of the row steps whose key is valid (the same for
  // every lane of a key group); masked keys load nothing and leave zeros.
  auto load = [&](int64_t sl, uint4 (&kb)[kU], uint4 (&vb)[kU]) -> unsigned {
    unsigned valid = 0;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t s = __shfl_sync(kFull, sl, u * KPW + ks);
      kb[u] = make_uint4(0, 0, 0, 0);
      vb[u] = make_uint4(0, 0, 0, 0);
      if (s >= 0) {
        kb[u] = __ldg(reinterpret_cast<const uint4*>(kh + s * slot_stride));
        vb[u] = __ldg(reinterpret_cast<const uint4*>(vh + s * slot_stride));
        valid |= 1u << u;
      }
    }
    return valid;
  };

  float m[GB], l[GB], acc[GB][VEC];
#pragma unroll
  for (int g = 0; g < GB; ++g) {
    m[g] = -INFINITY;
    l[g] = 0.f;
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[g][e] = 0.f;
  }

  // One chunk: scores, online softmax, P.V, from the K/V slices kb / vb (valid row steps vm).
  auto compute = [&](const uint4 (&kb)[kU], const uint4 (&vb)[kU], unsigned vm) {
    // 1. scores s[g][u]: slice dots, then a sum over the key's TPK lanes
    float s[GB][kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      float kf[VEC];
      unpack16<T>(kb[u], kf);
#pragma unroll
      for (int g = 0; g < GB; ++g) {
        float d = 0.f;
#pragma unroll
        for (int e = 0; e < VEC; ++e) d = fmaf(q[g][e], kf[e], d);
        s[g][u] = d;
      }
    }
#pragma unroll
    for (int off = TPK / 2; off > 0; off >>= 1)
#pragma unroll
      for (int g = 0; g < GB; ++g)
#pragma unroll
        for (int u = 0; u < kU; ++u) s[g][u] += __shfl_xor_sync(kFull, s[g][u], off);

    // 2. online softmax per head (every lane of a key group holds the same values)
    float p[GB][kU];
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      float mx = m[g];
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        s[g][u] = (vm >> u) & 1u ? s[g][u] : -INFINITY;
        mx = fmaxf(mx, s[g][u]);
      }
      const float mu = mx == -INFINITY ? 0.f : mx;  // no valid key yet: keep everything 0
      const float alpha = exp2f(m[g] - mu);
      float sum = 0.f;
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        p[g][u] = exp2f(s[g][u] - mu);
        sum += p[g][u];
      }
      l[g] = l[g] * alpha + sum;
      m[g] = mx;
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[g][e] *= alpha;
    }

    // 3. P.V on this lane's slice (masked keys: p = 0 and V = 0)
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      float vf[VEC];
      unpack16<T>(vb[u], vf);
#pragma unroll
      for (int g = 0; g < GB; ++g)
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[g][e] = fmaf(p[g][u], vf[e], acc[g][e]);
    }
  };

  // Ping-pong register buffers A / B, unrolled by hand so no copy waits on a load: each step
  // first issues the loads of chunk c + 4 into the free buffer (and the table lookups of
  // chunk c + 8), then computes chunk c, whose loads were issued one step earlier.
  int c = warp;  // warp-uniform: every lane runs the same iterations (full-mask shuffles)
  uint4 ka[kU], va[kU], kb[kU], vb[kU];
  unsigned vma = load(lookup(c), ka, va), vmb = 0;
  int64_t sl_next = lookup(c + kNW);
  while (c < nchunks) {
    vmb = load(sl_next, kb, vb);
    sl_next = lookup(c + 2 * kNW);
    compute(ka, va, vma);
    c += kNW;
    if (c >= nchunks) break;
    vma = load(sl_next, ka, va);
    sl_next = lookup(c + 2 * kNW);
    compute(kb, vb, vmb);
    c += kNW;
  }

  // Merge the warp's KPW key groups (lanes ks * TPK + part, same slice `part`): log-sum-exp
  // merge of (m, l, acc); symmetric, so every group ends with the warp's state.
#pragma unroll
  for (int off = TPK; off < 32; off <<= 1) {
#pragma unroll
    for (int g = 0; g < GB; ++g) {
      const float mo = __shfl_xor_sync(kFull, m[g], off);
      const float lo = __shfl_xor_sync(kFull, l[g], off);
      const float M = fmaxf(m[g], mo);
      const float fa = m[g] == -INFINITY ? 0.f : exp2f(m[g] - M);
      const float fb = mo == -INFINITY ? 0.f : exp2f(mo - M);
      l[g] = l[g] * fa + lo * fb;
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        const float ao = __shfl_xor_sync(kFull, acc[g][e], off);
        acc[g][e] = acc[g][e] * fa + ao * fb;
      }
      m[g] = M;
    }
  }
  if (ks == 0) {  // lanes 0 .. TPK - 1 hold the warp's D columns
#pragma unroll
    for (int g = 0; g < GB; ++g) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc_s[warp][g][part * VEC + e] = acc[g][e];
      if (part == 0) {
        m_s[warp][g] = m[g];
        l_s[warp][g] = l[g];
      }
    }
  }
  __syncthreads();

  // Merge the warps: thread e -> (head e / D, column e % D).
  for (int e = threadIdx.x; e < Gb * D; e += kNT) {
    const int g = e / D, d = e % D;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kNW; ++w) M = fmaxf(M, m_s[w][g]);
    float num = 0.f, den = 0.f;
#pragma unroll
    for (int w = 0; w < kNW; ++w) {
      const float mw = m_s[w][g];
      if (mw != -INFINITY) {  // a warp with no valid key adds nothing
        const float f = exp2f(mw - M);
        num = fmaf(acc_s[w][g][d], f, num);
        den = fmaf(l_s[w][g], f, den);
      }
    }
    const float o = den > 0.f ? num / den : 0.f;  // no visible key: zeros
    const int hq = hq0 + g;
    if (splits == 1) {
      static_cast<T*>(a.out)[int64_t(t) * a.Hq * D + int64_t(hq) * D + d] = from_f<T>(o);
    } else {
      const int64_t idx = (int64_t(b) * a.Hq + hq) * splits + split;
      partials[idx * (D + 2) + d] = o;
      if (d == 0) {
        partials[idx * (D + 2) + D] = M;  // -inf with l = 0: an empty partition
        partials[idx * (D + 2) + D + 1] = den;
      }
    }
  }
}

// Merges the splits of one (sequence, query head), v1's formula: weights l_s * 2^(m_s - M).
// Grid (B, Hq), blockDim = D.
template <class T>
__global__ void decode_v2_reduce_kernel(AttentionArgs a, int splits, const float* partials) {
  const int b = blockIdx.x, hq = blockIdx.y, d = threadIdx.x, D = a.D;
  const int t = decode_row(a, b);
  if (t < 0) return;  // the decode kernel skipped this sequence too
  const float* p = partials + (int64_t(b) * a.Hq + hq) * splits * (D + 2);
  float M = -INFINITY;
  for (int s = 0; s < splits; ++s) M = fmaxf(M, p[s * (D + 2) + D]);
  float num = 0.f, den = 0.f;
  if (M != -INFINITY) {
    for (int s = 0; s < splits; ++s) {
      const float l = p[s * (D + 2) + D + 1];
      if (l <= 0.f) continue;  // empty partition (its m is -inf)
      const float w = l * exp2f(p[s * (D + 2) + D] - M);
      num = fmaf(w, p[s * (D + 2) + d], num);
      den += w;
    }
  }
  static_cast<T*>(a.out)[int64_t(t) * a.Hq * D + int64_t(hq) * D + d] =
      from_f<T>(den > 0.f ? num / den : 0.f);
}

// Resident blocks per SM of one instantiation (occupancy API), once per device, then cached:
// the split count depends on it and must not change between a graph's capture and its replays.
template <class T, int D, int GB>
int blocks_per_sm() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices];  // static storage: zero-initialized (0 = unknown)
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  const bool cached = dev >= 0 && dev < kMaxDevices;
  if (cached) {
    const int n = cache[dev].load(std::memory_order_relaxed);
    if (n > 0) return n;
  }
  int n = 0;
  CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, decode_v2_kernel<T, D, GB>, kNT, 0));
  NV_CHECK(n >= 1, "decode attention v2 (head_dim ", D, ", ", GB,
           " heads per block) cannot be resident on this device");
  if (cached) cache[dev].store(n, std::memory_order_relaxed);
  return n;
}

// Calls f(TypeTag<T>, IntC<D>, IntC<GB>, heads) for the instantiation v2 runs (only when
// attention_decode_v2_supported(a)).
template <class F>
void dispatch_v2(const AttentionArgs& a, F&& f) {
  const DecodeV2Heads hd = decode_v2_heads(a.Hq / a.Hkv);
  auto by_heads = [&](auto tt, auto dd) {
    switch (hd.bound) {
      case 1: return f(tt, dd, IntC<1>{}, hd);
      case 2: return f(tt, dd, IntC<2>{}, hd);
      case 4: return f(tt, dd, IntC<4>{}, hd);
      default: return f(tt, dd, IntC<8>{}, hd);
    }
  };
  NV_CUDA_DISPATCH_ACT(a.act, TA, {
    if (a.D == 64) by_heads(TypeTag<TA>{}, IntC<64>{});
    else by_heads(TypeTag<TA>{}, IntC<128>{});
  });
}

template <class T, int D, int GB>
DecodeSplit split_for(const AttentionArgs& a, const DecodeV2Heads& hd, int num_sms) {
  const int64_t base = int64_t(a.num_seqs) * a.Hkv * hd.groups;
  return choose_decode_split(a.max_seqlen_k, base, int64_t(num_sms) * blocks_per_sm<T, D, GB>());
}

}  // namespace

bool attention_decode_v2_supported(const AttentionArgs& a) {
  return (a.act == DType::BF16 || a.act == DType::F32) && (a.D == 64 || a.D == 128) &&
         a.Hkv >= 1 && a.Hq >= a.Hkv && aligned16(a.k_cache) && aligned16(a.v_cache);
}

int64_t decode_v2_partials_floats(const AttentionArgs& a, int num_sms) {
  if (a.num_seqs == 0) return 0;
  if (!attention_decode_v2_supported(a)) return decode_partials_floats(a, num_sms);  // v1 runs
  int splits = 1;
  dispatch_v2(a, [&](auto tt, auto dd, auto gb, const DecodeV2Heads& hd) {
    using T = typename decltype(tt)::type;
    splits = split_for<T, decltype(dd)::value, decltype(gb)::value>(a, hd, num_sms).splits;
  });
  if (splits == 1) return 0;
  return int64_t(a.num_seqs) * a.Hq * splits * (a.D + 2);
}

void launch_attention_decode_v2(const AttentionArgs& a, float* partials, int num_sms,
                                cudaStream_t s) {
  if (a.num_seqs == 0 || a.num_tokens == 0) return;
  if (!attention_decode_v2_supported(a)) return launch_attention_decode(a, partials, num_sms, s);
  dispatch_v2(a, [&](auto tt, auto dd, auto gb, const DecodeV2Heads& hd) {
    using T = typename decltype(tt)::type;
    constexpr int D = decltype(dd)::value, GB = decltype(gb)::value;
    const DecodeSplit sp = split_for<T, D, GB>(a, hd, num_sms);
    NV_CHECK(a.num_seqs <= 65535 && int64_t(a.Hkv) * hd.groups <= 65535 && a.Hq <= 65535 &&
                 sp.splits <= 65535,
             "too many sequences/heads for one decode launch: ", a.num_seqs, " sequences, ",
             a.Hq, " query heads");
    NV_CHECK(sp.splits == 1 || partials != nullptr, "decode attention needs a partials buffer");
    const dim3 grid(unsigned(a.Hkv * hd.groups), unsigned(sp.splits), unsigned(a.num_seqs));
    decode_v2_kernel<T, D, GB>
        <<<grid, kNT, 0, s>>>(a, sp.part_len, hd.groups, hd.per_block, partials);
    CUDA_CHECK_LAUNCH();
    if (sp.splits > 1) {
      decode_v2_reduce_kernel<T>
          <<<dim3(unsigned(a.num_seqs), unsigned(a.Hq)), unsigned(D), 0, s>>>(a, sp.splits,
                                                                              partials);
      CUDA_CHECK_LAUNCH();
    }
  });
}

}  // namespace nanovllm::cuda
