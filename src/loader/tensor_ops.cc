#include "loader/tensor_ops.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "util/check.h"

namespace nanovllm {

Tensor concat_rows(const std::vector<Tensor>& parts) {
  NV_CHECK(!parts.empty(), "concat_rows: no tensors");
  const Tensor& first = parts[0];
  NV_CHECK(first.ndim() >= 1, "concat_rows: scalar tensor ", first.str());
  int64_t rows = 0;
  for (const auto& p : parts) {
    NV_CHECK(p.device() == Device::CPU, "concat_rows needs host tensors, got ", p.str());
    NV_CHECK(p.dtype() == first.dtype() && p.ndim() == first.ndim(),
             "concat_rows: incompatible tensors ", first.str(), " and ", p.str());
    for (int d = 1; d < p.ndim(); ++d)
      NV_CHECK(p.shape()[size_t(d)] == first.shape()[size_t(d)],
               "concat_rows: trailing dimensions differ: ", first.str(), " vs ", p.str());
    rows += p.size(0);
  }
  Shape s = first.shape();
  s[0] = rows;
  Tensor out = Tensor::empty(s, first.dtype());
  char* dst = static_cast<char*>(out.raw());
  for (const auto& p : parts) {
    if (p.nbytes()) std::memcpy(dst, p.raw(), p.nbytes());
    dst += p.nbytes();
  }
  return out;
}

Tensor shard_dim(const Tensor& t, int dim, int rank, int world) {
  NV_CHECK(t.device() == Device::CPU, "shard_dim needs a host tensor, got ", t.str());
  NV_CHECK(world >= 1 && rank >= 0 && rank < world, "shard_dim: rank ", rank, " of world ",
           world);
  NV_CHECK(dim == 0 || dim == 1, "shard_dim: dim must be 0 or 1, got ", dim);
  NV_CHECK(dim < t.ndim(), "shard_dim: dim ", dim, " out of range for ", t.str());
  int64_t n = t.size(dim);
  NV_CHECK(n % world == 0, "shard_dim: dimension ", dim, " of ", t.str(),
           " is not divisible by world size ", world);
  int64_t part = n / world;
  if (dim == 0) {
    Tensor v = t.rows(rank * part, (rank + 1) * part);
    Tensor out = Tensor::empty(v.shape(), t.dtype());
    if (v.nbytes()) std::memcpy(out.raw(), v.raw(), v.nbytes());
    return out;
  }
  // dim 1: view t as [d0, d1, inner] and copy the [d0, part, inner] slab.
  int64_t d0 = t.size(0);
  int64_t inner = 1;
  for (int d = 2; d < t.ndim(); ++d) inner *= t.size(d);
  size_t esz = dtype_size(t.dtype());
  Shape s = t.shape();
  s[1] = part;
  Tensor out = Tensor::empty(s, t.dtype());
  size_t src_row = size_t(n * inner) * esz, dst_row = size_t(part * inner) * esz;
  const char* src = static_cast<const char*>(t.raw()) + size_t(rank * part * inner) * esz;
  char* dst = static_cast<char*>(out.raw());
  for (int64_t r = 0; r < d0; ++r) std::memcpy(dst + r * dst_row, src + r * src_row, dst_row);
  return out;
}

Tensor to_dtype(const Tensor& t, DType dtype) {
  NV_CHECK(t.device() == Device::CPU, "to_dtype needs a host tensor, got ", t.str());
  Tensor out = Tensor::empty(t.shape(), dtype);
  int64_t n = t.numel();
  if (n == 0) return out;
  if (t.dtype() == dtype) {
    std::memcpy(out.raw(), t.raw(), t.nbytes());
    return out;
  }
  auto is_float = [](DType d) { return d == DType::F32 || d == DType::BF16 || d == DType::F16; };
  if (is_float(t.dtype()) && is_float(dtype)) {
    // Through f32 in blocks so a large tensor needs no full-size temporary.
    constexpr int64_t kBlock = 1 << 14;
    std::vector<float> tmp(size_t(std::min<int64_t>(n, kBlock)));
    const char* src = static_cast<const char*>(t.raw());
    char* dst = static_cast<char*>(out.raw());
    for (int64_t i = 0; i < n; i += kBlock) {
      int64_t m = std::min(kBlock, n - i);
      convert_to_f32(src + size_t(i) * dtype_size(t.dtype()), t.dtype(), tmp.data(), m);
      convert_f32_to(tmp.data(), dst + size_t(i) * dtype_size(dtype), dtype, m);
    }
    return out;
  }
  if (t.dtype() == DType::I32 && dtype == DType::I64) {
    for (int64_t i = 0; i < n; ++i) out.data<int64_t>()[i] = t.data<int32_t>()[i];
    return out;
  }
  if (t.dtype() == DType::I64 && dtype == DType::I32) {
    for (int64_t i = 0; i < n; ++i) {
      int64_t v = t.data<int64_t>()[i];
      NV_CHECK(v >= INT32_MIN && v <= INT32_MAX, "to_dtype: value ", v, " does not fit I32");
      out.data<int32_t>()[i] = int32_t(v);
    }
    return out;
  }
  NV_THROW("to_dtype: unsupported conversion ", dtype_name(t.dtype()), " -> ", dtype_name(dtype));
}

}  // namespace nanovllm
