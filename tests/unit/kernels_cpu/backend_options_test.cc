// BackendOptions reach the backend that was made with them and no other: two CPU backends with
// different options, used alternately in one process, each behave per their own options (no
// process-wide switch left, such as the old set_linear_path global).
#include <gtest/gtest.h>

#include "kernels/backend_factory.h"
#include "kernels/cpu/onednn_gemm.h"
#include "kernel_test_util.h"
#include "util/cpu_features.h"

using namespace nanovllm;

namespace {


}  // namespace

// Different linear paths: oneDNN rounds activations to bf16, the streaming kernel is exact f32.
TEST(BackendOptions, TwoBackendsKeepTheirOwnLinearPath) {
  const int M = 40, K = 96, N = 50;
  if (!cpu::onednn_bf16_supported(N, K)) GTEST_SKIP() << "oneDNN absent or rejects the shape/ISA";
  BackendOptions stream_opts, onednn_opts;
  stream_opts.linear_path = LinearPath::kStreaming;
  onednn_opts.linear_path = LinearPath::kOnednn;
  auto stream_be = make_cpu_backend(2, stream_opts);
  auto onednn_be = make_cpu_backend(3, onednn_opts);
  Tensor x = test::rand_tensor({M, K}, DType::F32);
  Tensor w = test::rand_tensor({N, K}, DType::BF16, 0.1f);
  auto xf = to_f32_vector(x), wf = to_f32_vector(w);
  std::vector<float> xr = xf;
  for (auto& v : xr) v = bf16_to_f32(f32_to_bf16(v));
  const auto exact = test::naive_linear(xf, wf, M, N, K), rounded = test::naive_linear(xr, wf, M, N, K);
  for (int round = 0; round < 2; ++round) {  // alternate: a global switch would leak across
    Tensor a = Tensor::empty({M, N}, DType::F32), b = Tensor::empty({M, N}, DType::F32);
    test::poison(a);
    test::poison(b);
    stream_be->linear(x, w, nullptr, a);
    onednn_be->linear(x, w, nullptr, b);
    EXPECT_LT(test::max_rel_err(exact, a.data<float>()), 1e-5) << "round " << round;
    EXPECT_LT(test::max_rel_err(rounded, b.data<float>()), 1e-5) << "round " << round;
    // The two paths really differ on this input (else the test could not tell them apart).
    EXPECT_GT(test::max_rel_err(exact, b.data<float>()), 1e-4) << "round " << round;
  }
  EXPECT_EQ(stream_be->num_threads(), 2);
  EXPECT_EQ(onednn_be->num_threads(), 3);
}

// cpu_weight_copy: one backend copies a large weight into its arena, the other keeps it in place.
TEST(BackendOptions, TwoBackendsKeepTheirOwnWeightCopy) {
  BackendOptions copy_opts, nocopy_opts;
  nocopy_opts.cpu_weight_copy = false;
  auto copy_be = make_cpu_backend(1, copy_opts);
  auto nocopy_be = make_cpu_backend(1, nocopy_opts);
  Tensor w = test::rand_tensor({256, 256}, DType::F32);  // 256 KiB >= the arena's minimum
  for (int round = 0; round < 2; ++round) {
    Tensor kept = nocopy_be->to_device(w);
    Tensor copied = copy_be->to_device(w);
    EXPECT_EQ(kept.raw(), w.raw()) << "round " << round;
    EXPECT_NE(copied.raw(), w.raw()) << "round " << round;
    EXPECT_EQ(std::memcmp(copied.raw(), w.raw(), w.nbytes()), 0);
  }
}

// Bad options are clear errors when the backend is made, naming the field and allowed values
// (the names themselves are parsed at the edges: the environment, JSON, Python).
TEST(BackendOptions, BadOptionsAreClearErrors) {
  BackendOptions o;
  o.cuda_decode = CudaDecode(7);
  try {
    make_cpu_backend(1, o);
    FAIL() << "accepted cuda_decode 7";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("backend cuda_decode must be v1 or v2, got 7"),
              std::string::npos)
        << e.what();
  }
  o = BackendOptions{};
  o.spin_us = -1;
  EXPECT_THROW(make_cpu_backend(1, o), Error);
  o = BackendOptions{};
  o.isa = cpu_isa_cap() == IsaCap::kScalar ? IsaCap::kAvx2 : IsaCap::kScalar;  // not the process's
  try {
    make_cpu_backend(1, o);
    FAIL() << "accepted an ISA cap the process does not have";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("process-wide"), std::string::npos) << e.what();
  }
  o.isa = cpu_isa_cap();  // the process's own cap (or none) is accepted
  EXPECT_NO_THROW(make_cpu_backend(1, o));
}
