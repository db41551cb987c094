#include "kernels/cuda/device_allocator.h"

#include "kernels/cuda/cuda_check.h"

namespace nanovllm::cuda {

void* DeviceAllocator::CudaMemory::alloc_segment(size_t bytes) {
  CUDA_CHECK(cudaSetDevice(device_));
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes);
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear the error state; BlockPool retries or reports
    return nullptr;
  }
  CUDA_CHECK(e);
  return p;
}

void DeviceAllocator::CudaMemory::free_segment(void* p, size_t) {
  (void)cudaSetDevice(device_);
  (void)cudaFree(p);  // synchronizes the device: queued kernels using p have finished
}

std::shared_ptr<void> DeviceAllocator::allocate(size_t bytes) {
  void* p = nullptr;
  int pool = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    pool = active_pool_;
    p = pool_.allocate(bytes, pool);
  }
  if (!p) {
    size_t fr = 0, tot = 0;
    (void)cudaMemGetInfo(&fr, &tot);
    (void)cudaGetLastError();
    NV_THROW("CUDA out of memory allocating ", bytes, " bytes (", bytes >> 20, " MiB, pool ", pool,
             ") on device ", device_, ": free ", fr >> 20, " MiB of ", tot >> 20,
             " MiB, this backend holds ", reserved_bytes() >> 20, " MiB (", current_bytes() >> 20,
             " MiB in use)");
  }
  auto self = shared_from_this();
  return std::shared_ptr<void>(p, [self](void* q) { self->release(q); });
}

void DeviceAllocator::release(void* p) {
  std::lock_guard<std::mutex> lock(mu_);
  pool_.free(p);
}

void DeviceAllocator::set_graph_pool(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  active_pool_ = on ? 1 : 0;
}

void DeviceAllocator::empty_cache() {
  std::lock_guard<std::mutex> lock(mu_);
  pool_.release_cached(0);
}

size_t DeviceAllocator::current_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_.current_bytes();
}
size_t DeviceAllocator::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_.peak_bytes();
}
size_t DeviceAllocator::reserved_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_.reserved_bytes();
}
size_t DeviceAllocator::graph_pool_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pool_.reserved_bytes(1);
}
void DeviceAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  pool_.reset_peak();
}

}  // namespace nanovllm::cuda
