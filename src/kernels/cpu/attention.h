// CPU paged attention. KV cache layout per layer: [num_blocks * block_size, Hkv, D] (slot-major,
// the same layout the CUDA backend uses), slot = block_id * block_size + offset; F32, BF16, or
// int8 with rows of D + 4 (the values and their f32 scale, kernels/kv_cache_int8.h).
#pragma once
#include "kernels/backend.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

// int8: each (token, KV head) row quantized symmetrically with its own scale (kv_store.cc).
void store_kv(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache,
              const AttentionParams& p, ThreadPool& pool);
// Causal attention over block tables for a varlen batch (prefill, prefix-cached, chunked, decode).
void paged_attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                     const BatchTensors& batch, const AttentionParams& p, Tensor& out,
                     ThreadPool& pool);

}  // namespace nanovllm::cpu
