// GPTQ / AWQ groups repacked onto the int4 kernels (kernels/cpu/pack_int4.h): symmetric weights
// dequantize bit-identically, zero points within the f16-min bound, act-order and cut groups
// through the input gather, and quantized_linear with a gather equal (bitwise) to the same
// weight stored in group order with the input permuted by hand; Q4_K's scales and mins exact
// (int4-g32-zp-k, int4-g32-zp-f32). Every ISA ctest runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "kernel_test_util.h"
#include "kernels/cpu/pack_int4.h"
#include "kernels/cpu/qgemm.h"

using namespace nanovllm;

namespace {

// Random groups: codes 0..15, f16 scales, zeros (8 for symmetric), g_idx k / group or shuffled.
Int4Groups random_groups(int64_t N, int64_t K, int64_t group, bool sym, bool shuffle, uint32_t seed) {
  std::mt19937 rng(seed);
  Int4Groups w;
  w.N = N, w.K = K, w.G = K / group;
  w.q = Tensor::empty({N, K}, DType::U8);
  w.scales = Tensor::empty({N, w.G}, DType::F32);
  w.zeros = Tensor::empty({N, w.G}, DType::U8);
  w.g_idx = Tensor::empty({K}, DType::I32);
  for (int64_t i = 0; i < N * K; ++i) w.q.data<uint8_t>()[i] = uint8_t(rng() % 16);
  for (int64_t i = 0; i < N * w.G; ++i) {
    w.scales.data<float>()[i] = f16_to_f32(f32_to_f16(std::ldexp(float(1 + rng() % 2047), -int(14 + rng() % 6))));
    w.zeros.data<uint8_t>()[i] = sym ? 8 : uint8_t(rng() % 17);
  }
  int32_t* g = w.g_idx.data<int32_t>();
  for (int64_t k = 0; k < K; ++k) g[k] = int32_t(k / group);
  if (shuffle) std::shuffle(g, g + K, rng);
  return w;
}

// Groups as ggml's Q4_K stores them: scale d x sc and min -(dmin x m), d / dmin f16 per 256
// columns, sc / m 6-bit per 32: f32 numbers that f16 cannot hold (up to 17 significant bits).
Int4Groups random_q4k_groups(int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  Int4Groups w;
  w.N = N, w.K = K, w.G = K / 32;
  w.q = Tensor::empty({N, K}, DType::U8);
  w.scales = Tensor::empty({N, w.G}, DType::F32);
  w.mins = Tensor::empty({N, w.G}, DType::F32);
  w.g_idx = Tensor::empty({K}, DType::I32);
  w.d = Tensor::empty({N, w.G / 8}, DType::F32);
  w.dmin = Tensor::empty({N, w.G / 8}, DType::F32);
  w.sub_scale = Tensor::empty({N, w.G}, DType::U8);
  w.sub_min = Tensor::empty({N, w.G}, DType::U8);
  for (int64_t i = 0; i < N * K; ++i) w.q.data<uint8_t>()[i] = uint8_t(rng() % 16);
  float d = 0, dmin = 0;
  for (int64_t i = 0; i < N * w.G; ++i) {
    if (i % 8 == 0) {
      d = f16_to_f32(f32_to_f16(std::ldexp(float(1025 + rng() % 1023), -int(18 + rng() % 4))));
      dmin = f16_to_f32(f32_to_f16(std::ldexp(float(1025 + rng() % 1023), -int(18 + rng() % 4))));
      w.d.data<float>()[i / 8] = d, w.dmin.data<float>()[i / 8] = dmin;
    }
    const uint8_t sc = uint8_t(rng() % 64), m = uint8_t(rng() % 64);
    w.sub_scale.data<uint8_t>()[i] = sc, w.sub_min.data<uint8_t>()[i] = m;
    w.scales.data<float>()[i] = d * float(sc);
    w.mins.data<float>()[i] = -(dmin * float(m));
  }
  for (int64_t k = 0; k < K; ++k) w.g_idx.data<int32_t>()[k] = int32_t(k / 32);
  return w;
}

float reference(const Int4Groups& w, int64_t n, int64_t k) {
  const int64_t g = w.g_idx.data<int32_t>()[k];
  if (w.has_mins())
    return w.scales.data<float>()[n * w.G + g] * float(w.q.data<uint8_t>()[n * w.K + k]) +
           w.mins.data<float>()[n * w.G + g];
  return w.scales.data<float>()[n * w.G + g] *
         float(int(w.q.data<uint8_t>()[n * w.K + k]) - int(w.zeros.data<uint8_t>()[n * w.G + g]));
}

// Max |repacked - reference| over the weight, in units of the group scale; counts exact rows.
double compare(const Int4Groups& w, const QuantizedWeight& q, int64_t* exact_rows) {
  std::vector<float> row(size_t(w.K));
  double worst = 0;
  *exact_rows = 0;
  for (int64_t n = 0; n < w.N; ++n) {
    cpu::dequantize_row_inputs(q, n, row.data());
    bool exact = true;
    for (int64_t k = 0; k < w.K; ++k) {
      const float r = reference(w, n, k);
      exact = exact && row[size_t(k)] == r;
      const float s = w.scales.data<float>()[n * w.G + w.g_idx.data<int32_t>()[k]];
      if (row[size_t(k)] != r) worst = std::max(worst, double(std::fabs(row[size_t(k)] - r)) / s);
    }
    *exact_rows += exact;
  }
  return worst;
}

}  // namespace

TEST(PackInt4, SymmetricIsBitIdentical) {
  ThreadPool pool(2);
  for (int64_t group : {32, 64, 128, 256})
    for (bool shuffle : {false, true}) {
      SCOPED_TRACE(std::to_string(group) + (shuffle ? " act-order" : ""));
      const Int4Groups w = random_groups(40, 256, group, true, shuffle, uint32_t(group));
      const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
      EXPECT_FALSE(q.scheme.zero_points);
      EXPECT_EQ(q.scheme.group, group >= 64 ? 64 : 32);
      EXPECT_EQ(q.act_index.defined(), shuffle && group < 256);  // one group: any order is its order
      int64_t exact = 0;
      EXPECT_EQ(compare(w, q, &exact), 0.0);
      EXPECT_EQ(exact, w.N);
    }
}

TEST(PackInt4, ZeroPointsWithinTheF16MinBound) {
  ThreadPool pool(2);
  for (bool shuffle : {false, true}) {
    const Int4Groups w = random_groups(48, 256, 128, false, shuffle, 11);
    const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
    EXPECT_TRUE(q.scheme.zero_points);
    int64_t exact = 0;
    const double worst = compare(w, q, &exact);
    // min = f16(-scale * zero): |error| <= 2^-11 * scale * zero <= scale / 128 (zero <= 16).
    EXPECT_LE(worst, 1.0 / 128);
    EXPECT_GT(worst, 0.0);  // random scales need more than 11 bits for scale * zero
  }
  // Zeros that are powers of two (and 0) need no rounding: exact.
  Int4Groups w = random_groups(16, 64, 32, false, false, 12);
  for (int64_t i = 0; i < w.N * w.G; ++i) w.zeros.data<uint8_t>()[i] = uint8_t(1 << (i % 5)) % 17;
  int64_t exact = 0;
  EXPECT_EQ(compare(w, cpu::pack_int4_groups(w, pool), &exact), 0.0);
  EXPECT_EQ(exact, w.N);
}

TEST(PackInt4, CutGroupsArePaddedAndExact) {
  ThreadPool pool(2);
  // A tensor-parallel half of an act-order weight: each group keeps a random subset of its columns.
  const Int4Groups full = random_groups(32, 256, 128, true, true, 21);
  Int4Groups half = full;
  half.K = 128;
  half.q = Tensor::empty({full.N, 128}, DType::U8);
  half.g_idx = Tensor::empty({128}, DType::I32);
  for (int64_t n = 0; n < full.N; ++n)
    for (int64_t k = 0; k < 128; ++k) half.q.data<uint8_t>()[n * 128 + k] = full.q.data<uint8_t>()[n * 256 + 128 + k];
  for (int64_t k = 0; k < 128; ++k) half.g_idx.data<int32_t>()[k] = full.g_idx.data<int32_t>()[128 + k];
  const QuantizedWeight q = cpu::pack_int4_groups(half, pool);
  ASSERT_TRUE(q.act_index.defined());
  EXPECT_EQ(q.in_features, 128);
  EXPECT_GT(q.K, 128);  // the two cut groups are padded to whole 32-column groups
  EXPECT_EQ(q.K % 32, 0);
  int64_t exact = 0;
  EXPECT_EQ(compare(half, q, &exact), 0.0);
  EXPECT_EQ(exact, half.N);
}

TEST(PackInt4, GatherEqualsPermutedInput) {
  ThreadPool pool(2);
  for (bool sym : {true, false}) {
    const Int4Groups w = random_groups(24, 256, 64, sym, true, sym ? 31 : 32);
    // The same weight with its columns sorted by group (no gather needed) ...
    std::vector<int32_t> perm(256);
    std::iota(perm.begin(), perm.end(), 0);
    const int32_t* g = w.g_idx.data<int32_t>();
    std::stable_sort(perm.begin(), perm.end(), [&](int32_t a, int32_t b) { return g[a] < g[b]; });
    Int4Groups sorted = w;
    sorted.q = Tensor::empty({w.N, w.K}, DType::U8);
    sorted.g_idx = Tensor::empty({w.K}, DType::I32);
    for (int64_t k = 0; k < w.K; ++k) {
      sorted.g_idx.data<int32_t>()[k] = g[perm[size_t(k)]];
      for (int64_t n = 0; n < w.N; ++n)
        sorted.q.data<uint8_t>()[n * w.K + k] = w.q.data<uint8_t>()[n * w.K + perm[size_t(k)]];
    }
    const QuantizedWeight qa = cpu::pack_int4_groups(w, pool), qb = cpu::pack_int4_groups(sorted, pool);
    ASSERT_TRUE(qa.act_index.defined());
    ASSERT_FALSE(qb.act_index.defined());
    // ... multiplied with the input permuted the same way gives bitwise the same outputs.
    const int64_t M = 5;
    std::mt19937 rng(3);
    std::normal_distribution<float> nd;
    Tensor x = Tensor::empty({M, w.K}, DType::F32), xp = Tensor::empty({M, w.K}, DType::F32);
    for (int64_t i = 0; i < M * w.K; ++i) x.data<float>()[i] = nd(rng);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < w.K; ++k) xp.data<float>()[m * w.K + k] = x.data<float>()[m * w.K + perm[size_t(k)]];
    Tensor ya = Tensor::empty({M, w.N}, DType::F32), yb = Tensor::empty({M, w.N}, DType::F32);
    cpu::quantized_linear(x, qa, nullptr, ya, pool);
    cpu::quantized_linear(xp, qb, nullptr, yb, pool);
    for (int64_t i = 0; i < M * w.N; ++i) ASSERT_EQ(ya.data<float>()[i], yb.data<float>()[i]) << sym << " " << i;
  }
}

// Without its superblock factors, the same weight (f32 products only).
Int4Groups without_superblocks(Int4Groups w) {
  w.d = w.dmin = w.sub_scale = w.sub_min = Tensor();
  return w;
}

// Q4_K-shaped groups: with the superblock factors int4-g32-zp-k (Q4_K's own 4.625 bits), without
// them int4-g32-zp-f32. Every weight bit-identical in both, including a tensor-parallel column
// half; the kernels (each ISA ctest runs) give the same bits on both layouts and equal the f64
// product of the int8 activations with those weights. f16 parameters could not pass: most
// scales need > 11 bits.
TEST(PackInt4, ScaleAndMinAreExactInF32) {
  ThreadPool pool(2);
  const Int4Groups w = random_q4k_groups(37, 512, 51);
  int64_t f16_exact = 0;
  for (int64_t i = 0; i < w.N * w.G; ++i)
    f16_exact += f16_to_f32(f32_to_f16(w.scales.data<float>()[i])) == w.scales.data<float>()[i];
  EXPECT_LT(f16_exact, w.N * w.G / 4);  // the test would not tell f16 from f32 otherwise
  const QuantizedWeight q = cpu::pack_int4_groups(without_superblocks(w), pool);
  EXPECT_EQ(q.scheme.str(), "int4-g32-zp-f32");
  EXPECT_FALSE(q.act_index.defined());
  EXPECT_EQ(q.block_bytes, 16 * 384);  // per 32 columns: 256 code bytes + 16 f32 scales + 16 f32 mins
  int64_t exact = 0;
  EXPECT_EQ(compare(w, q, &exact), 0.0);
  EXPECT_EQ(exact, w.N);
  const QuantizedWeight qk = cpu::pack_int4_groups(w, pool);
  EXPECT_EQ(qk.scheme.str(), "int4-g32-zp-k");
  EXPECT_EQ(qk.block_bytes, 2 * 2368);  // per 256 columns: 8 x 256 code bytes + 256 factor bytes + 64 d / dmin
  EXPECT_EQ(compare(w, qk, &exact), 0.0);
  EXPECT_EQ(exact, w.N);
  // A factor that does not give its scale is malformed input, not a silent change.
  Int4Groups bad = w;
  bad.sub_scale = Tensor::empty({w.N, w.G}, DType::U8);
  std::memcpy(bad.sub_scale.raw(), w.sub_scale.raw(), w.sub_scale.nbytes());
  bad.sub_scale.data<uint8_t>()[5] ^= 1;
  EXPECT_THROW(cpu::pack_int4_groups(bad, pool), Error);
  // A tensor-parallel column half, cut at a superblock boundary (as loader/int4_slice.h's
  // int4_columns cuts: the groups keep their indices into the full weight).
  Int4Groups half = w;
  half.K = 256;
  half.q = Tensor::empty({w.N, 256}, DType::U8);
  half.g_idx = Tensor::empty({256}, DType::I32);
  for (int64_t n = 0; n < w.N; ++n)
    for (int64_t k = 0; k < 256; ++k) half.q.data<uint8_t>()[n * 256 + k] = w.q.data<uint8_t>()[n * 512 + 256 + k];
  for (int64_t k = 0; k < 256; ++k) half.g_idx.data<int32_t>()[k] = int32_t(8 + k / 32);
  const QuantizedWeight qh = cpu::pack_int4_groups(half, pool);
  EXPECT_EQ(qh.scheme.str(), "int4-g32-zp-k");  // cut at a superblock boundary
  EXPECT_EQ(compare(half, qh, &exact), 0.0);
  EXPECT_EQ(exact, half.N);
  Int4Groups cut = half;  // cut inside a superblock: the f32 products
  for (int64_t k = 0; k < 256; ++k) cut.g_idx.data<int32_t>()[k] = int32_t(4 + k / 32);
  const QuantizedWeight qc = cpu::pack_int4_groups(cut, pool);
  EXPECT_EQ(qc.scheme.str(), "int4-g32-zp-f32");
  EXPECT_EQ(compare(cut, qc, &exact), 0.0);
  EXPECT_EQ(exact, cut.N);

  // The kernels: M rows of activations against the f64 reference.
  for (int64_t M : {1, 2, 3, 5, 8, 11}) {
    std::mt19937 rng{uint32_t(M)};
    std::normal_distribution<float> nd;
    Tensor x = Tensor::empty({M, w.K}, DType::F32), y = Tensor::empty({M, w.N}, DType::F32);
    Tensor yk = Tensor::empty({M, w.N}, DType::F32);
    for (int64_t i = 0; i < M * w.K; ++i) x.data<float>()[i] = nd(rng);
    cpu::quantized_linear(x, q, nullptr, y, pool);
    cpu::quantized_linear(x, qk, nullptr, yk, pool);
    for (int64_t i = 0; i < M * w.N; ++i) ASSERT_EQ(y.data<float>()[i], yk.data<float>()[i]) << "M=" << M << " " << i;
    const std::vector<double> ref = test::int8_activation_reference(
        x.data<float>(), M, w.K, w.N, [&](int64_t n, int64_t k) { return reference(w, n, k); });
    EXPECT_LT(test::max_rel_err(ref, y.data<float>()), 2e-5) << "M=" << M;
  }
}

TEST(PackInt4, RejectsMalformedInput) {
  ThreadPool pool(1);
  Int4Groups w = random_groups(16, 64, 32, true, false, 41);
  w.g_idx.data<int32_t>()[5] = 2;
  EXPECT_THROW(cpu::pack_int4_groups(w, pool), Error);
  Int4Groups big = random_groups(16, 64, 32, false, false, 42);
  big.scales.data<float>()[0] = 60000.f;
  big.zeros.data<uint8_t>()[0] = 15;
  EXPECT_THROW(cpu::pack_int4_groups(big, pool), Error);
  // f32 parameters are taken as they are: a non-finite one (a corrupt file that
  // --allow-nonfinite-weights loads anyway) is the weight's value, not an error here.
  Int4Groups inf = without_superblocks(random_q4k_groups(16, 256, 43));
  inf.mins.data<float>()[3] = INFINITY;
  int64_t exact = 0;
  EXPECT_EQ(compare(inf, cpu::pack_int4_groups(inf, pool), &exact), 0.0);
  EXPECT_EQ(exact, inf.N);  // the Inf group dequantizes to Inf, as the reference
  Int4Groups wrong = random_q4k_groups(16, 256, 44);
  wrong.mins = Tensor::empty({16, 4}, DType::F32);
  EXPECT_THROW(cpu::pack_int4_groups(wrong, pool), Error);
}
