// A minimal dense tensor: dtype, device, row-major contiguous shape, and shared ownership of
// its storage (heap, mmap'd file, or device memory). Views share the owner.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "util/check.h"
#include "util/dtype.h"

namespace nanovllm {

using Shape = std::vector<int64_t>;
std::string shape_str(const Shape& s);

class Tensor {
 public:
  Tensor() = default;
  // Host allocation, 64-byte aligned, uninitialised.
  static Tensor empty(const Shape& shape, DType dtype);
  static Tensor zeros(const Shape& shape, DType dtype);
  // Wraps existing memory; `owner` keeps it alive (may be null for borrowed memory).
  static Tensor wrap(void* data, const Shape& shape, DType dtype, Device device = Device::CPU,
                     std::shared_ptr<void> owner = nullptr);

  bool defined() const { return data_ != nullptr || (numel() == 0 && !shape_.empty()); }
  explicit operator bool() const { return data_ != nullptr; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int ndim() const { return int(shape_.size()); }
  // size(-1) is the last dimension.
  int64_t size(int i) const;
  int64_t numel() const;
  size_t nbytes() const { return size_t(numel()) * dtype_size(dtype_); }
  void* raw() const { return data_; }
  template <class T>
  T* data() const { return static_cast<T*>(data_); }
  const std::shared_ptr<void>& owner() const { return owner_; }

  // Same storage, new shape with equal numel (one dimension may be -1).
  Tensor view(const Shape& shape) const;
  // Rows [begin, end) along dimension 0.
  Tensor rows(int64_t begin, int64_t end) const;
  std::string str() const;  // "BF16[2, 3] cpu"

 private:
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::F32;
  Device device_ = Device::CPU;
  std::shared_ptr<void> owner_;
};

// Host-side conversion helpers (any float dtype -> f32 vector, f32 -> dtype).
std::vector<float> to_f32_vector(const Tensor& host);
void convert_f32_to(const float* src, void* dst, DType dtype, int64_t n);
void convert_to_f32(const void* src, DType dtype, float* dst, int64_t n);

}  // namespace nanovllm
