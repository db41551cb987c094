// Copies weights out of the mmap'd checkpoint into 2 MiB-page-backed anonymous memory.
//
// Why: batch-1 decode streams every weight byte once per token, so it runs at the memory's
// read bandwidth only if the hardware prefetcher and TLB keep up. Page-cache pages are 4 KiB
// (a TLB miss every 64 cache lines, and physically scattered); transparent huge pages are not.
// Measured on the dev CPU (docs/perf.md): the same GEMV streams 23 GB/s from 4 KiB pages and
// 26-30 GB/s from huge pages.
#pragma once
#include <cstddef>
#include <memory>
#include <vector>

#include "util/tensor.h"
#include "util/thread_pool.h"

namespace nanovllm::cpu {

class WeightArena {
 public:
  // Tensors smaller than this stay where they are (norm weights, biases: not worth a page).
  static constexpr size_t kMinBytes = size_t(64) << 10;
  // enabled = false (BackendOptions::cpu_weight_copy): copy() returns its input, alloc() the heap.
  explicit WeightArena(bool enabled = true) : enabled_(enabled) {}

  // A copy of `host` in huge-page memory (same shape and dtype), or `host` itself when it is
  // small, when the arena is disabled or when mmap fails.
  Tensor copy(const Tensor& host, ThreadPool& pool);
  // Uninitialised memory for a weight made at load (quantized blobs): huge pages when it is
  // large and copies are enabled, else the heap.
  Tensor alloc(const Shape& shape, DType dtype);
  size_t bytes_copied() const { return copied_; }

  struct Chunk;  // one 2 MiB-aligned anonymous mapping (also used by huge_page_empty)

 private:
  char* carve(size_t n);           // n bytes in the current (or a new) chunk; null on failure
  std::shared_ptr<Chunk> chunk_;  // the chunk being filled
  size_t used_ = 0;               // bytes used in chunk_
  size_t copied_ = 0;
  bool enabled_;
};

// Uninitialised memory of its own 2 MiB-aligned, huge-page-advised mapping for a large tensor
// (>= kHugeEmptyMinBytes), else Tensor::empty: the KV cache (Backend::empty_kv_cache). Why:
// decode attention reads a key's rows at a slot stride of Hkv * D elements (2-4 KiB); from
// 4 KiB pages nearly every slot was a TLB miss.
constexpr size_t kHugeEmptyMinBytes = size_t(8) << 20;
Tensor huge_page_empty(const Shape& shape, DType dtype);

}  // namespace nanovllm::cpu
