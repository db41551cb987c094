// Shared by the attention kernels: the block-table lookup with the contract's masking rule,
// a sequence's query rows clipped to the batch, and the head_dim dispatch (vectorized 64 / 128
// instantiations, generic ones sized by a compile-time bound). Only included from .cu files.
#pragma once
#include <type_traits>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/cuda/kernels.h"

namespace nanovllm::cuda {

constexpr float kLog2e = 1.4426950408889634f;

// Slot of key `key` through one sequence's block table, or -1 when its block is missing:
// block index past the table's width, entry < 0, or a slot past the cache (masked key).
__device__ __forceinline__ int64_t key_slot(const AttentionArgs& a, const int32_t* table,
                                            int key) {
  const int bi = key / a.block_size;
  if (bi >= a.table_stride) return -1;
  const int blk = table[bi];
  const int64_t slot = int64_t(blk) * a.block_size + key % a.block_size;
  return blk >= 0 && slot < a.num_slots ? slot : -1;
}

// Sequence b's query tokens: q_start = cu_seqlens_q[b], sq = its query count (negative when
// cu_seqlens_q decreases: no rows), and the queries [qlo, qhi) whose token row lies in
// [0, num_tokens) (all of them in a valid batch).
struct SeqRows {
  int q_start, sq, qlo, qhi;
};
__device__ __forceinline__ SeqRows seq_rows(const AttentionArgs& a, int b) {
  SeqRows r;
  r.q_start = a.cu_seqlens_q[b];
  r.sq = a.cu_seqlens_q[b + 1] - r.q_start;
  r.qlo = max(0, -r.q_start);
  r.qhi = min(r.sq, a.num_tokens - r.q_start);
  return r;
}

template <int N>
using IntC = std::integral_constant<int, N>;

// Calls f(IntC<DM>{}, std::bool_constant<EXACT>{}): EXACT means head_dim == DM, 16-byte
// vector loads (D = 64 or 128 with `vec_ok`: the tensors are 16-byte aligned); otherwise DM is
// the smallest of 32 / 64 / 128 / 256 holding D and the kernel reads element by element.
template <class F>
void dispatch_head_dim(int D, bool vec_ok, F&& f) {
  if (vec_ok && D == 64) return f(IntC<64>{}, std::true_type{});
  if (vec_ok && D == 128) return f(IntC<128>{}, std::true_type{});
  if (D <= 32) return f(IntC<32>{}, std::false_type{});
  if (D <= 64) return f(IntC<64>{}, std::false_type{});
  if (D <= 128) return f(IntC<128>{}, std::false_type{});
  if (D <= 256) return f(IntC<256>{}, std::false_type{});
  NV_THROW("CUDA attention supports head_dim up to 256, got ", D);
}

}  // namespace nanovllm::cuda
