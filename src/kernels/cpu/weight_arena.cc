#include "kernels/cpu/weight_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

namespace nanovllm::cpu {

namespace {
constexpr size_t kHugePage = size_t(2) << 20;
constexpr size_t kChunkBytes = size_t(256) << 20;  // tensors are packed into 256 MiB chunks
}  // namespace

// One anonymous mapping, 2 MiB aligned, advised for transparent huge pages.
struct WeightArena::Chunk {
  void* map = nullptr;
  size_t map_bytes = 0;
  char* base = nullptr;
  size_t bytes = 0;
  ~Chunk() {
    if (map) munmap(map, map_bytes);
  }
  static std::shared_ptr<Chunk> create(size_t bytes) {
    bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
    auto c = std::make_shared<Chunk>();
    c->map_bytes = bytes + kHugePage;  // slack to align the base
    void* p = mmap(nullptr, c->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    c->map = p;
    uintptr_t a = (reinterpret_cast<uintptr_t>(p) + kHugePage - 1) & ~uintptr_t(kHugePage - 1);
    c->base = reinterpret_cast<char*>(a);
    c->bytes = bytes;
    madvise(c->base, bytes, MADV_HUGEPAGE);  // best effort: a kernel without THP still works
    return c;
  }
};

char* WeightArena::carve(size_t n) {
  const size_t need = (n + 63) / 64 * 64;
  if (!chunk_ || used_ + need > chunk_->bytes) {
    auto c = Chunk::create(std::max(need, kChunkBytes));
    if (!c) return nullptr;  // out of address space
    chunk_ = c;
    used_ = 0;
  }
  char* dst = chunk_->base + used_;
  used_ += need;
  return dst;
}

Tensor huge_page_empty(const Shape& shape, DType dtype) {
  const size_t n = Tensor::wrap(nullptr, shape, dtype).nbytes();
  if (n < kHugeEmptyMinBytes) return Tensor::empty(shape, dtype);
  auto c = WeightArena::Chunk::create(n);
  if (!c) return Tensor::empty(shape, dtype);  // no address space for the slack: the heap
  return Tensor::wrap(c->base, shape, dtype, Device::CPU, c);
}

Tensor WeightArena::alloc(const Shape& shape, DType dtype) {
  Tensor probe = Tensor::wrap(nullptr, shape, dtype);
  const size_t n = probe.nbytes();
  char* dst = n >= kMinBytes && enabled_ ? carve(n) : nullptr;
  if (!dst) return Tensor::empty(shape, dtype);
  copied_ += n;
  return Tensor::wrap(dst, shape, dtype, Device::CPU, chunk_);
}

Tensor WeightArena::copy(const Tensor& host, ThreadPool& pool) {
  const size_t n = host.nbytes();
  if (n < kMinBytes || host.device() != Device::CPU || !enabled_) return host;
  char* dst = carve(n);
  if (!dst) return host;  // keep the zero-copy mapping
  const char* src = static_cast<const char*>(host.raw());
  pool.parallel_for(int64_t(n), [&](int64_t a, int64_t b) {
    std::memcpy(dst + a, src + a, size_t(b - a));
  }, int64_t(1) << 20);
  copied_ += n;
  return Tensor::wrap(dst, host.shape(), host.dtype(), Device::CPU, chunk_);
}

}  // namespace nanovllm::cpu
