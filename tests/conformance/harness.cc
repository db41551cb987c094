#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "conformance.h"

namespace nanovllm::conformance {

double tolerance(DType act, Tol kind) {
  if (act == DType::F32) return kind == Tol::kLinearBf16Weights ? 5e-3 : 1e-5;
  return 1.6e-2;  // BF16 activations
}

namespace {
uint32_t fnv1a(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}
}  // namespace

Harness::Harness(Backend& backend, const std::string& case_name)
    : be(backend), rng_(fnv1a(case_name)) {}

Tensor Harness::upload(const Tensor& host) {
  return be.device() == Device::CPU ? host : be.to_device(host);
}

Dev Harness::from(const std::vector<float>& v, const Shape& shape, DType dt) {
  Tensor h = Tensor::empty(shape, dt);
  NV_CHECK_EQ(int64_t(v.size()), h.numel(), "conformance: values for ", h.str());
  Dev d;
  d.host.resize(v.size());
  if (!v.empty()) {
    convert_f32_to(v.data(), h.raw(), dt, h.numel());
    convert_to_f32(h.raw(), dt, d.host.data(), h.numel());
  }
  d.t = upload(h);
  return d;
}

Dev Harness::random(const Shape& shape, DType dt, float lo, float hi) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<float> v(static_cast<size_t>(n));
  std::uniform_real_distribution<float> u(lo, hi);
  for (auto& x : v) x = u(rng_);
  return from(v, shape, dt);
}

Tensor Harness::i32(const std::vector<int32_t>& v, const Shape& shape) {
  Tensor h = Tensor::empty(shape, DType::I32);
  NV_CHECK_EQ(int64_t(v.size()), h.numel(), "conformance: values for ", h.str());
  if (!v.empty()) std::memcpy(h.raw(), v.data(), v.size() * 4);
  return upload(h);
}

Tensor Harness::poisoned(const Shape& shape, DType dt) {
  Tensor h = Tensor::empty(shape, dt);
  if (h.nbytes()) std::memset(h.raw(), 0xFF, h.nbytes());
  return upload(h);
}

std::vector<float> Harness::download(const Tensor& t) {
  Tensor h = be.to_host(t);
  std::vector<float> v(size_t(h.numel()));
  if (h.dtype() == DType::I32) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = float(h.data<int32_t>()[i]);
  } else if (!v.empty()) {
    convert_to_f32(h.raw(), h.dtype(), v.data(), h.numel());
  }
  return v;
}

Tensor Harness::on_other_device(const Shape& shape, DType dt) {
  Tensor h = Tensor::zeros(shape, dt);
  keep_.push_back(h);
  const Device other = be.device() == Device::CPU ? Device::CUDA : Device::CPU;
  return Tensor::wrap(h.raw(), shape, dt, other, h.owner());
}

double rel_err(const std::vector<float>& got, const std::vector<double>& want) {
  EXPECT_EQ(got.size(), want.size());
  double num = 0, den = 1e-6;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return std::numeric_limits<double>::infinity();
    num = std::max(num, std::abs(double(got[i]) - want[i]));
    den = std::max(den, std::abs(want[i]));
  }
  return num / den;
}

double round_to(DType dt, double x) {
  float f = float(x), back = 0.f;
  uint16_t h = 0;
  switch (dt) {
    case DType::F32:
      return f;
    case DType::BF16:
      h = f32_to_bf16(f);
      convert_to_f32(&h, dt, &back, 1);
      return back;
    case DType::F16:
      h = f32_to_f16(f);
      convert_to_f32(&h, dt, &back, 1);
      return back;
    default:
      return x;
  }
}

std::string dt_tag(DType dt) {
  std::string s = dtype_name(dt);
  for (auto& c : s) c = char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

void expect_error(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an error containing '" << needle << "', got none";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "error message '" << e.what() << "' lacks '" << needle << "'";
  }
}

std::vector<Case> all_cases(DType act) {
  std::vector<Case> out;
  add_elementwise_cases(out);
  add_linear_cases(out, act);
  add_attention_cases(out);
  add_error_cases(out);
  add_moe_cases(out);
  return out;
}

}  // namespace nanovllm::conformance
