// Quantized weights (kernels/quantized.h): the quantizer's error bounds, and quantized_linear
// against an f64 reference built from the dequantized weights and the per-row int8 activations
// (so the kernels must be exact up to f32 rounding), at every ISA level ctest runs
// (NANOVLLM_ISA=avxvnni|avx2|scalar re-run this binary).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernel_test_util.h"
#include "kernels/backend.h"
#include "kernels/backend_factory.h"
#include "kernels/cpu/qgemm.h"
#include "kernels/cpu/quant_act.h"
#include "kernels/cpu/quantize.h"

using namespace nanovllm;
using test::max_rel_err;
using test::poison;
using test::rand_tensor;

namespace {

const char* kSchemes[] = {"int8",        "int8-g32",    "int4-g32", "int4-g64",
                          "int4-g32-zp", "int4-g64-zp", "int4-g32-zp-f32"};

// The f64 product of the int8-quantized activations with the dequantized weight (plus bias):
// what the kernels must reproduce up to f32 rounding. x [M, K] f32 -> [M, N].
std::vector<double> reference_linear(const Tensor& x, const LinearWeight& lw, const float* bias) {
  const int64_t M = x.size(0), K = x.size(1), N = lw.quant->N;
  std::vector<float> wq(static_cast<size_t>(K));
  std::vector<double> ref(size_t(M * N));
  std::vector<std::vector<double>> xq;
  for (int64_t m = 0; m < M; ++m) xq.push_back(test::int8_quantized_row(x.data<float>() + m * K, K));
  for (int64_t n = 0; n < N; ++n) {
    cpu::dequantize_row(*lw.quant, n, wq.data());
    for (int64_t m = 0; m < M; ++m) {
      double s = bias ? bias[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += xq[size_t(m)][size_t(k)] * wq[size_t(k)];
      ref[size_t(m * N + n)] = s;
    }
  }
  return ref;
}

}  // namespace

TEST(Quantize, ParseSchemes) {
  EXPECT_FALSE(parse_quant_scheme("none").enabled());
  EXPECT_FALSE(parse_quant_scheme("").enabled());
  EXPECT_EQ(parse_quant_scheme("int8").kind, QuantKind::Int8);
  EXPECT_EQ(parse_quant_scheme("int4").str(), "int4-g32");
  for (const char* s : kSchemes) EXPECT_EQ(parse_quant_scheme(s).str(), s);
  EXPECT_THROW(parse_quant_scheme("int3"), std::exception);
  EXPECT_THROW(parse_quant_scheme("int4-g16"), std::exception);
}

// The plain quantizers the load-time search starts from (and must never do worse than).
double plain_group_sse(const float* w, int64_t g, const QuantScheme& qs) {
  float lo = w[0], hi = w[0], ext = 0.f;
  for (int64_t i = 0; i < g; ++i) {
    lo = std::min(lo, w[i]), hi = std::max(hi, w[i]);
    if (std::abs(w[i]) > std::abs(ext)) ext = w[i];
  }
  double sse = 0;
  for (int64_t i = 0; i < g; ++i) {
    double d;
    if (qs.zero_points) {
      const float m = f16_to_f32(f32_to_f16(lo)), s = f16_to_f32(f32_to_f16((hi - m) / 15.f));
      const float v = s ? std::clamp(std::nearbyint((w[i] - m) / s), 0.f, 15.f) : 0.f;
      d = w[i] - (s * v + m);
    } else {
      const float s = f16_to_f32(f32_to_f16(ext / -8.f));
      const float v = s ? std::clamp(std::nearbyint(w[i] / s) + 8, 0.f, 15.f) : 8.f;
      d = w[i] - s * (v - 8);
    }
    sse += d * d;
  }
  return sse;
}

// int8: every element within half a step of its row's scale. int4: per group, the squared
// error is at most that of the plain max-scaled quantizer (the search starts there) and every
// element within a quarter of the group's largest magnitude.
TEST(Quantize, DequantizedErrorBounds) {
  auto pool = std::make_unique<ThreadPool>(2);
  const int64_t N = 37, K = 200;
  Tensor w = rand_tensor({N, K}, DType::BF16, 0.05f);
  auto wf = to_f32_vector(w);
  for (const char* name : kSchemes) {
    const QuantScheme qs = parse_quant_scheme(name);
    QuantizedWeight q = cpu::quantize_weight(w, qs, *pool);
    std::vector<float> row(static_cast<size_t>(K));
    double total = 0, plain_total = 0;
    for (int64_t n = 0; n < N; ++n) {
      cpu::dequantize_row(q, n, row.data());
      const float* wr = wf.data() + n * K;
      const int64_t g = qs.kind == QuantKind::Int8 && !qs.int8_groups() ? K : qs.group;
      for (int64_t k0 = 0; k0 < K; k0 += g) {
        const int64_t k1 = std::min(K, k0 + g);
        float amax = 0.f;
        double sse = 0;
        for (int64_t k = k0; k < k1; ++k) {
          amax = std::max(amax, std::abs(wr[k]));
          sse += double(row[size_t(k)] - wr[k]) * (row[size_t(k)] - wr[k]);
        }
        for (int64_t k = k0; k < k1; ++k) {
          // int8-g32: half a step of the f16-rounded scale (relative error <= 2^-11).
          const double bound = qs.int8_groups()              ? amax / 127.0 * 0.5 * (1 + 1.0 / 1024)
                               : qs.kind == QuantKind::Int8 ? amax / 127.0 * 0.5001
                                                            : 0.25 * amax;
          ASSERT_LE(std::abs(row[size_t(k)] - wr[k]), bound) << name << " n=" << n << " k=" << k;
        }
        if (qs.kind == QuantKind::Int4 && k1 - k0 == g) {  // (the padded tail group differs)
          const double plain = plain_group_sse(wr + k0, g, qs);
          EXPECT_LE(sse, plain * 1.0001 + 1e-12) << name << " n=" << n << " k0=" << k0;
          total += sse, plain_total += plain;
        }
      }
    }
    if (qs.kind == QuantKind::Int4) {
      std::printf("%s: squared error %.3g vs plain max-scaled %.3g\n", name, total, plain_total);
      EXPECT_LT(total, 0.95 * plain_total) << name << ": the search should gain something";
    }
  }
}

// int8-g32 holds ggml's Q8_0 grid exactly: weights w = d q (d an f16 number per 32 k, q in
// [-127, 127] with 127 or -127 in every group, as ggml's quantizer writes them) come back
// bit-identical from dequantize_row, including an all-zero group, tiny (subnormal f16) and large
// scales, and a K that is not a whole number of groups (the last group padded with zeros).
TEST(Quantize, Int8G32HoldsTheQ8_0GridExactly) {
  auto pool = std::make_unique<ThreadPool>(2);
  const int64_t N = 21, K = 32 * 7 + 16;
  Tensor w = Tensor::empty({N, K}, DType::F32);
  float* wp = w.data<float>();
  uint64_t st = 12345;
  auto next = [&] { st = st * 6364136223846793005ull + 1442695040888963407ull; return uint32_t(st >> 33); };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g0 = 0; g0 < K; g0 += 32) {
      const int64_t g1 = std::min(K, g0 + 32);
      // d: an f16 value, from 2^-20 (subnormal in f16) to ~2^9.
      const float d = f16_to_f32(f32_to_f16(std::ldexp(1.f + float(next() % 1024) / 1024.f, int(next() % 30) - 20)));
      for (int64_t k = g0; k < g1; ++k) {
        const int q = int(next() % 255) - 127;
        wp[n * K + k] = (n == 3 && g0 == 64) ? 0.f : d * float(q);
      }
      if (!(n == 3 && g0 == 64)) wp[n * K + g0 + int64_t(next() % uint32_t(g1 - g0))] = (next() % 2 ? 127.f : -127.f) * d;
    }
  QuantizedWeight q = cpu::quantize_weight(w, parse_quant_scheme("int8-g32"), *pool);
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    cpu::dequantize_row(q, n, row.data());
    for (int64_t k = 0; k < K; ++k) ASSERT_EQ(row[size_t(k)], wp[n * K + k]) << "n=" << n << " k=" << k;
  }
}

// int8-g32 with exact_grid also holds a coarser exact grid: ggml's Q5_0 (w = d (q - 16), q in 0..31) and
// IQ4_NL (w = d kvalue[q], 16 values in [-127, 113]) with an f16 d of either sign (ggml's
// quantizers write negative d) come back bit-identical, though max |w| / 127 is not their step.
// A group on no such grid gets the nearest-step result as before (error <= half a step).
TEST(Quantize, Int8G32HoldsCoarserExactGrids) {
  static const int kIq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
  auto pool = std::make_unique<ThreadPool>(2);
  const int64_t N = 48, K = 32 * 6;
  Tensor w = Tensor::empty({N, K}, DType::F32);
  float* wp = w.data<float>();
  uint64_t st = 987;
  auto next = [&] { st = st * 6364136223846793005ull + 1442695040888963407ull; return uint32_t(st >> 33); };
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g0 = 0; g0 < K; g0 += 32) {
      const float mag = std::ldexp(1.f + float(next() % 1024) / 1024.f, int(next() % 24) - 16);
      const float d = f16_to_f32(f32_to_f16(next() % 2 ? mag : -mag));
      for (int64_t k = g0; k < g0 + 32; ++k) {
        const uint32_t c = next();
        if (n < 16) wp[n * K + k] = d * float(int(c % 32) - 16);      // Q5_0
        else if (n < 32) wp[n * K + k] = d * float(kIq4nl[c % 16]);  // IQ4_NL
        else wp[n * K + k] = d * float(int(c % 7) - 3);              // a 3-bit grid (Q3_K-like)
      }
    }
  QuantScheme exact = parse_quant_scheme("int8-g32");
  exact.exact_grid = true;  // what a GGUF's block types get (engine/model_files.cc)
  QuantizedWeight q = cpu::quantize_weight(w, exact, *pool);
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    cpu::dequantize_row(q, n, row.data());
    for (int64_t k = 0; k < K; ++k) ASSERT_EQ(row[size_t(k)], wp[n * K + k]) << "n=" << n << " k=" << k;
  }
  // Without exact_grid (a bf16 checkpoint's scheme) the step is max |w| / 127: not these grids.
  QuantizedWeight plain = cpu::quantize_weight(w, parse_quant_scheme("int8-g32"), *pool);
  int64_t differ = 0;
  for (int64_t n = 0; n < N; ++n) {
    cpu::dequantize_row(plain, n, row.data());
    for (int64_t k = 0; k < K; ++k) differ += row[size_t(k)] != wp[n * K + k];
  }
  EXPECT_GT(differ, N * K / 4);
  // bf16 weights on no small grid: each group within half of its step max|w| / 127 (f16).
  Tensor r = rand_tensor({16, K}, DType::BF16, 0.1f);
  QuantizedWeight qr = cpu::quantize_weight(r, exact, *pool);
  const std::vector<float> rf = to_f32_vector(r);
  int inexact = 0;
  for (int64_t n = 0; n < 16; ++n) {
    cpu::dequantize_row(qr, n, row.data());
    for (int64_t g0 = 0; g0 < K; g0 += 32) {
      float amax = 0.f;
      for (int64_t k = g0; k < g0 + 32; ++k) amax = std::max(amax, std::abs(rf[size_t(n * K + k)]));
      const float step = f16_to_f32(f32_to_f16(amax / 127.f));
      for (int64_t k = g0; k < g0 + 32; ++k) {
        const float e = std::abs(row[size_t(k)] - rf[size_t(n * K + k)]);
        ASSERT_LE(e, 0.5f * step * 1.0001f) << n << " " << k;
        inexact += e > 0.f;
      }
    }
  }
  EXPECT_GT(inexact, 0);  // random weights are not all on a grid: the check above compares something
}

// quantized_nbytes (what bench_decode_roofline counts per token) is what quantize_weight makes,
// for shapes with padded rows (N % 16) and padded columns (K % 4, K % group).
TEST(Quantize, NbytesMatchesQuantizedWeight) {
  auto pool = std::make_unique<ThreadPool>(1);
  for (const char* name : kSchemes)
    for (auto [N, K] : {std::pair<int64_t, int64_t>{16, 64}, {37, 200}, {5, 66}, {48, 1024}}) {
      const QuantScheme qs = parse_quant_scheme(name);
      QuantizedWeight q = cpu::quantize_weight(rand_tensor({N, K}, DType::BF16, 0.05f), qs, *pool);
      EXPECT_EQ(cpu::quantized_nbytes(N, K, qs), int64_t(q.nbytes())) << name << " " << N << "x" << K;
    }
}

class QuantLinearTest : public ::testing::TestWithParam<std::tuple<const char*, int, int>> {};

TEST_P(QuantLinearTest, MatchesDequantizedReference) {
  auto [name, M, K] = GetParam();
  const int N = 77;
  auto be = make_cpu_backend(2);
  Tensor x = rand_tensor({M, K}, DType::F32);
  Tensor w = rand_tensor({N, K}, DType::BF16, 0.1f);
  Tensor b = rand_tensor({N}, DType::F32);
  LinearWeight lw = be->prepare_linear(w, parse_quant_scheme(name));
  ASSERT_TRUE(lw.quantized());
  Tensor out = Tensor::empty({M, N}, DType::F32);
  poison(out);
  be->linear(x, lw, &b, out);

  auto bf = to_f32_vector(b), wf = to_f32_vector(w);
  const std::vector<double> ref = reference_linear(x, lw, bf.data());
  std::vector<double> exact(size_t(M * N));
  for (int n = 0; n < N; ++n) {
    for (int m = 0; m < M; ++m) {
      double e = bf[size_t(n)];
      for (int k = 0; k < K; ++k) e += double(x.data<float>()[m * K + k]) * wf[size_t(n * K + k)];
      exact[size_t(m * N + n)] = e;
    }
  }
  EXPECT_LT(max_rel_err(ref, out.data<float>()), 2e-5)
      << name << " M=" << M << " K=" << K << " isa=" << cpu::quantized_isa();
  // And the quantization itself stays small against the unquantized product (RMS relative).
  double num = 0, den = 0;
  for (size_t i = 0; i < exact.size(); ++i) {
    num += (out.data<float>()[i] - exact[i]) * (out.data<float>()[i] - exact[i]);
    den += exact[i] * exact[i];
  }
  const double rms = std::sqrt(num / den);
  const bool int8 = parse_quant_scheme(name).kind == QuantKind::Int8;
  EXPECT_LT(rms, int8 ? 0.03 : 0.2) << name << " M=" << M << " K=" << K;
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, QuantLinearTest,
    ::testing::Combine(::testing::ValuesIn(kSchemes),
                       ::testing::Values(1, 2, 3, 4, 5, 8, 9, 33),
                       // 1024: whole groups; 200 (int4: padded to a group), 66 (int8:
                       // padded to 4), 64
                       ::testing::Values(64, 66, 200, 1024)));

// A row of zeros quantizes to scale 0 and must give exact zeros (no 0/0).
TEST(QuantLinear, ZeroActivationsAndWeights) {
  auto be = make_cpu_backend(2);
  const int M = 3, K = 512, N = 40;
  Tensor x = Tensor::zeros({M, K}, DType::F32);
  x.data<float>()[K + 5] = 1.f;  // row 1 has one non-zero
  Tensor w = Tensor::zeros({N, K}, DType::F32);
  for (const char* name : kSchemes) {
    LinearWeight lw = be->prepare_linear(w, parse_quant_scheme(name));
    Tensor out = Tensor::empty({M, N}, DType::F32);
    poison(out);
    be->linear(x, lw, nullptr, out);
    for (int64_t i = 0; i < M * N; ++i) ASSERT_EQ(out.data<float>()[i], 0.f) << name << " " << i;
  }
}

// The largest integer sums the kernels can meet: every weight at the top (or bottom) code and
// every activation at +-127. The AVX2 int4 kernel adds eight pmaddubsw results in 16 bits
// before widening (8 x 2 x 15 x 127 = 30480 <= 32767); one more would wrap, and this test
// would see it. Rows: +1 everywhere but k = 0 (-1, so the zero-point schemes have a range),
// the negation, and random; activations +1, -1, alternating and random, M = 1 (the decode
// kernels), 4 and 8.
TEST(QuantLinear, ExtremeCodesStayExact) {
  auto be = make_cpu_backend(2);
  const int K = 1024, N = 48;
  Tensor w = rand_tensor({N, K}, DType::F32, 0.1f);
  float* wp = w.data<float>();
  for (int n = 0; n < 32; ++n) {
    const float sgn = n % 2 ? -1.f : 1.f;
    for (int k = 0; k < K; ++k) wp[n * K + k] = k == 0 ? -sgn : sgn;
  }
  for (int M : {1, 4, 8}) {
    Tensor x = rand_tensor({M, K}, DType::F32);
    float* xp = x.data<float>();
    for (int k = 0; k < K; ++k) {
      xp[k] = 1.f;
      if (M < 4) continue;
      xp[K + k] = -1.f;
      xp[2 * K + k] = k % 2 ? -1.f : 1.f;
    }
    for (const char* name : kSchemes) {
      LinearWeight lw = be->prepare_linear(w, parse_quant_scheme(name));
      Tensor out = Tensor::empty({M, N}, DType::F32);
      poison(out);
      be->linear(x, lw, nullptr, out);
      const std::vector<double> ref = reference_linear(x, lw, nullptr);
      EXPECT_LT(max_rel_err(ref, out.data<float>()), 2e-5)
          << name << " M=" << M << " isa=" << cpu::quantized_isa();
    }
  }
}

// Many rows go through qgemm.cc in blocks of activation rows (256 KiB of x8 each: 64 rows at
// K = 4096), each against all of a thread's weight tiles. Every row must keep the bits it gets
// alone (M = 1): the same sums in the same order, whichever block and chunk it falls in, on
// both threads, the block edges and the last short chunk included.
TEST(QuantLinear, RowBlocksKeepEachRowsBits) {
  auto be = make_cpu_backend(2);
  const int K = 4096, N = 40, M = 2 * 64 + 13;
  Tensor w = rand_tensor({N, K}, DType::F32, 0.1f);
  Tensor x = rand_tensor({M, K}, DType::F32);
  for (const char* name : kSchemes) {
    LinearWeight lw = be->prepare_linear(w, parse_quant_scheme(name));
    Tensor out = Tensor::empty({M, N}, DType::F32);
    poison(out);
    be->linear(x, lw, nullptr, out);
    for (int m = 0; m < M; ++m) {
      Tensor x1 = Tensor::empty({1, K}, DType::F32), y1 = Tensor::empty({1, N}, DType::F32);
      std::copy(x.data<float>() + int64_t(m) * K, x.data<float>() + int64_t(m + 1) * K, x1.data<float>());
      be->linear(x1, lw, nullptr, y1);
      for (int n = 0; n < N; ++n)
        ASSERT_EQ(out.data<float>()[m * N + n], y1.data<float>()[n])
            << name << " m " << m << " n " << n << " isa=" << cpu::quantized_isa();
    }
  }
}

// A composite weight (kernels/quantized.h: a GGUF's fused q / k / v whose parts are stored in
// different forms) gives each part's output columns bit for bit what the part alone gives, in
// order, with the bias added once; parts whose row counts are not multiples of 16 must not write
// into the next part's columns (the kernels store whole 16-row blocks only where rows exist).
TEST(QuantLinear, CompositeEqualsItsPartsSideBySide) {
  auto be = make_cpu_backend(2);
  const int K = 256;
  const std::vector<std::pair<const char*, int>> spec = {{"int4-g32-zp", 40}, {"int8", 24}, {"int8-g32", 13},
                                                         {"int4-g64", 7}};
  std::vector<LinearWeight> parts;
  std::vector<std::shared_ptr<const QuantizedWeight>> qs;
  int N = 0;
  for (const auto& [scheme, n] : spec) {
    parts.push_back(be->prepare_linear(rand_tensor({n, K}, DType::F32, 0.1f), parse_quant_scheme(scheme)));
    qs.push_back(parts.back().quant);
    N += n;
  }
  LinearWeight joined{Tensor(), std::make_shared<QuantizedWeight>(join_quantized_columns(qs))};
  ASSERT_TRUE(joined.quant->composite());
  EXPECT_EQ(joined.out_features(), N);
  size_t bytes = 0;
  for (const auto& p : parts) bytes += p.nbytes();
  EXPECT_EQ(joined.nbytes(), bytes);
  Tensor b = rand_tensor({N}, DType::F32);
  for (int M : {1, 5, 33}) {
    Tensor x = rand_tensor({M, K}, DType::F32);
    Tensor out = Tensor::empty({M, N}, DType::F32);
    poison(out);
    be->linear(x, joined, &b, out);
    int n0 = 0;
    for (size_t i = 0; i < parts.size(); ++i) {
      const int n = spec[i].second;
      Tensor bi = Tensor::empty({n}, DType::F32);
      std::copy(b.data<float>() + n0, b.data<float>() + n0 + n, bi.data<float>());
      Tensor yi = Tensor::empty({M, n}, DType::F32);
      be->linear(x, parts[i], &bi, yi);
      for (int m = 0; m < M; ++m)
        for (int j = 0; j < n; ++j)
          ASSERT_EQ(out.data<float>()[m * N + n0 + j], yi.data<float>()[m * n + j])
              << spec[i].first << " part, M=" << M << " row " << m << " column " << j;
      n0 += n;
    }
    // dequantize_row of a composite: its part's row.
    std::vector<float> a(K), c(K);
    cpu::dequantize_row(*joined.quant, 40 + 24 + 3, a.data());
    cpu::dequantize_row(*qs[2], 3, c.data());
    EXPECT_EQ(a, c);
  }
  // Parts that read different inputs cannot be joined.
  LinearWeight other = be->prepare_linear(rand_tensor({16, 128}, DType::F32), parse_quant_scheme("int8"));
  EXPECT_THROW(join_quantized_columns({qs[0], other.quant}), std::exception);
  // And the op contract checks a composite's shape like any weight's.
  Tensor x = rand_tensor({2, K}, DType::F32), bad = Tensor::empty({2, N - 1}, DType::F32);
  EXPECT_THROW(be->linear(x, joined, nullptr, bad), std::exception);
}

TEST(QuantLinear, RejectsMismatchedShapes) {
  auto be = make_cpu_backend(1);
  Tensor w = rand_tensor({16, 64}, DType::F32);
  LinearWeight lw = be->prepare_linear(w, parse_quant_scheme("int8"));
  Tensor x = rand_tensor({2, 63}, DType::F32), out = Tensor::empty({2, 16}, DType::F32);
  EXPECT_THROW(be->linear(x, lw, nullptr, out), std::exception);
  Tensor x2 = rand_tensor({2, 64}, DType::F32), out2 = Tensor::empty({2, 15}, DType::F32);
  EXPECT_THROW(be->linear(x2, lw, nullptr, out2), std::exception);
}

// NANOVLLM_ISA caps the quantized kernels too (ctest runs this binary at each level).
TEST(QuantLinear, IsaFollowsTheCap) {
  const std::string isa = cpu::quantized_isa();
  const char* cap = std::getenv("NANOVLLM_ISA");
  const std::string c = cap ? cap : "";
  if (c == "scalar") {
    EXPECT_EQ(isa, "scalar");
  } else if (c == "avx2") {
    EXPECT_TRUE(isa == "avx2" || isa == "scalar") << isa;
  } else if (c == "avxvnni") {
    EXPECT_TRUE(isa == "avx-vnni" || isa == "avx2" || isa == "scalar") << isa;
  }
  std::printf("quantized kernels: %s (NANOVLLM_ISA=%s)\n", isa.c_str(), c.c_str());
}

// The activation quantizer: the formula of quant_act.h byte for byte (K with vector tails, with
// and without the +128 offset, ties rounded to even, an all-zero row).
TEST(QuantAct, RowMatchesFormula) {
  for (int64_t K : {1, 15, 16, 17, 100, 1024}) {
    Tensor x = rand_tensor({K}, DType::F32, 3.f);
    float* xp = x.data<float>();
    for (bool offset : {false, true}) {
      std::vector<uint8_t> q(static_cast<size_t>(K));
      const float s = cpu::quantize_row_s8(xp, K, q.data(), offset);
      float amax = 0.f;
      for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::abs(xp[k]));
      ASSERT_EQ(s, amax / 127.f);
      for (int64_t k = 0; k < K; ++k) {
        const int want = int(std::clamp(std::nearbyint(xp[k] * (1.f / s)), -127.f, 127.f)) + (offset ? 128 : 0);
        ASSERT_EQ(int(q[size_t(k)]), want & 0xFF) << "K=" << K << " k=" << k << " offset=" << offset;
      }
    }
  }
  // Exact ties: amax 127 gives scale 1, so 0.5, 1.5, -2.5 round to 0, 2, -2.
  std::vector<float> t = {127.f, 0.5f, 1.5f, -2.5f, 0.f};
  std::vector<uint8_t> q(t.size());
  EXPECT_EQ(cpu::quantize_row_s8(t.data(), int64_t(t.size()), q.data(), false), 1.f);
  EXPECT_EQ(int8_t(q[1]), 0);
  EXPECT_EQ(int8_t(q[2]), 2);
  EXPECT_EQ(int8_t(q[3]), -2);
  std::vector<float> z(20, 0.f);
  std::vector<uint8_t> qz(20, 7);
  EXPECT_EQ(cpu::quantize_row_s8(z.data(), 20, qz.data(), true), 0.f);
  for (uint8_t v : qz) EXPECT_EQ(v, 128);
}

// Quantized MoE experts: with two or more active experts per thread the CPU backend shares whole
// experts out among its threads (kernels/cpu/moe.h); one thread runs them one after another. The
// two schedules must give the same bits (batch-1 decode and a 16-token batch, an invalid slot),
// and the result must be the experts' weighted MLP sum (checked loosely against f64 on the
// dequantized weights: the activations are int8-quantized per row inside each linear).
TEST(QuantMoe, ParallelExpertsMatchSequential) {
  const int64_t E = 16, H = 64, I = 96;
  for (const char* name : {"int8", "int8-g32", "int4-g32"}) {
    std::vector<Tensor> gu, dn;
    for (int64_t e = 0; e < E; ++e) {
      gu.push_back(rand_tensor({2 * I, H}, DType::BF16, 0.1f));
      dn.push_back(rand_tensor({H, I}, DType::BF16, 0.1f));
    }
    auto loader = [&](int64_t e) { return std::pair{gu[size_t(e)], dn[size_t(e)]}; };
    for (auto [T, k] : {std::pair<int64_t, int64_t>{1, 8}, {16, 4}}) {
      Tensor x = rand_tensor({T, H}, DType::F32);
      Tensor ids = Tensor::empty({T, k}, DType::I32), w = Tensor::empty({T, k}, DType::F32);
      for (int64_t i = 0; i < T * k; ++i) {
        ids.data<int32_t>()[i] = int32_t((i * 7 + i / k) % E);
        w.data<float>()[i] = 0.1f + 0.05f * float(i % 5);
      }
      if (T > 1) ids.data<int32_t>()[3] = -1;  // a skipped slot
      std::vector<std::vector<float>> outs;
      for (int threads : {1, 2, 3}) {
        auto be = make_cpu_backend(threads);
        MoeExperts ex = be->prepare_moe_experts(E, H, I, loader, parse_quant_scheme(name));
        Tensor out = Tensor::empty({T, H}, DType::F32);
        poison(out);
        be->moe_experts(x, ex, ids, w, out);
        outs.emplace_back(out.data<float>(), out.data<float>() + T * H);
      }
      EXPECT_EQ(outs[0], outs[1]) << name << " T=" << T << ": 2 threads differ from 1";
      EXPECT_EQ(outs[0], outs[2]) << name << " T=" << T << ": 3 threads differ from 1";
      // f64 reference from the unquantized weights.
      std::vector<double> ref(size_t(T * H), 0.0);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < k; ++j) {
          const int32_t e = ids.data<int32_t>()[t * k + j];
          if (e < 0) continue;
          auto g = to_f32_vector(gu[size_t(e)]), d = to_f32_vector(dn[size_t(e)]);
          std::vector<double> h(static_cast<size_t>(I));
          for (int64_t i = 0; i < I; ++i) {
            double a = 0, b = 0;
            for (int64_t c = 0; c < H; ++c) {
              a += double(g[size_t(i * H + c)]) * x.data<float>()[t * H + c];
              b += double(g[size_t((I + i) * H + c)]) * x.data<float>()[t * H + c];
            }
            h[size_t(i)] = a / (1 + std::exp(-a)) * b;
          }
          for (int64_t c = 0; c < H; ++c) {
            double s = 0;
            for (int64_t i = 0; i < I; ++i) s += double(d[size_t(c * I + i)]) * h[size_t(i)];
            ref[size_t(t * H + c)] += w.data<float>()[t * k + j] * s;
          }
        }
      EXPECT_LT(max_rel_err(ref, outs[0].data()), std::string(name) == "int8" ? 0.05 : 0.25) << name << " T=" << T;
    }
  }
}
