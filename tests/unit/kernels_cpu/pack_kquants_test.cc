// ggml's Q6_K, Q5_K, Q3_K, Q2_K and Q5_1 onto the int6-g16-k, int5-g32-zp-k, int3-g16-k,
// int2-g16-zp-k, int5-g32-zp and int5-g32-zp-f32 kernels (kernels/cpu/pack_kquants.h, pack_int4.h),
// IQ4_NL / IQ4_XS onto int4-g32-nl (kernels/cpu/pack_int4.h):
// every weight bit-identical to the file's value, the kernels (under each ISA cap ctest runs)
// against the f64 product with the int8 activations and against their one summation order,
// tensor-parallel cuts, and malformed input.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "kernel_test_util.h"
#include "kernels/cpu/pack_int4.h"
#include "kernels/cpu/qgemm.h"
#include "kernels/cpu/quantize.h"
#include "kernels/cpu/quant_act.h"

using namespace nanovllm;

namespace {

// A tensor's own copy (to corrupt one field of a weight).
Tensor copy(const Tensor& t) {
  Tensor c = Tensor::empty(t.shape(), t.dtype());
  std::memcpy(c.raw(), t.raw(), t.nbytes());
  return c;
}

// Q6_K-shaped groups: codes 0..63, per 16 columns an i8 sub-scale, per 256 an f16 d; every
// zero 32 and scale = d x sc (the f32 product, as loader/gguf_quants.h unpacks a file).
// bits 3: Q3_K-shaped, codes 0..7, zero 4, sub-scales in [-32, 31].
Int4Groups random_q6k_groups(int64_t N, int64_t K, uint32_t seed, int bits = 6) {
  std::mt19937 rng(seed);
  Int4Groups w;
  w.bits = bits;
  w.N = N, w.K = K, w.G = K / 16;
  const int64_t S = K / 256;
  w.q = Tensor::empty({N, K}, DType::U8);
  w.scales = Tensor::empty({N, w.G}, DType::F32);
  w.zeros = Tensor::empty({N, w.G}, DType::U8);
  std::memset(w.zeros.raw(), bits == 3 ? 4 : 32, w.zeros.nbytes());
  w.d = Tensor::empty({N, S}, DType::F32);
  w.sub_scale = Tensor::empty({N, w.G}, DType::U8);
  w.g_idx = Tensor::empty({K}, DType::I32);
  for (int64_t k = 0; k < K; ++k) w.g_idx.data<int32_t>()[k] = int32_t(k / 16);
  std::uniform_int_distribution<int> code(0, (1 << bits) - 1), sc(bits == 3 ? -32 : -128, bits == 3 ? 31 : 127);
  std::uniform_real_distribution<float> du(1e-4f, 3e-3f);
  for (int64_t i = 0; i < N * K; ++i) w.q.data<uint8_t>()[i] = uint8_t(code(rng));
  for (int64_t i = 0; i < N * S; ++i) w.d.data<float>()[i] = f16_to_f32(f32_to_f16(du(rng)));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < w.G; ++g) {
      const int8_t s = int8_t(sc(rng));
      w.sub_scale.data<uint8_t>()[n * w.G + g] = uint8_t(s);
      w.scales.data<float>()[n * w.G + g] = w.d.data<float>()[n * S + g / 16] * float(s);
    }
  return w;
}

// Q5_K-shaped groups: codes 0..31, per 32 columns 6-bit sc and m, per 256 f16 d and dmin;
// scale = d x sc, min = -(dmin x m) (as loader/gguf_quants.h unpacks a file).
// IQ4-shaped groups: codes 0..15 into kIq4nlTable, an f32 scale per 32 (IQ4_XS's d x (ls - 32):
// an f16 value times an integer in [-32, 31], 17 significant bits, not an f16 value).
Int4Groups random_iq4_groups(int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 rng{seed};
  Int4Groups w;
  w.iq4_table = true;
  w.N = N, w.K = K, w.G = K / 32;
  w.q = Tensor::empty({N, K}, DType::U8);
  w.scales = Tensor::empty({N, w.G}, DType::F32);
  w.g_idx = Tensor::empty({K}, DType::I32);
  for (int64_t i = 0; i < N * K; ++i) w.q.data<uint8_t>()[i] = uint8_t(rng() % 16);
  for (int64_t i = 0; i < N * w.G; ++i)
    w.scales.data<float>()[i] = f16_to_f32(f32_to_f16(std::ldexp(float(rng() % 1024) / 1024.f + 1.f, -12))) *
                                float(int(rng() % 64) - 32);
  for (int64_t k = 0; k < K; ++k) w.g_idx.data<int32_t>()[k] = int32_t(k / 32);
  return w;
}

// Groups whose scale and min come from superblock factors: Q5_K-shaped (bits 5: codes 0..31, per
// 32 columns a 6-bit sc and m) or Q2_K-shaped (bits 2: codes 0..3, per 16 columns a 4-bit sc and
// m); per 256 an f16 d and dmin; scale = d x sc, min = -(dmin x m) (as loader/gguf_quants.h
// unpacks a file).
Int4Groups random_k_min_groups(int bits, int64_t N, int64_t K, uint32_t seed) {
  const int gs = bits == 2 ? 16 : 32, gps = 256 / gs;
  std::mt19937 rng(seed);
  Int4Groups w;
  w.bits = bits;
  w.N = N, w.K = K, w.G = K / gs;
  const int64_t S = K / 256;
  w.q = Tensor::empty({N, K}, DType::U8);
  w.scales = Tensor::empty({N, w.G}, DType::F32);
  w.mins = Tensor::empty({N, w.G}, DType::F32);
  w.d = Tensor::empty({N, S}, DType::F32);
  w.dmin = Tensor::empty({N, S}, DType::F32);
  w.sub_scale = Tensor::empty({N, w.G}, DType::U8);
  w.sub_min = Tensor::empty({N, w.G}, DType::U8);
  w.g_idx = Tensor::empty({K}, DType::I32);
  for (int64_t k = 0; k < K; ++k) w.g_idx.data<int32_t>()[k] = int32_t(k / gs);
  std::uniform_int_distribution<int> code(0, (1 << bits) - 1), sub(0, bits == 2 ? 15 : 63);
  std::uniform_real_distribution<float> du(1e-4f, 3e-3f);
  for (int64_t i = 0; i < N * K; ++i) w.q.data<uint8_t>()[i] = uint8_t(code(rng));
  for (int64_t i = 0; i < N * S; ++i) {
    w.d.data<float>()[i] = f16_to_f32(f32_to_f16(du(rng)));
    w.dmin.data<float>()[i] = f16_to_f32(f32_to_f16(du(rng)));
  }
  for (int64_t n = 0; n < N; ++n)
    for (int64_t g = 0; g < w.G; ++g) {
      const int64_t i = n * w.G + g;
      w.sub_scale.data<uint8_t>()[i] = uint8_t(sub(rng));
      w.sub_min.data<uint8_t>()[i] = uint8_t(sub(rng));
      w.scales.data<float>()[i] = w.d.data<float>()[n * S + g / gps] * float(w.sub_scale.data<uint8_t>()[i]);
      w.mins.data<float>()[i] = -(w.dmin.data<float>()[n * S + g / gps] * float(w.sub_min.data<uint8_t>()[i]));
    }
  return w;
}
Int4Groups random_q5k_groups(int64_t N, int64_t K, uint32_t seed) { return random_k_min_groups(5, N, K, seed); }
Int4Groups random_q2k_groups(int64_t N, int64_t K, uint32_t seed) { return random_k_min_groups(2, N, K, seed); }
Int4Groups random_q3k_groups(int64_t N, int64_t K, uint32_t seed) { return random_q6k_groups(N, K, seed, 3); }

// Q5_1-shaped groups: codes 0..31, per 32 columns an f16 scale (d) and min (m), no superblocks.
Int4Groups random_q51_groups(int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 rng(seed);
  Int4Groups w;
  w.bits = 5;
  w.N = N, w.K = K, w.G = K / 32;
  w.q = Tensor::empty({N, K}, DType::U8);
  w.scales = Tensor::empty({N, w.G}, DType::F32);
  w.mins = Tensor::empty({N, w.G}, DType::F32);
  w.g_idx = Tensor::empty({K}, DType::I32);
  for (int64_t k = 0; k < K; ++k) w.g_idx.data<int32_t>()[k] = int32_t(k / 32);
  std::uniform_int_distribution<int> code(0, 31);
  std::uniform_real_distribution<float> du(1e-4f, 3e-3f), mu(-0.05f, 0.f);
  for (int64_t i = 0; i < N * K; ++i) w.q.data<uint8_t>()[i] = uint8_t(code(rng));
  for (int64_t i = 0; i < N * w.G; ++i) {
    w.scales.data<float>()[i] = f16_to_f32(f32_to_f16(du(rng)));
    w.mins.data<float>()[i] = f16_to_f32(f32_to_f16(mu(rng)));
  }
  return w;
}

// The file's value of weight [n, k]: Q6_K scale x (q - 32), Q3_K scale x (q - 4), Q5_K / Q2_K scale x q + min
// (one rounding).
float reference(const Int4Groups& w, int64_t n, int64_t k) {
  const int64_t g = n * w.G + w.g_idx.data<int32_t>()[k];
  const int q = w.q.data<uint8_t>()[n * w.K + k];
  if (w.iq4_table) return w.scales.data<float>()[g] * float(kIq4nlTable[q]);
  if (w.bits == 5 || w.bits == 2) return w.scales.data<float>()[g] * float(q) + w.mins.data<float>()[g];
  return w.scales.data<float>()[g] * float(q - (w.bits == 3 ? 4 : 32));
}

// Rows whose every dequantized weight equals the reference bit for bit.
int64_t exact_rows(const Int4Groups& w, const QuantizedWeight& q) {
  int64_t exact = 0;
  std::vector<float> row(size_t(q.x_features()));
  for (int64_t n = 0; n < w.N; ++n) {
    cpu::dequantize_row_inputs(q, n, row.data());
    bool same = true;
    for (int64_t k = 0; k < w.K; ++k) same = same && row[size_t(k)] == reference(w, n, k);
    exact += same;
  }
  return exact;
}

// Columns [begin, begin + count) as loader/int4_slice.h's int4_columns cuts them: the groups
// keep their indices into the full weight.
Int4Groups columns(const Int4Groups& w, int64_t begin, int64_t count) {
  Int4Groups r = w;
  r.K = count;
  r.q = Tensor::empty({w.N, count}, DType::U8);
  r.g_idx = Tensor::empty({count}, DType::I32);
  for (int64_t n = 0; n < w.N; ++n)
    std::memcpy(r.q.data<uint8_t>() + n * count, w.q.data<uint8_t>() + n * w.K + begin, size_t(count));
  std::memcpy(r.g_idx.raw(), w.g_idx.data<int32_t>() + begin, size_t(count) * 4);
  return r;
}

// The kernels against the f64 product of the int8 activations with the file's weights.
void expect_kernels_match_reference(const Int4Groups& w, ThreadPool& pool) {
  const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
  for (int64_t M : {1, 2, 3, 4, 5, 8, 11}) {
    std::mt19937 rng{uint32_t(M)};
    std::normal_distribution<float> nd;
    Tensor x = Tensor::empty({M, w.K}, DType::F32), y = Tensor::empty({M, w.N}, DType::F32);
    for (int64_t i = 0; i < M * w.K; ++i) x.data<float>()[i] = nd(rng);
    test::poison(y);
    cpu::quantized_linear(x, q, nullptr, y, pool);
    const std::vector<double> ref = test::int8_activation_reference(
        x.data<float>(), M, w.K, w.N, [&](int64_t n, int64_t k) { return reference(w, n, k); });
    EXPECT_LT(test::max_rel_err(ref, y.data<float>()), 2e-5) << "M=" << M << " K=" << w.K;
  }
}

// x [9, K] (seed; `extremes`: one row reaching x8 = -127 / 127) through q at once and row by
// row: both must equal expected(x8, n) x sx bit for bit, expected being row n's f32 accumulator
// recomputed in the kernels' one summation order (under each ISA cap ctest runs).
void expect_one_order(const Int4Groups& w, const QuantizedWeight& q, uint32_t seed, bool extremes,
                      const std::function<float(const std::vector<int32_t>& x8, int64_t n)>& expected) {
  ThreadPool pool(1);
  const int64_t M = 9, K = w.K;
  std::mt19937 rng{seed};
  std::normal_distribution<float> nd;
  Tensor x = Tensor::empty({M, K}, DType::F32), y = Tensor::empty({M, w.N}, DType::F32);
  for (int64_t i = 0; i < M * K; ++i) x.data<float>()[i] = nd(rng);
  if (extremes) x.data<float>()[5] = 40.f, x.data<float>()[6] = -40.f;
  cpu::quantized_linear(x, q, nullptr, y, pool);
  for (int64_t m = 0; m < M; ++m) {
    std::vector<uint8_t> x8(static_cast<size_t>(K));
    const float sx = cpu::quantize_row_s8(x.data<float>() + m * K, K, x8.data(), false);
    std::vector<int32_t> xs(x8.size());
    for (size_t k = 0; k < x8.size(); ++k) xs[k] = int8_t(x8[k]);
    Tensor x1 = Tensor::empty({1, K}, DType::F32), y1 = Tensor::empty({1, w.N}, DType::F32);
    std::memcpy(x1.raw(), x.data<float>() + m * K, size_t(K) * 4);
    cpu::quantized_linear(x1, q, nullptr, y1, pool);
    for (int64_t n = 0; n < w.N; ++n) {
      const float acc = expected(xs, n);
      ASSERT_EQ(y.data<float>()[m * w.N + n], acc * sx) << "m " << m << " n " << n;
      ASSERT_EQ(y1.data<float>()[n], acc * sx) << "alone: m " << m << " n " << n;
    }
  }
}

// A superblock form (Q5_K's, Q2_K's) packed whole (q) and cut as tensor-parallel column slices
// (at a superblock, inside one, inside a group): every weight the file's, the same layout for
// every cut, the kernels against the f64 reference.
void expect_cuts_exact(const Int4Groups& w, const QuantizedWeight& q, ThreadPool& pool) {
  EXPECT_EQ(exact_rows(w, q), w.N);
  const Int4Groups half = columns(w, 256, 512), cut = columns(w, 128, 384), odd = columns(w, 200, 300);
  EXPECT_FALSE(cpu::pack_int4_groups(half, pool).act_index.defined());
  for (const Int4Groups* c : {&half, &cut, &odd}) {
    const QuantizedWeight qc = cpu::pack_int4_groups(*c, pool);
    EXPECT_EQ(qc.scheme.str(), q.scheme.str());
    EXPECT_EQ(qc.x_features(), c->K);
    EXPECT_EQ(exact_rows(*c, qc), c->N);
  }
  for (const Int4Groups* c : {&w, &half, &cut, &odd}) expect_kernels_match_reference(*c, pool);
}

// Row n's f32 accumulator for Q5_K / Q2_K groups (random_k_min_groups) in the kernels' one order:
// per group the integer dot times d x sc, then minus the group's activation sum times dmin x m,
// each an f32 fma in group order.
float k_min_order(const Int4Groups& w, const std::vector<int32_t>& x8, int64_t n) {
  const int64_t K = w.K, S = K / 256, gs = K / w.G, gps = 256 / gs;
  float acc = 0.f;
  for (int64_t g = 0; g < w.G; ++g) {
    int32_t dot = 0, sum = 0;
    for (int64_t k = gs * g; k < gs * g + gs; ++k)
      dot += x8[size_t(k)] * w.q.data<uint8_t>()[n * K + k], sum += x8[size_t(k)];
    const float sc = w.d.data<float>()[n * S + g / gps] * float(w.sub_scale.data<uint8_t>()[n * w.G + g]);
    const float mn = w.dmin.data<float>()[n * S + g / gps] * float(w.sub_min.data<uint8_t>()[n * w.G + g]);
    acc = std::fma(float(dot), sc, acc);
    acc = std::fma(float(sum), -mn, acc);
  }
  return acc;
}

}  // namespace

TEST(PackInt6, Q6KIsExact) {
  ThreadPool pool(2);
  const Int4Groups w = random_q6k_groups(37, 768, 61);
  const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
  EXPECT_EQ(q.scheme.str(), "int6-g16-k");
  EXPECT_FALSE(q.act_index.defined());
  // 3 superblocks: a 128-byte d table (96 bytes padded to 64s), then 3 x (3072 code + 256 sc).
  EXPECT_EQ(q.block_bytes, 128 + 3 * 3328);
  EXPECT_EQ(exact_rows(w, q), w.N);
  // Tensor-parallel column slices: cut at a superblock (the int6 layout from the source's second
  // superblock on, no gather) and inside one, and inside a group (whole source superblocks, the
  // other rank's columns as zero columns of a gather): every weight exact.
  const Int4Groups half = columns(w, 256, 512);
  const QuantizedWeight qh = cpu::pack_int4_groups(half, pool);
  EXPECT_EQ(qh.scheme.str(), "int6-g16-k");
  EXPECT_FALSE(qh.act_index.defined());
  EXPECT_EQ(exact_rows(half, qh), half.N);
  const Int4Groups cut = columns(w, 128, 384), odd = columns(w, 200, 300);
  for (const Int4Groups* c : {&cut, &odd}) {
    const QuantizedWeight qc = cpu::pack_int4_groups(*c, pool);
    EXPECT_EQ(qc.scheme.str(), "int6-g16-k");
    ASSERT_TRUE(qc.act_index.defined());
    EXPECT_EQ(qc.x_features(), c->K);
    EXPECT_EQ(qc.K, 512);  // source superblocks 0-1 whole
    EXPECT_EQ(exact_rows(*c, qc), c->N);
  }

  // The kernels against the f64 reference (whole and cut weights).
  for (const Int4Groups* c : {&w, &half, &cut, &odd}) expect_kernels_match_reference(*c, pool);
}

// Every ISA's kernel sums in one order: per group of 16, the integer dot minus 32 x the group's
// activation sum, times d x sc, fused into one f32 accumulator in group order, times the row's
// activation scale. Recomputed here in that order, the outputs must be the same bits (under each
// ISA cap ctest runs), for M rows at once as for one.
TEST(PackInt6, KernelsSumInOneOrder) {
  ThreadPool pool(1);
  const Int4Groups w = random_q6k_groups(21, 512, 62);
  const int64_t K = w.K, S = K / 256;
  expect_one_order(w, cpu::pack_int4_groups(w, pool), 7, false, [&](const std::vector<int32_t>& x8, int64_t n) {
    float acc = 0.f;
    for (int64_t g = 0; g < K / 16; ++g) {
      int32_t dot = 0, sum = 0;
      for (int64_t k = 16 * g; k < 16 * g + 16; ++k)
        dot += x8[size_t(k)] * w.q.data<uint8_t>()[n * K + k], sum += x8[size_t(k)];
      const float sc = w.d.data<float>()[n * S + g / 16] * float(int8_t(w.sub_scale.data<uint8_t>()[n * w.G + g]));
      acc = std::fma(float(dot - 32 * sum), sc, acc);
    }
    return acc;
  });
}

TEST(PackInt6, RejectsMalformedInput) {
  ThreadPool pool(1);
  const Int4Groups w = random_q6k_groups(16, 256, 63);
  Int4Groups code = w;
  code.q = Tensor::empty({w.N, w.K}, DType::U8);
  std::memcpy(code.q.raw(), w.q.raw(), w.q.nbytes());
  code.q.data<uint8_t>()[9] = 64;
  EXPECT_THROW(cpu::pack_int4_groups(code, pool), Error);
  Int4Groups factor = w;  // a sub-scale that does not give its scale
  factor.sub_scale = Tensor::empty({w.N, w.G}, DType::U8);
  std::memcpy(factor.sub_scale.raw(), w.sub_scale.raw(), w.sub_scale.nbytes());
  factor.sub_scale.data<uint8_t>()[3] ^= 1;
  EXPECT_THROW(cpu::pack_int4_groups(factor, pool), Error);
  Int4Groups zero = w;
  zero.zeros = Tensor::empty({w.N, w.G}, DType::U8);
  std::memset(zero.zeros.raw(), 32, zero.zeros.nbytes());
  zero.zeros.data<uint8_t>()[0] = 31;
  EXPECT_THROW(cpu::pack_int4_groups(zero, pool), Error);
  Int4Groups shape = w;
  shape.d = Tensor::empty({w.N, 2}, DType::F32);
  EXPECT_THROW(cpu::pack_int4_groups(shape, pool), Error);
  Int4Groups nod = w;
  nod.d = Tensor();
  EXPECT_THROW(cpu::pack_int4_groups(nod, pool), Error);
  // A NaN d (a corrupt file under --allow-nonfinite-weights) is the weight's value, not an error.
  Int4Groups nan = w;
  nan.d = Tensor::empty({w.N, 1}, DType::F32);
  std::memcpy(nan.d.raw(), w.d.raw(), w.d.nbytes());
  nan.scales = Tensor::empty({w.N, w.G}, DType::F32);
  std::memcpy(nan.scales.raw(), w.scales.raw(), w.scales.nbytes());
  nan.d.data<float>()[2] = NAN;
  for (int64_t g = 0; g < w.G; ++g) nan.scales.data<float>()[2 * w.G + g] = NAN;
  EXPECT_NO_THROW(cpu::pack_int4_groups(nan, pool));
  // quantize_weight cannot make it: it is Q6_K's form, not a fit.
  EXPECT_THROW(cpu::quantize_weight(Tensor::zeros({16, 256}, DType::F32), parse_quant_scheme("int6-g16-k"), pool),
               Error);
}


TEST(PackInt5, Q5KIsExact) {
  ThreadPool pool(2);
  const Int4Groups w = random_q5k_groups(37, 768, 71);
  const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
  EXPECT_EQ(q.scheme.str(), "int5-g32-zp-k");
  EXPECT_FALSE(q.act_index.defined());
  EXPECT_EQ(q.block_bytes, 3 * 2880);  // per 256 columns: 8 x (256 nibble + 64 bit) bytes + 320 factor bytes
  expect_cuts_exact(w, q, pool);
}

// As PackInt6.KernelsSumInOneOrder: per group of 32 the integer dot times d x sc, then minus the
// group's activation sum times dmin x m, each an f32 fma in group order; times the row's scale.
TEST(PackInt5, KernelsSumInOneOrder) {
  ThreadPool pool(1);
  const Int4Groups w = random_q5k_groups(21, 512, 72);
  expect_one_order(w, cpu::pack_int4_groups(w, pool), 8, false,
                   [&](const std::vector<int32_t>& x8, int64_t n) { return k_min_order(w, x8, n); });
}

TEST(PackInt5, RejectsMalformedInput) {
  ThreadPool pool(1);
  const Int4Groups w = random_q5k_groups(16, 256, 73);
  Int4Groups code = w;
  code.q = copy(w.q);
  code.q.data<uint8_t>()[9] = 32;
  EXPECT_THROW(cpu::pack_int4_groups(code, pool), Error);
  Int4Groups m = w;
  m.sub_min = copy(w.sub_min);
  m.sub_min.data<uint8_t>()[3] ^= 1;
  EXPECT_THROW(cpu::pack_int4_groups(m, pool), Error);
  Int4Groups nomins = w;
  nomins.dmin = Tensor();
  EXPECT_THROW(cpu::pack_int4_groups(nomins, pool), Error);
  EXPECT_THROW(cpu::quantize_weight(Tensor::zeros({16, 256}, DType::F32), parse_quant_scheme("int5-g32-zp-k"), pool),
               Error);
}

TEST(PackInt2, Q2KIsExact) {
  ThreadPool pool(2);
  const Int4Groups w = random_q2k_groups(37, 768, 81);
  const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
  EXPECT_EQ(q.scheme.str(), "int2-g16-zp-k");
  EXPECT_FALSE(q.act_index.defined());
  EXPECT_EQ(q.block_bytes, 3 * 1344);  // per 256 columns: 16 lines of codes + 256 sc|m + 64 d/dmin bytes
  expect_cuts_exact(w, q, pool);
}

// As PackInt5.KernelsSumInOneOrder in groups of 16: the integer dot times d x sc, then minus the
// group's activation sum times dmin x m, each an f32 fma in group order; times the row's scale.
TEST(PackInt2, KernelsSumInOneOrder) {
  ThreadPool pool(1);
  const Int4Groups w = random_q2k_groups(21, 512, 82);
  // (extremes: a row reaching x8 = -127 / 127, pmaddubsw's worst case on AVX2)
  expect_one_order(w, cpu::pack_int4_groups(w, pool), 10, true,
                   [&](const std::vector<int32_t>& x8, int64_t n) { return k_min_order(w, x8, n); });
}

TEST(PackInt2, RejectsMalformedInput) {
  ThreadPool pool(1);
  const Int4Groups w = random_q2k_groups(16, 256, 83);
  Int4Groups code = w;
  code.q = copy(w.q);
  code.q.data<uint8_t>()[9] = 4;  // not a 2-bit code
  EXPECT_THROW(cpu::pack_int4_groups(code, pool), Error);
  Int4Groups m = w;
  m.sub_min = copy(w.sub_min);
  m.sub_min.data<uint8_t>()[3] ^= 1;  // no longer gives its min
  EXPECT_THROW(cpu::pack_int4_groups(m, pool), Error);
  Int4Groups wide = w;
  wide.sub_scale = copy(w.sub_scale);
  wide.scales = copy(w.scales);
  wide.sub_scale.data<uint8_t>()[5] = 16;  // not 4-bit, though it gives its scale
  wide.scales.data<float>()[5] = w.d.data<float>()[0] * 16.f;
  EXPECT_THROW(cpu::pack_int4_groups(wide, pool), Error);
  Int4Groups nomins = w;
  nomins.dmin = Tensor();
  EXPECT_THROW(cpu::pack_int4_groups(nomins, pool), Error);
  EXPECT_THROW(cpu::quantize_weight(Tensor::zeros({16, 256}, DType::F32), parse_quant_scheme("int2-g16-zp-k"), pool),
               Error);
}

TEST(PackInt3, Q3KIsExact) {
  ThreadPool pool(2);
  const Int4Groups w = random_q3k_groups(37, 768, 101);
  const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
  EXPECT_EQ(q.scheme.str(), "int3-g16-k");
  EXPECT_FALSE(q.act_index.defined());
  // 3 superblocks: a 128-byte d table (96 bytes padded to 64s), then 3 x (8 records of 192 code
  // bytes + 256 sc bytes): 3.5625 bits per weight with the d table's padding.
  EXPECT_EQ(q.block_bytes, 128 + 3 * 1792);
  // Cuts at a superblock (no gather), inside one and inside a group (whole source superblocks, a
  // gather with zero columns): every weight the file's, the kernels against the f64 reference.
  const Int4Groups cut = columns(w, 128, 384);
  const QuantizedWeight qc = cpu::pack_int4_groups(cut, pool);
  ASSERT_TRUE(qc.act_index.defined());
  EXPECT_EQ(qc.K, 512);  // source superblocks 0-1 whole
  expect_cuts_exact(w, q, pool);
}

// Every ISA's int3 kernel sums in one order: per superblock, the integer sum over its 16 groups of
// (dot - 4 x the group's activation sum) x sc, exact; then times d, one f32 fma per superblock in
// order; times the row's activation scale. AVX512-VNNI has its own int3 kernel (the native run on
// such a CPU); AVX-VNNI runs the AVX2 one (qgemm.cc): ctest's caps cover scalar, AVX2 and
// AVX-VNNI (the last two on the AVX2 kernel).
TEST(PackInt3, KernelsSumInOneOrder) {
  ThreadPool pool(1);
  // Some sub-scales at the ends of their range too, and one row of x8 at -127 / 127 (extremes).
  // The bounds themselves: PackInt3.SumsAtTheirBounds.
  Int4Groups w = random_q3k_groups(21, 512, 102);
  for (int64_t i = 0; i < 21 * w.G; i += 3) {
    const int8_t sc = i % 2 ? -32 : 31;
    w.sub_scale.data<uint8_t>()[i] = uint8_t(sc);
    w.scales.data<float>()[i] = w.d.data<float>()[(i / w.G) * 2 + (i % w.G) / 16] * float(sc);
  }
  const int64_t K = w.K, S = K / 256;
  expect_one_order(w, cpu::pack_int4_groups(w, pool), 12, true, [&](const std::vector<int32_t>& x8, int64_t n) {
    float acc = 0.f;
    for (int64_t s = 0; s < S; ++s) {
      int32_t isum = 0;
      for (int64_t g = 16 * s; g < 16 * s + 16; ++g) {
        int32_t dot = 0, sum = 0;
        for (int64_t k = 16 * g; k < 16 * g + 16; ++k)
          dot += x8[size_t(k)] * w.q.data<uint8_t>()[n * K + k], sum += x8[size_t(k)];
        isum += (dot - 4 * sum) * int8_t(w.sub_scale.data<uint8_t>()[n * w.G + g]);
      }
      acc = std::fma(float(isum), w.d.data<float>()[n * S + s], acc);
    }
    return acc;
  });
}

// The kernels' integer bounds reached (int3k_rows, qgemm_avx2_body.h and qgemm_avx512.cc; the
// latter's vpdpwssd reads a group's sum from a lane's low 16 bits): every code 0 (value -4)
// or 7 (value 3), every sub-scale -32, every x8 127 (or -127). Codes 0: a group's low 16-bit half
// is -4 x 16 x 127 = -8,128 and the superblock sum 16 x 8,128 x 32 = 4,161,536; codes 7: the
// halves are 7,112 - 8,128 and 7,112. Every output must equal that exact integer times d per
// superblock, times the row's scale.
TEST(PackInt3, SumsAtTheirBounds) {
  ThreadPool pool(1);
  for (int code : {0, 7})
    for (float xv : {1.f, -1.f}) {
      Int4Groups w = random_q3k_groups(16, 512, 105);
      std::memset(w.q.raw(), code, w.q.nbytes());
      for (int64_t i = 0; i < 16 * w.G; ++i) {
        w.sub_scale.data<uint8_t>()[i] = uint8_t(int8_t(-32));
        w.scales.data<float>()[i] = w.d.data<float>()[(i / w.G) * 2 + (i % w.G) / 16] * -32.f;
      }
      const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
      for (int64_t M : {1, 5}) {
        Tensor x = Tensor::empty({M, w.K}, DType::F32), y = Tensor::empty({M, w.N}, DType::F32);
        for (int64_t i = 0; i < M * w.K; ++i) x.data<float>()[i] = xv;
        cpu::quantized_linear(x, q, nullptr, y, pool);
        std::vector<uint8_t> x8(size_t(w.K));
        const float sx = cpu::quantize_row_s8(x.data<float>(), w.K, x8.data(), false);
        ASSERT_EQ(int8_t(x8[0]), xv > 0 ? 127 : -127);
        for (int64_t n = 0; n < w.N; ++n) {
          float acc = 0.f;
          for (int64_t s = 0; s < 2; ++s)
            acc = std::fma(float(256 * (code - 4) * -32 * int8_t(x8[0])), w.d.data<float>()[n * 2 + s], acc);
          for (int64_t m = 0; m < M; ++m)
            ASSERT_EQ(y.data<float>()[m * w.N + n], acc * sx) << "code " << code << " x " << xv << " n " << n;
        }
      }
    }
}

// Each code bit lands where the layout says (kernels/quantized.h: int3_code): a weight whose
// codes are all 0 but one, moved over every position of a superblock, dequantizes to that one.
TEST(PackInt3, EveryCodeBitHasItsPlace) {
  ThreadPool pool(1);
  Int4Groups w = random_q3k_groups(16, 256, 103);
  std::vector<float> row(256);
  for (int64_t r : {0, 5, 15})
    for (int64_t k = 0; k < 256; ++k)
      for (int c : {1, 2, 4, 7}) {
        std::memset(w.q.raw(), 4, w.q.nbytes());  // value 0 everywhere
        w.q.data<uint8_t>()[r * 256 + k] = uint8_t(c);
        const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
        for (int64_t n = 0; n < 16; ++n) {
          cpu::dequantize_row_inputs(q, n, row.data());
          for (int64_t j = 0; j < 256; ++j)
            ASSERT_EQ(row[size_t(j)], reference(w, n, j)) << "row " << r << " k " << k << " code " << c;
        }
      }
}

TEST(PackInt3, RejectsMalformedInput) {
  ThreadPool pool(1);
  const Int4Groups w = random_q3k_groups(16, 256, 104);
  Int4Groups code = w;
  code.q = copy(w.q);
  code.q.data<uint8_t>()[9] = 8;  // not a 3-bit code
  EXPECT_THROW(cpu::pack_int4_groups(code, pool), Error);
  Int4Groups factor = w;  // a sub-scale that does not give its scale
  factor.sub_scale = copy(w.sub_scale);
  factor.sub_scale.data<uint8_t>()[3] ^= 1;
  EXPECT_THROW(cpu::pack_int4_groups(factor, pool), Error);
  Int4Groups wide = w;  // a sub-scale past 6 bits, though it gives its scale
  wide.sub_scale = copy(w.sub_scale);
  wide.scales = copy(w.scales);
  wide.sub_scale.data<uint8_t>()[5] = uint8_t(int8_t(-33));
  wide.scales.data<float>()[5] = w.d.data<float>()[0] * -33.f;
  EXPECT_THROW(cpu::pack_int4_groups(wide, pool), Error);
  Int4Groups zero = w;  // Q6_K's zero on 3-bit codes
  zero.zeros = copy(w.zeros);
  zero.zeros.data<uint8_t>()[0] = 32;
  EXPECT_THROW(cpu::pack_int4_groups(zero, pool), Error);
  Int4Groups nod = w;
  nod.d = Tensor();
  EXPECT_THROW(cpu::pack_int4_groups(nod, pool), Error);
  EXPECT_THROW(cpu::quantize_weight(Tensor::zeros({16, 256}, DType::F32), parse_quant_scheme("int3-g16-k"), pool),
               Error);
}

// Q5_1-shaped groups whose every scale is nudged off the f16 grid (1 + 2^-13 times an f16
// value needs more than f16's 11 significant bits): they take the f32 form.
Int4Groups off_f16(Int4Groups w) {
  w.scales = copy(w.scales);
  for (int64_t i = 0; i < w.N * w.G; ++i) w.scales.data<float>()[i] *= 1.f + 0x1p-13f;
  return w;
}

TEST(PackInt5F32, Q51IsExact) {
  ThreadPool pool(2);
  const Int4Groups w = random_q51_groups(37, 800, 91);  // 25 groups: not whole superblocks
  const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
  EXPECT_EQ(q.scheme.str(), "int5-g32-zp");  // the file's own size: 6 bits per weight
  EXPECT_FALSE(q.act_index.defined());
  EXPECT_EQ(q.block_bytes, 25 * 384);  // per 32 columns: 4 nibble lines, 1 bit line, 16 f16 scales and mins
  EXPECT_EQ(exact_rows(w, q), w.N);
  // One parameter off the f16 grid (a scale, or a min): the whole weight takes the f32 form.
  for (bool min : {false, true}) {
    Int4Groups one = w;
    Tensor& t = min ? one.mins : one.scales;
    t = copy(t);
    t.data<float>()[7 * one.G + 3] *= 1.f + 0x1p-13f;
    const QuantizedWeight q1 = cpu::pack_int4_groups(one, pool);
    EXPECT_EQ(q1.scheme.str(), "int5-g32-zp-f32") << (min ? "min" : "scale");
    EXPECT_EQ(q1.block_bytes, 25 * 448);  // 16 f32 scales and mins
    EXPECT_EQ(exact_rows(one, q1), one.N);
    expect_kernels_match_reference(one, pool);
  }
  // Tensor-parallel column slices: at a group, inside one.
  const Int4Groups half = columns(w, 384, 416), odd = columns(w, 100, 300);
  const QuantizedWeight qh = cpu::pack_int4_groups(half, pool), qo = cpu::pack_int4_groups(odd, pool);
  EXPECT_FALSE(qh.act_index.defined());
  ASSERT_TRUE(qo.act_index.defined());
  EXPECT_EQ(qo.x_features(), 300);
  EXPECT_EQ(exact_rows(half, qh), half.N);
  EXPECT_EQ(exact_rows(odd, qo), odd.N);
  // Q5_K groups without their superblock factors (a fusion with Q5_1 parts drops them): the
  // exact f32 products as the f32 parameters.
  Int4Groups k5 = random_q5k_groups(21, 512, 92);
  k5.d = k5.dmin = k5.sub_scale = k5.sub_min = Tensor();
  const Int4Groups& k = k5;
  const QuantizedWeight qk = cpu::pack_int4_groups(k, pool);
  EXPECT_EQ(qk.scheme.str(), "int5-g32-zp-f32");
  EXPECT_EQ(exact_rows(k, qk), k.N);
  for (const Int4Groups* c : {&w, &half, &odd, &k}) expect_kernels_match_reference(*c, pool);
}

// Per group of 32: the integer dot times the scale, then plus the group's activation sum times
// the min, each an f32 fma in group order; times the row's activation scale. Both forms (f16
// parameters widen exactly to the same f32 values).
TEST(PackInt5F32, KernelsSumInOneOrder) {
  ThreadPool pool(1);
  const Int4Groups f16 = random_q51_groups(21, 512, 93), f32 = off_f16(f16);
  for (const Int4Groups* c : {&f16, &f32}) {
    const Int4Groups& w = *c;
    const int64_t K = w.K;
    const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
    EXPECT_EQ(q.scheme.str(), c == &f16 ? "int5-g32-zp" : "int5-g32-zp-f32");
    // (extremes: a row reaching x8 = -127 / 127, pmaddubsw's worst case on AVX2)
    expect_one_order(w, q, 11, true, [&](const std::vector<int32_t>& x8, int64_t n) {
      float acc = 0.f;
      for (int64_t g = 0; g < K / 32; ++g) {
        int32_t dot = 0, sum = 0;
        for (int64_t k = 32 * g; k < 32 * g + 32; ++k)
          dot += x8[size_t(k)] * w.q.data<uint8_t>()[n * K + k], sum += x8[size_t(k)];
        acc = std::fma(float(dot), w.scales.data<float>()[n * w.G + g], acc);
        acc = std::fma(float(sum), w.mins.data<float>()[n * w.G + g], acc);
      }
      return acc;
    });
  }
}

TEST(PackInt5F32, RejectsMalformedInput) {
  ThreadPool pool(1);
  Int4Groups code = random_q51_groups(16, 256, 94);
  code.q.data<uint8_t>()[9] = 32;  // not a 5-bit code
  EXPECT_THROW(cpu::pack_int4_groups(code, pool), Error);
  Int4Groups nomins = random_q51_groups(16, 256, 95);
  nomins.mins = Tensor();  // 5-bit codes without a min: neither Q5_1 nor Q5_K
  EXPECT_THROW(cpu::pack_int4_groups(nomins, pool), Error);
  for (const char* s : {"int5-g32-zp", "int5-g32-zp-f32"})
    EXPECT_THROW(cpu::quantize_weight(Tensor::zeros({16, 256}, DType::F32), parse_quant_scheme(s), pool), Error) << s;
}

TEST(PackIq4, TableCodesAreExact) {
  ThreadPool pool(2);
  const Int4Groups w = random_iq4_groups(37, 768, 71);
  const QuantizedWeight q = cpu::pack_int4_groups(w, pool);
  EXPECT_EQ(q.scheme.str(), "int4-g32-nl");
  EXPECT_FALSE(q.act_index.defined());
  EXPECT_EQ(q.block_bytes, 24 * 320);  // 24 groups of [4 nibble lines][16 f32 scales]
  EXPECT_EQ(exact_rows(w, q), w.N);
  // Tensor-parallel column slices at and inside a group (a gather with zero columns).
  const Int4Groups half = columns(w, 384, 384), odd = columns(w, 100, 300);
  const QuantizedWeight qh = cpu::pack_int4_groups(half, pool), qo = cpu::pack_int4_groups(odd, pool);
  EXPECT_FALSE(qh.act_index.defined());
  ASSERT_TRUE(qo.act_index.defined());
  EXPECT_EQ(qo.x_features(), 300);
  EXPECT_EQ(exact_rows(half, qh), half.N);
  EXPECT_EQ(exact_rows(odd, qo), odd.N);
  for (const Int4Groups* c : {&w, &half, &odd}) expect_kernels_match_reference(*c, pool);
  // Made only by a repack.
  EXPECT_THROW(cpu::quantize_weight(test::rand_tensor({16, 64}, DType::F32), parse_quant_scheme("int4-g32-nl"), pool),
               Error);
}

// One summation order on every ISA: per group of 32 the integer sum of table value x x8, times
// the group's f32 scale, fused into one f32 accumulator in group order, times the row's
// activation scale. The same bits for M rows at once as for one.
TEST(PackIq4, KernelsSumInOneOrder) {
  ThreadPool pool(1);
  const Int4Groups w = random_iq4_groups(21, 512, 72);
  const int64_t K = w.K;
  // (extremes: a row reaching x8 = -127 / 127, pmaddubsw's worst case on AVX2)
  expect_one_order(w, cpu::pack_int4_groups(w, pool), 9, true, [&](const std::vector<int32_t>& x8, int64_t n) {
    float acc = 0.f;
    for (int64_t g = 0; g < K / 32; ++g) {
      int32_t dot = 0;
      for (int64_t k = 32 * g; k < 32 * g + 32; ++k) dot += x8[size_t(k)] * kIq4nlTable[w.q.data<uint8_t>()[n * K + k]];
      acc = std::fma(float(dot), w.scales.data<float>()[n * w.G + g], acc);
    }
    return acc;
  });
}

TEST(PackIq4, RejectsMalformedInput) {
  ThreadPool pool(1);
  Int4Groups w = random_iq4_groups(16, 256, 73);
  w.q.data<uint8_t>()[17] = 16;  // not a 4-bit code
  EXPECT_THROW(cpu::pack_int4_groups(w, pool), Error);
  Int4Groups m = random_iq4_groups(16, 256, 74);
  m.mins = Tensor::zeros({16, 8}, DType::F32);  // table codes take no mins
  EXPECT_THROW(cpu::pack_int4_groups(m, pool), Error);
}
