// Helpers shared by the CPU kernel tests: random tensors, NaN-poisoned outputs, error norms.
#pragma once
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "util/tensor.h"

namespace nanovllm::test {

inline std::mt19937& rng() {
  static std::mt19937 r(12345);
  return r;
}

inline Tensor rand_tensor(const Shape& s, DType dt, float scale = 1.f) {
  Tensor t = Tensor::empty(s, dt);
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> v(size_t(t.numel()));
  for (auto& x : v) x = nd(rng());
  convert_f32_to(v.data(), t.raw(), dt, t.numel());
  return t;
}

// out = x @ w^T in f64 (x [M, K], w [N, K] row-major as f32 vectors) -> [M, N].
inline std::vector<double> naive_linear(const std::vector<float>& xf, const std::vector<float>& wf,
                                        int M, int N, int K) {
  std::vector<double> ref(size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += double(xf[size_t(m) * K + k]) * wf[size_t(n) * K + k];
      ref[size_t(m) * N + n] = s;
    }
  return ref;
}

inline void poison(Tensor& t) {
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = std::numeric_limits<float>::quiet_NaN();
}

// What the quantized-linear kernels do to a row of activations: x ~ s * round(x / s), s = max|x| / 127.
inline std::vector<double> int8_quantized_row(const float* x, int64_t K) {
  float amax = 0.f;
  for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::abs(x[k]));
  const float s = amax / 127.f;
  std::vector<double> q(static_cast<size_t>(K), 0.0);
  if (s == 0.f) return q;
  for (int64_t k = 0; k < K; ++k)
    q[size_t(k)] = double(s) * std::clamp(std::nearbyint(x[k] * (1.f / s)), -127.f, 127.f);
  return q;
}

// What the quantized-linear kernels compute in exact arithmetic: each row of x [M, K] after
// int8_quantized_row, times the weight w(n, k) for n < N, in f64 -> [M, N].
template <class Weight>
std::vector<double> int8_activation_reference(const float* x, int64_t M, int64_t K, int64_t N, Weight w) {
  std::vector<double> ref(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m) {
    const std::vector<double> xq = int8_quantized_row(x + m * K, K);
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) acc += xq[size_t(k)] * double(w(n, k));
      ref[size_t(m * N + n)] = acc;
    }
  }
  return ref;
}

// max |ref - got| / max |ref| (infinite when got has a NaN).
inline double max_rel_err(const std::vector<double>& ref, const float* got) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    num = std::max(num, std::abs(ref[i] - got[i]));
    den = std::max(den, std::abs(ref[i]));
  }
  return num / den;
}

}  // namespace nanovllm::test
