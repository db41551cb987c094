// CPU-kernel-specific tests against naive f64 references (outputs poisoned with NaN): the linear
// paths (streaming GEMV, BLAS, oneDNN, the M == 1 bf16 kernel) forced one by one, and the weight
// arena. What every backend must do (norms, RoPE, attention layouts, ...) is in the backend
// conformance table (tests/conformance, test_backend_conformance), also run at each ISA level.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>

#include "kernels/backend_factory.h"
#include "kernels/cpu/bf16_dot_probe.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/onednn_gemm.h"
#include "kernels/cpu/simd.h"
#include "util/cpu_features.h"
#include "kernel_test_util.h"

using namespace nanovllm;

using test::max_rel_err;
using test::poison;
using test::rand_tensor;

class LinearTest : public ::testing::TestWithParam<std::tuple<int, DType, int>> {};

TEST_P(LinearTest, MatchesNaive) {
  auto [M, wd, path] = GetParam();
  const int K = 200, N = 77;  // K not a multiple of 16: exercises the tails
  BackendOptions opts;
  opts.linear_path = LinearPath(path);
  auto be = make_cpu_backend(2, opts);
  Tensor x = rand_tensor({M, K}, DType::F32);
  Tensor w = rand_tensor({N, K}, wd, 0.1f);
  Tensor b = rand_tensor({N}, DType::F32);
  Tensor out = Tensor::empty({M, N}, DType::F32);
  poison(out);
  be->linear(x, w, &b, out);
  auto xf = to_f32_vector(x), wf = to_f32_vector(w), bf = to_f32_vector(b);
  // Batches of >= onednn_min_rows() rows with BF16 weights go through oneDNN, which rounds the
  // activations to bf16: the reference then uses the same rounded x.
  const bool rounds = wd == DType::BF16 && path == 0 && M >= cpu::onednn_min_rows() &&
                      cpu::onednn_bf16_supported(N, K);
  if (rounds)
    for (auto& v : xf) v = bf16_to_f32(f32_to_bf16(v));
  std::vector<double> ref(size_t(M * N));
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = bf[size_t(n)];
      for (int k = 0; k < K; ++k) s += double(xf[size_t(m * K + k)]) * wf[size_t(n * K + k)];
      ref[size_t(m * N + n)] = s;
    }
  EXPECT_LT(max_rel_err(ref, out.data<float>()), 1e-5)
      << "M=" << M << " path=" << path << (rounds ? " (oneDNN, bf16 activations)" : "");
}

INSTANTIATE_TEST_SUITE_P(Paths, LinearTest,
                         ::testing::Combine(::testing::Values(1, 2, 3, 8, 9, 33, 64, 65),
                                            ::testing::Values(DType::F32, DType::BF16, DType::F16),
                                            ::testing::Values(0, 2)));

// The probe that decides oneDNN vs streaming for BF16 at M >= 16 measured what the CPU has, and
// kAuto follows it.
TEST(Linear, Bf16ProbeDecidesTheLargeMPath) {
  const cpu::Bf16DotProbe& p = cpu::bf16_dot_probe();
  if (cpu::active_isa() != cpu::Isa::Avx512) {
    EXPECT_EQ(p.fma_macs_per_ns, 0.0);
    EXPECT_EQ(p.dpbf16_macs_per_ns, 0.0);
  } else {
    // >= 1 f32 MAC per ns on one thread is far below any AVX-512 core (16 per cycle per unit).
    EXPECT_GT(p.fma_macs_per_ns, 1.0);
    EXPECT_EQ(p.dpbf16_macs_per_ns > 0, cpu_features().avx512_bf16);
    // 2 MACs per lane per instruction: 0.49x the f32 MAC rate on the Intel VM, ~2x on Zen 4.
    if (cpu_features().avx512_bf16) {
      EXPECT_GT(p.speedup(), 0.1);
      EXPECT_LT(p.speedup(), 2.5);
    }
  }
  EXPECT_EQ(&p, &cpu::bf16_dot_probe()) << "measured once per process";
  EXPECT_EQ(cpu::onednn_min_rows() == 16, p.bf16_matmul_wins());
  std::printf("bf16 probe: f32 FMA %.1f MAC/ns, vdpbf16ps %.1f MAC/ns (%.2fx), amx %d -> %s\n",
              p.fma_macs_per_ns, p.dpbf16_macs_per_ns, p.speedup(), int(p.amx_bf16),
              p.bf16_matmul_wins() ? "oneDNN" : "streaming");
}

// oneDNN bf16 path (prefill): equals the naive product of bf16-rounded activations and weights.
TEST(Linear, OnednnBf16MatchesRoundedNaive) {
  const int M = 130, K = 96, N = 50;
  // oneDNN is optional (the GPU bundle's build has none): then linear takes the exact F32 path.
  if (!cpu::onednn_bf16_supported(N, K)) GTEST_SKIP() << "oneDNN absent or rejects the shape/ISA";
  BackendOptions opts;
  opts.linear_path = LinearPath::kOnednn;
  auto be = make_cpu_backend(2, opts);
  Tensor x = rand_tensor({M, K}, DType::F32);
  Tensor w = rand_tensor({N, K}, DType::BF16, 0.1f);
  Tensor out = Tensor::empty({M, N}, DType::F32);
  poison(out);
  be->linear(x, w, nullptr, out);
  auto xf = to_f32_vector(x), wf = to_f32_vector(w);
  std::vector<double> ref(size_t(M * N));
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0;
      for (int k = 0; k < K; ++k)
        s += double(bf16_to_f32(f32_to_bf16(xf[size_t(m * K + k)]))) * wf[size_t(n * K + k)];
      ref[size_t(m * N + n)] = s;
    }
  EXPECT_LT(max_rel_err(ref, out.data<float>()), 1e-5);
}

// The M == 1 bf16 decode kernel (K % 32 == 0, with and without a 32-wide tail after the
// 64-wide main loop; odd row counts).
TEST(Linear, DecodeBf16FastPathMatchesNaive) {
  for (int K : {32, 320, 352}) {
    const int N = 103;
    auto be = make_cpu_backend(2);
    Tensor x = rand_tensor({1, K}, DType::F32);
    Tensor w = rand_tensor({N, K}, DType::BF16, 0.1f);
    Tensor b = rand_tensor({N}, DType::F32);
    Tensor out = Tensor::empty({1, N}, DType::F32);
    poison(out);
    be->linear(x, w, &b, out);
    auto xf = to_f32_vector(x), wf = to_f32_vector(w), bf = to_f32_vector(b);
    std::vector<double> ref(static_cast<size_t>(N));
    for (int n = 0; n < N; ++n) {
      double s = bf[size_t(n)];
      for (int k = 0; k < K; ++k) s += double(xf[size_t(k)]) * wf[size_t(n * K + k)];
      ref[size_t(n)] = s;
    }
    EXPECT_LT(max_rel_err(ref, out.data<float>()), 1e-5) << "K = " << K;
  }
}

// BF16 weights on the streaming path at every M, F32 weights up to its 64 rows (AVX-512 with
// K % 32 == 0: the split kernel, 4 x-rows per sweep, x split 256 rows at a time; AVX2: 4 chains
// per row, sweeps of 3 rows, blocks of 64 rows; K % 32 of 8 / 16 / 24 and a K % 8 tail take the
// leftover chains and the scalar tail): each output row matches the f64 reference and is bitwise
// the row computed alone (M == 1), the batch invariance docs/determinism.md promises.
TEST(Linear, Bf16RowsEqualTheirRowAlone) {
  BackendOptions opts;
  opts.linear_path = LinearPath::kStreaming;
  auto be = make_cpu_backend(2, opts);
  for (DType wd : {DType::BF16, DType::F32})
  for (int K : {320, 352, 328, 344, 333}) {
    const int N = 45;
    Tensor w = rand_tensor({N, K}, wd, 0.1f);
    auto wf = to_f32_vector(w);
    for (int M : {2, 3, 4, 5, 7, 8, 9, 33, 64, 65, 300}) {
      if (wd == DType::F32 && M > 64) continue;  // above 64 rows f32 weights go to sgemm
      Tensor x = rand_tensor({M, K}, DType::F32);
      Tensor out = Tensor::empty({M, N}, DType::F32);
      poison(out);
      be->linear(x, w, nullptr, out);
      const std::vector<double> ref = test::naive_linear(to_f32_vector(x), wf, M, N, K);
      EXPECT_LT(max_rel_err(ref, out.data<float>()), 1e-5) << "K=" << K << " M=" << M;
      for (int m : {0, 1, M / 2, M - 1}) {
        Tensor x1 = Tensor::empty({1, K}, DType::F32), o1 = Tensor::empty({1, N}, DType::F32);
        std::memcpy(x1.data<float>(), x.data<float>() + size_t(m) * K, size_t(K) * 4);
        be->linear(x1, w, nullptr, o1);
        EXPECT_EQ(0, std::memcmp(o1.data<float>(), out.data<float>() + size_t(m) * N, size_t(N) * 4))
            << dtype_name(wd) << " K=" << K << " M=" << M << " row " << m
            << " differs from the row alone";
      }
    }
  }
}

// to_device copies large weights into the huge-page arena (same bytes, new address) and leaves
// small tensors where they are.
TEST(CpuBackend, ToDeviceCopiesLargeWeightsIntoArena) {
  auto be = make_cpu_backend(2);
  Tensor big = rand_tensor({300, 256}, DType::BF16);  // 150 KiB
  Tensor small = rand_tensor({64}, DType::F32);
  Tensor big_d = be->to_device(big), small_d = be->to_device(small);
  EXPECT_NE(big_d.raw(), big.raw());
  EXPECT_EQ(big_d.shape(), big.shape());
  EXPECT_EQ(big_d.dtype(), DType::BF16);
  EXPECT_EQ(std::memcmp(big_d.raw(), big.raw(), big.nbytes()), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big_d.raw()) % 64, 0u);
  EXPECT_EQ(small_d.raw(), small.raw());
  Tensor big2 = be->to_device(big);  // packed after the first in the same chunk
  EXPECT_EQ(std::memcmp(big2.raw(), big.raw(), big.nbytes()), 0);
  EXPECT_GE(static_cast<char*>(big2.raw()) - static_cast<char*>(big_d.raw()),
            static_cast<ptrdiff_t>(big.nbytes()));
}

// The vectorized f32 -> bf16 row conversion (bf16 KV cache stores) equals the scalar one,
// including ties, NaN, infinities, denormals and the vector tail.
TEST(Bf16, RowConversionMatchesScalar) {
  std::vector<float> v = {1.f, -2.5f, 3.14159f, 1e-40f, -0.f, INFINITY, -INFINITY, NAN,
                          65504.f, 1.00390625f, 1.01171875f, 3.4e38f};
  for (int i = 0; i < 37; ++i) v.push_back(float(i) * 0.3721f - 5.f);
  std::vector<uint16_t> got(v.size());
  cpu::f32_to_bf16_row(v.data(), got.data(), int64_t(v.size()));
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(got[i], f32_to_bf16(v[i])) << i << " " << v[i];
}

// SiLU-and-mul's vectorized exp at the extremes: e^-v overflows for v << 0 (silu -> -0) and
// underflows for v >> 0 (silu -> v); f64 reference.
TEST(Elementwise, SiluAndMulExtremes) {
  auto be = make_cpu_backend(1);
  std::vector<float> g = {-200.f, -90.f, -87.5f, -20.f, -1.f, -1e-6f, 0.f, 1e-6f, 0.5f, 3.f,
                          20.f, 88.f, 200.f, -3.3f, 7.7f, 1.f, 2.f, -2.f};
  const int64_t I = int64_t(g.size());
  Tensor gu = Tensor::empty({1, 2 * I}, DType::F32), out = Tensor::empty({1, I}, DType::F32);
  for (int64_t i = 0; i < I; ++i) gu.data<float>()[i] = g[size_t(i)], gu.data<float>()[I + i] = 1.5f;
  be->silu_and_mul(gu, out);
  for (int64_t i = 0; i < I; ++i) {
    const double v = g[size_t(i)], want = v / (1.0 + std::exp(-v)) * 1.5;
    EXPECT_NEAR(out.data<float>()[i], want, 1e-6 * std::max(1.0, std::abs(want))) << "g = " << v;
  }
}
