// The backend conformance table: one list of op cases, written once, run against every backend
// that is built (CPU: tests/unit/backend_conformance, `make test`; CUDA: tests/gpu, gpu_tests
// --gtest_filter='Cuda*'). Each case makes its inputs on the backend under test (random values
// rounded to the tensor's dtype, so the reference sees exactly what the backend sees), runs one
// op (or a short chain: store_kv then attention), and compares with an f64 reference, or expects
// the contract's error (same check, same message on every backend).
//
// Tolerances (max |got - ref| / max(max |ref|, 1e-6), see tolerance()):
//   activations F32 (CPU)  : 1e-5; linear with BF16 weights 5e-3 (oneDNN rounds activations to
//                            bf16 for M >= 16, as a bf16 model computes natively)
//   activations BF16 (CUDA): 1.6e-2 (bf16 output rounding 2^-8 plus bf16 intermediates: the
//                            tensor-core prefill rounds P to bf16)
//   exact (0)              : embedding, store_kv, gather_rows (copies), the KV cache after store
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace nanovllm::conformance {

enum class Tol { kElementwise, kLinearBf16Weights, kAttention };
double tolerance(DType act, Tol kind);

// A tensor on the backend under test and the values it holds, as f32 (exact after rounding).
struct Dev {
  Tensor t;
  std::vector<float> host;
};

// Inputs and outputs on one backend. Deterministic: the random stream is seeded by the case name.
class Harness {
 public:
  Harness(Backend& backend, const std::string& case_name);
  Backend& be;
  DType act() const { return be.act_dtype(); }
  std::mt19937& rng() { return rng_; }

  // Uniform values in [lo, hi) rounded to dt.
  Dev random(const Shape& shape, DType dt, float lo = -1.f, float hi = 1.f);
  // The given values rounded to dt.
  Dev from(const std::vector<float>& v, const Shape& shape, DType dt);
  Tensor i32(const std::vector<int32_t>& v, const Shape& shape);
  // Every byte 0xFF: NaN in F32 / BF16 / F16, so an element the op did not write shows.
  Tensor poisoned(const Shape& shape, DType dt);
  std::vector<float> download(const Tensor& t);
  // A host tensor on the backend's device (CPU: as is; CUDA: copied).
  Tensor upload(const Tensor& host);
  // A tensor claiming the other device (never dereferenced: for the device-mismatch errors).
  Tensor on_other_device(const Shape& shape, DType dt);

 private:
  std::mt19937 rng_;
  std::vector<Tensor> keep_;  // host storage behind on_other_device tensors
};

// max |got - want| / max(max |want|, 1e-6); NaN or inf in got -> infinity.
double rel_err(const std::vector<float>& got, const std::vector<double>& want);
// Rounds x to dt (F32 / BF16 / F16) and back.
double round_to(DType dt, double x);
// "bf16", "f32", ... for case names.
std::string dt_tag(DType dt);
// Expects fn() to throw nanovllm::Error whose message contains `needle`.
void expect_error(const std::function<void()>& fn, const std::string& needle);

struct Case {
  std::string name;  // [A-Za-z0-9_], unique: the gtest parameter name
  bool prefill_attention = false;  // CUDA also runs it with the tensor-core prefill kernel
  std::function<void(Harness&)> run;
  bool decode_attention = false;  // a decode-only batch: CUDA runs it with both decode kernels
};

// The whole table (cases_*.cc) for a backend whose activation dtype is `act` (it only decides
// which linear output dtypes are distinct cases).
std::vector<Case> all_cases(DType act);
void add_elementwise_cases(std::vector<Case>& out);
void add_linear_cases(std::vector<Case>& out, DType act);
void add_attention_cases(std::vector<Case>& out);
void add_error_cases(std::vector<Case>& out);
void add_moe_cases(std::vector<Case>& out);

// gtest: a case prints as its name.
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }
// gtest name generator for INSTANTIATE_TEST_SUITE_P.
struct CaseName {
  std::string operator()(const ::testing::TestParamInfo<Case>& info) const {
    return info.param.name;
  }
};

}  // namespace nanovllm::conformance
