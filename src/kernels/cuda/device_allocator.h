// A caching device allocator: freed blocks are kept and reused, so the per-step activations cost
// no cudaMalloc/cudaFree (which synchronize the device and are not allowed inside CUDA-graph
// capture). The bookkeeping (segments, best fit, splitting large free blocks, merging adjacent
// free blocks, the eager and graph pools) is BlockPool (block_pool.h, host-only and unit-tested
// on the CPU); this class adds cudaMalloc/cudaFree, a mutex and shared_ptr ownership.
// Memory goes back to the driver only on empty_cache(), on an out-of-memory retry, or at
// destruction.
// Stream-ordering invariant: the backend uses ONE stream, so a block freed on the host while
// kernels using it are still queued is safe to hand out again: its next user is queued after.
// cudaFree synchronizes the device, so releasing a segment never frees memory still in use.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "kernels/cuda/block_pool.h"

namespace nanovllm::cuda {

class DeviceAllocator : public std::enable_shared_from_this<DeviceAllocator> {
 public:
  explicit DeviceAllocator(int device) : raw_(device), pool_(raw_), device_(device) {}
  ~DeviceAllocator() = default;  // BlockPool frees every segment (no tensor is alive then)
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // Returns a block of >= bytes; the shared_ptr's deleter gives it back to this allocator
  // (which the deleter keeps alive). Throws a clear out-of-memory error.
  std::shared_ptr<void> allocate(size_t bytes);
  // Gives pool 0's wholly free segments back to the driver (synchronizes the device).
  void empty_cache();

  static size_t round_size(size_t bytes) { return BlockPool::round_size(bytes); }
  size_t current_bytes() const;   // in live blocks
  size_t peak_bytes() const;      // max of current_bytes since the last reset_peak()
  size_t reserved_bytes() const;  // cudaMalloc'ed (live + cached), both pools
  size_t graph_pool_bytes() const;  // reserved by pool 1 (CUDA-graph scratch and outputs)
  void reset_peak();

  // Pool 0 serves ordinary allocations; pool 1 serves CUDA-graph capture. Blocks return to
  // the pool they came from, so memory a captured graph uses as scratch is never handed to
  // an eager tensor that could outlive a replay (graphs share pool 1 among themselves: their
  // replays are serialized on the one stream).
  void set_graph_pool(bool on);

 private:
  class CudaMemory : public RawMemory {
   public:
    explicit CudaMemory(int device) : device_(device) {}
    void* alloc_segment(size_t bytes) override;
    void free_segment(void* p, size_t bytes) override;

   private:
    int device_;
  };
  void release(void* p);

  CudaMemory raw_;
  mutable std::mutex mu_;
  BlockPool pool_;
  int device_;
  int active_pool_ = 0;
};

}  // namespace nanovllm::cuda
