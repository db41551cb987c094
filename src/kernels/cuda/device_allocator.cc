#include "kernels/cuda/device_allocator.h"

#include "kernels/cuda/cuda_check.h"

namespace nanovllm::cuda {

size_t DeviceAllocator::round_size(size_t bytes) {
  if (bytes == 0) bytes = 1;
  // 512 B steps below 1 MiB, 128 KiB steps above (weights are allocated one tensor at a time,
  // so coarser steps would waste memory per tensor).
  const size_t small = 512, big = size_t(128) << 10;
  if (bytes < (size_t(1) << 20)) return (bytes + small - 1) / small * small;
  return (bytes + big - 1) / big * big;
}

DeviceAllocator::~DeviceAllocator() {
  // Only cached blocks can be left: live tensors keep the allocator alive through their deleter.
  empty_cache();
  for (auto& kv : free_[1]) (void)cudaFree(kv.second);
}

std::shared_ptr<void> DeviceAllocator::allocate(size_t bytes) {
  const size_t size = round_size(bytes);
  void* p = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Best fit among cached blocks, but never waste more than 2x (a big block stays for big use).
    auto& fl = free_[pool_];
    auto it = fl.lower_bound(size);
    if (it != fl.end() && it->first <= 2 * size) {
      p = it->second;
      const size_t got = it->first;
      fl.erase(it);
      current_ += got;
      if (current_ > peak_) peak_ = current_;
      auto self = shared_from_this();
      const int pool = pool_;
      return std::shared_ptr<void>(p, [self, got, pool](void* q) { self->release(q, got, pool); });
    }
  }
  CUDA_CHECK(cudaSetDevice(device_));
  cudaError_t e = cudaMalloc(&p, size);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the sticky-free error state, drop the cache, retry once
    empty_cache();
    e = cudaMalloc(&p, size);
  }
  if (e != cudaSuccess) {
    (void)cudaGetLastError();
    size_t fr = 0, tot = 0;
    (void)cudaMemGetInfo(&fr, &tot);
    NV_THROW("CUDA out of memory allocating ", size, " bytes (", size >> 20, " MiB) on device ",
             device_, ": ", cudaGetErrorString(e), "; free ", fr >> 20, " MiB of ", tot >> 20,
             " MiB, this backend holds ", reserved_bytes() >> 20, " MiB");
  }
  int pool;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reserved_ += size;
    current_ += size;
    if (current_ > peak_) peak_ = current_;
    pool = pool_;
  }
  auto self = shared_from_this();
  return std::shared_ptr<void>(p, [self, size, pool](void* q) { self->release(q, size, pool); });
}

void DeviceAllocator::release(void* p, size_t size, int pool) {
  std::lock_guard<std::mutex> lock(mu_);
  current_ -= size;
  free_[pool].emplace(size, p);
}

void DeviceAllocator::set_graph_pool(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  pool_ = on ? 1 : 0;
}

void DeviceAllocator::empty_cache() {
  // Only pool 0: pool 1's free blocks are addresses baked into captured graphs.
  std::multimap<size_t, void*> blocks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    blocks.swap(free_[0]);
    for (auto& kv : blocks) reserved_ -= kv.first;
  }
  if (blocks.empty()) return;
  // cudaFree synchronizes the device, so blocks still used by queued kernels are safe to free.
  for (auto& kv : blocks) (void)cudaFree(kv.second);
}

size_t DeviceAllocator::current_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}
size_t DeviceAllocator::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}
size_t DeviceAllocator::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}
void DeviceAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  peak_ = current_;
}

}  // namespace nanovllm::cuda
