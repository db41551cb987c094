#include "util/tensor.h"

#include <cstdlib>
#include <cstring>
#include <sstream>

namespace nanovllm {

std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  os << "]";
  return os.str();
}

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (auto d : shape_) n *= d;
  return n;
}

int64_t Tensor::size(int i) const {
  int n = ndim();
  if (i < 0) i += n;
  NV_CHECK(i >= 0 && i < n, "dimension ", i, " out of range for ", str());
  return shape_[size_t(i)];
}

Tensor Tensor::empty(const Shape& shape, DType dtype) {
  Tensor t;
  t.shape_ = shape;
  t.dtype_ = dtype;
  for (auto d : shape) NV_CHECK_GE(d, 0, "negative dimension in ", shape_str(shape));
  size_t bytes = t.nbytes();
  size_t alloc = (bytes + 63) / 64 * 64;
  if (alloc == 0) alloc = 64;
  void* p = std::aligned_alloc(64, alloc);
  NV_CHECK(p != nullptr, "out of host memory allocating ", alloc, " bytes");
  t.data_ = p;
  t.owner_ = std::shared_ptr<void>(p, [](void* q) { std::free(q); });
  return t;
}

Tensor Tensor::zeros(const Shape& shape, DType dtype) {
  Tensor t = empty(shape, dtype);
  std::memset(t.data_, 0, t.nbytes());
  return t;
}

Tensor Tensor::wrap(void* data, const Shape& shape, DType dtype, Device device,
                    std::shared_ptr<void> owner) {
  Tensor t;
  t.data_ = data;
  t.shape_ = shape;
  t.dtype_ = dtype;
  t.device_ = device;
  t.owner_ = std::move(owner);
  return t;
}

Tensor Tensor::view(const Shape& shape) const {
  Shape s = shape;
  int64_t known = 1;
  int infer = -1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      NV_CHECK(infer < 0, "view: more than one -1 in ", shape_str(shape));
      infer = int(i);
    } else {
      known *= s[i];
    }
  }
  if (infer >= 0) {
    NV_CHECK(known > 0 && numel() % known == 0, "view ", shape_str(shape), " of ", str());
    s[size_t(infer)] = numel() / known;
  }
  Tensor t = *this;
  t.shape_ = s;
  NV_CHECK_EQ(t.numel(), numel(), "view ", shape_str(shape), " of ", str());
  return t;
}

Tensor Tensor::rows(int64_t begin, int64_t end) const {
  NV_CHECK(ndim() >= 1 && begin >= 0 && begin <= end && end <= shape_[0], "rows(", begin, ", ",
           end, ") of ", str());
  int64_t row = shape_[0] ? numel() / shape_[0] : 0;
  Tensor t = *this;
  t.shape_[0] = end - begin;
  t.data_ = static_cast<char*>(data_) + size_t(begin * row) * dtype_size(dtype_);
  return t;
}

std::string Tensor::str() const {
  return std::string(dtype_name(dtype_)) + shape_str(shape_) + " " + device_name(device_);
}

void convert_to_f32(const void* src, DType dtype, float* dst, int64_t n) {
  switch (dtype) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::BF16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(s[i]);
      return;
    }
    case DType::F16: {
      auto* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(s[i]);
      return;
    }
    default: NV_THROW("convert_to_f32: not a float dtype: ", dtype_name(dtype));
  }
}

void convert_f32_to(const float* src, void* dst, DType dtype, int64_t n) {
  switch (dtype) {
    case DType::F32: std::memcpy(dst, src, size_t(n) * 4); return;
    case DType::BF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      return;
    }
    case DType::F16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      return;
    }
    default: NV_THROW("convert_f32_to: not a float dtype: ", dtype_name(dtype));
  }
}

std::vector<float> to_f32_vector(const Tensor& t) {
  NV_CHECK(t.device() == Device::CPU, "to_f32_vector needs a host tensor, got ", t.str());
  std::vector<float> v(size_t(t.numel()));
  convert_to_f32(t.raw(), t.dtype(), v.data(), t.numel());
  return v;
}

}  // namespace nanovllm
