// A caching device allocator: freed blocks go to per-size free lists and are reused, so the
// per-step activations cost no cudaMalloc/cudaFree (which synchronize the device and are not
// allowed inside CUDA-graph capture). Sizes are rounded to 512 B below 1 MiB and to 128 KiB
// above. Blocks are only returned to the driver by empty_cache() or destruction.
// Stream-ordering invariant: the backend uses ONE stream, so a block freed on the host while
// kernels using it are still queued is safe to hand out again: its next user is queued after.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace nanovllm::cuda {

class DeviceAllocator : public std::enable_shared_from_this<DeviceAllocator> {
 public:
  explicit DeviceAllocator(int device) : device_(device) {}
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // Returns a block of >= bytes; the shared_ptr's deleter gives it back to this allocator
  // (which the deleter keeps alive).
  std::shared_ptr<void> allocate(size_t bytes);
  void empty_cache();

  static size_t round_size(size_t bytes);
  size_t current_bytes() const;   // handed out now
  size_t peak_bytes() const;      // max of current_bytes since the last reset_peak()
  size_t reserved_bytes() const;  // cudaMalloc'ed (handed out + cached)
  void reset_peak();

  // Pool 0 serves ordinary allocations; pool 1 serves CUDA-graph capture. Blocks return to
  // the pool they came from, so memory a captured graph uses as scratch is never handed to
  // an eager tensor that could outlive a replay (graphs share pool 1 among themselves: their
  // replays are serialized on the one stream).
  void set_graph_pool(bool on);

 private:
  void release(void* p, size_t size, int pool);
  int device_;
  mutable std::mutex mu_;
  int pool_ = 0;
  std::multimap<size_t, void*> free_[2];  // per pool: size -> block
  size_t current_ = 0, peak_ = 0, reserved_ = 0;
};

}  // namespace nanovllm::cuda
