// GPU tests of the non-attention ops against plain CPU loops.
#include <numeric>

#include "gpu_test_util.h"

namespace nanovllm::gputest {
namespace {

constexpr double kTol = 1e-2;

void check_linear(int64_t T, int64_t N, int64_t K, DType wdt, DType odt, bool with_bias) {
  auto* be = backend();
  auto x = random_tensor({T, K}, DType::BF16);
  auto w = random_tensor({N, K}, wdt, -0.2f, 0.2f);
  auto b = random_tensor({N}, odt == DType::F32 ? DType::F32 : DType::BF16);
  Tensor out = poisoned({T, N}, odt);
  be->linear(x.dev, w.dev, with_bias ? &b.dev : nullptr, out);
  std::vector<double> want(T * N);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t n = 0; n < N; ++n) {
      double s = with_bias ? b.host[n] : 0.0;
      for (int64_t k = 0; k < K; ++k) s += double(x.host[t * K + k]) * w.host[n * K + k];
      want[t * N + n] = s;
    }
  EXPECT_LE(rel_err(download(out), want), kTol)
      << "T=" << T << " N=" << N << " K=" << K << " w=" << dtype_name(wdt)
      << " out=" << dtype_name(odt) << " bias=" << with_bias;
}

TEST(GpuOps, LinearBf16) {
  NV_NEED_GPU();
  for (int64_t T : {1, 7, 64, 300})
    for (DType odt : {DType::BF16, DType::F32})
      for (bool bias : {false, true}) check_linear(T, 384, 256, DType::BF16, odt, bias);
  check_linear(5, 1000, 1024, DType::BF16, DType::F32, false);  // odd N (lm-head-like)
}

TEST(GpuOps, LinearOtherWeightDtypes) {
  NV_NEED_GPU();
  check_linear(9, 128, 64, DType::F32, DType::BF16, true);
  check_linear(9, 128, 64, DType::F16, DType::BF16, false);
  check_linear(9, 128, 64, DType::F32, DType::F32, false);
}

TEST(GpuOps, LinearRejectsBadShapes) {
  NV_NEED_GPU();
  auto x = random_tensor({4, 64}, DType::BF16);
  auto w = random_tensor({32, 48}, DType::BF16);
  Tensor out = poisoned({4, 32}, DType::BF16);
  EXPECT_THROW(backend()->linear(x.dev, w.dev, nullptr, out), Error);
}

void rms_ref(const float* x, const std::vector<float>& w, int64_t H, float eps, double* out) {
  double ss = 0;
  for (int64_t i = 0; i < H; ++i) ss += double(x[i]) * x[i];
  const double r = 1.0 / std::sqrt(ss / H + eps);
  for (int64_t i = 0; i < H; ++i) out[i] = x[i] * r * w[i];
}

TEST(GpuOps, RmsNorm) {
  NV_NEED_GPU();
  for (int64_t H : {1024, 100, 4096}) {
    const int64_t T = 5;
    auto x = random_tensor({T, H}, DType::BF16, -2.f, 2.f);
    auto w = random_tensor({H}, DType::BF16, 0.5f, 1.5f);
    Tensor out = poisoned({T, H}, DType::BF16);
    backend()->rms_norm(x.dev, w.dev, 1e-6f, out);
    std::vector<double> want(T * H);
    for (int64_t t = 0; t < T; ++t) rms_ref(&x.host[t * H], w.host, H, 1e-6f, &want[t * H]);
    EXPECT_LE(rel_err(download(out), want), kTol) << "H=" << H;
  }
}

TEST(GpuOps, AddRmsNorm) {
  NV_NEED_GPU();
  for (int64_t H : {1024, 72}) {
    const int64_t T = 6;
    auto x = random_tensor({T, H}, DType::BF16);
    auto r = random_tensor({T, H}, DType::BF16);
    auto w = random_tensor({H}, DType::F32, 0.5f, 1.5f);
    backend()->add_rms_norm(x.dev, r.dev, w.dev, 1e-5f);
    std::vector<float> sum(T * H);
    std::vector<double> want_r(T * H), want_x(T * H);
    for (int64_t i = 0; i < T * H; ++i) {
      sum[i] = float(bf16r(double(x.host[i]) + r.host[i]));
      want_r[i] = sum[i];
    }
    for (int64_t t = 0; t < T; ++t) rms_ref(&sum[t * H], w.host, H, 1e-5f, &want_x[t * H]);
    EXPECT_LE(rel_err(download(r.dev), want_r), kTol) << "residual, H=" << H;
    EXPECT_LE(rel_err(download(x.dev), want_x), kTol) << "x, H=" << H;
  }
}

TEST(GpuOps, SiluAndMul) {
  NV_NEED_GPU();
  for (int64_t I : {160, 13}) {
    const int64_t T = 3;
    auto gu = random_tensor({T, 2 * I}, DType::BF16, -4.f, 4.f);
    Tensor out = poisoned({T, I}, DType::BF16);
    backend()->silu_and_mul(gu.dev, out);
    std::vector<double> want(T * I);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < I; ++i) {
        const double g = gu.host[t * 2 * I + i], u = gu.host[t * 2 * I + I + i];
        want[t * I + i] = g / (1 + std::exp(-g)) * u;
      }
    EXPECT_LE(rel_err(download(out), want), kTol) << "I=" << I;
  }
}

TEST(GpuOps, QkNormRope) {
  NV_NEED_GPU();
  for (int D : {64, 128})
    for (bool norm : {true, false}) {
      const int Hq = 4, Hkv = 2, T = 6, max_pos = 4096;
      const int W = (Hq + 2 * Hkv) * D;
      auto qkv = random_tensor({T, W}, DType::BF16, -2.f, 2.f);
      auto qn = random_tensor({D}, DType::BF16, 0.5f, 1.5f);
      auto kn = random_tensor({D}, DType::BF16, 0.5f, 1.5f);
      std::vector<float> cs(size_t(max_pos) * D);
      for (int p = 0; p < max_pos; ++p)
        for (int j = 0; j < D / 2; ++j) {
          const double f = p / std::pow(1e6, 2.0 * j / D);
          cs[size_t(p) * D + j] = float(std::cos(f));
          cs[size_t(p) * D + D / 2 + j] = float(std::sin(f));
        }
      Tensor cos_sin = from_host_f32(cs, {max_pos, D}, DType::F32);
      std::vector<int32_t> pos(T);
      for (auto& p : pos) p = int32_t(rng()() % max_pos);
      Tensor positions = from_host_i32(pos, {T});
      AttentionParams ap{Hq, Hkv, D, 1.f};
      backend()->qk_norm_rope(qkv.dev, positions, norm ? &qn.dev : nullptr,
                              norm ? &kn.dev : nullptr, 1e-6f, cos_sin, ap);
      std::vector<double> want(qkv.host.begin(), qkv.host.end());
      for (int t = 0; t < T; ++t)
        for (int h = 0; h < Hq + Hkv; ++h) {
          double* x = &want[size_t(t) * W + size_t(h) * D];
          if (norm) {
            double ss = 0;
            for (int j = 0; j < D; ++j) ss += x[j] * x[j];
            const double r = 1 / std::sqrt(ss / D + 1e-6);
            const auto& w = h < Hq ? qn.host : kn.host;
            for (int j = 0; j < D; ++j) x[j] = x[j] * r * w[j];
          }
          const float* c = &cs[size_t(pos[t]) * D];
          for (int j = 0; j < D / 2; ++j) {
            const double a = x[j], b = x[j + D / 2];
            x[j] = a * c[j] - b * c[D / 2 + j];
            x[j + D / 2] = b * c[j] + a * c[D / 2 + j];
          }
        }
      // v columns must be untouched (they are part of want unchanged).
      EXPECT_LE(rel_err(download(qkv.dev), want), kTol) << "D=" << D << " norm=" << norm;
    }
}

TEST(GpuOps, StoreKv) {
  NV_NEED_GPU();
  const int Hq = 4, Hkv = 2, D = 128, T = 10, num_slots = 64;
  const int W = (Hq + 2 * Hkv) * D, KV = Hkv * D;
  auto qkv = random_tensor({T, W}, DType::BF16);
  std::vector<int32_t> perm(num_slots);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng());
  std::vector<int32_t> slots(perm.begin(), perm.begin() + T);
  slots[3] = -1;
  slots[7] = -1;
  Tensor sm = from_host_i32(slots, {T});
  std::vector<float> init(size_t(num_slots) * KV, 7.f);
  Tensor kc = from_host_f32(init, {num_slots, Hkv, D}, DType::BF16);
  Tensor vc = from_host_f32(init, {num_slots, Hkv, D}, DType::BF16);
  backend()->store_kv(qkv.dev, sm, kc, vc, AttentionParams{Hq, Hkv, D, 1.f});
  std::vector<double> wk(init.begin(), init.end()), wv(init.begin(), init.end());
  for (int t = 0; t < T; ++t) {
    if (slots[t] < 0) continue;
    for (int i = 0; i < KV; ++i) {
      wk[size_t(slots[t]) * KV + i] = qkv.host[size_t(t) * W + Hq * D + i];
      wv[size_t(slots[t]) * KV + i] = qkv.host[size_t(t) * W + (Hq + Hkv) * D + i];
    }
  }
  EXPECT_EQ(rel_err(download(kc), wk), 0.0);
  EXPECT_EQ(rel_err(download(vc), wv), 0.0);
}

TEST(GpuOps, EmbeddingGatherAdd) {
  NV_NEED_GPU();
  const int64_t V = 50, H = 256, T = 7;
  auto table = random_tensor({V, H}, DType::BF16);
  std::vector<int32_t> ids = {0, 49, 3, 60, 10, 99, 12};  // vocab_start 10: 60 ok, 0..9 -> 0
  Tensor out = poisoned({T, H}, DType::BF16);
  backend()->embedding(from_host_i32(ids, {T}), table.dev, 10, out);
  std::vector<double> want(T * H, 0.0);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t r = ids[t] - 10;
    if (r >= 0 && r < V)
      for (int64_t i = 0; i < H; ++i) want[t * H + i] = table.host[r * H + i];
  }
  EXPECT_EQ(rel_err(download(out), want), 0.0);

  std::vector<int32_t> idx = {6, 0, 2};
  Tensor g = poisoned({3, H}, DType::BF16);
  backend()->gather_rows(out, from_host_i32(idx, {3}), g);
  std::vector<double> wg;
  for (int32_t i : idx) wg.insert(wg.end(), want.begin() + i * H, want.begin() + (i + 1) * H);
  EXPECT_EQ(rel_err(download(g), wg), 0.0);

  auto a = random_tensor({T, H}, DType::BF16);
  auto b = random_tensor({T, H}, DType::BF16);
  backend()->add_inplace(a.dev, b.dev);
  std::vector<double> ws(T * H);
  for (int64_t i = 0; i < T * H; ++i) ws[i] = double(a.host[i]) + b.host[i];
  EXPECT_LE(rel_err(download(a.dev), ws), kTol);
}

TEST(GpuOps, BadDeviceIsAClearError) {
  NV_NEED_GPU();
  EXPECT_THROW(make_cuda_backend(4096), Error);
  Tensor host = Tensor::zeros({4}, DType::BF16);
  Tensor out = poisoned({4}, DType::BF16);
  EXPECT_THROW(backend()->add_inplace(out, host), Error);  // host tensor passed to a CUDA op
}

}  // namespace
}  // namespace nanovllm::gputest
