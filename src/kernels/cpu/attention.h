// CPU paged attention. KV cache layout per layer: [num_blocks * block_size, Hkv, D] (slot-major,
// the same layout the CUDA backend uses), slot = block_id * block_size + offset.
#pragma once
#include "kernels/backend.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

void store_kv(const Tensor& qkv, const Tensor& slot_mapping, Tensor& k_cache, Tensor& v_cache,
              const AttentionParams& p);
// Causal attention over block tables for a varlen batch (prefill, prefix-cached, chunked, decode).
void paged_attention(const Tensor& qkv, const Tensor& k_cache, const Tensor& v_cache,
                     const BatchTensors& batch, const AttentionParams& p, Tensor& out,
                     ThreadPool& pool);

}  // namespace nanovllm::cpu
