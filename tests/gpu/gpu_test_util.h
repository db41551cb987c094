// Helpers for the GPU kernel tests: random host data (with the exact values the device sees,
// i.e. after rounding to the tensor dtype), NaN-poisoned outputs, and error metrics.
#pragma once
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"

namespace nanovllm::gputest {

// One backend for the whole test binary (creating one costs a cuBLASLt handle + workspace).
inline cuda::CudaBackend* backend() {
  static std::unique_ptr<cuda::CudaBackend> be = [] {
    return cuda_available() ? std::make_unique<cuda::CudaBackend>(0) : nullptr;
  }();
  return be.get();
}

#define NV_NEED_GPU()                                                                         \
  do {                                                                                        \
    if (!::nanovllm::gputest::backend()) GTEST_SKIP() << "no CUDA GPU (cc >= 8.0) available"; \
  } while (0)

inline std::mt19937& rng() {
  static std::mt19937 g(std::random_device{}());  // fresh inputs every run
  return g;
}

// A device tensor with uniform values in [lo, hi) and the f32 values it actually holds.
struct DevT {
  Tensor dev;
  std::vector<float> host;  // exact (rounded) values
};

inline DevT random_tensor(const Shape& shape, DType dt, float lo = -1.f, float hi = 1.f) {
  Tensor h = Tensor::empty(shape, dt);
  const int64_t n = h.numel();
  std::vector<float> v(n);
  std::uniform_real_distribution<float> u(lo, hi);
  for (auto& x : v) x = u(rng());
  convert_f32_to(v.data(), h.raw(), dt, n);
  convert_to_f32(h.raw(), dt, v.data(), n);
  return {backend()->to_device(h), v};
}

inline Tensor from_host_f32(const std::vector<float>& v, const Shape& shape, DType dt) {
  Tensor h = Tensor::empty(shape, dt);
  convert_f32_to(v.data(), h.raw(), dt, int64_t(v.size()));
  return backend()->to_device(h);
}

inline Tensor from_host_i32(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor h = Tensor::empty(shape, DType::I32);
  if (!v.empty()) std::memcpy(h.raw(), v.data(), v.size() * 4);
  return backend()->to_device(h);
}

// Uninitialised device tensor filled with NaN (0xFF bytes are NaN in f32, bf16 and f16).
inline Tensor poisoned(const Shape& shape, DType dt) {
  Tensor t = backend()->empty(shape, dt);
  if (t.nbytes()) {
    CUDA_CHECK(cudaMemsetAsync(t.raw(), 0xFF, t.nbytes(), backend()->stream()));
  }
  return t;
}

inline std::vector<float> download(const Tensor& t) {
  Tensor h = backend()->to_host(t);
  std::vector<float> v(h.numel());
  convert_to_f32(h.raw(), h.dtype(), v.data(), h.numel());
  return v;
}

inline std::vector<int32_t> download_i32(const Tensor& t) {
  Tensor h = backend()->to_host(t);
  std::vector<int32_t> v(h.numel());
  if (!v.empty()) std::memcpy(v.data(), h.raw(), v.size() * 4);
  return v;
}

// max |got - want| / max(max |want|, floor); NaN anywhere -> infinity.
inline double rel_err(const std::vector<float>& got, const std::vector<double>& want,
                      double floor = 1e-6) {
  EXPECT_EQ(got.size(), want.size());
  double num = 0, den = floor;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num = std::max(num, std::abs(double(got[i]) - want[i]));
    den = std::max(den, std::abs(want[i]));
  }
  return num / den;
}

inline double bf16r(double x) { return bf16_to_f32(f32_to_bf16(float(x))); }

}  // namespace nanovllm::gputest
