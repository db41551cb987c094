// KV-cache sizing (nano-vLLM's rule), header-only so it is unit-tested without a GPU.
#pragma once
#include <cstdint>

#include "util/check.h"

namespace nanovllm {

// Number of KV blocks that fit in `utilization` of the device once the model is loaded and a
// warm-up forward pass has run:
//   (total * utilization - used - peak + current) / block_bytes,  used = total - free.
// `peak` / `current` are the allocator's peak and current bytes (the warm-up's transient
// activations = peak - current must stay available). block_bytes = bytes of one KV block over
// all layers (2 * layers * block_size * Hkv * D * dtype_size). Throws when < 1 block fits.
inline int64_t compute_num_kv_blocks(int64_t total, int64_t free, int64_t peak, int64_t current,
                                     double utilization, int64_t block_bytes) {
  NV_CHECK(total > 0 && free >= 0 && free <= total, "bad device memory info: total=", total,
           " free=", free);
  NV_CHECK(utilization > 0.0 && utilization <= 1.0,
           "gpu memory utilization must be in (0, 1], got ", utilization);
  NV_CHECK(block_bytes > 0, "KV block size in bytes must be > 0, got ", block_bytes);
  NV_CHECK(peak >= current && current >= 0, "bad allocator stats: peak=", peak,
           " current=", current);
  const int64_t used = total - free;
  const double avail = double(total) * utilization - double(used) - double(peak) + double(current);
  const int64_t blocks = avail > 0 ? int64_t(avail / double(block_bytes)) : 0;
  NV_CHECK(blocks >= 1, "not enough GPU memory for the KV cache: ", avail / (1 << 20),
           " MiB available at utilization ", utilization, " (total ", total >> 20, " MiB, used ",
           used >> 20, " MiB, activation peak ", (peak - current) >> 20,
           " MiB) but one block needs ", block_bytes,
           " bytes; raise gpu_memory_utilization, "
           "lower max_num_batched_tokens or use a smaller model");
  return blocks;
}

}  // namespace nanovllm
